//! Recording from and playing to sound devices with cpal (playback is for the desktop app and
//! `headroom play`). Machines without a sound card are
//! common (servers, containers): every failure is a clear error naming the device, never a
//! panic. ALSA may still print its own complaints on stderr.

use super::decode::{part_in, sample_range};
use super::{Audio, AudioError, Decode, DecodeLimits, SampleSink};
use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
use cpal::{SampleFormat, StreamConfig};
use headroom_base::sync::Locked;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn device_error(what: &str, detail: impl std::fmt::Display) -> AudioError {
    AudioError::Device {
        message: format!("{what}: {detail}"),
    }
}

/// A stream error callback that keeps the first error for the controlling loop to report.
fn keep_first_error(
    slot: Arc<Mutex<Option<String>>>,
) -> impl FnMut(cpal::StreamError) + Send + 'static {
    move |e| {
        slot.locked().get_or_insert(e.to_string());
    }
}

/// Names of the input devices, for choosing one.
pub fn input_devices() -> Result<Vec<String>, AudioError> {
    let host = cpal::default_host();
    let devices = host
        .input_devices()
        .map_err(|e| device_error("cannot list input devices", e))?;
    Ok(devices.filter_map(|d| d.name().ok()).collect())
}

fn input_device(name: Option<&str>) -> Result<cpal::Device, AudioError> {
    let host = cpal::default_host();
    match name {
        None => host
            .default_input_device()
            .ok_or_else(|| AudioError::Device {
                message: "no sound input device found (is a microphone connected?)".into(),
            }),
        Some(wanted) => host
            .input_devices()
            .map_err(|e| device_error("cannot list input devices", e))?
            .find(|d| d.name().is_ok_and(|n| n == wanted))
            .ok_or_else(|| AudioError::Device {
                message: format!(
                    "no input device named {wanted:?}; `headroom record --list-devices` shows them"
                ),
            }),
    }
}

/// Where [`record_to`] hands the samples: called with the device's sample rate and each new
/// piece of mono audio.
pub type RecordingSink<'a> = dyn FnMut(u32, &[f32]) -> Result<(), AudioError> + 'a;

/// Records `seconds` of mono audio from `device` (the default input when `None`) into memory,
/// reporting the input level as it goes. Stops early on `cancel`.
pub fn record(
    device: Option<&str>,
    seconds: f64,
    level: &dyn Fn(f32),
    cancel: &CancellationToken,
) -> Result<Audio, AudioError> {
    let mut samples = Vec::new();
    let sample_rate = record_to(device, seconds, level, cancel, &mut |_rate, chunk| {
        samples.extend_from_slice(chunk);
        Ok(())
    })?;
    Ok(Audio {
        samples,
        sample_rate,
    })
}

/// Records `seconds` of mono audio from `device` (the default input when `None`), handing the
/// samples to `sink` (with the device's rate) every tenth of a second as they arrive — so a
/// recording can go to disk as it happens — and reporting the input level (peak dBFS of the
/// last tenth of a second). Stops early on `cancel`. Returns the sample rate.
pub fn record_to(
    device: Option<&str>,
    seconds: f64,
    level: &dyn Fn(f32),
    cancel: &CancellationToken,
    sink: &mut RecordingSink<'_>,
) -> Result<u32, AudioError> {
    let device = input_device(device)?;
    let name = device.name().unwrap_or_else(|_| "the input device".into());
    let supported = device
        .default_input_config()
        .map_err(|e| device_error(&format!("{name} cannot record"), e))?;
    let format = supported.sample_format();
    let config: StreamConfig = supported.into();
    let channels = config.channels.max(1) as usize;
    let sample_rate = config.sample_rate.0;
    // Samples not yet handed to the sink, and how many were taken in all.
    let captured: Arc<Mutex<(Vec<f32>, usize)>> = Arc::new(Mutex::new((Vec::new(), 0)));
    let failure: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let buffer = captured.clone();
    // Devices without a clock (ALSA's null device) deliver as fast as they can: never keep
    // more than was asked for.
    let max_samples = (seconds.max(0.0) * sample_rate as f64).round() as usize;
    let push = move |frames: &mut dyn Iterator<Item = f32>| {
        let interleaved: Vec<f32> = frames.collect();
        let mut guard = buffer.locked();
        let (pending, taken) = &mut *guard;
        let room = max_samples.saturating_sub(*taken);
        let before = pending.len();
        pending.extend(
            interleaved
                .chunks(channels)
                .map(|frame| frame.iter().sum::<f32>() / frame.len() as f32)
                .take(room),
        );
        *taken += pending.len() - before;
    };
    let on_error = keep_first_error(failure.clone());
    let stream = match format {
        SampleFormat::F32 => device.build_input_stream(
            &config,
            move |data: &[f32], _: &_| push(&mut data.iter().copied()),
            on_error,
            None,
        ),
        SampleFormat::I16 => device.build_input_stream(
            &config,
            move |data: &[i16], _: &_| push(&mut data.iter().map(|s| *s as f32 / 32768.0)),
            on_error,
            None,
        ),
        SampleFormat::U16 => device.build_input_stream(
            &config,
            move |data: &[u16], _: &_| {
                push(&mut data.iter().map(|s| (*s as f32 - 32768.0) / 32768.0))
            },
            on_error,
            None,
        ),
        other => {
            return Err(AudioError::Device {
                message: format!(
                    "{name} delivers {other:?} samples, which Headroom does not record"
                ),
            })
        }
    }
    .map_err(|e| device_error(&format!("cannot open {name} for recording"), e))?;
    stream
        .play()
        .map_err(|e| device_error(&format!("cannot start recording from {name}"), e))?;
    let started = Instant::now();
    let wanted = Duration::from_secs_f64(seconds.max(0.0));
    let tick = Duration::from_millis(100);
    let mut handed = 0usize;
    // Recording is paced by the clock: every tenth of a second the new samples go to the sink
    // and the level is reported.
    loop {
        let done = started.elapsed() >= wanted || cancel.is_cancelled() || handed >= max_samples;
        if !done {
            std::thread::sleep(tick.min(wanted.saturating_sub(started.elapsed())));
        }
        if let Some(message) = failure.locked().clone() {
            return Err(device_error(
                &format!("recording from {name} failed"),
                message,
            ));
        }
        let chunk = std::mem::take(&mut captured.locked().0);
        handed += chunk.len();
        if !chunk.is_empty() {
            sink(sample_rate, &chunk)?;
        }
        let recent = chunk.len().saturating_sub(sample_rate as usize / 10);
        let peak = chunk[recent..].iter().fold(0.0f32, |m, s| m.max(s.abs()));
        level(20.0 * peak.max(1e-5).log10());
        if done {
            break;
        }
    }
    drop(stream);
    Ok(sample_rate)
}

/// Plays mono audio on the default output device until it ends or `cancel` fires.
pub fn play(audio: &Audio, cancel: &CancellationToken) -> Result<(), AudioError> {
    play_fed(cancel, |rate, feed| {
        // Played at the device's rate, handed on a tenth of a second at a time.
        let samples = super::resample(&audio.samples, audio.sample_rate, rate)?;
        for block in samples.chunks((rate as usize / 10).max(1)) {
            if feed(block.to_vec()).is_break() {
                break;
            }
        }
        Ok(())
    })
}

/// Plays `[start, end)` seconds of the audio file at `path` (an infinite `end`: to its end)
/// on the default output device, decoding as it plays: a stretch of an hours-long recording,
/// or the whole of it, costs the memory of a second or two, and decoding stops at `end`.
/// Returns the seconds played.
pub fn play_file(
    path: &Path,
    start_secs: f64,
    end_secs: f64,
    cancel: &CancellationToken,
) -> Result<f64, AudioError> {
    play_fed(cancel, |rate, feed| {
        let decode = Decode {
            limits: DecodeLimits::streamed(),
            to_rate: Some(rate),
            cancel: cancel.clone(),
        };
        let mut stretch = Fed {
            seconds: (start_secs, end_secs),
            range: 0..0,
            at: 0,
            fed: 0,
            feed,
        };
        match decode.file_into(path, &mut stretch) {
            Ok(_) | Err(AudioError::Cancelled { .. }) => Ok(stretch.fed as f64 / f64::from(rate)),
            Err(e) => Err(e),
        }
    })
}

/// A stretch of a file handed to the player as it decodes.
struct Fed<'a> {
    seconds: (f64, f64),
    range: std::ops::Range<usize>,
    at: usize,
    /// Samples handed to the player.
    fed: usize,
    feed: &'a mut dyn FnMut(Vec<f32>) -> ControlFlow<()>,
}

impl SampleSink for Fed<'_> {
    fn begin(&mut self, sample_rate: u32) {
        self.range = sample_range(self.seconds.0, self.seconds.1, sample_rate);
    }

    fn take(&mut self, block: &[f32]) -> Result<ControlFlow<()>, AudioError> {
        let part = part_in(block, self.at, &self.range);
        self.at += block.len();
        self.fed += part.len();
        if !part.is_empty() && (self.feed)(part.to_vec()).is_break() {
            // The player has stopped: nothing more is wanted.
            return Ok(ControlFlow::Break(()));
        }
        Ok(if self.at >= self.range.end {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    }
}

/// Blocks of samples waiting for the device: a packet of a compressed file (26 ms of MP3)
/// to 4096 frames of a WAV, so 1.7 to 6 s ahead, about a megabyte at most. A producer ahead
/// of the device waits rather than holds more.
const QUEUED_BLOCKS: usize = 64;

/// Plays what `produce` hands to its feed (blocks of mono samples at the rate it is given, the
/// device's), as it hands them, until it has handed all and they have sounded or `cancel`
/// fires. `produce` runs on a thread of its own; its feed says `Break` once playback has
/// stopped, and its error, if any, is returned.
pub(crate) fn play_fed<P, T>(cancel: &CancellationToken, produce: P) -> Result<T, AudioError>
where
    P: FnOnce(u32, &mut dyn FnMut(Vec<f32>) -> ControlFlow<()>) -> Result<T, AudioError> + Send,
    T: Send,
{
    let host = cpal::default_host();
    let device = host
        .default_output_device()
        .ok_or_else(|| AudioError::Device {
            message: "no sound output device found".into(),
        })?;
    let name = device.name().unwrap_or_else(|_| "the output device".into());
    let supported = device
        .default_output_config()
        .map_err(|e| device_error(&format!("{name} cannot play"), e))?;
    let format = supported.sample_format();
    let config: StreamConfig = supported.into();
    let channels = config.channels.max(1) as usize;
    let rate = config.sample_rate.0;
    let (sender, receiver) = std::sync::mpsc::sync_channel::<Vec<f32>>(QUEUED_BLOCKS);
    let sounded = Arc::new(AtomicBool::new(false));
    let failure: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let mut queue = Queue {
        receiver,
        block: Vec::new(),
        position: 0,
        sounded: sounded.clone(),
    };
    let on_error = keep_first_error(failure.clone());
    let stream = match format {
        SampleFormat::F32 => device.build_output_stream(
            &config,
            move |data: &mut [f32], _: &_| {
                for frame in data.chunks_mut(channels) {
                    frame.fill(queue.next());
                }
            },
            on_error,
            None,
        ),
        SampleFormat::I16 => device.build_output_stream(
            &config,
            move |data: &mut [i16], _: &_| {
                for frame in data.chunks_mut(channels) {
                    frame.fill((queue.next().clamp(-1.0, 1.0) * i16::MAX as f32) as i16);
                }
            },
            on_error,
            None,
        ),
        other => {
            return Err(AudioError::Device {
                message: format!("{name} wants {other:?} samples, which Headroom does not play"),
            })
        }
    }
    .map_err(|e| device_error(&format!("cannot open {name} for playback"), e))?;
    stream
        .play()
        .map_err(|e| device_error(&format!("cannot start playback on {name}"), e))?;
    std::thread::scope(|scope| {
        let producer = scope.spawn(move || {
            let mut feed = |block: Vec<f32>| match sender.send(block) {
                Ok(()) => ControlFlow::Continue(()),
                Err(_) => ControlFlow::Break(()),
            };
            produce(rate, &mut feed)
        });
        // Paced by the device: check every 50 ms whether everything has sounded.
        let mut failed = None;
        while !sounded.load(Ordering::Relaxed) && !cancel.is_cancelled() {
            std::thread::sleep(Duration::from_millis(50));
            if let Some(message) = failure.locked().clone() {
                failed = Some(device_error(&format!("playback on {name} failed"), message));
                break;
            }
        }
        // The queue goes with the stream, so a producer waiting on it stops.
        drop(stream);
        let produced = producer
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        match failed {
            Some(e) => Err(e),
            None => produced,
        }
    })
}

/// The device's side of the queue: samples as they come, silence while none has come yet,
/// and `sounded` once the producer has finished and everything it handed has been played.
struct Queue {
    receiver: std::sync::mpsc::Receiver<Vec<f32>>,
    block: Vec<f32>,
    position: usize,
    sounded: Arc<AtomicBool>,
}

impl Queue {
    fn next(&mut self) -> f32 {
        loop {
            if let Some(&s) = self.block.get(self.position) {
                self.position += 1;
                return s;
            }
            match self.receiver.try_recv() {
                Ok(block) => {
                    self.block = block;
                    self.position = 0;
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => return 0.0,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    self.sounded.store(true, Ordering::Relaxed);
                    return 0.0;
                }
            }
        }
    }
}
