//! Lock resolution: what a reader does when it finds another transaction's lock. It asks the
//! lock's primary key for the transaction's fate and commits or rolls back the lock to
//! match; a transaction that is still alive is waited for until its lock goes, at most a
//! backoff that grows with each attempt.

use std::time::Duration;

use strata_common::{LockInfo, Result};
use strata_kv::{Client, Oracle, TxnStatus};

/// Resolves `lock` if its transaction is finished (or expired); otherwise waits for the
/// lock to go, at most a backoff.
/// The caller retries its read afterwards.
pub async fn resolve_lock(client: &dyn Client, oracle: &dyn Oracle, lock: &LockInfo, attempt: u32) -> Result<()> {
    let now = oracle.get_ts().await?;
    match client.check_txn_status(&lock.primary, lock.start_ts, now).await? {
        TxnStatus::Committed(commit_ts) => {
            client.resolve_locks(std::slice::from_ref(&lock.key), lock.start_ts, Some(commit_ts)).await
        }
        TxnStatus::RolledBack => client.resolve_locks(std::slice::from_ref(&lock.key), lock.start_ts, None).await,
        TxnStatus::Locked { ttl_left_ms } => {
            let backoff = (2u64 << attempt.min(6)).min(ttl_left_ms.max(1));
            // Until the lock goes (a commit takes well under the backoff) or the backoff
            // passes; KILL stops the wait at once.
            strata_common::cancel::or_cancelled(client.wait_for_lock(
                &lock.key,
                lock.start_ts,
                Duration::from_millis(backoff),
            ))
            .await
        }
    }
}
