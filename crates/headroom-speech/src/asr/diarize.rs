//! Who spoke when: speaker diarization with the embedded speaker embedder and Silero VAD,
//! offline, no segmentation model.
//!
//! 1. Voice activity detection finds speech, cut at pauses as short as a breath.
//! 2. The embedder hears each stretch of speech a window (0.8 s) at a time, every 0.2 s.
//! 3. Windows are pooled into pieces of about 1.6 s, and the pieces clustered bottom-up
//!    (average linkage on cosine similarity) until the closest two clusters are further apart
//!    than a measured threshold, or until the number of speakers the user gave is left.
//! 4. Each window is then labelled again against the speakers' centroids, with a penalty on
//!    changing speaker (Viterbi), which finds changes inside a stretch of speech.
//! 5. Speakers whose voice is close enough to a known one (a voice profile) take its name.
//!
//! [`attribute`] then gives each word of a transcript the speaker heard over it, and splits
//! segments where the speaker changes.

use super::der::Labelled;
use super::vad::{speech_regions, SileroVad, VadError, VadParams};
use super::{Segment, Speaker, Transcript, SAMPLE_RATE};
use crate::audio::{Audio, SampleSource};
use crate::voice::embedder::{dot, WINDOW_SAMPLES};
use crate::voice::{Embedding, SpeakerEmbedder, VoiceError};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use window_vectors::WindowVectors;

mod window_vectors;

/// The most speakers told apart; more is refused as a request and never estimated.
pub const MAX_SPEAKERS: usize = 10;

/// How many speakers to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpeakerCount {
    /// Estimated from the voices heard.
    #[default]
    Auto,
    /// Exactly this many (1..=[`MAX_SPEAKERS`]), when the user knows.
    Exactly(usize),
}

impl std::str::FromStr for SpeakerCount {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("auto") {
            return Ok(SpeakerCount::Auto);
        }
        match s.parse::<usize>() {
            Ok(n) if (1..=MAX_SPEAKERS).contains(&n) => Ok(SpeakerCount::Exactly(n)),
            _ => Err(format!(
                "speakers must be `auto` or a number from 1 to {MAX_SPEAKERS}, not {s:?}"
            )),
        }
    }
}

impl std::fmt::Display for SpeakerCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpeakerCount::Auto => f.write_str("auto"),
            SpeakerCount::Exactly(n) => write!(f, "{n}"),
        }
    }
}

/// A voice the diarizer may recognise: a voice profile, or a reference clip given with a
/// request.
#[derive(Debug, Clone)]
pub struct KnownSpeaker {
    pub name: String,
    /// The voice profile's id, when the voice is one.
    pub profile: Option<String>,
    pub embedding: Embedding,
}

/// How speakers are told apart. The defaults were chosen with `headroom bench speakers` on
/// conversations of voices kept apart from the ones it reports on.
#[derive(Debug, Clone, PartialEq)]
pub struct DiarizeParams {
    /// Speech detection: pauses this short already separate speakers.
    pub vad: VadParams,
    /// Samples between the starts of two windows the embedder hears.
    pub window_step: usize,
    /// Windows pooled into one piece for clustering, and the windows between two pieces.
    pub piece_windows: usize,
    pub piece_step: usize,
    /// Pieces closer than this (mean cosine similarity, average linkage) are joined at first:
    /// high, so that only one voice's pieces join.
    pub same_speaker: f32,
    /// Then two speakers whose centroids (their whole speech) are closer than this are one,
    /// when the number of speakers is estimated.
    pub same_voice: f32,
    /// What changing speaker between two windows costs, in cosine similarity.
    pub change_penalty: f32,
    /// A speaker heard for less than this (seconds) when the count is estimated is folded
    /// into the closest other: a cough, a noise, a few words in an odd voice.
    pub min_speaker_secs: f64,
    /// A minor speaker never heard for this long in one turn (seconds) when the count is
    /// estimated is folded too: fragments of several voices, gathered (see `fold_small`).
    pub min_turn_secs: f64,
    /// A speaker this close (cosine) to a known voice is named after it.
    pub known_threshold: f32,
    /// At most this many pieces are clustered (clustering is cubic in them); longer
    /// recordings pool more windows into each piece.
    pub max_pieces: usize,
}

impl Default for DiarizeParams {
    fn default() -> Self {
        DiarizeParams {
            vad: VadParams {
                threshold: 0.5,
                neg_threshold: 0.35,
                min_speech_ms: 120,
                min_silence_ms: 160,
                max_speech_secs: 3600.0,
                speech_pad_ms: 120,
            },
            window_step: 3200,
            piece_windows: 5,
            piece_step: 3,
            same_speaker: 0.70,
            same_voice: 0.80,
            change_penalty: 0.35,
            min_speaker_secs: 2.0,
            min_turn_secs: 2.5,
            known_threshold: 0.80,
            max_pieces: 1200,
        }
    }
}

/// What to find.
#[derive(Debug, Clone, Default)]
pub struct DiarizeOptions {
    pub count: SpeakerCount,
    pub known: Vec<KnownSpeaker>,
    pub params: DiarizeParams,
}

/// A stretch of one speaker's speech, in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub start: f64,
    pub end: f64,
    /// Index into [`Diarization::speakers`].
    pub speaker: usize,
}

/// Who spoke when.
#[derive(Debug, Clone, PartialEq)]
pub struct Diarization {
    /// In time order, not overlapping.
    pub turns: Vec<Turn>,
    /// In order of first speech, labelled `S1`, `S2`, …; named when recognised.
    pub speakers: Vec<Speaker>,
}

impl Diarization {
    /// The turns labelled with their speaker's id, as diarization error is scored.
    pub fn labelled(&self) -> Vec<Labelled> {
        self.turns
            .iter()
            .map(|t| Labelled {
                start: t.start,
                end: t.end,
                speaker: self.speakers[t.speaker].id.clone(),
            })
            .collect()
    }
}

/// Why diarization failed.
#[derive(Debug, thiserror::Error)]
pub enum DiarizeError {
    #[error(transparent)]
    Vad(#[from] VadError),
    #[error(transparent)]
    Embedder(#[from] VoiceError),
    #[error("speaker diarization cancelled")]
    Cancelled,
    /// The windows' embeddings could not be kept in, or read back from, `place` (a temporary
    /// file in the spool folder, named).
    #[error("the speakers' voice windows could not be kept in {place}: {source}")]
    Spool {
        place: String,
        source: std::io::Error,
    },
}

/// The diarizer: the speaker embedder and the voice activity detector.
pub struct Diarizer {
    embedder: Arc<SpeakerEmbedder>,
    vad: Arc<SileroVad>,
    /// Where the windows' embeddings are spooled; held in memory when `None`.
    spool_dir: Option<PathBuf>,
}

/// A window the embedder heard: where it starts (samples) and its stretch of speech.
struct Window {
    start: usize,
    region: usize,
}

impl Diarizer {
    pub fn new(embedder: Arc<SpeakerEmbedder>, vad: Arc<SileroVad>) -> Diarizer {
        Diarizer {
            embedder,
            vad,
            spool_dir: None,
        }
    }

    /// The same, keeping the windows' embeddings in an unnamed temporary file in `dir`, so
    /// that an hours-long recording's speakers cost disk, not memory (27 MB at three hours).
    pub fn spooling_in(self, dir: PathBuf) -> Diarizer {
        Diarizer {
            spool_dir: Some(dir),
            ..self
        }
    }

    /// Who speaks when in 16 kHz `samples`. Progress goes from 0 to 1.
    pub fn diarize(
        &self,
        samples: &dyn SampleSource,
        options: &DiarizeOptions,
        progress: &dyn Fn(f32),
        cancel: &CancellationToken,
    ) -> Result<Diarization, DiarizeError> {
        let p = &options.params;
        let probs = self.vad.probabilities(samples)?;
        let regions = speech_regions(&probs, samples.len(), &p.vad);
        let windows = windows_over(&regions, p.window_step);
        tracing::debug!(
            regions = regions.len(),
            windows = windows.len(),
            "diarizing"
        );
        if windows.is_empty() {
            progress(1.0);
            return Ok(Diarization {
                turns: Vec::new(),
                speakers: Vec::new(),
            });
        }
        // Embedding is nearly all the work: progress follows it, a batch at a time.
        // A full disk or a folder that cannot be written is said with the folder it is.
        let spool_failed = |source| DiarizeError::Spool {
            place: match &self.spool_dir {
                Some(dir) => format!("a temporary file in {}", dir.display()),
                None => "memory".into(),
            },
            source,
        };
        let mut vectors = match &self.spool_dir {
            Some(dir) => WindowVectors::spooled(dir).map_err(spool_failed)?,
            None => WindowVectors::with_capacity(windows.len()),
        };
        let starts: Vec<usize> = windows.iter().map(|w| w.start).collect();
        for batch in starts.chunks(256) {
            if cancel.is_cancelled() {
                return Err(DiarizeError::Cancelled);
            }
            for embedding in self.embedder.embed_windows(samples, batch)? {
                vectors.push(&embedding).map_err(spool_failed)?;
            }
            progress(0.9 * vectors.len() as f32 / starts.len() as f32);
        }
        let labels = label_windows(&windows, &vectors, &regions, options).map_err(spool_failed)?;
        let mut diarization = turns_from(&windows, &labels, &regions);
        if !options.known.is_empty() {
            self.recognise(samples, &mut diarization, options)?;
        }
        progress(1.0);
        Ok(diarization)
    }

    /// Names the speakers whose voice matches a known one: each known voice names at most
    /// one speaker, the closest pairs first. Several speakers that match the same voice
    /// when the count is estimated are one speaker (split by a change in their voice).
    fn recognise(
        &self,
        samples: &dyn SampleSource,
        diarization: &mut Diarization,
        options: &DiarizeOptions,
    ) -> Result<(), DiarizeError> {
        let mut pairs = Vec::new();
        for (s, speaker) in diarization.speakers.iter().enumerate() {
            let Some(voice) = self.speaker_embedding(samples, &diarization.turns, s)? else {
                continue;
            };
            for (k, known) in options.known.iter().enumerate() {
                let similarity = voice.similarity(&known.embedding);
                tracing::debug!(speaker = %speaker.id, known = %known.name, similarity, "known voice");
                if similarity >= options.params.known_threshold {
                    pairs.push((similarity, s, k));
                }
            }
        }
        pairs.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut named: Vec<Option<usize>> = vec![None; options.known.len()];
        let mut merge_into: Vec<Option<usize>> = vec![None; diarization.speakers.len()];
        for (similarity, s, k) in pairs {
            let speaker = &mut diarization.speakers[s];
            if speaker.name.is_some() || merge_into[s].is_some() {
                continue;
            }
            match named[k] {
                None => {
                    named[k] = Some(s);
                    speaker.name = Some(options.known[k].name.clone());
                    speaker.profile = options.known[k].profile.clone();
                    speaker.similarity = Some(similarity);
                }
                Some(first) if options.count == SpeakerCount::Auto => merge_into[s] = Some(first),
                Some(_) => {}
            }
        }
        if merge_into.iter().any(Option::is_some) {
            for turn in &mut diarization.turns {
                if let Some(into) = merge_into[turn.speaker] {
                    turn.speaker = into;
                }
            }
            let speakers = std::mem::take(&mut diarization.speakers);
            *diarization = renumber(std::mem::take(&mut diarization.turns), &speakers);
        }
        Ok(())
    }

    /// Each speaker's voice as one embedding, comparable with a voice profile's (see
    /// [`Diarizer::speaker_embedding`]).
    pub fn speaker_embeddings(
        &self,
        samples: &dyn SampleSource,
        diarization: &Diarization,
    ) -> Result<Vec<Option<Embedding>>, DiarizeError> {
        (0..diarization.speakers.len())
            .map(|s| self.speaker_embedding(samples, &diarization.turns, s))
            .collect()
    }

    /// One embedding of everything speaker `s` says (up to a minute), made as a voice
    /// profile's is, so the two compare; `None` when they say too little to tell.
    pub fn speaker_embedding(
        &self,
        samples: &dyn SampleSource,
        turns: &[Turn],
        s: usize,
    ) -> Result<Option<Embedding>, DiarizeError> {
        let rate = SAMPLE_RATE as f64;
        let most = 60 * SAMPLE_RATE as usize;
        let mut speech = Vec::new();
        for turn in turns.iter().filter(|t| t.speaker == s) {
            // A minute in all, however long one turn is (a monologue of an hour).
            let start = (turn.start * rate) as usize;
            let end = ((turn.end * rate) as usize).min(start + most - speech.len());
            samples
                .read_into(start..end, &mut speech)
                .map_err(VoiceError::from)?;
            if speech.len() >= most {
                break;
            }
        }
        let audio = Audio {
            samples: speech,
            sample_rate: SAMPLE_RATE,
        };
        match self.embedder.embed(&audio) {
            Ok(e) => Ok(Some(e)),
            Err(VoiceError::TooShort { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

/// Window starts over each region, `step` apart; a region shorter than a window gets one,
/// centred on it.
fn windows_over(regions: &[Range<usize>], step: usize) -> Vec<Window> {
    let mut out = Vec::new();
    for (region, r) in regions.iter().enumerate() {
        if r.len() <= WINDOW_SAMPLES {
            let centre = r.start + r.len() / 2;
            out.push(Window {
                start: centre.saturating_sub(WINDOW_SAMPLES / 2),
                region,
            });
            continue;
        }
        let last = r.end - WINDOW_SAMPLES;
        let mut start = r.start;
        loop {
            out.push(Window { start, region });
            if start >= last {
                break;
            }
            // The last window ends where the region does.
            start = (start + step).min(last);
        }
    }
    out
}

/// Pieces: runs of windows of one region pooled into one normalised vector, with the
/// windows each pools.
fn pieces(
    windows: &[Window],
    vectors: &WindowVectors,
    regions: usize,
    p: &DiarizeParams,
) -> std::io::Result<Vec<(Embedding, Range<usize>)>> {
    let mut rows = vectors.rows();
    let mut by_region: Vec<Range<usize>> = vec![0..0; regions];
    for (i, w) in windows.iter().enumerate() {
        let r = &mut by_region[w.region];
        if r.start == r.end {
            *r = i..i + 1;
        } else {
            r.end = i + 1;
        }
    }
    // Longer recordings pool more windows per piece, keeping clustering's cost bounded.
    let mut size = p.piece_windows.max(1);
    let mut step = p.piece_step.clamp(1, size);
    while windows.len() / step > p.max_pieces {
        size *= 2;
        step *= 2;
    }
    let mut out = Vec::new();
    for r in by_region.into_iter().filter(|r| !r.is_empty()) {
        let mut first = r.start;
        loop {
            let end = (first + size).min(r.end);
            let mean = rows.mean(first..end)?;
            if let Some(mean) = mean {
                out.push((mean, first..end));
            }
            if end >= r.end {
                break;
            }
            first += step;
            // A short tail joins the piece before it instead of standing alone.
            if r.end - first < size / 2 {
                if let Some(last) = out.last_mut() {
                    if let Some(mean) = rows.mean(last.1.start..r.end)? {
                        *last = (mean, last.1.start..r.end);
                    }
                }
                break;
            }
        }
    }
    Ok(out)
}

/// Average-linkage clustering of unit vectors: the clusters (lists of indices), merged while
/// the closest two are at least `threshold` alike, and until at most `target` are left when a
/// target is given (then the threshold does not stop it). At most `max` vectors are compared
/// at once (see [`link_groups`]).
fn cluster(
    vectors: &[&Embedding],
    target: Option<usize>,
    threshold: f32,
    max: usize,
) -> Vec<Vec<usize>> {
    let means: Vec<&[f32]> = vectors.iter().map(|v| v.values()).collect();
    link_groups(
        &means,
        &vec![1.0; vectors.len()],
        target,
        threshold,
        max.max(2),
    )
}

/// Average linkage over groups of vectors, each given by the (unnormalised) mean of its unit
/// vectors and how many it holds: the similarity of two such means is the mean similarity of
/// their members, so linking groups is linking their members, with the groups kept whole.
///
/// Up to `max` groups are linked at once (a matrix of `max²` similarities, and time cubic in
/// it). More, and they are linked `max` at a time, in order, each run to at most half as many
/// (merging past `threshold` only where a run holds that many voices), and then the runs'
/// groups are linked the same way: memory bounded and time linear in the length. Over hours
/// the pieces are not bounded by `DiarizeParams::max_pieces` alone, as every stretch of
/// speech has one: a three-hour conversation's 3,300 made a 44 MB matrix and 18 s of linking.
fn link_groups(
    means: &[&[f32]],
    sizes: &[f32],
    target: Option<usize>,
    threshold: f32,
    max: usize,
) -> Vec<Vec<usize>> {
    let n = means.len();
    if n <= max {
        return link(means, sizes, target, threshold, n);
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for first in (0..n).step_by(max) {
        let end = (first + max).min(n);
        let run = link(
            &means[first..end],
            &sizes[first..end],
            target,
            threshold,
            max / 2,
        );
        groups.extend(
            run.into_iter()
                .map(|members| members.into_iter().map(|m| m + first).collect()),
        );
    }
    let group_sizes: Vec<f32> = groups
        .iter()
        .map(|members| members.iter().map(|&m| sizes[m]).sum())
        .collect();
    // Each group's mean: its members' means, weighted by how many each holds.
    let group_sums: Vec<Vec<f32>> = groups
        .iter()
        .zip(&group_sizes)
        .map(|(members, &total)| {
            let mut mean = vec![0f32; means[members[0]].len()];
            for &m in members {
                for (s, v) in mean.iter_mut().zip(means[m]) {
                    *s += v * sizes[m] / total;
                }
            }
            mean
        })
        .collect();
    let group_means: Vec<&[f32]> = group_sums.iter().map(Vec::as_slice).collect();
    link_groups(&group_means, &group_sizes, target, threshold, max)
        .into_iter()
        .map(|linked| linked.into_iter().flat_map(|g| groups[g].clone()).collect())
        .collect()
}

/// Links the groups `means` (of `sizes` members) by average linkage (see [`cluster`]), and
/// past `threshold` too while more than `at_most` are left.
fn link(
    means: &[&[f32]],
    sizes: &[f32],
    target: Option<usize>,
    threshold: f32,
    at_most: usize,
) -> Vec<Vec<usize>> {
    let n = means.len();
    let mut members: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
    let mut weight = sizes.to_vec();
    let mut alive: Vec<bool> = vec![true; n];
    let mut sim = vec![0f32; n * n];
    for i in 0..n {
        for j in i + 1..n {
            let s = dot(means[i], means[j]);
            sim[i * n + j] = s;
            sim[j * n + i] = s;
        }
    }
    let mut count = n;
    loop {
        if let Some(t) = target {
            if count <= t {
                break;
            }
        }
        let mut best = (f32::NEG_INFINITY, 0, 0);
        for i in (0..n).filter(|&i| alive[i]) {
            for j in (i + 1..n).filter(|&j| alive[j]) {
                if sim[i * n + j] > best.0 {
                    best = (sim[i * n + j], i, j);
                }
            }
        }
        let (s, a, b) = best;
        if b == a || (target.is_none() && s < threshold && count <= at_most) {
            break;
        }
        // Lance–Williams update for average linkage.
        let (na, nb) = (weight[a], weight[b]);
        for k in (0..n).filter(|&k| alive[k] && k != a && k != b) {
            let merged = (na * sim[a * n + k] + nb * sim[b * n + k]) / (na + nb);
            sim[a * n + k] = merged;
            sim[k * n + a] = merged;
        }
        let moved = std::mem::take(&mut members[b]);
        members[a].extend(moved);
        weight[a] += nb;
        alive[b] = false;
        count -= 1;
    }
    members.into_iter().filter(|m| !m.is_empty()).collect()
}

/// The speaker of each window.
fn label_windows(
    windows: &[Window],
    vectors: &WindowVectors,
    regions: &[Range<usize>],
    options: &DiarizeOptions,
) -> std::io::Result<Vec<usize>> {
    let p = &options.params;
    let pieces = pieces(windows, vectors, regions.len(), p)?;
    let target = match options.count {
        SpeakerCount::Auto => None,
        SpeakerCount::Exactly(n) => Some(n),
    };
    let piece_vectors: Vec<&Embedding> = pieces.iter().map(|(e, _)| e).collect();
    // First only pieces surely of one voice are joined: a few seconds of speech are too
    // little to tell two similar voices apart, a speaker's whole speech is not.
    let mut clusters = cluster(&piece_vectors, None, p.same_speaker, p.max_pieces);
    if let Some(n) = target {
        if clusters.len() < n {
            clusters = cluster(&piece_vectors, Some(n), 0.0, p.max_pieces);
        }
    }
    // A first labelling from the clusters: each window takes its piece's speaker.
    let mut labels = vec![0usize; windows.len()];
    for (c, members) in clusters.iter().enumerate() {
        for &piece in members {
            for w in pieces[piece].1.clone() {
                labels[w] = c;
            }
        }
    }
    let step_secs = p.window_step as f64 / SAMPLE_RATE as f64;
    let keep = target.unwrap_or(1);
    // Only an estimated count drops speakers for their short turns: a count given is the
    // person's word.
    let min_turn = target.is_none().then_some(p.min_turn_secs);
    // Then whole speakers are compared: the briefly heard folded into the closest, and the
    // two closest merged while they are alike enough (or until the count given is left).
    let mut first = centroids(vectors, &labels, clusters.len())?;
    let first_heard = heard(windows, &labels, regions, clusters.len(), step_secs);
    fold_small(&mut first, &first_heard, p.min_speaker_secs, min_turn, keep);
    labels = nearest(vectors, &first)?;
    loop {
        let (compacted, speakers) = compact(&labels);
        labels = compacted;
        let whole = centroids_of(vectors, &labels, speakers)?;
        let mut best = (f32::NEG_INFINITY, 0, 0);
        for a in 0..speakers {
            for b in a + 1..speakers {
                let sim = whole[a].similarity(&whole[b]);
                if sim > best.0 {
                    best = (sim, a, b);
                }
            }
        }
        let (sim, a, b) = best;
        let merge = match target {
            Some(n) => speakers > n,
            None => speakers > 1 && sim >= p.same_voice,
        };
        if !merge {
            break;
        }
        for l in &mut labels {
            if *l == b {
                *l = a;
            }
        }
    }
    let (compacted, mut speakers) = compact(&labels);
    labels = compacted;
    // Refine twice: centroids from the labels, then the labels again against them.
    for _ in 0..2 {
        let mut centroids = centroids(vectors, &labels, speakers)?;
        let heard = heard(windows, &labels, regions, speakers, step_secs);
        fold_small(&mut centroids, &heard, p.min_speaker_secs, min_turn, keep);
        labels = viterbi(windows, vectors, &centroids, p.change_penalty)?;
        (labels, speakers) = compact(&labels);
    }
    Ok(labels)
}

/// Every speaker's centroid, for labels with no gaps.
fn centroids_of(
    vectors: &WindowVectors,
    labels: &[usize],
    speakers: usize,
) -> std::io::Result<Vec<Embedding>> {
    Ok(centroids(vectors, labels, speakers)?
        .into_iter()
        .map(|c| c.expect("compact labels leave no speaker without windows"))
        .collect())
}

/// Each window's closest centroid.
fn nearest(
    vectors: &WindowVectors,
    centroids: &[Option<Embedding>],
) -> std::io::Result<Vec<usize>> {
    let mut rows = vectors.rows();
    let mut labels = Vec::with_capacity(vectors.len());
    for w in 0..vectors.len() {
        let mut best: Option<(usize, f32)> = None;
        for (s, c) in centroids.iter().enumerate() {
            let Some(c) = c else { continue };
            let sim = rows.similarity(w, c)?;
            if best.is_none_or(|(_, b)| sim.total_cmp(&b).is_ge()) {
                best = Some((s, sim));
            }
        }
        labels.push(best.map_or(0, |(s, _)| s));
    }
    Ok(labels)
}

/// Each speaker's centroid (normalised mean of their windows); `None` for one with none.
fn centroids(
    vectors: &WindowVectors,
    labels: &[usize],
    speakers: usize,
) -> std::io::Result<Vec<Option<Embedding>>> {
    vectors.rows().means_by(labels, speakers)
}

/// How much of a speaker there is to go on.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Heard {
    /// Seconds of speech (windows × their step).
    secs: f64,
    /// The longest turn heard: a run of the speaker's windows with no other speaker's between
    /// them and no pause longer than [`TURN_GAP_SECS`], from its first window's start to its
    /// last one's end (each inside its stretch of speech).
    longest_secs: f64,
}

/// A pause this long or shorter keeps one speaker's turn going (between a turn's sentences,
/// after a comma).
const TURN_GAP_SECS: f64 = 1.0;

/// What each of `speakers` was heard saying, from the windows' labels.
fn heard(
    windows: &[Window],
    labels: &[usize],
    regions: &[Range<usize>],
    speakers: usize,
    step_secs: f64,
) -> Vec<Heard> {
    let rate = SAMPLE_RATE as f64;
    let start_of = |w: &Window| w.start.max(regions[w.region].start);
    let end_of = |w: &Window| (w.start + WINDOW_SAMPLES).min(regions[w.region].end);
    let mut heard = vec![Heard::default(); speakers];
    let mut first = 0;
    while first < windows.len() {
        let speaker = labels[first];
        let mut last = first;
        while last + 1 < windows.len()
            && labels[last + 1] == speaker
            && (windows[last + 1].region == windows[last].region
                || start_of(&windows[last + 1]).saturating_sub(end_of(&windows[last])) as f64
                    <= TURN_GAP_SECS * rate)
        {
            last += 1;
        }
        let length = end_of(&windows[last]).saturating_sub(start_of(&windows[first]));
        let h = &mut heard[speaker];
        h.secs += (last + 1 - first) as f64 * step_secs;
        h.longest_secs = h.longest_secs.max(length as f64 / rate);
        first = last + 1;
    }
    heard
}

/// A speaker with at most this share of all the speech heard is a minor one, which the turn
/// rule of [`fold_small`] may fold.
const MINOR_SHARE: f64 = 0.05;

/// Drops the centroids of speakers there is too little of to tell them from the others
/// (their windows then go to the closest remaining speaker), the least heard first, keeping
/// at least `keep`: those heard for less than `min_secs`, and, when `min_turn_secs` is given,
/// minor ones (at most [`MINOR_SHARE`] of the speech) never heard for that long in one turn.
///
/// The second rule is what holds the count over hours. Short fragments — a "yeah", the end
/// of a question, a word cut off by the next speaker — are embedded from a second or two of
/// speech and sound alike whoever says them, so over an hour they gather into speakers of
/// their own (seconds to minutes of them, from several voices), each a little too far from
/// every real voice to merge. A person who speaks at all says a sentence in one turn.
fn fold_small(
    centroids: &mut [Option<Embedding>],
    heard: &[Heard],
    min_secs: f64,
    min_turn_secs: Option<f64>,
    keep: usize,
) {
    let all: f64 = heard.iter().map(|h| h.secs).sum();
    let mut order: Vec<usize> = (0..centroids.len()).collect();
    order.sort_by(|&a, &b| heard[a].secs.total_cmp(&heard[b].secs));
    let mut left = centroids.iter().filter(|c| c.is_some()).count();
    for s in order {
        let h = heard[s];
        let fragments =
            min_turn_secs.is_some_and(|min| h.longest_secs < min && h.secs <= MINOR_SHARE * all);
        if left > keep.max(1) && (h.secs < min_secs || fragments) && centroids[s].is_some() {
            tracing::debug!(speaker = s, heard = ?h, "too little heard to be a speaker");
            centroids[s] = None;
            left -= 1;
        }
    }
}

/// The best labelling of each region's windows against the centroids: similarity to the
/// speaker, less `penalty` for each change of speaker inside a region.
fn viterbi(
    windows: &[Window],
    vectors: &WindowVectors,
    centroids: &[Option<Embedding>],
    penalty: f32,
) -> std::io::Result<Vec<usize>> {
    let k = centroids.len();
    let mut rows = vectors.rows();
    let mut scores = |w: usize| -> std::io::Result<Vec<f32>> {
        let row = rows.row(w)?;
        Ok(centroids
            .iter()
            .map(|c| {
                c.as_ref()
                    .map_or(f32::NEG_INFINITY, |c| dot(&row, c.values()))
            })
            .collect())
    };
    let mut labels = vec![0usize; windows.len()];
    let mut first = 0;
    while first < windows.len() {
        let region = windows[first].region;
        let end = first
            + windows[first..]
                .iter()
                .take_while(|w| w.region == region)
                .count();
        let mut total: Vec<f32> = scores(first)?;
        let mut back: Vec<Vec<usize>> = Vec::with_capacity(end - first);
        back.push((0..k).collect());
        for w in first + 1..end {
            let score = scores(w)?;
            let mut next = vec![f32::NEG_INFINITY; k];
            let mut from = vec![0usize; k];
            for s in 0..k {
                for (prev, &t) in total.iter().enumerate() {
                    let v = t - if prev == s { 0.0 } else { penalty };
                    if v > next[s] {
                        next[s] = v;
                        from[s] = prev;
                    }
                }
                next[s] += score[s];
            }
            total = next;
            back.push(from);
        }
        let mut s = (0..k)
            .max_by(|&a, &b| total[a].total_cmp(&total[b]))
            .unwrap_or(0);
        for w in (first..end).rev() {
            labels[w] = s;
            s = back[w - first][s];
        }
        first = end;
    }
    Ok(labels)
}

/// Labels renumbered 0.. with no gaps, and how many there are.
fn compact(labels: &[usize]) -> (Vec<usize>, usize) {
    let mut map = std::collections::HashMap::new();
    let out = labels
        .iter()
        .map(|&l| {
            let next = map.len();
            *map.entry(l).or_insert(next)
        })
        .collect();
    (out, map.len())
}

/// Turns from labelled windows: each stretch of speech is cut between two windows of
/// different speakers, halfway between where each window's middle falls.
fn turns_from(windows: &[Window], labels: &[usize], regions: &[Range<usize>]) -> Diarization {
    let rate = SAMPLE_RATE as f64;
    let mut turns: Vec<Turn> = Vec::new();
    let mut i = 0;
    while i < windows.len() {
        let region = &regions[windows[i].region];
        let mut start = region.start;
        let end_of_region = i + windows[i..]
            .iter()
            .take_while(|w| w.region == windows[i].region)
            .count();
        let mut j = i;
        while j < end_of_region {
            let speaker = labels[j];
            let mut k = j;
            while k + 1 < end_of_region && labels[k + 1] == speaker {
                k += 1;
            }
            let end = if k + 1 < end_of_region {
                // Between the middles of the last window of this speaker and the next one.
                let middle = |w: &Window| w.start + WINDOW_SAMPLES / 2;
                ((middle(&windows[k]) + middle(&windows[k + 1])) / 2).clamp(start, region.end)
            } else {
                region.end
            };
            if end > start {
                turns.push(Turn {
                    start: start as f64 / rate,
                    end: end as f64 / rate,
                    speaker,
                });
            }
            start = end;
            j = k + 1;
        }
        i = end_of_region;
    }
    let speakers = labels.iter().copied().max().map_or(0, |m| m + 1);
    let unnamed: Vec<Speaker> = (0..speakers).map(Speaker::numbered).collect();
    renumber(turns, &unnamed)
}

/// Speakers renumbered in order of first speech (`S1`, `S2`, …), each keeping what it was
/// named, adjacent turns of one speaker joined, and each speaker's seconds counted.
fn renumber(turns: Vec<Turn>, speakers: &[Speaker]) -> Diarization {
    let mut order: Vec<usize> = Vec::new();
    for t in &turns {
        if !order.contains(&t.speaker) {
            order.push(t.speaker);
        }
    }
    let mut out: Vec<Speaker> = order
        .iter()
        .enumerate()
        .map(|(n, &old)| Speaker {
            id: format!("S{}", n + 1),
            seconds: 0.0,
            ..speakers[old].clone()
        })
        .collect();
    let mut joined: Vec<Turn> = Vec::new();
    for mut t in turns {
        t.speaker = order.iter().position(|&o| o == t.speaker).unwrap_or(0);
        out[t.speaker].seconds += t.end - t.start;
        match joined.last_mut() {
            Some(last) if last.speaker == t.speaker && (t.start - last.end).abs() < 1e-9 => {
                last.end = t.end;
            }
            _ => joined.push(t),
        }
    }
    for s in &mut out {
        s.seconds = (s.seconds * 1000.0).round() / 1000.0;
    }
    Diarization {
        turns: joined,
        speakers: out,
    }
}

/// Whether `turns` are in order, each ending before the next starts, as the diarizer makes
/// them: then [`speaker_over`] looks at the few turns about a word, found by halving, where
/// scanning every turn for every word made an hour's attribution grow with its square.
fn in_order(turns: &[Turn]) -> bool {
    turns
        .windows(2)
        .all(|pair| pair[0].start <= pair[0].end && pair[0].end <= pair[1].start)
}

/// The speaker heard most over `start..end`: the one whose turns overlap it most, else the
/// one whose turn is nearest. `ordered`: the turns are [`in_order`].
fn speaker_over(turns: &[Turn], ordered: bool, start: f64, end: f64) -> Option<usize> {
    // The turns that may overlap, and those that may be nearest (before, about and after
    // the middle): all of them unless in order.
    let middle = (start + end) / 2.0;
    let (overlapping, near) = if ordered {
        let first = turns.partition_point(|t| t.end <= start);
        let last = first + turns[first..].partition_point(|t| t.start < end);
        let at = turns.partition_point(|t| t.end <= middle);
        (
            &turns[first..last.max(first)],
            &turns[at.saturating_sub(1)..(at + 2).min(turns.len())],
        )
    } else {
        (turns, turns)
    };
    let mut overlap: Vec<(usize, f64)> = Vec::new();
    for t in overlapping {
        let o = end.min(t.end) - start.max(t.start);
        if o > 0.0 {
            match overlap.iter_mut().find(|(s, _)| *s == t.speaker) {
                Some(entry) => entry.1 += o,
                None => overlap.push((t.speaker, o)),
            }
        }
    }
    if let Some(&(s, _)) = overlap.iter().max_by(|a, b| a.1.total_cmp(&b.1)) {
        return Some(s);
    }
    near.iter()
        .min_by(|a, b| {
            let d = |t: &Turn| (t.start - middle).abs().min((t.end - middle).abs());
            d(a).total_cmp(&d(b))
        })
        .map(|t| t.speaker)
}

/// Gives each word of `transcript` the speaker heard over it, splits segments where the
/// speaker changes between two words, and gives each segment its speaker; the transcript
/// then lists the speakers, with their seconds of speech.
pub fn attribute(transcript: &mut Transcript, diarization: &Diarization) {
    let id = |s: usize| diarization.speakers[s].id.clone();
    let turns = &diarization.turns;
    let ordered = in_order(turns);
    let mut segments = Vec::with_capacity(transcript.segments.len());
    for mut segment in std::mem::take(&mut transcript.segments) {
        if segment.words.is_empty() {
            segment.speaker = speaker_over(turns, ordered, segment.start, segment.end).map(id);
            segments.push(segment);
            continue;
        }
        for w in &mut segment.words {
            w.speaker = speaker_over(turns, ordered, w.start, w.end).map(id);
        }
        segments.extend(split_at_speaker_changes(segment));
    }
    transcript.segments = segments;
    transcript.speakers = diarization.speakers.clone();
}

/// A segment whose words all have one speaker, or one segment per run of words of one
/// speaker: each run's segment spans its words (the first keeps the segment's start, the
/// last its end), with the words' text.
fn split_at_speaker_changes(mut segment: Segment) -> Vec<Segment> {
    let mut runs: Vec<Range<usize>> = Vec::new();
    for (i, w) in segment.words.iter().enumerate() {
        match runs.last_mut() {
            Some(r) if segment.words[r.start].speaker == w.speaker => r.end = i + 1,
            _ => runs.push(i..i + 1),
        }
    }
    if runs.len() <= 1 {
        segment.speaker = segment.words.first().and_then(|w| w.speaker.clone());
        return vec![segment];
    }
    let separator = segment.word_separator();
    let last = runs.len() - 1;
    runs.into_iter()
        .enumerate()
        .map(|(n, r)| {
            let words = segment.words[r].to_vec();
            let start = if n == 0 {
                segment.start.min(words[0].start)
            } else {
                words[0].start
            };
            let end = if n == last {
                segment.end.max(words[words.len() - 1].end)
            } else {
                words[words.len() - 1].end
            };
            Segment {
                start,
                end,
                text: words
                    .iter()
                    .map(|w| w.text.as_str())
                    .collect::<Vec<_>>()
                    .join(separator),
                speaker: words[0].speaker.clone(),
                words,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asr::Word;

    fn unit(values: &[f32]) -> Embedding {
        let mut v = vec![0f32; crate::voice::embedder::EMBEDDING_DIM];
        v[..values.len()].copy_from_slice(values);
        Embedding::new(v).unwrap()
    }

    #[test]
    fn speaker_counts_parse_auto_and_bounded_numbers() {
        assert_eq!("auto".parse::<SpeakerCount>(), Ok(SpeakerCount::Auto));
        assert_eq!("3".parse::<SpeakerCount>(), Ok(SpeakerCount::Exactly(3)));
        assert!("0".parse::<SpeakerCount>().is_err());
        assert!("11".parse::<SpeakerCount>().is_err());
        assert!("two".parse::<SpeakerCount>().unwrap_err().contains("auto"));
    }

    /// A recording laid out as stretches of speech, each `(seconds, voice)` with a second of
    /// silence after it, and each window's embedding its voice's direction (a little varied
    /// window to window): the windows and their labels as the diarizer finds them.
    fn speakers_found(stretches: &[(f64, &dyn Fn(usize) -> Embedding)]) -> usize {
        let rate = SAMPLE_RATE as f64;
        let mut regions = Vec::new();
        let mut at = 0usize;
        for (secs, _) in stretches {
            let len = (secs * rate) as usize;
            regions.push(at..at + len);
            at += len + SAMPLE_RATE as usize;
        }
        let params = DiarizeParams::default();
        let windows = windows_over(&regions, params.window_step);
        let vectors: WindowVectors = windows
            .iter()
            .enumerate()
            .map(|(i, w)| (stretches[w.region].1)(i))
            .collect();
        let labels =
            label_windows(&windows, &vectors, &regions, &DiarizeOptions::default()).unwrap();
        compact(&labels).1
    }

    /// Voice `v` (0, 1, 2…): its own direction, varied a little by the window `i`.
    fn voice(v: usize, i: usize) -> Embedding {
        let mut values = [0f32; 16];
        values[v] = 1.0;
        values[8 + i % 7] = 0.15;
        unit(&values)
    }

    /// Fragments: a second of speech or less each, from any voice, embedded alike whoever
    /// says them (the direction 7), scattered over the recording.
    fn fragment(i: usize) -> Embedding {
        let mut values = [0f32; 16];
        values[7] = 1.0;
        values[i % 3] = 0.45;
        values[8 + i % 7] = 0.15;
        unit(&values)
    }

    #[test]
    fn fragments_of_several_voices_gathered_over_hours_are_no_speaker_but_a_brief_voice_is() {
        let a = |i| voice(0, i);
        let b = |i| voice(1, i);
        let c = |i| voice(2, i);
        let d = |i| voice(3, i);
        let frag = |i| fragment(i);
        let mut conversation: Vec<(f64, &dyn Fn(usize) -> Embedding)> = Vec::new();
        for turn in 0..40 {
            conversation.push((6.0, [&a as &dyn Fn(usize) -> Embedding, &b, &c][turn % 3]));
            // Fragments: eight seconds of windows in all (4% of the speech), far more than the
            // least a speaker is heard for, never a sentence in one turn.
            conversation.push((0.7, &frag));
        }
        assert_eq!(
            speakers_found(&conversation),
            3,
            "the fragments are no fourth speaker"
        );
        // A fourth voice heard for two sentences is a speaker, however briefly.
        conversation.insert(10, (3.5, &d));
        conversation.insert(30, (3.0, &d));
        assert_eq!(
            speakers_found(&conversation),
            4,
            "a brief voice is a speaker"
        );
    }

    #[test]
    fn clustering_stops_at_the_threshold_or_the_count_given() {
        let a1 = unit(&[1.0, 0.1, 0.0]);
        let a2 = unit(&[1.0, 0.0, 0.1]);
        let b1 = unit(&[0.0, 1.0, 0.1]);
        let b2 = unit(&[0.1, 1.0, 0.0]);
        let c = unit(&[0.0, 0.0, 1.0]);
        let all = [&a1, &b1, &a2, &c, &b2];
        let mut found = cluster(&all, None, 0.8, 100);
        found.iter_mut().for_each(|m| m.sort());
        found.sort();
        assert_eq!(found, vec![vec![0, 2], vec![1, 4], vec![3]]);
        assert_eq!(cluster(&all, Some(2), 0.99, 100).len(), 2);
        assert_eq!(cluster(&all, Some(5), 0.0, 100).len(), 5);
    }

    #[test]
    fn many_pieces_are_linked_a_bounded_run_at_a_time_into_the_same_speakers() {
        // Hours of turns: four voices taking turns of a few pieces each, and a fifth that
        // speaks only in the last part (its pieces in the last runs alone).
        let mut pieces = Vec::new();
        let mut truth = Vec::new();
        for turn in 0..300 {
            let v = if turn >= 240 && turn % 5 == 0 {
                4
            } else {
                turn % 4
            };
            for k in 0..3 {
                pieces.push(voice(v, turn * 3 + k));
                truth.push(v);
            }
        }
        let refs: Vec<&Embedding> = pieces.iter().collect();
        let sorted = |mut clusters: Vec<Vec<usize>>| {
            clusters.iter_mut().for_each(|m| m.sort());
            clusters.sort();
            clusters
        };
        let whole = sorted(cluster(&refs, None, 0.7, refs.len()));
        assert_eq!(whole.len(), 5, "the five voices, compared all at once");
        for members in &whole {
            assert!(members.iter().all(|&m| truth[m] == truth[members[0]]));
        }
        // At most 64 at once (900 pieces: runs of 64, then their groups): the same speakers.
        assert_eq!(sorted(cluster(&refs, None, 0.7, 64)), whole);
        // And with the count given.
        assert_eq!(cluster(&refs, Some(5), 0.0, 64).len(), 5);
        // Pieces no two of which are alike are still bounded: linked past the threshold a run
        // at a time rather than compared all at once.
        let apart: Vec<Embedding> = (0..200)
            .map(|i| {
                let mut values = vec![0f32; crate::voice::embedder::EMBEDDING_DIM];
                values[i] = 1.0;
                Embedding::new(values).unwrap()
            })
            .collect();
        let apart: Vec<&Embedding> = apart.iter().collect();
        assert_eq!(cluster(&apart, None, 0.7, 400).len(), 200);
        let bounded = cluster(&apart, None, 0.7, 16);
        assert!(bounded.len() <= 16, "{} groups", bounded.len());
        assert_eq!(bounded.iter().map(Vec::len).sum::<usize>(), 200);
    }

    #[test]
    fn viterbi_ignores_a_single_odd_window_but_follows_a_real_change() {
        let a = unit(&[1.0, 0.0]);
        let b = unit(&[0.0, 1.0]);
        let noisy = unit(&[0.6, 0.8]);
        let windows: Vec<Window> = (0..9)
            .map(|i| Window {
                start: i,
                region: 0,
            })
            .collect();
        let vectors: WindowVectors = [
            a.clone(),
            a.clone(),
            noisy,
            a.clone(),
            a.clone(),
            b.clone(),
            b.clone(),
            b.clone(),
            b.clone(),
        ]
        .into_iter()
        .collect();
        let labels = viterbi(&windows, &vectors, &[Some(a), Some(b)], 0.35).unwrap();
        assert_eq!(labels, vec![0, 0, 0, 0, 0, 1, 1, 1, 1]);
    }

    fn word(text: &str, start: f64, end: f64) -> Word {
        Word {
            start,
            end,
            text: text.into(),
            probability: 0.9,
            speaker: None,
        }
    }

    #[test]
    fn a_words_speaker_found_about_it_is_the_one_every_turn_scanned_finds() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        // Turns in order with gaps (none, short, long) between them, as the diarizer makes.
        let mut turns = Vec::new();
        let mut at = 0.0;
        for _ in 0..400 {
            at += [0.0, 0.3, 2.0][next(3) as usize];
            let length = 0.2 + next(60) as f64 / 10.0;
            turns.push(Turn {
                start: at,
                end: at + length,
                speaker: next(4) as usize,
            });
            at += length;
        }
        assert!(in_order(&turns));
        // Words anywhere: inside turns, across their edges, in gaps, past either end, and of
        // no length at all.
        for _ in 0..5_000 {
            let start = next((at as u64 + 10) * 10) as f64 / 10.0 - 5.0;
            let end = start + [0.0, 0.1, 0.4, 3.0][next(4) as usize];
            assert_eq!(
                speaker_over(&turns, true, start, end),
                speaker_over(&turns, false, start, end),
                "a word at {start}..{end}"
            );
        }
        assert_eq!(speaker_over(&[], true, 1.0, 2.0), None);
        let swapped = [turns[1].clone(), turns[0].clone()];
        assert!(!in_order(&swapped), "turns out of order are scanned whole");
    }

    #[test]
    fn words_take_the_speaker_heard_over_them_and_segments_split_where_it_changes() {
        let diarization = renumber(
            vec![
                Turn {
                    start: 0.0,
                    end: 2.0,
                    speaker: 1,
                },
                Turn {
                    start: 2.2,
                    end: 3.0,
                    speaker: 0,
                },
                Turn {
                    start: 3.0,
                    end: 5.0,
                    speaker: 1,
                },
            ],
            &[Speaker::numbered(0), Speaker::numbered(1)],
        );
        // Renumbered in order of first speech.
        assert_eq!(diarization.turns[0].speaker, 0);
        assert_eq!(diarization.speakers[0].seconds, 4.0);
        let mut transcript = Transcript {
            language: Some("en".into()),
            duration: 5.0,
            speakers: Vec::new(),
            segments: vec![Segment {
                start: 0.0,
                end: 4.9,
                text: " Are you coming? Yes. Good.".into(),
                words: vec![
                    word("Are", 0.1, 0.4),
                    word("you", 0.4, 0.7),
                    word("coming?", 0.7, 1.9),
                    // Starts in the pause, mostly inside the other speaker's turn.
                    word("Yes.", 2.05, 2.6),
                    word("Good.", 3.4, 4.0),
                ],
                speaker: None,
            }],
        };
        attribute(&mut transcript, &diarization);
        let got: Vec<(f64, f64, &str, Option<&str>)> = transcript
            .segments
            .iter()
            .map(|s| (s.start, s.end, s.text.as_str(), s.speaker.as_deref()))
            .collect();
        assert_eq!(
            got,
            vec![
                (0.0, 1.9, "Are you coming?", Some("S1")),
                (2.05, 2.6, "Yes.", Some("S2")),
                (3.4, 4.9, "Good.", Some("S1")),
            ]
        );
        assert!(transcript.segments[1]
            .words
            .iter()
            .all(|w| w.speaker.as_deref() == Some("S2")));
        assert_eq!(transcript.speakers.len(), 2);
        assert_eq!(transcript.speaker_name("S2").as_deref(), Some("Speaker 2"));
    }

    #[test]
    fn windows_cover_each_region_to_its_end_and_a_short_region_gets_one_centred() {
        let long = 0..WINDOW_SAMPLES + 5000;
        let short = 100_000..100_000 + WINDOW_SAMPLES / 2;
        let w = windows_over(&[long.clone(), short.clone()], 3200);
        let in_long: Vec<&Window> = w.iter().filter(|w| w.region == 0).collect();
        assert_eq!(in_long[0].start, 0);
        assert_eq!(in_long.last().unwrap().start + WINDOW_SAMPLES, long.end);
        let in_short: Vec<&Window> = w.iter().filter(|w| w.region == 1).collect();
        assert_eq!(in_short.len(), 1);
        let centre = in_short[0].start + WINDOW_SAMPLES / 2;
        assert!(centre.abs_diff(short.start + short.len() / 2) <= 1);
    }
}
