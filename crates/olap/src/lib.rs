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
//! A plan with no faithful translation is a [`Skip`]: the engine answers `None` and the
//! row engine runs the query. DataFusion's memory is charged to the statement's memory
//! tracker (`tidb_mem_quota_query`, 8175 past it); KILL and `max_execution_time` stop the
//! query between batches.

mod convert;
mod provider;
mod translate;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::DataFusionError;
use datafusion::execution::memory_pool::{MemoryPool, MemoryReservation};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::execute_stream;
use datafusion::prelude::SessionConfig;
use futures_util::StreamExt;
use parking_lot::Mutex;
use strata_common::{Error, Result};
use strata_sql::column::{ColumnEngine, ScanSource};
use strata_sql::context::MemTracker;
use strata_sql::expr::Row;
use strata_sql::plan::Query;

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

/// The DataFusion engine.
#[derive(Debug, Default)]
pub struct OlapEngine {}

impl OlapEngine {
    /// An engine; queries share nothing but the process's threads.
    pub fn new() -> OlapEngine {
        OlapEngine {}
    }
}

/// Partitions DataFusion plans for: one per core on this kind of box.
fn partitions() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(1, 8)
}

#[async_trait]
impl ColumnEngine for OlapEngine {
    async fn run(&self, query: &Query, source: &mut ScanSource<'_, '_>) -> Result<Option<Vec<Row>>> {
        let params = source.params().to_vec();
        let mut t = translate::Translator::new(query, &params);
        let node = match t.query() {
            Ok(n) => n,
            Err(Skip(why)) => {
                tracing::debug!("column engine leaves the query to the row engine: {why}");
                return Ok(None);
            }
        };
        let tables = std::mem::take(&mut t.tables);
        let pool = Arc::new(TrackerPool::new(strata_sql::context::current_tracker()));
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(pool.clone())
            .build_arc()
            .map_err(|e| Error::internal(e.to_string()))?;
        let config = SessionConfig::new().with_target_partitions(partitions()).with_batch_size(8192);
        let state =
            SessionStateBuilder::new().with_config(config).with_runtime_env(runtime).with_default_features().build();
        let optimized = match state.optimize(&node.plan) {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!("column engine: optimizing failed, row engine runs the query: {e}");
                return Ok(None);
            }
        };
        // Load what the optimized plan reads of each table.
        let reads = scanned_columns(&optimized);
        for (name, table) in &tables {
            let Some(cols) = reads.get(name) else { continue };
            let cols: Option<Vec<usize>> = cols.as_ref().map(|c| c.iter().copied().collect());
            if let Err(Skip(why)) = table.load(source, cols.as_deref()).await? {
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
        let types: Vec<_> = query.columns.iter().map(|c| c.ty.clone()).collect();
        let mut stream = match execute_stream(physical, state.task_ctx()) {
            Ok(s) => s,
            Err(e) => return pool.failed(e),
        };
        let mut rows = Vec::new();
        let mut charge = strata_sql::context::Charge::new();
        while let Some(batch) = stream.next().await {
            strata_sql::interrupt::checkpoint().await?;
            let batch = match batch {
                Ok(b) => b,
                Err(e) => return pool.failed(e),
            };
            charge.add(batch.get_array_memory_size())?;
            if let Err(Skip(why)) = convert::append_rows(&batch, &types, &mut rows) {
                tracing::debug!("column engine: {why}; row engine runs the query");
                return Ok(None);
            }
        }
        Ok(Some(rows))
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
    fn failed(&self, e: DataFusionError) -> Result<Option<Vec<Row>>> {
        if let Some(err) = self.error.lock().take() {
            return Err(err);
        }
        tracing::debug!("column engine: execution failed, row engine runs the query: {e}");
        Ok(None)
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
