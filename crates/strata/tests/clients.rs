//! Real MySQL client libraries against a real `strata` process: PyMySQL, go-sql-driver/mysql
//! and Connector/J each connect, create a table, run prepared inserts and selects, and commit
//! and roll back a transaction, then connect again over TLS (programs under `tests/clients/`). `.ci/run` installs the
//! runtimes and PyMySQL; Go modules and Maven artifacts are fetched on first run.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::StrataProcess;

fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/clients")
}

/// Runs `program args` in `dir` against a fresh server; fails with the program's output.
fn run_client(name: &str, dir: PathBuf, program: &str, args: &[&str]) {
    let data = tempfile::tempdir().expect("tempdir");
    // The server offers TLS (a self-signed certificate) so each client also proves it can
    // switch to it.
    let (cert, key) = common::write_self_signed_cert(data.path());
    let server = StrataProcess::start_with(&data.path().join("data"), &["--ssl-cert", &cert, "--ssl-key", &key], &[]);
    let out_path = data.path().join(format!("{name}.out"));
    let out = std::fs::File::create(&out_path).expect("output file");
    let mut child = Command::new(program)
        .args(args)
        .current_dir(&dir)
        .env("STRATA_HOST", "127.0.0.1")
        .env("STRATA_PORT", server.port.to_string())
        .env("STRATA_TLS", "1")
        .env("STRATA_TLS_CA", &cert)
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("dup"))
        .stderr(out)
        .spawn()
        .unwrap_or_else(|e| panic!("{name}: cannot run `{program}` ({e}); .ci/run installs it"));
    // First runs download Maven artifacts / Go modules; later runs take seconds.
    let deadline = Instant::now() + Duration::from_secs(600);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name}: timed out\n{}", std::fs::read_to_string(&out_path).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = std::fs::read_to_string(&out_path).unwrap_or_default();
    assert!(status.success(), "{name} failed ({status}):\n{output}");
    assert!(output.contains("client: ok"), "{name} did not report success:\n{output}");
}

#[test]
fn pymysql_client() {
    run_client("pymysql", clients_dir().join("python"), "python3", &["client_test.py"]);
}

#[test]
fn go_sql_driver_client() {
    run_client("go-sql-driver", clients_dir().join("go"), "go", &["run", "."]);
}

#[test]
fn connector_j_client() {
    run_client("connector-j", clients_dir().join("java"), "mvn", &["-B", "-q", "compile", "exec:java"]);
}
