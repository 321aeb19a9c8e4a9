//! The trace events of real traces, read by a byte scanner instead of through serde.
//!
//! serde_json spent about two thirds of a plain ingest's CPU reading events: a visitor call per
//! key and value, a UTF-8 check per string, a scratch buffer per skipped value. This scanner
//! reads the shapes the PyTorch profiler writes (plain strings, integers, the `args` llmprof
//! reads) into the same [`RawEvent`], and gives up on anything else (an escape in a string it
//! keeps, a float where it expects an integer, a nesting deeper than [`MAX_DEPTH`], any byte
//! it does not expect). The caller then parses the event with serde from its first byte, so an
//! event it gives up on costs a second reading, never a different result or error.
//!
//! A trace spaces and orders its keys alike from event to event: each key is first looked up
//! by the one before it in [`Keys`], and taken by one compare where the bytes that took it
//! last time come again. With whitespace and strings scanned 16 bytes at a time and `ts`/`dur`
//! read in one pass, that took the scanner's time on the 180 MB trace from 0.159 to 0.131 s
//! (PERFORMANCE.md, session 40).
//!
//! **Invariant:** where [`event`] returns `Some`, serde's reading (`EventSlot`) succeeds on the
//! same bytes, takes as many of them and fills the event alike. It is held to that on every
//! element of the fixtures' traces (alone, and in order with one [`Keys`]) and on a list of
//! hard cases (the tests below), by the `kineto_event` fuzz target ([`agrees`] on one event,
//! twice, the second time with its keys seen), and by the `kineto` target on every element its
//! ingests read, with its piece's keys (`cfg(fuzzing)` in [`super::EventParser`]).

use std::borrow::Cow;

use super::SHAPE_PROBES;
use super::{micros_text_to_ns, Dims, EventSlot, Id, Int, RawArgs, RawEvent, Text, Word};
use crate::chunked;

/// Containers nested deeper than this inside a skipped value make the scanner give up.
const MAX_DEPTH: u32 = 64;

/// Reads the event at the start of `bytes` (after whitespace) into `e`: whether it is a
/// complete (`X`) event, and the bytes it took up to its closing `}`. `None` where serde must
/// read it instead.
pub(super) fn event<'a>(
    bytes: &'a [u8],
    e: &mut RawEvent<'a>,
    keys: &mut Keys,
) -> Option<(bool, usize)> {
    let mut c = Cursor { b: bytes, i: 0 };
    c.ws();
    c.byte(b'{')?;
    *e = RawEvent::default();
    let mut run = KeyRun::new(0);
    while let Some(key) = c.key(&mut run, keys, false)? {
        match key {
            b"ph" => {
                e.ph = c.opt_text()?;
                if e.ph.as_deref() != Some("X") {
                    // As serde's reading: the rest is skipped, and the event is not kept. Its
                    // keys are then read as text (UTF-8, no control characters).
                    // The rest of its keys go by its phase.
                    let phase = e.ph.as_deref().map_or(&b""[..], str::as_bytes);
                    run.relevel(b"ph", Keys::level_of(phase) ^ 1 << 61);
                    while c.key(&mut run, keys, true)?.is_some() {
                        c.skip_value()?;
                    }
                    return Some((false, c.i));
                }
            }
            b"cat" => e.cat = c.opt_text()?,
            b"name" => e.name = c.opt_text()?,
            b"pid" => e.pid = c.id()?,
            b"tid" => e.tid = c.id()?,
            b"ts" => e.ts = c.micros()?,
            b"dur" => e.dur = c.micros()?,
            b"args" => {
                let dims = e.name.as_deref().is_some_and(|n| SHAPE_PROBES.contains(&n));
                // The args' keys go by the category.
                let cat = e.cat.as_deref().map_or(&b""[..], str::as_bytes);
                c.args(&mut e.args, dims, keys, Keys::level_of(cat))?;
            }
            _ => c.skip_value()?,
        }
    }
    Some((e.ph.as_deref() == Some("X"), c.i))
}

/// What took each key the last time: for each key (hashed with its object's level), the bytes
/// from after its value up to and with the `:` after the next key, as [`Cursor::key`]
/// read them. A pretty-printed trace spaces and orders its keys alike from event to event, so
/// one compare of those bytes stands for a scan of whitespace, separator, key and colon. The
/// scan is a function of the bytes alone (and of whether the key is its object's first), so
/// the same bytes take the same key.
#[derive(Debug)]
pub(super) struct Keys {
    slots: [Slot; 256],
}

impl Default for Keys {
    fn default() -> Self {
        Keys {
            slots: [Slot::default(); 256],
        }
    }
}

impl Keys {
    /// The level of the keys of an object that go by `what`: an event's `args` by its
    /// category, the rest of an event that is not `X` by its phase.
    fn level_of(what: &[u8]) -> u64 {
        let head = what
            .iter()
            .take(7)
            .fold(0u64, |h, &b| h << 8 | u64::from(b));
        1 << 60 | head ^ (what.len() as u64) << 56
    }

    /// The slot for what follows `key` in an object at `level`: a hash of its length and of
    /// its first and last eight bytes.
    #[inline(always)]
    fn slot_of(key: &[u8], level: u64) -> usize {
        // Eight bytes in one load; a shorter key a byte at a time (a copy into a word is a
        // call to `memcpy`, and a stall reading the word back).
        let word = |b: &[u8]| match b.first_chunk::<8>() {
            Some(w) => u64::from_le_bytes(*w),
            None => b.iter().fold(0, |w, &x| w << 8 | u64::from(x)),
        };
        let tail = &key[key.len().saturating_sub(8)..];
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut h = (level ^ key.len() as u64).wrapping_mul(K);
        h = (h.rotate_left(26) ^ word(key)).wrapping_mul(K);
        h = (h.rotate_left(26) ^ word(tail)).wrapping_mul(K);
        (h >> 56) as usize
    }
}

/// The bytes that took a key, and where the key lies in them.
#[derive(Debug, Clone, Copy)]
struct Slot {
    bytes: [u8; Slot::MAX],
    /// How many of `bytes` took the key; 0 for none.
    len: u8,
    key_at: u8,
    key_len: u8,
    /// Whether it was the object's first key (no `,` before it).
    first: bool,
    /// Whether the key reads as text too.
    text: bool,
    /// The slot for the key after it.
    next: u8,
}

impl Default for Slot {
    fn default() -> Self {
        Slot {
            bytes: [0; Slot::MAX],
            len: 0,
            key_at: 0,
            key_len: 0,
            first: false,
            text: false,
            next: 0,
        }
    }
}

impl Slot {
    const MAX: usize = 32;

    /// Keeps the bytes at `b[start..]` that took a key, as `took` says, where they fit.
    #[inline(always)]
    fn remember(&mut self, b: &[u8], start: usize, took: Took) {
        if took.len > Slot::MAX {
            return;
        }
        let Some(window) = b.get(start..start + Slot::MAX) else {
            return;
        };
        self.bytes.copy_from_slice(window);
        self.len = took.len as u8;
        (self.key_at, self.key_len) = (took.key.0 as u8, took.key.1 as u8);
        (self.first, self.text, self.next) = (took.first, took.text, took.next as u8);
    }
}

/// How a key was taken: the bytes it took, where the key lies in them, whether it was its
/// object's first and reads as text, and the slot for the key after it.
struct Took {
    len: usize,
    key: (usize, usize),
    first: bool,
    text: bool,
    next: usize,
}

/// Where [`Cursor::key`] is in an object: the slot for the key after the last one
/// read, and whether none was read yet.
struct KeyRun {
    slot: usize,
    first: bool,
    level: u64,
}

impl KeyRun {
    fn new(level: u64) -> Self {
        KeyRun {
            slot: Keys::slot_of(b"", level),
            first: true,
            level,
        }
    }

    /// Goes on at another level, as after `key` there.
    fn relevel(&mut self, key: &[u8], level: u64) {
        self.level = level;
        self.slot = Keys::slot_of(key, level);
    }
}

/// A position in the bytes of one event. Every method returns `None` to give up.
struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    /// Skips whitespace: the first two bytes one at a time (most runs are one byte or none),
    /// then 16 at a time (the indentation of a pretty-printed trace, a fifth of its bytes).
    #[inline(always)]
    fn ws(&mut self) {
        if !self.b.get(self.i).is_some_and(|&b| is_ws(b)) {
            return;
        }
        self.i += 1;
        if !self.b.get(self.i).is_some_and(|&b| is_ws(b)) {
            return;
        }
        self.i += skip_ws(&self.b[self.i..]);
    }

    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    /// Takes `want` after whitespace.
    #[inline(always)]
    fn byte(&mut self, want: u8) -> Option<()> {
        self.ws();
        (self.peek()? == want).then(|| self.i += 1)
    }

    /// The next key of an object whose `{` was taken, with its `:`; `Some(None)` at its `}`.
    /// As serde's map access: a `,` between entries, none before the first or after the last.
    /// The key is raw bytes, as serde reads keys into bytes (control characters allowed, no
    /// UTF-8 check); or, where `text`, read as text, as serde reads keys it skips.
    ///
    /// `keys` holds, for the key before, the bytes that took the key after it last time: where
    /// the same bytes come again, the key is theirs and nothing is scanned ([`Keys`]).
    #[inline(always)]
    fn key(&mut self, run: &mut KeyRun, keys: &mut Keys, text: bool) -> Option<Option<&'a [u8]>> {
        let start = self.i;
        let slot = &mut keys.slots[run.slot];
        if slot.len > 0 && slot.first == run.first && (slot.text || !text) {
            if let Some(window) = self.b[start..].first_chunk::<{ Slot::MAX }>() {
                if mask::same_prefix(window, &slot.bytes, usize::from(slot.len)) {
                    self.i += usize::from(slot.len);
                    let key =
                        &self.b[start + usize::from(slot.key_at)..][..usize::from(slot.key_len)];
                    run.first = false;
                    run.slot = usize::from(slot.next);
                    return Some(Some(key));
                }
            }
        }
        let first = run.first;
        let key = if text {
            self.entry(&mut run.first, |c| c.plain_str().map(str::as_bytes))?
        } else {
            self.entry(&mut run.first, Self::raw_key)?
        };
        if let Some(k) = key {
            let key_at = k.as_ptr() as usize - self.b.as_ptr() as usize - start;
            let next = Keys::slot_of(k, run.level);
            // A key of printable ASCII reads alike as bytes and as text.
            let printable = text || k.iter().all(|&b| (0x20..0x80).contains(&b));
            let took = Took {
                len: self.i - start,
                key: (key_at, k.len()),
                first,
                text: printable,
                next,
            };
            slot.remember(self.b, start, took);
            run.slot = next;
        }
        Some(key)
    }

    fn entry(
        &mut self,
        first: &mut bool,
        key: impl FnOnce(&mut Self) -> Option<&'a [u8]>,
    ) -> Option<Option<&'a [u8]>> {
        self.ws();
        match self.peek()? {
            b'}' => {
                self.i += 1;
                return Some(None);
            }
            b',' if !*first => {
                self.i += 1;
                self.ws();
            }
            _ if *first => {}
            _ => return None,
        }
        *first = false;
        (self.peek()? == b'"').then_some(())?;
        self.i += 1;
        let key = key(self)?;
        self.byte(b':')?;
        Some(Some(key))
    }

    /// A key's bytes up to its closing quote, after its opening one; gives up on an escape.
    #[inline(always)]
    fn raw_key(&mut self) -> Option<&'a [u8]> {
        let start = self.i;
        let end = start + find_quote_or_escape(&self.b[start..], false);
        (self.b.get(end)? == &b'"').then_some(())?;
        self.i = end + 1;
        Some(&self.b[start..end])
    }

    /// A string value without escapes or control characters, UTF-8, after its opening quote.
    #[inline(always)]
    fn plain_str(&mut self) -> Option<&'a str> {
        let start = self.i;
        let end = start + find_quote_or_escape(&self.b[start..], true);
        (self.b.get(end)? == &b'"').then_some(())?;
        self.i = end + 1;
        ascii_or_utf8(&self.b[start..end])
    }

    /// A string skipped as serde skips it: escapes checked, control characters refused,
    /// bytes past ASCII not checked. After its opening quote.
    #[inline(always)]
    fn skip_str(&mut self) -> Option<()> {
        loop {
            self.i += find_quote_or_escape(&self.b[self.i..], true);
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => {
                    self.i += 1;
                    match self.peek()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 1,
                        b'u' => {
                            let hex = self.b.get(self.i + 1..self.i + 5)?;
                            hex.iter().all(u8::is_ascii_hexdigit).then_some(())?;
                            self.i += 5;
                        }
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
    }

    /// A JSON number's text, its grammar checked.
    #[inline(always)]
    fn number(&mut self) -> Option<&'a [u8]> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            self.some_digits()?;
        }
        // A digit after a lone `0` is an error to serde.
        (!self.peek().is_some_and(|b| b.is_ascii_digit())).then_some(())?;
        Some(&self.b[start..self.i])
    }

    #[inline(always)]
    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.i += 1;
        }
    }

    #[inline(always)]
    fn some_digits(&mut self) -> Option<()> {
        let from = self.i;
        self.digits();
        (self.i > from).then_some(())
    }

    /// An integer written without fraction or exponent, of at most 18 digits, not `-0`:
    /// what serde gives as the same `i64` whichever way it is asked for. `None` for any other
    /// number, as for text that is not one. One pass over the digits.
    #[inline(always)]
    fn int(&mut self) -> Option<i64> {
        let neg = self.peek() == Some(b'-');
        self.i += usize::from(neg);
        let start = self.i;
        let mut v: i64 = 0;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            // Wraps past 18 digits, which are refused below.
            v = v.wrapping_mul(10).wrapping_add(i64::from(d - b'0'));
            self.i += 1;
        }
        let n = self.i - start;
        let leading_zero = n > 1 && self.b[start] == b'0';
        let fraction = matches!(self.peek(), Some(b'.' | b'e' | b'E'));
        (n > 0 && n <= 18 && !leading_zero && !fraction && !(neg && v == 0)).then_some(())?;
        Some(if neg { -v } else { v })
    }

    /// Takes `word` (`true`, `false`, `null`) after whitespace.
    #[inline(always)]
    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.ws();
        (self.b.get(self.i..self.i + word.len())? == word).then(|| self.i += word.len())
    }

    /// `Option<Text>`: a string, or `null`.
    fn opt_text(&mut self) -> Option<Option<Text<'a>>> {
        self.ws();
        match self.peek()? {
            b'"' => {
                self.i += 1;
                Some(Some(Text(Cow::Borrowed(self.plain_str()?))))
            }
            b'n' => self.literal(b"null").map(|()| None),
            _ => None,
        }
    }

    /// A `pid` or `tid` ([`Id`]): an integer, a string, or `null`, `true` or `false`.
    fn id(&mut self) -> Option<Id<'a>> {
        self.ws();
        match self.peek()? {
            b'"' => {
                self.i += 1;
                Some(Id::Str(Cow::Borrowed(self.plain_str()?)))
            }
            b'-' | b'0'..=b'9' => self.int().map(Id::Int),
            b'n' => self.literal(b"null").map(|()| Id::Missing),
            b't' => self.literal(b"true").map(|()| Id::Missing),
            b'f' => self.literal(b"false").map(|()| Id::Missing),
            _ => None,
        }
    }

    /// `ts` or `dur`: a number's text in ns ([`micros_text_to_ns`]), or `null`.
    fn micros(&mut self) -> Option<Option<i64>> {
        self.ws();
        match self.peek()? {
            b'1'..=b'9' => match self.plain_micros() {
                Some(ns) => Some(Some(ns)),
                None => Some(micros_text_to_ns(self.number()?)),
            },
            b'-' | b'0' => Some(micros_text_to_ns(self.number()?)),
            b'n' => self.literal(b"null").map(|()| None),
            _ => None,
        }
    }

    /// The usual `ts` and `dur` (`4448858854397.011`: a first digit of 1–9, at most 15
    /// integer digits, a fraction or none, no exponent) in ns, in one pass: what
    /// [`Self::number`] then [`micros_text_to_ns`] give, taking the same bytes (and, as
    /// they, not what follows the number). `None`, having taken nothing, for any other number
    /// and for text that is not one.
    #[inline(always)]
    fn plain_micros(&mut self) -> Option<i64> {
        let b = self.b;
        let mut i = self.i;
        let mut int: i64 = 0;
        while let Some(&d @ b'0'..=b'9') = b.get(i) {
            int = int * 10 + i64::from(d - b'0');
            i += 1;
            if i - self.i > 15 {
                return None;
            }
        }
        let (mut frac, mut n, mut up) = (0, 0, false);
        if b.get(i) == Some(&b'.') {
            i += 1;
            while let Some(&d @ b'0'..=b'9') = b.get(i) {
                match n {
                    0..=2 => frac = frac * 10 + i64::from(d - b'0'),
                    3 => up = d >= b'5',
                    _ => {}
                }
                n += 1;
                i += 1;
            }
            if n == 0 {
                return None;
            }
        }
        if let Some(b'e' | b'E') = b.get(i) {
            return None;
        }
        for _ in n..3 {
            frac *= 10;
        }
        self.i = i;
        Some(int * 1000 + frac + i64::from(up))
    }

    /// An integer argument ([`Int`]): an integer, or `null`.
    fn int_arg(&mut self) -> Option<Int> {
        self.ws();
        match self.peek()? {
            b'n' => self.literal(b"null").map(|()| Int(None)),
            _ => self.int().map(|v| Int(Some(v))),
        }
    }

    /// A string argument ([`Word`]): a string, an integer's decimal text, or `null`.
    fn word(&mut self) -> Option<Word> {
        Some(Word(match self.id()? {
            Id::Str(s) => Some(s.into_owned()),
            Id::Int(v) => Some(v.to_string()),
            Id::Missing => None,
        }))
    }

    /// `grid` or `block` ([`Dims`]): a list of integers, three of them within `u32` for a
    /// value; or `null`.
    fn dims(&mut self) -> Option<Dims> {
        self.ws();
        if self.peek()? == b'n' {
            return self.literal(b"null").map(|()| Dims(None));
        }
        let mut out = [1u32; 3];
        let mut n = 0;
        let mut ok = true;
        self.list(|c| {
            match (n < 3, u32::try_from(c.int()?).ok()) {
                (true, Some(x)) => out[n] = x,
                _ => ok = false,
            }
            n += 1;
            Some(())
        })?;
        Some(Dims((ok && n == 3).then_some(out)))
    }

    /// `Input Dims`: a list of lists of integers, or `null` (no inputs).
    fn input_dims(&mut self) -> Option<Vec<Vec<i64>>> {
        self.ws();
        if self.peek()? == b'n' {
            return self.literal(b"null").map(|()| Vec::new());
        }
        let mut all = Vec::new();
        self.list(|c| {
            let mut sizes = Vec::new();
            c.list(|c| c.int().map(|v| sizes.push(v)))?;
            all.push(sizes);
            Some(())
        })?;
        Some(all)
    }

    /// A list, each element read by `element`.
    fn list(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.byte(b'[')?;
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(());
        }
        loop {
            self.ws();
            element(self)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// `args` into `a` (cleared first): an object, or `null`.
    fn args(&mut self, a: &mut RawArgs, dims: bool, keys: &mut Keys, level: u64) -> Option<()> {
        *a = RawArgs::default();
        self.ws();
        if self.peek()? == b'n' {
            return self.literal(b"null");
        }
        self.byte(b'{')?;
        let mut run = KeyRun::new(level);
        while let Some(key) = self.key(&mut run, keys, false)? {
            match key {
                b"Input Dims" if dims => a.input_dims = Some(self.input_dims()?),
                b"External id" => a.external_id = self.int_arg()?,
                b"correlation" => a.correlation = self.int_arg()?,
                b"stream" => a.stream = self.int_arg()?,
                b"grid" => a.grid = self.dims()?,
                b"block" => a.block = self.dims()?,
                b"registers per thread" => a.registers = self.int_arg()?,
                b"bytes" => a.bytes = self.int_arg()?,
                b"graph id" => a.graph_id = self.int_arg()?,
                b"graph node id" => a.graph_node = self.int_arg()?,
                b"Collective name" => a.collective = self.word()?,
                b"In msg nelems" => a.in_elements = self.int_arg()?,
                b"dtype" => a.dtype = self.word()?,
                b"Group size" => a.group_size = self.int_arg()?,
                b"Process Group Name" => a.process_group = self.word()?,
                _ => self.skip_value()?,
            }
        }
        Some(())
    }

    /// Any value, checked as serde checks what it skips.
    fn skip_value(&mut self) -> Option<()> {
        // One bit per open container, innermost lowest: 1 for an object, 0 for a list.
        let mut open: u64 = 0;
        let mut depth = 0;
        loop {
            self.ws();
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    self.skip_str()?;
                }
                b'-' | b'0'..=b'9' => _ = self.number()?,
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'n' => self.literal(b"null")?,
                b @ (b'{' | b'[') => {
                    self.i += 1;
                    (depth < MAX_DEPTH).then_some(())?;
                    let object = b == b'{';
                    open = open << 1 | u64::from(object);
                    depth += 1;
                    self.ws();
                    let empty = self.peek()? == if object { b'}' } else { b']' };
                    if !empty {
                        if object {
                            self.skipped_key()?;
                        }
                        continue;
                    }
                }
                _ => return None,
            }
            // After a value (or an open container that turns out empty): close what ends
            // here, until a `,` starts the next value.
            loop {
                if depth == 0 {
                    return Some(());
                }
                self.ws();
                let object = open & 1 == 1;
                match self.peek()? {
                    b',' => {
                        self.i += 1;
                        if object {
                            self.skipped_key()?;
                        }
                        break;
                    }
                    b'}' if object => self.i += 1,
                    b']' if !object => self.i += 1,
                    _ => return None,
                }
                open >>= 1;
                depth -= 1;
            }
        }
    }

    /// A key inside a skipped object, and its `:`.
    #[inline(always)]
    fn skipped_key(&mut self) -> Option<()> {
        self.byte(b'"')?;
        self.skip_str()?;
        self.byte(b':')
    }
}

/// `s` as text, where it is UTF-8. Most strings of a trace are ASCII, which is UTF-8 as it
/// stands: checking that inline, instead of calling `std::str::from_utf8` for each of an
/// event's three strings, took 7% off a plain ingest's CPU time (PERFORMANCE.md, session 37).
#[inline(always)]
fn ascii_or_utf8(s: &[u8]) -> Option<&str> {
    if s.is_ascii() {
        // SAFETY: ASCII bytes are UTF-8.
        #[allow(unsafe_code)]
        Some(unsafe { std::str::from_utf8_unchecked(s) })
    } else {
        std::str::from_utf8(s).ok()
    }
}

/// JSON's whitespace.
#[inline(always)]
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// Bit masks of 16 bytes, the first byte lowest: SSE2's compares where there is SSE2 (every
/// x86-64 processor), else a byte at a time.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[allow(unsafe_code)]
mod mask {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };

    // SAFETY (every block below): SSE2 is part of x86-64's baseline, so its instructions exist
    // wherever this compiles; each load reads 16 bytes within the array it is given, with no
    // alignment needed.

    #[inline(always)]
    fn eq(v: __m128i, c: u8) -> __m128i {
        unsafe { _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8)) }
    }

    /// The bytes that are JSON whitespace.
    #[inline(always)]
    pub(super) fn ws(bytes: &[u8; 16]) -> u32 {
        unsafe {
            let v = _mm_loadu_si128(bytes.as_ptr().cast());
            let m = _mm_or_si128(
                _mm_or_si128(eq(v, b' '), eq(v, b'\n')),
                _mm_or_si128(eq(v, b'\r'), eq(v, b'\t')),
            );
            _mm_movemask_epi8(m) as u32
        }
    }

    /// Whether the first `n` of 32 bytes are alike.
    #[inline(always)]
    pub(super) fn same_prefix(a: &[u8; 32], b: &[u8; 32], n: usize) -> bool {
        let eq = unsafe {
            let lo = _mm_cmpeq_epi8(
                _mm_loadu_si128(a.as_ptr().cast()),
                _mm_loadu_si128(b.as_ptr().cast()),
            );
            let hi = _mm_cmpeq_epi8(
                _mm_loadu_si128(a[16..].as_ptr().cast()),
                _mm_loadu_si128(b[16..].as_ptr().cast()),
            );
            _mm_movemask_epi8(lo) as u32 | (_mm_movemask_epi8(hi) as u32) << 16
        };
        let want = if n >= 32 { u32::MAX } else { (1u32 << n) - 1 };
        eq & want == want
    }

    /// The bytes that are `"` or `\\`, or under 0x20 when `control`.
    #[inline(always)]
    pub(super) fn special(bytes: &[u8; 16], control: bool) -> u32 {
        unsafe {
            let v = _mm_loadu_si128(bytes.as_ptr().cast());
            let mut m = _mm_or_si128(eq(v, b'"'), eq(v, b'\\'));
            if control {
                let low = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
                m = _mm_or_si128(m, low);
            }
            _mm_movemask_epi8(m) as u32
        }
    }
}

/// The same masks a byte at a time: where there is no SSE2, and for the tests, which hold the
/// two alike.
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
mod bytewise {
    #[inline(always)]
    fn bits(bytes: &[u8; 16], hit: impl Fn(u8) -> bool) -> u32 {
        let mut m = 0;
        for (k, &b) in bytes.iter().enumerate() {
            m |= u32::from(hit(b)) << k;
        }
        m
    }

    pub(super) fn ws(bytes: &[u8; 16]) -> u32 {
        bits(bytes, super::is_ws)
    }

    pub(super) fn same_prefix(a: &[u8; 32], b: &[u8; 32], n: usize) -> bool {
        a[..n.min(32)] == b[..n.min(32)]
    }

    pub(super) fn special(bytes: &[u8; 16], control: bool) -> u32 {
        bits(bytes, |b| b == b'"' || b == b'\\' || (control && b < 0x20))
    }
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
use bytewise as mask;

/// How many bytes of whitespace `s` starts with: 16 at a time.
#[inline(always)]
fn skip_ws(s: &[u8]) -> usize {
    let mut chunks = s.chunks_exact(16);
    let mut at = 0;
    for chunk in &mut chunks {
        let Ok(bytes) = chunk.try_into() else { break };
        let other = !mask::ws(bytes) & 0xffff;
        if other != 0 {
            return at + other.trailing_zeros() as usize;
        }
        at += 16;
    }
    let rest = chunks.remainder();
    at + rest.iter().position(|&b| !is_ws(b)).unwrap_or(rest.len())
}

/// The index in `s` of its first `"` or `\` (or, when `control`, byte under 0x20); `s.len()`
/// when there is none. Sixteen bytes at a time.
#[inline(always)]
fn find_quote_or_escape(s: &[u8], control: bool) -> usize {
    let special = |b: u8| b == b'"' || b == b'\\' || (control && b < 0x20);
    let mut chunks = s.chunks_exact(16);
    let mut at = 0;
    for chunk in &mut chunks {
        let Ok(bytes) = chunk.try_into() else { break };
        let hits = mask::special(bytes, control);
        if hits != 0 {
            return at + hits.trailing_zeros() as usize;
        }
        at += 16;
    }
    let rest = chunks.remainder();
    at + rest.iter().position(|&b| special(b)).unwrap_or(rest.len())
}

/// The fast path's reading of the event at the start of `bytes` with the keys it has seen,
/// held to serde's: `Ok(None)` where it gives up, an error naming the difference where the two
/// disagree (for the tests and the fuzzer, which runs it on every element the ingest reads).
pub(super) fn agrees(bytes: &[u8], keys: &mut Keys) -> Result<Option<(bool, usize)>, String> {
    let mut fast = RawEvent::default();
    let Some(read) = event(bytes, &mut fast, keys) else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&bytes[..read.1]);
    let mut slow = RawEvent::default();
    let n = match chunked::parse_seed(bytes, EventSlot(&mut slow)) {
        Ok(((), n)) => n,
        Err(e) => {
            return Err(format!(
                "serde refuses what the fast path read ({e}): {text}"
            ))
        }
    };
    let serde_read = (slow.ph.as_deref() == Some("X"), n);
    if read != serde_read {
        return Err(format!("read {read:?}, serde {serde_read:?}: {text}"));
    }
    if fast != slow {
        return Err(format!("read {fast:?}, serde {slow:?}: {text}"));
    }
    Ok(Some(read))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunked::parse_seed;

    /// What the fast path read of `bytes`, after checking that serde reads the same, with no
    /// keys seen before and with its own keys seen.
    fn agreed(bytes: &[u8]) -> Option<(bool, usize)> {
        super::super::fast_path_agrees(bytes).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The `traceEvents` elements of a fixture, as serde reads their bounds.
    fn elements(trace: &[u8]) -> Vec<&[u8]> {
        let key = b"\"traceEvents\"";
        let at = trace.windows(key.len()).position(|w| w == key).unwrap();
        let mut pos = at + trace[at..].iter().position(|&b| b == b'[').unwrap() + 1;
        let mut out = Vec::new();
        loop {
            while trace[pos].is_ascii_whitespace() || trace[pos] == b',' {
                pos += 1;
            }
            if trace[pos] == b']' {
                return out;
            }
            let mut slot = RawEvent::default();
            let ((), n) = parse_seed(&trace[pos..], EventSlot(&mut slot)).unwrap();
            out.push(&trace[pos..]);
            pos += n;
        }
    }

    /// Every event of every trace among the fixtures reads alike both ways, and the fast path
    /// reads every one of them: a fast path that gave up on real events would only cost time,
    /// so this is what would notice.
    #[test]
    fn the_fixtures_events_read_as_serde_reads_them() {
        use std::io::Read;
        let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/");
        for f in [
            "h200-qwen2-0.5b/kineto_trace.json.gz",
            "h100-cuda-graphs/kineto_trace.json.gz",
            "h200x2-tp2-capture/raw/kineto/kineto_trace.json.gz",
            "hta-multirank/nccl_rank0_of_2.json.gz",
            "hta-multirank/sampled_rank-0.json.gz",
        ] {
            let file = std::fs::File::open(std::path::Path::new(fixtures).join(f)).unwrap();
            let mut trace = Vec::new();
            flate2::read::GzDecoder::new(file)
                .read_to_end(&mut trace)
                .unwrap();
            let all = elements(&trace);
            let fast = all.iter().filter(|e| agreed(e).is_some()).count();
            assert!(all.len() > 1000, "{f}: {} events", all.len());
            assert_eq!(fast, all.len(), "{f}: the fast path gave up on some events");
            // In order, with the keys of the events before seen, as a parse worker reads them.
            let mut keys = Keys::default();
            for e in &all {
                let read = agrees(e, &mut keys).unwrap_or_else(|e| panic!("{f}: {e}"));
                assert!(read.is_some(), "{f}: the fast path gave up with keys seen");
            }
        }
    }

    /// Events the fast path reads, and events it leaves to serde: in either case, never a
    /// reading of its own.
    #[test]
    fn hard_events_read_as_serde_reads_them_or_are_left_to_it() {
        let read = [
            r#"{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2, "args": {"correlation": 9, "grid": [1, 2, 3], "block": [128, 1, 1]}}"#,
            r#"  {"ph":"X","name":"aten::linear","args":{"Input Dims":[[1,2],[],[3]]}} ,"#,
            r#"{"name":"aten::linear","ph":"X","args":{"Input Dims":null}}"#,
            r#"{"ph": "i", "s": "g", "x": [1, {"a": [], "b": {}}, "\u00e9\n"], "ts": 1}"#,
            r#"{"ph": "X", "ph": "B", "name": "k"}"#,
            r#"{"ph": "B", "ph": "X", "name": "k"}"#,
            r#"{"ph": null, "pid": "Spans", "tid": true, "ts": null}"#,
            r#"{"ph":"X","args":{"grid":[1,2],"block":[1,2,3,4],"stream":null}}"#,
            r#"{"ph":"X","args":{"grid":[-1,2,3],"block":[4294967296,1,1]}}"#,
            r#"{"ph":"X","args":{"Process Group Name":0,"dtype":"Float","Collective name":null}}"#,
            r#"{"ph":"X","args":null,"args":{"External id":-3}}"#,
            r#"{"ph":"X","ts":-0.5e3,"dur":1E+2,"skip":-0.0}"#,
            "{\"ph\":\"X\",\"na\x01me\":1}",
            r#"{"ph":"X","name":"né"}"#,
            r#"{"ph":"X","pid":123456789012345678,"tid":-7,"args":{"stream":0,"bytes":0}}"#,
            "{}",
            "{ }",
            // Times read in one pass, and those at its edges that take the two-pass way.
            r#"{"ph":"X","ts":4448858854397.011,"dur":32.4096,"name":"k"}"#,
            r#"{"ph":"X","ts":999999999999999.9995,"dur":1.0005}"#,
            r#"{"ph":"X","ts":1000000000000000.5,"dur":12345678901234567}"#,
            r#"{"ph":"X","ts":7,"dur":9.99949}"#,
            r#"{"ph":"X","ts":1.5e3,"dur":2E-1}"#,
            r#"{"ph":"X","ts":0.25,"dur":0}"#,
            // Whitespace and strings longer than a 16-byte step.
            "{\n                    \"ph\"  \t\r\n  :\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n \"X\" }",
            r#"{"ph":"X","name":"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >","cat":"0123456789abcdef"}"#,
        ];
        for e in read {
            assert!(agreed(e.as_bytes()).is_some(), "left to serde: {e}");
        }
        let left = [
            r#"{"ph":"X","name":"caf\u00e9 wait"}"#,
            r#"{"ph": "X", "name": "a\"b"}"#,
            r#"{"ph": "X", "args": {"correlation": 1.0}}"#,
            r#"{"ph": "X", "pid": 1.5}"#,
            r#"{"ph": "X", "pid": 12345678901234567890}"#,
            r#"{"ph": "X", "pid": -0}"#,
            r#"{"ph": "X", "pid": 1234567890123456789}"#,
            r#"{"ph": "X", "pid": 007}"#,
            r#"{"ph": "X", "tid": -}"#,
            r#"{"ph": "X", "tid": -x}"#,
            r#"{"ph": "X", "args": {"stream": 1e3}}"#,
            r#"{"ph": "X", "args": {"stream": 10E}}"#,
            r#"{"ph": "X", "args": {"grid": [1, 2, 3.5]}}"#,
            r#"{"ph": "X", "args": {"correlation": "7"}}"#,
            r#"{"ph": "X", "args": {"grid": [1.0, 1, 1]}}"#,
            r#"{"ph": "X", "args": 3}"#,
            r#"{"p\u0068": "X"}"#,
            r#"{"ph": "X",}"#,
            r#"{,"ph": "X"}"#,
            r#"{"ph": "X" "name": "k"}"#,
            r#"{"ph": "X", "x": 01}"#,
            r#"{"ph": "X", "x": 1.}"#,
            r#"{"ph": "X", "ts": 1.}"#,
            r#"{"ph": "X", "ts": 12.5.5}"#,
            r#"{"ph": "X", "dur": 3e}"#,
            r#"{"ph": "X", "ts": 1.5x}"#,
            r#"{"ph": "X", "name": "0123456789abcdefghij\u0041"}"#,
            "{\"ph\": \"X\", \"name\": \"0123456789abcdefghij\x1f\"}",
            r#"{"ph": "X", "x": -}"#,
            r#"{"ph": "X", "x": "\q"}"#,
            r#"{"ph": "X", "x": "\u12G4"}"#,
            "{\"ph\": \"X\", \"x\": \"a\tb\"}",
            "{\"ph\": \"X\", \"name\": \"a\x01\"}",
            r#"{"ph": "X", "x": [1, 2,]}"#,
            r#"{"ph": "X", "x": {"a" 1}}"#,
            r#"{"ph": "X", "x": [}"#,
            r#"{"ph": "X", "x": nul}"#,
            r#"{"ph": "X", "name": "k""#,
            r#"{"ph": "X", "name": "k"#,
            r#"["ph"]"#,
            "",
        ];
        for e in left {
            assert_eq!(agreed(e.as_bytes()), None, "read: {e}");
        }
        // Read in a row with one set of keys, each as it reads alone.
        let mut keys = Keys::default();
        for e in read.iter().chain(&left).chain(&read) {
            let alone = agrees(e.as_bytes(), &mut Keys::default());
            assert_eq!(agrees(e.as_bytes(), &mut keys), alone, "{e}");
        }
        // Keys read raw while the event is read, as text once it is skipped (the fuzzer's
        // first finding: a key of bytes past ASCII, not UTF-8, after `"ph": "s"`).
        for (e, read) in [
            (&b"{\"ph\":\"X\",\"name\":\"\xff\"}"[..], false),
            (b"{\"ph\":\"X\",\"c\xff\":1,\"\x01\":2}", true),
            (b"{\"ph\":\"s\",\"c\xff\":1}", false),
            (b"{\"ph\":\"s\",\"\x01\":1}", false),
            (b"{\"ph\":\"s\",\"x\":{\"c\xff\":1}}", true),
            (b"{\"ph\":\"s\",\"caf\xc3\xa9\":1}", true),
        ] {
            assert_eq!(agreed(e).is_some(), read, "{}", String::from_utf8_lossy(e));
        }
        let deep = format!(
            "{{\"ph\":\"X\",\"x\":{}{}}}",
            "[".repeat(65),
            "]".repeat(65)
        );
        assert_eq!(agreed(deep.as_bytes()), None);
        let nested = format!(
            "{{\"ph\":\"X\",\"x\":{}{}}}",
            "[".repeat(64),
            "]".repeat(64)
        );
        assert!(agreed(nested.as_bytes()).is_some());
    }

    /// SSE2's masks are the byte-at-a-time ones, on bytes that mix the ones they pick.
    #[test]
    fn the_vector_masks_are_the_bytewise_ones() {
        let picks = [
            b' ', b'\n', b'\r', b'\t', b'"', b'\\', 0x00, 0x01, 0x08, 0x0b, 0x0c, 0x1e, 0x1f, 0x20,
            0x21, 0x7f, 0x80, 0xff, b'a',
        ];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let mut a = [0u8; 32];
            for b in &mut a {
                *b = picks[(next() % picks.len() as u64) as usize];
            }
            let mut b = a;
            let n = (next() % 33) as usize;
            if next() % 2 == 0 {
                let at = (next() % 32) as usize;
                b[at] ^= 1 << (next() % 8);
            }
            let half: &[u8; 16] = a[..16].try_into().unwrap();
            assert_eq!(mask::ws(half), bytewise::ws(half), "{half:?}");
            for control in [false, true] {
                assert_eq!(
                    mask::special(half, control),
                    bytewise::special(half, control)
                );
            }
            assert_eq!(
                mask::same_prefix(&a, &b, n),
                bytewise::same_prefix(&a, &b, n)
            );
        }
    }

    #[test]
    fn whitespace_is_skipped_to_the_first_other_byte() {
        for len in 0..40 {
            for at in 0..=len {
                for (w, other) in [(b' ', b'"'), (b'\n', 0x01), (b'\t', 0x80), (b'\r', b'}')] {
                    let mut s = vec![w; len];
                    if at < len {
                        s[at] = other;
                    }
                    assert_eq!(skip_ws(&s), at, "{len} {at} {other}");
                }
            }
        }
    }

    #[test]
    fn the_scan_finds_the_first_special_byte() {
        for len in 0..40 {
            for at in 0..len {
                for (b, control) in [(b'"', false), (b'\\', false), (0x1f, true), (0, true)] {
                    let mut s = vec![b'a'; len];
                    s[at] = b;
                    if at + 1 < len {
                        s[at + 1] = b'"';
                    }
                    assert_eq!(find_quote_or_escape(&s, control), at, "{len} {at} {b}");
                }
            }
            let mut s = vec![0x80u8; len];
            s.iter_mut().step_by(3).for_each(|b| *b = 0x1f);
            assert_eq!(find_quote_or_escape(&s, false), len);
            assert_eq!(find_quote_or_escape(&s, true), 0);
        }
    }

    /// The two readings' rates (and the scanner's floor, each event skipped), one thread, on the trace `TRACE` names (plain JSON): the best
    /// of five passes over all its events each way. A benchmark, not a test:
    /// `TRACE=k180.json cargo test --release -p llmprof-ingest event_parse_rate -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn event_parse_rate() {
        let trace = std::fs::read(std::env::var("TRACE").unwrap()).unwrap();
        let all = elements(&trace);
        let size: usize = all
            .iter()
            .map(|e| {
                event(e, &mut RawEvent::default(), &mut Keys::default())
                    .unwrap()
                    .1
            })
            .sum();
        let best = |read: &dyn Fn(&[u8]) -> usize| {
            let times = (0..5).map(|_| {
                let t = std::time::Instant::now();
                let n: usize = all.iter().map(|e| read(e)).sum();
                assert_eq!(n, size);
                t.elapsed().as_secs_f64()
            });
            times.fold(f64::MAX, f64::min)
        };
        let keys = std::cell::RefCell::new(Keys::default());
        let fast = best(&|e| {
            event(e, &mut RawEvent::default(), &mut keys.borrow_mut()).map_or(0, |r| r.1)
        });
        // The floor of this scanner: each event skipped whole, every value checked, none read.
        let skip = best(&|e| {
            let mut c = Cursor { b: e, i: 0 };
            c.skip_value().map_or(0, |()| c.i)
        });
        println!("events skipped whole: {skip:.3} s");
        let serde =
            best(&|e| parse_seed(e, EventSlot(&mut RawEvent::default())).map_or(0, |r| r.1));
        for (name, secs) in [("fast path", fast), ("serde", serde)] {
            let ns = secs * 1e9 / all.len() as f64;
            let rate = size as f64 / secs / 1e6;
            println!("{name}: {secs:.3} s, {ns:.0} ns an event, {rate:.0} MB/s");
        }
        println!(
            "{} events, {size} bytes; serde / fast path {:.2}",
            all.len(),
            serde / fast
        );
    }
}
