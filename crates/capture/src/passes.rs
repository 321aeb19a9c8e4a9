//! Running the passes of a capture plan, keeping every artifact, and writing the record of it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use llmprof_bundle::{Capture, ManifestEntry, NvmlSeries, Overhead, PassRecord, Window};
use llmprof_store::retention;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::nsys_export;
use crate::nvml::{now_ns, Sampler};
use crate::process::{self, Job, Ran, Stopped};
use crate::timings;
use crate::{disk_full_message, CaptureError, Interrupt, Mode, Plan};

/// The workload driver, embedded so a bare `cargo install` can capture.
const DRIVER: &str = include_str!("driver/driver.py");

/// ncu metrics of the deep pass (the fixture's list: duration, SM/memory/DRAM throughput,
/// occupancy, tensor pipe, launch geometry).
const NCU_METRICS: &str = "gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,sm__maximum_warps_per_active_cycle_pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct,launch__grid_size,launch__block_size,launch__registers_per_thread";

/// What a capture left, for ingest.
#[derive(Debug)]
pub struct CaptureOutput {
    /// The capture's working directory (holds `raw/`).
    pub work_dir: PathBuf,
    pub raw_dir: PathBuf,
    pub kineto: Option<PathBuf>,
    pub nsys_sqlite: Option<PathBuf>,
    pub ncu_csv: Option<PathBuf>,
    /// The run metadata for ingest (token counts, counted FLOPs); `None` for `--cmd`.
    pub metadata: Option<PathBuf>,
    pub model_config: Option<PathBuf>,
    pub capture: Capture,
    pub nvml: Option<NvmlSeries>,
}

/// Seconds a `--cmd` pass may run unless `--timeout` says otherwise.
const COMMAND_TIMEOUT_S: u64 = 3600;

/// Runs every pass the plan lists. A failed pass is recorded and the others still run; only
/// when every pass fails is it an error. Nothing is deleted on failure. When `interrupt` fires
/// the running pass is stopped, no further pass starts, and what was captured is returned with
/// `capture.interrupted` set.
pub fn run(
    plan: &Plan,
    progress: &mut dyn FnMut(&str),
    interrupt: &Interrupt,
) -> Result<CaptureOutput, CaptureError> {
    let python = match &plan.python {
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => return Err(CaptureError::Environment(e.clone())),
        None => None,
    };
    let target = plan.target.as_ref();
    let name = plan.name().to_string();
    // The driver wants absolute paths.
    let early = |path: &Path, e| write_error(path, e, None);
    std::fs::create_dir_all(&plan.opts.out).map_err(|e| early(&plan.opts.out, e))?;
    let out_root = std::fs::canonicalize(&plan.opts.out).map_err(|e| early(&plan.opts.out, e))?;
    let work_dir = out_root.join(format!(".capture-{name}-{}", now_ns() / 1_000_000));
    let write_err = |path: &Path, e| write_error(path, e, Some(&work_dir));
    let raw = work_dir.join("raw");
    std::fs::create_dir_all(&raw).map_err(|e| write_err(&raw, e))?;
    let driver = match (python, target) {
        (Some(_), Some(_)) => {
            let d = work_dir.join("driver.py");
            std::fs::write(&d, DRIVER).map_err(|e| write_err(&d, e))?;
            Some(d)
        }
        _ => None,
    };
    let model_config = target.and_then(|t| t.model_config()).and_then(|c| {
        let p = raw.join("config.json");
        std::fs::write(&p, serde_json::to_string_pretty(&c).ok()?).ok()?;
        Some(p)
    });

    let repeats = plan
        .opts
        .repeats
        .unwrap_or(target.map_or(1, |t| t.run.repeats));
    let mut capture = capture_record(plan, &name);
    let sampler = match Sampler::start(plan.opts.device, Duration::from_millis(20)) {
        Ok(s) => Some(s),
        Err(e) => {
            capture.missing.push(format!("NVML samples: {e}"));
            None
        }
    };
    let mut windows: Vec<Window> = Vec::new();
    let mut nsys_sqlite: Option<PathBuf> = None;
    let timeout = Duration::from_secs(
        plan.opts
            .timeout_s
            .unwrap_or(target.map_or(COMMAND_TIMEOUT_S, |t| t.run.timeout_s)),
    );
    let mut not_run: Vec<&str> = Vec::new();
    let mut disk_full = false;

    for &pass in &plan.passes {
        let kind = crate::pass_kind(pass);
        if interrupt.is_set() || capture.interrupted {
            not_run.push(pass);
            continue;
        }
        let out = raw.join(pass);
        std::fs::create_dir_all(&out).map_err(|e| write_err(&out, e))?;
        let mut env: Vec<(String, String)> = Vec::new();
        let workload: Vec<String> = match (target, &plan.command, python, &driver) {
            (Some(t), _, Some(py), Some(driver)) => {
                let plan_path = out.join("plan.json");
                let doc = driver_plan(t, plan, pass, &out, repeats);
                std::fs::write(&plan_path, doc.to_string())
                    .map_err(|e| write_err(&plan_path, e))?;
                vec![
                    py.path.display().to_string(),
                    driver.display().to_string(),
                    plan_path.display().to_string(),
                ]
            }
            (_, Some(c), _, _) => {
                env.push(("LLMPROF_PASS".into(), pass.into()));
                env.push(("LLMPROF_OUT_DIR".into(), out.display().to_string()));
                env.push(("LLMPROF_STAGES".into(), c.stages.join(",")));
                if pass == "kineto" {
                    env.push((
                        "LLMPROF_KINETO_OUT".into(),
                        out.join("kineto_trace.json").display().to_string(),
                    ));
                }
                vec!["sh".into(), "-c".into(), c.command.clone()]
            }
            _ => continue,
        };
        let mut stdout_to = None;
        let command: Vec<String> = match kind {
            "nsys" => {
                let Some(nsys) = &plan.nsys else {
                    capture.missing.push(
                        "the nsys pass did not run: Nsight Systems (`nsys`) was not found on PATH \
                         or under /opt/nvidia; install it or set NSYS=/path/to/nsys (or use \
                         --mode light)"
                            .into(),
                    );
                    continue;
                };
                let mut c = vec![
                    nsys.display().to_string(),
                    "profile".into(),
                    "-t".into(),
                    "cuda,nvtx".into(),
                    "--sample=none".into(),
                    "--cpuctxsw=none".into(),
                    format!("--cuda-graph-trace={}", plan.opts.cuda_graph_trace.as_str()),
                    "--force-overwrite=true".into(),
                    "-o".into(),
                    out.join("profile").display().to_string(),
                ];
                c.extend(workload);
                c
            }
            "ncu" => {
                let Some(ncu) = &plan.ncu else {
                    capture.missing.push(
                        "the ncu pass did not run: Nsight Compute (`ncu`) was not found; install \
                         it or set NCU=/path/to/ncu (or use --mode standard)"
                            .into(),
                    );
                    continue;
                };
                stdout_to = Some(out.join("ncu_decode_raw.csv"));
                // Kernels a CUDA graph launches are profiled one by one (ncu's node mode, said
                // explicitly), under the NVTX range of their `cudaGraphLaunch`.
                let mut c = vec![
                    ncu.display().to_string(),
                    "--clock-control".into(),
                    "none".into(),
                    "--graph-profiling".into(),
                    "node".into(),
                ];
                // Only kernels inside the stages: decode for a target, --stages for a command.
                let ranges: Vec<String> = match &plan.command {
                    Some(cmd) => cmd.stages.clone(),
                    None => vec!["decode".into()],
                };
                if !ranges.is_empty() {
                    c.push("--nvtx".into());
                    for r in ranges {
                        c.push("--nvtx-include".into());
                        c.push(format!("{r}/"));
                    }
                }
                // The top kernels by GPU time in the Nsight Systems pass, when it ran.
                if let Some(re) = nsys_sqlite
                    .as_deref()
                    .and_then(|db| top_kernels_regex(db, TOP_K))
                {
                    c.push("-k".into());
                    c.push(re);
                }
                c.extend([
                    "-c".into(),
                    "30".into(),
                    "--csv".into(),
                    "--page".into(),
                    "raw".into(),
                    "--metrics".into(),
                    NCU_METRICS.into(),
                ]);
                c.extend(workload);
                c
            }
            _ => workload,
        };
        // A --cmd baseline runs `repeats` times (each run is one timing sample); a target's
        // driver repeats iterations inside one process.
        let runs = if plan.command.is_some() && kind == "baseline" {
            repeats
        } else {
            1
        };
        for i in 0..runs {
            let (label, log) = if i == 0 {
                (pass.to_string(), out.join("stderr.log"))
            } else {
                (
                    format!("{pass} #{}", i + 1),
                    out.join(format!("stderr-{}.log", i + 1)),
                )
            };
            progress(&format!("{label} pass: {}", shell_join(&command)));
            let start = now_ns();
            let job = Job {
                name: &label,
                command: &command,
                env: &env,
                stdout_to: stdout_to.as_deref(),
                log: &log,
                timeout,
            };
            let Ran {
                record, stopped, ..
            } = process::run(&job, Some(interrupt));
            windows.push(Window {
                name: label,
                start_ns: start,
                end_ns: now_ns(),
            });
            let full = record
                .note
                .as_deref()
                .is_some_and(|n| n.contains("No space left on device") || n.contains("Disk quota"));
            capture.passes.push(record);
            if stopped == Stopped::Interrupt {
                capture.interrupted = true;
                break;
            }
            if full {
                capture
                    .missing
                    .push(disk_full_message(&out, Some(&work_dir)));
                disk_full = true;
                not_run.extend(
                    plan.passes
                        .iter()
                        .skip_while(|&&p| p != pass)
                        .skip(1)
                        .copied(),
                );
                break;
            }
        }
        if disk_full {
            break;
        }
        if pass == "nsys" {
            if capture.interrupted {
                if out.join("profile.nsys-rep").is_file() {
                    capture.missing.push(
                        "the Nsight Systems report was not exported (interrupted); it is kept \
                         at raw/nsys/profile.nsys-rep: `llmprof ingest --nsys` it"
                            .into(),
                    );
                }
            } else {
                nsys_sqlite = export_nsys(plan, &raw, timeout, &mut capture, progress, interrupt);
            }
        }
    }
    // Ctrl-C between two passes stops the capture as well.
    if interrupt.is_set() {
        capture.interrupted = true;
    }
    let mut nvml = sampler.map(|s| {
        let mut series = s.stop();
        series.windows = windows.clone();
        series
    });
    if capture.interrupted || disk_full {
        for p in &not_run {
            capture.missing.push(format!(
                "the {p} pass did not run: the capture {}",
                if disk_full {
                    "stopped at the full disk"
                } else {
                    "was interrupted"
                }
            ));
        }
    }

    let kineto = ["kineto/kineto_trace.json", "kineto/kineto_trace.json.gz"]
        .iter()
        .map(|p| raw.join(p))
        .find(|p| p.is_file());
    let kineto_ran_ok = capture.passes.iter().any(|p| p.name == "kineto" && p.ok);
    if plan.command.is_some() && kineto_ran_ok && kineto.is_none() {
        capture.missing.push(
            "PyTorch-profiler operators: the workload wrote no trace at $LLMPROF_KINETO_OUT \
             (raw/kineto/kineto_trace.json). A --cmd workload gets a kineto pass only with its \
             cooperation: when LLMPROF_KINETO_OUT is set, profile one iteration with \
             torch.profiler and call prof.export_chrome_trace(os.environ[\"LLMPROF_KINETO_OUT\"])"
                .into(),
        );
    }
    // ncu prints its table only when it profiled something.
    let ncu_csv = Some(raw.join("ncu/ncu_decode_raw.csv")).filter(|p| {
        std::fs::read_to_string(p)
            .map(|t| t.lines().any(|l| l.starts_with("\"ID\"")))
            .unwrap_or(false)
    });
    if plan.passes.contains(&"ncu") && ncu_csv.is_none() && !not_run.contains(&"ncu") {
        capture.missing.push(
            "Nsight Compute profiled no kernel (no table in raw/ncu/ncu_decode_raw.csv; see \
             raw/ncu/stderr.log)"
                .into(),
        );
    }

    // Baseline, overhead, energy, versions, and the metadata ingest reads.
    capture.snapshot = crate::nvml::snapshot(plan.opts.device).unwrap_or_default();
    capture.snapshot.llmprof = env!("CARGO_PKG_VERSION").into();
    timings::versions_into(&raw, &mut capture.snapshot);
    if let Some(n) = &plan.nsys {
        if let Some(v) = crate::tools::version(n, &["--version"]) {
            capture.snapshot.tools.push(("nsys".into(), v));
        }
    }
    if let (Some(n), Mode::Deep) = (&plan.ncu, plan.opts.mode) {
        if let Some(v) = crate::tools::version(n, &["--version"]) {
            capture.snapshot.tools.push(("ncu".into(), v));
        }
    }
    let metadata = match target {
        Some(t) => {
            let timing = timings::read_all(&raw);
            capture.compile = timings::compile_records(&raw, &plan.passes);
            capture.baseline = timing.baseline.clone();
            capture.overhead = timing.overhead();
            let image_tokens = timings::image_tokens(&raw);
            if let Some(series) = nvml.as_mut() {
                energy_into(
                    &mut capture,
                    series,
                    &timings::baseline_windows(&raw),
                    |stage| match stage {
                        "prefill" => {
                            Some((t.inputs.prompt_tokens + image_tokens) * t.inputs.batch_size)
                        }
                        "decode" => Some(t.inputs.max_new_tokens * t.inputs.batch_size),
                        _ => None,
                    },
                );
            }
            let cal = timings::calibration(&raw);
            let decode_instances = if nsys_sqlite.is_some() { repeats } else { 1 };
            let metadata = raw.join("metadata.json");
            let meta = json!({
                "batch_size": t.inputs.batch_size,
                "prompt_tokens": t.inputs.prompt_tokens,
                "image_tokens": image_tokens,
                "decode_steps": vec![t.inputs.max_new_tokens; decode_instances as usize],
                "prefill_logits": 1,
                "counted_flops": timings::counted_flops(&raw),
                "counted_flops_source": "torch.utils.flop_counter.FlopCounterMode (llmprof driver, flops pass)",
                "measured_tflops": cal.0,
                "measured_gbps": cal.1,
            });
            std::fs::write(
                &metadata,
                serde_json::to_string_pretty(&meta).unwrap_or_default(),
            )
            .map_err(|e| write_err(&metadata, e))?;
            Some(metadata)
        }
        None => {
            capture.overhead = command_overhead(&capture.passes, kineto.is_some());
            if let Some(series) = nvml.as_mut() {
                // The windows of the baseline runs that succeeded (labels are unique).
                let ok: Vec<&str> = capture
                    .passes
                    .iter()
                    .filter(|p| p.ok && p.name.starts_with("baseline"))
                    .map(|p| p.name.as_str())
                    .collect();
                let runs: Vec<(i64, i64)> = windows
                    .iter()
                    .filter(|w| ok.contains(&w.name.as_str()))
                    .map(|w| (w.start_ns, w.end_ns))
                    .collect();
                energy_into(&mut capture, series, &[("command", runs)], |_| None);
            }
            None
        }
    };
    if nvml.is_none() {
        capture.energy_note = Some("no energy: no NVML samples".into());
    }

    for p in &capture.passes {
        if !p.ok {
            let dir = p.name.split(' ').next().unwrap_or(&p.name);
            capture.missing.push(format!(
                "the {} pass failed ({}); its output so far is kept under raw/{dir}/",
                p.name,
                p.note.clone().unwrap_or_default(),
            ));
        }
    }
    // Size cap: big raw files (the PyTorch profiler's JSON trace) are kept gzipped.
    let compressed = retention::compress_raw(&raw, retention::COMPRESS_NOW_BYTES);
    let kineto = kineto.map(|k| {
        if compressed.contains(&k) {
            let mut gz = k.into_os_string();
            gz.push(".gz");
            PathBuf::from(gz)
        } else {
            k
        }
    });
    capture.manifest = manifest(&work_dir, &raw);
    if capture.passes.iter().all(|p| !p.ok) && !capture.interrupted {
        return Err(CaptureError::NothingCaptured(format!(
            "Artifacts and logs are kept in `{}`.",
            work_dir.display()
        )));
    }
    Ok(CaptureOutput {
        work_dir,
        raw_dir: raw,
        kineto,
        nsys_sqlite,
        ncu_csv,
        metadata,
        model_config,
        capture,
        nvml,
    })
}

/// What the capture records before any pass runs: the target (overrides applied) or the
/// command, the mode, and how nsys will trace CUDA graphs.
fn capture_record(plan: &Plan, name: &str) -> Capture {
    let target = plan.target.as_ref();
    Capture {
        target: name.to_string(),
        target_config: match (target, &plan.command) {
            (Some(t), _) => serde_json::to_value(t).unwrap_or_default(),
            (None, Some(c)) => json!({"command": c.command, "stages": c.stages}),
            (None, None) => serde_json::Value::Null,
        },
        mode: plan.opts.mode.as_str().into(),
        command: plan.command.as_ref().map(|c| c.command.clone()),
        overrides: plan.opts.overrides.iter().map(|o| o.text.clone()).collect(),
        cuda_graph_trace: plan
            .passes
            .iter()
            .any(|p| crate::pass_kind(p) == "nsys")
            .then(|| plan.opts.cuda_graph_trace.as_str().to_string()),
        stage_names: plan
            .command
            .as_ref()
            .map(|c| c.stages.clone())
            .unwrap_or_default(),
        ..Capture::default()
    }
}

/// The driver's plan for one pass of a target.
fn driver_plan(
    t: &crate::Target,
    plan: &Plan,
    pass: &str,
    out: &Path,
    repeats: u64,
) -> serde_json::Value {
    json!({
        "pass": match crate::pass_kind(pass) {
            "ncu" => "nsys",
            kind => kind,
        },
        "out_dir": out,
        "model": {
            "config": t.model.config,
            "path": t.model.path,
            "dtype": t.model.dtype,
            "attn_implementation": t.model.attn_implementation,
        },
        "inputs": {
            "prompt_tokens": t.inputs.prompt_tokens,
            "max_new_tokens": t.inputs.max_new_tokens,
            "batch_size": t.inputs.batch_size,
            "seed": t.inputs.seed,
            "images": t.inputs.images.as_ref().map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())),
        },
        "stages": { "modules": t.stages.modules },
        "optimize": {
            "compile": t.optimize.compile.as_str(),
            "cache": t.optimize.cache.as_str(),
        },
        "warmup": t.run.warmup,
        "repeats": if pass == "ncu" { 1 } else { repeats },
        "device": plan.opts.device,
    })
}

/// Energy per stage into the capture record; the stage windows are also added to the series
/// (as `baseline/<stage>`) for charts.
fn energy_into(
    capture: &mut Capture,
    series: &mut NvmlSeries,
    windows: &[(&str, Vec<(i64, i64)>)],
    tokens: impl Fn(&str) -> Option<u64>,
) {
    for (stage, w) in windows {
        if let Some(e) = crate::energy::stage_energy(series, stage, w, tokens(stage)) {
            capture.energy.push(e);
        }
    }
    capture.energy_note = Some(if capture.energy.is_empty() {
        "no energy: the NVML samples cover no stage window of the baseline pass (none recorded, \
         or the pass failed)"
            .into()
    } else {
        let mut note = crate::energy::note(series);
        let checks: Vec<String> = capture
            .energy
            .iter()
            .filter_map(|e| {
                let c = e.counter_energy_j?;
                (e.energy_j > 0.0).then(|| {
                    format!(
                        "{} {:+.0}% ({} sample{} in {:.0} ms windows)",
                        e.stage,
                        (c - e.energy_j) / e.energy_j * 100.0,
                        e.samples,
                        if e.samples == 1 { "" } else { "s" },
                        e.wall_ns / 1e6
                    )
                })
            })
            .collect();
        if !checks.is_empty() {
            note.push_str(&format!(
                " NVML's total-energy counter over the same windows differs by {}: a window only \
                 a few samples long is uncertain.",
                checks.join(", ")
            ));
        }
        note
    });
}

/// `--cmd`: each profiled pass's wall time against the median of the baseline runs (the whole
/// command, start-up included: the host cannot see the workload's stages).
/// The kineto pass counts only when the workload wrote a trace (else it ran unprofiled).
fn command_overhead(passes: &[PassRecord], kineto_traced: bool) -> Vec<Overhead> {
    let mut base: Vec<u64> = passes
        .iter()
        .filter(|p| p.ok && p.name.starts_with("baseline"))
        .map(|p| p.wall_ns)
        .collect();
    let b = llmprof_bundle::Distribution::from_samples(&mut base);
    if b.count == 0 || b.median_ns <= 0.0 {
        return Vec::new();
    }
    passes
        .iter()
        .filter(|p| {
            p.ok && (crate::pass_kind(&p.name) == "nsys" || p.name == "kineto" && kineto_traced)
        })
        .map(|p| Overhead {
            pass: p.name.clone(),
            stage: "command".into(),
            baseline_median_ns: b.median_ns,
            profiled_median_ns: p.wall_ns as f64,
            overhead_pct: (p.wall_ns as f64 - b.median_ns) / b.median_ns * 100.0,
            pairs: 1,
            pair_range_pct: None,
        })
        .collect()
}

/// A command line as a shell would read it back (words with spaces or quotes single-quoted).
fn shell_join(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A write error as the capture reports it: a full disk gets its one-line message.
fn write_error(path: &Path, e: std::io::Error, keep: Option<&Path>) -> CaptureError {
    if crate::is_disk_full(&e) {
        CaptureError::DiskFull {
            path: path.to_path_buf(),
            keep: keep.map(Path::to_path_buf),
        }
    } else {
        CaptureError::Write {
            path: path.to_path_buf(),
            source: e,
        }
    }
}

/// Kernels Nsight Compute profiles in deep mode: the top ones by GPU time in the nsys pass.
const TOP_K: usize = 5;

/// `regex:^(a|b|c)$` over the short names of the `k` kernels with the most GPU time in an
/// nsys export; `None` when the export cannot be read or ran no kernel.
fn top_kernels_regex(db: &Path, k: usize) -> Option<String> {
    let names = llmprof_ingest::nsys::top_kernels_by_time(db, k).ok()?;
    kernel_regex(&names)
}

/// `regex:^(a|b|c)$` matching exactly these kernel names; `None` for no names.
fn kernel_regex(names: &[String]) -> Option<String> {
    if names.is_empty() {
        return None;
    }
    let escaped: Vec<String> = names.iter().map(|n| regex_escape(n)).collect();
    Some(format!("regex:^({})$", escaped.join("|")))
}

fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.^$|?*+()[]{}".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Exports the nsys pass's report to SQLite; records what is missing when it cannot.
fn export_nsys(
    plan: &Plan,
    raw: &Path,
    timeout: Duration,
    capture: &mut Capture,
    progress: &mut dyn FnMut(&str),
    interrupt: &Interrupt,
) -> Option<PathBuf> {
    let nsys = plan.nsys.as_ref()?;
    let rep = raw.join("nsys/profile.nsys-rep");
    if rep.is_file() {
        progress("exporting the Nsight Systems report to SQLite");
        let exported = nsys_export::export(
            nsys,
            &rep,
            &raw.join("nsys/profile.sqlite"),
            timeout,
            &raw.join("nsys/export.log"),
            Some(interrupt),
        );
        if exported.result.is_err() {
            capture.missing.push(format!(
                "nsys export failed ({}); the report is kept at raw/nsys/profile.nsys-rep",
                exported.record.note.clone().unwrap_or_default()
            ));
        }
        capture.passes.push(exported.record);
        return exported.result.ok();
    }
    let only_qdstrm = std::fs::read_dir(raw.join("nsys"))
        .map(|rd| {
            rd.flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "qdstrm"))
        })
        .unwrap_or(false);
    capture.missing.push(if only_qdstrm {
        "Nsight Systems left only a .qdstrm: its importer could not load libdw.so.1. Put \
         elfutils' libdw.so.1 and libelf.so.1 in a folder and run with \
         LD_LIBRARY_PATH=<that folder> (shared/gpu/fetch-nsys-libs.sh fetches them)"
            .into()
    } else {
        "the Nsight Systems pass wrote no report: see raw/nsys/stderr.log".into()
    });
    None
}

/// Every file under `raw/` with its size and sha256.
fn manifest(work_dir: &Path, raw: &Path) -> Vec<ManifestEntry> {
    let mut files = Vec::new();
    let mut stack = vec![raw.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    files
        .into_iter()
        .filter_map(|p| {
            let mut f = std::fs::File::open(&p).ok()?;
            let mut h = Sha256::new();
            let mut buf = vec![0u8; 1 << 20];
            let mut bytes = 0u64;
            loop {
                let n = f.read(&mut buf).ok()?;
                if n == 0 {
                    break;
                }
                bytes += n as u64;
                h.update(&buf[..n]);
            }
            let digest: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
            Some(ManifestEntry {
                path: p.strip_prefix(work_dir).unwrap_or(&p).display().to_string(),
                bytes,
                sha256: digest,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_kernels_become_an_ncu_name_regex() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            kernel_regex(&names(&["elementwise_kernel", "nvjet_sm90_tst_64x8"])).as_deref(),
            Some("regex:^(elementwise_kernel|nvjet_sm90_tst_64x8)$")
        );
        assert_eq!(
            kernel_regex(&names(&["op<x>.y", "a(b)"])).as_deref(),
            Some("regex:^(op<x>\\.y|a\\(b\\))$")
        );
        assert!(kernel_regex(&[]).is_none());
        assert!(top_kernels_regex(Path::new("/nonexistent/none.sqlite"), 2).is_none());
    }
}
