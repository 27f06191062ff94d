//! Reading a socket's TCP_INFO (congestion window, ssthresh, RTT), as the Hybla tests and the VM
//! check do.
use std::io;
use std::os::fd::RawFd;

/// tcpi_snd_cwnd of a TCP socket, from TCP_INFO.
pub fn snd_cwnd(fd: RawFd) -> io::Result<u32> {
    tcp_info(fd).map(|i| i.tcpi_snd_cwnd)
}

/// The whole TCP_INFO of a TCP socket.
pub fn tcp_info(fd: RawFd) -> io::Result<libc::tcp_info> {
    // SAFETY: tcp_info is plain data; the kernel fills at most `len` bytes.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_connected_socket_has_a_window_and_a_file_has_none() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        assert!(snd_cwnd(c.as_raw_fd()).unwrap() >= 1);
        let f = std::fs::File::open("/dev/null").unwrap();
        assert!(snd_cwnd(f.as_raw_fd()).is_err());
    }
}
