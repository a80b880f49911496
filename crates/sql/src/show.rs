//! SHOW statements, DESCRIBE, SHOW CREATE TABLE and the information_schema tables.

use std::collections::BTreeMap;

use sqlparser::ast;
use strata_common::{Code, Error, Result, Value};

use crate::binder::split_name;
use crate::catalog::{Catalog, DefaultValue, TableInfo};
use crate::expr::like_match;
use crate::plan::OutputColumn;
use crate::result::{Column, QueryResult};
use crate::types::ColumnType;

fn like_filter(filter: Option<&ast::ShowStatementFilter>) -> Result<Option<String>> {
    match filter {
        None => Ok(None),
        Some(ast::ShowStatementFilter::Like(p)) => Ok(Some(p.clone())),
        Some(ast::ShowStatementFilter::ILike(p)) => Ok(Some(p.clone())),
        // Applied to the result rows afterwards (`where_filter`).
        Some(ast::ShowStatementFilter::Where(_)) => Ok(None),
        Some(ast::ShowStatementFilter::NoKeyword(p)) => Ok(Some(p.clone())),
    }
}

fn matches(pattern: &Option<String>, name: &str) -> bool {
    match pattern {
        None => true,
        Some(p) => like_match(name.to_ascii_lowercase().as_bytes(), p.to_ascii_lowercase().as_bytes(), b'\\'),
    }
}

/// The WHERE expression of a SHOW statement's filter, if it has one.
pub fn where_of(filter: Option<&ast::ShowStatementFilter>) -> Option<&ast::Expr> {
    match filter {
        Some(ast::ShowStatementFilter::Where(e)) => Some(e),
        _ => None,
    }
}

/// The WHERE of a SHOW statement's options.
pub fn options_where(opts: &ast::ShowStatementOptions) -> Option<&ast::Expr> {
    where_of(opts.filter_position.as_ref().map(|p| match p {
        ast::ShowStatementFilterPosition::Infix(f) | ast::ShowStatementFilterPosition::Suffix(f) => f,
    }))
}

/// Keeps the rows of a SHOW result for which `pred` (over its column names, as MySQL
/// allows: `SHOW VARIABLES WHERE Variable_name = 'x'`) is true.
pub fn where_filter(result: QueryResult, pred: &ast::Expr, binder: &mut crate::binder::Binder) -> Result<QueryResult> {
    let QueryResult::Rows { columns, rows } = result else { return Ok(result) };
    let scope = crate::binder::Scope {
        columns: columns
            .iter()
            .map(|c| crate::binder::ScopeColumn {
                table: String::new(),
                name: c.name.to_ascii_lowercase(),
                meta: OutputColumn { name: c.name.clone(), ..Default::default() },
            })
            .collect(),
    };
    let bound = binder.expr(pred, &scope)?;
    if bound.has_subquery() {
        return Err(Error::unsupported("subquery in SHOW ... WHERE"));
    }
    let subqueries = Default::default();
    let ctx = crate::expr::EvalCtx { params: &[], outer: &[], subqueries: &subqueries };
    let mut kept = Vec::new();
    for r in rows {
        if bound.eval(&r, &ctx)?.as_bool() == Some(true) {
            kept.push(r);
        }
    }
    Ok(QueryResult::Rows { columns, rows: kept })
}

/// SHOW VARIABLES (LIKE ...).
pub fn show_variables(
    vars: &BTreeMap<String, Value>,
    filter: Option<&ast::ShowStatementFilter>,
) -> Result<QueryResult> {
    let pat = like_filter(filter)?;
    let rows = vars
        .iter()
        .filter(|(k, _)| matches(&pat, k))
        .map(|(k, v)| vec![Value::str(k.clone()), Value::str(v.to_display())])
        .collect();
    Ok(QueryResult::text_rows(&["Variable_name", "Value"], rows))
}

/// SHOW [SESSION | GLOBAL] STATUS (LIKE ...): the counters Strata keeps.
pub fn show_status(
    reads: &crate::context::ReadCounters,
    threads_connected: usize,
    tls: Option<&(String, String)>,
    pending_deletes: usize,
    store_bytes: u64,
    column: &[(&'static str, u64)],
    filter: Option<&ast::ShowStatementFilter>,
) -> Result<QueryResult> {
    use crate::context::Read;
    let (ssl_version, ssl_cipher) = tls.cloned().unwrap_or_default();
    let vars: BTreeMap<String, Value> = [
        ("Handler_read_key", Value::UInt(reads.get(Read::Key))),
        ("Handler_read_next", Value::UInt(reads.get(Read::Next))),
        ("Handler_read_rnd_next", Value::UInt(reads.get(Read::RndNext))),
        ("Threads_connected", Value::UInt(threads_connected as u64)),
        // Queries the column engine answered, and those it left to the row engine.
        ("Strata_columnar_queries", Value::UInt(reads.get(Read::Columnar))),
        ("Strata_columnar_fallbacks", Value::UInt(reads.get(Read::ColumnarFallback))),
        ("Strata_columnar_replica_reads", Value::UInt(reads.get(Read::ColumnarReplica))),
        ("Ssl_version", Value::str(ssl_version)),
        ("Ssl_cipher", Value::str(ssl_cipher)),
        // Dropped tables and indexes whose data waits for the GC safe point to be destroyed.
        ("Strata_pending_delete_ranges", Value::UInt(pending_deletes as u64)),
        // Approximate bytes the store holds (table files and memtables).
        ("Strata_store_bytes", Value::UInt(store_bytes)),
    ]
    .into_iter()
    .chain(column.iter().map(|(k, v)| (*k, Value::UInt(*v))))
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    show_variables(&vars, filter)
}

fn show_db_and_filter(opts: &ast::ShowStatementOptions) -> Result<(Option<String>, Option<String>)> {
    let db = match &opts.show_in {
        Some(si) => si.parent_name.as_ref().map(|n| split_name(n).map(|x| x.1)).transpose()?,
        None => None,
    };
    let pat = like_filter(opts.filter_position.as_ref().map(|p| match p {
        ast::ShowStatementFilterPosition::Infix(f) | ast::ShowStatementFilterPosition::Suffix(f) => f,
    }))?;
    Ok((db, pat))
}

/// SHOW DATABASES.
/// Only the databases `visible` accepts are listed (MySQL shows an account the databases it
/// holds some privilege on).
pub fn show_databases(
    cat: &Catalog,
    opts: &ast::ShowStatementOptions,
    visible: impl Fn(&str) -> bool,
) -> Result<QueryResult> {
    let (_, pat) = show_db_and_filter(opts)?;
    let mut names = vec!["information_schema".to_string()];
    names.extend(cat.databases().into_iter().filter(|d| visible(d)));
    let rows = names.into_iter().filter(|n| matches(&pat, n)).map(|n| vec![Value::str(n)]).collect();
    Ok(QueryResult::text_rows(&["Database"], rows))
}

/// SHOW (FULL) TABLES.
pub fn show_tables(
    cat: &Catalog,
    current: &Option<String>,
    full: bool,
    opts: &ast::ShowStatementOptions,
    visible: impl Fn(&str, &str) -> bool,
) -> Result<QueryResult> {
    let (db, pat) = show_db_and_filter(opts)?;
    let db = db.or(current.clone()).ok_or_else(|| Error::user(Code::NoDb, "No database selected"))?;
    if is_information_schema(&db) {
        return Ok(information_schema_tables(full, &pat));
    }
    let tables = cat.tables(&db).ok_or_else(|| Error::user(Code::BadDb, format!("Unknown database '{db}'")))?;
    let col = format!("Tables_in_{db}");
    let mut named: Vec<(String, &str)> = tables.iter().map(|t| (t.name.clone(), "BASE TABLE")).collect();
    named.extend(cat.views(&db).iter().map(|v| (v.name.clone(), "VIEW")));
    named.sort_by_key(|(n, _)| n.to_ascii_lowercase());
    let rows = named
        .into_iter()
        .filter(|(n, _)| matches(&pat, n) && visible(&db, n))
        .map(|(n, kind)| {
            let mut r = vec![Value::str(n)];
            if full {
                r.push(Value::str(kind));
            }
            r
        })
        .collect();
    if full {
        Ok(QueryResult::text_rows(&[&col, "Table_type"], rows))
    } else {
        Ok(QueryResult::text_rows(&[&col], rows))
    }
}

fn key_of(t: &TableInfo, c: usize) -> &'static str {
    if t.pk.as_ref().is_some_and(|p| p.contains(&c)) {
        "PRI"
    } else if t
        .indexes
        .iter()
        .any(|i| i.is_public() && i.unique && i.columns.first() == Some(&c) && i.columns.len() == 1)
    {
        "UNI"
    } else if t.indexes.iter().any(|i| i.is_public() && i.columns.first() == Some(&c)) {
        "MUL"
    } else {
        ""
    }
}

fn default_text(d: &Option<DefaultValue>) -> Value {
    match d {
        Some(DefaultValue::Text(t)) => Value::str(t.clone()),
        Some(DefaultValue::CurrentTimestamp) => Value::str("CURRENT_TIMESTAMP"),
        _ => Value::Null,
    }
}

fn columns_rows(t: &TableInfo, full: bool) -> Vec<Vec<Value>> {
    t.columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut r = vec![Value::str(c.name.clone()), Value::str(c.type_name())];
            if full {
                r.push(if c.ty.is_string() && !c.ty.is_binary() { Value::str("utf8mb4_bin") } else { Value::Null });
            }
            r.push(Value::str(if c.nullable { "YES" } else { "NO" }));
            r.push(Value::str(key_of(t, i)));
            r.push(default_text(&c.default));
            r.push(Value::str(if c.auto_increment {
                "auto_increment"
            } else if c.on_update_now {
                "on update CURRENT_TIMESTAMP"
            } else {
                ""
            }));
            if full {
                r.push(Value::str("select,insert,update,references"));
                r.push(Value::str(""));
            }
            r
        })
        .collect()
}

/// SHOW (FULL) COLUMNS FROM t.
pub fn show_columns(
    cat: &Catalog,
    current: &Option<String>,
    full: bool,
    opts: &ast::ShowStatementOptions,
) -> Result<QueryResult> {
    let si = opts.show_in.as_ref().ok_or_else(|| Error::parse("SHOW COLUMNS needs FROM table"))?;
    let name = si.parent_name.as_ref().ok_or_else(|| Error::parse("SHOW COLUMNS needs FROM table"))?;
    let (db, t) = split_name(name)?;
    let db = db.or(current.clone()).ok_or_else(|| Error::user(Code::NoDb, "No database selected"))?;
    let (_, pat) = show_db_and_filter(opts)?;
    let result = if is_information_schema(&db) {
        information_schema_describe(cat, &t, full)?
    } else {
        let table = cat.table(&db, &t)?;
        let cols: &[&str] = if full {
            &["Field", "Type", "Collation", "Null", "Key", "Default", "Extra", "Privileges", "Comment"]
        } else {
            &["Field", "Type", "Null", "Key", "Default", "Extra"]
        };
        QueryResult::text_rows(cols, columns_rows(&table, full))
    };
    // SHOW COLUMNS ... LIKE 'pattern' keeps the columns whose name matches.
    Ok(match result {
        QueryResult::Rows { columns, mut rows } => {
            rows.retain(|r| match r.first() {
                Some(Value::Bytes(name)) => matches(&pat, &String::from_utf8_lossy(name)),
                _ => true,
            });
            QueryResult::Rows { columns, rows }
        }
        other => other,
    })
}

/// DESCRIBE t.
pub fn describe(cat: &Catalog, current: &Option<String>, name: &ast::ObjectName) -> Result<QueryResult> {
    let (db, t) = split_name(name)?;
    let db = db.or(current.clone()).ok_or_else(|| Error::user(Code::NoDb, "No database selected"))?;
    if is_information_schema(&db) {
        return information_schema_describe(cat, &t, false);
    }
    let table = cat.table(&db, &t)?;
    Ok(QueryResult::text_rows(&["Field", "Type", "Null", "Key", "Default", "Extra"], columns_rows(&table, false)))
}

/// SHOW INDEX's columns.
const INDEX_COLUMNS: [&str; 15] = [
    "Table",
    "Non_unique",
    "Key_name",
    "Seq_in_index",
    "Column_name",
    "Collation",
    "Cardinality",
    "Sub_part",
    "Packed",
    "Null",
    "Index_type",
    "Comment",
    "Index_comment",
    "Visible",
    "Expression",
];

/// SHOW INDEX FROM t (FROM db) (parsed by hand: the SQL parser does not know it).
/// SHOW INDEX FROM t [FROM db]; `may_see(db, table)` checks the caller's privileges.
pub fn show_index(
    cat: &Catalog,
    sql: &str,
    current: &Option<String>,
    may_see: impl Fn(&str, &str) -> Result<()>,
) -> Result<QueryResult> {
    let words: Vec<&str> = sql.split_whitespace().collect();
    let tname = words.get(3).ok_or_else(|| Error::parse("SHOW INDEX needs a table"))?.trim_matches('`');
    let (db, tname) = match tname.split_once('.') {
        Some((d, t)) => (Some(d.trim_matches('`').to_string()), t.trim_matches('`').to_string()),
        None => (words.get(5).map(|d| d.trim_matches('`').to_string()), tname.to_string()),
    };
    let db = db.or(current.clone()).ok_or_else(|| Error::user(Code::NoDb, "No database selected"))?;
    if is_information_schema(&db) {
        // Its tables have no indexes (an unknown one is still an error).
        information_schema(cat, &tname)?;
        return Ok(QueryResult::text_rows(&INDEX_COLUMNS, Vec::new()));
    }
    may_see(&db, &tname)?;
    let t = cat.table(&db, &tname)?;
    let stats = cat.stats(t.id);
    let mut rows = Vec::new();
    let mut push = |name: &str, unique: bool, cols: &[usize], id: i64| {
        for (seq, c) in cols.iter().enumerate() {
            rows.push(vec![
                Value::str(t.name.clone()),
                Value::Int(!unique as i64),
                Value::str(name),
                Value::Int(seq as i64 + 1),
                Value::str(t.columns[*c].name.clone()),
                Value::str("A"),
                cardinality(stats.as_deref(), id, seq).unwrap_or(Value::Int(0)),
                Value::Null,
                Value::Null,
                Value::str(if t.columns[*c].nullable { "YES" } else { "" }),
                Value::str("BTREE"),
                Value::str(""),
                Value::str(""),
                Value::str("YES"),
                Value::Null,
            ]);
        }
    };
    if let Some(pk) = &t.pk {
        push("PRIMARY", true, pk, 0);
    }
    for i in t.indexes.iter().filter(|i| i.is_public()) {
        push(&i.name, i.unique, &i.columns, i.id);
    }
    Ok(QueryResult::text_rows(&INDEX_COLUMNS, rows))
}

/// An index prefix's distinct values from the table's statistics (`id` 0: the primary
/// key; `seq` counts from 0), as SHOW INDEX's CARDINALITY.
fn cardinality(stats: Option<&crate::stats::TableStats>, id: i64, seq: usize) -> Option<Value> {
    stats?.index(id)?.prefix_ndv.get(seq).map(|n| Value::Int(*n as i64))
}

/// The CREATE TABLE text of a table.
pub fn create_table_sql(t: &TableInfo) -> String {
    let q = |s: &str| format!("`{}`", s.replace('`', "``"));
    let mut lines = Vec::new();
    for c in &t.columns {
        let mut l = format!("  {} {}", q(&c.name), c.type_name());
        if let Some((expr, stored)) = &c.generated {
            l.push_str(&format!(" GENERATED ALWAYS AS ({expr}) {}", if *stored { "STORED" } else { "VIRTUAL" }));
        }
        if !c.nullable {
            l.push_str(" NOT NULL");
        }
        match &c.default {
            _ if c.generated.is_some() => {}
            Some(DefaultValue::Text(v)) => {
                l.push_str(&format!(" DEFAULT '{}'", v.replace('\\', "\\\\").replace('\'', "''")))
            }
            Some(DefaultValue::CurrentTimestamp) => l.push_str(" DEFAULT CURRENT_TIMESTAMP"),
            Some(DefaultValue::Null) => l.push_str(" DEFAULT NULL"),
            None if c.nullable => l.push_str(" DEFAULT NULL"),
            None => {}
        }
        if c.auto_increment {
            l.push_str(" AUTO_INCREMENT");
        }
        if c.on_update_now {
            l.push_str(" ON UPDATE CURRENT_TIMESTAMP");
        }
        lines.push(l);
    }
    let names = |cols: &[usize]| cols.iter().map(|c| q(&t.columns[*c].name)).collect::<Vec<_>>().join(",");
    if let Some(pk) = &t.pk {
        lines.push(format!("  PRIMARY KEY ({}) /*T![clustered_index] CLUSTERED */", names(pk)));
    }
    for i in t.indexes.iter().filter(|i| i.is_public()) {
        lines.push(format!("  {}KEY {} ({})", if i.unique { "UNIQUE " } else { "" }, q(&i.name), names(&i.columns)));
    }
    for c in &t.checks {
        let enforced = if c.enforced { "" } else { " /*!80016 NOT ENFORCED */" };
        lines.push(format!("  CONSTRAINT {} CHECK ({}){enforced}", q(&c.name), c.expr));
    }
    format!(
        "CREATE TABLE {} (\n{}\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin{}",
        q(&t.name),
        lines.join(",\n"),
        // TiDB's mark of a cached table (a comment to MySQL).
        if t.cached { " /* CACHED ON */" } else { "" }
    )
}

/// SHOW CREATE TABLE / DATABASE.
pub fn show_create(
    cat: &Catalog,
    current: &Option<String>,
    kind: ast::ShowCreateObject,
    name: &ast::ObjectName,
) -> Result<QueryResult> {
    match kind {
        ast::ShowCreateObject::Table => {
            let (db, t) = split_name(name)?;
            let db = db.or(current.clone()).ok_or_else(|| Error::user(Code::NoDb, "No database selected"))?;
            if is_information_schema(&db) {
                // As MySQL 5.7 shows them: temporary tables of the MEMORY engine.
                let name = t.to_ascii_uppercase();
                let cols: Vec<String> = information_schema_columns(cat, &t)?
                    .into_iter()
                    .map(|(c, ty)| format!("  `{c}` {} DEFAULT NULL", ty.sql_name()))
                    .collect();
                let sql = format!(
                    "CREATE TEMPORARY TABLE `{name}` (\n{}\n) ENGINE=MEMORY DEFAULT CHARSET=utf8mb4",
                    cols.join(",\n")
                );
                return Ok(QueryResult::text_rows(
                    &["Table", "Create Table"],
                    vec![vec![Value::str(name), Value::str(sql)]],
                ));
            }
            if let Some(v) = cat.try_view(&db, &t) {
                return Ok(crate::views::show_create_view(&v));
            }
            let table = cat.table(&db, &t)?;
            Ok(QueryResult::text_rows(
                &["Table", "Create Table"],
                vec![vec![Value::str(table.name.clone()), Value::str(create_table_sql(&table))]],
            ))
        }
        ast::ShowCreateObject::View => {
            let (db, t) = split_name(name)?;
            let db = db.or(current.clone()).ok_or_else(|| Error::user(Code::NoDb, "No database selected"))?;
            match cat.try_view(&db, &t) {
                Some(v) => Ok(crate::views::show_create_view(&v)),
                None if cat.try_table(&db, &t).is_some() => {
                    Err(Error::user(Code::WrongObject, format!("'{db}.{t}' is not VIEW")))
                }
                None => Err(Error::user(Code::NoSuchTable, format!("Table '{db}.{t}' doesn't exist"))),
            }
        }
        other => Err(Error::unsupported(format!("SHOW CREATE {other}"))),
    }
}

fn text_cols(names: &[&str]) -> Vec<OutputColumn> {
    names.iter().map(|n| OutputColumn { name: n.to_string(), org_name: n.to_string(), ..Default::default() }).collect()
}

/// The information_schema tables `information_schema` knows, as SHOW TABLES names them.
pub const INFORMATION_SCHEMA_TABLES: &[&str] = &[
    "CHARACTER_SETS",
    "COLLATIONS",
    "COLUMNS",
    "ENGINES",
    "FILES",
    "KEY_COLUMN_USAGE",
    "OPTIMIZER_TRACE",
    "PARTITIONS",
    "PROCESSLIST",
    "REFERENTIAL_CONSTRAINTS",
    "ROUTINES",
    "SCHEMATA",
    "STATEMENTS_SUMMARY",
    "STATEMENTS_SUMMARY_HISTORY",
    "STATISTICS",
    "TABLES",
    "TABLE_CONSTRAINTS",
    "TIFLASH_REPLICA",
    "TRIGGERS",
    "USER_PRIVILEGES",
    "VIEWS",
];

fn is_information_schema(db: &str) -> bool {
    db.eq_ignore_ascii_case("information_schema")
}

/// SHOW TABLES FROM information_schema.
fn information_schema_tables(full: bool, pat: &Option<String>) -> QueryResult {
    let rows = INFORMATION_SCHEMA_TABLES
        .iter()
        .filter(|n| matches(pat, n))
        .map(|n| {
            let mut r = vec![Value::str(*n)];
            if full {
                r.push(Value::str("SYSTEM VIEW"));
            }
            r
        })
        .collect();
    let col = "Tables_in_information_schema";
    if full {
        QueryResult::text_rows(&[col, "Table_type"], rows)
    } else {
        QueryResult::text_rows(&[col], rows)
    }
}

/// An information_schema table's columns with their types (those of its values, as a
/// SELECT from it reports them), for DESCRIBE, SHOW COLUMNS and SHOW CREATE TABLE.
fn information_schema_columns(cat: &Catalog, table: &str) -> Result<Vec<(String, ColumnType)>> {
    let (cols, rows) = information_schema(cat, table)?;
    Ok(crate::binder::information_schema_types(cols, &rows)
        .into_iter()
        .map(|c| (c.name, c.ty.unwrap_or(ColumnType::Varchar(64))))
        .collect())
}

/// DESCRIBE / SHOW (FULL) COLUMNS of an information_schema table: every column nullable,
/// no keys or defaults.
fn information_schema_describe(cat: &Catalog, table: &str, full: bool) -> Result<QueryResult> {
    let rows = information_schema_columns(cat, table)?
        .into_iter()
        .map(|(name, ty)| {
            let mut r = vec![Value::str(name), Value::str(ty.sql_name())];
            if full {
                r.push(if ty.is_string() && !ty.is_binary() { Value::str("utf8mb4_bin") } else { Value::Null });
            }
            r.extend([Value::str("YES"), Value::str(""), Value::Null, Value::str("")]);
            if full {
                r.extend([Value::str("select"), Value::str("")]);
            }
            r
        })
        .collect();
    Ok(if full {
        QueryResult::text_rows(
            &["Field", "Type", "Collation", "Null", "Key", "Default", "Extra", "Privileges", "Comment"],
            rows,
        )
    } else {
        QueryResult::text_rows(&["Field", "Type", "Null", "Key", "Default", "Extra"], rows)
    })
}

/// Rows of an information_schema table, with MySQL 8's columns (the ones tools select by
/// name: JDBC `DatabaseMetaData`, mysqldump, SQLAlchemy reflection, GUI clients). Tables for
/// objects Strata does not have (views, routines, triggers, partitions, files, foreign keys)
/// exist with their columns and no rows; so do PROCESSLIST and USER_PRIVILEGES here (the
/// session fills them through `binder::LiveTables`, which also hides the databases and tables
/// an account holds no privilege on).
pub fn information_schema(cat: &Catalog, table: &str) -> Result<(Vec<OutputColumn>, Vec<Vec<Value>>)> {
    let s = |v: &str| Value::str(v);
    let int = |v: i64| Value::Int(v);
    let null = Value::Null;
    let mut dbs = vec!["information_schema".to_string()];
    dbs.extend(cat.databases());
    let all_tables: Vec<std::sync::Arc<TableInfo>> =
        cat.databases().iter().flat_map(|d| cat.tables(d).unwrap_or_default()).collect();
    let all_views: Vec<std::sync::Arc<crate::catalog::ViewInfo>> =
        cat.databases().iter().flat_map(|d| cat.views(d)).collect();
    let empty = |names: &[&str]| (text_cols(names), Vec::new());
    Ok(match table.to_ascii_lowercase().as_str() {
        "schemata" => (
            text_cols(&[
                "CATALOG_NAME",
                "SCHEMA_NAME",
                "DEFAULT_CHARACTER_SET_NAME",
                "DEFAULT_COLLATION_NAME",
                "SQL_PATH",
                "DEFAULT_ENCRYPTION",
            ]),
            dbs.into_iter()
                .map(|d| vec![s("def"), Value::str(d), s("utf8mb4"), s("utf8mb4_bin"), null.clone(), s("NO")])
                .collect(),
        ),
        "tables" => (
            text_cols(&[
                "TABLE_CATALOG",
                "TABLE_SCHEMA",
                "TABLE_NAME",
                "TABLE_TYPE",
                "ENGINE",
                "VERSION",
                "ROW_FORMAT",
                "TABLE_ROWS",
                "AVG_ROW_LENGTH",
                "DATA_LENGTH",
                "MAX_DATA_LENGTH",
                "INDEX_LENGTH",
                "DATA_FREE",
                "AUTO_INCREMENT",
                "CREATE_TIME",
                "UPDATE_TIME",
                "CHECK_TIME",
                "TABLE_COLLATION",
                "CHECKSUM",
                "CREATE_OPTIONS",
                "TABLE_COMMENT",
                "TIDB_TABLE_ID",
            ]),
            all_tables
                .iter()
                .map(|t| {
                    // From the last ANALYZE (0 before one, as TiDB shows a table without
                    // statistics).
                    let stats = cat.stats(t.id);
                    let rows = stats.as_ref().map_or(0, |st| st.row_count);
                    let avg = stats.as_ref().map_or(0.0, |st| st.avg_row_size()).round() as i64;
                    vec![
                        s("def"),
                        Value::str(t.db.clone()),
                        Value::str(t.name.clone()),
                        s("BASE TABLE"),
                        s("InnoDB"),
                        int(10),
                        s("Dynamic"),
                        int(rows as i64),
                        int(avg),
                        int(avg * rows as i64),
                        int(0),
                        int(0),
                        int(0),
                        null.clone(),
                        null.clone(),
                        null.clone(),
                        null.clone(),
                        s("utf8mb4_bin"),
                        null.clone(),
                        s(""),
                        s(""),
                        int(t.id),
                    ]
                })
                .chain(all_views.iter().map(|v| {
                    let mut r = vec![s("def"), Value::str(v.db.clone()), Value::str(v.name.clone()), s("VIEW")];
                    r.extend(std::iter::repeat_n(null.clone(), 16));
                    r.push(s("VIEW"));
                    r.push(null.clone());
                    r
                }))
                .collect(),
        ),
        "columns" => {
            let mut rows = Vec::new();
            for t in &all_tables {
                for (i, c) in t.columns.iter().enumerate() {
                    let (prec, scale) = match c.ty {
                        ColumnType::Decimal { precision, scale } => (int(precision as i64), int(scale as i64)),
                        ColumnType::Int { bytes, unsigned } => {
                            (int(crate::typing::int_digits(bytes, unsigned) as i64), int(0))
                        }
                        ColumnType::Float => (int(12), null.clone()),
                        ColumnType::Double => (int(22), null.clone()),
                        _ => (null.clone(), null.clone()),
                    };
                    let datetime_precision = match c.ty {
                        ColumnType::Date => int(0),
                        ColumnType::DateTime(f) | ColumnType::Timestamp(f) | ColumnType::Time(f) => int(f as i64),
                        _ => null.clone(),
                    };
                    let (chars, octets, charset, collation) = match c.ty {
                        ColumnType::Char(n) | ColumnType::Varchar(n) | ColumnType::Text(n) => {
                            (int(n as i64), int(n as i64 * 4), s("utf8mb4"), s("utf8mb4_bin"))
                        }
                        ColumnType::Blob(n) => (int(n as i64), int(n as i64), null.clone(), null.clone()),
                        _ => (null.clone(), null.clone(), null.clone(), null.clone()),
                    };
                    let data_type = c.ty.sql_name().split(['(', ' ']).next().unwrap_or("").to_string();
                    rows.push(vec![
                        s("def"),
                        Value::str(t.db.clone()),
                        Value::str(t.name.clone()),
                        Value::str(c.name.clone()),
                        int(i as i64 + 1),
                        default_text(&c.default),
                        s(if c.nullable { "YES" } else { "NO" }),
                        Value::str(data_type),
                        chars,
                        octets,
                        prec,
                        scale,
                        datetime_precision,
                        charset,
                        collation,
                        Value::str(c.type_name()),
                        s(key_of(t, i)),
                        s(if c.auto_increment { "auto_increment" } else { "" }),
                        s("select,insert,update,references"),
                        s(""),
                        s(""),
                        null.clone(),
                    ]);
                }
            }
            (
                text_cols(&[
                    "TABLE_CATALOG",
                    "TABLE_SCHEMA",
                    "TABLE_NAME",
                    "COLUMN_NAME",
                    "ORDINAL_POSITION",
                    "COLUMN_DEFAULT",
                    "IS_NULLABLE",
                    "DATA_TYPE",
                    "CHARACTER_MAXIMUM_LENGTH",
                    "CHARACTER_OCTET_LENGTH",
                    "NUMERIC_PRECISION",
                    "NUMERIC_SCALE",
                    "DATETIME_PRECISION",
                    "CHARACTER_SET_NAME",
                    "COLLATION_NAME",
                    "COLUMN_TYPE",
                    "COLUMN_KEY",
                    "EXTRA",
                    "PRIVILEGES",
                    "COLUMN_COMMENT",
                    "GENERATION_EXPRESSION",
                    "SRS_ID",
                ]),
                rows,
            )
        }
        "statistics" => {
            let mut rows = Vec::new();
            for t in &all_tables {
                let stats = cat.stats(t.id);
                let mut push = |name: &str, unique: bool, cols: &[usize], id: i64| {
                    for (seq, c) in cols.iter().enumerate() {
                        rows.push(vec![
                            s("def"),
                            Value::str(t.db.clone()),
                            Value::str(t.name.clone()),
                            int(!unique as i64),
                            Value::str(t.db.clone()),
                            Value::str(name),
                            int(seq as i64 + 1),
                            Value::str(t.columns[*c].name.clone()),
                            s("A"),
                            cardinality(stats.as_deref(), id, seq).unwrap_or(Value::Null),
                            null.clone(),
                            null.clone(),
                            s(if t.columns[*c].nullable { "YES" } else { "" }),
                            s("BTREE"),
                            s(""),
                            s(""),
                            s("YES"),
                            null.clone(),
                        ]);
                    }
                };
                if let Some(pk) = &t.pk {
                    push("PRIMARY", true, pk, 0);
                }
                for i in t.indexes.iter().filter(|i| i.is_public()) {
                    push(&i.name, i.unique, &i.columns, i.id);
                }
            }
            (
                text_cols(&[
                    "TABLE_CATALOG",
                    "TABLE_SCHEMA",
                    "TABLE_NAME",
                    "NON_UNIQUE",
                    "INDEX_SCHEMA",
                    "INDEX_NAME",
                    "SEQ_IN_INDEX",
                    "COLUMN_NAME",
                    "COLLATION",
                    "CARDINALITY",
                    "SUB_PART",
                    "PACKED",
                    "NULLABLE",
                    "INDEX_TYPE",
                    "COMMENT",
                    "INDEX_COMMENT",
                    "IS_VISIBLE",
                    "EXPRESSION",
                ]),
                rows,
            )
        }
        "table_constraints" | "key_column_usage" => {
            let constraints = table.eq_ignore_ascii_case("table_constraints");
            let mut rows = Vec::new();
            for t in &all_tables {
                let mut keys: Vec<(&str, &str, &[usize])> = Vec::new();
                if let Some(pk) = &t.pk {
                    keys.push(("PRIMARY", "PRIMARY KEY", pk));
                }
                for i in t.indexes.iter().filter(|i| i.is_public() && i.unique) {
                    keys.push((&i.name, "UNIQUE", &i.columns));
                }
                for (name, kind, cols) in keys {
                    if constraints {
                        rows.push(vec![
                            s("def"),
                            Value::str(t.db.clone()),
                            s(name),
                            Value::str(t.db.clone()),
                            Value::str(t.name.clone()),
                            s(kind),
                            s("YES"),
                        ]);
                    } else {
                        for (seq, c) in cols.iter().enumerate() {
                            rows.push(vec![
                                s("def"),
                                Value::str(t.db.clone()),
                                s(name),
                                s("def"),
                                Value::str(t.db.clone()),
                                Value::str(t.name.clone()),
                                Value::str(t.columns[*c].name.clone()),
                                int(seq as i64 + 1),
                                null.clone(),
                                null.clone(),
                                null.clone(),
                                null.clone(),
                            ]);
                        }
                    }
                }
            }
            if constraints {
                (
                    text_cols(&[
                        "CONSTRAINT_CATALOG",
                        "CONSTRAINT_SCHEMA",
                        "CONSTRAINT_NAME",
                        "TABLE_SCHEMA",
                        "TABLE_NAME",
                        "CONSTRAINT_TYPE",
                        "ENFORCED",
                    ]),
                    rows,
                )
            } else {
                (
                    text_cols(&[
                        "CONSTRAINT_CATALOG",
                        "CONSTRAINT_SCHEMA",
                        "CONSTRAINT_NAME",
                        "TABLE_CATALOG",
                        "TABLE_SCHEMA",
                        "TABLE_NAME",
                        "COLUMN_NAME",
                        "ORDINAL_POSITION",
                        "POSITION_IN_UNIQUE_CONSTRAINT",
                        "REFERENCED_TABLE_SCHEMA",
                        "REFERENCED_TABLE_NAME",
                        "REFERENCED_COLUMN_NAME",
                    ]),
                    rows,
                )
            }
        }
        "engines" => (
            text_cols(&["ENGINE", "SUPPORT", "COMMENT", "TRANSACTIONS", "XA", "SAVEPOINTS"]),
            vec![vec![s("InnoDB"), s("DEFAULT"), s("Strata's transactional engine"), s("YES"), s("NO"), s("NO")]],
        ),
        "character_sets" => (
            text_cols(&["CHARACTER_SET_NAME", "DEFAULT_COLLATE_NAME", "DESCRIPTION", "MAXLEN"]),
            vec![vec![s("utf8mb4"), s("utf8mb4_bin"), s("UTF-8 Unicode"), int(4)]],
        ),
        "collations" => (
            text_cols(&[
                "COLLATION_NAME",
                "CHARACTER_SET_NAME",
                "ID",
                "IS_DEFAULT",
                "IS_COMPILED",
                "SORTLEN",
                "PAD_ATTRIBUTE",
            ]),
            vec![vec![s("utf8mb4_bin"), s("utf8mb4"), int(46), s("Yes"), s("Yes"), int(1), s("PAD SPACE")]],
        ),
        "user_privileges" => empty(&["GRANTEE", "TABLE_CATALOG", "PRIVILEGE_TYPE", "IS_GRANTABLE"]),
        "processlist" => empty(&["ID", "USER", "HOST", "DB", "COMMAND", "TIME", "STATE", "INFO"]),
        // Filled by the session from `crate::stmt_summary`.
        "statements_summary" | "statements_summary_history" => empty(&crate::stmt_summary::COLUMNS),
        // The session's last optimizer trace (`crate::optimizer_trace`), filled by the session.
        "optimizer_trace" => empty(&["QUERY", "TRACE", "MISSING_BYTES_BEYOND_MAX_MEM_SIZE", "INSUFFICIENT_PRIVILEGES"]),
        // Filled by the session (`binder::LiveTables`): AVAILABLE and PROGRESS come from the
        // column engine.
        "tiflash_replica" => empty(&[
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "TABLE_ID",
            "REPLICA_COUNT",
            "LOCATION_LABELS",
            "AVAILABLE",
            "PROGRESS",
        ]),
        "views" => (
            text_cols(&[
                "TABLE_CATALOG",
                "TABLE_SCHEMA",
                "TABLE_NAME",
                "VIEW_DEFINITION",
                "CHECK_OPTION",
                "IS_UPDATABLE",
                "DEFINER",
                "SECURITY_TYPE",
                "CHARACTER_SET_CLIENT",
                "COLLATION_CONNECTION",
            ]),
            all_views
                .iter()
                .map(|v| {
                    vec![
                        s("def"),
                        Value::str(v.db.clone()),
                        Value::str(v.name.clone()),
                        Value::str(v.query.clone()),
                        Value::str(v.check_option.clone()),
                        s("NO"),
                        Value::str(v.definer.replace('`', "")),
                        Value::str(v.security.clone()),
                        s("utf8mb4"),
                        s("utf8mb4_bin"),
                    ]
                })
                .collect(),
        ),
        "routines" => empty(&[
            "SPECIFIC_NAME",
            "ROUTINE_CATALOG",
            "ROUTINE_SCHEMA",
            "ROUTINE_NAME",
            "ROUTINE_TYPE",
            "DATA_TYPE",
            "ROUTINE_BODY",
            "ROUTINE_DEFINITION",
            "EXTERNAL_NAME",
            "IS_DETERMINISTIC",
            "SQL_DATA_ACCESS",
            "SECURITY_TYPE",
            "CREATED",
            "LAST_ALTERED",
            "SQL_MODE",
            "ROUTINE_COMMENT",
            "DEFINER",
        ]),
        "triggers" => empty(&[
            "TRIGGER_CATALOG",
            "TRIGGER_SCHEMA",
            "TRIGGER_NAME",
            "EVENT_MANIPULATION",
            "EVENT_OBJECT_CATALOG",
            "EVENT_OBJECT_SCHEMA",
            "EVENT_OBJECT_TABLE",
            "ACTION_ORDER",
            "ACTION_STATEMENT",
            "ACTION_TIMING",
            "CREATED",
            "SQL_MODE",
            "DEFINER",
        ]),
        "partitions" => empty(&[
            "TABLE_CATALOG",
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "PARTITION_NAME",
            "SUBPARTITION_NAME",
            "PARTITION_ORDINAL_POSITION",
            "PARTITION_METHOD",
            "PARTITION_EXPRESSION",
            "PARTITION_DESCRIPTION",
            "TABLE_ROWS",
            "DATA_LENGTH",
            "INDEX_LENGTH",
            "PARTITION_COMMENT",
            "TABLESPACE_NAME",
        ]),
        "files" => empty(&[
            "FILE_ID",
            "FILE_NAME",
            "FILE_TYPE",
            "TABLESPACE_NAME",
            "TABLE_CATALOG",
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "LOGFILE_GROUP_NAME",
            "LOGFILE_GROUP_NUMBER",
            "ENGINE",
            "FULLTEXT_KEYS",
            "DELETED_ROWS",
            "UPDATE_COUNT",
            "FREE_EXTENTS",
            "TOTAL_EXTENTS",
            "EXTENT_SIZE",
            "INITIAL_SIZE",
            "MAXIMUM_SIZE",
            "AUTOEXTEND_SIZE",
            "CREATION_TIME",
            "LAST_UPDATE_TIME",
            "LAST_ACCESS_TIME",
            "RECOVER_TIME",
            "TRANSACTION_COUNTER",
            "VERSION",
            "ROW_FORMAT",
            "TABLE_ROWS",
            "AVG_ROW_LENGTH",
            "DATA_LENGTH",
            "MAX_DATA_LENGTH",
            "INDEX_LENGTH",
            "DATA_FREE",
            "CREATE_TIME",
            "UPDATE_TIME",
            "CHECK_TIME",
            "CHECKSUM",
            "STATUS",
            "EXTRA",
        ]),
        "referential_constraints" => empty(&[
            "CONSTRAINT_CATALOG",
            "CONSTRAINT_SCHEMA",
            "CONSTRAINT_NAME",
            "UNIQUE_CONSTRAINT_CATALOG",
            "UNIQUE_CONSTRAINT_SCHEMA",
            "UNIQUE_CONSTRAINT_NAME",
            "MATCH_OPTION",
            "UPDATE_RULE",
            "DELETE_RULE",
            "TABLE_NAME",
            "REFERENCED_TABLE_NAME",
        ]),
        other => {
            return Err(Error::user(Code::NoSuchTable, format!("Table 'information_schema.{other}' doesn't exist")))
        }
    })
}

/// Column metadata for SHOW output (kept here so the protocol gets text columns).
pub fn text_columns(names: &[&str]) -> Vec<Column> {
    names.iter().map(|n| Column::text(n)).collect()
}
