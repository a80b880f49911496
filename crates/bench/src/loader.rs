//! What the TPC-C and TPC-H loaders share: creating the database and tables (refusing to
//! load on top of earlier data), running load units on N connections that pull from one
//! queue while a progress bar draws, ANALYZE TABLE afterwards, and dropping the tables.

use std::collections::VecDeque;
use std::future::Future;
use std::io::Write;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::conn::{describe, Target};
use crate::progress::Progress;

/// A benchmark's tables.
pub struct Schema {
    /// The benchmark's command name (`tpcc`, `tpch`).
    pub benchmark: &'static str,
    /// Table names in load order.
    pub tables: &'static [&'static str],
    /// CREATE TABLE statements (IF NOT EXISTS), same order.
    pub create: &'static [&'static str],
    /// A table that has rows once data is loaded.
    pub probe: &'static str,
}

/// Quotes an identifier with backticks.
pub fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// Creates database `db` and the tables of `schema`; fails if data is already loaded.
/// Returns a connection to `db`.
pub async fn create(target: &Target, db: &str, schema: &Schema) -> Result<Conn> {
    let mut admin = target.connect(None).await.with_context(|| format!("cannot connect to {}", target.addr()))?;
    admin
        .query_drop(format!("CREATE DATABASE IF NOT EXISTS {}", quote_ident(db)))
        .await
        .map_err(|e| anyhow::anyhow!("CREATE DATABASE {db}: {}", describe(&e)))?;
    drop(admin);
    let mut conn = target.connect(Some(db)).await?;
    for ddl in schema.create {
        let first_line = ddl.lines().next().unwrap_or(ddl).trim_end_matches('(').trim();
        conn.query_drop(*ddl).await.map_err(|e| anyhow::anyhow!("{first_line}: {}", describe(&e)))?;
    }
    let existing: Option<i64> = conn
        .query_first(format!("SELECT COUNT(*) FROM {}", schema.probe))
        .await
        .map_err(|e| anyhow::anyhow!("counting {}: {}", schema.probe, describe(&e)))?;
    if existing.unwrap_or(0) > 0 {
        bail!(
            "database {db} already holds {} data; run `strata bench {} cleanup` first",
            schema.benchmark,
            schema.benchmark
        );
    }
    Ok(conn)
}

/// Connects to `db` and counts the rows of `table`, failing when there are none (nothing
/// loaded yet).
pub async fn open_loaded(target: &Target, db: &str, table: &str, benchmark: &str) -> Result<(Conn, u64)> {
    let mut conn = target.connect(Some(db)).await.with_context(|| format!("cannot connect to {}", target.addr()))?;
    let n: Option<i64> = conn
        .query_first(format!("SELECT COUNT(*) FROM {table}"))
        .await
        .map_err(|e| anyhow::anyhow!("reading {table} of {db}: {} (run prepare first)", describe(&e)))?;
    let n = n.unwrap_or(0).max(0) as u64;
    if n == 0 {
        bail!("database {db} has no {benchmark} data; run `strata bench {benchmark} prepare` first");
    }
    Ok((conn, n))
}

/// Runs `work` on every unit with `threads` connections to `db`, drawing `progress` meanwhile.
/// `work` takes a connection and gives it back with the unit's result; the first failure
/// stops the other loaders (the load is incomplete either way) and is returned.
pub async fn run_units<U, F, Fut>(
    target: &Target,
    db: &str,
    threads: usize,
    units: VecDeque<U>,
    progress: &Arc<Progress>,
    work: F,
) -> Result<()>
where
    U: Send + 'static,
    F: Fn(Conn, U) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = (Conn, Result<()>)> + Send,
{
    let queue = Arc::new(Mutex::new(units));
    let drawer = progress.spawn_drawer();
    let mut tasks = Vec::new();
    for _ in 0..threads.max(1) {
        let (queue, target, db, work) = (queue.clone(), target.clone(), db.to_string(), work.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = target.connect(Some(&db)).await.map_err(|e| anyhow::anyhow!("connect: {}", describe(&e)))?;
            loop {
                let next = queue.lock().expect("queue lock").pop_front();
                let Some(unit) = next else { break };
                let (c, r) = work(conn, unit).await;
                conn = c;
                if let Err(e) = r {
                    queue.lock().expect("queue lock").clear();
                    return Err(e);
                }
            }
            Ok::<(), anyhow::Error>(())
        }));
    }
    let mut first_error = None;
    for t in tasks {
        if let Err(e) = t.await.map_err(|e| anyhow::anyhow!("loader panicked: {e}")).and_then(|r| r) {
            first_error.get_or_insert(e);
        }
    }
    progress.finish();
    let _ = drawer.join();
    first_error.map_or(Ok(()), Err)
}

/// ANALYZE TABLE on each table; a server that cannot gets a warning, not a failure.
pub async fn analyze(conn: &mut Conn, tables: &[&str]) {
    for table in tables {
        if let Err(e) = conn.query_drop(format!("ANALYZE TABLE {table}")).await {
            eprintln!("warning: ANALYZE TABLE {table}: {}", describe(&e));
        }
    }
}

/// Drops the tables of `schema` from `db`.
pub async fn drop_tables(target: &Target, db: &str, schema: &Schema) -> Result<()> {
    let mut conn = target.connect(Some(db)).await.with_context(|| format!("cannot connect to {}", target.addr()))?;
    for table in schema.tables.iter().rev() {
        conn.query_drop(format!("DROP TABLE IF EXISTS {table}"))
            .await
            .map_err(|e| anyhow::anyhow!("DROP TABLE {table}: {}", describe(&e)))?;
    }
    writeln!(std::io::stdout().lock(), "dropped the {} tables of {db}", schema.benchmark)?;
    Ok(())
}
