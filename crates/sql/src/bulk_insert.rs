//! The literal fast path of multi-row `INSERT ... VALUES`: bulk loads (sysbench and go-tpc
//! prepare, dumps) send statements of thousands of rows of plain literals, and parsing them
//! into SQL syntax trees and binding every cell took a fifth of the server's time during a
//! load (BENCHMARKS.md).
//!
//! A one-row INSERT of literals is read the same way, and its one row of placeholders is the
//! statement's shape for the non-prepared plan cache (`crate::text_plan`).
//!
//! `split` reads such a text by hand: the statement's head up to `VALUES`, then rows of
//! literals — numbers, strings without escapes, NULL, TRUE, FALSE. The head is parsed as
//! `<head> (?, ?, ...)`, one row of placeholders, and the literals are that row's
//! parameters, row after row (`SessionInfo::value_rows`), so the statement runs as the
//! same INSERT the full parser would have made, with the same values. Anything else in the
//! text (an escape, a comment, an expression, `DEFAULT`, ON DUPLICATE KEY UPDATE, rows of
//! different widths) returns None and the text takes the general path.

use sqlparser::ast;
use strata_common::Value;

use crate::dialect::StrataDialect;

/// A multi-row INSERT of literals, split.
pub(crate) struct LiteralRows<'a> {
    /// The text up to and including its `VALUES` keyword.
    head: &'a str,
    /// Values per row.
    pub width: usize,
    /// The rows' values, row after row.
    pub values: Vec<Value>,
}

/// Splits `sql` if it is an INSERT or REPLACE of rows of literals only.
pub(crate) fn split(sql: &str) -> Option<LiteralRows<'_>> {
    let text = sql.trim_start_matches([' ', '\t', '\r', '\n']);
    let verb = text.get(..7)?;
    if !(verb[..6].eq_ignore_ascii_case("insert") || verb.eq_ignore_ascii_case("replace")) {
        return None;
    }
    let after = values_keyword(text)?;
    let mut r = Reader { s: text.as_bytes(), at: after, text };
    let mut values = Vec::new();
    let mut width = 0;
    let mut rows = 0;
    loop {
        r.skip_space();
        if !r.eat(b'(') {
            return None;
        }
        let before = values.len();
        loop {
            r.skip_space();
            values.push(r.literal()?);
            r.skip_space();
            if r.eat(b')') {
                break;
            }
            if !r.eat(b',') {
                return None;
            }
        }
        let n = values.len() - before;
        if rows == 0 {
            width = n;
        } else if n != width {
            return None;
        }
        rows += 1;
        r.skip_space();
        if r.eat(b',') {
            continue;
        }
        if r.eat(b';') {
            r.skip_space();
        }
        if r.at != r.s.len() {
            return None;
        }
        break;
    }
    Some(LiteralRows { head: &text[..after], width, values })
}

impl LiteralRows<'_> {
    /// The statement's text with one row of placeholders for its rows.
    pub fn placeholder_text(&self) -> String {
        let mut sql = String::with_capacity(self.head.len() + 3 * self.width + 2);
        sql.push_str(self.head);
        sql.push_str(" (");
        for i in 0..self.width {
            sql.push_str(if i == 0 { "?" } else { ", ?" });
        }
        sql.push(')');
        sql
    }

    /// The statement: the head with one row of placeholders, parsed and numbered; None if
    /// it is not a plain INSERT of one such row (the text then takes the general path).
    #[cfg(test)]
    pub fn statement(&self, dialect: &StrataDialect) -> Option<ast::Statement> {
        self.statement_of(&self.placeholder_text(), dialect)
    }

    /// [`statement`](Self::statement) from its text `sql` (`placeholder_text`).
    pub fn statement_of(&self, sql: &str, dialect: &StrataDialect) -> Option<ast::Statement> {
        // Parsed and depth-checked as any text is: the head may hold anything before VALUES.
        let mut stmts = crate::session::parse(sql, dialect).ok()?;
        if stmts.len() != 1 {
            return None;
        }
        let mut stmt = stmts.remove(0);
        let ast::Statement::Insert(ins) = &stmt else { return None };
        if ins.on.is_some() || !ins.assignments.is_empty() {
            return None;
        }
        let source = ins.source.as_deref()?;
        let plain = source.with.is_none()
            && source.order_by.is_none()
            && source.limit_clause.is_none()
            && matches!(source.body.as_ref(), ast::SetExpr::Values(v)
                if v.rows.len() == 1 && v.rows[0].content.len() == self.width);
        if !plain {
            return None;
        }
        (crate::session::number_placeholders(&mut stmt) == self.width).then_some(stmt)
    }
}

/// The offset just past the top-level `VALUES` (or `VALUE`) keyword of an INSERT's text;
/// None if there is none, or if a comment or a statement separator comes first.
fn values_keyword(text: &str) -> Option<usize> {
    let s = text.as_bytes();
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            q @ (b'\'' | b'"' | b'`') => {
                // Skipped whole: a doubled quote reads as two quoted parts, which is the same
                // extent; a backslash escapes the next character inside string quotes.
                i += 1;
                while i < s.len() && s[i] != q {
                    if s[i] == b'\\' && q != b'`' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            b';' | b'#' => return None,
            b'-' if s.get(i + 1) == Some(&b'-') => return None,
            b'/' if s.get(i + 1) == Some(&b'*') => return None,
            c if is_word_byte(c) => {
                let start = i;
                while i < s.len() && is_word_byte(s[i]) {
                    i += 1;
                }
                let word = &text[start..i];
                if word.eq_ignore_ascii_case("values") || word.eq_ignore_ascii_case("value") {
                    return Some(i);
                }
            }
            _ => i += 1,
        }
    }
    None
}

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

struct Reader<'a> {
    s: &'a [u8],
    at: usize,
    text: &'a str,
}

impl Reader<'_> {
    fn skip_space(&mut self) {
        while self.at < self.s.len() && matches!(self.s[self.at], b' ' | b'\t' | b'\r' | b'\n') {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.s.get(self.at) == Some(&c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    /// One literal as the binder would evaluate it; None for anything but a number, a
    /// string without escapes, NULL, TRUE or FALSE.
    fn literal(&mut self) -> Option<Value> {
        let c = *self.s.get(self.at)?;
        match c {
            b'\'' => {
                let start = self.at + 1;
                let len = memchr::memchr2(b'\'', b'\\', &self.s[start..])?;
                let end = start + len;
                if self.s[end] != b'\'' || self.s.get(end + 1) == Some(&b'\'') {
                    return None; // an escape or a doubled quote: the general path unescapes
                }
                self.at = end + 1;
                Some(Value::str(&self.text[start..end]))
            }
            b'0'..=b'9' | b'.' => self.number(false),
            b'-' => {
                self.at += 1;
                self.number(true)
            }
            b'+' => {
                self.at += 1;
                self.number(false)
            }
            c if c.is_ascii_alphabetic() => {
                let start = self.at;
                while self.at < self.s.len() && is_word_byte(self.s[self.at]) {
                    self.at += 1;
                }
                let word = &self.text[start..self.at];
                if word.eq_ignore_ascii_case("null") {
                    Some(Value::Null)
                } else if word.eq_ignore_ascii_case("true") {
                    Some(Value::Int(1))
                } else if word.eq_ignore_ascii_case("false") {
                    Some(Value::Int(0))
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// An unsigned number (digits, a fraction, an exponent), negated if `negative`.
    fn number(&mut self, negative: bool) -> Option<Value> {
        let start = self.at;
        let digits = |r: &mut Self| {
            let from = r.at;
            while r.at < r.s.len() && r.s[r.at].is_ascii_digit() {
                r.at += 1;
            }
            r.at - from
        };
        let mut n = digits(self);
        if self.eat(b'.') {
            n += digits(self);
        }
        if n == 0 {
            return None;
        }
        if matches!(self.s.get(self.at), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.s.get(self.at), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if digits(self) == 0 {
                return None;
            }
        }
        // `1abc`, `0x1F`, `1.2.3`: not a number followed by a separator.
        if self.s.get(self.at).is_some_and(|&b| is_word_byte(b) || b == b'.') {
            return None;
        }
        let v = match plain_number(&self.s[start..self.at]) {
            Some(v) => v,
            None => crate::expr::number_literal(&self.text[start..self.at]).ok()?,
        };
        if negative {
            crate::binder::negate_literal(v).ok()
        } else {
            Some(v)
        }
    }
}

/// A literal of at most 18 characters, digits with at most one `.` between two of them:
/// the integer or decimal `expr::number_literal` makes of it, read in one pass (a load's
/// millions of numbers). None for anything else.
fn plain_number(b: &[u8]) -> Option<Value> {
    if b.is_empty() || b.len() > 18 {
        return None;
    }
    let mut m: i64 = 0;
    let mut scale: Option<u32> = None;
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'0'..=b'9' => m = m * 10 + i64::from(c - b'0'),
            b'.' if scale.is_none() && i > 0 && i + 1 < b.len() => scale = Some((b.len() - i - 1) as u32),
            _ => return None,
        }
    }
    Some(match scale {
        None => Value::Int(m),
        Some(s) => Value::Decimal(rust_decimal::Decimal::from_i128_with_scale(i128::from(m), s)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_numbers_read_as_number_literal_reads_them() {
        for s in
            ["0", "7", "007", "123456789012345678", "1.5", "12.50", "0.10", "0.000", "99999999.99", "3.14159265358979"]
        {
            let fast = plain_number(s.as_bytes()).expect(s);
            let general = crate::expr::number_literal(s).expect(s);
            assert_eq!(format!("{fast:?}"), format!("{general:?}"), "{s}");
        }
        for s in ["1234567890123456789", ".5", "5.", "1.2.3", "1e5", "", "12a"] {
            assert!(plain_number(s.as_bytes()).is_none(), "{s}");
        }
    }

    fn rows(sql: &str) -> Option<(usize, Vec<Value>)> {
        split(sql).map(|r| (r.width, r.values))
    }

    #[test]
    fn literal_rows_split() {
        let r = split("  insert INTO t(a, b) Values (1, 'x'), (-2.5, NULL) ;  ").expect("fast path");
        assert_eq!(r.head, "insert INTO t(a, b) Values");
        assert_eq!(r.width, 2);
        assert_eq!(
            r.values,
            vec![Value::Int(1), Value::str("x"), Value::Decimal("-2.5".parse().expect("decimal")), Value::Null]
        );
        let stmt = r.statement(&StrataDialect::default()).expect("statement");
        assert_eq!(stmt.to_string(), "INSERT INTO t (a, b) VALUES (?0, ?1)");
        assert_eq!(rows("INSERT INTO t VALUES (7)"), Some((1, vec![Value::Int(7)])));
        let (w, v) = rows("REPLACE t VALUE (TRUE,1e3,'a b'),(false,-9223372036854775808,'')").expect("fast path");
        assert_eq!(w, 3);
        assert_eq!(v[1], Value::Double(1000.0));
        assert_eq!(v[4], Value::Int(i64::MIN));
        assert_eq!(v[5], Value::str(""));
    }

    #[test]
    fn anything_else_takes_the_general_path() {
        for sql in [
            "INSERT INTO t VALUES (1), (2, 3)",      // widths differ
            "INSERT INTO t VALUES ('a\\'b'), ('c')", // escape
            "INSERT INTO t VALUES ('it''s'), ('c')", // doubled quote
            "INSERT INTO t VALUES ('a' 'b'), ('c')", // adjacent strings
            "INSERT INTO t VALUES (1+1), (2)",       // expression
            "INSERT INTO t VALUES (DEFAULT), (2)",   // DEFAULT
            "INSERT INTO t VALUES (now()), (2)",     // function
            "INSERT INTO t VALUES (0x1F), (2)",      // hex
            "INSERT INTO t VALUES (X'1F'), (2)",     // hex string
            "INSERT INTO t VALUES (\"a\"), (2)",     // double quotes
            "INSERT INTO t VALUES (1), (2) ON DUPLICATE KEY UPDATE a = 1",
            "INSERT INTO t VALUES (1), (2); DROP TABLE t",
            "INSERT INTO t /* c */ VALUES (1), (2)",
            "INSERT INTO t VALUES (1), (2) -- c",
            "INSERT INTO t VALUES (--1), (2)",
            "INSERT INTO t SELECT 1 FROM u",
            "UPDATE t SET a = 1",
            "INSERT INTO t VALUES (1.2.3), (2)",
        ] {
            assert!(split(sql).is_none(), "{sql}");
        }
        // A head whose `VALUES` is not the INSERT's own row list parses to something else.
        let r = split("INSERT INTO t SELECT * FROM u UNION VALUES (1), (2)");
        assert!(r.is_none_or(|r| r.statement(&StrataDialect::default()).is_none()));
        // VALUES inside quotes in the head is not the keyword.
        let r = split("INSERT INTO `values` (`values`) VALUES ('values'), ('x')").expect("fast path");
        assert_eq!(r.head, "INSERT INTO `values` (`values`) VALUES");
    }
}
