//! A gzip input inflated on a thread of its own, one window ahead of the parse.
//!
//! Two window-sized buffers go back and forth between the inflating thread and the reader: the
//! thread fills one while the reader parses the other. The thread inflates straight into the
//! buffer the reader will parse, after [`HEADROOM`] bytes left free at its front; when the
//! reader moves on, the unparsed tail of its old window (an element cut by the window's end)
//! is copied into that headroom, just before the new bytes, and the old buffer goes back to the
//! thread. Inflated bytes are thus written once and copied only at the cut, and the memory held
//! is two windows, whatever the input's size. Only a window grown for an element longer than
//! the headroom is copied whole, into a buffer of the reader's own.

use std::fs::File;
use std::io::{self, Read};
use std::sync::mpsc::{self, Receiver, SyncSender};

/// Room at a buffer's front for the tail of the window before it: most elements are far
/// smaller. A longer tail is handled by growing the reader's own buffer instead.
const HEADROOM: usize = 64 << 10;

/// Buffers the thread allocates: the one being filled and the one being parsed.
const BUFFERS: usize = 2;

/// The largest buffer the thread fills, whatever window is asked for: a longer window is made
/// of several, in the reader's own buffer.
const MAX_WINDOW: usize = 64 << 20;

/// One buffer the thread filled: inflated bytes at `buf[HEADROOM..HEADROOM + len]`.
#[derive(Debug)]
struct Filled {
    buf: Vec<u8>,
    len: usize,
    /// The input ended with these bytes.
    last: bool,
}

/// Why the window could not move.
#[derive(Debug)]
pub(crate) enum InflateError {
    /// The gzip stream is corrupt or the file could not be read.
    Corrupt(io::Error),
    /// More than the cap (here) came out.
    Bomb(u64),
}

/// The window of a gzip input, over the inflating thread's buffers.
#[derive(Debug)]
pub(crate) struct GzipWindow {
    filled: Receiver<io::Result<Filled>>,
    recycle: SyncSender<Vec<u8>>,
    /// The buffer parsed now; the window is `cur[start..end]`.
    cur: Vec<u8>,
    start: usize,
    end: usize,
    inflated: u64,
    cap: u64,
    at_end: bool,
}

impl GzipWindow {
    /// Starts inflating `file`, `window` bytes a buffer and at most `cap + 1` bytes in all. The
    /// window is empty until the first [`GzipWindow::advance`].
    pub(crate) fn spawn(file: File, cap: u64, window: usize) -> Self {
        let window = window.clamp(1, MAX_WINDOW);
        // The thread hands a filled buffer over only when the reader asks (rendezvous), and
        // gets each one back when the reader is done with it.
        let (filled_tx, filled) = mpsc::sync_channel(0);
        let (recycle, recycle_rx) = mpsc::sync_channel(BUFFERS);
        std::thread::spawn(move || inflate(file, cap, window, &filled_tx, &recycle_rx));
        GzipWindow {
            filled,
            recycle,
            cur: Vec::new(),
            start: 0,
            end: 0,
            inflated: 0,
            cap,
            at_end: false,
        }
    }

    /// The window's bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.cur[self.start..self.end]
    }

    /// Whether the window holds the input's last byte.
    pub(crate) fn at_end(&self) -> bool {
        self.at_end
    }

    /// Drops the window's first `from` bytes and takes buffers from the thread until at least
    /// `len` bytes are in the window, or the input ended.
    pub(crate) fn advance(&mut self, from: usize, len: usize) -> Result<(), InflateError> {
        self.start += from.min(self.end - self.start);
        while self.end - self.start < len && !self.at_end {
            let filled = match self.filled.recv() {
                Ok(Ok(filled)) => filled,
                Ok(Err(e)) => return Err(InflateError::Corrupt(e)),
                Err(_) => {
                    let stopped = io::Error::other("inflating stopped unexpectedly");
                    return Err(InflateError::Corrupt(stopped));
                }
            };
            self.inflated += filled.len as u64;
            if self.inflated > self.cap {
                return Err(InflateError::Bomb(self.cap));
            }
            self.at_end = filled.last;
            self.take(filled);
        }
        Ok(())
    }

    /// Puts the window's tail before `filled`'s bytes, and sends a buffer back to the thread.
    fn take(&mut self, filled: Filled) {
        let Filled { mut buf, len, .. } = filled;
        let tail = self.end - self.start;
        if tail <= HEADROOM {
            let at = HEADROOM - tail;
            buf[at..HEADROOM].copy_from_slice(&self.cur[self.start..self.end]);
            let old = std::mem::replace(&mut self.cur, buf);
            (self.start, self.end) = (at, HEADROOM + len);
            self.give_back(old);
        } else {
            // A long tail (an element longer than the headroom): the window grows in a buffer
            // of the reader's own, which goes back to the thread later.
            self.cur.truncate(self.end);
            self.cur.drain(..self.start);
            self.cur.extend_from_slice(&buf[HEADROOM..HEADROOM + len]);
            (self.start, self.end) = (0, self.cur.len());
            self.give_back(buf);
        }
    }

    fn give_back(&self, buf: Vec<u8>) {
        // The first window's empty buffer was never the thread's; a closed channel means the
        // thread has ended, and the buffer is simply dropped.
        if buf.capacity() > 0 {
            let _ = self.recycle.try_send(buf);
        }
    }
}

/// The thread: fills buffers from the decoder until the input ends, fails, passes the cap, or
/// the reader is gone.
fn inflate(
    file: File,
    cap: u64,
    window: usize,
    filled: &SyncSender<io::Result<Filled>>,
    recycle: &Receiver<Vec<u8>>,
) {
    let mut dec = crate::gunzip::reader(file).take(cap.saturating_add(1));
    let mut made = 0;
    loop {
        let mut buf = if made < BUFFERS {
            made += 1;
            Vec::new()
        } else {
            match recycle.recv() {
                Ok(buf) => buf,
                Err(_) => return,
            }
        };
        // Zeroed once per buffer; a buffer the reader grew is cut back to size.
        buf.resize(HEADROOM + window, 0);
        buf.shrink_to(HEADROOM + window);
        let result = fill(&mut dec, &mut buf[HEADROOM..]).map(|len| Filled {
            last: len < window,
            buf,
            len,
        });
        let stop = !matches!(&result, Ok(f) if !f.last);
        if filled.send(result).is_err() || stop {
            return;
        }
    }
}

/// Reads into `out` until it is full or the input ends; the number of bytes read.
fn fill(src: &mut impl Read, out: &mut [u8]) -> io::Result<usize> {
    let mut len = 0;
    while len < out.len() {
        match src.read(&mut out[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(bytes: &[u8]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let mut gz = flate2::write::GzEncoder::new(&mut f, flate2::Compression::fast());
        gz.write_all(bytes).unwrap();
        gz.finish().unwrap();
        f
    }

    /// Text that compresses, with a pseudo-random walk over it.
    fn text(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| b"{\"ph\": \"X\", \"ts\": 12345},\n"[(i * 7 + i / 13) % 26])
            .collect()
    }

    /// Reads the whole input as a parser would: takes `step(i)` bytes of the window and asks
    /// for `want(i)` more, and returns what it took.
    fn read_all(
        input: &[u8],
        window: usize,
        step: impl Fn(usize, usize) -> usize,
        want: impl Fn(usize) -> usize,
    ) -> Vec<u8> {
        let f = gzip(input);
        let mut gz = GzipWindow::spawn(File::open(f.path()).unwrap(), u64::MAX, window);
        gz.advance(0, window).unwrap();
        let mut out = Vec::new();
        for i in 0.. {
            let len = gz.bytes().len();
            // At the end, a step that takes nothing takes the rest.
            let n = match step(i, len).min(len) {
                0 if gz.at_end() => len,
                n => n,
            };
            out.extend_from_slice(&gz.bytes()[..n]);
            if gz.at_end() && n == gz.bytes().len() {
                return out;
            }
            gz.advance(n, want(i)).unwrap();
        }
        unreachable!()
    }

    #[test]
    fn every_byte_comes_out_once_in_order() {
        let input = text(3 << 20);
        // Short tails (the headroom), tails longer than it, and windows grown far past one
        // buffer, on windows smaller and larger than the headroom.
        for window in [1000, 100_000, 1 << 20] {
            let short = read_all(&input, window, |_, len| len.saturating_sub(17), |_| window);
            assert_eq!(short, input, "short tails, window {window}");
            let long = read_all(&input, window, |i, len| len / (1 + i % 3), |_| window);
            assert_eq!(long, input, "long tails, window {window}");
            let grown = read_all(&input, window, |i, _| i % 2 * 5, |i| (i + 1) * 70_000);
            assert_eq!(grown, input, "grown windows, window {window}");
        }
        // A window asked far larger than any buffer (a whole-file read) is made of several.
        let whole = read_all(&input, 1 << 40, |_, len| len, |_| 1 << 40);
        assert_eq!(whole, input, "one window for the whole input");
    }

    #[test]
    fn a_cap_and_a_corrupt_stream_are_errors() {
        let input = text(1 << 20);
        let f = gzip(&input);
        let mut gz = GzipWindow::spawn(File::open(f.path()).unwrap(), 300_000, 100_000);
        let err = (0..20).find_map(|_| gz.advance(gz.bytes().len(), 100_000).err());
        assert!(matches!(err, Some(InflateError::Bomb(300_000))), "{err:?}");

        let mut bytes = std::fs::read(f.path()).unwrap();
        let mid = bytes.len() / 2;
        bytes.truncate(mid);
        let cut = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(cut.path(), &bytes).unwrap();
        let mut gz = GzipWindow::spawn(File::open(cut.path()).unwrap(), u64::MAX, 100_000);
        let err = (0..100).find_map(|_| gz.advance(gz.bytes().len(), 100_000).err());
        assert!(matches!(err, Some(InflateError::Corrupt(_))), "{err:?}");
    }
}
