//! Energy per stage: NVML power samples integrated over the stage windows the workload recorded
//! on the same wall clock.
//!
//! The power curve is taken as piecewise linear between readings; a window's energy is the
//! trapezoid integral of that curve clipped at the window's ends. A window that starts before
//! the first reading or ends after the last one is not covered and gives no energy (nothing is
//! extrapolated), and neither does a window that touches a failed read (a gap of
//! [`NvmlSeries::power_gaps`]): the curve is never drawn across a gap. The same windows are also
//! measured on NVML's total-energy counter, linearly interpolated at the window ends, as a
//! cross-check.
//!
//! NVML refreshes power only every ~100 ms on the H100 and H200 hosts ([`crate::resolution`]):
//! a prefill window of 20–80 ms holds zero or one reading of its own, so its J/token is
//! withheld ([`StageEnergy::withheld`]) unless the window spans [`MIN_UPDATES`] refreshes. The
//! baseline pass measures prefill energy over one window of back-to-back prefills instead
//! ([`EnergyWindows::per_window`]), a second or two long, when the driver ran that loop.

use llmprof_bundle::{NvmlSeries, StageEnergy};

use crate::resolution::{resolution_ms, MIN_UPDATES};

/// One stage's windows for energy, and how they were taken.
#[derive(Debug, Clone, PartialEq)]
pub struct EnergyWindows {
    /// `prefill`, `decode` or `command`.
    pub stage: String,
    /// `iterations` (one window per measured instance) or `loop` (one window over
    /// `per_window` back-to-back instances run for energy alone).
    pub kind: &'static str,
    /// `(start, end)` on the NVML clock.
    pub windows: Vec<(i64, i64)>,
    /// Instances of the stage each window holds (1 for `iterations`).
    pub per_window: u64,
}

/// The readings of a column that are present: `(index, t_ns, value)`, failed reads skipped.
fn readings<'a>(
    t_ns: &'a [i64],
    values: &'a [u64],
    gaps: &'a [u32],
) -> impl Iterator<Item = (usize, i64, f64)> + 'a {
    t_ns.iter()
        .zip(values)
        .enumerate()
        .filter(|(i, _)| u32::try_from(*i).is_ok_and(|i| gaps.binary_search(&i).is_err()))
        .map(|(i, (&t, &v))| (i, t, v as f64))
}

/// Joules the piecewise-linear power curve `(t_ns, power_mw)` holds between `start_ns` and
/// `end_ns`, the samples listed in `gaps` (failed reads) left out; `None` when the readings do
/// not cover the window, the window touches a gap, or it is empty.
pub fn integrate_power(
    t_ns: &[i64],
    power_mw: &[u32],
    gaps: &[u32],
    start_ns: i64,
    end_ns: i64,
) -> Option<f64> {
    let mw: Vec<u64> = power_mw.iter().map(|&p| u64::from(p)).collect();
    let pts: Vec<(usize, i64, f64)> = readings(t_ns, &mw, gaps).collect();
    let (first, last) = (pts.first()?, pts.last()?);
    if pts.len() < 2 || end_ns <= start_ns || start_ns < first.1 || end_ns > last.1 {
        return None;
    }
    let mut joules = 0.0;
    for w in pts.windows(2) {
        let ((ia, a, pa), (ib, b, pb)) = (w[0], w[1]);
        // Overlap of the segment with the window; a clock that stepped back skips a segment.
        let (lo, hi) = (a.max(start_ns), b.min(end_ns));
        if b <= a || hi <= lo {
            continue;
        }
        if ib > ia + 1 {
            return None; // the segment bridges a failed read
        }
        let at = |t: i64| pa + (pb - pa) * (t - a) as f64 / (b - a) as f64;
        // mW × ns = 1e-12 J.
        joules += (at(lo) + at(hi)) / 2.0 * (hi - lo) as f64 * 1e-12;
    }
    Some(joules)
}

/// The counter series linearly interpolated at `t` between its two readings around `t`;
/// `None` outside the readings or when a failed read lies between those two.
fn counter_at(t_ns: &[i64], value: &[u64], gaps: &[u32], t: i64) -> Option<f64> {
    let pts: Vec<(usize, i64, f64)> = readings(t_ns, value, gaps).collect();
    let (first, last) = (pts.first()?, pts.last()?);
    if t < first.1 || t > last.1 {
        return None;
    }
    let i = pts.partition_point(|p| p.1 < t);
    let (ib, b, vb) = pts[i];
    if b == t || i == 0 {
        return Some(vb);
    }
    let (ia, a, va) = pts[i - 1];
    (ib == ia + 1 && b > a).then(|| va + (vb - va) * (t - a) as f64 / (b - a) as f64)
}

/// Joules NVML's total-energy counter (mJ) counted between `start_ns` and `end_ns`.
pub fn counter_energy(
    t_ns: &[i64],
    energy_mj: &[u64],
    gaps: &[u32],
    start_ns: i64,
    end_ns: i64,
) -> Option<f64> {
    let a = counter_at(t_ns, energy_mj, gaps, start_ns)?;
    let b = counter_at(t_ns, energy_mj, gaps, end_ns)?;
    (b >= a && end_ns > start_ns).then(|| (b - a) / 1000.0)
}

/// Sums over the covered windows of one stage.
#[derive(Default)]
struct Covered {
    joules: f64,
    /// Each covered window's energy, joules.
    per_window: Vec<f64>,
    wall_ns: i64,
    windows: u64,
    samples: u64,
    counter: Option<f64>,
}

fn cover(series: &NvmlSeries, windows: &[(i64, i64)]) -> Covered {
    let s = series;
    let mut c = Covered {
        counter: Some(0.0),
        ..Covered::default()
    };
    for &(a, b) in windows {
        let Some(j) = integrate_power(&s.t_ns, &s.power_mw, &s.power_gaps, a, b) else {
            continue;
        };
        c.joules += j;
        c.per_window.push(j);
        c.wall_ns += b - a;
        c.windows += 1;
        c.samples += (0..s.t_ns.len())
            .filter(|&i| s.t_ns[i] >= a && s.t_ns[i] <= b && s.has_power(i))
            .count() as u64;
        let counted = counter_energy(&s.t_ns, &s.energy_mj, &s.energy_gaps, a, b);
        c.counter = c.counter.and_then(|sum| Some(sum + counted?));
    }
    c
}

/// One stage's energy per instance over its windows; `None` when no window is covered.
/// `tokens` is per instance. J/token is withheld when one window spans fewer than
/// [`MIN_UPDATES`] NVML refreshes.
pub fn stage_energy(
    series: &NvmlSeries,
    w: &EnergyWindows,
    tokens: Option<u64>,
) -> Option<StageEnergy> {
    let c = cover(series, &w.windows);
    if c.windows == 0 || c.wall_ns <= 0 {
        return None;
    }
    let instances = c.windows * w.per_window.max(1);
    let n = instances as f64;
    let energy_j = c.joules / n;
    let wall_ns = c.wall_ns as f64 / n;
    let window_ms = c.wall_ns as f64 / c.windows as f64 / 1e6;
    let resolution = resolution_ms(series);
    let updates = resolution.map(|r| window_ms / r);
    let withheld = match (tokens, updates, resolution) {
        (Some(t), Some(u), Some(r)) if t > 0 && u < MIN_UPDATES => Some(format!(
            "a {window_ms:.0} ms window spans {u:.1} NVML refreshes ({r:.0} ms each); at least \
             {MIN_UPDATES:.0} are needed"
        )),
        _ => None,
    };
    Some(StageEnergy {
        stage: w.stage.clone(),
        instances,
        wall_ns,
        energy_j,
        mean_power_w: energy_j / (wall_ns * 1e-9),
        samples: c.samples,
        tokens,
        j_per_token: tokens
            .filter(|&t| t > 0 && withheld.is_none())
            .map(|t| energy_j / t as f64),
        counter_energy_j: c.counter.map(|sum| sum / n),
        windows: w.kind.to_string(),
        updates_per_window: updates,
        withheld,
        window_energy_j: (c.per_window.iter())
            .map(|j| j / w.per_window.max(1) as f64)
            .collect(),
    })
}

/// Energy of each stage, in the order stages first appear in `sets`. A stage with several sets
/// (the prefill loop and the prefill iterations) takes the first that is covered and long
/// enough for J/token, else the first that is covered.
pub fn stage_energies(
    series: &NvmlSeries,
    sets: &[EnergyWindows],
    tokens: impl Fn(&str) -> Option<u64>,
) -> Vec<StageEnergy> {
    let mut stages: Vec<&str> = Vec::new();
    for w in sets {
        if !stages.contains(&w.stage.as_str()) {
            stages.push(&w.stage);
        }
    }
    stages
        .into_iter()
        .filter_map(|stage| {
            let all: Vec<StageEnergy> = sets
                .iter()
                .filter(|w| w.stage == stage)
                .filter_map(|w| stage_energy(series, w, tokens(stage)))
                .collect();
            let best = all.iter().position(|e| e.withheld.is_none()).unwrap_or(0);
            all.into_iter().nth(best)
        })
        .collect()
}

/// The energy of a group of ranks from each rank's own (rank 0's first): per stage, the sum of
/// the GPUs' energy of one instance, their mean power summed, J/token over the group's tokens
/// (every rank of a tensor-parallel group works on the same tokens, so they count once). A
/// stage counts only when every rank measured it over the same windows (same kind and
/// instances); the counter cross-check and per-window energies only when every rank has them.
pub fn sum_over_ranks(ranks: &[Vec<StageEnergy>]) -> Vec<StageEnergy> {
    let Some((first, others)) = ranks.split_first() else {
        return Vec::new();
    };
    first
        .iter()
        .filter_map(|e0| {
            let mut sum = e0.clone();
            for other in others {
                let e = other.iter().find(|e| {
                    e.stage == e0.stage && e.windows == e0.windows && e.instances == e0.instances
                })?;
                sum.energy_j += e.energy_j;
                sum.mean_power_w += e.mean_power_w;
                sum.samples += e.samples;
                sum.counter_energy_j = sum
                    .counter_energy_j
                    .zip(e.counter_energy_j)
                    .map(|(a, b)| a + b);
                sum.withheld = sum.withheld.or_else(|| e.withheld.clone());
                if sum.window_energy_j.len() == e.window_energy_j.len() {
                    for (a, b) in sum.window_energy_j.iter_mut().zip(&e.window_energy_j) {
                        *a += b;
                    }
                } else {
                    sum.window_energy_j.clear();
                }
            }
            sum.j_per_token = sum
                .tokens
                .filter(|&t| t > 0 && sum.withheld.is_none())
                .map(|t| sum.energy_j / t as f64);
            Some(sum)
        })
        .collect()
}

/// What the energy figures are and how far to trust them, for the bundle and the report.
pub fn note(series: &NvmlSeries, energy: &[StageEnergy]) -> String {
    let source = match series.power_source.as_deref() {
        Some("instant") => "NVML's instant power reading",
        Some(_) => "nvmlDeviceGetPowerUsage, which Ampere and newer GPUs average over 1 s (short stages are smeared)",
        None => "no power reading (NVML read none)",
    };
    let mut parts = vec![format!(
        "Energy of the baseline pass: {source}, {}, integrated (trapezoid, piecewise-linear \
         power) over each stage window the workload recorded on the host's wall clock, per \
         instance. Decode steps are not resolved one by one: decode is the whole decode loop \
         divided by its steps.",
        sampling(series)
    )];
    if !series.power_gaps.is_empty() {
        parts.push(format!(
            "{} power read{} failed: kept as gaps (no reading, never 0 W), and a window touching \
             one is left out.",
            series.power_gaps.len(),
            if series.power_gaps.len() == 1 {
                ""
            } else {
                "s"
            }
        ));
    }
    parts.extend(energy.iter().filter(|e| e.windows == "loop").map(|e| {
        format!(
            "{}: one window over {} back-to-back {}s the baseline pass ran for energy alone \
             after its measured iterations ({:.2} s), so it spans many NVML refreshes.",
            e.stage,
            e.instances,
            e.stage,
            window_ns(e) / 1e9
        )
    }));
    parts.extend(energy.iter().filter_map(|e| {
        let why = e.withheld.as_ref()?;
        Some(format!(
            "{} J/token withheld: {why}, so its energy rests on one or two readings.",
            e.stage
        ))
    }));
    parts.extend(counter_check(energy));
    parts.join(" ")
}

/// `sampled every 24.3 ms (nominal 20 ms); NVML refreshed power every 100 ms and its energy
/// counter every 100 ms`, with what is known.
fn sampling(s: &NvmlSeries) -> String {
    let mut text = match s.measured_interval_ms {
        Some(m) => format!("sampled every {m:.1} ms (nominal {} ms)", s.interval_ms),
        None => format!("sampled every {} ms", s.interval_ms),
    };
    let refresh: Vec<String> = [
        ("power", s.power_update_ms),
        ("its energy counter", s.energy_update_ms),
    ]
    .iter()
    .filter_map(|(what, p)| p.map(|p| format!("{what} every {p:.0} ms")))
    .collect();
    if !refresh.is_empty() {
        text.push_str(&format!(
            "; NVML refreshed {} (detected from the data)",
            refresh.join(" and ")
        ));
    }
    text
}

/// The length of one window of `e`: the whole loop for `loop`, one instance otherwise.
fn window_ns(e: &StageEnergy) -> f64 {
    if e.windows == "loop" {
        e.wall_ns * e.instances as f64
    } else {
        e.wall_ns
    }
}

/// The counter's disagreement with the power integral, per stage.
fn counter_check(energy: &[StageEnergy]) -> Option<String> {
    let checks: Vec<String> = energy
        .iter()
        .filter_map(|e| {
            let c = e.counter_energy_j?;
            (e.energy_j > 0.0).then(|| {
                format!(
                    "{} {:+.0}% ({} sample{} in {:.0} ms windows)",
                    e.stage,
                    (c - e.energy_j) / e.energy_j * 100.0,
                    e.samples,
                    if e.samples == 1 { "" } else { "s" },
                    window_ns(e) / 1e6
                )
            })
        })
        .collect();
    (!checks.is_empty()).then(|| {
        format!(
            "NVML's total-energy counter over the same windows differs by {}.",
            checks.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolution::{describe, tests::staircase};

    const MS: i64 = 1_000_000;

    #[test]
    fn a_group_uses_the_sum_of_its_gpus_and_its_tokens_once() {
        let e = |stage: &str, j: f64, w: f64, per_window: Vec<f64>| StageEnergy {
            stage: stage.into(),
            instances: 3,
            wall_ns: 1e9,
            energy_j: j,
            mean_power_w: w,
            samples: 50,
            tokens: Some(16),
            j_per_token: Some(j / 16.0),
            counter_energy_j: Some(j),
            windows: "iterations".into(),
            updates_per_window: Some(10.0),
            withheld: None,
            window_energy_j: per_window,
        };
        let rank0 = vec![
            e("prefill", 6.0, 190.0, vec![6.0]),
            e("decode", 78.0, 150.0, vec![70.0, 86.0]),
        ];
        let rank1 = vec![e("decode", 80.0, 155.0, vec![79.0, 81.0])];
        let sum = sum_over_ranks(&[rank0, rank1]);
        // Prefill was not measured on rank 1: no group figure for it.
        assert_eq!(sum.len(), 1);
        let d = &sum[0];
        assert_eq!((d.energy_j, d.mean_power_w, d.samples), (158.0, 305.0, 100));
        assert_eq!(d.j_per_token, Some(158.0 / 16.0));
        assert_eq!(d.counter_energy_j, Some(158.0));
        assert_eq!(d.window_energy_j, vec![149.0, 167.0]);
        assert!(sum_over_ranks(&[]).is_empty());
    }

    #[test]
    fn trapezoid_by_hand() {
        // 100 W at 0, 200 W at 20 ms, 200 W at 40 ms.
        let t = [0, 20 * MS, 40 * MS];
        let p = [100_000, 200_000, 200_000];
        let j = |a, b| integrate_power(&t, &p, &[], a, b);
        // Whole curve: (100+200)/2 W × 20 ms + 200 W × 20 ms = 3 J + 4 J = 7 J.
        assert!((j(0, 40 * MS).unwrap() - 7.0).abs() < 1e-9);
        // Clipped to 10..30 ms: 150 W at 10 ms, 200 W at 20 and 30 ms:
        // (150+200)/2 × 10 ms + 200 × 10 ms = 1.75 + 2 = 3.75 J.
        assert!((j(10 * MS, 30 * MS).unwrap() - 3.75).abs() < 1e-9);
        // A window inside one segment (no sample inside it): 5..15 ms, 125 W → 175 W: 1.5 J.
        assert!((j(5 * MS, 15 * MS).unwrap() - 1.5).abs() < 1e-9);
        // Not covered, empty or inverted: nothing.
        assert_eq!(j(-MS, 10 * MS), None);
        assert_eq!(j(10 * MS, 41 * MS), None);
        assert_eq!(j(10 * MS, 10 * MS), None);
        assert_eq!(integrate_power(&t[..1], &p[..1], &[], 0, 0), None);
    }

    #[test]
    fn counter_interpolates_between_samples() {
        let t = [0, 20 * MS, 40 * MS];
        let e = [1_000, 4_000, 8_000]; // mJ
                                       // 10 ms → 2500 mJ, 30 ms → 6000 mJ: 3.5 J.
        assert!((counter_energy(&t, &e, &[], 10 * MS, 30 * MS).unwrap() - 3.5).abs() < 1e-9);
        assert_eq!(counter_energy(&t, &e, &[], 10 * MS, 50 * MS), None);
        assert_eq!(counter_energy(&t, &[], &[], 10 * MS, 30 * MS), None);
    }

    /// A failed read is a gap: before, it was a 0 W sample that pulled a window's energy down.
    #[test]
    fn failed_reads_are_gaps_the_integral_never_crosses() {
        let t: Vec<i64> = (0..=10).map(|i| i * 20 * MS).collect();
        let mut p = vec![300_000u32; t.len()];
        p[5] = 0; // the failed read at 100 ms, as the column holds it
        let gaps = [5u32];
        // 20..60 ms is far from the gap: 300 W × 40 ms = 12 J.
        let far = integrate_power(&t, &p, &gaps, 20 * MS, 60 * MS).unwrap();
        assert!((far - 12.0).abs() < 1e-9);
        // 90..110 ms and 60..85 ms touch the segments next to the gap: not covered.
        assert_eq!(integrate_power(&t, &p, &gaps, 90 * MS, 110 * MS), None);
        assert_eq!(integrate_power(&t, &p, &gaps, 60 * MS, 85 * MS), None);
        // Read as 0 W, the same 60..140 ms window would have lost 6 J of its 24.
        let as_zero = integrate_power(&t, &p, &[], 60 * MS, 140 * MS).unwrap();
        assert!((as_zero - 18.0).abs() < 1e-9);
        assert_eq!(integrate_power(&t, &p, &gaps, 60 * MS, 140 * MS), None);
        // The counter: a gap between the window ends does not matter, one at an end does.
        let e: Vec<u64> = (0..=10u64).map(|i| i * 6_000).collect();
        let c = counter_energy(&t, &e, &gaps, 20 * MS, 180 * MS).unwrap();
        assert!((c - 48.0).abs() < 1e-9);
        assert_eq!(counter_energy(&t, &e, &gaps, 90 * MS, 180 * MS), None);
    }

    fn iterations(stage: &str, windows: Vec<(i64, i64)>) -> EnergyWindows {
        EnergyWindows {
            stage: stage.into(),
            kind: "iterations",
            windows,
            per_window: 1,
        }
    }

    #[test]
    fn stage_energy_averages_instances_and_divides_by_tokens() {
        let t: Vec<i64> = (0..=20).map(|i| i * 20 * MS).collect();
        let mut series = NvmlSeries {
            interval_ms: 20,
            power_mw: vec![300_000; t.len()],
            energy_mj: (0..=20).map(|i| 6_000 * i as u64).collect(),
            t_ns: t,
            ..NvmlSeries::default()
        };
        // Two 50 ms windows at 300 W: 15 J each; one window outside the samples is dropped.
        let w = iterations(
            "decode",
            vec![
                (10 * MS, 60 * MS),
                (100 * MS, 150 * MS),
                (350 * MS, 450 * MS),
            ],
        );
        let e = stage_energy(&series, &w, Some(512)).unwrap();
        assert_eq!((e.instances, e.samples), (2, 6));
        assert!((e.energy_j - 15.0).abs() < 1e-9);
        assert!((e.mean_power_w - 300.0).abs() < 1e-9);
        assert!((e.counter_energy_j.unwrap() - 15.0).abs() < 1e-9);
        // Sampled every 20 ms and nothing else known: a 50 ms window spans 2.5 readings.
        assert!((e.j_per_token.unwrap() - 15.0 / 512.0).abs() < 1e-12);
        assert_eq!(e.windows, "iterations");
        // Refreshed every 100 ms: the same windows span half a refresh, J/token is withheld.
        series.power_update_ms = Some(100.0);
        let e = stage_energy(&series, &w, Some(512)).unwrap();
        assert_eq!(e.j_per_token, None);
        assert!(e
            .withheld
            .as_deref()
            .unwrap()
            .contains("spans 0.5 NVML refreshes"));
        assert!(
            (e.energy_j - 15.0).abs() < 1e-9,
            "the energy itself is still shown"
        );
        assert!(stage_energy(&series, &iterations("x", vec![(-5, 0)]), None).is_none());
    }

    /// Built as the hosts give it (24.3 ms sampling, 100 ms refresh): a 25 ms prefill's J/token
    /// is withheld, a loop of 80 back-to-back prefills over 2 s gives it, and agrees with the
    /// energy counter where the single windows do not.
    #[test]
    fn short_prefills_are_withheld_and_the_loop_measures_them() {
        let mut s = staircase(200, 24_300_000, 300);
        describe(&mut s);
        let t0 = s.t_ns[0];
        // Three measured prefills of 25 ms, 1.3 s apart, and a decode loop of 1.2 s.
        let prefill: Vec<(i64, i64)> = (0..3)
            .map(|k| (t0 + 130 * MS + k * 1300 * MS, t0 + 155 * MS + k * 1300 * MS))
            .collect();
        let decode = iterations("decode", vec![(t0 + 160 * MS, t0 + 1360 * MS)]);
        let lp = EnergyWindows {
            stage: "prefill".into(),
            kind: "loop",
            windows: vec![(t0 + 2500 * MS, t0 + 4500 * MS)],
            per_window: 80,
        };
        let sets = [lp.clone(), iterations("prefill", prefill.clone()), decode];
        let tokens = |stage: &str| Some(if stage == "prefill" { 512 } else { 64 });
        let e = stage_energies(&s, &sets, tokens);
        let names: Vec<&str> = e.iter().map(|e| e.stage.as_str()).collect();
        assert_eq!(names, ["prefill", "decode"]);
        let (p, d) = (&e[0], &e[1]);
        assert_eq!((p.windows.as_str(), p.instances), ("loop", 80));
        assert!((p.wall_ns - 25.0 * MS as f64).abs() < 1.0);
        assert!(p.j_per_token.is_some() && p.withheld.is_none());
        assert!(p.updates_per_window.unwrap() > 19.0);
        let agree = (p.counter_energy_j.unwrap() - p.energy_j).abs() / p.energy_j;
        assert!(agree < 0.03, "loop: counter and integral {agree}");
        assert!(d.j_per_token.is_some());
        // Without the loop the prefill row comes from the 25 ms windows, J/token withheld.
        let e = stage_energies(&s, &sets[1..], tokens);
        let p = &e[0];
        assert_eq!(
            (p.windows.as_str(), p.instances, p.j_per_token),
            ("iterations", 3, None)
        );
        assert!(p.updates_per_window.unwrap() < 0.3);
        let note = note(&s, &e);
        assert!(
            note.contains("sampled every 24.3 ms (nominal 20 ms)"),
            "{note}"
        );
        assert!(note.contains("refreshed power every 100 ms"), "{note}");
        assert!(
            note.contains("prefill J/token withheld: a 25 ms window spans 0."),
            "{note}"
        );
        // The counter saw no refresh inside a 25 ms window at all.
        assert!(
            note.contains("prefill -100% (3 samples in 25 ms windows)"),
            "{note}"
        );
    }
}
