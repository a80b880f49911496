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

#[async_trait]
impl sqllogictest::AsyncDB for Wire {
    type Error = WireError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, WireError> {
        let mut result = self.conn.query_iter(sql).await.map_err(|e| WireError(e.to_string()))?;
        let columns = result.columns().map(|c| c.len()).unwrap_or(0);
        let rows: Vec<mysql_async::Row> = result.collect().await.map_err(|e| WireError(e.to_string()))?;
        let affected = result.affected_rows();
        drop(result);
        if columns == 0 {
            return Ok(DBOutput::StatementComplete(affected));
        }
        let rows: Vec<Vec<String>> = rows.into_iter().map(|r| (0..r.len()).map(|i| cell(&r[i])).collect()).collect();
        Ok(DBOutput::Rows { types: vec![DefaultColumnType::Any; columns], rows })
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
                let conn = mysql_async::Conn::new(mysql_async::OptsBuilder::from_opts(opts).prefer_socket(false))
                    .await
                    .map_err(|e| WireError(e.to_string()))?;
                Ok(Wire { conn, external })
            }
        });
        if let Err(e) = runner.run_file_async(&file).await {
            failures.push(format!("{}:\n{}", file.display(), e.display(true)));
        }
    }
    assert!(failures.is_empty(), "sqllogictest failures:\n{}", failures.join("\n\n"));
}
