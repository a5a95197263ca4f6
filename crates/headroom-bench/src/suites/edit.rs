//! Editing by text, measured on recordings with fillers and pauses put in on purpose: each
//! sentence of a held-out voice (the [`speakers`](super::speakers) suite's voices, none of
//! which the edit was tuned on) is spoken in two phrases with an "um" or "uh" between them
//! (every other sentence), and every third sentence is followed by a long pause, over a faint
//! noise floor. Where the fillers and the clean speech are is known to the sample.
//!
//! Per recording: Headroom transcribes it, cuts the fillers and shortens pauses (as
//! `headroom project edit --cut-fillers --max-pause` does), renders the edit and transcribes
//! that again. Measured: fillers found (recall, precision), clean speech cut, clicks at the
//! joins, the edit's length against its kept ranges, the render's time per audio hour, and the
//! fillers heard in the edited recording. Then pause shortening alone against auto-editor's
//! default silence cutting (threshold 4 % of the loudest, 0.2 s margin, at 30 frames a second;
//! re-implemented here: auto-editor's PyPI package fetches its program from GitHub at install,
//! which this machine cannot reach), at the same seconds removed: clean speech lost by each.

use super::speakers::{available_voices, choose_voices, sentence_cache, speak, VoiceSet};
use super::{Progress, SuiteError};
use headroom_core::cleanup::rules::{disfluent_words, Disfluency};
use headroom_services::Services;
use headroom_speech::asr::normalized_word_error_rate;
use headroom_speech::audio::{decode_file, write_wav, Audio, DecodeLimits};
use headroom_speech::edit::render::step_ratio;
use headroom_speech::edit::{EditList, KeptRange};
use headroom_workstation::editing::{EditIntent, EditedFormat};
use headroom_workstation::projects::{ProjectSettings, ProjectStore};
use headroom_workstation::workstation::Workstation;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

const RATE: u32 = 16_000;

/// What people say in the recordings.
const SENTENCES: &[&str] = &[
    "I think we should leave before the traffic gets bad.",
    "The river was higher this morning than I have ever seen it.",
    "We can move the meeting to Thursday if that helps.",
    "The tickets were cheaper than I expected.",
    "Could you send me the numbers from the last quarter?",
    "The train stopped for twenty minutes outside the station.",
    "We recorded the choir in the old church on Sunday evening.",
    "The museum is closed on Mondays, so we went to the market instead.",
    "He fixed the bicycle with nothing but a spoon and some wire.",
    "If it rains tomorrow, we will film the interview indoors.",
    "The new microphones arrived, but one of the cables is missing.",
    "My sister bought a bakery last spring and she has not slept since.",
];

const FILLERS: [&str; 2] = ["um", "uh"];

/// A stretch of a planted recording, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Span {
    pub start: f64,
    pub end: f64,
}

/// A recording with fillers and pauses put in on purpose, and where they are.
#[derive(Debug, Clone)]
pub struct Planted {
    /// 16 kHz.
    pub audio: Audio,
    /// What is said, fillers left out.
    pub clean_text: String,
    /// Where each filler sounds.
    pub fillers: Vec<Span>,
    /// Where each phrase of clean speech is.
    pub speech: Vec<Span>,
    /// Where the clean speech sounds: each phrase's 10 ms frames within 40 dB of its loudest
    /// (a phrase's own pauses, at its commas, left out).
    pub sound: Vec<Span>,
    /// The long pauses put in.
    pub long_pauses: Vec<Span>,
}

/// Silence of `secs` at the rate.
fn silence(secs: f64) -> Vec<f32> {
    vec![0.0; (secs * f64::from(RATE)).round() as usize]
}

/// `sentences` of `SENTENCES` (from the first) in `voice`, fillers and long pauses put in as
/// the module says, the pauses' lengths drawn by `rng`; clips are kept in `cache`.
pub async fn planted_recording(
    services: &Services,
    cache: &Path,
    voice: &str,
    sentences: usize,
    rng: &mut StdRng,
) -> Result<Planted, SuiteError> {
    let mut samples: Vec<f32> = silence(0.4);
    let mut fillers = Vec::new();
    let mut speech = Vec::new();
    let mut long_pauses = Vec::new();
    let mut sound = Vec::new();
    let mut clean = Vec::new();
    let now = |samples: &Vec<f32>| samples.len() as f64 / f64::from(RATE);
    let put = |samples: &mut Vec<f32>, audio: &Audio| -> Span {
        let start = now(samples);
        samples.extend_from_slice(&audio.samples);
        Span {
            start,
            end: now(samples),
        }
    };
    for (i, sentence) in SENTENCES.iter().cycle().take(sentences).enumerate() {
        clean.push(*sentence);
        let words: Vec<&str> = sentence.split_whitespace().collect();
        if i % 2 == 0 {
            let split = rng.random_range(2..words.len() - 1);
            let first = speak(services, cache, voice, &words[..split].join(" ")).await?;
            let filler = speak(services, cache, voice, FILLERS[rng.random_range(0..2)]).await?;
            let second = speak(services, cache, voice, &words[split..].join(" ")).await?;
            let span = put(&mut samples, &first);
            sound.extend(sounding(&first, span.start));
            speech.push(span);
            samples.extend(silence(rng.random_range(0.15..0.3)));
            fillers.push(put(&mut samples, &filler));
            samples.extend(silence(rng.random_range(0.15..0.3)));
            let span = put(&mut samples, &second);
            sound.extend(sounding(&second, span.start));
            speech.push(span);
        } else {
            let whole = speak(services, cache, voice, sentence).await?;
            let span = put(&mut samples, &whole);
            sound.extend(sounding(&whole, span.start));
            speech.push(span);
        }
        if i % 3 == 2 {
            let start = now(&samples);
            samples.extend(silence(rng.random_range(1.5..2.5)));
            long_pauses.push(Span {
                start,
                end: now(&samples),
            });
        } else {
            samples.extend(silence(rng.random_range(0.35..0.6)));
        }
    }
    // A faint floor of noise (about -66 dBFS), as a room has: no stretch is digital silence.
    let mut state = rng.random::<u32>() | 1;
    let mut low = 0.0f32;
    for s in &mut samples {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let white = (state as f32 / u32::MAX as f32) - 0.5;
        low = 0.8 * low + 0.2 * white;
        *s += low * 0.0035;
    }
    Ok(Planted {
        audio: Audio {
            samples,
            sample_rate: RATE,
        },
        clean_text: clean.join(" "),
        fillers,
        speech,
        sound,
        long_pauses,
    })
}

/// Where `clip` (placed at `at` seconds) sounds: its 10 ms frames within 40 dB of its loudest.
fn sounding(clip: &Audio, at: f64) -> Vec<Span> {
    let per = (clip.sample_rate / 100).max(1) as usize;
    let levels: Vec<f32> = clip
        .samples
        .chunks(per)
        .map(|f| (f.iter().map(|s| s * s).sum::<f32>() / f.len() as f32).sqrt())
        .collect();
    let loudest = levels.iter().copied().fold(0.0f32, f32::max);
    let floor = loudest * 0.01;
    let mut spans: Vec<Span> = Vec::new();
    for (i, &level) in levels.iter().enumerate() {
        if level < floor {
            continue;
        }
        let start = at + i as f64 * 0.01;
        match spans.last_mut() {
            Some(last) if (last.end - start).abs() < 1e-9 => last.end = start + 0.01,
            _ => spans.push(Span {
                start,
                end: start + 0.01,
            }),
        }
    }
    spans
}

/// Seconds of `span` that `edit` leaves out.
fn cut_from(span: &Span, edit: &EditList) -> f64 {
    let kept: f64 = edit
        .kept
        .iter()
        .filter(|r| !r.room_tone)
        .map(|r| (r.end.min(span.end) - r.start.max(span.start)).max(0.0))
        .sum();
    (span.end - span.start - kept).max(0.0)
}

/// auto-editor's default silence cutting, as its documentation gives it: at 30 frames a
/// second, a frame is loud when its loudest sample is over 4 % of the recording's loudest;
/// silent runs under 0.2 s and loud runs under 0.1 s are merged away; loud stretches keep a
/// margin of 0.2 s each side; what is left silent is cut.
pub fn auto_editor_defaults(audio: &Audio) -> EditList {
    let per = (audio.sample_rate / 30).max(1) as usize;
    let peak = audio.peak().max(1e-9);
    let mut loud: Vec<bool> = audio
        .samples
        .chunks(per)
        .map(|f| f.iter().fold(0.0f32, |m, s| m.max(s.abs())) / peak > 0.04)
        .collect();
    let runs = |loud: &[bool]| -> Vec<(bool, usize, usize)> {
        let mut runs = Vec::new();
        let mut start = 0;
        for i in 1..=loud.len() {
            if i == loud.len() || loud[i] != loud[start] {
                runs.push((loud[start], start, i));
                start = i;
            }
        }
        runs
    };
    // Minimum cut 0.2 s (6 frames), minimum clip 0.1 s (3 frames).
    for (is_loud, start, end) in runs(&loud) {
        if !is_loud && end - start < 6 && start > 0 {
            loud[start..end].iter_mut().for_each(|l| *l = true);
        }
    }
    for (is_loud, start, end) in runs(&loud) {
        if is_loud && end - start < 3 {
            loud[start..end].iter_mut().for_each(|l| *l = false);
        }
    }
    let margin = 6;
    let mut kept = loud.clone();
    for (i, &l) in loud.iter().enumerate() {
        if l {
            let from = i.saturating_sub(margin);
            let to = (i + margin + 1).min(kept.len());
            kept[from..to].iter_mut().for_each(|k| *k = true);
        }
    }
    let secs = |frame: usize| (frame * per) as f64 / f64::from(audio.sample_rate);
    let duration = audio.duration_secs();
    EditList {
        kept: runs(&kept)
            .into_iter()
            .filter(|r| r.0)
            .map(|(_, s, e)| KeptRange::new(secs(s), secs(e).min(duration)))
            .collect(),
        room_tone: None,
    }
}

/// What the editing suite makes and measures.
#[derive(Debug, Clone)]
pub struct EditBenchConfig {
    pub set: VoiceSet,
    /// The voices, by the speakers suite's names (`None`: `voices` of `set`, drawn by the seed).
    pub voices: Option<Vec<String>>,
    /// How many voices (one recording each) when none are named.
    pub voice_count: usize,
    /// Sentences per recording.
    pub sentences: usize,
    /// The pause limit the edit asks for.
    pub max_pause: f64,
    pub model: String,
    pub seed: u64,
    pub cache: Option<PathBuf>,
    /// Where each recording, its edit and the edited audio are written.
    pub keep: Option<PathBuf>,
    /// Transcribe as a project set to hear fillers does (see
    /// `headroom_speech::asr::fillers`), the original and the render alike.
    pub hear_fillers: bool,
}

impl Default for EditBenchConfig {
    fn default() -> Self {
        EditBenchConfig {
            set: VoiceSet::Test,
            voices: None,
            voice_count: 4,
            sentences: 12,
            max_pause: 0.7,
            model: headroom_speech::models::DEFAULT_MODEL.into(),
            seed: 7,
            cache: None,
            keep: None,
            hear_fillers: true,
        }
    }
}

/// One recording's figures.
#[derive(Debug, Clone, Serialize)]
pub struct EditRow {
    pub voice: String,
    pub audio_secs: f64,
    /// Transcribing the original, in seconds.
    pub transcribe_secs: f64,
    pub fillers_planted: usize,
    /// Planted fillers the edit cuts.
    pub fillers_cut: usize,
    /// Words the edit cut as fillers that are no planted filler.
    pub false_fillers: usize,
    /// Clean speech the edit cuts (its sound, not its pauses), in milliseconds, and the phrases
    /// it cuts into (over 20 ms).
    pub clean_cut_ms: f64,
    pub phrases_clipped: usize,
    pub joins: usize,
    /// Joins whose largest step is over 3 times the median step around it.
    pub clicks: usize,
    pub worst_step_ratio: f32,
    /// The edited audio's length against its kept ranges, in milliseconds.
    pub length_error_ms: f64,
    pub edit_secs: f64,
    pub render_secs: f64,
    /// Render time per hour of the original, in seconds.
    pub render_secs_per_hour: f64,
    /// Fillers ("um", "uh", ...) the rules find in the edited recording's transcript.
    pub fillers_heard_after: usize,
    pub wer_before: f64,
    pub wer_after: f64,
    /// Pause shortening alone, at auto-editor's removal: seconds removed and clean speech
    /// lost, by auto-editor's defaults and by Headroom.
    pub auto_editor_removed_secs: f64,
    pub auto_editor_clean_cut_ms: f64,
    pub headroom_pause: f64,
    pub headroom_removed_secs: f64,
    pub headroom_clean_cut_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct EditBenchReport {
    pub set: VoiceSet,
    pub model: String,
    pub max_pause: f64,
    pub seed: u64,
    pub hear_fillers: bool,
    pub rows: Vec<EditRow>,
}

/// Runs the suite.
pub async fn run(
    services: Arc<Services>,
    config: &EditBenchConfig,
    progress: Progress<'_>,
) -> Result<EditBenchReport, SuiteError> {
    let mut rng = StdRng::seed_from_u64(config.seed);
    let voices: Vec<String> = match &config.voices {
        Some(v) => v.clone(),
        None => {
            let available = available_voices(&services, config.set, 1)?;
            choose_voices(&available, config.voice_count, &mut rng)
                .into_iter()
                .map(String::from)
                .collect()
        }
    };
    let (cache, _private) = sentence_cache(config.cache.as_deref())?;
    let work = tempfile::tempdir()?;
    let ws = Workstation::new(
        ProjectStore::new(work.path().join("projects")),
        services.clone(),
        None,
    );
    let mut rows = Vec::new();
    for voice in &voices {
        progress(&format!("{voice}: making the recording"));
        let planted =
            planted_recording(&services, &cache, voice, config.sentences, &mut rng).await?;
        let name = voice.replace(['+', ' '], "-");
        let wav = work.path().join(format!("{name}.wav"));
        write_wav(&wav, &planted.audio)?;
        let row = measure(&ws, &planted, &wav, voice, config, progress).await?;
        if let Some(dir) = &config.keep {
            std::fs::create_dir_all(dir)?;
            std::fs::copy(&wav, dir.join(format!("{name}.wav")))?;
            let truth = serde_json::json!({
                "clean_text": planted.clean_text,
                "fillers": planted.fillers,
                "speech": planted.speech,
                "sound": planted.sound,
                "long_pauses": planted.long_pauses,
            });
            std::fs::write(
                dir.join(format!("{name}.truth.json")),
                serde_json::to_vec_pretty(&truth).expect("the truth serializes"),
            )?;
        }
        progress(&format!(
            "{voice}: {}/{} fillers cut, {} false, {:.0} ms of clean speech cut, {} clicks in {} joins, {} fillers heard after",
            row.fillers_cut,
            row.fillers_planted,
            row.false_fillers,
            row.clean_cut_ms,
            row.clicks,
            row.joins,
            row.fillers_heard_after
        ));
        rows.push(row);
    }
    Ok(EditBenchReport {
        set: config.set,
        model: config.model.clone(),
        max_pause: config.max_pause,
        seed: config.seed,
        hear_fillers: config.hear_fillers,
        rows,
    })
}

/// The words of a project's transcript, joined.
fn project_text(project: &headroom_workstation::projects::Project) -> String {
    project
        .segments
        .iter()
        .map(|s| s.text.trim())
        .collect::<Vec<_>>()
        .join(" ")
}

async fn measure(
    ws: &Workstation,
    planted: &Planted,
    wav: &Path,
    voice: &str,
    config: &EditBenchConfig,
    progress: Progress<'_>,
) -> Result<EditRow, SuiteError> {
    let transcribe = |name: String, file: PathBuf| async move {
        let project = ws.store().create(&name)?;
        let shown = project.settings.clone();
        let settings = ProjectSettings {
            hear_fillers: config.hear_fillers,
            ..shown.clone()
        };
        let project = ws.update_settings(&project.id, settings, shown).await?;
        let project = ws
            .transcribe(
                &project.id,
                &file,
                Some(&config.model),
                Arc::new(|_| {}),
                CancellationToken::new(),
            )
            .await?;
        Ok::<_, SuiteError>(project)
    };
    progress(&format!("{voice}: transcribing and editing"));
    let started = Instant::now();
    let project = transcribe(format!("{voice} original"), wav.to_path_buf()).await?;
    let transcribe_secs = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let summary = ws
        .edit_recording(
            &project.id,
            EditIntent {
                cut_fillers: true,
                max_pause: Some(config.max_pause),
                ..EditIntent::default()
            },
            CancellationToken::new(),
        )
        .await?;
    let edit_secs = started.elapsed().as_secs_f64();
    let edit = summary.edit.clone().expect("an edit was made");
    let list = &edit.list;
    let started = Instant::now();
    let rendered = ws
        .export_edited(
            &project.id,
            EditedFormat::Audio(headroom_speech::audio::SpeechFormat::Wav),
            30,
            None,
            CancellationToken::new(),
        )
        .await?;
    let render_secs = started.elapsed().as_secs_f64();
    let edited = decode_file(&rendered, DecodeLimits::default())?;

    let fillers_cut = planted
        .fillers
        .iter()
        .filter(|f| cut_from(f, list) > 0.5 * (f.end - f.start))
        .count();
    let false_fillers = summary
        .fillers
        .iter()
        .filter(|f| f.cut)
        .filter(|f| {
            !planted
                .fillers
                .iter()
                .any(|p| f.word.start < p.end + 0.1 && f.word.end > p.start - 0.1)
        })
        .count();
    let clean_cuts: Vec<f64> = planted
        .speech
        .iter()
        .map(|phrase| {
            planted
                .sound
                .iter()
                .filter(|s| s.start >= phrase.start - 1e-9 && s.end <= phrase.end + 0.011)
                .map(|s| cut_from(s, list))
                .sum()
        })
        .collect();
    // Joins: where one kept range does not run on into the next.
    let rate = f64::from(edited.sample_rate);
    let ratios: Vec<f32> = list
        .join_times()
        .iter()
        .map(|at| {
            step_ratio(
                &edited.samples,
                (at * rate).round() as usize,
                edited.sample_rate,
            )
        })
        .collect();
    let after = transcribe(format!("{voice} edited"), rendered.clone()).await?;
    let heard_after = project_text(&after);
    let words_after: Vec<String> = after
        .segments
        .iter()
        .flat_map(|s| s.text.split_whitespace().map(str::to_string))
        .collect();
    let fillers_heard_after = disfluent_words(&words_after)
        .into_iter()
        .filter(|(_, kind)| *kind == Disfluency::Filler)
        .count();

    // Pause shortening alone against auto-editor's defaults, at the same seconds removed.
    let auto = auto_editor_defaults(&planted.audio);
    let auto_removed = planted.audio.duration_secs() - auto.duration_secs();
    let auto_clean: f64 = planted.sound.iter().map(|s| cut_from(s, &auto)).sum();
    let (mut lo, mut hi) = (0.05, 5.0);
    let mut matched = None;
    for _ in 0..12 {
        let pause = (lo + hi) / 2.0;
        let s = ws
            .edit_recording(
                &project.id,
                EditIntent {
                    max_pause: Some(pause),
                    ..EditIntent::default()
                },
                CancellationToken::new(),
            )
            .await?;
        let e = s.edit.expect("an edit was made").list;
        let removed = planted.audio.duration_secs() - e.duration_secs();
        matched = Some((pause, removed, e));
        if (removed - auto_removed).abs() < 0.02 * auto_removed.max(0.1) {
            break;
        }
        // A longer limit removes less.
        if removed > auto_removed {
            lo = pause;
        } else {
            hi = pause;
        }
    }
    let (pause, removed, shortened) = matched.expect("searched");
    let headroom_clean: f64 = planted.sound.iter().map(|s| cut_from(s, &shortened)).sum();

    Ok(EditRow {
        voice: voice.to_string(),
        audio_secs: planted.audio.duration_secs(),
        fillers_planted: planted.fillers.len(),
        fillers_cut,
        false_fillers,
        clean_cut_ms: clean_cuts.iter().sum::<f64>() * 1000.0,
        phrases_clipped: clean_cuts.iter().filter(|&&c| c > 0.02).count(),
        joins: ratios.len(),
        clicks: ratios.iter().filter(|&&r| r > 3.0).count(),
        worst_step_ratio: ratios.iter().copied().fold(0.0, f32::max),
        length_error_ms: (edited.duration_secs() - list.duration_secs()).abs() * 1000.0,
        transcribe_secs,
        edit_secs,
        render_secs,
        render_secs_per_hour: render_secs * 3600.0 / planted.audio.duration_secs(),
        fillers_heard_after,
        wer_before: normalized_word_error_rate(&planted.clean_text, &project_text(&project)),
        wer_after: normalized_word_error_rate(&planted.clean_text, &heard_after),
        auto_editor_removed_secs: auto_removed,
        auto_editor_clean_cut_ms: auto_clean * 1000.0,
        headroom_pause: pause,
        headroom_removed_secs: removed,
        headroom_clean_cut_ms: headroom_clean * 1000.0,
    })
}

pub fn render_text(r: &EditBenchReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Editing by text: {} voices ({:?} set), {}{}, fillers cut and pauses over {} s shortened, seed {}",
        r.rows.len(),
        r.set,
        r.model,
        if r.hear_fillers { " hearing fillers" } else { "" },
        r.max_pause,
        r.seed
    );
    let _ = writeln!(
        out,
        "| voice | audio | transcribe | fillers cut | false | clean speech cut | clicks / joins | length error | render per audio hour | fillers heard after | WER before → after |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
    for row in &r.rows {
        let _ = writeln!(
            out,
            "| {} | {:.0} s | {:.1} s | {}/{} | {} | {:.0} ms ({} phrases) | {} / {} (worst {:.1}) | {:.2} ms | {:.2} s | {} | {:.1}% → {:.1}% |",
            row.voice,
            row.audio_secs,
            row.transcribe_secs,
            row.fillers_cut,
            row.fillers_planted,
            row.false_fillers,
            row.clean_cut_ms,
            row.phrases_clipped,
            row.clicks,
            row.joins,
            row.worst_step_ratio,
            row.length_error_ms,
            row.render_secs_per_hour,
            row.fillers_heard_after,
            100.0 * row.wer_before,
            100.0 * row.wer_after
        );
    }
    let _ = writeln!(out, "\nPause shortening alone against auto-editor's default silence cutting, at the same seconds removed:");
    let _ = writeln!(out, "| voice | auto-editor: removed, clean speech cut | Headroom: pause limit, removed, clean speech cut |");
    let _ = writeln!(out, "|---|---|---|");
    for row in &r.rows {
        let _ = writeln!(
            out,
            "| {} | {:.1} s, {:.0} ms | {:.2} s, {:.1} s, {:.0} ms |",
            row.voice,
            row.auto_editor_removed_secs,
            row.auto_editor_clean_cut_ms,
            row.headroom_pause,
            row.headroom_removed_secs,
            row.headroom_clean_cut_ms
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_editor_defaults_keep_loud_stretches_with_their_margins() {
        // 1 s loud, 1 s silent, 1 s loud at 16 kHz.
        let mut samples = vec![0.5f32; 16_000];
        samples.extend(vec![0.0; 16_000]);
        samples.extend(vec![0.5; 16_000]);
        let edit = auto_editor_defaults(&Audio {
            samples,
            sample_rate: 16_000,
        });
        assert_eq!(edit.kept.len(), 2);
        // 0.2 s margin into the silence on each side.
        assert!((edit.kept[0].end - 1.2).abs() < 0.04, "{:?}", edit.kept);
        assert!((edit.kept[1].start - 1.8).abs() < 0.04, "{:?}", edit.kept);
    }

    #[test]
    fn a_span_cut_counts_what_no_kept_range_holds() {
        let edit = EditList {
            kept: vec![KeptRange::new(0.0, 1.0), KeptRange::new(2.0, 3.0)],
            room_tone: None,
        };
        assert!(
            (cut_from(
                &Span {
                    start: 0.5,
                    end: 2.5
                },
                &edit
            ) - 1.0)
                .abs()
                < 1e-9
        );
        assert_eq!(
            cut_from(
                &Span {
                    start: 0.1,
                    end: 0.9
                },
                &edit
            ),
            0.0
        );
    }
}
