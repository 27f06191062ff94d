//! One direction of a split flow: moves bytes from a source socket to a destination socket,
//! zero-copy through a pooled pipe (splice) or, when the pool is exhausted, through a small
//! lazily allocated userspace buffer. Data waiting for the destination stops reads from the
//! source (back-pressure); nothing is held while the direction is idle.
use super::sys::{self, Pipe};
use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// Capacity of the empty pipes a worker keeps for reuse (8 of 1 MiB, 32 of 256 KiB).
const WARM_BYTES: usize = 8 << 20;

/// Pipes not currently holding data, shared by all flows of a worker. Bounded so the fd budget
/// holds: 10,000 flows use 20,000 socket fds across the workers, pipes come on top.
pub struct PipePool {
    free: Vec<Pipe>,
    pub in_use: usize,
    pub max_total: usize,
    pub pipe_size: usize,
}

impl PipePool {
    pub fn new(max_total: usize, pipe_size: usize) -> PipePool {
        PipePool {
            free: Vec::new(),
            in_use: 0,
            max_total,
            pipe_size,
        }
    }

    fn get(&mut self) -> Option<Pipe> {
        if let Some(p) = self.free.pop() {
            self.in_use += 1;
            return Some(p);
        }
        if self.in_use >= self.max_total {
            return None;
        }
        let p = Pipe::new(self.pipe_size).ok()?;
        self.in_use += 1;
        Some(p)
    }

    fn put(&mut self, p: Pipe) {
        self.in_use -= 1;
        // Keep a few warm pipes, up to WARM_BYTES of capacity, so idle workers hold few fds and
        // little of the user's pipe page allowance; a pipe smaller than asked (the allowance ran
        // out when it was made, or the size changed) is closed so a full-size one replaces it.
        let warm: usize = self.free.iter().map(|f| f.cap).sum();
        if p.cap >= self.pipe_size.min(1 << 20) && warm + p.cap <= WARM_BYTES.max(p.cap) {
            self.free.push(p);
        }
    }

    pub fn idle(&self) -> usize {
        self.free.len()
    }
}

/// Which socket failed during a pump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failed {
    Source,
    Destination,
}

#[derive(Default)]
pub struct Direction {
    /// The source reported end of stream.
    pub eof: bool,
    /// The end of stream was forwarded (shutdown(SHUT_WR) on the destination).
    pub shut: bool,
    pipe: Option<Pipe>,
    in_pipe: usize,
    buf: Vec<u8>,
    off: usize,
    /// Bytes delivered to the destination socket.
    pub bytes: u64,
}

fn would_block(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR))
}

impl Direction {
    pub fn pending(&self) -> bool {
        self.in_pipe > 0 || self.off < self.buf.len()
    }

    pub fn done(&self) -> bool {
        self.eof && self.shut && !self.pending()
    }

    pub fn wants_read(&self) -> bool {
        !self.eof && !self.pending()
    }

    /// Bytes to deliver before anything read from the source: a peer frame, or client bytes
    /// taken before the flow had its destination (the peer path's handover and replay).
    pub fn preload(&mut self, bytes: Vec<u8>) {
        debug_assert!(!self.pending(), "preload over pending bytes");
        if !bytes.is_empty() {
            self.buf = bytes;
            self.off = 0;
        }
    }

    /// Release everything held (flow teardown).
    pub fn release(&mut self, pool: &mut PipePool) {
        // A held pipe still has data in it: close it rather than reuse it.
        if self.pipe.take().is_some() {
            pool.in_use -= 1;
        }
        self.in_pipe = 0;
        self.buf = Vec::new();
        self.off = 0;
    }

    /// Move as much as possible without blocking. Returns bytes delivered, or which side failed.
    pub fn pump(
        &mut self,
        src: RawFd,
        dst: RawFd,
        pool: &mut PipePool,
        buf_size: usize,
    ) -> Result<u64, (Failed, i32)> {
        let mut moved = 0u64;
        // A read that returned less than it asked for drained the source socket: once that is
        // delivered, stop instead of reading again into an almost certain EAGAIN (the loop is
        // level-triggered, so anything that arrives later wakes us). For request/response and
        // short flows this is one splice less per direction and wakeup.
        let mut drained = false;
        for _ in 0..16 {
            if self.pending() {
                match self.write(dst, pool) {
                    Ok(0) => break,
                    Ok(n) => moved += n as u64,
                    Err(e) if would_block(&e) => break,
                    Err(e) => {
                        return Err((Failed::Destination, e.raw_os_error().unwrap_or(libc::EIO)))
                    }
                }
                continue;
            }
            if self.eof || drained {
                break;
            }
            match self.read(src, pool, buf_size) {
                Ok((0, _)) => self.eof = true,
                Ok((_, short)) => drained = short,
                Err(e) if would_block(&e) => break,
                Err(e) => return Err((Failed::Source, e.raw_os_error().unwrap_or(libc::EIO))),
            }
        }
        // Forward the end of stream once everything before it is delivered. Checked after the
        // loop, not in it: an EOF read on the loop's last turn would otherwise stay unforwarded,
        // and nothing would call us again (no read or write interest left on either socket),
        // so the peer would wait forever for a FIN (the upload's reply never came).
        if self.eof && !self.pending() && !self.shut {
            sys::shutdown_wr(dst);
            self.shut = true;
        }
        self.bytes += moved;
        Ok(moved)
    }

    /// Read once from `src`: (bytes, whether fewer bytes came than there was room for).
    fn read(
        &mut self,
        src: RawFd,
        pool: &mut PipePool,
        buf_size: usize,
    ) -> io::Result<(usize, bool)> {
        if let Some(p) = pool.get() {
            match sys::splice(src, p.w.as_raw_fd(), p.cap) {
                Ok(n) if n > 0 => {
                    let short = n < p.cap;
                    self.in_pipe = n;
                    self.pipe = Some(p);
                    Ok((n, short))
                }
                other => {
                    pool.put(p);
                    other.map(|n| (n, true))
                }
            }
        } else {
            // Pool exhausted: bounded userspace copy, buffer freed as soon as it drains.
            let mut b = vec![0u8; buf_size.clamp(4096, 65536)];
            let n = sys::read(src, &mut b)?;
            let short = n < b.len();
            b.truncate(n);
            self.buf = b;
            self.off = 0;
            Ok((n, short))
        }
    }

    fn write(&mut self, dst: RawFd, pool: &mut PipePool) -> io::Result<usize> {
        if self.in_pipe > 0 {
            let p = self.pipe.as_ref().expect("pipe holds pending bytes");
            let n = sys::splice(p.r.as_raw_fd(), dst, self.in_pipe)?;
            self.in_pipe -= n;
            if self.in_pipe == 0 {
                if let Some(p) = self.pipe.take() {
                    pool.put(p);
                }
            }
            Ok(n)
        } else {
            let n = sys::send(dst, &self.buf[self.off..])?;
            self.off += n;
            if self.off >= self.buf.len() {
                self.buf = Vec::new();
                self.off = 0;
            }
            Ok(n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};

    /// A connected loopback pair (a, b).
    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    #[test]
    fn eof_read_on_the_last_turn_is_still_forwarded() {
        const CHUNK: usize = 4096;
        // The source holds 7 chunks then its FIN; the direction starts with bytes pending, so
        // the turns go write, read, write, ... and the EOF is read on the 16th, the last one.
        let (mut writer, src) = pair();
        writer.write_all(&vec![7u8; 7 * CHUNK]).unwrap();
        writer.shutdown(Shutdown::Write).unwrap();
        let (dst, mut sink) = pair();
        src.set_nonblocking(true).unwrap();
        dst.set_nonblocking(true).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100)); // loopback: data and FIN in
        let mut d = Direction {
            buf: vec![1u8; 100],
            ..Default::default()
        };
        let mut no_pipes = PipePool::new(0, 0); // the userspace path: one CHUNK per read
        let moved = d
            .pump(src.as_raw_fd(), dst.as_raw_fd(), &mut no_pipes, CHUNK)
            .unwrap();
        assert_eq!(moved, (100 + 7 * CHUNK) as u64);
        assert!(d.eof && d.shut && d.done(), "EOF read but not forwarded");
        sink.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut got = Vec::new();
        sink.read_to_end(&mut got).unwrap(); // needs the FIN
        assert_eq!(got.len(), 100 + 7 * CHUNK);
    }

    #[test]
    fn short_read_ends_the_turn_and_the_next_one_finishes() {
        // 10 bytes and the FIN are queued: the 10-byte read is short (the source is drained), so
        // the turn ends without another read; the level-triggered loop calls again because the
        // direction still wants to read, and that turn reads the EOF and forwards it.
        let (mut writer, src) = pair();
        writer.write_all(b"0123456789").unwrap();
        writer.shutdown(Shutdown::Write).unwrap();
        let (dst, mut sink) = pair();
        src.set_nonblocking(true).unwrap();
        dst.set_nonblocking(true).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let mut pool = PipePool::new(4, 65536);
        let mut d = Direction::default();
        let first = d.pump(src.as_raw_fd(), dst.as_raw_fd(), &mut pool, 4096);
        assert_eq!(first, Ok(10));
        assert!(!d.eof && !d.pending() && d.wants_read());
        let second = d.pump(src.as_raw_fd(), dst.as_raw_fd(), &mut pool, 4096);
        assert_eq!(second, Ok(0));
        assert!(d.done(), "EOF not forwarded on the next turn");
        sink.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut got = Vec::new();
        sink.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"0123456789");
    }
}
