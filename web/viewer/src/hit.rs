//! What is under the pointer.

use crate::fmt;
use crate::lanes::{LaneKind, Layout};
use crate::lod::SpanIndex;
use crate::model::{Run, Target};
use crate::viewport::Viewport;

/// The span of `ix` nearest to time `t` within `tol` ns: one containing `t` if any (the
/// shortest of those, so a kernel inside a long one is reachable), else the closest edge.
pub fn nearest(ix: &SpanIndex, t: f64, tol: f64) -> Option<usize> {
    if ix.is_empty() || !t.is_finite() {
        return None;
    }
    let hi = ix.first_starting_at(((t + tol).max(0.0).ceil() as u64).saturating_add(1));
    let reach = (t - tol).max(0.0).floor() as u64;
    let mut best: Option<(f64, u64, usize)> = None;
    for j in ix.reaching_back(hi, reach) {
        let (s, e) = (ix.start(j) as f64, ix.end(j) as f64);
        let dist = if t < s {
            s - t
        } else if t > e {
            t - e
        } else {
            0.0
        };
        if dist > tol {
            continue;
        }
        let key = (dist, ix.dur(j), j);
        if best.is_none_or(|b| (key.0, key.1) < (b.0, b.1)) {
            best = Some(key);
        }
    }
    best.map(|b| b.2)
}

/// The lane and item under canvas point `(x, y)` (CSS pixels, x from the canvas's left).
pub fn hit(
    run: &Run,
    layout: &Layout,
    vp: &Viewport,
    x: f64,
    y: f64,
    tol_px: f64,
) -> Option<(usize, Target)> {
    let px = x - layout.geometry.label_w;
    if px < 0.0 || px > vp.width {
        return None;
    }
    let lane_i = layout.lane_at(y)?;
    let lane = run.lanes.get(lane_i)?;
    if matches!(lane.kind, LaneKind::Counter(_)) {
        return None;
    }
    // A stream drawn from the overview has no kernel under the pointer, only buckets.
    if matches!(lane.kind, LaneKind::Stream(_)) && run.overview_for(vp.t0, vp.t1).is_some() {
        return None;
    }
    let pos = nearest(&lane.index, vp.t_of(px), tol_px * vp.ns_per_px())?;
    Some((lane_i, run.target(lane, pos as u32)?))
}

/// What the overview holds under canvas point `(x, y)` on a stream lane drawn from it, as
/// tooltip lines.
pub fn bucket_at(
    run: &Run,
    layout: &Layout,
    vp: &Viewport,
    x: f64,
    y: f64,
) -> Option<Vec<(String, String)>> {
    let px = x - layout.geometry.label_w;
    let c = run.overview_for(vp.t0, vp.t1)?;
    let lane = run.lanes.get(layout.lane_at(y)?)?;
    let LaneKind::Stream(si) = lane.kind else {
        return None;
    };
    if px < 0.0 || px > vp.width {
        return None;
    }
    // Three pixels wide, as hovering a bar allows.
    let (t0, t1) = (vp.t_of(px - 1.0).max(0.0), vp.t_of(px + 2.0));
    let b = c.bucket(si, t0, t1)?;
    let row = b.longest.and_then(|r| run.kernels.get(r as usize));
    let mut lines = vec![
        ("Overview".to_string(), lane.label.clone()),
        (
            "Time".to_string(),
            format!(
                "{} – {}",
                fmt::duration(b.span.0 as f64),
                fmt::duration(b.span.1 as f64)
            ),
        ),
        ("Kernels starting".to_string(), fmt::thousands(b.kernels)),
        ("GPU busy".to_string(), format!("{:.1}%", b.busy * 100.0)),
    ];
    if let Some(k) = row {
        lines.push(("Longest".to_string(), k.display.clone()));
    }
    Some(lines)
}

/// The NVML sample of counter lane `ci` nearest to plot-area `x`, within `tol_px`, as
/// `[(label, value)]` tooltip lines.
pub fn counter_at(
    run: &Run,
    layout: &Layout,
    vp: &Viewport,
    x: f64,
    y: f64,
    tol_px: f64,
) -> Option<Vec<(String, String)>> {
    let px = x - layout.geometry.label_w;
    if px < 0.0 || px > vp.width {
        return None;
    }
    let lane = run.lanes.get(layout.lane_at(y)?)?;
    let LaneKind::Counter(ci) = lane.kind else {
        return None;
    };
    let c = run.counters.get(ci)?;
    let t = vp.t_of(px);
    let i = c.t.partition_point(|&s| s < t);
    let best = [i.checked_sub(1), Some(i)]
        .into_iter()
        .flatten()
        .filter(|&j| j < c.t.len())
        .min_by(|&a, &b| (c.t[a] - t).abs().total_cmp(&(c.t[b] - t).abs()))?;
    // Samples are sparse: accept the nearest within half an interval or the tolerance.
    let gap = if c.t.len() > 1 {
        (c.t[1] - c.t[0]).abs()
    } else {
        0.0
    };
    if (c.t[best] - t).abs() > (gap / 2.0).max(tol_px * vp.ns_per_px()) {
        return None;
    }
    Some(vec![
        (c.name.to_string(), format!("{:.0} {}", c.v[best], c.unit)),
        ("At".into(), crate::fmt::duration(c.t[best])),
        ("Source".into(), "NVML sample".into()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ix(spans: &[(u64, u64)]) -> SpanIndex {
        SpanIndex::new(spans.iter().copied())
    }

    #[test]
    fn a_point_inside_a_span_hits_it() {
        let i = ix(&[(0, 10), (20, 10), (40, 10)]);
        assert_eq!(nearest(&i, 25.0, 0.0), Some(1));
        assert_eq!(nearest(&i, 20.0, 0.0), Some(1));
        assert_eq!(nearest(&i, 30.0, 0.0), Some(1));
        assert_eq!(nearest(&i, 35.0, 0.0), None);
    }

    #[test]
    fn tolerance_reaches_the_nearest_edge() {
        let i = ix(&[(0, 10), (20, 10), (40, 10)]);
        assert_eq!(nearest(&i, 36.0, 5.0), Some(2));
        assert_eq!(nearest(&i, 33.0, 5.0), Some(1));
        assert_eq!(nearest(&i, 100.0, 5.0), None);
    }

    #[test]
    fn the_shortest_enclosing_span_wins() {
        // A long range with a short one inside it (nested stages on one lane).
        let i = ix(&[(0, 1000), (100, 10)]);
        assert_eq!(nearest(&i, 105.0, 0.0), Some(1));
        assert_eq!(nearest(&i, 500.0, 0.0), Some(0));
    }

    /// A long span behind thousands of short ones (a long kernel on one stream with a burst of
    /// short ones on another, merged into one lane; a stage over many nested ones) is reached:
    /// the walk skips whole blocks that end before the pointer.
    #[test]
    fn a_long_span_behind_many_short_ones_is_found() {
        let mut spans = vec![(0u64, 1_000_000u64)];
        spans.extend((0..5000).map(|i| (10 + i * 100, 50)));
        let i = ix(&spans);
        // Between two short spans, inside only the long one.
        assert_eq!(nearest(&i, 499_980.0, 0.0), Some(0));
        // Inside a short one: the shorter enclosing span wins.
        assert_eq!(nearest(&i, 400_030.0, 0.0), Some(1 + 4000));
        // Every short span is reachable too, and a point after everything hits nothing.
        assert_eq!(nearest(&i, 10.0 + 4999.0 * 100.0 + 25.0, 0.0), Some(5000));
        assert_eq!(nearest(&i, 2_000_000.0, 0.0), None);
    }

    #[test]
    fn nothing_to_hit() {
        assert_eq!(nearest(&SpanIndex::default(), 1.0, 1.0), None);
        assert_eq!(nearest(&ix(&[(0, 1)]), f64::NAN, 1.0), None);
    }
}
