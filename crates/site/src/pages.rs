//! One askama template struct per page, the embedded assets, and the one place where chart
//! SVG enters a page unescaped.

use std::hash::{Hash, Hasher};

use askama::filters::Safe;
use askama::Template;
use llmprof_bundle::{Bundle, Category, OpKind};

use crate::view::{IndexRow, RunView, TableView};
use crate::{SiteError, SiteRun};

/// Pre-rendered chart markup. The charts crate escapes every text it draws (tested there with
/// hostile names), so its output is the only unescaped markup a page holds.
pub type Svg = Safe<String>;

/// Assets written to `<out>/static/`, embedded in the binary.
pub const ASSETS: &[(&str, &[u8])] = &[
    ("style.css", include_bytes!("../../../static/style.css")),
    ("site.js", include_bytes!("../../../static/site.js")),
    ("timeline.js", include_bytes!("../../../static/timeline.js")),
    ("compare.js", include_bytes!("../../../static/compare.js")),
    (
        "viewer-boot.js",
        include_bytes!("../../../static/viewer-boot.js"),
    ),
    // The WASM viewer, built from web/viewer by web/build.sh (CI checks it is current).
    (
        "viewer/llmprof_viewer.js",
        include_bytes!("../../../web/dist/llmprof_viewer.js"),
    ),
    (
        "viewer/llmprof_viewer_wasm.js",
        include_bytes!("../../../web/dist/llmprof_viewer_wasm.js"),
    ),
];

/// Hash of the templates' output-affecting inputs: assets and the crate version.
pub fn assets_hash() -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    for (name, bytes) in ASSETS {
        name.hash(&mut h);
        bytes.hash(&mut h);
    }
    env!("CARGO_PKG_VERSION").hash(&mut h);
    h.finish()
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The charts of a run page.
pub struct RunCharts {
    pub stages: Option<Svg>,
    pub categories: Option<Svg>,
    pub top_kernels: Option<Svg>,
    pub sol: Option<Svg>,
    pub nvml: Option<Svg>,
    pub roofline: Option<Svg>,
}

fn charts_of(b: &Bundle) -> RunCharts {
    RunCharts {
        stages: llmprof_charts::stage_breakdown(b).map(Safe),
        categories: llmprof_charts::category_share(b).map(Safe),
        top_kernels: llmprof_charts::top_kernels(b, 12).map(Safe),
        sol: llmprof_charts::speed_of_light(b).map(Safe),
        nvml: llmprof_charts::nvml_timeline(b).map(Safe),
        roofline: llmprof_charts::roofline(b).map(Safe),
    }
}

mod filters {
    /// Markdown escaping for `report.md`.
    pub fn md<T: std::fmt::Display>(s: T, _: &dyn askama::Values) -> askama::Result<String> {
        Ok(crate::markdown::escape(&s.to_string()))
    }
}

#[derive(Template)]
#[template(path = "run.html")]
struct RunPage<'a> {
    root: &'a str,
    title: &'a str,
    version: &'a str,
    v: &'a RunView,
    charts: RunCharts,
    /// The run's directory name in the site (the timeline link's `#run=`).
    id: &'a str,
    has_timeline: bool,
    /// Raw artifacts (path relative to the run page, published or only listed).
    raw: &'a [(String, bool)],
}

#[derive(Template)]
#[template(path = "report.md")]
struct ReportMd<'a> {
    version: &'a str,
    v: &'a RunView,
}

#[derive(Template)]
#[template(path = "index.html")]
struct IndexPage<'a> {
    root: &'a str,
    title: &'a str,
    version: &'a str,
    rows: Vec<IndexRow>,
}

#[derive(Template)]
#[template(path = "compare.html")]
struct ComparePage<'a> {
    root: &'a str,
    title: &'a str,
    version: &'a str,
    runs: Vec<String>,
    /// (directory name, run id) per run, for the interactive comparison's run picker.
    dirs: Vec<(String, String)>,
    stages: TableView,
    efficiency: TableView,
    mix: TableView,
    stages_chart: Option<Svg>,
    mix_chart: Option<Svg>,
    /// Before/after pairs: (heading, table).
    pairs: Vec<(String, TableView)>,
}

fn render_err(what: &str) -> impl Fn(askama::Error) -> SiteError + '_ {
    move |e| SiteError::Render {
        what: what.to_string(),
        message: e.to_string(),
    }
}

/// The run page and its `report.md`.
pub fn run_page(
    b: &Bundle,
    id: &str,
    has_timeline: bool,
    raw: &[(String, bool)],
) -> Result<(String, String), SiteError> {
    let v = RunView::of(b);
    let html = RunPage {
        root: "../../",
        title: &v.title,
        version: VERSION,
        v: &v,
        charts: charts_of(b),
        id,
        has_timeline,
        raw,
    }
    .render()
    .map_err(render_err("a run page"))?;
    let md = ReportMd {
        version: VERSION,
        v: &v,
    }
    .render()
    .map_err(render_err("report.md"))?;
    Ok((html, md))
}

pub fn index_page(runs: &[SiteRun]) -> Result<String, SiteError> {
    IndexPage {
        root: "",
        title: "Profiled runs",
        version: VERSION,
        rows: runs
            .iter()
            .map(|r| {
                let mut row = RunView::of(&r.bundle).index;
                row.dir = r.id.clone();
                row
            })
            .collect(),
    }
    .render()
    .map_err(render_err("the index page"))
}

#[derive(Template)]
#[template(path = "timeline.html")]
struct TimelinePage<'a> {
    root: &'a str,
    title: &'a str,
    version: &'a str,
    /// (directory name, label) of the runs that have a timeline.
    runs: Vec<(String, String)>,
}

/// The WASM kernel timeline; it opens the run named in the URL hash.
pub fn timeline_page(runs: &[SiteRun]) -> Result<String, SiteError> {
    TimelinePage {
        root: "",
        title: "Kernel timeline",
        version: VERSION,
        runs: runs
            .iter()
            .filter(|r| r.has_timeline)
            .map(|r| {
                let label = match &r.bundle.label {
                    Some(l) if !l.is_empty() => format!("{} ({l})", r.id),
                    _ => r.id.clone(),
                };
                (r.id.clone(), label)
            })
            .collect(),
    }
    .render()
    .map_err(render_err("the timeline page"))
}

pub fn compare_page(site_runs: &[SiteRun]) -> Result<String, SiteError> {
    let bundles: Vec<&Bundle> = site_runs.iter().map(|r| &r.bundle).collect();
    let dirs: Vec<(String, String)> = site_runs
        .iter()
        .map(|r| (r.id.clone(), r.bundle.run_id.clone()))
        .collect();
    let runs: Vec<String> = bundles.iter().map(|b| b.run_id.clone()).collect();
    let headers = |first: &str| -> Vec<(String, bool)> {
        std::iter::once((first.to_string(), false))
            .chain(runs.iter().map(|r| (r.clone(), true)))
            .collect()
    };
    let table = |first: &str| {
        let h = headers(first);
        TableView {
            headers: h.iter().map(|(h, _)| h.clone()).collect(),
            numeric: h.iter().map(|(_, n)| *n).collect(),
            rows: Vec::new(),
        }
    };
    // Per-stage wall time.
    let mut stage_names: Vec<String> = Vec::new();
    for b in &bundles {
        for s in &b.stages {
            if !stage_names.contains(&s.name) {
                stage_names.push(s.name.clone());
            }
        }
    }
    let mut stages = table("Stage");
    for name in &stage_names {
        let mut row = vec![name.clone()];
        for b in &bundles {
            row.push(
                b.stages
                    .iter()
                    .find(|s| &s.name == name)
                    .map(|s| crate::view::ms(s.wall_ns))
                    .unwrap_or_else(|| "–".into()),
            );
        }
        stages.rows.push(row);
    }
    // Efficiency.
    let mut efficiency = table("Metric");
    let views: Vec<RunView> = bundles.iter().map(|b| RunView::of(b)).collect();
    let metric = |f: &dyn Fn(&IndexRow) -> Option<f64>, digits: usize| -> Vec<String> {
        views
            .iter()
            .map(|v| f(&v.index).map_or("n/a".into(), |x| format!("{x:.digits$}")))
            .collect()
    };
    for (label, values) in [
        (
            "MFU prefill (%)",
            metric(&|r| r.mfu_prefill.map(|x| x * 100.0), 2),
        ),
        (
            "MBU decode (%)",
            metric(&|r| r.mbu_decode.map(|x| x * 100.0), 2),
        ),
        ("Decode tokens/s", metric(&|r| r.decode_tps, 1)),
        ("TTFT median (ms)", metric(&|r| r.ttft_ms, 2)),
        ("TPOT median (ms)", metric(&|r| r.tpot_ms, 2)),
    ] {
        efficiency
            .rows
            .push(std::iter::once(label.to_string()).chain(values).collect());
    }
    // Category mix.
    let mut mix = table("Category");
    for cat in Category::ALL {
        let mut row = vec![cat.as_str().to_string()];
        for b in &bundles {
            let total: u64 = b
                .kernels
                .iter()
                .filter(|k| k.kind == OpKind::Kernel)
                .map(|k| k.total_ns)
                .sum();
            let part: u64 = b
                .kernels
                .iter()
                .filter(|k| k.kind == OpKind::Kernel && k.category == cat)
                .map(|k| k.total_ns)
                .sum();
            row.push(if total == 0 {
                "–".into()
            } else {
                format!("{:.1}", part as f64 * 100.0 / total as f64)
            });
        }
        if row.iter().skip(1).any(|c| c != "0.0" && c != "–") {
            mix.rows.push(row);
        }
    }
    let pairs = crate::before_after::pairs(&bundles)
        .into_iter()
        .map(|(before, after)| {
            let target = bundles[after]
                .capture
                .as_ref()
                .map_or(String::new(), |c| c.target.clone());
            (
                format!("{target}: eager and optimized"),
                crate::before_after::table(bundles[before], bundles[after]),
            )
        })
        .collect();
    let refs = &bundles;
    ComparePage {
        root: "",
        title: "Compare runs",
        version: VERSION,
        runs,
        dirs,
        stages,
        efficiency,
        mix,
        stages_chart: llmprof_charts::compare_stages(refs).map(Safe),
        mix_chart: llmprof_charts::compare_category_mix(refs).map(Safe),
        pairs,
    }
    .render()
    .map_err(render_err("the compare page"))
}
