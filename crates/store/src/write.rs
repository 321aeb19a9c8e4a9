//! Writing runs so that nothing half-written is ever visible.
//!
//! A run is written into a hidden temporary directory inside the runs directory and renamed into
//! place only once every file is complete, so a crash or an error leaves no partial run
//! (`rename` within one filesystem is atomic). Readers skip hidden directories.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use llmprof_bundle::{Bundle, Timeline, BUNDLE_FILE, LAUNCH_CALLS_FILE, TIMELINE_FILE};

use crate::StoreError;

fn write_err(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `bundle` (and `timeline`, with its launch calls as `launch_calls.json` when it has
/// any) as `runs_dir/<run-id>/` and returns that directory. When a
/// run of that id exists already, `-2`, `-3`, ... is appended (and the bundle's and the
/// timeline's `run_id` say so).
pub fn write_run(
    runs_dir: &Path,
    mut bundle: Bundle,
    mut timeline: Option<Timeline>,
) -> Result<PathBuf, StoreError> {
    fs::create_dir_all(runs_dir).map_err(|e| write_err(runs_dir, e))?;
    let id = unique_id(runs_dir, &bundle.run_id);
    bundle.run_id = id.clone();
    if let Some(t) = &mut timeline {
        t.run_id = id.clone();
    }
    let tmp = runs_dir.join(format!(".tmp-{id}-{}", std::process::id()));
    let result = write_files(&tmp, &bundle, timeline.as_ref()).and_then(|()| {
        let dest = runs_dir.join(&id);
        fs::rename(&tmp, &dest).map_err(|e| write_err(&dest, e))?;
        Ok(dest)
    });
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

/// `base`, or `base-2`, `base-3`, ... when a run of that id exists.
fn unique_id(runs_dir: &Path, base: &str) -> String {
    let mut id = base.to_string();
    let mut n = 1;
    while runs_dir.join(&id).exists() {
        n += 1;
        id = format!("{base}-{n}");
    }
    id
}

fn write_files(dir: &Path, bundle: &Bundle, timeline: Option<&Timeline>) -> Result<(), StoreError> {
    fs::create_dir_all(dir).map_err(|e| write_err(dir, e))?;
    write_json(&dir.join(BUNDLE_FILE), bundle, true)?;
    if let Some(t) = timeline {
        write_json(&dir.join(TIMELINE_FILE), t, false)?;
        if !t.calls.is_empty() {
            write_json(&dir.join(LAUNCH_CALLS_FILE), &t.calls, false)?;
        }
    }
    Ok(())
}

fn write_json<T: serde::Serialize>(path: &Path, value: &T, pretty: bool) -> Result<(), StoreError> {
    let io = |e: std::io::Error| write_err(path, e);
    let file = fs::File::create(path).map_err(io)?;
    let mut w = BufWriter::new(file);
    let res = if pretty {
        serde_json::to_writer_pretty(&mut w, value)
    } else {
        serde_json::to_writer(&mut w, value)
    };
    res.map_err(|e| io(std::io::Error::other(e)))?;
    w.write_all(b"\n").map_err(io)?;
    let file = w.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    Ok(())
}

/// Replaces `run_dir/bundle.json` atomically (written beside it, then renamed).
pub fn rewrite_bundle(run_dir: &Path, bundle: &Bundle) -> Result<(), StoreError> {
    let dest = run_dir.join(BUNDLE_FILE);
    let tmp = run_dir.join(format!(".{BUNDLE_FILE}.tmp-{}", std::process::id()));
    let result = write_json(&tmp, bundle, true)
        .and_then(|()| fs::rename(&tmp, &dest).map_err(|e| write_err(&dest, e)));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_run_of_the_same_id_gets_a_suffix_and_no_temp_dir_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let b = Bundle::new("20261121-235636-x");
        let first = write_run(dir.path(), b.clone(), None).unwrap();
        let second = write_run(dir.path(), b.clone(), None).unwrap();
        let third = write_run(dir.path(), b, None).unwrap();
        assert!(first.ends_with("20261121-235636-x"));
        assert!(second.ends_with("20261121-235636-x-2"));
        assert!(third.ends_with("20261121-235636-x-3"));
        let again = crate::read_bundle(&third).unwrap();
        assert_eq!(again.run_id, "20261121-235636-x-3");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
    }

    #[test]
    fn a_rewritten_bundle_replaces_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let run = write_run(dir.path(), Bundle::new("r"), None).unwrap();
        let mut b = crate::read_bundle(&run).unwrap();
        b.label = Some("new".into());
        rewrite_bundle(&run, &b).unwrap();
        assert_eq!(
            crate::read_bundle(&run).unwrap().label.as_deref(),
            Some("new")
        );
        assert_eq!(fs::read_dir(&run).unwrap().count(), 1);
    }
}
