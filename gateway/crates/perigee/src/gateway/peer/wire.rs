//! The peer path's frames (docs/splitter.md, *The peer path*): fixed sizes, big-endian, each
//! starting with a 4-byte magic. Pure functions: encoding, parsing and the HMAC-SHA256 proofs.
//!
//! ```text
//! hub -> terminal  HELLO    "PGPH" ver 0 0 0 nonce[32]                        40 bytes
//! terminal -> hub  AUTH     "PGPA" mac[32]  HMAC(key, "auth" || nonce)        36 bytes
//! hub -> terminal  AUTH_OK  "PGPK" mac[32]  HMAC(key, "hub" || nonce)         36 bytes
//! terminal -> hub  OPEN     "PGPO" fam dscp cport sport 0 0 caddr[16] saddr[16]
//!                           mac[32]  HMAC(key, "open" || nonce || the 40 bytes before it)  76 bytes
//! hub -> terminal  STATUS   "PGPS" code 0 errno(u16)                           8 bytes
//! ```
//! OPEN's `dscp` byte: 0 = the client's marking is unknown (what a terminal before it sends),
//! else 0x40 | DSCP, which the hub's connection to the server carries.
//! The nonce is fresh per connection (getrandom), so a frame captured on one connection proves
//! nothing on another. After STATUS(connected) the connection carries the flow's bytes as is.
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub const VERSION: u8 = 1;
pub const NONCE_LEN: usize = 32;
pub const MAC_LEN: usize = 32;
pub const HELLO_LEN: usize = 8 + NONCE_LEN;
pub const AUTH_LEN: usize = 4 + MAC_LEN;
pub const AUTH_OK_LEN: usize = 4 + MAC_LEN;
const OPEN_BODY_LEN: usize = 44;
pub const OPEN_LEN: usize = OPEN_BODY_LEN + MAC_LEN;
pub const STATUS_LEN: usize = 8;

const HELLO: &[u8; 4] = b"PGPH";
pub const AUTH: &[u8; 4] = b"PGPA";
const AUTH_OK: &[u8; 4] = b"PGPK";
pub const OPEN: &[u8; 4] = b"PGPO";
const STATUS: &[u8; 4] = b"PGPS";

/// Labels that keep one proof from standing in for another.
const LABEL_AUTH: &[u8] = b"perigee-peer-v1 auth";
const LABEL_HUB: &[u8] = b"perigee-peer-v1 hub";
const LABEL_OPEN: &[u8] = b"perigee-peer-v1 open";

pub type Key = [u8; 32];
pub type Nonce = [u8; NONCE_LEN];

/// Why a frame was refused (counted and logged by the receiver; never sent back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Magic,
    Version,
    Mac,
    Address,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Magic => "not a peer frame",
            Refusal::Version => "unsupported peer protocol version",
            Refusal::Mac => "authentication failed (wrong key or replayed)",
            Refusal::Address => "malformed address",
        }
    }
}

fn mac(key: &Key, parts: &[&[u8]]) -> [u8; MAC_LEN] {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

/// Constant-time check of `got` against the MAC of `parts`.
fn verify(key: &Key, parts: &[&[u8]], got: &[u8]) -> bool {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        m.update(p);
    }
    m.verify_slice(got).is_ok()
}

pub fn hello(nonce: &Nonce) -> [u8; HELLO_LEN] {
    let mut f = [0u8; HELLO_LEN];
    f[..4].copy_from_slice(HELLO);
    f[4] = VERSION;
    f[8..].copy_from_slice(nonce);
    f
}

pub fn parse_hello(f: &[u8; HELLO_LEN]) -> Result<Nonce, Refusal> {
    if &f[..4] != HELLO {
        return Err(Refusal::Magic);
    }
    if f[4] != VERSION {
        return Err(Refusal::Version);
    }
    let mut n = [0u8; NONCE_LEN];
    n.copy_from_slice(&f[8..]);
    Ok(n)
}

pub fn auth(key: &Key, nonce: &Nonce) -> [u8; AUTH_LEN] {
    let mut f = [0u8; AUTH_LEN];
    f[..4].copy_from_slice(AUTH);
    f[4..].copy_from_slice(&mac(key, &[LABEL_AUTH, nonce]));
    f
}

pub fn check_auth(key: &Key, nonce: &Nonce, f: &[u8; AUTH_LEN]) -> Result<(), Refusal> {
    if &f[..4] != AUTH {
        return Err(Refusal::Magic);
    }
    verify(key, &[LABEL_AUTH, nonce], &f[4..])
        .then_some(())
        .ok_or(Refusal::Mac)
}

pub fn auth_ok(key: &Key, nonce: &Nonce) -> [u8; AUTH_OK_LEN] {
    let mut f = [0u8; AUTH_OK_LEN];
    f[..4].copy_from_slice(AUTH_OK);
    f[4..].copy_from_slice(&mac(key, &[LABEL_HUB, nonce]));
    f
}

/// The terminal's check that the hub holds the key too.
pub fn check_auth_ok(key: &Key, nonce: &Nonce, f: &[u8; AUTH_OK_LEN]) -> Result<(), Refusal> {
    if &f[..4] != AUTH_OK {
        return Err(Refusal::Magic);
    }
    verify(key, &[LABEL_HUB, nonce], &f[4..])
        .then_some(())
        .ok_or(Refusal::Mac)
}

/// A flow to open: the client's address and port (the hub binds them) and the server's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Open {
    pub client: SocketAddr,
    pub server: SocketAddr,
    /// The DSCP the hub's re-originated connection carries (None: leave the default).
    pub dscp: Option<u8>,
}

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

pub fn open(key: &Key, nonce: &Nonce, o: &Open) -> [u8; OPEN_LEN] {
    let mut f = [0u8; OPEN_LEN];
    f[..4].copy_from_slice(OPEN);
    f[4] = if o.client.is_ipv4() { 4 } else { 6 };
    f[5] = o.dscp.map_or(0, |d| DSCP_PRESENT | (d & 0x3f));
    f[6..8].copy_from_slice(&o.client.port().to_be_bytes());
    f[8..10].copy_from_slice(&o.server.port().to_be_bytes());
    f[12..28].copy_from_slice(&addr16(o.client.ip()));
    f[28..44].copy_from_slice(&addr16(o.server.ip()));
    let m = mac(key, &[LABEL_OPEN, nonce, &f[..OPEN_BODY_LEN]]);
    f[OPEN_BODY_LEN..].copy_from_slice(&m);
    f
}

pub fn parse_open(key: &Key, nonce: &Nonce, f: &[u8; OPEN_LEN]) -> Result<Open, Refusal> {
    if &f[..4] != OPEN {
        return Err(Refusal::Magic);
    }
    // The MAC first: nothing of an unauthenticated frame is looked at beyond its magic.
    if !verify(
        key,
        &[LABEL_OPEN, nonce, &f[..OPEN_BODY_LEN]],
        &f[OPEN_BODY_LEN..],
    ) {
        return Err(Refusal::Mac);
    }
    let v4 = match f[4] {
        4 => true,
        6 => false,
        _ => return Err(Refusal::Address),
    };
    let cport = u16::from_be_bytes([f[6], f[7]]);
    let sport = u16::from_be_bytes([f[8], f[9]]);
    let client = ip_of(&f[12..28], v4).ok_or(Refusal::Address)?;
    let server = ip_of(&f[28..44], v4).ok_or(Refusal::Address)?;
    let unusable = |ip: IpAddr| {
        ip.is_unspecified()
            || ip.is_multicast()
            || ip == IpAddr::V4(Ipv4Addr::BROADCAST)
            || ip.is_loopback()
    };
    if cport == 0 || sport == 0 || unusable(client) || unusable(server) {
        return Err(Refusal::Address);
    }
    Ok(Open {
        client: SocketAddr::new(client, cport),
        server: SocketAddr::new(server, sport),
        dscp: (f[5] & DSCP_PRESENT != 0).then_some(f[5] & 0x3f),
    })
}

/// The hub's answer to OPEN once its connection to the server is up (or has failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Connected,
    /// The server refused or could not be reached: the errno the hub's connect got.
    Failed(i32),
}

pub fn status(s: Status) -> [u8; STATUS_LEN] {
    let mut f = [0u8; STATUS_LEN];
    f[..4].copy_from_slice(STATUS);
    if let Status::Failed(errno) = s {
        f[4] = 1;
        f[6..8].copy_from_slice(&(errno.clamp(1, 65535) as u16).to_be_bytes());
    }
    f
}

pub fn parse_status(f: &[u8; STATUS_LEN]) -> Result<Status, Refusal> {
    if &f[..4] != STATUS {
        return Err(Refusal::Magic);
    }
    Ok(match f[4] {
        0 => Status::Connected,
        _ => Status::Failed(i32::from(u16::from_be_bytes([f[6], f[7]])).max(1)),
    })
}

/// A fresh nonce from the kernel's CSPRNG.
pub fn nonce() -> std::io::Result<Nonce> {
    let mut n = [0u8; NONCE_LEN];
    let mut got = 0;
    while got < n.len() {
        // SAFETY: the buffer is valid for the remaining length.
        let r = unsafe {
            libc::getrandom(n[got..].as_mut_ptr() as *mut libc::c_void, n.len() - got, 0)
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        got += r as usize;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: Key = [7u8; 32];

    fn flow() -> Open {
        Open {
            client: "10.71.1.10:40000".parse().unwrap(),
            server: "10.71.3.10:443".parse().unwrap(),
            dscp: None,
        }
    }

    #[test]
    fn hmac_sha256_matches_rfc_4231_case_2() {
        // Key "Jefe", data "what do ya want for nothing?".
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(b"Jefe").unwrap();
        m.update(b"what do ya want for nothing?");
        let hex: String = m
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn handshake_round_trips_and_binds_to_the_nonce() {
        let n1 = nonce().unwrap();
        let n2 = nonce().unwrap();
        assert_ne!(n1, n2);
        assert_eq!(parse_hello(&hello(&n1)), Ok(n1));
        let a = auth(&KEY, &n1);
        assert_eq!(check_auth(&KEY, &n1, &a), Ok(()));
        // Replayed on another connection (another nonce), or made with another key: refused.
        assert_eq!(check_auth(&KEY, &n2, &a), Err(Refusal::Mac));
        assert_eq!(check_auth(&[8u8; 32], &n1, &a), Err(Refusal::Mac));
        let ok = auth_ok(&KEY, &n1);
        assert_eq!(check_auth_ok(&KEY, &n1, &ok), Ok(()));
        // The terminal's proof is not the hub's: a reflected AUTH is not an AUTH_OK.
        let mut reflected = a;
        reflected[..4].copy_from_slice(b"PGPK");
        assert_eq!(check_auth_ok(&KEY, &n1, &reflected), Err(Refusal::Mac));
        let mut v2 = hello(&n1);
        v2[4] = 2;
        assert_eq!(parse_hello(&v2), Err(Refusal::Version));
        assert_eq!(parse_hello(&[0u8; HELLO_LEN]), Err(Refusal::Magic));
    }

    #[test]
    fn open_carries_both_families_and_refuses_tampering() {
        let n = nonce().unwrap();
        for o in [
            flow(),
            Open {
                client: "[fd71:1::10]:51000".parse().unwrap(),
                server: "[fd71:3::10]:22".parse().unwrap(),
                dscp: Some(46),
            },
            Open {
                dscp: Some(0),
                ..flow()
            },
        ] {
            let f = open(&KEY, &n, &o);
            assert_eq!(parse_open(&KEY, &n, &f), Ok(o));
            for byte in [4, 5, 7, 9, 27, 43, 50] {
                let mut t = f;
                t[byte] ^= 1;
                assert_eq!(parse_open(&KEY, &n, &t), Err(Refusal::Mac), "byte {byte}");
            }
            assert_eq!(
                parse_open(&KEY, &nonce().unwrap(), &f),
                Err(Refusal::Mac),
                "another connection's nonce"
            );
        }
        let mut garbage = [0x41u8; OPEN_LEN];
        assert_eq!(parse_open(&KEY, &n, &garbage), Err(Refusal::Magic));
        garbage[..4].copy_from_slice(b"PGPO");
        assert_eq!(parse_open(&KEY, &n, &garbage), Err(Refusal::Mac));
    }

    #[test]
    fn open_refuses_unusable_addresses_even_with_a_valid_mac() {
        let n = nonce().unwrap();
        for (c, s) in [
            ("0.0.0.0:1", "10.71.3.10:80"),
            ("10.71.1.10:1", "127.0.0.1:80"),
            ("10.71.1.10:1", "224.0.0.1:80"),
        ] {
            let o = Open {
                client: c.parse().unwrap(),
                server: s.parse().unwrap(),
                dscp: None,
            };
            assert_eq!(
                parse_open(&KEY, &n, &open(&KEY, &n, &o)),
                Err(Refusal::Address)
            );
        }
        // A v4 flag over an IPv6 address (or the reverse) is malformed too.
        let mut f = open(&KEY, &n, &flow());
        f[4] = 6;
        let m = mac(&KEY, &[LABEL_OPEN, &n, &f[..OPEN_BODY_LEN]]);
        f[OPEN_BODY_LEN..].copy_from_slice(&m);
        assert_eq!(parse_open(&KEY, &n, &f), Err(Refusal::Address));
    }

    #[test]
    fn status_round_trips() {
        assert_eq!(
            parse_status(&status(Status::Connected)),
            Ok(Status::Connected)
        );
        assert_eq!(
            parse_status(&status(Status::Failed(libc::ECONNREFUSED))),
            Ok(Status::Failed(libc::ECONNREFUSED))
        );
        assert_eq!(parse_status(b"HTTP/1.1"), Err(Refusal::Magic));
    }
}
