//! What the table renders for people and Prometheus: the alerting rules (committed as
//! [`RULES_PATH`]) and the README's table.

use super::SIGNALS;
use std::fmt::Write as _;

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
         # Generated from crates/headroom-core/src/signals/mod.rs (the table the desktop's lanes\n\
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

#[cfg(test)]
mod tests {
    use super::*;

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
