//! A gzip input inflated on a thread of its own, ahead of the parse.
//!
//! [`BUFFERS`] window-sized buffers go round between the inflating thread and the reader: the
//! thread fills one while the reader holds the others (the window whose last pieces are being
//! parsed, and the one after it, which workers have started on). A filled buffer reaches the
//! reader as an [`Inflated`]; when the last reference to it is dropped, the buffer goes back to
//! the thread. Inflated bytes are written once and never moved; the element cut by a window's
//! end is read from a small seam buffer (`chunked.rs`), so the memory held is [`BUFFERS`]
//! windows, whatever the input's size.

use std::fs::File;
use std::io::{self, Read};
use std::ops::Deref;
use std::sync::mpsc::{self, Receiver, SyncSender};

use crate::spans::{span, Kind};

/// Buffers the thread allocates: the one being filled and two the reader holds.
pub(crate) const BUFFERS: usize = 3;

/// The largest buffer the thread fills, whatever window is asked for: a longer window is made
/// of several, in a buffer of the reader's own.
const MAX_WINDOW: usize = 64 << 20;

/// One buffer the thread filled: inflated bytes at `buf[..len]`.
#[derive(Debug)]
struct Filled {
    buf: Vec<u8>,
    len: usize,
    /// The input ended with these bytes.
    last: bool,
}

/// Why the stream could not go on.
#[derive(Debug)]
pub(crate) enum InflateError {
    /// The gzip stream is corrupt or the file could not be read.
    Corrupt(io::Error),
    /// More than the cap (here) came out.
    Bomb(u64),
}

/// Inflated bytes in one of the thread's buffers, which goes back to the thread when dropped.
#[derive(Debug)]
pub(crate) struct Inflated {
    buf: Vec<u8>,
    len: usize,
    home: SyncSender<Vec<u8>>,
}

impl Deref for Inflated {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for Inflated {
    fn drop(&mut self) {
        // A closed channel means the thread has ended, and the buffer is simply dropped.
        let _ = self.home.try_send(std::mem::take(&mut self.buf));
    }
}

/// A gzip input as consecutive buffers of inflated bytes, from the inflating thread.
#[derive(Debug)]
pub(crate) struct GzipStream {
    filled: Receiver<io::Result<Filled>>,
    recycle: SyncSender<Vec<u8>>,
    inflated: u64,
    cap: u64,
}

impl GzipStream {
    /// Starts inflating `file`, `window` bytes a buffer and at most `cap + 1` bytes in all.
    pub(crate) fn spawn(file: File, cap: u64, window: usize) -> Self {
        let window = window.clamp(1, MAX_WINDOW);
        // The thread hands a filled buffer over only when the reader asks (rendezvous), and
        // gets each one back when the reader is done with it.
        let (filled_tx, filled) = mpsc::sync_channel(0);
        let (recycle, recycle_rx) = mpsc::sync_channel(BUFFERS);
        // Named for profilers. A thread that cannot start drops the channel's sender, and the
        // first `next` reports it.
        let _ = std::thread::Builder::new()
            .name("gunzip".into())
            .spawn(move || inflate(file, cap, window, &filled_tx, &recycle_rx));
        GzipStream {
            filled,
            recycle,
            inflated: 0,
            cap,
        }
    }

    /// The next buffer of inflated bytes, and whether the input ends with it. Not to be asked
    /// again after the last.
    pub(crate) fn next(&mut self) -> Result<(Inflated, bool), InflateError> {
        let filled = match self.filled.recv() {
            Ok(Ok(filled)) => filled,
            Ok(Err(e)) => return Err(InflateError::Corrupt(e)),
            Err(_) => {
                let stopped = io::Error::other("inflating stopped unexpectedly");
                return Err(InflateError::Corrupt(stopped));
            }
        };
        self.inflated += filled.len as u64;
        let inflated = Inflated {
            buf: filled.buf,
            len: filled.len,
            home: self.recycle.clone(),
        };
        if self.inflated > self.cap {
            return Err(InflateError::Bomb(self.cap));
        }
        Ok((inflated, filled.last))
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
            let _waiting = span(Kind::WaitBuffer, 0);
            match recycle.recv() {
                Ok(buf) => buf,
                Err(_) => return,
            }
        };
        // Zeroed once per buffer.
        buf.resize(window, 0);
        let filling = span(Kind::Fill, 0);
        let result = fill(&mut dec, &mut buf);
        drop(filling);
        let result = result.map(|len| Filled {
            last: len < window,
            buf,
            len,
        });
        let stop = !matches!(&result, Ok(f) if !f.last);
        let handing = span(Kind::Hand, 0);
        let gone = filled.send(result).is_err();
        drop(handing);
        if gone || stop {
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

    /// Reads the whole input, holding the last `held` buffers at any time.
    fn read_all(input: &[u8], window: usize, held: usize) -> Vec<u8> {
        let f = gzip(input);
        let mut gz = GzipStream::spawn(File::open(f.path()).unwrap(), u64::MAX, window);
        let mut out = Vec::new();
        let mut holding = std::collections::VecDeque::new();
        loop {
            let (buf, last) = gz.next().unwrap();
            out.extend_from_slice(&buf);
            holding.push_back(buf);
            if holding.len() > held {
                holding.pop_front();
            }
            if last {
                return out;
            }
        }
    }

    #[test]
    fn every_byte_comes_out_once_in_order() {
        let input = text(3 << 20);
        for window in [1000, 100_000, 1 << 20, 3 << 20, 1 << 40] {
            for held in 0..BUFFERS {
                assert_eq!(read_all(&input, window, held), input, "window {window}");
            }
        }
    }

    #[test]
    fn a_cap_and_a_corrupt_stream_are_errors() {
        let input = text(1 << 20);
        let f = gzip(&input);
        let mut gz = GzipStream::spawn(File::open(f.path()).unwrap(), 300_000, 100_000);
        let err = (0..20).find_map(|_| gz.next().err());
        assert!(matches!(err, Some(InflateError::Bomb(300_000))), "{err:?}");

        let mut bytes = std::fs::read(f.path()).unwrap();
        let mid = bytes.len() / 2;
        bytes.truncate(mid);
        let cut = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(cut.path(), &bytes).unwrap();
        let mut gz = GzipStream::spawn(File::open(cut.path()).unwrap(), u64::MAX, 100_000);
        let err = (0..100).find_map(|_| gz.next().err());
        assert!(matches!(err, Some(InflateError::Corrupt(_))), "{err:?}");
    }
}
