//! Editing a project's recording by editing its words: cut the fillers the cleanup rules find,
//! struck words and passages, shorten long pauses; hear and export the result, and hand the
//! cut list to a video editor. The edit is non-destructive: the project keeps what was asked
//! ([`EditIntent`]) and the stretches of the original kept ([`EditList`]); the original is
//! never changed, and each change keeps the one before as a version (undo).

pub use crate::projects::recording_edit::{
    EditIntent, RecordingEdit, TimeSpan, MAX_CUTS, MAX_KEPT_WORDS, PAUSE_LIMITS,
};
use crate::projects::{Project, ProjectError, ProjectStore};
use crate::workstation::{blocking, project_file_in, WavOnDisk, Workstation, WorkstationError};
use headroom_base::clock::unix_ms;
use headroom_core::admission::Priority;
use headroom_core::cleanup::rules::{disfluent_words, Disfluency};
use headroom_speech::asr::export::{render, ExportFormat};
use headroom_speech::audio::{Audio, AudioError, Decode, SpeechFormat, StreamEncoder};
use headroom_speech::edit::interchange::{CutList, CutListFormat, FRAME_RATES};
use headroom_speech::edit::plan::{QuietSamples, Wanted};
use headroom_speech::edit::{
    plan, play_edit, render_edit, snap_to_pauses, EditList, EditRequest, Loudness, TimedWord,
};
use serde::{Deserialize, Serialize};
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// A change to a project's edit, as every front end asks it (the window, the CLI, MCP).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(default)]
pub struct EditChange {
    /// Cut the fillers (true) or stop cutting them (false).
    pub cut_fillers: Option<bool>,
    /// Shorten pauses to this many seconds; 0 stops shortening.
    pub max_pause: Option<f64>,
    pub room_tone: Option<bool>,
    /// Passages to cut.
    pub cuts: Vec<TimeSpan>,
    /// Words to cut, by id (`SEGMENT:WORD`) or a run of them (`FIRST-LAST`, both ends cut).
    /// A word struck is no longer kept.
    pub strike: Vec<String>,
    /// Words to keep whatever else would cut them, by id or run as `strike`; a word struck
    /// by hand is no longer struck.
    pub keep: Vec<String>,
    /// Start again from the whole recording (alone: remove the edit).
    pub clear: bool,
    /// Start from this intent instead of the project's (the window's undo and redo); it is
    /// held to the same bounds as any other.
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub from: Option<EditIntent>,
}

/// Most words one change strikes or keeps, runs counted word by word.
const MAX_WORDS_PER_CHANGE: usize = MAX_KEPT_WORDS;

impl EditChange {
    fn asks_anything(&self) -> bool {
        self.cut_fillers.is_some()
            || self.max_pause.is_some()
            || self.room_tone.is_some()
            || !self.cuts.is_empty()
            || !self.strike.is_empty()
            || !self.keep.is_empty()
            || self.from.is_some()
    }

    /// The intent after this change to `project`'s; words are named by id.
    fn applied_to(&self, project: &Project) -> Result<EditIntent, WorkstationError> {
        if self.strike.len() > MAX_CUTS || self.keep.len() > MAX_KEPT_WORDS {
            return Err(WorkstationError::BadEdit(format!(
                "{} words struck and {} kept at once; at most {MAX_CUTS} and {MAX_KEPT_WORDS}",
                self.strike.len(),
                self.keep.len()
            )));
        }
        let words = words_of(project);
        // An intent sent whole is held to the bounds before any work is done on it.
        if let Some(from) = &self.from {
            check_intent(from, project, &words)?;
        }
        let mut intent = match (&self.from, &project.edit, self.clear) {
            (Some(from), _, _) => from.clone(),
            (None, Some(edit), false) => edit.intent.clone(),
            _ => EditIntent::default(),
        };
        if let Some(on) = self.cut_fillers {
            intent.cut_fillers = on;
        }
        if let Some(pause) = self.max_pause {
            // Exactly 0 stops shortening; anything else is checked against the limits.
            intent.max_pause = (pause != 0.0).then_some(pause);
        }
        if let Some(on) = self.room_tone {
            intent.room_tone = on;
        }
        intent.cuts.extend(&self.cuts);
        let struck = word_runs(&words, &self.strike)?;
        let kept = word_runs(&words, &self.keep)?;
        // Struck and kept by hand exclude each other: the later ask wins.
        let unmark = |times: &mut Vec<f64>, unmarked: &[usize]| {
            let unmarked: std::collections::HashSet<usize> = unmarked.iter().copied().collect();
            times.retain(|&t| {
                words_at(&words, &[t])
                    .first()
                    .is_none_or(|w| !unmarked.contains(w))
            });
        };
        unmark(&mut intent.kept_words, &struck);
        unmark(&mut intent.struck_words, &kept);
        intent
            .struck_words
            .extend(struck.iter().map(|&i| words[i].middle()));
        intent
            .kept_words
            .extend(kept.iter().map(|&i| words[i].middle()));
        // Asked twice is asked once.
        intent
            .cuts
            .sort_by(|a, b| a.start.total_cmp(&b.start).then(a.end.total_cmp(&b.end)));
        intent.cuts.dedup();
        for times in [&mut intent.struck_words, &mut intent.kept_words] {
            times.sort_by(f64::total_cmp);
            times.dedup();
        }
        Ok(intent)
    }
}

/// The words (by place) that `asks` name, each an id (`SEGMENT:WORD`) or a run of them
/// (`FIRST-LAST`, in either order).
fn word_runs(words: &[WordRef], asks: &[String]) -> Result<Vec<usize>, WorkstationError> {
    let index: std::collections::HashMap<&str, usize> = words
        .iter()
        .enumerate()
        .map(|(i, w)| (w.id.as_str(), i))
        .collect();
    // An id is a few digits; a longer one is named by its start.
    let word = |id: &str| {
        index
            .get(id.trim())
            .copied()
            .ok_or_else(|| WorkstationError::NoSuchWord(id.chars().take(24).collect()))
    };
    let mut found = Vec::new();
    for ask in asks {
        let (first, last) = match ask.split_once('-') {
            Some((a, b)) => (word(a)?, word(b)?),
            None => (word(ask)?, word(ask)?),
        };
        let run = first.min(last)..=first.max(last);
        if found.len() + run.clone().count() > MAX_WORDS_PER_CHANGE {
            return Err(WorkstationError::BadEdit(format!(
                "more than {MAX_WORDS_PER_CHANGE} words named at once"
            )));
        }
        found.extend(run);
    }
    Ok(found)
}

/// A word of the transcript, by its place: `id` is `SEGMENT:WORD`, both from 1.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct WordRef {
    pub id: String,
    pub segment: usize,
    pub word: usize,
    pub text: String,
    pub start: f64,
    pub end: f64,
}

impl WordRef {
    fn middle(&self) -> f64 {
        (self.start + self.end) / 2.0
    }
}

/// A filler, repeat or false start the cleanup rules find, and whether the edit cuts it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct FoundFiller {
    pub word: WordRef,
    #[cfg_attr(feature = "typescript", ts(type = "string"))]
    pub kind: Disfluency,
    pub cut: bool,
}

/// A project's edit as a front end shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct EditSummary {
    pub edit: Option<RecordingEdit>,
    pub fillers: Vec<FoundFiller>,
    pub original_secs: f64,
    pub edited_secs: f64,
    /// Words the edit leaves out.
    pub words_cut: usize,
    /// Their ids, in order (`SEGMENT:WORD`).
    pub cut_ids: Vec<String>,
    /// When the project was saved, as its `modified_unix_ms` says.
    pub modified_unix_ms: u64,
    /// Joins between stretches kept.
    pub joins: usize,
}

/// What an edited export is written as: the audio, its transcript re-timed, or its cut list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EditedFormat {
    Audio(SpeechFormat),
    Transcript(ExportFormat),
    CutList(CutListFormat),
}

impl EditedFormat {
    /// The names the front ends take.
    pub const NAMES: &str = "wav, flac, mp3, opus, txt, srt, vtt, json, edl, xmeml, fcpxml or otio";

    pub fn extension(self) -> &'static str {
        match self {
            EditedFormat::Audio(f) => f.extension(),
            EditedFormat::Transcript(f) => f.extension(),
            EditedFormat::CutList(f) => f.extension(),
        }
    }
}

impl std::str::FromStr for EditedFormat {
    type Err = String;
    fn from_str(name: &str) -> Result<Self, String> {
        let lower = name.to_ascii_lowercase();
        // The audio formats a file is written in (not raw PCM, nor AAC, which has no encoder).
        if let Ok(f) = lower.parse::<SpeechFormat>() {
            if !matches!(f, SpeechFormat::Pcm | SpeechFormat::Aac) {
                return Ok(EditedFormat::Audio(f));
            }
        }
        if let Some(f) = CutListFormat::parse(&lower) {
            return Ok(EditedFormat::CutList(f));
        }
        match lower.as_str() {
            "txt" | "text" | "srt" | "vtt" | "json" => Ok(EditedFormat::Transcript(
                lower.parse().map_err(|e: String| e)?,
            )),
            _ => Err(format!("unknown format {name:?}: use {}", Self::NAMES)),
        }
    }
}

/// Every word of the project's transcript, in order, with its place.
pub fn words_of(project: &Project) -> Vec<WordRef> {
    project
        .segments
        .iter()
        .enumerate()
        .flat_map(|(s, segment)| {
            segment
                .words
                .iter()
                .enumerate()
                .map(move |(w, word)| WordRef {
                    id: format!("{}:{}", s + 1, w + 1),
                    segment: s + 1,
                    word: w + 1,
                    text: word.text.trim().to_string(),
                    start: word.start,
                    end: word.end.max(word.start),
                })
        })
        .collect()
}

/// The words (by place) the cleanup rules drop, with why: segment by segment, as the text
/// cleanup cleans a segment's line, so the recording loses what its text would.
fn disfluent(words: &[WordRef]) -> Vec<(usize, Disfluency)> {
    let mut found = Vec::new();
    let mut first = 0;
    while first < words.len() {
        let last = first
            + words[first..]
                .iter()
                .take_while(|w| w.segment == words[first].segment)
                .count();
        let texts: Vec<&str> = words[first..last].iter().map(|w| w.text.as_str()).collect();
        found.extend(
            disfluent_words(&texts)
                .into_iter()
                .map(|(i, kind)| (first + i, kind)),
        );
        first = last;
    }
    found
}

/// Which of `words` `list` leaves out.
fn cut_by(words: &[WordRef], list: &EditList) -> Vec<bool> {
    let middles: Vec<f64> = words.iter().map(WordRef::middle).collect();
    list.edited_times(&middles)
        .into_iter()
        .map(|t| t.is_none())
        .collect()
}

/// The fillers the rules find among `words`, and whether `list` cuts each.
fn fillers(words: &[WordRef], list: Option<&EditList>) -> Vec<FoundFiller> {
    let cut = list.map(|l| cut_by(words, l));
    disfluent(words)
        .into_iter()
        .map(|(i, kind)| FoundFiller {
            word: words[i].clone(),
            kind,
            cut: cut.as_ref().is_some_and(|c| c[i]),
        })
        .collect()
}

/// For each of `times`, the one word (by place) whose span as transcribed holds it, the
/// nearest by its middle where spans touch or overlap.
fn words_at(words: &[WordRef], times: &[f64]) -> Vec<usize> {
    let mut found: Vec<usize> = times
        .iter()
        .filter_map(|&t| {
            // Words are in order of start; those starting after `t` cannot hold it.
            let upto = words.partition_point(|w| w.start <= t + 1e-6);
            words[..upto]
                .iter()
                .enumerate()
                .rev()
                .take_while(|(_, w)| w.end >= t - 10.0)
                .filter(|(_, w)| w.end >= t - 1e-6)
                .min_by(|(_, a), (_, b)| (a.middle() - t).abs().total_cmp(&(b.middle() - t).abs()))
                .map(|(i, _)| i)
        })
        .collect();
    found.sort_unstable();
    found.dedup();
    found
}

/// What `intent` asks of the words (as transcribed), for the planner (which also cuts the
/// words a passage holds).
fn request(words: &[WordRef], intent: &EditIntent) -> EditRequest {
    let mut cut_words: Vec<usize> = if intent.cut_fillers {
        disfluent(words).into_iter().map(|(i, _)| i).collect()
    } else {
        Vec::new()
    };
    cut_words.extend(words_at(words, &intent.struck_words));
    EditRequest {
        cut_words,
        cut_times: intent.cuts.iter().map(|c| (c.start, c.end)).collect(),
        keep_words: words_at(words, &intent.kept_words),
        max_pause: intent.max_pause,
        room_tone: intent.room_tone,
        pauses: None,
    }
}

/// The project's words, at the times its edit placed them when they are still the words it
/// was made on.
fn placed_words(project: &Project) -> Vec<WordRef> {
    let mut words = words_of(project);
    if let Some(edit) = project
        .edit
        .as_ref()
        .filter(|e| e.word_times.len() == words.len())
    {
        for (word, placed) in words.iter_mut().zip(&edit.word_times) {
            word.start = placed.start;
            word.end = placed.end;
        }
    }
    words
}

/// The project's transcript with its words at the times its edit placed them.
fn placed_transcript(project: &Project) -> headroom_speech::asr::Transcript {
    let mut transcript = project.transcript();
    let placed = placed_words(project);
    let mut placed = placed.iter();
    for segment in &mut transcript.segments {
        for word in &mut segment.words {
            if let Some(p) = placed.next() {
                word.start = p.start;
                word.end = p.end;
            }
        }
        if let (Some(first), Some(last)) = (segment.words.first(), segment.words.last()) {
            segment.start = first.start;
            segment.end = last.end;
        }
    }
    transcript
}

/// A summary of the project's edit as it stands.
pub fn summary(project: &Project) -> EditSummary {
    let words = placed_words(project);
    let edit = project.edit.clone();
    // A stored edit that is not whole (a hand-edited manifest) is shown, never used.
    let list = edit
        .as_ref()
        .filter(|e| e.list.check(e.source_secs).is_ok())
        .map(|e| &e.list);
    let original_secs = edit
        .as_ref()
        .map_or(project.duration_secs, |e| e.source_secs);
    let cut_ids: Vec<String> = list.map_or_else(Vec::new, |l| {
        words
            .iter()
            .zip(cut_by(&words, l))
            .filter(|(_, cut)| *cut)
            .map(|(w, _)| w.id.clone())
            .collect()
    });
    EditSummary {
        fillers: fillers(&words, list),
        original_secs,
        edited_secs: list.map_or(original_secs, EditList::duration_secs),
        words_cut: cut_ids.len(),
        cut_ids,
        modified_unix_ms: project.modified_unix_ms,
        joins: list.map_or(0, EditList::joins),
        edit,
    }
}

/// The recording and words an edit of the project works on.
fn editable(
    store: &ProjectStore,
    project: &Project,
) -> Result<(PathBuf, Vec<WordRef>), WorkstationError> {
    let source = project
        .source_audio
        .as_deref()
        .ok_or(WorkstationError::NothingToEdit)?;
    let words = words_of(project);
    if words.is_empty() {
        return Err(WorkstationError::NothingToEdit);
    }
    Ok((project_file_in(store, &project.id, source)?, words))
}

/// `intent` held to the bounds of every front end, for `project`'s recording (as long as its
/// duration or its last word, whichever is later).
fn check_intent(
    intent: &EditIntent,
    project: &Project,
    words: &[WordRef],
) -> Result<(), WorkstationError> {
    let recording = project
        .duration_secs
        .max(words.last().map_or(0.0, |w| w.end));
    intent.check(recording).map_err(WorkstationError::BadEdit)
}

/// The project, its edit (checked whole) and the recording it cuts.
fn edited(
    store: &ProjectStore,
    id: &str,
) -> Result<(Project, RecordingEdit, PathBuf), WorkstationError> {
    let project = store.open(id)?;
    let edit = project.edit.clone().ok_or(WorkstationError::NoEdit)?;
    edit.list
        .check(edit.source_secs)
        .map_err(WorkstationError::BadEdit)?;
    let (path, _) = editable(store, &project)?;
    Ok((project, edit, path))
}

impl Workstation {
    /// Applies `change` to the project's edit (nothing asked: shows it; `clear` alone: removes
    /// it) and returns the edit as it then stands.
    pub async fn change_edit(
        &self,
        project_id: &str,
        change: EditChange,
        cancel: CancellationToken,
    ) -> Result<EditSummary, WorkstationError> {
        let project = self.open_project(project_id).await?;
        if !change.asks_anything() {
            return if change.clear {
                self.clear_edit(project_id).await
            } else {
                Ok(summary(&project))
            };
        }
        let intent = change.applied_to(&project)?;
        self.edit_recording(project_id, intent, cancel).await
    }

    /// Makes the project's edit what `intent` asks (the edit before it is kept as a version):
    /// the recording is decoded once to find where each cut is quietest, and the room tone.
    pub async fn edit_recording(
        &self,
        project_id: &str,
        intent: EditIntent,
        cancel: CancellationToken,
    ) -> Result<EditSummary, WorkstationError> {
        let (store, id) = (self.store().clone(), project_id.to_string());
        blocking(move || {
            let project = store.open(&id)?;
            let (path, words) = editable(&store, &project)?;
            check_intent(&intent, &project, &words)?;
            let timed: Vec<TimedWord> = words
                .iter()
                .map(|w| TimedWord {
                    start: w.start,
                    end: w.end,
                    punctuated: w.text.ends_with(|c: char| c.is_ascii_punctuation()),
                })
                .collect();
            let mut request = request(&words, &intent);
            let decode = Decode {
                cancel: cancel.clone(),
                ..Decode::streamed()
            };
            // One decode for the recording's loudness: its pauses, where the words really
            // are, and its room tone.
            let mut loudness = Loudness::default();
            let decoded = decode.file_into(&path, &mut loudness).map_err(cancelled)?;
            let source_secs = decoded.duration_secs();
            let pauses = loudness.pauses();
            let timed = snap_to_pauses(&timed, &pauses);
            request.pauses = Some(pauses.clone());
            let tone = intent
                .room_tone
                .then(|| loudness.room_tone(&pauses))
                .flatten();
            // Where the plan will look for quiet, then a decode that gathers it (and stops
            // after the last place).
            let wanted = std::cell::RefCell::new(Wanted::default());
            plan(&timed, source_secs, &request, &wanted, tone);
            let mut quiet = QuietSamples::new(wanted.into_inner().windows);
            decode.file_into(&path, &mut quiet).map_err(cancelled)?;
            let list = plan(&timed, source_secs, &request, &quiet, tone);
            list.check(source_secs).map_err(WorkstationError::BadEdit)?;
            let edit = RecordingEdit {
                intent,
                list,
                word_times: timed
                    .iter()
                    .map(|w| TimeSpan {
                        start: w.start,
                        end: w.end,
                    })
                    .collect(),
                source_secs,
                sample_rate: decoded.sample_rate,
                made_unix_ms: unix_ms(),
            };
            let planned_on = (project.source_audio.clone(), words.len());
            let (project, ()) =
                store.update_keeping_version(&id, "before changing the edit", |p| {
                    if (p.source_audio.clone(), words_of(p).len()) != planned_on {
                        return Err(ProjectError::ChangedElsewhere {
                            name: p.name.clone(),
                        });
                    }
                    p.edit = Some(edit);
                    Ok(())
                })?;
            Ok(summary(&project))
        })
        .await
    }

    /// Plays the edited recording from `from_secs` of the original (a point cut away: from
    /// the next stretch kept) to its end, or until `cancel`, rendering as it plays: the joins
    /// sound as the export's do, from any point of an hour-long recording at once.
    pub async fn play_edited(
        &self,
        project_id: &str,
        from_secs: f64,
        cancel: CancellationToken,
    ) -> Result<(), WorkstationError> {
        if !from_secs.is_finite() || from_secs < 0.0 {
            return Err(WorkstationError::BadEdit(format!(
                "play from {from_secs} s: a time in the recording"
            )));
        }
        let (store, id) = (self.store().clone(), project_id.to_string());
        let (path, list) = blocking(move || {
            let (_, edit, path) = edited(&store, &id)?;
            Ok::<_, WorkstationError>((path, edit.list))
        })
        .await?;
        self.services()
            .audio_lane()
            .run("playback", Priority::Interactive, cancel, move |cancel| {
                play_edit(&path, &list, from_secs, cancel).map(|_| ())
            })
            .await
            .map_err(WorkstationError::Rejected)??;
        Ok(())
    }

    /// Removes the project's edit (kept as a version): the recording plays whole again.
    async fn clear_edit(&self, project_id: &str) -> Result<EditSummary, WorkstationError> {
        let (store, id) = (self.store().clone(), project_id.to_string());
        blocking(move || {
            let (project, ()) =
                store.update_keeping_version(&id, "before removing the edit", |p| {
                    p.edit = None;
                    Ok::<_, WorkstationError>(())
                })?;
            Ok(summary(&project))
        })
        .await
    }

    /// Writes the edited recording, its transcript re-timed, or its cut list (at `fps`) to
    /// `out`, or else to `exports/<project>-edited.<ext>` in the project; returns where.
    pub async fn export_edited(
        &self,
        project_id: &str,
        format: EditedFormat,
        fps: u32,
        out: Option<PathBuf>,
        cancel: CancellationToken,
    ) -> Result<PathBuf, WorkstationError> {
        if !FRAME_RATES.contains(&fps) {
            return Err(WorkstationError::BadEdit(format!(
                "{fps} frames a second; cut lists are written at {FRAME_RATES:?}"
            )));
        }
        let (store, id) = (self.store().clone(), project_id.to_string());
        let temp_dir = self.services().env().temp_dir.clone();
        blocking(move || {
            let (project, edit, path) = edited(&store, &id)?;
            let relative = format!("exports/{}-edited.{}", project.id, format.extension());
            let text = match format {
                EditedFormat::Audio(audio) => {
                    let decode = Decode {
                        cancel,
                        ..Decode::streamed()
                    };
                    let mut file = render_audio(&path, &edit.list, &decode, audio, &temp_dir)?;
                    return write_out(&store, &project, &relative, out.as_deref(), &mut file);
                }
                EditedFormat::Transcript(f) => {
                    render(&edit.list.retime(&placed_transcript(&project)), f)
                }
                EditedFormat::CutList(f) => {
                    let absolute = std::path::absolute(&path).unwrap_or(path.clone());
                    let url = url::Url::from_file_path(&absolute)
                        .map(String::from)
                        .unwrap_or_else(|()| absolute.display().to_string());
                    let name = path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let has_video = path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
                        VIDEO_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str())
                    });
                    CutList {
                        title: &project.name,
                        source_name: &name,
                        source_url: &url,
                        source_secs: edit.source_secs,
                        sample_rate: edit.sample_rate,
                        fps,
                        has_video,
                        edit: &edit.list,
                    }
                    .render(f)
                }
            };
            write_out(
                &store,
                &project,
                &relative,
                out.as_deref(),
                &mut std::io::Cursor::new(text.into_bytes()),
            )
        })
        .await
    }
}

/// A decode's failure, a cancelled one as the cancellation it is.
fn cancelled(e: AudioError) -> WorkstationError {
    match e {
        AudioError::Cancelled { .. } => WorkstationError::Cancelled,
        e => e.into(),
    }
}

/// Containers whose recordings have a picture the cut list should cut too.
const VIDEO_EXTENSIONS: [&str; 4] = ["mp4", "mov", "mkv", "webm"];

/// The edited recording in `format`, in an unnamed temporary file read from its start.
fn render_audio(
    path: &Path,
    list: &EditList,
    decode: &Decode,
    format: SpeechFormat,
    temp_dir: &Path,
) -> Result<std::fs::File, WorkstationError> {
    let failed = |e: std::io::Error| AudioError::Write {
        path: temp_dir.to_path_buf(),
        message: e.to_string(),
    };
    if format == SpeechFormat::Wav {
        // A WAV with its real length in its header, written as it is made.
        let mut wav: Option<WavOnDisk> = None;
        let mut write = |audio: &Audio| -> Result<(), AudioError> {
            let on_disk = match &mut wav {
                Some(w) => w,
                None => wav.insert(WavOnDisk::create(temp_dir, audio.sample_rate)?),
            };
            on_disk.wav.append(audio)
        };
        render_edit(path, list, decode, &mut write).map_err(cancelled)?;
        let wav = wav.ok_or(WorkstationError::NothingToExport)?;
        return Ok(wav.into_file()?);
    }
    let mut file = tempfile::tempfile_in(temp_dir).map_err(failed)?;
    let mut encoder =
        StreamEncoder::new(format).map_err(|e| WorkstationError::BadEdit(e.to_string()))?;
    let encoding = |e: headroom_speech::audio::EncodeError| AudioError::Write {
        path: temp_dir.to_path_buf(),
        message: e.to_string(),
    };
    {
        let mut writer = std::io::BufWriter::new(&mut file);
        let mut write = |audio: &Audio| -> Result<(), AudioError> {
            let bytes = encoder.push(audio).map_err(encoding)?;
            writer.write_all(&bytes).map_err(failed)
        };
        render_edit(path, list, decode, &mut write).map_err(cancelled)?;
        let end = encoder.finish_whole().map_err(encoding)?;
        writer.write_all(&end.tail).map_err(failed)?;
        writer.flush().map_err(failed)?;
        // A header that says the length now it is known (FLAC's), over the one written first.
        if let Some(header) = end.header {
            drop(writer);
            file.rewind().map_err(failed)?;
            file.write_all(&header).map_err(failed)?;
        }
    }
    file.rewind().map_err(failed)?;
    Ok(file)
}

/// Writes `content` to `out` (atomically), or else to `relative` in the project.
fn write_out(
    store: &ProjectStore,
    project: &Project,
    relative: &str,
    out: Option<&Path>,
    content: &mut dyn std::io::Read,
) -> Result<PathBuf, WorkstationError> {
    match out {
        Some(path) => {
            headroom_base::fsutil::copy_atomic_from(content, path).map_err(|e| {
                AudioError::Write {
                    path: path.to_path_buf(),
                    message: e.to_string(),
                }
            })?;
            Ok(path.to_path_buf())
        }
        None => Ok(store.write_file_from(project, relative, content)?),
    }
}
