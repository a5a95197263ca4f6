//! `headroom bench batch|isolation|long|narration|speakers|speech|voices`: the audio suites' arguments,
//! turned into `headroom_bench::suites` configurations; their reports printed as tables, and
//! as JSON with `--json`.

use super::report::save_json;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::Args;
use headroom_bench::suites::batch::BatchBenchConfig;
use headroom_bench::suites::isolation::{BatchKind, IsolationBenchConfig, ProbeKind};
use headroom_bench::suites::long::LongBenchConfig;
use headroom_bench::suites::narration::NarrationBenchConfig;
use headroom_bench::suites::speakers::{DiarizeOverrides, SpeakersBenchConfig, VoiceSet};
use headroom_bench::suites::speech::{SpeechBenchConfig, DEFAULT_TEXT};
use headroom_bench::suites::voices::VoicesBenchConfig;
use headroom_bench::suites::{self, Choice};
use headroom_services::speech::MAX_SPEECH_INPUT_CHARS;
use headroom_services::Services;
use headroom_speech::voice::matching::MatchSettings;
use headroom_workstation::narration::NarrationMode;
use std::path::PathBuf;
use std::sync::Arc;

/// A suite's lines of progress: on standard error, as they come.
fn progress(line: &str) {
    eprintln!("{line}");
}

/// Parses one of a suite's kinds by the name its report uses; `--help` lists each with its
/// line.
fn choice<T: Choice + Clone>() -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(
        T::ALL
            .iter()
            .map(|kind| PossibleValue::new(kind.name()).help(kind.help())),
    )
    .map(|name| {
        *T::ALL
            .iter()
            .find(|kind| kind.name() == name)
            .expect("clap offers only the listed names")
    })
}

/// The longest conversation the speakers suite makes (three hours and more are what long
/// recordings are measured at; it is held in memory, 230 MB an hour).
const MAX_CONVERSATION_SECS: f64 = 4.0 * 3600.0;

/// A conversation's length in seconds: 10 s (a few turns) to four hours.
fn conversation_length(text: &str) -> Result<f64, String> {
    let seconds: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(10.0..=MAX_CONVERSATION_SECS).contains(&seconds) {
        return Err(format!(
            "a conversation is 10 to {MAX_CONVERSATION_SECS} seconds long, not {seconds}"
        ));
    }
    Ok(seconds)
}

#[derive(Args, Debug)]
pub struct IsolationBenchArgs {
    /// The interactive probes, comma-separated (default: all).
    #[arg(long, value_parser = choice::<ProbeKind>(), value_delimiter = ',')]
    probes: Vec<ProbeKind>,
    /// The kinds of batch work run under them, comma-separated (default: all).
    #[arg(long, value_parser = choice::<BatchKind>(), value_delimiter = ',')]
    batch: Vec<BatchKind>,
    /// Timed runs of each probe, idle and under each kind of batch work [default: 8, 3 with
    /// --quick].
    #[arg(long)]
    runs: Option<usize>,
    /// Seconds each kind of batch work runs alone, for its own speed [default: 20, 5 with
    /// --quick].
    #[arg(long)]
    alone_secs: Option<f64>,
    /// Pause between probes, as between a person's requests [default: 250, 100 with --quick].
    #[arg(long)]
    pause_ms: Option<u64>,
    /// A smoke test: fewer runs and shorter windows (about 3 minutes on 2 cores).
    #[arg(long)]
    quick: bool,
    /// The recording batch work transcribes and narrates, and the probes' clips are cut from.
    #[arg(long, default_value = "samples/interview.flac")]
    clip: PathBuf,
    /// Batch work competes for the CPU instead of giving way to interactive work
    /// (`audio_lane.batch_gives_way = false`): the figures without the mechanism.
    #[arg(long)]
    batch_competes: bool,
    /// The text model's server for the narrations' text stage (LLM cleanup on); without it
    /// the rules clean the text.
    #[arg(long)]
    upstream: Option<String>,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub async fn isolation(args: IsolationBenchArgs, services: Arc<Services>) -> anyhow::Result<()> {
    let defaults = IsolationBenchConfig::new(args.clip, args.quick);
    let config = IsolationBenchConfig {
        probes: args.probes,
        batch: args.batch,
        runs: args.runs.unwrap_or(defaults.runs),
        alone_secs: args.alone_secs.unwrap_or(defaults.alone_secs),
        pause_ms: args.pause_ms.unwrap_or(defaults.pause_ms),
        batch_competes: args.batch_competes,
        upstream: args.upstream,
        ..defaults
    };
    let report = suites::isolation::run(services, &config, &progress).await?;
    print!("{}", suites::isolation::render_text(&report));
    save_json(args.json.as_deref(), &report)
}

#[derive(Args, Debug)]
pub struct NarrationBenchArgs {
    /// The recording narrated.
    #[arg(long, default_value = "samples/interview.flac")]
    clip: PathBuf,
    /// The text model's server (LLM cleanup on); without it the rules clean the text.
    #[arg(long)]
    upstream: Option<String>,
    /// cleanup, rewrite or translate (translate needs --upstream and --to).
    #[arg(long, default_value = "cleanup")]
    mode: NarrationMode,
    #[arg(long)]
    to: Option<String>,
    /// Interactive jobs timed of each kind, idle and during narration.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub async fn narration(args: NarrationBenchArgs, services: Arc<Services>) -> anyhow::Result<()> {
    let config = NarrationBenchConfig {
        clip: args.clip,
        upstream: args.upstream,
        mode: args.mode,
        to: args.to,
        runs: args.runs,
    };
    let report = suites::narration::run(services, &config, &progress).await?;
    print!("{}", suites::narration::render_text(&report));
    save_json(args.json.as_deref(), &report)
}

#[derive(Args, Debug)]
pub struct SpeakersBenchArgs {
    /// Which voices the conversations are made of.
    #[arg(long, value_parser = choice::<VoiceSet>(), default_value = "test")]
    set: VoiceSet,
    /// Numbers of speakers, one group of conversations each.
    #[arg(long, value_delimiter = ',', default_values_t = [2, 3, 4, 5])]
    speakers: Vec<usize>,
    /// Conversations per number of speakers and length.
    #[arg(long, default_value_t = 3)]
    conversations: usize,
    /// Lengths of the conversations, in seconds of audio (e.g. 60,1800,5400,10800): each
    /// number of speakers gets its conversations at each length, a row each; a conversation's
    /// voices are the same at every length.
    #[arg(long, value_delimiter = ',', default_values_t = [60.0], value_parser = conversation_length)]
    seconds: Vec<f64>,
    /// Seed for the conversations (speakers, turns, pauses, noise).
    #[arg(long, default_value_t = 29)]
    seed: u64,
    /// Synthesized sentences are kept here between runs (without it, they are made again in a
    /// private temporary folder removed at the end).
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Writes each conversation's audio and reference (RTTM) here.
    #[arg(long)]
    keep: Option<PathBuf>,
    /// Override the diarizer's clustering threshold (cosine).
    #[arg(long)]
    same_speaker: Option<f32>,
    /// Override the diarizer's threshold for two whole speakers being one voice (cosine).
    #[arg(long)]
    same_voice: Option<f32>,
    /// Override the diarizer's speaker-change penalty.
    #[arg(long)]
    change_penalty: Option<f32>,
    /// Override the known-speaker threshold (cosine).
    #[arg(long)]
    known_threshold: Option<f32>,
    /// Override the windows pooled into one piece for clustering (their step is half).
    #[arg(long)]
    piece_windows: Option<usize>,
    /// Override speech detection's threshold (0–1).
    #[arg(long)]
    vad_threshold: Option<f32>,
    /// Override the padding kept around speech, in milliseconds.
    #[arg(long)]
    speech_pad_ms: Option<u32>,
    /// Override the longest turn a minor estimated speaker must be heard for, in seconds.
    #[arg(long)]
    min_turn_secs: Option<f64>,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub async fn speakers(args: SpeakersBenchArgs, services: &Services) -> anyhow::Result<()> {
    let config = SpeakersBenchConfig {
        set: args.set,
        speakers: args.speakers,
        conversations: args.conversations,
        lengths: args.seconds,
        seed: args.seed,
        cache: args.cache,
        keep: args.keep,
        diarizer: DiarizeOverrides {
            same_speaker: args.same_speaker,
            same_voice: args.same_voice,
            change_penalty: args.change_penalty,
            known_threshold: args.known_threshold,
            piece_windows: args.piece_windows,
            vad_threshold: args.vad_threshold,
            speech_pad_ms: args.speech_pad_ms,
            min_turn_secs: args.min_turn_secs,
        },
    };
    let report = suites::speakers::run(services, &config, &progress).await?;
    print!("{}", suites::speakers::render_text(&report));
    save_json(args.json.as_deref(), &report)
}

#[derive(Args, Debug)]
pub struct LongBenchArgs {
    /// Lengths of the conversations, in minutes.
    #[arg(long, value_delimiter = ',', default_values_t = [6.0, 30.0, 90.0, 180.0])]
    minutes: Vec<f64>,
    /// Voices in each conversation, drawn from --set by the seed.
    #[arg(long, default_value_t = 4)]
    speakers: usize,
    /// Which voices the conversations are made of.
    #[arg(long, value_parser = choice::<VoiceSet>(), default_value = "test")]
    set: VoiceSet,
    /// These voices instead (the speakers suite's names, comma-separated).
    #[arg(long, value_delimiter = ',')]
    voices: Option<Vec<String>>,
    /// Speech model.
    #[arg(long, default_value = headroom_speech::models::DEFAULT_MODEL)]
    model: String,
    /// Measure transcription alone, without `--speakers auto`.
    #[arg(long)]
    no_speakers: bool,
    /// Seed for the voices and the conversations.
    #[arg(long, default_value_t = 41)]
    seed: u64,
    /// Synthesized sentences are kept here between runs.
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Writes each conversation's audio and reference (RTTM) here.
    #[arg(long)]
    keep: Option<PathBuf>,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub async fn long(args: LongBenchArgs, services: &Services) -> anyhow::Result<()> {
    let mut config = LongBenchConfig::new(std::env::current_exe()?);
    config.minutes = args.minutes;
    config.speakers = args.speakers;
    config.set = args.set;
    config.voices = args.voices;
    config.model = args.model;
    config.with_speakers = !args.no_speakers;
    config.seed = args.seed;
    config.cache = args.cache;
    config.keep = args.keep;
    let report = suites::long::run(services, &config, &progress).await?;
    print!("{}", suites::long::render_text(&report));
    save_json(args.json.as_deref(), &report)
}

#[derive(Args, Debug)]
pub struct EditBenchArgs {
    /// Which voices the recordings are spoken in, drawn by the seed.
    #[arg(long, value_parser = choice::<VoiceSet>(), default_value = "test")]
    set: VoiceSet,
    /// These voices instead (the speakers suite's names, comma-separated).
    #[arg(long, value_delimiter = ',')]
    voices: Option<Vec<String>>,
    /// Recordings (one voice each) when no voices are named.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=16))]
    recordings: u16,
    /// Sentences in each recording (every other with a filler, every third followed by a
    /// long pause).
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u16).range(2..=2000))]
    sentences: u16,
    /// The pause limit the edit asks for, in seconds.
    #[arg(long, default_value_t = 0.7)]
    max_pause: f64,
    /// Speech model.
    #[arg(long, default_value = headroom_speech::models::DEFAULT_MODEL)]
    model: String,
    /// Seed for the voices and the pauses.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Synthesized phrases are kept here between runs.
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Writes each recording here.
    #[arg(long)]
    keep: Option<PathBuf>,
    /// Transcribe hearing fillers, as a project set so does: on (the default) or off.
    #[arg(long, value_parser = crate::project::parse_switch, default_value = "on", action = clap::ArgAction::Set)]
    hear_fillers: bool,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub async fn edit(args: EditBenchArgs, services: Arc<Services>) -> anyhow::Result<()> {
    let config = suites::edit::EditBenchConfig {
        set: args.set,
        voices: args.voices,
        voice_count: args.recordings.into(),
        sentences: args.sentences.into(),
        max_pause: args.max_pause,
        model: args.model,
        seed: args.seed,
        cache: args.cache,
        keep: args.keep,
        hear_fillers: args.hear_fillers,
    };
    let report = suites::edit::run(services, &config, &progress).await?;
    print!("{}", suites::edit::render_text(&report));
    save_json(args.json.as_deref(), &report)
}

#[derive(Args, Debug)]
pub struct BatchBenchArgs {
    /// Recordings in the batch.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=100))]
    files: u16,
    /// Each recording's length, in minutes.
    #[arg(long, default_value_t = 5.0)]
    minutes: f64,
    /// Worker counts to measure (the first is the speed-up's base).
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2, 3],
          value_parser = clap::value_parser!(u16).range(1..=16))]
    workers: Vec<u16>,
    /// Skip the run with a worker killed a third of the way through.
    #[arg(long)]
    no_kill: bool,
    /// Give each worker this many cores of its own (with `taskset`), so the speed-up shows how
    /// the work spreads rather than how the workers share the cores.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pin: Option<u16>,
    /// Speech model.
    #[arg(long, default_value = headroom_speech::models::DEFAULT_MODEL)]
    model: String,
    /// Which voices the conversations are made of.
    #[arg(long, value_parser = choice::<VoiceSet>(), default_value = "test")]
    set: VoiceSet,
    /// Voices in each conversation.
    #[arg(long, default_value_t = 3)]
    speakers: usize,
    /// Seed for the voices and the conversations.
    #[arg(long, default_value_t = 41)]
    seed: u64,
    /// Synthesized sentences are kept here between runs.
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub async fn batch(args: BatchBenchArgs, services: &Services) -> anyhow::Result<()> {
    if !(args.minutes.is_finite() && args.minutes > 0.0 && args.minutes <= 240.0) {
        anyhow::bail!("--minutes {}: more than 0 and at most 240", args.minutes);
    }
    let mut config = BatchBenchConfig::new(std::env::current_exe()?);
    config.files = args.files.into();
    config.minutes = args.minutes;
    config.workers = args.workers.into_iter().map(usize::from).collect();
    config.kill_one = !args.no_kill;
    config.cores_per_worker = args.pin.map(usize::from);
    config.model = args.model;
    config.set = args.set;
    config.speakers = args.speakers;
    config.seed = args.seed;
    config.cache = args.cache;
    let report = suites::batch::run(services, &config, &progress).await?;
    print!("{}", suites::batch::render_text(&report));
    save_json(args.json.as_deref(), &report)
}

#[derive(Args, Debug)]
pub struct SpeechBenchArgs {
    /// Voices to time (any `headroom speak --list-voices` name or OpenAI's); repeat.
    #[arg(long = "voice", default_values_t = ["alloy".to_string(), "en-us".to_string()])]
    voices: Vec<String>,
    /// response_format to time; repeat.
    #[arg(long = "format", default_values_t = ["pcm".to_string(), "mp3".to_string(), "opus".to_string()])]
    formats: Vec<String>,
    /// Timed requests per voice and format (after one warm-up).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// A file with the text to speak instead of the built-in ten sentences.
    #[arg(long)]
    text: Option<PathBuf>,
    /// Write the report as JSON here (else on standard output).
    #[arg(long)]
    json: Option<PathBuf>,
}

pub async fn speech(args: SpeechBenchArgs, services: &Services) -> anyhow::Result<()> {
    let text = match &args.text {
        // At most what one speech request takes (the server refuses more): four bytes a
        // character at most in UTF-8.
        Some(path) => {
            let limit = 4 * MAX_SPEECH_INPUT_CHARS as u64;
            let bytes = headroom_base::input::read_regular(path, limit)
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
            String::from_utf8(bytes)
                .map_err(|_| anyhow::anyhow!("{} is not UTF-8 text", path.display()))?
        }
        None => DEFAULT_TEXT.to_string(),
    };
    let config = SpeechBenchConfig {
        voices: args.voices,
        formats: args.formats,
        runs: args.runs,
        text,
    };
    let report = suites::speech::run(services, &config, &progress).await?;
    // The table on standard error: without --json the report is standard output.
    eprint!("{}", suites::speech::render_text(&report));
    super::report::write_json(&args.json, &report)
}

#[derive(Args, Debug)]
pub struct VoicesBenchArgs {
    /// Candidate takes each match may make.
    #[arg(long, default_value_t = MatchSettings::default().budget)]
    budget: usize,
    /// Skip the match and measure only the synthesizers.
    #[arg(long)]
    no_match: bool,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub async fn voices(args: VoicesBenchArgs, services: &Services) -> anyhow::Result<()> {
    let config = VoicesBenchConfig {
        budget: args.budget,
        with_match: !args.no_match,
    };
    let report = suites::voices::run(services, &config, &progress).await?;
    print!("{}", suites::voices::render_text(&report));
    save_json(args.json.as_deref(), &report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_is_ten_seconds_to_four_hours() {
        assert_eq!(conversation_length(" 5400 "), Ok(5400.0));
        assert!(conversation_length("9")
            .unwrap_err()
            .contains("10 to 14400"));
        assert!(conversation_length("14401").is_err());
        assert!(conversation_length("an hour")
            .unwrap_err()
            .contains("not a number"));
        assert!(conversation_length("NaN").is_err());
    }
}
