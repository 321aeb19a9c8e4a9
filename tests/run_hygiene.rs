//! What a run says about itself must hold away from the host that made it and must not
//! mislead: files named relative to the run directory (never the capture's working directory),
//! a range name that ran inside different stages shown where it ran rather than under the
//! first, and warm-up instances left out of TTFT and TPOT, with the run saying how.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use llmprof_bundle::{Bundle, Stage, StageKind, Timeline};
use llmprof_ingest::convert::TraceConverter;
use llmprof_ingest::diagnostics::Diagnostics;
use llmprof_ingest::records::RangeRecord;
use llmprof_report::RunReport;
use llmprof_viewer::details::describe;
use llmprof_viewer::model::{Run, Target};

use crate::common::*;

fn sample_runs() -> Vec<PathBuf> {
    llmprof_store::list_runs(&fixture("sample-runs")).unwrap()
}

fn read_run(dir: &Path) -> (Bundle, Timeline) {
    let b = llmprof_store::read_bundle(dir).unwrap();
    let path = llmprof_store::timeline_path(dir).unwrap();
    let t = Timeline::from_json(&llmprof_store::read_timeline_text(&path).unwrap()).unwrap();
    (b, t)
}

/// The files a bundle names (see the bundle docs, "Paths"), with where each was found.
fn named_files(b: &Bundle) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut add = |what: &str, v: &str| out.push((what.to_string(), v.to_string()));
    b.inputs.iter().for_each(|i| add("inputs[].path", &i.path));
    b.model.iter().for_each(|m| add("model.source", &m.source));
    b.diagnostics
        .iter()
        .for_each(|d| add("diagnostics[].file", &d.file));
    b.ncu.iter().for_each(|n| add("ncu[].file", &n.file));
    let mut quoted = |what: &str, text: &str| {
        // `metadata `raw/metadata.json`` style sources quote the file in backticks.
        for (i, part) in text.split('`').enumerate() {
            if i % 2 == 1 {
                add(what, part);
            }
        }
    };
    if let Some(w) = &b.workload {
        for (source, _) in w.by_source() {
            quoted("workload source", &source);
        }
    }
    b.counted_flops
        .iter()
        .for_each(|c| quoted("counted_flops[].source", &c.source));
    for s in b.calibration.iter().flat_map(|c| c.sources.values()) {
        quoted("calibration.sources", s);
    }
    out
}

/// No file a capture's bundle names is absolute, and nothing anywhere in it names the
/// capture's working directory (`.capture-<name>-<ms>/`), which is gone once the run exists.
pub fn assert_paths_relative_to_the_run(b: &Bundle) {
    let text = serde_json::to_string(b).unwrap();
    if let Some(at) = text.find(".capture-") {
        let around = &text[at.saturating_sub(80)..(at + 80).min(text.len())];
        panic!(
            "{}: names the capture's working directory: …{around}…",
            b.run_id
        );
    }
    for (what, path) in named_files(b) {
        assert!(
            !Path::new(&path).is_absolute() && !path.contains("/tmp/"),
            "{}: {what} `{path}` is not relative to the run directory",
            b.run_id
        );
    }
}

#[test]
fn committed_sample_runs_name_files_relative_to_the_run_directory() {
    let runs = sample_runs();
    assert!(runs.len() >= 8, "{runs:?}");
    for dir in runs {
        let b = llmprof_store::read_bundle(&dir).unwrap();
        assert_paths_relative_to_the_run(&b);
        // A multi-rank capture's ranks name their files relative to the run directory too.
        for entry in b.ranks.iter().flat_map(|r| &r.ranks) {
            let rank = llmprof_store::read_bundle(&dir.join(&entry.dir)).unwrap();
            assert_paths_relative_to_the_run(&rank);
            let brief = rank.capture.as_ref().map(llmprof_bundle::RankCapture::of);
            assert_eq!(
                entry.capture,
                brief,
                "{}: rank {}",
                dir.display(),
                entry.rank
            );
            let own = rank
                .inputs
                .iter()
                .find(|i| i.path.ends_with("metadata.json"));
            let own = own.expect("a rank of a capture reads its run metadata");
            assert!(
                dir.join(&own.path).is_file(),
                "{}: {}",
                dir.display(),
                own.path
            );
        }
        // A `--cmd` workload writes no run metadata; a target's driver always does.
        let by_command = b
            .capture
            .as_ref()
            .is_some_and(|c| c.target_config.get("command").is_some());
        if by_command {
            continue;
        }
        // The relative names are the run's own files (raw files may be kept gzipped).
        let metadata = b.inputs.iter().find(|i| i.path == "raw/metadata.json");
        assert!(metadata.is_some(), "{}: {:?}", b.run_id, b.inputs);
        assert!(dir.join("raw/metadata.json").is_file(), "{}", dir.display());
        // Findings quote the sources they are given.
        let evidence = b
            .analysis
            .iter()
            .flat_map(|a| &a.findings)
            .flat_map(|f| &f.evidence);
        for e in evidence.filter(|e| e.contains("metadata `")) {
            assert!(e.contains("metadata `raw/metadata.json`"), "{e}");
        }
    }
}

#[test]
fn user_paths_are_kept_as_given() {
    let out = tempfile::tempdir().unwrap();
    // A relative path stays relative: run from the fixture directory.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_llmprof"))
        .current_dir(fixture(H200))
        .args([
            "ingest",
            "--nsys",
            "nsys_export.sqlite.gz",
            "--model-config",
        ])
        .arg(h200("config.json"))
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap()
        .to_string();
    let b = llmprof_store::read_bundle(Path::new(&dir)).unwrap();
    assert_eq!(b.inputs[0].path, "nsys_export.sqlite.gz");
    assert_eq!(
        b.model.unwrap().source,
        h200("config.json").display().to_string()
    );
}

/// The ranges of a timeline fed to ingest's converter again, each under its stage's domain
/// and name: the nesting ingest derives from them, on real data.
fn reconverted(b: &Bundle, t: &Timeline) -> Vec<Stage> {
    let mut c = TraceConverter::new();
    let r = &t.ranges;
    for i in 0..r.start.len() {
        let s = &b.stages[r.stage[i] as usize];
        let start = t.t0_ns + r.start[i] as i64;
        c.handle_range(RangeRecord {
            ended_on_other_thread: false,
            thread: r.tid[i],
            tid: r.tid[i],
            domain: &s.domain,
            name: &s.name,
            kind: StageKind::PushPop,
            start,
            end: start + r.dur[i] as i64,
        });
    }
    let mut d = Diagnostics::new(llmprof_bundle::Source::Nsys, "timeline");
    c.finish(&mut d).stages
}

/// Names of a stage's parent and places, by stage name (ids differ between conversions).
fn places(stages: &[Stage], s: &Stage) -> (Option<String>, Vec<Option<String>>) {
    let name = |id: u32| stages[id as usize].name.clone();
    (
        s.parent.map(name),
        s.parents.iter().map(|p| p.map(name)).collect(),
    )
}

#[test]
fn a_library_range_in_several_stages_is_shown_where_it_ran_on_the_h100_capture() {
    let dir = fixture("sample-runs/20261122-035856-deepseek-ocr2-standard");
    let (b, t) = read_run(&dir);
    // Ingest's nesting of the real ranges is what the committed bundle holds.
    let again = reconverted(&b, &t);
    for s in &b.stages {
        let a = again
            .iter()
            .find(|a| a.name == s.name && a.domain == s.domain)
            .unwrap();
        assert_eq!(places(&b.stages, s), places(&again, a), "{}", s.name);
    }
    let scan = b
        .stages
        .iter()
        .find(|s| s.name == "cub::DeviceScan::InclusiveScan")
        .unwrap();
    let want = ["warmup_prefill", "warmup_decode", "prefill", "decode"];
    let (parent, parents) = places(&b.stages, scan);
    assert_eq!(parent, None);
    assert_eq!(parents, want.map(|w| Some(w.to_string())));
    // The report lists it among library ranges with where it ran, never as a stage.
    let report = RunReport::of(&b, 10);
    let row = report
        .library
        .rows
        .iter()
        .find(|r| r[0].contains("InclusiveScan"))
        .unwrap();
    assert_eq!(row.last().unwrap(), &want.join(", "));
    let stage_rows = report.stages.rows.iter().chain(&report.warmup.rows);
    assert!(
        stage_rows.clone().all(|r| !r[0].contains("cub::")),
        "{:?}",
        report.stages.rows
    );
    // The viewer says, per instance, which stage it ran in and whether it was warm-up.
    let run = Run::new(&b, t).unwrap();
    let info = |pos: u32| -> Vec<(String, String)> { describe(&run, Target::Range(pos)) };
    let positions = &run.stages[scan.id as usize].instances;
    let of = |want: &str| {
        positions
            .iter()
            .copied()
            .find(|&p| info(p).contains(&("Inside".to_string(), want.to_string())))
    };
    let warm = info(of("warmup_decode").unwrap());
    assert!(
        warm.contains(&("Warm-up".into(), "yes: not measured".into())),
        "{warm:?}"
    );
    let measured = info(of("decode").unwrap());
    assert!(measured.iter().all(|(k, _)| k != "Warm-up"), "{measured:?}");
    // Instances inside warm-up ranges are warm-up; the rest are measured.
    let measured = scan.measured_instances().count();
    assert_eq!((measured, scan.instance_list.len()), (33 + 2112, 3575));
}

/// A stage inside prefill and inside decode, next to one always inside prefill, through the
/// report: the first is a row of its own that says where, the second nested under prefill.
#[test]
fn a_workload_range_in_two_stages_is_a_row_that_says_where() {
    let mut c = TraceConverter::new();
    for (name, start, end) in [
        ("prefill", 0, 100),
        ("scan", 10, 20),
        ("sam", 30, 40),
        ("decode", 200, 300),
        ("scan", 210, 220),
    ] {
        c.handle_range(RangeRecord {
            ended_on_other_thread: false,
            thread: 1,
            tid: 1,
            domain: "",
            name,
            kind: StageKind::PushPop,
            start,
            end,
        });
    }
    let mut b = Bundle::new("synthetic");
    b.stages = c
        .finish(&mut Diagnostics::new(llmprof_bundle::Source::Nsys, "x"))
        .stages;
    let rows: Vec<String> = RunReport::of(&b, 10)
        .stages
        .rows
        .iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(
        rows,
        ["prefill", "· sam", "scan (in prefill, decode)", "decode"]
    );
}

fn ingest_h200(out: &Path, extra: &[&str]) -> PathBuf {
    let mut args: Vec<std::ffi::OsString> = vec!["ingest".into(), "--nsys".into()];
    args.push(h200("nsys_export.sqlite.gz").into());
    args.extend(extra.iter().map(|a| a.into()));
    args.extend(["--out".into(), out.as_os_str().to_owned()]);
    let o = llmprof(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    PathBuf::from(String::from_utf8_lossy(&o.stdout).lines().last().unwrap())
}

fn ttft(dir: &Path) -> (u64, f64, String) {
    let b = llmprof_store::read_bundle(dir).unwrap();
    let run = b.analysis.unwrap().run;
    let t = run.ttft.unwrap();
    (t.count, t.median_ns, run.note.unwrap_or_default())
}

/// The H200 fixture warms up under the range names it measures: prefill's first instance
/// (374.3 ms) is warm-up, its second (23.6 ms) measurement.
#[test]
fn leading_warmup_instances_are_left_out_of_ttft_and_the_run_says_so() {
    let out = tempfile::tempdir().unwrap();
    let plain = ingest_h200(out.path(), &[]);
    let (n, median, note) = ttft(&plain);
    // The median of the 374.3 ms warm-up and the 23.6 ms measurement: 198.956 ms.
    assert_eq!(n, 2);
    assert!((198.95e6..198.96e6).contains(&median), "{median}");
    assert!(
        note.contains("ingest-only run: TTFT and TPOT count every instance"),
        "{note}"
    );
    assert!(note.contains("--warmup-instances N"), "{note}");

    let warm = ingest_h200(
        out.path(),
        &["--warmup-instances", "1", "--decode-steps", "2,16"],
    );
    let b = llmprof_store::read_bundle(&warm).unwrap();
    let w = b.warmup.as_ref().unwrap();
    assert_eq!(
        (w.leading, w.source.as_deref()),
        (1, Some("--warmup-instances flag"))
    );
    let prefill = b.stages.iter().find(|s| s.name == "prefill").unwrap();
    let kept: Vec<usize> = prefill.measured_instances().map(|(i, _)| i).collect();
    assert_eq!(kept, [1]);
    let (n, median, note) = ttft(&warm);
    assert_eq!((n, median), (1, prefill.instance_list[1].wall_ns as f64));
    assert!((23.0e6..24.0e6).contains(&median), "{median}");
    assert!(
        note.contains("over the measured instances: prefill 1 of 2, decode 1 of 2")
            && note.contains("the first instance of each top-level stage"),
        "{note}"
    );
    // TPOT: the second decode instance over its own steps (16), not the warm-up's (2).
    let run = b.analysis.as_ref().unwrap().run.clone();
    let decode = b.stages.iter().find(|s| s.name == "decode").unwrap();
    let tpot = run.tpot.unwrap();
    assert_eq!(
        (tpot.count, tpot.median_ns),
        (1, (decode.instance_list[1].wall_ns / 16) as f64)
    );
    assert_eq!(run.generated_tokens, Some(16));

    // `analyze` changes the choice in place; 0 goes back to names only.
    let o = llmprof([
        "analyze".as_ref(),
        plain.as_os_str(),
        "--warmup-instances".as_ref(),
        "1".as_ref(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(ttft(&plain).0, 1);
    let o = llmprof(["analyze".as_ref(), plain.as_os_str()]);
    assert!(o.status.success());
    assert_eq!(ttft(&plain).0, 1, "without the flag the run's choice stays");
    let o = llmprof([
        "analyze".as_ref(),
        plain.as_os_str(),
        "--warmup-instances".as_ref(),
        "0".as_ref(),
    ]);
    assert!(o.status.success());
    assert_eq!(ttft(&plain).0, 2);
}

/// A run ingested from absolute paths keeps them in the bundle (as given), but no view quotes
/// them: `show`'s model line, its findings and inputs, and the run page name `…/config.json`.
#[test]
fn views_never_quote_absolute_paths_of_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("metadata.json");
    std::fs::write(
        &meta,
        r#"{"batch_size": 1, "prompt_tokens": 512, "decode_steps": [2, 16], "prefill_logits": 512}"#,
    )
    .unwrap();
    let runs = dir.path().join("runs");
    let o = llmprof([
        "ingest".as_ref(),
        "--nsys".as_ref(),
        h200("nsys_export.sqlite.gz").as_os_str(),
        "--model-config".as_ref(),
        h200("config.json").as_os_str(),
        "--metadata".as_ref(),
        meta.as_os_str(),
        "--out".as_ref(),
        runs.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap()
        .to_string();
    let b = llmprof_store::read_bundle(Path::new(&run)).unwrap();
    let evidence: Vec<&String> = b
        .analysis
        .iter()
        .flat_map(|a| &a.findings)
        .flat_map(|f| &f.evidence)
        .collect();
    assert!(
        evidence
            .iter()
            .any(|e| e.contains(&meta.display().to_string())),
        "the stored evidence quotes the metadata file as given: {evidence:#?}"
    );
    let show = llmprof(["show", run.as_str()]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.contains("  model     qwen2 (…/config.json)"), "{text}");
    assert!(text.contains("metadata `…/metadata.json`"), "{text}");
    let site = dir.path().join("site");
    let o = llmprof([
        "site".as_ref(),
        "build".as_ref(),
        "--runs".as_ref(),
        runs.as_os_str(),
        "--out".as_ref(),
        site.as_os_str(),
    ]);
    assert!(o.status.success());
    let id = Path::new(&run).file_name().unwrap();
    let page = std::fs::read_to_string(site.join("runs").join(id).join("index.html")).unwrap();
    for (what, text) in [("show", text.as_ref()), ("run page", page.as_str())] {
        for host in [dir.path(), &fixture(H200)] {
            let host = host.display().to_string();
            assert!(!text.contains(&host), "{what} quotes `{host}`");
        }
    }
}
