//! The peer path's frames (docs/splitter.md, *The peer path*): fixed sizes, big-endian, each
//! starting with a 4-byte magic. They travel inside TLS (`channel`), which authenticates and
//! encrypts them; these are pure encoding and parsing functions.
//!
//! ```text
//! hub -> terminal  READY   "PGPR" ver 0 0 0                                         8 bytes
//! terminal -> hub  OPEN    "PGPO" kind dscp cport sport fam 0 caddr[16] saddr[16]   44 bytes
//! hub -> terminal  STATUS  "PGPS" code 0 errno(u16)                                 8 bytes
//! ```
//! READY: the hub has identified the terminal; the connection may carry a flow. OPEN's `kind`:
//! 1 a client's flow (the hub connects from the client's address to the server), 2 the
//! terminal resolver's upstream (addresses and ports zero: the hub connects to its own
//! resolver). `dscp`: 0 = unknown, else 0x40 | DSCP, which the hub's connection carries.
//! STATUS `code`: 0 connected (the server's bytes follow), 1 the hub's connect failed, 2 the
//! hub refused the flow (its client is outside the terminal's prefixes, or its destination is
//! not allowed); `errno` says why. After STATUS(connected) the stream is the flow's bytes.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub const VERSION: u8 = 2;
pub const READY_LEN: usize = 8;
pub const OPEN_LEN: usize = 44;
pub const STATUS_LEN: usize = 8;

const READY: &[u8; 4] = b"PGPR";
const OPEN: &[u8; 4] = b"PGPO";
const STATUS: &[u8; 4] = b"PGPS";

/// Why a frame was refused (counted and logged by the receiver).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Magic,
    Version,
    Address,
    Kind,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Magic => "not a peer frame",
            Refusal::Version => "unsupported peer protocol version",
            Refusal::Address => "malformed address",
            Refusal::Kind => "unknown kind of flow",
        }
    }
}

pub fn ready() -> [u8; READY_LEN] {
    let mut f = [0u8; READY_LEN];
    f[..4].copy_from_slice(READY);
    f[4] = VERSION;
    f
}

pub fn parse_ready(f: &[u8]) -> Result<(), Refusal> {
    if f.len() < READY_LEN || &f[..4] != READY {
        return Err(Refusal::Magic);
    }
    if f[4] != VERSION {
        return Err(Refusal::Version);
    }
    Ok(())
}

/// What a flow on the peer path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// A client's flow: the hub binds the client's address and port and connects to the server.
    Flow {
        client: SocketAddr,
        server: SocketAddr,
        /// The DSCP the hub's re-originated connection carries (None: leave the default).
        dscp: Option<u8>,
    },
    /// The terminal resolver's upstream (DNS over TCP): the hub connects to its own resolver.
    Resolver,
    /// The terminal's long poll for a hub cluster's bucket table: the hub connects to its own
    /// table service (docs/cluster.md, *The peer path through the cluster*).
    Table,
}

const KIND_FLOW: u8 = 1;
const KIND_RESOLVER: u8 = 2;
const KIND_TABLE: u8 = 3;
const DSCP_PRESENT: u8 = 0x40;

fn addr16(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

fn ip_of(b: &[u8], v4: bool) -> Option<IpAddr> {
    let a = Ipv6Addr::from(<[u8; 16]>::try_from(b).ok()?);
    if v4 {
        a.to_ipv4_mapped().map(IpAddr::V4)
    } else if a.to_ipv4_mapped().is_some() {
        None
    } else {
        Some(IpAddr::V6(a))
    }
}

pub fn open(o: &Open) -> [u8; OPEN_LEN] {
    let mut f = [0u8; OPEN_LEN];
    f[..4].copy_from_slice(OPEN);
    match o {
        Open::Flow {
            client,
            server,
            dscp,
        } => {
            f[4] = KIND_FLOW;
            f[5] = dscp.map_or(0, |d| DSCP_PRESENT | (d & 0x3f));
            f[6..8].copy_from_slice(&client.port().to_be_bytes());
            f[8..10].copy_from_slice(&server.port().to_be_bytes());
            f[10] = if client.is_ipv4() { 4 } else { 6 };
            f[12..28].copy_from_slice(&addr16(client.ip()));
            f[28..44].copy_from_slice(&addr16(server.ip()));
        }
        Open::Resolver => f[4] = KIND_RESOLVER,
        Open::Table => f[4] = KIND_TABLE,
    }
    f
}

pub fn parse_open(f: &[u8]) -> Result<Open, Refusal> {
    if f.len() < OPEN_LEN || &f[..4] != OPEN {
        return Err(Refusal::Magic);
    }
    match f[4] {
        KIND_FLOW => {}
        KIND_RESOLVER | KIND_TABLE => {
            return match f[5..OPEN_LEN].iter().all(|b| *b == 0) {
                false => Err(Refusal::Address),
                true if f[4] == KIND_TABLE => Ok(Open::Table),
                true => Ok(Open::Resolver),
            }
        }
        _ => return Err(Refusal::Kind),
    }
    let v4 = match f[10] {
        4 => true,
        6 => false,
        _ => return Err(Refusal::Address),
    };
    let cport = u16::from_be_bytes([f[6], f[7]]);
    let sport = u16::from_be_bytes([f[8], f[9]]);
    let client = ip_of(&f[12..28], v4).ok_or(Refusal::Address)?;
    let server = ip_of(&f[28..44], v4).ok_or(Refusal::Address)?;
    let unusable = |ip: IpAddr| {
        ip.is_unspecified() || ip.is_multicast() || ip == IpAddr::V4(Ipv4Addr::BROADCAST)
    };
    if cport == 0 || sport == 0 || unusable(client) || unusable(server) || client.is_loopback() {
        return Err(Refusal::Address);
    }
    Ok(Open::Flow {
        client: SocketAddr::new(client, cport),
        server: SocketAddr::new(server, sport),
        dscp: (f[5] & DSCP_PRESENT != 0).then_some(f[5] & 0x3f),
    })
}

/// The hub's answer to OPEN once its connection to the server is up (or will not be).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Connected,
    /// The server refused or could not be reached: the errno the hub's connect got.
    Failed(i32),
    /// The hub's policy refused the flow before any connect (errno EACCES).
    Refused(i32),
}

pub fn status(s: Status) -> [u8; STATUS_LEN] {
    let mut f = [0u8; STATUS_LEN];
    f[..4].copy_from_slice(STATUS);
    let (code, errno) = match s {
        Status::Connected => (0, 0),
        Status::Failed(e) => (1, e),
        Status::Refused(e) => (2, e),
    };
    f[4] = code;
    if code != 0 {
        f[6..8].copy_from_slice(&(errno.clamp(1, 65535) as u16).to_be_bytes());
    }
    f
}

pub fn parse_status(f: &[u8]) -> Result<Status, Refusal> {
    if f.len() < STATUS_LEN || &f[..4] != STATUS {
        return Err(Refusal::Magic);
    }
    let errno = i32::from(u16::from_be_bytes([f[6], f[7]])).max(1);
    Ok(match f[4] {
        0 => Status::Connected,
        1 => Status::Failed(errno),
        _ => Status::Refused(errno),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow() -> Open {
        Open::Flow {
            client: "10.71.1.10:40000".parse().unwrap(),
            server: "10.71.3.10:443".parse().unwrap(),
            dscp: None,
        }
    }

    #[test]
    fn ready_carries_the_version() {
        assert_eq!(parse_ready(&ready()), Ok(()));
        let mut v3 = ready();
        v3[4] = 3;
        assert_eq!(parse_ready(&v3), Err(Refusal::Version));
        assert_eq!(parse_ready(b"HTTP/1.1"), Err(Refusal::Magic));
        assert_eq!(parse_ready(b"PGPR"), Err(Refusal::Magic), "too short");
    }

    #[test]
    fn open_carries_both_families_and_the_resolver_kind() {
        for o in [
            flow(),
            Open::Flow {
                client: "[fd71:1::10]:51000".parse().unwrap(),
                server: "[fd71:3::10]:22".parse().unwrap(),
                dscp: Some(46),
            },
            Open::Flow {
                client: "10.71.1.10:40000".parse().unwrap(),
                server: "10.71.3.10:443".parse().unwrap(),
                dscp: Some(0),
            },
            Open::Resolver,
            Open::Table,
        ] {
            assert_eq!(parse_open(&open(&o)), Ok(o));
        }
        let mut r = open(&Open::Resolver);
        r[20] = 1;
        assert_eq!(
            parse_open(&r),
            Err(Refusal::Address),
            "a resolver names no address"
        );
        let mut k = open(&flow());
        k[4] = 9;
        assert_eq!(parse_open(&k), Err(Refusal::Kind));
        assert_eq!(parse_open(&[0x41; OPEN_LEN]), Err(Refusal::Magic));
    }

    #[test]
    fn open_refuses_unusable_addresses() {
        for (c, s) in [
            ("0.0.0.0:1", "10.71.3.10:80"),
            ("127.0.0.1:1", "10.71.3.10:80"),
            ("10.71.1.10:1", "224.0.0.1:80"),
            ("10.71.1.10:1", "255.255.255.255:80"),
            ("10.71.1.10:0", "10.71.3.10:80"),
        ] {
            let o = Open::Flow {
                client: c.parse().unwrap(),
                server: s.parse().unwrap(),
                dscp: None,
            };
            assert_eq!(parse_open(&open(&o)), Err(Refusal::Address), "{c} {s}");
        }
        // A v4 flag over an IPv6 address is malformed too.
        let mut f = open(&flow());
        f[10] = 6;
        assert_eq!(parse_open(&f), Err(Refusal::Address));
    }

    #[test]
    fn status_round_trips() {
        for s in [
            Status::Connected,
            Status::Failed(libc::ECONNREFUSED),
            Status::Refused(libc::EACCES),
        ] {
            assert_eq!(parse_status(&status(s)), Ok(s));
        }
        assert_eq!(parse_status(b"HTTP/1.1"), Err(Refusal::Magic));
    }
}
