//! Speakers in a project: whether transcribing finds them, and the user's edits to them —
//! rename (everywhere: segments name speakers by id, so the one name is the project's),
//! merge one into another, split a segment (the new part may get another speaker), give a
//! segment another speaker, attach a speaker to a voice profile. Each edit is a plain change
//! of the manifest, made under the store's lock by the workstation (see
//! `crate::speakers`), and checked against what the view showed.

use super::{Project, ProjectError, ProjectSegment};
use headroom_speech::asr::diarize::{SpeakerCount, MAX_SPEAKERS};
use headroom_speech::asr::Speaker;
use serde::{Deserialize, Serialize};

/// Whether transcribing a project finds who speaks when: `off`, `auto` (the number of
/// speakers estimated) or a number the user knows (`2`…`10`). Written as that string.
///
/// Off by default: finding speakers costs another pass over the audio (the speaker embedder
/// every 0.2 s of speech) and needs the speaker embedder and the voice activity model
/// installed; a project that never asked for speakers transcribes as it always did. The
/// Transcribe view offers the choice beside its button, and the project keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpeakerSetting {
    #[default]
    Off,
    Auto,
    Exactly(usize),
}

impl SpeakerSetting {
    /// The count to ask the diarizer for; `None` when speakers are off.
    pub fn count(self) -> Option<SpeakerCount> {
        match self {
            SpeakerSetting::Off => None,
            SpeakerSetting::Auto => Some(SpeakerCount::Auto),
            SpeakerSetting::Exactly(n) => Some(SpeakerCount::Exactly(n)),
        }
    }
}

impl std::str::FromStr for SpeakerSetting {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("off") || s.eq_ignore_ascii_case("none") {
            return Ok(SpeakerSetting::Off);
        }
        match s.parse::<SpeakerCount>() {
            Ok(SpeakerCount::Auto) => Ok(SpeakerSetting::Auto),
            Ok(SpeakerCount::Exactly(n)) => Ok(SpeakerSetting::Exactly(n)),
            Err(_) => Err(format!(
                "speakers must be `off`, `auto` or a number from 1 to {MAX_SPEAKERS}, not {s:?}"
            )),
        }
    }
}

impl std::fmt::Display for SpeakerSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpeakerSetting::Off => f.write_str("off"),
            SpeakerSetting::Auto => f.write_str("auto"),
            SpeakerSetting::Exactly(n) => write!(f, "{n}"),
        }
    }
}

impl Serialize for SpeakerSetting {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SpeakerSetting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Where a segment is split: before one of its words (counted from 0), or at a time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(tag = "at", rename_all = "snake_case")]
pub enum SplitAt {
    /// The new part starts with this word.
    Word { index: usize },
    /// The new part starts with the first word that starts at or after this time (seconds).
    Time { secs: f64 },
}

/// The speaker a split's new part (or a segment) gets: `None` keeps the segment's, an id names
/// one of the project's speakers, [`NEW_SPEAKER`] makes a new one.
pub const NEW_SPEAKER: &str = "new";

/// Why a speaker edit was refused.
#[derive(Debug, thiserror::Error)]
pub enum SpeakerEditError {
    #[error("no speaker {0:?} in this project")]
    NoSuchSpeaker(String),
    #[error("a speaker cannot be merged into itself")]
    SameSpeaker,
    #[error("segment {} cannot be split there: each part needs at least one word", .0 + 1)]
    BadSplit(usize),
    #[error("a speaker's name cannot be longer than 80 characters")]
    NameTooLong,
    #[error("a project tells at most {MAX_SPEAKERS} speakers apart")]
    TooManySpeakers,
}

impl From<SpeakerEditError> for ProjectError {
    fn from(e: SpeakerEditError) -> Self {
        ProjectError::InvalidName(e.to_string())
    }
}

impl Project {
    /// The speaker with this id.
    pub fn speaker(&self, id: &str) -> Result<&Speaker, SpeakerEditError> {
        self.speakers
            .iter()
            .find(|s| s.id == id)
            .ok_or_else(|| SpeakerEditError::NoSuchSpeaker(id.to_string()))
    }

    fn speaker_mut(&mut self, id: &str) -> Result<&mut Speaker, SpeakerEditError> {
        self.speakers
            .iter_mut()
            .find(|s| s.id == id)
            .ok_or_else(|| SpeakerEditError::NoSuchSpeaker(id.to_string()))
    }

    /// Names a speaker everywhere in the project (segments name it by id); an empty name
    /// gives it back its label ("Speaker 2").
    pub fn rename_speaker(&mut self, id: &str, name: &str) -> Result<(), SpeakerEditError> {
        let name = name.trim();
        if name.chars().count() > 80 {
            return Err(SpeakerEditError::NameTooLong);
        }
        let speaker = self.speaker_mut(id)?;
        speaker.name = (!name.is_empty()).then(|| name.to_string());
        Ok(())
    }

    /// Attaches a speaker to a voice profile ("this is <profile>"): it takes the profile's
    /// name, and the narration speaks it in that voice by default. `None` detaches it.
    pub fn attach_speaker(
        &mut self,
        id: &str,
        profile: Option<(&str, &str)>,
    ) -> Result<(), SpeakerEditError> {
        let speaker = self.speaker_mut(id)?;
        match profile {
            Some((profile_id, name)) => {
                speaker.profile = Some(profile_id.to_string());
                speaker.name = Some(name.to_string());
            }
            None => speaker.profile = None,
        }
        // Attached by the user, not recognised by voice.
        speaker.similarity = None;
        Ok(())
    }

    /// Merges speaker `from` into `into`: its segments become `into`'s, and it is gone.
    pub fn merge_speakers(&mut self, from: &str, into: &str) -> Result<(), SpeakerEditError> {
        if from == into {
            return Err(SpeakerEditError::SameSpeaker);
        }
        self.speaker(into)?;
        self.speaker(from)?;
        for segment in &mut self.segments {
            if segment.speaker.as_deref() == Some(from) {
                segment.speaker = Some(into.to_string());
            }
        }
        self.speakers.retain(|s| s.id != from);
        if let Some(n) = self.narration.as_mut() {
            n.settings.speaker_voices.remove(from);
        }
        self.refresh_speaker_seconds();
        Ok(())
    }

    /// Gives a segment another speaker ([`NEW_SPEAKER`] for a new one; `None` for none).
    pub fn set_segment_speaker(
        &mut self,
        index: usize,
        speaker: Option<&str>,
    ) -> Result<(), ProjectError> {
        self.segment(index)?;
        let speaker = match speaker {
            Some(id) => Some(self.speaker_for(id)?),
            None => None,
        };
        self.segment_mut(index)?.speaker = speaker;
        self.refresh_speaker_seconds();
        Ok(())
    }

    /// The id for a speaker choice: an existing speaker's, or a new speaker's.
    fn speaker_for(&mut self, choice: &str) -> Result<String, SpeakerEditError> {
        if choice != NEW_SPEAKER {
            return Ok(self.speaker(choice)?.id.clone());
        }
        if self.speakers.len() >= MAX_SPEAKERS {
            return Err(SpeakerEditError::TooManySpeakers);
        }
        let n = (0..)
            .find(|n| !self.speakers.iter().any(|s| s.id == format!("S{}", n + 1)))
            .expect("a free label");
        let speaker = Speaker::numbered(n);
        let id = speaker.id.clone();
        self.speakers.push(speaker);
        Ok(id)
    }

    /// Splits a segment in two at a word (or the first word at or after a time); the new
    /// part is a segment of its own right after it, with `speaker` (see
    /// [`Project::set_segment_speaker`]) or the segment's. A segment without word times is
    /// split between its words, its time shared out by their lengths. A pending or decided
    /// cleanup of the segment is dropped: it was of the whole.
    pub fn split_segment(
        &mut self,
        index: usize,
        at: SplitAt,
        speaker: Option<&str>,
    ) -> Result<(), ProjectError> {
        let segment = self.segment(index)?.clone();
        let (first, second) =
            split(&segment, at).ok_or(ProjectError::from(SpeakerEditError::BadSplit(index)))?;
        let speaker = match speaker {
            Some(choice) => Some(self.speaker_for(choice)?),
            None => segment.speaker.clone(),
        };
        self.segments[index] = first;
        self.segments
            .insert(index + 1, ProjectSegment { speaker, ..second });
        self.refresh_speaker_seconds();
        Ok(())
    }

    /// Each speaker's seconds of speech, from the segments they speak.
    pub fn refresh_speaker_seconds(&mut self) {
        for speaker in &mut self.speakers {
            speaker.seconds = self
                .segments
                .iter()
                .filter(|s| s.speaker.as_deref() == Some(speaker.id.as_str()))
                .map(|s| (s.end - s.start).max(0.0))
                .sum();
        }
    }
}

/// A segment's two parts, split as [`Project::split_segment`] says; `None` when a part would
/// have no words.
fn split(segment: &ProjectSegment, at: SplitAt) -> Option<(ProjectSegment, ProjectSegment)> {
    let part = |text: String, start: f64, end: f64, words| ProjectSegment {
        start,
        end,
        text,
        suggestion: None,
        speaker: segment.speaker.clone(),
        words,
    };
    if !segment.words.is_empty() {
        let words = &segment.words;
        let k = match at {
            SplitAt::Word { index } => index,
            SplitAt::Time { secs } => words.iter().position(|w| w.start >= secs)?,
        };
        if k == 0 || k >= words.len() {
            return None;
        }
        let separator = headroom_speech::asr::word_separator(&segment.text, segment.words.len());
        let text = |ws: &[super::ProjectWord]| {
            ws.iter()
                .map(|w| w.text.as_str())
                .collect::<Vec<_>>()
                .join(separator)
        };
        let (a, b) = words.split_at(k);
        let middle = b[0].start.max(segment.start).min(segment.end);
        return Some((
            part(text(a), segment.start, middle, a.to_vec()),
            part(text(b), middle, segment.end, b.to_vec()),
        ));
    }
    // No word times: split between the text's words, timed by their share of the letters.
    let words: Vec<&str> = segment.text.split_whitespace().collect();
    let letters = |ws: &[&str]| ws.iter().map(|w| w.chars().count()).sum::<usize>() as f64;
    let total = letters(&words).max(1.0);
    let span = segment.end - segment.start;
    let k = match at {
        SplitAt::Word { index } => index,
        SplitAt::Time { secs } => (1..words.len())
            .find(|&k| segment.start + span * letters(&words[..k]) / total >= secs)?,
    };
    if k == 0 || k >= words.len() {
        return None;
    }
    let middle = segment.start + span * letters(&words[..k]) / total;
    Some((
        part(words[..k].join(" "), segment.start, middle, Vec::new()),
        part(words[k..].join(" "), middle, segment.end, Vec::new()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projects::{ProjectWord, Suggestion, SuggestionSource};

    fn word(text: &str, start: f64, end: f64) -> ProjectWord {
        ProjectWord {
            start,
            end,
            text: text.into(),
        }
    }

    fn project() -> Project {
        let mut p: Project = serde_json::from_value(serde_json::json!({
            "format": 1, "id": "talk", "name": "Talk", "created_unix_ms": 0, "modified_unix_ms": 0
        }))
        .unwrap();
        p.speakers = vec![Speaker::numbered(0), Speaker::numbered(1)];
        p.segments = vec![
            ProjectSegment {
                start: 0.0,
                end: 3.0,
                text: "Hello there. How are you?".into(),
                suggestion: Some(Suggestion {
                    text: "Hello there. How are you?".into(),
                    source: SuggestionSource::RuleBased,
                    note: None,
                    note_code: None,
                    decision: crate::projects::Decision::Pending,
                }),
                speaker: Some("S1".into()),
                words: vec![
                    word("Hello", 0.1, 0.5),
                    word("there.", 0.5, 1.0),
                    word("How", 1.6, 1.9),
                    word("are", 1.9, 2.2),
                    word("you?", 2.2, 2.8),
                ],
            },
            ProjectSegment {
                start: 3.5,
                end: 5.5,
                text: "Fine, thanks.".into(),
                suggestion: None,
                speaker: Some("S2".into()),
                words: Vec::new(),
            },
        ];
        p.refresh_speaker_seconds();
        p
    }

    #[test]
    fn settings_read_and_write_as_strings() {
        for (text, setting) in [
            ("off", SpeakerSetting::Off),
            ("auto", SpeakerSetting::Auto),
            ("3", SpeakerSetting::Exactly(3)),
        ] {
            assert_eq!(text.parse::<SpeakerSetting>(), Ok(setting));
            assert_eq!(
                serde_json::to_string(&setting).unwrap(),
                format!("\"{text}\"")
            );
        }
        assert!("11".parse::<SpeakerSetting>().is_err());
        assert_eq!(SpeakerSetting::default().count(), None);
        assert_eq!(
            SpeakerSetting::Exactly(2).count(),
            Some(SpeakerCount::Exactly(2))
        );
    }

    #[test]
    fn rename_attach_and_merge_change_every_segment() {
        let mut p = project();
        p.rename_speaker("S2", "  Grace ").unwrap();
        assert_eq!(p.speaker("S2").unwrap().display_name(), "Grace");
        p.rename_speaker("S2", "").unwrap();
        assert_eq!(p.speaker("S2").unwrap().display_name(), "Speaker 2");
        p.attach_speaker("S1", Some(("ada", "Ada"))).unwrap();
        assert_eq!(p.speaker("S1").unwrap().profile.as_deref(), Some("ada"));
        assert_eq!(p.speaker("S1").unwrap().display_name(), "Ada");
        assert!(matches!(
            p.merge_speakers("S1", "S1"),
            Err(SpeakerEditError::SameSpeaker)
        ));
        assert!(p.merge_speakers("S9", "S1").is_err());
        p.merge_speakers("S2", "S1").unwrap();
        assert_eq!(p.speakers.len(), 1);
        assert!(p
            .segments
            .iter()
            .all(|s| s.speaker.as_deref() == Some("S1")));
        assert_eq!(p.speakers[0].seconds, 5.0);
    }

    #[test]
    fn a_split_at_a_word_or_a_time_gives_the_new_part_its_speaker() {
        let mut p = project();
        p.split_segment(0, SplitAt::Word { index: 2 }, Some("S2"))
            .unwrap();
        assert_eq!(p.segments.len(), 3);
        let (a, b) = (&p.segments[0], &p.segments[1]);
        assert_eq!(
            (a.text.as_str(), a.start, a.end),
            ("Hello there.", 0.0, 1.6)
        );
        assert_eq!(
            (b.text.as_str(), b.start, b.end),
            ("How are you?", 1.6, 3.0)
        );
        assert_eq!(b.speaker.as_deref(), Some("S2"));
        assert!(a.suggestion.is_none(), "a cleanup of the whole is dropped");
        assert_eq!(p.speaker("S2").unwrap().seconds, 1.4 + 2.0);

        // By time, into a new speaker; a segment without word times splits by letters.
        p.split_segment(2, SplitAt::Time { secs: 4.2 }, Some(NEW_SPEAKER))
            .unwrap();
        assert_eq!(p.segments[2].text, "Fine,");
        assert_eq!(p.segments[3].text, "thanks.");
        assert_eq!(p.segments[3].speaker.as_deref(), Some("S3"));
        assert!(p.segments[3].start > 3.5 && p.segments[3].start < 5.5);

        for bad in [SplitAt::Word { index: 0 }, SplitAt::Word { index: 3 }] {
            assert!(p.split_segment(0, bad, None).is_err());
        }
        assert!(p
            .split_segment(0, SplitAt::Time { secs: 9.0 }, None)
            .is_err());
        assert!(p
            .split_segment(7, SplitAt::Word { index: 1 }, None)
            .is_err());
        p.set_segment_speaker(0, Some("S3")).unwrap();
        assert_eq!(p.segments[0].speaker.as_deref(), Some("S3"));
        assert!(p.set_segment_speaker(0, Some("S8")).is_err());
    }
}
