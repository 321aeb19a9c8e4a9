//! PyTorch profiler (Kineto) chrome trace, `.json` or `.json.gz`.
//!
//! Traces reach gigabytes, so the file is memory-mapped and parsed in one streaming pass:
//! `traceEvents` is visited element by element into borrowed, typed events (no
//! `serde_json::Value`), and only the handful of fields llmprof uses are kept, in compact
//! integer form. Timestamps are read from the JSON number's text (`&RawValue`) and converted
//! to integer nanoseconds exactly, without a lossy trip through `f64`.
//!
//! Stages are `user_annotation` events (`record_function`); kernels are attributed to them
//! through their launching `cuda_runtime`/`cuda_driver` call (`args.correlation`), exactly as
//! the Nsight Systems projection does. Operators (`cpu_op`) get device time from the GPU ops
//! whose `args["External id"]` names them.

use rustc_hash::FxHashMap as HashMap;
use std::borrow::Cow;
use std::fmt;
use std::path::Path;
use std::sync::{mpsc, Mutex};

use llmprof_bundle::{Device, Launch, Severity, Source, StageKind, ToolInfo};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::chunked::{self, ChunkError, Chunking, ElementParser};
use crate::convert::{span, TraceConverter};
use crate::diagnostics::Diagnostics;
use crate::error::{what::KINETO, IngestError};
use crate::gunzip::Cores;
use crate::inflate::BUFFERS;
use crate::input;
use crate::intern::Interner;
use crate::nsys::cuda_version;
use crate::records::{CommArgs, GpuOp, GpuOpRecord, GraphRef, LaunchRecord, RangeRecord};
use crate::SourceFacts;

mod fast;
mod operators;

use operators::{CallLog, DeviceTimes, LiveWalk, Pairs, PieceCalls};
pub use operators::{OperatorCalls, TraceOperators};

/// The gzip windows held at once, up to 1 GB of trace: 1/32 of the inflated trace, between 2
/// and 16 MB.
const GZIP_HELD: usize = 16 << 20;
const GZIP_HELD_MIN: usize = 2 << 20;
const GZIP_HELD_SHARE: u64 = 32;
/// Past 1 GB: 1/64 of it, up to 48 MB (three of a plain file's 16 MB segments).
const GZIP_HELD_LARGE: usize = 48 << 20;
const GZIP_HELD_LARGE_SHARE: u64 = 64;
/// The smallest piece of a gzip window: a window of the smallest size still gets two pieces
/// per worker on 4 cores, and a piece's fixed costs stay small beside its parse.
const GZIP_PIECE_MIN: usize = 128 << 10;

/// One trace is one process as far as correlation ids go.
const PROCESS: u64 = 0;

/// Operators whose `Input Dims` tell the token counts: `aten::embedding` (`[[V, h], [B, s]]`)
/// and the LM head `aten::linear` (`[[B, s_logits, h], [V, h]]`).
const SHAPE_PROBES: [&str; 2] = ["aten::embedding", "aten::linear"];

/// What a Kineto trace yields besides the records fed to the converter.
#[derive(Debug, Default)]
pub struct KinetoInput {
    pub facts: SourceFacts,
    /// The operator calls, aggregated by [`OperatorCalls::operators`] (which may run beside
    /// the converter's `finish`).
    pub calls: OperatorCalls,
    /// Token counts read from operator shapes.
    pub inferred: InferredWorkload,
}

/// Parses the trace at `path`. GPU ops, launches and annotations are fed to `conv` when it is
/// given (i.e. when this trace is the run's timing source). `progress` hears how many bytes of
/// the trace (inflated, for a `.gz`) have been read, as the reading goes.
pub fn read(
    path: &Path,
    conv: Option<&mut TraceConverter>,
    diags: &mut Diagnostics,
    progress: &mut dyn FnMut(u64),
) -> Result<KinetoInput, IngestError> {
    read_chunked(path, conv, diags, Chunking::default(), progress)
}

/// `chunking` for the trace at `path`. An inflated window is anonymous memory, unlike a
/// mapped one, so a `.gz` gets a smaller one, sized to the trace its trailer announces
/// ([`gzip_window`]), cut into pieces small enough to keep every worker busy: a window holds
/// one for every other worker, and two windows are parsed at once. Smaller pieces, a quarter of
/// that, cost the calling thread's merge more than they gained (PERFORMANCE.md, session 26).
fn for_input(path: &Path, chunking: Chunking) -> Chunking {
    if !input::is_gzip(path) {
        return chunking;
    }
    let sized = input::gzip_inflated_size(path).map_or(GZIP_HELD / BUFFERS, gzip_window);
    let window = chunking.window.min(sized);
    Chunking {
        window,
        piece: chunking
            .piece
            .min((2 * window / chunking.workers.max(1)).max(GZIP_PIECE_MIN)),
        ..chunking
    }
}

/// The window for a `.gz` trace that inflates to `inflated` bytes. [`BUFFERS`] windows are
/// held at once (the one read, the next, the one being inflated): together 1/32 of the trace,
/// 2–16 MB, or, past 1 GB, where the rest of the ingest's memory is spread over more trace,
/// 1/64 of it, up to 48 MB. So they take under 4% of the trace from 64 MB on, and under 2%
/// from 1 GB on.
fn gzip_window(inflated: u64) -> usize {
    let share = |n: u64| usize::try_from(inflated / n).unwrap_or(usize::MAX);
    let small = share(GZIP_HELD_SHARE).clamp(GZIP_HELD_MIN, GZIP_HELD);
    let large = share(GZIP_HELD_LARGE_SHARE).min(GZIP_HELD_LARGE);
    small.max(large) / BUFFERS
}

/// [`read`] with the window, piece and worker counts given.
fn read_chunked(
    path: &Path,
    conv: Option<&mut TraceConverter>,
    diags: &mut Diagnostics,
    chunking: Chunking,
    progress: &mut dyn FnMut(u64),
) -> Result<KinetoInput, IngestError> {
    let reading = crate::spans::span(crate::spans::Kind::ReadTrace, 0);
    let chunking = for_input(path, chunking);
    let mut win = input::InputWindow::open(KINETO, path, chunking.window, chunking.gunzip)?;
    let (doc, sink, conv) = read_events(&mut win, chunking, conv, diags, progress);
    let doc = doc.map_err(|e| chunk_error(path, e))?;
    drop(reading);
    let closing = crate::spans::span(crate::spans::Kind::CloseInput, 0);
    drop(win);
    drop(closing);
    let _gathering = crate::spans::span(crate::spans::Kind::Gather, 0);
    let header = header_of(path, &doc)?;
    let Sink {
        diags,
        strings,
        calls,
        walk,
        annotations,
        probes,
        shapes,
        device,
        runtime_ext,
        first_ts,
        counts,
        ..
    } = sink;
    let strings = strings.into_strings();
    let inferred = infer_workload(&strings, &annotations, &probes, &shapes);
    if let Some(conv) = conv {
        for a in &annotations {
            conv.handle_range(RangeRecord {
                ended_on_other_thread: false,
                thread: u64::from(a.thread),
                tid: a.tid,
                domain: "",
                name: &strings[a.name as usize],
                kind: StageKind::Annotation,
                start: a.start,
                end: a.end,
            });
        }
    }
    report_counts(&counts, diags);
    let mut facts = header.facts();
    // Event timestamps are relative to `baseTimeNanoseconds`.
    facts.clock_zero_epoch_ns = header.base_time_ns;
    if let (Some(base), Some(first)) = (header.base_time_ns, first_ts) {
        facts.captured_at_epoch_ns = Some(base + first);
    }
    Ok(KinetoInput {
        facts,
        calls: OperatorCalls {
            strings,
            calls,
            annotations,
            // Only GPU ops without an External id need the runtime calls' (rare: kineto
            // gives kernels theirs); dropped here otherwise, before the operator table runs.
            runtime_ext: if device.by_correlation_is_empty() {
                Pairs::default()
            } else {
                runtime_ext
            },
            device,
            live: match walk {
                ToWalk::Here(walk) => Some(*walk),
                ToWalk::Thread(_) => None,
            },
        },
        inferred,
    })
}

/// The events of the trace in `win` through a [`Sink`], the converter on its own thread when
/// there are workers to spare: the document's top level, the sink, and the converter back.
fn read_events<'c, 'd>(
    win: &mut input::InputWindow,
    chunking: Chunking,
    conv: Option<&'c mut TraceConverter>,
    diags: &'d mut Diagnostics,
    progress: &mut dyn FnMut(u64),
) -> (
    Result<chunked::Document, ChunkError>,
    Sink<'c, 'd>,
    Option<&'c mut TraceConverter>,
) {
    let parser = EventParser {
        convert: conv.is_some(),
    };
    // The converter, lent to its thread while the trace is read.
    let slot = Mutex::new(conv);
    let (doc, sink, here) = std::thread::scope(|s| {
        let (walk, walking) = to_walk(s, chunking.workers);
        let mut sink = Sink::new(to_converter(s, &slot, chunking.workers), walk, diags);
        let doc = chunked::read(
            win,
            chunking,
            "traceEvents",
            HEADER_KEYS,
            &parser,
            |batch| sink.take(batch),
            progress,
        );
        // Dropping the sender ends the thread once it has applied what was sent; it puts the
        // converter back in the slot.
        let here = match std::mem::replace(&mut sink.conv, ToConverter::None) {
            ToConverter::Here(conv) => Some(conv),
            _ => None,
        };
        // The same for the walk's thread, which gives back the walk and the calls.
        if let Some(handle) = walking {
            sink.walk = ToWalk::Here(Box::default());
            let (walk, calls) = handle
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            sink.walk = ToWalk::Here(Box::new(walk));
            sink.calls = calls;
        }
        (doc, sink, here)
    });
    let conv = here.or_else(|| slot.into_inner().unwrap_or_else(|e| e.into_inner()));
    (doc, sink, conv)
}

/// The trace's header, from the document's top level; an error for a document that is not a
/// chrome trace.
fn header_of(path: &Path, doc: &chunked::Document) -> Result<Header, IngestError> {
    let header = Header::from_raw(doc).map_err(|e| {
        IngestError::invalid(
            KINETO,
            path,
            format!(
                "JSON is not a PyTorch profiler chrome trace ({})",
                message(&e)
            ),
        )
    })?;
    if !header.saw_events {
        return Err(IngestError::invalid(
            KINETO,
            path,
            "no `traceEvents` array: not a PyTorch profiler chrome trace \
             (write one with `prof.export_chrome_trace(path)`)",
        ));
    }
    Ok(header)
}

/// For the fuzzer: the event at the start of `bytes` read by the fast path ([`fast`]) and by
/// serde: what the fast path read (whether the event is kept, the bytes it took; `None` where
/// it left the event to serde), or the difference where the two readings disagree.
#[doc(hidden)]
pub fn fast_path_agrees(bytes: &[u8]) -> Result<Option<(bool, usize)>, String> {
    // Read twice: the second time its keys are taken from what the first saw, and must read
    // as the first.
    let mut keys = fast::Keys::default();
    let first = fast::agrees(bytes, &mut keys)?;
    let again = fast::agrees(bytes, &mut keys)?;
    if first != again {
        let text = String::from_utf8_lossy(bytes);
        return Err(format!(
            "read {first:?}, then {again:?} with its keys seen: {text}"
        ));
    }
    Ok(first)
}

/// Reads the trace at `path` twice — whole, on one thread, and in 4 KB windows of 512-byte
/// pieces on four workers (a `.gz` inflated by the parallel reader, three workers on 4 KB
/// chunks), with the converter on a thread of its own — and returns both
/// readings as text (converter output, facts, workload, operators, diagnostics, or the error).
/// They must be equal: the fuzz target and the tests hold the parallel reader to the sequential
/// one with this.
#[doc(hidden)]
pub fn read_whole_and_in_pieces(path: &Path) -> (String, String) {
    let whole = Chunking {
        window: 1 << 40,
        piece: 1 << 40,
        workers: 1,
        gunzip: Cores::Auto,
    };
    let tiny = Chunking {
        window: 4 << 10,
        piece: 512,
        workers: 4,
        gunzip: Cores::Given {
            threads: 3,
            chunk: 4 << 10,
        },
    };
    let read_with = |c: Chunking| {
        let mut conv = TraceConverter::new();
        let mut diags = Diagnostics::new(Source::Kineto, "t.json");
        match read_chunked(path, Some(&mut conv), &mut diags, c, &mut |_| {}) {
            Ok(input) => {
                let parts = conv.finish(&mut diags);
                let (facts, inferred) = (&input.facts, &input.inferred);
                let ops = input.calls.operators_checked();
                format!(
                    "{parts:?}\n{facts:?}\n{inferred:?}\n{ops:?}\n{:?}",
                    diags.finish()
                )
            }
            Err(e) => format!("error: {e}"),
        }
    };
    (read_with(whole), read_with(tiny))
}

/// The user's message for a failed read of the trace at `path`.
fn chunk_error(path: &Path, e: ChunkError) -> IngestError {
    let message = match e {
        ChunkError::Input(e) => return e,
        ChunkError::Eof { offset } => format!(
            "the JSON ends early (at byte {offset}); the trace looks truncated — was the \
             profiler interrupted while writing it?"
        ),
        ChunkError::Shape { offset, what } => format!(
            "not valid JSON, or not a PyTorch profiler chrome trace: expected {what} at byte \
             {offset}"
        ),
        ChunkError::Json { offset, error } => match error.classify() {
            serde_json::error::Category::Data => format!(
                "JSON is not a PyTorch profiler chrome trace ({} at byte {offset})",
                message(&error)
            ),
            _ => format!("not valid JSON ({} at byte {offset})", message(&error)),
        },
    };
    IngestError::invalid(KINETO, path, message)
}

/// serde_json's message without its line and column (which count from a piece, not the file).
fn message(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rsplit_once(" at line ") {
        Some((m, _)) => m.to_string(),
        None => s,
    }
}

// ---------------------------------------------------------------------------------------------
// Top level

#[derive(Debug, Default)]
struct Header {
    saw_events: bool,
    devices: Vec<DeviceProps>,
    cuda_driver_version: Option<u64>,
    cuda_runtime_version: Option<u64>,
    cupti_version: Option<u64>,
    schema_version: Option<u64>,
    base_time_ns: Option<i64>,
    distributed: Option<DistributedInfo>,
}

impl Header {
    fn facts(&self) -> SourceFacts {
        let mut facts = SourceFacts::default();
        if let Some(d) = self.devices.first() {
            facts.device = Some(Device {
                name: d.name.clone().unwrap_or_else(|| "unknown GPU".into()),
                index: d.id.map(|v| v as u32),
                compute_capability: match (d.compute_major, d.compute_minor) {
                    (Some(a), Some(b)) => Some(format!("{a}.{b}")),
                    _ => None,
                },
                sm_count: d.num_sms.map(|v| v as u32),
                memory_bytes: d.total_global_mem,
                sources: vec![Source::Kineto],
                ..Device::default()
            });
        }
        let env = &mut facts.environment;
        env.cuda_driver_version = self.cuda_driver_version.map(cuda_version);
        env.cuda_runtime_version = self.cuda_runtime_version.map(cuda_version);
        env.cupti_version = self.cupti_version.map(|v| v.to_string());
        env.distributed = self.distributed.as_ref().and_then(DistributedInfo::record);
        if let Some(v) = self.schema_version {
            env.tools.push(ToolInfo {
                name: "PyTorch profiler trace schema".into(),
                version: v.to_string(),
            });
        }
        facts
    }
}

/// The PyTorch profiler's `distributedInfo`; numbers may be written as strings.
#[derive(Debug, Default, Deserialize)]
struct DistributedInfo {
    #[serde(default, deserialize_with = "lenient_u64")]
    rank: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64")]
    world_size: Option<u64>,
    #[serde(default)]
    backend: Option<String>,
    #[serde(default)]
    nccl_version: Option<String>,
    #[serde(default)]
    pg_config: Vec<PgConfig>,
}

#[derive(Debug, Default, Deserialize)]
struct PgConfig {
    #[serde(default)]
    pg_name: Option<String>,
    #[serde(default)]
    pg_desc: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pg_size: Option<u64>,
    #[serde(default)]
    ranks: Vec<u64>,
}

impl DistributedInfo {
    /// The bundle's record; `None` without a rank and a world size.
    fn record(&self) -> Option<llmprof_bundle::Distributed> {
        let small = |v: u64| u32::try_from(v).ok();
        Some(llmprof_bundle::Distributed {
            rank: small(self.rank?)?,
            world_size: small(self.world_size?)?,
            backend: self.backend.clone(),
            nccl_version: self.nccl_version.clone(),
            process_groups: (self.pg_config.iter())
                .map(|g| llmprof_bundle::ProcessGroup {
                    name: g.pg_name.clone().unwrap_or_default(),
                    description: g.pg_desc.clone(),
                    size: g.pg_size.and_then(small).unwrap_or(g.ranks.len() as u32),
                    ranks: g.ranks.iter().filter_map(|&r| small(r)).collect(),
                })
                .collect(),
        })
    }
}

#[derive(Debug, Default, Deserialize)]
struct DeviceProps {
    #[serde(default, deserialize_with = "lenient_u64")]
    id: Option<u64>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, rename = "totalGlobalMem", deserialize_with = "lenient_u64")]
    total_global_mem: Option<u64>,
    #[serde(default, rename = "computeMajor", deserialize_with = "lenient_u64")]
    compute_major: Option<u64>,
    #[serde(default, rename = "computeMinor", deserialize_with = "lenient_u64")]
    compute_minor: Option<u64>,
    #[serde(default, rename = "numSms", deserialize_with = "lenient_u64")]
    num_sms: Option<u64>,
}

/// The top-level keys read besides `traceEvents`.
const HEADER_KEYS: &[&str] = &[
    "deviceProperties",
    "cuda_driver_version",
    "cuda_runtime_version",
    "cupti_version",
    "schemaVersion",
    "baseTimeNanoseconds",
    "distributedInfo",
];

impl Header {
    /// The header from the document's raw top-level values.
    fn from_raw(doc: &chunked::Document) -> Result<Header, serde_json::Error> {
        let mut h = Header {
            saw_events: doc.saw_array,
            ..Header::default()
        };
        for (key, raw) in &doc.header {
            let text = raw.get();
            let lenient = || serde_json::from_str::<Lenient>(text);
            match key.as_str() {
                "deviceProperties" => {
                    h.devices =
                        serde_json::from_str::<Option<Vec<DeviceProps>>>(text)?.unwrap_or_default()
                }
                "cuda_driver_version" => h.cuda_driver_version = lenient()?.u64(),
                "cuda_runtime_version" => h.cuda_runtime_version = lenient()?.u64(),
                "cupti_version" => h.cupti_version = lenient()?.u64(),
                "schemaVersion" => h.schema_version = lenient()?.u64(),
                "baseTimeNanoseconds" => h.base_time_ns = lenient()?.i64(),
                "distributedInfo" => h.distributed = serde_json::from_str(text)?,
                _ => {}
            }
        }
        Ok(h)
    }
}

/// Parses trace events (by [`fast::event`], else serde's [`EventSlot`]), keeping complete (`X`)
/// events only, and digests them into a [`Batch`]; launches and GPU ops are kept for the
/// converter when `convert` is set.
struct EventParser {
    convert: bool,
}

impl ElementParser for EventParser {
    type Element<'a> = RawEvent<'a>;
    type Piece = Batch;
    type Scratch = fast::Keys;
    fn parse<'a>(
        &self,
        bytes: &'a [u8],
        slot: &mut RawEvent<'a>,
        keys: &mut fast::Keys,
    ) -> Result<(bool, usize), serde_json::Error> {
        #[cfg(fuzzing)]
        if let Err(e) = fast::agrees(bytes, keys) {
            panic!("the fast path reads an event differently: {e}");
        }
        if let Some(read) = fast::event(bytes, slot, keys) {
            return Ok(read);
        }
        let ((), n) = chunked::parse_seed(bytes, EventSlot(slot))?;
        Ok((slot.ph.as_deref() == Some("X"), n))
    }
    fn add(&self, piece: &mut Batch, ev: &mut RawEvent<'_>) {
        piece.event(ev, self.convert)
    }
}

// ---------------------------------------------------------------------------------------------
// Events

/// The fields llmprof reads of one trace event: read by the byte scanner of [`fast`], or where
/// it gives up, deserialized by hand with byte keys ([`EventSlot`]). An event that is not a
/// complete event (`ph` other than `X`, e.g. the 145k flow events of the
/// H200 trace) is skipped as soon as its `ph` is seen.
#[derive(Debug, Default, PartialEq)]
struct RawEvent<'a> {
    ph: Option<Text<'a>>,
    cat: Option<Text<'a>>,
    name: Option<Text<'a>>,
    pid: Id<'a>,
    tid: Id<'a>,
    /// `ts` and `dur` in ns, read exactly from the number's text (on the parsing worker).
    ts: Option<i64>,
    dur: Option<i64>,
    args: RawArgs,
}

/// Deserializes a trace event into the slot it holds, overwriting what was there: an event
/// is a few hundred bytes, and returning each by value spent a sixth of the parse moving them.
struct EventSlot<'s, 'a>(&'s mut RawEvent<'a>);

impl<'de: 'a, 'a> DeserializeSeed<'de> for EventSlot<'_, 'a> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        struct V<'s, 'a>(&'s mut RawEvent<'a>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'_, 'a> {
            type Value = ();
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a trace event object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
                let e = self.0;
                *e = RawEvent::default();
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    match key.as_ref() {
                        b"ph" => {
                            e.ph = map.next_value()?;
                            if e.ph.as_deref() != Some("X") {
                                // Not a complete event: skip the rest unparsed.
                                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                                return Ok(());
                            }
                        }
                        b"cat" => e.cat = map.next_value()?,
                        b"name" => e.name = map.next_value()?,
                        b"pid" => e.pid = map.next_value()?,
                        b"tid" => e.tid = map.next_value()?,
                        b"ts" => e.ts = map.next_value::<Micros>()?.0,
                        b"dur" => e.dur = map.next_value::<Micros>()?.0,
                        b"args" => {
                            let dims = e.name.as_deref().is_some_and(|n| SHAPE_PROBES.contains(&n));
                            map.next_value_seed(ArgsSlot {
                                args: &mut e.args,
                                dims,
                            })?;
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(())
            }
        }
        d.deserialize_map(V(self.0))
    }
}

/// A time in microseconds as integer ns ([`micros_text_to_ns`]); `None` when it is not a
/// number.
struct Micros(Option<i64>);

impl<'de> Deserialize<'de> for Micros {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Option::<&RawValue>::deserialize(d)?;
        Ok(Micros(
            raw.and_then(|t| micros_text_to_ns(t.get().as_bytes())),
        ))
    }
}

/// The `args` llmprof reads. Deserialized by hand with byte keys: a trace has millions of
/// `args` keys (`Input Dims`, `Concrete Inputs`, ...) that are skipped, and comparing raw
/// bytes spares a UTF-8 check per key.
#[derive(Debug, Default, Clone, PartialEq)]
struct RawArgs {
    /// `Input Dims`, read only for the operators whose shapes tell the token counts
    /// (see [`ShapeProbe`]); skipped for every other event.
    input_dims: Option<Vec<Vec<i64>>>,
    external_id: Int,
    correlation: Int,
    stream: Int,
    grid: Dims,
    block: Dims,
    registers: Int,
    bytes: Int,
    /// `graph id` / `graph node id`, which some PyTorch versions give graph-replayed kernels.
    graph_id: Int,
    graph_node: Int,
    /// The NCCL metadata the PyTorch profiler gives collective kernels (`Collective name`,
    /// `In msg nelems`, `dtype`, `Group size`, `Process Group Name`).
    collective: Word,
    in_elements: Int,
    dtype: Word,
    group_size: Int,
    process_group: Word,
}

/// Deserializes `args` into `args` (cleared first), reading `Input Dims` only when `dims` is
/// set.
struct ArgsSlot<'s> {
    args: &'s mut RawArgs,
    dims: bool,
}

impl<'de> DeserializeSeed<'de> for ArgsSlot<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        struct V<'s> {
            a: &'s mut RawArgs,
            dims: bool,
        }
        impl<'de> Visitor<'de> for V<'_> {
            type Value = ();
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an `args` object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
                let a = self.a;
                *a = RawArgs::default();
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    match key.as_ref() {
                        b"Input Dims" if self.dims => {
                            a.input_dims = Some(map.next_value::<InputDims>()?.0);
                        }
                        b"External id" => a.external_id = map.next_value()?,
                        b"correlation" => a.correlation = map.next_value()?,
                        b"stream" => a.stream = map.next_value()?,
                        b"grid" => a.grid = map.next_value()?,
                        b"block" => a.block = map.next_value()?,
                        b"registers per thread" => a.registers = map.next_value()?,
                        b"bytes" => a.bytes = map.next_value()?,
                        b"graph id" => a.graph_id = map.next_value()?,
                        b"graph node id" => a.graph_node = map.next_value()?,
                        b"Collective name" => a.collective = map.next_value()?,
                        b"In msg nelems" => a.in_elements = map.next_value()?,
                        b"dtype" => a.dtype = map.next_value()?,
                        b"Group size" => a.group_size = map.next_value()?,
                        b"Process Group Name" => a.process_group = map.next_value()?,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(())
            }
            fn visit_unit<E: de::Error>(self) -> Result<(), E> {
                *self.a = RawArgs::default();
                Ok(())
            }
        }
        d.deserialize_any(V {
            a: self.args,
            dims: self.dims,
        })
    }
}

/// `Input Dims`: one list of sizes per input; an input that is not a list of integers (a
/// scalar, a tensor list) reads as an empty list.
struct InputDims(Vec<Vec<i64>>);

impl<'de> Deserialize<'de> for InputDims {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw: Vec<Lenient2> = Option::<Vec<Lenient2>>::deserialize(d)?.unwrap_or_default();
        Ok(InputDims(raw.into_iter().map(|l| l.0).collect()))
    }
}

/// One input's sizes, leniently.
struct Lenient2(Vec<i64>);

impl<'de> Deserialize<'de> for Lenient2 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Lenient2;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of sizes")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Lenient2, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = s.next_element::<Lenient>()? {
                    out.push(v.i64().unwrap_or(-1));
                }
                Ok(Lenient2(out))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Lenient2, E> {
                Ok(Lenient2(Vec::new()))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Lenient2, E> {
                Ok(Lenient2(Vec::new()))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Lenient2, E> {
                Ok(Lenient2(Vec::new()))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Lenient2, E> {
                Ok(Lenient2(Vec::new()))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Lenient2, E> {
                Ok(Lenient2(Vec::new()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Lenient2, E> {
                Ok(Lenient2(Vec::new()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Lenient2, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Lenient2(Vec::new()))
            }
        }
        d.deserialize_any(V)
    }
}

/// A map key as raw bytes, borrowed when unescaped.
struct Key<'a>(Cow<'a, [u8]>);

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_vec())))
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v.as_bytes())))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.as_bytes().to_vec())))
            }
        }
        d.deserialize_bytes(V)
    }
}

/// An integer argument; any other JSON value (or a non-integer) is `None`, never an error.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Int(Option<i64>);

impl Int {
    fn i64(self) -> Option<i64> {
        self.0
    }
    fn u64(self) -> Option<u64> {
        self.0.and_then(|v| u64::try_from(v).ok())
    }
}

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Int(Lenient::deserialize(d)?.i64()))
    }
}

/// A string argument, owned (only collective kernels have them); a number reads as its
/// decimal text (`Process Group Name` may be `0`), anything else as `None`.
#[derive(Debug, Default, Clone, PartialEq)]
struct Word(Option<String>);

impl<'de> Deserialize<'de> for Word {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Word(match Id::deserialize(d)? {
            Id::Str(s) => Some(s.into_owned()),
            Id::Int(v) => Some(v.to_string()),
            Id::Missing => None,
        }))
    }
}

/// A `pid`/`tid`: a number, or a string such as `"Spans"`.
#[derive(Debug, Default, Clone, PartialEq)]
enum Id<'a> {
    #[default]
    Missing,
    Int(i64),
    Str(Cow<'a, str>),
}

impl Id<'_> {
    fn u64(&self) -> Option<u64> {
        match self {
            Id::Int(v) => u64::try_from(*v).ok(),
            _ => None,
        }
    }
    fn key(&self) -> IdKey {
        match self {
            Id::Int(v) => IdKey::Int(*v),
            Id::Str(s) => IdKey::Str(s.to_string()),
            Id::Missing => IdKey::None,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Id<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Id<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a pid or tid")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Id<'de>, E> {
                Ok(Id::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Id<'de>, E> {
                Ok(i64::try_from(v).map_or(Id::Missing, Id::Int))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Id<'de>, E> {
                Ok(Id::Int(v as i64))
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Id<'de>, E> {
                Ok(Id::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Id<'de>, E> {
                Ok(Id::Str(Cow::Owned(v.to_string())))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Id<'de>, E> {
                Ok(Id::Missing)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Id<'de>, E> {
                Ok(Id::Missing)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Id<'de>, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Id::Missing)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Id<'de>, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Id::Missing)
            }
        }
        d.deserialize_any(V)
    }
}

/// A string borrowed from the input when it has no escapes, owned otherwise.
///
/// serde's own `Cow<str>` inside an `Option` always allocates; this borrows, which matters
/// for half a million event names.
#[derive(Debug, PartialEq)]
struct Text<'a>(Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// A scalar that may be an integer, a float, a string or something else; never fails.
#[derive(Debug, Default, Clone, PartialEq)]
enum Lenient {
    #[default]
    Missing,
    Int(i64),
    Float(f64),
    Other,
}

impl Lenient {
    fn i64(&self) -> Option<i64> {
        match self {
            Lenient::Int(v) => Some(*v),
            Lenient::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => Some(*f as i64),
            _ => None,
        }
    }
    fn u64(&self) -> Option<u64> {
        self.i64().and_then(|v| u64::try_from(v).ok())
    }
}

impl<'de> Deserialize<'de> for Lenient {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Lenient;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Lenient, E> {
                Ok(Lenient::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Lenient, E> {
                Ok(i64::try_from(v).map_or(Lenient::Float(v as f64), Lenient::Int))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Lenient, E> {
                Ok(Lenient::Float(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Lenient, E> {
                // Numbers written as strings are accepted; other text is not a number.
                Ok(v.trim()
                    .parse::<i64>()
                    .map(Lenient::Int)
                    .unwrap_or(Lenient::Other))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Lenient, E> {
                Ok(Lenient::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Lenient, E> {
                Ok(Lenient::Other)
            }
            fn visit_none<E: de::Error>(self) -> Result<Lenient, E> {
                Ok(Lenient::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Lenient, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Lenient::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Lenient, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Lenient::Other)
            }
        }
        d.deserialize_any(V)
    }
}

fn lenient_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(Lenient::deserialize(d)?.u64())
}

/// `[x, y, z]` launch dimensions; anything else is `None`.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Dims(Option<[u32; 3]>);

impl<'de> Deserialize<'de> for Dims {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Lenient::deserialize_dims(d)? {
            Some(v) => Ok(Dims(Some(v))),
            None => Ok(Dims(None)),
        }
    }
}

impl Lenient {
    fn deserialize_dims<'de, D: Deserializer<'de>>(d: D) -> Result<Option<[u32; 3]>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Option<[u32; 3]>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("launch dimensions")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
                let mut out = [1u32; 3];
                let mut n = 0;
                let mut ok = true;
                while let Some(v) = s.next_element::<Lenient>()? {
                    match (n < 3, v.u64().and_then(|x| u32::try_from(x).ok())) {
                        (true, Some(x)) => out[n] = x,
                        _ => ok = false,
                    }
                    n += 1;
                }
                Ok((ok && n == 3).then_some(out))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(None)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum IdKey {
    None,
    Int(i64),
    Str(String),
}

/// Microseconds as JSON number text (`4448858842985.461`) to integer nanoseconds, exactly:
/// digits past the third decimal are rounded half up. `None` for text that is not a finite,
/// non-exponent decimal number within range, where it falls back to `f64`.
pub(crate) fn micros_text_to_ns(bytes: &[u8]) -> Option<i64> {
    let (neg, digits) = match bytes.first() {
        Some(b'-') => (true, &bytes[1..]),
        _ => (false, bytes),
    };
    // One pass over `int[.frac]`; anything else (exponent, garbage) takes the f64 route.
    let mut int_part: i64 = 0;
    let mut i = 0;
    while i < digits.len() && digits[i].is_ascii_digit() {
        int_part = int_part
            .checked_mul(10)?
            .checked_add((digits[i] - b'0') as i64)?;
        i += 1;
    }
    let int_digits = i;
    let mut frac_ns: i64 = 0;
    let mut frac_digits = 0;
    let mut round_up = false;
    if i < digits.len() && digits[i] == b'.' {
        i += 1;
        while i < digits.len() && digits[i].is_ascii_digit() {
            match frac_digits {
                0..=2 => frac_ns = frac_ns * 10 + (digits[i] - b'0') as i64,
                3 => round_up = digits[i] >= b'5',
                _ => {}
            }
            frac_digits += 1;
            i += 1;
        }
    }
    if int_digits == 0 || i != digits.len() {
        let v: f64 = std::str::from_utf8(bytes).ok()?.trim().parse().ok()?;
        let ns = (v * 1000.0).round();
        return (ns.is_finite() && ns.abs() < 9.0e18).then_some(ns as i64);
    }
    while frac_digits < 3 {
        frac_ns *= 10;
        frac_digits += 1;
    }
    let ns = int_part
        .checked_mul(1000)?
        .checked_add(frac_ns + round_up as i64)?;
    Some(if neg { -ns } else { ns })
}

// ---------------------------------------------------------------------------------------------
// The sink: keeps what llmprof needs of each event.

/// A shape-probe operator call (see [`SHAPE_PROBES`]).
#[derive(Debug)]
struct ShapeProbe {
    thread: u32,
    start: i64,
    embedding: bool,
    /// Index into the [`Shapes`] of the piece (then of the trace).
    shape: u32,
}

/// The distinct input shapes of the shape probes, each stored once (a model's `aten::linear`
/// calls repeat a handful of shapes thousands of times). Only the first two inputs are kept:
/// they are all that [`infer_workload`] reads.
#[derive(Debug, Default)]
struct Shapes {
    list: Vec<Vec<Vec<i64>>>,
    ids: HashMap<Vec<Vec<i64>>, u32>,
}

impl Shapes {
    fn intern(&mut self, mut dims: Vec<Vec<i64>>) -> u32 {
        dims.truncate(2);
        if let Some(&id) = self.ids.get(&dims) {
            return id;
        }
        let id = u32::try_from(self.list.len()).unwrap_or(u32::MAX);
        self.list.push(dims.clone());
        self.ids.insert(dims, id);
        id
    }

    fn get(&self, id: u32) -> &[Vec<i64>] {
        self.list.get(id as usize).map_or(&[], Vec::as_slice)
    }
}

#[derive(Debug, Clone, Copy)]
struct Annotation {
    thread: u32,
    tid: u64,
    start: i64,
    end: i64,
    name: u32,
}

#[derive(Debug, Default)]
struct Counts {
    skipped_no_time: u64,
    skipped_no_time_example: Option<String>,
    unknown_cat: HashMap<String, u64>,
    gpu_without_correlation: u64,
    gpu_without_correlation_example: Option<String>,
    negative_dur: u64,
    negative_dur_example: Option<String>,
}

impl Counts {
    /// Adds the counts of a later piece: sums, and the first example in file order.
    fn merge(&mut self, later: Counts) {
        self.skipped_no_time += later.skipped_no_time;
        self.gpu_without_correlation += later.gpu_without_correlation;
        self.negative_dur += later.negative_dur;
        let first = |a: &mut Option<String>, b: Option<String>| {
            if a.is_none() {
                *a = b;
            }
        };
        first(
            &mut self.skipped_no_time_example,
            later.skipped_no_time_example,
        );
        first(
            &mut self.gpu_without_correlation_example,
            later.gpu_without_correlation_example,
        );
        first(&mut self.negative_dur_example, later.negative_dur_example);
        for (cat, n) in later.unknown_cat {
            *self.unknown_cat.entry(cat).or_default() += n;
        }
    }
}

/// What a GPU event did, as the converter will be told.
#[derive(Debug)]
enum GpuKind {
    Kernel {
        launch: Option<Launch>,
        comm: Option<Box<OwnedComm>>,
    },
    Memcpy {
        direction: &'static str,
    },
    Memset,
}

/// A collective kernel's NCCL metadata, owned by its piece.
#[derive(Debug)]
struct OwnedComm {
    collective: String,
    in_elements: Option<u64>,
    dtype: Option<String>,
    group_size: Option<u32>,
    process_group: Option<String>,
}

/// A GPU op for the converter; `name` is a piece-local id in [`Batch::other_names`].
#[derive(Debug)]
struct GpuEvent {
    name: u32,
    kind: GpuKind,
    correlation: Option<i64>,
    stream: u64,
    start: i64,
    end: i64,
    bytes: u64,
    graph: Option<GraphRef>,
}

/// A launch call for the converter: its record, whose `thread` [`Sink::take`] fills in from
/// the piece-local `thread`, and its API name, an id in [`Batch::other_names`].
#[derive(Debug)]
struct LaunchEvent {
    record: LaunchRecord,
    thread: u32,
    api: u32,
}

/// One piece of `traceEvents`, digested on the worker that parsed it: complete events of the
/// categories llmprof uses become compact records; threads and names are numbered within the
/// piece, in order of first sight, and [`Sink::take`] renumbers them for the whole trace.
#[derive(Debug, Default)]
struct Batch {
    /// Operator and annotation names (the ids of [`CpuOp::name`] and [`Annotation::name`]).
    names: Interner,
    /// API function and GPU op names, only ever passed on to the converter.
    other_names: Interner,
    threads: HashMap<(IdKey, IdKey), u32>,
    thread_keys: Vec<(IdKey, IdKey)>,
    ops: CallLog,
    annotations: Vec<Annotation>,
    probes: Vec<ShapeProbe>,
    shapes: Shapes,
    device: DeviceTimes,
    /// (correlation id, External id of the launching runtime call), in file order.
    runtime_ext: Pairs,
    launches: Vec<LaunchEvent>,
    gpu_events: Vec<GpuEvent>,
    first_ts: Option<i64>,
    counts: Counts,
}

impl Batch {
    fn thread(&mut self, pid: &Id<'_>, tid: &Id<'_>) -> u32 {
        let key = (pid.key(), tid.key());
        if let Some(&id) = self.threads.get(&key) {
            return id;
        }
        // Four billion threads would take a trace of hundreds of GB: ids saturate, not wrap.
        let id = u32::try_from(self.thread_keys.len()).unwrap_or(u32::MAX);
        self.thread_keys.push(key.clone());
        self.threads.insert(key, id);
        id
    }

    /// Reads one trace event: complete events of the categories llmprof uses become CPU ops,
    /// annotations, launches or GPU ops (the last two only when `convert`); the rest are
    /// skipped (counted where unexpected).
    fn event(&mut self, ev: &mut RawEvent<'_>, convert: bool) {
        if ev.ph.as_deref() != Some("X") {
            return; // flows, metadata, instant events, counters
        }
        let cat = ev.cat.as_deref().unwrap_or("");
        if !self.wanted(cat) {
            return;
        }
        let name = ev.name.as_deref().unwrap_or("");
        let Some((start, end)) = self.times(cat, name, ev.ts, ev.dur) else {
            return;
        };
        self.first_ts = Some(self.first_ts.map_or(start, |f| f.min(start)));
        let args = &mut ev.args;
        match cat {
            "cpu_op" => self.cpu_op(name, start, end, args, &ev.pid, &ev.tid),
            "user_annotation" => self.annotation(name, start, end, &ev.pid, &ev.tid),
            "cuda_runtime" | "cuda_driver" => {
                let call = RuntimeCall {
                    name,
                    driver: cat == "cuda_driver",
                    start,
                    end,
                };
                self.runtime_call(call, args, &ev.pid, &ev.tid, convert)
            }
            _ => self.gpu_event(cat, name, (start, end), args, &ev.tid, convert),
        }
    }

    /// Whether events of category `cat` are read; a category neither read nor known to be of
    /// no use is counted for a diagnostic.
    fn wanted(&mut self, cat: &str) -> bool {
        let wanted = matches!(
            cat,
            "cpu_op"
                | "user_annotation"
                | "kernel"
                | "gpu_memcpy"
                | "gpu_memset"
                | "cuda_runtime"
                | "cuda_driver"
        );
        if !wanted
            && !matches!(
                cat,
                "gpu_user_annotation"
                    | "python_function"
                    | "overhead"
                    | "Trace"
                    | "cuda_sync"
                    | "cuda_profiler_range"
                    | "cpu_instant_event"
                    | "fwdbwd"
                    | "ac2g"
            )
        {
            *self.counts.unknown_cat.entry(cat.to_string()).or_default() += 1;
        }
        wanted
    }

    /// An event's start and end in ns from its `ts` and `dur` text; `None`, counted, when it
    /// has no time, a negative duration or an end past the range of `i64`.
    fn times(
        &mut self,
        cat: &str,
        name: &str,
        start: Option<i64>,
        dur: Option<i64>,
    ) -> Option<(i64, i64)> {
        let (Some(start), Some(dur)) = (start, dur) else {
            self.counts.skipped_no_time += 1;
            self.counts
                .skipped_no_time_example
                .get_or_insert_with(|| format!("{cat} `{name}`"));
            return None;
        };
        if dur < 0 {
            self.counts.negative_dur += 1;
            self.counts
                .negative_dur_example
                .get_or_insert_with(|| format!("{cat} `{name}` dur {dur} ns"));
            return None;
        }
        let Some(end) = start.checked_add(dur) else {
            self.counts.negative_dur += 1;
            return None;
        };
        Some((start, end))
    }

    /// A `cpu_op` event: an operator call, and a shape probe when it carries `Input Dims`.
    fn cpu_op(
        &mut self,
        name: &str,
        start: i64,
        end: i64,
        args: &mut RawArgs,
        pid: &Id<'_>,
        tid: &Id<'_>,
    ) {
        let thread = self.thread(pid, tid);
        if let Some(dims) = args.input_dims.take() {
            let shape = self.shapes.intern(dims);
            self.probes.push(ShapeProbe {
                thread,
                start,
                embedding: name == "aten::embedding",
                shape,
            });
        }
        let name = self.names.intern(name);
        self.ops
            .push(thread, name, start, end, args.external_id.i64());
    }

    /// A `user_annotation` event (`record_function`): a range.
    fn annotation(&mut self, name: &str, start: i64, end: i64, pid: &Id<'_>, tid: &Id<'_>) {
        let thread = self.thread(pid, tid);
        let name = self.names.intern(name);
        self.annotations.push(Annotation {
            thread,
            tid: tid.u64().unwrap_or(0),
            start,
            end,
            name,
        });
    }

    /// A CUDA runtime or driver call with a correlation id: it maps the id to the call's
    /// External id and is a launch for the converter. Calls without one are ignored.
    fn runtime_call(
        &mut self,
        call: RuntimeCall<'_>,
        args: &RawArgs,
        pid: &Id<'_>,
        tid: &Id<'_>,
        convert: bool,
    ) {
        let Some(correlation) = args.correlation.i64() else {
            return;
        };
        if let Some(ext) = args.external_id.i64() {
            self.runtime_ext.push(correlation, ext);
        }
        let thread = self.thread(pid, tid);
        if convert {
            let record = LaunchRecord {
                process: PROCESS,
                thread: 0,
                tid: tid.u64().unwrap_or(0),
                driver: call.driver,
                start: call.start,
                end: call.end,
                correlation,
                graph: LaunchRecord::is_graph_launch(call.name),
            };
            let api = self.other_names.intern(call.name);
            self.launches.push(LaunchEvent {
                record,
                thread,
                api,
            });
        }
    }

    fn gpu_event(
        &mut self,
        cat: &str,
        name: &str,
        (start, end): (i64, i64),
        args: &mut RawArgs,
        tid: &Id<'_>,
        convert: bool,
    ) {
        let correlation = args.correlation.i64();
        if correlation.is_none() {
            self.counts.gpu_without_correlation += 1;
            self.counts
                .gpu_without_correlation_example
                .get_or_insert_with(|| format!("{cat} `{name}`"));
        }
        self.device
            .push(args.external_id.i64(), correlation, span(start, end));
        if !convert {
            return;
        }
        let kind = match cat {
            "kernel" => GpuKind::Kernel {
                comm: args.collective.0.take().map(|collective| {
                    Box::new(OwnedComm {
                        collective,
                        in_elements: args.in_elements.u64(),
                        dtype: args.dtype.0.take(),
                        group_size: args.group_size.u64().and_then(|v| u32::try_from(v).ok()),
                        process_group: args.process_group.0.take(),
                    })
                }),
                launch: match (args.grid.0, args.block.0) {
                    (Some(grid), Some(block)) => Some(Launch {
                        grid,
                        block,
                        registers_per_thread: args.registers.u64().map(|v| v as u32),
                    }),
                    _ => None,
                },
            },
            "gpu_memcpy" => GpuKind::Memcpy {
                direction: memcpy_direction(name),
            },
            _ => GpuKind::Memset,
        };
        // A graph-replayed kernel is found through its `cudaGraphLaunch` (same correlation);
        // ids only where the trace gives them.
        let graph = args.graph_id.u64().filter(|&g| g != 0).map(|g| GraphRef {
            graph: u32::try_from(g).ok(),
            node: args.graph_node.u64().and_then(|n| u32::try_from(n).ok()),
        });
        let name = self.other_names.intern(name);
        self.gpu_events.push(GpuEvent {
            name,
            kind,
            correlation,
            // GPU events use tid = stream.
            stream: args.stream.u64().or(tid.u64()).unwrap_or(0),
            start,
            end,
            bytes: args.bytes.u64().unwrap_or(0),
            graph,
        });
    }
}

/// A runtime or driver API event's name, category and times.
struct RuntimeCall<'a> {
    name: &'a str,
    driver: bool,
    start: i64,
    end: i64,
}

/// Keeps what llmprof needs of the whole trace: the pieces' records, renumbered, in file
/// order; launches and GPU ops go on to the converter.
struct Sink<'c, 'd> {
    conv: ToConverter<'c>,
    diags: &'d mut Diagnostics,
    strings: Interner,
    threads: HashMap<(IdKey, IdKey), u32>,
    /// The `cpu_op` calls, piece by piece (on the walk's thread while it has them).
    calls: Vec<PieceCalls>,
    /// The operator table's walk, made here or on its thread ([`to_walk`]).
    walk: ToWalk,
    annotations: Vec<Annotation>,
    probes: Vec<ShapeProbe>,
    shapes: Shapes,
    device: DeviceTimes,
    /// (correlation id, External id of the launching runtime call), in file order.
    runtime_ext: Pairs,
    first_ts: Option<i64>,
    counts: Counts,
}

impl<'c, 'd> Sink<'c, 'd> {
    fn new(conv: ToConverter<'c>, walk: ToWalk, diags: &'d mut Diagnostics) -> Self {
        Sink {
            conv,
            diags,
            strings: Interner::default(),
            threads: HashMap::default(),
            calls: Vec::new(),
            walk,
            annotations: Vec::new(),
            probes: Vec::new(),
            shapes: Shapes::default(),
            device: DeviceTimes::default(),
            runtime_ext: Pairs::default(),
            first_ts: None,
            counts: Counts::default(),
        }
    }

    /// Takes the next piece: its threads and names get the trace's ids (in order of first
    /// sight, as if read one event at a time) and its records join the trace's.
    fn take(&mut self, b: Batch) {
        let threads: Vec<u32> = b
            .thread_keys
            .into_iter()
            .map(|key| {
                let next = u32::try_from(self.threads.len()).unwrap_or(u32::MAX);
                *self.threads.entry(key).or_insert(next)
            })
            .collect();
        let names: Vec<u32> = (0..b.names.len())
            .map(|id| self.strings.intern(b.names.get(id as u32)))
            .collect();
        let thread = |t: u32| threads[t as usize];
        let name = |n: u32| names[n as usize];
        let annotations: Vec<Annotation> = (b.annotations.into_iter())
            .map(|a| Annotation {
                thread: thread(a.thread),
                name: name(a.name),
                ..a
            })
            .collect();
        self.annotations.extend_from_slice(&annotations);
        let shapes: Vec<u32> = (b.shapes.list.into_iter())
            .map(|d| self.shapes.intern(d))
            .collect();
        self.probes.extend(b.probes.into_iter().map(|p| ShapeProbe {
            thread: thread(p.thread),
            shape: shapes[p.shape as usize],
            ..p
        }));
        self.device.append(b.device);
        self.runtime_ext.append(b.runtime_ext);
        if let Some(first) = b.first_ts {
            self.first_ts = Some(self.first_ts.map_or(first, |f| f.min(first)));
        }
        self.counts.merge(b.counts);
        let batch = || ConvBatch {
            launches: b.launches,
            gpu_events: b.gpu_events,
            other_names: b.other_names,
            threads: threads.clone(),
        };
        match &mut self.conv {
            ToConverter::Here(conv) => batch().apply(conv),
            // A converter thread that is gone panicked: the scope's end reports it.
            ToConverter::Thread(tx) => {
                // A full queue: the converter is behind, and the calling thread waits for it.
                if let Err(mpsc::TrySendError::Full(batch)) = tx.try_send(batch()) {
                    let _waiting = crate::spans::span(crate::spans::Kind::WaitConverter, 0);
                    drop(tx.send(batch));
                }
            }
            ToConverter::None => {}
        }
        let calls = (b.ops.len() > 0).then(|| {
            let mut log = b.ops;
            log.compact();
            PieceCalls {
                log,
                threads,
                names,
            }
        });
        match &mut self.walk {
            ToWalk::Here(walk) => {
                walk.take(&annotations, calls.as_ref());
                self.calls.extend(calls);
            }
            // A walk thread that is gone panicked: joining it reports it.
            ToWalk::Thread(tx) => {
                if calls.is_some() || !annotations.is_empty() {
                    drop(tx.send((annotations, calls)));
                }
            }
        }
    }
}

/// Where a piece's annotations and calls go to be walked: to the walk here, or to its thread.
enum ToWalk {
    Here(Box<LiveWalk>),
    Thread(mpsc::SyncSender<(Vec<Annotation>, Option<PieceCalls>)>),
}

/// Pieces sent ahead to the operator walk's thread.
const WALK_AHEAD: usize = 16;

/// The operator table's walk ([`LiveWalk`]) on a thread of its own, which gives back the walk
/// and the calls it was sent once the sender is dropped; `None` with fewer than four workers,
/// or no thread: then the calling thread walks each piece as it merges it.
#[allow(clippy::type_complexity)]
fn to_walk<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    workers: usize,
) -> (
    ToWalk,
    Option<std::thread::ScopedJoinHandle<'s, (LiveWalk, Vec<PieceCalls>)>>,
) {
    let here = || ToWalk::Here(Box::default());
    if workers < 4 {
        return (here(), None);
    }
    let (tx, rx) = mpsc::sync_channel::<(Vec<Annotation>, Option<PieceCalls>)>(WALK_AHEAD);
    let spawned = std::thread::Builder::new()
        .name("operators".into())
        .spawn_scoped(s, move || {
            let (mut walk, mut calls) = (LiveWalk::default(), Vec::new());
            for (annotations, piece) in rx {
                let _walking = crate::spans::span(crate::spans::Kind::Walk, 0);
                walk.take(&annotations, piece.as_ref());
                calls.extend(piece);
            }
            (walk, calls)
        });
    match spawned {
        Ok(handle) => (ToWalk::Thread(tx), Some(handle)),
        Err(_) => (here(), None),
    }
}

/// Where a piece's records for the converter go: nowhere (the trace is not the timing
/// source), to the converter here, or to its thread.
enum ToConverter<'c> {
    None,
    Here(&'c mut TraceConverter),
    Thread(mpsc::SyncSender<ConvBatch>),
}

/// Pieces sent ahead to the converter's thread: each holds a piece's launches and GPU ops.
const CONVERTER_AHEAD: usize = 16;

/// The converter's records of a piece, applied in file order.
struct ConvBatch {
    launches: Vec<LaunchEvent>,
    gpu_events: Vec<GpuEvent>,
    other_names: Interner,
    /// The trace's numbers of the piece's threads.
    threads: Vec<u32>,
}

impl ConvBatch {
    fn apply(self, conv: &mut TraceConverter) {
        for l in self.launches {
            let record = LaunchRecord {
                thread: u64::from(self.threads[l.thread as usize]),
                ..l.record
            };
            conv.handle_launch(record, Some(self.other_names.get(l.api)));
        }
        for g in self.gpu_events {
            conv.handle_gpu_op(g.record(&self.other_names));
        }
    }
}

/// The converter in `slot` on a thread of its own, which takes it from the slot and puts it
/// back when the last sender is dropped: the calling thread merges the next pieces while it
/// applies a piece's launches and GPU ops (about two thirds of the merge). With fewer than
/// four workers, or no thread, the converter is applied here.
fn to_converter<'s, 'c: 's>(
    s: &'s std::thread::Scope<'s, '_>,
    slot: &'s Mutex<Option<&'c mut TraceConverter>>,
    workers: usize,
) -> ToConverter<'c> {
    let take = || slot.lock().unwrap_or_else(|e| e.into_inner()).take();
    if workers < 4 {
        return take().map_or(ToConverter::None, ToConverter::Here);
    }
    if slot.lock().unwrap_or_else(|e| e.into_inner()).is_none() {
        return ToConverter::None;
    }
    let (tx, rx) = mpsc::sync_channel::<ConvBatch>(CONVERTER_AHEAD);
    let spawned = std::thread::Builder::new()
        .name("convert".into())
        .spawn_scoped(s, move || {
            let mut conv = take();
            for batch in rx {
                let _converting = crate::spans::span(crate::spans::Kind::Convert, 0);
                if let Some(conv) = conv.as_deref_mut() {
                    batch.apply(conv);
                }
            }
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = conv;
        });
    match spawned {
        Ok(_) => ToConverter::Thread(tx),
        Err(_) => take().map_or(ToConverter::None, ToConverter::Here),
    }
}

impl GpuEvent {
    /// The converter's record, its name looked up in the piece's `names`.
    fn record<'a>(&'a self, names: &'a Interner) -> GpuOpRecord<'a> {
        let name = names.get(self.name);
        let op = match &self.kind {
            GpuKind::Kernel { launch, comm } => GpuOp::Kernel {
                name,
                short_name: None,
                launch: *launch,
                comm: comm.as_deref().map(|c| CommArgs {
                    collective: &c.collective,
                    in_elements: c.in_elements,
                    dtype: c.dtype.as_deref(),
                    group_size: c.group_size,
                    process_group: c.process_group.as_deref(),
                }),
            },
            GpuKind::Memcpy { direction } => GpuOp::Memcpy {
                direction,
                bytes: self.bytes,
            },
            GpuKind::Memset => GpuOp::Memset { bytes: self.bytes },
        };
        GpuOpRecord {
            process: PROCESS,
            correlation: self.correlation,
            stream: self.stream,
            start: self.start,
            end: self.end,
            op,
            graph: self.graph,
        }
    }
}

/// Kineto names memcpys `Memcpy HtoD (Pageable -> Device)`; Nsight Systems words the
/// direction `Host-to-Device`. Use the latter so both sources give the same kernel rows.
fn memcpy_direction(name: &str) -> &'static str {
    let n = name.to_ascii_uppercase();
    if n.contains("HTOD") {
        "Host-to-Device"
    } else if n.contains("DTOH") {
        "Device-to-Host"
    } else if n.contains("DTOD") {
        "Device-to-Device"
    } else if n.contains("HTOH") {
        "Host-to-Host"
    } else if n.contains("PTOP") {
        "Peer-to-Peer"
    } else {
        "Unknown"
    }
}

fn report_counts(c: &Counts, diags: &mut Diagnostics) {
    diags.note_n(
        "kineto.event_without_time",
        Severity::Warning,
        c.skipped_no_time,
        || "complete events (`ph: X`) without a numeric `ts`/`dur` were skipped".into(),
        || c.skipped_no_time_example.clone().unwrap_or_default(),
    );
    diags.note_n(
        "kineto.negative_duration",
        Severity::Warning,
        c.negative_dur,
        || "events with a negative duration were skipped".into(),
        || c.negative_dur_example.clone().unwrap_or_default(),
    );
    diags.note_n(
        "kineto.gpu_op_without_correlation",
        Severity::Warning,
        c.gpu_without_correlation,
        || {
            "GPU ops without `args.correlation` cannot be tied to their launch: they count in \
             the kernel table but in no stage"
                .into()
        },
        || {
            c.gpu_without_correlation_example
                .clone()
                .unwrap_or_default()
        },
    );
    let mut unknown: Vec<_> = c.unknown_cat.iter().collect();
    unknown.sort();
    let total: u64 = unknown.iter().map(|(_, n)| **n).sum();
    diags.note_n(
        "kineto.unknown_category",
        Severity::Info,
        total,
        || "events of categories llmprof does not use were ignored".into(),
        || {
            unknown
                .iter()
                .map(|(k, n)| format!("{k}: {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        },
    );
}

/// For each `(thread, time)` point, the annotations on that thread that contain it, outermost
/// first.
fn enclosing_annotations(points: &[(u32, i64)], annotations: &[Annotation]) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new(); points.len()];
    if annotations.is_empty() {
        return out;
    }
    let mut by_thread: HashMap<u32, Vec<usize>> = HashMap::default();
    for (i, a) in annotations.iter().enumerate() {
        by_thread.entry(a.thread).or_default().push(i);
    }
    for list in by_thread.values_mut() {
        list.sort_by_key(|&i| (annotations[i].start, std::cmp::Reverse(annotations[i].end)));
    }
    let mut order: Vec<usize> = (0..points.len())
        .filter(|&i| by_thread.contains_key(&points[i].0))
        .collect();
    order.sort_by_key(|&i| points[i]);
    let mut active: Vec<usize> = Vec::new();
    let mut next = 0;
    let mut current = None;
    for i in order {
        let (thread, t) = points[i];
        let Some(anns) = by_thread.get(&thread) else {
            continue;
        };
        if current != Some(thread) {
            current = Some(thread);
            active.clear();
            next = 0;
        }
        while next < anns.len() && annotations[anns[next]].start <= t {
            active.push(anns[next]);
            next += 1;
        }
        active.retain(|&a| annotations[a].end > t);
        out[i] = active.clone();
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Token counts from operator shapes

/// Token counts the trace's operator shapes make unambiguous.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InferredWorkload {
    pub batch_size: Option<u64>,
    pub prompt_tokens: Option<u64>,
    /// Decode steps per instance of the decode stage, in order.
    pub decode_steps: Option<Vec<u64>>,
    pub prefill_logits: Option<u64>,
}

/// Reads token counts from `aten::embedding` and LM-head `aten::linear` shapes:
/// * a prefill stage (by name) whose every instance embeds exactly one `[B, s]` batch with
///   `s > 1`, the same in every instance, gives the batch `B` and the prompt length `s`;
/// * a decode stage whose instances embed only `[B, 1]` batches gives the decode steps per
///   instance (one embedding per step);
/// * the `aten::linear` inside prefill whose weight is the `[V, h]` embedding table's shape is
///   the LM head; its input `[B, n, h]` gives the logits computed per sequence.
///
/// Anything inconsistent leaves the count unknown rather than guessed.
fn infer_workload(
    strings: &[String],
    annotations: &[Annotation],
    probes: &[ShapeProbe],
    shapes: &Shapes,
) -> InferredWorkload {
    use llmprof_bundle::StageRole;
    let points: Vec<(u32, i64)> = probes.iter().map(|p| (p.thread, p.start)).collect();
    let enclosing = enclosing_annotations(&points, annotations);
    let role = |a: usize| StageRole::of_name(&strings[annotations[a].name as usize]);
    let vocab_table = probes
        .iter()
        .find(|p| p.embedding)
        .and_then(|p| shapes.get(p.shape).first().cloned())
        .filter(|d| d.len() == 2);
    // Per annotation instance: the embedding batches [B, s] and LM-head logits counts.
    let mut embeds: HashMap<usize, Vec<(i64, i64)>> = HashMap::default();
    let mut logits: HashMap<usize, Vec<(i64, i64)>> = HashMap::default();
    for (p, anns) in probes.iter().zip(&enclosing) {
        for &a in anns {
            if p.embedding {
                if let Some([b, s]) = shapes.get(p.shape).get(1).map(Vec::as_slice) {
                    embeds.entry(a).or_default().push((*b, *s));
                }
            } else if shapes.get(p.shape).get(1) == vocab_table.as_ref() {
                if let Some(input) = shapes.get(p.shape).first().filter(|d| d.len() >= 2) {
                    let n = input[input.len() - 2];
                    let b = if input.len() >= 3 { input[0] } else { 1 };
                    logits.entry(a).or_default().push((b, n));
                }
            }
        }
    }
    let instances = |r: StageRole| -> Vec<usize> {
        let mut v: Vec<usize> = (0..annotations.len()).filter(|&a| role(a) == r).collect();
        v.sort_by_key(|&a| annotations[a].start);
        v
    };
    let same = |v: &[(i64, i64)]| v.windows(2).all(|w| w[0] == w[1]);
    let mut out = InferredWorkload::default();

    let prefill = instances(StageRole::Prefill);
    let prefill_embeds: Vec<(i64, i64)> = prefill
        .iter()
        .filter_map(|a| match embeds.get(a).map(Vec::as_slice) {
            Some([one]) => Some(*one),
            _ => None,
        })
        .collect();
    if !prefill.is_empty() && prefill_embeds.len() == prefill.len() && same(&prefill_embeds) {
        let (b, s) = prefill_embeds[0];
        if b > 0 && s > 1 {
            out.batch_size = Some(b as u64);
            out.prompt_tokens = Some(s as u64);
            let heads: Vec<(i64, i64)> = prefill
                .iter()
                .filter_map(|a| match logits.get(a).map(Vec::as_slice) {
                    Some([one]) => Some(*one),
                    _ => None,
                })
                .collect();
            if heads.len() == prefill.len() && same(&heads) && heads[0].1 > 0 {
                out.prefill_logits = Some(heads[0].1 as u64);
            }
        }
    }
    let decode = instances(StageRole::Decode);
    let mut steps = Vec::new();
    for a in &decode {
        let calls = embeds.get(a).map(Vec::as_slice).unwrap_or(&[]);
        let batch_ok = calls
            .iter()
            .all(|&(b, s)| s == 1 && Some(b as u64) == out.batch_size.or(Some(b as u64)));
        if calls.is_empty() || !batch_ok || !same(calls) {
            steps.clear();
            break;
        }
        steps.push(calls.len() as u64);
    }
    if !steps.is_empty() && steps.len() == decode.len() {
        if out.batch_size.is_none() {
            out.batch_size = embeds
                .get(&decode[0])
                .and_then(|c| c.first())
                .map(|&(b, _)| b as u64);
        }
        out.decode_steps = Some(steps);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gzip_window_grows_with_the_trace_and_its_share_stays_small() {
        const MB: u64 = 1 << 20;
        let held = |n: u64| (BUFFERS * gzip_window(n)) as u64;
        assert_eq!(held(0), 2 * MB - 2 * MB % BUFFERS as u64);
        assert_eq!(
            held(989_440_024),
            16 * MB - 16 * MB % BUFFERS as u64,
            "1 GB"
        );
        assert_eq!(held(2048 * MB), 32 * MB - 32 * MB % BUFFERS as u64);
        assert_eq!(held(u64::MAX), 48 * MB);
        let sizes: Vec<u64> = (0..400).map(|i| (i * i) as u64 * MB / 8).collect();
        for pair in sizes.windows(2) {
            assert!(held(pair[0]) <= held(pair[1]), "{pair:?}");
        }
        for &n in &sizes {
            let share = held(n) as f64 / n as f64;
            assert!(n < 64 * MB || share < 0.04, "{n}: {share}");
            assert!(n < 1_000_000_000 || share < 0.02, "{n}: {share}");
        }
    }

    #[test]
    fn microsecond_text_converts_exactly() {
        // Real timestamps of the H200 trace; f64 * 1000 gets some of these wrong by 1 ns.
        assert_eq!(
            micros_text_to_ns(b"4448858842985.461"),
            Some(4448858842985461)
        );
        assert_eq!(
            micros_text_to_ns(b"4448860991529.362"),
            Some(4448860991529362)
        );
        assert_eq!(micros_text_to_ns(b"0.928"), Some(928));
        assert_eq!(micros_text_to_ns(b"12"), Some(12000));
        assert_eq!(micros_text_to_ns(b"1.5"), Some(1500));
        assert_eq!(micros_text_to_ns(b"0.0005"), Some(1));
        assert_eq!(micros_text_to_ns(b"1.2e3"), Some(1_200_000));
        assert_eq!(micros_text_to_ns(b"-2.5"), Some(-2500));
        assert_eq!(micros_text_to_ns(b"abc"), None);
    }

    #[test]
    fn memcpy_directions_use_nsys_words() {
        assert_eq!(
            memcpy_direction("Memcpy HtoD (Pageable -> Device)"),
            "Host-to-Device"
        );
        assert_eq!(
            memcpy_direction("Memcpy DtoD (Device -> Device)"),
            "Device-to-Device"
        );
    }
}

/// Format quirks, each on a small trace made of real event shapes of the H200 trace.
#[cfg(test)]
mod quirk_tests {
    use super::*;
    use llmprof_bundle::Source;

    const HEAD: &str = r#"{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "numSms": 132}], "traceEvents": ["#;
    const ANNOTATION: &str = r#"{"ph": "X", "cat": "user_annotation", "name": "decode", "pid": 405, "tid": 405, "ts": 1000.000, "dur": 100.000, "args": {"External id": 1}}"#;

    fn run(
        events: &[&str],
    ) -> (
        crate::convert::TraceParts,
        KinetoInput,
        Vec<llmprof_bundle::Diagnostic>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        std::fs::write(&path, format!("{HEAD}{}]}}", events.join(",\n"))).unwrap();
        let mut conv = TraceConverter::new();
        let mut diags = Diagnostics::new(Source::Kineto, "t.json");
        let input = read(&path, Some(&mut conv), &mut diags, &mut |_| {}).unwrap();
        let parts = conv.finish(&mut diags);
        (parts, input, diags.finish())
    }

    /// Small windows and pieces on several workers read a real trace exactly as one piece
    /// on one thread does: the same records, in the same order, to the converter.
    #[test]
    fn tiny_chunks_read_what_one_piece_reads() {
        let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/");
        for f in [
            "h100-cuda-graphs/kineto_trace.json.gz",
            "hta-multirank/sampled_rank-1.json.gz",
        ] {
            let path = std::path::PathBuf::from(fixtures).join(f);
            let (a, b) = read_whole_and_in_pieces(&path);
            assert!(a.len() > 10_000, "{f}: {a}");
            assert!(a == b, "{f}: tiny chunks read differently");
        }
    }

    fn launch(corr: u32, ts: &str, name: &str) -> String {
        format!(
            r#"{{"ph": "X", "cat": "cuda_runtime", "name": "{name}", "pid": 405, "tid": 405, "ts": {ts}, "dur": 5.0, "args": {{"External id": 7, "correlation": {corr}}}}}"#
        )
    }

    fn kernel(corr: u32, ts: &str, dur: &str) -> String {
        format!(
            r#"{{"ph": "X", "cat": "kernel", "name": "k{corr}", "pid": 0, "tid": 7, "ts": {ts}, "dur": {dur}, "args": {{"External id": 7, "device": 0, "stream": 7, "correlation": {corr}, "grid": [1, 1, 1], "block": [128, 1, 1]}}}}"#
        )
    }

    #[test]
    fn string_pids_flows_and_metadata_are_accepted() {
        let (p, input, d) = run(&[
            ANNOTATION,
            r#"{"name": "process_name", "ph": "M", "ts": 4448858842767.927, "pid": 405, "tid": 0, "args": {"name": "python3"}}"#,
            r#"{"ph": "X", "cat": "Trace", "ts": 4448858842672.904, "dur": 2390453.757, "pid": "Spans", "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}}"#,
            r#"{"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": 4448858842672.904}"#,
            r#"{"ph": "f", "id": 832347, "pid": 0, "tid": 7, "ts": 4448860991529.362, "cat": "ac2g", "name": "ac2g", "bp": "e"}"#,
        ]);
        assert_eq!(p.stages.len(), 1);
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(input.facts.device.unwrap().sm_count, Some(132));
    }

    #[test]
    fn overlapping_kernels_on_one_stream_are_kept() {
        // Programmatic dependent launch: the second kernel starts before the first ends.
        let (p, _, _) = run(&[
            ANNOTATION,
            &launch(1, "1010.0", "cudaLaunchKernelExC"),
            &kernel(1, "1020.0", "10.0"),
            &launch(2, "1012.0", "cudaLaunchKernelExC"),
            &kernel(2, "1025.0", "10.0"),
        ]);
        assert_eq!(p.totals.kernels, 2);
        assert_eq!(p.stages[0].kernel_ns, 20_000);
        assert_eq!(p.stages[0].gpu_busy_ns, 15_000, "union, not sum");
    }

    #[test]
    fn cuda_graph_kernels_attribute_through_the_graph_launch() {
        // Kernels replayed from a CUDA graph share the correlation id of `cudaGraphLaunch`.
        let g = |ts: &str| {
            format!(
                r#"{{"ph": "X", "cat": "kernel", "name": "graph_kernel", "pid": 0, "tid": 7, "ts": {ts}, "dur": 1.0, "args": {{"stream": 7, "correlation": 9, "graph id": 1, "graph node id": 3}}}}"#
            )
        };
        let (p, _, _) = run(&[
            ANNOTATION,
            &launch(9, "1050.0", "cudaGraphLaunch"),
            &g("1200.0"),
            &g("1202.0"),
        ]);
        let s = &p.stages[0];
        // One graph launch is one GPU op (as nvtx_gpu_proj_sum counts), running two kernels.
        assert_eq!((s.gpu_ops, s.kernels, s.graph_kernels), (1, 2, 2));
        assert_eq!((s.launches, s.graph_launches), (1, 1));
        assert_eq!(s.gpu_proj_ns, 3_000);
        assert_eq!(
            p.timeline.load().unwrap().kernels.graph,
            vec![Some(1), Some(1)]
        );
        assert_eq!(
            p.timeline.load().unwrap().kernels.graph_node,
            vec![Some(3), Some(3)]
        );
    }

    #[test]
    fn escaped_names_and_integer_timestamps() {
        let (p, _, _) = run(&[
            r#"{"ph": "X", "cat": "user_annotation", "name": "step \"1\" \u00b5", "pid": 405, "tid": 405, "ts": 1000, "dur": 100, "args": {}}"#,
        ]);
        assert_eq!(p.stages[0].name, "step \"1\" µ");
        assert_eq!(p.stages[0].wall_ns, 100_000);
    }

    #[test]
    fn odd_argument_types_do_not_fail_the_trace() {
        // A string correlation, a null stream and a grid that is not three numbers.
        let (p, _, _) = run(&[
            ANNOTATION,
            &launch(3, "1010.0", "cudaLaunchKernel"),
            r#"{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1020.0, "dur": 1.0, "args": {"correlation": "3", "stream": null, "grid": [1, "x"], "block": {}}}"#,
        ]);
        assert_eq!(p.stages[0].gpu_ops, 1);
        assert_eq!(p.kernels[0].launch, None);
    }
}
