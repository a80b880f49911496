//! Constant propagation through equalities: `c_w_id = w_id AND w_id = ?` also gives
//! `c_w_id = ?`, so the access path of the table `c_w_id` belongs to can use it. Applies to
//! the WHERE conjuncts of every join; the original conjuncts stay.

use std::collections::{HashMap, HashSet};

use strata_common::Result;

use super::{Rule, RuleCtx};
use crate::expr::{BinOp, Expr};
use crate::logical::LogicalPlan;

/// The rule.
pub struct PropagateConstants;

impl Rule for PropagateConstants {
    fn name(&self) -> &'static str {
        "propagate_constants"
    }

    fn apply(&self, plan: LogicalPlan, _ctx: &RuleCtx) -> Result<LogicalPlan> {
        plan.transform_up(&mut |p| {
            Ok(match p {
                LogicalPlan::Join { inputs, mut filter, scope } => {
                    propagate_constants(&mut filter);
                    LogicalPlan::Join { inputs, filter, scope }
                }
                other => other,
            })
        })
    }
}

/// Adds `a = const` for every column `a` that the conjuncts equate (directly or through
/// other columns) with a constant.
pub fn propagate_constants(preds: &mut Vec<Expr>) {
    let mut parent: HashMap<usize, usize> = HashMap::new();
    fn find(p: &mut HashMap<usize, usize>, x: usize) -> usize {
        let mut r = x;
        while let Some(&n) = p.get(&r) {
            if n == r {
                break;
            }
            r = n;
        }
        p.insert(x, r);
        r
    }
    let mut consts: Vec<(usize, Expr)> = Vec::new();
    for e in preds.iter() {
        if let Expr::Binary(BinOp::Eq, a, b) = e {
            match (&**a, &**b) {
                (Expr::Column(x), Expr::Column(y)) => {
                    let (rx, ry) = (find(&mut parent, *x), find(&mut parent, *y));
                    parent.insert(rx, ry);
                    parent.entry(ry).or_insert(ry);
                }
                (Expr::Column(x), v) | (v, Expr::Column(x)) if v.is_row_constant() => consts.push((*x, v.clone())),
                _ => {}
            }
        }
    }
    if consts.is_empty() || parent.is_empty() {
        return;
    }
    let cols: Vec<usize> = parent.keys().copied().collect();
    let fixed: HashSet<usize> = consts.iter().map(|(c, _)| *c).collect();
    let mut added = Vec::new();
    for (c, v) in &consts {
        let root = find(&mut parent, *c);
        for &m in &cols {
            if m != *c && !fixed.contains(&m) && find(&mut parent, m) == root && !added.iter().any(|(x, _)| *x == m) {
                added.push((m, v.clone()));
            }
        }
    }
    for (m, v) in added {
        preds.push(Expr::Binary(BinOp::Eq, Box::new(Expr::Column(m)), Box::new(v)));
    }
}
