//! `llmprof export RUN --format csv DIR`: the run's tables as CSV files
//! (`llmprof_report::csv_export`); `--format chrome -o FILE`: its timeline as a Chrome trace
//! (`llmprof_report::chrome_export`), streamed through a `BufWriter`. Every file is written
//! through a temporary file and renamed, so a failed export leaves nothing half-written.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use llmprof_bundle::{Bundle, Timeline};
use llmprof_report::chrome_export::write_chrome;
use llmprof_report::csv_export::{tables, CsvTable};

use crate::args::{ExportArgs, ExportFormat};

pub fn run(args: ExportArgs) -> Result<()> {
    let bundle = llmprof_store::read_bundle(&args.run)?;
    let out = args.out.or(args.output);
    match args.format {
        ExportFormat::Csv => {
            let Some(dir) = out else {
                bail!("--format csv needs the directory to write to: llmprof export RUN --format csv DIR");
            };
            export_csv(&bundle, &dir)
        }
        ExportFormat::Chrome => {
            let file =
                out.unwrap_or_else(|| PathBuf::from(format!("{}.trace.json", bundle.run_id)));
            export_chrome(&bundle, &args.run, &file)
        }
    }
}

fn export_csv(bundle: &Bundle, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("{}: cannot make the directory", dir.display()))?;
    let mut out = std::io::stdout().lock();
    for t in tables(bundle) {
        let path = dir.join(t.file);
        write_csv(&path, &t)?;
        writeln!(out, "{} ({} rows)", path.display(), t.rows.len())?;
    }
    Ok(())
}

fn write_csv(path: &Path, t: &CsvTable) -> Result<()> {
    let tmp = temp_beside(path)?;
    let mut w = csv::Writer::from_writer(tmp);
    let err = || format!("{}: cannot write", path.display());
    w.write_record(&t.header).with_context(err)?;
    for row in &t.rows {
        w.write_record(row).with_context(err)?;
    }
    let tmp = w
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(err)?;
    tmp.persist(path).map_err(|e| e.error).with_context(err)?;
    Ok(())
}

fn export_chrome(bundle: &Bundle, run: &Path, file: &Path) -> Result<()> {
    let timeline = read_timeline(run)?;
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot make the directory", dir.display()))?;
    }
    let err = || format!("{}: cannot write", file.display());
    let mut w = BufWriter::new(temp_beside(file)?);
    let counts = write_chrome(bundle, &timeline, &mut w).with_context(err)?;
    let tmp = w
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(err)?;
    tmp.persist(file).map_err(|e| e.error).with_context(err)?;
    writeln!(
        std::io::stdout().lock(),
        "{} ({} kernels, {} memory ops, {} annotations, {} launch calls, {} flows, {} counter samples)",
        file.display(),
        counts.kernels,
        counts.mem_ops,
        counts.annotations,
        counts.calls,
        counts.flows,
        counts.counters
    )?;
    Ok(())
}

/// The run's timeline with its launch calls (none for runs ingested before they were kept); a
/// run without a timeline (a capture that traced nothing) is an error naming it.
fn read_timeline(run: &Path) -> Result<Timeline> {
    let dir = if run.is_dir() {
        run
    } else {
        run.parent().unwrap_or(Path::new("."))
    };
    let Some(path) = llmprof_store::timeline_path(dir) else {
        bail!(
            "{}: the run has no timeline.json, so there is no trace to export (it recorded no \
             profiler trace)",
            dir.display()
        );
    };
    let text = llmprof_store::read_timeline_text(&path)?;
    let mut timeline = Timeline::from_json(&text)
        .with_context(|| format!("{}: not a valid timeline", path.display()))?;
    timeline.calls = llmprof_store::read_launch_calls(dir)?.unwrap_or_default();
    Ok(timeline)
}

/// A temporary file in the directory of `path`, renamed onto it when complete.
fn temp_beside(path: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("{}: cannot write here", dir.display()))
}
