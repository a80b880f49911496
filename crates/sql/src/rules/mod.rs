//! Rules over logical plans (`crate::logical`), applied in order by `optimize`. Each rule
//! is one file and rewrites the whole plan (every node it applies to, subplans included);
//! `optimize` can record the plan after each rule (`Trace`), which is how a test sees what
//! one rule did.
//!
//! The rules, in order: `fold_constants` (expressions that read no row evaluated once),
//! `decorrelate` (a correlated scalar aggregate subquery that would rescan its table per
//! row becomes a grouped derived table joined to the outer rows),
//! `factor_or` (parts common to every branch of an OR pulled out, and
//! the restrictions each column gets in every branch), `predicate_pushdown` (filters into
//! the joins below them), `outer_to_inner` (a LEFT JOIN whose NULL-extended rows a
//! predicate rejects is an inner join), `join_reorder` (the order of an all-inner join, by statistics or
//! by which tables the predicates connect) and `propagate_constants` (`a = b AND b = ?`
//! also fixes `a`, so an access path on `a` can use it). Still done elsewhere: placement
//! of a join's conjuncts at its inputs and LIMIT pushdown, in physical planning
//! (`crate::physical`).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use strata_common::{Result, Value};

use crate::catalog::Catalog;
use crate::expr::{EvalCtx, Expr, SubqueryValues};
use crate::logical::{LogicalPlan, LogicalSubquery};
use crate::stats::TableStats;

mod decorrelate;
mod factor_or;
mod fold_constants;
mod join_reorder;
mod outer_to_inner;
mod predicate_pushdown;
mod propagate_constants;

pub use propagate_constants::propagate_constants;

/// Where rules find table statistics (the catalog; a test gives its own).
pub trait StatsSource {
    /// The statistics of a table, if it has been analyzed.
    fn stats(&self, table: i64) -> Option<Arc<TableStats>>;
}

impl StatsSource for Catalog {
    fn stats(&self, table: i64) -> Option<Arc<TableStats>> {
        Catalog::stats(self, table)
    }
}

/// What rules may consult besides the plan.
#[derive(Clone, Copy)]
pub struct RuleCtx<'a> {
    /// Table statistics.
    pub stats: &'a dyn StatsSource,
    /// The session's variables.
    pub vars: &'a BTreeMap<String, Value>,
    /// The statement's parameter values, when known.
    pub params: &'a [Value],
    /// The statement's subqueries (`Expr::Subquery(id, ..)` is `subqueries[id]`).
    pub subqueries: &'a [LogicalSubquery],
    /// Subqueries a rule has replaced (by a join): no expression refers to them any more.
    pub retired: &'a RefCell<BTreeSet<usize>>,
}

impl RuleCtx<'_> {
    /// The value of an expression that depends on no row (None when it does, or fails);
    /// parameters read their values.
    pub fn constant_value(&self, e: &Expr) -> Option<Value> {
        constant_value(e, self.params)
    }
}

/// The value of an expression that depends on no row, with parameters bound to `params`
/// (None when it depends on a row, or fails).
pub fn constant_value(e: &Expr, params: &[Value]) -> Option<Value> {
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
    e.eval(&[], &EvalCtx { params, outer: &[], subqueries: &empty }).ok()
}

/// A rewrite of logical plans.
pub trait Rule: Sync {
    /// Its name (in traces).
    fn name(&self) -> &'static str;
    /// Rewrites `plan`.
    fn apply(&self, plan: LogicalPlan, ctx: &RuleCtx) -> Result<LogicalPlan>;
}

/// The rules `optimize` applies, in order.
pub static RULES: &[&dyn Rule] = &[
    &fold_constants::FoldConstants,
    &decorrelate::Decorrelate,
    &factor_or::FactorOr,
    &predicate_pushdown::PredicatePushdown,
    &outer_to_inner::OuterToInner,
    &join_reorder::JoinReorder,
    &propagate_constants::PropagateConstants,
];

/// The plan after each rule: (rule name, plan as `LogicalPlan::explain` renders it).
pub type Trace = Vec<(&'static str, Vec<String>)>;

/// The most bytes of plan text one `optimize` call records in a trace; later plans are
/// recorded as one line saying so (a huge statement traced must not hold gigabytes).
pub const TRACE_BYTES: usize = 8 << 20;

/// Applies every rule in order; with `trace`, records the plan after each.
pub fn optimize(mut plan: LogicalPlan, ctx: &RuleCtx, mut trace: Option<&mut Trace>) -> Result<LogicalPlan> {
    let mut recorded = 0;
    for rule in RULES {
        plan = rule.apply(plan, ctx)?;
        if let Some(t) = trace.as_deref_mut() {
            let mut lines = Vec::new();
            if recorded < TRACE_BYTES {
                plan.explain(0, &mut lines);
                recorded += lines.iter().map(String::len).sum::<usize>();
            } else {
                lines.push("(plan left out: over the trace's size limit)".to_string());
            }
            t.push((rule.name(), lines));
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binder::{Scope, ScopeColumn};
    use crate::catalog::{ColumnInfo, TableInfo};
    use crate::expr::BinOp;
    use crate::logical::JoinInput;
    use crate::plan::{JoinKind, OutputColumn};

    struct NoStats;

    impl StatsSource for NoStats {
        fn stats(&self, _table: i64) -> Option<Arc<TableStats>> {
            None
        }
    }

    /// A table `name` with integer columns a and b, keyed by a.
    fn table(id: i64, name: &str) -> Arc<TableInfo> {
        let column = |id: u32, name: &str| ColumnInfo::test_int(id, name, 4, false);
        Arc::new(TableInfo {
            id,
            db: "test".into(),
            name: name.into(),
            columns: vec![column(1, "a"), column(2, "b")],
            pk: Some(vec![0]),
            indexes: Vec::new(),
            next_column_id: 3,
            next_index_id: 1,
            checks: Vec::new(),
            columnar_replica: None,
            cached: false,
        })
    }

    fn scope(tables: &[&Arc<TableInfo>]) -> Scope {
        let columns = tables
            .iter()
            .flat_map(|t| {
                t.columns.iter().map(|c| ScopeColumn {
                    table: t.name.clone(),
                    name: c.name.clone(),
                    meta: OutputColumn { name: c.name.clone(), ty: Some(c.ty.clone()), ..Default::default() },
                })
            })
            .collect();
        Scope { columns }
    }

    fn eq(a: Expr, b: Expr) -> Expr {
        Expr::Binary(BinOp::Eq, Box::new(a), Box::new(b))
    }

    fn col(i: usize) -> Expr {
        Expr::Column(i)
    }

    fn input(t: &Arc<TableInfo>, kind: JoinKind, on: Vec<Expr>) -> JoinInput {
        JoinInput::new(LogicalPlan::Scan { table: t.clone(), lock: false }, 2, kind, on)
    }

    fn tables_of(inputs: &[JoinInput]) -> Vec<String> {
        inputs
            .iter()
            .map(|i| match &i.plan {
                LogicalPlan::Scan { table, .. } => table.name.clone(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    fn after<'t>(trace: &'t Trace, rule: &str) -> &'t [String] {
        &trace.iter().find(|(name, _)| *name == rule).expect("rule in the trace").1
    }

    fn optimize_traced(plan: LogicalPlan) -> (LogicalPlan, Trace) {
        let vars = BTreeMap::new();
        let retired = RefCell::default();
        let ctx = RuleCtx { stats: &NoStats, vars: &vars, params: &[], subqueries: &[], retired: &retired };
        let mut trace = Trace::new();
        let plan = optimize(plan, &ctx, Some(&mut trace)).expect("rules apply");
        (plan, trace)
    }

    /// `FROM t1, t2, t3 WHERE t1.a = t3.a AND t3.b = t2.b AND t2.b = 5`: without
    /// statistics t3 is read second (t2 joins nothing read before it), the columns go back
    /// in written order above the join, and the constant reaches t3.b through t3.b = t2.b.
    #[test]
    fn a_from_list_joins_each_table_to_one_already_read_and_constants_propagate() {
        let (t1, t2, t3) = (table(1, "t1"), table(2, "t2"), table(3, "t3"));
        let five = Expr::lit(Value::Int(5));
        let join = LogicalPlan::Join {
            inputs: vec![
                input(&t1, JoinKind::Inner, Vec::new()),
                input(&t2, JoinKind::Inner, Vec::new()),
                input(&t3, JoinKind::Inner, Vec::new()),
            ],
            filter: vec![eq(col(0), col(4)), eq(col(5), col(3)), eq(col(3), five.clone())],
            scope: scope(&[&t1, &t2, &t3]),
        };
        let (plan, trace) = optimize_traced(join);
        assert_eq!(
            trace.iter().map(|(name, _)| *name).collect::<Vec<_>>(),
            [
                "fold_constants",
                "decorrelate",
                "factor_or",
                "predicate_pushdown",
                "outer_to_inner",
                "join_reorder",
                "propagate_constants"
            ]
        );
        // After join ordering the plan is a projection over the reordered join.
        let reordered = after(&trace, "join_reorder");
        assert!(reordered[0].starts_with("Project"), "{reordered:?}");
        assert!(reordered[1].trim_start().starts_with("Join"), "{reordered:?}");
        let LogicalPlan::Project { input, exprs } = plan else { panic!("expected a projection: {plan:?}") };
        // Written t1(0,1) t2(2,3) t3(4,5) → planned t1(0,1) t3(2,3) t2(4,5).
        assert_eq!(exprs, [0, 1, 4, 5, 2, 3].map(col));
        let LogicalPlan::Join { inputs, filter, scope } = *input else { panic!("expected a join") };
        assert_eq!(tables_of(&inputs), ["t1", "t3", "t2"]);
        assert_eq!(
            scope.columns.iter().map(|c| c.table.as_str()).collect::<Vec<_>>(),
            ["t1", "t1", "t3", "t3", "t2", "t2"]
        );
        // The conjuncts follow the columns; t3.b (now 3) = t2.b (now 5) = 5 adds t3.b = 5.
        assert_eq!(filter, [eq(col(0), col(2)), eq(col(3), col(5)), eq(col(5), five.clone()), eq(col(3), five)]);
        // The trace shows propagate_constants' addition and join_reorder's plan without it.
        assert!(!reordered[1].contains("Column(3), Literal(Int(5))"), "{reordered:?}");
        let propagated = after(&trace, "propagate_constants");
        assert!(propagated[1].contains("Column(3), Literal(Int(5))"), "{propagated:?}");
    }

    /// Outer joins keep the written order and their ON conditions.
    #[test]
    fn outer_joins_keep_their_order() {
        let (t1, t2, t3) = (table(1, "t1"), table(2, "t2"), table(3, "t3"));
        let join = LogicalPlan::Join {
            inputs: vec![
                input(&t1, JoinKind::Inner, Vec::new()),
                input(&t2, JoinKind::Left, vec![eq(col(2), col(0))]),
                input(&t3, JoinKind::Inner, Vec::new()),
            ],
            filter: vec![eq(col(0), col(4))],
            scope: scope(&[&t1, &t2, &t3]),
        };
        let (plan, _) = optimize_traced(join);
        let LogicalPlan::Join { inputs, filter, .. } = plan else { panic!("expected the join unchanged: {plan:?}") };
        assert_eq!(tables_of(&inputs), ["t1", "t2", "t3"]);
        assert_eq!(inputs[1].on, [eq(col(2), col(0))]);
        assert_eq!(filter, [eq(col(0), col(4))]);
    }

    /// A LEFT JOIN whose right side a WHERE conjunct needs non-NULL becomes an inner join
    /// (and can then be reordered); one tested with IS NULL stays an outer join.
    #[test]
    fn where_conditions_on_the_right_side_make_a_left_join_inner() {
        let (t1, t2) = (table(1, "t1"), table(2, "t2"));
        let five = || Expr::lit(Value::Int(5));
        let join = |filter| LogicalPlan::Filter {
            input: Box::new(LogicalPlan::Join {
                inputs: vec![
                    input(&t1, JoinKind::Inner, Vec::new()),
                    input(&t2, JoinKind::Left, vec![eq(col(2), col(0))]),
                ],
                filter: Vec::new(),
                scope: scope(&[&t1, &t2]),
            }),
            pred: filter,
        };
        let (plan, trace) = optimize_traced(join(eq(col(3), five())));
        let LogicalPlan::Join { inputs, filter, .. } = plan else { panic!("expected a join: {plan:?}") };
        assert_eq!(inputs[1].kind, JoinKind::Inner);
        assert_eq!(inputs[1].on, [eq(col(2), col(0))]);
        assert_eq!(filter, [eq(col(3), five())]);
        assert!(after(&trace, "predicate_pushdown")[0].contains("left on"), "{trace:?}");
        assert!(after(&trace, "outer_to_inner")[0].contains("inner on"), "{trace:?}");

        let (plan, _) = optimize_traced(join(Expr::IsNull(Box::new(col(3)), false)));
        let LogicalPlan::Join { inputs, .. } = plan else { panic!("expected a join: {plan:?}") };
        assert_eq!(inputs[1].kind, JoinKind::Left);
    }

    /// A written order that already joins each table to the ones before it stays, and its
    /// ON conditions stay with their inputs.
    #[test]
    fn a_connected_written_order_is_kept() {
        let (t1, t2, t3) = (table(1, "t1"), table(2, "t2"), table(3, "t3"));
        let join = LogicalPlan::Join {
            inputs: vec![
                input(&t1, JoinKind::Inner, Vec::new()),
                input(&t2, JoinKind::Inner, vec![eq(col(2), col(0))]),
                input(&t3, JoinKind::Inner, vec![eq(col(4), col(3))]),
            ],
            filter: Vec::new(),
            scope: scope(&[&t1, &t2, &t3]),
        };
        let (plan, _) = optimize_traced(join);
        let LogicalPlan::Join { inputs, .. } = plan else { panic!("expected the join unchanged: {plan:?}") };
        assert_eq!(tables_of(&inputs), ["t1", "t2", "t3"]);
        assert_eq!(inputs[2].on, [eq(col(4), col(3))]);
    }

    /// WHERE over a join: conjuncts without subqueries move into the join, those reading
    /// only the first input move on into it when it is a join itself; an OR's common part
    /// is pulled out first and moves too; a conjunct with a subquery stays in the filter.
    #[test]
    fn filters_move_into_joins_down_to_the_first_input() {
        let (t1, t2, t3) = (table(1, "t1"), table(2, "t2"), table(3, "t3"));
        let five = || Expr::lit(Value::Int(5));
        let or = |a, b| Expr::Binary(BinOp::Or, Box::new(a), Box::new(b));
        let and = |a, b| Expr::Binary(BinOp::And, Box::new(a), Box::new(b));
        let inner = LogicalPlan::Join {
            inputs: vec![input(&t1, JoinKind::Inner, Vec::new()), input(&t2, JoinKind::Left, vec![eq(col(2), col(0))])],
            filter: Vec::new(),
            scope: scope(&[&t1, &t2]),
        };
        let outer = LogicalPlan::Join {
            inputs: vec![
                JoinInput::new(inner, 4, JoinKind::Inner, Vec::new()),
                input(&t3, JoinKind::Left, vec![eq(col(4), col(1))]),
            ],
            filter: Vec::new(),
            scope: scope(&[&t1, &t2, &t3]),
        };
        let sub = eq(col(5), Expr::Subquery(0, crate::expr::SubqueryKind::Scalar));
        // (t1.a = 5 AND t3.b = 5) OR (t1.a = 5 AND t2.b = 5), t3.a = t1.b, t3.b = (subquery)
        let pred = and(
            and(
                or(and(eq(col(0), five()), eq(col(5), five())), and(eq(col(0), five()), eq(col(3), five()))),
                eq(col(4), col(1)),
            ),
            sub.clone(),
        );
        let (plan, trace) = optimize_traced(LogicalPlan::Filter { input: Box::new(outer), pred });
        let LogicalPlan::Filter { input, pred } = plan else { panic!("the subquery's conjunct stays: {plan:?}") };
        assert_eq!(pred, sub);
        let LogicalPlan::Join { inputs, filter, .. } = *input else { panic!("expected the outer join") };
        // The OR's rest and t3.a = t1.b read the outer join's columns.
        assert_eq!(filter, [or(eq(col(5), five()), eq(col(3), five())), eq(col(4), col(1))]);
        let LogicalPlan::Join { filter: inner_filter, .. } = &inputs[0].plan else { panic!("expected the inner join") };
        assert_eq!(inner_filter, &[eq(col(0), five())]);
        let pushed = after(&trace, "predicate_pushdown");
        assert!(pushed[0].starts_with("Filter"), "{pushed:?}");
    }
}
