//! Cached tables: TiDB's `ALTER TABLE t CACHE` / `NOCACHE`. A small, rarely written table
//! (a lookup table: branches, currencies, configuration) is kept whole in the SQL layer's
//! memory, as the raw key-value pairs of its rows and index entries, and reads of it are
//! answered from there without touching the store.
//!
//! A copy is a snapshot of the table at a timestamp `L`. A reader at `R` may use it when
//! `L <= R` and nothing was committed to the table after `L`; the copy is dropped *before*
//! any transaction that wrote the table takes its commit timestamp, so that holds for
//! every copy present:
//!
//! ```text
//!  writer:  prewrite ── drop copy, writers += 1 ── commit ts C ── commit ── writers -= 1
//!  loader:  (writers == 0, version v) ── begin at L ── scan ── install if version still v
//!  reader:  read ts R ── copy present and L <= R ? read the copy : read the store
//! ```
//!
//! A reader looks for the copy after taking `R`. If a writer's `C <= R`, the writer took
//! `C` before the reader took `R`, so it had dropped the copy before the reader looked: the
//! reader finds none (or a later load, which includes the write). A load starts only with
//! no writer in flight and installs only if no writer came meanwhile (the version), so
//! it holds every commit before `L` and none after. This is TiDB's lease with the lease broken by the
//! writer instead of waited out: one process holds every copy, so the writer can reach
//! them all. (With several SQL nodes, copies need a lease in the cluster's metadata.)
//!
//! A reader whose transaction wrote the table itself, or that locks (`FOR UPDATE`, DML),
//! reads the store. After a write, the next reader starts a background load; until it is
//! installed reads go to the store. A copy is at most [`MAX_CACHED_BYTES`]; a larger table
//! cannot be cached (8242), and one that grew past it is read from the store, as is one
//! whose copy would take all copies past [`MAX_TOTAL_CACHED_BYTES`].
//!
//! Schema changes would leave a copy without a new index's entries, so DDL other than
//! NOCACHE is refused on a cached table (8242), as TiDB refuses it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use sqlparser::tokenizer::Token;
use strata_common::{Code, Error, Result, TableId, Timestamp};
use strata_kv::{Client, LockMode, Oracle};
use strata_txn::{Isolation, Transaction, TxnOptions};

use crate::grants::alter_table_head;

/// The most a cached table may hold (keys and values), TiDB's limit.
pub const MAX_CACHED_BYTES: usize = 64 << 20;

/// The most all copies together may hold: a copy that would pass it is not installed
/// (its table is read from the store until a write lets it load again).
pub const MAX_TOTAL_CACHED_BYTES: usize = 256 << 20;

/// Pairs read per scan while loading.
const LOAD_CHUNK: usize = 4096;

/// A parsed `ALTER TABLE [db.]t CACHE | NOCACHE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetCache {
    /// Database, if the name was qualified.
    pub db: Option<String>,
    /// Table name.
    pub table: String,
    /// CACHE (true) or NOCACHE.
    pub cache: bool,
}

/// Parses the statement; None when `sql` is not one.
pub fn parse(sql: &str) -> Option<Result<SetCache>> {
    let (mut p, db, table) = alter_table_head(sql, "CACHE")?;
    let cache = if p.eat_seq(&["CACHE"]) {
        true
    } else if p.eat_seq(&["NOCACHE"]) {
        false
    } else {
        return None; // some other ALTER TABLE: the SQL parser's
    };
    p.eat_token(&Token::SemiColon);
    Some(p.done().map(|_| SetCache { db, table, cache }))
}

/// 8242, TiDB's refusal of an operation on a cached table.
pub fn refused(what: &str) -> Error {
    Error::user(Code::OptOnCacheTable, format!("'{what}' is unsupported on cache tables."))
}

/// A table's rows and index entries at one timestamp.
#[derive(Debug)]
pub struct Snapshot {
    /// The timestamp it was read at.
    pub ts: Timestamp,
    pairs: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Bytes of keys and values held.
    bytes: usize,
}

impl Snapshot {
    /// Up to `limit` pairs of `[start, end)`, in key order.
    pub fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        if start >= end {
            return Vec::new();
        }
        let range = (std::ops::Bound::Included(start), std::ops::Bound::Excluded(end));
        self.pairs.range::<[u8], _>(range).take(limit).map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// The value at `key`.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.pairs.get(key).cloned()
    }
}

/// One cached table's state.
#[derive(Debug, Default)]
struct Entry {
    /// False while `ALTER TABLE .. CACHE` publishes the table's new definition (commits
    /// that started before it may still be running): nothing is loaded until then.
    enabled: bool,
    /// Bumped by every writer: a load started before a write is not installed.
    version: u64,
    /// Transactions between dropping the copy and finishing their commit.
    writers: usize,
    /// The copy, when one is loaded.
    copy: Option<Arc<Snapshot>>,
    /// A load is running.
    loading: bool,
    /// The version at which the table was found larger than [`MAX_CACHED_BYTES`]: not
    /// loaded again until it is written.
    too_large_at: Option<u64>,
}

/// The cached tables of a server, by table id.
pub struct CachedTables {
    client: Arc<dyn Client>,
    oracle: Arc<dyn Oracle>,
    tables: RwLock<HashMap<i64, Arc<Mutex<Entry>>>>,
    /// Reads answered from a copy (`Strata_cached_table_reads`).
    pub reads: AtomicU64,
    /// Copies loaded (`Strata_cached_table_loads`).
    pub loads: AtomicU64,
}

impl std::fmt::Debug for CachedTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CachedTables({} tables)", self.tables.read().len())
    }
}

/// Dropped when a writer's commit has finished (or failed): copies may load again.
pub struct WriteGuard {
    entries: Vec<Arc<Mutex<Entry>>>,
}

impl Drop for WriteGuard {
    fn drop(&mut self) {
        for e in &self.entries {
            let mut e = e.lock();
            e.writers -= 1;
        }
    }
}

impl CachedTables {
    /// No cached tables, loading through `client` at timestamps from `oracle`.
    pub fn new(client: Arc<dyn Client>, oracle: Arc<dyn Oracle>) -> CachedTables {
        CachedTables { client, oracle, tables: RwLock::default(), reads: AtomicU64::new(0), loads: AtomicU64::new(0) }
    }

    /// Starts caching table `id`; `enabled` false until its definition is published (see
    /// [`enable`](Self::enable)).
    pub fn register(&self, id: i64, enabled: bool) {
        let entry = Entry { enabled, ..Default::default() };
        self.tables.write().entry(id).or_insert_with(|| Arc::new(Mutex::new(entry)));
    }

    /// Lets table `id`'s copy load.
    pub fn enable(&self, id: i64) {
        if let Some(e) = self.tables.read().get(&id) {
            e.lock().enabled = true;
        }
    }

    /// Stops caching table `id` and drops its copy.
    pub fn forget(&self, id: i64) {
        self.tables.write().remove(&id);
    }

    /// Stops caching every table `keep` rejects (dropped ones).
    pub fn retain(&self, keep: impl Fn(i64) -> bool) {
        self.tables.write().retain(|id, _| keep(*id));
    }

    /// Whether table `id` is cached.
    pub fn is_cached(&self, id: i64) -> bool {
        self.tables.read().contains_key(&id)
    }

    /// Whether a read of table `id` inside a transaction may look for its copy: the table
    /// is cached and the transaction has not written it (own writes are in the store's
    /// overlay, not in any copy).
    pub fn readable_in(&self, id: i64, txn: &Transaction) -> bool {
        if !self.is_cached(id) {
            return false;
        }
        let prefix = strata_codec::keys::table_prefix(TableId(id));
        !txn.writes_in(&prefix, &strata_codec::keys::prefix_end(&prefix))
    }

    /// Whether any table is cached (a quick test on every read and commit).
    pub fn any(&self) -> bool {
        !self.tables.read().is_empty()
    }

    /// Called by a transaction that wrote the tables `ids` before it takes its commit
    /// timestamp: their copies are dropped, and none loads until the guard is dropped
    /// after the commit.
    pub fn writing(&self, ids: impl IntoIterator<Item = i64>) -> WriteGuard {
        let tables = self.tables.read();
        let mut entries = Vec::new();
        for id in ids {
            if let Some(e) = tables.get(&id) {
                let mut st = e.lock();
                st.writers += 1;
                st.version += 1;
                st.copy = None;
                drop(st);
                entries.push(e.clone());
            }
        }
        WriteGuard { entries }
    }

    /// The copy of table `id` a reader at `read_ts` may use, counting the read; None: read
    /// the store (a load is started when none is running and no writer is in flight).
    pub fn copy_for(self: &Arc<Self>, id: i64, read_ts: Timestamp) -> Option<Arc<Snapshot>> {
        let entry = self.tables.read().get(&id)?.clone();
        let mut st = entry.lock();
        if let Some(copy) = &st.copy {
            if copy.ts <= read_ts {
                self.reads.fetch_add(1, Ordering::Relaxed);
                return Some(copy.clone());
            }
            return None;
        }
        if st.enabled && !st.loading && st.writers == 0 && st.too_large_at != Some(st.version) {
            st.loading = true;
            let version = st.version;
            drop(st);
            let this = self.clone();
            tokio::spawn(async move { this.load(id, entry, version).await });
        }
        None
    }

    /// Reads table `id` at a fresh timestamp and installs the copy if no writer came
    /// since `version`.
    async fn load(self: Arc<Self>, id: i64, entry: Arc<Mutex<Entry>>, version: u64) {
        let read = self.read_table(id).await;
        // Bytes the other copies hold (read before this entry's lock: entries are locked
        // one at a time).
        let others: usize = self
            .tables
            .read()
            .iter()
            .filter(|(other, _)| **other != id)
            .filter_map(|(_, e)| e.lock().copy.as_ref().map(|c| c.bytes))
            .sum();
        let mut st = entry.lock();
        st.loading = false;
        match read {
            Ok(Some(copy)) if others + copy.bytes > MAX_TOTAL_CACHED_BYTES => st.too_large_at = Some(version),
            Ok(Some(copy)) if st.version == version && st.writers == 0 => {
                st.copy = Some(Arc::new(copy));
                self.loads.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Some(_)) => {} // written meanwhile: the next reader loads again
            Ok(None) => st.too_large_at = Some(version),
            Err(e) => tracing::warn!("loading cached table {id} failed (read from the store meanwhile): {e}"),
        }
    }

    /// The whole table at a fresh timestamp, or None if it holds more than
    /// [`MAX_CACHED_BYTES`] (also how `ALTER TABLE .. CACHE` checks the size).
    pub async fn read_table(&self, id: i64) -> Result<Option<Snapshot>> {
        let opts = TxnOptions {
            mode: LockMode::Optimistic,
            isolation: Isolation::RepeatableRead,
            lock_wait_timeout_ms: 0,
            one_pc: true,
        };
        let txn = Transaction::begin(self.client.clone(), self.oracle.clone(), opts).await?;
        let r = table_pairs(&txn, id, MAX_CACHED_BYTES).await;
        let _ = txn.rollback().await;
        Ok(r?.map(|(pairs, ts, bytes)| Snapshot { ts, pairs, bytes }))
    }
}

/// Every pair of table `id` as `txn` reads them, with the read timestamp and their bytes,
/// or None past `max` bytes.
async fn table_pairs(
    txn: &Transaction,
    id: i64,
    max: usize,
) -> Result<Option<(BTreeMap<Vec<u8>, Vec<u8>>, Timestamp, usize)>> {
    let prefix = strata_codec::keys::table_prefix(TableId(id));
    let end = strata_codec::keys::prefix_end(&prefix);
    let mut start = prefix;
    let mut pairs = BTreeMap::new();
    let mut bytes = 0;
    loop {
        let chunk = txn.scan(&start, &end, LOAD_CHUNK).await?;
        let n = chunk.len();
        for (k, v) in chunk {
            bytes += k.len() + v.len();
            if bytes > max {
                return Ok(None);
            }
            start = k.clone();
            pairs.insert(k, v);
        }
        if n < LOAD_CHUNK {
            return Ok(Some((pairs, txn.read_ts(), bytes)));
        }
        start.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_and_nocache_parse_and_other_alters_pass_through() {
        let s = parse("ALTER TABLE shop.branch CACHE").expect("ours").expect("parses");
        assert_eq!(s, SetCache { db: Some("shop".into()), table: "branch".into(), cache: true });
        let s = parse("alter table `branch` nocache;").expect("ours").expect("parses");
        assert_eq!(s, SetCache { db: None, table: "branch".into(), cache: false });
        assert!(parse("ALTER TABLE t ADD COLUMN cache INT").is_none());
        assert!(parse("ALTER TABLE t SET TIFLASH REPLICA 1").is_none());
        assert!(parse("SELECT 'ALTER TABLE t CACHE'").is_none());
        assert!(parse("ALTER TABLE t CACHE extra").expect("ours").is_err());
    }
}
