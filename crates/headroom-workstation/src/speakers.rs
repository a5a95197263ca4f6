//! Speakers in a project, as the app and the command line edit them: rename a speaker
//! everywhere, merge one into another, split a segment (the new part may get another
//! speaker), give a segment another speaker, "this is <profile>", and a new voice profile made
//! from a speaker's clean turns. Each is one durable change of the manifest under the store's
//! lock, refused as changed elsewhere when the project no longer shows what the view did.
//! The edits themselves are [`Project`]'s (see `projects::speakers`).

use crate::projects::{Project, ProjectError, ProjectSegment, SplitAt};
use crate::workstation::{blocking, project_file_in, Workstation, WorkstationError};
use headroom_services::speech::AudioInput;
use headroom_services::voice_work::VoiceWorkError;
use headroom_services::voices::VoiceProfile;
use headroom_speech::asr::Speaker;
use headroom_speech::audio::{wav_bytes, Audio, AudioError, Decode, Stretch};
use headroom_speech::tts::join_clips;
use headroom_speech::voice::ClipReport;
use serde::Serialize;
use std::path::Path;
use tokio_util::sync::CancellationToken;

/// A voice profile's clip made from a speaker's turns: at least this long (the clip checks'
/// minimum)...
pub const PROFILE_CLIP_MIN_SECS: f64 = 5.0;
/// ...about this long when the speaker says enough...
const PROFILE_CLIP_TARGET_SECS: f64 = 12.0;
/// ...and never longer.
pub const PROFILE_CLIP_MAX_SECS: f64 = 20.0;
/// Turns shorter than this are left out (a back-channel "mm-hm", a cough).
const PROFILE_TURN_MIN_SECS: f64 = 1.0;
/// The pause between two turns in the clip.
const PROFILE_TURN_PAUSE_MS: u32 = 300;

/// A voice profile made from a speaker.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct SpeakerProfile {
    /// The project, with the speaker attached to the new profile.
    pub project: Project,
    pub voice: VoiceProfile,
    /// The clip's checks.
    pub report: ClipReport,
    /// The turns the clip was made of (segment indices) and its length.
    pub segments: Vec<usize>,
    pub seconds: f64,
}

/// Why a speaker has no profile clip.
#[derive(Debug, thiserror::Error)]
pub enum SpeakerClipError {
    #[error("the project has no source audio to take the speaker's voice from")]
    NoAudio,
    #[error("{name} speaks {seconds:.1} s in turns of a second or more; a voice profile needs at least {PROFILE_CLIP_MIN_SECS:.0} s")]
    TooLittle { name: String, seconds: f64 },
}

impl From<SpeakerClipError> for WorkstationError {
    fn from(e: SpeakerClipError) -> Self {
        ProjectError::InvalidName(e.to_string()).into()
    }
}

/// The speakers as the view showed them: what a speaker edit is checked against.
fn same_speakers(stored: &[Speaker], shown: &[Speaker]) -> bool {
    let key = |s: &Speaker| (s.id.clone(), s.name.clone(), s.profile.clone());
    stored.iter().map(key).eq(shown.iter().map(key))
}

/// A segment as the view showed it.
fn same_segment(stored: &ProjectSegment, shown: &ProjectSegment) -> bool {
    stored.start == shown.start
        && stored.end == shown.end
        && stored.text == shown.text
        && stored.speaker == shown.speaker
}

fn changed_elsewhere(p: &Project) -> WorkstationError {
    ProjectError::ChangedElsewhere {
        name: p.name.clone(),
    }
    .into()
}

/// The turns a profile clip is made of: the speaker's longest segments (the cleanest: long
/// turns hold the fewest joins, overlaps and back-channels), up to about
/// [`PROFILE_CLIP_TARGET_SECS`], in time order. `None` when they add up to too little.
pub fn profile_turns(project: &Project, speaker: &str) -> Option<Vec<usize>> {
    let mut turns: Vec<(usize, f64)> = project
        .segments
        .iter()
        .enumerate()
        .filter(|(_, s)| s.speaker.as_deref() == Some(speaker))
        .map(|(i, s)| (i, s.end - s.start))
        .filter(|(_, secs)| *secs >= PROFILE_TURN_MIN_SECS)
        .collect();
    turns.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut chosen = Vec::new();
    let mut total = 0.0;
    for (i, secs) in turns {
        if total >= PROFILE_CLIP_TARGET_SECS {
            break;
        }
        chosen.push(i);
        total += secs;
    }
    chosen.sort();
    (total >= PROFILE_CLIP_MIN_SECS).then_some(chosen)
}

/// The turns cut from the source audio at `path` and joined with short pauses, at most
/// [`PROFILE_CLIP_MAX_SECS`]: only the turns are kept as the file decodes, and decoding stops
/// after the last, however long the recording.
fn profile_clip(path: &Path, project: &Project, turns: &[usize]) -> Result<Audio, AudioError> {
    let stretches: Vec<(f64, f64)> = turns
        .iter()
        .map(|&i| (project.segments[i].start, project.segments[i].end))
        .collect();
    let mut stretch = Stretch::several(&stretches);
    Decode::streamed().file_into(path, &mut stretch)?;
    let clips: Vec<Audio> = stretch
        .into_pieces()
        .into_iter()
        .filter(|a| !a.samples.is_empty())
        .collect();
    let mut joined = join_clips(&clips, PROFILE_TURN_PAUSE_MS);
    let rate = f64::from(joined.sample_rate);
    joined
        .samples
        .truncate((PROFILE_CLIP_MAX_SECS * rate) as usize);
    Ok(joined)
}

impl Workstation {
    /// Changes the project's speakers (under the store's lock, keeping the transcript as a
    /// version first when `keep` says why), refused as changed elsewhere when its speakers
    /// are no longer those `shown`.
    async fn change_speakers(
        &self,
        project_id: &str,
        shown: Vec<Speaker>,
        keep: Option<String>,
        change: impl FnOnce(&mut Project) -> Result<(), WorkstationError> + Send + 'static,
    ) -> Result<Project, WorkstationError> {
        let guarded = move |p: &mut Project| {
            if !same_speakers(&p.speakers, &shown) {
                return Err(changed_elsewhere(p));
            }
            change(p)
        };
        let (project, ()) = match keep {
            Some(reason) => {
                let (store, id) = (self.store().clone(), project_id.to_string());
                blocking(move || store.update_keeping_version(&id, &reason, guarded)).await?
            }
            None => self.update_project(project_id, guarded).await?,
        };
        Ok(project)
    }

    /// Names a speaker everywhere in the project (empty: its label again).
    pub async fn rename_speaker(
        &self,
        project_id: &str,
        speaker: &str,
        name: String,
        shown: Vec<Speaker>,
    ) -> Result<Project, WorkstationError> {
        let speaker = speaker.to_string();
        self.change_speakers(project_id, shown, None, move |p| {
            Ok(p.rename_speaker(&speaker, &name)
                .map_err(ProjectError::from)?)
        })
        .await
    }

    /// Merges speaker `from` into `into` (the transcript is kept as a version first: which
    /// turns were `from`'s is lost otherwise).
    pub async fn merge_speakers(
        &self,
        project_id: &str,
        from: &str,
        into: &str,
        shown: Vec<Speaker>,
    ) -> Result<Project, WorkstationError> {
        let names = |id: &str| {
            shown
                .iter()
                .find(|s| s.id == id)
                .map(Speaker::display_name)
                .unwrap_or_else(|| id.to_string())
        };
        let reason = format!("before merging {} into {}", names(from), names(into));
        let (from, into) = (from.to_string(), into.to_string());
        self.change_speakers(project_id, shown, Some(reason), move |p| {
            Ok(p.merge_speakers(&from, &into).map_err(ProjectError::from)?)
        })
        .await
    }

    /// "This is <profile>": attaches a speaker to a voice profile (its name, and its voice in
    /// the narration); `None` detaches it.
    pub async fn attach_speaker(
        &self,
        project_id: &str,
        speaker: &str,
        profile: Option<String>,
        shown: Vec<Speaker>,
    ) -> Result<Project, WorkstationError> {
        let profile = match profile {
            Some(id) => {
                let library = self.services().voice_library().clone();
                Some(blocking(move || Ok(library.open(&id).map_err(VoiceWorkError::from)?)).await?)
            }
            None => None,
        };
        let speaker = speaker.to_string();
        self.change_speakers(project_id, shown, None, move |p| {
            let attached = profile.as_ref().map(|v| (v.id.as_str(), v.name.as_str()));
            Ok(p.attach_speaker(&speaker, attached)
                .map_err(ProjectError::from)?)
        })
        .await
    }

    /// Changes one segment, refused as changed elsewhere when it no longer is as `shown`.
    async fn change_segment(
        &self,
        project_id: &str,
        index: usize,
        shown: ProjectSegment,
        change: impl FnOnce(&mut Project) -> Result<(), ProjectError> + Send + 'static,
    ) -> Result<Project, WorkstationError> {
        let (project, ()) = self
            .update_project(project_id, move |p| {
                if !same_segment(p.segment(index)?, &shown) {
                    return Err(changed_elsewhere(p));
                }
                Ok(change(p)?)
            })
            .await?;
        Ok(project)
    }

    /// Gives a segment another speaker (`"new"` for a new one, `None` for none).
    pub async fn set_segment_speaker(
        &self,
        project_id: &str,
        index: usize,
        speaker: Option<String>,
        shown: ProjectSegment,
    ) -> Result<Project, WorkstationError> {
        self.change_segment(project_id, index, shown, move |p| {
            p.set_segment_speaker(index, speaker.as_deref())
        })
        .await
    }

    /// Splits a segment at a word or a time; the new part gets `speaker` (`"new"` for a new
    /// one) or the segment's.
    pub async fn split_segment(
        &self,
        project_id: &str,
        index: usize,
        at: SplitAt,
        speaker: Option<String>,
        shown: ProjectSegment,
    ) -> Result<Project, WorkstationError> {
        self.change_segment(project_id, index, shown, move |p| {
            p.split_segment(index, at, speaker.as_deref())
        })
        .await
    }

    /// Makes a voice profile from a speaker's clean turns (see [`profile_turns`]): joined
    /// into one clip of 5–20 s from the project's source audio, checked, transcribed and
    /// embedded as any reference clip is, and the speaker attached to it. A clip the checks
    /// refuse makes no profile. `name` defaults to the speaker's.
    pub async fn profile_from_speaker(
        &self,
        project_id: &str,
        speaker: &str,
        name: Option<String>,
        cancel: CancellationToken,
    ) -> Result<SpeakerProfile, WorkstationError> {
        let project = self.open_project(project_id).await?;
        let shown_speaker = project
            .speaker(speaker)
            .map_err(ProjectError::from)?
            .clone();
        let name = name
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| shown_speaker.display_name());
        let turns =
            profile_turns(&project, speaker).ok_or_else(|| SpeakerClipError::TooLittle {
                name: shown_speaker.display_name(),
                seconds: project
                    .segments
                    .iter()
                    .filter(|s| s.speaker.as_deref() == Some(speaker))
                    .map(|s| s.end - s.start)
                    .filter(|secs| *secs >= PROFILE_TURN_MIN_SECS)
                    .sum(),
            })?;
        let source = project
            .source_audio
            .clone()
            .ok_or(SpeakerClipError::NoAudio)?;
        let (store, id) = (self.store().clone(), project_id.to_string());
        let lane = self.services().audio_lane().clone();
        let (clip_project, clip_turns) = (project.clone(), turns.clone());
        let clip = blocking(move || {
            let path = project_file_in(&store, &id, &source)?;
            lane.as_batch("voice clip", || {
                Ok(profile_clip(&path, &clip_project, &clip_turns)?)
            })
        })
        .await?;
        let seconds = clip.duration_secs();
        let transcript = turns
            .iter()
            .map(|&i| project.segments[i].text.trim())
            .collect::<Vec<_>>()
            .join(" ");
        let voice = {
            let (library, name) = (self.services().voice_library().clone(), name.clone());
            blocking(move || Ok(library.create(&name).map_err(VoiceWorkError::from)?)).await?
        };
        let input = AudioInput::from_bytes(
            wav_bytes(&clip),
            format!("{}-{speaker}.wav", project.id).into(),
        );
        let added = self
            .services()
            .voices()
            .add_clip(&voice.id, input, Some(transcript), cancel)
            .await;
        let (voice, report) = match added {
            Ok(done) => done,
            Err(e) => {
                // No half-made profile stays behind.
                let (library, id) = (self.services().voice_library().clone(), voice.id.clone());
                let _ = blocking(move || {
                    let _ = library.delete(&id);
                    Ok(())
                })
                .await;
                return Err(e.into());
            }
        };
        let project = self
            .attach_speaker(
                project_id,
                speaker,
                Some(voice.id.clone()),
                project.speakers.clone(),
            )
            .await?;
        Ok(SpeakerProfile {
            project,
            voice,
            report,
            segments: turns,
            seconds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_takes_the_longest_turns_up_to_its_length() {
        let mut p: Project = serde_json::from_value(serde_json::json!({
            "format": 1, "id": "talk", "name": "Talk", "created_unix_ms": 0, "modified_unix_ms": 0,
            "speakers": [{"id": "S1"}, {"id": "S2"}],
            "segments": [
                {"start": 0.0, "end": 4.0, "text": "a", "speaker": "S1"},
                {"start": 4.0, "end": 4.5, "text": "mm", "speaker": "S2"},
                {"start": 4.5, "end": 11.0, "text": "b", "speaker": "S1"},
                {"start": 11.0, "end": 13.0, "text": "c", "speaker": "S2"},
                {"start": 13.0, "end": 20.0, "text": "d", "speaker": "S1"},
                {"start": 20.0, "end": 21.5, "text": "e", "speaker": "S1"}
            ]
        }))
        .unwrap();
        assert_eq!(profile_turns(&p, "S1"), Some(vec![2, 4]), "7 s + 6.5 s");
        assert_eq!(
            profile_turns(&p, "S2"),
            None,
            "2 s of turns a second or longer"
        );
        let dir = tempfile::tempdir().unwrap();
        let wav = dir.path().join("talk.wav");
        headroom_speech::audio::write_wav(
            &wav,
            &Audio {
                samples: vec![0.1; 16_000 * 40],
                sample_rate: 16_000,
            },
        )
        .unwrap();
        let clip = profile_clip(&wav, &p, &[2, 4]).unwrap();
        assert!(
            (clip.duration_secs() - 13.8).abs() < 0.05,
            "{}",
            clip.duration_secs()
        );
        p.segments[0].end = 30.0;
        let long = profile_clip(&wav, &p, &[0, 4]).unwrap();
        assert!(long.duration_secs() <= PROFILE_CLIP_MAX_SECS);
    }
}
