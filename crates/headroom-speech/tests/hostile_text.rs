//! Text Headroom speaks comes from anyone: a request to `/v1/audio/speech`, a text model's
//! reply, a transcript. It reaches espeak-ng (speech, and phonemes for Kokoro and Piper) only
//! on its standard input, so text that looks like an option is read aloud, not obeyed. Needs
//! espeak-ng (scripts/test installs it).

use headroom_speech::tts::{ipa_phonemes, Espeak, Synthesizer, TtsError, ESPEAK_PROGRAM};
use tokio_util::sync::CancellationToken;

struct Bait {
    _dir: tempfile::TempDir,
    victim: std::path::PathBuf,
    secret: std::path::PathBuf,
}

fn bait() -> Bait {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "xylophone").unwrap();
    Bait {
        _dir: dir,
        victim,
        secret,
    }
}

fn phonemes(text: &str) -> String {
    ipa_phonemes(ESPEAK_PROGRAM, "en-us", text).unwrap()
}

/// Each kind of text an attacker or an accident sends.
fn hostile_lines(bait: &Bait) -> Vec<String> {
    vec![
        format!("--phonout={}", bait.victim.display()),
        format!("-f{}", bait.secret.display()),
        format!("-w {}", bait.victim.display()),
        "--".into(),
        "-".into(),
        "one\0two".into(),
        "first line\nsecond line\r\n-x third".into(),
        "\u{202E}hello\u{200F} \u{2067}world\u{2069}".into(),
    ]
}

#[test]
fn phonemes_are_made_from_the_text_whatever_it_looks_like() {
    let bait = bait();
    let secret_word = phonemes("xylophone");
    for line in hostile_lines(&bait) {
        let ipa = ipa_phonemes(ESPEAK_PROGRAM, "en-us", &line)
            .unwrap_or_else(|e| panic!("{line:?}: {e}"));
        assert_eq!(
            std::fs::read_to_string(&bait.victim).unwrap(),
            "keep me",
            "{line:?} was obeyed as an option"
        );
        assert!(
            !ipa.contains(&secret_word),
            "{line:?} made espeak-ng read another file: {ipa}"
        );
    }
    // A NUL byte does not end the text early: both words are there.
    let nul = phonemes("one\0two");
    assert!(nul.contains(&phonemes("two")), "{nul}");
    // Every line of a text is read.
    let lines = phonemes("first line\nsecond line");
    assert!(lines.contains(&phonemes("second")), "{lines}");
}

#[test]
fn a_long_text_goes_through_whole() {
    // 100k characters: more than a pipe holds, in and out.
    let long = "word ".repeat(20_000);
    let ipa = phonemes(&long);
    assert!(
        ipa.matches(&phonemes("word")).count() >= 19_000,
        "{}",
        ipa.len()
    );
}

#[test]
fn espeak_speech_speaks_hostile_lines_and_refuses_a_hostile_voice() {
    let bait = bait();
    let espeak = Espeak::default();
    let cancel = CancellationToken::new();
    for line in hostile_lines(&bait) {
        // Lines of only punctuation make no sound and say so; none may fail otherwise.
        match espeak.synthesize(&line, Some("en-us"), &cancel) {
            Ok(_) => {}
            Err(TtsError::EmptyText) if line.chars().all(|c| c == '-') => {}
            Err(e) => panic!("{line:?}: {e}"),
        }
        assert_eq!(std::fs::read_to_string(&bait.victim).unwrap(), "keep me");
    }
    // A voice name is a value, never an option: not being one of espeak-ng's, it is refused.
    let voice = format!("--phonout={}", bait.victim.display());
    let err = espeak
        .synthesize("hello", Some(&voice), &cancel)
        .unwrap_err();
    assert!(matches!(&err, TtsError::UnknownVoice { .. }), "{err}");
    assert!(ipa_phonemes(ESPEAK_PROGRAM, &voice, "hello").is_err());
    assert_eq!(std::fs::read_to_string(&bait.victim).unwrap(), "keep me");
}

/// espeak-ng behind a script that logs each argument list it is started with, then runs it.
///
/// The script is written by a child `sh`, not by this process: a test on another thread that
/// forks while this process holds the file open for writing would keep that descriptor until
/// its exec, and running the script then fails with "Text file busy" (ETXTBSY).
fn logged_espeak(dir: &std::path::Path) -> (String, std::path::PathBuf) {
    use std::io::Write;
    let log = dir.join("calls.log");
    let program = dir.join("espeak-logged");
    let text = format!(
        "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nexec {ESPEAK_PROGRAM} \"$@\"\n",
        log.display()
    );
    let mut writer = std::process::Command::new("sh")
        .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(&program)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    writer
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    assert!(writer.wait().unwrap().success());
    (program.to_str().unwrap().to_string(), log)
}

#[test]
fn a_voice_name_espeak_does_not_list_is_refused_before_a_process_starts() {
    let dir = tempfile::tempdir().unwrap();
    let (program, log) = logged_espeak(dir.path());
    let espeak = Espeak::new(program.clone());
    let cancel = CancellationToken::new();
    // espeak-ng opens VARIANT in LANGUAGE+VARIANT as a file: the first read /etc/passwd as a
    // voice, the second aborted it with a buffer overflow.
    for hostile in [
        "en-us+../../../../../../../etc/passwd",
        "en-us+./././././././././././././Denis",
        "en-us+/etc/passwd",
    ] {
        let err = espeak
            .synthesize("hello", Some(hostile), &cancel)
            .unwrap_err();
        assert!(
            matches!(&err, TtsError::UnknownVoice { voice } if voice == hostile),
            "{hostile}: {err}"
        );
        assert!(matches!(
            ipa_phonemes(&program, hostile, "hello"),
            Err(TtsError::UnknownVoice { .. })
        ));
    }
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(
        calls
            .lines()
            .all(|c| c == "--voices" || c == "--voices=variant"),
        "only the listing ran: {calls}"
    );
    // Listed names still speak, as espeak-ng spells them, whatever their case.
    let take = espeak
        .synthesize("hello", Some("EN-US+Male3"), &cancel)
        .unwrap();
    assert!(take.samples.len() > 1000);
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(calls.contains("-v en-us+m3"), "{calls}");
    assert_eq!(
        calls.lines().filter(|c| c.starts_with("--voices")).count(),
        2,
        "the voices are listed once: {calls}"
    );
}
