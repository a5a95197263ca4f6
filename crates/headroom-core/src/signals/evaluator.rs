//! The in-process evaluator: timestamped samples of the metrics text over a sliding window,
//! and the same ratios, increases, quantiles and slopes as the alerting rules.

use super::exposition::{label_value, parse_exposition, parse_value, Labels};
use super::{Query, Selector, Severity, Signal, SignalsError, Unit, SIGNALS};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

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
    /// How `value` reads (the window words it in its language from these, the code and the
    /// labels).
    pub unit: Unit,
    /// The window the value is measured over, and how long it has to hold, in minutes.
    pub window_mins: u32,
    pub for_mins: u32,
    /// "40% of project interview's segments fell back to the rules in the last 10 min: the
    /// text lane is undersized for this project's work — add an upstream ..."
    pub message_en: String,
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
                    unit: s.unit,
                    window_mins: s.window_mins,
                    for_mins: s.for_mins,
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
    use std::fmt::Write as _;
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
                r#"headroom_upstream_requests_total{lane="text",upstream="a",result="answered"}"#,
                10.0 * m,
            ),
            s(
                r#"headroom_upstream_requests_total{lane="text",upstream="b",result="unavailable"}"#,
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
                    r#"headroom_upstream_requests_total{lane="text",upstream="a",result="answered"}"#,
                    10.0 * m,
                ),
                s(
                    r#"headroom_upstream_requests_total{lane="text",upstream="a",result="error"}"#,
                    2.0 * m,
                ),
                s(
                    r#"headroom_upstream_requests_total{lane="text",upstream="b",result="answered"}"#,
                    20.0 * m,
                ),
                s(
                    r#"headroom_upstream_requests_total{lane="text",upstream="b",result="busy"}"#,
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
            s(r#"headroom_upstream_up{lane="text",upstream="a"}"#, 1.0),
            s(
                r#"headroom_upstream_up{lane="text",upstream="b"}"#,
                if b_up { 1.0 } else { 0.0 },
            ),
            s(
                r#"headroom_upstream_health_changes_total{lane="text",upstream="a"}"#,
                // a comes and goes every five minutes: a change each 5 min.
                (m / 5) as f64,
            ),
            s(
                r#"headroom_upstream_health_changes_total{lane="text",upstream="b"}"#,
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
                    metrics.count_upstream_request(Lane::Text, "b", "error");
                }
                metrics.count_upstream_request(Lane::Text, "a", "answered");
                // A batch's transcription server "w" fails every piece and is down, and
                // flaps: the audio lane's upstream, which no text signal reads.
                metrics.count_upstream_request(Lane::Audio, "w", "unavailable");
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
            metrics.set_upstream_up(Lane::Text, "a", true, false, &["answered", "error"]);
            metrics.set_upstream_up(Lane::Audio, "w", m % 2 == 0, m > 0, &["answered"]);
            // b goes down for a minute every 4 minutes.
            let changed = m % 4 == 3 || (m % 4 == 0 && m > 0);
            metrics.set_upstream_up(Lane::Text, "b", m % 4 != 3, changed, &["answered", "error"]);
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
}
