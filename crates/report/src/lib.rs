//! The report model: what every view of a run shows, computed once from the bundle.
//!
//! `llmprof show`, the site's askama templates (HTML and `report.md`), the SVG charts and the
//! WASM viewer only lay out what this crate returns, so the terminal, the pages and the canvas
//! agree by construction:
//!
//! * [`run::RunReport`] — every section of a run as [`TableView`]s and sentences;
//! * [`compare::Comparison`] — the numbers a comparison of runs shows ([`compare::RunSummary`])
//!   and its tables; [`before_after`] pairs eager and optimized runs of one target;
//! * [`diff::Diff`] — run B against run A with distribution-free intervals ([`stats`]), per
//!   stage, TPOT, MFU, kernel category and top kernel (`diff_kernels.rs`);
//! * [`csv_export`], [`chrome_export`] — `llmprof export`'s CSV tables and Chrome trace;
//! * [`fmt`] — every number format; [`palette`] — the category and run colours; [`paths`] —
//!   how a view names a file (never an absolute path of the capture host).
//!
//! It depends only on the bundle crate, so it compiles
//! for `wasm32-unknown-unknown` with the viewer.

pub mod before_after;
pub mod chrome_export;
pub mod compare;
pub mod csv_export;
pub mod diff;
mod diff_kernels;
pub mod fmt;
pub mod palette;
pub mod paths;
pub mod run;
pub mod samples;
pub mod stats;
pub mod table;

pub use compare::{Comparison, Norm, RunSummary};
pub use run::{CaptureReport, FindingView, IndexRow, RunReport};
pub use table::{Cell, Column, TableView};
