//! TPC-H (standard specification 3.0): schema, data from `tpchgen`, the 22 queries, the
//! reference answers and the runner that times and checks them.

pub mod answer;
pub mod gen;
pub mod prepare;
pub mod queries;
pub mod run;
pub mod schema;

use anyhow::Result;

use crate::conn::Target;

/// The scale factor of the data in `db`, from its supplier count (10,000 per unit of scale).
pub async fn detect_sf(target: &Target, db: &str) -> Result<f64> {
    let (_, suppliers) = crate::loader::open_loaded(target, db, "supplier", "tpch").await?;
    Ok(suppliers as f64 / 10_000.0)
}
