//! The boundary between the SQL/transaction layers and the store: `kv::Client`, the
//! transactional KV API, and `Oracle`, the timestamp oracle. The embedded server implements
//! both in process (`strata-mvcc`); the cluster will implement them over gRPC. Nothing above
//! this crate knows which one it talks to.

pub mod client;
pub mod metrics;

pub use client::{
    ChangeSink, Client, CommittedChange, KeyPiece, LockMode, Mutation, Oracle, PessimisticLockRequest, PrewriteRequest,
    ScannedEntry, Seen, TxnStatus,
};
