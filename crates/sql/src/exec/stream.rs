//! Pipelined execution: scans, filters, projections, joins' outer sides, LIMIT and column
//! truncation pass batches along instead of materializing their whole output, so a query
//! holds what its blocking operators need (hash tables, groups, sort input) plus a batch per
//! pipelined operator, not every row of every table it reads.
//!
//! ```text
//!   Aggregate ◄── pull ── Project ◄── Filter ◄── HashJoin ◄── probe: Scan (batch by batch)
//!   (groups)                                       │
//!                                                  └── build: whole right side, hashed once
//! ```
//!
//! A `Stream` is opened over a plan without running anything; each `next` runs the plan
//! just far enough to produce one batch of rows (charged to the statement like any rows).
//! Operators that must see all their input before their first output row (aggregation,
//! sort, DISTINCT, set operations, window functions, recursive CTEs) run whole, pulling
//! their inputs as streams where that saves memory (`Whole`).

use crate::FastMap as HashMap;

use strata_common::Result;

use super::scan::ScanStream;
use super::{count_of, join_key, join_row, whole, BoxFuture, ExecCtx, Rows, RowsIter};
use crate::expr::{Expr, Row, SubqueryValues};
use crate::interrupt::checkpoint;
use crate::plan::{JoinKind, Plan};

/// A join hands on its output once it has this many rows (one outer row's matches may add
/// more), so a join that multiplies rows passes them along in bounded batches.
const OUTPUT_BATCH: usize = 4096;

/// A plan being run batch by batch (see the module comment).
pub enum Stream<'p> {
    /// A table scan.
    Scan(ScanStream<'p>),
    /// A table scan that may read the table's columnar replica (decided at the first pull).
    MaybeReplica {
        /// The scan's plan node.
        plan: &'p Plan,
        /// The row store's scan, when the replica does not serve it.
        scan: ScanStream<'p>,
        /// The replica's rows, once read; None: not tried yet or the row store serves.
        rows: Option<std::vec::IntoIter<Row>>,
        /// Asked already.
        tried: bool,
    },
    /// Keeps the rows satisfying `pred`.
    Filter {
        /// Input.
        input: Box<Stream<'p>>,
        /// Predicate.
        pred: &'p Expr,
        /// Its subqueries.
        ids: Vec<usize>,
    },
    /// Computes new columns.
    Project {
        /// Input.
        input: Box<Stream<'p>>,
        /// Output expressions.
        exprs: &'p [Expr],
        /// Their subqueries.
        ids: Vec<usize>,
        /// When every expression is a different input column: their indexes (the values
        /// are moved out of the input rows, not evaluated and copied).
        picks: Option<Vec<usize>>,
    },
    /// Nested-loop or lookup join, the outer side pulled batch by batch.
    Join(Box<JoinStream<'p>>),
    /// Hash join: the right side built whole, the left side probing batch by batch.
    HashJoin(Box<HashJoinStream<'p>>),
    /// OFFSET / LIMIT: stops pulling its input once it has its rows.
    Limit {
        /// Input.
        input: Box<Stream<'p>>,
        /// The plan's counts.
        limit: Option<&'p Expr>,
        /// Rows to skip.
        offset: Option<&'p Expr>,
        /// (rows still to skip, rows still wanted), once counted.
        counts: Option<(usize, usize)>,
    },
    /// Keeps the first `width` columns.
    Truncate {
        /// Input.
        input: Box<Stream<'p>>,
        /// Columns kept.
        width: usize,
    },
    /// Any other operator, run whole at the first pull.
    Whole {
        /// The plan.
        plan: &'p Plan,
        /// Already run.
        done: bool,
    },
    /// `plan`'s stream, its rows and time recorded (EXPLAIN ANALYZE: `ExecCtx::profile`).
    Profiled {
        /// The operator.
        plan: &'p Plan,
        /// Its stream.
        inner: Box<Stream<'p>>,
        /// Pulled at least once (counted as one run of the operator).
        pulled: bool,
    },
}

/// The input columns `exprs` are, when each is a different plain column.
pub(super) fn column_picks(exprs: &[Expr]) -> Option<Vec<usize>> {
    let mut picks = Vec::with_capacity(exprs.len());
    for e in exprs {
        match e {
            Expr::Column(i) if !picks.contains(i) => picks.push(*i),
            _ => return None,
        }
    }
    Some(picks)
}

/// The values at `picks`, moved out of `row` (None when one is past its end: evaluating
/// reports that).
pub(super) fn pick_columns(row: &mut Row, picks: &[usize]) -> Option<Row> {
    if picks.iter().any(|&i| i >= row.len()) {
        return None;
    }
    Some(picks.iter().map(|&i| std::mem::replace(&mut row[i], strata_common::Value::Null)).collect())
}

/// A nested-loop join in progress.
pub struct JoinStream<'p> {
    left: Stream<'p>,
    right: &'p Plan,
    kind: JoinKind,
    on: Option<&'p Expr>,
    right_width: usize,
    correlated: bool,
    /// An uncorrelated right side, run once at the first pull.
    static_right: Option<Rows>,
    /// The rest of the left batch being joined.
    current: Option<RowsIter>,
}

/// Rows of a hash join's build side by their encoded key.
type JoinTable = HashMap<Vec<u8>, Vec<Row>>;

/// A hash join in progress: one side is hashed whole at the first pull, the other streams
/// past it. The build side is the right one unless the plan says the left is smaller
/// (`build_left`, inner joins only); output rows are `left ++ right` either way.
pub struct HashJoinStream<'p> {
    build: &'p Plan,
    probe: Stream<'p>,
    build_keys: &'p [Expr],
    probe_keys: &'p [Expr],
    build_left: bool,
    kind: JoinKind,
    on: Option<&'p Expr>,
    right_width: usize,
    /// The build side's rows by key (made at the first pull) and what they hold.
    table: Option<(JoinTable, Rows)>,
    /// The rest of the probe batch being joined.
    current: Option<RowsIter>,
}

impl<'p> Stream<'p> {
    /// A stream over `plan`; nothing runs until the first `next`.
    pub fn open(plan: &'p Plan) -> Stream<'p> {
        Stream::build(plan, false)
    }

    /// A stream over `plan`, every operator's rows and time recorded in the context's
    /// profile when `profiled` (see `ExecCtx::profile`).
    pub fn build(plan: &'p Plan, profiled: bool) -> Stream<'p> {
        let stream = Stream::unprofiled(plan, profiled);
        if profiled && !matches!(plan, Plan::Truncate { .. }) {
            Stream::Profiled { plan, inner: Box::new(stream), pulled: false }
        } else {
            stream
        }
    }

    fn unprofiled(plan: &'p Plan, profiled: bool) -> Stream<'p> {
        let open = |p: &'p Plan| Stream::build(p, profiled);
        match plan {
            Plan::Scan { table, access, filter, lock, limit, columns } => {
                let scan = ScanStream::new(table, access, filter.as_ref(), *lock, limit.as_ref())
                    .with_columns(columns.as_deref());
                if *lock || limit.is_some() {
                    Stream::Scan(scan)
                } else {
                    Stream::MaybeReplica { plan, scan, rows: None, tried: false }
                }
            }
            Plan::Filter { input, pred } => {
                Stream::Filter { input: Box::new(open(input)), pred, ids: pred.subquery_ids() }
            }
            Plan::Project { input, exprs } => Stream::Project {
                input: Box::new(open(input)),
                exprs,
                ids: exprs.iter().flat_map(|e| e.subquery_ids()).collect(),
                picks: column_picks(exprs),
            },
            Plan::Join { left, right, kind, on, right_width, correlated } => Stream::Join(Box::new(JoinStream {
                left: open(left),
                right,
                kind: *kind,
                on: on.as_ref(),
                right_width: *right_width,
                correlated: *correlated,
                static_right: None,
                current: None,
            })),
            Plan::HashJoin { left, right, left_keys, right_keys, kind, on, right_width, build_left } => {
                let (build, probe, build_keys, probe_keys) = if *build_left {
                    (&**left, right, left_keys, right_keys)
                } else {
                    (&**right, left, right_keys, left_keys)
                };
                Stream::HashJoin(Box::new(HashJoinStream {
                    build,
                    probe: open(probe),
                    build_keys,
                    probe_keys,
                    build_left: *build_left,
                    kind: *kind,
                    on: on.as_ref(),
                    right_width: *right_width,
                    table: None,
                    current: None,
                }))
            }
            Plan::Limit { input, limit, offset } => Stream::Limit {
                input: Box::new(open(input)),
                limit: limit.as_ref(),
                offset: offset.as_ref(),
                counts: None,
            },
            Plan::Truncate { input, width } => Stream::Truncate { input: Box::new(open(input)), width: *width },
            _ => Stream::Whole { plan, done: false },
        }
    }

    /// The next batch of rows (never empty), or None when the stream is done.
    pub fn next<'a, 'c>(&'a mut self, ctx: &'a mut ExecCtx<'c>) -> BoxFuture<'a, Result<Option<Rows>>>
    where
        'c: 'a,
        'p: 'a,
    {
        Box::pin(async move {
            crate::depth::ensure_stack()?;
            match self {
                Stream::MaybeReplica { plan, scan, rows, tried } => {
                    if !*tried {
                        *tried = true;
                        let routed = ctx.replica_scans.as_ref().and_then(|(engine, scans)| {
                            scans.contains(&(*plan as *const Plan as usize)).then(|| engine.clone())
                        });
                        // Only where the scan runs once: no enclosing row (a lookup join's
                        // inner side or a subquery runs per row).
                        if let Some(engine) = routed.filter(|_| ctx.outer.is_empty()) {
                            let mut source = crate::column::ScanSource::new(ctx);
                            *rows = engine.scan_replica(plan, &mut source).await?.map(Vec::into_iter);
                        }
                    }
                    match rows {
                        Some(it) => {
                            let mut out = Rows::new();
                            for r in it.by_ref().take(OUTPUT_BATCH) {
                                out.push(r)?;
                            }
                            checkpoint().await?;
                            Ok((!out.rows.is_empty()).then_some(out))
                        }
                        None => Ok(scan
                            .next(ctx)
                            .await?
                            .map(|b| Rows { rows: b.rows.into_iter().map(|r| r.row).collect(), charge: b.charge })),
                    }
                }
                Stream::Scan(s) => Ok(s
                    .next(ctx)
                    .await?
                    .map(|b| Rows { rows: b.rows.into_iter().map(|r| r.row).collect(), charge: b.charge })),
                Stream::Filter { input, pred, ids } => loop {
                    let Some(mut batch) = input.next(ctx).await? else { return Ok(None) };
                    let mut keep = Vec::with_capacity(batch.rows.len());
                    for r in batch.rows.iter() {
                        checkpoint().await?;
                        let k = if ids.is_empty() {
                            let empty = SubqueryValues::default();
                            pred.eval_pred(r, &ctx.eval_ctx(&empty))?
                        } else {
                            // Through ExecCtx::eval: AND / OR skip subqueries they do not need.
                            ctx.eval(pred, r).await?.as_bool() == Some(true)
                        };
                        keep.push(k);
                    }
                    let mut k = keep.into_iter();
                    batch.retain(|_| k.next().unwrap_or(false));
                    if !batch.rows.is_empty() {
                        return Ok(Some(batch));
                    }
                },
                Stream::Project { input, exprs, ids, picks } => {
                    let Some(batch) = input.next(ctx).await? else { return Ok(None) };
                    let mut out = Rows::new();
                    // Moving columns out costs little per row: one interrupt check per batch.
                    if let Some(p) = picks.as_deref() {
                        checkpoint().await?;
                        for mut r in batch {
                            match pick_columns(&mut r, p) {
                                Some(row) => out.push(row)?,
                                // A row too short for the picks: evaluating reports it.
                                None => {
                                    let empty = SubqueryValues::default();
                                    let ec = ctx.eval_ctx(&empty);
                                    out.push(exprs.iter().map(|e| e.eval(&r, &ec)).collect::<Result<Vec<_>>>()?)?;
                                }
                            }
                        }
                        return Ok(Some(out));
                    }
                    for r in batch {
                        checkpoint().await?;
                        let sub = if ids.is_empty() {
                            SubqueryValues::default()
                        } else {
                            ctx.subqueries_for(ids, &r).await?
                        };
                        let ec = ctx.eval_ctx(&sub);
                        out.push(exprs.iter().map(|e| e.eval(&r, &ec)).collect::<Result<Vec<_>>>()?)?;
                    }
                    Ok(Some(out))
                }
                Stream::Join(j) => j.next(ctx).await,
                Stream::HashJoin(j) => j.next(ctx).await,
                Stream::Limit { input, limit, offset, counts } => {
                    let (skip, wanted) = match counts {
                        Some(c) => c,
                        None => {
                            let off = count_of(ctx, *offset)?.unwrap_or(0);
                            let lim = count_of(ctx, *limit)?.unwrap_or(usize::MAX);
                            counts.insert((off, lim))
                        }
                    };
                    while *wanted > 0 {
                        let Some(mut batch) = input.next(ctx).await? else { break };
                        let skipped = (*skip).min(batch.rows.len());
                        batch.rows.drain(..skipped);
                        *skip -= skipped;
                        batch.rows.truncate(*wanted);
                        *wanted -= batch.rows.len();
                        if !batch.rows.is_empty() {
                            return Ok(Some(batch));
                        }
                    }
                    Ok(None)
                }
                Stream::Truncate { input, width } => {
                    let Some(mut batch) = input.next(ctx).await? else { return Ok(None) };
                    for r in batch.rows.iter_mut() {
                        r.truncate(*width);
                    }
                    Ok(Some(batch))
                }
                Stream::Whole { plan, done } => {
                    if *done {
                        return Ok(None);
                    }
                    *done = true;
                    let rows = whole(plan, ctx).await?;
                    Ok((!rows.rows.is_empty()).then_some(rows))
                }
                Stream::Profiled { plan, inner, pulled } => {
                    let started = std::time::Instant::now();
                    let out = inner.next(ctx).await;
                    let rows = match &out {
                        Ok(Some(batch)) => batch.rows.len() as u64,
                        _ => 0,
                    };
                    if let Some(profile) = ctx.profile.as_mut() {
                        let op = profile.entry(*plan as *const Plan as usize).or_default();
                        op.time += started.elapsed();
                        op.rows += rows;
                        if !*pulled {
                            op.runs += 1;
                        }
                    }
                    *pulled = true;
                    out
                }
            }
        })
    }
}

impl JoinStream<'_> {
    async fn next(&mut self, ctx: &mut ExecCtx<'_>) -> Result<Option<Rows>> {
        let mut out = Rows::new();
        loop {
            if self.current.is_none() {
                let Some(lrows) = self.left.next(ctx).await? else { break };
                if !self.correlated && self.static_right.is_none() {
                    self.static_right = Some(super::execute(self.right, ctx).await?);
                }
                self.current = Some(lrows.into_iter());
            }
            let Some(current) = self.current.as_mut() else { break };
            if self.correlated {
                // One batched read for the lookups of the rows left in this batch.
                super::scan::prefetch_points(ctx, self.right, current.remaining()).await?;
            }
            for l in current.by_ref() {
                checkpoint().await?;
                let correlated_rows;
                let rrows: &[Row] = match &self.static_right {
                    Some(r) => r,
                    None => {
                        ctx.outer.push(l.clone());
                        let r = super::execute(self.right, ctx).await;
                        ctx.outer.pop();
                        correlated_rows = r?;
                        &correlated_rows
                    }
                };
                join_row(ctx, l, rrows, self.on, self.kind, self.right_width, &mut out).await?;
                if out.rows.len() >= OUTPUT_BATCH {
                    // What was read ahead is not kept across pulls: the consumer may write.
                    ctx.prefetched = None;
                    return Ok(Some(out));
                }
            }
            ctx.prefetched = None;
            self.current = None;
        }
        Ok((!out.rows.is_empty()).then_some(out))
    }
}

impl HashJoinStream<'_> {
    async fn next(&mut self, ctx: &mut ExecCtx<'_>) -> Result<Option<Rows>> {
        if self.table.is_none() {
            let mut build = Stream::build(self.build, ctx.profile.is_some());
            let mut table = JoinTable::default();
            let mut held = Rows::new();
            while let Some(batch) = build.next(ctx).await? {
                let (rows, charge) = batch.into_parts();
                held.charge.absorb(charge);
                for r in rows {
                    checkpoint().await?;
                    if let Some(key) = join_key(ctx, self.build_keys, &r).await? {
                        held.charge.add(key.len() + std::mem::size_of::<Vec<Row>>())?;
                        table.entry(key).or_default().push(r);
                    }
                }
            }
            self.table = Some((table, held));
        }
        let none: Vec<Row> = Vec::new();
        let mut out = Rows::new();
        loop {
            if self.current.is_none() {
                let Some(probe) = self.probe.next(ctx).await? else { break };
                self.current = Some(probe.into_iter());
            }
            let (Some(current), Some((table, _))) = (self.current.as_mut(), &self.table) else { break };
            for p in current.by_ref() {
                checkpoint().await?;
                let matches = match join_key(ctx, self.probe_keys, &p).await? {
                    Some(key) => table.get(&key).unwrap_or(&none),
                    None => &none,
                };
                if self.build_left {
                    // Inner join probed from the right: each matching left row, then `p`.
                    for l in matches {
                        let mut joined = l.clone();
                        joined.extend(p.iter().cloned());
                        let ok = match self.on {
                            Some(c) => ctx.eval(c, &joined).await?.as_bool() == Some(true),
                            None => true,
                        };
                        if ok {
                            out.push(joined)?;
                        }
                    }
                } else {
                    join_row(ctx, p, matches, self.on, self.kind, self.right_width, &mut out).await?;
                }
                if out.rows.len() >= OUTPUT_BATCH {
                    return Ok(Some(out));
                }
            }
            self.current = None;
        }
        Ok((!out.rows.is_empty()).then_some(out))
    }
}

#[cfg(test)]
mod tests {
    use strata_common::Value;

    use super::*;

    #[test]
    fn distinct_plain_columns_are_moved_out_of_the_row() {
        assert_eq!(column_picks(&[Expr::Column(2), Expr::Column(0)]), Some(vec![2, 0]));
        // A column wanted twice, or anything computed, is evaluated.
        assert_eq!(column_picks(&[Expr::Column(1), Expr::Column(1)]), None);
        assert_eq!(column_picks(&[Expr::Column(0), Expr::Literal(Value::Int(1))]), None);
        let mut row = vec![Value::Int(1), Value::str("b"), Value::str("c")];
        assert_eq!(pick_columns(&mut row, &[2, 0]), Some(vec![Value::str("c"), Value::Int(1)]));
        assert_eq!(pick_columns(&mut vec![Value::Int(1)], &[0, 3]), None);
    }
}
