//! TPC-C (standard specification 5.11): data and input generators, the transaction mix.

pub mod mix;
pub mod random;
