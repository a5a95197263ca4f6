//! The Voices view's workflows: the voice library with its clips and checks, the approximate
//! match with progress, test takes scored against the voice, A/B playback, and the cloning
//! server's health. Each is a thin call into `headroom_services::voice_work`.

use crate::workstation::{blocking, Workstation, WorkstationError};
use headroom_base::clock::unix_ms;
use headroom_base::fsutil::{Beneath, EntryKind};
use headroom_services::speech::AudioInput;
use headroom_services::voice_work::{default_voice_name, Closeness, VoiceWorkError};
use headroom_services::voices::{LibraryError, VoiceLibrary, VoiceProfile};
use headroom_speech::audio::{
    self as device, decode_file, wav_bytes, AudioError, DecodeLimits, RecordTarget,
};
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

/// The voice's folder of test takes.
const TAKES: &str = "takes";

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
        let temp_dir = self.services().env().temp_dir.clone();
        let (scratch, target) = blocking(move || recording_scratch(&temp_dir)).await?;
        let recorded = self
            .record_to_file(target, max_seconds, level, None, cancel)
            .await;
        let added = match recorded {
            Ok(recorded) => {
                self.add_voice_clip(id, &recorded.path, CancellationToken::new())
                    .await
            }
            Err(e) => Err(e),
        };
        let _ = blocking(move || {
            drop(scratch);
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
        let profile = self.open_voice(id).await?;
        let take = voices.speak(&profile, text, cancel).await?;
        let file = format!("{TAKES}/take-{}.wav", unix_ms());
        let duration_secs = take.audio.duration_secs();
        let (library, id, written) = (voices.library().clone(), id.to_string(), file.clone());
        let audio = take.audio;
        blocking(move || {
            let profile = library.open(&id).map_err(VoiceWorkError::from)?;
            let voice = library.beneath(&profile.id).map_err(VoiceWorkError::from)?;
            voice
                .write_atomic(&written, &wav_bytes(&audio))
                .map_err(|e| VoiceWorkError::from(LibraryError::from(e)))?;
            prune_takes(&voice);
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

/// A folder of its own for a voice clip being recorded, in `temp_dir`: made with a random name
/// and for its owner only (0700), so no other user can guess the clip's name or plant anything
/// there; removed (with the clip) when dropped. The clip is written through the folder's handle.
fn recording_scratch(
    temp_dir: &Path,
) -> Result<(tempfile::TempDir, RecordTarget), WorkstationError> {
    let mut builder = tempfile::Builder::new();
    builder.prefix("headroom-voice-recording-");
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700));
    // mkdir fails where anything is at the (random) name: never someone else's folder.
    let scratch = builder
        .tempdir_in(temp_dir)
        .map_err(|e| AudioError::Write {
            path: temp_dir.to_path_buf(),
            message: e.to_string(),
        })?;
    let folder = Beneath::open(scratch.path(), "recording").map_err(|e| AudioError::Write {
        path: scratch.path().to_path_buf(),
        message: e.to_string(),
    })?;
    Ok((scratch, RecordTarget::new(folder, "clip.wav")))
}

/// Keeps the newest takes in the voice's `takes/` folder, listed and removed through the
/// folder's handle: only regular files count and go; a link there (or `takes/` itself as a
/// link) is never followed, listed through or removed.
fn prune_takes(voice: &Beneath) {
    let Ok(entries) = voice.read_dir(TAKES) else {
        return;
    };
    let takes: Vec<_> = entries
        .into_iter()
        .filter(|e| e.kind == EntryKind::File)
        .map(|e| e.name)
        .filter(|name| Path::new(name).extension().is_some_and(|e| e == "wav"))
        .collect();
    // Sorted by name: `take-<ms>.wav`, oldest first.
    let excess = takes.len().saturating_sub(KEPT_TAKES);
    for old in &takes[..excess] {
        if let Err(e) = voice.remove_file(Path::new(TAKES).join(old)) {
            tracing::warn!(error = %e, "an old test take stays");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pruning lists and removes through the voice folder's handle: a `takes/` that is a link
    /// out is never listed through (the `.wav` files it points to all stay), and a take that is
    /// a link is neither counted nor followed; the oldest regular takes go.
    #[cfg(unix)]
    #[test]
    fn pruning_takes_never_follows_a_link_planted_among_them() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        for i in 0..7 {
            std::fs::write(outside.join(format!("take-{i}.wav")), b"keep").unwrap();
        }
        let linked = dir.path().join("linked");
        std::fs::create_dir_all(&linked).unwrap();
        symlink(&outside, linked.join(TAKES)).unwrap();
        prune_takes(&Beneath::open(&linked, "voice").unwrap());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 7);

        let voice = dir.path().join("voice");
        let takes = voice.join(TAKES);
        std::fs::create_dir_all(&takes).unwrap();
        symlink(outside.join("take-0.wav"), takes.join("take-0.wav")).unwrap();
        for i in 1..=7 {
            std::fs::write(takes.join(format!("take-{i}.wav")), b"x").unwrap();
        }
        prune_takes(&Beneath::open(&voice, "voice").unwrap());
        let mut left: Vec<_> = std::fs::read_dir(&takes)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "take-0.wav",
                "take-3.wav",
                "take-4.wav",
                "take-5.wav",
                "take-6.wav",
                "take-7.wav"
            ]
        );
        assert!(takes.join("take-0.wav").is_symlink());
        for i in 0..7 {
            assert_eq!(
                std::fs::read(outside.join(format!("take-{i}.wav"))).unwrap(),
                b"keep"
            );
        }
    }

    /// A recorded clip is written in a folder of its own, with a random name and for its owner
    /// only, not under a name in the shared temporary folder another user could guess and
    /// plant a link at; the folder goes when dropped.
    #[cfg(unix)]
    #[test]
    fn a_recorded_clip_goes_to_a_private_folder_of_its_own() {
        use headroom_speech::audio::WavRecorder;
        use std::os::unix::fs::PermissionsExt;
        let temp = tempfile::tempdir().unwrap();
        let (first, target) = recording_scratch(temp.path()).unwrap();
        let (second, _) = recording_scratch(temp.path()).unwrap();
        assert_ne!(first.path(), second.path());
        assert_eq!(first.path().parent().unwrap(), temp.path());
        let mode = std::fs::metadata(first.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        let mut recorder = WavRecorder::create_at(target, 16_000).unwrap();
        recorder.write(&[0.1; 1600]).unwrap();
        let path = recorder.finish().unwrap();
        assert_eq!(path, first.path().join("clip.wav"));
        assert!(path.is_file());
        let folder = first.path().to_path_buf();
        drop(first);
        assert!(!folder.exists());
    }
}
