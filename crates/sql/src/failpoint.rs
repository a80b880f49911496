//! Fault injection for tests of the server's own defences.
//!
//! With `STRATA_FAILPOINTS=1` in the server's environment, the SQL function
//! `strata_failpoint(name)` exists and triggers the named fault inside the statement that
//! evaluates it. Without that variable the function does not exist (1305), so production
//! servers never carry it. Faults:
//!
//! - `panic`: the evaluating thread panics, as a bug would. The server must fail only that
//!   statement, roll back its transaction and go on.
//!
//! `STRATA_FAILPOINT_PAUSE=name:ms,...` (with `STRATA_FAILPOINTS=1`) slows the named step of
//! long internal work down, so a test can kill the server in the middle of it:
//! `backfill_batch` (each ADD INDEX batch), `delete_range` (each batch of deleting a dropped
//! table's or index's data).

use std::sync::OnceLock;

use strata_common::{Error, Result, Value};

/// The function's name.
pub const FUNCTION: &str = "strata_failpoint";

/// Whether fault injection was enabled when the process started.
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("STRATA_FAILPOINTS").is_ok_and(|v| v == "1"))
}

/// Sleeps as long as `STRATA_FAILPOINT_PAUSE` says for step `name` (not at all normally).
pub async fn pause(name: &str) {
    static PAUSES: OnceLock<Vec<(String, u64)>> = OnceLock::new();
    let pauses = PAUSES.get_or_init(|| {
        if !enabled() {
            return Vec::new();
        }
        std::env::var("STRATA_FAILPOINT_PAUSE")
            .unwrap_or_default()
            .split(',')
            .filter_map(|p| {
                let (n, ms) = p.split_once(':')?;
                Some((n.trim().to_string(), ms.trim().parse().ok()?))
            })
            .collect()
    });
    if let Some((_, ms)) = pauses.iter().find(|(n, _)| n == name) {
        tokio::time::sleep(std::time::Duration::from_millis(*ms)).await;
    }
}

/// Triggers the fault named by `args[0]`.
pub fn trigger(args: &[Value]) -> Result<Value> {
    let name = args.first().map(Value::to_display).unwrap_or_default();
    match name.as_str() {
        "panic" => panic!("failpoint 'panic' triggered"),
        other => Err(Error::internal(format!("unknown failpoint '{other}'"))),
    }
}
