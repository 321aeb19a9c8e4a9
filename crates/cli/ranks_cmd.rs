//! Multi-rank runs: `llmprof ingest` with a trace per rank (each rank ingested on its own
//! worker and written as soon as it is done), and `llmprof merge` of single-rank runs.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use llmprof_bundle::Bundle;
use llmprof_ingest::merge::{self, RankInput};
use llmprof_ingest::{IngestRequest, Ingested};
use llmprof_report::fmt::thousands;
use llmprof_store::RankedRunWriter;

use crate::args::{MergeArgs, RankArgs};

/// Ingests one request per rank in parallel, writes each rank as it finishes, then the run.
pub fn ingest(requests: Vec<IngestRequest>, args: &RankArgs, out: &Path) -> Result<()> {
    let started = Instant::now();
    let writer = RankedRunWriter::begin(out)?;
    let claimed = Claims::default();
    let total = requests.len();
    let done = AtomicUsize::new(0);
    let inputs = parallel(&requests, jobs(args, total), |i, req| {
        let origin = origin_of(req);
        let t = Instant::now();
        let ingested = ingest_one(req).with_context(|| format!("rank input {origin}"))?;
        let rank = claimed.claim(&ingested.bundle, i, &origin)?;
        let Ingested {
            mut bundle,
            timeline,
        } = ingested;
        bundle.analysis = Some(llmprof_analysis::analyze(&bundle));
        let summary = (bundle.totals.kernels, t.elapsed().as_secs_f64());
        writer.write_rank(rank, bundle.clone(), timeline)?;
        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
        eprintln!(
            "[{n}/{total}] rank {rank}: {origin}: {} kernels in {:.2} s",
            thousands(summary.0),
            summary.1
        );
        Ok(RankInput { bundle, origin })
    })?;
    finish(writer, inputs, None, started)
}

/// `llmprof merge`: single-rank runs into one multi-rank run.
pub fn merge(args: MergeArgs) -> Result<()> {
    let started = Instant::now();
    let writer = RankedRunWriter::begin(&args.out)?;
    let claimed = Claims::default();
    let inputs = parallel(&args.runs, jobs(&args.ranks, args.runs.len()), |i, run| {
        let mut bundle = llmprof_store::read_bundle(run)?;
        if let Some(d) = args.parallel_degree {
            let w = bundle.workload.get_or_insert_with(Default::default);
            w.parallel_degree = Some(llmprof_bundle::Sourced::new(d, "--parallel-degree flag"));
        }
        if bundle.ranks.is_some() {
            bail!(
                "run `{}` is a multi-rank run already: merge its ranks/<rank> directories instead",
                run.display()
            );
        }
        let origin = run.display().to_string();
        let rank = claimed.claim(&bundle, i, &origin)?;
        if args.parallel_degree.is_some() {
            bundle.analysis = Some(llmprof_analysis::analyze(&bundle));
        }
        writer.copy_rank(rank, run, bundle.clone())?;
        Ok(RankInput { bundle, origin })
    })?;
    let label = args.label.filter(|l| !l.trim().is_empty());
    finish(writer, inputs, label, started)
}

/// Merges the ranks, analyses the run and renames it into place.
fn finish(
    writer: RankedRunWriter,
    inputs: Vec<RankInput>,
    label: Option<String>,
    started: Instant,
) -> Result<()> {
    let n = inputs.len();
    let mut bundle: Bundle = merge::merge(inputs)?;
    if label.is_some() {
        bundle.label = label;
        bundle.run_id = llmprof_store::run_id(&bundle);
    }
    bundle.analysis = Some(llmprof_analysis::analyze(&bundle));
    let missing = bundle.ranks.as_ref().map_or(0, |r| r.missing.len());
    let dir = writer.finish(bundle)?;
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "merged {n} ranks in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    if missing > 0 {
        let _ = write!(
            err,
            "; {missing} rank(s) of the world missing, see Diagnostics"
        );
    }
    let _ = writeln!(err, "\nnext: llmprof show {}", dir.display());
    writeln!(std::io::stdout().lock(), "{}", dir.display())?;
    Ok(())
}

/// One rank's ingest; a `.nsys-rep` is exported first.
fn ingest_one(req: &IngestRequest) -> Result<Ingested> {
    let mut req = req.clone();
    let mut _dir = None;
    if let Some(path) = req
        .nsys
        .clone()
        .filter(|p| llmprof_capture::nsys_export::is_report(p))
    {
        let dir = tempfile::tempdir().context("creating a temporary directory")?;
        req.nsys = Some(crate::ingest_cmd::export_report(&path, dir.path())?);
        _dir = Some(dir);
    }
    Ok(llmprof_ingest::ingest(&req, &mut |_| {})?)
}

/// The ranks taken so far: each with the input that took it and whether its trace named it.
#[derive(Default)]
struct Claims(
    Mutex<HashMap<u32, (String, bool)>>,
    Mutex<Option<(u32, String)>>,
);

impl Claims {
    /// The rank a trace states (else its position among the inputs), refused when another
    /// input took it already — before anything of it is written.
    fn claim(&self, bundle: &Bundle, position: usize, origin: &str) -> Result<u32> {
        let stated = bundle.environment.distributed.as_ref().map(|d| d.rank);
        if let Some(d) = &bundle.environment.distributed {
            self.same_world(d.world_size, d.rank, origin)?;
        }
        let rank = stated.unwrap_or(position as u32);
        let mut map = self.0.lock().map_err(|_| anyhow!("a rank worker failed"))?;
        match map.get(&rank) {
            Some((first, named)) if *named != stated.is_some() => {
                let (without, with) = if stated.is_some() {
                    (first.as_str(), origin)
                } else {
                    (origin, first.as_str())
                };
                bail!(merge::MergeError::MixedRanking {
                    origin: without.to_string(),
                    other: with.to_string(),
                })
            }
            Some((first, _)) => {
                bail!("{first} and {origin} are both rank {rank}: give each rank once")
            }
            None => {
                map.insert(rank, (origin.to_string(), stated.is_some()));
                Ok(rank)
            }
        }
    }
}

impl Claims {
    /// Refuses a rank whose world size differs from the first rank's: another job.
    fn same_world(&self, world: u32, rank: u32, origin: &str) -> Result<()> {
        let mut first = self.1.lock().map_err(|_| anyhow!("a rank worker failed"))?;
        match &*first {
            Some((w, o)) if *w != world => bail!(
                "{o} is from a job of {w} ranks but {origin} (rank {rank}) from one of {world}: \
                 these traces come from different jobs"
            ),
            Some(_) => Ok(()),
            None => {
                *first = Some((world, origin.to_string()));
                Ok(())
            }
        }
    }
}

/// A rank input's files, for messages.
fn origin_of(req: &IngestRequest) -> String {
    let files: Vec<String> = [&req.kineto, &req.nsys]
        .into_iter()
        .flatten()
        .map(|p| p.display().to_string())
        .collect();
    let process = req.nsys_process.map_or(String::new(), |g| {
        format!(" (pid {})", (g >> 24) & 0xFF_FFFF)
    });
    format!("{}{process}", files.join(" + "))
}

fn jobs(args: &RankArgs, n: usize) -> usize {
    llmprof_ingest::workers::count(args.jobs.map(|j| j as usize), n)
}

/// Runs `work` over `items` on `jobs` threads, results in input order; the first error stops
/// the workers from taking more items and is returned.
fn parallel<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    work: impl Fn(usize, &T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    llmprof_ingest::workers::map(items, jobs, work, |i| {
        anyhow!("the worker of input {} stopped unexpectedly", i + 1)
    })
}
