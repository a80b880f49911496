//! Constant folding: an expression that reads no row, parameter, enclosing row or subquery
//! is evaluated once, while planning, and replaced by its value (`DATE '1998-12-01' -
//! INTERVAL 90 DAY`, `0.06 + 0.01`, the casts the binder adds around literals). Conjuncts
//! that fold to true disappear from filters, join filters and ON conditions; a filter that
//! folds to false or NULL stays, for physical planning to see that no row passes.
//!
//! What is not folded: parameters (a plan stays valid for every execution of a prepared
//! statement), functions whose value changes per call (`RAND()`, `UUID()`, `SYSDATE()`,
//! ...), and any expression whose evaluation fails or raises a warning, which is left for
//! execution to evaluate, so that its error or warning comes when and as often as a row
//! makes it come.

use strata_common::{Result, Value};

use super::{Rule, RuleCtx};
use crate::expr::{EvalCtx, Expr, SubqueryValues};
use crate::logical::LogicalPlan;

/// The rule.
pub struct FoldConstants;

impl Rule for FoldConstants {
    fn name(&self) -> &'static str {
        "fold_constants"
    }

    fn apply(&self, plan: LogicalPlan, _ctx: &RuleCtx) -> Result<LogicalPlan> {
        plan.transform_up(&mut |p| {
            let p = p.map_exprs(&mut |e| e.transform(&mut |x| Ok(fold(x))))?;
            Ok(match p {
                LogicalPlan::Filter { input, pred } if is_true(&pred) => *input,
                LogicalPlan::Join { inputs, mut filter, scope } => {
                    filter.retain(|e| !is_true(e));
                    let inputs = inputs
                        .into_iter()
                        .map(|mut i| {
                            i.on.retain(|e| !is_true(e));
                            i
                        })
                        .collect();
                    LogicalPlan::Join { inputs, filter, scope }
                }
                other => other,
            })
        })
    }
}

/// Functions whose every call may return something else (or acts).
const VOLATILE: &[&str] = &["rand", "uuid", "uuid_short", "sysdate", "sleep", crate::failpoint::FUNCTION];

/// `e` (whose children are already folded) as a literal when it is constant.
fn fold(e: Expr) -> Expr {
    let foldable = match &e {
        Expr::Unary(_, a) | Expr::IsNull(a, _) | Expr::IsBool(a, _, _) | Expr::Cast(a, _) => is_literal(a),
        Expr::Binary(_, a, b) | Expr::Like(a, b, _, _) => is_literal(a) && is_literal(b),
        Expr::Between(a, b, c, _) => is_literal(a) && is_literal(b) && is_literal(c),
        Expr::InList(a, list, _) => is_literal(a) && list.iter().all(is_literal),
        Expr::Case(op, whens, els) => {
            op.as_deref().is_none_or(is_literal)
                && whens.iter().all(|(w, t)| is_literal(w) && is_literal(t))
                && els.as_deref().is_none_or(is_literal)
        }
        Expr::Func(name, args) => !VOLATILE.contains(&name.as_str()) && args.iter().all(is_literal),
        // Columns, parameters, enclosing rows, subqueries, aggregates, windows and row
        // constructors (which compare element by element) stay.
        _ => false,
    };
    if !foldable {
        return e;
    }
    let empty = SubqueryValues::default();
    let (value, warned) =
        crate::context::without_warnings(|| e.eval(&[], &EvalCtx { params: &[], outer: &[], subqueries: &empty }));
    match value {
        Ok(v) if !warned => Expr::Literal(v),
        _ => e,
    }
}

fn is_literal(e: &Expr) -> bool {
    matches!(e, Expr::Literal(_))
}

fn is_true(e: &Expr) -> bool {
    matches!(e, Expr::Literal(v) if !matches!(v, Value::Null) && v.as_bool() == Some(true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::{BinOp, CastType};

    fn lit(v: i64) -> Box<Expr> {
        Box::new(Expr::Literal(Value::Int(v)))
    }

    #[test]
    fn constants_fold_and_rows_parameters_and_volatile_calls_stay() {
        let sum = Expr::Binary(BinOp::Add, lit(1), lit(2));
        assert_eq!(fold_all(sum.clone()), Expr::Literal(Value::Int(3)));
        let cast = Expr::Cast(Box::new(Expr::Literal(Value::str("1998-12-01"))), CastType::Date);
        assert!(matches!(fold_all(cast), Expr::Literal(Value::Date(_))));
        // Inside an expression over a column, the constant part folds.
        let over_col = Expr::Binary(BinOp::Lt, Box::new(Expr::Column(0)), Box::new(sum.clone()));
        assert_eq!(fold_all(over_col), Expr::Binary(BinOp::Lt, Box::new(Expr::Column(0)), lit(3)));
        for stays in [
            Expr::Binary(BinOp::Add, Box::new(Expr::Param(0)), lit(1)),
            Expr::Func("rand".into(), vec![]),
            Expr::Binary(BinOp::Add, Box::new(Expr::Outer(0, 1)), lit(1)),
        ] {
            assert_eq!(fold_all(stays.clone()), stays);
        }
    }

    fn fold_all(e: Expr) -> Expr {
        e.transform(&mut |x| Ok(fold(x))).expect("folds")
    }

    /// A warning (a result over max_allowed_packet) keeps the expression for execution.
    #[tokio::test]
    async fn an_expression_that_warns_is_left_for_execution() {
        let env = crate::context::StatementEnv {
            limits: Default::default(),
            memory: crate::context::MemTracker::new(0, 0),
            reads: Default::default(),
            cached: None,
        };
        let div = Expr::Func("repeat".into(), vec![Expr::Literal(Value::str("x")), Expr::Literal(Value::Int(1 << 40))]);
        let (folded, warnings) = crate::context::scope(env, async { fold_all(div.clone()) }).await;
        assert_eq!(folded, div);
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}
