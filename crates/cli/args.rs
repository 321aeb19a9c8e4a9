//! Command-line flags (clap derive), turned into validated configs before anything runs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Profile LLM inference on NVIDIA GPUs.
///
/// llmprof turns the output of Nsight Systems, Nsight Compute and the PyTorch profiler into one
/// normalized run bundle (runs/<run-id>/bundle.json) with per-stage timings, kernel and operator
/// tables, and a timeline.
#[derive(Debug, Parser)]
#[command(name = "llmprof", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Ingest profiler output into a run bundle.
    ///
    /// Give at least one of --nsys, --kineto, --ncu. When both --nsys and --kineto are given,
    /// stages, kernels and the timeline come from Nsight Systems and operators from the PyTorch
    /// profiler trace. The run directory is printed as the last line of stdout.
    ///
    /// Several ranks of a distributed job make one run: give --kineto once per rank (or a
    /// directory of per-rank traces), or --nsys once per rank. Each rank is ingested on its
    /// own core into runs/<id>/ranks/<rank>/ (a complete run with its timeline); the run's
    /// own bundle pools them and holds the rank table, clock alignment, communication overlap
    /// and skew. Ranks come from each trace's distributedInfo (the PyTorch profiler's), else
    /// the order given.
    ///
    /// Examples:
    ///   llmprof ingest --nsys run.sqlite --kineto trace.json.gz --ncu ncu.csv \
    ///       --model-config config.json --label qwen2-h200
    ///   llmprof ingest --kineto traces/ --parallel-degree 2 --label tp2
    #[command(verbatim_doc_comment)]
    Ingest(IngestArgs),
    /// Merge single-rank runs of one distributed job into one multi-rank run.
    ///
    /// For jobs too large for one machine: ingest each rank where its trace is (a scheduler's
    /// array job, `llmprof ingest --kineto rank-R.json --out per-rank/`), gather the per-rank
    /// run directories (bundle and timeline, not the raw traces) and merge them here. Ranks
    /// come from each run's distributedInfo, else the order given.
    ///
    /// Example: llmprof merge per-rank/* --parallel-degree 8 --label llama70b-tp8
    #[command(verbatim_doc_comment)]
    Merge(MergeArgs),
    /// Print a run's stage, kernel and operator tables.
    ///
    /// Example: llmprof show runs/20261121-235636-qwen2-h200
    Show(ShowArgs),
    /// Recompute a run's analysis (MFU/MBU, findings) with other token counts or peaks.
    ///
    /// Values given here replace those stored in the run; the bundle is rewritten in place.
    ///
    /// Example: llmprof analyze runs/20261121-235636-qwen2-h200 --decode-steps 2,16 --peak-tflops 780
    Analyze(AnalyzeArgs),
    /// Compare run B with run A, per measured stage, for TPOT, per kernel category and per top
    /// kernel, telling change from noise.
    ///
    /// Kernel and category rows compare the kernel time of one stage instance; they need
    /// per-instance kernel samples in both bundles (written by ingest since this llmprof; an
    /// older run gets a note instead). Kernels are the run's top 20 by total time that both
    /// runs ran, matched by full name. `--json` prints each row's key, the name a budget uses.
    ///
    /// Each figure shows both medians with their 95% confidence intervals (order statistics),
    /// the shift from A to B with its interval (Hodges–Lehmann with the Mann–Whitney interval;
    /// distribution-free) and a verdict: slower, faster, or no significant change. No verdict is
    /// drawn where the intervals cannot support it: at least 6 instances per stage are needed
    /// for a 95% interval of a median, and 3 against 3 never reach 95%.
    ///
    /// Example: llmprof diff runs/A runs/B --markdown >> "$GITHUB_STEP_SUMMARY"
    Diff(DiffArgs),
    /// Write a run for other tools: its tables as CSV, or its timeline as a Chrome trace.
    ///
    /// `--format csv DIR` writes stages.csv, kernels.csv, mem_ops.csv, operators.csv and
    /// ncu.csv. Columns that mean what an `nsys stats` report's columns mean carry its headers
    /// and number format: stages.csv starts with nvtx_sum's, kernels.csv with
    /// cuda_gpu_kern_sum's, mem_ops.csv with cuda_gpu_mem_time_sum's (times in ns; Avg, Med and
    /// StdDev with one decimal); llmprof's own columns (category, GPU busy, …) follow.
    ///
    /// `--format chrome -o FILE` writes the timeline in the PyTorch profiler's trace layout:
    /// stage ranges as user_annotation (host) and gpu_user_annotation (their GPU work), kernels,
    /// memcpys and memsets per stream with their category and Nsight Compute metrics in args,
    /// launch calls (cudaLaunchKernel, ...) with an arrow to the op each launched (runs ingested
    /// with this version keep them in launch_calls.json), NVML power, clock, utilization and
    /// memory as counters. Open it in ui.perfetto.dev, or with HolisticTraceAnalysis: put it
    /// in a directory as rank-0.json and call TraceAnalysis(trace_dir=DIR), with
    /// HTA_DISABLE_NS_ROUNDING=1 so HTA keeps the trace's ns.
    ///
    /// Examples:
    ///   llmprof export runs/20261123-190406-qwen2.5-0.5b-standard --format csv tables/
    ///   llmprof export runs/20261123-190406-qwen2.5-0.5b-standard --format chrome -o hta/rank-0.json
    #[command(verbatim_doc_comment)]
    Export(ExportArgs),
    /// Gate a run against a baseline: exit 1 when a budget is exceeded beyond noise.
    ///
    /// Prints the diff and each budget term's verdict either way, and appends both as Markdown
    /// to $GITHUB_STEP_SUMMARY when that is set. A term is exceeded only when the whole 95%
    /// interval of Δ% lies beyond its limit; with too few samples nothing is claimed (exit 0,
    /// and the term says so). Keys: STAGE.wall, prefill.ttft (the prefill wall), decode.tpot,
    /// STAGE.mfu, STAGE.category.CATEGORY (gemm, attention, moe/routing, elementwise,
    /// reduction/norm, communication, other: kernel time per instance) and STAGE.kernel.KERNEL
    /// (a top kernel's short name; `llmprof diff --json` prints every row's key). A malformed
    /// budget is an error naming the term (exit 2).
    ///
    /// Example:
    ///   llmprof check runs/new --against runs/main \
    ///       --budget "decode.tpot<=+5%,prefill.ttft<=+5%,prefill.mfu>=-5%,decode.category.gemm<=+3%"
    #[command(verbatim_doc_comment)]
    Check(CheckArgs),
    /// Build the static report site.
    #[command(subcommand)]
    Site(SiteCommand),
    /// Profile a target (or your own command) on this machine's NVIDIA GPU and ingest the result.
    ///
    /// Runs the workload once per pass: unprofiled (baseline), counting FLOPs, under the
    /// PyTorch profiler (light), under Nsight Systems (standard), under Nsight Compute (deep),
    /// with NVML power/clocks sampled every 20 ms throughout; then ingests, analyses and
    /// writes the run, with energy per stage and J/token of the baseline pass.
    /// --dry-run validates the target, the tools, the GPU and the disk, and prints the plan.
    ///
    /// Bring your own workload with --cmd: the command runs with `sh -c` as the baseline pass
    /// (timed, NVML sampled; --repeats runs), then under nsys (standard) and ncu (deep). Mark
    /// its stages with the `llmprof` Python package (installed with the wheel):
    ///
    ///   import llmprof
    ///   with llmprof.kineto_trace():            # profiles in the kineto pass only
    ///       with llmprof.stage("prefill"): ...  # NVTX + record_function + its window
    ///       with llmprof.stage("decode"): ...
    ///
    /// (or the llmprof-stages crate in Rust, or NVTX ranges of your own) and name them with
    /// --stages. Each pass sets LLMPROF_PASS (baseline, kineto, nsys, ncu), LLMPROF_OUT_DIR
    /// and LLMPROF_STAGES; the PyTorch-profiler pass sets LLMPROF_KINETO_OUT, where the
    /// workload writes its trace (llmprof.kineto_trace does). A workload that appends its stage
    /// windows to $LLMPROF_OUT_DIR/stages.jsonl (llmprof.stage and llmprof-stages do) gets
    /// baseline prefill/decode timings, energy per stage and the profilers' overhead per stage,
    /// else only whole-process walls, start-up included.
    ///
    /// A capture that recorded no profiler trace and no NVML sample (no GPU, no profiler)
    /// says so on its last line and exits 1, so scripts notice; --allow-empty accepts it.
    ///
    /// Ctrl-C stops the running pass (its process group gets SIGINT, then SIGKILL after 30 s
    /// or a second Ctrl-C), keeps what was captured, writes a partial run that says what is
    /// missing, and exits 130.
    ///
    /// Examples:
    ///   llmprof capture --target configs/qwen2.5-0.5b.toml --mode standard
    ///   llmprof capture --target configs/qwen2.5-0.5b.toml \
    ///       --set optimize.compile=reduce-overhead --set optimize.cache=static
    ///   llmprof capture --cmd "python my_infer.py --tokens 64" --stages prefill,decode --mode deep
    #[command(verbatim_doc_comment)]
    Capture(CaptureArgs),
}

#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// Target config (configs/*.toml): the model, the inputs and how to run it.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "cmd",
        conflicts_with = "cmd"
    )]
    pub target: Option<PathBuf>,
    /// Your own workload instead of a target: a command line run with `sh -c` once per pass.
    #[arg(long, value_name = "COMMAND")]
    pub cmd: Option<String>,
    /// With --cmd: the NVTX ranges that count as stages, comma-separated (other ranges stay in
    /// the timeline only); deep mode profiles kernels inside them. Default: every range.
    #[arg(long, value_name = "NAMES", value_delimiter = ',', requires = "cmd")]
    pub stages: Vec<String>,
    /// Interleaved baseline/Nsight Systems pass pairs for the overhead (1-4): with 3 the
    /// capture runs baseline, ..., nsys, baseline, nsys, baseline, nsys, each in a fresh
    /// process, pools their iterations, and reports the per-pair range.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=llmprof_capture::MAX_OVERHEAD_REPEATS))]
    pub overhead_repeats: u64,
    /// Seconds one pass may run before its process group is stopped (default: the target's
    /// [run] timeout_s; 3600 with --cmd).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: Option<u64>,
    /// How much to profile.
    #[arg(long, value_enum, default_value_t = ModeArg::Standard)]
    pub mode: ModeArg,
    /// Measured iterations per pass (default: the target's [run] repeats); with --cmd, how
    /// many times the baseline runs the command (default 1). `auto`: after the planned
    /// passes, add fresh baseline processes (raw/baseline-2/, ...; with --cmd, more runs)
    /// until each measured stage's 95% CI half-width is at most 2% of its median — prefill
    /// and decode per iteration for a target, the command's wall for --cmd — or until
    /// --repeats-cap is reached; a progress line per round, the outcome in the run.
    #[arg(long, value_name = "N|auto", value_parser = parse_repeats)]
    pub repeats: Option<RepeatsArg>,
    /// With --repeats auto: seconds the baseline passes may take in all, the first included
    /// (default 600); the run says when the cap stopped it short of the target.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub repeats_cap: Option<u64>,
    /// Leave the workload unpinned. By default every pass's workload (and the profiler that
    /// runs it) is pinned to the CPU cores local to the GPU, from NVML's CPU affinity of the
    /// device; the run records the CPUs (or why none), their model, governor and frequency.
    #[arg(long)]
    pub no_pin: bool,
    /// CUDA device index (recorded in the run).
    #[arg(long, value_name = "N", default_value_t = 0, conflicts_with = "nproc")]
    pub device: u32,
    /// Run the target with tensor parallelism over N GPUs, one process per GPU: every pass
    /// starts the driver under `python -m torch.distributed.run --standalone --nproc-per-node
    /// N`, which loads the model sharded with Hugging Face's tp_plan="auto" (from a
    /// random-weight checkpoint rank 0 saves first). Every rank marks the same stages; nsys
    /// traces all ranks; ncu profiles one (--rank). A rank that crashes stops the group.
    /// `--nproc 1` runs the same launcher on one GPU.
    #[arg(long, value_name = "N", requires = "target")]
    pub nproc: Option<u32>,
    /// With --nproc: the GPUs the ranks use, in rank order (sets CUDA_VISIBLE_DEVICES), e.g.
    /// --devices 0,1. Default: 0 to N-1. MIG-enabled and mismatched GPUs are reported.
    #[arg(long, value_name = "LIST", value_delimiter = ',', requires = "nproc")]
    pub devices: Vec<u32>,
    /// With --nproc: the rank Nsight Compute profiles in deep mode (default 0).
    #[arg(long, value_name = "R", requires = "nproc")]
    pub rank: Option<u32>,
    /// Directory that receives the run directory.
    #[arg(long, value_name = "DIR", default_value = "runs")]
    pub out: PathBuf,
    /// Override a key of the target file (repeatable; recorded in the run), so one target
    /// gives a before and an after run: --set optimize.compile=reduce-overhead
    /// --set optimize.cache=static. Values are TOML (5, true, "x"); a bare word is a string.
    #[arg(long = "set", value_name = "KEY=VALUE", requires = "target")]
    pub set: Vec<String>,
    /// How the Nsight Systems pass traces CUDA graphs: `node` records every kernel a graph
    /// launch runs (stages, kernels and the timeline see inside graphs); `graph` records one
    /// span per launch (lower overhead, no kernel detail).
    #[arg(long, value_enum, value_name = "LEVEL", default_value_t = GraphTraceArg::Node)]
    pub cuda_graph_trace: GraphTraceArg,
    /// With --cmd: the model's Hugging Face config.json (copied into the run), so analysis
    /// computes FLOPs, bytes, MFU and MBU for your workload.
    #[arg(long, value_name = "FILE")]
    pub model_config: Option<PathBuf>,
    /// With --cmd: token counts, metadata and peaks, as `llmprof ingest` takes them.
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Validate and print the plan; run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Exit 0 even when the capture recorded no profiler trace and no NVML sample (a run
    /// holding only the capture record and, with stage windows, baseline timings).
    #[arg(long)]
    pub allow_empty: bool,
}

/// `--repeats N` or `--repeats auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepeatsArg {
    Fixed(u64),
    Auto,
}

fn parse_repeats(s: &str) -> Result<RepeatsArg, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(RepeatsArg::Auto);
    }
    match s.parse::<u64>() {
        Ok(n) if n >= 1 => Ok(RepeatsArg::Fixed(n)),
        _ => Err(format!("`{s}` is neither a count of at least 1 nor `auto`")),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphTraceArg {
    Node,
    Graph,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    Light,
    Standard,
    Deep,
}

#[derive(Debug, Subcommand)]
pub enum SiteCommand {
    /// Turn run bundles into a static site: index, one page and report.md per run, compare.
    ///
    /// The site uses relative links only: publish the directory on GitHub Pages or an
    /// intranet server, or open index.html from disk. Rebuilds re-render only changed runs.
    ///
    /// Example: llmprof site build --runs runs --out site
    Build(SiteBuildArgs),
}

#[derive(Debug, Args)]
pub struct SiteBuildArgs {
    /// Directory of run directories (what `llmprof ingest --out` wrote).
    #[arg(long, value_name = "DIR", default_value = "runs")]
    pub runs: PathBuf,
    /// Output directory of the site.
    #[arg(long, value_name = "DIR", default_value = "site")]
    pub out: PathBuf,
    /// Publish timelines with more kernels than this in chunks by time: the timeline page then
    /// draws an overview of each stream and loads only the kernels a window shows, at most
    /// this many at once. Smaller timelines load whole.
    #[arg(long, value_name = "KERNELS", default_value_t = llmprof_site::CHUNK_ABOVE,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub chunk_above: u64,
}

/// Token counts and peaks: what analysis needs that the traces may not say.
#[derive(Debug, Args, Clone, Default)]
pub struct WorkloadArgs {
    /// `metadata.json` written by the workload: token counts, counted FLOPs per stage
    /// (FlopCounterMode), measured ceilings. Flags below win over it.
    #[arg(long, value_name = "FILE")]
    pub metadata: Option<PathBuf>,
    /// Sequences per batch.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_size: Option<u64>,
    /// Prompt (text) tokens per sequence.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub prompt_tokens: Option<u64>,
    /// Image tokens per sequence in the LM input (OCR / vision-language models).
    #[arg(long, value_name = "N")]
    pub image_tokens: Option<u64>,
    /// Decode steps: one number for every decode-stage instance, or a comma list with one
    /// entry per instance (e.g. `2,16` for a warm-up pass and a measured pass).
    #[arg(long, value_name = "N[,N...]", value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..))]
    pub decode_steps: Vec<u64>,
    /// Tokens per sequence whose logits prefill computes: 1 for `generate()`, the prompt length
    /// for a plain forward call. Default: 1.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub prefill_logits: Option<u64>,
    /// Tensor-/expert-parallel degree: the GPUs one model instance is split over (metadata
    /// key `parallel_degree`). MFU and MBU divide the model's FLOPs and bytes by this many
    /// GPUs' peak. Without it a multi-rank run counts every rank as running the whole model
    /// (data parallel) and says so.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub parallel_degree: Option<u64>,
    /// Peak dense TFLOP/s to compute MFU against, instead of the datasheet table.
    #[arg(long, value_name = "X", value_parser = positive_f64)]
    pub peak_tflops: Option<f64>,
    /// Peak memory bandwidth in GB/s to compute MBU against, instead of the datasheet table.
    #[arg(long, value_name = "X", value_parser = positive_f64)]
    pub peak_gbps: Option<f64>,
    /// Leading instances of each top-level stage that are warm-up, not measurement (for a
    /// workload that warms up under the range name it measures): they and the ranges inside
    /// them are left out of TTFT, TPOT and diffs. Ranges named warmup_* are left out anyway.
    /// For `analyze`, 0 goes back to names only; without the flag the run's choice stays.
    #[arg(long, value_name = "N")]
    pub warmup_instances: Option<u64>,
}

fn positive_f64(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a positive number")),
    }
}

impl WorkloadArgs {
    pub fn flags(&self) -> llmprof_ingest::WorkloadFlags {
        llmprof_ingest::WorkloadFlags {
            batch_size: self.batch_size,
            prompt_tokens: self.prompt_tokens,
            image_tokens: self.image_tokens,
            decode_steps: self.decode_steps.clone(),
            prefill_logits: self.prefill_logits,
            parallel_degree: self.parallel_degree,
        }
    }
}

#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// A run directory (runs/<run-id>).
    #[arg(value_name = "RUN_DIR")]
    pub run: PathBuf,
    /// The model's Hugging Face config.json, replacing the run's (for FLOPs, bytes, MFU, MBU).
    #[arg(long, value_name = "FILE")]
    pub model_config: Option<PathBuf>,
    #[command(flatten)]
    pub workload: WorkloadArgs,
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    /// Nsight Systems export: `nsys export --type sqlite` output (.sqlite, or .sqlite.gz). A
    /// .nsys-rep report is exported first when `nsys` is on PATH. Repeat it for one export per
    /// rank (paired in order with --kineto when both are repeated).
    #[arg(long, value_name = "FILE")]
    pub nsys: Vec<PathBuf>,
    /// PyTorch profiler chrome trace (`prof.export_chrome_trace`), .json or .json.gz. Repeat
    /// it, or give a directory of traces (*.json, *.json.gz), for one trace per rank.
    #[arg(long, value_name = "FILE|DIR")]
    pub kineto: Vec<PathBuf>,
    /// Nsight Compute CSV (`ncu --csv --page raw|details`, or `--print-details`/`--section`
    /// exports), or a directory of them. Repeatable.
    #[arg(long, value_name = "FILE|DIR")]
    pub ncu: Vec<PathBuf>,
    /// The model's Hugging Face config.json, stored in the bundle for FLOPs/bytes analysis.
    #[arg(long, value_name = "FILE")]
    pub model_config: Option<PathBuf>,
    /// A label for the run (shown in reports, used in the run id).
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Directory that receives the run directory. An Nsight Systems export's timeline is
    /// built here as the export is read, in temporary files that vanish once the run is
    /// written (so memory stays a small fraction of the export): up to about the export's
    /// size, on this directory's disk.
    #[arg(long, value_name = "DIR", default_value = "runs")]
    pub out: PathBuf,
    #[command(flatten)]
    pub ranks: RankArgs,
}

/// Flags of runs with several ranks.
#[derive(Debug, Args, Clone)]
pub struct RankArgs {
    /// Ranks ingested at once (default: every core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub jobs: Option<u32>,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Single-rank run directories (written by `llmprof ingest` or `llmprof capture`), one
    /// per rank.
    #[arg(value_name = "RUN_DIR", required = true, num_args = 2..)]
    pub runs: Vec<PathBuf>,
    /// A label for the merged run.
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// Tensor-/expert-parallel degree (see `llmprof ingest --help`); replaces what the
    /// per-rank runs recorded.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub parallel_degree: Option<u64>,
    /// Directory that receives the run directory.
    #[arg(long, value_name = "DIR", default_value = "runs")]
    pub out: PathBuf,
    #[command(flatten)]
    pub ranks: RankArgs,
}

/// What `llmprof ingest` does, validated.
#[derive(Debug)]
pub struct IngestConfig {
    pub request: llmprof_ingest::IngestRequest,
    /// One request per rank when several traces of one kind were given.
    pub ranks: Vec<llmprof_ingest::IngestRequest>,
    pub rank_args: RankArgs,
    pub out: PathBuf,
}

impl IngestArgs {
    /// The request, and one per rank when --kineto or --nsys name several traces.
    pub fn into_config(self) -> anyhow::Result<IngestConfig> {
        let kineto = expand_trace_dirs(&self.kineto)?;
        let nsys = self.nsys.clone();
        let n = kineto.len().max(nsys.len());
        if kineto.len() > 1 && nsys.len() > 1 && kineto.len() != nsys.len() {
            anyhow::bail!(
                "{} --kineto traces but {} --nsys exports: with one of each per rank give as \
                 many of both, in the same rank order",
                kineto.len(),
                nsys.len()
            );
        }
        let base = llmprof_ingest::IngestRequest {
            nsys: nsys.first().cloned(),
            nsys_process: None,
            kineto: kineto.first().cloned(),
            ncu: self.ncu.clone(),
            model_config: self.model_config,
            metadata: self.workload.metadata.clone(),
            label: self.label.filter(|l| !l.trim().is_empty()),
            workload: self.workload.flags(),
            peak_tflops: self.workload.peak_tflops,
            peak_gbps: self.workload.peak_gbps,
            stage_names: Vec::new(),
            warmup_instances: self.workload.warmup_instances,
            relative_to: None,
            spill_dir: Some(self.out.clone()),
        };
        let ranks = if n > 1 {
            (0..n)
                .map(|i| llmprof_ingest::IngestRequest {
                    nsys: nsys.get(i).cloned(),
                    kineto: kineto.get(i).cloned(),
                    // Nsight Compute profiles one rank: joined to the first input given.
                    ncu: if i == 0 { self.ncu.clone() } else { Vec::new() },
                    ..base.clone()
                })
                .collect()
        } else {
            Vec::new()
        };
        Ok(IngestConfig {
            request: base,
            ranks,
            rank_args: self.ranks,
            out: self.out,
        })
    }
}

/// `--kineto` paths with each directory replaced by the traces in it (`*.json`, `*.json.gz`,
/// sorted by name).
fn expand_trace_dirs(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if !p.is_dir() {
            out.push(p.clone());
            continue;
        }
        let read = std::fs::read_dir(p)
            .map_err(|e| anyhow::anyhow!("trace directory `{}`: cannot read ({e})", p.display()))?;
        let mut found: Vec<PathBuf> = read
            .flatten()
            .map(|e| e.path())
            .filter(|f| {
                let name = f.file_name().map(|n| n.to_string_lossy().to_string());
                f.is_file() && name.is_some_and(|n| n.ends_with(".json") || n.ends_with(".json.gz"))
            })
            .collect();
        if found.is_empty() {
            anyhow::bail!(
                "trace directory `{}`: holds no PyTorch profiler trace (*.json, *.json.gz)",
                p.display()
            );
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// A run directory (runs/<run-id>) or its bundle.json.
    #[arg(value_name = "RUN_DIR")]
    pub run: PathBuf,
    /// Print the bundle's summary as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Rows in the kernel and operator tables.
    #[arg(long, default_value_t = 15, value_name = "N")]
    pub top: usize,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The run (a run directory or its bundle.json).
    #[arg(value_name = "RUN")]
    pub run: PathBuf,
    /// What to write.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Where: the directory of the CSV files (made if missing; files of the same names are
    /// replaced), or the Chrome trace's file (default `<run-id>.trace.json` here).
    #[arg(value_name = "OUT")]
    pub out: Option<PathBuf>,
    /// The same as OUT.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "OUT",
        conflicts_with = "out"
    )]
    pub output: Option<PathBuf>,
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// One CSV file per table, for spreadsheets.
    Csv,
    /// The timeline as a Chrome trace in the PyTorch profiler's layout (one JSON file): opens
    /// in Perfetto UI (ui.perfetto.dev), chrome://tracing and HolisticTraceAnalysis.
    Chrome,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The baseline run (a run directory or its bundle.json).
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The run compared with it.
    #[arg(value_name = "B")]
    pub b: PathBuf,
    /// Print the diff as JSON.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print the diff as a Markdown table (a pull-request comment).
    #[arg(long)]
    pub markdown: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The run under test (a run directory or its bundle.json).
    #[arg(value_name = "RUN")]
    pub run: PathBuf,
    /// The baseline run.
    #[arg(long, value_name = "BASE")]
    pub against: PathBuf,
    /// Comma-separated terms: KEY<=+N% or KEY>=-N%, KEY as `llmprof diff --json` prints it
    /// (decode.tpot, prefill.ttft, STAGE.wall, STAGE.mfu, STAGE.category.gemm,
    /// STAGE.kernel.NAME).
    #[arg(long, value_name = "TERMS")]
    pub budget: String,
}

/// What `llmprof show` does, validated.
#[derive(Debug)]
pub struct ShowConfig {
    pub run: PathBuf,
    pub json: bool,
    pub top: usize,
}

impl ShowArgs {
    pub fn into_config(self) -> ShowConfig {
        ShowConfig {
            run: self.run,
            json: self.json,
            top: self.top.max(1),
        }
    }
}
