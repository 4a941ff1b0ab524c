//! `bourse bench compare BASELINE.json RESULT.json`: which figures of a run got worse
//! than a kept baseline, beyond a threshold. Each known figure has a direction (more
//! throughput is better, less latency is better); a figure missing from either file is
//! not compared and said so. Exit status 1 on any regression, so CI or a script can
//! stop on it.

use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::Value;

#[derive(Args)]
pub struct CompareArgs {
    baseline: PathBuf,
    result: PathBuf,
    /// A change worse than this many percent is a regression.
    #[arg(long, default_value_t = 5.0)]
    threshold_percent: f64,
}

/// Whether a larger value of a figure is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
}

/// The figures compared, and which way is better. Latencies and counts of failures
/// should fall, throughputs rise.
pub const FIGURES: &[(&str, Better)] = &[
    ("throughput_per_sec", Better::Higher),
    ("commands_per_sec", Better::Higher),
    ("p50_us", Better::Lower),
    ("p90_us", Better::Lower),
    ("p99_us", Better::Lower),
    ("p99_9_us", Better::Lower),
    ("p99_99_us", Better::Lower),
    ("max_us", Better::Lower),
    ("errors", Better::Lower),
    ("rejected", Better::Lower),
];

/// One figure compared.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub figure: &'static str,
    pub baseline: f64,
    pub result: f64,
    /// Positive when the result is worse, in percent of the baseline.
    pub worse_percent: f64,
    pub regressed: bool,
}

/// Compares every known figure present in both documents.
pub fn compare(baseline: &Value, result: &Value, threshold_percent: f64) -> Vec<Change> {
    FIGURES
        .iter()
        .filter_map(|(figure, better)| {
            let (before, after) = (baseline.get(figure)?.as_f64()?, result.get(figure)?.as_f64()?);
            let worse = match better {
                Better::Higher => before - after,
                Better::Lower => after - before,
            };
            let worse_percent = if before == 0.0 {
                if worse > 0.0 {
                    f64::INFINITY
                } else {
                    0.0
                }
            } else {
                worse / before.abs() * 100.0
            };
            Some(Change {
                figure,
                baseline: before,
                result: after,
                worse_percent,
                regressed: worse_percent > threshold_percent,
            })
        })
        .collect()
}

fn read(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    serde_json::from_str(&text).map_err(|error| format!("{} is not JSON: {error}", path.display()))
}

/// Prints the comparison; `Err` (exit status 1) when anything regressed.
pub fn run(args: &CompareArgs) -> Result<bool, String> {
    let (baseline, result) = (read(&args.baseline)?, read(&args.result)?);
    let changes = compare(&baseline, &result, args.threshold_percent);
    if changes.is_empty() {
        return Err("the two files share no figure this command knows".to_string());
    }
    for change in &changes {
        let verdict = if change.regressed { "REGRESSED" } else { "ok" };
        let direction = if change.worse_percent > 0.0 { "worse" } else { "better" };
        println!(
            "{:<20} {:>14.1} -> {:>14.1}  {:>7.1}% {direction:<6}  {verdict}",
            change.figure,
            change.baseline,
            change.result,
            change.worse_percent.abs()
        );
    }
    let regressed = changes.iter().filter(|change| change.regressed).count();
    if regressed > 0 {
        println!("{regressed} figure(s) regressed beyond {}%", args.threshold_percent);
    }
    Ok(regressed == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_figure_is_judged_in_its_own_direction_against_the_threshold() {
        let baseline =
            json!({ "throughput_per_sec": 1000.0, "p99_us": 1000, "errors": 0, "note": "x" });
        let same = compare(&baseline, &baseline, 5.0);
        assert_eq!(same.len(), 3);
        assert!(same.iter().all(|change| !change.regressed && change.worse_percent == 0.0));

        let slower = json!({ "throughput_per_sec": 940.0, "p99_us": 1040, "errors": 0 });
        let changes = compare(&baseline, &slower, 5.0);
        let verdict =
            |figure: &str| changes.iter().find(|change| change.figure == figure).unwrap().clone();
        assert!(verdict("throughput_per_sec").regressed, "6% less throughput");
        assert!((verdict("throughput_per_sec").worse_percent - 6.0).abs() < 1e-9);
        assert!(!verdict("p99_us").regressed, "4% more latency is within 5%");

        let better = json!({ "throughput_per_sec": 2000.0, "p99_us": 10, "errors": 0 });
        assert!(compare(&baseline, &better, 5.0).iter().all(|change| !change.regressed));
    }

    #[test]
    fn errors_appearing_from_zero_regress_and_unknown_figures_are_not_compared() {
        let baseline = json!({ "errors": 0, "p50_us": 0 });
        let result = json!({ "errors": 3, "p50_us": 0, "extra": 5 });
        let changes = compare(&baseline, &result, 5.0);
        assert_eq!(changes.len(), 2);
        assert!(changes.iter().find(|change| change.figure == "errors").unwrap().regressed);
        assert!(!changes.iter().find(|change| change.figure == "p50_us").unwrap().regressed);
        assert!(compare(&json!({}), &result, 5.0).is_empty());
    }
}
