//! What a `--cmd` workload's passes tell about time: each run's wall (the whole process) and,
//! when the workload writes them, its own stage windows — `$LLMPROF_OUT_DIR/stages.jsonl`.
//!
//! # `stages.jsonl`
//!
//! One JSON object a line, appended as each stage instance closes, by the workload's every
//! process and thread (one `write` of the whole line on an `O_APPEND` file, so lines never
//! interleave):
//!
//! ```json
//! {"stage":"prefill","start_ns":1763900000000000000,"end_ns":1763900000041000000,"pid":4711}
//! ```
//!
//! | key | type | meaning |
//! |---|---|---|
//! | `stage` | string | the NVTX range name; `warmup_<stage>` is warm-up |
//! | `start_ns`, `end_ns` | integer | the host wall clock (ns since the Unix epoch, the clock of the NVML sampler) |
//! | `pid` | integer | the process that ran it (each baseline run is a fresh one); 0 when absent |
//! | `allocated_bytes` | integer? | the CUDA caching allocator's allocated bytes when the stage began (what stays allocated between stages) |
//! | `peak_allocated_bytes`, `peak_reserved_bytes` | integer? | the CUDA caching allocator's peaks since the stage began (reset at its start) |
//! | `free_bytes`, `total_bytes` | integer? | `cudaMemGetInfo` when the stage closed |
//! | `weights_bytes`, `kv_cache_bytes` | integer? | what the workload knows of its weights and KV cache (`llmprof.report_memory`) |
//!
//! The memory keys are optional (the Python package writes them for a thread's outermost
//! stages once torch has initialized CUDA; the Rust `llmprof-stages` cannot read CUDA's
//! allocator and writes none): a run whose baseline lines carry them gets its Memory table from
//! them ([`crate::memory::reported`]), else from NVML's used memory.
//!
//! Further keys are optional and additive: a reader ignores keys it does not know, and a writer
//! adds new ones after these four. The writers: `llmprof-stages` (Rust) and the `llmprof`
//! Python package (`python/llmprof/__init__.py`, `llmprof.stage`); a front-door test has the
//! Python one write a file that [`read_windows`] reads.
//!
//! From them [`overhead`] compares like with like: per stage, the median stage wall of the
//! profiled pass against the median over every baseline run, and only where a pass has no stage
//! windows the whole process's wall, labelled `whole process` (interpreter start-up and model
//! load included); the baseline's `prefill` and `decode` windows, paired per process by
//! [`iterations`], are the run's baseline timings, and every measured stage's windows its
//! energy windows. Malformed lines are skipped.

use std::collections::BTreeMap;
use std::path::Path;

use llmprof_bundle::{Distribution, Overhead, PassRecord};
use serde::Deserialize;

use crate::energy::EnergyWindows;
use crate::nsys_export;

/// The file a `--cmd` workload writes its stage windows to, in `$LLMPROF_OUT_DIR`.
pub const STAGES_FILE: &str = "stages.jsonl";
/// [`Overhead::basis`] of overheads from stage windows.
pub const BASIS_STAGE_WINDOWS: &str = "stage windows";
/// [`Overhead::basis`] of overheads from whole-process walls.
pub const BASIS_WHOLE_PROCESS: &str = "whole process";

/// One line of `stages.jsonl`: a stage instance's window on the host wall clock.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct StageWindow {
    /// The range name (`warmup_` prefixed for warm-up).
    pub stage: String,
    /// ns since the Unix epoch.
    pub start_ns: i64,
    /// ns since the Unix epoch.
    pub end_ns: i64,
    /// The process that ran it; 0 when the line has none.
    #[serde(default)]
    pub pid: u32,
    /// Device memory the workload measured over the stage (see the module docs).
    #[serde(flatten)]
    pub memory: WindowMemory,
}

/// The optional memory keys of a `stages.jsonl` line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct WindowMemory {
    pub allocated_bytes: Option<u64>,
    pub peak_allocated_bytes: Option<u64>,
    pub peak_reserved_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    pub total_bytes: Option<u64>,
    pub weights_bytes: Option<u64>,
    pub kv_cache_bytes: Option<u64>,
}

impl StageWindow {
    fn wall_ns(&self) -> i64 {
        self.end_ns - self.start_ns
    }
}

/// The well-formed windows of `dir/stages.jsonl` (end not before start), in file order; none
/// when the file is missing.
pub fn read_windows(dir: &Path) -> Vec<StageWindow> {
    let Ok(text) = std::fs::read_to_string(dir.join(STAGES_FILE)) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| serde_json::from_str::<StageWindow>(l).ok())
        .filter(|w| w.end_ns >= w.start_ns)
        .collect()
}

/// Whether `stage` counts: measured (not warm-up), and named by `--stages` when given.
pub(crate) fn counts(stage: &str, wanted: &[String]) -> bool {
    !llmprof_bundle::is_warmup(stage) && (wanted.is_empty() || wanted.iter().any(|w| w == stage))
}

/// The measured (not warm-up) stage walls in `dir/stages.jsonl`, ns, per stage; only the
/// stages in `wanted` when it is not empty.
pub fn stage_walls(dir: &Path, wanted: &[String]) -> BTreeMap<String, Vec<f64>> {
    let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for w in read_windows(dir) {
        if counts(&w.stage, wanted) {
            let wall = w.wall_ns() as f64;
            out.entry(w.stage).or_default().push(wall);
        }
    }
    out
}

/// One measured iteration of a `--cmd` workload: its `prefill` and `decode` windows.
pub type Iteration = (Option<(i64, i64)>, Option<(i64, i64)>);

/// The measured iterations in one process's windows: a `prefill` starts an iteration, a
/// `decode` joins the iteration before it when that has none yet and its prefill ended first,
/// else starts one of its own. Warm-up and other stages are left out.
pub fn iterations(windows: &[&StageWindow]) -> Vec<Iteration> {
    let mut sorted: Vec<&StageWindow> = windows.to_vec();
    sorted.sort_by_key(|w| (w.start_ns, w.end_ns));
    let mut out: Vec<Iteration> = Vec::new();
    for w in sorted {
        let span = Some((w.start_ns, w.end_ns));
        match (w.stage.as_str(), out.last_mut()) {
            ("prefill", _) => out.push((span, None)),
            ("decode", Some((Some(p), d @ None))) if p.1 <= w.start_ns => *d = span,
            ("decode", _) => out.push((None, span)),
            _ => {}
        }
    }
    out
}

/// Each baseline process's measured iterations, processes in order (`raw/baseline/` by pid in
/// order of appearance, then `raw/baseline-2/`, ...).
pub fn baseline_iterations(raw: &Path) -> Vec<Vec<Iteration>> {
    let mut out = Vec::new();
    for n in crate::timings::numbered_dirs(raw, "baseline") {
        let windows = read_windows(&raw.join(crate::timings::numbered_dir("baseline", n)));
        let mut pids: Vec<u32> = Vec::new();
        for w in &windows {
            if !pids.contains(&w.pid) {
                pids.push(w.pid);
            }
        }
        for pid in pids {
            let mine: Vec<&StageWindow> = windows.iter().filter(|w| w.pid == pid).collect();
            let its = iterations(&mine);
            if !its.is_empty() {
                out.push(its);
            }
        }
    }
    out
}

/// The baseline runs' windows of each measured stage, for energy (`--stages` filters them).
pub fn energy_windows(raw: &Path, wanted: &[String]) -> Vec<EnergyWindows> {
    let mut out: Vec<EnergyWindows> = Vec::new();
    for n in crate::timings::numbered_dirs(raw, "baseline") {
        for w in read_windows(&raw.join(crate::timings::numbered_dir("baseline", n))) {
            if !counts(&w.stage, wanted) || w.end_ns <= w.start_ns {
                continue;
            }
            let span = (w.start_ns, w.end_ns);
            match out.iter_mut().find(|e| e.stage == w.stage) {
                Some(e) => e.windows.push(span),
                None => out.push(EnergyWindows {
                    stage: w.stage,
                    kind: "iterations",
                    windows: vec![span],
                    per_window: 1,
                }),
            }
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

    fn w(stage: &str, start_ns: i64, end_ns: i64) -> StageWindow {
        StageWindow {
            stage: stage.into(),
            start_ns,
            end_ns,
            pid: 1,
            memory: WindowMemory::default(),
        }
    }

    /// A prefill and the decode after it are one iteration; a decode without a prefill before
    /// it, or a second decode, is one of its own; warm-up and other stages are no iteration.
    #[test]
    fn prefill_and_decode_windows_pair_into_iterations() {
        let ws = [
            w("decode", 300, 400),
            w("warmup_prefill", 0, 10),
            w("prefill", 100, 150),
            w("vision", 100, 120),
            w("decode", 150, 250),
            w("decode", 260, 280),
            w("prefill", 500, 560),
        ];
        let refs: Vec<&StageWindow> = ws.iter().collect();
        assert_eq!(
            iterations(&refs),
            [
                (Some((100, 150)), Some((150, 250))),
                (None, Some((260, 280))),
                (None, Some((300, 400))),
                (Some((500, 560)), None),
            ]
        );
    }

    /// Two baseline runs (two pids) in one file are two processes; `baseline-2/` a third; the
    /// energy windows gather every run's measured windows per stage.
    #[test]
    fn baseline_processes_and_energy_windows_come_from_every_baseline_directory() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path();
        let line = |s: &str, a: i64, b: i64, pid: u32| {
            format!("{{\"stage\":\"{s}\",\"start_ns\":{a},\"end_ns\":{b},\"pid\":{pid},\"later_field\":[1]}}\n")
        };
        for (d, text) in [
            (
                "baseline",
                line("prefill", 0, 10, 1) + &line("decode", 10, 30, 1) + &line("prefill", 5, 9, 2),
            ),
            (
                "baseline-2",
                line("warmup_decode", 0, 99, 3) + &line("decode", 100, 130, 3),
            ),
        ] {
            std::fs::create_dir_all(raw.join(d)).unwrap();
            std::fs::write(raw.join(d).join(STAGES_FILE), text).unwrap();
        }
        let procs = baseline_iterations(raw);
        assert_eq!(
            procs,
            [
                vec![(Some((0, 10)), Some((10, 30)))],
                vec![(Some((5, 9)), None)],
                vec![(None, Some((100, 130)))],
            ]
        );
        let e = energy_windows(raw, &[]);
        let got: Vec<(&str, &[(i64, i64)])> = e
            .iter()
            .map(|e| (e.stage.as_str(), e.windows.as_slice()))
            .collect();
        assert_eq!(
            got,
            [
                ("prefill", &[(0, 10), (5, 9)][..]),
                ("decode", &[(10, 30), (100, 130)][..])
            ]
        );
        assert_eq!(energy_windows(raw, &["decode".to_string()]).len(), 1);
    }
}
