//! One askama template struct per page, the embedded assets, and the one place where chart
//! SVG enters a page unescaped.

use askama::filters::Safe;
use askama::Template;
use llmprof_bundle::Bundle;
use llmprof_report::{before_after, Comparison, IndexRow, Norm, RunReport, TableView};

use crate::{SiteError, SiteRun};

/// Pre-rendered chart markup. The charts crate escapes every text it draws (tested there with
/// hostile names), so its output is the only unescaped markup a page holds.
pub type Svg = Safe<String>;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Rows of the run page's kernel and operator tables.
const TOP: usize = 20;

/// The charts of a run page.
pub struct RunCharts {
    pub stages: Option<Svg>,
    pub categories: Option<Svg>,
    pub top_kernels: Option<Svg>,
    pub sol: Option<Svg>,
    pub nvml: Option<Svg>,
    pub roofline: Option<Svg>,
    pub skew: Option<Svg>,
}

fn charts_of(b: &Bundle) -> RunCharts {
    RunCharts {
        stages: llmprof_charts::stage_breakdown(b).map(Safe),
        categories: llmprof_charts::category_share(b).map(Safe),
        top_kernels: llmprof_charts::top_kernels(b, 12).map(Safe),
        sol: llmprof_charts::speed_of_light(b).map(Safe),
        nvml: llmprof_charts::nvml_timeline(b).map(Safe),
        roofline: llmprof_charts::roofline(b).map(Safe),
        skew: llmprof_charts::rank_skew(b).map(Safe),
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
    v: &'a RunReport,
    charts: RunCharts,
    has_timeline: bool,
    /// The timeline page's id of this run's (first) timeline.
    timeline_link: Option<&'a str>,
    /// A multi-rank run's first two ranks side by side on the timeline page (`#run=` value
    /// with its `with=`).
    side_by_side: Option<String>,
    /// Raw artifacts (path relative to the run page, published or only listed).
    raw: &'a [(String, bool)],
}

#[derive(Template)]
#[template(path = "report.md")]
struct ReportMd<'a> {
    version: &'a str,
    v: &'a RunReport,
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
    /// How many runs the page compares.
    runs: usize,
    /// (directory name, run id) per run, for the interactive comparison's run picker.
    dirs: Vec<(String, String)>,
    stages: TableView,
    efficiency: TableView,
    mix_share: TableView,
    mix_token: TableView,
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
    has_timeline: bool,
    timelines: &[(String, String)],
    raw: &[(String, bool)],
) -> Result<(String, String), SiteError> {
    let v = RunReport::of(b, TOP);
    let timeline_link = timelines.first().map(|t| t.0.as_str());
    let side_by_side = match timelines {
        [a, b, ..] if b.0.contains("/ranks/") => Some(format!("{}&with={}", a.0, b.0)),
        _ => None,
    };
    let html = RunPage {
        root: "../../",
        title: &v.title,
        version: VERSION,
        v: &v,
        charts: charts_of(b),
        has_timeline,
        timeline_link,
        side_by_side,
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
                let mut row = IndexRow::of(&r.bundle);
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
            .flat_map(|r| r.timelines.iter().cloned())
            .collect(),
    }
    .render()
    .map_err(render_err("the timeline page"))
}

/// What the compare page offers of a run: the run, and each rank of a multi-rank run whose
/// data was published (`<run>/ranks/<rank>`: a rank compares with any run or rank).
fn compare_picks(r: &SiteRun) -> Vec<(String, String)> {
    let mut picks = vec![(r.id.clone(), r.bundle.run_id.clone())];
    if r.bundle.ranks.is_some() {
        picks.extend(r.timelines.iter().map(|(id, _)| {
            let rank = id.rsplit('/').next().unwrap_or_default();
            (id.clone(), format!("{}/ranks/{rank}", r.bundle.run_id))
        }));
    }
    picks
}

pub fn compare_page(site_runs: &[SiteRun]) -> Result<String, SiteError> {
    let bundles: Vec<&Bundle> = site_runs.iter().map(|r| &r.bundle).collect();
    let comparison = Comparison::of(&bundles);
    let pairs = before_after::pairs(&bundles)
        .into_iter()
        .map(|(before, after)| {
            let target = bundles[after]
                .capture
                .as_ref()
                .map_or(String::new(), |c| c.target.clone());
            (
                format!("{target}: eager and optimized"),
                before_after::table(bundles[before], bundles[after]),
            )
        })
        .collect();
    ComparePage {
        root: "",
        title: "Compare runs",
        version: VERSION,
        runs: bundles.len(),
        dirs: site_runs.iter().flat_map(compare_picks).collect(),
        stages: comparison.stages_table(),
        efficiency: comparison.efficiency_table(),
        mix_share: comparison.mix_table(Norm::Share),
        mix_token: comparison.mix_table(Norm::PerToken),
        stages_chart: llmprof_charts::compare_stages(&comparison).map(Safe),
        mix_chart: llmprof_charts::compare_category_mix(&comparison).map(Safe),
        pairs,
    }
    .render()
    .map_err(render_err("the compare page"))
}
