//! A kernel timeline cut by time into binary chunks, for runs too large to load whole.
//!
//! The site writes a large run's timeline as a [`ChunkedTimeline`] head (every column but the
//! kernels', the chunk table, and an [`Overview`] of each stream) and the kernels as chunks of
//! [`encode_chunk`] bytes. The viewer draws the overview while the window holds more kernels
//! than it loads at once ([`ChunkedTimeline::load_budget`]), and otherwise loads the chunks the
//! window shows and draws every kernel.
//!
//! # Chunk bytes
//!
//! Little-endian. `LPKC`, version byte `1`, kernel count `n` (u32), the first kernel's start
//! (u64), then one column per [`TimelineKernels`] field in declaration order: `start` as the
//! offset from that first start, then `dur`, `stream`, `kernel`, `stage`, `launch`, `range`,
//! `graph`, `graph_node`. Each column is a width byte (1, 2, 4 or 8) and `n` unsigned values of
//! that width, the narrowest that holds the column's largest value; an optional column stores
//! `None` as 0 and `Some(v)` as `v + 1`, and width 0 marks a column the timeline does not have.

use serde::{Deserialize, Serialize};

use crate::{OptU32, Timeline, TimelineKernels};

const MAGIC: &[u8; 4] = b"LPKC";
const VERSION: u8 = 1;

/// The head of a chunked timeline: what the viewer loads first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChunkedTimeline {
    /// The kernel chunks in time order (chunk `i` is file `i` of the run's chunks).
    pub chunks: Vec<ChunkInfo>,
    /// Kernels in all chunks.
    pub kernels: u64,
    /// The most kernels the viewer loads at once; a window holding more shows the overview.
    pub load_budget: u64,
    pub overview: Overview,
    /// Kernels that run on past the start of the chunk after next (an all-reduce waiting on a
    /// late peer, a stuck kernel): copied here, so a window they overlap loads them without
    /// the chunks they start in. At most half the load budget of them, the longest.
    pub long: TimelineKernels,
    /// Each long kernel's position in the whole timeline, ascending.
    pub long_positions: Vec<u64>,
    /// Every column of the timeline; the kernel columns are empty (they are in the chunks).
    pub timeline: Timeline,
}

/// One chunk: a run of kernels consecutive in start order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ChunkInfo {
    /// Position of its first kernel in the whole timeline.
    pub first: u64,
    pub count: u32,
    /// Its first and last kernel's start, ns from `t0`.
    pub start_ns: u64,
    pub last_start_ns: u64,
    /// The latest end of its kernels other than the long ones ([`ChunkedTimeline::long`]).
    pub end_ns: u64,
}

/// Each stream's kernels summed over equal time buckets: what the viewer draws of a window
/// too large to load.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    /// Width of a bucket; bucket `b` covers `[b × bucket_ns, (b + 1) × bucket_ns)`.
    pub bucket_ns: u64,
    pub lanes: Vec<OverviewLane>,
}

/// One stream's buckets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OverviewLane {
    /// Index into the timeline's `streams`.
    pub stream: u32,
    /// Kernels that start in the bucket.
    pub count: Vec<u32>,
    /// Kernel time inside the bucket (summed, so overlapping kernels can exceed the bucket).
    pub busy_ns: Vec<u64>,
    /// The bundle's kernel row of the longest kernel starting in the bucket, else of the
    /// kernel running through it (the one ending last among those started before), else
    /// `null`.
    pub longest: Vec<Option<u32>>,
}

/// Why chunk bytes cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkError(pub String);

impl std::fmt::Display for ChunkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ChunkError {}

impl ChunkedTimeline {
    /// Cuts `timeline` into chunks of at most `per_chunk` kernels and an overview of at most
    /// `buckets` buckets; returns the head and each chunk's bytes. Refuses kernel columns of
    /// different lengths, a stream past `streams` and kernels out of start order.
    pub fn split(
        mut timeline: Timeline,
        per_chunk: usize,
        buckets: usize,
        load_budget: u64,
    ) -> Result<(ChunkedTimeline, Vec<Vec<u8>>), ChunkError> {
        check_kernels(&timeline.kernels, timeline.streams.len())?;
        let k = std::mem::take(&mut timeline.kernels);
        let n = k.start.len();
        let overview = overview(&k, timeline.streams.len(), timeline.end_ns, buckets);
        let per_chunk = per_chunk.max(1);
        let long = long_kernels(&k, per_chunk, (load_budget / 2) as usize);
        let mut chunks = Vec::new();
        let mut bytes = Vec::new();
        let mut first = 0;
        while first < n {
            let last = (first + per_chunk).min(n);
            let end_ns = (first..last)
                .filter(|i| long.binary_search(&(*i as u64)).is_err())
                .map(|i| k.start[i].saturating_add(k.dur[i]))
                .max()
                .unwrap_or(k.start[last - 1]);
            chunks.push(ChunkInfo {
                first: first as u64,
                count: (last - first) as u32,
                start_ns: k.start[first],
                last_start_ns: k.start[last - 1],
                end_ns,
            });
            bytes.push(encode_chunk(&k, first..last));
            first = last;
        }
        let head = ChunkedTimeline {
            chunks,
            kernels: n as u64,
            load_budget,
            overview,
            long: k.rows(long.iter().map(|&p| p as usize)),
            long_positions: long,
            timeline,
        };
        Ok((head, bytes))
    }
}

/// Kernel columns of one length (the optional ones empty or of that length), streams inside
/// `streams`, starts in order: what [`ChunkedTimeline::split`] and a loaded chunk need.
pub fn check_kernels(k: &TimelineKernels, streams: usize) -> Result<(), ChunkError> {
    let n = k.start.len();
    let opt_ok = |c: &[OptU32]| c.is_empty() || c.len() == n;
    let lengths = k.dur.len() == n
        && k.stream.len() == n
        && k.kernel.len() == n
        && k.stage.len() == n
        && [&k.launch, &k.range, &k.graph, &k.graph_node]
            .iter()
            .all(|c| opt_ok(c));
    if !lengths {
        return Err(ChunkError(
            "the kernel columns have different lengths".into(),
        ));
    }
    if k.stream.iter().any(|&s| s as usize >= streams) {
        return Err(ChunkError("a kernel's stream is past `streams`".into()));
    }
    if k.start.windows(2).any(|w| w[0] > w[1]) {
        return Err(ChunkError("the kernels are not sorted by start".into()));
    }
    Ok(())
}

/// Positions (ascending) of the kernels that end after the start of the chunk after next, at
/// most `cap` of them (the longest).
fn long_kernels(k: &TimelineKernels, per_chunk: usize, cap: usize) -> Vec<u64> {
    let n = k.start.len();
    let mut long: Vec<usize> = (0..n)
        .filter(|&i| {
            let after_next = (i / per_chunk + 2) * per_chunk;
            after_next < n && k.start[i].saturating_add(k.dur[i]) > k.start[after_next]
        })
        .collect();
    if long.len() > cap {
        long.sort_by_key(|&i| (std::cmp::Reverse(k.dur[i]), i));
        long.truncate(cap);
        long.sort_unstable();
    }
    long.into_iter().map(|i| i as u64).collect()
}

/// Buckets of equal width over `[0, end_ns]`, at most `buckets` of them.
fn overview(k: &TimelineKernels, streams: usize, end_ns: u64, buckets: usize) -> Overview {
    let span = end_ns.saturating_add(1);
    let bucket_ns = span.div_ceil(buckets.max(1) as u64).max(1);
    let nb = span.div_ceil(bucket_ns) as usize;
    let mut lanes: Vec<Option<LaneSums>> = (0..streams).map(|_| None).collect();
    for i in 0..k.start.len() {
        let Some(slot) = lanes.get_mut(k.stream[i] as usize) else {
            continue;
        };
        let lane = slot.get_or_insert_with(|| LaneSums::new(nb));
        lane.add(k.start[i], k.dur[i], k.kernel[i], bucket_ns);
    }
    let lanes = lanes
        .into_iter()
        .zip(0u32..)
        .filter_map(|(l, stream)| Some(l?.finish(stream, bucket_ns)))
        .collect();
    Overview { bucket_ns, lanes }
}

/// One stream's sums while kernels are added in start order.
struct LaneSums {
    count: Vec<u32>,
    /// Time of kernels inside the bucket they start or end in.
    edge_ns: Vec<u64>,
    /// Difference array of kernels covering whole buckets.
    cover: Vec<i64>,
    /// Longest kernel starting in each bucket: (duration, row).
    longest: Vec<Option<(u64, u32)>>,
    /// Per bucket: the kernel ending last among those starting there (end, row).
    latest: Vec<Option<(u64, u32)>>,
}

impl LaneSums {
    fn new(nb: usize) -> LaneSums {
        LaneSums {
            count: vec![0; nb],
            edge_ns: vec![0; nb],
            cover: vec![0; nb + 1],
            longest: vec![None; nb],
            latest: vec![None; nb],
        }
    }

    fn add(&mut self, start: u64, dur: u64, row: u32, bucket_ns: u64) {
        let nb = self.count.len();
        let end = start.saturating_add(dur);
        let b0 = ((start / bucket_ns) as usize).min(nb - 1);
        let b1 = ((end / bucket_ns) as usize).min(nb - 1);
        self.count[b0] = self.count[b0].saturating_add(1);
        if b0 == b1 {
            self.edge_ns[b0] = self.edge_ns[b0].saturating_add(dur);
        } else {
            let b0_end = (b0 as u64 + 1).saturating_mul(bucket_ns);
            self.edge_ns[b0] = self.edge_ns[b0].saturating_add(b0_end.saturating_sub(start));
            let b1_start = (b1 as u64).saturating_mul(bucket_ns);
            self.edge_ns[b1] = self.edge_ns[b1].saturating_add(end.saturating_sub(b1_start));
            self.cover[b0 + 1] += 1;
            self.cover[b1] -= 1;
        }
        if self.longest[b0].is_none_or(|(d, _)| dur > d) {
            self.longest[b0] = Some((dur, row));
        }
        if self.latest[b0].is_none_or(|(e, _)| end > e) {
            self.latest[b0] = Some((end, row));
        }
    }

    fn finish(self, stream: u32, bucket_ns: u64) -> OverviewLane {
        let nb = self.count.len();
        let mut busy_ns = Vec::with_capacity(nb);
        let mut longest = Vec::with_capacity(nb);
        let mut covering = 0i64;
        let mut running: Option<(u64, u32)> = None;
        for b in 0..nb {
            covering += self.cover[b];
            let full = (covering.max(0) as u64).saturating_mul(bucket_ns);
            busy_ns.push(self.edge_ns[b].saturating_add(full));
            let bucket_start = (b as u64).saturating_mul(bucket_ns);
            let through = running.filter(|&(end, _)| end > bucket_start).map(|r| r.1);
            longest.push(self.longest[b].map(|(_, row)| row).or(through));
            if let Some(l) = self.latest[b] {
                if running.is_none_or(|(e, _)| l.0 > e) {
                    running = Some(l);
                }
            }
        }
        OverviewLane {
            stream,
            count: self.count,
            busy_ns,
            longest,
        }
    }
}

/// The kernels `rows` of `k` (sorted by start, as [`ChunkedTimeline::split`] checks) as chunk
/// bytes (see the module docs).
pub fn encode_chunk(k: &TimelineKernels, rows: std::ops::Range<usize>) -> Vec<u8> {
    let n = rows.len();
    let base = rows.clone().next().map_or(0, |i| k.start[i]);
    let mut out = Vec::with_capacity(16 + n * 16);
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&(n as u32).to_le_bytes());
    out.extend_from_slice(&base.to_le_bytes());
    let plain = |col: &[u64]| Some(rows.clone().map(|i| col[i]).collect::<Vec<u64>>());
    let small = |col: &[u32]| Some(rows.clone().map(|i| col[i] as u64).collect::<Vec<u64>>());
    let opt = |col: &[OptU32]| {
        (col.len() == k.start.len()).then(|| {
            rows.clone()
                .map(|i| col[i].to_shifted())
                .collect::<Vec<u64>>()
        })
    };
    let columns = [
        Some(
            rows.clone()
                .map(|i| k.start[i].saturating_sub(base))
                .collect(),
        ),
        plain(&k.dur),
        small(&k.stream),
        small(&k.kernel),
        opt(&k.stage),
        opt(&k.launch),
        opt(&k.range),
        opt(&k.graph),
        opt(&k.graph_node),
    ];
    for col in &columns {
        write_column(&mut out, col.as_deref());
    }
    out
}

fn write_column(out: &mut Vec<u8>, values: Option<&[u64]>) {
    let Some(values) = values else {
        out.push(0);
        return;
    };
    let max = values.iter().copied().max().unwrap_or(0);
    let width: u8 = match max {
        0..=0xff => 1,
        0x100..=0xffff => 2,
        0x1_0000..=0xffff_ffff => 4,
        _ => 8,
    };
    out.push(width);
    for v in values {
        out.extend_from_slice(&v.to_le_bytes()[..width as usize]);
    }
}

/// Reads chunk bytes back into kernel columns; every malformed input is an error, never a
/// panic.
pub fn decode_chunk(bytes: &[u8]) -> Result<TimelineKernels, ChunkError> {
    let mut r = Reader { bytes, at: 0 };
    if r.take(4)? != MAGIC {
        return Err(ChunkError("not a kernel chunk (no LPKC mark)".into()));
    }
    let version = r.take(1)?[0];
    if version != VERSION {
        return Err(ChunkError(format!(
            "kernel chunk version {version}; this viewer reads version {VERSION}"
        )));
    }
    let n = u32::from_le_bytes(r.array()?) as usize;
    let base = u64::from_le_bytes(r.array()?);
    let need = |c: Option<Vec<u64>>, what: &str| {
        c.ok_or_else(|| ChunkError(format!("kernel chunk has no {what} column")))
    };
    let start = need(r.column(n)?, "start")?
        .into_iter()
        .map(|d| base.checked_add(d))
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(|| ChunkError("a kernel start overflows".into()))?;
    let dur = need(r.column(n)?, "dur")?;
    let stream = to_u32(need(r.column(n)?, "stream")?)?;
    let kernel = to_u32(need(r.column(n)?, "kernel")?)?;
    let stage = to_opt(r.column(n)?)?;
    let (launch, range, graph, graph_node) = (
        to_opt(r.column(n)?)?,
        to_opt(r.column(n)?)?,
        to_opt(r.column(n)?)?,
        to_opt(r.column(n)?)?,
    );
    if r.at != bytes.len() {
        return Err(ChunkError(format!(
            "kernel chunk has {} bytes after its last column",
            bytes.len() - r.at
        )));
    }
    if stage.is_empty() && n > 0 {
        return Err(ChunkError("kernel chunk has no stage column".into()));
    }
    if start.windows(2).any(|w| w[0] > w[1]) {
        return Err(ChunkError("kernel chunk is not sorted by start".into()));
    }
    Ok(TimelineKernels {
        start,
        dur,
        stream,
        kernel,
        stage,
        launch,
        range,
        graph,
        graph_node,
    })
}

fn to_u32(v: Vec<u64>) -> Result<Vec<u32>, ChunkError> {
    v.into_iter()
        .map(|x| u32::try_from(x).map_err(|_| ChunkError(format!("{x} does not fit a u32 column"))))
        .collect()
}

fn to_opt(v: Option<Vec<u64>>) -> Result<Vec<OptU32>, ChunkError> {
    v.unwrap_or_default()
        .into_iter()
        .map(|x| match x {
            0 => Ok(OptU32::NONE),
            x => u32::try_from(x - 1)
                .map(OptU32::some)
                .map_err(|_| ChunkError(format!("{x} does not fit an optional u32 column"))),
        })
        .collect()
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], ChunkError> {
        let end = self.at.checked_add(len).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| ChunkError("kernel chunk ends early".into()))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ChunkError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    /// A column of `n` values; `None` for width 0 (a column the timeline lacks).
    fn column(&mut self, n: usize) -> Result<Option<Vec<u64>>, ChunkError> {
        let width = self.take(1)?[0] as usize;
        if width == 0 {
            return Ok(None);
        }
        if ![1, 2, 4, 8].contains(&width) {
            return Err(ChunkError(format!("kernel chunk column width {width}")));
        }
        let raw = self.take(
            n.checked_mul(width)
                .ok_or_else(|| ChunkError("kernel chunk column is larger than memory".into()))?,
        )?;
        let values = raw
            .chunks_exact(width)
            .map(|c| {
                let mut b = [0u8; 8];
                b[..width].copy_from_slice(c);
                u64::from_le_bytes(b)
            })
            .collect();
        Ok(Some(values))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernels() -> TimelineKernels {
        TimelineKernels {
            start: vec![0, 5, 5, 300, 70_000, 5_000_000_000],
            dur: vec![10, 1, 400, 2, 1, 7],
            stream: vec![0, 1, 0, 0, 1, 0],
            kernel: vec![3, 2, 1, 0, 4, 70_000],
            stage: OptU32::column(&[None, Some(0), Some(1), None, Some(u32::MAX - 1), None]),
            launch: vec![OptU32::some(0); 6],
            range: vec![],
            graph: vec![],
            graph_node: vec![],
        }
    }

    #[test]
    fn chunks_read_back_what_was_written_at_every_width() {
        let k = kernels();
        for rows in [0..6, 0..3, 2..6, 5..6, 3..3] {
            let back = decode_chunk(&encode_chunk(&k, rows.clone())).unwrap();
            let want = TimelineKernels {
                start: k.start[rows.clone()].to_vec(),
                dur: k.dur[rows.clone()].to_vec(),
                stream: k.stream[rows.clone()].to_vec(),
                kernel: k.kernel[rows.clone()].to_vec(),
                stage: k.stage[rows.clone()].to_vec(),
                launch: k.launch[rows.clone()].to_vec(),
                ..Default::default()
            };
            assert_eq!(back, want, "rows {rows:?}");
        }
    }

    #[test]
    fn every_cut_of_a_chunk_is_an_error_not_a_panic() {
        let bytes = encode_chunk(&kernels(), 0..6);
        for len in 0..bytes.len() {
            assert!(decode_chunk(&bytes[..len]).is_err(), "cut at {len}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(decode_chunk(&long)
            .unwrap_err()
            .0
            .contains("after its last column"));
        let mut bad = bytes;
        bad[4] = 9;
        assert!(decode_chunk(&bad).unwrap_err().0.contains("version 9"));
    }

    #[test]
    fn the_overview_sums_busy_time_and_names_the_longest_kernel() {
        let timeline = Timeline {
            end_ns: 99,
            streams: vec![7, 8],
            kernels: TimelineKernels {
                // Stream 0: a kernel across buckets 0..=3, then two in bucket 5.
                start: vec![5, 50, 52],
                dur: vec![30, 2, 5],
                stream: vec![0, 0, 0],
                kernel: vec![4, 1, 2],
                stage: vec![OptU32::NONE; 3],
                ..Default::default()
            },
            ..Default::default()
        };
        let (head, chunks) = ChunkedTimeline::split(timeline, 2, 10, 1000).unwrap();
        assert_eq!(head.overview.bucket_ns, 10);
        let lane = &head.overview.lanes[0];
        assert_eq!(
            head.overview.lanes.len(),
            1,
            "no lane for a stream without kernels"
        );
        assert_eq!(lane.busy_ns[..6], [5, 10, 10, 5, 0, 7]);
        assert_eq!(lane.count[..6], [1, 0, 0, 0, 0, 2]);
        assert_eq!(
            lane.longest[..6],
            [Some(4), Some(4), Some(4), Some(4), None, Some(2)]
        );
        assert_eq!(chunks.len(), 2);
        assert_eq!(
            head.chunks[1],
            ChunkInfo {
                first: 2,
                count: 1,
                start_ns: 52,
                last_start_ns: 52,
                end_ns: 57
            }
        );
        assert_eq!(head.chunks[0].end_ns, 52);
        assert!(head.long_positions.is_empty());
    }

    #[test]
    fn a_timeline_that_breaks_the_columns_rules_is_refused() {
        let good = Timeline {
            streams: vec![7],
            kernels: TimelineKernels {
                start: vec![5, 1],
                dur: vec![1, 1],
                stream: vec![0, 0],
                kernel: vec![0, 0],
                stage: vec![OptU32::NONE; 2],
                ..Default::default()
            },
            ..Default::default()
        };
        let err = |t: Timeline| ChunkedTimeline::split(t, 2, 4, 10).unwrap_err().0;
        assert!(err(good.clone()).contains("not sorted"));
        let mut t = good.clone();
        t.kernels.start = vec![1, 5];
        t.kernels.dur.pop();
        assert!(err(t).contains("different lengths"));
        let mut t = good;
        t.kernels.start = vec![1, 5];
        t.kernels.stream[1] = 1;
        assert!(err(t).contains("past `streams`"));
    }

    #[test]
    fn a_kernel_running_past_the_chunk_after_next_is_kept_in_the_head() {
        // Ten kernels 10 ns apart, chunks of 2; kernel 1 runs to the end.
        let n = 10u64;
        let mut dur = vec![5; n as usize];
        dur[1] = 200;
        let timeline = Timeline {
            end_ns: 210,
            streams: vec![7],
            kernels: TimelineKernels {
                start: (0..n).map(|i| i * 10).collect(),
                dur,
                stream: vec![0; n as usize],
                kernel: (0..n as u32).collect(),
                stage: vec![OptU32::NONE; n as usize],
                ..Default::default()
            },
            ..Default::default()
        };
        let (head, _) = ChunkedTimeline::split(timeline.clone(), 2, 10, 100).unwrap();
        assert_eq!(head.long_positions, [1]);
        assert_eq!(
            (head.long.start.clone(), head.long.kernel.clone()),
            (vec![10], vec![1])
        );
        assert_eq!(
            head.chunks[0].end_ns, 5,
            "chunk 0's reach leaves its long kernel out"
        );
        // With no room for it in the budget, it stays an ordinary kernel.
        let (head, _) = ChunkedTimeline::split(timeline, 2, 10, 1).unwrap();
        assert!(head.long_positions.is_empty());
        assert_eq!(head.chunks[0].end_ns, 210);
    }
}
