//! The interactive half of the llmprof site: a per-stage kernel timeline and a cross-run
//! comparison, compiled to `wasm32-unknown-unknown` with wasm-bindgen.
//!
//! Data flows one way: the site writes each run's `bundle.json` and `timeline.json` into
//! `<script>` files (so pages work from `file://`), the page hands the text to
//! [`model::Run::from_json`], and everything after that is a pure function of the run and the
//! view state:
//!
//! * [`viewport`] — the visible time window, zoom and pan.
//! * [`lanes`] — which lanes exist (stages by depth, one per CUDA stream, memcpy/memset, NVML
//!   counters) and where they sit on the canvas.
//! * [`lod`] — level of detail: at most a few items per pixel column whatever the zoom, so a
//!   million kernels draw as fast as a thousand.
//! * [`hit`] — which item is under the pointer.
//! * [`range`] — the kernel table and GPU busy % of a selected time range.
//! * [`search`] — substring or `/regex/` kernel search.
//! * [`hash`] — the view in the URL hash, so a link reproduces it.
//! * [`scene`] — one frame drawn through the [`scene::Painter`] trait (a canvas in the
//!   browser, a recorder in tests).
//! * [`compare`] — the comparison charts, drawn with plotters on any backend (canvas on
//!   screen and for PNG, SVG for export).
//! * [`run_diff`] — the compare page's diff of two ticked runs (the report crate's `Diff`).
//! * [`ranks`] — several ranks of a multi-rank run side by side on one time axis, each
//!   rank's files loaded when it is added.
//!
//! Only `app` (wasm32 only) touches the browser.

pub mod chunks;
pub mod compare;
pub mod details;
pub mod fmt;
pub mod hash;
pub mod hit;
pub mod lanes;
pub mod lod;
pub mod model;
pub mod range;
pub mod ranks;
pub mod replicate;
pub mod run_diff;
pub mod scene;
pub mod search;
pub mod viewport;

#[cfg(target_arch = "wasm32")]
mod app;
#[cfg(target_arch = "wasm32")]
mod measure;
