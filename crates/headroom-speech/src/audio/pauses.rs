//! Where a long recording may be cut into pieces heard apart (a batch spread over servers):
//! at its pauses, found by loudness alone, so no model is needed and any server hears whole
//! words. The silence of a pause is not sent.

use super::{AudioError, SampleSource};
use std::ops::Range;

/// 16 kHz samples per loudness frame (30 ms).
const FRAME: usize = 480;
/// Frames read at a time (about 30 s), so a long recording is never read whole.
const READ_FRAMES: usize = 1000;
/// The shortest quiet that is a pause (frames: 300 ms).
const MIN_PAUSE_FRAMES: usize = 10;
/// The least sound between long pauses that is a piece (frames: 120 ms); less is a click.
const MIN_SPEECH_FRAMES: usize = 4;
/// The floor of the loudness scale (dBFS): digital silence.
const FLOOR_DB: f32 = -100.0;
/// Quiet whatever the recording (dBFS): a hiss, far below any speech a server could hear.
pub const ALWAYS_QUIET_DB: f32 = -60.0;

/// How long the pieces are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PiecePlan {
    /// A piece is cut at the longest pause between half and one and a half times this
    /// (seconds); with no pause there, at its quietest moment.
    pub target_seconds: f64,
    /// A pause at least this long always ends a piece (seconds): its silence is not sent.
    pub long_pause_seconds: f64,
}

impl Default for PiecePlan {
    fn default() -> Self {
        PiecePlan {
            target_seconds: 60.0,
            long_pause_seconds: 2.0,
        }
    }
}

/// The stretches of `samples` (16 kHz) worth hearing, in order, cut at pauses by `plan`: a
/// piece is cut in the middle of a pause, so nothing between two pieces of one stretch is left
/// out. Silence at the ends and a long pause that is silent whatever the recording (below
/// [`ALWAYS_QUIET_DB`] throughout) are left out, 0.2 s kept beside the speech; a long pause
/// that is only quiet for this recording is a cut and is sent (it may be a soft voice). A
/// click alone in silence is no piece; silence throughout gives none.
pub fn pieces_at_pauses(
    samples: &dyn SampleSource,
    plan: &PiecePlan,
) -> Result<Vec<Range<usize>>, AudioError> {
    let loudness = frame_loudness(samples)?;
    let quiet = quiet_below(&loudness);
    let silent: Vec<bool> = loudness.iter().map(|&db| db < quiet).collect();
    let frames_per_second = 16_000.0 / FRAME as f64;
    // Bounded by the recording, so no length given can overflow the sums below.
    let frames = |seconds: f64| ((seconds * frames_per_second) as usize).min(silent.len() + 2);
    let target = frames(plan.target_seconds).max(2);
    let long_pause = frames(plan.long_pause_seconds).max(1);
    let pauses = pauses(&silent);

    // Stretches between long pauses left out.
    let mut spans = Vec::new();
    let mut start = silent.iter().position(|s| !s);
    for pause in &pauses {
        let Some(from) = start else { break };
        if pause.len() >= long_pause && pause.start > from {
            let left_out = loudness[pause.clone()]
                .iter()
                .all(|&db| db < ALWAYS_QUIET_DB);
            if left_out {
                spans.push(from..pause.start);
                start = (pause.end < silent.len()).then_some(pause.end);
            }
        }
    }
    if let Some(from) = start {
        let end = silent.iter().rposition(|s| !s).map_or(from, |i| i + 1);
        if end > from {
            spans.push(from..end);
        }
    }
    let heard = |span: &Range<usize>| silent[span.clone()].iter().filter(|s| !**s).count();
    spans.retain(|span| heard(span) >= MIN_SPEECH_FRAMES);

    let mut pieces: Vec<Range<usize>> = Vec::new();
    for span in &spans {
        let mut from = span.start;
        while span.end - from > target + target / 2 {
            // Cut where the rest is half a piece at least: the longest pause there (in its
            // middle), else the quietest frame.
            let window = from + target / 2..(from + target + target / 2).min(span.end - target / 2);
            let cut = pauses
                .iter()
                .filter(|p| p.start >= window.start && p.end <= window.end)
                .max_by_key(|p| p.len())
                .map(|p| (p.start + p.end) / 2)
                .unwrap_or_else(|| {
                    window
                        .clone()
                        .min_by(|&a, &b| loudness[a].total_cmp(&loudness[b]))
                        .expect("a window has frames")
                });
            pieces.push(from..cut);
            from = cut;
        }
        pieces.push(from..span.end);
    }
    // 0.2 s of the silence left out kept beside the speech: soft onsets and endings.
    let pad = frames(0.2);
    let bounds: Vec<(usize, usize)> = (0..pieces.len())
        .map(|i| {
            let before = if i == 0 { 0 } else { pieces[i - 1].end };
            let after = pieces.get(i + 1).map_or(silent.len(), |p| p.start);
            (
                pieces[i].start.saturating_sub(pad).max(before),
                (pieces[i].end + pad).min(after),
            )
        })
        .collect();
    Ok(bounds
        .into_iter()
        .map(|(start, end)| start * FRAME..(end * FRAME).min(samples.len()))
        .filter(|p| !p.is_empty())
        .collect())
}

/// Each frame's loudness (dBFS of its RMS), read a block at a time.
fn frame_loudness(samples: &dyn SampleSource) -> Result<Vec<f32>, AudioError> {
    let mut loudness = Vec::with_capacity(samples.len() / FRAME + 1);
    let mut block = Vec::new();
    for start in (0..samples.len()).step_by(FRAME * READ_FRAMES) {
        block.clear();
        samples.read_into(start..start + FRAME * READ_FRAMES, &mut block)?;
        for frame in block.chunks(FRAME) {
            let power = frame.iter().map(|s| s * s).sum::<f32>() / frame.len() as f32;
            loudness.push((10.0 * power.log10()).max(FLOOR_DB));
        }
    }
    Ok(loudness)
}

/// The loudness below which a frame is quiet: a third of the way from the recording's noise
/// floor (its 10th percentile) to its speech (its 90th), so a hiss is quiet and a soft word
/// is not; and near-silence always.
fn quiet_below(loudness: &[f32]) -> f32 {
    if loudness.is_empty() {
        return ALWAYS_QUIET_DB;
    }
    let mut sorted = loudness.to_vec();
    sorted.sort_by(f32::total_cmp);
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q) as usize];
    let (floor, speech) = (at(0.1), at(0.9));
    // A recording as loud throughout has no pause to find but its near-silence.
    if speech - floor < 6.0 {
        return ALWAYS_QUIET_DB;
    }
    (floor + (speech - floor) / 3.0).max(ALWAYS_QUIET_DB)
}

/// The runs of quiet frames long enough to be pauses, in order.
fn pauses(silent: &[bool]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut run = None;
    for (i, quiet) in silent.iter().copied().chain([false]).enumerate() {
        match (quiet, run) {
            (true, None) => run = Some(i),
            (false, Some(from)) => {
                if i - from >= MIN_PAUSE_FRAMES {
                    out.push(from..i);
                }
                run = None;
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: usize = 16_000;

    /// Tone (speech) and silence, by seconds: positive a tone, negative a pause.
    fn recording(parts: &[f64]) -> Vec<f32> {
        let mut out = Vec::new();
        for &part in parts {
            let n = (part.abs() * RATE as f64) as usize;
            let loud = part > 0.0;
            out.extend((0..n).map(|i| match loud {
                true => (i as f32 * 0.07).sin() * 0.3,
                // A little hiss: a pause is rarely digital silence.
                false => ((i * 7919 % 101) as f32 / 101.0 - 0.5) * 0.002,
            }));
        }
        out
    }

    fn seconds(pieces: &[Range<usize>]) -> Vec<(f64, f64)> {
        let s = |n: usize| (n as f64 / RATE as f64 * 10.0).round() / 10.0;
        pieces.iter().map(|p| (s(p.start), s(p.end))).collect()
    }

    #[test]
    fn long_pauses_and_the_silence_at_the_ends_are_left_out() {
        let audio = recording(&[-1.5, 4.0, -0.5, 3.0, -5.0, 6.0, -3.0]);
        let pieces = pieces_at_pauses(&audio, &PiecePlan::default()).unwrap();
        // The half-second pause stays inside the first piece; the 5 s one is not sent, but
        // for 0.2 s beside the speech.
        assert_eq!(seconds(&pieces), vec![(1.3, 9.2), (13.8, 20.2)]);
    }

    #[test]
    fn a_long_stretch_of_speech_is_cut_at_its_longest_pause_near_the_target() {
        let plan = PiecePlan {
            target_seconds: 10.0,
            long_pause_seconds: 2.0,
        };
        // 21.5 s of speech with short pauses at 3 s, 8 s (the longest) and 13 s.
        let audio = recording(&[3.0, -0.4, 4.6, -1.2, 3.8, -0.5, 8.0]);
        let pieces = pieces_at_pauses(&audio, &plan).unwrap();
        // Cut in the middle of the longest pause: nothing between the pieces is left out.
        assert_eq!(seconds(&pieces), vec![(0.0, 8.6), (8.6, 21.5)]);
        for piece in &pieces {
            assert!(piece.len() as f64 / RATE as f64 <= 1.5 * plan.target_seconds + 0.1);
        }
    }

    #[test]
    fn speech_with_no_pause_is_cut_at_its_quietest_moment_and_nothing_is_lost() {
        let plan = PiecePlan {
            target_seconds: 4.0,
            long_pause_seconds: 2.0,
        };
        let audio = recording(&[20.0]);
        let pieces = pieces_at_pauses(&audio, &plan).unwrap();
        assert!(pieces.len() >= 3, "{:?}", seconds(&pieces));
        assert_eq!(pieces[0].start, 0);
        assert_eq!(pieces.last().unwrap().end, audio.len());
        for pair in pieces.windows(2) {
            // Cut at one frame: at most that frame is not heard.
            assert!(
                pair[1].start - pair[0].end <= FRAME,
                "{:?}",
                seconds(&pieces)
            );
        }
    }

    #[test]
    fn a_long_pause_only_quiet_for_this_recording_is_a_cut_not_left_out() {
        // A loud voice, 3 s of a soft one (quiet next to it, far above a hiss), the loud again.
        let mut audio = recording(&[6.0]);
        audio.extend((0..3 * RATE).map(|i| (i as f32 * 0.05).sin() * 0.004));
        audio.extend(recording(&[6.0]));
        let pieces = pieces_at_pauses(&audio, &PiecePlan::default()).unwrap();
        let sent: usize = pieces.iter().map(|p| p.len()).sum();
        assert_eq!(sent, audio.len(), "{:?}", seconds(&pieces));
    }

    #[test]
    fn a_click_alone_in_silence_is_no_piece_and_no_length_overflows() {
        let audio = recording(&[3.0, -3.0, 0.03, -2.97, 2.0]);
        let pieces = pieces_at_pauses(&audio, &PiecePlan::default()).unwrap();
        assert_eq!(seconds(&pieces), vec![(0.0, 3.2), (8.8, 11.0)]);
        let endless = PiecePlan {
            target_seconds: f64::INFINITY,
            long_pause_seconds: f64::MAX,
        };
        let whole = pieces_at_pauses(&audio, &endless).unwrap();
        assert_eq!(whole.len(), 1);
    }

    #[test]
    fn silence_gives_no_piece() {
        assert!(pieces_at_pauses(&recording(&[-3.0]), &PiecePlan::default())
            .unwrap()
            .is_empty());
        assert!(pieces_at_pauses(&Vec::<f32>::new(), &PiecePlan::default())
            .unwrap()
            .is_empty());
    }
}
