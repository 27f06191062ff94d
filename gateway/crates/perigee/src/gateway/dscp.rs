//! DSCP across the split (docs/splitter.md, *DSCP*): the client's marking is read from the SYN
//! the listener kept (TCP_SAVE_SYN), and the re-originated socket is given it (or its class's
//! `set_dscp`), so QoS on the satellite modem still sees what the client asked for.
use super::sys;
use std::os::fd::RawFd;

/// linux/tcp.h: read the kept SYN's headers back once (Linux 4.2+; sys::TCP_SAVE_SYN keeps them).
const TCP_SAVED_SYN: libc::c_int = 28;

/// Ask a listener to keep the network and TCP headers of each SYN it accepts.
pub fn save_syn(listener: RawFd) {
    let _ = sys::set_int(listener, libc::IPPROTO_TCP, sys::TCP_SAVE_SYN, 1);
}

/// The DSCP of the SYN an accepted socket was made from (None when none was kept). The kernel
/// frees the saved headers on this read.
pub fn of_accepted(fd: RawFd) -> Option<u8> {
    let mut buf = [0u8; 128];
    let len = sys::getsockopt_bytes(fd, libc::IPPROTO_TCP, TCP_SAVED_SYN, &mut buf)?;
    from_ip_header(&buf[..len])
}

/// DSCP from an IPv4 (TOS byte) or IPv6 (traffic class) header: its upper six bits.
pub fn from_ip_header(h: &[u8]) -> Option<u8> {
    let first = *h.first()?;
    let tos = match first >> 4 {
        4 => *h.get(1)?,
        6 => ((first & 0x0f) << 4) | (h.get(1)? >> 4),
        _ => return None,
    };
    Some(tos >> 2)
}

/// Mark a socket's packets with `dscp` (ECN bits left to the kernel).
pub fn set(fd: RawFd, v6: bool, dscp: u8) -> std::io::Result<()> {
    let tos = i32::from(dscp & 0x3f) << 2;
    if v6 {
        sys::set_int(fd, libc::IPPROTO_IPV6, libc::IPV6_TCLASS, tos)
    } else {
        sys::set_int(fd, libc::IPPROTO_IP, libc::IP_TOS, tos)
    }
}

/// What the re-originated leg carries: the class's choice, else the client's.
pub fn chosen(class_dscp: Option<u32>, client: Option<u8>) -> Option<u8> {
    class_dscp.map(|d| (d & 0x3f) as u8).or(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_families() {
        // IPv4, TOS 0xb8 = EF (46) with ECN 0.
        assert_eq!(from_ip_header(&[0x45, 0xb8, 0, 60]), Some(46));
        // IPv6, traffic class 0xb9 (EF, ECT(1)): version 6, tc split over bytes 0 and 1.
        assert_eq!(from_ip_header(&[0x6b, 0x90, 0, 0]), Some(46));
        assert_eq!(from_ip_header(&[0x60, 0, 0, 0]), Some(0));
        assert_eq!(from_ip_header(&[0x15]), None);
        assert_eq!(from_ip_header(&[]), None);
    }

    #[test]
    fn class_wins_over_client() {
        assert_eq!(chosen(Some(10), Some(46)), Some(10));
        assert_eq!(chosen(None, Some(46)), Some(46));
        assert_eq!(chosen(None, None), None);
    }

    #[test]
    fn a_loopback_syn_carries_its_mark() {
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        save_syn(l.as_raw_fd());
        let s = sys::socket(false).unwrap();
        set(s.as_raw_fd(), false, 46).unwrap();
        sys::connect(s.as_raw_fd(), &l.local_addr().unwrap()).ok();
        let (a, _) = l.accept().unwrap();
        assert_eq!(of_accepted(a.as_raw_fd()), Some(46));
        // Read once: the kernel has freed them.
        assert_eq!(of_accepted(a.as_raw_fd()), None);
    }
}
