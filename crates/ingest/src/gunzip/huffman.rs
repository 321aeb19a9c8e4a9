//! Canonical Huffman decode tables, checked as zlib checks them.
//!
//! A table is looked up with the next `primary` bits of the stream. Codes longer than that go
//! through a second-level table of `longest - primary` bits under their first `primary` bits.
//! An entry packs what a decoder needs: the symbol's value, its kind, its extra bits, its code
//! length, and the bits to consume for both (so a length or distance is read with one shift).

use super::bits::Bits;

/// Literal byte in `value`.
pub(super) const LITERAL: u32 = 0;
/// Length or distance: a base in `value`, plus `extra` bits.
pub(super) const BASE: u32 = 1;
/// The kinds from here on are rare: [`Table::lookup`] takes a branch for them.
pub(super) const END_OF_BLOCK: u32 = 2;
/// Second-level table at `value`, indexed by `extra` more bits.
const SUBTABLE: u32 = 3;
/// No code here (an incomplete code), or a symbol deflate reserves (286, 287; 30, 31).
const INVALID: u32 = 4;

/// An entry without its code length: `value << 16 | kind << 13 | extra << 4`. Bits 0–3 hold
/// the code length and bits 8–12 the code length plus `extra` ([`with_len`]).
const fn entry(value: u32, kind: u32, extra: u32) -> u32 {
    value << 16 | kind << 13 | extra << 4 | extra << 8
}

/// `e` with a code of `len` bits.
const fn with_len(e: u32, len: u32) -> u32 {
    e + (len | len << 8)
}

#[inline(always)]
pub(super) fn kind(e: u32) -> u32 {
    e >> 13 & 7
}
#[inline(always)]
pub(super) fn value(e: u32) -> u32 {
    e >> 16
}
#[inline(always)]
fn extra(e: u32) -> u32 {
    e >> 4 & 0xf
}
#[inline(always)]
fn code_len(e: u32) -> u32 {
    e & 0xf
}
/// The code's bits and its extra bits.
#[inline(always)]
fn total_len(e: u32) -> u32 {
    e >> 8 & 0x1f
}

const LENGTH_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LENGTH_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
const DIST_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];

/// What a code's symbols decode to.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Alphabet {
    /// The code-length code of a dynamic block's header: symbols 0..=18.
    CodeLengths,
    LitLen,
    Distance,
}

impl Alphabet {
    fn symbol(self, s: usize) -> u32 {
        match self {
            Alphabet::CodeLengths => entry(s as u32, LITERAL, 0),
            Alphabet::LitLen => match s {
                0..=255 => entry(s as u32, LITERAL, 0),
                256 => entry(0, END_OF_BLOCK, 0),
                257..=285 => {
                    let i = s - 257;
                    entry(u32::from(LENGTH_BASE[i]), BASE, u32::from(LENGTH_EXTRA[i]))
                }
                _ => entry(0, INVALID, 0),
            },
            Alphabet::Distance => match s {
                0..=29 => entry(u32::from(DIST_BASE[s]), BASE, u32::from(DIST_EXTRA[s])),
                _ => entry(0, INVALID, 0),
            },
        }
    }
}

/// Why a code was refused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum CodeError {
    OverSubscribed,
    Incomplete,
}

/// A decode table.
pub(super) struct Table {
    entries: Vec<u32>,
    primary: u32,
}

impl Table {
    pub(super) fn new(primary: u32) -> Self {
        Table {
            entries: Vec::with_capacity(1 << (primary + 1)),
            primary,
        }
    }

    /// Builds the table for the code with these lengths (0: the symbol is unused). As in zlib,
    /// a code must be complete, except a literal/length or distance code of one symbol (one
    /// code of one bit) and a distance code with no symbols at all.
    pub(super) fn build(&mut self, lens: &[u8], alphabet: Alphabet) -> Result<(), CodeError> {
        let mut count = [0u16; 16];
        for &l in lens {
            count[usize::from(l)] += 1;
        }
        count[0] = 0;
        let longest = (1..16).rev().find(|&l| count[l] > 0).unwrap_or(0);
        let mut left: i32 = 1;
        for &c in &count[1..] {
            left = (left << 1) - i32::from(c);
            if left < 0 {
                return Err(CodeError::OverSubscribed);
            }
        }
        let allowed = match alphabet {
            Alphabet::CodeLengths => left == 0,
            Alphabet::LitLen => left == 0 || longest == 1,
            Alphabet::Distance => left == 0 || longest <= 1,
        };
        if !allowed {
            return Err(CodeError::Incomplete);
        }
        let primary = self.primary;
        let sub_bits = (longest as u32).saturating_sub(primary);
        self.entries.clear();
        self.entries.resize(1 << primary, entry(0, INVALID, 0));
        // The first code of each length, as the canonical construction defines it.
        let mut next = [0u32; 16];
        let mut code = 0u32;
        for l in 1..16 {
            code = (code + u32::from(count[l - 1])) << 1;
            next[l] = code;
        }
        for (s, &l) in lens.iter().enumerate() {
            if l == 0 {
                continue;
            }
            let l = u32::from(l);
            let rev = next[l as usize].reverse_bits() >> (32 - l);
            next[l as usize] += 1;
            let e = alphabet.symbol(s);
            if l <= primary {
                for k in (rev as usize..1 << primary).step_by(1 << l) {
                    self.entries[k] = with_len(e, l);
                }
            } else {
                let slot = (rev & ((1 << primary) - 1)) as usize;
                if kind(self.entries[slot]) != SUBTABLE {
                    let base = self.entries.len() as u32;
                    self.entries[slot] = with_len(entry(base, SUBTABLE, sub_bits), primary);
                    self.entries
                        .resize(self.entries.len() + (1 << sub_bits), entry(0, INVALID, 0));
                }
                let base = value(self.entries[slot]) as usize;
                let step = 1 << (l - primary);
                for k in ((rev >> primary) as usize..1 << sub_bits).step_by(step) {
                    self.entries[base + k] = with_len(e, l - primary);
                }
            }
        }
        Ok(())
    }

    /// Decodes one symbol of no extra bits from the buffer, which must hold at least 15 valid
    /// bits; `None` for a code the table does not have.
    #[inline(always)]
    pub(super) fn decode(&self, bits: &mut Bits) -> Option<u32> {
        let e = self.lookup(bits)?;
        bits.consume(code_len(e));
        Some(e)
    }

    /// The entry of the buffer's next code, for [`take`] to consume, `None` for a code the
    /// table does not have. Only a code longer than the first level's consumes bits here (the
    /// first level's), and only the rare kinds take the branch that looks further.
    #[inline(always)]
    pub(super) fn lookup(&self, bits: &mut Bits) -> Option<u32> {
        let mask = (1u64 << self.primary) - 1;
        let e = self.entries[(bits.peek() & mask) as usize];
        if kind(e) <= BASE {
            return Some(e);
        }
        if kind(e) != SUBTABLE {
            // The end of a block, or no code at all.
            return (kind(e) != INVALID).then_some(e);
        }
        bits.consume(self.primary);
        let sub = (bits.peek() & ((1u64 << extra(e)) - 1)) as usize;
        let e = *self.entries.get(value(e) as usize + sub)?;
        (kind(e) != INVALID).then_some(e)
    }
}

/// Consumes entry `e`'s code and extra bits, and gives its value plus the extra bits: a
/// literal's byte, a length or a distance.
#[inline(always)]
pub(super) fn take(bits: &mut Bits, e: u32) -> u32 {
    let saved = bits.peek();
    bits.consume(total_len(e));
    value(e) + ((saved >> code_len(e)) as u32 & !(u32::MAX << extra(e)))
}

/// The fixed literal/length and distance code lengths of block type 1.
pub(super) fn fixed_lengths() -> ([u8; 288], [u8; 32]) {
    let mut litlen = [8u8; 288];
    litlen[144..256].fill(9);
    litlen[256..280].fill(7);
    (litlen, [5u8; 32])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_checked_as_zlib_checks_them() {
        let mut t = Table::new(7);
        assert_eq!(
            t.build(&[1, 1, 1], Alphabet::CodeLengths),
            Err(CodeError::OverSubscribed)
        );
        assert_eq!(
            t.build(&[1, 2], Alphabet::CodeLengths),
            Err(CodeError::Incomplete)
        );
        assert_eq!(t.build(&[0, 1], Alphabet::Distance), Ok(()));
        assert_eq!(t.build(&[0, 0], Alphabet::Distance), Ok(()));
        assert_eq!(
            t.build(&[2, 0, 2], Alphabet::LitLen),
            Err(CodeError::Incomplete)
        );
        assert_eq!(t.build(&[1, 2, 2], Alphabet::CodeLengths), Ok(()));
    }

    #[test]
    fn long_codes_decode_through_a_second_level() {
        // Symbols 0..=15 with lengths 1, 2, ..., 15, 15: a complete code.
        let mut lens: Vec<u8> = (1..=15).collect();
        lens.push(15);
        let mut t = Table::new(4);
        t.build(&lens, Alphabet::CodeLengths).unwrap();
        // Symbol s (s < 15) has the code of s ones and a zero; its bits go in reversed.
        for s in 0..16u32 {
            let len = (s + 1).min(15);
            let code: u32 = if s < 15 {
                ((1 << s) - 1) << 1
            } else {
                (1 << 15) - 1
            };
            let stream = (code.reverse_bits() >> (32 - len)).to_le_bytes();
            let mut data = stream.to_vec();
            data.extend_from_slice(&[0; 8]);
            let mut bits = Bits::at(&data, 0);
            let e = t.decode(&mut bits).expect("a valid code");
            assert_eq!(
                (value(e), bits.position()),
                (s, u64::from(len)),
                "symbol {s}"
            );
        }
    }
}
