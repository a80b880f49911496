//! Columnar replicas: a copy of a table's rows as Arrow columns, kept current from the row
//! store's change feed, that the column engine reads instead of decoding rows.
//!
//! A replica is a *stable* part — every row visible at one timestamp, sorted by handle, in
//! Arrow batches — plus a *delta* of the versions committed since, per handle, oldest
//! first. The delta is fed by the store (`kv::ChangeSink`) as commits apply; the stable part
//! is built once from a snapshot scan and then rebuilt in the background from itself and
//! the delta (compaction), behind the oldest running transaction.
//!
//! A read at timestamp `T` (the statement's snapshot) is exactly what the row store shows
//! at `T`:
//! 1. it waits out the locks in the table's range that block a read at `T`
//!    (`Transaction::check_locks`); by the feed's ordering contract every change committed
//!    at or below `T` is then in the delta or the stable part;
//! 2. for each handle it takes the newest delta version at or below `T`, and the
//!    transaction's own uncommitted writes over that;
//! 3. it returns the stable rows whose handle none of those touch, plus the touched rows
//!    that still exist, decoded.
//!
//! A replica answers only when its stable part is at or below `T` (older snapshots go to
//! the row store) and it was built for the table's current definition (after an ALTER the
//! row store answers until the rebuild is done).
//!
//! Stable parts are written to disk (`persist`) after a build and then after compactions
//! (at most every `PERSIST_EVERY`). After a restart a replica loads its file and catches up
//! with the versions committed since (`Transaction::scan_changes`), merged like a
//! compaction. That is exact only while GC has not passed the file's timestamp, so each
//! replica holds GC back (`ReplicaStore::gc_floor`): to its build snapshot while building,
//! then to its file's timestamp — moved forward without a rewrite while the table takes no
//! writes, since the file then also holds the table at the later time.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::array::{Array, ArrayRef, BinaryArray, BooleanArray, RecordBatch};
use datafusion::arrow::compute::{filter_record_batch, interleave};
use datafusion::arrow::datatypes::SchemaRef;
use parking_lot::{Mutex, RwLock};
use strata_codec::keys::{prefix_end, row_prefix, table_of};
use strata_common::{Error, Result, TableId, Timestamp};
use strata_kv::{ChangeSink, CommittedChange};
use strata_sql::catalog::{Schema as Catalog, TableInfo};
use strata_sql::column::ReplicaState;
use strata_txn::Transaction;

use crate::convert::{arrow_type, BatchBuilder};
use crate::{persist, Skip};

/// Rows per stable batch.
pub const BATCH_ROWS: usize = 8192;

/// Rows (or changes) read per snapshot scan while building (or catching up).
const BUILD_CHUNK: usize = 4096;

/// A compacted stable part is written to disk at most this often.
pub const PERSIST_EVERY: Duration = Duration::from_secs(60);

/// `TableReplica::floor` when the replica holds GC back nowhere.
const NO_FLOOR: u64 = u64::MAX;

/// The replicas of one node, and the sink of its change feed.
#[derive(Default)]
pub struct ReplicaStore {
    tables: RwLock<HashMap<i64, Arc<TableReplica>>>,
    /// Whether any replica exists (the feed's fast path when none does).
    any: AtomicBool,
    /// Where stable parts are written; `None` keeps them in memory only.
    dir: Option<PathBuf>,
    /// Bytes all stable parts may hold together (0: no limit).
    memory_limit: usize,
    /// Replicas built from a scan, loaded from disk, compactions, files written.
    builds: AtomicU64,
    loads: AtomicU64,
    compactions: AtomicU64,
    writes: AtomicU64,
}

/// One table's replica.
pub struct TableReplica {
    table_id: i64,
    /// The row keys' prefix (`t{id}_r`): handles are what follows it.
    prefix: Vec<u8>,
    state: RwLock<State>,
    /// Build progress, 0..=1, as f64 bits.
    progress: AtomicU64,
    /// The oldest timestamp whose versions this replica may still need (`NO_FLOOR`: none):
    /// a build's snapshot, or the timestamp of the file a restart would catch up from.
    floor: AtomicU64,
    /// The generation of the stable part the file on disk holds (0: no file); writes of
    /// the file are serialized by the lock.
    persisted: Mutex<u64>,
    persisted_gen: AtomicU64,
    /// When the file was last written.
    last_write: Mutex<Option<Instant>>,
    /// Set when the store drops the replica: a write in flight removes its file again.
    dropped: AtomicBool,
}

/// What a new replica starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A snapshot scan of the table.
    Scan,
    /// Its file on disk, written at this timestamp, then the changes since.
    Disk(Timestamp),
}

/// One handle's versions in the delta: (commit ts, value or `None` for a delete), oldest
/// first.
type Versions = Vec<(Timestamp, Option<Vec<u8>>)>;

struct State {
    /// The definition the stable part was built for.
    info: Arc<TableInfo>,
    /// None while the replica is being built (or its build failed).
    stable: Option<Arc<Stable>>,
    /// Versions committed after the stable part's timestamp, per handle, oldest first
    /// (`None` = deleted).
    delta: BTreeMap<Vec<u8>, Versions>,
    /// Versions in `delta`.
    delta_versions: usize,
    /// Counts the stable parts this replica has had (1 = the first).
    gen: u64,
}

/// Every row visible at `ts`, sorted by handle.
pub struct Stable {
    /// The snapshot it holds.
    pub ts: Timestamp,
    /// Table column positions the batches hold, in order (columns with an Arrow type).
    pub columns: Vec<usize>,
    /// The batches' schema (fields `c{position}`).
    schema: SchemaRef,
    /// Handles per batch.
    keys: Vec<BinaryArray>,
    /// The columns per batch (field `c{position}`).
    batches: Vec<RecordBatch>,
    /// Total rows.
    pub rows: usize,
}

impl Stable {
    /// Where `handle` is: (batch, row), if present.
    fn find(&self, handle: &[u8]) -> Option<(usize, usize)> {
        // The first batch whose last handle is >= handle.
        let b = self.keys.partition_point(|k| k.value(k.len() - 1) < handle);
        let keys = self.keys.get(b)?;
        let (mut lo, mut hi) = (0, keys.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match keys.value(mid).cmp(handle) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some((b, mid)),
            }
        }
        None
    }

    /// Approximate bytes held.
    pub fn bytes(&self) -> usize {
        self.batches.iter().map(|b| b.get_array_memory_size()).sum::<usize>()
            + self.keys.iter().map(|k| k.get_array_memory_size()).sum::<usize>()
    }

    /// The batches' schema.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Each batch with its handles.
    pub(crate) fn parts(&self) -> impl Iterator<Item = (&BinaryArray, &RecordBatch)> {
        self.keys.iter().zip(&self.batches)
    }

    /// A stable part from batches and their handles (read back from a file), checked:
    /// one handle per row, every handle greater than the one before.
    pub(crate) fn from_parts(
        ts: Timestamp,
        columns: Vec<usize>,
        schema: SchemaRef,
        keys: Vec<BinaryArray>,
        batches: Vec<RecordBatch>,
    ) -> std::result::Result<Stable, String> {
        if keys.len() != batches.len() {
            return Err("handles and batches differ in number".into());
        }
        let mut rows = 0;
        let mut last: Option<&[u8]> = None;
        for (k, b) in keys.iter().zip(&batches) {
            if k.len() != b.num_rows() || b.schema() != schema || b.num_columns() != columns.len() {
                return Err("a batch does not match its handles or the schema".into());
            }
            for i in 0..k.len() {
                let h = k.value(i);
                if last.is_some_and(|l| l >= h) {
                    return Err("handles out of order".into());
                }
                last = Some(h);
            }
            rows += k.len();
        }
        Ok(Stable { ts, columns, schema, keys, batches, rows })
    }

    /// The same rows, as the table at the later `ts` (nothing changed in between).
    fn at(&self, ts: Timestamp) -> Stable {
        Stable {
            ts,
            columns: self.columns.clone(),
            schema: self.schema.clone(),
            keys: self.keys.clone(),
            batches: self.batches.clone(),
            rows: self.rows,
        }
    }
}

/// Whether a replica built for `built` can serve reads planned against `now`: the same
/// table with the same columns and key.
fn same_shape(built: &TableInfo, now: &TableInfo) -> bool {
    built.id == now.id && built.columns == now.columns && built.pk == now.pk
}

fn names(info: &TableInfo) -> Vec<String> {
    (0..info.columns.len()).map(|i| format!("c{i}")).collect()
}

/// The table positions a replica of `info` holds: those with an Arrow type.
fn arrow_columns(info: &TableInfo) -> Vec<usize> {
    (0..info.columns.len()).filter(|&c| arrow_type(&info.columns[c].ty).is_some()).collect()
}

fn skip_error(s: Skip) -> Error {
    Error::internal(format!("columnar replica: {}", s.0))
}

fn over_budget(info: &TableInfo, budget: usize) -> Error {
    Error::internal(format!(
        "the columnar replica of {}.{} needs more than the {budget} bytes left under --columnar-memory-limit",
        info.db, info.name
    ))
}

impl ReplicaStore {
    /// An empty store that keeps replicas in memory only.
    pub fn new() -> ReplicaStore {
        ReplicaStore::default()
    }

    /// An empty store that writes stable parts to `dir` (if any) and starts from what it
    /// holds, with at most `memory_limit` bytes of them in memory (0: no limit).
    pub fn with_dir(dir: Option<PathBuf>, memory_limit: usize) -> ReplicaStore {
        ReplicaStore { dir, memory_limit, ..ReplicaStore::default() }
    }

    /// Bytes the stable parts of the replicas other than `except` hold.
    fn memory_bytes(&self, except: i64) -> usize {
        self.all().iter().filter(|r| r.table_id != except).filter_map(|r| r.stable()).map(|s| s.bytes()).sum()
    }

    /// What `--columnar-memory-limit` leaves for `table_id`'s replica (`usize::MAX`: no
    /// limit).
    pub fn budget(&self, table_id: i64) -> usize {
        if self.memory_limit == 0 {
            return usize::MAX;
        }
        self.memory_limit.saturating_sub(self.memory_bytes(table_id))
    }

    /// Forgets `r` after its build or load failed: it stops taking changes and holding GC
    /// back, and the next reconcile (a schema change, or the periodic retry) starts it over.
    pub fn forget(&self, r: &Arc<TableReplica>) {
        let mut tables = self.tables.write();
        if tables.get(&r.table_id).is_some_and(|x| Arc::ptr_eq(x, r)) {
            tables.remove(&r.table_id);
            r.dropped.store(true, Ordering::Release);
        }
        self.any.store(!tables.is_empty(), Ordering::Release);
    }

    /// Where stable parts are written, if anywhere.
    pub fn dir(&self) -> Option<&std::path::Path> {
        self.dir.as_deref()
    }

    /// The replica of `table_id`, if one is kept.
    pub fn get(&self, table_id: i64) -> Option<Arc<TableReplica>> {
        self.tables.read().get(&table_id).cloned()
    }

    /// Its state for information_schema.
    pub fn state(&self, table_id: i64) -> Option<ReplicaState> {
        let r = self.get(table_id)?;
        let available = r.state.read().stable.is_some();
        Some(ReplicaState { available, progress: if available { 1.0 } else { r.progress() } })
    }

    /// Matches the replicas to `schema`: tables that want one and have none (or one built
    /// for another definition) get a new, empty one, registered with the feed and returned
    /// with what to start it from — its file when one was written for this definition, else
    /// a scan; replicas nobody wants any more are dropped, with their memory and files.
    pub fn reconcile(&self, schema: &Catalog) -> Vec<(Arc<TableReplica>, Arc<TableInfo>, Origin)> {
        let wanted: HashMap<i64, Arc<TableInfo>> = schema
            .all_tables()
            .into_iter()
            .filter(|t| t.columnar_replica.as_ref().is_some_and(|r| r.count > 0))
            .map(|t| (t.id, t))
            .collect();
        // What the files on disk hold, for the tables that want a replica and have none.
        let missing: Vec<i64> = {
            let tables = self.tables.read();
            wanted
                .iter()
                .filter(|(id, t)| !tables.get(id).is_some_and(|r| same_shape(&r.state.read().info, t)))
                .map(|(id, _)| *id)
                .collect()
        };
        let mut on_disk: HashMap<i64, Timestamp> = HashMap::new();
        if let Some(dir) = &self.dir {
            for id in missing {
                match persist::header(dir, id) {
                    Ok(Some(h)) if same_shape(&h.info, &wanted[&id]) => {
                        on_disk.insert(id, h.ts);
                    }
                    Ok(Some(_)) => persist::remove(dir, id),
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!("{e}; the replica is rebuilt");
                        persist::remove(dir, id);
                    }
                }
            }
        }
        let mut tables = self.tables.write();
        tables.retain(|id, r| {
            let keep = wanted.get(id).is_some_and(|t| same_shape(&r.state.read().info, t));
            if !keep {
                r.dropped.store(true, Ordering::Release);
            }
            keep
        });
        let mut new = Vec::new();
        for (id, info) in &wanted {
            if tables.contains_key(id) {
                continue;
            }
            let origin = on_disk.get(id).map_or(Origin::Scan, |ts| Origin::Disk(*ts));
            let r = Arc::new(TableReplica {
                table_id: *id,
                prefix: row_prefix(TableId(*id)),
                state: RwLock::new(State {
                    info: info.clone(),
                    stable: None,
                    delta: BTreeMap::new(),
                    delta_versions: 0,
                    gen: 0,
                }),
                progress: AtomicU64::new(0f64.to_bits()),
                // A scan holds GC back from now until it has its snapshot; a file from its
                // timestamp.
                floor: AtomicU64::new(match origin {
                    Origin::Scan => 0,
                    Origin::Disk(ts) => ts.0,
                }),
                persisted: Mutex::new(0),
                persisted_gen: AtomicU64::new(0),
                last_write: Mutex::new(None),
                dropped: AtomicBool::new(false),
            });
            tables.insert(*id, r.clone());
            new.push((r, info.clone(), origin));
        }
        self.any.store(!tables.is_empty(), Ordering::Release);
        drop(tables);
        // Files of tables that no longer want a replica (dropped now, or while the server
        // was down).
        if let Some(dir) = &self.dir {
            for id in persist::list(dir) {
                if !wanted.contains_key(&id) {
                    persist::remove(dir, id);
                }
            }
        }
        new
    }

    /// Every replica.
    pub fn all(&self) -> Vec<Arc<TableReplica>> {
        self.tables.read().values().cloned().collect()
    }

    /// The oldest timestamp any replica may still need versions at (see the module docs):
    /// garbage collection stays at or below it.
    pub fn gc_floor(&self) -> Option<Timestamp> {
        self.tables
            .read()
            .values()
            .map(|r| r.floor.load(Ordering::Acquire))
            .filter(|f| *f != NO_FLOOR)
            .min()
            .map(Timestamp)
    }

    /// Counters and sizes for SHOW STATUS.
    pub fn status(&self) -> Vec<(&'static str, u64)> {
        let (mut memory, mut delta) = (0u64, 0u64);
        for r in self.all() {
            let st = r.state.read();
            memory += st.stable.as_ref().map_or(0, |s| s.bytes() as u64);
            delta += st.delta_versions as u64;
        }
        let disk = self.dir.as_ref().map_or(0, |dir| {
            persist::list(dir)
                .into_iter()
                .filter_map(|id| std::fs::metadata(persist::path(dir, id)).ok())
                .map(|m| m.len())
                .sum()
        });
        vec![
            ("Strata_columnar_replica_builds", self.builds.load(Ordering::Relaxed)),
            ("Strata_columnar_replica_loads", self.loads.load(Ordering::Relaxed)),
            ("Strata_columnar_replica_compactions", self.compactions.load(Ordering::Relaxed)),
            ("Strata_columnar_replica_file_writes", self.writes.load(Ordering::Relaxed)),
            ("Strata_columnar_replica_memory_bytes", memory),
            ("Strata_columnar_replica_delta_versions", delta),
            ("Strata_columnar_replica_disk_bytes", disk),
        ]
    }

    /// Whether `persist` would write `r`'s file now.
    pub fn persist_due(&self, r: &TableReplica, every: Duration) -> bool {
        // One lock at a time (`persist` takes `persisted` before `state`).
        let gen = {
            let st = r.state.read();
            st.stable.as_ref().map(|_| st.gen)
        };
        let changed = gen.is_some_and(|g| g != *r.persisted.lock());
        self.dir.is_some() && changed && !r.last_write.lock().is_some_and(|t| t.elapsed() < every)
    }

    /// Writes `r`'s stable part to disk if it changed since the file was written and the
    /// file is older than `every` (zero: whenever it changed). Returns whether it wrote.
    pub fn persist(&self, r: &TableReplica, every: Duration) -> Result<bool> {
        let Some(dir) = &self.dir else { return Ok(false) };
        let mut on_disk = r.persisted.lock();
        let (stable, info, gen) = {
            let st = r.state.read();
            let Some(stable) = st.stable.clone() else { return Ok(false) };
            (stable, st.info.clone(), st.gen)
        };
        if gen == *on_disk || r.last_write.lock().is_some_and(|t| t.elapsed() < every) {
            return Ok(false);
        }
        if let Err(e) = persist::save(dir, &info, &stable) {
            let _ = std::fs::remove_file(persist::path(dir, r.table_id).with_extension("arrow.tmp"));
            return Err(e);
        }
        if r.dropped.load(Ordering::Acquire) {
            persist::remove(dir, r.table_id);
            return Ok(false);
        }
        *on_disk = gen;
        r.persisted_gen.store(gen, Ordering::Release);
        r.floor.store(stable.ts.0, Ordering::Release);
        *r.last_write.lock() = Some(Instant::now());
        self.writes.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// Counts a finished build, load or compaction.
    pub(crate) fn count(&self, what: Origin) {
        match what {
            Origin::Scan => &self.builds,
            Origin::Disk(_) => &self.loads,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_compaction(&self) {
        self.compactions.fetch_add(1, Ordering::Relaxed);
    }
}

impl ChangeSink for ReplicaStore {
    fn wants(&self, key: &[u8]) -> bool {
        if !self.any.load(Ordering::Acquire) {
            return false;
        }
        let Some(id) = table_of(key) else { return false };
        self.tables.read().get(&id.0).is_some_and(|r| key.starts_with(&r.prefix))
    }

    fn committed(&self, changes: Vec<CommittedChange>) {
        let tables = self.tables.read();
        for c in changes {
            let Some(r) = table_of(&c.key).and_then(|id| tables.get(&id.0)) else { continue };
            let Some(handle) = c.key.strip_prefix(r.prefix.as_slice()) else { continue };
            let mut st = r.state.write();
            st.delta.entry(handle.to_vec()).or_default().push((c.commit_ts, c.value));
            st.delta_versions += 1;
        }
    }
}

impl TableReplica {
    /// The table it copies.
    pub fn table_id(&self) -> i64 {
        self.table_id
    }

    fn progress(&self) -> f64 {
        f64::from_bits(self.progress.load(Ordering::Relaxed))
    }

    /// Builds the stable part from a snapshot read by `txn` (which began after the replica
    /// was registered, so every later commit is in the delta). `estimate` is the expected
    /// row count, for the progress shown; the build fails once its arrays pass `budget`
    /// bytes.
    pub async fn build(&self, info: &TableInfo, txn: &Transaction, estimate: usize, budget: usize) -> Result<()> {
        let columns = arrow_columns(info);
        let types: Vec<_> = info.columns.iter().map(|c| c.ty.clone()).collect();
        let mut builder = BatchBuilder::new(columns.clone(), &types, &names(info)).map_err(skip_error)?;
        let mut handles = datafusion::arrow::array::BinaryBuilder::new();
        let (mut keys, mut batches) = (Vec::new(), Vec::new());
        let end = prefix_end(&self.prefix);
        let mut start = self.prefix.clone();
        let (mut rows, mut bytes) = (0usize, 0usize);
        loop {
            let chunk = txn.scan(&start, &end, BUILD_CHUNK).await?;
            let n = chunk.len();
            for (k, v) in &chunk {
                let (row, _) = strata_sql::table::decode_row(info, v)?;
                builder.push(&row).map_err(skip_error)?;
                handles.append_value(&k[self.prefix.len()..]);
                rows += 1;
                if builder.len() >= BATCH_ROWS {
                    let (b, k) = (builder.finish().map_err(skip_error)?, handles.finish());
                    bytes += b.get_array_memory_size() + k.get_array_memory_size();
                    if bytes > budget {
                        return Err(over_budget(info, budget));
                    }
                    batches.push(b);
                    keys.push(k);
                }
            }
            if let Some((last, _)) = chunk.last() {
                start = last.clone();
                start.push(0);
            }
            let p = if estimate == 0 { 0.0 } else { (rows as f64 / estimate as f64).min(0.99) };
            self.progress.store(p.to_bits(), Ordering::Relaxed);
            if n < BUILD_CHUNK {
                break;
            }
            tokio::task::yield_now().await;
        }
        if builder.len() > 0 {
            let (b, k) = (builder.finish().map_err(skip_error)?, handles.finish());
            bytes += b.get_array_memory_size() + k.get_array_memory_size();
            batches.push(b);
            keys.push(k);
        }
        if bytes > budget {
            return Err(over_budget(info, budget));
        }
        let ts = txn.read_ts();
        let schema = builder.schema();
        let stable = Arc::new(Stable { ts, columns, schema, keys, batches, rows });
        let mut st = self.state.write();
        // What the snapshot saw is in the stable part now.
        prune(&mut st, &|_, t| t <= ts);
        st.stable = Some(stable);
        st.gen += 1;
        self.progress.store(1f64.to_bits(), Ordering::Relaxed);
        Ok(())
    }

    /// Whether `stable`, read back from a file written for `built_for`, can serve `info`: the
    /// same definition, and the columns and Arrow types a build would give it now.
    pub fn fits(&self, built_for: &TableInfo, info: &TableInfo, stable: &Stable) -> bool {
        if !same_shape(built_for, info) || built_for.id != self.table_id || stable.columns != arrow_columns(info) {
            return false;
        }
        let types: Vec<_> = info.columns.iter().map(|c| c.ty.clone()).collect();
        BatchBuilder::new(stable.columns.clone(), &types, &names(info)).is_ok_and(|b| b.schema() == stable.schema)
    }

    /// Whether its stable part is built (or loaded).
    pub fn is_built(&self) -> bool {
        self.state.read().stable.is_some()
    }

    /// Whether a file of it was written (or loaded) in this process.
    pub fn on_disk(&self) -> bool {
        self.persisted_gen.load(Ordering::Acquire) != 0
    }

    /// Holds GC at or below `ts` (a build's snapshot about to be read: 0 until it has one).
    pub fn hold_gc(&self, ts: Timestamp) {
        self.floor.store(ts.0, Ordering::Release);
    }

    /// Holds GC back nowhere (there is no file to catch up from).
    pub fn release_gc(&self) {
        self.floor.store(NO_FLOOR, Ordering::Release);
    }

    /// Makes the stable part read back from this replica's file (`stable`, at the file's
    /// timestamp) current as of `txn`'s snapshot: the changes committed since — listed by
    /// the store, as for a scan, after the replica was registered with the feed — are
    /// merged in like a compaction. Returns how many keys changed.
    pub async fn catch_up(&self, info: &TableInfo, stable: Stable, txn: &Transaction) -> Result<usize> {
        let end = prefix_end(&self.prefix);
        let mut start = self.prefix.clone();
        let mut changes: BTreeMap<Vec<u8>, (Timestamp, Option<Vec<u8>>)> = BTreeMap::new();
        loop {
            let chunk = txn.scan_changes(&start, &end, stable.ts, BUILD_CHUNK).await?;
            let n = chunk.len();
            if let Some(last) = chunk.last() {
                start = last.key.clone();
                start.push(0);
            }
            for c in chunk {
                if let Some(h) = c.key.strip_prefix(self.prefix.as_slice()) {
                    changes.insert(h.to_vec(), (c.commit_ts, c.value));
                }
            }
            if n < BUILD_CHUNK {
                break;
            }
            tokio::task::yield_now().await;
        }
        let ts = txn.read_ts();
        let changed = changes.len();
        let stable = if changed > 0 {
            let info = info.clone();
            tokio::task::spawn_blocking(move || merge(&stable, &info, &changes, ts))
                .await
                .map_err(|e| Error::internal(format!("catch-up task failed: {e}")))??
        } else {
            stable.at(ts)
        };
        let mut st = self.state.write();
        if !same_shape(&st.info, info) {
            return Err(Error::internal("the replica was built for another definition"));
        }
        prune(&mut st, &|_, t| t <= ts);
        st.stable = Some(Arc::new(stable));
        st.gen += 1;
        if changed == 0 {
            // The file holds these rows already.
            *self.persisted.lock() = st.gen;
            self.persisted_gen.store(st.gen, Ordering::Release);
        }
        self.progress.store(1f64.to_bits(), Ordering::Relaxed);
        Ok(changed)
    }

    /// Reads the table at `txn`'s snapshot, with its own writes: `columns` (table
    /// positions) as Arrow batches. `Ok(None)`: this replica cannot answer (not built, built
    /// for another definition, newer than the snapshot, or lacking a column); the caller
    /// reads the row store.
    pub async fn read(
        &self,
        info: &TableInfo,
        columns: &[usize],
        txn: &Transaction,
    ) -> Result<Option<Vec<RecordBatch>>> {
        let ts = txn.snapshot_ts()?;
        {
            let st = self.state.read();
            match &st.stable {
                Some(s) if s.ts <= ts && same_shape(&st.info, info) => {}
                _ => return Ok(None),
            }
        }
        let end = prefix_end(&self.prefix);
        txn.check_locks(&self.prefix, &end).await?;
        // The newest version at or below the snapshot of every handle the delta touches.
        let (stable, mut changes) = {
            let st = self.state.read();
            let Some(stable) = st.stable.clone() else { return Ok(None) };
            if stable.ts > ts {
                return Ok(None);
            }
            let mut changes: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
            for (h, versions) in &st.delta {
                if let Some((_, v)) = versions.iter().rev().find(|(t, _)| *t <= ts) {
                    changes.insert(h.clone(), v.clone());
                }
            }
            (stable, changes)
        };
        for (k, v) in txn.own_writes(&self.prefix, &end) {
            changes.insert(k[self.prefix.len()..].to_vec(), v);
        }
        let Some(positions) =
            columns.iter().map(|c| stable.columns.iter().position(|x| x == c)).collect::<Option<Vec<_>>>()
        else {
            return Ok(None);
        };
        // Stable rows that a change replaces or deletes.
        let mut hidden: Vec<Vec<bool>> = Vec::new();
        for h in changes.keys() {
            if let Some((b, r)) = stable.find(h) {
                if hidden.is_empty() {
                    hidden = stable.batches.iter().map(|b| vec![false; b.num_rows()]).collect();
                }
                hidden[b][r] = true;
            }
        }
        let mut out = Vec::with_capacity(stable.batches.len() + 1);
        for (i, batch) in stable.batches.iter().enumerate() {
            let projected = batch.project(&positions).map_err(|e| Error::internal(e.to_string()))?;
            let kept = match hidden.get(i) {
                Some(mask) if mask.iter().any(|h| *h) => {
                    let keep = BooleanArray::from(mask.iter().map(|h| !h).collect::<Vec<bool>>());
                    filter_record_batch(&projected, &keep).map_err(|e| Error::internal(e.to_string()))?
                }
                _ => projected,
            };
            if kept.num_rows() > 0 {
                out.push(kept);
            }
        }
        let live: Vec<&Vec<u8>> = changes.values().flatten().collect();
        if !live.is_empty() {
            let types: Vec<_> = info.columns.iter().map(|c| c.ty.clone()).collect();
            let Ok(mut builder) = BatchBuilder::new(columns.to_vec(), &types, &names(info)) else { return Ok(None) };
            for v in live {
                let (row, _) = strata_sql::table::decode_row(info, v)?;
                if builder.push(&row).is_err() {
                    return Ok(None);
                }
                if builder.len() >= BATCH_ROWS {
                    out.push(builder.finish().map_err(skip_error)?);
                }
            }
            if builder.len() > 0 {
                out.push(builder.finish().map_err(skip_error)?);
            }
        }
        Ok(Some(out))
    }

    /// Folds the delta versions at or below `upto` into a new stable part at `upto`, so
    /// reads stop re-applying them. Readers keep using the old part meanwhile; versions that
    /// arrive during the merge stay in the delta.
    pub fn compact(&self, upto: Timestamp) -> Result<bool> {
        let (stable, info, changes, gen) = {
            let st = self.state.read();
            let Some(stable) = st.stable.clone() else { return Ok(false) };
            if upto <= stable.ts {
                return Ok(false);
            }
            let mut changes: BTreeMap<Vec<u8>, (Timestamp, Option<Vec<u8>>)> = BTreeMap::new();
            for (h, versions) in &st.delta {
                if let Some((t, v)) = versions.iter().rev().find(|(t, _)| *t <= upto) {
                    changes.insert(h.clone(), (*t, v.clone()));
                }
            }
            if changes.is_empty() {
                // Nothing committed to the table up to `upto` since the stable part: if the
                // file holds it, the file is the table at `upto` too (every commit at or
                // below `upto` has reached the feed), and GC may move up to there.
                if st.gen != 0 && self.persisted_gen.load(Ordering::Acquire) == st.gen {
                    self.floor.fetch_max(upto.0, Ordering::AcqRel);
                }
                return Ok(false);
            }
            (stable, st.info.clone(), changes, st.gen)
        };
        let merged = merge(&stable, &info, &changes, upto)?;
        let mut st = self.state.write();
        if st.gen != gen {
            return Ok(false); // rebuilt or caught up meanwhile
        }
        prune(&mut st, &|h, t| changes.get(h).is_some_and(|(newest, _)| t <= *newest));
        st.stable = Some(Arc::new(merged));
        st.gen += 1;
        Ok(true)
    }

    /// Versions waiting in the delta.
    pub fn delta_versions(&self) -> usize {
        self.state.read().delta_versions
    }

    /// The stable part, if built.
    pub fn stable(&self) -> Option<Arc<Stable>> {
        self.state.read().stable.clone()
    }
}

/// Drops the delta versions `gone(handle, ts)` says the stable part holds.
fn prune(st: &mut State, gone: &dyn Fn(&[u8], Timestamp) -> bool) {
    let mut removed = 0;
    st.delta.retain(|h, versions| {
        let before = versions.len();
        versions.retain(|(t, _)| !gone(h, *t));
        removed += before - versions.len();
        !versions.is_empty()
    });
    st.delta_versions -= removed;
}

/// The stable part `stable` with `changes` (handle → newest version at or below `ts`)
/// applied, at `ts`.
fn merge(
    stable: &Stable,
    info: &TableInfo,
    changes: &BTreeMap<Vec<u8>, (Timestamp, Option<Vec<u8>>)>,
    ts: Timestamp,
) -> Result<Stable> {
    // The changed rows that exist, decoded into one extra source batch.
    let types: Vec<_> = info.columns.iter().map(|c| c.ty.clone()).collect();
    let mut builder = BatchBuilder::new(stable.columns.clone(), &types, &names(info)).map_err(skip_error)?;
    let mut new_keys = datafusion::arrow::array::BinaryBuilder::new();
    for (h, (_, v)) in changes {
        if let Some(v) = v {
            let (row, _) = strata_sql::table::decode_row(info, v)?;
            builder.push(&row).map_err(skip_error)?;
            new_keys.append_value(h);
        }
    }
    let added = builder.finish().map_err(skip_error)?;
    let added_keys = new_keys.finish();
    let extra = stable.batches.len();
    // Merge-walk the old rows (sorted) and the changes (sorted) into (source, row) picks.
    let mut picks: Vec<(usize, usize)> = Vec::with_capacity(stable.rows + added.num_rows());
    let mut change = changes.iter().peekable();
    let mut added_row = 0;
    let mut take_change = |picks: &mut Vec<(usize, usize)>, v: &Option<Vec<u8>>| {
        if v.is_some() {
            picks.push((extra, added_row));
            added_row += 1;
        }
    };
    for (b, keys) in stable.keys.iter().enumerate() {
        for r in 0..keys.len() {
            let k = keys.value(r);
            while let Some((h, (_, v))) = change.peek() {
                if h.as_slice() < k {
                    take_change(&mut picks, v);
                    change.next();
                } else {
                    break;
                }
            }
            match change.peek() {
                Some((h, (_, v))) if h.as_slice() == k => {
                    take_change(&mut picks, v);
                    change.next();
                }
                _ => picks.push((b, r)),
            }
        }
    }
    for (_, (_, v)) in change {
        take_change(&mut picks, v);
    }
    // Rebuild the batches (and handles) from the picks.
    let schema: SchemaRef = added.schema();
    let mut key_sources: Vec<&dyn Array> = stable.keys.iter().map(|k| k as &dyn Array).collect();
    key_sources.push(&added_keys);
    let mut keys = Vec::new();
    let mut batches = Vec::new();
    for chunk in picks.chunks(BATCH_ROWS) {
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for c in 0..schema.fields().len() {
            let mut sources: Vec<&dyn Array> = stable.batches.iter().map(|b| b.column(c).as_ref()).collect();
            sources.push(added.column(c).as_ref());
            arrays.push(interleave(&sources, chunk).map_err(|e| Error::internal(e.to_string()))?);
        }
        let options = datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(chunk.len()));
        batches.push(
            RecordBatch::try_new_with_options(schema.clone(), arrays, &options)
                .map_err(|e| Error::internal(e.to_string()))?,
        );
        let k = interleave(&key_sources, chunk).map_err(|e| Error::internal(e.to_string()))?;
        let k = k
            .as_any()
            .downcast_ref::<BinaryArray>()
            .cloned()
            .ok_or_else(|| Error::internal("handles are not binary"))?;
        keys.push(k);
    }
    Ok(Stable { ts, columns: stable.columns.clone(), schema, keys, batches, rows: picks.len() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use strata_kv::{Client, Oracle};
    use strata_mvcc::{LocalClient, LocalOracle, MvccStore, SystemClock};
    use strata_sql::session::Engine;
    use strata_storage::MemoryEngine;
    use strata_txn::TxnOptions;

    async fn engine() -> Arc<Engine> {
        let kv = Arc::new(MemoryEngine::new());
        let client: Arc<dyn Client> =
            Arc::new(LocalClient::new(Arc::new(MvccStore::open(kv.clone()).expect("store")), false));
        let oracle: Arc<dyn Oracle> = Arc::new(LocalOracle::open(kv, Arc::new(SystemClock)).expect("oracle"));
        Engine::open(client, oracle).await.expect("engine")
    }

    async fn run(sql: &Arc<Engine>, text: &str) {
        let mut s = sql.session("root");
        for r in s.execute(text).await {
            r.expect(text);
        }
    }

    /// (id, v) pairs the replica gives at a fresh snapshot, sorted by id.
    async fn replica_rows(sql: &Arc<Engine>, r: &TableReplica, info: &TableInfo) -> Vec<(i64, Option<i64>)> {
        let txn = Transaction::begin(sql.client.clone(), sql.oracle.clone(), TxnOptions::default()).await.expect("txn");
        let batches = r.read(info, &[0, 1], &txn).await.expect("read").expect("the replica answers");
        let mut out = Vec::new();
        for b in batches {
            let ids = b.column(0).as_any().downcast_ref::<Int64Array>().expect("ids");
            let vs = b.column(1).as_any().downcast_ref::<Int64Array>().expect("values");
            for i in 0..b.num_rows() {
                out.push((ids.value(i), vs.is_valid(i).then(|| vs.value(i))));
            }
        }
        out.sort();
        out
    }

    /// What the row store holds, for comparison.
    async fn model(sql: &Arc<Engine>) -> Vec<(i64, Option<i64>)> {
        let mut s = sql.session("root");
        let r = s.execute("SELECT id, v FROM d.t ORDER BY id").await.remove(0).expect("select");
        let strata_sql::result::QueryResult::Rows { rows, .. } = r else { panic!("rows") };
        rows.into_iter()
            .map(|r| {
                let int = |v: &strata_common::Value| match v {
                    strata_common::Value::Int(i) => Some(*i),
                    strata_common::Value::Null => None,
                    other => panic!("{other:?}"),
                };
                (int(&r[0]).expect("id"), int(&r[1]))
            })
            .collect()
    }

    /// Runs `body` on the server's thread stacks (`depth::STACK_SIZE`), which the SQL layer
    /// expects.
    fn on_server_stacks<F: std::future::Future<Output = ()> + Send + 'static>(body: F) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_stack_size(strata_sql::depth::STACK_SIZE)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async { rt.spawn(body).await.expect("no panic") });
    }

    #[test]
    fn feed_compaction_and_reads_track_the_row_store() {
        on_server_stacks(scenario());
    }

    #[test]
    fn a_written_replica_loads_and_catches_up_instead_of_rebuilding() {
        on_server_stacks(restart_scenario());
    }

    async fn restart_scenario() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sql = engine().await;
        run(&sql, "CREATE DATABASE d").await;
        run(&sql, "CREATE TABLE d.t (id BIGINT PRIMARY KEY, v BIGINT)").await;
        let values: Vec<String> = (0..20_000).map(|i| format!("({i}, {})", i * 3)).collect();
        run(&sql, &format!("INSERT INTO d.t VALUES {}", values.join(","))).await;
        run(&sql, "ALTER TABLE d.t SET TIFLASH REPLICA 1").await;

        // Build and write it: the file holds GC back to its timestamp.
        let store = Arc::new(ReplicaStore::with_dir(Some(dir.path().to_path_buf()), 0));
        sql.client.subscribe(store.clone()).expect("subscribe");
        let (r, info, origin) = store.reconcile(&sql.catalog.schema()).pop().expect("one");
        assert_eq!(origin, Origin::Scan);
        assert_eq!(store.gc_floor(), Some(Timestamp::ZERO), "nothing may go before the build has its snapshot");
        let txn = Transaction::begin(sql.client.clone(), sql.oracle.clone(), TxnOptions::default()).await.expect("txn");
        r.hold_gc(txn.read_ts());
        r.build(&info, &txn, 20_000, usize::MAX).await.expect("build");
        assert!(store.persist(&r, Duration::ZERO).expect("write"));
        assert!(!store.persist(&r, Duration::ZERO).expect("write"), "unchanged: not written again");
        let written = r.stable().expect("stable").ts;
        let built_bytes = r.stable().expect("stable").bytes();
        assert_eq!(store.gc_floor(), Some(written));
        assert!(persist::path(dir.path(), info.id).exists());

        // No writes: compaction moves the floor without writing.
        let upto = sql.oracle.get_ts().await.expect("ts");
        assert!(!r.compact(upto).expect("compact"));
        assert_eq!(store.gc_floor(), Some(upto));

        // Writes after the file, some folded into memory only; then the server "stops".
        run(&sql, "UPDATE d.t SET v = -v WHERE id % 1000 = 3").await;
        run(&sql, "DELETE FROM d.t WHERE id BETWEEN 100 AND 9000").await;
        assert!(r.compact(sql.oracle.get_ts().await.expect("ts")).expect("compact"));
        assert_eq!(store.gc_floor(), Some(upto), "the file is older than memory now");
        run(&sql, "INSERT INTO d.t VALUES (-1, 1), (500, 5), (20000, NULL)").await;
        run(&sql, "UPDATE d.t SET v = 7 WHERE id = 19999").await;
        let file = persist::path(dir.path(), info.id);
        let size = std::fs::metadata(&file).expect("file").len();
        drop(r);
        drop(store);

        // "Restart": a new store finds the file, registers it (holding GC to its time) and
        // catches up with every change since.
        let store = Arc::new(ReplicaStore::with_dir(Some(dir.path().to_path_buf()), 0));
        sql.client.subscribe(store.clone()).expect("subscribe");
        let (r, info, origin) = store.reconcile(&sql.catalog.schema()).pop().expect("one");
        assert_eq!(origin, Origin::Disk(written));
        assert_eq!(store.gc_floor(), Some(written));
        let (built_for, stable) = persist::load(dir.path(), info.id).expect("read").expect("file");
        assert_eq!(stable.rows, 20_000);
        // Each array has buffers of its own, as built: memory is counted once.
        assert!(stable.bytes() <= built_bytes + built_bytes / 2, "{} vs {built_bytes}", stable.bytes());
        assert!(r.fits(&built_for, &info, &stable));
        run(&sql, "UPDATE d.t SET v = 8 WHERE id = 19998").await; // fed, and listed too
        let txn = Transaction::begin(sql.client.clone(), sql.oracle.clone(), TxnOptions::default()).await.expect("txn");
        assert_eq!(r.catch_up(&info, stable, &txn).await.expect("catch up"), 8_901 + 12 + 2 + 1 + 1);
        assert_eq!(r.delta_versions(), 0);
        assert_eq!(replica_rows(&sql, &r, &info).await, model(&sql).await);
        run(&sql, "DELETE FROM d.t WHERE id = 19997").await;
        assert_eq!(replica_rows(&sql, &r, &info).await, model(&sql).await);
        assert!(store.persist(&r, Duration::ZERO).expect("write"));
        assert!(std::fs::metadata(&file).expect("file").len() < size, "the deleted rows left the file");

        // A file for another definition is not used; REPLICA 0 removes the file.
        let other = TableInfo { columns: info.columns[..1].to_vec(), ..(*info).clone() };
        let (built_for, stable) = persist::load(dir.path(), info.id).expect("read").expect("file");
        assert!(!r.fits(&built_for, &other, &stable));
        run(&sql, "ALTER TABLE d.t SET TIFLASH REPLICA 0").await;
        assert!(store.reconcile(&sql.catalog.schema()).is_empty());
        assert!(!file.exists());
        assert_eq!(store.gc_floor(), None);
    }

    async fn scenario() {
        let sql = engine().await;
        run(&sql, "CREATE DATABASE d").await;
        run(&sql, "CREATE TABLE d.t (id BIGINT PRIMARY KEY, v BIGINT)").await;
        let values: Vec<String> = (0..20_000).map(|i| format!("({i}, {})", i * 2)).collect();
        run(&sql, &format!("INSERT INTO d.t VALUES {}", values.join(","))).await;
        run(&sql, "ALTER TABLE d.t SET TIFLASH REPLICA 1").await;

        let store = Arc::new(ReplicaStore::new());
        sql.client.subscribe(store.clone()).expect("subscribe");
        let new = store.reconcile(&sql.catalog.schema());
        assert_eq!(new.len(), 1);
        let (r, info, origin) = new.into_iter().next().expect("one");
        assert_eq!(origin, Origin::Scan);
        assert_eq!(store.state(info.id).map(|s| s.available), Some(false));
        // A write between registration and the build's snapshot is seen once.
        run(&sql, "UPDATE d.t SET v = -1 WHERE id = 3").await;
        let txn = Transaction::begin(sql.client.clone(), sql.oracle.clone(), TxnOptions::default()).await.expect("txn");
        r.build(&info, &txn, 20_000, usize::MAX).await.expect("build");
        assert_eq!(store.state(info.id).map(|s| s.available), Some(true));
        assert_eq!(r.delta_versions(), 0, "what the snapshot saw leaves the delta");
        assert_eq!(replica_rows(&sql, &r, &info).await, model(&sql).await);

        // Writes of every kind, across stable batch boundaries, then compaction rounds.
        run(&sql, "UPDATE d.t SET v = v + 1 WHERE id % 1000 = 7").await;
        run(&sql, "DELETE FROM d.t WHERE id BETWEEN 8000 AND 8300 OR id = 0 OR id = 19999").await;
        run(&sql, "INSERT INTO d.t VALUES (-5, NULL), (50000, 1), (8100, 81)").await;
        assert!(r.delta_versions() > 300);
        assert_eq!(replica_rows(&sql, &r, &info).await, model(&sql).await);
        let old = r.stable().expect("stable");
        // A snapshot taken before the compaction keeps reading through the old stable part.
        let early =
            Transaction::begin(sql.client.clone(), sql.oracle.clone(), TxnOptions::default()).await.expect("txn");
        let upto = sql.oracle.get_ts().await.expect("ts");
        assert!(r.compact(upto).expect("compact"));
        assert_eq!(r.delta_versions(), 0);
        let new_stable = r.stable().expect("stable");
        assert_eq!(new_stable.ts, upto);
        assert_eq!(new_stable.rows, old.rows - 303 + 3);
        assert_eq!(replica_rows(&sql, &r, &info).await, model(&sql).await);
        assert!(r.read(&info, &[0, 1], &early).await.expect("read").is_none(), "older than the stable part");

        run(&sql, "UPDATE d.t SET v = 0 WHERE id < 100").await;
        run(&sql, "DELETE FROM d.t WHERE id > 15000").await;
        assert!(r.compact(sql.oracle.get_ts().await.expect("ts")).expect("compact"));
        run(&sql, "INSERT INTO d.t VALUES (15001, 7)").await;
        assert_eq!(replica_rows(&sql, &r, &info).await, model(&sql).await);

        // REPLICA 0 drops it.
        run(&sql, "ALTER TABLE d.t SET TIFLASH REPLICA 0").await;
        assert!(store.reconcile(&sql.catalog.schema()).is_empty());
        assert!(store.get(info.id).is_none());
        assert!(!store.wants(&strata_sql::table::row_key(&info, b"x")));
    }
}
