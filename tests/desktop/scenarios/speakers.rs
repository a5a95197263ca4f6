//! Speakers: a two-speaker conversation (two clearly different embedded voices, made now)
//! transcribed with 2 speakers into a project of its own.

use crate::fixture::{ConversationTurns, Desktop, World, LONG_WAIT, WAIT};
use fantoccini::Locator;

/// The name of the speaker of segment `i`, as the Transcribe view shows it.
async fn speaker_of(ui: &Desktop, i: usize) -> String {
    ui.text(&format!("segment-speaker-name-{i}")).await
}

/// What the conversation scenario found.
fn turns(w: &World) -> &ConversationTurns {
    w.conversation
        .as_ref()
        .expect("the conversation was transcribed")
}

/// Coloured lanes with names, each segment named; the turns alternate between the lanes.
pub async fn a_two_speaker_conversation_gets_named_lanes_with_alternating_turns(
    ui: &Desktop,
    w: &mut World,
) {
    let conversation = headroom_tests::conversation::two_speakers(
        &headroom_tests::services(headroom_core::config::Config::default()),
        &w.home.join("conversation.wav"),
    )
    .await;
    ui.click("nav-projects").await;
    ui.type_into("project-name-input", "Conversation").await;
    ui.click("project-create").await;
    ui.until_text("current-project-name", WAIT, |t| t == "Conversation")
        .await;
    ui.find("transcribe-speakers")
        .await
        .select_by_value("2")
        .await
        .unwrap();
    ui.until_text("transcribe-speakers", WAIT, |_| {
        std::fs::read_to_string(w.projects.join("conversation/project.json"))
            .is_ok_and(|m| m.contains("\"speakers\": \"2\""))
    })
    .await;
    ui.type_into("transcribe-path", conversation.path.to_str().unwrap())
        .await;
    ui.click("transcribe-start").await;
    ui.find_within("speaker-lanes", LONG_WAIT).await;
    for id in ["S1", "S2"] {
        let lane = ui.find(&format!("speaker-lane-{id}")).await;
        let name = lane.attr("data-name").await.unwrap().unwrap_or_default();
        assert!(!name.is_empty(), "lane {id} is named");
        assert!(
            ui.text(&format!("speaker-lane-name-{id}"))
                .await
                .contains(&name),
            "the lane shows its name"
        );
        let turns = lane
            .find_all(Locator::Css("button.speaker-turn"))
            .await
            .unwrap();
        assert!(!turns.is_empty(), "lane {id} has turns");
    }
    assert!(ui.gone("speaker-lane-S3").await, "two speakers");
    // The conversation's turns alternate: the first segment of another speaker than the
    // first's is the second turn's, and it is on the other lane.
    let first = speaker_of(ui, 0).await;
    let mut turn = 1;
    while speaker_of(ui, turn).await == first {
        turn += 1;
        assert!(
            !ui.gone(&format!("segment-{turn}")).await,
            "every segment is {first}'s"
        );
    }
    let second_id = if ui.gone(&format!("speaker-lane-S2-segment-{turn}")).await {
        "S1"
    } else {
        "S2"
    };
    assert!(
        ui.gone(&format!("speaker-lane-{second_id}-segment-0"))
            .await,
        "the first segment is on the other lane"
    );
    ui.screenshot("07-speakers").await;
    w.conversation = Some(ConversationTurns { second_id, turn });
}

/// Renamed everywhere: the lane, the panel, every segment of that speaker, the manifest.
pub async fn a_renamed_speaker_is_renamed_everywhere(ui: &Desktop, w: &mut World) {
    let &ConversationTurns { second_id, turn } = turns(w);
    ui.click("nav-transcribe").await;
    ui.type_into(&format!("speaker-rename-{second_id}"), "Grace")
        .await;
    ui.click(&format!("speaker-rename-save-{second_id}")).await;
    ui.until_text(&format!("speaker-lane-name-{second_id}"), WAIT, |t| {
        t.contains("Grace")
    })
    .await;
    assert_eq!(speaker_of(ui, turn).await, "Grace");
    assert_eq!(ui.text(&format!("speaker-name-{second_id}")).await, "Grace");
    let manifest = std::fs::read_to_string(w.projects.join("conversation/project.json")).unwrap();
    assert!(manifest.contains("\"name\": \"Grace\""), "{manifest}");
}

/// Narrated per speaker: the second speaker in a voice chosen for them, the other in their
/// default.
pub async fn each_speaker_is_narrated_in_their_own_voice(ui: &Desktop, w: &mut World) {
    let &ConversationTurns { second_id, turn } = turns(w);
    ui.click("nav-narration").await;
    ui.choose(
        &format!("narration-speaker-voice-{second_id}"),
        "en-gb",
        WAIT,
    )
    .await;
    ui.click("narration-start").await;
    ui.until_text("narration-summary", LONG_WAIT, |t| t.contains("narrated"))
        .await;
    let take_voice = |i: usize| async move { ui.text(&format!("narration-take-voice-{i}")).await };
    assert_eq!(take_voice(turn).await, "en-gb", "Grace's chosen voice");
    let other = take_voice(0).await;
    assert!(!other.is_empty() && other != "en-gb", "{other}");
    assert_eq!(
        ui.text(&format!("narration-speaker-current-{second_id}"))
            .await,
        "now: en-gb"
    );
    ui.screenshot("07b-narration-speakers").await;
}

/// The first segment split before its third word into a new speaker, then that speaker merged
/// back: its lane comes and goes, with no error.
pub async fn a_segment_split_into_a_new_speaker_is_merged_back(ui: &Desktop, _w: &mut World) {
    ui.click("nav-transcribe").await;
    ui.click("segment-split-0").await;
    ui.find("segment-split-speaker-0")
        .await
        .select_by_value("new")
        .await
        .unwrap();
    ui.click("segment-split-at-0-2").await;
    ui.find("speaker-lane-S3").await;
    assert_eq!(speaker_of(ui, 1).await, "Speaker 3");
    ui.find("speaker-merge-from")
        .await
        .select_by_value("S3")
        .await
        .unwrap();
    ui.find("speaker-merge-into")
        .await
        .select_by_value("S1")
        .await
        .unwrap();
    ui.click("speaker-merge").await;
    ui.until_gone("speaker-lane-S3", WAIT).await;
    assert_ne!(speaker_of(ui, 1).await, "Speaker 3");
    assert!(
        ui.gone("rejection-speakers").await,
        "no error in the speakers panel"
    );
    assert!(ui.gone("rejection-transcribe").await);
    ui.screenshot("07c-speakers-merged").await;
}
