//! Packet framing: a 3-byte little-endian length and a sequence id before each payload;
//! payloads of 16 MiB - 1 or more continue in following packets. Incoming payloads larger
//! than `max_packet` are refused before they are buffered.
//!
//! Once [`PacketIo::buffer_reads`] is called, reads go through a 16 KiB buffer: a command
//! arriving in one segment costs one `recv` instead of three (its header, its payload, and
//! tokio's retry after a read that filled its 4 bytes, which finds the socket empty), and
//! commands a client pipelines share one. Before it (the handshake), reads
//! take exactly what they frame, so that nothing meant for a TLS handshake that follows is
//! swallowed into the buffer.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const MAX_CHUNK: usize = 0xff_ffff;
/// The read buffer's size.
const READ_BUFFER: usize = 16 * 1024;

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
    /// Bytes received and not yet framed: `inbuf[inpos..inlen]`. Empty until `buffer_reads`.
    inbuf: Box<[u8]>,
    inpos: usize,
    inlen: usize,
    buffered: bool,
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
        PacketIo {
            stream,
            seq: 0,
            out: Vec::with_capacity(16 * 1024),
            max_packet,
            flushes: 0,
            inbuf: Box::default(),
            inpos: 0,
            inlen: 0,
            buffered: false,
        }
    }

    /// Reads ahead from now on (see the module's doc). Call it once no switch of the stream
    /// (TLS) can follow.
    pub fn buffer_reads(&mut self) {
        if self.buffered {
            return;
        }
        self.buffered = true;
        self.inbuf = vec![0; READ_BUFFER].into_boxed_slice();
    }

    /// The underlying stream (to switch it to TLS between packets).
    pub fn stream_mut(&mut self) -> &mut S {
        debug_assert!(self.inpos == self.inlen, "bytes read ahead would miss the switched stream");
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
            match self.read_exact(&mut header).await {
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
            self.read_append(&mut payload, len).await.map_err(ReadError::Io)?;
            if len < MAX_CHUNK {
                return Ok(payload);
            }
        }
    }

    /// Appends the next `n` bytes to `dst`: what the buffer holds, then straight from the
    /// stream into `dst`'s spare capacity when at least a buffer's worth is missing (a large
    /// statement is not zero-filled first), else through the buffer.
    async fn read_append(&mut self, dst: &mut Vec<u8>, n: usize) -> std::io::Result<()> {
        let have = (self.inlen - self.inpos).min(n);
        dst.reserve_exact(n);
        dst.extend_from_slice(&self.inbuf[self.inpos..self.inpos + have]);
        self.inpos += have;
        let mut missing = n - have;
        if missing == 0 {
            return Ok(());
        }
        if self.buffered && missing < READ_BUFFER {
            let start = dst.len();
            dst.resize(start + missing, 0);
            return self.read_exact(&mut dst[start..]).await;
        }
        while missing > 0 {
            // `take` bounds the read to this packet; `read_buf` fills the reserved capacity
            // without initializing it.
            let got = (&mut self.stream).take(missing as u64).read_buf(dst).await?;
            if got == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            missing -= got;
        }
        Ok(())
    }

    /// Fills `dst` (a header, or the short rest of a payload: large reads go through
    /// `read_append`) from the buffer, then by refilling the buffer with whatever the stream
    /// has; unbuffered, straight from the stream.
    async fn read_exact(&mut self, dst: &mut [u8]) -> std::io::Result<()> {
        let mut done = 0;
        loop {
            let n = (self.inlen - self.inpos).min(dst.len() - done);
            dst[done..done + n].copy_from_slice(&self.inbuf[self.inpos..self.inpos + n]);
            self.inpos += n;
            done += n;
            if done == dst.len() {
                return Ok(());
            }
            // The buffer is empty here.
            (self.inpos, self.inlen) = (0, 0);
            if !self.buffered {
                self.stream.read_exact(&mut dst[done..]).await?;
                return Ok(());
            }
            self.inlen = self.stream.read(&mut self.inbuf).await?;
            if self.inlen == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
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

    /// Queues the packet `encode` appends to the output buffer: the payload is encoded in
    /// place, not built apart and copied.
    pub fn write_with(&mut self, encode: impl FnOnce(&mut Vec<u8>)) {
        let start = self.out.len();
        self.out.extend_from_slice(&[0; 4]);
        encode(&mut self.out);
        let n = self.out.len() - start - 4;
        if n >= MAX_CHUNK {
            // Split into chunks as `write` does.
            let payload = self.out.split_off(start + 4);
            self.out.truncate(start);
            self.write(&payload);
            return;
        }
        self.out[start..start + 3].copy_from_slice(&(n as u32).to_le_bytes()[..3]);
        self.out[start + 3] = self.seq;
        self.seq = self.seq.wrapping_add(1);
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{duplex, AsyncWriteExt, DuplexStream};

    fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = (payload.len() as u32).to_le_bytes()[..3].to_vec();
        p.push(seq);
        p.extend_from_slice(payload);
        p
    }

    /// A client end and the server's `PacketIo` over an in-memory pipe.
    fn connected(max_packet: usize, buffered: bool) -> (DuplexStream, PacketIo<DuplexStream>) {
        let (client, server) = duplex(1 << 16);
        let mut io = PacketIo::new(server, max_packet);
        if buffered {
            io.buffer_reads();
        }
        (client, io)
    }

    fn run<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(f)
    }

    /// Two commands sent in one write are both framed from one buffer fill, and a third that
    /// arrives in pieces waits for its last byte.
    #[test]
    fn buffered_reads_frame_pipelined_and_split_packets() {
        run(async {
            let (mut client, mut io) = connected(1 << 20, true);
            let mut both = packet(0, b"\x03select 1");
            both.extend(packet(0, b"\x0e"));
            client.write_all(&both).await.expect("write");
            assert_eq!(io.read().await.expect("read"), b"\x03select 1");
            assert_eq!(io.seq, 1);
            assert_eq!(io.read().await.expect("read"), b"\x0e");
            let third = packet(7, b"\x03select 22");
            let writer = tokio::spawn(async move {
                for byte in third {
                    client.write_all(&[byte]).await.expect("write");
                    tokio::task::yield_now().await;
                }
                client
            });
            assert_eq!(io.read().await.expect("read"), b"\x03select 22");
            assert_eq!(io.seq, 8);
            drop(writer.await.expect("writer"));
            assert!(matches!(io.read().await, Err(ReadError::Closed)));
        });
    }

    /// A payload larger than the buffer, and one split over two packets (16 MiB - 1 bytes, then
    /// the rest), come through whole; an over-long one is refused before it is read.
    #[test]
    fn buffered_reads_take_large_and_continued_payloads() {
        run(async {
            let (mut client, mut io) = connected(20 << 20, true);
            let big: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
            let huge: Vec<u8> = (0..MAX_CHUNK + 10).map(|i| (i % 251) as u8).collect();
            let (b, h) = (big.clone(), huge.clone());
            let writer = tokio::spawn(async move {
                client.write_all(&packet(0, &b)).await.expect("write");
                client.write_all(&packet(0, &h[..MAX_CHUNK])).await.expect("write");
                client.write_all(&packet(1, &h[MAX_CHUNK..])).await.expect("write");
                client.write_all(&packet(0, b"after")).await.expect("write");
                client
            });
            assert_eq!(io.read().await.expect("read"), big);
            assert_eq!(io.read().await.expect("read"), huge);
            assert_eq!(io.read().await.expect("read"), b"after");
            drop(writer.await.expect("writer"));

            let (mut client, mut io) = connected(1 << 20, true);
            let mut header = ((2u32 << 20).to_le_bytes()[..3]).to_vec();
            header.push(0);
            client.write_all(&header).await.expect("write");
            assert!(matches!(io.read().await, Err(ReadError::TooLarge)));
        });
    }

    /// A packet encoded in place is framed like one written from a buffer: its length, the
    /// next sequence number; one past the largest chunk is split as `write` splits it.
    #[test]
    fn packets_encoded_in_place_are_framed_like_written_ones() {
        let (_client, mut io) = connected(1 << 20, false);
        io.write(b"first");
        io.write_with(|out| out.extend_from_slice(b"second"));
        io.write_with(|_| {});
        let mut want = packet(0, b"first");
        want.extend(packet(1, b"second"));
        want.extend(packet(2, b""));
        assert_eq!(io.out, want);

        let (_client, mut a) = connected(1 << 20, false);
        let (_client2, mut b) = connected(1 << 20, false);
        let big = vec![7u8; MAX_CHUNK + 10];
        a.write(&big);
        b.write_with(|out| out.extend_from_slice(&big));
        assert_eq!(a.out, b.out);
        assert_eq!(a.seq, 2);
        assert_eq!(b.seq, 2);
    }

    /// A connection cut in the middle of a large payload is an I/O error, not a short payload.
    #[test]
    fn a_payload_cut_short_is_an_error() {
        run(async {
            let (mut client, mut io) = connected(1 << 20, true);
            let mut bytes = packet(0, &[5u8; 50_000]);
            bytes.truncate(30_000);
            client.write_all(&bytes).await.expect("write");
            drop(client);
            assert!(matches!(io.read().await, Err(ReadError::Io(_))));
        });
    }

    /// Before `buffer_reads`, a read takes no byte past its packet: what follows (a TLS
    /// handshake) is still in the stream.
    #[test]
    fn unbuffered_reads_stop_at_the_packet() {
        run(async {
            let (mut client, mut io) = connected(1 << 20, false);
            let mut bytes = packet(1, &[0u8; 32]);
            bytes.extend_from_slice(b"\x16\x03\x01 hello");
            client.write_all(&bytes).await.expect("write");
            assert_eq!(io.read().await.expect("read"), [0u8; 32]);
            let mut rest = [0u8; 9];
            io.stream_mut().read_exact(&mut rest).await.expect("read");
            assert_eq!(&rest, b"\x16\x03\x01 hello");
        });
    }
}
