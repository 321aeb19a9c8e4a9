//! The cross-run comparison: per-stage time, MFU/MBU, tokens/s and the kernel-category mix
//! of two or more runs, drawn with plotters on any backend — the canvas on screen (and for
//! PNG export), SVG for export — so both exports show exactly what is on screen.
//!
//! Every number is the report crate's ([`RunSummary`], the compare page's tables use the same),
//! and the formula is in the chart title or the page's note: nothing is drawn for a value a run
//! does not have.

use llmprof_bundle::Category;
use llmprof_report::compare::{DECODE_TPS, EFFICIENCY, PREFILL_TPS};
use llmprof_report::fmt::compact;
use llmprof_report::palette::{self, Rgb};
pub use llmprof_report::{Comparison, Norm, RunSummary};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::model::color_of;

/// Most stages the stage chart shows (the first ones).
const MAX_STAGES: usize = 8;

/// The chart title of the stage times.
pub const STAGES_TITLE: &str = "Median wall time per stage instance (ms)";
/// The chart title of MFU and MBU.
pub const EFFICIENCY_TITLE: &str = "MFU / MBU over stage wall time (%)";

fn run_color(i: usize) -> RGBColor {
    hex(palette::run(i))
}

/// A palette colour for plotters.
pub fn hex(s: &str) -> RGBColor {
    let Rgb(r, g, b) = palette::rgb(s);
    RGBColor(r, g, b)
}

/// Size of the comparison figure for `runs` runs, CSS pixels.
pub fn figure_size(runs: usize) -> (u32, u32) {
    (1100, 820 + 22 * runs.saturating_sub(2) as u32)
}

type DrawResult = Result<(), String>;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// Draws the comparison of `runs` on `root`; returns notes on values a run lacks.
///
/// `s` scales text, margins and the legend (the device-pixel ratio on a high-DPI canvas; 1
/// for SVG).
pub fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    runs: &[RunSummary],
    norm: Norm,
    s: f64,
) -> Result<Vec<String>, String> {
    let px = |v: f64| (v * s).round() as i32;
    root.fill(&WHITE).map_err(err)?;
    let mut notes = Vec::new();
    if runs.is_empty() {
        root.draw(&Text::new(
            "Pick two or more runs to compare.",
            (px(20.0), px(30.0)),
            ("sans-serif", 16.0 * s).into_font(),
        ))
        .map_err(err)?;
        return Ok(notes);
    }
    let (w, h) = root.dim_in_pixel();
    // Legend of runs on top.
    let legend_h = px(14.0 + 20.0 * runs.len() as f64) as u32;
    for (i, r) in runs.iter().enumerate() {
        let y = px(10.0 + 20.0 * i as f64);
        root.draw(&Rectangle::new(
            [(px(12.0), y + px(2.0)), (px(24.0), y + px(14.0))],
            run_color(i).filled(),
        ))
        .map_err(err)?;
        root.draw(&Text::new(
            format!("{} ({})", r.title, r.id),
            (px(30.0), y + px(2.0)),
            ("sans-serif", 13.0 * s).into_font(),
        ))
        .map_err(err)?;
    }
    let body = root
        .clone()
        .shrink((0, legend_h), (w, h.saturating_sub(legend_h)));
    let rows = body.split_evenly((3, 1));
    let top = rows[0].split_evenly((1, 2));
    let mid = rows[1].split_evenly((1, 2));

    // The compare page's numbers: one comparison of the picked runs.
    let comparison = Comparison {
        runs: runs.to_vec(),
    };
    let stage_names = comparison.stage_names(MAX_STAGES);
    let stage_values: Vec<Vec<Option<f64>>> = runs
        .iter()
        .map(|r| {
            stage_names
                .iter()
                .map(|n| r.stage_ns(n).map(|ns| ns / 1e6))
                .collect()
        })
        .collect();
    grouped_bars(&top[0], STAGES_TITLE, &stage_names, &stage_values, s)?;

    let groups: Vec<String> = EFFICIENCY.iter().map(|m| m.short.to_string()).collect();
    let eff: Vec<Vec<Option<f64>>> = runs
        .iter()
        .map(|r| EFFICIENCY.iter().map(|m| (m.value)(r)).collect())
        .collect();
    grouped_bars(&top[1], EFFICIENCY_TITLE, &groups, &eff, s)?;
    for (area, m) in [(&mid[0], DECODE_TPS), (&mid[1], PREFILL_TPS)] {
        let values: Vec<Vec<Option<f64>>> = runs.iter().map(|r| vec![(m.value)(r)]).collect();
        grouped_bars(area, m.label, &[m.short.to_string()], &values, s)?;
    }
    for r in runs {
        if r.decode_tokens_per_s.is_none() {
            notes.push(format!("{}: decode tokens/s unknown", r.title));
        }
    }

    // Category mix, stacked per run.
    let mut mixes: Vec<(usize, Vec<(Category, f64)>)> = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        match r.mix_values(norm) {
            Ok(m) => mixes.push((i, m)),
            Err(e) => notes.push(e),
        }
    }
    stacked_mix(&rows[2], norm.title(), runs, &mixes, s)?;
    root.present().map_err(err)?;
    Ok(notes)
}

fn grouped_bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    groups: &[String],
    values: &[Vec<Option<f64>>],
    s: f64,
) -> DrawResult {
    let px = |v: f64| (v * s).round() as u32;
    let max = values
        .iter()
        .flatten()
        .flatten()
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let ymax = if max > 0.0 {
        (max * 1.15).min(f64::MAX)
    } else {
        1.0
    };
    let n = groups.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 14.0 * s))
        .margin(px(10.0))
        .x_label_area_size(px(22.0))
        .y_label_area_size(px(56.0))
        .build_cartesian_2d(-0.5f64..(n - 0.5), 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_labels(5)
        .y_label_formatter(&|v| compact(*v))
        .label_style(("sans-serif", 11.0 * s))
        .draw()
        .map_err(err)?;
    let runs = values.len().max(1) as f64;
    let bar_w = 0.8 / runs;
    for (ri, vals) in values.iter().enumerate() {
        let color = run_color(ri);
        chart
            .draw_series(vals.iter().enumerate().filter_map(|(gi, v)| {
                let v = (*v)?;
                let x0 = gi as f64 - 0.4 + ri as f64 * bar_w;
                Some(Rectangle::new(
                    [(x0, 0.0), (x0 + bar_w * 0.92, v)],
                    color.filled(),
                ))
            }))
            .map_err(err)?;
        chart
            .draw_series(vals.iter().enumerate().filter_map(|(gi, v)| {
                let v = (*v)?;
                let x = gi as f64 - 0.4 + (ri as f64 + 0.5) * bar_w;
                let label = compact(v);
                Some(Text::new(
                    label,
                    (x, v),
                    TextStyle::from(("sans-serif", 10.0 * s).into_font())
                        .pos(Pos::new(HPos::Center, VPos::Bottom)),
                ))
            }))
            .map_err(err)?;
    }
    for (gi, g) in groups.iter().enumerate() {
        let (px_, py) = chart.backend_coord(&(gi as f64, 0.0));
        let (ax, ay) = area.get_base_pixel();
        area.draw(&Text::new(
            g.clone(),
            (px_ - ax, py - ay + (6.0 * s) as i32),
            TextStyle::from(("sans-serif", 11.0 * s).into_font())
                .pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(err)?;
    }
    Ok(())
}

fn stacked_mix<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    runs: &[RunSummary],
    mixes: &[(usize, Vec<(Category, f64)>)],
    s: f64,
) -> DrawResult {
    let px = |v: f64| (v * s).round() as u32;
    let pxi = |v: f64| (v * s).round() as i32;
    let max = mixes
        .iter()
        .map(|(_, m)| m.iter().map(|x| x.1).sum::<f64>())
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let xmax = if max > 0.0 {
        (max * 1.05).min(f64::MAX)
    } else {
        1.0
    };
    let n = runs.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 14.0 * s))
        .margin(px(10.0))
        .x_label_area_size(px(40.0))
        .y_label_area_size(0)
        .build_cartesian_2d(0f64..xmax, -0.6f64..(n - 0.4))
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_labels(8)
        .x_label_formatter(&|v| compact(*v))
        .label_style(("sans-serif", 11.0 * s))
        .draw()
        .map_err(err)?;
    for (ri, m) in mixes {
        let y = (runs.len() - 1 - ri) as f64;
        let mut x = 0.0;
        let mut rects = Vec::new();
        for &(c, v) in m {
            if v > 0.0 {
                rects.push(Rectangle::new(
                    [(x, y - 0.3), (x + v, y + 0.3)],
                    hex(color_of(c)).filled(),
                ));
                x += v;
            }
        }
        chart.draw_series(rects).map_err(err)?;
        let label = format!("{} · {}", runs[*ri].title, compact(x));
        chart
            .draw_series(std::iter::once(Text::new(
                label,
                (xmax * 0.012, y + 0.32),
                TextStyle::from(("sans-serif", 11.0 * s).into_font())
                    .pos(Pos::new(HPos::Left, VPos::Bottom)),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(0.0, y - 0.38), (xmax * 0.006, y + 0.38)],
                run_color(*ri).filled(),
            )))
            .map_err(err)?;
    }
    // Category legend along the bottom.
    let (w, h) = area.dim_in_pixel();
    let mut x = pxi(12.0);
    for c in Category::ALL {
        if !mixes
            .iter()
            .any(|(_, m)| m.iter().any(|&(mc, v)| mc == c && v > 0.0))
        {
            continue;
        }
        if x > w as i32 - pxi(100.0) {
            break;
        }
        let base = h as i32;
        area.draw(&Rectangle::new(
            [(x, base - pxi(14.0)), (x + pxi(10.0), base - pxi(4.0))],
            hex(color_of(c)).filled(),
        ))
        .map_err(err)?;
        area.draw(&Text::new(
            c.as_str(),
            (x + pxi(14.0), base - pxi(15.0)),
            ("sans-serif", 11.0 * s).into_font(),
        ))
        .map_err(err)?;
        x += pxi(24.0 + 7.0 * c.as_str().len() as f64);
    }
    Ok(())
}

/// The comparison as a standalone SVG document.
pub fn svg(runs: &[RunSummary], norm: Norm) -> Result<String, String> {
    let (w, h) = figure_size(runs.len());
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (w, h)).into_drawing_area();
        draw(&root, runs, norm, 1.0)?;
    }
    Ok(out)
}
