//! The ingest crate's one error type. Every variant names the file and says what is wrong with
//! it in words a user can act on.

use std::path::PathBuf;

/// Why an input could not be ingested at all. Partly usable input does not fail: it yields
/// [`llmprof_bundle::Diagnostic`]s instead.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("{what} `{}`: cannot read", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} `{}`: the file is empty", path.display())]
    Empty { what: &'static str, path: PathBuf },
    #[error("{what} `{}`: {message}", path.display())]
    Invalid {
        what: &'static str,
        path: PathBuf,
        message: String,
    },
    #[error("`{}`: cannot write the timeline's columns there while they are built: {source}", path.display())]
    Spill {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("nothing to ingest: give at least one of --nsys, --kineto or --ncu")]
    NoInputs,
}

impl IngestError {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        IngestError::Io {
            what,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn invalid(
        what: &'static str,
        path: impl Into<PathBuf>,
        message: impl Into<String>,
    ) -> Self {
        IngestError::Invalid {
            what,
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Names of the inputs as they appear in messages.
pub(crate) mod what {
    pub const NSYS: &str = "nsys export";
    pub const KINETO: &str = "PyTorch profiler trace";
    pub const NCU: &str = "ncu CSV";
    pub const MODEL_CONFIG: &str = "model config";
    pub const METADATA: &str = "run metadata";
}
