//! The MVCC commands on RocksDB never walk long runs of deletions: GC leaves a deleted entry
//! in the write CF for every version it removes (and the lock CF used to hold one for every
//! key committed), and a command that moved one cursor from key to key would step over all
//! of them — a TPC-C run once spun on exactly that. Commands share a cursor across their keys
//! only with a limit on what a seek may skip. Counted with RocksDB's perf context.

use std::sync::Arc;

use strata_common::Timestamp;
use strata_kv::{LockMode, Mutation, PessimisticLockRequest, PrewriteRequest};
use strata_mvcc::MvccStore;
use strata_storage_rocks::{deleted_entries_skipped, RocksEngine};

fn key(i: u32, suffix: &str) -> Vec<u8> {
    format!("t{i:08}{suffix}").into_bytes()
}

fn commit(store: &MvccStore, keys: &[Vec<u8>], start: u64, mode: LockMode) {
    write(store, keys.iter().map(|k| Mutation::Put(k.clone(), b"v".to_vec())).collect(), start, mode);
}

fn write(store: &MvccStore, mutations: Vec<Mutation>, start: u64, mode: LockMode) {
    let keys: Vec<Vec<u8>> = mutations.iter().map(|m| m.key().to_vec()).collect();
    let req = PrewriteRequest {
        mutations,
        primary: keys[0].clone(),
        start_ts: Timestamp(start),
        ttl_ms: 3000,
        mode,
        locked: vec![mode == LockMode::Pessimistic; keys.len()],
    };
    store.prewrite(&req, false).expect("prewrite");
    store.commit(&keys, Timestamp(start), Timestamp(start + 1), false).expect("commit");
}

#[test]
fn commands_do_not_step_over_other_transactions_deletions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = MvccStore::open(Arc::new(RocksEngine::open(dir.path()).expect("open"))).expect("open store");
    // 20,000 committed keys, then all but every 5,000th deleted and GC'd: runs of 10,000
    // deleted write records (a put and a delete per key) between the live keys.
    for batch in 0..20u32 {
        let keys: Vec<Vec<u8>> = (batch * 1000..(batch + 1) * 1000).map(|i| key(i, "")).collect();
        commit(&store, &keys, 10 + 10 * u64::from(batch), LockMode::Optimistic);
    }
    let doomed: Vec<Mutation> =
        (0..20_000u32).filter(|i| i % 5_000 != 0).map(|i| Mutation::Delete(key(i, ""))).collect();
    write(&store, doomed, 500, LockMode::Optimistic);
    let removed = store.gc(Timestamp(600)).expect("gc").versions_removed;
    assert_eq!(removed, 2 * 19_996);
    // The survivors written again: their first versions move into the write CF (a key's
    // newest Put is only in the latest CF), as live entries after each run of deletions.
    let survivors: Vec<Vec<u8>> = (0..20_000u32).filter(|i| i % 5_000 == 0).map(|i| key(i, "")).collect();
    commit(&store, &survivors, 700, LockMode::Optimistic);
    // The runs are there: an unlimited cursor seeking into one steps over thousands.
    let engine = store.engine().clone();
    let (_, unlimited) = deleted_entries_skipped(|| {
        let mut c = engine.cursor(strata_storage::Cf::Write, &[], &[0xFF; 16]).expect("cursor");
        c.seek(&strata_mvcc::records::encode_user_key(&key(7_000, "x")));
        assert!(c.valid().expect("valid"));
    });
    assert!(unlimited > 5_000, "the test needs long runs of deletions; a seek skipped {unlimited}");

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
            seen: None,
        };
        let values = store.pessimistic_lock(&lock, false).expect("lock").expect("not blocked");
        assert_eq!(values, vec![None; fresh.len()]);
        commit(&store, &fresh, start, LockMode::Pessimistic);
        let probe: Vec<Vec<u8>> = [key(5_000, ""), key(3, "y"), key(12_345, ""), key(19_998, "x")].to_vec();
        let got = store.batch_get(&probe, Timestamp(start + 5)).expect("batch get");
        assert_eq!(got, vec![Some(b"v".to_vec()), None, None, Some(b"v".to_vec())]);
    });
    // Each shared-cursor seek gives up after 32 deletions (then the key's own cursor takes
    // over): a few hundred at most for these two commands of four keys.
    assert!(skipped < 400, "the commands stepped over {skipped} deleted entries");
}
