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

/// A subtitle cue: times, text, and the name of who speaks it, when speakers were found.
struct Cue<'a> {
    start: f64,
    end: f64,
    text: &'a str,
    speaker: Option<String>,
}

/// The shown name of the speaker labelled `id` (the label itself when the transcript does
/// not list it).
fn speaker_name(transcript: &Transcript, id: Option<&String>) -> Option<String> {
    id.map(|id| transcript.speaker_name(id).unwrap_or_else(|| id.clone()))
}

/// Renders a transcript with one subtitle cue per word (SubRip and WebVTT; the words' times
/// must have been asked for). Other formats, and segments without word times, render as
/// [`render`] does.
pub fn render_words(transcript: &Transcript, format: ExportFormat) -> String {
    if !matches!(format, ExportFormat::Srt | ExportFormat::Vtt) {
        return render(transcript, format);
    }
    let cues: Vec<Cue> = transcript
        .segments
        .iter()
        .flat_map(|s| {
            if s.words.is_empty() {
                vec![Cue {
                    start: s.start,
                    end: s.end,
                    text: s.text.trim(),
                    speaker: speaker_name(transcript, s.speaker.as_ref()),
                }]
            } else {
                s.words
                    .iter()
                    .map(|w| Cue {
                        start: w.start,
                        end: w.end,
                        text: w.text.as_str(),
                        speaker: speaker_name(
                            transcript,
                            w.speaker.as_ref().or(s.speaker.as_ref()),
                        ),
                    })
                    .collect()
            }
        })
        .collect();
    cue_list(&cues, format)
}

/// Text as WebVTT cue text: `&`, `<` and `>` escaped (so no `-->` either), and no line
/// breaks (a blank line would end the cue).
fn vtt_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Text on one line: SubRip ends a cue at a blank line.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r'])
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn cue_list(cues: &[Cue], format: ExportFormat) -> String {
    let mut out = String::new();
    if format == ExportFormat::Vtt {
        out.push_str("WEBVTT\n\n");
    }
    for (i, cue) in cues.iter().enumerate() {
        let text = cue.text.trim();
        if format == ExportFormat::Srt {
            let text = match &cue.speaker {
                Some(name) => format!("{}: {text}", one_line(name)),
                None => text.to_string(),
            };
            out.push_str(&format!(
                "{}\n{} --> {}\n{}\n\n",
                i + 1,
                timestamp(cue.start, ','),
                timestamp(cue.end, ','),
                text
            ));
        } else {
            // A voice span: `<v Name>text`; the annotation is escaped as cue text is.
            let text = match &cue.speaker {
                Some(name) => format!("<v {}>{}", vtt_text(name.trim()), vtt_text(text)),
                None => vtt_text(text),
            };
            out.push_str(&format!(
                "{} --> {}\n{}\n\n",
                timestamp(cue.start, '.'),
                timestamp(cue.end, '.'),
                text
            ));
        }
    }
    out
}

/// Renders a transcript in a format. With speakers, every format names them: plain text as
/// `Name: text` per segment with a blank line where the speaker changes, SubRip as a
/// `Name: ` prefix, WebVTT as voice spans (`<v Name>`), JSON with `speaker` on segments and
/// words and the `speakers` list.
pub fn render(transcript: &Transcript, format: ExportFormat) -> String {
    match format {
        ExportFormat::Txt => {
            let mut out = String::new();
            let mut previous: Option<&Option<String>> = None;
            for s in &transcript.segments {
                let text = s.text.trim();
                match speaker_name(transcript, s.speaker.as_ref()) {
                    Some(name) => {
                        if previous.is_some_and(|p| *p != s.speaker) {
                            out.push('\n');
                        }
                        out.push_str(&format!("{}: {text}\n", one_line(&name)));
                    }
                    None => {
                        if previous.is_some_and(Option::is_some) {
                            out.push('\n');
                        }
                        out.push_str(text);
                        out.push('\n');
                    }
                }
                previous = Some(&s.speaker);
            }
            if out.is_empty() {
                out.push('\n');
            }
            out
        }
        ExportFormat::Srt | ExportFormat::Vtt => {
            let cues: Vec<Cue> = transcript
                .segments
                .iter()
                .map(|s| Cue {
                    start: s.start,
                    end: s.end,
                    text: s.text.trim(),
                    speaker: speaker_name(transcript, s.speaker.as_ref()),
                })
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

    /// Two speakers, the first recognised as a profile: "Ann & <Bo>", the second unnamed;
    /// the second segment is the first speaker's too, the third the other's.
    fn with_speakers() -> Transcript {
        let word = |start: f64, end: f64, text: &str, speaker: &str| crate::asr::Word {
            start,
            end,
            text: text.into(),
            probability: 0.9,
            speaker: Some(speaker.into()),
        };
        let segment = |start: f64, end: f64, text: &str, speaker: &str| Segment {
            speaker: Some(speaker.into()),
            ..Segment::new(start, end, text)
        };
        let mut first = segment(0.0, 1.0, " Hi there.", "S1");
        first.words = vec![word(0.0, 0.4, "Hi", "S1"), word(0.4, 1.0, "there.", "S1")];
        Transcript {
            language: Some("en".into()),
            duration: 4.0,
            segments: vec![
                first,
                segment(1.2, 2.0, "Is it 3 > 2?", "S1"),
                segment(2.5, 4.0, " Yes.", "S2"),
            ],
            speakers: vec![
                crate::asr::Speaker {
                    name: Some("Ann & <Bo>".into()),
                    profile: Some("ann".into()),
                    similarity: Some(0.9),
                    seconds: 1.8,
                    ..crate::asr::Speaker::numbered(0)
                },
                crate::asr::Speaker {
                    seconds: 1.5,
                    ..crate::asr::Speaker::numbered(1)
                },
            ],
        }
    }

    #[test]
    fn txt_names_each_segment_and_starts_a_paragraph_at_a_change_of_speaker() {
        assert_eq!(
            render(&with_speakers(), ExportFormat::Txt),
            "Ann & <Bo>: Hi there.\nAnn & <Bo>: Is it 3 > 2?\n\nSpeaker 2: Yes.\n"
        );
    }

    #[test]
    fn srt_prefixes_each_cue_with_its_speaker() {
        let srt = render(&with_speakers(), ExportFormat::Srt);
        assert_eq!(
            srt,
            "1\n00:00:00,000 --> 00:00:01,000\nAnn & <Bo>: Hi there.\n\n\
             2\n00:00:01,200 --> 00:00:02,000\nAnn & <Bo>: Is it 3 > 2?\n\n\
             3\n00:00:02,500 --> 00:00:04,000\nSpeaker 2: Yes.\n\n"
        );
        // Word cues carry their word's speaker.
        let words = render_words(&with_speakers(), ExportFormat::Srt);
        assert!(
            words.starts_with("1\n00:00:00,000 --> 00:00:00,400\nAnn & <Bo>: Hi\n\n"),
            "{words}"
        );
    }

    #[test]
    fn vtt_uses_voice_spans_escaped_as_the_webvtt_spec_asks() {
        let vtt = render(&with_speakers(), ExportFormat::Vtt);
        assert_eq!(
            vtt,
            "WEBVTT\n\n\
             00:00:00.000 --> 00:00:01.000\n<v Ann &amp; &lt;Bo&gt;>Hi there.\n\n\
             00:00:01.200 --> 00:00:02.000\n<v Ann &amp; &lt;Bo&gt;>Is it 3 &gt; 2?\n\n\
             00:00:02.500 --> 00:00:04.000\n<v Speaker 2>Yes.\n\n"
        );
        let words = render_words(&with_speakers(), ExportFormat::Vtt);
        assert!(
            words.contains("00:00:00.400 --> 00:00:01.000\n<v Ann &amp; &lt;Bo&gt;>there.\n"),
            "{words}"
        );
        // Without speakers, cue text is escaped too and carries no voice span.
        let mut plain = with_speakers();
        plain.speakers.clear();
        for s in &mut plain.segments {
            s.speaker = None;
            s.words.clear();
        }
        let vtt = render(&plain, ExportFormat::Vtt);
        assert!(vtt.contains("\nIs it 3 &gt; 2?\n"), "{vtt}");
        assert!(!vtt.contains("<v"), "{vtt}");
    }

    #[test]
    fn json_carries_speakers_on_segments_and_words_and_the_speaker_list() {
        let json = render(&with_speakers(), ExportFormat::Json);
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["segments"][0]["speaker"], "S1");
        assert_eq!(value["segments"][0]["words"][1]["speaker"], "S1");
        assert_eq!(value["segments"][2]["speaker"], "S2");
        assert_eq!(value["speakers"][0]["id"], "S1");
        assert_eq!(value["speakers"][0]["name"], "Ann & <Bo>");
        assert_eq!(value["speakers"][0]["profile"], "ann");
        assert_eq!(value["speakers"][1]["id"], "S2");
        let back: Transcript = serde_json::from_str(&json).unwrap();
        assert_eq!(back, with_speakers());
    }
}
