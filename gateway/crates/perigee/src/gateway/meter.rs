//! What crossed a TCP leg, from the kernel's own counters (docs/splitter.md, *Rates*).
//!
//! A socket's send side counts payload its peer acknowledged (`tcpi_bytes_acked`), its
//! receive side payload that arrived in order (`tcpi_bytes_received`): bytes the other end has,
//! never bytes written into a socket buffer, which on a satellite leg with multi-megabyte
//! buffers runs seconds ahead of the link. The link figures add the headers of the segments
//! that carried them (and of pure ACKs), to compare with what the interface carried.
use super::telemetry::TcpInfo;

/// Ethernet II header: what a satellite interface's byte counters include per packet (no
/// preamble, no FCS), as do satlab's emulator counters.
pub const L2_HEADER: u64 = 14;

/// Bytes of header around each segment of a socket: link layer, IP, TCP (with timestamps when
/// the connection uses them; SACK blocks on ACKs are not counted).
pub fn header_bytes(v6: bool, timestamps: bool) -> u64 {
    let ip = if v6 { 40 } else { 20 };
    let tcp = if timestamps { 32 } else { 20 };
    L2_HEADER + ip + tcp
}

/// The counters of one sample of a socket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LegCounters {
    pub acked: u64,
    pub received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    pub data_segs_out: u32,
    pub bytes_sent: u64,
    pub retrans_segs: u32,
}

impl LegCounters {
    pub fn of(t: &TcpInfo) -> LegCounters {
        LegCounters {
            acked: t.bytes_acked,
            received: t.bytes_received,
            segs_out: t.segs_out,
            segs_in: t.segs_in,
            data_segs_out: t.data_segs_out,
            bytes_sent: t.bytes_sent,
            retrans_segs: t.retrans_total,
        }
    }
}

/// What crossed one socket between two samples: payload and estimated wire bytes in each of
/// its directions (tx: it sent, rx: it received), and its retransmitted segments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Crossed {
    pub tx_payload: u64,
    pub rx_payload: u64,
    pub tx_wire: u64,
    pub rx_wire: u64,
    pub retrans_segs: u64,
    /// Data segments it sent (first transmissions and retransmissions).
    pub data_segs: u64,
}

impl Crossed {
    pub fn add(&mut self, o: &Crossed) {
        self.tx_payload += o.tx_payload;
        self.rx_payload += o.rx_payload;
        self.tx_wire += o.tx_wire;
        self.rx_wire += o.rx_wire;
        self.retrans_segs += o.retrans_segs;
        self.data_segs += o.data_segs;
    }
}

/// The difference of two samples of one socket. Counters only grow during a socket's life; a
/// smaller one (never expected) counts as no progress rather than wrapping to 2^64.
pub fn crossed(prev: &LegCounters, now: &LegCounters, header: u64) -> Crossed {
    let tx_payload = now.acked.saturating_sub(prev.acked);
    let rx_payload = now.received.saturating_sub(prev.received);
    let d32 = |a: u32, b: u32| u64::from(b.wrapping_sub(a));
    let segs_out = d32(prev.segs_out, now.segs_out);
    let data_segs_out = d32(prev.data_segs_out, now.data_segs_out);
    let pure_acks_out = segs_out.saturating_sub(data_segs_out);
    // Segments that carried the delivered payload: at the socket's average payload per data
    // segment (GSO-split, so wire-sized), at least one per started segment.
    let per_segment = if now.data_segs_out > 0 && now.bytes_sent > 0 {
        (now.bytes_sent as f64 / f64::from(now.data_segs_out)).max(1.0)
    } else {
        1448.0
    };
    let data_segments = (tx_payload as f64 / per_segment).ceil() as u64;
    Crossed {
        tx_payload,
        rx_payload,
        tx_wire: tx_payload + header * (data_segments + pure_acks_out),
        rx_wire: rx_payload + header * d32(prev.segs_in, now.segs_in),
        retrans_segs: d32(prev.retrans_segs, now.retrans_segs),
        data_segs: data_segs_out,
    }
}

/// One socket's last sample and the rates it gave.
#[derive(Debug, Clone, Default)]
pub struct LegMeter {
    last: LegCounters,
}

impl LegMeter {
    /// Takes a new sample: returns what crossed since the previous one and fills the leg's
    /// rates over `dt` seconds.
    pub fn sample(&mut self, info: &mut TcpInfo, v6: bool, dt: f64) -> Crossed {
        let now = LegCounters::of(info);
        let c = crossed(&self.last, &now, header_bytes(v6, info.timestamps));
        self.last = now;
        if dt > 0.0 {
            info.tx_bps = c.tx_payload as f64 * 8.0 / dt;
            info.rx_bps = c.rx_payload as f64 * 8.0 / dt;
        }
        c
    }

    /// A socket that replaced this leg's previous one (its counters start at 0 again).
    pub fn restart(&mut self) {
        self.last = LegCounters::default();
    }
}

/// The link's two directions: forward (hub → terminal) and return (terminal → hub).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LinkBytes {
    /// Payload delivered over the satellite.
    pub forward_payload: u64,
    pub return_payload: u64,
    /// Payload plus the headers of the segments that carried it, and pure ACKs: what the
    /// satellite interface's counters show for this traffic.
    pub forward_wire: u64,
    pub return_wire: u64,
}

impl LinkBytes {
    /// Adds what crossed a satellite-facing socket. At a hub such a socket sends forward; at a
    /// terminal it sends in the return direction.
    pub fn add(&mut self, c: &Crossed, sends_forward: bool) {
        if sends_forward {
            self.forward_payload += c.tx_payload;
            self.forward_wire += c.tx_wire;
            self.return_payload += c.rx_payload;
            self.return_wire += c.rx_wire;
        } else {
            self.return_payload += c.tx_payload;
            self.return_wire += c.tx_wire;
            self.forward_payload += c.rx_payload;
            self.forward_wire += c.rx_wire;
        }
    }

    pub fn merge(&mut self, o: &LinkBytes) {
        self.forward_payload += o.forward_payload;
        self.return_payload += o.return_payload;
        self.forward_wire += o.forward_wire;
        self.return_wire += o.return_wire;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(acked: u64, received: u64, segs: (u32, u32, u32), sent: u64) -> LegCounters {
        LegCounters {
            acked,
            received,
            segs_out: segs.0,
            segs_in: segs.1,
            data_segs_out: segs.2,
            bytes_sent: sent,
            retrans_segs: 0,
        }
    }

    #[test]
    fn delivered_not_written() {
        // 10 full segments acknowledged, 2 pure ACKs sent, 5 segments in with 100 bytes.
        let prev = LegCounters::default();
        let now = counters(14_480, 100, (12, 5, 10), 14_480);
        let c = crossed(&prev, &now, header_bytes(false, true));
        assert_eq!((c.tx_payload, c.rx_payload), (14_480, 100));
        assert_eq!(c.tx_wire, 14_480 + 66 * 12);
        assert_eq!(c.rx_wire, 100 + 66 * 5);
    }

    #[test]
    fn counters_never_run_backwards() {
        let prev = counters(1000, 1000, (10, 10, 5), 1000);
        let now = counters(500, 900, (10, 10, 5), 1000);
        let c = crossed(&prev, &now, 54);
        assert_eq!(
            (c.tx_payload, c.rx_payload, c.tx_wire, c.rx_wire),
            (0, 0, 0, 0)
        );
    }

    #[test]
    fn segment_counters_wrap() {
        let prev = counters(0, 0, (u32::MAX, u32::MAX - 1, u32::MAX), 0);
        let now = counters(0, 0, (1, 0, u32::MAX), 0);
        let c = crossed(&prev, &now, 10);
        assert_eq!((c.tx_wire, c.rx_wire), (20, 20));
    }

    #[test]
    fn data_segments_and_retransmissions_are_counted_between_samples() {
        let mut prev = counters(0, 0, (10, 0, 8), 8 * 1448);
        prev.retrans_segs = 1;
        let mut now = counters(20 * 1448, 0, (40, 0, 30), 30 * 1448);
        now.retrans_segs = 3;
        let c = crossed(&prev, &now, 66);
        assert_eq!((c.data_segs, c.retrans_segs), (22, 2));
    }

    #[test]
    fn headers_by_family_and_options() {
        assert_eq!(header_bytes(false, true), 66);
        assert_eq!(header_bytes(false, false), 54);
        assert_eq!(header_bytes(true, true), 86);
    }

    #[test]
    fn hub_and_terminal_directions() {
        let c = Crossed {
            tx_payload: 10,
            rx_payload: 1,
            tx_wire: 20,
            rx_wire: 2,
            retrans_segs: 0,
            data_segs: 1,
        };
        let mut hub = LinkBytes::default();
        hub.add(&c, true);
        assert_eq!((hub.forward_wire, hub.return_wire), (20, 2));
        let mut terminal = LinkBytes::default();
        terminal.add(&c, false);
        assert_eq!((terminal.forward_payload, terminal.return_payload), (1, 10));
    }

    #[test]
    fn meter_rates_are_deltas_over_time() {
        let mut m = LegMeter::default();
        let mut info = TcpInfo {
            bytes_acked: 1_000_000,
            bytes_received: 500,
            ..Default::default()
        };
        m.sample(&mut info, false, 2.0);
        assert_eq!((info.tx_bps, info.rx_bps), (4_000_000.0, 2_000.0));
        let c = m.sample(&mut info, false, 1.0);
        assert_eq!((c.tx_payload, info.tx_bps), (0, 0.0));
    }
}
