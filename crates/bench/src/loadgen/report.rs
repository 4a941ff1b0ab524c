//! `bourse loadgen --html PATH`: a run's results as one self-contained HTML page (no
//! scripts, fonts, style sheets or images from anywhere else; it opens offline): the
//! parameters and the machine, a summary table, latency by percentile on a "nines" axis,
//! and latency, throughput and (with `--watch-pid`) the server's memory over time, as
//! inline SVG drawn here. A rate step gets its knee summary and a section per step.
//!
//! The page is made from the results JSON alone (what `--json` prints), so everything
//! it shows is also in that document.

use std::path::Path;

use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// The percentile series of the results (`"percentiles": [[percent, µs], …]`): the
/// latency at 0 to 6 nines (0 %, 90 %, 99 %, …, 99.9999 %) in steps of a tenth of a
/// nine, then at 100 % (the maximum).
pub fn percentiles(latency: &Histogram<u64>) -> Value {
    let mut series: Vec<Value> = (0..=60)
        .map(|tenth| {
            let quantile = 1.0 - 10f64.powf(-f64::from(tenth) / 10.0);
            let percent = (quantile * 100.0 * 1e6).round() / 1e6;
            json!([percent, latency.value_at_quantile(quantile)])
        })
        .collect();
    series.push(json!([100.0, latency.max()]));
    Value::Array(series)
}

/// Writes the report of `results` (one run's, or a rate step's) to `path`.
pub fn write(path: &Path, results: &Value) -> Result<(), String> {
    std::fs::write(path, html(results))
        .map_err(|error| format!("cannot write the report to {}: {error}", path.display()))
}

/// The report of `results` as one HTML document.
pub fn html(results: &Value) -> String {
    let step = results["mode"] == "step";
    let title = if step {
        "bourse loadgen: rate step".to_string()
    } else {
        format!(
            "bourse loadgen: {} loop, {}",
            text(&results["mode"]),
            text(&results["protocol"]).to_uppercase()
        )
    };
    let mut page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n",
        title = escape(&title)
    );
    if step {
        step_report(&mut page, results);
    } else {
        page.push_str(&format!(
            "<p>Latency from each order's {}.</p>\n",
            escape(&text(&results["latency_from"]))
        ));
        run_report(&mut page, results, "h2");
        machine_table(&mut page, &results["machine"]);
    }
    page.push_str("</body>\n</html>\n");
    page
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:800px;\
color:#222;padding:0 1em}h1{font-size:1.5em}h2{font-size:1.25em;border-bottom:1px solid #ccc;\
margin-top:2em}h3{font-size:1.05em}table{border-collapse:collapse;margin:.5em 0}\
th,td{padding:.2em .8em;border-bottom:1px solid #eee;text-align:left}td+td{text-align:right;\
font-variant-numeric:tabular-nums}svg{display:block;max-width:100%;height:auto}";

/// One run: summary, plots, parameters (`heading` is the level of its title).
fn run_report(page: &mut String, results: &Value, heading: &str) {
    let sub = if heading == "h2" { "h3" } else { "h4" };
    page.push_str(&format!("<{heading}>Summary</{heading}>\n"));
    table(page, &[], &summary_rows(results));
    page.push_str(&format!("<{sub}>Latency by percentile</{sub}>\n"));
    let series = vec![Series { name: "latency".to_string(), points: percentile_points(results) }];
    page.push_str(&percentile_plot(series).svg());
    page.push_str(&format!("<{sub}>Over time (one point a second)</{sub}>\n"));
    let timeline = results["timeline"].as_array().map_or(&[][..], Vec::as_slice);
    for plot in timeline_plots(timeline, results) {
        page.push_str(&plot.svg());
    }
    page.push_str(&format!("<{sub}>Parameters</{sub}>\n"));
    table(page, &[], &parameter_rows(results));
}

fn step_report(page: &mut String, results: &Value) {
    let steps = results["steps"].as_array().map_or(&[][..], Vec::as_slice);
    let bound = results["p99_bound_us"].as_f64();
    let knee = results["knee_rate_per_sec"].as_f64();
    page.push_str("<h2>Knee</h2>\n<p>");
    page.push_str(&escape(&match (knee, bound) {
        (Some(knee), Some(bound)) => {
            format!("Knee: {} orders/s with p99 under {}.", thousands(knee), latency_text(bound))
        }
        (None, Some(bound)) => format!("No step held p99 under {}.", latency_text(bound)),
        _ => "No bound given.".to_string(),
    }));
    page.push_str(
        " A step holds when every order is answered, without errors, with p99 under the \
         bound; the step stops at the first that does not.</p>\n",
    );
    let rows: Vec<Vec<String>> = steps
        .iter()
        .enumerate()
        .map(|(index, step)| {
            let rate = step["target_rate_per_sec"].as_f64().unwrap_or(0.0);
            let holds = knee.is_some_and(|knee| rate <= knee);
            vec![
                (index + 1).to_string(),
                thousands(rate),
                thousands(step["throughput_per_sec"].as_f64().unwrap_or(0.0)),
                count(&step["ok"]),
                count(&step["rejected"]),
                count(&step["errors"]),
                latency(&step["p50_us"]),
                latency(&step["p99_us"]),
                latency(&step["p99_9_us"]),
                if holds { "holds" } else { "past the knee" }.to_string(),
            ]
        })
        .collect();
    let head = [
        "step",
        "target/s",
        "answers/s",
        "ok",
        "rejected",
        "errors",
        "p50",
        "p99",
        "p99.9",
        "verdict",
    ];
    table(page, &head, &rows);
    let by_rate = |key: &str| {
        steps
            .iter()
            .filter_map(|step| Some((step["target_rate_per_sec"].as_f64()?, step[key].as_f64()?)))
            .collect::<Vec<_>>()
    };
    let (p50, p99) = (by_rate("p50_us"), by_rate("p99_us"));
    let top_rate = p99.iter().map(|point| point.0).fold(0.0, f64::max);
    let mut latencies: Vec<f64> = p50.iter().chain(&p99).map(|point| point.1).collect();
    latencies.extend(bound);
    let plot = Plot {
        title: "Latency by target rate".to_string(),
        x: linear_axis(0.0, top_rate, "target rate (orders per second)", rate_text),
        y: latency_axis(&latencies),
        series: vec![
            Series { name: "p50".to_string(), points: p50 },
            Series { name: "p99".to_string(), points: p99 },
        ],
        rule: bound.map(|bound| (bound, "p99 bound".to_string())),
    };
    page.push_str(&plot.svg());
    page.push_str("<h3>Latency by percentile, each step</h3>\n");
    let series = steps
        .iter()
        .map(|step| Series {
            name: format!("{}/s", rate_text(step["target_rate_per_sec"].as_f64().unwrap_or(0.0))),
            points: percentile_points(step),
        })
        .collect();
    page.push_str(&percentile_plot(series).svg());
    page.push_str("<h2>Parameters</h2>\n");
    table(page, &[], &parameter_rows(results));
    if let Some(first) = steps.first() {
        machine_table(page, &first["machine"]);
    }
    for (index, step) in steps.iter().enumerate() {
        page.push_str(&format!(
            "<h2>Step {}: {} orders/s</h2>\n",
            index + 1,
            escape(&thousands(step["target_rate_per_sec"].as_f64().unwrap_or(0.0)))
        ));
        run_report(page, step, "h3");
    }
}

fn machine_table(page: &mut String, machine: &Value) {
    page.push_str("<h2>Machine</h2>\n");
    let rows: Vec<Vec<String>> = machine
        .as_object()
        .map(|machine| machine.iter().map(|(key, value)| vec![key.clone(), text(value)]).collect())
        .unwrap_or_default();
    table(page, &[], &rows);
}

/// A table; every cell is escaped here.
fn table(page: &mut String, head: &[&str], rows: &[Vec<String>]) {
    page.push_str("<table>\n");
    if !head.is_empty() {
        page.push_str("<tr>");
        for cell in head {
            page.push_str(&format!("<th>{}</th>", escape(cell)));
        }
        page.push_str("</tr>\n");
    }
    for row in rows {
        page.push_str("<tr>");
        for cell in row {
            page.push_str(&format!("<td>{}</td>", escape(cell)));
        }
        page.push_str("</tr>\n");
    }
    page.push_str("</table>\n");
}

fn summary_rows(results: &Value) -> Vec<Vec<String>> {
    let row = |name: &str, value: String| vec![name.to_string(), value];
    let mut rows = vec![
        row(
            "throughput",
            format!(
                "{} answers/s",
                thousands(results["throughput_per_sec"].as_f64().unwrap_or(0.0))
            ),
        ),
        row("elapsed", format!("{:.2} s", results["elapsed_s"].as_f64().unwrap_or(0.0))),
        row("sent", count(&results["sent"])),
        row("ok", count(&results["ok"])),
        row("rejected", count(&results["rejected"])),
    ];
    if let Some(reasons) = results["rejected_by_reason"].as_object() {
        for (reason, number) in reasons {
            rows.push(row(&format!("rejected: {reason}"), count(number)));
        }
    }
    rows.push(row("errors", count(&results["errors"])));
    for (name, key) in [
        ("p50", "p50_us"),
        ("p90", "p90_us"),
        ("p99", "p99_us"),
        ("p99.9", "p99_9_us"),
        ("p99.99", "p99_99_us"),
        ("max", "max_us"),
    ] {
        rows.push(row(name, latency(&results[key])));
    }
    for (name, key) in [("load generator CPU", "loadgen_cpu"), ("server CPU", "server_cpu")] {
        let cpu = &results[key];
        if cpu.is_object() {
            rows.push(row(
                name,
                format!(
                    "{} s user + {} s system: {:.0}% of one CPU, {:.0}% of the machine{}",
                    text(&cpu["user_s"]),
                    text(&cpu["system_s"]),
                    cpu["share_of_one_cpu"].as_f64().unwrap_or(0.0) * 100.0,
                    cpu["share_of_machine"].as_f64().unwrap_or(0.0) * 100.0,
                    match &cpu["context_switches_per_sec"] {
                        Value::Object(switches) => format!(
                            "; context switches/s: {} voluntary, {} involuntary",
                            switches.get("voluntary").map_or("?".to_string(), |n| n.to_string()),
                            switches.get("involuntary").map_or("?".to_string(), |n| n.to_string())
                        ),
                        _ => String::new(),
                    }
                ),
            ));
        }
    }
    let rss = &results["server_rss_kib"];
    if rss.is_object() {
        for (name, key) in [("first", "first"), ("last", "last"), ("max", "max")] {
            rows.push(row(&format!("server memory (RSS), {name}"), memory(&rss[key])));
        }
        if let (Some(first), Some(last)) = (rss["first"].as_f64(), rss["last"].as_f64()) {
            let change = last - first;
            let sign = if change < 0.0 { "-" } else { "+" };
            rows.push(row(
                "server memory (RSS), last - first",
                format!("{sign}{}", memory(&json!(change.abs()))),
            ));
        }
    }
    rows
}

/// Every value of the results that is not a series (an array), objects flattened to
/// `key.inner`; the machine has a table of its own.
fn parameter_rows(results: &Value) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for (key, value) in results.as_object().into_iter().flatten() {
        match value {
            Value::Array(_) => {}
            _ if key == "machine" || key == "loadgen_cpu" || key == "server_cpu" => {}
            Value::Object(inner) if inner.is_empty() => rows.push(vec![key.clone(), text(value)]),
            Value::Object(inner) => {
                for (name, value) in inner.iter().filter(|(_, value)| !value.is_array()) {
                    rows.push(vec![format!("{key}.{name}"), text(value)]);
                }
            }
            _ => rows.push(vec![key.clone(), text(value)]),
        }
    }
    rows
}

/// A JSON value as plain text (not yet escaped).
fn text(value: &Value) -> String {
    match value {
        Value::Null => "none".to_string(),
        Value::String(text) => text.clone(),
        Value::Object(object) if object.is_empty() => "none".to_string(),
        other => other.to_string(),
    }
}

/// `&`, `<`, `>`, `"` and `'` as HTML entities: safe in text and in quoted attributes.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            other => escaped.push(other),
        }
    }
    escaped
}

/// A number rounded to a whole one, with thousands separated: `1,234,567`.
fn thousands(value: f64) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    let digits = format!("{:.0}", value.abs());
    let mut grouped = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    if value.round() < 0.0 {
        grouped.insert(0, '-');
    }
    grouped
}

fn count(value: &Value) -> String {
    value.as_f64().map_or_else(|| text(value), thousands)
}

/// A latency in µs, exact, and in ms or s when that is easier to read.
fn latency(value: &Value) -> String {
    match value.as_f64() {
        Some(us) if us >= 1000.0 => format!("{} µs ({})", thousands(us), latency_text(us)),
        Some(us) => format!("{} µs", thousands(us)),
        None => text(value),
    }
}

/// A memory size in KiB, exact, and in MiB.
fn memory(value: &Value) -> String {
    match value.as_f64() {
        Some(kib) => format!("{} KiB ({:.1} MiB)", thousands(kib), kib / 1024.0),
        None => text(value),
    }
}

/// A short number for a tick: at most three decimals, no trailing zeros.
fn short(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        return thousands(value);
    }
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A latency given in µs, in the unit that reads best.
fn latency_text(us: f64) -> String {
    if us >= 1e6 {
        format!("{} s", short(us / 1e6))
    } else if us >= 1e3 {
        format!("{} ms", short(us / 1e3))
    } else {
        format!("{} µs", short(us))
    }
}

fn rate_text(rate: f64) -> String {
    if rate >= 1e6 {
        format!("{}M", short(rate / 1e6))
    } else if rate >= 1e3 {
        format!("{}k", short(rate / 1e3))
    } else {
        short(rate)
    }
}

fn mib_text(mib: f64) -> String {
    format!("{} MiB", short(mib))
}

/// How many nines a percentile has: 90 % is 1, 99.9 % is 3, 100 % is infinite.
fn nines(percent: f64) -> f64 {
    -(1.0 - percent / 100.0).log10()
}

/// The nines axis ends at 99.999 %.
const MOST_NINES: f64 = 5.0;

/// The points (nines, µs) of a run's `percentiles` on the nines axis.
fn percentile_points(results: &Value) -> Vec<(f64, f64)> {
    results["percentiles"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|pair| Some((nines(pair.get(0)?.as_f64()?), pair.get(1)?.as_f64()?)))
        .filter(|(nines, _)| nines.is_finite() && *nines <= MOST_NINES + 1e-9)
        .collect()
}

fn percentile_plot(series: Vec<Series>) -> Plot {
    let latencies: Vec<f64> =
        series.iter().flat_map(|series| series.points.iter().map(|point| point.1)).collect();
    let labels = ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"];
    Plot {
        title: "Latency by percentile".to_string(),
        x: Axis {
            kind: Kind::Linear,
            lo: 0.0,
            hi: MOST_NINES,
            ticks: labels
                .iter()
                .enumerate()
                .map(|(n, label)| (n as f64, label.to_string()))
                .collect(),
            label: "percentile".to_string(),
        },
        y: latency_axis(&latencies),
        series,
        rule: None,
    }
}

/// Latency (p99 of each second), throughput and, when sampled, the watched process's
/// memory over the run.
fn timeline_plots(timeline: &[Value], results: &Value) -> Vec<Plot> {
    let elapsed = results["elapsed_s"].as_f64().filter(|elapsed| elapsed.is_finite());
    let end = timeline
        .iter()
        .filter_map(|entry| entry["second"].as_f64())
        .chain(elapsed)
        .fold(1.0, f64::max);
    let (per, time_label) = if end > 600.0 {
        (60.0, "time since the start (minutes)")
    } else {
        (1.0, "time since the start (seconds)")
    };
    let points = |key: &str, scale: f64| -> Vec<(f64, f64)> {
        timeline
            .iter()
            .filter_map(|entry| {
                Some((entry["second"].as_f64()? / per, entry[key].as_f64()? / scale))
            })
            .collect()
    };
    let time_axis = || linear_axis(0.0, end / per, time_label, short);
    let p99 = points("p99_us", 1.0);
    let completed = points("completed", 1.0);
    let top = completed.iter().map(|point| point.1).fold(0.0, f64::max);
    let latencies: Vec<f64> = p99.iter().map(|point| point.1).collect();
    let mut plots = vec![
        Plot {
            title: "p99 latency of each second".to_string(),
            x: time_axis(),
            y: latency_axis(&latencies),
            series: vec![Series { name: "p99".to_string(), points: p99 }],
            rule: None,
        },
        Plot {
            title: "Answers per second".to_string(),
            x: time_axis(),
            y: linear_axis(0.0, top, "answers per second", rate_text),
            series: vec![Series { name: "answers".to_string(), points: completed }],
            rule: None,
        },
    ];
    let mut rss = points("rss_kib", 1024.0);
    let summary = &results["server_rss_kib"];
    if let Some(first) = summary["first"].as_f64() {
        rss.insert(0, (0.0, first / 1024.0));
    }
    if let (Some(last), Some(elapsed)) = (summary["last"].as_f64(), elapsed) {
        rss.push((elapsed / per, last / 1024.0));
    }
    if !rss.is_empty() {
        let low = rss.iter().map(|point| point.1).fold(f64::INFINITY, f64::min);
        let high = rss.iter().map(|point| point.1).fold(0.0, f64::max);
        plots.push(Plot {
            title: format!("Resident memory of process {}", text(&summary["pid"])),
            x: time_axis(),
            y: linear_axis(low, high, "resident memory (MiB)", mib_text),
            series: vec![Series { name: "RSS".to_string(), points: rss }],
            rule: None,
        });
    }
    plots
}

// The plots: inline SVG.

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 300.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 34.0;
const TOP: f64 = 26.0;
const BOTTOM: f64 = 46.0;
const COLOURS: [&str; 8] =
    ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Linear,
    Log,
}

#[derive(Clone, Debug)]
struct Axis {
    kind: Kind,
    lo: f64,
    hi: f64,
    /// Value and label of each tick.
    ticks: Vec<(f64, String)>,
    label: String,
}

/// An axis's values onto pixels: `lo` to `from`, `hi` to `to` (`to` < `from` for the
/// y axis, which grows upwards); a value outside the axis stays at its edge.
#[derive(Clone, Copy, Debug)]
struct Scale {
    kind: Kind,
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl Scale {
    fn new(axis: &Axis, from: f64, to: f64) -> Scale {
        Scale { kind: axis.kind, lo: axis.lo, hi: axis.hi, from, to }
    }

    fn map(self, value: f64) -> f64 {
        let (lo, hi, value) = match self.kind {
            Kind::Linear => (self.lo, self.hi, value),
            Kind::Log => {
                let floor = self.lo.max(f64::MIN_POSITIVE);
                (floor.log10(), self.hi.max(floor).log10(), value.max(floor).log10())
            }
        };
        let share = if hi > lo { ((value - lo) / (hi - lo)).clamp(0.0, 1.0) } else { 0.0 };
        self.from + share * (self.to - self.from)
    }
}

struct Series {
    name: String,
    points: Vec<(f64, f64)>,
}

struct Plot {
    title: String,
    x: Axis,
    y: Axis,
    series: Vec<Series>,
    /// A horizontal line at this value of y, with its label.
    rule: Option<(f64, String)>,
}

/// A step of 1, 2 or 5 times a power of ten that cuts `span` into about `parts`.
fn nice_step(span: f64, parts: f64) -> f64 {
    let raw = (span / parts).max(f64::MIN_POSITIVE);
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = match raw / magnitude {
        share if share <= 1.0 => 1.0,
        share if share <= 2.0 => 2.0,
        share if share <= 5.0 => 5.0,
        _ => 10.0,
    };
    step * magnitude
}

/// A linear axis over `lo..hi`, widened to whole steps, with about six ticks.
fn linear_axis(lo: f64, hi: f64, label: &str, format: fn(f64) -> String) -> Axis {
    let (lo, hi) = if lo.is_finite() && hi.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    let (lo, hi) = if hi > lo { (lo, hi) } else { (lo - 1.0, lo + 1.0) };
    let step = nice_step(hi - lo, 5.0);
    let (lo, hi) = ((lo / step).floor() * step, (hi / step).ceil() * step);
    let ticks = (0..=((hi - lo) / step).round() as usize)
        .map(|index| {
            let value = lo + index as f64 * step;
            (value, format(value))
        })
        .collect();
    Axis { kind: Kind::Linear, lo, hi, ticks, label: label.to_string() }
}

/// A logarithmic latency axis (µs) from the power of ten at or below the smallest
/// latency (at least 1 µs) to the one at or above the largest.
fn latency_axis(latencies: &[f64]) -> Axis {
    let finite = || latencies.iter().copied().filter(|value| value.is_finite());
    let low = finite().fold(f64::INFINITY, f64::min).max(1.0);
    let high = finite().fold(1.0, f64::max);
    let (low, high) = if low.is_finite() { (low, high) } else { (1.0, 1.0) };
    let first = low.log10().floor() as i32;
    let last = (high.log10().ceil() as i32).max(first + 1);
    // 1, 2 and 5 times each power of ten when the axis spans few decades.
    let steps: &[f64] = if last - first <= 2 { &[1.0, 2.0, 5.0] } else { &[1.0] };
    let ticks = (first..=last)
        .flat_map(|power| steps.iter().map(move |step| step * 10f64.powi(power)))
        .filter(|value| *value <= 10f64.powi(last))
        .map(|value| (value, latency_text(value)))
        .collect();
    Axis {
        kind: Kind::Log,
        lo: 10f64.powi(first),
        hi: 10f64.powi(last),
        ticks,
        label: "latency".to_string(),
    }
}

impl Plot {
    fn x_scale(&self) -> Scale {
        Scale::new(&self.x, LEFT, WIDTH - RIGHT)
    }

    fn y_scale(&self) -> Scale {
        Scale::new(&self.y, HEIGHT - BOTTOM, TOP)
    }

    fn svg(&self) -> String {
        let (xs, ys) = (self.x_scale(), self.y_scale());
        let (right, bottom) = (WIDTH - RIGHT, HEIGHT - BOTTOM);
        let title = escape(&self.title);
        let mut svg = format!(
            "<svg viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
             role=\"img\" aria-label=\"{title}\" font-family=\"system-ui, sans-serif\" \
             font-size=\"12\" fill=\"#333\">\n<title>{title}</title>\n\
             <text x=\"{LEFT}\" y=\"16\" font-weight=\"bold\">{title}</text>\n\
             <rect fill=\"#fafafa\" stroke=\"#999\" x=\"{LEFT}\" y=\"{TOP}\" width=\"{}\" height=\"{}\"/>\n",
            right - LEFT,
            bottom - TOP
        );
        for (value, label) in &self.x.ticks {
            let x = xs.map(*value);
            svg.push_str(&format!(
                "<line stroke=\"#e3e3e3\" x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" y2=\"{bottom}\"/>\
                 <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
                bottom + 16.0,
                escape(label)
            ));
        }
        for (value, label) in &self.y.ticks {
            let y = ys.map(*value);
            svg.push_str(&format!(
                "<line stroke=\"#e3e3e3\" x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{right}\" y2=\"{y:.1}\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
                LEFT - 6.0,
                y + 4.0,
                escape(label)
            ));
        }
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n\
             <text transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
            (LEFT + right) / 2.0,
            HEIGHT - 8.0,
            escape(&self.x.label),
            (TOP + bottom) / 2.0,
            escape(&self.y.label)
        ));
        if let Some((value, label)) = &self.rule {
            let y = ys.map(*value);
            svg.push_str(&format!(
                "<line stroke=\"#d00\" stroke-dasharray=\"5 4\" x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{right}\" y2=\"{y:.1}\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#d00\">{}</text>\n",
                right - 4.0,
                y - 4.0,
                escape(label)
            ));
        }
        for (index, series) in self.series.iter().enumerate() {
            let colour = COLOURS[index % COLOURS.len()];
            let points: Vec<(f64, f64)> = series
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|&(x, y)| (xs.map(x), ys.map(y)))
                .collect();
            let list: Vec<String> = points.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
            svg.push_str(&format!(
                "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\"/>\n",
                list.join(" ")
            ));
            if points.len() <= 80 {
                for (x, y) in &points {
                    svg.push_str(&format!(
                        "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2.2\" fill=\"{colour}\"/>"
                    ));
                }
                svg.push('\n');
            }
        }
        if self.series.len() > 1 {
            let longest = self.series.iter().map(|series| series.name.chars().count()).max();
            svg.push_str(&format!(
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#fff\" \
                 fill-opacity=\"0.85\" stroke=\"#ccc\"/>\n",
                LEFT + 4.0,
                TOP + 4.0,
                40.0 + 7.5 * longest.unwrap_or(0) as f64,
                6.0 + 16.0 * self.series.len() as f64
            ));
            for (index, series) in self.series.iter().enumerate() {
                let colour = COLOURS[index % COLOURS.len()];
                let y = TOP + 14.0 + 16.0 * index as f64;
                svg.push_str(&format!(
                    "<line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{colour}\" \
                     stroke-width=\"3\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
                    LEFT + 10.0,
                    LEFT + 28.0,
                    LEFT + 34.0,
                    y + 4.0,
                    escape(&series.name)
                ));
            }
        }
        if self.series.iter().all(|series| series.points.is_empty()) {
            svg.push_str(&format!(
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">no data</text>\n",
                (LEFT + right) / 2.0,
                (TOP + bottom) / 2.0
            ));
        }
        svg.push_str("</svg>\n");
        svg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_every_character_that_could_open_markup_or_close_an_attribute() {
        assert_eq!(
            escape(r#"<a href="x">Tom & 'Jerry'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;"
        );
        assert_eq!(escape("99.9% µs"), "99.9% µs");
    }

    #[test]
    fn text_from_the_results_is_escaped_in_the_page() {
        let mut results = sample_results();
        results["machine"]["cpu_model"] = json!("<script>alert('x')</script>");
        results["rejected_by_reason"] = json!({ "<b>": 3 });
        let page = html(&results);
        assert!(!page.contains("<script"), "{page}");
        assert!(!page.contains("<b>"));
        assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
    }

    #[test]
    fn scales_map_the_domain_onto_the_range_and_keep_outliers_at_the_edge() {
        let linear =
            Axis { kind: Kind::Linear, lo: 0.0, hi: 10.0, ticks: vec![], label: "".into() };
        let x = Scale::new(&linear, 100.0, 200.0);
        assert_eq!((x.map(0.0), x.map(5.0), x.map(10.0)), (100.0, 150.0, 200.0));
        assert_eq!((x.map(-3.0), x.map(11.0)), (100.0, 200.0));
        let y = Scale::new(&linear, 300.0, 20.0);
        assert_eq!((y.map(0.0), y.map(10.0)), (300.0, 20.0), "y grows upwards");
        let log = latency_axis(&[3.0, 450.0]);
        assert_eq!((log.lo, log.hi), (1.0, 1000.0));
        let y = Scale::new(&log, 300.0, 0.0);
        assert!((y.map(10.0) - 200.0).abs() < 1e-9 && (y.map(100.0) - 100.0).abs() < 1e-9);
        assert_eq!(y.map(0.0), 300.0, "zero sits on the floor of a log axis");
    }

    #[test]
    fn linear_axes_end_on_whole_steps_that_cover_the_data() {
        let axis = linear_axis(0.0, 87.0, "n", short);
        assert_eq!((axis.lo, axis.hi), (0.0, 100.0));
        let values: Vec<f64> = axis.ticks.iter().map(|tick| tick.0).collect();
        assert_eq!(values, [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        let flat = linear_axis(512.0, 512.0, "MiB", mib_text);
        assert!(flat.lo < 512.0 && flat.hi > 512.0);
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(latency_text(1500.0), "1.5 ms");
    }

    #[test]
    fn a_series_is_drawn_inside_the_plot_area() {
        let points: Vec<(f64, f64)> = (1..=120)
            .map(|second| (f64::from(second), f64::from(second * 37 % 900 + 50)))
            .collect();
        let plot = Plot {
            title: "t".to_string(),
            x: linear_axis(0.0, 120.0, "s", short),
            y: latency_axis(&points.iter().map(|point| point.1).collect::<Vec<_>>()),
            series: vec![Series { name: "p99".to_string(), points }],
            rule: None,
        };
        let svg = plot.svg();
        let list = svg.split("points=\"").nth(1).unwrap().split('"').next().unwrap();
        let drawn: Vec<(f64, f64)> = list
            .split(' ')
            .map(|pair| {
                let (x, y) = pair.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect();
        assert_eq!(drawn.len(), 120);
        for (x, y) in &drawn {
            assert!((LEFT..=WIDTH - RIGHT).contains(x), "x {x}");
            assert!((TOP..=HEIGHT - BOTTOM).contains(y), "y {y}");
        }
        assert!(drawn.windows(2).all(|pair| pair[0].0 < pair[1].0), "time runs to the right");
    }

    #[test]
    fn the_percentile_series_climbs_to_the_maximum_on_the_nines_axis() {
        let mut histogram = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        for value in 1..=10_000 {
            histogram.record(value).unwrap();
        }
        let series = percentiles(&histogram);
        let pairs = series.as_array().unwrap();
        assert_eq!(pairs.len(), 62);
        assert_eq!(pairs[0], json!([0.0, 1]));
        assert_eq!(pairs[10][0], json!(90.0));
        assert_eq!(pairs[30][0], json!(99.9));
        assert_eq!(pairs[61], json!([100.0, histogram.max()]));
        let latencies: Vec<u64> = pairs.iter().map(|pair| pair[1].as_u64().unwrap()).collect();
        assert!(latencies.windows(2).all(|pair| pair[0] <= pair[1]));
        assert!((nines(90.0) - 1.0).abs() < 1e-9 && (nines(99.9) - 3.0).abs() < 1e-9);
        let points = percentile_points(&json!({ "percentiles": series }));
        assert_eq!(points.len(), 51, "up to 99.999 %");
    }

    #[test]
    fn a_page_is_self_contained_and_a_step_gets_a_section_per_step() {
        let page = html(&sample_results());
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("<svg") && page.contains("Resident memory"));
        assert!(
            page.contains("load generator CPU</td><td>0.4 s user + 0.1 s system: 23% of one CPU, 11% of the machine; context switches/s: 1200.0 voluntary, 30.0 involuntary"),
            "{page}"
        );
        assert!(!page.contains("http://") && !page.contains("https://") && !page.contains("src="));
        let step = json!({
            "mode": "step", "p99_bound_us": 1000, "knee_rate_per_sec": 2000.0,
            "steps": [sample_results(), sample_results()],
        });
        let page = html(&step);
        assert!(page.contains("Knee: 2,000 orders/s") && page.contains("Step 2: 2,000 orders/s"));
        assert_eq!(page.matches("<svg").count(), 2 + 2 * 4);
    }

    fn sample_results() -> Value {
        let mut histogram = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        for value in [80, 90, 120, 400, 2_500] {
            histogram.record(value).unwrap();
        }
        json!({
            "protocol": "tcp", "mode": "open", "target_rate_per_sec": 2000.0,
            "connections": 2, "duration_s": 2.0, "elapsed_s": 2.2, "sent": 4000, "ok": 4000,
            "rejected": 0, "rejected_by_reason": {}, "errors": 0, "throughput_per_sec": 1818.2,
            "p50_us": 120, "p90_us": 400, "p99_us": 2500, "p99_9_us": 2500, "p99_99_us": 2500,
            "max_us": 2500, "latency_from": "scheduled send time",
            "percentiles": percentiles(&histogram),
            "timeline": [
                { "second": 1, "completed": 2000, "p99_us": 900, "rss_kib": 20480 },
                { "second": 2, "completed": 2000, "p99_us": 2500, "rss_kib": 20992 },
            ],
            "server_rss_kib": { "pid": 42, "first": 20000, "last": 21000, "max": 21000 },
            "machine": { "cpus": 2, "cpu_model": "Test CPU", "os": "linux" },
            "loadgen_cpu": { "user_s": 0.4, "system_s": 0.1, "share_of_one_cpu": 0.227, "share_of_machine": 0.114, "context_switches_per_sec": { "voluntary": 1200.0, "involuntary": 30.0 } },
        })
    }
}
