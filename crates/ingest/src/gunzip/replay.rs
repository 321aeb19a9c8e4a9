//! An inflated piece kept as what rebuilds its bytes: its back-references and the bytes they
//! did not write, plus the symbols of its last 32 KB.
//!
//! Inflated speculatively, a piece's symbols are mostly markers for the unknown window before
//! it (92% of them in a level 9 trace). Once that window is known, copying the piece's
//! back-references again, byte for byte, rebuilds it in half the time a table lookup per symbol
//! takes on a level 9 stream (70% on a `gzip -1` one), and the piece waits in a sixth to an
//! eighth of the room its 16-bit symbols took (README, Performance, session 26).

use super::decode::{copy_back, op_parts, Symbols, STEP, WINDOW};

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
    // Room for a copy's last step to run past the end.
    if out.len() < end + STEP {
        out.resize(end + STEP, 0);
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

/// Copies `run` literals from `literals[lit..]` to `out[at..]`, a step at a time: both have a
/// step's room past the end.
#[inline(always)]
fn copy_literals(out: &mut [u8], at: usize, literals: &[u8], lit: usize, run: usize) -> Option<()> {
    let mut k = 0;
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
