//! Speech jobs on the audio lane: transcription and synthesis with the embedded engines,
//! shared by the CLI, `headroom serve` and the desktop app. Loaded models are kept, so the
//! second job on a model does not load it again.

use crate::residency::Residency;
use crate::voices::VoiceLibrary;
use headroom_core::admission::{Priority, Rejection};
use headroom_core::lanes::AudioLane;
use headroom_speech::asr::diarize::{
    attribute, Diarization, DiarizeError, DiarizeOptions, DiarizeParams, Diarizer, KnownSpeaker,
    SpeakerCount,
};
use headroom_speech::asr::vad::{SileroVad, VadParams, VadTranscriber};
use headroom_speech::asr::whisper::{Precision, WhisperEngine};
use headroom_speech::asr::{AsrError, TranscribeOptions, Transcriber, Transcript, WindowDone};
use headroom_speech::audio::{
    Audio, AudioError, Decode, DecodeLimits, Decoded, SampleSink, SpooledAudio,
};
use headroom_speech::models::{self, ModelError};
use headroom_speech::tts::{Synthesizer, TtsError};
use headroom_speech::voice::{SpeakerEmbedder, VoiceError};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Why a speech job failed.
#[derive(Debug, thiserror::Error)]
pub enum SpeechError {
    #[error(transparent)]
    Audio(#[from] AudioError),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Asr(#[from] AsrError),
    #[error(transparent)]
    Tts(#[from] TtsError),
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// The speaker embedder failed (or could not be loaded).
    #[error(transparent)]
    Voice(#[from] VoiceError),
    #[error("speaker diarization failed: {0}")]
    Diarize(String),
    /// A known speaker's reference recording cannot be used (too short, not audio...).
    #[error("the known speaker {name:?}: {message}")]
    KnownSpeaker { name: String, message: String },
    #[error("nothing was recorded")]
    NothingRecorded,
    /// More text than one request to speak may hold ([`MAX_SPEECH_INPUT_CHARS`]).
    #[error("the text is {chars} characters; one request speaks at most {limit}")]
    InputTooLong { chars: usize, limit: usize },
    #[error("{source}; the {frames} samples recorded before it are kept in {}", path.display())]
    RecordingCut {
        #[source]
        source: AudioError,
        path: PathBuf,
        frames: u64,
    },
}

/// The most characters one request to speak may hold, from every entry alike (HTTP, MCP, the
/// CLI, the desktop): OpenAI's own bound for `/v1/audio/speech`, some five minutes of speech.
/// A project's whole text is spoken in pieces within it ([`speech_pieces`]).
pub const MAX_SPEECH_INPUT_CHARS: usize = 4096;

/// `text` within [`MAX_SPEECH_INPUT_CHARS`], or the refusal; checked before any work queues.
pub fn check_speech_input(text: &str) -> Result<(), SpeechError> {
    let chars = text.chars().count();
    if chars > MAX_SPEECH_INPUT_CHARS {
        return Err(SpeechError::InputTooLong {
            chars,
            limit: MAX_SPEECH_INPUT_CHARS,
        });
    }
    Ok(())
}

/// `texts` (a project's segments, in order) grouped into pieces of at most `max_chars`
/// characters, each to speak as one request: whole texts together while they fit, a longer
/// one cut at sentence ends, then at spaces. Nothing is dropped.
pub fn speech_pieces<'a>(
    texts: impl IntoIterator<Item = &'a str>,
    max_chars: usize,
) -> Vec<String> {
    let max_chars = max_chars.max(1);
    let mut pieces: Vec<String> = Vec::new();
    let mut current = String::new();
    let push = |part: &str, current: &mut String, pieces: &mut Vec<String>| {
        let joined =
            current.chars().count() + usize::from(!current.is_empty()) + part.chars().count();
        if !current.is_empty() && joined > max_chars {
            pieces.push(std::mem::take(current));
        }
        if !current.is_empty() {
            current.push(' ');
        }
        current.push_str(part);
    };
    for text in texts {
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        if text.chars().count() <= max_chars {
            push(text, &mut current, &mut pieces);
            continue;
        }
        for sentence in headroom_speech::tts::sentences(text) {
            if sentence.chars().count() <= max_chars {
                push(&sentence, &mut current, &mut pieces);
                continue;
            }
            for word in sentence.split_whitespace() {
                // A "word" longer than a piece (no spaces at all) is cut by characters.
                let chars: Vec<char> = word.chars().collect();
                for part in chars.chunks(max_chars) {
                    push(&part.iter().collect::<String>(), &mut current, &mut pieces);
                }
            }
        }
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

/// Audio to transcribe: where its bytes are and a name for messages. A file is read as it is
/// decoded, never whole into memory.
#[derive(Clone)]
pub struct AudioInput {
    source: InputSource,
    /// Shown in errors, and its extension hints the format.
    pub name: PathBuf,
}

#[derive(Clone)]
enum InputSource {
    File(PathBuf),
    /// An upload received into a temporary file, removed when the last clone is dropped.
    Temporary(Arc<tempfile::TempPath>),
    Bytes(Arc<[u8]>),
}

impl AudioInput {
    /// A file on disk; a missing or unreadable file is reported now, before any job queues.
    pub fn from_file(path: &Path) -> Result<AudioInput, SpeechError> {
        headroom_base::input::open_regular(path).map_err(|e| AudioError::Read {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Ok(AudioInput {
            source: InputSource::File(path.to_path_buf()),
            name: path.to_path_buf(),
        })
    }

    /// A temporary file (an upload), deleted once the input is dropped; `name` is the client's.
    pub fn from_temporary(file: tempfile::TempPath, name: PathBuf) -> AudioInput {
        AudioInput {
            source: InputSource::Temporary(Arc::new(file)),
            name,
        }
    }

    /// A file's bytes already in memory.
    pub fn from_bytes(bytes: Vec<u8>, name: PathBuf) -> AudioInput {
        AudioInput {
            source: InputSource::Bytes(bytes.into()),
            name,
        }
    }

    /// Decodes the input to mono as `decode` says; errors name the input by its `name`.
    pub fn decode(&self, decode: &Decode) -> Result<Audio, AudioError> {
        let mut samples = Vec::new();
        let decoded = self.decode_into(decode, &mut samples)?;
        Ok(Audio {
            samples,
            sample_rate: decoded.sample_rate,
        })
    }

    /// Decodes the input into a spool in `dir`: memory stays flat however long it is.
    pub fn spool(&self, decode: &Decode, dir: &Path) -> Result<SpooledAudio, AudioError> {
        let mut spool = SpooledAudio::create(dir, &self.name)?;
        let decoded = self.decode_into(decode, &mut spool)?;
        spool.finish(decoded.sample_rate)
    }

    /// Decodes the input into `sink` a block at a time.
    fn decode_into(
        &self,
        decode: &Decode,
        sink: &mut dyn SampleSink,
    ) -> Result<Decoded, AudioError> {
        let extension = self.name.extension().and_then(|e| e.to_str());
        match &self.source {
            InputSource::File(path) => decode.file_into(path, sink),
            InputSource::Temporary(path) => decode.open_into(path, extension, &self.name, sink),
            InputSource::Bytes(bytes) => {
                decode.bytes_into(bytes.clone(), extension, &self.name, sink)
            }
        }
    }
}

impl From<DiarizeError> for SpeechError {
    fn from(e: DiarizeError) -> Self {
        match e {
            // Cancelled like the transcription it follows, so callers see one kind.
            DiarizeError::Cancelled => SpeechError::Asr(AsrError::Cancelled),
            DiarizeError::Embedder(e) => SpeechError::Voice(e),
            other => SpeechError::Diarize(other.to_string()),
        }
    }
}

/// Speakers to find in a transcription: who spoke when ([`Transcription::speakers`]).
#[derive(Clone, Default)]
pub struct SpeakerRequest {
    /// Estimated (`auto`), or exactly as many as given.
    pub count: SpeakerCount,
    /// Voices to recognise besides the voice library's: every profile with an embedding is
    /// always known, named after the profile (`Speaker::profile` = its id).
    pub known: Vec<KnownVoice>,
    /// The diarizer's settings; the defaults are the measured ones.
    pub params: DiarizeParams,
}

impl SpeakerRequest {
    /// `count` speakers, recognising the voice library's profiles.
    pub fn new(count: SpeakerCount) -> SpeakerRequest {
        SpeakerRequest {
            count,
            ..Default::default()
        }
    }
}

/// A voice to recognise, given with one request.
#[derive(Clone)]
pub enum KnownVoice {
    /// Already embedded with the speaker embedder ([`SpeechService::loaded_embedder`]).
    Embedded(KnownSpeaker),
    /// A reference recording of the voice, decoded and embedded in the transcription's job
    /// (at least about 1.6 s of speech).
    Recording { name: String, audio: AudioInput },
}

/// A transcription to run with [`SpeechService::transcribe_with`]: build it with
/// [`Transcription::new`] and set what differs from the defaults (batch priority, from the
/// start, no progress, no speakers).
pub struct Transcription {
    pub input: AudioInput,
    pub model: String,
    pub options: TranscribeOptions,
    /// Who spoke when, found in the same audio-lane job right after the transcription, on the
    /// same 16 kHz samples (word timestamps are then always on, since speaker changes are
    /// found at word resolution). `None`: no speakers.
    pub speakers: Option<SpeakerRequest>,
    pub priority: Priority,
    /// Where to start; with speakers, the diarization still hears the whole recording.
    pub resume: Resume,
    /// 0.0..=1.0 over the whole job (transcription, then speakers).
    pub progress: Arc<dyn Fn(f32) + Send + Sync>,
}

impl Transcription {
    pub fn new(input: AudioInput, model: impl Into<String>, options: TranscribeOptions) -> Self {
        Transcription {
            input,
            model: model.into(),
            options,
            speakers: None,
            priority: Priority::Normal,
            resume: Resume::from_start(),
            progress: Arc::new(|_| {}),
        }
    }
}

/// What [`SpeechService::transcribe_with`] found.
#[derive(Debug, Clone)]
pub struct Transcribed {
    /// With speakers asked for: `speakers` set, segments split at speaker changes, and every
    /// segment and word carrying its speaker's id.
    pub transcript: Transcript,
    /// Who spoke when over the whole recording, when speakers were asked for: a resumed job
    /// attributes the segments it keeps from before with
    /// [`headroom_speech::asr::diarize::attribute`] on the merged transcript.
    pub diarization: Option<Diarization>,
}

/// The longest reference recording of a known speaker, in seconds.
pub const MAX_REFERENCE_SECONDS: f64 = 60.0;

/// The share of a job's progress the transcription takes when speakers are found after it.
const TRANSCRIPTION_SHARE: f32 = 0.75;

/// Where a transcription job gets its engine: decided before the job queues, loaded (for an
/// embedded model) on the worker thread.
pub(crate) enum EngineSource {
    Remote(Arc<dyn Transcriber>),
    Embedded { model: String, dir: PathBuf },
}

impl EngineSource {
    /// The engine, loaded (on the calling thread) when it is not in memory.
    pub(crate) fn engine(
        self,
        service: &SpeechService,
        precision: Precision,
    ) -> Result<Arc<dyn Transcriber>, SpeechError> {
        Ok(match self {
            EngineSource::Remote(remote) => remote,
            EngineSource::Embedded { model, dir } => {
                service.loaded_engine(&model, &dir, precision)?
            }
        })
    }
}

/// Where a transcription starts, and who hears of each window as it finishes: a job resuming
/// after a crash starts at its last finished window and keeps each new one.
pub struct Resume {
    pub from_secs: f64,
    /// Each finished window; runs on the lane's thread.
    pub window_done: Box<dyn FnMut(WindowDone<'_>) + Send>,
}

impl Resume {
    pub fn from_start() -> Resume {
        Resume {
            from_secs: 0.0,
            window_done: Box::new(|_| {}),
        }
    }
}

/// The embedded speech engines behind the audio lane. A clone shares the lane and the loaded
/// models.
#[derive(Clone)]
pub struct SpeechService {
    lane: AudioLane,
    /// Where the loaded models are kept, and let go of when idle.
    residency: Arc<Residency>,
    synthesizer: Arc<dyn Synthesizer>,
    limits: DecodeLimits,
    models_dir: PathBuf,
    /// Where a transcription's decoded audio is spooled (the temporary folder): it is read
    /// from there a stretch at a time, so an hours-long recording costs disk, not memory.
    spool_dir: PathBuf,
    /// An external transcription server, used instead of the embedded models when set.
    remote_transcriber: Option<Arc<dyn Transcriber>>,
    /// The voice library, whose profiles are recognised as speakers.
    voices: Option<VoiceLibrary>,
}

impl SpeechService {
    /// Embedded Whisper models from `models_dir`, kept in `residency`, and `synthesizer`, on
    /// `lane`; decoded audio spooled in `spool_dir`. Front ends get theirs from
    /// [`crate::Services`], which keeps every one on its single audio lane and its one
    /// residency.
    pub fn new(
        lane: AudioLane,
        models_dir: PathBuf,
        spool_dir: PathBuf,
        synthesizer: Arc<dyn Synthesizer>,
        residency: Arc<Residency>,
    ) -> Self {
        SpeechService {
            lane,
            residency,
            synthesizer,
            // Transcriptions spool what they decode (reference clips are bounded apart).
            limits: DecodeLimits::streamed(),
            models_dir,
            spool_dir,
            remote_transcriber: None,
            voices: None,
        }
    }

    /// The same engines and lane, recognising the profiles of `library` as speakers.
    pub fn with_voice_library(self, library: VoiceLibrary) -> Self {
        SpeechService {
            voices: Some(library),
            ..self
        }
    }

    /// The same engines and lane, transcribing with `engine` (e.g. a
    /// [`headroom_speech::remote::RemoteTranscriber`]) instead of the embedded models.
    pub fn with_transcriber(&self, engine: Arc<dyn Transcriber>) -> Self {
        SpeechService {
            remote_transcriber: Some(engine),
            ..self.clone()
        }
    }

    /// The same lane and loaded models, synthesizing with `engine` instead.
    pub fn with_synthesizer(&self, engine: Arc<dyn Synthesizer>) -> Self {
        SpeechService {
            synthesizer: engine,
            ..self.clone()
        }
    }

    pub fn lane(&self) -> &AudioLane {
        &self.lane
    }

    pub fn synthesizer(&self) -> &Arc<dyn Synthesizer> {
        &self.synthesizer
    }

    /// The models in memory, shared by every front end of the process.
    pub fn residency(&self) -> &Arc<Residency> {
        &self.residency
    }

    pub fn models_dir(&self) -> &Path {
        &self.models_dir
    }

    /// The embedded Whisper engine for `model` installed in `dir` at `precision`, loaded (on
    /// the calling thread, so call it from an audio lane job) when it is not in memory.
    pub fn loaded_engine(
        &self,
        model: &str,
        dir: &Path,
        precision: Precision,
    ) -> Result<Arc<WhisperEngine>, SpeechError> {
        let name = format!("{model} ({})", precision.name());
        self.residency
            .slot::<WhisperEngine>(&name, "transcription")
            .get_or_load(|| WhisperEngine::load_at(dir, model, precision))
            .map_err(SpeechError::from)
    }

    /// The voice activity detector installed in `dir`, loaded (on the calling thread) when it
    /// is not in memory.
    pub fn loaded_vad(&self, dir: &Path) -> Result<Arc<SileroVad>, SpeechError> {
        self.residency
            .slot::<SileroVad>(models::VAD_MODEL, "voice activity")
            .get_or_load(|| SileroVad::load(dir).map_err(AsrError::model))
            .map_err(SpeechError::from)
    }

    /// The embedded Whisper engine for `model` installed in `dir`, loaded (on the calling
    /// thread, so call it from an audio lane job) the first time; shared with transcriptions.
    pub fn embedded_transcriber(
        &self,
        model: &str,
        dir: &Path,
    ) -> Result<Arc<dyn Transcriber>, SpeechError> {
        Ok(self.loaded_engine(model, dir, Precision::Int8)?)
    }

    /// Where a transcription with `model` gets its engine: the external server when this
    /// service has one, else the installed model (a missing one is reported now).
    pub(crate) fn engine_source(&self, model: &str) -> Result<EngineSource, SpeechError> {
        Ok(match &self.remote_transcriber {
            Some(remote) => EngineSource::Remote(remote.clone()),
            None => {
                let model = models::spec(model)?.name.to_string();
                let dir = models::locate(&self.models_dir, &model)?;
                EngineSource::Embedded { model, dir }
            }
        })
    }

    /// Decodes, resamples and transcribes on the audio lane. `progress` gets 0.0..=1.0.
    pub async fn transcribe(
        &self,
        input: AudioInput,
        model: &str,
        options: TranscribeOptions,
        priority: Priority,
        progress: Arc<dyn Fn(f32) + Send + Sync>,
        cancel: CancellationToken,
    ) -> Result<Transcript, SpeechError> {
        self.transcribe_from(
            input,
            model,
            options,
            priority,
            Resume::from_start(),
            progress,
            cancel,
        )
        .await
    }

    /// As [`SpeechService::transcribe`], from `resume.from_secs` on, handing each finished
    /// window to `resume.window_done`; the transcript holds the segments from there on.
    #[allow(clippy::too_many_arguments)]
    pub async fn transcribe_from(
        &self,
        input: AudioInput,
        model: &str,
        options: TranscribeOptions,
        priority: Priority,
        resume: Resume,
        progress: Arc<dyn Fn(f32) + Send + Sync>,
        cancel: CancellationToken,
    ) -> Result<Transcript, SpeechError> {
        let job = Transcription {
            priority,
            resume,
            progress,
            ..Transcription::new(input, model, options)
        };
        Ok(self.transcribe_with(job, cancel).await?.transcript)
    }

    /// Transcribes as `job` says, on the audio lane: decodes and resamples to 16 kHz,
    /// transcribes, and, when `job.speakers` asks, finds who spoke when on the same samples
    /// in the same job and attributes every segment and word to its speaker. The one place
    /// every front end (CLI, `headroom serve`, projects) transcribes with speakers.
    ///
    /// ```no_run
    /// # use headroom_services::speech::*;
    /// # async fn demo(speech: &SpeechService) -> Result<(), SpeechError> {
    /// use headroom_speech::asr::{diarize::SpeakerCount, TranscribeOptions};
    /// let input = AudioInput::from_file("talk.flac".as_ref())?;
    /// let job = Transcription {
    ///     speakers: Some(SpeakerRequest::new(SpeakerCount::Auto)),
    ///     ..Transcription::new(input, "whisper-tiny.en", TranscribeOptions::default())
    /// };
    /// let done = speech.transcribe_with(job, Default::default()).await?;
    /// for s in &done.transcript.segments {
    ///     let who = s.speaker.as_deref().and_then(|id| done.transcript.speaker_name(id));
    ///     println!("{}: {}", who.unwrap_or_default(), s.text);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn transcribe_with(
        &self,
        job: Transcription,
        cancel: CancellationToken,
    ) -> Result<Transcribed, SpeechError> {
        let Transcription {
            input,
            model,
            mut options,
            speakers,
            priority,
            resume,
            progress,
        } = job;
        let Resume {
            from_secs,
            mut window_done,
        } = resume;
        // The engine and the detector are found before the job waits for a slot.
        let source = self.engine_source(&model)?;
        // Only speech, when asked and the detector is installed.
        let vad_dir = options.skip_silence.then(|| {
            models::locate(&self.models_dir, models::VAD_MODEL)
                .inspect_err(|_| {
                    tracing::info!(
                        "transcribing silence too: the silero-vad model is not installed"
                    )
                })
                .ok()
        });
        // Speakers need the detector and the embedder: a missing one is reported now.
        let diarizing = match &speakers {
            Some(_) => {
                options.word_timestamps = true;
                Some((
                    models::locate(&self.models_dir, models::VAD_MODEL)?,
                    models::locate(&self.models_dir, models::EMBEDDER_MODEL)?,
                ))
            }
            None => None,
        };
        let service = self.clone();
        let limits = self.limits;
        let job = move |cancel: &CancellationToken| -> Result<Transcribed, SpeechError> {
            // Resampled to 16 kHz while decoding, so a long file is never held at its own rate.
            let decode = Decode {
                limits,
                to_rate: Some(16_000),
                cancel: cancel.clone(),
            };
            // Batch work decodes on the idle-priority threads too (a long file's decoding
            // and resampling is a step like any other). Spooled, not held: every step reads
            // the stretch it needs.
            let audio = headroom_base::cpu::compute(|| input.spool(&decode, &service.spool_dir))?;
            let engine = source.engine(&service, options.precision)?;
            let engine: Arc<dyn Transcriber> = match vad_dir.flatten() {
                Some(dir) if !engine.cuts_at_pauses_itself() => Arc::new(VadTranscriber::new(
                    engine,
                    service.loaded_vad(&dir)?,
                    VadParams::default(),
                )),
                _ => engine,
            };
            // Known speakers' recordings are checked before the long work, so a bad one is
            // refused at once.
            let speakers = match (speakers, diarizing) {
                (Some(request), Some((vad_dir, embedder_dir))) => {
                    let embedder = service.loaded_embedder_at(&embedder_dir)?;
                    let known = service.known_speakers(&embedder, request.known, &decode)?;
                    let options = DiarizeOptions {
                        count: request.count,
                        known,
                        params: request.params,
                    };
                    Some((
                        Diarizer::new(embedder, service.loaded_vad(&vad_dir)?)
                            .spooling_in(service.spool_dir.clone()),
                        options,
                    ))
                }
                _ => None,
            };
            let Some((diarizer, diarize_options)) = speakers else {
                let transcript = engine.transcribe_from(
                    &audio,
                    from_secs,
                    &options,
                    &mut *window_done,
                    &*progress,
                    cancel,
                )?;
                return Ok(Transcribed {
                    transcript,
                    diarization: None,
                });
            };
            let share = |from: f32, to: f32| {
                let progress = progress.clone();
                move |f: f32| progress(from + (to - from) * f.clamp(0.0, 1.0))
            };
            let mut transcript = engine.transcribe_from(
                &audio,
                from_secs,
                &options,
                &mut *window_done,
                &share(0.0, TRANSCRIPTION_SHARE),
                cancel,
            )?;
            drop(engine);
            let diarization = diarizer.diarize(
                &audio,
                &diarize_options,
                &share(TRANSCRIPTION_SHARE, 1.0),
                cancel,
            )?;
            attribute(&mut transcript, &diarization);
            Ok(Transcribed {
                transcript,
                diarization: Some(diarization),
            })
        };
        match self.lane.run("transcription", priority, cancel, job).await {
            Ok(result) => result,
            Err(rejection) => Err(rejection.into()),
        }
    }

    /// The voices to recognise: every voice profile of the library with an embedding, then
    /// `given` (reference recordings decoded with `decode` and embedded now, on the calling
    /// thread).
    fn known_speakers(
        &self,
        embedder: &SpeakerEmbedder,
        given: Vec<KnownVoice>,
        decode: &Decode,
    ) -> Result<Vec<KnownSpeaker>, SpeechError> {
        let mut known = Vec::new();
        if let Some(library) = &self.voices {
            match library.list() {
                Ok(profiles) => known.extend(profiles.into_iter().filter_map(|p| {
                    Some(KnownSpeaker {
                        embedding: p.embedding?,
                        name: p.name,
                        profile: Some(p.id),
                    })
                })),
                Err(e) => tracing::warn!("voice profiles not recognised as speakers: {e}"),
            }
        }
        for voice in given {
            known.push(match voice {
                KnownVoice::Embedded(speaker) => speaker,
                KnownVoice::Recording { name, audio } => {
                    let refused = |message: String| SpeechError::KnownSpeaker {
                        name: name.clone(),
                        message,
                    };
                    let decode = Decode {
                        limits: DecodeLimits {
                            max_seconds: MAX_REFERENCE_SECONDS,
                            ..decode.limits
                        },
                        ..decode.clone()
                    };
                    let clip = match audio.decode(&decode) {
                        Ok(clip) => clip,
                        Err(e @ AudioError::Cancelled { .. }) => return Err(e.into()),
                        Err(e) => return Err(refused(e.to_string())),
                    };
                    let embedding = embedder.embed(&clip).map_err(|e| match e {
                        VoiceError::TooShort { .. } => refused(e.to_string()),
                        other => SpeechError::Voice(other),
                    })?;
                    KnownSpeaker {
                        name,
                        profile: None,
                        embedding,
                    }
                }
            });
        }
        Ok(known)
    }

    /// The speaker embedder, loaded (on the calling thread) when it is not in memory.
    pub fn loaded_embedder(&self) -> Result<Arc<SpeakerEmbedder>, SpeechError> {
        let dir = models::locate(&self.models_dir, models::EMBEDDER_MODEL)?;
        self.loaded_embedder_at(&dir)
    }

    fn loaded_embedder_at(&self, dir: &Path) -> Result<Arc<SpeakerEmbedder>, SpeechError> {
        self.residency
            .slot::<SpeakerEmbedder>(models::EMBEDDER_MODEL, "speaker embedding")
            .get_or_load(|| SpeakerEmbedder::load(dir))
            .map_err(SpeechError::from)
    }

    /// Synthesizes speech on the audio lane, as interactive work (someone is waiting).
    pub async fn synthesize(
        &self,
        text: String,
        voice: Option<String>,
        cancel: CancellationToken,
    ) -> Result<Audio, SpeechError> {
        self.synthesize_at(text, voice, Priority::Interactive, cancel)
            .await
    }

    /// Synthesizes the next sentence of a streamed answer whose first sentence was synthesized
    /// with [`SpeechService::synthesize`]: interactive work, but in one of the turns streams
    /// share ([`AudioLane::run_streamed`]), so open streams never fill the lane's queue or
    /// take its interactive reserve.
    pub async fn synthesize_streamed(
        &self,
        text: String,
        voice: Option<String>,
        cancel: CancellationToken,
    ) -> Result<Audio, SpeechError> {
        let synthesizer = self.synthesizer.clone();
        let job = move |cancel: &CancellationToken| {
            synthesizer.synthesize(&text, voice.as_deref(), cancel)
        };
        match self.lane.run_streamed("speech", cancel, job).await {
            Ok(result) => Ok(result?),
            Err(rejection) => Err(rejection.into()),
        }
    }

    /// Synthesizes speech on the audio lane at `priority` (a narration's takes are batch work).
    pub async fn synthesize_at(
        &self,
        text: String,
        voice: Option<String>,
        priority: Priority,
        cancel: CancellationToken,
    ) -> Result<Audio, SpeechError> {
        check_speech_input(&text)?;
        let synthesizer = self.synthesizer.clone();
        let job = move |cancel: &CancellationToken| {
            synthesizer.synthesize(&text, voice.as_deref(), cancel)
        };
        match self.lane.run("speech", priority, cancel, job).await {
            Ok(result) => Ok(result?),
            Err(rejection) => Err(rejection.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_speech_bound_refuses_one_character_over_it() {
        assert!(check_speech_input(&"a".repeat(MAX_SPEECH_INPUT_CHARS)).is_ok());
        // Characters, not bytes.
        assert!(check_speech_input(&"é".repeat(MAX_SPEECH_INPUT_CHARS)).is_ok());
        match check_speech_input(&"a".repeat(MAX_SPEECH_INPUT_CHARS + 1)) {
            Err(SpeechError::InputTooLong { chars, limit }) => {
                assert_eq!(
                    (chars, limit),
                    (MAX_SPEECH_INPUT_CHARS + 1, MAX_SPEECH_INPUT_CHARS)
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pieces_keep_every_word_in_order_within_the_bound() {
        let long_sentence = "word ".repeat(30);
        let unbroken = "x".repeat(45);
        let texts = [
            "One. Two.",
            "",
            long_sentence.as_str(),
            "Three sentences here. And more! Yes?",
            unbroken.as_str(),
        ];
        let pieces = speech_pieces(texts.iter().copied(), 20);
        assert!(pieces.iter().all(|p| p.chars().count() <= 20), "{pieces:?}");
        let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let kept: String = pieces.join(" ");
        let wanted: String = texts.join(" ");
        assert_eq!(
            words(&kept).concat(),
            words(&wanted).concat(),
            "nothing dropped or reordered"
        );
        assert_eq!(speech_pieces(["a", "b"], 10), vec!["a b".to_string()]);
    }
}
