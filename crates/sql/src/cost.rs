//! The cost model behind the engine choice: with both engines allowed and a columnar replica
//! to read, is the row engine's plan (index lookups, per-row subqueries) or the column
//! engine's (every table it touches read whole, vectorized) cheaper?
//!
//! Costs are estimated microseconds on this kind of machine (release build; the constants
//! below were fitted to TPC-H SF 1 runs, see BENCHMARKS.md). Row counts come from the
//! tables' statistics (`ANALYZE TABLE`, `crate::stats`); without statistics for a table the
//! model declines and the rule in `column::ReadEngines::try_column` decides alone.
//!
//! Row engine: a scan costs per row read (range or full), per index lookup (index entry then
//! the row) or per point get; a correlated join's inner side and a correlated subquery cost
//! once per row of their outer side; operators cost a little per row. Column engine: every
//! table the query touches is read whole — from its replica, or from the row store when it
//! has none — plus a fixed cost to plan and start DataFusion.

use std::collections::HashSet;

use strata_common::Value;

use crate::catalog::{Catalog, TableInfo};
use crate::expr::{BinOp, Expr};
use crate::plan::{Access, KeyRange, Plan, Query, SubqueryPlan};
use crate::stats::{Estimator, DEFAULT_SELECTIVITY};

// Refitted in session 13 on SF 1 with EXPLAIN ANALYZE (release build, 2 vCPU): the row
// engine's full scans cost 2.8 us a row (Q6: 6 M rows in 17 s), a row found through an
// index 10-19 us (Q17: 12,176 lookups in 120-180 ms), operators ~0.5 us a row; the column
// engine 7 ns a row scanned in joins and filters (Q6, Q17, Q21), 48 ns in Q1's eight
// aggregates. The earlier constants made the row engine look 3-50x cheaper than it ran.
/// Per row read by a range or full scan of the row store.
const ROW_SCAN: f64 = 2.5;
/// Per seek into the row store (the start of a range).
const ROW_SEEK: f64 = 5.0;
/// Per row found through a secondary index (index entry, then the row by its handle).
const ROW_LOOKUP: f64 = 10.0;
/// Per point get.
const ROW_POINT: f64 = 8.0;
/// Per row through a row-engine operator (filter, projection, aggregation, join probe).
const ROW_CPU: f64 = 0.5;
/// Per row of a table read from its columnar replica.
const COL_SCAN: f64 = 0.004;
/// Per row through DataFusion's operators above the scans.
const COL_CPU: f64 = 0.004;
/// Planning and starting a DataFusion plan (a 25-row table: 0.99 ms on the column engine,
/// 0.36 ms on the row engine).
const COL_FIXED: f64 = 800.0;
/// Starting the column engine for one scan the row engine reads from a replica.
const REPLICA_SCAN_FIXED: f64 = 600.0;
/// The share of rows a range with bounds the model cannot evaluate keeps (TiDB's 1/3).
const UNKNOWN_RANGE: f64 = 1.0 / 3.0;

/// Estimated costs of one query on each engine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineCosts {
    /// The row engine's plan.
    pub row: f64,
    /// The column engine.
    pub column: f64,
}

impl EngineCosts {
    /// EXPLAIN's line for the choice.
    pub fn explain_line(&self) -> String {
        format!("Engine choice: estimated row engine {:.0} us, column engine {:.0} us", self.row, self.column)
    }
}

/// Estimates `query` on both engines; None when a table it reads has no statistics.
/// `replica(id)`: whether table `id` has an available columnar replica. `constant` evaluates
/// row-independent expressions; `like` is the share of rows a LIKE keeps.
pub fn estimate(
    query: &Query,
    catalog: &Catalog,
    replica: &dyn Fn(i64) -> bool,
    constant: &dyn Fn(&Expr) -> Option<Value>,
    like: f64,
) -> Option<EngineCosts> {
    let model = Model { catalog, subqueries: &query.subqueries, constant, like, replica };
    let (_, row) = model.row(&query.plan, true)?;
    // The column engine reads each table every scan names, once per scan (a lookup join or
    // a correlated subquery becomes a join over the whole table).
    let mut column = COL_FIXED;
    let mut plans: Vec<&Plan> = vec![&query.plan];
    plans.extend(query.subqueries.iter().map(|s| &s.plan));
    for plan in plans {
        let mut stack = vec![plan];
        while let Some(p) = stack.pop() {
            if let Plan::Scan { table, .. } = p {
                let rows = model.table_rows(table)?;
                column += rows * (if replica(table.id) { COL_SCAN + COL_CPU } else { ROW_SCAN + COL_CPU });
            }
            stack.extend(p.children());
        }
    }
    Some(EngineCosts { row, column })
}

/// Whether the row engine's scan `scan` (run once per statement; `read` of the table's
/// `rows` rows) is cheaper read whole from the table's columnar replica, filtered
/// vectorized, than from the row store: a full or primary-key range scan, not locking, no
/// pushed-down LIMIT, of a table with an available replica.
fn replica_scan_pays(scan: &Plan, rows: f64, read: f64, replica: &dyn Fn(i64) -> bool) -> bool {
    let Plan::Scan { table, access: Access::Full | Access::PkRange(_), lock: false, limit: None, .. } = scan else {
        return false;
    };
    replica(table.id) && read * ROW_SCAN > REPLICA_SCAN_FIXED + rows * (COL_SCAN + COL_CPU)
}

/// The scans of the row engine's plan for `query` that read a columnar replica instead of
/// the row store (`exec::ExecCtx::replica_scans`), by the address of their plan node:
/// those that run once per statement (not a lookup join's inner side, not in a subquery)
/// and for which `replica_scan_pays` holds, by the tables' statistics.
pub fn replica_scans(
    query: &Query,
    catalog: &Catalog,
    replica: &dyn Fn(i64) -> bool,
    constant: &dyn Fn(&Expr) -> Option<Value>,
    like: f64,
) -> HashSet<usize> {
    let model = Model { catalog, subqueries: &query.subqueries, constant, like, replica };
    let mut out = HashSet::new();
    let mut stack = vec![&query.plan];
    while let Some(p) = stack.pop() {
        match p {
            // Only a scan that could read a replica is estimated (most OLTP plans have none).
            Plan::Scan { table, access: Access::Full | Access::PkRange(_), lock: false, limit: None, .. }
                if replica(table.id) =>
            {
                let Some(e) = model.scan(p) else { continue };
                if replica_scan_pays(p, e.rows, e.read, replica) {
                    out.insert(p as *const Plan as usize);
                }
            }
            Plan::Join { left, correlated: true, .. } => stack.push(left),
            other => stack.extend(other.children()),
        }
    }
    out
}

/// A scan's estimates: the table's rows, rows read, rows kept, cost per row read, seeks.
struct ScanEstimate {
    rows: f64,
    read: f64,
    out: f64,
    per_row: f64,
    seeks: f64,
}

struct Model<'a> {
    catalog: &'a Catalog,
    replica: &'a dyn Fn(i64) -> bool,
    subqueries: &'a [SubqueryPlan],
    constant: &'a dyn Fn(&Expr) -> Option<Value>,
    like: f64,
}

impl Model<'_> {
    fn table_rows(&self, table: &TableInfo) -> Option<f64> {
        Some(self.catalog.stats(table.id)?.row_count as f64)
    }

    /// (rows out, cost) of the row engine running `plan` once.
    fn row(&self, plan: &Plan, once: bool) -> Option<(f64, f64)> {
        crate::depth::ensure_stack().ok()?;
        let (rows, cost, input_rows) = match plan {
            Plan::Dual => (1.0, 0.0, 1.0),
            Plan::Values(rows) => (rows.len() as f64, 0.0, rows.len() as f64),
            Plan::WorkTable(_) => (100.0, 0.0, 100.0),
            Plan::Scan { .. } => {
                let e = self.scan(plan)?;
                if once && replica_scan_pays(plan, e.rows, e.read, self.replica) {
                    (e.out, REPLICA_SCAN_FIXED + e.rows * (COL_SCAN + COL_CPU) + e.out * ROW_CPU, e.read)
                } else {
                    (e.out, e.read * e.per_row + e.seeks * ROW_SEEK, e.read)
                }
            }
            Plan::Filter { input, .. } => {
                let (r, c) = self.row(input, once)?;
                (r * DEFAULT_SELECTIVITY, c + r * ROW_CPU, r)
            }
            Plan::Project { input, .. } | Plan::Truncate { input, .. } | Plan::Window { input, .. } => {
                let (r, c) = self.row(input, once)?;
                (r, c + r * ROW_CPU, r)
            }
            Plan::Join { left, right, correlated, .. } => {
                let (lr, lc) = self.row(left, once)?;
                let (rr, rc) = self.row(right, once && !*correlated)?;
                if *correlated {
                    (lr * rr, lc + lr * rc, lr * rr)
                } else {
                    (lr * rr, lc + rc + lr * rr * ROW_CPU, lr * rr)
                }
            }
            Plan::HashJoin { left, right, .. } => {
                let (lr, lc) = self.row(left, once)?;
                let (rr, rc) = self.row(right, once)?;
                (lr.max(rr), lc + rc + (lr + rr) * ROW_CPU * 2.0, lr.max(rr))
            }
            Plan::Aggregate { input, group, .. } => {
                let (r, c) = self.row(input, once)?;
                let out = if group.is_empty() { 1.0 } else { (r * 0.1).max(1.0) };
                (out, c + r * ROW_CPU * 2.0, r)
            }
            Plan::Sort { input, .. } => {
                let (r, c) = self.row(input, once)?;
                (r, c + r * r.max(2.0).log2() * ROW_CPU * 0.2, r)
            }
            Plan::Limit { input, limit, .. } => {
                let (r, c) = self.row(input, once)?;
                let l = limit.as_ref().and_then(|l| (self.constant)(l)).and_then(|v| v.as_f64()).unwrap_or(r);
                (r.min(l.max(0.0)), c, r)
            }
            Plan::Distinct { input } => {
                let (r, c) = self.row(input, once)?;
                (r, c + r * ROW_CPU, r)
            }
            Plan::Union { inputs, .. } => {
                let mut out = (0.0, 0.0, 0.0);
                for i in inputs {
                    let (r, c) = self.row(i, once)?;
                    out = (out.0 + r, out.1 + c, out.2 + r);
                }
                out
            }
            Plan::SetOp { left, right, .. } => {
                let (lr, lc) = self.row(left, once)?;
                let (rr, rc) = self.row(right, once)?;
                (lr, lc + rc + (lr + rr) * ROW_CPU, lr)
            }
            Plan::Recursive { seed, step, .. } => {
                let (sr, sc) = self.row(seed, once)?;
                let (rr, rc) = self.row(step, once)?;
                (sr + rr * 10.0, sc + rc * 10.0, sr)
            }
        };
        // The subqueries this node's expressions run: a correlated one per input row, an
        // uncorrelated one once (its result is kept).
        let mut extra = 0.0;
        let mut seen = HashSet::new();
        for e in plan.own_exprs() {
            for id in e.subquery_ids() {
                if !seen.insert(id) {
                    continue;
                }
                let sq = self.subqueries.get(id)?;
                let (_, c) = self.row(&sq.plan, false)?;
                extra += if sq.correlated { self.executions(plan, input_rows, &sq.plan) * c } else { c };
            }
        }
        Some((rows, cost + extra))
    }

    /// What a `Plan::Scan` reads from the row store and keeps.
    fn scan(&self, scan: &Plan) -> Option<ScanEstimate> {
        let Plan::Scan { table, access, filter, limit, .. } = scan else { return None };
        let stats = self.catalog.stats(table.id)?;
        let est = Estimator { table, stats: &stats, constant: self.constant, like: self.like };
        let n = est.rows();
        let (mut read, per_row, seeks) = match access {
            Access::Full => (n, ROW_SCAN, 1.0),
            Access::Points(ts) => (ts.len() as f64, ROW_POINT, 0.0),
            Access::Prefixes(ts) => {
                let first = table.pk.as_ref().and_then(|pk| pk.first().copied());
                let per = first.map_or(1.0, |c| n / est.ndv(c));
                (ts.len() as f64 * per, ROW_SCAN, ts.len() as f64)
            }
            Access::PkRange(r) => {
                let cols = table.pk.clone().unwrap_or_default();
                (n * self.range_share(&est, &cols, r), ROW_SCAN, 1.0)
            }
            Access::Index(i, r) => {
                let cols = table.indexes.get(*i).map(|x| x.columns.clone()).unwrap_or_default();
                (n * self.range_share(&est, &cols, r), ROW_LOOKUP, 1.0)
            }
        };
        if let Some(l) = limit.as_ref().and_then(|l| (self.constant)(l)).and_then(|v| v.as_f64()) {
            read = read.min(l.max(0.0));
        }
        let out = read * filter.as_ref().map_or(1.0, |f| est.selectivity(f));
        Some(ScanEstimate { rows: n, read, out, per_row, seeks })
    }

    /// How often a correlated subquery (`sub`) used by `node` runs for `input_rows` rows:
    /// once per distinct value of the enclosing columns it reads (results are cached by
    /// them, `exec::ApplyCache`), bounded by the rows of the part of the input those
    /// columns come from.
    fn executions(&self, node: &Plan, input_rows: f64, sub: &Plan) -> f64 {
        let input = match node {
            Plan::Filter { input, .. } | Plan::Project { input, .. } => &**input,
            _ => return input_rows,
        };
        match crate::exec::apply_key_columns(sub, self.subqueries) {
            Some(cols) => self.distinct_bound(input, &cols).unwrap_or(input_rows).min(input_rows),
            None => input_rows,
        }
    }

    /// An upper bound on the distinct values of columns `cols` of `plan`'s rows: the rows
    /// of the smallest part of the plan they all come from.
    fn distinct_bound(&self, plan: &Plan, cols: &[usize]) -> Option<f64> {
        crate::depth::ensure_stack().ok()?;
        let here = || self.row(plan, false).map(|(r, _)| r);
        if cols.is_empty() {
            return Some(1.0);
        }
        match plan {
            Plan::Join { left, right, .. } | Plan::HashJoin { left, right, .. } => {
                let lw = width(left)?;
                if cols.iter().all(|&c| c < lw) {
                    self.distinct_bound(left, cols)
                } else if cols.iter().all(|&c| c >= lw) {
                    let shifted: Vec<usize> = cols.iter().map(|c| c - lw).collect();
                    // A correlated inner side runs per outer row: its rows are per run.
                    let (l, _) = self.row(left, false)?;
                    let per_run = self.distinct_bound(right, &shifted)?;
                    Some(if matches!(plan, Plan::Join { correlated: true, .. }) { per_run * l } else { per_run })
                } else {
                    here()
                }
            }
            Plan::Project { input, exprs } => {
                let mut inner = Vec::with_capacity(cols.len());
                for &c in cols {
                    match exprs.get(c) {
                        Some(Expr::Column(k)) => inner.push(*k),
                        _ => return here(),
                    }
                }
                self.distinct_bound(input, &inner)
            }
            Plan::Filter { input, .. } | Plan::Sort { input, .. } | Plan::Limit { input, .. } => {
                Some(self.distinct_bound(input, cols)?.min(here()?))
            }
            _ => here(),
        }
    }

    /// The share of a table's rows a key range over `cols` reads: per equality on a
    /// constant its selectivity, on a value from another row 1 / NDV; a range on the next
    /// column as estimated, or a third when its bounds are not constants.
    fn range_share(&self, est: &Estimator, cols: &[usize], r: &KeyRange) -> f64 {
        let mut share = 1.0;
        for (e, &c) in r.eq.iter().zip(cols) {
            share *= if (self.constant)(e).is_some() {
                est.selectivity(&Expr::Binary(BinOp::Eq, Box::new(Expr::Column(c)), Box::new(e.clone())))
            } else {
                1.0 / est.ndv(c)
            };
        }
        if r.lower.is_some() || r.upper.is_some() {
            let Some(&c) = cols.get(r.eq.len()) else { return share };
            let bound = |b: &Option<(Expr, bool)>, inclusive_op: BinOp, op: BinOp| -> f64 {
                match b {
                    None => 1.0,
                    Some((e, inclusive)) if (self.constant)(e).is_some() => est.selectivity(&Expr::Binary(
                        if *inclusive { inclusive_op } else { op },
                        Box::new(Expr::Column(c)),
                        Box::new(e.clone()),
                    )),
                    Some(_) => UNKNOWN_RANGE.sqrt(),
                }
            };
            let lower = bound(&r.lower, BinOp::GtEq, BinOp::Gt);
            let upper = bound(&r.upper, BinOp::LtEq, BinOp::Lt);
            // Both bounds from statistics: the rows between them are lower + upper - 1.
            share *=
                if r.lower.is_some() && r.upper.is_some() { (lower + upper - 1.0).max(0.0) } else { lower * upper };
        }
        share
    }
}

/// The value of an expression that depends on no row, parameter or subquery (None when it
/// does, or when it fails).
pub fn constant(e: &Expr) -> Option<Value> {
    crate::rules::constant_value(e, &[])
}

/// Columns in the rows `plan` produces (None for a recursive CTE's work table).
pub(crate) fn width(plan: &Plan) -> Option<usize> {
    Some(match plan {
        Plan::Dual => 0,
        Plan::Values(rows) => rows.first().map_or(0, Vec::len),
        Plan::Scan { table, .. } => table.columns.len(),
        Plan::Project { exprs, .. } => exprs.len(),
        Plan::Filter { input, .. }
        | Plan::Sort { input, .. }
        | Plan::Limit { input, .. }
        | Plan::Distinct { input } => width(input)?,
        Plan::Join { left, right_width, .. } | Plan::HashJoin { left, right_width, .. } => width(left)? + right_width,
        Plan::Aggregate { group, aggs, .. } => group.len() + aggs.len(),
        Plan::Window { input, calls } => width(input)? + calls.len(),
        Plan::Truncate { width, .. } => *width,
        Plan::Union { inputs, .. } => width(inputs.first()?)?,
        Plan::SetOp { left, .. } => width(left)?,
        Plan::Recursive { seed, .. } => width(seed)?,
        Plan::WorkTable(_) => return None,
    })
}

/// Estimated rows `plan` produces per run, by the tables' statistics (None without them):
/// what the column engine weighs to choose a hash join's build side.
pub fn estimated_rows(plan: &Plan, subqueries: &[SubqueryPlan], catalog: &Catalog) -> Option<f64> {
    let no_replica = |_: i64| false;
    let model = Model {
        catalog,
        replica: &no_replica,
        subqueries,
        constant: &constant,
        like: crate::stats::DEFAULT_LIKE_SELECTIVITY,
    };
    model.row(plan, false).map(|(rows, _)| rows)
}
