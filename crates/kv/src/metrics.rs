//! Metrics of the store underneath, as Prometheus text: group commit's WAL fsyncs. One
//! process-wide set, recorded by the store (`mvcc::group_sync`) and rendered with the
//! server's other metrics.

use strata_common::histogram::Histogram;

/// WAL fsyncs and how many commits each made durable, for `/metrics`.
#[derive(Debug)]
pub struct SyncMetrics {
    /// Each fsync's duration.
    pub fsync: Histogram,
    /// Waits answered (commits made durable, and other callers).
    pub waiters: std::sync::atomic::AtomicU64,
}

/// The process's group-commit metrics.
pub static GROUP_COMMIT: SyncMetrics =
    SyncMetrics { fsync: Histogram::new(), waiters: std::sync::atomic::AtomicU64::new(0) };

impl SyncMetrics {
    /// Appends the metrics in Prometheus's text format.
    pub fn render(&self, out: &mut String) {
        self.fsync.render_family(
            out,
            "strata_wal_fsync_duration_seconds",
            "WAL fsyncs of group commit (each makes every commit queued before it durable).",
        );
        let name = "strata_wal_sync_waits_total";
        out.push_str(&format!(
            "# HELP {name} Commits (and other writers) that waited for a WAL fsync.\n# TYPE {name} counter\n{name} {}\n",
            self.waiters.load(std::sync::atomic::Ordering::Relaxed)
        ));
    }
}
