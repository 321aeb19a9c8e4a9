//! The `llmprof` binary through its front door: ingest real captures, show them, and refuse bad
//! input with one clear line.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use crate::common::*;
use llmprof_bundle::{Bundle, Summary, Timeline};

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Entries of `dir`, hidden ones included.
fn entries(dir: &Path) -> Vec<String> {
    match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn ingest_prints_the_run_dir_last_and_show_prints_the_tables() {
    let out = tempfile::tempdir().unwrap();
    let o = llmprof([
        "ingest".as_ref(),
        "--nsys".as_ref(),
        h200("nsys_export.sqlite.gz").as_os_str(),
        "--kineto".as_ref(),
        h200("kineto_trace.json.gz").as_os_str(),
        "--ncu".as_ref(),
        h200("ncu_decode_raw.csv").as_os_str(),
        "--model-config".as_ref(),
        h200("config.json").as_os_str(),
        "--label".as_ref(),
        "qwen2 h200".as_ref(),
        "--out".as_ref(),
        out.path().as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run_dir = stdout(&o).lines().last().unwrap().to_string();
    assert!(run_dir.ends_with("20261121-235636-qwen2-h200"), "{run_dir}");
    // Only the finished run, no temporary directory.
    assert_eq!(entries(out.path()), vec!["20261121-235636-qwen2-h200"]);
    let text = std::fs::read_to_string(Path::new(&run_dir).join("bundle.json")).unwrap();
    let b = Bundle::from_json(&text).unwrap();
    assert_eq!(b.run_id, "20261121-235636-qwen2-h200");
    assert_eq!(b.ncu.len(), 30);
    assert!(
        b.ncu.iter().all(|n| n.kernel.is_some()),
        "every ncu kernel joins"
    );
    assert_eq!(
        b.model.as_ref().unwrap().model_type.as_deref(),
        Some("qwen2")
    );
    let t = std::fs::read_to_string(Path::new(&run_dir).join("timeline.json")).unwrap();
    let t = Timeline::from_json(&t).unwrap();
    assert_eq!(t.run_id, b.run_id);

    let show = llmprof(["show", &run_dir]);
    assert!(show.status.success(), "{}", stderr(&show));
    let s = stdout(&show);
    for needle in [
        "NVIDIA H200",
        "prefill",
        "decode",
        "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT",
        "aten::mm",
        "Nsight Compute",
    ] {
        assert!(s.contains(needle), "show lacks {needle}:\n{s}");
    }

    let json = llmprof(["show", "--json", &run_dir]);
    let summary: Summary = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(summary.gpu_kernels, 20_505);
    assert_eq!(summary.stages.len(), 2);

    // The same run again gets its own directory.
    let again = llmprof([
        "ingest".as_ref(),
        "--nsys".as_ref(),
        h200("nsys_export.sqlite.gz").as_os_str(),
        "--label".as_ref(),
        "qwen2 h200".as_ref(),
        "--out".as_ref(),
        out.path().as_os_str(),
    ]);
    assert!(stdout(&again)
        .trim_end()
        .ends_with("20261121-235636-qwen2-h200-2"));
}

#[test]
fn show_snapshot_of_the_nsys_fixture() {
    let out = tempfile::tempdir().unwrap();
    let o = llmprof([
        "ingest".as_ref(),
        "--nsys".as_ref(),
        h200("nsys_export.sqlite.gz").as_os_str(),
        "--label".as_ref(),
        "snapshot".as_ref(),
        // Its first prefill and decode are warm-up under the measured names.
        "--warmup-instances".as_ref(),
        "1".as_ref(),
        "--out".as_ref(),
        out.path().as_os_str(),
    ]);
    let run_dir = stdout(&o).lines().last().unwrap().to_string();
    let show = llmprof(["show", "--top", "8", &run_dir]);
    insta::assert_snapshot!(stdout(&show));
}

/// Runs `ingest` with `args` into a fresh output directory and checks the failure contract:
/// non-zero exit, one line on stderr naming `names`, no panic, nothing left in `--out`.
fn assert_refused(args: &[&std::ffi::OsStr], names: &str, says: &str) {
    let out = tempfile::tempdir().unwrap();
    let runs = out.path().join("runs");
    let mut all: Vec<&std::ffi::OsStr> = vec!["ingest".as_ref()];
    all.extend_from_slice(args);
    all.push("--out".as_ref());
    all.push(runs.as_os_str());
    let o = llmprof(all);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(names), "names the file `{names}`: {err}");
    assert!(err.contains(says), "says `{says}`: {err}");
    assert!(
        entries(&runs).is_empty(),
        "nothing left in --out: {:?}",
        entries(&runs)
    );
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn truncated_trace_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // The first 200 kB of the real trace: cut mid-event.
    let mut full = Vec::new();
    use std::io::Read;
    flate2::read::GzDecoder::new(std::fs::File::open(h200("kineto_trace.json.gz")).unwrap())
        .take(200_000)
        .read_to_end(&mut full)
        .unwrap();
    let p = write(dir.path(), "cut.json", &full);
    assert_refused(
        &["--kineto".as_ref(), p.as_os_str()],
        "cut.json",
        "truncated",
    );
}

#[test]
fn non_json_trace_is_refused() {
    assert_refused(
        &["--kineto".as_ref(), h200("ncu_decode_raw.csv").as_os_str()],
        "ncu_decode_raw.csv",
        "not valid JSON",
    );
}

#[test]
fn json_that_is_not_a_trace_is_refused() {
    assert_refused(
        &["--kineto".as_ref(), h200("config.json").as_os_str()],
        "config.json",
        "traceEvents",
    );
}

#[test]
fn non_sqlite_export_is_refused() {
    assert_refused(
        &["--nsys".as_ref(), h200("config.json").as_os_str()],
        "config.json",
        "not an SQLite database",
    );
}

#[test]
fn sqlite_without_nsys_tables_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("other.sqlite");
    let c = rusqlite::Connection::open(&p).unwrap();
    c.execute_batch("CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1);")
        .unwrap();
    drop(c);
    assert_refused(
        &["--nsys".as_ref(), p.as_os_str()],
        "other.sqlite",
        "lacks the Nsight Systems tables",
    );
}

#[test]
fn nsys_report_without_nsys_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "run.nsys-rep", b"not really a report");
    let out = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_llmprof"))
        .args(["ingest", "--nsys"])
        .arg(&p)
        .arg("--out")
        .arg(out.path().join("runs"))
        .env("PATH", "/nonexistent")
        .env_remove("NSYS")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.contains("run.nsys-rep") && err.contains("nsys export --type sqlite"),
        "{err}"
    );
}

#[test]
fn failed_ncu_run_is_refused() {
    assert_refused(
        &[
            "--ncu".as_ref(),
            fixture("rtx5090-deepseek-ocr/ncu_failed_run_raw.csv").as_os_str(),
        ],
        "ncu_failed_run_raw.csv",
        "==ERROR==",
    );
}

#[test]
fn empty_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "empty.json", b"");
    for flag in ["--nsys", "--kineto", "--ncu", "--model-config"] {
        let mut args: Vec<&std::ffi::OsStr> = vec![flag.as_ref(), p.as_os_str()];
        if flag == "--model-config" {
            args.extend([
                "--nsys".as_ref(),
                h200("nsys_export.sqlite.gz").into_os_string().leak() as &std::ffi::OsStr,
            ]);
        }
        assert_refused(&args, "empty.json", "empty");
    }
}

#[test]
fn missing_files_are_refused() {
    for flag in ["--nsys", "--kineto", "--ncu"] {
        assert_refused(
            &[flag.as_ref(), "/no/such/trace.json".as_ref()],
            "/no/such/trace.json",
            "No such file",
        );
    }
}

#[test]
fn other_locale_numbers_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // The real raw page as a German locale prints it: `2.752` for 2,752 and `0,53` for 0.53.
    let real = std::fs::read_to_string(h200("ncu_decode_raw.csv")).unwrap();
    let swap = |cell: &str| -> String {
        let inner = cell.trim_matches('"');
        if !inner.is_empty()
            && inner
                .chars()
                .all(|c| c.is_ascii_digit() || c == ',' || c == '.')
        {
            let swapped: String = inner
                .chars()
                .map(|c| match c {
                    ',' => '.',
                    '.' => ',',
                    c => c,
                })
                .collect();
            format!("\"{swapped}\"")
        } else {
            cell.to_string()
        }
    };
    let german: String = real
        .lines()
        .map(|l| {
            if l.starts_with("\"") && !l.starts_with("\"ID\"") {
                l.split("\",\"")
                    .map(|c| swap(&format!("\"{}\"", c.trim_matches('"'))))
                    .collect::<Vec<_>>()
                    .join(",")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let p = write(dir.path(), "de.csv", german.as_bytes());
    assert_refused(
        &["--ncu".as_ref(), p.as_os_str()],
        "de.csv",
        "decimal separator",
    );
}

#[test]
fn no_inputs_is_refused() {
    assert_refused(&[], "--nsys", "nothing to ingest");
}

#[test]
fn partly_bad_trace_yields_a_bundle_with_diagnostics() {
    // Real events of the H200 trace, plus one event without `ts` and one kernel without
    // `correlation`: the good events are kept and the bad ones are counted.
    let trace = r#"{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150109880320, "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
 "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "prefill", "pid": 405, "tid": 405, "ts": 4448858842985.461, "dur": 59860.938, "args": {"External id": 1}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 405, "tid": 405, "ts": 4448860991500.0, "dur": 40.0, "args": {"External id": 192415}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 405, "tid": 405, "ts": 4448858843514.268, "dur": 14.339, "args": {"External id": 192415, "cbid": 211, "correlation": 832347}},
  {"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul> >(int, at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul>)", "pid": 0, "tid": 7, "ts": 4448860991529.362, "dur": 0.928, "args": {"External id": 192415, "stream": 7, "correlation": 832347, "grid": [1, 1, 1], "block": [128, 1, 1]}},
  {"ph": "f", "id": 832347, "pid": 0, "tid": 7, "ts": 4448860991529.362, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "X", "cat": "kernel", "name": "no_time_kernel", "pid": 0, "tid": 7, "args": {"correlation": 5}},
  {"ph": "X", "cat": "kernel", "name": "orphan_kernel", "pid": 0, "tid": 7, "ts": 4448860991600.0, "dur": 1.0, "args": {"stream": 7}},
  {"ph": "X", "cat": "Trace", "ts": 4448858842672.904, "dur": 2390453.757, "pid": "Spans", "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}}
 ]}"#;
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "partial.json", trace.as_bytes());
    let runs = dir.path().join("runs");
    let o = llmprof([
        "ingest".as_ref(),
        "--kineto".as_ref(),
        p.as_os_str(),
        "--out".as_ref(),
        runs.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("warning"), "{}", stderr(&o));
    let run_dir = stdout(&o).lines().last().unwrap().to_string();
    let b = Bundle::from_json(
        &std::fs::read_to_string(Path::new(&run_dir).join("bundle.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(b.totals.kernels, 2);
    let codes: Vec<&str> = b.diagnostics.iter().map(|d| d.code.as_str()).collect();
    assert!(codes.contains(&"kineto.event_without_time"), "{codes:?}");
    assert!(
        codes.contains(&"kineto.gpu_op_without_correlation"),
        "{codes:?}"
    );
    let d = b
        .diagnostics
        .iter()
        .find(|d| d.code == "kineto.event_without_time")
        .unwrap();
    assert_eq!(
        (d.count, d.example.as_str()),
        (1, "kernel `no_time_kernel`")
    );
    assert_eq!(
        b.stages[0].gpu_ops, 1,
        "the launched kernel is attributed to prefill"
    );
}

/// Two runs whose unprofiled baselines hold twelve decode iterations with a few percent of
/// spread (and the sample run's three prefill iterations), B 10% slower than A, written as run
/// directories under `dir`.
fn slower_decode_runs(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let sample = fixture("sample-runs/20261123-154903-qwen2.5-0.5b-standard/bundle.json");
    let base = Bundle::from_json(&std::fs::read_to_string(&sample).unwrap()).unwrap();
    let write = |name: &str, scale: f64| {
        let mut b = base.clone();
        let baseline = b.capture.as_mut().unwrap().baseline.as_mut().unwrap();
        let first = baseline.samples[0].clone();
        let prefills: Vec<Option<u64>> = baseline.samples.iter().map(|s| s.prefill_ns).collect();
        baseline.samples = (0..12u64)
            .map(|i| {
                let jitter = 1.0 + ((i * 7) % 5) as f64 * 0.01;
                llmprof_bundle::IterationSample {
                    decode_ns: Some((2.0e9 * jitter * scale) as u64),
                    prefill_ns: prefills.get(i as usize).copied().flatten(),
                    ..first.clone()
                }
            })
            .collect();
        b.analysis = Some(llmprof_analysis::analyze(&b));
        let path = dir.join(name);
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join("bundle.json"), serde_json::to_string(&b).unwrap()).unwrap();
        path
    };
    (write("a", 1.0), write("b", 1.1))
}

/// `llmprof diff`: a 10% slower decode over 12 instances each is called slower with its
/// interval; the real 3-iteration samples get no verdict (too few samples for 95%); JSON parses.
#[test]
fn diff_tells_a_real_change_from_too_few_samples() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = slower_decode_runs(dir.path());
    let o = llmprof(["diff".as_ref(), a.as_os_str(), b.as_os_str()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let decode = text.lines().find(|l| l.contains("decode wall")).unwrap();
    assert!(
        decode.contains("slower") && decode.contains("n=12"),
        "{text}"
    );
    let prefill = text.lines().find(|l| l.contains("prefill wall")).unwrap();
    assert!(prefill.contains("too few samples (n=3 vs 3)"), "{text}");
    let same = llmprof(["diff".as_ref(), a.as_os_str(), a.as_os_str()]);
    let same = String::from_utf8_lossy(&same.stdout).into_owned();
    assert!(
        same.lines()
            .any(|l| l.contains("decode wall") && l.contains("no significant change")),
        "{same}"
    );
    let json = llmprof([
        "diff".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--json".as_ref(),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let row = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "decode wall (ms)")
        .unwrap();
    assert_eq!(row["verdict"], "slower");
    let [lo, hi, level] = [0, 1, 2].map(|i| row["delta_ci"][i].as_f64().unwrap());
    assert!(lo > 0.0 && hi > lo && level >= 0.95, "{row}");
    let bad = llmprof(["diff".as_ref(), "/nonexistent".as_ref(), a.as_os_str()]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("/nonexistent"));
}

/// `llmprof check`: a 10% slower decode exceeds a +5% budget beyond noise (exit 1, the term
/// named, the step summary written) and stays within +20%; a malformed term exits 2.
#[test]
fn check_gates_on_budgets_beyond_noise() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = slower_decode_runs(dir.path());
    let summary = dir.path().join("summary.md");
    let check = |budget: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_llmprof"))
            .args([
                "check".as_ref(),
                b.as_os_str(),
                "--against".as_ref(),
                a.as_os_str(),
            ])
            .args(["--budget", budget])
            .env("GITHUB_STEP_SUMMARY", &summary)
            .output()
            .unwrap()
    };
    let o = check("decode.wall<=+5%");
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("budget exceeded beyond noise: decode.wall<=+5%"),
        "{err}"
    );
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.contains("| decode wall (ms) |") && md.contains("decode.wall<=+5%: EXCEEDED"),
        "{md}"
    );
    let o = check("decode.wall<=+20%, prefill.ttft<=+5%");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("decode.wall<=+20%: within"), "{out}");
    assert!(
        out.contains("prefill.ttft<=+5%: not judged: too few samples"),
        "{out}"
    );
    let o = check("decode.tpot<5%");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("budget term `decode.tpot<5%`"));
}

/// The H100 CUDA-graph decode ingested, its decode stretched to twelve instances with a few
/// percent of spread (walls and per-instance kernel samples alike), once as A and once as B
/// with its top decode kernel 10% slower (its category's time raised by as much).
fn slower_kernel_runs(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, String) {
    let req = llmprof_ingest::IngestRequest {
        nsys: Some(fixture("h100-cuda-graphs/nsys_node_level.sqlite.gz")),
        ..Default::default()
    };
    let base = llmprof_ingest::ingest(&req, &mut |_| {}).unwrap().bundle;
    let decode = base.stages.iter().find(|s| s.name == "decode").unwrap().id;
    let jitter = |i: usize| 1.0 + ((i * 7) % 5) as f64 * 0.01;
    let stretch =
        |ns: &[u64]| -> Vec<u64> { (0..12).map(|i| (ns[0] as f64 * jitter(i)) as u64).collect() };
    let write = |name: &str, slower: bool| {
        let mut b = base.clone();
        b.run_id = name.into();
        let stage = &mut b.stages[decode as usize];
        let first = stage.instance_list[0].clone();
        stage.instance_list = vec![first; 12];
        let ik = b
            .instance_kernels
            .iter_mut()
            .find(|s| s.stage == decode)
            .unwrap();
        let top = ik.kernels[0].kernel;
        let category = b.kernels[top as usize].category;
        let extra: Vec<u64> = stretch(&ik.kernels[0].ns)
            .iter()
            .map(|&v| if slower { v / 10 } else { 0 })
            .collect();
        for s in &mut ik.kernels {
            s.ns = stretch(&s.ns);
            if s.kernel == top {
                s.ns.iter_mut().zip(&extra).for_each(|(v, e)| *v += e);
            }
        }
        for s in &mut ik.categories {
            s.ns = stretch(&s.ns);
            if s.category == category {
                s.ns.iter_mut().zip(&extra).for_each(|(v, e)| *v += e);
            }
        }
        let path = dir.join(name);
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join("bundle.json"), serde_json::to_string(&b).unwrap()).unwrap();
        path
    };
    let short = base.kernels[base
        .instance_kernels
        .iter()
        .find(|s| s.stage == decode)
        .unwrap()
        .kernels[0]
        .kernel as usize]
        .short_name
        .clone();
    (write("a", false), write("b", true), short)
}

/// Kernel and category rows: `--json` names each row's key; a kernel 10% slower over twelve
/// instances is called slower and exceeds a +5% budget on its key beyond noise, while the
/// untouched categories stay within; a run from before the samples gets no such rows and one
/// note; an unknown category in a budget is named.
#[test]
fn diff_and_check_per_kernel_and_category() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, short) = slower_kernel_runs(dir.path());
    let json = llmprof([
        "diff".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--json".as_ref(),
    ]);
    assert!(json.status.success(), "{}", stderr(&json));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    // The one slower row is the kernel made slower (its key gains `~hash` only if another
    // compared kernel shares its short name), and its category.
    let slower: Vec<&serde_json::Value> =
        rows.iter().filter(|r| r["verdict"] == "slower").collect();
    assert_eq!(slower.len(), 2, "{slower:?}");
    let kernel = slower[1];
    let key = kernel["key"].as_str().unwrap().to_string();
    assert!(slower[0]["key"]
        .as_str()
        .unwrap()
        .starts_with("decode.category."));
    assert!(key.starts_with(&format!("decode.kernel.{short}")), "{key}");
    let pct = kernel["delta_pct"].as_f64().unwrap();
    assert!((9.0..11.0).contains(&pct), "{kernel}");
    let others: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|r| {
            r["key"].as_str().unwrap().starts_with("decode.kernel.") && r["key"] != key.as_str()
        })
        .collect();
    assert!(!others.is_empty());
    assert!(
        others
            .iter()
            .all(|r| r["verdict"] == "no significant change"),
        "{others:?}"
    );
    assert_eq!(v["notes"], serde_json::json!([]));

    let check = |budget: &str| {
        llmprof([
            "check".as_ref(),
            b.as_os_str(),
            "--against".as_ref(),
            a.as_os_str(),
            "--budget".as_ref(),
            budget.as_ref(),
        ])
    };
    let o = check(&format!("{key}<=+5%"));
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stderr(&o).contains(&format!("budget exceeded beyond noise: {key}<=+5%")));
    let o = check("decode.category.attention<=+5%,prefill.category.gemm<=+5%");
    assert!(o.status.success(), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("decode.category.attention<=+5%: within"),
        "{}",
        stdout(&o)
    );
    let o = check("decode.category.gemmm<=+5%");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown category `gemmm`"),
        "{}",
        stderr(&o)
    );

    let old = fixture("sample-runs/20261123-154903-qwen2.5-0.5b-standard");
    let o = llmprof(["diff".as_ref(), old.as_os_str(), b.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(!text.contains(" kernels (ms)"), "{text}");
    let notes: Vec<&str> = text.lines().filter(|l| l.contains("note:")).collect();
    assert_eq!(notes.len(), 1, "{text}");
    assert!(
        notes[0].contains("20261123-154903-qwen2.5-0.5b-standard")
            && notes[0].contains("no per-instance kernel samples")
    );
}

/// `llmprof export --format csv`: the H200 export's stage, kernel and memory tables carry the
/// headers of NVIDIA's own `nsys stats` reports first, and their values equal those reports'
/// (integers exactly, one-decimal columns after rounding); a bad run is refused by name.
#[test]
fn csv_export_matches_nsys_stats_columns() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let o = llmprof([
        "ingest".as_ref(),
        "--nsys".as_ref(),
        h200("nsys_export.sqlite.gz").as_os_str(),
        "--kineto".as_ref(),
        h200("kineto_trace.json.gz").as_os_str(),
        "--ncu".as_ref(),
        h200("ncu_decode_raw.csv").as_os_str(),
        "--out".as_ref(),
        runs.as_os_str(),
    ]);
    let run = stdout(&o).lines().last().unwrap().to_string();
    let out = dir.path().join("tables");
    let o = llmprof([
        "export".as_ref(),
        run.as_ref(),
        "--format".as_ref(),
        "csv".as_ref(),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().count(), 5, "{}", stdout(&o));
    for (ours, theirs, key) in [
        ("stages.csv", "nvtx_sum.csv", "Range"),
        ("kernels.csv", "cuda_gpu_kern_sum.csv", "Name"),
        ("mem_ops.csv", "cuda_gpu_mem_time_sum.csv", "Operation"),
    ] {
        let nsys_path = h200(&format!("nsys_stats/{theirs}"));
        let nsys_header: Vec<String> = csv::Reader::from_path(&nsys_path)
            .unwrap()
            .headers()
            .unwrap()
            .iter()
            .map(String::from)
            .collect();
        let our_header: Vec<String> = csv::Reader::from_path(out.join(ours))
            .unwrap()
            .headers()
            .unwrap()
            .iter()
            .map(String::from)
            .collect();
        assert_eq!(our_header[..nsys_header.len()], nsys_header[..], "{ours}");
        let rows = csv_rows(&out.join(ours));
        let nsys = csv_rows(&nsys_path);
        assert_eq!(rows.len(), nsys.len(), "{ours}");
        for theirs in &nsys {
            let row = rows
                .iter()
                .find(|r| r[key] == theirs[key])
                .unwrap_or_else(|| {
                    panic!("{ours}: no row {}", theirs[key]);
                });
            for col in &nsys_header {
                match col.as_str() {
                    "Avg (ns)" | "Med (ns)" | "StdDev (ns)" | "Time (%)" => {
                        assert_1dp(num(row, col), num(theirs, col), col)
                    }
                    _ => assert_eq!(row[col], theirs[col], "{ours} {col} of {}", theirs[key]),
                }
            }
        }
    }
    let ops = csv_rows(&out.join("operators.csv"));
    assert!(ops.len() > 10 && ops.iter().all(|r| num(r, "Calls") >= 1.0));
    let ncu = csv_rows(&out.join("ncu.csv"));
    assert!(!ncu.is_empty() && ncu.iter().all(|r| num(r, "Duration (ns)") > 0.0));
    let bad = llmprof(["export", "/nonexistent", "--format", "csv", "/tmp/x"]);
    assert!(!bad.status.success() && stderr(&bad).contains("/nonexistent"));
}

/// A `--cmd` run gets MFU once it has the model config and token counts: `llmprof analyze
/// --model-config … --prompt-tokens … --decode-steps …` on the H100 Python-workload run, whose
/// workload (`examples/python-workload/workload.py`) builds the model of
/// `examples/python-workload/config.json`.
#[test]
fn analyze_with_a_model_config_gives_a_cmd_run_mfu() {
    let src = fixture("sample-runs/20261123-211114-workload-standard");
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    for entry in walkdir::WalkDir::new(&src) {
        let entry = entry.unwrap();
        let to = run.join(entry.path().strip_prefix(&src).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&to).unwrap();
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
    let before = llmprof_store::read_bundle(&run).unwrap();
    assert!(before.model.is_none(), "the --cmd run had no model config");
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/python-workload/config.json");
    let o = llmprof([
        "analyze".as_ref(),
        run.as_os_str(),
        "--model-config".as_ref(),
        config.as_os_str(),
        "--prompt-tokens".as_ref(),
        "512".as_ref(),
        "--decode-steps".as_ref(),
        "64".as_ref(),
        "--batch-size".as_ref(),
        "1".as_ref(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let b = llmprof_store::read_bundle(&run).unwrap();
    let a = b.analysis.as_ref().unwrap();
    assert_eq!(a.model.as_ref().unwrap().model_type, "qwen2");
    let decode = a.stages.iter().find(|s| s.name == "decode").unwrap();
    assert!(decode.mfu.is_some_and(|m| m > 0.0 && m < 1.0), "{decode:?}");
    assert!(decode.mbu.is_some_and(|m| m > 0.0 && m < 1.0), "{decode:?}");
    let show = llmprof(["show".as_ref(), run.as_os_str()]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(!text.contains("no model config"), "{text}");
}

/// The manual test flow's artifact check (`tests/manual/stage2_profile/check_run.py`) passes on
/// every committed sample run, and fails on a run whose stored TTFT was tampered with.
#[test]
fn manual_flow_check_passes_on_the_sample_runs() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/manual/stage2_profile/check_run.py");
    let check = |run: &std::path::Path| {
        std::process::Command::new("python3")
            .arg(&script)
            .arg("--trimmed")
            .arg(run)
            .output()
            .expect("python3 runs the check")
    };
    for run in llmprof_store::list_runs(&fixture("sample-runs")).unwrap() {
        let o = check(&run);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}:\n{text}", run.display());
        assert!(text.contains("PASS  headline"), "{text}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = fixture("sample-runs/20261123-214632-qwen2.5-0.5b-light");
    let mut b: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("bundle.json")).unwrap()).unwrap();
    b["analysis"]["run"]["ttft_ns"]["median"] = serde_json::json!(1.0);
    std::fs::write(tmp.path().join("bundle.json"), b.to_string()).unwrap();
    std::fs::copy(
        src.join("timeline.json.gz"),
        tmp.path().join("timeline.json.gz"),
    )
    .unwrap();
    let o = check(tmp.path());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        !o.status.success() && text.contains("FAIL  headline"),
        "{text}"
    );
}

/// The H100 `--cmd` capture given `--model-config` and token flags: MFU from the first
/// analysis, the config copied into the run, and its memory is NVML's (the workload reported
/// none), labelled as the whole device's.
#[test]
fn a_cmd_capture_with_a_model_config_has_mfu_and_nvml_memory() {
    let run = fixture("sample-runs/20261123-220459-workload-light-model-config");
    let b = llmprof_store::read_bundle(&run).unwrap();
    assert!(run.join("raw/config.json").is_file());
    let a = b.analysis.as_ref().unwrap();
    let prefill = a.stages.iter().find(|s| s.name == "prefill").unwrap();
    assert!(
        prefill.mfu.is_some_and(|m| m > 0.0 && m < 1.0),
        "{prefill:?}"
    );
    let m = b.capture.as_ref().unwrap().memory.as_ref().unwrap();
    assert!(m.nvml_used && m.stages.len() == 2, "{m:?}");
    let show = llmprof(["show".as_ref(), run.as_os_str()]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.contains("prefill peak used (NVML)"), "{text}");
    assert!(text.contains("(--prompt-tokens flag)"), "{text}");
}

/// `LLMPROF_SPANS` records where the reading's threads spent their time, and changes nothing
/// in the run.
#[test]
fn spans_are_written_on_request_and_change_nothing() {
    let out = tempfile::tempdir().unwrap();
    let spans = out.path().join("spans.txt");
    let trace = h200("kineto_trace.json.gz");
    let ingest = |label: &str, spans: Option<&Path>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_llmprof"));
        cmd.args(["ingest", "--label", label, "--out"])
            .arg(out.path())
            .arg("--kineto")
            .arg(&trace);
        if let Some(s) = spans {
            cmd.env("LLMPROF_SPANS", s);
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let dir = stdout(&o).lines().last().unwrap().to_string();
        let bundle = std::fs::read_to_string(Path::new(&dir).join("bundle.json")).unwrap();
        (stderr(&o), Bundle::from_json(&bundle).unwrap())
    };
    let (said, with) = ingest("spans", Some(&spans));
    assert!(
        said.contains(&format!("spans written to {}", spans.display())),
        "{said}"
    );
    let (said, mut without) = ingest("spans", None);
    assert!(!said.contains("spans written"), "{said}");
    without.run_id = with.run_id.clone();
    assert_eq!(
        serde_json::to_value(&with).unwrap(),
        serde_json::to_value(&without).unwrap()
    );
    let text = std::fs::read_to_string(&spans).unwrap();
    let kinds: std::collections::HashSet<(&str, &str)> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 5, "{l}");
            let (a, b): (u64, u64) = (f[2].parse().unwrap(), f[3].parse().unwrap());
            // A span's start and end; a `sched` line's time on a core and in the run queue.
            assert!(f[1] == "sched" || a <= b, "{l}");
            (f[0], f[1])
        })
        .collect();
    for want in [
        ("main", "ingest"),
        ("main", "read-trace"),
        ("main", "merge"),
        ("parse-worker", "parse"),
        ("gunzip", "fill"),
        // The phases after the reading.
        ("main", "close-input"),
        ("main", "gather"),
        ("unnamed", "operators"),
        ("main", "finish"),
        ("main", "analyze"),
        ("main", "write-run"),
    ] {
        assert!(kinds.contains(&want), "no {want:?} span in:\n{text}");
    }
    // Linux's schedstat of the calling thread, read when the file is written, where the
    // kernel gives it.
    let schedstat = Path::new("/proc/thread-self/schedstat").exists();
    assert_eq!(kinds.contains(&("main", "sched")), schedstat, "{text}");
    let summed = script("spans.py", &[spans.as_os_str(), "50".as_ref()]);
    let wanted = ["reading the trace:", "run queue"];
    for want in &wanted[..1 + usize::from(schedstat)] {
        assert!(
            stdout(&summed).contains(want),
            "no {want:?} in:\n{}",
            stdout(&summed)
        );
    }
    // The medians over rounds, per input (`gz-phases.sh` names the files `<input>.<round>`).
    let rounds = out.path().join("rounds");
    std::fs::create_dir(&rounds).unwrap();
    for round in 1..=2 {
        std::fs::copy(&spans, rounds.join(format!("trace.json.gz.{round}"))).unwrap();
    }
    let phases = script("gz-phases.py", &[rounds.as_os_str()]);
    for want in [
        "median of 2",
        "trace.json.gz",
        "the reading",
        "after the reading",
    ] {
        assert!(
            stdout(&phases).contains(want),
            "no {want:?} in:\n{}",
            stdout(&phases)
        );
    }
}

/// A `gpu-jobs` Python script run on `args`, which must succeed.
fn script(name: &str, args: &[&std::ffi::OsStr]) -> std::process::Output {
    let o = std::process::Command::new("python3")
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("gpu-jobs")
                .join(name),
        )
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{name}: {}", stderr(&o));
    o
}
