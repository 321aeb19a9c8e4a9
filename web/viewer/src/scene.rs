//! One frame of the timeline, drawn through [`Painter`]: the canvas in the browser, a
//! recorder in tests. Rectangles are batched by colour so the browser sets a fill style a
//! few dozen times per frame, not once per kernel.

use std::collections::BTreeMap;

use crate::chunks::Chunked;
use crate::fmt;
use crate::lanes::{Lane, LaneKind, Layout};
use crate::lod::Item;
use crate::model::{Run, Target};
use crate::search::Matches;
use crate::viewport::Viewport;

/// Text alignment of [`Painter::text`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Center,
    Right,
}

/// The drawing operations a frame needs (CSS pixels).
pub trait Painter {
    /// Fills every rectangle `[x, y, w, h]` with `color` at opacity `alpha`.
    fn fill_rects(&mut self, color: &str, alpha: f64, rects: &[[f64; 4]]);
    fn stroke_rect(&mut self, rect: [f64; 4], color: &str, width: f64);
    /// Text vertically centred on `y`, cut to `max_w` pixels.
    fn text(&mut self, x: f64, y: f64, text: &str, color: &str, align: Align, max_w: f64);
    fn polyline(&mut self, points: &[(f64, f64)], color: &str, width: f64);
    /// Restricts drawing to a rectangle until [`Painter::unclip`].
    fn clip(&mut self, rect: [f64; 4]);
    fn unclip(&mut self);
}

/// Stage colours, by stage index.
const STAGE_COLORS: [&str; 8] = [
    "#8fb8de", "#f4b183", "#a9d18e", "#c9a0dc", "#ffd966", "#9dc3c1", "#f4a6a6", "#bfbfbf",
];

pub fn stage_color(stage: u32) -> &'static str {
    STAGE_COLORS[stage as usize % STAGE_COLORS.len()]
}

/// What a frame shows besides the run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Overlay<'a> {
    pub matches: Option<&'a Matches>,
    /// Per lane, prefix counts of matching items ([`crate::search::lane_match_counts`]).
    pub lane_matches: Option<&'a [Vec<u32>]>,
    pub hover: Option<Target>,
    pub pinned: Option<Target>,
    pub selection: Option<(u64, u64)>,
    /// A range being dragged, in ns.
    pub dragging: Option<(f64, f64)>,
}

/// Rectangles grouped by (colour, opacity step).
#[derive(Debug, Default)]
struct Batches<'c> {
    by: BTreeMap<(&'c str, u8), Vec<[f64; 4]>>,
}

impl<'c> Batches<'c> {
    fn add(&mut self, color: &'c str, alpha: f64, r: [f64; 4]) {
        let step = (alpha.clamp(0.0, 1.0) * 10.0).round() as u8;
        self.by.entry((color, step)).or_default().push(r);
    }
    fn flush(&mut self, p: &mut dyn Painter) {
        for ((color, step), rects) in std::mem::take(&mut self.by) {
            p.fill_rects(color, step as f64 / 10.0, &rects);
        }
    }
}

/// Draws the frame: axis, lane labels, lanes, selection, hover and pin outlines.
pub fn draw(
    run: &Run,
    layout: &Layout,
    vp: &Viewport,
    ov: &Overlay<'_>,
    width: f64,
    p: &mut dyn Painter,
) {
    let mut frame = Frame {
        run,
        layout,
        vp,
        ov,
        plot_x: layout.geometry.label_w,
        batches: Batches::default(),
        items: Vec::new(),
    };
    p.fill_rects("#ffffff", 1.0, &[[0.0, 0.0, width, layout.height]]);
    frame.time_axis(p);
    for (li, lane) in run.lanes.iter().enumerate() {
        frame.lane(li, lane, p);
    }
    frame.overlay(p);
}

/// One frame being drawn: what it shows, where, and the buffers its lanes reuse.
struct Frame<'a> {
    run: &'a Run,
    layout: &'a Layout,
    vp: &'a Viewport,
    ov: &'a Overlay<'a>,
    /// Left edge of the plot, right of the lane labels.
    plot_x: f64,
    batches: Batches<'static>,
    /// The visible items of the lane at hand.
    items: Vec<Item>,
}

impl Frame<'_> {
    /// Ticks at a round step (at most 200): grid lines down the lanes and time labels on top.
    fn time_axis(&self, p: &mut dyn Painter) {
        let (g, vp, plot_x) = (self.layout.geometry, self.vp, self.plot_x);
        let step = fmt::tick_step(vp.span(), (vp.width / 110.0).max(1.0));
        let mut t = (vp.t0 / step).ceil() * step;
        let mut ticks = Vec::new();
        while t <= vp.t1 && ticks.len() < 200 {
            ticks.push(t);
            t += step;
        }
        let grid: Vec<[f64; 4]> = ticks
            .iter()
            .map(|&t| {
                [
                    plot_x + vp.x_of(t),
                    g.axis_h - 6.0,
                    1.0,
                    self.layout.height - g.axis_h + 6.0,
                ]
            })
            .collect();
        p.fill_rects("#e3e6ea", 1.0, &grid);
        for &t in &ticks {
            p.text(
                plot_x + vp.x_of(t) + 3.0,
                g.axis_h / 2.0,
                &fmt::tick_label(t, step),
                "#555555",
                Align::Left,
                100.0,
            );
        }
    }

    /// Lane `li`: its label and background, then its counter line or its bars, clipped to
    /// the lane.
    fn lane(&mut self, li: usize, lane: &Lane, p: &mut dyn Painter) {
        let Some(&(top, h)) = self.layout.rows.get(li) else {
            return;
        };
        p.text(
            6.0,
            top + h / 2.0,
            &lane.label,
            "#333333",
            Align::Left,
            self.layout.geometry.label_w - 10.0,
        );
        self.batches
            .add("#f3f4f6", 1.0, [self.plot_x, top, self.vp.width, h]);
        self.batches.flush(p);
        p.clip([self.plot_x, top, self.vp.width, h]);
        let overview = self.run.overview_for(self.vp.t0, self.vp.t1);
        if let LaneKind::Counter(ci) = lane.kind {
            draw_counter(self.run, ci, self.vp, self.plot_x, top, h, p);
        } else if let (LaneKind::Stream(si), Some(c)) = (lane.kind, overview) {
            self.overview_bars(si, c, (top, h), p);
        } else {
            self.bars(li, lane, (top, h), p);
        }
        p.unclip();
    }

    /// A lane's visible spans and merged pixel columns, batched by colour, faded where the
    /// search does not match, and labelled where wider than 48 px.
    fn bars(&mut self, li: usize, lane: &Lane, (top, h): (f64, f64), p: &mut dyn Painter) {
        let (vp, plot_x) = (self.vp, self.plot_x);
        lane.index
            .visible(vp.t0, vp.t1, vp.width, 1.0, &mut self.items);
        let mut labels: Vec<(f64, f64, String)> = Vec::new();
        for it in &self.items {
            let (pos, x0, x1, alpha_scale, merged) = match *it {
                Item::Span { pos, x0, x1 } => (pos, x0, x1, 1.0, None),
                Item::Merged {
                    x0,
                    busy,
                    best,
                    first,
                    count,
                } => (best, x0, x0 + 1.0, 0.5 + 0.5 * busy, Some((first, count))),
            };
            let Some(target) = self.run.target(lane, pos) else {
                continue;
            };
            let (color, mut matched) = color_of(self.run, target, self.ov.matches);
            if let Some(any) = merged.and_then(|(first, count)| self.merged_match(li, first, count))
            {
                matched = any;
            }
            let alpha = if matched {
                alpha_scale
            } else {
                0.18 * alpha_scale
            };
            let (x0c, x1c) = (x0.max(-1.0), x1.min(vp.width + 1.0));
            self.batches.add(
                color,
                alpha,
                [plot_x + x0c, top + 1.0, (x1c - x0c).max(1.0), h - 2.0],
            );
            if x1c - x0c > 48.0 {
                labels.push((
                    plot_x + x0c + 3.0,
                    x1c - x0c - 6.0,
                    label_of(self.run, target),
                ));
            }
        }
        self.batches.flush(p);
        for (x, w, text) in labels {
            p.text(x, top + h / 2.0, &text, "#1a1a1a", Align::Left, w);
        }
    }

    /// A stream lane of a chunked timeline whose window is not loaded: one column per pixel
    /// from the overview's buckets, shaded by how busy they are and coloured by their longest
    /// kernel, as merged columns are.
    fn overview_bars(&mut self, si: u32, c: &Chunked, (top, h): (f64, f64), p: &mut dyn Painter) {
        let vp = self.vp;
        let mut x = 0.0;
        while x < vp.width {
            if let Some(b) = c.bucket(si, vp.t_of(x), vp.t_of(x + 1.0)) {
                if b.kernels > 0 || b.busy > 0.0 {
                    let row = b.longest.unwrap_or(u32::MAX) as usize;
                    let color = self.run.kernels.get(row).map_or("#9c9c9c", |k| k.color);
                    let matched = self
                        .ov
                        .matches
                        .is_none_or(|m| m.row.get(row).copied().unwrap_or(false));
                    let alpha = (0.5 + 0.5 * b.busy) * if matched { 1.0 } else { 0.18 };
                    self.batches
                        .add(color, alpha, [self.plot_x + x, top + 1.0, 1.0, h - 2.0]);
                }
            }
            x += 1.0;
        }
        self.batches.flush(p);
    }

    /// Whether any kernel of a merged column (`count` items of lane `li` from `first`)
    /// matches the search; `None` without a search or its counts.
    fn merged_match(&self, li: usize, first: u32, count: u32) -> Option<bool> {
        let counts = self.ov.lane_matches.and_then(|l| l.get(li))?;
        let (a, b) = (first as usize, first as usize + count as usize);
        let (x, y) = (counts.get(a)?, counts.get(b)?);
        Some(y > x)
    }

    /// Over the plot: the selected range, the range being dragged, and the outlines of the
    /// pinned and the hovered bar.
    fn overlay(&self, p: &mut dyn Painter) {
        let (g, ov, plot_x) = (self.layout.geometry, self.ov, self.plot_x);
        let height = self.layout.height;
        let plot = [plot_x, g.axis_h, self.vp.width, height - g.axis_h];
        p.clip(plot);
        let band = |a: f64, b: f64| {
            let (x0, x1) = (self.vp.x_of(a.min(b)), self.vp.x_of(a.max(b)));
            [plot_x + x0, g.axis_h, (x1 - x0).max(1.0), height - g.axis_h]
        };
        if let Some((a, b)) = ov.selection {
            p.fill_rects("#2f6fde", 0.12, &[band(a as f64, b as f64)]);
        }
        if let Some((a, b)) = ov.dragging {
            p.fill_rects("#2f6fde", 0.2, &[band(a, b)]);
        }
        for (target, color, w) in [(ov.pinned, "#d6336c", 2.5), (ov.hover, "#111111", 1.5)] {
            if let Some(target) = target {
                self.outline(target, color, w, p);
            }
        }
        p.unclip();
    }

    /// An outline around `target`'s bar in its lane.
    fn outline(&self, target: Target, color: &str, w: f64, p: &mut dyn Painter) {
        let Some(li) = lane_of(self.run, target) else {
            return;
        };
        let (top, h) = self.layout.rows[li];
        let (s, e) = self.run.span_of(target);
        let (x0, x1) = (self.vp.x_of(s as f64), self.vp.x_of(e as f64));
        p.stroke_rect(
            [self.plot_x + x0 - 1.0, top, (x1 - x0).max(1.0) + 2.0, h],
            color,
            w,
        );
    }
}

fn color_of(run: &Run, t: Target, matches: Option<&Matches>) -> (&'static str, bool) {
    match t {
        Target::Kernel(i) | Target::MemOp(i) => {
            let col = if matches!(t, Target::Kernel(_)) {
                &run.timeline.kernels.kernel
            } else {
                &run.timeline.mem_ops.kernel
            };
            let row = col.get(i as usize).copied().unwrap_or(0) as usize;
            let color = run.kernels.get(row).map_or("#9c9c9c", |k| k.color);
            let matched = matches.is_none_or(|m| m.row.get(row).copied().unwrap_or(false));
            (color, matched)
        }
        Target::Range(i) => {
            let s = run
                .timeline
                .ranges
                .stage
                .get(i as usize)
                .copied()
                .unwrap_or(0);
            // Search is over kernels: stages stay as they are.
            let slot = run.stages.get(s as usize).map_or(s, |st| st.color);
            (stage_color(slot), true)
        }
    }
}

/// The short text drawn inside a wide bar.
pub fn label_of(run: &Run, t: Target) -> String {
    match t {
        Target::Kernel(i) => run
            .timeline
            .kernels
            .kernel
            .get(i as usize)
            .and_then(|&k| run.kernels.get(k as usize))
            .map_or_else(String::new, |k| k.display.clone()),
        Target::MemOp(i) => run
            .timeline
            .mem_ops
            .kernel
            .get(i as usize)
            .and_then(|&k| run.kernels.get(k as usize))
            .map_or_else(String::new, |k| k.display.clone()),
        Target::Range(i) => run.range_name(i).to_string(),
    }
}

/// The lane that shows `t`: of the lanes of its kind, the one holding it (a lane's items are
/// positions in start order, so ascending; several ranks side by side have a stage lane per
/// depth and a memcpy lane each).
pub fn lane_of(run: &Run, t: Target) -> Option<usize> {
    run.lanes.iter().position(|l| {
        let i = match (l.kind, t) {
            (LaneKind::Stages { .. }, Target::Range(i))
            | (LaneKind::Stream(_), Target::Kernel(i))
            | (LaneKind::MemOps, Target::MemOp(i)) => i,
            _ => return false,
        };
        l.items.binary_search(&i).is_ok()
    })
}

fn draw_counter(
    run: &Run,
    ci: usize,
    vp: &Viewport,
    plot_x: f64,
    top: f64,
    h: f64,
    p: &mut dyn Painter,
) {
    let Some(c) = run.counters.get(ci) else {
        return;
    };
    let lo = c.t.partition_point(|&t| t < vp.t0).saturating_sub(1);
    let hi = (c.t.partition_point(|&t| t <= vp.t1) + 1).min(c.t.len());
    let stride = ((hi - lo) as f64 / (vp.width * 2.0)).ceil().max(1.0) as usize;
    let pts: Vec<(f64, f64)> = (lo..hi)
        .step_by(stride)
        .map(|i| {
            let y = top + h - 2.0 - (c.v[i] / c.max).clamp(0.0, 1.0) * (h - 4.0);
            (plot_x + vp.x_of(c.t[i]), y)
        })
        .collect();
    p.polyline(&pts, "#3b6ea8", 1.5);
    p.text(
        plot_x + vp.width - 4.0,
        top + 8.0,
        &format!("max {:.0} {}", c.max, c.unit),
        "#666666",
        Align::Right,
        140.0,
    );
}
