//! Level of detail: what to draw for one lane at one zoom.
//!
//! A lane's spans are sorted by start. Drawing walks them left to right; a span at least one
//! pixel wide is drawn as itself, and a run of narrower spans is merged into one pixel
//! column, found with a binary search instead of a scan. Every step either draws a span at
//! least a pixel wide or closes a column, so a frame costs O(width × log n) per lane whatever
//! n is: a million kernels draw as fast as a thousand.
//!
//! A merged column carries how busy it is (the summed duration of its spans over the
//! column's time, from prefix sums) and its longest span (from a per-block maximum), whose
//! category colours the column.

/// Spans per block of the longest-span index.
const BLOCK: usize = 64;

/// Sorted spans of one lane, with the prefix sums and maxima that make [`SpanIndex::visible`]
/// independent of the span count.
#[derive(Debug, Clone, Default)]
pub struct SpanIndex {
    start: Vec<u64>,
    end: Vec<u64>,
    /// `max_end[i]` = the latest end among spans `0..=i` (spans may overlap).
    max_end: Vec<u64>,
    /// `prefix[i]` = summed duration of spans `0..i`.
    prefix: Vec<u64>,
    /// The longest span of each block of [`BLOCK`] spans.
    block_best: Vec<u32>,
    /// The latest end of each block of [`BLOCK`] spans.
    block_max_end: Vec<u64>,
}

/// One thing to draw, in pixels from the left of the plot area.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Item {
    /// One span (position in the lane), at least `min_px` wide.
    Span { pos: u32, x0: f64, x1: f64 },
    /// Narrow spans `first..first + count` merged into the pixel column `[x0, x0 + 1)`.
    Merged {
        x0: f64,
        first: u32,
        count: u32,
        /// Summed span time over the column's time, capped at 1.
        busy: f64,
        /// The longest span of the column.
        best: u32,
    },
}

impl SpanIndex {
    /// Builds the index from `(start, duration)` pairs sorted by start.
    pub fn new(spans: impl IntoIterator<Item = (u64, u64)>) -> SpanIndex {
        let mut ix = SpanIndex::default();
        let mut max_end = 0u64;
        let mut sum = 0u64;
        ix.prefix.push(0);
        for (s, d) in spans {
            let e = s.saturating_add(d);
            max_end = max_end.max(e);
            sum = sum.saturating_add(d);
            ix.start.push(s);
            ix.end.push(e);
            ix.max_end.push(max_end);
            ix.prefix.push(sum);
        }
        for chunk_start in (0..ix.start.len()).step_by(BLOCK) {
            let chunk_end = (chunk_start + BLOCK).min(ix.start.len());
            let best = (chunk_start..chunk_end)
                .max_by_key(|&i| (ix.dur(i), std::cmp::Reverse(i)))
                .unwrap_or(chunk_start);
            ix.block_best.push(best as u32);
            let latest = (chunk_start..chunk_end)
                .map(|i| ix.end[i])
                .max()
                .unwrap_or(0);
            ix.block_max_end.push(latest);
        }
        ix
    }

    /// Positions before `hi` whose span ends at or after `t`, latest first: whole blocks that
    /// end before `t` are skipped, and the walk stops where no earlier span reaches `t` — so
    /// a long span behind any number of short ones is found.
    pub fn reaching_back(&self, hi: usize, t: u64) -> impl Iterator<Item = usize> + '_ {
        let mut j = hi.min(self.len());
        std::iter::from_fn(move || loop {
            if j == 0 || self.max_end[j - 1] < t {
                return None;
            }
            j -= 1;
            if j % BLOCK == BLOCK - 1 && self.block_max_end[j / BLOCK] < t {
                // The whole block ends before `t`: jump to the end of the previous one.
                j -= BLOCK - 1;
                continue;
            }
            if self.end[j] >= t {
                return Some(j);
            }
        })
    }

    pub fn len(&self) -> usize {
        self.start.len()
    }

    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }

    pub fn start(&self, pos: usize) -> u64 {
        self.start[pos]
    }

    pub fn end(&self, pos: usize) -> u64 {
        self.end[pos]
    }

    pub fn dur(&self, pos: usize) -> u64 {
        self.end[pos] - self.start[pos]
    }

    /// First position whose start is at or after `t`.
    pub fn first_starting_at(&self, t: u64) -> usize {
        self.start.partition_point(|&s| s < t)
    }

    /// First position that may still be running at `t` (a span started before the window but
    /// still visible in it).
    pub fn first_running_at(&self, t: u64) -> usize {
        // `max_end` never decreases: every span before this point ends by `t`.
        self.max_end.partition_point(|&e| e <= t)
    }

    /// Summed duration of spans `a..b`.
    pub fn busy(&self, a: usize, b: usize) -> u64 {
        self.prefix[b] - self.prefix[a]
    }

    /// The longest span in `a..b` (the earliest of equals); `a` when the range is empty.
    pub fn longest(&self, a: usize, b: usize) -> usize {
        if b <= a {
            return a;
        }
        let mut best = a;
        let better = |i: usize, best: usize| self.dur(i) > self.dur(best);
        let first_full = a.div_ceil(BLOCK);
        let last_full = b / BLOCK; // blocks first_full..last_full lie inside a..b
        if first_full >= last_full {
            for i in a..b {
                if better(i, best) {
                    best = i;
                }
            }
            return best;
        }
        for i in a..first_full * BLOCK {
            if better(i, best) {
                best = i;
            }
        }
        for blk in first_full..last_full {
            let i = self.block_best[blk] as usize;
            if better(i, best) {
                best = i;
            }
        }
        for i in last_full * BLOCK..b {
            if better(i, best) {
                best = i;
            }
        }
        best
    }

    /// What to draw for the window `[t0, t1)` on `width` pixels: spans at least `min_px`
    /// wide as themselves, the rest merged per pixel column. Items come left to right.
    pub fn visible(&self, t0: f64, t1: f64, width: f64, min_px: f64, out: &mut Vec<Item>) {
        out.clear();
        if self.is_empty()
            || t1.is_nan()
            || t0.is_nan()
            || t1 <= t0
            || width.is_nan()
            || width <= 0.0
        {
            return;
        }
        let ns_per_px = (t1 - t0) / width;
        let to_x = |t: u64| (t as f64 - t0) / ns_per_px;
        let n = self.len();
        let mut i = self.first_running_at(t0.max(0.0) as u64);
        while i < n && (self.start[i] as f64) < t1 {
            // Overlapping spans (ranges of several threads on one lane) can leave spans that
            // ended before the window between here and the first visible one.
            if (self.end[i] as f64) <= t0 {
                i += 1;
                continue;
            }
            let x0 = to_x(self.start[i]);
            let x1 = to_x(self.end[i]);
            if x1 - x0 >= min_px {
                out.push(Item::Span {
                    pos: i as u32,
                    x0,
                    x1,
                });
                i += 1;
                continue;
            }
            // A pixel column: every span starting before its right edge joins it.
            let col = x0.floor();
            let col_end = t0 + (col + 1.0) * ns_per_px;
            let j = if col_end >= u64::MAX as f64 {
                n
            } else {
                (i + 1).max(i + self.start[i..].partition_point(|&s| (s as f64) < col_end))
            };
            let j = j.min(n);
            let best = self.longest(i, j);
            out.push(Item::Merged {
                x0: col,
                first: i as u32,
                count: (j - i) as u32,
                busy: (self.busy(i, j) as f64 / ns_per_px).min(1.0),
                best: best as u32,
            });
            // A long span that started in this column still shows its full width.
            if to_x(self.end[best]) - col > 1.0 + min_px {
                out.push(Item::Span {
                    pos: best as u32,
                    x0: col + 1.0,
                    x1: to_x(self.end[best]),
                });
            }
            i = j;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(spans: &[(u64, u64)]) -> SpanIndex {
        SpanIndex::new(spans.iter().copied())
    }

    #[test]
    fn wide_spans_draw_as_themselves() {
        let ix = lane(&[(0, 100), (200, 300), (600, 50)]);
        let mut out = Vec::new();
        // 1 ns per pixel.
        ix.visible(0.0, 1000.0, 1000.0, 1.0, &mut out);
        assert_eq!(
            out,
            vec![
                Item::Span {
                    pos: 0,
                    x0: 0.0,
                    x1: 100.0
                },
                Item::Span {
                    pos: 1,
                    x0: 200.0,
                    x1: 500.0
                },
                Item::Span {
                    pos: 2,
                    x0: 600.0,
                    x1: 650.0
                },
            ]
        );
    }

    #[test]
    fn narrow_spans_merge_into_one_column_with_busy_and_longest() {
        // Ten 1 ns kernels and one 3 ns kernel, all inside the first 100 ns; 100 ns per pixel.
        let mut spans: Vec<(u64, u64)> = (0..10).map(|k| (k * 5, 1)).collect();
        spans.push((60, 3));
        spans.push((250, 1));
        let ix = lane(&spans);
        let mut out = Vec::new();
        ix.visible(0.0, 1000.0, 10.0, 1.0, &mut out);
        assert_eq!(out.len(), 2);
        match out[0] {
            Item::Merged {
                x0,
                first,
                count,
                busy,
                best,
            } => {
                assert_eq!((x0, first, count, best), (0.0, 0, 11, 10));
                assert!((busy - 0.13).abs() < 1e-12);
            }
            ref other => panic!("expected a merged column, got {other:?}"),
        }
        assert!(matches!(out[1], Item::Merged { x0, first: 11, count: 1, .. } if x0 == 2.0));
    }

    #[test]
    fn a_million_spans_cost_at_most_a_few_items_per_pixel() {
        let spans: Vec<(u64, u64)> = (0..1_000_000u64).map(|k| (k * 10, 4)).collect();
        let ix = lane(&spans);
        let mut out = Vec::new();
        ix.visible(0.0, 1e7, 1500.0, 1.0, &mut out);
        assert!(out.len() <= 1500, "{} items", out.len());
        let merged: u32 = out
            .iter()
            .map(|it| match it {
                Item::Merged { count, .. } => *count,
                Item::Span { .. } => 1,
            })
            .sum();
        assert_eq!(merged, 1_000_000, "every span is in exactly one item");
        // Zoomed in on 2 µs: individual spans of 4 ns on 1500 px are ~3 px wide.
        ix.visible(5e6, 5e6 + 2000.0, 1500.0, 1.0, &mut out);
        assert_eq!(out.len(), 200);
        assert!(out.iter().all(|it| matches!(it, Item::Span { .. })));
    }

    #[test]
    fn a_span_started_before_the_window_is_drawn() {
        let ix = lane(&[(0, 1000), (1100, 10)]);
        let mut out = Vec::new();
        ix.visible(500.0, 1500.0, 1000.0, 1.0, &mut out);
        assert_eq!(
            out[0],
            Item::Span {
                pos: 0,
                x0: -500.0,
                x1: 500.0
            }
        );
    }

    #[test]
    fn longest_uses_blocks_and_edges() {
        let mut spans: Vec<(u64, u64)> = (0..1000u64).map(|k| (k * 10, 1)).collect();
        spans[700].1 = 9;
        spans[3].1 = 5;
        let ix = lane(&spans);
        assert_eq!(ix.longest(0, 1000), 700);
        assert_eq!(ix.longest(0, 700), 3);
        assert_eq!(ix.longest(701, 1000), 701);
        assert_eq!(ix.longest(2, 5), 3);
        assert_eq!(ix.longest(5, 5), 5);
    }

    #[test]
    fn empty_and_degenerate_windows_draw_nothing() {
        let mut out = vec![Item::Span {
            pos: 0,
            x0: 0.0,
            x1: 1.0,
        }];
        SpanIndex::default().visible(0.0, 1.0, 10.0, 1.0, &mut out);
        assert!(out.is_empty());
        lane(&[(0, 10)]).visible(5.0, 5.0, 10.0, 1.0, &mut out);
        assert!(out.is_empty());
        lane(&[(0, 10)]).visible(0.0, 10.0, 0.0, 1.0, &mut out);
        assert!(out.is_empty());
    }
}
