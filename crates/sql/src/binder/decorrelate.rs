//! Decorrelation of scalar aggregate subqueries.
//!
//! A subquery such as
//! `(SELECT sum(h_amount) FROM history WHERE h_w_id = ? AND h_c_d_id = c.c_d_id AND h_c_id = c.c_id)`
//! runs once per outer row. When the inner side cannot use the correlated columns to find
//! its rows (no index or primary key prefix on them), each run scans the same rows again,
//! which makes the query quadratic. Such a subquery is rewritten into a grouped derived
//! table joined to the outer rows:
//!
//! ```text
//! outer LEFT HASH JOIN (SELECT h_c_d_id, h_c_id, sum(h_amount) FROM history
//!                       WHERE h_w_id = ? GROUP BY h_c_d_id, h_c_id)
//!       ON (c.c_d_id, c.c_id) = (h_c_d_id, h_c_id)
//! ```
//!
//! and the subquery expression becomes the joined aggregate column (wrapped in
//! `COALESCE(.., 0)` for COUNT, which is 0 rather than NULL over no rows). The rewrite only
//! applies to the shape whose meaning it preserves exactly: one aggregate call as the only
//! select item, no GROUP BY / HAVING / DISTINCT / ORDER BY / LIMIT, no nested subqueries, and
//! every reference to the outer row sitting in a top-level `inner_expr = outer_expr`
//! conjunct of WHERE. Each outer row then matches at most one group, so the join keeps the
//! outer cardinality, and an outer row with no group (or a NULL key) gets NULL, as the
//! subquery over no rows would.
//!
//! When the per-row plan does use a correlated column in an index or primary key access
//! (an OLTP-style lookup), the subquery is left alone: one indexed probe per outer row beats
//! aggregating the whole inner table.

use std::ops::ControlFlow;

use sqlparser::ast::{self, Visit, VisitMut};

use super::{conjuncts_ast, contains_aggregate, expr_text, lower, Binder, Scope, ScopeColumn};
use crate::expr::{BinOp, Expr};
use crate::logical::{JoinInput, LogicalPlan};
use crate::plan::{Access, JoinKind, OutputColumn, Plan};

/// A decorrelated subquery: the grouped plan to join and the join keys.
pub(super) struct Decorrelated {
    /// Output: the inner key values, then the aggregate.
    pub plan: LogicalPlan,
    /// Key expressions over the outer row (the query's FROM scope).
    pub outer_keys: Vec<Expr>,
    /// The hidden name the rewritten expression refers to.
    pub name: String,
    /// Metadata of the aggregate column.
    pub meta: OutputColumn,
    /// Metadata of the key columns.
    pub key_meta: Vec<OutputColumn>,
}

impl Decorrelated {
    /// The columns the join appends: the keys, then the aggregate under `name`.
    pub fn hidden_columns(&self) -> Vec<ScopeColumn> {
        (0..self.outer_keys.len())
            .map(|k| ScopeColumn {
                table: String::new(),
                name: format!("{}_k{k}", self.name),
                meta: OutputColumn { not_null: false, ..self.key_meta.get(k).cloned().unwrap_or_default() },
            })
            .chain(std::iter::once(ScopeColumn {
                table: String::new(),
                name: self.name.clone(),
                // Outer rows without a group read NULL.
                meta: OutputColumn { not_null: false, ..self.meta.clone() },
            }))
            .collect()
    }

    /// Joins the grouped plan to `plan` (whose columns are `scope`) and appends the hidden
    /// columns to `scope`: a LEFT join on the keys.
    pub fn join_onto(self, plan: LogicalPlan, scope: &mut Scope) -> LogicalPlan {
        let (width, keys) = (scope.columns.len(), self.outer_keys.len());
        scope.columns.extend(self.hidden_columns());
        let on = self
            .outer_keys
            .into_iter()
            .enumerate()
            .map(|(k, e)| Expr::Binary(BinOp::Eq, Box::new(e), Box::new(Expr::Column(width + k))))
            .collect();
        LogicalPlan::Join {
            inputs: vec![
                JoinInput::new(plan, width, JoinKind::Inner, Vec::new()),
                JoinInput::new(self.plan, keys + 1, JoinKind::Left, on),
            ],
            filter: Vec::new(),
            scope: scope.clone(),
        }
    }
}

impl Binder<'_> {
    /// Decorrelates the scalar subqueries of a SELECT's WHERE and, when the query does not
    /// aggregate, of its select list. Returns the rewritten SELECT (None when nothing was
    /// rewritten) and the joins its hidden columns come from. `scope` is the FROM scope.
    pub(super) fn decorrelate_select(
        &mut self,
        s: &ast::Select,
        scope: &Scope,
    ) -> (Option<ast::Select>, Vec<Decorrelated>) {
        let mut joins = Vec::new();
        if !has_scalar_subquery(s) {
            return (None, joins);
        }
        let mut copy = s.clone();
        // The derived tables are read, never locked, as per-row subqueries are.
        let saved_lock = std::mem::replace(&mut self.lock_reads, false);
        if let Some(w) = copy.selection.as_mut() {
            self.decorrelate_in(w, scope, &mut joins);
        }
        let grouped = !matches!(&s.group_by, ast::GroupByExpr::Expressions(v, _) if v.is_empty())
            || s.having.is_some()
            || s.projection.iter().any(|i| match i {
                ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                    contains_aggregate(e)
                }
                _ => false,
            });
        if !grouped {
            for item in copy.projection.iter_mut() {
                match item {
                    ast::SelectItem::UnnamedExpr(e) => {
                        let before = joins.len();
                        let original = e.clone();
                        self.decorrelate_in(e, scope, &mut joins);
                        if joins.len() != before {
                            // Keep the column name the client would see.
                            let alias = ast::Ident::new(expr_text(&original));
                            *item = ast::SelectItem::ExprWithAlias { expr: e.clone(), alias };
                        }
                    }
                    ast::SelectItem::ExprWithAlias { expr, .. } => self.decorrelate_in(expr, scope, &mut joins),
                    _ => {}
                }
            }
        }
        self.lock_reads = saved_lock;
        let rewritten = if joins.is_empty() { None } else { Some(copy) };
        (rewritten, joins)
    }

    /// Rewrites the decorrelatable scalar subqueries directly inside `e` (not those nested in
    /// other subqueries) into references to hidden columns, collecting their plans. `scope` is
    /// the FROM scope of the query `e` belongs to.
    pub(super) fn decorrelate_in(&mut self, e: &mut ast::Expr, scope: &Scope, out: &mut Vec<Decorrelated>) {
        struct V<'b, 'a> {
            binder: &'b mut Binder<'a>,
            scope: &'b Scope,
            out: &'b mut Vec<Decorrelated>,
            depth: usize,
        }
        impl ast::VisitorMut for V<'_, '_> {
            type Break = ();
            fn pre_visit_query(&mut self, _q: &mut ast::Query) -> ControlFlow<()> {
                self.depth += 1;
                ControlFlow::Continue(())
            }
            fn post_visit_query(&mut self, _q: &mut ast::Query) -> ControlFlow<()> {
                self.depth -= 1;
                ControlFlow::Continue(())
            }
            fn pre_visit_expr(&mut self, e: &mut ast::Expr) -> ControlFlow<()> {
                if self.depth > 0 {
                    return ControlFlow::Continue(());
                }
                if let ast::Expr::Subquery(q) = e {
                    let name = format!("__strata_sq{}", self.binder.decorrelated);
                    if let Some((d, count)) = self.binder.try_decorrelate(q, self.scope, &name) {
                        self.binder.decorrelated += 1;
                        let text = if count { format!("COALESCE({name}, 0)") } else { name };
                        if let Ok(new) = parse_generated(&text) {
                            *e = new;
                            self.out.push(d);
                        }
                    }
                }
                ControlFlow::Continue(())
            }
        }
        let mut v = V { binder: self, scope, out, depth: 0 };
        let _ = e.visit(&mut v);
    }

    /// The decorrelated form of `q` (with whether its aggregate is COUNT), or None when the
    /// subquery does not have the shape the rewrite preserves, or is better run per row.
    fn try_decorrelate(&mut self, q: &ast::Query, outer: &Scope, name: &str) -> Option<(Decorrelated, bool)> {
        if q.with.is_some() || q.order_by.is_some() || q.limit_clause.is_some() || !q.locks.is_empty() {
            return None;
        }
        let ast::SetExpr::Select(s) = q.body.as_ref() else { return None };
        let group_empty = matches!(&s.group_by, ast::GroupByExpr::Expressions(v, _) if v.is_empty());
        if s.from.is_empty() || s.distinct.is_some() || s.having.is_some() || !group_empty || s.projection.len() != 1 {
            return None;
        }
        if count_queries(q) != 1 {
            return None;
        }
        let agg = match &s.projection[0] {
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => e,
            _ => return None,
        };
        let ast::Expr::Function(f) = agg else { return None };
        let fname = lower(&f.name.to_string());
        if !matches!(fname.as_str(), "sum" | "min" | "max" | "avg" | "count") {
            return None;
        }
        let selection = s.selection.as_ref()?;

        // The per-row plan: leave the subquery alone if it probes an index or the primary
        // key with a correlated value.
        self.outer.push(outer.clone());
        self.correlated.push(false);
        let per_row = self.query(q);
        self.correlated.pop();
        self.outer.pop();
        let (plan, _) = per_row.ok()?;
        if keyed_by_outer(&self.physical(plan).ok()?, 0) {
            return None;
        }

        // Classify the WHERE conjuncts: local ones stay, correlated ones must be
        // `inner = outer` equalities and become the join keys.
        let inner_scope = self.scope_of_from(&s.from).ok()?;
        let mut parts = Vec::new();
        conjuncts_ast(selection, &mut parts);
        let mut local: Vec<ast::Expr> = Vec::new();
        let mut inner_keys: Vec<ast::Expr> = Vec::new();
        let mut outer_keys: Vec<Expr> = Vec::new();
        self.outer.push(outer.clone());
        self.correlated.push(false);
        let classified = (|| -> Option<()> {
            if refs_outer(&self.expr(agg, &inner_scope).ok()?) != Refs::None {
                return None;
            }
            for p in parts {
                let bound = self.expr(&p, &inner_scope).ok()?;
                match refs_outer(&bound) {
                    Refs::None => local.push(p),
                    Refs::Deeper => return None,
                    Refs::Outer => {
                        let ast::Expr::BinaryOp { left, op: ast::BinaryOperator::Eq, right } = &p else {
                            return None;
                        };
                        let Expr::Binary(BinOp::Eq, l, r) = bound else { return None };
                        let (inner_ast, outer_bound) = match (side(&l), side(&r)) {
                            (Side::Inner, Side::Outer) => (left, *r),
                            (Side::Outer, Side::Inner) => (right, *l),
                            _ => return None,
                        };
                        inner_keys.push((**inner_ast).clone());
                        outer_keys.push(outer_to_columns(outer_bound));
                    }
                }
            }
            Some(())
        })();
        self.correlated.pop();
        self.outer.pop();
        classified?;
        if inner_keys.is_empty() {
            return None;
        }

        // The grouped query: SELECT keys..., agg FROM ... WHERE local GROUP BY keys.
        let mut grouped = (**s).clone();
        grouped.projection = inner_keys
            .iter()
            .enumerate()
            .map(|(i, k)| ast::SelectItem::ExprWithAlias { expr: k.clone(), alias: ast::Ident::new(format!("k{i}")) })
            .chain(std::iter::once(ast::SelectItem::ExprWithAlias { expr: agg.clone(), alias: ast::Ident::new(name) }))
            .collect();
        grouped.selection = local.into_iter().reduce(|a, b| ast::Expr::BinaryOp {
            left: Box::new(a),
            op: ast::BinaryOperator::And,
            right: Box::new(b),
        });
        grouped.group_by = ast::GroupByExpr::Expressions(inner_keys, Vec::new());
        let mut gq = q.clone();
        *gq.body = ast::SetExpr::Select(Box::new(grouped));
        // Bound with an empty scope for the enclosing row: a reference that reaches past it
        // would make the derived table correlated, which is not supported.
        self.outer.push(Scope::default());
        self.correlated.push(false);
        let bound = self.query(&gq);
        let still_correlated = self.correlated.pop().unwrap_or(true);
        self.outer.pop();
        let (plan, gscope) = bound.ok()?;
        if still_correlated {
            return None;
        }
        let meta = gscope.columns.last()?.meta.clone();
        let key_meta = gscope.columns[..gscope.columns.len() - 1].iter().map(|c| c.meta.clone()).collect();
        Some((Decorrelated { plan, outer_keys, name: name.to_string(), meta, key_meta }, fname == "count"))
    }
}

/// Whether WHERE or the select list of `s` has a scalar subquery (at any depth).
fn has_scalar_subquery(s: &ast::Select) -> bool {
    use sqlparser::ast::Visit;
    use std::ops::ControlFlow;
    struct V;
    impl ast::Visitor for V {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &ast::Expr) -> ControlFlow<()> {
            if matches!(e, ast::Expr::Subquery(_)) {
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    s.selection.as_ref().is_some_and(|w| w.visit(&mut V).is_break())
        || s.projection.iter().any(|i| match i {
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                e.visit(&mut V).is_break()
            }
            _ => false,
        })
}

/// Number of queries in `q`, itself included (1 means no subqueries or derived tables).
fn count_queries(q: &ast::Query) -> usize {
    struct C(usize);
    impl ast::Visitor for C {
        type Break = ();
        fn pre_visit_query(&mut self, _q: &ast::Query) -> ControlFlow<()> {
            self.0 += 1;
            ControlFlow::Continue(())
        }
    }
    let mut c = C(0);
    let _ = q.visit(&mut c);
    c.0
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
fn outer_to_columns(e: Expr) -> Expr {
    e.transform(&mut |x| {
        Ok(match x {
            Expr::Outer(0, i) => Expr::Column(i),
            other => other,
        })
    })
    .unwrap_or(Expr::Literal(strata_common::Value::Null))
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

/// Parses an expression this module generated (a hidden column name, possibly in
/// COALESCE): it holds no user text, so nothing can be lost by printing and re-reading it.
fn parse_generated(text: &str) -> Result<ast::Expr, sqlparser::parser::ParserError> {
    let dialect = sqlparser::dialect::MySqlDialect {};
    sqlparser::parser::Parser::new(&dialect).try_with_sql(text)?.parse_expr()
}
