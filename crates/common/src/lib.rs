//! Types shared by every layer of Strata: the error enum (with its MySQL error numbers), the
//! newtypes for identifiers and timestamps, and the SQL `Value`.

pub mod cancel;
pub mod error;
pub mod histogram;
pub mod ids;
pub mod keysort;
pub mod sched;
pub mod storage_metrics;
pub mod time;
pub mod value;

pub use error::{Code, Error, LockInfo, Result};
pub use ids::{IndexId, TableId, Timestamp};
pub use value::Value;

/// The number the environment variable `var` holds, or `default` when it is unset or not
/// a number: how the `STRATA_*` tuning and experiment knobs are read.
pub fn env_number<T: std::str::FromStr>(var: &str, default: T) -> T {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
