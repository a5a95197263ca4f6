//! Many files at once: `headroom transcribe a.wav b.mp3 FOLDER --out OUT` writes one transcript
//! per input into OUT. A manifest there records, for each transcript, the input it came from
//! (path, size, modification time) and the options it was made with, so a second run skips
//! what is current and a run killed halfway goes on where it stopped: each transcript, then
//! the manifest, is written atomically and durably as soon as it is done. A bad input is
//! reported at the end; the others go on.

use super::{known_speakers, rendered, JobSettings, StderrLines, TranscribeArgs, EXIT_SOME_FAILED};
use crate::{cancel_on_ctrl_c, EXIT_CANCELLED};
use anyhow::Context;
use headroom_base::fsutil::{remove_stale_temporaries, sync_dir, write_atomic};
use headroom_core::admission::Priority;
use headroom_services::batch::{
    expand_inputs, run_batch, BatchEnd, BatchError, BatchWork, FailureReason, FileFailure,
    AUDIO_EXTENSIONS,
};
use headroom_services::speech::{AudioInput, SpeechError};
use headroom_speech::asr::export::ExportFormat;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

/// The manifest's file name in the out folder (hidden: it is not a transcript).
pub(super) const MANIFEST: &str = ".headroom-transcripts.json";

/// Bumped when the manifest's meaning changes; an older one is ignored (all made again).
const MANIFEST_VERSION: u32 = 1;

/// Where `headroom transcribe` writes.
#[derive(Debug, PartialEq)]
pub(super) enum Destination {
    /// One file to stdout or to the file `out`: the behaviour from before batches.
    One { file: PathBuf, out: Option<PathBuf> },
    /// One transcript per input in `folder`.
    Folder {
        inputs: Vec<PathBuf>,
        folder: PathBuf,
    },
}

/// One file (not a folder) with no --out or an --out that is not a folder is transcribed as
/// before; anything else is a batch, which needs --out naming a folder (existing or not).
pub(super) fn destination(inputs: &[PathBuf], out: Option<&Path>) -> anyhow::Result<Destination> {
    let names_a_folder = |out: &Path| {
        out.is_dir()
            || out
                .as_os_str()
                .to_string_lossy()
                .ends_with(std::path::is_separator)
    };
    match (inputs, out) {
        ([file], out) if !file.is_dir() && !out.is_some_and(names_a_folder) => {
            Ok(Destination::One {
                file: file.clone(),
                out: out.map(Path::to_path_buf),
            })
        }
        (_, None) => anyhow::bail!(
            "several inputs, or a folder, need --out FOLDER: the folder to write one \
             transcript per input into"
        ),
        (_, Some(out)) if out.exists() && !out.is_dir() => anyhow::bail!(
            "--out {}: with several inputs, or a folder, --out names a folder, and this is a file",
            out.display()
        ),
        (_, Some(out)) => Ok(Destination::Folder {
            inputs: inputs.to_vec(),
            folder: out.to_path_buf(),
        }),
    }
}

/// Each input's transcript name in the out folder: its stem and `extension` ("talk.txt").
/// Inputs sharing a stem are told apart by their own extension ("talk.wav.txt",
/// "talk.mp3.txt"); a name still taken (the same file name in two folders, or the manifest's)
/// is numbered in the order given ("talk.wav-2.txt"). Names are compared ignoring case, so
/// they stay distinct on a file system that ignores it.
pub(super) fn output_names(inputs: &[PathBuf], extension: &str) -> Vec<String> {
    let stem = |input: &Path| {
        input
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "transcript".to_string())
    };
    let mut stems: HashMap<String, usize> = HashMap::new();
    for input in inputs {
        *stems.entry(stem(input).to_lowercase()).or_default() += 1;
    }
    let mut taken = HashSet::from([MANIFEST.to_lowercase()]);
    inputs
        .iter()
        .map(|input| {
            let own_stem = stem(input);
            let base = if stems[&own_stem.to_lowercase()] > 1 {
                input
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or(own_stem)
            } else {
                own_stem
            };
            let mut name = format!("{base}.{extension}");
            let mut number = 2;
            while !taken.insert(name.to_lowercase()) {
                name = format!("{base}-{number}.{extension}");
                number += 1;
            }
            name
        })
        .collect()
}

/// Enough of a file to tell that it changed: where it is, its size, when it was modified.
/// Reading every input whole to hash it would make a rerun over a folder of long recordings
/// slow; size and time are what make and rsync trust.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct FileStamp {
    path: PathBuf,
    bytes: u64,
    modified_unix_ns: u64,
}

impl FileStamp {
    pub(super) fn of(file: &Path) -> std::io::Result<FileStamp> {
        let metadata = std::fs::metadata(file)?;
        let modified = metadata
            .modified()?
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Ok(FileStamp {
            path: std::fs::canonicalize(file)?,
            bytes: metadata.len(),
            modified_unix_ns: u64::try_from(modified.as_nanos()).unwrap_or(u64::MAX),
        })
    }
}

/// Every choice that changes what a transcript says: one made with other choices is not
/// current.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct OutputOptions {
    model: String,
    /// Redacted: the manifest is no place for a secret, and a key does not change the text.
    /// Several servers: each, sorted, after a comma (the same servers in another order make
    /// the same transcripts).
    server_url: Option<String>,
    /// Cut at pauses and heard in pieces (several servers, or `--per-server`), not in
    /// Whisper-window chunks in order. (Absent in a manifest from before: chunks.)
    #[serde(default)]
    pieces: bool,
    language: Option<String>,
    format: ExportFormat,
    words: bool,
    beam: usize,
    best_of: u16,
    prompt: Option<String>,
    guards: bool,
    keep_silence: bool,
    precision: String,
    speakers: Option<String>,
    /// Each known speaker's name and recording (`None`: unreadable).
    known_speakers: Vec<(String, Option<FileStamp>)>,
}

impl OutputOptions {
    pub(super) fn of(args: &TranscribeArgs) -> anyhow::Result<OutputOptions> {
        Ok(OutputOptions {
            model: args.model.clone(),
            server_url: args.servers().shown(),
            pieces: args.servers().in_pieces(),
            language: args.language.clone(),
            format: args.format,
            words: args.words,
            beam: args.beam,
            best_of: args.best_of,
            prompt: args.prompt.clone(),
            guards: !args.no_guards,
            keep_silence: args.keep_silence,
            precision: args.precision.name().to_string(),
            speakers: args.speakers.map(|count| count.to_string()),
            known_speakers: known_speakers(args)?
                .into_iter()
                .map(|(name, file)| (name.to_string(), FileStamp::of(file).ok()))
                .collect(),
        })
    }
}

/// What a transcript in the out folder was made from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Made {
    input: FileStamp,
    options: OutputOptions,
}

/// The out folder's record of its transcripts, by file name.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Manifest {
    version: u32,
    transcripts: BTreeMap<String, Made>,
}

impl Default for Manifest {
    fn default() -> Self {
        Manifest {
            version: MANIFEST_VERSION,
            transcripts: BTreeMap::new(),
        }
    }
}

/// The largest manifest read (hundreds of thousands of entries): a larger one is not one this
/// command wrote, and is read as none rather than held in memory.
const MAX_MANIFEST_BYTES: u64 = 64 << 20;

impl Manifest {
    /// The manifest in `folder`; none, or one that cannot be read, is empty (with a warning
    /// for the latter), so everything is transcribed again rather than wrongly skipped.
    pub(super) fn load(folder: &Path) -> Manifest {
        let path = folder.join(MANIFEST);
        let problem = match headroom_base::input::read_regular(&path, MAX_MANIFEST_BYTES) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Manifest::default(),
            Err(e) => e.to_string(),
            Ok(bytes) => match serde_json::from_slice::<Manifest>(&bytes) {
                Ok(manifest) if manifest.version == MANIFEST_VERSION => return manifest,
                Ok(manifest) => format!("it is version {}", manifest.version),
                Err(e) => e.to_string(),
            },
        };
        eprintln!(
            "headroom: ignoring {} ({problem}); every input is transcribed again",
            path.display()
        );
        Manifest::default()
    }

    /// Whether the transcript `name` in `folder` is there and was made as `made` says.
    pub(super) fn is_current(&self, name: &str, made: &Made, folder: &Path) -> bool {
        self.transcripts.get(name) == Some(made) && folder.join(name).is_file()
    }

    /// Records that the transcript `name` was made as `made` says, and writes the manifest
    /// (after the transcript itself, so it never names one that is not there).
    pub(super) fn record(&mut self, name: &str, made: Made, folder: &Path) -> anyhow::Result<()> {
        self.transcripts.insert(name.to_string(), made);
        let path = folder.join(MANIFEST);
        let bytes = serde_json::to_vec_pretty(self).expect("a manifest serializes");
        write_atomic(&path, &bytes).with_context(|| format!("cannot write {}", path.display()))
    }
}

/// How the inputs of a batch fared.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub transcribed: usize,
    pub skipped: usize,
    pub failures: Vec<FileFailure>,
}

impl Tally {
    /// The closing lines: counts of the `inputs`, then each failed input and why.
    pub(super) fn summary(&self, inputs: usize, folder: &Path) -> String {
        let mut text = format!(
            "{inputs} inputs: {} transcribed, {} skipped (already current), {} failed; \
             transcripts in {}",
            self.transcribed,
            self.skipped,
            self.failures.len(),
            folder.display()
        );
        if !self.failures.is_empty() {
            text.push_str("\nfailed:");
            for failure in &self.failures {
                let input = failure.path.display().to_string();
                // Decoding errors already name their file.
                if failure.message.contains(&input) {
                    text.push_str(&format!("\n  {}", failure.message));
                } else {
                    text.push_str(&format!("\n  {input}: {}", failure.message));
                }
            }
        }
        text
    }
}

/// Transcribes `inputs` (files and folders) into `folder`, one transcript each, as batch
/// work on the audio lane, by the services' batch rules ([`run_batch`]).
pub(super) async fn run(
    args: &TranscribeArgs,
    job: &JobSettings,
    inputs: &[PathBuf],
    folder: &Path,
) -> anyhow::Result<ExitCode> {
    let expanded = expand_inputs(inputs);
    for empty in &expanded.empty_folders {
        eprintln!(
            "headroom: {} has no audio files ({})",
            empty.display(),
            AUDIO_EXTENSIONS.join(", ")
        );
    }
    if expanded.files.is_empty() && expanded.failures.is_empty() {
        anyhow::bail!("nothing to transcribe: no audio files in the inputs given");
    }
    create_folder(folder)?;
    // Left by a run killed while writing; the manifest never names them.
    remove_stale_temporaries(folder);
    let mut work = IntoFolder {
        args,
        job,
        folder,
        names: output_names(&expanded.files, args.format.extension()),
        total: expanded.files.len(),
        manifest: Manifest::load(folder),
        options: OutputOptions::of(args)?,
        running: None,
    };
    let cancel = CancellationToken::new();
    cancel_on_ctrl_c(cancel.clone());
    let report = run_batch(&expanded.files, &mut work, &cancel).await;
    let inputs_seen = expanded.files.len() + expanded.failures.len();
    let tally = Tally {
        transcribed: report.done(),
        skipped: report.skipped(),
        failures: expanded
            .failures
            .into_iter()
            .chain(report.failures().cloned())
            .collect(),
    };
    eprintln!("{}", tally.summary(inputs_seen, folder));
    Ok(match report.end {
        BatchEnd::Stopped { path, error } => {
            return Err(anyhow::Error::new(error).context(format!(
                "stopped at {}, since every input would fail the same way",
                path.display()
            )))
        }
        BatchEnd::Cancelled => {
            eprintln!("headroom: cancelled; the same command again goes on with what is left");
            ExitCode::from(EXIT_CANCELLED)
        }
        BatchEnd::Finished if tally.failures.is_empty() => ExitCode::SUCCESS,
        BatchEnd::Finished => ExitCode::from(EXIT_SOME_FAILED),
    })
}

/// Why a file of the batch failed: the engine's error, its input's stamp unreadable, or its
/// transcript or the manifest not written (the out folder: every other file would fail too).
#[derive(Debug, thiserror::Error)]
enum FileError {
    #[error(transparent)]
    Speech(SpeechError),
    #[error("cannot read {path}: {source}")]
    Stamp {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Write(anyhow::Error),
}

impl BatchError for FileError {
    fn fails_every_input(&self) -> bool {
        match self {
            FileError::Speech(e) => e.fails_every_input(),
            FileError::Stamp { .. } => false,
            FileError::Write(_) => true,
        }
    }

    fn reason(&self) -> FailureReason {
        match self {
            FileError::Speech(e) => e.reason(),
            FileError::Stamp { .. } => FailureReason::Unreadable,
            FileError::Write(_) => FailureReason::Failed,
        }
    }
}

/// Each file's transcript into the out folder, recorded in its manifest.
struct IntoFolder<'a> {
    args: &'a TranscribeArgs,
    job: &'a JobSettings,
    folder: &'a Path,
    /// Each file's transcript name, by index.
    names: Vec<String>,
    total: usize,
    manifest: Manifest,
    options: OutputOptions,
    /// The file being transcribed (its progress line says how it ended).
    running: Option<usize>,
}

impl IntoFolder<'_> {
    fn position(&self, index: usize, path: &Path) -> String {
        format!("[{}/{}] {}", index + 1, self.total, path.display())
    }

    fn made(&self, path: &Path) -> std::io::Result<Made> {
        Ok(Made {
            input: FileStamp::of(path)?,
            options: self.options.clone(),
        })
    }
}

impl BatchWork for IntoFolder<'_> {
    type Made = ();
    type Error = FileError;

    fn is_current(&mut self, index: usize, path: &Path) -> bool {
        let name = &self.names[index];
        let current = self
            .made(path)
            .is_ok_and(|made| self.manifest.is_current(name, &made, self.folder));
        if current {
            eprintln!(
                "{}: skipped, {} is current",
                self.position(index, path),
                self.folder.join(name).display()
            );
        }
        current
    }

    fn failed(&mut self, index: usize, failure: &FileFailure) {
        // A file whose work failed has said so on its progress line.
        if self.running != Some(index) {
            eprintln!("{}: failed", self.position(index, &failure.path));
        }
    }

    async fn run(
        &mut self,
        index: usize,
        path: &Path,
        input: AudioInput,
        cancel: &CancellationToken,
    ) -> Result<Option<()>, FileError> {
        let made = self.made(path).map_err(|source| FileError::Stamp {
            path: path.to_path_buf(),
            source,
        })?;
        let position = self.position(index, path);
        let done_prefix = format!("{position}: ");
        let cancelled = format!("{position}: cancelled, not written");
        let failed = format!("{position}: failed");
        let lines = StderrLines {
            progress: position.clone(),
            done_prefix: &done_prefix,
            cancelled: &cancelled,
            failed: &failed,
        };
        // From here the progress line says how the file ended.
        self.running = Some(index);
        let transcribed = self
            .job
            .transcribe(self.args, input, Priority::Normal, lines, cancel)
            .await
            .map_err(FileError::Speech)?;
        let Some(transcript) = transcribed else {
            return Ok(None);
        };
        let name = &self.names[index];
        let transcript_path = self.folder.join(name);
        write_atomic(
            &transcript_path,
            rendered(self.args, &transcript).as_bytes(),
        )
        .with_context(|| format!("cannot write {}", transcript_path.display()))
        .map_err(FileError::Write)?;
        self.manifest
            .record(name, made, self.folder)
            .map_err(FileError::Write)?;
        Ok(Some(()))
    }
}

/// Creates the out folder when missing, durably: a crash must not lose the folder with the
/// transcripts already in it.
fn create_folder(folder: &Path) -> anyhow::Result<()> {
    if folder.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(folder)
        .with_context(|| format!("cannot create the folder {}", folder.display()))?;
    let parent = folder
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    sync_dir(parent).with_context(|| format!("cannot sync the folder {}", parent.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(names: &[&str]) -> Vec<PathBuf> {
        names.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn one_file_keeps_the_single_file_behaviour_and_anything_more_needs_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.wav");
        std::fs::write(&file, b"x").unwrap();
        let existing_file = dir.path().join("a.txt");
        std::fs::write(&existing_file, b"x").unwrap();
        let one = vec![file.clone()];

        assert_eq!(
            destination(&one, None).unwrap(),
            Destination::One {
                file: file.clone(),
                out: None
            }
        );
        assert_eq!(
            destination(&one, Some(&existing_file)).unwrap(),
            Destination::One {
                file: file.clone(),
                out: Some(existing_file.clone())
            }
        );
        // An --out that is a folder, or is written as one, takes the file's transcript inside.
        for folder in [dir.path().to_path_buf(), dir.path().join("new/")] {
            assert_eq!(
                destination(&one, Some(&folder)).unwrap(),
                Destination::Folder {
                    inputs: one.clone(),
                    folder: folder.clone()
                }
            );
        }
        // A folder as the one input is a batch.
        let folder_input = vec![dir.path().to_path_buf()];
        let err = destination(&folder_input, None).unwrap_err().to_string();
        assert!(err.contains("need --out FOLDER"), "{err}");

        let two = vec![file.clone(), file.clone()];
        let err = destination(&two, None).unwrap_err().to_string();
        assert!(err.contains("need --out FOLDER"), "{err}");
        let err = destination(&two, Some(&existing_file))
            .unwrap_err()
            .to_string();
        assert!(err.contains("and this is a file"), "{err}");
        let missing = dir.path().join("out");
        assert_eq!(
            destination(&two, Some(&missing)).unwrap(),
            Destination::Folder {
                inputs: two.clone(),
                folder: missing
            }
        );
    }

    #[test]
    fn output_names_follow_the_stem_and_tell_shared_stems_apart() {
        assert_eq!(
            output_names(&paths(&["x/talk.wav", "y/interview.mp3"]), "srt"),
            ["talk.srt", "interview.srt"]
        );
        assert_eq!(
            output_names(
                &paths(&[
                    "x/talk.wav",
                    "y/talk.mp3",
                    "z/talk.wav",
                    "w/Talk.WAV",
                    "note.flac"
                ]),
                "txt"
            ),
            [
                "talk.wav.txt",
                "talk.mp3.txt",
                "talk.wav-2.txt",
                "Talk.WAV-3.txt",
                "note.txt"
            ]
        );
        // A unique stem whose name another input's disambiguated name would take.
        assert_eq!(
            output_names(&paths(&["a.wav", "a.mp3", "a.wav.ogg"]), "txt"),
            ["a.wav.txt", "a.mp3.txt", "a.wav-2.txt"]
        );
        // Never the manifest's name.
        assert_eq!(
            output_names(&paths(&[".headroom-transcripts.wav"]), "json"),
            [".headroom-transcripts-2.json"]
        );
    }

    fn options(model: &str) -> OutputOptions {
        OutputOptions {
            model: model.to_string(),
            server_url: None,
            pieces: false,
            language: None,
            format: ExportFormat::Txt,
            words: false,
            beam: 1,
            best_of: 5,
            prompt: None,
            guards: true,
            keep_silence: false,
            precision: "int8".to_string(),
            speakers: None,
            known_speakers: Vec::new(),
        }
    }

    #[test]
    fn a_transcript_is_current_only_for_the_same_input_options_and_file_present() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("a.wav");
        std::fs::write(&input, b"first take").unwrap();
        let made = Made {
            input: FileStamp::of(&input).unwrap(),
            options: options("whisper-tiny.en"),
        };
        let mut manifest = Manifest::load(dir.path());
        assert!(!manifest.is_current("a.txt", &made, dir.path()), "empty");
        std::fs::write(dir.path().join("a.txt"), b"text").unwrap();
        manifest.record("a.txt", made.clone(), dir.path()).unwrap();

        let reloaded = Manifest::load(dir.path());
        assert!(reloaded.is_current("a.txt", &made, dir.path()));
        assert!(
            !reloaded.is_current("b.txt", &made, dir.path()),
            "other name"
        );
        let other_options = Made {
            options: options("whisper-base"),
            ..made.clone()
        };
        assert!(!reloaded.is_current("a.txt", &other_options, dir.path()));

        std::fs::write(&input, b"second, longer take").unwrap();
        let changed = Made {
            input: FileStamp::of(&input).unwrap(),
            ..made.clone()
        };
        assert_ne!(changed.input, made.input);
        assert!(!reloaded.is_current("a.txt", &changed, dir.path()));

        std::fs::remove_file(dir.path().join("a.txt")).unwrap();
        assert!(!reloaded.is_current("a.txt", &made, dir.path()), "deleted");
    }

    #[test]
    fn an_unreadable_or_other_version_manifest_counts_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(MANIFEST), b"{ not json").unwrap();
        assert!(Manifest::load(dir.path()).transcripts.is_empty());
        let future = serde_json::json!({
            "version": MANIFEST_VERSION + 1,
            "transcripts": {},
        });
        std::fs::write(dir.path().join(MANIFEST), future.to_string()).unwrap();
        assert_eq!(Manifest::load(dir.path()).version, MANIFEST_VERSION);
    }

    /// A 1 GiB manifest (reported: read whole, 1.06 GB peak) is not one this command wrote:
    /// refused by its size before a byte is read, and counted as none.
    #[test]
    fn a_manifest_over_the_bound_is_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join(MANIFEST)).unwrap();
        // Sparse: a gigabyte that costs no disk, and would cost a gigabyte of memory to read.
        file.set_len(1 << 30).unwrap();
        let loaded = Manifest::load(dir.path());
        assert!(loaded.transcripts.is_empty());
        assert_eq!(loaded.version, MANIFEST_VERSION);
        let error =
            headroom_base::input::read_regular(&dir.path().join(MANIFEST), MAX_MANIFEST_BYTES)
                .unwrap_err();
        assert!(error.to_string().contains("at most 67108864"), "{error}");
    }

    #[test]
    fn the_summary_names_each_failed_input_once_with_why() {
        let tally = Tally {
            transcribed: 2,
            skipped: 1,
            failures: vec![
                FileFailure {
                    path: PathBuf::from("in/bad.wav"),
                    reason: FailureReason::NotAudio,
                    message: "in/bad.wav is damaged: no frames".to_string(),
                },
                FileFailure {
                    path: PathBuf::from("in/gone.mp3"),
                    reason: FailureReason::FolderUnreadable,
                    message: "cannot list the folder".to_string(),
                },
            ],
        };
        assert_eq!(
            tally.summary(5, Path::new("out")),
            "5 inputs: 2 transcribed, 1 skipped (already current), 2 failed; transcripts in out\n\
             failed:\n  in/bad.wav is damaged: no frames\n  in/gone.mp3: cannot list the folder"
        );
    }
}
