//! Facts about the running kernel and our privileges, read from /proc and /sys.
use std::path::Path;
use std::process::{Command, Stdio};

pub const AVAILABLE_PATH: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
pub const KERNEL_MODULE_DIR: &str = "/sys/module/tcp_hybla";
pub const KERNEL_RTT0_PARAM: &str = "/sys/module/tcp_hybla/parameters/rtt0";
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_BPF: u32 = 39;

pub fn available() -> Vec<String> {
    std::fs::read_to_string(AVAILABLE_PATH)
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

pub fn hybla_available() -> bool {
    available().iter().any(|n| n == "hybla")
}

/// The kernel's own tcp_hybla (module or built-in) shows up under /sys/module.
pub fn kernel_hybla_present() -> bool {
    Path::new(KERNEL_MODULE_DIR).exists()
}

/// Ask for the kernel's module; failure (no module, no permission) is expected and ignored.
pub fn try_modprobe() {
    let _ = Command::new("modprobe")
        .args(["-q", "tcp_hybla"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn effective_caps() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

fn has_cap(caps: u64, cap: u32) -> bool {
    caps & (1u64 << cap) != 0
}

const BPFFS: &str = "/sys/fs/bpf";

/// systemd mounts the BPF filesystem at boot; minimal hosts and containers may not. Mounting
/// it is what the operator would be told to do, so a privileged loader just does it.
fn mount_bpffs() -> bool {
    let (src, target, fstype) = (
        crate::libbpf::cstr("bpf"),
        crate::libbpf::cstr(BPFFS),
        crate::libbpf::cstr("bpf"),
    );
    // SAFETY: NUL-terminated strings, no mount data.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    rc == 0 && is_bpffs(BPFFS)
}

fn is_bpffs(path: &str) -> bool {
    let p = crate::libbpf::cstr(path);
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid NUL-terminated path and a zeroed out-struct of the right type.
    let rc = unsafe { libc::statfs(p.as_ptr(), &mut st) };
    rc == 0 && st.f_type as i64 == BPF_FS_MAGIC
}

/// Why loading a BPF congestion control cannot work here, with what to do about it. With
/// `prepare`, also make sure the BPF filesystem is mounted (mounting it if needed); without,
/// nothing is changed (for status reports).
pub fn bpf_load_problem(prepare: bool) -> Option<String> {
    if !Path::new(VMLINUX_BTF).exists() {
        return Some(format!(
            "no kernel BTF at {VMLINUX_BTF}: BPF congestion control needs a kernel built with \
             CONFIG_DEBUG_INFO_BTF=y (or load the kernel's tcp_hybla module instead)"
        ));
    }
    let caps = effective_caps();
    let privileged =
        has_cap(caps, CAP_SYS_ADMIN) || (has_cap(caps, CAP_BPF) && has_cap(caps, CAP_NET_ADMIN));
    if !privileged {
        return Some(
            "not permitted to load BPF: run as root, or grant CAP_BPF and CAP_NET_ADMIN \
             (e.g. systemd AmbientCapabilities=CAP_BPF CAP_NET_ADMIN, or \
             setcap cap_bpf,cap_net_admin+ep on the perigee binary)"
                .to_string(),
        );
    }
    if prepare && !is_bpffs(BPFFS) && !mount_bpffs() {
        return Some(
            "/sys/fs/bpf is not a BPF filesystem and mounting one failed, so the registration \
             cannot be pinned: mount -t bpf bpf /sys/fs/bpf"
                .to_string(),
        );
    }
    None
}

/// SO_NETNS_COOKIE (Linux 5.14+) on x86 and arm; not exported by every libc crate version.
const SO_NETNS_COOKIE: libc::c_int = 71;

/// The cookie of the calling thread's network namespace: the kernel's `net->net_cookie`, the
/// key the BPF Hybla looks its per-namespace parameters up by. Read with getsockopt on a
/// throw-away socket, which lives in the namespace of the thread that opens it.
pub fn netns_cookie() -> std::io::Result<u64> {
    // SAFETY: plain socket(2); the fd is owned (and closed) by OwnedFd below.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let mut cookie: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: the out-buffer and its length describe `cookie`.
    let rc = unsafe {
        libc::getsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            (&mut cookie as *mut u64).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cookie)
}

/// A datagram unix socket bound to the abstract name `name` (no file; listed as `@name` in
/// the calling thread's namespace's /proc/net/unix until closed).
pub fn abstract_unix_socket(name: &str) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: plain socket(2); the fd is owned (and closed) by OwnedFd below.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_un is plain data.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = name.as_bytes();
    if bytes.len() + 1 > sa.sun_path.len() {
        return Err(std::io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    // sun_path[0] stays 0: an abstract name.
    for (dst, &b) in sa.sun_path[1..].iter_mut().zip(bytes) {
        *dst = b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + bytes.len();
    // SAFETY: `sa` is a valid sockaddr_un and `len` covers the family and the name.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_un).cast(),
            len as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}
