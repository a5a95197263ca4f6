//! The audio suites (feature `suites`): each is a plain configuration, a `run` over the
//! process's `Services` that returns its report, and a `render_text` of that report. The CLI
//! (`headroom bench …`) turns its arguments into a configuration and prints; nothing here reads
//! arguments, the environment or a terminal.
//!
//! | module | measures |
//! |---|---|
//! | [`batch`] | a folder transcribed over 1, 2 and 3 `headroom serve` workers; one killed |
//! | [`edit`] | editing by text on recordings with planted fillers and pauses; auto-editor's way |
//! | [`isolation`] | interactive probes idle and under each kind of batch work |
//! | [`long`] | the `headroom` program on conversations of minutes to hours: time, memory, speakers |
//! | [`narration`] | interactive audio while a project is narrated; the narration's overlap |
//! | [`speakers`] | diarization error and known-speaker naming on synthesized conversations |
//! | [`speech`] | time to first audio against the whole take through `/v1/audio/speech` |
//! | [`voices`] | the embedded voices' speed and intelligibility; the approximate voice match |

pub mod batch;
pub mod edit;
pub mod isolation;
pub mod long;
pub mod narration;
pub mod speakers;
pub mod speech;
pub mod voices;

use crate::boundary::BenchError;
use headroom_services::speech::{AudioInput, SpeechError};
use headroom_services::voice_work::VoiceWorkError;
use headroom_services::voices::LibraryError;
use headroom_services::{Services, ServicesError};
use headroom_speech::audio::{decode_file, write_wav, Audio, DecodeLimits};
use headroom_speech::tts::{Espeak, Synthesizer};
use headroom_workstation::projects::{Project, ProjectError, ProjectStore};
use headroom_workstation::workstation::{Workstation, WorkstationError};
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Where a suite's lines of progress go (the CLI: standard error).
pub type Progress<'a> = &'a (dyn Fn(&str) + Sync);

/// A choice among a suite's kinds (probes, batch work, voice sets), named as its report
/// names it, so a front end can offer them without a parser of its own.
pub trait Choice: Copy + PartialEq + Send + Sync + 'static {
    const ALL: &'static [Self];
    /// The name in reports and on the command line.
    fn name(self) -> &'static str;
    /// One line on what it is.
    fn help(self) -> &'static str;
}

/// Why a suite could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// What the suite needs is not here (a model, a program, enough voices).
    #[error("{0}")]
    Unavailable(String),
    /// The work measured did not do what it should (no audio came, a phrase was never heard).
    #[error("{0}")]
    Measurement(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A lane refused the work (the audio lane's own probes).
    #[error(transparent)]
    Refused(#[from] headroom_core::admission::Rejection),
    #[error(transparent)]
    Speech(#[from] SpeechError),
    #[error(transparent)]
    Services(#[from] ServicesError),
    #[error(transparent)]
    Voice(#[from] VoiceWorkError),
    #[error(transparent)]
    Library(#[from] LibraryError),
    #[error(transparent)]
    Workstation(#[from] WorkstationError),
    #[error(transparent)]
    Project(#[from] ProjectError),
    #[error(transparent)]
    Bench(#[from] BenchError),
    #[error(transparent)]
    Audio(#[from] headroom_speech::audio::AudioError),
    #[error(transparent)]
    Synthesis(#[from] headroom_speech::tts::TtsError),
    #[error(transparent)]
    Transcription(#[from] headroom_speech::asr::AsrError),
    #[error(transparent)]
    Diarization(#[from] headroom_speech::asr::diarize::DiarizeError),
    #[error(transparent)]
    Model(#[from] headroom_speech::models::ModelError),
    #[error(transparent)]
    Embedding(#[from] headroom_speech::voice::VoiceError),
    #[error(transparent)]
    Server(#[from] headroom_server::ServerError),
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    #[error(transparent)]
    Process(#[from] headroom_base::process::ProcessError),
    #[error("a benchmark task stopped: {0}")]
    Task(#[from] tokio::task::JoinError),
    /// One kind of work failed; the source says how.
    #[error("{what} failed: {source}")]
    Work {
        what: &'static str,
        #[source]
        source: Box<SuiteError>,
    },
}

/// The sentences voice profiles and match targets are made from (never said in a narration or
/// a conversation).
pub const REFERENCE: &str = "When the morning train was late again, the whole platform sighed at once. A man with a red umbrella checked his watch and began to read the timetable aloud. Nobody listened, but everyone waited.";

/// `text` spoken by espeak-ng in `voice` at `pitch`: a speaker the suites can make anywhere.
pub(crate) fn espeak(voice: &str, pitch: u32, text: &str) -> Result<Audio, SuiteError> {
    let mut e = Espeak::default();
    e.pitch = pitch;
    Ok(e.synthesize(text, Some(voice), &CancellationToken::new())?)
}

/// Whether `model` is installed in the services' models folder.
pub(crate) fn installed(services: &Services, model: &str) -> bool {
    headroom_speech::models::locate(&services.env().models_dir, model).is_ok()
}

/// The voices narrations alternate between (so every run redoes every take).
pub(crate) fn narration_voices(services: &Services) -> Vec<String> {
    if installed(services, "kokoro") {
        vec!["kokoro-jf_alpha".into(), "kokoro-jm_kumo".into()]
    } else {
        vec!["en-us".into(), "en-us+m3".into()]
    }
}

/// A workstation over `services` whose projects live in `scratch`, and a project made by
/// transcribing `clip` into it, cleaned up by the text model at `upstream` (else the rules).
pub(crate) async fn scratch_project(
    services: &Arc<Services>,
    clip: &Path,
    scratch: &Path,
    upstream: Option<String>,
    progress: Progress<'_>,
) -> Result<(Arc<Workstation>, Project), SuiteError> {
    let ws = Workstation::new(
        ProjectStore::new(scratch.join("projects")),
        services.clone(),
        None,
    );
    let project = ws.store().create("Bench")?;
    progress(&format!(
        "transcribing {} into a scratch project",
        clip.display()
    ));
    let project = ws
        .transcribe(
            &project.id,
            clip,
            None,
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await?;
    ws.update_project(&project.id, move |p| {
        p.settings.llm_cleanup = upstream.is_some();
        p.settings.server_url = upstream;
        Ok(())
    })
    .await?;
    Ok((ws, project))
}

/// The first `secs` seconds of `clip`, written as a WAV file into `dir`: an interactive
/// probe's short clip.
pub(crate) fn first_seconds(
    clip: &Path,
    secs: usize,
    dir: &Path,
) -> Result<AudioInput, SuiteError> {
    let source = decode_file(clip, DecodeLimits::default())?;
    let short = Audio {
        samples: source.samples[..source.samples.len().min(secs * source.sample_rate as usize)]
            .to_vec(),
        sample_rate: source.sample_rate,
    };
    let path = dir.join(format!("first-{secs}s.wav"));
    write_wav(&path, &short)?;
    Ok(AudioInput::from_file(&path)?)
}

#[cfg(test)]
mod tests {
    use super::isolation::{BatchKind, ProbeKind};
    use super::speakers::VoiceSet;
    use super::Choice;

    /// The name a front end parses is the one the report writes.
    fn names_are_the_reports<T: Choice + serde::Serialize>() {
        for kind in T::ALL {
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                serde_json::json!(kind.name())
            );
            assert!(!kind.help().is_empty());
        }
        let mut names: Vec<&str> = T::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), T::ALL.len(), "two kinds share a name");
    }

    #[test]
    fn every_choice_is_named_as_its_report_names_it() {
        names_are_the_reports::<ProbeKind>();
        names_are_the_reports::<BatchKind>();
        names_are_the_reports::<VoiceSet>();
    }
}
