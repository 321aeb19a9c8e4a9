//! Reading a deflate stream bit by bit, least significant bit first, from any bit offset.

/// A 64-bit buffer over a byte slice. Past the slice's end it reads zeros, and
/// [`Bits::refill`] reports the overrun once the zeros could matter.
#[derive(Clone, Copy)]
pub(super) struct Bits<'a> {
    data: &'a [u8],
    /// The next byte to load into the buffer.
    next: usize,
    buf: u64,
    /// Valid bits in `buf`, from its least significant end.
    have: u32,
}

impl<'a> Bits<'a> {
    /// A reader at bit `bit` of `data`.
    pub(super) fn at(data: &'a [u8], bit: u64) -> Self {
        let mut bits = Bits {
            data,
            next: (bit / 8) as usize,
            buf: 0,
            have: 0,
        };
        bits.refill();
        bits.consume((bit % 8) as u32);
        bits
    }

    /// Fills the buffer to at least 56 bits; false once the reader is more than 8 bytes past
    /// the data's end (a truncated stream, or garbage decoded speculatively).
    #[inline(always)]
    pub(super) fn refill(&mut self) -> bool {
        if let Some(word) = self.data.get(self.next..self.next + 8) {
            let word = u64::from_le_bytes(word.try_into().unwrap_or_default());
            self.buf |= word << self.have;
            self.next += ((63 - self.have) >> 3) as usize;
            self.have |= 56;
            true
        } else {
            self.refill_slowly()
        }
    }

    #[cold]
    fn refill_slowly(&mut self) -> bool {
        while self.have <= 56 {
            let byte = self.data.get(self.next).copied().unwrap_or(0);
            self.buf |= u64::from(byte) << self.have;
            self.next += 1;
            self.have += 8;
        }
        self.next <= self.data.len() + 16
    }

    /// The buffer's bits, of which at least 56 are valid after a refill.
    #[inline(always)]
    pub(super) fn peek(&self) -> u64 {
        self.buf
    }

    #[inline(always)]
    pub(super) fn consume(&mut self, n: u32) {
        self.buf >>= n;
        self.have -= n;
    }

    /// The next `n` bits (at most 32), refilling first.
    #[inline(always)]
    pub(super) fn take(&mut self, n: u32) -> Option<u32> {
        if self.have < n && !self.refill() {
            return None;
        }
        let v = (self.buf & ((1u64 << n) - 1)) as u32;
        self.consume(n);
        Some(v)
    }

    /// The next `n` bits, when a refill made sure they are there.
    #[inline(always)]
    pub(super) fn take_buffered(&mut self, n: u32) -> u32 {
        let v = (self.buf & ((1u64 << n) - 1)) as u32;
        self.consume(n);
        v
    }

    /// Skips to the next byte boundary.
    pub(super) fn align(&mut self) {
        self.consume(self.have % 8);
    }

    /// Bits read so far, counted from the data's start.
    pub(super) fn position(&self) -> u64 {
        self.next as u64 * 8 - u64::from(self.have)
    }

    /// Whether more bits were read than the data holds.
    pub(super) fn overran(&self) -> bool {
        self.position() > self.data.len() as u64 * 8
    }
}

/// 120 bits of `data` from bit `bit` (at least: 128 less `bit % 8`), zeros past its end.
pub(super) fn peek_at(data: &[u8], bit: u64) -> u128 {
    let at = (bit / 8) as usize;
    let mut word = [0u8; 16];
    if let Some(src) = data.get(at..at + 16) {
        word.copy_from_slice(src);
    } else if let Some(src) = data.get(at..) {
        word[..src.len()].copy_from_slice(src);
    }
    u128::from_le_bytes(word) >> (bit % 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_come_out_least_significant_first_from_any_offset() {
        let data: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        let all: Vec<u32> = (0..data.len() * 8)
            .map(|i| u32::from(data[i / 8] >> (i % 8) & 1))
            .collect();
        for start in [0usize, 1, 7, 8, 13, 250] {
            let mut bits = Bits::at(&data, start as u64);
            let mut at = start;
            for n in [1u32, 5, 13, 32, 3, 17, 9, 30, 2] {
                let want = (0..n as usize)
                    .map(|k| all.get(at + k).copied().unwrap_or(0) << k)
                    .sum::<u32>();
                assert_eq!(bits.take(n), Some(want), "start {start}, at {at}");
                at += n as usize;
                assert_eq!(bits.position(), at as u64);
            }
        }
        let mut bits = Bits::at(&data, 300);
        assert!(!bits.overran());
        let mut ran_out = false;
        for _ in 0..20 {
            ran_out |= bits.take(32).is_none();
        }
        assert!(ran_out && bits.overran());
    }

    /// The block search reads a header's 106 bits at once, from any bit of a byte: the bits
    /// a misaligned peek drops at its word's end once hid real headers (session 21).
    #[test]
    fn a_peek_holds_120_bits_from_any_offset() {
        let data: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        let bit = |i: usize| u128::from(data.get(i / 8).map_or(0, |b| b >> (i % 8) & 1));
        for start in 0..data.len() * 8 + 16 {
            let want = (0..120).fold(0u128, |w, k| w | bit(start + k) << k);
            let got = peek_at(&data, start as u64) & ((1 << 120) - 1);
            assert_eq!(got, want, "from bit {start}");
        }
    }
}
