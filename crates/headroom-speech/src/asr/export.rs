//! Transcript exports: plain text, SubRip, WebVTT and JSON.

use super::Transcript;
use serde::{Deserialize, Serialize};

/// An export format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ExportFormat {
    #[default]
    Txt,
    Srt,
    Vtt,
    Json,
}

impl std::str::FromStr for ExportFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "txt" | "text" => Ok(ExportFormat::Txt),
            "srt" => Ok(ExportFormat::Srt),
            "vtt" => Ok(ExportFormat::Vtt),
            "json" => Ok(ExportFormat::Json),
            other => Err(format!(
                "unknown format {other:?}: use txt, srt, vtt or json"
            )),
        }
    }
}

impl ExportFormat {
    pub fn extension(self) -> &'static str {
        match self {
            ExportFormat::Txt => "txt",
            ExportFormat::Srt => "srt",
            ExportFormat::Vtt => "vtt",
            ExportFormat::Json => "json",
        }
    }
}

/// `HH:MM:SS{sep}mmm`, rounding to the millisecond.
fn timestamp(seconds: f64, separator: char) -> String {
    let ms = (seconds.max(0.0) * 1000.0).round() as u64;
    format!(
        "{:02}:{:02}:{:02}{separator}{:03}",
        ms / 3_600_000,
        (ms / 60_000) % 60,
        (ms / 1000) % 60,
        ms % 1000
    )
}

/// Renders a transcript with one subtitle cue per word (SubRip and WebVTT; the words' times
/// must have been asked for). Other formats, and segments without word times, render as
/// [`render`] does.
pub fn render_words(transcript: &Transcript, format: ExportFormat) -> String {
    if !matches!(format, ExportFormat::Srt | ExportFormat::Vtt) {
        return render(transcript, format);
    }
    let cues: Vec<(f64, f64, &str)> = transcript
        .segments
        .iter()
        .flat_map(|s| {
            if s.words.is_empty() {
                vec![(s.start, s.end, s.text.trim())]
            } else {
                s.words
                    .iter()
                    .map(|w| (w.start, w.end, w.text.as_str()))
                    .collect()
            }
        })
        .collect();
    cue_list(&cues, format)
}

fn cue_list(cues: &[(f64, f64, &str)], format: ExportFormat) -> String {
    let mut out = String::new();
    if format == ExportFormat::Vtt {
        out.push_str("WEBVTT\n\n");
    }
    for (i, (start, end, text)) in cues.iter().enumerate() {
        if format == ExportFormat::Srt {
            out.push_str(&format!(
                "{}\n{} --> {}\n{}\n\n",
                i + 1,
                timestamp(*start, ','),
                timestamp(*end, ','),
                text.trim()
            ));
        } else {
            out.push_str(&format!(
                "{} --> {}\n{}\n\n",
                timestamp(*start, '.'),
                timestamp(*end, '.'),
                text.trim()
            ));
        }
    }
    out
}

/// Renders a transcript in a format.
pub fn render(transcript: &Transcript, format: ExportFormat) -> String {
    match format {
        ExportFormat::Txt => {
            let mut out = transcript
                .segments
                .iter()
                .map(|s| s.text.trim())
                .collect::<Vec<_>>()
                .join("\n");
            out.push('\n');
            out
        }
        ExportFormat::Srt | ExportFormat::Vtt => {
            let cues: Vec<(f64, f64, &str)> = transcript
                .segments
                .iter()
                .map(|s| (s.start, s.end, s.text.trim()))
                .collect();
            cue_list(&cues, format)
        }
        ExportFormat::Json => {
            let mut out =
                serde_json::to_string_pretty(transcript).expect("a transcript serializes");
            out.push('\n');
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asr::Segment;

    fn sample() -> Transcript {
        Transcript {
            speakers: Vec::new(),
            language: Some("en".into()),
            duration: 3725.5,
            segments: vec![
                Segment {
                    speaker: None,
                    start: 0.0,
                    end: 2.5,
                    text: " Hello there.".into(),
                    words: Vec::new(),
                },
                Segment {
                    speaker: None,
                    start: 3723.004,
                    end: 3725.5,
                    text: "Goodbye.".into(),
                    words: Vec::new(),
                },
            ],
        }
    }

    #[test]
    fn srt_numbers_cues_and_uses_commas() {
        let srt = render(&sample(), ExportFormat::Srt);
        assert_eq!(
            srt,
            "1\n00:00:00,000 --> 00:00:02,500\nHello there.\n\n2\n01:02:03,004 --> 01:02:05,500\nGoodbye.\n\n"
        );
    }

    #[test]
    fn vtt_has_its_header_and_dots() {
        let vtt = render(&sample(), ExportFormat::Vtt);
        assert!(vtt.starts_with("WEBVTT\n\n00:00:00.000 --> 00:00:02.500\nHello there.\n"));
    }

    #[test]
    fn word_cues_come_from_the_words_and_json_keeps_them() {
        let mut t = sample();
        t.segments[0].words = vec![
            crate::asr::Word {
                speaker: None,
                start: 0.1,
                end: 0.6,
                text: "Hello".into(),
                probability: 0.9,
            },
            crate::asr::Word {
                speaker: None,
                start: 0.6,
                end: 1.2,
                text: "there.".into(),
                probability: 0.8,
            },
        ];
        let srt = render_words(&t, ExportFormat::Srt);
        assert!(srt.starts_with(
            "1\n00:00:00,100 --> 00:00:00,600\nHello\n\n2\n00:00:00,600 --> 00:00:01,200\nthere.\n\n3\n01:02:03,004"
        ), "{srt}");
        let vtt = render_words(&t, ExportFormat::Vtt);
        assert!(
            vtt.starts_with("WEBVTT\n\n00:00:00.100 --> 00:00:00.600\nHello\n"),
            "{vtt}"
        );
        let json: Transcript = serde_json::from_str(&render(&t, ExportFormat::Json)).unwrap();
        assert_eq!(json.segments[0].words, t.segments[0].words);
        assert!(
            !render(&sample(), ExportFormat::Json).contains("words"),
            "no words, no key"
        );
    }

    #[test]
    fn txt_and_json() {
        assert_eq!(
            render(&sample(), ExportFormat::Txt),
            "Hello there.\nGoodbye.\n"
        );
        let json: Transcript =
            serde_json::from_str(&render(&sample(), ExportFormat::Json)).unwrap();
        assert_eq!(json, sample());
        assert_eq!("SRT".parse::<ExportFormat>(), Ok(ExportFormat::Srt));
        assert!("doc".parse::<ExportFormat>().is_err());
    }
}
