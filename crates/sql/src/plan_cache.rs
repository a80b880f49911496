//! The prepared plan cache (TiDB's): a session keeps the plans of the queries and DML
//! statements (INSERT, REPLACE, single-table UPDATE and DELETE) it executes as prepared
//! statements (binary `COM_STMT_EXECUTE` and SQL `EXECUTE`), so an execution whose plan is
//! cached skips name resolution, binding, the rules and physical planning.
//!
//! A plan is kept by the statement's text, the current database, the types of the
//! parameter values (result metadata is typed by them) and the session variables binding
//! reads (div_precision_increment, cte_max_recursion_depth, sql_mode), for the schema version and the
//! statistics version it was planned under: a DDL statement or new statistics make it
//! stale, and the next execution plans again. Plans refer to parameters symbolically, so
//! one plan serves every value. A query whose plan holds values of the moment — session
//! functions (NOW(), DATABASE(), ...), user or system variables, information_schema rows —
//! is not cached, and the execution warns why (`skip prepared plan-cache: ...`), as TiDB
//! does.
//!
//! `tidb_prepared_plan_cache_size` (default 100) bounds the plans per session, and
//! `MAX_TEXT_BYTES` the statement text they are for (a plan's size follows its text's:
//! a client cannot make a session hold gigabytes of plans with huge statements), the least
//! recently used going first; `tidb_enable_prepared_plan_cache` turns the cache off;
//! `SELECT @@last_plan_from_cache` tells whether the previous statement's plan came from
//! it. Closing a statement drops its plans unless `tidb_ignore_prepared_cache_close_stmt`
//! is ON, in which case preparing the same text again finds them.

use std::collections::HashMap;
use std::sync::Arc;

use strata_common::Value;

use crate::dml::{InsertPlan, RowsPlan, UpdatePlan};
use crate::plan::Query;
use crate::typing::SqlType;

/// A cached plan: a query's, or a DML statement's.
#[derive(Clone)]
pub enum CachedPlan {
    /// A query.
    Query(Arc<Query>),
    /// INSERT or REPLACE.
    Insert(Arc<InsertPlan>),
    /// A single-table UPDATE.
    Update(Arc<UpdatePlan>),
    /// A single-table DELETE.
    Delete(Arc<RowsPlan>),
}

/// What a cached plan is found by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlanKey {
    /// The statement's text.
    pub sql: Arc<str>,
    /// The current database (names resolve in it).
    pub db: Option<String>,
    /// The types of the parameter values.
    pub params: Vec<SqlType>,
    /// Session variables binding reads (div_precision_increment, cte_max_recursion_depth,
    /// sql_mode), as one text (shared: it changes rarely).
    pub vars: Arc<str>,
}

impl PlanKey {
    /// The key of executing `sql` in `db` with `params`.
    pub fn new(sql: Arc<str>, db: Option<String>, params: &[Value], vars: Arc<str>) -> PlanKey {
        PlanKey { sql, db, params: params.iter().map(SqlType::of_value).collect(), vars }
    }
}

/// The most statement text (in bytes) one session's cached plans may be for.
pub const MAX_TEXT_BYTES: usize = 4 << 20;

struct Entry {
    plan: CachedPlan,
    schema_version: u64,
    stats_version: u64,
    used: u64,
}

/// One session's cached plans.
#[derive(Default)]
pub struct PlanCache {
    /// Hashed with foldhash: every execution hashes its whole statement text here, and
    /// SipHash over it cost ~1% of a TPC-C server's CPU.
    entries: HashMap<PlanKey, Entry, foldhash::fast::RandomState>,
    /// Statement text of the cached plans, in bytes.
    text_bytes: usize,
    clock: u64,
    /// Executions that found their plan here (`Strata_plan_cache_hits`).
    pub hits: u64,
    /// Executions that planned (and tried to cache) their statement.
    pub misses: u64,
}

impl PlanCache {
    /// The plan for `key` if it is cached and still current.
    pub fn get(&mut self, key: &PlanKey, schema_version: u64, stats_version: u64) -> Option<CachedPlan> {
        self.clock += 1;
        let current = match self.entries.get_mut(key) {
            Some(e) if e.schema_version == schema_version && e.stats_version == stats_version => {
                e.used = self.clock;
                Some(e.plan.clone())
            }
            Some(_) => None,
            None => None,
        };
        match current {
            Some(q) => {
                self.hits += 1;
                Some(q)
            }
            None => {
                self.remove(key);
                self.misses += 1;
                None
            }
        }
    }

    /// Keeps `plan` for `key`, evicting the least recently used plans beyond `capacity`.
    pub fn put(&mut self, key: PlanKey, plan: CachedPlan, schema_version: u64, stats_version: u64, capacity: usize) {
        if capacity == 0 || key.sql.len() > MAX_TEXT_BYTES {
            return;
        }
        self.clock += 1;
        self.remove(&key);
        self.text_bytes += key.sql.len();
        self.entries.insert(key, Entry { plan, schema_version, stats_version, used: self.clock });
        while self.entries.len() > capacity || self.text_bytes > MAX_TEXT_BYTES {
            let Some(oldest) = self.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone()) else { break };
            self.remove(&oldest);
        }
    }

    fn remove(&mut self, key: &PlanKey) {
        if self.entries.remove(key).is_some() {
            self.text_bytes -= key.sql.len();
        }
    }

    /// Drops the plans of statement text `sql` (its statement was closed).
    pub fn forget(&mut self, sql: &str) {
        let gone: usize = self.entries.keys().filter(|k| &*k.sql == sql).map(|k| k.sql.len()).sum();
        self.entries.retain(|k, _| &*k.sql != sql);
        self.text_bytes -= gone;
    }

    /// Drops every plan.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.text_bytes = 0;
    }

    /// How many plans are cached.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no plan is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;

    fn query() -> CachedPlan {
        CachedPlan::Query(Arc::new(Query::new(Plan::Dual, Vec::new(), Arc::new(Vec::new()))))
    }

    fn key(sql: &str, param: Value) -> PlanKey {
        PlanKey::new(Arc::from(sql), Some("d".into()), &[param], Arc::from(""))
    }

    #[test]
    fn plans_are_found_by_text_and_parameter_types_while_current() {
        let mut cache = PlanCache::default();
        cache.put(key("a", Value::Int(1)), query(), 1, 1, 10);
        assert!(cache.get(&key("a", Value::Int(99)), 1, 1).is_some(), "any value of the type");
        assert!(cache.get(&key("a", Value::str("x")), 1, 1).is_none(), "another type");
        assert!(cache.get(&key("a", Value::Int(1)), 2, 1).is_none(), "a newer schema");
        assert!(cache.get(&key("a", Value::Int(1)), 1, 1).is_none(), "the stale plan is gone");
        cache.put(key("a", Value::Int(1)), query(), 1, 1, 10);
        assert!(cache.get(&key("a", Value::Int(1)), 1, 2).is_none(), "newer statistics");
        assert_eq!((cache.hits, cache.misses), (1, 4));
    }

    #[test]
    fn the_least_recently_used_plan_goes_first() {
        let mut cache = PlanCache::default();
        cache.put(key("a", Value::Int(1)), query(), 1, 1, 2);
        cache.put(key("b", Value::Int(1)), query(), 1, 1, 2);
        assert!(cache.get(&key("a", Value::Int(1)), 1, 1).is_some());
        cache.put(key("c", Value::Int(1)), query(), 1, 1, 2);
        assert_eq!(cache.len(), 2);
        assert!(cache.get(&key("b", Value::Int(1)), 1, 1).is_none(), "b was used least recently");
        assert!(cache.get(&key("a", Value::Int(1)), 1, 1).is_some());
        cache.forget("a");
        assert!(cache.get(&key("a", Value::Int(1)), 1, 1).is_none());
        cache.put(key("d", Value::Int(1)), query(), 1, 1, 0);
        assert!(cache.get(&key("d", Value::Int(1)), 1, 1).is_none(), "capacity 0 keeps nothing");
    }

    #[test]
    fn the_plans_statement_text_is_bounded() {
        let mut cache = PlanCache::default();
        let big = "x".repeat(MAX_TEXT_BYTES + 1);
        cache.put(key(&big, Value::Int(1)), query(), 1, 1, 10);
        assert!(cache.is_empty(), "a statement over the budget is not kept");
        let (a, b) = ("a".repeat(MAX_TEXT_BYTES / 2 + 1), "b".repeat(MAX_TEXT_BYTES / 2 + 1));
        cache.put(key(&a, Value::Int(1)), query(), 1, 1, 10);
        cache.put(key(&b, Value::Int(1)), query(), 1, 1, 10);
        assert_eq!(cache.len(), 1);
        assert!(cache.get(&key(&b, Value::Int(1)), 1, 1).is_some(), "the newer plan stays");
        cache.forget(&b);
        assert_eq!(cache.text_bytes, 0);
    }
}
