//! Bad input over the wire: malformed, truncated, unknown and oversized packets and garbage
//! SQL get a MySQL error or a closed connection, never a crash, and never stall another
//! session.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use mysql_async::prelude::Queryable;

fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_le_bytes()[..3].to_vec();
    out.push(seq);
    out.extend_from_slice(payload);
    out
}

fn read_packet(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut h = [0u8; 4];
    s.read_exact(&mut h).ok()?;
    let n = u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize;
    let mut p = vec![0u8; n];
    s.read_exact(&mut p).ok()?;
    Some(p)
}

/// Connects and logs in as root with an empty password over a raw socket.
fn login(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let greeting = read_packet(&mut s).expect("greeting");
    assert_eq!(greeting[0], 10, "protocol version 10");
    let caps: u32 = 0x0000_0200 | 0x0000_8000 | 0x0008_0000 | 0x0000_0001; // 41, secure, plugin auth, long pw
    let mut resp = caps.to_le_bytes().to_vec();
    resp.extend_from_slice(&(1u32 << 24).to_le_bytes());
    resp.push(33);
    resp.extend_from_slice(&[0; 23]);
    resp.extend_from_slice(b"root\0");
    resp.push(0); // empty auth response
    resp.extend_from_slice(b"mysql_native_password\0");
    s.write_all(&packet(1, &resp)).expect("send");
    let ok = read_packet(&mut s).expect("auth reply");
    assert_eq!(ok[0], 0, "login OK");
    s
}

fn expect_error(s: &mut TcpStream, payload: &[u8]) -> u16 {
    s.write_all(&packet(0, payload)).expect("send");
    let p = read_packet(s).expect("reply");
    assert_eq!(p[0], 0xff, "expected an ERR packet, got {p:?}");
    u16::from_le_bytes([p[1], p[2]])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_packets_get_errors_and_never_stall_others() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(dir.path());
    let pool = server.pool(None);
    let mut good = pool.get_conn().await.expect("connect");
    let port = server.port;

    let raw = tokio::task::spawn_blocking(move || {
        let mut s = login(port);
        // Garbage SQL: 1064.
        assert_eq!(expect_error(&mut s, b"\x03SELEKT * FROMM"), 1064);
        // Unknown command byte: 1047.
        assert_eq!(expect_error(&mut s, &[0x55, 1, 2, 3]), 1047);
        // Truncated COM_STMT_EXECUTE: malformed packet 1835 (the statement id is cut short).
        assert_eq!(expect_error(&mut s, &[0x17, 1]), 1835);
        // Execute of a statement that was never prepared: 1243.
        assert_eq!(expect_error(&mut s, &[0x17, 9, 0, 0, 0, 0, 1, 0, 0, 0]), 1243);
        // Prepare, then execute with a truncated parameter block: 1835.
        s.write_all(&packet(0, b"\x16SELECT ?")).expect("send");
        let prep = read_packet(&mut s).expect("prepare ok");
        assert_eq!(prep[0], 0);
        let id = u32::from_le_bytes([prep[1], prep[2], prep[3], prep[4]]);
        let (columns, params) = (u16::from_le_bytes([prep[5], prep[6]]), u16::from_le_bytes([prep[7], prep[8]]));
        assert_eq!((columns, params), (1, 1), "SELECT ? has one parameter and one result column");
        for _ in 0..2 {
            read_packet(&mut s).expect("definition");
            read_packet(&mut s).expect("eof");
        }
        let mut exec = vec![0x17];
        exec.extend_from_slice(&id.to_le_bytes());
        exec.extend_from_slice(&[0, 1, 0, 0, 0, 0, 1, 0xfd, 0, 0xfe, 0xff]);
        assert_eq!(expect_error(&mut s, &exec), 1835);
        // The connection still works.
        s.write_all(&packet(0, b"\x0e")).expect("ping");
        assert_eq!(read_packet(&mut s).expect("pong")[0], 0);

        // A packet larger than max_allowed_packet: 1153, then the server closes.
        let mut big = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        drop(big.set_read_timeout(Some(Duration::from_secs(10))));
        let mut s2 = login(port);
        let chunk = vec![0u8; 0xff_ffff];
        for seq in 0..4u8 {
            s2.write_all(&[0xff, 0xff, 0xff, seq]).expect("chunk header");
            s2.write_all(&chunk).expect("chunk");
        }
        s2.write_all(&[0xff, 0xff, 0xff, 4]).expect("one chunk too many");
        let reply = read_packet(&mut s2).expect("error before close");
        assert_eq!(reply[0], 0xff);
        assert_eq!(u16::from_le_bytes([reply[1], reply[2]]), 1153);
        assert!(read_packet(&mut s2).is_none(), "the server closes after an oversized packet");
        // A handshake cut off in the middle, and garbage instead of a handshake.
        let _ = read_packet(&mut big);
        big.write_all(&[50, 0, 0, 1, 1, 2, 3]).expect("partial");
        drop(big);
        let mut junk = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        junk.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let _ = read_packet(&mut junk);
        junk.write_all(&packet(1, &[1, 2, 3, 4, 5])).expect("junk");
        let reply = read_packet(&mut junk);
        assert!(reply.is_none_or(|p| p[0] == 0xff), "junk handshake must be refused");
    });

    // Meanwhile the well-behaved session keeps working.
    for i in 0..20 {
        let v: i64 = good.query_first(format!("SELECT {i} + 1")).await.expect("query").expect("row");
        assert_eq!(v, i + 1);
    }
    raw.await.expect("raw client");
    let v: i64 = good.query_first("SELECT 41 + 1").await.expect("query after abuse").expect("row");
    assert_eq!(v, 42);
}
