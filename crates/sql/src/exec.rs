//! The executor: runs a `Plan` inside a transaction and returns its rows.
//!
//! Operators materialize their output (a `Vec` of rows). That keeps each operator a few
//! lines and is fast for the OLTP statements this path serves; large analytical queries
//! belong to the columnar engine, which streams Arrow batches.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use rust_decimal::Decimal;
use strata_codec::keys::{prefix_end, row_prefix};
use strata_codec::memcmp;
use strata_common::{Code, Error, Result, Value};
use strata_txn::Transaction;

use crate::catalog::TableInfo;
use crate::expr::{AggCall, AggFunc, EvalCtx, Expr, Row, SubqueryKind, SubqueryValue, SubqueryValues};
use crate::interrupt::checkpoint;
use crate::plan::{Access, JoinKind, KeyRange, Plan, SubqueryPlan};
use crate::table::{decode_row, handle_from_index_entry, index_value_prefix, pk_prefix, row_key};
use crate::types::ColumnType;

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
        ExecCtx { txn, params, subqueries, outer: Vec::new(), cache: HashMap::new() }
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
                SubqueryKind::Rows => SubqueryValue::Rows(rows),
            };
            if !sq.correlated {
                self.cache.insert(id, v.clone());
            }
            out.values[id] = Some(v);
        }
        Ok(out)
    }

    /// Evaluates `e` on `row`, running its subqueries first.
    pub async fn eval(&mut self, e: &Expr, row: &Row) -> Result<Value> {
        let ids = e.subquery_ids();
        let sub = if ids.is_empty() { SubqueryValues::default() } else { self.subqueries_for(&ids, row).await? };
        e.eval(row, &self.eval_ctx(&sub))
    }
}

/// Runs a plan.
pub fn execute<'a, 'c>(plan: &'a Plan, ctx: &'a mut ExecCtx<'c>) -> BoxFuture<'a, Result<Vec<Row>>>
where
    'c: 'a,
{
    Box::pin(async move {
        crate::depth::ensure_stack()?;
        Ok(match plan {
            Plan::Dual => vec![Vec::new()],
            Plan::Values(rows) => {
                let mut out = Vec::with_capacity(rows.len());
                for r in rows {
                    let mut vals = Vec::with_capacity(r.len());
                    for e in r {
                        vals.push(ctx.eval(e, &Vec::new()).await?);
                    }
                    out.push(vals);
                }
                out
            }
            Plan::Scan { table, access, filter, lock, limit } => {
                let n = match limit {
                    Some(e) => Some(ctx.eval_const(e)?.as_i64().unwrap_or(0).max(0) as usize),
                    None => None,
                };
                scan_limited(ctx, table, access, filter.as_ref(), *lock, n).await?.into_iter().map(|r| r.row).collect()
            }
            Plan::Filter { input, pred } => {
                let rows = execute(input, ctx).await?;
                let ids = pred.subquery_ids();
                let mut out = Vec::with_capacity(rows.len());
                for r in rows {
                    checkpoint().await?;
                    let keep = if ids.is_empty() {
                        let empty = SubqueryValues::default();
                        pred.eval_pred(&r, &ctx.eval_ctx(&empty))?
                    } else {
                        let sub = ctx.subqueries_for(&ids, &r).await?;
                        pred.eval_pred(&r, &ctx.eval_ctx(&sub))?
                    };
                    if keep {
                        out.push(r);
                    }
                }
                out
            }
            Plan::Project { input, exprs } => {
                let rows = execute(input, ctx).await?;
                let ids: Vec<usize> = exprs.iter().flat_map(|e| e.subquery_ids()).collect();
                let mut out = Vec::with_capacity(rows.len());
                for r in rows {
                    checkpoint().await?;
                    let sub =
                        if ids.is_empty() { SubqueryValues::default() } else { ctx.subqueries_for(&ids, &r).await? };
                    let ec = ctx.eval_ctx(&sub);
                    out.push(exprs.iter().map(|e| e.eval(&r, &ec)).collect::<Result<Vec<_>>>()?);
                }
                out
            }
            Plan::Join { left, right, kind, on, right_width, correlated } => {
                let lrows = execute(left, ctx).await?;
                let static_right = if *correlated { None } else { Some(execute(right, ctx).await?) };
                let mut out = Vec::new();
                for l in lrows {
                    checkpoint().await?;
                    let correlated_rows;
                    let rrows: &[Row] = match &static_right {
                        Some(r) => r,
                        None => {
                            ctx.outer.push(l.clone());
                            let r = execute(right, ctx).await;
                            ctx.outer.pop();
                            correlated_rows = r?;
                            &correlated_rows
                        }
                    };
                    join_row(ctx, l, rrows, on.as_ref(), *kind, *right_width, &mut out).await?;
                }
                out
            }
            Plan::HashJoin { left, right, left_keys, right_keys, kind, on, right_width } => {
                let rrows = execute(right, ctx).await?;
                let mut table: HashMap<Vec<u8>, Vec<Row>> = HashMap::new();
                for r in rrows {
                    checkpoint().await?;
                    if let Some(key) = join_key(ctx, right_keys, &r).await? {
                        table.entry(key).or_default().push(r);
                    }
                }
                let lrows = execute(left, ctx).await?;
                let mut out = Vec::new();
                let none: Vec<Row> = Vec::new();
                for l in lrows {
                    checkpoint().await?;
                    let matches = match join_key(ctx, left_keys, &l).await? {
                        Some(key) => table.get(&key).unwrap_or(&none),
                        None => &none,
                    };
                    join_row(ctx, l, matches, on.as_ref(), *kind, *right_width, &mut out).await?;
                }
                out
            }
            Plan::Aggregate { input, group, aggs } => {
                let rows = execute(input, ctx).await?;
                aggregate(ctx, rows, group, aggs).await?
            }
            Plan::Sort { input, keys } => {
                let rows = execute(input, ctx).await?;
                sort_by_keys(ctx, rows, keys, |r| r).await?
            }
            Plan::Limit { input, limit, offset } => {
                let rows = execute(input, ctx).await?;
                let count = |e: &Option<Expr>, ctx: &ExecCtx| -> Result<Option<usize>> {
                    match e {
                        None => Ok(None),
                        Some(e) => match ctx.eval_const(e)? {
                            Value::Null => Ok(None),
                            v => Ok(Some(v.as_i64().unwrap_or(0).max(0) as usize)),
                        },
                    }
                };
                let off = count(offset, ctx)?.unwrap_or(0);
                let lim = count(limit, ctx)?.unwrap_or(usize::MAX);
                rows.into_iter().skip(off).take(lim).collect()
            }
            Plan::Distinct { input } => dedup(execute(input, ctx).await?),
            Plan::Union { inputs, all } => {
                let mut out = Vec::new();
                for i in inputs {
                    out.extend(execute(i, ctx).await?);
                }
                if *all {
                    out
                } else {
                    dedup(out)
                }
            }
            Plan::Truncate { input, width } => {
                let mut rows = execute(input, ctx).await?;
                for r in &mut rows {
                    r.truncate(*width);
                }
                rows
            }
        })
    })
}

/// Sorts items by keys evaluated on each item's row (`desc` per key; NULLs first ascending).
pub async fn sort_by_keys<T>(
    ctx: &mut ExecCtx<'_>,
    items: Vec<T>,
    keys: &[(Expr, bool)],
    row_of: impl Fn(&T) -> &Row,
) -> Result<Vec<T>> {
    let mut keyed = Vec::with_capacity(items.len());
    for item in items {
        let mut k = Vec::with_capacity(keys.len());
        for (e, _) in keys {
            k.push(ctx.eval(e, row_of(&item)).await?);
        }
        keyed.push((k, item));
    }
    keyed.sort_by(|a, b| {
        for (i, (_, desc)) in keys.iter().enumerate() {
            let o = a.0[i].sort_cmp(&b.0[i]);
            let o = if *desc { o.reverse() } else { o };
            if o != std::cmp::Ordering::Equal {
                return o;
            }
        }
        std::cmp::Ordering::Equal
    });
    Ok(keyed.into_iter().map(|(_, item)| item).collect())
}

/// The encoded join key of `row`, or None if any key value is NULL (NULL never joins).
async fn join_key(ctx: &mut ExecCtx<'_>, keys: &[Expr], row: &Row) -> Result<Option<Vec<u8>>> {
    let mut key = Vec::new();
    for k in keys {
        let v = ctx.eval(k, row).await?;
        if v.is_null() {
            return Ok(None);
        }
        memcmp::encode_value(&mut key, &normalize_join_key(&v));
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
    out: &mut Vec<Row>,
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
            out.push(joined);
        }
    }
    if !matched && kind == JoinKind::Left {
        let mut joined = left;
        joined.extend(std::iter::repeat_n(Value::Null, right_width));
        out.push(joined);
    }
    Ok(())
}

fn normalize_join_key(v: &Value) -> Value {
    // Join keys compare by value across integer/decimal kinds.
    match v {
        Value::UInt(u) if *u <= i64::MAX as u64 => Value::Int(*u as i64),
        Value::Decimal(d) if d.fract().is_zero() => match i64::try_from(d.trunc().mantissa() / 10i128.pow(d.scale())) {
            Ok(i) => Value::Int(i),
            Err(_) => Value::Decimal(d.normalize()),
        },
        Value::Decimal(d) => Value::Decimal(d.normalize()),
        Value::Bytes(_) => crate::table::key_value(v),
        other => other.clone(),
    }
}

fn dedup(rows: Vec<Row>) -> Vec<Row> {
    let mut seen = HashSet::new();
    rows.into_iter()
        .filter(|r| {
            let mut k = Vec::new();
            for v in r {
                memcmp::encode_value(&mut k, &normalize_join_key(v));
            }
            seen.insert(k)
        })
        .collect()
}

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
        AggFunc::First => Acc::First(None),
        AggFunc::GroupConcat => Acc::Concat(None, false),
    }
}

fn add_values(a: Option<Value>, v: &Value) -> Result<Option<Value>> {
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

async fn aggregate(ctx: &mut ExecCtx<'_>, rows: Vec<Row>, group: &[Expr], aggs: &[AggCall]) -> Result<Vec<Row>> {
    let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut groups: Vec<Group> = Vec::new();
    let concat_max = crate::context::limits().group_concat_max_len;
    for r in &rows {
        checkpoint().await?;
        let mut gvals = Vec::with_capacity(group.len());
        let mut key = Vec::new();
        for g in group {
            let v = ctx.eval(g, r).await?;
            memcmp::encode_value(&mut key, &normalize_join_key(&v));
            gvals.push(v);
        }
        let gi = match index.get(&key) {
            Some(i) => *i,
            None => {
                groups.push((
                    gvals,
                    aggs.iter().map(|a| new_acc(a.func)).collect(),
                    aggs.iter().map(|_| HashSet::new()).collect(),
                ));
                index.insert(key, groups.len() - 1);
                groups.len() - 1
            }
        };
        for (ai, call) in aggs.iter().enumerate() {
            let mut args = Vec::with_capacity(call.args.len());
            for a in &call.args {
                args.push(ctx.eval(a, r).await?);
            }
            if call.func != AggFunc::CountStar && call.func != AggFunc::First && args.iter().any(|v| v.is_null()) {
                continue;
            }
            if call.distinct {
                let mut k = Vec::new();
                for v in &args {
                    memcmp::encode_value(&mut k, &normalize_join_key(v));
                }
                if !groups[gi].2[ai].insert(k) {
                    continue;
                }
            }
            let v = args.into_iter().next().unwrap_or(Value::Null);
            let acc = &mut groups[gi].1[ai];
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
                        continue;
                    }
                    let t = v.to_text().unwrap_or_default();
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
        }
    }
    if groups.is_empty() && group.is_empty() {
        groups.push((Vec::new(), aggs.iter().map(|a| new_acc(a.func)).collect(), Vec::new()));
    }
    let mut out = Vec::with_capacity(groups.len());
    for (gvals, accs, _) in groups {
        let mut row = gvals;
        let row_number = out.len() + 1;
        for acc in accs {
            row.push(match acc {
                Acc::Count(n) => Value::Int(n),
                Acc::Sum(s) => s.unwrap_or(Value::Null),
                Acc::Avg(None, _) => Value::Null,
                Acc::Avg(Some(s), n) => match s {
                    Value::Decimal(d) => {
                        let q = d / Decimal::from(n);
                        let mut q = q.round_dp_with_strategy(
                            d.scale() + 4,
                            rust_decimal::RoundingStrategy::MidpointAwayFromZero,
                        );
                        q.rescale(d.scale() + 4);
                        Value::Decimal(q)
                    }
                    other => Value::Double(other.as_f64().unwrap_or(0.0) / n as f64),
                },
                Acc::Min(m) | Acc::Max(m) | Acc::First(m) => m.unwrap_or(Value::Null),
                Acc::Concat(c, cut) => {
                    if cut {
                        crate::context::warn(
                            Code::CutValueGroupConcat,
                            format!("Row {row_number} was cut by GROUP_CONCAT()"),
                        );
                    }
                    c.map(Value::Bytes).unwrap_or(Value::Null)
                }
            });
        }
        out.push(row);
    }
    Ok(out)
}

/// Converts a lookup value to a key column's type: `(value, exact)`, or None when no row can
/// match (NULL, or not representable). Inexact conversions make range bounds inclusive.
fn key_coerce(ty: &ColumnType, v: Value) -> Option<(Value, bool)> {
    if v.is_null() {
        return None;
    }
    let original = v.clone();
    match ty.coerce(v, "") {
        Ok(c) => {
            let exact = c.sql_cmp(&original) == Some(std::cmp::Ordering::Equal);
            Some((c, exact))
        }
        Err(_) => match (ty, &original) {
            (ColumnType::Int { .. } | ColumnType::Decimal { .. }, Value::Bytes(_)) => None,
            (t, Value::Bytes(_)) if t.is_string() => Some((original, true)),
            _ => None,
        },
    }
}

fn range_bounds(
    ctx: &ExecCtx,
    prefix: Vec<u8>,
    range: &KeyRange,
    next_col: Option<&ColumnType>,
) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    let mut start = prefix.clone();
    let mut end = prefix_end(&prefix);
    if let (Some((e, incl)), Some(ty)) = (&range.lower, next_col) {
        match key_coerce(ty, ctx.eval_const(e)?) {
            None => return Ok(None),
            Some((v, exact)) => {
                let mut k = prefix.clone();
                memcmp::encode_value(&mut k, &crate::table::key_value(&v));
                start = if *incl || !exact { k } else { prefix_end(&k) };
            }
        }
    } else {
        // Skip NULLs, which no range predicate matches... only when a bound exists; with no
        // bound at all every entry of the prefix is wanted.
    }
    if let (Some((e, incl)), Some(ty)) = (&range.upper, next_col) {
        match key_coerce(ty, ctx.eval_const(e)?) {
            None => return Ok(None),
            Some((v, exact)) => {
                let mut k = prefix.clone();
                memcmp::encode_value(&mut k, &crate::table::key_value(&v));
                end = if *incl || !exact { prefix_end(&k) } else { k };
            }
        }
    }
    Ok(Some((start, end)))
}

fn eq_values(ctx: &ExecCtx, exprs: &[Expr], cols: &[usize], table: &TableInfo) -> Result<Option<Vec<Value>>> {
    let mut vals = Vec::with_capacity(exprs.len());
    for (e, &c) in exprs.iter().zip(cols) {
        match key_coerce(&table.columns[c].ty, ctx.eval_const(e)?) {
            Some((v, true)) => vals.push(v),
            _ => return Ok(None),
        }
    }
    Ok(Some(vals))
}

/// Reads rows of a table through an access path, applying `filter`. With `lock`, the rows
/// returned are locked and read at their latest committed version (current read).
pub async fn scan(
    ctx: &mut ExecCtx<'_>,
    table: &Arc<TableInfo>,
    access: &Access,
    filter: Option<&Expr>,
    lock: bool,
) -> Result<Vec<TableRow>> {
    scan_limited(ctx, table, access, filter, lock, None).await
}

/// `scan`, returning at most `limit` rows (in key order) when given.
pub async fn scan_limited(
    ctx: &mut ExecCtx<'_>,
    table: &Arc<TableInfo>,
    access: &Access,
    filter: Option<&Expr>,
    lock: bool,
    limit: Option<usize>,
) -> Result<Vec<TableRow>> {
    let limit = limit.unwrap_or(usize::MAX);
    let mut candidates: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    let mut point = false;
    match access {
        Access::Points(points) => {
            let pk = table.pk.clone().unwrap_or_default();
            let mut seen = HashSet::new();
            for p in points {
                if let Some(vals) = eq_values(ctx, p, &pk, table)? {
                    let k = row_key(table, &{
                        let mut h = Vec::new();
                        for v in &vals {
                            memcmp::encode_value(&mut h, &crate::table::key_value(v));
                        }
                        h
                    });
                    if seen.insert(k.clone()) {
                        candidates.push((k, None));
                    }
                }
            }
            point = true;
        }
        Access::Prefixes(tuples) => {
            let pk = table.pk.clone().unwrap_or_default();
            let mut seen = HashSet::new();
            for t in tuples {
                let Some(vals) = eq_values(ctx, t, &pk, table)? else { continue };
                let p = pk_prefix(table, &vals);
                if !seen.insert(p.clone()) {
                    continue;
                }
                for (k, v) in ctx.txn.scan(&p, &prefix_end(&p), usize::MAX).await? {
                    candidates.push((k, Some(v)));
                }
            }
        }
        Access::Full => {
            let p = row_prefix(table.table_id());
            for (k, v) in ctx.txn.scan(&p, &prefix_end(&p), usize::MAX).await? {
                candidates.push((k, Some(v)));
            }
        }
        Access::PkRange(r) => {
            let pk = table.pk.clone().unwrap_or_default();
            let Some(vals) = eq_values(ctx, &r.eq, &pk, table)? else { return Ok(Vec::new()) };
            let next = pk.get(r.eq.len()).map(|c| &table.columns[*c].ty);
            let Some((start, end)) = range_bounds(ctx, pk_prefix(table, &vals), r, next)? else {
                return Ok(Vec::new());
            };
            for (k, v) in ctx.txn.scan(&start, &end, usize::MAX).await? {
                candidates.push((k, Some(v)));
            }
        }
        Access::Index(i, r) => {
            let index = &table.indexes[*i];
            let Some(vals) = eq_values(ctx, &r.eq, &index.columns, table)? else { return Ok(Vec::new()) };
            let next = index.columns.get(r.eq.len()).map(|c| &table.columns[*c].ty);
            let base = index_value_prefix(table, index, &[]);
            let Some((start, end)) = range_bounds(ctx, index_value_prefix(table, index, &vals), r, next)? else {
                return Ok(Vec::new());
            };
            for (k, v) in ctx.txn.scan(&start, &end, usize::MAX).await? {
                let handle = handle_from_index_entry(index, base.len(), &k, &v)?;
                candidates.push((row_key(table, &handle), None));
            }
            point = true;
        }
    }
    // Fetch values the access path did not return.
    if point && !lock {
        let keys: Vec<Vec<u8>> = candidates.iter().map(|c| c.0.clone()).collect();
        let vals = ctx.txn.batch_get(&keys).await?;
        candidates = keys.into_iter().zip(vals).filter(|(_, v)| v.is_some()).collect();
    }
    let empty = SubqueryValues::default();
    let mut out = Vec::with_capacity(candidates.len());
    if lock {
        // Current read: lock the candidates (those matching on the snapshot, when we have
        // it) and re-check the filter on their latest versions.
        let mut keys = Vec::with_capacity(candidates.len());
        for (k, v) in &candidates {
            match v {
                Some(bytes) => {
                    let (row, _) = decode_row(table, bytes)?;
                    if filter.map_or(Ok(true), |f| f.eval_pred(&row, &ctx.eval_ctx(&empty)))? {
                        keys.push(k.clone());
                    }
                }
                None => keys.push(k.clone()),
            }
            if keys.len() >= limit {
                break;
            }
        }
        if keys.is_empty() {
            return Ok(out);
        }
        let latest = ctx.txn.lock_and_get(&keys).await?;
        for (k, v) in keys.into_iter().zip(latest) {
            let Some(bytes) = v else { continue };
            let (row, row_id) = decode_row(table, &bytes)?;
            if filter.map_or(Ok(true), |f| f.eval_pred(&row, &ctx.eval_ctx(&empty)))? {
                out.push(TableRow { key: k, row, row_id });
            }
        }
        return Ok(out);
    }
    for (k, v) in candidates {
        checkpoint().await?;
        if out.len() >= limit {
            break;
        }
        let Some(bytes) = v else { continue };
        let (row, row_id) = decode_row(table, &bytes)?;
        if filter.map_or(Ok(true), |f| f.eval_pred(&row, &ctx.eval_ctx(&empty)))? {
            out.push(TableRow { key: k, row, row_id });
        }
    }
    Ok(out)
}
