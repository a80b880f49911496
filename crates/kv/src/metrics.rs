//! Metrics of the store underneath, as Prometheus text: group commit's WAL fsyncs and the
//! deletions pruned from the current-version index. One
//! process-wide set, recorded by the store (`mvcc::group_sync`, `mvcc::prune`) and rendered with the
//! server's other metrics.

use strata_common::histogram::Histogram;

/// WAL fsyncs and how many commits each made durable, for `/metrics`.
#[derive(Debug)]
pub struct SyncMetrics {
    /// Each fsync's duration.
    pub fsync: Histogram,
    /// Waits answered (commits made durable, and other callers).
    pub waiters: std::sync::atomic::AtomicU64,
    /// How long each commit waited for its fsync after its write returned.
    pub wait: Histogram,
    /// The part of `wait` before its fsync began: an fsync in flight, and the sync thread
    /// waking up.
    pub queued: Histogram,
    /// The part of `wait` after its fsync ended: the answer reaching the waiting task and
    /// the task running again.
    pub resumed: Histogram,
    /// Each commit's write: latches, conflict checks, memtable and WAL buffer (no fsync).
    pub write: Histogram,
    /// Commits whose write went to the blocking pool (many keys, or a latch was taken).
    pub offloaded: std::sync::atomic::AtomicU64,
}

/// The process's group-commit metrics.
pub static GROUP_COMMIT: SyncMetrics = SyncMetrics {
    fsync: Histogram::new(),
    waiters: std::sync::atomic::AtomicU64::new(0),
    wait: Histogram::new(),
    queued: Histogram::new(),
    resumed: Histogram::new(),
    write: Histogram::new(),
    offloaded: std::sync::atomic::AtomicU64::new(0),
};

impl SyncMetrics {
    /// Appends the metrics in Prometheus's text format.
    pub fn render(&self, out: &mut String) {
        self.fsync.render_family(
            out,
            "strata_wal_fsync_duration_seconds",
            "WAL fsyncs of group commit (each makes every commit queued before it durable).",
        );
        self.wait.render_family(
            out,
            "strata_wal_sync_wait_duration_seconds",
            "How long a commit waited for the WAL fsync that made it durable, after its write.",
        );
        self.queued.render_family(
            out,
            "strata_wal_sync_queued_duration_seconds",
            "The part of a commit's fsync wait before its fsync began (an fsync in flight, the sync thread waking).",
        );
        self.resumed.render_family(
            out,
            "strata_wal_sync_resumed_duration_seconds",
            "The part of a commit's fsync wait after its fsync ended (the waiting task running again).",
        );
        self.write.render_family(
            out,
            "strata_mvcc_commit_write_duration_seconds",
            "A commit's write to the store before its fsync: latches, conflict checks, memtable and WAL buffer.",
        );
        let name = "strata_mvcc_commit_offloaded_total";
        out.push_str(&format!(
            "# HELP {name} Commits written from the blocking pool (many keys, or a key's latch was taken).\n# TYPE {name} counter\n{name} {}\n",
            self.offloaded.load(std::sync::atomic::Ordering::Relaxed)
        ));
        let name = "strata_wal_sync_waits_total";
        out.push_str(&format!(
            "# HELP {name} Commits (and other writers) that waited for a WAL fsync.\n# TYPE {name} counter\n{name} {}\n",
            self.waiters.load(std::sync::atomic::Ordering::Relaxed)
        ));
    }
}

/// Commits the store wrote as one table file (`storage::Engine::ingest`), and their keys.
pub static INGESTED_COMMITS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// The keys of `INGESTED_COMMITS`.
pub static INGESTED_KEYS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Appends the ingestion counters in Prometheus's text format.
pub fn render_ingested(out: &mut String) {
    for (name, help, v) in [
        (
            "strata_mvcc_ingested_commits_total",
            "Large commits of new keys written as one table file.",
            &INGESTED_COMMITS,
        ),
        ("strata_mvcc_ingested_keys_total", "Keys of the commits written as table files.", &INGESTED_KEYS),
    ] {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}\n",
            v.load(std::sync::atomic::Ordering::Relaxed)
        ));
    }
}

/// Deletions the store dropped from its current-version index before GC (mvcc's `prune`).
pub static PRUNED_DELETIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Appends the pruning counter in Prometheus's text format.
pub fn render_pruned(out: &mut String) {
    let name = "strata_mvcc_pruned_deletions_total";
    out.push_str(&format!(
        "# HELP {name} Deleted rows' current-version records dropped before GC, so scans skip them.\n# TYPE {name} counter\n{name} {}\n",
        PRUNED_DELETIONS.load(std::sync::atomic::Ordering::Relaxed)
    ));
}
