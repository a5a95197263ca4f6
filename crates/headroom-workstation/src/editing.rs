//! Editing a project's recording by editing its words: cut the fillers the cleanup rules find,
//! struck words and passages, shorten long pauses; hear and export the result, and hand the
//! cut list to a video editor. The edit is non-destructive: the project keeps what was asked
//! ([`EditIntent`]) and the stretches of the original kept ([`EditList`]); the original is
//! never changed, and each change keeps the one before as a version (undo).

use crate::projects::{Project, ProjectError, ProjectStore};
use crate::workstation::{blocking, project_file_in, WavOnDisk, Workstation, WorkstationError};
use headroom_base::clock::unix_ms;
use headroom_core::cleanup::rules::{disfluent_words, Disfluency};
use headroom_speech::asr::export::{render, ExportFormat};
use headroom_speech::audio::{Audio, AudioError, Decode, SpeechFormat, StreamEncoder};
use headroom_speech::edit::interchange::{CutList, CutListFormat, FRAME_RATES};
use headroom_speech::edit::plan::{QuietSamples, Wanted};
use headroom_speech::edit::{
    plan, render_edit, snap_to_pauses, EditList, EditRequest, Loudness, TimedWord,
};
use serde::{Deserialize, Serialize};
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// Most stretches one edit cuts by hand (struck words and passages).
pub const MAX_CUTS: usize = 10_000;
/// Most words kept by hand against the edit's other cuts.
pub const MAX_KEPT_WORDS: usize = 100_000;
/// The pause limits an edit may ask for, in seconds.
pub const PAUSE_LIMITS: (f64, f64) = (0.05, 60.0);

/// A stretch of the original, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct TimeSpan {
    pub start: f64,
    pub end: f64,
}

impl std::str::FromStr for TimeSpan {
    type Err = String;
    /// `START-END` in seconds (`12.30-14.85`).
    fn from_str(value: &str) -> Result<TimeSpan, String> {
        let (a, b) = value
            .split_once('-')
            .ok_or_else(|| format!("{value:?}: give START-END in seconds, e.g. 12.30-14.85"))?;
        let number = |t: &str| {
            t.trim()
                .parse::<f64>()
                .ok()
                .filter(|t| t.is_finite() && *t >= 0.0)
                .ok_or_else(|| format!("{t:?} in {value:?} is not a time in seconds"))
        };
        let (start, end) = (number(a)?, number(b)?);
        if end <= start {
            return Err(format!("{value:?}: the end must come after the start"));
        }
        Ok(TimeSpan { start, end })
    }
}

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
    /// Words to cut, by id (`SEGMENT:WORD`).
    pub strike: Vec<String>,
    /// Words to keep whatever else would cut them, by id.
    pub keep: Vec<String>,
    /// Start again from the whole recording (alone: remove the edit).
    pub clear: bool,
}

impl EditChange {
    fn asks_anything(&self) -> bool {
        self.cut_fillers.is_some()
            || self.max_pause.is_some()
            || self.room_tone.is_some()
            || !self.cuts.is_empty()
            || !self.strike.is_empty()
            || !self.keep.is_empty()
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
        let mut intent = match (&project.edit, self.clear) {
            (Some(edit), false) => edit.intent.clone(),
            _ => EditIntent::default(),
        };
        if let Some(on) = self.cut_fillers {
            intent.cut_fillers = on;
        }
        if let Some(pause) = self.max_pause {
            intent.max_pause = (pause > 0.0).then_some(pause);
        }
        if let Some(on) = self.room_tone {
            intent.room_tone = on;
        }
        intent.cuts.extend(&self.cuts);
        let words: std::collections::HashMap<String, WordRef> = words_of(project)
            .into_iter()
            .map(|w| (w.id.clone(), w))
            .collect();
        let word = |id: &String| {
            words
                .get(id.trim())
                .ok_or_else(|| WorkstationError::NoSuchWord(id.clone()))
        };
        for id in &self.strike {
            intent.struck_words.push(word(id)?.middle());
        }
        for id in &self.keep {
            intent.kept_words.push(word(id)?.middle());
        }
        Ok(intent)
    }
}

/// What the user asked of the edit; the kept stretches are made from it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(default)]
pub struct EditIntent {
    /// Cut every filler, repeat and false start the cleanup rules find.
    pub cut_fillers: bool,
    /// Shorten pauses longer than this many seconds to it.
    pub max_pause: Option<f64>,
    /// Shortened pauses sound as the recording's room tone instead of their own audio.
    pub room_tone: bool,
    /// Passages cut by hand. A word goes when its middle (where the edit places it, in the
    /// recording's pauses) is inside one.
    pub cuts: Vec<TimeSpan>,
    /// Words cut by hand, each by a time inside it as transcribed (the transcript's own word
    /// times, which splitting a segment or placing the words does not move).
    pub struck_words: Vec<f64>,
    /// Words kept whatever else would cut them, each by a time inside it as transcribed.
    pub kept_words: Vec<f64>,
}

impl EditIntent {
    /// The bounds every front end's edit is held to, for a recording of `duration` seconds.
    pub fn check(&self, duration: f64) -> Result<(), WorkstationError> {
        let refuse = |why: String| Err(WorkstationError::BadEdit(why));
        if self.cuts.len() > MAX_CUTS {
            return refuse(format!(
                "{} stretches cut; at most {MAX_CUTS}",
                self.cuts.len()
            ));
        }
        if self.struck_words.len() > MAX_CUTS {
            return refuse(format!(
                "{} words struck; at most {MAX_CUTS}",
                self.struck_words.len()
            ));
        }
        if self.kept_words.len() > MAX_KEPT_WORDS {
            return refuse(format!(
                "{} words kept by hand; at most {MAX_KEPT_WORDS}",
                self.kept_words.len()
            ));
        }
        let (least, most) = PAUSE_LIMITS;
        if let Some(p) = self.max_pause.filter(|p| !(least..=most).contains(p)) {
            return refuse(format!("a pause limit of {p} s; it is {least}–{most} s"));
        }
        let within = |t: f64| t.is_finite() && (0.0..=duration + 1e-6).contains(&t);
        if let Some(c) = self
            .cuts
            .iter()
            .find(|c| !within(c.start) || !within(c.end) || c.end <= c.start)
        {
            return refuse(format!(
                "a cut {}–{} s is not a stretch of the recording's {duration:.2} s",
                c.start, c.end
            ));
        }
        if let Some(t) = self
            .kept_words
            .iter()
            .chain(&self.struck_words)
            .find(|&&t| !within(t))
        {
            return refuse(format!("a word at {t} s is not in the recording"));
        }
        Ok(())
    }
}

/// A project's edit of its recording: what was asked, and what it keeps of the original.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct RecordingEdit {
    pub intent: EditIntent,
    pub list: EditList,
    /// The transcript's words (in order) as the edit placed them: their recognized times
    /// moved to the pauses heard in the recording.
    #[serde(default)]
    pub word_times: Vec<TimeSpan>,
    /// The original as it was decoded for the edit: its length and rate.
    pub source_secs: f64,
    pub sample_rate: u32,
    pub made_unix_ms: u64,
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
        let audio = match lower.as_str() {
            "wav" => Some(SpeechFormat::Wav),
            "flac" => Some(SpeechFormat::Flac),
            "mp3" => Some(SpeechFormat::Mp3),
            "opus" | "ogg" => Some(SpeechFormat::Opus),
            _ => None,
        };
        if let Some(f) = audio {
            return Ok(EditedFormat::Audio(f));
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

/// The fillers the rules find among `words`, and whether `list` cuts each.
fn fillers(words: &[WordRef], list: Option<&EditList>) -> Vec<FoundFiller> {
    let texts: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
    disfluent_words(&texts)
        .into_iter()
        .map(|(i, kind)| FoundFiller {
            word: words[i].clone(),
            kind,
            cut: list.is_some_and(|l| l.edited_time(words[i].middle()).is_none()),
        })
        .collect()
}

/// The words (by place) that hold one of `times`, a word's span as transcribed.
fn words_at(words: &[WordRef], times: &[f64]) -> Vec<usize> {
    let mut times = times.to_vec();
    times.sort_by(f64::total_cmp);
    (0..words.len())
        .filter(|&i| {
            let w = &words[i];
            let at = times.partition_point(|&t| t < w.start - 1e-6);
            times.get(at).is_some_and(|&t| t <= w.end + 1e-6)
        })
        .collect()
}

/// What `intent` asks of the words (as transcribed), for the planner (which also cuts the
/// words a passage holds).
fn request(words: &[WordRef], intent: &EditIntent) -> EditRequest {
    let mut cut_words: Vec<usize> = if intent.cut_fillers {
        let texts: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
        disfluent_words(&texts)
            .into_iter()
            .map(|(i, _)| i)
            .collect()
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
    let list = edit.as_ref().map(|e| &e.list);
    let original_secs = edit
        .as_ref()
        .map_or(project.duration_secs, |e| e.source_secs);
    EditSummary {
        fillers: fillers(&words, list),
        original_secs,
        edited_secs: list.map_or(original_secs, EditList::duration_secs),
        words_cut: list.map_or(0, |l| {
            words
                .iter()
                .filter(|w| l.edited_time(w.middle()).is_none())
                .count()
        }),
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

    /// The project's edit and the fillers its transcript has.
    pub async fn edit_summary(&self, project_id: &str) -> Result<EditSummary, WorkstationError> {
        let project = self.open_project(project_id).await?;
        Ok(summary(&project))
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
            intent.check(
                project
                    .duration_secs
                    .max(words.last().map_or(0.0, |w| w.end)),
            )?;
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
            let cancelled = |e: AudioError| match e {
                AudioError::Cancelled { .. } => WorkstationError::Cancelled,
                e => e.into(),
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
            quiet.finish();
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

    /// Removes the project's edit (kept as a version): the recording plays whole again.
    pub async fn clear_edit(&self, project_id: &str) -> Result<EditSummary, WorkstationError> {
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
            let project = store.open(&id)?;
            let edit = project.edit.clone().ok_or(WorkstationError::NoEdit)?;
            let (path, _) = editable(&store, &project)?;
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
    let cancelled = |e: AudioError| match e {
        AudioError::Cancelled { .. } => WorkstationError::Cancelled,
        e => e.into(),
    };
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
        let end = encoder.finish().map_err(encoding)?;
        writer.write_all(&end).map_err(failed)?;
        writer.flush().map_err(failed)?;
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
