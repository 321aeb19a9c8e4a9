//! The `llmprof` Python package (`python/llmprof/`, shipped in the wheel) against the Rust side:
//! its unittest suite, and a `--cmd` workload marking its stages with `llmprof.stage`, whose
//! `stages.jsonl` capture reads into baseline timings. They run the checkout's package with
//! `PYTHONPATH=python`; `.ci/wheel` runs the same unittest suite against the installed wheel.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::capture::{capture_cmd, only_run};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `python3` on PATH, or `None` (with the reason printed) where there is none.
fn python3() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("python3"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        eprintln!("skipped: no python3 on PATH (CI has one)");
    }
    found
}

/// The package's unittest suite; with `LLMPROF_DRIVER_PYTHON` (torch installed) its
/// PyTorch-profiler test writes a real trace too.
#[test]
fn the_python_package_tests_pass() {
    let python = match std::env::var_os("LLMPROF_DRIVER_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => match python3() {
            Some(p) => p,
            None => return,
        },
    };
    let o = Command::new(&python)
        .args(["-m", "unittest", "discover", "-s", "python/tests", "-v"])
        .current_dir(repo())
        .env("PYTHONPATH", repo().join("python"))
        .env_remove("LLMPROF_OUT_DIR")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("\nOK"), "{err}");
}

/// Two baseline runs (two processes) of a workload that marks a warm-up and three measured
/// iterations with `llmprof.stage`: capture pairs its prefill and decode windows into six
/// baseline iterations from two processes, warm-up left out.
#[test]
fn stages_written_by_the_python_package_are_the_baseline_of_a_command() {
    let Some(python) = python3() else { return };
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("workload.py");
    std::fs::write(
        &script,
        "import time, llmprof\n\
         assert llmprof.profiling_pass() in ('baseline', 'kineto'), llmprof.profiling_pass()\n\
         for i in range(4):\n\
         \x20   with llmprof.stage('prefill', warmup=i == 0):\n\
         \x20       time.sleep(0.02)\n\
         \x20   with llmprof.stage('decode', warmup=i == 0):\n\
         \x20       time.sleep(0.05)\n\
         with llmprof.stage('detokenize'):\n\
         \x20   pass\n",
    )
    .unwrap();
    let runs = dir.path().join("runs");
    let cmd = format!("{} {}", python.display(), script.display());
    let args: [&std::ffi::OsStr; 10] = [
        "--cmd".as_ref(),
        cmd.as_ref(),
        "--repeats".as_ref(),
        "2".as_ref(),
        "--mode".as_ref(),
        "light".as_ref(),
        "--no-pin".as_ref(),
        "--allow-empty".as_ref(),
        "--out".as_ref(),
        runs.as_os_str(),
    ];
    let o = capture_cmd(&args)
        .env("PYTHONPATH", repo().join("python"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let run = only_run(&runs);
    let lines = std::fs::read_to_string(run.join("raw/baseline/stages.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 2 * 9, "{lines}");
    let b = llmprof_bundle::Bundle::from_json(
        &std::fs::read_to_string(run.join("bundle.json")).unwrap(),
    )
    .unwrap();
    let base = b
        .capture
        .as_ref()
        .unwrap()
        .baseline
        .as_ref()
        .expect("baseline timings");
    assert_eq!((base.iterations, base.processes), (6, 2), "{base:?}");
    let processes: Vec<u32> = base.samples.iter().map(|s| s.process).collect();
    assert_eq!(processes, [0, 0, 0, 1, 1, 1]);
    let ms = |ns: f64| ns / 1e6;
    assert!(
        (20.0..200.0).contains(&ms(base.prefill.median_ns)),
        "{base:?}"
    );
    assert!(
        (50.0..500.0).contains(&ms(base.decode.median_ns)),
        "{base:?}"
    );
    let show = crate::common::llmprof(["show".as_ref(), run.as_os_str()]);
    let text = String::from_utf8_lossy(&show.stdout);
    // The median the bundle holds, as `show` prints it (its value depends on the load: the
    // range above checks it).
    let line = format!(
        "baseline 6 iterations from 2 process(es): prefill median {:.3} ms",
        ms(base.prefill.median_ns)
    );
    assert!(
        text.contains(&line) && text.contains("stages.jsonl"),
        "{line}\n{text}"
    );
}
