//! The approximate voice match: a search of an embedded voice's settings for the one whose
//! speech the embedder finds closest to a profile, while a transcriber still understands it.
//!
//! Kokoro: every shipped style and mixtures of the best ones, then a (1+λ) evolution strategy
//! over a 256-number offset added to the best mixture, mutations scaled per number by how much
//! the shipped styles differ there, the step size adapted by the one-fifth success rule. A
//! candidate replaces the best only when it scores higher and its take's word error rate stays
//! within the bound. The search speaks [`SEARCH_SENTENCES`]; the result is scored again on
//! [`HELD_OUT_SENTENCES`], which it never heard, so a style that fools the embedder on one
//! sentence is seen for what it is.
//!
//! The search maximises its judge's embedder; that same embedder's score flatters what it
//! found. So the outcome's scores also carry an independent judge's
//! ([`Judge::independent_similarity`]: a second embedder, Resemblyzer's, which the search
//! never consults), to show whether the gain holds for a judge it could not tune against.
//!
//! espeak-ng: a grid of voice variants and pitches, scored the same way; cheap and coarse.

use super::{Embedding, VoiceError};
use crate::audio::Audio;
use crate::tts::{Kokoro, Style, STYLE_DIM};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// What the search speaks while it searches.
pub const SEARCH_SENTENCES: &[&str] =
    &["The old lighthouse keeper walked along the harbour every evening before dinner."];
/// What the result is judged on: sentences the search never used.
pub const HELD_OUT_SENTENCES: &[&str] = &[
    "Please bring the blue folder to the meeting on Thursday morning.",
    "A warm wind carried the smell of rain across the empty fields.",
];

/// An embedded voice whose style can be searched.
pub trait StyleVoice {
    /// The shipped styles' names.
    fn shipped_styles(&self) -> Vec<String>;
    /// How much the shipped styles differ in each of the style's numbers (their standard
    /// deviation), the scale of the search's mutations.
    fn style_spread(&self) -> Vec<f32>;
    fn speak(&self, text: &str, style: &Style) -> Result<Audio, VoiceError>;
}

/// How a take is judged: similarity to the target and intelligibility.
pub trait Judge {
    /// The take's speaker embedding.
    fn embed(&self, take: &Audio) -> Result<Embedding, VoiceError>;
    /// The word error rate of the take against the text it was meant to say.
    fn word_error_rate(&self, take: &Audio, text: &str) -> Result<f64, VoiceError>;
    /// The takes' similarity to the target by a second embedder the search never uses (their
    /// mean embedding's cosine to the target's), `None` where there is none. Only the
    /// outcome's scores ask for it, never the search.
    fn independent_similarity(&self, _takes: &[Audio]) -> Option<f32> {
        None
    }
}

/// How long and how carefully to search.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct MatchSettings {
    /// Candidate takes the evolution strategy may make (after the shipped styles and mixtures).
    pub budget: usize,
    /// Offspring per generation (λ).
    pub offspring: usize,
    /// The highest word error rate a take may have and still count.
    pub max_word_error_rate: f64,
    /// The first step size, in units of the shipped styles' spread.
    pub step: f32,
    pub seed: u64,
}

impl Default for MatchSettings {
    fn default() -> Self {
        MatchSettings {
            budget: 160,
            offspring: 4,
            max_word_error_rate: 0.2,
            step: 0.5,
            seed: 7,
        }
    }
}

/// A style's similarity to the target and its intelligibility.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Score {
    /// Cosine similarity by the search's own embedder (the one it maximised).
    pub similarity: f32,
    pub word_error_rate: f64,
    /// Cosine similarity by the independent embedder (Resemblyzer), which the search never
    /// used; `None` when it is not installed (or for scores kept from before it existed).
    #[serde(default)]
    pub similarity_independent: Option<f32>,
}

/// Where the search is, for progress.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct MatchProgress {
    /// `shipped`, `search` or `held_out`.
    pub stage: String,
    pub evaluations: usize,
    /// Every evaluation the match will make, the held-out scoring included.
    pub total: usize,
    pub best_similarity: f32,
}

/// What a match found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct MatchOutcome {
    pub style: Style,
    /// The found style on the search sentences.
    pub search: Score,
    /// The found style on the held-out sentences.
    pub held_out: Score,
    /// The shipped style closest to the target, and its held-out score.
    pub best_shipped: String,
    pub best_shipped_held_out: Score,
    /// Takes made and judged, held-out ones included.
    pub evaluations: usize,
    pub seconds: f64,
}

struct Search<'a> {
    voice: &'a dyn StyleVoice,
    judge: &'a dyn Judge,
    target: &'a Embedding,
    progress: &'a dyn Fn(MatchProgress),
    cancel: &'a CancellationToken,
    evaluations: usize,
    total: usize,
    best_similarity: f32,
}

impl Search<'_> {
    fn report(&self, stage: &str) {
        (self.progress)(MatchProgress {
            stage: stage.into(),
            evaluations: self.evaluations,
            total: self.total,
            best_similarity: self.best_similarity,
        });
    }

    /// Similarity of `style` speaking `sentences`, and the takes (for a later WER check).
    fn similarity(
        &mut self,
        style: &Style,
        sentences: &[&str],
    ) -> Result<(f32, Vec<Audio>), VoiceError> {
        headroom_base::cpu::give_way();
        if self.cancel.is_cancelled() {
            return Err(VoiceError::Cancelled);
        }
        let mut takes = Vec::new();
        let mut embeddings = Vec::new();
        for sentence in sentences {
            let take = self.voice.speak(sentence, style)?;
            embeddings.push(self.judge.embed(&take)?);
            takes.push(take);
        }
        self.evaluations += 1;
        let mean = Embedding::mean(&embeddings)
            .ok_or_else(|| VoiceError::Search("no embedding for the takes".into()))?;
        Ok((mean.similarity(self.target), takes))
    }

    fn word_error_rate(&self, takes: &[Audio], sentences: &[&str]) -> Result<f64, VoiceError> {
        let mut total = 0.0;
        for (take, sentence) in takes.iter().zip(sentences) {
            total += self.judge.word_error_rate(take, sentence)?;
        }
        Ok(total / sentences.len().max(1) as f64)
    }

    fn score(&mut self, style: &Style, sentences: &[&str]) -> Result<Score, VoiceError> {
        let (similarity, takes) = self.similarity(style, sentences)?;
        Ok(Score {
            similarity,
            word_error_rate: self.word_error_rate(&takes, sentences)?,
            similarity_independent: self.judge.independent_similarity(&takes),
        })
    }
}

/// Searches `voice`'s styles for the one closest to `target`. `progress` hears of every
/// evaluation; `cancel` stops the search between takes.
pub fn match_style(
    voice: &dyn StyleVoice,
    judge: &dyn Judge,
    target: &Embedding,
    settings: &MatchSettings,
    progress: &dyn Fn(MatchProgress),
    cancel: &CancellationToken,
) -> Result<MatchOutcome, VoiceError> {
    let started = Instant::now();
    let shipped = voice.shipped_styles();
    let mixtures = shipped.len().min(3).saturating_sub(1);
    let mut search = Search {
        voice,
        judge,
        target,
        progress,
        cancel,
        evaluations: 0,
        total: shipped.len() + mixtures + settings.budget + 2,
        best_similarity: f32::NEG_INFINITY,
    };
    let sentences = SEARCH_SENTENCES;

    // 1. The shipped styles, then mixtures of the best two and three.
    let mut ranked = Vec::new();
    for name in &shipped {
        let style = Style::shipped(name);
        let (similarity, takes) = search.similarity(&style, sentences)?;
        search.best_similarity = search.best_similarity.max(similarity);
        search.report("shipped");
        ranked.push((similarity, name.clone(), style, takes));
    }
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
    let best_shipped = ranked
        .first()
        .map(|r| r.1.clone())
        .ok_or_else(|| VoiceError::Search("the voice has no styles".into()))?;
    for k in 2..=mixtures + 1 {
        let weight = 1.0 / k as f32;
        let style = Style {
            mix: ranked[..k].iter().map(|r| (r.1.clone(), weight)).collect(),
            offset: Vec::new(),
        };
        let (similarity, takes) = search.similarity(&style, sentences)?;
        search.best_similarity = search.best_similarity.max(similarity);
        search.report("shipped");
        ranked.push((similarity, format!("mix of {k}"), style, takes));
    }
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
    // The best intelligible start.
    let mut start = None;
    let mut best_rate = f64::INFINITY;
    for (similarity, _, style, takes) in &ranked {
        let rate = search.word_error_rate(takes, sentences)?;
        best_rate = best_rate.min(rate);
        if rate <= settings.max_word_error_rate {
            start = Some((
                style.clone(),
                Score {
                    similarity: *similarity,
                    word_error_rate: rate,
                    similarity_independent: None,
                },
                takes.clone(),
            ));
            break;
        }
    }
    let (mut best, mut best_score, mut best_takes) = start.ok_or(VoiceError::Unintelligible {
        bound: settings.max_word_error_rate,
        best: best_rate,
    })?;
    search.best_similarity = best_score.similarity;

    // 2. (1+λ) evolution strategy over the offset.
    let spread = voice.style_spread();
    let mut rng = StdRng::seed_from_u64(settings.seed);
    let mut step = settings.step;
    let mut offset = if best.offset.is_empty() {
        vec![0f32; STYLE_DIM]
    } else {
        best.offset.clone()
    };
    let mut made = 0;
    while made < settings.budget {
        let mut generation_best: Option<(f32, Style, Vec<Audio>, Vec<f32>)> = None;
        for _ in 0..settings.offspring.max(1).min(settings.budget - made) {
            let child: Vec<f32> = offset
                .iter()
                .zip(&spread)
                .map(|(o, s)| o + step * s * gaussian(&mut rng))
                .collect();
            let style = Style {
                mix: best.mix.clone(),
                offset: child.clone(),
            };
            let (similarity, takes) = search.similarity(&style, sentences)?;
            made += 1;
            search.report("search");
            if generation_best
                .as_ref()
                .is_none_or(|(s, ..)| similarity > *s)
            {
                generation_best = Some((similarity, style, takes, child));
            }
        }
        let mut improved = false;
        if let Some((similarity, style, takes, child)) = generation_best {
            if similarity > best_score.similarity {
                let rate = search.word_error_rate(&takes, sentences)?;
                if rate <= settings.max_word_error_rate {
                    best = style;
                    offset = child;
                    best_takes = takes;
                    best_score = Score {
                        similarity,
                        word_error_rate: rate,
                        similarity_independent: None,
                    };
                    search.best_similarity = similarity;
                    improved = true;
                }
            }
        }
        // One-fifth rule for a (1+λ) strategy: grow on success, shrink slowly on failure.
        step *= if improved { 1.5 } else { 1.5f32.powf(-0.25) };
    }

    // The search is over: only now may the independent judge look at what it found.
    best_score.similarity_independent = judge.independent_similarity(&best_takes);

    // 3. Held out: the found style and the best shipped one on sentences the search never used.
    let held_out = search.score(&best, HELD_OUT_SENTENCES)?;
    search.report("held_out");
    let best_shipped_held_out = search.score(&Style::shipped(&best_shipped), HELD_OUT_SENTENCES)?;
    search.report("held_out");
    Ok(MatchOutcome {
        style: best,
        search: best_score,
        held_out,
        best_shipped,
        best_shipped_held_out,
        evaluations: search.evaluations,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The style table row whose spread scales a search's mutations: a sentence's length.
const TYPICAL_TOKENS: usize = 80;

impl StyleVoice for Kokoro {
    fn shipped_styles(&self) -> Vec<String> {
        self.style_names()
    }

    fn style_spread(&self) -> Vec<f32> {
        spread_of(&self.shipped_rows(TYPICAL_TOKENS))
    }

    fn speak(&self, text: &str, style: &Style) -> Result<Audio, VoiceError> {
        Ok(Kokoro::speak(
            self,
            text,
            style,
            1.0,
            &CancellationToken::new(),
        )?)
    }
}

/// A standard normal number (Box–Muller).
fn gaussian(rng: &mut StdRng) -> f32 {
    let u1: f64 = rng.random::<f64>().max(1e-12);
    let u2: f64 = rng.random::<f64>();
    ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
}

/// The standard deviation of each number across `tables` (each STYLE_DIM long).
pub fn spread_of(tables: &[Vec<f32>]) -> Vec<f32> {
    let n = tables.len().max(1) as f32;
    (0..STYLE_DIM)
        .map(|i| {
            let mean = tables.iter().map(|t| t[i]).sum::<f32>() / n;
            (tables.iter().map(|t| (t[i] - mean).powi(2)).sum::<f32>() / n).sqrt()
        })
        .collect()
}

/// An espeak-ng setting a grid search tries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct EspeakSetting {
    /// A voice with a variant, e.g. `en-us+m3`.
    pub voice: String,
    pub pitch: u32,
}

/// espeak-ng's English voice variants the grid tries.
pub const ESPEAK_VARIANTS: &[&str] = &[
    "m1", "m2", "m3", "m4", "m5", "m6", "m7", "f1", "f2", "f3", "f4", "f5", "croak",
];
const ESPEAK_PITCHES: &[u32] = &[20, 35, 50, 65, 80];

/// The espeak-ng variant and pitch closest to `target`, with its score on the search
/// sentences; `speak` makes a take with a setting.
pub fn match_espeak(
    speak: &dyn Fn(&str, &EspeakSetting) -> Result<Audio, VoiceError>,
    judge: &dyn Judge,
    target: &Embedding,
    progress: &dyn Fn(MatchProgress),
    cancel: &CancellationToken,
) -> Result<(EspeakSetting, Score), VoiceError> {
    let total = ESPEAK_VARIANTS.len() * ESPEAK_PITCHES.len();
    let mut best: Option<(EspeakSetting, f32, Audio)> = None;
    let mut evaluations = 0;
    for variant in ESPEAK_VARIANTS {
        for &pitch in ESPEAK_PITCHES {
            headroom_base::cpu::give_way();
            if cancel.is_cancelled() {
                return Err(VoiceError::Cancelled);
            }
            let setting = EspeakSetting {
                voice: format!("en-us+{variant}"),
                pitch,
            };
            let take = speak(SEARCH_SENTENCES[0], &setting)?;
            let similarity = judge.embed(&take)?.similarity(target);
            evaluations += 1;
            if best.as_ref().is_none_or(|b| similarity > b.1) {
                best = Some((setting, similarity, take));
            }
            progress(MatchProgress {
                stage: "espeak".into(),
                evaluations,
                total,
                best_similarity: best.as_ref().map_or(similarity, |b| b.1),
            });
        }
    }
    let (setting, similarity, take) = best.expect("the grid is not empty");
    let word_error_rate = judge.word_error_rate(&take, SEARCH_SENTENCES[0])?;
    let similarity_independent = judge.independent_similarity(std::slice::from_ref(&take));
    Ok((
        setting,
        Score {
            similarity,
            word_error_rate,
            similarity_independent,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::voice::EMBEDDING_DIM;

    /// A voice whose "audio" is its style (the shipped ones are fixed random vectors), judged by
    /// closeness to a hidden target style: the search must find its way towards the target.
    struct Toy {
        shipped: Vec<Vec<f32>>,
    }

    impl Toy {
        fn vector(&self, style: &Style) -> Vec<f32> {
            let mut v = vec![0f32; STYLE_DIM];
            for (name, w) in &style.mix {
                let i: usize = name[1..].parse().unwrap();
                for (o, s) in v.iter_mut().zip(&self.shipped[i]) {
                    *o += w * s;
                }
            }
            for (o, d) in v.iter_mut().zip(&style.offset) {
                *o += d;
            }
            v
        }
    }

    impl StyleVoice for Toy {
        fn shipped_styles(&self) -> Vec<String> {
            (0..self.shipped.len()).map(|i| format!("s{i}")).collect()
        }
        fn style_spread(&self) -> Vec<f32> {
            spread_of(&self.shipped)
        }
        fn speak(&self, text: &str, style: &Style) -> Result<Audio, VoiceError> {
            let mut samples = self.vector(style);
            // The text leaves a mark, so held-out sentences sound (slightly) different.
            samples[0] += text.len() as f32 * 1e-4;
            Ok(Audio {
                samples,
                sample_rate: 1,
            })
        }
    }

    struct ToyJudge {
        /// Offsets larger than this are "unintelligible".
        garble_above: f32,
        /// How often the independent judge was asked.
        independent_calls: std::sync::atomic::AtomicUsize,
    }

    impl ToyJudge {
        fn new(garble_above: f32) -> ToyJudge {
            ToyJudge {
                garble_above,
                independent_calls: Default::default(),
            }
        }
    }

    impl Judge for ToyJudge {
        fn embed(&self, take: &Audio) -> Result<Embedding, VoiceError> {
            assert_eq!(EMBEDDING_DIM, STYLE_DIM);
            Ok(Embedding::new(take.samples.clone()).unwrap())
        }
        fn word_error_rate(&self, take: &Audio, _: &str) -> Result<f64, VoiceError> {
            let norm = take.samples.iter().map(|v| v * v).sum::<f32>().sqrt();
            Ok(if norm > self.garble_above { 1.0 } else { 0.0 })
        }
        fn independent_similarity(&self, takes: &[Audio]) -> Option<f32> {
            self.independent_calls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Some(takes.len() as f32 / 10.0)
        }
    }

    fn random_vector(rng: &mut StdRng) -> Vec<f32> {
        (0..STYLE_DIM).map(|_| gaussian(rng)).collect()
    }

    #[test]
    fn the_search_climbs_from_the_best_shipped_style_and_reports_held_out_scores() {
        let mut rng = StdRng::seed_from_u64(1);
        let shipped: Vec<Vec<f32>> = (0..5).map(|_| random_vector(&mut rng)).collect();
        let toy = Toy { shipped };
        let target_style: Vec<f32> = toy.shipped[2]
            .iter()
            .zip(random_vector(&mut rng))
            .map(|(a, b)| a + b)
            .collect();
        let target = Embedding::new(target_style).unwrap();
        let judge = ToyJudge::new(1000.0);
        let seen = std::sync::Mutex::new(Vec::new());
        let settings = MatchSettings {
            budget: 400,
            ..MatchSettings::default()
        };
        let outcome = match_style(
            &toy,
            &judge,
            &target,
            &settings,
            &|p| seen.lock().unwrap().push(p),
            &CancellationToken::new(),
        )
        .unwrap();
        assert_eq!(outcome.best_shipped, "s2");
        assert!(
            outcome.held_out.similarity > outcome.best_shipped_held_out.similarity + 0.03,
            "{outcome:?}"
        );
        assert!(outcome.search.similarity >= outcome.held_out.similarity - 0.01);
        let seen = seen.into_inner().unwrap();
        let last = seen.last().unwrap();
        assert_eq!(last.evaluations, last.total, "progress ends at its total");
        assert_eq!(outcome.evaluations, last.total);
        // The independent judge scored the outcome (the search's best and the two held-out
        // scores) and was never consulted during the search.
        assert_eq!(
            judge
                .independent_calls
                .load(std::sync::atomic::Ordering::Relaxed),
            3
        );
        assert_eq!(outcome.search.similarity_independent, Some(0.1));
        assert_eq!(
            outcome.held_out.similarity_independent,
            Some(HELD_OUT_SENTENCES.len() as f32 / 10.0)
        );
        assert!(outcome
            .best_shipped_held_out
            .similarity_independent
            .is_some());
        assert!(seen.windows(2).all(
            |w| w[0].best_similarity <= w[1].best_similarity + 1e-6 || w[1].stage == "held_out"
        ));
    }

    #[test]
    fn unintelligible_candidates_never_win_and_cancel_stops_the_search() {
        let mut rng = StdRng::seed_from_u64(2);
        let toy = Toy {
            shipped: (0..3).map(|_| random_vector(&mut rng)).collect(),
        };
        let target = Embedding::new(random_vector(&mut rng)).unwrap();
        // Every style is "garbled": nothing may be chosen.
        let strict = ToyJudge::new(0.0);
        let err = match_style(
            &toy,
            &strict,
            &target,
            &MatchSettings::default(),
            &|_| {},
            &CancellationToken::new(),
        )
        .unwrap_err();
        assert!(matches!(err, VoiceError::Unintelligible { .. }), "{err}");
        // Candidates far from the shipped styles are garbled: the winner stays near them.
        let bound = 1.2
            * toy
                .shipped
                .iter()
                .map(|s| s.iter().map(|v| v * v).sum::<f32>().sqrt())
                .fold(0.0, f32::max);
        let judge = ToyJudge::new(bound);
        let outcome = match_style(
            &toy,
            &judge,
            &target,
            &MatchSettings {
                budget: 60,
                ..MatchSettings::default()
            },
            &|_| {},
            &CancellationToken::new(),
        )
        .unwrap();
        assert!(
            toy.vector(&outcome.style)
                .iter()
                .map(|v| v * v)
                .sum::<f32>()
                .sqrt()
                <= bound
        );
        let cancel = CancellationToken::new();
        cancel.cancel();
        let err = match_style(
            &toy,
            &judge,
            &target,
            &MatchSettings::default(),
            &|_| {},
            &cancel,
        )
        .unwrap_err();
        assert!(matches!(err, VoiceError::Cancelled));
    }
}
