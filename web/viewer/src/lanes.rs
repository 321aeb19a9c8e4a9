//! The timeline's lanes and their vertical layout.
//!
//! Lanes, top to bottom: NVTX stages (one lane per nesting depth), one lane per CUDA stream
//! with kernels, memcpy/memset, then the NVML counters (power, SM clock, GPU utilization)
//! when the run has samples that fall on this timeline.

use crate::lod::SpanIndex;

/// What a lane shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneKind {
    /// Stage range instances at one nesting depth.
    Stages { depth: u32 },
    /// Kernels of one stream (index into the timeline's `streams`).
    Stream(u32),
    /// Every memcpy and memset.
    MemOps,
    /// One NVML counter (index into `Run::counters`).
    Counter(usize),
}

/// One lane: its items (positions in the timeline's columns), sorted by start, indexed.
#[derive(Debug, Clone)]
pub struct Lane {
    pub kind: LaneKind,
    pub label: String,
    pub items: Vec<u32>,
    pub index: SpanIndex,
}

impl Lane {
    /// A lane of the records `items` of the columns `start`/`dur` (already sorted by start).
    pub fn new(kind: LaneKind, label: String, items: Vec<u32>, start: &[u64], dur: &[u64]) -> Lane {
        let index = SpanIndex::new(items.iter().map(|&i| (start[i as usize], dur[i as usize])));
        Lane {
            kind,
            label,
            items,
            index,
        }
    }

    /// A counter lane (no spans).
    pub fn counter(i: usize, label: String) -> Lane {
        Lane {
            kind: LaneKind::Counter(i),
            label,
            items: Vec::new(),
            index: SpanIndex::default(),
        }
    }
}

/// Pixel geometry of the timeline canvas (CSS pixels).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Geometry {
    /// Width of the lane-label column on the left.
    pub label_w: f64,
    /// Height of the time axis on top.
    pub axis_h: f64,
    pub span_lane_h: f64,
    pub counter_lane_h: f64,
    pub gap: f64,
}

impl Default for Geometry {
    fn default() -> Self {
        Geometry {
            label_w: 132.0,
            axis_h: 26.0,
            span_lane_h: 22.0,
            counter_lane_h: 40.0,
            gap: 4.0,
        }
    }
}

impl Geometry {
    /// The geometry for a run's lanes: the label column wider when several ranks' lanes carry
    /// the rank in their labels (`Rank 1 · Memcpy/memset`).
    pub fn for_lanes(lanes: &[Lane]) -> Geometry {
        let ranked = lanes.iter().any(|l| l.label.starts_with("Rank "));
        let g = Geometry::default();
        Geometry {
            label_w: if ranked { 176.0 } else { g.label_w },
            ..g
        }
    }
}

/// Where each lane sits: `rows[i]` = (top, height) of lane `i`.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    pub geometry: Geometry,
    pub rows: Vec<(f64, f64)>,
    /// Total canvas height.
    pub height: f64,
}

impl Layout {
    pub fn new(lanes: &[Lane], geometry: Geometry) -> Layout {
        let mut y = geometry.axis_h + geometry.gap;
        let mut rows = Vec::with_capacity(lanes.len());
        for lane in lanes {
            let h = match lane.kind {
                LaneKind::Counter(_) => geometry.counter_lane_h,
                _ => geometry.span_lane_h,
            };
            rows.push((y, h));
            y += h + geometry.gap;
        }
        Layout {
            geometry,
            rows,
            height: y + geometry.gap,
        }
    }

    /// The lane at canvas height `y`, if any (gaps between lanes belong to none).
    pub fn lane_at(&self, y: f64) -> Option<usize> {
        let i = self.rows.partition_point(|&(top, _)| top <= y);
        let i = i.checked_sub(1)?;
        let (top, h) = self.rows[i];
        (y < top + h).then_some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lanes() -> Vec<Lane> {
        vec![
            Lane::new(
                LaneKind::Stages { depth: 0 },
                "Stages".into(),
                vec![0],
                &[0],
                &[10],
            ),
            Lane::new(LaneKind::Stream(0), "Stream 7".into(), vec![0], &[0], &[10]),
            Lane::counter(0, "Power".into()),
        ]
    }

    #[test]
    fn lanes_stack_below_the_axis_with_gaps() {
        let l = Layout::new(&lanes(), Geometry::default());
        assert_eq!(l.rows, vec![(30.0, 22.0), (56.0, 22.0), (82.0, 40.0)]);
        assert_eq!(l.height, 130.0);
    }

    #[test]
    fn lane_at_hits_rows_and_misses_gaps() {
        let l = Layout::new(&lanes(), Geometry::default());
        assert_eq!(l.lane_at(10.0), None);
        assert_eq!(l.lane_at(30.0), Some(0));
        assert_eq!(l.lane_at(51.9), Some(0));
        assert_eq!(l.lane_at(53.0), None);
        assert_eq!(l.lane_at(60.0), Some(1));
        assert_eq!(l.lane_at(121.0), Some(2));
        assert_eq!(l.lane_at(125.0), None);
    }
}
