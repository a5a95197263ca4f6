//! The edited recording, made from the original as it is decoded: each kept range is handed
//! on as it arrives, and each join is an equal-power crossfade of the audio on either side of
//! it (10 ms, shorter where a range is). The output is exactly as long as the kept ranges
//! together (to the sample), and nothing is held but a join's few milliseconds, however long
//! the recording.

use super::EditList;
use crate::audio::{Audio, AudioError, Decode, SampleSink, Stretch};
use std::f32::consts::FRAC_PI_2;
use std::ops::ControlFlow;
use std::path::Path;
use tokio_util::sync::CancellationToken;

/// Half a join's crossfade.
const HALF_FADE_SECS: f64 = 0.005;
/// Samples handed on at a time.
const OUT_BLOCK: usize = 1 << 15;
/// A recording this much shorter than its edit says is padded with silence (a decoder's
/// rounding); more means the recording changed under its edit.
const SHORT_BY_AT_MOST_SECS: f64 = 0.5;

/// A kept range in samples, with the half-fades of its joins.
#[derive(Debug, Clone, Copy)]
struct Piece {
    start: usize,
    end: usize,
    tone: bool,
    /// Half the crossfade with the piece before (0: none).
    fade_in: usize,
    /// Half the crossfade with the piece after.
    fade_out: usize,
}

impl Piece {
    fn len(&self) -> usize {
        self.end - self.start
    }
}

/// The pieces of `list` at `rate`, with their fades.
fn pieces(list: &EditList, rate: u32) -> Vec<Piece> {
    let at = |secs: f64| (secs.max(0.0) * f64::from(rate)).round() as usize;
    let mut pieces: Vec<Piece> = list
        .kept
        .iter()
        .map(|r| Piece {
            start: at(r.start),
            end: at(r.end),
            tone: r.room_tone,
            fade_in: 0,
            fade_out: 0,
        })
        .filter(|p| p.end > p.start)
        .collect();
    let half = ((HALF_FADE_SECS * f64::from(rate)).round() as usize).max(1);
    for j in 1..pieces.len() {
        let (a, b) = (pieces[j - 1], pieces[j]);
        let mut h = half.min(a.len() / 2).min(b.len() / 2);
        if !a.tone && !b.tone {
            // Contiguous: no join at all; apart: each side's fade stays in the cut between.
            h = h.min(b.start.saturating_sub(a.end) / 2);
        }
        pieces[j - 1].fade_out = h;
        pieces[j].fade_in = h;
    }
    // Two pieces of the original with room tone between must not reach into each other.
    let originals: Vec<usize> = (0..pieces.len()).filter(|&i| !pieces[i].tone).collect();
    for w in originals.windows(2) {
        let (i, k) = (w[0], w[1]);
        let room = pieces[k].start.saturating_sub(pieces[i].end);
        if pieces[i].fade_out + pieces[k].fade_in > room {
            let h = room / 2;
            for j in [i, k] {
                pieces[j].fade_out = pieces[j].fade_out.min(h);
                pieces[j].fade_in = pieces[j].fade_in.min(h);
            }
            // Both sides of each join keep the same fade.
            for j in 1..pieces.len() {
                let h = pieces[j - 1].fade_out.min(pieces[j].fade_in);
                pieces[j - 1].fade_out = h;
                pieces[j].fade_in = h;
            }
        }
    }
    pieces
}

/// The edited recording, made as the original is decoded into it.
pub struct EditRender<'a> {
    list: EditList,
    /// The room tone's samples, at the original's rate.
    tone: Vec<f32>,
    pieces: Vec<Piece>,
    /// The first piece not yet finished.
    current: usize,
    /// Samples of the original seen so far.
    at: usize,
    /// The end of the piece before, over its join: faded into the next piece's start.
    fading: Vec<f32>,
    /// The current piece's end, gathered for its join.
    gathering: Vec<f32>,
    pending: Vec<f32>,
    sample_rate: u32,
    written: u64,
    out: &'a mut dyn FnMut(&Audio) -> Result<(), AudioError>,
}

/// What a render wrote.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rendered {
    pub samples: u64,
    pub sample_rate: u32,
}

impl Rendered {
    pub fn duration_secs(&self) -> f64 {
        self.samples as f64 / f64::from(self.sample_rate.max(1))
    }
}

/// The equal-power weights of the `k`-th of `2h` samples of a join: (before, after).
fn weights(k: usize, h: usize) -> (f32, f32) {
    let theta = (k as f32 + 0.5) / (2 * h) as f32 * FRAC_PI_2;
    (theta.cos(), theta.sin())
}

impl<'a> EditRender<'a> {
    /// A render of `list`, with `tone` (the room tone's samples, at the original's rate) for
    /// ranges that ask for it, handing the edited audio to `out` a block at a time.
    pub fn new(
        list: EditList,
        tone: Vec<f32>,
        out: &'a mut dyn FnMut(&Audio) -> Result<(), AudioError>,
    ) -> EditRender<'a> {
        EditRender {
            list,
            tone,
            pieces: Vec::new(),
            current: 0,
            at: 0,
            fading: Vec::new(),
            gathering: Vec::new(),
            pending: Vec::with_capacity(OUT_BLOCK),
            sample_rate: 0,
            written: 0,
            out,
        }
    }

    fn emit(&mut self, sample: f32) -> Result<(), AudioError> {
        self.pending.push(sample);
        if self.pending.len() >= OUT_BLOCK {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), AudioError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.written += self.pending.len() as u64;
        let audio = Audio {
            samples: std::mem::take(&mut self.pending),
            sample_rate: self.sample_rate,
        };
        (self.out)(&audio)?;
        self.pending = audio.samples;
        self.pending.clear();
        Ok(())
    }

    /// The `j`-th sample of the room tone, looped back and forth (no step where it turns).
    fn tone_at(&self, j: usize) -> f32 {
        let n = self.tone.len();
        if n < 2 {
            return 0.0;
        }
        let m = j % (2 * n - 2);
        self.tone[if m < n { m } else { 2 * n - 2 - m }]
    }

    /// One sample of the current piece's stretch (its fade-in, body or fade-out), `k` into it.
    fn piece_sample(&mut self, piece: Piece, k: usize, sample: f32) -> Result<(), AudioError> {
        let head = 2 * piece.fade_in;
        let body_end = piece.len() + piece.fade_in - piece.fade_out;
        if k < head {
            let (before, after) = weights(k, piece.fade_in);
            let faded = self.fading.get(k).copied().unwrap_or(0.0);
            self.emit(faded * before + sample * after)
        } else if k < body_end {
            self.emit(sample)
        } else {
            self.gathering.push(sample);
            Ok(())
        }
    }

    /// The current piece is done: its end fades into the next.
    fn next_piece(&mut self) {
        self.fading = std::mem::take(&mut self.gathering);
        self.current += 1;
    }

    /// Room tone pieces from the current one on, until one of the original.
    fn tones(&mut self) -> Result<(), AudioError> {
        while let Some(&piece) = self.pieces.get(self.current).filter(|p| p.tone) {
            for k in 0..piece.len() + piece.fade_in + piece.fade_out {
                let sample = self.tone_at(k);
                self.piece_sample(piece, k, sample)?;
            }
            self.next_piece();
        }
        Ok(())
    }

    /// One sample of the original, at `self.at`.
    fn original(&mut self, sample: f32) -> Result<(), AudioError> {
        let Some(&piece) = self.pieces.get(self.current) else {
            return Ok(());
        };
        let from = piece.start - piece.fade_in;
        let to = piece.end + piece.fade_out;
        if self.at >= from && self.at < to {
            self.piece_sample(piece, self.at - from, sample)?;
        }
        if self.at + 1 >= to {
            self.next_piece();
            self.tones()?;
        }
        Ok(())
    }

    fn done(&self) -> bool {
        self.current >= self.pieces.len()
    }

    /// Ends the render: a recording a little shorter than its edit is padded with silence.
    pub fn finish(mut self) -> Result<Rendered, AudioError> {
        self.tones()?;
        if !self.done() {
            let short_by = self
                .pieces
                .last()
                .map_or(0, |p| p.end)
                .saturating_sub(self.at);
            if short_by as f64 > SHORT_BY_AT_MOST_SECS * f64::from(self.sample_rate) {
                return Err(AudioError::Corrupt {
                    path: "the recording".into(),
                    detail: format!(
                        "it ends {:.1} s before its edit does; it changed after the edit was made",
                        short_by as f64 / f64::from(self.sample_rate)
                    ),
                });
            }
            while !self.done() {
                self.original(0.0)?;
                self.at += 1;
            }
        }
        self.flush()?;
        Ok(Rendered {
            samples: self.written,
            sample_rate: self.sample_rate,
        })
    }
}

impl SampleSink for EditRender<'_> {
    fn begin(&mut self, sample_rate: u32) {
        self.sample_rate = sample_rate;
        self.pieces = pieces(&self.list, sample_rate);
        self.current = 0;
    }

    fn take(&mut self, block: &[f32]) -> Result<ControlFlow<()>, AudioError> {
        // Room tone at the very start.
        self.tones()?;
        for &sample in block {
            if self.done() {
                break;
            }
            self.original(sample)?;
            self.at += 1;
        }
        Ok(if self.done() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    }
}

/// Renders the edit `list` of the recording at `path` (decoded as `decode` says, at its rate
/// or the file's own), handing the edited audio to `out` a block at a time.
pub fn render_edit(
    path: &Path,
    list: &EditList,
    decode: &Decode,
    out: &mut dyn FnMut(&Audio) -> Result<(), AudioError>,
) -> Result<Rendered, AudioError> {
    let tone = match list
        .room_tone
        .filter(|_| list.kept.iter().any(|r| r.room_tone))
    {
        Some(r) => {
            let mut stretch = Stretch::new(r.start, r.end);
            decode.file_into(path, &mut stretch)?;
            stretch.into_audio().samples
        }
        None => Vec::new(),
    };
    let mut render = EditRender::new(list.clone(), tone, out);
    decode.file_into(path, &mut render)?;
    render.finish()
}

/// Plays the edit `list` of the recording at `path` on the default output device as it
/// renders (the memory of a second or two, whatever the length), from `from_secs` of the
/// original (a point cut away: from the next stretch kept), until its end or `cancel`.
/// Returns the seconds played.
pub fn play_edit(
    path: &Path,
    list: &EditList,
    from_secs: f64,
    cancel: &CancellationToken,
) -> Result<f64, AudioError> {
    let list = list.from_original(from_secs);
    crate::audio::play_fed(cancel, |rate, feed| {
        let decode = Decode {
            to_rate: Some(rate),
            cancel: cancel.clone(),
            ..Decode::streamed()
        };
        let mut fed = 0usize;
        let mut out = |audio: &Audio| {
            fed += audio.samples.len();
            match feed(audio.samples.clone()) {
                ControlFlow::Continue(()) => Ok(()),
                // The player stopped: the render stops as a cancelled decode does.
                ControlFlow::Break(()) => Err(AudioError::Cancelled {
                    path: path.to_path_buf(),
                }),
            }
        };
        match render_edit(path, &list, &decode, &mut out) {
            Ok(_) | Err(AudioError::Cancelled { .. }) => Ok(fed as f64 / f64::from(rate)),
            Err(e) => Err(e),
        }
    })
}

/// How far the largest step between samples at a join stands above the steps around it: the
/// largest step within 1 ms of `at` (a sample index) over the median step of the 20 ms around
/// it. A click is a step far above its neighbours (the bound is 3); steps below
/// −60 dBFS are inaudible whatever their ratio, and count as 0.
pub fn step_ratio(samples: &[f32], at: usize, sample_rate: u32) -> f32 {
    let ms = (sample_rate as usize / 1000).max(1);
    let steps = |from: usize, to: usize| -> Vec<f32> {
        let from = from.max(1);
        let to = to.min(samples.len());
        (from..to)
            .map(|i| (samples[i] - samples[i - 1]).abs())
            .collect()
    };
    let near = steps(at.saturating_sub(ms), at + ms);
    let largest = near.iter().copied().fold(0.0f32, f32::max);
    if largest < 1e-3 {
        return 0.0;
    }
    let mut around = steps(at.saturating_sub(10 * ms), at + 10 * ms);
    around.sort_by(f32::total_cmp);
    let median = around.get(around.len() / 2).copied().unwrap_or(0.0);
    if median <= 0.0 {
        return f32::INFINITY;
    }
    largest / median
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edit::KeptRange;

    fn render(list: &EditList, samples: &[f32], rate: u32, tone: Vec<f32>) -> Vec<f32> {
        let mut out = Vec::new();
        let mut collect = |a: &Audio| {
            out.extend_from_slice(&a.samples);
            Ok(())
        };
        let mut render = EditRender::new(list.clone(), tone, &mut collect);
        render.begin(rate);
        for block in samples.chunks(997) {
            if render.take(block).unwrap().is_break() {
                break;
            }
        }
        let done = render.finish().unwrap();
        assert_eq!(done.samples as usize, out.len());
        out
    }

    fn list(kept: &[(f64, f64)]) -> EditList {
        EditList {
            kept: kept.iter().map(|&(s, e)| KeptRange::new(s, e)).collect(),
            room_tone: None,
        }
    }

    #[test]
    fn the_edit_is_exactly_as_long_as_its_kept_ranges() {
        let rate = 16_000;
        let samples: Vec<f32> = (0..rate * 5)
            .map(|i| (i as f32 * 0.01).sin() * 0.3)
            .collect();
        let edit = list(&[
            (0.0, 1.0),
            (1.5, 1.503),
            (2.0, 2.25),
            (2.25, 3.0),
            (4.9, 5.0),
        ]);
        let out = render(&edit, &samples, rate as u32, Vec::new());
        let want = (edit.duration_secs() * f64::from(rate)).round() as usize;
        assert_eq!(out.len(), want);
        // The first range away from its joins is the original, sample for sample.
        assert_eq!(&out[..15_000], &samples[..15_000]);
    }

    #[test]
    fn a_cut_between_unrelated_sounds_makes_no_click() {
        let rate = 16_000u32;
        // A low tone, then at 1 s a tone of another pitch and phase: a hard cut from 0.5 s
        // into 1.3 s would step from one to the other at once.
        let samples: Vec<f32> = (0..rate as usize * 2)
            .map(|i| {
                let t = i as f32 / rate as f32;
                if t < 1.0 {
                    (t * 2.0 * std::f32::consts::PI * 220.0).sin() * 0.5
                } else {
                    (t * 2.0 * std::f32::consts::PI * 330.0 + 1.3).sin() * 0.5
                }
            })
            .collect();
        let edit = list(&[(0.0, 0.50113), (1.30071, 2.0)]);
        let out = render(&edit, &samples, rate, Vec::new());
        let join = (0.50113 * f64::from(rate)).round() as usize;
        let ratio = step_ratio(&out, join, rate);
        assert!(ratio <= 3.0, "step ratio {ratio} at the join");
        // The same cut without a crossfade clicks.
        let mut hard = samples[..join].to_vec();
        hard.extend_from_slice(&samples[(1.30071 * f64::from(rate)).round() as usize..]);
        assert!(step_ratio(&hard, join, rate) > 3.0);
    }

    #[test]
    fn room_tone_fills_its_range_and_the_rest_is_the_original() {
        let rate = 8_000u32;
        let samples: Vec<f32> = (0..rate as usize * 3)
            .map(|i| ((i % 50) as f32 / 50.0) - 0.5)
            .collect();
        let mut edit = list(&[(0.0, 1.0), (1.0, 1.5), (2.5, 3.0)]);
        edit.kept[1].room_tone = true;
        edit.room_tone = Some(KeptRange::new(0.0, 0.1));
        let tone: Vec<f32> = vec![0.01; 800];
        let out = render(&edit, &samples, rate, tone);
        assert_eq!(out.len(), 16_000);
        // The middle of the tone range is the tone.
        assert!(out[10_000..11_000].iter().all(|&s| (s - 0.01).abs() < 1e-6));
        // The last range's middle is the original's.
        assert_eq!(out[14_000], samples[22_000]);
    }

    #[test]
    fn a_recording_shorter_than_its_edit_is_refused_beyond_a_rounding() {
        let rate = 8_000u32;
        let samples = vec![0.1f32; 8_000];
        let mut out = Vec::new();
        let mut collect = |a: &Audio| {
            out.extend_from_slice(&a.samples);
            Ok(())
        };
        let mut r = EditRender::new(list(&[(0.0, 3.0)]), Vec::new(), &mut collect);
        r.begin(rate);
        let _ = r.take(&samples).unwrap();
        assert!(r.finish().is_err());
        let padded = render(&list(&[(0.0, 1.2)]), &samples, rate, Vec::new());
        assert_eq!(padded.len(), 9_600);
    }
}
