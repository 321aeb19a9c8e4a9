//! The browser side: wasm-bindgen classes the page's bootstrap script drives. The script
//! forwards DOM events (pointer, wheel, keys) as plain numbers and shows the JSON this module
//! returns with `textContent`, so no input string ever becomes markup.

use plotters::prelude::IntoDrawingArea;
use plotters_canvas::CanvasBackend;
use serde::Serialize;
use wasm_bindgen::prelude::*;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement};

use crate::compare::{self, Norm, RunSummary};
use crate::details::describe;
use crate::fmt;
use crate::hash::ViewState;
use crate::hit::{bucket_at, counter_at, hit};
use crate::lanes::{Geometry, Layout};
use crate::measure::Measured;
use crate::model::{Run, Target};
use crate::range::range_stats;
use crate::ranks::{merge, RankRun};
use crate::scene::{self, Align, Overlay, Painter};
use crate::search::{lane_match_counts, search, Matches};
use crate::viewport::Viewport;

fn context_2d(canvas: &HtmlCanvasElement) -> Result<CanvasRenderingContext2d, JsError> {
    canvas
        .get_context("2d")
        .ok()
        .flatten()
        .and_then(|c| c.dyn_into::<CanvasRenderingContext2d>().ok())
        .ok_or_else(|| JsError::new("this browser gives no 2D canvas context"))
}

/// [`Painter`] on a 2D canvas whose transform maps CSS pixels to device pixels.
struct CanvasPainter<'a> {
    ctx: &'a CanvasRenderingContext2d,
}

impl CanvasPainter<'_> {
    /// `text` cut with an ellipsis to fit `max_w` pixels.
    fn fit(&self, text: &str, max_w: f64) -> Option<String> {
        let width = |s: &str| self.ctx.measure_text(s).map(|m| m.width()).unwrap_or(0.0);
        if width(text) <= max_w {
            return Some(text.to_string());
        }
        let chars: Vec<char> = text.chars().collect();
        let (mut lo, mut hi) = (0usize, chars.len());
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let s: String = chars[..mid].iter().collect::<String>() + "…";
            if width(&s) <= max_w {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        (lo > 0).then(|| chars[..lo].iter().collect::<String>() + "…")
    }
}

impl Painter for CanvasPainter<'_> {
    fn fill_rects(&mut self, color: &str, alpha: f64, rects: &[[f64; 4]]) {
        self.ctx.set_global_alpha(alpha);
        self.ctx.set_fill_style_str(color);
        for r in rects {
            self.ctx.fill_rect(r[0], r[1], r[2], r[3]);
        }
        self.ctx.set_global_alpha(1.0);
    }

    fn stroke_rect(&mut self, r: [f64; 4], color: &str, width: f64) {
        self.ctx.set_stroke_style_str(color);
        self.ctx.set_line_width(width);
        self.ctx.stroke_rect(r[0], r[1], r[2], r[3]);
    }

    fn text(&mut self, x: f64, y: f64, text: &str, color: &str, align: Align, max_w: f64) {
        self.ctx.set_font("12px system-ui, sans-serif");
        self.ctx.set_text_baseline("middle");
        self.ctx.set_text_align(match align {
            Align::Left => "left",
            Align::Center => "center",
            Align::Right => "right",
        });
        self.ctx.set_fill_style_str(color);
        if let Some(t) = self.fit(text, max_w) {
            let _ = self.ctx.fill_text(&t, x, y);
        }
    }

    fn polyline(&mut self, points: &[(f64, f64)], color: &str, width: f64) {
        let Some(&(x0, y0)) = points.first() else {
            return;
        };
        self.ctx.begin_path();
        self.ctx.move_to(x0, y0);
        for &(x, y) in &points[1..] {
            self.ctx.line_to(x, y);
        }
        self.ctx.set_stroke_style_str(color);
        self.ctx.set_line_width(width);
        self.ctx.stroke();
    }

    fn clip(&mut self, r: [f64; 4]) {
        self.ctx.save();
        self.ctx.begin_path();
        self.ctx.rect(r[0], r[1], r[2], r[3]);
        self.ctx.clip();
    }

    fn unclip(&mut self) {
        self.ctx.restore();
    }
}

#[derive(Serialize, Default)]
struct RangeJson {
    start: String,
    end: String,
    length: String,
    busy_pct: String,
    /// GPUs the busy % is the mean of (ranks side by side), 1 for one run.
    gpus: u32,
    ops: String,
    rows: Vec<[String; 4]>,
    /// Kernel names left out of `rows` (the table shows the 200 longest).
    more: usize,
    /// Why the range has no table (its kernels are not loaded), or `""`.
    note: String,
}

/// Rows of the range table shown.
const RANGE_ROWS: usize = 200;

/// The interactive kernel timeline of one run.
#[derive(Debug)]
#[wasm_bindgen]
pub struct TimelineView {
    /// The run's directory name in the site (what `#run=` and the run picker use).
    site_id: String,
    run: Run,
    layout: Layout,
    vp: Viewport,
    canvas: HtmlCanvasElement,
    ctx: CanvasRenderingContext2d,
    dpr: f64,
    css_width: f64,
    matches: Option<Matches>,
    lane_matches: Vec<Vec<u32>>,
    hover: Option<Target>,
    pinned: Option<Target>,
    selection: Option<(u64, u64)>,
    dragging: Option<(f64, f64)>,
    /// With other ranks beside the opened one: every rank shown (the opened one first);
    /// `run` is then their merge. Empty while one run is shown.
    ranks: Vec<RankRun>,
    /// The site id of each of `ranks`.
    rank_ids: Vec<String>,
    /// Where the opened run starts on the merged axis (0 while it is shown alone).
    shift: u64,
    /// How the ranks' clocks were aligned.
    clock: String,
    /// A link's pinned kernel (position in the whole timeline) whose chunk is not loaded yet.
    pin_wanted: Option<u64>,
}

#[wasm_bindgen]
impl TimelineView {
    /// Parses the run (`site_id` is its directory name in the site) and sizes the canvas to
    /// `css_width` CSS pixels at `dpr` device pixels per CSS pixel.
    #[wasm_bindgen(constructor)]
    pub fn new(
        canvas: HtmlCanvasElement,
        site_id: &str,
        bundle: &str,
        timeline: &str,
        css_width: f64,
        dpr: f64,
    ) -> Result<TimelineView, JsError> {
        let run = Run::from_json(bundle, timeline).map_err(|e| JsError::new(&e.0))?;
        TimelineView::with_run(canvas, site_id, run, css_width, dpr)
    }

    /// Opens a chunked timeline from its head (`timeline.js` of a run with more kernels than
    /// the site loads at once): the overview shows until [`TimelineView::use_chunks`] has
    /// the window's kernels.
    pub fn chunked(
        canvas: HtmlCanvasElement,
        site_id: &str,
        bundle: &str,
        head: &str,
        css_width: f64,
        dpr: f64,
    ) -> Result<TimelineView, JsError> {
        let run = Run::from_chunked_json(bundle, head).map_err(|e| JsError::new(&e.0))?;
        TimelineView::with_run(canvas, site_id, run, css_width, dpr)
    }

    /// Whether the run's kernels load in chunks.
    #[wasm_bindgen(getter)]
    pub fn is_chunked(&self) -> bool {
        self.run.chunked.is_some()
    }

    /// The chunks the window needs that are not decoded yet (load their scripts and pass each
    /// to [`TimelineView::add_chunk`]); empty when none are, or when the window holds more
    /// kernels than load at once.
    pub fn chunks_wanted(&self) -> Vec<u32> {
        let Some(c) = &self.run.chunked else {
            return Vec::new();
        };
        c.to_load(self.vp.t0, self.vp.t1)
            .map(|w| c.missing(&w).into_iter().map(|i| i as u32).collect())
            .unwrap_or_default()
    }

    /// Decodes chunk `i` from the base64 text of its script.
    pub fn add_chunk(&mut self, i: u32, base64_text: &str) -> Result<(), JsError> {
        use base64::Engine;
        let c = self
            .run
            .chunked
            .as_mut()
            .ok_or_else(|| JsError::new("this timeline is not chunked"))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(base64_text)
            .map_err(|e| JsError::new(&format!("kernel chunk {i} is not base64: {e}")))?;
        c.add(i as usize, &bytes).map_err(|e| JsError::new(&e.0))
    }

    /// Makes the window's chunks the run's kernels once all are decoded; whether the view
    /// changed (then draw it again). A chunk the run refuses is an error, and nothing changes.
    pub fn use_chunks(&mut self) -> Result<bool, JsError> {
        let Some(c) = &self.run.chunked else {
            return Ok(false);
        };
        let Some(want) = c.to_load(self.vp.t0, self.vp.t1) else {
            return Ok(false);
        };
        // The pin as a position in the whole timeline, read before the columns change.
        let global = match self.pinned {
            Some(Target::Kernel(i)) => Some(self.run.global_kernel(i)),
            _ => self.pin_wanted,
        };
        if !self.run.load_chunks(want).map_err(|e| JsError::new(&e.0))? {
            return Ok(false);
        }
        let local = global.and_then(|g| self.run.local_kernel(g));
        self.pin_wanted = global.filter(|_| local.is_none());
        self.pinned = match (local, self.pinned) {
            (Some(l), _) => Some(Target::Kernel(l)),
            (None, Some(Target::Kernel(_))) => None,
            (None, other) => other,
        };
        self.hover = None;
        if let Some(q) = self.matches.as_ref().map(|m| m.query.clone()) {
            self.search(&q);
        }
        // Every stream of the overview has its lane, so the layout stays; rebuilt all the same.
        self.layout = Layout::new(&self.run.lanes, Geometry::for_lanes(&self.run.lanes));
        self.resize(self.css_width, self.dpr);
        Ok(true)
    }

    /// What a chunked timeline shows of its kernels, for the page; `""` for one loaded whole.
    pub fn chunk_status(&self) -> String {
        let Some(c) = &self.run.chunked else {
            return String::new();
        };
        let (total, budget) = (fmt::thousands(c.total), fmt::thousands(c.budget));
        if self.run.overview_for(self.vp.t0, self.vp.t1).is_some() {
            let wanted = c.wanted(self.vp.t0, self.vp.t1).is_some();
            return if wanted {
                format!("Loading the kernels of this window (of {total})…")
            } else {
                format!(
                    "Streams drawn from an overview of {total} kernels: zoom in to a window of at \
                     most {budget} kernels to load and see each one"
                )
            };
        }
        let n = self.run.timeline.kernels.start.len() as u64;
        format!(
            "{} of {total} kernels loaded (chunks {}–{} of {})",
            fmt::thousands(n),
            c.loaded.start + 1,
            c.loaded.end,
            c.chunks.len()
        )
    }
}

impl TimelineView {
    fn with_run(
        canvas: HtmlCanvasElement,
        site_id: &str,
        run: Run,
        css_width: f64,
        dpr: f64,
    ) -> Result<TimelineView, JsError> {
        let ctx = context_2d(&canvas)?;
        let layout = Layout::new(&run.lanes, Geometry::for_lanes(&run.lanes));
        let plot_w = (css_width - layout.geometry.label_w).max(50.0);
        let vp = Viewport::new(run.timeline.end_ns, plot_w);
        let mut v = TimelineView {
            site_id: site_id.to_string(),
            run,
            layout,
            vp,
            canvas,
            ctx,
            dpr: 1.0,
            css_width,
            matches: None,
            lane_matches: Vec::new(),
            hover: None,
            pinned: None,
            selection: None,
            dragging: None,
            ranks: Vec::new(),
            rank_ids: Vec::new(),
            shift: 0,
            clock: String::new(),
            pin_wanted: None,
        };
        v.resize(css_width, dpr);
        Ok(v)
    }
}

#[wasm_bindgen]
impl TimelineView {
    /// Shows another rank of the same multi-rank run beside the ones shown (`site_id` is its
    /// site id, `<run>/ranks/<r>`): its lanes below theirs, on one time axis. Returns how the
    /// clocks were aligned. Fails, changing nothing, when either run is not a rank or its rank
    /// is already shown under another id.
    pub fn add_rank(
        &mut self,
        site_id: &str,
        bundle: &str,
        timeline: &str,
    ) -> Result<String, JsError> {
        if site_id == self.site_id || self.rank_ids.iter().any(|id| id == site_id) {
            return Ok(self.clock.clone());
        }
        let not_rank = |id: &str| JsError::new(&format!("{id} is not a rank of a multi-rank run"));
        if self.run.chunked.is_some() {
            return Err(JsError::new(
                "ranks are laid side by side only for timelines that load whole; this one is \
                 chunked (more kernels than the site loads at once)",
            ));
        }
        let run = Run::from_json(bundle, timeline).map_err(|e| JsError::new(&e.0))?;
        let rank = run.rank.ok_or_else(|| not_rank(site_id))?;
        let own = match self.ranks.first() {
            Some(r) => r.rank,
            None => self.run.rank.ok_or_else(|| not_rank(&self.site_id))?,
        };
        if rank == own || self.ranks.iter().any(|r| r.rank == rank) {
            return Err(JsError::new(&format!(
                "{site_id} is rank {rank}, which is already shown"
            )));
        }
        if self.ranks.is_empty() {
            // The opened run becomes the first rank (moved, not copied: the view shows the
            // merge from here on).
            let run = std::mem::take(&mut self.run);
            self.ranks.push(RankRun { rank: own, run });
            self.rank_ids.push(self.site_id.clone());
        }
        self.ranks.push(RankRun { rank, run });
        self.rank_ids.push(site_id.to_string());
        self.remerge();
        Ok(self.clock.clone())
    }

    /// Takes a rank added with [`TimelineView::add_rank`] off the view; `false` when it is
    /// not shown beside the opened run.
    pub fn remove_rank(&mut self, site_id: &str) -> bool {
        let Some(i) = self.rank_ids.iter().skip(1).position(|id| id == site_id) else {
            return false;
        };
        self.ranks.remove(i + 1);
        self.rank_ids.remove(i + 1);
        self.remerge();
        true
    }

    /// The site ids of the ranks shown beside the opened run, as a JSON array.
    pub fn ranks_beside(&self) -> String {
        serde_json::to_string(&self.rank_ids.get(1..).unwrap_or_default()).unwrap_or_default()
    }

    pub fn resize(&mut self, css_width: f64, dpr: f64) {
        self.css_width = css_width.max(200.0);
        self.dpr = if dpr.is_finite() && dpr > 0.0 {
            dpr.min(4.0)
        } else {
            1.0
        };
        self.vp
            .resize(self.css_width - self.layout.geometry.label_w);
        let h = self.layout.height;
        self.canvas
            .set_width((self.css_width * self.dpr).round() as u32);
        self.canvas.set_height((h * self.dpr).round() as u32);
        let style = self.canvas.style();
        let _ = style.set_property("width", &format!("{}px", self.css_width));
        let _ = style.set_property("height", &format!("{h}px"));
    }

    /// Draws the current view.
    pub fn render(&mut self) {
        let _ = self
            .ctx
            .set_transform(self.dpr, 0.0, 0.0, self.dpr, 0.0, 0.0);
        let ov = Overlay {
            matches: self.matches.as_ref(),
            lane_matches: self.matches.as_ref().map(|_| self.lane_matches.as_slice()),
            hover: self.hover,
            pinned: self.pinned,
            selection: self.selection,
            dragging: self.dragging,
        };
        let mut p = CanvasPainter { ctx: &self.ctx };
        scene::draw(
            &self.run,
            &self.layout,
            &self.vp,
            &ov,
            self.css_width,
            &mut p,
        );
    }

    #[wasm_bindgen(getter)]
    pub fn title(&self) -> String {
        self.run.title.clone()
    }

    /// One line about the run for the page header.
    pub fn summary(&self) -> String {
        let t = &self.run.timeline;
        let kernels = self
            .run
            .chunked
            .as_ref()
            .map_or(t.kernels.start.len() as u64, |c| c.total);
        let mut s = format!(
            "{} kernels, {} memcpy/memset, {} stage instances over {}",
            fmt::thousands(kernels),
            fmt::thousands(t.mem_ops.start.len() as u64),
            fmt::thousands(t.ranges.start.len() as u64),
            fmt::duration(t.end_ns as f64)
        );
        if !self.run.device.is_empty() {
            s.push_str(&format!(" on {}", self.run.device));
        }
        if !self.run.ranks.is_empty() {
            let ranks: Vec<String> = self.run.ranks.iter().map(|r| r.rank.to_string()).collect();
            s.push_str(&format!(
                "; ranks {} side by side, {}",
                ranks.join(", "),
                self.clock
            ));
        }
        if let Some(n) = &self.run.counters_note {
            s.push_str(". ");
            s.push_str(n);
        }
        s
    }

    /// Wheel at canvas x: zoom (positive `dy` zooms out).
    pub fn wheel_zoom(&mut self, x: f64, dy: f64) {
        let factor = (dy.clamp(-300.0, 300.0) / 300.0).exp();
        self.vp.zoom_at(x - self.layout.geometry.label_w, factor);
    }

    /// Zooms by `factor` around the middle (keys, buttons, pinch).
    pub fn zoom_by(&mut self, factor: f64, x: Option<f64>) {
        let at = x.map_or(self.vp.width / 2.0, |x| x - self.layout.geometry.label_w);
        self.vp.zoom_at(at, factor);
    }

    /// Pans by CSS pixels (positive moves later in time).
    pub fn pan(&mut self, dx: f64) {
        self.vp.pan_px(dx);
    }

    /// The whole run.
    pub fn reset(&mut self) {
        self.vp.set(0.0, self.run.timeline.end_ns as f64);
    }

    /// Whether canvas y is on the time axis (a drag there selects a range).
    pub fn on_axis(&self, y: f64) -> bool {
        y < self.layout.geometry.axis_h
    }

    /// Hover at canvas `(x, y)`: the tooltip as JSON `[[label, value], ...]`, or `""`.
    pub fn hover(&mut self, x: f64, y: f64) -> String {
        self.hover = hit(&self.run, &self.layout, &self.vp, x, y, 3.0).map(|h| h.1);
        match self.hover {
            Some(t) => serde_json::to_string(&describe(&self.run, t)).unwrap_or_default(),
            None => counter_at(&self.run, &self.layout, &self.vp, x, y, 3.0)
                .or_else(|| bucket_at(&self.run, &self.layout, &self.vp, x, y))
                .map(|lines| serde_json::to_string(&lines).unwrap_or_default())
                .unwrap_or_default(),
        }
    }

    pub fn leave(&mut self) {
        self.hover = None;
    }

    /// Click at `(x, y)`: a stage bar zooms to its instance; a kernel or memcpy is pinned (a
    /// second click on it unpins). Returns the pinned details JSON, or `""`.
    pub fn click(&mut self, x: f64, y: f64) -> String {
        match hit(&self.run, &self.layout, &self.vp, x, y, 3.0).map(|h| h.1) {
            Some(t @ Target::Range(_)) => {
                let (s, e) = self.run.span_of(t);
                let pad = e.saturating_sub(s) as f64 * 0.02;
                self.vp.set(s as f64 - pad, e as f64 + pad);
            }
            Some(t) => {
                self.pinned = if self.pinned == Some(t) {
                    None
                } else {
                    Some(t)
                };
            }
            None => {}
        }
        self.pinned_details()
    }

    /// Details of the pinned item as JSON, or `""`.
    pub fn pinned_details(&self) -> String {
        self.pinned
            .map(|t| serde_json::to_string(&describe(&self.run, t)).unwrap_or_default())
            .unwrap_or_default()
    }

    /// Keyboard inspection: pins the next (`dir` > 0) or previous kernel in time order — the
    /// first one at or after the middle of the view when none is pinned — and pans to keep it
    /// in view. Returns the pinned details JSON.
    pub fn step_pin(&mut self, dir: i32) -> String {
        let starts = &self.run.timeline.kernels.start;
        if starts.is_empty() {
            return String::new();
        }
        let last = starts.len() - 1;
        let next = match self.pinned {
            Some(Target::Kernel(i)) if dir > 0 => (i as usize + 1).min(last),
            Some(Target::Kernel(i)) => (i as usize).saturating_sub(1),
            _ => {
                let mid = self.vp.t_of(self.vp.width / 2.0).max(0.0) as u64;
                starts.partition_point(|&t| t < mid).min(last)
            }
        };
        self.pinned = Some(Target::Kernel(next as u32));
        let (s, e) = self.run.span_of(Target::Kernel(next as u32));
        if (s as f64) < self.vp.t0 || (e as f64) > self.vp.t1 {
            let half = self.vp.span() / 2.0;
            let mid = (s as f64 + e as f64) / 2.0;
            self.vp.set(mid - half, mid + half);
        }
        self.pinned_details()
    }

    pub fn unpin(&mut self) {
        self.pinned = None;
    }

    /// A range drag in progress between canvas x positions.
    pub fn drag_range(&mut self, x0: f64, x1: f64) {
        let lw = self.layout.geometry.label_w;
        self.dragging = Some((self.vp.t_of(x0 - lw), self.vp.t_of(x1 - lw)));
    }

    /// Ends a range drag: selects it and returns the range table JSON.
    pub fn select_range(&mut self, x0: f64, x1: f64) -> String {
        self.dragging = None;
        let lw = self.layout.geometry.label_w;
        let end = self.run.timeline.end_ns as f64;
        let a = self.vp.t_of(x0 - lw).clamp(0.0, end);
        let b = self.vp.t_of(x1 - lw).clamp(0.0, end);
        let (a, b) = (a.min(b) as u64, a.max(b) as u64);
        if b <= a {
            self.selection = None;
            return String::new();
        }
        self.selection = Some((a, b));
        self.range_json()
    }

    /// Selects the visible window (the keyboard's way to a range table).
    pub fn select_visible(&mut self) -> String {
        let end = self.run.timeline.end_ns as f64;
        let (a, b) = (self.vp.t0.clamp(0.0, end), self.vp.t1.clamp(0.0, end));
        if b <= a {
            return String::new();
        }
        self.selection = Some((a as u64, b as u64));
        self.range_json()
    }

    /// The selected range's table as JSON, or `""`.
    pub fn range_json(&self) -> String {
        let Some((a, b)) = self.selection else {
            return String::new();
        };
        if let Some(c) = self.run.overview_for(a as f64, b as f64) {
            return serde_json::to_string(&RangeJson {
                start: fmt::duration(a as f64),
                end: fmt::duration(b as f64),
                length: fmt::duration((b - a) as f64),
                note: format!(
                    "This range holds kernels that are not loaded: its table needs a range \
                     inside a window of at most {} kernels (zoom in, then select)",
                    fmt::thousands(c.budget)
                ),
                ..RangeJson::default()
            })
            .unwrap_or_default();
        }
        let st = range_stats(&self.run, a, b);
        let rows =
            st.rows
                .iter()
                .take(RANGE_ROWS)
                .map(|r| {
                    let name = self.run.kernels.get(r.kernel as usize).map_or_else(
                        String::new,
                        |k| match k.rank {
                            Some(rank) => format!("rank {rank} · {}", k.display),
                            None => k.display.clone(),
                        },
                    );
                    [
                        name,
                        fmt::thousands(r.calls),
                        fmt::duration(r.total_ns as f64),
                        fmt::duration(r.mean_ns()),
                    ]
                })
                .collect();
        serde_json::to_string(&RangeJson {
            start: fmt::duration(a as f64),
            end: fmt::duration(b as f64),
            length: fmt::duration((b - a) as f64),
            busy_pct: format!("{:.1}", st.busy_pct()),
            gpus: st.gpus,
            ops: fmt::thousands(st.ops),
            rows,
            more: st.rows.len().saturating_sub(RANGE_ROWS),
            note: String::new(),
        })
        .unwrap_or_default()
    }

    /// Drops a range drag in progress (a drag that ended as a click, or was cancelled).
    pub fn cancel_drag(&mut self) {
        self.dragging = None;
    }

    pub fn clear_selection(&mut self) {
        self.selection = None;
        self.dragging = None;
    }

    /// Zooms to the selected range.
    pub fn zoom_to_selection(&mut self) {
        if let Some((a, b)) = self.selection {
            self.vp.set(a as f64, b as f64);
        }
    }

    /// Sets the search query; returns the status line (matches, or why the query is bad).
    pub fn search(&mut self, query: &str) -> String {
        match search(&self.run.kernels, query) {
            Ok(None) => {
                self.matches = None;
                self.lane_matches.clear();
                String::new()
            }
            Ok(Some(m)) => {
                let calls = self
                    .run
                    .timeline
                    .kernels
                    .kernel
                    .iter()
                    .chain(&self.run.timeline.mem_ops.kernel)
                    .filter(|&&k| m.row.get(k as usize).copied().unwrap_or(false))
                    .count();
                let mut s = format!(
                    "{} kernel name(s), {} launches match",
                    m.rows_matched,
                    fmt::thousands(calls as u64)
                );
                if let Some(c) = &self.run.chunked {
                    s.push_str(&format!(
                        " among the {} kernels loaded (of {})",
                        fmt::thousands(self.run.timeline.kernels.start.len() as u64),
                        fmt::thousands(c.total)
                    ));
                }
                self.lane_matches = lane_match_counts(&self.run, &m);
                self.matches = Some(m);
                s
            }
            Err(e) => {
                self.matches = None;
                self.lane_matches.clear();
                e
            }
        }
    }

    /// The view as a URL hash (without `#`).
    pub fn hash(&self) -> String {
        let pinned = match self.pinned {
            Some(Target::Kernel(i)) => u32::try_from(self.run.global_kernel(i)).ok(),
            _ => self.pin_wanted.and_then(|g| u32::try_from(g).ok()),
        };
        ViewState {
            run: self.site_id.clone(),
            with: self.rank_ids.get(1..).unwrap_or_default().to_vec(),
            window: Some((self.vp.t0.round() as i64, self.vp.t1.round() as i64)),
            selection: self.selection,
            pinned,
            query: self
                .matches
                .as_ref()
                .map(|m| m.query.clone())
                .unwrap_or_default(),
        }
        .to_hash()
    }

    /// Restores a view from a URL hash; returns the query it holds (for the search box).
    pub fn apply_hash(&mut self, hash: &str) -> String {
        let v = ViewState::parse(hash);
        if let Some((a, b)) = v.window {
            self.vp.set(a as f64, b as f64);
        }
        self.selection = v.selection;
        // A pin is a position in the whole timeline; in a chunked one whose kernel is not
        // loaded, it waits for its chunk.
        let local = v.pinned.and_then(|g| self.run.local_kernel(g as u64));
        self.pinned = local.map(Target::Kernel);
        self.pin_wanted = match (&self.run.chunked, local) {
            (Some(_), None) => v.pinned.map(u64::from),
            _ => None,
        };
        let _ = self.search(&v.query);
        v.query
    }

    /// Canvas x (CSS px) of the middle of kernel op `i` and y of its lane, as `[x, y]`, or
    /// empty when it is off screen. For tests and the "go to" of a pinned kernel.
    pub fn locate_kernel(&self, i: u32) -> Vec<f64> {
        let t = Target::Kernel(i);
        let Some(li) = scene::lane_of(&self.run, t) else {
            return Vec::new();
        };
        let (s, e) = self.run.span_of(t);
        let x = self.layout.geometry.label_w + self.vp.x_of((s as f64 + e as f64) / 2.0);
        let (top, h) = self.layout.rows[li];
        if x < self.layout.geometry.label_w || x > self.css_width {
            return Vec::new();
        }
        vec![x, top + h / 2.0]
    }

    /// `[start, end]` (ns) of kernel op `i`, or empty past the end.
    pub fn kernel_span(&self, i: u32) -> Vec<f64> {
        if (i as usize) >= self.run.timeline.kernels.start.len() {
            return Vec::new();
        }
        let (s, e) = self.run.span_of(Target::Kernel(i));
        vec![s as f64, e as f64]
    }

    /// Visible window `[t0, t1]`, ns.
    pub fn window(&self) -> Vec<f64> {
        vec![self.vp.t0, self.vp.t1]
    }

    /// The legend: `[[category, colour], ...]` of the categories this run has.
    pub fn legend(&self) -> String {
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for k in &self.run.kernels {
            let e = (k.category.as_str(), k.color);
            if !seen.contains(&e) {
                seen.push(e);
            }
        }
        serde_json::to_string(&seen).unwrap_or_default()
    }
}

impl TimelineView {
    /// Rebuilds the shown run from `ranks` (the opened run alone again when only it is left),
    /// keeping the window and the selection on the same moments. `add_rank` admits no rank
    /// twice, so the merge cannot fail.
    fn remerge(&mut self) {
        let (run, shift, clock) = if self.ranks.len() <= 1 {
            self.rank_ids.clear();
            match self.ranks.pop() {
                Some(r) => (r.run, 0, String::new()),
                None => return,
            }
        } else {
            match merge(&self.ranks) {
                Ok(m) => (m.run, m.shift.first().copied().unwrap_or(0), m.clock),
                Err(_) => return,
            }
        };
        let moved = |t: f64| t - self.shift as f64 + shift as f64;
        let (t0, t1) = (moved(self.vp.t0), moved(self.vp.t1));
        let old = self.shift;
        let at = |x: u64| x.saturating_add(shift).saturating_sub(old);
        self.selection = self.selection.map(|(a, b)| (at(a), at(b)));
        self.run = run;
        self.shift = shift;
        self.clock = clock;
        self.layout = Layout::new(&self.run.lanes, Geometry::for_lanes(&self.run.lanes));
        self.vp = Viewport::new(self.run.timeline.end_ns, self.vp.width);
        self.vp.set(t0, t1);
        (self.hover, self.pinned, self.dragging) = (None, None, None);
        let query = self.matches.as_ref().map(|m| m.query.clone());
        self.matches = None;
        if let Some(q) = query {
            self.search(&q);
        }
        self.resize(self.css_width, self.dpr);
    }
}

/// The cross-run comparison.
#[derive(Debug)]
#[wasm_bindgen]
pub struct CompareView {
    runs: Vec<RunSummary>,
    /// The loaded bundles by site id, for the diff of two runs.
    bundles: Vec<(String, llmprof_bundle::Bundle)>,
    canvas: HtmlCanvasElement,
}

#[wasm_bindgen]
impl CompareView {
    #[wasm_bindgen(constructor)]
    pub fn new(canvas: HtmlCanvasElement) -> CompareView {
        CompareView {
            runs: Vec::new(),
            bundles: Vec::new(),
            canvas,
        }
    }

    /// Adds a run from its `bundle.json` text under `site_id` (its directory name in the
    /// site, what `render`'s `ids` name); a second add of the same id replaces the first.
    pub fn add_run(&mut self, site_id: &str, bundle: &str) -> Result<(), JsError> {
        let b = llmprof_bundle::Bundle::from_json(bundle).map_err(|e| {
            JsError::new(&format!("runs/{site_id}/bundle.json does not parse: {e}"))
        })?;
        let mut summary = RunSummary::from_bundle(&b);
        summary.id = site_id.to_string();
        self.runs.retain(|r| r.id != site_id);
        self.runs.push(summary);
        self.bundles.retain(|(id, _)| id != site_id);
        self.bundles.push((site_id.to_string(), b));
        Ok(())
    }

    /// The diff of the two loaded runs named in `ids` (comma-separated site ids; A is the one
    /// captured first) as [`crate::run_diff::DiffView`] JSON; an error unless `ids` names
    /// exactly two loaded runs.
    pub fn diff(&self, ids: &str) -> Result<String, JsError> {
        let picked: Vec<&llmprof_bundle::Bundle> = ids
            .split(',')
            .filter(|s| !s.is_empty())
            .filter_map(|id| self.bundles.iter().find(|(i, _)| i == id).map(|(_, b)| b))
            .collect();
        let [x, y] = picked[..] else {
            return Err(JsError::new("tick exactly two runs"));
        };
        serde_json::to_string(&crate::run_diff::diff_view(x, y))
            .map_err(|e| JsError::new(&e.to_string()))
    }

    /// The loaded runs named in `ids` (comma-separated site ids), in that order.
    fn picked(&self, ids: &str) -> Vec<RunSummary> {
        ids.split(',')
            .filter(|s| !s.is_empty())
            .filter_map(|id| self.runs.iter().find(|r| r.id == id).cloned())
            .collect()
    }

    /// Draws the runs named in `ids` (comma-separated; empty = all) normalised by `norm`
    /// (`token`, `step` or `share`) at `dpr`; returns the notes as JSON.
    pub fn render(&mut self, ids: &str, norm: &str, dpr: f64) -> Result<String, JsError> {
        let runs = self.picked(ids);
        let dpr = if dpr.is_finite() && dpr > 0.0 {
            dpr.min(4.0)
        } else {
            1.0
        };
        let (w, h) = compare::figure_size(runs.len());
        self.canvas.set_width((w as f64 * dpr).round() as u32);
        self.canvas.set_height((h as f64 * dpr).round() as u32);
        let style = self.canvas.style();
        let _ = style.set_property("width", &format!("{w}px"));
        let _ = style.set_property("height", &format!("{h}px"));
        let inner = CanvasBackend::with_canvas_object(self.canvas.clone())
            .ok_or_else(|| JsError::new("this browser gives no 2D canvas context"))?;
        let root = Measured {
            inner,
            ctx: context_2d(&self.canvas)?,
        }
        .into_drawing_area();
        let notes =
            compare::draw(&root, &runs, Norm::parse(norm), dpr).map_err(|e| JsError::new(&e))?;
        Ok(serde_json::to_string(&notes).unwrap_or_default())
    }

    /// The same figure as an SVG document (text measured on the canvas, as on screen).
    pub fn svg(&self, ids: &str, norm: &str) -> Result<String, JsError> {
        let runs = self.picked(ids);
        let (w, h) = compare::figure_size(runs.len());
        let mut out = String::new();
        {
            let root = Measured {
                inner: plotters::prelude::SVGBackend::with_string(&mut out, (w, h)),
                ctx: context_2d(&self.canvas)?,
            }
            .into_drawing_area();
            compare::draw(&root, &runs, Norm::parse(norm), 1.0).map_err(|e| JsError::new(&e))?;
        }
        Ok(out)
    }
}
