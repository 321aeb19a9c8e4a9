//! Run ids: `<capture time>-<slug>`, safe as directory names.

use std::path::Path;

use llmprof_bundle::{time, Bundle};

/// `<capture time>-<slug>`: `20261121-235636-qwen2`. The slug is the label, else the model
/// type, else the first input's file stem; the time is now when the bundle has no capture time.
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
    let slug = slugify(&slug_source(bundle));
    if slug.is_empty() {
        stamp
    } else {
        format!("{stamp}-{slug}")
    }
}

fn slug_source(bundle: &Bundle) -> String {
    bundle
        .label
        .clone()
        .or_else(|| bundle.model.as_ref().and_then(|m| m.model_type.clone()))
        .or_else(|| {
            bundle
                .inputs
                .first()
                .and_then(|i| name_stem(Path::new(&i.path)))
        })
        .unwrap_or_else(|| "run".into())
}

/// A file's name without its extension; a compressed file's without both of them
/// (`trace.json.gz` → `trace`).
fn name_stem(path: &Path) -> Option<String> {
    let compressed = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    let name = if compressed {
        Path::new(path.file_stem()?)
    } else {
        path
    };
    name.file_stem().map(|s| s.to_string_lossy().into_owned())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compressed_input_is_named_without_both_extensions() {
        for (path, stem) in [
            ("runs/trace.json.gz", "trace"),
            ("trace.json", "trace"),
            ("/x/nsys_export.sqlite.GZ", "nsys_export"),
            ("profile.gz", "profile"),
            ("rank.0.json", "rank.0"),
        ] {
            assert_eq!(name_stem(Path::new(path)).as_deref(), Some(stem), "{path}");
        }
    }

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

    #[test]
    fn a_run_id_is_the_capture_time_and_the_label() {
        let mut b = Bundle::new("");
        b.captured_at = Some("2026-11-21T23:56:36Z".into());
        b.label = Some("Qwen2.5 eager".into());
        assert_eq!(run_id(&b), "20261121-235636-qwen2.5-eager");
    }
}
