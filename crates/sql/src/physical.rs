//! Physical planning: turns a logical plan (`crate::logical`) into the `plan::Plan` the row
//! executor runs (and the column engine translates). This is where access paths are chosen
//! (`choose_access`: point get, batch point get, key prefixes, primary key and index
//! ranges) and join algorithms: a joined table whose key is fixed by earlier tables and
//! constants is read per outer row (index lookup join), other equi-joins hash, the rest
//! loop. WHERE conjuncts of a `Join` are placed as early as the columns they read allow.
//! `push_limit_into_scan` hands LIMIT to a scan whose key order is the query's.

use std::sync::Arc;

use strata_common::{Result, Value};

use crate::binder::{and_all, comparable_keys, expr_class, key_serves, Scope};
use crate::catalog::TableInfo;
use crate::expr::{BinOp, Expr, SubqueryKind};
use crate::logical::{JoinInput, LogicalPlan, LogicalSubquery};
use crate::plan::{Access, JoinKind, KeyRange, Plan, Residual, SubqueryPlan};

/// The physical plan of a logical plan.
pub fn plan(lp: LogicalPlan) -> Result<Plan> {
    crate::depth::ensure_stack()?;
    let b = |p: Box<LogicalPlan>| plan(*p).map(Box::new);
    Ok(match lp {
        LogicalPlan::Dual => Plan::Dual,
        LogicalPlan::Values(rows) => Plan::Values(rows),
        LogicalPlan::Scan { table, lock } => scan(table, Vec::new(), &[], lock),
        LogicalPlan::Join { inputs, filter, scope } => join(inputs, filter, &scope)?,
        LogicalPlan::Filter { input, pred } => Plan::Filter { input: b(input)?, pred },
        LogicalPlan::Project { input, exprs } => Plan::Project { input: b(input)?, exprs },
        LogicalPlan::Aggregate { input, group, aggs, rollup } => {
            Plan::Aggregate { input: b(input)?, group, aggs, rollup }
        }
        LogicalPlan::Sort { input, keys } => Plan::Sort { input: b(input)?, keys },
        LogicalPlan::Limit { input, limit, offset } => {
            let mut input = plan(*input)?;
            push_limit_into_scan(&mut input, limit.as_ref(), offset.as_ref());
            Plan::Limit { input: Box::new(input), limit, offset }
        }
        LogicalPlan::Distinct { input } => Plan::Distinct { input: b(input)? },
        LogicalPlan::Union { inputs, all } => {
            Plan::Union { inputs: inputs.into_iter().map(plan).collect::<Result<_>>()?, all }
        }
        LogicalPlan::SetOp { left, right, intersect, all } => {
            Plan::SetOp { left: b(left)?, right: b(right)?, intersect, all }
        }
        LogicalPlan::Recursive { seed, step, id, all, max_depth } => {
            Plan::Recursive { seed: b(seed)?, step: b(step)?, id, all, max_depth }
        }
        LogicalPlan::Window { input, calls } => Plan::Window { input: b(input)?, calls },
        LogicalPlan::WorkTable(id) => Plan::WorkTable(id),
        LogicalPlan::Truncate { input, width } => Plan::Truncate { input: b(input)?, width },
    })
}

/// The physical plan of a subquery. EXISTS needs one row and a scalar subquery two (to
/// tell "more than one"), so that many are asked of a scan in key order.
pub fn subquery(sq: LogicalSubquery) -> Result<SubqueryPlan> {
    let mut p = plan(sq.plan)?;
    let enough = match sq.kind {
        SubqueryKind::Exists => Some(1),
        SubqueryKind::Scalar => Some(2),
        SubqueryKind::Rows => None,
    };
    if let Some(n) = enough {
        push_limit_into_scan(&mut p, Some(&Expr::lit(Value::Int(n))), None);
    }
    Ok(SubqueryPlan { plan: p, kind: sq.kind, correlated: sq.correlated, ty: sq.ty, replaced: false })
}

/// A table scan with its local predicates (bound to its own row) and equality keys (column
/// offset, value constant per execution).
fn scan(table: Arc<TableInfo>, local: Vec<Expr>, eq_keys: &[(usize, Expr)], lock: bool) -> Plan {
    let access = choose_access(&table, &local, eq_keys);
    Plan::Scan { table, access, filter: and_all(local), lock, limit: None, columns: None }
}

/// Plans one join input with its local predicates: a table's scan, or anything else with a
/// filter over it.
fn input_plan(input: LogicalPlan, local: Vec<Expr>, eq_keys: &[(usize, Expr)]) -> Result<Plan> {
    if let LogicalPlan::Scan { table, lock } = input {
        return Ok(scan(table, local, eq_keys, lock));
    }
    let p = plan(input)?;
    Ok(match and_all(local) {
        Some(pred) => Plan::Filter { input: Box::new(p), pred },
        None => p,
    })
}

/// Whether `keys` (column offset, value) fix the primary key's or an index's first column.
fn can_lookup(t: &TableInfo, keys: &[(usize, Expr)]) -> bool {
    let has = |c: usize| keys.iter().any(|(k, _)| *k == c);
    if let Some(pk) = &t.pk {
        if pk.first().is_some_and(|c| has(*c)) {
            return true;
        }
    }
    t.indexes.iter().any(|i| i.is_public() && i.columns.first().is_some_and(|c| has(*c)))
}

/// Joins the inputs in the order given (`scope` is the joined row), placing each conjunct
/// of `filter` as early as its columns allow; what no input can take (a conjunct on the
/// inner side of an outer join only) filters the joined rows.
fn join(inputs: Vec<JoinInput>, mut preds: Vec<Expr>, scope: &Scope) -> Result<Plan> {
    let total = scope.columns.len();
    let mut offsets = Vec::with_capacity(inputs.len());
    let mut at = 0;
    for i in &inputs {
        offsets.push(at);
        at += i.width;
    }
    if at != total {
        return Err(strata_common::Error::internal("join inputs do not match the joined row"));
    }
    let mut plan: Option<Plan> = None;
    for (k, input) in inputs.into_iter().enumerate() {
        let (off, width) = (offsets[k], input.width);
        let kind = input.kind;
        // Conjuncts placeable now: ON conjuncts, plus WHERE conjuncts (inner joins only)
        // that only use columns up to this input. Tables on the inner side of a LEFT JOIN
        // must not receive WHERE conjuncts.
        let mut here: Vec<Expr> = input.on;
        if kind == JoinKind::Inner {
            let mut i = 0;
            while i < preds.len() {
                let cols = preds[i].columns();
                if !preds[i].has_subquery()
                    && cols.iter().all(|&c| c < off + width)
                    && (k == 0 || cols.iter().any(|&c| c >= off) || cols.is_empty())
                {
                    here.push(preds.remove(i));
                } else {
                    i += 1;
                }
            }
        }
        // Split into local (only this input's columns) and join conjuncts.
        let (local, mut join): (Vec<Expr>, Vec<Expr>) = here.into_iter().partition(|e| {
            !e.has_subquery() && e.columns().iter().all(|&c| c >= off && c < off + width) && !e.columns().is_empty()
        });
        let local_rebased = local.iter().cloned().map(|e| e.rebase(off, false)).collect::<Result<Vec<_>>>()?;
        let Some(left) = plan.take() else {
            // First input: constant conjuncts (no columns) stay in `join` as a filter.
            let p = input_plan(input.plan, local_rebased, &[])?;
            plan = Some(match and_all(std::mem::take(&mut join)) {
                Some(pred) => Plan::Filter { input: Box::new(p), pred },
                None => p,
            });
            continue;
        };
        // Try an index lookup join: conjuncts `this.col = f(left columns)`.
        let mut lookup_keys: Vec<(usize, Expr)> = Vec::new();
        for e in &join {
            if let Expr::Binary(BinOp::Eq, a, b) = e {
                for (x, y) in [(a, b), (b, a)] {
                    if let Expr::Column(c) = **x {
                        if c >= off
                            && c < off + width
                            && y.columns().iter().all(|&i| i < off)
                            && !y.has_subquery()
                            && key_serves(&scope.columns[c].meta.ty, expr_class(y, scope))
                        {
                            lookup_keys.push((c - off, (**y).clone().to_outer()?));
                        }
                    }
                }
            }
        }
        let mut key_cols = lookup_keys.clone();
        for e in &local_rebased {
            if let Expr::Binary(BinOp::Eq, a, b) = e {
                for (x, y) in [(a, b), (b, a)] {
                    if let Expr::Column(c) = **x {
                        if y.is_row_constant() {
                            key_cols.push((c, (**y).clone()));
                        }
                    }
                }
            }
        }
        let lookup_table = match &input.plan {
            LogicalPlan::Scan { table, .. } => !lookup_keys.is_empty() && can_lookup(table, &key_cols),
            _ => false,
        };
        if lookup_table {
            let local_outer = local.into_iter().map(|e| e.rebase(off, true)).collect::<Result<Vec<_>>>()?;
            let scan = input_plan(input.plan, local_outer, &lookup_keys)?;
            plan = Some(Plan::Join {
                left: Box::new(left),
                right: Box::new(scan),
                kind,
                on: and_all(join),
                right_width: width,
                correlated: true,
            });
            continue;
        }
        // Hash join on equalities between the sides, else nested loop.
        let mut lk = Vec::new();
        let mut rk = Vec::new();
        let mut rest = Vec::new();
        for e in join {
            if let Expr::Binary(BinOp::Eq, a, b) = &e {
                let (ac, bc) = (a.columns(), b.columns());
                let left_only = |cs: &Vec<usize>| !cs.is_empty() && cs.iter().all(|&c| c < off);
                let right_only = |cs: &Vec<usize>| !cs.is_empty() && cs.iter().all(|&c| c >= off && c < off + width);
                if !a.has_subquery() && !b.has_subquery() {
                    let pair = if left_only(&ac) && right_only(&bc) {
                        Some((a, b))
                    } else if left_only(&bc) && right_only(&ac) {
                        Some((b, a))
                    } else {
                        None
                    };
                    if let Some((l, r)) = pair {
                        let (l, r) = comparable_keys((**l).clone(), (**r).clone(), scope);
                        lk.push(l);
                        rk.push(r.rebase(off, false)?);
                        continue;
                    }
                }
            }
            rest.push(e);
        }
        let right = input_plan(input.plan, local_rebased, &[])?;
        plan = Some(if lk.is_empty() {
            Plan::Join {
                left: Box::new(left),
                right: Box::new(right),
                kind,
                on: and_all(rest),
                right_width: width,
                correlated: false,
            }
        } else {
            Plan::HashJoin {
                left: Box::new(left),
                right: Box::new(right),
                left_keys: lk,
                right_keys: rk,
                kind,
                on: and_all(rest),
                right_width: width,
                build_left: kind == JoinKind::Inner && input.build_left,
            }
        });
    }
    let plan = plan.unwrap_or(Plan::Dual);
    Ok(match and_all(preds) {
        Some(pred) => Plan::Filter { input: Box::new(plan), pred },
        None => plan,
    })
}

/// A row-constructor IN list: the column offsets and the candidate tuples.
type RowIn = (Vec<usize>, Vec<Vec<Expr>>);

/// Column bounds gathered from predicates, with the positions of the conjuncts (in the
/// scan's local predicates) `eq`, `lower` and `upper` were taken from.
#[derive(Default, Clone)]
struct ColumnBounds {
    eq: Option<Expr>,
    in_list: Option<Vec<Expr>>,
    lower: Option<(Expr, bool)>,
    upper: Option<(Expr, bool)>,
    eq_from: Option<usize>,
    lower_from: Option<usize>,
    upper_from: Option<usize>,
}

fn gather_bounds(table: &TableInfo, local: &[Expr], eq_keys: &[(usize, Expr)]) -> (Vec<ColumnBounds>, Option<RowIn>) {
    let mut b = vec![ColumnBounds::default(); table.columns.len()];
    let mut row_in = None;
    for (c, e) in eq_keys {
        b[*c].eq = Some(e.clone());
    }
    for (i, p) in local.iter().enumerate() {
        match p {
            Expr::Binary(op, x, y) => {
                let (col, val, op) = match (&**x, &**y) {
                    (Expr::Column(c), v) if v.is_row_constant() => (*c, v.clone(), *op),
                    (v, Expr::Column(c)) if v.is_row_constant() => (*c, v.clone(), flip(*op)),
                    _ => continue,
                };
                let cb = &mut b[col];
                match op {
                    BinOp::Eq if cb.eq.is_none() => (cb.eq, cb.eq_from) = (Some(val), Some(i)),
                    BinOp::Gt | BinOp::GtEq => (cb.lower, cb.lower_from) = (Some((val, op == BinOp::GtEq)), Some(i)),
                    BinOp::Lt | BinOp::LtEq => (cb.upper, cb.upper_from) = (Some((val, op == BinOp::LtEq)), Some(i)),
                    _ => {}
                }
            }
            Expr::Between(x, lo, hi, false) => {
                if let Expr::Column(c) = **x {
                    if lo.is_row_constant() && hi.is_row_constant() {
                        b[c].lower = Some(((**lo).clone(), true));
                        b[c].upper = Some(((**hi).clone(), true));
                        (b[c].lower_from, b[c].upper_from) = (Some(i), Some(i));
                    }
                }
            }
            Expr::InList(x, list, false) if list.iter().all(|e| e.is_row_constant()) => match &**x {
                Expr::Column(c) => b[*c].in_list = Some(list.clone()),
                Expr::Row(cols) if cols.iter().all(|c| matches!(c, Expr::Column(_))) => {
                    let idx: Vec<usize> =
                        cols.iter().filter_map(|c| if let Expr::Column(i) = c { Some(*i) } else { None }).collect();
                    let tuples: Option<Vec<Vec<Expr>>> =
                        list.iter().map(|t| if let Expr::Row(v) = t { Some(v.clone()) } else { None }).collect();
                    if let Some(t) = tuples {
                        row_in = Some((idx, t));
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }
    (b, row_in)
}

/// The operator with its operands swapped (`a < b` is `b > a`).
pub(crate) fn flip(op: BinOp) -> BinOp {
    match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::LtEq => BinOp::GtEq,
        BinOp::Gt => BinOp::Lt,
        BinOp::GtEq => BinOp::LtEq,
        other => other,
    }
}

/// The key range `b` gives the key columns `cols` (equality on leading ones, then bounds
/// on the next), its score, and the positions in `local` of the conjuncts it holds whole.
fn key_range(cols: &[usize], b: &[ColumnBounds], local: &[Expr]) -> (KeyRange, usize, Vec<usize>) {
    let mut r = KeyRange::default();
    let mut score = 0;
    let mut used = Vec::new();
    for &c in cols {
        if let Some(e) = &b[c].eq {
            r.eq.push(e.clone());
            used.extend(b[c].eq_from);
            score += 2;
            continue;
        }
        if b[c].lower.is_some() || b[c].upper.is_some() {
            r.lower = b[c].lower.clone();
            r.upper = b[c].upper.clone();
            let (lower_from, upper_from) = (b[c].lower_from, b[c].upper_from);
            // A BETWEEN is in the range only while both its bounds are (a later conjunct
            // may have replaced one).
            let whole =
                |i: &usize| !matches!(local[*i], Expr::Between(..)) || (lower_from, upper_from) == (Some(*i), Some(*i));
            used.extend(lower_from.iter().chain(&upper_from).filter(|i| whole(i)));
            score += 1;
        }
        break;
    }
    (r, score, used)
}

/// Chooses the access path for a table from its local predicates (bound to its row) and
/// equality keys (column offset, value constant per execution).
pub fn choose_access(table: &TableInfo, local: &[Expr], eq_keys: &[(usize, Expr)]) -> Access {
    let (b, row_in) = gather_bounds(table, local, eq_keys);
    if let Some(pk) = &table.pk {
        // Point get: equality on every PK column.
        if pk.iter().all(|c| b[*c].eq.is_some()) {
            return Access::Points(vec![pk
                .iter()
                .map(|c| b[*c].eq.clone().unwrap_or(Expr::Literal(Value::Null)))
                .collect()]);
        }
        // Batch point get: `pk IN (...)` with the other PK columns fixed.
        for &c in pk {
            if let Some(list) = &b[c].in_list {
                if pk.iter().all(|k| *k == c || b[*k].eq.is_some()) {
                    let points = list
                        .iter()
                        .map(|v| {
                            pk.iter()
                                .map(|k| {
                                    if *k == c {
                                        v.clone()
                                    } else {
                                        b[*k].eq.clone().unwrap_or(Expr::Literal(Value::Null))
                                    }
                                })
                                .collect()
                        })
                        .collect();
                    return Access::Points(points);
                }
            }
        }
        // Row constructor `(pk columns) IN ((...), ...)`.
        if let Some((idx, tuples)) = &row_in {
            // Covering only a prefix of the key: one range per tuple.
            // Per tuple, the values of `cols`: from the tuple, or fixed by an equality.
            let keys = |cols: &[usize]| -> Vec<Vec<Expr>> {
                tuples
                    .iter()
                    .map(|t| {
                        cols.iter()
                            .map(|k| match idx.iter().position(|i| i == k) {
                                Some(p) => t.get(p).cloned().unwrap_or(Expr::Literal(Value::Null)),
                                None => b[*k].eq.clone().unwrap_or(Expr::Literal(Value::Null)),
                            })
                            .collect()
                    })
                    .collect()
            };
            let covered = pk.iter().take_while(|k| idx.contains(k) || b[**k].eq.is_some()).count();
            if covered > 0 && covered < pk.len() && idx.iter().all(|c| pk[..covered].contains(c)) {
                return Access::Prefixes(keys(&pk[..covered]));
            }
            if pk.iter().all(|k| idx.contains(k) || b[*k].eq.is_some()) {
                return Access::Points(keys(pk));
            }
        }
    }
    let mut best: (usize, Access, Vec<usize>) = (0, Access::Full, Vec::new());
    if let Some(pk) = &table.pk {
        let (r, score, used) = key_range(pk, &b, local);
        if score > 0 {
            best = (score * 2 + 1, Access::PkRange(r), used);
        }
    }
    for (i, idx) in table.indexes.iter().enumerate().filter(|(_, x)| x.is_public()) {
        let (r, score, used) = key_range(&idx.columns, &b, local);
        let unique_full = idx.unique && r.eq.len() == idx.columns.len();
        let s = score * 2 + if unique_full { 3 } else { 0 };
        if s > best.0 {
            best = (s, Access::Index(i, r), used);
        }
    }
    let (_, mut access, used) = best;
    if let Access::PkRange(r) | Access::Index(_, r) = &mut access {
        let rest = local.iter().enumerate().filter(|(i, _)| !used.contains(i)).map(|(_, e)| e.clone());
        r.residual = Residual::Rest(and_all(rest.collect()));
    }
    access
}

/// Pushes LIMIT (+ OFFSET) into a single-table scan whose key order is the query's order:
/// a plain projection over the scan, optionally sorted ascending by the key columns that
/// follow the access path's equality prefix. Locking reads then lock only those rows.
pub fn push_limit_into_scan(plan: &mut Plan, limit: Option<&Expr>, offset: Option<&Expr>) {
    let Some(limit) = limit else { return };
    let n = match offset {
        Some(o) => Expr::Binary(BinOp::Add, Box::new(limit.clone()), Box::new(o.clone())),
        None => limit.clone(),
    };
    let (sort_keys, project) = match plan {
        Plan::Truncate { input, .. } => match &mut **input {
            Plan::Sort { input, keys } => (Some(keys.clone()), &mut **input),
            _ => return,
        },
        Plan::Project { .. } => (None, plan),
        _ => return,
    };
    let Plan::Project { input, exprs } = project else { return };
    let Plan::Scan { table, access, limit: scan_limit, .. } = &mut **input else { return };
    let (eq_len, pk_order) = match access {
        Access::Full => (0, true),
        Access::PkRange(r) => (r.eq.len(), true),
        _ => (0, false),
    };
    // Without ORDER BY any rows will do, in whatever order the access path reads them.
    if !pk_order && sort_keys.is_some() {
        return;
    }
    if let Some(keys) = sort_keys {
        let Some(pk) = &table.pk else { return };
        for (i, (k, desc)) in keys.iter().enumerate() {
            let Expr::Column(j) = k else { return };
            let Some(Expr::Column(c)) = exprs.get(*j) else { return };
            if *desc || pk.get(eq_len + i) != Some(c) {
                return;
            }
        }
    }
    *scan_limit = Some(n);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{ColumnInfo, IndexInfo, IndexState};

    /// `t (c0 INT PRIMARY KEY, c1 INT, c2 INT, KEY (c1))`.
    fn table() -> TableInfo {
        let column = |id: u32| ColumnInfo::test_int(id, &format!("c{}", id - 1), 4, id != 1);
        TableInfo {
            id: 1,
            db: "test".into(),
            name: "t".into(),
            columns: (1..=3).map(column).collect(),
            pk: Some(vec![0]),
            indexes: vec![IndexInfo {
                id: 1,
                name: "k1".into(),
                columns: vec![1],
                unique: false,
                state: IndexState::Public,
            }],
            next_column_id: 4,
            next_index_id: 2,
            checks: Vec::new(),
            columnar_replica: None,
            cached: false,
        }
    }

    fn cmp(op: BinOp, c: usize, n: i64) -> Expr {
        Expr::Binary(op, Box::new(Expr::Column(c)), Box::new(Expr::lit(Value::Int(n))))
    }

    fn between(c: usize, lo: i64, hi: i64) -> Expr {
        Expr::Between(
            Box::new(Expr::Column(c)),
            Box::new(Expr::lit(Value::Int(lo))),
            Box::new(Expr::lit(Value::Int(hi))),
            false,
        )
    }

    /// The residual of the access path chosen for `local`, as text.
    fn residual(local: &[Expr]) -> String {
        match choose_access(&table(), local, &[]) {
            Access::PkRange(r) | Access::Index(_, r) => match r.residual {
                Residual::Rest(rest) => format!("{rest:?}"),
                Residual::Whole => "whole".into(),
            },
            other => format!("no range: {other:?}"),
        }
    }

    #[test]
    fn a_range_leaves_out_the_conjuncts_it_was_built_from() {
        // c0 BETWEEN 1 AND 5 AND c2 < 3: the range holds the BETWEEN, c2 < 3 is left.
        let rest = residual(&[between(0, 1, 5), cmp(BinOp::Lt, 2, 3)]);
        assert_eq!(rest, format!("{:?}", Some(cmp(BinOp::Lt, 2, 3))));
        // Both bounds from separate conjuncts, on the index: nothing is left.
        assert_eq!(residual(&[cmp(BinOp::GtEq, 1, 1), cmp(BinOp::Lt, 1, 9)]), "None");
        // Two lower bounds: the range takes the last; the other is still checked.
        let rest = residual(&[cmp(BinOp::Gt, 0, 1), cmp(BinOp::Gt, 0, 3)]);
        assert_eq!(rest, format!("{:?}", Some(cmp(BinOp::Gt, 0, 1))));
        // A BETWEEN whose lower bound a later conjunct replaced stays whole (BETWEEN NULL
        // AND 3 matches nothing, whatever the range says).
        let b = Expr::Between(
            Box::new(Expr::Column(0)),
            Box::new(Expr::lit(Value::Null)),
            Box::new(Expr::lit(Value::Int(3))),
            false,
        );
        let rest = residual(&[b.clone(), cmp(BinOp::GtEq, 0, 2)]);
        assert_eq!(rest, format!("{:?}", Some(b)));
        // Two equalities on the index column: the second one stays (it may contradict).
        let rest = residual(&[cmp(BinOp::Eq, 1, 1), cmp(BinOp::Eq, 1, 2)]);
        assert_eq!(rest, format!("{:?}", Some(cmp(BinOp::Eq, 1, 2))));
        // A conjunct on a column no key starts with gives no range at all.
        assert!(residual(&[cmp(BinOp::Lt, 2, 3)]).starts_with("no range"));
    }
}
