//! Voice activity detection: Silero VAD (v6, MIT, the model the PyPI `faster-whisper` wheel
//! ships) through ONNX Runtime finds where people speak, and [`VadTranscriber`] hands a
//! transcriber only that speech.
//!
//! Silence is never decoded, so Whisper cannot invent text in it, and long audio is cut at
//! pauses instead of every 30 s: speech regions are joined, in order, into chunks of at most
//! one window of speech, each chunk is transcribed on its own, and every time (segments and
//! words) is mapped back into the original timeline.

use super::{
    AsrError, Segment, TranscribeOptions, Transcriber, Transcript, WindowDone, SAMPLE_RATE,
};
use ort::value::Tensor;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Samples the model judges at a time (32 ms at 16 kHz).
pub const FRAME: usize = 512;
/// Samples of the previous frame the model sees before each frame.
const CONTEXT: usize = 64;
/// The model's recurrent state: 1 × 1 × 128 for each of h and c.
const STATE: usize = 128;
/// Frames per model call (about 33 s), so long audio never makes one huge tensor.
const BATCH_FRAMES: usize = 1024;
/// Chunks transcribed at once.
const CONCURRENT_CHUNKS: usize = 2;
/// Speech per chunk at most: one Whisper window.
pub const MAX_CHUNK_SECONDS: f64 = 30.0;
/// A pause at least this long (ms) ends a sentence; a shorter one may be a breath inside one.
pub const SENTENCE_PAUSE_MS: usize = 300;

/// How speech is told from silence, as Silero's reference `get_speech_timestamps` does.
#[derive(Debug, Clone, PartialEq)]
pub struct VadParams {
    /// A frame at or above this probability is speech.
    pub threshold: f32,
    /// Below this, speech has ended (between the two, the previous state holds).
    pub neg_threshold: f32,
    /// Speech shorter than this is dropped.
    pub min_speech_ms: u32,
    /// Silence this long ends a region.
    pub min_silence_ms: u32,
    /// Regions longer than this are split in a pause (see [`speech_regions`]).
    pub max_speech_secs: f64,
    /// Kept either side of each region, so words are not clipped.
    pub speech_pad_ms: u32,
}

impl Default for VadParams {
    /// faster-whisper's defaults for transcription, with regions at most one window long.
    fn default() -> Self {
        VadParams {
            threshold: 0.5,
            neg_threshold: 0.35,
            min_speech_ms: 0,
            min_silence_ms: 2000,
            max_speech_secs: MAX_CHUNK_SECONDS,
            speech_pad_ms: 400,
        }
    }
}

/// Why voice activity detection failed.
#[derive(Debug, thiserror::Error)]
#[error("voice activity detection failed: {0}")]
pub struct VadError(String);

/// The detector's memory of audio heard so far: its recurrent state, the last samples of the
/// previous frame, and samples not yet a whole frame.
pub struct VadStream {
    h: Vec<f32>,
    c: Vec<f32>,
    context: [f32; CONTEXT],
    pending: Vec<f32>,
}

impl Default for VadStream {
    /// Nothing heard yet: silence before the first frame.
    fn default() -> Self {
        VadStream {
            h: vec![0.0; STATE],
            c: vec![0.0; STATE],
            context: [0.0; CONTEXT],
            pending: Vec::new(),
        }
    }
}

/// The loaded Silero model.
pub struct SileroVad {
    session: crate::onnx::Model,
}

impl SileroVad {
    /// The model file inside the installed `silero-vad` model.
    pub const FILE: &'static str = "silero_vad.onnx";

    /// Loads `silero_vad.onnx` and `libonnxruntime.so` from `dir`.
    pub fn load(dir: &Path) -> Result<SileroVad, VadError> {
        // One thread: the model is tiny and sequential (an LSTM over frames).
        let session = crate::onnx::Model::load(dir, Self::FILE, 1).map_err(VadError)?;
        Ok(SileroVad { session })
    }

    /// The speech probability of each 32 ms frame of 16 kHz `samples` (the last one padded).
    pub fn probabilities(&self, samples: &[f32]) -> Result<Vec<f32>, VadError> {
        let mut stream = VadStream::default();
        let mut probs = self.feed(&mut stream, samples)?;
        probs.extend(self.flush(&mut stream)?);
        Ok(probs)
    }

    /// The probabilities of the whole frames that `samples`, appended to what `stream` was
    /// fed before, complete: audio heard as it arrives (a recording) is judged exactly as the
    /// same audio in one piece would be.
    pub fn feed(&self, stream: &mut VadStream, samples: &[f32]) -> Result<Vec<f32>, VadError> {
        stream.pending.extend_from_slice(samples);
        let frames = stream.pending.len() / FRAME;
        let mut probs = Vec::with_capacity(frames);
        for first in (0..frames).step_by(BATCH_FRAMES) {
            let count = BATCH_FRAMES.min(frames - first);
            let mut input = Vec::with_capacity(count * (CONTEXT + FRAME));
            for f in first..first + count {
                // Each frame is seen after the previous frame's last samples.
                input.extend_from_slice(&stream.context);
                let frame = &stream.pending[f * FRAME..(f + 1) * FRAME];
                input.extend_from_slice(frame);
                stream.context.copy_from_slice(&frame[FRAME - CONTEXT..]);
            }
            probs.extend(self.run(stream, count, input)?);
        }
        stream.pending.drain(..frames * FRAME);
        Ok(probs)
    }

    /// The last, partial frame's probability (padded with silence), if `stream` holds one.
    pub fn flush(&self, stream: &mut VadStream) -> Result<Option<f32>, VadError> {
        if stream.pending.is_empty() {
            return Ok(None);
        }
        let mut rest = std::mem::take(&mut stream.pending);
        rest.resize(FRAME, 0.0);
        Ok(self.feed(stream, &rest)?.pop())
    }

    /// `count` frames (each with its context) through the model, carrying its state.
    fn run(
        &self,
        stream: &mut VadStream,
        count: usize,
        input: Vec<f32>,
    ) -> Result<Vec<f32>, VadError> {
        let (probs, h, c) = self
            .session
            .run(
                || {
                    Ok(ort::inputs![
                        "input" => Tensor::from_array(([count, CONTEXT + FRAME], input.clone()))?,
                        "h" => Tensor::from_array(([1usize, 1, STATE], stream.h.clone()))?,
                        "c" => Tensor::from_array(([1usize, 1, STATE], stream.c.clone()))?,
                    ])
                },
                |outputs| {
                    let values = |name: &str| -> ort::Result<Vec<f32>> {
                        Ok(outputs[name].try_extract_tensor::<f32>()?.1.to_vec())
                    };
                    Ok((values("speech_probs")?, values("hn")?, values("cn")?))
                },
            )
            .map_err(VadError)?;
        if probs.len() != count {
            return Err(VadError(format!(
                "the model gave {} probabilities for {count} frames",
                probs.len()
            )));
        }
        for (name, values, state) in [("hn", h, &mut stream.h), ("cn", c, &mut stream.c)] {
            if values.len() != STATE {
                return Err(VadError(format!(
                    "the model's {name} has {} values",
                    values.len()
                )));
            }
            state.copy_from_slice(&values);
        }
        Ok(probs)
    }

    /// Where `samples` hold speech, as sample ranges in order.
    pub fn speech(
        &self,
        samples: &[f32],
        params: &VadParams,
    ) -> Result<Vec<Range<usize>>, VadError> {
        let probs = self.probabilities(samples)?;
        Ok(speech_regions(&probs, samples.len(), params))
    }
}

/// Speech regions (sample ranges, in order, padded, not overlapping) from per-frame
/// probabilities: hysteresis between the two thresholds, pauses shorter than
/// `min_silence_ms` kept inside a region, over-long regions split in a pause.
///
/// A region is split in a pause (of at least 98 ms) in its second half: at the last one when
/// it is a sentence's end (at least [`SENTENCE_PAUSE_MS`]), which leaves the longest chunk
/// that ends between sentences; otherwise at the longest, the last of equals (within 5%), so
/// a chunk ends where the speaker paused longest rather than at a breath one word into a
/// sentence (Whisper, hearing those words cut off, lost or changed them), with as much
/// silence as the pause holds either side.
pub fn speech_regions(probs: &[f32], total: usize, p: &VadParams) -> Vec<Range<usize>> {
    let per_ms = SAMPLE_RATE as usize / 1000;
    let min_speech = p.min_speech_ms as usize * per_ms;
    let pad = p.speech_pad_ms as usize * per_ms;
    let min_silence = p.min_silence_ms as usize * per_ms;
    let max_speech = (p.max_speech_secs * SAMPLE_RATE as f64) as usize;
    let max_speech = max_speech.saturating_sub(FRAME + 2 * pad).max(FRAME);
    // A pause this long is a place to split a region that grows past `max_speech`.
    let split_pause = 98 * per_ms;
    // A pause this long ends a sentence rather than taking a breath inside one.
    let sentence_pause = SENTENCE_PAUSE_MS * per_ms;
    let mut regions: Vec<Range<usize>> = Vec::new();
    let mut start: Option<usize> = None;
    // Where the current pause began (0: none).
    let mut pause_start = 0usize;
    // The current region's pauses long enough to split at: where each began and where speech
    // resumed (0: not yet).
    let mut pauses: Vec<(usize, usize)> = Vec::new();
    for (i, &prob) in probs.iter().enumerate() {
        let at = i * FRAME;
        if prob >= p.threshold && pause_start != 0 {
            if let Some(last) = pauses.last_mut().filter(|q| q.0 == pause_start) {
                last.1 = at;
            }
            pause_start = 0;
        }
        let Some(s) = start else {
            if prob >= p.threshold {
                start = Some(at);
            }
            continue;
        };
        if at - s > max_speech {
            let length = |q: &(usize, usize)| if q.1 == 0 { at } else { q.1 } - q.0;
            let late = |q: &&(usize, usize)| q.0 >= s + max_speech / 2;
            let candidates: Vec<(usize, usize)> = if pauses.iter().any(|q| late(&q)) {
                pauses.iter().filter(late).copied().collect()
            } else {
                pauses.clone()
            };
            // The last pause, when it is a sentence's end, leaves the longest chunk. When it
            // is only a breath, the longest pause is taken instead; pauses within 5% of the
            // longest count as equal, and the last of them leaves the longer chunk.
            let best = match candidates.last() {
                Some(q) if length(q) >= sentence_pause => Some(*q),
                _ => {
                    let longest = candidates.iter().map(length).max().unwrap_or(0);
                    candidates
                        .iter()
                        .rev()
                        .find(|q| length(q) * 20 >= longest * 19)
                        .copied()
                }
            };
            if let Some((cut, resumed)) = best {
                regions.push(s..cut);
                pauses.retain(|q| q.0 > cut);
                if resumed == 0 {
                    // Still in that pause: the next region starts with the next speech.
                    start = None;
                    pause_start = 0;
                } else {
                    start = Some(resumed);
                }
            } else {
                regions.push(s..at);
                start = None;
                pause_start = 0;
            }
            continue;
        }
        if prob < p.neg_threshold {
            if pause_start == 0 {
                pause_start = at;
            }
            if at - pause_start > split_pause && pauses.last().is_none_or(|q| q.0 != pause_start) {
                pauses.push((pause_start, 0));
            }
            if at - pause_start >= min_silence {
                if pause_start - s > min_speech {
                    regions.push(s..pause_start);
                }
                start = None;
                pauses.clear();
                pause_start = 0;
            }
        }
    }
    if let Some(s) = start {
        if total.saturating_sub(s) > min_speech {
            regions.push(s..total);
        }
    }
    // Pad each region; where two would overlap, the pause between them is shared.
    let n = regions.len();
    for i in 0..n {
        if i == 0 {
            regions[0].start = regions[0].start.saturating_sub(pad);
        }
        if i + 1 < n {
            let gap = regions[i + 1].start.saturating_sub(regions[i].end);
            if gap < 2 * pad {
                regions[i].end += gap / 2;
                regions[i + 1].start -= gap / 2;
            } else {
                regions[i].end = (regions[i].end + pad).min(total);
                regions[i + 1].start = regions[i + 1].start.saturating_sub(pad);
            }
        } else {
            regions[i].end = (regions[i].end + pad).min(total);
        }
    }
    regions.retain(|r| r.start < r.end);
    regions
}

/// Speech regions joined end to end, transcribed as one piece of audio.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    /// The regions, as sample ranges of the original audio, in order.
    pub pieces: Vec<Range<usize>>,
}

impl Chunk {
    pub fn samples(&self) -> usize {
        self.pieces.iter().map(|p| p.len()).sum()
    }

    /// Where the chunk's audio starts and ends in the original, in samples.
    pub fn span(&self) -> Range<usize> {
        self.pieces.first().map_or(0, |p| p.start)..self.pieces.last().map_or(0, |p| p.end)
    }

    /// The chunk's audio, joined.
    pub fn audio(&self, samples: &[f32]) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.samples());
        for p in &self.pieces {
            out.extend_from_slice(&samples[p.clone()]);
        }
        out
    }

    /// A time in the joined audio (seconds) as a time in the original. An end that falls
    /// exactly where two pieces meet belongs to the earlier piece.
    pub fn to_original(&self, secs: f64, is_end: bool) -> f64 {
        let rate = SAMPLE_RATE as f64;
        let mut before = 0.0;
        for (i, p) in self.pieces.iter().enumerate() {
            let len = p.len() as f64 / rate;
            let last = i + 1 == self.pieces.len();
            let inside = if is_end {
                secs <= before + len
            } else {
                secs < before + len
            };
            if inside || last {
                return p.start as f64 / rate + (secs - before).clamp(0.0, len);
            }
            before += len;
        }
        secs
    }
}

impl Chunk {
    /// Where the pieces meet, in seconds of the joined audio.
    fn joins(&self) -> Vec<f64> {
        let rate = SAMPLE_RATE as f64;
        let mut at = 0.0;
        let mut joins = Vec::new();
        for p in &self.pieces[..self.pieces.len().saturating_sub(1)] {
            at += p.len() as f64 / rate;
            joins.push(at);
        }
        joins
    }

    /// `[start, end)` of the joined audio without a sliver across a join: a side holding
    /// under a second and under a third of the span is dropped.
    pub fn trim_to_joins(&self, mut start: f64, mut end: f64) -> (f64, f64) {
        let sliver = |part: f64, whole: f64| part < 1.0 && part < whole / 3.0;
        for join in self.joins() {
            if start < join && join < end {
                if sliver(join - start, end - start) {
                    start = join;
                } else if sliver(end - join, end - start) {
                    end = join;
                }
            }
        }
        (start, end)
    }

    /// `[start, end)` of the joined audio on one side of every join: the side holding more of
    /// it. (A word is spoken in one piece; across a join its span would take in the silence
    /// the join left out.)
    pub fn one_side(&self, mut start: f64, mut end: f64) -> (f64, f64) {
        for join in self.joins() {
            if start < join && join < end {
                if join - start < end - join {
                    start = join;
                } else {
                    end = join;
                }
            }
        }
        (start, end)
    }
}

/// Regions joined, in order, into chunks of at most `max_samples` of speech (a region longer
/// than that is a chunk of its own).
pub fn chunks(regions: &[Range<usize>], max_samples: usize) -> Vec<Chunk> {
    let mut out: Vec<Chunk> = Vec::new();
    let mut current = Chunk { pieces: Vec::new() };
    for r in regions {
        if !current.pieces.is_empty() && current.samples() + r.len() > max_samples {
            out.push(std::mem::replace(
                &mut current,
                Chunk { pieces: Vec::new() },
            ));
        }
        current.pieces.push(r.clone());
    }
    if !current.pieces.is_empty() {
        out.push(current);
    }
    out
}

/// A transcriber that hears only speech: any transcriber behind Silero VAD.
pub struct VadTranscriber {
    inner: Arc<dyn Transcriber>,
    vad: Arc<SileroVad>,
    params: VadParams,
}

impl VadTranscriber {
    pub fn new(inner: Arc<dyn Transcriber>, vad: Arc<SileroVad>, params: VadParams) -> Self {
        VadTranscriber { inner, vad, params }
    }
}

impl Transcriber for VadTranscriber {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn sole_language(&self) -> Option<&str> {
        self.inner.sole_language()
    }

    /// Chunk by chunk; a chunk is one window of the job's progress. Chunks that end before
    /// `from_secs` are skipped, and segments that start before it are left out.
    ///
    /// Chunks are independent, so two are transcribed at once: one's decoding (a sequence of
    /// small steps that a single core runs) overlaps the other's encoder (large products that
    /// use every core). Results are handed on in order.
    fn transcribe_from(
        &self,
        samples: &[f32],
        from_secs: f64,
        options: &TranscribeOptions,
        window_done: &mut dyn FnMut(WindowDone<'_>),
        progress: &dyn Fn(f32),
        cancel: &CancellationToken,
    ) -> Result<Transcript, AsrError> {
        let rate = SAMPLE_RATE as f64;
        let duration = samples.len() as f64 / rate;
        let regions = self
            .vad
            .speech(samples, &self.params)
            .map_err(AsrError::model)?;
        let from = (from_secs.max(0.0) * rate) as usize;
        let todo: Vec<Chunk> = chunks(&regions, (MAX_CHUNK_SECONDS * rate) as usize)
            .into_iter()
            .filter(|c| c.span().end > from)
            .collect();
        tracing::debug!(
            regions = regions.len(),
            chunks = todo.len(),
            speech_secs = regions.iter().map(|r| r.len()).sum::<usize>() as f64 / rate,
            duration,
            "speech found"
        );
        let spans: Vec<Vec<(f64, f64)>> = todo
            .iter()
            .map(|c| {
                c.pieces
                    .iter()
                    .map(|p| (p.start as f64 / rate, p.end as f64 / rate))
                    .collect()
            })
            .collect();
        tracing::trace!(chunks = ?spans, "chunks");
        let total: usize = todo.iter().map(Chunk::samples).sum::<usize>().max(1);
        let mut done = 0usize;
        let mut segments = Vec::new();
        let mut finish = |chunk: &Chunk, part: Transcript| {
            let found: Vec<Segment> = part
                .segments
                .into_iter()
                .map(|s| remap(s, chunk))
                .filter(|s| s.start >= from_secs)
                .collect();
            done += chunk.samples();
            progress(done as f32 / total as f32);
            window_done(WindowDone {
                segments: &found,
                done_secs: chunk.span().end as f64 / rate,
                duration_secs: duration,
            });
            segments.extend(found);
        };
        let mut options = options.clone();
        let mut rest = &todo[..];
        // A model that detects the language does so once, on the first chunk; every chunk is
        // then transcribed in it.
        if options.language.is_none() {
            options.language = self.inner.sole_language().map(str::to_string);
        }
        if options.language.is_none() {
            if let Some((first, others)) = rest.split_first() {
                let part = self.transcribe_chunk(samples, first, &options, cancel)?;
                options.language = part.language.clone();
                finish(first, part);
                rest = others;
            }
        }
        // Stops the other worker when one fails, without cancelling the caller's job.
        let stop = cancel.child_token();
        let next = AtomicUsize::new(0);
        let (sender, results) = mpsc::channel::<(usize, Result<Transcript, AsrError>)>();
        // The workers belong to the caller's job: batch work stays batch work on them.
        let job = headroom_base::cpu::this_job();
        let outcome = std::thread::scope(|scope| {
            for _ in 0..CONCURRENT_CHUNKS.min(rest.len()) {
                let sender = sender.clone();
                let (next, options, stop, job) = (&next, &options, &stop, job.clone());
                scope.spawn(move || {
                    job.enter(|| loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= rest.len() || stop.is_cancelled() {
                            break;
                        }
                        let part = self.transcribe_chunk(samples, &rest[i], options, stop);
                        if sender.send((i, part)).is_err() {
                            break;
                        }
                    })
                });
            }
            drop(sender);
            // In order: a chunk that finished early waits for the ones before it.
            let mut waiting: BTreeMap<usize, Transcript> = BTreeMap::new();
            let mut emitted = 0;
            for (i, part) in results {
                match part {
                    Ok(part) => {
                        waiting.insert(i, part);
                    }
                    Err(e) => {
                        stop.cancel();
                        return Err(e);
                    }
                }
                while let Some(part) = waiting.remove(&emitted) {
                    finish(&rest[emitted], part);
                    emitted += 1;
                }
            }
            if emitted < rest.len() {
                return Err(AsrError::Cancelled);
            }
            Ok(())
        });
        outcome?;
        // The silence after the last speech is done too.
        window_done(WindowDone {
            segments: &[],
            done_secs: duration,
            duration_secs: duration,
        });
        Ok(Transcript {
            speakers: Vec::new(),
            language: options.language,
            duration,
            segments,
        })
    }
}

impl VadTranscriber {
    /// One chunk. (A chunk is shorter than a window; where Whisper stops well before its
    /// end, the engine hears the rest again, as it does for any audio's last window.)
    fn transcribe_chunk(
        &self,
        samples: &[f32],
        chunk: &Chunk,
        options: &TranscribeOptions,
        cancel: &CancellationToken,
    ) -> Result<Transcript, AsrError> {
        self.inner
            .transcribe(&chunk.audio(samples), options, &|_| {}, cancel)
    }
}

/// A segment of a chunk, timed in the original audio.
///
/// Whisper's segment times are loose by a few tenths of a second, so a segment of speech
/// after a join may start a little before it: that sliver would stretch the segment over the
/// whole silence the join left out. A segment with less than a second and a third of its
/// length on one side of a join is moved wholly to the other side. Its words stay inside it:
/// a word timed across a join keeps the side that holds more of it, and none lies outside
/// the segment's span.
fn remap(mut s: Segment, chunk: &Chunk) -> Segment {
    let (start, end) = chunk.trim_to_joins(s.start, s.end);
    s.start = chunk.to_original(start, false);
    s.end = chunk.to_original(end, true).max(s.start);
    for w in &mut s.words {
        let (w_start, w_end) = chunk.one_side(w.start.clamp(start, end), w.end.clamp(start, end));
        w.start = chunk.to_original(w_start, false).clamp(s.start, s.end);
        w.end = chunk.to_original(w_end, true).clamp(w.start, s.end);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: usize = 16;

    /// Probabilities for frames: speech where `speech(t_ms)` is true.
    fn probs(total_ms: usize, speech: impl Fn(usize) -> bool) -> Vec<f32> {
        (0..total_ms * MS / FRAME)
            .map(|f| if speech(f * FRAME / MS) { 0.9 } else { 0.05 })
            .collect()
    }

    fn no_pad() -> VadParams {
        VadParams {
            speech_pad_ms: 0,
            ..VadParams::default()
        }
    }

    #[test]
    fn short_pauses_stay_inside_a_region_and_long_ones_split_it() {
        // Speech 1–3 s and 3.5–5 s (a 0.5 s pause), then 9–10 s after a 4 s silence, and
        // 4 s of silence to the end.
        let p = probs(14_000, |t| {
            (1000..3000).contains(&t) || (3500..5000).contains(&t) || (9000..10_000).contains(&t)
        });
        let r = speech_regions(&p, 14_000 * MS, &no_pad());
        assert_eq!(r.len(), 2, "{r:?}");
        let secs = |s: usize| s as f64 / SAMPLE_RATE as f64;
        assert!((secs(r[0].start) - 1.0).abs() < 0.04, "{r:?}");
        assert!((secs(r[0].end) - 5.0).abs() < 0.04, "{r:?}");
        assert!((secs(r[1].start) - 9.0).abs() < 0.04, "{r:?}");
        assert!((secs(r[1].end) - 10.0).abs() < 0.04, "{r:?}");
    }

    #[test]
    fn padding_widens_regions_and_shares_a_narrow_gap() {
        let p = probs(12_000, |t| {
            (1000..3000).contains(&t) || (5500..6000).contains(&t)
        });
        let params = VadParams {
            min_silence_ms: 500,
            ..VadParams::default()
        };
        let r = speech_regions(&p, 12_000 * MS, &params);
        assert_eq!(r.len(), 2, "{r:?}");
        // 400 ms each side where there is room.
        assert!(
            r[0].start <= 600 * MS + FRAME && r[0].start >= 600 * MS - FRAME,
            "{r:?}"
        );
        assert!(r[1].end >= 6400 * MS - FRAME, "{r:?}");
        assert!(r[0].end <= r[1].start, "no overlap: {r:?}");
        // A gap narrower than two pads is shared.
        let p = probs(4_000, |t| {
            (0..1000).contains(&t) || (1600..2500).contains(&t)
        });
        let r = speech_regions(&p, 4_000 * MS, &params);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(r[0].end, r[1].start, "{r:?}");
    }

    #[test]
    fn silence_is_no_region_and_speech_to_the_end_runs_to_the_end() {
        assert!(speech_regions(&probs(5_000, |_| false), 5_000 * MS, &no_pad()).is_empty());
        let r = speech_regions(&probs(5_000, |t| t >= 4000), 5_000 * MS + 7, &no_pad());
        assert_eq!(r, vec![4000 * MS..5_000 * MS + 7]);
        // A pause at the end shorter than `min_silence_ms` is not an end either.
        let r = speech_regions(&probs(5_000, |t| t < 4000), 5_000 * MS, &no_pad());
        assert_eq!(r, vec![0..5_000 * MS]);
    }

    #[test]
    fn overlong_speech_is_split_at_its_last_pause() {
        // 50 s of speech with a 200 ms pause every 7 s: no region may pass 30 s.
        let p = probs(50_000, |t| t % 7000 < 6800);
        let r = speech_regions(&p, 50_000 * MS, &no_pad());
        assert!(r.len() >= 2, "{r:?}");
        for region in &r {
            assert!(region.len() <= 30 * SAMPLE_RATE as usize, "{r:?}");
        }
        // Split where speech paused, not mid-word: each cut lies in a pause.
        for region in &r[..r.len() - 1] {
            let end_ms = region.end / MS;
            assert!(end_ms % 7000 >= 6700, "cut at {end_ms} ms: {r:?}");
        }
    }

    #[test]
    fn overlong_speech_is_split_at_its_longest_late_pause_not_a_breath_after_it() {
        // A sentence's end (600 ms) at 20 s, breaths (200 ms) at 26 and 28 s, a longer pause
        // (900 ms) at 5 s, too early to leave a long enough region before it.
        let p = probs(40_000, |t| {
            !(5000..5900).contains(&t)
                && !(20_000..20_600).contains(&t)
                && !(26_000..26_200).contains(&t)
                && !(28_000..28_200).contains(&t)
        });
        let r = speech_regions(&p, 40_000 * MS, &no_pad());
        assert!(r.len() >= 2, "{r:?}");
        let end_ms = r[0].end / MS;
        assert!(
            (20_000..20_100).contains(&end_ms),
            "cut at {end_ms} ms: {r:?}"
        );
        let start_ms = r[1].start / MS;
        assert!((20_500..20_700).contains(&start_ms), "{r:?}");
    }

    #[test]
    fn overlong_speech_is_split_at_its_last_pause_when_that_ends_a_sentence() {
        // Sentences' ends at 20 s (900 ms) and 27 s (400 ms), a breath (200 ms) at 25 s: the
        // last sentence's end is taken, though an earlier pause is longer.
        let p = probs(40_000, |t| {
            !(20_000..20_900).contains(&t)
                && !(25_000..25_200).contains(&t)
                && !(27_000..27_400).contains(&t)
        });
        let r = speech_regions(&p, 40_000 * MS, &no_pad());
        assert!(r.len() >= 2, "{r:?}");
        let end_ms = r[0].end / MS;
        assert!(
            (27_000..27_100).contains(&end_ms),
            "cut at {end_ms} ms: {r:?}"
        );
        let start_ms = r[1].start / MS;
        assert!((27_300..27_500).contains(&start_ms), "{r:?}");
    }

    #[test]
    fn words_stay_inside_their_segment_across_a_join() {
        use crate::asr::Word;
        let s = SAMPLE_RATE as usize;
        // Speech 1–3 s and 10–12 s, joined: the join is 2 s into the chunk.
        let chunk = Chunk {
            pieces: vec![s..3 * s, 10 * s..12 * s],
        };
        let word = |text: &str, start: f64, end: f64| Word {
            speaker: None,
            start,
            end,
            text: text.into(),
            probability: 0.9,
        };
        // A segment timed a sliver before the join, a word across it, and one past the
        // segment's end.
        let segment = Segment {
            speaker: None,
            start: 1.8,
            end: 3.5,
            text: "harbour lights".into(),
            words: vec![word("harbour", 1.9, 2.6), word("lights", 2.6, 3.7)],
        };
        let s = remap(segment, &chunk);
        assert!((s.start - 10.0).abs() < 1e-9, "{s:?}");
        assert!((s.end - 11.5).abs() < 1e-9, "{s:?}");
        for w in &s.words {
            assert!(
                s.start <= w.start && w.start <= w.end && w.end <= s.end,
                "{s:?}"
            );
        }
        assert!((s.words[0].start - 10.0).abs() < 1e-9, "{s:?}");
        assert!((s.words[0].end - 10.6).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn chunks_join_regions_up_to_a_window_and_map_times_back() {
        let s = SAMPLE_RATE as usize;
        let regions = vec![s..3 * s, 10 * s..12 * s, 20 * s..50 * s, 60 * s..61 * s];
        let c = chunks(&regions, 30 * s);
        assert_eq!(c.len(), 3, "{c:?}");
        assert_eq!(c[0].pieces, vec![s..3 * s, 10 * s..12 * s]);
        assert_eq!(c[1].pieces, vec![20 * s..50 * s]);
        assert_eq!(c[0].samples(), 4 * s);
        // 1.5 s into the joined audio is 2.5 s into the original; 2.0 s is where the pieces
        // meet: the end of the first piece as an end, the start of the second as a start.
        assert!((c[0].to_original(1.5, false) - 2.5).abs() < 1e-9);
        assert!((c[0].to_original(2.0, true) - 3.0).abs() < 1e-9);
        assert!((c[0].to_original(2.0, false) - 10.0).abs() < 1e-9);
        assert!((c[0].to_original(3.0, false) - 11.0).abs() < 1e-9);
        // Past the end stays at the end.
        assert!((c[0].to_original(9.0, true) - 12.0).abs() < 1e-9);
        // A sliver before a join belongs to the speech after it, and one after a join to the
        // speech before it; a segment well on both sides keeps its span.
        assert_eq!(c[0].trim_to_joins(1.6, 5.0), (2.0, 5.0));
        assert_eq!(c[0].trim_to_joins(0.0, 2.3), (0.0, 2.0));
        assert_eq!(c[0].trim_to_joins(0.5, 3.5), (0.5, 3.5));
        assert!((c[0].to_original(2.0, false) - 10.0).abs() < 1e-9);
        let audio: Vec<f32> = (0..62 * s).map(|i| i as f32).collect();
        let joined = c[0].audio(&audio);
        assert_eq!(joined.len(), 4 * s);
        assert_eq!(joined[2 * s], (10 * s) as f32);
    }
}
