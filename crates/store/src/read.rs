//! Finding runs and reading their files back.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use llmprof_bundle::{Bundle, TimelineCalls, BUNDLE_FILE, LAUNCH_CALLS_FILE, TIMELINE_FILE};

use crate::StoreError;

/// Run directories (those holding a `bundle.json`) directly under `runs_dir`, sorted by name,
/// which is by capture time; hidden (in-progress) directories are skipped. Fails when
/// `runs_dir` cannot be read or holds no run.
pub fn list_runs(runs_dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let rd = fs::read_dir(runs_dir).map_err(|error| StoreError::RunsDir {
        path: runs_dir.to_path_buf(),
        error,
    })?;
    let mut dirs: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && p.join(BUNDLE_FILE).is_file() && !is_hidden(p))
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        return Err(StoreError::NoRuns {
            path: runs_dir.to_path_buf(),
        });
    }
    Ok(dirs)
}

fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
}

/// The bundle file of `run`: `run/bundle.json` for a run directory, `run` itself otherwise.
pub fn bundle_path(run: &Path) -> PathBuf {
    if run.is_dir() {
        run.join(BUNDLE_FILE)
    } else {
        run.to_path_buf()
    }
}

/// The text of a run's `bundle.json` (`run` is the run directory or the file).
pub fn read_bundle_text(run: &Path) -> Result<String, StoreError> {
    let path = bundle_path(run);
    fs::read_to_string(&path).map_err(|source| StoreError::ReadBundle { path, source })
}

/// A run's bundle (`run` is the run directory or its `bundle.json`).
pub fn read_bundle(run: &Path) -> Result<Bundle, StoreError> {
    let text = read_bundle_text(run)?;
    Bundle::from_json(&text).map_err(|e| StoreError::InvalidBundle {
        path: bundle_path(run),
        message: e.to_string(),
    })
}

/// The run's timeline file: `timeline.json`, or `timeline.json.gz` as sample runs keep it.
pub fn timeline_path(run_dir: &Path) -> Option<PathBuf> {
    let plain = run_dir.join(TIMELINE_FILE);
    let gz = run_dir.join(format!("{TIMELINE_FILE}.gz"));
    [plain, gz].into_iter().find(|p| p.is_file())
}

/// The JSON text of a timeline file, inflated when it is gzip-compressed (by its magic bytes).
pub fn read_timeline_text(path: &Path) -> Result<String, StoreError> {
    let bad = |message: String| StoreError::Timeline {
        path: path.to_path_buf(),
        message,
    };
    let bytes = fs::read(path).map_err(|e| bad(format!("cannot read ({e})")))?;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut text = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .map_err(|e| bad(format!("not a valid gzip of {TIMELINE_FILE} ({e})")))?;
        Ok(text)
    } else {
        String::from_utf8(bytes).map_err(|_| bad("is not UTF-8 text".into()))
    }
}

/// The run's launch calls (`launch_calls.json`, or `.gz`), `None` when the run has none (runs
/// ingested before the file existed, or from a source without launch calls).
pub fn read_launch_calls(run_dir: &Path) -> Result<Option<TimelineCalls>, StoreError> {
    let plain = run_dir.join(LAUNCH_CALLS_FILE);
    let gz = run_dir.join(format!("{LAUNCH_CALLS_FILE}.gz"));
    let Some(path) = [plain, gz].into_iter().find(|p| p.is_file()) else {
        return Ok(None);
    };
    let text = read_timeline_text(&path)?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| StoreError::Timeline {
            path,
            message: format!("not valid launch calls ({e})"),
        })
}

/// The target a run was captured from (`capture.target` of its bundle), read through a probe
/// of that one field so that bundles of any schema version answer; `None` for runs that were
/// not captured by `llmprof capture` or whose bundle cannot be read.
pub(crate) fn capture_target(run_dir: &Path) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Probe {
        capture: Option<Target>,
    }
    #[derive(serde::Deserialize)]
    struct Target {
        target: String,
    }
    let text = read_bundle_text(run_dir).ok()?;
    let probe: Probe = serde_json::from_str(&text).ok()?;
    probe.capture.map(|c| c.target)
}

/// Every regular file under `dir`, its subdirectories included, sorted by path; an
/// unreadable directory contributes nothing. For a run's `raw/` artifacts.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_listed_sorted_without_hidden_or_bundle_less_directories() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b-run", "a-run", ".tmp-c-1", "no-bundle"] {
            fs::create_dir_all(dir.path().join(name)).unwrap();
            if name != "no-bundle" {
                fs::write(dir.path().join(name).join(BUNDLE_FILE), "{}").unwrap();
            }
        }
        let runs = list_runs(dir.path()).unwrap();
        let names: Vec<_> = runs.iter().map(|p| p.file_name().unwrap()).collect();
        assert_eq!(names, ["a-run", "b-run"]);
        let empty = tempfile::tempdir().unwrap();
        let e = list_runs(empty.path()).unwrap_err().to_string();
        assert!(e.contains("holds no run directories"), "{e}");
        let e = list_runs(&dir.path().join("nope")).unwrap_err().to_string();
        assert!(e.contains("nope") && e.contains("cannot read"), "{e}");
    }

    #[test]
    fn timelines_are_read_plain_or_gzipped() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        assert!(timeline_path(dir.path()).is_none());
        let gz = dir.path().join("timeline.json.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(b"{\"x\": 1}").unwrap();
        fs::write(&gz, enc.finish().unwrap()).unwrap();
        assert_eq!(timeline_path(dir.path()).as_deref(), Some(gz.as_path()));
        assert_eq!(read_timeline_text(&gz).unwrap(), "{\"x\": 1}");
        let plain = dir.path().join("timeline.json");
        fs::write(&plain, "{}").unwrap();
        assert_eq!(timeline_path(dir.path()).as_deref(), Some(plain.as_path()));
        fs::write(&plain, [0x1f, 0x8b, 0, 1]).unwrap();
        let e = read_timeline_text(&plain).unwrap_err().to_string();
        assert!(
            e.contains("timeline.json") && e.contains("not a valid gzip"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_bundle_names_the_path_and_what_to_give() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_bundle(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("bundle.json") && e.contains("llmprof ingest"),
            "{e}"
        );
        fs::write(dir.path().join(BUNDLE_FILE), "{").unwrap();
        let e = read_bundle(dir.path()).unwrap_err().to_string();
        assert!(e.contains("not a valid llmprof bundle"), "{e}");
    }
}
