//! Running the passes of a capture plan, keeping every artifact, and writing the record of it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use llmprof_bundle::{Capture, ManifestEntry, NvmlSeries, PassRecord, Window};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::nvml::{now_ns, Sampler};
use crate::timings;
use crate::{CaptureError, Mode, Plan};

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
    pub metadata: PathBuf,
    pub model_config: Option<PathBuf>,
    pub capture: Capture,
    pub nvml: Option<NvmlSeries>,
}

/// Runs every pass the plan lists. A failed pass is recorded and the others still run; only
/// when every pass fails is it an error. Nothing is deleted on failure.
pub fn run(plan: &Plan, progress: &mut dyn FnMut(&str)) -> Result<CaptureOutput, CaptureError> {
    let python = plan
        .python
        .as_ref()
        .map_err(|e| CaptureError::Environment(e.clone()))?;
    let t = &plan.target;
    let write_err = |path: &Path, source| CaptureError::Write {
        path: path.to_path_buf(),
        source,
    };
    // The driver wants absolute paths.
    std::fs::create_dir_all(&plan.opts.out).map_err(|e| write_err(&plan.opts.out, e))?;
    let out_root =
        std::fs::canonicalize(&plan.opts.out).map_err(|e| write_err(&plan.opts.out, e))?;
    let work_dir = out_root.join(format!(".capture-{}-{}", t.name, now_ns() / 1_000_000));
    let raw = work_dir.join("raw");
    std::fs::create_dir_all(&raw).map_err(|e| write_err(&raw, e))?;
    let driver = work_dir.join("driver.py");
    std::fs::write(&driver, DRIVER).map_err(|e| write_err(&driver, e))?;
    let model_config = t.model_config().and_then(|c| {
        let p = raw.join("config.json");
        std::fs::write(&p, serde_json::to_string_pretty(&c).ok()?).ok()?;
        Some(p)
    });

    let repeats = plan.opts.repeats.unwrap_or(t.run.repeats);
    let mut capture = Capture {
        target: t.name.clone(),
        target_config: serde_json::to_value(t).unwrap_or_default(),
        mode: plan.opts.mode.as_str().into(),
        ..Capture::default()
    };
    let sampler = match Sampler::start(plan.opts.device, Duration::from_millis(20)) {
        Ok(s) => Some(s),
        Err(e) => {
            capture.missing.push(format!("NVML samples: {e}"));
            None
        }
    };
    let mut windows: Vec<Window> = Vec::new();
    let mut nsys_sqlite: Option<PathBuf> = None;
    let timeout = Duration::from_secs(t.run.timeout_s);

    for &pass in &plan.passes {
        let out = raw.join(pass);
        std::fs::create_dir_all(&out).map_err(|e| write_err(&out, e))?;
        let plan_path = out.join("plan.json");
        let plan_json = json!({
            "pass": if pass == "ncu" { "nsys" } else { pass },
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
            "warmup": t.run.warmup,
            "repeats": if pass == "ncu" { 1 } else { repeats },
            "device": plan.opts.device,
        });
        std::fs::write(&plan_path, plan_json.to_string()).map_err(|e| write_err(&plan_path, e))?;
        let workload = vec![
            python.path.display().to_string(),
            driver.display().to_string(),
            plan_path.display().to_string(),
        ];
        let mut stdout_to = None;
        let command: Vec<String> = match pass {
            "nsys" => {
                let Some(nsys) = &plan.nsys else { continue };
                let mut c = vec![
                    nsys.display().to_string(),
                    "profile".into(),
                    "-t".into(),
                    "cuda,nvtx".into(),
                    "--sample=none".into(),
                    "--cpuctxsw=none".into(),
                    "--force-overwrite=true".into(),
                    "-o".into(),
                    out.join("profile").display().to_string(),
                ];
                c.extend(workload);
                c
            }
            "ncu" => {
                let Some(ncu) = &plan.ncu else { continue };
                stdout_to = Some(out.join("ncu_decode_raw.csv"));
                let mut c = vec![
                    ncu.display().to_string(),
                    "--clock-control".into(),
                    "none".into(),
                    "--nvtx".into(),
                    "--nvtx-include".into(),
                    "decode/".into(),
                ];
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
        progress(&format!("{pass} pass: {}", command.join(" ")));
        let start = now_ns();
        let record = run_one(
            pass,
            &command,
            timeout,
            stdout_to.as_deref(),
            &out.join("stderr.log"),
        );
        windows.push(Window {
            name: pass.to_string(),
            start_ns: start,
            end_ns: now_ns(),
        });
        capture.passes.push(record);
        if pass == "nsys" {
            nsys_sqlite = export_nsys(plan, &raw, timeout, &mut capture, progress);
        }
    }
    let nvml = sampler.map(|s| {
        let mut series = s.stop();
        series.windows = windows;
        series
    });

    let kineto = [raw.join("kineto/kineto_trace.json")]
        .into_iter()
        .find(|p| p.is_file());
    // ncu prints its table only when it profiled something.
    let ncu_csv = Some(raw.join("ncu/ncu_decode_raw.csv")).filter(|p| {
        std::fs::read_to_string(p)
            .map(|t| t.lines().any(|l| l.starts_with("\"ID\"")))
            .unwrap_or(false)
    });
    if plan.passes.contains(&"ncu") && ncu_csv.is_none() {
        capture.missing.push(
            "Nsight Compute profiled no kernel (no table in raw/ncu/ncu_decode_raw.csv; see \
             raw/ncu/stderr.log)"
                .into(),
        );
    }

    // Baseline, overhead, versions, and the metadata ingest reads.
    let timing = timings::read_all(&raw);
    capture.baseline = timing.baseline.clone();
    capture.overhead = timing.overhead();
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
    let decode_instances = if nsys_sqlite.is_some() { repeats } else { 1 };
    let metadata = raw.join("metadata.json");
    let meta = json!({
        "batch_size": t.inputs.batch_size,
        "prompt_tokens": t.inputs.prompt_tokens,
        "image_tokens": timings::image_tokens(&raw),
        "decode_steps": vec![t.inputs.max_new_tokens; decode_instances as usize],
        "prefill_logits": 1,
        "counted_flops": timings::counted_flops(&raw),
        "counted_flops_source": "torch.utils.flop_counter.FlopCounterMode (llmprof driver, flops pass)",
    });
    std::fs::write(
        &metadata,
        serde_json::to_string_pretty(&meta).unwrap_or_default(),
    )
    .map_err(|e| write_err(&metadata, e))?;

    for p in &capture.passes {
        if !p.ok {
            capture.missing.push(format!(
                "the {} pass failed ({}); its output so far is kept under raw/{}/",
                p.name,
                p.note.clone().unwrap_or_default(),
                p.name
            ));
        }
    }
    // Size cap: big raw files (the PyTorch profiler's JSON trace) are kept gzipped.
    let compressed = crate::retention::compress_raw(&raw, crate::retention::COMPRESS_NOW_BYTES);
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
    if capture.passes.iter().all(|p| !p.ok) {
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

/// Kernels Nsight Compute profiles in deep mode: the top ones by GPU time in the nsys pass.
const TOP_K: usize = 5;

/// `regex:^(a|b|c)$` over the short names of the `k` kernels with the most GPU time in an
/// nsys export; `None` when the export cannot be read.
fn top_kernels_regex(db: &Path, k: usize) -> Option<String> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ok()?;
    let mut stmt = conn
        .prepare(
            "SELECT s.value, SUM(k.end - k.start) AS t FROM CUPTI_ACTIVITY_KIND_KERNEL k \
             JOIN StringIds s ON s.id = k.shortName GROUP BY s.value ORDER BY t DESC LIMIT ?1",
        )
        .ok()?;
    let names: Vec<String> = stmt
        .query_map([k as i64], |r| r.get::<_, String>(0))
        .ok()?
        .flatten()
        .collect();
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
) -> Option<PathBuf> {
    let nsys = plan.nsys.as_ref()?;
    let rep = raw.join("nsys/profile.nsys-rep");
    if rep.is_file() {
        let sqlite = raw.join("nsys/profile.sqlite");
        let cmd = vec![
            nsys.display().to_string(),
            "export".into(),
            "--type".into(),
            "sqlite".into(),
            "--force-overwrite".into(),
            "true".into(),
            "-o".into(),
            sqlite.display().to_string(),
            rep.display().to_string(),
        ];
        progress("exporting the Nsight Systems report to SQLite");
        let r = run_one(
            "nsys-export",
            &cmd,
            timeout,
            None,
            &raw.join("nsys/export.log"),
        );
        let ok = sqlite.is_file();
        if !ok {
            capture.missing.push(format!(
                "nsys export failed ({}); the report is kept at raw/nsys/profile.nsys-rep",
                r.note.clone().unwrap_or_default()
            ));
        }
        capture.passes.push(r);
        return ok.then_some(sqlite);
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

/// Runs one command with a time limit; its stderr goes to `log`, its stdout to `stdout_to` or
/// the log too.
fn run_one(
    name: &str,
    command: &[String],
    timeout: Duration,
    stdout_to: Option<&Path>,
    log: &Path,
) -> PassRecord {
    let started = Instant::now();
    let mut record = PassRecord {
        name: name.to_string(),
        command: command.to_vec(),
        exit_code: None,
        wall_ns: 0,
        ok: false,
        note: None,
    };
    let Some((exe, args)) = command.split_first() else {
        record.note = Some("empty command".into());
        return record;
    };
    let stderr = std::fs::File::create(log).ok();
    let stdout = match stdout_to {
        Some(p) => std::fs::File::create(p).ok().map(Stdio::from),
        None => stderr
            .as_ref()
            .and_then(|f| f.try_clone().ok())
            .map(Stdio::from),
    };
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(stdout.unwrap_or_else(Stdio::null))
        .stderr(stderr.map(Stdio::from).unwrap_or_else(Stdio::null));
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            record.note = Some(format!("cannot start `{exe}`: {e}"));
            return record;
        }
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if started.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                record.note = Some(format!(
                    "stopped after the {} s time limit ([run] timeout_s)",
                    timeout.as_secs()
                ));
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => {
                record.note = Some(format!("lost the child process: {e}"));
                break None;
            }
        }
    };
    record.wall_ns = started.elapsed().as_nanos() as u64;
    if let Some(s) = status {
        record.exit_code = s.code();
        record.ok = s.success();
        if !s.success() {
            record.note = Some(format!(
                "exit {}: {}",
                s.code().map_or("by signal".to_string(), |c| c.to_string()),
                last_line(log)
            ));
        }
    }
    record
}

fn last_line(path: &Path) -> String {
    let mut text = String::new();
    let _ = std::fs::File::open(path).and_then(|mut f| f.read_to_string(&mut text));
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no output")
        .chars()
        .take(300)
        .collect()
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
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.sqlite");
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch(
            "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
             CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, shortName INTEGER);
             INSERT INTO StringIds VALUES (1, 'nvjet_sm90_tst_64x8'), (2, 'elementwise_kernel'), (3, 'op<x>.y');
             INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (0, 50, 1), (0, 30, 2), (0, 30, 2), (0, 10, 3);",
        )
        .unwrap();
        drop(c);
        assert_eq!(
            top_kernels_regex(&db, 2).as_deref(),
            Some("regex:^(elementwise_kernel|nvjet_sm90_tst_64x8)$")
        );
        assert_eq!(
            top_kernels_regex(&db, 3).as_deref(),
            Some("regex:^(elementwise_kernel|nvjet_sm90_tst_64x8|op<x>\\.y)$")
        );
        assert!(top_kernels_regex(&dir.path().join("none.sqlite"), 2).is_none());
    }
}
