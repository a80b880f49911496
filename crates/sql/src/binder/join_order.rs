//! Join order by estimated cost. When every table of an all-inner join has statistics
//! (ANALYZE TABLE, `crate::stats`), the join starts from each table in turn and then
//! repeatedly adds the table, among those a predicate connects to the ones already joined,
//! that gives the smallest estimated intermediate result; the order whose rows read plus
//! intermediate results are fewest wins (TPC-H Q9 starts from the parts LIKE '%green%'
//! keeps, not from the 25 nations, whose chain must pass through all of lineitem). An
//! equi-join conjunct `a = b` keeps 1 / max(NDV(a), NDV(b)) of the cross product (each NDV capped by its side's estimated rows); another conjunct keeps
//! TiDB's default 0.8. Reading the small side first is what lets a selective table drive
//! index lookups into a large one (TPC-H Q17: the few parts of one brand and container,
//! then their lineitems through the part key index) instead of the other way round.

use strata_common::Value;

use super::{Binder, Relation};
use crate::expr::{BinOp, EvalCtx, Expr, SubqueryValues};
use crate::stats::{Estimator, DEFAULT_LIKE_SELECTIVITY, DEFAULT_SELECTIVITY};

/// The column a join key reads (through a cast the binder added for comparison).
fn column_of(e: &Expr) -> Option<usize> {
    match e {
        Expr::Column(c) => Some(*c),
        Expr::Cast(x, _) => column_of(x),
        _ => None,
    }
}

impl Binder<'_> {
    /// The value of an expression that depends on no row (None when it does, or fails).
    pub(super) fn constant_value(&self, e: &Expr) -> Option<Value> {
        let mut ok = e.is_row_constant() && !e.has_subquery();
        e.walk(&mut |x| {
            if matches!(x, Expr::Outer(..)) {
                ok = false;
            }
        });
        if !ok {
            return None;
        }
        let empty = SubqueryValues::default();
        e.eval(&[], &EvalCtx { params: self.params, outer: &[], subqueries: &empty }).ok()
    }

    /// The order (positions in `rels`) to join `rels` in, by estimated cost, or None when
    /// one of them is not a base table with statistics. `offsets` are the relations' first
    /// columns in the joined row `preds` are bound to. With the order comes, per position in
    /// it, whether the rows joined so far are estimated fewer than the next table's (a hash
    /// join then builds on them and streams the table past them).
    pub(super) fn cost_order(
        &self,
        rels: &[&Relation],
        offsets: &[usize],
        preds: &[&Expr],
    ) -> Option<(Vec<usize>, Vec<bool>)> {
        let n = rels.len();
        let mut tables = Vec::with_capacity(n);
        for r in rels {
            let t = r.table.as_ref()?;
            tables.push((t.clone(), self.catalog.stats(t.id)?));
        }
        let like = self
            .session
            .vars
            .get("tidb_default_string_match_selectivity")
            .and_then(|v| v.as_f64())
            .unwrap_or(DEFAULT_LIKE_SELECTIVITY);
        let constant = |e: &Expr| self.constant_value(e);
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
        let rows: Vec<f64> = (0..n).map(|k| est[k].filtered_rows(&local[k]).max(1.0)).collect();
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
        // Greedy from `first`: repeatedly the connected table giving the smallest result.
        // Its cost: the rows read from each table plus every intermediate result.
        let greedy = |first: usize| -> Option<(Vec<usize>, Vec<bool>, f64)> {
            let mut order = vec![first];
            let mut build_left = vec![false];
            let mut joined = vec![false; n];
            joined[first] = true;
            let mut current = rows[first];
            let mut cost = rows[first];
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
                joined[next] = true;
                order.push(next);
                build_left.push(current < rows[next]);
                current = out.max(1.0);
                cost += rows[next] + current;
            }
            Some((order, build_left, cost))
        };
        // Every table as the first; the cheapest order wins (ties: the smallest first table).
        let mut starts: Vec<usize> = (0..n).collect();
        starts.sort_by(|&a, &b| rows[a].total_cmp(&rows[b]));
        let (order, build_left, _) = starts.into_iter().filter_map(greedy).min_by(|a, b| a.2.total_cmp(&b.2))?;
        Some((order, build_left))
    }
}
