//! llmprof's front-door tests, linked into one test binary (as ripgrep does) so that a change
//! relinks one executable instead of one per file. One module per area; `common` holds the
//! helpers (running the binary, the fixtures, a small HTTP server, Chromium).

mod common;

mod analysis;
mod bad_input;
mod capture;
mod capture_ranks;
mod charts;
mod cli;
mod export;
mod kineto_trace;
mod nsys_stats_match;
mod python_package;
mod ranks;
mod run_hygiene;
mod site;
mod site_browser;
mod tidy;
mod viewer_browser;
mod viewer_model;
