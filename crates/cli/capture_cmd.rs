//! `llmprof capture`: plan, run the passes, ingest, analyse, write the run with its raw
//! artifacts. Ctrl-C and a full disk end with what was captured kept and a message that says
//! so.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use llmprof_capture::{
    CaptureOptions, CommandWorkload, GraphTraceLevel, Interrupt, Mode, Override, WorkloadSpec,
};
use llmprof_ingest::{IngestRequest, Ingested};

use crate::args::{CaptureArgs, GraphTraceArg, ModeArg};

/// Profiler overhead above which the run suggests a lighter mode.
const OVERHEAD_WARN_PCT: f64 = 25.0;

/// Ctrl-C ended the capture: `main` prints it and exits 130 (128 + SIGINT).
#[derive(Debug)]
pub struct Interrupted(pub String);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Interrupted {}

fn options(args: &CaptureArgs) -> Result<CaptureOptions> {
    let workload = match (&args.target, &args.cmd) {
        (Some(t), None) => WorkloadSpec::Target(t.clone()),
        (None, Some(c)) => {
            let mut stages = Vec::new();
            for s in &args.stages {
                let s = s.trim();
                if s.is_empty() || s.contains('/') {
                    bail!("--stages `{}`: give NVTX range names separated by commas, such as prefill,decode", args.stages.join(","));
                }
                if !stages.iter().any(|x| x == s) {
                    stages.push(s.to_string());
                }
            }
            WorkloadSpec::Command(CommandWorkload::new(c, stages)?)
        }
        _ => bail!("give either --target FILE or --cmd COMMAND"),
    };
    Ok(CaptureOptions {
        workload,
        mode: match args.mode {
            ModeArg::Light => Mode::Light,
            ModeArg::Standard => Mode::Standard,
            ModeArg::Deep => Mode::Deep,
        },
        repeats: args.repeats,
        device: args.device,
        out: args.out.clone(),
        timeout_s: args.timeout,
        overhead_repeats: args.overhead_repeats,
        overrides: args
            .set
            .iter()
            .map(|s| Override::parse(s))
            .collect::<Result<_, _>>()
            .map_err(anyhow::Error::msg)?,
        cuda_graph_trace: match args.cuda_graph_trace {
            GraphTraceArg::Node => GraphTraceLevel::Node,
            GraphTraceArg::Graph => GraphTraceLevel::Graph,
        },
    })
}

pub fn run(args: CaptureArgs) -> Result<()> {
    let plan = llmprof_capture::plan(options(&args)?)?;
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
    let fatal = plan
        .problems
        .iter()
        .find(|p| p.contains("no CUDA device") || p.contains("neither a file nor on PATH"));
    if let Some(Err(e)) = &plan.python {
        bail!("cannot capture here: {e}");
    }
    if let Some(p) = fatal {
        bail!("cannot capture here: {p}");
    }
    let interrupt = Interrupt::new();
    {
        let i = interrupt.clone();
        if let Err(e) = ctrlc::set_handler(move || i.trigger()) {
            let _ = writeln!(
                err,
                "warning: cannot catch Ctrl-C ({e}); an interrupted capture keeps nothing"
            );
        }
    }
    let started = std::time::Instant::now();
    let output = llmprof_capture::run(
        &plan,
        &mut |msg| {
            let _ = writeln!(std::io::stderr(), "llmprof: {msg}");
        },
        &interrupt,
    )?;
    let interrupted = output.capture.interrupted;
    let label = plan.label();
    let request = IngestRequest {
        nsys: output.nsys_sqlite.clone(),
        kineto: output.kineto.clone(),
        ncu: output.ncu_csv.clone().into_iter().collect(),
        model_config: output.model_config.clone(),
        metadata: output.metadata.clone(),
        label: Some(label.clone()),
        ..IngestRequest::default()
    };
    let mut capture = output.capture.clone();
    let mut ingested = if request.nsys.is_none() && request.kineto.is_none() {
        capture.missing.push(
            "stages, kernels and the timeline: no profiler trace was captured (no Nsight Systems \
             export, no PyTorch-profiler trace); this run holds the capture record and NVML only"
                .into(),
        );
        record_only(&label)
    } else {
        match llmprof_ingest::ingest(&request, &mut |_| {}) {
            Ok(i) => i,
            Err(e) if interrupted => {
                capture
                    .missing
                    .push(format!("the partial traces could not be ingested: {e}"));
                record_only(&label)
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "the capture's artifacts could not be ingested; they are kept in `{}`",
                        output.work_dir.display()
                    )
                })
            }
        }
    };
    for s in &capture.stage_names {
        if !ingested.bundle.stages.iter().any(|b| &b.name == s)
            && !ingested.bundle.stages.is_empty()
        {
            capture.missing.push(format!(
                "--stages names `{s}`, but the workload opened no NVTX range of that name"
            ));
        }
    }
    ingested.bundle.capture = Some(capture.clone());
    ingested.bundle.nvml = output.nvml.clone();
    ingested.bundle.analysis = Some(llmprof_analysis::analyze(&ingested.bundle));
    for o in &capture.overhead {
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
    for e in &capture.energy {
        let _ = writeln!(
            err,
            "energy: {} {:.3} J per instance ({:.0} W mean){}",
            e.stage,
            e.energy_j,
            e.mean_power_w,
            e.j_per_token
                .map_or(String::new(), |j| format!(", {:.3} mJ/token", j * 1e3))
        );
    }
    for m in &capture.missing {
        let _ = writeln!(err, "missing: {m}");
    }
    let keep = &output.work_dir;
    let dir = llmprof_store::write_run(&args.out, ingested.bundle, ingested.timeline)
        .map_err(anyhow::Error::from)
        .map_err(|e| disk_full_or(e, &args.out, keep))?;
    // The raw artifacts move into the run directory.
    std::fs::rename(&output.raw_dir, dir.join("raw")).map_err(|e| {
        if llmprof_capture::is_disk_full(&e) {
            anyhow::anyhow!(llmprof_capture::disk_full_message(&dir, Some(keep)))
        } else {
            anyhow::Error::from(e).context(format!("moving raw artifacts into `{}`", dir.display()))
        }
    })?;
    let _ = std::fs::remove_dir_all(&output.work_dir);
    // Older runs of the target keep only compressed raw files (their manifests still list the
    // original files' sha256).
    let old = llmprof_store::retention::apply(&args.out, plan.name());
    if !old.is_empty() {
        let _ = writeln!(
            err,
            "compressed {} raw file(s) of older {} runs (the newest {} stay as captured)",
            old.len(),
            plan.name(),
            llmprof_store::retention::KEEP_UNCOMPRESSED
        );
    }
    if interrupted {
        writeln!(std::io::stdout().lock(), "{}", dir.display())?;
        return Err(Interrupted(format!(
            "interrupted after {:.1} s: the partial run is in `{}` (its capture record lists \
             what is missing)",
            started.elapsed().as_secs_f64(),
            dir.display()
        ))
        .into());
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

/// A bundle with no trace data, for the capture record and the NVML samples alone.
fn record_only(label: &str) -> Ingested {
    let mut b = llmprof_bundle::Bundle::new("");
    b.label = Some(label.to_string());
    b.llmprof_version = env!("CARGO_PKG_VERSION").into();
    b.run_id = llmprof_store::run_id(&b);
    Ingested {
        bundle: b,
        timeline: None,
    }
}

/// A full disk anywhere in `e`'s chain becomes the one-line message; other errors pass.
fn disk_full_or(e: anyhow::Error, out: &Path, keep: &Path) -> anyhow::Error {
    let full = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(llmprof_capture::is_disk_full)
    });
    if full {
        anyhow::anyhow!(llmprof_capture::disk_full_message(out, Some(keep)))
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_anywhere_in_the_chain_is_one_line_naming_the_path() {
        // /dev/full answers every write with ENOSPC.
        let Ok(mut f) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
            return;
        };
        let io = f.write_all(b"x").and_then(|_| f.flush()).unwrap_err();
        assert!(llmprof_capture::is_disk_full(&io));
        let e = anyhow::Error::from(io).context("writing the run");
        let msg = disk_full_or(e, Path::new("/tmp"), Path::new("/tmp/.capture-x")).to_string();
        assert!(
            msg.starts_with("disk full writing `/tmp` (")
                && msg.contains("MiB free")
                && msg.contains("kept in `/tmp/.capture-x`")
                && !msg.contains('\n'),
            "{msg}"
        );
        let other = disk_full_or(anyhow::anyhow!("nope"), Path::new("/tmp"), Path::new(""));
        assert_eq!(other.to_string(), "nope");
    }
}
