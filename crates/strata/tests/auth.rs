//! Accounts over the wire: logins are checked (1045 for an unknown user or a wrong
//! password), statements are checked against privileges granted at the global, database and
//! table levels (1142, 1044, 1227, 1095), and accounts and grants survive a restart.

mod common;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};

fn opts(port: u16, user: &str, password: &str, db: Option<&str>) -> Opts {
    OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some(user))
        .pass(Some(password))
        .db_name(db)
        .prefer_socket(false)
        .into()
}

fn code(e: mysql_async::Error) -> u16 {
    match e {
        mysql_async::Error::Server(s) => s.code,
        other => panic!("expected a server error, got {other}"),
    }
}

async fn login_error(port: u16, user: &str, password: &str) -> u16 {
    match Conn::new(opts(port, user, password, None)).await {
        Ok(_) => panic!("{user} logged in with a wrong password"),
        Err(e) => code(e),
    }
}

async fn error_of(c: &mut Conn, sql: &str) -> u16 {
    match c.query_drop(sql).await {
        Ok(()) => panic!("expected an error from {sql}"),
        Err(e) => code(e),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logins_and_privileges_are_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut server = common::StrataProcess::start(&data);
    let port = server.port;
    let mut root = Conn::new(opts(port, "root", "", None)).await.expect("root logs in");
    for s in [
        "CREATE DATABASE shop",
        "CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(20))",
        "CREATE TABLE shop.secret (id INT PRIMARY KEY)",
        "INSERT INTO shop.items VALUES (1, 'pen')",
        "CREATE USER 'app'@'%' IDENTIFIED BY 'app-pw'",
        "CREATE USER 'local'@'localhost' IDENTIFIED BY 'l-pw'",
    ] {
        root.query_drop(s).await.unwrap_or_else(|e| panic!("{s}: {e}"));
    }

    // Unknown users and wrong passwords get 1045 and nothing else.
    assert_eq!(login_error(port, "nobody", "").await, 1045);
    assert_eq!(login_error(port, "app", "wrong").await, 1045);
    assert_eq!(login_error(port, "app", "").await, 1045);
    // localhost matches a loopback client.
    Conn::new(opts(port, "local", "l-pw", None)).await.expect("local logs in from loopback");
    // An existing user with the same name fails CREATE USER with 1396.
    assert_eq!(error_of(&mut root, "CREATE USER app IDENTIFIED BY 'x'").await, 1396);

    let mut app = Conn::new(opts(port, "app", "app-pw", None)).await.expect("app logs in");
    let me: Option<(String, String)> = app.query_first("SELECT CURRENT_USER(), USER()").await.expect("who");
    assert_eq!(me, Some(("app@%".to_string(), "app@127.0.0.1".to_string())));

    // No privileges yet.
    assert_eq!(error_of(&mut app, "USE shop").await, 1044);
    assert_eq!(error_of(&mut app, "SELECT * FROM shop.items").await, 1142);
    assert_eq!(error_of(&mut app, "CREATE DATABASE mine").await, 1044);
    assert_eq!(error_of(&mut app, "CREATE USER eve").await, 1227);
    assert_eq!(error_of(&mut app, "GRANT SELECT ON shop.* TO app").await, 1044);

    // Database-level SELECT.
    root.query_drop("GRANT SELECT ON shop.* TO 'app'@'%'").await.expect("grant");
    app.query_drop("USE shop").await.expect("use after grant");
    let n: Option<i64> = app.query_first("SELECT COUNT(*) FROM items").await.expect("select");
    assert_eq!(n, Some(1));
    // Subqueries and joins read tables too.
    let n: Option<i64> = app
        .query_first("SELECT COUNT(*) FROM items WHERE id IN (SELECT id FROM secret)")
        .await
        .expect("subquery on granted tables");
    assert_eq!(n, Some(0));
    assert_eq!(error_of(&mut app, "INSERT INTO items VALUES (2, 'ink')").await, 1142);
    assert_eq!(error_of(&mut app, "DELETE FROM items").await, 1142);
    assert_eq!(error_of(&mut app, "DROP TABLE items").await, 1142);

    // Table-level INSERT on one table only.
    root.query_drop("GRANT INSERT ON shop.items TO app").await.expect("grant insert");
    app.query_drop("INSERT INTO items VALUES (2, 'ink')").await.expect("insert after grant");
    assert_eq!(error_of(&mut app, "INSERT INTO secret VALUES (1)").await, 1142);
    let grants: Vec<String> = app.query("SHOW GRANTS").await.expect("show grants");
    assert_eq!(
        grants,
        vec![
            "GRANT USAGE ON *.* TO 'app'@'%'".to_string(),
            "GRANT SELECT ON `shop`.* TO 'app'@'%'".to_string(),
            "GRANT INSERT ON `shop`.`items` TO 'app'@'%'".to_string(),
        ]
    );

    // SHOW DATABASES lists only what the account holds privileges on.
    let dbs: Vec<String> = app.query("SHOW DATABASES").await.expect("show databases");
    assert_eq!(dbs, vec!["information_schema".to_string(), "shop".to_string()]);
    root.query_drop("CREATE DATABASE other").await.expect("create other");
    let dbs: Vec<String> = root.query("SHOW DATABASES").await.expect("show databases");
    assert!(dbs.contains(&"other".to_string()));
    let dbs: Vec<String> = app.query("SHOW DATABASES").await.expect("show databases");
    assert!(!dbs.contains(&"other".to_string()));

    // Once only the table grant is left, SHOW TABLES and information_schema list only that
    // table, and other databases not at all.
    root.query_drop("REVOKE SELECT ON shop.* FROM app").await.expect("revoke");
    let tables: Vec<String> = app.query("SHOW TABLES FROM shop").await.expect("show tables");
    assert_eq!(tables, vec!["items".to_string()]);
    let tables: Vec<String> = app
        .query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA <> 'information_schema'")
        .await
        .expect("information_schema.TABLES");
    assert_eq!(tables, vec!["items".to_string()]);
    let cols: Vec<String> = app
        .query("SELECT DISTINCT TABLE_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'shop'")
        .await
        .expect("information_schema.COLUMNS");
    assert_eq!(cols, vec!["items".to_string()]);
    let schemas: Vec<String> =
        app.query("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA ORDER BY 1").await.expect("SCHEMATA");
    assert_eq!(schemas, vec!["information_schema".to_string(), "shop".to_string()]);

    // Revoking takes effect on the next statement.
    assert_eq!(error_of(&mut app, "SELECT * FROM items").await, 1142);
    assert_eq!(error_of(&mut root, "REVOKE DELETE ON nosuch.* FROM app").await, 1141);

    // A table's definition takes some privilege on it.
    let create: Option<(String, String)> = app.query_first("SHOW CREATE TABLE items").await.expect("insert is enough");
    assert!(create.is_some());
    assert_eq!(error_of(&mut app, "SHOW CREATE TABLE secret").await, 1142);
    assert_eq!(error_of(&mut app, "DESCRIBE secret").await, 1142);
    assert_eq!(error_of(&mut app, "SHOW INDEX FROM secret").await, 1142);
    assert_eq!(error_of(&mut app, "ADMIN CHECK TABLE secret").await, 1142);
    app.query_drop("SHOW INDEX FROM items").await.expect("show index with a privilege on the table");

    // PROCESS and SUPER: app sees only its own connections and cannot kill root's.
    let ids: Vec<(u64, String)> = app
        .query_map("SHOW PROCESSLIST", |row: mysql_async::Row| {
            (row.get::<u64, _>(0).expect("id"), row.get::<String, _>(1).expect("user"))
        })
        .await
        .expect("processlist");
    assert!(ids.iter().all(|(_, u)| u == "app"), "{ids:?}");
    let root_id: Option<u64> = root.query_first("SELECT CONNECTION_ID()").await.expect("id");
    assert_eq!(error_of(&mut app, &format!("KILL {}", root_id.expect("id"))).await, 1095);

    // A user changes their own password; the old one stops working.
    app.query_drop("SET PASSWORD = 'new-pw'").await.expect("own password");
    assert_eq!(login_error(port, "app", "app-pw").await, 1045);
    drop(app);

    // Accounts, passwords and grants survive a restart; root gets a password.
    root.disconnect().await.expect("disconnect");
    server.stop();
    let mut server = common::StrataProcess::start_with(&data, &["--root-password", "r00t"], &[]);
    let port = server.port;
    assert_eq!(login_error(port, "root", "").await, 1045);
    let mut root = Conn::new(opts(port, "root", "r00t", None)).await.expect("root with its new password");
    let mut app = Conn::new(opts(port, "app", "new-pw", Some("shop"))).await.expect("app after restart");
    app.query_drop("INSERT INTO items VALUES (3, 'cap')").await.expect("table grant kept");
    assert_eq!(error_of(&mut app, "SELECT * FROM items").await, 1142);

    // Dropped accounts cannot log in.
    root.query_drop("DROP USER app").await.expect("drop user");
    assert_eq!(error_of(&mut root, "DROP USER app").await, 1396);
    root.query_drop("DROP USER IF EXISTS app").await.expect("drop user if exists");
    assert_eq!(login_error(port, "app", "new-pw").await, 1045);
    server.stop();
}

#[test]
fn an_open_root_is_refused_beyond_loopback() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["server", "--host", "0.0.0.0", "--port", "0", "--status-port", "0", "--data-dir"])
        .arg(dir.path().join("data"))
        .output()
        .expect("run strata");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("root has no password"), "{err}");
}

/// SET GLOBAL as in MySQL: it needs SUPER (1227), changes what new sessions start with and
/// what every session reads for a global-only variable, and leaves the current session's
/// own value alone; scope mistakes get 1228/1229/1238.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_global_changes_new_sessions_not_this_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(&dir.path().join("data"));
    let port = server.port;
    let mut root = Conn::new(opts(port, "root", "", None)).await.expect("root logs in");
    root.query_drop("CREATE USER 'plain'@'%' IDENTIFIED BY 'p'").await.expect("create user");
    let mut plain = Conn::new(opts(port, "plain", "p", None)).await.expect("plain logs in");
    assert_eq!(error_of(&mut plain, "SET GLOBAL max_execution_time = 5").await, 1227);
    assert_eq!(error_of(&mut plain, "SET @@global.sql_mode = ''").await, 1227);

    root.query_drop("SET GLOBAL max_execution_time = 1234").await.expect("set global");
    let (session, global): (i64, i64) =
        root.query_first("SELECT @@max_execution_time, @@global.max_execution_time").await.expect("read").expect("row");
    assert_eq!((session, global), (0, 1234), "the session keeps its own value");
    let mut fresh = Conn::new(opts(port, "root", "", None)).await.expect("new session");
    let v: Option<i64> = fresh.query_first("SELECT @@max_execution_time").await.expect("read");
    assert_eq!(v, Some(1234), "a new session starts with the global value");
    let shown: Option<(String, String)> =
        root.query_first("SHOW GLOBAL VARIABLES LIKE 'max_execution_time'").await.expect("show");
    assert_eq!(shown.map(|r| r.1), Some("1234".to_string()));
    let shown: Option<(String, String)> =
        root.query_first("SHOW SESSION VARIABLES LIKE 'max_execution_time'").await.expect("show");
    assert_eq!(shown.map(|r| r.1), Some("0".to_string()));

    // Values are checked as a session SET checks them, and normalized.
    assert_eq!(error_of(&mut root, "SET GLOBAL transaction_isolation = 'sideways'").await, 1231);
    root.query_drop("SET GLOBAL transaction_isolation = 'READ-COMMITTED'").await.expect("set global isolation");
    let mut fresh = Conn::new(opts(port, "root", "", None)).await.expect("new session");
    let v: Option<String> = fresh.query_first("SELECT @@tx_isolation").await.expect("read");
    assert_eq!(v.as_deref(), Some("READ-COMMITTED"));

    // A global-only variable is read from the globals by every session at once.
    root.query_drop("SET GLOBAL max_prepared_stmt_count = 7").await.expect("set");
    let v: Option<i64> = plain.query_first("SELECT @@max_prepared_stmt_count").await.expect("read");
    assert_eq!(v, Some(7));
    assert_eq!(error_of(&mut root, "SET max_prepared_stmt_count = 7").await, 1229);
    assert_eq!(error_of(&mut root, "SET SESSION max_connections = 7").await, 1229);
    assert_eq!(error_of(&mut root, "SELECT @@session.max_connections").await, 1238);
    assert_eq!(error_of(&mut root, "SET GLOBAL warning_count = 1").await, 1238);
    assert_eq!(error_of(&mut root, "SET GLOBAL timestamp = 1").await, 1228);
    assert_eq!(error_of(&mut root, "SET GLOBAL version = 'x'").await, 1238);
}
