//! Progress on stderr: a live percentage on a terminal, start and end lines elsewhere (logs,
//! pipes), so captured output stays readable.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU32, Ordering};

pub struct Progress {
    label: String,
    terminal: bool,
    last: AtomicU32,
}

impl Progress {
    pub fn new(label: impl Into<String>) -> Self {
        Progress {
            label: label.into(),
            terminal: std::io::stderr().is_terminal(),
            last: AtomicU32::new(u32::MAX),
        }
    }

    /// Shows `fraction` (0.0..=1.0) when the whole percentage changed.
    pub fn update(&self, fraction: f32) {
        let percent = (fraction.clamp(0.0, 1.0) * 100.0) as u32;
        if self.last.swap(percent, Ordering::Relaxed) == percent || !self.terminal {
            return;
        }
        eprint!("\r{}: {percent:>3}%", self.label);
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
