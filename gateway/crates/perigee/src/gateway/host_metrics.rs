//! The box's and the satellite link's metrics: the same numbers GET /v1/health (`host`,
//! `services`) and GET /v1/counters (`link.interface`) report, so a dashboard and Prometheus
//! never disagree. Listed in docs/operations.md, *Metrics*.
use super::exposition::{b, labels, n, Exposition};
use super::reports::{Counters, HostStats, Services};

pub(super) fn render(e: &mut Exposition, c: &Counters, host: &HostStats, services: &Services) {
    link_families(e, c);
    e.family(
        "perigee_host_cpu_seconds_total",
        "counter",
        "CPU time of the box summed over its CPUs (busy: all but idle and iowait).",
        vec![
            (labels(&[("mode", "busy")]), host.cpu_busy_seconds),
            (labels(&[("mode", "idle")]), host.cpu_idle_seconds),
        ],
    );
    e.one(
        "perigee_host_cpus",
        "gauge",
        "CPUs of the box.",
        n(host.cpus),
    );
    e.family(
        "perigee_host_load",
        "gauge",
        "The kernel's load averages (/proc/loadavg).",
        vec![
            (labels(&[("window", "1m")]), host.load_1m),
            (labels(&[("window", "5m")]), host.load_5m),
            (labels(&[("window", "15m")]), host.load_15m),
        ],
    );
    e.one(
        "perigee_host_memory_total_bytes",
        "gauge",
        "Memory of the box.",
        n(host.memory_total_bytes),
    );
    e.one(
        "perigee_host_memory_available_bytes",
        "gauge",
        "Memory to be had without swapping (MemAvailable).",
        n(host.memory_available_bytes),
    );
    let disk = |f: fn(&super::reports::DiskUsage) -> u64| {
        host.disks
            .iter()
            .map(|d| (labels(&[("path", &d.path)]), n(f(d))))
            .collect()
    };
    e.family(
        "perigee_host_disk_total_bytes",
        "gauge",
        "Size of the filesystems the gateway writes.",
        disk(|d| d.total_bytes),
    );
    e.family(
        "perigee_host_disk_available_bytes",
        "gauge",
        "Their space free for unprivileged users.",
        disk(|d| d.available_bytes),
    );
    interface_families(e, host);
    e.family(
        "perigee_service_serving",
        "gauge",
        "1 while an enabled helper gets its traffic (squid: port 80, resolver: port 53); absent when off.",
        [("squid", &services.squid), ("resolver", &services.resolver)]
            .into_iter()
            .filter(|(_, s)| s.enabled)
            .map(|(name, s)| (labels(&[("service", name)]), b(s.serving)))
            .collect(),
    );
}

/// The satellite interface: everything that crossed the link, and the intercepted share of it.
fn link_families(e: &mut Exposition, c: &Counters) {
    let Some(i) = &c.link.interface else {
        return;
    };
    let dir = |f: u64, r: u64| {
        vec![
            (labels(&[("direction", "forward")]), n(f)),
            (labels(&[("direction", "return")]), n(r)),
        ]
    };
    e.family(
        "perigee_link_interface_bytes_total",
        "counter",
        "Every frame byte the satellite interface carried, split or not (forward: hub to terminal).",
        dir(i.forward_bytes, i.return_bytes),
    );
    e.family(
        "perigee_link_interface_packets_total",
        "counter",
        "Frames the satellite interface carried.",
        dir(i.forward_packets, i.return_packets),
    );
    e.family(
        "perigee_link_interface_dropped_total",
        "counter",
        "Frames the kernel dropped at the satellite interface.",
        dir(i.forward_dropped, i.return_dropped),
    );
}

fn interface_families(e: &mut Exposition, host: &HostStats) {
    let mut bytes = Vec::new();
    let mut packets = Vec::new();
    let mut errors = Vec::new();
    let mut dropped = Vec::new();
    for i in &host.interfaces {
        for (d, by, pk, er, dr) in [
            ("rx", i.rx_bytes, i.rx_packets, i.rx_errors, i.rx_dropped),
            ("tx", i.tx_bytes, i.tx_packets, i.tx_errors, i.tx_dropped),
        ] {
            let l = labels(&[("interface", &i.name), ("direction", d)]);
            bytes.push((l.clone(), n(by)));
            packets.push((l.clone(), n(pk)));
            errors.push((l.clone(), n(er)));
            dropped.push((l, n(dr)));
        }
    }
    e.family(
        "perigee_interface_bytes_total",
        "counter",
        "Bytes each interface received (rx) and sent (tx).",
        bytes,
    );
    e.family(
        "perigee_interface_packets_total",
        "counter",
        "Packets each interface received and sent.",
        packets,
    );
    e.family(
        "perigee_interface_errors_total",
        "counter",
        "Receive and transmit errors per interface.",
        errors,
    );
    e.family(
        "perigee_interface_dropped_total",
        "counter",
        "Packets each interface dropped.",
        dropped,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::reports::{DiskUsage, InterfaceCounters, LinkInterface, ServiceState};

    #[test]
    fn same_numbers_as_health_and_counters() {
        let mut c = Counters::default();
        c.link.interface = Some(LinkInterface {
            name: "sat0".into(),
            forward_bytes: 1000,
            return_bytes: 200,
            ..Default::default()
        });
        let host = HostStats {
            cpus: 2,
            cpu_busy_seconds: 12.5,
            load_1m: 0.5,
            memory_total_bytes: 4096,
            disks: vec![DiskUsage {
                path: "/".into(),
                total_bytes: 10,
                available_bytes: 4,
            }],
            interfaces: vec![InterfaceCounters {
                name: "sat0".into(),
                rx_bytes: 200,
                tx_errors: 3,
                ..Default::default()
            }],
            ..Default::default()
        };
        let services = Services {
            squid: ServiceState {
                enabled: true,
                serving: false,
                problem: Some("down".into()),
            },
            resolver: ServiceState::default(),
        };
        let mut e = Exposition::default();
        render(&mut e, &c, &host, &services);
        for line in [
            "perigee_link_interface_bytes_total{direction=\"forward\"} 1000",
            "perigee_link_interface_bytes_total{direction=\"return\"} 200",
            "perigee_host_cpu_seconds_total{mode=\"busy\"} 12.5",
            "perigee_host_load{window=\"1m\"} 0.5",
            "perigee_host_disk_available_bytes{path=\"/\"} 4",
            "perigee_interface_bytes_total{interface=\"sat0\",direction=\"rx\"} 200",
            "perigee_interface_errors_total{interface=\"sat0\",direction=\"tx\"} 3",
            "perigee_service_serving{service=\"squid\"} 0",
        ] {
            assert!(
                e.text.lines().any(|l| l == line),
                "{line} missing in\n{}",
                e.text
            );
        }
        assert!(
            !e.text.contains("service=\"resolver\""),
            "a helper that is off is absent"
        );
    }
}
