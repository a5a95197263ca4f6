//! The scenarios, in the order they run, each named for what it proves, with the scenarios it
//! needs: what one leaves (a project, its transcript, a voice, the text server chosen, a
//! model loaded) is what the next works on, as a user's session goes. A scenario whose
//! prerequisite failed fails with "skipped: needs <name>"; one picked by a filter runs its
//! prerequisites first (see `ui.rs`).

use crate::fixture::{Desktop, World};
use std::future::Future;
use std::pin::Pin;

mod cleanup;
mod edit;
mod keyboard;
mod languages;
mod long_project;
mod narration;
mod panels;
mod projects;
mod second_session;
mod settings;
mod speakers;
mod transcribe;
mod voices;
mod window;

/// Which app session a scenario runs in: the first on the fake text server with a speaking
/// microphone; the second, restarted on a replayed GPU trace with jobs a crash interrupted in
/// the interview project (so each of its scenarios needs that project).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Session {
    First,
    Second,
}

pub type Run = for<'a> fn(&'a Desktop, &'a mut World) -> Pin<Box<dyn Future<Output = ()> + 'a>>;

pub struct Scenario {
    pub name: &'static str,
    pub session: Session,
    /// The scenarios whose results this one works on (each runs before it).
    pub needs: &'static [&'static str],
    pub run: Run,
}

macro_rules! scenario {
    ($session:ident, $module:ident :: $name:ident $(, needs $($need:ident),+)?) => {
        Scenario {
            name: stringify!($name),
            session: Session::$session,
            needs: &[$($(stringify!($need)),+)?],
            run: |ui, world| Box::pin($module::$name(ui, world)),
        }
    };
}

pub const SCENARIOS: &[Scenario] = &[
    scenario!(
        First,
        window::the_window_is_drawn_on_the_cpu_without_a_gl_driver
    ),
    scenario!(First, projects::a_project_is_created_renamed_and_deleted),
    scenario!(
        First,
        transcribe::a_project_is_created_and_its_sample_transcribed_and_exported_as_srt
    ),
    scenario!(
        First,
        window::the_window_stays_responsive_while_a_model_loads,
        needs a_project_is_created_and_its_sample_transcribed_and_exported_as_srt
    ),
    scenario!(
        First,
        transcribe::an_edited_segment_is_saved_as_typed,
        needs a_project_is_created_and_its_sample_transcribed_and_exported_as_srt
    ),
    scenario!(
        First,
        keyboard::the_main_path_is_done_by_keyboard_alone,
        needs a_project_is_created_and_its_sample_transcribed_and_exported_as_srt
    ),
    scenario!(
        First,
        edit::a_recording_is_edited_by_its_words_played_and_exported,
        needs a_project_is_created_and_its_sample_transcribed_and_exported_as_srt
    ),
    scenario!(
        First,
        cleanup::cleanup_with_the_text_model_off_is_rule_based_and_sends_nothing,
        needs an_edited_segment_is_saved_as_typed
    ),
    scenario!(
        First,
        cleanup::a_full_text_lane_refuses_on_screen_with_its_reason_and_a_fallback,
        needs a_project_is_created_and_its_sample_transcribed_and_exported_as_srt
    ),
    scenario!(
        First,
        cleanup::a_text_server_on_another_machine_gets_nothing_without_consent,
        needs a_project_is_created_and_its_sample_transcribed_and_exported_as_srt
    ),
    scenario!(
        First,
        cleanup::cleanup_with_the_text_model_is_streamed_diffed_and_accepted,
        needs an_edited_segment_is_saved_as_typed
    ),
    scenario!(First, panels::the_gpu_panel_shows_this_machines_state),
    scenario!(
        First,
        voices::the_accepted_text_is_synthesized_and_saved_only_inside_the_project,
        needs cleanup_with_the_text_model_is_streamed_diffed_and_accepted
    ),
    scenario!(
        First,
        voices::a_voice_is_made_from_a_clip_and_matched_with_similarity_scores
    ),
    scenario!(
        First,
        voices::the_synthesize_view_speaks_in_the_made_voice_with_its_similarity,
        needs a_project_is_created_and_its_sample_transcribed_and_exported_as_srt,
        a_voice_is_made_from_a_clip_and_matched_with_similarity_scores
    ),
    scenario!(
        First,
        narration::the_project_is_narrated_in_its_voice_with_every_segment_fitted,
        needs cleanup_with_the_text_model_is_streamed_diffed_and_accepted,
        the_synthesize_view_speaks_in_the_made_voice_with_its_similarity
    ),
    scenario!(
        First,
        window::the_window_stays_responsive_while_a_narration_runs,
        needs the_project_is_narrated_in_its_voice_with_every_segment_fitted
    ),
    scenario!(
        First,
        narration::segments_play_from_the_waveforms_and_one_is_narrated_again,
        needs the_project_is_narrated_in_its_voice_with_every_segment_fitted
    ),
    scenario!(
        First,
        speakers::a_two_speaker_conversation_gets_named_lanes_with_alternating_turns
    ),
    scenario!(
        First,
        speakers::a_renamed_speaker_is_renamed_everywhere,
        needs a_two_speaker_conversation_gets_named_lanes_with_alternating_turns
    ),
    scenario!(
        First,
        speakers::each_speaker_is_narrated_in_their_own_voice,
        needs a_two_speaker_conversation_gets_named_lanes_with_alternating_turns
    ),
    scenario!(
        First,
        speakers::a_segment_split_into_a_new_speaker_is_merged_back,
        needs a_two_speaker_conversation_gets_named_lanes_with_alternating_turns
    ),
    scenario!(
        First,
        settings::settings_test_the_connection_and_find_the_model
    ),
    scenario!(
        First,
        settings::the_benchmark_runs_from_the_app_against_the_saved_server,
        needs settings_test_the_connection_and_find_the_model
    ),
    scenario!(
        First,
        transcribe::a_recording_is_transcribed_live_and_becomes_the_transcript,
        needs a_two_speaker_conversation_gets_named_lanes_with_alternating_turns
    ),
    scenario!(
        First,
        panels::the_memory_panel_lists_the_loaded_models_and_frees_them,
        needs a_project_is_created_and_its_sample_transcribed_and_exported_as_srt
    ),
    scenario!(
        First,
        projects::several_files_become_a_project_each_and_a_bad_one_is_named
    ),
    scenario!(
        First,
        projects::several_files_are_heard_on_the_servers_the_form_names
    ),
    scenario!(
        First,
        transcribe::a_transcription_is_paused_then_resumed_from_interrupted_jobs
    ),
    scenario!(
        First,
        languages::every_view_shows_its_text_whole_in_each_language_and_the_pseudo_locale,
        needs segments_play_from_the_waveforms_and_one_is_narrated_again
    ),
    scenario!(
        First,
        long_project::a_three_hour_project_opens_scrolls_and_saves_within_100_ms
    ),
    scenario!(
        First,
        window::the_first_session_shows_no_app_error_or_script_error
    ),
    scenario!(
        Second,
        second_session::interrupted_jobs_are_listed_at_start_then_discarded_or_resumed,
        needs a_project_is_created_and_its_sample_transcribed_and_exported_as_srt
    ),
    scenario!(
        Second,
        second_session::the_memory_chart_shows_a_replayed_traces_baseline_peak_and_delta,
        needs a_project_is_created_and_its_sample_transcribed_and_exported_as_srt
    ),
    scenario!(
        Second,
        second_session::cleanup_is_refused_at_the_segment_under_gpu_memory_pressure,
        needs a_project_is_created_and_its_sample_transcribed_and_exported_as_srt
    ),
    scenario!(
        Second,
        second_session::a_cloning_server_elsewhere_is_shown_redacted_and_gets_nothing_without_consent,
        needs a_project_is_created_and_its_sample_transcribed_and_exported_as_srt,
        a_voice_is_made_from_a_clip_and_matched_with_similarity_scores
    ),
    scenario!(
        Second,
        window::the_second_session_shows_no_script_error,
        needs a_project_is_created_and_its_sample_transcribed_and_exported_as_srt
    ),
    scenario!(
        Second,
        window::every_screen_the_suite_showed_passes_axe_without_serious_or_critical_violations
    ),
];
