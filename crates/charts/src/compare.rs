//! Charts comparing runs.

use llmprof_bundle::Category;
use llmprof_report::fmt::ms_label;
use llmprof_report::{palette, Comparison, Norm, RunSummary};
use plotters::style::RGBColor;

use crate::draw::{clean, ink_on, render, rgb, text_width, Align, Axis, Font, MUTED};
use crate::run::{
    cat_rgb, header, label_column, legend_place, LEGEND_MAX, LEGEND_Y, MAX_STAGES, NAME_CHARS,
};
use crate::WIDTH;

/// Most runs a comparison shows (the first ones given).
const MAX_RUNS: usize = 10;
/// Most runs [`compare_category_mix`] shows.
const MAX_MIX_RUNS: usize = 24;

fn run_color(i: usize) -> RGBColor {
    rgb(palette::run(i))
}

/// The run's label, else its id.
fn run_name(run: &RunSummary) -> String {
    clean(&run.title, NAME_CHARS)
}

/// Grouped bars: per top-level stage (the union over the runs, in order of first appearance),
/// the median wall time of one instance in each run, ms — the numbers of the compare page's
/// table. At most 10 runs and 24 stages (the longest); `None` when no run has a stage with time.
pub fn compare_stages(comparison: &Comparison) -> Option<String> {
    let all = &comparison.runs;
    let runs: Vec<&RunSummary> = all.iter().take(MAX_RUNS).collect();
    // wall[i][run], ms; stages without time in any run are left out.
    let (names, wall): (Vec<String>, Vec<Vec<Option<f64>>>) = comparison
        .stage_names(usize::MAX)
        .into_iter()
        .map(|n| {
            let row: Vec<Option<f64>> = runs
                .iter()
                .map(|r| r.stage_ns(&n).map(|ns| ns / 1e6))
                .collect();
            (n, row)
        })
        .filter(|(_, row)| row.iter().flatten().any(|&v| v > 0.0))
        .unzip();
    if names.is_empty() {
        return None;
    }
    let total = names.len();
    let mut rows: Vec<usize> = (0..names.len()).collect();
    let longest = |i: usize| {
        wall.get(i)
            .map_or(0.0, |row| row.iter().flatten().copied().fold(0.0, f64::max))
    };
    if rows.len() > MAX_STAGES {
        rows.sort_by(|a, b| longest(*b).total_cmp(&longest(*a)).then(a.cmp(b)));
        rows.truncate(MAX_STAGES);
        rows.sort();
    }
    let shown: Vec<String> = rows
        .iter()
        .map(|i| names.get(*i).cloned().unwrap_or_default())
        .collect();
    let (x0, labels) = label_column(&shown, 12);
    let axis = Axis::covering(rows.iter().map(|i| longest(*i)).fold(0.0, f64::max));

    let legend: Vec<(RGBColor, String)> = runs
        .iter()
        .enumerate()
        .map(|(r, run)| (run_color(r), run_name(run)))
        .collect();
    const BAR: i32 = 12;
    const GAP: i32 = 2;
    let row_h = runs.len() as i32 * (BAR + GAP) + 14;
    let x1 = WIDTH as i32 - 100;
    let (lx, top) = legend_place(&legend, x0);
    let y_end = top + row_h * rows.len() as i32;
    let height = (y_end + 34) as u32;
    let mut subtitle = format!(
        "Median wall time of one stage instance in {} run{}",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" }
    );
    if all.len() > runs.len() {
        subtitle = format!("{subtitle}; the first {MAX_RUNS} of {} runs", all.len());
    }
    if total > rows.len() {
        subtitle = format!("{subtitle}; {} of {total} stages, the longest", rows.len());
    }
    render(WIDTH, height, |p| {
        header(p, "Stage time by run", &subtitle)?;
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
                    Some(t) => {
                        let t = *t;
                        let bx = axis.px(t, x0, x1);
                        p.rect(x0, by, bx.max(x0 + 1), by + BAR, run_color(r))?;
                        p.bar_value(&ms_label(t), bx, by + BAR / 2, 10, run_color(r))?;
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

/// Per run, the share of kernel time in the measured stages by category, as a stacked 100 %
/// bar — the compare page's share table; legend = categories. At most 24 runs; `None` when no
/// run has kernel time there.
pub fn compare_category_mix(comparison: &Comparison) -> Option<String> {
    let all = &comparison.runs;
    let runs: Vec<(String, Vec<(Category, f64)>)> = all
        .iter()
        .take(MAX_MIX_RUNS)
        .map(|r| (run_name(r), r.mix_values(Norm::Share).unwrap_or_default()))
        .collect();
    if runs.iter().all(|r| r.1.is_empty()) {
        return None;
    }
    let present = |c: Category| {
        runs.iter()
            .any(|(_, m)| m.iter().any(|&(mc, v)| mc == c && v > 0.0))
    };
    let legend: Vec<(RGBColor, String)> = Category::ALL
        .iter()
        .filter(|c| present(**c))
        .map(|c| (cat_rgb(*c), c.as_str().to_string()))
        .collect();

    const ROW: i32 = 30;
    let names: Vec<String> = runs.iter().map(|r| r.0.clone()).collect();
    let (x0, names) = label_column(&names, 12);
    let x1 = WIDTH as i32 - 24;
    let (lx, top) = legend_place(&legend, x0);
    let y_end = top + ROW * runs.len() as i32;
    let height = (y_end + 34) as u32;
    let axis = Axis::fixed(100.0, 20.0);
    let mut subtitle = format!("{} (memcpy and memset excluded)", Norm::Share.title());
    if all.len() > runs.len() {
        subtitle = format!("{subtitle}; the first {MAX_MIX_RUNS} of {} runs", all.len());
    }
    render(WIDTH, height, |p| {
        header(p, "Kernel category mix by run", &subtitle)?;
        p.legend(&legend, lx, LEGEND_Y, LEGEND_MAX)?;
        p.x_axis(&axis, x0, x1, top, y_end, "%")?;
        for (i, ((_, shares), name)) in runs.iter().zip(&names).enumerate() {
            let y = top + ROW * i as i32;
            let mid = y + ROW / 2;
            p.text(name, x0 - 10, mid, Font::new(12).align(Align::Right))?;
            if shares.is_empty() {
                p.text("no kernel time", x0 + 6, mid, Font::new(10).color(MUTED))?;
                continue;
            }
            // Segment ends from the cumulative sum, so rounding never leaves gaps.
            let mut cum = 0.0;
            for &(c, pct) in shares.iter().filter(|s| s.1 > 0.0) {
                let start = axis.px(cum, x0, x1);
                cum += pct;
                let end = axis.px(cum, x0, x1);
                let color = cat_rgb(c);
                p.rect(start, mid - 10, end, mid + 10, color)?;
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
