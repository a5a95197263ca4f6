//! Where an edit's cuts fall. A cut that removes words starts in the quietest point of the
//! gap before the first and ends in the quietest point of the gap after the last (a word's
//! recognized times are approximate, so the search reaches a little past them, never beyond
//! a word's middle); a shortened pause keeps an equal part of itself on each side. What is
//! quiet is read from the recording itself ([`QuietSamples`], from one pass of decoding).

use super::{EditList, KeptRange};
pub use crate::audio::Loudness;
use crate::audio::{part_in, sample_range, AudioError, SampleSink};
use std::ops::ControlFlow;

/// How far past a word's recognized edge the quietest point is looked for.
const REACH_SECS: f64 = 0.05;
/// The longest stretch searched for a cut's quiet point (its samples are held).
const MAX_WINDOW_SECS: f64 = 1.0;
/// The window whose energy says how quiet a point is.
const QUIET_WINDOW_SECS: f64 = 0.004;
/// Of a pause filled with room tone, this much of its own audio stays at each edge (a word's
/// tail and the next one's lead-in).
const TONE_EDGE_SECS: f64 = 0.04;
/// How long the room tone's source is.
pub const ROOM_TONE_SECS: f64 = 0.5;

/// A word's place in the recording.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimedWord {
    pub start: f64,
    pub end: f64,
    /// The recognizer wrote punctuation after it ("leave," "it."): a pause likely follows.
    pub punctuated: bool,
}

impl TimedWord {
    fn middle(&self) -> f64 {
        (self.start + self.end) / 2.0
    }
}

/// What to cut.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EditRequest {
    /// Words to cut, by their place in the list of words.
    pub cut_words: Vec<usize>,
    /// Stretches to cut, in seconds: the words whose middle lies in one go, and a stretch of
    /// pause between two words goes as given.
    pub cut_times: Vec<(f64, f64)>,
    /// Words kept whatever else says to cut them.
    pub keep_words: Vec<usize>,
    /// Pauses longer than this many seconds are shortened to it.
    pub max_pause: Option<f64>,
    /// Shortened pauses sound as the recording's room tone.
    pub room_tone: bool,
    /// Where the recording is silent ([`Loudness::pauses`]): a pause is shortened only where
    /// it is silent (a word's times may be off; its sound is never taken for pause). `None`:
    /// the gaps between words are taken as silent.
    pub pauses: Option<Vec<(f64, f64)>>,
}

/// How quiet the recording is around a point.
pub trait Quietness {
    /// The quietest point between `lo` and `hi` seconds.
    fn quietest(&self, lo: f64, hi: f64) -> f64;
}

/// The words' gaps a plan will look for quiet in, and the stretch of pause room tone may come
/// from: what one decode of the recording must gather.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Wanted {
    pub windows: Vec<(f64, f64)>,
}

impl Quietness for std::cell::RefCell<Wanted> {
    fn quietest(&self, lo: f64, hi: f64) -> f64 {
        self.borrow_mut().windows.push((lo, hi));
        (lo + hi) / 2.0
    }
}

/// The quietest point of a gap before a word and after another (`None`: the recording's
/// start or end), searched a little past their edges.
fn gap_window(before: Option<&TimedWord>, after: Option<&TimedWord>, duration: f64) -> (f64, f64) {
    let edge_before = before.map_or(0.0, |w| w.end);
    let edge_after = after.map_or(duration, |w| w.start);
    let lo = (edge_before.min(edge_after) - REACH_SECS).max(before.map_or(0.0, TimedWord::middle));
    let hi =
        (edge_before.max(edge_after) + REACH_SECS).min(after.map_or(duration, TimedWord::middle));
    if hi - lo > MAX_WINDOW_SECS {
        // A long gap (a wordless minute): its middle second is as good a place as any.
        let middle = (edge_before + edge_after) / 2.0;
        (
            middle - MAX_WINDOW_SECS / 2.0,
            middle + MAX_WINDOW_SECS / 2.0,
        )
    } else if lo < hi {
        (lo, hi)
    } else {
        let at = ((edge_before + edge_after) / 2.0).clamp(0.0, duration);
        (at, at)
    }
}

fn quietest_in(quiet: &dyn Quietness, (lo, hi): (f64, f64)) -> f64 {
    if hi - lo < 1e-4 {
        lo
    } else {
        quiet.quietest(lo, hi).clamp(lo, hi)
    }
}

/// The edit `request` asks of a recording of `duration` seconds whose words are `words`
/// (in order), its cuts placed by `quiet`; `room_tone` is the stretch to fill shortened
/// pauses with, when the request wants it and the recording has one.
pub fn plan(
    words: &[TimedWord],
    duration: f64,
    request: &EditRequest,
    quiet: &dyn Quietness,
    room_tone: Option<KeptRange>,
) -> EditList {
    let by_time = merged(&request.cut_times);
    let middle_cut = |w: &TimedWord| {
        let at = by_time.partition_point(|&(_, end)| end < w.middle());
        by_time
            .get(at)
            .is_some_and(|&(start, _)| start <= w.middle())
    };
    let mut removed: Vec<bool> = words.iter().map(middle_cut).collect();
    for &i in &request.cut_words {
        if let Some(r) = removed.get_mut(i) {
            *r = true;
        }
    }
    for &i in &request.keep_words {
        if let Some(r) = removed.get_mut(i) {
            *r = false;
        }
    }
    let kept: Vec<usize> = (0..words.len()).filter(|&i| !removed[i]).collect();
    let tone = room_tone.filter(|_| request.room_tone);

    let mut list = EditList::default();
    let mut island_start = 0.0;
    // The joins: before each kept word, and after the last.
    let mut previous: Option<usize> = None;
    for next in kept.iter().copied().map(Some).chain([None]) {
        let a = previous.map(|i| &words[i]);
        let b = next.map(|i| &words[i]);
        let first_removed = previous.map_or(0, |i| i + 1);
        let last_removed = next.unwrap_or(words.len());
        let a_end = a.map_or(0.0, |w| w.end);
        let b_start = b.map_or(duration, |w| w.start.max(a_end));
        // Where the audio before the join stops, and where the audio after it starts.
        let (mut q1, mut q2) = if first_removed < last_removed {
            let q1 = match a {
                None => 0.0,
                Some(_) => quietest_in(quiet, gap_window(a, Some(&words[first_removed]), duration)),
            };
            let q2 = match b {
                None => duration,
                Some(_) => quietest_in(
                    quiet,
                    gap_window(Some(&words[last_removed - 1]), b, duration),
                ),
            };
            (q1, q2.max(q1))
        } else {
            // A pause between two kept words: a stretch cut by time inside it goes.
            let inside = overlapping(&by_time, a_end, b_start)
                .iter()
                .map(|&(s, e)| (s.max(a_end), e.min(b_start)))
                .filter(|(s, e)| e > s)
                .fold(None, |all: Option<(f64, f64)>, (s, e)| {
                    Some(all.map_or((s, e), |(x, y)| (x.min(s), y.max(e))))
                });
            inside.unwrap_or((a_end, a_end))
        };
        // The pause heard across the join: its silent stretch (the recording's pause, where
        // the pauses are known; else the gap between the words), and its share on each side.
        let cut_inside = q2 > q1;
        let pause_at = |t: f64| {
            request
                .pauses
                .as_deref()
                .and_then(|p| overlapping(p, t - 1e-9, t + 1e-9).first())
                .copied()
        };
        let (lo_edge, hi_edge, left, right) = if cut_inside {
            let lo = match &request.pauses {
                None => a_end,
                Some(_) => pause_at(q1).map_or(q1, |(s, _)| s.max(a_end).min(q1)),
            };
            let hi = match &request.pauses {
                None => b_start,
                Some(_) => pause_at(q2).map_or(q2, |(_, e)| e.min(b_start).max(q2)),
            };
            (lo, hi, q1 - lo, hi - q2)
        } else {
            let (lo, hi) = match &request.pauses {
                None => (a_end, b_start.max(a_end)),
                Some(pauses) => overlapping(pauses, a_end, b_start)
                    .iter()
                    .map(|&(s, e)| (s.max(a_end), e.min(b_start)))
                    .filter(|(s, e)| e > s)
                    .max_by(|x, y| (x.1 - x.0).total_cmp(&(y.1 - y.0)))
                    .unwrap_or((a_end, a_end)),
            };
            let gap = hi - lo;
            let (l, r) = match (a, b) {
                (None, _) => (0.0, gap),
                (_, None) => (gap, 0.0),
                _ => (gap / 2.0, gap / 2.0),
            };
            (lo, hi, l, r)
        };
        let mut shortened = None;
        if let Some(most) = request.max_pause.filter(|m| left + right > m + 1e-6) {
            let mut l = left.min(most / 2.0);
            let r = right.min(most - l);
            l = left.min(most - r);
            q1 = lo_edge + l;
            q2 = hi_edge - r;
            shortened = Some((l, r));
        }
        if q2 - q1 > 1e-4 {
            match (shortened, tone) {
                (Some((l, r)), Some(_)) if l + r > 2.0 * TONE_EDGE_SECS => {
                    // Each side's share of the pause sounds as room tone, its range the side's
                    // own pause (what a video editor shows there), never a word cut between.
                    let (e1, e2) = (l.min(TONE_EDGE_SECS), r.min(TONE_EDGE_SECS));
                    push(&mut list, island_start, lo_edge + e1);
                    for (start, end) in [(lo_edge + e1, lo_edge + l), (hi_edge - r, hi_edge - e2)] {
                        if end - start > 1e-4 {
                            list.kept.push(KeptRange {
                                start,
                                end,
                                room_tone: true,
                            });
                        }
                    }
                    island_start = hi_edge - e2;
                }
                _ => {
                    push(&mut list, island_start, q1);
                    island_start = q2;
                }
            }
        }
        previous = next;
    }
    push(&mut list, island_start, duration);
    if list.kept.iter().any(|r| r.room_tone) {
        list.room_tone = tone;
    }
    list
}

/// The stretches of `sorted` (in order, none overlapping) that reach into `[lo, hi]`.
fn overlapping(sorted: &[(f64, f64)], lo: f64, hi: f64) -> &[(f64, f64)] {
    let from = sorted.partition_point(|&(_, e)| e < lo);
    let to = sorted.partition_point(|&(s, _)| s <= hi).max(from);
    &sorted[from..to]
}

/// Stretches sorted and joined where they overlap.
fn merged(stretches: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut sorted: Vec<(f64, f64)> = stretches.iter().copied().filter(|(s, e)| e >= s).collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(sorted.len());
    for (s, e) in sorted {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Adds `[start, end)` to the kept ranges, when it holds anything.
fn push(list: &mut EditList, start: f64, end: f64) {
    if end - start > 1e-4 {
        list.kept.push(KeptRange::new(start, end));
    }
}

/// What leaving a pause unmatched to any word boundary costs, in seconds of distance: a pause
/// inside a word (a long stop) is rare, so a pause is matched unless no boundary is near.
const UNMATCHED_PAUSE_COST: f64 = 1.0;
/// Farthest a word boundary moves to a pause before it, and after it: a recognizer's times
/// are not off by more (Whisper's run late, so earlier reaches further).
const MAX_EARLIER_SECS: f64 = 0.6;
const MAX_LATER_SECS: f64 = 0.4;
/// The same before a boundary that follows punctuation.
const MAX_EARLIER_PUNCTUATED_SECS: f64 = 1.0;
/// What a pause before a boundary costs per second apart, against 1 for a pause after it.
const EARLIER_WEIGHT: f64 = 0.5;
/// Words matched to pauses at once (a stretch between long pauses, or this many).
const MATCH_CHUNK_WORDS: usize = 200;

impl Loudness {
    /// The quietest [`ROOM_TONE_SECS`] inside one of `pauses` (a little in from its edges, so
    /// no word's breath is in it), if a pause is long enough.
    pub fn room_tone(&self, pauses: &[(f64, f64)]) -> Option<KeptRange> {
        if self.frame_secs <= 0.0 {
            return None;
        }
        let frame_secs = self.frame_secs;
        let per = (ROOM_TONE_SECS / frame_secs).round() as usize;
        let mut best: Option<(f64, usize)> = None;
        for &(start, end) in pauses {
            let first = ((start + REACH_SECS) / frame_secs).ceil() as usize;
            let last = (((end - REACH_SECS) / frame_secs).floor() as usize).min(self.levels.len());
            if last < first + per {
                continue;
            }
            let energy = |i: usize| f64::from(self.levels[i]).powi(2);
            let mut sum: f64 = (first..first + per).map(energy).sum();
            for at in first..=last - per {
                if at > first {
                    sum += energy(at + per - 1) - energy(at - 1);
                }
                if best.is_none_or(|(b, _)| sum < b - 1e-12) {
                    best = Some((sum, at));
                }
            }
        }
        best.map(|(_, at)| {
            let start = at as f64 * frame_secs;
            KeptRange::new(start, start + per as f64 * frame_secs)
        })
    }
}

/// The words' times moved to the recording's pauses. A recognizer's word times are
/// approximate (Whisper's often a few hundred milliseconds off, and a short filler's worst),
/// but the pauses between words are plain in the audio: each pause is matched to the word
/// boundary nearest it, in order (a dynamic programme over pauses and boundaries, a pause left
/// unmatched at a cost), and a word then starts where the pause before it ends and ends where
/// the pause after it starts. A boundary with no pause (words run together) keeps its time.
pub fn snap_to_pauses(words: &[TimedWord], pauses: &[(f64, f64)]) -> Vec<TimedWord> {
    let mut snapped = words.to_vec();
    let mut first = 0;
    let mut pause_from = 0;
    while first < words.len() {
        // A chunk ends at a long gap between words, or after a bound.
        let mut last = first + 1;
        while last < words.len()
            && last - first < MATCH_CHUNK_WORDS
            && words[last].start - words[last - 1].end < 1.0
        {
            last += 1;
        }
        let chunk = &words[first..last];
        // Boundary k: before chunk word k (k = len: after the last).
        let hints: Vec<f64> = (0..=chunk.len())
            .map(|k| match k {
                0 => chunk[0].start,
                k if k == chunk.len() => chunk[k - 1].end,
                k => (chunk[k - 1].end + chunk[k].start) / 2.0,
            })
            .collect();
        let lo = chunk[0].start - 1.0;
        let hi = chunk[chunk.len() - 1].end + 1.0;
        while pause_from < pauses.len() && pauses[pause_from].1 < lo {
            pause_from += 1;
        }
        let mut pause_to = pause_from;
        while pause_to < pauses.len() && pauses[pause_to].0 <= hi {
            pause_to += 1;
        }
        let near = &pauses[pause_from..pause_to];
        // Boundary k follows punctuation when word k - 1 ends with it.
        let punctuated: Vec<bool> = (0..=chunk.len())
            .map(|k| k > 0 && chunk[k - 1].punctuated)
            .collect();
        let matched = match_pauses(near, &hints, &punctuated);
        for (k, pause) in matched.iter().enumerate() {
            let Some(&(p_start, p_end)) = pause.map(|j| &near[j]) else {
                continue;
            };
            if k < chunk.len() {
                snapped[first + k].start = p_end;
            }
            if k > 0 {
                snapped[first + k - 1].end = p_start;
            }
        }
        // Pauses matched here are not matched again by the next chunk.
        if let Some(last_used) = matched.iter().flatten().max() {
            pause_from += last_used + 1;
        }
        first = last;
    }
    // A word keeps some sound, and none overlaps the next.
    for i in 0..snapped.len() {
        let floor = if i > 0 { snapped[i - 1].end } else { 0.0 };
        snapped[i].start = snapped[i].start.max(floor);
        if snapped[i].end < snapped[i].start {
            snapped[i].end = snapped[i].start;
        }
    }
    snapped
}

/// For each boundary (by its time), the pause matched to it, if any: the matching of pauses to
/// boundaries, in order, that is nearest in all (a pause unmatched costs
/// [`UNMATCHED_PAUSE_COST`]; a boundary unmatched costs nothing). `hints` has the boundary
/// before the first word and the one after the last.
fn match_pauses(pauses: &[(f64, f64)], hints: &[f64], punctuated: &[bool]) -> Vec<Option<usize>> {
    let (m, b) = (pauses.len(), hints.len());
    let distance = |j: usize, k: usize| {
        let (s, e) = pauses[j];
        let (earlier, later) = ((hints[k] - e).max(0.0), (s - hints[k]).max(0.0));
        // The first word's start and the last word's end move only out of a pause they are
        // in (or at its edge): a pause beyond them has sound on its far side that no word of
        // theirs says.
        if (k == 0 || k == b - 1) && earlier.max(later) > REACH_SECS {
            return f64::INFINITY;
        }
        // Whisper's times run late far more often than early (a word's time is where the
        // alignment reaches its token, after the sound began), so a pause before a boundary is
        // the likelier one; and likelier still after a comma or a full stop, where Whisper
        // heard one (a filler's commas), even well before its time.
        let (reach, weight) = if punctuated[k] {
            (MAX_EARLIER_PUNCTUATED_SECS, EARLIER_WEIGHT / 2.0)
        } else {
            (MAX_EARLIER_SECS, EARLIER_WEIGHT)
        };
        if earlier > reach || later > MAX_LATER_SECS {
            return f64::INFINITY;
        }
        weight * earlier + later
    };
    // cost[j][k]: the pauses before j against the boundaries before k.
    let at = |j: usize, k: usize| j * (b + 1) + k;
    let mut cost = vec![0.0f64; (m + 1) * (b + 1)];
    for j in 1..=m {
        cost[at(j, 0)] = j as f64 * UNMATCHED_PAUSE_COST;
        for k in 1..=b {
            let matched = cost[at(j - 1, k - 1)] + distance(j - 1, k - 1);
            let unmatched = cost[at(j - 1, k)] + UNMATCHED_PAUSE_COST;
            let boundary_free = cost[at(j, k - 1)];
            cost[at(j, k)] = matched.min(unmatched).min(boundary_free);
        }
    }
    let mut out = vec![None; b];
    let (mut j, mut k) = (m, b);
    while j > 0 && k > 0 {
        let here = cost[at(j, k)];
        if (here - cost[at(j, k - 1)]).abs() < 1e-12 {
            k -= 1;
        } else if (here - (cost[at(j - 1, k - 1)] + distance(j - 1, k - 1))).abs() < 1e-12 {
            out[k - 1] = Some(j - 1);
            j -= 1;
            k -= 1;
        } else {
            j -= 1;
        }
    }
    out
}

/// The samples of the gaps a plan searches for quiet (a second at most each), gathered by one
/// decode that stops after the last; each block of the decode visits only the gaps it reaches.
pub struct QuietSamples {
    /// The gaps, by start.
    windows: Vec<(f64, f64)>,
    ranges: Vec<std::ops::Range<usize>>,
    pieces: Vec<Vec<f32>>,
    /// The first gap not yet past.
    first_open: usize,
    /// Samples of the file seen so far.
    at: usize,
    last_end: usize,
    sample_rate: u32,
}

impl QuietSamples {
    /// For a plan that searches `windows`.
    pub fn new(mut windows: Vec<(f64, f64)>) -> QuietSamples {
        windows.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        windows.dedup();
        QuietSamples {
            pieces: vec![Vec::new(); windows.len()],
            windows,
            ranges: Vec::new(),
            first_open: 0,
            at: 0,
            last_end: 0,
            sample_rate: 0,
        }
    }
}

impl SampleSink for QuietSamples {
    fn begin(&mut self, sample_rate: u32) {
        self.sample_rate = sample_rate;
        self.ranges = self
            .windows
            .iter()
            .map(|&(s, e)| sample_range(s, e, sample_rate))
            .collect();
        self.last_end = self.ranges.iter().map(|r| r.end).max().unwrap_or(0);
    }

    fn take(&mut self, block: &[f32]) -> Result<ControlFlow<()>, AudioError> {
        let until = self.at + block.len();
        while self.first_open < self.ranges.len() && self.ranges[self.first_open].end <= self.at {
            self.first_open += 1;
        }
        for i in self.first_open..self.ranges.len() {
            if self.ranges[i].start >= until {
                break;
            }
            let part = part_in(block, self.at, &self.ranges[i]);
            self.pieces[i].extend_from_slice(part);
        }
        self.at = until;
        Ok(if self.at >= self.last_end {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    }
}

impl Quietness for QuietSamples {
    fn quietest(&self, lo: f64, hi: f64) -> f64 {
        let rate = f64::from(self.sample_rate);
        // The gaps that start at or before `lo` and end at or after `hi`, among the few that
        // start within a window's length before it.
        let upto = self.windows.partition_point(|&(s, _)| s <= lo + 1e-9);
        let from = self
            .windows
            .partition_point(|&(s, _)| s < lo - MAX_WINDOW_SECS - 2.0 * REACH_SECS);
        let Some(i) = (from..upto).find(|&i| self.windows[i].1 >= hi - 1e-9) else {
            return (lo + hi) / 2.0;
        };
        let (piece, start) = (&self.pieces[i], self.windows[i].0);
        let from = (((lo - start) * rate).max(0.0) as usize).min(piece.len());
        let to = (((hi - start) * rate).ceil() as usize).min(piece.len());
        let samples = &piece[from..to];
        let window = ((QUIET_WINDOW_SECS * rate) as usize).clamp(1, samples.len().max(1));
        if samples.len() <= window {
            return (lo + hi) / 2.0;
        }
        let mut energy: f64 = samples[..window].iter().map(|&s| f64::from(s * s)).sum();
        let mut best = (energy, 0);
        for i in 1..=samples.len() - window {
            energy +=
                f64::from(samples[i + window - 1].powi(2)) - f64::from(samples[i - 1].powi(2));
            if energy < best.0 - 1e-12 {
                best = (energy, i);
            }
        }
        start + (from + best.1 + window / 2) as f64 / rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Quiet nowhere in particular: the middle of every window.
    struct Middles;
    impl Quietness for Middles {
        fn quietest(&self, lo: f64, hi: f64) -> f64 {
            (lo + hi) / 2.0
        }
    }

    fn words(spans: &[(f64, f64)]) -> Vec<TimedWord> {
        spans
            .iter()
            .map(|&(start, end)| TimedWord {
                start,
                end,
                punctuated: false,
            })
            .collect()
    }

    fn kept(list: &EditList) -> Vec<(f64, f64)> {
        list.kept
            .iter()
            .map(|r| {
                (
                    (r.start * 1000.0).round() / 1000.0,
                    (r.end * 1000.0).round() / 1000.0,
                )
            })
            .collect()
    }

    #[test]
    fn a_cut_word_goes_from_the_gap_before_it_to_the_gap_after_it() {
        let w = words(&[(0.0, 0.5), (0.7, 1.0), (1.2, 1.6)]);
        let request = EditRequest {
            cut_words: vec![1],
            ..EditRequest::default()
        };
        let list = plan(&w, 2.0, &request, &Middles, None);
        // The gaps searched reach 50 ms past the words: 0.45–0.75 and 0.95–1.25.
        assert_eq!(kept(&list), vec![(0.0, 0.6), (1.1, 2.0)]);
        for range in &list.kept {
            for word in &w {
                let inside = word.start < range.end - 1e-9 && word.end > range.end + 1e-9;
                assert!(!inside, "a cut at {} falls inside a word", range.end);
            }
        }
    }

    #[test]
    fn the_cut_lands_where_the_recording_is_quietest() {
        struct QuietAt(f64);
        impl Quietness for QuietAt {
            fn quietest(&self, lo: f64, hi: f64) -> f64 {
                self.0.clamp(lo, hi)
            }
        }
        let w = words(&[(0.0, 0.5), (0.7, 1.0), (1.2, 1.6)]);
        let request = EditRequest {
            cut_words: vec![1],
            ..EditRequest::default()
        };
        let list = plan(&w, 2.0, &request, &QuietAt(0.52), None);
        assert_eq!(kept(&list)[0], (0.0, 0.52));
        // Never past a word's middle, however quiet it is there.
        let list = plan(&w, 2.0, &request, &QuietAt(0.1), None);
        assert_eq!(kept(&list)[0], (0.0, 0.45));
    }

    #[test]
    fn long_pauses_are_shortened_to_the_limit_and_short_ones_stay() {
        let w = words(&[(1.0, 1.5), (3.5, 4.0), (4.3, 5.0)]);
        let request = EditRequest {
            max_pause: Some(0.6),
            ..EditRequest::default()
        };
        let list = plan(&w, 7.0, &request, &Middles, None);
        // Leading 1.0 s of silence keeps its last 0.6; the 2 s pause keeps 0.3 each side; the
        // 0.3 s pause stays; the trailing 2 s keeps its first 0.6.
        assert_eq!(kept(&list), vec![(0.4, 1.8), (3.2, 5.6)]);
        assert!((list.duration_secs() - (1.4 + 2.4)).abs() < 1e-9);
    }

    #[test]
    fn a_pause_around_a_cut_word_is_held_to_the_limit_too() {
        let w = words(&[(0.0, 0.5), (1.5, 1.8), (2.8, 3.0)]);
        let request = EditRequest {
            cut_words: vec![1],
            max_pause: Some(0.5),
            ..EditRequest::default()
        };
        let list = plan(&w, 3.0, &request, &Middles, None);
        let pause: f64 = list.kept[1].start - list.kept[0].end;
        assert!(pause > 0.0);
        let heard = (list.kept[0].end - 0.5) + (2.8 - list.kept[1].start);
        assert!((heard - 0.5).abs() < 1e-9, "pause heard {heard}");
    }

    #[test]
    fn a_stretch_cut_by_time_takes_the_words_whose_middle_it_holds() {
        let w = words(&[(0.0, 0.5), (0.7, 1.0), (1.2, 1.6), (1.8, 2.0)]);
        let request = EditRequest {
            cut_times: vec![(0.9, 1.5)],
            ..EditRequest::default()
        };
        let list = plan(&w, 2.5, &request, &Middles, None);
        // Words 1 (middle 0.85) stays, word 2 (middle 1.4) goes.
        assert_eq!(kept(&list), vec![(0.0, 1.1), (1.7, 2.5)]);
        // Inside a pause, the stretch goes as given.
        let list = plan(
            &words(&[(0.0, 0.5), (3.0, 3.5)]),
            4.0,
            &EditRequest {
                cut_times: vec![(1.0, 2.0)],
                ..EditRequest::default()
            },
            &Middles,
            None,
        );
        assert_eq!(kept(&list), vec![(0.0, 1.0), (2.0, 4.0)]);
    }

    #[test]
    fn a_pause_is_shortened_only_where_the_recording_is_silent() {
        // The words say 1.5–3.5 is a pause; the recording is silent only from 2.6 (the first
        // word's sound runs on, its recognized end early).
        let w = words(&[(1.0, 1.5), (3.5, 4.0)]);
        let request = EditRequest {
            max_pause: Some(0.4),
            pauses: Some(vec![(2.6, 3.5)]),
            ..EditRequest::default()
        };
        let list = plan(&w, 4.5, &request, &Middles, None);
        assert_eq!(kept(&list), vec![(0.0, 2.8), (3.3, 4.5)]);
    }

    #[test]
    fn room_tone_never_stands_for_a_word_cut_between_its_pauses() {
        // "leave, um, before": "um" cut, the long pause after it shortened with room tone.
        let w = words(&[(0.0, 1.0), (1.2, 1.5), (3.5, 4.0)]);
        let pauses = vec![(1.0, 1.2), (1.5, 3.5)];
        let request = EditRequest {
            cut_words: vec![1],
            max_pause: Some(0.6),
            room_tone: true,
            pauses: Some(pauses.clone()),
            ..EditRequest::default()
        };
        let list = plan(&w, 4.0, &request, &Middles, Some(KeptRange::new(2.0, 2.5)));
        let toned: Vec<&KeptRange> = list.kept.iter().filter(|r| r.room_tone).collect();
        assert!(!toned.is_empty(), "{list:?}");
        for r in toned {
            assert!(
                pauses
                    .iter()
                    .any(|&(s, e)| r.start >= s - 1e-9 && r.end <= e + 1e-9),
                "{r:?} is not inside a pause"
            );
        }
        assert!(list.edited_time(1.35).is_none());
        list.check(4.0).unwrap();
    }

    #[test]
    fn a_shortened_pause_may_sound_as_room_tone() {
        let w = words(&[(0.0, 0.5), (2.5, 3.0)]);
        let request = EditRequest {
            max_pause: Some(0.6),
            room_tone: true,
            ..EditRequest::default()
        };
        let tone = KeptRange::new(1.0, 1.5);
        let list = plan(&w, 3.0, &request, &Middles, Some(tone));
        assert_eq!(
            kept(&list),
            vec![(0.0, 0.54), (0.54, 0.8), (2.2, 2.46), (2.46, 3.0)]
        );
        assert!(list.kept[1].room_tone && list.kept[2].room_tone);
        assert_eq!(list.room_tone, Some(tone));
        assert!((list.duration_secs() - 1.6).abs() < 1e-9);
        list.check(3.0).unwrap();
        // Without a pause long enough to take room tone from, the pause's own audio stays.
        let list = plan(&w, 3.0, &request, &Middles, None);
        assert!(list.kept.iter().all(|r| !r.room_tone));
        assert!((list.duration_secs() - 1.6).abs() < 1e-9);
    }

    #[test]
    fn the_quietest_point_and_the_room_tone_are_read_from_the_samples() {
        let rate = 16_000;
        // Loud noise everywhere but a quiet dip at 0.62 s and a quiet second from 2.0 s.
        let mut state = 1u32;
        let samples: Vec<f32> = (0..rate * 4)
            .map(|i| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let noise = (state >> 8) as f32 / (1u32 << 24) as f32 - 0.5;
                let t = i as f64 / f64::from(rate);
                let quiet = (t - 0.62).abs() < 0.003 || (2.0..3.0).contains(&t);
                noise * if quiet { 0.001 } else { 0.5 }
            })
            .collect();
        let mut quiet = QuietSamples::new(vec![(0.45, 0.75)]);
        let mut loudness = Loudness::default();
        quiet.begin(rate as u32);
        loudness.begin(rate as u32);
        for block in samples.chunks(1000) {
            let _ = quiet.take(block).unwrap();
            let _ = loudness.take(block).unwrap();
        }
        let at = quiet.quietest(0.45, 0.75);
        assert!((at - 0.62).abs() < 0.002, "quietest at {at}");
        let pauses = loudness.pauses();
        assert_eq!(pauses.len(), 1, "the 6 ms dip is no pause: {pauses:?}");
        assert!((pauses[0].0 - 2.0).abs() < 0.011 && (pauses[0].1 - 3.0).abs() < 0.011);
        let tone = loudness.room_tone(&pauses).unwrap();
        assert!(
            tone.start >= 2.0 - 1e-9 && tone.end <= 3.0 + 1e-9,
            "{tone:?}"
        );
    }

    #[test]
    fn words_move_to_the_pauses_heard_between_them() {
        // As Whisper heard "So, um, I think" in a synthesized voice: "um" 0.4 s late, and "I"
        // with no length. The pauses in the audio are at 0.34–0.46 and 0.80–0.94.
        let heard = words(&[(0.0, 0.74), (0.88, 1.1), (1.1, 1.12), (1.12, 1.44)]);
        let pauses = [(0.34, 0.46), (0.80, 0.94), (1.9, 2.3)];
        let snapped = snap_to_pauses(&heard, &pauses);
        let spans: Vec<(f64, f64)> = snapped.iter().map(|w| (w.start, w.end)).collect();
        assert_eq!(
            spans,
            vec![(0.0, 0.34), (0.46, 0.8), (0.94, 1.12), (1.12, 1.44)]
        );
        // The last word's end at a pause's edge moves to it; the word before keeps its end.
        let end = snap_to_pauses(&words(&[(5.68, 5.88), (5.88, 6.16)]), &[(6.17, 6.46)]);
        assert_eq!(end, words(&[(5.68, 5.88), (5.88, 6.17)]));
        // As Whisper heard "leave, um, before" (the filler at 2.01–2.40): its "um," 0.6 s
        // late, after a comma that says a pause is there.
        let mut heard = words(&[(1.18, 1.38), (1.38, 2.64), (2.64, 2.78), (2.78, 2.98)]);
        heard[1].punctuated = true;
        heard[2].punctuated = true;
        let snapped = snap_to_pauses(&heard, &[(1.72, 2.01), (2.4, 2.6)]);
        assert_eq!((snapped[2].start, snapped[2].end), (2.01, 2.4));
        // As Whisper heard "to Thursday, uh, if" (the filler at 10.13–10.38): the pause before
        // "uh" is 0.47 s before its time, and still the one matched to it.
        let heard = words(&[
            (9.28, 9.52),
            (9.52, 10.6),
            (10.6, 10.7),
            (10.7, 10.82),
            (10.82, 11.18),
        ]);
        let snapped = snap_to_pauses(&heard, &[(9.95, 10.13), (10.38, 10.56)]);
        assert_eq!((snapped[2].start, snapped[2].end), (10.13, 10.38));
        // Words run together keep their times; no pause, no change.
        assert_eq!(snap_to_pauses(&heard, &[]), heard);
    }
}
