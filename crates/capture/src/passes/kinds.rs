//! The kinds of pass, one type each behind [`PassKind`]: what sets a pass apart is the profiler
//! it runs the workload under, where its output goes, how often it runs and what follows it.
//! The workload itself (the driver, or the `--cmd` command) does the pass's measuring; it is
//! told the pass by name. The extra interleaved pairs of `--overhead-repeats` (`baseline-2`,
//! `nsys-2`, ...) are passes of the same kinds.
//!
//! | pass | kind | runs the workload |
//! |---|---|---|
//! | `baseline`, `baseline-N` | [`Baseline`] | unprofiled; a `--cmd` workload `repeats` times |
//! | `flops`, `calibrate` | [`Plain`] | unprofiled (the driver counts FLOPs, or measures ceilings) |
//! | `kineto` | [`Kineto`] | unprofiled; the driver (or the command) runs the PyTorch profiler |
//! | `nsys`, `nsys-N` | [`Nsys`] | under `nsys profile`; then the report is exported to SQLite |
//! | `ncu` | [`Ncu`] | under `ncu`, on the top kernels of the nsys pass |

use std::path::{Path, PathBuf};

use llmprof_bundle::Capture;

use super::{Session, State};
use crate::nsys_export;

/// What sets one kind of pass apart; see the module docs.
pub(super) trait PassKind {
    /// The command line that runs `workload` for this pass, or the `missing` line saying why
    /// the pass cannot run (its profiler is not installed).
    fn command(
        &self,
        _s: &Session<'_>,
        _st: &State,
        _out: &Path,
        workload: Vec<String>,
    ) -> Result<Vec<String>, String> {
        Ok(workload)
    }

    /// Variables a `--cmd` workload gets in this pass besides `LLMPROF_PASS`,
    /// `LLMPROF_OUT_DIR` and `LLMPROF_STAGES`.
    fn command_env(&self, _out: &Path) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Where the command's stdout goes; `None`: the pass's log.
    fn stdout_to(&self, _out: &Path) -> Option<PathBuf> {
        None
    }

    /// How many times the command runs.
    fn runs(&self, _s: &Session<'_>) -> u64 {
        1
    }

    /// What follows the pass's runs (unless the disk filled up).
    fn after(
        &self,
        _s: &Session<'_>,
        _st: &mut State,
        _pass: &str,
        _progress: &mut dyn FnMut(&str),
    ) {
    }
}

/// The kind of `pass` (`baseline-2` is a baseline, `nsys-3` an nsys pass).
pub(super) fn kind_of(pass: &str) -> &'static dyn PassKind {
    match crate::pass_kind(pass) {
        "baseline" => &Baseline,
        "kineto" => &Kineto,
        "nsys" => &Nsys,
        "ncu" => &Ncu,
        _ => &Plain,
    }
}

/// The unprofiled baseline. A `--cmd` baseline runs `repeats` times (each run is one timing
/// sample); a target's driver repeats iterations inside one process.
pub(super) struct Baseline;

impl PassKind for Baseline {
    fn runs(&self, s: &Session<'_>) -> u64 {
        if s.plan.command.is_some() {
            s.repeats
        } else {
            1
        }
    }
}

/// A pass the driver does on its own: `flops` (counted FLOPs), `calibrate` (measured
/// ceilings).
pub(super) struct Plain;

impl PassKind for Plain {}

/// The PyTorch-profiler pass: the driver profiles itself; a `--cmd` workload is told where to
/// write its trace.
pub(super) struct Kineto;

impl PassKind for Kineto {
    fn command_env(&self, out: &Path) -> Vec<(String, String)> {
        vec![(
            "LLMPROF_KINETO_OUT".into(),
            out.join("kineto_trace.json").display().to_string(),
        )]
    }
}

/// The Nsight Systems pass: the workload under `nsys profile`, CUDA and NVTX traced, CUDA
/// graphs at the plan's level; the report is then exported to SQLite.
pub(super) struct Nsys;

impl PassKind for Nsys {
    fn command(
        &self,
        s: &Session<'_>,
        _st: &State,
        out: &Path,
        workload: Vec<String>,
    ) -> Result<Vec<String>, String> {
        let Some(nsys) = &s.plan.nsys else {
            return Err(
                "the nsys pass did not run: Nsight Systems (`nsys`) was not found on PATH \
                 or under /opt/nvidia; install it or set NSYS=/path/to/nsys (or use \
                 --mode light)"
                    .into(),
            );
        };
        let mut c = vec![
            nsys.display().to_string(),
            "profile".into(),
            "-t".into(),
            "cuda,nvtx".into(),
            "--sample=none".into(),
            "--cpuctxsw=none".into(),
            format!(
                "--cuda-graph-trace={}",
                s.plan.opts.cuda_graph_trace.as_str()
            ),
            "--force-overwrite=true".into(),
            "-o".into(),
            out.join("profile").display().to_string(),
        ];
        c.extend(workload);
        Ok(c)
    }

    /// The first nsys pass's report is exported for ingest (those of the extra overhead pairs
    /// are only timed); an interrupted pass's report is kept unexported.
    fn after(&self, s: &Session<'_>, st: &mut State, pass: &str, progress: &mut dyn FnMut(&str)) {
        if pass != "nsys" {
            return;
        }
        if !st.capture.interrupted {
            st.nsys_sqlite = export_nsys(s, &mut st.capture, progress);
        } else if s.raw.join("nsys/profile.nsys-rep").is_file() {
            st.capture.missing.push(
                "the Nsight Systems report was not exported (interrupted); it is kept \
                 at raw/nsys/profile.nsys-rep: `llmprof ingest --nsys` it"
                    .into(),
            );
        }
    }
}

/// ncu metrics of the deep pass (the fixture's list: duration, SM/memory/DRAM throughput,
/// occupancy, tensor pipe, launch geometry).
const NCU_METRICS: &str = "gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,sm__maximum_warps_per_active_cycle_pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct,launch__grid_size,launch__block_size,launch__registers_per_thread";

/// The Nsight Compute pass: the workload under `ncu` on the kernels inside the stages (decode
/// for a target, `--stages` for a command), limited to the top kernels of the nsys pass when it
/// ran; kernels a CUDA graph launches are profiled one by one.
pub(super) struct Ncu;

impl PassKind for Ncu {
    fn command(
        &self,
        s: &Session<'_>,
        st: &State,
        _out: &Path,
        workload: Vec<String>,
    ) -> Result<Vec<String>, String> {
        let Some(ncu) = &s.plan.ncu else {
            return Err(
                "the ncu pass did not run: Nsight Compute (`ncu`) was not found; install \
                 it or set NCU=/path/to/ncu (or use --mode standard)"
                    .into(),
            );
        };
        // Kernels a CUDA graph launches are profiled one by one (ncu's node mode, said
        // explicitly), under the NVTX range of their `cudaGraphLaunch`.
        let mut c = vec![
            ncu.display().to_string(),
            "--clock-control".into(),
            "none".into(),
            "--graph-profiling".into(),
            "node".into(),
        ];
        // Only kernels inside the stages: decode for a target, --stages for a command.
        let ranges: Vec<String> = match &s.plan.command {
            Some(cmd) => cmd.stages.clone(),
            None => vec!["decode".into()],
        };
        if !ranges.is_empty() {
            c.push("--nvtx".into());
            for r in ranges {
                c.push("--nvtx-include".into());
                c.push(format!("{r}/"));
            }
        }
        // The top kernels by GPU time in the Nsight Systems pass, when it ran.
        if let Some(re) = st
            .nsys_sqlite
            .as_deref()
            .and_then(|db| top_kernels_regex(db, TOP_K))
        {
            c.push("-k".into());
            c.push(re);
        }
        c.extend([
            "-c".into(),
            "30".into(),
            "--csv".into(),
            "--page".into(),
            "raw".into(),
            "--metrics".into(),
            NCU_METRICS.into(),
        ]);
        // Under torchrun, ncu profiles one rank; the others run unprofiled.
        let split = s.plan.opts.ranks.as_ref().and_then(|r| {
            let (launcher, rank_cmd) = r.split_launched(&workload)?;
            Some(crate::ranks::ncu_on_rank(
                &launcher, &c, &rank_cmd, r.ncu_rank,
            ))
        });
        Ok(split.unwrap_or_else(|| {
            c.extend(workload);
            c
        }))
    }

    fn stdout_to(&self, out: &Path) -> Option<PathBuf> {
        Some(out.join("ncu_decode_raw.csv"))
    }
}

/// Kernels Nsight Compute profiles in deep mode: the top ones by GPU time in the nsys pass.
const TOP_K: usize = 5;

/// `regex:^(a|b|c)$` over the short names of the `k` kernels with the most GPU time in an
/// nsys export; `None` when the export cannot be read or ran no kernel.
fn top_kernels_regex(db: &Path, k: usize) -> Option<String> {
    let names = llmprof_ingest::nsys::top_kernels_by_time(db, k).ok()?;
    kernel_regex(&names)
}

/// `regex:^(a|b|c)$` matching exactly these kernel names; `None` for no names.
fn kernel_regex(names: &[String]) -> Option<String> {
    if names.is_empty() {
        return None;
    }
    let escaped: Vec<String> = names.iter().map(|n| regex_escape(n)).collect();
    Some(format!("regex:^({})$", escaped.join("|")))
}

fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.^$|?*+()[]{}".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Exports the nsys pass's report to SQLite; records what is missing when it cannot.
fn export_nsys(
    s: &Session<'_>,
    capture: &mut Capture,
    progress: &mut dyn FnMut(&str),
) -> Option<PathBuf> {
    let nsys = s.plan.nsys.as_ref()?;
    let raw = &s.raw;
    let rep = raw.join("nsys/profile.nsys-rep");
    if rep.is_file() {
        progress("exporting the Nsight Systems report to SQLite");
        let exported = nsys_export::export(
            nsys,
            &rep,
            &raw.join("nsys/profile.sqlite"),
            s.timeout,
            &raw.join("nsys/export.log"),
            Some(s.interrupt),
        );
        if exported.result.is_err() {
            capture.missing.push(format!(
                "nsys export failed ({}); the report is kept at raw/nsys/profile.nsys-rep",
                exported.record.note.clone().unwrap_or_default()
            ));
        }
        capture.passes.push(exported.record);
        return exported.result.ok();
    }
    let only_qdstrm = std::fs::read_dir(raw.join("nsys"))
        .map(|rd| {
            rd.flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "qdstrm"))
        })
        .unwrap_or(false);
    capture.missing.push(if only_qdstrm {
        "Nsight Systems left only a .qdstrm: its importer could not load libdw.so.1. Put \
         elfutils' libdw.so.1 and libelf.so.1 in a folder and run with \
         LD_LIBRARY_PATH=<that folder> (shared/gpu/fetch-nsys-libs.sh fetches them)"
            .into()
    } else {
        "the Nsight Systems pass wrote no report: see raw/nsys/stderr.log".into()
    });
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_kernels_become_an_ncu_name_regex() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            kernel_regex(&names(&["elementwise_kernel", "nvjet_sm90_tst_64x8"])).as_deref(),
            Some("regex:^(elementwise_kernel|nvjet_sm90_tst_64x8)$")
        );
        assert_eq!(
            kernel_regex(&names(&["op<x>.y", "a(b)"])).as_deref(),
            Some("regex:^(op<x>\\.y|a\\(b\\))$")
        );
        assert!(kernel_regex(&[]).is_none());
        assert!(top_kernels_regex(Path::new("/nonexistent/none.sqlite"), 2).is_none());
    }
}
