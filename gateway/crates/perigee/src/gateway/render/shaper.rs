//! The aggregate egress shaper on the satellite interface, as `tc` argv.
use super::super::config::GatewayConfig;
use super::argv;

/// Major handle of our root qdisc on the satellite interface (tc reads it as hex, 0x5047 =
/// "PG"): how apply tells the shaper it installed from one somebody else did.
pub const SHAPER_HANDLE: &str = "5047:";
/// The HTB class that carries everything else (the root's `default`), and its FIFO leaf.
pub const SHAPER_CLASS: &str = "5047:1";
pub const SHAPER_LEAF: &str = "5048:";
/// The network-control class and its FIFO leaf: packets marked IP precedence 6 or 7 (DSCP 48..63,
/// CS6/CS7: what routing protocols such as BGP and BFD send) wait only behind their own kind.
pub const SHAPER_CONTROL_CLASS: &str = "5047:2";
pub const SHAPER_CONTROL_LEAF: &str = "5049:";
/// Packets the network-control leaf holds: keepalives and hellos, never a bulk queue.
const CONTROL_QUEUE_PACKETS: u32 = 64;
/// The network-control class's floor (bit/s): a BFD session at 200 ms sends ~3 kbit/s.
const CONTROL_RATE_FLOOR_BPS: u64 = 32_000;

/// The aggregate egress shaper (`shaping` in the config): an HTB root on `dev` whose default
/// class, for every packet but network control, sends at most `rate_bps`, over a `pfifo` leaf.
/// HTB + FIFO because fq, fq_codel and cake are not built into every kernel the appliance
/// must run on; with the gateway's sockets behind TCP small queues, each keeps ~2 packets in the
/// FIFO, so they take turns at the head and share the link.
///
/// Network control (IP precedence 6/7) has a class of its own beside it, capped at
/// `control_rate_bps`: behind a full FIFO (a second or more at the link rate) a routing
/// protocol's hellos arrive too late or are dropped, and a BFD session that loses four in a row
/// declares the gateway dead while it is busy serving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shaper {
    pub dev: String,
    pub rate_bps: u64,
    pub overhead_bytes: u32,
    pub queue_packets: u32,
}

impl Shaper {
    /// The `tc` argvs that install (or, run again, change in place) the shaper, in order.
    /// `replace` with our fixed handles changes an existing qdisc/class of the same kind
    /// instead of grafting a new one, so a re-apply does not flush the queue.
    pub fn install_argvs(&self) -> Vec<Vec<String>> {
        let rate = format!("{}bit", self.rate_bps);
        let dev = self.dev.as_str();
        let mut class = argv(&[
            "class",
            "replace",
            "dev",
            dev,
            "parent",
            SHAPER_HANDLE,
            "classid",
            SHAPER_CLASS,
            "htb",
            "rate",
            &rate,
            "ceil",
            &rate,
        ]);
        if self.overhead_bytes > 0 {
            class.extend(argv(&["overhead", &self.overhead_bytes.to_string()]));
        }
        let control_rate = format!("{}bit", self.control_rate_bps());
        let mut control = argv(&[
            "class",
            "replace",
            "dev",
            dev,
            "parent",
            SHAPER_HANDLE,
            "classid",
            SHAPER_CONTROL_CLASS,
            "htb",
            "rate",
            &control_rate,
            "ceil",
            &control_rate,
            // One full packet per round: at a low rate HTB's derived quantum would be below an MTU.
            "quantum",
            "1514",
        ]);
        if self.overhead_bytes > 0 {
            control.extend(argv(&["overhead", &self.overhead_bytes.to_string()]));
        }
        // A u32 match of the precedence bits (the top two of the TOS / traffic class byte).
        let control_filter = |protocol: &str, prio: &str, field: &[&str]| {
            let mut a = argv(&[
                "filter",
                "add",
                "dev",
                dev,
                "parent",
                SHAPER_HANDLE,
                "protocol",
                protocol,
                "prio",
                prio,
                "u32",
                "match",
            ]);
            a.extend(argv(field));
            a.extend(argv(&["0xc0", "0xc0", "classid", SHAPER_CONTROL_CLASS]));
            a
        };
        vec![
            argv(&[
                "qdisc",
                "replace",
                "dev",
                dev,
                "root",
                "handle",
                SHAPER_HANDLE,
                "htb",
                "default",
                "1",
            ]),
            class,
            argv(&[
                "qdisc",
                "replace",
                "dev",
                dev,
                "parent",
                SHAPER_CLASS,
                "handle",
                SHAPER_LEAF,
                "pfifo",
                "limit",
                &self.queue_packets.to_string(),
            ]),
            control,
            argv(&[
                "qdisc",
                "replace",
                "dev",
                dev,
                "parent",
                SHAPER_CONTROL_CLASS,
                "handle",
                SHAPER_CONTROL_LEAF,
                "pfifo",
                "limit",
                &CONTROL_QUEUE_PACKETS.to_string(),
            ]),
            // u32 filters have no stable replace without kernel-chosen handles: drop ours
            // (none on a new root) and add them again, so a re-apply leaves exactly two.
            argv(&["filter", "del", "dev", dev, "parent", SHAPER_HANDLE]),
            control_filter("ip", "1", &["ip", "tos"]),
            control_filter("ipv6", "2", &["ip6", "priority"]),
        ]
    }

    /// The network-control class's cap: 1% of the rate, at least 32 kbit/s (a quarter of the
    /// rate on links slower than 128 kbit/s). It is on top of `rate_bps`, and used only by what
    /// is marked network control: a few kbit/s of hellos and keepalives.
    pub fn control_rate_bps(&self) -> u64 {
        (self.rate_bps / 100).max(CONTROL_RATE_FLOOR_BPS.min(self.rate_bps / 4))
    }

    /// The `tc` argv that removes it: the kernel then attaches the device's default qdisc.
    pub fn remove_argv(&self) -> Vec<String> {
        remove_root_qdisc_argv(&self.dev)
    }

    pub fn describe(&self) -> Vec<String> {
        self.install_argvs()
            .iter()
            .map(|a| format!("tc {}", a.join(" ")))
            .collect()
    }
}

/// The `tc` argv that deletes `dev`'s root qdisc (callers check first that it is ours).
pub fn remove_root_qdisc_argv(dev: &str) -> Vec<String> {
    argv(&["qdisc", "del", "dev", dev, "root"])
}

/// The shaper for `cfg`, or None when shaping is off.
pub fn render_shaper(cfg: &GatewayConfig) -> Option<Shaper> {
    let s = &cfg.shaping;
    s.enabled.then(|| Shaper {
        dev: cfg.interfaces.satellite.to_string(),
        rate_bps: s.rate_bps,
        overhead_bytes: s.overhead_bytes,
        queue_packets: s.queue_packets,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{example_cfg as cfg, render};
    use super::*;
    use crate::gateway::config::{example_json, from_value};

    #[test]
    fn network_control_class_gets_a_percent_of_the_rate_with_a_floor() {
        let at = |rate_bps| {
            Shaper {
                dev: "sat0".into(),
                rate_bps,
                overhead_bytes: 0,
                queue_packets: 1000,
            }
            .control_rate_bps()
        };
        assert_eq!(at(16_666_000), 166_660);
        assert_eq!(at(1_000_000), 32_000, "the floor: room for BGP and BFD");
        assert_eq!(at(8_000), 2_000, "never more than a quarter of a slow link");
    }

    #[test]
    fn shaper_renders_htb_at_the_rate_over_a_fifo_on_the_satellite_interface() {
        assert_eq!(render_shaper(&cfg()), None, "off by default");
        let mut j = example_json();
        j["interfaces"]["satellite"] = "sat1".into();
        j["shaping"] = serde_json::json!({"enabled": true, "rate_bps": 1_536_000});
        let r = render(&from_value(j.clone()).unwrap(), &[]);
        let shaper = r.shaper.clone().unwrap();
        assert_eq!(
        shaper.describe(),
        vec![
            "tc qdisc replace dev sat1 root handle 5047: htb default 1",
            "tc class replace dev sat1 parent 5047: classid 5047:1 htb rate 1536000bit ceil 1536000bit",
            "tc qdisc replace dev sat1 parent 5047:1 handle 5048: pfifo limit 1000",
            "tc class replace dev sat1 parent 5047: classid 5047:2 htb rate 32000bit ceil 32000bit quantum 1514",
            "tc qdisc replace dev sat1 parent 5047:2 handle 5049: pfifo limit 64",
            "tc filter del dev sat1 parent 5047:",
            "tc filter add dev sat1 parent 5047: protocol ip prio 1 u32 match ip tos 0xc0 0xc0 classid 5047:2",
            "tc filter add dev sat1 parent 5047: protocol ipv6 prio 2 u32 match ip6 priority 0xc0 0xc0 classid 5047:2",
        ]
    );
        assert_eq!(shaper.remove_argv().join(" "), "qdisc del dev sat1 root");
        assert_eq!(r.to_json()["shaping"][0], shaper.describe()[0]);
        // Overhead and queue length when given; every argument is its own argv element.
        j["shaping"] = serde_json::json!({"enabled": true, "rate_bps": 50_000_000,
                                      "overhead_bytes": 24, "queue_packets": 64});
        let shaper = render_shaper(&from_value(j.clone()).unwrap()).unwrap();
        let argvs = shaper.install_argvs();
        assert_eq!(
            argvs[1][argvs[1].len() - 4..],
            ["ceil", "50000000bit", "overhead", "24"]
        );
        assert_eq!(argvs[2][argvs[2].len() - 2..], ["limit", "64"]);
        // Network control: 1% of the rate, with the same overhead.
        assert_eq!(shaper.control_rate_bps(), 500_000);
        assert_eq!(
            argvs[3][argvs[3].len() - 6..],
            ["ceil", "500000bit", "quantum", "1514", "overhead", "24"]
        );
        assert!(argvs.iter().flatten().all(|a| !a.contains(' ')));
        // Disabled with a rate kept: nothing installed.
        j["shaping"]["enabled"] = false.into();
        let r = render(&from_value(j).unwrap(), &[]);
        assert_eq!(r.shaper, None);
        assert!(r.to_json()["shaping"].is_null());
    }
}
