//! TPC-C (standard specification 5.11): schema, data and input generators, the transaction
//! mix, the five transactions, the loader, the driver and the consistency check.

pub mod check;
pub mod load;
pub mod mix;
pub mod prepare;
pub mod random;
pub mod run;
pub mod schema;
pub mod txn;
