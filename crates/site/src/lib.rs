//! `llmprof site build`: a static report site from run bundles — an index of runs, one page
//! and one `report.md` per run, and a compare page — that works on GitHub Pages under a
//! sub-path, on an intranet server, and opened as `file://`.
//!
//! * Every link is relative; there is no CDN, web font or other external request.
//! * Templates (askama, `templates/`) and assets (`static/`) are compiled into the binary.
//! * Strings from input data are escaped by askama's HTML escaper (and the `md` filter in
//!   `report.md`); the only unescaped markup is the charts' SVG, passed as [`Svg`] in one
//!   place ([`charts_of`]), whose text the charts crate escapes.
//! * A rebuild re-renders only runs whose `bundle.json` changed (a hash per run is kept in
//!   `<out>/.llmprof-site-cache.json`).

mod before_after;
pub mod launches;
mod markdown;
mod pages;
pub mod view;

use std::collections::BTreeMap;
use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use llmprof_bundle::{Bundle, BUNDLE_FILE, TIMELINE_FILE};
use serde::{Deserialize, Serialize};

pub use pages::Svg;

/// Why a site could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    #[error("site directory `{}`: cannot write", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("rendering {what}: {message}")]
    Render { what: String, message: String },
    #[error(transparent)]
    Store(#[from] llmprof_store::StoreError),
}

/// What to build.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    pub runs_dir: PathBuf,
    pub out_dir: PathBuf,
}

/// What a build did.
#[derive(Debug, Clone, Default)]
pub struct BuildReport {
    pub runs: usize,
    /// Run pages rendered this time (the others were unchanged).
    pub rendered: usize,
    pub unchanged: usize,
    /// Run directories skipped, with the reason (a bundle that does not parse, say).
    pub skipped: Vec<String>,
    pub index: PathBuf,
    /// Eager/optimized run pairs on the compare page (`compare.html#before-after`).
    pub before_after: Vec<(String, String)>,
}

/// A step of the build, for progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    Run {
        done: usize,
        total: usize,
        id: &'a str,
    },
    Pages,
}

const CACHE_FILE: &str = ".llmprof-site-cache.json";

/// A run's bundle as a script (the viewer reads data by `<script>` tags, which work from
/// `file://` where `fetch` does not).
const BUNDLE_JS: &str = "bundle.js";
/// A run's timeline as a script.
const TIMELINE_JS: &str = "timeline.js";

/// A run of the site: its output directory name, bundle, and whether it has a timeline.
#[derive(Debug)]
pub struct SiteRun {
    pub id: String,
    pub has_timeline: bool,
    pub bundle: Bundle,
}

/// `window.LLMPROF_DATA["<kind>/<id>"] = "<text>";` — the text as one JSON string literal
/// (valid JavaScript), so the viewer hands it to the Rust parser without a second parse.
fn data_script(kind: &str, id: &str, text: &str) -> String {
    let key = serde_json::to_string(&format!("{kind}/{id}")).unwrap_or_default();
    let value = serde_json::to_string(text).unwrap_or_default();
    format!("(window.LLMPROF_DATA = window.LLMPROF_DATA || {{}})[{key}] = {value};\n")
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Cache {
    /// llmprof version + template/asset hash: a new binary re-renders everything.
    build: String,
    runs: BTreeMap<String, u64>,
}

/// Builds the site.
pub fn build(
    opts: &BuildOptions,
    progress: &mut dyn FnMut(Step<'_>),
) -> Result<BuildReport, SiteError> {
    let found = llmprof_store::list_runs(&opts.runs_dir)?;
    let write_err = |path: &Path, source| SiteError::Write {
        path: path.to_path_buf(),
        source,
    };
    fs::create_dir_all(&opts.out_dir).map_err(|e| write_err(&opts.out_dir, e))?;
    let cache_path = opts.out_dir.join(CACHE_FILE);
    let build_id = format!("{}-{:x}", env!("CARGO_PKG_VERSION"), pages::assets_hash());
    let old: Cache = fs::read_to_string(&cache_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .filter(|c: &Cache| c.build == build_id)
        .unwrap_or_default();
    let mut cache = Cache {
        build: build_id,
        runs: BTreeMap::new(),
    };
    let mut report = BuildReport::default();
    let mut runs: Vec<SiteRun> = Vec::new();
    let total = found.len();
    for (i, dir) in found.iter().enumerate() {
        let path = dir.join(BUNDLE_FILE);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                report
                    .skipped
                    .push(format!("{}: cannot read ({e})", path.display()));
                continue;
            }
        };
        let bundle = match Bundle::from_json(&text) {
            Ok(b) => b,
            Err(e) => {
                report.skipped.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        progress(Step::Run {
            done: i,
            total,
            id: &bundle.run_id,
        });
        let id = safe_id(&bundle.run_id, dir);
        let timeline_src = llmprof_store::timeline_path(dir);
        // A new or re-ingested timeline re-renders the run too (its size and mtime stand in
        // for its contents, which can be tens of MB).
        let timeline_stamp = timeline_src
            .as_ref()
            .and_then(|p| fs::metadata(p).ok())
            .map(|m| {
                let mtime = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_nanos());
                (m.len(), mtime)
            });
        let hash = {
            let mut h = std::hash::DefaultHasher::new();
            text.hash(&mut h);
            timeline_stamp.hash(&mut h);
            h.finish()
        };
        let run_out = opts.out_dir.join("runs").join(&id);
        let page = run_out.join("index.html");
        if old.runs.get(&id) == Some(&hash) && page.is_file() {
            report.unchanged += 1;
        } else {
            fs::create_dir_all(&run_out).map_err(|e| write_err(&run_out, e))?;
            let raw = publish_raw(dir, &run_out)?;
            // A timeline that cannot be read leaves the run without a timeline, not the site
            // without the run.
            let timeline = match &timeline_src {
                Some(src) => match llmprof_store::read_timeline_text(src) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        report
                            .skipped
                            .push(format!("{e} (the run is shown without its timeline)"));
                        None
                    }
                },
                None => None,
            };
            let (html, md) = pages::run_page(&bundle, &id, timeline.is_some(), &raw)?;
            write(&page, html.as_bytes())?;
            write(&run_out.join("report.md"), md.as_bytes())?;
            write(&run_out.join(BUNDLE_FILE), text.as_bytes())?;
            write(
                &run_out.join(BUNDLE_JS),
                data_script("bundle", &id, &text).as_bytes(),
            )?;
            match &timeline {
                Some(timeline) => {
                    write(&run_out.join(TIMELINE_FILE), timeline.as_bytes())?;
                    write(
                        &run_out.join(TIMELINE_JS),
                        data_script("timeline", &id, timeline).as_bytes(),
                    )?;
                }
                None => {
                    let _ = fs::remove_file(run_out.join(TIMELINE_FILE));
                    let _ = fs::remove_file(run_out.join(TIMELINE_JS));
                }
            }
            report.rendered += 1;
        }
        cache.runs.insert(id.clone(), hash);
        runs.push(SiteRun {
            has_timeline: run_out.join(TIMELINE_JS).is_file(),
            id,
            bundle,
        });
    }
    progress(Step::Pages);
    // Newest first.
    runs.sort_by(|a, b| {
        b.bundle
            .captured_at
            .cmp(&a.bundle.captured_at)
            .then(a.bundle.run_id.cmp(&b.bundle.run_id))
    });
    let index = opts.out_dir.join("index.html");
    write(&index, pages::index_page(&runs)?.as_bytes())?;
    write(
        &opts.out_dir.join("compare.html"),
        pages::compare_page(&runs)?.as_bytes(),
    )?;
    write(
        &opts.out_dir.join("timeline.html"),
        pages::timeline_page(&runs)?.as_bytes(),
    )?;
    for (name, bytes) in pages::ASSETS {
        write(&opts.out_dir.join("static").join(name), bytes)?;
    }
    // Pages of runs that disappeared from the runs directory go too.
    let runs_out = opts.out_dir.join("runs");
    if let Ok(rd) = fs::read_dir(&runs_out) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !cache.runs.contains_key(&name) && e.path().is_dir() {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
    let cache_text = serde_json::to_string(&cache).map_err(|e| SiteError::Render {
        what: "the build cache".into(),
        message: e.to_string(),
    })?;
    write(&cache_path, cache_text.as_bytes())?;
    report.runs = runs.len();
    report.index = index;
    let bundles: Vec<&Bundle> = runs.iter().map(|r| &r.bundle).collect();
    report.before_after = before_after::pairs(&bundles)
        .into_iter()
        .map(|(b, a)| (runs[b].id.clone(), runs[a].id.clone()))
        .collect();
    Ok(report)
}

/// Raw artifacts above this are listed but not copied into the site.
const PUBLISH_RAW_MAX: u64 = 16 << 20;

/// Copies the run's `raw/` files of at most [`PUBLISH_RAW_MAX`] bytes into the site; returns
/// every raw file (path relative to the run directory) and whether it was published.
fn publish_raw(dir: &Path, run_out: &Path) -> Result<Vec<(String, bool)>, SiteError> {
    let raw = dir.join("raw");
    let mut out = Vec::new();
    if !raw.is_dir() {
        return Ok(out);
    }
    for entry in walkdir::WalkDir::new(&raw)
        .sort_by_file_name()
        .into_iter()
        .flatten()
    {
        if !entry.file_type().is_file() {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(dir) else {
            continue;
        };
        let rel_text = rel.to_string_lossy().replace('\\', "/");
        let small = entry
            .metadata()
            .map(|m| m.len() <= PUBLISH_RAW_MAX)
            .unwrap_or(false);
        if small {
            let dest = run_out.join(rel);
            if let Some(parent) = dest.parent() {
                fs::create_dir_all(parent).map_err(|e| SiteError::Write {
                    path: parent.to_path_buf(),
                    source: e,
                })?;
            }
            fs::copy(entry.path(), &dest).map_err(|e| SiteError::Write {
                path: dest.clone(),
                source: e,
            })?;
        }
        out.push((rel_text, small));
    }
    Ok(out)
}

/// The output directory name of a run: its id when that is a plain name, else the input
/// directory's name (a bundle could claim `../x` as its id).
fn safe_id(run_id: &str, dir: &Path) -> String {
    let plain = !run_id.is_empty()
        && run_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !run_id.starts_with('.');
    if plain {
        run_id.to_string()
    } else {
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "run".into())
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a reader never sees a
/// half-written page.
fn write(path: &Path, bytes: &[u8]) -> Result<(), SiteError> {
    let err = |source| SiteError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(err)?;
    }
    let tmp = path.with_extension(format!(
        "{}.tmp",
        path.extension()
            .map_or(String::new(), |e| e.to_string_lossy().into_owned())
    ));
    fs::write(&tmp, bytes).map_err(err)?;
    fs::rename(&tmp, path).map_err(err)
}
