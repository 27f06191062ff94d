//! Benchmark only (`--features peer-plaintext`, the `perigee-plaintext` binary; never in
//! `make build` or a package): the peer path without TLS, so the encrypted hop's cost can be
//! measured against it in the same run. The terminal names its identity in clear (an unproven
//! claim: this build authenticates nothing) and after the frames a flow is spliced as it was
//! before the peer path was encrypted.
use super::identity::Fingerprint;
use std::io;
use std::os::fd::RawFd;

const IDENT_MAGIC: &[u8; 4] = b"PGPI";
const IDENT_LEN: usize = 4 + 71;

pub struct Plain {
    /// Hub: the terminal's claimed identity as it arrives (None at a terminal).
    ident: Option<Vec<u8>>,
    inbox: Vec<u8>,
    outbox: Vec<u8>,
    out_off: usize,
}

impl Plain {
    /// A terminal's connection: its identity goes first.
    pub fn terminal(fingerprint: &Fingerprint) -> Plain {
        let mut outbox = IDENT_MAGIC.to_vec();
        outbox.extend_from_slice(fingerprint.as_str().as_bytes());
        Plain {
            ident: None,
            inbox: Vec::new(),
            outbox,
            out_off: 0,
        }
    }

    pub fn hub() -> Plain {
        Plain {
            ident: Some(Vec::new()),
            inbox: Vec::new(),
            outbox: Vec::new(),
            out_off: 0,
        }
    }

    pub fn is_handshaking(&self) -> bool {
        self.ident.as_ref().is_some_and(|i| i.len() < IDENT_LEN)
    }

    pub fn claimed(&self) -> Option<Fingerprint> {
        let i = self.ident.as_ref().filter(|i| i.len() == IDENT_LEN)?;
        if &i[..4] != IDENT_MAGIC {
            return None;
        }
        Fingerprint::parse(std::str::from_utf8(&i[4..]).ok()?).ok()
    }

    /// Bytes from the socket: the identity first (hub), then the stream.
    pub fn take(&mut self, bytes: &[u8]) -> usize {
        if let Some(i) = self.ident.as_mut().filter(|i| i.len() < IDENT_LEN) {
            let n = (IDENT_LEN - i.len()).min(bytes.len());
            i.extend_from_slice(&bytes[..n]);
            return n;
        }
        self.inbox.extend_from_slice(bytes);
        bytes.len()
    }

    pub fn drain(&mut self, out: &mut Vec<u8>, max: usize) -> bool {
        let n = self.inbox.len().min(max.saturating_sub(out.len()));
        out.extend_from_slice(&self.inbox[..n]);
        self.inbox.drain(..n);
        n > 0
    }

    pub fn queue(&mut self, data: &[u8]) -> usize {
        let n = data
            .len()
            .min(super::channel::SEND_QUEUE.saturating_sub(self.queued()));
        self.outbox.extend_from_slice(&data[..n]);
        n
    }

    pub fn queued(&self) -> usize {
        self.outbox.len() - self.out_off
    }

    pub fn flush(&mut self, fd: RawFd) -> io::Result<bool> {
        while self.out_off < self.outbox.len() {
            match super::super::sys::send(fd, &self.outbox[self.out_off..]) {
                Ok(n) => self.out_off += n,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) => {
                    return Ok(false)
                }
                Err(e) => return Err(e),
            }
        }
        self.outbox.clear();
        self.out_off = 0;
        Ok(true)
    }

    /// What is left for the splice relay: (bytes received, bytes still to send).
    pub fn into_leftovers(mut self, rx: Vec<u8>, rx_off: usize) -> (Vec<u8>, Vec<u8>) {
        self.inbox.extend_from_slice(&rx[rx_off.min(rx.len())..]);
        (self.inbox, self.outbox.split_off(self.out_off))
    }
}
