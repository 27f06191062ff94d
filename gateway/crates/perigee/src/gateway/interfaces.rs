//! `GET /v1/interfaces`: the box's network interfaces with their addresses and state, so the
//! dashboard offers real interfaces when it sets the config's `interfaces` (getifaddrs(3) for the
//! addresses and flags, /sys/class/net for the link's operational state, MTU and MAC).
use super::config::{GatewayConfig, Role};
pub use super::reports::{InterfaceCounters, LinkInterface};
use schemars::JsonSchema;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::IpAddr;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InterfaceList {
    pub interfaces: Vec<NetInterface>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConfiguredAs {
    Lan,
    Satellite,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NetInterface {
    pub name: String,
    /// The kernel's operational state (/sys/class/net/NAME/operstate): up, down, dormant,
    /// lowerlayerdown, unknown (virtual links without carrier detection report unknown).
    pub oper_state: String,
    /// Administratively up (IFF_UP).
    pub up: bool,
    /// Has carrier and is passing traffic (IFF_RUNNING).
    pub running: bool,
    pub loopback: bool,
    pub mtu: Option<u32>,
    pub mac: Option<String>,
    /// Addresses with their prefix length ("192.0.2.1/24"), IPv4 first; IPv6 link-local ones
    /// included.
    pub addresses: Vec<String>,
    /// What the running config uses it for; null when it uses it for nothing.
    pub configured_as: Option<ConfiguredAs>,
}

fn sys_attr(name: &str, attr: &str) -> Option<String> {
    // An interface name is at most 15 of [A-Za-z0-9_.:@-] from the kernel's own list: no '/' or "..".
    std::fs::read_to_string(format!("/sys/class/net/{name}/{attr}"))
        .ok()
        .map(|s| s.trim().to_string())
}

fn prefix_len(mask: IpAddr) -> u32 {
    match mask {
        IpAddr::V4(m) => u32::from(m).count_ones(),
        IpAddr::V6(m) => u128::from(m).count_ones(),
    }
}

/// The interfaces the kernel has now; `cfg` (the running config, if any) marks the ones it uses.
pub fn list(cfg: Option<&GatewayConfig>) -> std::io::Result<InterfaceList> {
    let mut by_name: BTreeMap<String, (u32, Vec<(IpAddr, u32)>)> = BTreeMap::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, valid until freeifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        let entry = by_name.entry(name).or_default();
        entry.0 |= ifa.ifa_flags;
        let (Some(addr), Some(mask)) = (sockaddr_ip(ifa.ifa_addr), sockaddr_ip(ifa.ifa_netmask))
        else {
            continue;
        };
        entry.1.push((addr, prefix_len(mask)));
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    let used = |name: &str| {
        let cfg = cfg?;
        if cfg.interfaces.satellite == name {
            Some(ConfiguredAs::Satellite)
        } else if cfg.interfaces.lan.iter().any(|l| l == name) {
            Some(ConfiguredAs::Lan)
        } else {
            None
        }
    };
    let interfaces = by_name
        .into_iter()
        .map(|(name, (flags, mut addrs))| {
            addrs.sort_by_key(|(a, _)| (a.is_ipv6(), *a));
            let flag = |f: libc::c_int| flags & f as u32 != 0;
            NetInterface {
                oper_state: sys_attr(&name, "operstate").unwrap_or_else(|| "unknown".into()),
                up: flag(libc::IFF_UP),
                running: flag(libc::IFF_RUNNING),
                loopback: flag(libc::IFF_LOOPBACK),
                mtu: sys_attr(&name, "mtu").and_then(|m| m.parse().ok()),
                mac: sys_attr(&name, "address")
                    .filter(|m| !m.is_empty() && m != "00:00:00:00:00:00"),
                addresses: addrs.iter().map(|(a, l)| format!("{a}/{l}")).collect(),
                configured_as: used(&name),
                name,
            }
        })
        .collect();
    Ok(InterfaceList { interfaces })
}

/// Every interface's counters in this process's network namespace (/proc/net/dev: per
/// namespace, unlike /sys/class/net, which shows the namespace sysfs was mounted in): what the
/// kernel counts for every frame sent or received there, whatever the gateway did with it.
/// Byte counts include the link-layer header (14 bytes on Ethernet and veth).
fn read_all() -> Vec<InterfaceCounters> {
    std::fs::read_to_string("/proc/net/dev")
        .map(|t| parse_proc_net_dev(&t))
        .unwrap_or_default()
}

/// The lines of /proc/net/dev after its two header lines: `name: rx_bytes rx_packets rx_errs
/// rx_drop fifo frame compressed multicast tx_bytes tx_packets tx_errs tx_drop ...`.
fn parse_proc_net_dev(text: &str) -> Vec<InterfaceCounters> {
    text.lines()
        .skip(2)
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let v: Vec<u64> = rest
                .split_whitespace()
                .map(|x| x.parse().ok())
                .collect::<Option<_>>()?;
            (v.len() >= 12).then(|| InterfaceCounters {
                name: name.trim().to_string(),
                rx_bytes: v[0],
                rx_packets: v[1],
                rx_errors: v[2],
                rx_dropped: v[3],
                tx_bytes: v[8],
                tx_packets: v[9],
                tx_errors: v[10],
                tx_dropped: v[11],
            })
        })
        .collect()
}

/// One interface's counters; None when this namespace has no such interface.
pub fn counters(name: &str) -> Option<InterfaceCounters> {
    read_all().into_iter().find(|c| c.name == name)
}

/// Every interface's counters but loopback's, by name.
pub fn all_counters() -> Vec<InterfaceCounters> {
    let mut all: Vec<InterfaceCounters> =
        read_all().into_iter().filter(|c| c.name != "lo").collect();
    all.sort_by(|a, b| a.name.cmp(&b.name));
    all
}

/// The satellite interface's frames in the link's directions: a hub sends forward on it, a
/// terminal sends the return link. None while no config is installed or the interface is
/// missing.
pub fn link_interface(cfg: &GatewayConfig, configured: bool) -> Option<LinkInterface> {
    if !configured {
        return None;
    }
    let c = counters(&cfg.interfaces.satellite)?;
    Some(link_directions(c, cfg.role == Role::Hub))
}

/// An interface's rx/tx counters as forward/return: `sends_forward` for a hub.
pub fn link_directions(c: InterfaceCounters, sends_forward: bool) -> LinkInterface {
    let (fwd, ret) = if sends_forward {
        (
            (c.tx_bytes, c.tx_packets, c.tx_dropped),
            (c.rx_bytes, c.rx_packets, c.rx_dropped),
        )
    } else {
        (
            (c.rx_bytes, c.rx_packets, c.rx_dropped),
            (c.tx_bytes, c.tx_packets, c.tx_dropped),
        )
    };
    LinkInterface {
        name: c.name,
        forward_bytes: fwd.0,
        return_bytes: ret.0,
        forward_packets: fwd.1,
        return_packets: ret.1,
        forward_dropped: fwd.2,
        return_dropped: ret.2,
        errors: c.rx_errors + c.tx_errors,
    }
}

fn sockaddr_ip(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: a non-null sockaddr from getifaddrs; its family says how large it is.
    let family = i32::from(unsafe { (*sa).sa_family });
    match family {
        libc::AF_INET => {
            // SAFETY: AF_INET means a sockaddr_in.
            let sin = unsafe { &*(sa as *const libc::sockaddr_in) };
            Some(IpAddr::from(
                u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
            ))
        }
        libc::AF_INET6 => {
            // SAFETY: AF_INET6 means a sockaddr_in6.
            let sin6 = unsafe { &*(sa as *const libc::sockaddr_in6) };
            Some(IpAddr::from(sin6.sin6_addr.s6_addr))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::config::{example_json, from_value};

    #[test]
    fn lists_loopback_with_its_addresses_and_marks_configured_ones() {
        let mut j = example_json();
        j["interfaces"] = serde_json::json!({"lan": ["lo"], "satellite": "sat0"});
        let cfg = from_value(j).unwrap();
        let found = list(Some(&cfg)).unwrap();
        let lo = found
            .interfaces
            .iter()
            .find(|i| i.name == "lo")
            .expect("lo");
        assert!(lo.loopback && lo.up);
        assert!(
            lo.addresses.iter().any(|a| a == "127.0.0.1/8"),
            "{:?}",
            lo.addresses
        );
        assert_eq!(lo.configured_as, Some(ConfiguredAs::Lan));
        assert!(list(None)
            .unwrap()
            .interfaces
            .iter()
            .all(|i| i.configured_as.is_none()));
    }

    #[test]
    fn loopback_counters_count_what_it_carried() {
        let before = counters("lo").expect("lo has statistics");
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.send_to(&[0u8; 1000], sock.local_addr().unwrap())
            .unwrap();
        let after = counters("lo").unwrap();
        assert!(
            after.tx_bytes >= before.tx_bytes + 1000,
            "{before:?} {after:?}"
        );
        assert!(after.rx_packets > before.rx_packets);
        assert!(all_counters().iter().all(|c| c.name != "lo"));
        assert_eq!(counters("no-such-if0"), None);
    }

    #[test]
    fn parses_proc_net_dev() {
        let text = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo:  100 2 0 0 0 0 0 0  100 2 0 0 0 0 0 0\n  sat0: 5000 40 1 2 0 0 0 0 9000 60 3 4 0 0 0 0\n";
        let all = parse_proc_net_dev(text);
        assert_eq!(all.len(), 2);
        let sat = &all[1];
        assert_eq!(
            (
                sat.name.as_str(),
                sat.rx_bytes,
                sat.rx_packets,
                sat.rx_errors,
                sat.rx_dropped
            ),
            ("sat0", 5000, 40, 1, 2)
        );
        assert_eq!(
            (sat.tx_bytes, sat.tx_packets, sat.tx_errors, sat.tx_dropped),
            (9000, 60, 3, 4)
        );
    }

    #[test]
    fn a_hub_sends_forward_a_terminal_returns() {
        let c = InterfaceCounters {
            name: "sat0".into(),
            rx_bytes: 10,
            tx_bytes: 20,
            rx_packets: 1,
            tx_packets: 2,
            rx_errors: 3,
            tx_errors: 4,
            rx_dropped: 5,
            tx_dropped: 6,
        };
        let hub = link_directions(c.clone(), true);
        assert_eq!(
            (hub.forward_bytes, hub.return_bytes, hub.forward_dropped),
            (20, 10, 6)
        );
        let terminal = link_directions(c, false);
        assert_eq!(
            (
                terminal.forward_bytes,
                terminal.return_bytes,
                terminal.return_packets
            ),
            (10, 20, 2)
        );
        assert_eq!(terminal.errors, 7);
    }
}
