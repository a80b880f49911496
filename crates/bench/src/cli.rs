//! The `strata bench` command line: `tpcc prepare|run|check|cleanup` and
//! `tpch prepare|run|check|cleanup|dbgen`, and `report` to chart their `--json` results.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};

use crate::conn::{Protocol, Target};
use crate::report;
use crate::tpcc;
use crate::tpch;

/// `strata bench ...`.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// TPC-C: an order-entry OLTP workload (tpmC).
    Tpcc {
        #[command(subcommand)]
        /// What to do.
        command: TpccCommand,
    },
    /// TPC-H: 22 decision-support queries over generated data.
    Tpch {
        #[command(subcommand)]
        /// What to do.
        command: TpchCommand,
    },
    /// Draws `--json` results of several runs side by side as an SVG and prints the ratios.
    Report(ReportArgs),
}

/// `strata bench report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// `--json` files of `tpcc run` and/or `tpch run|check`; ratios are against the first.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Where to write the chart.
    #[arg(long, short = 'o', default_value = "report.svg")]
    pub out: PathBuf,
    /// Title of the chart.
    #[arg(long, default_value = "strata bench")]
    pub title: String,
    /// Also write the ratio tables (Markdown) to this file.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
}

/// `strata bench tpch ...`.
#[derive(Debug, Subcommand)]
pub enum TpchCommand {
    /// Creates the tables and loads data generated at a scale factor.
    Prepare(TpchPrepare),
    /// Runs the queries and reports their times.
    Run(TpchRun),
    /// Runs the queries (`--repeat` times) and compares each last result with the reference answer.
    Check(TpchRun),
    /// Drops the tables.
    Cleanup(TpccTarget),
    /// Writes the generated data as `|`-separated `<table>.tbl` files (for reference engines).
    Dbgen(TpchDbgen),
}

/// `tpch prepare`.
#[derive(Debug, Args)]
pub struct TpchPrepare {
    #[command(flatten)]
    /// The server.
    pub target: Target,
    /// Scale factor (1 is about 1 GB, 8.7M rows).
    #[arg(long, default_value_t = 0.1)]
    pub sf: f64,
    /// Connections loading in parallel.
    #[arg(long, short = 'T', default_value_t = 4)]
    pub threads: usize,
    /// Columnar replicas to give each table after loading (TiDB's `SET TIFLASH REPLICA`, as
    /// go-tpc's flag of the same name); prepare waits until they are available.
    #[arg(long, default_value_t = 0)]
    pub tiflash_replica: u32,
}

/// `tpch run` / `tpch check`.
#[derive(Debug, Args)]
pub struct TpchRun {
    #[command(flatten)]
    /// The server.
    pub target: Target,
    /// Scale factor of the loaded data (default: worked out from the supplier count).
    #[arg(long)]
    pub sf: Option<f64>,
    /// Queries to run: `1,3,5-7` (default: all 22).
    #[arg(long, default_value = "1-22")]
    pub queries: String,
    /// Runs per query.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Limit per query run.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Directory holding `sf<N>/qNN.tsv` reference answers.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/tpch/answers"))]
    pub answers: PathBuf,
    /// The system's name in reports (default: the server's version).
    #[arg(long)]
    pub label: Option<String>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// A statement to run on each connection before the queries, e.g. `SET SESSION
    /// tidb_isolation_read_engines = 'tikv'` (repeatable).
    #[arg(long = "init-sql")]
    pub init_sql: Vec<String>,
}

/// `tpch dbgen`.
#[derive(Debug, Args)]
pub struct TpchDbgen {
    /// Scale factor.
    #[arg(long, default_value_t = 0.1)]
    pub sf: f64,
    /// Output directory.
    #[arg(long)]
    pub out: PathBuf,
}

/// `strata bench tpcc ...`.
#[derive(Debug, Subcommand)]
pub enum TpccCommand {
    /// Creates the tables and loads the initial population.
    Prepare(TpccPrepare),
    /// Runs the transaction mix and reports tpmC and latencies.
    Run(TpccRun),
    /// Verifies the consistency conditions (3.3.2.1–3.3.2.12).
    Check(TpccTarget),
    /// Drops the tables.
    Cleanup(TpccTarget),
}

/// Connection options only.
#[derive(Debug, Args)]
pub struct TpccTarget {
    #[command(flatten)]
    /// The server.
    pub target: Target,
}

/// `tpcc prepare`.
#[derive(Debug, Args)]
pub struct TpccPrepare {
    #[command(flatten)]
    /// The server.
    pub target: Target,
    /// Warehouses to load (about 500k rows, 70 MB each).
    #[arg(long, short = 'w', default_value_t = 1)]
    pub warehouses: u32,
    /// Connections loading in parallel.
    #[arg(long, short = 'T', default_value_t = 4)]
    pub threads: usize,
}

/// `tpcc run`.
#[derive(Debug, Args)]
pub struct TpccRun {
    #[command(flatten)]
    /// The server.
    pub target: Target,
    /// Warehouses to use (default: all loaded).
    #[arg(long, short = 'w')]
    pub warehouses: Option<u32>,
    /// Terminals (connections).
    #[arg(long, short = 'T', default_value_t = 8)]
    pub threads: usize,
    /// Measured duration: `90s`, `5m`, `1h`.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub time: Duration,
    /// Unmeasured warmup before it.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Seconds between interval reports.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Use the spec's keying and think times (a terminal then does ~1 transaction per 20 s).
    #[arg(long)]
    pub think_time: bool,
    /// Send statements as text queries instead of server-side prepared statements.
    #[arg(long)]
    pub text: bool,
    /// Retries of a transaction after a deadlock, lock wait timeout or write conflict.
    #[arg(long, default_value_t = 3)]
    pub max_retries: u32,
    /// The system's name in reports (default: the server's version).
    #[arg(long)]
    pub label: Option<String>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Parses `250ms`, `30s`, `5m`, `2h` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = num.parse().map_err(|_| format!("invalid duration {s:?}"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("invalid duration unit in {s:?} (use ms, s, m or h)")),
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("invalid duration {s:?}"));
    }
    Ok(Duration::from_secs_f64(secs))
}

const TPCC_DB: &str = "tpcc";
const TPCH_DB: &str = "tpch";

async fn tpch_run(a: TpchRun, check: bool) -> Result<()> {
    let db = a.target.db_or(TPCH_DB);
    let sf = match a.sf {
        Some(sf) => sf,
        None => tpch::detect_sf(&a.target, &db).await?,
    };
    let opts = tpch::run::RunOptions {
        sf,
        queries: tpch::queries::parse_list(&a.queries).map_err(anyhow::Error::msg)?,
        repeat: a.repeat.max(1),
        timeout: a.timeout,
        check,
        answers: a.answers,
        label: a.label,
        json: a.json,
        init_sql: a.init_sql,
    };
    let report = tpch::run::run(&a.target, &db, opts).await?;
    if check {
        let failed: Vec<String> = report
            .queries
            .iter()
            .filter(|q| q.check.as_deref() != Some("pass"))
            .map(|q| format!("Q{}", q.query))
            .collect();
        if !failed.is_empty() {
            bail!("{} of {} queries do not match: {}", failed.len(), report.queries.len(), failed.join(", "));
        }
    }
    Ok(())
}

/// Runs a `strata bench` command.
pub async fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Tpcc { command } => match command {
            TpccCommand::Prepare(a) => {
                tpcc::prepare::prepare(&a.target, &a.target.db_or(TPCC_DB), a.warehouses, a.threads).await?;
            }
            TpccCommand::Run(a) => {
                if a.interval.is_zero() {
                    bail!("--interval must be positive");
                }
                let opts = tpcc::run::RunOptions {
                    warehouses: a.warehouses,
                    threads: a.threads,
                    time: a.time,
                    warmup: a.warmup,
                    interval: a.interval,
                    think_time: a.think_time,
                    protocol: if a.text { Protocol::Text } else { Protocol::Binary },
                    max_retries: a.max_retries,
                    label: a.label,
                    json: a.json,
                };
                tpcc::run::run(&a.target, &a.target.db_or(TPCC_DB), opts).await?;
            }
            TpccCommand::Check(a) => {
                let findings = tpcc::check::check(&a.target, &a.target.db_or(TPCC_DB)).await?;
                let failed: Vec<&str> = {
                    let mut v: Vec<&str> = findings.iter().filter(|f| !f.passed()).map(|f| f.clause).collect();
                    v.dedup();
                    v
                };
                if !failed.is_empty() {
                    bail!("consistency check failed: {}", failed.join(", "));
                }
            }
            TpccCommand::Cleanup(a) => tpcc::prepare::cleanup(&a.target, &a.target.db_or(TPCC_DB)).await?,
        },
        BenchCommand::Tpch { command } => match command {
            TpchCommand::Prepare(a) => {
                tpch::prepare::prepare(&a.target, &a.target.db_or(TPCH_DB), a.sf, a.threads, a.tiflash_replica).await?
            }
            TpchCommand::Run(a) => tpch_run(a, false).await?,
            TpchCommand::Check(a) => tpch_run(a, true).await?,
            TpchCommand::Cleanup(a) => tpch::prepare::cleanup(&a.target, &a.target.db_or(TPCH_DB)).await?,
            TpchCommand::Dbgen(a) => tpch::prepare::dbgen(a.sf, &a.out)?,
        },
        BenchCommand::Report(a) => {
            let results = a.files.iter().map(|f| report::load(f)).collect::<Result<Vec<_>>>()?;
            let svg = report::render_svg(&results, &a.title)?;
            std::fs::write(&a.out, svg).with_context(|| format!("cannot write {}", a.out.display()))?;
            let markdown = report::summary_markdown(&results);
            if let Some(path) = &a.markdown {
                std::fs::write(path, &markdown).with_context(|| format!("cannot write {}", path.display()))?;
            }
            let mut out = std::io::stdout().lock();
            writeln!(out, "{markdown}")?;
            writeln!(out, "chart written to {}", a.out.display())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("x").is_err());
    }
}
