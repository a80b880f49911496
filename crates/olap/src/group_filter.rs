//! An optimizer rule DataFusion lacks: aggregate only the groups a join will use. A
//! decorrelated scalar subquery becomes an aggregate grouped by its correlation column,
//! joined to the outer query on that column; DataFusion aggregates the whole table first.
//! TPC-H Q17 aggregates all of lineitem by part key (200,000 groups at SF 1) and then keeps
//! the groups of the ~200 parts the outer query selected. With this rule the aggregate's
//! input is first cut to the rows whose group key is among the keys the other side can
//! produce ("magic sets"), so only those groups are built.
//!
//! Why it is right: a join of these types drops every row of the aggregate's side whose key
//! matches no row of the other side (the join filter only drops more), so a group whose key
//! is not among the other side's keys never reaches the output; removing its rows before
//! aggregating removes exactly that group and changes no other. The keys are taken from the
//! part of the other side the key column comes from — through projections, aliases, filters
//! and joins that keep that part's rows or fewer — so they are a superset of the keys that
//! side produces, which is all the argument needs. That part is computed a second time, so
//! it must be join-free and filtered (a selective scan: cheap, and worth it).

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, Result};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{
    Aggregate, Expr, Join, JoinConstraint, JoinType, LogicalPlan, Projection, SubqueryAlias,
};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use crate::provider::ScanTable;

/// The alias of the key set placed under an aggregate: marks an aggregate already filtered.
const KEYS_ALIAS: &str = "__strata_group_keys";

/// See the module documentation.
#[derive(Debug, Default)]
pub struct FilterGroupsByJoinKeys;

impl OptimizerRule for FilterGroupsByJoinKeys {
    fn name(&self) -> &str {
        "strata_filter_groups_by_join_keys"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::TopDown)
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        let LogicalPlan::Join(join) = &plan else { return Ok(Transformed::no(plan)) };
        if join.null_aware {
            return Ok(Transformed::no(plan));
        }
        use JoinType::*;
        // Which side's unmatched rows the join drops (that side may hold the aggregate).
        let (right_ok, left_ok) = match join.join_type {
            Inner | LeftSemi | RightSemi => (true, true),
            Left | LeftAnti => (true, false),
            Right | RightAnti => (false, true),
            _ => (false, false),
        };
        for (l, r) in &join.on {
            let (Expr::Column(lc), Expr::Column(rc)) = (l, r) else { continue };
            if right_ok {
                if let Some(right) = filtered(&join.right, rc, &join.left, lc, join)? {
                    return Ok(Transformed::yes(rebuild(join, join.left.clone(), Arc::new(right))?));
                }
            }
            if left_ok {
                if let Some(left) = filtered(&join.left, lc, &join.right, rc, join)? {
                    return Ok(Transformed::yes(rebuild(join, Arc::new(left), join.right.clone())?));
                }
            }
        }
        Ok(Transformed::no(plan))
    }
}

/// `join` over new inputs.
pub(crate) fn rebuild(join: &Join, left: Arc<LogicalPlan>, right: Arc<LogicalPlan>) -> Result<LogicalPlan> {
    Ok(LogicalPlan::Join(Join::try_new(
        left,
        right,
        join.on.clone(),
        join.filter.clone(),
        join.join_type,
        join.join_constraint,
        join.null_equality,
        join.null_aware,
    )?))
}

/// `agg_side` with its aggregate's input cut to the keys `other` can produce for
/// `other_col`, when `agg_col` is that aggregate's group column and `other` has a cheap
/// source of the keys; None otherwise.
fn filtered(
    agg_side: &Arc<LogicalPlan>,
    agg_col: &Column,
    other: &Arc<LogicalPlan>,
    other_col: &Column,
    join: &Join,
) -> Result<Option<LogicalPlan>> {
    let Some(group) = group_column(agg_side, agg_col, 0) else { return Ok(None) };
    let Some((source, key)) = key_source(other, other_col, 0) else { return Ok(None) };
    let (keys, key) = key_set(source, key, KEYS_ALIAS)?;
    cut(agg_side, keys, &key, &group, join, 0)
}

/// The values of `source`'s column `key` as a plan named `alias`, with that column.
pub(crate) fn key_set(source: Arc<LogicalPlan>, key: Column, alias: &str) -> Result<(Arc<LogicalPlan>, Column)> {
    let keys = LogicalPlan::Projection(Projection::try_new(vec![Expr::Column(key.clone())], source)?);
    let keys = LogicalPlan::SubqueryAlias(SubqueryAlias::try_new(Arc::new(keys), alias)?);
    Ok((Arc::new(keys), Column::new(Some(alias), key.name)))
}

/// `input`'s rows whose `col` is among `keys`' `key` values (`join`'s NULL equality): the
/// keys build the hash table, `input` probes it.
pub(crate) fn keys_semi_join(
    keys: Arc<LogicalPlan>,
    input: Arc<LogicalPlan>,
    key: &Column,
    col: &Column,
    join: &Join,
) -> Result<LogicalPlan> {
    Ok(LogicalPlan::Join(Join::try_new(
        keys,
        input,
        vec![(Expr::Column(key.clone()), Expr::Column(col.clone()))],
        None,
        JoinType::RightSemi,
        JoinConstraint::On,
        join.null_equality,
        false,
    )?))
}

/// Plans deeper than this are left alone (the walks recurse).
pub(crate) const MAX_DEPTH: usize = 64;

/// For a subquery alias or a projection: its input, and the input's column that `plan`'s
/// column `col` passes on unchanged; None for other nodes or a computed column.
pub(crate) fn passed_through<'a>(plan: &'a LogicalPlan, col: &Column) -> Option<(&'a Arc<LogicalPlan>, Column)> {
    match plan {
        LogicalPlan::SubqueryAlias(a) => {
            let i = a.schema.index_of_column(col).ok()?;
            Some((&a.input, Column::from(a.input.schema().qualified_field(i))))
        }
        LogicalPlan::Projection(p) => {
            let i = p.schema.index_of_column(col).ok()?;
            match unalias(p.expr.get(i)?) {
                Expr::Column(c) => Some((&p.input, c.clone())),
                _ => None,
            }
        }
        _ => None,
    }
}

fn unalias(e: &Expr) -> &Expr {
    match e {
        Expr::Alias(a) => unalias(&a.expr),
        e => e,
    }
}

/// The column of `plan`'s aggregate input that its output column `col` groups by, when
/// `plan` is an aggregate under subquery aliases, projections and filters and `col` is one
/// of its group columns as is.
fn group_column(plan: &LogicalPlan, col: &Column, depth: usize) -> Option<Column> {
    if depth > MAX_DEPTH {
        return None;
    }
    match plan {
        LogicalPlan::SubqueryAlias(_) | LogicalPlan::Projection(_) => {
            let (input, inner) = passed_through(plan, col)?;
            group_column(input, &inner, depth + 1)
        }
        LogicalPlan::Filter(f) => group_column(&f.input, col, depth + 1),
        LogicalPlan::Aggregate(a) => {
            if a.group_expr.iter().any(|e| matches!(e, Expr::GroupingSet(_))) {
                return None;
            }
            let i = a.schema.index_of_column(col).ok()?;
            match unalias(a.group_expr.get(i)?) {
                Expr::Column(c) => Some(c.clone()),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A join-free, filtered part of `plan` whose column `key` holds every value `plan`'s
/// column `col` can take (see the module documentation), with that column.
pub(crate) fn key_source(plan: &Arc<LogicalPlan>, col: &Column, depth: usize) -> Option<(Arc<LogicalPlan>, Column)> {
    if depth > MAX_DEPTH {
        return None;
    }
    if !contains_join(plan) {
        return selective(plan).then(|| (plan.clone(), col.clone()));
    }
    match plan.as_ref() {
        LogicalPlan::SubqueryAlias(_) | LogicalPlan::Projection(_) => {
            let (input, inner) = passed_through(plan, col)?;
            key_source(input, &inner, depth + 1)
        }
        LogicalPlan::Filter(f) => key_source(&f.input, col, depth + 1),
        LogicalPlan::Join(j) => {
            use JoinType::*;
            // Each output row's value of `col` is one of its own side's (inner and semi
            // joins; the outer side of an outer join would add NULL-padded rows).
            let side = match j.join_type {
                Inner => {
                    if j.left.schema().has_column(col) {
                        &j.left
                    } else {
                        &j.right
                    }
                }
                LeftSemi | LeftAnti => &j.left,
                RightSemi | RightAnti => &j.right,
                _ => return None,
            };
            if !side.schema().has_column(col) {
                return None;
            }
            key_source(side, col, depth + 1)
        }
        _ => None,
    }
}

fn contains_join(plan: &LogicalPlan) -> bool {
    let mut found = false;
    let _ = plan.apply(|p| {
        found |= matches!(p, LogicalPlan::Join(_) | LogicalPlan::Union(_) | LogicalPlan::Subquery(_));
        Ok(if found { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    });
    found
}

/// Whether `plan` filters rows (a filter, a scan with filters, a row-store read of a key
/// range or with a filter, a limit).
fn selective(plan: &LogicalPlan) -> bool {
    let mut found = false;
    let _ = plan.apply(|p| {
        found |= match p {
            LogicalPlan::Filter(_) | LogicalPlan::Limit(_) => true,
            LogicalPlan::TableScan(t) => {
                !t.filters.is_empty()
                    || source_as_provider(&t.source)
                        .ok()
                        .and_then(|p| p.downcast_ref::<ScanTable>().map(ScanTable::filters_rows))
                        .unwrap_or(false)
            }
            _ => false,
        };
        Ok(if found { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    });
    found
}

/// `plan` (as `group_column` walked it) with its aggregate's input semi-joined to `keys`
/// on `key` = `group`; None if the aggregate is filtered already.
fn cut(
    plan: &Arc<LogicalPlan>,
    keys: Arc<LogicalPlan>,
    key: &Column,
    group: &Column,
    join: &Join,
    depth: usize,
) -> Result<Option<LogicalPlan>> {
    if depth > MAX_DEPTH {
        return Ok(None);
    }
    match plan.as_ref() {
        LogicalPlan::Aggregate(a) => {
            if let LogicalPlan::Join(j) = a.input.as_ref() {
                if matches!(j.left.as_ref(), LogicalPlan::SubqueryAlias(k) if k.alias.table() == KEYS_ALIAS) {
                    return Ok(None);
                }
            }
            let semi = keys_semi_join(keys, a.input.clone(), key, group, join)?;
            Ok(Some(LogicalPlan::Aggregate(Aggregate::try_new_with_schema(
                Arc::new(semi),
                a.group_expr.clone(),
                a.aggr_expr.clone(),
                a.schema.clone(),
            )?)))
        }
        LogicalPlan::SubqueryAlias(_) | LogicalPlan::Projection(_) | LogicalPlan::Filter(_) => {
            let inputs = plan.inputs();
            let [input] = inputs.as_slice() else { return Ok(None) };
            let input = Arc::new((*input).clone());
            match cut(&input, keys, key, group, join, depth + 1)? {
                Some(new_input) => Ok(Some(plan.with_new_exprs(plan.expressions(), vec![new_input])?)),
                None => Ok(None),
            }
        }
        _ => Ok(None),
    }
}
