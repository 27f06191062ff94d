//! Result arithmetic: per-thread counters, their sum, latency percentiles.
use std::collections::BTreeMap;

#[derive(Default, Debug, Clone, PartialEq)]
pub struct Counts {
    pub completed: u64,
    pub completed_in_window: u64,
    pub errors: u64,
    pub unfinished: u64,
    /// A thread ran out of its `max_conns` before the window ended.
    pub capped: bool,
    pub error_kinds: BTreeMap<String, u64>,
    /// Connect start → echo back, microseconds, one per completed connection.
    pub latencies_us: Vec<u32>,
}

impl Counts {
    pub fn error(&mut self, kind: String) {
        self.errors += 1;
        *self.error_kinds.entry(kind).or_default() += 1;
    }

    pub fn merge(&mut self, other: Counts) {
        self.completed += other.completed;
        self.completed_in_window += other.completed_in_window;
        self.errors += other.errors;
        self.unfinished += other.unfinished;
        self.capped |= other.capped;
        for (k, n) in other.error_kinds {
            *self.error_kinds.entry(k).or_default() += n;
        }
        self.latencies_us.extend(other.latencies_us);
    }
}

/// Nearest-rank percentile (`p` in 0..=100) of unsorted samples; None without samples.
pub fn percentile(samples: &mut [u32], p: f64) -> Option<u32> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    Some(samples[rank.clamp(1, samples.len()) - 1])
}

/// The JSON line `bench.tools.gwload.conn_rate` reads (the same keys as the Python tool had).
pub fn summary(mut c: Counts, threads: usize, duration_s: f64) -> serde_json::Value {
    let rate = if duration_s > 0.0 {
        c.completed_in_window as f64 / duration_s
    } else {
        0.0
    };
    let p50 = percentile(&mut c.latencies_us, 50.0);
    let p99 = percentile(&mut c.latencies_us, 99.0);
    serde_json::json!({
        "processes": threads,
        "completed": c.completed,
        "completed_in_window": c.completed_in_window,
        "errors": c.errors,
        "unfinished": c.unfinished,
        "capped": c.capped,
        "error_kinds": c.error_kinds,
        "duration_s": duration_s,
        "rate_per_s": rate,
        "latency_p50_us": p50,
        "latency_p99_us": p99,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_nearest_rank() {
        let mut v: Vec<u32> = (1..=100).rev().collect();
        assert_eq!(percentile(&mut v, 50.0), Some(50));
        assert_eq!(percentile(&mut v, 99.0), Some(99));
        assert_eq!(percentile(&mut v, 100.0), Some(100));
        assert_eq!(percentile(&mut [7], 99.0), Some(7));
        assert_eq!(percentile(&mut [], 50.0), None);
    }

    #[test]
    fn merge_sums_counts_and_kinds() {
        let mut a = Counts {
            completed: 3,
            completed_in_window: 2,
            latencies_us: vec![10, 20],
            ..Default::default()
        };
        a.error("ECONNRESET".into());
        let mut b = Counts {
            completed: 5,
            completed_in_window: 5,
            unfinished: 1,
            latencies_us: vec![30],
            capped: true,
            ..Default::default()
        };
        b.error("ECONNRESET".into());
        b.error("eof".into());
        a.merge(b);
        assert_eq!(
            (a.completed, a.completed_in_window, a.errors, a.unfinished),
            (8, 7, 3, 1)
        );
        assert_eq!(a.error_kinds["ECONNRESET"], 2);
        assert_eq!(a.error_kinds["eof"], 1);
        assert_eq!(a.latencies_us.len(), 3);
        assert!(
            a.capped,
            "one capped thread makes the run's rate a lower bound"
        );
    }

    #[test]
    fn summary_rate_counts_the_window_only() {
        let c = Counts {
            completed: 120,
            completed_in_window: 100,
            latencies_us: vec![5, 1, 9, 3],
            ..Default::default()
        };
        let s = summary(c, 2, 2.0);
        assert_eq!(s["rate_per_s"], 50.0);
        assert_eq!(s["completed"], 120);
        assert_eq!(s["latency_p50_us"], 3);
        assert_eq!(s["latency_p99_us"], 9);
        assert_eq!(s["processes"], 2);
    }
}
