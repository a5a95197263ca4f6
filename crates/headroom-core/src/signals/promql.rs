//! The PromQL of each signal, written from the table: the value's query, and the alerting
//! rule's expression with its threshold and guard.

use super::{Query, Signal};
use std::fmt::Write as _;

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
}

#[cfg(test)]
mod tests {
    use super::super::signal;

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
            "(min by (upstream) (headroom_upstream_up{lane=\"text\"})) < 1"
        );
        assert_eq!(
            signal("gpu_memory_floor_rising").promql(),
            "(max (deriv(headroom_gpu_memory_floor_bytes[30m])) * 3600) > 268435456"
        );
    }
}
