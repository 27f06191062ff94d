//! A DNS upstream the tests own (an authoritative-style responder that counts what it is
//! asked) and a client that shows what came back. Wire format per RFC 1035; no compression in
//! what it writes except the answer's pointer to the question.
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const TYPE_A: u16 = 1;
pub const TYPE_AAAA: u16 = 28;

/// The address every name resolves to: 192.0.2.<first byte of the name's hash> and its v6 twin,
/// so a test can tell names apart and recognise a right answer. A first label `lan-...` gives a
/// private-network address instead (10.77.0.<hash>, fd77::<hash>), as a rebinding attack would.
pub fn address_of(name: &str, qtype: u16) -> IpAddr {
    let h = name
        .to_ascii_lowercase()
        .bytes()
        .fold(7u8, |a, b| a.wrapping_mul(31).wrapping_add(b))
        .max(1);
    if name.to_ascii_lowercase().starts_with("lan-") {
        return if qtype == TYPE_AAAA {
            IpAddr::V6(Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 0, u16::from(h)))
        } else {
            IpAddr::V4(Ipv4Addr::new(10, 77, 0, h))
        };
    }
    if qtype == TYPE_AAAA {
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, u16::from(h)))
    } else {
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, h))
    }
}

/// TTL for `name`: a first label `ttlN-...` gives N seconds, otherwise 300.
pub fn ttl_of(name: &str) -> u32 {
    name.split('.')
        .next()
        .and_then(|l| l.strip_prefix("ttl"))
        .and_then(|l| l.split('-').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(300)
}

/// Reads a (possibly compressed) name at `at`; returns it dotted and the offset after it.
fn read_name(msg: &[u8], mut at: usize) -> Option<(String, usize)> {
    let mut labels = Vec::new();
    let mut end = None;
    for _ in 0..128 {
        let len = *msg.get(at)? as usize;
        if len == 0 {
            end.get_or_insert(at + 1);
            return Some((labels.join("."), end?));
        }
        if len & 0xc0 == 0xc0 {
            let ptr = ((len & 0x3f) << 8) | *msg.get(at + 1)? as usize;
            end.get_or_insert(at + 2);
            at = ptr;
            continue;
        }
        labels.push(String::from_utf8_lossy(msg.get(at + 1..at + 1 + len)?).into_owned());
        at += 1 + len;
    }
    None
}

/// The question of a query: (name, qtype, end of the question section).
fn question(q: &[u8]) -> Option<(String, u16, usize)> {
    if q.len() < 12 {
        return None;
    }
    let (name, at) = read_name(q, 12)?;
    let qtype = u16::from_be_bytes([*q.get(at)?, *q.get(at + 1)?]);
    Some((name.to_ascii_lowercase(), qtype, at + 4))
}

/// The answer to `q`: A/AAAA per `address_of`, anything else NOERROR without records.
fn answer(q: &[u8]) -> Option<Vec<u8>> {
    let (name, qtype, qend) = question(q)?;
    let mut r = q[..qend].to_vec();
    // QR, AA, RD copied, RA; NOERROR.
    r[2] = 0x84 | (q[2] & 0x01);
    r[3] = 0x80;
    r[6..12].copy_from_slice(&[0, 0, 0, 0, 0, 0]);
    if qtype == TYPE_A || qtype == TYPE_AAAA {
        r[7] = 1;
        r.extend_from_slice(&[0xc0, 0x0c]);
        r.extend_from_slice(&qtype.to_be_bytes());
        r.extend_from_slice(&1u16.to_be_bytes());
        r.extend_from_slice(&ttl_of(&name).to_be_bytes());
        match address_of(&name, qtype) {
            IpAddr::V4(a) => {
                r.extend_from_slice(&4u16.to_be_bytes());
                r.extend_from_slice(&a.octets());
            }
            IpAddr::V6(a) => {
                r.extend_from_slice(&16u16.to_be_bytes());
                r.extend_from_slice(&a.octets());
            }
        }
    }
    Some(r)
}

/// An upstream resolver on UDP and TCP port 53 that counts the queries per name and can be
/// made slow (to stand in for a satellite hop).
pub struct Responder {
    counts: Arc<Mutex<HashMap<String, u32>>>,
    stop: Arc<AtomicBool>,
    addrs: Vec<SocketAddr>,
}

impl Responder {
    /// Binds `addrs` (UDP and TCP each) in the calling thread's network namespace and serves
    /// them on threads of its own; every answer waits `delay` first.
    pub fn bind(addrs: &[SocketAddr], delay: Duration) -> Responder {
        let counts: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        for addr in addrs {
            let udp = UdpSocket::bind(addr).expect("bind udp 53");
            udp.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            let (c, s) = (counts.clone(), stop.clone());
            std::thread::spawn(move || serve_udp(udp, c, s, delay));
            let tcp = TcpListener::bind(addr).expect("bind tcp 53");
            tcp.set_nonblocking(true).unwrap();
            let (c, s) = (counts.clone(), stop.clone());
            std::thread::spawn(move || serve_tcp(tcp, c, s, delay));
        }
        Responder {
            counts,
            stop,
            addrs: addrs.to_vec(),
        }
    }

    /// Queries seen for `name` (any type), over both transports.
    pub fn count(&self, name: &str) -> u32 {
        let key = name.trim_end_matches('.').to_ascii_lowercase();
        self.counts.lock().unwrap().get(&key).copied().unwrap_or(0)
    }

    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn note(counts: &Mutex<HashMap<String, u32>>, q: &[u8]) {
    if let Some((name, _, _)) = question(q) {
        *counts.lock().unwrap().entry(name).or_default() += 1;
    }
}

fn serve_udp(
    sock: UdpSocket,
    counts: Arc<Mutex<HashMap<String, u32>>>,
    stop: Arc<AtomicBool>,
    delay: Duration,
) {
    let mut buf = [0u8; 1500];
    while !stop.load(Ordering::Relaxed) {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        note(&counts, &buf[..n]);
        if let Some(r) = answer(&buf[..n]) {
            let s = sock.try_clone().unwrap();
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                let _ = s.send_to(&r, from);
            });
        }
    }
}

fn serve_tcp(
    l: TcpListener,
    counts: Arc<Mutex<HashMap<String, u32>>>,
    stop: Arc<AtomicBool>,
    delay: Duration,
) {
    while !stop.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((mut c, _)) => {
                let counts = counts.clone();
                std::thread::spawn(move || {
                    let _ = c.set_nonblocking(false);
                    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                    while let Some(q) = read_framed(&mut c) {
                        note(&counts, &q);
                        let Some(r) = answer(&q) else { return };
                        std::thread::sleep(delay);
                        if write_framed(&mut c, &r).is_err() {
                            return;
                        }
                    }
                });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn read_framed(c: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 2];
    c.read_exact(&mut len).ok()?;
    let mut q = vec![0u8; usize::from(u16::from_be_bytes(len))];
    c.read_exact(&mut q).ok()?;
    Some(q)
}

fn write_framed(c: &mut TcpStream, m: &[u8]) -> std::io::Result<()> {
    let mut out = (m.len() as u16).to_be_bytes().to_vec();
    out.extend_from_slice(m);
    c.write_all(&out)
}

/// What a query got back.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Who answered (UDP: the datagram's source; TCP: the connected peer).
    pub from: SocketAddr,
    pub rcode: u8,
    /// The AD bit: the answer was DNSSEC-validated by whoever sent it.
    pub ad: bool,
    pub addrs: Vec<IpAddr>,
    /// TTL of the first answer record.
    pub ttl: Option<u32>,
    pub elapsed: Duration,
}

fn query_message(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    // RD, and AD: the client understands the AD bit (RFC 6840 5.7), so a validating resolver sets it.
    m.extend_from_slice(&[0x01, 0x20, 0, 1, 0, 0, 0, 0, 0, 0]);
    for l in name.trim_end_matches('.').split('.') {
        m.push(l.len() as u8);
        m.extend_from_slice(l.as_bytes());
    }
    m.push(0);
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&1u16.to_be_bytes());
    m
}

fn parse_reply(id: u16, r: &[u8], from: SocketAddr, started: Instant) -> std::io::Result<Reply> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    if r.len() < 12 || u16::from_be_bytes([r[0], r[1]]) != id || r[2] & 0x80 == 0 {
        return Err(bad("not the answer to this query"));
    }
    let ancount = u16::from_be_bytes([r[6], r[7]]);
    let (_, mut at) = read_name(r, 12).ok_or_else(|| bad("bad question"))?;
    at += 4;
    let mut addrs = Vec::new();
    let mut ttl = None;
    for _ in 0..ancount {
        let (_, after) = read_name(r, at).ok_or_else(|| bad("bad answer name"))?;
        let f = r
            .get(after..after + 10)
            .ok_or_else(|| bad("short answer"))?;
        let rtype = u16::from_be_bytes([f[0], f[1]]);
        ttl.get_or_insert(u32::from_be_bytes([f[4], f[5], f[6], f[7]]));
        let rdlen = usize::from(u16::from_be_bytes([f[8], f[9]]));
        let rdata = r
            .get(after + 10..after + 10 + rdlen)
            .ok_or_else(|| bad("short rdata"))?;
        match (rtype, rdlen) {
            (TYPE_A, 4) => addrs.push(IpAddr::from(<[u8; 4]>::try_from(rdata).unwrap())),
            (TYPE_AAAA, 16) => addrs.push(IpAddr::from(<[u8; 16]>::try_from(rdata).unwrap())),
            _ => {}
        }
        at = after + 10 + rdlen;
    }
    Ok(Reply {
        from,
        rcode: r[3] & 0x0f,
        ad: r[3] & 0x20 != 0,
        addrs,
        ttl,
        elapsed: started.elapsed(),
    })
}

/// Asks `server` for `name` over UDP (or TCP), from the calling thread's network namespace.
pub fn query(
    server: SocketAddr,
    name: &str,
    qtype: u16,
    tcp: bool,
    timeout: Duration,
) -> std::io::Result<Reply> {
    let id = (Instant::now().elapsed().subsec_nanos() as u16) ^ 0x5a5a ^ (name.len() as u16);
    let q = query_message(id, name, qtype);
    let started = Instant::now();
    if tcp {
        let mut c = TcpStream::connect_timeout(&server, timeout)?;
        c.set_read_timeout(Some(timeout))?;
        write_framed(&mut c, &q)?;
        let r = read_framed(&mut c).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer over TCP")
        })?;
        return parse_reply(id, &r, c.peer_addr()?, started);
    }
    let bind: SocketAddr = if server.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let s = UdpSocket::bind(bind)?;
    s.send_to(&q, server)?;
    let mut buf = [0u8; 1500];
    loop {
        let left = timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer from {server} within {timeout:?}"),
            ));
        }
        s.set_read_timeout(Some(left))?;
        let (n, from) = s.recv_from(&mut buf)?;
        if let Ok(r) = parse_reply(id, &buf[..n], from, started) {
            return Ok(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_and_counts_over_udp_and_tcp() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let r = Responder::bind(&[addr], Duration::ZERO);
        let t = Duration::from_secs(2);
        let a = query(addr, "ttl7-www.pd.example", TYPE_A, false, t).unwrap();
        assert_eq!(a.addrs, vec![address_of("ttl7-www.pd.example", TYPE_A)]);
        assert_eq!((a.ttl, a.rcode, a.from), (Some(7), 0, addr));
        let b = query(addr, "WWW.pd.example.", TYPE_AAAA, true, t).unwrap();
        assert_eq!(b.addrs, vec![address_of("www.pd.example", TYPE_AAAA)]);
        assert_eq!(b.ttl, Some(300));
        assert_eq!(r.count("ttl7-www.pd.example"), 1);
        assert_eq!(r.count("www.pd.example"), 1);
        assert_eq!(r.count("other.pd.example"), 0);
        assert_ne!(
            address_of("a.pd.example", TYPE_A),
            address_of("b.pd.example", TYPE_A)
        );
        let lan = query(addr, "lan-nas.pd.example", TYPE_A, false, t).unwrap();
        assert_eq!(lan.addrs, vec![address_of("lan-nas.pd.example", TYPE_A)]);
        assert!(matches!(lan.addrs[0], IpAddr::V4(a) if a.is_private()));
        assert!(!lan.ad, "the responder validates nothing");
    }
}
