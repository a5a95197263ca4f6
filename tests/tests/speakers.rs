//! Who spoke when, with real models and real audio: a conversation of three voices made at
//! test time (an espeak-ng voice and two Kokoro voices, each turn at its own
//! level, pauses between, quiet noise under all) is diarized, scored against where each voice
//! was placed, and a voice known from a different recording is named.

use headroom_core::config::Config;
use headroom_services::Services;
use headroom_speech::asr::der::{diarization_error, Labelled};
use headroom_speech::asr::diarize::{attribute, DiarizeOptions, KnownSpeaker, SpeakerCount};
use headroom_speech::asr::{Segment, Transcript, Word};
use headroom_speech::audio::stretch::sound_bounds;
use headroom_speech::audio::Audio;
use headroom_speech::tts::{Espeak, Style, Synthesizer};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const RATE: f64 = 16_000.0;

const TURNS: &[(usize, &str)] = &[
    (
        0,
        "Did you bring the recordings from the harbour on Tuesday?",
    ),
    (
        1,
        "I did, but the wind got into the microphone for most of the morning.",
    ),
    (2, "Then we should use the afternoon takes instead."),
    (0, "Yeah."),
    (
        1,
        "The afternoon ones have the gulls in them, which the editor liked.",
    ),
    (2, "Fine. Send me both and I will listen tonight."),
    (
        0,
        "I will upload them before lunch, with the notes about each take.",
    ),
    (1, "Good, and mark the ones with the ferry engine."),
];

fn services() -> Arc<Services> {
    headroom_tests::models_dir();
    headroom_tests::services(Config::default())
}

/// Says `text` in voice `who` (0: espeak-ng, 1 and 2: two Kokoro voices), 16 kHz, with the
/// silence at either end cut off. (espeak-ng's variants are one voice source with other
/// settings: speaker embedders hear two of them as one speaker.)
fn say(services: &Services, who: usize, text: &str) -> Vec<f32> {
    let cancel = CancellationToken::new();
    let audio = match who {
        0 => Espeak::default()
            .synthesize(text, Some("en-us+m3"), &cancel)
            .unwrap(),
        _ => services
            .kokoro()
            .unwrap()
            .speak(
                text,
                &Style::shipped(["jf_alpha", "jm_kumo"][who - 1]),
                1.0,
                &cancel,
            )
            .unwrap(),
    };
    let audio = audio.to_16k().unwrap();
    let (start, end) = sound_bounds(&audio, 45.0).expect("the voice spoke");
    audio.samples[start..end].to_vec()
}

/// The conversation and where each turn is, as (start, end, voice).
fn conversation(services: &Services) -> (Vec<f32>, Vec<Labelled>) {
    let levels = [0.05, 0.08, 0.04];
    let pauses = [0.6, 0.3, 0.8, 0.25, 0.5, 0.4, 0.7];
    let mut samples = vec![0f32; 8000];
    let mut reference = Vec::new();
    for (i, (who, text)) in TURNS.iter().enumerate() {
        let turn = say(services, *who, text);
        let rms = (turn.iter().map(|s| s * s).sum::<f32>() / turn.len() as f32).sqrt();
        let start = samples.len() as f64 / RATE;
        samples.extend(turn.iter().map(|s| s * levels[*who] / rms));
        reference.push(Labelled {
            start,
            end: samples.len() as f64 / RATE,
            speaker: who.to_string(),
        });
        let pause = pauses.get(i).copied().unwrap_or(0.5);
        samples.extend(std::iter::repeat_n(0.0, (pause * RATE) as usize));
    }
    // Quiet hiss under everything, 30 dB below the speech.
    let mut state = 11u32;
    for s in &mut samples {
        state = state.wrapping_mul(1664525).wrapping_add(1013904223);
        *s += ((state >> 8) as f32 / (1 << 24) as f32 - 0.5) * 0.005;
    }
    (samples, reference)
}

#[tokio::test]
async fn a_three_voice_conversation_is_told_apart_and_a_known_voice_is_named() {
    let services = services();
    let diarizer = services.diarizer().unwrap();
    let (samples, reference) = conversation(&services);
    let cancel = CancellationToken::new();

    // The number of speakers is estimated, and who spoke when is within the collar.
    let found = diarizer
        .diarize(&samples, &DiarizeOptions::default(), &|_| {}, &cancel)
        .unwrap();
    let der = diarization_error(&reference, &found.labelled(), 0.25);
    eprintln!("estimated {} speakers; {der:?}", found.speakers.len());
    assert_eq!(found.speakers.len(), 3, "{found:?}");
    assert!(der.der < 0.10, "{der:?}");
    // The one-word back-channel is its speaker's, not a speaker of its own or its neighbours'.
    let yeah = &reference[3];
    let heard = found
        .turns
        .iter()
        .find(|t| t.start < yeah.end && t.end > yeah.start)
        .expect("the back-channel is heard");
    let first = found
        .turns
        .iter()
        .find(|t| t.start < reference[0].end && t.end > reference[0].start)
        .unwrap();
    assert_eq!(heard.speaker, first.speaker, "{found:?}");

    // Given the count, the same.
    let given = diarizer
        .diarize(
            &samples,
            &DiarizeOptions {
                count: SpeakerCount::Exactly(3),
                ..DiarizeOptions::default()
            },
            &|_| {},
            &cancel,
        )
        .unwrap();
    assert!(diarization_error(&reference, &given.labelled(), 0.25).der < 0.10);

    // A profile made from other sentences by the Kokoro voice names that speaker; a profile of
    // a voice not in the conversation names nobody.
    let embedder = services.embedder().unwrap();
    let clip = |who: usize, text: &str| Audio {
        samples: say(&services, who, text),
        sample_rate: 16_000,
    };
    let kumo = embedder
        .embed(&clip(
            2,
            "When the morning train was late again, the whole platform sighed at once. \
             Nobody listened, but everyone waited.",
        ))
        .unwrap();
    let stranger = embedder
        .embed(&Audio {
            samples: services
                .kokoro()
                .unwrap()
                .speak(
                    "When the morning train was late again, the whole platform sighed at once.",
                    &Style::shipped("jf_nezumi"),
                    1.0,
                    &cancel,
                )
                .unwrap()
                .to_16k()
                .unwrap()
                .samples,
            sample_rate: 16_000,
        })
        .unwrap();
    let known = vec![
        KnownSpeaker {
            name: "Kumo".into(),
            profile: Some("kumo-profile".into()),
            embedding: kumo,
        },
        KnownSpeaker {
            name: "Stranger".into(),
            profile: None,
            embedding: stranger,
        },
    ];
    let named = diarizer
        .diarize(
            &samples,
            &DiarizeOptions {
                known,
                ..DiarizeOptions::default()
            },
            &|_| {},
            &cancel,
        )
        .unwrap();
    let names: Vec<Option<&str>> = named.speakers.iter().map(|s| s.name.as_deref()).collect();
    assert!(!names.contains(&Some("Stranger")), "{names:?}");
    let kumo_speaker = named
        .turns
        .iter()
        .find(|t| t.start < reference[2].end && t.end > reference[2].start)
        .map(|t| &named.speakers[t.speaker])
        .unwrap();
    assert_eq!(kumo_speaker.name.as_deref(), Some("Kumo"), "{named:?}");
    assert_eq!(kumo_speaker.profile.as_deref(), Some("kumo-profile"));
    assert!(kumo_speaker.similarity.is_some_and(|s| s >= 0.5));

    // Words take the speaker over them: a segment spanning a change of speaker is split there.
    let word = |r: &Labelled, text: &str| Word {
        start: r.start + 0.1,
        end: r.end - 0.1,
        text: text.into(),
        probability: 0.9,
        speaker: None,
    };
    let mut transcript = Transcript {
        language: Some("en".into()),
        duration: samples.len() as f64 / RATE,
        speakers: Vec::new(),
        segments: vec![Segment {
            start: reference[0].start,
            end: reference[1].end,
            text: "Tuesday? morning.".into(),
            words: vec![
                word(&reference[0], "Tuesday?"),
                word(&reference[1], "morning."),
            ],
            speaker: None,
        }],
    };
    attribute(&mut transcript, &named);
    assert_eq!(transcript.segments.len(), 2, "{transcript:?}");
    assert_ne!(
        transcript.segments[0].speaker,
        transcript.segments[1].speaker
    );
    assert_eq!(transcript.speakers.len(), named.speakers.len());
}
