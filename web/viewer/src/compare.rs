//! The cross-run comparison: per-stage time, MFU/MBU, tokens/s and the kernel-category mix
//! of two or more runs, drawn with plotters on any backend — the canvas on screen (and for
//! PNG export), SVG for export — so both exports show exactly what is on screen.
//!
//! Every number is read from the bundle or computed from bundle numbers, and the formula is
//! in the chart title or the note: nothing is drawn for a value a run does not have.

use llmprof_bundle::{Bundle, Category, OpKind, StageRole};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::model::color_of;

/// The numbers one run contributes.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    /// Which run this is to the page (the site's directory name; the run id by default).
    pub id: String,
    pub run_id: String,
    pub title: String,
    /// Top-level stages (warm-up excluded): name and median wall time per instance, ms.
    pub stages: Vec<(String, f64)>,
    /// MFU and MBU (%) of the first prefill and decode stages.
    pub prefill_mfu_mbu: (Option<f64>, Option<f64>),
    pub decode_mfu_mbu: (Option<f64>, Option<f64>),
    pub decode_tokens_per_s: Option<f64>,
    /// Prompt (plus image) tokens × batch over the median prefill wall time.
    pub prefill_tokens_per_s: Option<f64>,
    /// Kernel time by category, ns, inside the run's top-level stages (warm-up excluded;
    /// memcpy and memset excluded, as in the site's category table).
    pub mix: Vec<(Category, u64)>,
    /// Tokens the run processed: prompt (plus image) tokens per prefill instance and every
    /// generated token, × batch.
    pub tokens: Option<u64>,
    /// Forward steps: prefill instances plus decode steps.
    pub steps: Option<u64>,
}

/// How the category mix is normalised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Norm {
    /// µs of kernel time per processed token.
    PerToken,
    /// µs of kernel time per forward step.
    PerStep,
    /// % of the run's kernel time.
    Share,
}

impl Norm {
    pub fn parse(s: &str) -> Norm {
        match s {
            "step" => Norm::PerStep,
            "share" => Norm::Share,
            _ => Norm::PerToken,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Norm::PerToken => "token",
            Norm::PerStep => "step",
            Norm::Share => "share",
        }
    }
}

/// Colours of the runs (series), in order.
pub const RUN_COLORS: [&str; 6] = [
    "#2f6fde", "#e8590c", "#2b8a3e", "#ae3ec9", "#c92a2a", "#495057",
];

impl RunSummary {
    pub fn from_bundle(b: &Bundle) -> RunSummary {
        let stages: Vec<(String, f64)> = b
            .stages
            .iter()
            .filter(|s| s.depth == 0 && !llmprof_bundle::is_warmup(&s.name))
            .map(|s| (s.name.clone(), s.wall.median_ns / 1e6))
            .collect();
        let a = b.analysis.as_ref();
        let role_metrics = |role: StageRole| {
            a.and_then(|a| a.stages.iter().find(|s| s.role == role))
                .map_or((None, None), |s| {
                    (s.mfu.map(|v| v * 100.0), s.mbu.map(|v| v * 100.0))
                })
        };
        let w = b.workload.as_ref();
        let batch = w.map_or(1, |w| w.batch());
        let context = w.and_then(|w| w.context_before_decode());
        let prefill_stage = b
            .stages
            .iter()
            .find(|s| StageRole::of_name(&s.name) == StageRole::Prefill);
        let prefill_tokens_per_s = match (context, prefill_stage) {
            (Some(c), Some(s)) if s.wall.median_ns > 0.0 => {
                Some((c * batch) as f64 / (s.wall.median_ns / 1e9))
            }
            _ => None,
        };
        let generated = a.and_then(|a| a.run.generated_tokens);
        let prefills = prefill_stage.map(|s| s.instances);
        let tokens = match (context, prefills, generated) {
            (Some(c), Some(p), Some(g)) => c
                .checked_mul(batch)
                .and_then(|x| x.checked_mul(p))
                .and_then(|x| x.checked_add(g)),
            _ => None,
        };
        let decode_steps: Option<u64> = w
            .and_then(|w| w.decode_steps.as_ref())
            .and_then(|d| d.value.iter().try_fold(0u64, |a, &x| a.checked_add(x)));
        let steps = match (prefills, decode_steps) {
            (Some(p), Some(d)) => p.checked_add(d),
            _ => None,
        };
        // Kernel time inside the measured top-level stages only, so warm-up passes, model
        // loading and work outside every stage do not inflate the per-token figures.
        let measured: Vec<u32> = b
            .stages
            .iter()
            .filter(|s| s.depth == 0 && !llmprof_bundle::is_warmup(&s.name))
            .map(|s| s.id)
            .collect();
        let mix = Category::ALL
            .iter()
            .map(|&c| {
                let ns = b
                    .kernels
                    .iter()
                    .filter(|k| k.kind == OpKind::Kernel && k.category == c)
                    .flat_map(|k| k.by_stage.iter())
                    .filter(|bs| measured.contains(&bs.stage))
                    .fold(0u64, |a, bs| a.saturating_add(bs.total_ns));
                (c, ns)
            })
            .collect();
        RunSummary {
            id: b.run_id.clone(),
            run_id: b.run_id.clone(),
            title: b.label.clone().unwrap_or_else(|| b.run_id.clone()),
            stages,
            prefill_mfu_mbu: role_metrics(StageRole::Prefill),
            decode_mfu_mbu: role_metrics(StageRole::Decode),
            decode_tokens_per_s: a.and_then(|a| a.run.decode_tokens_per_s),
            prefill_tokens_per_s,
            mix,
            tokens,
            steps,
        }
    }

    /// The category mix under `norm`, or why it cannot be computed.
    pub fn mix_values(&self, norm: Norm) -> Result<Vec<(Category, f64)>, String> {
        let total: u64 = self.mix.iter().fold(0u64, |a, m| a.saturating_add(m.1));
        let div = match norm {
            Norm::PerToken => self
                .tokens
                .filter(|&t| t > 0)
                .map(|t| t as f64 * 1e3)
                .ok_or_else(|| format!("{}: token count unknown", self.title))?,
            Norm::PerStep => self
                .steps
                .filter(|&s| s > 0)
                .map(|s| s as f64 * 1e3)
                .ok_or_else(|| format!("{}: step count unknown", self.title))?,
            Norm::Share if total > 0 => total as f64 / 100.0,
            Norm::Share => return Err(format!("{}: no kernels", self.title)),
        };
        Ok(self
            .mix
            .iter()
            .map(|&(c, ns)| (c, ns as f64 / div))
            .collect())
    }
}

fn run_color(i: usize) -> RGBColor {
    hex(RUN_COLORS[i % RUN_COLORS.len()])
}

/// `#rrggbb` to a colour (grey for anything else).
pub fn hex(s: &str) -> RGBColor {
    let p = |i: usize| {
        s.get(i..i + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .unwrap_or(128)
    };
    if s.len() == 7 && s.starts_with('#') {
        RGBColor(p(1), p(3), p(5))
    } else {
        RGBColor(128, 128, 128)
    }
}

/// Size of the comparison figure for `runs` runs, CSS pixels.
pub fn figure_size(runs: usize) -> (u32, u32) {
    (1100, 820 + 22 * runs.saturating_sub(2) as u32)
}

type DrawResult = Result<(), String>;

/// Axis and bar numbers: no trailing `.0` on large values.
fn axis_number(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

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

    // Per-stage median wall time.
    let mut stage_names: Vec<String> = Vec::new();
    for r in runs {
        for (n, _) in &r.stages {
            if !stage_names.contains(n) && stage_names.len() < 8 {
                stage_names.push(n.clone());
            }
        }
    }
    let stage_values: Vec<Vec<Option<f64>>> = runs
        .iter()
        .map(|r| {
            stage_names
                .iter()
                .map(|n| r.stages.iter().find(|(m, _)| m == n).map(|s| s.1))
                .collect()
        })
        .collect();
    grouped_bars(
        &top[0],
        "Median wall time per stage instance (ms)",
        &stage_names,
        &stage_values,
        s,
    )?;

    let groups: Vec<String> = ["prefill MFU", "prefill MBU", "decode MFU", "decode MBU"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let eff: Vec<Vec<Option<f64>>> = runs
        .iter()
        .map(|r| {
            vec![
                r.prefill_mfu_mbu.0,
                r.prefill_mfu_mbu.1,
                r.decode_mfu_mbu.0,
                r.decode_mfu_mbu.1,
            ]
        })
        .collect();
    grouped_bars(
        &top[1],
        "MFU / MBU over stage wall time (%)",
        &groups,
        &eff,
        s,
    )?;

    let one = |f: fn(&RunSummary) -> Option<f64>| -> Vec<Vec<Option<f64>>> {
        runs.iter().map(|r| vec![f(r)]).collect()
    };
    grouped_bars(
        &mid[0],
        "Decode tokens/s",
        &["decode".to_string()],
        &one(|r| r.decode_tokens_per_s),
        s,
    )?;
    grouped_bars(
        &mid[1],
        "Prefill tokens/s (prompt tokens × batch / median prefill wall)",
        &["prefill".to_string()],
        &one(|r| r.prefill_tokens_per_s),
        s,
    )?;
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
    let title = match norm {
        Norm::PerToken => {
            "Kernel time in the measured stages by category, per processed token (µs)"
        }
        Norm::PerStep => "Kernel time in the measured stages by category, per forward step (µs)",
        Norm::Share => "Kernel time in the measured stages by category (%)",
    };
    stacked_mix(&rows[2], title, runs, &mixes, s)?;
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
        .y_label_formatter(&|v| axis_number(*v))
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
                let label = axis_number(v);
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
        .x_label_formatter(&|v| axis_number(*v))
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
        let label = format!("{} · {}", runs[*ri].title, axis_number(x));
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
