//! `llmprof export RUN --format csv DIR`: the run's tables as CSV files
//! (`llmprof_report::csv_export`), each written through a temporary file and renamed, so a
//! failed export leaves no half-written table.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use llmprof_report::csv_export::{tables, CsvTable};

use crate::args::{ExportArgs, ExportFormat};

pub fn run(args: ExportArgs) -> Result<()> {
    let bundle = llmprof_store::read_bundle(&args.run)?;
    match args.format {
        ExportFormat::Csv => {
            std::fs::create_dir_all(&args.out)
                .with_context(|| format!("{}: cannot make the directory", args.out.display()))?;
            let mut out = std::io::stdout().lock();
            for t in tables(&bundle) {
                let path = args.out.join(t.file);
                write_csv(&path, &t)?;
                writeln!(out, "{} ({} rows)", path.display(), t.rows.len())?;
            }
        }
    }
    Ok(())
}

fn write_csv(path: &Path, t: &CsvTable) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("{}: cannot write here", dir.display()))?;
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
