//! `llmprof site build`: a static report site from run bundles — an index of runs, one page
//! and one `report.md` per run, and a compare page — that works on GitHub Pages under a
//! sub-path, on an intranet server, and opened as `file://`.
//!
//! * Every link is relative; there is no CDN, web font or other external request.
//! * Templates (askama, the crate's `templates/`) and assets (its `static/`, the built viewer
//!   included) are compiled into the binary; the crate holds everything it needs.
//! * Strings from input data are escaped by askama's HTML escaper (and the `md` filter in
//!   `report.md`); the only unescaped markup is the charts' SVG, passed as [`Svg`] in one
//!   place ([`charts_of`]), whose text the charts crate escapes.
//! * Pages are rendered on every build, from the templates and the report model of this
//!   binary, and written only where their bytes changed; so no change of template or view code
//!   can leave a stale page. What a rebuild skips is copying a run's data (bundle, timeline of
//!   tens of MB as JSON and script, raw artifacts) when its inputs, the llmprof version and the
//!   data-script format are those of the last build (a key per run in
//!   `<out>/.llmprof-site-cache.json`).

mod assets;
mod chunked;
mod markdown;
mod pages;

use std::collections::BTreeMap;
use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};

use llmprof_bundle::{Bundle, BUNDLE_FILE, TIMELINE_FILE};

pub use chunked::{CHUNK_ABOVE, CHUNK_DIR};
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
    /// Timelines with more kernels than this are published in chunks by time, and the viewer
    /// loads at most this many kernels at once ([`CHUNK_ABOVE`] by default).
    pub chunk_above: u64,
}

/// What a build did.
#[derive(Debug, Clone, Default)]
pub struct BuildReport {
    pub runs: usize,
    /// Runs whose page or data changed in the output this time.
    pub updated: usize,
    /// Runs whose page and data were already current.
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

/// A run of the site: its output directory name, bundle, whether it has a timeline of its own,
/// and the timelines the timeline page offers for it: its own, or each rank's of a multi-rank
/// run (`<id>/ranks/<rank>`, one file loaded at a time).
#[derive(Debug)]
pub struct SiteRun {
    pub id: String,
    pub has_timeline: bool,
    pub bundle: Bundle,
    /// (timeline page id, label).
    pub timelines: Vec<(String, String)>,
}

/// `window.LLMPROF_DATA["<kind>/<id>"] = "<text>";` — the text as one JSON string literal
/// (valid JavaScript), so the viewer hands it to the Rust parser without a second parse.
fn data_script(kind: &str, id: &str, text: &str) -> String {
    let key = serde_json::to_string(&format!("{kind}/{id}")).unwrap_or_default();
    let value = serde_json::to_string(text).unwrap_or_default();
    format!("(window.LLMPROF_DATA = window.LLMPROF_DATA || {{}})[{key}] = {value};\n")
}

/// The data key of each run published by the last build.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Cache {
    runs: BTreeMap<String, u64>,
}

impl Cache {
    fn load(path: &Path) -> Cache {
        fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    fn save(&self, path: &Path) -> Result<(), SiteError> {
        let text = serde_json::to_string(self).map_err(|e| SiteError::Render {
            what: "the build cache".into(),
            message: e.to_string(),
        })?;
        write(path, text.as_bytes())
    }
}

/// Builds the site.
pub fn build(
    opts: &BuildOptions,
    progress: &mut dyn FnMut(Step<'_>),
) -> Result<BuildReport, SiteError> {
    let found = llmprof_store::list_runs(&opts.runs_dir)?;
    fs::create_dir_all(&opts.out_dir).map_err(|e| SiteError::Write {
        path: opts.out_dir.clone(),
        source: e,
    })?;
    let cache_path = opts.out_dir.join(CACHE_FILE);
    let old = Cache::load(&cache_path);
    let mut cache = Cache::default();
    let mut report = BuildReport::default();
    let mut runs: Vec<SiteRun> = Vec::new();
    for published in publish_all(&found, opts, &old, progress) {
        let Published { skipped, run } = published?;
        report.skipped.extend(skipped);
        let Some((site_run, key, updated)) = run else {
            continue;
        };
        if updated {
            report.updated += 1;
        } else {
            report.unchanged += 1;
        }
        cache.runs.insert(site_run.id.clone(), key);
        runs.push(site_run);
    }
    progress(Step::Pages);
    // Newest first.
    runs.sort_by(|a, b| {
        b.bundle
            .captured_at
            .cmp(&a.bundle.captured_at)
            .then(a.bundle.run_id.cmp(&b.bundle.run_id))
    });
    report.index = write_site_pages(&opts.out_dir, &runs)?;
    remove_stale_runs(&opts.out_dir, &cache);
    cache.save(&cache_path)?;
    report.runs = runs.len();
    let bundles: Vec<&Bundle> = runs.iter().map(|r| &r.bundle).collect();
    report.before_after = llmprof_report::before_after::pairs(&bundles)
        .into_iter()
        .map(|(b, a)| (runs[b].id.clone(), runs[a].id.clone()))
        .collect();
    Ok(report)
}

/// A run's `bundle.json` text and bundle; `None` (and a line in `skipped`) when it cannot be
/// read or parsed.
fn load_bundle(dir: &Path, skipped: &mut Vec<String>) -> Option<(String, Bundle)> {
    let text = llmprof_store::read_bundle_text(dir)
        .map_err(|e| skipped.push(e.to_string()))
        .ok()?;
    match Bundle::from_json(&text) {
        Ok(b) => Some((text, b)),
        Err(e) => {
            let path = llmprof_store::bundle_path(dir);
            skipped.push(format!("{}: {e}", path.display()));
            None
        }
    }
}

/// One run directory's outcome: the lines for `skipped`, and the run unless it was skipped.
struct Published {
    skipped: Vec<String>,
    run: Option<(SiteRun, u64, bool)>,
}

/// Publishes every run directory in `found`, on all cores (runs are independent: each
/// writes only under its own `runs/<id>/`); the outcomes come back in `found`'s order.
fn publish_all(
    found: &[PathBuf],
    opts: &BuildOptions,
    old: &Cache,
    progress: &mut dyn FnMut(Step<'_>),
) -> Vec<Result<Published, SiteError>> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, found.len().max(1));
    let next = AtomicUsize::new(0);
    let claims = Mutex::new(BTreeMap::new());
    let mut slots: Vec<Option<Result<Published, SiteError>>> =
        (0..found.len()).map(|_| None).collect();
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        for _ in 0..workers {
            let (tx, next, claims) = (tx.clone(), &next, &claims);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(dir) = found.get(i) else {
                    return;
                };
                if tx.send((i, publish_dir(dir, opts, old, claims))).is_err() {
                    return;
                }
            });
        }
        drop(tx);
        for (done, (i, outcome)) in rx.iter().enumerate() {
            if let Ok(Published {
                run: Some((run, ..)),
                ..
            }) = &outcome
            {
                progress(Step::Run {
                    done,
                    total: found.len(),
                    id: &run.bundle.run_id,
                });
            }
            slots[i] = Some(outcome);
        }
    });
    slots.into_iter().flatten().collect()
}

/// Loads and publishes the run in `dir`, unless another directory already claimed its site
/// id in `claims` (two copies of one run).
fn publish_dir(
    dir: &Path,
    opts: &BuildOptions,
    old: &Cache,
    claims: &Mutex<BTreeMap<String, PathBuf>>,
) -> Result<Published, SiteError> {
    let mut skipped = Vec::new();
    let Some((text, bundle)) = load_bundle(dir, &mut skipped) else {
        return Ok(Published { skipped, run: None });
    };
    let id = safe_id(&bundle.run_id, dir);
    if let Some(other) = claim(claims, &id, dir) {
        skipped.push(format!(
            "{}: run id `{id}` is also the run id of {}; only one of them is published \
             (give one a new id with `llmprof ingest --label`, or remove the copy)",
            dir.display(),
            other.display()
        ));
        return Ok(Published { skipped, run: None });
    }
    let run = RunSource {
        dir,
        id,
        text,
        bundle,
        chunk_above: opts.chunk_above,
    };
    let run = publish_run(run, &opts.out_dir, old, &mut skipped)?;
    Ok(Published {
        skipped,
        run: Some(run),
    })
}

/// Claims `id` for `dir`; the directory that holds it already, if another does.
fn claim(claims: &Mutex<BTreeMap<String, PathBuf>>, id: &str, dir: &Path) -> Option<PathBuf> {
    let mut claims = claims.lock().unwrap_or_else(|e| e.into_inner());
    match claims.get(id) {
        Some(other) => Some(other.clone()),
        None => {
            claims.insert(id.to_string(), dir.to_path_buf());
            None
        }
    }
}

/// A run directory being published.
struct RunSource<'a> {
    dir: &'a Path,
    /// Its directory name in the site.
    id: String,
    text: String,
    bundle: Bundle,
    /// [`BuildOptions::chunk_above`].
    chunk_above: u64,
}

/// Publishes one run: its data when its key changed, its page and `report.md` always (written
/// where their bytes changed). Returns the run, its data key and whether anything was written.
fn publish_run(
    run: RunSource<'_>,
    out_dir: &Path,
    old: &Cache,
    skipped: &mut Vec<String>,
) -> Result<(SiteRun, u64, bool), SiteError> {
    let run_out = out_dir.join("runs").join(&run.id);
    let timeline_src = llmprof_store::timeline_path(run.dir);
    let key = data_key(&run.text, timeline_src.as_deref(), run.chunk_above);
    let current = old.runs.get(&run.id) == Some(&key) && run_out.join(BUNDLE_JS).is_file();
    if !current {
        copy_data(&run, timeline_src.as_deref(), &run_out, skipped)?;
        copy_rank_data(&run, &run_out, skipped)?;
    }
    let raw = list_raw(run.dir);
    let has_timeline = run_out.join(TIMELINE_JS).is_file();
    let timelines = timelines_of(&run, &run_out, has_timeline);
    let (html, md) = pages::run_page(&run.bundle, has_timeline, &timelines, &raw)?;
    let page_changed = write_if_changed(&run_out.join("index.html"), html.as_bytes())?;
    let md_changed = write_if_changed(&run_out.join("report.md"), md.as_bytes())?;
    let site_run = SiteRun {
        id: run.id,
        has_timeline,
        bundle: run.bundle,
        timelines,
    };
    Ok((site_run, key, !current || page_changed || md_changed))
}

/// What a run's data files depend on: the bundle text, the timeline file (its size and mtime
/// stand in for tens of MB of contents), the llmprof version, the data-script format and the
/// raw-artifact size limit.
fn data_key(bundle_text: &str, timeline: Option<&Path>, chunk_above: u64) -> u64 {
    let stamp = timeline.and_then(|p| fs::metadata(p).ok()).map(|m| {
        let mtime = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_nanos());
        (m.len(), mtime)
    });
    let mut h = std::hash::DefaultHasher::new();
    env!("CARGO_PKG_VERSION").hash(&mut h);
    data_script("k", "id", "").hash(&mut h);
    PUBLISH_RAW_MAX.hash(&mut h);
    chunk_above.hash(&mut h);
    bundle_text.hash(&mut h);
    stamp.hash(&mut h);
    h.finish()
}

/// Writes the run's `bundle.json`, `bundle.js`, timeline (as JSON and script) and its small raw
/// artifacts. A timeline that cannot be read leaves the run without a timeline, not the site
/// without the run.
fn copy_data(
    run: &RunSource<'_>,
    timeline_src: Option<&Path>,
    run_out: &Path,
    skipped: &mut Vec<String>,
) -> Result<(), SiteError> {
    copy_bundle_and_timeline(run, timeline_src, run_out, skipped)?;
    copy_raw(run.dir, run_out)
}

/// The bundle and timeline of `run` as JSON and data scripts in `run_out`.
fn copy_bundle_and_timeline(
    run: &RunSource<'_>,
    timeline_src: Option<&Path>,
    run_out: &Path,
    skipped: &mut Vec<String>,
) -> Result<(), SiteError> {
    fs::create_dir_all(run_out).map_err(|e| SiteError::Write {
        path: run_out.to_path_buf(),
        source: e,
    })?;
    write(&run_out.join(BUNDLE_FILE), run.text.as_bytes())?;
    write(
        &run_out.join(BUNDLE_JS),
        data_script("bundle", &run.id, &run.text).as_bytes(),
    )?;
    let timeline = timeline_src.and_then(|src| {
        llmprof_store::read_timeline_text(src)
            .map_err(|e| skipped.push(format!("{e} (the run is shown without its timeline)")))
            .ok()
    });
    match timeline {
        Some(timeline) => {
            let dst = run_out.join(TIMELINE_FILE);
            let plain = timeline_src.filter(|p| p.extension().is_some_and(|e| e == "json"));
            if !plain.is_some_and(|src| link(src, &dst)) {
                write(&dst, timeline.as_bytes())?;
            }
            chunked::write_timeline_scripts(&run.id, timeline, run_out, run.chunk_above)?;
        }
        None => {
            let _ = fs::remove_file(run_out.join(TIMELINE_FILE));
            let _ = fs::remove_file(run_out.join(TIMELINE_JS));
            let _ = fs::remove_dir_all(run_out.join(chunked::CHUNK_DIR));
        }
    }
    Ok(())
}

/// Hard-links `dst` to `src` (a run's plain `timeline.json`, tens of MB that the site
/// would otherwise copy; runs are written once, and a re-ingest makes a new file); whether it
/// did. Fails over to a copy across file systems.
fn link(src: &Path, dst: &Path) -> bool {
    let _ = fs::remove_file(dst);
    fs::hard_link(src, dst).is_ok()
}

/// The timelines a run offers: its own, else its ranks' that were published.
fn timelines_of(run: &RunSource<'_>, run_out: &Path, has_timeline: bool) -> Vec<(String, String)> {
    let label = match &run.bundle.label {
        Some(l) if !l.is_empty() => format!("{} ({l})", run.id),
        _ => run.id.clone(),
    };
    if has_timeline {
        return vec![(run.id.clone(), label)];
    }
    let ranks = run.bundle.ranks.as_ref().map_or(&[][..], |r| &r.ranks[..]);
    ranks
        .iter()
        .filter(|e| run_out.join(&e.dir).join(TIMELINE_JS).is_file())
        .map(|e| {
            (
                format!("{}/{}", run.id, e.dir),
                format!("{label} · rank {}", e.rank),
            )
        })
        .collect()
}

/// A multi-rank run's ranks: each rank's bundle and timeline as data scripts under
/// `<run>/ranks/<rank>/`, keyed `<run>/ranks/<rank>`, so the timeline page loads one rank at a
/// time. A rank that cannot be read is listed in `skipped` and left out.
fn copy_rank_data(
    run: &RunSource<'_>,
    run_out: &Path,
    skipped: &mut Vec<String>,
) -> Result<(), SiteError> {
    let Some(ranks) = &run.bundle.ranks else {
        return Ok(());
    };
    for e in &ranks.ranks {
        let src = run.dir.join(&e.dir);
        let out = run_out.join(&e.dir);
        let text = match llmprof_store::read_bundle_text(&src) {
            Ok(t) => t,
            Err(err) => {
                skipped.push(format!(
                    "{err} (rank {} is left out of the timeline)",
                    e.rank
                ));
                continue;
            }
        };
        let id = format!("{}/{}", run.id, e.dir);
        let rank = RunSource {
            dir: &src,
            id: id.clone(),
            text,
            bundle: Bundle::new(id),
            chunk_above: run.chunk_above,
        };
        let timeline = llmprof_store::timeline_path(&src);
        copy_bundle_and_timeline(&rank, timeline.as_deref(), &out, skipped)?;
    }
    Ok(())
}

/// The index, compare and timeline pages and the static assets; returns the index's path.
fn write_site_pages(out_dir: &Path, runs: &[SiteRun]) -> Result<PathBuf, SiteError> {
    let index = out_dir.join("index.html");
    write_if_changed(&index, pages::index_page(runs)?.as_bytes())?;
    write_if_changed(
        &out_dir.join("compare.html"),
        pages::compare_page(runs)?.as_bytes(),
    )?;
    write_if_changed(
        &out_dir.join("timeline.html"),
        pages::timeline_page(runs)?.as_bytes(),
    )?;
    for (name, bytes) in assets::ASSETS {
        write_if_changed(&out_dir.join("static").join(name), bytes)?;
    }
    Ok(index)
}

/// Removes the pages of runs that are no longer in the runs directory.
fn remove_stale_runs(out_dir: &Path, cache: &Cache) {
    let Ok(rd) = fs::read_dir(out_dir.join("runs")) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !cache.runs.contains_key(&name) && e.path().is_dir() {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// Raw artifacts above this are listed but not copied into the site.
const PUBLISH_RAW_MAX: u64 = 16 << 20;

/// Every file under the run's `raw/` (path relative to the run directory, sorted) and whether
/// it is small enough to publish (at most [`PUBLISH_RAW_MAX`] bytes).
fn list_raw(dir: &Path) -> Vec<(String, bool)> {
    raw_files(dir)
        .map(|(rel, small)| (rel.to_string_lossy().replace('\\', "/"), small))
        .collect()
}

fn raw_files(dir: &Path) -> impl Iterator<Item = (PathBuf, bool)> + '_ {
    walkdir::WalkDir::new(dir.join("raw"))
        .sort_by_file_name()
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .filter_map(move |e| {
            let rel = e.path().strip_prefix(dir).ok()?.to_path_buf();
            let small = e.metadata().is_ok_and(|m| m.len() <= PUBLISH_RAW_MAX);
            Some((rel, small))
        })
}

/// Copies the run's publishable raw artifacts into the site.
fn copy_raw(dir: &Path, run_out: &Path) -> Result<(), SiteError> {
    for (rel, small) in raw_files(dir) {
        if !small {
            continue;
        }
        let dest = run_out.join(&rel);
        let err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SiteError::Write { path, source }
        };
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent).map_err(err(parent))?;
        }
        fs::copy(dir.join(&rel), &dest).map_err(err(&dest))?;
    }
    Ok(())
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

/// Writes `bytes` to `path` unless it holds them already; returns whether it wrote.
fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<bool, SiteError> {
    if fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(false);
    }
    write(path, bytes)?;
    Ok(true)
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
