//! unbound's counters (`unbound-control stats_noreset`), kept cumulative across reloads and
//! restarts, and the figures `/v1/dns/stats` derives from them.

use serde::Serialize;

/// The counters of one unbound run (they start at 0 whenever unbound starts or reloads).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RunCounters {
    pub queries: u64,
    /// Answered from the cache (fresh or stale) or from a local zone, without the upstream.
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub prefetches: u64,
    /// Answers served from expired records (RFC 8767).
    pub expired: u64,
    /// Misses answered after asking the upstream.
    pub recursive_replies: u64,
    /// Mean time those took (unbound's `recursion.time.avg`), seconds.
    pub recursion_time_avg_s: f64,
    pub ratelimited: u64,
    /// Answers that were SERVFAIL (typically: no upstream answered in time).
    pub servfail: u64,
    /// Answers that DNSSEC-validated, and those refused as bogus.
    pub secure: u64,
    pub bogus: u64,
    pub cache_memory_bytes: Option<u64>,
}

/// Parses `unbound-control stats_noreset` output (`name=value` lines; the `total.` ones).
pub fn parse_stats(text: &str) -> RunCounters {
    let mut c = RunCounters::default();
    let mut rrset: Option<u64> = None;
    let mut msg: Option<u64> = None;
    for line in text.lines() {
        let Some((k, v)) = line.trim().split_once('=') else {
            continue;
        };
        let n = || v.trim().parse::<u64>().unwrap_or(0);
        match k {
            "total.num.queries" => c.queries = n(),
            "total.num.cachehits" => c.cache_hits = n(),
            "total.num.cachemiss" => c.cache_misses = n(),
            "total.num.prefetch" => c.prefetches = n(),
            "total.num.expired" => c.expired = n(),
            "total.num.recursivereplies" => c.recursive_replies = n(),
            "total.num.queries_ip_ratelimited" => c.ratelimited = n(),
            "num.answer.rcode.SERVFAIL" => c.servfail = n(),
            "num.answer.secure" => c.secure = n(),
            "num.answer.bogus" => c.bogus = n(),
            "total.recursion.time.avg" => {
                c.recursion_time_avg_s = v
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .unwrap_or(0.0)
            }
            "mem.cache.rrset" => rrset = v.trim().parse().ok(),
            "mem.cache.message" => msg = v.trim().parse().ok(),
            _ => {}
        }
    }
    c.cache_memory_bytes = match (rrset, msg) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    c
}

/// Counters since the gateway daemon started: earlier runs carried, plus the current one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Totals {
    pub queries: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub prefetches: u64,
    pub expired: u64,
    pub recursive_replies: u64,
    /// Sum of the upstream resolution times of all misses, seconds.
    pub recursion_time_s: f64,
    pub ratelimited: u64,
    pub servfail: u64,
    pub secure: u64,
    pub bogus: u64,
}

impl Totals {
    fn add(&mut self, r: &RunCounters) {
        self.queries += r.queries;
        self.cache_hits += r.cache_hits;
        self.cache_misses += r.cache_misses;
        self.prefetches += r.prefetches;
        self.expired += r.expired;
        self.recursive_replies += r.recursive_replies;
        self.recursion_time_s += r.recursion_time_avg_s * r.recursive_replies as f64;
        self.ratelimited += r.ratelimited;
        self.servfail += r.servfail;
        self.secure += r.secure;
        self.bogus += r.bogus;
    }

    /// Cache hits over queries.
    pub fn hit_ratio(&self) -> f64 {
        if self.queries == 0 {
            0.0
        } else {
            (self.cache_hits as f64 / self.queries as f64).min(1.0)
        }
    }

    /// The mean time a miss waited for the upstream (across the satellite at a terminal), s.
    pub fn mean_upstream_s(&self) -> Option<f64> {
        (self.recursive_replies > 0).then(|| self.recursion_time_s / self.recursive_replies as f64)
    }

    /// Satellite time saved: every hit would have waited one upstream resolution, taken as
    /// the mean that misses actually waited. Before the first miss there is no measurement: 0.
    pub fn satellite_time_saved_s(&self) -> f64 {
        self.cache_hits as f64 * self.mean_upstream_s().unwrap_or(0.0)
    }
}

/// Keeps counters cumulative although unbound restarts them at every reload or restart.
#[derive(Debug, Clone, Default)]
pub struct Accumulator {
    carried: Totals,
    current: RunCounters,
}

impl Accumulator {
    /// The latest reading of the running unbound.
    pub fn update(&mut self, run: RunCounters) {
        // A smaller query count means unbound restarted its counters without us noticing
        // (it died and came back): what the last reading had is kept, not lost.
        if run.queries < self.current.queries {
            self.carry();
        }
        self.current = run;
    }

    /// unbound is about to restart its counters (reload, restart, stop): keep what it had.
    pub fn carry(&mut self) {
        let cur = self.current;
        self.carried.add(&cur);
        self.current = RunCounters::default();
    }

    pub fn totals(&self) -> Totals {
        let mut t = self.carried;
        t.add(&self.current);
        t
    }

    pub fn current(&self) -> RunCounters {
        self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATS: &str = "thread0.num.queries=16\n\
        total.num.queries=21\ntotal.num.queries_ip_ratelimited=1\ntotal.num.cachehits=18\n\
        total.num.cachemiss=3\ntotal.num.prefetch=3\ntotal.num.expired=3\n\
        total.num.recursivereplies=2\ntotal.recursion.time.avg=0.600000\n\
        total.recursion.time.median=0\nmem.cache.rrset=66000\nmem.cache.message=34000\n\
        num.answer.rcode.SERVFAIL=2\nnum.answer.secure=5\nnum.answer.bogus=1\n\
        time.up=30.95\n";

    #[test]
    fn parses_the_total_lines() {
        let c = parse_stats(STATS);
        assert_eq!(
            (
                c.queries,
                c.cache_hits,
                c.cache_misses,
                c.prefetches,
                c.expired
            ),
            (21, 18, 3, 3, 3)
        );
        assert_eq!((c.recursive_replies, c.ratelimited, c.servfail), (2, 1, 2));
        assert_eq!((c.secure, c.bogus), (5, 1));
        assert!((c.recursion_time_avg_s - 0.6).abs() < 1e-9);
        assert_eq!(c.cache_memory_bytes, Some(100_000));
        assert_eq!(parse_stats("garbage\n=\nx=y"), RunCounters::default());
        assert_eq!(
            parse_stats("total.recursion.time.avg=nan").recursion_time_avg_s,
            0.0
        );
    }

    #[test]
    fn time_saved_is_hits_times_the_mean_upstream_time() {
        let mut a = Accumulator::default();
        a.update(parse_stats(STATS));
        let t = a.totals();
        assert!((t.mean_upstream_s().unwrap() - 0.6).abs() < 1e-9);
        assert!((t.satellite_time_saved_s() - 18.0 * 0.6).abs() < 1e-9);
        assert!((t.hit_ratio() - 18.0 / 21.0).abs() < 1e-9);
        assert_eq!(Totals::default().hit_ratio(), 0.0);
        assert_eq!(Totals::default().satellite_time_saved_s(), 0.0);
    }

    #[test]
    fn counters_survive_reloads_and_unnoticed_restarts() {
        let mut a = Accumulator::default();
        let run = |q: u64, hits: u64, rr: u64, avg: f64| RunCounters {
            queries: q,
            cache_hits: hits,
            cache_misses: q - hits,
            recursive_replies: rr,
            recursion_time_avg_s: avg,
            ..RunCounters::default()
        };
        a.update(run(10, 6, 4, 0.5));
        a.carry(); // a reload
        a.update(run(4, 2, 2, 1.1));
        assert_eq!(a.totals().queries, 14);
        // unbound died and came back on its own: its counters went back to a small number.
        a.update(run(1, 1, 0, 0.0));
        let t = a.totals();
        assert_eq!((t.queries, t.cache_hits, t.recursive_replies), (15, 9, 6));
        // Weighted mean of the runs: (4 × 0.5 + 2 × 1.1) / 6.
        assert!((t.mean_upstream_s().unwrap() - 0.7).abs() < 1e-9);
    }
}
