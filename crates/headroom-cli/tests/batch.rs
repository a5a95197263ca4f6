//! `headroom transcribe` on many files at once, the real binary on real speech: espeak-ng
//! reading a sentence or two (a few seconds each, so the suite stays cheap on two cores). A
//! bad file in the middle, a run killed halfway and run again, a changed input or option.

use headroom_speech::asr::word_error_rate;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant, SystemTime};

/// The manifest the out folder keeps (crates/headroom-cli/src/transcribe/batch.rs).
const MANIFEST: &str = ".headroom-transcripts.json";

/// Exit status when some inputs failed and the others were transcribed.
const EXIT_SOME_FAILED: i32 = 5;

const FIRST: &str = "The quick brown fox jumps over the lazy dog.";
const SECOND: &str =
    "Please call Stella and ask her to bring these things with her from the store.";
const THIRD: &str =
    "We walked along the river and watched the boats go by until the sun went down.";

/// A scratch folder with its own config, projects and voices, and the inputs in `in/`.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        headroom_tests::models_dir();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), "# defaults\n").unwrap();
        std::fs::create_dir(dir.path().join("in")).unwrap();
        Scratch { dir }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    fn command(&self, args: &[&Path]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_headroom"));
        cmd.arg("transcribe")
            .args(args)
            .env("HEADROOM_CONFIG", self.path("config.toml"))
            .env("HEADROOM_PROJECTS_DIR", self.path("projects"))
            .env("HEADROOM_VOICES_DIR", self.path("voices"))
            .env_remove("HEADROOM_LLM_URL")
            .env_remove("HEADROOM_API_KEY");
        cmd
    }

    async fn transcribe(&self, args: &[&Path]) -> Output {
        self.command(args).output().await.expect("headroom runs")
    }

    /// espeak-ng reading `words` into `in/NAME`.
    fn spoken(&self, name: &str, words: &str) -> PathBuf {
        let path = self.path("in").join(name);
        let status = std::process::Command::new("espeak-ng")
            .args(["-v", "en-us", "-s", "150", "-w"])
            .arg(&path)
            .arg(words)
            .status()
            .expect("espeak-ng runs");
        assert!(status.success());
        path
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Whether `transcript` says `words`, near enough for Whisper tiny on espeak-ng.
fn says(transcript: &str, words: &str) -> bool {
    word_error_rate(words, transcript) < 0.4
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

/// The stderr lines that report `input` (its "[i/n] PATH: ..." lines).
fn reported<'a>(stderr: &'a str, input: &Path) -> Vec<&'a str> {
    let shown = format!("] {}: ", input.display());
    stderr.lines().filter(|l| l.contains(&shown)).collect()
}

#[tokio::test]
async fn several_inputs_need_an_out_folder() {
    let scratch = Scratch::new();
    let a = scratch.spoken("a.wav", "one");
    let b = scratch.spoken("b.wav", "two");
    let out = scratch.transcribe(&[&a, &b]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("several inputs, or a folder, need --out FOLDER"),
        "{}",
        text(&out.stderr)
    );
    let file = scratch.path("taken.txt");
    std::fs::write(&file, "mine").unwrap();
    let out = scratch
        .transcribe(&[&a, &scratch.path("in"), Path::new("--out"), &file])
        .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--out names a folder, and this is a file"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(read(&file), "mine", "the file is left alone");
}

#[tokio::test]
async fn a_bad_file_in_the_middle_is_named_at_the_end_and_the_others_are_written() {
    let scratch = Scratch::new();
    let first = scratch.spoken("a-first.wav", FIRST);
    let broken = scratch.path("in/b-broken.wav");
    std::fs::write(&broken, b"RIFF this is not a recording at all").unwrap();
    let last_wav = scratch.spoken("c-last.wav", SECOND);
    // The last one as MP3, from a second argument: files and folders mix.
    let last = scratch.path("c-last.mp3");
    let status = std::process::Command::new("ffmpeg")
        .args(["-loglevel", "error", "-i"])
        .arg(&last_wav)
        .arg(&last)
        .status()
        .expect("ffmpeg runs");
    assert!(status.success());
    std::fs::remove_file(&last_wav).unwrap();
    let out_dir = scratch.path("out/transcripts");

    let out = scratch
        .transcribe(&[&scratch.path("in"), &last, Path::new("--out"), &out_dir])
        .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(EXIT_SOME_FAILED), "{stderr}");
    assert!(out.stdout.is_empty(), "transcripts go to files only");
    assert!(says(&read(&out_dir.join("a-first.txt")), FIRST), "{stderr}");
    assert!(says(&read(&out_dir.join("c-last.txt")), SECOND), "{stderr}");
    assert!(!out_dir.join("b-broken.txt").exists());

    assert!(
        reported(&stderr, &first)[0].contains("[1/3]"),
        "overall progress: {stderr}"
    );
    assert!(reported(&stderr, &last)[0].contains("[3/3]"), "{stderr}");
    let summary = stderr
        .split_once("\nfailed:\n")
        .unwrap_or_else(|| panic!("no list of failures: {stderr}"))
        .1;
    let failed: Vec<&str> = summary.lines().collect();
    assert_eq!(failed.len(), 1, "only the broken file failed: {stderr}");
    assert!(
        failed[0].contains(&broken.display().to_string()),
        "{stderr}"
    );
    assert!(
        failed[0].contains("not an audio format") || failed[0].contains("damaged"),
        "says why: {stderr}"
    );
    assert!(
        stderr.contains(
            "3 inputs: 2 transcribed, 0 skipped (already current), 1 failed; transcripts in"
        ),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_run_killed_halfway_goes_on_with_what_is_left() {
    let scratch = Scratch::new();
    let inputs = [
        scratch.spoken("1.wav", FIRST),
        scratch.spoken("2.wav", SECOND),
        scratch.spoken("3.wav", THIRD),
    ];
    let out_dir = scratch.path("out");
    let transcripts = ["1.txt", "2.txt", "3.txt"].map(|name| out_dir.join(name));
    let folder = scratch.path("in");
    let args = [folder.as_path(), Path::new("--out"), &out_dir];

    let mut child = scratch
        .command(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the manifest records the first transcript, not as soon as the transcript
    // itself appears: a kill between the two would rightly make it again on the next run.
    let manifest = out_dir.join(MANIFEST);
    let first_recorded = || {
        std::fs::read(&manifest)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|m| m["transcripts"]["1.txt"].is_object())
    };
    let started = Instant::now();
    while !first_recorded() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no transcript was recorded"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the transcription ended early"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    child.start_kill().unwrap(); // SIGKILL
    child.wait().await.unwrap();
    assert!(transcripts[0].exists());
    assert!(
        !transcripts[2].exists(),
        "killed before the last file was done, or the test proves nothing"
    );
    let first_text = read(&transcripts[0]);
    let first_modified = modified(&transcripts[0]);

    let out = scratch.transcribe(&args).await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let first = reported(&stderr, &inputs[0]);
    assert_eq!(first.len(), 1, "{stderr}");
    assert!(first[0].contains("skipped"), "{stderr}");
    assert_eq!(read(&transcripts[0]), first_text);
    assert_eq!(
        modified(&transcripts[0]),
        first_modified,
        "not written again"
    );
    for (input, words) in inputs[1..].iter().zip([SECOND, THIRD]) {
        assert!(
            reported(&stderr, input)
                .iter()
                .any(|l| l.contains("transcribed")),
            "{stderr}"
        );
        let transcript = out_dir.join(format!(
            "{}.txt",
            input.file_stem().unwrap().to_string_lossy()
        ));
        assert!(says(&read(&transcript), words), "{}", read(&transcript));
    }
    // Nothing half-written is left behind: the transcripts and the manifest only.
    let mut left: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, [MANIFEST, "1.txt", "2.txt", "3.txt"]);
}

#[tokio::test]
async fn a_changed_input_or_option_is_transcribed_again_and_the_rest_skipped() {
    let scratch = Scratch::new();
    let kept = scratch.spoken("kept.wav", FIRST);
    let changed = scratch.spoken("changed.wav", SECOND);
    let out_dir = scratch.path("out");
    let kept_txt = out_dir.join("kept.txt");
    let changed_txt = out_dir.join("changed.txt");
    let args = [kept.as_path(), &changed, Path::new("--out"), &out_dir];
    let transcribed = |stderr: &str, input: &Path| {
        let lines = reported(stderr, input);
        assert_eq!(lines.len(), 1, "{stderr}");
        if lines[0].contains(": transcribed ") {
            true
        } else {
            assert!(lines[0].contains(": skipped, "), "{stderr}");
            false
        }
    };

    let out = scratch.transcribe(&args).await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(transcribed(&stderr, &kept) && transcribed(&stderr, &changed));
    assert!(says(&read(&changed_txt), SECOND));

    let out = scratch.transcribe(&args).await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!transcribed(&stderr, &kept) && !transcribed(&stderr, &changed));

    // New words under the same name: only that file again.
    scratch.spoken("changed.wav", THIRD);
    let kept_modified = modified(&kept_txt);
    let out = scratch.transcribe(&args).await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!transcribed(&stderr, &kept) && transcribed(&stderr, &changed));
    assert!(says(&read(&changed_txt), THIRD), "{}", read(&changed_txt));
    assert_eq!(modified(&kept_txt), kept_modified);

    // An option that changes the text: both again.
    let with_option = [
        kept.as_path(),
        &changed,
        Path::new("--out"),
        &out_dir,
        Path::new("--no-guards"),
    ];
    let out = scratch.transcribe(&with_option).await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(transcribed(&stderr, &kept) && transcribed(&stderr, &changed));
    assert_ne!(modified(&kept_txt), kept_modified);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_spread_over_servers_is_transcribed_whole_past_a_dead_one() {
    let scratch = Scratch::new();
    let inputs = [
        scratch.spoken("1.wav", FIRST),
        scratch.spoken("2.wav", SECOND),
        scratch.spoken("3.wav", THIRD),
    ];
    let binary = Path::new(env!("CARGO_BIN_EXE_headroom"));
    let no_text_model = headroom_tests::closed_port_url();
    let workers = [
        headroom_tests::serve_process::ServeProcess::start(binary, &no_text_model, &[]).await,
        headroom_tests::serve_process::ServeProcess::start(binary, &no_text_model, &[]).await,
    ];
    // A worker whose machine is gone: nothing listens there.
    let dead = headroom_tests::closed_port_url();
    let out_dir = scratch.path("out");
    let folder = scratch.path("in");
    let servers = |order: [&str; 3]| -> Vec<PathBuf> {
        let mut args = vec![folder.clone(), PathBuf::from("--out"), out_dir.clone()];
        for url in order {
            args.extend([PathBuf::from("--server-url"), PathBuf::from(url)]);
        }
        args
    };
    // The dead one first: the first piece goes to it.
    let args = servers([&dead, &workers[0].base, &workers[1].base]);
    let out = scratch
        .transcribe(&args.iter().map(PathBuf::as_path).collect::<Vec<_>>())
        .await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for (input, said) in inputs.iter().zip([FIRST, SECOND, THIRD]) {
        let name = input.with_extension("txt");
        let transcript = read(&out_dir.join(name.file_name().unwrap()));
        assert!(says(&transcript, said), "{transcript}: {stderr}");
    }
    assert!(
        stderr.contains(&format!("cannot reach {dead}")),
        "the dead server is named: {stderr}"
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join(MANIFEST)).unwrap()).unwrap();
    let recorded = manifest["transcripts"]["1.txt"]["options"]["server_url"]
        .as_str()
        .unwrap()
        .to_string();
    let mut sorted = [
        workers[0].base.clone(),
        dead.clone(),
        workers[1].base.clone(),
    ];
    sorted.sort();
    assert_eq!(recorded, sorted.join(", "));

    // The same servers in another order: every transcript is current.
    let again = servers([&workers[1].base, &workers[0].base, &dead]);
    let out = scratch
        .transcribe(&again.iter().map(PathBuf::as_path).collect::<Vec<_>>())
        .await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("0 transcribed, 3 skipped"), "{stderr}");
}
