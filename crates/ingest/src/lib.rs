//! Parsers for real profiler output, converted into an [`llmprof_bundle::Bundle`].
//!
//! Data flows one way: each parser (`nsys`, `kineto`, `ncu`) reads its format and feeds
//! format-free records to a [`convert::TraceConverter`], whose `finish()` builds the bundle's
//! stages, kernels, totals and timeline. Raw SQLite rows, JSON events and CSV cells never leave
//! the module that parses them.

pub mod diagnostics;
pub mod error;
pub mod input;
pub mod names;
pub mod ncu;

pub use error::IngestError;
