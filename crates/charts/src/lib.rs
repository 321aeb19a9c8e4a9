//! SVG charts of llmprof run bundles, drawn with [`plotters`]' SVG backend.
//!
//! Every chart is a pure function of bundle data returning a complete standalone
//! `<svg …>…</svg>` document, or `None` when the bundle has nothing to draw for it (no stages,
//! no kernel time, no Nsight Compute throughput, …).
//!
//! # Guarantees
//!
//! * **Deterministic**: the same bundle gives byte-identical SVG on every machine. plotters is
//!   built without a font backend, so nothing looks up system fonts: text is written as
//!   `<text font-family="sans-serif">` and laid out by the viewer, while this crate places it
//!   with its own fixed width estimate. Sizes are fixed (760 px wide; the height follows the
//!   number of rows), numbers are formatted with fixed precision, and no libm transcendental
//!   function (whose last bits vary by platform) enters a coordinate.
//! * **Safe with untrusted names**: kernel, stage and run names are cleaned of control
//!   characters and characters XML forbids, and plotters' SVG backend escapes `<`, `>`, `&`,
//!   `"` and `'` in all text and attribute values, so the document is well-formed and a name
//!   cannot inject markup.
//! * **No panics** on any bundle: empty, zero totals, NaN metrics, huge names. Rows are capped
//!   (stages, kernels, runs) so documents stay a few tens of KB.

mod compare;
mod draw;
mod nvml;
mod ranks;
mod roofline;
mod run;

pub use compare::{compare_category_mix, compare_stages};
pub use nvml::nvml_timeline;
pub use ranks::rank_skew;
pub use roofline::roofline;
pub use run::{category_share, speed_of_light, stage_breakdown, top_kernels};

/// Width in pixels of every chart.
pub const WIDTH: u32 = 760;
