//! `llmprof analyze`: recompute a run's analysis with new token counts or peaks, in place.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use llmprof_bundle::Bundle;
use llmprof_ingest::IngestRequest;

use crate::args::AnalyzeArgs;

pub fn run(args: AnalyzeArgs) -> Result<()> {
    let mut bundle = llmprof_store::read_bundle(&args.run)?;
    let request = IngestRequest {
        metadata: args.workload.metadata.clone(),
        model_config: args.model_config.clone(),
        workload: args.workload.flags(),
        peak_tflops: args.workload.peak_tflops,
        peak_gbps: args.workload.peak_gbps,
        warmup_instances: args.workload.warmup_instances,
        ..IngestRequest::default()
    };
    llmprof_ingest::apply_overrides(&mut bundle, &request)?;
    let dir = run_dir(&args.run);
    fill_baseline_samples(&mut bundle, &dir);
    let analysis = llmprof_analysis::analyze(&bundle);
    let summary = analysis.summary.clone();
    bundle.analysis = Some(analysis);
    llmprof_store::rewrite_bundle(&dir, &bundle)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{summary}")?;
    Ok(())
}

/// The run directory of `RUN` (a directory, or its `bundle.json`).
fn run_dir(run: &Path) -> PathBuf {
    if run.is_dir() {
        run.to_path_buf()
    } else {
        run.parent().map(Path::to_path_buf).unwrap_or_default()
    }
}

/// A capture's bundle written before baseline iterations were kept as samples: read them from
/// the run's `raw/` timing files, when those hold the same iterations the bundle counted.
fn fill_baseline_samples(bundle: &mut Bundle, dir: &Path) {
    let Some(baseline) = bundle.capture.as_mut().and_then(|c| c.baseline.as_mut()) else {
        return;
    };
    if !baseline.samples.is_empty() {
        return;
    }
    if let Some(read) = llmprof_capture::baseline_timings(&dir.join(llmprof_store::RAW_DIR)) {
        if read.iterations == baseline.iterations {
            baseline.samples = read.samples;
            baseline.processes = read.processes;
        }
    }
}
