//! NVML's resolution in time, read from the series itself: the sampler's real period (the
//! median interval between its timestamps) and how often NVML refreshed the power reading and
//! the total-energy counter (the intervals between the samples at which a value changed).
//!
//! On the H100 and H200 hosts both power and the counter change only every ~100 ms, while the
//! sampler asks every 24.3 ms (a nominal 20 ms plus the reads): sampled faster than NVML
//! refreshes, the series is a staircase, and a window shorter than about two refreshes rests on
//! one or two readings whatever the sampling rate. [`resolution_ms`] is the time one reading
//! stands for; `energy` withholds J/token for windows shorter than [`MIN_UPDATES`] of it.

use llmprof_bundle::NvmlSeries;
use llmprof_report::stats::median;

/// Refreshes a window must span before its energy is divided into J/token.
pub const MIN_UPDATES: f64 = 2.0;

/// Fewest change-to-change intervals a refresh period is detected from.
const MIN_INTERVALS: usize = 3;

/// The sampler's real period: the median interval between successive timestamps, ms.
pub fn measured_interval_ms(t_ns: &[i64]) -> Option<f64> {
    let dt: Vec<f64> = t_ns
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .filter(|&d| d > 0)
        .map(|d| d as f64 / 1e6)
        .collect();
    median(&dt)
}

/// How often a sampled value was refreshed, ms: the intervals between the samples at which it
/// changed (compared with the last reading before it; missing readings, `None`, are skipped).
/// Sampled every 24 ms, a value refreshed every 100 ms changes every fourth or fifth sample,
/// so the intervals are 97 or 121 ms and a refresh that left the value unchanged shows as one
/// of twice that: the result is the mean of the intervals up to 1.5 times their median, which
/// keeps the first two kinds and drops the third. `None` with fewer than four changes.
pub fn update_period_ms(t_ns: &[i64], value: impl Fn(usize) -> Option<u64>) -> Option<f64> {
    let mut last: Option<u64> = None;
    let mut changes: Vec<i64> = Vec::new();
    for (i, &t) in t_ns.iter().enumerate() {
        let Some(v) = value(i) else {
            continue;
        };
        if last.is_some_and(|l| l != v) {
            changes.push(t);
        }
        last = Some(v);
    }
    let gaps: Vec<f64> = changes
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .filter(|&d| d > 0)
        .map(|d| d as f64 / 1e6)
        .collect();
    if gaps.len() < MIN_INTERVALS {
        return None;
    }
    let m = median(&gaps)?;
    let kept: Vec<f64> = gaps.into_iter().filter(|&g| g <= 1.5 * m).collect();
    Some(kept.iter().sum::<f64>() / kept.len() as f64)
}

/// Fills the series' measured sampling period and the refresh periods of power and the energy
/// counter, from its own samples.
pub fn describe(s: &mut NvmlSeries) {
    s.measured_interval_ms = measured_interval_ms(&s.t_ns);
    s.power_update_ms = update_period_ms(&s.t_ns, |i| {
        s.has_power(i).then(|| u64::from(s.power_mw[i]))
    });
    s.energy_update_ms = update_period_ms(&s.t_ns, |i| s.has_energy(i).then(|| s.energy_mj[i]));
}

/// The time one power reading stands for, ms: the slower of NVML's power refresh (the
/// counter's when power's is unknown) and the sampling period (measured, else nominal).
pub fn resolution_ms(s: &NvmlSeries) -> Option<f64> {
    let sampling = s
        .measured_interval_ms
        .or((s.interval_ms > 0).then(|| f64::from(s.interval_ms)));
    let refresh = s.power_update_ms.or(s.energy_update_ms);
    match (sampling, refresh) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
    .filter(|r| r.is_finite() && *r > 0.0)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    /// A series as the H100/H200 hosts give it: sampled every `period_ns` (with a little
    /// jitter), power and the energy counter refreshed every 100 ms. Power steps between two
    /// levels in turn (`watts` and `watts + 40`), the counter accumulates that power at each
    /// refresh. Deterministic.
    pub(crate) fn staircase(n: usize, period_ns: i64, watts: u32) -> NvmlSeries {
        let refresh = 100 * MS;
        let mut s = NvmlSeries {
            interval_ms: 20,
            power_source: Some("instant".into()),
            ..NvmlSeries::default()
        };
        let mut t = 1_700_000_000_000 * MS;
        for i in 0..n {
            // Jitter of up to ±0.4 ms, from a fixed pattern.
            t += period_ns + ((i as i64 * 7919) % 9 - 4) * 100_000;
            s.t_ns.push(t);
            let k = (t / refresh) as u32; // refreshes so far
            let level = watts + 40 * (k % 2);
            s.power_mw.push(level * 1000);
            // mJ: each refresh adds the power of its 100 ms (W × 100 ms = 100 mJ per W).
            s.energy_mj.push(u64::from(k) * u64::from(watts + 20) * 100);
        }
        s
    }

    #[test]
    fn the_real_sampling_period_and_the_100_ms_refresh_are_found() {
        let mut s = staircase(400, 24_300_000, 300);
        describe(&mut s);
        let period = s.measured_interval_ms.unwrap();
        assert!((period - 24.3).abs() < 0.5, "{period}");
        let p = s.power_update_ms.unwrap();
        let e = s.energy_update_ms.unwrap();
        assert!((p - 100.0).abs() < 3.0, "power refresh {p}");
        assert!((e - 100.0).abs() < 3.0, "counter refresh {e}");
        assert!((resolution_ms(&s).unwrap() - p).abs() < 1e-9);
    }

    #[test]
    fn a_value_that_changes_every_sample_is_refreshed_at_least_as_often_as_sampled() {
        let t: Vec<i64> = (0..50).map(|i| i * 10 * MS).collect();
        let p = update_period_ms(&t, |i| Some(i as u64)).unwrap();
        assert!((p - 10.0).abs() < 1e-9);
        // Constant, or too few changes: unknown.
        assert_eq!(update_period_ms(&t, |_| Some(7)), None);
        assert_eq!(update_period_ms(&t, |i| Some((i / 20) as u64)), None);
    }

    #[test]
    fn refreshes_that_left_the_value_unchanged_do_not_double_the_period() {
        // Changes every 100 ms except that every fourth refresh repeats the value (a 200 ms
        // interval): the mean of all intervals would say 125 ms.
        let mut changes = vec![0i64];
        for k in 1..40 {
            let step = if k % 4 == 0 { 200 } else { 100 };
            changes.push(changes[k - 1] + step * MS);
        }
        let t: Vec<i64> = (0..=changes[39] / MS).map(|ms| ms * MS).collect();
        let value = |i: usize| Some(changes.partition_point(|&c| c <= t[i]) as u64);
        let p = update_period_ms(&t, value).unwrap();
        assert!((p - 100.0).abs() < 1e-9, "{p}");
    }

    #[test]
    fn missing_readings_are_skipped_not_read_as_changes() {
        let mut s = staircase(400, 24_300_000, 300);
        // Every seventh power read failed: a gap, holding 0 in the column.
        for i in (3..400).step_by(7) {
            s.power_mw[i] = 0;
            s.power_gaps.push(i as u32);
        }
        describe(&mut s);
        let p = s.power_update_ms.unwrap();
        assert!((p - 100.0).abs() < 5.0, "{p}");
    }

    #[test]
    fn resolution_falls_back_to_the_sampling_period() {
        let s = NvmlSeries {
            interval_ms: 20,
            ..NvmlSeries::default()
        };
        assert_eq!(resolution_ms(&s), Some(20.0));
        let s = NvmlSeries {
            interval_ms: 20,
            measured_interval_ms: Some(24.3),
            power_update_ms: Some(10.0),
            ..NvmlSeries::default()
        };
        assert_eq!(resolution_ms(&s), Some(24.3));
        assert_eq!(resolution_ms(&NvmlSeries::default()), None);
    }
}
