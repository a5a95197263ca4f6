//! Choosing a voice: the one place a voice's name becomes what speaks it. Every front end (the
//! CLI, serve, MCP, the app, narration) names voices alike: a voice profile by its name, its
//! folder id or `profile:<id>` (as projects keep it); OpenAI's names and `joe`-style short
//! names as the voices they mean (see [`Services::voice_id`]); Kokoro's, Piper's and
//! espeak-ng's voices by their ids.

use crate::speech::SpeechService;
use crate::voice_work::VoiceWorkError;
use crate::voices::{LibraryError, VoiceProfile};
use crate::Services;
use std::sync::Arc;

/// How projects keep a voice profile as their voice: `profile:<id>`.
pub const PROFILE_VOICE_PREFIX: &str = "profile:";

/// What speaks in a voice, chosen by [`Services::resolve_voice`].
#[derive(Clone)]
pub enum SpeakingVoice {
    /// A voice profile: cloned through the configured cloning server, else its voice match
    /// (see [`crate::voice_work::Voices::speak`]).
    Profile(Box<VoiceProfile>),
    /// An engine's voice: the service whose synthesizer speaks it, and the voice as that
    /// engine names it (`None`: its default).
    Engine {
        speech: Arc<SpeechService>,
        voice: Option<String>,
    },
}

impl std::fmt::Debug for SpeakingVoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpeakingVoice::Profile(p) => f.debug_tuple("Profile").field(&p.id).finish(),
            SpeakingVoice::Engine { voice, .. } => {
                f.debug_struct("Engine").field("voice", voice).finish()
            }
        }
    }
}

/// A voice profile as projects keep it: `profile:<id>`.
pub fn profile_voice_name(id: &str) -> String {
    format!("{PROFILE_VOICE_PREFIX}{id}")
}

/// Whether `name` names a voice profile the way projects keep it (`profile:<id>`).
pub fn is_profile_voice(name: &str) -> bool {
    name.starts_with(PROFILE_VOICE_PREFIX)
}

impl Services {
    /// What speaks in the voice `name` (blank or `None`: the default voice). A voice profile
    /// wins over an engine voice of the same name; `profile:<id>` names only a profile (an
    /// error when there is none). Reads the voice library and may load a voice model, so it
    /// runs on the blocking pool, never on the async runtime's threads.
    pub async fn resolve_voice(&self, name: Option<&str>) -> Result<SpeakingVoice, VoiceWorkError> {
        let name = name.map(str::to_string);
        self.off_runtime(move |services| services.resolve_voice_blocking(name.as_deref()))
            .await
    }

    /// The voice `name` as projects keep it: a voice profile (by name, id or `profile:<id>`)
    /// as `profile:<id>`, so renaming the profile keeps the choice; any other voice as given.
    /// Reads the voice library on the blocking pool.
    pub async fn stored_voice_name(&self, name: &str) -> Result<String, VoiceWorkError> {
        let name = name.trim().to_string();
        self.off_runtime(move |services| {
            Ok(match services.voice_profile_named(&name)? {
                Some(profile) => profile_voice_name(&profile.id),
                None => name,
            })
        })
        .await
    }

    /// Runs `work` on the blocking pool (it reads the disk or loads a model), never on the
    /// async runtime's threads.
    async fn off_runtime<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Services) -> Result<T, VoiceWorkError> + Send + 'static,
    ) -> Result<T, VoiceWorkError> {
        let services = self.arc();
        match tokio::task::spawn_blocking(move || work(&services)).await {
            Ok(done) => done,
            Err(e) => match e.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                Err(_) => Err(VoiceWorkError::Stopped),
            },
        }
    }

    /// [`Services::resolve_voice`]'s work, on the calling thread (which may block on the disk
    /// and on a model's load).
    fn resolve_voice_blocking(&self, name: Option<&str>) -> Result<SpeakingVoice, VoiceWorkError> {
        let name = name.map(str::trim).filter(|n| !n.is_empty());
        if let Some(name) = name {
            if let Some(profile) = self.voice_profile_named(name)? {
                return Ok(SpeakingVoice::Profile(Box::new(profile)));
            }
        }
        let engine_voice = name.map(|n| self.voice_id(n));
        let (speech, voice) = self.speech_for_voice(engine_voice.as_deref())?;
        Ok(SpeakingVoice::Engine { speech, voice })
    }

    /// The voice profile `name` names, if any (blocking: reads the library).
    fn voice_profile_named(&self, name: &str) -> Result<Option<VoiceProfile>, LibraryError> {
        let library = self.voice_library();
        match name.strip_prefix(PROFILE_VOICE_PREFIX) {
            Some(id) => library.open(id).map(Some),
            None => match library.open(name) {
                Ok(profile) => Ok(Some(profile)),
                Err(LibraryError::NotFound(_)) => Ok(None),
                Err(e) => Err(e),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Environment;
    use headroom_core::config::Config;
    use std::ffi::OsString;

    /// Services with an empty voice library in `dir` and no models (so OpenAI's names mean
    /// espeak-ng's voices).
    fn services(dir: &std::path::Path) -> Arc<Services> {
        let mut env = Environment::from_vars(
            |name| match name {
                "HEADROOM_MODELS_DIR" => Some(OsString::from("/nonexistent/models")),
                _ => None,
            },
            std::env::temp_dir,
        );
        env.voices_dir = dir.join("voices");
        Services::new(Config::default(), env)
    }

    fn engine_voice(voice: SpeakingVoice) -> Option<String> {
        match voice {
            SpeakingVoice::Engine { voice, .. } => voice,
            other => panic!("an engine voice was expected, not {other:?}"),
        }
    }

    #[tokio::test]
    async fn every_way_of_naming_a_profile_finds_it_and_other_names_are_engine_voices() {
        let dir = tempfile::tempdir().unwrap();
        let services = services(dir.path());
        let rhea = services.voice_library().create("Rhea Lane").unwrap();
        for name in [
            "Rhea Lane",
            " rhea lane ",
            &rhea.id,
            &profile_voice_name(&rhea.id),
        ] {
            match services.resolve_voice(Some(name)).await.unwrap() {
                SpeakingVoice::Profile(p) => assert_eq!(p.id, rhea.id, "{name:?}"),
                other => panic!("{name:?} named {other:?}"),
            }
            assert_eq!(
                services.stored_voice_name(name).await.unwrap(),
                profile_voice_name(&rhea.id),
                "{name:?} is kept as the profile's id"
            );
        }
        // OpenAI's names as the voices they mean; engine ids as given; blank as the default.
        let alloy = services.resolve_voice(Some("alloy")).await.unwrap();
        assert_eq!(engine_voice(alloy).as_deref(), Some("en-us+f3"));
        let de = services.resolve_voice(Some("de")).await.unwrap();
        assert_eq!(engine_voice(de).as_deref(), Some("de"));
        for blank in [None, Some(""), Some("  ")] {
            let default = services.resolve_voice(blank).await.unwrap();
            assert_eq!(engine_voice(default), None, "{blank:?}");
        }
        assert_eq!(services.stored_voice_name("alloy").await.unwrap(), "alloy");
        // `profile:` names only a profile: one that is not there is an error, not espeak-ng.
        let missing = services.resolve_voice(Some("profile:nobody")).await;
        assert!(
            matches!(
                missing,
                Err(VoiceWorkError::Library(LibraryError::NotFound(_)))
            ),
            "{missing:?}"
        );
    }
}
