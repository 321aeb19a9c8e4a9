//! A timeline too large to hold: its op and call columns on disk, one unnamed temporary file
//! per column, written as a converter makes them and read back one value at a time when the
//! run is written ([`SpilledTimeline`]). The files vanish when closed, whatever happens.
//!
//! The JSON written is byte for byte what `serde_json` writes for the same [`Timeline`] held
//! in memory (the tests check it): the fields in the same order, each column a sequence of the
//! same values.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use llmprof_bundle::{OptU32, Timeline, TimelineCalls, TimelineKernels, TimelineMemOps};
use serde::ser::{Error as _, SerializeSeq, SerializeStruct};
use serde::{Serialize, Serializer};

/// A value a column holds, as fixed-width little-endian bytes.
pub trait SpillValue: Copy {
    const BYTES: usize;
    fn put(self, out: &mut Vec<u8>);
    fn take(bytes: &[u8]) -> Self;
}

macro_rules! spill_int {
    ($t:ty) => {
        impl SpillValue for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn take(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(&bytes[..Self::BYTES]);
                <$t>::from_le_bytes(b)
            }
        }
    };
}
spill_int!(u64);
spill_int!(i64);
spill_int!(u32);

impl SpillValue for OptU32 {
    const BYTES: usize = 4;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.get().unwrap_or(u32::MAX).to_le_bytes());
    }
    fn take(bytes: &[u8]) -> Self {
        match u32::take(bytes) {
            u32::MAX => OptU32::NONE,
            v => OptU32::some(v),
        }
    }
}

/// Where a converter's columns go: a directory (the runs directory, so that a large
/// timeline's columns land on the disk that will hold it, not in a `/tmp` that may be
/// memory).
#[derive(Debug, Clone)]
pub struct SpillDir(PathBuf);

impl SpillDir {
    pub fn new(dir: &Path) -> SpillDir {
        SpillDir(dir.to_path_buf())
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A column being written here.
    pub fn column<T: SpillValue>(&self) -> ColumnWriter<T> {
        let file = std::fs::create_dir_all(&self.0).and_then(|()| tempfile::tempfile_in(&self.0));
        ColumnWriter {
            out: file.map(|f| BufWriter::with_capacity(1 << 16, f)),
            buf: Vec::with_capacity(T::BYTES),
            len: 0,
            dir: self.0.clone(),
            _t: PhantomData,
        }
    }
}

/// A column being written. The first I/O error is kept and returned by
/// [`ColumnWriter::finish`]; pushes after it do nothing.
#[derive(Debug)]
pub struct ColumnWriter<T> {
    out: io::Result<BufWriter<File>>,
    buf: Vec<u8>,
    len: usize,
    dir: PathBuf,
    _t: PhantomData<T>,
}

impl<T: SpillValue> ColumnWriter<T> {
    pub fn push(&mut self, v: T) {
        let Ok(out) = &mut self.out else { return };
        self.buf.clear();
        v.put(&mut self.buf);
        debug_assert_eq!(self.buf.len(), T::BYTES, "a value writes its BYTES");
        if let Err(e) = out.write_all(&self.buf) {
            self.out = Err(e);
        }
        self.len += 1;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The column written, or the first error, naming the directory.
    pub fn finish(self) -> io::Result<Column<T>> {
        let dir = self.dir;
        let named = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("spilling a timeline column to {}: {e}", dir.display()),
            )
        };
        let file = self
            .out
            .and_then(|w| w.into_inner().map_err(|e| e.into_error()));
        Ok(Column {
            file: file.map_err(named)?,
            len: self.len,
            _t: PhantomData,
        })
    }
}

/// A column written to disk.
#[derive(Debug)]
pub struct Column<T> {
    file: File,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: SpillValue> Column<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Calls `f` with every value, in order.
    pub fn for_each(&self, mut f: impl FnMut(T)) -> io::Result<()> {
        let mut file = &self.file;
        file.seek(SeekFrom::Start(0))?;
        let mut r = BufReader::with_capacity(1 << 16, file);
        let mut b = vec![0u8; T::BYTES];
        for _ in 0..self.len {
            r.read_exact(&mut b)?;
            f(T::take(&b));
        }
        Ok(())
    }

    /// A reader of the values one at a time, from the first. One at a time per column: the
    /// readers of a column share its file's position.
    pub fn reader(&self) -> io::Result<ColumnReader<'_, T>> {
        let mut file = &self.file;
        file.seek(SeekFrom::Start(0))?;
        Ok(ColumnReader {
            r: BufReader::with_capacity(1 << 16, file),
            left: self.len,
            buf: vec![0u8; T::BYTES],
            _t: PhantomData,
        })
    }

    /// The values in memory.
    pub fn load(&self) -> io::Result<Vec<T>> {
        let mut out = Vec::with_capacity(self.len);
        self.for_each(|v| out.push(v))?;
        Ok(out)
    }

    /// The column of `f` of each value, written to `dir`.
    pub fn map<U: SpillValue>(
        &self,
        dir: &SpillDir,
        mut f: impl FnMut(T) -> U,
    ) -> io::Result<Column<U>> {
        let mut out = dir.column();
        self.for_each(|v| out.push(f(v)))?;
        out.finish()
    }
}

/// See [`Column::reader`].
#[derive(Debug)]
pub struct ColumnReader<'a, T> {
    r: BufReader<&'a File>,
    left: usize,
    buf: Vec<u8>,
    _t: PhantomData<T>,
}

impl<T: SpillValue> ColumnReader<'_, T> {
    /// The next value; `None` after the last.
    pub fn next_value(&mut self) -> io::Result<Option<T>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.r.read_exact(&mut self.buf)?;
        self.left -= 1;
        Ok(Some(T::take(&self.buf)))
    }
}

impl<T: SpillValue + Serialize> Serialize for Column<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len))?;
        let mut err = None;
        let read = self.for_each(|v| {
            if err.is_none() {
                err = seq.serialize_element(&v).err();
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        read.map_err(|e| S::Error::custom(format!("reading a spilled timeline column: {e}")))?;
        seq.end()
    }
}

/// The kernels' columns on disk (see [`TimelineKernels`]); `graph` and `graph_node` are
/// `None` where the run has no graph ids.
#[derive(Debug)]
pub struct SpilledKernels {
    pub start: Column<u64>,
    pub dur: Column<u64>,
    pub stream: Column<u32>,
    pub kernel: Column<u32>,
    pub stage: Column<OptU32>,
    pub launch: Column<OptU32>,
    pub range: Column<OptU32>,
    pub graph: Option<(Column<OptU32>, Column<OptU32>)>,
}

/// The memcpys' and memsets' columns on disk (see [`TimelineMemOps`]).
#[derive(Debug)]
pub struct SpilledMemOps {
    pub start: Column<u64>,
    pub dur: Column<u64>,
    pub stream: Column<u32>,
    pub kernel: Column<u32>,
    pub bytes: Column<u64>,
    pub stage: Column<OptU32>,
}

/// The launch calls' columns on disk (see [`TimelineCalls`]); the thread and name tables
/// stay in memory.
#[derive(Debug)]
pub struct SpilledCalls {
    pub start: Column<i64>,
    pub dur: Column<u64>,
    pub thread: Column<u32>,
    pub correlation: Column<i64>,
    pub name: Column<OptU32>,
    pub threads: Vec<u64>,
    pub names: Vec<String>,
    pub driver: Vec<bool>,
    /// Per kernel and per mem op, its call; empty columns where there are no calls.
    pub kernel_call: Column<OptU32>,
    pub mem_op_call: Column<OptU32>,
}

/// A timeline whose op and call columns are on disk: `head` holds the rest (its op and call
/// columns empty).
#[derive(Debug)]
pub struct SpilledTimeline {
    pub head: Timeline,
    pub kernels: SpilledKernels,
    pub mem_ops: SpilledMemOps,
    pub calls: SpilledCalls,
}

impl SpilledTimeline {
    /// The whole timeline in memory.
    pub fn load(&self) -> io::Result<Timeline> {
        let (k, m, c) = (&self.kernels, &self.mem_ops, &self.calls);
        let (graph, graph_node) = match &k.graph {
            Some((g, n)) => (g.load()?, n.load()?),
            None => (Vec::new(), Vec::new()),
        };
        let calls = if c.start.is_empty() {
            TimelineCalls::default()
        } else {
            TimelineCalls {
                start: c.start.load()?,
                dur: c.dur.load()?,
                thread: c.thread.load()?,
                correlation: c.correlation.load()?,
                name: c.name.load()?,
                threads: c.threads.clone(),
                names: c.names.clone(),
                driver: c.driver.clone(),
                kernel_call: c.kernel_call.load()?,
                mem_op_call: c.mem_op_call.load()?,
            }
        };
        Ok(Timeline {
            kernels: TimelineKernels {
                start: k.start.load()?,
                dur: k.dur.load()?,
                stream: k.stream.load()?,
                kernel: k.kernel.load()?,
                stage: k.stage.load()?,
                launch: k.launch.load()?,
                range: k.range.load()?,
                graph,
                graph_node,
            },
            mem_ops: TimelineMemOps {
                start: m.start.load()?,
                dur: m.dur.load()?,
                stream: m.stream.load()?,
                kernel: m.kernel.load()?,
                bytes: m.bytes.load()?,
                stage: m.stage.load()?,
            },
            calls,
            ..self.head.clone()
        })
    }

    /// `timeline.json`'s value.
    pub fn json(&self) -> impl Serialize + '_ {
        TimelineJson(self)
    }

    /// `launch_calls.json`'s value, `None` when the run has no launch calls.
    pub fn calls_json(&self) -> Option<impl Serialize + '_> {
        (!self.calls.start.is_empty()).then_some(CallsJson(&self.calls))
    }
}

struct TimelineJson<'a>(&'a SpilledTimeline);

impl Serialize for TimelineJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (h, t) = (&self.0.head, self.0);
        let mut st = s.serialize_struct("Timeline", 10)?;
        st.serialize_field("schema_version", &h.schema_version)?;
        st.serialize_field("run_id", &h.run_id)?;
        st.serialize_field("t0_ns", &h.t0_ns)?;
        st.serialize_field("end_ns", &h.end_ns)?;
        st.serialize_field("t0_epoch_ns", &h.t0_epoch_ns)?;
        st.serialize_field("launches", &h.launches)?;
        st.serialize_field("streams", &h.streams)?;
        st.serialize_field("kernels", &KernelsJson(&t.kernels))?;
        st.serialize_field("mem_ops", &MemOpsJson(&t.mem_ops))?;
        st.serialize_field("ranges", &h.ranges)?;
        st.end()
    }
}

struct KernelsJson<'a>(&'a SpilledKernels);

impl Serialize for KernelsJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let k = self.0;
        let mut st = s.serialize_struct("TimelineKernels", 9)?;
        st.serialize_field("start", &k.start)?;
        st.serialize_field("dur", &k.dur)?;
        st.serialize_field("stream", &k.stream)?;
        st.serialize_field("kernel", &k.kernel)?;
        st.serialize_field("stage", &k.stage)?;
        st.serialize_field("launch", &k.launch)?;
        st.serialize_field("range", &k.range)?;
        if let Some((graph, node)) = &k.graph {
            st.serialize_field("graph", graph)?;
            st.serialize_field("graph_node", node)?;
        }
        st.end()
    }
}

struct MemOpsJson<'a>(&'a SpilledMemOps);

impl Serialize for MemOpsJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.0;
        let mut st = s.serialize_struct("TimelineMemOps", 6)?;
        st.serialize_field("start", &m.start)?;
        st.serialize_field("dur", &m.dur)?;
        st.serialize_field("stream", &m.stream)?;
        st.serialize_field("kernel", &m.kernel)?;
        st.serialize_field("bytes", &m.bytes)?;
        st.serialize_field("stage", &m.stage)?;
        st.end()
    }
}

struct CallsJson<'a>(&'a SpilledCalls);

impl Serialize for CallsJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = self.0;
        let mut st = s.serialize_struct("TimelineCalls", 10)?;
        st.serialize_field("start", &c.start)?;
        st.serialize_field("dur", &c.dur)?;
        st.serialize_field("thread", &c.thread)?;
        st.serialize_field("correlation", &c.correlation)?;
        st.serialize_field("name", &c.name)?;
        st.serialize_field("threads", &c.threads)?;
        st.serialize_field("names", &c.names)?;
        st.serialize_field("driver", &c.driver)?;
        st.serialize_field("kernel_call", &c.kernel_call)?;
        st.serialize_field("mem_op_call", &c.mem_op_call)?;
        st.end()
    }
}

/// A run's timeline as the store writes it: built in memory, or spilled.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per run, moved a few times
pub enum RunTimeline {
    Built(Timeline),
    Spilled(Box<SpilledTimeline>),
}

impl RunTimeline {
    /// Everything but the op and call columns (which are empty in a spilled one's).
    pub fn head(&self) -> &Timeline {
        match self {
            RunTimeline::Built(t) => t,
            RunTimeline::Spilled(s) => &s.head,
        }
    }

    pub fn head_mut(&mut self) -> &mut Timeline {
        match self {
            RunTimeline::Built(t) => t,
            RunTimeline::Spilled(s) => &mut s.head,
        }
    }

    /// Rows of the kernel, mem op and range columns.
    pub fn lens(&self) -> (usize, usize, usize) {
        match self {
            RunTimeline::Built(t) => (
                t.kernels.start.len(),
                t.mem_ops.start.len(),
                t.ranges.start.len(),
            ),
            RunTimeline::Spilled(s) => (
                s.kernels.start.len(),
                s.mem_ops.start.len(),
                s.head.ranges.start.len(),
            ),
        }
    }

    /// The timeline in memory (loaded, when spilled).
    pub fn into_timeline(self) -> io::Result<Timeline> {
        match self {
            RunTimeline::Built(t) => Ok(t),
            RunTimeline::Spilled(s) => s.load(),
        }
    }

    /// The whole timeline in memory (loaded, when spilled).
    pub fn load(&self) -> io::Result<std::borrow::Cow<'_, Timeline>> {
        match self {
            RunTimeline::Built(t) => Ok(std::borrow::Cow::Borrowed(t)),
            RunTimeline::Spilled(s) => s.load().map(std::borrow::Cow::Owned),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmprof_bundle::{Launch, TimelineRanges};

    fn column<T: SpillValue>(dir: &SpillDir, values: &[T]) -> Column<T> {
        let mut w = dir.column();
        for &v in values {
            w.push(v);
        }
        w.finish().unwrap()
    }

    fn opt(values: &[Option<u32>]) -> Vec<OptU32> {
        OptU32::column(values)
    }

    fn sample(graph: bool) -> Timeline {
        let n = 3;
        let g = if graph {
            opt(&[Some(1), None, Some(2)])
        } else {
            Vec::new()
        };
        Timeline {
            schema_version: 7,
            run_id: "r\"1".into(),
            t0_ns: -5,
            end_ns: 99,
            t0_epoch_ns: Some(1_700_000_000_000_000_000),
            launches: vec![Launch {
                grid: [1, 2, 3],
                block: [4, 5, 6],
                registers_per_thread: Some(32),
            }],
            streams: vec![7, 13],
            kernels: TimelineKernels {
                start: vec![0, 5, u64::MAX],
                dur: vec![1, 2, 3],
                stream: vec![0, 1, 0],
                kernel: vec![2, 0, 1],
                stage: opt(&[None, Some(0), Some(4)]),
                launch: opt(&[Some(0), None, Some(0)]),
                range: opt(&[None, Some(1), Some(2)]),
                graph: g.clone(),
                graph_node: g,
            },
            mem_ops: TimelineMemOps {
                start: vec![4],
                dur: vec![8],
                stream: vec![1],
                kernel: vec![3],
                bytes: vec![1 << 40],
                stage: opt(&[None]),
            },
            ranges: TimelineRanges {
                start: vec![0],
                dur: vec![50],
                stage: vec![0],
                depth: vec![0],
                tid: vec![12],
            },
            calls: TimelineCalls {
                start: vec![-3, 2, i64::MIN],
                dur: vec![1; n],
                thread: vec![0, 0, 1],
                correlation: vec![10, -11, 12],
                name: opt(&[Some(0), None, Some(1)]),
                threads: vec![5, 6],
                names: vec!["cudaLaunchKernel".into(), "cuLaunch\n".into()],
                driver: vec![false, true],
                kernel_call: opt(&[Some(0), Some(1), None]),
                mem_op_call: opt(&[Some(2)]),
            },
        }
    }

    fn spill(t: &Timeline, dir: &SpillDir) -> SpilledTimeline {
        let (k, m, c) = (&t.kernels, &t.mem_ops, &t.calls);
        SpilledTimeline {
            head: Timeline {
                kernels: TimelineKernels::default(),
                mem_ops: TimelineMemOps::default(),
                calls: TimelineCalls::default(),
                ..t.clone()
            },
            kernels: SpilledKernels {
                start: column(dir, &k.start),
                dur: column(dir, &k.dur),
                stream: column(dir, &k.stream),
                kernel: column(dir, &k.kernel),
                stage: column(dir, &k.stage),
                launch: column(dir, &k.launch),
                range: column(dir, &k.range),
                graph: (!k.graph.is_empty())
                    .then(|| (column(dir, &k.graph), column(dir, &k.graph_node))),
            },
            mem_ops: SpilledMemOps {
                start: column(dir, &m.start),
                dur: column(dir, &m.dur),
                stream: column(dir, &m.stream),
                kernel: column(dir, &m.kernel),
                bytes: column(dir, &m.bytes),
                stage: column(dir, &m.stage),
            },
            calls: SpilledCalls {
                start: column(dir, &c.start),
                dur: column(dir, &c.dur),
                thread: column(dir, &c.thread),
                correlation: column(dir, &c.correlation),
                name: column(dir, &c.name),
                threads: c.threads.clone(),
                names: c.names.clone(),
                driver: c.driver.clone(),
                kernel_call: column(dir, &c.kernel_call),
                mem_op_call: column(dir, &c.mem_op_call),
            },
        }
    }

    #[test]
    fn a_spilled_timeline_writes_the_bytes_serde_writes_and_loads_back_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SpillDir::new(tmp.path());
        for graph in [false, true] {
            let t = sample(graph);
            let s = spill(&t, &dir);
            let json = serde_json::to_string(&s.json()).unwrap();
            assert_eq!(json, serde_json::to_string(&t).unwrap(), "graph {graph}");
            let calls = serde_json::to_string(&s.calls_json().unwrap()).unwrap();
            assert_eq!(calls, serde_json::to_string(&t.calls).unwrap());
            assert_eq!(s.load().unwrap(), t);
        }
        assert_eq!(
            std::fs::read_dir(tmp.path()).unwrap().count(),
            0,
            "the columns' files have no names"
        );
    }

    #[test]
    fn a_column_reads_back_one_value_at_a_time() {
        let tmp = tempfile::tempdir().unwrap();
        let c = column(&SpillDir::new(tmp.path()), &[3u32, 1, 2]);
        for _ in 0..2 {
            let mut r = c.reader().unwrap();
            let mut got = Vec::new();
            while let Some(v) = r.next_value().unwrap() {
                got.push(v);
            }
            assert_eq!(got, [3, 1, 2]);
        }
    }

    #[test]
    fn a_column_maps_into_another() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SpillDir::new(tmp.path());
        let c = column(&dir, &[1i64, -2, 3]);
        let m = c.map(&dir, |v| (v * 10) as u64).unwrap();
        assert_eq!(m.load().unwrap(), vec![10, (-20i64) as u64, 30]);
    }

    #[test]
    fn a_spill_directory_that_cannot_be_made_is_an_error_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let dir = SpillDir::new(&file.join("sub"));
        let mut w = dir.column::<u64>();
        w.push(1);
        let e = w.finish().unwrap_err().to_string();
        assert!(e.contains("f/sub"), "{e}");
    }
}
