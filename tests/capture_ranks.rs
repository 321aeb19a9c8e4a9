//! `llmprof capture --nproc 2` on recorded output: the raw directory of a real two-GPU capture
//! (`tests/fixtures/h200x2-tp2-capture/`: tensor parallel under torchrun on two H200s, one
//! Nsight Systems report of both ranks, a PyTorch-profiler trace and the driver's timings per
//! rank) assembled and saved again as the capture does after its passes, and held to the
//! export itself: each rank's kernels and collectives are its process's rows.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Read;
use std::path::{Path, PathBuf};

use llmprof_bundle::{Bundle, Capture};
use llmprof_capture::{CaptureOptions, CaptureOutput, CaptureRun, Override, RankOutput};

use crate::common::*;

const FIXTURE: &str = "h200x2-tp2-capture";

/// The recorded capture, as the passes leave it: the fixture's `raw/` copied into a working
/// directory, and what the passes hand to assembly (each rank's capture record as the real
/// capture computed it, `records.json`).
struct Recorded {
    dir: tempfile::TempDir,
    plan: llmprof_capture::Plan,
    output: CaptureOutput,
    records: serde_json::Value,
}

fn recorded() -> Recorded {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join(".capture-qwen2.5-0.5b-recorded");
    let raw = work.join("raw");
    copy_tree(&fixture(&format!("{FIXTURE}/raw")), &raw);
    let text = std::fs::read_to_string(fixture(&format!("{FIXTURE}/records.json"))).unwrap();
    let records: serde_json::Value = serde_json::from_str(&text).unwrap();
    let capture = |v: &serde_json::Value| -> Capture { serde_json::from_value(v.clone()).unwrap() };
    let overrides = [
        "model.config.num_hidden_layers=2",
        "inputs.prompt_tokens=64",
    ];
    let opts = CaptureOptions {
        workload: llmprof_capture::WorkloadSpec::Target(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/qwen2.5-0.5b.toml"),
        ),
        mode: llmprof_capture::Mode::Standard,
        repeats: Some(3),
        auto_repeats: None,
        pin: false,
        device: 0,
        ranks: Some(llmprof_capture::ranks::Ranks::new(2, vec![], None).unwrap()),
        cmd_analysis: Default::default(),
        timeout_s: None,
        overhead_repeats: 1,
        out: dir.path().join("runs"),
        overrides: overrides
            .iter()
            .map(|o| Override::parse(o).unwrap())
            .collect(),
        cuda_graph_trace: Default::default(),
    };
    let plan = llmprof_capture::plan(opts).unwrap();
    let ranks: Vec<RankOutput> = (0..2u32)
        .map(|r| {
            let raw_dir = llmprof_capture::ranks::rank_raw(&raw, r);
            RankOutput {
                rank: r,
                kineto: Some(raw_dir.join("kineto/kineto_trace.json.gz")),
                metadata: Some(raw_dir.join("metadata.json")),
                raw_dir,
                capture: capture(&records["ranks"][r as usize]),
                nvml: None,
            }
        })
        .collect();
    let output = CaptureOutput {
        work_dir: work.clone(),
        raw_dir: raw.clone(),
        kineto: ranks[0].kineto.clone(),
        nsys_sqlite: Some(raw.join("nsys/profile.sqlite.gz")),
        ncu_csv: None,
        metadata: ranks[0].metadata.clone(),
        model_config: Some(raw.join("config.json")),
        capture: capture(&records["group"]),
        nvml: None,
        ranks,
    };
    Recorded {
        dir,
        plan,
        output,
        records,
    }
}

/// The export, inflated, opened with SQLite itself.
fn export() -> (tempfile::NamedTempFile, rusqlite::Connection) {
    let gz = std::fs::File::open(fixture(&format!("{FIXTURE}/raw/nsys/profile.sqlite.gz")));
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(gz.unwrap())
        .read_to_end(&mut bytes)
        .unwrap();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), bytes).unwrap();
    let conn = rusqlite::Connection::open(file.path()).unwrap();
    (file, conn)
}

/// The pid rank `r`'s driver recorded for the nsys pass.
fn nsys_pid(r: u32) -> i64 {
    let dir = if r == 0 {
        "raw".to_string()
    } else {
        format!("raw/ranks/{r}")
    };
    let text = std::fs::read_to_string(fixture(&format!("{FIXTURE}/{dir}/nsys/metadata.json")));
    let doc: serde_json::Value = serde_json::from_str(&text.unwrap()).unwrap();
    doc["passes"]["nsys"]["pid"].as_i64().unwrap()
}

/// Kernel rows of the process with `pid` (`globalPid` holds it in bits 24..48), all of them
/// and those whose name is NCCL's: (count, summed ns).
fn kernels_of(conn: &rusqlite::Connection, pid: i64, nccl: bool) -> (u64, i64) {
    let sql = format!(
        "SELECT COUNT(*), SUM(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k \
         JOIN StringIds s ON s.id = k.shortName \
         WHERE (k.globalPid >> 24) & 16777215 = ?1 {}",
        if nccl {
            "AND s.value LIKE 'ncclDevKernel%'"
        } else {
            ""
        }
    );
    conn.query_row(&sql, [pid], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))
        .unwrap()
}

fn assembled() -> (Recorded, CaptureRun) {
    let rec = recorded();
    let run = llmprof_capture::assemble(&rec.plan, &rec.output).unwrap();
    (rec, run)
}

#[test]
fn each_rank_is_its_own_process_of_the_export_with_its_collectives() {
    let (rec, run) = assembled();
    let (_file, conn) = export();
    assert_eq!(run.ranks.len(), 2);
    let pids: Vec<i64> = (0..2).map(nsys_pid).collect();
    assert_ne!(pids[0], pids[1], "two processes");
    for (r, rank) in &run.ranks {
        let b = &rank.bundle;
        let (kernels, _) = kernels_of(&conn, pids[*r as usize], false);
        assert!(kernels > 1000, "rank {r} ran its share of the kernels");
        assert_eq!(
            b.totals.kernels, kernels,
            "rank {r}: its process's kernel rows"
        );
        let written = &rec.records["written"]["ranks"][r.to_string()]["kernels"];
        assert_eq!(
            Some(b.totals.kernels),
            written.as_u64(),
            "as the capture wrote"
        );
        let (calls, ns) = kernels_of(&conn, pids[*r as usize], true);
        let comm = b.communication.as_ref().expect("communication per rank");
        let ours: u64 = comm.collectives.iter().map(|c| c.calls).sum();
        let ours_ns: u64 = comm.collectives.iter().map(|c| c.total_ns).sum();
        assert_eq!(
            (ours, ours_ns as i64),
            (calls, ns),
            "rank {r}'s NCCL kernels"
        );
        assert!(comm.collectives.iter().any(|c| c.collective == "allreduce"));
        assert_eq!(b.environment.distributed.as_ref().unwrap().rank, *r);
        let capture = b.capture.as_ref().unwrap();
        assert_eq!(capture.ranks.as_ref().unwrap().rank, Some(*r));
        assert!(
            b.timing_source.is_some() && !b.operators.is_empty(),
            "nsys and kineto"
        );
    }
    let ncu_rows = |r: usize| run.ranks[r].1.bundle.ncu.len();
    assert_eq!(
        (ncu_rows(0), ncu_rows(1)),
        (0, 0),
        "standard mode: no ncu pass"
    );
}

#[test]
fn the_run_pools_the_ranks_with_the_model_flops_over_both_gpus() {
    let (rec, run) = assembled();
    let top: &Bundle = &run.run.bundle;
    assert!(run.run.timeline.is_none(), "the ranks hold the timelines");
    let ranks = top.ranks.as_ref().unwrap();
    assert_eq!((ranks.world_size, ranks.ranks.len()), (2, 2));
    assert!(ranks.missing.is_empty());
    let kernels: u64 = run.ranks.iter().map(|(_, r)| r.bundle.totals.kernels).sum();
    assert_eq!(top.totals.kernels, kernels);
    // Each rank's own record, in brief, beside the group's.
    for (entry, (_, rank)) in ranks.ranks.iter().zip(&run.ranks) {
        let own = llmprof_bundle::RankCapture::of(rank.bundle.capture.as_ref().unwrap());
        assert_eq!(entry.capture.as_ref(), Some(&own));
        assert_eq!(
            own.energy.len(),
            2,
            "prefill and decode energy on rank {}",
            entry.rank
        );
    }
    // The flops pass counts each rank's shard: the model's FLOPs are their sum.
    let flops = |dir: &str| -> f64 {
        let text = std::fs::read_to_string(fixture(&format!("{FIXTURE}/{dir}/flops/flops.json")));
        let doc: serde_json::Value = serde_json::from_str(&text.unwrap()).unwrap();
        doc["prefill"].as_f64().unwrap()
    };
    let sum = flops("raw") + flops("raw/ranks/1");
    let counted = top
        .counted_flops
        .iter()
        .find(|c| c.stage == "prefill")
        .unwrap();
    assert!((counted.flops_per_instance - sum).abs() <= 1e-6 * sum);
    assert!(counted.source.contains("summed over the 2 ranks"));
    let w = top.workload.as_ref().unwrap();
    assert_eq!(w.parallel_degree.as_ref().map(|d| d.value), Some(2));
    // Stage instances of both ranks are pooled, and so are their decode steps.
    let decode = top.stages.iter().find(|s| s.name == "decode").unwrap();
    let steps = &w.decode_steps.as_ref().unwrap().value;
    assert_eq!(decode.instances as usize, steps.len());
    assert_eq!(steps.len(), 6, "3 measured iterations on each of 2 ranks");
    // The run's record is the group's: energy summed over the GPUs.
    let group: Capture = serde_json::from_value(rec.records["group"].clone()).unwrap();
    let capture = top.capture.as_ref().unwrap();
    assert_eq!(capture.energy, group.energy);
    assert_eq!(capture.ranks.as_ref().unwrap().rank, None);
    let rank_j = |r: usize, stage: &str| {
        let c: Capture = serde_json::from_value(rec.records["ranks"][r].clone()).unwrap();
        c.energy.iter().find(|e| e.stage == stage).unwrap().energy_j
    };
    for e in &capture.energy {
        let sum = rank_j(0, &e.stage) + rank_j(1, &e.stage);
        assert!(
            (e.energy_j - sum).abs() < 1e-9,
            "{}: {} vs {sum}",
            e.stage,
            e.energy_j
        );
    }
}

#[test]
fn saved_the_run_has_a_directory_per_rank_and_the_raw_files_of_all() {
    let (rec, mut run) = assembled();
    for (_, r) in &mut run.ranks {
        r.bundle.analysis = Some(llmprof_analysis::analyze(&r.bundle));
    }
    run.run.bundle.analysis = Some(llmprof_analysis::analyze(&run.run.bundle));
    let work = rec.output.work_dir.clone();
    let saved = llmprof_capture::save(&rec.plan, rec.output, run).unwrap();
    let dir: PathBuf = saved.dir;
    for f in [
        "bundle.json",
        "ranks/0/bundle.json",
        "ranks/1/bundle.json",
        "ranks/0/timeline.json",
        "ranks/1/timeline.json",
        "raw/ranks/1/kineto/kineto_trace.json.gz",
        "raw/nsys/profile.sqlite.gz",
    ] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    assert!(!work.exists(), "the working directory becomes the run");
    let out = llmprof(["show".as_ref(), dir.as_os_str()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("2 of a world of 2 ranks"), "{text}");
    assert!(text.contains("allreduce"), "{text}");
    drop(rec.dir);
}

#[test]
fn a_rank_that_crashed_before_its_first_kernel_leaves_a_partial_run_that_names_it() {
    let mut rec = recorded();
    // Rank 1 wrote nothing and launched nothing: its files are gone and its process's rows
    // are taken out of the export.
    let rank1 = rec.output.ranks[1].raw_dir.clone();
    std::fs::remove_dir_all(&rank1).unwrap();
    rec.output.ranks[1].kineto = None;
    rec.output.ranks[1].metadata = None;
    let (_file, conn) = export();
    let pid = nsys_pid(1);
    for (table, id) in [
        ("CUPTI_ACTIVITY_KIND_KERNEL", "globalPid"),
        ("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid"),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "globalPid"),
        ("CUPTI_ACTIVITY_KIND_MEMSET", "globalPid"),
    ] {
        let sql = format!("DELETE FROM {table} WHERE ({id} >> 24) & 16777215 = ?1");
        conn.execute(&sql, [pid]).unwrap();
    }
    drop(conn);
    let sqlite = rec.output.work_dir.join("raw/nsys/profile.sqlite");
    std::fs::copy(_file.path(), &sqlite).unwrap();
    std::fs::remove_file(rec.output.work_dir.join("raw/nsys/profile.sqlite.gz")).unwrap();
    rec.output.nsys_sqlite = Some(sqlite);
    let run = llmprof_capture::assemble(&rec.plan, &rec.output).unwrap();
    let (_, r1) = &run.ranks[1];
    assert_eq!(r1.bundle.totals.kernels, 0);
    let missing = &r1.bundle.capture.as_ref().unwrap().missing;
    assert!(
        missing
            .iter()
            .any(|m| m.contains("rank 1's process in the Nsight Systems export")),
        "{missing:?}"
    );
    let (_, r0) = &run.ranks[0];
    assert!(r0.bundle.totals.kernels > 1000, "rank 0 is whole");
    let top = &run.run.bundle;
    assert_eq!(top.totals.kernels, r0.bundle.totals.kernels);
    assert_eq!(top.ranks.as_ref().unwrap().ranks.len(), 2);
}

/// Deep mode under `--nproc 2` on two H200s (the committed sample run): Nsight Compute ran on
/// rank 0 only, on the nsys pass's top kernels less the collectives (a replayed all-reduce
/// would wait for a peer that never replays it), inside `decode`. Each row's range is the
/// default domain's stack: NCCL's range, open on the thread all run long, is not the stage.
#[test]
fn deep_mode_profiles_compute_kernels_of_one_rank_inside_decode() {
    let run = fixture("sample-runs/20261126-054118-qwen2.5-0.5b-deep-nproc2");
    let csv = run.join("raw/ncu/ncu_decode_raw.csv");
    let dir = tempfile::tempdir().unwrap();
    let out = llmprof([
        "ingest".as_ref(),
        "--ncu".as_ref(),
        csv.as_os_str(),
        "--out".as_ref(),
        dir.path().as_os_str(),
    ] as [&std::ffi::OsStr; 5]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ingested = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let fresh = llmprof_store::read_bundle(&ingested.path()).unwrap();
    assert_eq!(fresh.ncu.len(), 30);
    for n in &fresh.ncu {
        assert_eq!(n.nvtx_range.as_deref(), Some("decode"), "{}", n.name);
        assert_ne!(
            llmprof_bundle::names::category(&n.name),
            llmprof_bundle::Category::Communication,
            "{}",
            n.name
        );
    }
    let ranges = |b: &Bundle| -> Vec<Option<String>> {
        b.ncu.iter().map(|n| n.nvtx_range.clone()).collect()
    };
    let top = llmprof_store::read_bundle(&run).unwrap();
    let rank0 = llmprof_store::read_bundle(&run.join("ranks/0")).unwrap();
    let rank1 = llmprof_store::read_bundle(&run.join("ranks/1")).unwrap();
    assert_eq!(ranges(&top), ranges(&fresh));
    assert_eq!(ranges(&rank0), ranges(&fresh));
    assert!(rank1.ncu.is_empty(), "ncu ran on rank 0 only");
    let ranks = top.capture.as_ref().unwrap().ranks.as_ref().unwrap();
    assert_eq!(ranks.ncu_rank, 0);
}

/// The launcher's log of a real hang (two H200s, `gpu-jobs/hang.sh`; C++ frames left out): rank 1 was stopped
/// with SIGSTOP during warm-up, rank 0 waited at the next barrier until the 30 s collective
/// timeout, NCCL took rank 0 down, and torchrun killed rank 1 when SIGTERM did not stop it.
#[test]
fn a_hung_rank_is_named_from_the_launchers_log() {
    let log =
        std::fs::read_to_string(fixture(&format!("{FIXTURE}/hang-baseline-stderr.log"))).unwrap();
    assert_eq!(
        llmprof_capture::ranks::group_failure(&log).as_deref(),
        Some(
            "rank 0 waited 30.0 s in ALLREDUCE #2, which its peers never joined (NCCL \
             watchdog); rank 1 did not stop on SIGTERM and was killed: stuck"
        )
    );
    // Without the watchdog's and the shutdown's lines, torchrun's root cause.
    let plain: String = log
        .lines()
        .filter(|l| !l.contains("Watchdog") && !l.contains("Unable to shutdown"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        llmprof_capture::ranks::group_failure(&plain).as_deref(),
        Some("rank 0 failed: Signal 6 (SIGABRT) received by PID 8035")
    );
    assert_eq!(
        llmprof_capture::ranks::group_failure("plain reason\n"),
        None
    );
    // The second real hang: rank 1 stopped while loading the model, before the group's first
    // collective. NCCL sets its communicator up lazily, in that collective, and the watchdog
    // does not time the setup: rank 0 waited until rank 1 was let go 150 s later, and the pass
    // timeout (200 s) had stopped the group first.
    let first = std::fs::read_to_string(fixture(&format!(
        "{FIXTURE}/hang-at-first-collective-stderr.log"
    )))
    .unwrap();
    assert_eq!(
        llmprof_capture::ranks::group_failure(&first).as_deref(),
        Some("rank 0 waited 146.5 s in ALLREDUCE #1, which its peers never joined (NCCL watchdog)")
    );
}
