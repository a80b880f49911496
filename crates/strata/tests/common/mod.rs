//! Test harness: runs the real `strata` binary on loopback with a fresh data directory,
//! on ports it picks itself (port 0), and connects with a real MySQL driver.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use mysql_async::prelude::Queryable;

/// A running server process.
pub struct StrataProcess {
    child: Option<Child>,
    /// The MySQL protocol port.
    pub port: u16,
    /// The status port (HTTP: /status, /metrics).
    #[allow(dead_code)]
    pub status_port: u16,
    /// The data directory.
    pub data_dir: PathBuf,
}

impl StrataProcess {
    /// Starts a server on `data_dir` and waits until it listens.
    pub fn start(data_dir: &Path) -> StrataProcess {
        Self::start_with_env(data_dir, &[])
    }

    /// Starts a server with extra environment variables (`STRATA_FAILPOINTS`, ...).
    pub fn start_with_env(data_dir: &Path, env: &[(&str, &str)]) -> StrataProcess {
        Self::start_with(data_dir, &[], env)
    }

    /// Starts a server with extra command-line options and environment variables.
    pub fn start_with(data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> StrataProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(["server", "--host", "127.0.0.1", "--port", "0", "--status-port", "0", "--data-dir"])
            .arg(data_dir)
            .args(args)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn strata");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if !sent {
                    if let Some(rest) = line.split("listening on ").nth(1) {
                        let port_of = |addr: &str| addr.rsplit(':').next().and_then(|p| p.parse::<u16>().ok());
                        let addr = rest.split_whitespace().next().unwrap_or("");
                        let status = rest.split("status on http://").nth(1).and_then(|s| s.split(',').next());
                        if let Some(port) = port_of(addr) {
                            let _ = tx.send((port, status.and_then(port_of).unwrap_or(0)));
                            sent = true;
                        }
                    }
                }
            }
        });
        let (port, status_port) =
            rx.recv_timeout(Duration::from_secs(60)).expect("strata did not start listening within 60 s");
        StrataProcess { child: Some(child), port, status_port, data_dir: data_dir.to_path_buf() }
    }

    /// The connection URL for a database (or none).
    pub fn url(&self, db: Option<&str>) -> String {
        format!("mysql://root@127.0.0.1:{}/{}", self.port, db.unwrap_or(""))
    }

    /// A connection pool.
    pub fn pool(&self, db: Option<&str>) -> mysql_async::Pool {
        let opts = mysql_async::Opts::from_url(&self.url(db)).expect("url");
        let builder = mysql_async::OptsBuilder::from_opts(opts).prefer_socket(false);
        mysql_async::Pool::new(builder)
    }

    /// The most memory the process has held so far (peak resident set, VmHWM), in bytes.
    #[allow(dead_code)]
    pub fn peak_rss(&self) -> u64 {
        let pid = self.child.as_ref().expect("running").id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM");
        let kb: u64 = line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("VmHWM kB");
        kb * 1024
    }

    /// Kills the process with SIGKILL (a crash).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops the process with SIGTERM and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
            let _ = c.wait();
        }
    }
}

impl Drop for StrataProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs statements on a fresh connection, panicking on error.
pub async fn exec(pool: &mysql_async::Pool, sqls: &[&str]) {
    let mut c = pool.get_conn().await.expect("connect");
    for s in sqls {
        c.query_drop(*s).await.unwrap_or_else(|e| panic!("{s}: {e}"));
    }
}

/// Rows as text cells (None for NULL), for comparing answers.
pub fn text_rows(rows: Vec<mysql_async::Row>) -> Vec<Vec<Option<String>>> {
    rows.into_iter()
        .map(|r| {
            r.unwrap()
                .into_iter()
                .map(|v| match v {
                    mysql_async::Value::NULL => None,
                    mysql_async::Value::Bytes(b) => Some(String::from_utf8_lossy(&b).into_owned()),
                    other => Some(other.as_sql(true)),
                })
                .collect()
        })
        .collect()
}

/// A self-signed certificate for localhost / 127.0.0.1 written as `cert.pem` and `key.pem`
/// in `dir`; returns their paths (for `--ssl-cert` / `--ssl-key`, and as a client's CA).
pub fn write_self_signed_cert(dir: &Path) -> (String, String) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .expect("self-signed certificate");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, ck.cert.pem()).expect("write cert");
    std::fs::write(&key, ck.key_pair.serialize_pem()).expect("write key");
    (cert.display().to_string(), key.display().to_string())
}
