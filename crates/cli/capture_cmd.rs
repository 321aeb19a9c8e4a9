//! `llmprof capture`: flags to capture options, then the capture library's steps — plan, run
//! the passes, assemble the run (ingest), analyse, save — with progress on stderr. Ctrl-C and
//! a full disk end with what was captured kept and a message that says so.

use std::io::Write;
use std::time::Instant;

use anyhow::{bail, Result};
use llmprof_capture::{
    AutoRule, CaptureOptions, CommandWorkload, GraphTraceLevel, Interrupt, Mode, Override, Plan,
    WorkloadSpec,
};

use crate::args::{CaptureArgs, GraphTraceArg, ModeArg, RepeatsArg};

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
    let (repeats, auto_repeats) = match args.repeats {
        Some(RepeatsArg::Fixed(n)) => (Some(n), None),
        Some(RepeatsArg::Auto) => (
            None,
            Some(AutoRule {
                cap_s: args.repeats_cap.unwrap_or(llmprof_capture::AUTO_CAP_S),
                ..AutoRule::default()
            }),
        ),
        None => (None, None),
    };
    if args.repeats_cap.is_some() && auto_repeats.is_none() {
        bail!("--repeats-cap applies to --repeats auto only");
    }
    let ranks = args
        .nproc
        .map(|n| llmprof_capture::ranks::Ranks::new(n, args.devices.clone(), args.rank))
        .transpose()?;
    Ok(CaptureOptions {
        device: ranks.as_ref().map_or(args.device, |r| r.devices[0]),
        ranks,
        cmd_analysis: llmprof_capture::CmdAnalysis {
            model_config: args.model_config.clone(),
            metadata: args.workload.metadata.clone(),
            workload: args.workload.flags(),
            peak_tflops: args.workload.peak_tflops,
            peak_gbps: args.workload.peak_gbps,
            warmup_instances: args.workload.warmup_instances,
        },
        workload,
        mode: match args.mode {
            ModeArg::Light => Mode::Light,
            ModeArg::Standard => Mode::Standard,
            ModeArg::Deep => Mode::Deep,
        },
        repeats,
        auto_repeats,
        pin: !args.no_pin,
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
    if args.dry_run {
        return dry_run(&plan);
    }
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{}", plan.describe());
    if let Some(p) = plan.blocking_problem() {
        bail!("cannot capture here: {p}");
    }
    let interrupt = on_ctrl_c(&mut err);
    let started = Instant::now();
    let output = llmprof_capture::run(
        &plan,
        &mut |msg| {
            let _ = writeln!(std::io::stderr(), "llmprof: {msg}");
        },
        &interrupt,
    )?;
    let interrupted = output.capture.interrupted;
    let empty = captured_nothing(&output);
    let mut run = llmprof_capture::assemble(&plan, &output)?;
    for (_, rank) in &mut run.ranks {
        rank.bundle.analysis = Some(llmprof_analysis::analyze(&rank.bundle));
    }
    run.run.bundle.analysis = Some(llmprof_analysis::analyze(&run.run.bundle));
    for line in run
        .run
        .bundle
        .capture
        .iter()
        .flat_map(llmprof_capture::summary_lines)
    {
        let _ = writeln!(err, "{line}");
    }
    let saved = llmprof_capture::save(&plan, output, run)?;
    if !saved.compressed.is_empty() {
        let _ = writeln!(
            err,
            "compressed {} raw file(s) of older {} runs (the newest {} stay as captured)",
            saved.compressed.len(),
            plan.name(),
            llmprof_store::retention::KEEP_UNCOMPRESSED
        );
    }
    let dir = saved.dir.display();
    let secs = started.elapsed().as_secs_f64();
    if interrupted {
        writeln!(std::io::stdout().lock(), "{dir}")?;
        return Err(Interrupted(format!(
            "interrupted after {secs:.1} s: the partial run is in `{dir}` (its capture record \
             lists what is missing)"
        ))
        .into());
    }
    writeln!(std::io::stdout().lock(), "{dir}")?;
    if let Some(what) = empty.filter(|_| !args.allow_empty) {
        bail!(
            "captured nothing in {secs:.1} s: {what}; the run in `{dir}` holds only the capture \
             record. Capture where a GPU, NVML and a profiler are, or pass --allow-empty to \
             accept such a run"
        );
    }
    let _ = writeln!(err, "captured in {secs:.1} s; next: llmprof show {dir}");
    Ok(())
}

/// What a capture lacked when it recorded no profiler trace and no NVML sample; `None` when
/// it recorded either.
fn captured_nothing(o: &llmprof_capture::CaptureOutput) -> Option<&'static str> {
    let traced = o.kineto.is_some() || o.nsys_sqlite.is_some() || o.ncu_csv.is_some();
    (!traced && o.nvml.is_none()).then_some(
        "no profiler trace (no Nsight Systems export, no PyTorch-profiler trace) and no NVML \
         power sample",
    )
}

/// `--dry-run`: the plan and whether it is ready, on stdout.
fn dry_run(plan: &Plan) -> Result<()> {
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
    Ok(())
}

/// Ctrl-C (and SIGTERM, SIGHUP) triggers the returned interrupt instead of killing llmprof, so
/// the running pass is stopped and a partial run is written.
fn on_ctrl_c(err: &mut impl Write) -> Interrupt {
    let interrupt = Interrupt::new();
    let i = interrupt.clone();
    if let Err(e) = ctrlc::set_handler(move || i.trigger()) {
        let _ = writeln!(
            err,
            "warning: cannot catch Ctrl-C ({e}); an interrupted capture keeps nothing"
        );
    }
    interrupt
}
