//! Summary statistics over integer-nanosecond samples, computed the way `nsys stats` does.

use serde::{Deserialize, Serialize};

/// Count, mean, median, extremes, percentiles and sample standard deviation of a set of
/// durations in nanoseconds.
///
/// * The median of an even count is the mean of the two middle values (as `nsys stats`).
/// * `std_ns` is the sample standard deviation (divisor n − 1), 0 for a single sample.
/// * `p90_ns` / `p99_ns` interpolate linearly between closest ranks (numpy's default).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    pub count: u64,
    pub total_ns: u64,
    pub mean_ns: f64,
    pub median_ns: f64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub std_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
}

impl Distribution {
    /// Computes the distribution; sorts `samples` in place. Empty input gives all zeros.
    pub fn from_samples(samples: &mut [u64]) -> Distribution {
        if samples.is_empty() {
            return Distribution::default();
        }
        samples.sort_unstable();
        let n = samples.len();
        let total: u128 = samples.iter().map(|&v| v as u128).sum();
        let mean = total as f64 / n as f64;
        let median = if n % 2 == 1 {
            samples[n / 2] as f64
        } else {
            (samples[n / 2 - 1] as f64 + samples[n / 2] as f64) / 2.0
        };
        let std = if n > 1 {
            let ss: f64 = samples
                .iter()
                .map(|&v| {
                    let d = v as f64 - mean;
                    d * d
                })
                .sum();
            (ss / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Distribution {
            count: n as u64,
            total_ns: u64::try_from(total).unwrap_or(u64::MAX),
            mean_ns: mean,
            median_ns: median,
            min_ns: samples[0],
            max_ns: samples[n - 1],
            std_ns: std,
            p90_ns: percentile_sorted(samples, 90.0),
            p99_ns: percentile_sorted(samples, 99.0),
        }
    }
}

/// Linear interpolation between closest ranks of sorted samples (numpy `percentile` default).
fn percentile_sorted(sorted: &[u64], pct: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0] as f64,
        n => {
            let rank = pct / 100.0 * (n - 1) as f64;
            let lo = rank.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            let frac = rank - lo as f64;
            sorted[lo] as f64 + (sorted[hi] as f64 - sorted[lo] as f64) * frac
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_nsys_stats_conventions() {
        // nvtx_sum of the H200 fixture: two decode instances.
        let d = Distribution::from_samples(&mut [997534647, 215881487]);
        assert_eq!(d.total_ns, 1213416134);
        assert_eq!(d.median_ns, 606708067.0);
        assert_eq!(format!("{:.1}", d.std_ns), "552712250.0");
        assert_eq!(d.min_ns, 215881487);
    }

    #[test]
    fn single_and_empty() {
        let d = Distribution::from_samples(&mut [5]);
        assert_eq!((d.std_ns, d.median_ns, d.p99_ns), (0.0, 5.0, 5.0));
        assert_eq!(Distribution::from_samples(&mut []), Distribution::default());
    }

    #[test]
    fn percentiles_interpolate() {
        let mut v: Vec<u64> = (1..=11).collect();
        let d = Distribution::from_samples(&mut v);
        assert_eq!(d.p90_ns, 10.0);
        assert!((d.p99_ns - 10.9).abs() < 1e-9);
    }
}
