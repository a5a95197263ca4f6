//! Decoding with timestamps, window by window over long audio: greedy or beam search, with
//! temperature fallback when a window's text fails Whisper's checks.
//!
//! Timestamp rules (as in Whisper's reference decoder): a window's output starts with a
//! timestamp; timestamps come in pairs that bracket text (except right before the end);
//! they never go backwards; and when the timestamps together are more likely than any single
//! text token, a timestamp is taken. Segments are read from the timestamp pairs, and the next
//! window starts at the last complete segment's end, so speech cut by a window edge is heard
//! again in full.

use super::align;
use super::kernels;
use super::mel::{self, MelFrontend, HOP, WINDOW_FRAMES};
use super::model::Whisper;
use super::text_decoder::{Capture, CrossKv, Scratch, SelfCache};
use crate::asr::{fillers, AsrError, DecodingGuards, Segment, TranscribeOptions, WindowDone};
use headroom_base::cpu;
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::io::Write;
use tokenizers::Tokenizer;
use tokio_util::sync::CancellationToken;

/// Seconds per timestamp token.
const TIME_PRECISION: f64 = 0.02;
/// Log-mel frames per second of audio.
const FRAMES_PER_SECOND: f64 = (mel::SAMPLE_RATE / HOP) as f64;
/// Tokens sampled per window at most (half the text context, as Whisper does).
const MAX_WINDOW_TOKENS: usize = 224;
/// An audio-only window's frames: its audio, then at least 2 s of silence and at least 10 s
/// in all. Whisper that does not hear the speech end (measured: on 1–2 s of speech with
/// less) repeats its last words until it runs out of tokens.
const AUDIO_ONLY_SILENCE: usize = 200;
const AUDIO_ONLY_MIN_FRAMES: usize = 1000;
/// Latest allowed first timestamp in a window, in timestamp steps (1 s).
const MAX_INITIAL_TIMESTAMP: u32 = 50;
/// Sound in the rest of the audio's last window, after the model stopped, that makes it
/// worth hearing again even when the rest is short: more than the tail of a word the model's
/// last timestamp cut a little early.
const REST_SPEECH_SECS: f64 = 0.4;
/// Prompt tokens kept from the initial prompt at most (half the text context, less one).
const MAX_PROMPT_TOKENS: usize = 223;

/// Special token ids, looked up from the tokenizer by name.
#[derive(Debug, Clone)]
pub struct SpecialTokens {
    pub eot: u32,
    pub sot: u32,
    /// `<|startofprev|>`: what comes before it is context, not transcript.
    pub sot_prev: Option<u32>,
    pub transcribe: u32,
    /// `<|translate|>`: the task that writes English whatever the language spoken.
    pub translate: Option<u32>,
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
            sot_prev: tok.token_to_id("<|startofprev|>"),
            transcribe: id("<|transcribe|>")?,
            translate: tok.token_to_id("<|translate|>"),
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
    /// (decoder block, head) pairs whose cross-attention follows the audio in time.
    pub alignment_heads: &'a [(usize, usize)],
}

/// What a transcription found.
pub struct Decoded {
    pub segments: Vec<Segment>,
    pub language: Option<String>,
}

/// In place: `logits` become log-probabilities.
fn log_softmax_in_place(logits: &mut [f32]) {
    let lse = logsumexp(logits);
    for l in logits.iter_mut() {
        *l -= lse;
    }
}

#[cfg(test)]
fn log_softmax(logits: &[f32]) -> Vec<f32> {
    let mut out = logits.to_vec();
    log_softmax_in_place(&mut out);
    out
}

fn logsumexp(values: &[f32]) -> f32 {
    kernels::log_sum_exp(values)
}

fn argmax(values: &[f32]) -> u32 {
    values
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i as u32)
        .expect("non-empty vocabulary")
}

/// How many times longer `text` is than its zlib compression: repetition loops compress well.
pub fn compression_ratio(text: &str) -> f32 {
    if text.is_empty() {
        return 0.0;
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    let compressed = z
        .write_all(text.as_bytes())
        .and_then(|_| z.finish())
        .map(|c| c.len())
        .unwrap_or(text.len());
    text.len() as f32 / compressed.max(1) as f32
}

/// One decoding of a window: the tokens chosen (timestamps included, end of text not) and
/// the log-probability of each.
#[derive(Debug, Clone, Default)]
struct Candidate {
    tokens: Vec<u32>,
    logprobs: Vec<f32>,
    /// Including the end of text.
    sum_logprob: f32,
}

/// A window decoded and checked.
struct WindowDecoding {
    chosen: Candidate,
    avg_logprob: f32,
    no_speech_prob: f32,
    temperature: f32,
    compression_ratio: f32,
}

/// A window's audio, encoded, and where it lies: what a second reading of it needs.
struct WindowReading<'w> {
    cross: &'w CrossKv,
    sot_sequence: &'w [u32],
    window_frames: usize,
    window_audio: &'w [f32],
    offset: f64,
}

/// A segment of a window, before its text is decoded.
struct RawSegment {
    start: f64,
    end: f64,
    tokens: Vec<u32>,
    logprobs: Vec<f32>,
}

/// One window's decoder inputs: the audio keys and values, and the prompt already fed.
struct Window<'w> {
    cross: &'w CrossKv,
    prompt: &'w SelfCache,
    /// Logits after the prompt, before any rule.
    first_logits: &'w [f32],
    /// Timestamps past this one lie beyond the window's audio.
    max_timestamp: u32,
    /// Tokens that may be sampled: see [`new_tokens_room`].
    max_new_tokens: usize,
}

/// Tokens a window may sample after its prompt: half the text context, as Whisper does, and
/// never past the context's end (a long prompt of the person's, 223 tokens, with the start
/// tokens, left 221; a window that ran on, as one repeating itself does, overran it).
fn new_tokens_room(context: usize, prompt: usize) -> usize {
    MAX_WINDOW_TOKENS.min(context.saturating_sub(prompt))
}

impl Decoding<'_> {
    /// Transcribes 16 kHz mono samples from `from_secs` on. `options.language`: a code for
    /// multilingual models, or `None` to detect it from the first window. `window_done` gets
    /// each window's segments and the seconds done; `progress` the fraction of audio done.
    /// The log-mel is computed over the whole audio (Whisper scales it by its overall
    /// maximum), so a transcription resumed at a window boundary decodes the same windows as
    /// one that ran through.
    pub fn transcribe(
        &self,
        samples: &[f32],
        options: &TranscribeOptions,
        from_secs: f64,
        window_done: &mut dyn FnMut(WindowDone<'_>),
        progress: &dyn Fn(f32),
        cancel: &CancellationToken,
    ) -> Result<Decoded, AsrError> {
        // Pad with 30 s of silence so the last window's tail has the log-mel of silence.
        let content_frames = samples.len() / HOP;
        let mut padded = samples.to_vec();
        padded.resize(samples.len() + mel::WINDOW_SAMPLES, 0.0);
        // Batch work computes on the idle-priority threads (nothing here loads a model).
        let (mel, total_frames) = cpu::compute(|| self.mel.log_mel(&padded));
        drop(padded);
        let n_mels = self.mel.n_mels();
        let language = options.language.as_deref();
        // Translation is a task of the multilingual models; an English-only one has never
        // learned it.
        let task = match (options.translate, self.special.translate) {
            (false, _) => self.special.transcribe,
            (true, Some(translate)) if self.special.multilingual() => translate,
            (true, _) => return Err(AsrError::CannotTranslate),
        };
        if !self.special.multilingual() {
            if let Some(code) = language.filter(|c| *c != "en") {
                return Err(AsrError::UnknownLanguage(format!(
                    "{code} (this model is English-only)"
                )));
            }
        }
        // A multilingual model without a language detects it from the first window it
        // encodes, and decodes that same encoding.
        let mut language_code = language.map(str::to_string);
        let mut language_token = match &language_code {
            Some(code) if self.special.multilingual() => Some(self.language_token(code)?),
            _ => None,
        };
        let prompt_tokens = self.prompt_tokens(options.initial_prompt.as_deref().unwrap_or(""))?;
        let sot_index = prompt_tokens.len();
        let filler_prompt = if options.hear_fillers {
            self.prompt_tokens(fillers::FILLER_PROMPT)?
        } else {
            Vec::new()
        };
        let mut segments = Vec::new();
        let mut seek =
            ((from_secs.max(0.0) * FRAMES_PER_SECOND).round() as usize).min(content_frames);
        let mut scratch = Scratch::default();
        let first_seek = seek;
        let stop_frames = options.stop_at_secs.map_or(content_frames, |secs| {
            ((secs.max(0.0) * FRAMES_PER_SECOND) as usize).min(content_frames)
        });
        while seek < content_frames && (seek == first_seek || seek < stop_frames) {
            // A safe point: batch work waits here while interactive work runs.
            cpu::give_way();
            if cancel.is_cancelled() {
                return Err(AsrError::Cancelled);
            }
            let window_frames = (content_frames - seek).min(WINDOW_FRAMES);
            // The rest of the audio, heard again after the model stopped short of it, is a
            // few seconds at most: encoded as audio only, it costs a third of a window.
            let short_rest =
                seek > first_seek && window_frames + AUDIO_ONLY_SILENCE <= AUDIO_ONLY_MIN_FRAMES;
            let encoded_frames = if options.audio_only_windows || short_rest {
                (window_frames + AUDIO_ONLY_SILENCE)
                    .max(AUDIO_ONLY_MIN_FRAMES)
                    .next_multiple_of(FRAMES_PER_SECOND as usize)
                    .min(WINDOW_FRAMES)
            } else {
                WINDOW_FRAMES
            };
            let window = mel::window(&mel, n_mels, total_frames, seek, encoded_frames, 0.0);
            let offset = seek as f64 * HOP as f64 / mel::SAMPLE_RATE as f64;
            let started = std::time::Instant::now();
            // Its lock is taken on this thread; its products run on the batch pool.
            let cross = self
                .model
                .encode(&window, encoded_frames)
                .map_err(AsrError::model)?;
            drop(window);
            let encoded = started.elapsed();
            if self.special.multilingual() && language_token.is_none() {
                let code = cpu::compute(|| self.detect_language(&cross, &mut scratch));
                language_token = Some(self.language_token(&code)?);
                language_code = Some(code);
            }
            let mut sot_sequence = vec![self.special.sot];
            if let Some(lang) = language_token {
                sot_sequence.push(lang);
                sot_sequence.push(task);
            }
            let mut prompt = prompt_tokens.clone();
            prompt.extend(&sot_sequence);
            let decoder = &self.model.decoder;
            let (prompt_cache, logits) = cpu::compute(|| {
                self.feed_prompt(
                    &cross,
                    &prompt,
                    &[sot_index, prompt.len() - 1],
                    &mut scratch,
                )
            });
            let no_speech_prob = self.special.no_speech.map_or(0.0, |ns| {
                let lse = logsumexp(&logits[0]);
                (logits[0][ns as usize] - lse).exp()
            });
            let win = Window {
                cross: &cross,
                prompt: &prompt_cache,
                first_logits: &logits[1],
                max_timestamp: self.special.timestamp_begin + (window_frames / 2) as u32,
                max_new_tokens: new_tokens_room(decoder.max_tokens(), prompt.len()),
            };
            let decoded = cpu::compute(|| {
                self.decode_guarded(
                    &win,
                    options,
                    no_speech_prob,
                    seek as u64,
                    &mut scratch,
                    cancel,
                )
            })?;
            tracing::debug!(
                at_secs = offset,
                window_frames,
                encoded_frames,
                encode_ms = encoded.as_millis() as u64,
                decode_ms = (started.elapsed() - encoded).as_millis() as u64,
                tokens = decoded.chosen.tokens.len(),
                temperature = decoded.temperature,
                avg_logprob = decoded.avg_logprob,
                compression_ratio = decoded.compression_ratio,
                no_speech_prob = decoded.no_speech_prob,
                "window decoded"
            );
            let silent = is_silence(
                &options.guards,
                &decoded,
                window_frames as f64 / FRAMES_PER_SECOND,
            );
            let window_audio = &samples[(seek * HOP).min(samples.len())
                ..((seek + window_frames) * HOP).min(samples.len())];
            let (raw, consumed) = if silent {
                (Vec::new(), window_frames)
            } else {
                self.segments_of(&decoded.chosen, offset, window_frames, window_audio)
            };
            let timed = options.word_timestamps || options.hear_fillers;
            let mut found = cpu::compute(|| {
                self.finish_segments(
                    raw,
                    timed,
                    &cross,
                    &sot_sequence,
                    window_audio,
                    offset,
                    &mut scratch,
                )
            });
            if !filler_prompt.is_empty() && !silent {
                let heard = cpu::compute(|| {
                    let read = WindowReading {
                        cross: &cross,
                        sot_sequence: &sot_sequence,
                        window_frames,
                        window_audio,
                        offset,
                    };
                    self.read_for_fillers(&read, &filler_prompt, &mut scratch, cancel)
                })?;
                let until = offset + consumed as f64 / FRAMES_PER_SECOND;
                let pauses = fillers::pauses_in(window_audio, offset);
                let put_in = fillers::put_in_heard_fillers(&mut found, &heard, until, &pauses);
                tracing::debug!(at_secs = offset, put_in, "fillers heard");
                if !options.word_timestamps {
                    found.iter_mut().for_each(|s| s.words.clear());
                }
            }
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

    /// The decoder's prompt for `text` (previous-text marker, then its last
    /// [`MAX_PROMPT_TOKENS`] tokens); none for empty text or a model without the marker.
    fn prompt_tokens(&self, text: &str) -> Result<Vec<u32>, AsrError> {
        let (text, Some(prev)) = (text.trim(), self.special.sot_prev) else {
            return Ok(Vec::new());
        };
        if text.is_empty() {
            return Ok(Vec::new());
        }
        let encoded = self
            .tokenizer
            .encode(format!(" {text}"), false)
            .map_err(AsrError::model)?;
        let ids = encoded.get_ids();
        let kept = &ids[ids.len().saturating_sub(MAX_PROMPT_TOKENS)..];
        let mut tokens = vec![prev];
        tokens.extend(kept.iter().copied().filter(|&t| t < self.special.eot));
        Ok(tokens)
    }

    /// `prompt` fed to the decoder over the window's audio: the cache after it, and the logits
    /// at each place of `at`.
    fn feed_prompt(
        &self,
        cross: &CrossKv,
        prompt: &[u32],
        at: &[usize],
        scratch: &mut Scratch,
    ) -> (SelfCache, Vec<Vec<f32>>) {
        let decoder = &self.model.decoder;
        let mut cache = decoder.new_cache();
        let entries: Vec<(usize, u32)> = prompt.iter().map(|&t| (0, t)).collect();
        let mut logits = vec![Vec::new(); at.len()];
        decoder.forward(
            cross,
            std::slice::from_mut(&mut cache),
            &entries,
            at,
            &mut logits,
            None,
            scratch,
        );
        (cache, logits)
    }

    /// The window read again after [`fillers::FILLER_PROMPT`] (`filler_prompt`, its tokens),
    /// greedily and unchecked, its words timed: only its fillers are taken (see [`fillers`]).
    fn read_for_fillers(
        &self,
        read: &WindowReading<'_>,
        filler_prompt: &[u32],
        scratch: &mut Scratch,
        cancel: &CancellationToken,
    ) -> Result<Vec<Segment>, AsrError> {
        let mut prompt = filler_prompt.to_vec();
        prompt.extend(read.sot_sequence);
        let (cache, logits) = self.feed_prompt(read.cross, &prompt, &[prompt.len() - 1], scratch);
        let win = Window {
            cross: read.cross,
            prompt: &cache,
            first_logits: &logits[0],
            max_timestamp: self.special.timestamp_begin + (read.window_frames / 2) as u32,
            max_new_tokens: new_tokens_room(self.model.decoder.max_tokens(), prompt.len()),
        };
        let mut rng = StdRng::seed_from_u64(0);
        let chosen = self.sample(&win, 0.0, 1, &mut rng, scratch, cancel)?;
        let (raw, _) =
            self.segments_of(&chosen, read.offset, read.window_frames, read.window_audio);
        Ok(self.finish_segments(
            raw,
            true,
            read.cross,
            read.sot_sequence,
            read.window_audio,
            read.offset,
            scratch,
        ))
    }

    /// The most likely language of a window's audio.
    fn detect_language(&self, cross: &CrossKv, scratch: &mut Scratch) -> String {
        let decoder = &self.model.decoder;
        let mut cache = decoder.new_cache();
        let mut logits = vec![Vec::new()];
        decoder.forward(
            cross,
            std::slice::from_mut(&mut cache),
            &[(0, self.special.sot)],
            &[0],
            &mut logits,
            None,
            scratch,
        );
        let (code, _) = self
            .special
            .languages
            .iter()
            .max_by(|a, b| logits[0][a.1 as usize].total_cmp(&logits[0][b.1 as usize]))
            .expect("a multilingual model has language tokens");
        code.clone()
    }

    fn language_token(&self, code: &str) -> Result<u32, AsrError> {
        self.special
            .languages
            .iter()
            .find(|(c, _)| c == code)
            .map(|(_, id)| *id)
            .ok_or_else(|| AsrError::UnknownLanguage(code.to_string()))
    }

    /// Decodes a window at each temperature in turn until its text passes the guards.
    fn decode_guarded(
        &self,
        win: &Window<'_>,
        options: &TranscribeOptions,
        no_speech_prob: f32,
        seed: u64,
        scratch: &mut Scratch,
        cancel: &CancellationToken,
    ) -> Result<WindowDecoding, AsrError> {
        let guards = &options.guards;
        let temperatures: &[f32] = if guards.temperatures.is_empty() {
            &[0.0]
        } else {
            &guards.temperatures
        };
        let window_secs =
            (win.max_timestamp - self.special.timestamp_begin) as f64 * TIME_PRECISION;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut tried: Vec<(bool, bool, WindowDecoding)> = Vec::new();
        for &temperature in temperatures {
            let chosen = if temperature > 0.0 {
                let n = guards.best_of.max(1);
                self.sample(win, temperature, n, &mut rng, scratch, cancel)?
            } else if options.beam_size > 1 {
                self.beam_search(win, options.beam_size, scratch, cancel)?
            } else {
                self.sample(win, 0.0, 1, &mut rng, scratch, cancel)?
            };
            let text_tokens: Vec<u32> = chosen
                .tokens
                .iter()
                .copied()
                .filter(|&t| t < self.special.eot)
                .collect();
            let text = self
                .tokenizer
                .decode(&text_tokens, true)
                .unwrap_or_default();
            let decoded = WindowDecoding {
                avg_logprob: chosen.sum_logprob / (chosen.tokens.len() + 1) as f32,
                compression_ratio: compression_ratio(&text),
                no_speech_prob,
                temperature,
                chosen,
            };
            let repeats = guards
                .compression_ratio_threshold
                .is_some_and(|t| decoded.compression_ratio > t);
            let unsure = guards
                .log_prob_threshold
                .is_some_and(|t| decoded.avg_logprob < t);
            // Silence is judged on the first (most likely) decoding: a hotter sample is
            // always unsure, and would make any window with a hint of no speech silent.
            if (!repeats && !unsure)
                || (tried.is_empty() && is_silence(guards, &decoded, window_secs))
            {
                return Ok(decoded);
            }
            tracing::debug!(temperature, repeats, unsure, "window decoded again");
            tried.push((repeats, unsure, decoded));
        }
        // Every temperature failed a check. Speech that really repeats itself (a chorus, a
        // list read twice) compresses like a loop, and sampling hotter then only adds
        // guesses: keep the most likely decoding the model was sure of, preferring one that
        // does not repeat; with none sure, the most likely of all.
        let likelier = |a: &&(bool, bool, WindowDecoding), b: &&(bool, bool, WindowDecoding)| {
            a.2.avg_logprob.total_cmp(&b.2.avg_logprob)
        };
        let best = tried
            .iter()
            .filter(|(repeats, unsure, _)| !unsure && !repeats)
            .max_by(likelier)
            .or_else(|| {
                tried
                    .iter()
                    .filter(|(_, unsure, _)| !unsure)
                    .max_by(likelier)
            })
            .or_else(|| tried.iter().max_by(likelier))
            .map(|best| best.2.temperature);
        let index = tried
            .iter()
            .position(|t| Some(t.2.temperature) == best)
            .expect("at least one temperature");
        Ok(tried.swap_remove(index).2)
    }

    /// Greedy decoding (`temperature` 0), or `n` candidates sampled side by side at
    /// `temperature`, of which the likeliest ([`best_candidate`]) is kept.
    fn sample(
        &self,
        win: &Window<'_>,
        temperature: f32,
        n: usize,
        rng: &mut StdRng,
        scratch: &mut Scratch,
        cancel: &CancellationToken,
    ) -> Result<Candidate, AsrError> {
        let decoder = &self.model.decoder;
        let mut caches = vec![win.prompt.clone(); n.max(1)];
        let rules = |l: &mut [f32], tokens: &[u32]| self.apply_rules(l, tokens, win.max_timestamp);
        let mut step = |keep: &[usize], tokens: &[u32], logits: &mut Vec<Vec<f32>>| {
            // The candidates still going keep their caches, in order.
            let mut kept: Vec<SelfCache> = keep
                .iter()
                .map(|&k| std::mem::take(&mut caches[k]))
                .collect();
            std::mem::swap(&mut caches, &mut kept);
            let entries: Vec<(usize, u32)> = tokens.iter().copied().enumerate().collect();
            let wanted: Vec<usize> = (0..entries.len()).collect();
            logits.resize_with(entries.len(), Vec::new);
            decoder.forward(
                win.cross,
                &mut caches,
                &entries,
                &wanted,
                logits,
                None,
                scratch,
            );
        };
        let candidates = sample_candidates(
            Sampling {
                n,
                temperature,
                eot: self.special.eot,
                max_tokens: win.max_new_tokens,
            },
            win.first_logits,
            rng,
            cancel,
            &rules,
            &mut step,
        )?;
        Ok(best_candidate(candidates).expect("at least one candidate"))
    }

    /// Beam search with `beams` beams: each step keeps the `beams` most likely continuations
    /// of all beams; it ends when `beams` sequences have ended, and the one with the best
    /// mean log-probability wins.
    fn beam_search(
        &self,
        win: &Window<'_>,
        beams: usize,
        scratch: &mut Scratch,
        cancel: &CancellationToken,
    ) -> Result<Candidate, AsrError> {
        let decoder = &self.model.decoder;
        let mut live = vec![Candidate::default()];
        let mut caches = vec![win.prompt.clone()];
        let mut next_caches: Vec<SelfCache> = Vec::new();
        let mut logits = vec![win.first_logits.to_vec()];
        let mut finished: Vec<Candidate> = Vec::new();
        for _ in 0..win.max_new_tokens {
            // A safe point: batch work waits here while interactive work runs.
            cpu::give_way();
            if cancel.is_cancelled() {
                return Err(AsrError::Cancelled);
            }
            // (score, beam, token, logprob) of each beam's best continuations.
            let mut options: Vec<(f32, usize, u32, f32)> = Vec::new();
            for (b, beam) in live.iter().enumerate() {
                let l = &mut logits[b];
                self.apply_rules(l, &beam.tokens, win.max_timestamp);
                log_softmax_in_place(l);
                let mut best: Vec<(f32, u32)> = Vec::with_capacity(beams + 1);
                for (t, &lp) in l.iter().enumerate() {
                    if lp == f32::NEG_INFINITY {
                        continue;
                    }
                    if best.len() < beams + 1 {
                        best.push((lp, t as u32));
                        best.sort_by(|a, b| b.0.total_cmp(&a.0));
                    } else if lp > best[beams].0 {
                        best[beams] = (lp, t as u32);
                        best.sort_by(|a, b| b.0.total_cmp(&a.0));
                    }
                }
                options.extend(
                    best.into_iter()
                        .map(|(lp, t)| (beam.sum_logprob + lp, b, t, lp)),
                );
            }
            options.sort_by(|a, b| b.0.total_cmp(&a.0));
            let mut chosen: Vec<(usize, u32, f32, f32)> = Vec::new();
            for (score, b, t, lp) in options {
                if t == self.special.eot {
                    if finished.len() < beams {
                        let mut done = live[b].clone();
                        done.sum_logprob = score;
                        finished.push(done);
                    }
                } else if chosen.len() < beams {
                    chosen.push((b, t, lp, score));
                }
            }
            if finished.len() >= beams || chosen.is_empty() {
                break;
            }
            next_caches.resize_with(chosen.len(), SelfCache::default);
            let mut next_live = Vec::with_capacity(chosen.len());
            for (i, &(b, t, lp, score)) in chosen.iter().enumerate() {
                next_caches[i].copy_from(&caches[b]);
                let mut c = live[b].clone();
                c.tokens.push(t);
                c.logprobs.push(lp);
                c.sum_logprob = score;
                next_live.push(c);
            }
            std::mem::swap(&mut caches, &mut next_caches);
            caches.truncate(chosen.len());
            live = next_live;
            let entries: Vec<(usize, u32)> =
                chosen.iter().enumerate().map(|(i, c)| (i, c.1)).collect();
            let wanted: Vec<usize> = (0..entries.len()).collect();
            logits.resize_with(entries.len(), Vec::new);
            decoder.forward(
                win.cross,
                &mut caches,
                &entries,
                &wanted,
                &mut logits,
                None,
                scratch,
            );
        }
        if finished.is_empty() {
            finished = live;
        }
        Ok(best_candidate(finished).expect("a beam"))
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
        if let Some(prev) = sp.sot_prev {
            logits[prev as usize] = f32::NEG_INFINITY;
        }
        logits[sp.sot as usize] = f32::NEG_INFINITY;
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
        let lse = logsumexp(logits);
        let timestamp_mass = logsumexp(&logits[ts..]) - lse;
        let best_text = logits[..ts]
            .iter()
            .copied()
            .fold(f32::NEG_INFINITY, f32::max)
            - lse;
        if timestamp_mass > best_text {
            ban(logits, 0..ts);
        }
    }

    /// Segments from one window's tokens, and how many frames of audio they account for.
    fn segments_of(
        &self,
        decoded: &Candidate,
        offset: f64,
        window_frames: usize,
        window_audio: &[f32],
    ) -> (Vec<RawSegment>, usize) {
        let sp = self.special;
        let is_ts = |t: u32| t >= sp.timestamp_begin;
        let time = |t: u32| offset + (t - sp.timestamp_begin) as f64 * TIME_PRECISION;
        let mut segments = Vec::new();
        let mut start: Option<u32> = None;
        let mut text: Vec<u32> = Vec::new();
        let mut logprobs: Vec<f32> = Vec::new();
        let mut last_closed: Option<u32> = None;
        for (&t, &lp) in decoded.tokens.iter().zip(&decoded.logprobs) {
            if is_ts(t) {
                match start {
                    Some(s) if !text.is_empty() => {
                        segments.push(RawSegment {
                            start: time(s),
                            end: time(t),
                            tokens: std::mem::take(&mut text),
                            logprobs: std::mem::take(&mut logprobs),
                        });
                        start = None;
                        last_closed = Some(t);
                    }
                    _ => start = Some(t),
                }
            } else if t < sp.eot {
                text.push(t);
                logprobs.push(lp);
            }
        }
        let window_end = offset + window_frames as f64 * HOP as f64 / mel::SAMPLE_RATE as f64;
        let full_window = window_frames == WINDOW_FRAMES;
        if let (Some(end), true) = (last_closed, full_window) {
            let frames = ((end - sp.timestamp_begin) * 2) as usize;
            // The window cut a segment short, or the model stopped early with more than a
            // second of audio left: hear the rest again from the last complete segment.
            // (Always restarting there loses fewer words at a window's edge on some speech,
            // and makes the model invent text from a cut-off tail on other: measured worse.)
            if !text.is_empty() || frames + 100 < window_frames {
                return (segments, frames.clamp(1, window_frames));
            }
        }
        if let (Some(end), false) = (last_closed, full_window) {
            let frames = ((end - sp.timestamp_begin) * 2) as usize;
            // The audio's last window, where the model stopped with more than two seconds
            // left, or more than a second that holds speech: hear the rest again (a final
            // sentence, or the words before a cut in a voice-detected chunk, are otherwise
            // lost). Only after a second's progress, so a window is never decoded again for
            // nothing.
            let rest_speaks = || {
                frames + 100 < window_frames
                    && align::sound_secs(window_audio, frames * HOP) >= REST_SPEECH_SECS
            };
            if text.is_empty() && frames >= 100 && (frames + 200 < window_frames || rest_speaks()) {
                return (segments, frames);
            }
        }
        if !text.is_empty() {
            // Text with no closing timestamp runs to the end of the window.
            segments.push(RawSegment {
                start: start.map(time).unwrap_or(offset),
                end: window_end,
                tokens: text,
                logprobs,
            });
        }
        (segments, window_frames)
    }

    /// Text (and, when asked, word times) for a window's segments; empty ones are dropped.
    #[allow(clippy::too_many_arguments)]
    fn finish_segments(
        &self,
        raw: Vec<RawSegment>,
        word_timestamps: bool,
        cross: &CrossKv,
        sot_sequence: &[u32],
        window_audio: &[f32],
        offset: f64,
        scratch: &mut Scratch,
    ) -> Vec<Segment> {
        let raw: Vec<RawSegment> = raw
            .into_iter()
            .filter(|s| {
                !self
                    .tokenizer
                    .decode(&s.tokens, true)
                    .unwrap_or_default()
                    .trim()
                    .is_empty()
            })
            .collect();
        let mut words = if word_timestamps && !raw.is_empty() {
            self.align(&raw, cross, sot_sequence, window_audio, offset, scratch)
        } else {
            Vec::new()
        };
        words.resize_with(raw.len(), Vec::new);
        raw.into_iter()
            .zip(words)
            .map(|(s, words)| {
                let (start, end) = span_of_words(&words).unwrap_or((s.start, s.end));
                Segment {
                    speaker: None,
                    start,
                    end: end.max(start),
                    text: self
                        .tokenizer
                        .decode(&s.tokens, true)
                        .unwrap_or_default()
                        .trim()
                        .to_string(),
                    words,
                }
            })
            .collect()
    }

    /// Word times for a window's segments: the text is fed again after the start of the
    /// transcript (without timestamps), the alignment heads' attention over the audio is
    /// normalized and smoothed, and dynamic time warping matches tokens to frames.
    fn align(
        &self,
        raw: &[RawSegment],
        cross: &CrossKv,
        sot_sequence: &[u32],
        window_audio: &[f32],
        offset: f64,
        scratch: &mut Scratch,
    ) -> Vec<Vec<crate::asr::Word>> {
        let window_frames = window_audio.len() / HOP;
        let decoder = &self.model.decoder;
        let text: Vec<u32> = raw.iter().flat_map(|s| s.tokens.iter().copied()).collect();
        let mut entries: Vec<(usize, u32)> = sot_sequence.iter().map(|&t| (0, t)).collect();
        entries.push((0, self.special.no_timestamps));
        entries.extend(text.iter().map(|&t| (0, t)));
        entries.push((0, self.special.eot));
        let heads: Vec<(usize, usize)> = self
            .alignment_heads
            .iter()
            .copied()
            .filter(|&(l, h)| l < decoder.blocks.len() && h < decoder.heads)
            .collect();
        if heads.is_empty() || entries.len() > decoder.max_tokens() {
            return Vec::new();
        }
        let mut capture = Capture {
            heads,
            scores: Vec::new(),
        };
        let mut cache = decoder.new_cache();
        decoder.forward(
            cross,
            std::slice::from_mut(&mut cache),
            &entries,
            &[],
            &mut [],
            Some(&mut capture),
            scratch,
        );
        let audio_frames = (window_frames / 2).clamp(1, cross.frames);
        let matrix = align::attention_matrix(
            &capture.scores,
            entries.len(),
            cross.frames,
            audio_frames,
            sot_sequence.len(),
        );
        let boundaries = align::token_times(&matrix, text.len() + 1, audio_frames);
        let pieces: Vec<String> = text
            .iter()
            .map(|&t| self.tokenizer.decode(&[t], false).unwrap_or_default())
            .collect();
        let logprobs: Vec<f32> = raw
            .iter()
            .flat_map(|s| s.logprobs.iter().copied())
            .collect();
        let counts: Vec<usize> = raw.iter().map(|s| s.tokens.len()).collect();
        let bounds: Vec<(f64, f64)> = raw.iter().map(|s| (s.start, s.end)).collect();
        let mut words = align::words(&pieces, &logprobs, &boundaries, &counts, &bounds, offset);
        align::trim_to_sound(&mut words, window_audio, offset);
        words
    }
}

/// Where a segment's words start and end: its time when they are timed. The timestamp tokens
/// that bound a segment are 20 ms steps the model guesses, and a word's alignment often runs
/// a few tenths of a second past them (a segment ending at 27.38 s held a word timed to
/// 27.68 s), so, as in the reference implementation, a segment with words spans exactly its
/// words: every word lies inside its segment, and the boundary between two segments is the
/// one between their words.
fn span_of_words(words: &[crate::asr::Word]) -> Option<(f64, f64)> {
    let start = words.iter().map(|w| w.start).reduce(f64::min)?;
    let end = words.iter().map(|w| w.end).reduce(f64::max)?;
    Some((start, end.max(start)))
}

/// How [`sample_candidates`] samples.
#[derive(Debug, Clone, Copy)]
struct Sampling {
    /// Candidates sampled side by side (Whisper's `best_of`).
    n: usize,
    /// 0 for greedy decoding (one candidate is enough).
    temperature: f32,
    eot: u32,
    /// Tokens per candidate at most; a candidate that reaches them ends there.
    max_tokens: usize,
}

/// Advances a model by one token for each candidate still going; see [`sample_candidates`].
type ModelStep<'a> = dyn FnMut(&[usize], &[u32], &mut Vec<Vec<f32>>) + 'a;

/// Samples `how.n` candidates side by side from `first_logits` on, until each has chosen the
/// end of text or reached `how.max_tokens`. `rules` masks a candidate's logits given its
/// tokens so far; `step(keep, tokens, logits)` advances the model: the candidates still
/// going were at slots `keep` of the previous step and are now at slots 0, 1, …, each fed
/// `tokens[slot]`, and `logits[slot]` receives each one's next logits (the model keeps its
/// own per-candidate state, which it must compact the same way). Candidates come back in
/// the order they ended.
fn sample_candidates(
    how: Sampling,
    first_logits: &[f32],
    rng: &mut StdRng,
    cancel: &CancellationToken,
    rules: &dyn Fn(&mut [f32], &[u32]),
    step: &mut ModelStep<'_>,
) -> Result<Vec<Candidate>, AsrError> {
    let n = how.n.max(1);
    let mut live = vec![Candidate::default(); n];
    let mut logits = vec![first_logits.to_vec(); n];
    let mut ended = Vec::with_capacity(n);
    let mut scaled = Vec::new();
    while !live.is_empty() {
        // A safe point: batch work waits here while interactive work runs.
        cpu::give_way();
        if cancel.is_cancelled() {
            return Err(AsrError::Cancelled);
        }
        let mut keep = Vec::with_capacity(live.len());
        let mut tokens = Vec::with_capacity(live.len());
        let mut going = Vec::with_capacity(live.len());
        for (slot, (mut c, l)) in live.drain(..).zip(logits.iter_mut()).enumerate() {
            rules(l, &c.tokens);
            let next = if how.temperature > 0.0 {
                sample_token(l, how.temperature, how.eot, rng, &mut scaled)
            } else {
                argmax(l)
            };
            log_softmax_in_place(l);
            let logprob = l[next as usize];
            c.sum_logprob += logprob;
            if next == how.eot {
                ended.push(c);
                continue;
            }
            c.tokens.push(next);
            c.logprobs.push(logprob);
            if c.tokens.len() >= how.max_tokens {
                ended.push(c);
                continue;
            }
            keep.push(slot);
            tokens.push(next);
            going.push(c);
        }
        live = going;
        if !live.is_empty() {
            step(&keep, &tokens, &mut logits);
        }
    }
    Ok(ended)
}

/// A token drawn from `logits` (masked ones at minus infinity) at `temperature`; `eot` when
/// rounding leaves the draw past the last token. `scaled` is scratch space.
fn sample_token(
    logits: &[f32],
    temperature: f32,
    eot: u32,
    rng: &mut StdRng,
    scaled: &mut Vec<f32>,
) -> u32 {
    scaled.clear();
    scaled.extend(logits.iter().map(|v| v / temperature));
    let lse = logsumexp(scaled);
    let mut target: f32 = rng.random();
    for (i, p) in scaled.iter().enumerate() {
        target -= (p - lse).exp();
        if target <= 0.0 {
            return i as u32;
        }
    }
    eot
}

/// Whisper's ranking of a window's candidates (sampled or beams): the sum of log-probabilities
/// (the end of text's included) over the number of tokens, the first of equals.
fn ranking_score(c: &Candidate) -> f32 {
    c.sum_logprob / c.tokens.len().max(1) as f32
}

/// The best-ranked of `candidates`, `None` when there are none.
fn best_candidate(candidates: Vec<Candidate>) -> Option<Candidate> {
    candidates.into_iter().reduce(|best, c| {
        if ranking_score(&c) > ranking_score(&best) {
            c
        } else {
            best
        }
    })
}

/// Whether a window is silence: the model calls it speechless (no-speech probability over the
/// threshold) and its text is a guess (mean log-probability under the threshold), as in
/// Whisper, or more than its audio could hold: a loop ("you. you. you.", ". . . .") the model
/// is sure of over audio it calls speechless is the model talking to itself (a third of a
/// second of a room's noise, decoded at every temperature, took a minute and gave one).
/// `window_secs`: the window's audio.
fn is_silence(guards: &DecodingGuards, decoded: &WindowDecoding, window_secs: f64) -> bool {
    let Some(threshold) = guards.no_speech_threshold else {
        return false;
    };
    let unsure = guards
        .log_prob_threshold
        .is_none_or(|t| decoded.avg_logprob < t);
    let overfull =
        decoded.chosen.tokens.len() as f64 > MAX_TOKENS_PER_SEC * window_secs + TOKEN_SLACK;
    decoded.no_speech_prob > threshold && (unsure || overfull)
}

/// Tokens a second of speech gives at most (fast speech is about 6, timestamps included), and
/// a few more for any window: text beyond them is no reading of the audio.
const MAX_TOKENS_PER_SEC: f64 = 12.0;
const TOKEN_SLACK: f64 = 10.0;

#[cfg(test)]
mod tests {
    use super::*;

    fn decoding(no_speech_prob: f32, avg_logprob: f32, tokens: usize) -> WindowDecoding {
        WindowDecoding {
            chosen: Candidate {
                tokens: vec![1; tokens],
                ..Candidate::default()
            },
            avg_logprob,
            no_speech_prob,
            temperature: 0.0,
            compression_ratio: 1.0,
        }
    }

    #[test]
    fn a_window_is_silence_when_the_model_calls_it_speechless_and_its_text_is_a_guess_or_overfull()
    {
        let guards = DecodingGuards::default();
        assert!(is_silence(&guards, &decoding(0.9, -1.5, 5), 2.0), "unsure");
        // 224 tokens of loop for 0.3 s of noise, sure of it.
        assert!(
            is_silence(&guards, &decoding(0.93, -0.09, 224), 0.3),
            "overfull"
        );
        assert!(
            !is_silence(&guards, &decoding(0.9, -0.2, 6), 0.3),
            "a sure word"
        );
        // A window of speech that repeats itself (paragraphs read alike), however the model
        // rates its speech, is text.
        assert!(
            !is_silence(&guards, &decoding(0.7, -0.1, 110), 30.0),
            "repeated speech"
        );
        assert!(
            !is_silence(&guards, &decoding(0.1, -0.1, 224), 0.3),
            "heard as speech"
        );
        assert!(!is_silence(
            &DecodingGuards::off(),
            &decoding(0.93, -0.09, 224),
            0.3
        ));
    }

    #[test]
    fn repetition_compresses_far_better_than_speech() {
        let speech = "The harbour wakes before dawn, when the ferries start their engines.";
        let looped = "I'm sorry. ".repeat(20);
        assert!(
            compression_ratio(speech) < 1.5,
            "{}",
            compression_ratio(speech)
        );
        assert!(
            compression_ratio(&looped) > 2.4,
            "{}",
            compression_ratio(&looped)
        );
        assert_eq!(compression_ratio(""), 0.0);
    }

    /// A toy model over tokens 0..3 (3 is the end of text): each candidate repeats its first
    /// token `t`, and ends after `t + 1` of them. Its per-candidate state is the tokens fed.
    fn toy_sampling(n: usize, temperature: f32, seed: u64) -> Vec<Candidate> {
        const EOT: u32 = 3;
        let mut fed: Vec<Vec<u32>> = vec![Vec::new(); n];
        let rules = |_: &mut [f32], _: &[u32]| {};
        let mut step = |keep: &[usize], tokens: &[u32], logits: &mut Vec<Vec<f32>>| {
            let mut kept: Vec<Vec<u32>> = keep.iter().map(|&k| fed[k].clone()).collect();
            for (history, &t) in kept.iter_mut().zip(tokens) {
                history.push(t);
            }
            fed = kept;
            logits.resize_with(fed.len(), Vec::new);
            for (l, history) in logits.iter_mut().zip(&fed) {
                let first = history[0];
                let next = if history.len() as u32 > first {
                    EOT
                } else {
                    first
                };
                *l = vec![f32::NEG_INFINITY; 4];
                l[next as usize] = 0.0;
            }
        };
        let how = Sampling {
            n,
            temperature,
            eot: EOT,
            max_tokens: 10,
        };
        let first = [0.0, 0.5, 1.0, f32::NEG_INFINITY];
        let mut rng = StdRng::seed_from_u64(seed);
        sample_candidates(
            how,
            &first,
            &mut rng,
            &CancellationToken::new(),
            &rules,
            &mut step,
        )
        .expect("not cancelled")
    }

    #[test]
    fn candidates_sampled_side_by_side_keep_their_own_state() {
        for seed in 0..20 {
            let candidates = toy_sampling(5, 1.0, seed);
            assert_eq!(candidates.len(), 5);
            for c in &candidates {
                // Each candidate's continuation was computed from its own tokens, even as
                // others ended before it and the batch shrank.
                let first = c.tokens[0];
                assert_eq!(c.tokens, vec![first; first as usize + 1], "seed {seed}");
                assert_eq!(c.logprobs.len(), c.tokens.len());
            }
            // They come back in the order they ended: shortest first.
            assert!(candidates
                .windows(2)
                .all(|w| w[0].tokens.len() <= w[1].tokens.len()));
        }
        // Across seeds, every first token with a chance is drawn.
        let firsts: std::collections::BTreeSet<u32> = (0..20)
            .flat_map(|seed| toy_sampling(5, 1.0, seed))
            .map(|c| c.tokens[0])
            .collect();
        assert_eq!(firsts, [0, 1, 2].into());
    }

    #[test]
    fn greedy_decoding_takes_the_likeliest_token() {
        let greedy = toy_sampling(1, 0.0, 7);
        assert_eq!(greedy.len(), 1);
        assert_eq!(greedy[0].tokens, vec![2, 2, 2]);
        // log-softmax of the first logits at token 2, then certain tokens.
        let lp = log_softmax(&[0.0, 0.5, 1.0, f32::NEG_INFINITY])[2];
        assert!((greedy[0].sum_logprob - lp).abs() < 1e-6);
    }

    #[test]
    fn a_candidate_that_never_ends_stops_at_the_token_limit() {
        let rules = |_: &mut [f32], _: &[u32]| {};
        let mut steps = 0;
        let mut step = |_: &[usize], _: &[u32], logits: &mut Vec<Vec<f32>>| {
            steps += 1;
            for l in logits.iter_mut() {
                *l = vec![0.0, f32::NEG_INFINITY];
            }
        };
        let how = Sampling {
            n: 2,
            temperature: 0.5,
            eot: 1,
            max_tokens: 4,
        };
        let out = sample_candidates(
            how,
            &[0.0, f32::NEG_INFINITY],
            &mut StdRng::seed_from_u64(1),
            &CancellationToken::new(),
            &rules,
            &mut step,
        )
        .expect("not cancelled");
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|c| c.tokens == [0, 0, 0, 0]));
        let cancel = CancellationToken::new();
        cancel.cancel();
        let cancelled = sample_candidates(
            how,
            &[0.0, f32::NEG_INFINITY],
            &mut StdRng::seed_from_u64(1),
            &cancel,
            &rules,
            &mut step,
        );
        assert!(matches!(cancelled, Err(AsrError::Cancelled)));
        // No step after the last tokens, none once cancelled.
        assert_eq!(steps, 3);
    }

    #[test]
    fn sampling_never_draws_a_masked_token_and_cools_to_the_argmax() {
        let logits = [1.0, f32::NEG_INFINITY, 3.0, 2.0];
        let mut rng = StdRng::seed_from_u64(3);
        let mut scratch = Vec::new();
        let mut counts = [0usize; 4];
        for _ in 0..2000 {
            counts[sample_token(&logits, 1.0, 9, &mut rng, &mut scratch) as usize] += 1;
        }
        assert_eq!(counts[1], 0);
        assert!(counts[2] > counts[3] && counts[3] > counts[0] && counts[0] > 0);
        for _ in 0..100 {
            assert_eq!(sample_token(&logits, 0.01, 9, &mut rng, &mut scratch), 2);
        }
    }

    #[test]
    fn the_best_candidate_has_the_best_log_probability_per_token() {
        let candidate = |len: usize, sum: f32| Candidate {
            tokens: vec![0; len],
            logprobs: vec![sum / len as f32; len],
            sum_logprob: sum,
        };
        // The longer candidate is less likely in total but more likely per token.
        let short = candidate(2, -1.0);
        let long = candidate(10, -3.0);
        let best = best_candidate(vec![short.clone(), long.clone()]).expect("two");
        assert_eq!(best.tokens.len(), 10);
        // The first of equals wins.
        let mut twin = short.clone();
        twin.tokens = vec![1, 1];
        let best = best_candidate(vec![short, twin]).expect("two");
        assert_eq!(best.tokens, vec![0, 0]);
        assert!(best_candidate(Vec::new()).is_none());
    }

    #[test]
    fn a_window_never_samples_past_the_text_context() {
        // Whisper's 448 positions: a short prompt leaves the usual 224, the longest prompt
        // kept (223 tokens, its marker and three start tokens) leaves 221.
        assert_eq!(new_tokens_room(448, 4), 224);
        assert_eq!(new_tokens_room(448, 1 + MAX_PROMPT_TOKENS + 3), 221);
        assert_eq!(new_tokens_room(448, 500), 0);
    }

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
