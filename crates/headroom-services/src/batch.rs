//! Many files at once, with one set of rules for every front end (`headroom transcribe DIR
//! --out OUT`, the app's "Transcribe several files"):
//! - inputs are classified once ([`expand_inputs`]): a folder gives its audio files
//!   ([`AUDIO_EXTENSIONS`]), sorted, without hidden files or subfolders; a file reached twice
//!   counts once;
//! - each file is checked before any work is spent on it (a regular file of audio Headroom
//!   reads), and a file whose output is already current is skipped ([`BatchWork::is_current`]);
//! - an error about the command rather than the file (a model not installed, an unknown
//!   language) stops the batch at the first file, since every other would fail the same way;
//! - any other error is that file's [`FileFailure`], with a typed [`FailureReason`] each front
//!   end words in its language, and the others go on;
//! - cancelling stops at once and keeps what is finished.

use crate::speech::{AudioInput, SpeechError};
use headroom_speech::asr::AsrError;
pub use headroom_speech::audio::AUDIO_EXTENSIONS;
use headroom_speech::audio::{AudioError, Decode};
use serde::Serialize;
use std::collections::HashSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// Why a file of a batch was not done, as a code the front ends word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[cfg_attr(feature = "typescript", ts(rename = "FileFailureReason"))]
#[serde(rename_all = "snake_case")]
pub enum FailureReason {
    /// A folder given as input could not be listed.
    FolderUnreadable,
    /// A folder given as input has no audio files in it.
    EmptyFolder,
    /// Missing, not a regular file, or not readable.
    Unreadable,
    /// Not audio Headroom reads: an unknown format, damaged, silent.
    NotAudio,
    /// Over a bound on what one file may be (its length, its decoded size).
    TooLarge,
    /// The lanes refused the work.
    Refused,
    /// The work itself failed (the engine's message says how).
    Failed,
}

/// A file of a batch that was not done, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct FileFailure {
    #[cfg_attr(feature = "typescript", ts(type = "string"))]
    pub path: PathBuf,
    pub reason: FailureReason,
    /// The detail in English (the engine's words), shown beside the reason.
    pub message: String,
}

/// An error a file's work ends in, as the batch rules read it.
pub trait BatchError: std::fmt::Display {
    /// About the command, not the file: every other input would fail the same way.
    fn fails_every_input(&self) -> bool;
    /// Why the file failed.
    fn reason(&self) -> FailureReason;
}

impl BatchError for SpeechError {
    fn fails_every_input(&self) -> bool {
        matches!(
            self,
            SpeechError::Model(_)
                | SpeechError::Asr(AsrError::UnknownLanguage(_))
                | SpeechError::KnownSpeaker { .. }
        )
    }

    fn reason(&self) -> FailureReason {
        match self {
            SpeechError::Audio(e) => audio_failure(e),
            SpeechError::Rejected(_) => FailureReason::Refused,
            _ => FailureReason::Failed,
        }
    }
}

/// Why a file's audio failed, by its decoding error.
pub fn audio_failure(error: &AudioError) -> FailureReason {
    match error {
        AudioError::Read { .. } => FailureReason::Unreadable,
        AudioError::Empty { .. }
        | AudioError::Unsupported { .. }
        | AudioError::Corrupt { .. }
        | AudioError::Silent { .. }
        | AudioError::DecoderFailed { .. } => FailureReason::NotAudio,
        AudioError::TooLong { .. } | AudioError::Refused { .. } => FailureReason::TooLarge,
        _ => FailureReason::Failed,
    }
}

impl FileFailure {
    pub fn of(path: &Path, error: &impl BatchError) -> FileFailure {
        FileFailure {
            path: path.to_path_buf(),
            reason: error.reason(),
            message: error.to_string(),
        }
    }
}

/// The inputs with each folder replaced by its audio files.
#[derive(Debug, Default, PartialEq)]
pub struct Expanded {
    pub files: Vec<PathBuf>,
    /// Folders that could not be listed.
    pub failures: Vec<FileFailure>,
    /// Folders with no audio file in them.
    pub empty_folders: Vec<PathBuf>,
}

/// Each file input as given (one that is not audio fails its check, and is reported); each
/// folder's audio files, sorted by name, without hidden files or subfolders (a folder of
/// recordings is rarely a tree, and descending into one unasked could do far more than meant).
/// A file reached twice is kept once, at its first place.
pub fn expand_inputs(inputs: &[PathBuf]) -> Expanded {
    let mut expanded = Expanded::default();
    let mut seen = HashSet::new();
    let mut keep = |file: PathBuf, files: &mut Vec<PathBuf>| {
        if seen.insert(std::fs::canonicalize(&file).unwrap_or_else(|_| file.clone())) {
            files.push(file);
        }
    };
    for input in inputs {
        if !input.is_dir() {
            keep(input.clone(), &mut expanded.files);
            continue;
        }
        let mut audio = match audio_files_in(input) {
            Ok(audio) => audio,
            Err(e) => {
                expanded.failures.push(FileFailure {
                    path: input.clone(),
                    reason: FailureReason::FolderUnreadable,
                    message: format!("cannot list the folder: {e}"),
                });
                continue;
            }
        };
        if audio.is_empty() {
            expanded.empty_folders.push(input.clone());
        }
        audio.sort();
        for file in audio {
            keep(file, &mut expanded.files);
        }
    }
    expanded
}

fn audio_files_in(folder: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(folder)? {
        let path = entry?.path();
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if !hidden && path.is_file() && is_audio_name(&path) {
            files.push(path);
        }
    }
    Ok(files)
}

/// Whether `path` has one of the [`AUDIO_EXTENSIONS`].
fn is_audio_name(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| AUDIO_EXTENSIONS.iter().any(|a| a.eq_ignore_ascii_case(e)))
}

/// What a front end does with each file of a batch.
pub trait BatchWork {
    /// What a file's work makes (a transcript written, a project).
    type Made;
    type Error: BatchError;

    /// Whether the file's output is already current, so it is skipped unopened (the CLI's
    /// manifest). By default nothing is.
    fn is_current(&mut self, _index: usize, _path: &Path) -> bool {
        false
    }

    /// Told when a file fails (its check or its work), as it happens.
    fn failed(&mut self, _index: usize, _failure: &FileFailure) {}

    /// The file's work, on a checked input. `Ok(None)`: it stopped because of `cancel`.
    fn run(
        &mut self,
        index: usize,
        path: &Path,
        input: AudioInput,
        cancel: &CancellationToken,
    ) -> impl Future<Output = Result<Option<Self::Made>, Self::Error>>;
}

/// What became of one file.
#[derive(Debug)]
pub enum FileResult<T> {
    Done(T),
    /// Its output was already current.
    Skipped,
    Failed(FileFailure),
}

/// One file's outcome.
#[derive(Debug)]
pub struct FileOutcome<T> {
    pub path: PathBuf,
    pub result: FileResult<T>,
}

/// How a batch ended.
#[derive(Debug)]
pub enum BatchEnd<E> {
    /// Every file had its turn.
    Finished,
    /// Cancelled: the files after the last outcome were not tried.
    Cancelled,
    /// Stopped at `path` by an error every other input would hit too.
    Stopped { path: PathBuf, error: E },
}

/// The outcomes of the files tried, in order, and how the batch ended.
#[derive(Debug)]
pub struct BatchReport<T, E> {
    pub outcomes: Vec<FileOutcome<T>>,
    pub end: BatchEnd<E>,
}

impl<T, E> BatchReport<T, E> {
    pub fn done(&self) -> usize {
        self.count(|r| matches!(r, FileResult::Done(_)))
    }

    pub fn skipped(&self) -> usize {
        self.count(|r| matches!(r, FileResult::Skipped))
    }

    pub fn failures(&self) -> impl Iterator<Item = &FileFailure> {
        self.outcomes.iter().filter_map(|o| match &o.result {
            FileResult::Failed(f) => Some(f),
            _ => None,
        })
    }

    fn count(&self, which: impl Fn(&FileResult<T>) -> bool) -> usize {
        self.outcomes.iter().filter(|o| which(&o.result)).count()
    }
}

/// Checks `path` before any work: a regular file, of a format Headroom reads, within the
/// bounds its header declares.
async fn checked(path: &Path) -> Result<AudioInput, SpeechError> {
    let path = path.to_path_buf();
    let check = move || -> Result<AudioInput, SpeechError> {
        let input = AudioInput::from_file(&path)?;
        Decode::streamed().probe(&path)?;
        Ok(input)
    };
    match tokio::task::spawn_blocking(check).await {
        Ok(checked) => checked,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// Runs `work` on each of `files` in order, by the rules above.
pub async fn run_batch<W: BatchWork>(
    files: &[PathBuf],
    work: &mut W,
    cancel: &CancellationToken,
) -> BatchReport<W::Made, W::Error> {
    let mut outcomes = Vec::with_capacity(files.len());
    let fail = |work: &mut W, index: usize, failure: FileFailure, outcomes: &mut Vec<_>| {
        work.failed(index, &failure);
        outcomes.push(FileOutcome {
            path: failure.path.clone(),
            result: FileResult::Failed(failure),
        });
    };
    for (index, path) in files.iter().enumerate() {
        if cancel.is_cancelled() {
            return BatchReport {
                outcomes,
                end: BatchEnd::Cancelled,
            };
        }
        tracing::info!(file = %path.display(), "batch: {} of {}", index + 1, files.len());
        if work.is_current(index, path) {
            outcomes.push(FileOutcome {
                path: path.clone(),
                result: FileResult::Skipped,
            });
            continue;
        }
        let input = match checked(path).await {
            Ok(input) => input,
            Err(e) => {
                fail(work, index, FileFailure::of(path, &e), &mut outcomes);
                continue;
            }
        };
        match work.run(index, path, input, cancel).await {
            Ok(Some(made)) => outcomes.push(FileOutcome {
                path: path.clone(),
                result: FileResult::Done(made),
            }),
            // Whatever a job cut short by cancelling says, it is no fault of the file.
            Ok(None) => break,
            Err(_) if cancel.is_cancelled() => break,
            Err(error) if error.fails_every_input() => {
                return BatchReport {
                    outcomes,
                    end: BatchEnd::Stopped {
                        path: path.clone(),
                        error,
                    },
                }
            }
            Err(error) => fail(work, index, FileFailure::of(path, &error), &mut outcomes),
        }
    }
    // The loop ends early only for a cancel: the file in progress has no outcome.
    let end = match outcomes.len() < files.len() {
        true => BatchEnd::Cancelled,
        false => BatchEnd::Finished,
    };
    BatchReport { outcomes, end }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_speech::audio::{write_wav, Audio};
    use headroom_speech::models::ModelError;

    /// What the work does with each file, by the file's stem: `ok`, `fails` (this file only),
    /// `fatal` (every file would), `current` (already done), `cancels` (the user cancels).
    struct Scripted {
        cancel: CancellationToken,
        ran: Vec<String>,
        told: Vec<(usize, FailureReason)>,
    }

    impl BatchWork for Scripted {
        type Made = String;
        type Error = SpeechError;

        fn is_current(&mut self, _index: usize, path: &Path) -> bool {
            stem(path).starts_with("current")
        }

        fn failed(&mut self, index: usize, failure: &FileFailure) {
            self.told.push((index, failure.reason));
        }

        async fn run(
            &mut self,
            _index: usize,
            path: &Path,
            _input: AudioInput,
            _cancel: &CancellationToken,
        ) -> Result<Option<String>, SpeechError> {
            let name = stem(path);
            self.ran.push(name.clone());
            let model = |name: &str| ModelError::NotInstalled { name: name.into() };
            match name.split('-').next().unwrap() {
                "fails" => Err(SpeechError::Diarize("this file only".into())),
                "fatal" => Err(SpeechError::Model(model("whisper-base"))),
                "cancels" => {
                    self.cancel.cancel();
                    Err(SpeechError::Diarize("stopped".into()))
                }
                _ => Ok(Some(name)),
            }
        }
    }

    fn stem(path: &Path) -> String {
        path.file_stem().unwrap().to_string_lossy().into_owned()
    }

    /// Real WAV files named `names` (and `junk.wav`, which is not audio), in `dir`.
    fn files(dir: &Path, names: &[&str]) -> Vec<PathBuf> {
        let tone = Audio {
            samples: (0..1600).map(|i| (i as f32 * 0.05).sin() * 0.3).collect(),
            sample_rate: 16_000,
        };
        names
            .iter()
            .map(|name| {
                let path = dir.join(format!("{name}.wav"));
                match *name {
                    "junk" => std::fs::write(&path, "not a recording").unwrap(),
                    _ => write_wav(&path, &tone).unwrap(),
                }
                path
            })
            .collect()
    }

    async fn run(names: &[&str]) -> (BatchReport<String, SpeechError>, Scripted) {
        let dir = tempfile::tempdir().unwrap();
        let cancel = CancellationToken::new();
        let mut work = Scripted {
            cancel: cancel.clone(),
            ran: Vec::new(),
            told: Vec::new(),
        };
        let report = run_batch(&files(dir.path(), names), &mut work, &cancel).await;
        (report, work)
    }

    #[tokio::test]
    async fn a_bad_file_is_its_own_typed_failure_and_the_others_go_on() {
        let (report, work) = run(&["ok-1", "junk", "fails-1", "current-1", "ok-2"]).await;
        assert!(matches!(report.end, BatchEnd::Finished), "{:?}", report.end);
        assert_eq!(report.done(), 2);
        assert_eq!(report.skipped(), 1);
        // The file that is not audio is refused by its check: its work never ran.
        assert_eq!(work.ran, ["ok-1", "fails-1", "ok-2"]);
        assert_eq!(
            work.told,
            [(1, FailureReason::NotAudio), (2, FailureReason::Failed)]
        );
        let failed: Vec<String> = report.failures().map(|f| stem(&f.path)).collect();
        assert_eq!(failed, ["junk", "fails-1"]);
        assert!(report.failures().all(|f| !f.message.is_empty()));
    }

    #[tokio::test]
    async fn an_error_every_file_would_hit_stops_the_batch_at_the_first() {
        let (report, work) = run(&["ok-1", "fatal-1", "ok-2", "fatal-2"]).await;
        let BatchEnd::Stopped { path, error } = &report.end else {
            panic!("{:?}", report.end);
        };
        assert_eq!(stem(path), "fatal-1");
        assert!(error.to_string().contains("whisper-base"), "{error}");
        assert_eq!(work.ran, ["ok-1", "fatal-1"], "nothing after it is tried");
        assert_eq!(report.outcomes.len(), 1);
    }

    #[tokio::test]
    async fn cancelling_keeps_what_is_finished_and_blames_no_file() {
        let (report, work) = run(&["ok-1", "cancels-1", "ok-2"]).await;
        assert!(
            matches!(report.end, BatchEnd::Cancelled),
            "{:?}",
            report.end
        );
        assert_eq!(work.ran, ["ok-1", "cancels-1"]);
        assert_eq!(report.done(), 1);
        assert_eq!(
            report.failures().count(),
            0,
            "the cancelled file is not a failure"
        );
    }

    #[test]
    fn a_folder_gives_its_audio_files_sorted_and_a_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("recordings");
        std::fs::create_dir_all(folder.join("nested")).unwrap();
        for name in [
            "b.mp3",
            "a.WAV",
            "c.flac",
            "notes.txt",
            ".hidden.wav",
            "nested/deep.wav",
        ] {
            std::fs::write(folder.join(name), b"x").unwrap();
        }
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let given = dir.path().join("given.txt");
        let missing = dir.path().join("missing.wav");

        let expanded = expand_inputs(&[
            given.clone(),
            folder.join("b.mp3"),
            folder.clone(),
            empty.clone(),
            missing.clone(),
        ]);
        assert_eq!(
            expanded.files,
            vec![
                given,
                folder.join("b.mp3"),
                folder.join("a.WAV"),
                folder.join("c.flac"),
                missing
            ],
            "files given are kept whatever their name; b.mp3 is not repeated"
        );
        assert_eq!(expanded.empty_folders, vec![empty]);
        assert!(expanded.failures.is_empty());
    }
}
