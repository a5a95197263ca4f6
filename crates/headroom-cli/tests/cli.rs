//! The `headroom` binary as a user runs it.

use headroom_tests::fake_upstream::{Behavior, FakeUpstream};
use headroom_tests::microphone::{speaking_microphone, NULL_DEVICE_RATE};
use std::path::{Path, PathBuf};
use std::process::Output;

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/interview.txt");

async fn headroom(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_headroom"));
    cmd.args(args)
        // Never read the developer's own config.
        .env("HEADROOM_CONFIG", empty_config())
        .env_remove("HEADROOM_LLM_URL")
        .env_remove("HEADROOM_API_KEY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().await.expect("headroom runs")
}

fn empty_config() -> PathBuf {
    let path = std::env::temp_dir().join(format!("headroom-cli-test-{}.toml", std::process::id()));
    if !path.exists() {
        std::fs::write(&path, "# defaults\n").unwrap();
    }
    path
}

use headroom_tests::closed_port_url;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn no_llm_cleans_with_the_rules_only() {
    let out = headroom(&["cleanup", SAMPLE, "--no-llm"], &[]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with(
            "[00:00:02] Interviewer: So, how did you get started with field recording."
        ),
        "{stdout}"
    );
    assert!(!stdout.contains(" um "));
}

#[tokio::test]
async fn fallback_policy_with_no_server_prints_rule_based_text_and_says_why() {
    let url = closed_port_url();
    let out = headroom(
        &["cleanup", SAMPLE, "--llm-url", &url, "--policy", "fallback"],
        &[],
    )
    .await;
    assert!(out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("rule-based cleanup because"), "{stderr}");
    assert!(stderr.contains("connection refused"), "{stderr}");
    assert!(text(&out.stdout).contains("Maya: Well I was fourteen"));
}

#[tokio::test]
async fn reject_policy_explains_and_exits_3() {
    let url = closed_port_url();
    let out = headroom(&["cleanup", SAMPLE, "--llm-url", &url], &[]).await;
    assert_eq!(out.status.code(), Some(3));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("reason: upstream_unavailable"), "{stderr}");
    assert!(stderr.contains("--policy fallback"));
    assert!(out.stdout.is_empty(), "nothing half-done on stdout");
}

#[tokio::test]
async fn cleans_through_the_server_and_never_logs_the_key() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let out = headroom(
        &["cleanup", SAMPLE, "--llm-url", &up.base_url(), "--json"],
        &[
            ("HEADROOM_API_KEY", "sk-very-secret"),
            ("HEADROOM_LOG", "trace"),
        ],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["pieces"][0]["source"]["kind"], "llm");
    assert!(json["pieces"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("clean: [00:00:02]"));
    assert_eq!(
        up.authorizations()[0].as_deref(),
        Some("Bearer sk-very-secret")
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("TRACE") || stderr.contains("DEBUG") || stderr.contains("INFO"),
        "logs are on"
    );
    assert!(!stderr.contains("sk-very-secret"));
}

#[tokio::test]
async fn a_missing_or_empty_file_is_a_clear_error() {
    let out = headroom(&["cleanup", "/nonexistent/talk.txt", "--no-llm"], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("cannot read the transcript /nonexistent/talk.txt"));
    let empty = std::env::temp_dir().join(format!("headroom-empty-{}.txt", std::process::id()));
    std::fs::write(&empty, "  \n").unwrap();
    let out = headroom(
        &["cleanup", Path::new(&empty).to_str().unwrap(), "--no-llm"],
        &[],
    )
    .await;
    assert!(text(&out.stderr).contains("is empty"));
    std::fs::remove_file(empty).unwrap();
}

#[tokio::test]
async fn serve_refuses_a_non_loopback_address() {
    let out = headroom(&["serve", "--listen", "0.0.0.0:0"], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("loopback only"));
}

#[tokio::test]
async fn doctor_reports_server_model_context_and_gpu() {
    let up = FakeUpstream::start(Behavior::Echo, 8192).await;
    let out = headroom(&["doctor", "--llm-url", &up.base_url()], &[]).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("models      fake-model"), "{stdout}");
    assert!(stdout.contains("context     8192 tokens"), "{stdout}");
    assert!(stdout.contains("gpu         "), "{stdout}");
    let down = headroom(&["doctor", "--llm-url", &closed_port_url()], &[]).await;
    assert_eq!(down.status.code(), Some(1));
    assert!(text(&down.stdout).contains("server      FAIL"));
}

#[tokio::test]
async fn record_writes_the_asked_length_and_explains_a_missing_device() {
    let null_device = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/alsa/null-device.conf"
    );
    let out = std::env::temp_dir().join(format!("headroom-record-{}.wav", std::process::id()));
    let rec = headroom(
        &["record", "--seconds", "1", "--out", out.to_str().unwrap()],
        &[("ALSA_CONFIG_PATH", null_device)],
    )
    .await;
    assert!(rec.status.success(), "{}", text(&rec.stderr));
    let audio = headroom_speech::audio::decode_bytes(
        std::fs::read(&out).unwrap(),
        Some("wav"),
        &out,
        headroom_speech::audio::DecodeLimits::default(),
    );
    // The null device records silence, which decoding refuses as silent: the file is complete.
    assert!(
        matches!(
            audio,
            Err(headroom_speech::audio::AudioError::Silent { .. })
        ),
        "{audio:?}"
    );
    let reader = hound::WavReader::open(&out).unwrap();
    assert_eq!(
        reader.duration(),
        reader.spec().sample_rate,
        "exactly one second"
    );
    std::fs::remove_file(&out).unwrap();

    let missing = headroom(
        &[
            "record",
            "--seconds",
            "1",
            "--out",
            out.to_str().unwrap(),
            "--device",
            "no-such-mic",
        ],
        &[("ALSA_CONFIG_PATH", null_device)],
    )
    .await;
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        text(&missing.stderr).contains("no input device named \"no-such-mic\""),
        "{}",
        text(&missing.stderr)
    );
    assert!(!out.exists(), "nothing is written on failure");
}

#[tokio::test]
async fn play_runs_to_the_end_on_a_device_and_explains_a_bad_file() {
    let null_device = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/alsa/null-device.conf"
    );
    let clip = concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/interview.flac");
    let played = headroom(&["play", clip], &[("ALSA_CONFIG_PATH", null_device)]).await;
    assert!(played.status.success(), "{}", text(&played.stderr));
    // Decoded as it played, to the end: every second of the clip went to the device.
    let secs = headroom_speech::audio::decode_file(Path::new(clip), Default::default())
        .unwrap()
        .duration_secs();
    assert!(
        text(&played.stderr).contains(&format!("({secs:.1} s)")),
        "{secs:.1} s: {}",
        text(&played.stderr)
    );
    let bad = headroom(&["play", SAMPLE], &[("ALSA_CONFIG_PATH", null_device)]).await;
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr).contains("interview.txt is not an audio format"),
        "{}",
        text(&bad.stderr)
    );
}

#[tokio::test]
async fn plan_shows_the_arithmetic_and_the_bounded_command() {
    let out = headroom(
        &[
            "plan",
            "--gpu-gib",
            "24",
            "--audio-mib",
            "3000",
            "--gpu-memory-utilization",
            "0.45",
        ],
        &[],
    )
    .await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    for expected in [
        "KV per token = 2 (K,V) × 28 layers × 4 KV heads × 128 head dim × 2 B = 57344 B",
        "76821 tokens",
        "vllm serve Qwen/Qwen2.5-7B-Instruct-AWQ",
        "--gpu-memory-utilization 0.45",
        "--max-model-len 4096",
        "--max-num-seqs 2",
    ] {
        assert!(stdout.contains(expected), "{expected:?} missing:\n{stdout}");
    }
    let json = headroom(&["plan", "--gpu-gib", "24", "--json"], &[]).await;
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(value["plan"]["gpu_memory_utilization"], 0.3);
}

#[tokio::test]
async fn plan_refuses_what_cannot_fit_with_exit_4() {
    let out = headroom(
        &[
            "plan",
            "--gpu-gib",
            "24",
            "--audio-mib",
            "8000",
            "--context",
            "32768",
            "--concurrency",
            "8",
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(4));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("cannot fit on a 24.00 GiB card"),
        "{stdout}"
    );
    let unknown = headroom(&["plan", "--gpu-gib", "24", "--model", "nope"], &[]).await;
    assert!(text(&unknown.stderr).contains("unknown model"));
}

#[tokio::test]
async fn gpu_commands_say_when_there_is_no_gpu() {
    let out = headroom(&["gpu", "watch", "--seconds", "0.2"], &[]).await;
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    match headroom_gpu::GpuStatus::probe() {
        headroom_gpu::GpuStatus::NoGpu { .. } => {
            assert!(stdout.contains("no NVIDIA GPU detected"), "{stdout}")
        }
        headroom_gpu::GpuStatus::Present { .. } => {
            assert!(stdout.contains("baseline"), "{stdout}")
        }
    }
}

#[tokio::test]
async fn a_crafted_wav_is_refused_not_a_crash() {
    // The 444-byte WAV of issue 10 (8-bit mono at 4,294,967,291 Hz): resampling it asked for a
    // 17 GB filter, so the process grew until it was killed. Under a 4 GiB address-space limit
    // that was an abort; now it is a clear error.
    headroom_tests::models_dir();
    let dir = tempfile::tempdir().unwrap();
    let evil = dir.path().join("evil.wav");
    let rate: u32 = 4_294_967_291;
    let mut file = b"RIFF".to_vec();
    file.extend_from_slice(&436u32.to_le_bytes());
    file.extend_from_slice(b"WAVEfmt ");
    file.extend_from_slice(&16u32.to_le_bytes());
    file.extend_from_slice(&[1, 0, 1, 0]); // PCM, mono
    file.extend_from_slice(&rate.to_le_bytes());
    file.extend_from_slice(&rate.to_le_bytes());
    file.extend_from_slice(&[1, 0, 8, 0]); // block align 1, 8 bits
    file.extend_from_slice(b"data");
    file.extend_from_slice(&400u32.to_le_bytes());
    file.extend((0..400).map(|i| (128.0 + 60.0 * (i as f32 * 0.3).sin()) as u8));
    std::fs::write(&evil, &file).unwrap();
    let out = tokio::process::Command::new("prlimit")
        .arg(format!("--as={}", 4u64 << 30))
        .arg(env!("CARGO_BIN_EXE_headroom"))
        .args(["transcribe", evil.to_str().unwrap()])
        .env("HEADROOM_CONFIG", empty_config())
        .output()
        .await
        .expect("prlimit runs");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("evil.wav is refused: it declares a sample rate of 4294967291 Hz; Headroom reads 8000–384000 Hz"),
        "{stderr}"
    );
}

#[tokio::test]
async fn transcribe_times_words_and_takes_the_decoding_choices() {
    headroom_tests::models_dir();
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/interview.flac");
    let out = headroom(&["transcribe", sample, "--words", "--format", "json"], &[]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let segments = json["segments"].as_array().unwrap();
    assert!(segments.len() >= 3, "{json}");
    let mut last_start = 0.0;
    for segment in segments {
        let words = segment["words"].as_array().expect("words in every segment");
        assert!(!words.is_empty(), "{segment}");
        for w in words {
            let (start, end) = (w["start"].as_f64().unwrap(), w["end"].as_f64().unwrap());
            assert!(
                start <= end && start >= last_start,
                "{w} after {last_start}"
            );
            assert!(
                start >= segment["start"].as_f64().unwrap() - 0.5,
                "{w} in {segment}"
            );
            assert!(
                (0.0..=1.0).contains(&w["probability"].as_f64().unwrap()),
                "{w}"
            );
            last_start = start;
        }
    }
    // One cue per word in SubRip.
    let words: usize = segments
        .iter()
        .map(|s| s["words"].as_array().unwrap().len())
        .sum();
    let out = headroom(&["transcribe", sample, "--words", "--format", "srt"], &[]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let cues = text(&out.stdout).matches(" --> ").count();
    assert_eq!(cues, words);

    // Float weights, every window, no guards, beam search: the same interview, near enough.
    let out = headroom(
        &[
            "transcribe",
            sample,
            "--precision",
            "float32",
            "--keep-silence",
            "--no-guards",
            "--beam",
            "3",
        ],
        &[],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plain: String = segments
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect::<Vec<_>>()
        .join(" ");
    let wer = headroom_speech::asr::word_error_rate(&plain, &text(&out.stdout));
    assert!(wer < 0.2, "{wer}: {plain:?} vs {:?}", text(&out.stdout));

    let out = headroom(&["transcribe", sample, "--precision", "int4"], &[]).await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("\"int4\" is not a precision: use int8 or float32"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test]
async fn projects_from_the_command_line() {
    headroom_tests::models_dir();
    let dir = tempfile::tempdir().unwrap();
    let projects = dir.path().to_str().unwrap().to_string();
    let env = [("HEADROOM_PROJECTS_DIR", projects.as_str())];
    let run = |args: Vec<&str>| {
        let args: Vec<String> = args.into_iter().map(str::to_string).collect();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            headroom(&args, &env).await
        }
    };
    let out = run(vec!["project", "create", "Field Notes", "--json"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let created: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(created["id"], "field-notes");

    let out = run(vec!["project", "rename", "Field Notes", "Episode 1"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(vec!["project", "list", "--json"]).await;
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed[0]["name"], "Episode 1");
    assert_eq!(listed[0]["id"], "field-notes");

    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/interview.flac");
    let out = run(vec!["project", "transcribe", "episode 1", sample, "--json"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let transcribed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(transcribed["segments"].as_array().unwrap().len() >= 3);

    let out = run(vec![
        "project",
        "cleanup",
        "field-notes",
        "--rules-only",
        "--accept",
        "--json",
    ])
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let cleaned: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let outcomes = cleaned["segments"].as_array().unwrap();
    assert_eq!(
        outcomes.len(),
        transcribed["segments"].as_array().unwrap().len()
    );
    assert!(outcomes
        .iter()
        .all(|s| s["outcome"] == "cleaned" && s["suggestion"]["source"] == "rule_based"));
    assert_eq!(cleaned["refused"], serde_json::json!([]));
    assert!(cleaned["job"]
        .as_str()
        .is_some_and(|j| j.contains("cleanup")));

    let out = run(vec!["project", "export", "field-notes", "--format", "srt"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let srt = text(&out.stdout);
    assert!(srt.starts_with("1\n00:00:0"), "{srt}");
    assert!(
        !srt.contains(" um "),
        "accepted cleanups are exported: {srt}"
    );
    let file = dir.path().join("out.vtt");
    let out = run(vec![
        "project",
        "export",
        "field-notes",
        "--format",
        "vtt",
        "--out",
        file.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::read_to_string(&file)
        .unwrap()
        .starts_with("WEBVTT"));

    // Transcribing again keeps the cleaned transcript as a version, which comes back.
    let out = run(vec!["project", "transcribe", "field-notes", sample]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(vec!["project", "versions", "field-notes", "--json"]).await;
    let versions: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        versions[0]["reason"], "before transcribing again",
        "{versions}"
    );
    let kept = versions[0]["id"].as_str().unwrap().to_string();
    let out = run(vec![
        "project",
        "versions",
        "field-notes",
        "--restore",
        &kept,
    ])
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(vec!["project", "export", "field-notes", "--format", "srt"]).await;
    assert_eq!(
        text(&out.stdout),
        srt,
        "the restored transcript exports as before"
    );

    let out = run(vec!["project", "show", "nope"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no project \"nope\""));
    let out = run(vec!["project", "delete", "field-notes"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!dir.path().join("field-notes").exists());
}

#[tokio::test]
async fn two_processes_creating_one_name_cannot_both_win() {
    // Without a lock across processes both check that the name is free, both pick the same
    // folder, and both report success while one overwrites the other.
    let dir = tempfile::tempdir().unwrap();
    let projects = dir.path().to_str().unwrap().to_string();
    let attempts: Vec<_> = (0..16)
        .map(|_| {
            let projects = projects.clone();
            tokio::spawn(async move {
                headroom(
                    &["project", "create", "Same Name"],
                    &[("HEADROOM_PROJECTS_DIR", projects.as_str())],
                )
                .await
            })
        })
        .collect();
    let mut won = 0;
    for attempt in attempts {
        let out = attempt.await.unwrap();
        if out.status.success() {
            won += 1;
        } else {
            assert!(
                text(&out.stderr).contains("already exists"),
                "{}",
                text(&out.stderr)
            );
        }
    }
    assert_eq!(won, 1);
    let folders = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().is_dir())
        .count();
    assert_eq!(folders, 1);
}

#[tokio::test]
async fn a_killed_transcription_is_listed_and_resumes_to_the_same_transcript() {
    use headroom_speech::audio::{decode_file, wav_bytes, Audio, DecodeLimits};
    let dir = tempfile::tempdir().unwrap();
    let projects = dir.path().join("projects");
    let projects_env = projects.to_str().unwrap().to_string();
    let env = [("HEADROOM_PROJECTS_DIR", projects_env.as_str())];
    // The interview three times over: three Whisper windows.
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/interview.flac");
    let once = decode_file(Path::new(sample), DecodeLimits::default()).unwrap();
    let long = dir.path().join("long.wav");
    let audio = Audio {
        samples: once.samples.repeat(3),
        sample_rate: once.sample_rate,
    };
    std::fs::write(&long, wav_bytes(&audio)).unwrap();
    let long = long.to_str().unwrap();

    for name in ["Whole", "Killed"] {
        assert!(headroom(&["project", "create", name], &env)
            .await
            .status
            .success());
    }
    let out = headroom(&["project", "transcribe", "whole", long, "--json"], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let whole: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["project", "transcribe", "killed", long])
        .env("HEADROOM_CONFIG", empty_config())
        .env("HEADROOM_PROJECTS_DIR", &projects)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the job has kept its first window: in its record, not in the temporary file
    // of an atomic write still to be renamed over it (the kill could land between the two).
    let jobs = projects.join("killed/jobs");
    let started = std::time::Instant::now();
    let first_window_kept = || {
        std::fs::read_dir(&jobs)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .any(|e| {
                std::fs::read(e.path())
                    .ok()
                    .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                    .is_some_and(|r| r["progress"]["done_secs"].as_f64() > Some(0.0))
            })
    };
    while !first_window_kept() {
        assert!(started.elapsed().as_secs() < 120, "no window was kept");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the transcription ended early"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    child.start_kill().unwrap();
    child.wait().await.unwrap();

    let out = headroom(&["project", "jobs", "killed", "--json"], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["running"], false);
    assert_eq!(listed[0]["kind"], "transcribe");
    let fraction = listed[0]["fraction"].as_f64().unwrap();
    assert!(fraction > 0.0 && fraction < 1.0, "{listed}");
    let job = listed[0]["id"].as_str().unwrap().to_string();

    let out = headroom(
        &["project", "jobs", "killed", "--resume", &job, "--json"],
        &env,
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let resumed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(resumed["segments"], whole["segments"]);
    let out = headroom(&["project", "jobs", "killed", "--json"], &env).await;
    assert_eq!(text(&out.stdout).trim(), "[]");
    let out = headroom(&["project", "jobs", "killed", "--discard", &job], &env).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no job"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test]
async fn voices_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let voices_dir = dir.path().join("voices");
    let projects_dir = dir.path().join("projects");
    let env = [
        ("HEADROOM_VOICES_DIR", voices_dir.to_str().unwrap()),
        ("HEADROOM_PROJECTS_DIR", projects_dir.to_str().unwrap()),
    ];
    // A reference clip made at test time: espeak-ng reading a paragraph (~9 s).
    let clip = dir.path().join("ref.wav");
    let status = std::process::Command::new("espeak-ng")
        .args(["-v", "en-us+m3", "-p", "40", "-w"])
        .arg(&clip)
        .arg("When the morning train was late again, the whole platform sighed at once. A man with a red umbrella checked his watch and read the timetable aloud.")
        .status()
        .unwrap();
    assert!(status.success());
    let short = dir.path().join("short.wav");
    assert!(std::process::Command::new("espeak-ng")
        .args(["-w"])
        .arg(&short)
        .arg("Too short.")
        .status()
        .unwrap()
        .success());
    let (clip_s, short_s) = (clip.to_str().unwrap(), short.to_str().unwrap());

    let out = headroom(&["voice", "add", "Rhea", clip_s, short_s, "--json"], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let added: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(added["clips"][0]["added"], true);
    assert_eq!(
        added["clips"][1]["added"], false,
        "the short clip is refused"
    );
    assert_eq!(
        added["clips"][1]["report"]["findings"][0]["check"],
        "too_short"
    );
    assert_eq!(added["voice"]["clips"].as_array().unwrap().len(), 1);
    let transcript = added["voice"]["clips"][0]["transcript"]
        .as_str()
        .unwrap()
        .to_lowercase();
    assert!(transcript.contains("umbrella"), "{transcript}");

    let out = headroom(&["voice", "list"], &env).await;
    assert!(text(&out.stdout).contains("Rhea"), "{}", text(&out.stdout));
    let out = headroom(&["voice", "show", "rhea"], &env).await;
    let shown = text(&out.stdout);
    assert!(
        shown.contains("clip-1") && shown.contains("voice match: none yet"),
        "{shown}"
    );

    // Scoring the reference against its own voice beats the default voice.
    let out = headroom(&["voice", "score", "Rhea", clip_s, "--json"], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let score: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (own, default) = (
        score["similarity"].as_f64().unwrap(),
        score["default_similarity"].as_f64().unwrap(),
    );
    assert!(own > 0.95 && own > default, "{score}");

    // Speaking as the voice needs a match or a server, and says so.
    let take = dir.path().join("take.wav");
    let take_s = take.to_str().unwrap();
    let out = headroom(
        &["speak", "Hello there.", "--voice", "Rhea", "--out", take_s],
        &env,
    )
    .await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("headroom voice match Rhea"),
        "{}",
        text(&out.stderr)
    );
    let out = headroom(&["voice", "match", "Rhea", "--budget", "4"], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("voice match (approximate): similarity"),
        "{}",
        text(&out.stdout)
    );
    let out = headroom(
        &["speak", "Hello there.", "--voice", "Rhea", "--out", take_s],
        &env,
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert!(
        said.contains("voice match (approximate") && !said.contains("clone"),
        "{said}"
    );
    assert!(said.contains("similarity to Rhea"), "{said}");
    assert!(take.exists());

    // A project's text, spoken in the voice (kept as the project's voice).
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/interview.flac");
    assert!(headroom(&["project", "create", "Read"], &env)
        .await
        .status
        .success());
    let out = headroom(&["project", "transcribe", "Read", sample], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = headroom(
        &[
            "project",
            "speak",
            "Read",
            "--segment",
            "1",
            "--voice",
            "Rhea",
            "--json",
        ],
        &env,
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let spoken: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(spoken["voice"], "profile:rhea", "{spoken}");
    assert!(spoken["voice_method"]
        .as_str()
        .unwrap()
        .starts_with("voice match (approximate"));
    // The matched voice is closer to Rhea than the default voice is.
    assert!(
        spoken["similarity"].as_f64().unwrap() > spoken["default_similarity"].as_f64().unwrap(),
        "{spoken}"
    );
    assert!(projects_dir
        .join("read")
        .join(spoken["file"].as_str().unwrap())
        .exists());

    // Export, import under a free name, remove a clip and the voice.
    let file = dir.path().join("rhea.voice");
    let out = headroom(&["voice", "export", "Rhea", file.to_str().unwrap()], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = headroom(&["voice", "import", file.to_str().unwrap()], &env).await;
    assert!(
        text(&out.stdout).contains("imported Rhea (2) (1 clips)"),
        "{}",
        text(&out.stdout)
    );
    let out = headroom(&["voice", "remove", "Rhea (2)", "--clip", "clip-1"], &env).await;
    assert!(
        text(&out.stdout).contains("0 clips left"),
        "{}",
        text(&out.stdout)
    );
    let out = headroom(&["voice", "remove", "Rhea (2)"], &env).await;
    assert!(out.status.success());
    let out = headroom(&["voice", "list", "--json"], &env).await;
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1);
    // No cloning server configured: the check says how to set one.
    let out = headroom(&["voice", "server"], &env).await;
    assert!(
        text(&out.stderr).contains("cloning.url"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test]
async fn a_project_narrated_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let projects_dir = dir.path().join("projects");
    let out_dir = dir.path().join("out");
    let env = [("HEADROOM_PROJECTS_DIR", projects_dir.to_str().unwrap())];
    // A stand-in translator on loopback: every translation it gives passes the checks.
    let up = FakeUpstream::start(Behavior::Translate, 4096).await;
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/interview.flac");
    assert!(headroom(&["project", "create", "Talk"], &env)
        .await
        .status
        .success());
    let out = headroom(&["project", "transcribe", "Talk", sample], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));

    // Translation needs the text model, which is off until the project turns it on.
    let out = headroom(&["narrate", "Talk", "--to", "es"], &env).await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("LLM cleanup is off"),
        "{}",
        text(&out.stderr)
    );
    let out = headroom(
        &[
            "project",
            "settings",
            "Talk",
            "--llm-cleanup",
            "on",
            "--server",
            &up.base_url(),
        ],
        &env,
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));

    let out = headroom(
        &[
            "narrate",
            "Talk",
            "--to",
            "Spanish",
            "--mix",
            "--out",
            out_dir.to_str().unwrap(),
            "--json",
        ],
        &env,
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let summary = &report["summary"];
    let segments = summary["segments"].as_u64().unwrap();
    assert!(segments >= 3, "{report}");
    assert_eq!(summary["narrated"], segments);
    assert_eq!(summary["settings"]["language"], "es");
    assert_eq!(report["refused_by_reason"], serde_json::json!({}));
    assert!(summary["timings"]["total_secs"].as_f64().unwrap() > 0.0);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("{segments} of {segments} segments to narrate")),
        "{stderr}"
    );
    assert!(stderr.contains("segment 1: text done"), "{stderr}");
    for name in [
        "talk-narration.wav",
        "talk-narration-mix.wav",
        "talk-narration.es.srt",
        "talk-narration.es.vtt",
    ] {
        assert!(out_dir.join(name).exists(), "{name} in --out");
    }
    let srt = std::fs::read_to_string(out_dir.join("talk-narration.es.srt")).unwrap();
    assert_eq!(srt.matches(" --> ").count() as u64, segments);

    // One segment again; the rest stay as they are.
    let out = headroom(&["narrate", "Talk", "--segment", "2", "--json"], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let again: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(again["summary"]["worked_on"], 1);
    assert_eq!(again["summary"]["narrated"], segments);

    // A server that is down: each segment is flagged with the reason, exit status 3.
    let out = headroom(
        &[
            "project",
            "settings",
            "Talk",
            "--server",
            &closed_port_url(),
        ],
        &env,
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = headroom(
        &["narrate", "Talk", "--mode", "cleanup", "--policy", "reject"],
        &env,
    )
    .await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("segment 1: text refused (upstream_unavailable)"),
        "{stderr}"
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!("{segments} refused: upstream_unavailable")),
        "{stdout}"
    );

    // With a second server beside the dead one, the project's lane moves every request on.
    let out = headroom(
        &[
            "project",
            "settings",
            "Talk",
            "--server",
            &closed_port_url(),
            "--server",
            &up.base_url(),
        ],
        &env,
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(
        shown.contains(&up.base_url()),
        "both servers shown: {shown}"
    );
    let out = headroom(
        &[
            "narrate",
            "Talk",
            "--mode",
            "translate",
            "--to",
            "Spanish",
            "--json",
        ],
        &env,
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["summary"]["narrated"], segments);
}

/// A project whose `speech/` and `exports/` were replaced by symbolic links to a folder outside
/// it (a shared or synced folder, an unpacked archive): speaking and narrating are refused,
/// naming the link, and nothing is written where the links point.
#[cfg(unix)]
#[tokio::test]
async fn speak_and_narrate_never_write_through_a_link_out_of_the_project() {
    let dir = tempfile::tempdir().unwrap();
    let projects = dir.path().join("projects");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let env = [("HEADROOM_PROJECTS_DIR", projects.to_str().unwrap())];
    let out = headroom(&["project", "create", "Talk"], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    // A typed transcript, so no speech model is needed.
    let folder = projects.join("talk");
    let manifest = folder.join("project.json");
    let mut project: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    project["language"] = "en".into();
    project["duration_secs"] = 4.0.into();
    project["segments"] = serde_json::json!([
        {"start": 0.0, "end": 1.8, "text": "Hello there."},
        {"start": 2.0, "end": 3.8, "text": "A second line."}
    ]);
    std::fs::write(&manifest, serde_json::to_vec(&project).unwrap()).unwrap();
    for sub in ["speech", "exports"] {
        std::fs::remove_dir_all(folder.join(sub)).unwrap();
        std::os::unix::fs::symlink(&outside, folder.join(sub)).unwrap();
    }
    let refused = |out: &Output, link: &str| {
        assert!(!out.status.success());
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "{link} is a symbolic link; Headroom writes only inside the project folder"
            )),
            "{stderr}"
        );
        let written: Vec<_> = std::fs::read_dir(&outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            written.is_empty(),
            "written outside the project: {written:?}"
        );
    };
    refused(
        &headroom(&["project", "speak", "Talk", "--segment", "1"], &env).await,
        "speech",
    );
    refused(&headroom(&["narrate", "Talk"], &env).await, "speech");
    // Takes inside the project: the narration's WAV and subtitles still go nowhere.
    std::fs::remove_file(folder.join("speech")).unwrap();
    refused(&headroom(&["narrate", "Talk"], &env).await, "exports");
    assert!(folder.join("speech/narration").is_dir());
}

#[tokio::test]
async fn record_live_prints_each_phrase_as_it_is_spoken() {
    let dir = std::env::temp_dir().join(format!("headroom-live-{}", std::process::id()));
    let clip = concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/interview.flac");
    // The interview sample as the microphone's sound, then silence.
    let microphone = speaking_microphone(&dir, Path::new(clip), 10.0);
    let seconds = microphone.speech_secs;
    let conf = microphone.config;
    let out = dir.join("live.wav");

    let whole = headroom(&["transcribe", clip], &[]).await;
    assert!(whole.status.success(), "{}", text(&whole.stderr));
    let live = headroom(
        &[
            "record",
            "--seconds",
            &format!("{:.1}", seconds + 1.0),
            "--out",
            out.to_str().unwrap(),
            "--live",
        ],
        &[("ALSA_CONFIG_PATH", conf.to_str().unwrap())],
    )
    .await;
    let stderr = text(&live.stderr);
    assert!(live.status.success(), "{stderr}");
    let stdout = text(&live.stdout);
    // One line per final segment, timed: `[1.2 s → 3.4 s] text`.
    let finals: Vec<&str> = stdout.lines().collect();
    assert!(
        finals.len() >= 2,
        "phrases were finalized: {stdout}\n{stderr}"
    );
    let mut last_end = 0.0;
    let mut said = Vec::new();
    for line in &finals {
        let (times, words) = line
            .strip_prefix('[')
            .and_then(|l| l.split_once("] "))
            .unwrap_or_else(|| panic!("a timed line: {line}"));
        let (start, end) = times.split_once(" s → ").unwrap();
        let start: f64 = start.parse().unwrap();
        let end: f64 = end.trim_end_matches(" s").parse().unwrap();
        assert!(
            start >= last_end - 0.5 && end > start && end <= seconds + 1.5,
            "{line}"
        );
        last_end = end;
        said.push(words.to_string());
    }
    let wer = headroom_speech::asr::word_error_rate(&text(&whole.stdout), &said.join(" "));
    assert!(
        wer <= 0.25,
        "live text against the file's transcript: WER {wer}\n{stdout}\n{}",
        text(&whole.stdout)
    );
    // The recording itself is kept, as long as asked.
    let reader = hound::WavReader::open(&out).unwrap();
    assert_eq!(
        reader.spec().sample_rate,
        NULL_DEVICE_RATE,
        "the file plugin reads at the recorder's rate: the raw file must be at that rate"
    );
    let recorded = reader.duration() as f64 / reader.spec().sample_rate as f64;
    assert!(
        (recorded - (seconds + 1.0)).abs() < 0.2,
        "{recorded} s recorded"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn memory_shows_what_serve_holds_and_free_lets_it_go() {
    let serve = headroom_tests::serve_process::ServeProcess::start(
        env!("CARGO_BIN_EXE_headroom").as_ref(),
        &closed_port_url(),
        &[],
    )
    .await;
    let server = serve.base.trim_end_matches("/v1").to_string();
    let http = reqwest::Client::new();
    let memory = |http: reqwest::Client, server: String| async move {
        http.get(format!("{server}/v1/headroom/memory"))
            .send()
            .await
            .unwrap()
            .json::<serde_json::Value>()
            .await
            .unwrap()
    };
    let idle = memory(http.clone(), server.clone()).await;
    assert_eq!(
        idle["models"],
        serde_json::json!([]),
        "nothing loads before it is used"
    );

    let clip = concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/interview.flac");
    let form = reqwest::multipart::Form::new()
        .part(
            "file",
            reqwest::multipart::Part::bytes(std::fs::read(clip).unwrap())
                .file_name("interview.flac"),
        )
        .text("model", "whisper-1");
    let heard = http
        .post(format!("{}/audio/transcriptions", serve.base))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(heard.status(), 200);
    let loaded = memory(http.clone(), server.clone()).await;
    let models = loaded["models"].as_array().unwrap();
    let whisper = models
        .iter()
        .find(|m| m["name"] == "whisper-tiny.en (int8)")
        .unwrap_or_else(|| panic!("the engine is resident: {loaded}"));
    assert_eq!(whisper["role"], "transcription");
    assert!(whisper["resident_mib"].as_f64().unwrap() > 10.0, "{loaded}");
    assert!(models.iter().any(|m| m["name"] == "silero-vad"), "{loaded}");

    let shown = headroom(&["memory", "--server", &server], &[]).await;
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    assert!(
        text(&shown.stdout).contains("whisper-tiny.en (int8)"),
        "{}",
        text(&shown.stdout)
    );
    let freed = headroom(&["memory", "--free", "--server", &server], &[]).await;
    assert!(freed.status.success(), "{}", text(&freed.stderr));
    assert!(
        text(&freed.stdout).contains("let go of whisper-tiny.en (int8)"),
        "{}",
        text(&freed.stdout)
    );
    let after = memory(http.clone(), server.clone()).await;
    assert_eq!(after["models"], serde_json::json!([]), "{after}");
    let (before_mib, after_mib) = (
        loaded["process_mib"].as_f64().unwrap(),
        after["process_mib"].as_f64().unwrap(),
    );
    assert!(
        after_mib < before_mib - 10.0,
        "freeing the models returns their memory: {before_mib} MiB before, {after_mib} MiB after"
    );

    let nobody = headroom(&["memory", "--server", &closed_port_url()], &[]).await;
    assert_eq!(nobody.status.code(), Some(1));
    assert!(
        text(&nobody.stderr).contains("is it running?"),
        "{}",
        text(&nobody.stderr)
    );
}

// ---- Trust boundaries: text never becomes an option, secrets never print, pipes close ----

/// Seconds of sound in a WAV file.
fn wav_seconds(path: &Path) -> f64 {
    let reader = hound::WavReader::open(path).unwrap();
    reader.duration() as f64 / reader.spec().sample_rate as f64
}

#[tokio::test]
async fn text_that_looks_like_an_espeak_option_is_spoken_not_obeyed() {
    headroom_tests::models_dir();
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    // Were this file read, its sentence would make a take of half a minute or more.
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "Xylophone zebra quartz. ".repeat(40)).unwrap();
    let out_wav = dir.path().join("o.wav");
    let wipe = format!("--phonout={}", victim.display());
    let read = format!("-f{}", secret.display());
    // Kokoro phonemizes with espeak-ng; espeak-ng's own voice speaks with it.
    for voice in ["kokoro", "en-us"] {
        for line in [wipe.as_str(), read.as_str()] {
            let out = headroom(
                &[
                    "speak",
                    "--voice",
                    voice,
                    "--out",
                    out_wav.to_str().unwrap(),
                    "--",
                    line,
                ],
                &[],
            )
            .await;
            assert!(
                out.status.success(),
                "{voice} {line}: {}",
                text(&out.stderr)
            );
            assert_eq!(
                std::fs::read_to_string(&victim).unwrap(),
                "keep me",
                "{voice} {line}: espeak-ng took the text as an option"
            );
            let seconds = wav_seconds(&out_wav);
            assert!(
                seconds > 0.3 && seconds < 12.0,
                "{voice} {line}: {seconds} s is not the line itself being spoken"
            );
        }
    }
}

#[tokio::test]
async fn a_voice_name_espeak_does_not_list_is_refused_by_the_cli_and_serve() {
    // espeak-ng reads LANGUAGE+VARIANT and opens VARIANT as a file: the first made it read
    // /etc/passwd as a voice, the second aborted it with a buffer overflow (500 engine_failed).
    let hostile = [
        "en-us+../../../../../../../etc/passwd",
        "en-us+./././././././././././././Denis",
    ];
    let dir = tempfile::tempdir().unwrap();
    let out_wav = dir.path().join("o.wav");
    for voice in hostile {
        let out = headroom(
            &[
                "speak",
                "--voice",
                voice,
                "--out",
                out_wav.to_str().unwrap(),
                "--",
                "hello",
            ],
            &[],
        )
        .await;
        assert!(!out.status.success(), "{voice}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("unknown voice") && stderr.contains(voice),
            "{voice}: {stderr}"
        );
        assert!(!out_wav.exists());
    }
    let serve = headroom_tests::serve_process::ServeProcess::start(
        env!("CARGO_BIN_EXE_headroom").as_ref(),
        &closed_port_url(),
        &[],
    )
    .await;
    let http = reqwest::Client::new();
    for voice in hostile {
        let answer = http
            .post(format!("{}/audio/speech", serve.base))
            .json(&serde_json::json!({"model": "tts-1", "voice": voice, "input": "hello"}))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 400, "{voice}");
        let body: serde_json::Value = answer.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(voice), "{voice}: {body}");
    }
    // A variant espeak-ng lists still speaks.
    let answer = http
        .post(format!("{}/audio/speech", serve.base))
        .json(&serde_json::json!({
            "model": "tts-1", "voice": "en-us+m3", "input": "hello", "response_format": "wav"
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
}

#[tokio::test]
async fn a_named_pipe_or_a_device_is_refused_as_input_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.wav");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let fifo = fifo.to_str().unwrap();
    // Opening a pipe for reading waits for a writer: `transcribe pipe.wav` hung there, and
    // Ctrl-C did not stop it. The bound only turns such a hang into a failure.
    for args in [
        vec!["transcribe", fifo],
        vec!["transcribe", "/dev/zero"],
        vec!["cleanup", fifo, "--no-llm"],
        vec!["voice", "add", "Pipe", fifo],
    ] {
        let voices = dir.path().join("voices");
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(120),
            headroom(&args, &[("HEADROOM_VOICES_DIR", voices.to_str().unwrap())]),
        )
        .await
        .unwrap_or_else(|_| panic!("{args:?} blocked on its input"));
        assert!(!out.status.success(), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains("not a regular file"), "{args:?}: {stderr}");
    }
}

#[tokio::test]
async fn an_upstreams_query_values_are_never_shown_and_the_cli_sends_serves_token() {
    // `auth` is no name a secret was recognised by: its value went to /metrics (29 times),
    // /v1/headroom/lanes, stderr and the unauthenticated /health.
    let upstream = format!("{}?auth=SEKRIT7", closed_port_url());
    let config = "[server]\ntoken = \"tok-serve-123\"\n";
    let serve = headroom_tests::serve_process::ServeProcess::start_with(
        env!("CARGO_BIN_EXE_headroom").as_ref(),
        &upstream,
        headroom_tests::serve_process::ServeOptions {
            config,
            ..Default::default()
        },
    )
    .await;
    let root = serve.root();
    let http = reqwest::Client::new();
    let health = http.get(format!("{root}/health")).send().await.unwrap();
    assert_eq!(health.status(), 503, "the upstream is down");
    let health: serde_json::Value = health.json().await.unwrap();
    assert_eq!(
        health,
        serde_json::json!({"status": "degraded", "upstream": "down"}),
        "with a token, /health says only up or down"
    );
    let mut shown = String::new();
    for path in ["/metrics", "/v1/headroom/lanes"] {
        let answer = http
            .get(format!("{root}{path}"))
            .bearer_auth("tok-serve-123")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{path}");
        shown.push_str(&answer.text().await.unwrap());
    }
    // A request that reaches the upstream, so its errors are shown too.
    let chat = http
        .post(format!("{}/chat/completions", serve.base))
        .bearer_auth("tok-serve-123")
        .json(&serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    shown.push_str(&chat.text().await.unwrap());
    shown.push_str(&serve.stderr());
    assert!(shown.contains("auth=<redacted>"), "{shown}");
    assert!(
        !shown.contains("SEKRIT7"),
        "a query value was shown: {shown}"
    );

    // `headroom memory` presents the configured token (it got 401 before).
    let dir = tempfile::tempdir().unwrap();
    let client_config = dir.path().join("client.toml");
    std::fs::write(&client_config, config).unwrap();
    let out = headroom(
        &["memory", "--server", &root],
        &[("HEADROOM_CONFIG", client_config.to_str().unwrap())],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("headroom serve at"),
        "{}",
        text(&out.stdout)
    );
}

#[tokio::test]
async fn secrets_inside_urls_are_never_printed() {
    use headroom_tests::fake_cloning::{FakeCloning, Kind};
    let secrets = ["s3cret-pw", "K3Y-value"];
    let clean = |out: &Output, what: &str| {
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        for secret in secrets {
            assert!(!all.contains(secret), "{what} printed a secret: {all}");
        }
        all
    };
    let with_password = |url: &str| url.replace("http://", "http://alice:s3cret-pw@");

    // A cloning server that is down, then one that answers.
    let down = with_password(&closed_port_url().replace("/v1", "/"));
    let out = headroom(&["voice", "server"], &[("HEADROOM_CLONING_URL", &down)]).await;
    assert!(!out.status.success());
    assert!(clean(&out, "voice server (down)").contains("<redacted>@"));
    let fake = FakeCloning::start(Kind::Chatterbox, Default::default()).await;
    let up = with_password(&fake.url());
    let out = headroom(&["voice", "server"], &[("HEADROOM_CLONING_URL", &up)]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(clean(&out, "voice server (up)").contains("<redacted>@"));

    // A project spoken in a cloned voice: the take's label (saved in project.json and printed)
    // names the server without its password.
    let dir = tempfile::tempdir().unwrap();
    let projects = dir.path().join("projects");
    let voices = dir.path().join("voices");
    let env = [
        ("HEADROOM_CLONING_URL", up.as_str()),
        ("HEADROOM_PROJECTS_DIR", projects.to_str().unwrap()),
        ("HEADROOM_VOICES_DIR", voices.to_str().unwrap()),
    ];
    let clip = dir.path().join("ref.wav");
    assert!(std::process::Command::new("espeak-ng")
        .arg("-w")
        .arg(&clip)
        .arg("When the morning train was late again, the whole platform sighed at once. A man with a red umbrella checked his watch.")
        .status()
        .unwrap()
        .success());
    let out = headroom(&["voice", "add", "Petra", clip.to_str().unwrap()], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = headroom(&["project", "create", "Talk"], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let manifest = projects.join("talk").join("project.json");
    let mut project: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    project["language"] = "en".into();
    project["duration_secs"] = 2.0.into();
    project["segments"] = serde_json::json!([{"start": 0.0, "end": 1.8, "text": "Hello there."}]);
    std::fs::write(&manifest, serde_json::to_vec(&project).unwrap()).unwrap();
    let out = headroom(
        &["project", "speak", "Talk", "--voice", "Petra", "--json"],
        &env,
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        clean(&out, "project speak").contains("<redacted>@"),
        "{}",
        text(&out.stdout)
    );
    let saved = std::fs::read_to_string(&manifest).unwrap();
    assert!(saved.contains("cloned by"), "{saved}");
    for secret in secrets {
        assert!(
            !saved.contains(secret),
            "project.json holds a secret: {saved}"
        );
    }

    // A remote transcription server that is down.
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/interview.flac");
    let server = with_password(&closed_port_url()) + "?api_key=K3Y-value";
    let out = headroom(&["transcribe", sample, "--server-url", &server], &[]).await;
    assert!(!out.status.success());
    clean(&out, "transcribe --server-url");

    // serve's start-up lines, with the upstream down.
    let upstream = with_password(&closed_port_url()) + "?api_key=K3Y-value";
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["serve", "--listen", "127.0.0.1:0", "--upstream", &upstream])
        .env("HEADROOM_CONFIG", empty_config())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
    let mut seen = String::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("serving http://") {
            break;
        }
    }
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    assert!(seen.contains("serving http://"), "{seen}");
    assert!(seen.contains("<redacted>"), "{seen}");
    for secret in secrets {
        assert!(!seen.contains(secret), "serve printed a secret: {seen}");
    }
}

#[test]
fn a_reader_that_closes_the_pipe_ends_the_cli_quietly() {
    use std::io::Read;
    // `headroom cleanup long.txt --no-llm | head -c 1`: far more than a pipe holds, and the
    // reader goes away after one byte.
    let dir = tempfile::tempdir().unwrap();
    let long = dir.path().join("long.txt");
    std::fs::write(
        &long,
        "So, um, we we recorded the the birds at dawn.\n".repeat(8000),
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["cleanup", long.to_str().unwrap(), "--no-llm"])
        .env("HEADROOM_CONFIG", empty_config())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{stderr}"
    );
    use std::os::unix::process::ExitStatusExt;
    // Ended by SIGPIPE, as `ls | head` ends `ls`.
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
}

#[tokio::test]
async fn nothing_goes_to_another_machine_without_consent() {
    // `.invalid` never resolves: were the check bypassed, nothing could be reached either.
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/interview.flac");
    let refused = |out: &Output, what: &str, origin: &str| {
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{what}: {stderr}");
        assert!(
            stderr.contains("is not on this machine")
                && stderr.contains(&format!("--allow-remote {origin}")),
            "{what}: {stderr}"
        );
    };
    let out = headroom(
        &[
            "cleanup",
            SAMPLE,
            "--llm-url",
            "http://gpu.invalid:8000/v1",
            "--policy",
            "reject",
        ],
        &[],
    )
    .await;
    refused(&out, "cleanup", "http://gpu.invalid:8000");
    assert!(text(&out.stderr).contains("text"));
    let out = headroom(
        &[
            "transcribe",
            sample,
            "--server-url",
            "https://asr.invalid/v1",
        ],
        &[],
    )
    .await;
    refused(&out, "transcribe --server-url", "https://asr.invalid");
    assert!(text(&out.stderr).contains("audio"));
    let out = headroom(
        &["voice", "server"],
        &[("HEADROOM_CLONING_URL", "http://clone.invalid:4123")],
    )
    .await;
    refused(&out, "voice server", "http://clone.invalid:4123");
    assert!(text(&out.stderr).contains("text and voice clips"));
    let out = headroom(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "http://gpu.invalid:8000/v1",
        ],
        &[],
    )
    .await;
    refused(&out, "serve", "http://gpu.invalid:8000");

    // Allowed, the request is made (and fails here only because the name does not resolve).
    let out = headroom(
        &[
            "cleanup",
            SAMPLE,
            "--llm-url",
            "http://gpu.invalid:8000/v1",
            "--policy",
            "reject",
            "--allow-remote",
            "http://gpu.invalid:8000",
        ],
        &[],
    )
    .await;
    assert!(
        !text(&out.stderr).contains("is not on this machine"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test]
async fn bench_long_runs_headroom_itself_and_reports_its_time_memory_and_speakers() {
    headroom_tests::models_dir();
    // Its smallest form: one conversation of 20 s between two voices quick to make. The
    // shape of the report is checked, and that what it measured is a real process.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("long.json");
    let out = headroom(
        &[
            "bench",
            "long",
            "--minutes",
            "0.33",
            "--voices",
            "piper-joe,en-us+m7",
            "--json",
            json.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["speakers"], 2, "{report}");
    assert_eq!(
        report["voices"],
        serde_json::json!(["piper-joe", "en-us+m7"])
    );
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{report}");
    let row = &rows[0];
    assert!(row["audio_secs"].as_f64().unwrap() >= 19.8, "{row}");
    for run in [&row["transcribe"], &row["with_speakers"]["run"]] {
        // A process that loaded a speech model: tens of MiB at least, and some time.
        assert!(run["peak_mib"].as_f64().unwrap() > 30.0, "{row}");
        assert!(run["secs"].as_f64().unwrap() > 0.0, "{row}");
        assert!(run["real_time"].as_f64().unwrap() > 0.0, "{row}");
    }
    let speakers = &row["with_speakers"];
    assert!(speakers["speakers_found"].as_u64().unwrap() >= 1, "{row}");
    let der = speakers["der"]["der"].as_f64().unwrap();
    assert!(der.is_finite() && der >= 0.0, "{row}");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("| 0.33 min | "), "{stdout}");
}

#[tokio::test]
async fn bench_isolation_reports_each_probe_idle_and_under_batch_work() {
    headroom_tests::models_dir();
    // Its smallest form: one probe under one kind of batch work, two runs each. The shape of
    // the report is checked, not the times.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("isolation.json");
    let clip = concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/interview.flac");
    let out = headroom(
        &[
            "bench",
            "isolation",
            "--probes",
            "espeak",
            "--batch",
            "transcription",
            "--runs",
            "2",
            "--alone-secs",
            "1",
            "--pause-ms",
            "0",
            "--clip",
            clip,
            "--json",
            json.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["runs"], 2, "{report}");
    assert_eq!(report["goal"]["p50_ratio"], 1.15);
    assert_eq!(report["goal"]["p95_ratio"], 1.3);
    assert_eq!(report["skipped"], serde_json::json!([]));
    let probes = report["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 1, "{report}");
    assert_eq!(probes[0]["probe"], "espeak");
    assert_eq!(probes[0]["idle"]["count"], 2);
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{report}");
    let row = &results[0];
    assert_eq!(row["probe"], "espeak");
    assert_eq!(row["batch"], "transcription");
    assert_eq!(row["idle"]["count"], 2);
    assert_eq!(row["during"]["count"], 2);
    for key in ["p50_ratio", "p95_ratio"] {
        assert!(row[key].as_f64().is_some_and(|r| r > 0.0), "{row}");
    }
    assert_eq!(report["all_within_goal"], row["within_goal"], "{report}");
    let batch = report["batch"].as_array().unwrap();
    assert_eq!(batch.len(), 1, "{report}");
    assert_eq!(batch[0]["kind"], "transcription");
    assert_eq!(batch[0]["work_unit"], "transcriptions of the clip");
    for key in ["alone_work", "during_work", "during_window_secs"] {
        assert!(batch[0][key].as_f64().is_some(), "{key}: {report}");
    }
    assert!(batch[0]["units_during"].as_u64().unwrap() >= 1);
    let slowdown = &batch[0]["slowdown"];
    assert!(
        slowdown.is_null() || slowdown["ratio"].as_f64().is_some(),
        "{report}"
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("| speak a line, espeak-ng | batch transcription |"),
        "{stdout}"
    );
}

#[tokio::test]
async fn a_projects_speakers_are_renamed_merged_and_split_from_the_command_line() {
    use headroom_speech::asr::{Segment, Speaker, Transcript};
    use headroom_workstation::projects::{Project, ProjectStore};
    let dir = tempfile::tempdir().unwrap();
    let projects = dir.path().to_str().unwrap().to_string();
    let env = [("HEADROOM_PROJECTS_DIR", projects.as_str())];
    // A transcript with two speakers, typed (no speech model needed).
    let store = ProjectStore::new(dir.path());
    let project = store.create("Talk").unwrap();
    store
        .update(&project.id, |p| {
            p.set_transcript(&Transcript {
                speakers: vec![Speaker::numbered(0), Speaker::numbered(1)],
                language: Some("en".into()),
                duration: 6.0,
                segments: [("S1", "Hello there, how are you?"), ("S2", "Fine thanks.")]
                    .iter()
                    .enumerate()
                    .map(|(i, (speaker, text))| Segment {
                        speaker: Some(speaker.to_string()),
                        ..Segment::new(i as f64 * 3.0, i as f64 * 3.0 + 2.5, *text)
                    })
                    .collect(),
            });
            Ok::<_, headroom_workstation::projects::ProjectError>(())
        })
        .unwrap();

    let out = headroom(
        &["project", "speakers", "talk", "--rename", "S2=Grace"],
        &env,
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("Grace: Fine thanks."),
        "{}",
        text(&out.stdout)
    );
    let out = headroom(
        &[
            "project",
            "split",
            "talk",
            "1",
            "--word",
            "3",
            "--speaker",
            "new",
        ],
        &env,
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("Speaker 3: how are you?"),
        "{}",
        text(&out.stdout)
    );
    let out = headroom(
        &["project", "speakers", "talk", "--merge", "S3:S1", "--json"],
        &env,
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let speakers: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(speakers.as_array().unwrap().len(), 2, "{speakers}");
    let project: Project = store.open("talk").unwrap();
    assert_eq!(project.segments[1].speaker.as_deref(), Some("S1"));
    let out = headroom(&["project", "settings", "talk", "--speakers", "auto"], &env).await;
    assert!(
        text(&out.stdout).contains("speakers auto"),
        "{}",
        text(&out.stdout)
    );
    let out = headroom(&["project", "settings", "talk", "--speakers", "12"], &env).await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("from 1 to 10"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test]
async fn serve_refuses_a_capacity_count_that_matches_no_upstream_count() {
    let out = headroom(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &closed_port_url(),
            "--upstream",
            &closed_port_url(),
            "--upstream-capacity",
            "1",
            "--upstream-capacity",
            "2",
            "--upstream-capacity",
            "3",
        ],
        &[],
    )
    .await;
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--upstream-capacity was given 3 times for 2 upstream(s)"),
        "{stderr}"
    );
}

/// A recording of `minutes`: the sample's first ten seconds of speech at its start and its
/// end, and quiet room noise between (16 kHz, so nothing is resampled).
fn long_recording(dir: &Path, minutes: f64) -> PathBuf {
    use headroom_speech::audio::{decode_file, write_wav, Audio, DecodeLimits};
    let clip = concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/interview.flac");
    let speech = decode_file(Path::new(clip), DecodeLimits::default())
        .unwrap()
        .to_16k()
        .unwrap();
    let speech = &speech.samples[..10 * 16_000];
    let total = (minutes * 60.0 * 16_000.0) as usize;
    let mut noise = 0x2545_f491u32;
    let mut samples: Vec<f32> = (0..total)
        .map(|_| {
            noise ^= noise << 13;
            noise ^= noise >> 17;
            noise ^= noise << 5;
            (noise as f32 / u32::MAX as f32 - 0.5) * 2e-3
        })
        .collect();
    samples[..speech.len()].copy_from_slice(speech);
    samples[total - speech.len()..].copy_from_slice(speech);
    let path = dir.join(format!("{minutes}-minutes.wav"));
    write_wav(
        &path,
        &Audio {
            samples,
            sample_rate: 16_000,
        },
    )
    .unwrap();
    path
}

#[test]
fn transcribing_an_hour_holds_no_more_memory_than_transcribing_a_minute() {
    headroom_tests::models_dir();
    let dir = tempfile::tempdir().unwrap();
    let minute = long_recording(dir.path(), 1.0);
    let hour = long_recording(dir.path(), 60.0);
    let peak_mib = |wav: &Path, minutes: f64, speakers: bool| {
        let mut tool = headroom_base::process::Tool::new(env!("CARGO_BIN_EXE_headroom"))
            .path_option("--config", &empty_config())
            .subcommand("transcribe")
            .option("--format", "json");
        if speakers {
            tool = tool.option("--speakers", "auto");
        }
        let finished = tool.operands([wav]).watching_memory().run(b"").unwrap();
        assert!(finished.status.success(), "{}", text(&finished.stderr));
        let transcript: serde_json::Value = serde_json::from_slice(&finished.stdout).unwrap();
        let segments = transcript["segments"].as_array().unwrap();
        // The speech at both ends is heard, so the whole length was gone through.
        let last_end = segments.last().unwrap()["end"].as_f64().unwrap();
        assert!(last_end > minutes * 60.0 - 12.0, "{transcript}");
        if speakers {
            assert!(
                segments.iter().all(|s| s["speaker"].is_string()),
                "{transcript}"
            );
        }
        finished.peak_rss_kib.unwrap() as f64 / 1024.0
    };
    for speakers in [false, true] {
        let short = peak_mib(&minute, 1.0, speakers);
        let long = peak_mib(&hour, 60.0, speakers);
        eprintln!(
            "peak memory (speakers: {speakers}): a minute {short:.0} MiB, an hour {long:.0} MiB"
        );
        // An hour at 16 kHz is 220 MiB of samples: held, it would show; spooled, it does not.
        assert!(
            long < short + 40.0,
            "transcribing an hour peaked at {long:.0} MiB, a minute at {short:.0} MiB (speakers: {speakers})"
        );
    }
}

/// The Python with OpenTimelineIO and its adapters (scripts/install-test-deps).
fn otio_python() -> PathBuf {
    let python = std::env::var_os("HEADROOM_OTIO_PYTHON").unwrap_or_else(|| {
        panic!(
            "HEADROOM_OTIO_PYTHON is not set: run the tests with scripts/test, which installs \
             OpenTimelineIO (or eval \"$(scripts/install-test-deps)\" first)"
        )
    });
    PathBuf::from(python)
}

#[tokio::test]
async fn a_recording_is_edited_by_its_words_and_its_cut_list_reads_back_in_opentimelineio() {
    headroom_tests::models_dir();
    let dir = tempfile::tempdir().unwrap();
    let projects = dir.path().join("projects");
    let projects_env = projects.to_str().unwrap().to_string();
    let env = [("HEADROOM_PROJECTS_DIR", projects_env.as_str())];
    let run = |args: Vec<String>| async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        headroom(&args, &env).await
    };
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let json = |out: &Output| -> serde_json::Value {
        assert!(out.status.success(), "{}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };

    // A recording with two fillers and a long pause (espeak-ng reads the text on stdin).
    let wav = dir.path().join("take.wav");
    let mut speak = std::process::Command::new("espeak-ng")
        .args(["--stdin", "-w"])
        .arg(&wav)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("espeak-ng runs");
    use std::io::Write;
    speak
        .stdin
        .take()
        .unwrap()
        .write_all(
            b"So, um, I think that the answer is, uh, yes. [[_:]] [[_:]] [[_:]] Well, we went \
              to the harbour and we saw the ferries.",
        )
        .unwrap();
    assert!(speak.wait().unwrap().success());

    json(&run(args(&["project", "create", "Take", "--json"])).await);
    json(
        &run(args(&[
            "project",
            "transcribe",
            "take",
            wav.to_str().unwrap(),
            "--json",
        ]))
        .await,
    );
    let source = projects.join("take/audio/take.wav");
    let original = std::fs::read(&source).unwrap();

    // Before an edit: the fillers are listed, none cut.
    let shown = json(&run(args(&["project", "edit", "take", "--json"])).await);
    let fillers = shown["fillers"].as_array().unwrap().clone();
    let texts: Vec<&str> = fillers
        .iter()
        .map(|f| f["word"]["text"].as_str().unwrap())
        .collect();
    assert!(
        texts.len() >= 2 && texts.iter().any(|t| t.starts_with("um")),
        "{shown}"
    );
    assert!(fillers.iter().all(|f| f["cut"] == false));
    assert!(shown["edit"].is_null());

    let edited = json(
        &run(args(&[
            "project",
            "edit",
            "take",
            "--cut-fillers",
            "--max-pause",
            "0.4",
            "--json",
        ]))
        .await,
    );
    assert!(
        edited["fillers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["cut"] == true),
        "{edited}"
    );
    let original_secs = edited["original_secs"].as_f64().unwrap();
    let edited_secs = edited["edited_secs"].as_f64().unwrap();
    assert!(
        edited_secs < original_secs - 0.8,
        "fillers and a pause go: {edited}"
    );
    let kept: Vec<(f64, f64)> = edited["edit"]["list"]["kept"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["start"].as_f64().unwrap(), r["end"].as_f64().unwrap()))
        .collect();

    // A filler kept by hand stays; the edit before is a version.
    let first = fillers[0]["word"]["id"].as_str().unwrap().to_string();
    let kept_one = json(
        &run(args(&[
            "project", "edit", "take", "--keep", &first, "--json",
        ]))
        .await,
    );
    assert_eq!(kept_one["fillers"][0]["cut"], false, "{kept_one}");
    let versions = json(&run(args(&["project", "versions", "take", "--json"])).await);
    assert_eq!(versions[0]["reason"], "before changing the edit");
    let again = json(
        &run(args(&[
            "project",
            "edit",
            "take",
            "--clear",
            "--cut-fillers",
            "--max-pause",
            "0.4",
            "--json",
        ]))
        .await,
    );
    assert_eq!(
        again["edit"]["list"], edited["edit"]["list"],
        "the same ask, the same edit"
    );

    // A word struck by its id goes (the first word, "So,").
    let struck = json(
        &run(args(&[
            "project", "edit", "take", "--strike", "1:1", "--json",
        ]))
        .await,
    );
    assert_eq!(
        struck["words_cut"],
        again["words_cut"].as_u64().unwrap() + 1,
        "{struck}"
    );
    assert!(
        struck["edit"]["list"]["kept"][0]["start"].as_f64().unwrap() > 0.2,
        "{struck}"
    );
    let out = run(args(&[
        "project",
        "versions",
        "take",
        "--restore",
        versions[0]["id"].as_str().unwrap(),
    ]))
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let restored = json(&run(args(&["project", "edit", "take", "--json"])).await);
    assert_eq!(
        restored["edit"]["list"], edited["edit"]["list"],
        "{restored}"
    );

    // Bad asks are refused with what to do, and change nothing.
    let out = run(args(&["project", "edit", "take", "--strike", "99:1"])).await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("no word \"99:1\""),
        "{}",
        text(&out.stderr)
    );
    let out = run(args(&["project", "edit", "take", "--max-pause", "0.01"])).await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("pause limit"),
        "{}",
        text(&out.stderr)
    );
    let out = run(args(&["project", "edit", "take", "--cut", "3-2"])).await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("the end must come after"),
        "{}",
        text(&out.stderr)
    );
    let unchanged = json(&run(args(&["project", "edit", "take", "--json"])).await);
    assert_eq!(
        unchanged["edit"], restored["edit"],
        "a refused ask changes nothing"
    );
    let out = run(args(&[
        "project", "export", "take", "--edited", "--format", "aac",
    ]))
    .await;
    assert!(
        text(&out.stderr).contains("unknown format"),
        "{}",
        text(&out.stderr)
    );

    // The edited recording: as long as its kept ranges (to the sample at its rate), and heard
    // again without a filler.
    let out_wav = dir.path().join("edited.wav");
    let out = run(args(&[
        "project",
        "export",
        "take",
        "--edited",
        "--format",
        "wav",
        "--out",
        out_wav.to_str().unwrap(),
    ]))
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let length = wav_seconds(&out_wav);
    let joins = kept.len().saturating_sub(1) as f64;
    assert!(
        (length - edited_secs).abs() <= 0.001 * joins.max(1.0),
        "{length} s against {edited_secs} s"
    );
    let heard = run(args(&["transcribe", out_wav.to_str().unwrap()])).await;
    let heard = text(&heard.stdout).to_lowercase();
    assert!(
        heard.contains("answer") && heard.contains("harbo"),
        "{heard}"
    );
    for filler in ["um", "uh"] {
        assert!(
            !heard
                .split(|c: char| !c.is_alphanumeric())
                .any(|w| w == filler),
            "{filler} heard in {heard}"
        );
    }
    assert_eq!(
        std::fs::read(&source).unwrap(),
        original,
        "the original is never changed"
    );

    // The cut list in each format, read back by OpenTimelineIO, keeps what Headroom keeps to
    // within a frame, one clip after another on the timeline.
    // Each clip sits where its range starts in the edited audio (to the nearest frame), and
    // starts in the source where its range does.
    let fps: f64 = 25.0;
    let mut audio: f64 = 0.0;
    let framed: Vec<(f64, f64, f64)> = kept
        .iter()
        .filter_map(|&(s, e)| {
            let record = (audio * fps).round();
            audio += e - s;
            let frames = (audio * fps).round() - record;
            (frames > 0.0).then_some(((s * fps).round(), frames, record))
        })
        .collect();
    for (format, adapter) in [
        ("edl", "cmx_3600"),
        ("xmeml", "fcp_xml"),
        ("fcpxml", "fcpx_xml"),
        ("otio", "otio_json"),
    ] {
        let file = dir.path().join(format!("cuts.{format}"));
        let out = run(args(&[
            "project",
            "export",
            "take",
            "--edited",
            "--format",
            format,
            "--fps",
            "25",
            "--out",
            file.to_str().unwrap(),
        ]))
        .await;
        assert!(out.status.success(), "{format}: {}", text(&out.stderr));
        let read = std::process::Command::new(otio_python())
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/otio_read.py"))
            .arg(&file)
            .args([adapter, "25"])
            .output()
            .expect("python runs");
        assert!(read.status.success(), "{format}: {}", text(&read.stderr));
        let read: serde_json::Value = serde_json::from_slice(&read.stdout).unwrap();
        let clips = read["clips"].as_array().unwrap();
        assert_eq!(clips.len(), framed.len(), "{format}: {read}");
        for (clip, &(start, frames, record)) in clips.iter().zip(&framed) {
            let got = (
                clip["source_in"].as_f64().unwrap(),
                clip["frames"].as_f64().unwrap(),
                clip["record_in"].as_f64().unwrap(),
            );
            assert_eq!(got, (start, frames, record), "{format}: {clip}");
        }
        assert!(
            clips[0]["media"].as_str().unwrap().contains("take.wav"),
            "{format}: {read}"
        );
    }
}
