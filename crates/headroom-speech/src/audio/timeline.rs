//! Narration on the original's timeline: each take trimmed to its sound and fitted to its
//! segment's slot by time-stretching within bounds (what does not fit is measured, never hidden),
//! the takes laid out at their segments' starts, and the result optionally mixed over the
//! original with the original ducked under the narration.

use super::stretch::{sound_bounds, time_stretch};
use super::{
    resample, Audio, AudioError, Decode, SampleSink, SampleSource, SpoolWriter, SpooledAudio,
    WavStream,
};
use serde::{Deserialize, Serialize};
use std::io::{Seek, Write};
use std::ops::ControlFlow;
use std::path::Path;

/// How far a take may be sped up or slowed down to fit its slot.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct FitBounds {
    /// The slowest rate (below 1: a short take is slowed to fill its slot, to here at most).
    pub min_rate: f64,
    /// The fastest rate (above 1: a long take is sped up, to here at most).
    pub max_rate: f64,
}

impl Default for FitBounds {
    fn default() -> Self {
        FitBounds {
            min_rate: 0.8,
            max_rate: 1.25,
        }
    }
}

/// Changes of rate smaller than this are not worth the processing.
const RATE_EPSILON: f64 = 0.02;
/// Quieter than this below a take's loudest part is silence to trim.
const TRIM_FLOOR_DB: f32 = 45.0;
/// Over its slot by less than this is not an overflow worth flagging.
pub const OVERFLOW_EPSILON_SECS: f64 = 0.05;
/// The fade where a take is cut at the next segment's start.
const CUT_FADE_SECS: f64 = 0.015;

/// A take fitted to its slot.
#[derive(Debug, Clone, PartialEq)]
pub struct FittedTake {
    pub audio: Audio,
    /// The take's sound before fitting (silence trimmed).
    pub natural_secs: f64,
    /// The rate it was played at (1.25: a quarter faster).
    pub rate: f64,
    /// How long it lasts after fitting, before any cut.
    pub fitted_secs: f64,
    /// How far it runs past its own slot, after fitting.
    pub overflow_secs: f64,
    /// How much was cut where the next segment starts (0 when it fitted in the room there was).
    pub cut_secs: f64,
}

/// Trims `take` to its sound and fits it to `slot_secs` (its segment's length) within `bounds`.
/// A take still too long runs on into the silence after its slot, up to `room_secs` (to the
/// next segment's start); anything past that is cut with a short fade, and both are reported.
pub fn fit_to_slot(take: &Audio, slot_secs: f64, room_secs: f64, bounds: FitBounds) -> FittedTake {
    let sound = match sound_bounds(take, TRIM_FLOOR_DB) {
        Some((start, end)) => Audio {
            samples: take.samples[start..end].to_vec(),
            sample_rate: take.sample_rate,
        },
        None => Audio {
            samples: Vec::new(),
            sample_rate: take.sample_rate,
        },
    };
    let natural_secs = sound.duration_secs();
    let slot_secs = slot_secs.max(0.05);
    let wanted = natural_secs / slot_secs;
    let mut rate = wanted.clamp(bounds.min_rate.min(1.0), bounds.max_rate.max(1.0));
    if (rate - 1.0).abs() < RATE_EPSILON || natural_secs == 0.0 {
        rate = 1.0;
    }
    let mut audio = time_stretch(&sound, rate);
    let fitted_secs = audio.duration_secs();
    let overflow_secs = (fitted_secs - slot_secs).max(0.0);
    let room = (room_secs.max(slot_secs) * audio.sample_rate as f64).round() as usize;
    let mut cut_secs = 0.0;
    if audio.samples.len() > room {
        cut_secs = (audio.samples.len() - room) as f64 / audio.sample_rate as f64;
        audio.samples.truncate(room);
        let fade = ((CUT_FADE_SECS * audio.sample_rate as f64) as usize).min(room);
        for (i, s) in audio.samples[room - fade..].iter_mut().enumerate() {
            *s *= 1.0 - (i + 1) as f32 / fade as f32;
        }
    }
    FittedTake {
        audio,
        natural_secs,
        rate,
        fitted_secs,
        overflow_secs,
        cut_secs,
    }
}

/// The narration track, rendered a block at a time: each take is loaded (by `load`, given
/// its index) when the render reaches its start and let go once it has sounded, so a
/// narration hours long holds only the takes sounding at once. The track lasts at least
/// `duration_secs`, longer if a take runs past it.
pub struct TrackRender<L> {
    /// Each take's start (samples) and index, in order of start.
    order: Vec<(usize, usize)>,
    /// The next take of `order` to load.
    next: usize,
    load: L,
    sample_rate: u32,
    /// Loaded takes still sounding: where each starts, and its samples at the track's rate.
    sounding: Vec<(usize, Vec<f32>)>,
    /// Samples rendered so far.
    position: usize,
    /// The track's end as far as known: its duration, or the end of a take loaded.
    end: usize,
}

impl<L: FnMut(usize) -> Result<Audio, AudioError>> TrackRender<L> {
    /// Takes starting at `starts` (seconds; any order), on a track at `sample_rate`.
    pub fn new(starts: &[f64], duration_secs: f64, sample_rate: u32, load: L) -> Self {
        let at = |secs: f64| (secs.max(0.0) * f64::from(sample_rate)).round() as usize;
        let mut order: Vec<(usize, usize)> = starts
            .iter()
            .enumerate()
            .map(|(i, &s)| (at(s), i))
            .collect();
        order.sort();
        TrackRender {
            order,
            next: 0,
            load,
            sample_rate,
            sounding: Vec::new(),
            position: 0,
            end: at(duration_secs),
        }
    }

    pub fn sample_rate(&self) -> u32 {
        self.sample_rate
    }

    /// The next at most `most` samples of the track; empty once it is over.
    pub fn next_block(&mut self, most: usize) -> Result<Vec<f32>, AudioError> {
        let until = self.position + most.max(1);
        while let Some(&(start, index)) = self.order.get(self.next).filter(|t| t.0 < until) {
            let take = (self.load)(index)?;
            let samples = if take.sample_rate == self.sample_rate {
                take.samples
            } else {
                resample(&take.samples, take.sample_rate, self.sample_rate)?
            };
            self.end = self.end.max(start + samples.len());
            self.sounding.push((start, samples));
            self.next += 1;
        }
        // A take not loaded yet starts at `until` or later: the track goes on to it.
        let takes_left = self.next < self.order.len();
        let stop = if takes_left {
            until
        } else {
            until.min(self.end)
        };
        if stop <= self.position {
            return Ok(Vec::new());
        }
        let mut block = vec![0.0f32; stop - self.position];
        for (start, samples) in &self.sounding {
            let from = self.position.max(*start);
            let to = stop.min(start + samples.len());
            for t in from..to {
                block[t - self.position] += samples[t - start];
            }
        }
        self.sounding
            .retain(|(start, samples)| start + samples.len() > stop);
        self.position = stop;
        Ok(block)
    }
}

/// How the original sits under the narration in a mix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ducking {
    /// The original's gain while the narration speaks (0.2: about −14 dB).
    pub gain: f32,
    pub attack_secs: f64,
    pub release_secs: f64,
}

impl Default for Ducking {
    fn default() -> Self {
        Ducking {
            gain: 0.2,
            attack_secs: 0.03,
            release_secs: 0.3,
        }
    }
}

/// The original ducked where the narration sounds, judged 10 ms at a time, mixed a stretch
/// at a time: the gain carries from one stretch to the next.
pub struct Ducker {
    ducking: Ducking,
    /// Samples judged at once (10 ms).
    block: usize,
    attack: f32,
    release: f32,
    gain: f32,
}

impl Ducker {
    pub fn new(ducking: Ducking, sample_rate: u32) -> Ducker {
        let rate = f64::from(sample_rate);
        let coefficient = |secs: f64| 1.0 - (-1.0 / (secs * rate).max(1.0)).exp() as f32;
        Ducker {
            ducking,
            block: (sample_rate as usize / 100).max(1),
            attack: coefficient(ducking.attack_secs),
            release: coefficient(ducking.release_secs),
            gain: 1.0,
        }
    }

    /// Samples to mix at a time so the 10 ms judgements fall where they would over the whole
    /// (a whole second).
    pub fn stretch(&self) -> usize {
        self.block * 100
    }

    /// `narration` over `original` (equal lengths, a whole [`Ducker::stretch`] except at the
    /// end), appended to `out`.
    pub fn mix(&mut self, narration: &[f32], original: &[f32], out: &mut Vec<f32>) {
        debug_assert_eq!(narration.len(), original.len());
        for start in (0..narration.len()).step_by(self.block) {
            let end = (start + self.block).min(narration.len());
            let heard = &narration[start..end];
            let speaking = heard.iter().map(|s| s * s).sum::<f32>() / heard.len() as f32 > 1e-6;
            let target = if speaking { self.ducking.gain } else { 1.0 };
            for i in start..end {
                let step = if target < self.gain {
                    self.attack
                } else {
                    self.release
                };
                self.gain += (target - self.gain) * step;
                out.push(narration[i] + original[i] * self.gain);
            }
        }
    }
}

/// Writes the whole track to `track`, a second at a time.
pub fn render_track<L, W>(
    mut render: TrackRender<L>,
    track: &mut WavStream<W>,
) -> Result<(), AudioError>
where
    L: FnMut(usize) -> Result<Audio, AudioError>,
    W: Write + Seek,
{
    let rate = render.sample_rate();
    loop {
        let samples = render.next_block(rate as usize)?;
        if samples.is_empty() {
            return Ok(());
        }
        track.append(&Audio {
            samples,
            sample_rate: rate,
        })?;
    }
}

/// Writes the track to `track` and the track over `original` to `mix`, the original ducked
/// under it (see [`Ducker`]), in one pass as the original is decoded (as `decode` says, at
/// the track's rate). The mix is scaled down only if it would clip, which is known at its
/// end: it is spooled in `spool_dir` until then. Nothing is held whole, however long.
pub fn render_mix<L, W1, W2>(
    render: TrackRender<L>,
    original: &Path,
    decode: &Decode,
    ducking: Ducking,
    spool_dir: &Path,
    track: &mut WavStream<W1>,
    mix: &mut WavStream<W2>,
) -> Result<(), AudioError>
where
    L: FnMut(usize) -> Result<Audio, AudioError>,
    W1: Write + Seek,
    W2: Write + Seek,
{
    let rate = render.sample_rate();
    let mut sink = MixSink {
        ducker: Ducker::new(ducking, rate),
        render,
        original: Vec::new(),
        track,
        spool: SpooledAudio::create(spool_dir, original)?,
        peak: 0.0,
    };
    let decode = Decode {
        to_rate: Some(rate),
        ..decode.clone()
    };
    decode.file_into(original, &mut sink)?;
    let peak = sink.finish()?;
    let spooled = sink.spool.finish(rate)?;
    let scale = if peak > 0.99 { 0.99 / peak } else { 1.0 };
    for start in (0..spooled.len()).step_by(rate as usize) {
        let mut samples = spooled.read(start..start + rate as usize)?;
        samples.iter_mut().for_each(|s| *s *= scale);
        mix.append(&Audio {
            samples,
            sample_rate: rate,
        })?;
    }
    Ok(())
}

/// The mix, made as the original's samples arrive.
struct MixSink<'a, L, W: Write + Seek> {
    render: TrackRender<L>,
    ducker: Ducker,
    /// The original's samples not yet mixed (less than a stretch).
    original: Vec<f32>,
    track: &'a mut WavStream<W>,
    spool: SpoolWriter,
    peak: f32,
}

impl<L, W> MixSink<'_, L, W>
where
    L: FnMut(usize) -> Result<Audio, AudioError>,
    W: Write + Seek,
{
    /// Mixes the track's next samples (at most `most`) over `original`'s, each side silent
    /// past its end: as many as the longer side has. Returns how many.
    fn mix_next(&mut self, most: usize, original: &[f32]) -> Result<usize, AudioError> {
        let mut narration = self.render.next_block(most)?;
        if !narration.is_empty() {
            self.track.append(&Audio {
                samples: narration.clone(),
                sample_rate: self.render.sample_rate(),
            })?;
        }
        let n = narration.len().max(original.len());
        narration.resize(n, 0.0);
        let mut under = original.to_vec();
        under.resize(n, 0.0);
        let mut mixed = Vec::with_capacity(n);
        self.ducker.mix(&narration, &under, &mut mixed);
        self.peak = mixed.iter().fold(self.peak, |m, s| m.max(s.abs()));
        self.spool.write(&mixed)?;
        Ok(n)
    }

    /// The original's last samples, then the rest of the track over silence; the mix's peak.
    fn finish(&mut self) -> Result<f32, AudioError> {
        let stretch = self.ducker.stretch();
        let rest = std::mem::take(&mut self.original);
        if !rest.is_empty() {
            self.mix_next(rest.len(), &rest)?;
        }
        // The track may run on past the original: over silence.
        while self.mix_next(stretch, &[])? > 0 {}
        Ok(self.peak)
    }
}

impl<L, W> SampleSink for MixSink<'_, L, W>
where
    L: FnMut(usize) -> Result<Audio, AudioError>,
    W: Write + Seek,
{
    fn take(&mut self, block: &[f32]) -> Result<ControlFlow<()>, AudioError> {
        self.original.extend_from_slice(block);
        let stretch = self.ducker.stretch();
        while self.original.len() >= stretch {
            let original: Vec<f32> = self.original.drain(..stretch).collect();
            self.mix_next(stretch, &original)?;
        }
        Ok(ControlFlow::Continue(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone_with_silence(lead: f64, sound: f64, tail: f64, rate: u32) -> Audio {
        let n = |s: f64| (s * rate as f64) as usize;
        let mut samples = vec![0.0; n(lead)];
        samples
            .extend((0..n(sound)).map(|i| {
                0.4 * (2.0 * std::f32::consts::PI * 180.0 * i as f32 / rate as f32).sin()
            }));
        samples.extend(vec![0.0; n(tail)]);
        Audio {
            samples,
            sample_rate: rate,
        }
    }

    #[test]
    fn a_take_is_trimmed_and_sped_up_within_bounds() {
        let take = tone_with_silence(0.3, 2.2, 0.4, 24_000);
        let fitted = fit_to_slot(&take, 2.0, 3.0, FitBounds::default());
        assert!(
            (fitted.natural_secs - 2.2).abs() < 0.02,
            "{}",
            fitted.natural_secs
        );
        assert!((fitted.rate - 1.1).abs() < 0.02, "{}", fitted.rate);
        assert!((fitted.fitted_secs - 2.0).abs() < 0.02);
        assert!(fitted.overflow_secs < OVERFLOW_EPSILON_SECS);
        assert_eq!(fitted.cut_secs, 0.0);
        // The sound starts at once: the leading silence is gone.
        assert!(fitted.audio.samples[..240].iter().any(|s| s.abs() > 0.1));
    }

    #[test]
    fn too_long_a_take_overflows_into_the_gap_then_is_cut() {
        let take = tone_with_silence(0.0, 3.0, 0.0, 16_000);
        let roomy = fit_to_slot(&take, 2.0, 4.0, FitBounds::default());
        assert_eq!(roomy.rate, 1.25);
        assert!(
            (roomy.overflow_secs - 0.4).abs() < 0.02,
            "{}",
            roomy.overflow_secs
        );
        assert_eq!(roomy.cut_secs, 0.0);
        let tight = fit_to_slot(&take, 2.0, 2.1, FitBounds::default());
        assert!((tight.cut_secs - 0.3).abs() < 0.02, "{}", tight.cut_secs);
        assert_eq!(tight.audio.samples.len(), (2.1 * 16_000.0) as usize);
        assert!(
            tight.audio.samples.last().unwrap().abs() < 0.01,
            "faded out"
        );
    }

    #[test]
    fn a_short_take_is_slowed_at_most_to_the_bound_and_a_near_fit_is_left_alone() {
        let take = tone_with_silence(0.0, 1.0, 0.0, 16_000);
        let slowed = fit_to_slot(&take, 2.0, 2.0, FitBounds::default());
        assert_eq!(slowed.rate, 0.8);
        assert!((slowed.fitted_secs - 1.25).abs() < 0.01);
        let near = fit_to_slot(&take, 1.01, 2.0, FitBounds::default());
        assert_eq!(near.rate, 1.0);
        let silent = fit_to_slot(
            &Audio {
                samples: vec![0.0; 1600],
                sample_rate: 16_000,
            },
            1.0,
            1.0,
            FitBounds::default(),
        );
        assert_eq!((silent.natural_secs, silent.rate), (0.0, 1.0));
    }

    /// The whole track, rendered in blocks of `block`.
    fn rendered<L: FnMut(usize) -> Result<Audio, AudioError>>(
        mut render: TrackRender<L>,
        block: usize,
    ) -> Vec<f32> {
        let mut track = Vec::new();
        loop {
            let next = render.next_block(block).unwrap();
            if next.is_empty() {
                return track;
            }
            assert!(next.len() <= block);
            track.extend(next);
        }
    }

    #[test]
    fn takes_are_laid_out_at_their_starts_at_one_rate() {
        let a = tone_with_silence(0.0, 0.5, 0.0, 22_050);
        let b = tone_with_silence(0.0, 0.5, 0.0, 24_000);
        let takes = [b.clone(), a.clone()];
        let load = |i: usize| Ok(takes[i].clone());
        // Given out of order: laid out by start.
        let track = rendered(TrackRender::new(&[3.0, 1.0], 4.0, 24_000, load), 7_000);
        assert_eq!(track.len(), 96_000);
        let first_sound = track.iter().position(|s| s.abs() > 0.05).unwrap();
        assert!((first_sound as i64 - 24_000).abs() < 24, "{first_sound}");
        let after_gap = track[48_000..].iter().position(|s| s.abs() > 0.05).unwrap() + 48_000;
        assert!((after_gap as i64 - 72_000).abs() < 24, "{after_gap}");
        let longer = rendered(
            TrackRender::new(&[3.8], 4.0, 24_000, |_| Ok(b.clone())),
            24_000,
        );
        assert_eq!(longer.len(), (4.3 * 24_000.0) as usize, "grows to hold it");
        // Overlapping takes add up, whatever the block size.
        let one = Audio {
            samples: vec![0.25; 1000],
            sample_rate: 1000,
        };
        let overlapping = |block| {
            rendered(
                TrackRender::new(&[0.5, 1.0, 0.0], 1.0, 1000, |_| Ok(one.clone())),
                block,
            )
        };
        let track = overlapping(333);
        assert_eq!(track, overlapping(1));
        assert_eq!(track.len(), 2000);
        assert_eq!(
            (track[100], track[700], track[1200], track[1600]),
            (0.25, 0.5, 0.5, 0.25)
        );
    }

    #[test]
    fn a_take_is_loaded_when_the_track_reaches_it_and_let_go_after() {
        let loaded = std::cell::RefCell::new(Vec::new());
        let load = |i: usize| {
            loaded.borrow_mut().push(i);
            Ok(Audio {
                samples: vec![0.1; 500],
                sample_rate: 1000,
            })
        };
        // Ten takes a second apart over ten seconds.
        let starts: Vec<f64> = (0..10).map(f64::from).collect();
        let mut render = TrackRender::new(&starts, 10.0, 1000, load);
        render.next_block(1000).unwrap();
        assert_eq!(*loaded.borrow(), vec![0]);
        render.next_block(1000).unwrap();
        assert_eq!(*loaded.borrow(), vec![0, 1]);
        assert_eq!(render.sounding.len(), 0, "both have sounded and are let go");
        render.next_block(2300).unwrap();
        assert_eq!(*loaded.borrow(), vec![0, 1, 2, 3, 4]);
        assert_eq!(render.sounding.len(), 1, "the take at 4 s sounds on");
    }

    #[test]
    fn the_original_is_ducked_only_under_the_narration_and_the_mix_never_clips() {
        let rate = 16_000;
        let dir = tempfile::tempdir().unwrap();
        let original = dir.path().join("original.wav");
        let mix_of = |level: f32, narration_level: f32| {
            super::super::write_wav(
                &original,
                &Audio {
                    samples: vec![level; rate as usize * 3],
                    sample_rate: rate,
                },
            )
            .unwrap();
            let take = Audio {
                samples: vec![narration_level; rate as usize],
                sample_rate: rate,
            };
            let render = TrackRender::new(&[1.0], 2.5, rate, |_| Ok(take.clone()));
            let mut track_bytes = std::io::Cursor::new(Vec::new());
            let mut mix_bytes = std::io::Cursor::new(Vec::new());
            let mut track = WavStream::new(&mut track_bytes, rate, Path::new("t.wav")).unwrap();
            let mut mix = WavStream::new(&mut mix_bytes, rate, Path::new("m.wav")).unwrap();
            render_mix(
                render,
                &original,
                &Decode::streamed(),
                Ducking::default(),
                dir.path(),
                &mut track,
                &mut mix,
            )
            .unwrap();
            track.finish().unwrap();
            mix.finish().unwrap();
            let read = |bytes: Vec<u8>| {
                super::super::decode_bytes(
                    bytes,
                    Some("wav"),
                    Path::new("x.wav"),
                    super::super::DecodeLimits::default(),
                )
                .unwrap()
                .samples
            };
            (read(track_bytes.into_inner()), read(mix_bytes.into_inner()))
        };
        let (track, mix) = mix_of(0.5, 0.1);
        // The track lasts its duration (2.5 s), the mix the longer of the two (3 s).
        assert_eq!((track.len(), mix.len()), (40_000, 48_000));
        assert!(
            (mix[8_000] - 0.5).abs() < 2e-3,
            "full before: {}",
            mix[8_000]
        );
        let under = mix[24_000];
        assert!((under - (0.1 + 0.5 * 0.2)).abs() < 0.01, "ducked: {under}");
        let after = mix[48_000 - 10];
        assert!(after > 0.45, "released after: {after}");
        // A loud original under loud narration: the mix is scaled down, not clipped.
        let (_, mix) = mix_of(0.9, 0.9);
        let peak = mix.iter().fold(0.0f32, |m, s| m.max(s.abs()));
        assert!((0.98..=0.995).contains(&peak), "peak {peak}");
        assert!(mix[8_000] < 0.85, "scaled down: {}", mix[8_000]);
        // Nothing is left in the spool folder but the original.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
