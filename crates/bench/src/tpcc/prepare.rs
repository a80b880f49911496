//! `tpcc prepare`: creates the schema and loads the initial population through the server
//! with multi-row INSERTs, `threads` connections at a time, then `cleanup` drops it again.
//!
//! The load is cut into units (a range of items, a warehouse with its districts, a range of a
//! warehouse's stock, a district's customers and history, a district's orders) that the
//! loaders take from a shared queue, so a few warehouses still keep every connection busy.

use std::collections::VecDeque;
use std::io::Write;

use anyhow::{bail, Result};
use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::load::{self, Row, CUSTOMERS, DISTRICTS, FIRST_NEW_ORDER, ITEMS, ORDERS};
use super::schema;
use crate::conn::{describe, Target};
use crate::loader::{self, Schema};
use crate::progress::Progress;

/// A slice of the load one connection does at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    /// Items `from..=to`.
    Items(u32, u32),
    /// A warehouse row and its districts.
    Warehouse(u32),
    /// Stock of a warehouse for items `from..=to`.
    Stock(u32, u32, u32),
    /// A district's customers and their history rows.
    Customers(u32, u32),
    /// A district's orders, order lines and new orders.
    Orders(u32, u32),
}

/// Items or stock rows per unit.
const ITEM_SLICE: u32 = 20_000;

fn units(warehouses: u32) -> VecDeque<Unit> {
    let mut out = VecDeque::new();
    let mut i = 1;
    while i <= ITEMS {
        out.push_back(Unit::Items(i, (i + ITEM_SLICE - 1).min(ITEMS)));
        i += ITEM_SLICE;
    }
    for w in 1..=warehouses {
        out.push_back(Unit::Warehouse(w));
        for d in 1..=DISTRICTS {
            // Interleave the big units so every connection has work to the end.
            out.push_back(Unit::Orders(w, d));
            out.push_back(Unit::Customers(w, d));
        }
        let mut i = 1;
        while i <= ITEMS {
            out.push_back(Unit::Stock(w, i, (i + ITEM_SLICE - 1).min(ITEMS)));
            i += ITEM_SLICE;
        }
    }
    out
}

/// Rows a load of `warehouses` writes (order lines estimated at their mean of 10 per order).
pub fn expected_rows(warehouses: u32) -> u64 {
    let per_district = u64::from(CUSTOMERS) * 2 + u64::from(ORDERS) * 11 + u64::from(ORDERS - FIRST_NEW_ORDER + 1);
    u64::from(ITEMS) + u64::from(warehouses) * (1 + u64::from(ITEMS) + u64::from(DISTRICTS) * (1 + per_district))
}

/// Inserts `rows` into `table` in statements of at most ~512 KiB or 1,000 rows.
async fn insert(conn: &mut Conn, table: &str, rows: &[Row], progress: &Progress) -> Result<()> {
    let mut start = 0;
    while start < rows.len() {
        let mut end = start;
        let mut bytes = 0;
        while end < rows.len() && end - start < 1000 && bytes < 512 * 1024 {
            bytes += rows[end].iter().map(|v| if let load::Lit::Str(s) = v { s.len() + 3 } else { 12 }).sum::<usize>();
            end += 1;
        }
        let sql = format!("INSERT INTO {table} VALUES {}", load::values_sql(&rows[start..end]));
        conn.query_drop(sql).await.map_err(|e| anyhow::anyhow!("loading {table}: {}", describe(&e)))?;
        progress.add((end - start) as u64);
        start = end;
    }
    Ok(())
}

async fn load_unit(conn: &mut Conn, unit: Unit, now: &str, progress: &Progress) -> Result<()> {
    let mut rng = StdRng::from_entropy();
    let k = load::constants();
    match unit {
        Unit::Items(from, to) => {
            let rows: Vec<Row> = (from..=to).map(|i| load::item(&mut rng, i)).collect();
            insert(conn, "item", &rows, progress).await
        }
        Unit::Warehouse(w) => {
            insert(conn, "warehouse", &[load::warehouse(&mut rng, w)], progress).await?;
            let rows: Vec<Row> = (1..=DISTRICTS).map(|d| load::district(&mut rng, w, d)).collect();
            insert(conn, "district", &rows, progress).await
        }
        Unit::Stock(w, from, to) => {
            let rows: Vec<Row> = (from..=to).map(|i| load::stock(&mut rng, w, i)).collect();
            insert(conn, "stock", &rows, progress).await
        }
        Unit::Customers(w, d) => {
            let rows: Vec<Row> = (1..=CUSTOMERS).map(|c| load::customer(&mut rng, &k, w, d, c, now)).collect();
            insert(conn, "customer", &rows, progress).await?;
            let rows: Vec<Row> = (1..=CUSTOMERS).map(|c| load::history(&mut rng, w, d, c, now)).collect();
            insert(conn, "history", &rows, progress).await
        }
        Unit::Orders(w, d) => {
            let o = load::district_orders(&mut rng, w, d, now);
            insert(conn, "orders", &o.orders, progress).await?;
            insert(conn, "order_line", &o.lines, progress).await?;
            insert(conn, "new_order", &o.new_orders, progress).await
        }
    }
}

/// What a load did.
#[derive(Clone, Debug)]
pub struct PrepareReport {
    /// Rows inserted.
    pub rows: u64,
    /// Wall time, seconds.
    pub secs: f64,
}

/// The TPC-C tables, for the shared loader.
pub const SCHEMA: Schema =
    Schema { benchmark: "tpcc", tables: &schema::TABLES, create: &schema::CREATE, probe: "warehouse" };

/// Creates database `db` and the TPC-C tables, and loads `warehouses` warehouses with
/// `threads` connections.
pub async fn prepare(target: &Target, db: &str, warehouses: u32, threads: usize) -> Result<PrepareReport> {
    if warehouses == 0 {
        bail!("--warehouses must be at least 1");
    }
    let mut conn = loader::create(target, db, &SCHEMA).await?;
    let progress = Progress::new("tpcc load", expected_rows(warehouses));
    let now = chrono::Local::now().format("%Y-%m-%d %H:%M:%S").to_string();
    let p = progress.clone();
    loader::run_units(target, db, threads, units(warehouses), &progress, move |mut conn, unit| {
        let (now, p) = (now.clone(), p.clone());
        async move {
            let r = load_unit(&mut conn, unit, &now, &p).await;
            (conn, r)
        }
    })
    .await?;
    let report = PrepareReport { rows: progress.done(), secs: progress.elapsed().as_secs_f64() };
    loader::analyze(&mut conn, &schema::TABLES).await;
    writeln!(
        std::io::stdout().lock(),
        "loaded {} warehouses: {} rows in {:.1} s ({:.0} rows/s)",
        warehouses,
        report.rows,
        report.secs,
        report.rows as f64 / report.secs.max(1e-3)
    )?;
    Ok(report)
}

/// Drops the TPC-C tables of `db`.
pub async fn cleanup(target: &Target, db: &str) -> Result<()> {
    loader::drop_tables(target, db, &SCHEMA).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_cover_every_row_once() {
        let u = units(3);
        let items: u32 = u.iter().map(|x| if let Unit::Items(a, b) = x { b - a + 1 } else { 0 }).sum();
        assert_eq!(items, ITEMS);
        for w in 1..=3 {
            let stock: u32 = u
                .iter()
                .map(|x| {
                    if let Unit::Stock(sw, a, b) = x {
                        if *sw == w {
                            b - a + 1
                        } else {
                            0
                        }
                    } else {
                        0
                    }
                })
                .sum();
            assert_eq!(stock, ITEMS);
            assert_eq!(u.iter().filter(|x| **x == Unit::Warehouse(w)).count(), 1);
            for d in 1..=DISTRICTS {
                assert_eq!(u.iter().filter(|x| **x == Unit::Customers(w, d)).count(), 1);
                assert_eq!(u.iter().filter(|x| **x == Unit::Orders(w, d)).count(), 1);
            }
        }
        // Roughly 500k rows per warehouse.
        let per_w = expected_rows(2) - expected_rows(1);
        assert!((490_000..520_000).contains(&per_w), "{per_w}");
    }
}
