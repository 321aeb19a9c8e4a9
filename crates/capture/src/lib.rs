//! `llmprof capture`: run a target's workload on an NVIDIA GPU once per pass — unprofiled
//! (baseline), under the PyTorch profiler, under Nsight Systems, under Nsight Compute — with
//! NVML sampled throughout, and collect every artifact under `raw/` with a record of how it was
//! made.
//!
//! This is the only crate that spawns processes (its `process` module starts every child; the
//! `.nsys-rep` export `llmprof ingest` needs is [`nsys_export`]). [`run`] produces
//! artifacts and a [`llmprof_bundle::Capture`] record; [`assemble`] has ingest turn them into
//! a bundle, and [`save`] writes the run through `llmprof-store`.

mod cmd_timings;
pub mod cpu;
pub mod energy;
mod memory;
pub mod nsys_export;
pub mod nvml;
mod passes;
mod process;
mod rank_run;
pub mod ranks;
pub mod resolution;
mod save;
pub mod target;
mod timings;
pub mod tools;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

pub use passes::{run, CaptureOutput, RankOutput};
pub use save::{assemble, save, summary_lines, CaptureRun, Saved};
pub use target::{Override, Target};

/// The baseline timings a run's `raw/` directory holds, every iteration included as a sample;
/// `None` when it holds no baseline timing file. `llmprof analyze` fills bundles written before
/// the samples were kept from it.
pub fn baseline_timings(raw: &Path) -> Option<llmprof_bundle::StageTimings> {
    timings::read_all(raw).baseline
}

/// Why a capture could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("target `{}`: {message}", path.display())]
    Target { path: PathBuf, message: String },
    #[error("{0}")]
    Environment(String),
    #[error("capture directory `{}`: cannot write", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The filesystem is full (ENOSPC) or the quota is spent.
    #[error("{}", disk_full_message(path, keep.as_deref()))]
    DiskFull {
        path: PathBuf,
        keep: Option<PathBuf>,
    },
    #[error("every pass failed; nothing was captured. {0}")]
    NothingCaptured(String),
    #[error(
        "the capture's artifacts could not be ingested; they are kept in `{}`",
        keep.display()
    )]
    Ingest {
        keep: PathBuf,
        #[source]
        source: llmprof_ingest::IngestError,
    },
    #[error(
        "the ranks' runs could not be merged into one; the capture's artifacts are kept in `{}`",
        keep.display()
    )]
    Merge {
        keep: PathBuf,
        #[source]
        source: Box<llmprof_ingest::merge::MergeError>,
    },
    #[error(transparent)]
    Store(#[from] llmprof_store::StoreError),
    #[error("moving raw artifacts into `{}`", dir.display())]
    MoveRaw {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// ENOSPC and EDQUOT on Linux: what a full disk or a spent quota returns.
const ENOSPC: i32 = 28;
const EDQUOT: i32 = 122;

/// Whether `e` says the disk (or the user's quota) is full.
pub fn is_disk_full(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::StorageFull || matches!(e.raw_os_error(), Some(ENOSPC | EDQUOT))
}

/// The one-line message for a full disk: the path, the free space on its filesystem, and where
/// the partial artifacts are.
pub fn disk_full_message(path: &Path, keep: Option<&Path>) -> String {
    let free = free_disk(path).map_or("unknown space".to_string(), |b| {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    });
    let mut s = format!(
        "disk full writing `{}` ({free} free on its filesystem)",
        path.display()
    );
    if let Some(k) = keep {
        s.push_str(&format!(
            "; partial artifacts are kept in `{}`",
            k.display()
        ));
    }
    s.push_str("; free space or choose another --out");
    s
}

/// Ctrl-C (or SIGTERM/SIGHUP) as the capture sees it: the CLI's signal handler calls
/// [`Interrupt::trigger`]; the running pass is stopped (SIGINT to its process group, then
/// SIGKILL after a grace period or at a second trigger) and no further pass starts.
#[derive(Debug, Clone, Default)]
pub struct Interrupt(Arc<AtomicU32>);

impl Interrupt {
    pub fn new() -> Self {
        Self::default()
    }
    /// Records one more interrupt request.
    pub fn trigger(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    /// How many times it was triggered.
    pub fn count(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }
    pub fn is_set(&self) -> bool {
        self.count() > 0
    }
}

/// What runs in each pass.
#[derive(Debug, Clone)]
pub enum WorkloadSpec {
    /// A target config (`configs/*.toml`) run by the embedded driver.
    Target(PathBuf),
    /// The user's own command (`--cmd`), run with `sh -c`.
    Command(CommandWorkload),
}

/// A `--cmd` workload.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandWorkload {
    /// The command line, run with `sh -c` (so quoting, pipes and variables work as typed).
    pub command: String,
    /// NVTX ranges that count as stages (`--stages`); empty: every range.
    pub stages: Vec<String>,
    /// The run's name: the script or program the command runs.
    pub name: String,
}

impl CommandWorkload {
    pub fn new(command: &str, stages: Vec<String>) -> Result<Self, CaptureError> {
        let command = command.trim().to_string();
        if command.is_empty() {
            return Err(CaptureError::Environment("--cmd is empty".into()));
        }
        let name = command_name(&command);
        Ok(CommandWorkload {
            command,
            stages,
            name,
        })
    }

    /// The program the command starts (after `VAR=value` assignments), for the dry run's check.
    pub fn program(&self) -> Option<&str> {
        self.command
            .split_whitespace()
            .find(|w| !is_assignment(w))
            .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
    }
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(k, _)| {
        !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// `python my_infer.py --x` → `my_infer`; `./bench --n 3` → `bench`: the first word naming a
/// script, else the first program that is not an interpreter or wrapper, without directory and
/// extension.
fn command_name(command: &str) -> String {
    const SCRIPT: &[&str] = &[".py", ".sh", ".bash", ".pl", ".rb", ".js", ".lua"];
    const WRAPPERS: &[&str] = &[
        "sh",
        "bash",
        "zsh",
        "env",
        "exec",
        "nice",
        "timeout",
        "python",
        "python3",
        "uv",
        "run",
        "poetry",
        "cargo",
        "torchrun",
        "accelerate",
        "launch",
        "if",
        "for",
        "while",
        "then",
        "do",
        "[",
        "test",
        "trap",
        "time",
        "cd",
    ];
    let words: Vec<&str> = command
        .split_whitespace()
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .filter(|w| !w.is_empty() && !is_assignment(w) && !w.starts_with('-'))
        .collect();
    let base = |w: &str| -> String {
        Path::new(w)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let pick = words
        .iter()
        .find(|w| SCRIPT.iter().any(|x| w.ends_with(x)))
        .or_else(|| {
            words.iter().find(|w| {
                !w.chars().all(|c| c.is_ascii_digit() || c == '.')
                    && !WRAPPERS.contains(&base(w).as_str())
            })
        })
        .or(words.first())
        .map(|w| base(w))
        .unwrap_or_default();
    let clean: String = pick
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if clean.is_empty() {
        "cmd".into()
    } else {
        clean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_named_after_its_script_or_program() {
        for (cmd, name) in [
            ("python my_infer.py --tokens 64", "my_infer"),
            (
                "CUDA_VISIBLE_DEVICES=1 python3 -u /x/bench/run_llm.py",
                "run_llm",
            ),
            ("./target/release/examples/decode --n 3", "decode"),
            ("sh -c 'sleep 0.3'", "sleep"),
            ("uv run serve", "serve"),
        ] {
            assert_eq!(
                CommandWorkload::new(cmd, vec![]).unwrap().name,
                name,
                "{cmd}"
            );
        }
        assert!(CommandWorkload::new("  ", vec![]).is_err());
        let c = CommandWorkload::new("A=1 B=2 python x.py", vec![]).unwrap();
        assert_eq!(c.program(), Some("python"));
    }
}

/// How much to profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Baseline, counted FLOPs, and one PyTorch-profiler pass; NVML throughout.
    Light,
    /// Light plus an Nsight Systems pass.
    Standard,
    /// Standard plus Nsight Compute on decode kernels, and (for targets) a calibrate pass:
    /// one large GEMM and one device copy give measured ceilings.
    Deep,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Light => "light",
            Mode::Standard => "standard",
            Mode::Deep => "deep",
        }
    }
}

/// A capture request, validated.
#[derive(Debug, Clone)]
pub struct CaptureOptions {
    pub workload: WorkloadSpec,
    pub mode: Mode,
    /// Overrides the target's `[run] repeats` (a `--cmd` workload runs once per pass unless
    /// given).
    pub repeats: Option<u64>,
    /// `--repeats auto`: more fresh baseline processes until the confidence intervals are
    /// narrow enough or the cap is reached; `None`: the baseline runs as planned.
    pub auto_repeats: Option<AutoRule>,
    /// Pin every pass's workload to the CPUs local to the GPU (not `--no-pin`).
    pub pin: bool,
    pub device: u32,
    /// `--nproc N`: the target under torchrun with tensor parallelism (then `device` is the
    /// first rank's GPU).
    pub ranks: Option<ranks::Ranks>,
    /// What analysis needs of a `--cmd` workload that its traces do not say.
    pub cmd_analysis: CmdAnalysis,
    /// Seconds one pass may run (default: the target's `[run] timeout_s`, 3600 for `--cmd`).
    pub timeout_s: Option<u64>,
    /// Interleaved baseline/nsys pass pairs for the overhead (1 to [`MAX_OVERHEAD_REPEATS`]).
    pub overhead_repeats: u64,
    /// Where the capture's working directory is made (the runs directory).
    pub out: PathBuf,
    /// `--set KEY=VALUE` overrides of the target file.
    pub overrides: Vec<Override>,
    /// How the Nsight Systems pass traces CUDA graphs.
    pub cuda_graph_trace: GraphTraceLevel,
}

/// A `--cmd` workload's model config, metadata, token counts and peaks (`--model-config`,
/// `--metadata`, `--prompt-tokens`, …), so its run gets MFU, MBU and the findings. The files
/// are copied into the run's `raw/` (`config.json`, `metadata.json`), so it stays whole.
#[derive(Debug, Clone, Default)]
pub struct CmdAnalysis {
    pub model_config: Option<PathBuf>,
    pub metadata: Option<PathBuf>,
    pub workload: llmprof_ingest::WorkloadFlags,
    pub peak_tflops: Option<f64>,
    pub peak_gbps: Option<f64>,
    /// `--warmup-instances N`: leading instances of each stage that are warm-up.
    pub warmup_instances: Option<u64>,
}

impl CmdAnalysis {
    /// Whether any of it was given.
    pub fn is_given(&self) -> bool {
        let w = &self.workload;
        self.model_config.is_some()
            || self.metadata.is_some()
            || self.peak_tflops.is_some()
            || self.peak_gbps.is_some()
            || self.warmup_instances.is_some()
            || w.batch_size.is_some()
            || w.prompt_tokens.is_some()
            || w.image_tokens.is_some()
            || !w.decode_steps.is_empty()
            || w.prefill_logits.is_some()
    }
}

/// The stopping rule of `--repeats auto`: stop once every measured stage's 95% confidence
/// interval reaches within `target_pct` of its median on either side, or once the baseline
/// passes have taken `cap_s` seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutoRule {
    pub target_pct: f64,
    pub cap_s: u64,
}

/// The half-width `--repeats auto` aims for, percent of the median.
pub const AUTO_TARGET_PCT: f64 = 2.0;
/// Seconds of baseline passes `--repeats auto` may spend unless `--repeats-cap` says otherwise.
pub const AUTO_CAP_S: u64 = 600;

impl Default for AutoRule {
    fn default() -> Self {
        AutoRule {
            target_pct: AUTO_TARGET_PCT,
            cap_s: AUTO_CAP_S,
        }
    }
}

/// `nsys profile --cuda-graph-trace`: `node` records every kernel a graph launch runs (the
/// capture's default, so stages, kernels and the timeline see inside graphs); `graph` records
/// one span per launch, with less overhead and no kernel detail.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GraphTraceLevel {
    #[default]
    Node,
    Graph,
}

impl GraphTraceLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            GraphTraceLevel::Node => "node",
            GraphTraceLevel::Graph => "graph",
        }
    }
}

/// What a capture will do, before it does it (`--dry-run` prints this).
#[derive(Debug, Clone)]
pub struct Plan {
    /// The target config, or `None` for a `--cmd` workload.
    pub target: Option<Target>,
    /// The `--cmd` workload, or `None` for a target.
    pub command: Option<CommandWorkload>,
    pub opts: CaptureOptions,
    /// The target's interpreter; `None` for a `--cmd` workload (the command is the user's).
    pub python: Option<Result<tools::Tool, String>>,
    pub nsys: Option<PathBuf>,
    pub ncu: Option<PathBuf>,
    pub nvml: Result<llmprof_bundle::EnvSnapshot, String>,
    /// Where the workload runs: pinned to the GPU's local CPUs or not, and their facts.
    pub cpu: cpu::CpuPlan,
    pub free_disk_bytes: Option<u64>,
    pub passes: Vec<&'static str>,
    /// Problems that stop passes from running, and how to fix them.
    pub problems: Vec<String>,
}

/// Pass names of the extra interleaved pairs (`--overhead-repeats`): each pair's passes write
/// to their own `raw/<name>/`.
const REPEAT_PAIRS: [(&str, &str); 3] = [
    ("baseline-2", "nsys-2"),
    ("baseline-3", "nsys-3"),
    ("baseline-4", "nsys-4"),
];
/// The most interleaved baseline/nsys pairs a capture runs.
pub const MAX_OVERHEAD_REPEATS: u64 = REPEAT_PAIRS.len() as u64 + 1;

/// What a pass does: `baseline-2` is a baseline, `nsys-3` an nsys pass.
pub(crate) fn pass_kind(pass: &str) -> &str {
    pass.split('-').next().unwrap_or(pass)
}

/// Disk a standard capture of a small model needs (traces, exports, bundles), with margin.
const DISK_NEEDED: u64 = 2 << 30;

/// Validates the target (or the command), looks for the tools, the GPU and disk space, and
/// lists the passes.
pub fn plan(opts: CaptureOptions) -> Result<Plan, CaptureError> {
    let (target, command) = match &opts.workload {
        WorkloadSpec::Target(_) if opts.cmd_analysis.is_given() => {
            return Err(CaptureError::Environment(
                "--model-config, --metadata, the token flags and the peaks apply to --cmd: a \
                 target's driver records them (change a target's inputs with --set \
                 inputs.batch_size=8)"
                    .into(),
            ))
        }
        WorkloadSpec::Target(path) => (Some(Target::load_with(path, &opts.overrides)?), None),
        WorkloadSpec::Command(_) if !opts.overrides.is_empty() => {
            return Err(CaptureError::Environment(
                "--set overrides keys of a target file; it does not apply to --cmd".into(),
            ))
        }
        WorkloadSpec::Command(_) if opts.ranks.is_some() => {
            return Err(CaptureError::Environment(
                "--nproc runs a target under torchrun; a --cmd workload launches its own ranks \
                 (run `torchrun …` as the command)"
                    .into(),
            ))
        }
        WorkloadSpec::Command(c) => (None, Some(c.clone())),
    };
    for (what, path) in [
        ("--model-config", &opts.cmd_analysis.model_config),
        ("--metadata", &opts.cmd_analysis.metadata),
    ] {
        if let Some(p) = path.as_ref().filter(|p| !p.is_file()) {
            return Err(CaptureError::Environment(format!(
                "{what} `{}` is not a file",
                p.display()
            )));
        }
    }
    let python = target.as_ref().map(|t| tools::python(&t.run.python));
    let nsys = tools::find("nsys", "NSYS");
    let ncu = tools::find("ncu", "NCU");
    let nvml = nvml::snapshot(opts.device);
    let cpu = cpu::CpuPlan::for_device(opts.device, opts.pin);
    let free_disk_bytes = free_disk(&opts.out);
    let mut passes = if target.is_some() {
        vec!["baseline", "flops", "kineto"]
    } else {
        vec!["baseline", "kineto"]
    };
    let mut problems = Vec::new();
    match &python {
        Some(Err(e)) => problems.push(format!(
            "{e}: set [run] python in the target to an interpreter with torch and transformers"
        )),
        Some(Ok(t)) if t.version.ends_with("False") => problems.push(
            "torch reports no CUDA device: capture needs an NVIDIA GPU (use `llmprof ingest` \
             on existing captures, or run where `nvidia-smi` works)"
                .into(),
        ),
        _ => {}
    }
    if let Some(p) = command.as_ref().and_then(|c| c.program()) {
        if !program_exists(p) {
            problems.push(format!(
                "--cmd runs `{p}`, which is neither a file nor on PATH: check the command"
            ));
        }
    }
    if matches!(opts.mode, Mode::Standard | Mode::Deep) {
        passes.push("nsys");
        // Further interleaved pairs for the overhead: baseline, nsys, baseline, nsys, ...
        let extra = opts.overhead_repeats.clamp(1, MAX_OVERHEAD_REPEATS) - 1;
        for (b, n) in REPEAT_PAIRS.iter().take(extra as usize) {
            passes.push(b);
            passes.push(n);
        }
        if nsys.is_none() {
            problems.push(
                "Nsight Systems (`nsys`) not found on PATH or under /opt/nvidia: install it, set \
                 NSYS=/path/to/nsys, or use --mode light"
                    .into(),
            );
        }
    }
    if opts.mode == Mode::Deep {
        passes.push("ncu");
        if target.is_some() {
            // One large GEMM and one device copy: measured ceilings for analysis.
            passes.push("calibrate");
        }
        if ncu.is_none() {
            problems.push(
                "Nsight Compute (`ncu`) not found: install it, set NCU=/path/to/ncu, or use \
                 --mode standard"
                    .into(),
            );
        }
    }
    if let (Some(r), Ok(_)) = (&opts.ranks, &nvml) {
        problems.extend(ranks::device_problems(&r.devices, &nvml::gpus()));
    }
    if let Err(e) = &nvml {
        problems.push(format!(
            "{e}: no power/clock samples (NVML needs the NVIDIA driver's libnvidia-ml.so.1)"
        ));
    }
    if free_disk_bytes.is_some_and(|f| f < DISK_NEEDED) {
        problems.push(format!(
            "only {:.1} GiB free under `{}`; a capture needs about {} GiB",
            free_disk_bytes.unwrap_or(0) as f64 / (1u64 << 30) as f64,
            opts.out.display(),
            DISK_NEEDED >> 30
        ));
    }
    Ok(Plan {
        target,
        command,
        opts,
        python,
        nsys,
        ncu,
        nvml,
        cpu,
        free_disk_bytes,
        passes,
        problems,
    })
}

/// Whether `sh -c` can start `program`: a path to a file, a shell builtin, or a name on PATH.
fn program_exists(program: &str) -> bool {
    const BUILTINS: &[&str] = &[
        "cd", "exec", "true", "false", "echo", "exit", "set", "export", ".", ":", "test", "[",
        "time", "(", "{", "!", "if", "for", "while", "until", "case", "trap", "wait", "ulimit",
    ];
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    BUILTINS.contains(&program)
        || std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

impl Plan {
    /// The run's name: the target's, or the `--cmd` workload's.
    pub fn name(&self) -> &str {
        match (&self.target, &self.command) {
            (Some(t), _) => &t.name,
            (None, Some(c)) => &c.name,
            (None, None) => "capture",
        }
    }

    /// The run's label: `qwen2.5-0.5b standard`, with the compile mode when the decode step is
    /// compiled (`qwen2.5-0.5b standard reduce-overhead`) or `static-cache` when only the cache
    /// changed, so a before run and an after run of one target are told apart.
    pub fn label(&self) -> String {
        let mut label = format!("{} {}", self.name(), self.opts.mode.as_str());
        if let Some(t) = &self.target {
            use target::{CompileMode, KvCache};
            match (t.optimize.compile, t.optimize.cache) {
                (CompileMode::None, KvCache::Static) => label.push_str(" static-cache"),
                (CompileMode::None, KvCache::Dynamic) => {}
                (mode, _) => {
                    label.push(' ');
                    label.push_str(mode.as_str());
                }
            }
        }
        label
    }

    /// The problem that makes a capture pointless here, if any: an interpreter that cannot
    /// run the driver, no CUDA device, or a `--cmd` program that does not exist. Other
    /// problems (a missing profiler, NVML, disk space) leave passes to run.
    pub fn blocking_problem(&self) -> Option<&str> {
        if let Some(Err(e)) = &self.python {
            return Some(e);
        }
        self.problems
            .iter()
            .find(|p| p.contains("no CUDA device") || p.contains("neither a file nor on PATH"))
            .map(String::as_str)
    }

    /// The plan in words, for `--dry-run`.
    pub fn describe(&self) -> String {
        let Some(t) = &self.target else {
            return self.describe_command();
        };
        let path = match &self.opts.workload {
            WorkloadSpec::Target(p) => p.display().to_string(),
            WorkloadSpec::Command(_) => String::new(),
        };
        let mut s = format!(
            "target   {} ({})\nmodel    {}\ninputs   batch {}, prompt {} tokens, {} new tokens; {} warm-up + {} measured iterations per process\nmode     {} on GPU {}\n",
            t.name,
            path,
            match (&t.model.path, &t.model.config) {
                (Some(p), _) => format!("checkpoint {}", p.display()),
                (None, Some(c)) => format!(
                    "{} from config, random weights, {}",
                    c.get("model_type").and_then(|v| v.as_str()).unwrap_or("?"),
                    t.model.dtype
                ),
                _ => "?".into(),
            },
            t.inputs.batch_size,
            t.inputs.prompt_tokens,
            t.inputs.max_new_tokens,
            t.run.warmup,
            self.opts.repeats.unwrap_or(t.run.repeats),
            self.opts.mode.as_str(),
            self.opts.device,
        );
        if let Some(r) = &self.opts.ranks {
            s.push_str(&r.describe());
        }
        if let Some(o) = t.optimize.describe() {
            s.push_str(&format!(
                "optimize {o}: the decode step is compiled and captured before the warm-up\n"
            ));
        }
        if !self.opts.overrides.is_empty() {
            let set: Vec<&str> = self
                .opts
                .overrides
                .iter()
                .map(|o| o.text.as_str())
                .collect();
            s.push_str(&format!("set      {}\n", set.join(", ")));
        }
        self.describe_repeats(&mut s, "fresh baseline processes");
        s.push_str(&format!(
            "python   {}\n",
            match &self.python {
                Some(Ok(p)) => format!("{} ({})", p.path.display(), p.version),
                Some(Err(e)) => format!("unusable: {e}"),
                None => "not used".into(),
            }
        ));
        self.describe_tools(&mut s);
        s
    }

    /// The plan of a `--cmd` workload.
    fn describe_command(&self) -> String {
        let Some(c) = &self.command else {
            return String::new();
        };
        let mut s = format!(
            "command  sh -c {:?}\nname     {}\nstages   {}\nmode     {} on GPU {}; {} run(s) per pass\n",
            c.command,
            c.name,
            if c.stages.is_empty() {
                "every NVTX range the workload opens".to_string()
            } else {
                c.stages.join(", ")
            },
            self.opts.mode.as_str(),
            self.opts.device,
            self.opts.repeats.unwrap_or(1),
        );
        self.describe_repeats(&mut s, "more baseline runs");
        s.push_str(
            "env      LLMPROF_PASS (baseline|kineto|nsys|ncu), LLMPROF_OUT_DIR, LLMPROF_STAGES; \
             LLMPROF_KINETO_OUT in the kineto pass\n",
        );
        self.describe_tools(&mut s);
        s
    }

    /// The `--repeats auto` line, when it is on.
    fn describe_repeats(&self, s: &mut String, what: &str) {
        if let Some(rule) = self.opts.auto_repeats {
            s.push_str(&format!(
                "repeats  auto: {what} after the planned passes until each measured stage's 95% \
                 CI half-width is at most {}% of its median, or the baseline passes have taken \
                 {} s (--repeats-cap)\n",
                llmprof_report::fmt::pct(rule.target_pct),
                rule.cap_s
            ));
        }
    }

    fn describe_tools(&self, s: &mut String) {
        let tool = |p: &Option<PathBuf>| {
            p.as_ref()
                .map_or("not found".to_string(), |p| p.display().to_string())
        };
        s.push_str(&format!(
            "nsys     {} (CUDA graphs traced at {} level)\nncu      {}\n",
            tool(&self.nsys),
            self.opts.cuda_graph_trace.as_str(),
            tool(&self.ncu)
        ));
        s.push_str(&format!(
            "nvml     {}\n",
            match &self.nvml {
                Ok(e) => format!(
                    "{} (driver {}, power limit {} W, MIG {})",
                    e.gpu.as_deref().unwrap_or("?"),
                    e.driver.as_deref().unwrap_or("?"),
                    e.power_limit_w.map_or("?".into(), |w| format!("{w:.0}")),
                    e.mig_mode.as_deref().unwrap_or("n/a")
                ),
                Err(e) => e.clone(),
            }
        ));
        s.push_str(&format!("cpu      {}\n", self.cpu.describe()));
        if let Some(f) = self.free_disk_bytes {
            s.push_str(&format!(
                "disk     {:.1} GiB free\n",
                f as f64 / (1u64 << 30) as f64
            ));
        }
        s.push_str(&format!("passes   {}\n", self.passes.join(" → ")));
        for p in &self.problems {
            s.push_str(&format!("problem  {p}\n"));
        }
    }
}

/// Free bytes on the filesystem of `dir` (or its nearest existing parent), from `df`.
pub fn free_disk(dir: &Path) -> Option<u64> {
    let mut d = dir.to_path_buf();
    while !d.exists() {
        d = d.parent()?.to_path_buf();
    }
    let o = std::process::Command::new("df")
        .args(["-Pk"])
        .arg(&d)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text.lines().nth(1)?;
    let kb: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
    Some(kb * 1024)
}
