//! The runs directory and everything in it. This crate is its one owner: every other crate
//! asks it where a run is, reads a run's files through it and writes runs through it.
//!
//! ```text
//! runs/
//!   20261121-235636-qwen2/        a run: <capture time>-<slug> (see [`run_id`])
//!     bundle.json                 the bundle (pretty JSON)
//!     timeline.json[.gz]          the timeline side file, when the run has one
//!     raw/                        a capture's artifacts (see [`retention`])
//!     ranks/<rank>/               a multi-rank run: each rank's own run directory
//!                                 (bundle.json, timeline.json), see [`RankedRunWriter`]
//!   .tmp-<id>-<pid>/              a run being written: hidden, renamed into place when whole
//!   .capture-<name>-<ms>/         a capture in progress (capture's working directory)
//! ```
//!
//! * Runs are written into a hidden temporary directory and renamed into place, so a crash
//!   leaves no partial run ([`write_run`]); a bundle is rewritten the same way
//!   ([`rewrite_bundle`]). Readers skip hidden (`.`-prefixed) directories ([`list_runs`]).
//! * A timeline is read plain or gzip-compressed, as the sample runs keep it
//!   ([`timeline_path`], [`read_timeline_text`]).
//! * Old captures of a target keep their raw files gzip-compressed ([`retention`]).

mod id;
mod read;
pub mod retention;
pub mod spill;
mod write;

use std::path::PathBuf;

pub use id::{run_id, slugify};
pub use read::{
    bundle_path, files_under, list_runs, read_bundle, read_bundle_text, read_launch_calls,
    read_timeline_text, timeline_path,
};
pub use spill::{RunTimeline, SpillDir, SpilledTimeline};
pub use write::{rewrite_bundle, write_run, RankedRunWriter, RANKS_DIR};

/// The directory of a run that holds a capture's raw artifacts.
pub const RAW_DIR: &str = "raw";

/// Why the runs directory, a run or one of its files could not be read or written. Every
/// variant names the path and says what to do where there is something to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "runs directory `{}`: cannot read ({error}); run `llmprof ingest` first or pass --runs DIR",
        path.display()
    )]
    RunsDir {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "runs directory `{}`: holds no run directories (no */bundle.json); run `llmprof ingest` first",
        path.display()
    )]
    NoRuns { path: PathBuf },
    #[error(
        "run directory `{}`: cannot read; give a run directory that `llmprof ingest` or \
         `llmprof capture` wrote, or its bundle.json",
        path.display()
    )]
    ReadBundle {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("run directory `{}`: {message}", path.display())]
    InvalidBundle { path: PathBuf, message: String },
    #[error("timeline `{}`: {message}", path.display())]
    Timeline { path: PathBuf, message: String },
    #[error("run directory `{}`: cannot write", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl StoreError {
    /// The I/O error under this one, if any (a full disk, say).
    pub fn io_error(&self) -> Option<&std::io::Error> {
        match self {
            StoreError::RunsDir { error, .. } => Some(error),
            StoreError::ReadBundle { source, .. } | StoreError::Write { source, .. } => {
                Some(source)
            }
            _ => None,
        }
    }
}
