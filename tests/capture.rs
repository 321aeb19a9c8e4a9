//! `llmprof capture` on a machine without a GPU (the build machine, CI): the dry run validates
//! and prints the plan; a real run refuses with the reason and leaves nothing behind.
//! The capture itself runs on the GPU host; its output ships as `tests/fixtures/sample-runs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;

use common::*;

fn target(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("configs")
        .join(name)
}

#[test]
fn dry_run_validates_and_prints_the_plan() {
    let out = tempfile::tempdir().unwrap();
    let o = llmprof([
        "capture".as_ref(),
        "--target".as_ref(),
        target("qwen2.5-0.5b.toml").as_os_str(),
        "--mode".as_ref(),
        "deep".as_ref(),
        "--dry-run".as_ref(),
        "--out".as_ref(),
        out.path().as_os_str(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for needle in [
        "target   qwen2.5-0.5b",
        "qwen2 from config, random weights, bfloat16",
        "batch 1, prompt 512 tokens, 64 new tokens",
        "passes   baseline → flops → kineto → nsys → ncu",
        "dry run: nothing was run",
    ] {
        assert!(stdout.contains(needle), "plan lacks {needle}:\n{stdout}");
    }
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

#[test]
fn without_a_usable_gpu_capture_refuses_and_leaves_nothing() {
    if Path::new("/dev/nvidiactl").exists() {
        eprintln!("a GPU is present: the refusal is not exercised here");
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let o = llmprof([
        "capture".as_ref(),
        "--target".as_ref(),
        target("qwen3-moe-small.toml").as_os_str(),
        "--out".as_ref(),
        out.path().join("runs").as_os_str(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot capture here"), "{err}");
    assert!(
        !out.path().join("runs").exists()
            || std::fs::read_dir(out.path().join("runs")).unwrap().count() == 0
    );
}

#[test]
fn a_broken_target_names_the_file_and_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("bad.toml");
    std::fs::write(
        &t,
        "name = \"x\"\n[model]\n[inputs]\nprompt_tokens = 1\nmax_new_tokens = 1\n",
    )
    .unwrap();
    let o = llmprof([
        "capture".as_ref(),
        "--target".as_ref(),
        t.as_os_str(),
        "--dry-run".as_ref(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.contains("bad.toml") && err.contains("needs `config`"),
        "{err}"
    );
}

#[test]
fn sample_runs_carry_their_capture_record() {
    for run in [
        "20261122-013608-qwen2.5-0.5b-deep",
        "20261122-014612-qwen3-moe-small-standard",
    ] {
        let text =
            std::fs::read_to_string(fixture("sample-runs").join(run).join("bundle.json")).unwrap();
        let b = llmprof_bundle::Bundle::from_json(&text).unwrap();
        let c = b.capture.as_ref().unwrap();
        assert!(c.passes.iter().all(|p| p.ok), "{run}");
        assert!(c.baseline.as_ref().unwrap().iterations == 3);
        assert!(c.overhead.iter().any(|o| o.pass == "nsys"));
        assert!(c.manifest.iter().all(|m| m.sha256.len() == 64));
        let n = b.nvml.as_ref().unwrap();
        assert!(n.t_ns.len() > 1000 && n.power_mw.iter().any(|&p| p > 0));
        // The analysis recomputed from the bundle finds the launch-bound decode.
        let a = llmprof_analysis::analyze(&b);
        assert!(a
            .findings
            .iter()
            .any(|f| f.id == "launch_bound" && f.stage.as_deref() == Some("decode")));
        assert!(a.stages.iter().all(|s| !llmprof_bundle::is_warmup(&s.name)));
    }
}

#[test]
fn the_ocr_sample_run_has_vision_stages_matching_the_analytic_model() {
    let run = "20261122-020635-deepseek-ocr2-standard";
    let text =
        std::fs::read_to_string(fixture("sample-runs").join(run).join("bundle.json")).unwrap();
    let b = llmprof_bundle::Bundle::from_json(&text).unwrap();
    assert_eq!(
        b.workload
            .as_ref()
            .unwrap()
            .image_tokens
            .as_ref()
            .unwrap()
            .value,
        257
    );
    let a = llmprof_analysis::analyze(&b);
    for stage in ["sam", "vision_encoder", "projector", "prefill", "decode"] {
        let s = a.stages.iter().find(|s| s.name == stage).unwrap();
        // FlopCounterMode on the H200 against the analytic count (prefill includes the vision
        // tower; the counter sees full s² attention).
        let d = s.counted_vs_analytic_pct.unwrap();
        assert!(d.abs() < 1.0, "{stage}: {d}%");
    }
    assert!(a.findings.iter().any(|f| f.id == "vision_share"));
}
