//! The edit of a project's recording as `project.json` keeps it: what was asked
//! ([`EditIntent`]) and what it keeps of the original ([`RecordingEdit`]). Making and using it
//! is the `editing` module's.

use headroom_speech::edit::EditList;
use serde::{Deserialize, Serialize};

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
        // Two times in seconds are a few dozen characters; a longer one is not echoed whole.
        if value.len() > 64 {
            return Err(format!(
                "{:?}…: give START-END in seconds, e.g. 12.30-14.85",
                value.chars().take(24).collect::<String>()
            ));
        }
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
    pub fn check(&self, duration: f64) -> Result<(), String> {
        if self.cuts.len() > MAX_CUTS {
            return Err(format!(
                "{} stretches cut; at most {MAX_CUTS}",
                self.cuts.len()
            ));
        }
        if self.struck_words.len() > MAX_CUTS {
            return Err(format!(
                "{} words struck; at most {MAX_CUTS}",
                self.struck_words.len()
            ));
        }
        if self.kept_words.len() > MAX_KEPT_WORDS {
            return Err(format!(
                "{} words kept by hand; at most {MAX_KEPT_WORDS}",
                self.kept_words.len()
            ));
        }
        let (least, most) = PAUSE_LIMITS;
        if let Some(p) = self.max_pause.filter(|p| !(least..=most).contains(p)) {
            return Err(format!("a pause limit of {p} s; it is {least}–{most} s"));
        }
        let within = |t: f64| t.is_finite() && (0.0..=duration + 1e-6).contains(&t);
        if let Some(c) = self
            .cuts
            .iter()
            .find(|c| !within(c.start) || !within(c.end) || c.end <= c.start)
        {
            return Err(format!(
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
            return Err(format!("a word at {t} s is not in the recording"));
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
