//! The SQL layer: parsing (sqlparser, MySQL dialect), binding and planning, execution over
//! a `txn::Transaction`, DDL on the catalog, and the session that ties them together.

/// Hash maps and sets of the execution path, hashed with foldhash (randomly seeded), not
/// std's SipHash: a hash of a TPC-C key cost several hundred instructions.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// See `FastMap`.
pub(crate) type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

pub mod alter;
pub mod binder;
pub mod builtins;
pub mod bulk_insert;
pub mod cached_table;
pub mod catalog;
pub mod column;
pub mod context;
pub mod cost;
pub mod ddl;
pub mod depth;
pub mod dialect;
pub mod dml;
pub mod exec;
pub mod expr;
pub mod failpoint;
pub mod functions;
pub mod grants;
pub mod interrupt;
pub mod keyconv;
pub mod load;
pub mod logical;
pub mod metrics;
pub mod optimizer_trace;
pub mod physical;
pub mod plan;
pub mod plan_cache;
pub mod process;
pub mod prune;
pub mod replica;
pub mod result;
pub mod rules;
pub mod session;
pub mod show;
pub mod slow_log;
pub mod stats;
pub mod stmt_summary;
pub mod table;
pub mod table_locks;
pub mod text_plan;
pub mod types;
pub mod typing;
pub mod users;
pub mod variables;
pub mod views;

pub use catalog::Catalog;
pub use result::{Column, QueryResult};
pub use session::{Engine, Session};

/// The version string clients see (MySQL 8 compatible so drivers enable MySQL 8 behaviour).
pub const VERSION: &str = concat!("8.0.11-Strata-", env!("CARGO_PKG_VERSION"));
