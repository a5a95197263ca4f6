//! Speakers through the real `headroom` binary: `headroom transcribe --speakers`, the exports,
//! voice profiles and known speakers, and `headroom serve`'s `diarized_json` through the
//! official openai Python client. The fixture is a two-speaker conversation synthesized here
//! with two clearly different embedded voices (espeak-ng's `en-us+m3`, a man's formant voice,
//! and Kokoro's `jf_alpha`, a woman's neural voice), its turns joined with pauses.

use headroom_speech::asr::Transcript;
use headroom_speech::audio::{wav_bytes, Audio, Decode};
use headroom_tests::serve_process::{ServeOptions, ServeProcess};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The two voices: speaker 0's and speaker 1's.
const VOICES: [&str; 2] = ["en-us+m3", "kokoro-jf_alpha"];

/// The turns: (speaker, text).
const TURNS: [(usize, &str); 4] = [
    (
        0,
        "Good morning, and thank you for coming to the planning meeting today.",
    ),
    (
        1,
        "Thanks for having me. I brought the numbers from the spring garden sale.",
    ),
    (
        0,
        "Wonderful. How many plants did the volunteers sell on the first weekend?",
    ),
    (1, "Almost four hundred, and most of them were tomatoes."),
];

/// Another sentence in speaker 1's voice: a reference recording that is not in the
/// conversation.
const REFERENCE: (usize, &str) = (
    1,
    "My favourite part of the work is watching the young seedlings grow taller every week.",
);

/// Other sentences in speaker 0's voice: a voice profile's reference clip.
const PROFILE_CLIP: (usize, &str) = (
    0,
    "When the morning train was late again, the whole platform sighed at once. A man with a red umbrella checked his watch and read the timetable aloud.",
);

/// The pause between two turns, in seconds.
const PAUSE_SECS: f64 = 0.8;

/// How far a speaker change found may be from the true one, in seconds.
const TOLERANCE_SECS: f64 = 0.5;

struct Fixture {
    dir: tempfile::TempDir,
    conversation: PathBuf,
    reference: PathBuf,
    /// Speaker 0's voice, for a voice profile.
    profile_clip: PathBuf,
    /// Each turn's speaker and the extent of its speech (seconds).
    turns: Vec<(usize, f64, f64)>,
}

fn headroom_command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_headroom"));
    cmd.args(args)
        // Never read the developer's own config or voices.
        .env("HEADROOM_CONFIG", empty_config())
        .env("HEADROOM_VOICES_DIR", "/nonexistent/headroom-voices")
        .env_remove("HEADROOM_LLM_URL")
        .env_remove("HEADROOM_API_KEY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

fn headroom(args: &[&str], env: &[(&str, &str)]) -> Output {
    let out = headroom_command(args, env).output().expect("headroom runs");
    assert!(
        out.status.success(),
        "headroom {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn empty_config() -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "headroom-speakers-test-{}.toml",
        std::process::id()
    ));
    if !path.exists() {
        std::fs::write(&path, "# defaults\n").unwrap();
    }
    path
}

/// `text` in `voice` through `headroom speak`, at 16 kHz.
fn speak(dir: &Path, name: &str, voice: &str, text: &str) -> Audio {
    let path = dir.join(format!("{name}.wav"));
    headroom(
        &[
            "speak",
            "--voice",
            voice,
            "--out",
            path.to_str().unwrap(),
            text,
        ],
        &[],
    );
    Decode {
        to_rate: Some(16_000),
        ..Decode::default()
    }
    .file(&path)
    .expect("the take decodes")
}

/// Where `samples` has sound: the first and last sample above a whisper, in seconds.
fn sound_extent(samples: &[f32]) -> (f64, f64) {
    let loud = |x: &&f32| x.abs() > 0.01;
    let first = samples.iter().position(|x| loud(&x)).unwrap_or(0);
    let last = samples.iter().rposition(|x| loud(&x)).unwrap_or(0);
    (first as f64 / 16_000.0, (last + 1) as f64 / 16_000.0)
}

/// The conversation, made once per test binary (the voices are spoken by the real binary).
fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        headroom_tests::models_dir();
        let dir = tempfile::tempdir().unwrap();
        let pause = vec![0.0f32; (PAUSE_SECS * 16_000.0) as usize];
        let mut samples = pause[..pause.len() / 2].to_vec();
        let mut turns = Vec::new();
        for (n, (speaker, text)) in TURNS.iter().enumerate() {
            let take = speak(dir.path(), &format!("turn-{n}"), VOICES[*speaker], text);
            let offset = samples.len() as f64 / 16_000.0;
            let (start, end) = sound_extent(&take.samples);
            turns.push((*speaker, offset + start, offset + end));
            samples.extend_from_slice(&take.samples);
            samples.extend_from_slice(&pause);
        }
        let conversation = dir.path().join("conversation.wav");
        std::fs::write(
            &conversation,
            wav_bytes(&Audio {
                samples,
                sample_rate: 16_000,
            }),
        )
        .unwrap();
        let take = speak(
            dir.path(),
            "reference-take",
            VOICES[REFERENCE.0],
            REFERENCE.1,
        );
        let reference = dir.path().join("reference.wav");
        std::fs::write(&reference, wav_bytes(&take)).unwrap();
        let take = speak(
            dir.path(),
            "profile-take",
            VOICES[PROFILE_CLIP.0],
            PROFILE_CLIP.1,
        );
        let profile_clip = dir.path().join("profile-clip.wav");
        std::fs::write(&profile_clip, wav_bytes(&take)).unwrap();
        Fixture {
            dir,
            conversation,
            reference,
            profile_clip,
            turns,
        }
    })
}

/// Checks `segments` (start, end, speaker label) against the fixture's turns: every turn is
/// one label, the two voices two labels, and each change of speaker is found within
/// [`TOLERANCE_SECS`] of where it is. Returns each voice's label.
fn check_turns(fixture: &Fixture, segments: &[(f64, f64, String)]) -> [String; 2] {
    let mut labels: [Option<String>; 2] = [None, None];
    for (n, &(speaker, start, end)) in fixture.turns.iter().enumerate() {
        let inside: Vec<&(f64, f64, String)> = segments
            .iter()
            .filter(|(s, e, _)| (s + e) / 2.0 > start - PAUSE_SECS / 2.0)
            .filter(|(s, e, _)| (s + e) / 2.0 < end + PAUSE_SECS / 2.0)
            .collect();
        assert!(!inside.is_empty(), "turn {n} has no segments: {segments:?}");
        let label = &inside[0].2;
        assert!(
            inside.iter().all(|(_, _, l)| l == label),
            "turn {n} ({start:.2}-{end:.2} s) is one speaker: {inside:?}"
        );
        match &labels[speaker] {
            Some(known) => assert_eq!(known, label, "turn {n}: {segments:?}"),
            None => labels[speaker] = Some(label.clone()),
        }
        let found_start = inside.first().unwrap().0;
        let found_end = inside.last().unwrap().1;
        assert!(
            (found_start - start).abs() <= TOLERANCE_SECS,
            "turn {n} starts at {start:.2} s, found at {found_start:.2} s: {segments:?}"
        );
        assert!(
            (found_end - end).abs() <= TOLERANCE_SECS,
            "turn {n} ends at {end:.2} s, found at {found_end:.2} s: {segments:?}"
        );
    }
    let [Some(a), Some(b)] = labels else {
        unreachable!("both voices speak")
    };
    assert_ne!(a, b, "two voices, two speakers: {segments:?}");
    [a, b]
}

fn transcribe(args: &[&str], env: &[(&str, &str)]) -> String {
    let fixture = fixture();
    let mut all = vec!["transcribe", fixture.conversation.to_str().unwrap()];
    all.extend_from_slice(args);
    String::from_utf8(headroom(&all, env).stdout).unwrap()
}

#[test]
fn transcribe_finds_two_speakers_and_where_they_change() {
    let fixture = fixture();
    let json = transcribe(&["--speakers", "auto", "--format", "json"], &[]);
    let transcript: Transcript = serde_json::from_str(&json).unwrap();
    assert_eq!(transcript.speakers.len(), 2, "{json}");
    let segments: Vec<(f64, f64, String)> = transcript
        .segments
        .iter()
        .map(|s| {
            (
                s.start,
                s.end,
                s.speaker.clone().expect("every segment has a speaker"),
            )
        })
        .collect();
    let labels = check_turns(fixture, &segments);
    assert_eq!(
        labels,
        ["S1".to_string(), "S2".to_string()],
        "in order of first speech"
    );
    for segment in &transcript.segments {
        assert!(!segment.words.is_empty(), "words are timed with speakers");
        for word in &segment.words {
            assert_eq!(word.speaker, segment.speaker, "{segment:?}");
        }
    }
    let text = transcript.text().to_lowercase();
    assert!(
        text.contains("garden") && text.contains("volunteers"),
        "{text}"
    );
}

#[test]
fn every_export_names_the_speakers() {
    let txt = transcribe(&["--speakers", "2"], &[]);
    let paragraphs: Vec<&str> = txt.trim_end().split("\n\n").collect();
    assert_eq!(paragraphs.len(), 4, "a paragraph per turn: {txt}");
    for (paragraph, (speaker, _)) in paragraphs.iter().zip(TURNS) {
        let name = format!("Speaker {}: ", speaker + 1);
        assert!(
            paragraph.lines().all(|l| l.starts_with(&name)),
            "{name:?} in {paragraph:?}"
        );
    }

    let srt = transcribe(&["--speakers", "2", "--format", "srt"], &[]);
    let cues: Vec<&str> = srt.trim_end().split("\n\n").collect();
    assert!(cues.len() >= 4, "{srt}");
    for cue in &cues {
        let text = cue.lines().nth(2).unwrap_or_default();
        assert!(
            text.starts_with("Speaker 1: ") || text.starts_with("Speaker 2: "),
            "{cue:?}"
        );
    }

    let vtt = transcribe(&["--speakers", "2", "--format", "vtt"], &[]);
    assert!(vtt.starts_with("WEBVTT\n\n"), "{vtt}");
    let cues: Vec<&str> = vtt.trim_end().split("\n\n").skip(1).collect();
    assert!(cues.len() >= 4, "{vtt}");
    for cue in &cues {
        let text = cue.lines().nth(1).unwrap_or_default();
        assert!(
            text.starts_with("<v Speaker 1>") || text.starts_with("<v Speaker 2>"),
            "{cue:?}"
        );
    }
    assert!(vtt.contains("<v Speaker 1>Good morning"), "{vtt}");

    // Without --speakers, nothing changes.
    let plain = transcribe(&[], &[]);
    assert!(!plain.contains("Speaker 1"), "{plain}");
}

#[test]
fn known_speakers_are_named_from_another_recording_of_their_voice() {
    let fixture = fixture();
    let reference = fixture.reference.to_str().unwrap();
    // Given on the command line.
    let known = format!("Hana={reference}");
    let json = transcribe(
        &[
            "--speakers",
            "auto",
            "--known-speaker",
            &known,
            "--format",
            "json",
        ],
        &[],
    );
    let transcript: Transcript = serde_json::from_str(&json).unwrap();
    let named: Vec<_> = transcript
        .speakers
        .iter()
        .filter(|s| s.name.as_deref() == Some("Hana"))
        .collect();
    assert_eq!(named.len(), 1, "{json}");
    let segments: Vec<(f64, f64, String)> = transcript
        .segments
        .iter()
        .map(|s| (s.start, s.end, s.speaker.clone().unwrap()))
        .collect();
    let labels = check_turns(fixture, &segments);
    assert_eq!(
        labels[1], named[0].id,
        "the reference's voice is speaker 1's"
    );
    assert_eq!(
        transcript.speaker_name(&labels[0]).as_deref(),
        Some("Speaker 1"),
        "the other voice stays unnamed: {json}"
    );

    // A voice profile made from another recording of the other voice names that speaker in
    // every transcription.
    let voices = fixture.dir.path().join("voices");
    let env = [("HEADROOM_VOICES_DIR", voices.to_str().unwrap())];
    headroom(
        &[
            "voice",
            "add",
            "Mika",
            fixture.profile_clip.to_str().unwrap(),
        ],
        &env,
    );
    let txt = transcribe(&["--speakers", "auto"], &env);
    assert!(txt.starts_with("Mika: Good morning"), "{txt}");
    assert!(txt.contains("\n\nSpeaker 2: Thanks for having me"), "{txt}");
}

#[tokio::test]
async fn serve_answers_diarized_json_to_the_openai_client() {
    let fixture = fixture();
    // A voice profile the server knows (speaker 0's voice): named in every transcription,
    // and its name works as a known speaker without a reference.
    let voices = fixture.dir.path().join("serve-voices");
    headroom(
        &[
            "voice",
            "add",
            "Mika",
            fixture.profile_clip.to_str().unwrap(),
        ],
        &[("HEADROOM_VOICES_DIR", voices.to_str().unwrap())],
    );
    let server = ServeProcess::start_with(
        Path::new(env!("CARGO_BIN_EXE_headroom")),
        "http://127.0.0.1:9/v1",
        ServeOptions {
            env: &[("HEADROOM_VOICES_DIR", voices.to_str().unwrap())],
            ..ServeOptions::default()
        },
    )
    .await;
    let seen = headroom_tests::python_client::run(
        "openai_diarize_check.py",
        &[
            server.base.as_ref(),
            fixture.conversation.as_os_str(),
            fixture.reference.as_os_str(),
            "Kiko".as_ref(),
            "Mika".as_ref(),
        ],
        &server.stderr(),
    )
    .await;
    let segments = |key: &str| -> Vec<(f64, f64, String)> {
        seen[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                assert_eq!(s["type"], "transcript.text.segment");
                assert!(s["id"].is_string());
                (
                    s["start"].as_f64().unwrap(),
                    s["end"].as_f64().unwrap(),
                    s["speaker"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let text = seen["text"].as_str().unwrap().to_lowercase();
    assert!(text.contains("garden"), "{seen}");
    assert!(seen["duration"].as_f64().unwrap() > 10.0, "{seen}");
    assert_eq!(seen["usage_seconds"], seen["duration"]);
    // The profile is known to every transcription: its voice is named, the other lettered as
    // OpenAI's model letters speakers.
    let labels = check_turns(fixture, &segments("segments"));
    assert_eq!(labels, ["Mika".to_string(), "B".to_string()], "{seen}");
    // A reference given with the request names the other voice.
    let named = check_turns(fixture, &segments("named_segments"));
    assert_eq!(named, ["Mika".to_string(), "Kiko".to_string()], "{seen}");
    let by_profile = check_turns(fixture, &segments("profile_segments"));
    assert_eq!(by_profile[0], "Mika", "{seen}");

    let verbose: Vec<String> = seen["verbose_speakers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap_or("none").to_string())
        .collect();
    assert!(verbose.iter().any(|s| s == "Mika"), "{seen}");
    assert!(verbose.iter().any(|s| s == "Speaker 2"), "{seen}");
    let words = seen["verbose_word_speakers"].as_array().unwrap();
    assert!(
        words.len() > 20 && words.iter().all(|w| w.is_string()),
        "{seen}"
    );
    assert!(seen["plain_text"].as_str().unwrap().contains("garden"));

    for (case, code) in [
        ("not_a_data_url", "invalid_known_speaker_reference"),
        ("not_audio", "invalid_known_speaker_reference"),
        ("unknown_name", "invalid_known_speakers"),
        ("too_many", "too_many_known_speakers"),
        ("bad_speakers", "invalid_speakers"),
    ] {
        assert_eq!(seen[case]["status"], 400, "{case}: {seen}");
        assert_eq!(seen[case]["code"], code, "{case}: {seen}");
    }
    assert!(
        seen["not_audio"]["message"]
            .as_str()
            .unwrap()
            .contains("Ann"),
        "the message names the speaker: {seen}"
    );
}
