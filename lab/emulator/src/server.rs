//! Control socket plumbing: accepts Unix-stream clients and splits their input into lines.
//! The protocol itself lives in `crate::control`.

use std::io::{self, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

/// Longest request line accepted; longer input gets an error and the client is closed.
const MAX_LINE: usize = 1 << 20;

pub fn bind(path: &Path) -> io::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{} is in use by a running emulator", path.display()),
            ));
        }
        std::fs::remove_file(path)?; // stale socket from a crashed run
    }
    let l = UnixListener::bind(path)?;
    l.set_nonblocking(true)?;
    Ok(l)
}

pub struct Client {
    pub stream: UnixStream,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    /// Peer closed its side (or sent garbage): close once the output is flushed.
    pub closing: bool,
}

impl Client {
    pub fn new(stream: UnixStream) -> io::Result<Self> {
        stream.set_nonblocking(true)?;
        Ok(Client {
            stream,
            inbuf: Vec::new(),
            outbuf: Vec::new(),
            closing: false,
        })
    }

    /// Reads what is available and returns the complete request lines.
    pub fn read_lines(&mut self) -> Vec<String> {
        let mut chunk = [0u8; 16384];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    self.closing = true;
                    break;
                }
                Ok(n) => self.inbuf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.closing = true;
                    break;
                }
            }
        }
        let mut lines = Vec::new();
        while let Some(pos) = self.inbuf.iter().position(|&b| b == b'\n') {
            let raw: Vec<u8> = self.inbuf.drain(..=pos).collect();
            let line = String::from_utf8_lossy(&raw).trim().to_string();
            if !line.is_empty() {
                lines.push(line);
            }
        }
        if self.inbuf.len() > MAX_LINE {
            self.inbuf.clear();
            self.queue_reply("{\"ok\":false,\"error\":\"request line too long\"}");
            self.closing = true;
        }
        lines
    }

    pub fn queue_reply(&mut self, reply: &str) {
        self.outbuf.extend_from_slice(reply.as_bytes());
        self.outbuf.push(b'\n');
    }

    /// Writes as much as possible; returns true when output is still pending.
    pub fn flush(&mut self) -> bool {
        while !self.outbuf.is_empty() {
            match self.stream.write(&self.outbuf) {
                Ok(0) => {
                    self.closing = true;
                    self.outbuf.clear();
                }
                Ok(n) => {
                    self.outbuf.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.closing = true;
                    self.outbuf.clear();
                }
            }
        }
        false
    }

    /// Done: peer gone and nothing left to send.
    pub fn finished(&self) -> bool {
        self.closing && self.outbuf.is_empty()
    }
}
