//! `strata bench`: TPC-C and TPC-H drivers that measure Strata or any MySQL-compatible server.

pub mod cli;
pub mod conn;
pub mod loader;
pub mod progress;
pub mod report;
pub mod stats;
pub mod tpcc;
pub mod tpch;
