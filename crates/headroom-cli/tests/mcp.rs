//! `headroom mcp` driven by the official MCP Python SDK (PyPI `mcp`, in the venv that
//! scripts/install-test-deps makes: `HEADROOM_MCP_PYTHON`), as an agent drives it: the tools are
//! listed, a spoken file is transcribed (with progress notifications), a long transcription is
//! cancelled, voices are listed, text is spoken to WAV, MP3 and FLAC files, and a project is
//! listed, read, cleaned up and narrated.

use std::path::{Path, PathBuf};
use std::process::Output;

const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client.py");

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn mcp_python() -> PathBuf {
    let python = std::env::var_os("HEADROOM_MCP_PYTHON").unwrap_or_else(|| {
        panic!(
            "HEADROOM_MCP_PYTHON is not set: run the tests with scripts/test, which installs the \
             MCP Python SDK (or eval \"$(scripts/install-test-deps)\" first)"
        )
    });
    let python = PathBuf::from(python);
    assert!(
        python.exists(),
        "HEADROOM_MCP_PYTHON points to {}, which does not exist",
        python.display()
    );
    python
}

/// The `headroom` binary with a test's own config, projects and voices.
async fn headroom(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_headroom"));
    cmd.args(args)
        .env_remove("HEADROOM_LLM_URL")
        .env_remove("HEADROOM_API_KEY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().await.expect("headroom runs")
}

/// espeak-ng reading `words` into a WAV file.
fn spoken(path: &Path, words: &str) {
    let status = std::process::Command::new("espeak-ng")
        .args(["-v", "en-us", "-s", "150", "-w"])
        .arg(path)
        .arg(words)
        .status()
        .expect("espeak-ng runs");
    assert!(status.success());
}

#[tokio::test]
async fn an_mcp_client_lists_the_tools_transcribes_speaks_and_works_on_a_project() {
    headroom_tests::models_dir();
    let python = mcp_python();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "# defaults\n").unwrap();
    let projects = dir.path().join("projects");
    let voices = dir.path().join("voices");
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let env = [
        ("HEADROOM_CONFIG", config.as_path()),
        ("HEADROOM_PROJECTS_DIR", projects.as_path()),
        ("HEADROOM_VOICES_DIR", voices.as_path()),
    ];
    let speech = dir.path().join("speech.wav");
    spoken(
        &speech,
        "The quick brown fox jumps over the lazy dog. Um, the five boxing wizards jump quickly.",
    );

    // A project with a transcript, made from the command line.
    let made = headroom(&["project", "create", "Talk"], &env).await;
    assert!(made.status.success(), "{}", text(&made.stderr));
    let made = headroom(
        &["project", "transcribe", "Talk", speech.to_str().unwrap()],
        &env,
    )
    .await;
    assert!(made.status.success(), "{}", text(&made.stderr));

    // Two minutes of speech (the clip 20 times), for a transcription to cancel half-way.
    let long = dir.path().join("long.wav");
    {
        let mut reader = hound::WavReader::open(&speech).unwrap();
        let samples: Vec<i16> = reader.samples::<i16>().map(Result::unwrap).collect();
        let mut writer = hound::WavWriter::create(&long, reader.spec()).unwrap();
        for _ in 0..20 {
            for &s in &samples {
                writer.write_sample(s).unwrap();
            }
        }
        writer.finalize().unwrap();
    }

    let mut client = tokio::process::Command::new(&python);
    client
        .arg(CLIENT)
        .arg(env!("CARGO_BIN_EXE_headroom"))
        .arg(&speech)
        .arg(&out)
        .arg("Talk")
        .arg(&long)
        // The server's own log on stderr, where the client passes it on.
        .env("HEADROOM_LOG", "warn,headroom=info")
        .env_remove("HEADROOM_LLM_URL")
        .env_remove("HEADROOM_API_KEY");
    for (k, v) in &env {
        client.env(k, v);
    }
    let run = tokio::time::timeout(std::time::Duration::from_secs(600), client.output())
        .await
        .expect("the MCP client finishes within 10 minutes")
        .expect("the MCP client runs");
    let stderr = text(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    // The client read only protocol messages on the server's stdout (it would have failed on
    // anything else); its own stdout is the report.
    let report: serde_json::Value = serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", text(&run.stdout)));

    assert_eq!(
        report["tools"],
        serde_json::json!([
            "cleanup_project",
            "edit_project",
            "list_projects",
            "list_voices",
            "narrate_project",
            "project_transcript",
            "speak",
            "transcribe"
        ])
    );
    let schema = &report["schemas"]["transcribe"];
    assert_eq!(schema["required"], serde_json::json!(["path"]), "{schema}");
    for property in [
        "path", "language", "speakers", "format", "model", "priority",
    ] {
        assert!(schema["properties"].get(property).is_some(), "{schema}");
    }

    // Transcribed, with progress up to 100 % before the result.
    let transcribed = &report["transcribe"];
    assert_eq!(transcribed["is_error"], false, "{transcribed}");
    let words = transcribed["text"].as_str().unwrap().to_lowercase();
    // (whisper-tiny.en hears espeak-ng's "brown" as "round" and "boxing" as "foxing".)
    for expected in ["the quick", "fox", "lazy dog", "wizards jump quickly"] {
        assert!(words.contains(expected), "{expected:?} in {words:?}");
    }
    let progress = report["transcribe_progress"].as_array().unwrap();
    assert!(!progress.is_empty(), "no progress notifications");
    let values: Vec<f64> = progress
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
    assert_eq!(values.last(), Some(&100.0), "{values:?}");
    assert_eq!(progress[0]["total"], 100.0);
    // The cancelled call's job stopped: the server reports its transcription cancelled.
    assert_eq!(report["long_call_finished"], false);
    assert!(
        stderr.contains("transcribe: cancelled by the client"),
        "{stderr}"
    );
    let srt = report["transcribe_srt"]["text"].as_str().unwrap();
    assert!(srt.starts_with("1\n00:00:0"), "{srt}");
    assert!(srt.contains(" --> "), "{srt}");

    // A folder is refused as a tool error that says so.
    let refused = &report["transcribe_folder"];
    assert_eq!(refused["is_error"], true, "{refused}");
    assert_eq!(
        refused["text"],
        format!("{} is a folder, not a file", out.display())
    );

    let missing = &report["transcribe_missing"];
    assert_eq!(missing["is_error"], true, "{missing}");
    assert_eq!(
        missing["text"],
        format!("there is no file {}", out.join("missing.wav").display())
    );
    let bad = &report["transcribe_bad_speakers"];
    assert_eq!(bad["is_error"], true, "{bad}");
    assert_eq!(
        bad["text"],
        "speakers must be `auto` or a number from 1 to 10, not \"many\""
    );

    // The catalogue `headroom speak --list-voices` shows.
    let voices = report["list_voices"]["structured"]["voices"]
        .as_array()
        .unwrap()
        .clone();
    let en_us = voices
        .iter()
        .find(|v| v["id"] == "en-us")
        .unwrap_or_else(|| panic!("en-us among {voices:?}"));
    assert_eq!(en_us["engine"], "espeak-ng");
    assert_eq!(en_us["kind"], "stock");
    let listed = headroom(&["speak", "--list-voices"], &env).await;
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let listed = text(&listed.stdout);
    for v in &voices {
        assert!(
            listed.contains(v["id"].as_str().unwrap()),
            "{v} in {listed}"
        );
    }

    // Speech written in the format asked for (or the file's extension's).
    let wav = &report["speak_spoken.wav"]["structured"];
    assert_eq!(wav["format"], "wav", "{wav}");
    assert_eq!(wav["path"], out.join("spoken.wav").to_str().unwrap());
    let reader = hound::WavReader::open(out.join("spoken.wav")).unwrap();
    let seconds = reader.duration() as f64 / reader.spec().sample_rate as f64;
    assert!(seconds > 1.0, "{seconds} s");
    assert!(
        (wav["duration_secs"].as_f64().unwrap() - seconds).abs() < 0.01,
        "{wav} vs {seconds} s in the file"
    );
    let mp3 = std::fs::read(out.join("spoken.mp3")).unwrap();
    assert_eq!(report["speak_spoken.mp3"]["structured"]["format"], "mp3");
    assert!(
        mp3.starts_with(b"ID3") || (mp3[0] == 0xFF && mp3[1] & 0xE0 == 0xE0),
        "an MP3 header: {:?}",
        &mp3[..4]
    );
    let flac = std::fs::read(out.join("spoken.flac")).unwrap();
    assert!(flac.starts_with(b"fLaC"), "{:?}", &flac[..4]);
    let aac = &report["speak_aac"];
    assert_eq!(aac["is_error"], true, "{aac}");
    assert!(
        aac["text"]
            .as_str()
            .unwrap()
            .starts_with("aac is not available: "),
        "{aac}"
    );
    assert!(!out.join("x.aac").exists());
    let ogg = &report["speak_ogg"];
    assert_eq!(ogg["is_error"], true, "{ogg}");
    assert_eq!(
        ogg["text"],
        "format \"ogg\" is not one of mp3, opus, flac, wav or pcm"
    );

    // An agent's calls are bounded as HTTP requests are, and write only what they were told to.
    let refused = |name: &str, wanted: &str| {
        let answer = &report[format!("refused_{name}")];
        assert_eq!(answer["is_error"], true, "{name}: {answer}");
        let text = answer["text"].as_str().unwrap_or_default();
        assert!(text.contains(wanted), "{name}: {text}");
    };
    refused("too_long", "at most 4096");
    assert_eq!(report["speak_again_first"]["is_error"], false);
    refused("again", "overwrite: true");
    refused("device", "not a regular file");
    refused("aac_extension", "aac is not available");
    refused("mismatch", "ends in .mp3 but the format is wav");
    refused("voice_path", "unknown voice");
    for never in ["long.wav", "y.aac", "z.mp3", "v.wav"] {
        assert!(!out.join(never).exists(), "{never} was written");
    }
    assert_eq!(
        report["speak_overwrite"]["is_error"], false,
        "{}",
        report["speak_overwrite"]
    );
    // Replaced when told to: the file holds the second, longer take.
    let reader = hound::WavReader::open(out.join("again.wav")).unwrap();
    let seconds = reader.duration() as f64 / reader.spec().sample_rate as f64;
    let duration = |name: &str| {
        report[name]["structured"]["duration_secs"]
            .as_f64()
            .unwrap()
    };
    assert!(
        (seconds - duration("speak_overwrite")).abs() < 0.01,
        "{seconds} s"
    );
    assert!(seconds > duration("speak_again_first") + 0.3, "{seconds} s");

    // The project: listed, its transcript read, cleaned up by the rules, narrated.
    let projects = report["list_projects"]["structured"]["projects"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(projects.len(), 1, "{projects:?}");
    assert_eq!(projects[0]["name"], "Talk");
    let id = projects[0]["id"].as_str().unwrap().to_string();
    let transcript = report["project_transcript"]["text"]
        .as_str()
        .unwrap()
        .to_lowercase();
    assert!(transcript.contains("lazy dog"), "{transcript}");
    let missing = &report["project_missing"];
    assert_eq!(missing["is_error"], true);
    assert!(
        missing["text"]
            .as_str()
            .unwrap()
            .contains("no project \"No Such\""),
        "{missing}"
    );

    let cleaned = &report["cleanup_project"];
    assert_eq!(cleaned["is_error"], false, "{cleaned}");
    let cleaned = &cleaned["structured"];
    assert_eq!(cleaned["project"], id.as_str());
    assert_eq!(cleaned["refused"], serde_json::json!([]), "{cleaned}");
    let segments = cleaned["segments"].as_array().unwrap();
    assert!(!segments.is_empty(), "{cleaned}");
    let steps = report["cleanup_progress"].as_array().unwrap();
    assert_eq!(steps.len(), segments.len(), "{steps:?}");
    assert_eq!(steps.last().unwrap()["progress"], 100.0);

    let narrated = &report["narrate_project"];
    assert_eq!(narrated["is_error"], false, "{narrated}\n{stderr}");
    let narrated = &narrated["structured"];
    assert_eq!(narrated["summary"]["refused"], serde_json::json!([]));
    assert!(narrated["summary"]["narrated"].as_u64().unwrap() >= 1);
    let files = narrated["files"].as_array().unwrap();
    assert!(files.len() >= 3, "{narrated}");
    for f in files {
        assert!(Path::new(f.as_str().unwrap()).is_file(), "{f}");
    }
    let narration = files
        .iter()
        .map(|f| f.as_str().unwrap())
        .find(|f| f.ends_with(".wav"))
        .unwrap();
    let reader = hound::WavReader::open(narration).unwrap();
    assert!(reader.duration() > 0);
    assert!(!report["narrate_progress"].as_array().unwrap().is_empty());

    // The recording edited by its words: pauses shortened, the edit returned; a word that is
    // not there and a passage that ends before it starts are refused, naming them.
    let edited = &report["edit_project"];
    assert_eq!(edited["is_error"], false, "{edited}\n{stderr}");
    let edit = &edited["structured"]["edit"];
    assert_eq!(edit["edit"]["intent"]["max_pause"], 0.3, "{edit}");
    assert!(!edit["edit"]["list"]["kept"].as_array().unwrap().is_empty());
    assert!(
        edit["edited_secs"].as_f64().unwrap() < edit["original_secs"].as_f64().unwrap() - 0.1,
        "pauses over 0.3 s are shortened: {edit}"
    );
    assert!(edit["fillers"].is_array());
    let missing = &report["edit_missing_word"];
    assert_eq!(missing["is_error"], true);
    assert!(
        missing["text"]
            .as_str()
            .unwrap()
            .contains("no word \"99:1\""),
        "{missing}"
    );
    let backwards = &report["edit_backwards"];
    assert_eq!(backwards["is_error"], true);
    assert!(
        backwards["text"]
            .as_str()
            .unwrap()
            .contains("the end must come after"),
        "{backwards}"
    );
}

#[tokio::test]
async fn every_request_on_stdin_is_answered_even_one_that_is_not_json_or_too_large() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_headroom"))
        .arg("mcp")
        .env("HEADROOM_PROJECTS_DIR", dir.path().join("projects"))
        .env("HEADROOM_VOICES_DIR", dir.path().join("voices"))
        .env_remove("HEADROOM_LLM_URL")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut replies = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    // Neither got an answer: the client waited forever.
    stdin.write_all(b"{not json}\n").await.unwrap();
    let reply = next_reply(&mut replies).await;
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    assert_eq!(reply["id"], serde_json::Value::Null);
    let text = "x".repeat(2 << 20);
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":\"big-1\",\"method\":\"tools/call\",\"params\":{{\"name\":\"speak\",\"arguments\":{{\"text\":\"{text}\",\"output\":\"/tmp/x.wav\"}}}}}}\n"
    );
    stdin.write_all(big.as_bytes()).await.unwrap();
    let reply = next_reply(&mut replies).await;
    assert_eq!(reply["id"], "big-1", "{reply}");
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    drop(stdin);
    let _ = child.wait().await;
}

async fn next_reply(
    replies: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) -> serde_json::Value {
    let line = tokio::time::timeout(std::time::Duration::from_secs(60), replies.next_line())
        .await
        .expect("an answer, not silence")
        .unwrap()
        .expect("a line");
    serde_json::from_str(&line).unwrap()
}
