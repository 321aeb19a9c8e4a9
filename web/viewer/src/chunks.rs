//! A chunked timeline as the viewer holds it: which chunks a window needs, which are loaded,
//! and each stream's overview, drawn while a window holds more kernels than load at once.
//!
//! The run's kernel columns hold the long kernels that started before the loaded chunks
//! (`prepended`), then one contiguous run of chunks (`loaded`); a window inside
//! [`Chunked::complete`] is drawn kernel by kernel, any other from the overview.

use std::collections::BTreeMap;
use std::ops::Range;

use llmprof_bundle::chunks::{check_kernels, decode_chunk};
use llmprof_bundle::{ChunkInfo, ChunkedTimeline, OptU32, TimelineKernels};

use crate::model::LoadError;

/// A chunked timeline's chunks and overview.
#[derive(Debug, Clone, Default)]
pub struct Chunked {
    pub chunks: Vec<ChunkInfo>,
    /// `reach[i]`: the latest end among the kernels of chunks `0..=i`.
    reach: Vec<u64>,
    pub total: u64,
    pub budget: u64,
    pub bucket_ns: u64,
    /// Per stream (index into the timeline's `streams`): its overview, if it has kernels.
    pub lanes: Vec<Option<OverviewLane>>,
    /// The chunks whose kernels are the run's kernel columns (after `prepended`).
    pub loaded: Range<usize>,
    /// The head's long kernels and their positions in the whole timeline.
    long: TimelineKernels,
    long_positions: Vec<u64>,
    /// Positions of the long kernels at the front of the run's kernel columns: those that
    /// start before the loaded chunks and reach into the span they complete.
    prepended: Vec<u64>,
    /// Decoded chunks of the window being loaded.
    cache: BTreeMap<usize, TimelineKernels>,
}

/// One stream's overview with prefix sums, so any run of buckets sums in O(1).
#[derive(Debug, Clone, Default)]
pub struct OverviewLane {
    /// `busy[b]`: kernel time in buckets `0..b`.
    busy: Vec<u64>,
    /// `count[b]`: kernels starting in buckets `0..b`.
    count: Vec<u64>,
    longest: Vec<Option<u32>>,
}

/// A run of buckets summed: what one pixel column of an overview lane shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub kernels: u64,
    /// Kernel time over the buckets' time, capped at 1.
    pub busy: f64,
    /// The longest kernel's bundle row (the first bucket's that has one).
    pub longest: Option<u32>,
    /// The buckets' span, ns: whole buckets around the time asked for.
    pub span: (u64, u64),
}

impl Chunked {
    /// Checks the head's chunk table and overview; the chunks come later.
    pub fn new(head: &ChunkedTimeline) -> Result<Chunked, LoadError> {
        let bad = |what: &str| LoadError(format!("the chunked timeline's {what}"));
        let mut next = 0u64;
        let mut reach = Vec::with_capacity(head.chunks.len());
        let mut latest = 0u64;
        for (i, c) in head.chunks.iter().enumerate() {
            if c.first != next || c.count == 0 || c.start_ns > c.last_start_ns {
                return Err(bad(&format!(
                    "chunk {i} does not follow chunk {}",
                    i.max(1) - 1
                )));
            }
            if i > 0 && head.chunks[i - 1].last_start_ns > c.start_ns {
                return Err(bad(&format!("chunk {i} starts before the chunk before it")));
            }
            next += c.count as u64;
            latest = latest.max(c.end_ns);
            reach.push(latest);
        }
        if next != head.kernels {
            return Err(bad(&format!(
                "chunks hold {next} kernels, not the {} it says",
                head.kernels
            )));
        }
        let streams = head.timeline.streams.len();
        check_kernels(&head.long, streams).map_err(|e| bad(&format!("long kernels: {e}")))?;
        // Each long kernel starts inside the chunk its position is in.
        let in_its_chunk = |(&p, &start): (&u64, &u64)| {
            let c = head.chunks.partition_point(|c| c.first <= p).checked_sub(1);
            c.and_then(|c| head.chunks.get(c))
                .is_some_and(|c| c.start_ns <= start && start <= c.last_start_ns)
        };
        let long_ok = head.long.start.len() == head.long_positions.len()
            && head.long_positions.windows(2).all(|w| w[0] < w[1])
            && head.long_positions.last().is_none_or(|&p| p < head.kernels)
            && head
                .long_positions
                .iter()
                .zip(&head.long.start)
                .all(in_its_chunk);
        if !long_ok {
            return Err(bad("long kernels do not match their positions"));
        }
        let mut lanes: Vec<Option<OverviewLane>> = vec![None; streams];
        for l in &head.overview.lanes {
            let n = l.count.len();
            if l.busy_ns.len() != n || l.longest.len() != n {
                return Err(bad("overview columns have different lengths"));
            }
            let slot = lanes
                .get_mut(l.stream as usize)
                .ok_or_else(|| bad("overview names a stream past `streams`"))?;
            *slot = Some(OverviewLane::new(l));
        }
        if head
            .long
            .stream
            .iter()
            .any(|&s| lanes[s as usize].is_none())
        {
            return Err(bad(
                "long kernels run on a stream the overview does not have",
            ));
        }
        Ok(Chunked {
            chunks: head.chunks.clone(),
            reach,
            total: head.kernels,
            budget: head.load_budget.max(1),
            bucket_ns: head.overview.bucket_ns.max(1),
            lanes,
            loaded: 0..0,
            long: head.long.clone(),
            long_positions: head.long_positions.clone(),
            prepended: Vec::new(),
            cache: BTreeMap::new(),
        })
    }

    /// The chunks to load for the window `[t0, t1]` (ns): the window and its width on each
    /// side where that fits the budget (a pan then stays on loaded kernels longer), else half
    /// its width, else the window alone; `None` when even that holds more kernels than the
    /// budget (the overview is drawn).
    pub fn wanted(&self, t0: f64, t1: f64) -> Option<Range<usize>> {
        let span = (t1 - t0).max(0.0);
        [span, span / 2.0, 0.0].into_iter().find_map(|pad| {
            let r = self.chunks_over(t0 - pad, t1 + pad);
            (self.kernels_in(&r) <= self.budget).then_some(r)
        })
    }

    /// [`Chunked::wanted`] when it differs from the loaded chunks: what a load would change.
    pub fn to_load(&self, t0: f64, t1: f64) -> Option<Range<usize>> {
        self.wanted(t0, t1).filter(|w| *w != self.loaded)
    }

    /// The chunks holding every kernel that overlaps `[t0, t1]`.
    fn chunks_over(&self, t0: f64, t1: f64) -> Range<usize> {
        let a = self.reach.partition_point(|&r| (r as f64) < t0);
        let b = self.chunks.partition_point(|c| c.start_ns as f64 <= t1);
        a..b.max(a)
    }

    fn kernels_in(&self, r: &Range<usize>) -> u64 {
        self.chunks[r.clone()].iter().map(|c| c.count as u64).sum()
    }

    /// The time span (ns) every kernel of which is in the loaded chunks.
    pub fn complete(&self) -> (f64, f64) {
        let Range { start: a, end: b } = self.loaded;
        let lo = match a.checked_sub(1) {
            Some(p) => self.reach[p] as f64,
            None => f64::NEG_INFINITY,
        };
        let hi = self
            .chunks
            .get(b)
            .map_or(f64::INFINITY, |c| c.start_ns as f64);
        (lo, hi)
    }

    /// Whether every kernel of `[t0, t1]` is loaded.
    pub fn covers(&self, t0: f64, t1: f64) -> bool {
        let (lo, hi) = self.complete();
        lo <= t0 && t1 <= hi
    }

    /// Chunks of `want` neither loaded nor decoded yet.
    pub fn missing(&self, want: &Range<usize>) -> Vec<usize> {
        want.clone()
            .filter(|i| !self.cache.contains_key(i))
            .collect()
    }

    /// Decodes chunk `i`'s bytes and keeps them until [`Chunked::assemble`].
    pub fn add(&mut self, i: usize, bytes: &[u8]) -> Result<(), LoadError> {
        let info = self
            .chunks
            .get(i)
            .ok_or_else(|| LoadError(format!("no kernel chunk {i} in this timeline")))?;
        let k = decode_chunk(bytes).map_err(|e| LoadError(format!("kernel chunk {i}: {e}")))?;
        let n = k.start.len();
        let other = |what: &str| {
            LoadError(format!(
                "kernel chunk {i} holds other kernels than the timeline lists ({what}; a file \
                 from another build?)"
            ))
        };
        if n != info.count as usize
            || k.start.first() != Some(&info.start_ns)
            || k.start.last() != Some(&info.last_start_ns)
        {
            return Err(other("its count or first and last start differ"));
        }
        if k.stream
            .iter()
            .any(|&s| self.lanes.get(s as usize).is_none_or(Option::is_none))
        {
            return Err(other("a kernel on a stream the overview does not have"));
        }
        // Only the long kernels may run past the chunk's end: the window logic relies on it.
        let past_end = (0..n).any(|j| {
            let end = k.start[j].saturating_add(k.dur[j]);
            let g = info.first + j as u64;
            end > info.end_ns && self.long_positions.binary_search(&g).is_err()
        });
        if past_end {
            return Err(other("a kernel ends after the chunk's end"));
        }
        self.cache.insert(i, k);
        Ok(())
    }

    /// The kernel columns of chunks `want`, once all are decoded (`None` before), and what
    /// [`Chunked::commit`] makes of them the loaded chunks once the run took the columns.
    /// Decoded chunks outside `want` are dropped.
    pub fn assemble(&mut self, want: Range<usize>) -> Option<(TimelineKernels, Loading)> {
        if !self.missing(&want).is_empty() {
            return None;
        }
        self.cache.retain(|i, _| want.contains(i));
        // Long kernels of earlier chunks that reach into the span these chunks complete.
        let lo = match want.start.checked_sub(1) {
            Some(p) => self.reach[p] as f64,
            None => f64::NEG_INFINITY,
        };
        let first = self.first_of(want.start);
        let before = self.long_positions.partition_point(|&p| p < first);
        let rows: Vec<usize> = (0..before)
            .filter(|&i| (self.long.start[i].saturating_add(self.long.dur[i]) as f64) > lo)
            .collect();
        let prepended = rows.iter().map(|&i| self.long_positions[i]).collect();
        let front = self.long.rows(rows.iter().copied());
        let parts: Vec<&TimelineKernels> = std::iter::once(&front)
            .chain(want.clone().filter_map(|i| self.cache.get(&i)))
            .collect();
        Some((
            concat(&parts),
            Loading {
                chunks: want,
                prepended,
            },
        ))
    }

    /// Makes `loading` the loaded chunks (after the run took their columns).
    pub fn commit(&mut self, loading: Loading) {
        self.loaded = loading.chunks;
        self.prepended = loading.prepended;
    }

    /// Position in the whole timeline of chunk `c`'s first kernel (the total past the last).
    fn first_of(&self, c: usize) -> u64 {
        self.chunks.get(c).map_or(self.total, |c| c.first)
    }

    /// Position of the first loaded chunk's first kernel in the whole timeline.
    fn offset(&self) -> u64 {
        self.first_of(self.loaded.start)
    }

    /// The position in the whole timeline of kernel `local` of the run's columns.
    pub fn global(&self, local: u32) -> u64 {
        let l = local as usize;
        match self.prepended.get(l) {
            Some(&p) => p,
            None => self.offset() + (l - self.prepended.len()) as u64,
        }
    }

    /// Where kernel `global` of the whole timeline is in the run's `n` columns, if loaded.
    pub fn local(&self, global: u64, n: usize) -> Option<u32> {
        let local = match self.prepended.binary_search(&global) {
            Ok(i) => i,
            Err(_) => {
                let past = global.checked_sub(self.offset())?;
                self.prepended.len() + usize::try_from(past).ok()?
            }
        };
        (local < n).then(|| u32::try_from(local).ok()).flatten()
    }

    /// What the overview holds of stream `si` over `[t0, t1)` (ns).
    pub fn bucket(&self, si: u32, t0: f64, t1: f64) -> Option<Bucket> {
        let lane = self.lanes.get(si as usize)?.as_ref()?;
        let nb = lane.longest.len();
        let at = |t: f64| ((t.max(0.0) / self.bucket_ns as f64) as usize).min(nb);
        let (a, b) = (at(t0), at(t1).max(at(t0) + 1).min(nb));
        if a >= b {
            return None;
        }
        let busy = (lane.busy[b] - lane.busy[a]) as f64 / ((b - a) as f64 * self.bucket_ns as f64);
        Some(Bucket {
            kernels: lane.count[b] - lane.count[a],
            busy: busy.min(1.0),
            longest: lane.longest[a..b].iter().find_map(|l| *l),
            span: (
                (a as u64).saturating_mul(self.bucket_ns),
                (b as u64).saturating_mul(self.bucket_ns),
            ),
        })
    }
}

/// Chunks [`Chunked::assemble`] put together, not yet the loaded ones.
#[derive(Debug, Clone, PartialEq)]
pub struct Loading {
    chunks: Range<usize>,
    prepended: Vec<u64>,
}

impl OverviewLane {
    fn new(l: &llmprof_bundle::OverviewLane) -> OverviewLane {
        let prefix = |v: &mut dyn Iterator<Item = u64>| {
            let mut sum = 0u64;
            std::iter::once(0)
                .chain(v.map(|x| {
                    sum = sum.saturating_add(x);
                    sum
                }))
                .collect::<Vec<u64>>()
        };
        OverviewLane {
            busy: prefix(&mut l.busy_ns.iter().copied()),
            count: prefix(&mut l.count.iter().map(|&c| c as u64)),
            longest: l.longest.clone(),
        }
    }
}

/// Kernel columns one after the other; an optional column some part lacks is left out.
fn concat(parts: &[&TimelineKernels]) -> TimelineKernels {
    let mut k = TimelineKernels::default();
    // A part without rows (no long kernel in front) says nothing of the optional columns.
    let all = |f: fn(&TimelineKernels) -> &Vec<OptU32>| {
        parts
            .iter()
            .filter(|p| !p.start.is_empty())
            .all(|p| f(p).len() == p.start.len())
    };
    let (launch, range) = (all(|p| &p.launch), all(|p| &p.range));
    let (graph, node) = (all(|p| &p.graph), all(|p| &p.graph_node));
    for p in parts {
        k.start.extend_from_slice(&p.start);
        k.dur.extend_from_slice(&p.dur);
        k.stream.extend_from_slice(&p.stream);
        k.kernel.extend_from_slice(&p.kernel);
        k.stage.extend_from_slice(&p.stage);
        if launch {
            k.launch.extend_from_slice(&p.launch);
        }
        if range {
            k.range.extend_from_slice(&p.range);
        }
        if graph {
            k.graph.extend_from_slice(&p.graph);
        }
        if node {
            k.graph_node.extend_from_slice(&p.graph_node);
        }
    }
    let any = |v: &Vec<OptU32>| v.iter().any(|x| x.is_some());
    if !any(&k.graph) {
        k.graph.clear();
    }
    if !any(&k.graph_node) {
        k.graph_node.clear();
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmprof_bundle::Timeline;

    /// 100 kernels on one stream, 10 ns apart, each 5 ns but kernel 3, which lasts
    /// `long_dur` when given.
    fn timeline(long_dur: Option<u64>) -> Timeline {
        let n = 100u64;
        let mut dur = vec![5; n as usize];
        if let Some(d) = long_dur {
            dur[3] = d;
        }
        let end_ns = (0..n)
            .map(|i| i * 10 + dur[i as usize])
            .fold(10 * n, u64::max);
        Timeline {
            end_ns,
            streams: vec![7],
            kernels: TimelineKernels {
                start: (0..n).map(|i| i * 10).collect(),
                dur,
                stream: vec![0; n as usize],
                kernel: vec![0; n as usize],
                stage: vec![OptU32::NONE; n as usize],
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// [`timeline`] without a long kernel, in chunks of 10, budget 30.
    fn split() -> (ChunkedTimeline, Vec<Vec<u8>>) {
        ChunkedTimeline::split(timeline(None), 10, 100, 30).unwrap()
    }

    #[test]
    fn a_window_wants_its_chunks_with_a_margin_while_they_fit_the_budget() {
        let (head, _) = split();
        let c = Chunked::new(&head).unwrap();
        // 200..300 with half a width each side: 150..350 = chunks 1..4 (30 kernels).
        assert_eq!(c.wanted(200.0, 300.0), Some(1..4));
        // 100..400 padded would need 5 chunks: the window alone, 4 chunks (40) > 30.
        assert_eq!(c.wanted(100.0, 400.0), None);
        assert_eq!(c.wanted(100.0, 250.0), Some(1..3));
        assert_eq!(c.wanted(2000.0, 3000.0), Some(10..10));
    }

    #[test]
    fn loaded_chunks_cover_the_span_no_other_kernel_reaches() {
        let (head, bytes) = split();
        let mut c = Chunked::new(&head).unwrap();
        assert!(!c.covers(0.0, 1.0));
        assert!(c.assemble(1..3).is_none(), "nothing decoded yet");
        for i in c.missing(&(1..3)) {
            c.add(i, &bytes[i]).unwrap();
        }
        let (k, loading) = c.assemble(1..3).unwrap();
        c.commit(loading);
        assert_eq!(k.start.len(), 20);
        assert_eq!(k.start[0], 100);
        assert_eq!((c.global(0), c.global(19)), (10, 29));
        let at = |g| c.local(g, 20);
        assert_eq!((at(10), at(29), at(30)), (Some(0), Some(19), None));
        // Chunk 0 ends at 95; chunk 3 starts at 300.
        assert_eq!(c.complete(), (95.0, 300.0));
        assert!(c.covers(95.0, 300.0));
        assert!(!c.covers(90.0, 200.0));
        assert!(c.add(4, &bytes[5]).unwrap_err().0.contains("other kernels"));
        assert!(c.add(40, &bytes[5]).is_err());
        assert!(c.add(4, &bytes[4][..9]).unwrap_err().0.contains("chunk 4"));
    }

    #[test]
    fn a_long_kernel_is_loaded_with_a_window_it_overlaps_without_its_chunk() {
        let t = timeline(Some(10_000));
        let (mut head, bytes) = ChunkedTimeline::split(t, 10, 100, 30).unwrap();
        let mut c = Chunked::new(&head).unwrap();
        let want = c.wanted(500.0, 600.0).unwrap();
        assert_eq!(want, 4..7, "chunk 0 is not needed for its long kernel");
        for i in c.missing(&want) {
            c.add(i, &bytes[i]).unwrap();
        }
        let (k, loading) = c.assemble(want).unwrap();
        c.commit(loading);
        assert_eq!(k.start.len(), 31);
        assert_eq!(
            (k.start[0], k.dur[0]),
            (30, 10_000),
            "the long kernel comes first"
        );
        assert_eq!((c.global(0), c.global(1)), (3, 40));
        let at = |g| c.local(g, 31);
        assert_eq!((at(3), at(40), at(2)), (Some(0), Some(1), None));
        assert!(c.covers(500.0, 600.0));
        head.long_positions = vec![500];
        assert!(Chunked::new(&head).is_err());
    }

    #[test]
    fn a_long_kernel_reaches_a_window_past_the_last_chunk() {
        let t = timeline(Some(100_000));
        let (head, _) = ChunkedTimeline::split(t, 10, 100, 30).unwrap();
        let mut c = Chunked::new(&head).unwrap();
        let want = c.wanted(50_000.0, 60_000.0).unwrap();
        assert_eq!(want, 10..10);
        let (k, loading) = c.assemble(want).unwrap();
        c.commit(loading);
        assert_eq!((k.start.clone(), k.dur.clone()), (vec![30], vec![100_000]));
        assert_eq!((c.global(0), c.local(3, 1)), (3, Some(0)));
        assert!(c.covers(50_000.0, 60_000.0));
    }

    #[test]
    fn a_chunk_or_head_that_breaks_the_window_rules_is_refused() {
        let (head, bytes) = split();
        let mut c = Chunked::new(&head).unwrap();
        // A kernel running past its chunk's end without being a long kernel.
        let mut bad = head.clone();
        bad.chunks[2].end_ns = 200;
        let mut c2 = Chunked::new(&bad).unwrap();
        assert!(c2.add(2, &bytes[2]).unwrap_err().0.contains("ends after"));
        // A long kernel whose columns are short, or outside its chunk.
        let mut bad = head.clone();
        bad.long_positions = vec![15];
        bad.long.start = vec![150];
        assert!(Chunked::new(&bad).unwrap_err().0.contains("long kernels"));
        bad.long.dur = vec![1];
        bad.long.stream = vec![0];
        bad.long.kernel = vec![0];
        bad.long.stage = vec![OptU32::NONE];
        assert!(Chunked::new(&bad).is_ok());
        bad.long.start = vec![300];
        assert!(
            Chunked::new(&bad).is_err(),
            "a long kernel outside its chunk"
        );
        // A huge bucket width saturates instead of overflowing.
        let mut bad = head;
        bad.overview.bucket_ns = 1 << 63;
        let c3 = Chunked::new(&bad).unwrap();
        assert!(c3.bucket(0, 9.3e18, 9.4e18).is_some());
        assert!(c.add(1, &bytes[1]).is_ok());
    }

    #[test]
    fn a_bucket_sums_busy_time_and_counts_over_its_span() {
        let (head, _) = split();
        let c = Chunked::new(&head).unwrap();
        // Buckets of 11 ns (1001 ns over 100 buckets).
        assert_eq!(c.bucket_ns, 11);
        let b = c.bucket(0, 0.0, 110.0).unwrap();
        assert_eq!(b.kernels, 11);
        assert!((b.busy - 55.0 / 110.0).abs() < 1e-9, "{b:?}");
        assert_eq!(b.longest, Some(0));
        assert_eq!(b.span, (0, 110));
        assert!(c.bucket(1, 0.0, 10.0).is_none(), "no such stream");
    }

    #[test]
    fn a_head_whose_chunks_do_not_add_up_is_refused() {
        let (mut head, _) = split();
        head.kernels += 1;
        assert!(Chunked::new(&head).unwrap_err().0.contains("not the 101"));
        let (mut head, _) = split();
        head.chunks[3].first += 1;
        assert!(Chunked::new(&head).unwrap_err().0.contains("chunk 3"));
        let (mut head, _) = split();
        head.overview.lanes[0].stream = 5;
        assert!(Chunked::new(&head).is_err());
    }
}
