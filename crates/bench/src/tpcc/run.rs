//! `tpcc run`: terminals (one connection each) draw transactions from the 100-card deck and
//! run them back to back (or with the spec's keying and think times), for a warmup and then a
//! measured window. Every interval prints per-transaction throughput and latency; the end
//! prints tpmC, efficiency, counts, retries, errors and HDR latency percentiles.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use mysql_async::prelude::Queryable;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::load;
use super::mix::{Deck, TxnKind};
use super::random::Constants;
use super::txn::{execute, Outcome, Terminal};
use crate::conn::{describe, is_connection_lost, is_retryable, Protocol, Session, Target};
use crate::stats::{Board, TallySummary};

/// The tpmC one warehouse can produce at most under the spec's keying and think times
/// (efficiency is measured against it).
pub const MAX_TPMC_PER_WAREHOUSE: f64 = 12.86;

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Warehouses to use (`None`: all in the database).
    pub warehouses: Option<u32>,
    /// Terminals (connections).
    pub threads: usize,
    /// Measured duration.
    pub time: Duration,
    /// Unmeasured run before it.
    pub warmup: Duration,
    /// Reporting interval.
    pub interval: Duration,
    /// Spec keying and think times (5.2.5.7) instead of back-to-back transactions.
    pub think_time: bool,
    /// Protocol for the statements.
    pub protocol: Protocol,
    /// Retries of a transaction after a deadlock or conflict.
    pub max_retries: u32,
    /// Name of the system in reports.
    pub label: Option<String>,
    /// Where to write the JSON results.
    pub json: Option<PathBuf>,
}

/// Throughput of one reporting interval.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct IntervalPoint {
    /// Seconds since the start of the run (warmup included) at the end of the interval.
    pub t: f64,
    /// Whether the interval is in the warmup.
    pub warmup: bool,
    /// New-Orders per minute in the interval.
    pub tpmc: f64,
    /// Transactions per second per kind.
    pub tps: BTreeMap<String, f64>,
}

/// The results of a TPC-C run, as `--json` writes them.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TpccReport {
    /// Always `"tpcc"`.
    pub benchmark: String,
    /// The system's name in reports.
    pub label: String,
    /// `SELECT VERSION()` of the server.
    pub server_version: String,
    /// `host:port`.
    pub target: String,
    /// Warehouses.
    pub warehouses: u32,
    /// Terminals.
    pub threads: usize,
    /// Measured seconds.
    pub time_s: f64,
    /// Warmup seconds.
    pub warmup_s: f64,
    /// `"binary"` or `"text"`.
    pub protocol: String,
    /// Whether keying and think times were used.
    pub think_time: bool,
    /// One point per interval.
    pub intervals: Vec<IntervalPoint>,
    /// New-Orders per minute over the measured window.
    pub tpmc: f64,
    /// tpmC as a percentage of 12.86 per warehouse.
    pub efficiency: f64,
    /// Per transaction kind over the measured window.
    pub kinds: BTreeMap<String, TallySummary>,
    /// Distinct error messages per kind with their counts.
    pub errors: BTreeMap<String, BTreeMap<String, u64>>,
}

/// Keying time and mean think time of a transaction, seconds (5.2.5.7).
fn pacing(kind: TxnKind) -> (f64, f64) {
    match kind {
        TxnKind::NewOrder => (18.0, 12.0),
        TxnKind::Payment => (3.0, 12.0),
        TxnKind::OrderStatus => (2.0, 10.0),
        TxnKind::Delivery | TxnKind::StockLevel => (2.0, 5.0),
    }
}

/// A think time: negative exponential with the given mean, cut at ten times the mean.
fn think(rng: &mut impl Rng, mean: f64) -> f64 {
    let r: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    (-r.ln() * mean).min(10.0 * mean)
}

struct Shared {
    start: Instant,
    measure_from: Instant,
    end: Instant,
    interval: Mutex<Board>,
    total: Mutex<Board>,
}

impl Shared {
    fn record(&self, kind: TxnKind, at: Instant, micros: u64, retries: u64, outcome: Result<Outcome, String>) {
        if at > self.end {
            return;
        }
        let mut boards = vec![&self.interval];
        if at >= self.measure_from {
            boards.push(&self.total);
        }
        for b in boards {
            let mut b = b.lock().expect("board lock");
            match &outcome {
                Ok(o) => {
                    let t = b.tally(kind.name());
                    t.record(micros);
                    t.retries += retries;
                    if *o == Outcome::RolledBack {
                        t.rolled_back += 1;
                    }
                }
                Err(msg) => {
                    b.tally(kind.name()).retries += retries;
                    b.error(kind.name(), msg.clone());
                }
            }
        }
    }
}

async fn terminal(
    target: Target,
    db: String,
    protocol: Protocol,
    term: Terminal,
    k: Constants,
    opts: RunOptions,
    shared: Arc<Shared>,
) -> Result<()> {
    let mut rng = StdRng::from_entropy();
    let mut deck = Deck::default();
    let mut session = Session { conn: target.connect(Some(&db)).await.context("terminal connect")?, protocol };
    while Instant::now() < shared.end {
        let kind = deck.draw(&mut rng);
        let (keying, mean_think) = pacing(kind);
        if opts.think_time {
            tokio::time::sleep_until((Instant::now() + Duration::from_secs_f64(keying)).min(shared.end)).await;
            if Instant::now() >= shared.end {
                break;
            }
        }
        let input = term.input(kind, &mut rng, &k);
        let started = Instant::now();
        let mut retries = 0;
        let result = loop {
            match execute(&mut session, &input).await {
                Ok(o) => break Ok(o),
                Err(e) => {
                    if is_connection_lost(&e) {
                        // Reconnect and count the transaction as failed.
                        let msg = describe(&e);
                        loop {
                            if let Ok(c) = target.connect(Some(&db)).await {
                                session.conn = c;
                                break;
                            }
                            if Instant::now() >= shared.end {
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        break Err(msg);
                    }
                    let _ = session.simple("ROLLBACK").await;
                    if is_retryable(&e) && retries < opts.max_retries && Instant::now() < shared.end {
                        retries += 1;
                        continue;
                    }
                    break Err(describe(&e));
                }
            }
        };
        let done = Instant::now();
        shared.record(kind, done, (done - started).as_micros() as u64, u64::from(retries), result);
        if opts.think_time {
            let t = think(&mut rng, mean_think);
            tokio::time::sleep_until((Instant::now() + Duration::from_secs_f64(t)).min(shared.end)).await;
        }
    }
    Ok(())
}

fn line_for(kind: &str, s: &TallySummary) -> String {
    format!(
        "{kind:<13} {:>8} {:>9.1} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>7} {:>6}",
        s.count, s.per_sec, s.avg_ms, s.p50_ms, s.p95_ms, s.p99_ms, s.max_ms, s.retries, s.errors
    )
}

const HEADER: &str = "kind             count       tps   avg ms   p50 ms   p95 ms   p99 ms    max ms retries errors";

/// Runs the workload against `db` and returns (and prints) the results.
pub async fn run(target: &Target, db: &str, opts: RunOptions) -> Result<TpccReport> {
    let (mut conn, loaded) = crate::loader::open_loaded(target, db, "warehouse", "tpcc").await?;
    let loaded = loaded as u32;
    let warehouses = opts.warehouses.unwrap_or(loaded);
    if warehouses > loaded {
        bail!("--warehouses {warehouses} but the database holds {loaded}");
    }
    let version: String = conn.query_first("SELECT VERSION()").await.ok().flatten().unwrap_or_default();
    drop(conn);
    let label = opts.label.clone().unwrap_or_else(|| version.clone());
    let k = Constants::for_run(&load::constants(), &mut StdRng::from_entropy());

    let start = Instant::now();
    let shared = Arc::new(Shared {
        start,
        measure_from: start + opts.warmup,
        end: start + opts.warmup + opts.time,
        interval: Mutex::new(Board::default()),
        total: Mutex::new(Board::default()),
    });
    let mut out = std::io::stdout();
    writeln!(
        out,
        "tpcc run on {} ({label}): {warehouses} warehouses, {} threads, {:?} warmup + {:?}, {} protocol{}",
        target.addr(),
        opts.threads,
        opts.warmup,
        opts.time,
        protocol_name(opts.protocol),
        if opts.think_time { ", keying and think times" } else { "" }
    )?;
    let mut home_d = StdRng::from_entropy();
    let mut tasks = Vec::new();
    for t in 0..opts.threads.max(1) {
        let w = warehouses as usize;
        let term = if opts.threads >= w {
            Terminal {
                home_w: Some((t % w) as u32 + 1),
                home_d: ((t / w) % load::DISTRICTS as usize) as u32 + 1,
                warehouses,
            }
        } else {
            Terminal { home_w: None, home_d: home_d.gen_range(1..=load::DISTRICTS), warehouses }
        };
        tasks.push(tokio::spawn(terminal(
            target.clone(),
            db.to_string(),
            opts.protocol,
            term,
            k,
            opts.clone(),
            shared.clone(),
        )));
    }

    // Interval reports until the end.
    let mut intervals = Vec::new();
    let mut next = start + opts.interval;
    loop {
        let now_end = next.min(shared.end);
        tokio::time::sleep_until(now_end).await;
        let board = std::mem::take(&mut *shared.interval.lock().expect("board lock"));
        let t = (now_end - shared.start).as_secs_f64();
        let secs = (now_end - (next - opts.interval)).as_secs_f64().max(1e-3);
        let warmup = now_end <= shared.measure_from;
        let mut tps = BTreeMap::new();
        for kind in TxnKind::ALL {
            let s = board.tallies.get(kind.name()).map(|x| x.summary(secs));
            let Some(s) = s else { continue };
            writeln!(
                out,
                "[{t:>6.0}s{}] {:<13} tps {:>8.1}  p50 {:>7.2} ms  p95 {:>7.2} ms  p99 {:>7.2} ms  retries {} errors {}",
                if warmup { " warmup" } else { "" },
                kind.name(),
                s.per_sec,
                s.p50_ms,
                s.p95_ms,
                s.p99_ms,
                s.retries,
                s.errors
            )?;
            tps.insert(kind.name().to_string(), s.per_sec);
        }
        let tpmc = tps.get(TxnKind::NewOrder.name()).copied().unwrap_or(0.0) * 60.0;
        writeln!(out, "[{t:>6.0}s{}] tpmC {tpmc:.1}", if warmup { " warmup" } else { "" })?;
        intervals.push(IntervalPoint { t, warmup, tpmc, tps });
        if now_end >= shared.end {
            break;
        }
        next += opts.interval;
    }
    for t in tasks {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => bail!("a terminal stopped: {e:#}"),
            Err(e) => bail!("a terminal panicked: {e}"),
        }
    }

    let total = std::mem::take(&mut *shared.total.lock().expect("board lock"));
    let secs = opts.time.as_secs_f64();
    let kinds: BTreeMap<String, TallySummary> = TxnKind::ALL
        .iter()
        .map(|k| (k.name().to_string(), total.tallies.get(k.name()).cloned().unwrap_or_default().summary(secs)))
        .collect();
    let tpmc = kinds[TxnKind::NewOrder.name()].count as f64 / (secs / 60.0);
    let efficiency = tpmc / (MAX_TPMC_PER_WAREHOUSE * f64::from(warehouses)) * 100.0;
    let errors: BTreeMap<String, BTreeMap<String, u64>> =
        total.error_samples.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let report = TpccReport {
        benchmark: "tpcc".into(),
        label,
        server_version: version,
        target: target.addr(),
        warehouses,
        threads: opts.threads,
        time_s: secs,
        warmup_s: opts.warmup.as_secs_f64(),
        protocol: protocol_name(opts.protocol).into(),
        think_time: opts.think_time,
        intervals,
        tpmc,
        efficiency,
        kinds,
        errors,
    };
    print_summary(&mut out, &report)?;
    if let Some(path) = &opts.json {
        crate::report::save(&mut out, path, &report)?;
    }
    Ok(report)
}

fn protocol_name(p: Protocol) -> &'static str {
    match p {
        Protocol::Binary => "binary",
        Protocol::Text => "text",
    }
}

fn print_summary(out: &mut impl Write, r: &TpccReport) -> Result<()> {
    writeln!(out, "\nSummary: {:.0} s measured after {:.0} s warmup", r.time_s, r.warmup_s)?;
    writeln!(out, "{HEADER}")?;
    for (k, s) in &r.kinds {
        writeln!(out, "{}", line_for(k, s))?;
    }
    let rolled_back = r.kinds.get(TxnKind::NewOrder.name()).map(|s| s.rolled_back).unwrap_or(0);
    writeln!(out, "New-Orders rolled back by design: {rolled_back}")?;
    for (kind, samples) in &r.errors {
        for (msg, n) in samples {
            writeln!(out, "error {kind} x{n}: {msg}")?;
        }
    }
    writeln!(out, "tpmC: {:.1}, efficiency: {:.1}%", r.tpmc, r.efficiency)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_times_have_the_requested_mean_and_cap() {
        let mut rng = StdRng::seed_from_u64(4);
        let n = 100_000;
        let samples: Vec<f64> = (0..n).map(|_| think(&mut rng, 12.0)).collect();
        let mean = samples.iter().sum::<f64>() / n as f64;
        assert!((11.5..12.5).contains(&mean), "mean {mean}");
        assert!(samples.iter().all(|s| (0.0..=120.0).contains(s)));
    }

    #[test]
    fn reports_round_trip_through_json() {
        let r = TpccReport {
            benchmark: "tpcc".into(),
            label: "x".into(),
            server_version: "v".into(),
            target: "h:1".into(),
            warehouses: 1,
            threads: 2,
            time_s: 10.0,
            warmup_s: 0.0,
            protocol: "binary".into(),
            think_time: false,
            intervals: vec![IntervalPoint { t: 10.0, warmup: false, tpmc: 60.0, tps: BTreeMap::new() }],
            tpmc: 60.0,
            efficiency: 466.5,
            kinds: BTreeMap::new(),
            errors: BTreeMap::new(),
        };
        let json = serde_json::to_string(&r).expect("serialize");
        assert_eq!(serde_json::from_str::<TpccReport>(&json).expect("parse"), r);
    }
}
