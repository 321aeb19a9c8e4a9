//! The built site in headless Chromium (Debian's `chromium`), over http and from `file://`:
//! pages load with no console error (script errors and CSP violations are console errors) and
//! render their content; a screenshot is taken.
//!
//! Needs `chromium` on PATH. Without it the test reports that it did not run, unless
//! `LLMPROF_REQUIRE_BROWSER=1` (set by `.ci/run`), where a missing browser is a failure.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

use crate::common::*;

/// Loads `url` headless; returns (DOM, console lines).
fn load(browser: &Path, url: &str, screenshot: Option<&Path>) -> (String, Vec<String>) {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("timeout");
    cmd.arg("90").arg(browser).args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=3000",
        "--window-size=1400,2000",
    ]);
    cmd.arg(format!("--user-data-dir={}", profile.path().display()));
    match screenshot {
        Some(png) => cmd.arg(format!("--screenshot={}", png.display())),
        None => cmd.arg("--dump-dom"),
    };
    let o = cmd.arg(url).output().unwrap();
    let console = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    (String::from_utf8_lossy(&o.stdout).into_owned(), console)
}

/// [`load`], tried again (up to three times in all) while `ready` does not hold for the DOM: on
/// a loaded machine the virtual time budget can run out before a page's own script loads
/// finish (seen once in CI, with every other test running beside it).
fn load_until(browser: &Path, url: &str, ready: impl Fn(&str) -> bool) -> (String, Vec<String>) {
    let mut last = load(browser, url, None);
    for _ in 1..3 {
        if ready(&last.0) {
            break;
        }
        last = load(browser, url, None);
    }
    last
}

/// Debian's `chromium`, or `None` (said on stderr) when it is missing; a missing browser
/// fails the test under `LLMPROF_REQUIRE_BROWSER=1` (set by `.ci/run`).
fn browser_or_skip() -> Option<std::path::PathBuf> {
    let browser = chromium();
    if browser.is_none() {
        if std::env::var_os("LLMPROF_REQUIRE_BROWSER").is_some() {
            panic!("chromium is not installed but LLMPROF_REQUIRE_BROWSER is set");
        }
        eprintln!("browser test did not run: chromium is not on PATH");
    }
    browser
}

#[test]
fn pages_load_without_console_errors_over_http_and_file() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let (_dir, _runs, site) = build_sample_site();
    let port = serve(site.clone());
    let run = "runs/20261121-235636-sample/index.html";
    let pages = [
        ("index.html", "Profiled runs"),
        (run, "Per-Stage Timings"),
        ("compare.html", "Compare runs"),
    ];
    for (page, expect) in pages {
        for url in [
            format!("http://127.0.0.1:{port}/{page}"),
            format!("file://{}", site.join(page).display()),
        ] {
            let (dom, console) = load(&browser, &url, None);
            assert!(console.is_empty(), "{url}: console messages {console:#?}");
            assert!(dom.contains(expect), "{url}: DOM lacks {expect}");
            // The script ran: sortable headers got a tabindex.
            if page == "index.html" {
                assert!(dom.contains("tabindex=\"0\""), "{url}: site.js did not run");
            }
        }
    }
    let png = site.join("run-page.png");
    let (_, console) = load(
        &browser,
        &format!("file://{}", site.join(run).display()),
        Some(&png),
    );
    assert!(console.is_empty(), "{console:#?}");
    let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
    assert!(size > 50_000, "screenshot of {size} bytes");
    // Keep the picture for people to look at.
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("site-run-page.png");
    let _ = std::fs::copy(&png, &keep);
}

/// An index of more runs than a page holds shows 100 at a time, with a pager above the table
/// that counts every run.
#[test]
fn a_long_index_is_paged() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let src = std::fs::read_to_string(fixture(
        "sample-runs/20261124-000552-workload-light-cmd-memory/bundle.json",
    ))
    .unwrap();
    let mut bundle: serde_json::Value = serde_json::from_str(&src).unwrap();
    for i in 0..120 {
        let id = format!("r{i:03}");
        bundle["run_id"] = id.clone().into();
        std::fs::create_dir_all(runs.join(&id)).unwrap();
        std::fs::write(runs.join(&id).join("bundle.json"), bundle.to_string()).unwrap();
    }
    let site = dir.path().join("site");
    let o = site_build(&runs, &site);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let url = format!("file://{}", site.join("index.html").display());
    let (dom, console) = load(&browser, &url, None);
    assert!(console.is_empty(), "{console:#?}");
    assert!(dom.contains("rows 1–100 of 120"), "no pager in {dom}");
    assert_eq!(dom.matches("class=\"paged-out\"").count(), 20);
}

/// The site served under `/repo-name/`, as GitHub Pages serves a project site: every page it
/// links to loads in Chromium, and every link, script, stylesheet and file it names answers,
/// without a request leaving the sub-path (tests/browser/subpath.mjs crawls it).
#[test]
fn the_site_works_under_a_sub_path() {
    let (Some(browser), Some(node)) = (chromium(), crate::viewer_browser::node_with_playwright())
    else {
        if std::env::var_os("LLMPROF_REQUIRE_BROWSER").is_some() {
            panic!(
                "chromium, node or playwright-core is missing but LLMPROF_REQUIRE_BROWSER is set"
            );
        }
        eprintln!("sub-path browser test did not run: needs chromium, node and `npm ci --prefix tests/browser`");
        return;
    };
    let (dir, _runs, site) = build_sample_site();
    let parent = dir.path().join("pages");
    std::fs::create_dir_all(&parent).unwrap();
    std::os::unix::fs::symlink(&site, parent.join("repo-name")).unwrap();
    let port = serve(parent);
    let base = format!("http://127.0.0.1:{port}/repo-name/");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/subpath.mjs");
    let o = Command::new(node)
        .arg(script)
        .arg(&browser)
        .arg(&base)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let res: serde_json::Value = serde_json::from_str(&out).unwrap();
    let pages: Vec<&str> = res["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["url"].as_str().unwrap())
        .collect();
    for want in [
        "./",
        "compare.html",
        "timeline.html",
        "runs/20261121-235636-sample/index.html",
    ] {
        assert!(
            pages.iter().any(|p| p.ends_with(want) || *p == want),
            "{want} not crawled: {pages:?}"
        );
    }
    let files = res["files"].as_array().unwrap();
    assert!(
        files
            .iter()
            .any(|f| f.as_str().unwrap().ends_with("report.md")),
        "{files:?}"
    );
}

/// The run id of the two-H200 tensor-parallel sample run.
const TWO_RANK_RUN: &str = "20261126-034958-qwen2.5-0.5b-standard";

/// The site of the two-H200 tensor-parallel sample run alone: (its temporary directory, the
/// site).
fn two_rank_site() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let name = format!("{TWO_RANK_RUN}-nproc2");
    copy_tree(&fixture(&format!("sample-runs/{name}")), &runs.join(name));
    let site = dir.path().join("site");
    let o = site_build(&runs, &site);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (dir, site)
}

/// The compare page offers each rank of a multi-rank run beside the runs: two ranks of the
/// two-H200 capture ticked from `file://` load their own bundles and get their diff.
#[test]
fn two_ranks_of_a_run_compare_like_two_runs() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let (_dir, site) = two_rank_site();
    let id = TWO_RANK_RUN;
    let page = std::fs::read_to_string(site.join("compare.html")).unwrap();
    for r in [0, 1] {
        let pick = format!("value=\"{id}/ranks/{r}\" data-run=\"{id}/ranks/{r}\"");
        assert!(page.contains(&pick), "no pick for rank {r}");
    }
    let url = format!(
        "file://{}#runs={id}/ranks/0,{id}/ranks/1",
        site.join("compare.html").display()
    );
    let (dom, console) = load_until(&browser, &url, |dom| dom.contains("2 runs."));
    assert!(console.is_empty(), "{console:#?}");
    assert!(
        dom.contains("data-runs=\"rank-0,rank-1\""),
        "no diff of the ranks"
    );
    assert!(dom.contains("2 runs."), "both ranks' bundles loaded");
}

/// The timeline page of a rank with another rank beside it (`with=` in the link): the second
/// rank's files load, its lanes join on one axis, and the status line says so; the screenshot
/// (`target/tmp/rank-lanes.png`) is the one to look at.
#[test]
fn a_link_shows_two_ranks_side_by_side_on_the_timeline() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let (_dir, site) = two_rank_site();
    let id = TWO_RANK_RUN;
    // The run page links there.
    let page = std::fs::read_to_string(site.join(format!("runs/{id}/index.html"))).unwrap();
    let link = format!("timeline.html#run={id}/ranks/0&#38;with={id}/ranks/1");
    assert!(
        page.contains(&link),
        "the run page does not link both ranks' lanes"
    );
    let url = format!(
        "file://{}#run={id}/ranks/0&with={id}%2Franks%2F1",
        site.join("timeline.html").display()
    );
    let (dom, console) = load_until(&browser, &url, |dom| dom.contains("data-viewer=\"ready\""));
    assert!(console.is_empty(), "{console:#?}");
    assert!(
        dom.contains("data-viewer=\"ready\""),
        "the viewer did not finish"
    );
    assert!(
        dom.contains("ranks 0, 1 side by side, ranks aligned by their clocks' epochs"),
        "the status line does not say both ranks are shown"
    );
    let tag = |rank: u32| {
        let at = dom
            .find(&format!("data-rank=\"{id}/ranks/{rank}\""))
            .unwrap_or(0);
        let start = dom[..at].rfind('<').unwrap_or(0);
        let end = at + dom[at..].find('>').unwrap_or(0);
        dom[start..end].to_string()
    };
    assert!(
        tag(1).contains("checked"),
        "rank 1's box is not ticked: {}",
        tag(1)
    );
    let png = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rank-lanes.png");
    let _ = load(&browser, &url, Some(&png));
    assert!(png.is_file(), "no screenshot");
}

/// A site built with `--chunk-above 2000` publishes the sample run (20,505 kernels) in chunks:
/// the timeline opens on the overview (a hover over a stream says what its buckets hold),
/// a link to a narrow window loads that window's chunks, and its range table is the one the
/// run loaded whole shows for the same window. The screenshot is `target/tmp/chunked.png`.
#[test]
fn a_chunked_timeline_opens_on_its_overview_and_loads_a_window_like_the_whole_run() {
    use llmprof_viewer::lanes::{Geometry, LaneKind, Layout};
    let (Some(browser), Some(node)) = (chromium(), crate::viewer_browser::node_with_playwright())
    else {
        assert!(
            std::env::var_os("LLMPROF_REQUIRE_BROWSER").is_none(),
            "chromium, node or playwright-core is missing but LLMPROF_REQUIRE_BROWSER is set"
        );
        eprintln!("chunked timeline test did not run: needs chromium, node and `npm ci --prefix tests/browser`");
        return;
    };
    let (dir, runs, whole_site) = build_sample_site();
    let chunked_site = dir.path().join("chunked");
    let o = site_build_chunked(&runs, &chunked_site, 2000);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let id = "20261121-235636-sample";
    let run_dir = whole_site.join("runs").join(id);
    assert!(
        chunked_site
            .join(format!("runs/{id}/timeline-chunks/0.js"))
            .is_file()
            && !run_dir.join("timeline-chunks").exists(),
        "only the chunked build cuts the timeline"
    );
    let bundle = std::fs::read_to_string(run_dir.join("bundle.json")).unwrap();
    let timeline = std::fs::read_to_string(run_dir.join("timeline.json")).unwrap();
    let run = llmprof_viewer::model::Run::from_json(&bundle, &timeline).unwrap();
    let layout = Layout::new(&run.lanes, Geometry::for_lanes(&run.lanes));
    let stream = run
        .lanes
        .iter()
        .position(|l| matches!(l.kind, LaneKind::Stream(_)))
        .unwrap();
    let (top, h) = layout.rows[stream];
    // A window of a hundredth of the run, in its middle.
    let end = run.timeline.end_ns;
    let (a, b) = (end / 2, end / 2 + end / 100);
    let config = serde_json::json!({
        "chromium": browser,
        "chunked": format!("file://{}/timeline.html#run={id}", chunked_site.display()),
        "whole": format!("file://{}/timeline.html", whole_site.display()),
        "hash": format!("run={id}&t={a}-{b}"),
        "stream_y": top + h / 2.0,
        "screenshot": Path::new(env!("CARGO_TARGET_TMPDIR")).join("chunked.png"),
    });
    let cfg = dir.path().join("chunks-test.json");
    std::fs::write(&cfg, config.to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/chunks.mjs");
    let o = Command::new(node).arg(&script).arg(&cfg).output().unwrap();
    assert!(
        o.status.success(),
        "chunks.mjs failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = |k: &str| out[k].as_str().unwrap_or_default().to_string();
    assert_eq!(out["errors"], serde_json::json!([]), "console errors");
    assert_eq!(s("state"), "ready", "{}", s("summary"));
    let n = llmprof_viewer::fmt::thousands(run.timeline.kernels.start.len() as u64);
    assert!(
        s("summary").contains(&format!("{n} kernels")),
        "{}",
        s("summary")
    );
    assert!(
        s("overview").contains(&format!("overview of {n} kernels"))
            && s("overview").contains("at most 2,000 kernels"),
        "{}",
        s("overview")
    );
    let tip = s("tooltip");
    assert!(
        tip.contains("Overview") && tip.contains("Kernels starting") && tip.contains("GPU busy"),
        "{tip}"
    );
    assert!(
        s("loaded").contains(&format!(" of {n} kernels loaded")),
        "{}",
        s("loaded")
    );
    assert_eq!(out["window_chunked"], out["window_whole"]);
    assert!(s("whole_chunks").is_empty(), "the whole run is not chunked");
    let (mine, theirs) = (s("range_chunked"), s("range_whole"));
    assert!(theirs.contains("\"rows\":[["), "{theirs}");
    assert_eq!(
        mine, theirs,
        "the window's range table differs from the whole run's"
    );
}
