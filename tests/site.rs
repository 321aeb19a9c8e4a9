//! `llmprof site build` through the front door: pages, tables, links, escaping, incremental
//! rebuilds, page weight.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use crate::common::*;

fn build_sample() -> (tempfile::TempDir, PathBuf, PathBuf) {
    build_sample_site()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn html_files(site: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![site.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "html") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// `href="..."` and `src="..."` values of a page.
fn links(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    for attr in ["href=\"", "src=\""] {
        let mut rest = html;
        while let Some(i) = rest.find(attr) {
            rest = &rest[i + attr.len()..];
            if let Some(end) = rest.find('"') {
                out.push(rest[..end].to_string());
            }
        }
    }
    out
}

const RUN: &str = "runs/20261121-235636-sample";

#[test]
fn every_mandatory_table_is_on_the_run_page_and_in_report_md() {
    let (_d, _runs, site) = build_sample();
    let page = read(&site.join(RUN).join("index.html"));
    for id in [
        "environment-table",
        "aggregates-table",
        "stages-table",
        "mfu-table",
        "operators-table",
        "kernels-table",
    ] {
        assert!(page.contains(&format!("id=\"{id}\"")), "page lacks {id}");
    }
    // Sections in the order the issue gives, each with an anchor.
    let order = [
        "id=\"environment\"",
        "id=\"aggregates\"",
        "id=\"stages\"",
        "id=\"mfu\"",
        "id=\"operators\"",
        "id=\"kernels\"",
        "id=\"diagnosis\"",
        "id=\"overhead\"",
        "id=\"provenance\"",
        "id=\"diagnostics\"",
    ];
    let pos: Vec<usize> = order.iter().map(|o| page.find(o).unwrap()).collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "section order");
    assert!(
        page.contains("Vision processing"),
        "vision note under the stage table"
    );
    assert!(page.contains("Decode is launch-bound"));
    // ncu columns appear when ncu data exist.
    assert!(page.contains("<th>Tensor pipe (%)</th>"));

    let md = read(&site.join(RUN).join("report.md"));
    for h in [
        "## Environment",
        "## Aggregates",
        "## Per-Stage Timings",
        "## MFU",
        "## Top Operators",
        "## Top Kernels",
        "## Diagnosis",
    ] {
        assert!(md.contains(h), "report.md lacks {h}");
    }
    // Tables are well-formed: every table row has as many cells as its header.
    for block in md.split("\n\n") {
        let rows: Vec<&str> = block.lines().filter(|l| l.starts_with('|')).collect();
        if rows.len() < 2 {
            continue;
        }
        let cells = |l: &str| l.replace("\\|", "").matches('|').count();
        let n = cells(rows[0]);
        assert!(rows.iter().all(|r| cells(r) == n), "ragged table:\n{block}");
    }
}

#[test]
fn key_pages_snapshots() {
    let (_d, _runs, site) = build_sample();
    let repo = |s: String| s.replace(env!("CARGO_MANIFEST_DIR"), "<repo>");
    insta::assert_snapshot!("report_md", repo(read(&site.join(RUN).join("report.md"))));
    insta::assert_snapshot!("index_html", repo(read(&site.join("index.html"))));
    insta::assert_snapshot!("compare_html", repo(read(&site.join("compare.html"))));
}

#[test]
fn every_relative_link_resolves_and_none_is_external() {
    let (_d, _runs, site) = build_sample();
    let pages = html_files(&site);
    assert!(pages.len() >= 4, "{pages:?}");
    for page in pages {
        let html = read(&page);
        for link in links(&html) {
            assert!(
                !link.starts_with("http") && !link.starts_with("//") && !link.starts_with('/'),
                "{}: non-relative link {link}",
                page.display()
            );
            let path = link.split('#').next().unwrap();
            // `data:` (the empty favicon) is inline: no request.
            if path.is_empty() || path.starts_with("data:") {
                continue;
            }
            let target = page.parent().unwrap().join(path);
            assert!(target.exists(), "{}: broken link {link}", page.display());
        }
    }
}

#[test]
fn pages_are_light_and_carry_a_restrictive_csp() {
    let (_d, _runs, site) = build_sample();
    for page in html_files(&site) {
        let html = read(&page);
        assert!(
            html.len() <= 500_000,
            "{} weighs {} bytes",
            page.display(),
            html.len()
        );
        assert!(
            html.contains("Content-Security-Policy\" content=\"default-src 'none'"),
            "{}",
            page.display()
        );
    }
}

#[test]
fn rebuilds_copy_only_changed_runs_and_never_keep_a_stale_page() {
    let (_d, runs, site) = build_sample();
    let build = || {
        let o = site_build(&runs, &site);
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    assert!(build().contains("2 run(s): 0 updated, 2 unchanged"));
    let data = site.join(RUN).join("bundle.js");
    let copied_at = std::fs::metadata(&data).unwrap().modified().unwrap();
    // A page left by an older template or view code is rendered again, though its run's
    // data did not change (and is not copied again).
    let page = site.join(RUN).join("index.html");
    let current = read(&page);
    std::fs::write(&page, current.replace("Per-Stage Timings", "Stage table")).unwrap();
    assert!(build().contains("2 run(s): 1 updated, 1 unchanged"));
    assert_eq!(read(&page), current);
    assert_eq!(
        std::fs::metadata(&data).unwrap().modified().unwrap(),
        copied_at
    );
    // Change one bundle: only its run is updated.
    let bundle = runs.join("20261121-235636-sample/bundle.json");
    let text = read(&bundle).replace("\"label\": \"sample\"", "\"label\": \"sample v2\"");
    std::fs::write(&bundle, text).unwrap();
    assert!(build().contains("2 run(s): 1 updated, 1 unchanged"));
    assert!(read(&page).contains("sample v2"));
    assert!(read(&data).contains("sample v2"));
}

/// Names from input data are escaped everywhere: stage, kernel, operator names and labels
/// holding `<script>`, an attribute breakout and a quote.
#[test]
fn hostile_names_are_escaped() {
    let (_d, runs, site) = build_sample();
    let evil = [
        "<script>alert(1)</script>",
        "\"><img src=x onerror=alert(2)>",
        "it's",
    ];
    let path = runs.join("20261121-235636-sample/bundle.json");
    let mut b: serde_json::Value = serde_json::from_str(&read(&path)).unwrap();
    b["label"] = evil[1].into();
    b["stages"][0]["name"] = evil[0].into();
    b["stages"][1]["name"] = evil[2].into();
    b["kernels"][0]["name"] = evil[1].into();
    b["kernels"][1]["name"] = evil[0].into();
    b["operators"][0]["name"] = evil[0].into();
    b["analysis"]["summary"] = evil[1].into();
    std::fs::write(&path, serde_json::to_string(&b).unwrap()).unwrap();
    let o = site_build(&runs, &site);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for page in html_files(&site) {
        let html = read(&page);
        assert!(!html.contains("<script>alert"), "{}", page.display());
        assert!(!html.contains("<img"), "{}: an <img> tag", page.display());
        // No inline event handlers at all: only our own external script.
        for tag in html.split('<').skip(1) {
            let head = tag.split('>').next().unwrap_or("");
            assert!(
                !head
                    .split_whitespace()
                    .any(|w| w.starts_with("on") && w.contains('=')),
                "{}: inline handler in <{head}>",
                page.display()
            );
        }
        // Scripts are our own files only: each <script> has a `src` and no inline code.
        for part in html.split("<script").skip(1) {
            let (head, rest) = part.split_once('>').unwrap();
            assert!(
                head.contains(" src=\"") && head.contains("static/"),
                "{}: <script{head}>",
                page.display()
            );
            assert!(
                rest.starts_with("</script>"),
                "{}: inline script code",
                page.display()
            );
        }
    }
    let page = read(&site.join(RUN).join("index.html"));
    assert!(
        page.contains("&#60;script&#62;alert(1)&#60;/script&#62;")
            || page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "the name is shown, escaped"
    );
    assert!(
        page.contains("&#x27;") || page.contains("&#39;"),
        "quote escaped"
    );
    let md = read(&site.join(RUN).join("report.md"));
    assert!(
        !md.contains("<script>") && !md.contains("<img"),
        "report.md escaped"
    );
}

#[test]
fn a_missing_runs_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let o = site_build(&dir.path().join("nope"), &dir.path().join("site"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.contains("nope") && err.contains("llmprof ingest"),
        "{err}"
    );
}

/// Two directories holding one run (a copy): one is published, the other is named in the
/// build's warnings; the two never write the same folder at once.
#[test]
fn a_copied_run_is_published_once_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let src = fixture("sample-runs/20261124-000552-workload-light-cmd-memory/bundle.json");
    for copy in ["a", "b"] {
        std::fs::create_dir_all(runs.join(copy)).unwrap();
        std::fs::copy(&src, runs.join(copy).join("bundle.json")).unwrap();
    }
    let o = site_build(&runs, &dir.path().join("site"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("is also the run id of"), "{err}");
    let index = std::fs::read_to_string(dir.path().join("site/index.html")).unwrap();
    assert_eq!(index.matches("class=\"pick\"").count(), 1);
}

/// The real H100 captures that ship as sample runs (dense target in deep mode, small MoE in
/// standard mode): the site shows how they were captured, the overhead, and the NVML chart.
#[test]
fn sample_runs_show_capture_overhead_and_nvml() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    let o = site_build(&fixture("sample-runs"), &site);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    before_and_after_pairs(&site, &String::from_utf8_lossy(&o.stderr));
    compiled_run_page_shows_graphs_and_compile(&site);
    for run in [
        "runs/20261122-040409-qwen2.5-0.5b-deep",
        "runs/20261122-040129-qwen3-moe-small-standard",
        "runs/20261122-035856-deepseek-ocr2-standard",
    ] {
        let page = read(&site.join(run).join("index.html"));
        for needle in [
            "id=\"overhead-table\"",
            "id=\"passes-table\"",
            "id=\"manifest-table\"",
            "id=\"snapshot-table\"",
            "GPU power, SM clock, utilization and memory used (NVML)",
            "Decode is launch-bound",
            "id=\"headline-table\"",
            "decode mJ/token",
            "baseline NVML",
        ] {
            assert!(page.contains(needle), "{run} lacks {needle}");
        }
        // Raw artifacts are published next to the page, and their links resolve.
        let raw_links: Vec<String> = links(&page)
            .into_iter()
            .filter(|l| l.starts_with("raw/"))
            .collect();
        assert!(
            raw_links.iter().any(|l| l.ends_with("metadata.json")),
            "{raw_links:?}"
        );
        for l in &raw_links {
            assert!(
                site.join(run).join(l).is_file(),
                "{run}: broken raw link {l}"
            );
        }
        // Same report structure for both models.
        let md = read(&site.join(run).join("report.md"));
        assert!(md.contains("## Profiling overhead") && md.contains("| Overhead (%) |"));
    }
}

/// The compare page pairs each compiled sample run with the eager run of the same target and
/// workload captured closest in time, with latency from the unprofiled baseline; the fp32
/// batch-16 run has no eager twin and is not paired. `site build` names the pairs.
fn before_and_after_pairs(site: &Path, stderr: &str) {
    let page = read(&site.join("compare.html"));
    assert!(page.contains("id=\"before-after\""));
    let section =
        &page[page.find("id=\"before-after\"").unwrap()..page.find("id=\"compare-live\"").unwrap()];
    for pair in [
        (
            "20261123-154903-qwen2.5-0.5b-standard",
            "20261123-155206-qwen2.5-0.5b-deep-reduce-overhead",
        ),
        (
            "20261122-040129-qwen3-moe-small-standard",
            "20261123-155734-qwen3-moe-small-standard-reduce-overhead",
        ),
        (
            "20261122-035856-deepseek-ocr2-standard",
            "20261123-160233-deepseek-ocr2-light-reduce-overhead",
        ),
    ] {
        assert!(
            section.contains(pair.0) && section.contains(pair.1),
            "{pair:?}"
        );
        assert!(
            stderr.contains(&format!("before/after: {} → {}", pair.0, pair.1)),
            "{stderr}"
        );
    }
    assert!(
        !section.contains("20261123-160018"),
        "the fp32 batch-16 run has no eager twin"
    );
    // qwen2.5-0.5b: baseline decode 1699.8 ms and 103.7 ms over 64 steps.
    for needle in [
        "TPOT, unprofiled median (ms)",
        "26.6",
        "1.62",
        "16.4× faster",
        "+76.4 points",
        "÷258.0",
    ] {
        assert!(section.contains(needle), "before/after lacks {needle}");
    }
}

/// The compiled run's page: launches and CUDA graphs per stage, and the compile rows.
fn compiled_run_page_shows_graphs_and_compile(site: &Path) {
    let run = site.join("runs/20261123-155206-qwen2.5-0.5b-deep-reduce-overhead");
    let page = read(&run.join("index.html"));
    for needle in [
        "id=\"launches-table\"",
        "155,848 kernels ran inside 322 CUDA graph launches",
        "id=\"compile-table\"",
        "reduce-overhead",
        "38.31",
        "Decode keeps the GPU busy (82.9%)",
        "Decode is memory-bound",
    ] {
        assert!(page.contains(needle), "compiled run page lacks {needle}");
    }
    let md = read(&run.join("report.md"));
    assert!(
        md.contains("## Launches and CUDA graphs")
            && md.contains("| decode | 768 | 192 | 4.0 | 1.0 | 486 | 484 | 99.2 |"),
        "{md}"
    );
}

/// The GitHub Pages workflow's "Build the site" step, run as the workflow runs it (its
/// `$HOME/.llmprof/bin/llmprof` this build's binary): with a `runs/` directory it publishes
/// those runs; the artifact it uploads and the deploy action are the ones Pages needs.
#[test]
fn the_pages_workflow_builds_the_site_from_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let yml = read(&root.join(".github/workflows/pages.yml"));
    for needle in [
        "actions/upload-pages-artifact@v3",
        "path: _site",
        "actions/deploy-pages@v4",
        "pages: write",
        "id-token: write",
        "cargo install --path . --locked",
    ] {
        assert!(yml.contains(needle), "pages.yml lacks {needle}");
    }
    let step = yml
        .split("- name: Build the site\n        run: |\n")
        .nth(1)
        .expect("a `Build the site` step with a run block");
    let script: String = step
        .lines()
        .take_while(|l| l.starts_with("          "))
        .map(|l| format!("{}\n", l.trim_start()))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("home/.llmprof/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_llmprof"), bin.join("llmprof")).unwrap();
    let run = "20261123-190110-qwen2.5-0.5b-light";
    let src = fixture("sample-runs").join(run);
    std::fs::create_dir_all(dir.path().join("runs").join(run)).unwrap();
    for f in ["bundle.json", "timeline.json.gz"] {
        std::fs::copy(src.join(f), dir.path().join("runs").join(run).join(f)).unwrap();
    }
    let o = std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(dir.path())
        .env("HOME", dir.path().join("home"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{script}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let index = read(&dir.path().join("_site/index.html"));
    assert!(index.contains(run), "{index}");
    assert!(dir
        .path()
        .join("_site/runs")
        .join(run)
        .join("index.html")
        .is_file());
}

/// `--chunk-above` cuts a timeline of more kernels into chunks, and leaves whole a timeline
/// whose kernel columns it cannot cut (here, two kernels out of start order): that one is
/// published as JSON, for the viewer to name the problem.
#[test]
fn chunk_above_cuts_large_timelines_and_leaves_broken_ones_whole() {
    let (dir, runs, _site) = build_sample();
    let id = "20261121-235636-sample";
    let site = dir.path().join("chunked");
    let o = site_build_chunked(&runs, &site, 1000);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run_out = site.join("runs").join(id);
    let head = read(&run_out.join("timeline.js"));
    assert!(
        head.contains(&format!("[\"timeline-chunked/{id}\"]")),
        "not chunked"
    );
    let chunks = std::fs::read_dir(run_out.join("timeline-chunks"))
        .unwrap()
        .count();
    // 20,505 kernels in chunks of 1000 / 8 = 125.
    assert_eq!(chunks, 20_505usize.div_ceil(125));
    // The same run with two kernels swapped in time.
    let src = runs.join(id).join("timeline.json");
    let mut t: serde_json::Value = serde_json::from_str(&read(&src)).unwrap();
    let start = t["kernels"]["start"].as_array_mut().unwrap();
    start.swap(10, 11_000);
    std::fs::write(&src, t.to_string()).unwrap();
    let o = site_build_chunked(&runs, &site, 1000);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let plain = read(&run_out.join("timeline.js"));
    assert!(
        plain.contains(&format!("[\"timeline/{id}\"]")),
        "a broken timeline was chunked"
    );
    assert!(
        !run_out.join("timeline-chunks").exists(),
        "stale chunks left behind"
    );
}
