//! What a running statement carries besides its transaction: the session's size limits and
//! the variables evaluation follows (`div_precision_increment`), the
//! warnings it raises and its memory tracker. Scalar functions and operators deep in the
//! executor find it through a task-local set around the statement, so they need no extra
//! argument.
//!
//! Outside a statement (constant folding in `SET`, unit tests) the limits are MySQL's
//! defaults, warnings go nowhere and memory is not tracked.
//!
//! ## Memory
//!
//! Every operator that holds rows (scans, joins, hash tables, aggregates, sorts, set
//! operations, subquery results) charges what it holds to the statement's [`MemTracker`]
//! through a [`Charge`], which gives the bytes back when it is dropped. Past the statement's
//! quota (`tidb_mem_quota_query`, 1 GiB by default) the charge fails with TiDB's error 8175;
//! the error unwinds the executor, and dropping its row buffers and their charges frees what
//! the statement held. All statements together also charge one server-wide account whose
//! limit (`--memory-limit`) fails the statement that crosses it with 8176. Sizes are
//! estimates (values and their heap bytes, not allocator overhead), which is what a quota
//! needs: the point is that no statement grows without bound.

use std::cell::RefCell;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use strata_common::{Code, Error, Result, Value};

/// Size limits of one statement, from the session's variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `max_allowed_packet`: a string result longer than this becomes NULL with a warning.
    pub max_allowed_packet: usize,
    /// `group_concat_max_len`: GROUP_CONCAT results are cut to this many bytes.
    pub group_concat_max_len: usize,
    /// `div_precision_increment`: digits `/` and AVG add to the scale of a decimal result.
    pub div_precision_increment: u8,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_allowed_packet: 64 << 20, group_concat_max_len: 1024, div_precision_increment: 4 }
    }
}

/// What one statement runs under.
#[derive(Debug)]
pub struct StatementEnv {
    /// Size limits.
    pub limits: Limits,
    /// Its memory account.
    pub memory: Arc<MemTracker>,
    /// Read counters it adds to: its session's and the server's.
    pub reads: [Arc<ReadCounters>; 2],
    /// The server's cached tables, which its reads may be answered from.
    pub cached: Option<Arc<crate::cached_table::CachedTables>>,
}

struct Current {
    env: StatementEnv,
    warnings: RefCell<Vec<(Code, String)>>,
}

tokio::task_local! {
    static CURRENT: Current;
}

/// Runs `f` (one statement) under `env`; returns its output and the warnings it raised.
pub async fn scope<F: Future>(env: StatementEnv, f: F) -> (F::Output, Vec<(Code, String)>) {
    let current = Current { env, warnings: RefCell::new(Vec::new()) };
    CURRENT
        .scope(current, async move {
            let out = f.await;
            (out, CURRENT.with(|c| c.warnings.take()))
        })
        .await
}

/// The server's cached tables, when the running statement may read them (and any are).
pub fn cached_tables() -> Option<Arc<crate::cached_table::CachedTables>> {
    CURRENT.try_with(|c| c.env.cached.clone().filter(|t| t.any())).ok().flatten()
}

/// The running statement's limits.
pub fn limits() -> Limits {
    CURRENT.try_with(|c| c.env.limits).unwrap_or_default()
}

/// The most warnings a statement keeps (MySQL's default `max_error_count`); later ones are
/// dropped, so a statement warning about every one of millions of rows stays small.
pub const MAX_WARNINGS: usize = 1024;

/// Raises a warning on the running statement (`SHOW WARNINGS` lists it).
pub fn warn(code: Code, message: impl Into<String>) {
    let _ = CURRENT.try_with(|c| {
        let mut w = c.warnings.borrow_mut();
        if w.len() < MAX_WARNINGS {
            w.push((code, message.into()));
        }
    });
}

/// Runs `f` and drops the warnings it raised on the running statement; returns its output
/// and whether it raised any (constant folding evaluates an expression once at planning
/// and keeps the result only when that raised nothing, so a warning still comes from
/// execution, as often as MySQL would raise it).
pub fn without_warnings<T>(f: impl FnOnce() -> T) -> (T, bool) {
    let before = CURRENT.try_with(|c| c.warnings.borrow().len()).unwrap_or(0);
    let out = f();
    let raised = CURRENT
        .try_with(|c| {
            let mut w = c.warnings.borrow_mut();
            let raised = w.len() > before;
            w.truncate(before);
            raised
        })
        .unwrap_or(false);
    (out, raised)
}

/// Checks that a string result of `len` bytes from `function` fits `max_allowed_packet`.
/// When it does not, MySQL returns NULL with warning 1301 instead of building it; callers
/// check before they allocate.
pub fn fits_packet(function: &str, len: usize) -> bool {
    let max = limits().max_allowed_packet;
    if len <= max {
        return true;
    }
    warn(
        Code::WarnAllowedPacketOverflowed,
        format!("Result of {function}() was larger than max_allowed_packet ({max}) - truncated"),
    );
    false
}

/// How rows were read from the store, as MySQL's `Handler_read_*` status counters count
/// them.
#[derive(Clone, Copy, Debug)]
pub enum Read {
    /// A lookup by key: a point get, or the start of a range or index scan.
    Key,
    /// The next row of a range or index scan.
    Next,
    /// The next row of a full table scan.
    RndNext,
    /// A query the column engine answered (`Strata_columnar_queries`).
    Columnar,
    /// A query the column engine was asked to run but left to the row engine
    /// (`Strata_columnar_fallbacks`).
    ColumnarFallback,
    /// A table scan the column engine answered from a columnar replica
    /// (`Strata_columnar_replica_reads`).
    ColumnarReplica,
}

/// Rows read, by kind (`SHOW STATUS LIKE 'Handler_read%'`).
#[derive(Debug, Default)]
pub struct ReadCounters {
    counts: [AtomicU64; 6],
}

impl ReadCounters {
    /// The count of one kind.
    pub fn get(&self, kind: Read) -> u64 {
        self.counts[kind as usize].load(Ordering::Relaxed)
    }

    /// Rows read from the store by key or in order (the slow log's Rows_examined).
    pub fn rows_read(&self) -> u64 {
        self.get(Read::Key) + self.get(Read::Next) + self.get(Read::RndNext)
    }

    /// Sets every count to zero (FLUSH STATUS).
    pub fn reset(&self) {
        for c in &self.counts {
            c.store(0, Ordering::Relaxed);
        }
    }

    fn add(&self, kind: Read, n: u64) {
        self.counts[kind as usize].fetch_add(n, Ordering::Relaxed);
    }
}

/// Counts `n` rows read by the running statement.
pub fn count_reads(kind: Read, n: usize) {
    let _ = CURRENT.try_with(|c| {
        for r in &c.env.reads {
            r.add(kind, n as u64);
        }
    });
}

/// `tidb_mem_quota_query`'s default: 1 GiB per statement, as in TiDB.
pub const DEFAULT_MEM_QUOTA: usize = 1 << 30;

/// Bytes held by all running statements, and the limit on that sum (`--memory-limit`; 0 is
/// no limit). One per process.
static SERVER_USED: AtomicUsize = AtomicUsize::new(0);
static SERVER_LIMIT: AtomicUsize = AtomicUsize::new(0);

/// Sets the server-wide memory limit for statements (bytes; 0 for none).
pub fn set_server_memory_limit(bytes: usize) {
    SERVER_LIMIT.store(bytes, Ordering::Relaxed);
}

/// The server-wide memory limit (bytes; 0 for none).
pub fn server_memory_limit() -> usize {
    SERVER_LIMIT.load(Ordering::Relaxed)
}

/// One statement's memory account.
#[derive(Debug)]
pub struct MemTracker {
    used: AtomicUsize,
    peak: AtomicUsize,
    quota: usize,
    conn_id: u64,
}

impl MemTracker {
    /// An account with a quota in bytes (0 for none), for the statement of connection
    /// `conn_id` (named in the error message, as TiDB does).
    pub fn new(quota: usize, conn_id: u64) -> Arc<MemTracker> {
        Arc::new(MemTracker { used: AtomicUsize::new(0), peak: AtomicUsize::new(0), quota, conn_id })
    }

    /// Bytes held now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The most bytes held at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Adds `bytes`; fails when that crosses the statement's quota or the server's limit.
    /// The bytes count as held either way: the caller's `Charge` (or whoever called) gives
    /// them back with `release`.
    pub fn consume(&self, bytes: usize) -> Result<()> {
        let used = self.used.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak.fetch_max(used, Ordering::Relaxed);
        let server = SERVER_USED.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if self.quota > 0 && used > self.quota {
            return Err(Error::user(
                Code::MemoryExceedForQuery,
                format!(
                    "Your query has been cancelled due to exceeding the allowed memory limit for a single SQL \
                     query. Please try narrowing your query scope or increase the tidb_mem_quota_query limit and \
                     try again.[conn={}]",
                    self.conn_id
                ),
            ));
        }
        let limit = server_memory_limit();
        if limit > 0 && server > limit {
            return Err(Error::user(
                Code::MemoryExceedForInstance,
                format!(
                    "Your query has been cancelled due to exceeding the allowed memory limit for the tidb-server \
                     instance and this query is currently using the most memory. Please try narrowing your query \
                     scope or increase the tidb_server_memory_limit and try again.[conn={}]",
                    self.conn_id
                ),
            ));
        }
        Ok(())
    }

    /// `consume` of `need` bytes and, when that much more stays within both limits, `ahead`
    /// more (see `ahead`) for the caller to use later without coming back (`Charge`).
    /// Returns the bytes taken, held whether or not the result is an error.
    fn consume_ahead(&self, need: usize) -> (usize, Result<()>) {
        let ahead = self.ahead();
        let fits = |used: usize, limit: usize| limit == 0 || used.saturating_add(need + ahead) <= limit;
        let take = if fits(self.used(), self.quota) && fits(SERVER_USED.load(Ordering::Relaxed), server_memory_limit())
        {
            need + ahead
        } else {
            need
        };
        (take, self.consume(take))
    }

    /// How many bytes a `Charge` takes ahead of its need: `CHARGE_AHEAD`, or a 64th of a
    /// smaller quota, so that bytes taken and not yet used make a statement fail at most that
    /// much before its quota.
    fn ahead(&self) -> usize {
        match self.quota {
            0 => CHARGE_AHEAD,
            q => (q / 64).min(CHARGE_AHEAD),
        }
    }

    /// Gives back `bytes` taken with `consume`.
    pub fn release(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
        SERVER_USED.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// The running statement's memory account, for work that charges it from other tasks
/// (the column engine's operators).
pub fn current_tracker() -> Option<Arc<MemTracker>> {
    CURRENT.try_with(|c| c.env.memory.clone()).ok()
}

/// Bytes a `Charge` takes from its tracker ahead of what it holds (`MemTracker::ahead`): a
/// scan charges each row it keeps, and three atomic adds per row (one on the counter every
/// thread shares) were 3% of a 100-row range query's CPU; now it goes to the tracker once
/// per this many bytes. The statement's peak counts the bytes taken.
const CHARGE_AHEAD: usize = 16 * 1024;

/// Bytes charged to the running statement's tracker, given back on drop. Outside a
/// statement it tracks nothing. Creating one is free: the tracker is looked up at the first
/// charge, so operators that hold nothing (most of an OLTP plan) never touch it.
#[derive(Debug, Default)]
pub struct Charge {
    tracker: Option<Arc<MemTracker>>,
    /// Bytes held.
    bytes: usize,
    /// Bytes taken from the tracker: at least `bytes`, the rest taken ahead.
    taken: usize,
    looked_up: bool,
}

impl Charge {
    /// A charge against the running statement's tracker.
    pub fn new() -> Charge {
        Charge::default()
    }

    /// Charges `bytes` more (8175/8176 past the limits).
    pub fn add(&mut self, bytes: usize) -> Result<()> {
        if !self.looked_up {
            self.looked_up = true;
            if self.tracker.is_none() {
                self.tracker = CURRENT.try_with(|c| c.env.memory.clone()).ok();
            }
        }
        let Some(t) = &self.tracker else { return Ok(()) };
        self.bytes += bytes;
        if self.bytes <= self.taken {
            return Ok(());
        }
        let (taken, result) = t.consume_ahead(self.bytes - self.taken);
        self.taken += taken;
        result
    }

    /// Charges the size of `row`.
    pub fn add_row(&mut self, row: &[Value]) -> Result<()> {
        self.add(row_size(row))
    }

    /// Gives back `bytes` (at most what is held), for a holder that shrank.
    pub fn sub(&mut self, bytes: usize) {
        let bytes = bytes.min(self.bytes);
        if let Some(t) = &self.tracker {
            t.release(bytes);
        }
        self.bytes -= bytes;
        self.taken -= bytes;
    }

    /// Bytes held by this charge.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Moves what `other` holds into this charge.
    pub fn absorb(&mut self, mut other: Charge) {
        if other.taken == 0 {
            return;
        }
        // Charges only hold bytes once they have a tracker, and a statement has one.
        if self.tracker.is_none() {
            self.tracker = other.tracker.take();
            self.looked_up = true;
        }
        self.bytes += std::mem::take(&mut other.bytes);
        self.taken += std::mem::take(&mut other.taken);
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if let Some(t) = &self.tracker {
            t.release(self.taken);
        }
    }
}

/// Estimated bytes a row holds: its value slots plus the heap bytes of its strings.
pub fn row_size(row: &[Value]) -> usize {
    let heap: usize = row.iter().map(value_heap).sum();
    std::mem::size_of::<Vec<Value>>() + std::mem::size_of_val(row) + heap
}

/// Heap bytes of one value.
pub fn value_heap(v: &Value) -> usize {
    match v {
        Value::Bytes(b) => b.len(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(tracker: &Arc<MemTracker>) -> StatementEnv {
        StatementEnv { limits: Limits::default(), memory: tracker.clone(), reads: Default::default(), cached: None }
    }

    #[tokio::test]
    async fn charges_fail_past_the_quota_and_are_given_back_on_drop() {
        // A quota of 1000 bytes: a charge takes a 64th (15 bytes) ahead when it fits.
        let tracker = MemTracker::new(1000, 7);
        let t = tracker.clone();
        let ((), _) = scope(env_of(&tracker), async move {
            let mut a = Charge::new();
            a.add(600).expect("within quota");
            assert_eq!(t.used(), 615, "600 and 15 ahead");
            let mut b = Charge::new();
            let e = b.add(600).expect_err("past quota");
            assert_eq!(e.code(), Code::MemoryExceedForQuery);
            assert!(e.to_string().contains("[conn=7]"), "{e}");
            assert_eq!(t.used(), 1215, "nothing ahead past the quota");
            drop(b);
            assert_eq!(t.used(), 615);
            let mut c = Charge::new();
            c.add(100).expect("within quota");
            a.absorb(c);
            assert_eq!(a.bytes(), 700);
            a.sub(200);
            assert_eq!(a.bytes(), 500);
            assert_eq!(t.used(), 530, "500 held, 30 taken ahead by a and c");
        })
        .await;
        assert_eq!(tracker.used(), 0);
        assert_eq!(tracker.peak(), 1215);
        // Outside a statement nothing is tracked.
        let mut free = Charge::new();
        free.add(usize::MAX / 2).expect("untracked");
    }

    #[tokio::test]
    async fn small_charges_go_to_the_tracker_once_per_chunk_and_the_quota_still_holds() {
        let tracker = MemTracker::new(0, 1);
        let t = tracker.clone();
        let ((), _) = scope(env_of(&tracker), async move {
            let mut rows = Charge::new();
            rows.add(100).expect("no quota");
            assert_eq!(t.used(), 100 + CHARGE_AHEAD);
            // Rows up to what was taken ahead do not touch the tracker.
            for _ in 0..CHARGE_AHEAD / 100 {
                rows.add(100).expect("no quota");
            }
            assert_eq!(t.used(), 100 + CHARGE_AHEAD);
            rows.add(100).expect("no quota");
            assert_eq!(t.used(), rows.bytes() + CHARGE_AHEAD, "the next chunk");
        })
        .await;
        assert_eq!(tracker.used(), 0);
        // With a quota, bytes taken ahead make a statement fail at most a 64th (here 1,000
        // bytes) early, never late: 62,000 bytes held in small pieces, then 1,000 more fit a
        // 64,000-byte quota, and 1,001 more after those do not.
        let tracker = MemTracker::new(64_000, 2);
        let t = tracker.clone();
        let ((), _) = scope(env_of(&tracker), async move {
            let mut many = Charge::new();
            for _ in 0..620 {
                many.add(100).expect("within quota");
            }
            assert!((62_000..=63_000).contains(&t.used()), "{} taken", t.used());
            let mut more = Charge::new();
            more.add(1_000).expect("63,000 held of 64,000");
            let mut over = Charge::new();
            assert_eq!(over.add(1_001).expect_err("64,001 held").code(), Code::MemoryExceedForQuery);
        })
        .await;
        assert_eq!(tracker.used(), 0);
    }
}
