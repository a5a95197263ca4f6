//! Speech with real models and real audio: espeak-ng speaks, the embedded Whisper engine
//! (whisper-tiny.en, installed by scripts/test) transcribes, in every input format.

use headroom_core::admission::Priority;
use headroom_core::config::Config;
use headroom_services::speech::{AudioInput, SpeechError, SpeechService};
use headroom_speech::asr::{word_error_rate, TranscribeOptions, Word};
use headroom_speech::audio::stretch::sound_bounds;
use headroom_speech::audio::{decode_file, write_wav, Audio, AudioError, DecodeLimits};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const MODEL: &str = "whisper-tiny.en";

fn service() -> Arc<SpeechService> {
    headroom_tests::models_dir();
    headroom_tests::services(Config::default()).speech().clone()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("headroom-speech-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

async fn speak_to(service: &SpeechService, text: &str, path: &Path) {
    let audio = service
        .synthesize(text.into(), None, CancellationToken::new())
        .await
        .unwrap();
    write_wav(path, &audio).unwrap();
}

async fn transcribe(
    service: &SpeechService,
    path: &Path,
) -> Result<headroom_speech::asr::Transcript, SpeechError> {
    transcribe_with(service, path, TranscribeOptions::default()).await
}

async fn transcribe_with(
    service: &SpeechService,
    path: &Path,
    options: TranscribeOptions,
) -> Result<headroom_speech::asr::Transcript, SpeechError> {
    let input = AudioInput::from_file(path)?;
    service
        .transcribe(
            input,
            MODEL,
            options,
            Priority::Normal,
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await
}

/// espeak-ng's `text` at 16 kHz, its leading and trailing silence cut off.
async fn spoken_16k(service: &SpeechService, text: &str) -> Vec<f32> {
    let audio = service
        .synthesize(text.into(), None, CancellationToken::new())
        .await
        .unwrap()
        .to_16k()
        .unwrap();
    let (start, end) = sound_bounds(&audio, 45.0).expect("espeak-ng spoke");
    audio.samples[start..end].to_vec()
}

fn silence(samples: &mut Vec<f32>, secs: f64) {
    samples.extend(std::iter::repeat_n(0.0, (secs * 16_000.0) as usize));
}

/// Noise peaking 74 dB below full scale: a quiet room, not digital silence.
fn faint_noise(secs: f64) -> Vec<f32> {
    let mut state = 7u32;
    (0..(secs * 16_000.0) as usize)
        .map(|_| {
            state = state.wrapping_mul(1664525).wrapping_add(1013904223);
            ((state >> 8) as f32 / (1 << 24) as f32 - 0.5) * 4e-4
        })
        .collect()
}

fn write_16k(path: &Path, samples: Vec<f32>) {
    write_wav(
        path,
        &Audio {
            samples,
            sample_rate: 16_000,
        },
    )
    .unwrap();
}

#[tokio::test]
async fn synthesized_sentences_are_transcribed_within_a_word_error_bound() {
    let service = service();
    let sentences = [
        "The weather today is sunny with a light breeze.",
        "Please send the report to my office before noon.",
        "We recorded the river at night for three hours.",
        "Open the window and let the fresh air in.",
        "My brother plays the guitar in a small band.",
    ];
    let mut total_errors = 0.0;
    let mut total_words = 0.0;
    for (i, sentence) in sentences.iter().enumerate() {
        let path = scratch(&format!("sentence-{i}.wav"));
        speak_to(&service, sentence, &path).await;
        let transcript = transcribe(&service, &path).await.unwrap();
        let wer = word_error_rate(sentence, &transcript.text());
        eprintln!("{wer:.2}  {sentence:?} -> {:?}", transcript.text());
        total_errors += wer * sentence.split_whitespace().count() as f64;
        total_words += sentence.split_whitespace().count() as f64;
        assert_eq!(transcript.language.as_deref(), Some("en"));
        assert!(transcript
            .segments
            .iter()
            .all(|s| s.start <= s.end && s.end <= transcript.duration + 0.5));
    }
    let wer = total_errors / total_words;
    assert!(
        wer <= 0.25,
        "word error rate {wer:.2} over {total_words} words"
    );
}

#[tokio::test]
async fn audio_longer_than_a_window_gets_ordered_timestamps_to_the_end() {
    let service = service();
    let text = (1..=8)
        .map(|i| format!("Paragraph {i}. The old ferry crosses the harbour every morning, carrying people and their bicycles to the island."))
        .collect::<Vec<_>>()
        .join(" ");
    let path = scratch("long.wav");
    speak_to(&service, &text, &path).await;
    // In 30 s windows, and in chunks cut at pauses by voice activity detection.
    for skip_silence in [false, true] {
        let options = TranscribeOptions {
            skip_silence,
            ..TranscribeOptions::default()
        };
        let transcript = transcribe_with(&service, &path, options).await.unwrap();
        assert!(transcript.duration > 45.0, "{}", transcript.duration);
        let starts: Vec<f64> = transcript.segments.iter().map(|s| s.start).collect();
        assert!(
            starts.windows(2).all(|w| w[0] <= w[1]),
            "skip_silence {skip_silence}: {starts:?}"
        );
        let last = transcript.segments.last().unwrap();
        assert!(
            last.end > transcript.duration - 5.0,
            "skip_silence {skip_silence}: the end of the audio is transcribed: {last:?}"
        );
        assert!(
            word_error_rate(&text, &transcript.text()) < 0.35,
            "skip_silence {skip_silence}: {}",
            transcript.text()
        );
    }
}

#[tokio::test]
async fn word_times_follow_words_placed_at_known_times() {
    let service = service();
    // Each word spoken alone and laid at a known onset, so the truth is exact.
    let words = [
        "morning", "yellow", "garden", "window", "river", "pocket", "kitchen", "teacher",
    ];
    let mut samples = Vec::new();
    silence(&mut samples, 0.6);
    let mut onsets = Vec::new();
    let mut ends = Vec::new();
    for word in words {
        onsets.push(samples.len() as f64 / 16_000.0);
        samples.extend(spoken_16k(&service, word).await);
        ends.push(samples.len() as f64 / 16_000.0);
        silence(&mut samples, 0.45);
    }
    let path = scratch("words.wav");
    write_16k(&path, samples);
    let options = TranscribeOptions {
        word_timestamps: true,
        ..TranscribeOptions::default()
    };
    let transcript = transcribe_with(&service, &path, options).await.unwrap();
    let found: Vec<&Word> = transcript.segments.iter().flat_map(|s| &s.words).collect();
    eprintln!("{found:#?}");
    assert!(!found.is_empty(), "no word times: {transcript:?}");
    for pair in found.windows(2) {
        assert!(pair[0].start <= pair[1].start, "in order: {pair:?}");
    }
    for w in &found {
        assert!(w.start <= w.end, "{w:?}");
        assert!((0.0..=1.0).contains(&w.probability), "{w:?}");
    }
    let bare = |t: &str| {
        t.trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase()
    };
    let mut matched = 0;
    for ((word, onset), end) in words.iter().zip(&onsets).zip(&ends) {
        if let Some(w) = found.iter().find(|w| bare(&w.text) == *word) {
            matched += 1;
            eprintln!(
                "{word:?}: spoken {onset:.2}–{end:.2} s, timed {:.2}–{:.2} s",
                w.start, w.end
            );
            assert!(
                (w.start - onset).abs() <= 0.15 && (w.end - end).abs() <= 0.15,
                "{word:?} spoken {onset:.2}–{end:.2} s, timed {:.2}–{:.2} s",
                w.start,
                w.end
            );
        }
    }
    assert!(
        matched >= 6,
        "only {matched} of {} words recognised: {}",
        words.len(),
        transcript.text()
    );
}

/// Hears nothing, and notes the language each piece of audio is to be heard in.
struct LanguageRecorder {
    languages: std::sync::Mutex<Vec<Option<String>>>,
}

impl headroom_speech::asr::Transcriber for LanguageRecorder {
    fn name(&self) -> &str {
        "language recorder"
    }

    fn sole_language(&self) -> Option<&str> {
        Some("en")
    }

    fn transcribe_from(
        &self,
        samples: &dyn headroom_speech::audio::SampleSource,
        from_secs: f64,
        options: &TranscribeOptions,
        window_done: &mut dyn FnMut(headroom_speech::asr::WindowDone<'_>),
        _progress: &dyn Fn(f32),
        _cancel: &CancellationToken,
    ) -> Result<headroom_speech::asr::Transcript, headroom_speech::asr::AsrError> {
        headroom_speech::asr::rest_as_one_window(samples, from_secs, window_done, |rest| {
            self.languages
                .lock()
                .unwrap()
                .push(options.language.clone());
            Ok(headroom_speech::asr::Transcript {
                speakers: Vec::new(),
                language: options.language.clone(),
                duration: rest.len() as f64 / 16_000.0,
                segments: Vec::new(),
            })
        })
    }
}

#[tokio::test]
async fn an_english_only_model_hears_every_chunk_in_english_from_the_first() {
    use headroom_speech::asr::vad::{VadParams, VadTranscriber};
    use headroom_speech::asr::Transcriber;
    // Nothing to detect, so the first chunk does not run alone to learn the language: every
    // chunk, the first too, is heard in English (and two at a time).
    let service = service();
    let text = (1..=6)
        .map(|i| format!("Part {i}. The old ferry crosses the harbour every morning, carrying people to the island."))
        .collect::<Vec<_>>()
        .join(" ");
    let mut samples = spoken_16k(&service, &text).await;
    silence(&mut samples, 3.0);
    samples.extend(spoken_16k(&service, &text).await);
    let vad_dir = headroom_speech::models::locate(service.models_dir(), "silero-vad").unwrap();
    let recorder = Arc::new(LanguageRecorder {
        languages: Default::default(),
    });
    let heard = VadTranscriber::new(
        recorder.clone(),
        service.loaded_vad(&vad_dir).unwrap(),
        VadParams::default(),
    )
    .transcribe(
        &samples,
        &TranscribeOptions::default(),
        &|_| {},
        &CancellationToken::new(),
    )
    .unwrap();
    let languages = recorder.languages.lock().unwrap().clone();
    assert!(languages.len() >= 2, "one chunk only: {languages:?}");
    assert!(
        languages.iter().all(|l| l.as_deref() == Some("en")),
        "{languages:?}"
    );
    assert_eq!(heard.language.as_deref(), Some("en"));
}

/// Speech longer than a window is cut at pauses into regions, and a chunk takes whole regions
/// while they fit: a region must end and the next begin between sentences (cut a breath into
/// a sentence, the words before the cut were lost or changed), every word of the sentences
/// either side of a join is heard, and every word lies inside its segment.
#[tokio::test]
async fn chunk_joins_fall_between_sentences_and_lose_no_word() {
    use headroom_speech::asr::vad::{VadParams, MAX_CHUNK_SECONDS};
    let service = service();
    // Long sentences with commas, whose short pauses a voice detector also finds.
    let sentences = [
        "The festival began in a borrowed barn at the edge of the village, with three fiddlers, a borrowed piano and an audience of forty neighbours who had walked over the fields after supper.",
        "Nobody had planned a second evening, but the next morning a van of students arrived from the city with tents, guitars and a crate of notebooks, asking where the music would be.",
        "Years later the musicians still argue about who first suggested moving the stage to the harbour wall, where the wind carried every note across the water to the boats.",
        "The organisers kept careful records, counting tickets by hand in the kitchen after midnight, and the old ledgers now sit in a glass case at the library.",
        "When the council finally offered money for a proper hall, the founders refused it politely, saying that the barn, the mud and the rain were part of the sound.",
        "Each summer a new band arrives with its own ideas, and each winter the villagers repair the roof, mend the benches and wait for the first warm evening.",
    ];
    let mut samples = Vec::new();
    let mut spans = Vec::new();
    for sentence in sentences {
        let start = samples.len() as f64 / 16_000.0;
        samples.extend(spoken_16k(&service, sentence).await);
        spans.push((start, samples.len() as f64 / 16_000.0));
        silence(&mut samples, 0.4);
    }
    let vad_dir = headroom_speech::models::locate(service.models_dir(), "silero-vad").unwrap();
    let vad = service.loaded_vad(&vad_dir).unwrap();
    let regions = vad.speech(&samples, &VadParams::default()).unwrap();
    let joins: Vec<f64> = regions
        .iter()
        .skip(1)
        .map(|r| r.start as f64 / 16_000.0)
        .collect();
    eprintln!("sentences {spans:.2?}, regions start at {joins:.2?}");
    assert!(
        samples.len() as f64 / 16_000.0 > MAX_CHUNK_SECONDS && !joins.is_empty(),
        "one region only"
    );
    for &join in &joins {
        assert!(
            spans
                .iter()
                .all(|&(start, end)| join <= start || join >= end),
            "a region starts inside a sentence, at {join:.2} s: {spans:.2?}"
        );
    }

    let path = scratch("joins.wav");
    write_16k(&path, samples);
    let options = TranscribeOptions {
        word_timestamps: true,
        ..TranscribeOptions::default()
    };
    let transcript = transcribe_with(&service, &path, options).await.unwrap();
    for s in &transcript.segments {
        eprintln!("{:6.2}–{:6.2} {}", s.start, s.end, s.text);
        for w in &s.words {
            assert!(
                s.start <= w.start && w.start <= w.end && w.end <= s.end,
                "{w:?} outside its segment {:.2}–{:.2} s {:?}",
                s.start,
                s.end,
                s.text
            );
        }
    }
    // The sentences either side of each join: their words, by time, as the text says.
    for &join in &joins {
        let before = spans.iter().rposition(|&(_, end)| end <= join).unwrap();
        for i in [before, before + 1] {
            let (start, end) = spans[i];
            let heard: Vec<&str> = transcript
                .segments
                .iter()
                .flat_map(|s| &s.words)
                .filter(|w| (start - 0.3..end + 0.3).contains(&((w.start + w.end) / 2.0)))
                .map(|w| w.text.as_str())
                .collect();
            let heard = heard.join(" ");
            let wer = word_error_rate(sentences[i], &heard);
            eprintln!("{wer:.2} at the join at {join:.2} s: {heard:?}");
            assert!(
                wer <= 0.25
                    && heard.split_whitespace().count() + 2
                        >= sentences[i].split_whitespace().count(),
                "sentence {i} beside the join at {join:.2} s: {heard:?}"
            );
        }
    }
    let wer = word_error_rate(&sentences.join(" "), &transcript.text());
    assert!(
        wer <= 0.2,
        "word error rate {wer:.2}: {}",
        transcript.text()
    );
}

#[tokio::test]
async fn long_silences_are_skipped_and_times_stay_in_the_original_timeline() {
    let service = service();
    let first = "The ferry leaves the harbour at seven.";
    let second = "Bring a warm coat for the crossing.";
    // 1 s of silence, a sentence, 25 s of near silence (faint noise), a sentence, 10 s more.
    let mut samples = Vec::new();
    silence(&mut samples, 1.0);
    samples.extend(spoken_16k(&service, first).await);
    let first_end = samples.len() as f64 / 16_000.0;
    samples.extend(faint_noise(25.0));
    let second_start = samples.len() as f64 / 16_000.0;
    samples.extend(spoken_16k(&service, second).await);
    let second_end = samples.len() as f64 / 16_000.0;
    silence(&mut samples, 10.0);
    let path = scratch("pauses.wav");
    write_16k(&path, samples);

    let transcript = transcribe(&service, &path).await.unwrap();
    eprintln!("{:#?}", transcript.segments);
    assert!(
        word_error_rate(&format!("{first} {second}"), &transcript.text()) <= 0.25,
        "{}",
        transcript.text()
    );
    for s in &transcript.segments {
        let in_pause = s.start > first_end + 0.5 && s.end < second_start - 0.5;
        let after = s.start > second_end + 0.5;
        assert!(!in_pause && !after, "text invented in silence: {s:?}");
    }
    // The second sentence is timed where it is in the file, not where it is in the speech.
    let later = transcript
        .segments
        .iter()
        .find(|s| word_error_rate(second, &s.text) < 0.5)
        .expect("the second sentence has a segment");
    assert!(
        (later.start - second_start).abs() < 1.0,
        "{later:?} vs {second_start:.2} s"
    );

    // Near silence alone (digital silence is refused as a silent file) gives no text.
    let path = scratch("quiet.wav");
    write_16k(&path, faint_noise(20.0));
    let transcript = transcribe(&service, &path).await.unwrap();
    assert!(transcript.segments.is_empty(), "{:?}", transcript.segments);
}

/// A third of a second of a room's noise, heard whole (as voice activity detection hands on
/// the rest of a chunk the model stopped short of): tiny.en calls it speechless and, sure of
/// itself, writes "you. you. you." until the window's room runs out, at every temperature
/// (a minute of decoding). A loop over speechless audio is silence.
#[tokio::test]
async fn a_breath_of_room_noise_gives_no_text_not_a_loop() {
    let service = service();
    let path = scratch("breath.wav");
    write_16k(&path, faint_noise(0.3));
    let options = TranscribeOptions {
        skip_silence: false,
        ..TranscribeOptions::default()
    };
    let transcript = transcribe_with(&service, &path, options).await.unwrap();
    assert!(transcript.segments.is_empty(), "{:?}", transcript.segments);
}

#[tokio::test]
async fn beam_search_and_an_initial_prompt_transcribe_within_the_bound() {
    let service = service();
    let sentence = "Please send the report to my office before noon.";
    let path = scratch("beam.wav");
    speak_to(&service, sentence, &path).await;
    let options = TranscribeOptions {
        beam_size: 5,
        initial_prompt: Some("Meeting notes from the harbour office.".into()),
        ..TranscribeOptions::default()
    };
    let transcript = transcribe_with(&service, &path, options).await.unwrap();
    let text = transcript.text();
    assert!(word_error_rate(sentence, &text) <= 0.25, "{text}");
    assert!(
        !text.contains("Meeting notes"),
        "the prompt is context, not transcript: {text}"
    );
}

#[tokio::test]
async fn every_input_format_decodes_to_the_same_audio() {
    let service = service();
    let wav = scratch("formats.wav");
    speak_to(&service, "Every format should sound the same.", &wav).await;
    let original = decode_file(&wav, DecodeLimits::default()).unwrap();
    for (ext, codec) in [
        ("mp3", "libmp3lame"),
        ("flac", "flac"),
        ("ogg", "libvorbis"),
        ("m4a", "aac"),
    ] {
        let path = scratch(&format!("formats.{ext}"));
        let status = std::process::Command::new("ffmpeg")
            .args(["-loglevel", "error", "-y", "-i"])
            .arg(&wav)
            .args(["-c:a", codec])
            .arg(&path)
            .status()
            .expect("ffmpeg runs (scripts/install-test-deps installs it)");
        assert!(status.success(), "ffmpeg made no {ext}");
        let decoded = decode_file(&path, DecodeLimits::default()).unwrap();
        assert_eq!(decoded.sample_rate, original.sample_rate, "{ext}");
        // Encoders add priming samples and padding: within 100 ms.
        let diff = (decoded.duration_secs() - original.duration_secs()).abs();
        assert!(
            diff < 0.1,
            "{ext}: {} s vs {} s",
            decoded.duration_secs(),
            original.duration_secs()
        );
        let transcript = transcribe(&service, &path).await.unwrap();
        assert!(
            transcript.text().to_lowercase().contains("format"),
            "{ext}: {}",
            transcript.text()
        );
    }
}

/// A recording made as a video (MP4, QuickTime MOV, Matroska, WebM): its sound is the audio
/// track, wherever the picture's track comes, in each codec such files carry (AAC, Opus,
/// Vorbis, FLAC, PCM); and an Ogg Opus file (what Headroom's own answers are).
#[tokio::test]
async fn the_sound_of_a_video_is_its_audio_track() {
    let service = service();
    let wav = scratch("video-sound.wav");
    speak_to(&service, "A video has a picture and a sound track.", &wav).await;
    let original = decode_file(&wav, DecodeLimits::default()).unwrap();
    for (name, picture, sound) in [
        ("aac.mp4", Some("mpeg4"), "aac"),
        ("aac.mov", Some("mpeg4"), "aac"),
        ("aac.mkv", Some("mpeg4"), "aac"),
        ("flac.mkv", Some("mpeg4"), "flac"),
        ("pcm.mkv", Some("mpeg4"), "pcm_s16le"),
        ("opus.webm", Some("libvpx"), "libopus"),
        ("vorbis.webm", Some("libvpx"), "libvorbis"),
        ("voice.opus", None, "libopus"),
    ] {
        let path = scratch(&format!("video-{name}"));
        let mut ffmpeg = std::process::Command::new("ffmpeg");
        ffmpeg.args(["-loglevel", "error", "-y"]);
        if let Some(codec) = picture {
            // The picture first (track 1), then the sound.
            ffmpeg
                .args(["-f", "lavfi", "-i", "testsrc=size=160x120:rate=10", "-i"])
                .arg(&wav)
                .args(["-map", "0:v", "-map", "1:a", "-c:v", codec, "-shortest"]);
        } else {
            ffmpeg.arg("-i").arg(&wav);
        }
        let status = ffmpeg
            .args(["-c:a", sound])
            .arg(&path)
            .status()
            .expect("ffmpeg runs (scripts/install-test-deps installs it)");
        assert!(status.success(), "ffmpeg made no {name}");
        let decoded = decode_file(&path, DecodeLimits::default()).unwrap();
        // Opus sounds at 48 kHz whatever went in.
        let rate = if sound == "libopus" {
            48_000
        } else {
            original.sample_rate
        };
        assert_eq!(decoded.sample_rate, rate, "{name}");
        let diff = (decoded.duration_secs() - original.duration_secs()).abs();
        assert!(
            diff < 0.15,
            "{name}: {} s vs {} s",
            decoded.duration_secs(),
            original.duration_secs()
        );
        let transcript = transcribe(&service, &path).await.unwrap();
        assert!(
            transcript.text().to_lowercase().contains("picture"),
            "{name}: {}",
            transcript.text()
        );
    }
}

#[tokio::test]
async fn bad_files_are_refused_with_their_name_and_problem() {
    let service = service();
    let empty = scratch("empty.wav");
    std::fs::write(&empty, b"").unwrap();
    let not_audio = scratch("notes.mp3");
    std::fs::write(&not_audio, "meeting notes, not audio\n".repeat(50)).unwrap();
    let silent = scratch("silent.wav");
    write_wav(
        &silent,
        &headroom_speech::audio::Audio {
            samples: vec![0.0; 16_000],
            sample_rate: 16_000,
        },
    )
    .unwrap();
    let good = scratch("good.wav");
    speak_to(&service, "Short.", &good).await;
    let mut bytes = std::fs::read(&good).unwrap();
    bytes.truncate(40);
    let truncated = scratch("truncated.wav");
    std::fs::write(&truncated, bytes).unwrap();
    let missing = scratch("does-not-exist.wav");

    let error = |r: Result<_, SpeechError>| match r {
        Err(SpeechError::Audio(e)) => e,
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("a bad file was accepted"),
    };
    assert!(matches!(
        error(transcribe(&service, &empty).await),
        AudioError::Empty { .. }
    ));
    let e = error(transcribe(&service, &not_audio).await);
    assert!(matches!(e, AudioError::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("notes.mp3"));
    assert!(matches!(
        error(transcribe(&service, &silent).await),
        AudioError::Silent { .. }
    ));
    assert!(matches!(
        error(transcribe(&service, &truncated).await),
        AudioError::Corrupt { .. }
    ));
    let e = error(transcribe(&service, &missing).await);
    assert!(e.to_string().contains("does-not-exist.wav"), "{e}");
    assert_eq!(service.lane().snapshot().occupancy.in_flight, 0);
}

#[tokio::test]
async fn cancelling_stops_transcription_and_frees_the_lane() {
    let service = service();
    let path = scratch("cancel.wav");
    let text = "This recording is long enough to need several windows of work. ".repeat(12);
    speak_to(&service, &text, &path).await;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    // Cancel as soon as the first window reports progress.
    let progress = Arc::new(move |_: f32| trigger.cancel());
    let result = service
        .transcribe(
            AudioInput::from_file(&path).unwrap(),
            MODEL,
            TranscribeOptions::default(),
            Priority::Normal,
            progress,
            cancel,
        )
        .await;
    assert!(
        matches!(
            result,
            Err(SpeechError::Asr(headroom_speech::asr::AsrError::Cancelled))
                | Err(SpeechError::Rejected(_))
        ),
        "{:?}",
        result.map(|t| t.text())
    );
    assert_eq!(service.lane().snapshot().occupancy.in_flight, 0);
}

#[tokio::test]
async fn an_uninstalled_model_says_how_to_install_it() {
    let service = service();
    let path = scratch("model.wav");
    speak_to(&service, "Hello.", &path).await;
    // A process whose models folder is empty, as HEADROOM_MODELS_DIR would make it.
    let empty_dir = scratch("no-models");
    let services = headroom_services::Services::new(
        Config::default(),
        headroom_services::Environment::from_vars(
            |name| match name {
                "HEADROOM_MODELS_DIR" => Some(empty_dir.clone().into()),
                _ => std::env::var_os(name),
            },
            std::env::temp_dir,
        ),
    );
    let err = services
        .speech()
        .transcribe(
            AudioInput::from_file(&path).unwrap(),
            MODEL,
            TranscribeOptions::default(),
            Priority::Normal,
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await;
    match err {
        Err(SpeechError::Model(e)) => {
            assert!(
                e.to_string()
                    .contains("headroom models install whisper-tiny.en"),
                "{e}"
            )
        }
        Ok(_) => panic!("a model was found in an empty directory"),
        Err(other) => panic!("unexpected {other}"),
    }
}

#[tokio::test]
async fn the_multilingual_model_detects_the_language() {
    let service = service();
    let path = scratch("german.wav");
    let audio = service
        .synthesize(
            // faster-whisper detects German in this clip with p = 0.84 (other sentences spoken by
            // espeak-ng fool both it and Headroom).
            "Guten Morgen. Heute ist das Wetter schön, und wir gehen in den Park.".into(),
            Some("de".into()),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    write_wav(&path, &audio).unwrap();
    let transcribe_with = |model: &'static str, language: Option<&str>| {
        let input = AudioInput::from_file(&path).unwrap();
        let options = TranscribeOptions::in_language(language.map(str::to_string));
        service.transcribe(
            input,
            model,
            options,
            Priority::Normal,
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
    };
    let transcript = transcribe_with("whisper-base", None).await.unwrap();
    assert_eq!(
        transcript.language.as_deref(),
        Some("de"),
        "{}",
        transcript.text()
    );
    assert!(
        transcript.text().contains("Morgen"),
        "{}",
        transcript.text()
    );
    // English-only models refuse other languages rather than guessing.
    let err = transcribe_with(MODEL, Some("de")).await;
    assert!(matches!(
        err,
        Err(SpeechError::Asr(
            headroom_speech::asr::AsrError::UnknownLanguage(_)
        ))
    ));
}

#[tokio::test]
async fn the_neural_voice_speaks_intelligibly() {
    assert!(
        std::env::var_os("HEADROOM_MODELS_DIR").is_some(),
        "run with scripts/test"
    );
    let services = headroom_tests::services(Config::default());
    let (service, voice) = services
        .speech_for_voice(Some("piper-joe"))
        .expect("scripts/test installs piper-joe");
    assert_eq!(voice, None, "a neural voice speaks with its own engine");
    let text = "Please send the report to my office before noon. We recorded the river at night for three hours.";
    let audio = service
        .synthesize(text.into(), None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(audio.sample_rate, 22_050);
    let path = scratch("piper.wav");
    write_wav(&path, &audio).unwrap();
    let transcript = transcribe(&service, &path).await.unwrap();
    let wer = word_error_rate(text, &transcript.text());
    assert!(
        wer <= 0.15,
        "word error rate {wer:.2}: {:?}",
        transcript.text()
    );
}

/// Two phrases with a pause between, as someone speaking into the microphone.
struct Spoken {
    samples: Vec<f32>,
    /// Sample ranges of the two phrases.
    phrases: [std::ops::Range<usize>; 2],
}

async fn two_phrases(service: &SpeechService, first: &str, second: &str) -> Spoken {
    let mut samples = Vec::new();
    silence(&mut samples, 0.6);
    let a = samples.len();
    samples.extend(spoken_16k(service, first).await);
    let a_end = samples.len();
    silence(&mut samples, 1.6);
    let b = samples.len();
    samples.extend(spoken_16k(service, second).await);
    let b_end = samples.len();
    silence(&mut samples, 1.0);
    Spoken {
        samples,
        phrases: [a..a_end, b..b_end],
    }
}

#[tokio::test]
async fn the_voice_detector_judges_audio_heard_in_pieces_as_in_one_piece() {
    use headroom_speech::asr::vad::VadStream;
    let service = service();
    let spoken = two_phrases(&service, "Good morning everyone.", "Thank you.").await;
    let dir = headroom_speech::models::locate(service.models_dir(), "silero-vad").unwrap();
    let vad = service.loaded_vad(&dir).unwrap();
    let whole = vad.probabilities(&spoken.samples).unwrap();
    let mut stream = VadStream::default();
    let mut pieces = Vec::new();
    // A tenth of a second at a time, as a recording delivers it (not whole frames).
    for piece in spoken.samples.chunks(1600) {
        pieces.extend(vad.feed(&mut stream, piece).unwrap());
    }
    pieces.extend(vad.flush(&mut stream).unwrap());
    assert_eq!(pieces.len(), whole.len());
    let worst = whole
        .iter()
        .zip(&pieces)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(worst < 1e-4, "frames differ by up to {worst}");
    assert!(whole.iter().any(|p| *p > 0.9) && whole[..10].iter().all(|p| *p < 0.2));
}

#[tokio::test]
async fn live_transcription_shows_the_phrase_as_it_is_spoken_then_its_final_text() {
    use headroom_speech::asr::live::{LiveParams, LiveTranscriber, LiveUpdate};
    use headroom_speech::asr::whisper::Precision;
    let service = service();
    let first = "The quick brown fox jumps over the lazy dog near the river bank.";
    let second = "Please call me back tomorrow morning after the meeting.";
    let spoken = two_phrases(&service, first, second).await;
    let engine_dir = headroom_speech::models::locate(service.models_dir(), MODEL).unwrap();
    let vad_dir = headroom_speech::models::locate(service.models_dir(), "silero-vad").unwrap();
    let engine = service
        .loaded_engine(MODEL, &engine_dir, Precision::Int8)
        .unwrap();
    let vad = service.loaded_vad(&vad_dir).unwrap();
    let mut live = LiveTranscriber::new(
        engine,
        vad,
        TranscribeOptions::default(),
        LiveParams::default(),
    );
    let cancel = CancellationToken::new();
    // Each update with how much audio had been heard when it came.
    let mut updates: Vec<(usize, LiveUpdate)> = Vec::new();
    let mut heard = 0;
    for piece in spoken.samples.chunks(1600) {
        live.push(piece).unwrap();
        heard += piece.len();
        while let Some(update) = live.step(&cancel).unwrap() {
            updates.push((heard, update));
        }
    }
    let (rest, transcript) = live.finish(&cancel).unwrap();
    updates.extend(rest.into_iter().map(|u| (heard, u)));

    let [a, b] = &spoken.phrases;
    let secs = |samples: usize| samples as f64 / 16_000.0;
    let finals: Vec<(usize, &Vec<headroom_speech::asr::Segment>)> = updates
        .iter()
        .filter_map(|(at, u)| match u {
            LiveUpdate::Final { segments } => Some((*at, segments)),
            _ => None,
        })
        .collect();
    assert_eq!(finals.len(), 2, "one final per phrase: {updates:#?}");
    // The first phrase is final once its pause is heard, before the second phrase begins.
    assert!(finals[0].0 > a.end && finals[0].0 < b.start, "{updates:#?}");
    for ((_, segments), (phrase, text)) in finals.iter().zip([(a, first), (b, second)]) {
        let said: Vec<&str> = segments.iter().map(|s| s.text.trim()).collect();
        let wer = word_error_rate(text, &said.join(" "));
        assert!(wer <= 0.25, "{text:?} was heard as {said:?} (WER {wer})");
        // Timed in the whole recording.
        assert!(
            segments[0].start >= secs(phrase.start) - 0.5,
            "{segments:?}"
        );
        assert!(
            segments.last().unwrap().end <= secs(phrase.end) + 0.8,
            "{segments:?}"
        );
    }
    // The phrase being spoken shows within a second of its start, and again as it goes.
    for (phrase, said) in [(a, first), (b, second)] {
        let partials: Vec<(usize, &str)> = updates
            .iter()
            .filter_map(|(at, u)| match u {
                LiveUpdate::Partial { text, .. } if phrase.contains(at) => {
                    Some((*at, text.as_str()))
                }
                _ => None,
            })
            .collect();
        assert!(partials.len() >= 2, "partials while speaking: {updates:#?}");
        let first_shown = partials[0].0 - phrase.start;
        assert!(
            secs(first_shown) <= 1.0,
            "the first partial came {:.2} s into the phrase",
            secs(first_shown)
        );
        assert!(partials.iter().any(|(_, text)| !text.is_empty()));
        // Partials come from only the phrase's audio (not a padded 30 s window), yet must
        // not run on: Whisper that cannot hear the speech end repeats it until out of tokens.
        for (_, text) in &partials {
            assert!(
                text.split_whitespace().count() <= 2 * said.split_whitespace().count(),
                "a partial ran on: {text:?}"
            );
        }
    }
    // The whole transcript is every final, in order.
    let all = format!("{first} {second}");
    assert!(
        word_error_rate(&all, &transcript.text()) <= 0.25,
        "{}",
        transcript.text()
    );
    assert!((transcript.duration - secs(spoken.samples.len())).abs() < 0.01);
    assert_eq!(transcript.language.as_deref(), Some("en"));
}

/// A person's transcription while a long batch transcription runs: the batch job gives way to
/// it, the metrics say which batch work it ran beside, and the batch job still ends with the
/// text it gets alone.
#[tokio::test]
async fn a_batch_transcription_gives_way_to_an_interactive_one() {
    let services = headroom_tests::services(Config::default());
    let service = services.speech().clone();
    let long = scratch("batch-long.wav");
    let text = "This recording is long enough to need several windows of work. ".repeat(9);
    speak_to(&service, &text, &long).await;
    let short = scratch("interactive-short.wav");
    speak_to(&service, "Please send the report before noon.", &short).await;
    // Window by window (no voice detection), so progress comes with windows still to do.
    let windows = TranscribeOptions {
        skip_silence: false,
        ..TranscribeOptions::default()
    };
    let alone = transcribe_with(&service, &long, windows.clone())
        .await
        .unwrap()
        .text();
    let metrics = services.metrics().clone();
    assert_eq!(metrics.batch_paused_secs("transcription"), 0.0);

    let (first_window_tx, first_window) = tokio::sync::oneshot::channel();
    let first_window_tx = std::sync::Mutex::new(Some(first_window_tx));
    let progress = Arc::new(move |_: f32| {
        if let Some(tx) = first_window_tx.lock().unwrap().take() {
            let _ = tx.send(());
        }
    });
    let batch = {
        let service = service.clone();
        let input = AudioInput::from_file(&long).unwrap();
        tokio::spawn(async move {
            service
                .transcribe(
                    input,
                    MODEL,
                    windows,
                    Priority::Normal,
                    progress,
                    CancellationToken::new(),
                )
                .await
        })
    };
    first_window.await.unwrap();
    // The batch job has windows left: it is paused at its next safe point until this ends.
    let interactive = service
        .transcribe(
            AudioInput::from_file(&short).unwrap(),
            MODEL,
            TranscribeOptions::default(),
            Priority::Interactive,
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(interactive.text().to_lowercase().contains("report"));
    let batch = batch.await.unwrap().unwrap();
    assert_eq!(batch.text(), alone, "pausing changes nothing in the result");
    // Whether it paused at a safe point or only waited at the idle priority inside a step
    // depends on what else the machine runs (the pause itself is tested in headroom_base);
    // that the interactive job ran beside it is certain.
    assert_eq!(
        metrics.interactive_beside("transcription", "transcription"),
        1
    );
    let view = services.audio_lane().cpu_share();
    assert!(view.batch_gives_way && view.batch.is_empty() && view.interactive_running == 0);
}

/// Batch speech runs on the model's second session, on idle-priority threads: the same voice
/// says the same thing as for interactive work.
#[tokio::test]
async fn a_batch_take_sounds_as_an_interactive_one() {
    let services = headroom_tests::services(Config::default());
    let (service, voice) = services
        .speech_for_voice(Some("kokoro"))
        .expect("scripts/test installs kokoro");
    let line = "The river was loud that night.";
    let mut takes = Vec::new();
    for priority in [Priority::Interactive, Priority::Normal] {
        takes.push(
            service
                .synthesize_at(
                    line.into(),
                    voice.clone(),
                    priority,
                    CancellationToken::new(),
                )
                .await
                .unwrap(),
        );
    }
    let (interactive, batch) = (&takes[0], &takes[1]);
    assert_eq!(interactive.samples.len(), batch.samples.len());
    let largest_difference = interactive
        .samples
        .iter()
        .zip(&batch.samples)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(largest_difference < 1e-3, "{largest_difference}");
}
