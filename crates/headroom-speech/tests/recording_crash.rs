//! A recording killed with SIGKILL in the middle of writing keeps what it had written: the
//! test runs itself as the recording process, kills it once two seconds are on disk, and
//! repairs the `.partial` file it left.

use headroom_speech::audio::{partial_path, repair_partial, WavRecorder};
use std::path::Path;
use std::time::{Duration, Instant};

const CHILD: &str = "HEADROOM_RECORDING_CHILD";

fn tone(start: usize, n: usize) -> Vec<f32> {
    (start..start + n)
        .map(|i| (i as f32 * 0.05).sin() * 0.5)
        .collect()
}

#[test]
fn a_recording_killed_mid_write_keeps_what_it_wrote() {
    if let Some(path) = std::env::var_os(CHILD) {
        // The recording process: a tone at ten times real time, until it is killed.
        let mut recorder = WavRecorder::create(Path::new(&path), 16_000).unwrap();
        let mut written = 0;
        loop {
            recorder.write(&tone(written, 1600)).unwrap();
            written += 1600;
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("take.wav");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_recording_killed_mid_write_keeps_what_it_wrote",
            "--nocapture",
        ])
        .env(CHILD, &path)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let partial = partial_path(&path);
    // Polling another process's file: there is nothing to wait on but the file itself.
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        let synced = hound::WavReader::open(&partial)
            .map(|r| r.duration())
            .unwrap_or(0);
        if synced >= 32_000 {
            break;
        }
        assert!(Instant::now() < give_up, "the recording never reached 2 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no destructor runs, nothing is finalized
    child.wait().unwrap();
    assert!(!path.exists(), "the recording never finished");
    let on_disk = std::fs::metadata(&partial).unwrap().len();

    let repaired = repair_partial(&partial).unwrap().unwrap();
    assert_eq!(repaired, path);
    let mut reader = hound::WavReader::open(&path).unwrap();
    let frames = reader.duration() as u64;
    assert!(frames >= 32_000, "{frames}");
    assert!(
        on_disk - 44 - frames * 2 < 2,
        "every whole sample on disk is kept"
    );
    let expected = tone(0, frames as usize);
    let samples: Vec<i16> = reader.samples::<i16>().map(Result::unwrap).collect();
    assert_eq!(samples.len() as u64, frames);
    for (got, want) in samples.iter().zip(&expected).step_by(997) {
        let want = (want * i16::MAX as f32).round() as i16;
        assert_eq!(*got, want);
    }
}
