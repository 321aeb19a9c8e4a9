//! What a `--cmd` workload's passes tell about time: each run's wall (the whole process) and,
//! when the workload writes them, its own stage windows — `$LLMPROF_OUT_DIR/stages.jsonl`, one
//! JSON object a line, `{"stage": "prefill", "start_ns": …, "end_ns": …, "pid": …}` on the host
//! wall clock (ns since the Unix epoch), as `llmprof-stages` writes them (names starting with
//! `warmup_` are warm-up). From them [`overhead`] compares like with like: per stage, the
//! median stage wall of the profiled pass against the median over every baseline run, and only
//! where a pass has no stage windows the whole process's wall, labelled `whole process`
//! (interpreter start-up and model load included). Malformed lines are skipped.

use std::collections::BTreeMap;
use std::path::Path;

use llmprof_bundle::{Distribution, Overhead, PassRecord};
use serde::Deserialize;

use crate::nsys_export;

/// The file a `--cmd` workload writes its stage windows to, in `$LLMPROF_OUT_DIR`.
pub const STAGES_FILE: &str = "stages.jsonl";
/// [`Overhead::basis`] of overheads from stage windows.
pub const BASIS_STAGE_WINDOWS: &str = "stage windows";
/// [`Overhead::basis`] of overheads from whole-process walls.
pub const BASIS_WHOLE_PROCESS: &str = "whole process";

/// One line of `stages.jsonl`.
#[derive(Debug, Clone, Deserialize)]
struct WindowLine {
    stage: String,
    start_ns: i64,
    end_ns: i64,
}

/// The measured (not warm-up) stage walls in `dir/stages.jsonl`, ns, per stage; only the
/// stages in `wanted` when it is not empty.
pub fn stage_walls(dir: &Path, wanted: &[String]) -> BTreeMap<String, Vec<f64>> {
    let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let Ok(text) = std::fs::read_to_string(dir.join(STAGES_FILE)) else {
        return out;
    };
    for w in text
        .lines()
        .filter_map(|l| serde_json::from_str::<WindowLine>(l).ok())
    {
        let measured = !llmprof_bundle::is_warmup(&w.stage);
        let asked = wanted.is_empty() || wanted.contains(&w.stage);
        if measured && asked && w.end_ns >= w.start_ns {
            out.entry(w.stage)
                .or_default()
                .push((w.end_ns - w.start_ns) as f64);
        }
    }
    out
}

/// The passes whose runs count as baseline runs: `baseline`, `baseline #2`, `baseline-3`, ...
fn is_baseline(name: &str) -> bool {
    name.starts_with("baseline")
}

/// The pass directory of a run record (`baseline #2` ran in `raw/baseline/`).
fn pass_dir(name: &str) -> &str {
    name.split(' ').next().unwrap_or(name)
}

/// Each profiled pass's overhead against the baseline runs: per stage from the stage windows
/// where both sides have them, else the whole process's wall. The kineto pass counts only when
/// the workload wrote a trace (else it ran unprofiled); `nsys-export` ran no workload.
pub fn overhead(
    raw: &Path,
    passes: &[PassRecord],
    stages: &[String],
    kineto_traced: bool,
) -> Vec<Overhead> {
    let ok_base: Vec<&PassRecord> = passes
        .iter()
        .filter(|p| p.ok && is_baseline(&p.name))
        .collect();
    let mut base_dirs: Vec<&str> = ok_base.iter().map(|p| pass_dir(&p.name)).collect();
    base_dirs.dedup();
    let mut base_stages: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for d in base_dirs {
        for (stage, v) in stage_walls(&raw.join(d), stages) {
            base_stages.entry(stage).or_default().extend(v);
        }
    }
    let mut walls: Vec<u64> = ok_base.iter().map(|p| p.wall_ns).collect();
    let base_wall = Distribution::from_samples(&mut walls);
    let profiled = passes.iter().filter(|p| {
        let nsys = crate::pass_kind(&p.name) == "nsys" && p.name != nsys_export::PASS_NAME;
        p.ok && (nsys || p.name == "kineto" && kineto_traced)
    });
    let mut out = Vec::new();
    for p in profiled {
        let per_stage = stage_rows(
            &p.name,
            &stage_walls(&raw.join(&p.name), stages),
            &base_stages,
        );
        if per_stage.is_empty() {
            out.extend(row(
                &p.name,
                "command",
                base_wall.median_ns,
                p.wall_ns as f64,
                BASIS_WHOLE_PROCESS,
            ));
        } else {
            out.extend(per_stage);
        }
    }
    out
}

/// A pass's overhead per stage both it and the baseline have windows for.
fn stage_rows(
    pass: &str,
    profiled: &BTreeMap<String, Vec<f64>>,
    base: &BTreeMap<String, Vec<f64>>,
) -> Vec<Overhead> {
    let median = |v: &[f64]| llmprof_report::stats::median_ci(v).map(|m| m.median);
    profiled
        .iter()
        .filter_map(|(stage, v)| {
            let (b, p) = (median(base.get(stage)?)?, median(v)?);
            row(pass, stage, b, p, BASIS_STAGE_WINDOWS)
        })
        .collect()
}

/// One overhead row; `None` without a positive baseline median.
fn row(pass: &str, stage: &str, base: f64, profiled: f64, basis: &str) -> Option<Overhead> {
    (base > 0.0).then(|| Overhead {
        pass: pass.to_string(),
        stage: stage.to_string(),
        baseline_median_ns: base,
        profiled_median_ns: profiled,
        overhead_pct: (profiled - base) / base * 100.0,
        pairs: 1,
        pair_range_pct: None,
        basis: Some(basis.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass(name: &str, wall_ns: u64) -> PassRecord {
        PassRecord {
            name: name.into(),
            command: Vec::new(),
            exit_code: Some(0),
            wall_ns,
            ok: true,
            note: None,
        }
    }

    #[test]
    fn the_nsys_export_is_not_a_profiled_pass() {
        let dir = tempfile::tempdir().unwrap();
        let passes = [
            pass("baseline", 100),
            pass("nsys", 130),
            pass(nsys_export::PASS_NAME, 5),
        ];
        let rows = overhead(dir.path(), &passes, &[], false);
        let names: Vec<&str> = rows.iter().map(|o| o.pass.as_str()).collect();
        assert_eq!(names, ["nsys"]);
        assert!((rows[0].overhead_pct - 30.0).abs() < 1e-9);
        assert_eq!(rows[0].basis.as_deref(), Some(BASIS_WHOLE_PROCESS));
    }

    /// Lines as `llmprof-stages` writes them: the process start-up that doubles the nsys
    /// pass's wall does not count; the stages' own walls do, warm-up left out.
    #[test]
    fn stage_windows_compare_like_with_like() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path();
        let write = |pass: &str, lines: &[(&str, i64, i64)]| {
            std::fs::create_dir_all(raw.join(pass)).unwrap();
            let text: String = lines
                .iter()
                .map(|(s, a, b)| {
                    format!("{{\"stage\":\"{s}\",\"start_ns\":{a},\"end_ns\":{b},\"pid\":7}}\n")
                })
                .collect();
            std::fs::write(raw.join(pass).join(STAGES_FILE), text + "not json\n").unwrap();
        };
        // Two baseline runs appended to one file (`--repeats 2`): prefill 100 and 110 ns.
        write(
            "baseline",
            &[
                ("warmup_prefill", 0, 900),
                ("prefill", 1000, 1100),
                ("decode", 1100, 2100),
                ("prefill", 5000, 5110),
                ("decode", 5110, 6110),
            ],
        );
        write(
            "nsys",
            &[("warmup_prefill", 0, 5000), ("prefill", 9000, 9126)],
        );
        let passes = [
            pass("baseline", 1_000_000),
            pass("baseline #2", 1_000_000),
            pass("nsys", 2_000_000),
            pass("kineto", 3_000_000),
        ];
        let rows = overhead(raw, &passes, &[], false);
        assert_eq!(rows.len(), 1, "{rows:?}");
        let r = &rows[0];
        assert_eq!((r.pass.as_str(), r.stage.as_str()), ("nsys", "prefill"));
        assert_eq!((r.baseline_median_ns, r.profiled_median_ns), (105.0, 126.0));
        assert!((r.overhead_pct - 20.0).abs() < 1e-9);
        assert_eq!(r.basis.as_deref(), Some(BASIS_STAGE_WINDOWS));
        // --stages decode: nsys has no decode window, so its whole process is compared.
        let rows = overhead(raw, &passes, &["decode".to_string()], true);
        let got: Vec<(&str, &str, &str)> = rows
            .iter()
            .map(|o| {
                (
                    o.pass.as_str(),
                    o.stage.as_str(),
                    o.basis.as_deref().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("nsys", "command", BASIS_WHOLE_PROCESS),
                ("kineto", "command", BASIS_WHOLE_PROCESS)
            ]
        );
        assert_eq!(stage_walls(raw, &[]), BTreeMap::new());
    }
}
