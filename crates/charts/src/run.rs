//! Charts of one run.

use llmprof_bundle::{names, Bundle, Category, Kernel, OpKind, Stage};
use plotters::style::RGBColor;

use crate::draw::{
    clean, fit, legend_bottom, ms, render, rgb, text_width, Align, Axis, DrawResult, Font, Painter,
    AXIS, GRID, MUTED,
};
use crate::WIDTH;
use llmprof_report::fmt::{ms_label, share_label, thousands};
use llmprof_report::palette;

/// Most stages a chart shows (the longest by wall time, in bundle order).
pub(crate) const MAX_STAGES: usize = 24;
/// Most kernels [`top_kernels`] shows.
pub(crate) const MAX_KERNELS: usize = 50;
/// Most points [`speed_of_light`] draws.
const MAX_POINTS: usize = 2000;
/// Characters of a stage or run name shown.
pub(crate) const NAME_CHARS: usize = 40;
/// Characters of a kernel name shown.
const KERNEL_CHARS: usize = 60;

/// Wall-time bars.
pub(crate) const WALL: RGBColor = RGBColor(0xB8, 0xC2, 0xCC);
/// GPU-busy bars.
const BUSY: RGBColor = RGBColor(0x4E, 0x79, 0xA7);

/// Where the plot of a chart starts below its title, subtitle and a one-line legend.
pub(crate) const TOP: i32 = 84;
/// The first line of a legend.
pub(crate) const LEGEND_Y: i32 = 62;
/// Legends wrap before this x.
pub(crate) const LEGEND_MAX: i32 = WIDTH as i32 - 16;

pub(crate) fn cat_rgb(c: Category) -> RGBColor {
    rgb(palette::category(c))
}

/// Title and subtitle at the top left.
pub(crate) fn header(p: &Painter<'_>, title: &str, subtitle: &str) -> DrawResult {
    p.text(title, 16, 20, Font::new(16).bold())?;
    p.text(subtitle, 16, 40, Font::new(11).color(MUTED))
}

/// The left label column for these labels at `px` pixels: its width (90 to 260 px, text plus
/// padding) and the labels cut to fit it.
pub(crate) fn label_column(labels: &[String], px: u32) -> (i32, Vec<String>) {
    const PAD: i32 = 24;
    const MAX: i32 = 260;
    let fitted: Vec<String> = labels
        .iter()
        .map(|l| fit(l, NAME_CHARS, px, MAX - PAD))
        .collect();
    let widest = fitted.iter().map(|l| text_width(l, px)).max().unwrap_or(0);
    ((widest + PAD).clamp(90, MAX), fitted)
}

/// Where a legend goes: aligned with the plot at `x0` when it fits on one line from there,
/// else from the left margin. Returns the legend's x and where the plot starts below it.
pub(crate) fn legend_place(items: &[(RGBColor, String)], x0: i32) -> (i32, i32) {
    let x = if legend_bottom(items, x0, LEGEND_Y, LEGEND_MAX) == LEGEND_Y {
        x0
    } else {
        16
    };
    let top = TOP + legend_bottom(items, x, LEGEND_Y, LEGEND_MAX) - LEGEND_Y;
    (x, top)
}

/// Per stage: wall time vs GPU-busy time (union of the stage's GPU ops), horizontal bars in ms.
///
/// Stages with neither wall nor busy time are left out; at most 24 stages (the longest) are
/// shown, in bundle order. `None` when no stage is left.
pub fn stage_breakdown(bundle: &Bundle) -> Option<String> {
    let mut stages: Vec<&Stage> = bundle
        .workload_stages()
        .filter(|s| s.wall_ns > 0 || s.gpu_busy_ns > 0)
        .collect();
    if stages.is_empty() {
        return None;
    }
    let total = stages.len();
    if total > MAX_STAGES {
        stages.sort_by(|a, b| b.wall_ns.cmp(&a.wall_ns).then(a.id.cmp(&b.id)));
        stages.truncate(MAX_STAGES);
        stages.sort_by_key(|s| s.id);
    }
    let names: Vec<String> = stages.iter().map(|s| s.name.clone()).collect();
    let (x0, labels) = label_column(&names, 12);
    let max_ms = stages
        .iter()
        .map(|s| ms(s.wall_ns.max(s.gpu_busy_ns)))
        .fold(0.0, f64::max);
    let axis = Axis::covering(max_ms);

    const ROW: i32 = 40;
    let x1 = WIDTH as i32 - 130;
    let y_end = TOP + ROW * stages.len() as i32;
    let height = (y_end + 34) as u32;

    let mut subtitle =
        "Wall time of each stage (summed over instances) and the time the GPU was busy with its work"
            .to_string();
    if total > stages.len() {
        subtitle = format!(
            "Wall time (summed over instances) and GPU busy time; {} of {total} stages, the longest",
            stages.len()
        );
    }
    render(WIDTH, height, |p| {
        header(p, "Stages: wall time vs GPU busy", &subtitle)?;
        p.legend(
            &[
                (WALL, "wall time".to_string()),
                (BUSY, "GPU busy".to_string()),
            ],
            x0,
            LEGEND_Y,
            LEGEND_MAX,
        )?;
        p.x_axis(&axis, x0, x1, TOP, y_end, "")?;
        p.text("ms", x1 + 18, y_end + 12, Font::new(10).color(MUTED))?;
        for (i, (stage, label)) in stages.iter().zip(&labels).enumerate() {
            let y = TOP + ROW * i as i32;
            p.text(label, x0 - 10, y + 14, Font::new(12).align(Align::Right))?;
            let instances = format!(
                "{} instance{}",
                thousands(stage.instances),
                if stage.instances == 1 { "" } else { "s" }
            );
            p.text(
                &fit(&instances, 40, 10, x0 - 20),
                x0 - 10,
                y + 28,
                Font::new(10).color(MUTED).align(Align::Right),
            )?;
            let wall = ms(stage.wall_ns);
            let busy = ms(stage.gpu_busy_ns);
            let wx = axis.px(wall, x0, x1);
            let bx = axis.px(busy, x0, x1);
            p.rect(x0, y + 7, wx.max(x0 + 1), y + 19, WALL)?;
            p.bar_value(&ms_label(wall), wx, y + 13, 10, WALL)?;
            p.rect(x0, y + 21, bx.max(x0 + 1), y + 33, BUSY)?;
            // The stage table's GPU busy share (over the stage's window).
            let busy_label = if stage.gpu_busy_pct.is_finite() && stage.wall_ns > 0 {
                format!(
                    "{} ({} busy)",
                    ms_label(busy),
                    share_label(stage.gpu_busy_pct)
                )
            } else {
                ms_label(busy)
            };
            p.bar_value(&busy_label, bx, y + 27, 10, BUSY)?;
        }
        Ok(())
    })
}

/// Kernel GPU time (`kind == kernel` rows) per category, widest first; `None` without kernel
/// time.
pub fn category_share(bundle: &Bundle) -> Option<String> {
    let (by_cat, total) = kernel_time_by_category(bundle);
    if total == 0 {
        return None;
    }
    let mut rows: Vec<(Category, u64, u64)> = Category::ALL
        .iter()
        .zip(by_cat)
        .filter(|(_, (ns, _))| *ns > 0)
        .map(|(c, (ns, kernels))| (*c, ns, kernels))
        .collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let pct = |ns: u64| ns as f64 / total as f64 * 100.0;
    let axis = Axis::covering(rows.first().map_or(0.0, |r| pct(r.1)));

    const ROW: i32 = 28;
    let x0 = 130;
    let x1 = WIDTH as i32 - 190;
    let top = TOP - 24;
    let y_end = top + ROW * rows.len() as i32;
    let height = (y_end + 34) as u32;
    let kernels: u64 = rows.iter().fold(0, |acc, r| acc.saturating_add(r.2));
    let subtitle = format!(
        "Share of kernel GPU time, {} over {} distinct kernels (memcpy and memset excluded)",
        ms_label(ms(total)),
        thousands(kernels)
    );
    render(WIDTH, height, |p| {
        header(p, "Kernel time by category", &subtitle)?;
        p.x_axis(&axis, x0, x1, top, y_end, "%")?;
        for (i, (cat, ns, n)) in rows.iter().enumerate() {
            let y = top + ROW * i as i32;
            let mid = y + ROW / 2;
            p.text(
                cat.as_str(),
                x0 - 10,
                mid,
                Font::new(12).align(Align::Right),
            )?;
            let bx = axis.px(pct(*ns), x0, x1);
            p.rect(x0, mid - 8, bx.max(x0 + 1), mid + 8, cat_rgb(*cat))?;
            let label = format!(
                "{}  ·  {}  ·  {} kernel{}",
                share_label(pct(*ns)),
                ms_label(ms(*ns)),
                thousands(*n),
                if *n == 1 { "" } else { "s" }
            );
            p.bar_value(&label, bx, mid, 11, cat_rgb(*cat))?;
        }
        Ok(())
    })
}

/// Kernel time (ns) and distinct kernels per category, in [`Category::ALL`] order.
pub(crate) type CategoryTimes = [(u64, u64); 8];

/// Kernel time and distinct kernels per category (in [`Category::ALL`] order) of `kind ==
/// kernel` rows, and the total kernel time.
pub(crate) fn kernel_time_by_category(bundle: &Bundle) -> (CategoryTimes, u64) {
    let mut by_cat: CategoryTimes = [(0, 0); 8];
    let mut total = 0u64;
    for k in bundle.kernels.iter().filter(|k| k.kind == OpKind::Kernel) {
        if let Some(slot) = Category::ALL
            .iter()
            .position(|c| *c == k.category)
            .and_then(|i| by_cat.get_mut(i))
        {
            slot.0 = slot.0.saturating_add(k.total_ns);
            slot.1 = slot.1.saturating_add(1);
        }
        total = total.saturating_add(k.total_ns);
    }
    (by_cat, total)
}

/// The `n` kernels (`kind == kernel` rows, at most 50) with the most GPU time, labelled with
/// their display name, coloured by category. `None` when `n == 0` or there is no kernel time.
pub fn top_kernels(bundle: &Bundle, n: usize) -> Option<String> {
    let mut kernels: Vec<&Kernel> = bundle
        .kernels
        .iter()
        .filter(|k| k.kind == OpKind::Kernel && k.total_ns > 0)
        .collect();
    if kernels.is_empty() || n == 0 {
        return None;
    }
    let all_ns = bundle
        .kernels
        .iter()
        .filter(|k| k.kind == OpKind::Kernel)
        .fold(0u64, |acc, k| acc.saturating_add(k.total_ns));
    kernels.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then(a.id.cmp(&b.id))
            .then(a.name.cmp(&b.name))
    });
    kernels.truncate(n.min(MAX_KERNELS));
    let labels: Vec<String> = kernels
        .iter()
        .map(|k| clean(&names::display_name(&k.name), KERNEL_CHARS))
        .collect();
    let axis = Axis::covering(kernels.first().map_or(0.0, |k| ms(k.total_ns)));
    let mut cats: Vec<Category> = kernels.iter().map(|k| k.category).collect();
    cats.sort();
    cats.dedup();

    let legend: Vec<(RGBColor, String)> = cats
        .iter()
        .map(|c| (cat_rgb(*c), c.as_str().to_string()))
        .collect();
    const ROW: i32 = 36;
    let x0 = 16;
    let x1 = WIDTH as i32 - 200;
    let (lx, top) = legend_place(&legend, x0);
    let y_end = top + ROW * kernels.len() as i32;
    let height = (y_end + 34) as u32;
    let title = format!("Top {} kernels by GPU time", kernels.len());
    let subtitle = format!(
        "Total time over all calls; share of all kernel time ({})",
        ms_label(ms(all_ns))
    );
    render(WIDTH, height, |p| {
        header(p, &title, &subtitle)?;
        p.legend(&legend, lx, LEGEND_Y, LEGEND_MAX)?;
        p.x_axis(&axis, x0, x1, top, y_end, "")?;
        p.text("ms", x1 + 18, y_end + 12, Font::new(10).color(MUTED))?;
        for (i, (k, label)) in kernels.iter().zip(&labels).enumerate() {
            let y = top + ROW * i as i32;
            p.text(label, x0 + 2, y + 10, Font::new(11))?;
            let t = ms(k.total_ns);
            let bx = axis.px(t, x0, x1);
            p.rect(x0, y + 18, bx.max(x0 + 1), y + 32, cat_rgb(k.category))?;
            // The bundle's share, as the kernel table shows it.
            let value = format!(
                "{}  ·  {}  ·  {} call{}",
                ms_label(t),
                share_label(k.time_pct),
                thousands(k.calls),
                if k.calls == 1 { "" } else { "s" }
            );
            p.bar_value(&value, bx, y + 25, 10, cat_rgb(k.category))?;
        }
        Ok(())
    })
}

/// Nsight Compute "speed of light": per profiled launch, SM throughput (y) against memory
/// throughput (x, `memory_throughput_pct`, else `dram_throughput_pct`), both 0–100 % of peak,
/// coloured by the joined kernel's category (by name when the row did not join). `None` when no
/// ncu row has both numbers.
///
/// This is not a FLOP/s roofline: that needs per-kernel FLOP counts the bundle does not hold.
pub fn speed_of_light(bundle: &Bundle) -> Option<String> {
    let points: Vec<(f64, f64, Category)> = bundle
        .ncu
        .iter()
        .filter_map(|r| {
            let x = r
                .memory_throughput_pct
                .filter(|v| v.is_finite())
                .or(r.dram_throughput_pct.filter(|v| v.is_finite()))?;
            let y = r.sm_throughput_pct.filter(|v| v.is_finite())?;
            let cat = r
                .kernel
                .and_then(|i| bundle.kernels.get(i as usize))
                .map_or_else(|| names::category(&r.name), |k| k.category);
            Some((x.clamp(0.0, 100.0), y.clamp(0.0, 100.0), cat))
        })
        .take(MAX_POINTS)
        .collect();
    if points.is_empty() {
        return None;
    }
    let mut counts = [0usize; 8];
    for (_, _, c) in &points {
        if let Some(n) = Category::ALL
            .iter()
            .position(|x| x == c)
            .and_then(|i| counts.get_mut(i))
        {
            *n += 1;
        }
    }

    let (x0, y0, size) = (78, 64, 380);
    let (x1, y1) = (x0 + size, y0 + size);
    let height = (y1 + 52) as u32;
    let axis = Axis::fixed(100.0, 20.0);
    // When every point sits in the bottom-left corner, a zoomed panel shows them apart.
    let extent = points.iter().fold(0.0f64, |m, (x, y, _)| m.max(*x).max(*y));
    let zoom = (extent < 40.0).then(|| Axis::covering(extent.max(1.0)));
    let subtitle = format!(
        "{} Nsight Compute launch{}; x: memory throughput (DRAM where ncu lacks it), y: SM \
         throughput, % of peak",
        thousands(points.len() as u64),
        if points.len() == 1 { "" } else { "es" }
    );
    render(WIDTH, height, |p| {
        header(
            p,
            "Speed of light (ncu): compute vs memory throughput",
            &subtitle,
        )?;
        scatter(p, &points, &axis, (x0, y0, size), 10)?;
        p.text(
            "Memory throughput (% of peak)",
            (x0 + x1) / 2,
            y1 + 32,
            Font::new(11).align(Align::Center),
        )?;
        p.text(
            "SM throughput (% of peak)",
            x0 - 40,
            (y0 + y1) / 2,
            Font::new(11).align(Align::Center).vertical(),
        )?;

        // Right column: legend with counts, the zoomed panel, a note.
        let lx = x1 + 44;
        let mut ly = y0 + 6;
        for (c, n) in Category::ALL.iter().zip(counts) {
            if n == 0 {
                continue;
            }
            p.dot(lx + 5, ly, 5, cat_rgb(*c), 0.9)?;
            p.text(&format!("{} ({n})", c.as_str()), lx + 16, ly, Font::new(11))?;
            ly += 20;
        }
        if let Some(zoom) = zoom {
            let zsize = 170;
            let zx = lx + 34;
            let zy = (ly + 26).max(y1 - zsize - 60);
            let title = format!("Zoom: 0–{}%", zoom.label(zoom.max));
            p.text(&title, zx, zy - 14, Font::new(11).bold())?;
            scatter(p, &points, &zoom, (zx, zy, zsize), 9)?;
        }
        p.text(
            "Diagonal: compute = memory throughput.",
            lx,
            y1 + 18,
            Font::new(10).color(MUTED),
        )?;
        p.text(
            "No FLOP/s roofline: needs per-kernel FLOP counts.",
            lx,
            y1 + 32,
            Font::new(10).color(MUTED),
        )?;
        Ok(())
    })
}

/// A square scatter panel of side `size` px with its top-left corner at (`x0`, `y0`), both axes
/// on `axis`: grid, tick labels of `tick_px` px, the diagonal, and the points (clamped to the
/// panel).
fn scatter(
    p: &Painter<'_>,
    points: &[(f64, f64, Category)],
    axis: &Axis,
    (x0, y0, size): (i32, i32, i32),
    tick_px: u32,
) -> DrawResult {
    let (x1, y1) = (x0 + size, y0 + size);
    for v in axis.ticks() {
        let x = axis.px(v, x0, x1);
        let y = axis.px(v, y1, y0);
        p.line(&[(x, y0), (x, y1)], GRID, 1)?;
        p.line(&[(x0, y), (x1, y)], GRID, 1)?;
        let label = axis.label(v);
        let font = Font::new(tick_px).color(MUTED);
        p.text(&label, x, y1 + 12, font.align(Align::Center))?;
        p.text(&label, x0 - 6, y, font.align(Align::Right))?;
    }
    p.line(&[(x0, y0), (x0, y1), (x1, y1)], AXIS, 1)?;
    p.line(&[(x0, y1), (x1, y0)], AXIS, 1)?;
    for (x, y, c) in points {
        if *x > axis.max || *y > axis.max {
            continue;
        }
        p.dot(
            axis.px(*x, x0, x1),
            axis.px(*y, y1, y0),
            4,
            cat_rgb(*c),
            0.7,
        )?;
    }
    Ok(())
}
