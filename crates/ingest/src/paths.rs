//! How a bundle names the files it was made from: as the user gave them to `llmprof ingest`
//! (relative stays relative), or, for a capture, relative to the run directory. A capture
//! works in `<out>/.capture-<name>-<ms>/`, whose `raw/` becomes the run's `raw/`; its
//! absolute path existed only on the capture host and only during the capture, so no bundle
//! keeps it.

use std::path::Path;

/// Names files relative to `root` when they lie under it, as given otherwise.
#[derive(Debug, Clone, Copy, Default)]
pub struct PathNames<'a> {
    root: Option<&'a Path>,
}

impl<'a> PathNames<'a> {
    pub fn new(root: Option<&'a Path>) -> Self {
        PathNames { root }
    }

    /// `path` relative to the root when it lies under it (`raw/metadata.json`), else as
    /// given.
    pub fn file(&self, path: &Path) -> String {
        match self.root.and_then(|r| path.strip_prefix(r).ok()) {
            Some(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
            _ => path.display().to_string(),
        }
    }

    /// [`PathNames::file`] of a path already written as text (a parser's file name).
    pub fn text(&self, path: &str) -> String {
        self.file(Path::new(path))
    }

    /// A command line with every path under the root written relative to it: the words
    /// `<root>/driver.py <root>/raw/nsys/plan.json` become `driver.py raw/nsys/plan.json`.
    pub fn command(&self, line: &str) -> String {
        match self.root {
            Some(root) => relative_in(line, root),
            None => line.to_string(),
        }
    }
}

/// `text` with `<root>/` removed wherever it occurs, and a bare `<root>` written `.`.
pub fn relative_in(text: &str, root: &Path) -> String {
    let root = root.display().to_string();
    let root = root.trim_end_matches('/');
    if root.is_empty() {
        return text.to_string();
    }
    let inner = text.replace(&format!("{root}/"), "");
    if inner == root {
        ".".into()
    } else {
        inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_under_the_root_are_relative_and_others_as_given() {
        let root = Path::new("/tmp/runs/.capture-q-17");
        let n = PathNames::new(Some(root));
        assert_eq!(n.file(&root.join("raw/metadata.json")), "raw/metadata.json");
        assert_eq!(n.text("/tmp/runs/.capture-q-17/raw/x.csv"), "raw/x.csv");
        assert_eq!(n.file(Path::new("/data/trace.json")), "/data/trace.json");
        assert_eq!(n.file(Path::new("rel/trace.json")), "rel/trace.json");
        // A sibling whose name only starts like the root is not under it.
        let sibling = Path::new("/tmp/runs/.capture-q-170/raw/m.json");
        assert_eq!(n.file(sibling), "/tmp/runs/.capture-q-170/raw/m.json");
        let user = PathNames::new(None);
        assert_eq!(user.file(Path::new("../t.json")), "../t.json");
    }

    #[test]
    fn command_lines_lose_the_root() {
        let n = PathNames::new(Some(Path::new("/tmp/runs/.capture-q-17/")));
        assert_eq!(
            n.command(
                "/opt/py/bin/python3 /tmp/runs/.capture-q-17/driver.py \
                 /tmp/runs/.capture-q-17/raw/nsys/plan.json"
            ),
            "/opt/py/bin/python3 driver.py raw/nsys/plan.json"
        );
        assert_eq!(n.command("/tmp/runs/.capture-q-17"), ".");
        assert_eq!(PathNames::new(None).command("a /b"), "a /b");
    }
}
