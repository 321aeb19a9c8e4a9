//! Turning an Nsight Systems report (`.nsys-rep`) into the SQLite export llmprof reads, with
//! the `nsys` found on PATH (or in `$NSYS`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Whether `path` names a report rather than an export.
pub fn is_report(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("nsys-rep") || e.eq_ignore_ascii_case("qdrep"))
}

/// Exports `report` into `dir` and returns the SQLite path.
pub fn export(report: &Path, dir: &Path) -> Result<PathBuf> {
    if !report.is_file() {
        bail!("nsys report `{}`: no such file", report.display());
    }
    let nsys = std::env::var_os("NSYS")
        .map(PathBuf::from)
        .unwrap_or_else(|| "nsys".into());
    let out = dir.join("export.sqlite");
    let result = Command::new(&nsys)
        .args([
            "export",
            "--type",
            "sqlite",
            "--force-overwrite",
            "true",
            "--output",
        ])
        .arg(&out)
        .arg(report)
        .output();
    let output = match result {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "nsys report `{}`: `nsys` is not on PATH to export it; run \
             `nsys export --type sqlite {}` and pass the .sqlite file, or set NSYS=/path/to/nsys",
            report.display(),
            report.display()
        ),
        Err(e) => {
            return Err(e).with_context(|| format!("running `{}`", nsys.display()));
        }
    };
    if !output.status.success() || !out.is_file() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let hint = if stderr.contains("libdw") || stderr.contains("Importer error") {
            " (Nsight Systems' importer could not load libdw.so.1: put elfutils' libdw.so.1 and \
             libelf.so.1 on LD_LIBRARY_PATH)"
        } else {
            ""
        };
        bail!(
            "nsys report `{}`: `nsys export` failed{hint}: {}",
            report.display(),
            stderr.lines().last().unwrap_or("no output")
        );
    }
    Ok(out)
}
