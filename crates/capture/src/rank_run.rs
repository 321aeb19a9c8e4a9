//! The run of a `--nproc` capture of several ranks. Each rank's artifacts are ingested as one
//! rank, on a bounded pool of workers (`llmprof_ingest::workers`): its process of the one
//! Nsight Systems export (told apart by the pid its driver recorded), its PyTorch-profiler
//! trace, Nsight Compute's rows on the rank that ran under it, its own capture record and its
//! GPU's NVML samples. The ranks' bundles are then merged as `llmprof merge` merges them, and
//! the run's own bundle gets the group's capture record.

use std::path::Path;

use llmprof_bundle::Distributed;
use llmprof_ingest::merge::{self, RankInput};
use llmprof_ingest::{nsys, IngestRequest, Ingested};

use crate::passes::RankOutput;
use crate::save::{self, CaptureRun};
use crate::{CaptureError, CaptureOutput, Plan};

pub(crate) fn assemble(plan: &Plan, output: &CaptureOutput) -> Result<CaptureRun, CaptureError> {
    let keep = &output.work_dir;
    let base = save::request(plan, output);
    let processes = match &output.nsys_sqlite {
        Some(sqlite) => nsys::gpu_processes(sqlite).map_err(|source| CaptureError::Ingest {
            keep: keep.clone(),
            source,
        })?,
        None => Vec::new(),
    };
    let world = output.ranks.len() as u32;
    let ncu_rank = plan.opts.ranks.as_ref().map_or(0, |r| r.ncu_rank);
    // One rank per worker, as many workers as cores: memory grows with the workers.
    let jobs = llmprof_ingest::workers::count(None, output.ranks.len());
    let ranks = llmprof_ingest::workers::map(
        &output.ranks,
        jobs,
        |_, r| {
            RankJob {
                rank: r,
                process: process_of(r, &processes, world),
                ncu: r.rank == ncu_rank,
                world,
                work_dir: keep,
            }
            .ingest(&base)
        },
        |i| {
            CaptureError::Environment(format!(
                "rank {i}'s ingest stopped unexpectedly; the artifacts are kept in `{}`",
                keep.display()
            ))
        },
    )?;
    let inputs = (ranks.iter())
        .map(|(rank, run)| RankInput {
            bundle: run.bundle.clone(),
            origin: format!("rank {rank}"),
        })
        .collect();
    let mut bundle = merge::merge(inputs).map_err(|source| CaptureError::Merge {
        keep: keep.clone(),
        source: Box::new(source),
    })?;
    let mut capture = output.capture.clone();
    save::relative_commands(&mut capture, keep);
    bundle.capture = Some(capture);
    bundle.nvml = output.nvml.clone();
    Ok(CaptureRun {
        run: Ingested {
            bundle,
            timeline: None,
        },
        ranks,
    })
}

/// The `globalPid` of rank `r`'s process in the Nsight Systems export: the one with the pid
/// its driver recorded for the nsys pass, else, when the export holds exactly one process per
/// rank, the rank's place in device order.
fn process_of(r: &RankOutput, processes: &[nsys::GpuProcess], world: u32) -> Option<u64> {
    let by_pid = nsys_pid(&r.raw_dir)
        .and_then(|pid| processes.iter().find(|p| p.pid == pid))
        .map(|p| p.global_pid);
    by_pid.or_else(|| {
        (processes.len() == world as usize)
            .then(|| processes.get(r.rank as usize).map(|p| p.global_pid))
            .flatten()
    })
}

/// The pid the driver recorded for its nsys pass (`<raw>/nsys/metadata.json`).
fn nsys_pid(raw: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(raw.join("nsys/metadata.json")).ok()?;
    let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
    let pid = doc.get("passes")?.get("nsys")?.get("pid")?.as_u64()?;
    u32::try_from(pid).ok()
}

/// One rank's ingest.
struct RankJob<'a> {
    rank: &'a RankOutput,
    process: Option<u64>,
    /// Whether Nsight Compute profiled this rank.
    ncu: bool,
    world: u32,
    work_dir: &'a Path,
}

impl RankJob<'_> {
    fn ingest(self, base: &IngestRequest) -> Result<(u32, Ingested), CaptureError> {
        let r = self.rank;
        let mut capture = r.capture.clone();
        save::relative_commands(&mut capture, self.work_dir);
        if base.nsys.is_some() && self.process.is_none() {
            capture.missing.push(format!(
                "rank {}'s process in the Nsight Systems export: none of its processes that ran \
                 kernels has the pid rank {}'s driver recorded (raw/.../nsys/metadata.json), so \
                 this rank's tables come from its PyTorch-profiler trace",
                r.rank, r.rank
            ));
        }
        let request = IngestRequest {
            nsys: self.process.and(base.nsys.clone()),
            nsys_process: self.process,
            kineto: r.kineto.clone(),
            metadata: r.metadata.clone(),
            ncu: if self.ncu {
                base.ncu.clone()
            } else {
                Vec::new()
            },
            ..base.clone()
        };
        let mut run = save::ingest_or_record(&request, &mut capture, self.work_dir)?;
        save::note_missing_stages(&mut capture, &run.bundle);
        // The capture knows each rank even when no PyTorch-profiler trace says it.
        run.bundle
            .environment
            .distributed
            .get_or_insert_with(|| Distributed {
                rank: r.rank,
                world_size: self.world,
                backend: Some("nccl".into()),
                ..Distributed::default()
            });
        run.bundle.capture = Some(capture);
        run.bundle.nvml = r.nvml.clone();
        Ok((r.rank, run))
    }
}
