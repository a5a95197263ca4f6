//! Recording from and playing to sound devices with cpal (playback is for the desktop app and
//! `headroom play`). Machines without a sound card are
//! common (servers, containers): every failure is a clear error naming the device, never a
//! panic. ALSA may still print its own complaints on stderr.

use super::{Audio, AudioError};
use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
use cpal::{SampleFormat, StreamConfig};
use headroom_base::sync::Locked;
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
    // Play at the device's rate: resample once up front.
    let samples = Arc::new(super::resample(
        &audio.samples,
        audio.sample_rate,
        config.sample_rate.0,
    )?);
    let total = samples.len();
    let position = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let failure: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let next = {
        let samples = samples.clone();
        let position = position.clone();
        move || -> f32 {
            let i = position.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            samples.get(i).copied().unwrap_or(0.0)
        }
    };
    let on_error = keep_first_error(failure.clone());
    let stream = match format {
        SampleFormat::F32 => device.build_output_stream(
            &config,
            move |data: &mut [f32], _: &_| {
                for frame in data.chunks_mut(channels) {
                    frame.fill(next());
                }
            },
            on_error,
            None,
        ),
        SampleFormat::I16 => device.build_output_stream(
            &config,
            move |data: &mut [i16], _: &_| {
                for frame in data.chunks_mut(channels) {
                    frame.fill((next().clamp(-1.0, 1.0) * i16::MAX as f32) as i16);
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
    // Paced by the device: check every 50 ms whether it has consumed everything.
    while position.load(std::sync::atomic::Ordering::Relaxed) < total && !cancel.is_cancelled() {
        std::thread::sleep(Duration::from_millis(50));
        if let Some(message) = failure.locked().clone() {
            return Err(device_error(&format!("playback on {name} failed"), message));
        }
    }
    Ok(())
}
