//! Multi-rank runs and communication, on the HolisticTraceAnalysis traces of real NCCL jobs
//! (`tests/fixtures/hta-multirank/`: two ranks of a 128-rank training job, rank 0 of a 2-rank
//! job). They are training traces: the checks are what is true of any trace — counts and
//! times equal the trace's own events, overlap equals an independent sweep — not
//! inference-shaped expectations.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;
use llmprof_bundle::{Bundle, Category};
use llmprof_ingest::{ingest, IngestRequest};
use serde_json::Value;

use crate::common::{fixture, h200, llmprof};

fn hta(file: &str) -> PathBuf {
    fixture(&format!("hta-multirank/{file}"))
}

fn raw_events(path: &Path) -> Vec<Value> {
    let v: Value = serde_json::from_reader(GzDecoder::new(std::fs::File::open(path).unwrap()))
        .expect("trace JSON");
    v["traceEvents"].as_array().unwrap().clone()
}

fn ingest_one(path: &Path) -> Bundle {
    let req = IngestRequest {
        kineto: Some(path.to_path_buf()),
        ..Default::default()
    };
    ingest(&req, &mut |_| {}).unwrap().bundle
}

/// A kernel event's `[start, end)` in ns, as llmprof reads µs with three decimals exactly
/// (integers as integers: an epoch in µs × 1000 is beyond f64's exact range).
fn span_ns(e: &Value) -> (i64, i64) {
    let us = |v: &Value| {
        v.as_i64().map_or_else(
            || (v.as_f64().unwrap() * 1000.0).round() as i64,
            |i| i * 1000,
        )
    };
    let s = us(&e["ts"]);
    (s, s + us(&e["dur"]))
}

/// Collective counts, times and message sizes per rank equal the trace's own kernel events:
/// grouped by the `Collective name` argument where the trace has it (the 2-rank job), by the
/// kernel name otherwise (the sampled 128-rank job).
#[test]
fn collective_counts_and_times_per_rank_equal_the_traces() {
    for file in [
        "nccl_rank0_of_2.json.gz",
        "sampled_rank-0.json.gz",
        "sampled_rank-1.json.gz",
    ] {
        let path = hta(file);
        let b = ingest_one(&path);
        let comm = b.communication.as_ref().expect("communication");
        let mut want: std::collections::BTreeMap<String, (u64, i64, u64)> = Default::default();
        for e in raw_events(&path) {
            if e["cat"] != "kernel" || !e["name"].as_str().unwrap().starts_with("nccl") {
                continue;
            }
            let key = match e["args"]["Collective name"].as_str() {
                Some(c) => format!("{c}/{}", e["args"]["dtype"].as_str().unwrap_or("")),
                None => llmprof_bundle::names::collective(e["name"].as_str().unwrap())
                    .unwrap_or("unknown")
                    .to_string(),
            };
            let (s, end) = span_ns(&e);
            let w = want.entry(key).or_default();
            w.0 += 1;
            w.1 += end - s;
            w.2 += e["args"]["In msg nelems"].as_u64().unwrap_or(0);
        }
        let got: std::collections::BTreeMap<String, (u64, i64, u64)> = comm
            .collectives
            .iter()
            .map(|c| {
                let key = match &c.dtype {
                    Some(d) => format!("{}/{d}", c.collective),
                    None => c.collective.clone(),
                };
                (
                    key,
                    (c.calls, c.total_ns as i64, c.in_elements.unwrap_or(0)),
                )
            })
            .collect();
        assert_eq!(got, want, "{file}");
        let whole = &comm.windows[0];
        assert_eq!(whole.name, "whole trace");
        let kernel_comm: u64 = (b.kernels.iter())
            .filter(|k| k.category == Category::Communication)
            .map(|k| k.total_ns)
            .sum();
        // Communication kernels of one rank never overlap each other in these traces, so
        // their union is their sum.
        assert_eq!(whole.comm_ns, kernel_comm, "{file}");
    }
    // The 2-rank job's NCCL 2.17 metadata: 15 float all-reduces on process group 0 of 2 ranks.
    let b = ingest_one(&hta("nccl_rank0_of_2.json.gz"));
    let ar = &b.communication.unwrap().collectives[0];
    assert_eq!(
        (
            ar.collective.as_str(),
            ar.calls,
            ar.group_size,
            ar.process_group.as_deref()
        ),
        ("allreduce", 15, Some(2), Some("0"))
    );
    assert_eq!(ar.in_bytes, ar.in_elements.map(|n| n * 4));
}

/// Overlap over the whole trace equals an independent sweep over the trace's kernel events:
/// at every event boundary, whether a communication and a computation kernel are running.
#[test]
fn overlap_equals_a_sweep_over_the_trace_events() {
    for file in ["nccl_rank0_of_2.json.gz", "sampled_rank-1.json.gz"] {
        let path = hta(file);
        let b = ingest_one(&path);
        let mut edges: Vec<(i64, i32, bool)> = Vec::new();
        for e in raw_events(&path).iter().filter(|e| e["cat"] == "kernel") {
            let comm = e["name"].as_str().unwrap().starts_with("nccl");
            let (s, end) = span_ns(e);
            edges.push((s, 1, comm));
            edges.push((end, -1, comm));
        }
        edges.sort();
        let (mut comm_n, mut compute_n, mut last) = (0i32, 0i32, i64::MIN);
        let (mut comm, mut exposed, mut compute) = (0i64, 0i64, 0i64);
        for (t, d, is_comm) in edges {
            if last != i64::MIN {
                let dt = t - last;
                comm += dt * i64::from(comm_n > 0);
                compute += dt * i64::from(compute_n > 0);
                exposed += dt * i64::from(comm_n > 0 && compute_n == 0);
            }
            last = t;
            if is_comm {
                comm_n += d;
            } else {
                compute_n += d;
            }
        }
        let w = &b.communication.unwrap().windows[0];
        assert_eq!(
            (
                w.comm_ns as i64,
                w.compute_ns as i64,
                w.exposed_comm_ns as i64
            ),
            (comm, compute, exposed),
            "{file}"
        );
        assert!(w.overlap_pct > 0.0 && w.overlap_pct < 100.0, "{file}");
        assert_eq!(
            w.window_ns - w.compute_ns,
            w.comm_wait_ns + w.host_ns + w.other_ns,
            "{file}: time without computation splits into its causes"
        );
    }
}

fn run_dirs(runs: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(runs)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Two ranks given as two --kineto traces make one run: each rank's complete run under
/// ranks/<rank>/, and a top-level bundle whose rank table holds each rank's own numbers and
/// whose tables pool them. `llmprof merge` of the two ranks ingested apart makes the same run.
#[test]
fn two_ranks_make_one_run_by_ingest_or_by_merge() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let (r0, r1) = (hta("sampled_rank-0.json.gz"), hta("sampled_rank-1.json.gz"));
    let out = llmprof([
        "ingest".as_ref(),
        "--kineto".as_ref(),
        r1.as_os_str(),
        "--kineto".as_ref(),
        r0.as_os_str(),
        "--out".as_ref(),
        runs.as_os_str(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let top = llmprof_store::read_bundle(&run).unwrap();
    let set = top.ranks.as_ref().expect("ranks");
    assert_eq!(set.world_size, 128);
    assert_eq!(set.ranks.iter().map(|e| e.rank).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(set.missing.len(), 126);
    assert!(top.diagnostics.iter().any(|d| d.code == "ranks.missing"));
    let mut kernels = 0;
    for e in &set.ranks {
        let rank = llmprof_store::read_bundle(&run.join(&e.dir)).unwrap();
        assert_eq!(rank.environment.distributed.as_ref().unwrap().rank, e.rank);
        assert!(llmprof_store::timeline_path(&run.join(&e.dir)).is_some());
        let whole = &rank.communication.as_ref().unwrap().windows[0];
        assert_eq!((e.kernels, e.comm_ns), (rank.totals.kernels, whole.comm_ns));
        kernels += rank.totals.kernels;
    }
    assert_eq!(top.totals.kernels, kernels);
    assert_eq!(
        top.kernels
            .iter()
            .filter(|k| k.kind == llmprof_bundle::OpKind::Kernel)
            .map(|k| k.calls)
            .sum::<u64>(),
        kernels
    );
    // Both traces run ProfilerStep#551: pooled, it has both ranks' instances.
    let step = top
        .stages
        .iter()
        .find(|s| s.name == "ProfilerStep#551")
        .unwrap();
    assert_eq!(step.instances, 2);
    assert!(set
        .skew
        .iter()
        .any(|s| s.stage == "ProfilerStep#551" && s.median_ns.iter().all(Option::is_some)));
    let show = llmprof(["show".as_ref(), run.as_os_str()]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("Ranks") && text.contains("Rank skew") && text.contains("sendrecv"),
        "{text}"
    );

    // The same ranks ingested apart, then merged.
    let apart = dir.path().join("apart");
    let mut singles = Vec::new();
    for r in [&r0, &r1] {
        let o = llmprof([
            "ingest".as_ref(),
            "--kineto".as_ref(),
            r.as_os_str(),
            "--out".as_ref(),
            apart.as_os_str(),
        ]);
        assert!(o.status.success());
        singles.push(PathBuf::from(String::from_utf8(o.stdout).unwrap().trim()));
    }
    let merged_runs = dir.path().join("merged");
    let o = llmprof([
        "merge".as_ref(),
        singles[1].as_os_str(),
        singles[0].as_os_str(),
        "--out".as_ref(),
        merged_runs.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let merged = PathBuf::from(String::from_utf8(o.stdout).unwrap().trim());
    let m = llmprof_store::read_bundle(&merged).unwrap();
    assert_eq!(m.totals, top.totals);
    // Equal but for the last bits of pooled standard deviations (JSON's float parsing).
    let without_std = |b: &Bundle| -> Vec<llmprof_bundle::Kernel> {
        (b.kernels.iter())
            .map(|k| llmprof_bundle::Kernel {
                std_ns: (k.std_ns * 1e3).round(),
                ..k.clone()
            })
            .collect()
    };
    assert_eq!(without_std(&m), without_std(&top));
    assert_eq!(m.ranks.as_ref().unwrap().skew, set.skew);
    assert!(llmprof_store::timeline_path(&merged.join("ranks/1")).is_some());
}

/// Input that must not be mixed: the same rank twice, ranks of two jobs (world sizes
/// disagree), a trace with a rank beside one without. Each is a clear error naming the files,
/// and no run (or half-written directory) is left.
#[test]
fn ranks_of_other_jobs_or_given_twice_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let cases: [(&[PathBuf], &str); 3] = [
        (
            &[hta("sampled_rank-0.json.gz"), hta("sampled_rank-0.json.gz")],
            "are both rank 0",
        ),
        (
            &[
                hta("nccl_rank0_of_2.json.gz"),
                hta("sampled_rank-1.json.gz"),
            ],
            "different jobs",
        ),
        (
            &[hta("sampled_rank-1.json.gz"), h200("kineto_trace.json.gz")],
            "has no rank",
        ),
    ];
    for (files, want) in cases {
        let mut args: Vec<std::ffi::OsString> = vec!["ingest".into()];
        for f in files {
            args.push("--kineto".into());
            args.push(f.into());
        }
        args.extend(["--out".into(), runs.clone().into()]);
        let out = llmprof(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{want}: {err}");
        assert!(err.contains(want), "{want}: {err}");
        assert!(err.contains(".json.gz"), "the error names the file: {err}");
        assert!(run_dirs(&runs).is_empty(), "{want}: {:?}", run_dirs(&runs));
    }
    let one = llmprof(["merge", "nonexistent-run"]);
    assert!(!one.status.success());
}

/// A real Nsight Systems export of two processes (H100, `tests/fixtures/h100-nsys-two-processes`)
/// becomes a run of two ranks, one per process; the pooled tables equal what `nsys stats` says
/// of the whole export: `nvtx_sum` stage by stage (instances, total, min, max, mean, median,
/// standard deviation: every instance is pooled), `cuda_gpu_kern_sum` kernel by kernel (all but
/// the median, which a merge of bundles takes as the median of the ranks' medians).
#[test]
fn two_processes_of_one_nsys_export_are_two_ranks_whose_pool_equals_nsys_stats() {
    use crate::common::{assert_1dp, csv_rows, num};
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let fixture_dir = fixture("h100-nsys-two-processes");
    let export = fixture_dir.join("nsys_export.sqlite.gz");
    let out = llmprof([
        "ingest".as_ref(),
        "--nsys".as_ref(),
        export.as_os_str(),
        "--out".as_ref(),
        runs.as_os_str(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("2 processes ran kernels"), "{err}");
    let run = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let top = llmprof_store::read_bundle(&run).unwrap();
    let set = top.ranks.as_ref().unwrap();
    assert_eq!((set.world_size, set.ranks.len()), (2, 2));
    assert!(top.diagnostics.iter().any(|d| d.code == "ranks.from_order"));
    for e in &set.ranks {
        assert_eq!(e.kernels, 1671, "rank {}", e.rank);
        assert_eq!(e.clock_offset_ns, 0, "one session, one clock");
    }
    let stats = fixture_dir.join("nsys_stats");
    let rows = csv_rows(&stats.join("nvtx_sum.csv"));
    assert_eq!(rows.len(), top.stages.len());
    for row in rows {
        let name = row["Range"].trim_start_matches(':');
        let s = top.stages.iter().find(|s| s.name == name).unwrap();
        assert_eq!(s.instances as f64, num(&row, "Instances"), "{name}");
        assert_eq!(s.wall_ns as f64, num(&row, "Total Time (ns)"), "{name}");
        assert_eq!(s.wall.min_ns as f64, num(&row, "Min (ns)"), "{name}");
        assert_eq!(s.wall.max_ns as f64, num(&row, "Max (ns)"), "{name}");
        assert_1dp(s.wall.mean_ns, num(&row, "Avg (ns)"), name);
        assert_1dp(s.wall.median_ns, num(&row, "Med (ns)"), name);
        assert_1dp(s.wall.std_ns, num(&row, "StdDev (ns)"), name);
    }
    let rows = csv_rows(&stats.join("cuda_gpu_kern_sum.csv"));
    let kernels: Vec<&llmprof_bundle::Kernel> = (top.kernels.iter())
        .filter(|k| k.kind == llmprof_bundle::OpKind::Kernel)
        .collect();
    assert_eq!(rows.len(), kernels.len());
    for row in rows {
        let name = row["Name"].as_str();
        let k = kernels.iter().find(|k| k.name == name).unwrap();
        assert_eq!(k.calls as f64, num(&row, "Instances"), "{name}");
        assert_eq!(k.total_ns as f64, num(&row, "Total Time (ns)"), "{name}");
        assert_eq!(k.min_ns as f64, num(&row, "Min (ns)"), "{name}");
        assert_eq!(k.max_ns as f64, num(&row, "Max (ns)"), "{name}");
        assert_1dp(k.mean_ns, num(&row, "Avg (ns)"), name);
        assert_1dp(k.std_ns, num(&row, "StdDev (ns)"), name);
        assert_1dp(k.time_pct, num(&row, "Time (%)"), name);
    }
}
