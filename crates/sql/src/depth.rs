//! Depth guards for recursion over client input.
//!
//! sqlparser bounds its own recursion (nested parentheses, subqueries, prefix operators) but
//! builds chains of infix operators in a loop: `1+1+...+1` with 100,000 terms parses into a
//! tree 100,000 levels deep. Everything that walks that tree afterwards recurses once per
//! level: sqlparser's derived `Drop`, `Clone`, `Display` and visitors, and our binder and
//! evaluator. A deep enough tree overflows the thread's stack, and a stack overflow aborts
//! the whole process, not one statement.
//!
//! So every parsed statement passes [`check_statements`] before anything else touches it:
//!
//! ```text
//!   parse ──► check_statement ──► depth ≤ MAX_EXPR_DEPTH ──► bind, plan, run, drop as usual
//!                   │
//!                   └─ deeper ──► subtrees past the limit cut out and dropped one level at a
//!                                 time from a heap stack (no recursion) ──► error 1436
//! ```
//!
//! The same applies to chains of set operations (`SELECT 1 UNION SELECT 1 UNION ...`). The
//! binder and the evaluator also call [`ensure_stack`] at each level as a second line: the
//! plans they build can be deeper than the text (rewrites), and a caller may run them on a
//! thread with a small stack. The server runs statements on threads with [`STACK_SIZE`] bytes
//! of stack, which holds [`MAX_EXPR_DEPTH`] levels with room to spare even in debug builds.

use std::ops::ControlFlow;

use sqlparser::ast::{self, VisitMut, VisitorMut};
use strata_common::{Code, Error, Result};

/// The deepest expression (or set-operation chain) a statement may hold.
pub const MAX_EXPR_DEPTH: usize = 3000;

/// The stack size the server gives the threads that run statements.
pub const STACK_SIZE: usize = 64 << 20;

/// Stack a recursive step must still have before it goes one level deeper.
const RED_ZONE: usize = 256 << 10;

/// sqlparser's own limit on nested parentheses, subqueries and prefix operators.
pub const MAX_PARSE_NESTING: usize = 50;

/// MySQL's 1436, for input nested deeper than `limit` levels.
pub fn stack_overrun(what: &str, limit: usize) -> Error {
    Error::user(
        Code::StackOverrun,
        format!("Thread stack overrun: {what} is nested more than {limit} levels deep; simplify the statement"),
    )
}

/// Fails with 1436 when the current thread's stack is nearly used up. Recursive functions
/// over expressions and plans call it once per level.
pub fn ensure_stack() -> Result<()> {
    match stacker::remaining_stack() {
        Some(left) if left < RED_ZONE => Err(stack_overrun("an expression or plan", MAX_EXPR_DEPTH)),
        _ => Ok(()),
    }
}

/// Refuses statements nested deeper than [`MAX_EXPR_DEPTH`] (1436). Every statement is
/// checked, and the parts of a refused one past the limit are dismantled without
/// recursion, so dropping the statements afterwards is safe.
pub fn check_statements(stmts: &mut [ast::Statement]) -> Result<()> {
    check_parts(stmts)
}

/// [`check_statements`] for parts of a statement parsed on their own (the SET list of
/// LOAD DATA).
pub fn check_parts<T: VisitMut>(parts: &mut [T]) -> Result<()> {
    let mut cutter = Cutter::new(MAX_EXPR_DEPTH);
    for p in parts.iter_mut() {
        let _ = p.visit(&mut cutter);
    }
    if cutter.is_empty() {
        return Ok(());
    }
    cutter.dismantle();
    Err(stack_overrun("the statement", MAX_EXPR_DEPTH))
}

/// Cuts out every expression deeper than `max` (replacing it with NULL) and every
/// set-operation chain longer than `max`, keeping what it cut.
struct Cutter {
    max: usize,
    depth: usize,
    exprs: Vec<ast::Expr>,
    sets: Vec<ast::SetExpr>,
}

impl Cutter {
    fn new(max: usize) -> Cutter {
        Cutter { max, depth: 0, exprs: Vec::new(), sets: Vec::new() }
    }

    fn is_empty(&self) -> bool {
        self.exprs.is_empty() && self.sets.is_empty()
    }

    /// Drops what was cut, one level at a time: a node's children are cut out before the
    /// node itself is dropped, so no drop recurses deeply. An expression keeps itself and
    /// loses the expressions under it (a cutter of depth 1); a set operation is split in
    /// two; a SELECT or other query part loses all its expressions (depth 0); both kinds of
    /// cutter also cut out the body of every query they meet.
    fn dismantle(&mut self) {
        let (mut children, mut parts) = (Cutter::new(1), Cutter::new(0));
        loop {
            if let Some(mut e) = self.exprs.pop() {
                let _ = e.visit(&mut children);
            } else if let Some(mut s) = self.sets.pop() {
                if let ast::SetExpr::SetOperation { left, right, .. } = &mut s {
                    self.sets.push(*std::mem::replace(left, empty_set()));
                    self.sets.push(*std::mem::replace(right, empty_set()));
                } else {
                    let _ = s.visit(&mut parts);
                }
            } else {
                break;
            }
            for c in [&mut children, &mut parts] {
                self.exprs.append(&mut c.exprs);
                self.sets.append(&mut c.sets);
            }
        }
    }
}

fn null_expr() -> ast::Expr {
    ast::Expr::Value(ast::Value::Null.into())
}

fn empty_set() -> Box<ast::SetExpr> {
    Box::new(ast::SetExpr::Values(ast::Values { explicit_row: false, value_keyword: false, rows: Vec::new() }))
}

/// How deep the chain of set operations under `body` goes (measured without recursion).
fn set_depth(body: &ast::SetExpr) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(body, 1usize)];
    while let Some((s, d)) = stack.pop() {
        deepest = deepest.max(d);
        if let ast::SetExpr::SetOperation { left, right, .. } = s {
            stack.push((left, d + 1));
            stack.push((right, d + 1));
        }
    }
    deepest
}

impl VisitorMut for Cutter {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut ast::Expr) -> ControlFlow<()> {
        self.depth += 1;
        if self.depth > self.max {
            self.exprs.push(std::mem::replace(expr, null_expr()));
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, _expr: &mut ast::Expr) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<()> {
        // A set-operation chain past the limit is cut whole; the dismantling cutters (depth
        // 0 or 1) cut every body, which `dismantle` then takes apart.
        if self.max <= 1 || set_depth(&query.body) > self.max {
            self.sets.push(*std::mem::replace(&mut query.body, empty_set()));
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    use super::*;

    fn parse(sql: &str) -> Vec<ast::Statement> {
        Parser::parse_sql(&MySqlDialect {}, sql).expect("parses")
    }

    /// Runs `f` on a thread with 16 MiB of stack: room for the limit's depth even in a debug
    /// build (about 1.5 KiB a level), a tenth of what recursing over 100,000 levels needs.
    fn on_small_stack(f: impl FnOnce() + Send + 'static) {
        std::thread::Builder::new().stack_size(16 << 20).spawn(f).expect("spawn").join().expect("no overflow");
    }

    #[test]
    fn shallow_statements_pass_unchanged() {
        let sql = "SELECT a + 1, (SELECT 2 UNION SELECT 3) FROM t WHERE a IN (1, 2) AND NOT b";
        let mut stmts = parse(sql);
        let before = stmts[0].to_string();
        check_statements(&mut stmts).expect("shallow");
        assert_eq!(stmts[0].to_string(), before);
    }

    #[test]
    fn deep_operator_chains_are_refused_and_dropped_without_recursion() {
        let chain = vec!["1"; 100_000].join("+");
        let ors = (0..100_000).map(|i| format!("a = {i}")).collect::<Vec<_>>().join(" OR ");
        let mut stmts = parse(&format!("SELECT {chain}; SELECT * FROM t WHERE {ors}"));
        on_small_stack(move || {
            let e = check_statements(&mut stmts).expect_err("too deep");
            assert_eq!(e.code().number(), 1436);
            drop(stmts);
        });
    }

    #[test]
    fn long_union_chains_are_refused() {
        let sql = vec!["SELECT 1"; 20_000].join(" UNION ALL ");
        let mut stmts = parse(&sql);
        on_small_stack(move || {
            assert_eq!(check_statements(&mut stmts).map_err(|e| e.code().number()), Err(1436));
            drop(stmts);
        });
    }

    /// A statement at the limit passes and survives what the server does with it (clone,
    /// print, drop) on a thread with the server's stack; one level more is refused.
    #[test]
    fn the_limit_itself_is_allowed_on_the_servers_stack() {
        std::thread::Builder::new()
            .stack_size(STACK_SIZE)
            .spawn(|| {
                let at = vec!["1"; MAX_EXPR_DEPTH].join("+");
                let mut stmts = parse(&format!("SELECT {at}"));
                assert!(check_statements(&mut stmts).is_ok());
                let copy = stmts.clone();
                assert_eq!(copy[0].to_string().len(), stmts[0].to_string().len());
                drop(copy);
                drop(stmts);
                let over = vec!["1"; MAX_EXPR_DEPTH + 1].join("+");
                assert!(check_statements(&mut parse(&format!("SELECT {over}"))).is_err());
            })
            .expect("spawn")
            .join()
            .expect("no overflow");
    }
}
