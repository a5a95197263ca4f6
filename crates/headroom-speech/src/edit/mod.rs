//! Editing a recording by its words: which stretches of the original are kept (an
//! [`EditList`], the non-destructive edit a project stores), where each cut falls
//! ([`plan`]: in the quietest point of the gap beside a word, never inside one), the edited
//! audio made from the original as it is decoded ([`render`]: equal-power crossfades at the
//! joins, optional room tone), the transcript re-timed to it ([`EditList::retime`]), and the
//! cut list for video editors ([`interchange`]: CMX 3600 EDL, FCP 7 XML, FCPXML, OTIO).

pub mod interchange;
pub mod plan;
pub mod render;

pub use plan::{plan, snap_to_pauses, EditRequest, Loudness, Quietness, TimedWord};
pub use render::{play_edit, render_edit, EditRender};

use crate::asr::{Segment, Transcript, Word};
use serde::{Deserialize, Serialize};

/// A stretch of the original recording kept in the edit, in seconds from its start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct KeptRange {
    pub start: f64,
    pub end: f64,
    /// A shortened pause that sounds as the recording's room tone (its quietest stretch)
    /// instead of its own audio; its times are still the pause's, which a video editor shows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub room_tone: bool,
}

impl KeptRange {
    pub fn new(start: f64, end: f64) -> KeptRange {
        KeptRange {
            start,
            end,
            room_tone: false,
        }
    }

    pub fn len(&self) -> f64 {
        (self.end - self.start).max(0.0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() <= 0.0
    }
}

/// The edit of a recording: the stretches of the original kept, in order, each after the one
/// before; the edited recording is them joined.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct EditList {
    pub kept: Vec<KeptRange>,
    /// Where the room tone comes from (the recording's quietest stretch), when a kept range
    /// asks for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room_tone: Option<KeptRange>,
}

impl EditList {
    /// The whole recording, uncut.
    pub fn whole(duration_secs: f64) -> EditList {
        EditList {
            kept: vec![KeptRange::new(0.0, duration_secs)],
            room_tone: None,
        }
    }

    /// The edited recording's length: the kept ranges' lengths summed.
    pub fn duration_secs(&self) -> f64 {
        self.kept.iter().map(KeptRange::len).sum()
    }

    /// Where the joins are in the edited recording, in seconds: between kept ranges that do
    /// not run on one into the other (room tone joins whatever is beside it).
    pub fn join_times(&self) -> Vec<f64> {
        let mut at = 0.0;
        self.kept
            .windows(2)
            .filter_map(|w| {
                at += w[0].len();
                (w[1].room_tone || w[0].room_tone || w[1].start > w[0].end).then_some(at)
            })
            .collect()
    }

    /// How many joins there are (see [`EditList::join_times`]).
    pub fn joins(&self) -> usize {
        self.join_times().len()
    }

    /// Seconds of the original left out.
    pub fn removed_secs(&self, duration_secs: f64) -> f64 {
        (duration_secs - self.duration_secs()).max(0.0)
    }

    /// Where each kept range starts in the edited recording.
    fn starts(&self) -> Vec<f64> {
        let mut at = 0.0;
        self.kept
            .iter()
            .map(|r| {
                let start = at;
                at += r.len();
                start
            })
            .collect()
    }

    /// The range playing `secs` of the original (not room tone), with the edited time its
    /// start sounds at; `starts` from [`EditList::starts`]. A binary search: the ranges are in
    /// order.
    fn range_at(&self, starts: &[f64], secs: f64) -> Option<(KeptRange, f64)> {
        let i = self.kept.partition_point(|r| r.end < secs);
        self.kept[i..]
            .iter()
            .zip(&starts[i..])
            .take_while(|(r, _)| r.start <= secs)
            .find(|(r, _)| !r.room_tone && (r.start..=r.end).contains(&secs))
            .map(|(r, &at)| (*r, at))
    }

    /// What plays from `secs` of the original on: the kept ranges from there, the one holding
    /// it cut to start there (a point cut away plays from the next range kept).
    pub fn from_original(&self, secs: f64) -> EditList {
        let first = self.kept.partition_point(|r| r.end <= secs);
        let mut kept = self.kept[first..].to_vec();
        if let Some(r) = kept.first_mut() {
            r.start = r.start.max(secs);
        }
        EditList {
            kept,
            room_tone: self.room_tone,
        }
    }

    /// Where `secs` of the original sounds in the edited recording, if it is kept (in a range
    /// that plays the original, not room tone).
    pub fn edited_time(&self, secs: f64) -> Option<f64> {
        self.edited_times(&[secs])[0]
    }

    /// [`EditList::edited_time`] of each of `secs`, the ranges' places found once.
    pub fn edited_times(&self, secs: &[f64]) -> Vec<Option<f64>> {
        let starts = self.starts();
        secs.iter()
            .map(|&t| self.range_at(&starts, t).map(|(r, at)| at + t - r.start))
            .collect()
    }

    /// The transcript of the edited recording: the original's words that are kept, at the
    /// times they now sound (nothing is transcribed again). A word is kept when its middle is;
    /// a segment without word times is kept when its middle is, and loses none of its text.
    pub fn retime(&self, transcript: &Transcript) -> Transcript {
        let starts = self.starts();
        let moved = |range: &KeptRange, at: f64, secs: f64| {
            at + secs.clamp(range.start, range.end) - range.start
        };
        // Languages written without spaces between words join them so.
        let spaced = !matches!(
            transcript.language.as_deref(),
            Some("ja" | "zh" | "th" | "lo" | "my" | "km")
        );
        let segments = transcript
            .segments
            .iter()
            .filter_map(|segment| {
                if segment.words.is_empty() {
                    let (range, at) =
                        self.range_at(&starts, (segment.start + segment.end) / 2.0)?;
                    let mut kept = segment.clone();
                    kept.start = moved(&range, at, segment.start);
                    kept.end = moved(&range, at, segment.end);
                    return Some(kept);
                }
                let words: Vec<Word> = segment
                    .words
                    .iter()
                    .filter_map(|word| {
                        let (range, at) = self.range_at(&starts, (word.start + word.end) / 2.0)?;
                        Some(Word {
                            start: moved(&range, at, word.start),
                            end: moved(&range, at, word.end),
                            ..word.clone()
                        })
                    })
                    .collect();
                let (first, last) = (words.first()?, words.last()?);
                // A segment none of whose words is cut keeps its text as written.
                let text = if words.len() == segment.words.len() {
                    segment.text.clone()
                } else {
                    let texts: Vec<&str> = words.iter().map(|w| w.text.trim()).collect();
                    texts.join(if spaced { " " } else { "" })
                };
                Some(Segment {
                    start: first.start,
                    end: last.end,
                    text,
                    speaker: segment.speaker.clone(),
                    words,
                })
            })
            .collect();
        Transcript {
            language: transcript.language.clone(),
            duration: self.duration_secs(),
            segments,
            speakers: transcript.speakers.clone(),
        }
    }

    /// Checks what a stored or received edit must be: ranges within the recording, each
    /// after the one before, none empty, room tone only with its source.
    pub fn check(&self, duration_secs: f64) -> Result<(), String> {
        let within = |r: &KeptRange| {
            r.start.is_finite()
                && r.end.is_finite()
                && r.start >= 0.0
                && r.end <= duration_secs + 1e-6
                && r.end > r.start
        };
        if let Some(bad) = self.kept.iter().find(|r| !within(r)) {
            return Err(format!(
                "a kept range {:.3}–{:.3} s is not within the recording's {duration_secs:.3} s",
                bad.start, bad.end
            ));
        }
        if self.kept.windows(2).any(|w| w[1].start < w[0].end - 1e-9) {
            return Err("kept ranges overlap or are out of order".into());
        }
        let tone = self.kept.iter().any(|r| r.room_tone);
        match self.room_tone {
            None if tone => Err("room tone is asked for without its source".into()),
            Some(r) if !within(&r) => {
                Err("the room tone's source is not within the recording".into())
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(start: f64, end: f64, text: &str) -> Word {
        Word {
            start,
            end,
            text: text.into(),
            probability: 0.9,
            speaker: Some("S1".into()),
        }
    }

    fn edit(kept: &[(f64, f64)]) -> EditList {
        EditList {
            kept: kept.iter().map(|&(s, e)| KeptRange::new(s, e)).collect(),
            room_tone: None,
        }
    }

    #[test]
    fn kept_words_move_to_where_they_now_sound_and_cut_ones_go() {
        let transcript = Transcript {
            language: Some("en".into()),
            duration: 6.0,
            segments: vec![Segment {
                start: 0.0,
                end: 6.0,
                text: "So, um, the the answer is yes.".into(),
                words: vec![
                    word(0.0, 0.5, "So,"),
                    word(0.7, 1.1, "um,"),
                    word(1.3, 1.5, "the"),
                    word(1.6, 1.8, "the"),
                    word(2.0, 2.6, "answer"),
                    word(2.7, 2.9, "is"),
                    word(5.0, 5.5, "yes."),
                ],
                speaker: Some("S1".into()),
            }],
            speakers: Vec::new(),
        };
        // Cut "um," (0.6–1.2), the first "the" (1.25–1.55) and 3.0–4.9 of pause.
        let list = edit(&[(0.0, 0.6), (1.2, 1.25), (1.55, 3.0), (4.9, 6.0)]);
        assert!((list.duration_secs() - 3.2).abs() < 1e-9);
        assert_eq!(list.joins(), 3);
        let edited = list.retime(&transcript);
        let segment = &edited.segments[0];
        assert_eq!(segment.text, "So, the answer is yes.");
        let times: Vec<(f64, f64)> = segment.words.iter().map(|w| (w.start, w.end)).collect();
        let want = [
            (0.0, 0.5),
            (0.65 + 0.05, 0.65 + 0.25),
            (0.65 + 0.45, 0.65 + 1.05),
            (0.65 + 1.15, 0.65 + 1.35),
            (2.1 + 0.1, 2.1 + 0.6),
        ];
        for ((got, want), w) in times.iter().zip(want).zip(&segment.words) {
            assert!(
                (got.0 - want.0).abs() < 1e-9 && (got.1 - want.1).abs() < 1e-9,
                "{}: {got:?} against {want:?}",
                w.text
            );
        }
        assert_eq!(segment.speaker.as_deref(), Some("S1"));
        assert!((edited.duration - 3.2).abs() < 1e-9);
        assert!((list.edited_time(5.0).unwrap() - 2.2).abs() < 1e-9);
        assert_eq!(list.edited_time(1.0), None);
    }

    #[test]
    fn playing_from_a_point_keeps_what_follows_it() {
        let mut list = edit(&[(0.0, 0.6), (1.2, 1.25), (1.55, 3.0), (4.9, 6.0)]);
        list.kept[2].room_tone = true;
        list.room_tone = Some(KeptRange::new(3.2, 3.6));
        // Inside a range: it starts there; the rest follow.
        let from = list.from_original(2.0);
        let kept: Vec<(f64, f64, bool)> = from
            .kept
            .iter()
            .map(|r| (r.start, r.end, r.room_tone))
            .collect();
        assert_eq!(kept, [(2.0, 3.0, true), (4.9, 6.0, false)]);
        assert_eq!(from.room_tone, list.room_tone);
        // In a cut: from the next range kept.
        let from = list.from_original(4.0);
        assert_eq!(from.kept, [KeptRange::new(4.9, 6.0)]);
        assert!((from.duration_secs() - 1.1).abs() < 1e-9);
        // At a range's end, or past the last: what follows, or nothing.
        assert_eq!(list.from_original(0.6).kept[0], KeptRange::new(1.2, 1.25));
        assert!(list.from_original(6.0).kept.is_empty());
        assert_eq!(list.from_original(0.0), list);
    }

    #[test]
    fn a_segment_without_word_times_is_kept_whole_by_its_middle() {
        let transcript = Transcript {
            language: None,
            duration: 4.0,
            segments: vec![
                Segment::new(0.0, 1.0, "gone"),
                Segment::new(2.0, 3.0, "kept"),
            ],
            speakers: Vec::new(),
        };
        let edited = edit(&[(1.5, 4.0)]).retime(&transcript);
        assert_eq!(edited.segments.len(), 1);
        assert_eq!(edited.segments[0].text, "kept");
        assert_eq!(
            (edited.segments[0].start, edited.segments[0].end),
            (0.5, 1.5)
        );
    }

    #[test]
    fn a_malformed_edit_is_refused() {
        assert!(edit(&[(0.0, 1.0), (2.0, 3.0)]).check(3.0).is_ok());
        assert!(edit(&[(0.0, 1.0), (0.5, 3.0)]).check(3.0).is_err());
        assert!(edit(&[(0.0, 4.0)]).check(3.0).is_err());
        assert!(edit(&[(1.0, 1.0)]).check(3.0).is_err());
        assert!(edit(&[(f64::NAN, 1.0)]).check(3.0).is_err());
        let mut toned = edit(&[(0.0, 1.0), (1.0, 1.5)]);
        toned.kept[1].room_tone = true;
        assert!(toned.check(3.0).is_err());
        toned.room_tone = Some(KeptRange::new(2.0, 2.5));
        assert!(toned.check(3.0).is_ok());
    }
}
