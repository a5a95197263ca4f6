//! The cut list of an edit for video editors, so the same cuts apply to a recording's video:
//! CMX 3600 EDL, Final Cut Pro 7 XML (xmeml: Premiere, Resolve), FCPXML (Final Cut Pro) and
//! OpenTimelineIO JSON. Every format lists the same events: each kept range of the original,
//! in frames at one rate, one after another on the edited timeline (see [`CutList::events`]).
//! A range with no frame of its own is left out. Room tone is the audio's: its range stands for
//! the pause it fills.

use super::EditList;
use serde_json::json;
use std::fmt::Write;

/// A cut list's file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutListFormat {
    Edl,
    Xmeml,
    Fcpxml,
    Otio,
}

impl CutListFormat {
    pub const ALL: [CutListFormat; 4] = [
        CutListFormat::Edl,
        CutListFormat::Xmeml,
        CutListFormat::Fcpxml,
        CutListFormat::Otio,
    ];

    pub fn extension(self) -> &'static str {
        match self {
            CutListFormat::Edl => "edl",
            CutListFormat::Xmeml => "xml",
            CutListFormat::Fcpxml => "fcpxml",
            CutListFormat::Otio => "otio",
        }
    }

    /// Its name as the front ends take it.
    pub fn name(self) -> &'static str {
        match self {
            CutListFormat::Edl => "edl",
            CutListFormat::Xmeml => "xmeml",
            CutListFormat::Fcpxml => "fcpxml",
            CutListFormat::Otio => "otio",
        }
    }

    /// The format named `name` (`xml` and `fcp7` name FCP 7 XML too).
    pub fn parse(name: &str) -> Option<CutListFormat> {
        match name.to_ascii_lowercase().as_str() {
            "edl" | "cmx3600" => Some(CutListFormat::Edl),
            "xmeml" | "xml" | "fcp7" | "fcpxml7" => Some(CutListFormat::Xmeml),
            "fcpxml" => Some(CutListFormat::Fcpxml),
            "otio" => Some(CutListFormat::Otio),
            _ => None,
        }
    }
}

/// Frame rates a cut list may be written at (whole frames a second, non-drop).
pub const FRAME_RATES: [u32; 5] = [24, 25, 30, 50, 60];

/// What a cut list says about its edit and its source.
#[derive(Debug, Clone)]
pub struct CutList<'a> {
    /// The edited timeline's name (the project's).
    pub title: &'a str,
    /// The original's file name, and where it is (a `file://` URL).
    pub source_name: &'a str,
    pub source_url: &'a str,
    pub source_secs: f64,
    pub sample_rate: u32,
    /// Frames a second (one of [`FRAME_RATES`]).
    pub fps: u32,
    /// The original has video: the events cut it as well as its audio.
    pub has_video: bool,
    pub edit: &'a EditList,
}

/// One event: the original's frames `[source_in, source_out)` at `record_in` on the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub source_in: u64,
    pub source_out: u64,
    pub record_in: u64,
}

impl Event {
    pub fn frames(&self) -> u64 {
        self.source_out - self.source_in
    }
}

impl CutList<'_> {
    /// The events, in order on the timeline. Each event's place on the timeline is where its
    /// range starts in the edited audio, rounded to the nearest frame (so the timeline never
    /// drifts from the audio by more than half a frame, however many events); its source starts
    /// at its range's start, rounded, and runs as long as its place on the timeline.
    pub fn events(&self) -> Vec<Event> {
        let frame = |secs: f64| (secs.max(0.0) * f64::from(self.fps)).round() as u64;
        let mut edited = 0.0;
        self.edit
            .kept
            .iter()
            .filter_map(|r| {
                let record_in = frame(edited);
                edited += r.len();
                let frames = frame(edited).saturating_sub(record_in);
                let source_in = frame(r.start);
                (frames > 0).then_some(Event {
                    source_in,
                    source_out: source_in + frames,
                    record_in,
                })
            })
            .collect()
    }

    fn source_frames(&self) -> u64 {
        (self.source_secs.max(0.0) * f64::from(self.fps)).round() as u64
    }

    /// The cut list in `format`.
    pub fn render(&self, format: CutListFormat) -> String {
        match format {
            CutListFormat::Edl => self.edl(),
            CutListFormat::Xmeml => self.xmeml(),
            CutListFormat::Fcpxml => self.fcpxml(),
            CutListFormat::Otio => self.otio(),
        }
    }

    /// `HH:MM:SS:FF`, non-drop.
    fn timecode(&self, frames: u64) -> String {
        let fps = u64::from(self.fps);
        let seconds = frames / fps;
        format!(
            "{:02}:{:02}:{:02}:{:02}",
            seconds / 3600,
            (seconds / 60) % 60,
            seconds % 60,
            frames % fps
        )
    }

    fn edl(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "TITLE: {}", one_line(self.title));
        let _ = writeln!(out, "FCM: NON-DROP FRAME\n");
        // A file-based source's reel is AX; the clip's name says which file.
        let channels = if self.has_video { "B" } else { "A" };
        for (n, e) in self.events().iter().enumerate() {
            // Event numbers have three digits: past 999 they start again at 1, as editors
            // that write long lists do.
            let _ = writeln!(
                out,
                "{:03}  AX       {channels:<5} C        {} {} {} {}",
                n % 999 + 1,
                self.timecode(e.source_in),
                self.timecode(e.source_out),
                self.timecode(e.record_in),
                self.timecode(e.record_in + e.frames()),
            );
            let _ = writeln!(out, "* FROM CLIP NAME: {}\n", one_line(self.source_name));
        }
        out
    }

    fn xmeml(&self) -> String {
        let fps = self.fps;
        let rate = format!("<rate><timebase>{fps}</timebase><ntsc>FALSE</ntsc></rate>");
        let events = self.events();
        let total: u64 = events.iter().map(Event::frames).sum();
        let name = xml_escape(self.source_name);
        let file_media = format!(
            "<media>{}<audio><samplecharacteristics><depth>16</depth><samplerate>{}</samplerate></samplecharacteristics><channelcount>1</channelcount></audio></media>",
            if self.has_video { "<video/>" } else { "" },
            self.sample_rate
        );
        let file = |first: bool| {
            if first {
                format!(
                    "<file id=\"file-1\"><name>{name}</name><pathurl>{}</pathurl>{rate}<duration>{}</duration>{file_media}</file>",
                    xml_escape(self.source_url),
                    self.source_frames()
                )
            } else {
                "<file id=\"file-1\"/>".to_string()
            }
        };
        let track = |kind: &str, first_id: usize| {
            let mut t = String::from("<track>\n");
            for (n, e) in events.iter().enumerate() {
                let _ = writeln!(
                    t,
                    "          <clipitem id=\"clipitem-{}\"><name>{name}</name><duration>{}</duration>{rate}<start>{}</start><end>{}</end><in>{}</in><out>{}</out>{}<sourcetrack><mediatype>{kind}</mediatype><trackindex>1</trackindex></sourcetrack></clipitem>",
                    first_id + n,
                    self.source_frames(),
                    e.record_in,
                    e.record_in + e.frames(),
                    e.source_in,
                    e.source_out,
                    file(first_id + n == 1),
                );
            }
            t.push_str("        </track>");
            t
        };
        let video = if self.has_video {
            format!(
                "<video>\n        {}\n      </video>\n      ",
                track("video", 1)
            )
        } else {
            String::new()
        };
        let audio_first = if self.has_video { events.len() + 1 } else { 1 };
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE xmeml>\n<xmeml version=\"4\">\n  <sequence id=\"sequence-1\">\n    <name>{}</name>\n    <duration>{total}</duration>\n    {rate}\n    <timecode>{rate}<string>00:00:00:00</string><frame>0</frame><displayformat>NDF</displayformat></timecode>\n    <media>\n      {video}<audio>\n        {}\n      </audio>\n    </media>\n  </sequence>\n</xmeml>\n",
            xml_escape(self.title),
            track("audio", audio_first),
        )
    }

    fn fcpxml(&self) -> String {
        let fps = self.fps;
        let time = |frames: u64| {
            if frames == 0 {
                "0s".to_string()
            } else {
                format!("{frames}/{fps}s")
            }
        };
        let events = self.events();
        let total: u64 = events.iter().map(Event::frames).sum();
        let name = xml_escape(self.source_name);
        let mut spine = String::new();
        for e in &events {
            let _ = writeln!(
                spine,
                "            <asset-clip ref=\"r2\" name=\"{name}\" offset=\"{}\" start=\"{}\" duration=\"{}\" format=\"r1\" tcFormat=\"NDF\"/>",
                time(e.record_in),
                time(e.source_in),
                time(e.frames()),
            );
        }
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE fcpxml>\n<fcpxml version=\"1.8\">\n  <resources>\n    <format id=\"r1\" frameDuration=\"1/{fps}s\" width=\"1920\" height=\"1080\"/>\n    <asset id=\"r2\" name=\"{name}\" src=\"{}\" start=\"0s\" duration=\"{}\" hasVideo=\"{}\" hasAudio=\"1\" audioSources=\"1\" audioChannels=\"1\" audioRate=\"{}\" format=\"r1\"/>\n  </resources>\n  <library>\n    <event name=\"Headroom\">\n      <project name=\"{}\">\n        <sequence format=\"r1\" duration=\"{}\" tcStart=\"0s\" tcFormat=\"NDF\">\n          <spine>\n{spine}          </spine>\n        </sequence>\n      </project>\n    </event>\n  </library>\n</fcpxml>\n",
            xml_escape(self.source_url),
            time(self.source_frames()),
            u8::from(self.has_video),
            self.sample_rate,
            xml_escape(self.title),
            time(total),
        )
    }

    fn otio(&self) -> String {
        let fps = f64::from(self.fps);
        let at = |frames: u64| json!({"OTIO_SCHEMA": "RationalTime.1", "rate": fps, "value": frames as f64});
        let range = |start: u64, frames: u64| json!({"OTIO_SCHEMA": "TimeRange.1", "start_time": at(start), "duration": at(frames)});
        let clips: Vec<serde_json::Value> = self
            .events()
            .iter()
            .map(|e| {
                json!({
                    "OTIO_SCHEMA": "Clip.2",
                    "name": self.source_name,
                    "metadata": {},
                    "source_range": range(e.source_in, e.frames()),
                    "effects": [],
                    "markers": [],
                    "enabled": true,
                    "media_references": {
                        "DEFAULT_MEDIA": {
                            "OTIO_SCHEMA": "ExternalReference.1",
                            "name": self.source_name,
                            "metadata": {},
                            "target_url": self.source_url,
                            "available_range": range(0, self.source_frames()),
                        }
                    },
                    "active_media_reference_key": "DEFAULT_MEDIA",
                })
            })
            .collect();
        let track = |kind: &str, name: &str| {
            json!({
                "OTIO_SCHEMA": "Track.1",
                "name": name,
                "kind": kind,
                "metadata": {},
                "source_range": null,
                "effects": [],
                "markers": [],
                "enabled": true,
                "children": clips,
            })
        };
        let mut tracks = Vec::new();
        if self.has_video {
            tracks.push(track("Video", "Video 1"));
        }
        tracks.push(track("Audio", "Audio 1"));
        let timeline = json!({
            "OTIO_SCHEMA": "Timeline.1",
            "name": self.title,
            "metadata": {"headroom": {"source": self.source_name, "fps": self.fps}},
            "global_start_time": null,
            "tracks": {
                "OTIO_SCHEMA": "Stack.1",
                "name": "tracks",
                "metadata": {},
                "source_range": null,
                "effects": [],
                "markers": [],
                "enabled": true,
                "children": tracks,
            }
        });
        let mut text = serde_json::to_string_pretty(&timeline).expect("a timeline serializes");
        text.push('\n');
        text
    }
}

/// Text for an XML element or attribute.
pub fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 has no way to write the other control characters.
            c if c.is_control() && !matches!(c, '\t' | '\n' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Text on one line, for the EDL's line-based fields.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edit::KeptRange;

    fn cut_list(edit: &EditList) -> CutList<'_> {
        CutList {
            title: "Ep <1> & \"more\"",
            source_name: "talk & co.wav",
            source_url: "file:///tmp/talk%20%26%20co.wav",
            source_secs: 10.0,
            sample_rate: 16_000,
            fps: 25,
            has_video: false,
            edit,
        }
    }

    fn edit() -> EditList {
        EditList {
            kept: vec![
                KeptRange::new(0.0, 1.0),
                KeptRange::new(2.0, 2.01),
                KeptRange::new(3.02, 4.5),
            ],
            room_tone: None,
        }
    }

    #[test]
    fn events_are_the_kept_ranges_in_frames_one_after_another() {
        let edit = edit();
        let events = cut_list(&edit).events();
        assert_eq!(
            events,
            vec![
                Event {
                    source_in: 0,
                    source_out: 25,
                    record_in: 0
                },
                Event {
                    source_in: 76,
                    source_out: 113,
                    record_in: 25
                },
            ],
            "the 10 ms range has no frame of its own"
        );
    }

    #[test]
    fn the_edl_lists_each_event_with_its_timecodes() {
        let edit = edit();
        let edl = cut_list(&edit).render(CutListFormat::Edl);
        assert!(edl.starts_with("TITLE: Ep <1> & \"more\"\nFCM: NON-DROP FRAME\n"));
        assert!(edl.contains(
            "002  AX       A     C        00:00:03:01 00:00:04:13 00:00:01:00 00:00:02:12\n* FROM CLIP NAME: talk & co.wav\n"
        ));
    }

    #[test]
    fn the_xml_formats_escape_names_and_the_otio_is_json() {
        let edit = edit();
        let list = cut_list(&edit);
        for format in [CutListFormat::Xmeml, CutListFormat::Fcpxml] {
            let xml = list.render(format);
            assert!(
                xml.contains("Ep &lt;1&gt; &amp; &quot;more&quot;"),
                "{format:?}"
            );
            assert!(!xml.contains("talk & co"), "{format:?}");
        }
        let fcpxml = list.render(CutListFormat::Fcpxml);
        assert!(fcpxml.contains("offset=\"25/25s\" start=\"76/25s\" duration=\"37/25s\""));
        let otio: serde_json::Value =
            serde_json::from_str(&list.render(CutListFormat::Otio)).unwrap();
        let clips = &otio["tracks"]["children"][0]["children"];
        assert_eq!(clips.as_array().unwrap().len(), 2);
        assert_eq!(clips[1]["source_range"]["start_time"]["value"], 76.0);
        assert_eq!(clips[1]["source_range"]["duration"]["value"], 37.0);
    }

    #[test]
    fn the_timeline_never_drifts_from_the_audio_by_half_a_frame() {
        // 1,200 ranges of 0.33 s: each rounded alone, the timeline would lose a quarter of a
        // frame each time.
        let kept: Vec<KeptRange> = (0..1200)
            .map(|i| KeptRange::new(i as f64, i as f64 + 0.33))
            .collect();
        let edit = EditList {
            kept,
            room_tone: None,
        };
        let mut list = cut_list(&edit);
        list.source_secs = 1200.0;
        let events = list.events();
        let mut audio = 0.0;
        for (e, r) in events.iter().zip(&edit.kept) {
            assert!((e.record_in as f64 / 25.0 - audio).abs() <= 0.5 / 25.0 + 1e-9);
            assert_eq!(e.source_in, (r.start * 25.0).round() as u64);
            audio += r.len();
        }
        let edl = list.render(CutListFormat::Edl);
        assert!(edl.contains("\n999  AX"));
        assert_eq!(
            edl.matches("\n001  AX").count(),
            2,
            "numbers start again after 999"
        );
        assert!(!edl.contains("1000  AX"));
    }

    #[test]
    fn format_names_parse() {
        for format in CutListFormat::ALL {
            assert_eq!(CutListFormat::parse(format.name()), Some(format));
        }
        assert_eq!(CutListFormat::parse("XML"), Some(CutListFormat::Xmeml));
        assert_eq!(CutListFormat::parse("aaf"), None);
    }
}
