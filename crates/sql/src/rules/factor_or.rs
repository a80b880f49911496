//! OR factoring: `(a AND b) OR (a AND c)` becomes the conjuncts `a` and `b OR c`, and an OR
//! whose every branch restricts one column also gives that column's restrictions as a
//! conjunct of their own (`implied_by_branches`). A join condition repeated in every branch
//! (TPC-H Q19's `p_partkey = l_partkey`) then becomes a join key instead of a filter over
//! a cross join, and Q7's nations are filtered before the join. Applies to filters, to the
//! WHERE conjuncts of joins and to ON conditions.

use strata_common::Result;

use super::{Rule, RuleCtx};
use crate::binder::{and_all, combine_all, CHAIN};
use crate::expr::{BinOp, Expr};
use crate::logical::{JoinInput, LogicalPlan};

/// The rule.
pub struct FactorOr;

impl Rule for FactorOr {
    fn name(&self) -> &'static str {
        "factor_or"
    }

    fn apply(&self, plan: LogicalPlan, _ctx: &RuleCtx) -> Result<LogicalPlan> {
        let split = |es: Vec<Expr>| {
            let mut out = Vec::with_capacity(es.len());
            for e in es {
                factored_conjuncts(e, &mut out);
            }
            out
        };
        plan.transform_up(&mut |p| {
            Ok(match p {
                LogicalPlan::Filter { input, pred } => match and_all(split(vec![pred])) {
                    Some(pred) => LogicalPlan::Filter { input, pred },
                    None => *input,
                },
                LogicalPlan::Join { inputs, filter, scope } => LogicalPlan::Join {
                    inputs: inputs.into_iter().map(|i| JoinInput { on: split(i.on), ..i }).collect(),
                    filter: split(filter),
                    scope,
                },
                other => other,
            })
        })
    }
}

/// Splits an expression into its AND-ed parts, pulling the parts common to every branch of
/// an OR out of it first (`factor_or`).
pub fn factored_conjuncts(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::Binary(BinOp::And, a, b) => {
            factored_conjuncts(*a, out);
            factored_conjuncts(*b, out);
        }
        e @ Expr::Binary(BinOp::Or, ..) => out.extend(factor_or(e)),
        other => out.push(other),
    }
}

/// Splits an expression into its OR-ed parts.
fn disjuncts(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::Binary(BinOp::Or, a, b) => {
            disjuncts(*a, out);
            disjuncts(*b, out);
        }
        other => out.push(other),
    }
}

/// `(a AND b) OR (a AND c)` as the conjuncts `a` and `b OR c`. A join condition repeated in
/// every branch (TPC-H Q19's `p_partkey = l_partkey`) then becomes a join key instead of
/// leaving a cross join under a filter. Both steps hold in SQL's three-valued logic:
/// AND distributes over OR, and `a OR (a AND c)` is `a`.
fn factor_or(e: Expr) -> Vec<Expr> {
    let mut branches = Vec::new();
    disjuncts(e, &mut branches);
    let mut parts: Vec<Vec<Expr>> = branches
        .into_iter()
        .map(|b| {
            let mut v = Vec::new();
            factored_conjuncts(b, &mut v);
            v
        })
        .collect();
    let mut common: Vec<Expr> = Vec::new();
    for c in &parts[0] {
        if !common.contains(c) && parts[1..].iter().all(|p| p.contains(c)) {
            common.push(c.clone());
        }
    }
    if !common.is_empty() {
        for p in &mut parts {
            p.retain(|c| !common.contains(c));
        }
        if parts.iter().any(Vec::is_empty) {
            // One branch is the common part alone, which implies every other branch.
            return common;
        }
    }
    common.extend(implied_by_branches(&parts));
    let rest = parts.into_iter().filter_map(and_all).collect();
    common.extend(combine_all(BinOp::Or, rest));
    common
}

/// Conditions an OR implies on one column each: when every branch restricts column `c`
/// (TPC-H Q7's `n1.n_name = 'FRANCE' ... OR n1.n_name = 'GERMANY' ...`, Q19's quantity
/// ranges), the OR of those restrictions holds wherever the whole OR is true, so it is added
/// as a conjunct of its own (the OR stays) and can filter that table's scan. `branches` are
/// the OR's branches as lists of conjuncts.
fn implied_by_branches(branches: &[Vec<Expr>]) -> Vec<Expr> {
    fn single_column(e: &Expr) -> Option<usize> {
        let (mut col, mut ok) = (None, true);
        e.walk(&mut |x| match x {
            Expr::Column(i) => {
                if col.is_some_and(|c| c != *i) {
                    ok = false;
                }
                col = Some(*i);
            }
            Expr::Outer(..) | Expr::Agg(_) | Expr::Window(_) | Expr::Subquery(..) | Expr::InSubquery(..) => ok = false,
            Expr::Func(name, _) if matches!(name.as_str(), "rand" | "uuid" | "uuid_short" | "sysdate") => ok = false,
            _ => {}
        });
        col.filter(|_| ok)
    }
    if branches.len() < 2 || branches.len() > CHAIN {
        return Vec::new();
    }
    let mut columns: Vec<usize> = branches[0].iter().filter_map(single_column).collect();
    columns.dedup();
    let mut out = Vec::new();
    for c in columns {
        if branches.iter().all(|b| b.iter().all(|e| single_column(e) == Some(c))) {
            // The OR restricts nothing but `c`: it is its own implied condition.
            continue;
        }
        let per_branch: Option<Vec<Expr>> = branches
            .iter()
            .map(|b| and_all(b.iter().filter(|e| single_column(e) == Some(c)).cloned().collect()))
            .collect();
        if let Some(implied) = per_branch.and_then(|p| combine_all(BinOp::Or, p)) {
            if !out.contains(&implied) {
                out.push(implied);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_common::Value;

    fn eq(c: usize, v: i64) -> Expr {
        Expr::Binary(BinOp::Eq, Box::new(Expr::Column(c)), Box::new(Expr::Literal(Value::Int(v))))
    }

    fn or(a: Expr, b: Expr) -> Expr {
        Expr::Binary(BinOp::Or, Box::new(a), Box::new(b))
    }

    fn and(a: Expr, b: Expr) -> Expr {
        Expr::Binary(BinOp::And, Box::new(a), Box::new(b))
    }

    #[test]
    fn an_or_implies_the_or_of_each_columns_restrictions() {
        // (c0 = 1 AND c1 = 2) OR (c0 = 2 AND c1 = 1): both columns are restricted in every
        // branch; the OR itself stays.
        let e = or(and(eq(0, 1), eq(1, 2)), and(eq(0, 2), eq(1, 1)));
        let mut parts = Vec::new();
        factored_conjuncts(e.clone(), &mut parts);
        assert_eq!(parts, vec![or(eq(0, 1), eq(0, 2)), or(eq(1, 2), eq(1, 1)), e]);

        // A column one branch leaves free implies nothing; an OR over one column is itself.
        let e = or(and(eq(0, 1), eq(1, 2)), eq(0, 3));
        let mut parts = Vec::new();
        factored_conjuncts(e.clone(), &mut parts);
        assert_eq!(parts, vec![or(eq(0, 1), eq(0, 3)), e]);
        let e = or(eq(0, 1), eq(0, 2));
        let mut parts = Vec::new();
        factored_conjuncts(e.clone(), &mut parts);
        assert_eq!(parts, vec![e]);

        // A restriction reading two columns, or a subquery, is not a single column's.
        let two = Expr::Binary(BinOp::Lt, Box::new(Expr::Column(0)), Box::new(Expr::Column(1)));
        let e = or(and(two.clone(), eq(1, 1)), and(two.clone(), eq(2, 1)));
        let mut parts = Vec::new();
        factored_conjuncts(e, &mut parts);
        assert_eq!(parts, vec![two, or(eq(1, 1), eq(2, 1))]);
    }
}
