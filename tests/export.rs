//! `llmprof export --format chrome`: the Chrome trace of committed sample runs read back — as
//! JSON against the run's own bundle (every kernel call, its category and Nsight Compute
//! metrics, the stages as annotations, the NVML counters inside the trace), and by a real
//! client, HolisticTraceAnalysis, whose kernel totals per name must equal the bundle's.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use llmprof_bundle::{Bundle, OpKind};
use serde_json::Value;

use crate::common::{fixture, h200, llmprof};

/// A standard-mode H100 run: nsys timeline with NVML samples, 340,015 kernels.
const STANDARD: &str = "sample-runs/20261123-190406-qwen2.5-0.5b-standard";
/// A deep-mode run: kernels with Nsight Compute results.
const DEEP: &str = "sample-runs/20261122-040409-qwen2.5-0.5b-deep";

fn bundle(run: &str) -> Bundle {
    llmprof_store::read_bundle(&fixture(run)).unwrap()
}

/// The H200 fixture's Nsight Systems export ingested into `dir/runs` (a timeline with launch
/// calls: the committed sample runs were ingested before it kept them); its run directory.
fn ingest_h200(dir: &Path) -> PathBuf {
    let runs = dir.join("runs");
    let o = llmprof([
        "ingest".as_ref(),
        "--nsys".as_ref(),
        h200("nsys_export.sqlite.gz").as_os_str(),
        "--out".as_ref(),
        runs.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    llmprof_store::list_runs(&runs).unwrap().pop().unwrap()
}

/// Exports `run` into `dir/rank-0.json` and returns the file.
fn export(run: &str, dir: &Path) -> PathBuf {
    export_dir(&fixture(run), dir)
}

fn export_dir(run: &Path, dir: &Path) -> PathBuf {
    let file = dir.join("rank-0.json");
    let o = llmprof([
        "export".as_ref(),
        run.as_os_str(),
        "--format".as_ref(),
        "chrome".as_ref(),
        "-o".as_ref(),
        file.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("kernels"));
    file
}

fn events(file: &Path) -> (Value, Vec<Value>) {
    let mut doc: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap().clone();
    doc["traceEvents"] = Value::Null;
    (doc, events)
}

fn of_cat<'a>(events: &'a [Value], cat: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    events.iter().filter(move |e| e["cat"] == cat)
}

/// `ts`/`dur` text (µs, three decimals) back to ns.
fn ns(v: &Value) -> i64 {
    (v.as_f64().unwrap() * 1000.0).round() as i64
}

/// Per kernel name, calls and total ns of the trace's `kernel` events equal the bundle's rows
/// (which equal `nsys stats`' cuda_gpu_kern_sum, tests/nsys_stats_match.rs), each event carries
/// its row's category, device and stream, and the stages are annotations in the host and on the
/// GPU, the GPU one inside the time of the work it spans.
#[test]
fn chrome_trace_holds_every_kernel_with_the_bundles_totals() {
    let dir = tempfile::tempdir().unwrap();
    let (doc, events) = events(&export(STANDARD, dir.path()));
    let b = bundle(STANDARD);
    assert_eq!(doc["displayTimeUnit"], "ms");
    assert_eq!(
        doc["deviceProperties"][0]["name"],
        b.device.as_ref().unwrap().name.as_str()
    );
    let mut totals: HashMap<&str, (u64, i64)> = HashMap::new();
    let rows: HashMap<&str, &llmprof_bundle::Kernel> =
        b.kernels.iter().map(|k| (k.name.as_str(), k)).collect();
    for e in of_cat(&events, "kernel") {
        let name = e["name"].as_str().unwrap();
        let t = totals.entry(name).or_default();
        t.0 += 1;
        t.1 += ns(&e["dur"]);
        assert_eq!(
            e["args"]["category"],
            rows[name].category.as_str(),
            "{name}"
        );
        assert_eq!(e["args"]["stream"], e["tid"]);
        assert_eq!(e["args"]["device"], e["pid"]);
    }
    let kernel_rows: Vec<_> = b
        .kernels
        .iter()
        .filter(|k| k.kind == OpKind::Kernel)
        .collect();
    assert_eq!(totals.len(), kernel_rows.len());
    for k in kernel_rows {
        assert_eq!(
            totals[k.name.as_str()],
            (k.calls, k.total_ns as i64),
            "{}",
            k.name
        );
    }
    let memsets = of_cat(&events, "gpu_memset").count() as u64;
    let memset_row = b.kernels.iter().find(|k| k.kind == OpKind::Memset).unwrap();
    assert_eq!(memsets, memset_row.calls);
    let host: Vec<_> = of_cat(&events, "user_annotation").collect();
    let instances: u64 = b.stages.iter().map(|s| s.instances).sum();
    assert_eq!(host.len() as u64, instances);
    let decode = b.stages.iter().find(|s| s.name == "decode").unwrap();
    let gpu_decode: Vec<_> = of_cat(&events, "gpu_user_annotation")
        .filter(|e| e["name"] == "decode")
        .collect();
    assert_eq!(gpu_decode.len() as u64, decode.instances);
    assert!(gpu_decode.iter().all(|e| ns(&e["dur"]) > 0));
}

/// NVML samples become counter events inside the trace's time span; each carries a value.
#[test]
fn chrome_trace_has_nvml_counters_inside_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let (_, events) = events(&export(STANDARD, dir.path()));
    let counters: Vec<_> = events.iter().filter(|e| e["ph"] == "C").collect();
    let power: Vec<_> = counters
        .iter()
        .filter(|e| e["name"] == "GPU power (W)")
        .collect();
    assert!(power.len() > 100, "{} power samples", power.len());
    assert!(power
        .iter()
        .all(|e| (50.0..1000.0).contains(&e["args"]["value"].as_f64().unwrap())));
    let spans: Vec<(i64, i64)> = of_cat(&events, "kernel")
        .map(|e| (ns(&e["ts"]), ns(&e["ts"]) + ns(&e["dur"])))
        .collect();
    let first = spans.iter().map(|s| s.0).min().unwrap();
    let last = spans.iter().map(|s| s.1).max().unwrap();
    let slack = 60_000_000_000; // the trace's ranges reach beyond its kernels
    assert!(counters
        .iter()
        .all(|e| (first - slack..last + slack).contains(&ns(&e["ts"]))));
}

/// A deep run's kernels that Nsight Compute profiled carry its metrics (the mean over the
/// row's results, as `ncu results` says); the others carry none.
#[test]
fn chrome_trace_carries_ncu_metrics_of_profiled_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let (_, events) = events(&export(DEEP, dir.path()));
    let b = bundle(DEEP);
    let profiled: HashMap<&str, usize> = b
        .kernels
        .iter()
        .filter(|k| !k.ncu.is_empty())
        .map(|k| (k.name.as_str(), k.ncu.len()))
        .collect();
    assert!(!profiled.is_empty());
    let mut seen = 0;
    for e in of_cat(&events, "kernel") {
        let name = e["name"].as_str().unwrap();
        match profiled.get(name) {
            Some(&n) => {
                seen += 1;
                assert_eq!(e["args"]["ncu results"], n as u64, "{name}");
                let sm = e["args"]["ncu SM throughput %"].as_f64().unwrap();
                assert!((0.0..=100.0).contains(&sm), "{name}: {sm}");
            }
            None => assert!(e["args"].get("ncu results").is_none(), "{name}"),
        }
    }
    assert!(seen > 0);
}

/// The launch calls of a run ingested from Nsight Systems: every kernel, memcpy and memset
/// carries its call's correlation id; each call is one `cuda_runtime`/`cuda_driver` event on its
/// host thread, named as the PyTorch profiler names it (no `_v7000` suffix), that starts no
/// later than its op, with one flow arrow from the call to its first op.
#[test]
fn chrome_trace_links_launch_calls_to_their_ops() {
    let dir = tempfile::tempdir().unwrap();
    let run = ingest_h200(dir.path());
    assert!(run.join("launch_calls.json").is_file());
    let timeline = std::fs::read_to_string(run.join("timeline.json")).unwrap();
    assert!(
        !timeline.contains("correlation"),
        "launch calls stay out of timeline.json"
    );
    let (_, events) = events(&export_dir(&run, dir.path()));
    let b = llmprof_store::read_bundle(&run).unwrap();
    let mut calls: HashMap<i64, &Value> = HashMap::new();
    for e in events
        .iter()
        .filter(|e| e["cat"] == "cuda_runtime" || e["cat"] == "cuda_driver")
    {
        let corr = e["args"]["correlation"].as_i64().unwrap();
        assert!(calls.insert(corr, e).is_none(), "correlation {corr} twice");
        let name = e["name"].as_str().unwrap();
        assert!(!name.contains("_v"), "{name}");
    }
    let ops: Vec<&Value> = ["kernel", "gpu_memcpy", "gpu_memset"]
        .iter()
        .flat_map(|c| of_cat(&events, c))
        .collect();
    let ops_in_bundle: u64 = b.kernels.iter().map(|k| k.calls).sum();
    assert_eq!(ops.len() as u64, ops_in_bundle);
    for op in &ops {
        let corr = op["args"]["correlation"].as_i64().unwrap();
        let call = calls[&corr];
        assert!(ns(&call["ts"]) <= ns(&op["ts"]), "call {corr} after its op");
    }
    assert!(calls.values().any(|c| c["name"] == "cudaLaunchKernel"));
    let starts = events.iter().filter(|e| e["ph"] == "s").count();
    let ends: Vec<_> = events.iter().filter(|e| e["ph"] == "f").collect();
    assert_eq!((starts, ends.len()), (calls.len(), calls.len()));
    assert!(ends.iter().all(|f| f["bp"] == "e" && f["cat"] == "ac2g"));
}

/// A run without a timeline, and `--format csv` without a directory, are errors that say so.
#[test]
fn chrome_export_errors_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture(STANDARD).join("bundle.json"),
        dir.path().join("bundle.json"),
    )
    .unwrap();
    let o = llmprof([
        "export".as_ref(),
        dir.path().as_os_str(),
        "--format".as_ref(),
        "chrome".as_ref(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("no timeline.json"),
        "{err}"
    );
    let o = llmprof([
        "export".as_ref(),
        fixture(STANDARD).as_os_str(),
        "--format".as_ref(),
        "csv".as_ref(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("DIR"), "{err}");
}

/// HolisticTraceAnalysis (PyPI, `.ci/hta-venv`) loads the exported traces of the standard
/// sample run and of the H200 export ingested with its launch calls: per kernel name, the calls
/// and total time in the dataframe it parsed, and the sum of its own
/// `get_gpu_kernel_breakdown`, equal the bundle's rows; its `get_cuda_kernel_launch_stats`
/// joins every cudaLaunchKernel/ExC, cudaMemcpyAsync and cudaMemsetAsync call to its op; two
/// ranks' exports load as two ranks.
/// `LLMPROF_HTA_PYTHON` names the interpreter (the test command sets it); without it the test
/// says it was skipped.
#[test]
fn hta_reads_the_chrome_trace_with_the_bundles_kernel_totals() {
    let Some(python) = std::env::var_os("LLMPROF_HTA_PYTHON") else {
        eprintln!("skipped: LLMPROF_HTA_PYTHON is not set (the test command sets it to .ci/hta-venv's python)");
        return;
    };
    let standard = tempfile::tempdir().unwrap();
    export(STANDARD, standard.path());
    let hta = &hta_totals(&python, standard.path())["ranks"]["0"];
    assert_kernel_totals(hta, &bundle(STANDARD));
    assert_eq!(
        hta["launch_stats_rows"], 0,
        "the sample run has no launch calls"
    );

    let h200 = tempfile::tempdir().unwrap();
    let run = ingest_h200(h200.path());
    let trace = h200.path().join("trace");
    let (_, events) = events(&export_dir(&run, &trace));
    let hta = &hta_totals(&python, &trace)["ranks"]["0"];
    assert_kernel_totals(hta, &llmprof_store::read_bundle(&run).unwrap());
    let joined = [
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
    ];
    let wanted: std::collections::HashSet<i64> = events
        .iter()
        .filter(|e| e["cat"] == "cuda_runtime" && joined.contains(&e["name"].as_str().unwrap()))
        .map(|e| e["args"]["correlation"].as_i64().unwrap())
        .collect();
    let ops = events
        .iter()
        .filter(|e| e["pid"] != llmprof_report::chrome_export::HOST_PID && e["ph"] == "X")
        .filter(|e| {
            e["args"]["correlation"]
                .as_i64()
                .is_some_and(|c| wanted.contains(&c))
        })
        .count();
    assert!(ops > 10_000, "{ops}");
    assert_eq!(hta["launch_stats_rows"], ops as u64);

    // Two ranks of a 128-rank job (HTA's own test traces, ingested and exported): HTA finds
    // both ranks by the exports' distributedInfo, with the kernel names it finds in the source
    // traces themselves. Calls are not compared here: on these sampled traces HTA keeps only
    // some events (5 of rank 0's 10 NCCL SendRecv kernels, in the source trace as in the
    // export), and one fbgemm kernel differs by one call between source and export.
    let multi = tempfile::tempdir().unwrap();
    ingest_ranks(multi.path());
    let source = multi.path().join("source");
    std::fs::create_dir_all(&source).unwrap();
    for rank in 0..2 {
        let gz = fixture(&format!("hta-multirank/sampled_rank-{rank}.json.gz"));
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut flate2::read::GzDecoder::new(std::fs::File::open(gz).unwrap()),
            &mut text,
        )
        .unwrap();
        std::fs::write(source.join(format!("rank-{rank}.json")), text).unwrap();
    }
    let ours = hta_totals(&python, &multi.path().join("trace"));
    let theirs = hta_totals(&python, &source);
    assert_eq!(ours["ranks"].as_object().unwrap().len(), 2);
    for rank in ["0", "1"] {
        let names = |v: &Value| -> Vec<String> {
            v["ranks"][rank]["kernels"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect()
        };
        assert!(names(&ours).len() > 100, "rank {rank}");
        assert_eq!(names(&ours), names(&theirs), "rank {rank}");
    }
}

/// HTA's sampled traces of ranks 0 and 1 ingested into `dir/runs` and exported to
/// `dir/trace/rank-N.json`; the run directories in rank order.
fn ingest_ranks(dir: &Path) -> Vec<PathBuf> {
    (0..2)
        .map(|rank| {
            let runs = dir.join(format!("runs-{rank}"));
            let trace = fixture(&format!("hta-multirank/sampled_rank-{rank}.json.gz"));
            let o = llmprof([
                "ingest".as_ref(),
                "--kineto".as_ref(),
                trace.as_os_str(),
                "--out".as_ref(),
                runs.as_os_str(),
            ]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let run = llmprof_store::list_runs(&runs).unwrap().pop().unwrap();
            let file = dir.join("trace").join(format!("rank-{rank}.json"));
            let o = llmprof([
                "export".as_ref(),
                run.as_os_str(),
                "--format".as_ref(),
                "chrome".as_ref(),
                "-o".as_ref(),
                file.as_os_str(),
            ]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            run
        })
        .collect()
}

/// A rank's export says which rank it is, in the header HTA reads (`"rank": N`, with the
/// space its pattern needs), with the world size and backend of the trace it came from.
#[test]
fn chrome_trace_keeps_the_ranks_distributed_info() {
    let dir = tempfile::tempdir().unwrap();
    ingest_ranks(dir.path());
    for rank in 0..2 {
        let file = dir.path().join(format!("trace/rank-{rank}.json"));
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains(&format!("\"rank\": {rank}")));
        let (doc, events) = events(&file);
        assert_eq!(doc["distributedInfo"]["rank"], rank);
        assert_eq!(doc["distributedInfo"]["world_size"], 128);
        assert_eq!(doc["distributedInfo"]["backend"], "nccl");
        assert!(of_cat(&events, "kernel").count() > 100);
    }
}

/// What `tests/hta/kernel_totals.py` prints for the traces in `dir`: per rank, its kernels and
/// launch statistics.
fn hta_totals(python: &std::ffi::OsStr, dir: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hta/kernel_totals.py");
    let o = Command::new(python).arg(script).arg(dir).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn assert_kernel_totals(hta: &Value, b: &Bundle) {
    let rows: Vec<_> = b
        .kernels
        .iter()
        .filter(|k| k.kind == OpKind::Kernel)
        .collect();
    let names = hta["kernels"]
        .as_object()
        .unwrap_or_else(|| panic!("no kernels in {hta}"));
    assert_eq!(names.len(), rows.len());
    for k in rows {
        let h = &hta["kernels"][k.name.as_str()];
        assert_eq!(h["calls"], k.calls, "{}", k.name);
        assert_eq!(h["total_ns"], k.total_ns, "{}", k.name);
        let breakdown_ns = h["breakdown_sum_us"].as_f64().unwrap() * 1000.0;
        assert!(
            (breakdown_ns - k.total_ns as f64).abs() < 1.0,
            "{}: {breakdown_ns}",
            k.name
        );
    }
}
