//! The kernel's socket table over NETLINK_SOCK_DIAG (linux/inet_diag.h): every TCP socket of
//! this network namespace with its addresses, cookie and inode, TCP_INFO for chosen ones, and
//! the final TCP_INFO of sockets as they are destroyed. Squid's connections are read this way:
//! its sockets are not ours to call getsockopt on (docs/cache.md, *Live connections*).
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const NETLINK_SOCK_DIAG: libc::c_int = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const INET_DIAG_INFO: u16 = 2;
const INET_DIAG_CONG: u16 = 4;
/// Multicast groups of destroyed TCP sockets (SKNLGRP_INET_TCP_DESTROY = 1, INET6 = 3).
const DESTROY_GROUPS: u32 = (1 << 0) | (1 << 2);
const NLMSG_HDR: usize = 16;
const DIAG_MSG: usize = 72;
const DIAG_REQ: usize = 56;
/// Requests per batch when asking for TCP_INFO of single sockets: their answers (~400 bytes
/// each) must fit the receive buffer set in `open`.
const BATCH: usize = 256;

/// TCP states worth reading: everything that can still move bytes (not LISTEN, TIME_WAIT,
/// SYN_RECV request socks, or CLOSE).
pub const ACTIVE_STATES: u32 =
    (1 << 1) | (1 << 2) | (1 << 4) | (1 << 5) | (1 << 8) | (1 << 9) | (1 << 11);

/// One socket as the kernel lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiagSocket {
    /// The socket's family is AF_INET6 (it may still carry IPv4: a dual-stack socket's
    /// addresses below are given as plain IPv4 then, as its packets are).
    pub inet6: bool,
    pub state: u8,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// The kernel's unique id of this socket (never reused while the system runs).
    pub cookie: u64,
    /// 0 for sockets no longer attached to a file (and in destroy messages).
    pub inode: u32,
}

fn netlink_socket(groups: u32, rcvbuf: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the fd is owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by socket(2) and is not owned elsewhere.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let _ = perigee_netsys::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, rcvbuf)
        .or_else(|_| perigee_netsys::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, rcvbuf));
    // SAFETY: sockaddr_nl is plain old data; all-zero is a valid value.
    let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    sa.nl_groups = groups;
    // SAFETY: sa is a valid sockaddr_nl of the given size.
    let r = unsafe {
        libc::bind(
            fd,
            &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(owned)
}

fn recv(fd: &OwnedFd, buf: &mut [u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: buf is valid for writes of its length.
    let n = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            flags,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn send(fd: &OwnedFd, buf: &[u8]) -> io::Result<()> {
    // SAFETY: buf is valid for reads of its length.
    let n = unsafe {
        libc::send(
            fd.as_raw_fd(),
            buf.as_ptr() as *const libc::c_void,
            buf.len(),
            0,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn family_of(v6: bool) -> u8 {
    if v6 {
        libc::AF_INET6 as u8
    } else {
        libc::AF_INET as u8
    }
}

/// One request: a dump of a family (`exact` None) or one socket, TCP_INFO included when `info`.
fn request(seq: u32, v6: bool, states: u32, info: bool, exact: Option<&DiagSocket>) -> Vec<u8> {
    let mut m = Vec::with_capacity(NLMSG_HDR + DIAG_REQ);
    let flags = NLM_F_REQUEST | if exact.is_none() { NLM_F_DUMP } else { 0 };
    m.extend_from_slice(&((NLMSG_HDR + DIAG_REQ) as u32).to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.push(family_of(v6));
    m.push(libc::IPPROTO_TCP as u8);
    m.push(if info {
        (1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_CONG - 1))
    } else {
        0
    });
    m.push(0);
    m.extend_from_slice(&states.to_ne_bytes());
    let mut id = [0u8; 48];
    if let Some(s) = exact {
        id[0..2].copy_from_slice(&s.local.port().to_be_bytes());
        id[2..4].copy_from_slice(&s.remote.port().to_be_bytes());
        id[4..20].copy_from_slice(&addr16(s.local.ip(), s.inet6));
        id[20..36].copy_from_slice(&addr16(s.remote.ip(), s.inet6));
        id[40..44].copy_from_slice(&((s.cookie & 0xffff_ffff) as u32).to_ne_bytes());
        id[44..48].copy_from_slice(&((s.cookie >> 32) as u32).to_ne_bytes());
    } else {
        // INET_DIAG_NOCOOKIE.
        id[40..48].fill(0xff);
    }
    m.extend_from_slice(&id);
    m
}

/// The address as inet_diag_sockid holds it: IPv4 in the first 4 bytes of an AF_INET socket,
/// IPv4-mapped in an AF_INET6 one.
fn addr16(ip: IpAddr, inet6: bool) -> [u8; 16] {
    match ip {
        IpAddr::V4(a) if inet6 => a.to_ipv6_mapped().octets(),
        IpAddr::V4(a) => {
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&a.octets());
            b
        }
        IpAddr::V6(a) => a.octets(),
    }
}

fn addr_of(family: u8, b: &[u8]) -> Option<IpAddr> {
    if family == libc::AF_INET as u8 {
        Some(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])))
    } else if family == libc::AF_INET6 as u8 {
        let a = Ipv6Addr::from(<[u8; 16]>::try_from(b.get(..16)?).ok()?);
        // A dual-stack socket talking IPv4: its address as the packets carry it.
        Some(a.to_ipv4_mapped().map_or(IpAddr::V6(a), IpAddr::V4))
    } else {
        None
    }
}

/// A netlink message: (type, payload after the header).
fn messages(buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut off = 0usize;
    std::iter::from_fn(move || {
        let h = buf.get(off..off + NLMSG_HDR)?;
        let len = u32::from_ne_bytes(h[0..4].try_into().ok()?) as usize;
        let kind = u16::from_ne_bytes(h[4..6].try_into().ok()?);
        if len < NLMSG_HDR || off + len > buf.len() {
            return None;
        }
        let payload = &buf[off + NLMSG_HDR..off + len];
        off += (len + 3) & !3;
        Some((kind, payload))
    })
}

/// What the kernel says about one socket beyond its addresses: raw `struct tcp_info` and the
/// name of its congestion control (when asked for and present).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiagInfo {
    pub tcp_info: Vec<u8>,
    pub cc: String,
}

/// Parses an inet_diag_msg and its attributes: the socket and its TCP_INFO, if present.
pub fn parse_diag_msg(p: &[u8]) -> Option<(DiagSocket, Option<DiagInfo>)> {
    if p.len() < DIAG_MSG {
        return None;
    }
    let family = p[0];
    let sport = u16::from_be_bytes([p[4], p[5]]);
    let dport = u16::from_be_bytes([p[6], p[7]]);
    let local = SocketAddr::new(addr_of(family, &p[8..24])?, sport);
    let remote = SocketAddr::new(addr_of(family, &p[24..40])?, dport);
    let lo = u32::from_ne_bytes(p[44..48].try_into().ok()?);
    let hi = u32::from_ne_bytes(p[48..52].try_into().ok()?);
    let inode = u32::from_ne_bytes(p[68..72].try_into().ok()?);
    let mut info: Option<DiagInfo> = None;
    let mut cc = String::new();
    let mut off = DIAG_MSG;
    while let Some(a) = p.get(off..off + 4) {
        let len = u16::from_ne_bytes([a[0], a[1]]) as usize;
        let kind = u16::from_ne_bytes([a[2], a[3]]) & 0x3fff;
        if len < 4 || off + len > p.len() {
            break;
        }
        let data = &p[off + 4..off + len];
        if kind == INET_DIAG_INFO {
            info = Some(DiagInfo {
                tcp_info: data.to_vec(),
                cc: String::new(),
            });
        } else if kind == INET_DIAG_CONG {
            let end = data.iter().position(|b| *b == 0).unwrap_or(data.len());
            cc = String::from_utf8_lossy(&data[..end]).into_owned();
        }
        off += (len + 3) & !3;
    }
    if let Some(i) = info.as_mut() {
        i.cc = cc;
    }
    let sock = DiagSocket {
        inet6: family == libc::AF_INET6 as u8,
        state: p[1],
        local,
        remote,
        cookie: u64::from(lo) | (u64::from(hi) << 32),
        inode,
    };
    Some((sock, info))
}

/// Queries (dumps and single sockets) on one netlink socket.
pub struct SockDiag {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

impl SockDiag {
    pub fn open() -> io::Result<SockDiag> {
        Ok(SockDiag {
            fd: netlink_socket(0, 4 << 20)?,
            seq: 0,
            buf: vec![0u8; 256 << 10],
        })
    }

    /// Reads answers until `pending` requests have ended (a dump with DONE, a single socket
    /// with its message or an error), calling `each` on every socket message.
    fn read_answers(
        &mut self,
        mut pending: usize,
        dump: bool,
        mut each: impl FnMut(DiagSocket, Option<DiagInfo>),
    ) -> io::Result<()> {
        while pending > 0 {
            let n = recv(&self.fd, &mut self.buf, 0)?;
            if n == 0 {
                return Err(io::Error::other("netlink socket closed"));
            }
            for (kind, payload) in messages(&self.buf[..n]) {
                match kind {
                    NLMSG_DONE => pending = pending.saturating_sub(1),
                    NLMSG_ERROR => {
                        let errno = payload
                            .get(..4)
                            .map(|b| i32::from_ne_bytes(b.try_into().unwrap_or([0; 4])))
                            .unwrap_or(0);
                        if dump {
                            return Err(io::Error::from_raw_os_error(-errno));
                        }
                        // One socket gone since the list (ENOENT) or reused (ESTALE).
                        pending = pending.saturating_sub(1);
                    }
                    SOCK_DIAG_BY_FAMILY => {
                        if let Some((s, info)) = parse_diag_msg(payload) {
                            each(s, info);
                        }
                        if !dump {
                            pending = pending.saturating_sub(1);
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// Every TCP socket of this namespace in `states` (a bit mask of 1 << state), both
    /// families, without TCP_INFO (cheap even with tens of thousands of sockets).
    pub fn list(&mut self, states: u32) -> io::Result<Vec<DiagSocket>> {
        let mut out = Vec::new();
        for v6 in [false, true] {
            self.seq = self.seq.wrapping_add(1);
            send(&self.fd, &request(self.seq, v6, states, false, None))?;
            self.read_answers(1, true, |s, _| out.push(s))?;
        }
        Ok(out)
    }

    /// TCP_INFO of the given sockets, by cookie; sockets that closed since they were listed
    /// are left out.
    pub fn infos(&mut self, socks: &[&DiagSocket]) -> io::Result<HashMap<u64, DiagInfo>> {
        let mut out = HashMap::new();
        for chunk in socks.chunks(BATCH) {
            let mut batch = Vec::with_capacity(chunk.len() * (NLMSG_HDR + DIAG_REQ));
            for s in chunk {
                self.seq = self.seq.wrapping_add(1);
                batch.extend(request(self.seq, s.inet6, u32::MAX, true, Some(s)));
            }
            send(&self.fd, &batch)?;
            self.read_answers(chunk.len(), false, |s, info| {
                if let Some(i) = info {
                    out.insert(s.cookie, i);
                }
            })?;
        }
        Ok(out)
    }
}

/// Final TCP_INFO of every TCP socket of this namespace as the kernel destroys it.
pub struct DestroyWatch {
    fd: OwnedFd,
    buf: Vec<u8>,
    /// Messages lost because the receive buffer was full (ENOBUFS) since the start.
    pub overruns: u64,
}

impl DestroyWatch {
    pub fn open() -> io::Result<DestroyWatch> {
        Ok(DestroyWatch {
            fd: netlink_socket(DESTROY_GROUPS, 8 << 20)?,
            buf: vec![0u8; 256 << 10],
            overruns: 0,
        })
    }

    /// Everything destroyed since the last call (never blocks).
    pub fn drain(&mut self) -> Vec<(DiagSocket, Option<DiagInfo>)> {
        let mut out = Vec::new();
        loop {
            match recv(&self.fd, &mut self.buf, libc::MSG_DONTWAIT) {
                Ok(0) => break,
                Ok(n) => {
                    for (kind, payload) in messages(&self.buf[..n]) {
                        if kind == SOCK_DIAG_BY_FAMILY {
                            out.extend(parse_diag_msg(payload));
                        }
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => self.overruns += 1,
                Err(_) => break,
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    fn inode_of(fd: i32) -> u32 {
        let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
        let s = link.to_string_lossy();
        s.trim_start_matches("socket:[")
            .trim_end_matches(']')
            .parse()
            .unwrap()
    }

    #[test]
    fn lists_reads_and_watches_a_loopback_connection() {
        let mut diag = match SockDiag::open() {
            Ok(d) => d,
            Err(e) => {
                eprintln!("skipped: no NETLINK_SOCK_DIAG here ({e})");
                return;
            }
        };
        let mut watch = DestroyWatch::open().ok();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut a, _) = l.accept().unwrap();
        c.write_all(&[7u8; 50_000]).unwrap();
        let mut got = vec![0u8; 50_000];
        a.read_exact(&mut got).unwrap();
        let inode = inode_of(c.as_raw_fd());
        let all = diag.list(ACTIVE_STATES).unwrap();
        let mine = all.iter().find(|s| s.inode == inode).expect("listed");
        assert_eq!(mine.local, c.local_addr().unwrap());
        assert_eq!(mine.remote, l.local_addr().unwrap());
        assert_eq!(mine.state, 1);
        let infos = diag.infos(&[mine]).unwrap();
        let i = &infos[&mine.cookie];
        let t = crate::gateway::telemetry::parse_tcp_info(&i.tcp_info, &i.cc);
        assert_eq!(t.bytes_acked, 50_001);
        assert!(!t.cc.is_empty());
        // A socket that is gone answers with an error, not a hang.
        let gone = DiagSocket {
            cookie: mine.cookie ^ 1,
            ..mine.clone()
        };
        assert!(diag.infos(&[&gone]).unwrap().is_empty());
        let cookie = mine.cookie;
        drop(c);
        drop(a);
        if let Some(w) = watch.as_mut() {
            // A bound that means hung, not slow.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            loop {
                let done = w.drain();
                if let Some((_, info)) = done.iter().find(|(s, _)| s.cookie == cookie) {
                    let t = crate::gateway::telemetry::parse_tcp_info(
                        &info.as_ref().unwrap().tcp_info,
                        "",
                    );
                    assert!(t.bytes_acked >= 50_001, "{}", t.bytes_acked);
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "no destroy message");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }

    #[test]
    fn parses_messages_and_skips_truncated_ones() {
        let mut p = vec![0u8; DIAG_MSG];
        p[0] = libc::AF_INET as u8;
        p[1] = 1;
        p[4..6].copy_from_slice(&80u16.to_be_bytes());
        p[6..8].copy_from_slice(&40000u16.to_be_bytes());
        p[8..12].copy_from_slice(&[10, 71, 3, 10]);
        p[24..28].copy_from_slice(&[10, 71, 1, 10]);
        p[44..48].copy_from_slice(&5u32.to_ne_bytes());
        p[48..52].copy_from_slice(&1u32.to_ne_bytes());
        p[68..72].copy_from_slice(&99u32.to_ne_bytes());
        // An INFO attribute of 8 bytes.
        p.extend_from_slice(&12u16.to_ne_bytes());
        p.extend_from_slice(&INET_DIAG_INFO.to_ne_bytes());
        p.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let (s, info) = parse_diag_msg(&p).unwrap();
        assert_eq!(s.local, "10.71.3.10:80".parse().unwrap());
        assert_eq!(s.remote, "10.71.1.10:40000".parse().unwrap());
        assert_eq!((s.cookie, s.inode), ((1 << 32) | 5, 99));
        assert_eq!(info.unwrap().tcp_info, vec![1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(parse_diag_msg(&p[..40]).is_none());
        // An attribute claiming more than there is ends the walk without a panic.
        let mut bad = p.clone();
        bad[DIAG_MSG..DIAG_MSG + 2].copy_from_slice(&400u16.to_ne_bytes());
        assert!(parse_diag_msg(&bad).unwrap().1.is_none());
    }
}
