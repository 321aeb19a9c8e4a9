//! Tidy checks on the source tree itself, as rust-analyzer's tidy test does: every source file
//! says what it is, ARCHITECTURE.md names every module, no crate reaches outside its own
//! directory for files it embeds, and number formatting has one home.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file of the crates' sources and the viewer, relative to the repo.
fn sources() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in ["crates", "web/viewer/src"] {
        for e in walkdir::WalkDir::new(repo().join(root))
            .sort_by_file_name()
            .into_iter()
            .flatten()
        {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "rs")
                && !p.components().any(|c| c.as_os_str() == "target")
            {
                out.push(p.strip_prefix(repo()).unwrap().to_path_buf());
            }
        }
    }
    assert!(out.len() > 50, "found only {} source files", out.len());
    out
}

fn text(p: &Path) -> String {
    std::fs::read_to_string(repo().join(p)).unwrap()
}

#[test]
fn every_source_file_has_a_module_doc() {
    let missing: Vec<String> = sources()
        .into_iter()
        .filter(|p| {
            let t = text(p);
            let first = t.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            !first.starts_with("//!")
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "these files do not start with a `//!` module doc saying what they are:\n{}",
        missing.join("\n")
    );
}

#[test]
fn architecture_names_every_module() {
    let arch = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let missing: Vec<String> = sources()
        .into_iter()
        .filter(|p| p.components().any(|c| c.as_os_str() == "src"))
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            // `lib.rs`, `main.rs` and `mod.rs` are named by their crate or directory; `tests.rs`
            // holds a module's unit tests.
            let named = match name.as_str() {
                "lib.rs" | "main.rs" | "tests.rs" => return None,
                "mod.rs" => format!("{}/", p.parent()?.file_name()?.to_str()?),
                _ => name.clone(),
            };
            let stem = named.trim_end_matches(".rs").trim_end_matches('/');
            let found = arch.contains(&named) || arch.contains(&format!("`{stem}`"));
            (!found).then(|| p.display().to_string())
        })
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's code map does not name these modules (as `file.rs` or `module`):\n{}",
        missing.join("\n")
    );
}

#[test]
fn crates_embed_only_their_own_files() {
    for p in sources() {
        let t = text(&p);
        for (i, line) in t.lines().enumerate() {
            let embeds = ["include_bytes!(", "include_str!("]
                .iter()
                .any(|m| line.contains(m));
            assert!(
                !(embeds && line.contains("../../")),
                "{}:{}: embeds a file outside its crate, so the crate cannot be packaged: {line}",
                p.display(),
                i + 1
            );
        }
    }
    let askama = text(Path::new("crates/site/askama.toml"));
    assert!(
        !askama.contains(".."),
        "askama.toml reaches outside the site crate: {askama}"
    );
}

#[test]
fn numbers_are_formatted_in_one_place() {
    let formatters = [
        "fn thousands(",
        "fn group_thousands(",
        "fn joules(",
        "fn axis_number(",
    ];
    for p in sources() {
        if p.starts_with("crates/report") {
            continue;
        }
        let t = text(&p);
        for f in formatters {
            assert!(
                !t.contains(f),
                "{} defines its own `{f}…)`: use llmprof_report::fmt",
                p.display()
            );
        }
    }
}

#[test]
fn the_site_crate_packages_alone() {
    let o = std::process::Command::new(env!("CARGO"))
        .args([
            "package",
            "-p",
            "llmprof-site",
            "--list",
            "--allow-dirty",
            "--offline",
        ])
        .current_dir(repo())
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for file in [
        "askama.toml",
        "templates/run.html",
        "templates/report.md",
        "static/style.css",
        "static/viewer/llmprof_viewer_wasm.js",
    ] {
        assert!(
            list.lines().any(|l| l == file),
            "{file} not packaged:\n{list}"
        );
    }
}
