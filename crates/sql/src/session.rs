//! `Engine` (shared by all connections) and `Session` (one connection's state): statement
//! dispatch, transaction boundaries, variables and prepared statements.
//!
//! A statement runs inside the session's transaction; with autocommit and no BEGIN, the
//! transaction lives for one statement. Each statement is atomic: a failed statement's
//! writes are discarded and the transaction goes on (a deadlock victim's whole transaction
//! is rolled back, as in InnoDB).

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

use futures_util::FutureExt;
use parking_lot::Mutex;
use sqlparser::ast::{self, VisitMut};
use sqlparser::dialect::MySqlDialect;

use crate::dialect::StrataDialect;
use sqlparser::parser::Parser;
use strata_common::time::DateTime;
use strata_common::{Code, Error, Result, Timestamp, Value};
use strata_kv::{Client, LockMode, Oracle};
use strata_txn::{Isolation, Transaction, TxnOptions};

use crate::binder::{Binder, SessionInfo};
use crate::catalog::Catalog;
use crate::context;
use crate::dml::DmlCtx;
use crate::exec::{execute, ExecCtx};
use crate::interrupt::{self, Interrupt};
use crate::plan_cache::CachedPlan;
use crate::process::{self, Process};
use crate::result::{ClientPort, Column, QueryOutput, QueryResult, ResultColumns, ResultSink};
use crate::variables;

/// State shared by every session of a SQL node.
pub struct Engine {
    /// The catalog.
    pub catalog: Catalog,
    /// The KV client.
    pub client: Arc<dyn Client>,
    /// The timestamp oracle.
    pub oracle: Arc<dyn Oracle>,
    next_conn: AtomicU32,
    /// Start timestamps of the running transactions, by connection id (below 2^32), and of
    /// the internal snapshots pinned with `pin_snapshot` (above).
    active: Mutex<BTreeMap<u64, Timestamp>>,
    /// The number of the next internal snapshot pin.
    next_pin: std::sync::atomic::AtomicU64,
    /// Every open session (its kill switch and what it is doing), by connection id.
    processes: Mutex<HashMap<u32, Arc<Process>>>,
    /// Global values of system variables (what new sessions copy; global-only variables
    /// are read from here).
    globals: Mutex<Arc<BTreeMap<String, Value>>>,
    /// Prepared statements open in all sessions (bounded by max_prepared_stmt_count).
    prepared_stmts: AtomicUsize,
    /// Rows read by all sessions (SHOW GLOBAL STATUS).
    reads: Arc<context::ReadCounters>,
    /// Accounts and their privileges.
    pub users: crate::users::Users,
    /// LOCK TABLES / FLUSH TABLES WITH READ LOCK.
    pub(crate) table_locks: Arc<crate::table_locks::TableLocks>,
    /// Wakes the background deletion of dropped data.
    cleanup: Arc<tokio::sync::Notify>,
    /// How long old versions are kept for readers, in milliseconds.
    gc_life_ms: std::sync::atomic::AtomicU64,
    /// The vectorized engine read-only queries may run on (see `column`).
    column_engine: std::sync::OnceLock<Arc<dyn crate::column::ColumnEngine>>,
    /// Prometheus metrics (`crate::metrics`).
    pub metrics: crate::metrics::Metrics,
    /// information_schema.statements_summary (`crate::stmt_summary`).
    pub stmt_summary: crate::stmt_summary::StmtSummary,
    /// The slow query log (`crate::slow_log`).
    pub slow_log: crate::slow_log::SlowLog,
    /// Tables kept in memory (`ALTER TABLE .. CACHE`, `crate::cached_table`).
    pub cached: Arc<crate::cached_table::CachedTables>,
}

/// How often GC of old versions runs.
const GC_RUN_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);
/// How often the background task looks for dropped data that has become destroyable.
const DESTROY_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);
/// How often auto-analyze looks for tables whose statistics are out of date.
const AUTO_ANALYZE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);
/// How often deletions are pruned from the store's current-version index (`prune_point`).
const PRUNE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);
/// Default of `--gc-life-time` (TiDB's tidb_gc_life_time default, 10 minutes).
pub const DEFAULT_GC_LIFE: std::time::Duration = std::time::Duration::from_secs(600);

impl Engine {
    /// Opens the SQL engine on a KV client.
    pub async fn open(client: Arc<dyn Client>, oracle: Arc<dyn Oracle>) -> Result<Arc<Engine>> {
        let catalog = Catalog::load(client.clone(), oracle.clone()).await?;
        let users = crate::users::Users::load(client.clone(), oracle.clone()).await?;
        // First start: root@% with every privilege and no password (the server's start-up
        // sets one, or refuses to listen beyond loopback without one).
        users.bootstrap_root("").await?;
        let cached = Arc::new(crate::cached_table::CachedTables::new(client.clone(), oracle.clone()));
        for db in catalog.databases() {
            for t in catalog.tables(&db).unwrap_or_default() {
                if t.cached {
                    cached.register(t.id, true);
                }
            }
        }
        Ok(Arc::new(Engine {
            catalog,
            client,
            oracle,
            next_conn: AtomicU32::new(1),
            active: Mutex::new(BTreeMap::new()),
            next_pin: std::sync::atomic::AtomicU64::new(1 << 32),
            processes: Mutex::new(HashMap::new()),
            globals: Mutex::new(Arc::new(variables::defaults())),
            prepared_stmts: AtomicUsize::new(0),
            reads: Default::default(),
            users,
            table_locks: Default::default(),
            cleanup: Default::default(),
            gc_life_ms: std::sync::atomic::AtomicU64::new(DEFAULT_GC_LIFE.as_millis() as u64),
            column_engine: std::sync::OnceLock::new(),
            metrics: Default::default(),
            stmt_summary: Default::default(),
            slow_log: Default::default(),
            cached,
        }))
    }

    /// Wires in the column engine (once; later calls are ignored).
    pub fn set_column_engine(&self, engine: Arc<dyn crate::column::ColumnEngine>) {
        let _ = self.column_engine.set(engine);
    }

    /// Rolls back DDL a crash interrupted and starts the background work, until the engine
    /// is dropped: garbage collection of old versions behind the safe point (every
    /// `GC_RUN_INTERVAL`) and the destruction of dropped data once no reader can see it
    /// (also what earlier runs left; checked every `DESTROY_CHECK_INTERVAL` and whenever a
    /// DDL statement orphans a range).
    pub async fn start_background(self: &Arc<Self>) -> Result<()> {
        let n = self.recover_ddl().await?;
        if n > 0 {
            tracing::info!("rolled back {n} index(es) whose ADD INDEX a crash interrupted");
        }
        let weak = Arc::downgrade(self);
        let wake = self.cleanup.clone();
        tokio::spawn(async move {
            let mut seen = HashMap::new();
            let mut next_gc = tokio::time::Instant::now() + GC_RUN_INTERVAL;
            loop {
                let Some(engine) = weak.upgrade() else { return };
                match engine.destroy_orphaned_ranges(&mut seen).await {
                    Ok(0) => {}
                    Ok(n) => tracing::debug!("destroyed the data of {n} dropped table(s) or index(es)"),
                    Err(e) => tracing::warn!("destroying dropped data failed (retried later): {e}"),
                }
                if tokio::time::Instant::now() >= next_gc {
                    next_gc = tokio::time::Instant::now() + GC_RUN_INTERVAL;
                    match engine.run_gc().await {
                        Ok(0) => {}
                        Ok(n) => tracing::info!("gc removed {n} old versions"),
                        Err(e) => tracing::warn!("gc failed: {e}"),
                    }
                }
                drop(engine);
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep(DESTROY_CHECK_INTERVAL) => {}
                }
            }
        });
        // Pruning of deletions, every second: a table deleted from one end (a queue) is
        // scanned over its deleted rows until they are pruned (mvcc's `prune`).
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(PRUNE_INTERVAL).await;
                let Some(engine) = weak.upgrade() else { return };
                let pruned = match engine.prune_point().await {
                    Ok(point) => engine.client.prune_deletes(point).await,
                    Err(e) => Err(e),
                };
                if let Err(e) = pruned {
                    tracing::warn!("pruning deletions failed (retried later): {e}");
                }
            }
        });
        // Auto-analyze, on its own task: analyzing a large table must not hold up GC.
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut pacing = crate::stats::AnalyzePacing::default();
            loop {
                tokio::time::sleep(AUTO_ANALYZE_INTERVAL).await;
                let Some(engine) = weak.upgrade() else { return };
                let globals = engine.globals();
                let on = globals.get("tidb_enable_auto_analyze").is_none_or(|v| {
                    let t = value_text(v);
                    t == "1" || t.eq_ignore_ascii_case("on")
                });
                let ratio = globals.get("tidb_auto_analyze_ratio").and_then(|v| v.as_f64()).unwrap_or(0.5);
                if on {
                    match engine.auto_analyze(ratio, &mut pacing).await {
                        Ok(done) => {
                            for (table, took) in done {
                                tracing::info!("auto-analyze gathered statistics of {table} in {took:.2?}");
                            }
                        }
                        Err(e) => tracing::warn!("auto-analyze failed (retried later): {e}"),
                    }
                }
            }
        });
        Ok(())
    }

    /// How long old versions are kept for readers (`--gc-life-time`, TiDB's
    /// tidb_gc_life_time).
    pub fn set_gc_life_time(&self, life: std::time::Duration) {
        self.gc_life_ms.store(life.as_millis() as u64, Ordering::Relaxed);
    }

    /// The GC safe point now: the older of (now - gc life time) and just below the oldest
    /// running transaction's start. No reader uses a timestamp below it.
    pub async fn gc_safe_point(&self) -> Result<Timestamp> {
        let now = self.oracle.get_ts().await?;
        let life = self.gc_life_ms.load(Ordering::Relaxed);
        let mut safe = Timestamp::compose(now.physical_ms().saturating_sub(life), 0);
        if let Some(active) = self.min_active_ts() {
            safe = safe.min(active.prev());
        }
        if let Some(floor) = self.column_engine.get().and_then(|c| c.gc_floor()) {
            safe = safe.min(floor);
        }
        Ok(safe)
    }

    /// The timestamp no running transaction of this engine reads below: the oldest one's
    /// start, or now. Deletions committed below it are pruned (`Client::prune_deletes`);
    /// a reader the engine does not track (an internal transaction) stays correct there.
    pub async fn prune_point(&self) -> Result<Timestamp> {
        // Now first: a transaction not in the active set yet fetches its start after this.
        let now = self.oracle.get_ts().await?;
        Ok(self.min_active_ts().map_or(now, |active| active.min(now)))
    }

    /// One GC pass behind the current safe point; returns the versions removed.
    pub async fn run_gc(&self) -> Result<u64> {
        let safe = self.gc_safe_point().await?;
        if safe == Timestamp::ZERO {
            return Ok(0);
        }
        self.client.gc(safe).await
    }

    /// Has the background deletion look for new work.
    pub fn wake_cleanup(&self) {
        self.cleanup.notify_one();
    }

    /// Sets the global value of a system variable (what new sessions start with, and what
    /// every session reads for a global-only one): the command line's settings, SET GLOBAL.
    pub fn set_global_default(&self, name: &str, value: Value) {
        let name = name.to_ascii_lowercase();
        self.stmt_summary.set(&name, &value);
        Arc::make_mut(&mut *self.globals.lock()).insert(name, value);
    }

    /// The global values of the system variables now.
    pub fn globals(&self) -> Arc<BTreeMap<String, Value>> {
        self.globals.lock().clone()
    }

    /// A new session for `user`.
    pub fn session(self: &Arc<Self>, user: &str) -> Session {
        let conn_id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let process = Arc::new(Process::new(user));
        self.processes.lock().insert(conn_id, process.clone());
        Session {
            engine: self.clone(),
            conn_id,
            process,
            user: user.to_string(),
            db: None,
            vars: self.globals(),
            settings: std::sync::OnceLock::new(),
            user_vars: Arc::new(HashMap::new()),
            txn: None,
            schema_version: 0,
            schema: None,
            explicit: false,
            last_insert_id: 0,
            warnings: Vec::new(),
            prepared: HashMap::new(),
            next_stmt: 1,
            reads: Default::default(),
            named: HashMap::new(),
            account_host: "%".into(),
            client_host: "localhost".into(),
            tls: None,
            savepoints: Vec::new(),
            trace: None,
            last_trace: Arc::default(),
            plan_cache: Arc::default(),
            plan_slot: None,
            who: std::sync::OnceLock::new(),
            text_digests: HashMap::new(),
            text_shapes: HashMap::default(),
            text_refused: Default::default(),
            text_mode: Vec::new(),
            text_refused_version: 0,
            text_digest_of_shape: None,
            prepared_texts: HashMap::default(),
            value_rows: None,
            literal_text: None,
            compile_nanos: Arc::default(),
            timing: StatementTiming::default(),
            slow_queries: 0,
        }
    }

    /// Commits `txn` unless a table it wrote changed its schema after `schema_version`, the
    /// catalog version when it began: its statements may have been planned against the old
    /// definition (an index it did not maintain, a column it did not know), so it fails with
    /// 8028 instead, as TiDB's schema validator does. The check and the commit run under the
    /// shared commit gate, so a schema change can wait out commits that passed the check.
    pub async fn commit_txn(&self, txn: Transaction, schema_version: u64) -> Result<()> {
        if !txn.is_dirty() {
            // Nothing written or locked: nothing to check, commit or count (the commit of
            // such a transaction is a no-op).
            return Ok(());
        }
        let gate = match self.catalog.commit_gate.try_read() {
            Ok(g) => g,
            Err(_) => self.catalog.commit_gate.read().await,
        };
        if self.catalog.version() != schema_version {
            let mut tables: Vec<i64> =
                txn.written_keys().filter_map(strata_codec::keys::table_of).map(|t| t.0).collect();
            tables.dedup();
            if tables.iter().any(|t| self.catalog.changed_since(*t, schema_version)) {
                drop(gate);
                let _ = txn.rollback().await;
                return Err(Error::user(
                    Code::InfoSchemaChanged,
                    "Information schema is changed during the execution of the statement (for example, table \
                     definition may be updated by other DDL ran in parallel)",
                ));
            }
        }
        let mut written: Vec<(i64, u64)> = Vec::new();
        for t in txn.written_keys().filter_map(strata_codec::keys::row_table_of) {
            match written.last_mut() {
                Some((last, n)) if *last == t.0 => *n += 1,
                _ => written.push((t.0, 1)),
            }
        }
        // Copies of cached tables this transaction wrote are dropped before it takes its
        // commit timestamp, and none loads until it has committed (`cached_table`).
        let _writing = if self.cached.any() {
            let mut tables: Vec<i64> =
                txn.written_keys().filter_map(strata_codec::keys::table_of).map(|t| t.0).collect();
            tables.dedup();
            Some(self.cached.writing(tables))
        } else {
            None
        };
        match txn.commit().await {
            Err(Error::AlreadyExists { key }) => return Err(self.duplicate_error(&key).await),
            r => r?,
        };
        for (table, rows) in written {
            self.catalog.modifications.add(table, rows);
        }
        Ok(())
    }

    /// The duplicate-key error (1062) for a key an INSERT presumed absent
    /// (`Transaction::presume_absent`) and its commit found with a value: it names the key
    /// and the values of the row that holds it, read now (MySQL names the new row's values;
    /// they are equal under the key's collation).
    async fn duplicate_error(&self, key: &[u8]) -> Error {
        use strata_codec::keys::Key;
        let found = async {
            let (table_id, index) = match Key::decode(key)? {
                Key::Row { table, .. } => (table, None),
                Key::Index { table, index, .. } => (table, Some(index)),
                Key::Meta(_) => return Ok(None),
            };
            let schema = self.catalog.schema();
            let Some(table) = schema.all_tables().into_iter().find(|t| t.table_id() == table_id) else {
                return Ok(None);
            };
            let opts = TxnOptions {
                mode: LockMode::Optimistic,
                isolation: Isolation::RepeatableRead,
                lock_wait_timeout_ms: 0,
                one_pc: true,
            };
            let txn = Transaction::begin(self.client.clone(), self.oracle.clone(), opts).await?;
            let (name, cols, row_key) = match index {
                None => ("PRIMARY".to_string(), table.pk.clone().unwrap_or_default(), key.to_vec()),
                Some(id) => {
                    let Some(ix) = table.indexes.iter().find(|i| crate::catalog::TableInfo::index_id(i) == id) else {
                        return Ok(None);
                    };
                    let Some(handle) = txn.get(key).await? else { return Ok(None) };
                    (ix.name.clone(), ix.columns.clone(), crate::table::row_key(&table, &handle))
                }
            };
            let Some(value) = txn.get(&row_key).await? else { return Ok(None) };
            let (row, _) = crate::table::decode_row(&table, &value)?;
            let vals: Vec<String> = cols.iter().map(|c| row[*c].to_display()).collect();
            Ok::<_, Error>(Some(format!("Duplicate entry '{}' for key '{}.{}'", vals.join("-"), table.name, name)))
        };
        match found.await {
            Ok(Some(message)) => Error::user(Code::DupEntry, message),
            _ => Error::user(
                Code::DupEntry,
                format!("Duplicate entry for key {}", strata_codec::keys::Key::describe(key)),
            ),
        }
    }

    /// The oldest start timestamp of any running transaction (GC must keep what it reads).
    pub fn min_active_ts(&self) -> Option<Timestamp> {
        self.active.lock().values().min().copied()
    }

    /// An internal transaction whose snapshot holds the GC safe point and the prune floor
    /// back, as a session's does, until the pin is dropped: for one that reads for longer
    /// than a prune interval and then writes what it read under checks that a raised floor
    /// would make look further (`mvcc::prune`).
    pub async fn pin_snapshot(&self) -> Result<(Transaction, SnapshotPin<'_>)> {
        let id = self.next_pin.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Held back from before the start timestamp is fetched, as `Session::begin` does.
        self.active.lock().insert(id, Timestamp::ZERO);
        let pin = SnapshotPin { engine: self, id };
        let txn = self.begin_internal().await?;
        self.active.lock().insert(id, txn.start_ts());
        Ok((txn, pin))
    }
}

/// Holds an internal snapshot in the active set (`Engine::pin_snapshot`).
pub struct SnapshotPin<'a> {
    engine: &'a Engine,
    id: u64,
}

impl Drop for SnapshotPin<'_> {
    fn drop(&mut self) {
        self.engine.active.lock().remove(&self.id);
    }
}

/// PROCESSLIST and USER_PRIVILEGES of information_schema, as one session's account may
/// see them: every connection and account with PROCESS / with SELECT on `mysql`, else its
/// own.
/// The longest text statement whose digest a session keeps, and how many it keeps (all
/// are dropped when that many are kept: a client sending ever new texts gains nothing).
const TEXT_DIGEST_MAX_BYTES: usize = 256;
const TEXT_DIGESTS_MAX: usize = 64;

/// The most shapes (parsed, or refused) a session keeps for the non-prepared plan cache
/// (`crate::text_plan`); each is at most `text_plan::MAX_TEXT_BYTES` of text.
const TEXT_SHAPES_MAX: usize = 256;

/// `SessionInfo`'s user fields and live tables of one login (`Session::who`).
struct Who {
    user: Arc<str>,
    client_user: Arc<str>,
    live: Arc<Live>,
}

struct Live {
    engine: Arc<Engine>,
    user: String,
    account_host: String,
    last_trace: Arc<Mutex<Option<crate::optimizer_trace::TraceRow>>>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Live({}@{})", self.user, self.account_host)
    }
}

/// The connections `user` may see: all of them with PROCESS (`everyone`), else its own.
fn visible_processes(engine: &Engine, user: &str, everyone: bool) -> Vec<(u32, Arc<Process>)> {
    engine
        .processes
        .lock()
        .iter()
        .filter(|(_, p)| everyone || p.user() == user)
        .map(|(id, p)| (*id, p.clone()))
        .collect()
}

impl crate::binder::LiveTables for Live {
    fn sees(&self, db: &str, table: Option<&str>) -> bool {
        self.engine
            .users
            .with(&self.user, &self.account_host, |a| match table {
                Some(t) => a.allows_any(db, t),
                None => a.sees_db(db),
            })
            .unwrap_or(false)
    }

    fn rows(&self, table: &str) -> Option<Vec<Vec<Value>>> {
        use crate::users::privs;
        let global = self.engine.users.with(&self.user, &self.account_host, |a| a.global).unwrap_or(0);
        match table {
            "processlist" => {
                let procs = visible_processes(&self.engine, &self.user, global & privs::PROCESS != 0);
                match process::show(&procs, true) {
                    QueryResult::Rows { rows, .. } => Some(rows),
                    _ => Some(Vec::new()),
                }
            }
            "user_privileges" => {
                let everyone = self
                    .engine
                    .users
                    .with(&self.user, &self.account_host, |a| a.allows(privs::SELECT, "mysql", None))
                    .unwrap_or(false);
                let mut rows = Vec::new();
                for a in self.engine.users.all() {
                    let own = a.user == self.user && a.host == self.account_host;
                    if !(everyone || own) {
                        continue;
                    }
                    let grantee = Value::str(format!("'{}'@'{}'", a.user, a.host));
                    let grantable = Value::str(if a.global & privs::GRANT_OPTION != 0 { "YES" } else { "NO" });
                    let names: Vec<&str> =
                        privs::NAMES.iter().filter(|(b, _)| a.global & b != 0).map(|(_, n)| *n).collect();
                    for n in if names.is_empty() { vec!["USAGE"] } else { names } {
                        rows.push(vec![grantee.clone(), Value::str("def"), Value::str(n), grantable.clone()]);
                    }
                }
                Some(rows)
            }
            "statements_summary" | "statements_summary_history" => {
                use crate::stmt_summary::Visibility;
                let who = if global & privs::PROCESS != 0 { Visibility::All } else { Visibility::User(&self.user) };
                Some(self.engine.stmt_summary.rows(table == "statements_summary_history", who))
            }
            "optimizer_trace" => Some(
                self.last_trace
                    .lock()
                    .iter()
                    .map(|t| {
                        vec![
                            Value::str(t.query.clone()),
                            Value::str(t.trace.clone()),
                            Value::Int(t.missing_bytes as i64),
                            Value::Int(0),
                        ]
                    })
                    .collect(),
            ),
            "tiflash_replica" => {
                let cat = &self.engine.catalog;
                let column = self.engine.column_engine.get();
                let mut rows = Vec::new();
                for db in cat.databases() {
                    for t in cat.tables(&db).unwrap_or_default() {
                        let Some(setting) = &t.columnar_replica else { continue };
                        if !self.sees(&t.db, Some(&t.name)) {
                            continue;
                        }
                        let state = column.and_then(|c| c.replica(t.id));
                        rows.push(vec![
                            Value::str(t.db.clone()),
                            Value::str(t.name.clone()),
                            Value::Int(t.id),
                            Value::UInt(setting.count),
                            Value::str(setting.labels.join(",")),
                            Value::Int(i64::from(state.is_some_and(|s| s.available))),
                            Value::Double(state.map_or(0.0, |s| s.progress)),
                        ]);
                    }
                }
                Some(rows)
            }
            _ => None,
        }
    }
}

/// A prepared statement.
pub struct Prepared {
    /// The statement's text, as the client sent it.
    pub sql: Arc<str>,
    /// The statement with numbered placeholders (shared with each execution, not copied).
    pub stmt: Arc<ast::Statement>,
    /// Number of parameters.
    pub params: usize,
    /// Result columns, when known at prepare time.
    pub columns: Vec<Column>,
    /// The statement summary's digest of `sql`, computed at the first execution.
    pub digest: Option<Arc<crate::stmt_summary::Digest>>,
}

/// A text prepared before (`Session::prepare`): what it parsed and bound to, and under what.
struct PreparedText {
    stmt: Arc<ast::Statement>,
    params: usize,
    columns: Vec<Column>,
    db: Option<String>,
    schema_version: u64,
    /// `Session::binding_vars` then.
    vars: Arc<str>,
}

/// What statements read of a session's system variables, worked out once after each change
/// of them (`Session::settings`) rather than looked up by name, and parsed, by every
/// statement: those lookups and parses were ~12% of a prepared point select's instructions.
#[derive(Clone, Debug)]
struct Settings {
    limits: context::Limits,
    /// `tidb_mem_quota_query` (0: none).
    mem_quota: usize,
    /// `tidb_txn_mode`.
    lock_mode: LockMode,
    /// `transaction_isolation`.
    isolation: Isolation,
    /// `innodb_lock_wait_timeout`.
    lock_wait_timeout_ms: u64,
    /// `optimizer_trace`.
    trace: crate::optimizer_trace::Flags,
    /// `tidb_prepared_plan_cache_size` when `tidb_enable_prepared_plan_cache` is on.
    plan_cache: Option<usize>,
    /// `tidb_enable_non_prepared_plan_cache`, and the plan cache on.
    text_plan_cache: bool,
    /// `long_query_time`, seconds.
    long_query_time: f64,
    /// `tidb_rc_read_check_ts`.
    rc_read_check_ts: bool,
    /// `tidb_enable_1pc`.
    one_pc: bool,
    /// `max_execution_time`, ms (0: none).
    max_execution_time_ms: i64,
    /// `tidb_isolation_read_engines` (None: a value that does not parse, the row engine only).
    read_engines: Option<crate::column::ReadEngines>,
    /// `tidb_default_string_match_selectivity`.
    like_share: f64,
    /// `sql_select_limit` (None: no cap).
    select_limit: Option<usize>,
    /// `autocommit`.
    autocommit: bool,
    /// `wait_timeout` and `net_write_timeout`, seconds.
    wait_timeout_s: u64,
    write_timeout_s: u64,
    /// The variables binding reads, as the text plan-cache keys carry: result types depend
    /// on div_precision_increment, a recursive CTE's bound on cte_max_recursion_depth
    /// (sql_mode is kept for what binding may come to check under it).
    binding: Arc<str>,
    /// The parser's dialect under `sql_mode`.
    dialect: StrataDialect,
}

impl Settings {
    fn of(vars: &BTreeMap<String, Value>) -> Settings {
        let int = |name: &str| vars.get(name).and_then(|v| v.as_i64());
        let size = |name: &str, default: usize| int(name).and_then(|n| usize::try_from(n).ok()).unwrap_or(default);
        let d = context::Limits::default();
        let limits = context::Limits {
            max_allowed_packet: size("max_allowed_packet", d.max_allowed_packet),
            group_concat_max_len: size("group_concat_max_len", d.group_concat_max_len),
            // SET keeps it within 0..=30.
            div_precision_increment: size("div_precision_increment", 4).min(30) as u8,
        };
        let mem_quota =
            int("tidb_mem_quota_query").map_or(context::DEFAULT_MEM_QUOTA, |n| usize::try_from(n).unwrap_or(0));
        let lock_mode = match vars.get("tidb_txn_mode").map(value_text) {
            Some(m) if m.eq_ignore_ascii_case("optimistic") => LockMode::Optimistic,
            _ => LockMode::Pessimistic,
        };
        let isolation = match vars.get("transaction_isolation").map(value_text).as_deref() {
            Some("READ-COMMITTED") => Isolation::ReadCommitted,
            _ => Isolation::RepeatableRead,
        };
        let lock_wait_timeout_ms = int("innodb_lock_wait_timeout").unwrap_or(50).max(0) as u64 * 1000;
        let trace = match vars.get("optimizer_trace") {
            Some(Value::Bytes(b)) => crate::optimizer_trace::Flags::parse(std::str::from_utf8(b).unwrap_or_default()),
            Some(v) => crate::optimizer_trace::Flags::parse(&value_text(v)),
            None => crate::optimizer_trace::Flags::default(),
        };
        let plan_cache = (int("tidb_enable_prepared_plan_cache").unwrap_or(0) != 0)
            .then(|| usize::try_from(int("tidb_prepared_plan_cache_size").unwrap_or(0)).unwrap_or(0));
        let read_engines = vars
            .get("tidb_isolation_read_engines")
            .and_then(|v| crate::column::ReadEngines::parse(&value_text(v)).ok());
        let like_share = vars
            .get("tidb_default_string_match_selectivity")
            .and_then(|v| v.as_f64())
            .unwrap_or(crate::stats::DEFAULT_LIKE_SELECTIVITY);
        let seconds = |name: &str, default: i64| int(name).unwrap_or(default).clamp(1, 31_536_000) as u64;
        let mode = match vars.get("sql_mode") {
            Some(Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
            Some(v) => value_text(v),
            None => String::new(),
        };
        let dialect = StrataDialect::for_sql_mode(&mode);
        let binding = format!(
            "dpi={};cte={};mode={mode}",
            int("div_precision_increment").unwrap_or(0),
            int("cte_max_recursion_depth").unwrap_or(0)
        )
        .into();
        let long_query_time = match vars.get("long_query_time") {
            Some(Value::Double(d)) => *d,
            Some(v) => v.as_i64().unwrap_or(10) as f64,
            None => 10.0,
        };
        let select_limit = match vars.get("sql_select_limit") {
            Some(Value::UInt(n)) => usize::try_from(*n).ok(),
            Some(Value::Int(n)) => Some(usize::try_from(*n).unwrap_or(0)),
            _ => None,
        };
        Settings {
            dialect,
            select_limit,
            text_plan_cache: plan_cache.is_some() && int("tidb_enable_non_prepared_plan_cache").unwrap_or(0) != 0,
            long_query_time,
            rc_read_check_ts: int("tidb_rc_read_check_ts") == Some(1),
            one_pc: int("tidb_enable_1pc") != Some(0),
            max_execution_time_ms: int("max_execution_time").unwrap_or(0),
            autocommit: vars.get("autocommit").and_then(|v| v.as_bool()).unwrap_or(true),
            wait_timeout_s: seconds("wait_timeout", 28_800),
            write_timeout_s: seconds("net_write_timeout", 60),
            binding,
            limits,
            mem_quota,
            lock_mode,
            isolation,
            lock_wait_timeout_ms,
            trace,
            plan_cache,
            read_engines,
            like_share,
        }
    }
}

/// One client connection's state.
pub struct Session {
    engine: Arc<Engine>,
    /// CONNECTION_ID().
    pub conn_id: u32,
    /// What this connection is doing, and its kill switch.
    process: Arc<Process>,
    user: String,
    db: Option<String>,
    /// System variables as this session sees them (shared with each statement's
    /// `SessionInfo`; copied on the first write while a statement holds them).
    vars: Arc<BTreeMap<String, Value>>,
    /// What statements read of `vars`, worked out at the first statement after they changed
    /// (`settings`; every change goes through `vars_mut`, which clears it).
    /// A `OnceLock` rather than a lock: a statement reads it a dozen times, and each read
    /// is one atomic load and no reference count (a `Mutex<Option<Arc<_>>>` was 1.5-1.9%
    /// of the server's samples in the banking benchmark).
    settings: std::sync::OnceLock<Settings>,
    user_vars: Arc<HashMap<String, Value>>,
    /// Boxed: a `Transaction` is hundreds of bytes, and a statement's futures move it (and
    /// any future holding it) several times between its start and its end.
    txn: Option<Box<Transaction>>,
    /// The schema version when `txn` began (see `Engine::commit_txn`).
    schema_version: u64,
    /// The schema the open transaction binds against (None outside a transaction).
    schema: Option<Arc<crate::catalog::Schema>>,
    explicit: bool,
    last_insert_id: u64,
    warnings: Vec<(&'static str, Code, String)>,
    prepared: HashMap<u32, Prepared>,
    next_stmt: u32,
    /// Rows this session's statements read (SHOW SESSION STATUS; FLUSH STATUS resets them).
    reads: Arc<context::ReadCounters>,
    /// SQL-level prepared statements (PREPARE name FROM ...): name (lower case) to id.
    named: HashMap<String, u32>,
    /// The account's host pattern (CURRENT_USER() is `user@account_host`).
    account_host: String,
    /// The client's address without port (USER() is `user@client_host`).
    client_host: String,
    /// The connection's TLS protocol version and cipher, when encrypted.
    tls: Option<(String, String)>,
    /// SAVEPOINTs of the open transaction, oldest first.
    savepoints: Vec<(String, strata_txn::Savepoint)>,
    /// The running statement's optimizer trace, when `optimizer_trace` enables it.
    trace: Option<Arc<crate::optimizer_trace::OptimizerTrace>>,
    /// The last traced statement's trace (information_schema.OPTIMIZER_TRACE).
    last_trace: Arc<Mutex<Option<crate::optimizer_trace::TraceRow>>>,
    /// Plans of executed prepared queries (`crate::plan_cache`).
    plan_cache: Arc<Mutex<crate::plan_cache::PlanCache>>,
    /// The running statement's place in the plan cache (an execution of a prepared query).
    plan_slot: Option<crate::binder::PlanCacheSlot>,
    /// Digests of short text statements seen (`Session::text_digest`).
    text_digests: HashMap<Box<str>, Arc<crate::stmt_summary::Digest>>,
    /// The non-prepared plan cache's parsed shapes (`crate::text_plan`), by shape text.
    text_shapes: HashMap<Arc<str>, Arc<ast::Statement>, foldhash::fast::RandomState>,
    /// Shapes refused by the non-prepared plan cache: they run the ordinary way.
    text_refused: std::collections::HashSet<Arc<str>, foldhash::fast::RandomState>,
    /// The schema version `text_refused` was refused under.
    text_refused_version: u64,
    /// The sql_mode the shapes were parsed under (it changes how a text tokenizes).
    text_mode: Vec<u8>,
    /// Texts prepared before, by text (`Session::prepare`; at most `TEXT_SHAPES_MAX`, each
    /// at most `text_plan::MAX_TEXT_BYTES`).
    prepared_texts: HashMap<Arc<str>, PreparedText, foldhash::fast::RandomState>,
    /// The digest of the text statement that ran through the non-prepared plan cache.
    text_digest_of_shape: Option<Arc<crate::stmt_summary::Digest>>,
    /// Who the session runs as, in the forms every statement's `SessionInfo` carries:
    /// made once per login and client address instead of per statement.
    who: std::sync::OnceLock<Who>,
    /// While a literal-rows INSERT runs: the width of its rows (`crate::bulk_insert`).
    value_rows: Option<usize>,
    /// After a literal-rows INSERT ran: its text with one row of placeholders, which the
    /// statement summary parses for table names instead of the whole text.
    literal_text: Option<String>,
    /// Nanoseconds the running statement spent planning (the compile phase).
    compile_nanos: Arc<std::sync::atomic::AtomicU64>,
    /// What the statement summary and the slow log learn of the running statement.
    timing: StatementTiming,
    /// This session's statements slower than long_query_time (SHOW SESSION STATUS).
    slow_queries: u64,
}

/// What a statement's summary row and slow log entry need beyond its result, gathered as
/// it runs (see [`Session::summarize`]).
#[derive(Debug, Default)]
struct StatementTiming {
    /// When the client's command arrived.
    started: Option<std::time::Instant>,
    /// Parsing.
    parse: std::time::Duration,
    /// Time in pessimistic lock requests.
    lock: std::time::Duration,
    /// Rows the session had read before the statement.
    reads_before: u64,
    /// Whether the statement has been summarized (an enclosing text does not summarize
    /// again: a text of several statements summarizes each, EXECUTE its prepared one).
    done: bool,
}

/// A use of a database or table by a statement: (privilege it needs, the privilege's name,
/// database, table).
type Touch = (u32, &'static str, String, Option<String>);

/// Parses `sql`, refusing statements nested too deeply to walk safely (see `depth`).
pub(crate) fn parse(sql: &str, dialect: &StrataDialect) -> Result<Vec<ast::Statement>> {
    let mut stmts = parse_unchecked(sql, dialect)?;
    crate::depth::check_statements(&mut stmts)?;
    Ok(stmts)
}

/// The definition of base table `db.table`, to change (1347 for a view).
fn base_table(catalog: &Catalog, db: &str, table: &str) -> Result<crate::catalog::TableInfo> {
    if catalog.try_view(db, table).is_some() {
        return Err(Error::user(Code::WrongObject, format!("'{db}.{table}' is not BASE TABLE")));
    }
    Ok((*catalog.table(db, table)?).clone())
}

/// The tables `sql` names, as `db.table` (the current database `db` where it names none),
/// for the statement summary's TABLE_NAMES; empty when the text does not parse.
fn table_names(sql: &str, dialect: &StrataDialect, db: Option<&str>) -> String {
    let Ok(stmts) = parse(sql, dialect) else { return String::new() };
    let mut names: Vec<String> = Vec::new();
    let _ = ast::visit_relations(&stmts, |n: &ast::ObjectName| {
        let parts: Vec<String> =
            n.0.iter().filter_map(|p| p.as_ident()).map(|i| i.value.to_ascii_lowercase()).collect();
        let name = match (parts.as_slice(), db) {
            ([t], Some(db)) => format!("{}.{t}", db.to_ascii_lowercase()),
            _ => parts.join("."),
        };
        if !names.contains(&name) {
            names.push(name);
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    names.sort();
    names.join(",")
}

fn parse_unchecked(sql: &str, dialect: &StrataDialect) -> Result<Vec<ast::Statement>> {
    let parsed = Parser::parse_sql(dialect, sql);
    if parsed.is_err() {
        // sqlparser does not take MySQL's `UPDATE t1, t2 SET ...`; the comma there is an
        // inner join, so retry with CROSS JOIN before reporting the original error.
        if let Some(Ok(stmts)) = update_commas_as_joins(sql).map(|s| Parser::parse_sql(dialect, &s)) {
            return Ok(stmts);
        }
    }
    parsed.map_err(|e| {
        // Some parser paths report the recursion limit as a plain message.
        if e == sqlparser::parser::ParserError::RecursionLimitExceeded
            || e.to_string().contains("recursion limit exceeded")
        {
            return crate::depth::stack_overrun("the statement", crate::depth::MAX_PARSE_NESTING);
        }
        let msg = e.to_string();
        let msg = msg.trim_start_matches("sql parser error: ");
        Error::parse(format!("You have an error in your SQL syntax; check the manual that corresponds to your Strata version for the right syntax to use: {msg}"))
    })
}

/// Rewrites top-level commas between UPDATE and SET into CROSS JOIN (None if there are none).
/// Only those commas change: the rest of the text is copied as written (re-printing tokens
/// would lose string escapes, turning `'x\', a=1 -- '` into code).
fn update_commas_as_joins(sql: &str) -> Option<String> {
    use sqlparser::keywords::Keyword;
    use sqlparser::tokenizer::{Token, Tokenizer};
    let tokens = Tokenizer::new(&MySqlDialect {}, sql).tokenize_with_location().ok()?;
    let (mut in_tables, mut depth) = (false, 0usize);
    let mut commas = Vec::new();
    for t in &tokens {
        match &t.token {
            Token::Word(w) if depth == 0 && w.keyword == Keyword::UPDATE && w.quote_style.is_none() => in_tables = true,
            Token::Word(w) if depth == 0 && w.keyword == Keyword::SET && w.quote_style.is_none() => in_tables = false,
            Token::SemiColon => in_tables = false,
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            Token::Comma if in_tables && depth == 0 => commas.push((t.span.start.line, t.span.start.column)),
            _ => {}
        }
    }
    if commas.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(sql.len() + 12 * commas.len());
    let (mut line, mut column) = (1u64, 1u64);
    for ch in sql.chars() {
        if ch == ',' && commas.contains(&(line, column)) {
            out.push_str(" CROSS JOIN ");
        } else {
            out.push(ch);
        }
        if ch == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    Some(out)
}

/// Numbers `?` placeholders in textual order; returns how many there are.
pub(crate) fn number_placeholders(stmt: &mut ast::Statement) -> usize {
    struct V(usize);
    impl ast::VisitorMut for V {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &mut ast::Expr) -> std::ops::ControlFlow<()> {
            if let ast::Expr::Value(v) = e {
                if let ast::Value::Placeholder(p) = &mut v.value {
                    if p == "?" {
                        *p = format!("?{}", self.0);
                        self.0 += 1;
                    }
                }
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut v = V(0);
    let _ = stmt.visit(&mut v);
    v.0
}

fn value_text(v: &Value) -> String {
    v.to_display()
}

fn isolation_name(level: &str) -> Option<&'static str> {
    match level.to_ascii_uppercase().replace(['-', '_'], " ").as_str() {
        "READ COMMITTED" | "READ UNCOMMITTED" => Some("READ-COMMITTED"),
        "REPEATABLE READ" | "SERIALIZABLE" => Some("REPEATABLE-READ"),
        _ => None,
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.engine.processes.lock().remove(&self.conn_id);
        self.engine.table_locks.unlock_tables(self.conn_id);
        // Normally already gone (the connection rolls back on close); this keeps GC from
        // waiting forever on a session that ended any other way.
        self.engine.active.lock().remove(&u64::from(self.conn_id));
        self.engine.prepared_stmts.fetch_sub(self.prepared.len(), Ordering::Relaxed);
    }
}

/// One prepared statement's place in the server-wide count, given back if preparing fails.
struct PreparedCount<'a>(&'a AtomicUsize);

impl Drop for PreparedCount<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Session {
    /// The current database.
    pub fn database(&self) -> Option<&str> {
        self.db.as_deref()
    }

    /// This connection's kill switch (the server watches it to close a killed connection).
    pub fn interrupt(&self) -> Arc<Interrupt> {
        self.process.interrupt.clone()
    }

    /// Records the client's address for the process list.
    pub fn set_client_host(&mut self, host: String) {
        self.client_host = match host.parse::<std::net::SocketAddr>() {
            Ok(addr) => addr.ip().to_string(),
            Err(_) => host.clone(),
        };
        self.who = std::sync::OnceLock::new();
        self.process.set_host(host);
    }

    /// The client's address, without port.
    pub fn client_host(&self) -> &str {
        &self.client_host
    }

    /// Records that the connection is encrypted: protocol version and cipher suite, as
    /// `Ssl_version` / `Ssl_cipher` report them.
    pub fn set_tls(&mut self, version: String, cipher: String) {
        self.tls = Some((version, cipher));
    }

    /// Runs the session as `account` from now on (after the handshake proved it).
    pub fn login(&mut self, account: &crate::users::Account) {
        self.user = account.user.clone();
        self.account_host = account.host.clone();
        self.who = std::sync::OnceLock::new();
        self.process.set_user(&account.user);
    }

    /// Warns when an isolation level is served by another one (SERIALIZABLE by snapshot
    /// isolation, READ UNCOMMITTED by READ COMMITTED), naming the level used, as TiDB does
    /// with `tidb_skip_isolation_level_check`.
    fn note_isolation(&mut self, requested: &str, used: &str) {
        let requested = requested.to_ascii_uppercase().replace(['-', '_'], " ");
        if requested != used.replace('-', " ") {
            self.warn(
                Code::UnsupportedIsolationLevel,
                format!("The isolation level '{requested}' is not supported; {used} is used instead"),
            );
        }
    }

    /// Checks a login: the account `user` logs in as from this client's host, and whether
    /// `response` proves its password under `plugin`. On success the session runs as that
    /// account and the result says whether it has a password (caching_sha2's fast path
    /// then reports success); otherwise 1045, which never tells which part was wrong.
    pub fn authenticate(&mut self, user: &str, plugin: &str, scramble: &[u8], response: &[u8]) -> Result<bool> {
        let account = self.engine.users.find(user, &self.client_host);
        match account {
            Some(a) if a.verify(plugin, scramble, response) => {
                self.login(&a);
                Ok(a.has_password())
            }
            _ => Err(Error::user(
                Code::AccessDenied,
                format!(
                    "Access denied for user '{user}'@'{}' (using password: {})",
                    self.client_host,
                    if response.is_empty() { "NO" } else { "YES" }
                ),
            )),
        }
    }

    /// How long the connection may sit idle between commands (wait_timeout, seconds).
    pub fn wait_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.settings().wait_timeout_s)
    }

    /// How long one write of a result to the client may take (net_write_timeout, seconds).
    pub fn write_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.settings().write_timeout_s)
    }

    /// An interactive client: its wait_timeout starts as interactive_timeout.
    pub fn start_interactive(&mut self) {
        if let Some(v) = self.vars.get("interactive_timeout").cloned() {
            self.vars_mut().insert("wait_timeout".into(), v);
        }
    }

    /// Whether the logged-in account requires TLS (REQUIRE SSL).
    pub fn requires_tls(&self) -> bool {
        self.with_account(|a| a.require_ssl).unwrap_or(false)
    }

    /// Runs `f` on this session's account (None if it was dropped meanwhile).
    fn with_account<T>(&self, f: impl FnOnce(&crate::users::Account) -> T) -> Option<T> {
        self.engine.users.with(&self.user, &self.account_host, f)
    }

    /// `'user'@'host'` of the account, as error messages name it.
    fn who(&self) -> String {
        format!("'{}'@'{}'", self.user, self.account_host)
    }

    /// Whether this session's account holds `privilege` on `db`.`table` (or on `db`).
    fn allowed(&self, privilege: u32, db: &str, table: Option<&str>) -> bool {
        self.with_account(|a| a.allows(privilege, db, table)).unwrap_or(false)
    }

    /// Whether this session's account holds the global `privilege`.
    fn allowed_global(&self, privilege: u32) -> bool {
        self.with_account(|a| a.global & privilege == privilege).unwrap_or(false)
    }

    /// `KILL [CONNECTION | QUERY] id`: stops another connection's statement, or the
    /// connection. Killing this very connection fails the `KILL` itself, as in MySQL.
    fn kill(&mut self, modifier: Option<ast::KillType>, id: u64) -> Result<QueryResult> {
        let query_only = match modifier {
            None | Some(ast::KillType::Connection) => false,
            Some(ast::KillType::Query) => true,
            Some(other) => return Err(Error::unsupported(format!("KILL {other}"))),
        };
        let target =
            u32::try_from(id).ok().and_then(|id| self.engine.processes.lock().get(&id).map(|p| p.interrupt.clone()));
        let Some(target) = target else {
            return Err(Error::user(Code::NoSuchThread, format!("Unknown thread id: {id}")));
        };
        // Another user's connection takes SUPER, as in MySQL.
        let owner = u32::try_from(id).ok().and_then(|id| self.engine.processes.lock().get(&id).map(|p| p.user()));
        if owner.as_deref() != Some(self.user.as_str()) && !self.allowed_global(crate::users::privs::SUPER) {
            return Err(Error::user(Code::KillDenied, format!("You are not owner of thread {id}")));
        }
        if query_only {
            target.kill_query();
        } else {
            target.kill_connection();
        }
        if u64::from(self.conn_id) == id {
            return Err(if query_only { interrupt::query_interrupted() } else { interrupt::connection_killed() });
        }
        Ok(QueryResult::ok(0))
    }

    /// Whether a transaction is open (for the protocol's status flags).
    pub fn in_transaction(&self) -> bool {
        self.txn.is_some()
    }

    /// Whether autocommit is on.
    pub fn autocommit(&self) -> bool {
        self.settings().autocommit
    }

    /// Warnings of the last statement.
    pub fn warning_count(&self) -> u16 {
        self.warnings.len().min(u16::MAX as usize) as u16
    }

    /// Changes the current database (COM_INIT_DB, USE).
    pub fn use_database(&mut self, db: &str) -> Result<()> {
        let db = db.trim().trim_matches('`');
        if !self.engine.catalog.has_database(db) && !db.eq_ignore_ascii_case("information_schema") {
            return Err(Error::user(Code::BadDb, format!("Unknown database '{db}'")));
        }
        let sees =
            db.eq_ignore_ascii_case("information_schema") || self.with_account(|a| a.sees_db(db)).unwrap_or(false);
        if !sees {
            return Err(crate::users::db_denied(&self.who(), db));
        }
        self.db = Some(db.to_string());
        self.process.set_db(self.db.clone());
        Ok(())
    }

    /// ADMIN CHECK TABLE t1[, t2 ...] (TiDB's index consistency check).
    async fn admin_check(&mut self, text: &str) -> Result<QueryResult> {
        let names = text.trim().trim_end_matches(';').splitn(4, char::is_whitespace).nth(3).unwrap_or("").to_string();
        if names.trim().is_empty() {
            return Err(Error::parse("ADMIN CHECK TABLE needs a table name"));
        }
        for (db, t) in self.table_list(&names)? {
            self.may_see_table(&db, &t, "SELECT")?;
            let table = self.engine.catalog.table(&db, &t)?;
            self.engine.check_table(&table).await?;
        }
        Ok(QueryResult::ok(0))
    }

    /// `db.t, t2, ...` as (database, table) pairs; the current database where none is named.
    fn table_list(&self, names: &str) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        for name in names.split(',') {
            let parts: Vec<String> = name.split('.').map(|p| p.trim().trim_matches('`').to_string()).collect();
            out.push(match parts.as_slice() {
                [t] => (self.db.clone().ok_or_else(|| Error::user(Code::NoDb, "No database selected"))?, t.clone()),
                [d, t] => (d.clone(), t.clone()),
                _ => return Err(Error::parse(format!("bad table name '{name}'"))),
            });
        }
        Ok(out)
    }

    /// CHECK TABLE / CHECKSUM TABLE `t, ...` [options]: one result row per table, as MySQL
    /// reports them (a missing table is a row, not an error).
    async fn check_or_checksum(&mut self, text: &str, checksum: bool) -> Result<QueryResult> {
        const OPTIONS: &[&str] = &["quick", "fast", "medium", "extended", "changed", "for", "upgrade"];
        let rest = text.trim().trim_end_matches(';').splitn(3, char::is_whitespace).nth(2).unwrap_or("").trim();
        let mut words: Vec<&str> = rest.split_whitespace().collect();
        while words.last().is_some_and(|w| OPTIONS.contains(&w.to_ascii_lowercase().as_str())) {
            words.pop();
        }
        let names = words.join(" ");
        if names.is_empty() {
            return Err(Error::parse("You have an error in your SQL syntax: CHECK TABLE needs a table name"));
        }
        let mut rows = Vec::new();
        for (db, t) in self.table_list(&names)? {
            let shown = Value::str(format!("{db}.{t}"));
            let found = self.may_see_table(&db, &t, "SELECT").and_then(|_| self.engine.catalog.table(&db, &t));
            if checksum {
                match found {
                    Ok(table) => rows.push(vec![shown, Value::UInt(self.engine.checksum_table(&table).await?)]),
                    Err(e) => {
                        self.warnings.push(("Error", e.code(), e.to_string()));
                        rows.push(vec![shown, Value::Null]);
                    }
                }
                continue;
            }
            let op = Value::str("check");
            match found {
                Err(e) => {
                    rows.push(vec![shown.clone(), op.clone(), Value::str("Error"), Value::str(e.to_string())]);
                    rows.push(vec![shown, op, Value::str("status"), Value::str("Operation failed")]);
                }
                Ok(table) => match self.engine.check_table(&table).await {
                    Ok(()) => rows.push(vec![shown, op, Value::str("status"), Value::str("OK")]),
                    Err(e) if e.code() == Code::AdminCheckTable => {
                        rows.push(vec![shown.clone(), op.clone(), Value::str("error"), Value::str(e.to_string())]);
                        rows.push(vec![shown, op, Value::str("error"), Value::str("Corrupt")]);
                    }
                    Err(e) => return Err(e),
                },
            }
        }
        let columns = if checksum {
            vec![Column::text("Table"), Column::int("Checksum")]
        } else {
            ["Table", "Op", "Msg_type", "Msg_text"].into_iter().map(Column::text).collect()
        };
        Ok(QueryResult::Rows { columns, rows })
    }

    /// Fails with 1142 unless the account holds some privilege on `db`.`table`.
    fn may_see_table(&self, db: &str, table: &str, command: &str) -> Result<()> {
        let ok = self.with_account(|a| a.allows_any(db, table)).unwrap_or(false);
        if ok {
            Ok(())
        } else {
            Err(crate::users::table_denied(command, &self.who(), table))
        }
    }

    /// Applies the WHERE of a SHOW statement, if any.
    fn show_where(&self, result: QueryResult, pred: Option<&ast::Expr>) -> Result<QueryResult> {
        match pred {
            None => Ok(result),
            Some(p) => {
                let info = self.info();
                crate::show::where_filter(result, p, &mut Binder::new(&self.engine.catalog, &info))
            }
        }
    }

    fn info(&self) -> SessionInfo {
        let who = self.who.get_or_init(|| Who {
            user: format!("{}@{}", self.user, self.account_host).into(),
            client_user: format!("{}@{}", self.user, self.client_host).into(),
            live: Arc::new(Live {
                engine: self.engine.clone(),
                user: self.user.clone(),
                account_host: self.account_host.clone(),
                last_trace: self.last_trace.clone(),
            }),
        });
        let settings = self.settings();
        SessionInfo {
            read_engines: settings.read_engines,
            like_share: settings.like_share,
            select_limit: settings.select_limit,
            db: self.db.clone(),
            now_us: unix_micros_now(),
            last_insert_id: self.last_insert_id,
            connection_id: self.conn_id,
            user: who.user.clone(),
            client_user: who.client_user.clone(),
            row_count: 0,
            vars: self.vars.clone(),
            user_vars: self.user_vars.clone(),
            globals: self.engine.globals(),
            schema: self.schema.clone(),
            live: Some(who.live.clone()),
            optimizer_trace: self.trace.clone(),
            // Keyed by the version of the schema the statement binds against: an autocommit
            // statement's slot is made before its transaction pins one, maybe a newer one
            // (a cached DML plan of the older schema would write the old table layout).
            plan_cache: self.plan_slot.clone().map(|mut slot| {
                if self.schema.is_some() {
                    slot.schema_version = self.schema_version;
                }
                slot
            }),
            compile_nanos: self.compile_nanos.clone(),
            value_rows: self.value_rows,
        }
    }

    /// The session's variables, to change: clears what was worked out of them (`settings`).
    fn vars_mut(&mut self) -> &mut BTreeMap<String, Value> {
        self.settings.take();
        Arc::make_mut(&mut self.vars)
    }

    /// What statements read of the session's variables (`Settings`).
    fn settings(&self) -> &Settings {
        self.settings.get_or_init(|| Settings::of(&self.vars))
    }

    /// The statement size limits from this session's variables.
    fn limits(&self) -> context::Limits {
        self.settings().limits
    }

    /// `tidb_mem_quota_query`: the bytes one statement may hold (0 or less: no quota).
    fn mem_quota(&self) -> usize {
        self.settings().mem_quota
    }

    fn txn_options(&self, mode: Option<LockMode>) -> TxnOptions {
        let s = self.settings();
        TxnOptions {
            mode: mode.unwrap_or(s.lock_mode),
            isolation: s.isolation,
            lock_wait_timeout_ms: s.lock_wait_timeout_ms,
            one_pc: s.one_pc,
        }
    }

    async fn begin(&mut self, mode: Option<LockMode>) -> Result<Box<Transaction>> {
        // Hold the GC safe point back from before the start timestamp is fetched, so a safe
        // point computed meanwhile cannot pass it.
        self.engine.active.lock().insert(u64::from(self.conn_id), Timestamp::ZERO);
        let begun = Transaction::begin(self.engine.client.clone(), self.engine.oracle.clone(), self.txn_options(mode));
        let start = async { begun.await.map(Box::new) };
        let (txn, schema, version) = self.engine.catalog.pin(start).await.inspect_err(|_| {
            self.engine.active.lock().remove(&u64::from(self.conn_id));
        })?;
        self.engine.active.lock().insert(u64::from(self.conn_id), txn.start_ts());
        // The transaction binds against the schema its snapshot was taken under.
        self.schema = Some(schema);
        self.schema_version = version;
        Ok(txn)
    }

    fn finish_txn(&mut self) {
        self.engine.active.lock().remove(&u64::from(self.conn_id));
        self.schema = None;
        self.savepoints.clear();
    }

    /// SAVEPOINT, ROLLBACK TO SAVEPOINT, RELEASE SAVEPOINT. Outside a transaction SAVEPOINT
    /// does nothing (autocommit ends the implicit one at once), as in MySQL.
    fn savepoint(&mut self, op: &str, name: &ast::Ident) -> Result<QueryResult> {
        let name = name.value.to_ascii_lowercase();
        let at = self.savepoints.iter().position(|(n, _)| *n == name);
        let missing = || Error::user(Code::FunctionNotExists, format!("SAVEPOINT {name} does not exist"));
        match op {
            "set" => {
                if let Some(txn) = &self.txn {
                    if let Some(i) = at {
                        self.savepoints.remove(i);
                    }
                    self.savepoints.push((name, txn.savepoint()));
                }
            }
            "rollback" => {
                let i = at.ok_or_else(missing)?;
                self.savepoints.truncate(i + 1);
                if let Some(txn) = &mut self.txn {
                    txn.rollback_to(&self.savepoints[i].1);
                }
            }
            _ => {
                let i = at.ok_or_else(missing)?;
                self.savepoints.truncate(i);
            }
        }
        Ok(QueryResult::ok(0))
    }

    /// Commits the open transaction, if any.
    pub async fn commit(&mut self) -> Result<()> {
        self.explicit = false;
        if let Some(txn) = self.txn.take() {
            let r = self.engine.commit_txn(*txn, self.schema_version).await;
            self.finish_txn();
            r?;
        }
        Ok(())
    }

    /// Rolls back the open transaction, if any.
    pub async fn rollback(&mut self) -> Result<()> {
        self.explicit = false;
        if let Some(txn) = self.txn.take() {
            let r = txn.rollback().await;
            self.finish_txn();
            r?;
        }
        Ok(())
    }

    /// Runs a COM_QUERY text, which may hold several statements. Results stop at the first
    /// error.
    pub async fn execute(&mut self, sql: &str) -> Vec<Result<QueryResult>> {
        self.execute_text(sql, true).await
    }

    /// Runs a COM_QUERY text; several statements are an error unless `allow_multi` (the
    /// client's CLIENT_MULTI_STATEMENTS).
    pub async fn execute_text(&mut self, sql: &str, allow_multi: bool) -> Vec<Result<QueryResult>> {
        self.execute_text_with(sql, allow_multi, &mut crate::load::NoClientFiles).await
    }

    /// [`execute_text`](Self::execute_text) on a connection whose client can send files
    /// (`LOAD DATA LOCAL INFILE` reads them from `client`) and take a result set as it is
    /// produced: the result of a text holding one query streams to `client`'s sink.
    pub async fn execute_text_with(
        &mut self,
        sql: &str,
        allow_multi: bool,
        client: &mut dyn ClientPort,
    ) -> Vec<Result<QueryResult>> {
        self.process.set_statement(Some(Arc::from(sql)));
        self.engine.metrics.command(crate::metrics::Command::Query);
        let r = self.execute_text_inner(sql, allow_multi, client, true).await;
        self.process.set_statement(None);
        r
    }

    /// Runs a text's statements; the result of a lone query streams to `client` if
    /// `stream` (not in a text of several: each result is sent after all have run). Each
    /// statement of the text goes into the statement summary (and, if slow, the slow log).
    async fn execute_text_inner(
        &mut self,
        sql: &str,
        allow_multi: bool,
        client: &mut dyn ClientPort,
        stream: bool,
    ) -> Vec<Result<QueryResult>> {
        self.start_timing();
        let r = self.execute_text_body(sql, allow_multi, client, stream).await;
        if !self.timing.done {
            let digest = self.text_digest_of_shape.take();
            self.summarize(sql, digest.as_deref(), &r);
        }
        self.literal_text = None;
        self.plan_slot = None;
        r
    }

    async fn execute_text_body(
        &mut self,
        sql: &str,
        allow_multi: bool,
        client: &mut dyn ClientPort,
        stream: bool,
    ) -> Vec<Result<QueryResult>> {
        if let Some(spec) = crate::load::parse(sql) {
            self.warnings.clear();
            let r = match spec {
                Ok(spec) => self.load_data(spec, client.files()).await,
                Err(e) => Err(e),
            };
            return vec![r];
        }
        if let Some(r) = self.special(sql).await {
            return vec![r];
        }
        // Several statements in one text (CLIENT_MULTI_STATEMENTS, as go-tpc sends `SET ..;
        // ANALYZE TABLE t`): each runs as if sent alone, so statements the SQL parser does
        // not know (ANALYZE, replica settings, grants, LOAD DATA) work there too.
        if allow_multi {
            let pieces = split_statements(sql);
            if pieces.len() > 1 {
                let mut out = Vec::with_capacity(pieces.len());
                for piece in pieces {
                    let r = Box::pin(self.execute_text_inner(piece, false, client, false)).await;
                    let failed = r.iter().any(|r| r.is_err());
                    out.extend(r);
                    if failed {
                        break;
                    }
                }
                return out;
            }
        }
        let sink = if stream { client.results() } else { None };
        if let Some(r) = self.run_text_shape(sql, sink).await {
            return vec![r];
        }
        let parsing = std::time::Instant::now();
        // A multi-row INSERT of literals: its head is parsed, its rows read by hand.
        // One row of them: its placeholder text is a shape of the non-prepared plan cache.
        if let Some(rows) = crate::bulk_insert::split(sql) {
            let text: Arc<str> = rows.placeholder_text().into();
            let shaped = rows.values.len() == rows.width && self.text_cache_on() && !self.text_refused.contains(&text);
            let known = if shaped { self.text_shapes.get(&text).cloned() } else { None };
            let stmt = known.clone().or_else(|| rows.statement_of(&text, &self.dialect()).map(Arc::new));
            if let Some(stmt) = stmt {
                if shaped && known.is_none() {
                    self.keep_shape(text.clone(), stmt.clone());
                }
                self.timing.parse = parsing.elapsed();
                self.engine.metrics.phase(crate::metrics::Phase::Parse, self.timing.parse);
                self.value_rows = Some(rows.width);
                let slot = if shaped { self.plan_cache_slot(&text, &rows.values) } else { None };
                let refused = slot.map(|mut slot| {
                    slot.text = true;
                    let flags = (slot.refused.clone(), slot.failed.clone());
                    self.plan_slot = Some(slot);
                    flags
                });
                let r = self.run_with(&stmt, &rows.values, None).await;
                if refused.is_some_and(|(r, f)| r.load(Ordering::Relaxed) || f.load(Ordering::Relaxed)) {
                    self.refuse_shape(text.clone());
                }
                if shaped && self.engine.stmt_summary.enabled() {
                    self.text_digest_of_shape = Some(self.text_digest(&text));
                }
                self.value_rows = None;
                self.literal_text = Some(text.to_string());
                return vec![r];
            }
        }
        let stmts = match parse(sql, &self.dialect()) {
            Ok(s) => s,
            Err(e) => return vec![Err(e)],
        };
        self.timing.parse = parsing.elapsed();
        self.engine.metrics.phase(crate::metrics::Phase::Parse, self.timing.parse);
        if stmts.is_empty() {
            return vec![Err(Error::user(Code::Parse, "Query was empty"))];
        }
        if stmts.len() > 1 && !allow_multi {
            return vec![Err(Error::parse(
                "You have an error in your SQL syntax; several statements need CLIENT_MULTI_STATEMENTS",
            ))];
        }
        if let [stmt] = stmts.as_slice() {
            let sink = if stream { client.results() } else { None };
            return vec![self.run_with(stmt, &[], sink).await];
        }
        let mut out = Vec::with_capacity(stmts.len());
        for s in stmts {
            let r = self.run(&s, &[]).await;
            let failed = r.is_err();
            out.push(r);
            if failed {
                break;
            }
        }
        out
    }

    /// Runs text statement `sql` through the non-prepared plan cache (`crate::text_plan`)
    /// when it is on and the text's shape is cacheable; None when the text is to run the
    /// ordinary way (nothing of it ran, or only its planning, which failed).
    async fn run_text_shape(&mut self, sql: &str, sink: Option<&mut dyn ResultSink>) -> Option<Result<QueryResult>> {
        if !self.text_cache_on() {
            return None;
        }
        let parsing = std::time::Instant::now();
        let dialect = self.dialect();
        let shape = crate::text_plan::parameterize(sql, &dialect)?;
        let key: Arc<str> = shape.key.into();
        if self.text_refused.contains(&key) {
            return None;
        }
        let stmt = match self.text_shapes.get(&key) {
            Some(s) => s.clone(),
            None => {
                let parsed = parse(&key, &dialect).ok().and_then(|mut v| (v.len() == 1).then(|| v.remove(0)));
                let stmt = parsed.and_then(|mut s| {
                    let fits = number_placeholders(&mut s) == shape.params.len() && crate::text_plan::cacheable(&s);
                    fits.then_some(s)
                });
                let Some(stmt) = stmt else {
                    self.refuse_shape(key);
                    return None;
                };
                let stmt = Arc::new(stmt);
                self.keep_shape(key.clone(), stmt.clone());
                stmt
            }
        };
        self.timing.parse = parsing.elapsed();
        self.engine.metrics.phase(crate::metrics::Phase::Parse, self.timing.parse);
        let mut slot = self.plan_cache_slot(&key, &shape.params)?;
        slot.text = true;
        let (refused, failed) = (slot.refused.clone(), slot.failed.clone());
        self.plan_slot = Some(slot);
        let r = self.run_with(&stmt, &shape.params, sink).await;
        if failed.load(Ordering::Relaxed) || refused.load(Ordering::Relaxed) {
            self.refuse_shape(key.clone());
        }
        if r.is_err() && failed.load(Ordering::Relaxed) {
            // Planning the shape failed where the text itself may not: the text runs as sent
            // (and reports its own error, if any).
            self.plan_slot = None;
            return None;
        }
        if self.engine.stmt_summary.enabled() {
            // A shape's digest is its text's: both have every literal as `?`.
            self.text_digest_of_shape = Some(self.text_digest(&key));
        }
        Some(r)
    }

    /// Whether text statements go through the non-prepared plan cache: it and the plan
    /// cache are on and statements are not traced (a traced statement is planned as sent).
    /// Forgets the shapes when `sql_mode` changed since they were parsed (it changes how
    /// a text tokenizes and parses).
    fn text_cache_on(&mut self) -> bool {
        if !self.settings().text_plan_cache || self.tracing() {
            return false;
        }
        let mode: &[u8] = match self.vars.get("sql_mode") {
            Some(Value::Bytes(b)) => b,
            _ => &[],
        };
        if self.text_mode != mode {
            self.text_mode = mode.to_vec();
            self.text_shapes.clear();
            self.text_refused.clear();
        }
        // A shape refused for a schema of the past (an unknown table, say) is tried again.
        let version = self.engine.catalog.version();
        if self.text_refused_version != version {
            self.text_refused_version = version;
            self.text_refused.clear();
        }
        true
    }

    /// Keeps parsed shape `stmt` of text `key`.
    fn keep_shape(&mut self, key: Arc<str>, stmt: Arc<ast::Statement>) {
        if self.text_shapes.len() >= TEXT_SHAPES_MAX {
            self.text_shapes.clear();
        }
        self.text_shapes.insert(key, stmt);
    }

    /// Notes that shape `key` runs the ordinary way from now on.
    fn refuse_shape(&mut self, key: Arc<str>) {
        self.text_shapes.remove(&key);
        if self.text_refused.len() >= TEXT_SHAPES_MAX {
            self.text_refused.clear();
        }
        self.text_refused.insert(key);
    }

    /// The view `name` refers to, if it is one.
    fn view_named(&self, name: &ast::ObjectName) -> Result<Option<Arc<crate::catalog::ViewInfo>>> {
        let (db, t) = crate::binder::split_name(name)?;
        Ok(db.or_else(|| self.db.clone()).and_then(|db| self.engine.catalog.try_view(&db, &t)))
    }

    /// Column definitions of a table (COM_FIELD_LIST).
    pub fn field_list(&self, table: &str) -> Result<Vec<Column>> {
        let db = self.db.clone().ok_or_else(|| Error::user(Code::NoDb, "No database selected"))?;
        let t = self.engine.catalog.table(&db, table)?;
        let scope = Binder::table_scope(&t, &t.name);
        Ok(scope.columns.iter().map(|c| Column::from_output(&c.meta)).collect())
    }

    /// The SQL dialect under the session's `sql_mode`.
    fn dialect(&self) -> StrataDialect {
        self.settings().dialect
    }

    /// Prepares a statement; returns its id.
    pub async fn prepare(&mut self, sql: &str) -> Result<(u32, usize, Vec<Column>)> {
        self.engine.metrics.command(crate::metrics::Command::StmtPrepare);
        // A text prepared before, in this database, schema and binding variables: parsed
        // and bound then (a client preparing and closing a statement per execution).
        let (schema_version, vars) = (self.binding_schema_version(), self.binding_vars());
        let known = self
            .prepared_texts
            .get(sql)
            .filter(|t| t.schema_version == schema_version && Arc::ptr_eq(&t.vars, &vars) && t.db == self.db);
        if let Some(t) = known {
            let (stmt, params, columns) = (t.stmt.clone(), t.params, t.columns.clone());
            let counted = self.count_prepared()?;
            std::mem::forget(counted);
            return Ok(self.add_prepared(Arc::from(sql), stmt, params, columns));
        }
        let parsing = std::time::Instant::now();
        let mut stmts = parse(sql, &self.dialect())?;
        self.engine.metrics.phase(crate::metrics::Phase::Parse, parsing.elapsed());
        if stmts.len() != 1 {
            return Err(Error::user(Code::Parse, "You can only prepare one statement at a time"));
        }
        let mut stmt = stmts.remove(0);
        let counted = self.count_prepared()?;
        let params = number_placeholders(&mut stmt);
        // A query is bound now, as MySQL does: unknown tables and columns are reported at
        // PREPARE, and drivers that read result metadata before executing get it. Types of
        // computed columns are only known from values, so they go out as NULL here and
        // precisely with each execution's result set.
        let columns = match &stmt {
            ast::Statement::Query(q) => {
                let info = self.info();
                let query = Binder::new(&self.engine.catalog, &info).plan_query(q)?;
                query.columns.iter().map(Column::from_output).collect()
            }
            _ => Vec::new(),
        };
        std::mem::forget(counted); // kept: the statement now counts until closed
        let stmt = Arc::new(stmt);
        if sql.len() <= crate::text_plan::MAX_TEXT_BYTES {
            if self.prepared_texts.len() >= TEXT_SHAPES_MAX {
                self.prepared_texts.clear();
            }
            let text = PreparedText {
                stmt: stmt.clone(),
                params,
                columns: columns.clone(),
                db: self.db.clone(),
                schema_version,
                vars,
            };
            self.prepared_texts.insert(sql.into(), text);
        }
        Ok(self.add_prepared(Arc::from(sql), stmt, params, columns))
    }

    /// Counts one more prepared statement against max_prepared_stmt_count; the guard gives
    /// it back when dropped (forget it to keep the statement counted).
    fn count_prepared(&self) -> Result<PreparedCount<'_>> {
        // Each prepared statement holds memory until closed; the server-wide count is
        // bounded as in MySQL (a client that never closes them fails, the server does not).
        let limit = self.sysvar("max_prepared_stmt_count").and_then(|v| v.as_i64()).unwrap_or(16_382).max(0) as usize;
        if self.engine.prepared_stmts.fetch_add(1, Ordering::Relaxed) >= limit {
            self.engine.prepared_stmts.fetch_sub(1, Ordering::Relaxed);
            return Err(Error::user(
                Code::MaxPreparedStmtCountReached,
                format!("Can't create more than max_prepared_stmt_count statements (current value: {limit})"),
            ));
        }
        Ok(PreparedCount(&self.engine.prepared_stmts))
    }

    /// Adds a prepared statement (already counted); returns its id, parameters and columns.
    fn add_prepared(
        &mut self,
        sql: Arc<str>,
        stmt: Arc<ast::Statement>,
        params: usize,
        columns: Vec<Column>,
    ) -> (u32, usize, Vec<Column>) {
        let id = self.next_stmt;
        self.next_stmt += 1;
        self.prepared.insert(id, Prepared { sql, stmt, params, columns: columns.clone(), digest: None });
        (id, params, columns)
    }

    /// The number of parameters of a prepared statement.
    pub fn prepared_params(&self, id: u32) -> Option<usize> {
        self.prepared.get(&id).map(|p| p.params)
    }

    /// Executes a prepared statement.
    pub async fn execute_prepared(&mut self, id: u32, params: &[Value]) -> Result<QueryResult> {
        self.execute_prepared_with(id, params, None).await
    }

    /// [`execute_prepared`](Self::execute_prepared), a query's rows streaming to `sink`
    /// when there is one.
    pub async fn execute_prepared_with(
        &mut self,
        id: u32,
        params: &[Value],
        sink: Option<&mut dyn ResultSink>,
    ) -> Result<QueryResult> {
        self.start_timing();
        let summary = self.engine.stmt_summary.enabled();
        let (stmt, sql, digest) = match self.prepared.get_mut(&id) {
            Some(p) => {
                if p.params != params.len() {
                    return Err(Error::user(Code::WrongArguments, "Incorrect arguments to mysqld_stmt_execute"));
                }
                self.process.set_statement(Some(p.sql.clone()));
                let digest = match (&p.digest, summary) {
                    (Some(d), _) => Some(d.clone()),
                    (None, true) => {
                        let d = Arc::new(crate::stmt_summary::digest(&p.sql));
                        p.digest = Some(d.clone());
                        Some(d)
                    }
                    (None, false) => None,
                };
                (p.stmt.clone(), p.sql.clone(), digest)
            }
            None => {
                return Err(Error::user(
                    Code::UnknownStmtHandler,
                    format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_execute"),
                ))
            }
        };
        self.engine.metrics.command(crate::metrics::Command::StmtExecute);
        let cacheable = matches!(
            *stmt,
            ast::Statement::Query(_)
                | ast::Statement::Insert(_)
                | ast::Statement::Update(_)
                | ast::Statement::Delete(_)
        );
        self.plan_slot = if cacheable { self.plan_cache_slot(&sql, params) } else { None };
        let r = self.run_with(&stmt, params, sink).await;
        self.summarize(&sql, digest.as_deref(), std::slice::from_ref(&r));
        self.plan_slot = None;
        self.process.set_statement(None);
        r
    }

    /// Starts timing a statement for its summary (the start of a client command, or of one
    /// statement of a text of several).
    fn start_timing(&mut self) {
        self.timing = StatementTiming {
            started: Some(std::time::Instant::now()),
            reads_before: self.reads.rows_read(),
            ..Default::default()
        };
    }

    /// The digest of short text statement `sql`, from the session's cache if it was seen.
    fn text_digest(&mut self, sql: &str) -> Arc<crate::stmt_summary::Digest> {
        if let Some(d) = self.text_digests.get(sql) {
            return d.clone();
        }
        if self.text_digests.len() >= TEXT_DIGESTS_MAX {
            self.text_digests.clear();
        }
        let d = Arc::new(crate::stmt_summary::digest(sql));
        self.text_digests.insert(sql.into(), d.clone());
        d
    }

    /// Adds the statement that just ran (`sql`, with `digest` if known, its results `r`)
    /// to the statement summary and, when it took longer than `long_query_time`, counts it
    /// in Slow_queries and writes it to the slow log if `slow_query_log` is on.
    fn summarize(&mut self, sql: &str, digest: Option<&crate::stmt_summary::Digest>, r: &[Result<QueryResult>]) {
        self.timing.done = true;
        let Some(started) = self.timing.started else { return };
        let latency = started.elapsed();
        let slow = latency.as_secs_f64() > self.settings().long_query_time;
        if !slow && !self.engine.stmt_summary.enabled() {
            return;
        }
        // A short text statement (BEGIN, COMMIT, SET ...) comes again and again: its digest
        // (tokenizing and hashing the text) is kept for the session.
        let known = match digest {
            None if self.engine.stmt_summary.enabled() && sql.len() <= TEXT_DIGEST_MAX_BYTES => {
                Some(self.text_digest(sql))
            }
            _ => None,
        };
        let digest = digest.or(known.as_deref());
        let summary = &self.engine.stmt_summary;
        let (mut result_rows, mut affected_rows, mut warnings) = (0, 0, self.warnings.len() as u64);
        for r in r.iter().flatten() {
            match r {
                QueryResult::Rows { rows, .. } => result_rows += rows.len() as u64,
                QueryResult::Streamed { rows } => result_rows += rows,
                QueryResult::Ok { affected, warnings: w, .. } => {
                    affected_rows += affected;
                    warnings += w.len() as u64;
                }
            }
        }
        let examined = self.reads.rows_read().saturating_sub(self.timing.reads_before);
        let compile = std::time::Duration::from_nanos(self.compile_nanos.load(Ordering::Relaxed));
        let from_cache = self.plan_slot.as_ref().is_some_and(|s| s.hit.load(Ordering::Relaxed));
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        if summary.enabled() {
            let computed;
            let digest = match digest {
                Some(d) => d,
                None => {
                    computed = crate::stmt_summary::digest(sql);
                    &computed
                }
            };
            let tables_in = self.literal_text.as_deref().unwrap_or(sql);
            let tables = || table_names(tables_in, &self.dialect(), self.db.as_deref());
            summary.record(&crate::stmt_summary::Execution {
                schema: self.db.as_deref(),
                user: &self.user,
                text: sql,
                digest,
                tables: &tables,
                latency,
                parse: self.timing.parse,
                compile,
                lock: self.timing.lock,
                plan_from_cache: from_cache,
                failed: r.iter().any(|r| r.is_err()),
                warnings,
                affected_rows,
                result_rows,
                examined_rows: examined,
                now_us,
            });
        }
        if slow {
            self.slow_queries += 1;
            self.engine.slow_log.count();
            let globals = self.engine.globals();
            let on = globals.get("slow_query_log").and_then(|v| v.as_i64()).unwrap_or(0) != 0;
            let path = globals.get("slow_query_log_file").map(value_text).unwrap_or_default();
            if on && !path.is_empty() {
                let entry = crate::slow_log::SlowEntry {
                    now_us,
                    user: &self.user,
                    host: &self.client_host,
                    conn_id: self.conn_id,
                    query_time: latency,
                    lock_time: self.timing.lock,
                    parse_time: self.timing.parse,
                    compile_time: compile,
                    plan_from_cache: from_cache,
                    rows_sent: result_rows,
                    rows_examined: examined,
                    db: self.db.as_deref(),
                    sql,
                };
                if let Err(e) = self.engine.slow_log.write(&path, &entry) {
                    tracing::warn!("cannot write the slow query log {path}: {e}");
                }
            }
        }
    }

    /// COM_RESET_CONNECTION: as a fresh login of the same account — the transaction rolls
    /// back, table locks go, prepared statements close, variables return to the global
    /// defaults and user variables are forgotten.
    pub async fn reset_connection(&mut self) {
        let _ = self.rollback().await;
        self.engine.table_locks.unlock_tables(self.conn_id);
        self.engine.prepared_stmts.fetch_sub(self.prepared.len(), Ordering::Relaxed);
        self.prepared.clear();
        self.plan_cache.lock().clear();
        self.text_shapes.clear();
        self.text_refused.clear();
        self.prepared_texts.clear();
        self.named.clear();
        self.vars = self.engine.globals();
        self.settings.take();
        Arc::make_mut(&mut self.user_vars).clear();
        self.warnings.clear();
        self.last_insert_id = 0;
    }

    /// Drops a prepared statement.
    pub fn close_prepared(&mut self, id: u32) {
        if let Some(p) = self.prepared.remove(&id) {
            self.engine.prepared_stmts.fetch_sub(1, Ordering::Relaxed);
            // Its plans go too, unless tidb_ignore_prepared_cache_close_stmt keeps them for
            // the next PREPARE of the same text; another open statement of that text plans
            // again on its next execution.
            let keep =
                self.vars.get("tidb_ignore_prepared_cache_close_stmt").and_then(|v| v.as_bool()).unwrap_or(false);
            if !keep {
                self.plan_cache.lock().forget(&p.sql);
            }
        }
    }

    /// SQL-level prepared statements: `PREPARE name FROM 'text' | @var`, `EXECUTE name
    /// [USING @a, ...]`, `{DEALLOCATE | DROP} PREPARE name`. They share the binary protocol's
    /// statements (and its max_prepared_stmt_count); names are per session and case-blind.
    /// None when `sql` is none of these.
    async fn sql_prepared(&mut self, sql: &str) -> Option<Result<QueryResult>> {
        use sqlparser::tokenizer::{Token, Tokenizer};
        let head = crate::grants::leading_words(sql, 2);
        let head: Vec<&str> = head.iter().map(String::as_str).collect();
        if !matches!(head.as_slice(), ["PREPARE" | "EXECUTE" | "DEALLOCATE", ..] | ["DROP", "PREPARE"]) {
            return None;
        }
        let tokens = Tokenizer::new(&MySqlDialect {}, sql).tokenize().ok()?;
        let tokens: Vec<Token> =
            tokens.into_iter().filter(|t| !matches!(t, Token::Whitespace(_) | Token::SemiColon)).collect();
        let word = |i: usize| match tokens.get(i) {
            Some(Token::Word(w)) => Some(w.value.to_ascii_lowercase()),
            _ => None,
        };
        // `@name` tokenizes as a word in the MySQL dialect (a placeholder in others).
        let user_var = |t: Option<&Token>| {
            let text = match t {
                Some(Token::Placeholder(p)) => p.as_str(),
                Some(Token::Word(w)) if w.quote_style.is_none() => w.value.as_str(),
                _ => return None,
            };
            let name = text.strip_prefix('@').filter(|n| !n.is_empty() && !n.starts_with('@'))?;
            Some(name.to_ascii_lowercase())
        };
        let unknown = |name: &str, what: &str| {
            Err(Error::user(
                Code::UnknownStmtHandler,
                format!("Unknown prepared statement handler ({name}) given to {what}"),
            ))
        };
        match (word(0)?.as_str(), word(1)) {
            ("prepare", Some(name)) if word(2).as_deref() == Some("from") && tokens.len() == 4 => {
                let text = match &tokens[3] {
                    Token::SingleQuotedString(t) | Token::DoubleQuotedString(t) => t.clone(),
                    other => match user_var(Some(other)) {
                        Some(v) => match self.user_vars.get(&v) {
                            Some(Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
                            Some(Value::Null) | None => return Some(Err(Error::parse(
                                "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near 'NULL' at line 1",
                            ))),
                            Some(other) => other.to_display(),
                        },
                        None => return None,
                    },
                };
                // Re-preparing a name replaces its statement.
                if let Some(old) = self.named.remove(&name) {
                    self.close_prepared(old);
                }
                Some(self.prepare(&text).await.map(|(id, _, _)| {
                    self.named.insert(name, id);
                    QueryResult::ok(0)
                }))
            }
            ("execute", Some(name)) => {
                let mut values = Vec::new();
                match word(2).as_deref() {
                    None if tokens.len() == 2 => {}
                    Some("using") => {
                        // @a, @b, ... and nothing else.
                        for (i, t) in tokens[3..].iter().enumerate() {
                            if i % 2 == 1 {
                                if *t != Token::Comma {
                                    return None;
                                }
                                continue;
                            }
                            let v = user_var(Some(t))?;
                            values.push(self.user_vars.get(&v).cloned().unwrap_or(Value::Null));
                        }
                        if tokens.len() < 4 || tokens.len() % 2 == 1 {
                            return None;
                        }
                    }
                    _ => return None,
                }
                let Some(&id) = self.named.get(&name) else { return Some(unknown(&name, "EXECUTE")) };
                if self.prepared_params(id) != Some(values.len()) {
                    return Some(Err(Error::user(Code::WrongArguments, "Incorrect arguments to EXECUTE")));
                }
                Some(self.execute_prepared(id, &values).await)
            }
            ("deallocate" | "drop", Some(p)) if p == "prepare" && tokens.len() == 3 => {
                let name = word(2)?;
                match self.named.remove(&name) {
                    Some(id) => {
                        self.close_prepared(id);
                        Some(Ok(QueryResult::ok(0)))
                    }
                    None => Some(unknown(&name, "DEALLOCATE PREPARE")),
                }
            }
            _ => None,
        }
    }

    /// Runs an account statement (CREATE/DROP/ALTER/RENAME USER, SET PASSWORD, GRANT,
    /// REVOKE, SHOW GRANTS) with MySQL's privilege rules.
    async fn account_stmt(&mut self, stmt: crate::grants::AccountStmt) -> Result<QueryResult> {
        use crate::grants::AccountStmt as A;
        use crate::users::{privs, Account, Level};
        let engine = self.engine.clone();
        let users = &engine.users;
        let need_create_user = || -> Result<()> {
            if self.allowed_global(privs::CREATE_USER) {
                Ok(())
            } else {
                Err(crate::users::specific_denied("CREATE USER"))
            }
        };
        let failed = |op: &str, names: &[String]| {
            Error::user(Code::CannotUser, format!("Operation {op} failed for {}", names.join(",")))
        };
        let name = |(u, h): &(String, String)| format!("'{u}'@'{h}'");
        match stmt {
            A::CreateUser { if_not_exists, users: list, require_ssl } => {
                need_create_user()?;
                let existing: Vec<String> =
                    list.iter().filter(|(a, _)| users.get(&a.0, &a.1).is_some()).map(|(a, _)| name(a)).collect();
                if !existing.is_empty() && !if_not_exists {
                    return Err(failed("CREATE USER", &existing));
                }
                for ((u, h), pw) in list {
                    if users.get(&u, &h).is_some() {
                        self.warn(Code::CannotUser, format!("Authorization ID '{u}'@'{h}' already exists."));
                        continue;
                    }
                    let mut a = Account::new(&u, &h, pw.as_deref().unwrap_or(""));
                    a.require_ssl = require_ssl.unwrap_or(false);
                    users.put(a).await?;
                }
                Ok(QueryResult::ok(0))
            }
            A::DropUser { if_exists, users: list } => {
                need_create_user()?;
                let missing: Vec<String> = list.iter().filter(|a| users.get(&a.0, &a.1).is_none()).map(name).collect();
                if !missing.is_empty() && !if_exists {
                    return Err(failed("DROP USER", &missing));
                }
                for (u, h) in list {
                    if users.get(&u, &h).is_some() {
                        users.remove(&u, &h).await?;
                    }
                }
                Ok(QueryResult::ok(0))
            }
            A::AlterUser { if_exists, users: list, require_ssl } => {
                for (who, pw) in list {
                    let (u, h) = match who {
                        Some(a) => {
                            if !(a.0 == self.user && a.1.eq_ignore_ascii_case(&self.account_host)) {
                                need_create_user()?;
                            }
                            a
                        }
                        None => (self.user.clone(), self.account_host.clone()),
                    };
                    let Some(mut a) = users.get(&u, &h) else {
                        if if_exists {
                            continue;
                        }
                        return Err(failed("ALTER USER", &[name(&(u, h))]));
                    };
                    if let Some(pw) = pw {
                        a.set_password(&pw);
                    }
                    if let Some(r) = require_ssl {
                        need_create_user()?;
                        a.require_ssl = r;
                    }
                    users.put(a).await?;
                }
                Ok(QueryResult::ok(0))
            }
            A::RenameUser(pairs) => {
                need_create_user()?;
                for (from, to) in pairs {
                    let Some(mut a) = users.get(&from.0, &from.1) else {
                        return Err(failed("RENAME USER", &[name(&from)]));
                    };
                    if users.get(&to.0, &to.1).is_some() {
                        return Err(failed("RENAME USER", &[name(&from)]));
                    }
                    users.remove(&from.0, &from.1).await?;
                    a.user = to.0;
                    a.host = to.1;
                    users.put(a).await?;
                }
                Ok(QueryResult::ok(0))
            }
            A::SetPassword(who, pw) => {
                let (u, h) = match who {
                    Some(a) if !(a.0 == self.user && a.1.eq_ignore_ascii_case(&self.account_host)) => {
                        need_create_user()?;
                        a
                    }
                    _ => (self.user.clone(), self.account_host.clone()),
                };
                let Some(mut a) = users.get(&u, &h) else {
                    return Err(Error::user(Code::PasswordNoMatch, "Can't find any matching row in the user table"));
                };
                a.set_password(&pw);
                users.put(a).await?;
                Ok(QueryResult::ok(0))
            }
            A::Grant { privs: bits, all, target, users: list } => {
                let level = target.level(self.db.as_deref())?;
                let all_bits = if level == Level::Global { privs::ALL_GLOBAL } else { privs::ALL_OBJECT };
                let bits = if all { bits | all_bits } else { bits };
                if level != Level::Global
                    && bits & (privs::PROCESS | privs::FILE | privs::SUPER | privs::CREATE_USER) != 0
                {
                    return Err(Error::user(Code::WrongUsage, "Incorrect usage of DB GRANT and GLOBAL PRIVILEGES"));
                }
                self.may_grant(&level, bits)?;
                for (u, h) in &list {
                    if users.get(u, h).is_none() {
                        return Err(Error::user(
                            Code::CantCreateUserWithGrant,
                            "You are not allowed to create a user with GRANT",
                        ));
                    }
                }
                for (u, h) in list {
                    if let Some(mut a) = users.get(&u, &h) {
                        let now = a.at(&level) | bits;
                        a.set_at(&level, now);
                        users.put(a).await?;
                    }
                }
                Ok(QueryResult::ok(0))
            }
            A::Revoke { privs: bits, all, target, users: list } => {
                let level = target.level(self.db.as_deref())?;
                let everywhere = all && target == crate::grants::Target::Global && bits & privs::GRANT_OPTION != 0;
                let all_bits = if level == Level::Global { privs::ALL_GLOBAL } else { privs::ALL_OBJECT };
                let bits = if all { bits | all_bits } else { bits };
                self.may_grant(&level, bits & !privs::GRANT_OPTION)?;
                for (u, h) in list {
                    let Some(mut a) = users.get(&u, &h) else {
                        return Err(Error::user(
                            Code::NonexistingGrant,
                            format!("There is no such grant defined for user '{u}' on host '{h}'"),
                        ));
                    };
                    if everywhere {
                        a.global = 0;
                        a.dbs.clear();
                        a.tables.clear();
                    } else {
                        if level != Level::Global && a.at(&level) == 0 {
                            return Err(Error::user(
                                Code::NonexistingGrant,
                                format!("There is no such grant defined for user '{u}' on host '{h}'"),
                            ));
                        }
                        let now = a.at(&level) & !bits;
                        a.set_at(&level, now);
                    }
                    users.put(a).await?;
                }
                Ok(QueryResult::ok(0))
            }
            A::ShowGrants(who) => {
                let (u, h) = match who {
                    Some(a) => a,
                    None => (self.user.clone(), self.account_host.clone()),
                };
                let own = u == self.user && h.eq_ignore_ascii_case(&self.account_host);
                if !own && !self.allowed(privs::SELECT, "mysql", None) {
                    return Err(crate::users::db_denied(&self.who(), "mysql"));
                }
                let Some(a) = users.get(&u, &h) else {
                    return Err(Error::user(
                        Code::NonexistingGrant,
                        format!("There is no such grant defined for user '{u}' on host '{h}'"),
                    ));
                };
                let rows = a.grants().into_iter().map(|g| vec![Value::str(g)]).collect();
                Ok(QueryResult::text_rows(&[&format!("Grants for {u}@{h}")], rows))
            }
        }
    }

    /// Checks that this session's account may run `stmt`: SELECT on every table it reads,
    /// INSERT/UPDATE/DELETE on the tables it writes, CREATE/DROP/ALTER/INDEX for DDL, at the
    /// global, database or table level. Fails with 1142 naming the first table denied, or
    /// 1044 for a database.
    fn check_access(&self, stmt: &ast::Statement) -> Result<()> {
        use crate::users::privs as P;
        let global = self.with_account(|a| a.global).unwrap_or(0);
        if global & P::ALL_OBJECT == P::ALL_OBJECT {
            return Ok(());
        }
        for (bit, what, db, table) in self.touched(stmt)? {
            let ok = match (&table, bit) {
                (Some(t), 0) => self.with_account(|a| a.allows_any(&db, t)).unwrap_or(false),
                _ => self.allowed(bit, &db, table.as_deref()),
            };
            if !ok {
                return Err(match table {
                    Some(t) => crate::users::table_denied(what, &self.who(), &t),
                    None => crate::users::db_denied(&self.who(), &db),
                });
            }
        }
        Ok(())
    }

    /// The tables (and databases) a statement uses: (privilege it needs, the privilege's
    /// name, database, table). information_schema is left out; 0 means "any privilege".
    fn touched(&self, stmt: &ast::Statement) -> Result<Vec<Touch>> {
        use crate::users::privs as P;
        use ast::Statement as S;
        // EXPLAIN needs what the statement it explains needs (MySQL: SELECT on its tables).
        if let S::Explain { statement, .. } = stmt {
            return self.touched(statement);
        }
        let names = |n: &ast::ObjectName| -> Option<(String, String)> {
            let (db, t) = crate::binder::split_name(n).ok()?;
            let db = db.or_else(|| self.db.clone())?;
            (!db.eq_ignore_ascii_case("information_schema")).then_some((db, t))
        };
        // (privilege, its name, database, table)
        let mut needs: Vec<Touch> = Vec::new();
        let mut writes: Vec<(u32, &'static str, ast::ObjectName)> = Vec::new();
        let reads = match stmt {
            S::Query(_) => true,
            S::Insert(ins) => {
                if let ast::TableObject::TableName(n) = &ins.table {
                    writes.push((P::INSERT, "INSERT", n.clone()));
                }
                true
            }
            S::Update(up) => {
                for r in std::iter::once(&up.table.relation).chain(up.table.joins.iter().map(|j| &j.relation)) {
                    if let ast::TableFactor::Table { name, .. } = r {
                        writes.push((P::UPDATE, "UPDATE", name.clone()));
                    }
                }
                true
            }
            S::Delete(del) => {
                let from = match &del.from {
                    ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
                };
                if del.tables.is_empty() {
                    if let Some(ast::TableFactor::Table { name, .. }) = from.first().map(|f| &f.relation) {
                        writes.push((P::DELETE, "DELETE", name.clone()));
                    }
                } else {
                    for n in &del.tables {
                        writes.push((P::DELETE, "DELETE", n.clone()));
                    }
                }
                true
            }
            S::CreateTable(ct) => {
                writes.push((P::CREATE, "CREATE", ct.name.clone()));
                ct.query.is_some()
            }
            S::CreateIndex(ci) => {
                writes.push((P::INDEX, "INDEX", ci.table_name.clone()));
                false
            }
            S::AlterTable(at) => {
                writes.push((P::ALTER, "ALTER", at.name.clone()));
                false
            }
            S::Drop { object_type: ast::ObjectType::Table | ast::ObjectType::View, names: list, .. } => {
                for n in list {
                    writes.push((P::DROP, "DROP", n.clone()));
                }
                false
            }
            S::CreateView(cv) => {
                writes.push((P::CREATE, "CREATE", cv.name.clone()));
                true
            }
            S::Drop { object_type: ast::ObjectType::Index, table: Some(t), .. } => {
                writes.push((P::INDEX, "INDEX", t.clone()));
                false
            }
            S::Truncate(t) => {
                for n in &t.table_names {
                    writes.push((P::DROP, "DROP", n.name.clone()));
                }
                false
            }
            S::Drop { object_type: ast::ObjectType::Database | ast::ObjectType::Schema, names: list, .. } => {
                for n in list {
                    let db = crate::binder::split_name(n)?.1;
                    needs.push((P::DROP, "DROP", db, None));
                }
                false
            }
            S::CreateDatabase { db_name, .. } => {
                needs.push((P::CREATE, "CREATE", crate::binder::split_name(db_name)?.1, None));
                false
            }
            // Reading a table's definition takes some privilege on it (0: any).
            S::ShowCreate { obj_type: ast::ShowCreateObject::Table | ast::ShowCreateObject::View, obj_name } => {
                writes.push((0, "SHOW", obj_name.clone()));
                false
            }
            S::ExplainTable { table_name, .. } => {
                writes.push((0, "SELECT", table_name.clone()));
                false
            }
            S::LockTables { tables } => {
                for t in tables {
                    writes.push((P::SELECT, "SELECT", ast::ObjectName::from(vec![t.table.clone()])));
                }
                false
            }
            S::Flush { read_lock: true, tables, .. } => {
                for n in tables {
                    writes.push((P::SELECT, "SELECT", n.clone()));
                }
                false
            }
            _ => false,
        };
        let mut written = Vec::new();
        for (bit, what, n) in &writes {
            if let Some((db, t)) = names(n) {
                written.push((db.to_ascii_lowercase(), t.to_ascii_lowercase()));
                needs.push((*bit, what, db, Some(t)));
            }
        }
        if reads {
            let ctes = cte_names(stmt);
            let _ = ast::visit_relations(stmt, |n| {
                let bare = n.0.len() == 1 && ctes.contains(&n.to_string().trim_matches('`').to_ascii_lowercase());
                if let Some((db, t)) = names(n).filter(|_| !bare) {
                    let key = (db.to_ascii_lowercase(), t.to_ascii_lowercase());
                    if !written.contains(&key) {
                        needs.push((P::SELECT, "SELECT", db, Some(t)));
                    }
                }
                std::ops::ControlFlow::<()>::Continue(())
            });
        }
        Ok(needs)
    }

    /// lock_wait_timeout: how long a statement waits for table locks.
    fn lock_wait_timeout(&self) -> std::time::Duration {
        let s = self.vars.get("lock_wait_timeout").and_then(|v| v.as_i64()).unwrap_or(31_536_000);
        std::time::Duration::from_secs(s.clamp(1, 31_536_000) as u64)
    }

    /// An existing table's lock key (database, table) in lower case; 1146 if it does not
    /// exist, 1046 without a database.
    fn table_key(&self, name: &ast::ObjectName) -> Result<crate::table_locks::TableKey> {
        let (db, t) = crate::binder::split_name(name)?;
        let db = db.or_else(|| self.db.clone()).ok_or_else(|| Error::user(Code::NoDb, "No database selected"))?;
        // A view is locked by its name (reading it then passes the lock check).
        if self.engine.catalog.try_view(&db, &t).is_none() {
            self.engine.catalog.table(&db, &t)?;
        }
        Ok((db.to_ascii_lowercase(), t.to_ascii_lowercase()))
    }

    /// The tables a statement uses, for table locks: (table, whether it writes it).
    fn lock_keys(&self, stmt: &ast::Statement) -> Result<Vec<(crate::table_locks::TableKey, bool)>> {
        use crate::users::privs as P;
        let mut keys: Vec<(crate::table_locks::TableKey, bool)> = Vec::new();
        for (bit, _, db, table) in self.touched(stmt)? {
            let Some(t) = table else { continue };
            let key = (db.to_ascii_lowercase(), t.to_ascii_lowercase());
            let write = bit != P::SELECT && bit != 0;
            match keys.iter_mut().find(|(k, _)| *k == key) {
                Some(e) => e.1 |= write,
                None => keys.push((key, write)),
            }
        }
        Ok(keys)
    }

    /// GRANT/REVOKE of `bits` at `level` needs GRANT OPTION and the privileges themselves,
    /// at that level or above.
    fn may_grant(&self, level: &crate::users::Level, bits: u32) -> Result<()> {
        use crate::users::{privs, Level};
        let ok = self
            .with_account(|a| {
                let need = bits | privs::GRANT_OPTION;
                match level {
                    Level::Global => a.global & need == need,
                    Level::Db(d) => a.allows(need, d, None),
                    Level::Table(d, t) => a.allows(need, d, Some(t)),
                }
            })
            .unwrap_or(false);
        if ok {
            Ok(())
        } else {
            Err(Error::user(
                Code::DbAccessDenied,
                format!(
                    "Access denied for user {} to database '{}'",
                    self.who(),
                    match level {
                        Level::Global => "*",
                        Level::Db(d) | Level::Table(d, _) => d.as_str(),
                    }
                ),
            ))
        }
    }

    /// `ALTER TABLE t SET {TIFLASH | COLUMNAR} REPLICA n`: records the wanted replica in the
    /// table's definition (a schema change, so it commits an open transaction as DDL does)
    /// and has the column engine build or drop it.
    async fn set_replica(&mut self, stmt: crate::replica::SetReplica) -> Result<QueryResult> {
        let db = self
            .table_option_db(stmt.db.as_ref(), &stmt.table, || {
                Error::user(
                    Code::UnknownError,
                    "[ddl:8200]Unsupported ALTER table replica for table in system database",
                )
            })
            .await?;
        let engine = self.engine.clone();
        let _ddl = engine.catalog.ddl_lock().await;
        let mut table = base_table(&engine.catalog, &db, &stmt.table)?;
        let wanted = (stmt.setting.count > 0).then_some(stmt.setting);
        if table.columnar_replica != wanted {
            table.columnar_replica = wanted;
            engine.catalog.put_table(table).await?;
        }
        if let Some(column) = engine.column_engine.get() {
            column.schema_changed();
        }
        Ok(QueryResult::ok(0))
    }

    /// `ALTER TABLE t CACHE | NOCACHE` (`crate::cached_table`): records the setting in the
    /// table's definition (a schema change: an open transaction commits first). CACHE
    /// refuses a table larger than `MAX_CACHED_BYTES` (8242); its copy is loaded by the
    /// first read after the definition is published.
    async fn set_cache(&mut self, stmt: crate::cached_table::SetCache) -> Result<QueryResult> {
        let db = self
            .table_option_db(stmt.db.as_ref(), &stmt.table, || crate::cached_table::refused("alter system table cache"))
            .await?;
        let engine = self.engine.clone();
        let _ddl = engine.catalog.ddl_lock().await;
        let mut table = base_table(&engine.catalog, &db, &stmt.table)?;
        if table.cached == stmt.cache {
            return Ok(QueryResult::ok(0));
        }
        if stmt.cache {
            if engine.cached.read_table(table.id).await?.is_none() {
                return Err(crate::cached_table::refused("table too large"));
            }
            // Registered before the definition is published: a commit running now either
            // finishes before the publication (which waits for commits in flight) or sees
            // the table as cached; nothing loads until the publication is done.
            engine.cached.register(table.id, false);
            table.cached = true;
            let id = table.id;
            if let Err(e) = engine.catalog.put_table(table).await {
                engine.cached.forget(id);
                return Err(e);
            }
            engine.cached.enable(id);
        } else {
            let id = table.id;
            table.cached = false;
            engine.catalog.put_table(table).await?;
            engine.cached.forget(id);
        }
        Ok(QueryResult::ok(0))
    }

    /// The database of a table-option statement (`ALTER TABLE [db.]table SET .. REPLICA`,
    /// `.. CACHE`) once the account may ALTER the table and it is not in a system database
    /// (`system`'s error); an open transaction commits, as before any DDL.
    async fn table_option_db(
        &mut self,
        db: Option<&String>,
        table: &str,
        system: impl FnOnce() -> Error,
    ) -> Result<String> {
        let db = match db.or(self.db.as_ref()) {
            Some(db) => db.clone(),
            None => return Err(Error::user(Code::NoDb, "No database selected")),
        };
        if !self.allowed(crate::users::privs::ALTER, &db, Some(table)) {
            return Err(crate::users::table_denied("ALTER", &self.who(), table));
        }
        let system_dbs = ["mysql", "information_schema", "performance_schema", "sys", "metrics_schema"];
        if system_dbs.iter().any(|s| s.eq_ignore_ascii_case(&db)) {
            return Err(system());
        }
        self.commit().await?;
        Ok(db)
    }

    /// 8242 when `name` is a cached table: `what` (TiDB's name of the statement) must wait
    /// for `ALTER TABLE .. NOCACHE`.
    fn refuse_if_cached(&self, name: &ast::ObjectName, what: &str) -> Result<()> {
        let (db, table) = crate::binder::split_name(name)?;
        let Some(db) = db.or_else(|| self.db.clone()) else { return Ok(()) };
        match self.engine.catalog.table(&db, &table) {
            Ok(t) if t.cached => Err(crate::cached_table::refused(what)),
            _ => Ok(()),
        }
    }

    /// Statements handled before the SQL parser (syntax it does not know).
    async fn special(&mut self, sql: &str) -> Option<Result<QueryResult>> {
        // mysqldump wraps version-dependent syntax in executable comments:
        // `START TRANSACTION /*!40100 WITH CONSISTENT SNAPSHOT */`.
        let unwrapped = unwrap_executable_comments(sql);
        let sql = unwrapped.as_ref();
        if let Some(r) = self.sql_prepared(sql).await {
            return Some(r);
        }
        if let Some(stmt) = crate::grants::parse(sql) {
            return Some(match stmt {
                Ok(stmt) => self.account_stmt(stmt).await,
                Err(e) => Err(e),
            });
        }
        if let Some(stmt) = crate::replica::parse(sql) {
            return Some(match stmt {
                Ok(stmt) => self.set_replica(stmt).await,
                Err(e) => Err(e),
            });
        }
        if let Some(stmt) = crate::cached_table::parse(sql) {
            return Some(match stmt {
                Ok(stmt) => self.set_cache(stmt).await,
                Err(e) => Err(e),
            });
        }
        let t = sql.trim().trim_end_matches(';').trim();
        // The patterns below look at five words at most (the rest of a long one is `..`), so
        // a text is not lowered and split past its first few words: a bulk INSERT's text
        // runs to megabytes. One word more than any pattern names keeps the fixed-length
        // patterns from matching a longer statement.
        let lower: Vec<String> = t.split_whitespace().take(SPECIAL_WORDS + 1).map(str::to_ascii_lowercase).collect();
        let words: Vec<&str> = lower.iter().map(String::as_str).collect();
        match words.as_slice() {
            ["begin", "optimistic"] => Some(self.start(Some(LockMode::Optimistic)).await),
            ["begin", "pessimistic"] => Some(self.start(Some(LockMode::Pessimistic)).await),
            // mysqldump --single-transaction. Every transaction reads one snapshot from its
            // start timestamp, so "consistent snapshot" is what START TRANSACTION gives.
            ["start", "transaction", "with", "consistent", "snapshot"] => Some(self.start(None).await),
            ["show", "warnings", ..] | ["show", "errors", ..] => {
                let rows = self
                    .warnings
                    .iter()
                    .map(|(level, code, msg)| {
                        vec![Value::str(*level), Value::Int(code.number() as i64), Value::str(msg.clone())]
                    })
                    .collect();
                Some(Ok(QueryResult::Rows {
                    columns: vec![Column::text("Level"), Column::int("Code"), Column::text("Message")],
                    rows,
                }))
            }
            ["admin", "check", "table", ..] => Some(self.admin_check(t).await),
            ["analyze", ..] => Some(self.analyze(t).await),
            ["show", kind, ..] if kind.starts_with("stats_") => Some(self.show_stats(t)),
            ["check", "table", ..] => Some(self.check_or_checksum(t, false).await),
            ["checksum", "table", ..] => Some(self.check_or_checksum(t, true).await),
            // mysqldump brackets each table's rows with these; like InnoDB, there are no
            // non-unique index builds to defer, so they change nothing (the table must exist).
            ["alter", "table", name, "disable" | "enable", "keys"] => {
                let name = name.trim_matches('`');
                let (db, table) = match name.split_once('.') {
                    Some((d, t)) => (Some(d.trim_matches('`').to_string()), t.trim_matches('`').to_string()),
                    None => (self.db.clone(), name.to_string()),
                };
                Some(match db {
                    None => Err(Error::user(Code::NoDb, "No database selected")),
                    Some(db) => self
                        .may_see_table(&db, &table, "ALTER")
                        .and_then(|_| self.engine.catalog.table(&db, &table).map(|_| QueryResult::ok(0))),
                })
            }
            ["show", "index" | "indexes" | "keys", "from" | "in", ..] => {
                Some(crate::show::show_index(&self.engine.catalog, t, &self.db, |db, table| {
                    self.may_see_table(db, table, "SELECT")
                }))
            }
            ["show", "engines"] => Some(Ok(QueryResult::text_rows(
                &["Engine", "Support", "Comment", "Transactions", "XA", "Savepoints"],
                vec![vec![
                    Value::str("InnoDB"),
                    Value::str("DEFAULT"),
                    Value::str("Strata's transactional engine"),
                    Value::str("YES"),
                    Value::str("NO"),
                    Value::str("NO"),
                ]],
            ))),
            ["show", "collation", ..] => Some(Ok(QueryResult::text_rows(
                &["Collation", "Charset", "Id", "Default", "Compiled", "Sortlen"],
                vec![vec![
                    Value::str("utf8mb4_bin"),
                    Value::str("utf8mb4"),
                    Value::Int(46),
                    Value::str("Yes"),
                    Value::str("Yes"),
                    Value::Int(1),
                ]],
            ))),
            ["show", "character", "set", ..] | ["show", "charset", ..] => Some(Ok(QueryResult::text_rows(
                &["Charset", "Description", "Default collation", "Maxlen"],
                vec![vec![
                    Value::str("utf8mb4"),
                    Value::str("UTF-8 Unicode"),
                    Value::str("utf8mb4_bin"),
                    Value::Int(4),
                ]],
            ))),
            ["show", "processlist"] | ["show", "full", "processlist"] => {
                // Without PROCESS, an account sees only its own connections.
                let everyone = self.allowed_global(crate::users::privs::PROCESS);
                let all = visible_processes(&self.engine, &self.user, everyone);
                Some(Ok(process::show(&all, words[1] == "full")))
            }
            _ => None,
        }
    }

    async fn start(&mut self, mode: Option<LockMode>) -> Result<QueryResult> {
        self.commit().await?;
        let txn = self.begin(mode).await?;
        self.txn = Some(txn);
        self.explicit = true;
        Ok(QueryResult::ok(0))
    }

    fn warn(&mut self, code: Code, msg: String) {
        if self.warnings.len() < context::MAX_WARNINGS {
            self.warnings.push(("Warning", code, msg));
        }
    }

    /// Runs one statement.
    pub async fn run(&mut self, stmt: &ast::Statement, params: &[Value]) -> Result<QueryResult> {
        self.run_with(stmt, params, None).await
    }

    /// [`run`](Self::run), a query's result set streaming to `sink` when there is one.
    /// With `optimizer_trace` enabled, the statement's planning is traced and, if it
    /// planned anything, becomes the trace information_schema.OPTIMIZER_TRACE shows.
    pub async fn run_with(
        &mut self,
        stmt: &ast::Statement,
        params: &[Value],
        sink: Option<&mut dyn ResultSink>,
    ) -> Result<QueryResult> {
        use crate::optimizer_trace::OptimizerTrace;
        let started = std::time::Instant::now();
        self.compile_nanos.store(0, Ordering::Relaxed);
        let flags = self.trace_flags();
        let r = if !flags.enabled {
            self.run_statement(stmt, params, sink).await
        } else {
            // A traced statement is planned, not taken from the plan cache.
            self.plan_slot = None;
            let max = self.vars.get("optimizer_trace_max_mem_size").and_then(|v| v.as_i64()).unwrap_or(1 << 20);
            let trace = Arc::new(OptimizerTrace::new(usize::try_from(max).unwrap_or(0)));
            self.trace = Some(trace.clone());
            let r = self.run_statement(stmt, params, sink).await;
            self.trace = None;
            if let Some(row) = trace.finish(stmt.to_string(), flags.one_line) {
                *self.last_trace.lock() = Some(row);
            }
            r
        };
        // Metrics: the statement's kind, and its time outside planning as the execute phase.
        let metrics = &self.engine.metrics;
        metrics.statement(match stmt {
            ast::Statement::Query(_) => "Select",
            ast::Statement::Insert(_) => "Insert",
            ast::Statement::Update(_) => "Update",
            ast::Statement::Delete(_) => "Delete",
            ast::Statement::Set(_) => "Set",
            _ => "Other",
        });
        let compile = std::time::Duration::from_nanos(self.compile_nanos.load(Ordering::Relaxed));
        if !compile.is_zero() {
            metrics.phase(crate::metrics::Phase::Compile, compile);
        }
        metrics.phase(crate::metrics::Phase::Execute, started.elapsed().saturating_sub(compile));
        // What the next statement reads as @@last_plan_from_cache.
        let from_cache = Value::Int(i64::from(self.plan_slot.as_ref().is_some_and(|s| s.hit.load(Ordering::Relaxed))));
        if self.vars.get("last_plan_from_cache") != Some(&from_cache) {
            // Not through `vars_mut`: no `Settings` depend on it, and it flips often.
            Arc::make_mut(&mut self.vars).insert("last_plan_from_cache".into(), from_cache);
        }
        r
    }

    /// The session's `optimizer_trace` flags.
    fn trace_flags(&self) -> crate::optimizer_trace::Flags {
        self.settings().trace
    }

    /// Whether statements are traced (`optimizer_trace`).
    fn tracing(&self) -> bool {
        self.trace_flags().enabled
    }

    /// The plan cache slot for executing prepared statement text `sql` with `params`, when
    /// the cache is on.
    fn plan_cache_slot(&mut self, sql: &Arc<str>, params: &[Value]) -> Option<crate::binder::PlanCacheSlot> {
        let capacity = self.settings().plan_cache?;
        let vars = self.binding_vars();
        Some(crate::binder::PlanCacheSlot {
            cache: self.plan_cache.clone(),
            key: crate::plan_cache::PlanKey::new(sql.clone(), self.db.clone(), params, vars),
            schema_version: self.binding_schema_version(),
            capacity,
            hit: Arc::default(),
            text: false,
            refused: Arc::default(),
            failed: Arc::default(),
        })
    }

    /// The version of the schema statements bind against: the transaction's pinned schema,
    /// else the catalog's.
    fn binding_schema_version(&self) -> u64 {
        if self.schema.is_some() {
            self.schema_version
        } else {
            self.engine.catalog.version()
        }
    }

    /// The session variables binding reads, as one text (`Settings::binding`).
    fn binding_vars(&mut self) -> Arc<str> {
        self.settings().binding.clone()
    }

    async fn run_statement(
        &mut self,
        stmt: &ast::Statement,
        params: &[Value],
        sink: Option<&mut dyn ResultSink>,
    ) -> Result<QueryResult> {
        use ast::Statement as S;
        self.warnings.clear();
        self.check_access(stmt)?;
        // Table locks: the statement waits for other sessions' conflicting LOCK TABLES, and
        // a session under LOCK TABLES may use only what it locked.
        let _tables = match stmt {
            S::LockTables { .. } | S::UnlockTables | S::Flush { .. } | S::StartTransaction { .. } => None,
            _ => Some(
                self.engine
                    .table_locks
                    .enter(self.conn_id, || Ok((self.lock_keys(stmt)?, self.lock_wait_timeout())))
                    .await?,
            ),
        };
        let r = match stmt {
            S::Query(_) => self.run_in_txn(stmt, params, sink).await,
            S::Insert(_) | S::Update(_) | S::Delete(_) => self.run_in_txn(stmt, params, None).await,
            // EXPLAIN ANALYZE runs the query, in the session's transaction like a SELECT.
            S::Explain { analyze: true, .. } => self.run_in_txn(stmt, params, None).await,
            S::StartTransaction { .. } => {
                // As in MySQL, starting a transaction releases LOCK TABLES.
                self.engine.table_locks.unlock_tables(self.conn_id);
                self.start(None).await
            }
            S::LockTables { tables } => {
                let mut want = Vec::with_capacity(tables.len());
                for t in tables {
                    let name = ast::ObjectName::from(vec![t.table.clone()]);
                    let (db, table) = self.table_key(&name)?;
                    let mode = match t.lock_type {
                        ast::LockTableType::Read { .. } => crate::table_locks::Mode::Read,
                        ast::LockTableType::Write { .. } => crate::table_locks::Mode::Write,
                    };
                    want.push(((db, table), mode));
                }
                // LOCK TABLES commits the open transaction, as in MySQL.
                self.commit().await?;
                let timeout = self.lock_wait_timeout();
                self.engine.table_locks.lock_tables(self.conn_id, want, timeout).await.map(|_| QueryResult::ok(0))
            }
            S::UnlockTables => {
                self.engine.table_locks.unlock_tables(self.conn_id);
                Ok(QueryResult::ok(0))
            }
            S::Flush { read_lock: true, tables, .. } => {
                self.commit().await?;
                let timeout = self.lock_wait_timeout();
                if tables.is_empty() {
                    self.engine.table_locks.lock_global_read(self.conn_id, timeout).await.map(|_| QueryResult::ok(0))
                } else {
                    let mut want = Vec::with_capacity(tables.len());
                    for n in tables {
                        want.push((self.table_key(n)?, crate::table_locks::Mode::Read));
                    }
                    self.engine.table_locks.lock_tables(self.conn_id, want, timeout).await.map(|_| QueryResult::ok(0))
                }
            }
            S::Commit { .. } => self.commit().await.map(|_| QueryResult::ok(0)),
            S::Rollback { savepoint: None, .. } => self.rollback().await.map(|_| QueryResult::ok(0)),
            S::Rollback { savepoint: Some(name), .. } => self.savepoint("rollback", name),
            S::Savepoint { name } => self.savepoint("set", name),
            S::ReleaseSavepoint { name } => self.savepoint("release", name),
            S::Set(set) => self.set(set).await,
            S::Use(u) => {
                let name = match u {
                    ast::Use::Object(n) | ast::Use::Database(n) | ast::Use::Schema(n) => {
                        crate::binder::split_name(n)?.1
                    }
                    other => other.to_string(),
                };
                self.use_database(&name).map(|_| QueryResult::ok(0))
            }
            S::CreateDatabase { db_name, if_not_exists, .. } => {
                self.commit().await?;
                let name = crate::binder::split_name(db_name)?.1;
                self.engine.create_database(&name, *if_not_exists).await
            }
            S::CreateSchema { schema_name: ast::SchemaName::Simple(n), if_not_exists, .. } => {
                self.commit().await?;
                let name = crate::binder::split_name(n)?.1;
                self.engine.create_database(&name, *if_not_exists).await
            }
            S::CreateTable(ct) => {
                self.commit().await?;
                self.engine.create_table(ct, &self.db).await
            }
            S::CreateIndex(ci) => {
                self.refuse_if_cached(&ci.table_name, "Create Index")?;
                self.commit().await?;
                self.engine.create_index(ci, &self.db).await
            }
            S::CreateView(cv) => {
                self.commit().await?;
                let info = self.info();
                self.engine.create_view(cv, &info).await
            }
            S::AlterTable(at) => {
                self.refuse_if_cached(&at.name, "Alter Table")?;
                self.commit().await?;
                let own_fast = matches!(_tables, Some(crate::table_locks::Entry::Fast(_)));
                self.engine.alter_table(at, &self.db, (self.conn_id, own_fast), self.lock_wait_timeout()).await
            }
            S::Drop { object_type, if_exists, names, table, .. } => {
                match (object_type, table) {
                    (ast::ObjectType::Table, _) => {
                        for n in names {
                            self.refuse_if_cached(n, "Drop Table")?;
                        }
                    }
                    (ast::ObjectType::Index, Some(t)) => self.refuse_if_cached(t, "Drop Index")?,
                    _ => {}
                }
                self.commit().await?;
                match object_type {
                    ast::ObjectType::Table => self.engine.drop_tables(names, *if_exists, &self.db).await,
                    ast::ObjectType::View => self.engine.drop_views(names, *if_exists, &self.db).await,
                    ast::ObjectType::Database | ast::ObjectType::Schema => {
                        let mut last = QueryResult::ok(0);
                        for n in names {
                            let name = crate::binder::split_name(n)?.1;
                            last = self.engine.drop_database(&name, *if_exists).await?;
                            let catalog = &self.engine.catalog;
                            self.engine.cached.retain(|id| {
                                catalog
                                    .databases()
                                    .iter()
                                    .any(|d| catalog.tables(d).unwrap_or_default().iter().any(|t| t.id == id))
                            });
                            if self.db.as_deref().is_some_and(|d| d.eq_ignore_ascii_case(&name)) {
                                self.db = None;
                            }
                        }
                        Ok(last)
                    }
                    ast::ObjectType::Index => {
                        let Some(t) = table else { return Err(Error::parse("DROP INDEX needs ON table")) };
                        let idx = names
                            .first()
                            .map(|n| crate::binder::split_name(n).map(|x| x.1))
                            .transpose()?
                            .unwrap_or_default();
                        self.engine.drop_index_stmt(&idx, t, &self.db).await
                    }
                    other => Err(Error::unsupported(format!("DROP {other}"))),
                }
            }
            S::Truncate(t) => {
                for n in &t.table_names {
                    self.refuse_if_cached(&n.name, "Truncate Table")?;
                }
                self.commit().await?;
                let name = t
                    .table_names
                    .first()
                    .map(|n| n.name.clone())
                    .ok_or_else(|| Error::parse("TRUNCATE needs a table"))?;
                self.engine.truncate(&name, &self.db).await
            }
            S::ShowStatus { filter, global, .. } => {
                let reads = if *global { &self.engine.reads } else { &self.reads };
                let threads = self.engine.processes.lock().len();
                let tls = if *global { None } else { self.tls.as_ref() };
                let pending = self.engine.catalog.pending_deletes().await?.len();
                let store_bytes = self.engine.client.store_size().await?;
                let mut column = self.engine.column_engine.get().map(|c| c.status()).unwrap_or_default();
                let slow =
                    if *global { self.engine.slow_log.slow_queries.load(Ordering::Relaxed) } else { self.slow_queries };
                column.push(("Slow_queries", slow));
                column.push(("Strata_cached_table_reads", self.engine.cached.reads.load(Ordering::Relaxed)));
                column.push(("Strata_cached_table_loads", self.engine.cached.loads.load(Ordering::Relaxed)));
                crate::show::show_status(reads, threads, tls, pending, store_bytes, &column, filter.as_ref())
                    .and_then(|r| self.show_where(r, crate::show::where_of(filter.as_ref())))
            }
            S::Flush { object_type: ast::FlushType::Status, .. } => {
                self.reads.reset();
                Ok(QueryResult::ok(0))
            }
            S::ShowVariables { filter, global, .. } => {
                let vars = if *global { (*self.engine.globals()).clone() } else { self.visible_vars() };
                crate::show::show_variables(&vars, filter.as_ref())
                    .and_then(|r| self.show_where(r, crate::show::where_of(filter.as_ref())))
            }
            S::ShowDatabases { show_options, .. } => {
                let visible = |db: &str| self.with_account(|a| a.sees_db(db)).unwrap_or(false);
                crate::show::show_databases(&self.engine.catalog, show_options, visible)
                    .and_then(|r| self.show_where(r, crate::show::options_where(show_options)))
            }
            S::ShowTables { full, show_options, .. } => {
                // An account sees the tables it holds some privilege on, as in MySQL.
                let visible = |db: &str, t: &str| self.with_account(|a| a.allows_any(db, t)).unwrap_or(false);
                crate::show::show_tables(&self.engine.catalog, &self.db, *full, show_options, visible)
                    .and_then(|r| self.show_where(r, crate::show::options_where(show_options)))
            }
            S::ShowColumns { full, show_options, .. } => {
                let named = show_options.show_in.as_ref().and_then(|si| si.parent_name.as_ref());
                match named.map(|n| self.view_named(n)).transpose()?.flatten() {
                    Some(v) => crate::views::view_columns(&self.engine.catalog, &self.info(), &v, *full),
                    None => crate::show::show_columns(&self.engine.catalog, &self.db, *full, show_options),
                }
                .and_then(|r| self.show_where(r, crate::show::options_where(show_options)))
            }
            S::ShowCreate { obj_type, obj_name } => {
                crate::show::show_create(&self.engine.catalog, &self.db, *obj_type, obj_name)
            }
            S::ExplainTable { table_name, .. } => match self.view_named(table_name)? {
                Some(v) => crate::views::view_columns(&self.engine.catalog, &self.info(), &v, false),
                None => crate::show::describe(&self.engine.catalog, &self.db, table_name),
            },
            S::Explain { statement, .. } => self.explain(statement),
            S::Flush { object_type: ast::FlushType::SlowLogs | ast::FlushType::Logs, .. } => {
                if !self.allowed_global(crate::users::privs::SUPER) {
                    return Err(crate::users::specific_denied("SUPER or RELOAD"));
                }
                self.engine.slow_log.reopen();
                Ok(QueryResult::ok(0))
            }
            S::Flush { .. } => Ok(QueryResult::ok(0)),
            S::Kill { modifier, id } => self.kill(*modifier, *id),
            other => Err(Error::unsupported(truncate_sql(&other.to_string()).to_string())),
        };
        if let Ok(QueryResult::Ok { warnings, last_insert_id, .. }) = &r {
            for (c, m) in warnings.clone() {
                self.warn(c, m);
            }
            if *last_insert_id > 0 {
                self.last_insert_id = *last_insert_id;
            }
        }
        r
    }

    fn explain(&mut self, stmt: &ast::Statement) -> Result<QueryResult> {
        let info = self.info();
        let ast::Statement::Query(q) = stmt else { return Err(Error::unsupported("EXPLAIN of a non-query")) };
        let mut binder = Binder::new(&self.engine.catalog, &info);
        let query = binder.plan_query(q)?;
        // The column engine's plan when it would run the query; the row engine's otherwise;
        // then the cost model's estimates when it made the choice.
        let (column, costs) = choose_engine(&self.engine, &info, &query);
        let costs = costs.map(|c| c.explain_line());
        let mut unsupported = None;
        if let Some(c) = column {
            match c.explain(&query, &[]) {
                Ok(mut lines) => {
                    lines.extend(costs);
                    return Ok(plan_result(lines));
                }
                Err(why) => unsupported = Some(format!("Column engine cannot run this query: {why}")),
            }
        }
        let scans = replica_scans_for(&self.engine, &info, &query);
        let mut lines = row_plan_lines(&query, scans.as_ref().map(|(_, s)| s), &|_| String::new());
        lines.extend(costs);
        lines.extend(unsupported);
        Ok(plan_result(lines))
    }

    async fn run_in_txn(
        &mut self,
        stmt: &ast::Statement,
        params: &[Value],
        sink: Option<&mut dyn ResultSink>,
    ) -> Result<QueryResult> {
        // An autocommit statement that lost the race with a schema change (8028) had no
        // visible effect; it runs again against the new schema, as TiDB retries it — unless
        // part of its result has gone to the client. So does a READ COMMITTED SELECT that
        // read at a reused timestamp (tidb_rc_read_check_ts) and met a newer version: it
        // runs again at a fresh timestamp.
        let mut sink = sink.map(|sink| Watched { sink, started: false });
        let mut attempt = 0;
        loop {
            let out = sink.as_mut().map(|w| w as &mut dyn ResultSink);
            match self.run_in_txn_once(Work::Statement(stmt, params, out)).await {
                Err(e)
                    if (e.code() == Code::InfoSchemaChanged || self.stale_read_conflicted(&e))
                        && attempt < 5
                        && !sink.as_ref().is_some_and(|w| w.started) =>
                {
                    attempt += 1
                }
                other => return other,
            }
        }
    }

    /// Whether `e` is a checked read's newer version (see `strata_txn::Transaction`'s RC
    /// check-ts reads): the statement may run again at a fresh timestamp.
    fn stale_read_conflicted(&self, e: &Error) -> bool {
        matches!(e, Error::WriteConflict { .. }) && self.txn.as_ref().is_some_and(|t| t.stale_read_conflicted())
    }

    /// LOAD DATA: checks privileges and where the file may come from, then runs the load
    /// as one statement (not retried: the file is read once).
    async fn load_data(
        &mut self,
        mut spec: crate::load::LoadSpec,
        client_files: &mut dyn crate::load::FileSource,
    ) -> Result<QueryResult> {
        use crate::users::privs;
        // Privileges first: an account without them does not learn whether the table exists.
        let (db, table) = crate::binder::split_name(&spec.table)?;
        let db = db.or_else(|| self.db.clone()).ok_or_else(|| Error::user(Code::NoDb, "No database selected"))?;
        let need = if spec.duplicates == crate::load::Duplicates::Replace {
            privs::INSERT | privs::DELETE
        } else {
            privs::INSERT
        };
        if !self.allowed(need, &db, Some(&table)) {
            return Err(crate::users::table_denied("INSERT", &self.who(), &table));
        }
        let (db, table) = self.table_key(&spec.table)?;
        let mut server_file = crate::load::ServerFile::default();
        let source: &mut dyn crate::load::FileSource = if spec.local {
            if !self.sysvar("local_infile").and_then(|v| v.as_bool()).unwrap_or(false) {
                return Err(crate::load::local_disabled());
            }
            client_files
        } else {
            if !self.allowed_global(privs::FILE) {
                return Err(crate::users::specific_denied("FILE"));
            }
            let dir = self.sysvar("secure_file_priv").unwrap_or(Value::Null);
            spec.file = crate::load::server_path(&spec.file, &dir)?;
            &mut server_file
        };
        let _tables = self
            .engine
            .table_locks
            .enter(self.conn_id, || Ok((vec![((db, table), true)], self.lock_wait_timeout())))
            .await?;
        let mut vars = Vec::new();
        let r = self.run_in_txn_once(Work::Load(&spec, source, &mut vars)).await;
        for (name, v) in vars {
            Arc::make_mut(&mut self.user_vars).insert(name, v);
        }
        if let Ok(QueryResult::Ok { last_insert_id, .. }) = &r {
            if *last_insert_id > 0 {
                self.last_insert_id = *last_insert_id;
            }
        }
        r
    }

    async fn run_in_txn_once(&mut self, work: Work<'_>) -> Result<QueryResult> {
        let mut txn = match self.txn.take() {
            Some(t) => t,
            None => self.begin(None).await?,
        };
        let info = self.info();
        let single = !self.explicit && self.autocommit();
        txn.set_single_statement(single);
        let locked_before = txn.lock_time();
        // tidb_rc_read_check_ts: a plain SELECT inside a READ COMMITTED transaction reads at
        // the newest timestamp the transaction holds, with checked reads (an autocommit
        // statement has just fetched its start timestamp: nothing to save).
        let plain_select = matches!(work, Work::Statement(ast::Statement::Query(q), _, _) if q.locks.is_empty());
        txn.set_rc_check_ts(!single && plain_select && self.settings().rc_read_check_ts);
        if let Err(e) = txn.start_statement().await {
            self.txn = Some(txn);
            return Err(e);
        }
        // max_execution_time (ms) limits SELECTs, as in MySQL: a timer trips the kill switch.
        let limit_ms = match work {
            Work::Statement(ast::Statement::Query(_) | ast::Statement::Explain { analyze: true, .. }, _, _) => {
                self.settings().max_execution_time_ms
            }
            _ => 0,
        };
        let interrupt = self.process.interrupt.clone();
        let engine = &self.engine;
        let env = context::StatementEnv {
            limits: self.limits(),
            memory: context::MemTracker::new(self.mem_quota(), self.conn_id as u64),
            reads: [self.reads.clone(), self.engine.reads.clone()],
            cached: Some(self.engine.cached.clone()),
        };
        let run = interrupt::scope(interrupt.clone(), async {
            // Started inside the scope, after it has cleared the previous statement's state;
            // stopped when the statement ends, even by a panic.
            let _timer = (limit_ms > 0).then(|| {
                AbortOnDrop(tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_millis(limit_ms as u64)).await;
                    interrupt.time_out();
                }))
            });
            let max_line = env.limits.max_allowed_packet;
            let statement = Box::pin(async {
                match work {
                    Work::Statement(stmt, params, sink) => {
                        exec_statement(engine, &mut txn, &info, stmt, params, sink).await
                    }
                    Work::Load(spec, source, vars) => {
                        let dml = DmlCtx { catalog: &engine.catalog, session: &info, params: &[] };
                        Box::pin(crate::load::run(&dml, &mut txn, spec, source, max_line, vars)).await
                    }
                }
            });
            context::scope(env, statement).await
        });
        // The last line of defence: a bug that panics fails this statement, not the server.
        // What the transaction did before cannot be trusted any more, so it is rolled back
        // (releasing its locks) and the session goes on without it.
        let r = match AssertUnwindSafe(run).catch_unwind().await {
            Ok((r, warnings)) => {
                for (code, msg) in warnings {
                    self.warn(code, msg);
                }
                r
            }
            Err(panic) => {
                let e = panicked(&*panic);
                tracing::error!(conn = self.conn_id, error = %e, "statement panicked; rolling back its transaction");
                let _ = txn.rollback().await;
                self.finish_txn();
                self.explicit = false;
                return Err(e);
            }
        };
        txn.end_statement(r.is_ok());
        self.timing.lock += txn.lock_time().saturating_sub(locked_before);
        if single {
            let outcome = match r {
                Ok(v) => self.engine.commit_txn(*txn, self.schema_version).await.map(|_| v),
                Err(e) => {
                    let _ = txn.rollback().await;
                    Err(e)
                }
            };
            self.finish_txn();
            return outcome;
        }
        if matches!(r, Err(Error::Deadlock) | Err(Error::TxnRolledBack(_))) {
            let _ = txn.rollback().await;
            self.finish_txn();
            self.explicit = false;
        } else {
            self.txn = Some(txn);
        }
        r
    }

    async fn set(&mut self, set: &ast::Set) -> Result<QueryResult> {
        match set {
            ast::Set::SetNames { .. } | ast::Set::SetNamesDefault {} => Ok(QueryResult::ok(0)),
            ast::Set::SingleAssignment { variable, values, scope, .. } => {
                let v = values.first().ok_or_else(|| Error::parse("SET without value"))?;
                self.assign(scope.as_ref(), &variable.to_string(), v).await?;
                Ok(QueryResult::ok(0))
            }
            ast::Set::MultipleAssignments { assignments } => {
                for a in assignments {
                    self.assign(a.scope.as_ref(), &a.name.to_string(), &a.value).await?;
                }
                Ok(QueryResult::ok(0))
            }
            ast::Set::SetTransaction { modes, .. } => {
                for m in modes {
                    if let ast::TransactionMode::IsolationLevel(level) = m {
                        let name =
                            isolation_name(&level.to_string()).ok_or_else(|| Error::parse("bad isolation level"))?;
                        self.note_isolation(&level.to_string(), name);
                        self.vars_mut().insert("transaction_isolation".into(), Value::str(name));
                        self.vars_mut().insert("tx_isolation".into(), Value::str(name));
                    }
                }
                Ok(QueryResult::ok(0))
            }
            ast::Set::SetTimeZone { .. } => Ok(QueryResult::ok(0)),
            other => Err(Error::unsupported(format!("{other}"))),
        }
    }

    /// A system variable's value as this session sees it: global-only variables from the
    /// server's globals, the rest from the session.
    /// A global-only system variable's value now (the connection layer reads
    /// `max_connections` and `connect_timeout` through it, so SET GLOBAL applies at once).
    pub fn global_var(&self, name: &str) -> Option<Value> {
        self.engine.globals().get(name).cloned()
    }

    fn sysvar(&self, name: &str) -> Option<Value> {
        match variables::scope(name) {
            variables::Scope::Global => self.engine.globals().get(name).cloned(),
            _ => self.vars.get(name).cloned(),
        }
    }

    /// The session's variables with global-only ones at their global values (SHOW
    /// [SESSION] VARIABLES).
    fn visible_vars(&self) -> BTreeMap<String, Value> {
        let globals = self.engine.globals();
        let mut vars = (*self.vars).clone();
        for (k, v) in globals.iter() {
            if variables::scope(k) == variables::Scope::Global {
                vars.insert(k.clone(), v.clone());
            }
        }
        vars
    }

    async fn assign(&mut self, scope: Option<&ast::ContextModifier>, name: &str, value: &ast::Expr) -> Result<()> {
        let raw = name.trim();
        let lname = raw.to_ascii_lowercase();
        // Evaluate the value: identifiers like ON/OFF/utf8mb4 are words, not columns; `@v`
        // and `@@v` (the parser's identifiers too) are variables, read by the binder.
        let v = match value {
            ast::Expr::Identifier(id) if id.quote_style.is_none() && !id.value.starts_with('@') => {
                Value::str(id.value.clone())
            }
            other => {
                let info = self.info();
                let mut binder = Binder::new(&self.engine.catalog, &info);
                let e = binder.expr(other, &crate::binder::Scope::default())?;
                let subs = binder.take_subqueries()?;
                if subs.is_empty() {
                    let ctx = crate::expr::EvalCtx { params: &[], outer: &[], subqueries: &Default::default() };
                    e.eval(&[], &ctx)?
                } else {
                    return Err(Error::unsupported("SET with a subquery"));
                }
            }
        };
        if let Some(user) = lname.strip_prefix('@').filter(|n| !n.starts_with('@')) {
            Arc::make_mut(&mut self.user_vars).insert(user.to_string(), v);
            return Ok(());
        }
        let var = lname.trim_start_matches("@@");
        let global = matches!(scope, Some(ast::ContextModifier::Global))
            || var.starts_with("global.")
            || var.starts_with("global ");
        let var = var
            .strip_prefix("session.")
            .or_else(|| var.strip_prefix("global."))
            .or_else(|| var.strip_prefix("local."))
            .unwrap_or(var);
        let var =
            var.strip_prefix("session ").or_else(|| var.strip_prefix("global ")).unwrap_or(var).trim().to_string();
        if variables::is_read_only(&var) {
            return Err(Error::user(
                Code::IncorrectGlobalLocalVar,
                format!("Variable '{var}' is a read only variable"),
            ));
        }
        match (global, variables::scope(&var)) {
            (true, variables::Scope::Session) => {
                return Err(Error::user(
                    Code::LocalVariable,
                    format!("Variable '{var}' is a SESSION variable and can't be used with SET GLOBAL"),
                ))
            }
            (false, variables::Scope::Global) => {
                return Err(Error::user(
                    Code::GlobalVariable,
                    format!("Variable '{var}' is a GLOBAL variable and should be set with SET GLOBAL"),
                ))
            }
            (true, _) => {
                // The server-wide value: what new sessions start with (and what every session
                // reads for a global-only variable); this session's own value is unchanged.
                // Not persisted across a restart, as in MySQL (no SET PERSIST).
                if !self.allowed_global(crate::users::privs::SUPER) {
                    return Err(crate::users::specific_denied("SUPER or SYSTEM_VARIABLES_ADMIN"));
                }
                // Validated (and normalized) as a session SET would be, on a scratch copy.
                let scratch = self.vars.clone();
                let saved = std::mem::replace(&mut self.vars, scratch);
                let checked = self.assign_session(&var, v, false).await;
                let values = std::mem::replace(&mut self.vars, saved);
                checked?;
                let keys: &[&str] = match var.as_str() {
                    "transaction_isolation" | "tx_isolation" => &["transaction_isolation", "tx_isolation"],
                    _ => &[var.as_str()],
                };
                for key in keys {
                    if let Some(v) = values.get(*key) {
                        self.engine.set_global_default(key, v.clone());
                    }
                }
                return Ok(());
            }
            (false, _) => {}
        }
        self.assign_session(&var, v, true).await
    }

    /// Validates and sets a session variable; `effects` runs what setting it does beyond
    /// the value (committing on autocommit=1, isolation notes).
    async fn assign_session(&mut self, var: &str, v: Value, effects: bool) -> Result<()> {
        let var = var.to_string();
        let text = value_text(&v);
        match var.as_str() {
            "autocommit" => {
                let on = switch(&var, &text)?;
                if effects && on && !self.autocommit() {
                    self.commit().await?;
                }
                self.vars_mut().insert(var, Value::Int(on as i64));
            }
            "transaction_isolation" | "tx_isolation" => {
                let name = isolation_name(&text).ok_or_else(|| {
                    Error::user(
                        Code::WrongValueForVar,
                        format!("Variable '{var}' can't be set to the value of '{text}'"),
                    )
                })?;
                if effects {
                    self.note_isolation(&text, name);
                }
                self.vars_mut().insert("transaction_isolation".into(), Value::str(name));
                self.vars_mut().insert("tx_isolation".into(), Value::str(name));
            }
            "tidb_txn_mode" => {
                let mode = match text.to_ascii_lowercase().as_str() {
                    "optimistic" => "optimistic",
                    "pessimistic" | "" => "pessimistic",
                    _ => {
                        return Err(Error::user(
                            Code::WrongValueForVar,
                            format!("Variable 'tidb_txn_mode' can't be set to the value of '{text}'"),
                        ))
                    }
                };
                self.vars_mut().insert(var, Value::str(mode));
            }
            "optimizer_trace" => {
                let current = crate::optimizer_trace::Flags::parse(
                    &self.vars.get("optimizer_trace").map(value_text).unwrap_or_default(),
                );
                let flags = crate::optimizer_trace::Flags::set(current, &text)?;
                self.vars_mut().insert(var, Value::str(flags.render()));
            }
            "tidb_enable_prepared_plan_cache"
            | "tidb_ignore_prepared_cache_close_stmt"
            | "tidb_enable_non_prepared_plan_cache" => {
                let on = switch(&var, &text)?;
                if !on && var == "tidb_enable_prepared_plan_cache" {
                    self.plan_cache.lock().clear();
                }
                self.vars_mut().insert(var, Value::Int(i64::from(on)));
            }
            "tidb_prepared_plan_cache_size" => {
                let n = v.as_i64().filter(|n| (1..=100_000).contains(n)).ok_or_else(|| {
                    Error::user(
                        Code::WrongValueForVar,
                        format!("Variable 'tidb_prepared_plan_cache_size' can't be set to the value of '{text}'"),
                    )
                })?;
                self.vars_mut().insert(var, Value::Int(n));
            }
            "slow_query_log" | "tidb_enable_stmt_summary" | "tidb_rc_read_check_ts" | "tidb_enable_1pc" => {
                let on = switch(&var, &text)?;
                self.vars_mut().insert(var, Value::Int(i64::from(on)));
            }
            "slow_query_log_file" => {
                if v.is_null() || text.trim().is_empty() {
                    return Err(Error::user(
                        Code::WrongValueForVar,
                        format!("Variable '{var}' can't be set to the value of '{text}'"),
                    ));
                }
                self.vars_mut().insert(var, Value::str(text));
            }
            "long_query_time" => {
                let secs = match &v {
                    Value::Bytes(_) | Value::Null => None,
                    other => other.as_f64(),
                }
                .ok_or_else(|| {
                    Error::user(Code::WrongTypeForVar, "Incorrect argument type to variable 'long_query_time'")
                })?;
                // Out of range is cut to the range with a warning, as MySQL does.
                let clamped = secs.clamp(0.0, 31_536_000.0);
                if clamped != secs {
                    self.warn(
                        Code::TruncatedWrongValue,
                        format!("Truncated incorrect long_query_time value: '{text}'"),
                    );
                }
                self.vars_mut().insert(var, Value::Double(clamped));
            }
            "tidb_stmt_summary_refresh_interval"
            | "tidb_stmt_summary_history_size"
            | "tidb_stmt_summary_max_stmt_count"
            | "tidb_stmt_summary_max_sql_length"
            | "div_precision_increment" => {
                let n = v.as_i64().filter(|_| !matches!(v, Value::Bytes(_) | Value::Null)).ok_or_else(|| {
                    Error::user(Code::WrongTypeForVar, format!("Incorrect argument type to variable '{var}'"))
                })?;
                let (lo, hi) = match var.as_str() {
                    "tidb_stmt_summary_refresh_interval" => (1, i64::from(i32::MAX)),
                    "tidb_stmt_summary_history_size" => (0, 255),
                    "tidb_stmt_summary_max_stmt_count" => (1, 32_767),
                    "div_precision_increment" => (0, 30),
                    _ => (0, i64::from(i32::MAX)),
                };
                let clamped = n.clamp(lo, hi);
                if clamped != n {
                    self.warn(Code::TruncatedWrongValue, format!("Truncated incorrect {var} value: '{text}'"));
                }
                self.vars_mut().insert(var, Value::Int(clamped));
            }
            "optimizer_trace_max_mem_size" => {
                let n = v.as_i64().ok_or_else(|| {
                    Error::user(
                        Code::WrongTypeForVar,
                        "Incorrect argument type to variable 'optimizer_trace_max_mem_size'",
                    )
                })?;
                self.vars_mut().insert(var, Value::Int(n.max(0)));
            }
            "tidb_isolation_read_engines" => {
                let text = crate::column::ReadEngines::normalize(&text)?;
                self.vars_mut().insert(var, Value::str(text));
            }
            "innodb_lock_wait_timeout" => {
                let n = v.as_i64().filter(|n| *n >= 1).ok_or_else(|| {
                    Error::user(Code::WrongTypeForVar, "Incorrect argument type to variable 'innodb_lock_wait_timeout'")
                })?;
                self.vars_mut().insert(var, Value::Int(n));
            }
            _ => {
                if !self.vars.contains_key(&var) {
                    self.warn(
                        Code::UnknownSystemVariable,
                        format!("Unknown system variable '{var}' (accepted and ignored)"),
                    );
                }
                self.vars_mut().insert(var, v);
            }
        }
        Ok(())
    }
}

/// The value of an ON/OFF variable (1/0, ON/OFF, TRUE/FALSE), or MySQL's error 1231.
fn switch(var: &str, text: &str) -> Result<bool> {
    match text.to_ascii_lowercase().as_str() {
        "1" | "on" | "true" => Ok(true),
        "0" | "off" | "false" => Ok(false),
        _ => {
            Err(Error::user(Code::WrongValueForVar, format!("Variable '{var}' can't be set to the value of '{text}'")))
        }
    }
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The error a statement that panicked fails with (1105), carrying the panic's message.
pub fn panicked(payload: &(dyn std::any::Any + Send)) -> Error {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown cause".into());
    Error::internal(format!("the statement failed on a server bug ({msg}); its transaction was rolled back"))
}

fn truncate_sql(s: &str) -> String {
    s.chars().take(64).collect()
}

/// The statement's NOW(): wall-clock time for SQL functions (not for MVCC ordering).
pub(crate) fn now() -> DateTime {
    datetime_at(unix_micros_now())
}

/// Microseconds since the Unix epoch now.
pub(crate) fn unix_micros_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

/// The second `us` (microseconds since the Unix epoch) falls in, as a DATETIME.
pub(crate) fn datetime_at(us: i64) -> DateTime {
    let epoch = DateTime::from_ymd(1970, 1, 1).to_micros();
    let mut d = DateTime::from_micros(epoch + us);
    d.micro = 0;
    d
}

/// What [`Session::run_in_txn_once`] runs.
enum Work<'a> {
    /// A query or DML statement with its parameters (and where a query's rows stream to).
    Statement(&'a ast::Statement, &'a [Value], Option<&'a mut dyn ResultSink>),
    /// LOAD DATA from a source; the user variables it sets go to the vector.
    Load(&'a crate::load::LoadSpec, &'a mut dyn crate::load::FileSource, &'a mut Vec<(String, Value)>),
}

/// A sink that notes whether anything went through it.
struct Watched<'a> {
    sink: &'a mut dyn ResultSink,
    started: bool,
}

#[async_trait::async_trait]
impl ResultSink for Watched<'_> {
    async fn columns(&mut self, columns: &ResultColumns) -> Result<()> {
        self.started = true;
        self.sink.columns(columns).await
    }

    async fn rows(&mut self, columns: &[Column], rows: &[crate::expr::Row]) -> Result<()> {
        self.sink.rows(columns, rows).await
    }
}

/// Runs a query or DML statement inside `txn`; a query's rows stream to `sink` when there
/// is one.
pub async fn exec_statement(
    engine: &Engine,
    txn: &mut Transaction,
    info: &SessionInfo,
    stmt: &ast::Statement,
    params: &[Value],
    sink: Option<&mut dyn ResultSink>,
) -> Result<QueryResult> {
    let dml = DmlCtx { catalog: &engine.catalog, session: info, params };
    match stmt {
        ast::Statement::Query(q) => {
            let query = plan_query_cached(engine, info, q, params)?;
            let query = &*query;
            let mut ctx = ExecCtx::new(txn, params, query.subqueries.clone());
            let columns = query.result_columns();
            // sql_select_limit caps a top-level SELECT without its own LIMIT (MySQL).
            let own_limit = q.limit_clause.is_some() || q.fetch.is_some();
            let cap = info.select_limit.filter(|_| !own_limit);
            let mut out = QueryOutput::new(columns, sink, cap);
            // A point get reads the row store whenever the session allows it (TiDB's
            // PointGet): the engine choice and replica routing are not worked out for it.
            // Keys its values cannot make (None) leave the plan to the general executor.
            if info.read_engines.is_none_or(|e| e.row) {
                if let Some(get) = crate::exec::PointGet::of(&query.plan) {
                    if let Some(rows) = get.run(&mut ctx).await? {
                        out.push(rows).await?;
                        return out.finish().await;
                    }
                }
            }
            if let Some(column) = column_engine_for(engine, info, query) {
                let mut source = crate::column::ScanSource::new(&mut ctx);
                if Box::pin(column.run(query, &mut source, &mut out)).await? {
                    context::count_reads(context::Read::Columnar, 1);
                    return out.finish().await;
                }
                context::count_reads(context::Read::ColumnarFallback, 1);
            }
            ctx.replica_scans = replica_scans_for(engine, info, query);
            // Boxed, as the other engines' runs above: the statement's future is moved
            // whole as it starts (a copy of every byte it may hold), and a point get needs
            // none of theirs.
            Box::pin(crate::exec::execute_into(&query.plan, &mut ctx, &mut out)).await?;
            out.finish().await
        }
        ast::Statement::Explain { statement, .. } => match statement.as_ref() {
            ast::Statement::Query(q) => Box::pin(explain_analyze(engine, txn, info, q, params)).await,
            _ => Err(Error::unsupported("EXPLAIN ANALYZE of a statement other than a query")),
        },
        ast::Statement::Insert(_) | ast::Statement::Update(_) | ast::Statement::Delete(_)
            if info.plan_cache.is_some() =>
        {
            let plan = plan_cached(engine, info, || match stmt {
                ast::Statement::Insert(ins) => {
                    dml.plan_insert(ins).map(|(p, why)| (Some(CachedPlan::Insert(Arc::new(p))), why))
                }
                ast::Statement::Update(up) => {
                    dml.plan_update(up).map(|(p, why)| (p.map(|p| CachedPlan::Update(Arc::new(p))), why))
                }
                ast::Statement::Delete(del) => {
                    dml.plan_delete(del).map(|(p, why)| (p.map(|p| CachedPlan::Delete(Arc::new(p))), why))
                }
                _ => Ok((None, None)),
            })?;
            match (plan, stmt) {
                (Some(CachedPlan::Insert(p)), _) => Box::pin(dml.run_insert(txn, &p)).await,
                (Some(CachedPlan::Update(p)), _) => Box::pin(dml.run_update(txn, &p)).await,
                (Some(CachedPlan::Delete(p)), _) => Box::pin(dml.run_delete(txn, &p)).await,
                // Multi-table UPDATE and DELETE are bound as they run.
                (_, ast::Statement::Update(up)) => Box::pin(dml.update(txn, up)).await,
                (_, ast::Statement::Delete(del)) => Box::pin(dml.delete(txn, del)).await,
                _ => Err(Error::internal("a DML statement planned as something else")),
            }
        }
        // Boxed: DML's futures are deep, and the statement future holds them all.
        ast::Statement::Insert(ins) => Box::pin(dml.insert(txn, ins)).await,
        ast::Statement::Update(up) => Box::pin(dml.update(txn, up)).await,
        ast::Statement::Delete(del) => Box::pin(dml.delete(txn, del)).await,
        other => Err(Error::unsupported(truncate_sql(&other.to_string()))),
    }
}

/// The plan of an execution of a prepared statement (`info.plan_cache` is its slot): from
/// the session's plan cache when one is cached and current (one statement text plans to
/// one kind of `CachedPlan`), else made by `plan` — which also says why it must not be
/// cached, if so (a warning then tells the client, as TiDB's does) — and cached. A `plan`
/// of None (a statement bound only as it runs) is neither cached nor warned about.
fn plan_cached(
    engine: &Engine,
    info: &SessionInfo,
    plan: impl FnOnce() -> Result<(Option<CachedPlan>, Option<String>)>,
) -> Result<Option<CachedPlan>> {
    let compiling = std::time::Instant::now();
    let spent = || {
        let nanos = u64::try_from(compiling.elapsed().as_nanos()).unwrap_or(u64::MAX);
        info.compile_nanos.fetch_add(nanos, Ordering::Relaxed);
    };
    let stats_version = engine.catalog.stats_version();
    if let Some(slot) = &info.plan_cache {
        if let Some(found) = slot.cache.lock().get(&slot.key, slot.schema_version, stats_version) {
            slot.hit.store(true, Ordering::Relaxed);
            engine.metrics.plan_cache_hits.fetch_add(1, Ordering::Relaxed);
            spent();
            return Ok(Some(found));
        }
        engine.metrics.plan_cache_misses.fetch_add(1, Ordering::Relaxed);
    }
    let planned = plan();
    spent();
    let (planned, uncacheable) = match planned {
        Ok(p) => p,
        Err(e) => {
            if let Some(slot) = &info.plan_cache {
                slot.failed.store(true, Ordering::Relaxed);
            }
            return Err(e);
        }
    };
    if let Some(slot) = &info.plan_cache {
        match (&planned, uncacheable) {
            (Some(p), None) => {
                slot.cache.lock().put(slot.key.clone(), p.clone(), slot.schema_version, stats_version, slot.capacity)
            }
            // A text statement did not ask for a cache: it is not told why it has none.
            (_, _) if slot.text => slot.refused.store(true, Ordering::Relaxed),
            (Some(_), Some(why)) => context::warn(Code::UnknownError, format!("skip prepared plan-cache: {why}")),
            (None, _) => {}
        }
    }
    Ok(planned)
}

/// The plan of query `q`: from the session's plan cache when the statement is an execution
/// of a prepared statement whose plan is cached and current, else planned (and cached
/// when nothing in it holds a value of the moment; otherwise a warning says why not).
fn plan_query_cached(
    engine: &Engine,
    info: &SessionInfo,
    q: &ast::Query,
    params: &[Value],
) -> Result<Arc<crate::plan::Query>> {
    let planned = plan_cached(engine, info, || {
        let mut binder = Binder::new(&engine.catalog, info);
        binder.params = params;
        let query = binder.plan_query(q)?;
        Ok((Some(CachedPlan::Query(Arc::new(query))), binder.uncacheable.take()))
    })?;
    match planned {
        Some(CachedPlan::Query(q)) => Ok(q),
        _ => Err(Error::internal("a query planned as something else")),
    }
}

/// EXPLAIN ANALYZE: runs `q` on the engine the optimizer chooses and shows the plan it ran
/// with what each operator did — DataFusion's metrics on the column engine; on the row
/// engine each operator's estimated rows (per run) and its actual rows, runs and time (its
/// inputs' included) — then the result's row count, the time and the engine choice.
async fn explain_analyze(
    engine: &Engine,
    txn: &mut Transaction,
    info: &SessionInfo,
    q: &ast::Query,
    params: &[Value],
) -> Result<QueryResult> {
    let mut binder = Binder::new(&engine.catalog, info);
    binder.params = params;
    let query = binder.plan_query(q)?;
    let (column, costs) = choose_engine(engine, info, &query);
    let mut ctx = ExecCtx::new(txn, params, query.subqueries.clone());
    let mut lines = None;
    if let Some(column) = column {
        let mut source = crate::column::ScanSource::new(&mut ctx);
        lines = column.run_analyzed(&query, &mut source).await?;
    }
    let mut lines = match lines {
        Some(l) => l,
        None => {
            ctx.replica_scans = replica_scans_for(engine, info, &query);
            ctx.profile = Some(HashMap::new());
            let started = std::time::Instant::now();
            let count = execute(&query.plan, &mut ctx).await?.into_vec().len();
            let elapsed = started.elapsed();
            let profile = ctx.profile.take().unwrap_or_default();
            let note = |p: &crate::plan::Plan| {
                let est = crate::cost::estimated_rows(p, &query.subqueries, &engine.catalog)
                    .map_or("?".to_string(), |r| format!("{r:.0}"));
                match profile.get(&(p as *const crate::plan::Plan as usize)) {
                    Some(op) => format!(
                        " (estRows:{est} actRows:{} runs:{} time:{:.3}ms)",
                        op.rows,
                        op.runs,
                        op.time.as_secs_f64() * 1e3
                    ),
                    None => format!(" (estRows:{est} not run)"),
                }
            };
            let scans = ctx.replica_scans.as_ref().map(|(_, s)| s);
            let mut lines = row_plan_lines(&query, scans, &note);
            lines.push(format!("Rows: {count}, execution time: {:.3} ms", elapsed.as_secs_f64() * 1e3));
            lines
        }
    };
    lines.extend(costs.map(|c| c.explain_line()));
    Ok(plan_result(lines))
}

/// EXPLAIN's lines for the row engine's plan of `query`: the plan, its subqueries, and the
/// scans that read columnar replicas (`scans`, by plan node); `note` adds to each
/// operator's line (EXPLAIN ANALYZE's figures).
fn row_plan_lines(
    query: &crate::plan::Query,
    scans: Option<&std::collections::HashSet<usize>>,
    note: &dyn Fn(&crate::plan::Plan) -> String,
) -> Vec<String> {
    let mut lines = Vec::new();
    query.plan.explain_with(0, &mut lines, note);
    for (i, s) in query.subqueries.iter().enumerate().filter(|(_, s)| !s.replaced) {
        lines.push(format!("Subquery {} ({})", i, if s.correlated { "correlated" } else { "uncorrelated" }));
        s.plan.explain_with(1, &mut lines, note);
    }
    if let Some(scans) = scans {
        let mut names: Vec<String> = query
            .plan
            .scans()
            .into_iter()
            .filter(|p| scans.contains(&(*p as *const crate::plan::Plan as usize)))
            .filter_map(|p| match p {
                crate::plan::Plan::Scan { table, .. } => Some(table.name.clone()),
                _ => None,
            })
            .collect();
        names.dedup();
        lines.push(format!("Scans reading columnar replicas: {}", names.join(", ")));
    }
    lines
}

/// EXPLAIN's result: one `plan` column, a row per line.
fn plan_result(lines: Vec<String>) -> QueryResult {
    QueryResult::text_rows(&["plan"], lines.into_iter().map(|l| vec![Value::str(l)]).collect())
}

/// The column engine that should try `query` first, under the session's
/// `tidb_isolation_read_engines`; None: the row engine runs it.
fn column_engine_for<'e>(
    engine: &'e Engine,
    info: &SessionInfo,
    query: &crate::plan::Query,
) -> Option<&'e Arc<dyn crate::column::ColumnEngine>> {
    choose_engine(engine, info, query).0
}

/// The row engine's scans of `query` that read columnar replicas (see
/// `cost::replica_scans`), when the session allows reading them (`tiflash` among
/// `tidb_isolation_read_engines`).
fn replica_scans_for(
    engine: &Engine,
    info: &SessionInfo,
    query: &crate::plan::Query,
) -> Option<(Arc<dyn crate::column::ColumnEngine>, std::collections::HashSet<usize>)> {
    let column = engine.column_engine.get()?;
    let engines = info.read_engines?;
    if !engines.column {
        return None;
    }
    let replica = |id: i64| column.replica(id).is_some_and(|r| r.available);
    let scans = crate::cost::replica_scans(query, &engine.catalog, &replica, &crate::cost::constant, like_share(info));
    (!scans.is_empty()).then(|| (column.clone(), scans))
}

/// `tidb_default_string_match_selectivity`: the share of rows the cost model lets a LIKE keep.
fn like_share(info: &SessionInfo) -> f64 {
    info.like_share
}

/// [`column_engine_for`], with the cost model's estimates when it was asked (both engines
/// allowed, a replica to read, statistics for every table): the row engine runs the query
/// when its plan is estimated cheaper.
fn choose_engine<'e>(
    engine: &'e Engine,
    info: &SessionInfo,
    query: &crate::plan::Query,
) -> (Option<&'e Arc<dyn crate::column::ColumnEngine>>, Option<crate::cost::EngineCosts>) {
    let Some(column) = engine.column_engine.get() else { return (None, None) };
    let Some(engines) = info.read_engines else {
        return (None, None);
    };
    if !engines.try_column(query, column.as_ref()) {
        return (None, None);
    }
    if !engines.row {
        return (Some(column), None);
    }
    let replica = |id: i64| column.replica(id).is_some_and(|r| r.available);
    let costs = crate::cost::estimate(query, &engine.catalog, &replica, &crate::cost::constant, like_share(info));
    match costs {
        Some(c) if c.row < c.column => (None, costs),
        _ => (Some(column), costs),
    }
}

/// The most words a pattern of `Session::special` names.
const SPECIAL_WORDS: usize = 5;

/// The statements of a multi-statement text, split at the semicolons outside quotes,
/// backquotes and comments (empty pieces dropped; comments stay with their statement).
fn split_statements(sql: &str) -> Vec<&str> {
    let b = sql.as_bytes();
    // Most texts hold no semicolon at all: one fast search instead of a walk over quotes.
    if !sql.contains(';') {
        return if sql.trim().is_empty() { Vec::new() } else { vec![sql] };
    }
    let mut out = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"' | b'`') => {
                i += 1;
                while i < b.len() {
                    if b[i] == b'\\' && q != b'`' {
                        i += 2;
                        continue;
                    }
                    if b[i] == q {
                        // A doubled quote is one quote character.
                        if b.get(i + 1) == Some(&q) {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'-' if b.get(i + 1) == Some(&b'-') && b.get(i + 2).is_none_or(|c| c.is_ascii_whitespace()) => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                i += 2;
            }
            b';' => {
                out.push(&sql[start..i]);
                i += 1;
                start = i;
            }
            _ => i += 1,
        }
    }
    out.push(&sql[start.min(sql.len())..]);
    out.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// Names of the CTEs a statement defines (lower case): relations by these names are not
/// tables.
fn cte_names(stmt: &ast::Statement) -> Vec<String> {
    use sqlparser::ast::{Visit, Visitor};
    struct Ctes(Vec<String>);
    impl Visitor for Ctes {
        type Break = ();
        fn pre_visit_query(&mut self, q: &ast::Query) -> std::ops::ControlFlow<()> {
            if let Some(w) = &q.with {
                self.0.extend(w.cte_tables.iter().map(|c| c.alias.name.value.to_ascii_lowercase()));
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut v = Ctes(Vec::new());
    let _ = stmt.visit(&mut v);
    v.0
}

/// MySQL's executable comments: `/*! text */` and `/*!NNNNN text */` run `text` (the version
/// number says since when; Strata claims 8.0, so every one runs). Returns `sql` with their
/// markers removed; quoted strings are left alone.
pub fn unwrap_executable_comments(sql: &str) -> std::borrow::Cow<'_, str> {
    if !sql.contains("/*!") {
        return std::borrow::Cow::Borrowed(sql);
    }
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    let mut i = 0;
    let mut quote: Option<u8> = None;
    let mut in_exec = false;
    let mut start = 0;
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(q) => {
                if c == b'\\' {
                    i += 2;
                    continue;
                }
                if c == q {
                    quote = None;
                }
            }
            None => {
                if c == b'\'' || c == b'"' || c == b'`' {
                    quote = Some(c);
                } else if !in_exec && sql[i..].starts_with("/*!") {
                    out.push_str(&sql[start..i]);
                    out.push(' ');
                    i += 3;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                    start = i;
                    in_exec = true;
                    continue;
                } else if in_exec && sql[i..].starts_with("*/") {
                    out.push_str(&sql[start..i]);
                    out.push(' ');
                    i += 2;
                    start = i;
                    in_exec = false;
                    continue;
                }
            }
        }
        i += 1;
    }
    out.push_str(&sql[start.min(sql.len())..]);
    std::borrow::Cow::Owned(out)
}

mod analyze;

#[cfg(test)]
mod comment_tests {
    use super::unwrap_executable_comments as u;

    #[test]
    fn executable_comments_run_their_text() {
        assert_eq!(
            u("START TRANSACTION /*!40100 WITH CONSISTENT SNAPSHOT */").split_whitespace().collect::<Vec<_>>(),
            ["START", "TRANSACTION", "WITH", "CONSISTENT", "SNAPSHOT"]
        );
        assert_eq!(u("/*!40101 SET NAMES utf8mb4 */").trim(), "SET NAMES utf8mb4");
        assert_eq!(u("SELECT '/*!1 x */'"), "SELECT '/*!1 x */'");
        assert_eq!(u("SELECT 1 /* plain */"), "SELECT 1 /* plain */");
    }
}

#[cfg(test)]
mod split_tests {
    use super::split_statements;

    #[test]
    fn statements_split_at_semicolons_outside_quotes_and_comments() {
        assert_eq!(
            split_statements("SET @@session.x=4; ANALYZE TABLE lineitem"),
            vec!["SET @@session.x=4", " ANALYZE TABLE lineitem"]
        );
        assert_eq!(
            split_statements("SELECT 'a;b', \"c;\", `d;e` FROM t; SELECT 'it''s;' ;"),
            vec!["SELECT 'a;b', \"c;\", `d;e` FROM t", " SELECT 'it''s;' "]
        );
        assert_eq!(
            split_statements("SELECT 1 -- a; comment\n; SELECT /* ; */ 2 # x;y\n"),
            vec!["SELECT 1 -- a; comment\n", " SELECT /* ; */ 2 # x;y\n"]
        );
        assert_eq!(split_statements("SELECT 'a\\';b'; SELECT 3"), vec!["SELECT 'a\\';b'", " SELECT 3"]);
        assert_eq!(split_statements("SELECT 1;;  ; "), vec!["SELECT 1"]);
        assert_eq!(split_statements(" SELECT 1 "), vec![" SELECT 1 "]);
        assert_eq!(split_statements(" \n "), Vec::<&str>::new());
        assert_eq!(split_statements("SELECT 1--2;SELECT 2"), vec!["SELECT 1--2", "SELECT 2"]);
    }
}

#[cfg(test)]
mod future_size_tests {
    use super::*;
    use strata_mvcc::{LocalClient, LocalOracle, MvccStore, SystemClock};
    use strata_storage::MemoryEngine;

    /// Every statement's future is moved (copied whole) at each layer it passes through:
    /// the connection's dispatch, the session's entry points, the transaction retry loop and
    /// the statement scopes. Statement execution is boxed below those layers, so the futures
    /// a point query crosses stay a few KiB; an unboxed statement future here once made them
    /// 100+ KiB, and copying them was 8% of the server's CPU under sysbench point selects.
    #[test]
    fn a_statement_entry_future_stays_small() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let kv = Arc::new(MemoryEngine::new());
            let client: Arc<dyn Client> =
                Arc::new(LocalClient::new(Arc::new(MvccStore::open(kv.clone()).expect("store")), false));
            let oracle: Arc<dyn Oracle> = Arc::new(LocalOracle::open(kv, Arc::new(SystemClock)).expect("oracle"));
            let engine = Engine::open(client, oracle).await.expect("engine");
            let mut s = engine.session("root");
            let prepared = std::mem::size_of_val(&s.execute_prepared_with(1, &[], None));
            let text = std::mem::size_of_val(&s.execute_text("SELECT 1", false));
            let stmt = Parser::parse_sql(&MySqlDialect {}, "SELECT 1").expect("parse").remove(0);
            let once = std::mem::size_of_val(&s.run_in_txn_once(Work::Statement(&stmt, &[], None)));
            assert!(prepared <= 16 << 10, "execute_prepared_with's future is {prepared} bytes");
            assert!(text <= 24 << 10, "execute_text's future is {text} bytes");
            assert!(once <= 8 << 10, "run_in_txn_once's future is {once} bytes");
        });
    }
}
