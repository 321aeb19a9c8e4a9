//! A gzip input inflated on a thread of its own, ahead of the parse.
//!
//! `flate2` inflates into [`BUFFERS`] window-sized buffers that go round between the thread
//! and the reader: the thread fills one while the reader holds the others (the window whose
//! last pieces are being parsed, and the one after it, which workers have started on). The
//! parallel reader ([`crate::gunzip`]) hands out its pieces whole instead, each in the buffer
//! a worker rebuilt it in, so no byte is copied on this thread. Either way a buffer reaches
//! the reader as an [`Inflated`]; when the last reference to it is dropped, the buffer goes
//! back to the thread. Inflated bytes are written once and never moved; the element cut by a
//! segment's end is read from a small seam buffer (`chunked.rs`), so the memory held is about
//! [`BUFFERS`] windows, whatever the input's size.

use std::fs::File;
use std::io::{self, Read};
use std::ops::Deref;
use std::sync::mpsc::{self, Receiver, SyncSender};

use crate::gunzip::{Cores, Inflating, ParallelGunzip, Part};
use crate::spans::{span, Kind};

/// Buffers the thread allocates: the one being filled and two the reader holds.
pub(crate) const BUFFERS: usize = 3;

/// The parallel reader's pieces queued for the reader at most. One by one, a handed piece
/// waited for the reader's thread to be woken and scheduled: 0.3 s of a 0.58 s reading of the
/// 989 MB trace (PERFORMANCE.md, session 27).
const PARTS_QUEUED: usize = 4;

/// Buffers on their way back to the thread at most; more are dropped. The parallel reader's
/// parts are a piece each (about 640 KB), and the reader holds two windows of them.
const RECYCLED: usize = 64;

/// The largest buffer the thread fills, whatever window is asked for: a longer window is made
/// of several, in a buffer of the reader's own.
const MAX_WINDOW: usize = 64 << 20;

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
    start: usize,
    len: usize,
    home: SyncSender<Vec<u8>>,
}

impl Deref for Inflated {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
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
    filled: Receiver<io::Result<Part>>,
    recycle: SyncSender<Vec<u8>>,
    inflated: u64,
    cap: u64,
}

impl GzipStream {
    /// Starts inflating `file` on `cores`, `window` bytes a buffer (or a piece of the parallel
    /// reader's), and at most `cap + 1` bytes in all.
    pub(crate) fn spawn(file: File, cap: u64, window: usize, cores: Cores) -> Self {
        let window = window.clamp(1, MAX_WINDOW);
        let inflating = crate::gunzip::inflating(file, cores);
        // The thread hands a filled window over only when the reader asks (rendezvous), but
        // queues the parallel reader's pieces: handed over one by one, each would wait for the
        // reader's thread to wake. It gets each buffer back when the reader is done with it.
        let queued = match inflating {
            Inflating::Parallel(_) => PARTS_QUEUED,
            Inflating::Alone(_) => 0,
        };
        let (filled_tx, filled) = mpsc::sync_channel(queued);
        let (recycle, recycle_rx) = mpsc::sync_channel(RECYCLED);
        // Named for profilers. A thread that cannot start drops the channel's sender, and the
        // first `next` reports it.
        let _ = std::thread::Builder::new()
            .name("gunzip".into())
            .spawn(move || inflate(inflating, cap, window, &filled_tx, &recycle_rx));
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
            start: filled.start,
            len: filled.len,
            home: self.recycle.clone(),
        };
        if self.inflated > self.cap {
            return Err(InflateError::Bomb(self.cap));
        }
        Ok((inflated, filled.last))
    }
}

/// The thread: hands the reader inflated bytes until the input ends, fails, passes the cap,
/// or the reader is gone.
fn inflate(
    inflating: Inflating,
    cap: u64,
    window: usize,
    filled: &SyncSender<io::Result<Part>>,
    recycle: &Receiver<Vec<u8>>,
) {
    match inflating {
        Inflating::Parallel(p) => hand_parts(p, cap, filled, recycle),
        Inflating::Alone(dec) => fill_windows(dec, cap, window, filled, recycle),
    }
}

/// Hands over the parallel reader's pieces as they come, each in the buffer it was rebuilt
/// in: no copy, and the reader gets bytes a piece at a time, not a window at a time.
fn hand_parts(
    mut p: Box<ParallelGunzip>,
    cap: u64,
    filled: &SyncSender<io::Result<Part>>,
    recycle: &Receiver<Vec<u8>>,
) {
    let mut total = 0u64;
    loop {
        while let Ok(buf) = recycle.try_recv() {
            p.give_back(buf);
        }
        let filling = span(Kind::Fill, 0);
        let result = p.next_part();
        drop(filling);
        if let Ok(f) = &result {
            if f.len == 0 && !f.last {
                continue;
            }
            total += f.len as u64;
        }
        let stop = !matches!(&result, Ok(f) if !f.last) || total > cap;
        if !hand(filled, result) || stop {
            return;
        }
    }
}

/// Fills window-sized buffers from `flate2`.
fn fill_windows(
    dec: Box<dyn Read + Send>,
    cap: u64,
    window: usize,
    filled: &SyncSender<io::Result<Part>>,
    recycle: &Receiver<Vec<u8>>,
) {
    let mut dec = dec.take(cap.saturating_add(1));
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
        let result = result.map(|len| Part {
            last: len < window,
            buf,
            start: 0,
            len,
        });
        let stop = !matches!(&result, Ok(f) if !f.last);
        if !hand(filled, result) || stop {
            return;
        }
    }
}

/// Hands a buffer (or the error) to the reader when it asks; `false` when it is gone.
fn hand(filled: &SyncSender<io::Result<Part>>, result: io::Result<Part>) -> bool {
    let _handing = span(Kind::Hand, 0);
    filled.send(result).is_ok()
}

/// Reads into `out` until it is full or the input ends; the number of bytes read.
pub(crate) fn fill(src: &mut impl Read, out: &mut [u8]) -> io::Result<usize> {
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
        let mut gz =
            GzipStream::spawn(File::open(f.path()).unwrap(), u64::MAX, window, Cores::Auto);
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
        let mut gz =
            GzipStream::spawn(File::open(f.path()).unwrap(), 300_000, 100_000, Cores::Auto);
        let err = (0..20).find_map(|_| gz.next().err());
        assert!(matches!(err, Some(InflateError::Bomb(300_000))), "{err:?}");

        let mut bytes = std::fs::read(f.path()).unwrap();
        let mid = bytes.len() / 2;
        bytes.truncate(mid);
        let cut = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(cut.path(), &bytes).unwrap();
        let mut gz = GzipStream::spawn(
            File::open(cut.path()).unwrap(),
            u64::MAX,
            100_000,
            Cores::Auto,
        );
        let err = (0..100).find_map(|_| gz.next().err());
        assert!(matches!(err, Some(InflateError::Corrupt(_))), "{err:?}");
    }

    /// Lines of JSON with numbers that vary, which level 6 codes in many dynamic blocks.
    fn lines(n: u64) -> Vec<u8> {
        let mut x = 12345u64;
        let mut out = Vec::new();
        for i in 0..n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            writeln!(
                out,
                "{{\"ts\": {}, \"dur\": {}, \"id\": {i}}},",
                x >> 40,
                x >> 54
            )
            .unwrap();
        }
        out
    }

    fn gzip6(bytes: &[u8]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let mut gz = flate2::write::GzEncoder::new(&mut f, flate2::Compression::default());
        gz.write_all(bytes).unwrap();
        gz.finish().unwrap();
        f
    }

    const PARALLEL: Cores = Cores::Given {
        threads: 3,
        chunk: 16 << 10,
    };

    #[test]
    fn the_parallel_readers_pieces_come_out_whole_and_in_order() {
        let input = lines(100_000);
        let f = gzip6(&input);
        let mut gz = GzipStream::spawn(File::open(f.path()).unwrap(), u64::MAX, 1 << 20, PARALLEL);
        let (mut out, mut parts) = (Vec::new(), 0);
        loop {
            let (buf, last) = gz.next().unwrap();
            out.extend_from_slice(&buf);
            parts += 1;
            if last {
                break;
            }
        }
        assert!(out == input);
        // Each a piece of a chunk or more, far smaller than the 1 MB window asked for.
        assert!(
            parts > input.len() >> 19,
            "{parts} parts of {} bytes",
            input.len()
        );
    }

    #[test]
    fn the_parallel_reader_stops_at_the_cap() {
        let f = gzip6(&lines(100_000));
        let mut gz = GzipStream::spawn(File::open(f.path()).unwrap(), 300_000, 1 << 20, PARALLEL);
        let err = (0..100).find_map(|_| gz.next().err());
        assert!(matches!(err, Some(InflateError::Bomb(300_000))), "{err:?}");
    }
}
