//! Progress on stderr: a live percentage with the time elapsed and an estimate of the time
//! left on a terminal, start and end lines elsewhere (logs, pipes), so captured output stays
//! readable.

use headroom_base::job_clock::{clock_text, JobClock, JobTime};
use headroom_base::sync::Locked;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the line is redrawn when the percentage has not changed (the clock moves).
const REDRAW: Duration = Duration::from_secs(1);

pub struct Progress {
    label: String,
    terminal: bool,
    shown: Mutex<Shown>,
}

struct Shown {
    clock: JobClock,
    percent: Option<u32>,
    at: Instant,
}

impl Progress {
    pub fn new(label: impl Into<String>) -> Self {
        Progress {
            label: label.into(),
            terminal: std::io::stderr().is_terminal(),
            shown: Mutex::new(Shown {
                clock: JobClock::start(),
                percent: None,
                at: Instant::now(),
            }),
        }
    }

    /// Shows `fraction` (0.0..=1.0) when the whole percentage changed, or a second passed.
    pub fn update(&self, fraction: f32) {
        if !self.terminal {
            return;
        }
        let mut shown = self.shown.locked();
        let time = shown.clock.observe(fraction as f64);
        let percent = (fraction.clamp(0.0, 1.0) * 100.0) as u32;
        if shown.percent == Some(percent) && shown.at.elapsed() < REDRAW {
            return;
        }
        shown.percent = Some(percent);
        shown.at = Instant::now();
        eprint!("\r\x1b[2K{}: {}", self.label, line(percent, time));
        let _ = std::io::stderr().flush();
    }

    /// Shows a free-form status (a level meter) on a terminal.
    pub fn show(&self, status: &str) {
        if self.terminal {
            eprint!("\r{}: {status}", self.label);
            let _ = std::io::stderr().flush();
        }
    }

    /// Ends the progress line with a message.
    pub fn finish(&self, message: &str) {
        if self.terminal {
            eprint!("\r\x1b[2K");
        }
        eprintln!("{message}");
    }
}

/// `37% · 1:02 · about 1:45 left`.
fn line(percent: u32, time: JobTime) -> String {
    let mut line = format!("{percent:>3}% · {}", clock_text(time.elapsed_secs));
    if let Some(left) = time.remaining_secs.filter(|_| percent < 100) {
        line.push_str(&format!(" · about {} left", clock_text(left)));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_shows_the_time_left_once_it_is_known() {
        let known = JobTime {
            elapsed_secs: 62.0,
            remaining_secs: Some(105.0),
        };
        assert_eq!(line(37, known), " 37% · 1:02 · about 1:45 left");
        let unknown = JobTime {
            remaining_secs: None,
            ..known
        };
        assert_eq!(line(0, unknown), "  0% · 1:02");
        let done = JobTime {
            remaining_secs: Some(0.0),
            ..known
        };
        assert_eq!(line(100, done), "100% · 1:02");
    }
}
