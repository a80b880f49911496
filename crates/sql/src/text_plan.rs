//! The non-prepared plan cache (TiDB's `tidb_enable_non_prepared_plan_cache`): a text
//! (COM_QUERY) SELECT, UPDATE or DELETE whose literals are only comparison operands is
//! run as if prepared, so a statement that differs from an earlier one only in those
//! literals skips parsing, binding and planning.
//!
//! [`parameterize`] tokenizes the text once and replaces the literals it may turn into
//! parameters with `?`, giving the statement's *shape* (the key) and the literals' values
//! (the parameters). The first time a shape is seen, the session parses it, numbers its
//! placeholders and checks with [`cacheable`] that every placeholder stands where a
//! parameter means what the literal meant; the parsed shape is kept, and its plan goes into
//! the session's plan cache (`crate::plan_cache`) under the shape's text, as a prepared
//! statement of that text would. A shape that does not parse, fails the check, or plans to
//! something that must not be cached (NOW(), variables, ...) is remembered as refused and
//! later runs the ordinary way, without a warning (the client did not ask for a cache).
//!
//! Which literals become parameters (the rest stay in the shape, so statements that differ
//! in them are different shapes):
//! - only in a FROM / WHERE / HAVING / ON / SET region at the top level: never in the select
//!   list (a literal there names its result column and types it), nor in ORDER BY / GROUP
//!   BY (a number there is a column position) or LIMIT;
//! - not inside a function call's parentheses (`SUBSTR(c, 1, 3)`, `CAST(x AS CHAR(10))`),
//!   nor after a word that makes it a typed literal (`DATE '...'`, `INTERVAL 1 DAY`,
//!   `_utf8mb4'...'`, `ESCAPE '!'`): only after a comparison or arithmetic operator, a
//!   comma or parenthesis of a list, or AND / OR / NOT / BETWEEN / LIKE;
//! - decimal numbers and single-quoted strings only, valued exactly as the binder values
//!   the literal (`crate::expr::number_literal`, a string): the plan key holds the
//!   parameters' types, so `a = 1` and `a = '1'` plan apart.
//!
//! [`cacheable`] then accepts a statement only if it is one SELECT (no UNION, CTE,
//! subquery or INTO), a single UPDATE or DELETE, and every placeholder is reached from a
//! WHERE / HAVING / ON condition or a SET value through comparisons, AND / OR / NOT,
//! `+ - *`, IN lists, BETWEEN, LIKE (without ESCAPE) and `IS [NOT] NULL` alone.

use sqlparser::ast;
use sqlparser::ast::Visit;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, Tokenizer};

use strata_common::Value;

use crate::dialect::StrataDialect;

/// The longest text the cache takes (longer texts are parsed as usual: their shapes would
/// rarely repeat, and every one costs a session this much memory).
pub const MAX_TEXT_BYTES: usize = 4096;

/// A text statement as a shape and the values of its parameters.
#[derive(Debug, PartialEq)]
pub struct Parameterized {
    /// The text with each parameterized literal replaced by `?`.
    pub key: String,
    /// The literals replaced, in order.
    pub params: Vec<Value>,
}

/// Where a literal met in the text stands.
#[derive(Clone, Copy, PartialEq)]
enum Region {
    /// Literals stay in the shape.
    Keep,
    /// Literals may become parameters.
    Param,
}

/// What an open parenthesis began.
#[derive(Clone, Copy, PartialEq)]
enum Paren {
    /// A function call's (or a type's) arguments: literals stay.
    Call,
    /// An IN list or a grouping: as the region around it.
    Group,
}

/// The shape and parameters of `sql`, or None when the text is not for this cache (not a
/// SELECT / UPDATE / DELETE, too long, holding comments, placeholders or several
/// statements, or not tokenizing).
pub fn parameterize(sql: &str, dialect: &StrataDialect) -> Option<Parameterized> {
    if sql.len() > MAX_TEXT_BYTES || sql.contains("/*") {
        return None;
    }
    let head = sql.trim_start();
    let word_end = head.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(head.len());
    let word = &head[..word_end];
    if !["select", "update", "delete"].iter().any(|w| word.eq_ignore_ascii_case(w)) {
        return None;
    }
    let tokens = Tokenizer::new(dialect, sql).tokenize().ok()?;
    let mut key = String::with_capacity(sql.len());
    let mut params = Vec::new();
    let mut region = Region::Keep;
    let mut parens: Vec<Paren> = Vec::new();
    // The last token that was not whitespace.
    let mut prev: Option<&Token> = None;
    let mut ended = false;
    for t in &tokens {
        if ended && !matches!(t, Token::Whitespace(_)) {
            return None; // a second statement
        }
        match t {
            Token::Whitespace(_) => {
                use std::fmt::Write;
                let _ = write!(key, "{t}");
                continue;
            }
            Token::SemiColon => {
                ended = true;
                continue;
            }
            Token::Placeholder(_) => return None,
            Token::Word(w) if parens.is_empty() && w.quote_style.is_none() => {
                region = match w.keyword {
                    Keyword::FROM | Keyword::WHERE | Keyword::HAVING | Keyword::SET | Keyword::ON => Region::Param,
                    Keyword::SELECT
                    | Keyword::ORDER
                    | Keyword::GROUP
                    | Keyword::LIMIT
                    | Keyword::OFFSET
                    | Keyword::INTO
                    | Keyword::WINDOW
                    | Keyword::FOR
                    | Keyword::LOCK
                    | Keyword::UNION
                    | Keyword::USING => Region::Keep,
                    _ => region,
                };
            }
            Token::LParen => {
                // After a name (a function's, a type's) the parenthesis holds arguments;
                // after an operator, a comma or a condition's keyword it groups.
                let call = match prev {
                    Some(Token::Word(w)) => {
                        w.quote_style.is_some()
                            || !matches!(
                                w.keyword,
                                Keyword::IN
                                    | Keyword::AND
                                    | Keyword::OR
                                    | Keyword::XOR
                                    | Keyword::NOT
                                    | Keyword::WHERE
                                    | Keyword::ON
                                    | Keyword::HAVING
                                    | Keyword::BETWEEN
                                    | Keyword::LIKE
                            )
                    }
                    _ => false,
                };
                parens.push(if call { Paren::Call } else { Paren::Group });
            }
            Token::RParen => {
                parens.pop()?;
            }
            Token::Number(n, false) if open(region, &parens, prev) && is_decimal(n) => {
                params.push(crate::expr::number_literal(n).ok()?);
                key.push('?');
                prev = Some(t);
                continue;
            }
            Token::SingleQuotedString(s) if open(region, &parens, prev) => {
                params.push(Value::str(s.clone()));
                key.push('?');
                prev = Some(t);
                continue;
            }
            // A string literal kept in the shape is written back by its value: one holding
            // a backslash would not read back the same.
            Token::SingleQuotedString(s)
            | Token::DoubleQuotedString(s)
            | Token::NationalStringLiteral(s)
            | Token::EscapedStringLiteral(s)
                if s.contains('\\') =>
            {
                return None
            }
            _ => {}
        }
        use std::fmt::Write;
        let _ = write!(key, "{t}");
        prev = Some(t);
    }
    if !parens.is_empty() {
        return None;
    }
    Some(Parameterized { key, params })
}

/// Whether a literal after `prev` becomes a parameter.
fn open(region: Region, parens: &[Paren], prev: Option<&Token>) -> bool {
    if region != Region::Param || parens.contains(&Paren::Call) {
        return false;
    }
    match prev {
        Some(
            Token::Eq
            | Token::DoubleEq
            | Token::Neq
            | Token::Lt
            | Token::Gt
            | Token::LtEq
            | Token::GtEq
            | Token::Spaceship
            | Token::Plus
            | Token::Minus
            | Token::Mul
            | Token::Comma
            | Token::LParen,
        ) => true,
        Some(Token::Word(w)) => {
            w.quote_style.is_none()
                && matches!(
                    w.keyword,
                    Keyword::AND | Keyword::OR | Keyword::NOT | Keyword::BETWEEN | Keyword::LIKE | Keyword::XOR
                )
        }
        _ => false,
    }
}

/// A plain decimal number (digits, a point, an exponent): not hex or binary notation.
fn is_decimal(n: &str) -> bool {
    n.bytes().next().is_some_and(|b| b.is_ascii_digit() || b == b'.')
        && n.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
}

/// Whether parsed shape `stmt` (placeholders numbered) may run with its literals as
/// parameters: see the module's documentation.
pub fn cacheable(stmt: &ast::Statement) -> bool {
    let total = placeholders(stmt);
    let mut reached = 0;
    match stmt {
        ast::Statement::Query(q) => {
            if q.with.is_some() || queries(stmt) != 1 {
                return false;
            }
            let ast::SetExpr::Select(s) = q.body.as_ref() else { return false };
            if s.into.is_some() {
                return false;
            }
            for t in &s.from {
                for j in &t.joins {
                    if let Some(ast::JoinConstraint::On(e)) = join_constraint(&j.join_operator) {
                        reached += operands(e);
                    }
                }
            }
            reached += s.selection.as_ref().map_or(0, operands) + s.having.as_ref().map_or(0, operands);
        }
        ast::Statement::Update(u) => {
            if queries(stmt) != 0 || u.from.is_some() || !u.table.joins.is_empty() {
                return false;
            }
            reached += u.assignments.iter().map(|a| operands(&a.value)).sum::<usize>();
            reached += u.selection.as_ref().map_or(0, operands);
        }
        ast::Statement::Delete(d) => {
            if queries(stmt) != 0 || !d.tables.is_empty() || d.using.is_some() {
                return false;
            }
            reached += d.selection.as_ref().map_or(0, operands);
        }
        _ => return false,
    }
    reached == total
}

fn join_constraint(op: &ast::JoinOperator) -> Option<&ast::JoinConstraint> {
    use ast::JoinOperator as J;
    match op {
        J::Join(c)
        | J::Inner(c)
        | J::Left(c)
        | J::LeftOuter(c)
        | J::Right(c)
        | J::RightOuter(c)
        | J::FullOuter(c)
        | J::CrossJoin(c)
        | J::StraightJoin(c) => Some(c),
        _ => None,
    }
}

/// Placeholders reached from condition or value `e` through the operators a parameter
/// may stand under.
fn operands(e: &ast::Expr) -> usize {
    use ast::BinaryOperator as B;
    use ast::Expr as E;
    match e {
        E::Value(v) => usize::from(matches!(v.value, ast::Value::Placeholder(_))),
        E::BinaryOp {
            left,
            op:
                B::Eq
                | B::NotEq
                | B::Lt
                | B::LtEq
                | B::Gt
                | B::GtEq
                | B::Spaceship
                | B::And
                | B::Or
                | B::Xor
                | B::Plus
                | B::Minus
                | B::Multiply,
            right,
        } => operands(left) + operands(right),
        E::UnaryOp { op: ast::UnaryOperator::Minus | ast::UnaryOperator::Plus | ast::UnaryOperator::Not, expr }
        | E::Nested(expr)
        | E::IsNull(expr)
        | E::IsNotNull(expr) => operands(expr),
        E::InList { expr, list, .. } => operands(expr) + list.iter().map(operands).sum::<usize>(),
        E::Between { expr, low, high, .. } => operands(expr) + operands(low) + operands(high),
        E::Like { expr, pattern, escape_char: None, any: false, .. } => operands(expr) + operands(pattern),
        _ => 0,
    }
}

/// Placeholders anywhere in `stmt`.
fn placeholders(stmt: &ast::Statement) -> usize {
    struct V(usize);
    impl ast::Visitor for V {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &ast::Expr) -> std::ops::ControlFlow<()> {
            if let ast::Expr::Value(v) = e {
                if matches!(v.value, ast::Value::Placeholder(_)) {
                    self.0 += 1;
                }
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut v = V(0);
    let _ = stmt.visit(&mut v);
    v.0
}

/// Queries in `stmt`, its own included.
fn queries(stmt: &ast::Statement) -> usize {
    struct V(usize);
    impl ast::Visitor for V {
        type Break = ();
        fn pre_visit_query(&mut self, _: &ast::Query) -> std::ops::ControlFlow<()> {
            self.0 += 1;
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut v = V(0);
    let _ = stmt.visit(&mut v);
    v.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(sql: &str) -> Option<(String, Vec<Value>)> {
        parameterize(sql, &StrataDialect::default()).map(|p| (p.key, p.params))
    }

    fn shape(sql: &str) -> Option<String> {
        p(sql).map(|(k, _)| k)
    }

    fn ok(sql: &str) -> bool {
        let Some((key, params)) = p(sql) else { return false };
        let mut stmts = crate::session::parse(&key, &StrataDialect::default()).expect("the shape parses");
        let n = crate::session::number_placeholders(&mut stmts[0]);
        n == params.len() && cacheable(&stmts[0])
    }

    #[test]
    fn comparison_operands_become_parameters() {
        assert_eq!(
            p("SELECT c FROM t WHERE id = 5 AND name = 'a''b' AND x BETWEEN -1.5 AND 2e3"),
            Some((
                "SELECT c FROM t WHERE id = ? AND name = ? AND x BETWEEN -? AND ?".into(),
                vec![
                    Value::Int(5),
                    Value::str("a'b"),
                    Value::Decimal("1.5".parse().expect("decimal")),
                    Value::Double(2000.0)
                ]
            ))
        );
        assert_eq!(shape("select * from t where a in (1, 2,3);"), Some("select * from t where a in (?, ?,?)".into()));
        assert_eq!(
            p("UPDATE t SET k = k + 1, c = 'x' WHERE id = 18446744073709551615"),
            Some((
                "UPDATE t SET k = k + ?, c = ? WHERE id = ?".into(),
                vec![Value::Int(1), Value::str("x"), Value::UInt(u64::MAX)]
            ))
        );
        assert!(ok("SELECT c FROM t WHERE id = 5 AND name LIKE 'a%' OR NOT b <=> 3"));
        assert!(ok("SELECT t.c FROM t JOIN u ON u.id = t.id AND u.k > 10 WHERE t.id IN (1, 2)"));
        assert!(ok("UPDATE t SET k = k + 1 WHERE id = 7"));
        assert!(ok("DELETE FROM t WHERE id = 7"));
    }

    #[test]
    fn literals_that_are_not_operands_stay_in_the_shape() {
        // Select list (names and types the column), positions, LIMIT.
        assert_eq!(
            shape("SELECT 1, 'a', COUNT(1) FROM t WHERE b = 2 GROUP BY 1 ORDER BY 2 LIMIT 10, 5"),
            Some("SELECT 1, 'a', COUNT(1) FROM t WHERE b = ? GROUP BY 1 ORDER BY 2 LIMIT 10, 5".into())
        );
        // Function arguments, typed literals, intervals, introducers, ESCAPE.
        assert_eq!(
            shape("SELECT c FROM t WHERE SUBSTR(c, 1, 3) = 'ab' AND d > DATE '2020-01-01' - INTERVAL 1 DAY"),
            Some("SELECT c FROM t WHERE SUBSTR(c, 1, 3) = ? AND d > DATE '2020-01-01' - INTERVAL 1 DAY".into())
        );
        assert_eq!(
            shape("SELECT c FROM t WHERE c = _utf8mb4'x' AND c LIKE 'a!%' ESCAPE '!'"),
            Some("SELECT c FROM t WHERE c = _utf8mb4'x' AND c LIKE ? ESCAPE '!'".into())
        );
        assert_eq!(
            shape("SELECT c FROM t WHERE h = 0x1F AND b = X'0A'"),
            Some("SELECT c FROM t WHERE h = X'1F' AND b = X'0A'".into())
        );
        assert!(ok("SELECT c FROM t WHERE SUBSTR(c, 1, 3) = 'ab'"));
        // Comments other than /* */ (hints, executable comments) stay as written.
        assert_eq!(
            shape("SELECT c FROM t WHERE id = 1 -- note"),
            Some("SELECT c FROM t WHERE id = ? -- note\n".into())
        );
    }

    #[test]
    fn texts_not_for_the_cache() {
        for sql in [
            "INSERT INTO t VALUES (1)",
            "SET @a = 1",
            "SELECT c FROM t WHERE id = ?",
            "SELECT 1; SELECT 2",
            "SELECT /*+ USE_INDEX(t, k) */ c FROM t WHERE id = 1",
            "SELECT c FROM t WHERE (id = 1",
        ] {
            assert_eq!(shape(sql), None, "{sql}");
        }
        // Parameters where they would mean something else, and statements with subqueries.
        for sql in [
            "SELECT c FROM t WHERE id = 1 UNION SELECT c FROM u WHERE id = 2",
            "SELECT c FROM t WHERE id IN (SELECT id FROM u WHERE k = 1)",
            "SELECT c FROM t WHERE b = 1 / a",
            "SELECT c FROM t WHERE CASE WHEN a = 1 THEN 1 END = 1",
            "SELECT c FROM t WHERE (a, b) = (1, 2)",
            "UPDATE t, u SET t.k = 1 WHERE t.id = u.id",
        ] {
            assert!(!ok(sql), "{sql}");
        }
    }
}
