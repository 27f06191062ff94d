//! The userspace multipath hash (`perigee::gateway::cluster::hash`) against this machine's kernel.
//! Namespaces pm-<tag>-r and pm-<tag>-s (prefix `pm` is this file's): the router `r` hashes as the
//! hub cluster's routers do (docs/cluster.md) with a random seed and sends 10.96.0.0/15 and
//! fd96::/63 through a resilient group of 64 buckets over 64 next-hop objects, one per veth `dK`
//! (NOARP: a packet leaves at once); `s` sends packets in over `c0` and swallows what leaves `dK`
//! at its peer `eK`. For random TCP flows the kernel says which next hop it picks (`ip route get`,
//! real forwarded packets, real local connections) and the computed bucket must lead there.
mod common;
use common::{in_ns, serial};
use perigee::gateway::cluster::hash::{flow_hash, output_flow_hash, HashParams, CLUSTER_BUCKETS};
use perigee_testkit::{run, run_stdin, NetnsGuard, HUNG};
use std::collections::HashSet;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

type Flow = (SocketAddr, SocketAddr);
type Hash = fn(&HashParams, SocketAddr, SocketAddr) -> Option<u32>;

const N: usize = CLUSTER_BUCKETS as usize;
/// The router's own addresses (on `r0`; `c0` in `s` has .2 and ::2).
const ROUTER: [&str; 2] = ["10.98.0.1", "fd98::1"];
/// The router's settings: forwarding, the cluster's hash; loose source validation, as the flows'
/// sources lie in the routed prefixes too (a reply's lookup passes it as well as the flow's).
const SYSCTLS: &[(&str, &str)] = &[
    ("ipv4/ip_forward", "1"),
    ("ipv6/conf/all/forwarding", "1"),
    ("ipv4/conf/all/rp_filter", "2"),
    ("ipv4/conf/r0/rp_filter", "2"),
    ("ipv4/fib_multipath_hash_policy", "3"),
    ("ipv4/fib_multipath_hash_fields", "0x0037"),
    ("ipv6/fib_multipath_hash_policy", "3"),
    ("ipv6/fib_multipath_hash_fields", "0x0037"),
];
const R_LINK: &str =
    "addr add 10.98.0.1/24 dev r0\naddr add fd98::1/64 dev r0 nodad\nlink set r0 up\n";
const S_SETUP: &str = "addr add 10.98.0.2/24 dev c0\naddr add fd98::2/64 dev c0 nodad
link set c0 up\nroute add 10.96.0.0/15 via 10.98.0.1\nroute add fd96::/63 via fd98::1\n";
/// A group has no family of its own (the kernel refuses one): these go in a batch without -6.
const RESILIENT: &str = "type resilient buckets 64 idle_timer 0 unbalanced_timer 0";
const ROUTES: &str = "route add 10.96.0.0/15 nhid 1000\nroute add fd96::/63 nhid 1001\n";

/// The two namespaces, and the device (K of `dK`) each bucket of the IPv4 and IPv6 group leads to.
struct Lab {
    r: String,
    s: String,
    seed: u32,
    dev: [Vec<usize>; 2],
    _nets: NetnsGuard,
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// `ip -n ns -j [-6] -batch -` with `cmds` on its stdin; its output.
fn batch(ns: &str, v6: bool, cmds: &str) -> String {
    let family: &[&str] = if v6 { &["-6"] } else { &[] };
    let args = [&["ip", "-n", ns, "-j"], family, &["-batch", "-"]].concat();
    run_stdin(&args, cmds)
}

/// The lines `f(K)` for every device K.
fn each(f: &dyn Fn(usize) -> String) -> String {
    (0..N).map(|k| f(k) + "\n").collect()
}

impl Lab {
    /// Device `dK` has ifindex 1000 + K and peer `eK`; its IPv4 next hop is 1 + K, its IPv6 one
    /// 100 + K; the groups are 1000 (IPv4) and 1001 (IPv6).
    fn new(tag: &str, seed: u32) -> Lab {
        let [r, s] = ["r", "s"].map(|x| format!("pm-{tag}-{x}"));
        let nets = NetnsGuard::with_loopback_up(&[&r, &s]);
        let link = format!("link add r0 type veth peer name c0 netns {s}\n{R_LINK}");
        let devs = each(&|k| {
            let add = format!("link add d{k} index {} type veth peer name e{k}", 1000 + k);
            format!("{add} netns {s}\nlink set d{k} addrgenmode none arp off\nlink set d{k} up")
        });
        batch(&r, false, &(link + &devs));
        let peers = each(&|k| format!("link set e{k} up")) + S_SETUP;
        batch(&s, false, &peers);
        // A next hop needs its device's carrier: the peers are up by now.
        let [nh4, nh6] =
            [1, 100].map(|first| each(&|k| format!("nexthop add id {} dev d{k}", first + k)));
        batch(&r, false, &nh4);
        batch(&r, true, &nh6);
        let group = |id: usize, first: usize| {
            let ids: Vec<String> = (first..first + N).map(|i| i.to_string()).collect();
            format!("nexthop add id {id} group {} {RESILIENT}\n", ids.join("/"))
        };
        batch(&r, false, &(group(1000, 1) + &group(1001, 100) + ROUTES));
        // /proc/sys/net is the writing thread's namespace's.
        in_ns(&r, move || {
            let seed = seed.to_string();
            let seed = [("ipv4/fib_multipath_hash_seed", &*seed)];
            for (key, value) in SYSCTLS.iter().copied().chain(seed) {
                std::fs::write(format!("/proc/sys/net/{key}"), value).expect(key);
            }
        });
        let table = |group: usize, first: u64| {
            let id = group.to_string();
            let rows = json(&run(&[
                "ip", "-n", &r, "-j", "nexthop", "bucket", "show", "id", &id,
            ]));
            let mut devs = vec![None; N];
            for b in rows.as_array().unwrap().iter().map(|row| &row["bucket"]) {
                let nh = b["nhid"].as_u64().unwrap();
                devs[b["index"].as_u64().unwrap() as usize] = Some((nh - first) as usize);
            }
            devs.into_iter()
                .collect::<Option<Vec<_>>>()
                .expect("every bucket")
        };
        eprintln!("{r}: seed {seed:#010x}");
        let dev = [table(1000, 1), table(1001, 100)];
        Lab {
            r,
            s,
            seed,
            dev,
            _nets: nets,
        }
    }

    /// `ip route get` for each flow (`iif r0`: as if it came in there): the device it names.
    fn route_get(&self, flows: &[Flow], iif: bool) -> Vec<usize> {
        let via = if iif { "iif r0 " } else { "" };
        let cmds: String = flows
            .iter()
            .map(|(s, d)| {
                let (ip, sp, dp) = (d.ip(), s.port(), d.port());
                format!(
                    "route get {ip} from {} {via}ipproto tcp sport {sp} dport {dp}\n",
                    s.ip()
                )
            })
            .collect();
        let out = batch(&self.r, false, &cmds);
        let dev = |l: &str| json(l)[0]["dev"].as_str().unwrap()[1..].parse().unwrap();
        let devs: Vec<usize> = out.lines().map(dev).collect();
        assert_eq!(devs.len(), flows.len(), "{out}");
        devs
    }

    /// Checks that each flow's device is the one its computed bucket leads to.
    fn check(&self, what: &str, hash: Hash, flows: &[Flow], devs: &[usize]) {
        let p = HashParams::cluster(self.seed);
        let mut wrong = Vec::new();
        for (&(s, d), &dev) in flows.iter().zip(devs) {
            let b = hash(&p, s, d).expect("a known hash") % u32::from(CLUSTER_BUCKETS);
            let want = self.dev[usize::from(s.is_ipv6())][b as usize];
            if want != dev {
                wrong.push(format!(
                    "{s} -> {d}: kernel d{dev}, computed d{want} (bucket {b})"
                ));
            }
        }
        let (n, used) = (flows.len(), devs.iter().collect::<HashSet<_>>().len());
        let right = n - wrong.len();
        eprintln!("{what}: {right} of {n} flows as computed, over {used} next hops");
        assert!(
            wrong.is_empty(),
            "{what}: {} wrong: {wrong:#?}",
            wrong.len()
        );
        // A kernel (or a test) that sent everything one way would prove nothing.
        assert!(
            used >= 32.min(n / 4),
            "{what}: the kernel used only {used} next hops"
        );
    }
}

/// xorshift64 from /dev/urandom: the seed and the flows differ from run to run.
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let mut b = [0u8; 8];
        let mut random = std::fs::File::open("/dev/urandom").unwrap();
        random.read_exact(&mut b).unwrap();
        Rng(u64::from_ne_bytes(b) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// An address in the routed prefix: 10.96.0.0/15 or fd96::/63.
    fn routed(&mut self, v6: bool) -> IpAddr {
        if v6 {
            let hi = u128::from(0xfd96_0000_0000_0000 | (self.next() & 1));
            IpAddr::V6(Ipv6Addr::from((hi << 64) | u128::from(self.next())))
        } else {
            IpAddr::V4(Ipv4Addr::from(
                0x0a60_0000 | (self.next() as u32 & 0x1_ffff),
            ))
        }
    }

    /// `n` flows from `from` (None: a routed address too) to routed addresses, ports 1-65535.
    fn flows(&mut self, v6: bool, n: usize, from: Option<IpAddr>) -> Vec<Flow> {
        let mut flow = || {
            let src = from.unwrap_or_else(|| self.routed(v6));
            let dst = std::iter::repeat_with(|| self.routed(v6))
                .find(|d| *d != src)
                .unwrap();
            let (sp, dp) = ((self.next() as u16).max(1), (self.next() as u16).max(1));
            (SocketAddr::new(src, sp), SocketAddr::new(dst, dp))
        };
        (0..n).map(|_| flow()).collect()
    }
}

/// A socket in the calling thread's network namespace.
fn socket(domain: i32, kind: i32, proto: i32) -> OwnedFd {
    // SAFETY: socket(2) takes no pointers.
    let fd = unsafe { libc::socket(domain, kind, proto) };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    // SAFETY: a new fd that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// `a` for bind and connect on an AF_INET6 socket, which speaks IPv4 to a mapped address.
fn sockaddr6(a: SocketAddr) -> libc::sockaddr_in6 {
    // SAFETY: all zeroes is a valid sockaddr_in6.
    let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    sa.sin6_port = a.port().to_be();
    sa.sin6_addr.s6_addr = match a.ip() {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    };
    sa
}

/// A TCP SYN of `(s, d)` with its IP header, as an IPPROTO_RAW socket sends it.
fn syn((s, d): Flow) -> Vec<u8> {
    let ip: Vec<u8> = match (s.ip(), d.ip()) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let head = [0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0];
            [&head[..], &a.octets(), &b.octets()].concat()
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            [&[0x60, 0, 0, 0, 0, 20, 6, 64][..], &a.octets(), &b.octets()].concat()
        }
        _ => unreachable!(),
    };
    let tcp = [0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0];
    let ports = [s.port().to_be_bytes(), d.port().to_be_bytes()].concat();
    [&ip[..], &ports, &tcp].concat()
}

/// The flow of a TCP packet as a packet socket hands it over (from the IP header on).
fn tcp_flow(p: &[u8]) -> Option<Flow> {
    let (src, dst, l4): (IpAddr, IpAddr, usize) = match p.first()? >> 4 {
        4 if p.get(9) == Some(&6) => {
            let a = |i: usize| IpAddr::from(<[u8; 4]>::try_from(&p[i..i + 4]).unwrap());
            (a(12), a(16), usize::from(p[0] & 0x0f) * 4)
        }
        6 if p.get(6) == Some(&6) && p.len() >= 40 => {
            let a = |i: usize| IpAddr::from(<[u8; 16]>::try_from(&p[i..i + 16]).unwrap());
            (a(8), a(24), 40)
        }
        _ => return None,
    };
    let port = |i: usize| Some(u16::from_be_bytes([*p.get(l4 + i)?, *p.get(l4 + i + 1)?]));
    Some((
        SocketAddr::new(src, port(0)?),
        SocketAddr::new(dst, port(2)?),
    ))
}

/// An AF_PACKET socket in `ns`, which sees what its devices send (std's UdpSocket lends it its
/// read timeout).
fn tap(ns: &str) -> UdpSocket {
    let all = i32::from((libc::ETH_P_ALL as u16).to_be());
    let tap = UdpSocket::from(in_ns(ns, move || {
        socket(libc::AF_PACKET, libc::SOCK_DGRAM, all)
    }));
    tap.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    tap
}

/// The device (K of `dK`) that `flow`'s packet leaves the router by, seen on `tap`; `send` sends
/// it (again each second: a first one may wait for a neighbour and be lost).
fn sent_on(lab: &Lab, tap: &UdpSocket, flow: Flow, send: &dyn Fn()) -> usize {
    let (start, mut sent) = (Instant::now(), Instant::now() - Duration::from_secs(1));
    let mut buf = [0u8; 2048];
    while start.elapsed() < HUNG {
        if sent.elapsed() >= Duration::from_secs(1) {
            send();
            sent = Instant::now();
        }
        // SAFETY: all zeroes is a valid sockaddr_ll.
        let mut ll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        let (fd, from) = (tap.as_raw_fd(), (&mut ll as *mut libc::sockaddr_ll).cast());
        // SAFETY: recvfrom writes at most the lengths given.
        let n =
            unsafe { libc::recvfrom(fd, buf.as_mut_ptr().cast(), buf.len(), 0, from, &mut len) };
        let outgoing = n > 0 && ll.sll_pkttype == libc::PACKET_OUTGOING;
        if outgoing && tcp_flow(&buf[..n as usize]) == Some(flow) {
            return usize::try_from(ll.sll_ifindex - 1000).expect("a packet that left by a dK");
        }
    }
    panic!("{flow:?}: no packet left {} within {HUNG:?}", lab.r);
}

/// The router's own connection attempt, from a bound port (from an ephemeral one the kernel
/// routes the SYN as if from a random port: FLOWI_FLAG_ANY_SPORT).
fn connect(lab: &Lab, (src, dst): Flow) -> OwnedFd {
    in_ns(&lab.r, move || {
        let fd = socket(libc::AF_INET6, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        let len = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        let [s, d] = [sockaddr6(src), sockaddr6(dst)];
        let [s, d] = [&s, &d].map(|a| (a as *const libc::sockaddr_in6).cast());
        // SAFETY: bind and connect with addresses of the length given.
        let b = unsafe { libc::bind(fd.as_raw_fd(), s, len) };
        let c = unsafe { libc::connect(fd.as_raw_fd(), d, len) };
        let e = std::io::Error::last_os_error();
        let started = b == 0 && c == -1 && e.raw_os_error() == Some(libc::EINPROGRESS);
        assert!(started, "bind {b}, connect {c}: {e}");
        fd
    })
}

fn run_family(v6: bool) {
    let mut rng = Rng::new();
    let lab = Lab::new(if v6 { "v6" } else { "v4" }, (rng.next() as u32).max(1));
    // IPv4's `ip route get` builds a packet and hashes it as a forwarded one; IPv6's passes none.
    let lookup: Hash = if v6 { output_flow_hash } else { flow_hash };
    let flows = rng.flows(v6, 500, None);
    let replies: Vec<Flow> = flows.iter().map(|&(s, d)| (d, s)).collect();
    let router: IpAddr = ROUTER[usize::from(v6)].parse().unwrap();
    let local = rng.flows(v6, 200, Some(router));
    for (what, flows, iif) in [
        ("ip route get iif, flows", &flows, true),
        ("ip route get iif, their replies", &replies, true),
        ("ip route get, output path", &local, false),
    ] {
        lab.check(what, lookup, flows, &lab.route_get(flows, iif));
    }

    // Real packets: SYNs sent in to be forwarded (from a raw socket, std's UdpSocket lending it
    // its send_to), and SYNs of the router's own connections (TCP sends them again itself).
    let tap = tap(&lab.r);
    let family = if v6 { libc::AF_INET6 } else { libc::AF_INET };
    let raw = in_ns(&lab.s, move || {
        socket(family, libc::SOCK_RAW, libc::IPPROTO_RAW)
    });
    let raw = UdpSocket::from(raw);
    let send = |f: Flow| {
        raw.send_to(&syn(f), (f.1.ip(), 0)).expect("send");
    };
    let flows = rng.flows(v6, 200, None);
    let devs: Vec<usize> = flows
        .iter()
        .map(|&f| sent_on(&lab, &tap, f, &|| send(f)))
        .collect();
    lab.check("forwarded packets", flow_hash, &flows, &devs);
    let flows = rng.flows(v6, 100, Some(router));
    let syn_of = |f: Flow| (connect(&lab, f), sent_on(&lab, &tap, f, &|| ())).1;
    let devs: Vec<usize> = flows.iter().map(|&f| syn_of(f)).collect();
    lab.check("local connections", output_flow_hash, &flows, &devs);
}

#[test]
fn ipv4_flows_take_the_bucket_computed() {
    let Some(_serial) = serial() else { return };
    run_family(false);
}

#[test]
fn ipv6_flows_take_the_bucket_computed() {
    let Some(_serial) = serial() else { return };
    run_family(true);
}
