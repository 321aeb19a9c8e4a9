//! `nsys export --type sqlite`: an Nsight Systems report (`.nsys-rep`) turned into the SQLite
//! export ingest reads. This is the one place llmprof runs it: the capture's nsys pass and
//! `llmprof ingest --nsys x.nsys-rep` both call [`export`] (ingest itself never spawns a
//! process).

use std::path::{Path, PathBuf};
use std::time::Duration;

use llmprof_bundle::PassRecord;

use crate::process::{self, Job};
use crate::Interrupt;

/// The name of an export's [`PassRecord`].
pub const PASS_NAME: &str = "nsys-export";

/// Whether `path` names a report (`.nsys-rep`, or `.qdrep` of older versions) rather than an
/// export.
pub fn is_report(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("nsys-rep") || e.eq_ignore_ascii_case("qdrep"))
}

/// What one `nsys export` did.
#[derive(Debug)]
pub struct Exported {
    /// The run as a capture records it: the command, exit code, wall time and note.
    pub record: PassRecord,
    /// The SQLite export when nsys wrote it (its exit status is in `record`), else why not.
    pub result: Result<PathBuf, ExportError>,
}

/// Why `nsys export` left no SQLite file.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The `nsys` given does not exist.
    #[error("`{}` was not found", nsys.display())]
    NotFound { nsys: PathBuf },
    /// It ran (or could not start) and wrote no export.
    #[error("`nsys export` failed: {reason}")]
    Failed {
        /// The pass note: the exit code and the log's last line, or why it did not start.
        reason: String,
        /// The log says Nsight Systems' importer could not load `libdw.so.1`.
        libdw_missing: bool,
    },
}

/// Runs `nsys export --type sqlite` of `report` into `out_sqlite` (overwritten), stdout and
/// stderr into `log`, stopped after `timeout`. With an `interrupt` it runs like a capture pass
/// (its own process group, stopped by Ctrl-C); without, it stays in llmprof's process group.
pub fn export(
    nsys: &Path,
    report: &Path,
    out_sqlite: &Path,
    timeout: Duration,
    log: &Path,
    interrupt: Option<&Interrupt>,
) -> Exported {
    let command = vec![
        nsys.display().to_string(),
        "export".into(),
        "--type".into(),
        "sqlite".into(),
        "--force-overwrite".into(),
        "true".into(),
        "-o".into(),
        out_sqlite.display().to_string(),
        report.display().to_string(),
    ];
    let job = Job {
        name: PASS_NAME,
        command: &command,
        env: &[],
        stdout_to: None,
        log,
        timeout,
        cpus: None,
    };
    let ran = process::run(&job, interrupt);
    let result = if out_sqlite.is_file() {
        Ok(out_sqlite.to_path_buf())
    } else if ran.not_started == Some(std::io::ErrorKind::NotFound) {
        Err(ExportError::NotFound {
            nsys: nsys.to_path_buf(),
        })
    } else {
        let log_text = std::fs::read_to_string(log).unwrap_or_default();
        Err(ExportError::Failed {
            reason: ran
                .record
                .note
                .clone()
                .unwrap_or_else(|| format!("it wrote no `{}`", out_sqlite.display())),
            libdw_missing: log_text.contains("libdw") || log_text.contains("Importer error"),
        })
    };
    Exported {
        record: ran.record,
        result,
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_told_from_exports_by_extension() {
        assert!(is_report(Path::new("a/run.nsys-rep")));
        assert!(is_report(Path::new("old.QDREP")));
        assert!(!is_report(Path::new("run.sqlite")));
    }

    /// Exports with a stand-in `nsys` script; retried while another test thread's fork still
    /// holds the freshly written script open (ETXTBSY).
    fn export_with(script: &str, interrupt: Option<&Interrupt>) -> (tempfile::TempDir, Exported) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("nsys");
        std::fs::write(&fake, script).unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (rep, out, log) = (
            dir.path().join("x.nsys-rep"),
            dir.path().join("x.sqlite"),
            dir.path().join("export.log"),
        );
        for _ in 0..50 {
            let e = export(&fake, &rep, &out, Duration::from_secs(30), &log, interrupt);
            if !e.record.note.as_deref().is_some_and(|n| n.contains("busy")) {
                return (dir, e);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the stand-in nsys stayed busy");
    }

    #[test]
    fn a_failed_export_says_why_and_spots_the_libdw_problem() {
        let (_dir, e) = export_with(
            "#!/bin/sh\necho 'Importer error status: libdw.so.1 missing' >&2\nexit 1\n",
            None,
        );
        assert_eq!(e.record.name, PASS_NAME);
        assert_eq!(e.record.command[1..4], ["export", "--type", "sqlite"]);
        match e.result {
            Err(ExportError::Failed {
                reason,
                libdw_missing,
            }) => {
                assert!(libdw_missing);
                assert!(reason.starts_with("exit 1: Importer error"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let dir = tempfile::tempdir().unwrap();
        let e = export(
            &dir.path().join("no-nsys"),
            &dir.path().join("x.nsys-rep"),
            &dir.path().join("x.sqlite"),
            Duration::from_secs(30),
            &dir.path().join("export.log"),
            None,
        );
        assert!(matches!(e.result, Err(ExportError::NotFound { .. })));
    }

    #[test]
    fn the_export_is_used_when_nsys_wrote_it() {
        // The output path is `$7`, after `-o`.
        let (dir, e) = export_with("#!/bin/sh\necho db > \"$7\"\n", Some(&Interrupt::new()));
        assert!(e.record.ok, "{:?}", e.record);
        assert_eq!(e.result.unwrap(), dir.path().join("x.sqlite"));
    }
}
