//! The in-process timestamp oracle. Physical time comes from a `Clock` (never read directly
//! by MVCC code); a high-water mark is persisted ahead of use, so timestamps keep increasing
//! across restarts even if the wall clock steps back.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use parking_lot::Mutex;
use strata_common::{Error, Result, Timestamp};
use strata_kv::Oracle;
use strata_storage::{Cf, Engine, WriteBatch};

/// The raw-CF key of the persisted high-water mark (physical ms; every timestamp issued
/// is below it).
pub(crate) const LIMIT_KEY: &[u8] = b"tso_limit";
const WINDOW_MS: u64 = 3000;

/// A source of physical time in milliseconds.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
    }
}

struct State {
    physical: u64,
    logical: u64,
    limit: u64,
}

/// The local oracle.
pub struct LocalOracle {
    engine: Arc<dyn Engine>,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

impl LocalOracle {
    /// Opens the oracle, continuing above the persisted high-water mark.
    pub fn open(engine: Arc<dyn Engine>, clock: Arc<dyn Clock>) -> Result<LocalOracle> {
        let limit = match engine.get(Cf::Raw, LIMIT_KEY)? {
            Some(b) => u64::from_le_bytes(b.as_slice().try_into().map_err(|_| Error::internal("corrupt tso limit"))?),
            None => 0,
        };
        let physical = clock.now_ms().max(limit);
        Ok(LocalOracle { engine, clock, state: Mutex::new(State { physical, logical: 0, limit }) })
    }

    /// The next timestamp (synchronous form).
    pub fn next(&self) -> Result<Timestamp> {
        let mut s = self.state.lock();
        let now = self.clock.now_ms();
        if now > s.physical {
            s.physical = now;
            s.logical = 0;
        } else {
            s.logical += 1;
            if s.logical >= 1 << Timestamp::LOGICAL_BITS {
                s.physical += 1;
                s.logical = 0;
            }
        }
        if s.physical >= s.limit {
            let limit = s.physical + WINDOW_MS;
            let mut b = WriteBatch::default();
            b.put(Cf::Raw, LIMIT_KEY.to_vec(), limit.to_le_bytes().to_vec());
            self.engine.write(b, true)?;
            s.limit = limit;
        }
        Ok(Timestamp::compose(s.physical, s.logical))
    }
}

#[async_trait]
impl Oracle for LocalOracle {
    async fn get_ts(&self) -> Result<Timestamp> {
        self.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use strata_storage::MemoryEngine;

    struct FixedClock(AtomicU64);
    impl Clock for FixedClock {
        fn now_ms(&self) -> u64 {
            self.0.load(Ordering::SeqCst)
        }
    }

    #[test]
    fn monotonic_across_restart_and_clock_step_back() {
        let engine: Arc<dyn Engine> = Arc::new(MemoryEngine::new());
        let clock = Arc::new(FixedClock(AtomicU64::new(1_000_000)));
        let o = LocalOracle::open(engine.clone(), clock.clone()).expect("open");
        let a = o.next().expect("ts");
        let b = o.next().expect("ts");
        assert!(b > a);
        clock.0.store(10, Ordering::SeqCst); // the wall clock steps back
        let o2 = LocalOracle::open(engine, clock).expect("reopen");
        assert!(o2.next().expect("ts") > b);
    }
}
