//! TPC-H (standard specification 3.0): schema, data from `tpchgen`, the 22 queries, the
//! reference answers and the runner that times and checks them.

pub mod answer;
pub mod gen;
pub mod prepare;
pub mod queries;
pub mod run;
pub mod schema;

use anyhow::{bail, Result};
use mysql_async::prelude::Queryable;

use crate::conn::{describe, Target};

/// The scale factor of the data in `db`, from its supplier count (10,000 per unit of scale).
pub async fn detect_sf(target: &Target, db: &str) -> Result<f64> {
    let mut conn = target.connect(Some(db)).await?;
    let n: Option<i64> = conn
        .query_first("SELECT COUNT(*) FROM supplier")
        .await
        .map_err(|e| anyhow::anyhow!("reading the suppliers of {db}: {} (run prepare first)", describe(&e)))?;
    let n = n.unwrap_or(0);
    if n == 0 {
        bail!("database {db} has no TPC-H data; run `strata bench tpch prepare` first");
    }
    Ok(n as f64 / 10_000.0)
}
