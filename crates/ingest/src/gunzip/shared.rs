//! The workers and what they share with the reader: chunks to inflate, pieces to rebuild.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::{Condvar, Mutex, MutexGuard};

use super::bits::Bits;
use super::decode::{Bad, Inflater, Stop, Symbols, WINDOW};
use super::replay::{replay, Tokens};
use crate::spans::{span, Kind};

/// The most compressed bytes a worker takes at a time (`chunk_for` takes less of a stream that
/// compresses more than 10×): output of about ten times that, inflated as 16-bit symbols in
/// the worker's own buffer (which keeps the last 32K of them), and kept as ops and literals
/// until the reader accepts it.
pub(super) const CHUNK: u64 = 64 << 10;

/// Chunks a worker inflates in a row: it looks for a block only at the first one's start, and
/// each next one starts where the one before ended. Finding a chunk's first block scans about
/// half a block (13 KB of a level 9 stream, 33 KB of a `gzip -1` one): a sixth and a quarter
/// of the workers' time with a search for every chunk.
pub(super) const SPAN: usize = 4;

/// How far past a chunk's end a worker reads before giving the chunk up.
const MAX_MARGIN: u64 = 16 << 20;

/// A chunk inflating to more symbols than this (4 MB of them; a chunk of JSON makes 1–2 MB)
/// is inflated on by the reader, in pieces of this size.
const FULL: usize = 2 << 20;

/// The most symbols a block may bring past [`FULL`] (JSON's blocks make well under 1 MB): a
/// longer one fails the chunk, and the reader hands such a stream to `flate2`.
const LIMIT: usize = 2 << 20;

/// What a worker (or the reader) inflates with, reused from piece to piece: the decode
/// tables, the symbols, and the compressed bytes read.
pub(super) type Buffers<'a> = (&'a mut Inflater, &'a mut Symbols, &'a mut Vec<u8>);

/// The 32 KB before a piece.
pub(super) type Window = Box<[u8; WINDOW]>;

/// Part of the stream, inflated.
#[derive(Debug)]
pub(super) struct Piece {
    /// The bits where its first block starts and where its last one ends, in the file.
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) stop: Stop,
    pub(super) tokens: Tokens,
}

/// An accepted piece, numbered in the reader's order, with the window before it, of which the
/// last `known` bytes are the stream's.
#[derive(Debug)]
pub(super) struct Accepted {
    pub(super) seq: u64,
    pub(super) piece: Piece,
    pub(super) window: Window,
    pub(super) known: usize,
}

/// A piece's bytes, `bytes[start..start + len]`, with their CRC-32.
#[derive(Debug)]
pub(super) struct Bytes {
    pub(super) bytes: Vec<u8>,
    pub(super) start: usize,
    pub(super) len: usize,
    pub(super) crc: crc32fast::Hasher,
}

/// What the workers and the reader share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) file: File,
    pub(super) size: u64,
    /// The bit where the deflate stream starts.
    first: u64,
    /// Compressed bytes a chunk nominally holds, and how many chunks there are.
    chunk: u64,
    pub(super) chunks: usize,
    /// How many chunks may be done or in work past the reader's.
    pub(super) ahead: usize,
    state: Mutex<State>,
    /// Wakes workers when there is work; wakes the reader when a chunk or piece is done.
    work: Condvar,
    done: Condvar,
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// The next chunk a worker takes.
    next: usize,
    /// The chunk the reader takes next; chunks before it are no longer wanted.
    pub(super) reader: usize,
    /// Inflated chunks: `None` where no block was found, or the worker failed.
    inflated: BTreeMap<usize, Option<Piece>>,
    /// The pieces the reader accepted, in its order, to rebuild.
    to_rebuild: VecDeque<Accepted>,
    /// Rebuilt pieces by number: `None` for one with a back-reference before the stream.
    rebuilt: BTreeMap<u64, Option<Bytes>>,
    pub(super) stop: bool,
    pub(super) spare_tokens: Vec<Tokens>,
    pub(super) spare_bytes: Vec<Vec<u8>>,
    pub(super) spare_windows: Vec<Window>,
}

impl Shared {
    /// The shared state of `file` (`size` bytes, its deflate stream from bit `first`), cut
    /// into chunks of `chunk` bytes, `None` for a file too short for a gzip trailer.
    pub(super) fn new(file: File, size: u64, first: u64, chunk: u64, ahead: usize) -> Option<Self> {
        // The deflate stream, less the 8-byte trailer.
        let stream = size.checked_sub(first / 8 + 8)?;
        let chunk = chunk.max(1);
        let chunks = usize::try_from(stream.div_ceil(chunk).max(1)).ok()?;
        Some(Shared {
            file,
            size,
            first,
            chunk,
            chunks,
            ahead,
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            done: Condvar::new(),
        })
    }

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bit where chunk `i` nominally starts; the first chunk starts at the stream's start.
    fn chunk_start(&self, i: usize) -> u64 {
        self.first + i as u64 * self.chunk * 8
    }

    /// The chunk that bit `bit` falls in.
    fn chunk_of(&self, bit: u64) -> usize {
        let i = bit.saturating_sub(self.first) / (self.chunk * 8);
        usize::try_from(i).map_or(self.chunks, |i| i.min(self.chunks))
    }

    /// The bit where chunk `i` nominally ends: the last one runs to the stream's end.
    pub(super) fn chunk_end(&self, i: usize) -> u64 {
        if i + 1 >= self.chunks {
            u64::MAX
        } else {
            self.chunk_start(i + 1)
        }
    }

    /// Moves the reader to chunk `i`, dropping the chunks before it.
    pub(super) fn move_reader(&self, i: usize) {
        let mut st = self.state();
        st.reader = i;
        while let Some(e) = st.inflated.first_entry() {
            if *e.key() >= i {
                break;
            }
            if let Some(p) = e.remove() {
                st.spare_tokens.push(p.tokens);
            }
        }
        self.work.notify_all();
    }

    /// Chunk `i` as a worker inflated it, waiting for it if `wait`; `Err` when not done yet.
    /// `Ok(None)` when the workers found no block, failed, or stopped.
    pub(super) fn inflated(&self, i: usize, wait: bool) -> Result<Option<Piece>, ()> {
        let mut st = self.state();
        loop {
            if let Some(p) = st.inflated.remove(&i) {
                return Ok(p);
            }
            if st.stop {
                return Ok(None);
            }
            if !wait {
                return Err(());
            }
            st = self.done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Queues an accepted piece to be rebuilt.
    pub(super) fn rebuild(&self, accepted: Accepted) {
        self.state().to_rebuild.push_back(accepted);
        self.work.notify_one();
    }

    /// The bytes of piece `seq`, waiting for them; `None` if the workers stopped, or the piece
    /// reached back before the stream's start.
    pub(super) fn rebuilt(&self, seq: u64) -> Option<Bytes> {
        let mut st = self.state();
        loop {
            if let Some(b) = st.rebuilt.remove(&seq) {
                return b;
            }
            if st.stop {
                return None;
            }
            st = self.done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Stops the workers once their current task is done.
    pub(super) fn stop(&self) {
        self.state().stop = true;
        self.work.notify_all();
    }

    /// Inflates from bit `start` (or the first block found at or after it, when `find`) to
    /// the first boundary at or past `stop`, reading more of the file into `data` while a
    /// block runs past what was read. The piece is inflated in `symbols` and kept in `tokens`.
    pub(super) fn inflate(
        &self,
        (start, stop, find): (u64, u64, bool),
        (inf, symbols, data): Buffers,
        mut tokens: Tokens,
    ) -> Option<Piece> {
        let from = start / 8;
        let base = from * 8;
        let stop_at = stop.saturating_sub(base);
        let mut at = start - base;
        // Read past the chunk's end: a chunk's worth at first, where the last block usually
        // ends; more while a block runs past it.
        let mut margin = self.chunk;
        loop {
            let to = (stop.min(self.size * 8).div_ceil(8) + margin).min(self.size);
            self.read_into(from, to.saturating_sub(from), data)?;
            let data = &data[..];
            let whole = to >= self.size;
            loop {
                if find {
                    let end = stop_at.min(data.len() as u64 * 8);
                    at = super::find::dynamic_block(data, at, end, inf)?;
                }
                symbols.start();
                let mut bits = Bits::at(data, at);
                match inf.run(&mut bits, symbols, stop_at, FULL, FULL + LIMIT) {
                    Ok(stop) => {
                        tokens.take(symbols);
                        return Some(Piece {
                            start: base + at,
                            end: base + bits.position(),
                            stop,
                            tokens,
                        });
                    }
                    // The same start again, with more of the file.
                    Err(Bad::Truncated) if !whole => break,
                    // A false find: the next one.
                    Err(_) if find => at += 1,
                    Err(_) => return None,
                }
            }
            // A block this long is not what deflate encoders make: the reader takes over.
            if margin > MAX_MARGIN {
                return None;
            }
            margin *= 4;
        }
    }

    /// Reads `len` bytes from `from` into `data`, which keeps its allocation from read to read.
    pub(super) fn read_into(&self, from: u64, len: u64, data: &mut Vec<u8>) -> Option<()> {
        data.resize(usize::try_from(len).ok()?, 0);
        self.file.read_exact_at(data, from).ok()
    }

    /// A worker: rebuilds accepted pieces first, and inflates chunks while the reader is not
    /// too far behind, until the reader stops it.
    pub(super) fn work(&self) {
        let mut inf = Inflater::new();
        let mut symbols = Symbols::default();
        let mut data = Vec::new();
        loop {
            let idle = span(Kind::Idle, 0);
            let task = {
                let mut st = self.state();
                loop {
                    if st.stop {
                        return;
                    }
                    if let Some(a) = st.to_rebuild.pop_front() {
                        let bytes = st.spare_bytes.pop().unwrap_or_default();
                        break Task::Rebuild(a, bytes);
                    }
                    if st.next < self.chunks && st.next < st.reader + self.ahead {
                        let first = st.next;
                        st.next = (first + SPAN).min(self.chunks);
                        break Task::Inflate(first..st.next);
                    }
                    st = self.work.wait(st).unwrap_or_else(|e| e.into_inner());
                }
            };
            drop(idle);
            match task {
                Task::Rebuild(a, bytes) => self.rebuild_one(a, bytes),
                Task::Inflate(chunks) => {
                    // A panic in a worker (a defect) loses the chunks it had not given in: the
                    // reader inflates them itself.
                    let mut given = chunks.start;
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let buffers = (&mut inf, &mut symbols, &mut data);
                        self.inflate_span(chunks.clone(), buffers, &mut given)
                    }));
                    drop(self.give(given..chunks.end, None));
                }
            }
        }
    }

    /// Rebuilds an accepted piece's bytes for the reader, and gives its buffers back. A panic
    /// (a defect) loses the piece, which stops the parallel reader.
    fn rebuild_one(&self, a: Accepted, bytes: Vec<u8>) {
        let _busy = span(Kind::Rebuild, a.seq);
        let rebuilt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rebuild(&a, bytes)));
        let mut st = self.state();
        match rebuilt {
            Ok(bytes) => {
                st.rebuilt.insert(a.seq, bytes);
                st.spare_tokens.push(a.piece.tokens);
                st.spare_windows.push(a.window);
            }
            Err(_) => st.stop = true,
        }
        self.done.notify_all();
    }

    /// Inflates the chunks `chunks` in a row, each from where the one before ended, and gives
    /// each in as it is done; `given` follows the chunks given in.
    fn inflate_span(&self, chunks: Range<usize>, (inf, symbols, data): Buffers, given: &mut usize) {
        let mut i = chunks.start;
        let (mut start, mut find) = (self.chunk_start(i), i > 0);
        let mut tokens = self.state().spare_tokens.pop().unwrap_or_default();
        while i < chunks.end {
            let _busy = span(Kind::Inflate, i as u64);
            let range = (start, self.chunk_end(i), find);
            let piece = self.inflate(range, (inf, symbols, data), tokens);
            // The next piece starts in the chunk where this one ends, and the chunks between,
            // where no block starts, are given in empty. After a piece that is not whole, or
            // none, the next chunk is searched for a block as usual.
            let next = match &piece {
                Some(p) if p.stop == Stop::Final => None,
                Some(p) if p.stop == Stop::Boundary => Some((self.chunk_of(p.end), p.end, false)),
                _ => Some((i + 1, self.chunk_start(i + 1), true)),
            };
            let upto = next.map_or(i + 1, |(c, _, _)| c.clamp(i + 1, chunks.end));
            let mut st = self.give(i..upto, piece);
            tokens = st.spare_tokens.pop().unwrap_or_default();
            drop(st);
            *given = upto;
            match next {
                Some((c, bit, search)) if c < chunks.end => (i, start, find) = (c, bit, search),
                _ => break,
            }
        }
        self.state().spare_tokens.push(tokens);
    }

    /// Gives in `piece` for the first of `chunks`, and nothing for the others, where the
    /// reader still wants them; wakes the reader.
    fn give(&self, chunks: Range<usize>, mut piece: Option<Piece>) -> MutexGuard<'_, State> {
        let mut st = self.state();
        for c in chunks {
            match piece.take() {
                p if c >= st.reader => {
                    st.inflated.insert(c, p);
                }
                Some(p) => st.spare_tokens.push(p.tokens),
                None => {}
            }
        }
        self.done.notify_all();
        st
    }
}

enum Task {
    Rebuild(Accepted, Vec<u8>),
    Inflate(Range<usize>),
}

/// The accepted piece's bytes, with their CRC-32, in `bytes` (reused); `None` for a
/// back-reference before the stream's start.
fn rebuild(a: &Accepted, mut bytes: Vec<u8>) -> Option<Bytes> {
    replay(&a.piece.tokens, &a.window, a.known, &mut bytes)?;
    let len = a.piece.tokens.len;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&bytes[WINDOW..WINDOW + len]);
    Some(Bytes {
        bytes,
        start: WINDOW,
        len,
        crc,
    })
}
