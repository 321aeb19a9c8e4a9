//! Reading input files: missing and empty files are errors that name the file; gzip is
//! recognised by its magic bytes and inflated; large plain files are memory-mapped so that the
//! JSON parser can borrow strings instead of copying them.

use std::fs::File;
use std::io::Read;
use std::ops::Deref;
use std::path::Path;

use std::collections::VecDeque;
use std::sync::Arc;

use crate::error::IngestError;
use crate::gunzip::Cores;
use crate::inflate::{GzipStream, InflateError, Inflated};

/// The bytes of one input file.
#[derive(Debug)]
pub enum InputBytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Deref for InputBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            InputBytes::Mapped(m) => m,
            InputBytes::Owned(v) => v,
        }
    }
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Opens `path`, failing with a message that names it when it is missing or empty.
pub fn open_file(what: &'static str, path: &Path) -> Result<File, IngestError> {
    let file = File::open(path).map_err(|e| IngestError::io(what, path, e))?;
    let meta = file
        .metadata()
        .map_err(|e| IngestError::io(what, path, e))?;
    if meta.is_dir() {
        return Err(IngestError::invalid(
            what,
            path,
            "is a directory, expected a file",
        ));
    }
    if meta.len() == 0 {
        return Err(IngestError::Empty {
            what,
            path: path.to_path_buf(),
        });
    }
    Ok(file)
}

/// Whether the file starts with the gzip magic bytes.
pub fn is_gzip(path: &Path) -> bool {
    let mut magic = [0u8; 2];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == GZIP_MAGIC
}

/// What `path`, gzip-compressed, inflates to, as its trailer says: see [`gzip_stated_size`].
/// An estimate for sizing buffers and choosing how to inflate, never trusted otherwise.
pub fn gzip_inflated_size(path: &Path) -> Option<u64> {
    gzip_stated_size(&File::open(path).ok()?)
}

/// [`gzip_inflated_size`] of an open file, read without moving its cursor.
///
/// The trailer's size field is the inflated size modulo 4 GiB (of the last member). Of the
/// sizes it may stand for, the estimate is the smallest that is at least [`MIN_RATIO`] times
/// the compressed size: a 5 GB trace gzipped to 540 MB states 674 MB, and means 674 MB +
/// 4 GiB. `None` when no size up to what the file may inflate to ([`inflate_cap`]) fits (a
/// field that is not a size: forged, or of several members), or the file is not gzip.
pub(crate) fn gzip_stated_size(file: &File) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata().ok()?.len();
    let mut magic = [0u8; 2];
    file.read_exact_at(&mut magic, 0).ok()?;
    if magic != GZIP_MAGIC || len < 18 {
        return None;
    }
    let mut field = [0u8; 4];
    file.read_exact_at(&mut field, len - 4).ok()?;
    let stated = u64::from(u32::from_le_bytes(field));
    let least = len.saturating_mul(MIN_RATIO);
    let wraps = least.saturating_sub(stated).div_ceil(1 << 32);
    let size = stated.checked_add(wraps.checked_mul(1 << 32)?)?;
    (least..=cap_for(len)).contains(&size).then_some(size)
}

/// Profiler JSON and SQLite inflate to at least twice their gzip size (5–30× in practice).
const MIN_RATIO: u64 = 2;

/// Most a gzip input may inflate to, per compressed byte: profiler JSON and SQLite compress
/// 5–30×, a gzip bomb a thousandfold.
pub const MAX_INFLATE_RATIO: u64 = 100;
/// Inflating up to this much is always allowed, whatever the ratio (small, very repetitive
/// files).
pub const MIN_INFLATE_CAP: u64 = 256 << 20;

/// How much `path`, gzip-compressed, may inflate to: [`MAX_INFLATE_RATIO`] × its size, at
/// least [`MIN_INFLATE_CAP`].
fn inflate_cap(path: &Path) -> u64 {
    cap_for(std::fs::metadata(path).map_or(0, |m| m.len()))
}

/// [`inflate_cap`] for a file of `compressed` bytes.
fn cap_for(compressed: u64) -> u64 {
    compressed
        .saturating_mul(MAX_INFLATE_RATIO)
        .max(MIN_INFLATE_CAP)
}

/// Inflates `path` into `out`, stopping with an error naming the file once more than
/// [`inflate_cap`] bytes came out.
fn inflate_capped(
    what: &'static str,
    path: &Path,
    file: &mut File,
    out: &mut dyn std::io::Write,
) -> Result<(), IngestError> {
    let cap = inflate_cap(path);
    let dec = flate2::read::MultiGzDecoder::new(std::io::BufReader::new(file));
    let copied = std::io::copy(&mut dec.take(cap.saturating_add(1)), out)
        .map_err(|e| corrupt(what, path, &e))?;
    if copied > cap {
        return Err(bomb(what, path, cap));
    }
    Ok(())
}

/// The error for a gzip input that could not be inflated: one that ends early is most likely
/// a file cut short.
fn corrupt(what: &'static str, path: &Path, e: &std::io::Error) -> IngestError {
    let message = if e.kind() == std::io::ErrorKind::UnexpectedEof {
        format!(
            "corrupt gzip stream: it ends early ({e}); the file looks truncated — was it cut \
             short while being written or copied?"
        )
    } else {
        format!("corrupt gzip stream: {e}")
    };
    IngestError::invalid(what, path, message)
}

/// The error for a gzip input that inflated past `cap`.
fn bomb(what: &'static str, path: &Path, cap: u64) -> IngestError {
    IngestError::invalid(
        what,
        path,
        format!(
            "inflates past {} MB ({}× its compressed size, or {} MB at least): a gzip bomb \
             or a corrupt file; if it is a real trace, gunzip it and pass the plain file",
            cap >> 20,
            MAX_INFLATE_RATIO,
            MIN_INFLATE_CAP >> 20
        ),
    )
}

/// All bytes of `path`, inflated when gzip-compressed (at most [`inflate_cap`]),
/// memory-mapped otherwise.
pub fn read_bytes(what: &'static str, path: &Path) -> Result<InputBytes, IngestError> {
    let mut file = open_file(what, path)?;
    if is_gzip(path) {
        let mut out = Vec::new();
        inflate_capped(what, path, &mut file, &mut out)?;
        if out.is_empty() {
            return Err(IngestError::Empty {
                what,
                path: path.to_path_buf(),
            });
        }
        return Ok(InputBytes::Owned(out));
    }
    // SAFETY: the map is read-only and lives no longer than this ingest. A concurrent writer
    // truncating the file could fault the process; profiler outputs are not rewritten while
    // they are ingested, and the same risk is accepted by every mmap-based reader.
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| IngestError::io(what, path, e))?;
    Ok(InputBytes::Mapped(map))
}

/// Inflates a gzip file into a temporary file (for SQLite, which needs a real file).
pub fn gunzip_to_temp(
    what: &'static str,
    path: &Path,
) -> Result<tempfile::NamedTempFile, IngestError> {
    let mut file = open_file(what, path)?;
    let mut tmp = tempfile::NamedTempFile::new().map_err(|e| IngestError::io(what, path, e))?;
    inflate_capped(what, path, &mut file, tmp.as_file_mut())?;
    Ok(tmp)
}

/// Consecutive bytes of one input file (inflated, for gzip), shared by the threads that parse
/// them: a mapped range of a plain file, a buffer of the inflating thread (back to it when the
/// last reference is dropped), or bytes copied together from segments.
#[derive(Debug)]
pub(crate) struct Segment {
    /// Offset of the first byte in the (inflated) input.
    base: u64,
    /// The input ends with these bytes.
    last: bool,
    data: SegmentData,
}

#[derive(Debug)]
enum SegmentData {
    Mapped(memmap2::Mmap),
    Inflated(Inflated),
    Owned(Vec<u8>),
}

impl Segment {
    pub(crate) fn owned(base: u64, last: bool, bytes: Vec<u8>) -> Self {
        Segment {
            base,
            last,
            data: SegmentData::Owned(bytes),
        }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        match &self.data {
            SegmentData::Mapped(m) => m,
            SegmentData::Inflated(b) => b,
            SegmentData::Owned(v) => v,
        }
    }

    /// Offset of `bytes()[0]` in the input.
    pub(crate) fn base(&self) -> u64 {
        self.base
    }

    /// Whether the input ends with these bytes.
    pub(crate) fn is_last(&self) -> bool {
        self.last
    }
}

/// An input file as consecutive segments of about one window each.
#[derive(Debug)]
enum Segments {
    Mapped {
        file: File,
        size: u64,
        next: u64,
        window: usize,
    },
    Gzip {
        stream: GzipStream,
        next: u64,
        ended: bool,
    },
}

impl Segments {
    /// The segment after the last one given; an empty last one past the input's end.
    fn next(&mut self, what: &'static str, path: &Path) -> Result<Segment, IngestError> {
        match self {
            Segments::Mapped {
                file,
                size,
                next,
                window,
            } => {
                let want = (*window as u64).min(size.saturating_sub(*next));
                let base = *next;
                *next += want;
                let last = *next >= *size;
                if want == 0 {
                    return Ok(Segment::owned(base, true, Vec::new()));
                }
                // SAFETY: as in `read_bytes`: a read-only map of a file not rewritten while it
                // is ingested.
                #[allow(unsafe_code)]
                let map = unsafe {
                    memmap2::MmapOptions::new()
                        .offset(base)
                        .len(want as usize)
                        .map(&*file)
                }
                .map_err(|e| IngestError::io(what, path, e))?;
                Ok(Segment {
                    base,
                    last,
                    data: SegmentData::Mapped(map),
                })
            }
            Segments::Gzip {
                stream,
                next,
                ended,
            } => {
                if *ended {
                    return Ok(Segment::owned(*next, true, Vec::new()));
                }
                let (bytes, last) = stream.next().map_err(|e| match e {
                    InflateError::Corrupt(e) => corrupt(what, path, &e),
                    InflateError::Bomb(cap) => bomb(what, path, cap),
                })?;
                let base = *next;
                *next += bytes.len() as u64;
                *ended = last;
                Ok(Segment {
                    base,
                    last,
                    data: SegmentData::Inflated(bytes),
                })
            }
        }
    }
}

/// A window that moves forward through one input file, plain or gzip-compressed, so that a
/// reader holds only the part it is parsing: a plain file is memory-mapped one segment at a
/// time (the pages behind the window leave the process), a gzip file is inflated as the
/// window moves (never whole, and at most [`inflate_cap`] in all).
///
/// The window is `cur.bytes()[start..]`; a window that has to grow past its segment is copied
/// into a segment of its own, with as much of the next segment as it needs (the rest stays
/// `pending`). A reader that works on whole segments (`chunked.rs`'s array) takes them with
/// [`InputWindow::take`] and [`InputWindow::next_segment`] and gives the window back with
/// [`InputWindow::resume`].
#[derive(Debug)]
pub struct InputWindow {
    what: &'static str,
    path: std::path::PathBuf,
    segments: Segments,
    cur: Arc<Segment>,
    start: usize,
    /// Segments after the window, not yet in it, each from an index on.
    pending: VecDeque<(Arc<Segment>, usize)>,
}

impl InputWindow {
    /// Opens `path` with its first segment as the window: the window moves a segment of
    /// `len` bytes at a time, or for a gzip file inflated on several `cores`, a piece of the
    /// parallel reader's at a time. The window grows past a segment only as a reader asks
    /// ([`InputWindow::advance`]): joined from the parallel reader's pieces up to `len`, the
    /// first window of the 989 MB trace's `.gz` kept the parse waiting for 22 ms while the
    /// pieces were copied (PERFORMANCE.md, session 28).
    pub(crate) fn open(
        what: &'static str,
        path: &Path,
        len: usize,
        cores: Cores,
    ) -> Result<Self, IngestError> {
        let file = open_file(what, path)?;
        let segments = if is_gzip(path) {
            Segments::Gzip {
                stream: GzipStream::spawn(file, inflate_cap(path), len, cores),
                next: 0,
                ended: false,
            }
        } else {
            let size = file
                .metadata()
                .map_err(|e| IngestError::io(what, path, e))?
                .len();
            Segments::Mapped {
                file,
                size,
                next: 0,
                window: len.max(1),
            }
        };
        let mut w = InputWindow {
            what,
            path: path.to_path_buf(),
            segments,
            cur: Arc::new(Segment::owned(0, false, Vec::new())),
            start: 0,
            pending: VecDeque::new(),
        };
        w.advance(0, 1)?;
        if w.bytes().is_empty() {
            return Err(IngestError::Empty {
                what,
                path: path.to_path_buf(),
            });
        }
        Ok(w)
    }

    /// The window's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.cur.bytes()[self.start..]
    }

    /// Offset of `bytes()[0]` in the input (inflated, for gzip).
    pub fn base(&self) -> u64 {
        self.cur.base + self.start as u64
    }

    /// Whether the window holds the input's last byte.
    pub fn at_end(&self) -> bool {
        self.cur.last
    }

    /// Moves the window to start at `bytes()[from]` and holds at least `len` bytes from there,
    /// or all that is left.
    pub fn advance(&mut self, from: usize, len: usize) -> Result<(), IngestError> {
        self.start += from.min(self.bytes().len());
        while self.bytes().len() < len && !self.cur.last {
            let (next, at) = self.next_segment()?;
            if self.bytes().is_empty() {
                (self.cur, self.start) = (next, at);
                continue;
            }
            let rest = &next.bytes()[at..];
            let take = (len - self.bytes().len()).min(rest.len());
            let mut joined = Vec::with_capacity(self.bytes().len() + take);
            joined.extend_from_slice(self.bytes());
            joined.extend_from_slice(&rest[..take]);
            let last = next.last && take == rest.len();
            self.cur = Arc::new(Segment::owned(self.base(), last, joined));
            self.start = 0;
            if take < rest.len() {
                self.pending.push_front((next, at + take));
            }
        }
        Ok(())
    }

    /// The segment after the window (or after what [`InputWindow::take`] took) and the index
    /// its bytes start at. Only asked for while the last segment has not been reached.
    pub(crate) fn next_segment(&mut self) -> Result<(Arc<Segment>, usize), IngestError> {
        match self.pending.pop_front() {
            Some(p) => Ok(p),
            None => Ok((Arc::new(self.segments.next(self.what, &self.path)?), 0)),
        }
    }

    /// Takes the window's segment and the index `bytes()[from]` is at in it, leaving the window
    /// empty until [`InputWindow::resume`].
    pub(crate) fn take(&mut self, from: usize) -> (Arc<Segment>, usize) {
        let at = self.start + from.min(self.bytes().len());
        let empty = Arc::new(Segment::owned(self.base(), false, Vec::new()));
        (std::mem::replace(&mut self.cur, empty), at)
    }

    /// Puts the window at `seg.bytes()[at..]`, followed by `after` (segments taken but not
    /// read), then by the segments not taken yet.
    pub(crate) fn resume(
        &mut self,
        seg: Arc<Segment>,
        at: usize,
        after: impl DoubleEndedIterator<Item = (Arc<Segment>, usize)>,
    ) {
        (self.cur, self.start) = (seg, at);
        for p in after.rev() {
            self.pending.push_front(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file(bytes: &[u8]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    fn gzip(bytes: &[u8]) -> tempfile::NamedTempFile {
        gzip_at(bytes, flate2::Compression::fast())
    }

    fn gzip_at(bytes: &[u8], level: flate2::Compression) -> tempfile::NamedTempFile {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), level);
        gz.write_all(bytes).unwrap();
        file(&gz.finish().unwrap())
    }

    /// Reads the whole input through a window of `len`-byte segments as a parser would: takes
    /// `step(i)` bytes and asks for `want(i)`, and every third step takes the segment and
    /// hands back a later point of it, or of the segments after it.
    fn read_all(
        path: &Path,
        len: usize,
        step: impl Fn(usize) -> usize,
        want: impl Fn(usize) -> usize,
    ) -> Vec<u8> {
        let mut w = InputWindow::open("test", path, len, Cores::Auto).unwrap();
        let mut out = Vec::new();
        for i in 0.. {
            if i % 3 == 2 && !w.at_end() {
                // As the array reader does: the segment from a point, one more segment, and
                // the window resumed inside the first with the second pending.
                let (seg, at) = w.take(0);
                let n = step(i).min(seg.bytes().len() - at);
                out.extend_from_slice(&seg.bytes()[at..at + n]);
                let next = (!seg.is_last()).then(|| w.next_segment().unwrap());
                w.resume(seg, at + n, next.into_iter());
                continue;
            }
            let n = step(i).min(w.bytes().len());
            let n = if n == 0 && w.at_end() {
                w.bytes().len()
            } else {
                n
            };
            out.extend_from_slice(&w.bytes()[..n]);
            if w.at_end() && n == w.bytes().len() {
                return out;
            }
            w.advance(n, want(i)).unwrap();
            assert!(w.bytes().len() >= want(i).min(1) || w.at_end());
        }
        unreachable!()
    }

    #[test]
    fn the_window_gives_every_byte_once_in_order_across_segments() {
        let text: Vec<u8> = (0..120_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for gzipped in [false, true] {
            let f = if gzipped { gzip(&text) } else { file(&text) };
            for len in [7, 999, 4096, 50_000, 1 << 40] {
                // Steps within a segment, windows grown past several segments, and both.
                let a = read_all(f.path(), len, |i| 1 + i * 37 % 5000, |_| len);
                assert_eq!(a, text, "len {len}, gzip {gzipped}");
                let b = read_all(f.path(), len, |i| i % 2 * 5, |i| (i + 1) * 7000);
                assert_eq!(b, text, "len {len}, gzip {gzipped}");
            }
        }
    }

    /// The first window is the input's first segment: for the parallel reader, its first
    /// piece alone, not the pieces up to `len` copied into one buffer.
    #[test]
    fn the_window_opens_on_the_first_segment_alone() {
        let text: Vec<u8> = (0..20_000u32)
            .flat_map(|i| {
                format!("{{\"name\": \"k{}\", \"ts\": {}}},\n", i % 97, i * 37).into_bytes()
            })
            .collect();
        // Level 6 makes blocks the parallel reader finds in 64-byte chunks.
        let f = gzip_at(&text, flate2::Compression::default());
        let cores = Cores::Given {
            threads: 2,
            chunk: 64,
        };
        let mut w = InputWindow::open("test", f.path(), 1 << 20, cores).unwrap();
        let first = w.bytes().len();
        assert!(first > 0 && first < 200_000, "{first} bytes");
        assert_eq!(w.bytes(), &text[..first]);
        // Grown as a reader asks.
        w.advance(0, 300_000).unwrap();
        assert_eq!(w.bytes(), &text[..w.bytes().len()]);
        assert!(w.bytes().len() >= 300_000);
        let plain = file(&text);
        let w = InputWindow::open("test", plain.path(), 1000, Cores::Auto).unwrap();
        assert_eq!(w.bytes(), &text[..1000]);
    }

    #[test]
    fn the_inflated_size_is_read_from_the_trailer_and_only_believed_when_plausible() {
        let text = b"{\"traceEvents\": []}\n".repeat(4000);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&text).unwrap();
        let gz = gz.finish().unwrap();
        assert_eq!(
            gzip_inflated_size(file(&gz).path()),
            Some(text.len() as u64)
        );
        // A size field smaller than twice the file, where no wrap past 4 GiB can explain it
        // (a small file, forged or of several members), is no estimate.
        let mut forged = gz.clone();
        let n = forged.len();
        forged[n - 4..].copy_from_slice(&7u32.to_le_bytes());
        assert_eq!(gzip_inflated_size(file(&forged).path()), None);
        // A large file's field wrapped past 4 GiB: 674 MB stated, 540 MB compressed, read as
        // the 4.97 GB it was (sparse files: only the header and the trailer are read).
        let wrapped = |compressed: u64, stated: u32| {
            let f = file(&gz[..10]);
            f.as_file().set_len(compressed).unwrap();
            use std::os::unix::fs::FileExt;
            f.as_file()
                .write_all_at(&stated.to_le_bytes(), compressed - 4)
                .unwrap();
            gzip_inflated_size(f.path())
        };
        assert_eq!(wrapped(539_771_710, 674_384_416), Some(4_969_351_712));
        assert_eq!(wrapped(107_766_347, 989_440_024), Some(989_440_024));
        // Where several sizes fit (9 GB in 1 GiB: 410 MB stated, 4.7 or 9 GB meant), the
        // smallest: an estimate, not a fact.
        let nine = 9_000_000_000u64;
        let stated = nine % (1 << 32);
        assert_eq!(wrapped(1 << 30, stated as u32), Some(stated + (1 << 32)));
        // Past what the file may inflate to: none.
        assert_eq!(wrapped(40 << 20, 7), None);
        // A small, very repetitive trace, within the inflate cap: believed.
        assert_eq!(wrapped(1 << 20, 200 << 20), Some(200 << 20));
        // Not gzip, too short to have a trailer, or missing.
        assert_eq!(gzip_inflated_size(file(&text).path()), None);
        assert_eq!(gzip_inflated_size(file(&gz[..10]).path()), None);
        assert_eq!(gzip_inflated_size(Path::new("/nonexistent/x.gz")), None);
    }
}
