//! Golden-script tests of transactions on the MVCC store: each file under `tests/golden/`
//! interleaves commands of named transactions and records what each one sees. Regenerate the
//! expected output with `UPDATE_GOLDENFILES=1 cargo test -p strata-txn --test golden`, then
//! read the diff: the scripts are the specification of each isolation level's promises.
//!
//! Commands (prefix = transaction name):
//! - `setup k=v ...`: commits the values in a transaction of its own.
//! - `t: begin [optimistic] [rc] [timeout=MS]`: pessimistic RR by default.
//! - `t: get k ...`: snapshot read (a new statement; RC reads at a new timestamp).
//! - `t: scan [from] [to]`: snapshot range read.
//! - `t: get_for_update k ...`: locking current read (may block).
//! - `t: put k=v ...` / `t: delete k ...`: writes; pessimistic ones lock first (may block).
//! - `t: commit` / `t: rollback`.
//! - `t: await`: waits for t's blocked command and prints its result.
//!
//! A command that has not finished after a short wait prints `blocked` and keeps running;
//! errors print their MySQL error number and message.

use std::collections::{BTreeMap, HashMap};
use std::error::Error as StdError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use strata_common::{Error, Result, Timestamp};
use strata_kv::{Client, LockMode, Oracle};
use strata_mvcc::{LocalClient, MvccStore};
use strata_storage::MemoryEngine;
use strata_txn::{Isolation, Transaction, TxnOptions};
use tokio::task::JoinHandle;

/// Timestamps 1, 2, 3, ...: the same script gives the same timestamps every run.
struct CountingOracle(AtomicU64);

#[async_trait::async_trait]
impl Oracle for CountingOracle {
    async fn get_ts(&self) -> Result<Timestamp> {
        Ok(Timestamp::compose(self.0.fetch_add(1, Ordering::SeqCst) + 1, 0))
    }
}

type Pending = JoinHandle<(Option<Transaction>, String)>;

enum Slot {
    Idle(Box<Transaction>),
    Running(Pending),
}

struct TxnRunner {
    rt: tokio::runtime::Runtime,
    client: Arc<dyn Client>,
    oracle: Arc<dyn Oracle>,
    txns: HashMap<String, Slot>,
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn err_text(e: &Error) -> String {
    format!("error {}: {e}", e.code().number())
}

fn key_bytes(keys: &[String]) -> Vec<Vec<u8>> {
    keys.iter().map(|k| k.as_bytes().to_vec()).collect()
}

fn show_values(keys: &[String], values: Vec<Option<Vec<u8>>>) -> String {
    keys.iter()
        .zip(values)
        .map(|(k, v)| format!("{k}={}", v.map(|v| text(&v)).unwrap_or_else(|| "None".into())))
        .collect::<Vec<_>>()
        .join(" ")
}

enum Op {
    Get(Vec<String>),
    GetForUpdate(Vec<String>),
    Scan(String, String),
    Put(Vec<(String, String)>),
    Delete(Vec<String>),
    Commit,
    Rollback,
}

/// Runs one command of a transaction, returning the transaction (unless it ended) and output.
async fn run_op(mut txn: Transaction, op: Op) -> (Option<Transaction>, String) {
    let pessimistic = txn.options().mode == LockMode::Pessimistic;
    match op {
        Op::Commit => {
            return match txn.commit().await {
                Ok(_) => (None, "committed".into()),
                Err(e) => (None, err_text(&e)),
            }
        }
        Op::Rollback => {
            return match txn.rollback().await {
                Ok(()) => (None, "rolled back".into()),
                Err(e) => (None, err_text(&e)),
            }
        }
        _ => {}
    }
    if let Err(e) = txn.start_statement().await {
        return (Some(txn), err_text(&e));
    }
    let r: Result<String> = async {
        Ok(match op {
            Op::Get(keys) => show_values(&keys, txn.batch_get(&key_bytes(&keys)).await?),
            Op::GetForUpdate(keys) => show_values(&keys, txn.lock_and_get(&key_bytes(&keys)).await?),
            Op::Scan(from, to) => {
                let rows = txn.scan(from.as_bytes(), to.as_bytes(), usize::MAX).await?;
                let parts: Vec<String> = rows.iter().map(|(k, v)| format!("{}={}", text(k), text(v))).collect();
                if parts.is_empty() {
                    "(empty)".into()
                } else {
                    parts.join(" ")
                }
            }
            Op::Put(kvs) => {
                if pessimistic {
                    let kb: Vec<Vec<u8>> = kvs.iter().map(|(k, _)| k.as_bytes().to_vec()).collect();
                    txn.lock_and_get(&kb).await?;
                }
                for (k, v) in kvs {
                    txn.put(k.into_bytes(), v.into_bytes());
                }
                "ok".into()
            }
            Op::Delete(keys) => {
                let kb: Vec<Vec<u8>> = keys.iter().map(|k| k.as_bytes().to_vec()).collect();
                if pessimistic {
                    txn.lock_and_get(&kb).await?;
                }
                for k in kb {
                    txn.delete(k);
                }
                "ok".into()
            }
            Op::Commit | Op::Rollback => unreachable!(),
        })
    }
    .await;
    txn.end_statement(r.is_ok());
    match r {
        Ok(s) => (Some(txn), s),
        // A deadlock victim's transaction is rolled back, as the SQL layer does.
        Err(e @ Error::Deadlock) => {
            let _ = txn.rollback().await;
            (None, err_text(&e))
        }
        Err(e) => (Some(txn), err_text(&e)),
    }
}

impl TxnRunner {
    fn new() -> TxnRunner {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
        let store = Arc::new(MvccStore::open(Arc::new(MemoryEngine::new())).expect("open store"));
        TxnRunner {
            rt,
            client: Arc::new(LocalClient::new(store, false)),
            oracle: Arc::new(CountingOracle(AtomicU64::new(0))),
            txns: HashMap::new(),
        }
    }

    /// Runs `op` on transaction `name`: waits briefly, else leaves it running.
    fn start(&mut self, name: &str, op: Op) -> std::result::Result<String, Box<dyn StdError>> {
        let txn = match self.txns.remove(name) {
            Some(Slot::Idle(t)) => *t,
            Some(Slot::Running(h)) => {
                self.txns.insert(name.to_string(), Slot::Running(h));
                return Err(format!("{name} is blocked; await it first").into());
            }
            None => return Err(format!("no transaction {name}").into()),
        };
        let mut handle = self.rt.spawn(run_op(txn, op));
        let done = self.rt.block_on(async { tokio::time::timeout(Duration::from_millis(300), &mut handle).await });
        match done {
            Ok(joined) => Ok(self.finish(name, joined?)),
            Err(_) => {
                self.txns.insert(name.to_string(), Slot::Running(handle));
                Ok("blocked".into())
            }
        }
    }

    fn finish(&mut self, name: &str, (txn, out): (Option<Transaction>, String)) -> String {
        if let Some(t) = txn {
            self.txns.insert(name.to_string(), Slot::Idle(Box::new(t)));
        }
        out
    }
}

impl goldenscript::Runner for TxnRunner {
    fn run(&mut self, command: &goldenscript::Command) -> std::result::Result<String, Box<dyn StdError>> {
        let args: Vec<(Option<String>, String)> =
            command.args.iter().map(|a| (a.key.clone(), a.value.clone())).collect();
        let keys = || -> Vec<String> { args.iter().map(|(_, v)| v.clone()).collect() };
        let pairs = || -> std::result::Result<Vec<(String, String)>, Box<dyn StdError>> {
            args.iter()
                .map(|(k, v)| k.clone().map(|k| (k, v.clone())).ok_or_else(|| "expected key=value".into()))
                .collect()
        };
        let Some(name) = command.prefix.clone() else {
            return match command.name.as_str() {
                "setup" => {
                    let kvs = pairs()?;
                    let (client, oracle) = (self.client.clone(), self.oracle.clone());
                    self.rt.block_on(async move {
                        let opts = TxnOptions {
                            mode: LockMode::Optimistic,
                            isolation: Isolation::RepeatableRead,
                            lock_wait_timeout_ms: 1000,
                            one_pc: true,
                        };
                        let mut t = Transaction::begin(client, oracle, opts).await?;
                        for (k, v) in kvs {
                            t.put(k.into_bytes(), v.into_bytes());
                        }
                        t.commit().await
                    })?;
                    Ok(String::new())
                }
                other => Err(format!("unknown command {other}").into()),
            };
        };
        match command.name.as_str() {
            "begin" => {
                let mut opts = TxnOptions {
                    mode: LockMode::Pessimistic,
                    isolation: Isolation::RepeatableRead,
                    lock_wait_timeout_ms: 1000,
                    one_pc: true,
                };
                for (k, v) in &args {
                    match (k.as_deref(), v.as_str()) {
                        (None, "optimistic") => opts.mode = LockMode::Optimistic,
                        (None, "rc") => opts.isolation = Isolation::ReadCommitted,
                        (Some("timeout"), ms) => opts.lock_wait_timeout_ms = ms.parse()?,
                        _ => return Err(format!("bad begin argument {v}").into()),
                    }
                }
                let (client, oracle) = (self.client.clone(), self.oracle.clone());
                let t = self.rt.block_on(Transaction::begin(client, oracle, opts))?;
                let out = format!("start_ts={}", t.start_ts().physical_ms());
                self.txns.insert(name, Slot::Idle(Box::new(t)));
                Ok(out)
            }
            "await" => match self.txns.remove(&name) {
                Some(Slot::Running(h)) => {
                    let joined = self.rt.block_on(h)?;
                    Ok(self.finish(&name, joined))
                }
                Some(idle) => {
                    self.txns.insert(name.clone(), idle);
                    Err(format!("{name} is not blocked").into())
                }
                None => Err(format!("no transaction {name}").into()),
            },
            "get" => self.start(&name, Op::Get(keys())),
            "get_for_update" => self.start(&name, Op::GetForUpdate(keys())),
            "scan" => {
                let k = keys();
                let from = k.first().cloned().unwrap_or_default();
                let to = k.get(1).cloned().unwrap_or_else(|| "\u{7f}".into());
                self.start(&name, Op::Scan(from, to))
            }
            "put" => self.start(&name, Op::Put(pairs()?)),
            "delete" => self.start(&name, Op::Delete(keys())),
            "commit" => self.start(&name, Op::Commit),
            "rollback" => self.start(&name, Op::Rollback),
            other => Err(format!("unknown command {other}").into()),
        }
    }

    fn end_script(&mut self) -> std::result::Result<(), Box<dyn StdError>> {
        let blocked: BTreeMap<_, _> = self.txns.iter().filter(|(_, s)| matches!(s, Slot::Running(_))).collect();
        if !blocked.is_empty() {
            return Err(format!("script ended with blocked transactions: {:?}", blocked.keys()).into());
        }
        Ok(())
    }
}

#[test]
fn golden_scripts() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/golden")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no golden scripts");
    for f in files {
        goldenscript::run(&mut TxnRunner::new(), &f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
}
