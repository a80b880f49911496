//! A table scan of the plan as a DataFusion table: planned from the table's schema, then
//! loaded (only the columns the optimized plan reads) before DataFusion executes — from the
//! table's columnar replica when it can answer, else through the statement's transaction
//! from the row store.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::Session;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::Expr as DfExpr;
use datafusion::physical_plan::ExecutionPlan;
use parking_lot::Mutex;
use strata_common::{Error, Result};
use strata_sql::column::ScanSource;
use strata_sql::plan::Plan;
use strata_sql::types::ColumnType;

use crate::convert::{arrow_type, BatchBuilder};
use crate::replica::ReplicaStore;
use crate::Skip;

/// Rows per Arrow batch built from the row store.
const BATCH_ROWS: usize = 8192;

/// Batches are dealt round-robin into this many partitions, so DataFusion's operators
/// above the scan run on both cores.
const PARTITIONS: usize = 2;

/// One `Plan::Scan` of the query, as a DataFusion table.
#[derive(Debug)]
pub struct ScanTable {
    /// The row engine's scan (access path, filter, limit) that reads the rows.
    pub scan: Plan,
    /// Column types of the table.
    types: Vec<ColumnType>,
    /// Field names (`c0`, `c1`, ...).
    names: Vec<String>,
    schema: SchemaRef,
    /// Read the table's columnar replica (the scan is then a full scan, its predicates
    /// applied above it by DataFusion).
    replica: Option<Arc<strata_sql::catalog::TableInfo>>,
    /// Rows the scan reads, estimated from statistics (None without them).
    pub rows: Option<f64>,
    loaded: Mutex<Option<Loaded>>,
}

#[derive(Debug)]
struct Loaded {
    /// Table column positions the batches hold, in order.
    columns: Vec<usize>,
    schema: SchemaRef,
    partitions: Vec<Vec<RecordBatch>>,
    /// Their memory, charged to the statement.
    _charge: strata_sql::context::Charge,
}

impl ScanTable {
    /// A table for `scan` (a `Plan::Scan`) with these column types; with `replica` (the
    /// table's definition), read from its columnar replica when it can answer.
    pub fn new(scan: Plan, types: Vec<ColumnType>, replica: Option<Arc<strata_sql::catalog::TableInfo>>) -> ScanTable {
        let names: Vec<String> = (0..types.len()).map(|i| format!("c{i}")).collect();
        // Columns without an Arrow type are Null-typed: the plan may not read them (a
        // translation that does gives up).
        let fields: Vec<Field> = types
            .iter()
            .zip(&names)
            .map(|(t, n)| Field::new(n.clone(), arrow_type(t).unwrap_or(DataType::Null), true))
            .collect();
        ScanTable {
            scan,
            types,
            names,
            schema: Arc::new(Schema::new(fields)),
            replica,
            rows: None,
            loaded: Mutex::new(None),
        }
    }

    /// Whether the row store's read keeps only some rows (a filter, key range or limit); a
    /// replica read is a full scan, its predicates filters above it.
    pub fn filters_rows(&self) -> bool {
        match &self.scan {
            Plan::Scan { access, filter, limit, .. } if self.replica.is_none() => {
                filter.is_some() || limit.is_some() || !matches!(access, strata_sql::plan::Access::Full)
            }
            _ => false,
        }
    }

    /// What EXPLAIN says the scan reads: the table, and its columnar replica or the row
    /// store's access path.
    pub fn describe(&self) -> String {
        let Plan::Scan { table, .. } = &self.scan else { return "a scan".to_string() };
        if self.replica.is_some() {
            return format!("table:{} columnar replica", table.name);
        }
        let mut lines = Vec::new();
        self.scan.explain(0, &mut lines);
        format!("row store {}", lines.join(" "))
    }

    /// Reads the rows of the scan through `source`, keeping `columns` (positions in the
    /// table; None for all) as Arrow batches. `Ok(Err(skip))`: a value Arrow cannot hold.
    pub async fn load(
        &self,
        source: &mut ScanSource<'_, '_>,
        columns: Option<&[usize]>,
        replicas: &ReplicaStore,
    ) -> Result<std::result::Result<(), Skip>> {
        let columns: Vec<usize> = match columns {
            Some(c) => c.to_vec(),
            None => (0..self.types.len()).collect(),
        };
        if let Some(info) = &self.replica {
            if let Some(replica) = replicas.get(info.id) {
                if let Some(batches) = replica.read(info, &columns, source.txn()).await? {
                    let mut charge = strata_sql::context::Charge::new();
                    let mut partitions: Vec<Vec<RecordBatch>> = vec![Vec::new(); PARTITIONS];
                    for (i, b) in batches.into_iter().enumerate() {
                        charge.add(b.get_array_memory_size())?;
                        partitions[i % PARTITIONS].push(b);
                    }
                    let schema = match BatchBuilder::new(columns.clone(), &self.types, &self.names) {
                        Ok(b) => b.schema(),
                        Err(skip) => return Ok(Err(skip)),
                    };
                    strata_sql::context::count_reads(strata_sql::context::Read::ColumnarReplica, 1);
                    *self.loaded.lock() = Some(Loaded { columns, schema, partitions, _charge: charge });
                    return Ok(Ok(()));
                }
            }
        }
        let mut builder = match BatchBuilder::new(columns.clone(), &self.types, &self.names) {
            Ok(b) => b,
            Err(skip) => return Ok(Err(skip)),
        };
        let mut partitions: Vec<Vec<RecordBatch>> = vec![Vec::new(); PARTITIONS];
        let mut next = 0;
        let mut skipped: Option<Skip> = None;
        // The batches count against the statement's memory quota while the query runs.
        let mut charge = strata_sql::context::Charge::new();
        let mut sink = |rows: Vec<Vec<strata_common::Value>>| -> Result<()> {
            for row in &rows {
                if let Err(s) = builder.push(row) {
                    skipped = Some(s);
                    return Err(Error::internal("value without an Arrow form"));
                }
                if builder.len() >= BATCH_ROWS {
                    let batch = builder.finish().map_err(|s| {
                        let e = Error::internal(s.0.clone());
                        skipped = Some(s);
                        e
                    })?;
                    charge.add(batch.get_array_memory_size())?;
                    partitions[next % PARTITIONS].push(batch);
                    next += 1;
                }
            }
            Ok(())
        };
        let read = source.scan(&self.scan, &mut sink).await;
        if let Some(s) = skipped {
            return Ok(Err(s));
        }
        read?;
        if builder.len() > 0 {
            match builder.finish() {
                Ok(batch) => {
                    charge.add(batch.get_array_memory_size())?;
                    partitions[next % PARTITIONS].push(batch)
                }
                Err(s) => return Ok(Err(s)),
            }
        }
        *self.loaded.lock() = Some(Loaded { columns, schema: builder.schema(), partitions, _charge: charge });
        Ok(Ok(()))
    }
}

#[async_trait]
impl TableProvider for ScanTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[DfExpr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let guard = self.loaded.lock();
        let loaded = guard.as_ref().ok_or_else(|| DataFusionError::Internal("scan planned before loading".into()))?;
        let wanted: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.types.len()).collect(),
        };
        let positions = wanted
            .iter()
            .map(|c| {
                loaded
                    .columns
                    .iter()
                    .position(|x| x == c)
                    .ok_or_else(|| DataFusionError::Internal(format!("column {c} was not loaded")))
            })
            .collect::<DfResult<Vec<usize>>>()?;
        let exec = MemorySourceConfig::try_new_exec(&loaded.partitions, loaded.schema.clone(), Some(positions))?;
        Ok(exec)
    }
}
