//! Runs every `tests/slt/*.slt` file over the MySQL wire against a real server process.

mod common;

use std::path::PathBuf;

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use sqllogictest::{DBOutput, DefaultColumnType};

struct Wire {
    conn: mysql_async::Conn,
    external: bool,
}

#[derive(Debug)]
struct WireError(String);

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WireError {}

fn cell(v: &mysql_async::Value) -> String {
    match v {
        mysql_async::Value::NULL => "NULL".into(),
        mysql_async::Value::Bytes(b) if b.is_empty() => "(empty)".into(),
        mysql_async::Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        mysql_async::Value::Int(i) => i.to_string(),
        mysql_async::Value::UInt(u) => u.to_string(),
        mysql_async::Value::Float(f) => f.to_string(),
        mysql_async::Value::Double(d) => d.to_string(),
        other => other.as_sql(true).trim_matches('\'').to_string(),
    }
}

/// The sqllogictest letter of a result column's type, from the metadata the server sent:
/// I for integers, R for DECIMAL and floating point, T for everything else.
fn column_type(t: mysql_async::consts::ColumnType) -> DefaultColumnType {
    use mysql_async::consts::ColumnType as C;
    match t {
        C::MYSQL_TYPE_TINY
        | C::MYSQL_TYPE_SHORT
        | C::MYSQL_TYPE_INT24
        | C::MYSQL_TYPE_LONG
        | C::MYSQL_TYPE_LONGLONG
        | C::MYSQL_TYPE_YEAR => DefaultColumnType::Integer,
        C::MYSQL_TYPE_DECIMAL | C::MYSQL_TYPE_NEWDECIMAL | C::MYSQL_TYPE_FLOAT | C::MYSQL_TYPE_DOUBLE => {
            DefaultColumnType::FloatingPoint
        }
        _ => DefaultColumnType::Text,
    }
}

#[async_trait]
impl sqllogictest::AsyncDB for Wire {
    type Error = WireError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, WireError> {
        let mut result = self.conn.query_iter(sql).await.map_err(|e| WireError(e.to_string()))?;
        let types: Vec<DefaultColumnType> =
            result.columns().map(|c| c.iter().map(|c| column_type(c.column_type())).collect()).unwrap_or_default();
        let rows: Vec<mysql_async::Row> = result.collect().await.map_err(|e| WireError(e.to_string()))?;
        let affected = result.affected_rows();
        drop(result);
        if types.is_empty() {
            return Ok(DBOutput::StatementComplete(affected));
        }
        let rows: Vec<Vec<String>> = rows.into_iter().map(|r| (0..r.len()).map(|i| cell(&r[i])).collect()).collect();
        Ok(DBOutput::Rows { types, rows })
    }

    fn engine_name(&self) -> &str {
        // `onlyif strata` marks Strata/TiDB extensions; `skipif mariadb` marks where MariaDB
        // differs from MySQL 8 (which Strata follows).
        if self.external {
            "mariadb"
        } else {
            "strata"
        }
    }

    async fn shutdown(&mut self) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqllogictest_files_pass_over_the_wire() {
    run_files(None).await;
}

/// Every file again with the column engine forced (`tidb_isolation_read_engines =
/// 'tiflash'`): each query it can translate runs on DataFusion and must give the row
/// engine's rows and column types; the rest fall back to the row engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqllogictest_files_pass_on_the_column_engine() {
    if std::env::var("SLT_EXTERNAL_URL").is_ok() {
        return;
    }
    run_files(Some("tiflash")).await;
}

async fn run_files(engines: Option<&'static str>) {
    // SLT_EXTERNAL_URL=mysql://root@127.0.0.1:3307 runs the same files against another
    // server (MariaDB, to confirm that expected results are MySQL behaviour); files marked
    // `Strata-specific` in their first line are skipped then.
    let external = std::env::var("SLT_EXTERNAL_URL").ok();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = match external {
        Some(_) => None,
        None => Some(common::StrataProcess::start(dir.path())),
    };
    let base_url = match (&server, &external) {
        (Some(s), _) => s.url(None),
        (None, Some(u)) => format!("{}/", u.trim_end_matches('/')),
        (None, None) => unreachable!(),
    };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/slt");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("tests/slt")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "slt"))
        .filter(|p| {
            external.is_none()
                || !std::fs::read_to_string(p)
                    .unwrap_or_default()
                    .lines()
                    .next()
                    .unwrap_or("")
                    .contains("Strata-specific")
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .slt files found");
    let mut failures = Vec::new();
    let admin = mysql_async::Pool::new(
        mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(&base_url).expect("url")).prefer_socket(false),
    );
    for file in files {
        // Each file gets its own database.
        let db = format!("slt_{}", file.file_stem().and_then(|s| s.to_str()).unwrap_or("x").replace('-', "_"));
        common::exec(&admin, &[&format!("DROP DATABASE IF EXISTS {db}"), &format!("CREATE DATABASE {db}")]).await;
        let url = format!("{base_url}{db}");
        let external = external.is_some();
        let mut runner = sqllogictest::Runner::new(move || {
            let url = url.clone();
            async move {
                let opts = mysql_async::Opts::from_url(&url).map_err(|e| WireError(e.to_string()))?;
                let mut conn = mysql_async::Conn::new(mysql_async::OptsBuilder::from_opts(opts).prefer_socket(false))
                    .await
                    .map_err(|e| WireError(e.to_string()))?;
                if let Some(engines) = engines {
                    conn.query_drop(format!("SET SESSION tidb_isolation_read_engines = '{engines}'"))
                        .await
                        .map_err(|e| WireError(e.to_string()))?;
                }
                Ok(Wire { conn, external })
            }
        });
        // Result column types (I / R / T) are checked against the metadata.
        runner.with_column_validator(sqllogictest::strict_column_validator);
        // `skipif column-engine` marks what the column engine does not do like the row
        // engine yet (each with its reason in the file).
        if engines.is_some() {
            runner.add_label("column-engine");
        }
        // SLT_OVERRIDE=1 rewrites the files with what the server returned (review the diff).
        if std::env::var("SLT_OVERRIDE").is_ok() && engines.is_none() {
            runner
                .update_test_file(
                    &file,
                    " ",
                    sqllogictest::default_validator,
                    sqllogictest::default_normalizer,
                    sqllogictest::strict_column_validator,
                )
                .await
                .expect("override");
            continue;
        }
        if let Err(e) = runner.run_file_async(&file).await {
            failures.push(format!("{}:\n{}", file.display(), e.display(true)));
        }
    }
    assert!(failures.is_empty(), "sqllogictest failures:\n{}", failures.join("\n\n"));
    if engines.is_some() {
        // The forced run must really have used the column engine.
        let mut conn = admin.get_conn().await.expect("conn");
        let status: Vec<(String, String)> =
            conn.query("SHOW GLOBAL STATUS LIKE 'Strata_columnar%'").await.expect("status");
        let count = |name: &str| {
            status.iter().find(|(k, _)| k == name).and_then(|(_, v)| v.parse::<u64>().ok()).expect("counter")
        };
        let (ran, fell_back) = (count("Strata_columnar_queries"), count("Strata_columnar_fallbacks"));
        eprintln!("column engine: {ran} queries answered, {fell_back} left to the row engine");
        assert!(ran > 100, "the column engine answered only {ran} queries ({fell_back} fell back)");
    }
}

/// Result column types come from the plan: the same for an empty result as for rows, for
/// expressions by MySQL's typing rules (DECIMAL scale of `*`, `/`, SUM, AVG), and in the
/// binary protocol a value is encoded as its column's type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_metadata_comes_from_the_plan() {
    use mysql_async::consts::{ColumnFlags, ColumnType as C};
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(dir.path());
    let admin = server.pool(None);
    common::exec(
        &admin,
        &[
            "CREATE DATABASE meta",
            "CREATE TABLE meta.item (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, price DECIMAL(10,2), qty INT)",
            "INSERT INTO meta.item VALUES (1, 'bolt', 0.25, 100)",
        ],
    )
    .await;
    let pool = server.pool(Some("meta"));
    let mut conn = pool.get_conn().await.expect("conn");
    let sql = "SELECT id, price, price * qty, price / 3, COUNT(*), SUM(price), AVG(qty), name, \
               CONCAT(name, 'x'), NOW(), CAST('2020-01-01' AS DATE), 1 / 2, 1.5 + 1, NULL, qty + 0.5e0 \
               FROM item WHERE id > %s";
    let want = [
        (C::MYSQL_TYPE_LONG, 0),
        (C::MYSQL_TYPE_NEWDECIMAL, 2),
        (C::MYSQL_TYPE_NEWDECIMAL, 2),
        (C::MYSQL_TYPE_NEWDECIMAL, 6),
        (C::MYSQL_TYPE_LONGLONG, 0),
        (C::MYSQL_TYPE_NEWDECIMAL, 2),
        (C::MYSQL_TYPE_NEWDECIMAL, 4),
        (C::MYSQL_TYPE_VAR_STRING, 0),
        (C::MYSQL_TYPE_VAR_STRING, 0),
        (C::MYSQL_TYPE_DATETIME, 0),
        (C::MYSQL_TYPE_DATE, 0),
        (C::MYSQL_TYPE_NEWDECIMAL, 4),
        (C::MYSQL_TYPE_NEWDECIMAL, 1),
        (C::MYSQL_TYPE_NULL, 0),
        (C::MYSQL_TYPE_DOUBLE, 31),
    ];
    // One row, and no rows: the metadata is the same.
    for bound in ["0", "100"] {
        let mut r = conn.query_iter(sql.replace("%s", bound)).await.expect("query");
        let cols: Vec<(C, u8)> =
            r.columns().expect("columns").iter().map(|c| (c.column_type(), c.decimals())).collect();
        let _: Vec<mysql_async::Row> = r.collect().await.expect("rows");
        assert_eq!(cols, want, "WHERE id > {bound}");
    }
    // NOT NULL where a value can never be NULL; the inner side of an outer join can be.
    let r = conn
        .query_iter("SELECT a.id, b.id, a.name, COUNT(*) FROM item a LEFT JOIN item b ON b.id = a.id + 100 GROUP BY a.id, b.id, a.name")
        .await
        .expect("query");
    let not_null: Vec<bool> =
        r.columns().expect("columns").iter().map(|c| c.flags().contains(ColumnFlags::NOT_NULL_FLAG)).collect();
    drop(r);
    assert_eq!(not_null, [true, false, true, true]);
    // Without GROUP BY an aggregate query's other columns are NULL over no rows; under
    // ROLLUP the group columns can be NULL, COUNT(*) and a COALESCE with a constant cannot.
    for (sql, want) in [
        ("SELECT id, name, COUNT(*), SUM(qty) FROM item WHERE id > 100", [false, false, true, false]),
        (
            "SELECT name, COUNT(*), COALESCE(name, 'all'), SUM(qty) FROM item GROUP BY name WITH ROLLUP",
            [false, true, true, false],
        ),
    ] {
        let r = conn.query_iter(sql).await.expect("query");
        let not_null: Vec<bool> =
            r.columns().expect("columns").iter().map(|c| c.flags().contains(ColumnFlags::NOT_NULL_FLAG)).collect();
        drop(r);
        assert_eq!(not_null, want, "{sql}");
    }
    // Binary protocol: a parameter's type follows its value, and values are encoded as
    // their column's type (DECIMAL as its text).
    let stmt = conn.prep("SELECT price * ?, id + ?, ? FROM item WHERE id = ?").await.expect("prepare");
    let rows: Vec<mysql_async::Row> = conn.exec(&stmt, (2, 1, "txt", 1)).await.expect("execute");
    let row = &rows[0];
    let types: Vec<C> = row.columns_ref().iter().map(|c| c.column_type()).collect();
    assert_eq!(types, [C::MYSQL_TYPE_NEWDECIMAL, C::MYSQL_TYPE_LONGLONG, C::MYSQL_TYPE_VAR_STRING]);
    assert_eq!(row.get::<String, _>(0).as_deref(), Some("0.50"));
    assert_eq!(row.get::<i64, _>(1), Some(2));
    assert_eq!(row.get::<String, _>(2).as_deref(), Some("txt"));
    drop(conn);
    pool.disconnect().await.expect("disconnect");
    admin.disconnect().await.expect("disconnect");
}
