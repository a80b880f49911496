//! The executor: runs a `Plan` inside a transaction and returns its rows.
//!
//! Scans, filters, projections, the outer sides of joins, LIMIT and truncation run as
//! streams of batches (`stream`); aggregation, sorting, DISTINCT, set operations, window
//! functions and recursive CTEs hold their input. `execute` collects a plan's rows. What
//! every operator holds is charged to the statement's memory tracker (`context::Charge`),
//! so a statement that would outgrow its quota fails with 8175 instead of taking the
//! machine's memory. Table scans (`scan`) read the store in growing batches and stop as
//! soon as they have the rows a pushed-down LIMIT asks for.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use rust_decimal::prelude::{FromPrimitive, ToPrimitive};
use rust_decimal::Decimal;
use strata_codec::memcmp;
use strata_common::{Code, Error, Result, Value};
use strata_txn::Transaction;

use crate::context::Charge;
use crate::expr::{
    AggCall, AggFunc, BinOp, EvalCtx, Expr, FrameBound, Row, SubqueryKind, SubqueryValue, SubqueryValues, WindowCall,
    WindowFunc,
};
use crate::interrupt::checkpoint;
use crate::plan::{JoinKind, Plan, SubqueryPlan};
use crate::{FastMap as HashMap, FastSet as HashSet};

mod scan;
mod stream;

pub use scan::{scan, scan_batches, scan_limited, PointGet, RowSink, ScanBatch, ScanStream};
pub use stream::Stream;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// State of one statement's execution.
pub struct ExecCtx<'a> {
    /// The transaction.
    pub txn: &'a mut Transaction,
    /// Prepared statement parameters.
    pub params: &'a [Value],
    /// The statement's subqueries.
    pub subqueries: Arc<Vec<SubqueryPlan>>,
    /// Enclosing rows (innermost last).
    pub outer: Vec<Row>,
    cache: HashMap<usize, SubqueryValue>,
    /// Memory held by cached subquery results.
    cache_charge: Charge,
    /// Results of correlated subqueries by the values of the enclosing row's columns they
    /// read (TiDB's apply cache): a subquery run per joined row repeats for equal keys.
    apply: ApplyCache,
    /// The rows of the round before, per recursive CTE being run.
    work_tables: HashMap<usize, Arc<Vec<Row>>>,
    /// Scans (by the address of their plan node) that read the table's columnar replica
    /// through this engine instead of the row store (see `cost::replica_scans`).
    pub replica_scans: Option<(Arc<dyn crate::column::ColumnEngine>, std::collections::HashSet<usize>)>,
    /// EXPLAIN ANALYZE: what each operator (by the address of its plan node) did.
    pub profile: Option<std::collections::HashMap<usize, OpProfile>>,
    /// Rows an index lookup join read ahead for its next lookups (`scan::prefetch_points`).
    prefetched: Option<Prefetched>,
}

/// Stored rows read in one batch for the point lookups an index lookup join is about to
/// make, by row key (None: no such row). Valid while the join works through the left rows
/// they were read for: nothing writes in between.
struct Prefetched {
    /// The looked-up table.
    table: i64,
    rows: HashMap<Vec<u8>, Option<Vec<u8>>>,
    _charge: Charge,
}

/// What one operator did in a statement (EXPLAIN ANALYZE).
#[derive(Clone, Copy, Debug, Default)]
pub struct OpProfile {
    /// Rows it produced, over all its runs.
    pub rows: u64,
    /// Times it was run (a correlated subquery's or lookup join's inner side: once per
    /// outer row that was not answered from the apply cache).
    pub runs: u64,
    /// Time spent pulling its rows, its inputs' included.
    pub time: std::time::Duration,
}

/// A row read from a table with its key.
pub struct TableRow {
    /// The row key.
    pub key: Vec<u8>,
    /// The columns.
    pub row: Row,
    /// Hidden row id, for tables without a primary key.
    pub row_id: Option<i64>,
}

impl<'a> ExecCtx<'a> {
    /// A context for one statement.
    pub fn new(txn: &'a mut Transaction, params: &'a [Value], subqueries: Arc<Vec<SubqueryPlan>>) -> ExecCtx<'a> {
        ExecCtx {
            txn,
            params,
            subqueries,
            outer: Vec::new(),
            cache: HashMap::default(),
            cache_charge: Charge::new(),
            apply: ApplyCache::default(),
            work_tables: HashMap::default(),
            replica_scans: None,
            profile: None,
            prefetched: None,
        }
    }

    /// The stored values at `keys` of table `table` if all were read ahead.
    fn prefetched_values(&self, table: i64, keys: &[Vec<u8>]) -> Option<Vec<Option<Vec<u8>>>> {
        let p = self.prefetched.as_ref().filter(|p| p.table == table)?;
        keys.iter().map(|k| p.rows.get(k).cloned()).collect()
    }

    fn eval_ctx<'b>(&'b self, sub: &'b SubqueryValues) -> EvalCtx<'b> {
        EvalCtx { params: self.params, outer: &self.outer, subqueries: sub }
    }

    /// Evaluates a row-independent expression.
    pub fn eval_const(&self, e: &Expr) -> Result<Value> {
        let empty = SubqueryValues::default();
        e.eval(&[], &self.eval_ctx(&empty))
    }

    /// Computes the subqueries `ids` for `row`.
    pub async fn subqueries_for(&mut self, ids: &[usize], row: &Row) -> Result<SubqueryValues> {
        // Per-row subqueries can run long; let other connections' tasks in.
        tokio::task::consume_budget().await;
        let mut out = SubqueryValues { values: vec![None; self.subqueries.len()] };
        for &id in ids {
            if let Some(v) = self.cache.get(&id) {
                out.values[id] = Some(v.clone());
                continue;
            }
            let sq = self.subqueries.clone();
            let sq = sq.get(id).ok_or_else(|| Error::internal("unknown subquery"))?;
            let key = if sq.correlated { self.apply.key(id, &self.subqueries, row) } else { None };
            if let Some(v) = key.as_ref().and_then(|k| self.apply.results.get(k)) {
                out.values[id] = Some(v.clone());
                continue;
            }
            self.outer.push(row.clone());
            let rows = execute(&sq.plan, self).await;
            self.outer.pop();
            let rows = rows?;
            let v = match sq.kind {
                SubqueryKind::Scalar => {
                    if rows.len() > 1 {
                        return Err(Error::user(Code::SubqueryNo1Row, "Subquery returns more than 1 row"));
                    }
                    SubqueryValue::Scalar(
                        rows.into_iter().next().and_then(|r| r.into_iter().next()).unwrap_or(Value::Null),
                    )
                }
                SubqueryKind::Exists => SubqueryValue::Exists(!rows.is_empty()),
                SubqueryKind::Rows => {
                    let (rows, charge) = rows.into_parts();
                    if !sq.correlated {
                        self.cache_charge.absorb(charge);
                    }
                    SubqueryValue::Rows(rows)
                }
            };
            if !sq.correlated {
                self.cache.insert(id, v.clone());
            } else if let Some(key) = key {
                self.apply.insert(key, &v);
            }
            out.values[id] = Some(v);
        }
        Ok(out)
    }

    /// Evaluates `e` on `row`, running its subqueries first. The operands of AND / OR
    /// with subqueries are evaluated one at a time — those without subqueries first, then
    /// those whose subqueries run once, correlated ones last — and a decisive operand
    /// stops the rest: `a IN (SELECT ..) AND b > (SELECT .. correlated)` runs the
    /// correlated subquery only for rows the first part keeps.
    pub async fn eval(&mut self, e: &Expr, row: &Row) -> Result<Value> {
        let ids = e.subquery_ids();
        if let Expr::Binary(op @ (BinOp::And | BinOp::Or), ..) = e {
            if !ids.is_empty() {
                return self.eval_logic(*op, e, row).await;
            }
        }
        let sub = if ids.is_empty() { SubqueryValues::default() } else { self.subqueries_for(&ids, row).await? };
        e.eval(row, &self.eval_ctx(&sub))
    }
}

impl ExecCtx<'_> {
    /// `e`, a chain of `op` (AND or OR), with short-circuiting over its operands.
    async fn eval_logic(&mut self, op: BinOp, e: &Expr, row: &Row) -> Result<Value> {
        let mut operands = Vec::new();
        let mut stack = vec![e];
        while let Some(x) = stack.pop() {
            match x {
                Expr::Binary(o, a, b) if *o == op => {
                    stack.push(b);
                    stack.push(a);
                }
                other => operands.push(other),
            }
        }
        let subqueries = self.subqueries.clone();
        let rank = |x: &Expr| {
            let ids = x.subquery_ids();
            if ids.is_empty() {
                0
            } else if ids.iter().any(|&id| subqueries.get(id).is_some_and(|s| s.correlated)) {
                2
            } else {
                1
            }
        };
        operands.sort_by_key(|x| rank(x));
        // AND: false decides, OR: true decides; otherwise NULL if any operand was NULL.
        let decisive = op == BinOp::Or;
        let mut unknown = false;
        for x in operands {
            let ids = x.subquery_ids();
            let sub = if ids.is_empty() { SubqueryValues::default() } else { self.subqueries_for(&ids, row).await? };
            match x.eval(row, &self.eval_ctx(&sub))?.as_bool() {
                Some(b) if b == decisive => return Ok(Value::Int(i64::from(decisive))),
                Some(_) => {}
                None => unknown = true,
            }
        }
        Ok(if unknown { Value::Null } else { Value::Int(i64::from(!decisive)) })
    }
}

/// Memory the apply cache of one statement may hold; past it, results are not kept.
const APPLY_CACHE_BYTES: usize = 32 << 20;

/// Cached results of correlated subqueries (see `ExecCtx::apply`).
#[derive(Default)]
struct ApplyCache {
    /// Per subquery id: the columns of the enclosing row it reads, or None when its result
    /// depends on more than them (see [`apply_key_columns`]).
    columns: HashMap<usize, Option<Vec<usize>>>,
    results: HashMap<(usize, Vec<u8>), SubqueryValue>,
    charge: Charge,
    full: bool,
}

impl ApplyCache {
    /// The cache key of subquery `id` run for `row`, if its results can be cached.
    fn key(&mut self, id: usize, subqueries: &[SubqueryPlan], row: &Row) -> Option<(usize, Vec<u8>)> {
        let columns = self
            .columns
            .entry(id)
            .or_insert_with(|| subqueries.get(id).and_then(|s| apply_key_columns(&s.plan, subqueries)))
            .as_ref()?;
        let mut key = Vec::new();
        for &c in columns {
            exact_key(&mut key, row.get(c)?);
        }
        Some((id, key))
    }

    fn insert(&mut self, key: (usize, Vec<u8>), v: &SubqueryValue) {
        if self.full {
            return;
        }
        let bytes = 64
            + key.1.len()
            + match v {
                SubqueryValue::Rows(rows) => rows.iter().map(|r| crate::context::row_size(r)).sum(),
                SubqueryValue::Scalar(v) => crate::context::row_size(std::slice::from_ref(v)),
                SubqueryValue::Exists(_) => 0,
            };
        if self.charge.bytes() + bytes > APPLY_CACHE_BYTES || self.charge.add(bytes).is_err() {
            // Past its share (or the statement's quota): run the rest without caching.
            self.full = true;
            self.results.clear();
            self.charge.sub(self.charge.bytes());
            return;
        }
        self.results.insert(key, v.clone());
    }
}

/// Appends an encoding of `v` that tells apart every two values a subquery could tell
/// apart (type, scale and case included).
fn exact_key(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Int(i) => {
            out.push(1);
            out.extend_from_slice(&i.to_le_bytes());
        }
        Value::Bytes(b) => {
            out.push(2);
            out.extend_from_slice(&(b.len() as u64).to_le_bytes());
            out.extend_from_slice(b);
        }
        other => {
            let text = format!("{other:?}");
            out.push(3);
            out.extend_from_slice(&(text.len() as u64).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        }
    }
}

/// The columns of the enclosing row that a correlated subquery's `plan` reads, when its
/// result depends on nothing else the statement changes while it runs: no row further out,
/// no volatile function (RAND, UUID), no locking read, no recursive CTE's work table.
pub(crate) fn apply_key_columns(plan: &Plan, subqueries: &[SubqueryPlan]) -> Option<Vec<usize>> {
    fn plan_refs(plan: &Plan, subs: &[SubqueryPlan], depth: usize, out: &mut BTreeSet<usize>) -> bool {
        if crate::depth::ensure_stack().is_err() {
            return false;
        }
        if matches!(plan, Plan::WorkTable(_) | Plan::Scan { lock: true, .. }) {
            return false;
        }
        if !plan.own_exprs().into_iter().all(|e| expr_refs(e, subs, depth, out)) {
            return false;
        }
        match plan {
            Plan::Join { left, right, correlated: true, .. } => {
                plan_refs(left, subs, depth, out) && plan_refs(right, subs, depth + 1, out)
            }
            other => other.children().into_iter().all(|c| plan_refs(c, subs, depth, out)),
        }
    }
    fn expr_refs(e: &Expr, subs: &[SubqueryPlan], depth: usize, out: &mut BTreeSet<usize>) -> bool {
        let mut ok = true;
        let mut nested = Vec::new();
        e.walk(&mut |x| match x {
            Expr::Outer(d, i) if *d == depth => {
                out.insert(*i);
            }
            Expr::Outer(d, _) if *d > depth => ok = false,
            Expr::Func(name, _) if matches!(name.as_str(), "rand" | "uuid" | "uuid_short" | "sysdate") => ok = false,
            Expr::Subquery(id, _) | Expr::InSubquery(_, id, _) => nested.push(*id),
            _ => {}
        });
        ok && nested.into_iter().all(|id| subs.get(id).is_some_and(|s| plan_refs(&s.plan, subs, depth + 1, out)))
    }
    let mut out = BTreeSet::new();
    plan_refs(plan, subqueries, 0, &mut out).then(|| out.into_iter().collect())
}

/// Rows an operator produced, with their memory charged to the statement (see
/// `context`). Dropping them, or the iterator they were turned into, gives the memory back.
#[derive(Debug, Default)]
pub struct Rows {
    rows: Vec<Row>,
    charge: Charge,
}

impl Rows {
    /// No rows, charging the running statement.
    pub fn new() -> Rows {
        Rows { rows: Vec::new(), charge: Charge::new() }
    }

    /// Appends a row, charging its size (8175 past the statement's quota).
    pub fn push(&mut self, row: Row) -> Result<()> {
        self.charge.add_row(&row)?;
        self.rows.push(row);
        Ok(())
    }

    /// Appends all of `other`.
    pub fn append(&mut self, mut other: Rows) {
        self.rows.append(&mut other.rows);
        self.charge.absorb(std::mem::take(&mut other.charge));
    }

    /// The rows, no longer tracked.
    pub fn into_vec(self) -> Vec<Row> {
        self.rows
    }

    /// The rows and their charge, for an operator that keeps them in another form.
    pub fn into_parts(self) -> (Vec<Row>, Charge) {
        (self.rows, self.charge)
    }

    /// Keeps the rows `keep` accepts.
    fn retain(&mut self, keep: impl FnMut(&Row) -> bool) {
        self.rows.retain(keep);
    }
}

impl std::ops::Deref for Rows {
    type Target = [Row];
    fn deref(&self) -> &[Row] {
        &self.rows
    }
}

impl std::ops::DerefMut for Rows {
    fn deref_mut(&mut self) -> &mut [Row] {
        &mut self.rows
    }
}

/// Iterates owned rows; their charge is given back when the iteration is dropped.
pub struct RowsIter {
    inner: std::vec::IntoIter<Row>,
    _charge: Charge,
}

impl RowsIter {
    /// The rows not taken yet.
    pub fn remaining(&self) -> &[Row] {
        self.inner.as_slice()
    }
}

impl Iterator for RowsIter {
    type Item = Row;
    fn next(&mut self) -> Option<Row> {
        self.inner.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl IntoIterator for Rows {
    type Item = Row;
    type IntoIter = RowsIter;
    fn into_iter(self) -> RowsIter {
        RowsIter { inner: self.rows.into_iter(), _charge: self.charge }
    }
}

impl<'a> IntoIterator for &'a Rows {
    type Item = &'a Row;
    type IntoIter = std::slice::Iter<'a, Row>;
    fn into_iter(self) -> std::slice::Iter<'a, Row> {
        self.rows.iter()
    }
}

/// Evaluates a LIMIT/OFFSET count (NULL for none; negative counts as 0).
/// The row count a LIMIT/OFFSET expression gives (None: no limit).
pub fn count_of(ctx: &ExecCtx, e: Option<&Expr>) -> Result<Option<usize>> {
    match e {
        None => Ok(None),
        Some(e) => match ctx.eval_const(e)? {
            Value::Null => Ok(None),
            v => Ok(Some(v.as_i64().unwrap_or(0).max(0) as usize)),
        },
    }
}

/// Runs a plan and returns all its rows: its stream (`Stream::open`) collected.
pub fn execute<'a, 'c>(plan: &'a Plan, ctx: &'a mut ExecCtx<'c>) -> BoxFuture<'a, Result<Rows>>
where
    'c: 'a,
{
    Box::pin(async move {
        let mut s = Stream::build(plan, ctx.profile.is_some());
        let Some(mut out) = s.next(ctx).await? else { return Ok(Rows::new()) };
        while let Some(batch) = s.next(ctx).await? {
            out.append(batch);
        }
        Ok(out)
    })
}

/// Runs a plan, handing its rows to `out` batch by batch until it ends or `out` is full
/// (sql_select_limit).
pub async fn execute_into(plan: &Plan, ctx: &mut ExecCtx<'_>, out: &mut crate::result::QueryOutput<'_>) -> Result<()> {
    let mut s = Stream::build(plan, ctx.profile.is_some());
    while !out.full() {
        let Some(batch) = s.next(ctx).await? else { break };
        out.push(batch.into_vec()).await?;
    }
    Ok(())
}

/// Runs an operator that is not pipelined (`Stream::Whole`): all of its output at once.
fn whole<'a, 'c>(plan: &'a Plan, ctx: &'a mut ExecCtx<'c>) -> BoxFuture<'a, Result<Rows>>
where
    'c: 'a,
{
    Box::pin(async move {
        crate::depth::ensure_stack()?;
        let mut out = Rows::new();
        match plan {
            Plan::Dual => out.push(Vec::new())?,
            Plan::Values(rows) => {
                for r in rows {
                    let mut vals = Vec::with_capacity(r.len());
                    for e in r {
                        vals.push(ctx.eval(e, &Vec::new()).await?);
                    }
                    out.push(vals)?;
                }
            }
            Plan::Scan { .. }
            | Plan::Filter { .. }
            | Plan::Project { .. }
            | Plan::Join { .. }
            | Plan::HashJoin { .. }
            | Plan::Limit { .. }
            | Plan::Truncate { .. } => return Err(Error::internal("a pipelined operator run whole")),
            Plan::Aggregate { input, group, aggs, rollup } => {
                let mut input = Stream::build(input, ctx.profile.is_some());
                out = aggregate(ctx, &mut input, group, aggs, *rollup).await?;
            }
            Plan::Sort { input, keys } => {
                let (rows, charge) = execute(input, ctx).await?.into_parts();
                let rows = sort_by_keys(ctx, rows, keys, |r| r).await?;
                out = Rows { rows, charge };
            }
            Plan::Distinct { input } => {
                out = execute(input, ctx).await?;
                dedup(&mut out)?;
            }
            Plan::Union { inputs, all } => {
                for i in inputs {
                    out.append(execute(i, ctx).await?);
                }
                if !*all {
                    dedup(&mut out)?;
                }
            }
            Plan::Recursive { seed, step, id, all, max_depth } => {
                out = recursive_cte(ctx, seed, step, *id, *all, *max_depth).await?;
            }
            Plan::Window { input, calls } => {
                let rows = execute(input, ctx).await?;
                out = window(ctx, rows, calls).await?;
            }
            Plan::WorkTable(id) => {
                let rows = ctx.work_tables.get(id).cloned().unwrap_or_default();
                for r in rows.iter() {
                    out.push(r.clone())?;
                }
            }
            Plan::SetOp { left, right, intersect, all } => {
                let l = execute(left, ctx).await?;
                let r = execute(right, ctx).await?;
                out = set_op(l, r, *intersect, *all).await?;
            }
        }
        Ok(out)
    })
}

/// Sorts items by keys evaluated on each item's row (`desc` per key; NULLs first ascending).
/// The sort keys are charged to the statement while they live.
pub async fn sort_by_keys<T>(
    ctx: &mut ExecCtx<'_>,
    items: Vec<T>,
    keys: &[(Expr, bool)],
    row_of: impl Fn(&T) -> &Row,
) -> Result<Vec<T>> {
    // Keys that are columns of the rows: compared in place, not copied out (a string key
    // was cloned per row).
    let columns: Option<Vec<(usize, bool)>> =
        keys.iter().map(|(e, desc)| if let Expr::Column(i) = e { Some((*i, *desc)) } else { None }).collect();
    if let Some(columns) = columns {
        let width = columns.iter().map(|(i, _)| i + 1).max().unwrap_or(0);
        if items.iter().all(|item| row_of(item).len() >= width) {
            checkpoint().await?;
            let mut items = items;
            items.sort_by(|a, b| cmp_at(row_of(a), row_of(b), &columns));
            return Ok(items);
        }
    }
    let mut keyed = Vec::with_capacity(items.len());
    let mut key_bytes = Charge::new();
    for item in items {
        checkpoint().await?;
        let mut k = Vec::with_capacity(keys.len());
        for (e, _) in keys {
            k.push(ctx.eval(e, row_of(&item)).await?);
        }
        key_bytes.add_row(&k)?;
        keyed.push((k, item));
    }
    let at: Vec<(usize, bool)> = keys.iter().enumerate().map(|(i, (_, desc))| (i, *desc)).collect();
    keyed.sort_by(|a, b| cmp_at(&a.0, &b.0, &at));
    Ok(keyed.into_iter().map(|(_, item)| item).collect())
}

/// Orders `a` and `b` by their values at `at` (index, descending), the first that differ.
fn cmp_at(a: &[Value], b: &[Value], at: &[(usize, bool)]) -> std::cmp::Ordering {
    for &(i, desc) in at {
        let o = a[i].sort_cmp(&b[i]);
        let o = if desc { o.reverse() } else { o };
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    std::cmp::Ordering::Equal
}

/// The encoded join key of `row`, or None if any key value is NULL (NULL never joins).
async fn join_key(ctx: &mut ExecCtx<'_>, keys: &[Expr], row: &Row) -> Result<Option<Vec<u8>>> {
    let mut key = Vec::new();
    for k in keys {
        let v = ctx.eval(k, row).await?;
        if v.is_null() {
            return Ok(None);
        }
        encode_join_key(&mut key, &v);
    }
    Ok(Some(key))
}

/// Appends `left ++ right` for each candidate right row satisfying `on`; for a LEFT join
/// with no match, `left` padded with NULLs.
async fn join_row(
    ctx: &mut ExecCtx<'_>,
    left: Row,
    candidates: &[Row],
    on: Option<&Expr>,
    kind: JoinKind,
    right_width: usize,
    out: &mut Rows,
) -> Result<()> {
    let mut matched = false;
    for r in candidates {
        checkpoint().await?;
        let mut joined = left.clone();
        joined.extend(r.iter().cloned());
        let ok = match on {
            Some(p) => ctx.eval(p, &joined).await?.as_bool() == Some(true),
            None => true,
        };
        if ok {
            matched = true;
            out.push(joined)?;
        }
    }
    if !matched && kind == JoinKind::Left {
        let mut joined = left;
        joined.extend(std::iter::repeat_n(Value::Null, right_width));
        out.push(joined)?;
    }
    Ok(())
}

/// A value in the form that makes values equal under `sql_cmp` encode alike, for hash
/// keys: numbers of any kind by value (1 = 1.0 = 1.00), dates as datetimes. Strings are
/// `encode_join_key`'s (trimmed where they are encoded).
fn normalize_join_key(v: &Value) -> Value {
    fn decimal_key(d: Decimal) -> Value {
        let n = d.normalize();
        if n.scale() == 0 {
            if let Some(i) = n.to_i64() {
                return Value::Int(i);
            }
        }
        Value::Decimal(n)
    }
    match v {
        Value::UInt(u) if *u <= i64::MAX as u64 => Value::Int(*u as i64),
        Value::Decimal(d) => decimal_key(*d),
        Value::Double(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Value::Int(*f as i64),
        Value::Double(f) => match Decimal::from_f64(*f) {
            Some(d) if d.to_f64() == Some(*f) => decimal_key(d),
            _ => Value::Double(*f),
        },
        Value::Date(d) => Value::DateTime(*d),
        other => other.clone(),
    }
}

/// Appends the hash-key encoding of `v`: strings without trailing spaces (PAD SPACE, as
/// `table::encode_key`), other kinds as `normalize_join_key` makes them; the kinds that need
/// no normalizing are encoded without a copy.
fn encode_join_key(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null | Value::Int(_) | Value::Time(_) | Value::DateTime(_) => memcmp::encode_value(out, v),
        Value::Bytes(_) => crate::table::encode_key(out, v),
        other => memcmp::encode_value(out, &normalize_join_key(other)),
    }
}

/// Removes duplicate rows, keeping the first of each; the set of seen rows is charged while
/// it lives.
fn dedup(rows: &mut Rows) -> Result<()> {
    let mut seen = HashSet::default();
    let mut held = Charge::new();
    let mut keys = Vec::with_capacity(rows.len());
    for r in rows.iter() {
        let k = distinct_key(r);
        held.add(k.len() + std::mem::size_of::<Vec<u8>>())?;
        keys.push(seen.insert(k));
    }
    let mut first = keys.into_iter();
    rows.retain(|_| first.next().unwrap_or(false));
    Ok(())
}

/// The key under which set operations and DISTINCT compare rows.
fn distinct_key(r: &Row) -> Vec<u8> {
    // Each value takes a flag and at least 8 bytes; a string a ninth more than its length.
    let mut k =
        Vec::with_capacity(r.iter().map(|v| 9 + if let Value::Bytes(b) = v { b.len() * 9 / 8 } else { 0 }).sum());
    for v in r {
        encode_join_key(&mut k, v);
    }
    k
}

/// Runs a recursive CTE: the seed, then rounds of `step` over the previous round's rows
/// (UNION DISTINCT drops rows produced before) until a round adds nothing; more than
/// `max_depth` rounds is MySQL's 3636.
async fn recursive_cte(
    ctx: &mut ExecCtx<'_>,
    seed: &Plan,
    step: &Plan,
    id: usize,
    all: bool,
    max_depth: u64,
) -> Result<Rows> {
    let mut seen: HashSet<Vec<u8>> = HashSet::default();
    let mut held = Charge::new();
    let mut out = Rows::new();
    let mut work = Vec::new();
    for r in execute(seed, ctx).await? {
        if admit(&r, all, &mut seen, &mut held)? {
            work.push(r.clone());
            out.push(r)?;
        }
    }
    let mut rounds = 0u64;
    let saved = ctx.work_tables.remove(&id);
    let result = async {
        while !work.is_empty() {
            ctx.work_tables.insert(id, Arc::new(std::mem::take(&mut work)));
            let produced = execute(step, ctx).await?;
            for r in produced {
                checkpoint().await?;
                if admit(&r, all, &mut seen, &mut held)? {
                    work.push(r.clone());
                    out.push(r)?;
                }
            }
            if !work.is_empty() {
                rounds += 1;
                if rounds > max_depth {
                    return Err(Error::user(
                        Code::CteMaxRecursionDepth,
                        format!(
                            "Recursive query aborted after {} iterations. Try increasing @@cte_max_recursion_depth to a larger value.",
                            rounds
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
    .await;
    ctx.work_tables.remove(&id);
    if let Some(s) = saved {
        ctx.work_tables.insert(id, s);
    }
    result.map(|_| out)
}

/// Whether a recursive CTE keeps row `r`: always under UNION ALL, under UNION DISTINCT only
/// the first time (`seen` is charged to the statement).
fn admit(r: &Row, all: bool, seen: &mut HashSet<Vec<u8>>, held: &mut Charge) -> Result<bool> {
    if all {
        return Ok(true);
    }
    let k = distinct_key(r);
    held.add(k.len() + 48)?;
    Ok(seen.insert(k))
}

/// INTERSECT / EXCEPT, DISTINCT or ALL: `right`'s rows are counted, then `left`'s kept or dropped in
/// order. Without ALL the result has no duplicates.
async fn set_op(left: Rows, right: Rows, intersect: bool, all: bool) -> Result<Rows> {
    let mut counts: HashMap<Vec<u8>, usize> = HashMap::default();
    let mut held = Charge::new();
    for r in right.iter() {
        checkpoint().await?;
        let k = distinct_key(r);
        let len = k.len();
        let n = counts.entry(k).or_insert(0);
        if *n == 0 {
            held.add(len + 48)?;
        }
        *n += 1;
    }
    drop(right);
    let mut out = Rows::new();
    for row in left {
        checkpoint().await?;
        let k = distinct_key(&row);
        let n = counts.get(&k).copied().unwrap_or(0);
        let keep = match (intersect, all) {
            (true, true) => {
                if n > 0 {
                    counts.insert(k, n - 1);
                }
                n > 0
            }
            // The first match is kept; later duplicates find the count at zero.
            (true, false) => {
                if n > 0 {
                    counts.insert(k, 0);
                }
                n > 0
            }
            (false, true) => {
                if n > 0 {
                    counts.insert(k, n - 1);
                }
                n == 0
            }
            // A row kept once is recorded so that its duplicates are dropped.
            (false, false) => {
                if n == 0 {
                    held.add(k.len() + 48)?;
                    counts.insert(k, 1);
                }
                n == 0
            }
        };
        if keep {
            out.push(row)?;
        }
    }
    Ok(out)
}

#[derive(Clone)]
enum Acc {
    Count(i64),
    Sum(Option<Value>),
    Avg(Option<Value>, i64),
    Min(Option<Value>),
    Max(Option<Value>),
    First(Option<Value>),
    /// GROUP_CONCAT's text so far, and whether it was cut at `group_concat_max_len`.
    Concat(Option<Vec<u8>>, bool),
}

fn new_acc(f: AggFunc) -> Acc {
    match f {
        AggFunc::CountStar | AggFunc::Count => Acc::Count(0),
        AggFunc::Sum => Acc::Sum(None),
        AggFunc::Avg => Acc::Avg(None, 0),
        AggFunc::Min => Acc::Min(None),
        AggFunc::Max => Acc::Max(None),
        AggFunc::First | AggFunc::Grouping => Acc::First(None),
        AggFunc::GroupConcat => Acc::Concat(None, false),
    }
}

fn add_values(a: Option<Value>, v: &Value) -> Result<Option<Value>> {
    // SUM over an integer column, row after row: the decimal addition `arith` would do,
    // without converting the value and dispatching on both operands (overflow still goes
    // through `arith` for its error).
    if let (Some(Value::Decimal(acc)), Value::Int(i)) = (&a, v) {
        if let Some(sum) = acc.checked_add(Decimal::from(*i)) {
            return Ok(Some(Value::Decimal(sum)));
        }
    }
    let v = match v {
        Value::Int(_) | Value::UInt(_) => Value::Decimal(v.as_decimal().unwrap_or_default()),
        Value::Decimal(_) | Value::Double(_) => v.clone(),
        other => Value::Double(other.as_f64().unwrap_or(0.0)),
    };
    Ok(Some(match a {
        None => v,
        Some(acc) => crate::expr::binary(crate::expr::BinOp::Add, acc, v)?,
    }))
}

/// One group: its key values, accumulators, and the DISTINCT sets of its aggregates.
type Group = (Row, Vec<Acc>, Vec<HashSet<Vec<u8>>>);

/// Computes window functions over `rows`: each call's value is appended to every row, in
/// call order. Rows keep their input order. Per call the rows are sorted by (partition
/// keys, order keys); the default frame applies: with ORDER BY, from the partition's
/// start to the current row's last peer; without, the whole partition.
async fn window(ctx: &mut ExecCtx<'_>, rows: Rows, calls: &[WindowCall]) -> Result<Rows> {
    let (mut rows, charge) = rows.into_parts();
    let mut held = Charge::new();
    for call in calls {
        // Keys per row: partition key bytes, then the order values.
        let mut keyed: Vec<(Vec<u8>, Vec<Value>, usize)> = Vec::with_capacity(rows.len());
        for (i, r) in rows.iter().enumerate() {
            checkpoint().await?;
            let mut pk = Vec::new();
            for p in &call.partition {
                encode_join_key(&mut pk, &ctx.eval(p, r).await?);
            }
            let mut ok = Vec::with_capacity(call.order.len());
            for (o, _) in &call.order {
                ok.push(ctx.eval(o, r).await?);
            }
            held.add(pk.len() + 48 + ok.len() * 32)?;
            keyed.push((pk, ok, i));
        }
        keyed.sort_by(|a, b| {
            a.0.cmp(&b.0).then_with(|| {
                for (k, (_, desc)) in call.order.iter().enumerate() {
                    let o = a.1[k].sort_cmp(&b.1[k]);
                    let o = if *desc { o.reverse() } else { o };
                    if o != std::cmp::Ordering::Equal {
                        return o;
                    }
                }
                std::cmp::Ordering::Equal
            })
        });
        let mut values: Vec<Value> = vec![Value::Null; rows.len()];
        let mut start = 0;
        while start < keyed.len() {
            let mut end = start + 1;
            while end < keyed.len() && keyed[end].0 == keyed[start].0 {
                end += 1;
            }
            let part = &keyed[start..end];
            // Arguments per row of the partition, in sorted order.
            let mut args: Vec<Vec<Value>> = Vec::with_capacity(part.len());
            for (_, _, i) in part {
                let mut a = Vec::with_capacity(call.args.len());
                for e in &call.args {
                    a.push(ctx.eval(e, &rows[*i]).await?);
                }
                args.push(a);
            }
            window_partition(call, part, &args, &mut values)?;
            start = end;
        }
        for (r, v) in rows.iter_mut().zip(values) {
            r.push(v);
        }
    }
    drop(held);
    let mut out = Rows::new();
    drop(charge);
    for r in rows {
        out.push(r)?;
    }
    Ok(out)
}

/// The values of one window call over one partition (rows in window order).
fn window_partition(
    call: &WindowCall,
    part: &[(Vec<u8>, Vec<Value>, usize)],
    args: &[Vec<Value>],
    values: &mut [Value],
) -> Result<()> {
    let n = part.len();
    let peers =
        |a: usize, b: usize| part[a].1.iter().zip(&part[b].1).all(|(x, y)| x.sort_cmp(y) == std::cmp::Ordering::Equal);
    // Each row's peer group (positions, end exclusive).
    let mut peer_start = vec![0; n];
    let mut peer_end = vec![n; n];
    let mut s = 0;
    while s < n {
        let mut e = s + 1;
        while e < n && peers(s, e) {
            e += 1;
        }
        for k in s..e {
            peer_start[k] = s;
            peer_end[k] = e;
        }
        s = e;
    }
    let frame = |k: usize| call.frame.at(k, n, peer_start[k]..peer_end[k]);
    let arg = |k: usize, j: usize| args[k].get(j).cloned().unwrap_or(Value::Null);
    match &call.func {
        WindowFunc::RowNumber => {
            for (k, (_, _, i)) in part.iter().enumerate() {
                values[*i] = Value::Int(k as i64 + 1);
            }
        }
        WindowFunc::Rank | WindowFunc::DenseRank => {
            let mut dense = 0i64;
            for k in 0..n {
                if peer_start[k] == k {
                    dense += 1;
                }
                let rank = peer_start[k] as i64 + 1;
                values[part[k].2] = Value::Int(if call.func == WindowFunc::Rank { rank } else { dense });
            }
        }
        WindowFunc::PercentRank => {
            for k in 0..n {
                let r = if n > 1 { peer_start[k] as f64 / (n - 1) as f64 } else { 0.0 };
                values[part[k].2] = Value::Double(r);
            }
        }
        WindowFunc::CumeDist => {
            for k in 0..n {
                values[part[k].2] = Value::Double(peer_end[k] as f64 / n as f64);
            }
        }
        WindowFunc::Ntile => {
            // The first `n % buckets` buckets get one row more than the others.
            let buckets = arg(0, 0).as_i64().unwrap_or(1).max(1) as usize;
            let size = n / buckets;
            let extra = n % buckets;
            for k in 0..n {
                let b = if k < extra * (size + 1) {
                    k / (size + 1)
                } else {
                    extra + (k - extra * (size + 1)) / size.max(1)
                };
                values[part[k].2] = Value::Int(b as i64 + 1);
            }
        }
        WindowFunc::Lag | WindowFunc::Lead => {
            for k in 0..n {
                let offset = args[k].get(1).and_then(|v| v.as_i64()).unwrap_or(1);
                let target = if call.func == WindowFunc::Lag {
                    (k as i64).checked_sub(offset)
                } else {
                    (k as i64).checked_add(offset)
                };
                let target = target.unwrap_or(-1);
                values[part[k].2] =
                    if target >= 0 && (target as usize) < n { arg(target as usize, 0) } else { arg(k, 2) };
            }
        }
        WindowFunc::FirstValue | WindowFunc::LastValue | WindowFunc::NthValue => {
            for k in 0..n {
                let f = frame(k);
                let at = match call.func {
                    WindowFunc::FirstValue => Some(f.start),
                    WindowFunc::LastValue => f.end.checked_sub(1),
                    _ => arg(k, 1).as_i64().and_then(|p| f.start.checked_add(usize::try_from(p).ok()?.checked_sub(1)?)),
                };
                values[part[k].2] = match at {
                    Some(at) if f.contains(&at) => arg(at, 0),
                    _ => Value::Null,
                };
            }
        }
        WindowFunc::Agg(func) => {
            let mut held = Charge::new();
            // Feeds the row at `at` into an accumulator (NULLs skipped).
            let feed = |acc: &mut Acc, at: usize, held: &mut Charge| -> Result<()> {
                let a = &args[at];
                if *func != AggFunc::CountStar && a.iter().any(|v| v.is_null()) {
                    return Ok(());
                }
                accumulate(acc, a.first().cloned().unwrap_or(Value::Null), usize::MAX, held)
            };
            let start_fixed = call.frame.start == FrameBound::UnboundedPreceding;
            let end_fixed = call.frame.end == FrameBound::UnboundedFollowing;
            if start_fixed || end_fixed {
                // One running accumulator: frames grow forward from the partition's start
                // (or backward from its end), each row's frame containing the previous one's.
                let mut acc = new_acc(*func);
                let order: Box<dyn Iterator<Item = usize>> =
                    if start_fixed { Box::new(0..n) } else { Box::new((0..n).rev()) };
                let mut fed: Option<std::ops::Range<usize>> = None;
                for k in order {
                    let f = frame(k);
                    match &mut fed {
                        None if f.is_empty() => {}
                        None => {
                            for at in f.clone() {
                                feed(&mut acc, at, &mut held)?;
                            }
                            fed = Some(f);
                        }
                        Some(done) => {
                            for at in (done.end..f.end).chain(f.start..done.start.min(f.end)) {
                                feed(&mut acc, at, &mut held)?;
                            }
                            *done = done.start.min(f.start)..done.end.max(f.end);
                        }
                    }
                    values[part[k].2] = acc_value(acc.clone(), 0);
                }
            } else {
                // A sliding frame: each row's frame aggregated on its own (n x frame rows:
                // KILL and max_execution_time are checked per row).
                for k in 0..n {
                    crate::interrupt::check()?;
                    let mut acc = new_acc(*func);
                    for at in frame(k) {
                        feed(&mut acc, at, &mut held)?;
                    }
                    values[part[k].2] = acc_value(acc, 0);
                }
            }
        }
    }
    Ok(())
}

/// The value of a finished accumulator (`row_number` names the result row in GROUP_CONCAT's
/// cut warning).
fn acc_value(acc: Acc, row_number: usize) -> Value {
    match acc {
        Acc::Count(n) => Value::Int(n),
        Acc::Sum(s) => s.unwrap_or(Value::Null),
        Acc::Avg(None, _) => Value::Null,
        Acc::Avg(Some(s), n) => match s {
            Value::Decimal(d) => Value::Decimal(crate::expr::div_round(d / Decimal::from(n), d.scale())),
            other => Value::Double(other.as_f64().unwrap_or(0.0) / n as f64),
        },
        Acc::Min(m) | Acc::Max(m) | Acc::First(m) => m.unwrap_or(Value::Null),
        Acc::Concat(c, cut) => {
            if cut {
                crate::context::warn(Code::CutValueGroupConcat, format!("Row {row_number} was cut by GROUP_CONCAT()"));
            }
            c.map(Value::Bytes).unwrap_or(Value::Null)
        }
    }
}

/// Adds one value to an aggregate's accumulator (GROUP_CONCAT's text is charged).
fn accumulate(acc: &mut Acc, v: Value, concat_max: usize, held: &mut Charge) -> Result<()> {
    match acc {
        Acc::Count(n) => *n += 1,
        Acc::Sum(s) => *s = add_values(s.take(), &v)?,
        Acc::Avg(s, n) => {
            *s = add_values(s.take(), &v)?;
            *n += 1;
        }
        Acc::Min(m) => {
            if m.as_ref().is_none_or(|cur| v.sort_cmp(cur) == std::cmp::Ordering::Less) {
                *m = Some(v);
            }
        }
        Acc::Max(m) => {
            if m.as_ref().is_none_or(|cur| v.sort_cmp(cur) == std::cmp::Ordering::Greater) {
                *m = Some(v);
            }
        }
        Acc::First(f) => {
            if f.is_none() {
                *f = Some(v);
            }
        }
        Acc::Concat(c, cut) => {
            if *cut {
                return Ok(());
            }
            let t = v.to_text().unwrap_or_default();
            held.add(t.len().min(concat_max) + 1)?;
            let buf = match c {
                Some(buf) => {
                    buf.push(b',');
                    buf.extend(t);
                    buf
                }
                None => c.insert(t),
            };
            if buf.len() > concat_max {
                // Cut at group_concat_max_len bytes, on a character boundary.
                let mut end = concat_max;
                while end > 0 && (buf[end] & 0xC0) == 0x80 {
                    end -= 1;
                }
                buf.truncate(end);
                *cut = true;
            }
        }
    }
    Ok(())
}

/// A group with these values and fresh accumulators.
fn new_group(vals: Row, aggs: &[AggCall]) -> Group {
    (vals, aggs.iter().map(|a| new_acc(a.func)).collect(), aggs.iter().map(|_| HashSet::default()).collect())
}

/// Groups, DISTINCT sets and GROUP_CONCAT texts are charged to the statement as they grow.
/// With `rollup` every row also feeds the super-aggregate groups of each prefix of the
/// group columns (the rest NULL), and groups come out sorted by their values with each
/// super-aggregate row after the rows it sums up, as MySQL's WITH ROLLUP returns them.
async fn aggregate(
    ctx: &mut ExecCtx<'_>,
    input: &mut Stream<'_>,
    group: &[Expr],
    aggs: &[AggCall],
    rollup: bool,
) -> Result<Rows> {
    let mut index: HashMap<Vec<u8>, usize> = HashMap::default();
    let mut groups: Vec<Group> = Vec::new();
    // Per group: how many trailing group columns are rolled up.
    let mut levels: Vec<usize> = Vec::new();
    let mut held = Charge::new();
    let group_size = std::mem::size_of::<Group>() + aggs.len() * (std::mem::size_of::<Acc>() + 48);
    let concat_max = crate::context::limits().group_concat_max_len;
    let level_count = if rollup { group.len() + 1 } else { 1 };
    let mut targets = Vec::with_capacity(level_count);
    // Without GROUP BY every row feeds the one group: no key to build and look up per row.
    let single = group.is_empty() && !rollup;
    // One aggregate call's argument values, reused from row to row.
    let mut args: Vec<Value> = Vec::new();
    while let Some(rows) = input.next(ctx).await? {
        for r in rows.iter() {
            checkpoint().await?;
            if single {
                if groups.is_empty() {
                    held.add(group_size)?;
                    groups.push(new_group(Vec::new(), aggs));
                    levels.push(0);
                }
                targets.clear();
                targets.push(0);
            } else {
                let mut gvals = Vec::with_capacity(group.len());
                let mut key = Vec::new();
                // End of each group column's encoding in `key`.
                let mut ends = Vec::with_capacity(group.len());
                for g in group {
                    let v = ctx.eval(g, r).await?;
                    encode_join_key(&mut key, &v);
                    ends.push(key.len());
                    gvals.push(v);
                }
                targets.clear();
                for level in 0..level_count {
                    let kept = group.len() - level;
                    let lookup = if rollup {
                        let mut k = vec![level as u8];
                        k.extend_from_slice(&key[..if kept == 0 { 0 } else { ends[kept - 1] }]);
                        k
                    } else {
                        std::mem::take(&mut key)
                    };
                    let gi = match index.get(&lookup) {
                        Some(i) => *i,
                        None => {
                            let mut vals: Row =
                                if rollup { gvals[..kept].to_vec() } else { std::mem::take(&mut gvals) };
                            vals.resize(group.len(), Value::Null);
                            held.add(group_size + 2 * lookup.len())?;
                            held.add_row(&vals)?;
                            groups.push(new_group(vals, aggs));
                            levels.push(level);
                            index.insert(lookup, groups.len() - 1);
                            groups.len() - 1
                        }
                    };
                    targets.push(gi);
                }
            }
            for (ai, call) in aggs.iter().enumerate() {
                if call.func == AggFunc::Grouping {
                    continue;
                }
                args.clear();
                for a in &call.args {
                    args.push(ctx.eval(a, r).await?);
                }
                if call.func != AggFunc::CountStar && call.func != AggFunc::First && args.iter().any(|v| v.is_null()) {
                    continue;
                }
                let distinct_key = if call.distinct {
                    let mut k = Vec::new();
                    for v in &args {
                        encode_join_key(&mut k, v);
                    }
                    Some(k)
                } else {
                    None
                };
                let mut v = if args.is_empty() { Value::Null } else { args.swap_remove(0) };
                for (ti, &gi) in targets.iter().enumerate() {
                    if let Some(k) = &distinct_key {
                        if !groups[gi].2[ai].insert(k.clone()) {
                            continue;
                        }
                        held.add(k.len() + std::mem::size_of::<Vec<u8>>())?;
                    }
                    let value =
                        if ti + 1 == targets.len() { std::mem::replace(&mut v, Value::Null) } else { v.clone() };
                    accumulate(&mut groups[gi].1[ai], value, concat_max, &mut held)?;
                }
            }
        }
    }
    if rollup {
        // Sorted by group values, a rolled-up column after every value of it.
        let n = group.len();
        let mut order: Vec<usize> = (0..groups.len()).collect();
        order.sort_by(|&a, &b| {
            for i in 0..n {
                let (ra, rb) = (i >= n - levels[a], i >= n - levels[b]);
                let o = ra.cmp(&rb).then_with(|| {
                    if ra {
                        std::cmp::Ordering::Equal
                    } else {
                        groups[a].0[i].sort_cmp(&groups[b].0[i])
                    }
                });
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
            std::cmp::Ordering::Equal
        });
        let mut taken: Vec<Option<Group>> = groups.into_iter().map(Some).collect();
        groups = order.iter().filter_map(|&i| taken[i].take()).collect();
        levels = order.iter().map(|&i| levels[i]).collect();
    }
    if groups.is_empty() && group.is_empty() {
        groups.push(new_group(Vec::new(), aggs));
    }
    let mut out = Rows::new();
    let n = group.len();
    for (gi, (gvals, accs, _)) in groups.into_iter().enumerate() {
        let level = levels.get(gi).copied().unwrap_or(0);
        let mut row = gvals;
        let row_number = out.len() + 1;
        for (acc, call) in accs.into_iter().zip(aggs) {
            if call.func == AggFunc::Grouping {
                // GROUPING(a, b, ...): one bit per argument, 1 where that column is rolled up.
                let mut bits = 0i64;
                for a in &call.args {
                    let i = match a {
                        Expr::Literal(v) => v.as_i64().unwrap_or(0) as usize,
                        _ => 0,
                    };
                    bits = (bits << 1) | i64::from(i >= n - level);
                }
                row.push(Value::Int(bits));
                continue;
            }
            row.push(acc_value(acc, row_number));
        }
        out.push(row)?;
    }
    Ok(out)
}
