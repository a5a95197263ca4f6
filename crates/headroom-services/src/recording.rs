//! Recording from an input device on the audio lane, written to a WAV file as it happens and,
//! when asked, transcribed live while it goes on. The CLI's `record`, the desktop app's record
//! button and voice clips all record through [`SpeechService::record`].

use crate::speech::{EngineSource, SpeechError, SpeechService};
use headroom_core::admission::Priority;
use headroom_speech::asr::live::{LiveParams, LiveTranscriber, LiveUpdate};
use headroom_speech::asr::{AsrError, TranscribeOptions, Transcript, SAMPLE_RATE};
use headroom_speech::audio::{record_to, AudioError, RecordTarget, StreamResampler, WavRecorder};
use headroom_speech::models;
use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use tokio_util::sync::CancellationToken;

/// What to record.
pub struct Recording {
    /// The input device's name; the system's default input when `None`.
    pub device: Option<String>,
    /// Recording stops after this long (or when cancelled).
    pub max_seconds: f64,
    /// The WAV file written (through its `.partial` file while recording, created new), inside
    /// a folder held open: nothing on the way is looked up again by path.
    pub target: RecordTarget,
    /// The input level (peak dBFS) about ten times a second.
    pub level: Arc<dyn Fn(f32) + Send + Sync>,
}

/// Transcription while recording: with which model and choices, and who is shown each
/// partial and final text (on the transcribing thread, as it happens).
pub struct LiveRequest {
    pub model: String,
    pub options: TranscribeOptions,
    pub params: LiveParams,
    pub on_update: Box<dyn FnMut(LiveUpdate) + Send>,
}

/// A finished recording.
#[derive(Debug)]
pub struct Recorded {
    pub path: PathBuf,
    pub sample_rate: u32,
    pub frames: u64,
    /// The live transcript (every phrase's final text), when live transcription was asked
    /// for and worked; its failure otherwise (the recording is kept either way).
    pub live: Option<Result<Transcript, SpeechError>>,
}

impl Recorded {
    pub fn seconds(&self) -> f64 {
        self.frames as f64 / self.sample_rate.max(1) as f64
    }
}

/// The live transcriber's side of a recording: 16 kHz audio in, updates out.
struct LiveWorker {
    request: LiveRequest,
    engine: EngineSource,
    vad_dir: PathBuf,
}

impl LiveWorker {
    /// Follows the recording until its audio stops coming; `stop` ends the recording if live
    /// transcription fails, so nobody speaks on with nothing shown.
    fn run(
        self,
        service: &SpeechService,
        audio: mpsc::Receiver<Vec<f32>>,
        stop: &CancellationToken,
        cancel: &CancellationToken,
    ) -> Result<Transcript, SpeechError> {
        let result = self.follow(service, audio, cancel);
        if result.is_err() {
            stop.cancel();
        }
        result
    }

    fn follow(
        self,
        service: &SpeechService,
        audio: mpsc::Receiver<Vec<f32>>,
        cancel: &CancellationToken,
    ) -> Result<Transcript, SpeechError> {
        let LiveRequest {
            model: _,
            options,
            params,
            mut on_update,
        } = self.request;
        // Loaded while the first words are recorded: the audio waits in the channel.
        let engine = self.engine.engine(service, options.precision)?;
        let vad = service.loaded_vad(&self.vad_dir)?;
        let mut live = LiveTranscriber::new(engine, vad, options, params);
        while let Ok(piece) = audio.recv() {
            live.push(&piece)?;
            loop {
                // Whatever arrived meanwhile is heard before the next step, so a partial
                // always shows the newest audio and a slow model skips partials.
                while let Ok(more) = audio.try_recv() {
                    live.push(&more)?;
                }
                match live.step(cancel)? {
                    Some(update) => on_update(update),
                    None => break,
                }
            }
        }
        let (last, transcript) = live.finish(cancel)?;
        last.into_iter().for_each(&mut on_update);
        Ok(transcript)
    }
}

impl SpeechService {
    /// Whether live transcription with `model` can start: the model and the voice activity
    /// detector are installed (else the error says which to install).
    pub fn live_ready(&self, model: &str) -> Result<(), SpeechError> {
        self.live_models(model).map(|_| ())
    }

    fn live_models(&self, model: &str) -> Result<(EngineSource, PathBuf), SpeechError> {
        let engine = self.engine_source(model)?;
        let vad_dir = models::locate(self.models_dir(), models::VAD_MODEL)?;
        Ok((engine, vad_dir))
    }

    /// Records on the audio lane as interactive work (so text lanes yield meanwhile) until
    /// `recording.max_seconds` or `cancel`, which stops the recording and keeps it. The WAV is
    /// written as it is recorded: a crash keeps all but the last second. With `live`, the
    /// audio is also transcribed as it comes.
    pub async fn record(
        &self,
        recording: Recording,
        live: Option<LiveRequest>,
        cancel: CancellationToken,
    ) -> Result<Recorded, SpeechError> {
        // Models a live transcription needs are found now, before anything is recorded.
        let live = match live {
            Some(request) => {
                let (engine, vad_dir) = self.live_models(&request.model)?;
                Some(LiveWorker {
                    request,
                    engine,
                    vad_dir,
                })
            }
            None => None,
        };
        let service = self.clone();
        let job = move |lane_cancel: &CancellationToken| {
            let Recording {
                device,
                max_seconds,
                target,
                level,
            } = recording;
            // Taken when the first audio comes and the recorder is made.
            let mut target = Some(target);
            let stop = cancel.child_token();
            let (to_live, from_recorder) = mpsc::channel::<Vec<f32>>();
            std::thread::scope(|scope| {
                let follower = live.map(|worker| {
                    let stop = &stop;
                    let service = &service;
                    scope.spawn(move || worker.run(service, from_recorder, stop, lane_cancel))
                });
                let mut recorder: Option<WavRecorder> = None;
                let mut resampler: Option<StreamResampler> = None;
                let mut sink = |rate: u32, chunk: &[f32]| -> Result<(), AudioError> {
                    let writer = match &mut recorder {
                        Some(r) => r,
                        None => {
                            let target = target.take().ok_or_else(|| AudioError::Write {
                                path: PathBuf::new(),
                                message: "the recording could not start".into(),
                            })?;
                            recorder.insert(WavRecorder::create_at(target, rate)?)
                        }
                    };
                    writer.write(chunk)?;
                    if follower.is_some() {
                        let at_16k = if rate == SAMPLE_RATE {
                            chunk.to_vec()
                        } else {
                            let resampler = match &mut resampler {
                                Some(r) => r,
                                None => resampler.insert(StreamResampler::new(rate, SAMPLE_RATE)?),
                            };
                            let mut out = Vec::with_capacity(chunk.len());
                            resampler.push(chunk, &mut out)?;
                            out
                        };
                        // A follower that failed has said so through `stop`.
                        let _ = to_live.send(at_16k);
                    }
                    Ok(())
                };
                let result = record_to(device.as_deref(), max_seconds, &*level, &stop, &mut sink);
                if let Some(resampler) = resampler {
                    let mut rest = Vec::new();
                    if resampler.finish(&mut rest).is_ok() {
                        let _ = to_live.send(rest);
                    }
                }
                drop(to_live);
                let live = follower.map(|f| {
                    f.join().unwrap_or_else(|_| {
                        Err(AsrError::model("live transcription stopped unexpectedly").into())
                    })
                });
                let kept = recorder.map(|r| (r.frames(), r.finish()));
                (result, kept, live)
            })
        };
        let (result, kept, live) = self
            .lane()
            .run(
                "live transcription",
                Priority::Interactive,
                CancellationToken::new(),
                job,
            )
            .await?;
        match (result, kept) {
            (Ok(sample_rate), Some((frames, finished))) => Ok(Recorded {
                path: finished?,
                sample_rate,
                frames,
                live,
            }),
            (Ok(_), None) => Err(SpeechError::NothingRecorded),
            (Err(source), kept) => Err(match kept {
                Some((frames, Ok(path))) => SpeechError::RecordingCut {
                    source,
                    path,
                    frames,
                },
                _ => source.into(),
            }),
        }
    }
}
