//! The storage boundary: an ordered key-value engine with column families and atomic write
//! batches. MVCC is built on this trait; RocksDB implements it (`strata-storage-rocks`) and so
//! does an in-memory engine for tests. Nothing above MVCC sees this crate.

pub mod engine;
pub mod memory;
pub mod sample;

pub use engine::{Cf, CompactionFilter, Cursor, Engine, WriteBatch};
pub use memory::MemoryEngine;
