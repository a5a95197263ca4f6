//! The desktop's workflows without a window: the workstation over a real project folder, the
//! real transcriber and synthesizer, and a controllable OpenAI-compatible server on loopback.

use headroom_base::consent::RemoteConsent;
use headroom_base::fsutil::BeneathError;
use headroom_core::admission::{Lane, RejectReason};
use headroom_core::config::Config;
use headroom_services::batch::FailureReason;
use headroom_services::transcription_fleet::ServerChoice;
use headroom_speech::asr::export::ExportFormat;
use headroom_tests::fake_upstream::{Behavior, FakeUpstream};
use headroom_workstation::batch::{BatchServers, FileTranscription};
use headroom_workstation::jobs::JobKind;
use headroom_workstation::projects::{
    Decision, Project, ProjectEntry, ProjectError, ProjectSettings, ProjectStore, SuggestionSource,
};
use headroom_workstation::resume::JobOutcome;
use headroom_workstation::workstation::{Workstation, WorkstationError};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

fn scratch(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "headroom-ws-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn workstation(dir: &std::path::Path, url: &str) -> Arc<Workstation> {
    let mut config = Config::default();
    config.llm.url = url.to_string();
    Workstation::new(
        ProjectStore::new(dir.join("projects")),
        headroom_tests::services(config),
        Some(dir.join("config.toml")),
    )
}

fn sample() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../samples/interview.flac")
}

async fn transcribed(ws: &Workstation, name: &str) -> String {
    let project = ws.store().create(name).unwrap();
    let project = ws
        .transcribe(
            &project.id,
            &sample(),
            None,
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(project.segments.len() >= 3, "{:?}", project.segments);
    project.id
}

#[tokio::test]
async fn cleanup_off_sends_nothing_and_on_streams_from_the_server() {
    let dir = scratch("cleanup");
    let fake = FakeUpstream::start(Behavior::Echo, 4096).await;
    let ws = workstation(&dir, &fake.base_url());
    let id = transcribed(&ws, "Talk").await;

    let quiet = ws
        .clean_segment(&id, 0, false, &CancellationToken::new(), &|_| {})
        .await
        .unwrap();
    assert_eq!(quiet.source, SuggestionSource::RuleBased);
    assert_eq!(quiet.note, None);
    assert_eq!(fake.requests(), 0, "LLM cleanup is off by default");

    ws.update_project(&id, move |p| {
        p.settings.llm_cleanup = true;
        Ok(())
    })
    .await
    .unwrap();
    let deltas = Arc::new(AtomicU32::new(0));
    let counted = deltas.clone();
    let suggestion = ws
        .clean_segment(&id, 1, false, &CancellationToken::new(), &move |e| {
            assert_eq!(e.segment, 1);
            if matches!(e.event, headroom_core::cleanup::CleanupEvent::Delta { .. }) {
                counted.fetch_add(1, Ordering::Relaxed);
            }
        })
        .await
        .unwrap();
    assert_eq!(suggestion.source, SuggestionSource::Llm);
    assert!(deltas.load(Ordering::Relaxed) > 1, "the reply streamed");
    assert_eq!(fake.requests(), 1);

    // Accepted text is what synthesis speaks, and it is on disk.
    let project = ws.decide(&id, Some(1), Decision::Accepted).await.unwrap();
    assert_eq!(project.speech_text(Some(1)).unwrap(), suggestion.text);
    let reopened = ws.store().open(&id).unwrap();
    assert_eq!(
        reopened.segments[1].suggestion.as_ref().unwrap().decision,
        Decision::Accepted
    );
    let take = ws
        .synthesize(&id, Some(1), CancellationToken::new())
        .await
        .unwrap();
    let wav = hound::WavReader::open(ws.project_file(&id, &take.file).unwrap()).unwrap();
    assert!(wav.duration() > 0);
    assert_eq!(ws.store().open(&id).unwrap().speech.len(), 1);

    let srt = ws.export(&id, ExportFormat::Srt).await.unwrap();
    assert!(std::fs::read_to_string(srt).unwrap().contains(" --> "));
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn a_full_text_lane_is_a_typed_rejection_and_the_rules_still_work() {
    let dir = scratch("flood");
    let gate = Arc::new(Notify::new());
    let fake = FakeUpstream::start(Behavior::HoldHeaders(gate.clone()), 4096).await;
    let ws = workstation(&dir, &fake.base_url());
    let id = transcribed(&ws, "Flood").await;
    ws.update_project(&id, move |p| {
        p.settings.llm_cleanup = true;
        Ok(())
    })
    .await
    .unwrap();

    let cancel = CancellationToken::new();
    let held: Vec<_> = (0..2)
        .map(|i| {
            let ws = ws.clone();
            let id = id.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move { ws.clean_segment(&id, i, false, &cancel, &|_| {}).await })
        })
        .collect();
    let lane = ws
        .text_lane(&fake.base_url(), &RemoteConsent::none())
        .unwrap();
    headroom_tests::until("both held requests to take their slots", || {
        std::future::ready(lane.snapshot().occupancy.in_flight >= 2)
    })
    .await;
    let refused = ws
        .clean_segment(&id, 2, false, &CancellationToken::new(), &|_| {})
        .await
        .unwrap_err();
    let rejection = refused.rejection().expect("a rejection").clone();
    assert_eq!(rejection.reason, RejectReason::TextLaneFull);
    assert_eq!((rejection.in_flight, rejection.limit), (2, 2));
    assert!(ws.store().open(&id).unwrap().segments[2]
        .suggestion
        .is_none());

    // The user's "use rule-based cleanup" choice sends nothing. (The two held requests hold
    // their slots from admission; wait until they have reached the server too.)
    headroom_tests::until("both held requests to reach the server", || {
        std::future::ready(fake.requests() >= 2)
    })
    .await;
    let before = fake.requests();
    let rules = ws
        .clean_segment(&id, 2, true, &CancellationToken::new(), &|_| {})
        .await
        .unwrap();
    assert_eq!(rules.source, SuggestionSource::RuleBased);
    assert_eq!(fake.requests(), before);

    // Cancelling frees both slots.
    cancel.cancel();
    for task in held {
        assert!(matches!(
            task.await.unwrap(),
            Err(WorkstationError::Cancelled)
        ));
    }
    assert_eq!(lane.snapshot().occupancy.in_flight, 0);
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn settings_are_saved_atomically_and_keep_an_api_key_already_in_the_file() {
    let dir = scratch("settings");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    std::fs::write(
        dir.join("config.toml"),
        "[llm]\nurl = \"http://127.0.0.1:9/v1\"\napi_key = \"sk-keep-me\"\n",
    )
    .unwrap();
    let mut config = ws.config();
    config.text_lane.max_in_flight = 3;
    ws.update_config(config).unwrap();
    let saved = std::fs::read_to_string(dir.join("config.toml")).unwrap();
    assert!(saved.contains("max_in_flight = 3"), "{saved}");
    assert!(saved.contains("sk-keep-me"));
    let reloaded = Config::from_file(&dir.join("config.toml")).unwrap();
    assert_eq!(reloaded.text_lane.max_in_flight, 3);

    let mut bad = ws.config();
    bad.text_lane.total_secs = 0.0;
    assert!(matches!(
        ws.update_config(bad),
        Err(WorkstationError::Config(_))
    ));
    assert_eq!(
        Config::from_file(&dir.join("config.toml"))
            .unwrap()
            .text_lane
            .max_in_flight,
        3,
        "a refused change leaves the file as it was"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn every_upstream_of_the_configured_text_lane_needs_consent_not_only_the_first() {
    let dir = scratch("fleet-consent");
    let fake = FakeUpstream::start(Behavior::Echo, 4096).await;
    let mut config = Config::default();
    config.llm.url = fake.base_url();
    // 192.0.2.1 is TEST-NET-1: another machine, behind the same lane as the local server.
    config.llm.upstreams = vec![headroom_core::config::UpstreamSettings {
        url: "http://192.0.2.1:8000/v1".into(),
        capacity: None,
    }];
    let ws = Workstation::new(
        ProjectStore::new(dir.join("projects")),
        headroom_tests::services(config),
        None,
    );
    let id = transcribed(&ws, "Fleet").await;
    ws.update_project(&id, |p| {
        p.settings.llm_cleanup = true;
        Ok(())
    })
    .await
    .unwrap();
    let refused = ws
        .clean_segment(&id, 0, false, &CancellationToken::new(), &|_| {})
        .await
        .unwrap_err();
    let WorkstationError::Rejected(r) = refused else {
        panic!("{refused}")
    };
    assert_eq!(r.reason, RejectReason::RemoteNotAllowed);
    assert!(r.detail.as_deref().unwrap().contains("192.0.2.1"), "{r:?}");
    assert_eq!(
        fake.requests(),
        0,
        "nothing was sent, not even to the local one"
    );
    // Allowed in the project, the lane may use both.
    ws.update_project(&id, |p| {
        p.settings.remote_text_allowed = vec!["http://192.0.2.1:8000".into()];
        Ok(())
    })
    .await
    .unwrap();
    ws.clean_segment(&id, 0, false, &CancellationToken::new(), &|_| {})
        .await
        .unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn a_projects_own_servers_share_its_text_lane_and_each_needs_consent() {
    let dir = scratch("project-fleet");
    let a = FakeUpstream::start(Behavior::Echo, 4096).await;
    let b = FakeUpstream::start(Behavior::Echo, 4096).await;
    let ws = workstation(&dir, &a.base_url());
    let id = transcribed(&ws, "Own fleet").await;
    let (a_url, b_url) = (a.base_url(), b.base_url());
    let project = ws
        .update_project(&id, move |p| {
            p.settings.llm_cleanup = true;
            p.settings.server_url = Some(a_url);
            p.settings.upstreams = vec![b_url, "http://192.0.2.1:8000/v1".into()];
            Ok(())
        })
        .await
        .unwrap()
        .0;
    assert_eq!(ws.server_urls_for(&project).len(), 3);
    let refused = ws
        .clean_segment(&id, 0, false, &CancellationToken::new(), &|_| {})
        .await
        .unwrap_err();
    let WorkstationError::Rejected(r) = refused else {
        panic!("{refused}")
    };
    assert_eq!(r.reason, RejectReason::RemoteNotAllowed);
    assert!(r.detail.as_deref().unwrap().contains("192.0.2.1"), "{r:?}");
    assert_eq!(a.requests() + b.requests(), 0);
    // Consent to one server elsewhere is not consent to another beside it in the same lane.
    let b_url = b.base_url();
    let project = ws
        .update_project(&id, move |p| {
            p.settings.upstreams = vec![
                b_url,
                "http://192.0.2.1:8000/v1".into(),
                "http://192.0.2.2:8000/v1".into(),
            ];
            p.settings.remote_text_allowed = vec!["http://192.0.2.1:8000".into()];
            Ok(())
        })
        .await
        .unwrap()
        .0;
    let destination = ws.text_destination(&project);
    assert_eq!(
        destination.origins,
        vec!["http://192.0.2.1:8000", "http://192.0.2.2:8000"]
    );
    assert!(!destination.allowed);
    let refused = ws
        .clean_segment(&id, 0, false, &CancellationToken::new(), &|_| {})
        .await
        .unwrap_err();
    let WorkstationError::Rejected(r) = refused else {
        panic!("{refused}")
    };
    assert!(r.detail.as_deref().unwrap().contains("192.0.2.2"), "{r:?}");
    assert_eq!(a.requests() + b.requests(), 0);

    let b_url = b.base_url();
    ws.update_project(&id, move |p| {
        p.settings.upstreams = vec![b_url];
        Ok(())
    })
    .await
    .unwrap();
    // Two segments: the lane over both servers gives the second to the one not yet used
    // (idle both, the first has a first-token time against it; at once, the least busy).
    let cancel = CancellationToken::new();
    let (one, two) = tokio::join!(
        ws.clean_segment(&id, 0, false, &cancel, &|_| {}),
        ws.clean_segment(&id, 1, false, &cancel, &|_| {}),
    );
    one.unwrap();
    two.unwrap();
    assert!(
        a.requests() >= 1 && b.requests() >= 1,
        "{} and {}",
        a.requests(),
        b.requests()
    );
    let lanes = ws.lanes().unwrap();
    let fleet = lanes
        .iter()
        .find(|l| l.snapshot.upstreams.len() == 2)
        .expect("the project's lane over both servers is listed");
    assert_eq!(fleet.snapshot.occupancy.limit, 4);
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn a_transcript_goes_to_another_machine_only_with_the_projects_consent() {
    let dir = scratch("consent");
    let fake = FakeUpstream::start(Behavior::Echo, 4096).await;
    let ws = workstation(&dir, &fake.base_url());
    let id = transcribed(&ws, "Private").await;
    // 192.0.2.1 is TEST-NET-1: another machine, which nothing here may reach.
    let elsewhere = "http://user:pw@192.0.2.1:8000/v1";
    let project = ws
        .update_project(&id, move |p| {
            p.settings.llm_cleanup = true;
            p.settings.server_url = Some(elsewhere.into());
            Ok(())
        })
        .await
        .unwrap()
        .0;
    let destination = ws.text_destination(&project);
    assert!(!destination.on_this_machine && !destination.allowed);
    assert_eq!(destination.url, "http://<redacted>@192.0.2.1:8000/v1");
    assert_eq!(destination.origin, "http://192.0.2.1:8000");
    let refused = ws
        .clean_segment(&id, 0, false, &CancellationToken::new(), &|_| {})
        .await
        .unwrap_err();
    let WorkstationError::Rejected(r) = refused else {
        panic!("{refused}")
    };
    assert_eq!(r.reason, RejectReason::RemoteNotAllowed);
    assert!(
        r.message().contains("would leave this machine"),
        "{}",
        r.message()
    );
    assert!(r.detail.as_deref().unwrap().contains("192.0.2.1"));
    let history = ws.lanes().unwrap();
    assert!(
        history.iter().any(|l| l
            .snapshot
            .rejected_total
            .get(&RejectReason::RemoteNotAllowed)
            == Some(&1)),
        "counted in the lane's history"
    );
    // With consent the request is sent (and fails to connect: nothing is there).
    let project = ws
        .update_project(&id, move |p| {
            p.settings.remote_text_allowed = vec!["http://192.0.2.1:8000".into()];
            Ok(())
        })
        .await
        .unwrap()
        .0;
    assert!(ws.text_destination(&project).allowed);
    let attempted = ws
        .clean_segment(&id, 0, false, &CancellationToken::new(), &|_| {})
        .await
        .unwrap_err();
    let WorkstationError::Rejected(r) = attempted else {
        panic!("{attempted}")
    };
    assert_eq!(r.reason, RejectReason::UpstreamUnavailable);
    // A server on this machine needs no consent.
    let project = ws
        .update_project(&id, move |p| {
            p.settings.server_url = None;
            p.settings.remote_text_allowed = Vec::new();
            Ok(())
        })
        .await
        .unwrap()
        .0;
    assert!(ws.text_destination(&project).on_this_machine);
    ws.clean_segment(&id, 0, false, &CancellationToken::new(), &|_| {})
        .await
        .unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn project_files_stay_inside_the_project_and_imports_must_be_audio() {
    use headroom_workstation::workstation::SaveDestination;
    let dir = scratch("paths");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let id = transcribed(&ws, "Paths").await;
    let folder = ws.store().folder(&id).unwrap();
    let audio = ws.store().open(&id).unwrap().source_audio.unwrap();

    // A copy by a name inside the project, in a folder made for it.
    let copy = ws
        .save_copy(
            &id,
            &audio,
            &SaveDestination::InProject("exports/copy.flac".into()),
        )
        .unwrap();
    assert!(copy.starts_with(folder.canonicalize().unwrap()));
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(sample()).unwrap()
    );
    for escape in ["../escape.flac", "/tmp/escape.flac", ""] {
        let err = ws
            .save_copy(&id, &audio, &SaveDestination::InProject(escape.into()))
            .unwrap_err();
        assert!(
            matches!(err, WorkstationError::OutsideProject { .. }),
            "{escape}: {err}"
        );
    }

    // A symbolic link inside the project that points out of it is not followed, to read
    // or to write.
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "not for the web view").unwrap();
    std::os::unix::fs::symlink(&secret, folder.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(&dir, folder.join("out")).unwrap();
    // Refused by name, whatever it points to.
    let link = |err: &WorkstationError, name: &str| matches!(err, WorkstationError::Project(ProjectError::Beneath(BeneathError::SymbolicLink { link, .. })) if link == name);
    let err = ws.project_file(&id, "link.txt").unwrap_err();
    assert!(link(&err, "link.txt"), "{err}");
    let err = ws
        .save_copy(
            &id,
            &audio,
            &SaveDestination::InProject("out/planted.flac".into()),
        )
        .unwrap_err();
    assert!(link(&err, "out"), "{err}");
    assert!(!dir.join("planted.flac").exists());
    let err = ws
        .save_copy(&id, &audio, &SaveDestination::InProject("link.txt".into()))
        .unwrap_err();
    assert!(link(&err, "link.txt"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&secret).unwrap(),
        "not for the web view"
    );

    // An import that is not audio is refused before anything is copied.
    let not_audio = dir.join("id_rsa");
    std::fs::write(&not_audio, "-----BEGIN OPENSSH PRIVATE KEY-----\n").unwrap();
    let err = ws
        .transcribe(
            &id,
            &not_audio,
            None,
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not an audio format"), "{err}");
    assert!(!folder.join("audio/id_rsa").exists(), "nothing was copied");
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn a_rename_during_a_transcription_keeps_its_result() {
    // The report: renaming a project while it was being transcribed moved its folder, the
    // final save found no project, and the transcript was thrown away.
    let dir = scratch("rename-during");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let project = ws.store().create("Before").unwrap();
    let store = ws.store().clone();
    let id = project.id.clone();
    let renamed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let once = renamed.clone();
    // Another writer (as the app's Projects view would) renames it mid-job.
    let progress = Arc::new(move |_p: f32| {
        if !once.swap(true, Ordering::SeqCst) {
            store.rename(&id, "After").unwrap();
        }
    });
    let project = ws
        .transcribe(
            &project.id,
            &sample(),
            None,
            progress,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(renamed.load(Ordering::SeqCst), "renamed while it ran");
    assert_eq!(project.name, "After");
    assert!(project.segments.len() >= 3);
    let reopened = ws.store().open(&project.id).unwrap();
    assert_eq!(reopened.segments.len(), project.segments.len());
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn replacing_a_transcript_keeps_the_old_one_as_a_version_to_restore() {
    let dir = scratch("versions");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let id = transcribed(&ws, "Versions").await;
    assert!(ws.versions(&id).unwrap().is_empty(), "nothing replaced yet");
    let saved = ws
        .edit_segment(&id, 0, "my own words, typed by hand".into())
        .await
        .unwrap();
    assert_eq!(saved.index, 0);
    assert_eq!(saved.segment.text, "my own words, typed by hand");
    let edited = ws.store().open(&id).unwrap();
    assert_eq!(edited.segments[0], saved.segment);
    assert_eq!(edited.modified_unix_ms, saved.modified_unix_ms);
    // Transcribing again replaced the edit (and every decision) with no way back, before.
    let again = ws
        .transcribe(
            &id,
            &sample(),
            None,
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_ne!(again.segments[0].text, edited.segments[0].text);
    let versions = ws.versions(&id).unwrap();
    assert_eq!(versions.len(), 1);
    assert_eq!(versions[0].reason, "before transcribing again");
    assert_eq!(versions[0].segments, edited.segments.len());

    // Accepting every suggestion keeps the text before it, too.
    ws.clean_segment(&id, 1, true, &CancellationToken::new(), &|_| {})
        .await
        .unwrap();
    ws.decide(&id, None, Decision::Accepted).await.unwrap();
    assert_eq!(
        ws.versions(&id).unwrap()[0].reason,
        "before accepting every suggestion"
    );

    // Restoring brings the hand edit back, and keeps what it replaced.
    let restored = ws.restore_version(&id, &versions[0].id).await.unwrap();
    assert_eq!(restored.segments, edited.segments);
    assert_eq!(ws.store().open(&id).unwrap().segments, edited.segments);
    let after = ws.versions(&id).unwrap();
    assert_eq!(after.len(), 3);
    assert!(after[0].reason.starts_with("before restoring"));
    assert!(matches!(
        ws.restore_version(&id, "../../etc/passwd").await,
        Err(WorkstationError::Project(_))
    ));
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn recordings_and_writes_a_crash_interrupted_are_recovered_at_start() {
    let dir = scratch("recover");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let project = ws.store().create("Interrupted").unwrap();
    let take = ws
        .store()
        .folder(&project.id)
        .unwrap()
        .join("audio/recording-1.wav");
    // A recording in progress when the app died: its file is still `.partial`.
    let mut recorder = headroom_speech::audio::WavRecorder::create(&take, 16_000).unwrap();
    let tone: Vec<f32> = (0..20_000).map(|i| (i as f32 * 0.05).sin() * 0.5).collect();
    recorder.write(&tone).unwrap();
    std::mem::forget(recorder); // no destructor: as after SIGKILL
    assert!(!take.exists());
    // An import a crash cut short, from a process that is gone, and one still being written.
    let audio = take.parent().unwrap();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let cut_short = audio.join(format!(".talk.wav.headroom-{gone_pid}-0.tmp"));
    let in_progress = audio.join(format!(".talk.wav.headroom-{}-99.tmp", std::process::id()));
    std::fs::write(&cut_short, vec![0u8; 4096]).unwrap();
    std::fs::write(&in_progress, b"x").unwrap();
    let recovered = ws.recover_after_crash();
    assert_eq!(recovered.recordings, vec![take.clone()]);
    assert_eq!(recovered.temporaries_removed, 1);
    assert!(!cut_short.exists());
    assert!(in_progress.exists(), "a live writer's temporary stays");
    let reader = hound::WavReader::open(&take).unwrap();
    assert!(reader.duration() > 0);
    assert_eq!(
        ws.recover_after_crash(),
        Default::default(),
        "nothing left to recover"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn settings_saved_from_a_stale_view_are_refused_as_changed_elsewhere() {
    use headroom_workstation::projects::ProjectError;
    let dir = scratch("stale");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let opened = ws.store().create("Shared").unwrap();
    // Another window (or the CLI) changes the settings after this view loaded them.
    let elsewhere = ProjectSettings {
        llm_cleanup: true,
        ..opened.settings.clone()
    };
    ws.update_settings(&opened.id, elsewhere.clone(), opened.settings.clone())
        .await
        .unwrap();
    // This view still shows the old settings: its save would undo that change.
    let stale = ProjectSettings {
        voice: Some("en-gb".into()),
        ..opened.settings.clone()
    };
    let err = ws
        .update_settings(&opened.id, stale, opened.settings.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            WorkstationError::Project(ProjectError::ChangedElsewhere { .. })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("changed elsewhere"));
    let now = ws.store().open(&opened.id).unwrap();
    assert!(now.settings.llm_cleanup, "the other change is kept");
    assert_eq!(now.settings.voice, None);
    // Other changes to the project (a transcript, suggestions) do not count: only settings.
    ws.store().rename(&opened.id, "Shared, renamed").unwrap();
    let fresh = ProjectSettings {
        voice: Some("en-gb".into()),
        ..now.settings.clone()
    };
    ws.update_settings(&opened.id, fresh, now.settings.clone())
        .await
        .unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

/// The interview three times over (68 s): three Whisper windows.
fn long_sample(dir: &std::path::Path) -> PathBuf {
    use headroom_speech::audio::{decode_file, wav_bytes, Audio, DecodeLimits};
    let once = decode_file(&sample(), DecodeLimits::default()).unwrap();
    let path = dir.join("long.wav");
    let audio = Audio {
        samples: once.samples.repeat(3),
        sample_rate: once.sample_rate,
    };
    std::fs::write(&path, wav_bytes(&audio)).unwrap();
    path
}

#[tokio::test]
async fn an_interrupted_transcription_resumes_from_its_last_finished_window() {
    use headroom_core::admission::Priority;
    use headroom_services::speech::{AudioInput, Resume};
    use headroom_speech::asr::Segment;
    use std::sync::Mutex;

    let dir = scratch("resume-transcription");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let long = long_sample(&dir);
    let whole = transcribe_whole(&ws, &long).await;
    assert!(
        ws.jobs(&whole.id).unwrap().is_empty(),
        "a finished job leaves no record"
    );

    // The first window alone: what a job had kept when a crash stopped it.
    // Its segments, the seconds done and the audio's length.
    type Window = (Vec<Segment>, f64, f64);
    let first: Arc<Mutex<Option<Window>>> = Arc::default();
    let stop = CancellationToken::new();
    let window_done = {
        let (first, stop) = (first.clone(), stop.clone());
        Box::new(move |w: headroom_speech::asr::WindowDone<'_>| {
            first.lock().unwrap().get_or_insert((
                w.segments.to_vec(),
                w.done_secs,
                w.duration_secs,
            ));
            stop.cancel();
        })
    };
    let stopped = ws
        .services()
        .speech()
        .transcribe_from(
            AudioInput::from_file(&long).unwrap(),
            headroom_speech::models::DEFAULT_MODEL,
            headroom_workstation::workstation::project_transcribe_options(
                None,
                &ProjectSettings::default(),
            ),
            Priority::Interactive,
            Resume {
                from_secs: 0.0,
                window_done,
            },
            Arc::new(|_| {}),
            stop,
        )
        .await;
    assert!(stopped.is_err(), "stopped after the first window");
    let (segments, done_secs, duration_secs) = first.lock().unwrap().take().unwrap();
    assert!(
        done_secs > 10.0 && done_secs < duration_secs - 10.0,
        "{done_secs} of {duration_secs}"
    );

    let project = ws.store().create("Resumed").unwrap();
    let audio = ws.store().import_audio(&project, &long).unwrap();
    let mut job = ws
        .store()
        .start_job(
            &project.id,
            JobKind::Transcribe {
                audio,
                model: headroom_speech::models::DEFAULT_MODEL.into(),
                language: None,
                servers: ServerChoice::embedded(),
            },
        )
        .unwrap();
    job.checkpoint(|p| {
        p.segments = segments;
        p.done_secs = done_secs;
        p.duration_secs = duration_secs;
    })
    .unwrap();
    let job_id = job.id().to_string();
    drop(job); // no end(): as after a crash

    let interrupted = ws.interrupted_jobs().unwrap();
    assert_eq!(interrupted.len(), 1, "{interrupted:?}");
    assert_eq!(interrupted[0].id, job_id);
    assert_eq!(interrupted[0].kind, "transcribe");
    let fractions: Arc<Mutex<Vec<f32>>> = Arc::default();
    let seen = fractions.clone();
    let outcome = ws
        .resume_job(
            &project.id,
            &job_id,
            Arc::new(move |f| seen.lock().unwrap().push(f)),
            &|_| {},
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let JobOutcome::Transcribed(resumed) = outcome else {
        panic!("a transcription job transcribes")
    };
    let first_fraction = fractions.lock().unwrap()[0];
    assert!(
        first_fraction as f64 > done_secs / duration_secs,
        "the resumed job started at its checkpoint, not at the start: {first_fraction}"
    );
    assert_eq!(
        resumed.segments, whole.segments,
        "resuming gives the transcript running through gives"
    );
    assert!(ws.jobs(&project.id).unwrap().is_empty());
    std::fs::remove_dir_all(dir).unwrap();
}

/// `long` transcribed start to end into a new project.
async fn transcribe_whole(ws: &Workstation, long: &std::path::Path) -> Project {
    let whole = ws.store().create("Whole").unwrap();
    ws.transcribe(
        &whole.id,
        long,
        None,
        Arc::new(|_| {}),
        CancellationToken::new(),
    )
    .await
    .unwrap()
}

/// A recorded transcription job resumed to its end: the project it gives.
async fn resume_transcription(ws: &Workstation, project: &str, job: &str) -> Project {
    let outcome = ws
        .resume_job(
            project,
            job,
            Arc::new(|_| {}),
            &|_| {},
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let headroom_workstation::resume::JobOutcome::Transcribed(resumed) = outcome else {
        panic!("a transcription job transcribes")
    };
    *resumed
}

/// `long` transcribed into a new project `name`, stopped with `stop_with` once half done: the
/// project's id and what the transcription returned.
async fn transcribe_stopped_half_way(
    ws: &Workstation,
    name: &str,
    long: &std::path::Path,
    stop_with: fn(&headroom_workstation::jobs::JobStop),
) -> (String, Result<Project, WorkstationError>) {
    let project = ws.store().create(name).unwrap();
    let stop = headroom_workstation::jobs::JobStop::new();
    let watched = stop.clone();
    let progress = Arc::new(move |fraction: f32| {
        if fraction >= 0.5 {
            stop_with(&watched);
        }
    });
    let result = ws.transcribe(&project.id, long, None, progress, stop).await;
    (project.id, result)
}

#[tokio::test]
async fn a_paused_transcription_keeps_its_checkpoint_is_listed_paused_and_resumes_to_the_same_transcript(
) {
    use headroom_workstation::jobs::JobStop;

    let dir = scratch("pause-transcription");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let long = long_sample(&dir);
    let whole = transcribe_whole(&ws, &long).await;

    // Paused half way, as the window's Pause does.
    let (project, paused) = transcribe_stopped_half_way(&ws, "Paused", &long, JobStop::pause).await;
    assert!(
        matches!(paused, Err(WorkstationError::Cancelled)),
        "{paused:?}"
    );
    assert!(
        ws.store().open(&project).unwrap().segments.is_empty(),
        "a paused transcription has not replaced the transcript yet"
    );
    let jobs = ws.jobs(&project).unwrap();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert!(jobs[0].paused && !jobs[0].running, "{jobs:?}");
    assert!(jobs[0].fraction > 0.0, "its checkpoint is kept: {jobs:?}");
    let listed = ws.interrupted_jobs().unwrap();
    assert!(
        listed.iter().any(|j| j.id == jobs[0].id && j.paused),
        "{listed:?}"
    );
    let resumed = resume_transcription(&ws, &project, &jobs[0].id).await;
    assert_eq!(resumed.segments, whole.segments);
    assert!(ws.jobs(&project).unwrap().is_empty());

    // Cancelled instead: nothing is kept to resume.
    let (project, cancelled) =
        transcribe_stopped_half_way(&ws, "Cancelled", &long, JobStop::cancel).await;
    assert!(matches!(cancelled, Err(WorkstationError::Cancelled)));
    assert!(ws.jobs(&project).unwrap().is_empty());
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn an_interrupted_cleanup_resumes_at_its_first_unfinished_segment() {
    let dir = scratch("resume-cleanup");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let id = transcribed(&ws, "Talk").await;
    let count = ws.store().open(&id).unwrap().segments.len();
    let mut job = ws
        .store()
        .start_job(
            &id,
            JobKind::Cleanup {
                rules_only: true,
                accept: true,
            },
        )
        .unwrap();
    job.checkpoint(|p| p.next_segment = 2).unwrap();
    let job_id = job.id().to_string();
    drop(job);
    let listed = ws.jobs(&id).unwrap();
    assert!(!listed[0].running);
    assert!(
        listed[0].description.contains("2 segments done"),
        "{:?}",
        listed[0]
    );

    let (cleaned, on_event) = segments_cleaned();
    let outcome = ws
        .resume_job(
            &id,
            &job_id,
            Arc::new(|_| {}),
            &on_event,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, JobOutcome::Cleaned(ref s) if s.refused.is_empty()));
    assert_eq!(*cleaned.lock().unwrap(), (2..count).collect::<Vec<_>>());
    let project = ws.store().open(&id).unwrap();
    assert!(project.segments[..2].iter().all(|s| s.suggestion.is_none()));
    assert!(project.segments[2..]
        .iter()
        .all(|s| s.suggestion.as_ref().unwrap().decision == Decision::Accepted));
    assert!(ws.jobs(&id).unwrap().is_empty());

    // A cleanup from the start, and a synthesis: both leave no record when they end.
    ws.clean_all(&id, true, false, &|_| {}, &CancellationToken::new())
        .await
        .unwrap();
    ws.synthesize(&id, Some(0), CancellationToken::new())
        .await
        .unwrap();
    assert!(ws.jobs(&id).unwrap().is_empty());
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn a_paused_cleanup_stops_after_its_segment_and_resumes_at_the_next() {
    use headroom_workstation::jobs::JobStop;
    use headroom_workstation::resume::JobOutcome;
    use headroom_workstation::workstation::{CleanAllEvent, SegmentOutcome};

    let dir = scratch("pause-cleanup");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let id = transcribed(&ws, "Talk").await;
    let count = ws.store().open(&id).unwrap().segments.len();
    assert!(count > 2, "{count} segments");
    // Paused as the first segment's suggestion is saved, as the window's Pause does.
    let stop = JobStop::from(CancellationToken::new());
    let (cleaned, record) = segments_cleaned();
    let on_event = {
        let stop = stop.clone();
        move |event: CleanAllEvent| {
            let saved = matches!(
                event,
                CleanAllEvent::Segment {
                    outcome: SegmentOutcome::Cleaned { .. },
                    ..
                }
            );
            record(event);
            if saved {
                stop.pause();
            }
        }
    };
    let paused = ws.clean_all(&id, true, false, &on_event, stop).await;
    assert!(
        matches!(paused, Err(WorkstationError::Cancelled)),
        "{paused:?}"
    );
    assert_eq!(*cleaned.lock().unwrap(), vec![0], "nothing after the pause");
    let jobs = ws.jobs(&id).unwrap();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert!(jobs[0].paused, "{jobs:?}");

    let (resumed, on_event) = segments_cleaned();
    let outcome = ws
        .resume_job(
            &id,
            &jobs[0].id,
            Arc::new(|_| {}),
            &on_event,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, JobOutcome::Cleaned(_)));
    assert_eq!(*resumed.lock().unwrap(), (1..count).collect::<Vec<_>>());
    assert!(ws
        .store()
        .open(&id)
        .unwrap()
        .segments
        .iter()
        .all(|s| s.suggestion.is_some()));
    assert!(ws.jobs(&id).unwrap().is_empty());
    std::fs::remove_dir_all(dir).unwrap();
}

/// The segments a cleanup saved a suggestion for, in order, and the event handler that
/// records them.
fn segments_cleaned() -> (
    Arc<std::sync::Mutex<Vec<usize>>>,
    impl Fn(headroom_workstation::workstation::CleanAllEvent) + Send + Sync,
) {
    use headroom_workstation::workstation::{CleanAllEvent, SegmentOutcome};
    let cleaned: Arc<std::sync::Mutex<Vec<usize>>> = Arc::default();
    let seen = cleaned.clone();
    let on_event = move |event: CleanAllEvent| {
        if let CleanAllEvent::Segment {
            outcome: SegmentOutcome::Cleaned { segment, .. },
            ..
        } = event
        {
            seen.lock().unwrap().push(segment);
        }
    };
    (cleaned, on_event)
}

/// A workstation whose voice library is its own, in `dir`.
fn workstation_with_voices(dir: &std::path::Path) -> Arc<Workstation> {
    let mut env = headroom_services::Environment::from_vars(
        |name| std::env::var_os(name),
        std::env::temp_dir,
    );
    env.voices_dir = dir.join("voices");
    Workstation::new(
        ProjectStore::new(dir.join("projects")),
        headroom_services::Services::new(Config::default(), env),
        None,
    )
}

/// A project holding the two-speaker conversation with its transcript typed from the turns
/// (one segment a turn, words spread over it), so no speech model is needed.
async fn conversation_project(ws: &Workstation, dir: &std::path::Path) -> String {
    use headroom_speech::asr::{Segment, Speaker, Transcript, Word};
    use headroom_tests::conversation::{two_speakers, TURNS};
    let conversation = two_speakers(ws.services(), &dir.join("conversation.wav")).await;
    let project = ws.store().create("Conversation").unwrap();
    let audio = ws
        .store()
        .import_audio(&project, &conversation.path)
        .unwrap();
    let segments = conversation
        .turns
        .iter()
        .zip(TURNS)
        .map(|(&(speaker, start, end), (_, text))| {
            let words: Vec<&str> = text.split_whitespace().collect();
            let step = (end - start) / words.len() as f64;
            Segment {
                start,
                end,
                text: text.to_string(),
                speaker: Some(format!("S{}", speaker + 1)),
                words: words
                    .iter()
                    .enumerate()
                    .map(|(i, w)| Word {
                        start: start + i as f64 * step,
                        end: start + (i + 1) as f64 * step,
                        text: w.to_string(),
                        probability: 1.0,
                        speaker: Some(format!("S{}", speaker + 1)),
                    })
                    .collect(),
            }
        })
        .collect();
    let transcript = Transcript {
        speakers: vec![Speaker::numbered(0), Speaker::numbered(1)],
        language: Some("en".into()),
        duration: conversation.duration_secs,
        segments,
    };
    ws.update_project(&project.id, move |p| {
        p.set_transcript(&transcript);
        p.refresh_speaker_seconds();
        p.source_audio = Some(audio);
        Ok(())
    })
    .await
    .unwrap();
    project.id
}

#[tokio::test]
async fn speakers_are_renamed_split_merged_and_restored_with_their_version() {
    use headroom_workstation::projects::{SplitAt, NEW_SPEAKER};
    let dir = scratch("speakers");
    let ws = workstation_with_voices(&dir);
    let id = conversation_project(&ws, &dir).await;
    let shown = ws.store().open(&id).unwrap();
    assert_eq!(shown.speakers.len(), 2);
    assert!(shown.segments[0].words.len() > 5, "word times are kept");

    // Renamed everywhere: every segment of S2 shows the name.
    let renamed = ws
        .rename_speaker(&id, "S2", "Grace".into(), shown.speakers.clone())
        .await
        .unwrap();
    assert_eq!(renamed.speaker("S2").unwrap().display_name(), "Grace");
    let srt = std::fs::read_to_string(ws.export(&id, ExportFormat::Txt).await.unwrap()).unwrap();
    assert!(srt.contains("Grace"), "{srt}");
    // A view that still shows the old names is refused, and nothing changes.
    let stale = ws
        .rename_speaker(&id, "S1", "Host".into(), shown.speakers.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(
            stale,
            WorkstationError::Project(ProjectError::ChangedElsewhere { .. })
        ),
        "{stale}"
    );
    assert_eq!(ws.store().open(&id).unwrap().speakers[0].name, None);

    // Split the first turn before its fifth word; the new part is a new speaker.
    let first = renamed.segments[0].clone();
    let split = ws
        .split_segment(
            &id,
            0,
            SplitAt::Word { index: 4 },
            Some(NEW_SPEAKER.into()),
            first.clone(),
        )
        .await
        .unwrap();
    assert_eq!(split.segments.len(), 5);
    assert_eq!(split.segments[0].text, "Good morning and welcome");
    assert_eq!(split.segments[1].speaker.as_deref(), Some("S3"));
    assert_eq!(split.segments[1].start, first.words[4].start);
    // The same split from the old view is refused: the segment is not what it showed.
    assert!(ws
        .split_segment(&id, 0, SplitAt::Word { index: 2 }, None, first)
        .await
        .is_err());

    // Merge S3 back into S1: kept as a version first, which restores the speakers too.
    let merged = ws
        .merge_speakers(&id, "S3", "S1", split.speakers.clone())
        .await
        .unwrap();
    assert_eq!(merged.speakers.len(), 2);
    assert_eq!(merged.segments[1].speaker.as_deref(), Some("S1"));
    let versions = ws.versions(&id).unwrap();
    assert!(
        versions[0]
            .reason
            .contains("merging Speaker 3 into Speaker 1"),
        "{:?}",
        versions[0]
    );
    let restored = ws.restore_version(&id, &versions[0].id).await.unwrap();
    assert_eq!(restored.speakers.len(), 3, "{:?}", restored.speakers);
    assert_eq!(restored.segments[1].speaker.as_deref(), Some("S3"));
    assert_eq!(restored.speaker("S2").unwrap().display_name(), "Grace");
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn a_voice_profile_is_made_from_a_speakers_turns_and_the_speaker_attached() {
    let dir = scratch("speaker-profile");
    let ws = workstation_with_voices(&dir);
    let id = conversation_project(&ws, &dir).await;
    let made = ws
        .profile_from_speaker(&id, "S1", Some("Host".into()), CancellationToken::new())
        .await
        .unwrap();
    assert!(
        (5.0..=20.0).contains(&made.seconds),
        "a 5-20 s clip: {}",
        made.seconds
    );
    assert!(made.report.accepted(), "{:?}", made.report);
    assert_eq!(made.segments, vec![0, 2], "the host's turns");
    assert_eq!(made.voice.name, "Host");
    assert_eq!(made.voice.clips.len(), 1);
    assert!(made.voice.clips[0]
        .transcript
        .as_deref()
        .unwrap()
        .contains("roofs"));
    let speaker = made.project.speaker("S1").unwrap();
    assert_eq!(speaker.profile.as_deref(), Some(made.voice.id.as_str()));
    assert_eq!(speaker.display_name(), "Host");
    // The narration speaks the host in the new profile's voice by default.
    let view = ws.narration(&id).unwrap();
    assert_eq!(view.speakers[0].voice, format!("profile:{}", made.voice.id));
    // "This is <profile>" for the other speaker, then detached again.
    let shown = made.project.speakers.clone();
    let attached = ws
        .attach_speaker(&id, "S2", Some(made.voice.id.clone()), shown)
        .await
        .unwrap();
    assert_eq!(attached.speaker("S2").unwrap().display_name(), "Host");
    let detached = ws
        .attach_speaker(&id, "S2", None, attached.speakers.clone())
        .await
        .unwrap();
    assert_eq!(detached.speaker("S2").unwrap().profile, None);
    // A speaker who says too little makes no profile, and none is left behind.
    let (project, ()) = ws
        .update_project(&id, |p| {
            p.split_segment(
                3,
                headroom_workstation::projects::SplitAt::Word { index: 2 },
                Some(headroom_workstation::projects::NEW_SPEAKER),
            )?;
            Ok(())
        })
        .await
        .unwrap();
    assert!(project.speaker("S3").unwrap().seconds < 5.0);
    let refused = ws
        .profile_from_speaker(&id, "S3", None, CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("needs at least 5 s"),
        "{refused}"
    );
    assert_eq!(ws.voice_profiles().unwrap().len(), 1);
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn a_project_transcribed_with_speakers_names_each_turns_speaker() {
    use headroom_tests::conversation::two_speakers;
    use headroom_workstation::projects::SpeakerSetting;
    let dir = scratch("transcribe-speakers");
    let ws = workstation_with_voices(&dir);
    let conversation = two_speakers(ws.services(), &dir.join("conversation.wav")).await;
    let project = ws.store().create("Conversation").unwrap();
    assert_eq!(
        project.settings.speakers,
        SpeakerSetting::Off,
        "off by default"
    );
    let settings = headroom_workstation::projects::ProjectSettings {
        speakers: SpeakerSetting::Exactly(2),
        ..project.settings.clone()
    };
    ws.update_settings(&project.id, settings, project.settings.clone())
        .await
        .unwrap();
    let project = ws
        .transcribe(
            &project.id,
            &conversation.path,
            None,
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let ids: Vec<&str> = project.speakers.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["S1", "S2"]);
    assert!(project.speakers.iter().all(|s| s.seconds > 2.0));
    // Every segment has the speaker of the turn it lies in; one timed in the pause between
    // two turns (a word's tail the recogniser placed late) has either neighbour's.
    let speaker = |t: &(usize, f64, f64)| format!("S{}", t.0 + 1);
    for s in &project.segments {
        let middle = (s.start + s.end) / 2.0;
        let turns = &conversation.turns;
        let expected: Vec<String> = match turns.iter().find(|t| (t.1..t.2).contains(&middle)) {
            Some(turn) => vec![speaker(turn)],
            None => {
                let before = turns.iter().rfind(|t| t.2 <= middle);
                let after = turns.iter().find(|t| t.1 >= middle);
                before.into_iter().chain(after).map(speaker).collect()
            }
        };
        let got = s.speaker.clone().unwrap_or_default();
        assert!(expected.contains(&got), "{s:?} in {turns:?}");
        assert!(!s.words.is_empty(), "word times are kept: {s:?}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Files dropped together: a project of each readable one, named after it, a bad file in the
/// middle reported without leaving a project, and progress over the whole batch.
#[tokio::test]
async fn several_files_become_a_project_each_and_a_bad_one_is_reported() {
    let dir = scratch("batch");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let first = dir.join("first take.flac");
    let bad = dir.join("notes.wav");
    let last = dir.join("last.flac");
    std::fs::copy(sample(), &first).unwrap();
    std::fs::write(&bad, "not a recording").unwrap();
    std::fs::copy(sample(), &last).unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let progress = {
        let seen = seen.clone();
        Arc::new(move |f: f32| seen.lock().unwrap().push(f))
    };
    let outcomes = ws
        .transcribe_files(
            &[first.clone(), bad.clone(), last.clone()],
            None,
            &BatchServers::embedded(),
            progress,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcomes.len(), 3);
    let names: Vec<String> = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().ok())
        .map(|p| {
            assert!(p.segments.len() >= 3, "{:?}", p.segments);
            p.name.clone()
        })
        .collect();
    assert_eq!(names, ["first take", "last"]);
    assert_eq!(outcomes[1].path, bad);
    let failure = outcomes[1].result.as_ref().unwrap_err();
    assert_eq!(failure.reason, FailureReason::NotAudio, "{failure:?}");
    assert!(failure.message.contains("notes.wav"), "{failure:?}");
    // The bad file made no project.
    let listed = listed_names(&ws);
    assert_eq!(listed.len(), 2, "{listed:?}");
    let seen = seen.lock().unwrap();
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert_eq!(seen.last(), Some(&1.0));
}

/// An error every file would hit (a model that is not there) stops the batch at the first
/// file: one refusal naming the model, no project made, the other files untried.
#[tokio::test]
async fn a_batch_stops_at_the_first_file_when_every_file_would_fail_the_same_way() {
    let dir = scratch("batch-stop");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let files: Vec<PathBuf> = (0..3)
        .map(|i| {
            let file = dir.join(format!("take {i}.flac"));
            std::fs::copy(sample(), &file).unwrap();
            file
        })
        .collect();
    let (outcomes, error) = ws
        .transcribe_files(
            &files,
            Some("whisper-nonexistent"),
            &BatchServers::embedded(),
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(outcomes.is_empty(), "{outcomes:?}");
    assert!(error.to_string().contains("whisper-nonexistent"), "{error}");
    assert!(listed_names(&ws).is_empty(), "no project is left behind");
}

/// A folder among the inputs gives its audio files; one with none is reported as such.
#[tokio::test]
async fn a_folder_in_a_batch_gives_its_audio_files() {
    let dir = scratch("batch-folder");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let inbox = dir.join("inbox");
    let empty = dir.join("empty");
    std::fs::create_dir_all(&inbox).unwrap();
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::copy(sample(), inbox.join("a.flac")).unwrap();
    std::fs::write(inbox.join("notes.txt"), "not audio, not listed").unwrap();
    let outcomes = ws
        .transcribe_files(
            &[inbox, empty.clone()],
            None,
            &BatchServers::embedded(),
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    let failure = outcomes[0].result.as_ref().unwrap_err();
    assert_eq!(
        (failure.reason, &failure.path),
        (FailureReason::EmptyFolder, &empty)
    );
    assert_eq!(outcomes[1].result.as_ref().unwrap().name, "a");
}

/// Cancelling a batch keeps the projects finished before and removes the one in progress.
#[tokio::test]
async fn a_cancelled_batch_keeps_the_finished_projects() {
    let dir = scratch("batch-cancel");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let (first, second) = (dir.join("one.flac"), dir.join("two.flac"));
    std::fs::copy(sample(), &first).unwrap();
    std::fs::copy(sample(), &second).unwrap();
    let cancel = CancellationToken::new();
    // Cancelled once the second file is under way (past half the batch).
    let progress = {
        let cancel = cancel.clone();
        Arc::new(move |f: f32| {
            if f > 0.5 {
                cancel.cancel();
            }
        })
    };
    let (outcomes, error) = ws
        .transcribe_files(
            &[first, second],
            None,
            &BatchServers::embedded(),
            progress,
            cancel,
        )
        .await
        .unwrap_err();
    assert!(matches!(error, WorkstationError::Cancelled), "{error}");
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].result.as_ref().unwrap().name, "one");
    let listed = listed_names(&ws);
    assert_eq!(listed, ["one"]);
}

/// A real `headroom serve` on loopback (its own services: its own lane and models).
async fn audio_worker() -> headroom_server::RunningServer {
    headroom_tests::models_dir();
    headroom_tests::serve(&headroom_tests::services_for("http://127.0.0.1:9/v1")).await
}

/// A batch heard on `urls` (none per server given), allowed elsewhere when `allow_remote`.
fn on_servers(urls: Vec<String>, allow_remote: bool) -> BatchServers {
    BatchServers {
        choice: ServerChoice {
            urls,
            per_server: None,
        },
        allow_remote,
    }
}

/// `files` as one batch on `servers`, the whole batch's progress unwatched.
async fn batch_on(
    ws: &Workstation,
    files: &[PathBuf],
    servers: &BatchServers,
) -> Result<Vec<FileTranscription>, (Vec<FileTranscription>, WorkstationError)> {
    ws.transcribe_files(
        files,
        None,
        servers,
        Arc::new(|_| {}),
        CancellationToken::new(),
    )
    .await
}

/// A project's transcript, lower case.
fn project_text(project: &Project) -> String {
    let texts: Vec<&str> = project.segments.iter().map(|s| s.text.as_str()).collect();
    texts.join(" ").to_lowercase()
}

/// Pieces `url` heard for `ws`, as its fleet counted them.
fn heard_by(ws: &Workstation, url: &str) -> u64 {
    ws.services()
        .metrics()
        .upstream_requests(Lane::Audio, url.trim_end_matches('/'), "answered")
}

/// "Transcribe several files" on two real `headroom serve` workers: a project of each file,
/// its transcript the workers' (this machine's engine never loaded), and no job left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_sent_to_two_servers_makes_a_project_of_each_file_from_their_transcripts() {
    let dir = scratch("batch-servers");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let workers = [audio_worker().await, audio_worker().await];
    let urls: Vec<String> = workers.iter().map(|w| w.base_url()).collect();
    let files: Vec<PathBuf> = ["one.flac", "two.flac"]
        .iter()
        .map(|name| {
            let file = dir.join(name);
            std::fs::copy(sample(), &file).unwrap();
            file
        })
        .collect();
    // Allowed to go elsewhere, but both servers are on this machine: no consent is recorded.
    let servers = on_servers(urls.clone(), true);
    let outcomes = batch_on(&ws, &files, &servers).await.unwrap();
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    for outcome in &outcomes {
        let project = outcome.result.as_ref().unwrap();
        let text = project_text(project);
        assert!(text.contains("record"), "{text}");
        assert!(
            ws.store().jobs(&project.id).unwrap().is_empty(),
            "the job ended with its transcript"
        );
        // Heard on servers on this machine: no consent was needed, and none is recorded.
        assert!(project.settings.remote_audio_allowed.is_empty());
    }
    let heard: u64 = urls.iter().map(|url| heard_by(&ws, url)).sum();
    assert!(
        heard >= 2,
        "each file was heard on the servers ({heard} pieces)"
    );
    assert!(
        ws.services().residency().resident().is_empty(),
        "this machine's engine was not loaded: {:?}",
        ws.services().residency().resident()
    );
}

/// A batch job interrupted (the app closed) goes on, when resumed, on the servers it started
/// on, from its checkpoint: its record names them, and the pieces before are not heard again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_resumed_transcription_goes_on_on_the_servers_its_job_recorded() {
    let dir = scratch("resume-servers");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let worker = audio_worker().await;
    let long = long_sample(&dir);
    let project = ws.store().create("Interrupted").unwrap();
    let audio = ws.store().import_audio(&project, &long).unwrap();
    let mut interrupted = ws
        .store()
        .start_job(
            &project.id,
            JobKind::Transcribe {
                audio,
                model: headroom_speech::models::DEFAULT_MODEL.into(),
                language: None,
                servers: ServerChoice {
                    urls: vec![worker.base_url()],
                    per_server: Some(1),
                },
            },
        )
        .unwrap();
    // What the first run kept: a piece of 30 s (a marker text no engine hears).
    let kept = headroom_speech::asr::Segment {
        start: 0.0,
        end: 30.0,
        text: "KEPT FROM THE FIRST RUN".into(),
        words: Vec::new(),
        speaker: None,
    };
    interrupted
        .checkpoint(|p| {
            p.segments = vec![kept.clone()];
            p.done_secs = 30.0;
            p.duration_secs = 90.0;
        })
        .unwrap();
    let job_id = interrupted.id().to_string();
    drop(interrupted); // no end(): as when the app closed
    let described = ws.store().jobs(&project.id).unwrap()[0].description.clone();
    assert!(described.contains(&worker.base_url()), "{described}");
    let outcome = ws
        .resume_job(
            &project.id,
            &job_id,
            Arc::new(|_| {}),
            &|_| {},
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let JobOutcome::Transcribed(project) = outcome else {
        panic!("a transcription resumes as one: {outcome:?}")
    };
    assert_eq!(
        project.segments[0].text, kept.text,
        "the checkpoint is kept"
    );
    let rest = &project.segments[1..];
    assert!(!rest.is_empty());
    assert!(
        rest.iter().all(|s| s.start >= 29.9),
        "only what followed the checkpoint was heard: {rest:?}"
    );
    let text = project_text(&project);
    assert!(text.contains("record"), "{text}");
    assert!(
        heard_by(&ws, &worker.base_url()) >= 1,
        "heard on the worker"
    );
    assert!(ws.services().residency().resident().is_empty());
    assert!(ws.store().jobs(&project.id).unwrap().is_empty());
}

/// A resumed job whose servers the consent no longer allows is refused before anything is
/// sent, and stays listed with its checkpoint, to resume once it is allowed.
#[tokio::test]
async fn a_resume_the_consent_refuses_keeps_its_job() {
    let dir = scratch("resume-refused");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let project = ws.store().create("Elsewhere").unwrap();
    let audio = ws.store().import_audio(&project, &sample()).unwrap();
    let job = ws
        .store()
        .start_job(
            &project.id,
            JobKind::Transcribe {
                audio,
                model: headroom_speech::models::DEFAULT_MODEL.into(),
                language: None,
                servers: ServerChoice {
                    urls: vec!["http://gpu.example:8000/v1".into()],
                    per_server: None,
                },
            },
        )
        .unwrap();
    let job_id = job.id().to_string();
    drop(job);
    let error = ws
        .resume_job(
            &project.id,
            &job_id,
            Arc::new(|_| {}),
            &|_| {},
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("gpu.example"), "{error}");
    let listed = ws.store().jobs(&project.id).unwrap();
    assert_eq!(listed.len(), 1, "the job is still there to resume");
    assert_eq!(listed[0].id, job_id);
    assert!(!listed[0].running);
}

/// With the box ticked, a project made on a server elsewhere records that server's origin as
/// its consent (a resumed job may go on there), and a server that cannot be reached costs its
/// piece nothing: it moves to the one on this machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_allowed_elsewhere_records_the_consent_in_each_project() {
    let dir = scratch("batch-allowed");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let worker = audio_worker().await;
    let file = dir.join("take.flac");
    std::fs::copy(sample(), &file).unwrap();
    // A reserved name: it resolves nowhere, so nothing leaves the machine.
    let servers = on_servers(
        vec!["http://gpu.example:8000/v1".into(), worker.base_url()],
        true,
    );
    let outcomes = batch_on(&ws, &[file], &servers).await.unwrap();
    let project = outcomes[0].result.as_ref().unwrap();
    assert_eq!(
        project.settings.remote_audio_allowed,
        ["http://gpu.example:8000"]
    );
    let reopened = ws.store().open(&project.id).unwrap();
    let destination = headroom_base::consent::Destination::of("http://gpu.example:8000/v1");
    assert!(ws.audio_consent(&reopened).permits(&destination));
    assert!(project_text(project).contains("record"));
    assert!(heard_by(&ws, &worker.base_url()) >= 1);
}

/// A server URL with a key in it is refused for a batch: the job record would keep it.
#[tokio::test]
async fn a_batch_server_url_with_a_secret_is_refused() {
    let dir = scratch("batch-secret");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let file = dir.join("take.flac");
    std::fs::copy(sample(), &file).unwrap();
    let servers = on_servers(vec!["http://127.0.0.1:9/v1?api_key=hunter2".into()], false);
    let (outcomes, error) = batch_on(&ws, &[file], &servers).await.unwrap_err();
    assert!(outcomes.is_empty());
    let message = error.to_string();
    assert!(message.contains("HEADROOM_AUDIO_API_KEY"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");
    assert!(listed_names(&ws).is_empty(), "no project was made");
}

/// A server on another machine gets nothing without consent: the batch is refused before a
/// project is made; the refusal names the server.
#[tokio::test]
async fn a_batch_to_a_server_elsewhere_is_refused_before_a_project_is_made() {
    let dir = scratch("batch-elsewhere");
    let ws = workstation(&dir, "http://127.0.0.1:9/v1");
    let file = dir.join("take.flac");
    std::fs::copy(sample(), &file).unwrap();
    let servers = on_servers(vec!["http://gpu.example:8000/v1".into()], false);
    let (outcomes, error) = batch_on(&ws, &[file], &servers).await.unwrap_err();
    assert!(outcomes.is_empty());
    assert!(error.to_string().contains("gpu.example"), "{error}");
    assert!(listed_names(&ws).is_empty(), "no project was made");
}

fn listed_names(ws: &Workstation) -> Vec<String> {
    let mut names: Vec<String> = ws
        .store()
        .list()
        .unwrap()
        .into_iter()
        .map(|entry| match entry {
            ProjectEntry::Ok { name, .. } => name,
            ProjectEntry::Unreadable { id, error } => panic!("{id}: {error}"),
        })
        .collect();
    names.sort();
    names
}

/// A held-out voice (Kokoro's jf_tebukuro, in the editing bench's test set) speaks sentences
/// with an "um" or "uh" put between two phrases and long pauses after some, over a faint noise
/// floor; where each filler and each phrase sounds is known to the sample.
async fn planted(dir: &std::path::Path, ws: &Workstation) -> headroom_bench::suites::edit::Planted {
    planted_in(dir, ws, "kokoro-jf_tebukuro").await
}

/// [`planted`] in `voice`.
async fn planted_in(
    dir: &std::path::Path,
    ws: &Workstation,
    voice: &str,
) -> headroom_bench::suites::edit::Planted {
    use rand::SeedableRng;
    let clips = dir.join("clips");
    std::fs::create_dir_all(&clips).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    headroom_bench::suites::edit::planted_recording(ws.services(), &clips, voice, 8, &mut rng)
        .await
        .expect("the recording is made")
}

/// No sound of the planted sentences is cut by `list` (room tone is no sound of theirs).
fn assert_no_sound_cut(
    planted: &headroom_bench::suites::edit::Planted,
    list: &headroom_speech::edit::EditList,
) {
    for sound in &planted.sound {
        let kept: f64 = list
            .kept
            .iter()
            .filter(|r| !r.room_tone)
            .map(|r| (r.end.min(sound.end) - r.start.max(sound.start)).max(0.0))
            .sum();
        assert!(
            kept >= sound.end - sound.start - 0.011,
            "{sound:?} is cut: {:?}",
            list.kept
        );
    }
}

/// Whisper leaves most spoken fillers out of its text (tiny.en writes none of the four put in
/// an espeak-ng voice of the editing bench's test set), and what is not written cannot be cut.
/// A project set to hear fillers reads each window again after a prompt full of them: more
/// of the planted fillers are written, each where it sounds, and cutting them cuts no sound of
/// the sentences.
#[tokio::test(flavor = "multi_thread")]
async fn a_project_set_to_hear_fillers_writes_the_ones_whisper_leaves_out() {
    use headroom_speech::audio::write_wav;
    use headroom_workstation::editing::EditIntent;
    let dir = scratch("hear-fillers");
    let ws = workstation(&dir, &headroom_tests::closed_port_url());
    let planted = planted_in(&dir, &ws, "en-us+m7").await;
    let wav = dir.join("planted.wav");
    write_wav(&wav, &planted.audio).unwrap();
    let mut fillers_found = Vec::new();
    for hear in [false, true] {
        let project = ws.store().create(&format!("hearing {hear}")).unwrap();
        let shown = project.settings.clone();
        let settings = ProjectSettings {
            hear_fillers: hear,
            ..shown.clone()
        };
        ws.update_settings(&project.id, settings, shown)
            .await
            .unwrap();
        ws.transcribe(
            &project.id,
            &wav,
            None,
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await
        .unwrap();
        let summary = ws
            .edit_recording(
                &project.id,
                EditIntent {
                    cut_fillers: true,
                    ..EditIntent::default()
                },
                CancellationToken::new(),
            )
            .await
            .unwrap();
        fillers_found.push(summary.fillers.len());
        if !hear {
            // Whisper's own fillers' times are its own matter (the test above).
            continue;
        }
        // Each filler written sounds where one was put in.
        for found in &summary.fillers {
            assert!(
                planted
                    .fillers
                    .iter()
                    .any(|p| found.word.start < p.end && found.word.end > p.start),
                "hearing {hear}: {found:?} is no filler put in: {:?}",
                planted.fillers
            );
        }
        assert_no_sound_cut(&planted, &summary.edit.unwrap().list);
    }
    assert!(
        fillers_found[0] < planted.fillers.len(),
        "Whisper alone leaves fillers out: {fillers_found:?}"
    );
    assert!(
        fillers_found[1] > fillers_found[0],
        "hearing for fillers writes more of them: {fillers_found:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recording_edited_by_its_words_loses_its_fillers_and_long_pauses_and_nothing_else() {
    use headroom_speech::audio::{decode_file, write_wav, DecodeLimits, SpeechFormat};
    use headroom_speech::edit::render::step_ratio;
    use headroom_workstation::editing::{EditIntent, EditedFormat};
    let dir = scratch("edit");
    let ws = workstation(&dir, &headroom_tests::closed_port_url());
    let planted = planted(&dir, &ws).await;
    let wav = dir.join("planted.wav");
    write_wav(&wav, &planted.audio).unwrap();
    let project = ws.store().create("Planted").unwrap();
    let project = ws
        .transcribe(
            &project.id,
            &wav,
            None,
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let source = dir
        .join("projects/planted")
        .join(project.source_audio.as_deref().unwrap());
    let original_bytes = std::fs::read(&source).unwrap();
    let original = decode_file(&source, DecodeLimits::default()).unwrap();

    let summary = ws
        .edit_recording(
            &project.id,
            EditIntent {
                cut_fillers: true,
                max_pause: Some(0.6),
                room_tone: true,
                ..EditIntent::default()
            },
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let edit = summary.edit.clone().unwrap();
    let list = &edit.list;
    list.check(edit.source_secs).unwrap();
    // The transcript has fillers (Whisper writes two of the four put in), each cut, each one
    // put in (not a word of the sentences).
    assert!(summary.fillers.len() >= 2, "{:?}", summary.fillers);
    for found in &summary.fillers {
        assert!(found.cut, "{found:?}");
        assert!(
            planted
                .fillers
                .iter()
                .any(|p| found.word.start < p.end && found.word.end > p.start),
            "{found:?} is no filler put in: {:?}",
            planted.fillers
        );
    }
    // No sound of the sentences is cut; each long pause is shortened to the limit.
    assert_no_sound_cut(&planted, list);
    for pause in &planted.long_pauses {
        let heard: f64 = list
            .kept
            .iter()
            .map(|r| (r.end.min(pause.end) - r.start.max(pause.start)).max(0.0))
            .sum();
        assert!(heard <= 0.6 + 0.05, "a pause {pause:?} keeps {heard} s");
    }
    assert!(
        list.kept.iter().any(|r| r.room_tone),
        "room tone fills a shortened pause"
    );

    // The render: exactly as long as the kept ranges, no click at any join.
    let rendered = ws
        .export_edited(
            &project.id,
            EditedFormat::Audio(SpeechFormat::Wav),
            30,
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let edited = decode_file(&rendered, DecodeLimits::default()).unwrap();
    let rate = f64::from(edited.sample_rate);
    assert_eq!(
        edited.samples.len(),
        list.kept
            .iter()
            .map(|r| ((r.end * rate).round() - (r.start * rate).round()) as usize)
            .sum::<usize>()
    );
    let joins = list.join_times();
    for at in &joins {
        let ratio = step_ratio(
            &edited.samples,
            (at * rate).round() as usize,
            edited.sample_rate,
        );
        assert!(ratio <= 3.0, "a click at {at:.3} s: step ratio {ratio}");
    }

    // Each kept word sounds in the edit where its re-timed transcript says: the samples around
    // its middle are the original's (away from the joins' fades).
    let placed = &edit.word_times;
    let retimed = dir.join("edited.json");
    ws.export_edited(
        &project.id,
        EditedFormat::Transcript(ExportFormat::Json),
        30,
        Some(retimed.clone()),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let retimed: headroom_speech::asr::Transcript =
        serde_json::from_slice(&std::fs::read(&retimed).unwrap()).unwrap();
    let retimed_words: Vec<_> = retimed.segments.iter().flat_map(|s| &s.words).collect();
    let kept_words: Vec<_> = placed
        .iter()
        .filter_map(|w| list.edited_time((w.start + w.end) / 2.0).map(|t| (w, t)))
        .collect();
    assert_eq!(retimed_words.len(), kept_words.len());
    let mut compared = 0;
    for (word, (placed, edited_middle)) in retimed_words.iter().zip(&kept_words) {
        let middle = (word.start + word.end) / 2.0;
        assert!(
            (middle - edited_middle).abs() < 0.02,
            "{word:?} at {middle}, sounds at {edited_middle}"
        );
        if joins.iter().any(|j| (j - edited_middle).abs() < 0.02) {
            continue;
        }
        // Where the re-timed transcript says the word is, not where the edit list says.
        let from_edit = (middle * rate).round() as usize;
        let from_original = (((placed.start + placed.end) / 2.0) * rate).round() as usize;
        let window = (0.005 * rate) as usize;
        for k in 0..window {
            let (a, b) = (
                edited.samples[from_edit + k],
                original.samples[from_original + k],
            );
            assert!((a - b).abs() < 2.0 / 32768.0, "{word:?}: {a} against {b}");
        }
        compared += 1;
    }
    assert!(
        compared >= retimed_words.len() / 2,
        "{compared} of {}",
        retimed_words.len()
    );

    // Heard again, the edited recording has no filler; the original is as it was.
    let again = ws.store().create("Edited").unwrap();
    let again = ws
        .transcribe(
            &again.id,
            &rendered,
            None,
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let heard: Vec<String> = again
        .segments
        .iter()
        .flat_map(|s| s.text.split_whitespace().map(str::to_string))
        .collect();
    let fillers: Vec<_> = headroom_core::cleanup::rules::disfluent_words(&heard)
        .into_iter()
        .filter(|(_, kind)| *kind == headroom_core::cleanup::rules::Disfluency::Filler)
        .map(|(i, _)| heard[i].clone())
        .collect();
    assert!(
        fillers.is_empty(),
        "fillers heard in the edit: {fillers:?} in {heard:?}"
    );
    assert_eq!(
        std::fs::read(&source).unwrap(),
        original_bytes,
        "the original is never changed"
    );

    // Changing the edit keeps the one before, which comes back.
    let shorter = ws
        .edit_recording(
            &project.id,
            EditIntent {
                max_pause: Some(0.3),
                ..EditIntent::default()
            },
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_ne!(shorter.edit.as_ref().unwrap().list, *list);
    let versions = ws.versions(&project.id).unwrap();
    assert_eq!(versions[0].reason, "before changing the edit");
    let restored = ws
        .restore_version(&project.id, &versions[0].id)
        .await
        .unwrap();
    assert_eq!(restored.edit.unwrap().list, *list);
}

/// A project whose recording is eight tone bursts (0.3 s, 0.2 s apart) with a transcript of
/// one segment saying them, each word timed on its burst: the window's edits need no model.
async fn bursts_project(ws: &Workstation, dir: &std::path::Path) -> String {
    use headroom_speech::asr::{Segment, Transcript, Word};
    use headroom_speech::audio::{write_wav, Audio};
    const WORDS: [&str; 8] = ["So", "the", "answer", "is", "yes", "and", "then", "no."];
    let rate = 16_000u32;
    let mut samples = vec![0.0f32; (rate as f64 * 0.3) as usize];
    let mut words = Vec::new();
    for (i, text) in WORDS.iter().enumerate() {
        let start = samples.len() as f64 / f64::from(rate);
        let burst = (0..(rate as usize * 3 / 10)).map(|n| {
            0.3 * (2.0 * std::f32::consts::PI * (220.0 + 40.0 * i as f32) * n as f32 / rate as f32)
                .sin()
        });
        samples.extend(burst);
        words.push(Word {
            start,
            end: start + 0.3,
            text: text.to_string(),
            probability: 1.0,
            speaker: None,
        });
        samples.extend(std::iter::repeat_n(0.0, (rate / 5) as usize));
    }
    let duration = samples.len() as f64 / f64::from(rate);
    let wav = dir.join("bursts.wav");
    write_wav(
        &wav,
        &Audio {
            samples,
            sample_rate: rate,
        },
    )
    .unwrap();
    let project = ws.store().create("Bursts").unwrap();
    let audio = ws.store().import_audio(&project, &wav).unwrap();
    let transcript = Transcript {
        speakers: Vec::new(),
        language: Some("en".into()),
        duration,
        segments: vec![Segment {
            start: words[0].start,
            end: words[7].end,
            text: WORDS.join(" "),
            speaker: None,
            words,
        }],
    };
    ws.update_project(&project.id, move |p| {
        p.set_transcript(&transcript);
        p.source_audio = Some(audio);
        Ok(())
    })
    .await
    .unwrap();
    project.id
}

/// The window's edits: a run of words struck at once, one of them brought back, struck again;
/// undo and redo as whole intents; a missing word refused with nothing changed.
#[tokio::test]
async fn words_are_struck_by_runs_brought_back_and_the_edit_undone_and_redone() {
    use headroom_workstation::editing::EditChange;
    let dir = scratch("edit-runs");
    let ws = workstation(&dir, &headroom_tests::closed_port_url());
    let id = bursts_project(&ws, &dir).await;
    let change = |c: EditChange| {
        let ws = ws.clone();
        let id = id.clone();
        async move { ws.change_edit(&id, c, CancellationToken::new()).await }
    };
    let shown = change(EditChange::default()).await.unwrap();
    assert!(shown.edit.is_none() && shown.cut_ids.is_empty());

    // A run, named backwards: both ends and the words between go.
    let struck = change(EditChange {
        strike: vec!["1:4-1:2".into()],
        ..EditChange::default()
    })
    .await
    .unwrap();
    assert_eq!(struck.cut_ids, ["1:2", "1:3", "1:4"]);
    // Three words (0.9 s), the two gaps between them and some of the gaps beside them.
    let removed = struck.original_secs - struck.edited_secs;
    assert!(
        (1.3..=1.7).contains(&removed),
        "three words and their gaps cut: {} of {}",
        struck.edited_secs,
        struck.original_secs
    );
    let first_intent = struck.edit.clone().unwrap().intent;

    // Kept, a struck word is no longer struck (and comes back); struck again, no longer kept.
    let kept = change(EditChange {
        keep: vec!["1:3".into()],
        ..EditChange::default()
    })
    .await
    .unwrap();
    assert_eq!(kept.cut_ids, ["1:2", "1:4"]);
    let intent = &kept.edit.as_ref().unwrap().intent;
    assert_eq!((intent.struck_words.len(), intent.kept_words.len()), (2, 1));
    let again = change(EditChange {
        strike: vec!["1:3".into()],
        ..EditChange::default()
    })
    .await
    .unwrap();
    assert_eq!(again.cut_ids, ["1:2", "1:3", "1:4"]);
    let intent = &again.edit.as_ref().unwrap().intent;
    assert_eq!((intent.struck_words.len(), intent.kept_words.len()), (3, 0));

    // Undo to an earlier intent, then to no edit; redo the first.
    let undone = change(EditChange {
        from: Some(kept.edit.clone().unwrap().intent),
        ..EditChange::default()
    })
    .await
    .unwrap();
    assert_eq!(undone.cut_ids, ["1:2", "1:4"]);
    let cleared = change(EditChange {
        clear: true,
        ..EditChange::default()
    })
    .await
    .unwrap();
    assert!(cleared.edit.is_none() && cleared.cut_ids.is_empty());
    let redone = change(EditChange {
        from: Some(first_intent),
        ..EditChange::default()
    })
    .await
    .unwrap();
    assert_eq!(redone.cut_ids, struck.cut_ids);
    assert_eq!(
        redone.edit.as_ref().unwrap().list,
        struck.edit.as_ref().unwrap().list
    );

    // A run to a word that is not there changes nothing; nor does an intent out of bounds.
    let refused = change(EditChange {
        strike: vec!["1:5-1:99".into()],
        ..EditChange::default()
    })
    .await;
    assert!(
        matches!(refused, Err(WorkstationError::NoSuchWord(ref w)) if w == "1:99"),
        "{refused:?}"
    );
    let mut outside = redone.edit.clone().unwrap().intent;
    outside.struck_words.push(1.0e6);
    let refused = change(EditChange {
        from: Some(outside),
        ..EditChange::default()
    })
    .await;
    assert!(
        matches!(refused, Err(WorkstationError::BadEdit(_))),
        "{refused:?}"
    );
    let now = change(EditChange::default()).await.unwrap();
    assert_eq!(now.cut_ids, redone.cut_ids);
    assert_eq!(now.modified_unix_ms, redone.modified_unix_ms);
}
