//! Helpers shared by the front-door tests: fixture paths, running the real binary, reading
//! NVIDIA's `nsys stats` CSVs.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

pub const H200: &str = "h200-qwen2-0.5b";

pub fn h200(file: &str) -> PathBuf {
    fixture(&format!("{H200}/{file}"))
}

/// Runs the `llmprof` binary with `args`.
pub fn llmprof<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_llmprof"))
        .args(args)
        .env("COLUMNS", "200")
        .output()
        .expect("run llmprof")
}

/// Rows of a CSV file as header-keyed maps.
pub fn csv_rows(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let mut r = csv::Reader::from_path(path).expect("open csv");
    let headers = r.headers().expect("headers").clone();
    r.records()
        .map(|rec| {
            let rec = rec.expect("record");
            headers
                .iter()
                .zip(rec.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

pub fn num(row: &std::collections::HashMap<String, String>, col: &str) -> f64 {
    row[col]
        .parse()
        .unwrap_or_else(|_| panic!("{col} = {:?}", row[col]))
}

/// `nsys stats` prints floats with one decimal: equal after rounding to one decimal.
pub fn assert_1dp(ours: f64, theirs: f64, what: &str) {
    assert!(
        (ours - theirs).abs() <= 0.05 + 1e-6 * theirs.abs().max(1.0),
        "{what}: ours {ours} vs nsys stats {theirs}"
    );
}
