//! The signals that say the failure policy is wrong: one table ([`SIGNALS`]) of the rates an
//! operator should act on, each with its PromQL, threshold, `for` duration, severity, the labels
//! it is reported per, what it means and what to do.
//!
//! The same table makes
//! - the Prometheus alerting rules ([`prometheus_rules_yaml`], committed as
//!   `deploy/prometheus/headroom-rules.yml`; a test fails when the file drifts),
//! - the README's table ([`readme_table`]), and
//! - the in-process evaluator ([`Signals`]) the desktop's lanes panel shows in words: it keeps
//!   timestamped samples of [`crate::metrics::Metrics::render`]'s text over a sliding window
//!   and computes the same ratios, increases, quantiles and slopes as the rules.
//!
//! Pure: no IO, no clock. The caller passes the exposition text and the time it was taken:
//!
//! ```
//! use headroom_core::metrics::Metrics;
//! use headroom_core::signals::Signals;
//!
//! let metrics = Metrics::new();
//! let mut signals = Signals::new();
//! // Every few seconds, with the wall-clock time in ms:
//! for (i, at_unix_ms) in (0..3).map(|i| (i, 1_700_000_000_000 + i * 5_000)) {
//!     let crossed = signals.observe(at_unix_ms, &metrics.render()).unwrap();
//!     // Nothing happened, so nothing is crossed; a lanes panel shows each one's message_en.
//!     assert!(crossed.is_empty(), "{i}: {crossed:?}");
//! }
//! ```
//!
//! The evaluator's `increase` is the sum of the counter's rises between the samples inside the
//! window (a drop is a restart: the value after it counts as the rise), without Prometheus's
//! extrapolation to the window's edges. Ratios of two increases over the same window are
//! unaffected; absolute counts (health flaps) can read slightly lower than Prometheus's.
//! A series that is missing, or has fewer than two samples in the window, raises nothing.

//!
//! By job: the table and its wording here, [`promql`] writes its queries, [`rules`] the
//! alerting rules and the README's table, [`exposition`] reads the metrics text, and
//! [`evaluator`] computes the signals from it.

mod evaluator;
mod exposition;
mod promql;
mod rules;

pub use evaluator::{CrossedSignal, Signals};
use exposition::label_value;
pub use exposition::{parse_exposition, ExposedSeries, Labels};
pub use rules::{prometheus_rules_yaml, readme_table, RULES_PATH};

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How a label is compared in a [`Selector`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchOp {
    Eq,
    Ne,
}

/// One label matcher: `lane="text"`, `reason!="cancelled"`.
#[derive(Debug, Clone, Copy)]
pub struct Matcher {
    pub label: &'static str,
    pub op: MatchOp,
    pub value: &'static str,
}

const fn eq(label: &'static str, value: &'static str) -> Matcher {
    Matcher {
        label,
        op: MatchOp::Eq,
        value,
    }
}

const fn ne(label: &'static str, value: &'static str) -> Matcher {
    Matcher {
        label,
        op: MatchOp::Ne,
        value,
    }
}

/// A metric as exported (prefix and `_total` included) and the labels it must have.
#[derive(Debug, Clone, Copy)]
pub struct Selector {
    pub metric: &'static str,
    pub matchers: &'static [Matcher],
}

const fn sel(metric: &'static str, matchers: &'static [Matcher]) -> Selector {
    Selector { metric, matchers }
}

impl Selector {
    /// `metric{matchers}` in PromQL, with `suffix` added to the name (`_bucket`).
    fn promql(&self, suffix: &str) -> String {
        let mut out = format!("{}{suffix}", self.metric);
        if !self.matchers.is_empty() {
            let parts: Vec<String> = self
                .matchers
                .iter()
                .map(|m| {
                    let op = match m.op {
                        MatchOp::Eq => "=",
                        MatchOp::Ne => "!=",
                    };
                    format!("{}{op}\"{}\"", m.label, m.value)
                })
                .collect();
            let _ = write!(out, "{{{}}}", parts.join(","));
        }
        out
    }

    fn matches(&self, labels: &Labels) -> bool {
        self.matchers.iter().all(|m| {
            // A missing label reads as the empty string, as in PromQL.
            let value = label_value(labels, m.label);
            match m.op {
                MatchOp::Eq => value == m.value,
                MatchOp::Ne => value != m.value,
            }
        })
    }
}

/// What a signal computes, per group of its `by` labels.
#[derive(Debug, Clone, Copy)]
pub enum Query {
    /// `sum by (by) (increase(num[w])) / sum by (den_by) (increase(den[w]))`; `den_by` is a
    /// subset of the signal's `by` (a rejection reason's share of all requests).
    Ratio {
        num: Selector,
        den: Selector,
        den_by: &'static [&'static str],
    },
    /// `histogram_quantile(q, sum by (by, le) (rate(histogram_bucket[w])))`; `histogram` names
    /// the histogram without its `_bucket` suffix.
    Quantile { q: f64, histogram: Selector },
    /// `sum by (by) (increase(counter[w]))`.
    Increase { counter: Selector },
    /// `min by (by) (gauge)`: the latest value; the worst reading wins.
    GaugeMin { gauge: Selector },
    /// `max by (by) (deriv(gauge[w])) * 3600`: the slope of a gauge, per hour.
    DerivPerHour { gauge: Selector },
}

/// A minimum of evidence before a signal may fire: `sum by (by) (increase(series[w])) >= min`.
/// Ten refusals out of twelve requests say little; out of two hundred they say a lot.
#[derive(Debug, Clone, Copy)]
pub struct Guard {
    pub series: Selector,
    pub by: &'static [&'static str],
    pub min: f64,
    /// What the series counts, in words ("text requests").
    pub what: &'static str,
}

/// Which side of the threshold is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    Above,
    Below,
}

impl Compare {
    fn promql(self) -> &'static str {
        match self {
            Compare::Above => ">",
            Compare::Below => "<",
        }
    }

    fn crossed(self, value: f64, threshold: f64) -> bool {
        match self {
            Compare::Above => value > threshold,
            Compare::Below => value < threshold,
        }
    }
}

/// How a signal's value reads in words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[cfg_attr(feature = "typescript", ts(rename = "SignalUnit"))]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// A share: 0.4 reads "40%".
    Percent,
    /// A multiple: 1.8 reads "1.80".
    Factor,
    /// Seconds: 3.891 reads "3.89 s".
    Seconds,
    /// A count: 5 reads "5".
    Count,
    /// Bytes per hour: 402653184 reads "384MiB" (the summary says "per hour").
    BytesPerHour,
    /// The value is not shown (a health gauge).
    Hidden,
}

impl Unit {
    /// The Go template Prometheus renders `$value` with; the same text as [`Unit::english`].
    fn template(self) -> &'static str {
        match self {
            Unit::Percent => "{{ $value | humanizePercentage }}",
            Unit::Factor => "{{ printf \"%.2f\" $value }}",
            Unit::Seconds => "{{ printf \"%.2f\" $value }} s",
            Unit::Count => "{{ printf \"%.0f\" $value }}",
            Unit::BytesPerHour => "{{ $value | humanize1024 }}B",
            Unit::Hidden => "",
        }
    }

    fn english(self, value: f64) -> String {
        match self {
            Unit::Percent => format!("{}%", four_significant(value * 100.0)),
            Unit::Factor => format!("{value:.2}"),
            Unit::Seconds => format!("{value:.2} s"),
            Unit::Count => format!("{value:.0}"),
            Unit::BytesPerHour => {
                // Prometheus's humanize1024.
                let mut v = value;
                let mut prefix = "";
                if v.abs() > 1.0 {
                    for p in ["ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"] {
                        if v.abs() < 1024.0 {
                            break;
                        }
                        prefix = p;
                        v /= 1024.0;
                    }
                }
                format!("{}{prefix}B", four_significant(v))
            }
            Unit::Hidden => String::new(),
        }
    }

    /// The threshold in the README's words.
    fn threshold(self, threshold: f64) -> String {
        match self {
            Unit::Hidden => format!("{threshold}"),
            Unit::BytesPerHour => format!("{} per hour", self.english(threshold)),
            unit => unit.english(threshold),
        }
    }
}

/// Go's `%.4g` for the magnitudes signals have (below 10⁴): four significant digits, trailing
/// zeros dropped.
fn four_significant(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let exponent = v.abs().log10().floor() as i32;
    let decimals = (3 - exponent).max(0) as usize;
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// How urgent a crossed signal is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[cfg_attr(feature = "typescript", ts(rename = "SignalSeverity"))]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The policy costs users something; change it this week.
    Warning,
    /// Work is being lost now.
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// One signal: what to compute, when it is crossed, and what to say.
///
/// `summary` is a template: `{value}` (the value in its [`Unit`]), `{window}` (`10 min`),
/// `{for}` (`2 min`) and each label of `by` (`{project}`) are filled in, by Prometheus in the
/// rules and by [`Signals`] in the app.
#[derive(Debug, Clone, Copy)]
pub struct Signal {
    /// Stable: the rule's `signal` label and [`CrossedSignal::code`]; the UI translates by it.
    pub code: &'static str,
    /// The Prometheus alert name.
    pub alert: &'static str,
    pub query: Query,
    /// The labels the signal is reported per (one alert per project, per upstream, ...).
    pub by: &'static [&'static str],
    pub window_mins: u32,
    pub compare: Compare,
    pub threshold: f64,
    /// How long the threshold must stay crossed before the signal is reported (0: at once).
    pub for_mins: u32,
    pub severity: Severity,
    pub guard: Option<Guard>,
    pub unit: Unit,
    pub summary: &'static str,
    /// What it means, in one line.
    pub meaning: &'static str,
    /// What to do, in one line.
    pub action: &'static str,
}

/// The text lane's series; the upstreams' too (a batch's transcription servers are counted
/// under `lane="audio"`, and no text signal reads them).
const TEXT: &[Matcher] = &[eq("lane", "text")];

const SUBMITTED_TEXT: Selector = sel("headroom_submitted_total", TEXT);
const PIECES_NEEDING_CLEANUP: Selector = sel(
    "headroom_cleanup_pieces_total",
    &[ne("source", "unchanged")],
);
const CLEANUP_ATTEMPTS: Selector = sel("headroom_cleanup_attempts_total", &[]);

/// At least this many text requests in the window before a rate over them counts: below it one
/// unlucky burst is a large share.
const MIN_TEXT_REQUESTS: f64 = 20.0;
/// At least this many segments (or model attempts) per project in the window.
const MIN_PIECES: f64 = 10.0;

/// Every signal, in the order the README and the rules list them.
pub const SIGNALS: &[Signal] = &[
    // 5% for 5 minutes: the article's bounded lane (two slots, no queue) refuses on purpose
    // during bursts, so a few percent is the boundary doing its job. Past one request in
    // twenty, sustained, users "see intermittent failures during normal operation" (the
    // article), and VoiceStudio's bare "busy" was filed as a bug seven times (field notes).
    // Cancellations are the user's own choice and are left out.
    Signal {
        code: "text_rejection_rate",
        alert: "HeadroomTextRejectionRate",
        query: Query::Ratio {
            num: sel(
                "headroom_rejections_total",
                &[eq("lane", "text"), ne("reason", "cancelled")],
            ),
            den: SUBMITTED_TEXT,
            den_by: &[],
        },
        by: &["reason"],
        window_mins: 10,
        compare: Compare::Above,
        threshold: 0.05,
        for_mins: 5,
        severity: Severity::Warning,
        guard: Some(Guard {
            series: SUBMITTED_TEXT,
            by: &[],
            min: MIN_TEXT_REQUESTS,
            what: "text requests",
        }),
        unit: Unit::Percent,
        summary: "{value} of text requests were refused with {reason} in the last {window}",
        meaning: "the text lane refuses work users see as failures",
        action: "text_lane_full or upstream_busy: add an upstream or raise max_in_flight with the \
                 server's --max-num-seqs; deadline_exceeded: lengthen the deadlines; \
                 input_too_long: raise context_tokens; gpu_memory_pressure: give the text model \
                 less GPU memory; upstream_unavailable or upstream_error: check the upstreams",
    },
    // 20%: falling back keeps the work moving, but "you lose the quality improvement that
    // justified adding the LLM" (the article). One segment in five from the rules is a
    // transcript visibly mixed from two qualities. Only projects that tried the model (cleanup
    // on) can fire: a project with cleanup off is all rules by choice.
    Signal {
        code: "cleanup_fallback_rate",
        alert: "HeadroomCleanupFallbackRate",
        query: Query::Ratio {
            num: sel("headroom_cleanup_pieces_total", &[eq("source", "rules")]),
            den: PIECES_NEEDING_CLEANUP,
            den_by: &["project"],
        },
        by: &["project"],
        window_mins: 10,
        compare: Compare::Above,
        threshold: 0.2,
        for_mins: 5,
        severity: Severity::Warning,
        guard: Some(Guard {
            series: CLEANUP_ATTEMPTS,
            by: &["project"],
            min: MIN_PIECES,
            what: "model attempts",
        }),
        unit: Unit::Percent,
        summary: "{value} of project {project}'s segments fell back to the rules in the last \
                  {window}",
        meaning: "the text lane is undersized for this project's work",
        action: "add an upstream or raise max_in_flight with the server's --max-num-seqs, or \
                 lengthen the deadlines; the text rejections by reason say which",
    },
    // 1.5: with healthy upstreams every request is sent once (1.0) and a failover adds one.
    // At 1.5 every other request needed a second upstream: the fleet carries half again the
    // demand exactly when it can least take it.
    Signal {
        code: "retry_amplification",
        alert: "HeadroomRetryAmplification",
        query: Query::Ratio {
            num: sel("headroom_upstream_requests_total", TEXT),
            den: sel("headroom_dispatched_total", TEXT),
            den_by: &[],
        },
        by: &[],
        window_mins: 10,
        compare: Compare::Above,
        threshold: 1.5,
        for_mins: 5,
        severity: Severity::Warning,
        guard: Some(Guard {
            series: sel("headroom_dispatched_total", TEXT),
            by: &[],
            min: MIN_TEXT_REQUESTS,
            what: "text requests sent upstream",
        }),
        unit: Unit::Factor,
        summary: "each text request went to the upstreams {value} times on average in the last \
                  {window}",
        meaning: "upstreams fail before the first token and requests fail over, multiplying the \
                  load on the others",
        action: "find the upstream that is down or flapping and fix or remove it; when all are \
                 busy, add capacity rather than retries",
    },
    // 1.5 per segment: the bounded-retry policy exists for short bursts; when half the
    // segments need a second try, "retrying risks masking persistent overload until an
    // interactive operation times out" (the article).
    Signal {
        code: "cleanup_retry_amplification",
        alert: "HeadroomCleanupRetryAmplification",
        query: Query::Ratio {
            num: CLEANUP_ATTEMPTS,
            den: PIECES_NEEDING_CLEANUP,
            den_by: &["project"],
        },
        by: &["project"],
        window_mins: 10,
        compare: Compare::Above,
        threshold: 1.5,
        for_mins: 5,
        severity: Severity::Warning,
        guard: Some(Guard {
            series: PIECES_NEEDING_CLEANUP,
            by: &["project"],
            min: MIN_PIECES,
            what: "segments",
        }),
        unit: Unit::Factor,
        summary: "project {project} made {value} text-model requests per segment in the last \
                  {window}",
        meaning: "the bounded-retry policy is masking a persistent overload",
        action: "switch the project's failure policy to the rules or to showing the rejection, \
                 or add text capacity; retries only help with short bursts",
    },
    // 2%: the deadlines sit far above normal latency (10 s queue, 30 s first words, 120 s in
    // all by default), so a steady miss rate means requests take several times longer than
    // the lane was sized for. The kind says where the time goes.
    Signal {
        code: "deadline_miss_rate",
        alert: "HeadroomDeadlineMissRate",
        query: Query::Ratio {
            num: sel("headroom_deadline_misses_total", TEXT),
            den: SUBMITTED_TEXT,
            den_by: &[],
        },
        by: &["kind"],
        window_mins: 10,
        compare: Compare::Above,
        threshold: 0.02,
        for_mins: 5,
        severity: Severity::Warning,
        guard: Some(Guard {
            series: SUBMITTED_TEXT,
            by: &[],
            min: MIN_TEXT_REQUESTS,
            what: "text requests",
        }),
        unit: Unit::Percent,
        summary: "{value} of text requests missed their {kind} deadline in the last {window}",
        meaning: "requests wait or run far longer than the lane was sized for",
        action: "queue_wait: add capacity or lower max_waiting; first_chunk: the model is slow to \
                 start (long prompts, too many sequences): lower context or --max-num-seqs, or \
                 use a faster upstream; total: lower max_tokens or lengthen total_secs",
    },
    // 2 s at p95: queue wait is where the failure starts ("rising queue latency followed by
    // allocation failure", the article), before refusals and out-of-memory. A cleanup that
    // waits 2 s before it even starts is no longer interactive, and 2 s is a fifth of the
    // default 10 s queue deadline: room to act before requests are refused.
    Signal {
        code: "text_queue_wait_p95",
        alert: "HeadroomTextQueueWaitHigh",
        query: Query::Quantile {
            q: 0.95,
            histogram: sel("headroom_queue_wait_seconds", TEXT),
        },
        by: &[],
        window_mins: 10,
        compare: Compare::Above,
        threshold: 2.0,
        for_mins: 5,
        severity: Severity::Warning,
        guard: Some(Guard {
            series: sel("headroom_queue_wait_seconds_count", TEXT),
            by: &[],
            min: MIN_TEXT_REQUESTS,
            what: "text requests",
        }),
        unit: Unit::Seconds,
        summary: "95% of text requests waited up to {value} for a slot in the last {window}",
        meaning: "the text lane's queue is where the time goes, the first step before refusals \
                  and out-of-memory",
        action: "add an upstream or raise max_in_flight if the GPU has room; otherwise lower \
                 max_waiting so requests are refused at once instead of waiting",
    },
    // 2 minutes down: health checks retry within seconds, so a short blip clears itself;
    // two minutes is a server that is not coming back on its own. Critical: with one upstream
    // left, every request beyond its slots is refused.
    Signal {
        code: "upstream_down",
        alert: "HeadroomUpstreamDown",
        query: Query::GaugeMin {
            gauge: sel("headroom_upstream_up", TEXT),
        },
        by: &["upstream"],
        window_mins: 0,
        compare: Compare::Below,
        threshold: 1.0,
        for_mins: 2,
        severity: Severity::Critical,
        guard: None,
        unit: Unit::Hidden,
        summary: "upstream {upstream} has been down for at least {for}",
        meaning: "its requests go to the other upstreams, or are refused as upstream_unavailable \
                  when none is left",
        action: "check the server (its /health, its log, its GPU memory); remove it from \
                 --upstream if it is gone for good",
    },
    // More than 4 changes in 30 minutes (three or more outages): an upstream that falls over
    // under load and recovers when idle. Each fall costs the requests on it a failover.
    Signal {
        code: "upstream_flapping",
        alert: "HeadroomUpstreamFlapping",
        query: Query::Increase {
            counter: sel("headroom_upstream_health_changes_total", TEXT),
        },
        by: &["upstream"],
        window_mins: 30,
        compare: Compare::Above,
        threshold: 4.0,
        for_mins: 0,
        severity: Severity::Warning,
        guard: None,
        unit: Unit::Count,
        summary: "upstream {upstream} changed health {value} times in the last {window}",
        meaning: "it fails under load and recovers when idle; every fall costs a failover",
        action: "lower its capacity (max_in_flight, --max-num-seqs or --parallel) or its context \
                 so it stays up, and check its memory: out-of-memory restarts look like this",
    },
    // 256 MiB per hour over 30 minutes, for 15 more: allocator retention and preallocated
    // KV cache make memory high but flat; "suspect a leak when identical workloads produce an
    // increasing memory floor" (the article). At 256 MiB/h the few GiB of audio headroom on a
    // 24 GiB card are gone within a working day.
    Signal {
        code: "gpu_memory_floor_rising",
        alert: "HeadroomGpuMemoryFloorRising",
        query: Query::DerivPerHour {
            gauge: sel("headroom_gpu_memory_floor_bytes", &[]),
        },
        by: &[],
        window_mins: 30,
        compare: Compare::Above,
        threshold: 268_435_456.0,
        for_mins: 15,
        severity: Severity::Warning,
        guard: None,
        unit: Unit::BytesPerHour,
        summary: "the GPU memory floor rose {value} per hour over the last {window}",
        meaning: "memory left after work finishes keeps growing: a leak, not allocator retention",
        action: "find the process that grows (nvidia-smi, the GPU panel) and restart it; until \
                 then lower the text model's --gpu-memory-utilization",
    },
    // 10%: an upstream whose answers fail one time in ten costs every tenth request a
    // failover (or a refusal when the others are full); the fleet routes around it only once
    // it is marked down.
    Signal {
        code: "upstream_failure_rate",
        alert: "HeadroomUpstreamFailureRate",
        query: Query::Ratio {
            num: sel(
                "headroom_upstream_requests_total",
                &[eq("lane", "text"), ne("result", "answered")],
            ),
            den: sel("headroom_upstream_requests_total", TEXT),
            den_by: &["upstream"],
        },
        by: &["upstream"],
        window_mins: 10,
        compare: Compare::Above,
        threshold: 0.1,
        for_mins: 5,
        severity: Severity::Warning,
        guard: Some(Guard {
            series: sel("headroom_upstream_requests_total", TEXT),
            by: &["upstream"],
            min: MIN_TEXT_REQUESTS,
            what: "requests to the upstream",
        }),
        unit: Unit::Percent,
        summary: "{value} of the requests sent to upstream {upstream} failed in the last {window}",
        meaning: "it is overloaded or broken but still taking work",
        action: "read its results (busy: lower its capacity; deadline: it is too slow; error or \
                 unavailable: check its log), or take it out of --upstream",
    },
];

fn minutes(m: u32) -> String {
    format!("{m} min")
}

impl Signal {
    fn fill(&self, value: &str, label: impl Fn(&str) -> String) -> String {
        let mut text = self
            .summary
            .replace("{value}", value)
            .replace("{window}", &minutes(self.window_mins))
            .replace("{for}", &minutes(self.for_mins));
        for name in self.by {
            text = text.replace(&format!("{{{name}}}"), &label(name));
        }
        text
    }

    /// The summary as Prometheus renders it (Go template).
    pub fn summary_template(&self) -> String {
        self.fill(self.unit.template(), |name| {
            format!("{{{{ $labels.{name} }}}}")
        })
    }

    /// The summary in English for a value and the labels of its group.
    pub fn summary_en(&self, value: f64, labels: &BTreeMap<String, String>) -> String {
        self.fill(&self.unit.english(value), |name| {
            labels.get(name).cloned().unwrap_or_default()
        })
    }

    /// The whole message: what happened, what it means, what to do.
    pub fn message_en(&self, value: f64, labels: &BTreeMap<String, String>) -> String {
        format!(
            "{}: {} — {}",
            self.summary_en(value, labels),
            self.meaning,
            self.action
        )
    }

    /// The threshold in words: `> 5% for 5 min (at least 20 in 10 min)`.
    pub fn threshold_en(&self) -> String {
        let mut out = format!(
            "{} {}",
            self.compare.promql(),
            self.unit.threshold(self.threshold)
        );
        if self.window_mins > 0 {
            let _ = write!(out, " over {}", minutes(self.window_mins));
        }
        if self.for_mins > 0 {
            let _ = write!(out, ", for {}", minutes(self.for_mins));
        }
        if let Some(guard) = self.guard {
            let _ = write!(out, " (at least {} {})", guard.min, guard.what);
        }
        out
    }
}

/// Why a scrape could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignalsError {
    #[error("metrics text line {line}: {reason}")]
    Malformed { line: usize, reason: &'static str },
    #[error("a sample at {at_unix_ms} ms is older than the last one at {last_unix_ms} ms")]
    OutOfOrder { at_unix_ms: u64, last_unix_ms: u64 },
}

/// The signal named `code` (tests read the table by name).
#[cfg(test)]
fn signal(code: &str) -> &'static Signal {
    SIGNALS
        .iter()
        .find(|s| s.code == code)
        .unwrap_or_else(|| panic!("no signal {code}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    const MIB: f64 = 1024.0 * 1024.0;

    #[test]
    fn the_table_is_consistent() {
        let mut codes = HashSet::new();
        let mut alerts = HashSet::new();
        for s in SIGNALS {
            assert!(codes.insert(s.code), "{} twice", s.code);
            assert!(alerts.insert(s.alert), "{} twice", s.alert);
            assert!(s.alert.starts_with("Headroom"), "{}", s.alert);
            if let Some(g) = s.guard {
                assert!(
                    g.by.iter().all(|l| s.by.contains(l)),
                    "{}: guard by",
                    s.code
                );
            }
            if let Query::Ratio { den_by, .. } = s.query {
                assert!(
                    den_by.iter().all(|l| s.by.contains(l)),
                    "{}: den_by",
                    s.code
                );
            }
            assert_eq!(
                s.window_mins == 0,
                matches!(s.query, Query::GaugeMin { .. }),
                "{}: only a gauge has no window",
                s.code
            );
            for label in s.by {
                assert!(
                    s.summary.contains(&format!("{{{label}}}")),
                    "{}: {label}",
                    s.code
                );
            }
            let group: BTreeMap<String, String> =
                s.by.iter()
                    .map(|l| (l.to_string(), "x".to_string()))
                    .collect();
            let english = s.message_en(1.0, &group);
            assert!(!english.contains('{'), "{english}");
            let template = s.summary_template();
            let outside_go: String = template
                .split("{{")
                .map(|p| p.split_once("}}").map_or(p, |(_, rest)| rest))
                .collect();
            assert!(!outside_go.contains('{'), "{template}");
            for text in [s.summary, s.meaning, s.action] {
                assert!(!text.contains('\n') && !text.contains("  "), "{text}");
            }
        }
    }

    #[test]
    fn values_read_as_prometheus_renders_them() {
        assert_eq!(Unit::Percent.english(0.4), "40%");
        assert_eq!(Unit::Percent.english(2.0 / 12.0), "16.67%");
        assert_eq!(Unit::Percent.english(0.05), "5%");
        assert_eq!(Unit::Factor.english(1.8), "1.80");
        assert_eq!(Unit::Seconds.english(3.8912), "3.89 s");
        assert_eq!(Unit::Count.english(6.0), "6");
        assert_eq!(Unit::BytesPerHour.english(268_435_456.0), "256MiB");
        assert_eq!(Unit::BytesPerHour.english(1.5 * 1024.0 * MIB), "1.5GiB");
        assert_eq!(Unit::BytesPerHour.english(512.0), "512B");
        assert_eq!(four_significant(1234.5678), "1235");
        assert_eq!(four_significant(0.012345), "0.01235");
    }
}
