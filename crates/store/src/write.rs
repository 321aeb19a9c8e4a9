//! Writing runs so that nothing half-written is ever visible.
//!
//! A run is written into a hidden temporary directory inside the runs directory and renamed into
//! place only once every file is complete, so a crash or an error leaves no partial run
//! (`rename` within one filesystem is atomic). Readers skip hidden directories.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use llmprof_bundle::{Bundle, BUNDLE_FILE, LAUNCH_CALLS_FILE, TIMELINE_FILE};

use crate::spill::RunTimeline;
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
    mut timeline: Option<RunTimeline>,
) -> Result<PathBuf, StoreError> {
    fs::create_dir_all(runs_dir).map_err(|e| write_err(runs_dir, e))?;
    let id = unique_id(runs_dir, &bundle.run_id);
    bundle.run_id = id.clone();
    if let Some(t) = &mut timeline {
        t.head_mut().run_id = id.clone();
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

/// The directory inside a multi-rank run that holds one run directory per rank.
pub const RANKS_DIR: &str = "ranks";

/// A multi-rank run being written: each rank's run directory (`ranks/<rank>/`, a complete
/// single-rank run with its timeline) as soon as that rank is ingested — from any thread, so
/// only one rank's timeline is in memory per worker — then the top-level bundle, and the whole
/// renamed into place. Dropped before [`RankedRunWriter::finish`], it removes what it wrote.
#[derive(Debug)]
pub struct RankedRunWriter {
    runs_dir: PathBuf,
    tmp: PathBuf,
    done: bool,
}

impl RankedRunWriter {
    /// Starts a multi-rank run in a hidden directory of `runs_dir`.
    pub fn begin(runs_dir: &Path) -> Result<Self, StoreError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let tmp = runs_dir.join(format!(".tmp-ranks-{}-{nanos}", std::process::id()));
        fs::create_dir_all(tmp.join(RANKS_DIR)).map_err(|e| write_err(&tmp, e))?;
        Ok(Self {
            runs_dir: runs_dir.to_path_buf(),
            tmp,
            done: false,
        })
    }

    /// Writes rank `rank`'s run directory; its bundle and timeline are named `rank-<rank>`.
    pub fn write_rank(
        &self,
        rank: u32,
        mut bundle: Bundle,
        mut timeline: Option<RunTimeline>,
    ) -> Result<(), StoreError> {
        let id = format!("rank-{rank}");
        bundle.run_id = id.clone();
        if let Some(t) = &mut timeline {
            t.head_mut().run_id = id;
        }
        write_files(&self.rank_dir(rank), &bundle, timeline.as_ref())
    }

    /// Copies an existing single-rank run (`llmprof merge`): its bundle, rewritten as rank
    /// `rank`'s, and its timeline and launch calls as they are (plain or gzip).
    pub fn copy_rank(&self, rank: u32, run: &Path, mut bundle: Bundle) -> Result<(), StoreError> {
        let dir = self.rank_dir(rank);
        bundle.run_id = format!("rank-{rank}");
        write_files(&dir, &bundle, None)?;
        for name in [TIMELINE_FILE, LAUNCH_CALLS_FILE] {
            for file in [name.to_string(), format!("{name}.gz")] {
                let from = run.join(&file);
                if from.is_file() {
                    let to = dir.join(&file);
                    fs::copy(&from, &to).map_err(|e| write_err(&to, e))?;
                }
            }
        }
        Ok(())
    }

    fn rank_dir(&self, rank: u32) -> PathBuf {
        self.tmp.join(RANKS_DIR).join(rank.to_string())
    }

    /// Writes the top-level bundle and renames the run into place as `<run-id>` (or
    /// `<run-id>-2`, …); returns its directory.
    pub fn finish(mut self, mut bundle: Bundle) -> Result<PathBuf, StoreError> {
        let id = unique_id(&self.runs_dir, &bundle.run_id);
        bundle.run_id = id.clone();
        write_json(&self.tmp.join(BUNDLE_FILE), &bundle, true)?;
        let dest = self.runs_dir.join(&id);
        fs::rename(&self.tmp, &dest).map_err(|e| write_err(&dest, e))?;
        self.done = true;
        Ok(dest)
    }
}

impl Drop for RankedRunWriter {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_dir_all(&self.tmp);
        }
    }
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

/// Writes the run's files, the timeline's two on threads of their own (a large run's are tens
/// of MB of JSON each); the first error, in file order, is returned.
fn write_files(
    dir: &Path,
    bundle: &Bundle,
    timeline: Option<&RunTimeline>,
) -> Result<(), StoreError> {
    fs::create_dir_all(dir).map_err(|e| write_err(dir, e))?;
    let (timeline_file, calls_file) = (dir.join(TIMELINE_FILE), dir.join(LAUNCH_CALLS_FILE));
    let (tf, cf) = (&timeline_file, &calls_file);
    std::thread::scope(|s| {
        let (kernels, calls) = match timeline {
            None => (None, None),
            Some(RunTimeline::Built(t)) => (
                Some(s.spawn(move || write_json(tf, t, false))),
                (!t.calls.is_empty()).then(|| s.spawn(move || write_json(cf, &t.calls, false))),
            ),
            Some(RunTimeline::Spilled(t)) => (
                Some(s.spawn(move || write_json(tf, &t.json(), false))),
                t.calls_json().is_some().then(|| {
                    s.spawn(move || match t.calls_json() {
                        Some(c) => write_json(cf, &c, false),
                        None => Ok(()),
                    })
                }),
            ),
        };
        let bundle = write_json(&dir.join(BUNDLE_FILE), bundle, true);
        let join = |h: Option<std::thread::ScopedJoinHandle<'_, Result<(), StoreError>>>| {
            h.map_or(Ok(()), |h| {
                h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
            })
        };
        let (kernels, calls) = (join(kernels), join(calls));
        bundle.and(kernels).and(calls)
    })
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
