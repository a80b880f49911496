//! The MVCC commands on RocksDB never walk the deletions other transactions left: after many
//! commits the lock CF holds a deleted entry for every key committed, and a command that
//! moved one cursor from key to key (or seeked to a key without a lock) would step over all
//! of them — a TPC-C run once spun on exactly that. Counted with RocksDB's perf context.

use std::sync::Arc;

use strata_common::Timestamp;
use strata_kv::{LockMode, Mutation, PessimisticLockRequest, PrewriteRequest};
use strata_mvcc::MvccStore;
use strata_storage_rocks::{deleted_entries_skipped, RocksEngine};

fn key(i: u32, suffix: &str) -> Vec<u8> {
    format!("t{i:08}{suffix}").into_bytes()
}

fn commit(store: &MvccStore, keys: &[Vec<u8>], start: u64, mode: LockMode) {
    let req = PrewriteRequest {
        mutations: keys.iter().map(|k| Mutation::Put(k.clone(), b"v".to_vec())).collect(),
        primary: keys[0].clone(),
        start_ts: Timestamp(start),
        ttl_ms: 3000,
        mode,
        locked: vec![mode == LockMode::Pessimistic; keys.len()],
    };
    store.prewrite(&req, false).expect("prewrite");
    store.commit(keys, Timestamp(start), Timestamp(start + 1), false).expect("commit");
}

#[test]
fn commands_do_not_step_over_other_transactions_deletions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = MvccStore::open(Arc::new(RocksEngine::open(dir.path()).expect("open"))).expect("open store");
    // 20,000 committed keys: 20,000 deleted locks in the lock CF.
    for batch in 0..20u32 {
        let keys: Vec<Vec<u8>> = (batch * 1000..(batch + 1) * 1000).map(|i| key(i, "")).collect();
        commit(&store, &keys, 10 + 10 * u64::from(batch), LockMode::Optimistic);
    }

    // A transaction over new keys spread across that range, and reads of present and
    // absent keys: none of it may walk the deletions between them.
    let fresh: Vec<Vec<u8>> = [5u32, 7_000, 13_000, 19_998].iter().map(|i| key(*i, "x")).collect();
    let start = 1_000u64;
    let (_, skipped) = deleted_entries_skipped(|| {
        let lock = PessimisticLockRequest {
            keys: fresh.clone(),
            primary: fresh[0].clone(),
            start_ts: Timestamp(start),
            for_update_ts: Timestamp(start),
            ttl_ms: 3000,
            wait_timeout_ms: None,
        };
        let values = store.pessimistic_lock(&lock, false).expect("lock").expect("not blocked");
        assert_eq!(values, vec![None; fresh.len()]);
        commit(&store, &fresh, start, LockMode::Pessimistic);
        let probe: Vec<Vec<u8>> = [key(3, ""), key(3, "y"), key(12_345, ""), key(19_999, "z")].to_vec();
        let got = store.batch_get(&probe, Timestamp(start + 5)).expect("batch get");
        assert_eq!(got, vec![Some(b"v".to_vec()), None, Some(b"v".to_vec()), None]);
    });
    assert!(skipped < 200, "the commands stepped over {skipped} deleted entries");
}
