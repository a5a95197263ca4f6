//! The Voices view's workflows: the voice library with its clips and checks, the approximate
//! match with progress, test takes scored against the voice, A/B playback, and the cloning
//! server's health. Each is a thin call into `headroom_services::voice_work`.

use crate::workstation::{blocking, Workstation, WorkstationError};
use headroom_base::clock::unix_ms;
use headroom_services::speech::AudioInput;
use headroom_services::voice_work::{default_voice_name, Closeness, VoiceWorkError};
use headroom_services::voices::{LibraryError, VoiceLibrary, VoiceProfile};
use headroom_speech::audio::{self as device, decode_file, wav_bytes, DecodeLimits};
use headroom_speech::cloning::Health;
use headroom_speech::voice::matching::{MatchProgress, MatchSettings};
use headroom_speech::voice::ClipReport;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What adding a clip did: added, or refused with the checks' advice.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ClipAdded {
    pub added: bool,
    pub report: ClipReport,
    pub voice: VoiceProfile,
}

/// A test take in a voice, kept in the voice's `takes/` folder for A/B playback.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct VoiceTakeView {
    /// Relative to the voice's folder.
    pub file: String,
    pub method: String,
    pub closeness: Closeness,
    pub default_voice: String,
    pub duration_secs: f64,
}

/// Test takes kept per voice; older ones are removed.
const KEPT_TAKES: usize = 5;

impl Workstation {
    pub fn voice_profiles(&self) -> Result<Vec<VoiceProfile>, WorkstationError> {
        Ok(self
            .services()
            .voice_library()
            .list()
            .map_err(VoiceWorkError::from)?)
    }

    pub fn create_voice(&self, name: &str) -> Result<VoiceProfile, WorkstationError> {
        Ok(self
            .services()
            .voice_library()
            .create(name)
            .map_err(VoiceWorkError::from)?)
    }

    pub fn rename_voice(&self, id: &str, name: &str) -> Result<VoiceProfile, WorkstationError> {
        Ok(self
            .services()
            .voice_library()
            .rename(id, name)
            .map_err(VoiceWorkError::from)?)
    }

    pub fn delete_voice(&self, id: &str) -> Result<(), WorkstationError> {
        Ok(self
            .services()
            .voice_library()
            .delete(id)
            .map_err(VoiceWorkError::from)?)
    }

    /// Checks, transcribes and embeds a clip (a file the user chose or recorded) and adds it;
    /// a refused clip comes back with its report, not as an error.
    pub async fn add_voice_clip(
        &self,
        id: &str,
        path: &Path,
        cancel: CancellationToken,
    ) -> Result<ClipAdded, WorkstationError> {
        let voices = self.services().voices();
        let path = path.to_path_buf();
        let input = blocking(move || Ok(AudioInput::from_file(&path)?)).await?;
        match voices.add_clip(id, input, None, cancel).await {
            Ok((voice, report)) => Ok(ClipAdded {
                added: true,
                report,
                voice,
            }),
            Err(VoiceWorkError::ClipRefused(report)) => Ok(ClipAdded {
                added: false,
                report: *report,
                voice: self.open_voice(id).await?,
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// A voice's profile, read on the blocking pool.
    async fn open_voice(&self, id: &str) -> Result<VoiceProfile, WorkstationError> {
        let (library, id) = (self.services().voice_library().clone(), id.to_string());
        blocking(move || Ok(library.open(&id).map_err(VoiceWorkError::from)?)).await
    }

    /// Records a clip from the default input device (until `max_seconds` or `cancel`, which
    /// stops and keeps it), then checks and adds it as [`Workstation::add_voice_clip`] does.
    pub async fn record_voice_clip(
        &self,
        id: &str,
        max_seconds: f64,
        level: Arc<dyn Fn(f32) + Send + Sync>,
        cancel: CancellationToken,
    ) -> Result<ClipAdded, WorkstationError> {
        self.open_voice(id).await?;
        let target = self.services().env().temp_dir.join(format!(
            "headroom-voice-recording-{}-{}.wav",
            std::process::id(),
            unix_ms()
        ));
        let recorded = self
            .record_to_file(target.clone(), max_seconds, level, None, cancel)
            .await;
        let added = match recorded {
            Ok(_) => {
                self.add_voice_clip(id, &target, CancellationToken::new())
                    .await
            }
            Err(e) => Err(e),
        };
        let _ = blocking(move || {
            let _ = std::fs::remove_file(&target);
            Ok(())
        })
        .await;
        added
    }

    pub fn remove_voice_clip(
        &self,
        id: &str,
        clip: &str,
    ) -> Result<VoiceProfile, WorkstationError> {
        Ok(self
            .services()
            .voice_library()
            .remove_clip(id, clip)
            .map_err(VoiceWorkError::from)?)
    }

    pub fn set_clip_transcript(
        &self,
        id: &str,
        clip: &str,
        transcript: &str,
    ) -> Result<VoiceProfile, WorkstationError> {
        Ok(self
            .services()
            .voice_library()
            .set_transcript(id, clip, transcript)
            .map_err(VoiceWorkError::from)?)
    }

    /// The approximate voice match, a batch job with progress and cancel.
    pub async fn match_voice(
        &self,
        id: &str,
        budget: usize,
        progress: Arc<dyn Fn(MatchProgress) + Send + Sync>,
        cancel: CancellationToken,
    ) -> Result<VoiceProfile, WorkstationError> {
        let settings = MatchSettings {
            budget,
            ..MatchSettings::default()
        };
        Ok(self
            .services()
            .voices()
            .match_voice(id, settings, progress, cancel)
            .await?)
    }

    /// Speaks `text` as the voice and keeps the take for playback beside the reference.
    pub async fn speak_as_voice(
        &self,
        id: &str,
        text: String,
        cancel: CancellationToken,
    ) -> Result<VoiceTakeView, WorkstationError> {
        let voices = self.services().voices();
        let take = voices.speak(id, text, cancel).await?;
        let file = format!("takes/take-{}.wav", unix_ms());
        let duration_secs = take.audio.duration_secs();
        let (library, id, written) = (voices.library().clone(), id.to_string(), file.clone());
        let audio = take.audio;
        blocking(move || {
            let profile = library.open(&id).map_err(VoiceWorkError::from)?;
            let voice = library.beneath(&profile.id).map_err(VoiceWorkError::from)?;
            voice
                .write_atomic(&written, &wav_bytes(&audio))
                .map_err(|e| VoiceWorkError::from(LibraryError::from(e)))?;
            prune_takes(&voice.shown("takes"));
            Ok(())
        })
        .await?;
        Ok(VoiceTakeView {
            file,
            method: take.method.label(),
            closeness: take.closeness,
            default_voice: default_voice_name(self.services()),
            duration_secs,
        })
    }

    /// Plays a voice's clip or take (a file inside the voice's folder) on the output device.
    pub async fn play_voice_file(
        &self,
        id: &str,
        file: &str,
        cancel: CancellationToken,
    ) -> Result<(), WorkstationError> {
        let (library, id, file) = (
            self.services().voice_library().clone(),
            id.to_string(),
            file.to_string(),
        );
        blocking(move || {
            let path = voice_file(&library, &id, &file)?;
            let audio = decode_file(&path, DecodeLimits::default())?;
            Ok(device::play(&audio, &cancel)?)
        })
        .await
    }

    /// Asks the configured cloning server whether it is up.
    pub async fn cloning_health(&self) -> Result<Health, WorkstationError> {
        Ok(self.services().voices().cloning_health().await?)
    }
}

/// A file inside a voice's folder; anything else is refused.
fn voice_file(library: &VoiceLibrary, id: &str, file: &str) -> Result<PathBuf, WorkstationError> {
    let profile = library.open(id).map_err(VoiceWorkError::from)?;
    let plain = !file.is_empty()
        && Path::new(file)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !plain {
        return Err(WorkstationError::OutsideProject {
            path: file.to_string(),
        });
    }
    let voice = library.beneath(&profile.id).map_err(VoiceWorkError::from)?;
    Ok(voice
        .file_path(file)
        .map_err(|e| VoiceWorkError::from(LibraryError::from(e)))?)
}

/// Keeps the newest takes in `folder`.
fn prune_takes(folder: &Path) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    let mut takes: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "wav"))
        .collect();
    takes.sort();
    let excess = takes.len().saturating_sub(KEPT_TAKES);
    for old in &takes[..excess] {
        let _ = std::fs::remove_file(old);
    }
}
