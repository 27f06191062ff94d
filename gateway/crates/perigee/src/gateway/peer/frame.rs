//! Fixed-size frames on non-blocking sockets: read piecewise without ever taking a byte past
//! the frame (what follows belongs to the flow and is spliced as is), and write piecewise.
use super::super::sys;
use std::io;
use std::os::fd::RawFd;

fn would_block(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR))
}

/// A frame of N bytes arriving in pieces.
pub struct FrameIn<const N: usize> {
    buf: [u8; N],
    got: usize,
}

impl<const N: usize> Default for FrameIn<N> {
    fn default() -> Self {
        FrameIn {
            buf: [0u8; N],
            got: 0,
        }
    }
}

impl<const N: usize> FrameIn<N> {
    /// Some(frame) once all N bytes are in; None while more are needed. End of stream before
    /// the frame is complete is an error (UnexpectedEof).
    pub fn read(&mut self, fd: RawFd) -> io::Result<Option<[u8; N]>> {
        while self.got < N {
            match sys::recv_nowait(fd, &mut self.buf[self.got..]) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "closed by the peer",
                    ))
                }
                Ok(n) => self.got += n,
                Err(e) if would_block(&e) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        Ok(Some(self.buf))
    }

    /// Bytes received so far (a slowloris sends some, then stalls).
    pub fn received(&self) -> usize {
        self.got
    }

    /// Whether what arrived so far can still be a frame starting with `magic` (garbage is
    /// refused as soon as its first bytes are in, not when a whole frame's worth has come).
    pub fn may_start_with(&self, magic: &[u8]) -> bool {
        let n = self.got.min(magic.len());
        self.buf[..n] == magic[..n]
    }
}

/// Bytes to send, sent piecewise as the socket takes them.
#[derive(Default)]
pub struct Outbox {
    bytes: Vec<u8>,
    sent: usize,
}

impl Outbox {
    pub fn new(bytes: &[u8]) -> Outbox {
        Outbox {
            bytes: bytes.to_vec(),
            sent: 0,
        }
    }

    /// Send what the socket takes; Ok(true) once everything is out.
    pub fn flush(&mut self, fd: RawFd) -> io::Result<bool> {
        while self.sent < self.bytes.len() {
            match sys::send(fd, &self.bytes[self.sent..]) {
                Ok(n) => self.sent += n,
                Err(e) if would_block(&e) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    pub fn done(&self) -> bool {
        self.sent >= self.bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    #[test]
    fn a_frame_read_never_consumes_the_bytes_after_it() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut w = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (r, _) = l.accept().unwrap();
        r.set_nonblocking(true).unwrap();
        let mut f = FrameIn::<4>::default();
        assert_eq!(f.read(r.as_raw_fd()).unwrap(), None);
        w.write_all(b"ab").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(f.read(r.as_raw_fd()).unwrap(), None);
        assert_eq!(f.received(), 2);
        w.write_all(b"cdREST").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(f.read(r.as_raw_fd()).unwrap(), Some(*b"abcd"));
        let mut rest = [0u8; 16];
        let n = sys::recv_nowait(r.as_raw_fd(), &mut rest).unwrap();
        assert_eq!(&rest[..n], b"REST");
        drop(w);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut g = FrameIn::<4>::default();
        let e = g.read(r.as_raw_fd()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }
}
