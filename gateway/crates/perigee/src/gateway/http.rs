//! Minimal HTTP/1.1 over a Unix stream socket: just what the control protocol needs
//! (one request per connection, JSON bodies with Content-Length).
use serde_json::Value;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

#[derive(Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

const MAX_BODY: usize = 4 << 20;
/// The longest request line or header line, and the most header lines, a message may have: the
/// control protocol's own requests are a few short lines, and an unbounded line would be read
/// into memory whole.
pub const MAX_LINE: usize = 8 * 1024;
pub const MAX_HEADERS: usize = 64;

fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_string())
}

/// One line (with its line ending) into `line`, at most MAX_LINE bytes; 0 at EOF.
fn read_line_capped<R: BufRead>(r: &mut R, line: &mut String) -> io::Result<usize> {
    line.clear();
    let n = r.by_ref().take(MAX_LINE as u64 + 1).read_line(line)?;
    if n > MAX_LINE {
        return Err(invalid("line too long"));
    }
    Ok(n)
}

/// A Content-Length value: ASCII digits only (no sign, no spaces inside), within usize.
fn content_length(v: &str) -> io::Result<usize> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid("bad content-length"));
    }
    v.parse().map_err(|_| invalid("bad content-length"))
}

/// Read the header lines up to the blank one (or EOF), at most MAX_HEADERS of at most MAX_LINE
/// bytes, and return the Content-Length. Two different Content-Length values are refused (a
/// body whose length depends on which one is believed).
fn read_content_length<R: BufRead>(r: &mut R) -> io::Result<Option<usize>> {
    let mut len: Option<usize> = None;
    let mut h = String::new();
    for _ in 0..=MAX_HEADERS {
        if read_line_capped(r, &mut h)? == 0 || h.trim().is_empty() {
            return Ok(len);
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.trim().eq_ignore_ascii_case("content-length") {
                let n = content_length(v.trim())?;
                if len.is_some_and(|prev| prev != n) {
                    return Err(invalid("conflicting content-length"));
                }
                len = Some(n);
            }
        }
    }
    Err(invalid("too many header lines"))
}

pub fn read_request<R: Read>(r: R) -> io::Result<Request> {
    let mut r = BufReader::new(r);
    let mut line = String::new();
    read_line_capped(&mut r, &mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("/").to_string();
    let len = read_content_length(&mut r)?.unwrap_or(0);
    if len > MAX_BODY {
        return Err(io::Error::other("body too large"));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    let (path, qs) = target.split_once('?').unwrap_or((&target, ""));
    let query = qs
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), v.to_string())
        })
        .collect();
    Ok(Request {
        method,
        path: path.to_string(),
        query,
        body,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        422 => "Unprocessable Entity",
        501 => "Not Implemented",
        _ => "Error",
    }
}

pub fn write_response<W: Write>(
    mut w: W,
    status: u16,
    content_type: &str,
    body: &[u8],
) -> io::Result<()> {
    write!(
        w,
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reason(status),
        body.len()
    )?;
    w.write_all(body)?;
    w.flush()
}

/// Client side: one request on a fresh connection; returns status and parsed JSON body.
pub fn request(
    socket: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> io::Result<(u16, Value)> {
    let mut s = UnixStream::connect(socket)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: perigee\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    )?;
    let mut r = BufReader::new(s);
    let mut status_line = String::new();
    read_line_capped(&mut r, &mut status_line)?;
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other("bad status line"))?;
    // A response with a bad Content-Length is read to EOF instead (our own daemon never sends one).
    let len = read_content_length(&mut r).unwrap_or(None);
    let mut body = Vec::new();
    match len {
        Some(n) => {
            body.resize(n, 0);
            r.read_exact(&mut body)?;
        }
        None => {
            r.read_to_end(&mut body)?;
        }
    }
    let v = serde_json::from_slice(&body)
        .unwrap_or(Value::String(String::from_utf8_lossy(&body).into_owned()));
    Ok((status, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_request_with_query_and_body() {
        let raw =
            b"PUT /v1/flows?state=all&x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\n{}xx";
        let r = read_request(&raw[..]).unwrap();
        assert_eq!(r.method, "PUT");
        assert_eq!(r.path, "/v1/flows");
        assert_eq!(r.param("state"), Some("all"));
        assert_eq!(r.body, b"{}xx");
    }

    fn parse(raw: &[u8]) -> io::Result<Request> {
        read_request(raw)
    }

    #[test]
    fn header_lines_are_capped_in_length_and_count() {
        let long = format!(
            "GET /v1/health HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(MAX_LINE)
        );
        assert_eq!(
            parse(long.as_bytes()).unwrap_err().to_string(),
            "line too long"
        );
        let line = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_LINE));
        assert_eq!(
            parse(line.as_bytes()).unwrap_err().to_string(),
            "line too long"
        );
        let many = format!(
            "GET / HTTP/1.1\r\n{}\r\n",
            "X: y\r\n".repeat(MAX_HEADERS + 1)
        );
        assert_eq!(
            parse(many.as_bytes()).unwrap_err().to_string(),
            "too many header lines"
        );
        let enough = format!(
            "GET / HTTP/1.1\r\n{}\r\n",
            "X: y\r\n".repeat(MAX_HEADERS - 1)
        );
        parse(enough.as_bytes()).unwrap();
    }

    #[test]
    fn content_length_is_digits_and_unambiguous() {
        for bad in ["+4", "-1", "4 4", "0x4", "", "99999999999999999999999"] {
            let raw = format!("PUT / HTTP/1.1\r\nContent-Length: {bad}\r\n\r\n{{}}xx");
            assert!(parse(raw.as_bytes()).is_err(), "{bad:?}");
        }
        let two = b"PUT / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 4\r\n\r\n{}xx";
        assert_eq!(
            parse(two).unwrap_err().to_string(),
            "conflicting content-length"
        );
        let same = b"PUT / HTTP/1.1\r\nContent-Length: 4\r\ncontent-length: 4\r\n\r\n{}xx";
        assert_eq!(parse(same).unwrap().body, b"{}xx");
        let huge = format!("PUT / HTTP/1.1\r\nContent-Length: {}\r\n\r\n", MAX_BODY + 1);
        assert!(parse(huge.as_bytes()).is_err());
    }
}
