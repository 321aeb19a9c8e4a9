//! Finding where a dynamic deflate block starts, anywhere in a stream.
//!
//! Deflate marks no block boundaries: a block starts wherever the one before it ended, at any
//! bit. A non-final dynamic block's header is very particular, though: three fixed bits, two
//! counts in range, a code-length code that is a complete prefix code, and code lengths that
//! decode with it into complete literal/length and distance codes. A position that passes all
//! of that is almost always a real block; one that is not is caught when its decoding fails or
//! when the chunk before does not end there.

use super::bits::{peek_at, Bits};
use super::decode::Inflater;

/// The first bit in `from..to` where a non-final dynamic block's header reads as valid.
pub(super) fn dynamic_block(data: &[u8], from: u64, to: u64, inf: &mut Inflater) -> Option<u64> {
    let mut p = from;
    while p < to {
        // The bits from `p`: each of the 32 positions with the 61 bits after its first 13,
        // 106 in all, wherever in a byte `p` falls.
        let w = peek_at(data, p);
        let mut found = candidates(w as u64);
        while found != 0 {
            let k = found.trailing_zeros();
            let q = p + u64::from(k);
            if q >= to {
                return None;
            }
            if complete_code_lengths((w >> (k + 13)) as u64) && {
                let mut bits = Bits::at(data, q + 3);
                inf.read_dynamic(&mut bits).is_ok()
            } {
                return Some(q);
            }
            found &= found - 1;
        }
        p += 32;
    }
    None
}

/// Of the 32 positions at `w`'s first 32 bits, those where a non-final dynamic block's first
/// 13 bits could start: BFINAL 0, BTYPE 2, then HLIT and HDIST at most 29 (286 and 30 codes).
#[inline(always)]
fn candidates(w: u64) -> u64 {
    let header = !w & !(w >> 1) & (w >> 2);
    // 30 and 31 are the five-bit counts with their top four bits set.
    let hlit_over = (w >> 4) & (w >> 5) & (w >> 6) & (w >> 7);
    let hdist_over = (w >> 9) & (w >> 10) & (w >> 11) & (w >> 12);
    header & !hlit_over & !hdist_over & 0xffff_ffff
}

/// Whether the code-length code of a header is complete: with lengths of at most 7 bits, their
/// 2^(7 - len) sum to 2^7. `bits` are the header's from its 14th: HCLEN, then the lengths.
#[inline(always)]
fn complete_code_lengths(bits: u64) -> bool {
    let count = (bits & 15) as u32 + 4;
    let lens = (bits >> 4) & ((1 << (3 * count)) - 1);
    // Four lengths at a time, by table. Random bits pass 128 (an over-subscribed code) within
    // the first twelve lengths: those are summed without a branch.
    let kraft = |shift: u32| u32::from(KRAFT[(lens >> shift & 0xfff) as usize]);
    let first = kraft(0) + kraft(12) + kraft(24);
    first <= 128 && first + kraft(36) + kraft(48) == 128
}

/// For four 3-bit code lengths, the sum of their 2^(7 - len), at most 255.
static KRAFT: [u8; 4096] = {
    let mut t = [0u8; 4096];
    let mut i = 0;
    while i < 4096 {
        let mut sum = 0u32;
        let mut k = 0;
        while k < 4 {
            let len = (i >> (3 * k)) & 7;
            if len > 0 {
                sum += 128 >> len;
            }
            k += 1;
        }
        t[i] = if sum > 255 { 255 } else { sum as u8 };
        i += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::super::decode::{Stop, Symbols};
    use super::*;
    use std::io::Write;

    /// Trace-like text with numbers that vary, deflated raw: many dynamic blocks.
    fn deflated() -> Vec<u8> {
        let mut text = Vec::new();
        let mut x: u64 = 99;
        for i in 0..60_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            writeln!(
                text,
                "{{\"name\": \"k{}\", \"ts\": {}, \"id\": {i}}},",
                x >> 61,
                x >> 40
            )
            .unwrap();
        }
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(6));
        z.write_all(&text).unwrap();
        z.finish().unwrap()
    }

    /// Where each block after the first starts, and its type.
    fn block_starts(data: &[u8]) -> Vec<(u64, u64)> {
        let (mut inf, mut out) = (Inflater::new(), Symbols::default());
        let (mut pos, mut starts) = (0, Vec::new());
        loop {
            out.start();
            let mut bits = Bits::at(data, pos);
            let stop = inf.run(&mut bits, &mut out, pos + 1, usize::MAX, usize::MAX);
            if stop.unwrap() == Stop::Final {
                return starts;
            }
            pos = bits.position();
            starts.push((pos, peek_at(data, pos) as u64 & 7));
        }
    }

    #[test]
    fn every_dynamic_block_is_found_from_any_bit_before_it() {
        let data = deflated();
        let starts = block_starts(&data);
        let dynamic: Vec<u64> = starts
            .iter()
            .filter(|s| s.1 == 0b100)
            .map(|s| s.0)
            .collect();
        assert!(dynamic.len() >= 8, "{starts:?}");
        assert!(dynamic.iter().any(|s| s % 8 != 0));
        let mut inf = Inflater::new();
        for &s in &dynamic {
            // From any bit before it: the block itself, or a false find before it.
            for from in s.saturating_sub(64)..=s {
                let found = dynamic_block(&data, from, s + 1, &mut inf);
                assert!(found.is_some_and(|f| f <= s), "block at {s}, from {from}");
            }
            assert_eq!(dynamic_block(&data, s, s + 1, &mut inf), Some(s));
        }
    }
}
