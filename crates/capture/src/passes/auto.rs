//! `--repeats auto`: after the planned passes, one more baseline pass at a time — a fresh
//! process (`raw/baseline-N/`) with the target's measured iterations, or one more run of a
//! `--cmd` workload — until every measured stage's pooled 95% confidence interval
//! (`llmprof_report::stats::pooled_median_ci`: the variance between processes pooled with the
//! order statistics of all iterations) is at most the rule's percentage of its median on either
//! side, or until the next round would take the baseline passes past the time cap. Each round
//! is judged from the timing files just written and reported on one progress line; the outcome
//! is the capture record's `auto_repeats`, and `missing` says when the cap (or a failed round)
//! stopped it short.

use llmprof_bundle::{AutoRepeats, PassRecord, StageCi};
use llmprof_report::{fmt, stats};

use super::{kinds, run_pass, Session, State};
use crate::{timings, AutoRule, CaptureError};

/// What the baseline passes so far give: each measured stage's interval, and how many
/// processes and samples it pools.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Assessment {
    pub stages: Vec<StageCi>,
    pub processes: u32,
    pub samples: u64,
}

impl Assessment {
    /// Each stage's per-process samples pooled into its median and interval.
    pub fn of(groups: &[(&str, Vec<Vec<f64>>)]) -> Assessment {
        let stages: Vec<StageCi> = groups
            .iter()
            .filter_map(|(stage, g)| {
                let m = stats::pooled_median_ci(g)?;
                Some(StageCi {
                    stage: stage.to_string(),
                    n: m.n as u64,
                    median_ns: m.median,
                    half_width_pct: m.half_width_pct(),
                })
            })
            .collect();
        let first = groups.first().map(|(_, g)| g.as_slice()).unwrap_or(&[]);
        Assessment {
            processes: first.iter().filter(|g| !g.is_empty()).count() as u32,
            samples: first.iter().map(|g| g.len() as u64).sum(),
            stages,
        }
    }

    /// Whether every measured stage's half-width is within `target_pct`; never for no stage.
    pub fn met(&self, target_pct: f64) -> bool {
        !self.stages.is_empty()
            && self
                .stages
                .iter()
                .all(|s| s.half_width_pct.is_some_and(|h| h <= target_pct))
    }

    /// `prefill 3.1%, decode 1.2%`: each stage's half-width (`n/a` without an interval).
    fn widths(&self) -> String {
        self.stages
            .iter()
            .map(|s| {
                format!(
                    "{} {}",
                    s.stage,
                    fmt::opt(s.half_width_pct, |h| format!("{}%", fmt::pct(h)))
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Why the rounds ended.
#[derive(Debug, Clone, PartialEq)]
enum Stop {
    Met,
    Cap,
    /// The named baseline pass failed (or left no timings).
    Failed(String),
    /// Ctrl-C or a full disk; `missing` already says so.
    Interrupted,
    /// No baseline timings at all to judge.
    NoTimings,
}

/// Runs rounds until the rule is met or a limit stops them; records the outcome.
pub(super) fn run_rounds(
    s: &Session<'_>,
    st: &mut State,
    rule: AutoRule,
    progress: &mut dyn FnMut(&str),
) -> Result<(), CaptureError> {
    let mut rounds = 0u32;
    let (now, stop) = loop {
        let now = assess(s, st);
        let spent = baseline_seconds(&st.capture.passes);
        progress(&round_line(rounds, &now, spent, rule));
        if let Some(stop) = stop_before_round(s, st, &now, spent, rule) {
            break (now, stop);
        }
        let pass = timings::numbered_dir(
            "baseline",
            timings::numbered_dirs(&s.raw, "baseline")
                .last()
                .map_or(1, |n| n + 1)
                .max(2),
        );
        let before = now.samples;
        run_pass(s, st, &pass, progress)?;
        rounds += 1;
        let ok = st.capture.passes.last().is_some_and(|p| p.ok);
        if !ok || assess(s, st).samples == before {
            if st.capture.interrupted || st.disk_full {
                break (assess(s, st), Stop::Interrupted);
            }
            break (assess(s, st), Stop::Failed(pass));
        }
    };
    let record = AutoRepeats {
        target_pct: rule.target_pct,
        cap_s: rule.cap_s,
        met: stop == Stop::Met,
        rounds,
        processes: now.processes,
        iterations: now.samples,
        baseline_s: baseline_seconds(&st.capture.passes),
        stages: now.stages.clone(),
    };
    if let Some(line) = missing_line(&stop, &record, &now) {
        st.capture.missing.push(line);
    }
    st.capture.auto_repeats = Some(record);
    Ok(())
}

/// Why no further round runs, if none should: the rule is met, the capture stopped, or the
/// next round would end past the cap (a round is estimated from the mean baseline run).
fn stop_before_round(
    s: &Session<'_>,
    st: &State,
    now: &Assessment,
    spent: f64,
    rule: AutoRule,
) -> Option<Stop> {
    if now.met(rule.target_pct) {
        return Some(Stop::Met);
    }
    if st.capture.interrupted || st.disk_full || s.interrupt.is_set() {
        return Some(Stop::Interrupted);
    }
    if now.stages.is_empty() {
        return Some(Stop::NoTimings);
    }
    let runs = baseline_runs(&st.capture.passes).count().max(1) as f64;
    let round = spent / runs * kinds::kind_of("baseline").runs(s) as f64;
    (spent + round > rule.cap_s as f64).then_some(Stop::Cap)
}

/// The baseline as it stands: a target's stage walls per process from the timing files, or a
/// `--cmd` workload's wall per run (each run a fresh process).
fn assess(s: &Session<'_>, st: &State) -> Assessment {
    if s.plan.command.is_some() {
        let runs: Vec<Vec<f64>> = baseline_runs(&st.capture.passes)
            .filter(|p| p.ok)
            .map(|p| vec![p.wall_ns as f64])
            .collect();
        Assessment::of(&[("command", runs)])
    } else {
        Assessment::of(&timings::baseline_groups(&s.raw))
    }
}

/// The records of the baseline runs (`baseline`, `baseline #2`, `baseline-3`, ...).
fn baseline_runs(passes: &[PassRecord]) -> impl Iterator<Item = &PassRecord> {
    passes.iter().filter(|p| p.name.starts_with("baseline"))
}

/// Seconds every baseline run took, failed ones included.
fn baseline_seconds(passes: &[PassRecord]) -> f64 {
    baseline_runs(passes).map(|p| p.wall_ns as f64).sum::<f64>() / 1e9
}

/// `repeats auto, round 2: 12 samples from 2 processes; 95% CI half-width prefill 3.1%, decode
/// 1.2% of the median (target ≤ 2.0%); 65 s of baseline passes`.
fn round_line(round: u32, now: &Assessment, spent: f64, rule: AutoRule) -> String {
    format!(
        "repeats auto, round {round}: {} sample{} from {} process{}; 95% CI half-width {} of \
         the median (target ≤ {}%); {} of baseline passes (cap {} s)",
        now.samples,
        if now.samples == 1 { "" } else { "s" },
        now.processes,
        if now.processes == 1 { "" } else { "es" },
        if now.stages.is_empty() {
            "not available".to_string()
        } else {
            now.widths()
        },
        fmt::pct(rule.target_pct),
        fmt::duration(spent * 1e9),
        rule.cap_s
    )
}

/// The `missing` line of rounds that stopped short of the target.
fn missing_line(stop: &Stop, r: &AutoRepeats, now: &Assessment) -> Option<String> {
    let widths = now.widths();
    let target = fmt::pct(r.target_pct);
    match stop {
        Stop::Met | Stop::Interrupted => None,
        Stop::Cap => Some(format!(
            "--repeats auto stopped at its cap: after {} of baseline passes ({} processes, cap \
             {} s, --repeats-cap) the 95% CI half-width is {widths} of the median, not within \
             {target}%; a larger cap adds fresh processes",
            fmt::duration(r.baseline_s * 1e9),
            r.processes,
            r.cap_s
        )),
        Stop::Failed(pass) => Some(format!(
            "--repeats auto stopped: the {pass} pass failed or wrote no timings (see \
             raw/{pass}/); the 95% CI half-width is {widths} of the median, not within {target}%"
        )),
        Stop::NoTimings => Some(
            "--repeats auto: the baseline pass left no timings to judge (see raw/baseline/)".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes one baseline process's timing file as the driver does (`raw/<dir>/baseline.json`).
    fn write(raw: &std::path::Path, dir: &str, prefill_ms: &[f64], decode_ms: f64) {
        let its: Vec<serde_json::Value> = prefill_ms
            .iter()
            .map(|p| {
                let (p, d) = ((p * 1e6) as u64, (decode_ms * 1e6) as u64);
                serde_json::json!({"prefill_ns": p, "decode_ns": d, "total_ns": p + d})
            })
            .collect();
        std::fs::create_dir_all(raw.join(dir)).unwrap();
        std::fs::write(
            raw.join(dir).join("baseline.json"),
            serde_json::json!({"complete": true, "iterations": its}).to_string(),
        )
        .unwrap();
    }

    fn judge(raw: &std::path::Path) -> Assessment {
        Assessment::of(&timings::baseline_groups(raw))
    }

    /// Six tight iterations in one process meet 2%; three have no interval; the decode stage's
    /// width is judged too.
    #[test]
    fn one_process_of_six_tight_iterations_meets_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path();
        write(raw, "baseline", &[100.0, 100.5, 99.5], 1000.0);
        let a = judge(raw);
        assert_eq!((a.processes, a.samples), (1, 3));
        assert_eq!(a.stages[0].half_width_pct, None, "3 iterations: no 95% CI");
        assert!(!a.met(2.0));
        write(
            raw,
            "baseline",
            &[100.0, 100.5, 99.5, 101.0, 99.0, 100.2],
            1000.0,
        );
        let a = judge(raw);
        // Order statistics of 6: [min, max] = [99, 101] around the median 100.1.
        let pre = &a.stages[0];
        assert_eq!((pre.stage.as_str(), pre.n), ("prefill", 6));
        assert!((pre.median_ns - 100.1e6).abs() < 1.0);
        assert!((pre.half_width_pct.unwrap() - 1.1 / 100.1 * 100.0).abs() < 1e-6);
        assert_eq!(a.stages[1].half_width_pct, Some(0.0));
        assert!(a.met(2.0));
        assert!(!a.met(0.5));
    }

    /// Processes whose medians disagree widen the interval (Student t over the process
    /// medians) until enough of them agree: the rule then needs more rounds, not more
    /// iterations.
    #[test]
    fn spread_between_processes_needs_more_processes() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path();
        let tight = |c: f64| [c, c + 0.1, c - 0.1, c + 0.2, c - 0.2, c];
        write(raw, "baseline", &tight(100.0), 1000.0);
        write(raw, "baseline-2", &tight(104.0), 1000.0);
        let a = judge(raw);
        assert_eq!((a.processes, a.samples), (2, 12));
        // Medians 100 and 104: sd 2.83, t(1) = 12.706: ± 25.4 around 102.
        let h = a.stages[0].half_width_pct.unwrap();
        assert!(
            (h - 12.706 * 2.828_427 / 2f64.sqrt() / 102.0 * 100.0).abs() < 0.01,
            "{h}"
        );
        assert!(!a.met(2.0));
        for (i, c) in [101.0, 103.0, 102.0, 101.5, 102.5, 102.0]
            .iter()
            .enumerate()
        {
            write(raw, &format!("baseline-{}", i + 3), &tight(*c), 1000.0);
        }
        let a = judge(raw);
        assert_eq!(a.processes, 8);
        assert!(a.met(2.0), "{:?}", a.stages);
        // An empty directory or a failed process adds nothing.
        std::fs::create_dir_all(raw.join("baseline-12")).unwrap();
        assert_eq!(judge(raw).samples, 48);
    }

    /// A target without decode steps is judged on prefill alone; no timings meet nothing.
    #[test]
    fn stages_without_time_are_not_judged() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path();
        assert!(!judge(raw).met(2.0));
        write(raw, "baseline", &[10.0; 6], 0.0);
        let a = judge(raw);
        assert_eq!(a.stages.len(), 1);
        assert!(a.met(2.0));
    }

    /// A recorded H100 baseline (qwen2.5-0.5b standard sample run, 3 iterations): no interval
    /// from one process of three; the same file as a second process gives one.
    #[test]
    fn a_recorded_baseline_file() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../../tests/fixtures/sample-runs/20261123-154903-qwen2.5-0.5b-standard/raw/\
             baseline/baseline.json",
        );
        let Ok(text) = std::fs::read_to_string(&src) else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path();
        for d in ["baseline", "baseline-2"] {
            std::fs::create_dir_all(raw.join(d)).unwrap();
            std::fs::write(raw.join(d).join("baseline.json"), &text).unwrap();
        }
        let a = judge(raw);
        assert_eq!((a.processes, a.samples), (2, 6));
        // Two identical processes: no spread between them, so the order-statistics interval
        // of the six iterations ([min, max]) stands.
        let groups = timings::baseline_groups(raw);
        for (s, (stage, g)) in a.stages.iter().zip(&groups) {
            let all: Vec<f64> = g.iter().flatten().copied().collect();
            let (lo, hi) = all
                .iter()
                .fold((f64::MAX, f64::MIN), |(l, h), &v| (l.min(v), h.max(v)));
            let want = (s.median_ns - lo).max(hi - s.median_ns) / s.median_ns * 100.0;
            assert_eq!(s.stage, *stage);
            assert!((s.half_width_pct.unwrap() - want).abs() < 1e-9);
        }
    }

    #[test]
    fn the_round_line_and_the_missing_line() {
        let a = Assessment {
            stages: vec![
                StageCi {
                    stage: "prefill".into(),
                    n: 12,
                    median_ns: 1e8,
                    half_width_pct: Some(3.12),
                },
                StageCi {
                    stage: "decode".into(),
                    n: 12,
                    median_ns: 1e9,
                    half_width_pct: None,
                },
            ],
            processes: 2,
            samples: 12,
        };
        let rule = AutoRule {
            target_pct: 2.0,
            cap_s: 600,
        };
        assert_eq!(
            round_line(1, &a, 65.0, rule),
            "repeats auto, round 1: 12 samples from 2 processes; 95% CI half-width prefill \
             3.1%, decode n/a of the median (target ≤ 2.0%); 65.0 s of baseline passes (cap \
             600 s)"
        );
        let r = AutoRepeats {
            target_pct: 2.0,
            cap_s: 600,
            processes: 2,
            baseline_s: 612.0,
            ..AutoRepeats::default()
        };
        let line = missing_line(&Stop::Cap, &r, &a).unwrap();
        assert!(
            line.starts_with("--repeats auto stopped at its cap: after 612 s"),
            "{line}"
        );
        assert!(missing_line(&Stop::Met, &r, &a).is_none());
        let failed = missing_line(&Stop::Failed("baseline-3".into()), &r, &a).unwrap();
        assert!(failed.contains("raw/baseline-3/"));
    }
}
