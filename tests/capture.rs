//! `llmprof capture` on a machine without a GPU (the build machine, CI): the dry run validates
//! and prints the plan; a real run of a target refuses with the reason and leaves nothing
//! behind; a `--cmd` workload runs its baseline anyway (NVML and missing profilers recorded),
//! and Ctrl-C leaves a partial run and exit code 130. The capture itself runs on the GPU host;
//! its output ships as `tests/fixtures/sample-runs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use crate::common::*;

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
        "passes   baseline → flops → kineto → nsys → ncu → calibrate",
        "2 warm-up + 6 measured iterations per process",
        "\ncpu      ",
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
fn dry_run_shows_set_overrides_and_the_graph_trace_level() {
    let out = tempfile::tempdir().unwrap();
    let args = |extra: &[&str]| {
        let mut a: Vec<std::ffi::OsString> = vec![
            "capture".into(),
            "--target".into(),
            target("qwen2.5-0.5b.toml").into(),
            "--dry-run".into(),
            "--out".into(),
            out.path().into(),
        ];
        a.extend(extra.iter().map(|s| s.into()));
        a
    };
    let o = llmprof(args(&[
        "--set",
        "optimize.compile=reduce-overhead",
        "--set",
        "optimize.cache=static",
    ]));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for needle in [
        "optimize compile=reduce-overhead cache=static",
        "set      optimize.compile=reduce-overhead, optimize.cache=static",
        "(CUDA graphs traced at node level)",
    ] {
        assert!(stdout.contains(needle), "plan lacks {needle}:\n{stdout}");
    }
    let o = llmprof(args(&["--cuda-graph-trace", "graph"]));
    assert!(String::from_utf8_lossy(&o.stdout).contains("traced at graph level"));
    // --repeats auto and its cap; --no-pin.
    let o = llmprof(args(&[
        "--repeats",
        "auto",
        "--repeats-cap",
        "90",
        "--no-pin",
    ]));
    let stdout = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "repeats  auto: fresh baseline processes after the planned passes until each measured \
         stage's 95% CI half-width is at most 2.0% of its median, or the baseline passes have \
         taken 90 s (--repeats-cap)",
        "; not pinned: --no-pin; governor ",
    ] {
        assert!(stdout.contains(needle), "plan lacks {needle}:\n{stdout}");
    }
    for (bad, says) in [
        (
            &["--repeats-cap", "90"][..],
            "--repeats-cap applies to --repeats auto only",
        ),
        (
            &["--repeats", "0"][..],
            "`0` is neither a count of at least 1 nor `auto`",
        ),
    ] {
        let o = llmprof(args(bad));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(says), "{bad:?}: {err}");
    }
    // A typo in a --set key names the file, the field and the override.
    let o = llmprof(args(&["--set", "optimize.compil=default"]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("qwen2.5-0.5b.toml")
            && err.contains("`optimize.compil`: unknown key")
            && err.contains("--set optimize.compil=default"),
        "{err}"
    );
}

/// The workload driver's own tests (`test_driver.py`): plan checks and exit codes always, the
/// passes and a compiled decode on a tiny model on the CPU where torch and transformers are
/// installed. `LLMPROF_DRIVER_PYTHON` names the interpreter (the test command sets it to the
/// virtual environment `.ci/driver-venv` makes, with CPU-usable torch and transformers); with it
/// set, those CPU runs must run (`LLMPROF_REQUIRE_TORCH=1`), not skip. Without it, `python3`,
/// and skipped CPU runs are allowed.
#[test]
fn driver_python_tests_pass() {
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/capture/src/driver");
    let given = std::env::var_os("LLMPROF_DRIVER_PYTHON");
    let python = given.clone().unwrap_or_else(|| "python3".into());
    let mut cmd = std::process::Command::new(&python);
    cmd.arg("test_driver.py").current_dir(&driver);
    if given.is_some() {
        cmd.env("LLMPROF_REQUIRE_TORCH", "1");
    }
    let o = match cmd.output() {
        Ok(o) => o,
        Err(e) if given.is_some() => panic!("LLMPROF_DRIVER_PYTHON={python:?}: {e}"),
        Err(_) => {
            eprintln!("no python3 here: the driver's tests did not run");
            return;
        }
    };
    let out = String::from_utf8_lossy(&o.stdout);
    let summary = out.lines().rev().find(|l| l.starts_with("driver: "));
    eprintln!("{}", summary.unwrap_or("test_driver.py printed no summary"));
    assert!(
        o.status.success() && summary.is_some(),
        "test_driver.py failed:\n{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
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

/// Every target error names the file, the key and shows how the section looks when right.
#[test]
fn target_errors_name_the_file_the_key_and_an_example() {
    let dir = tempfile::tempdir().unwrap();
    let model = "[model]\n[model.config]\nmodel_type = \"qwen2\"\n";
    let inputs = "[inputs]\nprompt_tokens = 8\nmax_new_tokens = 2\n";
    for (body, key, example) in [
        (format!("name = \"x\"\n{model}"), "`[inputs]` is missing", "max_new_tokens = 64"),
        (
            format!("name = \"x\"\n{model}[inputs]\nprompt_tokens = \"many\"\nmax_new_tokens = 1\n"),
            "`inputs.prompt_tokens`: invalid type: string \"many\"",
            "prompt_tokens = 512",
        ),
        (
            format!("name = \"x\"\n{model}{inputs}[run]\nrepeatz = 3\n"),
            "`run.repeatz`: unknown key; expected one of `warmup`, `repeats`",
            "repeats = 6",
        ),
        (
            format!("name = \"x\"\n[model]\ndtype = \"fp8\"\n[model.config]\nmodel_type = \"qwen2\"\n{inputs}"),
            "[model] dtype `fp8`: use bfloat16, float16 or float32",
            "[model.config]",
        ),
        (format!("{model}{inputs}"), "`name` is missing", "name = \"qwen2.5-0.5b\""),
    ] {
        let t = dir.path().join("broken.toml");
        std::fs::write(&t, &body).unwrap();
        let o = llmprof(["capture".as_ref(), "--target".as_ref(), t.as_os_str(), "--dry-run".as_ref()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        for needle in [&format!("target `{}`", t.display()), key, example] {
            assert!(err.contains(needle), "lacks {needle}:\n{err}");
        }
    }
}

#[test]
fn sample_runs_carry_their_capture_record() {
    for run in [
        "20261122-040409-qwen2.5-0.5b-deep",
        "20261122-040129-qwen3-moe-small-standard",
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
    let run = "20261122-035856-deepseek-ocr2-standard";
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
        // FlopCounterMode on the H100 against the analytic count (prefill includes the vision
        // tower; the counter sees full s² attention).
        let d = s.counted_vs_analytic_pct.unwrap();
        assert!(d.abs() < 1.0, "{stage}: {d}%");
    }
    assert!(a.findings.iter().any(|f| f.id == "vision_share"));
}

/// Runs `llmprof capture --cmd` with profilers hidden, so the test means the same everywhere.
pub(crate) fn capture_cmd(args: &[&std::ffi::OsStr]) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_llmprof"));
    c.arg("capture")
        .args(args)
        .env("NSYS", "/nonexistent/nsys")
        .env("NCU", "/nonexistent/ncu")
        .env("COLUMNS", "200");
    c
}

pub(crate) fn only_run(runs: &Path) -> std::path::PathBuf {
    let dirs: Vec<_> = std::fs::read_dir(runs)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

#[test]
fn dry_run_of_a_command_prints_its_plan() {
    let out = tempfile::tempdir().unwrap();
    let o = capture_cmd(&[
        "--cmd".as_ref(),
        "python3 my_infer.py --tokens 8".as_ref(),
        "--stages".as_ref(),
        "prefill,decode".as_ref(),
        "--mode".as_ref(),
        "deep".as_ref(),
        "--dry-run".as_ref(),
        "--out".as_ref(),
        out.path().as_os_str(),
    ])
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for needle in [
        "command  sh -c \"python3 my_infer.py --tokens 8\"",
        "name     my_infer",
        "stages   prefill, decode",
        "passes   baseline → kineto → nsys → ncu",
        "LLMPROF_KINETO_OUT",
        "dry run: nothing was run",
    ] {
        assert!(stdout.contains(needle), "plan lacks {needle}:\n{stdout}");
    }
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
    // A program that does not exist is a problem the dry run names.
    let o = capture_cmd(&[
        "--cmd".as_ref(),
        "no-such-program-xyz --flag".as_ref(),
        "--dry-run".as_ref(),
    ])
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("`no-such-program-xyz`, which is neither a file nor on PATH"),
        "{stdout}"
    );
}

#[test]
fn a_command_runs_as_the_baseline_and_records_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    // The workload reports the pass and the stages it was given.
    let o = capture_cmd(&[
        "--cmd".as_ref(),
        "echo pass=$LLMPROF_PASS stages=$LLMPROF_STAGES".as_ref(),
        "--stages".as_ref(),
        "prefill,decode".as_ref(),
        "--repeats".as_ref(),
        "2".as_ref(),
        "--allow-empty".as_ref(),
        "--out".as_ref(),
        runs.as_os_str(),
    ])
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let run = only_run(&runs);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        run.to_string_lossy()
    );
    let log = std::fs::read_to_string(run.join("raw/baseline/stderr-2.log")).unwrap();
    assert_eq!(log.trim(), "pass=baseline stages=prefill,decode");
    let b = llmprof_bundle::Bundle::from_json(
        &std::fs::read_to_string(run.join("bundle.json")).unwrap(),
    )
    .unwrap();
    crate::run_hygiene::assert_paths_relative_to_the_run(&b);
    let c = b.capture.as_ref().unwrap();
    assert_eq!(
        c.command.as_deref(),
        Some("echo pass=$LLMPROF_PASS stages=$LLMPROF_STAGES")
    );
    assert_eq!(c.stage_names, ["prefill", "decode"]);
    let names: Vec<&str> = c.passes.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["baseline", "baseline #2", "kineto"]);
    assert!(c
        .passes
        .iter()
        .all(|p| p.ok && p.command[..2] == ["sh", "-c"]));
    assert!(!c.interrupted);
    for needle in [
        "the nsys pass did not run: Nsight Systems (`nsys`) was not found",
        "the workload wrote no trace at $LLMPROF_KINETO_OUT",
        "no profiler trace was captured",
    ] {
        assert!(
            c.missing.iter().any(|m| m.contains(needle)),
            "missing lacks {needle}: {:#?}",
            c.missing
        );
    }
    // No profiled pass that profiled anything: no overhead to claim.
    assert!(c.overhead.is_empty(), "{:?}", c.overhead);
    if b.nvml.is_none() {
        assert!(c.energy.is_empty());
        assert_eq!(c.energy_note.as_deref(), Some("no energy: no NVML samples"));
    }
    let show = llmprof(["show".as_ref(), run.as_os_str()]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("Capture (standard mode, command echo)"),
        "{text}"
    );
}

/// `--repeats auto` on a `--cmd` workload that writes its own stage windows (as
/// `llmprof-stages` does): more baseline runs until the command's wall is known within 2% or the
/// cap stops it, each in its own `raw/baseline-N/`, the outcome in the run; the kineto pass's
/// overhead compares the decode windows, not the processes.
#[test]
fn repeats_auto_adds_baseline_runs_and_overhead_compares_stage_windows() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.json");
    std::fs::write(
        &trace,
        r#"{"schemaVersion": 1, "traceEvents": [
{"ph": "X", "cat": "user_annotation", "name": "decode", "pid": 1, "tid": 1, "ts": 1000.0, "dur": 100.0}
]}"#,
    )
    .unwrap();
    let line = |stage: &str, start: u64, end: u64| {
        format!(
            "echo '{{\"stage\":\"{stage}\",\"start_ns\":{start},\"end_ns\":{end}}}' >> \
             \"$LLMPROF_OUT_DIR/stages.jsonl\""
        )
    };
    // A slow start-up (the sleep) that no stage window holds; decode takes 100 ns unprofiled
    // and 150 ns under the profiler.
    let cmd = format!(
        "sleep 0.05; {}; if [ -n \"$LLMPROF_KINETO_OUT\" ]; then cp '{}' \"$LLMPROF_KINETO_OUT\"; \
         {}; else {}; fi",
        line("warmup_decode", 0, 900),
        trace.display(),
        line("decode", 1000, 1150),
        line("decode", 1000, 1100)
    );
    let runs = dir.path().join("runs");
    let o = capture_cmd(&[
        "--cmd".as_ref(),
        cmd.as_ref(),
        "--mode".as_ref(),
        "light".as_ref(),
        "--repeats".as_ref(),
        "auto".as_ref(),
        "--repeats-cap".as_ref(),
        "1".as_ref(),
        "--no-pin".as_ref(),
        "--allow-empty".as_ref(),
        "--out".as_ref(),
        runs.as_os_str(),
    ])
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("repeats auto, round 0: 1 sample from 1 process;"),
        "{err}"
    );
    let run = only_run(&runs);
    let b = llmprof_bundle::Bundle::from_json(
        &std::fs::read_to_string(run.join("bundle.json")).unwrap(),
    )
    .unwrap();
    let c = b.capture.as_ref().unwrap();
    let a = c
        .auto_repeats
        .as_ref()
        .expect("the auto outcome is recorded");
    let base_dirs = std::fs::read_dir(run.join("raw"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("baseline"))
        .count();
    assert_eq!(
        (a.processes as usize, a.iterations as usize),
        (base_dirs, base_dirs)
    );
    assert_eq!(a.rounds as usize, base_dirs - 1);
    assert!(a.processes >= 2, "{a:?}");
    assert_eq!((a.target_pct, a.cap_s), (2.0, 1));
    assert_eq!(a.stages[0].stage, "command");
    let stopped = c
        .missing
        .iter()
        .any(|m| m.starts_with("--repeats auto stopped at its cap"));
    assert_eq!(stopped, !a.met, "{:#?}", c.missing);
    if !a.met {
        assert!(a.baseline_s <= 1.0 + 0.5, "{a:?}");
    }
    assert_eq!(c.snapshot.pin_note.as_deref(), Some("not pinned: --no-pin"));
    let o = &c.overhead;
    assert_eq!(o.len(), 1, "{o:?}");
    assert_eq!(
        (o[0].pass.as_str(), o[0].stage.as_str()),
        ("kineto", "decode")
    );
    assert_eq!(o[0].basis.as_deref(), Some("stage windows"));
    assert!((o[0].overhead_pct - 50.0).abs() < 1e-9, "{o:?}");
}

/// No GPU, no profiler: the run is written, but the last line says nothing was captured and
/// the exit code is 1, unless `--allow-empty`.
#[test]
fn a_capture_that_captured_nothing_says_so_and_fails_unless_allowed() {
    if Path::new("/dev/nvidiactl").exists() {
        eprintln!("a GPU is present: an empty capture is not exercised here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let args = ["--cmd", "true", "--mode", "light", "--no-pin", "--out"];
    let mut argv: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    argv.push(runs.as_os_str());
    let o = capture_cmd(&argv).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: captured nothing in ")
            && last.contains("no profiler trace")
            && last.contains("--allow-empty"),
        "{err}"
    );
    let run = only_run(&runs);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        run.to_string_lossy()
    );
    argv.push("--allow-empty".as_ref());
    let o = capture_cmd(&argv).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.lines()
            .last()
            .unwrap_or_default()
            .starts_with("captured in "),
        "{err}"
    );
}

#[test]
fn a_command_that_honours_llmprof_kineto_out_gets_its_trace_ingested() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.json");
    std::fs::write(
        &trace,
        r#"{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "numSms": 132}], "traceEvents": [
{"ph": "X", "cat": "user_annotation", "name": "decode", "pid": 1, "tid": 1, "ts": 1000.0, "dur": 100.0, "args": {"External id": 1}},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1010.0, "dur": 5.0, "args": {"External id": 2, "correlation": 7}},
{"ph": "X", "cat": "kernel", "name": "k7", "pid": 0, "tid": 7, "ts": 1020.0, "dur": 30.0, "args": {"External id": 2, "device": 0, "stream": 7, "correlation": 7, "grid": [1, 1, 1], "block": [128, 1, 1]}}
]}"#,
    )
    .unwrap();
    let runs = dir.path().join("runs");
    let cmd = format!(
        "if [ -n \"$LLMPROF_KINETO_OUT\" ]; then cp '{}' \"$LLMPROF_KINETO_OUT\"; fi",
        trace.display()
    );
    let o = capture_cmd(&[
        "--cmd".as_ref(),
        cmd.as_ref(),
        "--stages".as_ref(),
        "decode,prefill".as_ref(),
        "--mode".as_ref(),
        "light".as_ref(),
        "--out".as_ref(),
        runs.as_os_str(),
    ])
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let run = only_run(&runs);
    let b = llmprof_bundle::Bundle::from_json(
        &std::fs::read_to_string(run.join("bundle.json")).unwrap(),
    )
    .unwrap();
    assert!(
        b.stages.iter().any(|s| s.name == "decode"),
        "{:?}",
        b.stages
    );
    assert_eq!(b.kernels.len(), 1);
    // The trace is named as the run directory holds it, not where the capture worked.
    crate::run_hygiene::assert_paths_relative_to_the_run(&b);
    let kineto = b
        .inputs
        .iter()
        .find(|i| i.source == llmprof_bundle::Source::Kineto);
    assert_eq!(kineto.unwrap().path, "raw/kineto/kineto_trace.json");
    assert!(run.join("raw/kineto/kineto_trace.json").is_file());
    let c = b.capture.as_ref().unwrap();
    assert!(
        c.missing
            .iter()
            .any(|m| m.contains("--stages names `prefill`")),
        "{:#?}",
        c.missing
    );
    assert!(!c.missing.iter().any(|m| m.contains("LLMPROF_KINETO_OUT")));
}

#[test]
fn ctrl_c_stops_the_pass_keeps_a_partial_run_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let started = std::time::Instant::now();
    // The workload's background job ignores SIGINT, as a shell's does: it must still go.
    let child = capture_cmd(&[
        "--cmd".as_ref(),
        "sleep 60 & echo started; wait".as_ref(),
        "--mode".as_ref(),
        "light".as_ref(),
        "--out".as_ref(),
        runs.as_os_str(),
    ])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // Wait for the baseline pass to start, then press Ctrl-C.
    let log_glob = || -> Option<std::path::PathBuf> {
        let d = std::fs::read_dir(&runs)
            .ok()?
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with(".capture-"))?;
        let log = d.path().join("raw/baseline/stderr.log");
        std::fs::read_to_string(&log)
            .ok()?
            .contains("started")
            .then_some(log)
    };
    while log_glob().is_none() {
        assert!(
            started.elapsed().as_secs() < 20,
            "the baseline never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        started.elapsed().as_secs() < 30,
        "stopped by Ctrl-C, not by sleep ending"
    );
    assert!(
        err.contains("interrupted after") && err.contains("partial run"),
        "{err}"
    );
    let run = only_run(&runs);
    let b = llmprof_bundle::Bundle::from_json(
        &std::fs::read_to_string(run.join("bundle.json")).unwrap(),
    )
    .unwrap();
    let c = b.capture.as_ref().unwrap();
    assert!(c.interrupted);
    assert_eq!(c.passes.len(), 1);
    assert!(
        c.passes[0]
            .note
            .as_deref()
            .unwrap()
            .starts_with("interrupted by Ctrl-C"),
        "{:?}",
        c.passes[0]
    );
    assert!(
        c.missing
            .iter()
            .any(|m| m == "the kineto pass did not run: the capture was interrupted"),
        "{:#?}",
        c.missing
    );
    assert!(
        run.join("raw/baseline/stderr.log").is_file(),
        "partial artifacts kept"
    );
}

/// The sample run's NVML series, captured before the resolution fields, with them read from
/// the data: sampled every ~24.3 ms (nominal 20), power and counter refreshed every ~100 ms.
fn resolution_read_from_the_series(
    run: &str,
    b: &llmprof_bundle::Bundle,
) -> llmprof_bundle::NvmlSeries {
    let mut n = b.nvml.clone().unwrap();
    assert_eq!(n.power_source.as_deref(), Some("instant"), "{run}");
    assert_eq!(
        n.measured_interval_ms, None,
        "{run}: captured before the field"
    );
    llmprof_capture::resolution::describe(&mut n);
    let period = n.measured_interval_ms.unwrap();
    assert!(
        (period - 24.3).abs() < 0.2,
        "{run}: sampled every {period} ms"
    );
    for refresh in [n.power_update_ms.unwrap(), n.energy_update_ms.unwrap()] {
        assert!(
            (refresh - 100.0).abs() < 3.0,
            "{run}: refreshed every {refresh} ms"
        );
    }
    n
}

/// A stage's wall-clock windows in the driver's `baseline.json`, one per iteration.
fn stage_windows(base: &serde_json::Value, stage: &str) -> Vec<(i64, i64)> {
    base["iterations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|it| {
            let w = &it[format!("{stage}_window_ns")];
            (w[0].as_i64().unwrap(), w[1].as_i64().unwrap())
        })
        .collect()
}

/// The sample runs' energy per stage is the power samples integrated over the stage windows the
/// baseline pass recorded: recomputed here from the bundle's NVML series and
/// `raw/baseline/baseline.json`, it matches the bundle, the J/token uses the run's tokens, the
/// mean power is physical, and NVML's energy counter agrees on the long decode windows. These
/// runs predate the resolution fields: read from their series, the sampler's real period is
/// 24.3 ms (nominal 20) and NVML refreshed power and the counter every ~100 ms, so today's code
/// withholds the J/token of their 25–80 ms prefills (the bundles, captured before, still quote
/// one) and keeps decode's.
#[test]
fn sample_runs_energy_is_the_power_integral_over_the_baseline_stage_windows() {
    for (run, prompt_tokens) in [
        ("20261122-040409-qwen2.5-0.5b-deep", 512u64),
        ("20261122-040129-qwen3-moe-small-standard", 512),
        // 257 image tokens + 32 text tokens.
        ("20261122-035856-deepseek-ocr2-standard", 289),
    ] {
        let dir = fixture("sample-runs").join(run);
        let b = llmprof_bundle::Bundle::from_json(
            &std::fs::read_to_string(dir.join("bundle.json")).unwrap(),
        )
        .unwrap();
        let c = b.capture.as_ref().unwrap();
        let n = &resolution_read_from_the_series(run, &b);
        let base: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("raw/baseline/baseline.json")).unwrap(),
        )
        .unwrap();
        let limit = c.snapshot.power_limit_w.unwrap();
        for (stage, tokens) in [("prefill", prompt_tokens), ("decode", 64)] {
            let windows = stage_windows(&base, stage);
            assert_eq!(windows.len(), 3, "{run} {stage}");
            let w = llmprof_capture::energy::EnergyWindows {
                stage: stage.into(),
                kind: "iterations",
                windows,
                per_window: 1,
            };
            let e = llmprof_capture::energy::stage_energy(n, &w, Some(tokens)).unwrap();
            // Fewer than two refreshes in a prefill window: no J/token; decode keeps it.
            assert_eq!(
                e.j_per_token.is_none(),
                stage == "prefill",
                "{run} {stage}: {e:?}"
            );
            assert_eq!(e.withheld.is_some(), stage == "prefill", "{run} {stage}");
            let rec = c.energy.iter().find(|e| e.stage == stage).unwrap();
            // The same integral (JSON keeps floats to the last bit or so).
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
            assert!(
                close(e.energy_j, rec.energy_j)
                    && close(e.wall_ns, rec.wall_ns)
                    && (e.instances, e.samples) == (rec.instances, rec.samples)
                    && close(e.counter_energy_j.unwrap(), rec.counter_energy_j.unwrap()),
                "{run} {stage}: {e:?} vs {rec:?}"
            );
            assert!(close(
                rec.j_per_token.unwrap(),
                rec.energy_j / tokens as f64
            ));
            assert_eq!(rec.tokens, Some(tokens));
            assert!(
                rec.mean_power_w > 50.0 && rec.mean_power_w < limit,
                "{run} {stage}: {} W",
                rec.mean_power_w
            );
            // The host window and the driver's own stage time agree (same stage, two clocks).
            let host_ms = base["summary"][format!("{stage}_ms")]["mean"]
                .as_f64()
                .unwrap();
            assert!(
                (rec.wall_ns / 1e6 - host_ms).abs() / host_ms < 0.05,
                "{run} {stage}"
            );
            if stage == "decode" {
                let counter = rec.counter_energy_j.unwrap();
                assert!(
                    (counter - rec.energy_j).abs() / rec.energy_j < 0.06,
                    "{run}: counter {counter} J vs power integral {} J",
                    rec.energy_j
                );
            }
        }
    }
}

/// `--nproc`: the dry run names the ranks, their GPUs and the rank ncu profiles; bad device
/// lists and a --cmd workload are refused with what to do.
#[test]
fn dry_run_of_nproc_names_the_ranks_and_checks_the_devices() {
    let out = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| dry_run_with(out.path(), extra);
    let qwen = target("qwen2.5-0.5b.toml");
    let q = qwen.to_str().unwrap();
    let o = run(&[
        "--target",
        q,
        "--nproc",
        "2",
        "--devices",
        "2,3",
        "--rank",
        "1",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout.contains("ranks    2 under torchrun (tensor parallel, tp_plan=auto) on GPU(s) 2,3; ncu on rank 1"),
        "{stdout}"
    );
    assert!(stdout.contains("mode     standard on GPU 2"), "{stdout}");
    for (extra, needle) in [
        (
            &["--target", q, "--nproc", "2", "--devices", "0"][..],
            "lists 1 GPU(s) but --nproc is 2",
        ),
        (
            &["--target", q, "--nproc", "2", "--devices", "1,1"][..],
            "names GPU 1 twice",
        ),
        (
            &["--target", q, "--nproc", "2", "--rank", "5"][..],
            "ranks are 0 to 1",
        ),
        (
            &["--cmd", "python x.py", "--nproc", "2"][..],
            "a --cmd workload launches its own ranks",
        ),
    ] {
        assert_refused(&run(extra), extra, needle);
    }
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
}

/// `--model-config`, `--metadata` and the token flags belong to `--cmd` (a target's driver
/// records them); a missing file is named.
#[test]
fn cmd_analysis_flags_are_checked() {
    let out = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| dry_run_with(out.path(), extra);
    let qwen = target("qwen2.5-0.5b.toml");
    for (extra, needle) in [
        (
            &["--target", qwen.to_str().unwrap(), "--prompt-tokens", "5"][..],
            "apply to --cmd",
        ),
        (
            &[
                "--cmd",
                "true",
                "--model-config",
                "/nonexistent/config.json",
            ][..],
            "--model-config `/nonexistent/config.json` is not a file",
        ),
    ] {
        assert_refused(&run(extra), extra, needle);
    }
}

/// `llmprof capture --dry-run --out OUT EXTRA…`.
fn dry_run_with(out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut a: Vec<std::ffi::OsString> = vec![
        "capture".into(),
        "--dry-run".into(),
        "--out".into(),
        out.into(),
    ];
    a.extend(extra.iter().map(|s| s.into()));
    llmprof(a)
}

/// The command (run with `args`) failed and said `needle`.
fn assert_refused(o: &std::process::Output, args: &[&str], needle: &str) {
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{args:?} accepted");
    assert!(stderr.contains(needle), "{args:?}: {stderr}");
}
