//! Percolator-style multi-version concurrency control on a `storage::Engine`, and the
//! in-process implementation of `kv::Client` and `kv::Oracle` that the embedded server uses.

mod empty_ranges;
pub mod gc;
pub mod group_sync;
pub mod latches;
pub mod local;
pub mod lock_manager;
mod lock_table;
mod prune;
pub mod records;
mod stamps;
pub mod store;
pub mod tso;

pub use local::LocalClient;
pub use store::MvccStore;
pub use tso::{Clock, LocalOracle, SystemClock};
