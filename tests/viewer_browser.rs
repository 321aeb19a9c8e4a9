//! The WASM viewer in headless Chromium with real input events (Playwright driving Debian's
//! `chromium`), over http and from `file://`: the canvas is drawn at device resolution,
//! hovering the run's longest kernel shows its name, duration, stage offset, grid/block and
//! category, zoom and pan move the window, a Shift-drag selects a range whose table and GPU
//! busy % match the Rust computation for the range in the URL, search highlights, and the
//! URL hash reproduces the view in a fresh page. The comparison page draws and exports SVG, and
//! its diff of two ticked runs shows what `llmprof diff --json` prints for them.
//!
//! Needs `chromium`, `node` and `npm ci --prefix tests/browser` (playwright-core). Without
//! them the test says it did not run, unless `LLMPROF_REQUIRE_BROWSER=1` (set by `.ci/run`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use llmprof_viewer::hash::ViewState;
use llmprof_viewer::model::Run;
use llmprof_viewer::{fmt, range};

pub(crate) fn node_with_playwright() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let installed = root
        .join("tests/browser/node_modules/playwright-core/package.json")
        .is_file();
    let node = std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join("node"))
        .find(|p| p.is_file())?;
    installed.then_some(node)
}

#[test]
fn the_viewer_draws_hovers_zooms_selects_and_links_in_chromium() {
    let (Some(browser), Some(node)) = (chromium(), node_with_playwright()) else {
        if std::env::var_os("LLMPROF_REQUIRE_BROWSER").is_some() {
            panic!(
                "chromium, node or playwright-core is missing but LLMPROF_REQUIRE_BROWSER is set \
                 (bash .ci/setup installs them)"
            );
        }
        eprintln!("viewer browser test did not run: needs chromium, node and `npm ci --prefix tests/browser`");
        return;
    };
    let (_dir, runs, site) = build_sample_site();
    let diffs = with_captured_runs(&runs, &site);
    let id = "20261121-235636-sample";
    let run_dir = site.join("runs").join(id);
    let bundle = std::fs::read_to_string(run_dir.join("bundle.json")).unwrap();
    let timeline = std::fs::read_to_string(run_dir.join("timeline.json")).unwrap();
    let run = Run::from_json(&bundle, &timeline).unwrap();
    let dur = &run.timeline.kernels.dur;
    let k = (0..dur.len())
        .max_by_key(|&i| (dur[i], std::cmp::Reverse(i)))
        .unwrap();
    let row = run.timeline.kernels.kernel[k] as usize;
    let name = llmprof_bundle::names::display_name(&run.kernels[row].name);
    let duration = fmt::duration(dur[k] as f64);

    let port = serve(site.clone());
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let config = serde_json::json!({
        "chromium": browser,
        "bases": [format!("http://127.0.0.1:{port}/"), format!("file://{}/", site.display())],
        "run": id,
        "kernel": k,
        "kernel_name": name,
        "kernel_duration": duration,
        "screenshot": tmp.join("viewer-timeline.png"),
        "compare_screenshot": tmp.join("viewer-compare.png"),
        "diffs": diffs,
    });
    let cfg_path = site.join("viewer-test.json");
    std::fs::write(&cfg_path, config.to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/viewer.mjs");
    let o = Command::new(node)
        .arg(&script)
        .arg(&cfg_path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "viewer.mjs failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let bases = out["bases"].as_object().unwrap();
    assert_eq!(bases.len(), 2, "both http and file:// ran");
    for (base, res) in bases {
        check_base(base, res, &run, id, k);
        check_diffs(base, res, &runs, &diffs);
    }
}

/// The compare page's "Diff of two runs" for each ticked pair against `llmprof diff --json`
/// of the same runs: the same rows in the same order, each metric, median, Δ, Δ% and verdict
/// equal (the numbers exactly, through the cells' `data-value`), and the same notes.
fn check_diffs(base: &str, res: &serde_json::Value, runs: &Path, pairs: &[[String; 2]]) {
    let shown = res["diffs"].as_array().unwrap();
    assert_eq!(shown.len(), pairs.len(), "{base}");
    let untick = res["diff_untick_status"].as_str().unwrap();
    assert!(untick.contains("Tick exactly two runs"), "{base}: {untick}");
    let mut kernel_rows = 0;
    for (page, pair) in shown.iter().zip(pairs) {
        let (a, b) = (page["a"].as_str().unwrap(), page["b"].as_str().unwrap());
        let mut sorted = pair.clone();
        sorted.sort();
        assert_eq!(
            [a, b],
            [sorted[0].as_str(), sorted[1].as_str()],
            "{base}: A is the earlier run"
        );
        let o = llmprof([
            "diff".as_ref(),
            runs.join(a).as_os_str(),
            runs.join(b).as_os_str(),
            "--json".as_ref(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let cli: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let cli_rows = cli["rows"].as_array().unwrap();
        let rows = page["rows"].as_array().unwrap();
        assert!(!rows.is_empty(), "{base}: {a} vs {b} shows no rows");
        assert_eq!(rows.len(), cli_rows.len(), "{base}: {a} vs {b}");
        for (r, c) in rows.iter().zip(cli_rows) {
            let cell = |i: usize| r["cells"][i].as_str().unwrap();
            // Read with serde_json's own float parser, as the CLI's output is: the same
            // shortest digits give the same f64 (str::parse would round some differently).
            let value = |i: usize| {
                r["values"][i]
                    .as_str()
                    .map(|v| serde_json::from_str::<f64>(v).unwrap())
            };
            assert_eq!(r["key"], c["key"], "{base}");
            assert_eq!(cell(0), c["metric"].as_str().unwrap(), "{base}");
            assert_eq!(value(1), c["a"]["median"].as_f64(), "{base}: {r}");
            assert_eq!(value(2), c["b"]["median"].as_f64(), "{base}: {r}");
            assert_eq!(value(3), c["delta"].as_f64(), "{base}: {r}");
            assert_eq!(value(4), c["delta_pct"].as_f64(), "{base}: {r}");
            assert_eq!(cell(6), c["verdict"].as_str().unwrap(), "{base}");
            kernel_rows += usize::from(cell(0).contains(" kernels (ms)"));
        }
        assert_eq!(page["notes"], cli["notes"], "{base}: {a} vs {b}");
    }
    assert!(
        kernel_rows > 0,
        "{base}: no kernel-category row was compared"
    );
}

/// What the page showed at one base (http or file://) against the viewer crate's own
/// computation: the compare check ran, the selected range, the pinned kernel, zoom and pan.
fn check_base(base: &str, res: &serde_json::Value, run: &Run, id: &str, k: usize) {
    // Every bar label and mix total of the picked runs was compared with the tables.
    let checked = res["compare_checked"].as_u64().unwrap_or(0);
    assert!(
        checked >= 20,
        "{base}: only {checked} compare numbers checked"
    );
    // The selected range in the link is what the table shows, per the Rust computation.
    let hash = res["hash"].as_str().unwrap();
    let view = ViewState::parse(hash);
    assert_eq!(view.run, id, "{base}");
    let (a, b) = view.selection.expect("the hash holds the selection");
    let stats = range::range_stats(run, a, b);
    let summary = res["range_summary"].as_str().unwrap();
    let busy = format!("GPU busy {:.1}%", stats.busy_pct());
    assert!(
        summary.contains(&busy),
        "{base}: `{summary}` lacks `{busy}`"
    );
    assert!(
        summary.contains(&format!("{} GPU ops", fmt::thousands(stats.ops))),
        "{base}: {summary}"
    );
    let first = &res["range_rows"][0];
    let top = &stats.rows[0];
    assert_eq!(
        first[0],
        run.kernels[top.kernel as usize].display.as_str(),
        "{base}"
    );
    assert_eq!(first[1], fmt::thousands(top.calls).as_str(), "{base}");
    assert_eq!(
        first[2],
        fmt::duration(top.total_ns as f64).as_str(),
        "{base}"
    );
    assert_eq!(
        view.pinned,
        Some(k as u32),
        "{base}: the pinned kernel is in the link"
    );
    assert_eq!(view.query, "gemm", "{base}");
    // Zoom and pan moved the window; "0" showed the whole run.
    let z = &res["zoom"];
    let span = |w: &serde_json::Value| w[1].as_f64().unwrap() - w[0].as_f64().unwrap();
    assert!((z["whole"][0].as_f64().unwrap()).abs() < 1.0, "{base}: {z}");
    assert!((z["whole"][1].as_f64().unwrap() - run.timeline.end_ns as f64).abs() < 1.0);
    assert!(span(&z["zoomed"]) < span(&z["whole"]) * 0.5, "{base}: {z}");
}

/// Adds the bundles of four H100 captures (eager and compiled, three models) to the sample
/// site, so the compare page's default picks are real runs that differ, and the H100 CUDA-graph
/// decode ingested from its graph- and node-level exports (runs with per-instance kernel
/// samples). Returns the pairs whose diff the page is checked on: two sample runs, and the two
/// ingested exports.
fn with_captured_runs(runs: &Path, site: &Path) -> Vec<[String; 2]> {
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sample-runs");
    for id in [
        "20261123-154903-qwen2.5-0.5b-standard",
        "20261123-155734-qwen3-moe-small-standard-reduce-overhead",
        "20261123-160018-qwen2.5-0.5b-light-reduce-overhead",
        "20261123-160233-deepseek-ocr2-light-reduce-overhead",
    ] {
        let dir = runs.join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(
            samples.join(id).join("bundle.json"),
            dir.join("bundle.json"),
        )
        .unwrap();
    }
    let graphs = fixture("h100-cuda-graphs");
    let ingested = ["graph", "node"].map(|level| {
        let o = llmprof([
            "ingest".as_ref(),
            "--nsys".as_ref(),
            graphs
                .join(format!("nsys_{level}_level.sqlite.gz"))
                .as_os_str(),
            "--metadata".as_ref(),
            graphs.join("metadata.json").as_os_str(),
            "--label".as_ref(),
            level.as_ref(),
            "--out".as_ref(),
            runs.as_os_str(),
        ] as [&std::ffi::OsStr; 9]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let last = String::from_utf8_lossy(&o.stdout)
            .lines()
            .last()
            .unwrap()
            .to_string();
        Path::new(&last)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    });
    let o = site_build(runs, site);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    vec![
        [
            "20261123-154903-qwen2.5-0.5b-standard".to_string(),
            "20261123-155734-qwen3-moe-small-standard-reduce-overhead".to_string(),
        ],
        ingested,
    ]
}
