//! Self-check of the BPF Hybla on whatever kernel runs it (used as the payload of
//! verify/kernel-6.1's VM, and on the host): load (the verifier accepts the program), the CC
//! list shows `hybla`, a loopback TCP flow with setsockopt(TCP_CONGESTION, "hybla") runs
//! through it, the params map steers the initial window (base RTT) and the cwnd ceiling, and
//! this namespace's own entry (looked up by the namespace cookie read through BTF) overrides
//! the host-wide one until it is removed; `hybla_ld` (the verifier accepts its cong_control,
//! which reads only the socket argument, so one program fits the 6.1 and 6.10+ prototypes) is
//! listed too and a loopback flow through it grows its window.
//! Prints `PERIGEE-HYBLA-CHECK-OK` on success, exits 1 with the reason otherwise. Restores the
//! previous parameters and unloads only what it loaded itself.
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::thread;

use perigee_hybla::{HyblaParams, Implementation};

const MARKER: &str = "PERIGEE-HYBLA-CHECK-OK";

fn main() {
    match run() {
        Ok(summary) => println!("{MARKER} {summary}"),
        Err(e) => {
            println!("PERIGEE-HYBLA-CHECK-FAILED: {e}");
            std::process::exit(1);
        }
    }
}

fn run() -> Result<String, String> {
    let before = perigee_hybla::status();
    let st = perigee_hybla::load().map_err(|e| format!("load: {e}"))?;
    println!("status: {}", serde_json::to_string(&st).unwrap_or_default());
    if st.implementation != Implementation::Bpf || !st.owned {
        return Err(format!(
            "expected Perigee's BPF hybla, got {:?} (owned {})",
            st.implementation, st.owned
        ));
    }
    if !st.ld.loaded {
        return Err(format!("hybla_ld not loaded: {:?}", st.ld.problem));
    }
    let result = exercise();
    // Leave the machine as found: previous params, and no registration we added.
    let _ = perigee_hybla::unset_netns_params(None);
    let _ = perigee_hybla::set_params(HyblaParams {
        rtt0_ms: before.rtt0_ms,
        base_rtt_ms: before.base_rtt_ms,
    });
    let _ = perigee_hybla::set_cwnd_ceiling(before.cwnd_max);
    if !before.loaded {
        perigee_hybla::unload().map_err(|e| format!("unload: {e}"))?;
        if available().split_whitespace().any(|n| n == "hybla") {
            return Err("hybla still listed after unload".into());
        }
    }
    result
}

fn available() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default()
}

fn exercise() -> Result<String, String> {
    let avail = available();
    if !avail.split_whitespace().any(|n| n == "hybla") {
        return Err(format!(
            "hybla not in tcp_available_congestion_control: {avail}"
        ));
    }
    let set = |base_rtt_ms, cwnd_max| -> Result<(), String> {
        perigee_hybla::set_params(HyblaParams {
            rtt0_ms: 25,
            base_rtt_ms,
        })
        .and_then(|()| perigee_hybla::set_cwnd_ceiling(cwnd_max))
        .map_err(|e| format!("set params: {e}"))
    };
    // Measured RTT (loopback: rho = 1), 8 MiB through cong_avoid/pkts_acked.
    set(0, 0)?;
    let plain = flow(8 << 20)?;
    if plain.max_cwnd <= plain.first_cwnd {
        return Err(format!(
            "cwnd never grew in a cwnd-limited flow ({}): cong_avoid did nothing",
            plain.first_cwnd
        ));
    }
    // rho = 24 from the base RTT: the initial window is 10 x 24 ...
    set(600, 0)?;
    let geo = flow(1 << 20)?;
    if geo.first_cwnd != 240 {
        return Err(format!(
            "base RTT 600 ms: initial cwnd {} != 240",
            geo.first_cwnd
        ));
    }
    // ... and the operator ceiling caps it and every later window.
    set(600, 20)?;
    let capped = flow(4 << 20)?;
    if capped.first_cwnd != 20 || capped.max_cwnd > 20 {
        return Err(format!(
            "ceiling 20: initial cwnd {}, max {}",
            capped.first_cwnd, capped.max_cwnd
        ));
    }
    // This namespace's own entry wins over the host-wide ceiling 20, until it is removed.
    perigee_hybla::set_netns_params(
        HyblaParams {
            rtt0_ms: 25,
            base_rtt_ms: 600,
        },
        12,
    )
    .map_err(|e| format!("set_netns_params: {e}"))?;
    let netns = flow(4 << 20)?;
    if netns.first_cwnd != 12 || netns.max_cwnd > 12 {
        return Err(format!(
            "namespace ceiling 12: initial cwnd {}, max {}",
            netns.first_cwnd, netns.max_cwnd
        ));
    }
    perigee_hybla::unset_netns_params(None).map_err(|e| format!("unset_netns_params: {e}"))?;
    let fallback = flow(1 << 20)?;
    // hybla_ld, through its own cong_control: rho 1, no ceiling, the window grows.
    if !available().split_whitespace().any(|n| n == "hybla_ld") {
        return Err(format!(
            "hybla_ld not in tcp_available_congestion_control: {}",
            available()
        ));
    }
    set(0, 0)?;
    let ld = flow_with(8 << 20, "hybla_ld")?;
    if ld.max_cwnd <= ld.first_cwnd {
        return Err(format!(
            "hybla_ld: cwnd never grew in a cwnd-limited flow ({}): cong_control did nothing",
            ld.first_cwnd
        ));
    }
    if fallback.first_cwnd != 20 {
        return Err(format!(
            "namespace entry removed: initial cwnd {} != host-wide 20",
            fallback.first_cwnd
        ));
    }
    Ok(format!(
        "kernel={} flows: plain cwnd {}..{} geo initial {} capped max {} netns max {} fallback {} \
         hybla_ld cwnd {}..{}",
        kernel_release(),
        plain.first_cwnd,
        plain.max_cwnd,
        geo.first_cwnd,
        capped.max_cwnd,
        netns.max_cwnd,
        fallback.first_cwnd,
        ld.first_cwnd,
        ld.max_cwnd
    ))
}

struct FlowResult {
    first_cwnd: u32,
    max_cwnd: u32,
}

fn flow(bytes: usize) -> Result<FlowResult, String> {
    flow_with(bytes, "hybla")
}

/// Loopback transfer of `bytes` from a socket switched to `cc` by setsockopt, sampling
/// TCP_INFO's cwnd after every 64 KiB; the receiver checks the byte count.
fn flow_with(bytes: usize, cc_name: &'static str) -> Result<FlowResult, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let receiver = thread::spawn(move || -> std::io::Result<usize> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0;
        loop {
            match s.read(&mut buf)? {
                0 => return Ok(n),
                k => n += k,
            }
        }
    });
    let mut s = cc_socket(addr, cc_name)?;
    let fd = s.as_raw_fd();
    let cc = congestion_of(fd)?;
    if cc != cc_name {
        return Err(format!("socket congestion control is {cc:?}"));
    }
    let first_cwnd = snd_cwnd_of(fd)?;
    let mut max_cwnd = first_cwnd;
    let chunk = vec![5u8; 1 << 16];
    for _ in 0..bytes / chunk.len() {
        s.write_all(&chunk).map_err(|e| format!("send: {e}"))?;
        max_cwnd = max_cwnd.max(snd_cwnd_of(fd)?);
    }
    drop(s);
    let got = receiver
        .join()
        .map_err(|_| "receiver panicked".to_string())?
        .map_err(|e| format!("receive: {e}"))?;
    if got != bytes {
        return Err(format!("received {got} of {bytes} bytes"));
    }
    Ok(FlowResult {
        first_cwnd,
        max_cwnd,
    })
}

fn cc_socket(addr: std::net::SocketAddr, cc_name: &str) -> Result<TcpStream, String> {
    let std::net::SocketAddr::V4(v4) = addr else {
        return Err("IPv4 loopback expected".into());
    };
    // SAFETY: plain socket syscalls on an fd this function owns until TcpStream takes it.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        if fd < 0 {
            return Err(format!("socket: {}", std::io::Error::last_os_error()));
        }
        let stream = TcpStream::from_raw_fd(fd);
        // Loopback's 64 KiB MSS makes a 10-segment window too big to ever fill; with a
        // small MSS the flow is cwnd-limited, so cong_avoid really grows the window.
        let mss: libc::c_int = 1200;
        if libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            (&mss as *const libc::c_int).cast(),
            std::mem::size_of_val(&mss) as libc::socklen_t,
        ) != 0
        {
            return Err(format!(
                "setsockopt TCP_MAXSEG: {}",
                std::io::Error::last_os_error()
            ));
        }
        let name = cc_name.as_bytes();
        if libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        ) != 0
        {
            return Err(format!(
                "setsockopt TCP_CONGESTION {cc_name}: {}",
                std::io::Error::last_os_error()
            ));
        }
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v4.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*v4.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        if libc::connect(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of_val(&sa) as libc::socklen_t,
        ) != 0
        {
            return Err(format!("connect: {}", std::io::Error::last_os_error()));
        }
        Ok(stream)
    }
}

fn congestion_of(fd: i32) -> Result<String, String> {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buffer and length describe valid writable memory.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(format!(
            "getsockopt TCP_CONGESTION: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(String::from_utf8_lossy(&buf[..len as usize])
        .trim_end_matches('\0')
        .to_string())
}

fn snd_cwnd_of(fd: i32) -> Result<u32, String> {
    perigee_testkit::snd_cwnd(fd).map_err(|e| format!("getsockopt TCP_INFO: {e}"))
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}
