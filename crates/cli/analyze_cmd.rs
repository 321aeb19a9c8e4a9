//! `llmprof analyze`: recompute a run's analysis with new token counts or peaks, in place.

use std::io::Write;

use anyhow::Result;
use llmprof_ingest::IngestRequest;

use crate::args::AnalyzeArgs;

pub fn run(args: AnalyzeArgs) -> Result<()> {
    let mut bundle = llmprof_store::read_bundle(&args.run)?;
    let request = IngestRequest {
        metadata: args.workload.metadata.clone(),
        workload: args.workload.flags(),
        peak_tflops: args.workload.peak_tflops,
        peak_gbps: args.workload.peak_gbps,
        warmup_instances: args.workload.warmup_instances,
        ..IngestRequest::default()
    };
    llmprof_ingest::apply_overrides(&mut bundle, &request)?;
    let analysis = llmprof_analysis::analyze(&bundle);
    let summary = analysis.summary.clone();
    bundle.analysis = Some(analysis);
    let dir = if args.run.is_dir() {
        args.run.clone()
    } else {
        args.run
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_default()
    };
    llmprof_store::rewrite_bundle(&dir, &bundle)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{summary}")?;
    Ok(())
}
