//! Reading the Prometheus text format that [`crate::metrics::Metrics::render`] writes.

use super::SignalsError;

/// A series' labels, sorted by name.
pub type Labels = Vec<(String, String)>;

pub(super) fn label_value<'a>(labels: &'a Labels, name: &str) -> &'a str {
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

pub(super) fn parse_value(text: &str) -> Option<f64> {
    match text {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => text.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Lane;
    use crate::metrics::Metrics;
    use std::time::Duration;

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
}
