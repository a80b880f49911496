//! `mariadb-dump` round trip: a database dumped from Strata (with and without
//! `--single-transaction`) and restored with the `mariadb` client into a fresh Strata has the
//! same schema and rows, and restored into a MariaDB server the same rows.
//! `scripts/install-deps.sh --test` installs the client tools and the server.

mod common;

use std::process::Command;

use mysql_async::prelude::Queryable;

fn dump(port: u16, extra: &[&str], db: &str) -> String {
    let out = Command::new("mariadb-dump")
        .args(["-h", "127.0.0.1", "-P", &port.to_string(), "-u", "root"])
        .args(extra)
        .arg(db)
        .output()
        .expect("mariadb-dump runs (scripts/install-deps.sh --test installs it)");
    assert!(out.status.success(), "mariadb-dump {extra:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 dump")
}

fn restore(port: u16, db: &str, sql: &str) {
    use std::io::Write;
    let mut child = Command::new("mariadb")
        .args(["-h", "127.0.0.1", "-P", &port.to_string(), "-u", "root", db])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("mariadb client runs");
    child.stdin.take().expect("stdin").write_all(sql.as_bytes()).expect("feed dump");
    let out = child.wait_with_output().expect("mariadb client");
    assert!(out.status.success(), "restore failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// A private MariaDB server (Debian's package) on a loopback port, stopped when dropped.
struct MariaDb {
    child: std::process::Child,
    port: u16,
}

impl MariaDb {
    fn start(dir: &std::path::Path) -> MariaDb {
        let data = dir.join("mariadb");
        std::fs::create_dir_all(&data).expect("mariadb dir");
        let user = if Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n")) {
            "root".to_string()
        } else {
            std::env::var("USER").unwrap_or_default()
        };
        let out = Command::new("mariadb-install-db")
            .args(["--no-defaults", "--auth-root-authentication-method=normal", "--skip-test-db"])
            .arg(format!("--user={user}"))
            .arg(format!("--datadir={}", data.display()))
            .output()
            .expect("mariadb-install-db runs (scripts/install-deps.sh --test installs mariadb-server)");
        assert!(out.status.success(), "mariadb-install-db: {}", String::from_utf8_lossy(&out.stderr));
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("free port").local_addr().expect("addr").port();
        let child = Command::new("mariadbd")
            .arg("--no-defaults")
            .arg(format!("--user={user}"))
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", dir.join("mariadb.sock").display()))
            .arg(format!("--pid-file={}", dir.join("mariadb.pid").display()))
            .arg(format!("--port={port}"))
            .args(["--bind-address=127.0.0.1", "--skip-grant-tables", "--skip-name-resolve"])
            .args(["--innodb-buffer-pool-size=64M", "--character-set-server=utf8mb4"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("mariadbd runs (scripts/install-deps.sh --test installs mariadb-server)");
        let mut m = MariaDb { child, port };
        for _ in 0..600 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return m;
            }
            if let Ok(Some(status)) = m.child.try_wait() {
                panic!("mariadbd exited: {status}");
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = m.child.kill();
        panic!("mariadbd did not listen within 60 s");
    }

    fn pool(&self) -> mysql_async::Pool {
        mysql_async::Pool::new(
            mysql_async::OptsBuilder::default()
                .ip_or_hostname("127.0.0.1")
                .tcp_port(self.port)
                .user(Some("root"))
                .prefer_socket(false),
        )
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

type Item = (i64, Option<String>, Option<String>, Option<String>, Option<i64>);

async fn rows(pool: &mysql_async::Pool, db: &str) -> (Vec<Item>, Vec<(i64, String)>) {
    let mut c = pool.get_conn().await.expect("connect");
    let items: Vec<Item> = c
        .query(format!("SELECT id, name, CAST(price AS CHAR), CAST(at AS CHAR), qty FROM {db}.items ORDER BY id"))
        .await
        .expect("items");
    let tags: Vec<(i64, String)> =
        c.query(format!("SELECT item, tag FROM {db}.tags ORDER BY item, tag")).await.expect("tags");
    (items, tags)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dump_restores_into_a_fresh_server_with_the_same_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = common::StrataProcess::start(&dir.path().join("source"));
    let pool = source.pool(None);
    let mut setup = vec![
        "CREATE DATABASE shop".to_string(),
        "CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2), at DATETIME, \
         qty BIGINT NOT NULL DEFAULT 0, KEY kname (name))"
            .to_string(),
        "CREATE TABLE shop.tags (item INT NOT NULL, tag VARCHAR(20) NOT NULL, PRIMARY KEY (item, tag))".to_string(),
    ];
    // Quotes, backslashes, newlines, NULLs, non-ASCII text and many rows (several INSERTs).
    let mut values = vec![
        "(1, 'it''s', 1.50, '2024-01-02 03:04:05', 3)".to_string(),
        "(2, NULL, NULL, NULL, 0)".to_string(),
        "(3, 'back\\\\slash\\nline', -0.01, '1999-12-31 23:59:59', -7)".to_string(),
        "(4, 'naïve café ✓', 99999999.99, '2038-01-19 03:14:08', 9223372036854775807)".to_string(),
    ];
    for i in 5..3000 {
        values.push(format!("({i}, 'item {i}', {i}.25, '2020-01-01 00:00:00', {i})"));
    }
    setup.push(format!("INSERT INTO shop.items VALUES {}", values.join(",")));
    setup.push("INSERT INTO shop.tags VALUES (1, 'red'), (1, 'sale'), (3, 'x')".to_string());
    // Views (one reads another) come along and still read the restored tables.
    setup.push(
        "CREATE VIEW shop.tag_counts (item, n) AS SELECT t.item, COUNT(*) FROM shop.tags t GROUP BY t.item".to_string(),
    );
    setup.push("CREATE VIEW shop.busy AS SELECT item FROM tag_counts WHERE n > 1".to_string());
    let setup: Vec<&str> = setup.iter().map(String::as_str).collect();
    common::exec(&pool, &setup).await;
    let expected = rows(&pool, "shop").await;
    assert_eq!(expected.0.len(), 2999);

    let target = common::StrataProcess::start(&dir.path().join("target"));
    let target_pool = target.pool(None);
    for (i, flags) in [&[][..], &["--single-transaction"][..]].iter().enumerate() {
        let text = dump(source.port, flags, "shop");
        let db = format!("copy{i}");
        common::exec(&target_pool, &[&format!("CREATE DATABASE {db}")]).await;
        restore(target.port, &db, &text);
        assert_eq!(rows(&target_pool, &db).await, expected, "rows after a dump with {flags:?}");
        // The schema came along: the key and the NOT NULL default.
        let mut c = target_pool.get_conn().await.expect("connect");
        let create: Option<(String, String)> =
            c.query_first(format!("SHOW CREATE TABLE {db}.items")).await.expect("show create");
        let create = create.expect("table").1;
        assert!(create.contains("KEY `kname` (`name`)"), "{create}");
        assert!(create.contains("`qty` bigint NOT NULL DEFAULT '0'"), "{create}");
        let busy: Vec<i64> = c.query(format!("SELECT item FROM {db}.busy")).await.expect("view");
        assert_eq!(busy, [1], "view after a dump with {flags:?}");
    }

    // The same dump restores into MariaDB with the same rows.
    let mariadb = MariaDb::start(dir.path());
    let maria_pool = mariadb.pool();
    let text = dump(source.port, &["--single-transaction"], "shop");
    common::exec(&maria_pool, &["CREATE DATABASE shop"]).await;
    restore(mariadb.port, "shop", &text);
    let (mut items, mut tags) = rows(&maria_pool, "shop").await;
    // MariaDB's default collation may order text differently: compare as sets.
    items.sort();
    tags.sort();
    let (mut want_items, mut want_tags) = expected;
    want_items.sort();
    want_tags.sort();
    assert_eq!(items, want_items, "rows in MariaDB");
    assert_eq!(tags, want_tags, "tags in MariaDB");
    maria_pool.disconnect().await.expect("disconnect");
}
