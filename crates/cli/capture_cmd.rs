//! `llmprof capture`: plan, run the passes, ingest, analyse, write the run with its raw
//! artifacts.

use std::io::Write;

use anyhow::{bail, Context, Result};
use llmprof_capture::{CaptureOptions, Mode};
use llmprof_ingest::{run_store, IngestRequest};

use crate::args::{CaptureArgs, ModeArg};

/// Profiler overhead above which the run suggests a lighter mode.
const OVERHEAD_WARN_PCT: f64 = 25.0;

pub fn run(args: CaptureArgs) -> Result<()> {
    let opts = CaptureOptions {
        target_path: args.target.clone(),
        mode: match args.mode {
            ModeArg::Light => Mode::Light,
            ModeArg::Standard => Mode::Standard,
            ModeArg::Deep => Mode::Deep,
        },
        repeats: args.repeats,
        device: args.device,
        out: args.out.clone(),
    };
    let plan = llmprof_capture::plan(opts)?;
    let mut err = std::io::stderr().lock();
    if args.dry_run {
        let mut out = std::io::stdout().lock();
        write!(out, "{}", plan.describe())?;
        writeln!(
            out,
            "dry run: nothing was run{}",
            if plan.problems.is_empty() {
                "; the plan is ready"
            } else {
                "; fix the problems above first"
            }
        )?;
        return Ok(());
    }
    let _ = write!(err, "{}", plan.describe());
    if plan.python.is_err() || plan.problems.iter().any(|p| p.contains("no CUDA device")) {
        bail!(
            "cannot capture here: {}",
            plan.problems
                .first()
                .map(String::as_str)
                .unwrap_or("no usable Python")
        );
    }
    let started = std::time::Instant::now();
    let output = llmprof_capture::run(&plan, &mut |msg| {
        let _ = writeln!(std::io::stderr(), "llmprof: {msg}");
    })?;

    let request = IngestRequest {
        nsys: output.nsys_sqlite.clone(),
        kineto: output.kineto.clone(),
        ncu: output.ncu_csv.clone().into_iter().collect(),
        model_config: output.model_config.clone(),
        metadata: Some(output.metadata.clone()),
        label: Some(format!("{} {}", plan.target.name, plan.opts.mode.as_str())),
        ..IngestRequest::default()
    };
    let ingested = llmprof_ingest::ingest(&request, &mut |_| {});
    let mut ingested = match ingested {
        Ok(i) => i,
        Err(e) => {
            return Err(e).with_context(|| {
                format!(
                    "the capture's artifacts could not be ingested; they are kept in `{}`",
                    output.work_dir.display()
                )
            })
        }
    };
    ingested.bundle.capture = Some(output.capture.clone());
    ingested.bundle.nvml = output.nvml.clone();
    ingested.bundle.analysis = Some(llmprof_analysis::analyze(&ingested.bundle));
    for o in &output.capture.overhead {
        if o.overhead_pct > OVERHEAD_WARN_PCT {
            let advice = if o.pass == "kineto" {
                "operator host times from the PyTorch profiler are inflated; stage timings come \
                 from the Nsight Systems pass when there is one"
            } else {
                "stage timings from it are inflated; --mode light avoids the Nsight Systems pass"
            };
            let _ = writeln!(
                err,
                "warning: the {} pass slowed {} by {:.0}% against the unprofiled baseline: {advice}",
                o.pass, o.stage, o.overhead_pct
            );
        }
    }
    for m in &output.capture.missing {
        let _ = writeln!(err, "missing: {m}");
    }
    let dir = run_store::write_run(&args.out, ingested)?;
    // The raw artifacts move into the run directory.
    std::fs::rename(&output.raw_dir, dir.join("raw"))
        .with_context(|| format!("moving raw artifacts into `{}`", dir.display()))?;
    let _ = std::fs::remove_dir_all(&output.work_dir);
    // Older runs of the target keep only compressed raw files (their manifests still list the
    // original files' sha256).
    let old = llmprof_capture::retention::apply(&args.out, &plan.target.name);
    if !old.is_empty() {
        let _ = writeln!(
            err,
            "compressed {} raw file(s) of older {} runs (the newest {} stay as captured)",
            old.len(),
            plan.target.name,
            llmprof_capture::retention::KEEP_UNCOMPRESSED
        );
    }
    let _ = writeln!(
        err,
        "captured in {:.1} s; next: llmprof show {}",
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    writeln!(std::io::stdout().lock(), "{}", dir.display())?;
    Ok(())
}
