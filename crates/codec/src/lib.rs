//! Byte encodings below the SQL layer: order-preserving ("memcomparable") encoding of values
//! for keys, the keyspace every table and index lives in, and the row value format.

pub mod keys;
pub mod memcmp;
pub mod row;

pub use keys::Key;
