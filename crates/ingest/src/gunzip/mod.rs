//! One gzip stream inflated on several cores.
//!
//! A deflate stream has no index: its blocks start at any bit, and each may copy bytes from
//! the 32 KB before it. The compressed file is cut into chunks ([`chunk_for`]), and workers
//! inflate them at the same time (rapidgzip's and pugz's approach):
//! - a worker looks for the first block that starts in its chunk ([`find`]) and inflates from
//!   there, to the first block boundary at or past the next chunk's start;
//! - the bytes of the 32 KB before are not known yet, so back-references into them come out
//!   as markers ([`decode`]);
//! - the reader takes the chunks in order. A chunk that starts exactly where the one before
//!   ended is accepted. Any other (its block was a false find, or none was found) is inflated
//!   again by the reader, from where the one before ended;
//! - an accepted piece's window is the last 32 KB before it. The reader works out the window
//!   after it from the markers of its last 32 KB, and a worker rebuilds the piece's bytes by
//!   copying its back-references again, from that window on ([`replay`]);
//! - the rebuilt pieces are handed out whole, in order, in the buffers they were rebuilt in
//!   ([`ParallelGunzip::next_part`]).
//!
//! At the end the CRC-32 and length in the gzip trailer are checked. Anything this reader does
//! not handle (a file of several gzip members, a corrupt or truncated stream, a block of
//! huge output, a stream whose blocks the workers cannot find) hands over to `flate2`'s streaming decoder, which inflates the file again from
//! the start, skips the bytes already delivered, and goes on or reports the error in its own
//! words. The bytes delivered are the same either way.

mod bits;
mod decode;
mod find;
mod huffman;
mod replay;
mod shared;

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::spans::{span, Kind};
use decode::{Inflater, Stop, Symbols, WINDOW};
use shared::{Accepted, Bytes, Piece, Shared, Window, CHUNK};

/// Traces that inflate to less than this are inflated by `flate2` alone. The parallel reader
/// holds 25–28 MiB more than `flate2` (eight workers' chunks, measured on the 1 GB trace in
/// session 16; 87 MiB in all for its `.gz` against 70 MiB for the plain file in session 20),
/// and the rest of a `.gz` ingest about 0.07× the trace: from here on the whole stays within
/// 0.1× the trace.
const MIN_INFLATED: u64 = 900 << 20;

/// Cores needed for the parallel reader, which takes half of them, at most [`MAX_WORKERS`]:
/// the parse, which runs beside it, takes them all.
const MIN_CORES: usize = 8;
const MAX_WORKERS: usize = 8;

/// Pieces the reader inflates itself before it judges the workers: when they made fewer
/// pieces than it did (a stream of fixed-code blocks, which cannot be found), `flate2` alone
/// is faster.
const JUDGE_AFTER: usize = 4;

/// Pieces queued to be rebuilt ahead of the one read, each about 640 KB of bytes. A piece
/// translated by one worker, with two queued, kept the reader waiting for 60% of its time
/// (PERFORMANCE.md, session 24); a rebuild takes half as long.
const PIECES_AHEAD: u64 = 4;

/// How a gzip file is inflated.
pub(crate) enum Inflating {
    /// On several cores, in pieces handed out whole ([`ParallelGunzip::next_part`]).
    Parallel(Box<ParallelGunzip>),
    /// By `flate2` alone, read into the caller's buffers.
    Alone(Box<dyn Read + Send>),
}

/// The workers that inflate a gzip input, and the compressed bytes of their chunks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) enum Cores {
    /// As the machine's cores and the file's size call for.
    #[default]
    Auto,
    /// These, whatever the file (for tests and fuzzing).
    Given { threads: usize, chunk: u64 },
}

/// How to inflate `file`: on several cores for a large file, else by `flate2` alone.
pub(crate) fn inflating(file: File, cores: Cores) -> Inflating {
    if let Cores::Given { threads, chunk } = cores {
        return parallel(file, threads, chunk);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < MIN_CORES {
        return Inflating::Alone(flate2_reader(file));
    }
    match sizes(&file) {
        Some((size, inflated)) if inflated >= MIN_INFLATED => {
            let chunk = chunk_for(size, inflated);
            parallel(file, (cores / 2).min(MAX_WORKERS), chunk)
        }
        _ => Inflating::Alone(flate2_reader(file)),
    }
}

/// `file`'s size, and what it inflates to, about: what its trailer says (past 4 GiB too, see
/// [`crate::input::gzip_stated_size`]), or ten times its size when that is no estimate.
fn sizes(file: &File) -> Option<(u64, u64)> {
    let size = file.metadata().ok()?.len();
    let inflated = crate::input::gzip_stated_size(file).unwrap_or(size.saturating_mul(10));
    Some((size, inflated))
}

/// What a chunk should inflate to, about: what 64 KB of the 989 MB trace's gzip -1 (9.2×)
/// does. zlib's level 9, which the PyTorch profiler writes, compresses that trace 15×: its
/// 64 KB chunks held 94 MiB in all, at the 0.1× line, and 40–48 KB ones 85–86 MiB, as fast
/// (PERFORMANCE.md, session 21).
const CHUNK_INFLATED: u64 = 640 << 10;

/// The compressed bytes of a chunk of a stream of `size` bytes that inflates to `inflated`:
/// [`CHUNK_INFLATED`] at the stream's ratio, from 32 KB to [`CHUNK`]. A chunk with no block
/// start is searched whole for nothing: the 989 MB trace's gzip -1, whose blocks are about
/// 64 KB, inflated 1.5–1.9× slower in chunks of 48 and 32 KB.
fn chunk_for(size: u64, inflated: u64) -> u64 {
    let ratio = inflated / size.max(1);
    (CHUNK_INFLATED / ratio.max(1)).clamp(32 << 10, CHUNK)
}

/// The parallel reader, or `flate2`'s for a header it does not handle.
fn parallel(file: File, threads: usize, chunk: u64) -> Inflating {
    let Ok(f) = file.try_clone() else {
        return Inflating::Alone(flate2_reader(file));
    };
    match ParallelGunzip::new(f, threads, chunk) {
        Some(p) => Inflating::Parallel(Box::new(p)),
        None => Inflating::Alone(flate2_reader(file)),
    }
}

fn flate2_reader(file: File) -> Box<dyn Read + Send> {
    let reader = io::BufReader::with_capacity(1 << 18, file);
    Box::new(flate2::read::MultiGzDecoder::new(reader))
}

/// For the fuzzer and tests: `path` inflated by the parallel reader (with `threads` workers
/// and chunks of `chunk` compressed bytes) and by `flate2` alone, each as its bytes or its
/// error. The two must agree on every input.
pub fn inflate_both_ways(
    path: &std::path::Path,
    threads: usize,
    chunk: u64,
) -> (Result<Vec<u8>, String>, Result<Vec<u8>, String>) {
    let read = |r: io::Result<Box<dyn Read + Send>>| {
        let mut out = Vec::new();
        r.and_then(|mut r| r.read_to_end(&mut out))
            .map(|_| out)
            .map_err(|e| e.to_string())
    };
    let reader = |f| -> Box<dyn Read + Send> {
        match parallel(f, threads, chunk) {
            Inflating::Parallel(p) => p,
            Inflating::Alone(r) => r,
        }
    };
    let parallel = read(File::open(path).map(reader));
    let alone = read(File::open(path).map(flate2_reader));
    (parallel, alone)
}

/// The gzip header's length; `None` for anything unusual, which `flate2` then reads (or
/// refuses) as it would alone.
fn header_len(head: &[u8]) -> Option<usize> {
    const FHCRC: u8 = 2;
    const FEXTRA: u8 = 4;
    const FNAME: u8 = 8;
    const FCOMMENT: u8 = 16;
    if head.get(..3)? != [0x1f, 0x8b, 8] {
        return None;
    }
    let flags = *head.get(3)?;
    // Reserved flags are an error, and a header CRC is checked, by `flate2`: left to it.
    if flags & (0xe0 | FHCRC) != 0 {
        return None;
    }
    let mut at = 10;
    if flags & FEXTRA != 0 {
        let xlen = u16::from_le_bytes([*head.get(at)?, *head.get(at + 1)?]);
        at += 2 + usize::from(xlen);
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            at += head.get(at..)?.iter().position(|&b| b == 0)? + 1;
        }
    }
    (at <= head.len()).then_some(at)
}

/// A table of each 16-bit symbol's byte: a byte stands for itself, and the markers' bytes
/// (`256 + i`) are filled in from the window before each piece; symbols past them are not made.
fn symbol_bytes() -> Box<[u8; 1 << 16]> {
    let mut table = Box::new([0; 1 << 16]);
    for (b, byte) in table[..256].iter_mut().zip(0..=255) {
        *b = byte;
    }
    table
}

/// Inflated bytes handed out whole, `buf[start..start + len]`; `last` when the input ends
/// with them. The parallel reader's pieces, and the inflating thread's filled windows
/// (`inflate.rs`).
#[derive(Debug, Default)]
pub(crate) struct Part {
    pub(crate) buf: Vec<u8>,
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) last: bool,
}

/// What `flate2` inflates into a part at a time, after a hand-over.
const FALLBACK_PART: usize = 1 << 20;

/// Why the parallel reader hands over to `flate2`.
#[derive(Debug)]
struct HandOver;

/// How the pieces were made: for tests and measurements.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Counts {
    /// Pieces a worker inflated and the reader took.
    parallel: usize,
    /// Pieces the reader inflated itself.
    serial: usize,
    handed_over: bool,
}

/// A gzip file's inflated bytes, read in order; see the module's documentation.
#[derive(Debug)]
pub(crate) struct ParallelGunzip {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    inf: Inflater,
    /// What the reader inflates itself, where a worker's chunk did not start where it should.
    symbols: Symbols,
    data: Vec<u8>,
    /// The chunk the reader takes next, and whether part of it was taken already.
    next: usize,
    partial: bool,
    /// The bit where the next block starts: where the pieces accepted end.
    pos: u64,
    /// The last 32 KB of the pieces accepted, or all of them when fewer.
    window: Vec<u8>,
    /// Each symbol's byte, once the window before a piece is known ([`Symbols`]).
    bytes_of: Box<[u8; 1 << 16]>,
    /// Pieces accepted and queued to be rebuilt, whether the last one was the final block's,
    /// and pieces read.
    queued: u64,
    accepted_final: bool,
    read: u64,
    /// What `Read` hands out: the part being read, `bytes[at..end]`, and whether the input
    /// ends with it.
    bytes: Vec<u8>,
    at: usize,
    end: usize,
    last: bool,
    crc: crc32fast::Hasher,
    len: u64,
    /// Bytes handed out in parts, in all.
    delivered: u64,
    /// The stream ended; `more` if the file goes on after its trailer.
    ended: bool,
    more: bool,
    fallback: Option<Box<flate2::read::MultiGzDecoder<io::BufReader<File>>>>,
    counts: Counts,
}

impl ParallelGunzip {
    /// Starts `threads` workers on `file`, cut into chunks of `chunk` compressed bytes; `None`
    /// for a gzip header this reader does not handle (the caller uses `flate2`).
    pub(crate) fn new(file: File, threads: usize, chunk: u64) -> Option<Self> {
        let size = file.metadata().ok()?.len();
        let mut head = vec![0; size.min(64 << 10) as usize];
        file.read_exact_at(&mut head, 0).ok()?;
        let first = header_len(&head)? as u64 * 8;
        let threads = threads.max(1);
        // Each worker busy on a span of chunks the reader has not reached. More chunks done
        // ahead held more and did not read faster (PERFORMANCE.md, sessions 20 and 26).
        let ahead = threads * shared::SPAN;
        let shared = Arc::new(Shared::new(file, size, first, chunk, ahead)?);
        let mut workers = Vec::with_capacity(threads);
        for _ in 0..threads {
            let worker = Arc::clone(&shared);
            // Named for profilers. A thread that cannot start leaves the file to `flate2`.
            let spawned = std::thread::Builder::new()
                .name("gunzip worker".into())
                .spawn(move || worker.work());
            match spawned {
                Ok(w) => workers.push(w),
                Err(_) => {
                    shared.stop();
                    return None;
                }
            }
        }
        Some(ParallelGunzip {
            shared,
            workers,
            inf: Inflater::new(),
            symbols: Symbols::default(),
            data: Vec::new(),
            next: 0,
            partial: false,
            pos: first,
            window: Vec::with_capacity(WINDOW),
            bytes_of: symbol_bytes(),
            queued: 0,
            accepted_final: false,
            read: 0,
            bytes: Vec::new(),
            at: 0,
            end: 0,
            last: false,
            crc: crc32fast::Hasher::new(),
            len: 0,
            delivered: 0,
            ended: false,
            more: false,
            fallback: None,
            counts: Counts::default(),
        })
    }

    /// Moves the reader to chunk `i`, dropping the chunks before it.
    fn move_to(&mut self, i: usize) {
        self.next = i;
        self.partial = false;
        self.shared.move_reader(i);
    }

    /// Accepts the next piece of the stream and queues it to be rebuilt; `Ok(false)` when
    /// `!wait` and the workers have not inflated it yet.
    fn accept(&mut self, wait: bool) -> Result<bool, HandOver> {
        let shared = Arc::clone(&self.shared);
        let i = loop {
            if self.next >= shared.chunks {
                return Err(HandOver);
            }
            if self.pos < shared.chunk_end(self.next) {
                break self.next;
            }
            // The piece before ran past this chunk's end.
            self.move_to(self.next + 1);
        };
        let inflated = if self.partial {
            None
        } else {
            let _waiting = wait.then(|| span(Kind::WaitChunk, i as u64)).flatten();
            match shared.inflated(i, wait) {
                Ok(p) => p,
                Err(()) => return Ok(false),
            }
        };
        let piece = match inflated {
            Some(p) if p.start == self.pos => {
                self.counts.parallel += 1;
                p
            }
            other => {
                self.counts.serial += 1;
                if self.counts.serial >= JUDGE_AFTER && self.counts.serial > self.counts.parallel {
                    return Err(HandOver);
                }
                let spare = other.map(|p| p.tokens).unwrap_or_default();
                let end = shared.chunk_end(i);
                let buffers = (&mut self.inf, &mut self.symbols, &mut self.data);
                shared
                    .inflate((self.pos, end, false), buffers, spare)
                    .ok_or(HandOver)?
            }
        };
        if piece.stop == Stop::Full {
            self.partial = true;
        } else {
            self.move_to(i + 1);
        }
        let (window, known) = self.window_before(&piece)?;
        self.pos = piece.end;
        self.accepted_final = piece.stop == Stop::Final;
        if piece.tokens.len == 0 {
            let mut st = shared.state();
            st.spare_tokens.push(piece.tokens);
            st.spare_windows.push(window);
        } else {
            let seq = self.queued;
            self.queued += 1;
            shared.rebuild(Accepted {
                seq,
                piece,
                window,
                known,
            });
        }
        Ok(true)
    }

    /// The window before `piece` and how many of its bytes are the stream's (fewer at its
    /// start); and the window moved past it, by the markers of its last 32 KB.
    fn window_before(&mut self, piece: &Piece) -> Result<(Window, usize), HandOver> {
        let known = self.window.len();
        let missing = WINDOW - known;
        let spare = self.shared.state().spare_windows.pop();
        let mut before = spare.unwrap_or_else(|| Box::new([0; WINDOW]));
        before[missing..].copy_from_slice(&self.window);
        let tail = &piece.tokens.tail;
        // A marker before the window's start: a back-reference before the stream's.
        if missing > 0
            && tail
                .iter()
                .any(|&s| (256..256 + missing).contains(&usize::from(s)))
        {
            return Err(HandOver);
        }
        if tail.len() == WINDOW {
            self.window.clear();
        }
        // A lookup per symbol, not a branch: markers and bytes mix at random.
        self.bytes_of[256..256 + WINDOW].copy_from_slice(&before[..]);
        let bytes_of = &self.bytes_of;
        self.window
            .extend(tail.iter().map(|&s| bytes_of[usize::from(s)]));
        let excess = self.window.len().saturating_sub(WINDOW);
        self.window.drain(..excess);
        Ok((before, known))
    }

    /// The next rebuilt piece, once the pieces ahead of it are accepted; after the final
    /// piece, the trailer is checked before the piece is handed out.
    fn next_bytes(&mut self) -> Result<Part, HandOver> {
        while !self.accepted_final && self.queued < self.read + PIECES_AHEAD {
            let wait = self.queued == self.read;
            if !self.accept(wait)? {
                break;
            }
        }
        let mut part = Part::default();
        // The final piece may be empty: then there is nothing more to read.
        if self.queued > self.read {
            let waiting = span(Kind::WaitRebuilt, self.read);
            let Bytes {
                bytes,
                start,
                len,
                crc,
            } = self.shared.rebuilt(self.read).ok_or(HandOver)?;
            drop(waiting);
            self.read += 1;
            self.crc.combine(&crc);
            self.len += len as u64;
            (part.buf, part.start, part.len) = (bytes, start, len);
        }
        if self.accepted_final && self.read == self.queued {
            self.check_trailer()?;
            part.last = !self.more;
        }
        Ok(part)
    }

    /// The stream's next inflated bytes, handed out whole: a piece the workers rebuilt, or
    /// after a hand-over, `flate2`'s. An empty part is the last or a member's end.
    pub(crate) fn next_part(&mut self) -> io::Result<Part> {
        loop {
            if let Some(dec) = &mut self.fallback {
                let mut buf = self.shared.state().spare_bytes.pop().unwrap_or_default();
                buf.resize(FALLBACK_PART, 0);
                let len = crate::inflate::fill(dec, &mut buf)?;
                let last = len < FALLBACK_PART;
                return Ok(Part {
                    buf,
                    start: 0,
                    len,
                    last,
                });
            }
            if self.ended && !self.more {
                return Ok(Part {
                    last: true,
                    ..Part::default()
                });
            }
            let next = if self.ended {
                Err(HandOver)
            } else {
                self.next_bytes()
            };
            match next {
                Ok(part) => {
                    self.delivered += part.len as u64;
                    return Ok(part);
                }
                Err(HandOver) => self.hand_over()?,
            }
        }
    }

    /// Takes back a part's buffer, to rebuild a later piece in.
    pub(crate) fn give_back(&self, buf: Vec<u8>) {
        self.shared.state().spare_bytes.push(buf);
    }

    /// Checks the CRC-32 and length after the final block; notes whether the file goes on.
    fn check_trailer(&mut self) -> Result<(), HandOver> {
        let at = self.pos.div_ceil(8);
        let mut trailer = Vec::new();
        self.shared.read_into(at, 8, &mut trailer).ok_or(HandOver)?;
        let crc = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
        let len = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
        if crc != self.crc.clone().finalize() || len != self.len as u32 {
            return Err(HandOver);
        }
        self.ended = true;
        self.more = at + 8 < self.shared.size;
        self.stop_workers();
        Ok(())
    }

    fn stop_workers(&mut self) {
        self.shared.stop();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }

    /// Hands over to `flate2`, from the start, past the bytes already delivered.
    fn hand_over(&mut self) -> io::Result<()> {
        self.counts.handed_over = true;
        self.stop_workers();
        let file = self.shared.file.try_clone()?;
        let reader = io::BufReader::with_capacity(1 << 18, file);
        let mut dec = Box::new(flate2::read::MultiGzDecoder::new(reader));
        let skipped = io::copy(&mut (&mut dec).take(self.delivered), &mut io::sink())?;
        if skipped < self.delivered {
            return Err(io::Error::other(
                "the stream is shorter on a second reading",
            ));
        }
        self.fallback = Some(dec);
        Ok(())
    }
}

impl Read for ParallelGunzip {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.end {
            if self.last || buf.is_empty() {
                return Ok(0);
            }
            let part = self.next_part()?;
            let old = std::mem::replace(&mut self.bytes, part.buf);
            self.give_back(old);
            (self.at, self.end, self.last) = (part.start, part.start + part.len, part.last);
        }
        let n = buf.len().min(self.end - self.at);
        buf[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl Drop for ParallelGunzip {
    fn drop(&mut self) {
        self.stop_workers();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A gzip member's bytes and compression level.
    type Member<'a> = (&'a [u8], u32);

    fn gzip_file(members: &[Member]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for &(bytes, level) in members {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
            gz.write_all(bytes).unwrap();
            f.write_all(&gz.finish().unwrap()).unwrap();
        }
        f
    }

    /// JSON-like text with numbers that vary, so blocks are many and dynamic.
    fn trace_text(events: usize) -> Vec<u8> {
        let mut out = b"{\"traceEvents\": [\n".to_vec();
        let mut x: u64 = 12345;
        for i in 0..events {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let name = [
                "aten::mm",
                "void gemv_kernel<float, 128>",
                "nccl:all_reduce",
                "Memcpy HtoD",
            ][(x >> 60) as usize % 4];
            writeln!(out, "{{\"ph\": \"X\", \"name\": \"{name}\", \"ts\": {}, \"dur\": {}, \"args\": {{\"id\": {i}}}}},", x >> 40, x >> 54).unwrap();
        }
        out.extend_from_slice(b"{}]}\n");
        out
    }

    /// Bytes with no redundancy: deflate stores them.
    fn noise(len: usize) -> Vec<u8> {
        let mut x: u32 = 7;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    }

    fn read_counted(f: &tempfile::NamedTempFile, threads: usize) -> io::Result<(Vec<u8>, Counts)> {
        read_chunked(f, threads, CHUNK)
    }

    fn read_chunked(
        f: &tempfile::NamedTempFile,
        threads: usize,
        chunk: u64,
    ) -> io::Result<(Vec<u8>, Counts)> {
        let p = ParallelGunzip::new(File::open(f.path()).unwrap(), threads, chunk).unwrap();
        let mut out = Vec::new();
        // Odd read sizes, as the window's buffers ask.
        let mut r = io::BufReader::with_capacity(7_777, p);
        r.read_to_end(&mut out)?;
        Ok((out, r.get_ref().counts))
    }

    #[test]
    fn it_inflates_what_flate2_inflates() {
        let text = trace_text(120_000);
        let mut mixed = trace_text(20_000);
        mixed.extend(noise(300_000));
        mixed.extend(trace_text(20_000));
        // Huffman-coded literals with hardly a back-reference: long runs of them between ops.
        let letters: Vec<u8> = noise(200_000).iter().map(|b| b'0' + b % 64).collect();
        let cases: Vec<(&str, Vec<Member>)> = vec![
            ("level 1", vec![(&text, 1)]),
            ("level 6", vec![(&text, 6)]),
            ("level 9", vec![(&text, 9)]),
            ("stored blocks among dynamic ones", vec![(&mixed, 6)]),
            ("runs of literals", vec![(&letters, 6)]),
            (
                "two members",
                vec![(&text[..500_000], 6), (&text[500_000..], 1)],
            ),
            ("tiny", vec![(b"{}", 6)]),
            ("empty", vec![(b"", 6)]),
        ];
        for (what, members) in cases {
            let f = gzip_file(&members);
            let want: Vec<u8> = members
                .iter()
                .flat_map(|(b, _)| b.iter().copied())
                .collect();
            // Tiny chunks put the speculative paths to work: chunks with no block, false finds,
            // pieces that run past the chunks after them.
            for (threads, chunk) in [(1, CHUNK), (3, CHUNK), (8, CHUNK), (3, 300), (2, 5000)] {
                let (out, _) = read_chunked(&f, threads, chunk).unwrap();
                assert!(
                    out == want,
                    "{what}, {threads} threads, chunks of {chunk} bytes"
                );
            }
        }
    }

    /// The inflate alone, for PERFORMANCE.md's figures, with how the pieces were made:
    /// `GZ=file.gz T=threads [C=chunk KB] cargo test --release -p llmprof-ingest inflate_rate
    /// -- --ignored --nocapture`; `T=0` is `flate2` alone, and `C` is what `chunk_for` picks
    /// unless given.
    #[test]
    #[ignore]
    fn inflate_rate() {
        let path = std::env::var("GZ").expect("GZ: a .gz file");
        let threads: usize = std::env::var("T").map_or(0, |t| t.parse().expect("T: a number"));
        let file = File::open(&path).unwrap();
        let (size, inflated) = sizes(&file).unwrap();
        let chunk = std::env::var("C").map_or(chunk_for(size, inflated), |c| {
            c.parse::<u64>().expect("C: KB") << 10
        });
        let start = std::time::Instant::now();
        if threads == 0 {
            let n = io::copy(&mut flate2_reader(file), &mut io::sink()).unwrap();
            eprintln!("{n} bytes in {:.3} s", start.elapsed().as_secs_f64());
            return;
        }
        let mut r = ParallelGunzip::new(file, threads, chunk).unwrap();
        let n = io::copy(&mut r, &mut io::sink()).unwrap();
        let Counts {
            parallel,
            serial,
            handed_over,
        } = r.counts;
        eprintln!(
            "{n} bytes in {:.3} s; chunks of {} KB; pieces: {parallel} the workers', {serial} \
             the reader's{}",
            start.elapsed().as_secs_f64(),
            chunk >> 10,
            if handed_over { ", then flate2" } else { "" }
        );
    }

    #[test]
    fn a_chunk_inflates_to_about_the_same_whatever_the_ratio() {
        // The 989 MB trace as gzip -1 (9.2×) and as zlib's level 9 (15×).
        assert_eq!(chunk_for(107_766_347, 989_440_024), 64 << 10);
        assert_eq!(chunk_for(65_739_258, 989_440_024), (640 << 10) / 15);
        assert_eq!(chunk_for(1 << 20, 100 << 20), 32 << 10);
        assert_eq!(chunk_for(0, 0), 64 << 10);
    }

    #[test]
    fn a_stream_of_fixed_code_blocks_goes_to_flate2() {
        // zlib-rs's level 1 writes long blocks of the fixed code, which no worker can find.
        let text = trace_text(200_000);
        let f = gzip_file(&[(&text, 1)]);
        let (out, counts) = read_counted(&f, 4).unwrap();
        assert!(out == text);
        assert!(counts.handed_over, "{counts:?}");
    }

    #[test]
    fn the_workers_chunks_are_taken_and_nothing_is_handed_over() {
        let text = trace_text(200_000);
        // zlib-ng's level 1 writes fixed-code blocks, which cannot be found: levels 6 and 9.
        for level in [6, 9] {
            let f = gzip_file(&[(&text, level)]);
            let size = std::fs::metadata(f.path()).unwrap().len();
            let (out, counts) = read_counted(&f, 4).unwrap();
            assert!(out == text);
            let chunks = size.div_ceil(CHUNK) as usize;
            // Only a chunk where no block starts (or a block found falsely) is done again.
            assert!(
                !counts.handed_over && counts.parallel + 1 >= chunks,
                "level {level}: {counts:?} of {chunks}"
            );
        }
    }

    /// A block longer than a chunk runs past the bytes a worker read, and its search resumes
    /// at a bit inside a byte: every header must be found from there too, or the reader
    /// inflates the chunk again itself (session 21's fix; before it, these streams were
    /// handed to `flate2` after a few chunks).
    #[test]
    fn chunks_shorter_than_a_block_are_still_the_workers() {
        let text = trace_text(200_000);
        for level in [6, 9] {
            let f = gzip_file(&[(&text, level)]);
            for chunk in [4 << 10, 16 << 10] {
                let (out, counts) = read_chunked(&f, 4, chunk).unwrap();
                assert!(out == text);
                // The final block's chunk is the reader's: the search finds no final block.
                assert!(
                    !counts.handed_over && counts.serial <= 1 && counts.parallel > 50,
                    "level {level}, chunks of {chunk}: {counts:?}"
                );
            }
        }
    }

    #[test]
    fn a_damaged_stream_fails_as_flate2_fails() {
        let text = trace_text(60_000);
        let f = gzip_file(&[(&text, 6)]);
        let good = std::fs::read(f.path()).unwrap();
        let damaged = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut bytes = good.clone();
            edit(&mut bytes);
            let g = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(g.path(), &bytes).unwrap();
            g
        };
        let cases: Vec<(&str, tempfile::NamedTempFile)> = vec![
            ("cut in half", damaged(&|b| b.truncate(b.len() / 2))),
            (
                "cut before the trailer",
                damaged(&|b| b.truncate(b.len() - 8)),
            ),
            (
                "a flipped byte",
                damaged(&|b| {
                    let m = b.len() / 3;
                    b[m] ^= 0x10
                }),
            ),
            (
                "a wrong CRC",
                damaged(&|b| {
                    let n = b.len();
                    b[n - 8] ^= 1
                }),
            ),
            (
                "a wrong length",
                damaged(&|b| {
                    let n = b.len();
                    b[n - 1] ^= 1
                }),
            ),
            // The fuzzer's first finding: a reserved flag, which flate2 refuses, was ignored.
            ("a reserved header flag", damaged(&|b| b[3] |= 0x20)),
            ("a header CRC flag", damaged(&|b| b[3] |= 0x02)),
        ];
        for (what, g) in cases {
            for chunk in [CHUNK, 1000] {
                let (ours, theirs) = inflate_both_ways(g.path(), 4, chunk);
                assert!(theirs.is_err(), "{what}");
                assert!(
                    ours == theirs,
                    "{what}: {:?} against {:?}",
                    ours.map(|v| v.len()),
                    theirs.map(|v| v.len())
                );
            }
        }
    }
}
