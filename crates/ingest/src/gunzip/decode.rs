//! Inflating deflate blocks into 16-bit symbols.
//!
//! A symbol below 256 is a byte. The output starts with [`WINDOW`] markers, symbols
//! `256 + i`, standing for byte `i` of the 32 KB before the start, which a chunk decoded
//! speculatively does not know yet. Back-references into that window copy markers, which are
//! replaced once the bytes before are known; a chunk whose window is known is decoded the same
//! way and its markers replaced at once.

use super::bits::Bits;
use super::huffman::{self, Alphabet, Table};

/// Deflate's window: the farthest a back-reference reaches.
pub(super) const WINDOW: usize = 32 << 10;

/// Where inflating stopped, at a block boundary.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Stop {
    /// At or past the bit asked for.
    Boundary,
    /// After the stream's final block.
    Final,
    /// The output held as many symbols as asked for.
    Full,
}

/// Why the stream could not be inflated from where it was started.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Bad {
    /// A reserved block type, or more length or distance codes than deflate has.
    Header,
    /// A code-length, literal/length or distance code that is over-subscribed, incomplete or
    /// not in its table, or a repeat with nothing to repeat.
    Code,
    /// A back-reference farther than the output and its window.
    Distance,
    /// A stored block whose length and its complement disagree.
    Stored,
    /// The input ended inside a block.
    Truncated,
    /// More output than the limit asked for.
    TooLarge,
}

/// The order of the code-length code's lengths in a dynamic block's header.
const CODE_LENGTH_ORDER: [usize; 19] = [
    16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
];

/// The decode tables, reused from block to block.
pub(super) struct Inflater {
    code_lengths: Table,
    litlen: Table,
    dist: Table,
    lens: [u8; 320],
}

impl std::fmt::Debug for Inflater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Inflater")
    }
}

/// Inflated symbols, `buf[..len]`: the window's markers, then the stream's. The room after
/// them is zeroed once, when it grows, not each time the buffer is reused.
#[derive(Debug, Default)]
pub(super) struct Symbols {
    buf: Vec<u16>,
    len: usize,
}

impl Symbols {
    /// Starts again with the window's markers alone.
    pub(super) fn start(&mut self) {
        self.len = 0;
        self.room(WINDOW);
        for (s, i) in self.buf.iter_mut().zip(0..WINDOW as u16) {
            *s = 256 + i;
        }
        self.len = WINDOW;
    }

    /// The symbols after the window's markers.
    pub(super) fn inflated(&self) -> &[u16] {
        &self.buf[WINDOW.min(self.len)..self.len]
    }

    /// Makes room for `n` more symbols.
    fn room(&mut self, n: usize) {
        if self.buf.len() < self.len + n {
            // In steps of 64K symbols: a reused buffer ends near the size its chunks need.
            let grown = (self.len + n).next_multiple_of(1 << 16);
            self.buf.resize(grown, 0);
        }
    }
}

impl Inflater {
    pub(super) fn new() -> Self {
        Inflater {
            code_lengths: Table::new(7),
            litlen: Table::new(11),
            dist: Table::new(8),
            lens: [0; 320],
        }
    }

    /// Inflates blocks from `bits` into `out` (which holds the window markers, or more) and
    /// stops at the first block boundary at or past bit `stop`, after the final block, or at
    /// the first boundary where `out` holds `full` symbols; `limit` caps `out` inside a block.
    pub(super) fn run(
        &mut self,
        bits: &mut Bits,
        out: &mut Symbols,
        stop: u64,
        full: usize,
        limit: usize,
    ) -> Result<Stop, Bad> {
        loop {
            if bits.position() >= stop {
                return Ok(Stop::Boundary);
            }
            if out.len >= full {
                return Ok(Stop::Full);
            }
            let last = bits.take(1).ok_or(Bad::Truncated)?;
            match bits.take(2).ok_or(Bad::Truncated)? {
                0 => stored(bits, out)?,
                1 => {
                    let (litlen, dist) = huffman::fixed_lengths();
                    self.litlen
                        .build(&litlen, Alphabet::LitLen)
                        .map_err(|_| Bad::Code)?;
                    self.dist
                        .build(&dist, Alphabet::Distance)
                        .map_err(|_| Bad::Code)?;
                    self.block(bits, out, limit)?;
                }
                2 => {
                    self.read_dynamic(bits)?;
                    self.block(bits, out, limit)?;
                }
                _ => return Err(Bad::Header),
            }
            if bits.overran() {
                return Err(Bad::Truncated);
            }
            if last == 1 {
                return Ok(Stop::Final);
            }
        }
    }

    /// Reads a dynamic block's code lengths (after its three header bits) into the tables.
    pub(super) fn read_dynamic(&mut self, bits: &mut Bits) -> Result<(), Bad> {
        let take = |bits: &mut Bits, n| bits.take(n).map(|v| v as usize).ok_or(Bad::Truncated);
        let hlit = take(bits, 5)? + 257;
        let hdist = take(bits, 5)? + 1;
        let hclen = take(bits, 4)? + 4;
        if hlit > 286 || hdist > 30 {
            return Err(Bad::Header);
        }
        let mut pre = [0u8; 19];
        for &i in &CODE_LENGTH_ORDER[..hclen] {
            pre[i] = take(bits, 3)? as u8;
        }
        self.code_lengths
            .build(&pre, Alphabet::CodeLengths)
            .map_err(|_| Bad::Code)?;
        let n = hlit + hdist;
        let mut i = 0;
        while i < n {
            if !bits.refill() {
                return Err(Bad::Truncated);
            }
            let sym = huffman::value(self.code_lengths.decode(bits).ok_or(Bad::Code)?);
            let (len, repeat) = match sym {
                0..=15 => (sym as u8, 1),
                16 => {
                    let prev = *self.lens[..i].last().ok_or(Bad::Code)?;
                    (prev, 3 + bits.take_buffered(2) as usize)
                }
                17 => (0, 3 + bits.take_buffered(3) as usize),
                _ => (0, 11 + bits.take_buffered(7) as usize),
            };
            if i + repeat > n {
                return Err(Bad::Code);
            }
            self.lens[i..i + repeat].fill(len);
            i += repeat;
        }
        if self.lens[256] == 0 {
            return Err(Bad::Code);
        }
        self.litlen
            .build(&self.lens[..hlit], Alphabet::LitLen)
            .map_err(|_| Bad::Code)?;
        self.dist
            .build(&self.lens[hlit..n], Alphabet::Distance)
            .map_err(|_| Bad::Code)
    }

    /// A Huffman-coded block's symbols, up to its end-of-block code.
    fn block(&self, bits: &mut Bits, out: &mut Symbols, limit: usize) -> Result<(), Bad> {
        // A local copy of the reader stays in registers.
        let mut local = *bits;
        let result = self.block_symbols(&mut local, out, limit);
        *bits = local;
        result
    }

    fn block_symbols(&self, bits: &mut Bits, out: &mut Symbols, limit: usize) -> Result<(), Bad> {
        // Written by index into room made ahead, as copies may run past their end.
        let mut pos = out.len;
        loop {
            if pos + ROOM > out.buf.len() {
                if pos > limit {
                    return Err(Bad::TooLarge);
                }
                out.len = pos;
                out.room(ROOM);
            }
            // 56 bits cover the longest length with its distance: 15 + 5 + 15 + 13.
            if !bits.refill() {
                return Err(Bad::Truncated);
            }
            let e = self.litlen.decode(bits).ok_or(Bad::Code)?;
            match huffman::kind(e) {
                huffman::LITERAL => {
                    out.buf[pos] = huffman::value(e) as u16;
                    pos += 1;
                }
                huffman::BASE => {
                    let len = huffman::value(e) + bits.take_buffered(huffman::extra(e));
                    let d = self.dist.decode(bits).ok_or(Bad::Code)?;
                    let dist = huffman::value(d) + bits.take_buffered(huffman::extra(d));
                    copy(&mut out.buf, pos, dist as usize, len as usize)?;
                    pos += len as usize;
                }
                _ => {
                    out.len = pos;
                    return Ok(());
                }
            }
        }
    }
}

/// Room kept past the output's end: the longest copy, and what a copy may write past it.
const ROOM: usize = 258 + 16;

/// Writes `len` symbols from `dist` back at `pos`; the copy may overlap what it writes, and may
/// write up to 16 symbols past its end.
#[inline(always)]
fn copy(out: &mut [u16], pos: usize, dist: usize, len: usize) -> Result<(), Bad> {
    let src = pos.checked_sub(dist).ok_or(Bad::Distance)?;
    if dist >= 16 {
        copy_steps::<16>(out, src, pos, len);
    } else if dist >= 8 {
        copy_steps::<8>(out, src, pos, len);
    } else {
        // Close copies repeat a short period: one symbol at a time.
        for k in 0..len {
            out[pos + k] = out[src + k];
        }
    }
    Ok(())
}

/// Copies `N` symbols at a time, which never overlap when `src` is at least `N` before `pos`.
#[inline(always)]
fn copy_steps<const N: usize>(out: &mut [u16], src: usize, pos: usize, len: usize) {
    let mut k = 0;
    while k < len {
        let step: [u16; N] = out[src + k..src + k + N].try_into().unwrap_or([0; N]);
        out[pos + k..pos + k + N].copy_from_slice(&step);
        k += N;
    }
}

/// A stored block: its length, the length's complement, then the bytes.
fn stored(bits: &mut Bits, out: &mut Symbols) -> Result<(), Bad> {
    bits.align();
    let len = bits.take(16).ok_or(Bad::Truncated)?;
    let nlen = bits.take(16).ok_or(Bad::Truncated)?;
    if len != !nlen & 0xffff {
        return Err(Bad::Stored);
    }
    out.room(len as usize);
    for _ in 0..len {
        out.buf[out.len] = bits.take(8).ok_or(Bad::Truncated)? as u16;
        out.len += 1;
    }
    Ok(())
}
