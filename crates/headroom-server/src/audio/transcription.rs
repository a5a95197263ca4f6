//! `POST /v1/audio/transcriptions` and `/v1/audio/translations`: a multipart upload read
//! within its bounds, transcribed (diarized against known speakers when asked) on the audio
//! lane, answered in the format asked for.

use crate::min_rate::is_too_slow;
use crate::{HttpError, ServerState};
use axum::extract::{Multipart, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use headroom_core::admission::{Lane, Priority, RejectReason, Rejection};
use headroom_services::speech::{AudioInput, KnownVoice, SpeakerRequest, Transcription};
use headroom_speech::asr::diarize::SpeakerCount;
use headroom_speech::asr::export::{render, ExportFormat};
use headroom_speech::asr::{Speaker, TranscribeOptions, Transcript};
use headroom_speech::models::{self, DEFAULT_MODEL};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

fn too_large(state: &ServerState) -> HttpError {
    HttpError::UploadTooLarge {
        message: format!(
            "the upload is over the {} MiB limit",
            state.max_upload_bytes / (1024 * 1024)
        ),
    }
}

/// `model` as clients send it: ours by name, anything else (e.g. `whisper-1`) means the default.
fn transcription_model(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|m| models::spec(m).ok())
        .map(|spec| spec.name)
        .unwrap_or(DEFAULT_MODEL)
}

/// The most a form's text field (model, language, format...) may hold.
const MAX_TEXT_FIELD_BYTES: usize = 64 * 1024;
/// The most known speakers a request may name with a reference recording, as OpenAI's
/// diarizing model takes.
const MAX_KNOWN_SPEAKERS: usize = 4;
/// The most a known speaker's reference (a data URL, base64) may hold: 10 s of 48 kHz stereo
/// 16-bit WAV with room to spare.
const MAX_REFERENCE_FIELD_BYTES: usize = 4 * 1024 * 1024;
/// The longest name a known speaker may have.
const MAX_SPEAKER_NAME_CHARS: usize = 100;

fn form_error(
    state: &ServerState,
    name: &str,
    e: axum::extract::multipart::MultipartError,
) -> HttpError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return too_large(state);
    }
    if let Some(slow) = is_too_slow(&e) {
        let error = HttpError::BodyTooSlow(slow.clone());
        state.count_refusal(&error);
        tracing::warn!(%error, "dropped an upload that arrived too slowly");
        return error;
    }
    HttpError::bad_request(
        "invalid_multipart",
        format!("cannot read the form's {name}: {}", e.body_text()),
    )
}

/// Receives the `file` field into a temporary file as it arrives, never holding it in memory.
async fn receive_file(
    state: &ServerState,
    mut field: axum::extract::multipart::Field<'_>,
) -> Result<tempfile::TempPath, HttpError> {
    let storage = |e: std::io::Error| HttpError::Storage {
        message: format!(
            "cannot store the upload in {}: {e}",
            state.upload_dir.display()
        ),
    };
    let temp = tempfile::Builder::new()
        .prefix("headroom-upload-")
        .tempfile_in(&state.upload_dir)
        .map_err(storage)?;
    let (file, path) = temp.into_parts();
    let mut file = tokio::fs::File::from_std(file);
    let mut received = 0usize;
    while let Some(chunk) = field
        .chunk()
        .await
        .map_err(|e| form_error(state, "file", e))?
    {
        received += chunk.len();
        if received > state.max_upload_bytes {
            return Err(too_large(state));
        }
        file.write_all(&chunk).await.map_err(storage)?;
    }
    file.flush().await.map_err(storage)?;
    Ok(path)
}

/// Reads a text field, refusing one larger than any real value.
async fn receive_text(
    state: &ServerState,
    name: &str,
    field: axum::extract::multipart::Field<'_>,
) -> Result<String, HttpError> {
    receive_text_up_to(state, name, field, MAX_TEXT_FIELD_BYTES).await
}

/// Reads a text field of at most `limit` bytes.
async fn receive_text_up_to(
    state: &ServerState,
    name: &str,
    mut field: axum::extract::multipart::Field<'_>,
    limit: usize,
) -> Result<String, HttpError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = field
        .chunk()
        .await
        .map_err(|e| form_error(state, name, e))?
    {
        if bytes.len() + chunk.len() > limit {
            return Err(HttpError::bad_request(
                "field_too_large",
                format!("the form field {name:?} is over {} KiB", limit / 1024),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&bytes).trim().to_string())
}

/// What an upload is heard for: its words as spoken, or in English.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    Transcribe,
    Translate,
}

impl Task {
    fn name(self) -> &'static str {
        match self {
            Task::Transcribe => "transcribe",
            Task::Translate => "translate",
        }
    }
}

/// The model a translation is heard with: a multilingual one of ours by name, else (e.g.
/// `whisper-1`) the default multilingual model; an English-only one is refused, as it
/// never learned to translate.
fn translation_model(requested: Option<&str>) -> Result<&'static str, HttpError> {
    match requested.and_then(|m| models::spec(m).ok()) {
        Some(spec) if spec.name.ends_with(".en") => Err(HttpError::bad_request(
            "model_not_multilingual",
            format!(
                "{} is English-only and cannot translate; use {DEFAULT_TRANSLATION_MODEL} (or \
                 leave model as whisper-1)",
                spec.name
            ),
        )),
        Some(spec) if spec.name.starts_with("whisper") => Ok(spec.name),
        _ => Ok(DEFAULT_TRANSLATION_MODEL),
    }
}

/// The multilingual model translations use unless another is named.
const DEFAULT_TRANSLATION_MODEL: &str = "whisper-base";

pub(super) async fn transcriptions(
    State(state): State<Arc<ServerState>>,
    form: Multipart,
) -> Result<Response, HttpError> {
    heard(state, form, Task::Transcribe).await
}

/// Speech in any language the multilingual model knows, written in English, as OpenAI's
/// endpoint answers (`json`, `text`, `srt`, `vtt`, `verbose_json`).
pub(super) async fn translations(
    State(state): State<Arc<ServerState>>,
    form: Multipart,
) -> Result<Response, HttpError> {
    heard(state, form, Task::Translate).await
}

/// Receives an upload's form and transcribes or translates it.
async fn heard(
    state: Arc<ServerState>,
    mut form: Multipart,
    task: Task,
) -> Result<Response, HttpError> {
    // A bounded number of uploads are received at once; the rest are refused before their
    // bodies are read.
    let Ok(receiving) = state.upload_slots.clone().try_acquire_owned() else {
        let limit = state.max_concurrent_uploads;
        let mut rejection = Rejection::new(Lane::Audio, RejectReason::AudioLaneFull)
            .with_detail(format!(
                "{limit} uploads are being received; at most {limit} at once"
            ))
            .with_retry_after(Some(Duration::from_secs(1)));
        rejection.in_flight = limit;
        rejection.limit = limit;
        state
            .metrics
            .count_rejection(Lane::Audio, RejectReason::AudioLaneFull);
        return Err(rejection.into());
    };
    let mut file: Option<(String, tempfile::TempPath)> = None;
    let mut model = None;
    let mut format = "json".to_string();
    let mut language = None;
    let mut prompt = None;
    let mut word_timestamps = false;
    let mut speakers: Option<SpeakerCount> = None;
    let mut known_names: Vec<String> = Vec::new();
    let mut known_references: Vec<String> = Vec::new();
    let mut too_many_known = false;
    // Uploads are batch work unless the client says a person is waiting.
    let mut priority = Priority::Normal;
    while let Some(field) = form
        .next_field()
        .await
        .map_err(|e| form_error(&state, "fields", e))?
    {
        let name = field.name().unwrap_or_default().to_string();
        if name == "file" {
            let file_name = field.file_name().unwrap_or("upload").to_string();
            file = Some((file_name, receive_file(&state, field).await?));
            continue;
        }
        // OpenAI's clients send lists as repeated `name[]` fields.
        if matches!(
            name.as_str(),
            "known_speaker_references[]" | "known_speaker_references"
        ) {
            // Read (bounded) even past the most allowed, so the client reads the refusal
            // after sending its form rather than a reset connection.
            let limit = MAX_REFERENCE_FIELD_BYTES.min(state.max_upload_bytes);
            let reference = receive_text_up_to(&state, &name, field, limit).await?;
            too_many_known |= known_references.len() == MAX_KNOWN_SPEAKERS;
            if !too_many_known {
                known_references.push(reference);
            }
            continue;
        }
        let text = receive_text(&state, &name, field).await?;
        match name.as_str() {
            "model" => model = Some(text),
            "response_format" => format = text,
            "language" => language = Some(text).filter(|l| !l.is_empty()),
            "priority" if text == "interactive" => priority = Priority::Interactive,
            "prompt" => prompt = Some(text).filter(|p| !p.trim().is_empty()),
            // OpenAI's clients send the list as repeated `timestamp_granularities[]` fields.
            "timestamp_granularities[]" | "timestamp_granularities" if text == "word" => {
                word_timestamps = true
            }
            // Headroom's: find speakers in any format (`auto` or a number).
            "speakers" => {
                speakers = Some(
                    text.parse()
                        .map_err(|e: String| HttpError::bad_request("invalid_speakers", e))?,
                )
            }
            "known_speaker_names[]" | "known_speaker_names" => {
                too_many_known |= known_names.len() == MAX_KNOWN_SPEAKERS;
                if !too_many_known {
                    known_names.push(text)
                }
            }
            // temperature, include[], chunking_strategy (`auto` or its `server_vad` object's
            // fields, as `chunking_strategy[type]`...; speech is always found by voice
            // activity detection here): accepted, not used
            _ => {}
        }
    }
    drop(receiving);
    if too_many_known {
        return Err(too_many_known_speakers());
    }
    let Some((file_name, upload)) = file else {
        return Err(HttpError::bad_request(
            "missing_file",
            "the form has no `file` field",
        ));
    };
    let export = match format.as_str() {
        "json" | "verbose_json" | "diarized_json" => None,
        other => Some(other.parse::<ExportFormat>().map_err(|e| {
            HttpError::bad_request(
                "invalid_response_format",
                format!("{e}, json, verbose_json or diarized_json"),
            )
        })?),
    };
    let known = known_voices(&state, &known_names, &known_references)?;
    // Speakers are found when asked for, for the diarized format, or with known speakers.
    let speakers = (speakers.is_some() || format == "diarized_json" || !known_names.is_empty())
        .then(|| SpeakerRequest {
            known,
            ..SpeakerRequest::new(speakers.unwrap_or_default())
        });
    // Dropping this guard (the client went away) cancels the job.
    let cancel = CancellationToken::new();
    let _guard = cancel.clone().drop_guard();
    let input = AudioInput::from_temporary(upload, PathBuf::from(file_name));
    let options = TranscribeOptions {
        initial_prompt: prompt,
        word_timestamps,
        translate: task == Task::Translate,
        ..TranscribeOptions::in_language(language)
    };
    let model = match task {
        Task::Transcribe => transcription_model(model.as_deref()),
        Task::Translate => translation_model(model.as_deref())?,
    };
    let job = Transcription {
        speakers,
        priority,
        ..Transcription::new(input, model, options)
    };
    let transcript = state.speech.transcribe_with(job, cancel).await?.transcript;
    let speaker = |id: &Option<String>| id.as_ref().map(|id| display_name(&transcript, id));
    Ok(match (export, format.as_str()) {
        (Some(f), _) => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            render(&transcript, f),
        )
            .into_response(),
        (None, "verbose_json") => Json(json!({
            "task": task.name(),
            "language": transcript.language,
            "duration": transcript.duration,
            "text": transcript.text(),
            "segments": transcript.segments.iter().enumerate().map(|(id, s)| {
                let mut segment = json!({
                    "id": id, "start": s.start, "end": s.end, "text": s.text,
                });
                if let Some(name) = speaker(&s.speaker) {
                    segment["speaker"] = name.into();
                }
                segment
            }).collect::<Vec<_>>(),
            "words": transcript.segments.iter().flat_map(|s| &s.words).map(|w| {
                let mut word = json!({
                    "word": w.text, "start": w.start, "end": w.end, "probability": w.probability,
                });
                if let Some(name) = speaker(&w.speaker) {
                    word["speaker"] = name.into();
                }
                word
            }).collect::<Vec<_>>(),
            "speakers": speakers_json(&transcript),
        }))
        .into_response(),
        (None, "diarized_json") => Json(diarized_json(&transcript)).into_response(),
        (None, _) => Json(json!({ "text": transcript.text() })).into_response(),
    })
}

fn too_many_known_speakers() -> HttpError {
    HttpError::bad_request(
        "too_many_known_speakers",
        format!("at most {MAX_KNOWN_SPEAKERS} known speakers may be given"),
    )
}

/// The known speakers a request names: `names[i]` with the recording `references[i]` (a
/// data URL), or, past the references, the name of a voice profile (whose voice is known to
/// every transcription already; naming it checks that it exists and has clips).
fn known_voices(
    state: &ServerState,
    names: &[String],
    references: &[String],
) -> Result<Vec<KnownVoice>, HttpError> {
    if references.len() > names.len() {
        return Err(HttpError::bad_request(
            "invalid_known_speakers",
            format!(
                "{} known_speaker_references[] but {} known_speaker_names[]: each reference needs its name",
                references.len(),
                names.len()
            ),
        ));
    }
    let mut known = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > MAX_SPEAKER_NAME_CHARS {
            return Err(HttpError::bad_request(
                "invalid_known_speakers",
                format!(
                    "known_speaker_names[{i}] must have 1 to {MAX_SPEAKER_NAME_CHARS} characters"
                ),
            ));
        }
        if names[..i].iter().any(|n| n.trim() == name) {
            return Err(HttpError::bad_request(
                "invalid_known_speakers",
                format!("the known speaker {name:?} is named twice"),
            ));
        }
        let Some(reference) = references.get(i) else {
            match state.voices.library().open(name) {
                Ok(profile) if profile.embedding.is_some() => continue,
                Ok(_) => {
                    return Err(HttpError::bad_request(
                        "invalid_known_speakers",
                        format!("the voice profile {name:?} has no reference clips yet"),
                    ))
                }
                Err(_) => {
                    return Err(HttpError::bad_request(
                        "invalid_known_speakers",
                        format!(
                            "the known speaker {name:?} has no known_speaker_references[] entry and no voice profile has that name"
                        ),
                    ))
                }
            }
        };
        let (bytes, extension) = data_url(reference).map_err(|why| {
            HttpError::bad_request(
                "invalid_known_speaker_reference",
                format!("known_speaker_references[{i}] ({name}): {why}"),
            )
        })?;
        known.push(KnownVoice::Recording {
            name: name.to_string(),
            audio: AudioInput::from_bytes(
                bytes,
                PathBuf::from(format!("known_speaker_references[{i}].{extension}")),
            ),
        });
    }
    Ok(known)
}

/// The bytes of a base64 data URL of audio (`data:audio/wav;base64,...`), and the file
/// extension its media type suggests to the decoder.
fn data_url(url: &str) -> Result<(Vec<u8>, &'static str), String> {
    use base64::Engine;
    let rest = url
        .trim()
        .strip_prefix("data:")
        .ok_or("not a data URL (data:audio/...;base64,...)")?;
    let (header, data) = rest
        .split_once(',')
        .ok_or("a data URL has a comma before its data")?;
    let mut parts = header.split(';');
    let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    if !parts.any(|p| p.trim().eq_ignore_ascii_case("base64")) {
        return Err("the data URL must be base64 (data:audio/wav;base64,...)".into());
    }
    let extension = match media.as_str() {
        "audio/wav" | "audio/x-wav" | "audio/wave" | "audio/vnd.wave" => "wav",
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/flac" | "audio/x-flac" => "flac",
        "audio/ogg" | "audio/vorbis" => "ogg",
        "audio/mp4" | "audio/m4a" | "audio/x-m4a" | "audio/aac" => "m4a",
        "" | "application/octet-stream" => "bin",
        m if m.starts_with("audio/") => "bin",
        other => return Err(format!("the media type {other:?} is not audio")),
    };
    let data: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.as_bytes())
        .map_err(|e| format!("its base64 does not decode: {e}"))?;
    if bytes.is_empty() {
        return Err("the data URL holds no audio".into());
    }
    Ok((bytes, extension))
}

/// The name a speaker goes by in answers: its own (a voice profile's or a known speaker's),
/// else "Speaker N".
fn display_name(transcript: &Transcript, id: &str) -> String {
    transcript
        .speaker_name(id)
        .unwrap_or_else(|| id.to_string())
}

fn speakers_json(transcript: &Transcript) -> serde_json::Value {
    json!(transcript
        .speakers
        .iter()
        .map(|s| json!({
            "id": s.id,
            "name": s.display_name(),
            "profile": s.profile,
            "similarity": s.similarity,
            "seconds": s.seconds,
        }))
        .collect::<Vec<_>>())
}

/// The label OpenAI's diarizing model gives a speaker: a known speaker's name, else `A`, `B`,
/// ... in order of first speech.
fn diarized_label(speaker: &Speaker, index: usize) -> String {
    match &speaker.name {
        Some(name) => name.clone(),
        None => {
            let letter = (b'A' + (index % 26) as u8) as char;
            letter.to_string()
        }
    }
}

/// `response_format=diarized_json`, in the shape of OpenAI's `TranscriptionDiarized`: the
/// text, segments (`transcript.text.segment`, with id, start, end, text and speaker),
/// duration, task and usage; plus Headroom's `speakers` (id, label, profile, similarity,
/// seconds).
fn diarized_json(transcript: &Transcript) -> serde_json::Value {
    let label = |id: &Option<String>| -> String {
        id.as_ref()
            .and_then(|id| {
                let i = transcript.speakers.iter().position(|s| &s.id == id)?;
                Some(diarized_label(&transcript.speakers[i], i))
            })
            .unwrap_or_else(|| "unknown".to_string())
    };
    json!({
        "task": "transcribe",
        "duration": transcript.duration,
        "text": transcript.text(),
        "segments": transcript.segments.iter().enumerate().map(|(n, s)| json!({
            "type": "transcript.text.segment",
            "id": format!("seg_{n}"),
            "start": s.start,
            "end": s.end,
            "text": s.text.trim(),
            "speaker": label(&s.speaker),
        })).collect::<Vec<_>>(),
        "usage": { "type": "duration", "seconds": transcript.duration },
        "speakers": transcript.speakers.iter().enumerate().map(|(i, s)| json!({
            "id": s.id,
            "label": diarized_label(s, i),
            "profile": s.profile,
            "similarity": s.similarity,
            "seconds": s.seconds,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_speech::asr::Segment;

    #[test]
    fn data_urls_of_audio_decode_and_anything_else_is_refused() {
        let (bytes, ext) = data_url("data:audio/wav;base64,UklGRg==").unwrap();
        assert_eq!((bytes.as_slice(), ext), (&b"RIFF"[..], "wav"));
        assert_eq!(data_url("data:audio/mpeg;base64,AAAA").unwrap().1, "mp3");
        assert_eq!(data_url("data:;base64,AAAA").unwrap().1, "bin");
        for (bad, why) in [
            ("https://example.com/a.wav", "not a data URL"),
            ("data:audio/wav,RIFF", "must be base64"),
            ("data:text/plain;base64,AAAA", "not audio"),
            ("data:audio/wav;base64,***", "does not decode"),
            ("data:audio/wav;base64,", "no audio"),
        ] {
            let e = data_url(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn diarized_json_has_the_shape_of_openais_and_letters_unnamed_speakers() {
        let segment = |start: f64, end: f64, text: &str, speaker: &str| Segment {
            speaker: Some(speaker.into()),
            ..Segment::new(start, end, text)
        };
        let transcript = Transcript {
            language: Some("en".into()),
            duration: 5.0,
            segments: vec![
                segment(0.0, 2.0, " Hello.", "S1"),
                segment(2.5, 5.0, " Hi, Ann.", "S2"),
            ],
            speakers: vec![
                Speaker::numbered(0),
                Speaker {
                    name: Some("Ann".into()),
                    ..Speaker::numbered(1)
                },
            ],
        };
        let json = diarized_json(&transcript);
        assert_eq!(json["task"], "transcribe");
        assert_eq!(json["text"], "Hello. Hi, Ann.");
        assert_eq!(json["duration"], 5.0);
        assert_eq!(json["usage"], json!({"type": "duration", "seconds": 5.0}));
        assert_eq!(
            json["segments"][0],
            json!({"type": "transcript.text.segment", "id": "seg_0", "start": 0.0,
                   "end": 2.0, "text": "Hello.", "speaker": "A"})
        );
        assert_eq!(json["segments"][1]["speaker"], "Ann");
        assert_eq!(json["speakers"][1]["label"], "Ann");
    }
}
