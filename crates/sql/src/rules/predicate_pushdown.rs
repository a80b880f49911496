//! Predicate pushdown: a filter's conjuncts move into the join below it (where physical
//! planning applies each at the earliest input its columns allow, down to the table scans),
//! and a join's conjuncts that read only its first input move into that input when it is a
//! join itself (a decorrelated subquery's join over the FROM clause, a parenthesized join).
//! Conjuncts that read a subquery stay where they are written.

use strata_common::Result;

use super::{Rule, RuleCtx};
use crate::binder::{and_all, conjuncts};
use crate::expr::Expr;
use crate::logical::{JoinInput, LogicalPlan};

/// The rule.
pub struct PredicatePushdown;

impl Rule for PredicatePushdown {
    fn name(&self) -> &'static str {
        "predicate_pushdown"
    }

    fn apply(&self, plan: LogicalPlan, _ctx: &RuleCtx) -> Result<LogicalPlan> {
        push(plan)
    }
}

/// Pushes top-down, so a conjunct can travel through several joins.
fn push(plan: LogicalPlan) -> Result<LogicalPlan> {
    crate::depth::ensure_stack()?;
    match plan {
        LogicalPlan::Filter { input, pred } if matches!(*input, LogicalPlan::Join { .. }) => {
            let LogicalPlan::Join { inputs, mut filter, scope } = *input else { unreachable!("matched a join") };
            let total = scope.columns.len();
            let mut parts = Vec::new();
            conjuncts(pred, &mut parts);
            let (placeable, rest): (Vec<Expr>, Vec<Expr>) =
                parts.into_iter().partition(|e| !e.has_subquery() && e.columns().iter().all(|&c| c < total));
            filter.extend(placeable);
            let join = push(LogicalPlan::Join { inputs, filter, scope })?;
            Ok(match and_all(rest) {
                Some(pred) => LogicalPlan::Filter { input: Box::new(join), pred },
                None => join,
            })
        }
        LogicalPlan::Join { mut inputs, mut filter, scope } => {
            if let Some(first) = inputs.first_mut() {
                let width = first.width;
                if let LogicalPlan::Join { filter: inner, .. } = &mut first.plan {
                    let (down, keep): (Vec<Expr>, Vec<Expr>) = filter.into_iter().partition(|e| {
                        let cols = e.columns();
                        !cols.is_empty() && cols.iter().all(|&c| c < width)
                    });
                    inner.extend(down);
                    filter = keep;
                }
            }
            let inputs =
                inputs.into_iter().map(|i| Ok(JoinInput { plan: push(i.plan)?, ..i })).collect::<Result<Vec<_>>>()?;
            Ok(LogicalPlan::Join { inputs, filter, scope })
        }
        other => other.map_children(&mut push),
    }
}
