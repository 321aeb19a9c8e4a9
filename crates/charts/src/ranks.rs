//! The rank skew chart: a multi-rank run's longest top-level stage, its median wall on each
//! rank, the straggler in its own colour.

use llmprof_bundle::{Bundle, StageSkew};
use plotters::style::RGBColor;

use crate::draw::{render, Axis, Font, MUTED};
use crate::run::{header, WALL};
use crate::WIDTH;
use llmprof_report::fmt::ms_label;

const STRAGGLER: RGBColor = RGBColor(0xE1, 0x57, 0x59);

/// `None` unless the run has ranks and a stage measured on two of them.
pub fn rank_skew(bundle: &Bundle) -> Option<String> {
    let r = bundle.ranks.as_ref()?;
    let stage: &StageSkew = r
        .skew
        .iter()
        .filter(|s| s.median_ns.iter().flatten().count() >= 2)
        .max_by(|a, b| {
            let top = |s: &StageSkew| s.median_ns.iter().flatten().copied().fold(0.0, f64::max);
            top(a).total_cmp(&top(b))
        })?;
    let rows: Vec<(u32, f64)> = (r.ranks.iter().zip(&stage.median_ns))
        .filter_map(|(e, m)| m.map(|m| (e.rank, m)))
        .collect();
    let row: i32 = if rows.len() > 16 { 12 } else { 22 };
    let (x0, x1, top) = (70, WIDTH as i32 - 120, 70);
    let max = rows.iter().map(|r| r.1).fold(0.0, f64::max);
    let axis = Axis::covering(max / 1e6);
    let y_end = top + row * rows.len() as i32;
    let title = format!("Rank skew: {}", stage.stage);
    let subtitle = format!(
        "Median wall of the stage's measured instances on each rank; spread {:.1}% (rank {}, \
         the slowest, in red)",
        stage.spread_pct, stage.slowest_rank
    );
    render(WIDTH, (y_end + 34) as u32, |p| {
        header(p, &title, &subtitle)?;
        p.x_axis(&axis, x0, x1, top, y_end, "")?;
        p.text("ms", x1 + 18, y_end + 12, Font::new(10).color(MUTED))?;
        for (i, (rank, median)) in rows.iter().enumerate() {
            let y = top + row * i as i32;
            let colour = if *rank == stage.slowest_rank {
                STRAGGLER
            } else {
                WALL
            };
            p.text(&format!("rank {rank}"), 8, y + row / 2 + 4, Font::new(10))?;
            let bx = axis.px(median / 1e6, x0, x1);
            p.rect(x0, y + 2, bx.max(x0 + 1), y + row - 2, colour)?;
            p.bar_value(&ms_label(median / 1e6), bx, y + row / 2 + 3, 10, colour)?;
        }
        Ok(())
    })
}
