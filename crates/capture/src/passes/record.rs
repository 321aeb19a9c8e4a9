//! The capture record: what it says before any pass runs ([`capture_record`]) and what the
//! passes' artifacts add after the last one ([`finish`]): which traces there are, the
//! environment and tool versions, the baseline, overhead and energy, the run metadata ingest
//! reads, what is missing, and the sha256 manifest.

use std::io::Read;
use std::path::{Path, PathBuf};

use llmprof_bundle::{Capture, ManifestEntry, NvmlSeries};
use llmprof_store::{retention, RAW_DIR};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{CaptureOutput, RankOutput, Session, State};
use crate::{cmd_timings, timings, CaptureError, Mode, Plan, Target};

/// What the capture records before any pass runs: the target (overrides applied) or the
/// command, the mode, and how nsys will trace CUDA graphs.
pub(super) fn capture_record(plan: &Plan, name: &str) -> Capture {
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
        ranks: plan.opts.ranks.as_ref().map(|r| r.record()),
        stage_names: plan
            .command
            .as_ref()
            .map(|c| c.stages.clone())
            .unwrap_or_default(),
        ..Capture::default()
    }
}

/// The capture's output once every pass ran: the record completed, big raw files compressed,
/// the manifest written. An error only when no pass succeeded (and none was interrupted).
pub(super) fn finish(
    s: &Session<'_>,
    mut st: State,
    nvml: Vec<Option<NvmlSeries>>,
    model_config: Option<PathBuf>,
) -> Result<CaptureOutput, CaptureError> {
    let mut nvml = nvml.into_iter();
    let mut rank0_nvml = nvml.next().flatten();
    let (kineto, ncu_csv) = traces(s, &mut st);
    let nsys_exported = st.nsys_sqlite.is_some();
    let capture = &mut st.capture;
    environment(s, capture, &s.raw, s.plan.opts.device);
    let metadata = match s.plan.target.as_ref() {
        Some(t) => Some(target_results(
            s,
            &s.raw,
            t,
            capture,
            rank0_nvml.as_mut(),
            nsys_exported,
        )?),
        None => {
            command_results(
                s,
                capture,
                rank0_nvml.as_mut(),
                &st.windows,
                kineto.is_some(),
            );
            command_metadata(s)
        }
    };
    if rank0_nvml.is_none() {
        capture.energy_note = Some("no energy: no NVML samples".into());
    }
    note_failed_passes(capture);
    let mut ranks = match s.plan.target.as_ref() {
        Some(t) if s.rank_raws().len() > 1 => {
            let rank0 = RankOutput {
                rank: 0,
                raw_dir: s.raw.clone(),
                kineto: None,
                metadata: metadata.clone(),
                capture: capture.clone(),
                nvml: rank0_nvml.clone(),
            };
            let all = rank_outputs(s, t, rank0, nvml, nsys_exported)?;
            *capture = group_record(capture, &all);
            all
        }
        _ => Vec::new(),
    };
    // Size cap: big raw files (the PyTorch profiler's JSON trace) are kept gzipped.
    retention::compress_raw(&s.raw, retention::COMPRESS_NOW_BYTES);
    // Each trace where it now is: plain, or gzipped by the size cap.
    let kineto = kineto_in(&s.raw);
    for r in &mut ranks {
        r.kineto = kineto_in(&r.raw_dir);
    }
    capture.manifest = manifest(&s.work_dir, &s.raw);
    for r in &mut ranks {
        r.capture.manifest = rank_files(&capture.manifest, r.rank);
    }
    if capture.passes.iter().all(|p| !p.ok) && !capture.interrupted {
        return Err(CaptureError::NothingCaptured(format!(
            "Artifacts and logs are kept in `{}`.",
            s.work_dir.display()
        )));
    }
    Ok(CaptureOutput {
        work_dir: s.work_dir.clone(),
        raw_dir: s.raw.clone(),
        kineto,
        nsys_sqlite: st.nsys_sqlite,
        ncu_csv,
        metadata,
        model_config,
        capture: st.capture,
        nvml: rank0_nvml,
        ranks,
    })
}

/// Every rank of a `--nproc` capture, rank 0's given: the others' records each from its own
/// `raw/ranks/<r>/` and its own GPU's samples (the NVML series after rank 0's, in rank order),
/// the rest (passes, target, what is missing) as rank 0's.
fn rank_outputs(
    s: &Session<'_>,
    t: &Target,
    mut rank0: RankOutput,
    nvml: impl Iterator<Item = Option<NvmlSeries>>,
    nsys_exported: bool,
) -> Result<Vec<RankOutput>, CaptureError> {
    let devices = s.plan.opts.ranks.as_ref().map(|r| r.devices.clone());
    if let Some(r) = &mut rank0.capture.ranks {
        r.rank = Some(0);
    }
    let mut out = vec![rank0];
    for ((rank, raw), mut series) in s.rank_raws().into_iter().enumerate().skip(1).zip(nvml) {
        let mut capture = out[0].capture.clone();
        capture.energy = Vec::new();
        capture.energy_note = Some("no energy: no NVML samples of this rank's GPU".into());
        let device = devices.as_ref().and_then(|d| d.get(rank).copied());
        environment(s, &mut capture, &raw, device.unwrap_or(s.plan.opts.device));
        let metadata = target_results(s, &raw, t, &mut capture, series.as_mut(), nsys_exported)?;
        if let Some(r) = &mut capture.ranks {
            r.rank = Some(rank as u32);
        }
        out.push(RankOutput {
            rank: rank as u32,
            raw_dir: raw,
            kineto: None,
            metadata: Some(metadata),
            capture,
            nvml: series,
        });
    }
    Ok(out)
}

/// The whole group's record from rank 0's: baseline and overhead over the group's iterations
/// (each stage as long as the slowest rank's, [`timings::read_group`]), energy summed over the
/// ranks' GPUs. Memory stays rank 0's: one GPU's.
fn group_record(rank0: &Capture, ranks: &[RankOutput]) -> Capture {
    let mut group = rank0.clone();
    let raws: Vec<&Path> = ranks.iter().map(|r| r.raw_dir.as_path()).collect();
    let timing = timings::read_group(&raws);
    group.baseline = timing.baseline.clone();
    group.overhead = timing.overhead();
    let energies: Vec<Vec<llmprof_bundle::StageEnergy>> =
        ranks.iter().map(|r| r.capture.energy.clone()).collect();
    group.energy = crate::energy::sum_over_ranks(&energies);
    let n = ranks.len();
    group.energy_note = Some(if group.energy.is_empty() {
        format!(
            "no energy for the group: not every one of the {n} ranks' GPUs has NVML samples over \
             the same stage windows (each rank's own is in its run, ranks/<rank>/)"
        )
    } else {
        format!(
            "the sum over the {n} ranks' GPUs of each one's energy per stage instance (mean power \
             summed; J/token over the group's tokens, which every rank of the tensor-parallel \
             group works on together). Each GPU's: {}",
            rank0.energy_note.clone().unwrap_or_default()
        )
    });
    if let Some(r) = &mut group.ranks {
        r.rank = None;
    }
    group
}

/// The PyTorch-profiler trace under a rank's raw directory, plain or gzipped.
fn kineto_in(raw: &Path) -> Option<PathBuf> {
    ["kineto/kineto_trace.json", "kineto/kineto_trace.json.gz"]
        .iter()
        .map(|p| raw.join(p))
        .find(|p| p.is_file())
}

/// The manifest entries of one rank's files: rank r's under `raw/ranks/<r>/`, rank 0's all the
/// others (its own outputs and the shared Nsight Systems report).
fn rank_files(all: &[ManifestEntry], rank: u32) -> Vec<ManifestEntry> {
    let prefix = format!("{RAW_DIR}/{}/", crate::ranks::RANKS_RAW_DIR);
    let own = format!("{prefix}{rank}/");
    all.iter()
        .filter(|e| {
            if rank == 0 {
                !e.path.starts_with(&prefix)
            } else {
                e.path.starts_with(&own)
            }
        })
        .cloned()
        .collect()
}

/// A `--cmd` workload's `--metadata`, copied to `raw/metadata.json` for ingest; `None` without
/// one or when it cannot be copied.
fn command_metadata(s: &Session<'_>) -> Option<PathBuf> {
    let given = s.plan.opts.cmd_analysis.metadata.as_ref()?;
    let p = s.raw.join("metadata.json");
    std::fs::copy(given, &p).ok()?;
    Some(p)
}

/// The PyTorch-profiler trace and the ncu CSV the passes left, with a `missing` line for a
/// `--cmd` kineto pass that wrote no trace and for an ncu pass that profiled nothing.
fn traces(s: &Session<'_>, st: &mut State) -> (Option<PathBuf>, Option<PathBuf>) {
    let raw = &s.raw;
    let capture = &mut st.capture;
    let kineto = kineto_in(raw);
    let kineto_ran_ok = capture.passes.iter().any(|p| p.name == "kineto" && p.ok);
    if s.plan.command.is_some() && kineto_ran_ok && kineto.is_none() {
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
    if s.plan.passes.contains(&"ncu") && ncu_csv.is_none() && !st.not_run.iter().any(|p| p == "ncu")
    {
        capture.missing.push(
            "Nsight Compute profiled no kernel (no table in raw/ncu/ncu_decode_raw.csv; see \
             raw/ncu/stderr.log)"
                .into(),
        );
    }
    (kineto, ncu_csv)
}

/// The GPU and driver as NVML sees them, the CPUs the workload ran on (pinning, model,
/// governor, frequency), llmprof's version, the versions the driver reported, and the
/// profilers' versions.
fn environment(s: &Session<'_>, capture: &mut Capture, raw: &Path, device: u32) {
    let plan = s.plan;
    capture.snapshot = crate::nvml::snapshot(device).unwrap_or_default();
    capture.snapshot.llmprof = env!("CARGO_PKG_VERSION").into();
    let cpu = &plan.cpu;
    capture.snapshot.cpu = cpu.model.clone();
    capture.snapshot.cpu_governor = cpu.governor.clone();
    capture.snapshot.cpu_mhz = cpu.mhz;
    capture.snapshot.pinned_cpus = cpu.pinned.as_deref().map(crate::cpu::format_list);
    capture.snapshot.pin_note = cpu.note.clone();
    timings::versions_into(raw, &mut capture.snapshot);
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
}

/// A target's baseline, overhead, compile records and energy from the driver's timings, and
/// the run metadata for ingest (`raw/metadata.json`); returns that file.
fn target_results(
    s: &Session<'_>,
    raw: &Path,
    t: &Target,
    capture: &mut Capture,
    nvml: Option<&mut NvmlSeries>,
    nsys_exported: bool,
) -> Result<PathBuf, CaptureError> {
    let timing = timings::read_all(raw);
    capture.compile = timings::compile_records(raw, &s.plan.passes);
    capture.baseline = timing.baseline.clone();
    capture.memory = crate::memory::baseline_memory(raw);
    capture.overhead = timing.overhead();
    let image_tokens = timings::image_tokens(raw);
    if let Some(series) = nvml {
        energy_into(
            capture,
            series,
            &timings::baseline_windows(raw),
            |stage| match stage {
                "prefill" => Some((t.inputs.prompt_tokens + image_tokens) * t.inputs.batch_size),
                "decode" => Some(t.inputs.max_new_tokens * t.inputs.batch_size),
                _ => None,
            },
        );
    }
    // Decode instances in the trace ingest times from: every measured one in the nsys export,
    // one in the kineto trace.
    let decode_instances = if nsys_exported { s.repeats } else { 1 };
    write_metadata(s, raw, t, image_tokens, decode_instances)
}

/// `metadata.json` in a rank's raw directory: token counts, counted FLOPs and measured
/// ceilings, for ingest. Under tensor parallelism each rank's flops pass counts its own shard,
/// so the counted FLOPs are summed over the ranks (the model's) and the parallel degree is
/// the rank count: MFU is the model's FLOPs over every rank's peak.
fn write_metadata(
    s: &Session<'_>,
    raw: &Path,
    t: &Target,
    image_tokens: u64,
    decode_instances: u64,
) -> Result<PathBuf, CaptureError> {
    let cal = timings::calibration(raw);
    let metadata = raw.join("metadata.json");
    let raws = s.rank_raws();
    let (counted_flops, flops_source) = if raws.len() > 1 {
        let mut sum: std::collections::BTreeMap<String, f64> = Default::default();
        for r in &raws {
            for (stage, f) in timings::counted_flops(r) {
                *sum.entry(stage).or_default() += f;
            }
        }
        (
            sum,
            format!(
                "torch.utils.flop_counter.FlopCounterMode (llmprof driver, flops pass), summed \
                 over the {} ranks' shards",
                raws.len()
            ),
        )
    } else {
        (
            timings::counted_flops(raw),
            "torch.utils.flop_counter.FlopCounterMode (llmprof driver, flops pass)".to_string(),
        )
    };
    let mut meta = json!({
        "batch_size": t.inputs.batch_size,
        "prompt_tokens": t.inputs.prompt_tokens,
        "image_tokens": image_tokens,
        "decode_steps": vec![t.inputs.max_new_tokens; decode_instances as usize],
        "prefill_logits": timings::prefill_logits(raw),
        "counted_flops": counted_flops,
        "counted_flops_source": flops_source,
        "measured_tflops": cal.0,
        "measured_gbps": cal.1,
    });
    if raws.len() > 1 {
        meta["parallel_degree"] = json!(raws.len());
    }
    // A rank that crashed before writing anything has no directory yet.
    std::fs::create_dir_all(raw).map_err(|e| s.write_err(raw, e))?;
    std::fs::write(
        &metadata,
        serde_json::to_string_pretty(&meta).unwrap_or_default(),
    )
    .map_err(|e| s.write_err(&metadata, e))?;
    Ok(metadata)
}

/// A `--cmd` workload's overhead (per stage from its stage windows, else whole-command wall
/// times), its baseline timings (the `prefill` and `decode` windows of its baseline runs) and
/// energy: over each baseline run that succeeded (`command`) and over each measured stage's
/// windows.
fn command_results(
    s: &Session<'_>,
    capture: &mut Capture,
    nvml: Option<&mut NvmlSeries>,
    windows: &[llmprof_bundle::Window],
    kineto_traced: bool,
) {
    capture.overhead =
        cmd_timings::overhead(&s.raw, &capture.passes, &capture.stage_names, kineto_traced);
    capture.baseline = timings::command_baseline(&s.raw);
    let Some(series) = nvml else {
        return;
    };
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
    let runs = crate::energy::EnergyWindows {
        stage: "command".into(),
        kind: "iterations",
        windows: runs,
        per_window: 1,
    };
    let stage_windows = cmd_timings::energy_windows(&s.raw, &capture.stage_names);
    capture.memory = crate::memory::reported(&s.raw, &capture.stage_names)
        .or_else(|| crate::memory::nvml_fallback(series, &stage_windows));
    let mut sets = vec![runs];
    sets.extend(stage_windows);
    energy_into(capture, series, &sets, |_| None);
}

/// One `missing` line per failed pass, pointing at its output.
fn note_failed_passes(capture: &mut Capture) {
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
}

/// Energy per stage into the capture record, with the note that says how it was computed.
fn energy_into(
    capture: &mut Capture,
    series: &NvmlSeries,
    windows: &[crate::energy::EnergyWindows],
    tokens: impl Fn(&str) -> Option<u64>,
) {
    capture.energy = crate::energy::stage_energies(series, windows, tokens);
    capture.energy_note = Some(if capture.energy.is_empty() {
        "no energy: the NVML samples cover no stage window of the baseline pass (none recorded, \
         or the pass failed)"
            .into()
    } else {
        crate::energy::note(series, &capture.energy)
    });
}

/// Every file under `raw/` with its size and sha256.
fn manifest(work_dir: &Path, raw: &Path) -> Vec<ManifestEntry> {
    let files = llmprof_store::files_under(raw);
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
