//! Run directories: naming them and writing them so that nothing half-written is ever visible.
//!
//! A run is written into a hidden temporary directory inside the output directory and renamed
//! into place only once every file is complete, so a crash or an error leaves no partial run
//! (`rename` within one filesystem is atomic). Readers skip hidden directories.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use llmprof_bundle::{Bundle, BUNDLE_FILE, TIMELINE_FILE};

use crate::error::{what::RUN_DIR, IngestError};
use crate::{time, Ingested};

/// `<capture time>-<slug>`: `20261121-235636-qwen2`. The slug is the label, else the model
/// type, else the first input's file stem.
pub fn run_id(bundle: &Bundle) -> String {
    let stamp = bundle
        .captured_at
        .as_deref()
        .and_then(parse_rfc3339_compact)
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as i64)
                .unwrap_or(0);
            time::compact_utc(now)
        });
    let slug_source = bundle
        .label
        .clone()
        .or_else(|| bundle.model.as_ref().and_then(|m| m.model_type.clone()))
        .or_else(|| {
            bundle.inputs.first().and_then(|i| {
                Path::new(&i.path)
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
            })
        })
        .unwrap_or_else(|| "run".into());
    let slug = slugify(&slug_source);
    if slug.is_empty() {
        stamp
    } else {
        format!("{stamp}-{slug}")
    }
}

/// `2026-11-21T23:56:36Z` → `20261121-235636`.
fn parse_rfc3339_compact(s: &str) -> Option<String> {
    let digits: String = s.chars().filter(char::is_ascii_digit).take(14).collect();
    (digits.len() == 14).then(|| format!("{}-{}", &digits[..8], &digits[8..]))
}

/// Lowercase ASCII letters and digits, other runs of characters as one `-`, at most 40 chars.
pub fn slugify(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed: String = out
        .trim_matches(|c| c == '-' || c == '.')
        .chars()
        .take(40)
        .collect();
    trimmed.trim_end_matches('-').to_string()
}

/// Writes `ingested` as `out_dir/<run-id>/` and returns that directory. When a run of that id
/// exists already, `-2`, `-3`, ... is appended (and the bundle's `run_id` says so).
pub fn write_run(out_dir: &Path, mut ingested: Ingested) -> Result<PathBuf, IngestError> {
    let io = |path: &Path, e: std::io::Error| IngestError::io(RUN_DIR, path, e);
    fs::create_dir_all(out_dir).map_err(|e| io(out_dir, e))?;
    let base = ingested.bundle.run_id.clone();
    let mut id = base.clone();
    let mut n = 1;
    while out_dir.join(&id).exists() {
        n += 1;
        id = format!("{base}-{n}");
    }
    ingested.bundle.run_id = id.clone();
    if let Some(t) = &mut ingested.timeline {
        t.run_id = id.clone();
    }
    let tmp = out_dir.join(format!(".tmp-{id}-{}", std::process::id()));
    let result = write_files(&tmp, &ingested).and_then(|()| {
        let dest = out_dir.join(&id);
        fs::rename(&tmp, &dest).map_err(|e| io(&dest, e))?;
        Ok(dest)
    });
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

fn write_files(dir: &Path, ingested: &Ingested) -> Result<(), IngestError> {
    let io = |path: &Path, e: std::io::Error| IngestError::io(RUN_DIR, path, e);
    fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    write_json(&dir.join(BUNDLE_FILE), &ingested.bundle, true)?;
    if let Some(t) = &ingested.timeline {
        write_json(&dir.join(TIMELINE_FILE), t, false)?;
    }
    Ok(())
}

fn write_json<T: serde::Serialize>(
    path: &Path,
    value: &T,
    pretty: bool,
) -> Result<(), IngestError> {
    let io = |e: std::io::Error| IngestError::io(RUN_DIR, path, e);
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
pub fn rewrite_bundle(run_dir: &Path, bundle: &Bundle) -> Result<(), IngestError> {
    let dest = run_dir.join(BUNDLE_FILE);
    let tmp = run_dir.join(format!(".{BUNDLE_FILE}.tmp-{}", std::process::id()));
    let result = write_json(&tmp, bundle, true)
        .and_then(|()| fs::rename(&tmp, &dest).map_err(|e| IngestError::io(RUN_DIR, &dest, e)));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Reads `run_dir/bundle.json`.
pub fn read_bundle(run_dir: &Path) -> Result<Bundle, IngestError> {
    let path = if run_dir.is_dir() {
        run_dir.join(BUNDLE_FILE)
    } else {
        run_dir.to_path_buf()
    };
    let text = fs::read_to_string(&path).map_err(|e| IngestError::io(RUN_DIR, &path, e))?;
    Bundle::from_json(&text).map_err(|e| IngestError::invalid(RUN_DIR, &path, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_safe_directory_names() {
        assert_eq!(slugify("Qwen2.5-0.5B on H200!"), "qwen2.5-0.5b-on-h200");
        assert_eq!(slugify("../../etc/passwd"), "etc-passwd");
        assert_eq!(slugify("<script>"), "script");
        assert_eq!(slugify("***"), "");
    }

    #[test]
    fn compact_time_from_rfc3339() {
        assert_eq!(
            parse_rfc3339_compact("2026-11-21T23:56:36Z").as_deref(),
            Some("20261121-235636")
        );
    }
}
