//! Opus for symphonia, which demuxes it (WebM, Matroska, Ogg) but has no decoder of its own:
//! libopus (the `opus` crate, already built for Headroom's Opus answers) decodes each packet at
//! 48 kHz, mono or stereo, and the encoder's priming samples (the stream's pre-skip) are
//! dropped so the sound starts where it was recorded.

use std::sync::Mutex;
use symphonia::core::audio::{
    AsAudioBufferRef, AudioBuffer, AudioBufferRef, Channels, Signal, SignalSpec,
};
use symphonia::core::codecs::{
    CodecDescriptor, CodecParameters, Decoder, DecoderOptions, FinalizeResult, CODEC_TYPE_OPUS,
};
use symphonia::core::errors::{decode_error, unsupported_error, Error, Result};
use symphonia::core::formats::Packet;

/// Opus always decodes at 48 kHz.
pub(super) const OPUS_RATE: u32 = 48_000;
/// The longest Opus packet: 120 ms.
const MAX_FRAMES: usize = 5_760;

pub(super) struct OpusDecoder {
    params: CodecParameters,
    /// libopus's decoder is `Send` but not `Sync`; symphonia's decoders are both.
    decoder: Mutex<opus::Decoder>,
    channels: usize,
    /// Priming samples (per channel) still to drop.
    skip: usize,
    pre_skip: usize,
    interleaved: Vec<f32>,
    buffer: AudioBuffer<f32>,
}

/// The channel count and pre-skip an `OpusHead` (the codec's private data) declares.
fn opus_head(extra: Option<&[u8]>) -> Result<(usize, usize)> {
    let Some(head) = extra else {
        // Matroska may omit it for plain stereo; the packets say the rest.
        return Ok((2, 0));
    };
    if head.len() < 19 || &head[..8] != b"OpusHead" {
        return decode_error("opus: the stream's header is not an OpusHead");
    }
    let channels = usize::from(head[9]);
    let pre_skip = usize::from(u16::from_le_bytes([head[10], head[11]]));
    let mapping = head[18];
    if channels == 0 || channels > 2 || mapping > 1 {
        return unsupported_error("opus: only mono and stereo Opus are read");
    }
    Ok((channels, pre_skip))
}

impl Decoder for OpusDecoder {
    fn try_new(params: &CodecParameters, _options: &DecoderOptions) -> Result<Self> {
        let (channels, pre_skip) = opus_head(params.extra_data.as_deref())?;
        let layout = if channels == 1 {
            opus::Channels::Mono
        } else {
            opus::Channels::Stereo
        };
        let decoder = opus::Decoder::new(OPUS_RATE, layout)
            .map_err(|_| Error::Unsupported("opus: libopus refused the stream"))?;
        let spec = SignalSpec::new(
            OPUS_RATE,
            if channels == 1 {
                Channels::FRONT_LEFT
            } else {
                Channels::FRONT_LEFT | Channels::FRONT_RIGHT
            },
        );
        let mut params = params.clone();
        params.with_sample_rate(OPUS_RATE);
        Ok(OpusDecoder {
            params,
            decoder: Mutex::new(decoder),
            channels,
            skip: pre_skip,
            pre_skip,
            interleaved: vec![0.0; MAX_FRAMES * channels],
            buffer: AudioBuffer::new(MAX_FRAMES as u64, spec),
        })
    }

    fn supported_codecs() -> &'static [CodecDescriptor] {
        &[CodecDescriptor {
            codec: CODEC_TYPE_OPUS,
            short_name: "opus",
            long_name: "Opus (libopus)",
            inst_func: |params, options| Ok(Box::new(OpusDecoder::try_new(params, options)?)),
        }]
    }

    fn reset(&mut self) {
        if let Ok(mut decoder) = self.decoder.lock() {
            let _ = decoder.reset_state();
        }
        self.skip = self.pre_skip;
    }

    fn codec_params(&self) -> &CodecParameters {
        &self.params
    }

    fn decode(&mut self, packet: &Packet) -> Result<AudioBufferRef<'_>> {
        self.buffer.clear();
        let frames = {
            let mut decoder = self
                .decoder
                .lock()
                .map_err(|_| Error::DecodeError("opus: the decoder failed before"))?;
            decoder
                .decode_float(packet.buf(), &mut self.interleaved, false)
                .map_err(|_| Error::DecodeError("opus: a damaged packet"))?
        };
        let skipped = self.skip.min(frames);
        self.skip -= skipped;
        let kept = frames - skipped;
        self.buffer.render_reserved(Some(kept));
        for ch in 0..self.channels {
            let plane = self.buffer.chan_mut(ch);
            for (i, sample) in plane.iter_mut().enumerate() {
                *sample = self.interleaved[(skipped + i) * self.channels + ch];
            }
        }
        Ok(self.buffer.as_audio_buffer_ref())
    }

    fn finalize(&mut self) -> FinalizeResult {
        FinalizeResult::default()
    }

    fn last_decoded(&self) -> AudioBufferRef<'_> {
        self.buffer.as_audio_buffer_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(channels: u8, pre_skip: u16, mapping: u8) -> Vec<u8> {
        let mut h = b"OpusHead".to_vec();
        h.push(1);
        h.push(channels);
        h.extend(pre_skip.to_le_bytes());
        h.extend(48_000u32.to_le_bytes());
        h.extend([0, 0]);
        h.push(mapping);
        h
    }

    #[test]
    fn the_header_says_channels_and_pre_skip_and_surround_is_refused() {
        assert_eq!(opus_head(Some(&head(1, 312, 0))).unwrap(), (1, 312));
        assert_eq!(opus_head(Some(&head(2, 3840, 1))).unwrap(), (2, 3840));
        assert_eq!(opus_head(None).unwrap(), (2, 0));
        assert!(opus_head(Some(&head(6, 312, 1))).is_err(), "5.1 is refused");
        assert!(opus_head(Some(&head(2, 312, 255))).is_err());
        assert!(opus_head(Some(b"OpusHea")).is_err(), "too short");
        assert!(opus_head(Some(&head(0, 0, 0))).is_err());
    }

    #[test]
    fn a_packet_decodes_at_48_khz_without_its_priming_samples() {
        // 60 ms of a tone, encoded in 20 ms packets.
        let mut encoder =
            opus::Encoder::new(OPUS_RATE, opus::Channels::Mono, opus::Application::Audio).unwrap();
        let tone: Vec<f32> = (0..2_880)
            .map(|n| 0.3 * (n as f32 * 440.0 * std::f32::consts::TAU / 48_000.0).sin())
            .collect();
        let packets: Vec<Vec<u8>> = tone
            .chunks(960)
            .map(|frame| encoder.encode_vec_float(frame, 4_000).unwrap())
            .collect();
        let mut params = CodecParameters::new();
        params
            .for_codec(CODEC_TYPE_OPUS)
            .with_sample_rate(16_000)
            .with_extra_data(head(1, 312, 0).into_boxed_slice());
        let mut decoder = OpusDecoder::try_new(&params, &DecoderOptions::default()).unwrap();
        assert_eq!(decoder.codec_params().sample_rate, Some(OPUS_RATE));
        let mut frames = 0;
        for (i, data) in packets.iter().enumerate() {
            let packet = Packet::new_from_slice(0, i as u64 * 960, 960, data);
            let decoded = decoder.decode(&packet).unwrap();
            assert_eq!(decoded.spec().rate, OPUS_RATE);
            frames += decoded.frames();
        }
        assert_eq!(frames, 3 * 960 - 312, "the priming samples are dropped");
        let damaged = Packet::new_from_slice(0, 0, 960, &[0xff; 3]);
        assert!(matches!(
            decoder.decode(&damaged),
            Err(Error::DecodeError(_))
        ));
    }
}
