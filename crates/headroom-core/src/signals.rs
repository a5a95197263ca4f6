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

use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
            num: sel("headroom_upstream_requests_total", &[]),
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
            gauge: sel("headroom_upstream_up", &[]),
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
            counter: sel("headroom_upstream_health_changes_total", &[]),
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
                &[ne("result", "answered")],
            ),
            den: sel("headroom_upstream_requests_total", &[]),
            den_by: &["upstream"],
        },
        by: &["upstream"],
        window_mins: 10,
        compare: Compare::Above,
        threshold: 0.1,
        for_mins: 5,
        severity: Severity::Warning,
        guard: Some(Guard {
            series: sel("headroom_upstream_requests_total", &[]),
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

fn by_clause(by: &[&str]) -> String {
    if by.is_empty() {
        String::new()
    } else {
        format!(" by ({})", by.join(", "))
    }
}

impl Signal {
    fn range(&self) -> String {
        format!("[{}m]", self.window_mins)
    }

    /// The value's PromQL, before the comparison.
    pub fn value_promql(&self) -> String {
        let by = by_clause(self.by);
        let range = self.range();
        match self.query {
            Query::Ratio { num, den, den_by } => {
                let matching = if den_by == self.by {
                    String::new()
                } else {
                    format!(" on ({}) group_left", den_by.join(", "))
                };
                format!(
                    "sum{by} (increase({}{range})) /{matching} sum{} (increase({}{range}))",
                    num.promql(""),
                    by_clause(den_by),
                    den.promql("")
                )
            }
            Query::Quantile { q, histogram } => {
                let mut by_le: Vec<&str> = self.by.to_vec();
                by_le.push("le");
                format!(
                    "histogram_quantile({q}, sum{} (rate({}{range})))",
                    by_clause(&by_le),
                    histogram.promql("_bucket")
                )
            }
            Query::Increase { counter } => {
                format!("sum{by} (increase({}{range}))", counter.promql(""))
            }
            Query::GaugeMin { gauge } => format!("min{by} ({})", gauge.promql("")),
            Query::DerivPerHour { gauge } => {
                format!("max{by} (deriv({}{range})) * 3600", gauge.promql(""))
            }
        }
    }

    /// The alerting rule's expression: the value compared with the threshold, and the guard.
    pub fn promql(&self) -> String {
        let mut expr = format!(
            "({}) {} {}",
            self.value_promql(),
            self.compare.promql(),
            self.threshold
        );
        if let Some(guard) = self.guard {
            let _ = write!(
                expr,
                " and on ({}) (sum{} (increase({}{})) >= {})",
                guard.by.join(", "),
                by_clause(guard.by),
                guard.series.promql(""),
                self.range(),
                guard.min
            );
        }
        expr
    }

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

/// Single-quoted YAML: nothing is special inside but the quote, written twice.
fn yaml_quoted(text: &str) -> String {
    debug_assert!(!text.contains('\n'), "one line: {text}");
    format!("'{}'", text.replace('\'', "''"))
}

/// Where the rules are committed, from the repository's root.
pub const RULES_PATH: &str = "deploy/prometheus/headroom-rules.yml";

/// The Prometheus alerting rules for every signal, as committed in [`RULES_PATH`].
pub fn prometheus_rules_yaml() -> String {
    let mut out = String::from(
        "# Headroom's alerting rules: the signals that say the failure policy is wrong.\n\
         # Generated from crates/headroom-core/src/signals.rs (the table the desktop's lanes\n\
         # panel also evaluates): do not edit. Regenerate with\n\
         #   HEADROOM_WRITE_RULES=1 cargo test -p headroom-core --test signals\n\
         # Tested by deploy/prometheus/headroom-rules.test.yml (promtool test rules).\n\
         groups:\n  - name: headroom-signals\n    rules:\n",
    );
    for s in SIGNALS {
        let _ = writeln!(out, "      - alert: {}", s.alert);
        let _ = writeln!(out, "        expr: {}", yaml_quoted(&s.promql()));
        if s.for_mins > 0 {
            let _ = writeln!(out, "        for: {}m", s.for_mins);
        }
        out.push_str("        labels:\n");
        let _ = writeln!(out, "          severity: {}", s.severity.as_str());
        let _ = writeln!(out, "          signal: {}", s.code);
        out.push_str("        annotations:\n");
        let _ = writeln!(
            out,
            "          summary: {}",
            yaml_quoted(&s.summary_template())
        );
        let _ = writeln!(out, "          meaning: {}", yaml_quoted(s.meaning));
        let _ = writeln!(out, "          action: {}", yaml_quoted(s.action));
    }
    out
}

/// The README's table of signals (markdown rows with a header).
pub fn readme_table() -> String {
    let mut out = String::from(
        "| signal | PromQL | threshold | what it means: what to do |\n|---|---|---|---|\n",
    );
    for s in SIGNALS {
        let _ = writeln!(
            out,
            "| `{}` | `{}` | {} | {}: {} |",
            s.code,
            s.value_promql(),
            s.threshold_en(),
            s.meaning,
            s.action
        );
    }
    out
}

/// A signal over its threshold, for the lanes panel.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct CrossedSignal {
    /// The signal's stable name (`cleanup_fallback_rate`): the UI translates by it.
    pub code: &'static str,
    /// The Prometheus alert for the same signal.
    pub alert: &'static str,
    pub severity: Severity,
    /// The group it is about: `project`, `upstream`, `reason` or `kind`; empty for the lane.
    pub labels: BTreeMap<String, String>,
    pub value: f64,
    pub threshold: f64,
    /// Since when the threshold has been crossed without a break.
    pub since_unix_ms: u64,
    /// "40% of project interview's segments fell back to the rules in the last 10 min: the
    /// text lane is undersized for this project's work — add an upstream ..."
    pub message_en: String,
}

/// Why a scrape could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignalsError {
    #[error("metrics text line {line}: {reason}")]
    Malformed { line: usize, reason: &'static str },
    #[error("a sample at {at_unix_ms} ms is older than the last one at {last_unix_ms} ms")]
    OutOfOrder { at_unix_ms: u64, last_unix_ms: u64 },
}

/// A series' labels, sorted by name.
pub type Labels = Vec<(String, String)>;

fn label_value<'a>(labels: &'a Labels, name: &str) -> &'a str {
    labels
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or("")
}

/// One line of the exposition text.
#[derive(Debug, Clone, PartialEq)]
pub struct ExposedSeries {
    pub name: String,
    pub labels: Labels,
    pub value: f64,
}

/// Reads the Prometheus text format: `name{label="value",...} value [timestamp]` lines;
/// comments (`# HELP`, `# TYPE`, `# EOF`) and blank lines are skipped.
pub fn parse_exposition(text: &str) -> Result<Vec<ExposedSeries>, SignalsError> {
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let malformed = |reason| SignalsError::Malformed {
            line: index + 1,
            reason,
        };
        let name_end = line
            .find(|c: char| c == '{' || c.is_whitespace())
            .ok_or(malformed("no value"))?;
        let name = &line[..name_end];
        if name.is_empty() {
            return Err(malformed("no metric name"));
        }
        let mut rest = &line[name_end..];
        let mut labels = Labels::new();
        if let Some(after) = rest.strip_prefix('{') {
            let (parsed, tail) = parse_labels(after).map_err(malformed)?;
            labels = parsed;
            rest = tail;
        }
        let value = rest
            .split_whitespace()
            .next()
            .ok_or(malformed("no value"))?;
        let value = parse_value(value).ok_or(malformed("the value is not a number"))?;
        labels.sort();
        out.push(ExposedSeries {
            name: name.to_string(),
            labels,
            value,
        });
    }
    Ok(out)
}

/// `a="x",b="y"}` → the labels and what follows the brace.
fn parse_labels(mut s: &str) -> Result<(Labels, &str), &'static str> {
    let mut labels = Labels::new();
    loop {
        s = s.trim_start_matches([',', ' ']);
        if let Some(tail) = s.strip_prefix('}') {
            return Ok((labels, tail));
        }
        let eq = s.find('=').ok_or("a label without a value")?;
        let name = s[..eq].trim();
        if name.is_empty() {
            return Err("a label without a name");
        }
        s = s[eq + 1..]
            .trim_start()
            .strip_prefix('"')
            .ok_or("a label value without quotes")?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err("an unterminated label value"),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err("an unterminated label value"),
                },
                Some((_, c)) => value.push(c),
            }
        };
        labels.push((name.to_string(), value));
        s = &s[end + 1..];
    }
}

fn parse_value(text: &str) -> Option<f64> {
    match text {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => text.parse().ok(),
    }
}

/// One scrape: the series the signals read, by name.
struct Sample {
    at_ms: u64,
    series: HashMap<String, Vec<(Labels, f64)>>,
}

/// Samples closer together than this are merged (the newer kept), which bounds memory:
/// a 30 min window holds at most 362 samples however often the caller observes.
const MIN_SPACING_MS: u64 = 5_000;

/// The in-process evaluator of [`SIGNALS`]: observe `Metrics::render()` now and then (every
/// few seconds), read [`Signals::crossed`].
pub struct Signals {
    retention_ms: u64,
    names: HashSet<String>,
    samples: VecDeque<Sample>,
    /// When each (signal, group) was first seen crossed, without a break since.
    pending: HashMap<(&'static str, Labels), u64>,
    crossed: Vec<CrossedSignal>,
}

impl Default for Signals {
    fn default() -> Self {
        Signals::new()
    }
}

/// A group's values for its `by` labels.
type Group = Vec<String>;

fn group_of(labels: &Labels, by: &[&str]) -> Group {
    by.iter()
        .map(|name| label_value(labels, name).to_string())
        .collect()
}

/// The `sub` labels' values of a group made of the `by` labels.
fn project(group: &Group, by: &[&str], sub: &[&str]) -> Group {
    sub.iter()
        .map(|name| {
            by.iter()
                .position(|b| b == name)
                .map(|i| group[i].clone())
                .unwrap_or_default()
        })
        .collect()
}

impl Signals {
    pub fn new() -> Signals {
        let mut names = HashSet::new();
        let mut longest = 0;
        for s in SIGNALS {
            longest = longest.max(s.window_mins);
            let mut keep = |selector: &Selector, suffix: &str| {
                names.insert(format!("{}{suffix}", selector.metric));
            };
            match &s.query {
                Query::Ratio { num, den, .. } => {
                    keep(num, "");
                    keep(den, "");
                }
                Query::Quantile { histogram, .. } => keep(histogram, "_bucket"),
                Query::Increase { counter } => keep(counter, ""),
                Query::GaugeMin { gauge } | Query::DerivPerHour { gauge } => keep(gauge, ""),
            }
            if let Some(guard) = &s.guard {
                keep(&guard.series, "");
            }
        }
        Signals {
            retention_ms: u64::from(longest) * 60_000,
            names,
            samples: VecDeque::new(),
            pending: HashMap::new(),
            crossed: Vec::new(),
        }
    }

    /// Adds a scrape taken at `at_unix_ms` and re-evaluates every signal. A text that cannot
    /// be read, or one older than the last, changes nothing.
    pub fn observe(
        &mut self,
        at_unix_ms: u64,
        exposition: &str,
    ) -> Result<&[CrossedSignal], SignalsError> {
        if let Some(last) = self.samples.back() {
            if at_unix_ms < last.at_ms {
                return Err(SignalsError::OutOfOrder {
                    at_unix_ms,
                    last_unix_ms: last.at_ms,
                });
            }
        }
        let mut series: HashMap<String, Vec<(Labels, f64)>> = HashMap::new();
        for s in parse_exposition(exposition)? {
            if self.names.contains(&s.name) {
                series.entry(s.name).or_default().push((s.labels, s.value));
            }
        }
        let sample = Sample {
            at_ms: at_unix_ms,
            series,
        };
        // The newest sample replaces the one before it while that one is too close to its
        // predecessor: every sample but the newest is at least MIN_SPACING_MS from the next.
        let len = self.samples.len();
        if len >= 2 && self.samples[len - 1].at_ms - self.samples[len - 2].at_ms < MIN_SPACING_MS {
            self.samples[len - 1] = sample;
        } else {
            self.samples.push_back(sample);
        }
        let oldest = at_unix_ms.saturating_sub(self.retention_ms);
        while self.samples.front().is_some_and(|s| s.at_ms < oldest) {
            self.samples.pop_front();
        }
        self.evaluate(at_unix_ms);
        Ok(&self.crossed)
    }

    /// The signals crossed at the last observation, in [`SIGNALS`]' order.
    pub fn crossed(&self) -> &[CrossedSignal] {
        &self.crossed
    }

    /// How many samples are kept (bounded by the longest window).
    pub fn samples_kept(&self) -> usize {
        self.samples.len()
    }

    fn window(&self, now: u64, mins: u32) -> impl Iterator<Item = &Sample> {
        let start = now.saturating_sub(u64::from(mins) * 60_000);
        self.samples.iter().filter(move |s| s.at_ms >= start)
    }

    /// Each matching series' increase over the window; series seen fewer than twice are left
    /// out.
    fn increases(
        &self,
        now: u64,
        mins: u32,
        name: &str,
        selector: &Selector,
    ) -> Vec<(Labels, f64)> {
        let mut state: HashMap<&Labels, (f64, f64, usize)> = HashMap::new();
        for sample in self.window(now, mins) {
            for (labels, value) in sample.series.get(name).into_iter().flatten() {
                if !selector.matches(labels) {
                    continue;
                }
                let entry = state.entry(labels).or_insert((*value, 0.0, 0));
                if entry.2 > 0 {
                    // A drop is a restart: the counter began again from zero.
                    entry.1 += if *value >= entry.0 {
                        value - entry.0
                    } else {
                        *value
                    };
                }
                entry.0 = *value;
                entry.2 += 1;
            }
        }
        state
            .into_iter()
            .filter(|(_, (_, _, seen))| *seen >= 2)
            .map(|(labels, (_, increase, _))| (labels.clone(), increase))
            .collect()
    }

    fn summed(&self, now: u64, mins: u32, selector: &Selector, by: &[&str]) -> HashMap<Group, f64> {
        let mut out = HashMap::new();
        for (labels, increase) in self.increases(now, mins, selector.metric, selector) {
            *out.entry(group_of(&labels, by)).or_insert(0.0) += increase;
        }
        out
    }

    fn values(&self, s: &Signal, now: u64) -> HashMap<Group, f64> {
        let mins = s.window_mins;
        match s.query {
            Query::Ratio { num, den, den_by } => {
                let num = self.summed(now, mins, &num, s.by);
                let den = self.summed(now, mins, &den, den_by);
                num.into_iter()
                    .filter_map(|(group, n)| {
                        let d = den.get(&project(&group, s.by, den_by))?;
                        Some((group, n / d))
                    })
                    .collect()
            }
            Query::Quantile { q, histogram } => {
                let name = format!("{}_bucket", histogram.metric);
                let mut buckets: HashMap<Group, Vec<(f64, f64)>> = HashMap::new();
                for (labels, increase) in self.increases(now, mins, &name, &histogram) {
                    let Some(le) = parse_value(label_value(&labels, "le")) else {
                        continue;
                    };
                    buckets
                        .entry(group_of(&labels, s.by))
                        .or_default()
                        .push((le, increase));
                }
                buckets
                    .into_iter()
                    .map(|(group, b)| (group, bucket_quantile(q, b)))
                    .collect()
            }
            Query::Increase { counter } => self.summed(now, mins, &counter, s.by),
            Query::GaugeMin { gauge } => {
                let mut out: HashMap<Group, f64> = HashMap::new();
                let Some(latest) = self.samples.back() else {
                    return out;
                };
                for (labels, value) in latest.series.get(gauge.metric).into_iter().flatten() {
                    if gauge.matches(labels) {
                        let entry = out.entry(group_of(labels, s.by)).or_insert(*value);
                        *entry = entry.min(*value);
                    }
                }
                out
            }
            Query::DerivPerHour { gauge } => {
                let mut points: HashMap<&Labels, Vec<(f64, f64)>> = HashMap::new();
                for sample in self.window(now, mins) {
                    let t = (sample.at_ms as f64 - now as f64) / 1000.0;
                    for (labels, value) in sample.series.get(gauge.metric).into_iter().flatten() {
                        if gauge.matches(labels) {
                            points.entry(labels).or_default().push((t, *value));
                        }
                    }
                }
                let mut out: HashMap<Group, f64> = HashMap::new();
                for (labels, points) in points {
                    let Some(slope) = slope(&points) else {
                        continue;
                    };
                    let entry = out
                        .entry(group_of(labels, s.by))
                        .or_insert(f64::NEG_INFINITY);
                    *entry = entry.max(slope * 3600.0);
                }
                out
            }
        }
    }

    fn evaluate(&mut self, now: u64) {
        let mut crossed = Vec::new();
        let mut still_pending = HashMap::new();
        for s in SIGNALS {
            let guard = s
                .guard
                .map(|g| (g, self.summed(now, s.window_mins, &g.series, g.by)));
            let mut values: Vec<(Group, f64)> = self.values(s, now).into_iter().collect();
            values.sort_by(|a, b| a.0.cmp(&b.0));
            for (group, value) in values {
                if !s.compare.crossed(value, s.threshold) {
                    continue;
                }
                if let Some((g, sums)) = &guard {
                    let enough = sums
                        .get(&project(&group, s.by, g.by))
                        .is_some_and(|sum| *sum >= g.min);
                    if !enough {
                        continue;
                    }
                }
                let labels: Labels =
                    s.by.iter()
                        .zip(&group)
                        .map(|(k, v)| (k.to_string(), v.clone()))
                        .collect();
                let key = (s.code, labels);
                let since = self.pending.get(&key).copied().unwrap_or(now);
                still_pending.insert(key.clone(), since);
                if now - since < u64::from(s.for_mins) * 60_000 {
                    continue;
                }
                let labels: BTreeMap<String, String> = key.1.into_iter().collect();
                crossed.push(CrossedSignal {
                    code: s.code,
                    alert: s.alert,
                    severity: s.severity,
                    message_en: s.message_en(value, &labels),
                    labels,
                    value,
                    threshold: s.threshold,
                    since_unix_ms: since,
                });
            }
        }
        self.pending = still_pending;
        self.crossed = crossed;
    }
}

/// Prometheus's `histogram_quantile` over (upper bound, cumulative count) buckets.
fn bucket_quantile(q: f64, mut buckets: Vec<(f64, f64)>) -> f64 {
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    buckets.dedup_by(|later, earlier| {
        let same = later.0 == earlier.0;
        if same {
            earlier.1 += later.1;
        }
        same
    });
    if buckets.len() < 2 || buckets.last().map(|b| b.0) != Some(f64::INFINITY) {
        return f64::NAN;
    }
    // Counts can dip where buckets were read at slightly different moments.
    let mut max = 0.0_f64;
    for bucket in &mut buckets {
        max = max.max(bucket.1);
        bucket.1 = max;
    }
    let observations = buckets[buckets.len() - 1].1;
    if observations == 0.0 {
        return f64::NAN;
    }
    let mut rank = q * observations;
    let b = buckets[..buckets.len() - 1]
        .iter()
        .position(|bucket| bucket.1 >= rank)
        .unwrap_or(buckets.len() - 1);
    if b == buckets.len() - 1 {
        return buckets[buckets.len() - 2].0;
    }
    if b == 0 && buckets[0].0 <= 0.0 {
        return buckets[0].0;
    }
    let (mut start, end, mut count) = (0.0, buckets[b].0, buckets[b].1);
    if b > 0 {
        start = buckets[b - 1].0;
        count -= buckets[b - 1].1;
        rank -= buckets[b - 1].1;
    }
    start + (end - start) * (rank / count)
}

/// The least-squares slope of (seconds, value) points, as Prometheus's `deriv`.
fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mean_t = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_v = points.iter().map(|p| p.1).sum::<f64>() / n;
    let cov: f64 = points.iter().map(|p| (p.0 - mean_t) * (p.1 - mean_v)).sum();
    let var: f64 = points.iter().map(|p| (p.0 - mean_t).powi(2)).sum();
    (var > 0.0).then(|| cov / var)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{Lane, RejectReason};
    use crate::metrics::{Metrics, PieceOrigin};
    use std::time::Duration;

    const T0: u64 = 1_700_000_000_000;
    const MINUTE: u64 = 60_000;
    const MIB: f64 = 1024.0 * 1024.0;

    fn exposition(series: &[(String, f64)]) -> String {
        let mut out = String::from("# HELP synthetic test series\n");
        for (series, value) in series {
            let _ = writeln!(out, "{series} {value}");
        }
        out.push_str("# EOF\n");
        out
    }

    /// Observes `series(m)` once a minute from minute 0 to `minutes`.
    fn feed(minutes: u64, series: impl Fn(u64) -> Vec<(String, f64)>) -> Signals {
        let mut signals = Signals::new();
        for m in 0..=minutes {
            signals
                .observe(T0 + m * MINUTE, &exposition(&series(m)))
                .unwrap();
        }
        signals
    }

    fn crossed<'a>(signals: &'a Signals, code: &str) -> Vec<&'a CrossedSignal> {
        signals
            .crossed()
            .iter()
            .filter(|c| c.code == code)
            .collect()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn s(series: &str, value: f64) -> (String, f64) {
        (series.to_string(), value)
    }

    fn signal(code: &str) -> &'static Signal {
        SIGNALS.iter().find(|s| s.code == code).unwrap()
    }

    /// Text requests at `submitted` a minute, `full` of them refused as text_lane_full.
    fn rejections(m: u64, submitted: f64, full: f64) -> Vec<(String, f64)> {
        let m = m as f64;
        vec![
            s(r#"headroom_submitted_total{lane="text"}"#, submitted * m),
            s(
                r#"headroom_rejections_total{lane="text",reason="text_lane_full"}"#,
                full * m,
            ),
            s(
                r#"headroom_rejections_total{lane="text",reason="input_too_long"}"#,
                0.0,
            ),
            s(
                r#"headroom_rejections_total{lane="text",reason="cancelled"}"#,
                submitted / 2.0 * m,
            ),
            s(
                r#"headroom_rejections_total{lane="audio",reason="audio_lane_full"}"#,
                submitted * m,
            ),
        ]
    }

    #[test]
    fn text_rejection_rate_crosses_per_reason_after_five_minutes() {
        let signals = feed(20, |m| rejections(m, 10.0, 1.0));
        let found = crossed(&signals, "text_rejection_rate");
        assert_eq!(found.len(), 1, "{found:?}");
        let c = found[0];
        assert_eq!(c.labels, labels(&[("reason", "text_lane_full")]));
        assert!((c.value - 0.1).abs() < 1e-9, "{}", c.value);
        assert_eq!(c.threshold, 0.05);
        assert_eq!(c.severity, Severity::Warning);
        assert!(
            c.message_en.starts_with(
                "10% of text requests were refused with text_lane_full in the last 10 min: \
                 the text lane refuses work"
            ),
            "{}",
            c.message_en
        );
        // Enough requests from minute 2 on; crossed for five minutes at minute 7.
        assert_eq!(c.since_unix_ms, T0 + 2 * MINUTE);
        assert!(crossed(
            &feed(6, |m| rejections(m, 10.0, 1.0)),
            "text_rejection_rate"
        )
        .is_empty());
        assert_eq!(
            crossed(
                &feed(7, |m| rejections(m, 10.0, 1.0)),
                "text_rejection_rate"
            )
            .len(),
            1
        );
    }

    #[test]
    fn text_rejection_rate_stays_quiet_below_the_threshold_or_the_volume() {
        // 4%: under 5%.
        assert!(crossed(
            &feed(20, |m| rejections(m, 100.0, 4.0)),
            "text_rejection_rate"
        )
        .is_empty());
        // Every request refused, but only 10 in 10 minutes: too few to say anything.
        assert!(crossed(
            &feed(20, |m| rejections(m, 1.0, 1.0)),
            "text_rejection_rate"
        )
        .is_empty());
        // Cancellations (half the requests here) are the user's choice, never a signal.
        assert!(crossed(
            &feed(20, |m| rejections(m, 10.0, 0.0)),
            "text_rejection_rate"
        )
        .is_empty());
    }

    #[test]
    fn a_restarted_counter_counts_from_zero_instead_of_going_negative() {
        // Headroom restarts at minute 12: every counter starts again and goes on at the same
        // pace. Without reset handling the drop would read as -110 requests.
        let restarted = |m: u64| {
            let since = if m >= 12 { m - 11 } else { m };
            rejections(since, 10.0, 1.0)
        };
        let signals = feed(20, restarted);
        let found = crossed(&signals, "text_rejection_rate");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!((found[0].value - 0.1).abs() < 1e-9, "{}", found[0].value);
        // A restart that drops every rejection to zero and keeps none after: the ratio falls.
        let healed = |m: u64| {
            if m >= 12 {
                rejections(m - 11, 10.0, 0.0)
            } else {
                rejections(m, 10.0, 1.0)
            }
        };
        let found = feed(22, healed);
        assert!(
            crossed(&found, "text_rejection_rate").is_empty(),
            "{:?}",
            found.crossed()
        );
    }

    #[test]
    fn missing_series_raise_nothing() {
        // Rejections without the requests they are a share of.
        let only_rejections = |m: u64| {
            rejections(m, 10.0, 5.0)
                .into_iter()
                .filter(|(name, _)| !name.starts_with("headroom_submitted_total"))
                .collect()
        };
        assert!(feed(20, only_rejections).crossed().is_empty());
        assert!(feed(20, |_| Vec::new()).crossed().is_empty());
        // A real registry with nothing happening: every zero series, nothing crossed.
        let metrics = Metrics::new();
        let mut signals = Signals::new();
        for m in 0..=30 {
            signals.observe(T0 + m * MINUTE, &metrics.render()).unwrap();
        }
        assert!(signals.crossed().is_empty(), "{:?}", signals.crossed());
        // One sample is not a rate.
        let mut signals = Signals::new();
        signals
            .observe(T0, &exposition(&rejections(10, 10.0, 10.0)))
            .unwrap();
        assert!(signals.crossed().is_empty());
    }

    fn cleanup(m: u64) -> Vec<(String, f64)> {
        let m = m as f64;
        let piece = |project: &str, source: &str, per_minute: f64| {
            s(
                &format!(
                    "headroom_cleanup_pieces_total{{project=\"{project}\",source=\"{source}\"}}"
                ),
                per_minute * m,
            )
        };
        let attempts = |project: &str, per_minute: f64| {
            s(
                &format!("headroom_cleanup_attempts_total{{project=\"{project}\"}}"),
                per_minute * m,
            )
        };
        vec![
            // alpha: 4 of 10 segments from the rules, 8 model attempts a minute.
            piece("alpha", "rules", 4.0),
            piece("alpha", "model", 6.0),
            piece("alpha", "unchanged", 10.0),
            attempts("alpha", 8.0),
            // beta: 1 of 10 from the rules.
            piece("beta", "rules", 1.0),
            piece("beta", "model", 9.0),
            attempts("beta", 10.0),
            // gamma: cleanup off, all rules by choice, no attempt.
            piece("gamma", "rules", 10.0),
            attempts("gamma", 0.0),
            // delta: two attempts a segment.
            piece("delta", "model", 8.0),
            piece("delta", "rules", 2.0),
            piece("delta", "unchanged", 5.0),
            attempts("delta", 20.0),
        ]
    }

    #[test]
    fn cleanup_fallback_rate_crosses_per_project_that_tried_the_model() {
        let signals = feed(20, cleanup);
        let found = crossed(&signals, "cleanup_fallback_rate");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].labels, labels(&[("project", "alpha")]));
        assert!((found[0].value - 0.4).abs() < 1e-9);
        assert!(
            found[0].message_en.starts_with(
                "40% of project alpha's segments fell back to the rules in the last 10 min: \
                 the text lane is undersized for this project's work — add an upstream"
            ),
            "{}",
            found[0].message_en
        );
    }

    #[test]
    fn cleanup_retry_amplification_crosses_per_project() {
        let signals = feed(20, cleanup);
        let found = crossed(&signals, "cleanup_retry_amplification");
        // delta: 20 attempts for 10 segments that needed cleaning; alpha 0.8, beta 1.0.
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].labels, labels(&[("project", "delta")]));
        assert!((found[0].value - 2.0).abs() < 1e-9);
        assert!(
            found[0]
                .message_en
                .starts_with("project delta made 2.00 text-model requests per segment"),
            "{}",
            found[0].message_en
        );
    }

    fn fleet(m: u64, failed_over: f64) -> Vec<(String, f64)> {
        let m = m as f64;
        vec![
            s(r#"headroom_dispatched_total{lane="text"}"#, 10.0 * m),
            s(
                r#"headroom_upstream_requests_total{upstream="a",result="answered"}"#,
                10.0 * m,
            ),
            s(
                r#"headroom_upstream_requests_total{upstream="b",result="unavailable"}"#,
                failed_over * m,
            ),
        ]
    }

    #[test]
    fn retry_amplification_crosses_when_requests_fail_over() {
        let found = feed(20, |m| fleet(m, 8.0));
        let found = crossed(&found, "retry_amplification");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].labels.is_empty());
        assert!((found[0].value - 1.8).abs() < 1e-9);
        assert!(found[0]
            .message_en
            .starts_with("each text request went to the upstreams 1.80 times on average"));
        assert!(crossed(&feed(20, |m| fleet(m, 2.0)), "retry_amplification").is_empty());
    }

    #[test]
    fn upstream_failure_rate_crosses_per_upstream() {
        let series = |m: u64| {
            let m = m as f64;
            vec![
                s(
                    r#"headroom_upstream_requests_total{upstream="a",result="answered"}"#,
                    10.0 * m,
                ),
                s(
                    r#"headroom_upstream_requests_total{upstream="a",result="error"}"#,
                    2.0 * m,
                ),
                s(
                    r#"headroom_upstream_requests_total{upstream="b",result="answered"}"#,
                    20.0 * m,
                ),
                s(
                    r#"headroom_upstream_requests_total{upstream="b",result="busy"}"#,
                    m,
                ),
            ]
        };
        let signals = feed(20, series);
        let found = crossed(&signals, "upstream_failure_rate");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].labels, labels(&[("upstream", "a")]));
        assert!((found[0].value - 2.0 / 12.0).abs() < 1e-9);
        assert!(found[0]
            .message_en
            .starts_with("16.67% of the requests sent to upstream a failed"));
    }

    #[test]
    fn deadline_misses_cross_per_kind() {
        let series = |m: u64| {
            let m = m as f64;
            vec![
                s(r#"headroom_submitted_total{lane="text"}"#, 50.0 * m),
                s(
                    r#"headroom_deadline_misses_total{lane="text",kind="first_chunk"}"#,
                    2.0 * m,
                ),
                s(
                    r#"headroom_deadline_misses_total{lane="text",kind="queue_wait"}"#,
                    0.5 * m,
                ),
                s(
                    r#"headroom_deadline_misses_total{lane="text",kind="total"}"#,
                    0.0,
                ),
            ]
        };
        let signals = feed(20, series);
        let found = crossed(&signals, "deadline_miss_rate");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].labels, labels(&[("kind", "first_chunk")]));
        assert!(found[0].message_en.starts_with(
            "4% of text requests missed their first_chunk deadline in the last 10 min"
        ));
    }

    /// The real registry's queue-wait histogram, ten text requests a minute waiting as `waits`.
    fn queue_waits(waits: &'static [f64]) -> impl Fn(u64) -> String {
        let metrics = Metrics::new();
        let mut renders = vec![metrics.render()];
        for _ in 0..20 {
            for wait in waits {
                metrics.observe_queue_wait(Lane::Text, Duration::from_secs_f64(*wait));
            }
            renders.push(metrics.render());
        }
        move |m| renders[m as usize].clone()
    }

    fn feed_texts(minutes: u64, text: impl Fn(u64) -> String) -> Signals {
        let mut signals = Signals::new();
        for m in 0..=minutes {
            signals.observe(T0 + m * MINUTE, &text(m)).unwrap();
        }
        signals
    }

    #[test]
    fn queue_wait_p95_is_interpolated_as_histogram_quantile_does() {
        // A minute's waits: 1 under 0.512 s, 1 under 1.024, 3 under 2.048, 5 under 4.096.
        // Over 10 min: 10, 20, 50, 100 → the 95th of 100 is 45/50 into (2.048, 4.096].
        const WAITS: &[f64] = &[0.3, 0.8, 1.5, 1.5, 1.5, 3.0, 3.0, 3.0, 3.0, 3.0];
        let signals = feed_texts(20, queue_waits(WAITS));
        let found = crossed(&signals, "text_queue_wait_p95");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            (found[0].value - (2.048 + 2.048 * 0.9)).abs() < 1e-9,
            "{}",
            found[0].value
        );
        assert!(
            found[0].message_en.starts_with(
                "95% of text requests waited up to 3.89 s for a slot in the last 10 min"
            ),
            "{}",
            found[0].message_en
        );
        const QUICK: &[f64] = &[0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.3, 0.4, 0.4, 0.5];
        assert!(crossed(&feed_texts(20, queue_waits(QUICK)), "text_queue_wait_p95").is_empty());
        // Long waits, but one request a minute: too few.
        const FEW: &[f64] = &[9.0];
        assert!(crossed(&feed_texts(20, queue_waits(FEW)), "text_queue_wait_p95").is_empty());
    }

    #[test]
    fn bucket_quantile_matches_prometheus_edge_cases() {
        let inf = f64::INFINITY;
        // The rank in the +Inf bucket: the highest finite bound.
        assert_eq!(bucket_quantile(0.95, vec![(1.0, 1.0), (inf, 10.0)]), 1.0);
        // No observations, or no +Inf bucket: no value.
        assert!(bucket_quantile(0.95, vec![(1.0, 0.0), (inf, 0.0)]).is_nan());
        assert!(bucket_quantile(0.95, vec![(1.0, 1.0), (2.0, 2.0)]).is_nan());
        // The first bucket starts at zero.
        assert_eq!(bucket_quantile(0.5, vec![(2.0, 10.0), (inf, 10.0)]), 1.0);
        // Counts that dip are made monotonic: (2, 1) reads as (2, 2).
        assert_eq!(
            bucket_quantile(0.5, vec![(1.0, 2.0), (2.0, 1.0), (3.0, 6.0), (inf, 8.0)]),
            2.5
        );
    }

    fn health(m: u64, b_up: bool) -> Vec<(String, f64)> {
        vec![
            s(r#"headroom_upstream_up{upstream="a"}"#, 1.0),
            s(
                r#"headroom_upstream_up{upstream="b"}"#,
                if b_up { 1.0 } else { 0.0 },
            ),
            s(
                r#"headroom_upstream_health_changes_total{upstream="a"}"#,
                // a comes and goes every five minutes: a change each 5 min.
                (m / 5) as f64,
            ),
            s(
                r#"headroom_upstream_health_changes_total{upstream="b"}"#,
                if m >= 10 { 2.0 } else { 0.0 },
            ),
        ]
    }

    #[test]
    fn an_upstream_down_for_two_minutes_is_critical() {
        // b is down from minute 10.
        let down_at_10 = |m| health(m, m < 10);
        assert!(crossed(&feed(11, down_at_10), "upstream_down").is_empty());
        let signals = feed(12, down_at_10);
        let found = crossed(&signals, "upstream_down");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].labels, labels(&[("upstream", "b")]));
        assert_eq!(found[0].severity, Severity::Critical);
        assert!(found[0]
            .message_en
            .starts_with("upstream b has been down for at least 2 min: its requests go to"));
        // Back at minute 12: over at once.
        let back = |m| health(m, !(10..12).contains(&m));
        assert!(crossed(&feed(12, back), "upstream_down").is_empty());
        // Down again at 13: the two minutes count from there.
        let again = |m| health(m, !(10..12).contains(&m) && m < 13);
        assert!(crossed(&feed(14, again), "upstream_down").is_empty());
        assert_eq!(crossed(&feed(15, again), "upstream_down").len(), 1);
    }

    #[test]
    fn an_upstream_that_flaps_is_named() {
        let signals = feed(30, |m| health(m, true));
        let found = crossed(&signals, "upstream_flapping");
        // a: six changes in 30 minutes; b: two.
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].labels, labels(&[("upstream", "a")]));
        assert_eq!(found[0].value, 6.0);
        assert!(found[0]
            .message_en
            .starts_with("upstream a changed health 6 times in the last 30 min"));
    }

    #[test]
    fn a_rising_gpu_memory_floor_is_a_leak_and_a_flat_one_is_not() {
        let base = 6.0 * 1024.0 * MIB;
        // 512 MiB per hour, sampled each minute.
        let rising = |m: u64| {
            vec![s(
                "headroom_gpu_memory_floor_bytes",
                base + 512.0 * MIB * m as f64 / 60.0,
            )]
        };
        // Crossed from minute 1; reported after 15 minutes.
        assert!(crossed(&feed(15, rising), "gpu_memory_floor_rising").is_empty());
        let signals = feed(40, rising);
        let found = crossed(&signals, "gpu_memory_floor_rising");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            (found[0].value - 512.0 * MIB).abs() < 1.0,
            "{}",
            found[0].value
        );
        assert!(found[0]
            .message_en
            .starts_with("the GPU memory floor rose 512MiB per hour over the last 30 min"));
        // Allocator retention: up and down by 300 MiB, no trend.
        let flat = |m: u64| {
            let wobble = if m.is_multiple_of(2) {
                300.0 * MIB
            } else {
                0.0
            };
            vec![s("headroom_gpu_memory_floor_bytes", base + wobble)]
        };
        assert!(crossed(&feed(60, flat), "gpu_memory_floor_rising").is_empty());
    }

    /// The registry's own series, driven through its API: the names and labels the table
    /// reads are the ones `Metrics` exports.
    #[test]
    fn the_registry_exports_what_the_signals_read() {
        let metrics = Metrics::new();
        let mut signals = Signals::new();
        let gib = 1024.0 * MIB;
        for m in 0..=40u64 {
            signals.observe(T0 + m * MINUTE, &metrics.render()).unwrap();
            // Each minute: 20 text requests, 4 refused past their deadline, 16 sent upstream;
            // upstream b fails the 12 it gets first, and a answers every one.
            for i in 0..20 {
                metrics.count_submitted(Lane::Text);
                if i < 4 {
                    metrics.count_rejection(Lane::Text, RejectReason::DeadlineExceeded);
                    continue;
                }
                metrics.count_dispatched(Lane::Text);
                if i % 4 != 3 {
                    metrics.count_upstream_request("b", "error");
                }
                metrics.count_upstream_request("a", "answered");
            }
            // Project "interview": 10 segments, 4 from the rules after 2 attempts each.
            for i in 0..10 {
                metrics.count_cleanup_attempt("interview");
                let origin = if i < 4 {
                    metrics.count_cleanup_attempt("interview");
                    PieceOrigin::Rules
                } else {
                    PieceOrigin::Model
                };
                metrics.count_cleanup_piece("interview", origin);
            }
            metrics.set_upstream_up("a", true, false, &["answered", "error"]);
            // b goes down for a minute every 4 minutes.
            let changed = m % 4 == 3 || (m % 4 == 0 && m > 0);
            metrics.set_upstream_up("b", m % 4 != 3, changed, &["answered", "error"]);
            let floor = 4.0 * gib + 512.0 * MIB * m as f64 / 60.0;
            metrics.set_gpu_memory(floor as u64 + (gib as u64), floor as u64);
        }
        let found: Vec<(&str, Vec<&str>)> = signals
            .crossed()
            .iter()
            .map(|c| (c.code, c.labels.values().map(String::as_str).collect()))
            .collect();
        assert_eq!(
            found,
            vec![
                ("text_rejection_rate", vec!["deadline_exceeded"]),
                ("cleanup_fallback_rate", vec!["interview"]),
                ("retry_amplification", vec![]),
                ("upstream_flapping", vec!["b"]),
                ("gpu_memory_floor_rising", vec![]),
                ("upstream_failure_rate", vec!["b"]),
            ]
        );
        let value = |code: &str| crossed(&signals, code)[0].value;
        assert!((value("text_rejection_rate") - 0.2).abs() < 1e-9);
        assert!((value("cleanup_fallback_rate") - 0.4).abs() < 1e-9);
        // 28 upstream requests for 16 dispatched.
        assert!((value("retry_amplification") - 28.0 / 16.0).abs() < 1e-9);
        assert!((value("upstream_failure_rate") - 1.0).abs() < 1e-9);
    }

    #[test]
    fn memory_stays_bounded_however_often_it_observes() {
        let mut signals = Signals::new();
        for second in 0..2_400u64 {
            let text = exposition(&rejections(second / 60, 10.0, 1.0));
            signals.observe(T0 + second * 1000, &text).unwrap();
        }
        // 30 min at one sample per 5 s, plus the newest.
        assert!(signals.samples_kept() <= 362, "{}", signals.samples_kept());
        assert_eq!(crossed(&signals, "text_rejection_rate").len(), 1);
    }

    #[test]
    fn scrapes_out_of_order_or_malformed_are_refused() {
        let mut signals = Signals::new();
        signals.observe(T0, "").unwrap();
        assert_eq!(
            signals.observe(T0 - 1, ""),
            Err(SignalsError::OutOfOrder {
                at_unix_ms: T0 - 1,
                last_unix_ms: T0
            })
        );
        assert_eq!(
            signals
                .observe(T0 + 1, "# HELP x\nheadroom_up{a=\"b} 1\n")
                .unwrap_err(),
            SignalsError::Malformed {
                line: 2,
                reason: "an unterminated label value"
            }
        );
        assert!(matches!(
            parse_exposition("headroom_up one"),
            Err(SignalsError::Malformed { line: 1, .. })
        ));
        assert!(matches!(
            parse_exposition("headroom_up"),
            Err(SignalsError::Malformed { line: 1, .. })
        ));
    }

    #[test]
    fn the_exposition_format_is_read_with_escapes_infinities_and_timestamps() {
        let text = "# TYPE x counter\n\
                    x_total{b=\"say \\\"hi\\\"\",a=\"back\\\\slash\\nline\"} 3 1700000000000\n\
                    y_bucket{le=\"+Inf\"} +Inf\n\
                    z 1.5e3\n\
                    \n# EOF\n";
        let series = parse_exposition(text).unwrap();
        assert_eq!(
            series,
            vec![
                ExposedSeries {
                    name: "x_total".into(),
                    labels: vec![
                        ("a".into(), "back\\slash\nline".into()),
                        ("b".into(), "say \"hi\"".into())
                    ],
                    value: 3.0
                },
                ExposedSeries {
                    name: "y_bucket".into(),
                    labels: vec![("le".into(), "+Inf".into())],
                    value: f64::INFINITY
                },
                ExposedSeries {
                    name: "z".into(),
                    labels: vec![],
                    value: 1500.0
                },
            ]
        );
        // The registry's own text reads whole.
        let metrics = Metrics::new();
        metrics.observe_queue_wait(Lane::Text, Duration::from_millis(3));
        assert!(parse_exposition(&metrics.render()).unwrap().len() > 40);
    }

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
    fn promql_is_written_from_the_table() {
        assert_eq!(
            signal("cleanup_fallback_rate").promql(),
            "(sum by (project) (increase(headroom_cleanup_pieces_total{source=\"rules\"}[10m])) \
             / sum by (project) (increase(headroom_cleanup_pieces_total{source!=\"unchanged\"}[10m]))) \
             > 0.2 and on (project) (sum by (project) (increase(headroom_cleanup_attempts_total[10m])) >= 10)"
        );
        assert_eq!(
            signal("text_rejection_rate").value_promql(),
            "sum by (reason) (increase(headroom_rejections_total{lane=\"text\",reason!=\"cancelled\"}[10m])) \
             / on () group_left sum (increase(headroom_submitted_total{lane=\"text\"}[10m]))"
        );
        assert_eq!(
            signal("text_queue_wait_p95").value_promql(),
            "histogram_quantile(0.95, sum by (le) (rate(headroom_queue_wait_seconds_bucket{lane=\"text\"}[10m])))"
        );
        assert_eq!(
            signal("upstream_down").promql(),
            "(min by (upstream) (headroom_upstream_up)) < 1"
        );
        assert_eq!(
            signal("gpu_memory_floor_rising").promql(),
            "(max (deriv(headroom_gpu_memory_floor_bytes[30m])) * 3600) > 268435456"
        );
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

    #[test]
    fn the_rules_hold_every_signal_once() {
        let yaml = prometheus_rules_yaml();
        for s in SIGNALS {
            assert_eq!(yaml.matches(&format!("- alert: {}\n", s.alert)).count(), 1);
            assert!(yaml.contains(&format!("signal: {}\n", s.code)));
        }
        assert!(yaml.contains(
            "summary: '{{ $value | humanizePercentage }} of project {{ $labels.project }}''s \
             segments fell back to the rules in the last 10 min'"
        ));
        let table = readme_table();
        assert_eq!(table.lines().count(), SIGNALS.len() + 2);
    }
}
