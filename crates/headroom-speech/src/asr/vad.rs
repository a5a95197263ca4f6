//! Voice activity detection: Silero VAD (v6, MIT, the model the PyPI `faster-whisper` wheel
//! ships) through ONNX Runtime finds where people speak, and [`VadTranscriber`] hands a
//! transcriber only that speech.
//!
//! Silence is never decoded, so Whisper cannot invent text in it, and long audio is cut at
//! pauses instead of every 30 s: speech regions are joined, in order, into chunks of a little
//! less than one window of speech, transcribed in order (a sentence that runs on past a
//! chunk's end is heard again by the next), and every time (segments and words) is mapped
//! back into the original timeline.

use super::{
    AsrError, Segment, TranscribeOptions, Transcriber, Transcript, WindowDone, SAMPLE_RATE,
};
use crate::audio::{AudioError, SampleSource};
use ort::value::Tensor;
use std::collections::VecDeque;
use std::ops::Range;
use std::path::Path;
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
/// What a chunk hears: one Whisper window, whatever was carried over into it.
pub const MAX_CHUNK_SECONDS: f64 = 30.0;
/// Speech of the next chunk each chunk hears after its own (seconds), so that a sentence a
/// pause cuts where the chunk ends is not heard as ending there.
pub const JOIN_MARGIN_SECONDS: f64 = 2.0;
/// The longest region of speech, split at a pause when longer: a window less the margin
/// after it and 2 s of room for what is carried over from the chunk before. (A chunk takes
/// whole regions while they fit beside what was carried, and cuts a region only when the
/// carried audio leaves less room than that.)
pub const CHUNK_SPEECH_SECONDS: f64 = MAX_CHUNK_SECONDS - 2.0 * JOIN_MARGIN_SECONDS;
/// A sentence that runs on past the end of a chunk's own speech is heard again, whole, by the
/// next chunk, when it began at most this long before that end (seconds); a longer one is
/// cut there, by its words' times.
pub const MAX_CARRY_SECONDS: f64 = 8.0;
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
    /// faster-whisper's defaults for transcription, with regions at most a chunk's own speech
    /// long.
    fn default() -> Self {
        VadParams {
            threshold: 0.5,
            neg_threshold: 0.35,
            min_speech_ms: 0,
            min_silence_ms: 2000,
            max_speech_secs: CHUNK_SPEECH_SECONDS,
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

    /// The speech probability of each 32 ms frame of 16 kHz `samples` (the last one padded),
    /// read a model call's worth at a time.
    pub fn probabilities(&self, samples: &dyn SampleSource) -> Result<Vec<f32>, VadError> {
        let mut stream = VadStream::default();
        let mut probs = Vec::with_capacity(samples.len() / FRAME + 1);
        let step = BATCH_FRAMES * FRAME;
        let mut block = Vec::with_capacity(step.min(samples.len()));
        for start in (0..samples.len()).step_by(step) {
            block.clear();
            samples
                .read_into(start..start + step, &mut block)
                .map_err(|e| VadError(e.to_string()))?;
            probs.extend(self.feed(&mut stream, &block)?);
        }
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
        samples: &dyn SampleSource,
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
    pub fn audio(&self, samples: &dyn SampleSource) -> Result<Vec<f32>, AudioError> {
        let mut out = Vec::with_capacity(self.samples());
        for p in &self.pieces {
            samples.read_into(p.clone(), &mut out)?;
        }
        Ok(out)
    }

    /// The audio from `from` to `to` samples into the joined audio, as ranges of the original.
    pub fn between(&self, from: usize, to: usize) -> Vec<Range<usize>> {
        joined_between(&self.pieces, from, to)
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

/// Speech not yet heard, in order: the regions voice activity detection found, less what
/// earlier chunks took.
#[derive(Debug, Clone, PartialEq)]
struct Unheard {
    regions: VecDeque<Range<usize>>,
}

impl Unheard {
    /// The speech of `regions` from sample `from` on (a region running across it starts
    /// there).
    fn from(regions: &[Range<usize>], from: usize) -> Unheard {
        Unheard {
            regions: regions
                .iter()
                .filter(|r| r.end > from)
                .map(|r| r.start.max(from)..r.end)
                .collect(),
        }
    }

    fn samples(&self) -> usize {
        self.regions.iter().map(|r| r.len()).sum()
    }

    /// The next chunk: whole regions, in order, while they fit in `most` samples (at least
    /// one); a first region longer than that is cut at `most`, and its rest heard next.
    fn take(&mut self, most: usize) -> Option<Chunk> {
        let most = most.max(1);
        let mut pieces: Vec<Range<usize>> = Vec::new();
        let mut room = most;
        while let Some(region) = self.regions.front_mut() {
            if region.len() <= room {
                room -= region.len();
                pieces.extend(self.regions.pop_front());
            } else {
                if pieces.is_empty() {
                    pieces.push(region.start..region.start + room);
                    region.start += room;
                }
                break;
            }
        }
        (!pieces.is_empty()).then_some(Chunk { pieces })
    }

    /// The first `n` samples still unheard, as ranges of the original.
    fn first(&self, n: usize) -> Vec<Range<usize>> {
        joined_between(&self.regions, 0, n)
    }
}

/// The audio from `from` to `to` samples into `pieces` joined end to end, as ranges of the
/// original (the pieces after `to` are not looked at).
fn joined_between<'a>(
    pieces: impl IntoIterator<Item = &'a Range<usize>>,
    from: usize,
    to: usize,
) -> Vec<Range<usize>> {
    let mut at = 0;
    let mut out = Vec::new();
    for p in pieces {
        if at >= to {
            break;
        }
        let (start, end) = (from.max(at), to.min(at + p.len()));
        if start < end {
            out.push(p.start + (start - at)..p.start + (end - at));
        }
        at += p.len();
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

    /// Chunk by chunk, in order; a chunk is one window of the job's progress. Chunks that end
    /// before `from_secs` are skipped, and segments that start before it are left out.
    ///
    /// A pause cuts a sentence where one chunk ends and the next begins; heard apart, Whisper
    /// ended the first half with words of its own and misheard the second. So, as Whisper
    /// does between its windows: each chunk also hears the first seconds of the next
    /// ([`JOIN_MARGIN_SECONDS`]), and a sentence that runs on past the chunk's own speech is
    /// dropped there and heard again, whole, by the next chunk (see [`at_the_join`]). Each
    /// word is kept once. (Reading the text kept before each chunk as its prompt, as
    /// Whisper's `condition_on_previous_text` does, was measured worse: a chunk heard without
    /// punctuation passed that on to every later one.) Chunks are therefore transcribed one
    /// after another; two at once saved about 5%.
    fn transcribe_from(
        &self,
        samples: &dyn SampleSource,
        from_secs: f64,
        options: &TranscribeOptions,
        window_done: &mut dyn FnMut(WindowDone<'_>),
        progress: &dyn Fn(f32),
        cancel: &CancellationToken,
    ) -> Result<Transcript, AsrError> {
        let regions = self
            .vad
            .speech(samples, &self.params)
            .map_err(AsrError::model)?;
        transcribe_regions(
            &*self.inner,
            samples,
            &regions,
            from_secs,
            options,
            window_done,
            progress,
            cancel,
        )
    }
}

/// [`VadTranscriber::transcribe_from`] once the speech is found: `regions`, in order.
#[allow(clippy::too_many_arguments)]
fn transcribe_regions(
    inner: &dyn Transcriber,
    samples: &dyn SampleSource,
    regions: &[Range<usize>],
    from_secs: f64,
    options: &TranscribeOptions,
    window_done: &mut dyn FnMut(WindowDone<'_>),
    progress: &dyn Fn(f32),
    cancel: &CancellationToken,
) -> Result<Transcript, AsrError> {
    let rate = SAMPLE_RATE as f64;
    let duration = samples.len() as f64 / rate;
    let from = ((from_secs.max(0.0) * rate) as usize).min(samples.len());
    let mut unheard = Unheard::from(regions, from);
    let total = unheard.samples().max(1);
    tracing::debug!(
        regions = unheard.regions.len(),
        speech_secs = total as f64 / rate,
        duration,
        "speech found"
    );
    let window = (MAX_CHUNK_SECONDS * rate) as usize;
    let margin = (JOIN_MARGIN_SECONDS * rate) as usize;
    let mut options = options.clone();
    if options.language.is_none() {
        options.language = inner.sole_language().map(str::to_string);
    }
    let mut done = 0usize;
    let mut segments: Vec<Segment> = Vec::new();
    // Audio of the chunk before that the next one hears again (a sentence running on, or
    // what Whisper left unheard before the join).
    let mut carried: Vec<Range<usize>> = Vec::new();
    loop {
        if cancel.is_cancelled() {
            return Err(AsrError::Cancelled);
        }
        let carried_samples: usize = carried.iter().map(|r| r.len()).sum();
        // What was carried, this chunk's own speech and the margin fill one window.
        let own_room = window
            .saturating_sub(margin + carried_samples)
            .max(window / 2);
        let Some(chunk) = unheard.take(own_room) else {
            break;
        };
        let tail = unheard.first(margin);
        let more = !tail.is_empty();
        let own_end = carried_samples + chunk.samples();
        let heard = Chunk {
            pieces: carried
                .iter()
                .chain(&chunk.pieces)
                .chain(&tail)
                .cloned()
                .collect(),
        };
        tracing::trace!(
            carried_secs = carried_samples as f64 / rate,
            pieces = ?heard.pieces.iter().map(|p| (p.start as f64 / rate, p.end as f64 / rate)).collect::<Vec<_>>(),
            "chunk"
        );
        let join = own_end as f64 / rate;
        // Whisper need not start a window of its own on what the next chunk hears again.
        options.stop_at_secs = more.then_some(join - MAX_CARRY_SECONDS);
        let audio = heard.audio(samples)?;
        let mut decoded_to = audio.len() as f64 / rate;
        let part = inner.transcribe_from(
            &audio,
            0.0,
            &options,
            &mut |w| decoded_to = w.done_secs,
            &|_| {},
            cancel,
        )?;
        // A model that detects the language does so once, on the first chunk; every chunk
        // is then transcribed in it.
        if options.language.is_none() {
            options.language = part.language.clone();
        }
        let (found, carry_from) = at_the_join(part.segments, &heard, join, more, decoded_to);
        carried =
            carry_from.map_or_else(Vec::new, |at| heard.between((at * rate) as usize, own_end));
        let found: Vec<Segment> = found.into_iter().filter(|s| s.start >= from_secs).collect();
        done += chunk.samples();
        progress(done as f32 / total as f32);
        // What is carried is not done: a job resumed here hears it again.
        let done_secs = carried.first().map_or(chunk.span().end, |r| r.start) as f64 / rate;
        window_done(WindowDone {
            segments: &found,
            done_secs,
            duration_secs: duration,
        });
        segments.extend(found);
    }
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

/// A chunk's segments (timed in `heard`, its audio joined), split where its own speech ends
/// (`join`, seconds into `heard`; the next chunk's speech follows when `more`): those before
/// are kept, timed in the original. The first segment that runs past the join is a sentence
/// the pause there cut: when it began at most [`MAX_CARRY_SECONDS`] before the join, it and
/// all after it are dropped and its start is returned (the next chunk hears it again, whole);
/// a longer one keeps its words before the join (without word times, the whole segment, its
/// end cut at the join). Segments after the join are the next chunk's. Where the model
/// stopped before the join (`decoded_to`: it left a sentence unfinished at a window's end
/// and was told to start no window of its own on it), that point is returned: the next
/// chunk hears the rest, as Whisper's next window would.
fn at_the_join(
    segments: Vec<Segment>,
    heard: &Chunk,
    join: f64,
    more: bool,
    decoded_to: f64,
) -> (Vec<Segment>, Option<f64>) {
    /// Whisper's segment times are loose by this much (seconds).
    const LOOSE: f64 = 0.1;
    if !more {
        return (
            segments.into_iter().map(|s| remap(s, heard)).collect(),
            None,
        );
    }
    let stopped_short = decoded_to < join - LOOSE;
    let past = |start: f64, end: f64| (start + end) / 2.0 >= join;
    let mut kept = Vec::with_capacity(segments.len());
    for mut s in segments {
        if s.start >= join || (stopped_short && s.start >= decoded_to) {
            break;
        }
        let runs_on = s.end > join + LOOSE || s.words.iter().any(|w| past(w.start, w.end));
        if !runs_on {
            kept.push(remap(s, heard));
            continue;
        }
        if join - s.start <= MAX_CARRY_SECONDS {
            return (kept, Some(s.start.max(0.0)));
        }
        if !s.words.is_empty() {
            let separator = s.word_separator();
            s.words.retain(|w| !past(w.start, w.end));
            if s.words.is_empty() {
                break;
            }
            s.write_text_from_words(separator);
            s.end = s.words[s.words.len() - 1].end;
        }
        s.end = s.end.min(join);
        kept.push(remap(s, heard));
        break;
    }
    (kept, stopped_short.then_some(decoded_to.max(0.0)))
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
    use crate::asr::Word;

    const MS: usize = 16;

    /// Probabilities for frames: speech where `speech(t_ms)` is true.
    fn probs(total_ms: usize, speech: impl Fn(usize) -> bool) -> Vec<f32> {
        (0..total_ms * MS / FRAME)
            .map(|f| if speech(f * FRAME / MS) { 0.9 } else { 0.05 })
            .collect()
    }

    /// Without padding, regions of 30 s at most (where the tests place their pauses).
    fn no_pad() -> VadParams {
        VadParams {
            speech_pad_ms: 0,
            max_speech_secs: 30.0,
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
        let mut unheard = Unheard::from(&regions, 0);
        let mut c = Vec::new();
        while let Some(chunk) = unheard.take(28 * s) {
            c.push(chunk);
        }
        assert_eq!(c.len(), 3, "{c:?}");
        assert_eq!(c[0].pieces, vec![s..3 * s, 10 * s..12 * s]);
        // A region longer than the room is cut there, and its rest is heard next.
        assert_eq!(c[1].pieces, vec![20 * s..48 * s]);
        assert_eq!(c[2].pieces, vec![48 * s..50 * s, 60 * s..61 * s]);
        assert_eq!(c[0].samples(), 4 * s);
        // A job resumed inside a region hears it from there; the next samples are found
        // across regions.
        let resumed = Unheard::from(&regions, 11 * s);
        assert_eq!(resumed.samples(), (1 + 30 + 1) * s);
        assert_eq!(resumed.first(2 * s), vec![11 * s..12 * s, 20 * s..21 * s]);
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
        let joined = c[0].audio(&audio).unwrap();
        assert_eq!(joined.len(), 4 * s);
        assert_eq!(joined[2 * s], (10 * s) as f32);
    }

    /// Reads audio written by [`spoken`] as Whisper hears speech: a segment per sentence
    /// (a word ending in "."), each word timed. Where the audio stops inside a sentence it
    /// ends it with a word of its own, and audio that begins inside one it mishears at first:
    /// the two faults the issue saw at joins ("inside the ship." / "work covered").
    struct SentenceReader;

    const WORDS: &[&str] = &[
        "When",
        "the",
        "divers",
        "opened",
        "the",
        "wreck",
        "they",
        "found",
        "that",
        "the",
        "instruments",
        "inside",
        "were",
        "covered",
        "in",
        "salt.",
        "Gulls",
        "circle",
        "the",
        "market.",
    ];

    /// Seconds per word, and between words of a run.
    const WORD: f64 = 0.5;
    const GAP: f64 = 0.1;

    impl Transcriber for SentenceReader {
        fn name(&self) -> &str {
            "sentence-reader"
        }

        fn transcribe_from(
            &self,
            samples: &dyn SampleSource,
            _from_secs: f64,
            _options: &TranscribeOptions,
            _window_done: &mut dyn FnMut(WindowDone<'_>),
            _progress: &dyn Fn(f32),
            _cancel: &CancellationToken,
        ) -> Result<Transcript, AsrError> {
            let audio = samples.read(0..samples.len())?;
            let rate = SAMPLE_RATE as f64;
            // Runs of one value are words.
            let mut words: Vec<Word> = Vec::new();
            let mut i = 0;
            while i < audio.len() {
                let value = audio[i];
                let run = audio[i..].iter().take_while(|&&v| v == value).count();
                if value > 0.0 {
                    words.push(Word {
                        start: i as f64 / rate,
                        end: (i + run) as f64 / rate,
                        text: WORDS[(value * 1024.0).round() as usize - 1].into(),
                        probability: 1.0,
                        speaker: None,
                    });
                }
                i += run;
            }
            if let Some(first) = words.first_mut() {
                if first.text.starts_with(char::is_lowercase) {
                    first.text = "work".into();
                }
            }
            if words.last().is_some_and(|w| !w.text.ends_with('.')) {
                let end = audio.len() as f64 / rate;
                words.push(Word {
                    start: end - 0.2,
                    end,
                    text: "ship.".into(),
                    probability: 0.5,
                    speaker: None,
                });
            }
            let mut segments: Vec<Segment> = Vec::new();
            let mut sentence: Vec<Word> = Vec::new();
            for w in words {
                let ends = w.text.ends_with('.');
                sentence.push(w);
                if ends {
                    let words = std::mem::take(&mut sentence);
                    segments.push(Segment {
                        start: words[0].start,
                        end: words[words.len() - 1].end,
                        text: words
                            .iter()
                            .map(|w| w.text.as_str())
                            .collect::<Vec<_>>()
                            .join(" "),
                        words,
                        speaker: None,
                    });
                }
            }
            Ok(Transcript {
                language: Some("en".into()),
                duration: audio.len() as f64 / rate,
                segments,
                speakers: Vec::new(),
            })
        }
    }

    /// Audio of `runs` (word indices said one after another), each run followed by its
    /// silence in seconds; the speech regions, as voice activity detection finds them.
    fn spoken(runs: &[(&[usize], f64)]) -> (Vec<f32>, Vec<Range<usize>>) {
        let rate = SAMPLE_RATE as f64;
        let (mut audio, mut regions) = (Vec::new(), Vec::new());
        for (words, silence) in runs {
            let start = audio.len();
            for (n, &w) in words.iter().enumerate() {
                if n > 0 {
                    audio.resize(audio.len() + (GAP * rate) as usize, 0.0);
                }
                audio.resize(
                    audio.len() + (WORD * rate) as usize,
                    (w + 1) as f32 / 1024.0,
                );
            }
            regions.push(start..audio.len());
            audio.resize(audio.len() + (silence * rate) as usize, 0.0);
        }
        (audio, regions)
    }

    fn read(audio: &[f32], regions: &[Range<usize>], from_secs: f64) -> (Transcript, Vec<f64>) {
        read_with(&SentenceReader, audio, regions, from_secs)
    }

    fn read_with(
        reader: &dyn Transcriber,
        audio: &[f32],
        regions: &[Range<usize>],
        from_secs: f64,
    ) -> (Transcript, Vec<f64>) {
        let mut done = Vec::new();
        let transcript = transcribe_regions(
            reader,
            &audio,
            regions,
            from_secs,
            &TranscribeOptions {
                word_timestamps: true,
                ..Default::default()
            },
            &mut |w| done.push(w.done_secs),
            &|_| {},
            &CancellationToken::new(),
        )
        .unwrap();
        (transcript, done)
    }

    /// [`SentenceReader`] that notes how long each piece of audio it is handed is and, when
    /// `stops_short`, does as Whisper does at a window's end when the caller lets it stop
    /// (`stop_at_secs`): it leaves the sentences ending in the last 5 s unfinished and says
    /// it is done up to the end of the sentence before them.
    struct Heard {
        stops_short: bool,
        lengths: std::sync::Mutex<Vec<f64>>,
    }

    impl Transcriber for Heard {
        fn name(&self) -> &str {
            "heard"
        }

        fn transcribe_from(
            &self,
            samples: &dyn SampleSource,
            from_secs: f64,
            options: &TranscribeOptions,
            window_done: &mut dyn FnMut(WindowDone<'_>),
            progress: &dyn Fn(f32),
            cancel: &CancellationToken,
        ) -> Result<Transcript, AsrError> {
            let length = samples.len() as f64 / SAMPLE_RATE as f64;
            self.lengths.lock().unwrap().push(length);
            let mut t = SentenceReader.transcribe_from(
                samples,
                from_secs,
                options,
                &mut |_| {},
                progress,
                cancel,
            )?;
            let mut done_secs = length;
            if let (true, Some(stop)) = (self.stops_short, options.stop_at_secs) {
                let kept = t.segments.iter().filter(|s| s.end <= length - 5.0).count();
                if let Some(last) = kept.checked_sub(1).map(|k| t.segments[k].end) {
                    if last >= stop {
                        t.segments.truncate(kept);
                        done_secs = last;
                    }
                }
            }
            window_done(WindowDone {
                segments: &t.segments,
                done_secs,
                duration_secs: length,
            });
            Ok(t)
        }
    }

    #[test]
    fn every_chunk_is_heard_in_one_window_whatever_was_carried_into_it() {
        // Talk with no pause long enough to end a region: regions of 43 words (25.7 s, as
        // voice activity detection splits them) each ending inside an 8-word sentence, so
        // nearly every chunk carries the start of a sentence into the next (up to 4.1 s).
        let sentence = [16, 17, 1, 2, 4, 5, 9, 19];
        let said: Vec<usize> = (0..8 * 43).map(|i| sentence[i % 8]).collect();
        let runs: Vec<(&[usize], f64)> = said.chunks(43).map(|r| (r, 0.5)).collect();
        let (audio, regions) = spoken(&runs);
        let rate = SAMPLE_RATE as f64;
        assert!(regions
            .iter()
            .all(|r| r.len() as f64 / rate <= CHUNK_SPEECH_SECONDS));
        let expected: Vec<&str> = said.iter().map(|&w| WORDS[w]).collect();
        for stops_short in [false, true] {
            let reader = Heard {
                stops_short,
                lengths: Default::default(),
            };
            let (transcript, done) = read_with(&reader, &audio, &regions, 0.0);
            let lengths = reader.lengths.into_inner().unwrap();
            // One window each: what was carried, the chunk's own speech and the margin.
            assert!(
                lengths.iter().all(|&l| l <= MAX_CHUNK_SECONDS + 1e-6),
                "stops_short {stops_short}: {lengths:?}"
            );
            // Every word once, in order, where it was said.
            let words: Vec<&Word> = transcript.segments.iter().flat_map(|s| &s.words).collect();
            let text: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
            assert_eq!(text, expected, "stops_short {stops_short}");
            assert!(words.windows(2).all(|w| w[0].end <= w[1].start));
            // Nothing heard twice but what was carried and the margins.
            let heard: f64 = lengths.iter().sum();
            let speech = regions.iter().map(|r| r.len()).sum::<usize>() as f64 / rate;
            let again = JOIN_MARGIN_SECONDS + MAX_CARRY_SECONDS;
            assert!(
                heard <= speech + lengths.len() as f64 * again,
                "stops_short {stops_short}: {heard} s heard for {speech} s of speech"
            );
            // Progress only moves on.
            assert!(done.windows(2).all(|d| d[0] <= d[1]), "{done:?}");
        }
    }

    #[test]
    fn a_sentence_cut_by_a_pause_at_a_chunk_end_is_heard_whole_and_kept_once() {
        // "Gulls circle the market." seven times, then a sentence that a 20 s pause cuts
        // after "inside" (23.9 s of speech, where the chunk ends), then more (9.5 s).
        let gulls: Vec<usize> = (0..10).flat_map(|_| [16, 17, 18, 19]).collect();
        let said = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
        let mut first: Vec<usize> = gulls[..28].to_vec();
        first.extend(said);
        let mut rest = vec![12, 13, 14, 15];
        rest.extend(&gulls[..12]);
        let (audio, regions) = spoken(&[(&first, 20.0), (&rest, 3.0)]);
        let rate = SAMPLE_RATE as f64;
        assert!(regions[0].len() as f64 / rate <= CHUNK_SPEECH_SECONDS);
        // The pause is where a chunk ends (and was, when chunks took a whole window).
        assert!((regions[0].len() + regions[1].len()) as f64 / rate > MAX_CHUNK_SECONDS);
        let (transcript, done) = read(&audio, &regions, 0.0);
        let text = transcript.text();
        assert!(
            text.contains(
                "market. When the divers opened the wreck they found that the instruments \
                 inside were covered in salt. Gulls"
            ),
            "{text}"
        );
        assert!(!text.contains("ship") && !text.contains("work"), "{text}");
        assert_eq!(text.matches("instruments").count(), 1, "{text}");
        // Every word lies where it was said: "were" after the pause.
        let words: Vec<&Word> = transcript.segments.iter().flat_map(|s| &s.words).collect();
        assert_eq!(words.len(), first.len() + rest.len(), "{text}");
        let were = words.iter().find(|w| w.text == "were").unwrap();
        assert!(
            (were.start - regions[1].start as f64 / rate).abs() < 1e-6,
            "{were:?}"
        );
        let when = words.iter().find(|w| w.text == "When").unwrap();
        let when_said = regions[0].start as f64 / rate + 28.0 * (WORD + GAP);
        assert!((when.start - when_said).abs() < 1e-6, "{when:?}");
        // The first chunk is done only up to the sentence it handed on: resumed there, the
        // rest is the same.
        assert!((done[0] - when_said).abs() < 0.01, "{done:?}");
        let (resumed, _) = read(&audio, &regions, done[0]);
        let after: Vec<&Segment> = transcript
            .segments
            .iter()
            .filter(|s| s.start >= done[0])
            .collect();
        assert_eq!(resumed.segments.iter().collect::<Vec<_>>(), after);
    }

    #[test]
    fn a_sentence_that_ends_at_a_chunk_end_is_kept_there() {
        let gulls: Vec<usize> = (0..10).flat_map(|_| [16, 17, 18, 19]).collect();
        let (audio, regions) = spoken(&[(&gulls[..40], 5.0), (&gulls[..8], 1.0)]);
        let (transcript, done) = read(&audio, &regions, 0.0);
        assert_eq!(transcript.segments.len(), 12);
        assert!(transcript
            .segments
            .iter()
            .all(|s| s.text == "Gulls circle the market."));
        // Nothing carried: the first chunk is done to its end.
        assert!((done[0] - regions[0].end as f64 / SAMPLE_RATE as f64).abs() < 1e-6);
    }

    #[test]
    fn the_audio_between_two_points_of_joined_pieces_is_found_in_the_original() {
        let chunk = Chunk {
            pieces: vec![100..200, 500..600],
        };
        assert_eq!(chunk.between(50, 150), vec![150..200, 500..550]);
        assert_eq!(chunk.between(100, 200), vec![500..600]);
        assert_eq!(chunk.between(0, 50), vec![100..150]);
        // Its first samples, as many as there are at most.
        assert_eq!(chunk.between(0, 150), vec![100..200, 500..550]);
        assert_eq!(chunk.between(0, 500), vec![100..200, 500..600]);
    }
}
