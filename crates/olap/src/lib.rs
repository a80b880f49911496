//! Strata's vectorized engine: read-only queries run on DataFusion.
//!
//! `strata-sql` plans every query for its row executor; this crate implements its
//! `ColumnEngine` seam. A query's typed plan is translated to a DataFusion logical plan
//! (`translate`), DataFusion optimizes it, each table scan the optimized plan still reads
//! is loaded through the statement's transaction — its snapshot, its own uncommitted
//! writes, only the columns read — into Arrow batches (`provider`), and the physical plan
//! runs on the server's Tokio runtime. Results come back as rows in the kinds the row
//! engine produces for the plan's column types (`convert`).
//!
//! Tables with a columnar replica (`replica`) are read from it instead: Arrow columns at
//! the statement's snapshot, kept current by the store's change feed, with the scan's
//! access path and filter evaluated by DataFusion.
//!
//! A plan with no faithful translation is a [`Skip`]: the engine answers `None` and the
//! row engine runs the query. DataFusion's memory is charged to the statement's memory
//! tracker (`tidb_mem_quota_query`, 8175 past it); KILL and `max_execution_time` stop the
//! query between batches.

mod convert;
mod group_filter;
mod persist;
mod probe_filter;
mod provider;
pub mod replica;
mod semi_join;
mod translate;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::DataFusionError;
use datafusion::execution::memory_pool::{MemoryPool, MemoryReservation};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::execution::session_state::{SessionState, SessionStateBuilder};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::execute_stream;
use datafusion::prelude::SessionConfig;
use futures_util::StreamExt;
use parking_lot::Mutex;
use replica::{Origin, ReplicaStore};
use strata_common::{Error, Result, Value};
use strata_kv::LockMode;
use strata_sql::catalog::TableInfo;
use strata_sql::column::{ColumnEngine, ReplicaState, ScanSource};
use strata_sql::context::MemTracker;
use strata_sql::expr::Row;
use strata_sql::plan::{OutputColumn, Plan, Query};
use strata_sql::result::QueryOutput;
use strata_sql::session::Engine;
use strata_txn::{Isolation, Transaction, TxnOptions};

/// Why a query is left to the row engine.
#[derive(Clone, Debug)]
pub struct Skip(pub String);

impl Skip {
    /// A reason.
    pub fn new(reason: impl Into<String>) -> Skip {
        Skip(reason.into())
    }
}

/// Translation recurses over the plan and its expressions; their depth is bounded by the
/// parser's guard, and this keeps the stack safe on the way.
pub(crate) fn ensure_stack() -> std::result::Result<(), Skip> {
    strata_sql::depth::ensure_stack().map_err(|e| Skip::new(e.to_string()))
}

/// The DataFusion engine and the node's columnar replicas.
#[derive(Default)]
pub struct OlapEngine {
    replicas: Arc<ReplicaStore>,
    /// The SQL engine (its catalog's statistics guide the plans).
    sql: std::sync::Weak<Engine>,
    /// Wakes the background task (a schema change to reconcile).
    wake: Arc<tokio::sync::Notify>,
}

/// How often the background task looks for schema changes and delta to compact.
const TICK: std::time::Duration = std::time::Duration::from_millis(500);

/// A replica's delta is folded into its stable part once it holds this many versions, or
/// after `COMPACT_AGE` with any.
const COMPACT_VERSIONS: usize = 64 * 1024;
const COMPACT_AGE: std::time::Duration = std::time::Duration::from_secs(10);

/// How often replicas whose build or load failed (out of memory budget, say) are tried
/// again, if no schema change did so first.
const RETRY: std::time::Duration = std::time::Duration::from_secs(60);

impl OlapEngine {
    /// An engine without replicas (tests of the translation).
    pub fn new() -> OlapEngine {
        OlapEngine::default()
    }

    /// The engine of a server: subscribes its replicas to `sql`'s store and starts the
    /// background task that builds, loads, compacts, writes and drops them as the schema
    /// says, until `sql` is dropped. Stable parts are written to `dir` (if given), and the
    /// replicas found there are loaded instead of rebuilt. Call it before GC starts: the
    /// replicas on disk hold GC back from the moment this returns. The stable parts may
    /// hold `memory_limit` bytes together (0: no limit); a replica that does not fit is not
    /// made available, and is tried again every `RETRY`.
    pub fn start(sql: &Arc<Engine>, dir: Option<std::path::PathBuf>, memory_limit: usize) -> Result<Arc<OlapEngine>> {
        let replicas = Arc::new(ReplicaStore::with_dir(dir, memory_limit));
        let olap = Arc::new(OlapEngine { replicas, sql: Arc::downgrade(sql), wake: Default::default() });
        sql.client.subscribe(olap.replicas.clone())?;
        // The replicas the catalog wants now, registered before GC can run.
        let seen = sql.catalog.version();
        let first = olap.replicas.reconcile(&sql.catalog.schema());
        for (r, info, origin) in first {
            tokio::spawn(prepare(sql.clone(), olap.replicas.clone(), r, info, origin));
        }
        let weak = Arc::downgrade(sql);
        let (replicas, wake) = (olap.replicas.clone(), olap.wake.clone());
        tokio::spawn(async move {
            let mut seen_version = seen;
            let mut last_compact = std::time::Instant::now();
            let mut last_reconcile = std::time::Instant::now();
            loop {
                let Some(sql) = weak.upgrade() else { return };
                let version = sql.catalog.version();
                if version != seen_version || last_reconcile.elapsed() >= RETRY {
                    seen_version = version;
                    last_reconcile = std::time::Instant::now();
                    for (r, info, origin) in replicas.reconcile(&sql.catalog.schema()) {
                        tokio::spawn(prepare(sql.clone(), replicas.clone(), r, info, origin));
                    }
                }
                let due = last_compact.elapsed() >= COMPACT_AGE;
                let busy = replicas.all().iter().any(|r| r.delta_versions() >= COMPACT_VERSIONS);
                if due || busy {
                    last_compact = std::time::Instant::now();
                    if let Err(e) = compact_all(&sql, &replicas).await {
                        tracing::warn!("columnar replica compaction failed (retried later): {e}");
                    }
                }
                drop(sql);
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep(TICK) => {}
                }
            }
        });
        Ok(olap)
    }

    /// The replicas.
    pub fn replicas(&self) -> &Arc<ReplicaStore> {
        &self.replicas
    }
}

/// Readies a new replica (registered with the feed already): from its file and the
/// changes since when it has one that reads back, else from a snapshot scan; then writes
/// its file.
async fn prepare(
    sql: Arc<Engine>,
    store: Arc<ReplicaStore>,
    replica: Arc<replica::TableReplica>,
    info: Arc<TableInfo>,
    origin: Origin,
) {
    let started = std::time::Instant::now();
    let mut done = None;
    if origin != Origin::Scan {
        match load(&sql, &store, &replica, &info).await {
            Ok(Some(changes)) => done = Some(format!("loaded from disk, {changes} changes caught up")),
            Ok(None) => {}
            Err(e) => tracing::warn!("columnar replica of {}.{} not loaded ({e}); rebuilding it", info.db, info.name),
        }
    }
    if done.is_none() {
        match build(&sql, &replica, &info, store.budget(info.id)).await {
            Ok(()) => done = Some("built".to_string()),
            Err(e) => {
                store.forget(&replica);
                tracing::warn!(
                    "columnar replica of {}.{} could not be built (tried again in {RETRY:?}): {e}",
                    info.db,
                    info.name
                );
                return;
            }
        }
        store.count(Origin::Scan);
    } else {
        store.count(origin);
    }
    let rows = replica.stable().map_or(0, |s| s.rows);
    tracing::info!(
        "columnar replica of {}.{} {}: {rows} rows in {:.1?}",
        info.db,
        info.name,
        done.unwrap_or_default(),
        started.elapsed()
    );
    write(&sql, &store, &replica, std::time::Duration::ZERO).await;
}

/// Writes a replica's file if its stable part changed since; a replica without a usable
/// file holds GC back nowhere.
async fn write(
    sql: &Engine,
    store: &Arc<ReplicaStore>,
    replica: &Arc<replica::TableReplica>,
    every: std::time::Duration,
) {
    // The stable part may hold changes whose commits are not durable yet (group commit
    // shows a change before its fsync): a file must not outlive a change a crash takes back.
    if store.persist_due(replica, every) {
        let (s, r) = (store.clone(), replica.clone());
        let written = match sql.client.sync_commits().await {
            Ok(()) => tokio::task::spawn_blocking(move || s.persist(&r, every))
                .await
                .unwrap_or_else(|e| Err(Error::internal(format!("columnar replica write task failed: {e}")))),
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            tracing::warn!("columnar replica of table {} not written (retried later): {e}", replica.table_id());
        }
    }
    if replica.is_built() && (store.dir().is_none() || !replica.on_disk()) {
        replica.release_gc();
    }
}

fn background_txn_options() -> TxnOptions {
    TxnOptions {
        mode: LockMode::Optimistic,
        isolation: Isolation::RepeatableRead,
        lock_wait_timeout_ms: 0,
        one_pc: true,
    }
}

/// Builds a new replica from a snapshot taken after it was registered with the feed,
/// holding GC back to that snapshot meanwhile, in at most `budget` bytes.
async fn build(sql: &Engine, replica: &replica::TableReplica, info: &TableInfo, budget: usize) -> Result<()> {
    replica.hold_gc(strata_common::Timestamp::ZERO);
    let txn = Transaction::begin(sql.client.clone(), sql.oracle.clone(), background_txn_options()).await?;
    replica.hold_gc(txn.read_ts());
    let r = replica.build(info, &txn, 0, budget).await;
    let _ = txn.rollback().await;
    r
}

/// Loads a replica from its file and catches up with the changes since; `Ok(None)` when
/// the file is missing or was built for another definition.
async fn load(
    sql: &Engine,
    store: &ReplicaStore,
    replica: &replica::TableReplica,
    info: &TableInfo,
) -> Result<Option<usize>> {
    let Some(dir) = store.dir().map(|d| d.to_path_buf()) else { return Ok(None) };
    let id = info.id;
    // The file's size is about what its arrays take in memory.
    let size = std::fs::metadata(persist::path(&dir, id)).map(|m| m.len() as usize).unwrap_or(0);
    let budget = store.budget(id);
    if size > budget {
        return Err(Error::internal(format!(
            "its file takes {size} bytes, more than the {budget} bytes left under --columnar-memory-limit"
        )));
    }
    let loaded = tokio::task::spawn_blocking(move || persist::load(&dir, id))
        .await
        .map_err(|e| Error::internal(format!("load task failed: {e}")))??;
    let Some((built_for, stable)) = loaded else { return Ok(None) };
    if !replica.fits(&built_for, info, &stable) {
        return Ok(None);
    }
    let txn = Transaction::begin(sql.client.clone(), sql.oracle.clone(), background_txn_options()).await?;
    let r = replica.catch_up(info, stable, &txn).await;
    let _ = txn.rollback().await;
    r.map(Some)
}

/// Folds every replica's delta behind the oldest running transaction into its stable part,
/// and writes the stable parts that changed (at most every `PERSIST_EVERY`).
async fn compact_all(sql: &Engine, replicas: &Arc<ReplicaStore>) -> Result<()> {
    let mut upto = sql.oracle.get_ts().await?;
    if let Some(active) = sql.min_active_ts() {
        upto = upto.min(active.prev());
    }
    for r in replicas.all() {
        let r2 = r.clone();
        let changed = tokio::task::spawn_blocking(move || r2.compact(upto))
            .await
            .map_err(|e| Error::internal(format!("compaction task failed: {e}")))??;
        if changed {
            replicas.count_compaction();
            tracing::debug!("columnar replica of table {} compacted up to {upto:?}", r.table_id());
        }
        write(sql, replicas, &r, replica::PERSIST_EVERY).await;
    }
    Ok(())
}

/// DataFusion's logical optimizer rules as Strata runs them: without
/// `eliminate_cross_join`, which flattens every tree of inner joins and rebuilds it from the
/// leftmost input — the translator has already ordered the joins by statistics and put the
/// smaller input of each on the build side (left); then ours ([`semi_join`],
/// [`group_filter`]).
fn optimizer_rules() -> Vec<Arc<dyn datafusion::optimizer::OptimizerRule + Send + Sync>> {
    let mut rules = datafusion::optimizer::Optimizer::new().rules;
    rules.retain(|r| r.name() != "eliminate_cross_join");
    rules.push(Arc::new(semi_join::PushSemiJoinDown));
    rules.push(Arc::new(group_filter::FilterGroupsByJoinKeys));
    rules
}

/// The widest build-side key range a join indexes by array (see [`OlapEngine::plan`]): up
/// to 4 MiB per join. DataFusion's default (1,024) leaves a join of a few hundred selected
/// keys spread over a table's key range (TPC-H Q17's parts) on hashing, about five times
/// slower per probed row.
const PERFECT_HASH_RANGE: usize = 1 << 20;

/// Partitions DataFusion plans for: one per core on this kind of box.
fn partitions() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(1, 8)
}

impl OlapEngine {
    /// Translates `query` and optimizes DataFusion's plan for it: the plan, the tables it
    /// scans (not yet loaded) and the session state that will run it.
    #[allow(clippy::type_complexity)]
    fn plan(
        &self,
        query: &Query,
        params: &[Value],
        runtime: Arc<RuntimeEnv>,
    ) -> std::result::Result<(LogicalPlan, Vec<(String, Arc<provider::ScanTable>)>, SessionState), Skip> {
        let replicas = self.replicas.clone();
        let available = move |id: i64| replicas.state(id).is_some_and(|s| s.available);
        let mut t = translate::Translator::new(query, params, &available);
        let sql = self.sql.upgrade();
        let estimate =
            |p: &Plan| sql.as_ref().and_then(|e| strata_sql::cost::estimated_rows(p, &query.subqueries, &e.catalog));
        t.estimate = Some(&estimate);
        let node = t.query()?;
        let tables = std::mem::take(&mut t.tables);
        let mut config = SessionConfig::new().with_target_partitions(partitions()).with_batch_size(8192);
        // A join on one integer key whose build side spans fewer than this many key values
        // probes an array indexed by key instead of a hash table (4 bytes per key value).
        config.options_mut().execution.perfect_hash_join_small_build_threshold = PERFECT_HASH_RANGE;
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(runtime)
            .with_default_features()
            .with_optimizer_rules(optimizer_rules())
            .build();
        let optimized = state.optimize(&node.plan).map_err(|e| Skip(format!("optimizing failed: {e}")))?;
        let optimized = probe_filter::apply(optimized).map_err(|e| Skip(format!("optimizing failed: {e}")))?;
        Ok((optimized, tables, state))
    }
}

/// What a running query gives next.
enum Next {
    /// The rows of the next batch.
    Rows(Vec<Row>),
    /// The end of the result.
    End,
    /// This engine cannot finish the query with MySQL's semantics (the reason).
    Cannot(String),
}

/// A query DataFusion runs: its physical plan (with its operators' metrics as they run)
/// and the stream of its result batches.
struct Running {
    physical: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    stream: datafusion::physical_plan::SendableRecordBatchStream,
    types: Vec<Option<strata_sql::types::ColumnType>>,
    pool: Arc<TrackerPool>,
}

impl Running {
    /// The next batch's rows, the end, or why this engine cannot go on.
    async fn next(&mut self) -> Result<Next> {
        let Some(batch) = self.stream.next().await else { return Ok(Next::End) };
        strata_sql::interrupt::checkpoint().await?;
        let batch = match batch {
            Ok(b) => b,
            Err(e) => return Ok(Next::Cannot(self.pool.failure(e)?)),
        };
        let mut rows = Vec::with_capacity(batch.num_rows());
        Ok(match convert::append_rows(&batch, &self.types, &mut rows) {
            Ok(()) => Next::Rows(rows),
            Err(Skip(why)) => Next::Cannot(why),
        })
    }
}

impl OlapEngine {
    /// Starts `query` on DataFusion; None when the row engine must run it.
    async fn begin(&self, query: &Query, source: &mut ScanSource<'_, '_>) -> Result<Option<Running>> {
        let params = source.params().to_vec();
        let pool = Arc::new(TrackerPool::new(strata_sql::context::current_tracker()));
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(pool.clone())
            .build_arc()
            .map_err(|e| Error::internal(e.to_string()))?;
        let (optimized, tables, state) = match self.plan(query, &params, runtime) {
            Ok(p) => p,
            Err(Skip(why)) => {
                tracing::debug!("column engine leaves the query to the row engine: {why}");
                return Ok(None);
            }
        };
        // Load what the optimized plan reads of each table.
        let reads = scanned_columns(&optimized);
        for (name, table) in &tables {
            let Some(cols) = reads.get(name) else { continue };
            let cols: Option<Vec<usize>> = cols.as_ref().map(|c| c.iter().copied().collect());
            if let Err(Skip(why)) = table.load(source, cols.as_deref(), &self.replicas).await? {
                tracing::debug!("column engine: {why}; row engine runs the query");
                return Ok(None);
            }
        }
        let physical = match state.query_planner().create_physical_plan(&optimized, &state).await {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!("column engine: physical planning failed, row engine runs the query: {e}");
                return Ok(None);
            }
        };
        let types = query.columns.iter().map(|c| c.ty.clone()).collect();
        let stream = match execute_stream(physical.clone(), state.task_ctx()) {
            Ok(s) => s,
            Err(e) => {
                let why = pool.failure(e)?;
                tracing::debug!("column engine: {why}; row engine runs the query");
                return Ok(None);
            }
        };
        Ok(Some(Running { physical, stream, types, pool }))
    }
}

#[async_trait]
impl ColumnEngine for OlapEngine {
    async fn run(&self, query: &Query, source: &mut ScanSource<'_, '_>, out: &mut QueryOutput<'_>) -> Result<bool> {
        let Some(mut running) = self.begin(query, source).await? else { return Ok(false) };
        while !out.full() {
            match running.next().await? {
                Next::Rows(rows) => out.push(rows).await?,
                Next::End => break,
                // Rows already on their way to the client cannot be taken back.
                Next::Cannot(why) if !out.take_back() => {
                    return Err(Error::internal(format!("the column engine failed during the query: {why}")))
                }
                Next::Cannot(why) => {
                    tracing::debug!("column engine: {why}; row engine runs the query");
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    async fn run_analyzed(&self, query: &Query, source: &mut ScanSource<'_, '_>) -> Result<Option<Vec<String>>> {
        let started = std::time::Instant::now();
        let Some(mut running) = self.begin(query, source).await? else { return Ok(None) };
        let mut count = 0;
        loop {
            match running.next().await? {
                Next::Rows(rows) => count += rows.len(),
                Next::End => break,
                Next::Cannot(why) => {
                    tracing::debug!("column engine: {why}; row engine runs the query");
                    return Ok(None);
                }
            }
        }
        let elapsed = started.elapsed();
        let mut lines = vec!["ColumnEngine (DataFusion), each operator's metrics:".to_string()];
        let shown =
            datafusion::physical_plan::display::DisplayableExecutionPlan::with_metrics(running.physical.as_ref())
                .indent(true)
                .to_string();
        lines.extend(shown.lines().map(|l| format!("  {l}")));
        lines.push(format!("Rows: {count}, execution time: {:.3} ms", elapsed.as_secs_f64() * 1e3));
        Ok(Some(lines))
    }

    async fn scan_replica(&self, scan: &Plan, source: &mut ScanSource<'_, '_>) -> Result<Option<Vec<Row>>> {
        let Plan::Scan { table, lock: false, limit: None, .. } = scan else { return Ok(None) };
        if !self.replicas.state(table.id).is_some_and(|s| s.available) {
            return Ok(None);
        }
        // The scan alone as a query whose result is the table's row: the translator reads
        // the replica and applies the access range and filter above it.
        let columns = table
            .columns
            .iter()
            .map(|c| OutputColumn {
                name: c.name.clone(),
                ty: Some(c.ty.clone()),
                not_null: !c.nullable,
                ..Default::default()
            })
            .collect();
        let query = Query::new(scan.clone(), columns, Arc::new(Vec::new()));
        let mut out = QueryOutput::new(Default::default(), None, None);
        if !self.run(&query, source, &mut out).await? {
            return Ok(None);
        }
        Ok(Some(out.into_rows()))
    }

    fn explain(&self, query: &Query, params: &[Value]) -> std::result::Result<Vec<String>, String> {
        let runtime = RuntimeEnvBuilder::new().build_arc().map_err(|e| e.to_string())?;
        let (optimized, tables, _) = self.plan(query, params, runtime).map_err(|Skip(why)| why)?;
        let mut lines = vec!["ColumnEngine (DataFusion)".to_string()];
        lines.extend(optimized.display_indent().to_string().lines().map(|l| format!("  {l}")));
        for (name, table) in &tables {
            lines.push(format!("{name}: {}", table.describe()));
        }
        Ok(lines)
    }

    fn replica(&self, table_id: i64) -> Option<ReplicaState> {
        self.replicas.state(table_id)
    }

    fn schema_changed(&self) {
        self.wake.notify_one();
    }

    fn gc_floor(&self) -> Option<strata_common::Timestamp> {
        self.replicas.gc_floor()
    }

    fn status(&self) -> Vec<(&'static str, u64)> {
        self.replicas.status()
    }
}

/// Table name → the columns its scans read (None: all), over the plan and its subqueries.
fn scanned_columns(plan: &LogicalPlan) -> HashMap<String, Option<BTreeSet<usize>>> {
    let mut out: HashMap<String, Option<BTreeSet<usize>>> = HashMap::new();
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            let name = scan.table_name.table().to_string();
            match (&scan.projection, out.get_mut(&name)) {
                (None, _) => {
                    out.insert(name, None);
                }
                (Some(p), Some(Some(set))) => set.extend(p.iter().copied()),
                (Some(_), Some(None)) => {}
                (Some(p), None) => {
                    out.insert(name, Some(p.iter().copied().collect()));
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    out
}

/// DataFusion's memory pool, charging the statement's memory tracker: a query's hash
/// tables and sort buffers count against `tidb_mem_quota_query` like the row engine's.
#[derive(Debug)]
struct TrackerPool {
    tracker: Option<Arc<MemTracker>>,
    reserved: AtomicUsize,
    /// The quota error that stopped the query, if one did.
    error: Mutex<Option<Error>>,
}

impl TrackerPool {
    fn new(tracker: Option<Arc<MemTracker>>) -> TrackerPool {
        TrackerPool { tracker, reserved: AtomicUsize::new(0), error: Mutex::new(None) }
    }

    /// What a failed execution means: the quota error if the pool refused memory (the
    /// statement fails), otherwise nothing — the row engine runs the query and reports
    /// MySQL's own error if it has one.
    /// A failure of DataFusion's: the statement's own error when the memory quota or an
    /// interrupt caused it, else why the column engine could not run the query.
    fn failure(&self, e: DataFusionError) -> Result<String> {
        if let Some(err) = self.error.lock().take() {
            return Err(err);
        }
        Ok(format!("execution failed: {e}"))
    }
}

impl Drop for TrackerPool {
    fn drop(&mut self) {
        if let Some(t) = &self.tracker {
            t.release(self.reserved.swap(0, Ordering::Relaxed));
        }
    }
}

impl std::fmt::Display for TrackerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "statement memory tracker ({} bytes reserved)", self.reserved())
    }
}

impl MemoryPool for TrackerPool {
    fn name(&self) -> &str {
        "strata-statement"
    }

    fn grow(&self, _reservation: &MemoryReservation, additional: usize) {
        self.reserved.fetch_add(additional, Ordering::Relaxed);
        if let Some(t) = &self.tracker {
            // Infallible growth still counts; the next fallible one fails.
            let _ = t.consume(additional);
        }
    }

    fn shrink(&self, _reservation: &MemoryReservation, shrink: usize) {
        self.reserved.fetch_sub(shrink, Ordering::Relaxed);
        if let Some(t) = &self.tracker {
            t.release(shrink);
        }
    }

    fn try_grow(&self, _reservation: &MemoryReservation, additional: usize) -> datafusion::error::Result<()> {
        if let Some(t) = &self.tracker {
            if let Err(e) = t.consume(additional) {
                t.release(additional);
                let msg = e.to_string();
                *self.error.lock() = Some(e);
                return Err(DataFusionError::ResourcesExhausted(msg));
            }
        }
        self.reserved.fetch_add(additional, Ordering::Relaxed);
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.reserved.load(Ordering::Relaxed)
    }
}
