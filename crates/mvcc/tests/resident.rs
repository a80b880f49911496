//! Reads through resident tables (`storage_rocks::resident`, whose cursors are live rather
//! than snapshots) under concurrent transfers: every scan at a timestamp sees the same total,
//! and the balances one scan sees are those a snapshot read at its timestamp gives.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_codec::keys::{prefix_end, row_key, row_prefix};
use strata_common::{TableId, Timestamp, Value};
use strata_kv::{Client, LockMode, Mutation, PrewriteRequest};
use strata_mvcc::{LocalClient, MvccStore};
use strata_storage::Engine;
use strata_storage_rocks::RocksEngine;

const ACCOUNTS: i64 = 64;
const INITIAL: i64 = 1_000;

fn account(i: i64) -> Vec<u8> {
    row_key(TableId(7), &[Value::Int(i)])
}

fn amount(v: &[u8]) -> i64 {
    std::str::from_utf8(v).expect("utf8").parse().expect("number")
}

/// Commits `puts` as a transaction that started (and read) at `start`; false if a write
/// committed since `start` conflicts.
async fn commit(c: &LocalClient, clock: &AtomicU64, start: Timestamp, puts: Vec<(Vec<u8>, Vec<u8>)>) -> bool {
    let muts: Vec<Mutation> = puts.into_iter().map(|(k, v)| Mutation::Put(k, v)).collect();
    let keys: Vec<Vec<u8>> = muts.iter().map(|m| m.key().to_vec()).collect();
    let req = PrewriteRequest {
        primary: keys[0].clone(),
        locked: vec![false; muts.len()],
        mutations: muts,
        start_ts: start,
        ttl_ms: 3000,
        mode: LockMode::Optimistic,
    };
    if c.prewrite(Arc::new(req)).await.is_err() {
        let _ = c.rollback(&keys, start).await;
        return false;
    }
    let commit_ts = Timestamp(clock.fetch_add(1, Ordering::SeqCst));
    c.commit(&keys, start, commit_ts).await.expect("commit");
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scans_of_a_resident_table_see_whole_transfers_while_they_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = RocksEngine::open(dir.path())
        .and_then(|e| e.with_resident_tables(strata_mvcc::records::table_unit))
        .expect("open");
    let engine: Arc<dyn Engine> = Arc::new(engine);
    let c = Arc::new(LocalClient::new(Arc::new(MvccStore::open(engine).expect("store")), false));
    let clock = Arc::new(AtomicU64::new(100));
    let rows: Vec<(Vec<u8>, Vec<u8>)> = (0..ACCOUNTS).map(|i| (account(i), INITIAL.to_string().into_bytes())).collect();
    assert!(commit(&c, &clock, Timestamp(clock.fetch_add(1, Ordering::SeqCst)), rows).await);
    let (lo, hi) = (row_prefix(TableId(7)), prefix_end(&row_prefix(TableId(7))));
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..3u64 {
        let (c, clock, stop) = (c.clone(), clock.clone(), stop.clone());
        let (lo, hi) = (lo.clone(), hi.clone());
        writers.push(tokio::spawn(async move {
            let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ w;
            let mut next = || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            };
            while !stop.load(Ordering::Relaxed) {
                let (a, b) = ((next() % ACCOUNTS as u64) as i64, (next() % ACCOUNTS as u64) as i64);
                if a == b {
                    continue;
                }
                let at = Timestamp(clock.fetch_add(1, Ordering::SeqCst));
                let Ok(got) = c.scan(&account(a), &prefix_end(&account(a)), at, 1).await else { continue };
                let Ok(got_b) = c.scan(&account(b), &prefix_end(&account(b)), at, 1).await else { continue };
                let (Some((_, va)), Some((_, vb))) = (got.first(), got_b.first()) else { panic!("account missing") };
                let x = (next() % 10) as i64 + 1;
                let puts = vec![
                    (account(a), (amount(va) - x).to_string().into_bytes()),
                    (account(b), (amount(vb) + x).to_string().into_bytes()),
                ];
                // Read at the start timestamp: a transfer committed since conflicts.
                commit(&c, &clock, at, puts).await;
                // Scans too, so that the table becomes resident.
                let _ = c.scan(&lo, &hi, Timestamp(clock.load(Ordering::SeqCst)), usize::MAX).await;
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut checked = 0;
    while Instant::now() < deadline {
        let at = Timestamp(clock.fetch_add(1, Ordering::SeqCst));
        // Locks of transfers in flight fail a scan; it is tried again at a new timestamp.
        let Ok(got) = c.scan(&lo, &hi, at, usize::MAX).await else { continue };
        assert_eq!(got.len(), ACCOUNTS as usize);
        let total: i64 = got.iter().map(|(_, v)| amount(v)).sum();
        assert_eq!(total, ACCOUNTS * INITIAL, "a scan at {at:?} saw part of a transfer");
        // Point reads at the same timestamp agree with the scan.
        let keys: Vec<Vec<u8>> = got.iter().map(|(k, _)| k.clone()).collect();
        if let Ok(points) = c.batch_get(&keys, at).await {
            for ((k, v), p) in got.iter().zip(points) {
                assert_eq!(Some(v.clone()), p, "scan and point read differ on {k:?}");
            }
        }
        checked += 1;
        tokio::task::yield_now().await;
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.expect("writer");
    }
    assert!(checked > 50, "only {checked} scans checked");
    let resident = strata_common::storage_metrics::RESIDENT_SCANS.load(Ordering::Relaxed);
    assert!(resident > 100, "the table was not resident: {resident} scans read it");
}
