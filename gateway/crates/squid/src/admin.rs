//! Talks to Squid over its loopback admin port: cache manager pages and PURGE.
//! Plain HTTP/1.0 on a TCP socket; no shell, no squidclient.

use serde::Serialize;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(5);
const MAX_RESPONSE: u64 = 4 * 1024 * 1024;

/// A minimal HTTP response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub body: String,
}

/// Sends one request line plus Host, reads the whole answer (Connection: close).
pub fn request(port: u16, method: &str, target: &str) -> std::io::Result<Response> {
    request_within(port, method, target, TIMEOUT)
}

/// `request` with its own timeout for connecting, sending and each read.
pub fn request_within(
    port: u16,
    method: &str,
    target: &str,
    timeout: Duration,
) -> std::io::Result<Response> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let req = format!(
        "{method} {target} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.take(MAX_RESPONSE).read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, "no HTTP status line")
        })?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok(Response { status, body })
}

/// Fetches a cache manager page, e.g. `info`.
pub fn mgr_page(port: u16, page: &str) -> std::io::Result<String> {
    // Squid serves internal pages only for its own visible_hostname and port.
    let host = crate::render::VISIBLE_HOSTNAME;
    let r = request(
        port,
        "GET",
        &format!("http://{host}:{port}/squid-internal-mgr/{page}"),
    )?;
    if r.status != 200 {
        return Err(std::io::Error::other(format!(
            "cache manager answered {}",
            r.status
        )));
    }
    Ok(r.body)
}

/// Whether Squid serves requests: one request on the admin port that its worker answers by
/// itself (a URL that is neither the cache manager nor a PURGE is denied there: 403, with no
/// store, resolver or origin involved). Any HTTP answer within `timeout` counts. Squid keeps
/// its listening sockets in a separate process (the coordinator) when it has diskers, so a
/// worker that died or hangs still accepts connections: only an answer shows it serves.
pub fn probe(port: u16, timeout: Duration) -> Result<(), String> {
    let host = crate::render::VISIBLE_HOSTNAME;
    request_within(
        port,
        "GET",
        &format!("http://{host}:{port}/perigee-serving-probe"),
        timeout,
    )
    .map(|_| ())
    .map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("no answer within {} ms", timeout.as_millis())
        }
        _ => e.to_string(),
    })
}

/// What `mgr:info` tells about storage.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StoreInfo {
    pub disk_used_bytes: Option<u64>,
    pub memory_used_bytes: Option<u64>,
    pub store_entries: Option<u64>,
    pub on_disk_objects: Option<u64>,
    pub memory_objects: Option<u64>,
}

fn kb_after(line: &str, label: &str) -> Option<u64> {
    let rest = line.trim_start().strip_prefix(label)?;
    let n: u64 = rest.split_whitespace().next()?.parse().ok()?;
    Some(n * 1024)
}

fn count_before(line: &str, label: &str) -> Option<u64> {
    let t = line.trim();
    let (n, name) = t.split_once(char::is_whitespace)?;
    (name.trim() == label).then(|| n.parse().ok()).flatten()
}

/// Parses the storage lines of the `info` page.
pub fn parse_mgr_info(text: &str) -> StoreInfo {
    let mut s = StoreInfo::default();
    for line in text.lines() {
        s.disk_used_bytes = s
            .disk_used_bytes
            .or_else(|| kb_after(line, "Storage Swap size:"));
        s.memory_used_bytes = s
            .memory_used_bytes
            .or_else(|| kb_after(line, "Storage Mem size:"));
        s.store_entries = s
            .store_entries
            .or_else(|| count_before(line, "StoreEntries"));
        s.on_disk_objects = s
            .on_disk_objects
            .or_else(|| count_before(line, "on-disk objects"));
        s.memory_objects = s
            .memory_objects
            .or_else(|| count_before(line, "Hot Object Cache Items"));
    }
    s
}

/// PURGEs one URL. Ok(true) when an object was removed, Ok(false) when none was cached.
pub fn purge(port: u16, url: &str) -> std::io::Result<bool> {
    let r = request(port, "PURGE", url)?;
    match r.status {
        200 => Ok(true),
        404 => Ok(false),
        s => Err(std::io::Error::other(format!("PURGE answered {s}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "Cache information for squid:\n\tStorage Swap size:\t1040 KB\n\tStorage Swap capacity:\t 0.1% used\n\tStorage Mem size:\t1100 KB\nInternal Data Structures:\n\t   106 StoreEntries\n\t   106 StoreEntries with MemObjects\n\t     3 Hot Object Cache Items\n\t     2 on-disk objects\n";

    #[test]
    fn parses_info_page() {
        let s = parse_mgr_info(INFO);
        assert_eq!(s.disk_used_bytes, Some(1040 * 1024));
        assert_eq!(s.memory_used_bytes, Some(1100 * 1024));
        assert_eq!(s.store_entries, Some(106));
        assert_eq!(s.memory_objects, Some(3));
        assert_eq!(s.on_disk_objects, Some(2));
        assert_eq!(parse_mgr_info("nothing"), StoreInfo::default());
    }
}
