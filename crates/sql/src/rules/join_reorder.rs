//! Join order by estimated cost. When every table of an all-inner join has statistics
//! (ANALYZE TABLE, `crate::stats`), the join starts from each table in turn and then
//! repeatedly adds the table, among those a predicate connects to the ones already joined,
//! that gives the smallest estimated intermediate result; the order whose rows read plus
//! intermediate results are fewest wins (TPC-H Q9 starts from the parts LIKE '%green%'
//! keeps, not from the 25 nations, whose chain must pass through all of lineitem). A table
//! joined by index lookup reads, per joined row, the rows its fixed key prefix matches: TPC-C
//! Stock-Level reads its ~200 order lines and looks each one's stock row up by key, rather
//! than reading the order lines' range once per low-stock row (1.2M rows, 20 ms). An
//! equi-join conjunct `a = b` keeps 1 / max(NDV(a), NDV(b)) of the cross product (each NDV capped by its side's estimated rows); another conjunct keeps
//! TiDB's default 0.8. Reading the small side first is what lets a selective table drive
//! index lookups into a large one (TPC-H Q17: the few parts of one brand and container,
//! then their lineitems through the part key index) instead of the other way round.
//!
//! Without statistics, a FROM list in any order must not become a cross product of tables
//! the WHERE clause connects (`FROM t1, t2, t3 WHERE t1.a = t3.a AND t3.b = t2.b` reads t1,
//! t3, t2): the order is then greedy — the first table as written, then repeatedly the
//! first remaining table (as written) that a predicate connects to those already joined,
//! or the first remaining one when none is.
//!
//! The rule applies to joins of at least two inputs, all inner. Their ON conjuncts become
//! WHERE conjuncts (those reading subqueries filter the joined rows); a projection over the
//! reordered join puts the columns back in written order, so everything above it stays
//! bound as it was.

use std::sync::Arc;

use strata_common::Result;

use super::{Rule, RuleCtx};
use crate::binder::{and_all, Scope};
use crate::catalog::TableInfo;
use crate::expr::{BinOp, Expr};
use crate::logical::{JoinInput, LogicalPlan};
use crate::plan::JoinKind;
use crate::stats::{Estimator, DEFAULT_LIKE_SELECTIVITY, DEFAULT_SELECTIVITY};

/// The rule.
pub struct JoinReorder;

impl Rule for JoinReorder {
    fn name(&self) -> &'static str {
        "join_reorder"
    }

    fn apply(&self, plan: LogicalPlan, ctx: &RuleCtx) -> Result<LogicalPlan> {
        plan.transform_up(&mut |p| match p {
            LogicalPlan::Join { inputs, filter, scope } => reorder(inputs, filter, scope, ctx),
            other => Ok(other),
        })
    }
}

/// The column a join key reads (through a cast the binder added for comparison).
fn column_of(e: &Expr) -> Option<usize> {
    match e {
        Expr::Column(c) => Some(*c),
        Expr::Cast(x, _) => column_of(x),
        _ => None,
    }
}

/// One join, reordered when that pays (or is needed to avoid a cross product).
fn reorder(inputs: Vec<JoinInput>, filter: Vec<Expr>, scope: Scope, ctx: &RuleCtx) -> Result<LogicalPlan> {
    let unchanged = |inputs, filter, scope| Ok(LogicalPlan::Join { inputs, filter, scope });
    if inputs.len() < 2 || inputs.iter().any(|i| i.kind != JoinKind::Inner) {
        return unchanged(inputs, filter, scope);
    }
    let total = scope.columns.len();
    let n = inputs.len();
    let widths: Vec<usize> = inputs.iter().map(|i| i.width).collect();
    let mut offsets = Vec::with_capacity(n);
    let mut at = 0;
    for w in &widths {
        offsets.push(at);
        at += w;
    }
    let on_preds: Vec<Expr> = inputs.iter().flat_map(|i| i.on.iter().cloned()).collect();
    let rel_of = |c: usize| offsets.partition_point(|&o| o <= c) - 1;
    let placeable = |e: &Expr| !e.has_subquery() && e.columns().iter().all(|&c| c < total);
    // The inputs each placeable conjunct connects.
    let edges: Vec<Vec<usize>> = filter
        .iter()
        .chain(&on_preds)
        .filter(|e| placeable(e))
        .map(|e| {
            let mut rels: Vec<usize> = e.columns().into_iter().map(rel_of).collect();
            rels.sort_unstable();
            rels.dedup();
            rels
        })
        .filter(|r| r.len() > 1)
        .collect();
    let placed: Vec<&Expr> = filter.iter().chain(&on_preds).filter(|e| placeable(e)).collect();
    let tables: Vec<Option<Arc<TableInfo>>> = inputs
        .iter()
        .map(|i| match &i.plan {
            LogicalPlan::Scan { table, .. } => Some(table.clone()),
            _ => None,
        })
        .collect();
    let (order, build_left) = match cost_order(&tables, &offsets, &placed, ctx) {
        Some(found) => found,
        None if n < 3 => return unchanged(inputs, filter, scope),
        None => {
            let mut order = vec![0];
            let mut joined = vec![false; n];
            joined[0] = true;
            while order.len() < n {
                let connected = (0..n).find(|&j| {
                    !joined[j] && edges.iter().any(|e| e.contains(&j) && e.iter().all(|&r| r == j || joined[r]))
                });
                let next = connected.unwrap_or_else(|| (0..n).find(|&j| !joined[j]).unwrap_or(0));
                joined[next] = true;
                order.push(next);
            }
            (order, Vec::new())
        }
    };
    let written = order.iter().enumerate().all(|(i, &k)| i == k);
    if written && !build_left.contains(&true) {
        return unchanged(inputs, filter, scope);
    }
    // Column positions: written → planned.
    let mut map = vec![0; total];
    let mut at = 0;
    for &k in &order {
        for (i, m) in map[offsets[k]..offsets[k] + widths[k]].iter_mut().enumerate() {
            *m = at + i;
        }
        at += widths[k];
    }
    let remap = |e: Expr| e.transform(&mut |x| Ok(if let Expr::Column(i) = x { Expr::Column(map[i]) } else { x }));
    let (planned, kept): (Vec<Expr>, Vec<Expr>) = filter.into_iter().chain(on_preds).partition(|e| placeable(e));
    let planned = planned.into_iter().map(remap).collect::<Result<Vec<_>>>()?;
    let planned_scope = Scope {
        columns: order
            .iter()
            .flat_map(|&k| scope.columns[offsets[k]..offsets[k] + widths[k]].iter().cloned())
            .collect(),
    };
    let mut slots: Vec<Option<JoinInput>> = inputs.into_iter().map(Some).collect();
    let mut permuted = Vec::with_capacity(n);
    for (pos, &k) in order.iter().enumerate() {
        let input = slots[k].take().ok_or_else(|| strata_common::Error::internal("join order repeats an input"))?;
        let build_left = build_left.get(pos).copied().unwrap_or(false);
        permuted.push(JoinInput { on: Vec::new(), build_left, ..input });
    }
    let mut plan = LogicalPlan::Join { inputs: permuted, filter: planned, scope: planned_scope };
    if !written {
        plan = LogicalPlan::Project { input: Box::new(plan), exprs: map.into_iter().map(Expr::Column).collect() };
    }
    // ON conjuncts that read subqueries, over the rows in written order.
    if let Some(pred) = and_all(kept) {
        plan = LogicalPlan::Filter { input: Box::new(plan), pred };
    }
    Ok(plan)
}

/// The order (positions in `tables`) to join them in, by estimated cost, or None when one
/// of them is not a base table with statistics. `offsets` are the inputs' first columns in
/// the joined row `preds` are bound to. With the order comes, per position in it, whether
/// the rows joined so far are estimated fewer than the next table's (a hash join then
/// builds on them and streams the table past them).
fn cost_order(
    inputs: &[Option<Arc<TableInfo>>],
    offsets: &[usize],
    preds: &[&Expr],
    ctx: &RuleCtx,
) -> Option<(Vec<usize>, Vec<bool>)> {
    let n = inputs.len();
    let mut tables = Vec::with_capacity(n);
    for t in inputs {
        let t = t.as_ref()?;
        tables.push((t.clone(), ctx.stats.stats(t.id)?));
    }
    let like = ctx
        .vars
        .get("tidb_default_string_match_selectivity")
        .and_then(|v| v.as_f64())
        .unwrap_or(DEFAULT_LIKE_SELECTIVITY);
    let constant = |e: &Expr| ctx.constant_value(e);
    let est: Vec<Estimator> =
        tables.iter().map(|(t, s)| Estimator { table: t, stats: s, constant: &constant, like }).collect();
    let rel_of = |c: usize| offsets.partition_point(|&o| o <= c) - 1;
    let mut local: Vec<Vec<Expr>> = vec![Vec::new(); n];
    let mut joins: Vec<(Vec<usize>, &Expr)> = Vec::new();
    for p in preds {
        let cols = p.columns();
        if cols.is_empty() {
            continue;
        }
        let mut rs: Vec<usize> = cols.iter().map(|&c| rel_of(c)).collect();
        rs.sort_unstable();
        rs.dedup();
        if let [k] = rs[..] {
            local[k].push((*p).clone().rebase(offsets[k], false).ok()?);
        } else {
            joins.push((rs, p));
        }
    }
    let filtered: Vec<f64> = (0..n).map(|k| est[k].filtered_rows(&local[k])).collect();
    let rows: Vec<f64> = filtered.iter().map(|f| f.max(1.0)).collect();
    // The rows reading a table costs: its estimated output, except that a filter estimated
    // to keep nothing does not make the read free. Then only the conjuncts on columns some
    // key holds narrow it (TPC-C Stock-Level's `s_quantity < 10` matches no stock row, but
    // finding that out reads the warehouse's 100k; estimated as its output, that read
    // looked free and drove the join from the stock side). Counting every filtered table's
    // read that way made index lookups look as cheap as scanned rows (TPC-H Q14 10x
    // slower); a cost per looked-up row is what would let it apply everywhere.
    let read: Vec<f64> = (0..n)
        .map(|k| {
            if filtered[k] >= 1.0 {
                return rows[k];
            }
            let table = &tables[k].0;
            let keyed = |c: &usize| {
                table.pk.as_ref().is_some_and(|pk| pk.contains(c))
                    || table.indexes.iter().any(|i| i.is_public() && i.columns.contains(c))
            };
            let narrowing: Vec<Expr> = local[k].iter().filter(|p| p.columns().iter().all(keyed)).cloned().collect();
            est[k].filtered_rows(&narrowing).max(rows[k])
        })
        .collect();
    let keeps = |e: &Expr| -> f64 {
        if let Expr::Binary(BinOp::Eq, a, b) = e {
            if let (Some(x), Some(y)) = (column_of(a), column_of(b)) {
                let (rx, ry) = (rel_of(x), rel_of(y));
                let nx = est[rx].ndv(x - offsets[rx]).min(rows[rx]);
                let ny = est[ry].ndv(y - offsets[ry]).min(rows[ry]);
                return 1.0 / nx.max(ny).max(1.0);
            }
        }
        DEFAULT_SELECTIVITY
    };
    // The rows a join keeps of `cross` (the cross product) under conjuncts `applied`.
    // Equalities between the same two tables are correlated more often than not (a
    // composite key: partsupp's (partkey, suppkey) against lineitem's), so per pair of
    // tables only the most selective counts; other conjuncts multiply.
    let joined_rows = |cross: f64, applied: &[&Expr]| -> f64 {
        let mut per_pair: Vec<((usize, usize), f64)> = Vec::new();
        let mut out = cross;
        for e in applied {
            let k = keeps(e);
            let pair = match e {
                Expr::Binary(BinOp::Eq, a, b) => match (column_of(a), column_of(b)) {
                    (Some(x), Some(y)) => {
                        let (rx, ry) = (rel_of(x), rel_of(y));
                        Some((rx.min(ry), rx.max(ry)))
                    }
                    _ => None,
                },
                _ => None,
            };
            match pair {
                Some(p) => match per_pair.iter_mut().find(|(q, _)| *q == p) {
                    Some((_, best)) => *best = best.min(k),
                    None => per_pair.push((p, k)),
                },
                None => out *= k,
            }
        }
        per_pair.iter().fold(out, |acc, (_, k)| acc * k)
    };
    // Columns of each table a local conjunct fixes to a constant (`col = constant`).
    let fixed: Vec<Vec<usize>> = local
        .iter()
        .map(|preds| {
            let mut cols = Vec::new();
            for p in preds {
                if let Expr::Binary(BinOp::Eq, a, b) = p {
                    for (x, y) in [(a, b), (b, a)] {
                        if let (Some(c), true) = (column_of(x), y.columns().is_empty()) {
                            cols.push(c);
                        }
                    }
                }
            }
            cols
        })
        .collect();
    // The rows reading table `j` costs when joined after those in `joined` have given
    // `current` rows. The physical planner joins by index lookup whenever a conjunct ties
    // one of `j`'s columns to the joined tables and a constant or such a tie fixes the
    // first column of its primary key or an index (`physical::can_lookup`): then every
    // joined row reads the rows of `j` that match the longest fixed key prefix (all of
    // them when the tie is not in it: a key range read once per joined row). Otherwise `j`
    // is read once, for a hash join.
    let reads = |j: usize, joined: &[bool], current: f64| -> f64 {
        let mut tied = Vec::new();
        for (rs, e) in &joins {
            if !rs.contains(&j) || !rs.iter().all(|&r| r == j || joined[r]) {
                continue;
            }
            if let Expr::Binary(BinOp::Eq, a, b) = e {
                for (x, y) in [(a, b), (b, a)] {
                    if let Some(c) = column_of(x) {
                        let other = y.columns();
                        if rel_of(c) == j && !other.is_empty() && other.iter().all(|&o| rel_of(o) != j) {
                            tied.push(c - offsets[j]);
                        }
                    }
                }
            }
        }
        if tied.is_empty() {
            return read[j];
        }
        let table = &tables[j].0;
        let bound = |c: &usize| tied.contains(c) || fixed[j].contains(c);
        let mut keys: Vec<(&[usize], bool)> = Vec::new();
        if let Some(pk) = &table.pk {
            keys.push((pk, true));
        }
        keys.extend(table.indexes.iter().filter(|i| i.is_public()).map(|i| (i.columns.as_slice(), i.unique)));
        let per_row = keys
            .iter()
            .filter_map(|(cols, unique)| {
                let prefix = cols.iter().take_while(|c| bound(c)).count();
                if prefix == 0 {
                    return None;
                }
                if *unique && prefix == cols.len() {
                    return Some(1.0);
                }
                let matching = cols[..prefix].iter().fold(est[j].rows(), |n, &c| n / est[j].ndv(c));
                // A tie outside the prefix narrows nothing the lookup reads: it reads the
                // constant prefix's rows (as the local conjuncts narrow them) every time.
                let ties_in_prefix = cols[..prefix].iter().any(|c| tied.contains(c));
                Some(if ties_in_prefix { matching.max(1.0) } else { matching.min(read[j]).max(1.0) })
            })
            .min_by(|a, b| a.total_cmp(b));
        match per_row {
            Some(n) => current * n,
            None => read[j],
        }
    };
    // Greedy from `first`: repeatedly the connected table giving the smallest result.
    // Its cost: the rows read from each table plus every intermediate result.
    let greedy = |first: usize| -> Option<(Vec<usize>, Vec<bool>, f64)> {
        let mut order = vec![first];
        let mut build_left = vec![false];
        let mut joined = vec![false; n];
        joined[first] = true;
        let mut current = rows[first];
        let mut cost = read[first];
        while order.len() < n {
            // The conjuncts that joining `j` next would apply.
            let applied = |j: usize| -> Vec<&Expr> {
                joins
                    .iter()
                    .filter(|(rs, _)| rs.contains(&j) && rs.iter().all(|&r| r == j || joined[r]))
                    .map(|(_, e)| *e)
                    .collect()
            };
            let connected: Vec<usize> = (0..n).filter(|&j| !joined[j] && !applied(j).is_empty()).collect();
            let candidates: Vec<usize> =
                if connected.is_empty() { (0..n).filter(|&j| !joined[j]).collect() } else { connected };
            let (next, out) = candidates
                .iter()
                .map(|&j| (j, joined_rows(current * rows[j], &applied(j))))
                .min_by(|a, b| a.1.total_cmp(&b.1))?;
            cost += reads(next, &joined, current);
            joined[next] = true;
            order.push(next);
            build_left.push(current < rows[next]);
            current = out.max(1.0);
            cost += current;
        }
        Some((order, build_left, cost))
    };
    // Every table as the first; the cheapest order wins (ties: the smallest first table).
    let mut starts: Vec<usize> = (0..n).collect();
    starts.sort_by(|&a, &b| rows[a].total_cmp(&rows[b]));
    let (order, build_left, _) = starts.into_iter().filter_map(greedy).min_by(|a, b| a.2.total_cmp(&b.2))?;
    Some((order, build_left))
}
