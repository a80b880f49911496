//! `strata bench`: TPC-C and TPC-H drivers that measure Strata or any MySQL-compatible server.

pub mod tpcc;
