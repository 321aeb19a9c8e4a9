//! Inflating deflate blocks into 16-bit symbols, and the copies that made them.
//!
//! A symbol below 256 is a byte. The output starts with [`WINDOW`] markers, symbols
//! `256 + i`, standing for byte `i` of the 32 KB before the start, which a chunk decoded
//! speculatively does not know yet. Back-references into that window copy markers. The
//! markers of the last 32 KB tell the window after the chunk once the one before is known;
//! the chunk's bytes are then rebuilt from its copies ([`super::replay`]).

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

/// Inflated symbols, the last of them at `buf[..len]`: the window's markers, then the
/// stream's; and what made them all, `ops[..op]` and `literals[..literal]`. The room after each
/// is zeroed once, when it grows, not each time the buffer is reused.
#[derive(Debug, Default)]
pub(super) struct Symbols {
    buf: Vec<u16>,
    len: usize,
    /// Symbols slid off the buffer's front ([`SLIDE_AT`]), the window's markers first.
    slid: usize,
    /// The back-references, in order, each with the literals before it ([`op`]).
    pub(super) ops: Vec<u32>,
    pub(super) op: usize,
    /// The literals, in order: the bytes no back-reference wrote; the first `counted` of them
    /// are counted by ops.
    pub(super) literals: Vec<u8>,
    pub(super) literal: usize,
    counted: usize,
}

/// Symbols the buffer holds before it slides. A back-reference reaches back [`WINDOW`]
/// symbols at most, and the ops and literals keep the rest, so the buffer keeps only the last
/// [`WINDOW`]: half a megabyte a worker, instead of a whole chunk's symbols.
const SLIDE_AT: usize = 256 << 10;

/// The most literals an op counts before its back-reference; more take ops of their own.
const MAX_RUN: usize = 127;

/// An op: `run` literals, then a back-reference of `len` symbols from `dist` back (none where
/// `len` is 0), packed as `run << 25 | dist << 9 | len`.
pub(super) const fn op(run: usize, dist: u32, len: u32) -> u32 {
    (run as u32) << 25 | dist << 9 | len
}

/// The parts of an op: literals, then how far back and how many to copy.
pub(super) fn op_parts(op: u32) -> (usize, usize, usize) {
    (
        (op >> 25) as usize,
        (op >> 9 & 0xffff) as usize,
        (op & 0x1ff) as usize,
    )
}

impl Symbols {
    /// Starts again with the window's markers alone.
    pub(super) fn start(&mut self) {
        self.len = 0;
        self.slid = 0;
        self.op = 0;
        self.literal = 0;
        self.counted = 0;
        self.room(WINDOW);
        for (s, i) in self.buf.iter_mut().zip(0..WINDOW as u16) {
            *s = 256 + i;
        }
        self.len = WINDOW;
    }

    /// How many symbols were inflated after the window's markers.
    pub(super) fn inflated(&self) -> usize {
        (self.slid + self.len).saturating_sub(WINDOW)
    }

    /// The last [`WINDOW`] symbols inflated, or all of them when fewer.
    pub(super) fn tail(&self) -> &[u16] {
        let n = self.inflated().min(WINDOW);
        &self.buf[self.len - n..self.len]
    }

    /// Makes room for `n` more symbols, sliding the last [`WINDOW`] to the front when the
    /// buffer holds [`SLIDE_AT`].
    fn room(&mut self, n: usize) {
        if self.len + n > SLIDE_AT && self.len > WINDOW {
            let from = self.len - WINDOW;
            self.buf.copy_within(from..self.len, 0);
            self.slid += from;
            self.len = WINDOW;
        }
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
            if out.slid + out.len >= full {
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
        // Literals not yet counted by an op: a stored block's, before this block.
        let mut run = out.literal - out.counted;
        while run >= MAX_RUN {
            put(&mut out.ops, out.op, op(MAX_RUN, 0, 0));
            (out.op, run) = (out.op + 1, run - MAX_RUN);
        }
        loop {
            // Room for the longest copy, one op and one literal, made ahead so that the loop
            // below writes by index, its bounds in registers.
            out.room(ROOM);
            grow(&mut out.ops, out.op + 1);
            grow(&mut out.literals, out.literal + 1);
            if out.slid + out.len > limit {
                return Err(Bad::TooLarge);
            }
            let (buf, ops, literals) = (&mut out.buf[..], &mut out.ops[..], &mut out.literals[..]);
            let (mut pos, mut op_at, mut literal) = (out.len, out.op, out.literal);
            let end = loop {
                if pos + ROOM > buf.len() || op_at >= ops.len() || literal >= literals.len() {
                    break false;
                }
                // 56 bits cover the longest length with its distance: 15 + 5 + 15 + 13.
                if !bits.refill() {
                    return Err(Bad::Truncated);
                }
                let e = self.litlen.lookup(bits).ok_or(Bad::Code)?;
                match huffman::kind(e) {
                    huffman::LITERAL => {
                        let byte = huffman::take(bits, e);
                        buf[pos] = byte as u16;
                        literals[literal] = byte as u8;
                        literal += 1;
                        pos += 1;
                        run += 1;
                        if run == MAX_RUN {
                            ops[op_at] = op(MAX_RUN, 0, 0);
                            (op_at, run) = (op_at + 1, 0);
                        }
                    }
                    huffman::BASE => {
                        let len = huffman::take(bits, e);
                        let d = self.dist.lookup(bits).ok_or(Bad::Code)?;
                        let dist = huffman::take(bits, d);
                        copy(buf, pos, dist as usize, len as usize)?;
                        ops[op_at] = op(run, dist, len);
                        (op_at, run) = (op_at + 1, 0);
                        pos += len as usize;
                    }
                    _ => {
                        huffman::take(bits, e);
                        break true;
                    }
                }
            };
            (out.len, out.op, out.literal) = (pos, op_at, literal);
            if end {
                out.counted = literal - run;
                return Ok(());
            }
        }
    }
}

/// Makes `to` at least `n` long, in steps (zeroed once, as the buffer is reused).
#[inline(always)]
fn grow<T: Copy + Default>(to: &mut Vec<T>, n: usize) {
    if to.len() < n {
        to.resize(n + n.max(1 << 12), T::default());
    }
}

/// Writes `v` at `at` in `to`, which grows by [`grow`]'s steps when `at` is at its end.
#[inline(always)]
fn put<T: Copy + Default>(to: &mut Vec<T>, at: usize, v: T) {
    grow(to, at + 1);
    to[at] = v;
}

/// The most a copy moves at a time, where its source lies that far back or farther.
pub(super) const STEP: usize = 16;

/// What a copy may write past its end, at most: a short copy writes two steps whatever its
/// length (most are 32 symbols or shorter), a longer one up to a step past its end.
pub(super) const SPILL: usize = 2 * STEP;

/// Room kept past the output's end: the longest copy, and what a copy may write past it.
const ROOM: usize = 258 + STEP;

/// Writes `len` symbols from `dist` back at `pos`; the copy may overlap what it writes, and may
/// write up to [`SPILL`] symbols past its end.
#[inline(always)]
fn copy(out: &mut [u16], pos: usize, dist: usize, len: usize) -> Result<(), Bad> {
    let src = pos.checked_sub(dist).ok_or(Bad::Distance)?;
    copy_back(out, src, pos, len).ok_or(Bad::Distance)
}

/// Copies `len` items from `src` to `pos` (after it), as deflate's back-references overlap:
/// [`STEP`] at a time where the source lies that far back or farther (two steps at least, as
/// a branch costs more than a step), 8 at a time where it lies 8 back, else one at a time (a
/// short period repeated). May write up to [`SPILL`] past the end; `None` where that is past
/// `out`'s end.
#[inline(always)]
pub(super) fn copy_back<T: Copy>(out: &mut [T], src: usize, pos: usize, len: usize) -> Option<()> {
    match pos.checked_sub(src)? {
        STEP.. => {
            copy_steps::<T, STEP>(out, src, pos, SPILL)?;
            if len > SPILL {
                copy_steps::<T, STEP>(out, src + SPILL, pos + SPILL, len - SPILL)?;
            }
            Some(())
        }
        8.. => copy_steps::<T, 8>(out, src, pos, len),
        _ => {
            for k in 0..len {
                *out.get_mut(pos + k)? = *out.get(src + k)?;
            }
            Some(())
        }
    }
}

/// Copies `N` items at a time, which never overlap when `src` is at least `N` before `pos`.
#[inline(always)]
fn copy_steps<T: Copy, const N: usize>(
    out: &mut [T],
    src: usize,
    pos: usize,
    len: usize,
) -> Option<()> {
    let mut k = 0;
    while k < len {
        let step: [T; N] = out.get(src + k..src + k + N)?.try_into().ok()?;
        out.get_mut(pos + k..pos + k + N)?.copy_from_slice(&step);
        k += N;
    }
    Some(())
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
        let byte = bits.take(8).ok_or(Bad::Truncated)?;
        out.buf[out.len] = byte as u16;
        put(&mut out.literals, out.literal, byte as u8);
        out.literal += 1;
        out.len += 1;
    }
    Ok(())
}
