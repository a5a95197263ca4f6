//! Encoding speech into the formats OpenAI's speech endpoint answers in (`response_format`):
//! MP3 (LAME, through `mp3lame-encoder`), Opus in an Ogg container (libopus through `opus`,
//! pages by `ogg`), FLAC (`flacenc`), WAV and raw PCM. AAC has no encoder here: see
//! [`SpeechFormat::unavailable`].

use super::{resample, wav_bytes, Audio, AudioError};
use std::fmt;
use std::str::FromStr;

/// The rate of `pcm` answers, as OpenAI defines them (24 kHz 16-bit signed little-endian mono).
pub const PCM_SAMPLE_RATE: u32 = 24_000;
/// Opus is encoded at 48 kHz, the rate its granule positions count in.
pub const OPUS_SAMPLE_RATE: u32 = 48_000;
/// MP3 at a rate LAME does not take is resampled to this one.
pub const MP3_FALLBACK_RATE: u32 = 24_000;
/// The rates MP3 (MPEG-1, 2 and 2.5 Layer III) has.
const MP3_RATES: [u32; 9] = [
    8_000, 11_025, 12_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000,
];
/// Constant bit rates: ample for one voice.
const MP3_KBPS: mp3lame_encoder::Bitrate = mp3lame_encoder::Bitrate::Kbps64;
const OPUS_BITS_PER_SECOND: i32 = 32_000;
/// 20 ms at 48 kHz, Opus's usual frame.
const OPUS_FRAME: usize = 960;
/// The Ogg stream's serial number (one logical stream per file).
const OGG_SERIAL: u32 = 0x4844_524d;

/// An audio format `/v1/audio/speech` may be asked for, by OpenAI's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SpeechFormat {
    #[default]
    Mp3,
    Opus,
    Aac,
    Flac,
    Wav,
    Pcm,
}

impl SpeechFormat {
    /// Every format by OpenAI's name, in OpenAI's order.
    pub const ALL: [SpeechFormat; 6] = [
        SpeechFormat::Mp3,
        SpeechFormat::Opus,
        SpeechFormat::Aac,
        SpeechFormat::Flac,
        SpeechFormat::Wav,
        SpeechFormat::Pcm,
    ];

    /// OpenAI's name for it (`response_format`).
    pub fn name(self) -> &'static str {
        match self {
            SpeechFormat::Mp3 => "mp3",
            SpeechFormat::Opus => "opus",
            SpeechFormat::Aac => "aac",
            SpeechFormat::Flac => "flac",
            SpeechFormat::Wav => "wav",
            SpeechFormat::Pcm => "pcm",
        }
    }

    /// The media type of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            SpeechFormat::Mp3 => "audio/mpeg",
            SpeechFormat::Opus => "audio/ogg",
            SpeechFormat::Aac => "audio/aac",
            SpeechFormat::Flac => "audio/flac",
            SpeechFormat::Wav => "audio/wav",
            SpeechFormat::Pcm => "audio/pcm",
        }
    }

    /// The usual file extension.
    pub fn extension(self) -> &'static str {
        match self {
            SpeechFormat::Mp3 => "mp3",
            SpeechFormat::Opus => "opus",
            SpeechFormat::Aac => "aac",
            SpeechFormat::Flac => "flac",
            SpeechFormat::Wav => "wav",
            SpeechFormat::Pcm => "pcm",
        }
    }

    /// Why this format cannot be produced here, if it cannot.
    ///
    /// AAC: the one maintained AAC encoder with Rust bindings, Fraunhofer's FDK AAC (crate
    /// `fdk-aac`), is under a licence that is not open source (it grants no patent licence and
    /// allows use only where patent licences authorize it), which this MIT/Apache-2.0
    /// application cannot pass on to every user; the pure-Rust AAC encoders are young and
    /// experimental. No encoder is written by hand instead.
    pub fn unavailable(self) -> Option<&'static str> {
        match self {
            SpeechFormat::Aac => Some(
                "no AAC encoder under an open-source licence is bundled (Fraunhofer's FDK AAC \
                 is not open source and grants no patent licence)",
            ),
            _ => None,
        }
    }

    /// The formats that can be produced, by name, for messages ("mp3, opus, flac, wav or pcm").
    pub fn available_list() -> String {
        let names: Vec<&str> = SpeechFormat::ALL
            .iter()
            .filter(|f| f.unavailable().is_none())
            .map(|f| f.name())
            .collect();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        }
    }
}

impl fmt::Display for SpeechFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `response_format` that is none of OpenAI's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("response_format {given:?} is not one of mp3, opus, aac, flac, wav or pcm")]
pub struct UnknownFormat {
    pub given: String,
}

impl FromStr for SpeechFormat {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SpeechFormat::ALL
            .into_iter()
            .find(|f| f.name() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| UnknownFormat {
                given: s.to_string(),
            })
    }
}

/// Why audio could not be encoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EncodeError {
    #[error("{format} is not available: {reason}")]
    Unavailable {
        format: SpeechFormat,
        reason: &'static str,
    },
    #[error("there is no audio to encode")]
    Empty,
    #[error("cannot prepare the audio for {format}: {source}")]
    Resample {
        format: SpeechFormat,
        source: AudioError,
    },
    #[error("the {format} encoder failed: {detail}")]
    Encoder {
        format: SpeechFormat,
        detail: String,
    },
}

/// `audio` (mono) as a file in `format`: MP3 at its own rate when MP3 has it (else 24 kHz),
/// 64 kb/s; Ogg Opus at 48 kHz, 32 kb/s; FLAC and WAV 16-bit at its own rate; PCM 24 kHz
/// 16-bit signed little-endian, no header.
pub fn encode(audio: &Audio, format: SpeechFormat) -> Result<Vec<u8>, EncodeError> {
    if let Some(reason) = format.unavailable() {
        return Err(EncodeError::Unavailable { format, reason });
    }
    if audio.sample_rate == 0 {
        return Err(EncodeError::Empty);
    }
    match format {
        SpeechFormat::Mp3 => mp3(audio),
        SpeechFormat::Opus => {
            let mut stream = StreamEncoder::new(format)?;
            let mut bytes = stream.push(audio)?;
            bytes.extend(stream.finish()?);
            Ok(bytes)
        }
        SpeechFormat::Flac => flac(audio),
        SpeechFormat::Wav => Ok(wav_bytes(audio)),
        SpeechFormat::Pcm => {
            let samples = at_rate(audio, PCM_SAMPLE_RATE, format)?;
            Ok(samples
                .iter()
                .flat_map(|&s| to_i16(s).to_le_bytes())
                .collect())
        }
        SpeechFormat::Aac => unreachable!("refused above"),
    }
}

fn to_i16(s: f32) -> i16 {
    (s.clamp(-1.0, 1.0) * i16::MAX as f32).round() as i16
}

fn at_rate(audio: &Audio, rate: u32, format: SpeechFormat) -> Result<Vec<f32>, EncodeError> {
    resample(&audio.samples, audio.sample_rate, rate)
        .map_err(|source| EncodeError::Resample { format, source })
}

fn mp3(audio: &Audio) -> Result<Vec<u8>, EncodeError> {
    use mp3lame_encoder::{FlushGap, MonoPcm};
    let format = SpeechFormat::Mp3;
    let failed = |detail: String| EncodeError::Encoder { format, detail };
    let rate = mp3_rate(audio.sample_rate);
    let samples = at_rate(audio, rate, format)?;
    let samples: Vec<i16> = samples.iter().map(|&s| to_i16(s)).collect();
    let mut encoder = lame(rate, true)?;
    let mut out = Vec::new();
    // LAME works in chunks; each gets room for its worst case.
    for chunk in samples.chunks(1 << 16) {
        out.reserve(mp3lame_encoder::max_required_buffer_size(chunk.len()));
        encoder
            .encode_to_vec(MonoPcm(chunk), &mut out)
            .map_err(|e| failed(e.to_string()))?;
    }
    out.reserve(7200);
    encoder
        .flush_to_vec::<FlushGap>(&mut out)
        .map_err(|e| failed(e.to_string()))?;
    // LAME opened the stream with a placeholder frame for its tag (the Info header with the
    // frame count and the encoder's delay and padding, so players trim them and know the
    // length): the tag overwrites it, as LAME's own front end does.
    let mut tag = Vec::with_capacity(encoder.lame_tag_size());
    if let Some(n) = encoder.lame_tag_encode_to_vec(&mut tag) {
        if let Some(placeholder) = out.get_mut(..n.get()) {
            placeholder.copy_from_slice(&tag);
        }
    }
    Ok(out)
}

/// The Ogg Opus identification header (RFC 7845 §5.1): one channel, no gain, mapping family 0.
fn opus_head(pre_skip: u16, input_rate: u32) -> Vec<u8> {
    let mut head = b"OpusHead".to_vec();
    head.push(1); // version
    head.push(1); // channels
    head.extend_from_slice(&pre_skip.to_le_bytes());
    head.extend_from_slice(&input_rate.to_le_bytes());
    head.extend_from_slice(&0i16.to_le_bytes()); // output gain
    head.push(0); // channel mapping family
    head
}

/// The Ogg Opus comment header (RFC 7845 §5.2): the vendor string, no comments.
fn opus_tags(vendor: &str) -> Vec<u8> {
    let mut tags = b"OpusTags".to_vec();
    tags.extend_from_slice(&(vendor.len() as u32).to_le_bytes());
    tags.extend_from_slice(vendor.as_bytes());
    tags.extend_from_slice(&0u32.to_le_bytes());
    tags
}

/// The rate MP3 is encoded at: the audio's own when MP3 has it.
fn mp3_rate(rate: u32) -> u32 {
    if MP3_RATES.contains(&rate) {
        rate
    } else {
        MP3_FALLBACK_RATE
    }
}

/// A mono LAME encoder at `rate` in and out, constant bit rate; `info_tag` reserves the
/// first frame for the Info tag, which only a whole file can fill in.
fn lame(rate: u32, info_tag: bool) -> Result<mp3lame_encoder::Encoder, EncodeError> {
    use mp3lame_encoder::{Builder, Mode, Quality};
    let format = SpeechFormat::Mp3;
    let failed = |detail: String| EncodeError::Encoder { format, detail };
    let mut builder = Builder::new().ok_or_else(|| failed("LAME could not start".into()))?;
    let setup = |e: mp3lame_encoder::BuildError| failed(format!("setting it up: {e}"));
    builder.set_num_channels(1).map_err(setup)?;
    builder.set_sample_rate(rate).map_err(setup)?;
    // The same rate out: LAME would otherwise pick a lower one for a low bit rate.
    builder
        .set_output_sample_rate(std::num::NonZeroU32::new(rate))
        .map_err(setup)?;
    builder.set_mode(Mode::Mono).map_err(setup)?;
    builder.set_brate(MP3_KBPS).map_err(setup)?;
    builder.set_quality(Quality::Good).map_err(setup)?;
    builder.set_to_write_vbr_tag(info_tag).map_err(setup)?;
    builder.build().map_err(setup)
}

/// Encodes speech piece by piece as it is synthesized, so the first bytes can be sent
/// before the rest exists: [`StreamEncoder::push`] returns what can be sent now,
/// [`StreamEncoder::finish`] the end. The pieces joined are a playable file: PCM as
/// [`encode`] gives it; WAV with the "unknown length" sizes streamed WAV uses; MP3 without
/// the Info tag (it would need the whole file); Ogg Opus a page per piece; FLAC only at the
/// end, its header holding the length and checksum of the whole.
pub struct StreamEncoder {
    format: SpeechFormat,
    state: StreamState,
}

enum StreamState {
    Pcm,
    Wav { header_sent: bool },
    Mp3(Option<(u32, mp3lame_encoder::Encoder)>),
    Opus(Option<Box<OpusStream>>),
    Flac(Option<Box<FlacStream>>),
}

/// Ogg Opus being written: samples not yet a whole frame wait in `pending`.
struct OpusStream {
    encoder: opus::Encoder,
    writer: ogg::writing::PacketWriter<'static, Vec<u8>>,
    pre_skip: u16,
    pending: Vec<f32>,
    /// Input samples (48 kHz) taken so far, pre-skip not counted.
    taken: u64,
    /// Frames encoded so far.
    frames: u64,
}

impl StreamEncoder {
    pub fn new(format: SpeechFormat) -> Result<Self, EncodeError> {
        if let Some(reason) = format.unavailable() {
            return Err(EncodeError::Unavailable { format, reason });
        }
        let state = match format {
            SpeechFormat::Pcm => StreamState::Pcm,
            SpeechFormat::Wav => StreamState::Wav { header_sent: false },
            SpeechFormat::Mp3 => StreamState::Mp3(None),
            SpeechFormat::Opus => StreamState::Opus(None),
            SpeechFormat::Flac => StreamState::Flac(None),
            SpeechFormat::Aac => unreachable!("refused above"),
        };
        Ok(StreamEncoder { format, state })
    }

    pub fn format(&self) -> SpeechFormat {
        self.format
    }

    /// Encodes the next piece (every piece at the same rate), returning the bytes ready.
    pub fn push(&mut self, audio: &Audio) -> Result<Vec<u8>, EncodeError> {
        if audio.sample_rate == 0 {
            return Err(EncodeError::Empty);
        }
        let format = self.format;
        let failed = |detail: String| EncodeError::Encoder { format, detail };
        match &mut self.state {
            StreamState::Pcm => Ok(at_rate(audio, PCM_SAMPLE_RATE, format)?
                .iter()
                .flat_map(|&s| to_i16(s).to_le_bytes())
                .collect()),
            StreamState::Wav { header_sent } => {
                let mut out = Vec::with_capacity(44 + 2 * audio.samples.len());
                if !*header_sent {
                    out.extend(streamed_wav_header(audio.sample_rate));
                    *header_sent = true;
                }
                out.extend(audio.samples.iter().flat_map(|&s| to_i16(s).to_le_bytes()));
                Ok(out)
            }
            StreamState::Mp3(state) => {
                let (rate, encoder) = match state {
                    Some(started) => started,
                    None => {
                        let rate = mp3_rate(audio.sample_rate);
                        state.insert((rate, lame(rate, false)?))
                    }
                };
                let samples: Vec<i16> = at_rate(audio, *rate, format)?
                    .iter()
                    .map(|&s| to_i16(s))
                    .collect();
                let mut out = Vec::new();
                for chunk in samples.chunks(1 << 16) {
                    out.reserve(mp3lame_encoder::max_required_buffer_size(chunk.len()));
                    encoder
                        .encode_to_vec(mp3lame_encoder::MonoPcm(chunk), &mut out)
                        .map_err(|e| failed(e.to_string()))?;
                }
                Ok(out)
            }
            StreamState::Opus(state) => {
                let stream = match state {
                    Some(stream) => stream,
                    None => state.insert(Box::new(OpusStream::start(audio.sample_rate)?)),
                };
                stream.push(&at_rate(audio, OPUS_SAMPLE_RATE, format)?)
            }
            StreamState::Flac(state) => match state {
                Some(stream) => stream.push(&audio.samples),
                None => {
                    let (stream, mut header) = FlacStream::start(audio.sample_rate)?;
                    header.extend(state.insert(Box::new(stream)).push(&audio.samples)?);
                    Ok(header)
                }
            },
        }
    }

    /// The end of the file: what the encoder still held.
    pub fn finish(self) -> Result<Vec<u8>, EncodeError> {
        Ok(self.finish_whole()?.tail)
    }

    /// The end of the file, and for a format whose header says its length (FLAC), the
    /// header as it is now that the stream is whole: an output that can seek writes it over
    /// the stream's first bytes (it is as long as the one sent first); one that cannot leaves
    /// the length unknown, which readers take (they count the frames).
    pub fn finish_whole(self) -> Result<Finished, EncodeError> {
        if let StreamState::Flac(Some(stream)) = self.state {
            let (tail, header) = stream.finish()?;
            return Ok(Finished {
                tail,
                header: Some(header),
            });
        }
        Ok(Finished {
            tail: self.finish_rest()?,
            header: None,
        })
    }

    fn finish_rest(self) -> Result<Vec<u8>, EncodeError> {
        let format = self.format;
        let failed = |detail: String| EncodeError::Encoder { format, detail };
        match self.state {
            StreamState::Pcm | StreamState::Wav { .. } => Ok(Vec::new()),
            StreamState::Mp3(None) | StreamState::Opus(None) => Err(EncodeError::Empty),
            StreamState::Mp3(Some((_, mut encoder))) => {
                let mut out = Vec::with_capacity(7200);
                encoder
                    .flush_to_vec::<mp3lame_encoder::FlushGap>(&mut out)
                    .map_err(|e| failed(e.to_string()))?;
                Ok(out)
            }
            StreamState::Opus(Some(stream)) => (*stream).finish(),
            StreamState::Flac(None) => Err(EncodeError::Empty),
            StreamState::Flac(Some(stream)) => Ok(stream.finish()?.0),
        }
    }
}

/// What [`StreamEncoder::finish_whole`] gives: the last bytes, and the stream's first bytes
/// as they are once it is whole (FLAC's header with its length and checksum).
pub struct Finished {
    pub tail: Vec<u8>,
    pub header: Option<Vec<u8>>,
}

/// A WAV header for a stream of unknown length: both sizes at their largest, as streamed
/// WAV has them (readers take the data to the end of the stream).
fn streamed_wav_header(rate: u32) -> Vec<u8> {
    let mut h = Vec::with_capacity(44);
    h.extend_from_slice(b"RIFF");
    h.extend_from_slice(&u32::MAX.to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes()); // PCM
    h.extend_from_slice(&1u16.to_le_bytes()); // mono
    h.extend_from_slice(&rate.to_le_bytes());
    h.extend_from_slice(&(rate * 2).to_le_bytes()); // bytes per second
    h.extend_from_slice(&2u16.to_le_bytes()); // block align
    h.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
    h.extend_from_slice(b"data");
    h.extend_from_slice(&u32::MAX.to_le_bytes());
    h
}

impl OpusStream {
    /// Writes the identification and comment headers, each on its own page (RFC 7845 §3).
    fn start(input_rate: u32) -> Result<Self, EncodeError> {
        use ogg::writing::{PacketWriteEndInfo, PacketWriter};
        let format = SpeechFormat::Opus;
        let failed = |detail: String| EncodeError::Encoder { format, detail };
        let opus_failed = |e: opus::Error| failed(e.to_string());
        let mut encoder = opus::Encoder::new(
            OPUS_SAMPLE_RATE,
            opus::Channels::Mono,
            opus::Application::Audio,
        )
        .map_err(opus_failed)?;
        encoder
            .set_bitrate(opus::Bitrate::Bits(OPUS_BITS_PER_SECOND))
            .map_err(opus_failed)?;
        encoder
            .set_signal(opus::Signal::Voice)
            .map_err(opus_failed)?;
        let pre_skip = encoder.get_lookahead().map_err(opus_failed)?;
        let pre_skip =
            u16::try_from(pre_skip).map_err(|_| failed(format!("lookahead {pre_skip}")))?;
        let mut writer = PacketWriter::new(Vec::new());
        let io = |e: std::io::Error| failed(format!("writing the Ogg stream: {e}"));
        writer
            .write_packet(
                opus_head(pre_skip, input_rate),
                OGG_SERIAL,
                PacketWriteEndInfo::EndPage,
                0,
            )
            .map_err(io)?;
        writer
            .write_packet(
                opus_tags(&format!("Headroom ({})", opus::version())),
                OGG_SERIAL,
                PacketWriteEndInfo::EndPage,
                0,
            )
            .map_err(io)?;
        Ok(OpusStream {
            encoder,
            writer,
            pre_skip,
            pending: Vec::new(),
            taken: 0,
            frames: 0,
        })
    }

    /// Encodes every whole frame of `samples` (48 kHz) and what waited before them, on a
    /// page of their own so they can be sent now.
    fn push(&mut self, samples: &[f32]) -> Result<Vec<u8>, EncodeError> {
        self.taken += samples.len() as u64;
        self.pending.extend_from_slice(samples);
        let whole = self.pending.len() / OPUS_FRAME * OPUS_FRAME;
        let ready: Vec<f32> = self.pending.drain(..whole).collect();
        self.encode_frames(&ready, false)?;
        Ok(std::mem::take(self.writer.inner_mut()))
    }

    /// Encodes the rest, padded with silence so the encoder's lookahead comes out; the last
    /// page's granule position (pre-skip plus every input sample) trims the padding away.
    fn finish(mut self) -> Result<Vec<u8>, EncodeError> {
        let end = u64::from(self.pre_skip) + self.taken;
        let encoded = self.frames * OPUS_FRAME as u64;
        let mut rest = std::mem::take(&mut self.pending);
        let needed =
            (end.div_ceil(OPUS_FRAME as u64) * OPUS_FRAME as u64).max(encoded + OPUS_FRAME as u64);
        rest.resize((needed - encoded) as usize, 0.0);
        self.encode_frames(&rest, true)?;
        Ok(self.writer.into_inner())
    }

    fn encode_frames(&mut self, samples: &[f32], end_of_stream: bool) -> Result<(), EncodeError> {
        use ogg::writing::PacketWriteEndInfo;
        let format = SpeechFormat::Opus;
        let failed = |detail: String| EncodeError::Encoder { format, detail };
        let count = samples.len() / OPUS_FRAME;
        let mut packet = vec![0u8; 4000];
        for (i, frame) in samples.chunks_exact(OPUS_FRAME).enumerate() {
            let n = self
                .encoder
                .encode_float(frame, &mut packet)
                .map_err(|e| failed(e.to_string()))?;
            self.frames += 1;
            let last = i + 1 == count;
            let (info, granule) = match (last, end_of_stream) {
                (true, true) => (
                    PacketWriteEndInfo::EndStream,
                    u64::from(self.pre_skip) + self.taken,
                ),
                (true, false) => (PacketWriteEndInfo::EndPage, self.frames * OPUS_FRAME as u64),
                _ => (
                    PacketWriteEndInfo::NormalPacket,
                    self.frames * OPUS_FRAME as u64,
                ),
            };
            self.writer
                .write_packet(packet[..n].to_vec(), OGG_SERIAL, info, granule)
                .map_err(|e| failed(format!("writing the Ogg stream: {e}")))?;
        }
        Ok(())
    }
}

/// FLAC being written a frame at a time, so a stream of hours holds one block: the stream's
/// header first, with its length and checksum left unknown (as a streamed FLAC has them;
/// readers count the frames), then each block of [`FlacStream::BLOCK`] samples as it fills.
struct FlacStream {
    config: flacenc::error::Verified<flacenc::config::Encoder>,
    info: flacenc::component::StreamInfo,
    frame: flacenc::source::FrameBuf,
    pending: Vec<i32>,
    frames: usize,
    /// Samples taken, and their checksum (of the 16-bit little-endian samples, as FLAC's
    /// header has it), for the header once the stream is whole.
    total: usize,
    md5: md5::Md5,
}

impl FlacStream {
    /// The reference encoder's block for 44.1/48 kHz.
    const BLOCK: usize = 4096;

    /// The encoder, and the stream's header.
    fn start(rate: u32) -> Result<(FlacStream, Vec<u8>), EncodeError> {
        use flacenc::component::BitRepr;
        use flacenc::error::Verify;
        let failed = |detail: String| EncodeError::Encoder {
            format: SpeechFormat::Flac,
            detail,
        };
        let mut config = flacenc::config::Encoder::default();
        config.block_size = Self::BLOCK;
        let config = config
            .into_verified()
            .map_err(|(_, e)| failed(format!("{e:?}")))?;
        let mut stream = flacenc::component::Stream::new(rate as usize, 1, 16)
            .map_err(|e| failed(format!("{e:?}")))?;
        // Every block but the last is this long (RFC 9639 §8.2: the last is not counted).
        stream
            .stream_info_mut()
            .set_block_sizes(Self::BLOCK, Self::BLOCK)
            .map_err(|e| failed(format!("{e:?}")))?;
        let mut header = flacenc::bitsink::ByteSink::new();
        stream
            .write(&mut header)
            .map_err(|e| failed(format!("{e:?}")))?;
        let frame = flacenc::source::FrameBuf::with_size(1, Self::BLOCK)
            .map_err(|e| failed(format!("{e:?}")))?;
        Ok((
            FlacStream {
                config,
                info: stream.stream_info().clone(),
                frame,
                pending: Vec::with_capacity(Self::BLOCK),
                frames: 0,
                total: 0,
                md5: md5::Md5::default(),
            },
            header.into_inner(),
        ))
    }

    /// The frames `samples` complete.
    fn push(&mut self, samples: &[f32]) -> Result<Vec<u8>, EncodeError> {
        let mut out = flacenc::bitsink::ByteSink::new();
        use md5::Digest;
        self.total += samples.len();
        for &sample in samples {
            let sample = to_i16(sample);
            self.md5.update(sample.to_le_bytes());
            self.pending.push(i32::from(sample));
            if self.pending.len() == Self::BLOCK {
                self.write_frame(&mut out)?;
            }
        }
        Ok(out.into_inner())
    }

    /// The last, shorter frame, and the stream's header as it is now whole (its length and
    /// checksum known), as long as the one written first.
    fn finish(mut self) -> Result<(Vec<u8>, Vec<u8>), EncodeError> {
        use flacenc::component::BitRepr;
        use md5::Digest;
        let failed = |detail: String| EncodeError::Encoder {
            format: SpeechFormat::Flac,
            detail,
        };
        let mut out = flacenc::bitsink::ByteSink::new();
        if !self.pending.is_empty() {
            self.write_frame(&mut out)?;
        }
        let mut info = self.info.clone();
        info.set_total_samples(self.total);
        info.set_md5_digest(&self.md5.finalize().into());
        let mut header = flacenc::bitsink::ByteSink::new();
        flacenc::component::Stream::with_stream_info(info)
            .write(&mut header)
            .map_err(|e| failed(format!("{e:?}")))?;
        Ok((out.into_inner(), header.into_inner()))
    }

    fn write_frame(&mut self, out: &mut flacenc::bitsink::ByteSink) -> Result<(), EncodeError> {
        use flacenc::component::BitRepr;
        use flacenc::source::Fill;
        let failed = |detail: String| EncodeError::Encoder {
            format: SpeechFormat::Flac,
            detail,
        };
        self.frame
            .fill_interleaved(&self.pending)
            .map_err(|e| failed(format!("{e:?}")))?;
        let frame =
            flacenc::encode_fixed_size_frame(&self.config, &self.frame, self.frames, &self.info)
                .map_err(|e| failed(format!("{e:?}")))?;
        frame.write(out).map_err(|e| failed(format!("{e:?}")))?;
        self.frames += 1;
        self.pending.clear();
        Ok(())
    }
}

fn flac(audio: &Audio) -> Result<Vec<u8>, EncodeError> {
    use flacenc::component::BitRepr;
    use flacenc::error::Verify;
    let format = SpeechFormat::Flac;
    let failed = |detail: String| EncodeError::Encoder { format, detail };
    let samples: Vec<i32> = audio.samples.iter().map(|&s| to_i16(s) as i32).collect();
    let config = flacenc::config::Encoder::default()
        .into_verified()
        .map_err(|(_, e)| failed(format!("{e:?}")))?;
    let source =
        flacenc::source::MemSource::from_samples(&samples, 1, 16, audio.sample_rate as usize);
    let mut stream = flacenc::encode_with_fixed_block_size(&config, source, config.block_size)
        .map_err(|e| failed(format!("{e:?}")))?;
    // The minimum block size excludes the last block (RFC 9639 §8.2); flacenc counts it, and
    // readers such as symphonia then refuse the fixed-size stream.
    let info = stream.stream_info_mut();
    let largest = info.max_block_size();
    info.set_block_sizes(largest, largest)
        .map_err(|e| failed(format!("{e:?}")))?;
    let mut sink = flacenc::bitsink::ByteSink::new();
    stream
        .write(&mut sink)
        .map_err(|e| failed(format!("{e:?}")))?;
    Ok(sink.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audio::{decode_bytes, DecodeLimits};
    use std::path::Path;

    /// A voice-like test signal: a 150 Hz tone with harmonics, rising and falling.
    fn voice(rate: u32, secs: f64) -> Audio {
        let n = (rate as f64 * secs) as usize;
        let samples = (0..n)
            .map(|i| {
                let t = i as f64 / rate as f64;
                let envelope = (std::f64::consts::PI * t / secs).sin();
                let f = 150.0;
                let s = (2.0 * std::f64::consts::PI * f * t).sin()
                    + 0.5 * (2.0 * std::f64::consts::PI * 2.0 * f * t).sin()
                    + 0.25 * (2.0 * std::f64::consts::PI * 3.0 * f * t).sin();
                (0.4 * envelope * s) as f32
            })
            .collect();
        Audio {
            samples,
            sample_rate: rate,
        }
    }

    fn decoded(bytes: Vec<u8>, extension: &str) -> Audio {
        decode_bytes(
            bytes,
            Some(extension),
            Path::new(&format!("test.{extension}")),
            DecodeLimits::default(),
        )
        .unwrap()
    }

    /// The correlation of `b` with `a` at their best alignment within `max_lag` samples.
    fn best_correlation(a: &[f32], b: &[f32], max_lag: usize) -> f64 {
        (0..=max_lag)
            .map(|lag| {
                let n = a.len().min(b.len().saturating_sub(lag));
                let (mut ab, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
                for i in 0..n {
                    let (x, y) = (a[i] as f64, b[i + lag] as f64);
                    ab += x * y;
                    aa += x * x;
                    bb += y * y;
                }
                ab / (aa.sqrt() * bb.sqrt()).max(1e-12)
            })
            .fold(f64::MIN, f64::max)
    }

    #[test]
    fn formats_parse_by_openais_names_and_mp3_is_the_default() {
        for f in SpeechFormat::ALL {
            assert_eq!(f.name().parse::<SpeechFormat>().unwrap(), f);
            assert_eq!(f.to_string(), f.name());
        }
        assert_eq!(SpeechFormat::default(), SpeechFormat::Mp3);
        assert_eq!(
            " FLAC ".parse::<SpeechFormat>().unwrap(),
            SpeechFormat::Flac
        );
        let e = "ogg".parse::<SpeechFormat>().unwrap_err();
        assert!(
            e.to_string().contains("mp3, opus, aac, flac, wav or pcm"),
            "{e}"
        );
        assert_eq!(SpeechFormat::Opus.content_type(), "audio/ogg");
        assert_eq!(SpeechFormat::Mp3.content_type(), "audio/mpeg");
        assert_eq!(SpeechFormat::Pcm.extension(), "pcm");
        assert_eq!(
            SpeechFormat::available_list(),
            "mp3, opus, flac, wav or pcm"
        );
    }

    #[test]
    fn aac_is_refused_with_its_reason() {
        let e = encode(&voice(24_000, 0.5), SpeechFormat::Aac).unwrap_err();
        assert!(e.to_string().starts_with("aac is not available: "), "{e}");
    }

    #[test]
    fn encode_mp3_decodes_back_to_the_same_sound_at_the_same_rate() {
        let audio = voice(24_000, 1.0);
        let bytes = encode(&audio, SpeechFormat::Mp3).unwrap();
        // An MPEG-2 Layer III frame header (sync, version 2, layer III).
        assert_eq!((bytes[0], bytes[1] & 0xfe), (0xff, 0xf2));
        // LAME's Info tag (frame count, delay and padding) in the first frame.
        assert!(bytes[..64].windows(4).any(|w| w == b"Info"));
        let back = decoded(bytes, "mp3");
        assert_eq!(back.sample_rate, 24_000);
        assert!(
            (back.duration_secs() - 1.0).abs() < 0.1,
            "{}",
            back.duration_secs()
        );
        let c = best_correlation(&audio.samples, &back.samples, 3000);
        assert!(c > 0.9, "correlation {c}");
    }

    #[test]
    fn encode_mp3_resamples_a_rate_mp3_lacks() {
        let back = decoded(
            encode(&voice(16_500, 0.5), SpeechFormat::Mp3).unwrap(),
            "mp3",
        );
        assert_eq!(back.sample_rate, MP3_FALLBACK_RATE);
        assert!((back.duration_secs() - 0.5).abs() < 0.1);
    }

    #[test]
    fn encode_flac_is_lossless_at_16_bits() {
        let audio = voice(22_050, 0.7);
        let bytes = encode(&audio, SpeechFormat::Flac).unwrap();
        assert_eq!(&bytes[..4], b"fLaC");
        let back = decoded(bytes, "flac");
        assert_eq!(back.sample_rate, 22_050);
        assert_eq!(back.samples.len(), audio.samples.len());
        let worst = audio
            .samples
            .iter()
            .zip(&back.samples)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 2.0 / 32768.0, "worst error {worst}");
    }

    #[test]
    fn encode_opus_is_an_ogg_opus_stream_that_libopus_decodes() {
        let audio = voice(24_000, 1.0);
        let bytes = encode(&audio, SpeechFormat::Opus).unwrap();
        let mut reader = ogg::PacketReader::new(std::io::Cursor::new(bytes));
        let head = reader.read_packet_expected().unwrap();
        assert_eq!(&head.data[..8], b"OpusHead");
        let pre_skip = u16::from_le_bytes([head.data[10], head.data[11]]) as usize;
        assert_eq!(
            u32::from_le_bytes(head.data[12..16].try_into().unwrap()),
            24_000
        );
        let tags = reader.read_packet_expected().unwrap();
        assert_eq!(&tags.data[..8], b"OpusTags");
        let mut decoder = opus::Decoder::new(48_000, opus::Channels::Mono).unwrap();
        let mut pcm = Vec::new();
        let mut frame = vec![0f32; 5760];
        let mut granule = 0;
        while let Some(packet) = reader.read_packet().unwrap() {
            let n = decoder
                .decode_float(&packet.data, &mut frame, false)
                .unwrap();
            pcm.extend_from_slice(&frame[..n]);
            granule = packet.absgp_page();
            if packet.last_in_stream() {
                break;
            }
        }
        // The final granule position: pre-skip plus exactly the input's 48 kHz samples.
        assert_eq!(granule as usize, pre_skip + 48_000);
        let pcm = &pcm[pre_skip..pre_skip + 48_000];
        let reference = resample(&audio.samples, 24_000, 48_000).unwrap();
        let c = best_correlation(&reference, pcm, 0);
        assert!(c > 0.9, "correlation {c}");
    }

    #[test]
    fn encode_pcm_is_24khz_16bit_little_endian_without_a_header() {
        let audio = voice(22_050, 1.0);
        let bytes = encode(&audio, SpeechFormat::Pcm).unwrap();
        assert_eq!(bytes.len(), 2 * 24_000);
        let direct = encode(&voice(24_000, 1.0), SpeechFormat::Pcm).unwrap();
        let first = voice(24_000, 1.0).samples[1000];
        assert_eq!(
            i16::from_le_bytes([direct[2000], direct[2001]]),
            to_i16(first)
        );
    }

    #[test]
    fn encode_wav_keeps_the_rate() {
        let back = decoded(
            encode(&voice(24_000, 0.5), SpeechFormat::Wav).unwrap(),
            "wav",
        );
        assert_eq!(back.sample_rate, 24_000);
        assert_eq!(back.samples.len(), 12_000);
    }

    #[test]
    fn encode_takes_silence_and_a_very_short_take() {
        for f in SpeechFormat::ALL
            .into_iter()
            .filter(|f| f.unavailable().is_none())
        {
            let silent = Audio {
                samples: vec![0.0; 100],
                sample_rate: 24_000,
            };
            assert!(!encode(&silent, f).unwrap().is_empty(), "{f}");
        }
    }

    /// `audio` in three pieces through a [`StreamEncoder`], the bytes as they came out.
    fn streamed(audio: &Audio, format: SpeechFormat) -> Vec<Vec<u8>> {
        let third = audio.samples.len() / 3;
        let mut stream = StreamEncoder::new(format).unwrap();
        let mut out: Vec<Vec<u8>> = [
            &audio.samples[..third],
            &audio.samples[third..2 * third],
            &audio.samples[2 * third..],
        ]
        .iter()
        .map(|piece| {
            stream
                .push(&Audio {
                    samples: piece.to_vec(),
                    sample_rate: audio.sample_rate,
                })
                .unwrap()
        })
        .collect();
        out.push(stream.finish().unwrap());
        out
    }

    #[test]
    fn streamed_pieces_join_into_a_file_of_the_whole_sound() {
        let audio = voice(24_000, 1.5);
        let n = audio.samples.len();
        for format in [
            SpeechFormat::Pcm,
            SpeechFormat::Wav,
            SpeechFormat::Mp3,
            SpeechFormat::Opus,
            SpeechFormat::Flac,
        ] {
            let pieces = streamed(&audio, format);
            // Every format has bytes to send before the end.
            assert!(
                !pieces[0].is_empty(),
                "{format}: nothing after the first piece"
            );
            let bytes = pieces.concat();
            if format == SpeechFormat::Pcm {
                assert_eq!(bytes, encode(&audio, format).unwrap());
                continue;
            }
            if format == SpeechFormat::Opus {
                // Read back by libopus in the test below (symphonia has no Opus decoder).
                continue;
            }
            let back = decoded(bytes, format.extension());
            assert_eq!(back.sample_rate, 24_000, "{format}");
            let expected = n;
            // MP3 without its Info tag keeps LAME's delay and padding (under 2 frames).
            let slack = if format == SpeechFormat::Mp3 {
                2 * 1152 + 576
            } else {
                0
            };
            let got = back.samples.len();
            assert!(
                got >= expected && got <= expected + slack,
                "{format}: {got} samples for {expected}"
            );
            let c = best_correlation(&audio.samples, &back.samples, 2 * 1152);
            assert!(c > 0.9, "{format}: correlation {c}");
        }
    }

    #[test]
    fn a_streamed_flac_is_written_a_block_at_a_time_and_loses_nothing() {
        // Ten seconds pushed in pieces of odd lengths: each piece's bytes come as its blocks
        // fill (the encoder holds at most one block), and the file is the sound, sample for
        // sample at 16 bits.
        let audio = voice(16_000, 10.0);
        let mut encoder = StreamEncoder::new(SpeechFormat::Flac).unwrap();
        let mut bytes = Vec::new();
        let mut sent_before_end = 0;
        for piece in audio.samples.chunks(3_001) {
            let out = encoder
                .push(&Audio {
                    samples: piece.to_vec(),
                    sample_rate: 16_000,
                })
                .unwrap();
            sent_before_end += out.len();
            bytes.extend(out);
        }
        let whole = encoder.finish_whole().unwrap();
        let last = whole.tail;
        assert!(
            last.len() < sent_before_end / 10,
            "{} bytes held to the end",
            last.len()
        );
        bytes.extend(last);
        // Sent as it came, its header says nothing of its length; written over its start, the
        // header made at the end says the length and checksum.
        let header = whole.header.unwrap();
        let streaminfo = |b: &[u8]| b[8..42].to_vec();
        let total = |info: &[u8]| {
            u64::from(info[13] & 0x0f) << 32
                | u64::from(u32::from_be_bytes(info[14..18].try_into().unwrap()))
        };
        assert_eq!(total(&streaminfo(&bytes)), 0);
        assert_eq!(&header[..8], &bytes[..8]);
        assert_eq!(total(&streaminfo(&header)), audio.samples.len() as u64);
        use md5::Digest;
        let pcm: Vec<u8> = audio
            .samples
            .iter()
            .flat_map(|&s| to_i16(s).to_le_bytes())
            .collect();
        assert_eq!(streaminfo(&header)[18..34], md5::Md5::digest(&pcm)[..]);
        bytes[..header.len()].copy_from_slice(&header);
        let back = decoded(bytes, "flac");
        assert_eq!(back.sample_rate, 16_000);
        assert_eq!(back.samples.len(), audio.samples.len());
        // symphonia reads 16-bit samples as n / 32768.
        for (a, b) in audio.samples.iter().zip(&back.samples) {
            assert_eq!(f32::from(to_i16(*a)) / 32768.0, *b);
        }
    }

    #[test]
    fn a_streamed_opus_ends_at_the_exact_granule_and_sends_a_page_per_piece() {
        let audio = voice(24_000, 1.0);
        let pieces = streamed(&audio, SpeechFormat::Opus);
        for (i, piece) in pieces.iter().enumerate() {
            assert_eq!(
                &piece[..4.min(piece.len())],
                b"OggS",
                "piece {i} starts a page"
            );
        }
        let mut reader = ogg::PacketReader::new(std::io::Cursor::new(pieces.concat()));
        let head = reader.read_packet_expected().unwrap();
        let pre_skip = u16::from_le_bytes([head.data[10], head.data[11]]) as u64;
        let mut granule = 0;
        while let Some(packet) = reader.read_packet().unwrap() {
            granule = packet.absgp_page();
            if packet.last_in_stream() {
                break;
            }
        }
        assert_eq!(granule, pre_skip + 48_000);
    }

    #[test]
    fn a_stream_with_nothing_pushed_is_refused_as_empty() {
        for format in [SpeechFormat::Mp3, SpeechFormat::Opus, SpeechFormat::Flac] {
            let stream = StreamEncoder::new(format).unwrap();
            assert_eq!(stream.finish().unwrap_err(), EncodeError::Empty, "{format}");
        }
        assert!(matches!(
            StreamEncoder::new(SpeechFormat::Aac),
            Err(EncodeError::Unavailable { .. })
        ));
    }
}
