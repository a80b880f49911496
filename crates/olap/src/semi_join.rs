//! An optimizer rule DataFusion lacks: push a semi join (`x IN (SELECT ..)` after
//! decorrelation) below the inner joins and projections under it, to the input its keys come
//! from. TPC-H Q18 joins customer, orders and all of lineitem, then keeps the orders whose
//! key is among the few the subquery returns; with the semi join on orders first, lineitem
//! only probes a hash table of those few orders' rows.
//!
//! A semi join keeps rows of its left input, unchanged, whose keys match; an inner join's
//! output rows each come from one row of each input, so filtering one input by a condition
//! on its own columns before the join keeps exactly the output rows the filter would keep
//! after it. A projection that passes the key columns through commutes with it likewise.

use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, Result};
use datafusion::logical_expr::{Expr, Join, JoinType, LogicalPlan, Projection};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

/// See the module documentation.
#[derive(Debug, Default)]
pub struct PushSemiJoinDown;

impl OptimizerRule for PushSemiJoinDown {
    fn name(&self) -> &str {
        "strata_push_semi_join_down"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::TopDown)
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        let LogicalPlan::Join(semi) = &plan else { return Ok(Transformed::no(plan)) };
        if semi.join_type != JoinType::LeftSemi || semi.filter.is_some() || semi.null_aware {
            return Ok(Transformed::no(plan));
        }
        let Some(keys) = semi.on.iter().map(|(l, _)| key_column(l)).collect::<Option<Vec<Column>>>() else {
            return Ok(Transformed::no(plan));
        };
        let pushed = match semi.left.as_ref() {
            LogicalPlan::Projection(p) => {
                // Every key must be a column the projection passes through by its name.
                let passes = keys.iter().all(|k| {
                    p.expr.iter().any(|e| matches!(e, Expr::Column(c) if c == k)) && p.input.schema().has_column(k)
                });
                if !passes {
                    return Ok(Transformed::no(plan));
                }
                let below = semi_over(semi, p.input.clone())?;
                LogicalPlan::Projection(Projection::try_new_with_schema(
                    p.expr.clone(),
                    Arc::new(below),
                    p.schema.clone(),
                )?)
            }
            LogicalPlan::Join(inner) if inner.join_type == JoinType::Inner => {
                let on_left = keys.iter().all(|k| inner.left.schema().has_column(k));
                let on_right = keys.iter().all(|k| inner.right.schema().has_column(k));
                let (left, right) = match (on_left, on_right) {
                    (true, false) => (Arc::new(semi_over(semi, inner.left.clone())?), inner.right.clone()),
                    (false, true) => (inner.left.clone(), Arc::new(semi_over(semi, inner.right.clone())?)),
                    _ => return Ok(Transformed::no(plan)),
                };
                LogicalPlan::Join(Join::try_new(
                    left,
                    right,
                    inner.on.clone(),
                    inner.filter.clone(),
                    inner.join_type,
                    inner.join_constraint,
                    inner.null_equality,
                    inner.null_aware,
                )?)
            }
            _ => return Ok(Transformed::no(plan)),
        };
        Ok(Transformed::yes(pushed))
    }
}

/// The column a semi join key is.
fn key_column(e: &Expr) -> Option<Column> {
    match e {
        Expr::Column(c) => Some(c.clone()),
        _ => None,
    }
}

/// `semi` with `input` as its left side.
fn semi_over(semi: &Join, input: Arc<LogicalPlan>) -> Result<LogicalPlan> {
    Ok(LogicalPlan::Join(Join::try_new(
        input,
        semi.right.clone(),
        semi.on.clone(),
        None,
        JoinType::LeftSemi,
        semi.join_constraint,
        semi.null_equality,
        false,
    )?))
}
