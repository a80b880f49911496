//! Outer join to inner join: a LEFT JOIN whose right side's NULL-extended rows a later
//! predicate would throw away anyway is an inner join (`t1 LEFT JOIN t2 ON .. WHERE t2.x >
//! 5`: a row with t2's columns NULL fails `t2.x > 5`). An inner join can be reordered, hash
//! joined from either side and have the right side's conjuncts pushed into its scan. The
//! predicates that decide are the join's WHERE conjuncts (its `filter`, after
//! `predicate_pushdown`) and the ON conditions of inner inputs after it.
//!
//! A predicate rejects NULL on a set of columns when it is NULL or false whenever those
//! columns are all NULL. The test is syntactic and conservative: comparisons, LIKE, IN,
//! BETWEEN, IS NOT NULL and NOT over expressions that are NULL when one of their operands
//! is (arithmetic, casts, the functions in `STRICT_FUNCTIONS`), combined by AND (either
//! side) and OR (both sides). `IS NULL`, `<=>`, COALESCE, IFNULL, CASE and subqueries never
//! reject.

use strata_common::Result;

use super::{Rule, RuleCtx};
use crate::expr::{BinOp, Expr, UnaryOp};
use crate::logical::LogicalPlan;
use crate::plan::JoinKind;

/// The rule.
pub struct OuterToInner;

impl Rule for OuterToInner {
    fn name(&self) -> &'static str {
        "outer_to_inner"
    }

    fn apply(&self, plan: LogicalPlan, _ctx: &RuleCtx) -> Result<LogicalPlan> {
        plan.transform_up(&mut |p| match p {
            LogicalPlan::Join { mut inputs, filter, scope } => {
                let mut offset = 0;
                let offsets: Vec<usize> = inputs
                    .iter()
                    .map(|i| {
                        let at = offset;
                        offset += i.width;
                        at
                    })
                    .collect();
                for k in 0..inputs.len() {
                    if inputs[k].kind != JoinKind::Left {
                        continue;
                    }
                    let cols = offsets[k]..offsets[k] + inputs[k].width;
                    let later_on = inputs[k + 1..].iter().filter(|i| i.kind == JoinKind::Inner).flat_map(|i| &i.on);
                    if filter.iter().chain(later_on).any(|e| rejects_null(e, &cols)) {
                        inputs[k].kind = JoinKind::Inner;
                    }
                }
                Ok(LogicalPlan::Join { inputs, filter, scope })
            }
            other => Ok(other),
        })
    }
}

/// Scalar functions that return NULL when any argument is NULL.
const STRICT_FUNCTIONS: &[&str] = &[
    "abs",
    "concat",
    "date",
    "day",
    "dayofmonth",
    "hour",
    "lcase",
    "length",
    "lower",
    "mid",
    "minute",
    "month",
    "octet_length",
    "quarter",
    "second",
    "substr",
    "substring",
    "to_days",
    "ucase",
    "upper",
    "year",
];

/// Whether the predicate `e` is NULL or false whenever every column in `cols` is NULL.
pub fn rejects_null(e: &Expr, cols: &std::ops::Range<usize>) -> bool {
    match e {
        Expr::Binary(BinOp::And, a, b) => rejects_null(a, cols) || rejects_null(b, cols),
        Expr::Binary(BinOp::Or, a, b) => rejects_null(a, cols) && rejects_null(b, cols),
        Expr::IsNull(x, true) => null_when(x, cols),
        // NOT x is NULL when x is NULL; NOT false is true, so x must be NULL, not just false.
        Expr::Unary(UnaryOp::Not, x) => null_when(x, cols),
        _ => null_when(e, cols),
    }
}

/// Whether `e` is NULL whenever every column in `cols` is NULL.
fn null_when(e: &Expr, cols: &std::ops::Range<usize>) -> bool {
    match e {
        Expr::Column(c) => cols.contains(c),
        Expr::Binary(op, a, b) => match op {
            BinOp::NullSafeEq | BinOp::And | BinOp::Or => false,
            _ => null_when(a, cols) || null_when(b, cols),
        },
        Expr::Unary(_, x) | Expr::Cast(x, _) => null_when(x, cols),
        Expr::Like(a, b, _, _) => null_when(a, cols) || null_when(b, cols),
        Expr::Between(x, _, _, _) | Expr::InList(x, _, _) => null_when(x, cols),
        Expr::Func(name, args) => STRICT_FUNCTIONS.contains(&name.as_str()) && args.iter().any(|a| null_when(a, cols)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use strata_common::Value;

    use super::*;
    use crate::expr::CastType;

    fn col(i: usize) -> Box<Expr> {
        Box::new(Expr::Column(i))
    }

    fn lit(i: i64) -> Box<Expr> {
        Box::new(Expr::Literal(Value::Int(i)))
    }

    #[test]
    fn null_rejecting_predicates() {
        let right = 2..4;
        let gt = |c| Expr::Binary(BinOp::Gt, col(c), lit(5));
        let rejecting = [
            gt(2),
            Expr::Binary(BinOp::Eq, Box::new(Expr::Binary(BinOp::Add, col(3), col(0))), col(1)),
            Expr::IsNull(col(3), true),
            Expr::Unary(UnaryOp::Not, Box::new(gt(2))),
            Expr::Binary(BinOp::And, Box::new(Expr::IsNull(col(0), false)), Box::new(gt(3))),
            Expr::Binary(BinOp::Or, Box::new(gt(2)), Box::new(gt(3))),
            Expr::InList(Box::new(Expr::Cast(col(2), CastType::Signed)), vec![*lit(1)], true),
            Expr::Binary(
                BinOp::Eq,
                Box::new(Expr::Func("year".into(), vec![Expr::Column(2)])),
                Box::new(Expr::Literal(Value::Int(1995))),
            ),
        ];
        for e in &rejecting {
            assert!(rejects_null(e, &right), "{e:?}");
        }
        let keeping = [
            gt(0),
            Expr::IsNull(col(2), false),
            Expr::Binary(BinOp::NullSafeEq, col(2), lit(1)),
            Expr::Binary(BinOp::Or, Box::new(gt(2)), Box::new(gt(0))),
            Expr::Binary(BinOp::Gt, Box::new(Expr::Func("coalesce".into(), vec![Expr::Column(2), *lit(0)])), lit(1)),
        ];
        for e in &keeping {
            assert!(!rejects_null(e, &right), "{e:?}");
        }
    }

    /// Every function the test trusts returns NULL for a NULL argument.
    #[test]
    fn strict_functions_return_null_for_null() {
        for name in STRICT_FUNCTIONS {
            let (min, _) = crate::functions::arity(name).expect("a known function");
            let mut args = vec![Value::Null];
            args.resize(min.max(1), Value::Int(1));
            assert_eq!(crate::functions::call(name, args).expect("calls"), Value::Null, "{name}");
        }
    }
}
