//! The SQL dialect Strata parses: sqlparser's MySQL dialect, plus what depends on the
//! session's `sql_mode`. Without `PIPES_AS_CONCAT` (MySQL's default) `||` is a logical OR
//! and binds as loosely as OR (`a || b = c` is `a OR (b = c)`); with it, `||` is string
//! concatenation binding like `*`, as in standard SQL.

use sqlparser::ast::{ColumnOption, Expr, Statement};
use sqlparser::dialect::{Dialect, MySqlDialect, Precedence};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;

/// MySQL's dialect under a session's `sql_mode`.
#[derive(Debug, Default, Clone, Copy)]
pub struct StrataDialect {
    /// `sql_mode` has PIPES_AS_CONCAT (or ANSI, which implies it).
    pub pipes_as_concat: bool,
}

impl StrataDialect {
    /// The dialect for a `sql_mode` value.
    pub fn for_sql_mode(sql_mode: &str) -> StrataDialect {
        let pipes = sql_mode.split(',').any(|m| {
            let m = m.trim();
            m.eq_ignore_ascii_case("PIPES_AS_CONCAT") || m.eq_ignore_ascii_case("ANSI")
        });
        StrataDialect { pipes_as_concat: pipes }
    }
}

const MYSQL: MySqlDialect = MySqlDialect {};

impl Dialect for StrataDialect {
    fn dialect(&self) -> std::any::TypeId {
        MYSQL.dialect()
    }

    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        if !self.pipes_as_concat && parser.peek_token_ref().token == Token::StringConcat {
            return Some(Ok(self.prec_value(Precedence::Or)));
        }
        None
    }

    /// `ZEROFILL` after a numeric type (MySQL 5.7 dumps carry it), kept as a
    /// dialect-specific column option.
    fn parse_column_option(
        &self,
        parser: &mut Parser,
    ) -> Result<Option<Result<Option<ColumnOption>, ParserError>>, ParserError> {
        if let Token::Word(w) = &parser.peek_token_ref().token {
            if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("ZEROFILL") {
                let t = parser.next_token();
                return Ok(Some(Ok(Some(ColumnOption::DialectSpecific(vec![t.token])))));
            }
        }
        Ok(None)
    }

    fn is_identifier_start(&self, ch: char) -> bool {
        MYSQL.is_identifier_start(ch)
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        MYSQL.is_identifier_part(ch)
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        MYSQL.is_delimited_identifier_start(ch)
    }

    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        MYSQL.identifier_quote_style(identifier)
    }

    fn supports_string_literal_backslash_escape(&self) -> bool {
        MYSQL.supports_string_literal_backslash_escape()
    }

    fn supports_string_literal_concatenation(&self) -> bool {
        MYSQL.supports_string_literal_concatenation()
    }

    fn ignores_wildcard_escapes(&self) -> bool {
        MYSQL.ignores_wildcard_escapes()
    }

    fn supports_numeric_prefix(&self) -> bool {
        MYSQL.supports_numeric_prefix()
    }

    fn supports_bitwise_shift_operators(&self) -> bool {
        MYSQL.supports_bitwise_shift_operators()
    }

    fn supports_multiline_comment_hints(&self) -> bool {
        MYSQL.supports_multiline_comment_hints()
    }

    fn parse_infix(&self, parser: &mut Parser, expr: &Expr, precedence: u8) -> Option<Result<Expr, ParserError>> {
        MYSQL.parse_infix(parser, expr, precedence)
    }

    fn parse_statement(&self, parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
        MYSQL.parse_statement(parser)
    }

    fn require_interval_qualifier(&self) -> bool {
        MYSQL.require_interval_qualifier()
    }

    fn supports_limit_comma(&self) -> bool {
        MYSQL.supports_limit_comma()
    }

    fn supports_create_table_select(&self) -> bool {
        MYSQL.supports_create_table_select()
    }

    fn supports_insert_set(&self) -> bool {
        MYSQL.supports_insert_set()
    }

    fn supports_user_host_grantee(&self) -> bool {
        MYSQL.supports_user_host_grantee()
    }

    fn is_table_factor_alias(&self, explicit: bool, kw: &Keyword, parser: &mut Parser) -> bool {
        MYSQL.is_table_factor_alias(explicit, kw, parser)
    }

    fn supports_table_hints(&self) -> bool {
        MYSQL.supports_table_hints()
    }

    fn requires_single_line_comment_whitespace(&self) -> bool {
        MYSQL.requires_single_line_comment_whitespace()
    }

    fn supports_match_against(&self) -> bool {
        MYSQL.supports_match_against()
    }

    fn supports_select_modifiers(&self) -> bool {
        MYSQL.supports_select_modifiers()
    }

    fn supports_set_names(&self) -> bool {
        MYSQL.supports_set_names()
    }

    fn supports_comma_separated_set_assignments(&self) -> bool {
        MYSQL.supports_comma_separated_set_assignments()
    }

    fn supports_update_order_by(&self) -> bool {
        MYSQL.supports_update_order_by()
    }

    fn supports_data_type_signed_suffix(&self) -> bool {
        MYSQL.supports_data_type_signed_suffix()
    }

    fn supports_cross_join_constraint(&self) -> bool {
        MYSQL.supports_cross_join_constraint()
    }

    fn supports_double_ampersand_operator(&self) -> bool {
        MYSQL.supports_double_ampersand_operator()
    }

    fn supports_binary_kw_as_cast(&self) -> bool {
        MYSQL.supports_binary_kw_as_cast()
    }

    fn supports_comment_optimizer_hint(&self) -> bool {
        MYSQL.supports_comment_optimizer_hint()
    }

    fn supports_constraint_keyword_without_name(&self) -> bool {
        MYSQL.supports_constraint_keyword_without_name()
    }

    fn supports_key_column_option(&self) -> bool {
        MYSQL.supports_key_column_option()
    }

    fn supports_group_by_with_modifier(&self) -> bool {
        MYSQL.supports_group_by_with_modifier()
    }

    fn supports_left_associative_joins_without_parens(&self) -> bool {
        MYSQL.supports_left_associative_joins_without_parens()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::ast::{BinaryOperator, SelectItem, SetExpr};

    /// The operator at the top of the first select item.
    fn top_op(mode: &str, sql: &str) -> BinaryOperator {
        let d = StrataDialect::for_sql_mode(mode);
        let stmt = Parser::parse_sql(&d, sql).expect("parses").remove(0);
        let Statement::Query(q) = stmt else { panic!("not a query") };
        let SetExpr::Select(s) = *q.body else { panic!("not a select") };
        match &s.projection[0] {
            SelectItem::UnnamedExpr(Expr::BinaryOp { op, .. }) => op.clone(),
            other => panic!("not a binary operation: {other}"),
        }
    }

    #[test]
    fn pipes_bind_as_or_unless_pipes_as_concat() {
        assert_eq!(top_op("", "SELECT a || b = c"), BinaryOperator::StringConcat);
        assert_eq!(top_op("", "SELECT a || b AND c"), BinaryOperator::StringConcat);
        assert_eq!(top_op("STRICT_TRANS_TABLES,PIPES_AS_CONCAT", "SELECT a || b = c"), BinaryOperator::Eq);
        assert_eq!(top_op("ANSI", "SELECT a || b AND c"), BinaryOperator::And);
        // The MySQL dialect's own extensions are kept.
        assert_eq!(top_op("", "SELECT 7 DIV 2"), BinaryOperator::MyIntegerDivide);
        let d = StrataDialect::default();
        assert!(Parser::parse_sql(&d, "LOCK TABLES t READ").is_ok());
    }
}
