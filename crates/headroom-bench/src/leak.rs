//! The leak detector: repeat an identical workload, record each run's memory floor (the lowest
//! device reading after the run) and throughput, and decide whether the floor rises (suspect a
//! leak) or stays flat (allocator retention or a preallocated cache, which are normal).
//!
//! Memory that stays high after work is not a leak by itself; a floor that keeps climbing over
//! identical runs is. Because longer contexts and deeper queues legitimately raise memory and
//! lower throughput, both enter the fit as covariates when they vary: the trend that remains
//! after them is what is judged.

use serde::{Deserialize, Serialize};

/// One repetition of the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunObservation {
    /// Lowest device memory reading after the run, MiB.
    pub floor_mib: f64,
    /// Output tokens per second over the run.
    pub throughput: f64,
    /// Mean requests waiting during the run.
    #[serde(default)]
    pub queue_depth: f64,
    /// Mean tokens per request (prompt + completion).
    #[serde(default)]
    pub context_tokens: f64,
}

/// The detector's conclusion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LeakVerdict {
    /// The floor climbs across identical runs (or throughput falls with it).
    RisingFloor,
    /// The floor is flat: memory held after runs is retention or preallocation.
    Stable,
    /// Too few runs, or too much noise, to say.
    Inconclusive,
}

/// The verdict with its numbers and reasoning.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeakReport {
    pub verdict: LeakVerdict,
    pub runs: usize,
    /// Floor trend after accounting for context and queue depth, MiB per run.
    pub floor_slope_mib_per_run: f64,
    /// Standard error of that slope.
    pub floor_slope_stderr: f64,
    /// The trend over all runs (slope × (runs − 1)), MiB.
    pub floor_rise_mib: f64,
    /// Spread of the floor around the fit, MiB.
    pub floor_noise_mib: f64,
    /// Mean floor above the pre-run baseline, MiB (retention or preallocation when stable).
    pub retained_above_baseline_mib: Option<f64>,
    /// Throughput trend, percent of the first fitted value per run.
    pub throughput_change_pct_per_run: f64,
    pub covariates: Vec<&'static str>,
    pub summary: String,
    pub reasoning: Vec<String>,
}

/// Thresholds for the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LeakThresholds {
    /// Fewer runs than this cannot show a trend.
    pub min_runs: usize,
    /// The slope must be this many standard errors above zero.
    pub min_t: f64,
    /// And the rise over the series at least this many MiB (ignores allocator jitter).
    pub min_rise_mib: f64,
    /// Throughput falling faster than this (percent per run) is suspicious too.
    pub throughput_drop_pct_per_run: f64,
}

impl Default for LeakThresholds {
    fn default() -> Self {
        LeakThresholds {
            min_runs: 5,
            min_t: 3.0,
            min_rise_mib: 32.0,
            throughput_drop_pct_per_run: 1.0,
        }
    }
}

/// A least squares fit: coefficients (intercept first), residuals, and (XᵀX)⁻¹ for the
/// coefficients' standard errors.
struct Fit {
    coef: Vec<f64>,
    residuals: Vec<f64>,
    inverse: Vec<Vec<f64>>,
}

/// Least squares fit of `y` on an intercept plus `columns`. `None` when the columns are
/// collinear.
fn least_squares(y: &[f64], columns: &[Vec<f64>]) -> Option<Fit> {
    let n = y.len();
    let k = columns.len() + 1;
    let row = |i: usize| -> Vec<f64> {
        std::iter::once(1.0)
            .chain(columns.iter().map(|c| c[i]))
            .collect()
    };
    // Normal equations: (XᵀX) b = Xᵀy.
    let mut xtx = vec![vec![0.0; k]; k];
    let mut xty = vec![0.0; k];
    for (i, yi) in y.iter().enumerate() {
        let r = row(i);
        for a in 0..k {
            xty[a] += r[a] * yi;
            for b in 0..k {
                xtx[a][b] += r[a] * r[b];
            }
        }
    }
    let inverse = invert(xtx)?;
    let coef: Vec<f64> = (0..k)
        .map(|a| (0..k).map(|b| inverse[a][b] * xty[b]).sum())
        .collect();
    let residuals = (0..n)
        .map(|i| y[i] - row(i).iter().zip(&coef).map(|(x, c)| x * c).sum::<f64>())
        .collect();
    Some(Fit {
        coef,
        residuals,
        inverse,
    })
}

/// Gauss–Jordan inverse with partial pivoting.
fn invert(mut m: Vec<Vec<f64>>) -> Option<Vec<Vec<f64>>> {
    let k = m.len();
    let mut inv: Vec<Vec<f64>> = (0..k)
        .map(|i| (0..k).map(|j| if i == j { 1.0 } else { 0.0 }).collect())
        .collect();
    for col in 0..k {
        let pivot = (col..k).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[pivot][col].abs() < 1e-9 {
            return None;
        }
        m.swap(col, pivot);
        inv.swap(col, pivot);
        let p = m[col][col];
        for j in 0..k {
            m[col][j] /= p;
            inv[col][j] /= p;
        }
        for r in 0..k {
            if r != col {
                let f = m[r][col];
                for j in 0..k {
                    m[r][j] -= f * m[col][j];
                    inv[r][j] -= f * inv[col][j];
                }
            }
        }
    }
    Some(inv)
}

fn varies(values: &[f64]) -> bool {
    let (lo, hi) = values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    hi - lo > 1e-9 * hi.abs().max(1.0)
}

/// Judges a series of identical runs. `baseline_mib` is the device reading before the first run.
pub fn analyze(
    runs: &[RunObservation],
    baseline_mib: Option<f64>,
    thresholds: LeakThresholds,
) -> LeakReport {
    let n = runs.len();
    let index: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let floors: Vec<f64> = runs.iter().map(|r| r.floor_mib).collect();
    let throughput: Vec<f64> = runs.iter().map(|r| r.throughput).collect();
    let mut covariates = Vec::new();
    // Covariates that varied but moved in step with the run count: their effect cannot be
    // told apart from a trend.
    let mut confounded = Vec::new();
    let mut columns = vec![index.clone()];
    for (name, values) in [
        (
            "context_tokens",
            runs.iter().map(|r| r.context_tokens).collect::<Vec<_>>(),
        ),
        (
            "queue_depth",
            runs.iter().map(|r| r.queue_depth).collect::<Vec<_>>(),
        ),
    ] {
        // A covariate enters only when it varies and leaves the fit solvable.
        if varies(&values) && n > columns.len() + 2 {
            let mut trial = columns.clone();
            trial.push(values);
            if least_squares(&floors, &trial).is_some() {
                columns = trial;
                covariates.push(name);
            } else {
                confounded.push(name);
            }
        }
    }
    let retained = baseline_mib
        .filter(|_| n > 0)
        .map(|b| floors.iter().sum::<f64>() / n as f64 - b);
    let mut reasoning = Vec::new();
    let empty = |verdict, summary: String, reasoning| LeakReport {
        verdict,
        runs: n,
        floor_slope_mib_per_run: 0.0,
        floor_slope_stderr: 0.0,
        floor_rise_mib: 0.0,
        floor_noise_mib: 0.0,
        retained_above_baseline_mib: retained,
        throughput_change_pct_per_run: 0.0,
        covariates: covariates.clone(),
        summary,
        reasoning,
    };
    if n < thresholds.min_runs.max(3) {
        return empty(
            LeakVerdict::Inconclusive,
            format!(
                "inconclusive: {n} runs; at least {} are needed to see a trend",
                thresholds.min_runs.max(3)
            ),
            vec![],
        );
    }
    let Some(Fit {
        coef,
        residuals,
        inverse,
    }) = least_squares(&floors, &columns)
    else {
        return empty(
            LeakVerdict::Inconclusive,
            "inconclusive: the runs cannot be fitted".into(),
            vec![],
        );
    };
    let dof = (n - columns.len() - 1).max(1) as f64;
    let rss: f64 = residuals.iter().map(|r| r * r).sum();
    let sigma = (rss / dof).sqrt();
    let slope = coef[1];
    let stderr = sigma * inverse[1][1].max(0.0).sqrt();
    let rise = slope * (n - 1) as f64;
    let t = if stderr > 0.0 {
        slope / stderr
    } else if slope.abs() > 0.0 {
        f64::INFINITY * slope.signum()
    } else {
        0.0
    };

    let tp_coef = least_squares(&throughput, &columns)
        .map(|f| f.coef)
        .unwrap_or_else(|| vec![0.0, 0.0]);
    let tp_first = tp_coef[0].max(f64::MIN_POSITIVE);
    let tp_change = if throughput.iter().all(|&t| t > 0.0) {
        100.0 * tp_coef[1] / tp_first
    } else {
        0.0
    };

    reasoning.push(format!(
        "memory floor trend: {slope:+.1} MiB per run (± {stderr:.1}, t = {t:.1}) over {n} runs = {rise:+.0} MiB; scatter around the fit {sigma:.1} MiB"
    ));
    if covariates.is_empty() {
        reasoning.push("context length and queue depth were the same in every run, so the runs are directly comparable".into());
    } else {
        reasoning.push(format!(
            "{} varied between runs and {} taken out of the trend",
            covariates.join(" and "),
            if covariates.len() == 1 { "was" } else { "were" }
        ));
    }
    reasoning.push(format!("throughput trend: {tp_change:+.2}% per run"));
    let floor_rising = t >= thresholds.min_t && rise >= thresholds.min_rise_mib;
    let throughput_falling = tp_change <= -thresholds.throughput_drop_pct_per_run;
    let noisy = sigma * 2.0 > thresholds.min_rise_mib && !floor_rising;
    let verdict = if floor_rising && !confounded.is_empty() {
        reasoning.push(format!(
            "the floor rose by {rise:.0} MiB, but {} grew in step with the run count, so the rise cannot be told apart from it: repeat with fixed inputs",
            confounded.join(" and ")
        ));
        LeakVerdict::Inconclusive
    } else if floor_rising {
        reasoning.push(format!(
            "the floor rose by {rise:.0} MiB across identical runs, well beyond the noise: memory is not returned between runs"
        ));
        if throughput_falling {
            reasoning.push("throughput falls as the floor rises, as it does when a cache or pool keeps growing".into());
        }
        LeakVerdict::RisingFloor
    } else if throughput_falling && t > 1.0 {
        reasoning.push("throughput falls while the floor creeps up: watch a longer soak".into());
        LeakVerdict::RisingFloor
    } else if noisy
        && t.abs() < thresholds.min_t
        && slope.abs() * (n - 1) as f64 >= thresholds.min_rise_mib
    {
        reasoning.push(format!(
            "the floor moves by {sigma:.0} MiB from run to run, too much to rule a trend in or out: run more repetitions"
        ));
        LeakVerdict::Inconclusive
    } else {
        match retained {
            Some(held) if held > thresholds.min_rise_mib => reasoning.push(format!(
                "the floor stays {held:.0} MiB above the pre-run baseline but does not climb: allocator retention or a preallocated KV cache, not a leak"
            )),
            _ => reasoning.push("the floor returns to the same level after every run".into()),
        }
        LeakVerdict::Stable
    };
    let summary = match verdict {
        LeakVerdict::RisingFloor => format!(
            "rising floor — suspect a leak ({slope:+.1} MiB per run over {n} runs)"
        ),
        LeakVerdict::Stable => format!(
            "stable — allocator retention / preallocated cache (floor trend {slope:+.1} MiB per run over {n} runs)"
        ),
        LeakVerdict::Inconclusive if !confounded.is_empty() => format!(
            "inconclusive — {} changed with every run ({slope:+.1} MiB per run over {n} runs)",
            confounded.join(" and ")
        ),
        LeakVerdict::Inconclusive => {
            format!("inconclusive — floor scatter {sigma:.0} MiB hides any trend over {n} runs")
        }
    };
    LeakReport {
        verdict,
        runs: n,
        floor_slope_mib_per_run: slope,
        floor_slope_stderr: stderr,
        floor_rise_mib: rise,
        floor_noise_mib: sigma,
        retained_above_baseline_mib: retained,
        throughput_change_pct_per_run: tp_change,
        covariates,
        summary,
        reasoning,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Trace {
        baseline_mib: f64,
        runs: Vec<RunObservation>,
    }

    fn trace(json: &str) -> LeakReport {
        let t: Trace = serde_json::from_str(json).unwrap();
        analyze(&t.runs, Some(t.baseline_mib), LeakThresholds::default())
    }

    #[test]
    fn a_rising_floor_is_a_suspected_leak() {
        let r = trace(include_str!("../testdata/leak/rising-floor.json"));
        assert_eq!(r.verdict, LeakVerdict::RisingFloor, "{r:#?}");
        assert!((r.floor_slope_mib_per_run - 48.0).abs() < 6.0, "{r:#?}");
        assert!(r.throughput_change_pct_per_run < -1.0);
        assert!(r.summary.starts_with("rising floor"));
    }

    #[test]
    fn a_flat_high_floor_is_retention_not_a_leak() {
        let r = trace(include_str!("../testdata/leak/flat-high-retention.json"));
        assert_eq!(r.verdict, LeakVerdict::Stable, "{r:#?}");
        let held = r.retained_above_baseline_mib.unwrap();
        assert!(held > 6000.0, "{held}");
        assert!(r
            .reasoning
            .iter()
            .any(|l| l.contains("preallocated KV cache")));
    }

    #[test]
    fn noise_without_a_trend_is_not_called_a_leak() {
        let r = trace(include_str!("../testdata/leak/noisy.json"));
        assert_ne!(r.verdict, LeakVerdict::RisingFloor, "{r:#?}");
        assert!(r.floor_noise_mib > 50.0);
    }

    #[test]
    fn memory_that_follows_the_context_is_not_a_leak() {
        let r = trace(include_str!("../testdata/leak/context-growth.json"));
        assert_eq!(r.covariates, vec!["context_tokens"]);
        assert_eq!(r.verdict, LeakVerdict::Stable, "{r:#?}");
        assert!(r.floor_slope_mib_per_run.abs() < 5.0, "{r:#?}");
    }

    #[test]
    fn a_rise_in_step_with_the_context_cannot_be_called_either_way() {
        let runs: Vec<RunObservation> = (0..8)
            .map(|i| RunObservation {
                floor_mib: 9000.0 + 60.0 * i as f64,
                throughput: 40.0,
                queue_depth: 0.0,
                context_tokens: 500.0 + 300.0 * i as f64,
            })
            .collect();
        let r = analyze(&runs, None, LeakThresholds::default());
        assert_eq!(r.verdict, LeakVerdict::Inconclusive, "{r:#?}");
        assert!(r.summary.contains("context_tokens"));
    }

    #[test]
    fn too_few_runs_are_inconclusive() {
        let runs = vec![
            RunObservation {
                floor_mib: 100.0,
                throughput: 10.0,
                queue_depth: 0.0,
                context_tokens: 100.0,
            };
            3
        ];
        let r = analyze(&runs, None, LeakThresholds::default());
        assert_eq!(r.verdict, LeakVerdict::Inconclusive);
    }

    #[test]
    fn the_fit_recovers_known_coefficients() {
        // y = 5 + 2x + 3z exactly.
        let x = [0.0, 1.0, 2.0, 3.0, 4.0];
        let z = [1.0, 0.0, 2.0, 1.0, 3.0];
        let y: Vec<f64> = x
            .iter()
            .zip(z)
            .map(|(x, z)| 5.0 + 2.0 * x + 3.0 * z)
            .collect();
        let fit = least_squares(&y, &[x.to_vec(), z.to_vec()]).unwrap();
        for (got, want) in fit.coef.iter().zip([5.0, 2.0, 3.0]) {
            assert!((got - want).abs() < 1e-9, "{:?}", fit.coef);
        }
        assert!(fit.residuals.iter().all(|r| r.abs() < 1e-9));
        assert!(least_squares(&y, &[x.to_vec(), x.to_vec()]).is_none());
    }
}
