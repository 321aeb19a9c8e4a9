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
    /// Example:
    ///   llmprof ingest --nsys run.sqlite --kineto trace.json.gz --ncu ncu.csv \
    ///       --model-config config.json --label qwen2-h200
    #[command(verbatim_doc_comment)]
    Ingest(IngestArgs),
    /// Print a run's stage, kernel and operator tables.
    ///
    /// Example: llmprof show runs/20261121-235636-qwen2-h200
    Show(ShowArgs),
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    /// Nsight Systems export: `nsys export --type sqlite` output (.sqlite, or .sqlite.gz). A
    /// .nsys-rep report is exported first when `nsys` is on PATH.
    #[arg(long, value_name = "FILE")]
    pub nsys: Option<PathBuf>,
    /// PyTorch profiler chrome trace (`prof.export_chrome_trace`), .json or .json.gz.
    #[arg(long, value_name = "FILE")]
    pub kineto: Option<PathBuf>,
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
    /// Directory that receives the run directory.
    #[arg(long, value_name = "DIR", default_value = "runs")]
    pub out: PathBuf,
}

/// What `llmprof ingest` does, validated.
#[derive(Debug)]
pub struct IngestConfig {
    pub request: llmprof_ingest::IngestRequest,
    pub out: PathBuf,
}

impl IngestArgs {
    pub fn into_config(self) -> IngestConfig {
        IngestConfig {
            request: llmprof_ingest::IngestRequest {
                nsys: self.nsys,
                kineto: self.kineto,
                ncu: self.ncu,
                model_config: self.model_config,
                label: self.label.filter(|l| !l.trim().is_empty()),
            },
            out: self.out,
        }
    }
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
