//! `POST /v1/audio/speech`: a voice profile's take whole, or an engine's sentence by sentence
//! as the client takes them (raw bytes or SSE).

use super::blocking;
use crate::body_budget::read_body;
use crate::chat::unread_error;
use crate::write_deadline::ClientTaking;
use crate::{HttpError, ServerState};
use axum::body::Body;
use axum::extract::{Extension, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use headroom_services::speaking_voice::SpeakingVoice;
use headroom_services::speech::{SpeechError, SpeechService};
use headroom_services::voice_work::VoiceTake;
use headroom_speech::audio::{encode, Audio, SpeechFormat, StreamEncoder, UnknownFormat};
use headroom_speech::tts;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[derive(Deserialize)]
struct SpeechRequest {
    input: String,
    #[serde(default)]
    voice: Option<String>,
    #[serde(default)]
    response_format: Option<String>,
    #[serde(default)]
    speed: Option<f64>,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    stream_format: Option<String>,
}

/// `response_format`: OpenAI's names, mp3 when absent; an unknown name or one without an
/// encoder here (aac) is a 400 with the formats that are answered.
fn speech_format(requested: Option<&str>) -> Result<SpeechFormat, HttpError> {
    let Some(requested) = requested else {
        return Ok(SpeechFormat::default());
    };
    let format: SpeechFormat = requested.parse().map_err(|e: UnknownFormat| {
        HttpError::bad_request(
            "invalid_response_format",
            format!("{e}; use {}", SpeechFormat::available_list()),
        )
    })?;
    if let Some(reason) = format.unavailable() {
        return Err(HttpError::bad_request(
            "response_format_unavailable",
            format!(
                "{format} is not available: {reason}; use {}",
                SpeechFormat::available_list()
            ),
        ));
    }
    Ok(format)
}

/// `speed`: 1 when absent, else within OpenAI's 0.25 to 4.0.
fn speech_speed(requested: Option<f64>) -> Result<f32, HttpError> {
    let speed = requested.unwrap_or(1.0);
    let (low, high) = (*tts::SPEEDS.start(), *tts::SPEEDS.end());
    if !speed.is_finite() || !tts::SPEEDS.contains(&(speed as f32)) {
        return Err(HttpError::bad_request(
            "invalid_speed",
            format!("speed {speed} is outside {low} to {high} (1 is the voice's own pace)"),
        ));
    }
    Ok(speed as f32)
}

/// How `/v1/audio/speech` sends its audio (`stream_format`, as OpenAI defines it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SpeechStream {
    /// The file's bytes, sent as each sentence is synthesized (chunked transfer).
    Audio,
    /// Server-sent events: `speech.audio.delta` with the next bytes in base64, then
    /// `speech.audio.done`.
    Sse,
}

fn speech_stream(requested: Option<&str>) -> Result<SpeechStream, HttpError> {
    match requested {
        None | Some("audio") => Ok(SpeechStream::Audio),
        Some("sse") => Ok(SpeechStream::Sse),
        Some(other) => Err(HttpError::bad_request(
            "invalid_stream_format",
            format!("unknown stream_format {other:?}; use audio or sse"),
        )),
    }
}

/// The pause between sentences of a streamed take, as the engines put between them.
const SENTENCE_PAUSE_MS: u32 = 200;

/// One part of a streamed answer: bytes of the file, or the end (`done`) or failure of an
/// SSE stream.
enum StreamPart {
    Audio(Vec<u8>),
    Done { sentences: usize, seconds: f64 },
    Failed(HttpError),
}

impl StreamPart {
    /// The part as sent: raw bytes, or an SSE event (`Failed` on a raw stream breaks it, so
    /// the client sees a cut transfer rather than a short file that looks whole).
    fn framed(self, stream: SpeechStream) -> Result<axum::body::Bytes, std::io::Error> {
        use base64::Engine as _;
        let event = match (self, stream) {
            (StreamPart::Audio(bytes), SpeechStream::Audio) => return Ok(bytes.into()),
            (StreamPart::Done { .. }, SpeechStream::Audio) => return Ok(axum::body::Bytes::new()),
            (StreamPart::Failed(e), SpeechStream::Audio) => {
                return Err(std::io::Error::other(e.to_string()))
            }
            (StreamPart::Audio(bytes), SpeechStream::Sse) => json!({
                "type": "speech.audio.delta",
                "audio": base64::engine::general_purpose::STANDARD.encode(bytes),
            }),
            // Local engines are not metered in tokens: usage is zero, and Headroom's own
            // figures ride beside it.
            (StreamPart::Done { sentences, seconds }, SpeechStream::Sse) => json!({
                "type": "speech.audio.done",
                "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
                "headroom": {"sentences": sentences, "audio_seconds": seconds},
            }),
            (StreamPart::Failed(e), SpeechStream::Sse) => json!({
                "type": "error",
                "error": e.body()["error"].clone(),
            }),
        };
        Ok(format!("data: {event}\n\n").into())
    }
}

/// The answer's headers: the format's content type, or SSE's.
fn stream_response(stream: SpeechStream, format: SpeechFormat, body: Body) -> Response {
    let content_type = match stream {
        SpeechStream::Audio => format.content_type(),
        SpeechStream::Sse => "text/event-stream",
    };
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// A streamed answer's text: its first sentence already spoken (before the headers, so a
/// failure to start is still an HTTP error) and the sentences still to speak.
struct StreamedSentences {
    first: Audio,
    rest: Vec<String>,
}

/// Speaks `rest` sentence by sentence after `first` (already synthesized, so a failure to
/// start is still an HTTP error), encoding and sending each as it is ready. The body ends
/// when the last is sent; a client that goes away stops the work (`cancel` fires when the
/// sending task ends).
///
/// Synthesis never runs far ahead of the client: a sentence is synthesized only once the
/// connection has taken every part before it (the channel holds one part) and its socket is
/// not waiting on the client (`taking`; the kernel keeps little unsent:
/// [`crate::write_deadline`]). A client that stops reading therefore stops the work once its
/// own receive buffer is full, holds no place in the audio lane while it waits, and is
/// disconnected at the write timeout, which drops this body and cancels the job. The later
/// sentences take the streams' turns in the lane ([`SpeechService::synthesize_streamed`]).
fn streamed_speech(
    speech: Arc<SpeechService>,
    voice: Option<String>,
    StreamedSentences { first, rest }: StreamedSentences,
    encoder: StreamEncoder,
    stream: SpeechStream,
    cancel: CancellationToken,
    taking: Option<ClientTaking>,
) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<StreamPart>(1);
    tokio::spawn(async move {
        let _stop_on_exit = cancel.clone().drop_guard();
        let mut joiner = tts::ClipJoiner::new(SENTENCE_PAUSE_MS);
        // FLAC is sent whole at the end, its header saying the length (a client's player
        // shows it, and seeks); the other formats as each sentence is encoded.
        let mut held = (encoder.format() == SpeechFormat::Flac).then(Vec::new);
        let mut encoder = Some(encoder);
        let (mut sentences, mut seconds) = (0usize, 0.0f64);
        let mut next = Some(first);
        let mut rest = rest.into_iter();
        let failure = loop {
            // Room for the next part: the client has taken every part before it (or went away).
            let Ok(room) = tx.reserve().await else {
                return;
            };
            // ...and its socket takes bytes: one full with what a client has not read holds
            // the next sentence back until it reads (or the write timeout disconnects it).
            if let Some(taking) = &taking {
                tokio::select! {
                    () = taking.until_taking() => {}
                    () = tx.closed() => return,
                }
            }
            let clip = match next.take() {
                Some(clip) => clip,
                None => match rest.next() {
                    None => break None,
                    Some(sentence) => {
                        let spoken =
                            speech.synthesize_streamed(sentence, voice.clone(), cancel.clone());
                        let synthesized = tokio::select! {
                            spoken = spoken => spoken,
                            // The client went away: stop now, not after this sentence.
                            () = tx.closed() => return,
                        };
                        match synthesized {
                            Ok(clip) => clip,
                            // A sentence of punctuation alone makes no sound.
                            Err(SpeechError::Tts(tts::TtsError::EmptyText)) => continue,
                            Err(e) => break Some(HttpError::from(e)),
                        }
                    }
                },
            };
            let piece = joiner.next(clip);
            sentences += 1;
            seconds += piece.duration_secs();
            let mut taken = encoder
                .take()
                .expect("the encoder is put back after each piece");
            let (back, bytes) = blocking(move || {
                let bytes = taken.push(&piece);
                (taken, bytes)
            })
            .await;
            encoder = Some(back);
            match bytes {
                Ok(bytes) => match &mut held {
                    Some(held) => held.extend(bytes),
                    // A format may hold a short piece back.
                    None if bytes.is_empty() => {}
                    None => room.send(StreamPart::Audio(bytes)),
                },
                Err(e) => break Some(HttpError::Encode(e)),
            }
        };
        let end = match failure {
            Some(e) => {
                tracing::warn!(error = %e, "streamed speech stopped");
                StreamPart::Failed(e)
            }
            None => {
                let taken = encoder
                    .take()
                    .expect("the encoder is put back after each piece");
                match blocking(move || taken.finish_whole()).await {
                    Ok(end) => {
                        let bytes = match held.take() {
                            Some(mut whole) => {
                                whole.extend(end.tail);
                                if let Some(header) = end.header {
                                    whole[..header.len()].copy_from_slice(&header);
                                }
                                whole
                            }
                            None => end.tail,
                        };
                        if !bytes.is_empty() && tx.send(StreamPart::Audio(bytes)).await.is_err() {
                            return;
                        }
                        StreamPart::Done { sentences, seconds }
                    }
                    Err(e) => StreamPart::Failed(HttpError::Encode(e)),
                }
            }
        };
        let _ = tx.send(end).await;
    });
    let parts = futures::stream::unfold(rx, move |mut rx| async move {
        let part = rx.recv().await?;
        Some((part.framed(stream), rx))
    });
    Body::from_stream(parts)
}

/// `instructions`: no voice here follows free-text instructions (tone, accent, pace in
/// words), so a request with any is refused rather than spoken as if they were followed.
fn refuse_instructions(instructions: Option<&str>, voice: Option<&str>) -> Result<(), HttpError> {
    if instructions.is_none_or(|i| i.trim().is_empty()) {
        return Ok(());
    }
    let voice = voice.map_or("the default voice".to_string(), |v| {
        format!("the voice {v:?}")
    });
    Err(HttpError::bad_request(
        "instructions_not_supported",
        format!(
            "{voice} cannot follow instructions: none of Headroom's voices (Kokoro, Piper, \
             espeak-ng, voice profiles) takes free-text instructions; send the request without \
             `instructions` (use `speed` for pace, a voice or Kokoro style for character)"
        ),
    ))
}

/// `audio` at `speed` (time-stretched, same pitch) in `format`, off the async threads.
async fn encoded(audio: Audio, speed: f32, format: SpeechFormat) -> Result<Vec<u8>, HttpError> {
    blocking(move || encode(&tts::stretched(audio, speed), format))
        .await
        .map_err(HttpError::Encode)
}

pub(super) async fn speech(
    State(state): State<Arc<ServerState>>,
    taking: Option<Extension<ClientTaking>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    let limit = state.max_body_bytes;
    let buffered = read_body(&state.body_budget, &headers, body, limit)
        .await
        .map_err(|unread| {
            unread_error(&state, unread, || {
                HttpError::bad_request(
                    "input_too_long",
                    format!("the request body is over the {limit} byte limit"),
                )
            })
        })?;
    let request: SpeechRequest = serde_json::from_slice(&buffered.bytes).map_err(|e| {
        HttpError::bad_request("invalid_request", format!("not a speech request: {e}"))
    })?;
    drop(buffered);
    let format = speech_format(request.response_format.as_deref())?;
    let stream = speech_stream(request.stream_format.as_deref())?;
    let speed = speech_speed(request.speed)?;
    // The one bound on text to speak, for every entry.
    headroom_services::speech::check_speech_input(&request.input)?;
    let voice = request.voice.filter(|v| !v.trim().is_empty());
    refuse_instructions(request.instructions.as_deref(), voice.as_deref())?;
    let cancel = CancellationToken::new();
    // Until the answer is under way, a client gone (this future dropped) cancels the work.
    let guard = cancel.clone().drop_guard();
    // Voice profiles (cloned through the configured server, else their voice match), OpenAI's
    // names mapped, Kokoro's and Piper's by id, else espeak-ng's.
    let (speech, voice) = match state.services.resolve_voice(voice.as_deref()).await? {
        SpeakingVoice::Profile(profile) => {
            let take = state
                .voices
                .speak(&profile, request.input, cancel)
                .await
                .map_err(HttpError::from)?;
            return profile_take_response(take, format, speed, stream).await;
        }
        SpeakingVoice::Engine { speech, voice } => (speech, voice),
    };
    // The engine's own speed where it has one (Kokoro's), else a time-stretch of its take.
    let speech = if speed == 1.0 {
        speech
    } else {
        let engine = Arc::new(tts::AtSpeed::new(speech.synthesizer().clone(), speed));
        Arc::new(speech.with_synthesizer(engine))
    };
    // Sentence by sentence, the first before answering: a long text starts playing in the
    // time of its first sentence, and a voice or engine that cannot speak is still an error
    // status rather than a cut stream.
    let encoder = StreamEncoder::new(format).map_err(HttpError::Encode)?;
    let mut sentences = tts::sentences(&request.input).into_iter();
    // No sentence at all (blank input): the engine's own "nothing to say".
    let first = sentences.next().unwrap_or(request.input);
    let started = std::time::Instant::now();
    let first = speech
        .synthesize(first, voice.clone(), cancel.clone())
        .await?;
    tracing::debug!(
        first_sentence_ms = started.elapsed().as_millis() as u64,
        "speech: the first sentence is ready"
    );
    // From here the sending task owns the work: it stops when the client goes away.
    guard.disarm();
    let body = streamed_speech(
        speech,
        voice,
        StreamedSentences {
            first,
            rest: sentences.collect(),
        },
        encoder,
        stream,
        cancel,
        taking.map(|Extension(taking)| taking),
    );
    Ok(stream_response(stream, format, body))
}

/// A voice profile's take as the answer, with how it was made and how close it is in headers.
/// The take is made whole (cloning servers answer whole takes; the voice match is judged on the
/// whole): SSE sends it as one delta.
async fn profile_take_response(
    take: VoiceTake,
    format: SpeechFormat,
    speed: f32,
    stream: SpeechStream,
) -> Result<Response, HttpError> {
    let headers = [
        (header::CONTENT_TYPE, format.content_type().to_string()),
        (
            header::HeaderName::from_static("x-headroom-voice-method"),
            take.method.label(),
        ),
        (
            header::HeaderName::from_static("x-headroom-similarity"),
            format!("{:.3}", take.closeness.similarity),
        ),
        (
            header::HeaderName::from_static("x-headroom-default-similarity"),
            format!("{:.3}", take.closeness.default_similarity),
        ),
        // By the independent embedder (Resemblyzer's), which the voice match never
        // searched against; "none" when it is not installed.
        (
            header::HeaderName::from_static("x-headroom-similarity-independent"),
            take.closeness
                .similarity_independent
                .map_or("none".into(), |s| format!("{s:.3}")),
        ),
    ];
    let seconds = take.audio.duration_secs() / f64::from(speed);
    let bytes = encoded(take.audio, speed, format).await?;
    // A profile's take is made whole (cloning servers answer whole takes; the voice
    // match is judged on the whole): SSE sends it as one delta.
    if stream == SpeechStream::Sse {
        let events = [
            StreamPart::Audio(bytes),
            StreamPart::Done {
                sentences: 1,
                seconds,
            },
        ]
        .map(|part| part.framed(stream));
        let body = Body::from_stream(futures::stream::iter(events));
        let mut response = stream_response(stream, format, body);
        response.headers_mut().extend(
            headers
                .into_iter()
                .filter(|(name, _)| name != header::CONTENT_TYPE)
                .filter_map(|(name, value)| Some((name, value.parse().ok()?))),
        );
        return Ok(response);
    }
    Ok((headers, bytes).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(e: HttpError) -> (&'static str, String) {
        (e.code(), e.to_string())
    }

    #[test]
    fn speech_options_take_openais_values_and_refuse_others_naming_the_accepted_ones() {
        assert_eq!(speech_format(None).unwrap(), SpeechFormat::Mp3);
        for name in ["mp3", "opus", "flac", "wav", "pcm"] {
            assert_eq!(speech_format(Some(name)).unwrap().name(), name);
        }
        let (code, message) = refusal(speech_format(Some("ogg")).unwrap_err());
        assert_eq!(code, "invalid_response_format");
        assert!(
            message.contains("use mp3, opus, flac, wav or pcm"),
            "{message}"
        );
        let (code, message) = refusal(speech_format(Some("aac")).unwrap_err());
        assert_eq!(code, "response_format_unavailable");
        assert!(message.starts_with("aac is not available: "), "{message}");

        assert_eq!(speech_speed(None).unwrap(), 1.0);
        assert_eq!(speech_speed(Some(0.25)).unwrap(), 0.25);
        assert_eq!(speech_speed(Some(4.0)).unwrap(), 4.0);
        for bad in [0.2, 4.1, f64::NAN, -1.0] {
            let (code, message) = refusal(speech_speed(Some(bad)).unwrap_err());
            assert_eq!(code, "invalid_speed");
            assert!(message.contains("0.25 to 4"), "{message}");
        }

        assert!(refuse_instructions(None, Some("alloy")).is_ok());
        assert!(refuse_instructions(Some("  "), Some("alloy")).is_ok());
        let (code, message) =
            refusal(refuse_instructions(Some("Be cheerful."), Some("kokoro")).unwrap_err());
        assert_eq!(code, "instructions_not_supported");
        assert!(message.contains("the voice \"kokoro\""), "{message}");
        let (_, message) = refusal(refuse_instructions(Some("Be cheerful."), None).unwrap_err());
        assert!(message.contains("the default voice"), "{message}");
    }
}
