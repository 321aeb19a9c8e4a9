//! From a finished capture to a run in the runs directory. [`assemble`] ingests the
//! artifacts (or makes a record-only bundle when no trace was captured) and attaches the
//! capture record and the NVML samples; the caller adds the analysis; [`save`] writes the run
//! through `llmprof-store`, moves the raw artifacts into it and applies retention to the
//! target's older runs. The capture itself never builds a bundle: ingest does.

use std::path::{Path, PathBuf};

use llmprof_bundle::{Bundle, Capture};
use llmprof_ingest::{IngestRequest, Ingested};
use llmprof_report::fmt;
use llmprof_store::{retention, StoreError, RAW_DIR};

use crate::{is_disk_full, CaptureError, CaptureOutput, Plan};

/// Profiler overhead above which the summary suggests a lighter mode.
const OVERHEAD_WARN_PCT: f64 = 25.0;

/// The run of a capture, not yet written: its artifacts ingested, `capture` and `nvml` set.
/// The bundle names the artifacts relative to the run directory (`raw/metadata.json`): the
/// working directory they lie in now becomes it. A capture with no trace to ingest (or an interrupted one whose partial traces do not
/// ingest) gets a bundle holding the record and NVML only, and says so in `capture.missing`.
pub fn assemble(plan: &Plan, output: &CaptureOutput) -> Result<CaptureRun, CaptureError> {
    if !output.ranks.is_empty() {
        return crate::rank_run::assemble(plan, output);
    }
    let request = request(plan, output);
    let mut capture = output.capture.clone();
    relative_commands(&mut capture, &output.work_dir);
    let mut run = ingest_or_record(&request, &mut capture, &output.work_dir)?;
    note_missing_stages(&mut capture, &run.bundle);
    run.bundle.capture = Some(capture);
    run.bundle.nvml = output.nvml.clone();
    Ok(CaptureRun {
        run,
        ranks: Vec::new(),
    })
}

/// A capture's run, not yet written: the run's own bundle and, for a `--nproc` capture of
/// several ranks, each rank's run (the run's own bundle then pools them and has no timeline).
#[derive(Debug)]
pub struct CaptureRun {
    pub run: Ingested,
    pub ranks: Vec<(u32, Ingested)>,
}

/// What ingest reads of a capture's artifacts (rank 0's, or the one process's).
pub(crate) fn request(plan: &Plan, output: &CaptureOutput) -> IngestRequest {
    let label = plan.label();
    IngestRequest {
        nsys: output.nsys_sqlite.clone(),
        nsys_process: None,
        kineto: output.kineto.clone(),
        ncu: output.ncu_csv.clone().into_iter().collect(),
        model_config: output.model_config.clone(),
        metadata: output.metadata.clone(),
        label: Some(label.clone()),
        stage_names: output.capture.stage_names.clone(),
        relative_to: Some(output.work_dir.clone()),
        spill_dir: Some(output.work_dir.clone()),
        workload: plan.opts.cmd_analysis.workload.clone(),
        peak_tflops: plan.opts.cmd_analysis.peak_tflops,
        peak_gbps: plan.opts.cmd_analysis.peak_gbps,
        warmup_instances: plan.opts.cmd_analysis.warmup_instances,
    }
}

/// The request ingested, or, with no trace to ingest (or an interrupted capture's partial
/// traces that do not ingest), a bundle of the record alone with `capture.missing` saying so.
pub(crate) fn ingest_or_record(
    request: &IngestRequest,
    capture: &mut Capture,
    work_dir: &Path,
) -> Result<Ingested, CaptureError> {
    let label = request.label.clone().unwrap_or_default();
    Ok(if request.nsys.is_none() && request.kineto.is_none() {
        capture.missing.push(
            "stages, kernels and the timeline: no profiler trace was captured (no Nsight Systems \
             export, no PyTorch-profiler trace); this run holds the capture record and NVML only"
                .into(),
        );
        record_only(&label)
    } else {
        match llmprof_ingest::ingest(request, &mut |_| {}) {
            Ok(i) => i,
            Err(e) if capture.interrupted => {
                capture
                    .missing
                    .push(format!("the partial traces could not be ingested: {e}"));
                record_only(&label)
            }
            Err(source) => {
                return Err(CaptureError::Ingest {
                    keep: work_dir.to_path_buf(),
                    source,
                })
            }
        }
    })
}

/// The passes' command lines with the working directory's paths relative to it, as the run
/// directory that replaces it names them (`driver.py raw/nsys/plan.json`).
pub(crate) fn relative_commands(capture: &mut Capture, work_dir: &Path) {
    for word in capture.passes.iter_mut().flat_map(|p| &mut p.command) {
        *word = llmprof_ingest::paths::relative_in(word, work_dir);
    }
}

/// A bundle with no trace data, for the capture record and the NVML samples alone.
fn record_only(label: &str) -> Ingested {
    let mut b = Bundle::new("");
    b.label = Some(label.to_string());
    b.llmprof_version = env!("CARGO_PKG_VERSION").into();
    b.run_id = llmprof_store::run_id(&b);
    Ingested {
        bundle: b,
        timeline: None,
    }
}

/// A `--stages` name the workload never opened a range for is missing (when it opened any).
pub(crate) fn note_missing_stages(capture: &mut Capture, bundle: &Bundle) {
    for s in &capture.stage_names {
        if !bundle.stages.iter().any(|b| &b.name == s) && !bundle.stages.is_empty() {
            capture.missing.push(format!(
                "--stages names `{s}`, but the workload opened no NVTX range of that name"
            ));
        }
    }
}

/// What the terminal is told of a capture record: a `warning:` line per pass that slowed a
/// stage by more than 25%, an `energy:` line per stage, a `missing:` line per gap.
pub fn summary_lines(capture: &Capture) -> Vec<String> {
    let mut lines = Vec::new();
    for o in &capture.overhead {
        if o.overhead_pct > OVERHEAD_WARN_PCT {
            let advice = if o.pass == "kineto" {
                "operator host times from the PyTorch profiler are inflated; stage timings come \
                 from the Nsight Systems pass when there is one"
            } else {
                "stage timings from it are inflated; --mode light avoids the Nsight Systems pass"
            };
            let basis = match o.basis.as_deref() {
                Some(b @ "whole process") => format!(" ({b}: start-up and model load included)"),
                _ => String::new(),
            };
            lines.push(format!(
                "warning: the {} pass slowed {}{basis} by {:.0}% against the unprofiled baseline: \
                 {advice}",
                o.pass, o.stage, o.overhead_pct
            ));
        }
    }
    lines.extend(capture.auto_repeats.as_ref().map(auto_line));
    for e in &capture.energy {
        lines.push(format!(
            "energy: {} {:.3} J per instance ({:.0} W mean){}",
            e.stage,
            e.energy_j,
            e.mean_power_w,
            e.j_per_token
                .map_or(String::new(), |j| format!(", {:.3} mJ/token", j * 1e3))
        ));
    }
    lines.extend(capture.missing.iter().map(|m| format!("missing: {m}")));
    lines
}

/// `repeats auto: target met: ...` — what `--repeats auto` reached.
fn auto_line(a: &llmprof_bundle::AutoRepeats) -> String {
    let widths: Vec<String> = a
        .stages
        .iter()
        .map(|s| {
            format!(
                "{} {}",
                s.stage,
                fmt::opt(s.half_width_pct, |h| format!("±{}%", fmt::pct(h)))
            )
        })
        .collect();
    format!(
        "repeats auto: target {} after {} added round{}: {} samples from {} processes in {}; \
         95% CI {} of the median (target ±{}%)",
        if a.met { "met" } else { "not met" },
        a.rounds,
        if a.rounds == 1 { "" } else { "s" },
        a.iterations,
        a.processes,
        fmt::duration(a.baseline_s * 1e9),
        widths.join(", "),
        fmt::pct(a.target_pct)
    )
}

/// A capture's run in the runs directory.
#[derive(Debug)]
pub struct Saved {
    /// The run directory.
    pub dir: PathBuf,
    /// Raw files of the target's older runs compressed now (see [`retention`]).
    pub compressed: Vec<PathBuf>,
}

/// Writes `run` into the plan's runs directory, moves the raw artifacts into it, removes the
/// capture's working directory, and compresses the raw files of the target's older runs but
/// the newest [`retention::KEEP_UNCOMPRESSED`]. A full disk is the one-line message naming
/// where the artifacts are kept.
pub fn save(plan: &Plan, output: CaptureOutput, run: CaptureRun) -> Result<Saved, CaptureError> {
    let runs_dir = &plan.opts.out;
    let keep = &output.work_dir;
    let CaptureRun { run, ranks } = run;
    let written = if ranks.is_empty() {
        llmprof_store::write_run(runs_dir, run.bundle, run.timeline)
    } else {
        write_ranked(runs_dir, run.bundle, ranks)
    };
    let dir = written.map_err(|e| store_error(e, runs_dir, keep))?;
    // The raw artifacts move into the run directory.
    std::fs::rename(&output.raw_dir, dir.join(RAW_DIR)).map_err(|source| {
        if is_disk_full(&source) {
            CaptureError::DiskFull {
                path: dir.clone(),
                keep: Some(keep.clone()),
            }
        } else {
            CaptureError::MoveRaw {
                dir: dir.clone(),
                source,
            }
        }
    })?;
    let _ = std::fs::remove_dir_all(keep);
    // Older runs of the target keep only compressed raw files (their manifests still list the
    // original files' sha256).
    let compressed = retention::apply(runs_dir, plan.name());
    Ok(Saved { dir, compressed })
}

/// A multi-rank run: each rank's run under `ranks/<r>/`, then the run's own bundle.
fn write_ranked(
    runs_dir: &Path,
    bundle: Bundle,
    ranks: Vec<(u32, Ingested)>,
) -> Result<PathBuf, StoreError> {
    let writer = llmprof_store::RankedRunWriter::begin(runs_dir)?;
    for (rank, r) in ranks {
        writer.write_rank(rank, r.bundle, r.timeline)?;
    }
    writer.finish(bundle)
}

/// A store error as the capture reports it: a full disk becomes the one-line message naming
/// the runs directory and where the artifacts are kept.
fn store_error(e: StoreError, runs_dir: &Path, keep: &Path) -> CaptureError {
    if e.io_error().is_some_and(is_disk_full) {
        CaptureError::DiskFull {
            path: runs_dir.to_path_buf(),
            keep: Some(keep.to_path_buf()),
        }
    } else {
        CaptureError::Store(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_full_disk_in_the_run_write_is_one_line_naming_the_path() {
        // /dev/full answers every write with ENOSPC.
        let Ok(mut f) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
            return;
        };
        let io = f.write_all(b"x").and_then(|_| f.flush()).unwrap_err();
        assert!(is_disk_full(&io));
        let e = StoreError::Write {
            path: "/tmp/x/bundle.json".into(),
            source: io,
        };
        let msg = store_error(e, Path::new("/tmp"), Path::new("/tmp/.capture-x")).to_string();
        assert!(
            msg.starts_with("disk full writing `/tmp` (")
                && msg.contains("MiB free")
                && msg.contains("kept in `/tmp/.capture-x`")
                && !msg.contains('\n'),
            "{msg}"
        );
        let other = StoreError::NoRuns {
            path: "/tmp/r".into(),
        };
        let msg = store_error(other, Path::new("/tmp"), Path::new("")).to_string();
        assert!(msg.starts_with("runs directory `/tmp/r`"), "{msg}");
    }

    #[test]
    fn the_summary_warns_of_overhead_and_lists_energy_and_gaps() {
        let mut c = Capture::default();
        c.overhead.push(llmprof_bundle::Overhead {
            pass: "nsys".into(),
            stage: "decode".into(),
            baseline_median_ns: 1.0,
            profiled_median_ns: 2.0,
            overhead_pct: 100.0,
            pairs: 1,
            pair_range_pct: None,
            basis: Some("iterations".into()),
        });
        c.missing.push("ncu".into());
        c.auto_repeats = Some(llmprof_bundle::AutoRepeats {
            target_pct: 2.0,
            cap_s: 600,
            met: true,
            rounds: 3,
            processes: 4,
            iterations: 24,
            baseline_s: 130.0,
            stages: vec![llmprof_bundle::StageCi {
                stage: "prefill".into(),
                n: 24,
                median_ns: 2e7,
                half_width_pct: Some(1.84),
            }],
        });
        let lines = summary_lines(&c);
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("warning: the nsys pass slowed decode by 100%"));
        assert_eq!(
            lines[1],
            "repeats auto: target met after 3 added rounds: 24 samples from 4 processes in 130 \
             s; 95% CI prefill ±1.8% of the median (target ±2.0%)"
        );
        assert_eq!(lines[2], "missing: ncu");
    }
}
