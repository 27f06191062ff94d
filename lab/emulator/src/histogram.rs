//! Log-linear latency histogram (32 sub-buckets per power of two, ≤ 3.2 % relative error):
//! fixed memory, O(1) record, used for the scheduling-lateness percentiles.

const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS; // 32
const LINEAR_LIMIT: u64 = 2 * SUB; // values below this get one bucket each
const BUCKETS: usize = ((64 - SUB_BITS as usize) * SUB as usize) + SUB as usize;

#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

fn bucket_of(v: u64) -> usize {
    if v < LINEAR_LIMIT {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros(); // >= SUB_BITS + 1
    let shift = msb - SUB_BITS;
    let mantissa = v >> shift; // in [SUB, 2*SUB)
    ((shift as u64) * SUB + mantissa) as usize
}

/// Highest value that falls into bucket `b` (a conservative percentile estimate).
fn bucket_upper(b: usize) -> u64 {
    let b = b as u64;
    if b < LINEAR_LIMIT {
        return b;
    }
    let shift = b / SUB - 1;
    let mantissa = b - shift * SUB;
    ((mantissa + 1) << shift) - 1
}

impl Histogram {
    pub fn new() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            count: 0,
            max: 0,
        }
    }

    pub fn record(&mut self, v: u64) {
        self.counts[bucket_of(v)] += 1;
        self.count += 1;
        self.max = self.max.max(v);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// Value at quantile `q` in [0, 1] (bucket upper bound, capped at the exact max).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_upper(b).min(self.max);
            }
        }
        self.max
    }

    pub fn clear(&mut self) {
        self.counts.iter_mut().for_each(|c| *c = 0);
        self.count = 0;
        self.max = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_contain_their_values() {
        let mut prev = 0;
        for v in (0..200_000u64).chain([u64::MAX / 3, u64::MAX]) {
            let b = bucket_of(v);
            assert!(b >= prev && b < BUCKETS);
            assert!(v <= bucket_upper(b), "v {v} b {b}");
            if b > 0 {
                assert!(v > bucket_upper(b - 1));
            }
            prev = b;
        }
    }

    #[test]
    fn quantiles_within_relative_error() {
        let mut h = Histogram::new();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(0.5) as f64;
        let p99 = h.quantile(0.99) as f64;
        assert!((p50 / 5_000_000.0 - 1.0).abs() < 0.04, "p50 {p50}");
        assert!((p99 / 9_900_000.0 - 1.0).abs() < 0.04, "p99 {p99}");
        assert_eq!(h.max(), 10_000_000);
        assert_eq!(h.quantile(1.0), 10_000_000);
        h.clear();
        assert_eq!(h.count(), 0);
        assert_eq!(h.quantile(0.5), 0);
    }
}
