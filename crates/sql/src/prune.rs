//! Column pruning: which columns of each table scan a query's plan reads. A scan decodes
//! only those (`Plan::Scan::columns`); the others stay NULL and their stored bytes are
//! stepped over. `SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ..` no longer builds the
//! 120-byte `c` and 60-byte `pad` strings of every row it reads, nor does TPC-C's
//! Stock-Level the ten 24-byte district strings of each stock row it only filters.
//!
//! The walk goes top-down with the set of each node's output columns wanted (all of the
//! query's). What a node evaluates itself adds its input columns; a correlated join's
//! inner side adds the outer row's columns it reads (`Expr::Outer` at its depth). Where
//! the plan says less than that (a subquery evaluated on the row, which may read any
//! column of it; operators whose result depends on whole rows: DISTINCT, set operations,
//! recursive CTEs), every input column is wanted.

use crate::expr::Expr;
use crate::plan::Plan;

/// Marks on every scan of `plan` (the top of a query: all its output is wanted) the
/// columns the plan reads.
pub fn prune_scans(plan: &mut Plan) {
    need_all(plan);
}

/// Every output column of `plan` is wanted.
fn need_all(plan: &mut Plan) {
    match crate::cost::width(plan) {
        Some(w) => need(plan, vec![true; w]),
        None => {
            for c in plan.children_mut() {
                need_all(c);
            }
        }
    }
}

/// `wanted` of `plan`'s output columns are read above it.
fn need(plan: &mut Plan, mut wanted: Vec<bool>) {
    if crate::depth::ensure_stack().is_err() {
        return;
    }
    match plan {
        Plan::Dual | Plan::Values(_) | Plan::WorkTable(_) => {}
        Plan::Scan { table, filter, columns, .. } => {
            wanted.resize(table.columns.len(), true);
            if let Some(f) = filter {
                mark(f, &mut wanted);
            }
            *columns = (!wanted.iter().all(|w| *w)).then_some(wanted);
        }
        Plan::Filter { input, pred } => {
            mark(pred, &mut wanted);
            need(input, wanted);
        }
        Plan::Limit { input, .. } => need(input, wanted),
        Plan::Sort { input, keys } => {
            for (k, _) in keys.iter() {
                mark(k, &mut wanted);
            }
            need(input, wanted);
        }
        Plan::Project { input, exprs } => {
            let Some(w) = crate::cost::width(input) else { return need_all(input) };
            let mut below = vec![false; w];
            for (i, e) in exprs.iter().enumerate() {
                if wanted.get(i).copied().unwrap_or(true) {
                    mark(e, &mut below);
                }
            }
            need(input, below);
        }
        Plan::Truncate { input, width } => {
            let Some(w) = crate::cost::width(input) else { return need_all(input) };
            let below = (0..w).map(|i| i >= *width || wanted.get(i).copied().unwrap_or(true)).collect();
            need(input, below);
        }
        Plan::Aggregate { input, group, aggs, .. } => {
            // Grouping reads every group expression whatever the output keeps.
            let Some(w) = crate::cost::width(input) else { return need_all(input) };
            let mut below = vec![false; w];
            for e in group.iter().chain(aggs.iter().flat_map(|a| &a.args)) {
                mark(e, &mut below);
            }
            need(input, below);
        }
        Plan::Window { input, calls } => {
            let Some(w) = crate::cost::width(input) else { return need_all(input) };
            wanted.resize(w, true);
            for c in calls.iter() {
                for e in c.args.iter().chain(&c.partition).chain(c.order.iter().map(|(e, _)| e)) {
                    mark(e, &mut wanted);
                }
            }
            need(input, wanted);
        }
        Plan::Join { left, right, on, right_width, correlated, .. } => {
            let Some((mut wanted, right_wanted)) = join_sides(left, on.as_ref(), *right_width, wanted) else {
                need_all(left);
                return need_all(right);
            };
            if *correlated && !outer_reads(right, 0, &mut wanted) {
                wanted.iter_mut().for_each(|w| *w = true);
            }
            need(left, wanted);
            need(right, right_wanted);
        }
        Plan::HashJoin { left, right, left_keys, right_keys, on, right_width, .. } => {
            let Some((mut wanted, mut right_wanted)) = join_sides(left, on.as_ref(), *right_width, wanted) else {
                need_all(left);
                return need_all(right);
            };
            for k in left_keys.iter() {
                mark(k, &mut wanted);
            }
            for k in right_keys.iter() {
                mark(k, &mut right_wanted);
            }
            need(left, wanted);
            need(right, right_wanted);
        }
        Plan::Distinct { .. } | Plan::Union { .. } | Plan::SetOp { .. } | Plan::Recursive { .. } => {
            for c in plan.children_mut() {
                need_all(c);
            }
        }
    }
}

/// A join's `wanted` output columns and those its condition `on` (over `left ++ right`)
/// reads, split into the left input's and the right's; None when the left's width is
/// not known.
fn join_sides(
    left: &Plan,
    on: Option<&Expr>,
    right_width: usize,
    mut wanted: Vec<bool>,
) -> Option<(Vec<bool>, Vec<bool>)> {
    let lw = crate::cost::width(left)?;
    wanted.resize(lw + right_width, true);
    if let Some(on) = on {
        mark(on, &mut wanted);
    }
    let right = wanted.split_off(lw);
    Some((wanted, right))
}

/// Marks the columns of the row `e` is evaluated on that it reads; all of them when it
/// holds a subquery (whose plan may read any column of the row) or a column past the end.
fn mark(e: &Expr, wanted: &mut [bool]) {
    let mut all = false;
    e.walk(&mut |x| match x {
        Expr::Column(i) => match wanted.get_mut(*i) {
            Some(w) => *w = true,
            None => all = true,
        },
        Expr::Subquery(..) | Expr::InSubquery(..) => all = true,
        _ => {}
    });
    if all {
        wanted.iter_mut().for_each(|w| *w = true);
    }
}

/// Marks the columns of the outer row at `depth` (a correlated join's left row: 0 from its
/// inner side, one more under each correlated join inside) that `plan` reads. False when
/// that cannot be told (a subquery, a column past the end).
fn outer_reads(plan: &Plan, depth: usize, wanted: &mut [bool]) -> bool {
    if crate::depth::ensure_stack().is_err() {
        return false;
    }
    let mut ok = true;
    for e in plan.own_exprs() {
        e.walk(&mut |x| match x {
            Expr::Outer(d, i) if *d == depth => match wanted.get_mut(*i) {
                Some(w) => *w = true,
                None => ok = false,
            },
            Expr::Subquery(..) | Expr::InSubquery(..) => ok = false,
            _ => {}
        });
    }
    ok && match plan {
        Plan::Join { left, right, correlated: true, .. } => {
            outer_reads(left, depth, wanted) && outer_reads(right, depth + 1, wanted)
        }
        other => other.children().into_iter().all(|c| outer_reads(c, depth, wanted)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use strata_common::Value;

    use super::*;
    use crate::catalog::{ColumnInfo, TableInfo};
    use crate::expr::{AggCall, AggFunc, BinOp, SubqueryKind};
    use crate::plan::{Access, JoinKind};

    /// A table `name` with `n` integer columns c0.., keyed by c0.
    fn table(name: &str, n: u32) -> Arc<TableInfo> {
        let column = |id: u32| ColumnInfo::test_int(id, &format!("c{}", id - 1), 4, true);
        Arc::new(TableInfo {
            id: 1,
            db: "test".into(),
            name: name.into(),
            columns: (1..=n).map(column).collect(),
            pk: Some(vec![0]),
            indexes: Vec::new(),
            next_column_id: n + 1,
            next_index_id: 1,
            checks: Vec::new(),
            columnar_replica: None,
            cached: false,
        })
    }

    fn scan(t: &Arc<TableInfo>, access: Access, filter: Option<Expr>) -> Plan {
        Plan::Scan { table: t.clone(), access, filter, lock: false, limit: None, columns: None }
    }

    fn lt(a: Expr, n: i64) -> Expr {
        Expr::Binary(BinOp::Lt, Box::new(a), Box::new(Expr::lit(Value::Int(n))))
    }

    /// The columns each scan decodes, in plan order (None: all).
    fn masks(plan: &Plan) -> Vec<Option<Vec<bool>>> {
        plan.scans()
            .into_iter()
            .map(|s| match s {
                Plan::Scan { columns, .. } => columns.clone(),
                _ => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn a_projection_reads_only_its_columns_and_the_filters() {
        // SELECT c2 FROM t WHERE c3 < 5 (4 columns)
        let t = table("t", 4);
        let mut p = Plan::Project {
            input: Box::new(scan(&t, Access::Full, Some(lt(Expr::Column(3), 5)))),
            exprs: vec![Expr::Column(2)],
        };
        prune_scans(&mut p);
        assert_eq!(masks(&p), vec![Some(vec![false, false, true, true])]);
    }

    #[test]
    fn an_aggregate_reads_its_groups_and_arguments() {
        // SELECT SUM(c1) FROM t GROUP BY c3, output only the sum.
        let t = table("t", 4);
        let agg = Plan::Aggregate {
            input: Box::new(scan(&t, Access::Full, None)),
            group: vec![Expr::Column(3)],
            aggs: vec![AggCall { func: AggFunc::Sum, args: vec![Expr::Column(1)], distinct: false }],
            rollup: false,
        };
        let mut p = Plan::Project { input: Box::new(agg), exprs: vec![Expr::Column(1)] };
        prune_scans(&mut p);
        assert_eq!(masks(&p), vec![Some(vec![false, true, false, true])]);
    }

    #[test]
    fn a_lookup_join_reads_the_outer_columns_its_inner_side_uses() {
        // order_line(4) ⋈ stock(3) on stock.c0 = order_line.c2, stock.c1 < 15, output stock.c0.
        let ol = table("order_line", 4);
        let st = table("stock", 3);
        let inner = scan(&st, Access::Points(vec![vec![Expr::Outer(0, 2)]]), Some(lt(Expr::Column(1), 15)));
        let join = Plan::Join {
            left: Box::new(scan(&ol, Access::Full, Some(lt(Expr::Column(1), 3)))),
            right: Box::new(inner),
            kind: JoinKind::Inner,
            on: None,
            right_width: 3,
            correlated: true,
        };
        let mut p = Plan::Project { input: Box::new(join), exprs: vec![Expr::Column(4)] };
        prune_scans(&mut p);
        assert_eq!(
            masks(&p),
            vec![Some(vec![false, true, true, false]), Some(vec![true, true, false])],
            "left: its filter and the lookup key; right: the output and its filter"
        );
    }

    #[test]
    fn whole_rows_are_read_under_distinct_subqueries_and_the_top() {
        let t = table("t", 3);
        let mut p = Plan::Distinct {
            input: Box::new(Plan::Project {
                input: Box::new(scan(&t, Access::Full, None)),
                exprs: vec![Expr::Column(1)],
            }),
        };
        prune_scans(&mut p);
        assert_eq!(masks(&p), vec![Some(vec![false, true, false])], "DISTINCT needs its input's every column");

        // A subquery evaluated on the row may read any column of it.
        let mut p = Plan::Project {
            input: Box::new(scan(&t, Access::Full, None)),
            exprs: vec![Expr::Column(0), Expr::Subquery(0, SubqueryKind::Scalar)],
        };
        prune_scans(&mut p);
        assert_eq!(masks(&p), vec![None]);

        // SELECT * reads everything: nothing to prune.
        let mut p = scan(&t, Access::Full, None);
        prune_scans(&mut p);
        assert_eq!(masks(&p), vec![None]);
    }
}
