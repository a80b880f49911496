//! The catalog: databases, tables, columns and indexes. It is stored in the KV store under
//! meta keys (written in the same transactional way as data, so a DDL is durable and atomic)
//! and cached in memory for planning. Names are case-insensitive, as in TiDB.
//!
//! Limitation: DDL here is a single transaction applied to the local cache; the online
//! schema-change protocol that lets several SQL nodes change schemas under load comes with
//! the cluster.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use strata_codec::keys::prefix_end;
use strata_codec::Key;
use strata_common::{Code, Error, IndexId, Result, TableId, Value};
use strata_kv::{Client, LockMode, Oracle};
use strata_txn::{Isolation, Transaction, TxnOptions};

use crate::stats::TableStats;
use crate::types::ColumnType;

/// A column default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum DefaultValue {
    /// DEFAULT NULL.
    Null,
    /// A literal, kept as text and converted to the column type when used.
    Text(String),
    /// DEFAULT CURRENT_TIMESTAMP.
    CurrentTimestamp,
}

/// A column.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColumnInfo {
    /// Stable id used in the row format.
    pub id: u32,
    /// Name as written.
    pub name: String,
    /// Type.
    pub ty: ColumnType,
    /// Whether NULL is allowed.
    pub nullable: bool,
    /// Default, if declared.
    pub default: Option<DefaultValue>,
    /// AUTO_INCREMENT.
    pub auto_increment: bool,
    /// ON UPDATE CURRENT_TIMESTAMP.
    pub on_update_now: bool,
    /// UNSIGNED on a DECIMAL, FLOAT or DOUBLE column (integer types carry it in `ty`):
    /// negative values are out of range.
    #[serde(default)]
    pub unsigned: bool,
    /// A generated column's expression (`ddl::check_text` form) and whether it is STORED
    /// (VIRTUAL ones are computed and kept the same way; only SHOW tells them apart).
    #[serde(default)]
    pub generated: Option<(String, bool)>,
}

#[cfg(test)]
impl ColumnInfo {
    /// A signed integer column of `bytes` bytes with no default (unit tests' tables).
    pub(crate) fn test_int(id: u32, name: &str, bytes: u8, nullable: bool) -> ColumnInfo {
        ColumnInfo {
            id,
            name: name.into(),
            ty: crate::types::ColumnType::Int { bytes, unsigned: false },
            nullable,
            default: None,
            auto_increment: false,
            on_update_now: false,
            unsigned: false,
            generated: None,
        }
    }
}

impl ColumnInfo {
    /// Converts `v` for storage in this column (strict mode), as `ColumnType::coerce` does,
    /// refusing negative values in an UNSIGNED DECIMAL/FLOAT/DOUBLE column (1264).
    pub fn coerce(&self, v: Value) -> Result<Value> {
        let c = self.ty.coerce(v, &self.name)?;
        if self.unsigned && c.as_f64().is_some_and(|f| f < 0.0) {
            return Err(Error::user(
                Code::DataOutOfRange,
                format!("Out of range value for column '{}' at row 1", self.name),
            ));
        }
        Ok(c)
    }

    /// The column's type as SHOW CREATE TABLE prints it.
    pub fn type_name(&self) -> String {
        if self.unsigned {
            format!("{} unsigned", self.ty.sql_name())
        } else {
            self.ty.sql_name()
        }
    }
}

/// An index (the primary key is described by `TableInfo::pk`, not here).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexInfo {
    /// Id, unique within the table.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Offsets of the indexed columns in `TableInfo::columns`.
    pub columns: Vec<usize>,
    /// UNIQUE.
    pub unique: bool,
    /// Schema-change state: a new index is written by DML before any read uses it.
    #[serde(default)]
    pub state: IndexState,
}

/// States of an index while it is added (F1-style online schema change, simplified for one
/// node: the commit-time schema check replaces the lease wait).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum IndexState {
    /// Maintained by writes and used by reads.
    #[default]
    Public,
    /// Maintained by writes, invisible to reads, being backfilled.
    WriteOnly,
}

impl IndexInfo {
    /// Whether reads may use the index.
    pub fn is_public(&self) -> bool {
        self.state == IndexState::Public
    }
}

/// A table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableInfo {
    /// Id, never reused.
    pub id: i64,
    /// Database name.
    pub db: String,
    /// Table name.
    pub name: String,
    /// Columns in order.
    pub columns: Vec<ColumnInfo>,
    /// Offsets of the primary key columns; `None` means a hidden row id is the key.
    pub pk: Option<Vec<usize>>,
    /// Secondary and unique indexes.
    pub indexes: Vec<IndexInfo>,
    /// Next column id.
    pub next_column_id: u32,
    /// Next index id.
    pub next_index_id: i64,
    /// CHECK constraints, enforced on every written row.
    #[serde(default)]
    pub checks: Vec<CheckInfo>,
    /// The columnar replica wanted (`ALTER TABLE .. SET TIFLASH REPLICA n`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columnar_replica: Option<crate::replica::ReplicaSetting>,
    /// `ALTER TABLE .. CACHE`: reads are answered from a copy in memory
    /// (`crate::cached_table`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
}

/// A CHECK constraint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckInfo {
    /// Name (`{table}_chk_{n}` unless given).
    pub name: String,
    /// The expression as SQL text (`crate::ddl::check_text`), re-bound per statement.
    pub expr: String,
    /// NOT ENFORCED constraints are kept but not checked.
    pub enforced: bool,
}

impl TableInfo {
    /// The table id.
    pub fn table_id(&self) -> TableId {
        TableId(self.id)
    }

    /// Finds a column offset by name (case-insensitive).
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// The AUTO_INCREMENT column, if any.
    pub fn auto_increment_column(&self) -> Option<usize> {
        self.columns.iter().position(|c| c.auto_increment)
    }

    /// Finds an index by name.
    pub fn index(&self, name: &str) -> Option<&IndexInfo> {
        self.indexes.iter().find(|i| i.name.eq_ignore_ascii_case(name))
    }

    /// The index id as a newtype.
    pub fn index_id(index: &IndexInfo) -> IndexId {
        IndexId(index.id)
    }
}

/// A database.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DatabaseInfo {
    /// Name as written.
    pub name: String,
}

/// A view: a stored query that reads as a table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ViewInfo {
    /// Database.
    pub db: String,
    /// Name as written.
    pub name: String,
    /// Column names given in the definition (empty: the query's own names).
    pub columns: Vec<String>,
    /// The query, as SQL text; names in it without a database refer to `db`.
    pub query: String,
    /// `user`@`host` whose privileges the view runs with (SQL SECURITY DEFINER).
    pub definer: String,
    /// DEFINER or INVOKER.
    pub security: String,
    /// UNDEFINED, MERGE or TEMPTABLE (kept for SHOW CREATE VIEW).
    pub algorithm: String,
    /// `WITH [CASCADED | LOCAL] CHECK OPTION`: NONE, CASCADED or LOCAL.
    pub check_option: String,
}

#[derive(Clone)]
struct Db {
    info: DatabaseInfo,
    tables: BTreeMap<String, Arc<TableInfo>>,
    views: BTreeMap<String, Arc<ViewInfo>>,
}

/// The schema at one moment: every database and its tables. Immutable once published; a
/// schema change publishes a new one (copy on write), so a transaction can keep binding
/// against the schema its snapshot was taken under (`Catalog::pin`).
#[derive(Clone, Default)]
pub struct Schema {
    dbs: BTreeMap<String, Db>,
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tables: usize = self.dbs.values().map(|d| d.tables.len()).sum();
        write!(f, "Schema({} databases, {tables} tables)", self.dbs.len())
    }
}

impl Schema {
    /// Looks up a table.
    pub fn table(&self, db: &str, name: &str) -> Result<Arc<TableInfo>> {
        let d = self.dbs.get(&lower(db)).ok_or_else(|| Error::user(Code::BadDb, format!("Unknown database '{db}'")))?;
        d.tables
            .get(&lower(name))
            .cloned()
            .ok_or_else(|| Error::user(Code::NoSuchTable, format!("Table '{db}.{name}' doesn't exist")))
    }

    /// Looks up a table, None if missing.
    pub fn try_table(&self, db: &str, name: &str) -> Option<Arc<TableInfo>> {
        self.dbs.get(&lower(db)).and_then(|d| d.tables.get(&lower(name)).cloned())
    }

    /// Looks up a view, None if missing.
    pub fn try_view(&self, db: &str, name: &str) -> Option<Arc<ViewInfo>> {
        self.dbs.get(&lower(db)).and_then(|d| d.views.get(&lower(name)).cloned())
    }

    /// Every table of every database.
    pub fn all_tables(&self) -> Vec<Arc<TableInfo>> {
        self.dbs.values().flat_map(|d| d.tables.values().cloned()).collect()
    }
}

/// Per-table allocator of AUTO_INCREMENT values and hidden row ids, handing out ranges
/// reserved in the store so that restarts never reuse a value.
#[derive(Default)]
struct IdRange {
    next: i64,
    end: i64,
}

const ID_BATCH: i64 = 1000;

/// The node's DDL lock (`Catalog::ddl_lock`).
pub struct DdlGuard<'a> {
    _catalog: tokio::sync::MutexGuard<'a, ()>,
    _reorg: tokio::sync::RwLockWriteGuard<'a, ()>,
}

/// The catalog cache plus its persistence.
pub struct Catalog {
    client: Arc<dyn Client>,
    oracle: Arc<dyn Oracle>,
    /// The newest published schema.
    dbs: RwLock<Arc<Schema>>,
    /// Publishing a schema change (its commit and the swap of `dbs`) holds it exclusively;
    /// starting a transaction holds it shared across fetching the start timestamp and
    /// taking the schema, so the schema a transaction pins is exactly the one committed
    /// before its snapshot.
    publish: tokio::sync::RwLock<()>,
    ranges: Mutex<BTreeMap<(i64, bool), IdRange>>,
    /// Serializes changes of the catalog on this node (see `ddl_lock`).
    ddl: tokio::sync::Mutex<()>,
    /// Held shared by index backfills (CREATE INDEX) for their whole run and exclusively by
    /// every other DDL statement, so backfills of different indexes run side by side while
    /// no other DDL changes a table under them.
    reorg: tokio::sync::RwLock<()>,
    /// Bumped by every schema change.
    version: std::sync::atomic::AtomicU64,
    /// Table id -> version of its last schema change (this process's lifetime).
    changed: Mutex<std::collections::HashMap<i64, u64>>,
    /// Commits hold it shared across their schema check and 2PC; a schema change takes it
    /// exclusively once to wait out commits that passed the check under the old schema.
    pub commit_gate: tokio::sync::RwLock<()>,
    /// Statistics of analyzed tables, by table id (`crate::stats`).
    stats: RwLock<std::collections::HashMap<i64, Arc<TableStats>>>,
    /// Bumped whenever statistics change (plans chosen by them go stale).
    stats_version: std::sync::atomic::AtomicU64,
    /// Rows committed per table since its last analysis.
    pub modifications: crate::stats::Modifications,
}

fn meta_key(parts: &[&str]) -> Vec<u8> {
    Key::Meta(parts.join("/").into_bytes()).encode()
}

/// Where a table's statistics are kept.
fn stats_key(table: i64) -> Vec<u8> {
    meta_key(&["stats", &table.to_string()])
}

/// The record of a range scheduled for deletion: `delrange/{hex prefix}` -> prefix. It is
/// written in the same transaction as the schema change that orphans the data, so a crash
/// between the two cannot leak it, and removed once the data is gone.
fn delete_key(prefix: &[u8]) -> Vec<u8> {
    let hex: String = prefix.iter().map(|b| format!("{b:02x}")).collect();
    meta_key(&["delrange", &hex])
}

/// The record of a table being built by a table rebuild (`building/{hex prefix}`): if the
/// rebuild never finishes, its rows are deleted at the next start.
fn building_key(prefix: &[u8]) -> Vec<u8> {
    let hex: String = prefix.iter().map(|b| format!("{b:02x}")).collect();
    meta_key(&["building", &hex])
}

fn schedule_deletes(txn: &mut Transaction, prefixes: &[Vec<u8>]) {
    for p in prefixes {
        txn.put(delete_key(p), p.clone());
    }
}

fn lower(s: &str) -> String {
    s.to_ascii_lowercase()
}

fn json<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(v).map_err(|e| Error::internal(format!("catalog encode: {e}")))
}

fn from_json<'a, T: Deserialize<'a>>(b: &'a [u8]) -> Result<T> {
    serde_json::from_slice(b).map_err(|e| Error::internal(format!("catalog decode: {e}")))
}

fn ddl_txn_opts() -> TxnOptions {
    TxnOptions {
        mode: LockMode::Optimistic,
        isolation: Isolation::RepeatableRead,
        lock_wait_timeout_ms: 50_000,
        one_pc: true,
    }
}

impl Catalog {
    /// Loads the catalog from the store.
    pub async fn load(client: Arc<dyn Client>, oracle: Arc<dyn Oracle>) -> Result<Catalog> {
        let cat = Catalog {
            client,
            oracle,
            dbs: RwLock::new(Arc::new(Schema::default())),
            publish: tokio::sync::RwLock::new(()),
            ranges: Mutex::new(BTreeMap::new()),
            ddl: tokio::sync::Mutex::new(()),
            reorg: tokio::sync::RwLock::new(()),
            version: std::sync::atomic::AtomicU64::new(1),
            changed: Mutex::new(std::collections::HashMap::new()),
            commit_gate: tokio::sync::RwLock::new(()),
            stats: RwLock::new(std::collections::HashMap::new()),
            stats_version: std::sync::atomic::AtomicU64::new(1),
            modifications: Default::default(),
        };
        let txn = cat.begin().await?;
        let mut schema = Schema::default();
        let db_prefix = meta_key(&["db", ""]);
        for (_, v) in txn.scan(&db_prefix, &prefix_end(&db_prefix), usize::MAX).await? {
            let info: DatabaseInfo = from_json(&v)?;
            schema.dbs.insert(lower(&info.name), Db { info, tables: BTreeMap::new(), views: BTreeMap::new() });
        }
        let tbl_prefix = meta_key(&["tbl", ""]);
        for (_, v) in txn.scan(&tbl_prefix, &prefix_end(&tbl_prefix), usize::MAX).await? {
            let t: TableInfo = from_json(&v)?;
            if let Some(db) = schema.dbs.get_mut(&lower(&t.db)) {
                db.tables.insert(lower(&t.name), Arc::new(t));
            }
        }
        let view_prefix = meta_key(&["view", ""]);
        for (_, v) in txn.scan(&view_prefix, &prefix_end(&view_prefix), usize::MAX).await? {
            let v: ViewInfo = from_json(&v)?;
            if let Some(db) = schema.dbs.get_mut(&lower(&v.db)) {
                db.views.insert(lower(&v.name), Arc::new(v));
            }
        }
        let live: std::collections::HashSet<i64> =
            schema.dbs.values().flat_map(|d| d.tables.values().map(|t| t.id)).collect();
        let stats_prefix = meta_key(&["stats", ""]);
        for (_, v) in txn.scan(&stats_prefix, &prefix_end(&stats_prefix), usize::MAX).await? {
            // Statistics that no longer decode (an older format) are gathered again.
            if let Ok(st) = from_json::<TableStats>(&v) {
                if live.contains(&st.table_id) {
                    cat.stats.write().insert(st.table_id, Arc::new(st));
                }
            }
        }
        *cat.dbs.write() = Arc::new(schema);
        Ok(cat)
    }

    /// The statistics of a table, if it was analyzed.
    pub fn stats(&self, table: i64) -> Option<Arc<TableStats>> {
        self.stats.read().get(&table).cloned()
    }

    /// Stores a table's statistics (ANALYZE TABLE) and takes `modified_before`, the table's
    /// modification count when the analysis began, off that count: rows written while it
    /// ran count toward the next one.
    pub async fn put_stats(&self, stats: TableStats, modified_before: u64) -> Result<()> {
        let mut txn = self.begin().await?;
        txn.put(stats_key(stats.table_id), json(&stats)?);
        txn.commit().await?;
        self.modifications.take(stats.table_id, modified_before);
        self.stats.write().insert(stats.table_id, Arc::new(stats));
        self.stats_version.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// The statistics version: it changes whenever some table's statistics do.
    pub fn stats_version(&self) -> u64 {
        self.stats_version.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Forgets the statistics of tables that are gone, in `txn` and in the cache.
    fn drop_stats(&self, txn: &mut Transaction, tables: &[i64]) {
        for t in tables {
            if self.stats.write().remove(t).is_some() {
                self.stats_version.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                txn.delete(stats_key(*t));
            }
        }
    }

    async fn begin(&self) -> Result<Transaction> {
        Transaction::begin(self.client.clone(), self.oracle.clone(), ddl_txn_opts()).await
    }

    /// The newest published schema.
    pub fn schema(&self) -> Arc<Schema> {
        self.dbs.read().clone()
    }

    /// Runs `start` (which fetches a transaction's start timestamp) and returns with it the
    /// schema committed before that timestamp and its version: what the transaction binds
    /// its statements against.
    pub async fn pin<T>(&self, start: impl std::future::Future<Output = Result<T>>) -> Result<(T, Arc<Schema>, u64)> {
        // Uncontended (no schema change publishing or waiting to), the shared lock is one
        // atomic step; `read().await` queues behind a waiting writer as before.
        let _shared = match self.publish.try_read() {
            Ok(g) => g,
            Err(_) => self.publish.read().await,
        };
        let started = start.await?;
        Ok((started, self.dbs.read().clone(), self.version()))
    }

    /// Commits a schema change and publishes it: `change` edits a copy of the schema and
    /// returns the ids of the tables it changed (their versions are bumped). Both happen
    /// under the publish lock, so no transaction starts between them, and under the commit
    /// gate, so no user commit is between its schema check and its end meanwhile: one that
    /// checked before has finished (below this change's commit timestamp), one that checks
    /// after sees the bumped versions (8028 if it wrote a changed table).
    async fn commit_schema(
        &self,
        txn: Transaction,
        change: impl FnOnce(&mut Schema) -> Result<Vec<i64>>,
    ) -> Result<()> {
        let _exclusive = self.publish.write().await;
        let _no_commits = self.commit_gate.write().await;
        txn.commit().await?;
        let mut next = (**self.dbs.read()).clone();
        let changed = change(&mut next);
        *self.dbs.write() = Arc::new(next);
        let changed = changed?;
        for &id in &changed {
            self.mark_changed(id);
        }
        if changed.is_empty() {
            // A change of no table (a view, a database, a new table) still changes what
            // names resolve to: plans bound before it are stale (`crate::plan_cache`).
            self.version.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(())
    }

    /// Takes the node's DDL lock: DDL statements run one at a time, and not while an index
    /// backfill runs (`reorg_lock`).
    pub async fn ddl_lock(&self) -> DdlGuard<'_> {
        let reorg = self.reorg.write().await;
        DdlGuard { _catalog: self.ddl.lock().await, _reorg: reorg }
    }

    /// What a CREATE INDEX holds for its whole run: other index backfills may run beside it,
    /// no other DDL. It changes the catalog only under `catalog_lock`, taken after this.
    pub async fn reorg_lock(&self) -> tokio::sync::RwLockReadGuard<'_, ()> {
        self.reorg.read().await
    }

    /// Serializes one change of the catalog among statements holding `reorg_lock`.
    pub async fn catalog_lock(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.ddl.lock().await
    }

    /// The current schema version.
    pub fn version(&self) -> u64 {
        self.version.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Records a schema change of a table (by id).
    pub fn mark_changed(&self, table_id: i64) {
        let mut changed = self.changed.lock();
        let v = self.version.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        changed.insert(table_id, v);
    }

    /// Whether the table's schema changed after version `since`.
    pub fn changed_since(&self, table_id: i64, since: u64) -> bool {
        self.changed.lock().get(&table_id).is_some_and(|v| *v > since)
    }

    /// Waits until every commit that checked its schema before now has finished.
    pub async fn wait_for_commits(&self) {
        drop(self.commit_gate.write().await);
    }

    /// Database names.
    pub fn databases(&self) -> Vec<String> {
        self.dbs.read().dbs.values().map(|d| d.info.name.clone()).collect()
    }

    /// Whether a database exists.
    pub fn has_database(&self, name: &str) -> bool {
        self.dbs.read().dbs.contains_key(&lower(name))
    }

    /// Tables of a database (None if the database does not exist).
    pub fn tables(&self, db: &str) -> Option<Vec<Arc<TableInfo>>> {
        self.dbs.read().dbs.get(&lower(db)).map(|d| d.tables.values().cloned().collect())
    }

    /// Looks up a table in the newest schema.
    pub fn table(&self, db: &str, name: &str) -> Result<Arc<TableInfo>> {
        self.dbs.read().table(db, name)
    }

    /// Looks up a table in the newest schema, None if missing.
    pub fn try_table(&self, db: &str, name: &str) -> Option<Arc<TableInfo>> {
        self.dbs.read().try_table(db, name)
    }

    /// Looks up a view in the newest schema, None if missing.
    pub fn try_view(&self, db: &str, name: &str) -> Option<Arc<ViewInfo>> {
        self.dbs.read().try_view(db, name)
    }

    /// The views of a database.
    pub fn views(&self, db: &str) -> Vec<Arc<ViewInfo>> {
        self.dbs.read().dbs.get(&lower(db)).map(|d| d.views.values().cloned().collect()).unwrap_or_default()
    }

    /// Stores a view's definition (create or replace).
    pub async fn put_view(&self, view: ViewInfo) -> Result<()> {
        let mut txn = self.begin().await?;
        txn.put(meta_key(&["view", &lower(&view.db), &lower(&view.name)]), json(&view)?);
        self.commit_schema(txn, |s| {
            let db = s
                .dbs
                .get_mut(&lower(&view.db))
                .ok_or_else(|| Error::user(Code::BadDb, format!("Unknown database '{}'", view.db)))?;
            db.views.insert(lower(&view.name), Arc::new(view));
            Ok(Vec::new())
        })
        .await
    }

    /// Removes a view's definition.
    pub async fn remove_view(&self, db: &str, name: &str) -> Result<()> {
        let mut txn = self.begin().await?;
        txn.delete(meta_key(&["view", &lower(db), &lower(name)]));
        self.commit_schema(txn, |s| {
            if let Some(d) = s.dbs.get_mut(&lower(db)) {
                d.views.remove(&lower(name));
            }
            Ok(Vec::new())
        })
        .await
    }

    /// Creates a database.
    pub async fn create_database(&self, name: &str) -> Result<()> {
        let mut txn = self.begin().await?;
        txn.put(meta_key(&["db", &lower(name)]), json(&DatabaseInfo { name: name.to_string() })?);
        self.commit_schema(txn, |s| {
            let info = DatabaseInfo { name: name.to_string() };
            s.dbs.insert(lower(name), Db { info, tables: BTreeMap::new(), views: BTreeMap::new() });
            Ok(Vec::new())
        })
        .await
    }

    /// Drops a database and its tables' metadata; returns the dropped tables (whose data
    /// the caller deletes).
    pub async fn drop_database(&self, name: &str) -> Result<Vec<Arc<TableInfo>>> {
        let tables = self.tables(name).unwrap_or_default();
        let mut txn = self.begin().await?;
        txn.delete(meta_key(&["db", &lower(name)]));
        for t in &tables {
            txn.delete(meta_key(&["tbl", &lower(name), &lower(&t.name)]));
        }
        for v in self.views(name) {
            txn.delete(meta_key(&["view", &lower(name), &lower(&v.name)]));
        }
        let data: Vec<Vec<u8>> = tables.iter().map(|t| strata_codec::keys::table_prefix(t.table_id())).collect();
        schedule_deletes(&mut txn, &data);
        self.drop_stats(&mut txn, &tables.iter().map(|t| t.id).collect::<Vec<_>>());
        self.commit_schema(txn, |s| {
            s.dbs.remove(&lower(name));
            Ok(tables.iter().map(|t| t.id).collect())
        })
        .await?;
        Ok(tables)
    }

    /// Key ranges (by prefix) scheduled for deletion and not yet deleted.
    pub async fn pending_deletes(&self) -> Result<Vec<Vec<u8>>> {
        let txn = self.begin().await?;
        let prefix = meta_key(&["delrange", ""]);
        Ok(txn.scan(&prefix, &prefix_end(&prefix), usize::MAX).await?.into_iter().map(|(_, v)| v).collect())
    }

    /// Records that rows are being written under `prefix` for a table not yet published.
    pub async fn start_building(&self, prefix: &[u8]) -> Result<()> {
        let mut txn = self.begin().await?;
        txn.put(building_key(prefix), prefix.to_vec());
        txn.commit().await.map(drop)
    }

    /// Gives up a build: its rows are scheduled for deletion.
    pub async fn abandon_building(&self, prefix: &[u8]) -> Result<()> {
        let mut txn = self.begin().await?;
        txn.delete(building_key(prefix));
        schedule_deletes(&mut txn, &[prefix.to_vec()]);
        txn.commit().await.map(drop)
    }

    /// Builds a crash interrupted: each is abandoned (see `abandon_building`).
    pub async fn abandon_unfinished_builds(&self) -> Result<usize> {
        let txn = self.begin().await?;
        let prefix = meta_key(&["building", ""]);
        let found: Vec<Vec<u8>> =
            txn.scan(&prefix, &prefix_end(&prefix), usize::MAX).await?.into_iter().map(|(_, v)| v).collect();
        for p in &found {
            self.abandon_building(p).await?;
        }
        Ok(found.len())
    }

    /// Publishes a rebuilt table under its name, in one transaction: the new definition
    /// (built under `built`, a new table id) replaces the old one, whose rows (`old_rows`)
    /// are scheduled for deletion.
    pub async fn replace_table(&self, table: TableInfo, built: &[u8], old_rows: Vec<u8>) -> Result<()> {
        let mut txn = self.begin().await?;
        txn.put(meta_key(&["tbl", &lower(&table.db), &lower(&table.name)]), json(&table)?);
        txn.delete(building_key(built));
        schedule_deletes(&mut txn, &[old_rows]);
        self.drop_replaced_stats(&mut txn, &table);
        self.commit_table(txn, table).await
    }

    /// Marks the range under `prefix` deleted.
    pub async fn finish_delete(&self, prefix: &[u8]) -> Result<()> {
        let mut txn = self.begin().await?;
        txn.delete(delete_key(prefix));
        txn.commit().await.map(drop)
    }

    /// Allocates a new globally unique id (tables).
    pub async fn new_id(&self) -> Result<i64> {
        loop {
            let mut txn = self.begin().await?;
            let key = meta_key(&["next_id"]);
            let cur = match txn.get(&key).await? {
                Some(b) => {
                    i64::from_le_bytes(b.as_slice().try_into().map_err(|_| Error::internal("corrupt id counter"))?)
                }
                None => 100,
            };
            txn.put(key, (cur + 1).to_le_bytes().to_vec());
            match txn.commit().await {
                Ok(_) => return Ok(cur),
                Err(e) if e.is_retryable() => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Stores a table's definition (create or alter) and updates the cache.
    pub async fn put_table(&self, table: TableInfo) -> Result<()> {
        self.put_table_deleting(table, &[]).await
    }

    /// Stores a table's definition and, in the same transaction, schedules the key ranges
    /// under `deletes` (data the new definition no longer uses) for background deletion.
    pub async fn put_table_deleting(&self, table: TableInfo, deletes: &[Vec<u8>]) -> Result<()> {
        let mut txn = self.begin().await?;
        txn.put(meta_key(&["tbl", &lower(&table.db), &lower(&table.name)]), json(&table)?);
        schedule_deletes(&mut txn, deletes);
        self.drop_replaced_stats(&mut txn, &table);
        self.commit_table(txn, table).await
    }

    /// A definition stored under a new id (TRUNCATE, a rebuild) leaves the old id's
    /// statistics behind: they go.
    fn drop_replaced_stats(&self, txn: &mut Transaction, table: &TableInfo) {
        if let Some(old) = self.try_table(&table.db, &table.name).filter(|old| old.id != table.id) {
            self.drop_stats(txn, &[old.id]);
        }
    }

    /// Commits a transaction that stored `table`'s definition and publishes the definition
    /// (bumping the table's version: whoever binds afterwards sees the new definition).
    async fn commit_table(&self, txn: Transaction, table: TableInfo) -> Result<()> {
        self.commit_schema(txn, |s| {
            let id = table.id;
            let db = s
                .dbs
                .get_mut(&lower(&table.db))
                .ok_or_else(|| Error::user(Code::BadDb, format!("Unknown database '{}'", table.db)))?;
            let replaced = db.tables.insert(lower(&table.name), Arc::new(table));
            // A new id (TRUNCATE, a rebuild) changes the old one too: writes through the
            // old definition must not commit.
            Ok(std::iter::once(id).chain(replaced.map(|old| old.id).filter(|old| *old != id)).collect())
        })
        .await
    }

    /// Removes a table's definition and schedules its data (`deletes`) for background
    /// deletion, in one transaction.
    pub async fn remove_table(&self, db: &str, name: &str, deletes: &[Vec<u8>]) -> Result<()> {
        let mut txn = self.begin().await?;
        txn.delete(meta_key(&["tbl", &lower(db), &lower(name)]));
        schedule_deletes(&mut txn, deletes);
        if let Some(t) = self.try_table(db, name) {
            self.drop_stats(&mut txn, &[t.id]);
        }
        self.commit_schema(txn, |s| {
            let removed = s.dbs.get_mut(&lower(db)).and_then(|d| d.tables.remove(&lower(name)));
            Ok(removed.map(|t| t.id).into_iter().collect())
        })
        .await
    }

    /// The next AUTO_INCREMENT value (`row_id` = false) or hidden row id (true) of a table.
    pub async fn next_auto_id(&self, table: i64, row_id: bool) -> Result<i64> {
        {
            let mut ranges = self.ranges.lock();
            let r = ranges.entry((table, row_id)).or_default();
            if r.next < r.end {
                r.next += 1;
                return Ok(r.next - 1);
            }
        }
        let (start, end) = self.reserve(table, row_id, 0).await?;
        if start >= end {
            return Err(auto_id_exhausted());
        }
        let mut ranges = self.ranges.lock();
        let r = ranges.entry((table, row_id)).or_default();
        if r.next >= r.end || r.end < end {
            r.next = start.max(r.next);
            r.end = end;
        }
        r.next += 1;
        Ok(r.next - 1)
    }

    /// Notes an explicitly inserted AUTO_INCREMENT value so later automatic values exceed it.
    pub async fn rebase_auto_id(&self, table: i64, used: i64) -> Result<()> {
        {
            let mut ranges = self.ranges.lock();
            let r = ranges.entry((table, false)).or_default();
            if used < r.next {
                return Ok(());
            }
            if used < r.end {
                r.next = used + 1;
                return Ok(());
            }
        }
        // At the top of BIGINT the next automatic value fails (1467), as in MySQL.
        let after = used.saturating_add(1);
        let (start, end) = self.reserve(table, false, after).await?;
        let mut ranges = self.ranges.lock();
        let r = ranges.entry((table, false)).or_default();
        r.next = start.max(after);
        r.end = end;
        Ok(())
    }

    async fn reserve(&self, table: i64, row_id: bool, at_least: i64) -> Result<(i64, i64)> {
        let key = meta_key(&[if row_id { "rowid" } else { "autoid" }, &table.to_string()]);
        loop {
            let mut txn = self.begin().await?;
            let base = match txn.get(&key).await? {
                Some(b) => i64::from_le_bytes(b.as_slice().try_into().map_err(|_| Error::internal("corrupt auto id"))?),
                None => 1,
            };
            let start = base.max(at_least);
            let end = start.saturating_add(ID_BATCH);
            txn.put(key.clone(), end.to_le_bytes().to_vec());
            match txn.commit().await {
                Ok(_) => return Ok((start, end)),
                Err(e) if e.is_retryable() => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Forgets cached id ranges of a table (TRUNCATE resets AUTO_INCREMENT).
    pub async fn reset_auto_id(&self, table: i64) -> Result<()> {
        self.ranges.lock().retain(|(t, _), _| *t != table);
        let mut txn = self.begin().await?;
        txn.delete(meta_key(&["autoid", &table.to_string()]));
        txn.commit().await?;
        Ok(())
    }
}

/// The value a column takes when an INSERT does not give one.
pub fn default_value(col: &ColumnInfo, now: &Value) -> Result<Value> {
    match &col.default {
        Some(DefaultValue::Null) | None if col.nullable => Ok(Value::Null),
        Some(DefaultValue::Null) => Ok(Value::Null),
        Some(DefaultValue::Text(t)) => col.coerce(Value::str(t.clone())),
        Some(DefaultValue::CurrentTimestamp) => col.coerce(now.clone()),
        None => Err(Error::user(Code::NoDefaultForField, format!("Field '{}' doesn't have a default value", col.name))),
    }
}

/// 1467: the AUTO_INCREMENT sequence has no values left.
pub fn auto_id_exhausted() -> Error {
    Error::user(Code::AutoIncReadFailed, "Failed to read auto-increment value from storage engine")
}
