//! Server metrics in Prometheus's text format (`GET /metrics` on the status port): statements
//! by command and by kind, statement time by phase (parse, compile, execute) as
//! histograms, prepared plan cache hits and misses, connections, and the transaction layer's
//! waits (`strata_txn::metrics`: timestamps, pessimistic locks, commits). Counters are atomics
//! updated on the statement path; rendering reads them without stopping anyone.
//!
//! Compile time is the planning of queries (binding, rules, physical planning, or a plan
//! cache lookup); DML plans inside its execution, which counts as execute time.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use strata_common::histogram::Histogram;

/// What a client asked for (the protocol command).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// COM_QUERY.
    Query,
    /// COM_STMT_PREPARE.
    StmtPrepare,
    /// COM_STMT_EXECUTE (and SQL EXECUTE).
    StmtExecute,
}

const COMMANDS: [(Command, &str); 3] =
    [(Command::Query, "Query"), (Command::StmtPrepare, "StmtPrepare"), (Command::StmtExecute, "StmtExecute")];

/// Statement kinds counted separately.
const KINDS: [&str; 6] = ["Select", "Insert", "Update", "Delete", "Set", "Other"];

/// The statement phases timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Parsing the text.
    Parse,
    /// Planning a query.
    Compile,
    /// Everything else of the statement.
    Execute,
}

/// The server's metrics.
#[derive(Default, Debug)]
pub struct Metrics {
    commands: [AtomicU64; COMMANDS.len()],
    kinds: [AtomicU64; KINDS.len()],
    phases: [Histogram; 3],
    /// Executions whose plan came from the prepared plan cache.
    pub plan_cache_hits: AtomicU64,
    /// Executions of prepared queries that planned.
    pub plan_cache_misses: AtomicU64,
}

impl Metrics {
    /// Counts a protocol command.
    pub fn command(&self, c: Command) {
        if let Some(i) = COMMANDS.iter().position(|(k, _)| *k == c) {
            self.commands[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a statement by its kind ("Select", "Insert", ...; anything else is "Other").
    pub fn statement(&self, kind: &str) {
        let i = KINDS.iter().position(|k| *k == kind).unwrap_or(KINDS.len() - 1);
        self.kinds[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Records how long a phase of a statement took.
    pub fn phase(&self, p: Phase, d: Duration) {
        self.phases[p as usize].observe(d);
    }

    /// The histogram of a phase.
    pub fn phase_histogram(&self, p: Phase) -> &Histogram {
        &self.phases[p as usize]
    }

    /// The metrics in Prometheus's text exposition format, with `connections` open.
    pub fn render(&self, connections: u64) -> String {
        let mut out = String::new();
        out.push_str("# HELP strata_connections Client connections open.\n# TYPE strata_connections gauge\n");
        let _ = writeln!(out, "strata_connections {connections}");
        out.push_str("# HELP strata_server_query_total Commands received, by protocol command.\n");
        out.push_str("# TYPE strata_server_query_total counter\n");
        for ((_, name), n) in COMMANDS.iter().zip(&self.commands) {
            let _ = writeln!(out, "strata_server_query_total{{type=\"{name}\"}} {}", n.load(Ordering::Relaxed));
        }
        out.push_str("# HELP strata_executor_statement_total Statements run, by kind.\n");
        out.push_str("# TYPE strata_executor_statement_total counter\n");
        for (name, n) in KINDS.iter().zip(&self.kinds) {
            let _ = writeln!(out, "strata_executor_statement_total{{type=\"{name}\"}} {}", n.load(Ordering::Relaxed));
        }
        out.push_str("# HELP strata_session_statement_duration_seconds Statement time by phase.\n");
        out.push_str("# TYPE strata_session_statement_duration_seconds histogram\n");
        for (phase, h) in ["parse", "compile", "execute"].iter().zip(&self.phases) {
            h.render(&mut out, "strata_session_statement_duration_seconds", &format!("phase=\"{phase}\""));
        }
        out.push_str("# HELP strata_plan_cache_total Prepared query executions, by whether the plan was cached.\n");
        out.push_str("# TYPE strata_plan_cache_total counter\n");
        let _ =
            writeln!(out, "strata_plan_cache_total{{result=\"hit\"}} {}", self.plan_cache_hits.load(Ordering::Relaxed));
        let _ = writeln!(
            out,
            "strata_plan_cache_total{{result=\"miss\"}} {}",
            self.plan_cache_misses.load(Ordering::Relaxed)
        );
        strata_txn::metrics::METRICS.render(&mut out);
        strata_kv::metrics::GROUP_COMMIT.render(&mut out);
        strata_kv::metrics::render_pruned(&mut out);
        strata_kv::metrics::render_ingested(&mut out);
        strata_common::storage_metrics::render(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_with_sum_and_count() {
        let m = Metrics::default();
        m.phase(Phase::Parse, Duration::from_micros(50));
        m.phase(Phase::Parse, Duration::from_millis(3));
        m.phase(Phase::Parse, Duration::from_secs(20));
        let text = m.render(2);
        let line = |prefix: &str| text.lines().find(|l| l.starts_with(prefix)).unwrap_or_default().to_string();
        assert_eq!(
            line("strata_session_statement_duration_seconds_bucket{phase=\"parse\",le=\"0.0001\"}"),
            "strata_session_statement_duration_seconds_bucket{phase=\"parse\",le=\"0.0001\"} 1"
        );
        assert!(line("strata_session_statement_duration_seconds_bucket{phase=\"parse\",le=\"0.005\"}").ends_with(" 2"));
        assert!(line("strata_session_statement_duration_seconds_bucket{phase=\"parse\",le=\"+Inf\"}").ends_with(" 3"));
        assert!(line("strata_session_statement_duration_seconds_count{phase=\"parse\"}").ends_with(" 3"));
        assert!(line("strata_connections").ends_with(" 2"));
    }
}
