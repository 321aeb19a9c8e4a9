//! The parallel gzip reader (`llmprof_ingest::gunzip`) against `flate2` alone: a gzip file made
//! from the input is read both ways, and the two must give the same bytes or the same error (an
//! assertion, so a difference is a finding). Chunks of a few bytes to a few kilobytes put the
//! reader's speculative paths (blocks found falsely, chunks with no block, pieces that run past
//! the chunks after them, the hand-over to `flate2`) to work on inputs this small.
//!
//! The input's first byte picks how the file is made from the rest, the worker count and the
//! chunk size:
//! - the rest as the file, whatever it holds;
//! - the rest gzipped at a level from the second byte (valid streams of every block type);
//! - the same with one byte of the stream, picked by the second byte, flipped;
//! - the rest as a deflate stream between a gzip header and the trailer of its `flate2`
//!   reading (the decoder on arbitrary bits).
#![no_main]

mod scratch;

use std::io::{Read, Write};

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [mode, pick, rest @ ..] = data else {
        return;
    };
    let Some(bytes) = gzip_file(mode % 4, *pick, rest) else {
        return;
    };
    let Ok(file) = tempfile::Builder::new().suffix(".gz").tempfile_in(scratch::dir()) else {
        return;
    };
    if std::fs::write(file.path(), &bytes).is_err() {
        return;
    }
    let threads = 1 + usize::from(mode / 4 % 3);
    let chunk = 8u64 << (mode / 12 % 10);
    let (parallel, alone) = llmprof_ingest::gunzip::inflate_both_ways(file.path(), threads, chunk);
    assert!(
        parallel == alone,
        "{threads} workers, chunks of {chunk} bytes: {:?} against flate2's {:?}",
        parallel.as_ref().map(Vec::len),
        alone.as_ref().map(Vec::len)
    );
});

fn gzip_file(how: u8, pick: u8, rest: &[u8]) -> Option<Vec<u8>> {
    match how {
        0 => Some(rest.to_vec()),
        1 | 2 => {
            let level = flate2::Compression::new(u32::from(pick % 10));
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), level);
            gz.write_all(rest).ok()?;
            let mut bytes = gz.finish().ok()?;
            if how == 2 {
                let at = usize::from(pick) * bytes.len() / 256;
                bytes[at] ^= 1 << (pick % 8);
            }
            Some(bytes)
        }
        _ => {
            // A header with no name, the stream, and the trailer its inflated bytes would have.
            let mut bytes = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
            bytes.extend_from_slice(rest);
            let mut out = Vec::new();
            let mut dec = flate2::read::DeflateDecoder::new(rest);
            let _ = dec.read_to_end(&mut out);
            let mut crc = flate2::Crc::new();
            crc.update(&out);
            bytes.extend_from_slice(&crc.sum().to_le_bytes());
            bytes.extend_from_slice(&(out.len() as u32).to_le_bytes());
            Some(bytes)
        }
    }
}
