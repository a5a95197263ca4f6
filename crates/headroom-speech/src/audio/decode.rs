//! Decoding audio files to mono samples: WAV with hound, everything else (MP3, FLAC, OGG
//! Vorbis, AAC/M4A) with symphonia. Every failure names the file and the problem.
//!
//! Files are untrusted: a header is checked against [`DecodeLimits`] before anything is sized
//! from it, nothing is preallocated from a declared length, samples are downmixed and (when
//! asked) resampled as they are decoded so memory follows the output, cancellation is checked
//! between packets, and a panic inside a decoder becomes [`AudioError::DecoderFailed`].

use super::opus_decode::{OpusDecoder, OPUS_RATE};
use super::resample::StreamResampler;
use super::sniff::{self, Container, SniffError};
use super::{Audio, AudioError, Bound};
use std::io::{BufReader, Read, Seek};
use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::OnceLock;
use symphonia::core::audio::SampleBuffer;
use symphonia::core::codecs::{
    CodecRegistry, CodecType, DecoderOptions, CODEC_TYPE_OPUS, CODEC_TYPE_PCM_F32BE,
    CODEC_TYPE_PCM_F32LE, CODEC_TYPE_PCM_F64BE, CODEC_TYPE_PCM_F64LE, CODEC_TYPE_PCM_S16BE,
    CODEC_TYPE_PCM_S16LE, CODEC_TYPE_PCM_S24BE, CODEC_TYPE_PCM_S24LE, CODEC_TYPE_PCM_S32BE,
    CODEC_TYPE_PCM_S32LE,
};
use symphonia::core::errors::Error as SymphoniaError;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::{MediaSource, MediaSourceStream};
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::{Hint, Probe};
use tokio_util::sync::CancellationToken;

/// The file extensions (any case) of what the decoder reads: the one list every front end
/// offers and a folder of recordings is read by (MP4 and M4A are the same container, AAC in it).
pub const AUDIO_EXTENSIONS: &[&str] = &[
    "wav", "mp3", "flac", "ogg", "opus", "m4a", "aac", "mp4", "mov", "mkv", "webm",
];

/// Bounds on what a decode accepts, checked against the header first and the output as it
/// grows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecodeLimits {
    /// Longest audio accepted, in seconds.
    pub max_seconds: f64,
    /// Sample rates accepted, in Hz.
    pub min_sample_rate: u32,
    pub max_sample_rate: u32,
    /// Most channels accepted.
    pub max_channels: u32,
    /// Most memory the decoded (mono, resampled) samples may take, in bytes.
    pub max_decoded_bytes: u64,
    /// Most decoded samples (all channels) per byte of compressed input. Real codecs stay far
    /// below (MP3 about 6, FLAC about 2, silence in FLAC about 340); a file of crafted constant
    /// frames goes far above. Checked once a minute of audio has been decoded, so a short file
    /// that is mostly silence is not refused.
    pub max_expansion: u64,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_seconds: 4.0 * 3600.0,
            min_sample_rate: 8_000,
            max_sample_rate: 384_000,
            max_channels: 32,
            // Four hours at 16 kHz is 0.9 GB of f32.
            max_decoded_bytes: 1 << 30,
            max_expansion: 2048,
        }
    }
}

impl DecodeLimits {
    /// The bounds for a decode whose samples are not held: spooled to disk (a transcription)
    /// or reduced as they arrive (a waveform, a stretch to play). Memory is no longer what
    /// length costs, so a recording may be a day long; the other bounds are the same.
    pub fn streamed() -> DecodeLimits {
        DecodeLimits {
            max_seconds: 24.0 * 3600.0,
            max_decoded_bytes: u64::MAX,
            ..DecodeLimits::default()
        }
    }
}

/// A probe that knows only the format `container` was found to be: symphonia's own searches on
/// past a marker it cannot read for any other format's, past where `sniff` checked (found by
/// fuzzing: an MP3 whose frames are junk, then a FLAC stream declaring a 2.4 GB comment).
fn probe_for(container: Container) -> Probe {
    use symphonia::default::formats::{
        AdtsReader, FlacReader, IsoMp4Reader, MkvReader, MpaReader, OggReader, WavReader,
    };
    let mut probe = Probe::default();
    match container {
        Container::Wav => probe.register_all::<WavReader>(),
        Container::Flac => probe.register_all::<FlacReader>(),
        Container::Mp4 => probe.register_all::<IsoMp4Reader>(),
        Container::Ogg => probe.register_all::<OggReader>(),
        Container::Matroska => probe.register_all::<MkvReader>(),
        Container::Mpeg => {
            probe.register_all::<MpaReader>();
            probe.register_all::<AdtsReader>();
        }
    }
    // Tags before the stream (ID3 before MP3 frames, as `sniff` allows).
    probe.register_all::<symphonia_metadata::id3v2::Id3v2Reader>();
    probe
}

/// The PCM codecs symphonia reads from a container.
const PCM_CODECS: [CodecType; 10] = [
    CODEC_TYPE_PCM_S16LE,
    CODEC_TYPE_PCM_S16BE,
    CODEC_TYPE_PCM_S24LE,
    CODEC_TYPE_PCM_S24BE,
    CODEC_TYPE_PCM_S32LE,
    CODEC_TYPE_PCM_S32BE,
    CODEC_TYPE_PCM_F32LE,
    CODEC_TYPE_PCM_F32BE,
    CODEC_TYPE_PCM_F64LE,
    CODEC_TYPE_PCM_F64BE,
];

/// symphonia's decoders, and Opus (see `opus_decode`).
fn codecs() -> &'static CodecRegistry {
    static CODECS: OnceLock<CodecRegistry> = OnceLock::new();
    CODECS.get_or_init(|| {
        let mut registry = CodecRegistry::new();
        symphonia::default::register_enabled_codecs(&mut registry);
        registry.register_all::<OpusDecoder>();
        registry
    })
}

/// How to decode: the limits, an optional output rate (resampled while decoding), and a
/// cancellation token checked between packets.
#[derive(Debug, Clone, Default)]
pub struct Decode {
    pub limits: DecodeLimits,
    /// Resample to this rate as samples are decoded; `None` keeps the file's rate.
    pub to_rate: Option<u32>,
    pub cancel: CancellationToken,
}

/// Decodes a file to mono at its own rate.
pub fn decode_file(path: &Path, limits: DecodeLimits) -> Result<Audio, AudioError> {
    Decode {
        limits,
        ..Decode::default()
    }
    .file(path)
}

/// Decodes an in-memory file to mono at its own rate; `shown` names it in errors.
pub fn decode_bytes(
    bytes: Vec<u8>,
    extension: Option<&str>,
    shown: &Path,
    limits: DecodeLimits,
) -> Result<Audio, AudioError> {
    Decode {
        limits,
        ..Decode::default()
    }
    .bytes(bytes, extension, shown)
}

/// How far into a WAV file its data chunk's header is looked for.
const WAV_HEAD_BYTES: u64 = 4096;

impl Decode {
    /// A decode within [`DecodeLimits::streamed`], at the file's own rate.
    pub fn streamed() -> Decode {
        Decode {
            limits: DecodeLimits::streamed(),
            ..Decode::default()
        }
    }

    /// Decodes a file, reading it as it goes (it is never read whole into memory).
    pub fn file(&self, path: &Path) -> Result<Audio, AudioError> {
        self.collect(|sink| self.file_into(path, sink))
    }

    /// Decodes the file at `path`, which errors call `shown` and whose format `extension`
    /// hints (for a temporary file holding an upload, say).
    pub fn open(
        &self,
        path: &Path,
        extension: Option<&str>,
        shown: &Path,
    ) -> Result<Audio, AudioError> {
        self.collect(|sink| self.open_into(path, extension, shown, sink))
    }

    /// Decodes a file into `sink` a block at a time: nothing of the file is held but the
    /// block being decoded, whatever its length.
    pub fn file_into(&self, path: &Path, sink: &mut dyn SampleSink) -> Result<Decoded, AudioError> {
        self.open_into(path, path.extension().and_then(|e| e.to_str()), path, sink)
    }

    /// [`Decode::open`] into `sink` a block at a time.
    pub fn open_into(
        &self,
        path: &Path,
        extension: Option<&str>,
        shown: &Path,
        sink: &mut dyn SampleSink,
    ) -> Result<Decoded, AudioError> {
        let read_error = |e: std::io::Error| AudioError::Read {
            path: shown.to_path_buf(),
            message: e.to_string(),
        };
        let file = headroom_base::input::open_regular(path).map_err(read_error)?;
        let len = file.metadata().map_err(read_error)?.len();
        self.source(file, len, extension, shown, sink)
    }

    /// The whole output gathered in memory.
    fn collect(
        &self,
        decode: impl FnOnce(&mut dyn SampleSink) -> Result<Decoded, AudioError>,
    ) -> Result<Audio, AudioError> {
        let mut samples = Vec::new();
        let decoded = decode(&mut samples)?;
        Ok(Audio {
            samples,
            sample_rate: decoded.sample_rate,
        })
    }

    /// Checks that the file at `path` is audio Headroom reads, within the limits: its header and
    /// first packet, without decoding the rest (for an import, before it is copied).
    pub fn probe(&self, path: &Path) -> Result<(), AudioError> {
        // A decode cancelled before any sample is kept reads and checks the header and the
        // first packet, then stops with `Cancelled`: for a probe, that is success.
        let probe = Decode {
            limits: self.limits,
            to_rate: None,
            cancel: CancellationToken::new(),
        };
        probe.cancel.cancel();
        match probe.file(path) {
            Ok(_) | Err(AudioError::Cancelled { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Decodes an in-memory file; `shown` names it in errors.
    pub fn bytes(
        &self,
        bytes: impl AsRef<[u8]> + Send + Sync + 'static,
        extension: Option<&str>,
        shown: &Path,
    ) -> Result<Audio, AudioError> {
        self.collect(|sink| self.bytes_into(bytes, extension, shown, sink))
    }

    /// [`Decode::bytes`] into `sink` a block at a time.
    pub fn bytes_into(
        &self,
        bytes: impl AsRef<[u8]> + Send + Sync + 'static,
        extension: Option<&str>,
        shown: &Path,
        sink: &mut dyn SampleSink,
    ) -> Result<Decoded, AudioError> {
        let len = bytes.as_ref().len() as u64;
        self.source(std::io::Cursor::new(bytes), len, extension, shown, sink)
    }

    fn source<S: Read + Seek + Send + Sync + 'static>(
        &self,
        mut source: S,
        len: u64,
        extension: Option<&str>,
        shown: &Path,
        out: &mut dyn SampleSink,
    ) -> Result<Decoded, AudioError> {
        let path = shown.to_path_buf();
        if len == 0 {
            return Err(AudioError::Empty { path });
        }
        // What the file is, and whether its structure can be handed to a decoder at all.
        let container = sniff::check(&mut source)
            .and_then(|container| Ok(source.rewind().map(|()| container)?))
            .map_err(|e| match e {
                SniffError::Unknown => AudioError::Unsupported {
                    path: path.clone(),
                    detail: "its first bytes are not those of an audio file".into(),
                },
                SniffError::Malformed(detail) => AudioError::Corrupt {
                    path: path.clone(),
                    detail,
                },
                SniffError::Io(e) => AudioError::Read {
                    path: path.clone(),
                    message: e.to_string(),
                },
            })?;
        let is_wav = container == Container::Wav;
        let extension = extension.map(str::to_string);
        let decoded = guarded(&path, || {
            if is_wav {
                self.wav(source, len, &path, out)
            } else {
                self.other(source, container, len, extension.as_deref(), &path, out)
            }
        })?;
        // A sink that stopped the decode early has what it wanted; the checks are of a whole file.
        if decoded.complete && decoded.samples == 0 {
            return Err(AudioError::Empty { path });
        }
        // Below -80 dBFS everywhere: nothing to hear.
        if decoded.complete && decoded.peak < 1e-4 {
            return Err(AudioError::Silent { path });
        }
        Ok(decoded)
    }

    fn wav<R: Read>(
        &self,
        mut source: R,
        len: u64,
        path: &Path,
        out: &mut dyn SampleSink,
    ) -> Result<Decoded, AudioError> {
        let corrupt = |e: hound::Error| AudioError::Corrupt {
            path: path.to_path_buf(),
            detail: e.to_string(),
        };
        // A streamed WAV (sent before its length was known, as `/v1/audio/speech` streams
        // it) declares its data chunk 0xFFFFFFFF bytes long, meaning "to the end", as ffmpeg
        // reads it; hound refuses that odd length, so the largest even one says the same.
        let mut head = Vec::with_capacity(WAV_HEAD_BYTES as usize);
        source
            .by_ref()
            .take(WAV_HEAD_BYTES)
            .read_to_end(&mut head)
            .map_err(|e| AudioError::Read {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        if let Some(at) = head.windows(8).position(|w| w == b"data\xff\xff\xff\xff") {
            head[at + 4] = 0xfe;
        }
        let source = std::io::Cursor::new(head).chain(source);
        let ended = Arc::new(AtomicBool::new(false));
        let source = NoticesEnd {
            inner: source,
            ended: ended.clone(),
        };
        let mut reader = hound::WavReader::new(BufReader::new(source)).map_err(corrupt)?;
        let spec = reader.spec();
        let valid_bits = match spec.sample_format {
            hound::SampleFormat::Float => spec.bits_per_sample == 32,
            hound::SampleFormat::Int => (1..=32).contains(&spec.bits_per_sample),
        };
        if !valid_bits {
            return Err(refused(
                path,
                Bound::Bits {
                    bits: spec.bits_per_sample.into(),
                },
            ));
        }
        // A data chunk can declare more than the file holds; only what is there counts.
        let block = u64::from(spec.channels) * u64::from(spec.bits_per_sample.div_ceil(8));
        let declared = u64::from(reader.duration()).min(len / block.max(1));
        let mut sink = self.sink(
            path,
            spec.sample_rate,
            spec.channels.into(),
            Some(declared),
            out,
        )?;
        let channels = usize::from(spec.channels);
        let mut interleaved = Vec::with_capacity(channels * CHUNK_FRAMES);
        let mut flush = |interleaved: &mut Vec<f32>| -> Result<ControlFlow<()>, AudioError> {
            let flow = sink.push(interleaved, channels)?;
            interleaved.clear();
            Ok(flow)
        };
        // A file cut short ends where its data ends, as players treat it.
        let end_of_data = |e: &hound::Error| {
            matches!(e, hound::Error::IoError(_)) && ended.load(Ordering::Relaxed)
        };
        match spec.sample_format {
            hound::SampleFormat::Float => {
                for sample in reader.samples::<f32>() {
                    match sample {
                        Ok(s) => interleaved.push(s),
                        Err(e) if end_of_data(&e) => break,
                        Err(e) => return Err(corrupt(e)),
                    }
                    if interleaved.len() == channels * CHUNK_FRAMES
                        && flush(&mut interleaved)?.is_break()
                    {
                        return sink.finish(false);
                    }
                }
            }
            hound::SampleFormat::Int => {
                let scale = 1.0 / (1u64 << (spec.bits_per_sample - 1)) as f32;
                for sample in reader.samples::<i32>() {
                    match sample {
                        Ok(s) => interleaved.push(s as f32 * scale),
                        Err(e) if end_of_data(&e) => break,
                        Err(e) => return Err(corrupt(e)),
                    }
                    if interleaved.len() == channels * CHUNK_FRAMES
                        && flush(&mut interleaved)?.is_break()
                    {
                        return sink.finish(false);
                    }
                }
            }
        }
        // A trailing partial frame is dropped.
        interleaved.truncate(interleaved.len() / channels * channels);
        let complete = flush(&mut interleaved)?.is_continue();
        sink.finish(complete)
    }

    fn other<S: Read + Seek + Send + Sync + 'static>(
        &self,
        source: S,
        container: Container,
        len: u64,
        extension: Option<&str>,
        path: &Path,
        out: &mut dyn SampleSink,
    ) -> Result<Decoded, AudioError> {
        let unsupported = |detail: String| AudioError::Unsupported {
            path: path.to_path_buf(),
            detail,
        };
        let corrupt = |detail: String| AudioError::Corrupt {
            path: path.to_path_buf(),
            detail,
        };
        let consumed = Arc::new(AtomicU64::new(0));
        let counted = Counted {
            inner: source,
            len,
            consumed: consumed.clone(),
        };
        let stream = MediaSourceStream::new(Box::new(counted), Default::default());
        let mut hint = Hint::new();
        if let Some(ext) = extension {
            hint.with_extension(ext);
        }
        let probed = probe_for(container)
            .format(
                &hint,
                stream,
                &FormatOptions::default(),
                &MetadataOptions::default(),
            )
            .map_err(|e| unsupported(e.to_string()))?;
        let mut format = probed.format;
        // A video's first track is often its picture: the sound is the first track with a
        // codec and a sample rate.
        let is_audio = |t: &&symphonia::core::formats::Track| {
            t.codec_params.codec != symphonia::core::codecs::CODEC_TYPE_NULL
                && t.codec_params.sample_rate.is_some()
        };
        let track = format
            .default_track()
            .filter(is_audio)
            .or_else(|| format.tracks().iter().find(is_audio))
            .or_else(|| format.default_track())
            .ok_or_else(|| unsupported("no audio track".into()))?;
        let track_id = track.id;
        let mut params = track.codec_params.clone();
        // Opus decodes at 48 kHz whatever rate its track names (the input's, often).
        let rate = if params.codec == CODEC_TYPE_OPUS {
            Some(OPUS_RATE)
        } else {
            params.sample_rate
        }
        .ok_or_else(|| corrupt("the audio track declares no sample rate".into()))?;
        // Matroska names no packet size for PCM, which symphonia's PCM decoder sizes its
        // buffer by: four seconds a block (ffmpeg writes a few milliseconds).
        if params.max_frames_per_packet.is_none() && PCM_CODECS.contains(&params.codec) {
            params.with_max_frames_per_packet(u64::from(rate.min(192_000)) * 4);
        }
        let channels = params.channels.map_or(1, |c| c.count() as u32);
        if let Some(bits) = params.bits_per_sample.filter(|b| !(1..=32).contains(b)) {
            return Err(refused(path, Bound::Bits { bits }));
        }
        let mut sink = self.sink(path, rate, channels, params.n_frames, out)?;
        let mut decoder = codecs()
            .make(&params, &DecoderOptions::default())
            .map_err(|e| unsupported(e.to_string()))?;
        let mut buffer: Option<SampleBuffer<f32>> = None;
        loop {
            let packet = match format.next_packet() {
                Ok(p) => p,
                Err(SymphoniaError::IoError(e))
                    if e.kind() == std::io::ErrorKind::UnexpectedEof =>
                {
                    break
                }
                Err(SymphoniaError::ResetRequired) => break,
                Err(e) => return Err(corrupt(e.to_string())),
            };
            if packet.track_id() != track_id {
                continue;
            }
            let decoded = match decoder.decode(&packet) {
                Ok(d) => d,
                // A damaged packet: skip it, as players do; a file of only damage ends up empty.
                Err(SymphoniaError::DecodeError(_)) => continue,
                Err(e) => return Err(corrupt(e.to_string())),
            };
            let spec = *decoded.spec();
            if spec.rate != rate {
                return Err(corrupt(format!(
                    "the sample rate changes from {rate} Hz to {} Hz",
                    spec.rate
                )));
            }
            let channels = spec.channels.count().max(1);
            if channels as u32 > self.limits.max_channels {
                return Err(refused(
                    path,
                    Bound::Channels {
                        channels: channels as u32,
                        max: self.limits.max_channels,
                    },
                ));
            }
            let buf =
                buffer.get_or_insert_with(|| SampleBuffer::new(decoded.capacity() as u64, spec));
            if buf.capacity() < decoded.capacity() * channels {
                *buf = SampleBuffer::new(decoded.capacity() as u64, spec);
            }
            buf.copy_interleaved_ref(decoded);
            if sink.push(buf.samples(), channels)?.is_break() {
                return sink.finish(false);
            }
            sink.check_expansion(consumed.load(Ordering::Relaxed))?;
        }
        sink.finish(true)
    }

    /// Checks a header's rate, channels and declared length against the limits, and sets up
    /// where the samples go.
    fn sink<'a>(
        &'a self,
        path: &Path,
        rate: u32,
        channels: u32,
        declared_frames: Option<u64>,
        out: &'a mut dyn SampleSink,
    ) -> Result<Sink<'a>, AudioError> {
        let limits = &self.limits;
        if !(limits.min_sample_rate..=limits.max_sample_rate).contains(&rate) {
            return Err(refused(
                path,
                Bound::SampleRate {
                    rate,
                    min: limits.min_sample_rate,
                    max: limits.max_sample_rate,
                },
            ));
        }
        if channels == 0 || channels > limits.max_channels {
            return Err(refused(
                path,
                Bound::Channels {
                    channels,
                    max: limits.max_channels,
                },
            ));
        }
        let out_rate = self.to_rate.unwrap_or(rate);
        out.begin(out_rate);
        let sink = Sink {
            path: path.to_path_buf(),
            decode: self,
            rate,
            out_rate,
            resampler: match self.to_rate {
                Some(to) if to != rate => Some(StreamResampler::new(rate, to)?),
                _ => None,
            },
            out,
            resampled: Vec::new(),
            mono: Vec::new(),
            frames: 0,
            decoded_samples: 0,
            written: 0,
            peak: 0.0,
        };
        if let Some(frames) = declared_frames {
            sink.check_frames(frames)?;
        }
        Ok(sink)
    }
}

/// Frames handed on at a time while reading a WAV.
const CHUNK_FRAMES: usize = 4096;

/// What takes decoded samples: mono, at the output rate, a block at a time, in order.
pub trait SampleSink {
    /// Told the output rate once the header is read, before any block.
    fn begin(&mut self, _sample_rate: u32) {}

    /// Takes the next block. [`ControlFlow::Break`] ends the decode here: the rest of the
    /// file is not needed (a player that has its stretch).
    fn take(&mut self, block: &[f32]) -> Result<ControlFlow<()>, AudioError>;
}

/// Gathers everything in memory.
impl SampleSink for Vec<f32> {
    fn take(&mut self, block: &[f32]) -> Result<ControlFlow<()>, AudioError> {
        self.extend_from_slice(block);
        Ok(ControlFlow::Continue(()))
    }
}

/// Stretches of a file (seconds, `[start, end)`), kept as they are decoded; the decode stops
/// at the end of the last, so stretches near the start of a long file cost those stretches,
/// not the file.
#[derive(Debug, Clone)]
pub struct Stretch {
    seconds: Vec<(f64, f64)>,
    /// Samples from the file's start handed on so far.
    at: usize,
    /// The stretches in samples, once the rate is known.
    ranges: Vec<std::ops::Range<usize>>,
    pieces: Vec<Vec<f32>>,
    sample_rate: u32,
}

impl Stretch {
    /// `[start, end)` seconds (an infinite `end`: to the end of the file).
    pub fn new(start_secs: f64, end_secs: f64) -> Stretch {
        Stretch::several(&[(start_secs, end_secs)])
    }

    /// Each `[start, end)` of `stretches`, kept apart.
    pub fn several(stretches: &[(f64, f64)]) -> Stretch {
        Stretch {
            seconds: stretches.to_vec(),
            at: 0,
            ranges: Vec::new(),
            pieces: vec![Vec::new(); stretches.len()],
            sample_rate: 0,
        }
    }

    /// The stretches joined.
    pub fn into_audio(self) -> Audio {
        Audio {
            samples: self.pieces.concat(),
            sample_rate: self.sample_rate,
        }
    }

    /// Each stretch, in the order given (empty past the end of the file).
    pub fn into_pieces(self) -> Vec<Audio> {
        let rate = self.sample_rate;
        self.pieces
            .into_iter()
            .map(|samples| Audio {
                samples,
                sample_rate: rate,
            })
            .collect()
    }
}

/// `[start, end)` seconds as samples at `sample_rate` (an infinite `end`: to the end).
pub(crate) fn sample_range(start: f64, end: f64, sample_rate: u32) -> std::ops::Range<usize> {
    let rate = f64::from(sample_rate);
    let from = (start.max(0.0) * rate) as usize;
    let to = (end.max(start) * rate).ceil();
    let to = if to.is_finite() {
        to as usize
    } else {
        usize::MAX
    };
    from..to.max(from)
}

/// The part of `block`, which starts at sample `at` of the file, that lies in `range`.
pub(crate) fn part_in<'b>(
    block: &'b [f32],
    at: usize,
    range: &std::ops::Range<usize>,
) -> &'b [f32] {
    let from = range.start.clamp(at, at + block.len());
    let to = range.end.clamp(from, at + block.len());
    &block[from - at..to - at]
}

impl SampleSink for Stretch {
    fn begin(&mut self, sample_rate: u32) {
        self.sample_rate = sample_rate;
        self.ranges = self
            .seconds
            .iter()
            .map(|&(start, end)| sample_range(start, end, sample_rate))
            .collect();
    }

    fn take(&mut self, block: &[f32]) -> Result<ControlFlow<()>, AudioError> {
        for (range, piece) in self.ranges.iter().zip(&mut self.pieces) {
            piece.extend_from_slice(part_in(block, self.at, range));
        }
        self.at += block.len();
        let last_end = self.ranges.iter().map(|r| r.end).max().unwrap_or(0);
        Ok(if self.at >= last_end {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    }
}

/// What a decode into a [`SampleSink`] produced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decoded {
    /// Samples handed to the sink.
    pub samples: u64,
    pub sample_rate: u32,
    /// The loudest sample's magnitude.
    pub peak: f32,
    /// Whether the file was decoded to its end (the sink did not stop it).
    pub complete: bool,
}

impl Decoded {
    pub fn duration_secs(&self) -> f64 {
        self.samples as f64 / f64::from(self.sample_rate)
    }
}

/// Where decoded samples go: downmixed, resampled, counted against the limits, then handed
/// to the caller's [`SampleSink`].
struct Sink<'a> {
    path: PathBuf,
    decode: &'a Decode,
    rate: u32,
    out_rate: u32,
    resampler: Option<StreamResampler>,
    out: &'a mut dyn SampleSink,
    /// Reused for each packet's resampled output.
    resampled: Vec<f32>,
    /// Reused for each packet's downmix.
    mono: Vec<f32>,
    /// Frames decoded so far, at the file's rate.
    frames: u64,
    /// Samples decoded so far, all channels.
    decoded_samples: u64,
    /// Samples handed to `out`.
    written: u64,
    peak: f32,
}

impl Sink<'_> {
    /// Refuses `frames` at the file's rate if they are too long or would decode too large.
    fn check_frames(&self, frames: u64) -> Result<(), AudioError> {
        let limits = &self.decode.limits;
        let seconds = frames as f64 / f64::from(self.rate);
        if seconds > limits.max_seconds {
            return Err(AudioError::TooLong {
                path: self.path.clone(),
                seconds,
                limit: limits.max_seconds,
            });
        }
        let bytes = (seconds * f64::from(self.out_rate)) as u64 * 4;
        if bytes > limits.max_decoded_bytes {
            return Err(refused(
                &self.path,
                Bound::DecodedSize {
                    bytes,
                    limit: limits.max_decoded_bytes,
                },
            ));
        }
        Ok(())
    }

    fn push(
        &mut self,
        interleaved: &[f32],
        channels: usize,
    ) -> Result<ControlFlow<()>, AudioError> {
        if self.decode.cancel.is_cancelled() {
            return Err(AudioError::Cancelled {
                path: self.path.clone(),
            });
        }
        let frames = interleaved.len() / channels;
        self.frames += frames as u64;
        self.decoded_samples += interleaved.len() as u64;
        self.check_frames(self.frames)?;
        self.mono.clear();
        if channels == 1 {
            self.mono.extend_from_slice(interleaved);
        } else {
            self.mono.extend(
                interleaved
                    .chunks_exact(channels)
                    .map(|frame| frame.iter().sum::<f32>() / channels as f32),
            );
        }
        match &mut self.resampler {
            Some(resampler) => {
                self.resampled.clear();
                resampler.push(&self.mono, &mut self.resampled)?;
                let block = std::mem::take(&mut self.resampled);
                let flow = self.hand_on(&block);
                self.resampled = block;
                flow
            }
            None => {
                let block = std::mem::take(&mut self.mono);
                let flow = self.hand_on(&block);
                self.mono = block;
                flow
            }
        }
    }

    /// Gives `block` to the caller's sink, noting its length and loudness.
    fn hand_on(&mut self, block: &[f32]) -> Result<ControlFlow<()>, AudioError> {
        if block.is_empty() {
            return Ok(ControlFlow::Continue(()));
        }
        self.written += block.len() as u64;
        self.peak = block.iter().fold(self.peak, |m, s| m.max(s.abs()));
        self.out.take(block)
    }

    /// Refuses output out of all proportion to the input read so far (a decompression bomb).
    fn check_expansion(&self, bytes_read: u64) -> Result<(), AudioError> {
        let limits = &self.decode.limits;
        let past_a_minute = self.frames > 60 * u64::from(self.rate);
        if past_a_minute && self.decoded_samples > limits.max_expansion * bytes_read.max(1) {
            return Err(refused(
                &self.path,
                Bound::Expansion {
                    samples: self.decoded_samples,
                    bytes: bytes_read,
                    max: limits.max_expansion,
                },
            ));
        }
        Ok(())
    }

    /// The resampler's last samples handed on (when the file was decoded to its end), and
    /// what was decoded.
    fn finish(mut self, complete: bool) -> Result<Decoded, AudioError> {
        let mut complete = complete;
        if let Some(resampler) = self.resampler.take().filter(|_| complete) {
            let mut tail = Vec::new();
            resampler.finish(&mut tail)?;
            complete = self.hand_on(&tail)?.is_continue();
        }
        Ok(Decoded {
            samples: self.written,
            sample_rate: self.out_rate,
            peak: self.peak,
            complete,
        })
    }
}

fn refused(path: &Path, bound: Bound) -> AudioError {
    AudioError::Refused {
        path: path.to_path_buf(),
        bound,
    }
}

/// Runs a decoder so that a panic on a crafted file fails this file's job, not the process.
fn guarded(
    path: &Path,
    decode: impl FnOnce() -> Result<Decoded, AudioError>,
) -> Result<Decoded, AudioError> {
    catch_unwind(AssertUnwindSafe(decode)).unwrap_or_else(|panic| {
        Err(AudioError::DecoderFailed {
            path: path.to_path_buf(),
            detail: panic_message(panic.as_ref()),
        })
    })
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "the decoder panicked".into())
}

/// A source that notes when it has run out, so a WAV whose data chunk declares more than the
/// file holds ends where the file does.
struct NoticesEnd<R> {
    inner: R,
    ended: Arc<AtomicBool>,
}

impl<R: Read> Read for NoticesEnd<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && !buf.is_empty() {
            self.ended.store(true, Ordering::Relaxed);
        }
        Ok(n)
    }
}

/// A source that counts the bytes the demuxer has read, for the expansion check.
struct Counted<S> {
    inner: S,
    len: u64,
    consumed: Arc<AtomicU64>,
}

impl<S: Read> Read for Counted<S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.consumed.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl<S: Seek> Seek for Counted<S> {
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        self.inner.seek(pos)
    }
}

impl<S: Read + Seek + Send + Sync> MediaSource for Counted<S> {
    fn is_seekable(&self) -> bool {
        true
    }

    fn byte_len(&self) -> Option<u64> {
        Some(self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audio::wav_bytes;

    fn tone(rate: u32, secs: f32, amplitude: f32) -> Audio {
        let samples = (0..(rate as f32 * secs) as usize)
            .map(|i| (i as f32 * 0.05).sin() * amplitude)
            .collect();
        Audio {
            samples,
            sample_rate: rate,
        }
    }

    fn tone_wav(rate: u32, secs: f32, amplitude: f32) -> Vec<u8> {
        wav_bytes(&tone(rate, secs, amplitude))
    }

    #[test]
    fn wav_round_trips() {
        let audio = decode_bytes(
            tone_wav(22_050, 0.5, 0.5),
            Some("wav"),
            Path::new("t.wav"),
            DecodeLimits::default(),
        )
        .unwrap();
        assert_eq!(audio.sample_rate, 22_050);
        assert_eq!(audio.samples.len(), 11_025);
        assert!((audio.peak() - 0.5).abs() < 0.01);
    }

    #[test]
    fn a_stretch_keeps_its_seconds_and_stops_the_decode_at_its_end() {
        let wav = tone_wav(8_000, 10.0, 0.5);
        let source = Decode::default()
            .bytes(wav.clone(), Some("wav"), Path::new("t.wav"))
            .unwrap();
        let decode = |stretch: &mut Stretch| {
            Decode::default()
                .bytes_into(wav.clone(), Some("wav"), Path::new("t.wav"), stretch)
                .unwrap()
        };
        let mut middle = Stretch::new(2.0, 3.5);
        let decoded = decode(&mut middle);
        let middle = middle.into_audio();
        assert_eq!(middle.samples, source.samples[16_000..28_000]);
        assert_eq!(middle.sample_rate, 8_000);
        assert!(!decoded.complete);
        assert!(
            decoded.samples < 30_000,
            "decoding went on to sample {} after the stretch ended at 28000",
            decoded.samples
        );
        let mut rest = Stretch::new(9.0, f64::INFINITY);
        let decoded = decode(&mut rest);
        assert_eq!(rest.into_audio().samples, source.samples[72_000..]);
        assert!(decoded.complete);
        assert_eq!(decoded.samples, 80_000);
        let mut past_the_end = Stretch::new(20.0, 30.0);
        decode(&mut past_the_end);
        assert!(past_the_end.into_audio().samples.is_empty());
        // Several stretches, kept apart, in the order given; decoding stops after the last.
        let mut turns = Stretch::several(&[(4.0, 4.5), (1.0, 2.0), (20.0, 21.0)]);
        let decoded = decode(&mut turns);
        let pieces = turns.into_pieces();
        assert_eq!(pieces[0].samples, source.samples[32_000..36_000]);
        assert_eq!(pieces[1].samples, source.samples[8_000..16_000]);
        assert!(pieces[2].samples.is_empty());
        assert!(decoded.complete);
        let mut early = Stretch::several(&[(0.5, 1.0), (2.0, 2.5)]);
        assert!(!decode(&mut early).complete, "stopped after 2.5 s");
    }

    #[test]
    fn resampling_while_decoding_matches_resampling_after() {
        let source = tone(44_100, 2.3, 0.5);
        let decode = Decode {
            to_rate: Some(16_000),
            ..Decode::default()
        };
        let streamed = decode
            .bytes(wav_bytes(&source), None, Path::new("t.wav"))
            .unwrap();
        let whole = decode_bytes(
            wav_bytes(&source),
            None,
            Path::new("t.wav"),
            DecodeLimits::default(),
        )
        .unwrap()
        .to_16k()
        .unwrap();
        assert_eq!(streamed.sample_rate, 16_000);
        assert_eq!(streamed.samples.len(), whole.samples.len());
        let worst = streamed
            .samples
            .iter()
            .zip(&whole.samples)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-4, "streamed and whole differ by {worst}");
    }

    #[test]
    fn empty_silent_garbage_and_long_files_get_named_errors() {
        let p = Path::new("clip.wav");
        let limits = DecodeLimits::default();
        assert!(matches!(
            decode_bytes(vec![], None, p, limits),
            Err(AudioError::Empty { .. })
        ));
        let silent = decode_bytes(tone_wav(16_000, 1.0, 0.0), None, p, limits).unwrap_err();
        assert_eq!(
            silent.to_string(),
            "clip.wav contains no sound (it is silent)"
        );
        let garbage = decode_bytes(
            b"this is not audio at all".repeat(10),
            Some("txt"),
            Path::new("notes.txt"),
            limits,
        )
        .unwrap_err();
        assert!(
            matches!(garbage, AudioError::Unsupported { .. }),
            "{garbage}"
        );
        assert!(garbage
            .to_string()
            .starts_with("notes.txt is not an audio format"));
        let mut truncated = tone_wav(16_000, 1.0, 0.5);
        truncated.truncate(30);
        assert!(matches!(
            decode_bytes(truncated, None, p, limits),
            Err(AudioError::Corrupt { .. })
        ));
        let short_limit = DecodeLimits {
            max_seconds: 0.5,
            ..limits
        };
        let long = decode_bytes(tone_wav(16_000, 1.0, 0.5), None, p, short_limit).unwrap_err();
        assert!(matches!(long, AudioError::TooLong { .. }), "{long}");
    }

    #[test]
    fn a_probe_accepts_audio_and_names_what_is_not() {
        let dir = std::env::temp_dir().join(format!("headroom-probe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let wav = dir.join("ok.wav");
        std::fs::write(&wav, tone_wav(16_000, 1.0, 0.5)).unwrap();
        Decode::default().probe(&wav).unwrap();
        let key = dir.join("id_rsa");
        std::fs::write(&key, b"-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n").unwrap();
        let err = Decode::default().probe(&key).unwrap_err();
        assert!(matches!(err, AudioError::Unsupported { .. }), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_cancelled_decode_stops_with_its_own_error() {
        let decode = Decode::default();
        decode.cancel.cancel();
        let err = decode
            .bytes(tone_wav(16_000, 1.0, 0.5), None, Path::new("t.wav"))
            .unwrap_err();
        assert!(matches!(err, AudioError::Cancelled { .. }), "{err}");
    }

    #[test]
    fn a_panic_in_symphonias_vorbis_reader_under_webm_fails_the_file() {
        // Found by fuzzing (fuzz/corpus/audio_decode/open-vorbis-codebook-in-webm): a WebM
        // whose Vorbis codebook overflows `u32::pow` inside symphonia. The file fails; still
        // open ("open-", not "crash-": `what_the_fuzzer_found_stays_refused` would hold it to
        // 32 MiB): symphonia allocates 54 MiB for the codebook first.
        let crash = include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fuzz/corpus/audio_decode/open-vorbis-codebook-in-webm"
        ));
        let err = decode_bytes(
            crash[1..].to_vec(),
            Some("webm"),
            Path::new("c.webm"),
            DecodeLimits::default(),
        )
        .unwrap_err();
        assert!(matches!(err, AudioError::DecoderFailed { .. }), "{err}");
    }

    #[test]
    fn a_file_is_read_only_as_the_format_its_start_says() {
        // Found by fuzzing (fuzz/corpus/audio_decode/crash-flac-behind-mp3, which the fuzz
        // target's allocation guard catches): an ID3 tag and MPEG frame headers over junk,
        // then a FLAC stream whose comment declared 2.4 GB. symphonia's own probe searched on
        // past the MPEG junk, found the FLAC marker and allocated the comment, which `sniff`
        // had not checked: it had seen an MP3. The probe for an MP3 looks for MP3 alone.
        let flac =
            crate::audio::encode::encode(&tone(16_000, 0.5, 0.5), crate::audio::SpeechFormat::Flac)
                .unwrap();
        // A tag of ten bytes of padding, then bytes that start like MPEG frames.
        let mut file = b"ID3\x04\x00\x00\x00\x00\x00\x0a".to_vec();
        file.extend([0u8; 10]);
        file.extend([0xff, 0xee, 0x38, 0xc0]);
        file.extend([0x55u8; 61]);
        file.extend(&flac);
        let found = |probe: &Probe| {
            let stream = MediaSourceStream::new(
                Box::new(std::io::Cursor::new(file.clone())),
                Default::default(),
            );
            probe
                .format(
                    &Hint::new(),
                    stream,
                    &FormatOptions::default(),
                    &MetadataOptions::default(),
                )
                .ok()
                .and_then(|p| p.format.default_track().map(|t| t.codec_params.codec))
        };
        assert_eq!(
            found(symphonia::default::get_probe()),
            Some(symphonia::core::codecs::CODEC_TYPE_FLAC),
            "symphonia's probe reads the FLAC behind the tag"
        );
        let codec = found(&probe_for(Container::Mpeg));
        assert_ne!(
            codec,
            Some(symphonia::core::codecs::CODEC_TYPE_FLAC),
            "{codec:?}"
        );
        // Each container's own probe still reads it.
        assert_eq!(
            found(&probe_for(Container::Flac)),
            Some(symphonia::core::codecs::CODEC_TYPE_FLAC)
        );
    }

    #[test]
    fn flac_metadata_declared_past_its_block_is_refused_before_symphonia_allocates_it() {
        // Found by fuzzing (fuzz/corpus/audio_decode/crash-flac-comment): symphonia allocated
        // a comment at its declared 1.6 GB before reading it.
        let flac = |kind: u8, body: &[u8]| {
            let mut out = b"fLaC".to_vec();
            out.extend([0, 0, 0, 34]);
            out.extend([0u8; 34]);
            out.push(0x80 | kind);
            out.extend(&(body.len() as u32).to_be_bytes()[1..]);
            out.extend(body);
            out
        };
        let mut comment = 4u32.to_le_bytes().to_vec();
        comment.extend(b"Lavf");
        comment.extend(1u32.to_le_bytes());
        let mut huge = comment.clone();
        huge.extend(0x60DB_4C47u32.to_le_bytes());
        huge.extend(b"TITLE=x");
        let mut picture = 3u32.to_be_bytes().to_vec();
        picture.extend(0xFFFF_FFF0u32.to_be_bytes());
        for file in [flac(4, &huge), flac(6, &picture)] {
            let err = decode_bytes(
                file,
                Some("flac"),
                Path::new("c.flac"),
                DecodeLimits::default(),
            )
            .unwrap_err();
            assert!(
                matches!(&err, AudioError::Corrupt { detail, .. } if detail.contains("longer than its block")),
                "{err}"
            );
        }
        // Fields that fit, and blocks cut short, are left to symphonia.
        comment.extend(7u32.to_le_bytes());
        comment.extend(b"TITLE=x");
        for file in [flac(4, &comment), flac(4, &comment[..10]), flac(4, &[])] {
            let mut source = std::io::Cursor::new(file);
            super::super::sniff::check(&mut source).unwrap();
        }
    }

    #[test]
    fn a_panicking_decoder_fails_the_file_not_the_process() {
        let err = guarded(Path::new("crafted.flac"), || {
            panic!("index out of bounds in a crafted frame")
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the decoder failed on crafted.flac: index out of bounds in a crafted frame"
        );
    }
}
