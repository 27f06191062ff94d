//! Squid's access log in our own format: the format string, the line parser, the bounded ring
//! of parsed requests and the cumulative counters derived from them.

use serde::Serialize;
use std::collections::VecDeque;

/// Name of our `logformat`.
pub const LOGFORMAT_NAME: &str = "perigee";
/// Space-separated fields; every value Squid prints here is free of spaces (absent values are
/// "-"), and the URL, the only field that may be odd, comes last and takes the rest of the line.
/// `P1` versions the format.
///
/// time.ms  duration_ms  client_ip  client_port  method  result  hierarchy  status
/// bytes_to_client  body_bytes_from_upstream  server_ip  host  url
pub const LOGFORMAT_SPEC: &str = "P1 %ts.%03tu %tr %>a %>p %rm %Ss %Sh %>Hs %<st %<bs %<a %>rd %ru";

/// How Squid satisfied a request, folded from its `%Ss` result code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(transform = perigee_types::flat_enum)]
pub enum CacheOutcome {
    /// Served from the cache, body not fetched over the satellite (incl. revalidated 304s).
    Hit,
    /// Fetched from the origin.
    Miss,
    /// Refused by http_access (e.g. a client outside the served subnets).
    Denied,
    /// Anything else (errors, tunnels, aborted before a result).
    Other,
}

/// One request as Squid logged it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct AccessRecord {
    /// Unix time the request finished, seconds.
    pub ts: f64,
    pub duration_ms: u64,
    /// "ip:port" ("[v6]:port" for IPv6), like Flow.client.
    pub client: String,
    pub method: String,
    /// Host the client asked for ("-" when unknown).
    pub host: String,
    pub url: String,
    pub status: u16,
    /// Squid's result code, e.g. TCP_HIT, TCP_MEM_HIT, TCP_MISS, TCP_REFRESH_UNMODIFIED, TCP_DENIED.
    pub result: String,
    pub outcome: CacheOutcome,
    /// Squid's hierarchy code, e.g. HIER_NONE (from cache), ORIGINAL_DST (fetched).
    pub hierarchy: String,
    /// Bytes sent to the client, headers included.
    pub bytes: u64,
    /// Body bytes received from the origin (0 when none).
    pub upstream_bytes: u64,
    /// The origin address Squid connected to, if any.
    pub server: Option<String>,
}

/// Folds a `%Ss` code into a CacheOutcome. Suffixes such as `_ABORTED` keep the base meaning.
pub fn classify(result: &str) -> CacheOutcome {
    if result.starts_with("TCP_DENIED") || result.starts_with("TAG_NONE_DENIED") {
        return CacheOutcome::Denied;
    }
    if result.contains("HIT")
        || result.starts_with("TCP_REFRESH_UNMODIFIED")
        || result.starts_with("TCP_REFRESH_FAIL_OLD")
        || result.starts_with("TCP_REFRESH_IGNORED")
    {
        return CacheOutcome::Hit;
    }
    if result.contains("MISS")
        || result.starts_with("TCP_REFRESH")
        || result.starts_with("TCP_CLIENT_REFRESH")
    {
        return CacheOutcome::Miss;
    }
    CacheOutcome::Other
}

fn dash_none(s: &str) -> Option<&str> {
    (s != "-" && !s.is_empty()).then_some(s)
}

fn num<T: std::str::FromStr + Default>(s: &str) -> Result<T, String> {
    match dash_none(s) {
        None => Ok(T::default()),
        Some(v) => v.parse().map_err(|_| format!("not a number: {v:?}")),
    }
}

/// Squid's `%ts.%03tu`: seconds and milliseconds in digits. Rust's float parser also takes "inf",
/// "NaN" and "1e763" (infinite): none of them is a time, and a non-finite one would reach the
/// JSON of `/v1/cache/collect` as null (found by the squid_access_log fuzz target).
fn unix_time(s: &str) -> Result<f64, String> {
    let digits = |p: &str| !p.is_empty() && p.len() <= 20 && p.bytes().all(|b| b.is_ascii_digit());
    let (secs, frac) = s.split_once('.').unwrap_or((s, "0"));
    if !digits(secs) || !digits(frac) {
        return Err(format!("bad time: {s:?}"));
    }
    s.parse::<f64>()
        .ok()
        .filter(|t| t.is_finite())
        .ok_or_else(|| format!("bad time: {s:?}"))
}

fn join_host_port(ip: &str, port: &str) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// Parses one line written with LOGFORMAT_SPEC. A record Squid could write only in part (a
/// full disk; `on-error=drop` goes on) is followed on the same line by the next whole one, cut
/// anywhere: the last place that parses as a whole record wins.
pub fn parse_access_line(line: &str) -> Result<AccessRecord, String> {
    let line = line.trim_end_matches(['\n', '\r']);
    let whole = parse_record(line);
    if whole.is_ok() {
        return whole;
    }
    line.rmatch_indices("P1 ")
        .filter(|&(i, _)| i > 0)
        .find_map(|(i, _)| parse_record(&line[i..]).ok())
        .ok_or_else(|| whole.unwrap_err())
}

fn parse_record(line: &str) -> Result<AccessRecord, String> {
    let mut parts = line.splitn(14, ' ');
    let mut next = |what: &str| parts.next().ok_or_else(|| format!("missing field {what}"));
    let tag = next("tag")?;
    if tag != "P1" {
        return Err(format!("not a perigee P1 line (starts with {tag:?})"));
    }
    let ts = unix_time(next("time")?)?;
    let duration_ms: u64 = num(next("duration")?)?;
    let client_ip = next("client_ip")?.to_string();
    let client_port = next("client_port")?.to_string();
    let method = next("method")?.to_string();
    let result = next("result")?.to_string();
    let hierarchy = next("hierarchy")?.to_string();
    let status: u16 = num(next("status")?)?;
    let bytes: u64 = num(next("bytes")?)?;
    let upstream_bytes: u64 = num(next("upstream_bytes")?)?;
    let server = dash_none(next("server")?).map(str::to_string);
    let host = next("host")?.to_string();
    let url = next("url")?.to_string();
    Ok(AccessRecord {
        ts,
        duration_ms,
        client: join_host_port(&client_ip, &client_port),
        method,
        host,
        url,
        status,
        outcome: classify(&result),
        result,
        hierarchy,
        bytes,
        upstream_bytes,
        server,
    })
}

/// Cumulative totals since the manager started; draining the ring does not reset them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RequestCounters {
    pub requests: u64,
    pub hits: u64,
    pub misses: u64,
    pub denied: u64,
    pub other: u64,
    /// Bytes sent to clients.
    pub bytes: u64,
    /// Bytes sent to clients from the cache.
    pub hit_bytes: u64,
    /// Bytes sent to clients for misses.
    pub miss_bytes: u64,
    /// Body bytes Squid fetched from origins.
    pub upstream_bytes: u64,
    /// Lines that did not parse (kept out of everything else).
    pub unparsed_lines: u64,
}

impl RequestCounters {
    pub fn add(&mut self, r: &AccessRecord) {
        self.requests += 1;
        self.bytes += r.bytes;
        self.upstream_bytes += r.upstream_bytes;
        match r.outcome {
            CacheOutcome::Hit => {
                self.hits += 1;
                self.hit_bytes += r.bytes;
            }
            CacheOutcome::Miss => {
                self.misses += 1;
                self.miss_bytes += r.bytes;
            }
            CacheOutcome::Denied => self.denied += 1,
            CacheOutcome::Other => self.other += 1,
        }
    }

    /// hits / (hits + misses); denied and failed requests are not cacheable traffic.
    pub fn hit_ratio_requests(&self) -> f64 {
        ratio(self.hits, self.hits + self.misses)
    }

    pub fn hit_ratio_bytes(&self) -> f64 {
        ratio(self.hit_bytes, self.hit_bytes + self.miss_bytes)
    }

    /// Bytes delivered from the cache that would otherwise have crossed the satellite.
    pub fn bytes_saved_satellite(&self) -> u64 {
        self.hit_bytes
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Bounded FIFO of parsed requests: when full the oldest is dropped and counted.
#[derive(Debug)]
pub struct RequestRing {
    buf: VecDeque<AccessRecord>,
    capacity: usize,
    dropped: u64,
}

impl RequestRing {
    pub fn new(capacity: usize) -> Self {
        RequestRing {
            buf: VecDeque::with_capacity(capacity.min(4096)),
            capacity: capacity.max(1),
            dropped: 0,
        }
    }

    pub fn push(&mut self, r: AccessRecord) {
        if self.buf.len() == self.capacity {
            self.buf.pop_front();
            self.dropped += 1;
        }
        self.buf.push_back(r);
    }

    /// Takes every buffered record, oldest first.
    pub fn drain(&mut self) -> Vec<AccessRecord> {
        self.buf.drain(..).collect()
    }

    /// The newest `limit` records without removing them, oldest first.
    pub fn recent(&self, limit: usize) -> Vec<AccessRecord> {
        let skip = self.buf.len().saturating_sub(limit);
        self.buf.iter().skip(skip).cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_must_be_digits_and_finite() {
        // The squid_access_log fuzz target's crash: "1e763" parsed as an infinite time.
        let tail = "42 10.81.1.10 40112 GET TCP_MISS ORIGINAL_DST 200 10 10 - h http://h/";
        for bad in [
            "1e763", "inf", "NaN", "-1.5", "+1.5", "1.2.3", ".5", "1.", "0x10",
        ] {
            assert!(
                parse_access_line(&format!("P1 {bad} {tail}")).is_err(),
                "{bad}"
            );
        }
        let ok = parse_access_line(&format!("P1 1763780000.123 {tail}")).unwrap();
        assert_eq!(ok.ts, 1_763_780_000.123);
        assert_eq!(
            parse_access_line(&format!("P1 17 {tail}")).unwrap().ts,
            17.0
        );
    }

    const MISS: &str = "P1 1763780000.123 42 10.81.1.10 40112 GET TCP_MISS ORIGINAL_DST 200 1048789 1048576 10.81.3.10 10.81.3.10 http://10.81.3.10/obj/1m\n";
    const HIT: &str = "P1 1763780001.004 3 10.81.1.10 40114 GET TCP_MEM_HIT HIER_NONE 200 1048790 - - 10.81.3.10 http://10.81.3.10/obj/1m";

    #[test]
    fn parses_miss_and_hit() {
        let m = parse_access_line(MISS).unwrap();
        assert_eq!(m.client, "10.81.1.10:40112");
        assert_eq!(
            (m.status, m.bytes, m.upstream_bytes, m.duration_ms),
            (200, 1_048_789, 1_048_576, 42)
        );
        assert_eq!(m.outcome, CacheOutcome::Miss);
        assert_eq!(m.server.as_deref(), Some("10.81.3.10"));
        assert_eq!(m.url, "http://10.81.3.10/obj/1m");
        assert!((m.ts - 1_763_780_000.123).abs() < 1e-6);
        let h = parse_access_line(HIT).unwrap();
        assert_eq!(
            (h.outcome, h.upstream_bytes, h.server.clone()),
            (CacheOutcome::Hit, 0, None)
        );
        assert_eq!(h.result, "TCP_MEM_HIT");
    }

    #[test]
    fn ipv6_client_and_url_with_spaces_survive() {
        let l = "P1 1.000 0 fd71:1::10 5555 GET TCP_DENIED HIER_NONE 403 3900 - - example.test http://example.test/a b";
        let r = parse_access_line(l).unwrap();
        assert_eq!(r.client, "[fd71:1::10]:5555");
        assert_eq!(r.outcome, CacheOutcome::Denied);
        assert_eq!(r.url, "http://example.test/a b");
    }

    #[test]
    fn rejects_foreign_and_short_lines() {
        assert!(parse_access_line(
            "1763780000.123     42 10.0.0.1 TCP_MISS/200 1 GET http://x/ - HIER_NONE/- -"
        )
        .is_err());
        assert!(parse_access_line("P1 1.0 2 10.0.0.1 5").is_err());
        // A record cut short by a full disk, then the next one on the same line.
        for cut in ["ORIGINAL_DST ", "ORIGINAL_DST", "ORIG", "P1 1763780000.1"] {
            let joined = format!("P1 1763780000.100 8 10.0.0.1 4000 GET TCP_MISS {cut}{MISS}");
            assert_eq!(
                parse_access_line(&joined).unwrap(),
                parse_access_line(MISS).unwrap(),
                "{joined}"
            );
        }
        assert!(parse_access_line("P1 x 2 a b c d e f g h i j k").is_err());
    }

    #[test]
    fn classification() {
        for c in [
            "TCP_HIT",
            "TCP_MEM_HIT",
            "TCP_IMS_HIT",
            "TCP_REFRESH_UNMODIFIED",
            "TCP_HIT_ABORTED",
            "TCP_INM_HIT",
        ] {
            assert_eq!(classify(c), CacheOutcome::Hit, "{c}");
        }
        for c in [
            "TCP_MISS",
            "TCP_REFRESH_MODIFIED",
            "TCP_MISS_ABORTED",
            "TCP_CLIENT_REFRESH_MISS",
            "TCP_SWAPFAIL_MISS",
        ] {
            assert_eq!(classify(c), CacheOutcome::Miss, "{c}");
        }
        assert_eq!(classify("TCP_DENIED"), CacheOutcome::Denied);
        assert_eq!(classify("TAG_NONE"), CacheOutcome::Other);
    }

    #[test]
    fn counters_and_ratios() {
        let mut c = RequestCounters::default();
        c.add(&parse_access_line(MISS).unwrap());
        c.add(&parse_access_line(HIT).unwrap());
        c.add(&parse_access_line(HIT).unwrap());
        assert_eq!((c.requests, c.hits, c.misses), (3, 2, 1));
        assert!((c.hit_ratio_requests() - 2.0 / 3.0).abs() < 1e-9);
        assert!(
            (c.hit_ratio_bytes() - (2.0 * 1_048_790.0) / (2.0 * 1_048_790.0 + 1_048_789.0)).abs()
                < 1e-9
        );
        assert_eq!(c.bytes_saved_satellite(), 2 * 1_048_790);
        assert_eq!(RequestCounters::default().hit_ratio_requests(), 0.0);
    }

    #[test]
    fn ring_is_bounded_and_drains() {
        let mut ring = RequestRing::new(2);
        for _ in 0..3 {
            ring.push(parse_access_line(HIT).unwrap());
        }
        assert_eq!((ring.len(), ring.dropped()), (2, 1));
        assert_eq!(ring.recent(1).len(), 1);
        assert_eq!(ring.drain().len(), 2);
        assert!(ring.is_empty());
    }
}
