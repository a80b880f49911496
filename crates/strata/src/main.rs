//! The `strata` binary. `strata server` runs the embedded single node: RocksDB storage,
//! Percolator MVCC, the SQL engine and the MySQL protocol in one process. `strata bench`
//! drives TPC-C against it or any other MySQL-compatible server.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use strata_kv::{Client, Oracle};
use strata_mvcc::{LocalClient, LocalOracle, MvccStore, SystemClock};
use strata_server::{Server, ServerOptions, TlsConfig};
use strata_sql::Engine;
use strata_storage_rocks::RocksEngine;
use tokio::sync::watch;
use tracing::info;

/// mimalloc instead of glibc's malloc: the server allocates and frees small objects from many
/// threads, and glibc's arenas spent much of a bulk load growing and trimming heaps
/// (BENCHMARKS.md, bulk load). With the `override` feature it also takes `malloc` and
/// `operator new` for the C and C++ code linked in (RocksDB): under glibc's malloc, RocksDB's
/// block and row caches, once full and evicting (~5 minutes into a TPC-C run), left its heap
/// fragmented, and `_int_malloc` went from 0.3% to 4.6% of the server's CPU (session 40).
///
/// Rust's allocations call `mi_malloc` itself when the layout asks for no more than word
/// alignment, which every mimalloc block has (as Rust's System allocator calls `malloc` when
/// `malloc`'s alignment suffices); only larger alignments take `mi_malloc_aligned`. The
/// `mimalloc` crate's allocator sent every layout through `mi_malloc_aligned`, whose checks
/// and fallbacks made an allocation ~50 instructions instead of ~20 (callgrind, session 52).
#[global_allocator]
static ALLOC: Mimalloc = Mimalloc;

struct Mimalloc;

/// The alignment of every block `mi_malloc` returns (a machine word).
const MI_WORD_ALIGN: usize = std::mem::size_of::<usize>();

// SAFETY: mimalloc's functions uphold `GlobalAlloc`'s contract; blocks from `mi_malloc` are
// word-aligned, so they serve layouts of at most that alignment. (An allocator cannot be
// written without `unsafe`: the one place the workspace allows it.)
#[allow(unsafe_code)]
unsafe impl std::alloc::GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys as mi;
        if layout.align() <= MI_WORD_ALIGN {
            mi::mi_malloc(layout.size()).cast()
        } else {
            mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys as mi;
        if layout.align() <= MI_WORD_ALIGN {
            mi::mi_zalloc(layout.size()).cast()
        } else {
            mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: std::alloc::Layout) {
        libmimalloc_sys::mi_free(ptr.cast());
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        use libmimalloc_sys as mi;
        if layout.align() <= MI_WORD_ALIGN {
            mi::mi_realloc(ptr.cast(), new_size).cast()
        } else {
            mi::mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast()
        }
    }
}

#[derive(Parser)]
#[command(name = "strata", version, about = "Strata: a MySQL-compatible HTAP database")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the embedded single-node server.
    Server(ServerArgs),
    /// Benchmarks Strata or any MySQL-compatible server (TPC-C, TPC-H) and charts the results.
    Bench {
        #[command(subcommand)]
        command: strata_bench::cli::BenchCommand,
    },
}

#[derive(clap::Args)]
struct ServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// MySQL protocol port (0 picks a free port).
    #[arg(long, default_value_t = 4000)]
    port: u16,
    /// HTTP status port (0 picks a free port).
    #[arg(long, default_value_t = 10080)]
    status_port: u16,
    /// Address the HTTP status port listens on (loopback unless asked otherwise).
    #[arg(long, default_value = "127.0.0.1")]
    status_host: String,
    /// Logged-in connections allowed at once (max_connections); more get error 1040.
    #[arg(long, default_value_t = 151)]
    max_connections: usize,
    /// Seconds a client has to finish logging in (connect_timeout).
    #[arg(long, default_value_t = 10)]
    connect_timeout: u64,
    /// Memory all running statements may hold together: bytes (with K, M or G) or a share
    /// of the machine's RAM ("80%"). The statement that crosses it fails with 8176; each
    /// statement also has its own quota, tidb_mem_quota_query. "0" for no limit.
    #[arg(long, default_value = "80%")]
    memory_limit: String,
    /// Memory the columnar replicas (`ALTER TABLE .. SET TIFLASH REPLICA 1`) may hold
    /// together, as for --memory-limit. A replica that does not fit stays unavailable (queries
    /// read the row store) and is tried again every minute. "0" for no limit.
    #[arg(long, default_value = "25%")]
    columnar_memory_limit: String,
    /// RocksDB's block cache, shared by every column family, as for --memory-limit (memory
    /// is taken as blocks are read). Blocks it misses are read from the files (the OS page
    /// cache at best): at 512 MiB a 4-warehouse TPC-C run read 12 blocks per transaction
    /// that way. "0" (or a share when the RAM size is unknown): 512 MiB. A quarter of it
    /// caches current row versions for point reads; often-scanned tables' current rows are
    /// kept in memory in key order within another quarter, taken on top of it.
    #[arg(long, default_value = "20%")]
    block_cache_size: String,
    /// Data directory.
    #[arg(long, default_value = "./strata-data")]
    data_dir: PathBuf,
    /// Password of root: set at the first start, and reset to this on later starts when
    /// given (root is created without one, which is only allowed on loopback).
    #[arg(long, default_value = "")]
    root_password: String,
    /// Listen on a non-loopback address even though root has no password.
    #[arg(long)]
    insecure: bool,
    /// The directory LOAD DATA INFILE (without LOCAL) may read server-side files from
    /// (secure_file_priv); "" allows any file. Without it, only LOCAL (the client's files)
    /// loads.
    #[arg(long)]
    secure_file_priv: Option<String>,
    /// PEM certificate (chain) offered to clients that ask for TLS (`mariadb --ssl`,
    /// JDBC `sslMode=REQUIRED`). Needs --ssl-key.
    #[arg(long)]
    ssl_cert: Option<PathBuf>,
    /// PEM private key of --ssl-cert.
    #[arg(long)]
    ssl_key: Option<PathBuf>,
    /// Refuse unencrypted connections (require_secure_transport); needs --ssl-cert/--ssl-key.
    #[arg(long)]
    require_secure_transport: bool,
    /// How long old versions are kept for readers, in seconds (tidb_gc_life_time).
    #[arg(long, default_value_t = 600)]
    gc_life_time: u64,
    /// Statement worker threads: one per CPU the process may use (or TOKIO_WORKER_THREADS).
    #[arg(long)]
    worker_threads: Option<usize>,
    /// "auto": when there are as many statement workers as CPUs the process may use, each
    /// worker runs on its own CPU (left to the kernel, two workers shared one CPU of a
    /// 2-CPU box while the other idled); "off": the kernel places them.
    #[arg(long, value_enum, default_value_t = WorkerAffinity::Auto)]
    worker_affinity: WorkerAffinity,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum WorkerAffinity {
    Auto,
    Off,
}

fn main() -> Result<()> {
    no_transparent_huge_pages();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Server(args) => {
            // Statements run on the runtime's threads; give them the stack the depth limits
            // are sized for (virtual memory: only what a statement touches is used).
            let workers = args
                .worker_threads
                .unwrap_or_else(|| {
                    strata_common::env_number(
                        "TOKIO_WORKER_THREADS",
                        std::thread::available_parallelism().map_or(1, |n| n.get()),
                    )
                })
                .max(1);
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.enable_all().worker_threads(workers).thread_stack_size(strata_sql::depth::STACK_SIZE);
            let pins = match args.worker_affinity {
                WorkerAffinity::Auto => strata_common::sched::WorkerPins::new(workers).map(Arc::new),
                WorkerAffinity::Off => None,
            };
            let widen = pins.clone();
            builder.on_thread_start(move || {
                // A blocking-pool thread a pinned worker starts would inherit its CPU.
                if let Some(pins) = &widen {
                    pins.unpin();
                }
                // An experiment knob, unset by default: an N-µs slice for the runtime's
                // threads (`strata_common::sched::request_slice_from_env`).
                strata_common::sched::request_slice_from_env("STRATA_WORKER_SLICE_US", 0);
            });
            match &pins {
                // Only the runtime's workers park (its blocking pool's threads do not): each
                // takes the next CPU the first time it goes idle, at startup.
                Some(pins) => {
                    tracing::info!("{workers} statement workers, one on each of CPUs {:?}", pins.cpus());
                    let pins = pins.clone();
                    builder.on_thread_park(move || {
                        pins.pin_once();
                    });
                }
                None => tracing::info!("{workers} statement workers, placed by the kernel"),
            }
            let rt = builder.build()?;
            let r = rt.block_on(server(args));
            // Statements still running on other connections are abandoned: everything they
            // could have committed is already durable.
            rt.shutdown_timeout(Duration::from_secs(2));
            r
        }
        Command::Bench { command } => {
            // One thread: terminals are I/O bound, and waking tasks across threads adds
            // latency to every statement's round trip.
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let r = rt.block_on(strata_bench::cli::run(command));
            rt.shutdown_timeout(Duration::from_secs(1));
            r
        }
    }
}

/// Turns transparent huge pages off for the process (and what it forks), before any thread
/// starts. mimalloc asks for them on its arenas (`madvise(MADV_HUGEPAGE)`, its `allow_thp`
/// default), and where the kernel grants them every fault on fresh or purged arena memory
/// zeroes a whole 2 MiB page: in `CREATE INDEX` on sysbench's 100k-row tables the kernel's
/// `clear_page_erms` was half of the server's samples, the index phase of the prepare took
/// 1.4 CPU-s instead of 0.8 without them, and TPC-C and point selects were no faster with
/// them (BENCHMARKS.md, session 53). `MIMALLOC_ALLOW_THP=0` did the same from outside.
fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        // Only a cost, never a fault: the server runs the same with huge pages.
        eprintln!("could not turn transparent huge pages off: {e}");
    }
}

async fn server(args: ServerArgs) -> Result<()> {
    let tls = match (&args.ssl_cert, &args.ssl_key) {
        (Some(cert), Some(key)) => Some(TlsConfig::load(cert, key).map_err(anyhow::Error::msg)?),
        (None, None) => None,
        _ => bail!("--ssl-cert and --ssl-key go together"),
    };
    if args.require_secure_transport && tls.is_none() {
        bail!("--require-secure-transport needs --ssl-cert and --ssl-key");
    }
    let memory_limit = parse_memory_limit("--memory-limit", &args.memory_limit, total_ram())?;
    let columnar_limit = parse_memory_limit("--columnar-memory-limit", &args.columnar_memory_limit, total_ram())?;
    strata_sql::context::set_server_memory_limit(memory_limit);
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("cannot create data dir {}", args.data_dir.display()))?;
    let block_cache = match parse_memory_limit("--block-cache-size", &args.block_cache_size, total_ram())? {
        0 => strata_storage_rocks::DEFAULT_BLOCK_CACHE_BYTES, // RAM unknown, or "0"
        n => n,
    };
    let opened = RocksEngine::open_with(&args.data_dir.join("kv"), block_cache)
        .and_then(|r| r.with_resident_tables(strata_mvcc::records::table_unit));
    let rocks = match opened {
        Ok(r) => r,
        Err(e) if e.to_string().contains("lock") => {
            bail!("data dir {} is locked by another process ({e})", args.data_dir.display())
        }
        Err(e) => bail!("cannot open storage in {}: {e}", args.data_dir.display()),
    };
    let engine: Arc<dyn strata_storage::Engine> = Arc::new(rocks);
    let store = Arc::new(MvccStore::open(engine.clone())?);
    let local = LocalClient::new(store.clone(), true);
    let recovered = local.recover_locks()?;
    if recovered > 0 {
        info!("resolved {recovered} locks left by transactions that were running at the last stop");
    }
    let oracle = Arc::new(LocalOracle::open(engine.clone(), Arc::new(SystemClock))?);
    // Every transaction takes its timestamps from `oracle`: commits may take one-phase.
    let client: Arc<dyn Client> = Arc::new(local.with_oracle(oracle.clone()));
    let sql = Engine::open(client, oracle.clone() as Arc<dyn Oracle>).await?;
    sql.set_column_engine(strata_olap::OlapEngine::start(&sql, Some(args.data_dir.join("columnar")), columnar_limit)?);
    sql.users.bootstrap_root(&args.root_password).await?;
    sql.set_gc_life_time(Duration::from_secs(args.gc_life_time));
    sql.start_background().await?;
    // What the command line set, as SHOW VARIABLES reports it.
    sql.set_global_default("max_connections", strata_common::Value::Int(args.max_connections as i64));
    sql.set_global_default("connect_timeout", strata_common::Value::Int(args.connect_timeout.max(1) as i64));
    if let Some(dir) = &args.secure_file_priv {
        sql.set_global_default("secure_file_priv", strata_common::Value::str(dir.clone()));
    }
    let slow_log = args.data_dir.join("strata-slow.log");
    sql.set_global_default("slow_query_log_file", strata_common::Value::str(slow_log.to_string_lossy().into_owned()));
    sql.set_global_default("tidb_server_memory_limit", strata_common::Value::UInt(memory_limit as u64));
    sql.set_global_default("have_ssl", strata_common::Value::str(if tls.is_some() { "YES" } else { "DISABLED" }));
    sql.set_global_default("have_openssl", strata_common::Value::str(if tls.is_some() { "YES" } else { "DISABLED" }));
    if let Some(t) = &tls {
        sql.set_global_default("ssl_cert", strata_common::Value::str(t.cert_path.clone()));
        sql.set_global_default("ssl_key", strata_common::Value::str(t.key_path.clone()));
    }
    sql.set_global_default(
        "require_secure_transport",
        strata_common::Value::Int(i64::from(args.require_secure_transport)),
    );
    let root_open = sql.users.get("root", "%").is_some_and(|r| !r.has_password());
    if root_open && !is_loopback(&args.host) && !args.insecure {
        bail!(
            "refusing to listen on {} while root has no password: give --root-password, or --insecure to \
             allow it anyway",
            args.host
        );
    }

    let addr = format!("{}:{}", args.host, args.port);
    let server = Server::bind(
        &addr,
        sql.clone(),
        ServerOptions {
            max_connections: args.max_connections,
            connect_timeout: Duration::from_secs(args.connect_timeout.max(1)),
            tls,
            require_secure_transport: args.require_secure_transport,
            ..Default::default()
        },
    )
    .await
    .with_context(|| format!("cannot listen on {addr} (is the port taken?)"))?;
    let status_addr = format!("{}:{}", args.status_host, args.status_port);
    let status = tokio::net::TcpListener::bind(&status_addr)
        .await
        .with_context(|| format!("cannot listen on {status_addr} (is the port taken?)"))?;
    let sql_addr = server.local_addr()?;
    let status_bound = status.local_addr()?;
    info!(
        "Strata {} listening on {} (MySQL protocol), status on http://{}, data in {}",
        env!("CARGO_PKG_VERSION"),
        sql_addr,
        status_bound,
        args.data_dir.display()
    );

    let (stop_tx, stop_rx) = watch::channel(false);
    let connections = server.connection_count();
    let app = axum::Router::new()
        .route(
            "/status",
            axum::routing::get({
                let c = connections.clone();
                move || async move {
                    format!(
                        "{{\"version\":\"{}\",\"connections\":{}}}\n",
                        strata_sql::VERSION,
                        c.load(Ordering::Relaxed)
                    )
                }
            }),
        )
        .route(
            "/metrics",
            axum::routing::get({
                let c = connections.clone();
                let sql = sql.clone();
                move || async move {
                    (
                        [(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                        sql.metrics.render(c.load(Ordering::Relaxed) as u64),
                    )
                }
            }),
        );
    let mut status_stop = stop_rx.clone();
    let status_task = tokio::spawn(async move {
        let _ = axum::serve(status, app)
            .with_graceful_shutdown(async move {
                let _ = status_stop.changed().await;
            })
            .await;
    });

    let serve = tokio::spawn(server.run(stop_rx));
    shutdown_signal().await;
    info!("shutting down");
    let _ = stop_tx.send(true);
    let _ = serve.await;
    let _ = status_task.await;
    // Make sure everything acknowledged is on disk before exit.
    engine.write(strata_storage::WriteBatch::default(), true)?;
    info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// Whether `host` only accepts connections from this machine.
fn is_loopback(host: &str) -> bool {
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The machine's RAM in bytes (from /proc/meminfo; 0 when unknown).
fn total_ram() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?.to_string();
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb * 1024)
        })
        .unwrap_or(0)
}

/// Parses a memory limit (`flag`, for messages): "0", bytes with an optional K/M/G suffix,
/// or a percentage of `ram`.
fn parse_memory_limit(flag: &str, text: &str, ram: u64) -> Result<usize> {
    let t = text.trim();
    let bytes = if let Some(p) = t.strip_suffix('%') {
        let p: f64 = p.trim().parse().with_context(|| format!("bad {flag} {text:?}"))?;
        if !(0.0..=100.0).contains(&p) {
            bail!("{flag} {text:?}: a percentage must be between 0 and 100");
        }
        (ram as f64 * p / 100.0) as u64
    } else {
        let (num, mult) = match t.char_indices().last() {
            Some((i, c)) if c.eq_ignore_ascii_case(&'k') => (&t[..i], 1u64 << 10),
            Some((i, c)) if c.eq_ignore_ascii_case(&'m') => (&t[..i], 1 << 20),
            Some((i, c)) if c.eq_ignore_ascii_case(&'g') => (&t[..i], 1 << 30),
            _ => (t, 1),
        };
        let n: u64 = num.trim().parse().with_context(|| format!("bad {flag} {text:?}"))?;
        n.checked_mul(mult).with_context(|| format!("{flag} {text:?} is too large"))?
    };
    Ok(usize::try_from(bytes).unwrap_or(usize::MAX))
}

#[cfg(test)]
mod tests {
    use super::parse_memory_limit;

    #[test]
    fn memory_limits_parse_as_bytes_suffixes_or_shares() {
        assert_eq!(parse_memory_limit("--memory-limit", "0", 1000).ok(), Some(0));
        assert_eq!(parse_memory_limit("--memory-limit", "1500", 1000).ok(), Some(1500));
        assert_eq!(parse_memory_limit("--memory-limit", "2G", 0).ok(), Some(2 << 30));
        assert_eq!(parse_memory_limit("--memory-limit", "64m", 0).ok(), Some(64 << 20));
        assert_eq!(parse_memory_limit("--memory-limit", "80%", 1000).ok(), Some(800));
        assert!(parse_memory_limit("--memory-limit", "lots", 1000).is_err());
        assert!(parse_memory_limit("--memory-limit", "120%", 1000).is_err());
    }
}
