//! The client side of Percolator: a `Transaction` buffers writes, reads at its snapshot,
//! takes pessimistic locks, resolves locks it runs into, and commits with two-phase commit.
//! It talks to the store only through `kv::Client` and `kv::Oracle`.

pub mod metrics;
pub mod resolver;
pub mod transaction;

pub use transaction::{Isolation, Savepoint, Transaction, TxnOptions};
