//! TLS over the wire: a server started with `--ssl-cert/--ssl-key` lets `mariadb --ssl`
//! switch to TLS (Ssl_version / Ssl_cipher show it), still serves plain clients, refuses a
//! `REQUIRE SSL` account over a plain connection (1045), and with
//! `--require-secure-transport` refuses every plain login (3159).

mod common;

use std::process::Command;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};

/// Runs `sql` with the mariadb client over TLS; returns its tab-separated output or error.
fn mariadb_tls(port: u16, ca: &str, user: &str, password: &str, sql: &str) -> Result<String, String> {
    let out = Command::new("mariadb")
        .args(["-h", "127.0.0.1", "-P", &port.to_string(), "-u", user])
        .arg(format!("--password={password}"))
        .args(["--ssl", "--ssl-ca", ca, "-N", "-B", "-e", sql])
        .output()
        .expect("mariadb client runs (scripts/install-deps.sh --test installs it)");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn plain(port: u16, user: &str, password: &str) -> OptsBuilder {
    OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some(user))
        .pass(Some(password))
        .prefer_socket(false)
}

fn server_code(e: mysql_async::Error) -> u16 {
    match e {
        mysql_async::Error::Server(s) => s.code,
        other => panic!("expected a server error, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_switch_to_tls_and_accounts_can_require_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key) = common::write_self_signed_cert(dir.path());
    let server =
        common::StrataProcess::start_with(&dir.path().join("data"), &["--ssl-cert", &cert, "--ssl-key", &key], &[]);
    let port = server.port;

    // The mariadb client over TLS: the session reports the protocol and cipher.
    let out = mariadb_tls(port, &cert, "root", "", "SHOW STATUS LIKE 'Ssl_%'").expect("TLS login");
    let version = out.lines().find_map(|l| l.strip_prefix("Ssl_version\t")).expect("Ssl_version row");
    assert!(version.starts_with("TLSv1."), "Ssl_version {version:?}");
    let cipher = out.lines().find_map(|l| l.strip_prefix("Ssl_cipher\t")).expect("Ssl_cipher row");
    assert!(!cipher.trim().is_empty(), "no cipher reported: {out}");
    let have = mariadb_tls(port, &cert, "root", "", "SELECT @@have_ssl").expect("have_ssl");
    assert_eq!(have.trim(), "YES");

    // Plain clients are still served, and see no cipher.
    let mut root = Conn::new(plain(port, "root", "")).await.expect("plain login");
    let rows: Vec<(String, String)> = root.query("SHOW STATUS LIKE 'Ssl_cipher'").await.expect("status");
    assert_eq!(rows, vec![("Ssl_cipher".to_string(), String::new())]);

    // REQUIRE SSL: refused in the clear with 1045, admitted over TLS.
    root.query_drop("CREATE USER 'sec'@'%' IDENTIFIED BY 'sec-pw' REQUIRE SSL").await.expect("create user");
    let e = Conn::new(plain(port, "sec", "sec-pw")).await.expect_err("plain login of a REQUIRE SSL account");
    assert_eq!(server_code(e), 1045);
    let who = mariadb_tls(port, &cert, "sec", "sec-pw", "SELECT CURRENT_USER()").expect("sec over TLS");
    assert_eq!(who.trim(), "sec@%");
    // ALTER USER ... REQUIRE NONE lifts it.
    root.query_drop("ALTER USER 'sec'@'%' REQUIRE NONE").await.expect("require none");
    Conn::new(plain(port, "sec", "sec-pw")).await.expect("plain login after REQUIRE NONE");
    // A wrong password over TLS is still 1045.
    let err = mariadb_tls(port, &cert, "sec", "nope", "SELECT 1").expect_err("wrong password");
    assert!(err.contains("1045"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_secure_transport_refuses_plain_logins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key) = common::write_self_signed_cert(dir.path());
    let server = common::StrataProcess::start_with(
        &dir.path().join("data"),
        &["--ssl-cert", &cert, "--ssl-key", &key, "--require-secure-transport"],
        &[],
    );
    let port = server.port;
    let e = Conn::new(plain(port, "root", "")).await.expect_err("plain login refused");
    assert_eq!(server_code(e), 3159);
    let out = mariadb_tls(port, &cert, "root", "", "SELECT @@require_secure_transport").expect("TLS login");
    assert_eq!(out.trim(), "1");
}

#[test]
fn a_bad_certificate_stops_the_start_with_a_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = dir.path().join("cert.pem");
    std::fs::write(&cert, "not a certificate").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["server", "--host", "127.0.0.1", "--port", "0", "--status-port", "0", "--data-dir"])
        .arg(dir.path().join("data"))
        .args(["--ssl-cert"])
        .arg(&cert)
        .args(["--ssl-key"])
        .arg(&cert)
        .output()
        .expect("run strata");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("certificate") || err.contains("key"), "{err}");
}
