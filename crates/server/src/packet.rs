//! Packet framing: a 3-byte little-endian length and a sequence id before each payload;
//! payloads of 16 MiB - 1 or more continue in following packets. Incoming payloads larger
//! than `max_packet` are refused before they are buffered.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const MAX_CHUNK: usize = 0xff_ffff;

/// Why reading a packet stopped.
#[derive(Debug)]
pub enum ReadError {
    /// The peer closed the connection (cleanly, between packets).
    Closed,
    /// The payload exceeds `max_allowed_packet`.
    TooLarge,
    /// A socket error or a connection cut mid-packet.
    Io(std::io::Error),
}

/// Reads and writes packets on one connection.
pub struct PacketIo<S> {
    stream: S,
    /// The next sequence id.
    pub seq: u8,
    out: Vec<u8>,
    max_packet: usize,
    /// Flushes so far (a mark from before the last one cannot be rewound to).
    flushes: u64,
}

/// Where the queued output stood, for [`PacketIo::rewind`].
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    len: usize,
    seq: u8,
    flushes: u64,
}

impl<S: AsyncRead + AsyncWrite + Unpin> PacketIo<S> {
    /// Wraps a stream.
    pub fn new(stream: S, max_packet: usize) -> PacketIo<S> {
        PacketIo { stream, seq: 0, out: Vec::with_capacity(16 * 1024), max_packet, flushes: 0 }
    }

    /// The underlying stream (to switch it to TLS between packets).
    pub fn stream_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// The underlying stream.
    pub fn stream(&self) -> &S {
        &self.stream
    }

    /// Reads one (possibly multi-packet) payload.
    pub async fn read(&mut self) -> Result<Vec<u8>, ReadError> {
        let mut payload = Vec::new();
        let mut first = true;
        loop {
            let mut header = [0u8; 4];
            match self.stream.read_exact(&mut header).await {
                Ok(_) => {}
                Err(e) if first && e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(ReadError::Closed),
                Err(e) => return Err(ReadError::Io(e)),
            }
            first = false;
            let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
            self.seq = header[3].wrapping_add(1);
            if payload.len() + len > self.max_packet {
                return Err(ReadError::TooLarge);
            }
            let start = payload.len();
            payload.resize(start + len, 0);
            self.stream.read_exact(&mut payload[start..]).await.map_err(ReadError::Io)?;
            if len < MAX_CHUNK {
                return Ok(payload);
            }
        }
    }

    /// Queues one payload (split into packets as needed).
    pub fn write(&mut self, payload: &[u8]) {
        let mut rest = payload;
        loop {
            let n = rest.len().min(MAX_CHUNK);
            self.out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
            self.out.push(self.seq);
            self.seq = self.seq.wrapping_add(1);
            self.out.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            if n < MAX_CHUNK {
                break;
            }
        }
    }

    /// Where the queued output stands, to [`rewind`](Self::rewind) to.
    pub fn mark(&self) -> Mark {
        Mark { len: self.out.len(), seq: self.seq, flushes: self.flushes }
    }

    /// Drops what was queued after `mark` (a reply that could not be finished); false, and
    /// nothing dropped, when part of it has been sent already (a streamed result set).
    pub fn rewind(&mut self, mark: Mark) -> bool {
        if self.flushes != mark.flushes {
            return false;
        }
        self.out.truncate(mark.len);
        self.seq = mark.seq;
        true
    }

    /// Bytes queued and not yet sent.
    pub fn pending(&self) -> usize {
        self.out.len()
    }

    /// Sends everything queued.
    pub async fn flush(&mut self) -> std::io::Result<()> {
        self.flushes += 1;
        if !self.out.is_empty() {
            self.stream.write_all(&self.out).await?;
            self.out.clear();
        }
        self.stream.flush().await
    }
}
