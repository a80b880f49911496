//! Decorrelation of scalar aggregate subqueries.
//!
//! A subquery such as
//! `(SELECT sum(h_amount) FROM history WHERE h_w_id = ? AND h_c_d_id = c.c_d_id AND h_c_id = c.c_id)`
//! runs once per outer row. When the inner side cannot use the correlated columns to find
//! its rows (no index or primary key prefix on them), each run reads the same rows again,
//! which makes the query quadratic. Such a subquery becomes a grouped derived table joined
//! to the outer rows:
//!
//! ```text
//! outer LEFT JOIN (SELECT h_c_d_id, h_c_id, sum(h_amount) FROM history
//!                  WHERE h_w_id = ? GROUP BY h_c_d_id, h_c_id)
//!       ON (c.c_d_id, c.c_id) = (h_c_d_id, h_c_id)
//! ```
//!
//! and the subquery expression becomes the joined column. An outer row no group matches
//! reads what the subquery returns over no rows: NULL, or, when its select item is 0 or
//! another value over an empty set (`COUNT(*)`, `COALESCE(SUM(x), 0)`), that value, through
//! `CASE WHEN key IS NULL THEN value-over-no-rows ELSE column END` (a matched row's key is
//! never NULL: it equalled the outer key).
//!
//! The rewrite applies where it preserves the meaning exactly: the subquery is one select
//! item over aggregates without GROUP BY, HAVING, ROLLUP, ORDER BY or LIMIT (a Project over
//! an Aggregate with no group keys over WHERE over FROM), has no subqueries of its own, and
//! refers to the enclosing row only in top-level `inner_expr = outer_expr` conjuncts of its
//! WHERE. Each outer row then matches at most one group, so the join keeps the outer
//! cardinality. It applies to subqueries in a filter (WHERE) or a projection (the select
//! list) whose input row is the FROM row the subquery was bound against.
//!
//! When the per-row plan uses a correlated column in an index or primary key access (an
//! OLTP-style lookup), the subquery is left alone: one indexed probe per outer row beats
//! aggregating the whole inner table. A subquery the rule joined is retired (`RuleCtx::
//! retired`), so it is neither planned nor costed as a per-row subquery.

use strata_common::{Result, Value};

use super::{Rule, RuleCtx};
use crate::binder::{and_all, conjuncts, Scope, ScopeColumn};
use crate::expr::{AggFunc, BinOp, Expr, SubqueryKind};
use crate::logical::{JoinInput, LogicalPlan, LogicalSubquery};
use crate::plan::{Access, JoinKind, OutputColumn, Plan};

/// The rule.
pub struct Decorrelate;

impl Rule for Decorrelate {
    fn name(&self) -> &'static str {
        "decorrelate"
    }

    fn apply(&self, plan: LogicalPlan, ctx: &RuleCtx) -> Result<LogicalPlan> {
        if ctx.subqueries.is_empty() {
            return Ok(plan);
        }
        plan.transform_up(&mut |node| rewrite(node, ctx))
    }
}

fn rewrite(node: LogicalPlan, ctx: &RuleCtx) -> Result<LogicalPlan> {
    match node {
        LogicalPlan::Filter { input, pred } => {
            let Some(scope) = row_scope(&input) else { return Ok(LogicalPlan::Filter { input, pred }) };
            let width = scope.columns.len();
            let (input, mut exprs, joined) = attach(*input, scope, vec![pred], ctx)?;
            let pred = exprs.pop().unwrap_or(Expr::Literal(Value::Int(1)));
            let filter = LogicalPlan::Filter { input: Box::new(input), pred };
            if !joined {
                return Ok(filter);
            }
            // The joined columns stay below: the filter's row is what it was.
            Ok(LogicalPlan::Project { input: Box::new(filter), exprs: (0..width).map(Expr::Column).collect() })
        }
        LogicalPlan::Project { input, exprs } => {
            let (input, exprs) = merge_projections(*input, exprs)?;
            let Some(scope) = row_scope(&input) else {
                return Ok(LogicalPlan::Project { input: Box::new(input), exprs });
            };
            let (input, exprs, _) = attach(input, scope, exprs, ctx)?;
            Ok(LogicalPlan::Project { input: Box::new(input), exprs })
        }
        // An aggregation reads columns by position too: it reads through a projection of
        // plain columns (the one above a rewritten filter).
        LogicalPlan::Aggregate { input, group, aggs, rollup } => {
            let n = group.len();
            let exprs = group.into_iter().chain(aggs.iter().flat_map(|a| a.args.clone())).collect();
            let (input, mut exprs) = merge_projections(*input, exprs)?;
            let rest = exprs.split_off(n);
            let mut rest = rest.into_iter();
            let aggs = aggs
                .into_iter()
                .map(|a| {
                    let args = rest.by_ref().take(a.args.len()).collect();
                    crate::expr::AggCall { args, ..a }
                })
                .collect();
            Ok(LogicalPlan::Aggregate { input: Box::new(input), group: exprs, aggs, rollup })
        }
        other => Ok(other),
    }
}

/// A projection over a projection of plain columns reads through it, unless it holds a
/// subquery: the enclosing row a subquery reads is the projection's input row.
fn merge_projections(input: LogicalPlan, exprs: Vec<Expr>) -> Result<(LogicalPlan, Vec<Expr>)> {
    match input {
        LogicalPlan::Project { input: inner, exprs: inner_exprs }
            if inner_exprs.iter().all(|e| matches!(e, Expr::Column(_))) && !exprs.iter().any(Expr::has_subquery) =>
        {
            let map: Vec<Expr> = inner_exprs;
            let exprs = exprs
                .into_iter()
                .map(|e| {
                    e.transform(&mut |x| {
                        Ok(match x {
                            Expr::Column(c) => map.get(c).cloned().unwrap_or(Expr::Column(c)),
                            other => other,
                        })
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            Ok((*inner, exprs))
        }
        other => Ok((other, exprs)),
    }
}

/// The columns of a FROM row, seen through filters and column projections.
fn row_scope(plan: &LogicalPlan) -> Option<Scope> {
    match plan {
        LogicalPlan::Join { scope, .. } => Some(scope.clone()),
        LogicalPlan::Filter { input, .. } => row_scope(input),
        LogicalPlan::Project { input, exprs } => {
            let inner = row_scope(input)?;
            let columns = exprs
                .iter()
                .map(|e| match e {
                    Expr::Column(c) => inner.columns.get(*c).cloned(),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?;
            Some(Scope { columns })
        }
        _ => None,
    }
}

/// Joins each decorrelatable scalar subquery of `exprs` (evaluated over `input`'s rows,
/// whose columns are `scope`) to `input`, and rewrites `exprs` to read the joined column.
/// Returns the new input, the expressions and whether anything was joined.
fn attach(
    mut input: LogicalPlan,
    mut scope: Scope,
    mut exprs: Vec<Expr>,
    ctx: &RuleCtx,
) -> Result<(LogicalPlan, Vec<Expr>, bool)> {
    let mut ids = Vec::new();
    for e in &exprs {
        e.walk(&mut |x| {
            if let Expr::Subquery(id, SubqueryKind::Scalar) = x {
                if !ids.contains(id) {
                    ids.push(*id);
                }
            }
        });
    }
    let mut joined = false;
    for id in ids {
        let Some(sub) = ctx.subqueries.get(id) else { continue };
        if !sub.correlated || ctx.retired.borrow().contains(&id) || !bound_against(sub, &scope) {
            continue;
        }
        let Some(g) = grouped(sub, ctx)? else { continue };
        let width = scope.columns.len();
        let keys = g.outer_keys.len();
        let on = g
            .outer_keys
            .into_iter()
            .enumerate()
            .map(|(k, e)| Expr::Binary(BinOp::Eq, Box::new(e), Box::new(Expr::Column(width + k))))
            .collect();
        scope.columns.extend(g.columns);
        input = LogicalPlan::Join {
            inputs: vec![
                JoinInput::new(input, width, JoinKind::Inner, Vec::new()),
                JoinInput::new(g.plan, keys + 1, JoinKind::Left, on),
            ],
            filter: Vec::new(),
            scope: scope.clone(),
        };
        let value = Expr::Column(width + keys);
        let replacement = match g.over_no_rows {
            Value::Null => value,
            v => Expr::Case(
                None,
                vec![(Expr::IsNull(Box::new(Expr::Column(width)), false), Expr::Literal(v))],
                Some(Box::new(value)),
            ),
        };
        exprs = exprs
            .into_iter()
            .map(|e| {
                e.transform(&mut |x| {
                    Ok(match x {
                        Expr::Subquery(i, SubqueryKind::Scalar) if i == id => replacement.clone(),
                        other => other,
                    })
                })
            })
            .collect::<Result<_>>()?;
        ctx.retired.borrow_mut().insert(id);
        joined = true;
    }
    Ok((input, exprs, joined))
}

/// Whether the subquery's enclosing row is (a prefix of) `scope`: it was bound in the
/// query whose FROM row this is.
fn bound_against(sub: &LogicalSubquery, scope: &Scope) -> bool {
    let outer = &sub.outer.columns;
    outer.len() <= scope.columns.len()
        && outer.iter().zip(&scope.columns).all(|(a, b)| a.table == b.table && a.name == b.name)
}

/// A subquery as a grouped plan to join.
struct Grouped {
    /// Output: the inner key values, then the subquery's value.
    plan: LogicalPlan,
    /// Key expressions over the outer row.
    outer_keys: Vec<Expr>,
    /// The joined columns (keys, then the value).
    columns: Vec<ScopeColumn>,
    /// The subquery's value over no rows.
    over_no_rows: Value,
}

/// The grouped form of a subquery, or None when it does not have the shape the rewrite
/// preserves, or is better run per row.
fn grouped(sub: &LogicalSubquery, ctx: &RuleCtx) -> Result<Option<Grouped>> {
    let LogicalPlan::Project { input, exprs } = &sub.plan else { return Ok(None) };
    let [value] = exprs.as_slice() else { return Ok(None) };
    let LogicalPlan::Aggregate { input: agg_input, group, aggs, rollup: false } = input.as_ref() else {
        return Ok(None);
    };
    if !group.is_empty() || aggs.iter().any(|a| a.func == AggFunc::Grouping) {
        return Ok(None);
    }
    let LogicalPlan::Filter { input: from, pred } = agg_input.as_ref() else { return Ok(None) };
    let LogicalPlan::Join { scope: from_scope, .. } = from.as_ref() else { return Ok(None) };
    // Nothing but the WHERE conjuncts may read the enclosing row or a subquery.
    let mut clean = !plan_reads_outer_or_subquery(from)
        && !value.has_subquery()
        && aggs.iter().flat_map(|a| &a.args).all(|e| !e.has_subquery() && refs_outer(e) == Refs::None);
    value.walk(&mut |x| clean &= !matches!(x, Expr::Outer(..)));
    if !clean {
        return Ok(None);
    }
    let mut parts = Vec::new();
    conjuncts(pred.clone(), &mut parts);
    let (mut local, mut inner_keys, mut outer_keys) = (Vec::new(), Vec::new(), Vec::new());
    for p in parts {
        if p.has_subquery() {
            return Ok(None);
        }
        match refs_outer(&p) {
            Refs::None => local.push(p),
            Refs::Deeper => return Ok(None),
            Refs::Outer => {
                let Expr::Binary(BinOp::Eq, l, r) = p else { return Ok(None) };
                let (inner, outer) = match (side(&l), side(&r)) {
                    (Side::Inner, Side::Outer) => (*l, *r),
                    (Side::Outer, Side::Inner) => (*r, *l),
                    _ => return Ok(None),
                };
                inner_keys.push(inner);
                outer_keys.push(outer_to_columns(outer)?);
            }
        }
    }
    if inner_keys.is_empty() {
        return Ok(None);
    }
    // Left per row when that run probes a key with the enclosing row's values.
    let per_row = {
        let scratch = std::cell::RefCell::default();
        let check = RuleCtx { retired: &scratch, ..*ctx };
        crate::physical::plan(super::optimize(sub.plan.clone(), &check, None)?)?
    };
    if keyed_by_outer(&per_row, 0) {
        return Ok(None);
    }
    // Over no rows COUNT is 0 and the other aggregates NULL.
    let empty: Vec<Expr> = aggs
        .iter()
        .map(|a| {
            Expr::Literal(if matches!(a.func, AggFunc::Count | AggFunc::CountStar) {
                Value::Int(0)
            } else {
                Value::Null
            })
        })
        .collect();
    let at_empty = value.clone().transform(&mut |x| {
        Ok(match x {
            Expr::Column(c) => empty.get(c).cloned().unwrap_or(Expr::Literal(Value::Null)),
            other => other,
        })
    })?;
    // Without parameter values: the plan must hold for every execution of a prepared
    // statement (a `?` there leaves the subquery per row).
    let Some(over_no_rows) = super::constant_value(&at_empty, &[]) else { return Ok(None) };
    let nk = inner_keys.len();
    let key_types: Vec<OutputColumn> = {
        let metas: Vec<OutputColumn> = from_scope.columns.iter().map(|c| c.meta.clone()).collect();
        inner_keys
            .iter()
            .enumerate()
            .map(|(k, e)| {
                let mut meta = OutputColumn { name: format!("k{k}"), ..Default::default() };
                crate::typing::expr_type(e, &crate::typing::Columns(&metas)).or_null(true).apply(&mut meta);
                meta
            })
            .collect()
    };
    let mut value_meta = OutputColumn { name: "value".into(), ..Default::default() };
    sub.ty.clone().or_null(true).apply(&mut value_meta);
    let filtered = match and_all(local) {
        Some(pred) => LogicalPlan::Filter { input: from.clone(), pred },
        None => (**from).clone(),
    };
    let shifted = value.clone().transform(&mut |x| {
        Ok(match x {
            Expr::Column(c) => Expr::Column(c + nk),
            other => other,
        })
    })?;
    let plan = LogicalPlan::Project {
        input: Box::new(LogicalPlan::Aggregate {
            input: Box::new(filtered),
            group: inner_keys,
            aggs: aggs.clone(),
            rollup: false,
        }),
        exprs: (0..nk).map(Expr::Column).chain(std::iter::once(shifted)).collect(),
    };
    let columns = key_types
        .into_iter()
        .chain(std::iter::once(value_meta))
        .map(|meta| ScopeColumn { table: String::new(), name: String::new(), meta })
        .collect();
    Ok(Some(Grouped { plan, outer_keys, columns, over_no_rows }))
}

/// Whether any expression of `plan` reads an enclosing row or a subquery.
fn plan_reads_outer_or_subquery(plan: &LogicalPlan) -> bool {
    let mut hit = false;
    let _ = plan.clone().transform_up(&mut |node| {
        node.map_exprs(&mut |e| {
            hit |= e.has_subquery() || refs_outer(&e) != Refs::None;
            Ok(e)
        })
    });
    hit
}

#[derive(PartialEq, Eq, Debug)]
enum Refs {
    /// Only the subquery's own columns.
    None,
    /// The immediately enclosing row.
    Outer,
    /// A row further out.
    Deeper,
}

fn refs_outer(e: &Expr) -> Refs {
    let mut r = Refs::None;
    e.walk(&mut |x| match x {
        Expr::Outer(0, _) if r == Refs::None => r = Refs::Outer,
        Expr::Outer(d, _) if *d > 0 => r = Refs::Deeper,
        _ => {}
    });
    r
}

enum Side {
    Inner,
    Outer,
    Mixed,
}

fn side(e: &Expr) -> Side {
    let (mut inner, mut outer) = (false, false);
    e.walk(&mut |x| match x {
        Expr::Column(_) | Expr::Agg(_) | Expr::Subquery(..) | Expr::InSubquery(..) => inner = true,
        Expr::Outer(..) => outer = true,
        _ => {}
    });
    match (inner, outer) {
        (true, false) => Side::Inner,
        (false, true) => Side::Outer,
        _ => Side::Mixed,
    }
}

/// `Outer(0, i)` → `Column(i)`: the expression moves from the subquery to the outer query.
fn outer_to_columns(e: Expr) -> Result<Expr> {
    e.transform(&mut |x| {
        Ok(match x {
            Expr::Outer(0, i) => Expr::Column(i),
            other => other,
        })
    })
}

/// Whether some scan of `plan` finds its rows by a key built from the enclosing row at
/// `depth` (a correlated lookup join's inner side sees one more enclosing row).
fn keyed_by_outer(plan: &Plan, depth: usize) -> bool {
    let uses = |e: &Expr| {
        let mut hit = false;
        e.walk(&mut |x| {
            if matches!(x, Expr::Outer(d, _) if *d == depth) {
                hit = true;
            }
        });
        hit
    };
    match plan {
        Plan::Scan { access, .. } => match access {
            Access::Full => false,
            Access::Points(ts) | Access::Prefixes(ts) => ts.iter().flatten().any(uses),
            Access::PkRange(r) | Access::Index(_, r) => {
                r.eq.iter().any(uses)
                    || r.lower.as_ref().is_some_and(|(e, _)| uses(e))
                    || r.upper.as_ref().is_some_and(|(e, _)| uses(e))
            }
        },
        Plan::Join { left, right, correlated, .. } => {
            keyed_by_outer(left, depth) || keyed_by_outer(right, depth + usize::from(*correlated))
        }
        other => other.children().into_iter().any(|c| keyed_by_outer(c, depth)),
    }
}
