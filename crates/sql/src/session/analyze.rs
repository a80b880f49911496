//! `ANALYZE TABLE` and TiDB's `SHOW STATS_META | STATS_HISTOGRAMS | STATS_BUCKETS |
//! STATS_TOPN | STATS_HEALTHY` (see `crate::stats`).

use sqlparser::ast;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use strata_common::{Code, Error, Result, Value};

use super::Session;
use crate::result::{Column, QueryResult};
use crate::stats::{ColumnStats, TableStats};
use crate::users::privs;

/// Words that end the table list of ANALYZE TABLE (TiDB's and MySQL's options after it).
const LIST_END: &[&str] = &["with", "update", "drop", "index", "partition", "all", "columns", "predicate"];

impl Session {
    /// `ANALYZE [NO_WRITE_TO_BINLOG | LOCAL] TABLE t [, t2 ...] [options]`: gathers each
    /// table's statistics; one result row per table as MySQL reports them (a missing table
    /// is a row, not an error). Like MySQL, it commits an open transaction first.
    pub(super) async fn analyze(&mut self, text: &str) -> Result<QueryResult> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let mut at = 1;
        if words
            .get(at)
            .is_some_and(|w| w.eq_ignore_ascii_case("no_write_to_binlog") || w.eq_ignore_ascii_case("local"))
        {
            at += 1;
        }
        if !words.get(at).is_some_and(|w| w.eq_ignore_ascii_case("table")) {
            return Err(Error::parse(
                "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version \
                 for the right syntax to use near 'ANALYZE': ANALYZE TABLE needs a table name",
            ));
        }
        let list: Vec<&str> = words[at + 1..]
            .iter()
            .copied()
            .take_while(|w| !LIST_END.contains(&w.to_ascii_lowercase().as_str()))
            .collect();
        let names = list.join(" ");
        if names.trim().is_empty() {
            return Err(Error::parse("You have an error in your SQL syntax: ANALYZE TABLE needs a table name"));
        }
        let sampling = sampling(&words[at + 1 + list.len()..])?;
        let tables = self.table_list(&names)?;
        // As MySQL: every table's privileges first (1142), before anything is analyzed.
        for (db, t) in &tables {
            if !self.allowed(privs::SELECT | privs::INSERT, db, Some(t)) {
                return Err(crate::users::table_denied("SELECT, INSERT", &self.who(), t));
            }
        }
        self.commit().await?;
        let op = Value::str("analyze");
        let mut rows = Vec::new();
        for (db, t) in tables {
            let shown = Value::str(format!("{db}.{t}"));
            match self.engine.catalog.table(&db, &t) {
                Err(e) => {
                    rows.push(vec![shown.clone(), op.clone(), Value::str("Error"), Value::str(e.to_string())]);
                    rows.push(vec![shown, op.clone(), Value::str("status"), Value::str("Operation failed")]);
                }
                Ok(table) => {
                    let known = self.engine.catalog.stats(table.id).map_or(0, |s| s.row_count);
                    match sampling.map(|s| s.rows(known)) {
                        Some(Some(rows)) => self.engine.analyze_table_sampled(&table, rows).await?,
                        _ => self.engine.analyze_table(&table).await?,
                    };
                    rows.push(vec![shown, op.clone(), Value::str("status"), Value::str("OK")]);
                }
            }
        }
        let columns = ["Table", "Op", "Msg_type", "Msg_text"].into_iter().map(Column::text).collect();
        Ok(QueryResult::Rows { columns, rows })
    }

    /// TiDB's `SHOW STATS_*` statements, with an optional `LIKE 'table pattern'` or `WHERE`.
    pub(super) fn show_stats(&mut self, text: &str) -> Result<QueryResult> {
        let mut parts = text.splitn(3, char::is_whitespace);
        parts.next();
        let kind = parts.next().unwrap_or("").to_ascii_lowercase();
        let rest = parts.next().unwrap_or("").trim();
        let (names, kinds): (&[&str], &[Kind]) = match kind.as_str() {
            "stats_meta" => (
                &["Db_name", "Table_name", "Partition_name", "Update_time", "Modify_count", "Row_count"],
                &[Kind::T, Kind::T, Kind::T, Kind::T, Kind::I, Kind::I],
            ),
            "stats_histograms" => (
                &[
                    "Db_name",
                    "Table_name",
                    "Partition_name",
                    "Column_name",
                    "Is_index",
                    "Update_time",
                    "Distinct_count",
                    "Null_count",
                    "Avg_col_size",
                    "Correlation",
                ],
                &[Kind::T, Kind::T, Kind::T, Kind::T, Kind::I, Kind::T, Kind::I, Kind::I, Kind::F, Kind::F],
            ),
            "stats_buckets" => (
                &[
                    "Db_name",
                    "Table_name",
                    "Partition_name",
                    "Column_name",
                    "Is_index",
                    "Bucket_id",
                    "Count",
                    "Repeats",
                    "Lower_Bound",
                    "Upper_Bound",
                    "Ndv",
                ],
                &[Kind::T, Kind::T, Kind::T, Kind::T, Kind::I, Kind::I, Kind::I, Kind::I, Kind::T, Kind::T, Kind::I],
            ),
            "stats_topn" => (
                &["Db_name", "Table_name", "Partition_name", "Column_name", "Is_index", "Value", "Count"],
                &[Kind::T, Kind::T, Kind::T, Kind::T, Kind::I, Kind::T, Kind::I],
            ),
            "stats_healthy" => {
                (&["Db_name", "Table_name", "Partition_name", "Healthy"], &[Kind::T, Kind::T, Kind::T, Kind::I])
            }
            other => return Err(Error::parse(format!("You have an error in your SQL syntax near 'SHOW {other}'"))),
        };
        let mut rows = Vec::new();
        let schema = self.engine.catalog.schema();
        for table in schema.all_tables() {
            if !self.with_account(|a| a.allows_any(&table.db, &table.name)).unwrap_or(false) {
                continue;
            }
            let Some(stats) = self.engine.catalog.stats(table.id) else { continue };
            let modified = self.engine.catalog.modifications.get(table.id);
            let head = || vec![Value::str(table.db.clone()), Value::str(table.name.clone()), Value::str("")];
            let column_name = |c: &ColumnStats| {
                table.columns.iter().find(|x| x.id == c.column_id).map(|x| x.name.clone()).unwrap_or_default()
            };
            match kind.as_str() {
                "stats_meta" => {
                    let mut r = head();
                    r.extend([
                        Value::str(stats.analyzed_at.clone()),
                        Value::Int(modified as i64),
                        Value::Int(stats.row_count as i64),
                    ]);
                    rows.push(r);
                }
                "stats_healthy" => {
                    let mut r = head();
                    r.push(Value::Int(healthy(&stats, modified)));
                    rows.push(r);
                }
                "stats_histograms" => {
                    for c in &stats.columns {
                        let mut r = head();
                        r.extend([
                            Value::str(column_name(c)),
                            Value::Int(0),
                            Value::str(stats.analyzed_at.clone()),
                            Value::Int(c.ndv as i64),
                            Value::Int(c.nulls as i64),
                            Value::Double(c.avg_size),
                            Value::Double(0.0),
                        ]);
                        rows.push(r);
                    }
                    for ix in &stats.indexes {
                        let name = if ix.index_id == 0 {
                            "PRIMARY".to_string()
                        } else {
                            table
                                .indexes
                                .iter()
                                .find(|i| i.id == ix.index_id)
                                .map(|i| i.name.clone())
                                .unwrap_or_default()
                        };
                        let mut r = head();
                        r.extend([
                            Value::str(name),
                            Value::Int(1),
                            Value::str(stats.analyzed_at.clone()),
                            Value::Int(ix.prefix_ndv.last().copied().unwrap_or(0) as i64),
                            Value::Int(0),
                            Value::Double(0.0),
                            Value::Double(0.0),
                        ]);
                        rows.push(r);
                    }
                }
                "stats_buckets" => {
                    for c in &stats.columns {
                        for (i, b) in c.buckets.iter().enumerate() {
                            let mut r = head();
                            r.extend([
                                Value::str(column_name(c)),
                                Value::Int(0),
                                Value::Int(i as i64),
                                Value::Int(b.count as i64),
                                Value::Int(b.repeats as i64),
                                Value::str(shown(&b.lower)),
                                Value::str(shown(&b.upper)),
                                Value::Int(b.ndv as i64),
                            ]);
                            rows.push(r);
                        }
                    }
                }
                _ => {
                    for c in &stats.columns {
                        for t in &c.top_n {
                            let mut r = head();
                            r.extend([
                                Value::str(column_name(c)),
                                Value::Int(0),
                                Value::str(shown(&t.value)),
                                Value::Int(t.count as i64),
                            ]);
                            rows.push(r);
                        }
                    }
                }
            }
        }
        let columns = names
            .iter()
            .zip(kinds)
            .map(|(n, k)| match k {
                Kind::T => Column::text(n),
                Kind::I => Column::int(n),
                Kind::F => Column::double(n),
            })
            .collect();
        let result = QueryResult::Rows { columns, rows };
        let lower = rest.to_ascii_lowercase();
        if lower.is_empty() {
            Ok(result)
        } else if let Some(pattern) = lower.strip_prefix("like") {
            let pattern = rest[rest.len() - pattern.len()..].trim().trim_end_matches(';').trim();
            let pattern = pattern.trim_matches(|c| c == '\'' || c == '"');
            let QueryResult::Rows { columns, mut rows } = result else { return Ok(result) };
            rows.retain(|r| {
                let name = r[1].to_display().to_ascii_lowercase();
                crate::expr::like_match(name.as_bytes(), pattern.to_ascii_lowercase().as_bytes(), b'\\')
            });
            Ok(QueryResult::Rows { columns, rows })
        } else if lower.starts_with("where") {
            let text = rest[5..].trim().trim_end_matches(';');
            let pred: ast::Expr = Parser::new(&MySqlDialect {})
                .try_with_sql(text)
                .and_then(|mut p| p.parse_expr())
                .map_err(|e| Error::parse(e.to_string()))?;
            self.show_where(result, Some(&pred))
        } else {
            Err(Error::user(Code::Parse, format!("You have an error in your SQL syntax near '{rest}'")))
        }
    }
}

/// Column types of SHOW STATS_* results.
enum Kind {
    T,
    I,
    F,
}

/// A stored (memcomparable) value as text.
fn shown(encoded: &[u8]) -> String {
    let mut b = encoded;
    match strata_codec::memcmp::decode_value(&mut b) {
        Ok(v) => v.to_display(),
        Err(_) => encoded.iter().map(|x| format!("{x:02x}")).collect(),
    }
}

/// TiDB's health score: 100 less the share of rows modified since the analysis.
fn healthy(stats: &TableStats, modified: u64) -> i64 {
    if stats.row_count == 0 {
        return if modified == 0 { 100 } else { 0 };
    }
    let share = modified as f64 / stats.row_count as f64;
    (100.0 * (1.0 - share)).clamp(0.0, 100.0) as i64
}

/// TiDB's `WITH n SAMPLES` and `WITH r SAMPLERATE` options of ANALYZE TABLE.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Sampling {
    Rows(usize),
    Rate(f64),
}

impl Sampling {
    /// Rows to sample from a table of about `known` rows (as last analyzed); None: read
    /// every row (a rate of 1, or a rate of a table never analyzed).
    fn rows(self, known: u64) -> Option<usize> {
        match self {
            Sampling::Rows(n) => Some(n),
            Sampling::Rate(r) if r >= 1.0 || known == 0 => None,
            Sampling::Rate(r) => Some(((known as f64 * r).ceil() as usize).max(crate::stats::SAMPLE_RUN_ROWS)),
        }
    }
}

/// The sampling option among ANALYZE TABLE's options (the words after the table list:
/// `WITH 1000 SAMPLES, 64 BUCKETS`); the other options are accepted and ignored.
fn sampling(options: &[&str]) -> Result<Option<Sampling>> {
    let words: Vec<String> = options
        .iter()
        .flat_map(|w| w.split(','))
        .map(|w| w.trim().to_ascii_lowercase())
        .filter(|w| !w.is_empty())
        .collect();
    let mut found = None;
    for pair in words.windows(2) {
        let bad = |what: &str| {
            Error::user(
                Code::UnknownError,
                format!(
                    "Value of analyze option {what} should be {}",
                    match what {
                        "SAMPLES" => format!("a whole number from 1 to {}", crate::stats::MAX_SAMPLE_ROWS),
                        _ => "greater than 0 and at most 1".to_string(),
                    }
                ),
            )
        };
        match pair[1].as_str() {
            "samples" => match pair[0].parse::<usize>() {
                Ok(n) if (1..=crate::stats::MAX_SAMPLE_ROWS).contains(&n) => found = Some(Sampling::Rows(n)),
                _ => return Err(bad("SAMPLES")),
            },
            "samplerate" => match pair[0].parse::<f64>() {
                Ok(r) if r > 0.0 && r <= 1.0 => found = Some(Sampling::Rate(r)),
                _ => return Err(bad("SAMPLERATE")),
            },
            _ => {}
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_options() {
        assert_eq!(sampling(&[]).ok(), Some(None));
        assert_eq!(sampling(&["WITH", "64", "BUCKETS"]).ok(), Some(None));
        assert_eq!(sampling(&["with", "2000", "samples"]).ok(), Some(Some(Sampling::Rows(2000))));
        assert_eq!(sampling(&["WITH", "1", "TOPN,", "500", "SAMPLES"]).ok(), Some(Some(Sampling::Rows(500))));
        assert_eq!(sampling(&["WITH", "0.25", "SAMPLERATE"]).ok(), Some(Some(Sampling::Rate(0.25))));
        for bad in [&["WITH", "0", "SAMPLES"][..], &["WITH", "2", "SAMPLERATE"], &["WITH", "x", "SAMPLES"]] {
            assert_eq!(sampling(bad).err().map(|e| e.code()), Some(Code::UnknownError), "{bad:?}");
        }
        assert_eq!(Sampling::Rate(0.1).rows(100_000), Some(10_000));
        assert_eq!(Sampling::Rate(1.0).rows(100_000), None);
        assert_eq!(Sampling::Rate(0.5).rows(0), None);
        assert_eq!(Sampling::Rows(300).rows(0), Some(300));
    }
}
