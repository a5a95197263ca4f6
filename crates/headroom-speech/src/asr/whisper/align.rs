//! Word times from cross-attention, as Whisper's reference implementation finds them: the
//! alignment heads' attention over the window's audio is turned into a token × frame
//! similarity (softmax over frames, normalized per frame across tokens, median-filtered in
//! time, averaged over heads), dynamic time warping finds the monotonic path through it, and
//! each word starts where the path enters its first token.

use crate::asr::Word;

/// Audio frames (encoder positions) per second.
const FRAMES_PER_SECOND: f64 = 50.0;
/// Width of the median filter over frames.
const MEDIAN_WIDTH: usize = 7;
/// Punctuation that belongs to the word after it, and to the word before it.
const PREPENDED: &str = "\"'“¿([{-";
const APPENDED: &str = "\"'.。,，!！?？:：”)]}、";
const SENTENCE_ENDS: &str = ".。!！?？";

/// The similarity of each text row to each audio frame: `rows × audio_frames`, rows from the
/// entry at `first_row` up to (not including) the last entry.
///
/// `scores`: per head, `entries × frames` scaled attention scores (before softmax).
pub fn attention_matrix(
    scores: &[Vec<f32>],
    entries: usize,
    frames: usize,
    audio_frames: usize,
    first_row: usize,
) -> Vec<f32> {
    let rows = entries.saturating_sub(first_row + 1);
    let mut matrix = vec![0f32; rows * audio_frames];
    if scores.is_empty() || rows == 0 {
        return matrix;
    }
    let mut weights = vec![0f32; entries * audio_frames];
    let mut filtered = vec![0f32; audio_frames];
    for head in scores {
        for e in 0..entries {
            let row = &mut weights[e * audio_frames..(e + 1) * audio_frames];
            row.copy_from_slice(&head[e * frames..e * frames + audio_frames]);
            super::kernels::softmax(row);
        }
        // Normalize each frame across all entries (population standard deviation).
        for f in 0..audio_frames {
            let mean = (0..entries)
                .map(|e| weights[e * audio_frames + f])
                .sum::<f32>()
                / entries as f32;
            let var = (0..entries)
                .map(|e| (weights[e * audio_frames + f] - mean).powi(2))
                .sum::<f32>()
                / entries as f32;
            let std = var.sqrt().max(1e-10);
            for e in 0..entries {
                let w = &mut weights[e * audio_frames + f];
                *w = (*w - mean) / std;
            }
        }
        for r in 0..rows {
            let e = first_row + r;
            median_filter(
                &weights[e * audio_frames..(e + 1) * audio_frames],
                MEDIAN_WIDTH,
                &mut filtered,
            );
            for (m, v) in matrix[r * audio_frames..(r + 1) * audio_frames]
                .iter_mut()
                .zip(&filtered)
            {
                *m += v / scores.len() as f32;
            }
        }
    }
    matrix
}

/// A median filter of odd `width` with reflected edges.
fn median_filter(x: &[f32], width: usize, out: &mut [f32]) {
    let n = x.len();
    let half = width / 2;
    let mut window = Vec::with_capacity(width);
    for (i, o) in out.iter_mut().enumerate().take(n) {
        window.clear();
        for k in 0..width {
            let j = i as isize + k as isize - half as isize;
            let j = if j < 0 {
                (-j) as usize
            } else if j as usize >= n {
                (2 * n - 2).saturating_sub(j as usize)
            } else {
                j as usize
            };
            window.push(x[j.min(n - 1)]);
        }
        window.sort_by(f32::total_cmp);
        *o = window[half];
    }
}

/// The monotonic path from (0, 0) to (rows-1, cols-1) of least total cost through `cost`
/// (`rows × cols`), as (row, column) pairs in order.
pub fn dtw(cost: &[f32], rows: usize, cols: usize) -> Vec<(usize, usize)> {
    let w = cols + 1;
    let mut total = vec![f32::INFINITY; (rows + 1) * w];
    let mut trace = vec![0u8; (rows + 1) * w];
    total[0] = 0.0;
    for j in 1..=cols {
        for i in 1..=rows {
            let diagonal = total[(i - 1) * w + j - 1];
            let up = total[(i - 1) * w + j];
            let left = total[i * w + j - 1];
            let (best, step) = if diagonal < up && diagonal < left {
                (diagonal, 0)
            } else if up < diagonal && up < left {
                (up, 1)
            } else {
                (left, 2)
            };
            total[i * w + j] = cost[(i - 1) * cols + j - 1] + best;
            trace[i * w + j] = step;
        }
    }
    trace[..=cols].fill(2);
    for i in 0..=rows {
        trace[i * w] = 1;
    }
    let (mut i, mut j) = (rows, cols);
    let mut path = Vec::with_capacity(rows + cols);
    while i > 0 && j > 0 {
        path.push((i - 1, j - 1));
        match trace[i * w + j] {
            0 => {
                i -= 1;
                j -= 1;
            }
            1 => i -= 1,
            _ => j -= 1,
        }
    }
    path.reverse();
    path
}

/// For each row of the similarity matrix, the time (seconds into the window) where the best
/// path enters it.
pub fn token_times(matrix: &[f32], rows: usize, audio_frames: usize) -> Vec<f64> {
    if rows == 0 || audio_frames == 0 || matrix.len() < rows * audio_frames {
        return vec![0.0; rows];
    }
    let cost: Vec<f32> = matrix.iter().map(|v| -v).collect();
    let path = dtw(&cost, rows, audio_frames);
    let mut times = vec![f64::NAN; rows];
    for &(r, f) in &path {
        if times[r].is_nan() {
            times[r] = f as f64 / FRAMES_PER_SECOND;
        }
    }
    // A row the path skipped (it cannot, but stay monotonic regardless).
    let mut last = 0.0;
    for t in times.iter_mut() {
        if t.is_nan() {
            *t = last;
        }
        last = *t;
    }
    times
}

/// A word being assembled: its text and its tokens' indices in the window's text.
struct Draft {
    text: String,
    tokens: Vec<usize>,
}

/// Groups a window's text tokens into words: a token that starts with a space, or is
/// punctuation, starts a new word; then punctuation joins its neighbour.
fn group(pieces: &[String]) -> Vec<Draft> {
    let mut words: Vec<Draft> = Vec::new();
    let mut pending = String::new();
    let mut pending_tokens = Vec::new();
    for (i, piece) in pieces.iter().enumerate() {
        pending.push_str(piece);
        pending_tokens.push(i);
        // A token that ends inside a multi-byte character decodes to a replacement character;
        // wait for the rest of it.
        if pending.ends_with('\u{FFFD}') && i + 1 < pieces.len() {
            continue;
        }
        let text = std::mem::take(&mut pending);
        let tokens = std::mem::take(&mut pending_tokens);
        let trimmed = text.trim();
        let punctuation = !trimmed.is_empty() && trimmed.chars().all(|c| c.is_ascii_punctuation());
        match words.last_mut() {
            Some(last) if !text.starts_with(' ') && !punctuation => {
                last.text.push_str(&text);
                last.tokens.extend(tokens);
            }
            _ => words.push(Draft { text, tokens }),
        }
    }
    // Opening punctuation joins the word after it (from the end, so runs chain).
    let mut i = words.len().saturating_sub(1);
    while i > 0 {
        i -= 1;
        let t = words[i].text.clone();
        if t.starts_with(' ') && !t.trim().is_empty() && PREPENDED.contains(t.trim()) {
            let moved = std::mem::replace(
                &mut words[i],
                Draft {
                    text: String::new(),
                    tokens: Vec::new(),
                },
            );
            let next = &mut words[i + 1];
            next.text = moved.text + &next.text;
            let mut tokens = moved.tokens;
            tokens.append(&mut next.tokens);
            next.tokens = tokens;
        }
    }
    words.retain(|w| !w.tokens.is_empty());
    // Closing punctuation joins the word before it.
    let mut merged: Vec<Draft> = Vec::with_capacity(words.len());
    for w in words {
        match merged.last_mut() {
            Some(prev)
                if !prev.text.ends_with(' ')
                    && APPENDED.contains(w.text.as_str())
                    && !w.text.is_empty() =>
            {
                prev.text.push_str(&w.text);
                prev.tokens.extend(w.tokens);
            }
            _ => merged.push(w),
        }
    }
    merged
}

/// The words of a window's segments. `pieces` and `logprobs`: each text token's text and
/// log-probability, segment after segment (`counts` tokens each); `times`: the time each
/// token starts, and one more for the end of the text (from [`token_times`]); `bounds`: each
/// segment's start and end in the whole audio; `offset`: the window's start.
pub fn words(
    pieces: &[String],
    logprobs: &[f32],
    times: &[f64],
    counts: &[usize],
    bounds: &[(f64, f64)],
    offset: f64,
) -> Vec<Vec<Word>> {
    let mut out = Vec::with_capacity(counts.len());
    let mut first = 0;
    let mut timed: Vec<(Word, usize)> = Vec::new();
    for (s, &n) in counts.iter().enumerate() {
        let drafts = group(&pieces[first..first + n]);
        for d in drafts {
            let start_token = first + d.tokens[0];
            let end_token = first + d.tokens[d.tokens.len() - 1] + 1;
            let probability = d
                .tokens
                .iter()
                .map(|&t| logprobs[first + t].exp())
                .sum::<f32>()
                / d.tokens.len() as f32;
            timed.push((
                Word {
                    speaker: None,
                    start: offset + times[start_token],
                    end: offset + times[end_token.min(times.len() - 1)],
                    text: d.text.trim().to_string(),
                    probability,
                },
                s,
            ));
        }
        first += n;
    }
    // Long words at sentence ends soak up the pause after them; cap them at twice the median.
    let mut durations: Vec<f64> = timed
        .iter()
        .map(|(w, _)| w.end - w.start)
        .filter(|d| *d > 0.0)
        .collect();
    durations.sort_by(f64::total_cmp);
    let median = durations
        .get(durations.len() / 2)
        .copied()
        .unwrap_or(0.0)
        .min(0.7);
    let max_duration = median * 2.0;
    if !durations.is_empty() {
        for i in 1..timed.len() {
            let (start, end) = (timed[i].0.start, timed[i].0.end);
            if end - start > max_duration {
                if ends_sentence(&timed[i].0.text) {
                    timed[i].0.end = start + max_duration;
                } else if ends_sentence(&timed[i - 1].0.text) {
                    timed[i].0.start = end - max_duration;
                }
            }
        }
    }
    let mut by_segment: Vec<Vec<Word>> = vec![Vec::new(); counts.len()];
    for (w, s) in timed {
        by_segment[s].push(w);
    }
    for (words, &(seg_start, seg_end)) in by_segment.iter_mut().zip(bounds) {
        // Prefer the segment's own times where its first or last word runs far past them.
        if let Some(first) = words.first_mut() {
            if seg_start < first.end && seg_start - 0.5 > first.start {
                first.start = (first.end - median).min(seg_start).max(0.0);
            }
        }
        if let Some(last) = words.last_mut() {
            if seg_end > last.start && seg_end + 0.5 < last.end {
                last.end = (last.start + median).max(seg_end);
            }
        }
        for w in words.iter_mut() {
            w.end = w.end.max(w.start);
        }
        out.push(std::mem::take(words));
    }
    out
}

/// Samples per alignment frame (20 ms at 16 kHz).
const SAMPLES_PER_FRAME: usize = 320;
/// Quieter than this below the window's loud speech is a pause, not a word.
const PAUSE_BELOW_DB: f32 = 30.0;
/// A word keeps at least this much of its span.
const MIN_WORD_SECS: f64 = 0.1;

/// Moves each word's start past the silence before it, and its end back from the silence
/// after it. The alignment gives a word every frame from the previous word's end, so a pause
/// before a word would otherwise count as part of it (a word after half a second's pause
/// started half a second early). `audio`: the window's 16 kHz samples, from `offset` seconds.
pub fn trim_to_sound(segments: &mut [Vec<Word>], audio: &[f32], offset: f64) {
    let levels = frame_levels(audio);
    let Some(floor) = pause_floor(&levels) else {
        return;
    };
    let frame_of =
        |t: f64| (((t - offset) * FRAMES_PER_SECOND).round().max(0.0) as usize).min(levels.len());
    let min_frames = (MIN_WORD_SECS * FRAMES_PER_SECOND) as usize;
    for word in segments.iter_mut().flatten() {
        let (mut start, mut end) = (frame_of(word.start), frame_of(word.end));
        while start + min_frames < end && levels[start] < floor {
            start += 1;
        }
        while end > start + min_frames && levels[end - 1] < floor {
            end -= 1;
        }
        let secs = |f: usize| offset + f as f64 / FRAMES_PER_SECOND;
        word.start = word.start.max(secs(start));
        word.end = word.end.min(secs(end)).max(word.start);
    }
}

/// Seconds of sound (frames louder than [`PAUSE_BELOW_DB`] below the loud speech of all of
/// `audio`) in `audio[from..]`.
pub fn sound_secs(audio: &[f32], from: usize) -> f64 {
    let levels = frame_levels(audio);
    let Some(floor) = pause_floor(&levels) else {
        return 0.0;
    };
    let first = from / SAMPLES_PER_FRAME;
    let loud = levels.iter().skip(first).filter(|&&l| l >= floor).count();
    loud as f64 / FRAMES_PER_SECOND
}

/// The level (RMS) of each alignment frame of `audio`.
fn frame_levels(audio: &[f32]) -> Vec<f32> {
    audio
        .chunks(SAMPLES_PER_FRAME)
        .map(|f| (f.iter().map(|v| v * v).sum::<f32>() / f.len() as f32).sqrt())
        .collect()
}

/// The level below which a frame is a pause: [`PAUSE_BELOW_DB`] under the loud speech (the
/// 90th percentile frame, so a click does not set the scale). `None` for silence.
fn pause_floor(levels: &[f32]) -> Option<f32> {
    let mut sorted = levels.to_vec();
    sorted.sort_by(f32::total_cmp);
    let loud = *sorted.get(sorted.len() * 9 / 10)?;
    (loud > 0.0).then(|| loud * 10f32.powf(-PAUSE_BELOW_DB / 20.0))
}

fn ends_sentence(word: &str) -> bool {
    word.chars()
        .last()
        .is_some_and(|c| SENTENCE_ENDS.contains(c))
}

#[cfg(test)]
mod tests {
    #[test]
    fn words_lose_the_silence_around_them_but_keep_their_sound() {
        // 0.5 s of silence, 0.5 s of tone, 0.5 s of silence, from 10 s into the audio.
        let mut audio = vec![0f32; 8000];
        audio.extend((0..8000).map(|i| (i as f32 * 0.1).sin() * 0.3));
        audio.extend(vec![0f32; 8000]);
        let word = |start: f64, end: f64| Word {
            speaker: None,
            start,
            end,
            text: "harbour".into(),
            probability: 0.9,
        };
        let mut segments = vec![vec![word(10.0, 11.3)], vec![word(10.1, 10.3)]];
        trim_to_sound(&mut segments, &audio, 10.0);
        let w = &segments[0][0];
        assert!(
            (w.start - 10.5).abs() < 0.021 && (w.end - 11.0).abs() < 0.021,
            "{w:?}"
        );
        // A word timed wholly in silence keeps its place and the least length.
        let w = &segments[1][0];
        assert!(
            (w.start - 10.2).abs() < 1e-9 && (w.end - 10.3).abs() < 1e-9,
            "{w:?}"
        );
    }

    use super::*;

    #[test]
    fn dtw_follows_the_cheap_diagonal_and_covers_every_row() {
        // Three tokens over six frames, each cheap on its own two frames.
        let mut cost = vec![1.0f32; 18];
        for (r, frames) in [(0, [0, 1]), (1, [2, 3]), (2, [4, 5])] {
            for f in frames {
                cost[r * 6 + f] = 0.0;
            }
        }
        let path = dtw(&cost, 3, 6);
        assert_eq!(path.first(), Some(&(0, 0)));
        assert_eq!(path.last(), Some(&(2, 5)));
        assert!(path
            .windows(2)
            .all(|p| p[1].0 >= p[0].0 && p[1].1 >= p[0].1));
        let similarity: Vec<f32> = cost.iter().map(|c| -c).collect();
        let times = token_times(&similarity, 3, 6);
        assert_eq!(times, vec![0.0, 2.0 / 50.0, 4.0 / 50.0]);
    }

    #[test]
    fn median_filter_removes_a_spike_and_keeps_a_step() {
        let x = [0.0, 0.0, 0.0, 9.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        let mut out = [0.0; 12];
        median_filter(&x, 7, &mut out);
        assert_eq!(out[3], 0.0);
        assert_eq!(out[11], 1.0);
        assert_eq!(out[0], 0.0);
    }

    #[test]
    fn tokens_group_into_words_with_their_punctuation() {
        let pieces: Vec<String> = [
            " The", " harb", "our", " wakes", ",", " \"", "quietly", "\"", ".",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let words = group(&pieces);
        let texts: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
        assert_eq!(texts, vec![" The", " harbour", " wakes,", " \"quietly\"."]);
        assert_eq!(words[1].tokens, vec![1, 2]);
        assert_eq!(words[3].tokens, vec![5, 6, 7, 8]);
    }

    #[test]
    fn words_take_their_first_tokens_time_and_end_where_the_next_begins() {
        let pieces: Vec<String> = [" One", " two", ".", " Three"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let logprobs = [0.0f32, (0.5f32).ln(), 0.0, 0.0];
        let times = [0.1, 0.5, 0.9, 1.0, 1.4];
        let words = words(
            &pieces,
            &logprobs,
            &times,
            &[3, 1],
            &[(10.0, 11.0), (11.0, 11.5)],
            10.0,
        );
        assert_eq!(words.len(), 2);
        let first: Vec<(&str, f64, f64)> = words[0]
            .iter()
            .map(|w| (w.text.as_str(), w.start, w.end))
            .collect();
        assert_eq!(first, vec![("One", 10.1, 10.5), ("two.", 10.5, 11.0)]);
        assert!((words[0][1].probability - 0.75).abs() < 1e-6);
        assert_eq!(words[1][0].text, "Three");
        assert!((words[1][0].start - 11.0).abs() < 1e-9);
    }
}
