//! Energy per stage: NVML power samples integrated over the stage windows the workload recorded
//! on the same wall clock.
//!
//! The power curve is taken as piecewise linear between samples; a window's energy is the
//! trapezoid integral of that curve clipped at the window's ends. A window that starts before
//! the first sample or ends after the last one is not covered and gives no energy (nothing is
//! extrapolated). The same windows are also measured on NVML's total-energy counter, linearly
//! interpolated at the window ends, as a cross-check.

use llmprof_bundle::{NvmlSeries, StageEnergy};

/// Joules the piecewise-linear power curve `(t_ns, power_mw)` holds between `start_ns` and
/// `end_ns`; `None` when the samples do not cover the window or the window is empty.
pub fn integrate_power(t_ns: &[i64], power_mw: &[u32], start_ns: i64, end_ns: i64) -> Option<f64> {
    let n = t_ns.len().min(power_mw.len());
    if n < 2 || end_ns <= start_ns || start_ns < t_ns[0] || end_ns > t_ns[n - 1] {
        return None;
    }
    let mut joules = 0.0;
    for i in 1..n {
        let (a, b) = (t_ns[i - 1], t_ns[i]);
        // Overlap of the segment with the window; a clock that stepped back skips a segment.
        let (lo, hi) = (a.max(start_ns), b.min(end_ns));
        if b <= a || hi <= lo {
            continue;
        }
        let (pa, pb) = (f64::from(power_mw[i - 1]), f64::from(power_mw[i]));
        let at = |t: i64| pa + (pb - pa) * (t - a) as f64 / (b - a) as f64;
        // mW × ns = 1e-12 J.
        joules += (at(lo) + at(hi)) / 2.0 * (hi - lo) as f64 * 1e-12;
    }
    Some(joules)
}

/// The counter series `(t_ns, value)` linearly interpolated at `t`; `None` outside the samples.
fn counter_at(t_ns: &[i64], value: &[u64], t: i64) -> Option<f64> {
    let n = t_ns.len().min(value.len());
    if n == 0 || t < t_ns[0] || t > t_ns[n - 1] {
        return None;
    }
    let i = t_ns[..n].partition_point(|&x| x < t);
    if t_ns[i] == t || i == 0 {
        return Some(value[i] as f64);
    }
    let (a, b) = (t_ns[i - 1], t_ns[i]);
    let (va, vb) = (value[i - 1] as f64, value[i] as f64);
    Some(va + (vb - va) * (t - a) as f64 / (b - a) as f64)
}

/// Joules NVML's total-energy counter (mJ) counted between `start_ns` and `end_ns`.
pub fn counter_energy(t_ns: &[i64], energy_mj: &[u64], start_ns: i64, end_ns: i64) -> Option<f64> {
    let a = counter_at(t_ns, energy_mj, start_ns)?;
    let b = counter_at(t_ns, energy_mj, end_ns)?;
    (b >= a && end_ns > start_ns).then(|| (b - a) / 1000.0)
}

/// One stage's energy over its instances' windows; `None` when no window is covered.
/// `tokens` is per instance.
pub fn stage_energy(
    series: &NvmlSeries,
    stage: &str,
    windows: &[(i64, i64)],
    tokens: Option<u64>,
) -> Option<StageEnergy> {
    let (mut joules, mut wall, mut instances, mut samples) = (0.0, 0i64, 0u64, 0u64);
    let mut counter = Some(0.0);
    for &(s, e) in windows {
        let Some(j) = integrate_power(&series.t_ns, &series.power_mw, s, e) else {
            continue;
        };
        joules += j;
        wall += e - s;
        instances += 1;
        samples += series.t_ns.iter().filter(|&&t| t >= s && t <= e).count() as u64;
        counter =
            counter.and_then(|c| Some(c + counter_energy(&series.t_ns, &series.energy_mj, s, e)?));
    }
    if instances == 0 {
        return None;
    }
    let n = instances as f64;
    let energy_j = joules / n;
    let wall_ns = wall as f64 / n;
    Some(StageEnergy {
        stage: stage.to_string(),
        instances,
        wall_ns,
        energy_j,
        mean_power_w: energy_j / (wall_ns * 1e-9),
        samples,
        tokens,
        j_per_token: tokens.filter(|&t| t > 0).map(|t| energy_j / t as f64),
        counter_energy_j: counter.map(|c| c / n),
    })
}

/// What the energy figures are and how far to trust them, for the bundle and the report.
pub fn note(series: &NvmlSeries) -> String {
    let source = match series.power_source.as_deref() {
        Some("instant") => "NVML's instant power reading",
        _ => "nvmlDeviceGetPowerUsage, which Ampere and newer GPUs average over 1 s (short stages are smeared)",
    };
    format!(
        "Energy of the baseline pass: {source}, sampled every {} ms on the host's wall clock, \
         integrated (trapezoid, piecewise-linear power) over each stage window the workload \
         recorded on the same clock, averaged over the measured iterations. At this sampling a \
         decode step is not resolved on its own: decode is integrated over the union of its \
         step windows (the whole decode loop) and divided by its steps.",
        series.interval_ms
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    #[test]
    fn trapezoid_by_hand() {
        // 100 W at 0, 200 W at 20 ms, 200 W at 40 ms.
        let t = [0, 20 * MS, 40 * MS];
        let p = [100_000, 200_000, 200_000];
        // Whole curve: (100+200)/2 W × 20 ms + 200 W × 20 ms = 3 J + 4 J = 7 J.
        assert!((integrate_power(&t, &p, 0, 40 * MS).unwrap() - 7.0).abs() < 1e-9);
        // Clipped to 10..30 ms: 150 W at 10 ms, 200 W at 20 and 30 ms:
        // (150+200)/2 × 10 ms + 200 × 10 ms = 1.75 + 2 = 3.75 J.
        assert!((integrate_power(&t, &p, 10 * MS, 30 * MS).unwrap() - 3.75).abs() < 1e-9);
        // A window inside one segment (no sample inside it): 5..15 ms, 125 W → 175 W: 1.5 J.
        assert!((integrate_power(&t, &p, 5 * MS, 15 * MS).unwrap() - 1.5).abs() < 1e-9);
        // Not covered, empty or inverted: nothing.
        assert_eq!(integrate_power(&t, &p, -MS, 10 * MS), None);
        assert_eq!(integrate_power(&t, &p, 10 * MS, 41 * MS), None);
        assert_eq!(integrate_power(&t, &p, 10 * MS, 10 * MS), None);
        assert_eq!(integrate_power(&t[..1], &p[..1], 0, 0), None);
    }

    #[test]
    fn counter_interpolates_between_samples() {
        let t = [0, 20 * MS, 40 * MS];
        let e = [1_000, 4_000, 8_000]; // mJ
                                       // 10 ms → 2500 mJ, 30 ms → 6000 mJ: 3.5 J.
        assert!((counter_energy(&t, &e, 10 * MS, 30 * MS).unwrap() - 3.5).abs() < 1e-9);
        assert_eq!(counter_energy(&t, &e, 10 * MS, 50 * MS), None);
        assert_eq!(counter_energy(&t, &[], 10 * MS, 30 * MS), None);
    }

    #[test]
    fn stage_energy_averages_instances_and_divides_by_tokens() {
        let t: Vec<i64> = (0..=10).map(|i| i * 20 * MS).collect();
        let series = NvmlSeries {
            interval_ms: 20,
            power_mw: vec![300_000; t.len()],
            energy_mj: (0..=10).map(|i| 6_000 * i as u64).collect(),
            t_ns: t,
            ..NvmlSeries::default()
        };
        // Two 50 ms windows at 300 W: 15 J each; one window outside the samples is dropped.
        let w = [
            (10 * MS, 60 * MS),
            (100 * MS, 150 * MS),
            (150 * MS, 250 * MS),
        ];
        let e = stage_energy(&series, "prefill", &w, Some(512)).unwrap();
        assert_eq!((e.instances, e.samples), (2, 6));
        assert!((e.energy_j - 15.0).abs() < 1e-9);
        assert!((e.mean_power_w - 300.0).abs() < 1e-9);
        assert!((e.j_per_token.unwrap() - 15.0 / 512.0).abs() < 1e-12);
        assert!((e.counter_energy_j.unwrap() - 15.0).abs() < 1e-9);
        assert!(stage_energy(&series, "decode", &[(-5, 0)], None).is_none());
    }
}
