//! One client connection: handshake and authentication, then a loop reading commands and
//! writing results. A malformed command gets an ERR packet and the connection goes on; an
//! oversized packet or a broken handshake closes it, and so does `KILL` from another
//! connection. Closing rolls back an open transaction.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures_util::FutureExt;

use strata_common::{Code, Error};
use strata_sql::result::Column;
use strata_sql::{QueryResult, Session};
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::{debug, error};

use crate::auth;
use crate::codec::{self, caps, status, Command};
use crate::packet::{PacketIo, ReadError};
use crate::server::ServerOptions;
use crate::tls::Stream;

struct Stmt {
    params: usize,
    types: Vec<(u8, bool)>,
    long: Vec<Option<Vec<u8>>>,
    /// COM_STMT_SEND_LONG_DATA sent more than max_allowed_packet for one parameter: the
    /// data was dropped and the next execution fails (1153).
    long_overflow: bool,
}

/// A logged-in session's place under `max_connections`, given back when dropped.
struct SessionSlot(Arc<AtomicUsize>);

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A client connection.
pub struct Connection<S> {
    io: PacketIo<Stream<S>>,
    session: Session,
    opts: Arc<ServerOptions>,
    caps: u32,
    stmts: HashMap<u32, Stmt>,
    sessions: Option<Arc<AtomicUsize>>,
    slot: Option<SessionSlot>,
    /// The packet stream is out of step (a LOAD DATA LOCAL transfer failed midway): the
    /// connection closes after the current reply.
    broken: bool,
}

/// Why a connection ended abnormally.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// Socket failure.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The handshake failed.
    #[error("handshake: {0}")]
    Handshake(String),
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Connection<S> {
    /// Wraps an accepted stream.
    pub fn new(stream: S, session: Session, opts: Arc<ServerOptions>) -> Connection<S> {
        let max = opts.max_packet;
        Connection {
            io: PacketIo::new(Stream::Plain(stream), max),
            session,
            opts,
            caps: 0,
            stmts: HashMap::new(),
            sessions: None,
            slot: None,
            broken: false,
        }
    }

    /// Counts this connection, once logged in, in `sessions` against `max_connections`.
    pub fn with_session_count(mut self, sessions: Arc<AtomicUsize>) -> Connection<S> {
        self.sessions = Some(sessions);
        self
    }

    fn status(&self) -> u16 {
        let mut s = 0;
        if self.session.in_transaction() {
            s |= status::IN_TRANS;
        }
        if self.session.autocommit() {
            s |= status::AUTOCOMMIT;
        }
        s
    }

    fn send_error(&mut self, e: &Error) {
        let code = e.code();
        let msg = e.to_string();
        self.io.write(&codec::err_packet(code.number(), code.sqlstate(), &msg));
    }

    /// Runs the connection to its end.
    pub async fn run(mut self) -> Result<(), ConnError> {
        let r = self.serve().await;
        let _ = self.session.rollback().await;
        r
    }

    async fn serve(&mut self) -> Result<(), ConnError> {
        // A client that stalls during the handshake holds a task and a socket: it gets
        // connect_timeout to finish, as in MySQL.
        // The variable's value now (SET GLOBAL changes it), else the server's option.
        let connect_timeout = match self.session.global_var("connect_timeout").and_then(|v| v.as_i64()) {
            Some(s) if s > 0 => std::time::Duration::from_secs(s as u64),
            _ => self.opts.connect_timeout,
        };
        match tokio::time::timeout(connect_timeout, self.handshake()).await {
            Ok(r) => r?,
            Err(_) => return Err(ConnError::Handshake("connect_timeout expired".into())),
        }
        let interrupt = self.session.interrupt();
        // Interactive clients (the mysql CLI) idle for interactive_timeout, others for
        // wait_timeout, as in MySQL: the session's wait_timeout starts as that value.
        if self.caps & caps::INTERACTIVE != 0 {
            self.session.start_interactive();
        }
        // The idle timer outlives the commands: set up again for each one, its registration
        // with tokio's timer wheel and removal cost more than the rest of a point select's
        // wait for its next command. It stays set while it would go off no later than the
        // wait's deadline, and going off early it is set to the deadline then (once per
        // wait_timeout on a busy connection).
        let idle_timer = tokio::time::sleep(self.session.wait_timeout());
        tokio::pin!(idle_timer);
        loop {
            // An idle connection closes as soon as another connection kills it, or after
            // wait_timeout seconds without a command (its open transaction rolls back then,
            // releasing its locks). MySQL 8 says why before closing.
            let deadline = tokio::time::Instant::now() + self.session.wait_timeout();
            if idle_timer.deadline() > deadline {
                idle_timer.as_mut().reset(deadline);
            }
            let read = {
                let read = self.io.read();
                tokio::pin!(read);
                loop {
                    tokio::select! {
                        r = &mut read => break Some(r),
                        _ = interrupt.until_connection_killed() => return Ok(()),
                        _ = &mut idle_timer => {
                            if tokio::time::Instant::now() >= deadline {
                                break None;
                            }
                            idle_timer.as_mut().reset(deadline);
                        }
                    }
                }
            };
            let Some(read) = read else {
                self.io.seq = 0;
                self.send_error(&Error::user(
                    Code::ClientInteractionTimeout,
                    "The client was disconnected by the server because of inactivity. See wait_timeout and \
                     interactive_timeout for configuring this behavior.",
                ));
                let _ = self.io.flush().await;
                return Ok(());
            };
            let payload = match read {
                Ok(p) => p,
                Err(ReadError::Closed) => return Ok(()),
                Err(ReadError::TooLarge) => {
                    self.send_error(&Error::user(
                        Code::NetPacketTooLarge,
                        "Got a packet bigger than 'max_allowed_packet' bytes",
                    ));
                    self.io.flush().await?;
                    return Ok(());
                }
                Err(ReadError::Io(e)) => return Err(e.into()),
            };
            let cmd = match codec::parse_command(&payload) {
                Ok(c) => c,
                Err(e) => {
                    self.send_error(&e);
                    self.io.flush().await?;
                    continue;
                }
            };
            if cmd == Command::Quit {
                return Ok(());
            }
            // Panics inside a statement are caught by the session (which rolls back its
            // transaction); this catches the rest, so a bug costs one command an error,
            // not the connection or the server.
            let mark = self.io.mark();
            if let Err(panic) = AssertUnwindSafe(self.dispatch(cmd)).catch_unwind().await {
                // A reply partly sent (a streamed result) ends with the error instead.
                self.io.rewind(mark);
                let e = strata_sql::session::panicked(&*panic);
                error!(conn = self.session.conn_id, error = %e, "command panicked");
                let _ = self.session.rollback().await;
                self.send_error(&e);
            }
            self.io.flush().await?;
            if interrupt.connection_killed() || self.broken {
                return Ok(());
            }
        }
    }

    async fn handshake(&mut self) -> Result<(), ConnError> {
        let scramble = auth::scramble();
        let mut p = vec![0x0a];
        p.extend_from_slice(strata_sql::VERSION.as_bytes());
        p.push(0);
        p.extend_from_slice(&self.session.conn_id.to_le_bytes());
        p.extend_from_slice(&scramble[..8]);
        p.push(0);
        let offered = if self.opts.tls.is_some() { caps::SERVER | caps::SSL } else { caps::SERVER };
        p.extend_from_slice(&(offered as u16).to_le_bytes());
        p.push(46); // utf8mb4_bin
        p.extend_from_slice(&status::AUTOCOMMIT.to_le_bytes());
        p.extend_from_slice(&((offered >> 16) as u16).to_le_bytes());
        p.push(21);
        p.extend_from_slice(&[0; 10]);
        p.extend_from_slice(&scramble[8..]);
        p.push(0);
        p.extend_from_slice(auth::NATIVE.as_bytes());
        p.push(0);
        self.io.seq = 0;
        self.io.write(&p);
        self.io.flush().await?;
        let mut payload = match self.io.read().await {
            Ok(p) => p,
            Err(ReadError::Io(e)) => return Err(e.into()),
            Err(_) => return Err(ConnError::Handshake("client went away".into())),
        };
        // An SSLRequest: the first 32 bytes of a handshake response, CLIENT_SSL set. The
        // rest of the handshake happens inside TLS.
        if payload.len() == 32 && payload[..4].try_into().map(u32::from_le_bytes).is_ok_and(|c| c & caps::SSL != 0) {
            let Some(tls) = self.opts.tls.clone() else {
                self.send_error(&Error::unsupported("TLS (the server has no --ssl-cert / --ssl-key)"));
                self.io.flush().await?;
                return Err(ConnError::Handshake("client asked for TLS".into()));
            };
            self.io.stream_mut().start_tls(&tls).await?;
            if let Some((version, cipher)) = self.io.stream().tls_info() {
                self.session.set_tls(version, cipher);
            }
            payload = match self.io.read().await {
                Ok(p) => p,
                Err(ReadError::Io(e)) => return Err(e.into()),
                Err(_) => return Err(ConnError::Handshake("client went away after TLS".into())),
            };
        }
        // The stream stays as it is from here on.
        self.io.buffer_reads();
        let resp = match codec::parse_handshake_response(&payload) {
            Ok(r) => r,
            Err(e) => {
                self.send_error(&e);
                self.io.flush().await?;
                return Err(ConnError::Handshake(e.to_string()));
            }
        };
        let encrypted = matches!(self.io.stream(), Stream::Tls(_));
        if self.opts.require_secure_transport && !encrypted {
            self.send_error(&Error::user(
                Code::SecureTransportRequired,
                "Connections using insecure transport are prohibited while --require_secure_transport=ON.",
            ));
            self.io.flush().await?;
            return Err(ConnError::Handshake("insecure transport refused".into()));
        }
        self.caps = resp.caps & caps::SERVER;
        let mut plugin = resp.plugin.clone().unwrap_or_else(|| auth::NATIVE.to_string());
        let mut response = resp.auth.clone();
        if plugin != auth::NATIVE && plugin != auth::CACHING_SHA2 {
            // Ask the client to switch to mysql_native_password.
            let mut sw = vec![0xfe];
            sw.extend_from_slice(auth::NATIVE.as_bytes());
            sw.push(0);
            sw.extend_from_slice(&scramble);
            sw.push(0);
            self.io.write(&sw);
            self.io.flush().await?;
            response = match self.io.read().await {
                Ok(p) => p,
                Err(ReadError::Io(e)) => return Err(e.into()),
                Err(_) => return Err(ConnError::Handshake("client went away during auth switch".into())),
            };
            plugin = auth::NATIVE.to_string();
        }
        let has_password = match self.session.authenticate(&resp.user, &plugin, &scramble, &response) {
            Ok(h) => h,
            Err(e) => {
                self.send_error(&e);
                self.io.flush().await?;
                return Err(ConnError::Handshake("access denied".into()));
            }
        };
        if self.session.requires_tls() && !encrypted {
            let e = Error::user(
                Code::AccessDenied,
                format!(
                    "Access denied for user '{}'@'{}' (using password: YES)",
                    resp.user,
                    self.session.client_host()
                ),
            );
            self.send_error(&e);
            self.io.flush().await?;
            return Err(ConnError::Handshake("account requires TLS".into()));
        }
        if let Some(sessions) = &self.sessions {
            let limit = match self.session.global_var("max_connections").and_then(|v| v.as_i64()) {
                Some(n) if n > 0 => n as usize,
                _ => self.opts.max_connections,
            };
            if sessions.fetch_add(1, Ordering::Relaxed) >= limit {
                sessions.fetch_sub(1, Ordering::Relaxed);
                self.send_error(&Error::user(Code::TooManyConnections, "Too many connections"));
                self.io.flush().await?;
                return Err(ConnError::Handshake("too many connections".into()));
            }
            self.slot = Some(SessionSlot(sessions.clone()));
        }
        if plugin == auth::CACHING_SHA2 && has_password {
            self.io.write(&[0x01, 0x03]); // fast authentication succeeded
        }
        if let Some(db) = &resp.db {
            if let Err(e) = self.session.use_database(db) {
                self.send_error(&e);
                self.io.flush().await?;
                return Err(ConnError::Handshake(e.to_string()));
            }
        }
        let ok = codec::ok_packet(0, 0, self.status(), 0, "");
        self.io.write(&ok);
        self.io.flush().await?;
        Ok(())
    }

    fn send_result(&mut self, r: QueryResult, more: bool, binary: bool) {
        let more_flag = if more { status::MORE_RESULTS } else { 0 };
        match r {
            QueryResult::Ok { affected, matched, last_insert_id, info, .. } => {
                let n = if self.caps & caps::FOUND_ROWS != 0 { matched } else { affected };
                let ok =
                    codec::ok_packet(n, last_insert_id, self.status() | more_flag, self.session.warning_count(), &info);
                self.io.write(&ok);
            }
            QueryResult::Streamed { .. } => {
                let eof = codec::eof_packet(self.status() | more_flag, self.session.warning_count());
                self.io.write(&eof);
            }
            QueryResult::Rows { columns, rows } => {
                let status = self.status();
                write_columns(&mut self.io, &column_packets(&columns), status);
                for row in &rows {
                    write_row(&mut self.io, &columns, row, binary);
                }
                let eof = codec::eof_packet(self.status() | more_flag, self.session.warning_count());
                self.io.write(&eof);
            }
        }
    }

    async fn dispatch(&mut self, cmd: Command<'_>) {
        match cmd {
            Command::Quit => {}
            Command::Ping => {
                let ok = codec::ok_packet(0, 0, self.status(), 0, "");
                self.io.write(&ok);
            }
            Command::InitDb(db) => {
                let db = String::from_utf8_lossy(db).into_owned();
                match self.session.use_database(&db) {
                    Ok(()) => {
                        let ok = codec::ok_packet(0, 0, self.status(), 0, "");
                        self.io.write(&ok);
                    }
                    Err(e) => self.send_error(&e),
                }
            }
            Command::Query(q) => {
                let sql = utf8_text(q);
                debug!(conn = self.session.conn_id, %sql, "query");
                let allow_multi = self.caps & caps::MULTI_STATEMENTS != 0;
                let (status, timeout) = (self.status(), self.session.write_timeout());
                let mut files = ClientSide {
                    allowed: self.caps & caps::LOCAL_FILES != 0,
                    ..ClientSide::new(&mut self.io, false, status, timeout)
                };
                let results = self.session.execute_text_with(&sql, allow_multi, &mut files).await;
                // A load that failed before the client finished sending: the rest of the file
                // is read and dropped, so the reply follows the client's last packet.
                if files.transfer == Transfer::Sending {
                    loop {
                        match files.io.read().await {
                            Ok(p) if p.is_empty() => break,
                            Ok(_) => {}
                            Err(_) => {
                                files.transfer = Transfer::Broken;
                                break;
                            }
                        }
                    }
                }
                self.broken = files.transfer == Transfer::Broken || files.write_failed;
                let n = results.len();
                for (i, r) in results.into_iter().enumerate() {
                    match r {
                        Ok(r) => self.send_result(r, i + 1 < n, false),
                        Err(e) => {
                            self.send_error(&e);
                            break;
                        }
                    }
                }
            }
            Command::FieldList(table) => {
                let t = String::from_utf8_lossy(table).into_owned();
                match self.session.field_list(&t) {
                    Ok(cols) => {
                        for c in &cols {
                            self.io.write(&codec::column_def(c, true));
                        }
                        self.io.write(&codec::eof_packet(self.status(), 0));
                    }
                    Err(e) => self.send_error(&e),
                }
            }
            Command::Statistics => {
                self.io.write(b"Uptime: 1  Threads: 1  Questions: 0  Slow queries: 0  Opens: 0  Open tables: 0")
            }
            Command::Prepare(q) => {
                let sql = utf8_text(q);
                debug!(conn = self.session.conn_id, %sql, "prepare");
                match self.session.prepare(&sql).await {
                    Ok((id, params, columns)) => {
                        self.stmts.insert(
                            id,
                            Stmt { params, types: Vec::new(), long: vec![None; params], long_overflow: false },
                        );
                        let mut p = vec![0x00];
                        p.extend_from_slice(&id.to_le_bytes());
                        p.extend_from_slice(&(columns.len() as u16).to_le_bytes());
                        p.extend_from_slice(&(params as u16).to_le_bytes());
                        p.push(0);
                        p.extend_from_slice(&0u16.to_le_bytes());
                        self.io.write(&p);
                        if params > 0 {
                            let c = Column::text("?");
                            for _ in 0..params {
                                self.io.write(&codec::column_def(&c, false));
                            }
                            self.io.write(&codec::eof_packet(self.status(), 0));
                        }
                        if !columns.is_empty() {
                            for c in &columns {
                                self.io.write(&codec::column_def(c, false));
                            }
                            self.io.write(&codec::eof_packet(self.status(), 0));
                        }
                    }
                    Err(e) => self.send_error(&e),
                }
            }
            Command::Execute(id, body) => {
                let Some(stmt) = self.stmts.get_mut(&id) else {
                    self.send_error(&Error::user(
                        Code::UnknownStmtHandler,
                        format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_execute"),
                    ));
                    return;
                };
                if std::mem::take(&mut stmt.long_overflow) {
                    stmt.long.iter_mut().for_each(|l| *l = None);
                    self.send_error(&Error::user(
                        Code::NetPacketTooLarge,
                        "Parameter of prepared statement which is set through mysql_send_long_data() is longer than \
                         'max_allowed_packet' bytes",
                    ));
                    return;
                }
                let params = match codec::parse_execute_params(body, stmt.params, &mut stmt.types, &mut stmt.long) {
                    Ok(p) => p,
                    Err(e) => {
                        self.send_error(&e);
                        return;
                    }
                };
                let started = std::time::Instant::now();
                let (status, timeout) = (self.status(), self.session.write_timeout());
                let mut client = ClientSide::new(&mut self.io, true, status, timeout);
                let r = self.session.execute_prepared_with(id, &params, Some(&mut client)).await;
                self.broken = client.write_failed;
                debug!(
                    conn = self.session.conn_id,
                    stmt = id,
                    elapsed_us = started.elapsed().as_micros() as u64,
                    "execute"
                );
                match r {
                    Ok(r) => self.send_result(r, false, true),
                    Err(e) => self.send_error(&e),
                }
            }
            Command::LongData(id, param, data) => {
                // No response is sent for COM_STMT_SEND_LONG_DATA.
                // Bounded by max_allowed_packet per parameter, like any other value.
                let max = self.opts.max_packet;
                if let Some(stmt) = self.stmts.get_mut(&id) {
                    if let Some(slot) = stmt.long.get_mut(param as usize) {
                        let buf = slot.get_or_insert_with(Vec::new);
                        if buf.len() + data.len() > max {
                            *slot = None;
                            stmt.long_overflow = true;
                        } else {
                            buf.extend_from_slice(data);
                        }
                    }
                }
            }
            Command::Close(id) => {
                self.stmts.remove(&id);
                self.session.close_prepared(id);
            }
            Command::Reset(id) => match self.stmts.get_mut(&id) {
                Some(stmt) => {
                    stmt.long.iter_mut().for_each(|l| *l = None);
                    stmt.long_overflow = false;
                    let ok = codec::ok_packet(0, 0, self.status(), 0, "");
                    self.io.write(&ok);
                }
                None => self.send_error(&Error::user(
                    Code::UnknownStmtHandler,
                    format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_reset"),
                )),
            },
            Command::SetOption(opt) => {
                if opt == 0 {
                    self.caps |= caps::MULTI_STATEMENTS;
                } else {
                    self.caps &= !caps::MULTI_STATEMENTS;
                }
                self.io.write(&codec::eof_packet(self.status(), 0));
            }
            Command::ResetConnection => {
                self.session.reset_connection().await;
                self.stmts.clear();
                let ok = codec::ok_packet(0, 0, self.status(), 0, "");
                self.io.write(&ok);
            }
            Command::Unknown(c) => self.send_error(&Error::user(Code::UnknownCom, format!("Unknown command {c:#04x}"))),
        }
    }
}

/// Where a LOAD DATA LOCAL transfer stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transfer {
    /// No file asked for.
    Idle,
    /// The client is sending the file.
    Sending,
    /// The client sent its last (empty) packet.
    Done,
    /// The transfer failed; the packet stream cannot be trusted.
    Broken,
}

/// A result set's head but its closing EOF, as packets: the column count, then the
/// definitions.
fn column_packets(columns: &[Column]) -> Vec<Vec<u8>> {
    let mut count = Vec::new();
    codec::put_lenenc(&mut count, columns.len() as u64);
    std::iter::once(count).chain(columns.iter().map(|c| codec::column_def(c, false))).collect()
}

/// Queues a result set's head: the column count, the definitions and the EOF after them.
fn write_columns<S: AsyncRead + AsyncWrite + Unpin>(io: &mut PacketIo<S>, packets: &[Vec<u8>], status: u16) {
    for p in packets {
        io.write(p);
    }
    io.write(&codec::eof_packet(status, 0));
}

/// Queues one row of a result set, in the binary protocol or as text.
fn write_row<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut PacketIo<S>,
    columns: &[Column],
    row: &[strata_common::Value],
    binary: bool,
) {
    if binary {
        io.write_with(|out| codec::binary_row_into(out, columns, row));
    } else {
        io.write_with(|out| codec::text_row_into(out, columns, row));
    }
}

/// Queued result rows are sent once they pass this many bytes.
const STREAM_FLUSH_BYTES: usize = 64 * 1024;

/// The client as a statement reaches it. Files for LOAD DATA LOCAL INFILE: the server
/// names the file in a 0xFB packet and the client answers with its content in packets,
/// ending with an empty one. Result sets: written as they are produced, sent whenever
/// [`STREAM_FLUSH_BYTES`] are queued, each send within net_write_timeout.
struct ClientSide<'a, S> {
    io: &'a mut PacketIo<Stream<S>>,
    /// The client said it can send files (CLIENT_LOCAL_FILES).
    allowed: bool,
    transfer: Transfer,
    /// Rows in the binary protocol (COM_STMT_EXECUTE), else text.
    binary: bool,
    /// Server status for the packet that ends the column definitions.
    status: u16,
    write_timeout: std::time::Duration,
    /// A send failed or timed out: the client has part of a reply, so the connection ends.
    write_failed: bool,
}

impl<'a, S: AsyncRead + AsyncWrite + Unpin + Send> ClientSide<'a, S> {
    fn new(io: &'a mut PacketIo<Stream<S>>, binary: bool, status: u16, write_timeout: std::time::Duration) -> Self {
        ClientSide { io, allowed: false, transfer: Transfer::Idle, binary, status, write_timeout, write_failed: false }
    }

    /// Sends the queued packets if there are enough of them.
    async fn send_some(&mut self) -> strata_common::Result<()> {
        if self.io.pending() < STREAM_FLUSH_BYTES {
            return Ok(());
        }
        let err = match tokio::time::timeout(self.write_timeout, self.io.flush()).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => {
                Error::user(Code::NetErrorOnWrite, format!("Got an error writing communication packets: {e}"))
            }
            Err(_) => Error::user(Code::NetWriteInterrupted, "Got timeout writing communication packets"),
        };
        self.write_failed = true;
        Err(err)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> strata_sql::result::ClientPort for ClientSide<'_, S> {
    fn files(&mut self) -> &mut dyn strata_sql::load::FileSource {
        self
    }

    fn results(&mut self) -> Option<&mut dyn strata_sql::result::ResultSink> {
        Some(self)
    }
}

#[async_trait::async_trait]
impl<S: AsyncRead + AsyncWrite + Unpin + Send> strata_sql::result::ResultSink for ClientSide<'_, S> {
    async fn columns(&mut self, columns: &strata_sql::result::ResultColumns) -> strata_common::Result<()> {
        let wire = columns.wire.get_or_init(|| column_packets(&columns.columns));
        write_columns(self.io, wire, self.status);
        self.send_some().await
    }

    async fn rows(&mut self, columns: &[Column], rows: &[strata_sql::expr::Row]) -> strata_common::Result<()> {
        for row in rows {
            write_row(self.io, columns, row, self.binary);
            self.send_some().await?;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl<S: AsyncRead + AsyncWrite + Unpin + Send> strata_sql::load::FileSource for ClientSide<'_, S> {
    async fn open(&mut self, name: &str) -> strata_common::Result<()> {
        if !self.allowed {
            return Err(strata_sql::load::local_disabled());
        }
        let mut p = vec![0xfb];
        p.extend_from_slice(name.as_bytes());
        self.io.write(&p);
        self.transfer = Transfer::Sending;
        if let Err(e) = self.io.flush().await {
            self.transfer = Transfer::Broken;
            return Err(Error::internal(format!("asking the client for the file: {e}")));
        }
        Ok(())
    }

    async fn read(&mut self) -> strata_common::Result<Option<Vec<u8>>> {
        if self.transfer != Transfer::Sending {
            return Ok(None);
        }
        match self.io.read().await {
            Ok(p) if p.is_empty() => {
                self.transfer = Transfer::Done;
                Ok(None)
            }
            Ok(p) => Ok(Some(p)),
            Err(ReadError::TooLarge) => {
                self.transfer = Transfer::Broken;
                Err(Error::user(Code::NetPacketTooLarge, "Got a packet bigger than 'max_allowed_packet' bytes"))
            }
            Err(ReadError::Closed) | Err(ReadError::Io(_)) => {
                self.transfer = Transfer::Broken;
                Err(Error::internal("the client stopped sending the file"))
            }
        }
    }
}

/// A statement's text from the wire. Valid UTF-8 (nearly always) is checked by
/// `str::from_utf8`, whose ASCII fast path is several times quicker than the lossy
/// conversion's byte-by-byte walk (1.75% of the server's CPU loading sysbench's 4×100k
/// rows in 500 KB INSERTs); anything else is converted lossily.
fn utf8_text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}
