//! Greedy decoding with timestamps, window by window over long audio.
//!
//! Timestamp rules (as in Whisper's reference decoder): a window's output starts with a
//! timestamp; timestamps come in pairs that bracket text (except right before the end);
//! they never go backwards; and when the timestamps together are more likely than any single
//! text token, a timestamp is taken. Segments are read from the timestamp pairs, and the next
//! window starts at the last complete segment's end, so speech cut by a window edge is heard
//! again in full.

use super::mel::{self, MelFrontend, HOP, WINDOW_FRAMES};
use super::model::Whisper;
use crate::asr::{AsrError, Segment, WindowDone};
use tokenizers::Tokenizer;
use tokio_util::sync::CancellationToken;

/// Seconds per timestamp token.
const TIME_PRECISION: f64 = 0.02;
/// Log-mel frames per second of audio.
const FRAMES_PER_SECOND: f64 = (mel::SAMPLE_RATE / HOP) as f64;
/// Tokens sampled per window at most (half the text context, as Whisper does).
const MAX_WINDOW_TOKENS: usize = 224;
/// Latest allowed first timestamp in a window, in timestamp steps (1 s).
const MAX_INITIAL_TIMESTAMP: u32 = 50;

/// Special token ids, looked up from the tokenizer by name.
#[derive(Debug, Clone)]
pub struct SpecialTokens {
    pub eot: u32,
    pub sot: u32,
    pub transcribe: u32,
    pub no_timestamps: u32,
    pub timestamp_begin: u32,
    pub no_speech: Option<u32>,
    /// Language tokens (multilingual models), by code.
    pub languages: Vec<(String, u32)>,
}

impl SpecialTokens {
    /// `multilingual`: English-only vocabularies (51864 tokens) still name language tokens, so
    /// the model's vocabulary size decides, as in the reference implementation.
    pub fn from_tokenizer(tok: &Tokenizer, multilingual: bool) -> Result<SpecialTokens, String> {
        let id = |name: &str| {
            tok.token_to_id(name)
                .ok_or_else(|| format!("the tokenizer has no {name} token"))
        };
        let no_timestamps = id("<|notimestamps|>")?;
        let languages = LANGUAGE_CODES
            .iter()
            .filter(|_| multilingual)
            .filter_map(|code| {
                tok.token_to_id(&format!("<|{code}|>"))
                    .map(|id| (code.to_string(), id))
            })
            .collect();
        Ok(SpecialTokens {
            eot: id("<|endoftext|>")?,
            sot: id("<|startoftranscript|>")?,
            transcribe: id("<|transcribe|>")?,
            no_timestamps,
            timestamp_begin: no_timestamps + 1,
            no_speech: tok
                .token_to_id("<|nospeech|>")
                .or_else(|| tok.token_to_id("<|nocaptions|>")),
            languages,
        })
    }

    pub fn multilingual(&self) -> bool {
        !self.languages.is_empty()
    }
}

/// Whisper's language codes, in token order.
pub const LANGUAGE_CODES: &[&str] = &[
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it",
    "id", "hi", "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur",
    "hr", "bg", "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr", "az", "sl", "kn",
    "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw", "gl", "mr", "pa", "si",
    "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo",
    "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl", "mg", "as", "tt", "haw", "ln",
    "ha", "ba", "jw", "su", "yue",
];

/// Everything decoding needs besides the audio.
pub struct Decoding<'a> {
    pub model: &'a Whisper,
    pub tokenizer: &'a Tokenizer,
    pub special: &'a SpecialTokens,
    pub mel: &'a MelFrontend,
    pub suppress: &'a [u32],
    pub suppress_at_begin: &'a [u32],
}

/// What a transcription found.
pub struct Decoded {
    pub segments: Vec<Segment>,
    pub language: Option<String>,
}

fn log_softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = logits.iter().map(|l| (l - max).exp()).sum();
    let lse = max + sum.ln();
    logits.iter().map(|l| l - lse).collect()
}

fn logsumexp(values: &[f32]) -> f32 {
    let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        return max;
    }
    max + values.iter().map(|v| (v - max).exp()).sum::<f32>().ln()
}

impl Decoding<'_> {
    /// Transcribes 16 kHz mono samples from `from_secs` on. `language`: a code for
    /// multilingual models, or `None` to detect it from the first window. `window_done` gets
    /// each window's segments and the seconds done; `progress` the fraction of audio done.
    /// The log-mel is computed over the whole audio (Whisper scales it by its overall
    /// maximum), so a transcription resumed at a window boundary decodes the same windows as
    /// one that ran through.
    pub fn transcribe(
        &self,
        samples: &[f32],
        language: Option<&str>,
        from_secs: f64,
        window_done: &mut dyn FnMut(WindowDone<'_>),
        progress: &dyn Fn(f32),
        cancel: &CancellationToken,
    ) -> Result<Decoded, AsrError> {
        // Pad with 30 s of silence so the last window's tail has the log-mel of silence.
        let content_frames = samples.len() / HOP;
        let mut padded = samples.to_vec();
        padded.resize(samples.len() + mel::WINDOW_SAMPLES, 0.0);
        let (mel, total_frames) = self.mel.log_mel(&padded);
        let n_mels = self.mel.n_mels();
        let mut language_token = None;
        let mut language_code = None;
        if self.special.multilingual() {
            let code = match language {
                Some(code) => code.to_string(),
                None => {
                    let first = mel::window(&mel, n_mels, total_frames, 0, 0.0);
                    self.detect_language(&first)?
                }
            };
            let token = self
                .special
                .languages
                .iter()
                .find(|(c, _)| *c == code)
                .map(|(_, id)| *id)
                .ok_or_else(|| AsrError::UnknownLanguage(code.clone()))?;
            language_token = Some(token);
            language_code = Some(code);
        } else if let Some(code) = language.filter(|c| *c != "en") {
            return Err(AsrError::UnknownLanguage(format!(
                "{code} (this model is English-only)"
            )));
        }
        let mut prompt = vec![self.special.sot];
        if let Some(lang) = language_token {
            prompt.push(lang);
            prompt.push(self.special.transcribe);
        }
        let mut segments = Vec::new();
        let mut seek =
            ((from_secs.max(0.0) * FRAMES_PER_SECOND).round() as usize).min(content_frames);
        while seek < content_frames {
            if cancel.is_cancelled() {
                return Err(AsrError::Cancelled);
            }
            let window = mel::window(&mel, n_mels, total_frames, seek, 0.0);
            let window_frames = (content_frames - seek).min(WINDOW_FRAMES);
            let offset = seek as f64 * HOP as f64 / mel::SAMPLE_RATE as f64;
            let tokens = self.decode_window(&window, &prompt, window_frames, cancel)?;
            let (found, consumed) = self.segments_of(&tokens, offset, window_frames);
            seek += consumed.max(1);
            progress((seek.min(content_frames) as f32 / content_frames.max(1) as f32).min(1.0));
            window_done(WindowDone {
                segments: &found,
                done_secs: seek.min(content_frames) as f64 / FRAMES_PER_SECOND,
                duration_secs: content_frames as f64 / FRAMES_PER_SECOND,
            });
            segments.extend(found);
        }
        Ok(Decoded {
            segments,
            language: language_code.or_else(|| Some("en".into())),
        })
    }

    fn detect_language(&self, window: &[f32]) -> Result<String, AsrError> {
        let audio = self
            .model
            .encode(window, WINDOW_FRAMES)
            .map_err(AsrError::model)?;
        let mut state = self.model.decoder.start(&audio).map_err(AsrError::model)?;
        let logits = self
            .model
            .decoder
            .step(&mut state, &[self.special.sot])
            .map_err(AsrError::model)?;
        let logits = Whisper::logits_to_vec(&logits).map_err(AsrError::model)?;
        let (code, _) = self
            .special
            .languages
            .iter()
            .max_by(|a, b| logits[a.1 as usize].total_cmp(&logits[b.1 as usize]))
            .ok_or_else(|| AsrError::Model("no language tokens".into()))?;
        Ok(code.clone())
    }

    /// Greedy decoding of one window; returns the sampled tokens (without the prompt).
    fn decode_window(
        &self,
        window: &[f32],
        prompt: &[u32],
        window_frames: usize,
        cancel: &CancellationToken,
    ) -> Result<Vec<u32>, AsrError> {
        let started = std::time::Instant::now();
        let audio = self
            .model
            .encode(window, WINDOW_FRAMES)
            .map_err(AsrError::model)?;
        let encoded = started.elapsed();
        let mut state = self.model.decoder.start(&audio).map_err(AsrError::model)?;
        let mut feed: Vec<u32> = prompt.to_vec();
        let mut sampled: Vec<u32> = Vec::new();
        // The last timestamp that still lies inside this window's audio.
        let max_timestamp = self.special.timestamp_begin + (window_frames / 2) as u32;
        while sampled.len() < MAX_WINDOW_TOKENS {
            if cancel.is_cancelled() {
                return Err(AsrError::Cancelled);
            }
            let logits = self
                .model
                .decoder
                .step(&mut state, &feed)
                .map_err(AsrError::model)?;
            let mut logits = Whisper::logits_to_vec(&logits).map_err(AsrError::model)?;
            self.apply_rules(&mut logits, &sampled, max_timestamp);
            let next = logits
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map(|(i, _)| i as u32)
                .expect("non-empty vocabulary");
            if next == self.special.eot {
                break;
            }
            sampled.push(next);
            feed = vec![next];
        }
        tracing::debug!(
            encode_ms = encoded.as_millis() as u64,
            decode_ms = (started.elapsed() - encoded).as_millis() as u64,
            tokens = sampled.len(),
            "window decoded"
        );
        Ok(sampled)
    }

    fn apply_rules(&self, logits: &mut [f32], sampled: &[u32], max_timestamp: u32) {
        let sp = self.special;
        let ts = sp.timestamp_begin as usize;
        let vocab = logits.len();
        let ban = |logits: &mut [f32], range: std::ops::Range<usize>| {
            for l in &mut logits[range.start.min(vocab)..range.end.min(vocab)] {
                *l = f32::NEG_INFINITY;
            }
        };
        for &id in self.suppress {
            if (id as usize) < vocab {
                logits[id as usize] = f32::NEG_INFINITY;
            }
        }
        logits[sp.no_timestamps as usize] = f32::NEG_INFINITY;
        if let Some(ns) = sp.no_speech {
            logits[ns as usize] = f32::NEG_INFINITY;
        }
        // Timestamps past the end of this window's audio cannot be right.
        ban(logits, max_timestamp as usize + 1..vocab);
        if sampled.is_empty() {
            for &id in self.suppress_at_begin {
                if (id as usize) < vocab {
                    logits[id as usize] = f32::NEG_INFINITY;
                }
            }
            // Start with a timestamp, and not a late one.
            ban(logits, 0..ts);
            ban(logits, ts + MAX_INITIAL_TIMESTAMP as usize + 1..vocab);
            return;
        }
        let is_ts = |t: u32| t >= sp.timestamp_begin;
        let last_ts = is_ts(sampled[sampled.len() - 1]);
        let penultimate_ts = sampled.len() < 2 || is_ts(sampled[sampled.len() - 2]);
        if last_ts {
            if penultimate_ts {
                ban(logits, ts..vocab); // a pair just closed: text (or the end) comes next
            } else {
                ban(logits, 0..sp.eot as usize); // close the pair (or end)
            }
        }
        if let Some(&latest) = sampled.iter().rev().find(|&&t| is_ts(t)) {
            // Never backwards, and a new segment must have length.
            let floor = if last_ts && !penultimate_ts {
                latest
            } else {
                latest + 1
            };
            ban(logits, ts..floor as usize);
        }
        let logprobs = log_softmax(logits);
        let timestamp_mass = logsumexp(&logprobs[ts..]);
        let best_text = logprobs[..ts]
            .iter()
            .copied()
            .fold(f32::NEG_INFINITY, f32::max);
        if timestamp_mass > best_text {
            ban(logits, 0..ts);
        }
    }

    /// Segments from one window's tokens, and how many frames of audio they account for.
    fn segments_of(
        &self,
        tokens: &[u32],
        offset: f64,
        window_frames: usize,
    ) -> (Vec<Segment>, usize) {
        let sp = self.special;
        let is_ts = |t: u32| t >= sp.timestamp_begin;
        let time = |t: u32| offset + (t - sp.timestamp_begin) as f64 * TIME_PRECISION;
        let mut segments = Vec::new();
        let mut start: Option<u32> = None;
        let mut text: Vec<u32> = Vec::new();
        let mut last_closed: Option<u32> = None;
        for &t in tokens {
            if is_ts(t) {
                match start {
                    Some(s) if !text.is_empty() => {
                        self.push_segment(&mut segments, time(s), time(t), &text);
                        text.clear();
                        start = None;
                        last_closed = Some(t);
                    }
                    _ => start = Some(t),
                }
            } else if t < sp.eot {
                text.push(t);
            }
        }
        let window_end = offset + window_frames as f64 * HOP as f64 / mel::SAMPLE_RATE as f64;
        let full_window = window_frames == WINDOW_FRAMES;
        if let (Some(end), true) = (last_closed, full_window) {
            let frames = ((end - sp.timestamp_begin) * 2) as usize;
            // The window cut a segment short, or the model stopped early with more than a
            // second of audio left: hear the rest again from the last complete segment.
            if !text.is_empty() || frames + 100 < window_frames {
                return (segments, frames.clamp(1, window_frames));
            }
        }
        if text.is_empty() {
            return (segments, window_frames);
        }
        // Text with no closing timestamp runs to the end of the window.
        let s = start.map(time).unwrap_or(offset);
        self.push_segment(&mut segments, s, window_end, &text);
        (segments, window_frames)
    }

    fn push_segment(&self, segments: &mut Vec<Segment>, start: f64, end: f64, text: &[u32]) {
        let decoded = self.tokenizer.decode(text, true).unwrap_or_default();
        let decoded = decoded.trim();
        if decoded.is_empty() {
            return;
        }
        segments.push(Segment {
            start,
            end: end.max(start),
            text: decoded.to_string(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_softmax_normalizes() {
        let l = log_softmax(&[1.0, 2.0, 3.0]);
        let total: f32 = l.iter().map(|v| v.exp()).sum();
        assert!((total - 1.0).abs() < 1e-5);
        assert_eq!(
            logsumexp(&[f32::NEG_INFINITY, f32::NEG_INFINITY]),
            f32::NEG_INFINITY
        );
    }
}
