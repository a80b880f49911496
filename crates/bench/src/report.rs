//! `strata bench report`: draws the `--json` results of several runs side by side in one SVG
//! (TPC-C: tpmC over time, one line per system; TPC-H: per-query time bars, one bar per system)
//! and prints the ratios against the first file as Markdown tables.
//!
//! The SVG is written by hand: a few hundred elements do not need a plotting library, and the
//! output stays a plain file that opens in any browser.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::tpcc::run::TpccReport;
use crate::tpch::run::{QueryResult, TpchReport};

/// The results of one run, as read back from `--json`.
#[derive(Clone, Debug)]
pub enum Results {
    /// `tpcc run --json`.
    Tpcc(TpccReport),
    /// `tpch run|check --json`.
    Tpch(TpchReport),
}

/// Writes a run's results as `--json` does, and says where on `out`.
pub fn save(out: &mut impl std::io::Write, path: &Path, results: &impl serde::Serialize) -> Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(results)?)
        .with_context(|| format!("writing {}", path.display()))?;
    writeln!(out, "results written to {}", path.display())?;
    Ok(())
}

/// Reads a `--json` file of either benchmark.
pub fn load(path: &Path) -> Result<Results> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let what = || format!("{} is not a complete strata bench result", path.display());
    match value.get("benchmark").and_then(|b| b.as_str()) {
        Some("tpcc") => Ok(Results::Tpcc(serde_json::from_value(value).with_context(what)?)),
        Some("tpch") => Ok(Results::Tpch(serde_json::from_value(value).with_context(what)?)),
        other => bail!(
            "{} is not a strata bench result (its \"benchmark\" is {}, expected \"tpcc\" or \"tpch\")",
            path.display(),
            other.map_or("missing".to_string(), |b| format!("{b:?}"))
        ),
    }
}

/// Line and bar colours, one per system in file order (distinct for colour-blind readers too).
const COLOURS: [&str; 8] = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#f0e442"];

fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

const WIDTH: f64 = 1000.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 24.0;
const LEGEND_ROW: f64 = 18.0;

/// Escapes text for an SVG text node or attribute.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// `12345.6` → `12,346`.
fn thousands(x: f64) -> String {
    let n = x.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// A 1-2-2.5-5 step that cuts `0..max` into about `ticks` intervals.
fn nice_step(max: f64, ticks: usize) -> f64 {
    let raw = (max / ticks.max(1) as f64).max(f64::MIN_POSITIVE);
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = match raw / magnitude {
        n if n <= 1.0 => 1.0,
        n if n <= 2.0 => 2.0,
        n if n <= 2.5 => 2.5,
        n if n <= 5.0 => 5.0,
        _ => 10.0,
    };
    step * magnitude
}

/// The top of a linear axis starting at zero and its tick step.
fn linear_axis(max: f64, ticks: usize) -> (f64, f64) {
    let max = if max.is_finite() && max > 0.0 { max } else { 1.0 };
    let step = nice_step(max, ticks);
    ((max / step).ceil() * step, step)
}

/// A tick label: integers with separators, otherwise only the decimals the step needs.
fn tick_label(v: f64, step: f64) -> String {
    if step >= 1.0 {
        return thousands(v);
    }
    let exponent = step.log10().floor();
    let mantissa = step / 10f64.powf(exponent);
    // 0.25 needs one more decimal than 0.2.
    let decimals = (-exponent) as usize + usize::from((mantissa - 2.5).abs() < 1e-9);
    format!("{v:.decimals$}")
}

/// `0.01` → `0.01 s`, `10` → `10 s`, for powers of ten on a log axis.
fn seconds_label(v: f64) -> String {
    if v >= 1.0 {
        format!("{} s", thousands(v))
    } else {
        let decimals = (-v.log10().round()) as usize;
        format!("{v:.decimals$} s")
    }
}

/// Draws the results as one SVG: a TPC-C panel if any file is a TPC-C run, a TPC-H panel if any
/// is a TPC-H run. Systems keep their file order, and a system (by label) keeps its colour in
/// both panels.
pub fn render_svg(results: &[Results], title: &str) -> Result<String> {
    if results.is_empty() {
        bail!("no results to draw");
    }
    let mut labels: Vec<String> = Vec::new();
    let mut system = |label: &str| -> usize {
        labels.iter().position(|l| l == label).unwrap_or_else(|| {
            labels.push(label.to_string());
            labels.len() - 1
        })
    };
    let mut tpcc: Vec<(usize, &TpccReport)> = Vec::new();
    let mut tpch: Vec<(usize, &TpchReport)> = Vec::new();
    for r in results {
        match r {
            Results::Tpcc(t) => tpcc.push((system(&t.label), t)),
            Results::Tpch(t) => tpch.push((system(&t.label), t)),
        }
    }

    let mut body = String::new();
    let mut y = 44.0;
    if !tpcc.is_empty() {
        y = tpcc_panel(&mut body, y, &tpcc) + 30.0;
    }
    if !tpch.is_empty() {
        y = tpch_panel(&mut body, y, &tpch) + 30.0;
    }
    let height = y.ceil();
    let mut svg = String::new();
    writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="Helvetica, Arial, sans-serif" font-size="12">"#
    )?;
    writeln!(svg, r##"<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>"##)?;
    writeln!(svg, r#"<text x="{LEFT}" y="26" font-size="18" font-weight="bold">{}</text>"#, esc(title))?;
    svg.push_str(&body);
    svg.push_str("</svg>\n");
    Ok(svg)
}

/// A plot area: where the axes go on the page.
struct Plot {
    left: f64,
    top: f64,
    width: f64,
    height: f64,
}

impl Plot {
    fn bottom(&self) -> f64 {
        self.top + self.height
    }
}

/// A horizontal grid line at `y` with its label left of the axis.
fn y_grid_line(out: &mut String, plot: &Plot, y: f64, label: &str) {
    let _ = writeln!(
        out,
        r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#dddddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
        plot.left,
        plot.left + plot.width,
        plot.left - 6.0,
        y + 4.0,
        esc(label)
    );
}

/// Horizontal grid lines and labels of a linear y axis from 0 to `max`.
fn y_grid_linear(out: &mut String, plot: &Plot, max: f64, step: f64) {
    let mut v = 0.0;
    while v <= max + step / 2.0 {
        y_grid_line(out, plot, plot.bottom() - v / max * plot.height, &tick_label(v, step));
        v += step;
    }
}

/// Axis lines and the two axis titles.
fn axes(out: &mut String, plot: &Plot, x_title: &str, y_title: &str) {
    let _ = writeln!(
        out,
        r##"<line x1="{l:.1}" y1="{t:.1}" x2="{l:.1}" y2="{b:.1}" stroke="#333333"/><line x1="{l:.1}" y1="{b:.1}" x2="{r:.1}" y2="{b:.1}" stroke="#333333"/>"##,
        l = plot.left,
        t = plot.top,
        b = plot.bottom(),
        r = plot.left + plot.width
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        plot.left + plot.width / 2.0,
        plot.bottom() + 36.0,
        esc(x_title)
    );
    let (x, y) = (plot.left - 60.0, plot.top + plot.height / 2.0);
    let _ = writeln!(
        out,
        r#"<text x="{x:.1}" y="{y:.1}" text-anchor="middle" transform="rotate(-90 {x:.1} {y:.1})">{}</text>"#,
        esc(y_title)
    );
}

/// One legend row: a colour swatch and a line of text.
fn legend_row(out: &mut String, y: f64, system: usize, text: &str) {
    let _ = writeln!(
        out,
        r#"<rect x="{LEFT}" y="{:.1}" width="14" height="10" fill="{}"/><text x="{:.1}" y="{y:.1}">{}</text>"#,
        y - 9.0,
        colour(system),
        LEFT + 20.0,
        esc(text)
    );
}

/// `a / b` as `0.24×`, or `-` when undefined.
fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 && a.is_finite() && b.is_finite() {
        format!("{:.2}×", a / b)
    } else {
        "-".to_string()
    }
}

/// The TPC-C panel; returns the y where it ends.
fn tpcc_panel(out: &mut String, top: f64, runs: &[(usize, &TpccReport)]) -> f64 {
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="{top:.1}" font-size="15" font-weight="bold">TPC-C: New-Order throughput over time (tpmC, higher is better)</text>"#
    );
    let base = runs[0].1;
    let _ = writeln!(
        out,
        r##"<text x="{LEFT}" y="{:.1}" fill="#555555">Overall tpmC of the measured window; ratios against {}.</text>"##,
        top + 20.0,
        esc(&base.label)
    );
    let mut y = top + 40.0;
    for (system, r) in runs {
        let warmup = if r.warmup_s > 0.0 { format!(" after {:.0} s warmup", r.warmup_s) } else { String::new() };
        let text = format!(
            "{}: {} tpmC ({}), {} warehouses, {} threads, {} protocol, {:.0} s measured{warmup}",
            r.label,
            thousands(r.tpmc),
            ratio(r.tpmc, base.tpmc),
            r.warehouses,
            r.threads,
            r.protocol,
            r.time_s,
        );
        legend_row(out, y, *system, &text);
        y += LEGEND_ROW;
    }
    let plot = Plot { left: LEFT, top: y + 8.0, width: WIDTH - LEFT - RIGHT, height: 280.0 };
    let x_max_raw = runs.iter().flat_map(|(_, r)| r.intervals.iter().map(|p| p.t)).fold(0.0, f64::max);
    let (x_max, x_step) = linear_axis(x_max_raw, 10);
    let y_max_raw = runs.iter().flat_map(|(_, r)| r.intervals.iter().map(|p| p.tpmc)).fold(0.0, f64::max);
    let (y_max, y_step) = linear_axis(y_max_raw, 6);

    // Warmup: shaded, so the eye reads the measured part.
    let warmup = runs.iter().map(|(_, r)| r.warmup_s).fold(0.0, f64::max);
    if warmup > 0.0 {
        let w = warmup.min(x_max) / x_max * plot.width;
        let _ = writeln!(
            out,
            r##"<rect x="{:.1}" y="{:.1}" width="{w:.1}" height="{:.1}" fill="#f2f2f2"/><text x="{:.1}" y="{:.1}" fill="#777777">warmup</text>"##,
            plot.left,
            plot.top,
            plot.height,
            plot.left + 4.0,
            plot.top + 14.0
        );
    }
    y_grid_linear(out, &plot, y_max, y_step);
    let mut t = 0.0;
    while t <= x_max + x_step / 2.0 {
        let x = plot.left + t / x_max * plot.width;
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{b:.1}" x2="{x:.1}" y2="{:.1}" stroke="#333333"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            plot.bottom() + 4.0,
            plot.bottom() + 18.0,
            tick_label(t, x_step),
            b = plot.bottom(),
        );
        t += x_step;
    }
    axes(out, &plot, "time since the start of the run (s)", "tpmC (New-Order transactions per minute)");

    for (system, r) in runs {
        let points: Vec<(f64, f64, f64)> = r
            .intervals
            .iter()
            .map(|p| (p.t, plot.left + p.t / x_max * plot.width, plot.bottom() - p.tpmc / y_max * plot.height))
            .collect();
        let path: Vec<String> = points.iter().map(|(_, x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"><title>{}</title></polyline>"#,
            path.join(" "),
            colour(*system),
            esc(&r.label)
        );
        for ((t, x, y), p) in points.iter().zip(&r.intervals) {
            let _ = writeln!(
                out,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="2.5" fill="{}"><title>{}: {} tpmC at {t:.0} s</title></circle>"#,
                colour(*system),
                esc(&r.label),
                thousands(p.tpmc)
            );
        }
    }
    plot.bottom() + 44.0
}

/// Whether a query ran and gave the right answer (or was not checked).
fn answered(q: &QueryResult) -> bool {
    q.status == "ok" && !q.times_s.is_empty() && q.check.as_deref().is_none_or(|c| c == "pass")
}

/// Per system: the total and the geometric mean of the median times over the queries every
/// system answered; `None` when there are no such queries.
fn tpch_totals(runs: &[(usize, &TpchReport)]) -> (Vec<usize>, Vec<Option<(f64, f64)>>) {
    let mut common: Vec<usize> = runs[0].1.queries.iter().map(|q| q.query).collect();
    common.sort_unstable();
    common.dedup();
    common.retain(|n| runs.iter().all(|(_, r)| r.queries.iter().any(|q| q.query == *n && answered(q))));
    let totals = runs
        .iter()
        .map(|(_, r)| {
            if common.is_empty() {
                return None;
            }
            let times: Vec<f64> = common
                .iter()
                .filter_map(|n| r.queries.iter().find(|q| q.query == *n).and_then(QueryResult::median_s))
                .collect();
            let total: f64 = times.iter().sum();
            let geomean = (times.iter().map(|t| t.max(1e-6).ln()).sum::<f64>() / times.len() as f64).exp();
            Some((total, geomean))
        })
        .collect();
    (common, totals)
}

/// The TPC-H panel; returns the y where it ends.
fn tpch_panel(out: &mut String, top: f64, runs: &[(usize, &TpchReport)]) -> f64 {
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="{top:.1}" font-size="15" font-weight="bold">TPC-H: time per query (median of the runs, seconds, log scale, lower is better)</text>"#
    );
    let (common, totals) = tpch_totals(runs);
    let base = runs[0].1;
    let _ = writeln!(
        out,
        r##"<text x="{LEFT}" y="{:.1}" fill="#555555">Total and geometric mean over the {} queries every system answered correctly; speed against {} (higher is faster).</text>"##,
        top + 20.0,
        common.len(),
        esc(&base.label)
    );
    let mut y = top + 40.0;
    for ((system, r), total) in runs.iter().zip(&totals) {
        let ok = r.queries.iter().filter(|q| answered(q)).count();
        let mut text = format!("{}: SF {}, {ok} of {} queries answered", r.label, r.sf, r.queries.len());
        if let (Some((total, geomean)), Some((base_total, base_geomean))) = (total, totals[0]) {
            let _ = write!(
                text,
                ", total {total:.2} s ({}), geometric mean {geomean:.3} s ({})",
                ratio(base_total, *total),
                ratio(base_geomean, *geomean),
            );
        }
        legend_row(out, y, *system, &text);
        y += LEGEND_ROW;
    }
    let mut queries: Vec<usize> = runs.iter().flat_map(|(_, r)| r.queries.iter().map(|q| q.query)).collect();
    queries.sort_unstable();
    queries.dedup();

    let plot = Plot { left: LEFT, top: y + 8.0, width: WIDTH - LEFT - RIGHT, height: 300.0 };
    let times = runs.iter().flat_map(|(_, r)| r.queries.iter().filter_map(QueryResult::median_s)).filter(|t| *t > 0.0);
    let (lo, hi) = times.fold((f64::INFINITY, 0.0f64), |(lo, hi), t| (lo.min(t), hi.max(t)));
    let (mut lo_exp, mut hi_exp) =
        if hi > 0.0 { (lo.log10().floor() as i32, hi.log10().ceil() as i32) } else { (-3, 0) };
    if hi_exp <= lo_exp {
        hi_exp = lo_exp + 1;
    }
    lo_exp = lo_exp.max(hi_exp - 8).max(-6);
    let span = f64::from(hi_exp - lo_exp);
    let y_of = |t: f64| -> f64 {
        let frac = ((t.max(10f64.powi(lo_exp)).log10() - f64::from(lo_exp)) / span).clamp(0.0, 1.0);
        plot.bottom() - frac * plot.height
    };
    for e in lo_exp..=hi_exp {
        let v = 10f64.powi(e);
        y_grid_line(out, &plot, y_of(v), &seconds_label(v));
    }
    axes(out, &plot, "query", "seconds per query (log scale)");

    let group = plot.width / queries.len().max(1) as f64;
    let bar = group * 0.8 / runs.len() as f64;
    for (g, n) in queries.iter().enumerate() {
        let gx = plot.left + g as f64 * group;
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">Q{n}</text>"#,
            gx + group / 2.0,
            plot.bottom() + 18.0
        );
        for (k, (system, r)) in runs.iter().enumerate() {
            let x = gx + group * 0.1 + k as f64 * bar;
            let cx = x + bar / 2.0;
            let Some(q) = r.queries.iter().find(|q| q.query == *n) else {
                continue;
            };
            let problem = match (q.status.as_str(), q.check.as_deref()) {
                ("ok", None | Some("pass")) => None,
                ("ok", Some(check)) => Some(format!("wrong answer: {check}")),
                (status, _) => Some(format!("{status}: {}", q.error.as_deref().unwrap_or("no result"))),
            };
            match q.median_s() {
                Some(t) if q.status == "ok" => {
                    let top_y = y_of(t);
                    let tip = format!(
                        "{} Q{n}: {t:.3} s (median of {}){}",
                        r.label,
                        q.times_s.len(),
                        problem.as_deref().map(|p| format!(", {p}")).unwrap_or_default()
                    );
                    let _ = writeln!(
                        out,
                        r#"<rect x="{x:.1}" y="{top_y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}</title></rect>"#,
                        (bar - 1.0).max(1.0),
                        (plot.bottom() - top_y).max(1.0),
                        colour(*system),
                        esc(&tip)
                    );
                    if problem.is_some() {
                        // A wrong answer still has a time; mark it so it is not read as a win.
                        let _ = writeln!(
                            out,
                            r##"<text x="{cx:.1}" y="{:.1}" text-anchor="middle" fill="#cc0000" font-weight="bold">!<title>{}</title></text>"##,
                            top_y - 3.0,
                            esc(&tip)
                        );
                    }
                }
                _ => {
                    let tip = format!("{} Q{n}: {}", r.label, problem.unwrap_or_else(|| "no result".to_string()));
                    let mark = if q.status == "timeout" { "timeout" } else { "error" };
                    let ty = plot.bottom() - 6.0;
                    let _ = writeln!(
                        out,
                        r##"<text x="{cx:.1}" y="{ty:.1}" fill="{}" font-size="10" transform="rotate(-90 {cx:.1} {ty:.1})">✕ {mark}<title>{}</title></text>"##,
                        colour(*system),
                        esc(&tip)
                    );
                }
            }
        }
    }
    plot.bottom() + 44.0
}

/// The ratios as Markdown tables (for the terminal and for BENCHMARKS.md).
pub fn summary_markdown(results: &[Results]) -> String {
    let mut out = String::new();
    let tpcc: Vec<&TpccReport> =
        results.iter().filter_map(|r| if let Results::Tpcc(t) = r { Some(t) } else { None }).collect();
    let tpch: Vec<(usize, &TpchReport)> =
        results.iter().filter_map(|r| if let Results::Tpch(t) = r { Some(t) } else { None }).enumerate().collect();
    if let Some(base) = tpcc.first() {
        let _ = writeln!(
            out,
            "| TPC-C system | warehouses | threads | protocol | seconds | tpmC | vs {} | errors | retries |",
            base.label
        );
        let _ = writeln!(out, "|---|---:|---:|---|---:|---:|---:|---:|---:|");
        for r in &tpcc {
            let errors: u64 = r.kinds.values().map(|k| k.errors).sum();
            let retries: u64 = r.kinds.values().map(|k| k.retries).sum();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {:.0} | {} | {} | {errors} | {retries} |",
                r.label,
                r.warehouses,
                r.threads,
                r.protocol,
                r.time_s,
                thousands(r.tpmc),
                ratio(r.tpmc, base.tpmc)
            );
        }
    }
    if let Some((_, base)) = tpch.first() {
        if !out.is_empty() {
            out.push('\n');
        }
        let (common, totals) = tpch_totals(&tpch);
        let _ = writeln!(
            out,
            "| TPC-H system | SF | answered | total s ({} common queries) | geomean s | speed vs {} (total) | speed (geomean) |",
            common.len(),
            base.label
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
        for ((_, r), total) in tpch.iter().zip(&totals) {
            let ok = r.queries.iter().filter(|q| answered(q)).count();
            let (t, g, rt, rg) = match (total, totals[0]) {
                (Some((t, g)), Some((bt, bg))) => (format!("{t:.2}"), format!("{g:.3}"), ratio(bt, *t), ratio(bg, *g)),
                _ => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            let _ = writeln!(out, "| {} | {} | {ok}/{} | {t} | {g} | {rt} | {rg} |", r.label, r.sf, r.queries.len());
        }
        let failed: Vec<String> = tpch
            .iter()
            .flat_map(|(_, r)| {
                r.queries.iter().filter(|q| !answered(q)).map(|q| {
                    let why = match q.check.as_deref() {
                        Some(c) if q.status == "ok" => c.to_string(),
                        _ => format!("{}: {}", q.status, q.error.as_deref().unwrap_or("")),
                    };
                    format!("- {} Q{}: {}", r.label, q.query, why.trim_end_matches(": "))
                })
            })
            .collect();
        if !failed.is_empty() {
            let _ = writeln!(out, "\nNot answered:\n{}", failed.join("\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::tpcc::run::IntervalPoint;

    fn tpcc(label: &str, tpmc: f64) -> TpccReport {
        TpccReport {
            benchmark: "tpcc".into(),
            label: label.into(),
            server_version: "v".into(),
            target: "127.0.0.1:1".into(),
            warehouses: 4,
            threads: 8,
            time_s: 60.0,
            warmup_s: 10.0,
            protocol: "binary".into(),
            think_time: false,
            intervals: (1..=7)
                .map(|i| IntervalPoint {
                    t: f64::from(i) * 10.0,
                    warmup: i == 1,
                    tpmc: tpmc * (0.9 + f64::from(i) / 50.0),
                    tps: BTreeMap::new(),
                })
                .collect(),
            tpmc,
            efficiency: 0.0,
            kinds: BTreeMap::new(),
            errors: BTreeMap::new(),
        }
    }

    fn query(n: usize, t: f64, status: &str, check: Option<&str>) -> QueryResult {
        QueryResult {
            query: n,
            times_s: if status == "ok" { vec![t, t * 2.0, t / 2.0] } else { vec![] },
            status: status.into(),
            error: (status != "ok").then(|| "Query execution was interrupted".into()),
            rows: 1,
            check: check.map(Into::into),
        }
    }

    fn tpch(label: &str, scale: f64) -> TpchReport {
        TpchReport {
            benchmark: "tpch".into(),
            label: label.into(),
            server_version: "v".into(),
            target: "127.0.0.1:1".into(),
            sf: 0.01,
            queries: (1..=22).map(|n| query(n, 0.01 * n as f64 * scale, "ok", Some("pass"))).collect(),
        }
    }

    /// Every text node of the SVG, after parsing it as XML (so it is well-formed).
    fn texts(svg: &str) -> Vec<String> {
        let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        doc.descendants().filter(|n| n.is_text()).filter_map(|n| n.text().map(str::to_string)).collect()
    }

    #[test]
    fn tpcc_chart_has_a_labelled_line_per_system_with_units() {
        let svg =
            render_svg(&[Results::Tpcc(tpcc("Strata <dev>", 14_329.0)), Results::Tpcc(tpcc("MariaDB", 59_379.0))], "t")
                .expect("render");
        let texts = texts(&svg);
        let has = |s: &str| texts.iter().any(|t| t.contains(s));
        assert!(has("ratios against Strata <dev>."), "{texts:?}");
        assert!(has("Strata <dev>: 14,329 tpmC (1.00×), 4 warehouses, 8 threads"), "{texts:?}");
        assert!(has("MariaDB: 59,379 tpmC (4.14×)"), "{texts:?}");
        assert!(has("tpmC (New-Order transactions per minute)"));
        assert!(has("time since the start of the run (s)"));
        assert!(has("warmup"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 14);
        assert!(svg.contains(colour(0)) && svg.contains(colour(1)));
    }

    #[test]
    fn tpch_chart_has_a_bar_per_answered_query_and_marks_failures() {
        let mut strata = tpch("Strata", 10.0);
        strata.queries[18] = query(19, 0.0, "timeout", None);
        strata.queries[4] = query(5, 0.5, "ok", Some("fail: row 1 differs"));
        let maria = tpch("MariaDB", 1.0);
        let results = [Results::Tpch(strata), Results::Tpch(maria)];
        let svg = render_svg(&results, "Strata vs MariaDB").expect("render");
        let texts = texts(&svg);
        let has = |s: &str| texts.iter().any(|t| t.contains(s));
        assert!(has("Strata vs MariaDB"));
        assert!(has("seconds per query (log scale)"));
        assert!(has("Strata: SF 0.01, 20 of 22 queries answered"), "{texts:?}");
        // 20 common queries; MariaDB is 10x faster on each, so 10x by either measure.
        assert!(has("over the 20 queries every system answered correctly; speed against Strata"), "{texts:?}");
        assert!(has("MariaDB: SF 0.01, 22 of 22 queries answered, total 2.29 s (10.00×), geometric mean"), "{texts:?}");
        assert!(has("✕ timeout"));
        assert!(has("Q22"));
        // 21 Strata bars (the wrong answer still has its time) + 22 MariaDB bars + background.
        assert_eq!(svg.matches("<rect").count(), 1 + 2 + 21 + 22, "{svg}");
        assert!(svg.contains("wrong answer: fail: row 1 differs"));

        let md = summary_markdown(&results);
        assert!(md.contains("| Strata | 0.01 | 20/22 |"), "{md}");
        assert!(md.contains("| MariaDB | 0.01 | 22/22 |"), "{md}");
        assert!(md.contains("10.00× | 10.00× |"), "{md}");
        assert!(md.contains("- Strata Q19: timeout: Query execution was interrupted"), "{md}");
        assert!(md.contains("- Strata Q5: fail: row 1 differs"), "{md}");
    }

    #[test]
    fn both_benchmarks_in_one_report() {
        let results = [Results::Tpcc(tpcc("A", 100.0)), Results::Tpch(tpch("A", 1.0)), Results::Tpcc(tpcc("B", 50.0))];
        let svg = render_svg(&results, "mixed").expect("render");
        let texts = texts(&svg);
        assert!(texts.iter().any(|t| t.starts_with("TPC-C:")));
        assert!(texts.iter().any(|t| t.starts_with("TPC-H:")));
        assert!(texts.iter().any(|t| t.contains("B: 50 tpmC (0.50×)")));
        // A keeps its colour in the TPC-H panel; B is the second system.
        let swatches: Vec<&str> = svg
            .match_indices(r#"width="14" height="10" fill=""#)
            .map(|(i, m)| &svg[i + m.len()..i + m.len() + 7])
            .collect();
        assert_eq!(swatches, [colour(0), colour(1), colour(0)]);
        let md = summary_markdown(&results);
        assert!(md.contains("| B | 4 | 8 | binary | 60 | 50 | 0.50× | 0 | 0 |"), "{md}");
    }

    #[test]
    fn load_reads_both_kinds_and_rejects_others() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = dir.path().join("a.json");
        std::fs::write(&a, serde_json::to_string(&tpcc("A", 1.0)).expect("json")).expect("write");
        assert!(matches!(load(&a), Ok(Results::Tpcc(r)) if r.label == "A"));
        let b = dir.path().join("b.json");
        std::fs::write(&b, serde_json::to_string(&tpch("B", 1.0)).expect("json")).expect("write");
        assert!(matches!(load(&b), Ok(Results::Tpch(r)) if r.queries.len() == 22));
        let c = dir.path().join("c.json");
        std::fs::write(&c, r#"{"benchmark":"sysbench"}"#).expect("write");
        let err = load(&c).expect_err("unknown benchmark").to_string();
        assert!(err.contains("\"sysbench\""), "{err}");
        std::fs::write(&c, r#"{"benchmark":"tpcc","label":"x"}"#).expect("write");
        assert!(load(&c).is_err());
        assert!(render_svg(&[], "x").is_err());
    }

    #[test]
    fn axes_use_round_steps() {
        assert_eq!(linear_axis(59_379.0, 6), (60_000.0, 10_000.0));
        assert_eq!(linear_axis(70.0, 10), (70.0, 10.0));
        assert_eq!(linear_axis(0.0, 5), (1.0, 0.2));
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(tick_label(0.5, 0.5), "0.5");
        assert_eq!(tick_label(0.75, 0.25), "0.75");
        assert_eq!(seconds_label(0.001), "0.001 s");
        assert_eq!(seconds_label(100.0), "100 s");
    }
}
