//! A terminal flow's first phase on the peer path: from taking a warm connection until the hub
//! reports its connection to the server (STATUS). The OPEN frame and the client's first bytes go
//! out at once; those bytes are also kept (up to `REPLAY_CAP`), so if the peer connection fails
//! before STATUS the flow can start again on the direct path and replay them: nothing the
//! server could have seen is lost or sent twice, because the hub only writes to the server
//! after its connect succeeded, and only STATUS tells us that.
use super::super::sys;
use super::frame::FrameIn;
use super::wire::{self, Status, STATUS_LEN};
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Client bytes kept for a replay; reading from the client pauses at this much until STATUS.
/// A TLS ClientHello with early data, or an HTTP request with its headers, fits.
pub const REPLAY_CAP: usize = 64 * 1024;

/// What one pump (or a deadline check) found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Still waiting for STATUS.
    Waiting,
    /// STATUS(connected): the flow becomes a plain relay between client and peer connection.
    Connected,
    /// STATUS(failed): the hub's connect to the server failed with this errno.
    Refused(i32),
    /// The peer connection failed before STATUS: fall back to the direct path.
    PeerLost(&'static str),
    /// The client's socket failed (errno).
    ClientFailed(i32),
}

pub struct Handover {
    /// OPEN, then the client's bytes as they arrive.
    open: Vec<u8>,
    open_sent: usize,
    client: Vec<u8>,
    client_sent: usize,
    client_eof: bool,
    status: FrameIn<STATUS_LEN>,
    started: Instant,
    /// Until then STATUS may simply be on its way (one round trip plus margin).
    ack_deadline: Instant,
    /// When the hub has taken our bytes (its TCP acknowledged them) it is alive and working
    /// on the server's connect: we wait for STATUS until this.
    hard_deadline: Instant,
}

fn would_block(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR))
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

impl Handover {
    /// `rtt`: the peer connection's smoothed RTT; `connect_timeout`: the splitter's.
    pub fn new(open: &[u8], rtt: Duration, connect_timeout: Duration) -> Handover {
        let now = Instant::now();
        // The hub's TCP acknowledges OPEN one round trip after it left (STATUS follows once the
        // hub's short terrestrial connect is up). Half a round trip more, plus 100 ms, leaves
        // room for a queue on the link before we call a silent hub lost; falling back early
        // only costs the direct path's handshake.
        let ack_wait = (rtt * 3 / 2 + Duration::from_millis(100)).max(Duration::from_millis(300));
        Handover {
            open: open.to_vec(),
            open_sent: 0,
            client: Vec::new(),
            client_sent: 0,
            client_eof: false,
            status: FrameIn::default(),
            started: now,
            ack_deadline: now + ack_wait,
            hard_deadline: now + connect_timeout + ack_wait,
        }
    }

    pub fn wants_client(&self) -> bool {
        !self.client_eof && self.client.len() < REPLAY_CAP
    }

    pub fn has_unsent(&self) -> bool {
        self.open_sent < self.open.len() || self.client_sent < self.client.len()
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    fn send_pending(&mut self, peer: RawFd) -> io::Result<()> {
        while self.open_sent < self.open.len() {
            match sys::send(peer, &self.open[self.open_sent..]) {
                Ok(n) => self.open_sent += n,
                Err(e) if would_block(&e) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        while self.client_sent < self.client.len() {
            match sys::send(peer, &self.client[self.client_sent..]) {
                Ok(n) => self.client_sent += n,
                Err(e) if would_block(&e) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn read_client(&mut self, client: RawFd) -> io::Result<()> {
        let mut buf = [0u8; 16 * 1024];
        while self.wants_client() {
            let room = (REPLAY_CAP - self.client.len()).min(buf.len());
            match sys::read(client, &mut buf[..room]) {
                Ok(0) => self.client_eof = true,
                Ok(n) => self.client.extend_from_slice(&buf[..n]),
                Err(e) if would_block(&e) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Move bytes both ways and look for STATUS.
    pub fn pump(&mut self, client: RawFd, peer: RawFd) -> Progress {
        if let Err(e) = self.read_client(client) {
            return Progress::ClientFailed(errno(&e));
        }
        if self.send_pending(peer).is_err() {
            return Progress::PeerLost("the peer connection failed while sending");
        }
        match self.status.read(peer) {
            Ok(None) => Progress::Waiting,
            Ok(Some(f)) => match wire::parse_status(&f) {
                Ok(Status::Connected) => Progress::Connected,
                Ok(Status::Failed(e)) => Progress::Refused(e),
                Err(_) => {
                    Progress::PeerLost("the hub answered with something that is not a status")
                }
            },
            Err(_) => Progress::PeerLost("the peer connection closed before the hub's status"),
        }
    }

    /// Past the deadline with nothing heard: is the hub gone? Until `ack_deadline` we wait; then
    /// only while the hub's TCP has acknowledged everything we sent (it is alive, the server's
    /// connect is slow), up to `hard_deadline`.
    pub fn overdue(&self, peer: RawFd, now: Instant) -> Option<&'static str> {
        if now < self.ack_deadline {
            return None;
        }
        if now >= self.hard_deadline {
            return Some("no status from the hub within the connect timeout");
        }
        let acked = !self.has_unsent() && sys::tcp_unacked(peer) == Some(0);
        (!acked).then_some("the hub did not acknowledge the flow's first bytes in time")
    }

    /// After STATUS(connected): the client bytes not sent yet, and whether the client ended.
    pub fn into_unsent(self) -> (Vec<u8>, bool) {
        let mut c = self.client;
        c.drain(..self.client_sent);
        (c, self.client_eof)
    }

    /// For the direct path: every client byte read so far, and whether the client ended.
    pub fn into_replay(self) -> (Vec<u8>, bool) {
        (self.client, self.client_eof)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    fn settle() {
        std::thread::sleep(Duration::from_millis(50));
    }

    #[test]
    fn open_and_client_bytes_go_out_at_once_and_are_kept_for_a_replay() {
        let (mut app, client) = pair(); // app -> (client socket at the gateway)
        let (peer, mut hub) = pair(); // (peer connection) -> hub
        app.write_all(b"hello").unwrap();
        app.shutdown(Shutdown::Write).unwrap();
        settle();
        let mut h = Handover::new(b"OPEN", Duration::from_millis(600), Duration::from_secs(10));
        assert_eq!(
            h.pump(client.as_raw_fd(), peer.as_raw_fd()),
            Progress::Waiting
        );
        settle();
        let mut got = [0u8; 9];
        hub.set_nonblocking(false).unwrap();
        hub.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"OPENhello");
        assert!(!h.wants_client(), "client EOF seen");
        let (replay, eof) = h.into_replay();
        assert_eq!((replay.as_slice(), eof), (&b"hello"[..], true));
    }

    #[test]
    fn status_ends_the_phase_and_leaves_the_servers_bytes_in_the_socket() {
        let (_app, client) = pair();
        let (peer, mut hub) = pair();
        let mut h = Handover::new(b"OPEN", Duration::from_millis(600), Duration::from_secs(10));
        assert_eq!(
            h.pump(client.as_raw_fd(), peer.as_raw_fd()),
            Progress::Waiting
        );
        hub.write_all(&wire::status(Status::Connected)).unwrap();
        hub.write_all(b"220 banner").unwrap();
        settle();
        assert_eq!(
            h.pump(client.as_raw_fd(), peer.as_raw_fd()),
            Progress::Connected
        );
        let mut rest = [0u8; 32];
        let n = sys::recv_nowait(peer.as_raw_fd(), &mut rest).unwrap();
        assert_eq!(&rest[..n], b"220 banner");
    }

    #[test]
    fn refusal_and_loss_are_told_apart() {
        let (_app, client) = pair();
        let (peer, mut hub) = pair();
        let mut h = Handover::new(b"OPEN", Duration::from_millis(600), Duration::from_secs(10));
        hub.write_all(&wire::status(Status::Failed(libc::ECONNREFUSED)))
            .unwrap();
        settle();
        assert_eq!(
            h.pump(client.as_raw_fd(), peer.as_raw_fd()),
            Progress::Refused(libc::ECONNREFUSED)
        );
        let (_app, client) = pair();
        let (peer, hub) = pair();
        let mut h = Handover::new(b"OPEN", Duration::from_millis(600), Duration::from_secs(10));
        drop(hub);
        settle();
        assert!(matches!(
            h.pump(client.as_raw_fd(), peer.as_raw_fd()),
            Progress::PeerLost(_)
        ));
    }

    #[test]
    fn silence_is_loss_only_while_our_bytes_are_unacknowledged() {
        let (_app, client) = pair();
        let (peer, _hub) = pair();
        let mut h = Handover::new(b"OPEN", Duration::ZERO, Duration::from_secs(10));
        h.pump(client.as_raw_fd(), peer.as_raw_fd());
        settle();
        let now = Instant::now();
        assert_eq!(
            h.overdue(peer.as_raw_fd(), now),
            None,
            "before the ack deadline"
        );
        // Loopback acknowledged everything at once: the hub is alive, keep waiting.
        let later = now + Duration::from_secs(1);
        assert_eq!(h.overdue(peer.as_raw_fd(), later), None);
        assert!(h
            .overdue(peer.as_raw_fd(), later + Duration::from_secs(10))
            .is_some());
    }
}
