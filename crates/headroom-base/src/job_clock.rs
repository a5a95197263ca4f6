//! How long a job has run and about how long it has left, from the fraction it reports done:
//! one estimate for the CLI's progress line and the window's job events alike.
//!
//! The pace is measured from the job's last report before its work moved, not from its start:
//! the time before it (a queue, a model loading, while the reports stay where they began) and
//! the work an earlier run did (a resumed job starts part way) are not the job's pace. The clock is monotonic, so a machine that slept while the job waited
//! does not count the sleep as work.

use serde::Serialize;
use std::time::{Duration, Instant};

/// Work done since the first report before any estimate is given: less is noise.
const MIN_FRACTION: f64 = 0.01;
/// Time since the first report before any estimate is given.
const MIN_WATCHED: Duration = Duration::from_secs(2);

/// Elapsed time and the estimate of what is left, as reports and events carry them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct JobTime {
    /// Since the job started.
    pub elapsed_secs: f64,
    /// About how long until it is done; `None` until the job has shown its pace.
    pub remaining_secs: Option<f64>,
}

/// A job's clock: started with the job, told each fraction done.
#[derive(Debug, Clone)]
pub struct JobClock {
    started: Instant,
    /// The first report: when, and how much was done by then.
    first: Option<(Instant, f64)>,
}

impl JobClock {
    /// A clock for a job starting now.
    pub fn start() -> JobClock {
        JobClock::start_at(Instant::now())
    }

    pub fn start_at(started: Instant) -> JobClock {
        JobClock {
            started,
            first: None,
        }
    }

    /// The job reports `fraction` (0.0..=1.0) done now.
    pub fn observe(&mut self, fraction: f64) -> JobTime {
        self.observe_at(fraction, Instant::now())
    }

    pub fn observe_at(&mut self, fraction: f64, now: Instant) -> JobTime {
        let fraction = if fraction.is_finite() {
            fraction.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let elapsed_secs = now.saturating_duration_since(self.started).as_secs_f64();
        // Until the work moves past its first report, each report is the new start: reports at
        // the same fraction (a queue, a model loading) are waiting, not the job's pace.
        if self.first.is_none_or(|(_, first)| fraction <= first) {
            self.first = Some((now, fraction));
        }
        let (first_at, first_fraction) = self.first.expect("set above");
        let watched = now.saturating_duration_since(first_at);
        let done = fraction - first_fraction;
        let remaining_secs = if fraction >= 1.0 {
            Some(0.0)
        } else if done >= MIN_FRACTION && watched >= MIN_WATCHED {
            Some(watched.as_secs_f64() * (1.0 - fraction) / done)
        } else {
            None
        };
        JobTime {
            elapsed_secs,
            remaining_secs,
        }
    }
}

/// Seconds as a clock shows them: `0:07`, `12:05`, `1:02:03`.
pub fn clock_text(secs: f64) -> String {
    let total = if secs.is_finite() {
        secs.max(0.0).round() as u64
    } else {
        0
    };
    let (hours, minutes, seconds) = (total / 3600, total / 60 % 60, total % 60);
    if hours > 0 {
        format!("{hours}:{minutes:02}:{seconds:02}")
    } else {
        format!("{minutes}:{seconds:02}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_is_the_pace_since_the_first_report() {
        let start = Instant::now();
        let mut clock = JobClock::start_at(start);
        // Ten seconds of loading before the first report: not the job's pace.
        let first = clock.observe_at(0.0, start + Duration::from_secs(10));
        assert_eq!(first.elapsed_secs, 10.0);
        assert_eq!(first.remaining_secs, None);
        // A quarter done in 5 s: three quarters take 15 s more.
        let later = clock.observe_at(0.25, start + Duration::from_secs(15));
        assert_eq!(later.elapsed_secs, 15.0);
        let left = later.remaining_secs.unwrap();
        assert!((left - 15.0).abs() < 1e-9, "{left}");
        assert_eq!(
            clock
                .observe_at(1.0, start + Duration::from_secs(30))
                .remaining_secs,
            Some(0.0)
        );
    }

    #[test]
    fn reports_before_any_work_moves_are_waiting_not_pace() {
        let start = Instant::now();
        let mut clock = JobClock::start_at(start);
        clock.observe_at(0.0, start);
        // Still at 0 after 20 s (a model loading): the pace starts here.
        clock.observe_at(0.0, start + Duration::from_secs(20));
        let time = clock.observe_at(0.5, start + Duration::from_secs(30));
        let left = time.remaining_secs.unwrap();
        assert!((left - 10.0).abs() < 1e-9, "{left}");
        assert_eq!(time.elapsed_secs, 30.0);
    }

    #[test]
    fn a_resumed_job_is_timed_on_the_work_it_does_now() {
        let start = Instant::now();
        let mut clock = JobClock::start_at(start);
        // Resumed at 60%: 10% more in 4 s leaves 30%, 12 s.
        clock.observe_at(0.6, start);
        let time = clock.observe_at(0.7, start + Duration::from_secs(4));
        let left = time.remaining_secs.unwrap();
        assert!((left - 12.0).abs() < 1e-9, "{left}");
    }

    #[test]
    fn no_estimate_before_the_pace_shows() {
        let start = Instant::now();
        let mut clock = JobClock::start_at(start);
        clock.observe_at(0.0, start);
        // Too little time watched, then too little work done.
        assert_eq!(
            clock
                .observe_at(0.5, start + Duration::from_millis(500))
                .remaining_secs,
            None
        );
        let mut slow = JobClock::start_at(start);
        slow.observe_at(0.0, start);
        assert_eq!(
            slow.observe_at(0.005, start + Duration::from_secs(60))
                .remaining_secs,
            None
        );
        // A fraction that is not a number counts as none done.
        assert_eq!(
            slow.observe_at(f64::NAN, start + Duration::from_secs(61))
                .remaining_secs,
            None
        );
    }

    #[test]
    fn clock_text_shows_minutes_and_hours() {
        assert_eq!(clock_text(7.4), "0:07");
        assert_eq!(clock_text(725.0), "12:05");
        assert_eq!(clock_text(3723.0), "1:02:03");
        assert_eq!(clock_text(-3.0), "0:00");
        assert_eq!(clock_text(f64::INFINITY), "0:00");
    }
}
