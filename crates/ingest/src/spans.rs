//! Where the reading's threads spend their time, for profiling llmprof itself: with
//! `LLMPROF_SPANS=FILE` in the environment, each thread records spans (waiting for a segment,
//! merging a piece, rebuilding an inflated piece, ...), the calling thread also the phases after
//! the reading (the converter's finish, writing the run, ...), and [`write`] saves them to
//! `FILE`, one per line: `thread-name kind start-ns end-ns arg`, times from the first span.
//! `gpu-jobs/spans.py` sums them by thread and kind, and over time. Unset, a span costs one
//! load of a flag.
//!
//! Spans are recorded per piece, chunk or window, never per event, so a 1 GB trace makes
//! about 30,000 of them; past [`MAX_SPANS`] the rest are counted and dropped.
//!
//! Each thread that recorded a span also leaves, when it ends (the calling thread: at
//! [`write`]), a line `thread-name sched on-cpu-ns run-queue-ns timeslices` from Linux's
//! `/proc/thread-self/schedstat`: how long it ran, and how long it was ready to run but waited
//! for a core. A waiting thread that sleeps is in neither.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// What a span measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The whole ingest (the command's own span).
    Ingest,
    /// A kineto trace read, from opening it to its array's end and the keys after.
    ReadTrace,
    /// The calling thread waits for the next segment of the input.
    WaitSegment,
    /// The calling thread waits for a worker's parsed piece.
    WaitPiece,
    /// The calling thread merges a piece into the trace's records (the sink).
    Merge,
    /// The calling thread reads the elements cut by a segment's end (including its wait).
    Seam,
    /// The converter's thread applies a piece's launches and GPU ops.
    Convert,
    /// The operator walk's thread walks a piece's calls (`LiveWalk`).
    Walk,
    /// The calling thread waits for room in the converter's queue.
    WaitConverter,
    /// A parse worker waits for a piece to parse.
    WaitJob,
    /// A parse worker waits for the merge to come within reach of its piece.
    WaitGate,
    /// A parse worker parses a piece.
    Parse,
    /// The inflating thread waits for a buffer to come back from the parse.
    WaitBuffer,
    /// The inflating thread fills a buffer (including its waits below).
    Fill,
    /// The inflating thread waits for the parse to take the buffer it filled.
    Hand,
    /// The inflating thread waits for a worker's inflated chunk.
    WaitChunk,
    /// The inflating thread waits for a rebuilt piece.
    WaitRebuilt,
    /// A `gunzip` worker waits for work.
    Idle,
    /// A `gunzip` worker inflates a chunk.
    Inflate,
    /// A `gunzip` worker rebuilds an accepted piece's bytes.
    Rebuild,
    /// The calling thread closes the input once the trace is read (its workers stop).
    CloseInput,
    /// The calling thread gathers what the trace's reading left (header, annotations).
    Gather,
    /// The operator table is built from the trace's operator calls (on a thread beside the
    /// finish, unnamed).
    Operators,
    /// The converter's finish: stages, kernels, totals and the timeline's columns, with its
    /// wait for the operator table before the columns.
    Finish,
    /// The bundle is analyzed (the diagnosis).
    Analyze,
    /// The run is written to the runs directory.
    WriteRun,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Ingest => "ingest",
            Kind::ReadTrace => "read-trace",
            Kind::WaitSegment => "wait-segment",
            Kind::WaitPiece => "wait-piece",
            Kind::Merge => "merge",
            Kind::Seam => "seam",
            Kind::Convert => "convert",
            Kind::Walk => "walk",
            Kind::WaitConverter => "wait-converter",
            Kind::WaitJob => "wait-job",
            Kind::WaitGate => "wait-gate",
            Kind::Parse => "parse",
            Kind::WaitBuffer => "wait-buffer",
            Kind::Fill => "fill",
            Kind::Hand => "hand",
            Kind::WaitChunk => "wait-chunk",
            Kind::WaitRebuilt => "wait-rebuilt",
            Kind::Idle => "idle",
            Kind::Inflate => "inflate",
            Kind::Rebuild => "rebuild",
            Kind::CloseInput => "close-input",
            Kind::Gather => "gather",
            Kind::Operators => "operators",
            Kind::Finish => "finish",
            Kind::Analyze => "analyze",
            Kind::WriteRun => "write-run",
        }
    }
}

/// The most spans kept.
const MAX_SPANS: usize = 4 << 20;

struct Record {
    thread: u32,
    kind: Kind,
    start: u64,
    end: u64,
    arg: u64,
}

struct Recorder {
    path: PathBuf,
    start: Instant,
    spans: Mutex<Vec<Record>>,
    threads: Mutex<Vec<String>>,
    /// Per thread: its number and its `schedstat` (on-CPU ns, run-queue ns, timeslices).
    sched: Mutex<Vec<(u32, [u64; 3])>>,
    dropped: AtomicU64,
}

fn recorder() -> Option<&'static Recorder> {
    static RECORDER: OnceLock<Option<Recorder>> = OnceLock::new();
    RECORDER
        .get_or_init(|| {
            let path = std::env::var_os("LLMPROF_SPANS")?;
            Some(Recorder {
                path: path.into(),
                start: Instant::now(),
                spans: Mutex::new(Vec::new()),
                threads: Mutex::new(Vec::new()),
                sched: Mutex::new(Vec::new()),
                dropped: AtomicU64::new(0),
            })
        })
        .as_ref()
}

/// This thread's number in the recorder's list of thread names.
fn thread_number(rec: &Recorder) -> u32 {
    thread_local!(static NUMBER: ThreadNumber = const { ThreadNumber(OnceLock::new()) });
    NUMBER.with(|n| {
        *n.0.get_or_init(|| {
            let mut threads = rec.threads.lock().unwrap_or_else(|e| e.into_inner());
            let name = std::thread::current()
                .name()
                .unwrap_or("unnamed")
                .replace(' ', "-");
            threads.push(name);
            u32::try_from(threads.len() - 1).unwrap_or(u32::MAX)
        })
    })
}

/// A thread's number, which records the thread's `schedstat` when the thread ends.
struct ThreadNumber(OnceLock<u32>);

impl Drop for ThreadNumber {
    fn drop(&mut self) {
        if let (Some(rec), Some(&n)) = (recorder(), self.0.get()) {
            record_sched(rec, n);
        }
    }
}

/// Records the calling thread's `schedstat`, where Linux gives it.
fn record_sched(rec: &Recorder, thread: u32) {
    let Ok(text) = std::fs::read_to_string("/proc/thread-self/schedstat") else {
        return;
    };
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    if let (Some(Some(cpu)), Some(Some(wait)), Some(Some(slices))) =
        (fields.next(), fields.next(), fields.next())
    {
        let mut sched = rec.sched.lock().unwrap_or_else(|e| e.into_inner());
        sched.push((thread, [cpu, wait, slices]));
    }
}

/// A span being measured; recorded when dropped.
#[derive(Debug)]
pub struct Span {
    kind: Kind,
    start: u64,
    arg: u64,
}

/// Starts a span of `kind` (`arg`: a piece's or chunk's number, or 0), when spans are
/// being recorded.
#[must_use]
pub fn span(kind: Kind, arg: u64) -> Option<Span> {
    let rec = recorder()?;
    Some(Span {
        kind,
        start: nanos(rec),
        arg,
    })
}

fn nanos(rec: &Recorder) -> u64 {
    u64::try_from(rec.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl Drop for Span {
    fn drop(&mut self) {
        let Some(rec) = recorder() else { return };
        let record = Record {
            thread: thread_number(rec),
            kind: self.kind,
            start: self.start,
            end: nanos(rec),
            arg: self.arg,
        };
        let mut spans = rec.spans.lock().unwrap_or_else(|e| e.into_inner());
        if spans.len() < MAX_SPANS {
            spans.push(record);
        } else {
            rec.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Writes the spans recorded so far to `LLMPROF_SPANS`'s file: the file and how writing it
/// went, or `None` when spans are not being recorded.
pub fn write() -> Option<(PathBuf, std::io::Result<()>)> {
    let rec = recorder()?;
    record_sched(rec, thread_number(rec));
    let threads = rec.threads.lock().unwrap_or_else(|e| e.into_inner());
    let spans = rec.spans.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = String::with_capacity(spans.len() * 48);
    for s in spans.iter() {
        let thread = threads.get(s.thread as usize).map_or("?", String::as_str);
        let _ = writeln!(
            out,
            "{thread} {} {} {} {}",
            s.kind.name(),
            s.start,
            s.end,
            s.arg
        );
    }
    let sched = rec.sched.lock().unwrap_or_else(|e| e.into_inner());
    for (thread, [cpu, wait, slices]) in sched.iter() {
        let thread = threads.get(*thread as usize).map_or("?", String::as_str);
        let _ = writeln!(out, "{thread} sched {cpu} {wait} {slices}");
    }
    let dropped = rec.dropped.load(Ordering::Relaxed);
    if dropped > 0 {
        let _ = writeln!(out, "# {dropped} spans dropped past {MAX_SPANS}");
    }
    Some((rec.path.clone(), std::fs::write(&rec.path, out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_have_one_word_names() {
        let kinds = [
            Kind::Ingest,
            Kind::ReadTrace,
            Kind::WaitSegment,
            Kind::WaitPiece,
            Kind::Merge,
            Kind::Seam,
            Kind::Convert,
            Kind::Walk,
            Kind::WaitConverter,
            Kind::WaitJob,
            Kind::WaitGate,
            Kind::Parse,
            Kind::WaitBuffer,
            Kind::Fill,
            Kind::Hand,
            Kind::WaitChunk,
            Kind::WaitRebuilt,
            Kind::Idle,
            Kind::Inflate,
            Kind::Rebuild,
            Kind::CloseInput,
            Kind::Gather,
            Kind::Operators,
            Kind::Finish,
            Kind::Analyze,
            Kind::WriteRun,
        ];
        let names: std::collections::HashSet<&str> = kinds.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), kinds.len());
        assert!(names.iter().all(|n| !n.contains(' ')));
    }
}
