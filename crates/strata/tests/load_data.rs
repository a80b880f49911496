//! LOAD DATA [LOCAL] INFILE over the wire with a real driver: the client's file streamed in
//! packets (LOCAL) and a server-side file under --secure-file-priv; MySQL's field and line
//! options; LOCAL's lenient handling of duplicates and bad values against strict errors that
//! roll the whole load back; privileges (INSERT, FILE) and the file-location rule.

mod common;

use std::fmt::Write as _;

use common::StrataProcess;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, WhiteListFsHandler};

fn opts(port: u16, user: &str, files: &[&std::path::Path]) -> Opts {
    let b = OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some(user))
        .db_name(Some("ld"))
        .prefer_socket(false);
    let list: Vec<std::path::PathBuf> = files.iter().map(|p| p.to_path_buf()).collect();
    b.local_infile_handler(Some(WhiteListFsHandler::new(list))).into()
}

async fn error_of(c: &mut Conn, sql: &str) -> (u16, String) {
    match c.query_drop(sql).await {
        Ok(()) => panic!("expected an error from {sql}"),
        Err(mysql_async::Error::Server(s)) => (s.code, s.message),
        Err(other) => panic!("expected a server error from {sql}, got {other}"),
    }
}

async fn count_sum(c: &mut Conn) -> (i64, i64) {
    let row: (i64, Option<i64>) =
        c.query_first("SELECT COUNT(*), CAST(SUM(qty) AS SIGNED) FROM items").await.expect("count").expect("row");
    (row.0, row.1.unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_data_reads_files_with_mysql_rules() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = dir.path().join("files");
    std::fs::create_dir(&files).expect("files dir");
    let files_arg = files.to_string_lossy().into_owned();
    let server = StrataProcess::start_with(&dir.path().join("data"), &["--secure-file-priv", &files_arg], &[]);
    common::exec(
        &server.pool(None),
        &[
            "CREATE DATABASE ld",
            "CREATE TABLE ld.items (id INT PRIMARY KEY, name VARCHAR(10), qty INT NOT NULL, note TEXT)",
            "CREATE USER reader IDENTIFIED BY ''",
            "GRANT SELECT ON ld.* TO reader",
            "CREATE USER writer IDENTIFIED BY ''",
            "GRANT SELECT, INSERT ON ld.* TO writer",
        ],
    )
    .await;

    // 20,000 CSV lines (many packets' worth) with a header, quoted fields holding the
    // separator, doubled quotes, escapes and NULL.
    let csv = dir.path().join("items.csv");
    let mut text = String::from("id,name,qty,note\r\n");
    let mut want_sum = 0i64;
    for i in 1..=20_000i64 {
        let qty = i % 97;
        want_sum += qty;
        let note = match i % 4 {
            0 => "NULL".to_string(),
            1 => format!("\"a, \"\"b\"\" {i}\""),
            2 => format!("line\\nbreak {i}"),
            _ => String::new(),
        };
        let _ = write!(text, "{i},n{i},{qty},{note}\r\n");
    }
    std::fs::write(&csv, &text).expect("write csv");
    let tsv = dir.path().join("replace.tsv");
    let mut c = Conn::new(opts(server.port, "root", &[&csv, &tsv])).await.expect("connect");
    let load = format!(
        "LOAD DATA LOCAL INFILE '{}' INTO TABLE items FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' \
         LINES TERMINATED BY '\\r\\n' IGNORE 1 LINES",
        csv.display()
    );
    c.query_drop(&load).await.expect("local load");
    assert_eq!(c.affected_rows(), 20_000);
    assert_eq!(c.info(), "Records: 20000  Deleted: 0  Skipped: 0  Warnings: 0");
    assert_eq!(count_sum(&mut c).await, (20_000, want_sum));
    let notes: Vec<Option<String>> =
        c.query("SELECT note FROM items WHERE id IN (1, 2, 3, 4) ORDER BY id").await.expect("notes");
    assert_eq!(notes, vec![Some("a, \"b\" 1".into()), Some("line\nbreak 2".into()), Some(String::new()), None]);

    // LOCAL again: every row is a duplicate, skipped with a warning (LOCAL implies IGNORE).
    c.query_drop(&load).await.expect("local load of duplicates");
    assert_eq!(c.affected_rows(), 0);
    assert_eq!(c.info(), "Records: 20000  Deleted: 0  Skipped: 20000  Warnings: 20000");
    let kept: Vec<(String, u16, String)> = c.query("SHOW WARNINGS").await.expect("warnings");
    assert_eq!(kept.len(), 1024, "SHOW WARNINGS keeps max_error_count of them");
    assert_eq!(kept[0].1, 1062);
    assert_eq!(count_sum(&mut c).await, (20_000, want_sum));

    // REPLACE from a tab-separated file (the default format) with a column list and SET
    // over user variables.
    std::fs::write(&tsv, "1\tfirst\t5\n2\tsecond\t6\n30001\tnew\t7\n").expect("write tsv");
    c.query_drop(format!(
        "LOAD DATA LOCAL INFILE '{}' REPLACE INTO TABLE items (id, @n, @q) SET name = UPPER(@n), qty = @q * 10",
        tsv.display()
    ))
    .await
    .expect("replace load");
    assert_eq!(c.info(), "Records: 3  Deleted: 2  Skipped: 0  Warnings: 0");
    let rows: Vec<(i64, String, i64)> =
        c.query("SELECT id, name, qty FROM items WHERE id IN (1, 2, 30001) ORDER BY id").await.expect("replaced");
    assert_eq!(rows, vec![(1, "FIRST".into(), 50), (2, "SECOND".into(), 60), (30001, "NEW".into(), 70)]);
    let last: Option<String> = c.query_first("SELECT @n").await.expect("@n");
    assert_eq!(last.as_deref(), Some("new"), "the variables keep the last line's values");
    let before = count_sum(&mut c).await;

    // A server-side file in strict mode: one bad value late in the file fails the whole
    // load with the line's number, and nothing of it stays.
    let mut bad = String::new();
    for i in 0..5_000 {
        let qty = if i == 4_321 { "lots".to_string() } else { "1".to_string() };
        let _ = writeln!(bad, "{}\tb{i}\t{qty}\t", 100_000 + i);
    }
    std::fs::write(files.join("bad.tsv"), &bad).expect("write bad");
    let (code, msg) = error_of(&mut c, "LOAD DATA INFILE 'bad.tsv' INTO TABLE items").await;
    assert_eq!(code, 1366, "{msg}");
    assert!(msg.ends_with("at row 4322"), "{msg}");
    assert_eq!(count_sum(&mut c).await, before, "a failed load leaves nothing behind");

    // Two problems in the same batch of lines (the file is read a batch ahead of the rows
    // being stored): the duplicate key at line 1500 comes first, so it is the error, not
    // the bad value at line 1700.
    let mut two = String::new();
    for i in 0..3_000 {
        let id = if i == 1_499 { 200_000 + 10 } else { 200_000 + i };
        let qty = if i == 1_699 { "lots" } else { "1" };
        let _ = writeln!(two, "{id}\tt{i}\t{qty}\t");
    }
    std::fs::write(files.join("two.tsv"), &two).expect("write two");
    let (code, msg) = error_of(&mut c, "LOAD DATA INFILE 'two.tsv' INTO TABLE items").await;
    assert_eq!(code, 1062, "{msg}");
    assert!(msg.contains("'200010'"), "{msg}");
    assert_eq!(count_sum(&mut c).await, before, "a failed load leaves nothing behind");

    // The same file through LOCAL: the bad value becomes 0 with a warning.
    let local_bad = files.join("bad.tsv");
    let mut c2 = Conn::new(opts(server.port, "root", &[&local_bad])).await.expect("connect");
    c2.query_drop(format!("LOAD DATA LOCAL INFILE '{}' INTO TABLE items", local_bad.display()))
        .await
        .expect("lenient local load");
    assert_eq!(c2.affected_rows(), 5_000);
    assert_eq!(c2.get_warnings(), 1);
    let qty: Option<i64> = c2.query_first("SELECT qty FROM items WHERE id = 104321").await.expect("qty");
    assert_eq!(qty, Some(0));

    // A strict LOCAL load (REPLACE is not lenient) that fails while the client is still
    // sending: the rest of the file is drained and the connection stays usable.
    let mut big_bad = String::from("900000\tx\tnope\t\n");
    for i in 0..50_000 {
        let _ = writeln!(big_bad, "{}\tok\t1\t{}", 900_001 + i, "y".repeat(40));
    }
    let big_bad_path = dir.path().join("big_bad.tsv");
    std::fs::write(&big_bad_path, &big_bad).expect("write big bad");
    let mut c3 = Conn::new(opts(server.port, "root", &[&big_bad_path])).await.expect("connect");
    let (code, _) =
        error_of(&mut c3, &format!("LOAD DATA LOCAL INFILE '{}' REPLACE INTO TABLE items", big_bad_path.display()))
            .await;
    assert_eq!(code, 1366);
    let one: Option<i64> = c3.query_first("SELECT 1").await.expect("connection still in step");
    assert_eq!(one, Some(1));
    let n: Option<i64> = c3.query_first("SELECT COUNT(*) FROM items WHERE id >= 900000").await.expect("count");
    assert_eq!(n, Some(0));

    // Files outside secure_file_priv, and missing files.
    let (code, _) = error_of(&mut c, "LOAD DATA INFILE '/etc/hostname' INTO TABLE items").await;
    assert_eq!(code, 1290);
    let (code, _) = error_of(&mut c, "LOAD DATA INFILE '../items.csv' INTO TABLE items").await;
    assert_eq!(code, 1290);
    let (code, _) = error_of(&mut c, "LOAD DATA INFILE 'missing.tsv' INTO TABLE items").await;
    assert_eq!(code, 29);
    // Malformed options.
    let (code, _) = error_of(&mut c, "LOAD DATA INFILE 'bad.tsv' INTO TABLE items FIELDS ENCLOSED BY 'ab'").await;
    assert_eq!(code, 1083);

    // Privileges: INSERT on the table for any load, FILE for a server-side file.
    let mut reader = Conn::new(opts(server.port, "reader", &[&tsv])).await.expect("reader");
    let (code, _) =
        error_of(&mut reader, &format!("LOAD DATA LOCAL INFILE '{}' INTO TABLE items", tsv.display())).await;
    assert_eq!(code, 1142);
    let mut writer = Conn::new(opts(server.port, "writer", &[&tsv])).await.expect("writer");
    let (code, _) = error_of(&mut writer, "LOAD DATA INFILE 'bad.tsv' INTO TABLE items").await;
    assert_eq!(code, 1227);
    writer
        .query_drop(format!("LOAD DATA LOCAL INFILE '{}' INTO TABLE items", tsv.display()))
        .await
        .expect("INSERT is enough for LOCAL");

    // With local_infile off, LOCAL is refused before the client is asked for anything.
    c.query_drop("SET GLOBAL local_infile = 0").await.expect("set");
    let (code, _) = error_of(&mut c, &load).await;
    assert_eq!(code, 3948);
}
