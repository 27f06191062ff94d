//! The bucket a hub router's kernel picks for a TCP flow (docs/cluster.md, "Data plane: one hash,
//! one table, two routers"), computed in userspace so that a flow can be aimed at the gateway that
//! will receive the server's answers. It repeats Linux 6.18's computation for
//! `fib_multipath_hash_policy=3` (custom fields; the only policy supported here) and a resilient
//! next-hop group; `tests/multipath_hash_netns.rs` checks it against the running kernel.
//!
//! What the kernel does with a forwarded packet:
//! 1. `fib_multipath_custom_hash_outer` (net/ipv4/route.c; `rt6_multipath_custom_hash_outer` in
//!    net/ipv6/route.c) fills a zeroed `struct flow_keys` with the fields the sysctl selects: the
//!    addresses, `ip_proto`, the ports (network byte order), the IPv6 flow label.
//! 2. `fib_multipath_hash_from_keys` (include/net/ip_fib.h) keys SipHash with the seed sysctl's
//!    32 bits in both halves of both key words (`fib_multipath_hash_construct_key`). A seed of 0
//!    stands for a random one drawn at boot, which nothing outside the kernel knows.
//! 3. `__flow_hash_from_keys` (net/core/flow_dissector.c): `__flow_hash_consistentify` sorts the
//!    address pair and, on its own, the port pair; SipHash-2-4 runs over the struct from `basic` to
//!    the end of the addresses in use (`flow_keys_hash_length`); a hash of 0 becomes 1.
//! 4. `fib_multipath_custom_hash_skb` mixes that with the inner (encapsulated) flow's hash,
//!    `jhash_2words(outer, inner, 0)`; a TCP packet carries no inner flow, so `inner` is 0.
//! 5. `fib_multipath_hash` (`rt6_multipath_hash`) returns it `>> 1`, and
//!    `nexthop_select_path_res` (net/ipv4/nexthop.c) takes bucket `hash % num_nh_buckets`.
//!
//! A route lookup without a packet (a local socket's route; `ip -6 route get`, which passes none)
//! skips step 4: [`output_flow_hash`]. IPv4's `ip route get` builds a packet and so gives
//! [`flow_hash`]. A local connection from an ephemeral port is routed as if from a random source
//! port (`FLOWI_FLAG_ANY_SPORT`): its next hop cannot be computed.
//!
//! IPv6 is supported with the same seed (the kernel uses `net.ipv4.fib_multipath_hash_seed` for
//! both families) and `net.ipv6.fib_multipath_hash_fields`, except with the flow-label field: a
//! TCP socket picks and changes its flow label itself, so such a flow's hash is unknown (`None`).
//!
//! The kernel sorts addresses and ports as native integers of their network-order bytes; this
//! mirrors a little-endian router (x86, arm64).
use siphasher::sip::SipHasher24;
use std::hash::Hasher;
use std::net::{IpAddr, SocketAddr};

/// `FIB_MULTIPATH_HASH_FIELD_*` (include/net/ip_fib.h): the bits of `fib_multipath_hash_fields`.
pub const FIELD_SRC_IP: u32 = 1 << 0;
pub const FIELD_DST_IP: u32 = 1 << 1;
pub const FIELD_IP_PROTO: u32 = 1 << 2;
pub const FIELD_FLOWLABEL: u32 = 1 << 3;
pub const FIELD_SRC_PORT: u32 = 1 << 4;
pub const FIELD_DST_PORT: u32 = 1 << 5;
/// The outer fields; bits 6-11 select the inner (encapsulated) flow's, which plain TCP lacks.
const OUTER_MASK: u32 = 0x3f;
/// Every field the sysctl accepts.
const ALL_MASK: u32 = 0xfff;

/// The cluster's fields: source and destination address, protocol, source and destination port.
pub const CLUSTER_FIELDS: u32 =
    FIELD_SRC_IP | FIELD_DST_IP | FIELD_IP_PROTO | FIELD_SRC_PORT | FIELD_DST_PORT;
/// The buckets of the cluster's resilient next-hop group.
pub const CLUSTER_BUCKETS: u16 = 64;

const IPPROTO_TCP: u8 = 6;

// `struct flow_keys` from `basic` (FLOW_KEYS_HASH_OFFSET, 8) on: basic {n_proto, ip_proto,
// padding}, tags, vlan, cvlan, keyid, ports {src, dst}, icmp, then addrs (a union, last).
const OFF_IP_PROTO: usize = 2;
const OFF_PORTS: usize = 28;
const OFF_ADDRS: usize = 36;
// flow_keys_hash_length: sizeof(struct flow_keys) (80, 8-aligned) less the offset and the part of
// the address union not in use; the 4 bytes of tail padding stay in, as zeros.
const LEN_V4: usize = 80 - 8 - (32 - 8);
const LEN_V6: usize = 80 - 8;

/// The routers' hash settings: `net.ipv4.fib_multipath_hash_seed` and the family's
/// `fib_multipath_hash_fields`, with `fib_multipath_hash_policy=3` (no other policy is supported).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashParams {
    pub seed: u32,
    pub fields: u32,
}

impl HashParams {
    /// The cluster's settings (docs/cluster.md) with `seed`.
    pub const fn cluster(seed: u32) -> HashParams {
        HashParams {
            seed,
            fields: CLUSTER_FIELDS,
        }
    }
}

/// The hash a router's kernel uses to choose the next hop of a forwarded TCP packet from `src` to
/// `dst` (after `fib_multipath_hash`'s `>> 1`). `None` when it cannot be known: seed 0 (the
/// kernel's random one), fields the kernel refuses, mixed address families, or an IPv6 flow with
/// the flow-label field. IPv4-mapped IPv6 addresses count as IPv4.
pub fn flow_hash(p: &HashParams, src: SocketAddr, dst: SocketAddr) -> Option<u32> {
    outer_hash(p, src, dst).map(|h| jhash_2words(h, 0, 0) >> 1)
}

/// The hash of a route lookup made without a packet (`fib_multipath_custom_hash_fl4`,
/// `rt6_multipath_custom_hash_fl6`): the route of a local socket bound to its port before it
/// connects, or `ip -6 route get`.
pub fn output_flow_hash(p: &HashParams, src: SocketAddr, dst: SocketAddr) -> Option<u32> {
    outer_hash(p, src, dst).map(|h| h >> 1)
}

/// The bucket of a resilient group of `buckets` that a router forwards the packet to
/// (`nexthop_select_path_res`); `None` as for [`flow_hash`], or for a group of no bucket.
pub fn bucket(p: &HashParams, src: SocketAddr, dst: SocketAddr, buckets: u16) -> Option<u16> {
    if buckets == 0 {
        return None;
    }
    let h = flow_hash(p, src, dst)?;
    u16::try_from(h % u32::from(buckets)).ok()
}

/// Steps 1-3: the flow keys' SipHash (`fib_multipath_custom_hash_outer` / `_fl4` / `_fl6`).
fn outer_hash(p: &HashParams, src: SocketAddr, dst: SocketAddr) -> Option<u32> {
    if p.seed == 0 || p.fields == 0 || p.fields & !ALL_MASK != 0 {
        return None;
    }
    let f = p.fields;
    let mut keys = [0u8; LEN_V6];
    let addr_len = match (src.ip().to_canonical(), dst.ip().to_canonical()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            put_addrs(&mut keys, f, &s.octets(), &d.octets());
            4
        }
        // The flow label of a TCP socket's packets is the socket's own choice.
        (IpAddr::V6(_), IpAddr::V6(_)) if f & FIELD_FLOWLABEL != 0 => return None,
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            put_addrs(&mut keys, f, &s.octets(), &d.octets());
            16
        }
        _ => return None,
    };
    // No outer field selected: the kernel returns 0 without hashing.
    if f & OUTER_MASK == 0 {
        return Some(0);
    }
    if f & FIELD_IP_PROTO != 0 {
        keys[OFF_IP_PROTO] = IPPROTO_TCP;
    }
    if f & FIELD_SRC_PORT != 0 {
        keys[OFF_PORTS..OFF_PORTS + 2].copy_from_slice(&src.port().to_be_bytes());
    }
    if f & FIELD_DST_PORT != 0 {
        keys[OFF_PORTS + 2..OFF_PORTS + 4].copy_from_slice(&dst.port().to_be_bytes());
    }
    consistentify(&mut keys, addr_len);
    let len = if addr_len == 4 { LEN_V4 } else { LEN_V6 };
    // fib_multipath_hash_construct_key: the seed in both halves of both 64-bit key words.
    let word = (u64::from(p.seed) << 32) | u64::from(p.seed);
    let mut sip = SipHasher24::new_with_keys(word, word);
    sip.write(&keys[..len]);
    // __flow_hash_from_keys keeps the low 32 bits and never returns 0.
    let h = sip.finish() as u32;
    Some(h.max(1))
}

/// The selected addresses into the keys' `addrs` (source, then destination).
fn put_addrs(keys: &mut [u8], fields: u32, src: &[u8], dst: &[u8]) {
    let n = src.len();
    if fields & FIELD_SRC_IP != 0 {
        keys[OFF_ADDRS..OFF_ADDRS + n].copy_from_slice(src);
    }
    if fields & FIELD_DST_IP != 0 {
        keys[OFF_ADDRS + n..OFF_ADDRS + 2 * n].copy_from_slice(dst);
    }
}

/// `__flow_hash_consistentify`: the smaller address first, and apart from it the smaller port
/// first, so that a flow and its reply hash alike. IPv4 addresses and ports compare as the
/// router's (little-endian) integers of their bytes, IPv6 addresses byte by byte (memcmp).
fn consistentify(keys: &mut [u8], addr_len: usize) {
    let (src, dst) = keys[OFF_ADDRS..OFF_ADDRS + 2 * addr_len].split_at_mut(addr_len);
    let swap_addrs = if addr_len == 4 {
        let le = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        le(dst) < le(src)
    } else {
        *dst < *src
    };
    if swap_addrs {
        src.swap_with_slice(dst);
    }
    let (sport, dport) = keys[OFF_PORTS..OFF_PORTS + 4].split_at_mut(2);
    if u16::from_le_bytes([dport[0], dport[1]]) < u16::from_le_bytes([sport[0], sport[1]]) {
        sport.swap_with_slice(dport);
    }
}

/// `jhash_2words` (include/linux/jhash.h): Bob Jenkins' final mix of (a, b, 0).
fn jhash_2words(a: u32, b: u32, initval: u32) -> u32 {
    const JHASH_INITVAL: u32 = 0xdead_beef;
    let iv = initval.wrapping_add(JHASH_INITVAL).wrapping_add(2 << 2);
    let (mut a, mut b, mut c) = (a.wrapping_add(iv), b.wrapping_add(iv), iv);
    // __jhash_final
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(14));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(11));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(25));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(16));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(4));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(14));
    c ^= b;
    c.wrapping_sub(b.rotate_left(24))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// Buckets Linux 6.18 chose (a resilient group of 64 buckets, the cluster's fields) in the
    /// setup of tests/multipath_hash_netns.rs: seed, source, destination, bucket. IPv4 from
    /// `ip route get ... iif` (which builds a packet) and real forwarded packets, IPv6 from real
    /// forwarded packets.
    const FORWARDED: &str = "
        5eed0000 10.96.51.231:29514 10.97.72.185:11295 51
        5eed0000 10.96.223.61:30338 10.97.62.169:6171 54
        5eed0001 10.96.164.92:15995 10.97.164.49:21578 46
        5eed0001 10.96.77.44:10417 10.97.254.181:14001 1
        5eed0002 10.98.0.1:6563 10.97.206.52:29848 21
        5eed0003 10.96.61.122:39350 10.97.160.64:34728 36
        5eed0003 10.96.108.221:17323 10.97.103.155:61957 30
        5eed0004 10.96.78.239:17076 10.97.160.190:7700 25
        5eed0005 10.96.29.61:864 10.97.175.59:21587 28
        5eed0009 10.96.255.255:15921 10.97.112.193:32742 18
        deadbeef 10.96.61.66:7077 10.97.68.89:26027 0
        deadbeef 10.96.216.1:19920 10.97.27.228:31365 59
        5eed0003 [fd96::9b58:9443]:337 [fd96:0:0:1::56f4]:8250 21
        5eed0003 [fd96::e12d:c632]:7085 [fd96:0:0:1::1990]:46552 12
        5eed0003 [fd96::afaa:f0e9]:53460 [fd96:0:0:1::2a2d]:44962 8";

    /// The same without a packet: the SYNs of local connections from a bound port, and IPv6's
    /// `ip -6 route get` (with and without `iif`).
    const WITHOUT_PACKET: &str = "
        5eed000a 10.98.0.1:41044 10.97.145.165:43315 9
        5eed000a 10.98.0.1:49851 10.97.76.12:58812 20
        5eed000a [fd98::1]:61845 [fd96:0:0:1::65e0]:24051 42
        5eed0002 [fd96::586d:1cf2]:6563 [fd96:0:0:1::562]:29848 52
        5eed0002 [fd96::9a6:274c]:532 [fd96:0:0:1::664b]:26843 50
        5eed0002 [fd98::1]:14397 [fd96:0:0:1::62af]:4253 6";

    fn known(table: &str) -> impl Iterator<Item = (HashParams, SocketAddr, SocketAddr, u32)> + '_ {
        table.lines().filter(|l| !l.trim().is_empty()).map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let seed = u32::from_str_radix(w[0], 16).unwrap();
            (
                HashParams::cluster(seed),
                sa(w[1]),
                sa(w[2]),
                w[3].parse().unwrap(),
            )
        })
    }

    #[test]
    fn buckets_the_kernel_chose() {
        for (p, src, dst, want) in known(FORWARDED) {
            let got = bucket(&p, src, dst, 64).map(u32::from);
            assert_eq!(got, Some(want), "seed {:#x} {src} -> {dst}", p.seed);
        }
        for (p, src, dst, want) in known(WITHOUT_PACKET) {
            let got = output_flow_hash(&p, src, dst).map(|h| h % 64);
            assert_eq!(got, Some(want), "seed {:#x} {src} -> {dst}", p.seed);
        }
    }

    /// xorshift64: reproducible random flows.
    fn flows(n: usize, v6: bool) -> Vec<(SocketAddr, SocketAddr)> {
        let mut x = 0x5EED_0000_2545_F491u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let addr = |next: &mut dyn FnMut() -> u64| {
            let r = next();
            let ip = if v6 {
                IpAddr::from(std::net::Ipv6Addr::from(
                    (u128::from(r) << 64) | u128::from(next()),
                ))
            } else {
                IpAddr::from(std::net::Ipv4Addr::from((r >> 32) as u32))
            };
            SocketAddr::new(ip, r as u16)
        };
        (0..n).map(|_| (addr(&mut next), addr(&mut next))).collect()
    }

    #[test]
    fn a_flow_and_its_reply_share_a_bucket() {
        let p = HashParams::cluster(0x5EED_0007);
        for (s, d) in flows(2000, false).into_iter().chain(flows(2000, true)) {
            assert_eq!(flow_hash(&p, s, d), flow_hash(&p, d, s), "{s} -> {d}");
            assert_eq!(output_flow_hash(&p, s, d), output_flow_hash(&p, d, s));
            assert_eq!(bucket(&p, s, d, 64), bucket(&p, d, s, 64));
        }
    }

    #[test]
    fn addresses_and_ports_are_sorted_apart() {
        // __flow_hash_consistentify sorts each pair on its own: swapping only the ports is the
        // same flow to the hash.
        let p = HashParams::cluster(0x5EED_0008);
        for (s, d) in flows(200, false).into_iter().chain(flows(200, true)) {
            let (s2, d2) = (
                SocketAddr::new(s.ip(), d.port()),
                SocketAddr::new(d.ip(), s.port()),
            );
            assert_eq!(flow_hash(&p, s, d), flow_hash(&p, s2, d2));
        }
    }

    #[test]
    fn buckets_spread_over_the_group() {
        let p = HashParams::cluster(0x5EED_0006);
        let mut seen = [0u32; 64];
        for (s, d) in flows(6400, false) {
            seen[usize::from(bucket(&p, s, d, 64).unwrap())] += 1;
        }
        assert!(seen.iter().all(|&n| n > 40), "{seen:?}");
    }

    #[test]
    fn fields_choose_what_is_hashed() {
        let (s, d) = (sa("10.96.1.2:1000"), sa("10.97.3.4:443"));
        let moved = SocketAddr::new(s.ip(), 2000);
        let no_ports = HashParams {
            seed: 0x5EED_0001,
            fields: FIELD_SRC_IP | FIELD_DST_IP | FIELD_IP_PROTO,
        };
        assert_eq!(flow_hash(&no_ports, s, d), flow_hash(&no_ports, moved, d));
        let cluster = HashParams::cluster(0x5EED_0001);
        assert_ne!(flow_hash(&cluster, s, d), flow_hash(&cluster, moved, d));
        // Only inner fields: the kernel's outer hash is 0, whatever the flow.
        let inner = HashParams {
            seed: 1,
            fields: 0x0fc0,
        };
        assert_eq!(flow_hash(&inner, s, d), Some(jhash_2words(0, 0, 0) >> 1));
    }

    #[test]
    fn what_cannot_be_known_is_none() {
        let (s4, d4) = (sa("10.96.1.2:1000"), sa("10.97.3.4:443"));
        let (s6, d6) = (sa("[fd96::1]:1000"), sa("[fd96::2]:443"));
        // Seed 0: the kernel's own random seed.
        assert_eq!(flow_hash(&HashParams::cluster(0), s4, d4), None);
        let p = HashParams::cluster(0x5EED_0001);
        assert_eq!(flow_hash(&p, s4, d6), None);
        assert_eq!(bucket(&p, s4, d4, 0), None);
        for fields in [0, 0x1000] {
            assert_eq!(flow_hash(&HashParams { seed: 1, fields }, s4, d4), None);
        }
        // The flow label: IPv6 only (IPv4 has none, the kernel ignores the bit there).
        let label = HashParams {
            seed: 1,
            fields: CLUSTER_FIELDS | FIELD_FLOWLABEL,
        };
        assert_eq!(flow_hash(&label, s6, d6), None);
        assert_eq!(
            flow_hash(&label, s4, d4),
            flow_hash(&HashParams { seed: 1, ..p }, s4, d4)
        );
    }

    #[test]
    fn mapped_addresses_count_as_ipv4() {
        let p = HashParams::cluster(0x5EED_0001);
        let (s, d) = (sa("10.96.164.92:15995"), sa("10.97.164.49:21578"));
        let (ms, md) = (
            sa("[::ffff:10.96.164.92]:15995"),
            sa("[::ffff:10.97.164.49]:21578"),
        );
        assert_eq!(bucket(&p, ms, md, 64), Some(46));
        assert_eq!(flow_hash(&p, ms, md), flow_hash(&p, s, d));
    }
}
