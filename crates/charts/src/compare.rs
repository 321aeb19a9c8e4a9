//! Charts comparing runs.

use llmprof_bundle::{Bundle, Category};
use plotters::style::RGBColor;

use crate::draw::{clean, fmt_ms, ink_on, ms, render, rgb, text_width, Align, Axis, Font, MUTED};
use crate::run::{
    cat_rgb, header, kernel_time_by_category, label_column, legend_place, CategoryTimes,
    LEGEND_MAX, LEGEND_Y, MAX_STAGES, NAME_CHARS,
};
use crate::WIDTH;

/// Most runs a comparison shows (the first ones given).
const MAX_RUNS: usize = 10;
/// Most runs [`compare_category_mix`] shows.
const MAX_MIX_RUNS: usize = 24;

/// Colours of runs, in order (Tableau 10).
const RUN_COLORS: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

fn run_color(i: usize) -> RGBColor {
    rgb(RUN_COLORS
        .get(i % RUN_COLORS.len())
        .copied()
        .unwrap_or("#888888"))
}

/// The run's label, else its id.
fn run_name(bundle: &Bundle) -> String {
    let label = bundle.label.as_deref().map(|l| clean(l, NAME_CHARS));
    match label {
        Some(l) if !l.is_empty() => l,
        _ => clean(&bundle.run_id, NAME_CHARS),
    }
}

/// Grouped bars: per stage name (the union over the runs, in order of first appearance), the
/// wall time of each run in ms. Stages of one run with the same name (in different NVTX
/// domains) are added up. At most 10 runs and 24 stages (the longest); `None` when no run has a
/// stage with wall time.
pub fn compare_stages(bundles: &[&Bundle]) -> Option<String> {
    let runs: Vec<&Bundle> = bundles.iter().take(MAX_RUNS).copied().collect();
    // names[i] and wall[i][run].
    let mut names: Vec<&str> = Vec::new();
    let mut wall: Vec<Vec<Option<u64>>> = Vec::new();
    for (r, bundle) in runs.iter().enumerate() {
        for stage in bundle.stages.iter().filter(|s| s.wall_ns > 0) {
            let i = match names.iter().position(|n| *n == stage.name) {
                Some(i) => i,
                None => {
                    names.push(&stage.name);
                    wall.push(vec![None; runs.len()]);
                    names.len() - 1
                }
            };
            if let Some(cell) = wall.get_mut(i).and_then(|row| row.get_mut(r)) {
                *cell = Some(cell.unwrap_or(0).saturating_add(stage.wall_ns));
            }
        }
    }
    if names.is_empty() {
        return None;
    }
    let total = names.len();
    let mut rows: Vec<usize> = (0..names.len()).collect();
    let longest = |i: usize| {
        wall.get(i)
            .map_or(0, |row| row.iter().flatten().copied().max().unwrap_or(0))
    };
    if rows.len() > MAX_STAGES {
        rows.sort_by(|a, b| longest(*b).cmp(&longest(*a)).then(a.cmp(b)));
        rows.truncate(MAX_STAGES);
        rows.sort();
    }
    let shown: Vec<String> = rows
        .iter()
        .map(|i| names.get(*i).copied().unwrap_or("").to_string())
        .collect();
    let (x0, labels) = label_column(&shown, 12);
    let axis = Axis::covering(rows.iter().map(|i| ms(longest(*i))).fold(0.0, f64::max));

    let legend: Vec<(RGBColor, String)> = runs
        .iter()
        .enumerate()
        .map(|(r, b)| (run_color(r), run_name(b)))
        .collect();
    const BAR: i32 = 12;
    const GAP: i32 = 2;
    let row_h = runs.len() as i32 * (BAR + GAP) + 14;
    let x1 = WIDTH as i32 - 100;
    let (lx, top) = legend_place(&legend, x0);
    let y_end = top + row_h * rows.len() as i32;
    let height = (y_end + 34) as u32;
    let mut subtitle = format!(
        "Wall time per stage (summed over instances) in {} run{}",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" }
    );
    if bundles.len() > runs.len() {
        subtitle = format!("{subtitle}; the first {MAX_RUNS} of {} runs", bundles.len());
    }
    if total > rows.len() {
        subtitle = format!("{subtitle}; {} of {total} stages, the longest", rows.len());
    }
    render(WIDTH, height, |p| {
        header(p, "Stage wall time by run", &subtitle)?;
        p.legend(&legend, lx, LEGEND_Y, LEGEND_MAX)?;
        p.x_axis(&axis, x0, x1, top, y_end, "")?;
        p.text("ms", x1 + 18, y_end + 12, Font::new(10).color(MUTED))?;
        for (row, (i, label)) in rows.iter().zip(&labels).enumerate() {
            let y = top + row_h * row as i32 + 7;
            p.text(
                label,
                x0 - 10,
                y + (row_h - 14) / 2,
                Font::new(12).align(Align::Right),
            )?;
            let cells = wall.get(*i).map(Vec::as_slice).unwrap_or(&[]);
            for (r, cell) in cells.iter().enumerate() {
                let by = y + r as i32 * (BAR + GAP);
                match cell {
                    Some(ns) => {
                        let t = ms(*ns);
                        let bx = axis.px(t, x0, x1);
                        p.rect(x0, by, bx.max(x0 + 1), by + BAR, run_color(r))?;
                        p.bar_value(&fmt_ms(t), bx, by + BAR / 2, 10, run_color(r))?;
                    }
                    None => {
                        p.text(
                            "not in this run",
                            x0 + 5,
                            by + BAR / 2,
                            Font::new(10).color(MUTED),
                        )?;
                    }
                }
            }
        }
        Ok(())
    })
}

/// Per run, the share of kernel GPU time by category as a stacked 100 % bar; legend =
/// categories. At most 24 runs; `None` when no run has kernel time.
pub fn compare_category_mix(bundles: &[&Bundle]) -> Option<String> {
    let runs: Vec<(String, CategoryTimes, u64)> = bundles
        .iter()
        .take(MAX_MIX_RUNS)
        .map(|b| {
            let (by_cat, total) = kernel_time_by_category(b);
            (run_name(b), by_cat, total)
        })
        .collect();
    if runs.iter().all(|r| r.2 == 0) {
        return None;
    }
    let mut present = [false; 8];
    for (_, by_cat, _) in &runs {
        for (seen, (ns, _)) in present.iter_mut().zip(by_cat) {
            *seen |= *ns > 0;
        }
    }
    let legend: Vec<(RGBColor, String)> = Category::ALL
        .iter()
        .zip(present)
        .filter(|(_, p)| *p)
        .map(|(c, _)| (cat_rgb(*c), c.as_str().to_string()))
        .collect();

    const ROW: i32 = 30;
    let names: Vec<String> = runs.iter().map(|r| r.0.clone()).collect();
    let (x0, names) = label_column(&names, 12);
    let x1 = WIDTH as i32 - 24;
    let (lx, top) = legend_place(&legend, x0);
    let y_end = top + ROW * runs.len() as i32;
    let height = (y_end + 34) as u32;
    let axis = Axis::fixed(100.0, 20.0);
    let mut subtitle =
        "Share of kernel GPU time by category per run (memcpy and memset excluded)".to_string();
    if bundles.len() > runs.len() {
        subtitle = format!(
            "{subtitle}; the first {MAX_MIX_RUNS} of {} runs",
            bundles.len()
        );
    }
    render(WIDTH, height, |p| {
        header(p, "Kernel category mix by run", &subtitle)?;
        p.legend(&legend, lx, LEGEND_Y, LEGEND_MAX)?;
        p.x_axis(&axis, x0, x1, top, y_end, "%")?;
        for (i, ((_, by_cat, total), name)) in runs.iter().zip(&names).enumerate() {
            let y = top + ROW * i as i32;
            let mid = y + ROW / 2;
            p.text(name, x0 - 10, mid, Font::new(12).align(Align::Right))?;
            if *total == 0 {
                p.text("no kernel time", x0 + 6, mid, Font::new(10).color(MUTED))?;
                continue;
            }
            // Segment ends from the cumulative sum, so rounding never leaves gaps.
            let mut cum = 0u64;
            for (c, (ns, _)) in Category::ALL.iter().zip(by_cat) {
                if *ns == 0 {
                    continue;
                }
                let start = axis.px(cum as f64 / *total as f64 * 100.0, x0, x1);
                cum = cum.saturating_add(*ns);
                let end = axis.px(cum as f64 / *total as f64 * 100.0, x0, x1);
                let color = cat_rgb(*c);
                p.rect(start, mid - 10, end, mid + 10, color)?;
                let pct = *ns as f64 / *total as f64 * 100.0;
                let label = format!("{pct:.0}%");
                if end - start >= text_width(&label, 10) + 6 {
                    p.text(
                        &label,
                        (start + end) / 2,
                        mid,
                        Font::new(10).color(ink_on(color)).align(Align::Center),
                    )?;
                }
            }
        }
        Ok(())
    })
}
