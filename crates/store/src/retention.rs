//! Keeping the runs directory in bounds: a capture's big raw files are gzip-compressed, and
//! only the newest runs of a target keep their raw files uncompressed (their manifests still
//! list the original files' sha256).

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};

use flate2::write::GzEncoder;
use flate2::Compression;

use crate::RAW_DIR;

/// Runs per target whose raw files stay as captured.
pub const KEEP_UNCOMPRESSED: usize = 5;
/// Raw files above this are compressed right away (a PyTorch profiler trace is ~180 MB of
/// JSON for 64 decode steps, ~12 MB gzipped), keeping a run well under ~2 GB.
pub const COMPRESS_NOW_BYTES: u64 = 64 << 20;

/// Gzips every regular file under `raw` larger than `min_bytes` that is not already
/// compressed (`x` becomes `x.gz`); returns the files compressed. A file that fails to
/// compress is left as it was.
pub fn compress_raw(raw: &Path, min_bytes: u64) -> Vec<PathBuf> {
    crate::files_under(raw)
        .into_iter()
        .filter(|p| {
            let big = std::fs::metadata(p).is_ok_and(|m| m.len() > min_bytes);
            let compressed = p
                .extension()
                .is_some_and(|x| x == "gz" || x == "nsys-rep" || x == "sqlite");
            big && !compressed && gzip(p).is_ok()
        })
        .collect()
}

fn gzip(path: &Path) -> std::io::Result<()> {
    let mut name = path.as_os_str().to_owned();
    name.push(".gz");
    let out = PathBuf::from(name);
    let result = (|| {
        let mut input = BufReader::new(File::open(path)?);
        let mut enc = GzEncoder::new(BufWriter::new(File::create(&out)?), Compression::fast());
        std::io::copy(&mut input, &mut enc)?;
        enc.finish()?
            .into_inner()
            .map_err(|e| e.into_error())?
            .sync_all()
    })();
    match result {
        Ok(()) => std::fs::remove_file(path),
        Err(e) => {
            let _ = std::fs::remove_file(&out);
            Err(e)
        }
    }
}

/// Compresses all raw files of the runs of `target` in `runs_dir` but the newest
/// [`KEEP_UNCOMPRESSED`] (run ids start with their capture time, so names sort by age); returns
/// the files compressed. A runs directory that cannot be read has nothing to compress.
pub fn apply(runs_dir: &Path, target: &str) -> Vec<PathBuf> {
    let runs: Vec<PathBuf> = crate::list_runs(runs_dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|r| {
            r.join(RAW_DIR).is_dir() && crate::read::capture_target(r).is_some_and(|t| t == target)
        })
        .collect();
    let old = runs.len().saturating_sub(KEEP_UNCOMPRESSED);
    runs.into_iter()
        .take(old)
        .flat_map(|r| compress_raw(&r.join(RAW_DIR), 0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_runs_and_compresses_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..7 {
            let run = dir.path().join(format!("2026112{i}-000000-t"));
            std::fs::create_dir_all(run.join("raw/kineto")).unwrap();
            std::fs::write(run.join("raw/kineto/trace.json"), "x".repeat(1000)).unwrap();
            std::fs::write(run.join("bundle.json"), r#"{"capture": {"target": "t"}}"#).unwrap();
        }
        let done = apply(dir.path(), "t");
        assert_eq!(done.len(), 2, "{done:?}");
        assert!(dir
            .path()
            .join("20261120-000000-t/raw/kineto/trace.json.gz")
            .is_file());
        assert!(!dir
            .path()
            .join("20261120-000000-t/raw/kineto/trace.json")
            .exists());
        assert!(dir
            .path()
            .join("20261126-000000-t/raw/kineto/trace.json")
            .is_file());
        // Another target's runs are untouched.
        assert!(apply(dir.path(), "other").is_empty());
    }
}
