//! An inflated piece kept as what rebuilds its bytes: its back-references and the bytes they
//! did not write, plus the symbols of its last 32 KB.
//!
//! Inflated speculatively, a piece's symbols are mostly markers for the unknown window before
//! it (92% of them in a level 9 trace). Once that window is known, copying the piece's
//! back-references again, byte for byte, rebuilds it in half the time a table lookup per symbol
//! takes on a level 9 stream (70% on a `gzip -1` one), and the piece waits in a sixth to an
//! eighth of the room its 16-bit symbols took (PERFORMANCE.md, session 26).

use super::decode::{copy_back, op_parts, Symbols, SPILL, STEP, WINDOW};

/// A piece, as [`replay`] rebuilds it.
#[derive(Debug, Default)]
pub(super) struct Tokens {
    /// The piece's length in bytes.
    pub(super) len: usize,
    /// Its back-references, each with the literals before it, as [`Symbols::ops`] holds them.
    ops: Vec<u32>,
    /// The bytes no back-reference wrote, in order, and room for a step past them.
    literals: Vec<u8>,
    /// Its last [`WINDOW`] symbols (all of them in a shorter piece): the window after it.
    pub(super) tail: Vec<u16>,
}

impl Tokens {
    /// Copies the piece `symbols` holds into this one's buffers, which stay about the size of
    /// the pieces they hold (the decode's own buffers grow to the largest).
    pub(super) fn take(&mut self, symbols: &Symbols) {
        self.ops.clear();
        self.ops.extend_from_slice(&symbols.ops[..symbols.op]);
        self.literals.clear();
        self.literals
            .extend_from_slice(&symbols.literals[..symbols.literal]);
        self.literals.extend_from_slice(&[0; STEP]);
        self.len = symbols.inflated();
        self.tail.clear();
        self.tail.extend_from_slice(symbols.tail());
    }
}

/// The piece's bytes at `out[WINDOW..WINDOW + tokens.len]`, after the window before it at
/// `out[..WINDOW]`, of which the last `known` bytes are the stream's (fewer at its start).
/// `None` for a back-reference to before the stream's start. `out` keeps its allocation.
pub(super) fn replay(
    tokens: &Tokens,
    window: &[u8; WINDOW],
    known: usize,
    out: &mut Vec<u8>,
) -> Option<()> {
    let end = WINDOW + tokens.len;
    // Room for a copy to run past the end.
    if out.len() < end + SPILL {
        out.resize(end + SPILL, 0);
    }
    out[..WINDOW].copy_from_slice(window);
    let floor = WINDOW - known.min(WINDOW);
    let (mut at, mut lit) = (WINDOW, 0);
    let literals = &tokens.literals;
    for &op in &tokens.ops {
        let (run, dist, len) = op_parts(op);
        copy_literals(out, at, literals, lit, run)?;
        (at, lit) = (at + run, lit + run);
        if len > 0 {
            let src = at.checked_sub(dist).filter(|&s| s >= floor)?;
            copy_back(out, src, at, len)?;
            at += len;
        }
    }
    let run = end.checked_sub(at)?;
    copy_literals(out, at, literals, lit, run)?;
    (lit + run + STEP == literals.len()).then_some(())
}

/// Copies `run` literals from `literals[lit..]` to `out[at..]`, a step at a time, one at least:
/// both have a step's room past the end.
#[inline(always)]
fn copy_literals(out: &mut [u8], at: usize, literals: &[u8], lit: usize, run: usize) -> Option<()> {
    // The first step whatever the run (most runs are empty): a branch saved, for bytes past
    // the run that what comes next writes over.
    let step: [u8; STEP] = literals.get(lit..lit + STEP)?.try_into().ok()?;
    out.get_mut(at..at + STEP)?.copy_from_slice(&step);
    let mut k = STEP;
    while k < run {
        let step: [u8; STEP] = literals.get(lit + k..lit + k + STEP)?.try_into().ok()?;
        out.get_mut(at + k..at + k + STEP)?.copy_from_slice(&step);
        k += STEP;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::super::decode::op;
    use super::*;

    /// "ab", then 4 bytes from 3 back: the window's last byte, and what the copy writes.
    fn tokens() -> Tokens {
        let mut literals = b"ab".to_vec();
        literals.extend_from_slice(&[0; STEP]);
        Tokens {
            len: 6,
            ops: vec![op(2, 3, 4)],
            literals,
            tail: Vec::new(),
        }
    }

    #[test]
    fn copies_reach_into_the_known_window_and_no_further() {
        let mut window = Box::new([0u8; WINDOW]);
        window[WINDOW - 1] = b'z';
        let mut out = Vec::new();
        assert_eq!(replay(&tokens(), &window, 1, &mut out), Some(()));
        assert_eq!(&out[WINDOW..WINDOW + 6], b"abzabz");
        // At the stream's start, nothing comes before it.
        assert_eq!(replay(&tokens(), &window, 0, &mut out), None);
    }

    /// The two halves of a worker's inflate on one thread, for PERFORMANCE.md's figures: a gzip
    /// file inflated from its start in pieces of about 640 KB, each decoded into symbols and
    /// its back-references, then rebuilt byte for byte (from a window of zeros), best of five
    /// passes: `GZ=file.gz cargo test --release -p llmprof-ingest decode_rate -- --ignored
    /// --nocapture`.
    #[test]
    #[ignore]
    fn decode_rate() {
        use super::super::bits::Bits;
        use super::super::decode::{Inflater, Stop};
        use std::time::{Duration, Instant};
        let path = std::env::var("GZ").expect("GZ: a .gz file");
        let data = std::fs::read(&path).unwrap();
        let head = super::super::header_len(&data).expect("a plain gzip header");
        let (mut inf, mut symbols, mut tokens) =
            (Inflater::new(), Symbols::default(), Tokens::default());
        let (window, mut out) = (Box::new([0u8; WINDOW]), Vec::new());
        let mut best = (Duration::MAX, Duration::MAX, 0);
        for _ in 0..5 {
            let mut bits = Bits::at(&data, head as u64 * 8);
            let (mut decode, mut rebuild, mut bytes) = (Duration::ZERO, Duration::ZERO, 0);
            loop {
                let start = Instant::now();
                symbols.start();
                let stop = inf.run(
                    &mut bits,
                    &mut symbols,
                    u64::MAX,
                    WINDOW + (640 << 10),
                    usize::MAX,
                );
                tokens.take(&symbols);
                let decoded = Instant::now();
                replay(&tokens, &window, WINDOW, &mut out).unwrap();
                (decode, rebuild) = (decode + (decoded - start), rebuild + decoded.elapsed());
                bytes += tokens.len;
                if stop.unwrap() == Stop::Final {
                    break;
                }
            }
            best = (best.0.min(decode), best.1.min(rebuild), bytes);
        }
        let mbs = |d: Duration| best.2 as f64 / d.as_secs_f64() / 1e6;
        eprintln!(
            "{} bytes: decode {:.3} s ({:.0} MB/s), rebuild {:.3} s ({:.0} MB/s)",
            best.2,
            best.0.as_secs_f64(),
            mbs(best.0),
            best.1.as_secs_f64(),
            mbs(best.1)
        );
    }

    #[test]
    fn literals_and_ops_that_disagree_are_refused() {
        let window = Box::new([0u8; WINDOW]);
        let mut out = Vec::new();
        let mut short = tokens();
        short.len = 5;
        assert_eq!(replay(&short, &window, WINDOW, &mut out), None);
        let mut long = tokens();
        long.len = 7;
        assert_eq!(replay(&long, &window, WINDOW, &mut out), None);
    }
}
