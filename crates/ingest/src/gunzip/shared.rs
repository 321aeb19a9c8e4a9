//! The workers and what they share with the reader: chunks to inflate, pieces to translate.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::bits::Bits;
use super::decode::{Bad, Inflater, Stop, Symbols};
use crate::spans::{span, Kind};

/// The most compressed bytes a worker takes at a time (`chunk_for` takes less of a stream that
/// compresses more than 10×): output of about ten times that, held twice over as 16-bit
/// symbols while the chunk waits. Larger chunks cost the finding of their first block less
/// often, and hold more memory.
pub(super) const CHUNK: u64 = 64 << 10;

/// How far past a chunk's end a worker reads before giving the chunk up.
const MAX_MARGIN: u64 = 16 << 20;

/// A chunk inflating to more symbols than this (4 MB of them; a chunk of JSON makes 1–2 MB)
/// is inflated on by the reader, in pieces of this size.
const FULL: usize = 2 << 20;

/// The most symbols a block may bring past [`FULL`] (JSON's blocks make well under 1 MB): a
/// longer one fails the chunk, and the reader hands such a stream to `flate2`.
const LIMIT: usize = 2 << 20;

/// A byte for each 16-bit symbol: itself below 256, the window's byte for a marker.
pub(super) type ByteTable = Box<[u8; 1 << 16]>;

/// Part of the stream, inflated.
#[derive(Debug)]
pub(super) struct Piece {
    /// The bits where its first block starts and where its last one ends, in the file.
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) stop: Stop,
    pub(super) symbols: Symbols,
}

/// The most symbols one worker translates at a time: an accepted piece (about 640K symbols)
/// is translated by several workers at once, in parts of this many.
pub(super) const PART: usize = 128 << 10;

/// An accepted piece with the table that translates it, shared by the workers translating
/// its parts.
#[derive(Debug)]
pub(super) struct Accepted {
    piece: Piece,
    table: ByteTable,
}

/// A part of an accepted piece to translate: its number in the reader's order, the piece, and
/// the range of the piece's symbols.
type Part = (u64, Arc<Accepted>, Range<usize>);

/// A part's bytes, `bytes[..len]`, with their CRC-32.
#[derive(Debug)]
pub(super) struct Bytes {
    pub(super) bytes: Vec<u8>,
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
    /// Parts of the pieces the reader accepted, in its order, to translate.
    to_translate: VecDeque<Part>,
    translated: BTreeMap<u64, Bytes>,
    pub(super) stop: bool,
    pub(super) spare_symbols: Vec<Symbols>,
    pub(super) spare_bytes: Vec<Vec<u8>>,
    pub(super) spare_tables: Vec<ByteTable>,
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
                st.spare_symbols.push(p.symbols);
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

    /// Queues an accepted piece for translation by `table`, in parts numbered from `first`;
    /// returns how many.
    pub(super) fn translate(&self, first: u64, piece: Piece, table: ByteTable) -> u64 {
        let len = piece.symbols.inflated().len();
        let mut st = self.state();
        if len == 0 {
            st.spare_symbols.push(piece.symbols);
            st.spare_tables.push(table);
            return 0;
        }
        let accepted = Arc::new(Accepted { piece, table });
        let mut seq = first;
        for at in (0..len).step_by(PART) {
            let part = at..(at + PART).min(len);
            st.to_translate
                .push_back((seq, Arc::clone(&accepted), part));
            seq += 1;
        }
        self.work.notify_all();
        seq - first
    }

    /// The bytes of part `seq`, waiting for them; `None` if the workers stopped.
    pub(super) fn translated(&self, seq: u64) -> Option<Bytes> {
        let mut st = self.state();
        loop {
            if let Some(b) = st.translated.remove(&seq) {
                return Some(b);
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
    /// the first boundary at or past `stop`, reading more of the file while a block runs past
    /// what was read.
    pub(super) fn inflate(
        &self,
        start: u64,
        stop: u64,
        find: bool,
        inf: &mut Inflater,
        mut symbols: Symbols,
        data: &mut Vec<u8>,
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
                match inf.run(&mut bits, &mut symbols, stop_at, FULL, FULL + LIMIT) {
                    Ok(stop) => {
                        return Some(Piece {
                            start: base + at,
                            end: base + bits.position(),
                            stop,
                            symbols,
                        })
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

    /// A worker: translates accepted pieces first, and inflates chunks while the reader is
    /// not too far behind, until the reader stops it.
    pub(super) fn work(&self) {
        let mut inf = Inflater::new();
        let mut data = Vec::new();
        loop {
            let idle = span(Kind::Idle, 0);
            let task = {
                let mut st = self.state();
                loop {
                    if st.stop {
                        return;
                    }
                    if let Some(t) = st.to_translate.pop_front() {
                        let bytes = st.spare_bytes.pop().unwrap_or_default();
                        break Task::Translate(t, bytes);
                    }
                    if st.next < self.chunks && st.next < st.reader + self.ahead {
                        st.next += 1;
                        let symbols = st.spare_symbols.pop().unwrap_or_default();
                        break Task::Inflate(st.next - 1, symbols);
                    }
                    st = self.work.wait(st).unwrap_or_else(|e| e.into_inner());
                }
            };
            drop(idle);
            let _busy = match &task {
                Task::Translate((seq, _, _), _) => span(Kind::Translate, *seq),
                Task::Inflate(i, _) => span(Kind::Inflate, *i as u64),
            };
            // A panic in a worker (a defect) loses its task: an inflated chunk is then
            // inflated again by the reader; a lost translation stops the parallel reader.
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match task {
                Task::Translate((seq, accepted, part), bytes) => {
                    Done::Translated(seq, translate(&accepted, part, bytes), accepted)
                }
                Task::Inflate(i, symbols) => {
                    let start = self.chunk_start(i);
                    let piece = self.inflate(
                        start,
                        self.chunk_end(i),
                        i > 0,
                        &mut inf,
                        symbols,
                        &mut data,
                    );
                    Done::Inflated(i, piece)
                }
            }));
            let mut st = self.state();
            match done {
                Ok(Done::Inflated(i, piece)) if i >= st.reader => {
                    st.inflated.insert(i, piece);
                }
                Ok(Done::Inflated(_, piece)) => {
                    if let Some(p) = piece {
                        st.spare_symbols.push(p.symbols);
                    }
                }
                Ok(Done::Translated(seq, bytes, accepted)) => {
                    st.translated.insert(seq, bytes);
                    // The last part translated gives the piece's buffers back.
                    if let Some(Accepted { piece, table }) = Arc::into_inner(accepted) {
                        st.spare_symbols.push(piece.symbols);
                        st.spare_tables.push(table);
                    }
                }
                Err(_) => st.stop = true,
            }
            self.done.notify_all();
        }
    }
}

enum Task {
    Translate(Part, Vec<u8>),
    Inflate(usize, Symbols),
}

enum Done {
    Translated(u64, Bytes, Arc<Accepted>),
    Inflated(usize, Option<Piece>),
}

/// The part's bytes by its piece's table, with their CRC-32, in `bytes` (reused).
fn translate(accepted: &Accepted, part: Range<usize>, mut bytes: Vec<u8>) -> Bytes {
    let symbols = &accepted.piece.symbols.inflated()[part];
    let table = &accepted.table;
    let len = symbols.len();
    // Grown, never shrunk: a reused buffer is written in place, its room zeroed once.
    if bytes.len() < len {
        bytes.resize(len, 0);
    }
    for (b, &s) in bytes[..len].iter_mut().zip(symbols) {
        *b = table[usize::from(s)];
    }
    let mut crc = crc32fast::Hasher::new();
    crc.update(&bytes[..len]);
    Bytes { bytes, len, crc }
}
