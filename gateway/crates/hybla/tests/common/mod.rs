//! Helpers shared by the kernel tests of this crate (each tests/*.rs file is its own crate).
#![allow(dead_code)]
use std::fs::File;
use std::os::fd::AsRawFd;
use std::thread;

/// One lock for every test that loads Hybla or writes its parameters: they share the kernel.
const LOCK: &str = "/run/lock/perigee-hybla-test.lock";

/// None when not root (the test then says SKIPPED, or fails when root tests are required:
/// perigee_testkit::root); otherwise the held lock, released when dropped.
pub fn root_and_lock() -> Option<File> {
    if !perigee_testkit::root("loads a BPF congestion control and creates namespaces") {
        return None;
    }
    let lock = File::create(LOCK).expect("lock file");
    // SAFETY: valid fd; blocks until other hybla tests finish.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    Some(lock)
}

/// Run `f` on a thread that has joined network namespace `ns` (setns is per thread).
pub fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> thread::JoinHandle<T> {
    let path = format!("/run/netns/{ns}");
    thread::spawn(move || {
        let file = File::open(&path).expect("open netns");
        // SAFETY: valid fd; CLONE_NEWNET only switches this thread's network namespace.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
}

pub fn snd_cwnd_of(fd: i32) -> u32 {
    perigee_testkit::snd_cwnd(fd).expect("getsockopt TCP_INFO")
}

/// connect(2) on a socket made with libc (options such as TCP_CONGESTION set before the SYN).
pub fn connect_v4(fd: i32, addr: std::net::Ipv4Addr, port: u16) -> std::io::Result<()> {
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(addr).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: `sa` is a valid sockaddr_in of the given size.
    let rc = unsafe {
        libc::connect(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of_val(&sa) as u32,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
