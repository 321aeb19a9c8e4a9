//! How a view names a file. A bundle keeps paths as they were given (a capture's relative to
//! its run directory); an absolute one names a directory of the host that ingested or captured
//! the run — meaningless on another machine, and nothing a published site should show. Views
//! show it as `…/` and its file name; relative paths (`raw/config.json`) stay as they are.

/// `path` as a view shows it: `/home/me/ckpt/config.json` → `…/config.json`.
pub fn shown(path: &str) -> String {
    let p = path.trim();
    if !is_absolute(p) {
        return path.to_string();
    }
    let name = p.trim_end_matches(['/', '\\']).rsplit(['/', '\\']).next();
    format!("…/{}", name.unwrap_or_default())
}

/// `text` with every backtick-quoted absolute path shortened as [`shown`] does (`metadata
/// `/tmp/x/metadata.json`` → `metadata `…/metadata.json``): the form findings and sources quote
/// files in.
pub fn shown_in(text: &str) -> String {
    text.split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                shown(part)
            } else {
                part.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("`")
}

/// A Unix absolute path, or a Windows one (`C:\…`, `\\server\…`).
fn is_absolute(p: &str) -> bool {
    let b = p.as_bytes();
    p.starts_with('/')
        || p.starts_with("\\\\")
        || (b.len() > 2
            && b[0].is_ascii_alphabetic()
            && b[1] == b':'
            && matches!(b[2], b'\\' | b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_paths_keep_only_their_file_name() {
        assert_eq!(shown("/home/me/ckpt/config.json"), "…/config.json");
        assert_eq!(shown("C:\\runs\\config.json"), "…/config.json");
        assert_eq!(shown("raw/config.json"), "raw/config.json");
        assert_eq!(shown("config.json"), "config.json");
        assert_eq!(
            shown_in("decode steps from metadata `/tmp/a b/metadata.json`, prompt from flag `--x`"),
            "decode steps from metadata `…/metadata.json`, prompt from flag `--x`"
        );
        assert_eq!(shown_in("no quotes"), "no quotes");
    }
}
