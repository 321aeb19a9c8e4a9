//! `llmprof ingest`: run the parsers, write the run directory, print where it is.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use llmprof_bundle::Severity;
use llmprof_capture::nsys_export::{self, ExportError};
use llmprof_ingest::{spans, IngestRequest, Step};

use crate::args::IngestConfig;
use llmprof_report::fmt::thousands;

/// How long `nsys export` of a report may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(3600);

pub fn run(cfg: IngestConfig) -> Result<()> {
    if !cfg.ranks.is_empty() {
        return crate::ranks_cmd::ingest(cfg.ranks, &cfg.rank_args, &cfg.out);
    }
    let mut request = cfg.request;
    // A report must be exported to SQLite first; keep the temp dir alive for the ingest.
    let mut _export_dir = None;
    let mut report_path = None;
    if let Some(path) = request.nsys.clone().filter(|p| nsys_export::is_report(p)) {
        let dir = tempfile::tempdir().context("creating a temporary directory")?;
        let sqlite = export_report(&path, dir.path())?;
        request.nsys = Some(sqlite);
        report_path = Some(path);
        _export_dir = Some(dir);
    }

    if let Some(ranks) = process_ranks(&request)? {
        return crate::ranks_cmd::ingest(ranks, &cfg.rank_args, &cfg.out);
    }
    let whole = spans::span(spans::Kind::Ingest, 0);
    let spinner = progress();
    let mut reading = String::new();
    let ingested = llmprof_ingest::ingest(&request, &mut |step| {
        let Some(s) = &spinner else { return };
        s.set_message(match step {
            Step::Reading { source, path } => {
                reading = format!("reading {} {}", source.as_str(), path.display());
                reading.clone()
            }
            Step::Read { bytes, of } => format!("{reading}: {}", read_so_far(bytes, of)),
            Step::Assembling => "attributing GPU work to stages".to_string(),
        });
    });
    if let Some(s) = &spinner {
        s.finish_and_clear();
    }
    let mut ingested = ingested?;
    if let Some(report) = report_path {
        name_the_report(&mut ingested.bundle, &report);
    }
    let analyzing = spans::span(spans::Kind::Analyze, 0);
    ingested.bundle.analysis = Some(llmprof_analysis::analyze(&ingested.bundle));
    drop(analyzing);
    let b = &ingested.bundle;
    let warnings = b
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Warning)
        .count();
    let stage_names: Vec<&str> = b.stages.iter().map(|s| s.name.as_str()).take(6).collect();
    let mut parts = Vec::new();
    if b.timing_source.is_some() {
        parts.push(format!("{} kernels", thousands(b.totals.kernels)));
        parts.push(format!(
            "{} stage(s) [{}]",
            b.stages.len(),
            stage_names.join(", ")
        ));
    }
    if !b.operators.is_empty() {
        parts.push(format!("{} operators", b.operators.len()));
    }
    if !b.ncu.is_empty() {
        parts.push(format!("{} ncu kernel(s)", b.ncu.len()));
    }
    let mut summary = format!("ingested {}", parts.join(", "));
    if warnings > 0 {
        summary.push_str(&format!(
            "; {warnings} warning(s): records were skipped, see the Diagnostics table"
        ));
    }
    let writing = spans::span(spans::Kind::WriteRun, 0);
    let dir = llmprof_store::write_run(&cfg.out, ingested.bundle, ingested.timeline)?;
    drop(writing);
    drop(whole);
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{summary}");
    let _ = writeln!(err, "next: llmprof show {}", dir.display());
    match spans::write() {
        Some((path, Ok(()))) => {
            let _ = writeln!(err, "spans written to {}", path.display());
        }
        Some((path, Err(e))) => {
            let _ = writeln!(
                err,
                "warning: LLMPROF_SPANS: could not write {}: {e}",
                path.display()
            );
        }
        None => {}
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", dir.display())?;
    Ok(())
}

/// "412 of 989 MB" (decimal MB, as file sizes are given); "412 MB" when the size is not known,
/// or a `.gz` trailer's estimate fell short.
fn read_so_far(bytes: u64, of: Option<u64>) -> String {
    let mb = |n: u64| thousands(n / 1_000_000);
    match of {
        Some(of) if of >= bytes => format!("{} of {} MB", mb(bytes), mb(of)),
        _ => format!("{} MB", mb(bytes)),
    }
}

/// One request per process when the request's nsys export traced several processes that ran
/// kernels (a `torchrun` job under one `nsys profile`) and no PyTorch profiler trace is given:
/// each process a rank, in the order `torchrun` assigns devices (by device, then pid).
fn process_ranks(request: &IngestRequest) -> Result<Option<Vec<IngestRequest>>> {
    let Some(sqlite) = request.nsys.as_ref().filter(|_| request.kineto.is_none()) else {
        return Ok(None);
    };
    let procs = llmprof_ingest::nsys::gpu_processes(sqlite)?;
    if procs.len() < 2 {
        return Ok(None);
    }
    let list: Vec<String> = (procs.iter().enumerate())
        .map(|(r, p)| {
            let device = p.device.map_or("?".to_string(), |d| d.to_string());
            format!("rank {r} = pid {} (device {device})", p.pid)
        })
        .collect();
    eprintln!(
        "{}: {} processes ran kernels; each is ingested as a rank: {}",
        sqlite.display(),
        procs.len(),
        list.join(", ")
    );
    Ok(Some(
        (procs.iter().enumerate())
            .map(|(i, p)| IngestRequest {
                nsys_process: Some(p.global_pid),
                // Nsight Compute profiles one rank: joined to rank 0.
                ncu: if i == 0 {
                    request.ncu.clone()
                } else {
                    Vec::new()
                },
                ..request.clone()
            })
            .collect(),
    ))
}

/// The bundle names the `.nsys-rep` the user gave, not its temporary SQLite export: as the
/// Nsight Systems input and as the file of its diagnostics.
fn name_the_report(bundle: &mut llmprof_bundle::Bundle, report: &Path) {
    let report = report.display().to_string();
    let nsys = llmprof_bundle::Source::Nsys;
    for input in bundle.inputs.iter_mut().filter(|i| i.source == nsys) {
        input.path = report.clone();
    }
    for d in bundle.diagnostics.iter_mut().filter(|d| d.source == nsys) {
        d.file = report.clone();
    }
}

/// A spinner on stderr when it is a terminal; nothing in pipes and CI.
fn progress() -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.enable_steady_tick(Duration::from_millis(100));
    Some(pb)
}

/// Exports `report` into `dir` with the `nsys` on PATH (or `$NSYS`) and returns the SQLite path.
pub(crate) fn export_report(report: &Path, dir: &Path) -> Result<PathBuf> {
    if !report.is_file() {
        bail!("nsys report `{}`: no such file", report.display());
    }
    let nsys = std::env::var_os("NSYS")
        .map(PathBuf::from)
        .unwrap_or_else(|| "nsys".into());
    let exported = nsys_export::export(
        &nsys,
        report,
        &dir.join("export.sqlite"),
        EXPORT_TIMEOUT,
        &dir.join("export.log"),
        None,
    );
    match exported.result {
        Ok(sqlite) => Ok(sqlite),
        Err(ExportError::NotFound { .. }) => bail!(
            "nsys report `{}`: `nsys` is not on PATH to export it; run \
             `nsys export --type sqlite {}` and pass the .sqlite file, or set NSYS=/path/to/nsys",
            report.display(),
            report.display()
        ),
        Err(ExportError::Failed {
            reason,
            libdw_missing,
        }) => {
            let hint = if libdw_missing {
                " (Nsight Systems' importer could not load libdw.so.1: put elfutils' libdw.so.1 \
                 and libelf.so.1 on LD_LIBRARY_PATH)"
            } else {
                ""
            };
            bail!(
                "nsys report `{}`: `nsys export` failed{hint}: {reason}",
                report.display()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::read_so_far;

    #[test]
    fn the_bytes_read_are_shown_against_the_size_when_it_holds() {
        assert_eq!(read_so_far(412_345_678, Some(989_440_024)), "412 of 989 MB");
        assert_eq!(
            read_so_far(1_234_000_000, Some(4_969_351_712)),
            "1,234 of 4,969 MB"
        );
        // No size, or an estimate the reading has passed: the bytes alone.
        assert_eq!(read_so_far(5_000_000, None), "5 MB");
        assert_eq!(read_so_far(700_000_000, Some(600_000_000)), "700 MB");
    }
}
