//! Diarization accuracy on conversations synthesized here, from
//! voices of several engines (Kokoro, Piper, espeak-ng and, when installed, flite and Festival), with
//! turns of 1–10 s, pauses of 0.2–1 s, short back-channel turns and background noise.
//!
//! The voices are split in two sets: the diarizer's settings were chosen on the `tune` set;
//! the figures that count are the `test` set's, voices the choice never heard. Reported per
//! number of speakers: the diarization error rate (missed speech, false alarm, confusion;
//! 0.25 s collar), how often the number of speakers was estimated right, and how known
//! speakers (voice profiles made from other sentences by the same voice) were named.

use super::{installed, Choice, Progress, SuiteError, REFERENCE};
use headroom_services::Services;
use headroom_speech::asr::der::{diarization_error, DerReport, Labelled};
use headroom_speech::asr::diarize::{
    Diarization, DiarizeOptions, DiarizeParams, Diarizer, KnownSpeaker, SpeakerCount,
};
use headroom_speech::audio::stretch::sound_bounds;
use headroom_speech::audio::{decode_file, write_wav, Audio, DecodeLimits};
use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

const RATE: u32 = 16_000;

/// The two sets of voices (each described by its `Choice::help`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VoiceSet {
    Tune,
    Test,
}

impl Choice for VoiceSet {
    const ALL: &'static [VoiceSet] = &[VoiceSet::Tune, VoiceSet::Test];

    fn name(self) -> &'static str {
        match self {
            VoiceSet::Tune => "tune",
            VoiceSet::Test => "test",
        }
    }

    fn help(self) -> &'static str {
        match self {
            VoiceSet::Tune => "voices the settings were chosen on",
            VoiceSet::Test => "voices kept apart from the choice: the figures that count",
        }
    }
}

/// The diarizer's settings a run may change (each `None`: the shipped value).
#[derive(Debug, Clone, Default)]
pub struct DiarizeOverrides {
    /// The clustering threshold (cosine).
    pub same_speaker: Option<f32>,
    /// The threshold for two whole speakers being one voice (cosine).
    pub same_voice: Option<f32>,
    /// The speaker-change penalty.
    pub change_penalty: Option<f32>,
    /// The known-speaker threshold (cosine).
    pub known_threshold: Option<f32>,
    /// Windows pooled into one piece for clustering (their step is half).
    pub piece_windows: Option<usize>,
    /// Speech detection's threshold (0–1).
    pub vad_threshold: Option<f32>,
    /// Padding kept around speech, in milliseconds.
    pub speech_pad_ms: Option<u32>,
    /// The longest turn a minor estimated speaker must be heard for, in seconds.
    pub min_turn_secs: Option<f64>,
}

impl DiarizeOverrides {
    /// The shipped settings with these changes.
    pub fn params(&self) -> DiarizeParams {
        let mut params = DiarizeParams::default();
        if let Some(v) = self.same_speaker {
            params.same_speaker = v;
        }
        if let Some(v) = self.same_voice {
            params.same_voice = v;
        }
        if let Some(v) = self.change_penalty {
            params.change_penalty = v;
        }
        if let Some(v) = self.known_threshold {
            params.known_threshold = v;
        }
        if let Some(v) = self.min_turn_secs {
            params.min_turn_secs = v;
        }
        if let Some(v) = self.vad_threshold {
            params.vad.threshold = v;
            params.vad.neg_threshold = (v - 0.15).max(0.01);
        }
        if let Some(v) = self.piece_windows {
            params.piece_windows = v;
            params.piece_step = v.div_ceil(2);
        }
        if let Some(v) = self.speech_pad_ms {
            params.vad.speech_pad_ms = v;
        }
        params
    }
}

/// What the speakers suite makes and scores.
#[derive(Debug, Clone)]
pub struct SpeakersBenchConfig {
    /// Which voices the conversations are made of.
    pub set: VoiceSet,
    /// Numbers of speakers, one group of conversations each.
    pub speakers: Vec<usize>,
    /// Conversations per number of speakers and length.
    pub conversations: usize,
    /// Lengths of the conversations, in seconds of audio: each number of speakers gets its
    /// conversations at each length, each conversation's voices the same at every length (an
    /// hour's conversation drifts where a minute's does not).
    pub lengths: Vec<f64>,
    /// Seed for the conversations (speakers, turns, pauses, noise).
    pub seed: u64,
    /// Where synthesized sentences are kept between runs (`None`: a private temporary folder
    /// removed at the end).
    pub cache: Option<PathBuf>,
    /// Where each conversation's audio and reference (RTTM) are written.
    pub keep: Option<PathBuf>,
    pub diarizer: DiarizeOverrides,
}

impl Default for SpeakersBenchConfig {
    fn default() -> Self {
        SpeakersBenchConfig {
            set: VoiceSet::Test,
            speakers: vec![2, 3, 4, 5],
            conversations: 3,
            lengths: vec![60.0],
            seed: 29,
            cache: None,
            keep: None,
            diarizer: DiarizeOverrides::default(),
        }
    }
}

/// A voice: the engine's name for it and the set it belongs to.
struct BenchVoice {
    id: &'static str,
    set: VoiceSet,
}

const VOICES: &[BenchVoice] = &[
    BenchVoice {
        id: "kokoro-jf_alpha",
        set: VoiceSet::Tune,
    },
    BenchVoice {
        id: "kokoro-jf_gongitsune",
        set: VoiceSet::Tune,
    },
    BenchVoice {
        id: "en-us+m1",
        set: VoiceSet::Tune,
    },
    BenchVoice {
        id: "en-us+f2",
        set: VoiceSet::Tune,
    },
    BenchVoice {
        id: "en-gb+m3",
        set: VoiceSet::Tune,
    },
    BenchVoice {
        id: "flite-awb",
        set: VoiceSet::Tune,
    },
    BenchVoice {
        id: "flite-kal16",
        set: VoiceSet::Tune,
    },
    // Festival's voices (apt: festival festvox-kdlpc16k festvox-us-slt-hts festvox-italp16k
    // festvox-itapc16k): the Italian two read English as Italians would.
    BenchVoice {
        id: "festival-ked_diphone",
        set: VoiceSet::Tune,
    },
    BenchVoice {
        id: "festival-cmu_us_slt_arctic_hts",
        set: VoiceSet::Tune,
    },
    BenchVoice {
        id: "festival-lp_diphone",
        set: VoiceSet::Tune,
    },
    BenchVoice {
        id: "festival-pc_diphone",
        set: VoiceSet::Tune,
    },
    BenchVoice {
        id: "kokoro-jf_nezumi",
        set: VoiceSet::Test,
    },
    BenchVoice {
        id: "kokoro-jf_tebukuro",
        set: VoiceSet::Test,
    },
    BenchVoice {
        id: "kokoro-jm_kumo",
        set: VoiceSet::Test,
    },
    BenchVoice {
        id: "piper-joe",
        set: VoiceSet::Test,
    },
    BenchVoice {
        id: "en-us+m7",
        set: VoiceSet::Test,
    },
    BenchVoice {
        id: "en-gb+f4",
        set: VoiceSet::Test,
    },
    BenchVoice {
        id: "en-us+m4",
        set: VoiceSet::Test,
    },
    BenchVoice {
        id: "flite-rms",
        set: VoiceSet::Test,
    },
    BenchVoice {
        id: "flite-slt",
        set: VoiceSet::Test,
    },
];

/// The voice named `name` (its `'static` id), if the suite has it.
pub(crate) fn bench_voice(name: &str) -> Option<&'static str> {
    VOICES.iter().map(|v| v.id).find(|id| *id == name)
}

/// Every voice's name.
pub(crate) fn all_voices() -> Vec<&'static str> {
    VOICES.iter().map(|v| v.id).collect()
}

/// What people say in the conversations: one sentence each, 1–5 s spoken.
const LINES: &[&str] = &[
    "I think we should leave before the traffic gets bad.",
    "Did you see the message from the printer about the proofs?",
    "The river was higher this morning than I have ever seen it.",
    "We can move the meeting to Thursday if that helps.",
    "My sister bought a bakery last spring and she has not slept since.",
    "The tickets were cheaper than I expected.",
    "Honestly, the second draft reads much better than the first.",
    "Could you send me the numbers from the last quarter?",
    "The train stopped for twenty minutes outside the station.",
    "I planted tomatoes, but the snails found them first.",
    "That is not what the contract says about the deadline.",
    "We recorded the choir in the old church on Sunday evening.",
    "Let me check the calendar and get back to you.",
    "The museum is closed on Mondays, so we went to the market instead.",
    "He fixed the bicycle with nothing but a spoon and some wire.",
    "The coffee machine on the third floor is broken again.",
    "If it rains tomorrow, we will film the interview indoors.",
    "She told me the story twice, and it was different both times.",
    "I would rather walk; it is only fifteen minutes from here.",
    "The new microphones arrived, but one of the cables is missing.",
    "Our neighbours have a dog that sings when the church bells ring.",
    "The budget covers two more weeks of editing, not three.",
    "Nobody expected the audience to laugh at that scene.",
    "We should label every box before the movers arrive.",
    "The lighthouse keeper wrote a letter to the harbour master every week.",
    "Please remind me to water the plants on Friday.",
    "It took three attempts to get the sound of the door right.",
    "The children built a raft and it actually floated.",
    "I have never understood why the clocks change in autumn.",
    "The interview ran long, so the podcast will be in two parts.",
];

/// Short turns people say while listening.
const BACKCHANNELS: &[&str] = &[
    "Yeah.", "Right.", "Okay.", "Sure.", "I see.", "Exactly.", "Really?", "Mm-hmm.",
];

/// One spoken sentence of a conversation, as scored.
pub(crate) struct Utterance {
    pub start: f64,
    pub end: f64,
    pub speaker: usize,
    /// What was said (for a transcript's word errors).
    pub text: String,
}

pub(crate) struct Conversation {
    pub voices: Vec<&'static str>,
    pub audio: Audio,
    pub utterances: Vec<Utterance>,
    pub snr_db: f64,
}

impl Conversation {
    /// Who said what when, as diarization error is scored against.
    pub fn reference(&self) -> Vec<Labelled> {
        self.utterances
            .iter()
            .map(|u| Labelled {
                start: u.start,
                end: u.end,
                speaker: self.voices[u.speaker].to_string(),
            })
            .collect()
    }
}

#[derive(Debug, Serialize)]
pub struct ConversationRow {
    pub speakers: usize,
    pub voices: Vec<String>,
    /// The length asked for (its group), and the length made (a turn is not cut).
    pub length_secs: f64,
    pub seconds: f64,
    pub snr_db: f64,
    pub backchannels: usize,
    pub estimated_speakers: usize,
    pub der: DerReport,
    pub der_given_count: DerReport,
    pub known: KnownRow,
    pub diarize_secs: f64,
}

/// Known speakers: profiles for some of the conversation's voices (from other sentences), and
/// for two voices not in it.
#[derive(Debug, Serialize, Default)]
pub struct KnownRow {
    pub profiles_present: usize,
    pub named_right: usize,
    pub named_wrong: usize,
    pub unnamed: usize,
    /// The recognised speakers' similarity to their own profile, and the highest any speaker
    /// had to a profile of another voice.
    pub same_voice_similarity: Vec<f32>,
    pub other_voice_max_similarity: f32,
}

#[derive(Debug, Serialize)]
pub struct SizeRow {
    pub speakers: usize,
    /// The length the group's conversations were asked for.
    pub length_secs: f64,
    pub conversations: usize,
    pub der: f64,
    pub missed: f64,
    pub false_alarm: f64,
    pub confusion: f64,
    pub der_given_count: f64,
    pub count_right: usize,
}

#[derive(Debug, Serialize)]
pub struct SpeakersBenchReport {
    pub set: VoiceSet,
    pub seed: u64,
    pub collar_secs: f64,
    pub same_speaker: f32,
    pub same_voice: f32,
    pub change_penalty: f32,
    pub known_threshold: f32,
    pub sizes: Vec<SizeRow>,
    pub known_named_right: usize,
    pub known_named_wrong: usize,
    pub known_unnamed: usize,
    pub known_present: usize,
    pub conversations: Vec<ConversationRow>,
}

/// Makes the conversations, diarizes each with and without the number of speakers given, and
/// names known speakers from profiles made of other sentences.
pub async fn run(
    services: &Services,
    args: &SpeakersBenchConfig,
    progress: Progress<'_>,
) -> Result<SpeakersBenchReport, SuiteError> {
    let (cache, _private) = sentence_cache(args.cache.as_deref())?;
    let most = args.speakers.iter().copied().max().unwrap_or(2);
    let voices = available_voices(services, args.set, most)?;
    let params = args.diarizer.params();
    let diarizer = services.diarizer()?;
    let embedder = services.embedder()?;
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut rows = Vec::new();
    // The same voices at every length (the turns drawn afresh), so a longer conversation's
    // row differs from a shorter one's by its length alone; with one length, the draws are
    // the ones a run before lengths made.
    for (n, c) in args
        .speakers
        .iter()
        .flat_map(|&n| (0..args.conversations).map(move |c| (n, c)))
    {
        let chosen = choose_voices(&voices, n, &mut rng);
        for &seconds in &args.lengths {
            let conversation =
                make_conversation(services, &cache, &chosen, seconds, &mut rng).await?;
            if let Some(dir) = &args.keep {
                let name = match args.lengths.len() {
                    1 => format!("{n}-speakers-{c}"),
                    _ => format!("{n}-speakers-{}-{c}", length_text(seconds)),
                };
                keep(dir, &name, &conversation)?;
            }
            // Profiles: every other voice of the conversation, and two voices not in it.
            let mut profiled: Vec<&'static str> = chosen.iter().step_by(2).copied().collect();
            let absent: Vec<&'static str> = voices
                .iter()
                .filter(|v| !chosen.contains(v))
                .copied()
                .collect();
            profiled.extend(absent.choose_multiple(&mut rng, 2).copied());
            let mut known = Vec::new();
            for voice in &profiled {
                let clip = speak(services, &cache, voice, REFERENCE).await?;
                known.push(KnownSpeaker {
                    name: voice.to_string(),
                    profile: None,
                    embedding: embedder.embed(&clip)?,
                });
            }
            let row = score(&diarizer, &conversation, &known, &params, n, seconds)?;
            progress(&format!(
                "{n} speakers ({}), {} #{c}: DER {:.1}% (missed {:.1}%, false alarm {:.1}%, confusion {:.1}%), {} speakers found, given {n}: {:.1}%, names {}/{} right, {} wrong; {:.1} s",
                chosen.join(", "),
                length_text(seconds),
                100.0 * row.der.der,
                100.0 * row.der.missed,
                100.0 * row.der.false_alarm,
                100.0 * row.der.confusion,
                row.estimated_speakers,
                100.0 * row.der_given_count.der,
                row.known.named_right,
                row.known.profiles_present,
                row.known.named_wrong,
                row.diarize_secs,
            ));
            rows.push(row);
        }
    }
    Ok(summarize(args, &params, rows))
}

/// Where synthesized sentences are kept: `cache` (created), or without it a folder of this
/// run's own (random name, owner only; removed when the guard drops): a fixed name in the
/// shared temporary folder could be another user's, holding clips or links they put.
pub(crate) fn sentence_cache(
    cache: Option<&Path>,
) -> Result<(PathBuf, Option<tempfile::TempDir>), SuiteError> {
    if let Some(cache) = cache {
        std::fs::create_dir_all(cache)?;
        return Ok((cache.to_path_buf(), None));
    }
    let mut builder = tempfile::Builder::new();
    builder.prefix("headroom-bench-speakers-");
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700));
    let private = builder.tempdir()?;
    Ok((private.path().to_path_buf(), Some(private)))
}

/// The voices of `set` that can be made here (flite's when it is installed, Kokoro's and
/// Piper's when their models are), enough for conversations of `most` distinct voices.
pub(crate) fn available_voices(
    services: &Services,
    set: VoiceSet,
    most: usize,
) -> Result<Vec<&'static str>, SuiteError> {
    let flite = installed_program("flite");
    let festival = installed_program("text2wave");
    let installed = |m: &str| installed(services, m);
    let voices: Vec<&'static str> = VOICES
        .iter()
        .filter(|v| v.set == set)
        .map(|v| v.id)
        .filter(|id| !id.starts_with("flite-") || flite)
        .filter(|id| !id.starts_with("festival-") || festival)
        .filter(|id| !id.starts_with("kokoro-") || installed("kokoro"))
        .filter(|id| !id.starts_with("piper-") || installed(id))
        .collect();
    let distinct = voices.iter().filter(|v| !v.starts_with("en-")).count() + 1;
    if distinct < most {
        return Err(SuiteError::Unavailable(format!(
        "{} conversations need {most} distinct voices (one espeak-ng voice at most); only {} of the {:?} set can be made here ({})",
        most,
        distinct,
        set,
        if flite {
            ""
        } else {
            "install flite for four more"
        }
        )));
    }
    Ok(voices)
}

/// `n` voices, at most one of them espeak-ng's: its variants are one voice source with other
/// settings, and two independent speaker embedders hear two of them as one speaker (as alike
/// as one variant's own sentences).
pub(crate) fn choose_voices(
    voices: &[&'static str],
    n: usize,
    rng: &mut StdRng,
) -> Vec<&'static str> {
    let is_espeak = |v: &str| v.starts_with("en-");
    let mut pool = voices.to_vec();
    pool.shuffle(rng);
    let mut chosen: Vec<&'static str> = Vec::new();
    for v in pool {
        if chosen.len() < n && !(is_espeak(v) && chosen.iter().any(|c| is_espeak(c))) {
            chosen.push(v);
        }
    }
    chosen
}

/// Whether `program` is installed.
fn installed_program(program: &str) -> bool {
    !matches!(
        headroom_base::process::Tool::new(program).flag("--version").run(b""),
        Err(e) if e.is_not_found()
    )
}

/// `text` in `voice`, 16 kHz, silence trimmed at both ends; made once and kept in `cache`.
pub(crate) async fn speak(
    services: &Services,
    cache: &Path,
    voice: &str,
    text: &str,
) -> Result<Audio, SuiteError> {
    let key = format!("{:016x}", fnv1a(format!("{voice}\n{text}").as_bytes()));
    let path = cache.join(format!("{key}.wav"));
    if let Ok(audio) = decode_file(&path, DecodeLimits::default()) {
        return Ok(audio);
    }
    let audio = if let Some(flite_voice) = voice.strip_prefix("flite-") {
        flite(flite_voice, text)?
    } else if let Some(festival_voice) = voice.strip_prefix("festival-") {
        festival(festival_voice, text)?
    } else {
        let (speech, name) = services.speech_for_voice(Some(voice))?;
        speech
            .synthesize(text.to_string(), name, CancellationToken::new())
            .await?
    };
    let audio = audio.to_16k()?;
    // The reference is where the voice sounds: no silence at either end.
    let (start, end) = sound_bounds(&audio, 40.0).unwrap_or((0, audio.samples.len()));
    let audio = Audio {
        samples: audio.samples[start..end].to_vec(),
        sample_rate: RATE,
    };
    write_wav(&path, &audio)?;
    Ok(audio)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Festival's `text2wave` (another synthesizer Headroom does not otherwise use), the text on
/// its standard input.
fn festival(voice: &str, text: &str) -> Result<Audio, SuiteError> {
    let dir = tempfile::tempdir()?;
    let output = dir.path().join("out.wav");
    let finished = headroom_base::process::Tool::new("text2wave")
        .option("-eval", format!("(voice_{voice})"))
        .path_option("-o", &output)
        .run(text.as_bytes())?;
    if !finished.status.success() || !output.exists() {
        return Err(SuiteError::Measurement(format!(
            "Festival failed for voice {voice} (is its festvox package installed?): {}",
            String::from_utf8_lossy(&finished.stderr)
        )));
    }
    Ok(decode_file(&output, DecodeLimits::default())?)
}

/// flite (a synthesizer Headroom does not otherwise use), the text on its standard input.
fn flite(voice: &str, text: &str) -> Result<Audio, SuiteError> {
    let dir = tempfile::tempdir()?;
    let output = dir.path().join("out.wav");
    let finished = headroom_base::process::Tool::new("flite")
        .option("-voice", voice)
        .option("-f", "/dev/stdin")
        .path_option("-o", &output)
        .run(text.as_bytes())?;
    if !finished.status.success() {
        return Err(SuiteError::Measurement(format!(
            "flite failed for voice {voice}: {}",
            String::from_utf8_lossy(&finished.stderr)
        )));
    }
    Ok(decode_file(&output, DecodeLimits::default())?)
}

fn rms(samples: &[f32]) -> f64 {
    (samples.iter().map(|s| (*s as f64).powi(2)).sum::<f64>() / samples.len().max(1) as f64).sqrt()
}

/// A conversation among `voices`: each turn goes to someone other than the last speaker, is
/// one or two sentences (1–10 s) or, one time in six, a short back-channel; pauses of 0.2–1 s
/// between turns and 0.15–0.3 s between a turn's sentences; each voice at its own level
/// (±3 dB); white noise at 15–30 dB below the speech.
pub(crate) async fn make_conversation(
    services: &Services,
    cache: &Path,
    voices: &[&'static str],
    seconds: f64,
    rng: &mut StdRng,
) -> Result<Conversation, SuiteError> {
    let levels: Vec<f64> = voices
        .iter()
        .map(|_| 0.05 * 10f64.powf(rng.random_range(-3.0..3.0) / 20.0))
        .collect();
    let mut samples: Vec<f32> = vec![0.0; (0.5 * RATE as f64) as usize];
    let mut utterances = Vec::new();
    let mut last: Option<usize> = None;
    let mut lines: Vec<&str> = LINES.to_vec();
    lines.shuffle(rng);
    let mut next_line = 0;
    // Every voice speaks early, so none is only heard in the last seconds.
    let mut order: Vec<usize> = (0..voices.len()).collect();
    order.shuffle(rng);
    let mut turn = 0;
    while (samples.len() as f64) / (RATE as f64) < seconds {
        let speaker = if turn < order.len() && last != Some(order[turn]) {
            order[turn]
        } else {
            let others: Vec<usize> = (0..voices.len()).filter(|&s| Some(s) != last).collect();
            *others.choose(rng).expect("two voices at least")
        };
        turn += 1;
        let backchannel = last.is_some() && rng.random_bool(1.0 / 6.0);
        let texts: Vec<&str> = if backchannel {
            vec![*BACKCHANNELS.choose(rng).expect("back-channels")]
        } else {
            let count = rng.random_range(1..=2);
            (0..count)
                .map(|_| {
                    let line = lines[next_line % lines.len()];
                    next_line += 1;
                    line
                })
                .collect()
        };
        for (i, text) in texts.iter().enumerate() {
            if i > 0 {
                silence(&mut samples, rng.random_range(0.15..0.3));
            }
            let clip = speak(services, cache, voices[speaker], text).await?;
            let gain = levels[speaker] / rms(&clip.samples).max(1e-6);
            let start = samples.len() as f64 / RATE as f64;
            samples.extend(clip.samples.iter().map(|s| (*s as f64 * gain) as f32));
            utterances.push(Utterance {
                start,
                end: samples.len() as f64 / RATE as f64,
                speaker,
                text: text.to_string(),
            });
        }
        silence(&mut samples, rng.random_range(0.2..1.0));
        last = Some(speaker);
    }
    let speech_rms = levels.iter().sum::<f64>() / levels.len() as f64;
    let snr_db = rng.random_range(15.0..30.0);
    let noise_rms = speech_rms / 10f64.powf(snr_db / 20.0);
    for s in &mut samples {
        // The sum of twelve uniforms, less six: near enough to Gaussian for background hiss.
        let g: f64 = (0..12).map(|_| rng.random::<f64>()).sum::<f64>() - 6.0;
        *s += (g * noise_rms) as f32;
    }
    Ok(Conversation {
        voices: voices.to_vec(),
        audio: Audio {
            samples,
            sample_rate: RATE,
        },
        utterances,
        snr_db,
    })
}

fn silence(samples: &mut Vec<f32>, secs: f64) {
    samples.extend(std::iter::repeat_n(0.0, (secs * RATE as f64) as usize));
}

pub(crate) fn keep(dir: &Path, name: &str, c: &Conversation) -> Result<(), SuiteError> {
    std::fs::create_dir_all(dir)?;
    write_wav(&dir.join(format!("{name}.wav")), &c.audio)?;
    let rttm: String = c
        .utterances
        .iter()
        .map(|u| {
            format!(
                "SPEAKER {name} 1 {:.3} {:.3} <NA> <NA> {} <NA> <NA>\n",
                u.start,
                u.end - u.start,
                c.voices[u.speaker]
            )
        })
        .collect();
    std::fs::write(dir.join(format!("{name}.rttm")), rttm)?;
    Ok(())
}

fn score(
    diarizer: &Diarizer,
    c: &Conversation,
    known: &[KnownSpeaker],
    params: &DiarizeParams,
    n: usize,
    length_secs: f64,
) -> Result<ConversationRow, SuiteError> {
    let reference = c.reference();
    let cancel = CancellationToken::new();
    let options = DiarizeOptions {
        count: SpeakerCount::Auto,
        known: known.to_vec(),
        params: params.clone(),
    };
    let started = Instant::now();
    let found = diarizer.diarize(&c.audio.samples, &options, &|_| {}, &cancel)?;
    let diarize_secs = started.elapsed().as_secs_f64();
    let given = diarizer.diarize(
        &c.audio.samples,
        &DiarizeOptions {
            count: SpeakerCount::Exactly(n),
            known: Vec::new(),
            params: params.clone(),
        },
        &|_| {},
        &cancel,
    )?;
    let der = diarization_error(&reference, &found.labelled(), 0.25);
    let der_given_count = diarization_error(&reference, &given.labelled(), 0.25);
    let known_row = known_names(diarizer, c, &found, known, &reference)?;
    Ok(ConversationRow {
        speakers: n,
        voices: c.voices.iter().map(|v| v.to_string()).collect(),
        length_secs,
        seconds: c.audio.duration_secs(),
        snr_db: c.snr_db,
        backchannels: c
            .utterances
            .iter()
            .filter(|u| u.end - u.start < 1.0)
            .count(),
        estimated_speakers: found.speakers.len(),
        der,
        der_given_count,
        known: known_row,
        diarize_secs,
    })
}

/// Which voice each found speaker mostly is, and whether their name (if any) says so.
fn known_names(
    diarizer: &Diarizer,
    c: &Conversation,
    found: &Diarization,
    known: &[KnownSpeaker],
    reference: &[Labelled],
) -> Result<KnownRow, SuiteError> {
    let mut row = KnownRow {
        profiles_present: known
            .iter()
            .filter(|k| c.voices.contains(&k.name.as_str()))
            .count(),
        ..KnownRow::default()
    };
    let embeddings = diarizer.speaker_embeddings(&c.audio.samples, found)?;
    let mut named_voices = Vec::new();
    for (s, speaker) in found.speakers.iter().enumerate() {
        let voice = majority_voice(found, s, reference);
        if let Some(name) = &speaker.name {
            if Some(name.as_str()) == voice.as_deref() {
                row.named_right += 1;
                named_voices.push(name.clone());
            } else {
                row.named_wrong += 1;
            }
        }
        if let Some(e) = &embeddings[s] {
            for k in known {
                let sim = e.similarity(&k.embedding);
                if Some(k.name.as_str()) == voice.as_deref() {
                    row.same_voice_similarity.push(sim);
                } else {
                    row.other_voice_max_similarity = row.other_voice_max_similarity.max(sim);
                }
            }
        }
    }
    row.unnamed = row.profiles_present - named_voices.len().min(row.profiles_present);
    Ok(row)
}

/// The reference voice that speaker `s` overlaps most.
fn majority_voice(found: &Diarization, s: usize, reference: &[Labelled]) -> Option<String> {
    let mut overlap: Vec<(String, f64)> = Vec::new();
    for t in found.turns.iter().filter(|t| t.speaker == s) {
        for r in reference {
            let o = t.end.min(r.end) - t.start.max(r.start);
            if o > 0.0 {
                match overlap.iter_mut().find(|(v, _)| *v == r.speaker) {
                    Some(e) => e.1 += o,
                    None => overlap.push((r.speaker.clone(), o)),
                }
            }
        }
    }
    overlap
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(v, _)| v)
}

/// Each group of conversations: a number of speakers at a length, in the order they are made.
fn groups(args: &SpeakersBenchConfig) -> Vec<(usize, f64)> {
    args.speakers
        .iter()
        .flat_map(|&n| args.lengths.iter().map(move |&seconds| (n, seconds)))
        .collect()
}

/// `60 s`, `30 min`, `1 h 30 min`: a conversation's length as the table shows it.
fn length_text(seconds: f64) -> String {
    let minutes = (seconds / 60.0).round() as u64;
    match (seconds < 120.0, minutes / 60, minutes % 60) {
        (true, ..) => format!("{seconds:.0} s"),
        (false, 0, m) => format!("{m} min"),
        (false, h, 0) => format!("{h} h"),
        (false, h, m) => format!("{h} h {m} min"),
    }
}

fn summarize(
    args: &SpeakersBenchConfig,
    params: &DiarizeParams,
    rows: Vec<ConversationRow>,
) -> SpeakersBenchReport {
    let sizes = groups(args)
        .into_iter()
        .map(|(n, seconds)| {
            let of: Vec<&ConversationRow> = rows
                .iter()
                .filter(|r| r.speakers == n && r.length_secs == seconds)
                .collect();
            // Rates over all the group's scored speech, as md-eval pools a corpus.
            let pooled = |f: fn(&DerReport) -> f64, g: fn(&ConversationRow) -> &DerReport| {
                let scored: f64 = of.iter().map(|r| g(r).scored_secs).sum();
                of.iter().map(|r| f(g(r))).sum::<f64>() / scored.max(1e-9)
            };
            let errors = |d: &DerReport| d.missed_secs + d.false_alarm_secs + d.confusion_secs;
            SizeRow {
                speakers: n,
                length_secs: seconds,
                conversations: of.len(),
                der: pooled(errors, |r| &r.der),
                missed: pooled(|d| d.missed_secs, |r| &r.der),
                false_alarm: pooled(|d| d.false_alarm_secs, |r| &r.der),
                confusion: pooled(|d| d.confusion_secs, |r| &r.der),
                der_given_count: pooled(errors, |r| &r.der_given_count),
                count_right: of.iter().filter(|r| r.estimated_speakers == n).count(),
            }
        })
        .collect();
    SpeakersBenchReport {
        set: args.set,
        seed: args.seed,
        collar_secs: 0.25,
        same_speaker: params.same_speaker,
        same_voice: params.same_voice,
        change_penalty: params.change_penalty,
        known_threshold: params.known_threshold,
        sizes,
        known_named_right: rows.iter().map(|r| r.known.named_right).sum(),
        known_named_wrong: rows.iter().map(|r| r.known.named_wrong).sum(),
        known_unnamed: rows.iter().map(|r| r.known.unnamed).sum(),
        known_present: rows.iter().map(|r| r.known.profiles_present).sum(),
        conversations: rows,
    }
}

/// The report as the README shows it: a row per number of speakers, then the names.
pub fn render_text(r: &SpeakersBenchReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "voices: {:?} set · collar {} s · same-speaker {} · same-voice {} · change penalty {} · known {}",
        r.set, r.collar_secs, r.same_speaker, r.same_voice, r.change_penalty, r.known_threshold
    );
    let _ = writeln!(out, "| speakers | length | conversations | DER | missed | false alarm | confusion | DER, count given | count right |");
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for s in &r.sizes {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.1}% | {:.1}% | {:.1}% | {:.1}% | {:.1}% | {}/{} |",
            s.speakers,
            length_text(s.length_secs),
            s.conversations,
            100.0 * s.der,
            100.0 * s.missed,
            100.0 * s.false_alarm,
            100.0 * s.confusion,
            100.0 * s.der_given_count,
            s.count_right,
            s.conversations
        );
    }
    let same: Vec<f32> = r
        .conversations
        .iter()
        .flat_map(|c| c.known.same_voice_similarity.iter().copied())
        .collect();
    let other = r
        .conversations
        .iter()
        .map(|c| c.known.other_voice_max_similarity)
        .fold(f32::NEG_INFINITY, f32::max);
    let _ = writeln!(
        out,
        "known speakers: {} of {} named right, {} named wrong; similarity to their own profile {:.2}–{:.2}, to another voice's at most {:.2}",
        r.known_named_right,
        r.known_present,
        r.known_named_wrong,
        same.iter().copied().fold(f32::INFINITY, f32::min),
        same.iter().copied().fold(f32::NEG_INFINITY, f32::max),
        other
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_number_of_speakers_gets_a_group_at_each_length_and_the_table_names_it() {
        let args = SpeakersBenchConfig {
            speakers: vec![2, 4],
            lengths: vec![60.0, 5400.0],
            ..SpeakersBenchConfig::default()
        };
        assert_eq!(
            groups(&args),
            [(2, 60.0), (2, 5400.0), (4, 60.0), (4, 5400.0)]
        );
        let shown: Vec<String> = [60.0, 1800.0, 5400.0, 10800.0]
            .iter()
            .map(|&s| length_text(s))
            .collect();
        assert_eq!(shown, ["60 s", "30 min", "1 h 30 min", "3 h"]);
    }
}
