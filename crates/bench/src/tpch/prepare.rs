//! `tpch prepare`: creates the tables and loads data generated at `--sf` through the server in
//! multi-row INSERTs, `threads` connections at a time, then runs ANALYZE TABLE; `dbgen`
//! writes the same data as `|`-separated files (for loading into reference engines).

use std::collections::VecDeque;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::gen::{push_values_row, row_count, tbl_lines};
use super::schema::{CREATE, TABLES};
use crate::conn::{describe, Target};
use crate::loader::{self, Schema};
use crate::progress::Progress;

/// Rows per load unit.
const UNIT_ROWS: u64 = 60_000;
/// Most rows per INSERT.
const BATCH_ROWS: usize = 2_000;
/// Most bytes per INSERT.
const BATCH_BYTES: usize = 1 << 20;

fn units(sf: f64) -> VecDeque<(&'static str, i32, i32)> {
    let mut out = VecDeque::new();
    // Big tables first so the small ones fill in at the end.
    for table in TABLES.iter().rev() {
        let parts = (row_count(table, sf) / UNIT_ROWS).max(1) as i32;
        for p in 1..=parts {
            out.push_back((*table, p, parts));
        }
    }
    out
}

/// The TPC-H tables, for the shared loader.
pub const SCHEMA: Schema = Schema { benchmark: "tpch", tables: &TABLES, create: &CREATE, probe: "region" };

/// Inserts part `part` of `parts` of `table` in batches of [`BATCH_ROWS`] rows or
/// [`BATCH_BYTES`] bytes.
async fn load_part(conn: &mut Conn, table: &str, sf: f64, part: i32, parts: i32, progress: &Progress) -> Result<()> {
    let mut lines = tbl_lines(table, sf, part, parts).peekable();
    while lines.peek().is_some() {
        let mut sql = format!("INSERT INTO {table} VALUES ");
        let mut n = 0;
        for line in lines.by_ref() {
            if n > 0 {
                sql.push(',');
            }
            push_values_row(&mut sql, table, &line);
            n += 1;
            if n >= BATCH_ROWS || sql.len() >= BATCH_BYTES {
                break;
            }
        }
        conn.query_drop(sql).await.map_err(|e| anyhow::anyhow!("loading {table}: {}", describe(&e)))?;
        progress.add(n as u64);
    }
    Ok(())
}

/// Creates database `db` with the TPC-H tables and loads scale factor `sf`; then gives each
/// table `replicas` columnar replicas (if any) and waits until they are available.
pub async fn prepare(target: &Target, db: &str, sf: f64, threads: usize, replicas: u32) -> Result<()> {
    if !(sf > 0.0 && sf <= 1000.0) {
        bail!("--sf must be between 0 and 1000");
    }
    let mut conn = loader::create(target, db, &SCHEMA).await?;
    let expected: u64 = TABLES.iter().map(|t| row_count(t, sf)).sum();
    let progress = Progress::new(&format!("tpch sf {sf} load"), expected);
    let p = progress.clone();
    loader::run_units(target, db, threads, units(sf), &progress, move |mut conn, (table, part, parts)| {
        let p = p.clone();
        async move {
            let r = load_part(&mut conn, table, sf, part, parts, &p).await;
            (conn, r)
        }
    })
    .await?;
    loader::analyze(&mut conn, &TABLES).await;
    let secs = progress.elapsed().as_secs_f64();
    writeln!(
        std::io::stdout(),
        "loaded TPC-H sf {sf}: {} rows in {secs:.1} s ({:.0} rows/s)",
        progress.done(),
        progress.done() as f64 / secs.max(1e-3)
    )?;
    if replicas > 0 {
        columnar_replicas(&mut conn, db, replicas).await?;
    }
    Ok(())
}

/// `ALTER TABLE .. SET TIFLASH REPLICA n` on every table, then waits (up to an hour) until
/// information_schema.TIFLASH_REPLICA shows them all available.
async fn columnar_replicas(conn: &mut Conn, db: &str, n: u32) -> Result<()> {
    let started = std::time::Instant::now();
    for t in TABLES {
        conn.query_drop(format!("ALTER TABLE {} SET TIFLASH REPLICA {n}", loader::quote_ident(t)))
            .await
            .with_context(|| format!("setting a columnar replica on {t}"))?;
    }
    let q = format!(
        "SELECT COUNT(*), COALESCE(AVG(PROGRESS), 0) FROM information_schema.tiflash_replica \
         WHERE TABLE_SCHEMA = '{}' AND AVAILABLE = 1",
        db.replace('\'', "''")
    );
    loop {
        let (available, _): (u64, f64) = conn.query_first(&q).await?.unwrap_or((0, 0.0));
        if available as usize >= TABLES.len() {
            break;
        }
        if started.elapsed() > std::time::Duration::from_secs(3600) {
            bail!("columnar replicas not available after an hour ({available} of {})", TABLES.len());
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    writeln!(
        std::io::stdout(),
        "columnar replicas of {} tables available after {:.1} s",
        TABLES.len(),
        started.elapsed().as_secs_f64()
    )?;
    Ok(())
}

/// Drops the TPC-H tables of `db`.
pub async fn cleanup(target: &Target, db: &str) -> Result<()> {
    loader::drop_tables(target, db, &SCHEMA).await
}

/// Writes `<table>.tbl` files (fields separated by `|`, no trailing separator) for `sf`.
pub fn dbgen(sf: f64, out: &Path) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    for table in TABLES {
        let path = out.join(format!("{table}.tbl"));
        let mut w =
            BufWriter::new(std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?);
        for line in tbl_lines(table, sf, 1, 1) {
            writeln!(w, "{}", line.strip_suffix('|').unwrap_or(&line))?;
        }
        w.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_cover_each_table_in_parts() {
        let u = units(0.1);
        for t in TABLES {
            let parts: Vec<_> = u.iter().filter(|x| x.0 == t).collect();
            let n = parts[0].2;
            assert_eq!(parts.len() as i32, n, "{t}");
            assert!(parts.iter().enumerate().all(|(i, p)| p.1 == i as i32 + 1));
        }
        assert_eq!(u.iter().filter(|x| x.0 == "region").count(), 1);
        assert!(u.iter().filter(|x| x.0 == "lineitem").count() >= 10);
    }
}
