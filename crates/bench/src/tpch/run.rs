//! `tpch run` and `tpch check`: runs the chosen queries (each `repeat` times, each bounded by
//! a timeout), prints a line per run, and with a reference answer for the scale factor
//! compares the result. A query that fails or times out is reported with the server's error
//! and the run goes on.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};
use serde::{Deserialize, Serialize};

use super::answer::{compare, Answer};
use super::queries::{format_sf, query};
use crate::conn::{describe, Target};

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Scale factor the data was loaded at (for query 11 and the answers).
    pub sf: f64,
    /// Query numbers, in order.
    pub queries: Vec<usize>,
    /// Runs per query.
    pub repeat: usize,
    /// Limit per run.
    pub timeout: Duration,
    /// Compare results with the reference answers.
    pub check: bool,
    /// Directory with `sf<sf>/qNN.tsv` answer files.
    pub answers: PathBuf,
    /// Name of the system in reports.
    pub label: Option<String>,
    /// Where to write the JSON results.
    pub json: Option<PathBuf>,
    /// Statements run on each connection before its queries.
    pub init_sql: Vec<String>,
}

/// A connection to `db` that has run `init`.
async fn connect(target: &Target, db: &str, init: &[String]) -> Result<Conn> {
    let mut conn = target.connect(Some(db)).await.with_context(|| format!("cannot connect to {}", target.addr()))?;
    for sql in init {
        conn.query_drop(sql).await.with_context(|| format!("--init-sql {sql}"))?;
    }
    Ok(conn)
}

/// The outcome of one query.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct QueryResult {
    /// Query number.
    pub query: usize,
    /// Seconds of each successful run.
    pub times_s: Vec<f64>,
    /// `ok`, `error` or `timeout`.
    pub status: String,
    /// The server's error, if any.
    pub error: Option<String>,
    /// Rows returned (last run).
    pub rows: usize,
    /// `pass`, `fail: ...`, `no answer` or absent when not checked.
    pub check: Option<String>,
}

impl QueryResult {
    /// The median of the run times.
    pub fn median_s(&self) -> Option<f64> {
        let mut t = self.times_s.clone();
        t.sort_by(f64::total_cmp);
        t.get(t.len() / 2).copied()
    }
}

/// The results of a TPC-H run, as `--json` writes them.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TpchReport {
    /// Always `"tpch"`.
    pub benchmark: String,
    /// The system's name in reports.
    pub label: String,
    /// `SELECT VERSION()` of the server.
    pub server_version: String,
    /// `host:port`.
    pub target: String,
    /// Scale factor.
    pub sf: f64,
    /// Per query, in run order.
    pub queries: Vec<QueryResult>,
}

/// A result value as text (the text protocol sends everything as bytes).
fn render(v: &Value) -> Option<String> {
    match v {
        Value::NULL => None,
        Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::Int(n) => Some(n.to_string()),
        Value::UInt(n) => Some(n.to_string()),
        Value::Float(f) => Some(f.to_string()),
        Value::Double(f) => Some(f.to_string()),
        Value::Date(y, m, d, 0, 0, 0, 0) => Some(format!("{y:04}-{m:02}-{d:02}")),
        other => Some(other.as_sql(true).trim_matches('\'').to_string()),
    }
}

async fn run_once(conn: &mut Conn, sql: &str) -> Result<Answer, mysql_async::Error> {
    let mut result = conn.query_iter(sql).await?;
    let columns = result.columns_ref().iter().map(|c| c.name_str().into_owned()).collect();
    let rows: Vec<Row> = result.collect().await?;
    drop(result);
    Ok(Answer { columns, rows: rows.into_iter().map(|r| r.unwrap().iter().map(render).collect()).collect() })
}

/// The reference answer of query `n` at `sf`, if the directory has one.
pub fn reference(answers: &Path, sf: f64, n: usize) -> Option<Answer> {
    let path = answers.join(format!("sf{}", format_sf(sf))).join(format!("q{n:02}.tsv"));
    std::fs::read_to_string(path).ok().map(|t| Answer::parse(&t))
}

/// Runs the queries against `db`.
pub async fn run(target: &Target, db: &str, opts: RunOptions) -> Result<TpchReport> {
    let mut conn = connect(target, db, &opts.init_sql).await?;
    let version: String = conn.query_first("SELECT VERSION()").await.ok().flatten().unwrap_or_default();
    let label = opts.label.clone().unwrap_or_else(|| version.clone());
    let mut out = std::io::stdout();
    writeln!(
        out,
        "tpch sf {} on {} ({label}): queries {:?}, {} run(s) each, timeout {:?}",
        format_sf(opts.sf),
        target.addr(),
        opts.queries,
        opts.repeat,
        opts.timeout
    )?;
    let mut results = Vec::new();
    for &n in &opts.queries {
        let sql = query(n, opts.sf);
        let mut r =
            QueryResult { query: n, times_s: Vec::new(), status: "ok".into(), error: None, rows: 0, check: None };
        let mut last = None;
        for i in 0..opts.repeat.max(1) {
            let started = Instant::now();
            match tokio::time::timeout(opts.timeout, run_once(&mut conn, &sql)).await {
                Ok(Ok(answer)) => {
                    let secs = started.elapsed().as_secs_f64();
                    writeln!(out, "Q{n:<2} run {}: {secs:>9.3} s, {} rows", i + 1, answer.rows.len())?;
                    r.times_s.push(secs);
                    r.rows = answer.rows.len();
                    last = Some(answer);
                }
                Ok(Err(e)) => {
                    writeln!(out, "Q{n:<2} run {}: error {}", i + 1, describe(&e))?;
                    r.status = "error".into();
                    r.error = Some(describe(&e));
                    if crate::conn::is_connection_lost(&e) {
                        conn = connect(target, db, &opts.init_sql).await?;
                    }
                    break;
                }
                Err(_) => {
                    writeln!(out, "Q{n:<2} run {}: timeout after {:?}", i + 1, opts.timeout)?;
                    r.status = "timeout".into();
                    r.error = Some(format!("timeout after {:?}", opts.timeout));
                    // The connection is mid-result: stop the statement and start afresh.
                    let id = conn.id();
                    if let Ok(mut killer) = target.connect(Some(db)).await {
                        let _ = killer.query_drop(format!("KILL QUERY {id}")).await;
                    }
                    conn = connect(target, db, &opts.init_sql).await?;
                    break;
                }
            }
        }
        if opts.check {
            r.check = Some(match (&last, reference(&opts.answers, opts.sf, n)) {
                (None, _) => "fail: no result".into(),
                (Some(_), None) => "no answer".into(),
                (Some(a), Some(e)) => match compare(a, &e) {
                    Ok(()) => "pass".into(),
                    Err(d) => format!("fail: {d}"),
                },
            });
            writeln!(out, "Q{n:<2} check: {}", r.check.as_deref().unwrap_or(""))?;
        }
        results.push(r);
    }
    let report = TpchReport {
        benchmark: "tpch".into(),
        label,
        server_version: version,
        target: target.addr(),
        sf: opts.sf,
        queries: results,
    };
    print_summary(&mut out, &report)?;
    if let Some(path) = &opts.json {
        crate::report::save(&mut out, path, &report)?;
    }
    Ok(report)
}

fn print_summary(out: &mut impl Write, r: &TpchReport) -> Result<()> {
    writeln!(out, "\nSummary (median of runs, seconds)")?;
    let mut by_status: BTreeMap<&str, usize> = BTreeMap::new();
    let mut total = 0.0;
    for q in &r.queries {
        *by_status.entry(q.status.as_str()).or_default() += 1;
        let t = q.median_s();
        total += t.unwrap_or(0.0);
        writeln!(
            out,
            "Q{:<2} {:>10} {:<8} {}",
            q.query,
            t.map(|t| format!("{t:.3}")).unwrap_or_else(|| "-".into()),
            q.status,
            q.check.as_deref().or(q.error.as_deref()).unwrap_or("")
        )?;
    }
    let statuses: Vec<String> = by_status.iter().map(|(s, n)| format!("{n} {s}")).collect();
    writeln!(out, "total {total:.3} s over successful queries; {}", statuses.join(", "))?;
    if r.queries.iter().any(|q| q.check.is_some()) {
        let passed = r.queries.iter().filter(|q| q.check.as_deref() == Some("pass")).count();
        writeln!(out, "check: {passed} of {} queries match the reference answers", r.queries.len())?;
    }
    Ok(())
}
