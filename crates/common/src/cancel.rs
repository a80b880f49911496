//! Cancelling a statement's waits from below the SQL layer. A statement that waits for a
//! lock (in the store's lock manager, or backing off while resolving another transaction's
//! lock) is stopped by `KILL` without polling: the SQL layer runs each statement under a
//! [`Cancel`] in a task-local, and the waits select on [`Cancel::cancelled`]. Outside a
//! statement nothing is cancellable.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::Error;

/// Something that can stop a statement.
pub trait Cancel: Send + Sync {
    /// Resolves with the error the statement must fail with, once it is cancelled.
    fn cancelled(&self) -> Pin<Box<dyn Future<Output = Error> + Send + '_>>;
}

tokio::task_local! {
    static CURRENT: Arc<dyn Cancel>;
}

/// Runs `f` (one statement) under `cancel`.
pub async fn scope<F: Future>(cancel: Arc<dyn Cancel>, f: F) -> F::Output {
    CURRENT.scope(cancel, f).await
}

/// The running statement's canceller, if any.
pub fn current() -> Option<Arc<dyn Cancel>> {
    CURRENT.try_with(|c| c.clone()).ok()
}

/// Runs `f` unless the running statement is cancelled first, in which case `f` is dropped
/// and the cancellation's error returned. `f` must be safe to drop at its await points.
pub async fn or_cancelled<T, F: Future<Output = Result<T, Error>>>(f: F) -> Result<T, Error> {
    match current() {
        None => f.await,
        Some(c) => {
            tokio::select! {
                r = f => r,
                e = c.cancelled() => Err(e),
            }
        }
    }
}
