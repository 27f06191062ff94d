//! One peer connection's byte stream between the two gateways: TLS 1.3 records (rustls) on a
//! non-blocking socket, read in large pieces (one recv for many records instead of rustls's own
//! 4 KiB reads). Everything a flow exchanges with the other gateway, frames and the flow's bytes,
//! goes through here; the socket only ever sees records.
//!
//! The benchmark-only build (`--features peer-plaintext`, never shipped) runs the same protocol
//! without TLS, so the encrypted hop's cost can be measured against it in the same run.
use super::super::sys;
use super::identity::Fingerprint;
use std::io;
use std::os::fd::RawFd;

/// One recv from the socket (the records of a full 64 KiB window and some).
const RX_CHUNK: usize = 128 * 1024;
/// rustls's send queue (encrypted records not yet taken by the socket); past it `send` takes
/// less or nothing and the caller waits for the socket.
pub const SEND_QUEUE: usize = 256 * 1024;

#[derive(Debug)]
pub enum ChannelError {
    /// A record did not decrypt or broke the protocol (garbage, a forged or damaged byte), or
    /// the handshake failed (an unknown key, no certificate): the connection cannot go on.
    Tls(rustls::Error),
    /// The TCP connection ended without TLS's close_notify: a truncation, never a clean end.
    Truncated,
    /// The socket failed (reset, ...).
    Io(io::Error),
}

impl std::fmt::Display for ChannelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChannelError::Tls(e) => write!(f, "TLS: {e}"),
            ChannelError::Truncated => f.write_str("closed without TLS close_notify (truncated)"),
            ChannelError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl ChannelError {
    /// The handshake refused the other side's key (an unknown or revoked identity).
    pub fn is_unknown_identity(&self) -> bool {
        matches!(
            self,
            ChannelError::Tls(rustls::Error::InvalidCertificate(_))
                | ChannelError::Tls(rustls::Error::NoCertificatesPresented)
        )
    }
}

/// What `recv` found beside the bytes it appended.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Bytes of the flow (or of a frame) were appended.
    pub bytes: bool,
    /// The other side closed its direction cleanly (close_notify, all read).
    pub closed: bool,
}

fn would_block(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR))
}

/// The socket as rustls writes to it (vectored: one writev for many records).
struct SockWriter(RawFd);

impl io::Write for SockWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        sys::send(self.0, buf)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        // SAFETY: IoSlice is ABI-compatible with iovec; msg points at them for the call only.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = bufs.len().min(libc::UIO_MAXIOV as usize) as _;
        // SAFETY: msg is valid; MSG_NOSIGNAL: a reset peer is an error, not a SIGPIPE.
        let r = unsafe { libc::sendmsg(self.0, &msg, libc::MSG_NOSIGNAL) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub struct Channel {
    inner: Inner,
    /// Bytes read from the socket that rustls has not taken yet.
    rx: Vec<u8>,
    rx_off: usize,
    tcp_eof: bool,
    /// `close` was called: nothing more is sent after what is queued.
    closing: bool,
    /// Bytes written to the socket.
    written: u64,
}

enum Inner {
    Tls(Box<rustls::Connection>),
    #[cfg(feature = "peer-plaintext")]
    Plain(super::plain::Plain),
}

impl Channel {
    pub fn tls(mut conn: rustls::Connection) -> Channel {
        conn.set_buffer_limit(Some(SEND_QUEUE));
        Channel::of(Inner::Tls(Box::new(conn)))
    }

    #[cfg(feature = "peer-plaintext")]
    pub fn plain(p: super::plain::Plain) -> Channel {
        Channel::of(Inner::Plain(p))
    }

    fn of(inner: Inner) -> Channel {
        Channel {
            inner,
            rx: Vec::new(),
            rx_off: 0,
            tcp_eof: false,
            closing: false,
            written: 0,
        }
    }

    pub fn is_handshaking(&self) -> bool {
        match &self.inner {
            Inner::Tls(c) => c.is_handshaking(),
            #[cfg(feature = "peer-plaintext")]
            Inner::Plain(p) => p.is_handshaking(),
        }
    }

    /// The other gateway's key, once the handshake has shown it.
    pub fn peer_fingerprint(&self) -> Option<Fingerprint> {
        match &self.inner {
            Inner::Tls(c) => Fingerprint::of_cert(c.peer_certificates()?.first()?).ok(),
            #[cfg(feature = "peer-plaintext")]
            Inner::Plain(p) => p.claimed(),
        }
    }

    /// Read what the socket has, decrypt it and append the plaintext to `out` until it holds
    /// `max` bytes (or the socket has nothing more). Handshake messages are handled on the way
    /// (their answers wait in the send queue: `flush`).
    pub fn recv(
        &mut self,
        fd: RawFd,
        out: &mut Vec<u8>,
        max: usize,
    ) -> Result<Received, ChannelError> {
        let mut got = Received::default();
        loop {
            self.drain_plaintext(out, max, &mut got)?;
            if got.closed || out.len() >= max {
                return Ok(got);
            }
            if self.rx_off < self.rx.len() {
                if !self.feed()? {
                    // rustls holds plaintext we could not take yet (out is full).
                    return Ok(got);
                }
                continue;
            }
            if self.tcp_eof {
                return match &self.inner {
                    Inner::Tls(_) => Err(ChannelError::Truncated),
                    #[cfg(feature = "peer-plaintext")]
                    Inner::Plain(_) => Ok(Received {
                        closed: true,
                        ..got
                    }),
                };
            }
            self.rx.resize(RX_CHUNK, 0);
            self.rx_off = 0;
            match sys::recv_nowait(fd, &mut self.rx) {
                Ok(0) => {
                    self.rx.clear();
                    self.tcp_eof = true;
                    #[allow(irrefutable_let_patterns)] // the plaintext build has another kind
                    if let Inner::Tls(c) = &mut self.inner {
                        let _ = c.read_tls(&mut io::empty());
                        c.process_new_packets().map_err(ChannelError::Tls)?;
                    }
                }
                Ok(n) => self.rx.truncate(n),
                Err(e) => {
                    self.rx = Vec::new();
                    if would_block(&e) {
                        return Ok(got);
                    }
                    return Err(ChannelError::Io(e));
                }
            }
        }
    }

    /// Give rustls the next piece of `rx`; false when it takes nothing now.
    fn feed(&mut self) -> Result<bool, ChannelError> {
        match &mut self.inner {
            Inner::Tls(c) => {
                let n = match c.read_tls(&mut &self.rx[self.rx_off..]) {
                    Ok(n) => n,
                    // Its plaintext buffer is full: the caller drains it first.
                    Err(_) => return Ok(false),
                };
                self.rx_off += n;
                c.process_new_packets().map_err(ChannelError::Tls)?;
            }
            #[cfg(feature = "peer-plaintext")]
            Inner::Plain(p) => {
                self.rx_off += p.take(&self.rx[self.rx_off..]);
            }
        }
        if self.rx_off >= self.rx.len() {
            // Drained: no 128 KiB per idle connection.
            self.rx = Vec::new();
            self.rx_off = 0;
        }
        Ok(true)
    }

    fn drain_plaintext(
        &mut self,
        out: &mut Vec<u8>,
        max: usize,
        got: &mut Received,
    ) -> Result<(), ChannelError> {
        match &mut self.inner {
            Inner::Tls(c) => {
                use std::io::BufRead;
                while out.len() < max {
                    let mut r = c.reader();
                    match r.fill_buf() {
                        Ok([]) => {
                            got.closed = true;
                            return Ok(());
                        }
                        Ok(chunk) => {
                            let n = chunk.len().min(max - out.len());
                            // One allocation for a burst, not a doubling series of them.
                            out.reserve(max - out.len());
                            out.extend_from_slice(&chunk[..n]);
                            r.consume(n);
                            got.bytes = true;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                        Err(_) => return Err(ChannelError::Truncated),
                    }
                }
                Ok(())
            }
            #[cfg(feature = "peer-plaintext")]
            Inner::Plain(p) => {
                got.bytes |= p.drain(out, max);
                Ok(())
            }
        }
    }

    /// Queue `data` (encrypted at once); returns how much was taken (less when the send queue
    /// is full).
    pub fn send(&mut self, data: &[u8]) -> usize {
        match &mut self.inner {
            Inner::Tls(c) => {
                use std::io::Write;
                c.writer().write(data).unwrap_or(0)
            }
            #[cfg(feature = "peer-plaintext")]
            Inner::Plain(p) => p.queue(data),
        }
    }

    /// What to wait for on the socket during a handshake or between frames: the other side's
    /// bytes, and room to write when something is queued.
    pub fn interest(&self) -> u32 {
        (libc::EPOLLIN
            | if self.wants_write() {
                libc::EPOLLOUT
            } else {
                0
            }) as u32
    }

    /// Bytes waiting for the socket.
    pub fn wants_write(&self) -> bool {
        match &self.inner {
            Inner::Tls(c) => c.wants_write(),
            #[cfg(feature = "peer-plaintext")]
            Inner::Plain(p) => p.queued() > 0,
        }
    }

    /// Write queued records; Ok(true) once nothing is left.
    pub fn flush(&mut self, fd: RawFd) -> io::Result<bool> {
        match &mut self.inner {
            Inner::Tls(c) => {
                while c.wants_write() {
                    match c.write_tls(&mut SockWriter(fd)) {
                        Ok(n) => self.written += n as u64,
                        Err(e) if would_block(&e) => return Ok(false),
                        Err(e) => return Err(e),
                    }
                }
                Ok(true)
            }
            #[cfg(feature = "peer-plaintext")]
            Inner::Plain(p) => {
                let before = p.queued();
                let r = p.flush(fd);
                self.written += (before - p.queued()) as u64;
                r
            }
        }
    }

    /// Bytes written to the socket so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// End our direction: TLS close_notify (the other side reads it as a clean end of stream).
    pub fn close(&mut self) {
        match &mut self.inner {
            Inner::Tls(c) => c.send_close_notify(),
            #[cfg(feature = "peer-plaintext")]
            Inner::Plain(_) => {}
        }
        self.closing = true;
    }

    /// Whether our direction is closed and everything of it has left, so the socket can take a
    /// FIN (`shutdown(SHUT_WR)`).
    pub fn closed_and_flushed(&self) -> bool {
        self.closing && !self.wants_write()
    }

    /// The benchmark build hands its flows to the splice relay after the frames; None for TLS.
    #[cfg(feature = "peer-plaintext")]
    pub fn into_plain_leftovers(self) -> Option<(Vec<u8>, Vec<u8>)> {
        match self.inner {
            Inner::Plain(p) => Some(p.into_leftovers(self.rx, self.rx_off)),
            Inner::Tls(_) => None,
        }
    }
}
