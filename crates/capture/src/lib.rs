//! `llmprof capture`: run a target's workload on an NVIDIA GPU once per pass — unprofiled
//! (baseline), under the PyTorch profiler, under Nsight Systems, under Nsight Compute — with
//! NVML sampled throughout, and collect every artifact under `raw/` with a record of how it was
//! made.
//!
//! This is the only crate besides the CLI that spawns processes. It produces artifacts and a
//! [`llmprof_bundle::Capture`] record; turning the artifacts into a bundle is ingest's job, and
//! the CLI chains the two.

pub mod nvml;
mod passes;
pub mod retention;
pub mod target;
mod timings;
pub mod tools;

use std::path::{Path, PathBuf};

pub use passes::{run, CaptureOutput};
pub use target::Target;

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
    #[error("every pass failed; nothing was captured. {0}")]
    NothingCaptured(String),
}

/// How much to profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Baseline, counted FLOPs, and one PyTorch-profiler pass; NVML throughout.
    Light,
    /// Light plus an Nsight Systems pass.
    Standard,
    /// Standard plus Nsight Compute on decode kernels.
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
    pub target_path: PathBuf,
    pub mode: Mode,
    /// Overrides the target's `[run] repeats`.
    pub repeats: Option<u64>,
    pub device: u32,
    /// Where the capture's working directory is made (the runs directory).
    pub out: PathBuf,
}

/// What a capture will do, before it does it (`--dry-run` prints this).
#[derive(Debug, Clone)]
pub struct Plan {
    pub target: Target,
    pub opts: CaptureOptions,
    pub python: Result<tools::Tool, String>,
    pub nsys: Option<PathBuf>,
    pub ncu: Option<PathBuf>,
    pub nvml: Result<llmprof_bundle::EnvSnapshot, String>,
    pub free_disk_bytes: Option<u64>,
    pub passes: Vec<&'static str>,
    /// Problems that stop passes from running, and how to fix them.
    pub problems: Vec<String>,
}

/// Disk a standard capture of a small model needs (traces, exports, bundles), with margin.
const DISK_NEEDED: u64 = 2 << 30;

/// Validates the target, looks for the tools, the GPU and disk space, and lists the passes.
pub fn plan(opts: CaptureOptions) -> Result<Plan, CaptureError> {
    let target = Target::load(&opts.target_path)?;
    let python = tools::python(&target.run.python);
    let nsys = tools::find("nsys", "NSYS");
    let ncu = tools::find("ncu", "NCU");
    let nvml = nvml::snapshot(opts.device);
    let free_disk_bytes = free_disk(&opts.out);
    let mut passes = vec!["baseline", "flops", "kineto"];
    let mut problems = Vec::new();
    if let Err(e) = &python {
        problems.push(format!(
            "{e}: set [run] python in the target to an interpreter with torch and transformers"
        ));
    } else if let Ok(t) = &python {
        if t.version.ends_with("False") {
            problems.push(
                "torch reports no CUDA device: capture needs an NVIDIA GPU (use `llmprof ingest` \
                 on existing captures, or run where `nvidia-smi` works)"
                    .into(),
            );
        }
    }
    if matches!(opts.mode, Mode::Standard | Mode::Deep) {
        passes.push("nsys");
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
        if ncu.is_none() {
            problems.push(
                "Nsight Compute (`ncu`) not found: install it, set NCU=/path/to/ncu, or use \
                 --mode standard"
                    .into(),
            );
        }
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
        opts,
        python,
        nsys,
        ncu,
        nvml,
        free_disk_bytes,
        passes,
        problems,
    })
}

impl Plan {
    /// The plan in words, for `--dry-run`.
    pub fn describe(&self) -> String {
        let t = &self.target;
        let mut s = format!(
            "target   {} ({})\nmodel    {}\ninputs   batch {}, prompt {} tokens, {} new tokens; {} warm-up + {} measured iterations\nmode     {} on GPU {}\n",
            t.name,
            self.opts.target_path.display(),
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
        s.push_str(&format!(
            "python   {}\n",
            match &self.python {
                Ok(p) => format!("{} ({})", p.path.display(), p.version),
                Err(e) => format!("unusable: {e}"),
            }
        ));
        let tool = |p: &Option<PathBuf>| {
            p.as_ref()
                .map_or("not found".to_string(), |p| p.display().to_string())
        };
        s.push_str(&format!(
            "nsys     {}\nncu      {}\n",
            tool(&self.nsys),
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
        s
    }
}

/// Free bytes on the filesystem of `dir` (or its nearest existing parent), from `df`.
fn free_disk(dir: &Path) -> Option<u64> {
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
