//! Reading a JSON document whose bulk is one array of objects (kineto's `traceEvents`) from an
//! [`InputWindow`] that moves through the file, with the array's elements parsed on every core
//! (16 at most).
//!
//! The walk over the top-level object is sequential; the array is split into pieces at
//! *candidate* element boundaries (`}` `,` `{` with whitespace between). A candidate may lie
//! inside a string, so it is only a guess: each piece is parsed by a worker from its candidate
//! up to the first element that starts at or after the next piece's candidate, and the pieces
//! are consumed in order. A piece is used only when it starts exactly where the verified parse
//! of the pieces before it ended; otherwise the range is parsed again on the calling thread
//! from the verified position. A wrong guess therefore costs time, never correctness, and an
//! error met by a piece that started on a wrong guess is never reported.
//!
//! Each worker also digests its piece's elements into the parser's `Piece` (for kineto: compact
//! records with names numbered within the piece), so the work left to the calling thread is
//! only merging pieces, which reach the caller's sink in file order.
//!
//! The array is read one segment of the input at a time (a window's worth, shared by
//! reference count with the workers). The workers live as long as the array: while the sink
//! takes the last pieces of one segment, they parse the next segment's, so a segment's end is
//! no barrier. The element cut by a segment's end is read on the calling thread from a seam
//! buffer: the cut bytes, then the next segment's bytes up to its first piece. Nothing borrows
//! from a segment once it is read, so memory is bounded by the two segments held (the one
//! read and the next) and the pieces' digests, not by the file.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};

use serde::de::{DeserializeSeed, IgnoredAny};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::IngestError;
use crate::gunzip::Cores;
use crate::input::{InputWindow, Segment};
use crate::spans::{span, Kind};

/// How the elements of the array are parsed, and what a piece of them becomes.
pub(crate) trait ElementParser: Sync {
    /// One parsed element; each worker parses into one slot, reused element after element.
    type Element<'a>: Default;
    /// A piece's elements as the sink takes them, built on the worker that parsed them.
    type Piece: Send + Default;
    /// What the parse keeps from element to element of a piece (a cache of what it read).
    type Scratch: Default;
    /// Parses the element at the start of `bytes` into `slot`: whether to keep it, and the
    /// number of bytes it took.
    fn parse<'a>(
        &self,
        bytes: &'a [u8],
        slot: &mut Self::Element<'a>,
        scratch: &mut Self::Scratch,
    ) -> Result<(bool, usize), serde_json::Error>;
    /// Adds the element in `slot`, in file order, to its piece.
    fn add(&self, piece: &mut Self::Piece, slot: &mut Self::Element<'_>);
}

/// Where the reading failed: the input's byte offset and the problem.
#[derive(Debug)]
pub(crate) enum ChunkError {
    /// Not JSON, or JSON of the wrong shape, at `offset`.
    Json {
        offset: u64,
        error: serde_json::Error,
    },
    /// The input ends before the document does.
    Eof { offset: u64 },
    /// JSON of a shape the reader does not take (`what` says which).
    Shape { offset: u64, what: &'static str },
    /// Reading the input failed.
    Input(IngestError),
}

/// The top level of a document: the raw text of the keys asked for, and whether the array
/// was seen.
#[derive(Debug, Default)]
pub(crate) struct Document {
    pub header: Vec<(String, Box<RawValue>)>,
    pub saw_array: bool,
}

/// Tunables: the window's size, the size of the pieces handed to workers, and how a gzip
/// input is inflated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Chunking {
    pub window: usize,
    pub piece: usize,
    pub workers: usize,
    pub gunzip: Cores,
}

/// The most parse workers, whatever the cores. Each holds pieces in flight: on 64 cores the
/// 1 GB trace's `gzip -1` held 113 MiB of anonymous memory with a worker per core, past the
/// 0.1× line, and 88 MiB with 16. The readings were no slower with 16 (plain 0.62 s either
/// way, `gzip -1` 0.66 against 0.71 s): past them, the plain reading waits on the converter's
/// thread (PERFORMANCE.md, session 33).
const MAX_WORKERS: usize = 16;

impl Default for Chunking {
    fn default() -> Self {
        Chunking {
            window: 16 << 20,
            piece: 512 << 10,
            workers: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(MAX_WORKERS),
            gunzip: Cores::Auto,
        }
    }
}

/// Reads the document in `win`: the top-level object's `header_keys` are returned as raw
/// JSON, the elements of `array_key` go to `sink` in order, other keys are skipped. `progress`
/// hears how many bytes of the input the array's reading has passed, as it goes.
pub(crate) fn read<P: ElementParser>(
    win: &mut InputWindow,
    chunking: Chunking,
    array_key: &str,
    header_keys: &[&str],
    parser: &P,
    mut sink: impl FnMut(P::Piece),
    progress: &mut dyn FnMut(u64),
) -> Result<Document, ChunkError> {
    let mut doc = Document::default();
    let mut pos = expect_byte(win, 0, b'{', "a JSON object")?;
    pos = skip_ws_growing(win, pos)?;
    if win.bytes().get(pos) == Some(&b'}') {
        return trailing(win, pos + 1, progress).map(|()| doc);
    }
    loop {
        let (key, p) = value_at::<String>(win, pos)?;
        pos = expect_byte(win, p, b':', "`:` after an object key")?;
        pos = skip_ws_growing(win, pos)?;
        if key == array_key {
            pos = read_array(win, chunking, pos, parser, &mut sink, progress)?;
            doc.saw_array = true;
        } else if header_keys.contains(&key.as_str()) {
            let (raw, p) = value_at::<Box<RawValue>>(win, pos)?;
            doc.header.push((key, raw));
            pos = p;
        } else {
            pos = value_at::<IgnoredAny>(win, pos)?.1;
        }
        pos = skip_ws_growing(win, pos)?;
        match win.bytes().get(pos) {
            Some(b',') => pos = skip_ws_growing(win, pos + 1)?,
            Some(b'}') => return trailing(win, pos + 1, progress).map(|()| doc),
            Some(_) => return Err(shape(win, pos, "`,` or `}` after an object value")),
            None => return Err(eof(win, pos)),
        }
    }
}

/// Only whitespace may follow the document; once it is read, `progress` hears its end.
fn trailing(
    win: &mut InputWindow,
    pos: usize,
    progress: &mut dyn FnMut(u64),
) -> Result<(), ChunkError> {
    let pos = skip_ws_growing(win, pos)?;
    if pos < win.bytes().len() {
        return Err(shape(win, pos, "nothing after the top-level object"));
    }
    progress(win.base() + pos as u64);
    Ok(())
}

/// Skips whitespace from `pos`, moving the window when it runs out; returns `bytes()`'s
/// index of the next byte (`bytes().len()` at the input's end).
fn skip_ws_growing(win: &mut InputWindow, mut pos: usize) -> Result<usize, ChunkError> {
    loop {
        pos = skip_ws(win.bytes(), pos);
        if pos < win.bytes().len() || win.at_end() {
            return Ok(pos);
        }
        let len = win.bytes().len().max(1 << 16);
        win.advance(pos, len).map_err(ChunkError::Input)?;
        pos = 0;
    }
}

/// Skips whitespace, then expects `b`; returns the index after it.
fn expect_byte(
    win: &mut InputWindow,
    pos: usize,
    b: u8,
    what: &'static str,
) -> Result<usize, ChunkError> {
    let pos = skip_ws_growing(win, pos)?;
    match win.bytes().get(pos) {
        Some(&c) if c == b => Ok(pos + 1),
        Some(_) => Err(shape(win, pos, what)),
        None => Err(eof(win, pos)),
    }
}

/// Parses one value of type `T` at `pos`, moving and growing the window until the value fits
/// in it; returns the value and the index after it.
fn value_at<T>(win: &mut InputWindow, mut pos: usize) -> Result<(T, usize), ChunkError>
where
    T: for<'de> Deserialize<'de>,
{
    loop {
        let bytes = win.bytes();
        match parse_one::<T>(&bytes[pos..]) {
            // A value ending with the window may go on past it (a number: `12` of `123`).
            Ok((v, n)) if pos + n < bytes.len() || win.at_end() => return Ok((v, pos + n)),
            Ok(_) => {
                let len = (bytes.len() - pos).saturating_mul(2).max(1 << 16);
                win.advance(pos, len).map_err(ChunkError::Input)?;
                pos = 0;
            }
            Err(e) if !win.at_end() && maybe_cut(&bytes[pos..], &e) => {
                let len = (bytes.len() - pos).saturating_mul(2).max(1 << 16);
                win.advance(pos, len).map_err(ChunkError::Input)?;
                pos = 0;
            }
            Err(e) => return Err(json(win, pos, e)),
        }
    }
}

/// Parses one `T` at the start of `bytes`; the value and the bytes it took.
pub(crate) fn parse_one<'a, T: Deserialize<'a>>(
    bytes: &'a [u8],
) -> Result<(T, usize), serde_json::Error> {
    let mut it = serde_json::Deserializer::from_slice(bytes).into_iter::<T>();
    match it.next() {
        Some(Ok(v)) => Ok((v, it.byte_offset())),
        Some(Err(e)) => Err(e),
        // Only whitespace left.
        None => Err(eof_error()),
    }
}

/// Parses one value with `seed` at the start of `bytes`; the value and the bytes it took.
pub(crate) fn parse_seed<'a, S: DeserializeSeed<'a>>(
    bytes: &'a [u8],
    seed: S,
) -> Result<(S::Value, usize), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v = seed.deserialize(&mut de)?;
    // A stream deserializer starts where `de` stopped: right after the value.
    Ok((v, de.into_iter::<IgnoredAny>().byte_offset()))
}

/// Whether the parse of `bytes` failed because they end too soon: an end-of-input error, or
/// a syntax error at the last bytes (a number cut after `.`, `-` or `e`).
fn maybe_cut(bytes: &[u8], e: &serde_json::Error) -> bool {
    e.classify() == serde_json::error::Category::Eof || error_offset(bytes, e) + 2 >= bytes.len()
}

/// The index in `bytes` of the error's line and column.
fn error_offset(bytes: &[u8], e: &serde_json::Error) -> usize {
    let mut off = 0;
    for _ in 1..e.line() {
        match bytes[off..].iter().position(|&b| b == b'\n') {
            Some(i) => off += i + 1,
            None => return bytes.len(),
        }
    }
    (off + e.column().saturating_sub(1)).min(bytes.len())
}

fn skip_ws(bytes: &[u8], mut pos: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\r' | b'\t') = bytes.get(pos) {
        pos += 1;
    }
    pos
}

fn json(win: &InputWindow, pos: usize, error: serde_json::Error) -> ChunkError {
    json_in(win.base(), win.bytes(), pos, error)
}

/// The error met parsing `bytes[pos..]`, where `bytes[0]` is at input offset `base`.
fn json_in(base: u64, bytes: &[u8], pos: usize, error: serde_json::Error) -> ChunkError {
    let offset = base + pos as u64 + error_offset(&bytes[pos..], &error) as u64;
    if error.classify() == serde_json::error::Category::Eof {
        return ChunkError::Eof { offset };
    }
    ChunkError::Json { offset, error }
}

/// A shape error at `bytes[pos]`, where `bytes[0]` is at input offset `base`.
fn shape_in(base: u64, pos: usize, what: &'static str) -> ChunkError {
    ChunkError::Shape {
        offset: base + pos as u64,
        what,
    }
}

/// The input's end met at `bytes[pos]`, where `bytes[0]` is at input offset `base`.
fn eof_in(base: u64, pos: usize) -> ChunkError {
    ChunkError::Eof {
        offset: base + pos as u64,
    }
}

fn shape(win: &InputWindow, pos: usize, what: &'static str) -> ChunkError {
    shape_in(win.base(), pos, what)
}

fn eof(win: &InputWindow, pos: usize) -> ChunkError {
    eof_in(win.base(), pos)
}

// ---------------------------------------------------------------------------------------------
// The array

/// How a piece's parse ended.
#[derive(Debug)]
enum PieceEnd {
    /// At the start of the first element at or after the piece's stop.
    Stop(usize),
    /// Past the array's `]`.
    ArrayEnd(usize),
    /// The element starting here runs past the window (not the input's last).
    Cut(usize),
    /// The element starting here is not valid.
    Failed(usize, serde_json::Error),
    /// Something other than `,` or `]` follows an element.
    NoSeparator(usize),
}

struct Piece<T> {
    start: usize,
    digest: T,
    end: PieceEnd,
}

/// Reads the array whose `[` is at `pos`; returns the index after its `]`.
fn read_array<P: ElementParser>(
    win: &mut InputWindow,
    chunking: Chunking,
    pos: usize,
    parser: &P,
    sink: &mut impl FnMut(P::Piece),
    progress: &mut dyn FnMut(u64),
) -> Result<usize, ChunkError> {
    let mut pos = expect_byte(win, pos, b'[', "an array")?;
    pos = skip_ws_growing(win, pos)?;
    if win.bytes().get(pos) == Some(&b']') {
        return Ok(pos + 1);
    }
    let (seg, at) = win.take(pos);
    let workers = chunking.workers.max(1);
    let piece = if workers == 1 {
        usize::MAX
    } else {
        chunking.piece
    };
    let gate = Gate::new(2 * workers);
    let cancel = AtomicBool::new(false);
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let job_rx = Mutex::new(job_rx);
    let end = std::thread::scope(|s| {
        let (done_tx, done_rx) = mpsc::channel();
        let mut started = 0;
        if workers > 1 {
            for _ in 0..workers {
                let (jobs, done, gate, cancel) = (&job_rx, done_tx.clone(), &gate, &cancel);
                // Named for profilers. Pieces go to the workers that started; with none, the
                // pieces are all parsed here.
                let spawned = std::thread::Builder::new()
                    .name("parse worker".into())
                    .spawn_scoped(s, move || work(parser, jobs, &done, gate, cancel));
                started += usize::from(spawned.is_ok());
            }
        }
        drop(done_tx);
        let mut reader = ArrayReader {
            win,
            parser,
            piece,
            ahead: chunking.window.saturating_mul(2),
            jobs: (started > 0).then_some(job_tx),
            done: done_rx,
            arrived: BTreeMap::new(),
            gate: &gate,
            plans: VecDeque::new(),
            next_seq: 0,
            ended: false,
            progress,
        };
        let end = reader.run(seg, at, sink);
        // Whatever happened, the workers stop: queued pieces are dropped unparsed.
        cancel.store(true, Ordering::Relaxed);
        gate.open_to(usize::MAX);
        reader.jobs = None;
        end.map(|(seg, at)| {
            (reader.progress)(seg.base() + at as u64);
            (seg, at, reader.unread())
        })
    });
    let (seg, at, after) = end?;
    win.resume(seg, at, after.into_iter());
    Ok(0)
}

/// A piece to parse: `seg.bytes()[start..]`, up to the first element at or after `stop`.
struct Job {
    seq: usize,
    seg: Arc<Segment>,
    start: usize,
    stop: usize,
}

/// A worker: parses the pieces it is given, in the order given, as the gate lets it.
fn work<P: ElementParser>(
    parser: &P,
    jobs: &Mutex<mpsc::Receiver<Job>>,
    done: &mpsc::Sender<(usize, Piece<P::Piece>)>,
    gate: &Gate,
    cancel: &AtomicBool,
) {
    loop {
        let waiting = span(Kind::WaitJob, 0);
        let job = match jobs.lock().unwrap_or_else(|p| p.into_inner()).recv() {
            Ok(job) => job,
            Err(_) => return,
        };
        drop(waiting);
        let waiting = span(Kind::WaitGate, job.seq as u64);
        if !gate.wait_for(job.seq, cancel) {
            return;
        }
        drop(waiting);
        let _parsing = span(Kind::Parse, job.seq as u64);
        let bytes = job.seg.bytes();
        let piece = parse_piece(parser, bytes, job.start, job.stop, job.seg.is_last());
        drop(job.seg);
        if done.send((job.seq, piece)).is_err() {
            return;
        }
    }
}

/// A segment of the array and the pieces it was cut into: piece `i` starts at `starts[i]`
/// and has the number `first + i` in the order the sink takes them.
struct Plan {
    seg: Arc<Segment>,
    /// Where the segment's unread bytes start.
    at: usize,
    starts: Vec<usize>,
    first: usize,
}

impl Plan {
    fn stop_of(&self, i: usize) -> usize {
        self.starts.get(i + 1).copied().unwrap_or(usize::MAX)
    }
}

/// Bytes cut by a segment's end: an element's start (or only whitespace), to be read with the
/// bytes of the segments after it. `base` is the input offset of `bytes[0]`.
struct Seam {
    bytes: Vec<u8>,
    base: u64,
}

/// Reads the array segment after segment, keeping the workers fed: while the sink takes the
/// pieces of one segment, the workers already parse the next one's, so no segment ends with
/// all but one worker idle.
struct ArrayReader<'w, 'p, P: ElementParser> {
    win: &'w mut InputWindow,
    parser: &'p P,
    piece: usize,
    /// Bytes to keep planned: two windows.
    ahead: usize,
    /// Where pieces go to be parsed; `None` on one worker (pieces parsed here).
    jobs: Option<mpsc::Sender<Job>>,
    done: mpsc::Receiver<(usize, Piece<P::Piece>)>,
    /// Parsed pieces that arrived before the sink wanted them.
    arrived: BTreeMap<usize, Piece<P::Piece>>,
    gate: &'p Gate,
    /// The segment being read, then the one the workers have started on.
    plans: VecDeque<Plan>,
    next_seq: usize,
    /// The input's last segment is planned.
    ended: bool,
    /// Hears the input offset the reading has passed, at each segment's end.
    progress: &'w mut dyn FnMut(u64),
}

/// Where the array's `]` was: the index after it in a segment.
type ArrayEnd = (Arc<Segment>, usize);

impl<P: ElementParser> ArrayReader<'_, '_, P> {
    /// Reads the array from the element at `seg.bytes()[at]` to its end.
    fn run(
        &mut self,
        seg: Arc<Segment>,
        at: usize,
        sink: &mut impl FnMut(P::Piece),
    ) -> Result<ArrayEnd, ChunkError> {
        let mut starts = vec![at];
        starts.extend(candidate_starts(
            seg.bytes(),
            at.saturating_add(self.piece),
            self.piece,
        ));
        self.plan(seg, at, starts);
        let mut verified = at;
        loop {
            self.look_ahead()?;
            let seam = match self.read_pieces(verified, sink)? {
                Ok(end) => return Ok(end),
                Err(seam) => seam,
            };
            self.finish_front();
            let seaming = span(Kind::Seam, 0);
            let seamed = self.read_seam(seam, sink)?;
            drop(seaming);
            match seamed {
                Ok(end) => return Ok(end),
                Err(v) => verified = v,
            }
        }
    }

    /// Plans the pieces of `seg` and hands them to the workers.
    fn plan(&mut self, seg: Arc<Segment>, at: usize, starts: Vec<usize>) {
        self.ended = seg.is_last();
        let plan = Plan {
            seg,
            at,
            starts,
            first: self.next_seq,
        };
        self.next_seq += plan.starts.len();
        if let Some(jobs) = &self.jobs {
            for (i, &start) in plan.starts.iter().enumerate() {
                let _ = jobs.send(Job {
                    seq: plan.first + i,
                    seg: plan.seg.clone(),
                    start,
                    stop: plan.stop_of(i),
                });
            }
        }
        self.plans.push_back(plan);
    }

    /// Makes sure the segments after the one being read are planned, unless it is the last:
    /// one at least, and two windows' bytes in all (a gzip input may come in pieces much
    /// smaller than a window).
    fn look_ahead(&mut self) -> Result<(), ChunkError> {
        let planned = |plans: &VecDeque<Plan>| -> usize {
            plans
                .iter()
                .map(|p| p.seg.bytes().len().saturating_sub(p.at))
                .sum()
        };
        while !self.ended && (self.plans.len() < 2 || planned(&self.plans) < self.ahead) {
            let waiting = span(Kind::WaitSegment, 0);
            let (seg, at) = self.win.next_segment().map_err(ChunkError::Input)?;
            drop(waiting);
            let starts = candidate_starts(seg.bytes(), at, self.piece);
            self.plan(seg, at, starts);
        }
        Ok(())
    }

    /// Drops the segment read, letting the workers past its pieces.
    fn finish_front(&mut self) {
        if let Some(plan) = self.plans.pop_front() {
            let next = plan.first + plan.starts.len();
            self.gate.open_to(next);
            self.arrived = self.arrived.split_off(&next);
            (self.progress)(plan.seg.base() + plan.seg.bytes().len() as u64);
        }
    }

    /// The segments planned and not read, for the window to go on with.
    fn unread(&mut self) -> Vec<(Arc<Segment>, usize)> {
        self.plans.drain(..).map(|p| (p.seg, p.at)).collect()
    }

    /// Piece number `seq` as a worker parsed it, if one did.
    fn parsed(&mut self, seq: usize) -> Option<Piece<P::Piece>> {
        self.jobs.as_ref()?;
        let _waiting = span(Kind::WaitPiece, seq as u64);
        while !self.arrived.contains_key(&seq) {
            let (i, piece) = self.done.recv().ok()?;
            if i >= seq {
                self.arrived.insert(i, piece);
            }
        }
        self.arrived.remove(&seq)
    }

    /// Reads the front segment's pieces from its verified element start `verified`: the
    /// array's end, or the seam cut by the segment's end.
    fn read_pieces(
        &mut self,
        mut verified: usize,
        sink: &mut impl FnMut(P::Piece),
    ) -> Result<Result<ArrayEnd, Seam>, ChunkError> {
        // `run` plans a segment before every call; without one there is nothing to read.
        let Some(plan) = self.plans.front() else {
            return Err(ChunkError::Shape {
                offset: 0,
                what: "an array",
            });
        };
        let (seg, first, n) = (plan.seg.clone(), plan.first, plan.starts.len());
        let bytes = seg.bytes();
        for i in 0..n {
            let stop = self.plans[0].stop_of(i);
            if stop <= verified {
                // The verified parse is past this piece already.
                self.gate.open_to(first + i + 1);
                continue;
            }
            let piece = match self.parsed(first + i) {
                Some(p) if p.start == verified => p,
                // A wrong guess (or a lost worker): parse from the verified position here.
                _ => parse_piece(self.parser, bytes, verified, stop, seg.is_last()),
            };
            let merging = span(Kind::Merge, (first + i) as u64);
            sink(piece.digest);
            drop(merging);
            self.gate.open_to(first + i + 1);
            match piece.end {
                PieceEnd::Stop(p) if stop != usize::MAX => verified = p,
                PieceEnd::ArrayEnd(p) => {
                    self.plans.pop_front();
                    return Ok(Ok((seg, p)));
                }
                PieceEnd::Cut(p) | PieceEnd::Stop(p) => {
                    let seam = Seam {
                        bytes: bytes[p..].to_vec(),
                        base: seg.base() + p as u64,
                    };
                    return Ok(Err(seam));
                }
                PieceEnd::Failed(p, e) => return Err(json_in(seg.base(), bytes, p, e)),
                PieceEnd::NoSeparator(p) => return Err(shape_in(seg.base(), p, AFTER_ELEMENT)),
            }
        }
        // No piece: the segment was read by the seam before it.
        Ok(Err(Seam {
            bytes: bytes[verified.min(bytes.len())..].to_vec(),
            base: seg.base() + verified as u64,
        }))
    }

    /// Reads the elements that start in `seam`, with as many of the next segments' bytes as
    /// they need, up to the front segment's first piece: the array's end, or the verified
    /// element start in the front segment to read its pieces from.
    fn read_seam(
        &mut self,
        mut seam: Seam,
        sink: &mut impl FnMut(P::Piece),
    ) -> Result<Result<ArrayEnd, usize>, ChunkError> {
        loop {
            self.look_ahead()?;
            let Some(plan) = self.plans.front() else {
                return Err(eof_in(seam.base, seam.bytes.len()));
            };
            let (seg, at) = (plan.seg.clone(), plan.at);
            let rest = &seg.bytes()[at..];
            let first = plan.starts.first().map(|&c| c - at);
            let mut take = first.map_or(usize::MAX, |c| c.saturating_add(SEAM_SLACK));
            loop {
                take = take.min(rest.len());
                let whole = take == rest.len();
                let cut = seam.bytes.len();
                seam.bytes.extend_from_slice(&rest[..take]);
                let stop = first.map_or(usize::MAX, |c| cut + c);
                let piece = parse_piece(self.parser, &seam.bytes, 0, stop, whole && seg.is_last());
                sink(piece.digest);
                match piece.end {
                    PieceEnd::Stop(q) => return Ok(Err(at + q - cut)),
                    PieceEnd::ArrayEnd(q) if q >= cut => {
                        self.plans.pop_front();
                        return Ok(Ok((seg, at + q - cut)));
                    }
                    PieceEnd::ArrayEnd(q) => {
                        // The `]` is in the bytes cut before the segment: the window goes on
                        // from there, then with the segment's bytes not taken.
                        let bytes = seam.bytes.split_off(q);
                        let last = whole && seg.is_last();
                        let held = Segment::owned(seam.base + q as u64, last, bytes);
                        match self.plans.front_mut() {
                            Some(front) if !whole => front.at = at + take,
                            _ => self.finish_front(),
                        }
                        return Ok(Ok((Arc::new(held), 0)));
                    }
                    PieceEnd::Failed(q, e) => return Err(json_in(seam.base, &seam.bytes, q, e)),
                    PieceEnd::NoSeparator(q) => return Err(shape_in(seam.base, q, AFTER_ELEMENT)),
                    // The element at `q` runs past the bytes taken: all of the segment is in
                    // the seam, so it is carried on to the next segment.
                    PieceEnd::Cut(q) if whole => {
                        seam.bytes.drain(..q);
                        seam.base += q as u64;
                        break;
                    }
                    // It starts in the segment: its pieces are read from there.
                    PieceEnd::Cut(q) if q >= cut => return Ok(Err(at + q - cut)),
                    // It starts before the segment: the seam takes more of the segment.
                    PieceEnd::Cut(q) => {
                        seam.bytes.truncate(cut);
                        seam.bytes.drain(..q);
                        seam.base += q as u64;
                        take = take.saturating_mul(2).saturating_add(SEAM_SLACK);
                    }
                }
            }
            self.finish_front();
        }
    }
}

/// What must follow an array element.
const AFTER_ELEMENT: &str = "`,` or `]` after an array element";

/// Bytes of a segment read by the seam past its first piece's start, so that the seam sees
/// the element there begin.
const SEAM_SLACK: usize = 256;

/// Keeps the workers at most `ahead` pieces ahead of the sink, so that the pieces parsed but
/// not yet taken (their digests: records waiting in memory) stay few when the sink is the
/// slower side.
struct Gate {
    ahead: usize,
    taken: Mutex<usize>,
    moved: Condvar,
}

impl Gate {
    fn new(ahead: usize) -> Self {
        Gate {
            ahead,
            taken: Mutex::new(0),
            moved: Condvar::new(),
        }
    }

    /// Waits until piece `i` may be parsed; false when the read was cancelled meanwhile.
    fn wait_for(&self, i: usize, cancel: &AtomicBool) -> bool {
        let mut taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
        while i >= taken.saturating_add(self.ahead) && !cancel.load(Ordering::Relaxed) {
            taken = self.moved.wait(taken).unwrap_or_else(|p| p.into_inner());
        }
        !cancel.load(Ordering::Relaxed)
    }

    /// The sink has taken every piece before `n`.
    fn open_to(&self, n: usize) {
        *self.taken.lock().unwrap_or_else(|p| p.into_inner()) = n;
        self.moved.notify_all();
    }
}

/// Guessed element starts at or after `from`, about `piece` bytes apart: the `{` of a `}` `,`
/// `{` with only whitespace between. The last piece takes the rest of `bytes` when that is
/// under half a piece, so a short segment is one piece.
fn candidate_starts(bytes: &[u8], mut from: usize, piece: usize) -> Vec<usize> {
    let piece = piece.max(1);
    let mut starts = Vec::new();
    while from < bytes.len() {
        let Some(c) = next_candidate(bytes, from) else {
            break;
        };
        starts.push(c);
        from = c.saturating_add(piece);
        if bytes.len().saturating_sub(from) < piece / 2 {
            break;
        }
    }
    starts
}

fn next_candidate(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < bytes.len() {
        let open = i + bytes[i..].iter().position(|&b| b == b'{')?;
        let before = |mut j: usize| {
            while j > 0 && matches!(bytes[j - 1], b' ' | b'\n' | b'\r' | b'\t') {
                j -= 1;
            }
            j
        };
        let comma = before(open);
        if comma > 0 && bytes[comma - 1] == b',' {
            let brace = before(comma - 1);
            if brace > 0 && bytes[brace - 1] == b'}' {
                return Some(open);
            }
        }
        i = open + 1;
    }
    None
}

/// Parses elements from `start` (an element's first byte) until the first element that
/// starts at or after `stop`, the array's end, or the window's end.
fn parse_piece<P: ElementParser>(
    parser: &P,
    bytes: &[u8],
    start: usize,
    stop: usize,
    last_window: bool,
) -> Piece<P::Piece> {
    let mut digest = P::Piece::default();
    let mut slot = P::Element::default();
    let mut scratch = P::Scratch::default();
    let mut pos = start;
    let end = loop {
        let (keep, n) = match parser.parse(&bytes[pos..], &mut slot, &mut scratch) {
            Ok(v) => v,
            Err(e) if !last_window && maybe_cut(&bytes[pos..], &e) => break PieceEnd::Cut(pos),
            Err(e) => break PieceEnd::Failed(pos, e),
        };
        let after = skip_ws(bytes, pos + n);
        let next = match bytes.get(after) {
            Some(b',') => skip_ws(bytes, after + 1),
            Some(b']') => {
                if keep {
                    parser.add(&mut digest, &mut slot);
                }
                break PieceEnd::ArrayEnd(after + 1);
            }
            Some(_) => break PieceEnd::NoSeparator(after),
            // The separator is past the window: read the element again in the next one.
            None if !last_window => break PieceEnd::Cut(pos),
            None => break PieceEnd::Failed(pos, eof_error()),
        };
        if keep {
            parser.add(&mut digest, &mut slot);
        }
        if next >= bytes.len() && !last_window {
            break PieceEnd::Cut(next);
        }
        pos = next;
        if pos >= stop {
            break PieceEnd::Stop(pos);
        }
    };
    Piece { start, digest, end }
}

/// An end-of-input error, as serde_json gives for an empty document.
fn eof_error() -> serde_json::Error {
    match serde_json::from_slice::<IgnoredAny>(b"") {
        Err(e) => e,
        Ok(_) => <serde_json::Error as serde::de::Error>::custom("unexpected end of input"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Elements as their raw JSON text, dropping the number `0`.
    struct Raw;
    impl ElementParser for Raw {
        type Element<'a> = Option<&'a RawValue>;
        type Piece = Vec<String>;
        type Scratch = ();
        fn parse<'a>(
            &self,
            bytes: &'a [u8],
            slot: &mut Option<&'a RawValue>,
            (): &mut (),
        ) -> Result<(bool, usize), serde_json::Error> {
            let (v, n) = parse_one::<&RawValue>(bytes)?;
            *slot = Some(v);
            Ok((v.get() != "0", n))
        }
        fn add(&self, piece: &mut Vec<String>, slot: &mut Option<&RawValue>) {
            piece.extend(slot.map(|v| v.get().to_string()))
        }
    }

    fn tiny(workers: usize) -> Chunking {
        Chunking {
            window: 64,
            piece: 16,
            workers,
            gunzip: Cores::Auto,
        }
    }

    /// How a test document is stored and inflated.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Stored {
        Plain,
        /// gzip -1, inflated by `flate2` into windows.
        Gzip,
        /// gzip -6, inflated by the parallel reader into pieces of a block or more.
        GzipParallel,
    }
    use Stored::*;
    const STORED: [Stored; 3] = [Plain, Gzip, GzipParallel];

    fn file(bytes: &[u8], stored: Stored) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let level = match stored {
            Plain => {
                f.write_all(bytes).unwrap();
                return f;
            }
            Gzip => flate2::Compression::fast(),
            GzipParallel => flate2::Compression::default(),
        };
        let mut gz = flate2::write::GzEncoder::new(&mut f, level);
        gz.write_all(bytes).unwrap();
        gz.finish().unwrap();
        f
    }

    fn read_all(
        text: &str,
        mut chunking: Chunking,
        stored: Stored,
    ) -> Result<(Vec<String>, Document), ChunkError> {
        let f = file(text.as_bytes(), stored);
        if stored == GzipParallel {
            let (threads, chunk) = (2, 64);
            chunking.gunzip = Cores::Given { threads, chunk };
        }
        let mut win =
            InputWindow::open("test", f.path(), chunking.window, chunking.gunzip).unwrap();
        let mut out = Vec::new();
        let doc = read(
            &mut win,
            chunking,
            "a",
            &["h"],
            &Raw,
            |els| out.extend(els),
            &mut |_| {},
        )?;
        Ok((out, doc))
    }

    /// A document whose strings hold what looks like element boundaries, with elements larger
    /// than the window and nested arrays of objects.
    fn tricky() -> (String, Vec<String>) {
        let mut els = Vec::new();
        for i in 0..200 {
            els.push(match i % 5 {
                0 => format!(r#"{{"s": "}}, {{\"x\": {i}}}, {{"}}"#),
                1 => format!(r#"{{"n": [{{"a": 1}}, {{"b": {i}}}], "v": -{i}.5e1}}"#),
                2 => format!(r#"{{"big": "{}"}}"#, "y".repeat(i * 3)),
                3 => "0".to_string(),
                _ => format!("{{\"k\":\n{i}}}"),
            });
        }
        let text = format!(
            "{{ \"h\": {{\"v\": [1, 2]}}, \"a\": [\n{}\n], \"z\": \"}}, {{\" }}\n",
            els.join(",\n  ")
        );
        let kept = els.into_iter().filter(|e| e != "0").collect();
        (text, kept)
    }

    #[test]
    fn pieces_and_windows_give_the_elements_in_order() {
        let (text, want) = tricky();
        for stored in STORED {
            for chunking in [tiny(1), tiny(3), Chunking::default()] {
                let (got, doc) = read_all(&text, chunking, stored).unwrap();
                assert_eq!(got, want, "{chunking:?} {stored:?}");
                assert!(doc.saw_array);
                assert_eq!(doc.header.len(), 1);
                assert_eq!(doc.header[0].1.get(), r#"{"v": [1, 2]}"#);
            }
        }
    }

    /// `parse_seed` counts the bytes a value took from where serde_json's stream deserializer
    /// starts (not a documented promise): hold it to `parse_one` so an upgrade cannot move it.
    #[test]
    fn parse_seed_takes_the_bytes_of_the_value_only() {
        for text in [
            r#"{"a": [1, {"b": "}"}]}  , {"x": 1}"#,
            "  {}]",
            "12 ,",
            r#""s\"" x"#,
        ] {
            let seed = std::marker::PhantomData::<IgnoredAny>;
            let (_, n) = parse_seed(text.as_bytes(), seed).unwrap();
            let (_, m) = parse_one::<IgnoredAny>(text.as_bytes()).unwrap();
            assert_eq!(n, m, "{text}");
            assert!(n < text.len() && !text[..n].ends_with(' '), "{text}: {n}");
        }
    }

    /// Found by the `kineto` fuzz target: a top-level number cut by the window's end parsed
    /// as its first digits (`12` of `1234`), and the rest failed as a missing `,`.
    #[test]
    fn a_number_cut_by_the_window_is_read_whole() {
        let text = r#"{"z": 123456789012, "h": -98765.4321e2, "a": [{"k": 1}], "y": 77777777}"#;
        let (want, doc) = read_all(text, Chunking::default(), Plain).unwrap();
        assert_eq!(doc.header[0].1.get(), "-98765.4321e2");
        for window in 1..text.len() {
            let chunking = Chunking {
                window,
                piece: 16,
                workers: 2,
                gunzip: Cores::Auto,
            };
            for stored in STORED {
                let (got, doc) = read_all(text, chunking, stored).unwrap();
                assert_eq!(got, want, "window {window}");
                assert_eq!(doc.header[0].1.get(), "-98765.4321e2", "window {window}");
            }
        }
    }

    /// Every window size a short document allows, so that every byte of it, the array's `]`
    /// and the keys after it included, falls at a segment's end: the elements cut there are
    /// read through the seam, and an error's offset is the same, whatever the chunking.
    #[test]
    fn every_seam_reads_as_the_whole_document_does() {
        let (text, _) = tricky();
        let cut = text.find("{\"k\":\n14}").unwrap() + 9;
        let text = format!(r#"{}], "z": [1, {{"y": "]"}}], "h": 2}}"#, &text[..cut]);
        let (want, _) = read_all(&text, Chunking::default(), Plain).unwrap();
        assert_eq!(want.len(), 12);
        let bad = text.replacen(
            r#"{"n": [{"a": 1}, {"b": 6}]"#,
            r#"{"n": [{"a": 1} {"b": 6}]"#,
            1,
        );
        let whole = |t: &str| offset_of(read_all(t, Chunking::default(), Plain));
        let bad_at = whole(&bad);
        assert_eq!(bad_at.0, "json");
        for window in (1..text.len() + 8).step_by(3) {
            for (piece, workers) in [(1, 2), (16, 3), (100, 1), (40, 4)] {
                let chunking = Chunking {
                    window,
                    piece,
                    workers,
                    gunzip: Cores::Auto,
                };
                for stored in STORED {
                    let (got, doc) = read_all(&text, chunking, stored).unwrap();
                    assert_eq!(got, want, "{chunking:?} {stored:?}");
                    assert_eq!(doc.header.len(), 2, "{chunking:?} {stored:?}");
                    let at = offset_of(read_all(&bad, chunking, stored));
                    assert_eq!(at, bad_at, "{chunking:?} {stored:?}");
                }
            }
        }
    }

    #[test]
    fn an_empty_array_and_no_array_are_read() {
        let (got, doc) = read_all(r#"{"a": [ ], "h": 1}"#, tiny(2), Plain).unwrap();
        assert!(got.is_empty() && doc.saw_array);
        let (_, doc) = read_all(r#"{"b": [1]}"#, tiny(2), Plain).unwrap();
        assert!(!doc.saw_array);
    }

    fn offset_of(r: Result<(Vec<String>, Document), ChunkError>) -> (&'static str, u64) {
        match r {
            Err(ChunkError::Eof { offset }) => ("eof", offset),
            Err(ChunkError::Json { offset, .. }) => ("json", offset),
            Err(ChunkError::Shape { offset, .. }) => ("shape", offset),
            Err(ChunkError::Input(e)) => panic!("{e}"),
            Ok(_) => ("ok", 0),
        }
    }

    #[test]
    fn errors_name_the_byte_whatever_the_chunking() {
        let (text, _) = tricky();
        let cut = &text[..text.len() / 2];
        let bad = text.replacen(r#""k":"#, r#""k" "#, 1);
        // serde_json points at the value after the missing `:`.
        let at = bad.find(r#""k" "#).unwrap() as u64 + 5;
        for chunking in [tiny(1), tiny(3), Chunking::default()] {
            assert_eq!(offset_of(read_all(cut, chunking, Plain)).0, "eof");
            for stored in [Gzip, GzipParallel] {
                assert_eq!(offset_of(read_all(&bad, chunking, stored)), ("json", at));
            }
            assert_eq!(offset_of(read_all("[1, 2]", chunking, Plain)), ("shape", 0));
            assert_eq!(
                offset_of(read_all(r#"{"a": [1] } x"#, chunking, Plain)),
                ("shape", 12)
            );
        }
    }

    #[test]
    fn a_wrong_guess_inside_a_string_is_not_an_error() {
        // The only candidates are inside the long string; the pieces that start there fail.
        let text = format!(
            r#"{{"a": [{{"s": "{}"}}, 0]}}"#,
            r#"}, {\"q\": "#.repeat(50)
        );
        let (got, _) = read_all(&text, tiny(3), Plain).unwrap();
        assert_eq!(got.len(), 1);
    }
}
