//! TPC-C (standard specification 5.11): schema, data and input generators, the transaction mix.

pub mod load;
pub mod mix;
pub mod random;
pub mod schema;
