//! Minimal HTTP/1.1 over a Unix stream socket: just what the control protocol needs
//! (one request per connection, JSON bodies with Content-Length).
use serde_json::Value;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

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

/// Read the header lines up to the blank one (or EOF), handing each Content-Length value,
/// trimmed, to `on_value`; its error stops the read.
fn read_content_length<R: BufRead>(
    r: &mut R,
    mut on_value: impl FnMut(&str) -> io::Result<()>,
) -> io::Result<()> {
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 || h.trim().is_empty() {
            return Ok(());
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.trim().eq_ignore_ascii_case("content-length") {
                on_value(v.trim())?;
            }
        }
    }
}

pub fn read_request<R: Read>(r: R) -> io::Result<Request> {
    let mut r = BufReader::new(r);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("/").to_string();
    let mut len = 0usize;
    read_content_length(&mut r, |v| {
        len = v
            .parse()
            .map_err(|_| io::Error::other("bad content-length"))?;
        Ok(())
    })?;
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
    r.read_line(&mut status_line)?;
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other("bad status line"))?;
    let mut len: Option<usize> = None;
    read_content_length(&mut r, |v| {
        len = v.parse().ok();
        Ok(())
    })?;
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
}
