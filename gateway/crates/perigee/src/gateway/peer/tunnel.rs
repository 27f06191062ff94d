//! One flow on the peer path: its plain socket (the terminal's client, the hub's server) relayed
//! through its peer connection's channel (TLS), both directions, with the frames that start it.
//!
//! - Terminal (`AwaitStatus`): OPEN is queued first; the client's bytes follow at once; the
//!   hub's bytes start with STATUS. STATUS(failed/refused) ends the flow (the client gets a
//!   reset, as from a refused connect). If the peer connection fails, the client gets a reset
//!   too: the hub may already have handed its bytes to the server, so nothing is ever replayed.
//! - Hub (`Hold`): the terminal's bytes after OPEN are read (bounded) but held until the
//!   connect to the server is up; then STATUS(connected) goes out ahead of the server's bytes.
//!
//! Half-close: the plain socket's FIN becomes TLS close_notify (then a FIN on the peer socket)
//! and the other side's close_notify becomes a FIN on its plain socket. A peer connection that
//! ends without close_notify is a truncation and fails the flow (`Failure::Peer`).
use super::super::sys;
use super::channel::{Channel, ChannelError};
use super::wire::{self, Status, STATUS_LEN};
use std::io;
use std::os::fd::RawFd;

/// Decrypted bytes held for a plain socket that does not take them (back-pressure past it).
const INBOUND_MAX: usize = 128 * 1024;
/// One read from the plain socket.
const PLAIN_READ: usize = 64 * 1024;
/// Turns of a pump before it yields to the other flows.
const TURNS: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Terminal: waiting for the hub's STATUS.
    AwaitStatus,
    /// Hub: the connect to the server is under way.
    Hold,
    Relay,
}

#[derive(Debug)]
pub enum Failure {
    /// The peer connection failed: reset the plain side.
    Peer(String),
    /// The plain socket failed with this errno: reset the peer connection.
    Plain(i32),
    /// Terminal: the hub answered STATUS failed or refused.
    Status(Status),
}

fn would_block(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR))
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

fn peer_failed(e: ChannelError) -> Failure {
    Failure::Peer(e.to_string())
}

pub struct Tunnel {
    ch: Channel,
    pub phase: Phase,
    /// From the peer, for the plain socket.
    inbound: Vec<u8>,
    in_off: usize,
    /// From the plain socket, not yet taken by the channel.
    outbound: Vec<u8>,
    out_off: usize,
    /// The plain socket ended: close_notify queued.
    plain_eof: bool,
    /// FIN sent on the peer socket (after close_notify left).
    peer_shut: bool,
    /// The peer's close_notify arrived.
    peer_closed: bool,
    /// FIN sent on the plain socket.
    plain_shut: bool,
    /// Bytes written to the plain socket and taken from it.
    pub to_plain: u64,
    pub from_plain: u64,
}

impl Tunnel {
    /// Terminal: a flow on a ready connection; `open` goes out ahead of the client's bytes.
    pub fn terminal(mut ch: Channel, open: &[u8]) -> Tunnel {
        let taken = ch.send(open);
        debug_assert_eq!(taken, open.len(), "a fresh connection takes a frame");
        Tunnel::new(ch, Phase::AwaitStatus, Vec::new())
    }

    /// Hub: an admitted flow; `early` are the terminal's bytes that came after OPEN.
    pub fn hub(ch: Channel, early: Vec<u8>) -> Tunnel {
        Tunnel::new(ch, Phase::Hold, early)
    }

    fn new(ch: Channel, phase: Phase, inbound: Vec<u8>) -> Tunnel {
        Tunnel {
            ch,
            phase,
            inbound,
            in_off: 0,
            outbound: Vec::new(),
            out_off: 0,
            plain_eof: false,
            peer_shut: false,
            peer_closed: false,
            plain_shut: false,
            to_plain: 0,
            from_plain: 0,
        }
    }

    /// Terminal: the first flush, OPEN and nothing else yet. Err only when its very first byte
    /// was refused (a connection the hub had closed): then nothing of the flow reached the hub
    /// and it may take the direct path.
    pub fn start(&mut self, peer: RawFd) -> io::Result<()> {
        let before = self.ch.written();
        match self.ch.flush(peer) {
            Err(e) if self.ch.written() == before => Err(e),
            _ => Ok(()),
        }
    }

    /// Hub: the server is connected; STATUS goes ahead of its bytes.
    pub fn connected(&mut self) {
        self.ch.send(&wire::status(Status::Connected));
        self.phase = Phase::Relay;
    }

    /// Hub: no flow after all: STATUS and close_notify, flushed as far as the socket takes them
    /// (a fresh connection takes a few dozen bytes).
    pub fn refuse(&mut self, peer: RawFd, s: Status) {
        self.ch.send(&wire::status(s));
        self.ch.close();
        let _ = self.ch.flush(peer);
    }

    fn inbound_pending(&self) -> usize {
        self.inbound.len() - self.in_off
    }

    fn outbound_pending(&self) -> usize {
        self.outbound.len() - self.out_off
    }

    pub fn done(&self) -> bool {
        self.plain_shut && self.peer_shut
    }

    /// Whether each direction has ended (for the flow's state).
    pub fn ended(&self) -> (bool, bool) {
        (self.plain_eof, self.peer_closed)
    }

    /// Move what can be moved both ways. Ok(true) when something moved.
    pub fn pump(&mut self, plain: RawFd, peer: RawFd) -> Result<bool, Failure> {
        let mut moved = false;
        for _ in 0..TURNS {
            let mut progress = self.pump_inbound(plain, peer)?;
            progress |= self.pump_outbound(plain)?;
            self.ch
                .flush(peer)
                .map_err(|e| Failure::Peer(e.to_string()))?;
            if self.ch.closed_and_flushed() && !self.peer_shut {
                sys::shutdown_wr(peer);
                self.peer_shut = true;
            }
            moved |= progress;
            if !progress {
                break;
            }
        }
        Ok(moved)
    }

    fn pump_inbound(&mut self, plain: RawFd, peer: RawFd) -> Result<bool, Failure> {
        let mut progress = false;
        if !self.peer_closed && self.inbound_pending() < INBOUND_MAX {
            if self.in_off > 0 {
                self.inbound.drain(..self.in_off);
                self.in_off = 0;
            }
            let r = self
                .ch
                .recv(peer, &mut self.inbound, INBOUND_MAX)
                .map_err(peer_failed)?;
            self.peer_closed = r.closed;
            progress = r.bytes || r.closed;
        }
        if self.phase == Phase::AwaitStatus {
            if self.inbound_pending() < STATUS_LEN {
                if self.peer_closed {
                    return Err(Failure::Peer("closed before the hub's status".into()));
                }
                return Ok(progress);
            }
            let at = self.in_off;
            match wire::parse_status(&self.inbound[at..at + STATUS_LEN]) {
                Ok(Status::Connected) => {
                    self.in_off += STATUS_LEN;
                    self.phase = Phase::Relay;
                }
                Ok(s) => return Err(Failure::Status(s)),
                Err(r) => {
                    return Err(Failure::Peer(format!(
                        "instead of a status: {}",
                        r.as_str()
                    )))
                }
            }
        }
        if self.phase != Phase::Relay {
            return Ok(progress);
        }
        while self.inbound_pending() > 0 {
            match sys::send(plain, &self.inbound[self.in_off..]) {
                Ok(n) => {
                    self.in_off += n;
                    self.to_plain += n as u64;
                    progress = true;
                }
                Err(e) if would_block(&e) => break,
                Err(e) => return Err(Failure::Plain(errno(&e))),
            }
        }
        if self.inbound_pending() == 0 {
            // Nothing held while the direction idles.
            self.inbound = Vec::new();
            self.in_off = 0;
            if self.peer_closed && !self.plain_shut {
                sys::shutdown_wr(plain);
                self.plain_shut = true;
            }
        }
        Ok(progress)
    }

    fn pump_outbound(&mut self, plain: RawFd) -> Result<bool, Failure> {
        if self.phase == Phase::Hold {
            return Ok(false);
        }
        let mut progress = false;
        if self.outbound_pending() == 0 && !self.plain_eof {
            self.outbound.resize(PLAIN_READ, 0);
            self.out_off = 0;
            match sys::read(plain, &mut self.outbound) {
                Ok(0) => {
                    self.outbound = Vec::new();
                    self.plain_eof = true;
                    self.ch.close();
                    progress = true;
                }
                Ok(n) => self.outbound.truncate(n),
                Err(e) => {
                    self.outbound = Vec::new();
                    if !would_block(&e) {
                        return Err(Failure::Plain(errno(&e)));
                    }
                }
            }
        }
        if self.outbound_pending() > 0 {
            let n = self.ch.send(&self.outbound[self.out_off..]);
            self.out_off += n;
            self.from_plain += n as u64;
            progress |= n > 0;
            if self.outbound_pending() == 0 {
                self.outbound = Vec::new();
                self.out_off = 0;
            }
        }
        Ok(progress)
    }

    /// The epoll interest [plain socket, peer socket].
    pub fn interest(&self) -> (u32, u32) {
        let mut plain = 0;
        if self.phase != Phase::Hold && !self.plain_eof && self.outbound_pending() == 0 {
            plain |= libc::EPOLLIN;
        }
        if self.phase == Phase::Relay && self.inbound_pending() > 0 {
            plain |= libc::EPOLLOUT;
        }
        let mut peer = 0;
        if !self.peer_closed && self.inbound_pending() < INBOUND_MAX {
            peer |= libc::EPOLLIN;
        }
        if self.ch.wants_write() || self.outbound_pending() > 0 {
            peer |= libc::EPOLLOUT;
        }
        (plain as u32, peer as u32)
    }

    /// Benchmark build: the frames are done; what is left for the splice relay, as
    /// (bytes for the plain socket, bytes for the peer socket, plain ended, peer ended).
    #[cfg(feature = "peer-plaintext")]
    pub fn into_splice(self) -> Option<(Vec<u8>, Vec<u8>, bool, bool)> {
        let mut inbound = self.inbound;
        inbound.drain(..self.in_off);
        let mut outbound = self.outbound;
        outbound.drain(..self.out_off);
        let (more_in, queued) = self.ch.into_plain_leftovers()?;
        inbound.extend_from_slice(&more_in);
        let mut to_peer = queued;
        to_peer.extend_from_slice(&outbound);
        Some((inbound, to_peer, self.plain_eof, self.peer_closed))
    }
}

#[cfg(test)]
mod tests {
    use super::super::identity::Identity;
    use super::super::tls;
    use super::*;
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    /// Two channels over a loopback connection, handshake done.
    fn channels() -> (Channel, TcpStream, Channel, TcpStream) {
        let (t, h) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        let cc = tls::client_config(&t, std::slice::from_ref(&h.fingerprint)).unwrap();
        let sc = tls::server_config(&h, [t.fingerprint.clone()]).unwrap();
        let client = rustls::ClientConnection::new(cc, tls::server_name([127, 0, 0, 1].into()));
        let server = rustls::ServerConnection::new(Arc::clone(&sc));
        let mut tc = Channel::tls(client.unwrap().into());
        let mut hc = Channel::tls(server.unwrap().into());
        let (ts, hs) = pair();
        let end = Instant::now() + Duration::from_secs(5);
        while (tc.is_handshaking() || hc.is_handshaking()) && Instant::now() < end {
            let mut sink = Vec::new();
            tc.flush(ts.as_raw_fd()).unwrap();
            hc.flush(hs.as_raw_fd()).unwrap();
            tc.recv(ts.as_raw_fd(), &mut sink, 1024).unwrap();
            hc.recv(hs.as_raw_fd(), &mut sink, 1024).unwrap();
            assert!(sink.is_empty());
        }
        tc.flush(ts.as_raw_fd()).unwrap();
        assert!(!tc.is_handshaking() && !hc.is_handshaking());
        assert_eq!(hc.peer_fingerprint(), Some(t.fingerprint.clone()));
        assert_eq!(tc.peer_fingerprint(), Some(h.fingerprint));
        (tc, ts, hc, hs)
    }

    fn run(
        a: &mut Tunnel,
        ap: (&TcpStream, &TcpStream),
        b: &mut Tunnel,
        bp: (&TcpStream, &TcpStream),
        until: impl Fn(&Tunnel, &Tunnel) -> bool,
    ) -> Result<(), Failure> {
        let end = Instant::now() + Duration::from_secs(5);
        while !until(a, b) && Instant::now() < end {
            a.pump(ap.0.as_raw_fd(), ap.1.as_raw_fd())?;
            b.pump(bp.0.as_raw_fd(), bp.1.as_raw_fd())?;
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    }

    fn read_all(s: &mut TcpStream) -> Vec<u8> {
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut v = Vec::new();
        s.read_to_end(&mut v).unwrap();
        v
    }

    #[test]
    fn a_flow_crosses_encrypted_both_ways_with_half_closes() {
        let (tc, ts, hc, hs) = channels();
        let (mut app, client) = pair(); // the client and the terminal's accepted socket
        let (server_side, mut server) = pair(); // the hub's socket to the server and the server
        let open = wire::open(&wire::Open::Resolver);
        let mut t = Tunnel::terminal(tc, &open);
        app.write_all(b"request").unwrap();
        app.shutdown(Shutdown::Write).unwrap();
        // The hub reads OPEN itself (admission), then holds the rest until connected.
        let mut got = Vec::new();
        let mut hc = hc;
        let end = Instant::now() + Duration::from_secs(5);
        while got.len() < wire::OPEN_LEN + 7 && Instant::now() < end {
            t.pump(client.as_raw_fd(), ts.as_raw_fd()).unwrap();
            hc.recv(hs.as_raw_fd(), &mut got, 1 << 20).unwrap();
        }
        assert_eq!(wire::parse_open(&got), Ok(wire::Open::Resolver));
        let mut h = Tunnel::hub(hc, got.split_off(wire::OPEN_LEN));
        h.connected();
        server.write_all(b"answer").unwrap();
        server.shutdown(Shutdown::Write).unwrap();
        run(
            &mut t,
            (&client, &ts),
            &mut h,
            (&server_side, &hs),
            |a, b| a.done() && b.done(),
        )
        .unwrap();
        assert!(t.done() && h.done());
        assert_eq!(read_all(&mut server), b"request");
        assert_eq!(read_all(&mut app), b"answer");
        assert_eq!((t.from_plain, t.to_plain), (7, 6));
        assert_eq!((h.from_plain, h.to_plain), (6, 7));
    }

    #[test]
    fn garbage_or_a_truncation_fails_the_flow_and_a_refusal_is_told() {
        // Garbage where a record belongs.
        let (tc, ts, _hc, hs) = channels();
        let (_app, client) = pair();
        let mut t = Tunnel::terminal(tc, &wire::open(&wire::Open::Resolver));
        (&hs).write_all(b"\x17\x03\x03\x00\x08garbage!").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        match t.pump(client.as_raw_fd(), ts.as_raw_fd()) {
            Err(Failure::Peer(why)) => assert!(why.contains("TLS"), "{why}"),
            other => panic!("{other:?}"),
        }
        // A FIN without close_notify.
        let (tc, ts, _hc, hs) = channels();
        let (_app, client) = pair();
        let mut t = Tunnel::terminal(tc, &wire::open(&wire::Open::Resolver));
        hs.shutdown(Shutdown::Write).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        match t.pump(client.as_raw_fd(), ts.as_raw_fd()) {
            Err(Failure::Peer(why)) => assert!(why.contains("truncated"), "{why}"),
            other => panic!("{other:?}"),
        }
        // The hub's refusal arrives as an authenticated status.
        let (tc, ts, hc, hs) = channels();
        let (_app, client) = pair();
        let mut t = Tunnel::terminal(tc, &wire::open(&wire::Open::Resolver));
        let mut h = Tunnel::hub(hc, Vec::new());
        h.refuse(hs.as_raw_fd(), Status::Refused(libc::EACCES));
        std::thread::sleep(Duration::from_millis(20));
        match t.pump(client.as_raw_fd(), ts.as_raw_fd()) {
            Err(Failure::Status(s)) => assert_eq!(s, Status::Refused(libc::EACCES)),
            other => panic!("{other:?}"),
        }
    }
}
