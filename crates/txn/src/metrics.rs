//! What transactions wait for, as Prometheus histograms: timestamps from the oracle, the
//! pessimistic lock requests (their long tail is time spent waiting for other
//! transactions' locks), and two-phase commits from the first prewrite to the durable
//! commit. One process-wide set ([`METRICS`]), as Prometheus client libraries keep one
//! default registry: every engine in the process records into it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use strata_common::histogram::Histogram;
use strata_common::{Result, Timestamp};
use strata_kv::Oracle;

/// The transaction layer's histograms.
#[derive(Debug)]
pub struct TxnMetrics {
    /// Waits for a timestamp from the oracle (start, read, for-update and commit ts).
    pub tso_wait: Histogram,
    /// Pessimistic lock requests, including any wait for a conflicting lock.
    pub pessimistic_lock: Histogram,
    /// Commits that wrote something: prewrite, commit timestamp, commit (or the one
    /// command of a one-phase commit).
    pub commit: Histogram,
    /// Reads held up by another transaction's lock: each resolution or wait for it to go.
    pub read_lock_wait: Histogram,
    /// Commits made in one phase (`Client::one_pc`).
    pub one_pc: Counter,
}

/// A counter.
#[derive(Debug)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// The count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The process's transaction metrics.
pub static METRICS: TxnMetrics = TxnMetrics {
    tso_wait: Histogram::new(),
    pessimistic_lock: Histogram::new(),
    commit: Histogram::new(),
    read_lock_wait: Histogram::new(),
    one_pc: Counter(AtomicU64::new(0)),
};

impl TxnMetrics {
    /// Appends the histograms in Prometheus's text format.
    pub fn render(&self, out: &mut String) {
        let metrics = [
            ("strata_tso_wait_duration_seconds", "Time spent waiting for a timestamp from the oracle.", &self.tso_wait),
            (
                "strata_txn_lock_wait_duration_seconds",
                "Pessimistic lock requests, including waits for other transactions' locks.",
                &self.pessimistic_lock,
            ),
            (
                "strata_txn_commit_duration_seconds",
                "Commits of transactions that wrote: prewrite (or one-phase commit) to durable commit.",
                &self.commit,
            ),
            (
                "strata_txn_read_lock_wait_duration_seconds",
                "Reads held up by another transaction's lock: resolving it or waiting for it to go.",
                &self.read_lock_wait,
            ),
        ];
        for (name, help, h) in metrics {
            h.render_family(out, name, help);
        }
        let name = "strata_txn_one_pc_commits_total";
        out.push_str(&format!(
            "# HELP {name} Commits made in one phase.\n# TYPE {name} counter\n{name} {}\n",
            self.one_pc.get()
        ));
    }
}

/// A timestamp from `oracle`, its wait recorded.
pub(crate) async fn timestamp(oracle: &dyn Oracle) -> Result<Timestamp> {
    let started = Instant::now();
    let ts = oracle.get_ts().await;
    METRICS.tso_wait.observe(started.elapsed());
    ts
}

/// Records a pessimistic lock request that took `d`.
pub(crate) fn lock_request(d: Duration) {
    METRICS.pessimistic_lock.observe(d);
}
