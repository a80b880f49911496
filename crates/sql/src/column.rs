//! The seam between the SQL layer and a vectorized (columnar) execution engine.
//!
//! The row executor (`exec`) runs every plan. A [`ColumnEngine`] — the binary wires in
//! DataFusion (`strata-olap`) — may run a read-only query instead: it translates the typed
//! plan into its own, reads each table through a [`ScanSource`] (the statement's transaction,
//! so its snapshot and its own uncommitted writes), and returns the rows. When it cannot run a
//! plan with MySQL's semantics it says so (`Ok(None)`) and the row executor runs it; a query
//! gives the same rows and column types whichever engine answers.
//!
//! Which engine may answer is the session's `tidb_isolation_read_engines` (TiDB's names:
//! `tikv` the row store, `tiflash` the column engine, `tidb` memory tables). With only
//! `tiflash`, every query the column engine can run goes to it; with only `tikv`, none.
//! With both (the default), the column engine answers queries that scan a range or the
//! whole of a table with an available columnar replica (`ALTER TABLE .. SET TIFLASH
//! REPLICA 1`); point gets and index lookups stay on the row engine. (The cost-based choice
//! replaces this rule once statistics exist.)

use async_trait::async_trait;
use strata_common::{Code, Error, Result, Value};

use crate::exec::{scan_batches, ExecCtx, RowSink};
use crate::expr::Row;
use crate::plan::{Access, Plan, Query};
use crate::result::QueryOutput;

/// The engines a session may read from (`tidb_isolation_read_engines`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadEngines {
    /// `tikv`: the row store and the row executor.
    pub row: bool,
    /// `tiflash`: the column engine.
    pub column: bool,
}

impl ReadEngines {
    /// TiDB's default: every engine.
    pub const DEFAULT: &'static str = "tikv,tiflash,tidb";

    /// Parses the variable's value: a comma-separated list of `tikv`, `tiflash`, `tidb`
    /// (case-insensitive). Anything else is 1231, as in TiDB.
    pub fn parse(text: &str) -> Result<ReadEngines> {
        let mut out = ReadEngines { row: false, column: false };
        let mut any = false;
        for part in text.split(',') {
            match part.trim().to_ascii_lowercase().as_str() {
                "tikv" => out.row = true,
                "tiflash" => out.column = true,
                "tidb" => {}
                _ => {
                    return Err(Error::user(
                        Code::WrongValueForVar,
                        format!("Variable 'tidb_isolation_read_engines' can't be set to the value of '{text}'"),
                    ))
                }
            }
            any = true;
        }
        if !any {
            return Err(Error::user(
                Code::WrongValueForVar,
                format!("Variable 'tidb_isolation_read_engines' can't be set to the value of '{text}'"),
            ));
        }
        Ok(out)
    }

    /// The canonical text of the value (lower case, no spaces).
    pub fn normalize(text: &str) -> Result<String> {
        Self::parse(text)?;
        Ok(text.split(',').map(|p| p.trim().to_ascii_lowercase()).collect::<Vec<_>>().join(","))
    }

    /// Whether the column engine should try `query`: always when it is the only engine
    /// allowed, never when it is not allowed, otherwise (both allowed) when the query scans
    /// a range or the whole of a table whose columnar replica is available.
    pub fn try_column(&self, query: &Query, engine: &dyn ColumnEngine) -> bool {
        if !self.column {
            return false;
        }
        if !self.row {
            return true;
        }
        query.plan.scans().into_iter().any(|scan| match scan {
            Plan::Scan { table, access, lock: false, .. } => {
                let ranged = match access {
                    Access::Full | Access::PkRange(_) => true,
                    Access::Index(_, r) => r.lower.is_some() || r.upper.is_some(),
                    Access::Points(_) | Access::Prefixes(_) => false,
                };
                ranged && engine.replica(table.id).is_some_and(|r| r.available)
            }
            _ => false,
        })
    }
}

/// The state of a table's columnar replica (information_schema.TIFLASH_REPLICA).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplicaState {
    /// Whether queries can read it (built and kept current).
    pub available: bool,
    /// How much of it is built, 0 to 1.
    pub progress: f64,
}

/// How the column engine reads a table: through the statement's transaction.
pub struct ScanSource<'c, 'a> {
    ctx: &'c mut ExecCtx<'a>,
}

impl<'c, 'a> ScanSource<'c, 'a> {
    /// A source reading through `ctx`.
    pub fn new(ctx: &'c mut ExecCtx<'a>) -> Self {
        ScanSource { ctx }
    }

    /// The statement's parameters.
    pub fn params(&self) -> &[Value] {
        self.ctx.params
    }

    /// The statement's transaction (its read timestamp, own writes and lock checks, for a
    /// read of a columnar replica).
    pub fn txn(&self) -> &strata_txn::Transaction {
        &*self.ctx.txn
    }

    /// Reads the rows of a `Plan::Scan` (its access path, filter and limit; never locking),
    /// handing them to `sink` batch by batch.
    pub async fn scan(&mut self, scan: &Plan, sink: &mut RowSink<'_>) -> Result<()> {
        let Plan::Scan { table, access, filter, lock: false, limit, .. } = scan else {
            return Err(Error::internal("the column engine scans only unlocked table scans"));
        };
        let limit = crate::exec::count_of(self.ctx, limit.as_ref())?;
        scan_batches(self.ctx, table, access, filter.as_ref(), limit, sink).await
    }
}

/// A vectorized engine that can run some read-only queries.
#[async_trait]
pub trait ColumnEngine: Send + Sync {
    /// Runs `query`, reading tables through `source`, its rows going to `out` batch by
    /// batch. `Ok(false)`: this engine cannot run the query with MySQL's semantics and
    /// gave `out` nothing; the row engine must run it.
    async fn run(&self, query: &Query, source: &mut ScanSource<'_, '_>, out: &mut QueryOutput<'_>) -> Result<bool>;

    /// Runs `query` like `run` and gives EXPLAIN ANALYZE's lines instead of its rows: the
    /// plan it ran with each operator's actual rows and time. None: the row engine must run it.
    async fn run_analyzed(&self, query: &Query, source: &mut ScanSource<'_, '_>) -> Result<Option<Vec<String>>> {
        let _ = (query, source);
        Ok(None)
    }

    /// The rows of `scan` (a `Plan::Scan` the row engine runs once per statement) read from
    /// the table's columnar replica at the statement's snapshot, its access range and
    /// filter applied vectorized; None when there is no available replica to read or the
    /// scan cannot be translated (the row store then serves it).
    async fn scan_replica(&self, scan: &Plan, source: &mut ScanSource<'_, '_>) -> Result<Option<Vec<Row>>> {
        let _ = (scan, source);
        Ok(None)
    }

    /// EXPLAIN's lines for `query` when this engine can run it (its plan and what each
    /// table scan reads); otherwise the reason it cannot (the row engine runs it).
    fn explain(&self, query: &Query, params: &[Value]) -> std::result::Result<Vec<String>, String> {
        let _ = (query, params);
        Err("no column engine".into())
    }

    /// The columnar replica of table `table_id`, if one is kept (being built or available).
    fn replica(&self, table_id: i64) -> Option<ReplicaState> {
        let _ = table_id;
        None
    }

    /// A schema change was published (a replica setting, a table dropped, truncated or
    /// altered): replicas are created, rebuilt or dropped to match.
    fn schema_changed(&self) {}

    /// The oldest timestamp whose versions the engine still needs: garbage collection must
    /// not pass it (a replica being built reads its snapshot; a persisted replica catches
    /// up after a restart from the versions committed since it was written).
    fn gc_floor(&self) -> Option<strata_common::Timestamp> {
        None
    }

    /// Counters for SHOW STATUS (`Strata_columnar_*`).
    fn status(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_engines_take_tidbs_names_and_refuse_others() {
        let e = ReadEngines::parse(ReadEngines::DEFAULT).expect("default");
        assert_eq!(e, ReadEngines { row: true, column: true });
        assert_eq!(ReadEngines::parse(" TiFlash ").expect("one"), ReadEngines { row: false, column: true });
        assert_eq!(ReadEngines::parse("tikv,tidb").expect("two"), ReadEngines { row: true, column: false });
        assert_eq!(ReadEngines::normalize("TIKV, TiFlash").expect("normalized"), "tikv,tiflash");
        for bad in ["", "tiflash,", "mpp", "tikv;tiflash"] {
            let err = ReadEngines::parse(bad).expect_err(bad);
            assert_eq!(err.code(), Code::WrongValueForVar, "{bad}");
        }
    }
}
