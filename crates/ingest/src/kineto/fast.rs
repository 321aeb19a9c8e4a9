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
//! **Invariant:** where [`event`] returns `Some`, serde's reading (`EventSlot`) succeeds on the
//! same bytes, takes as many of them and fills the event alike. It is held to that on every
//! element of the fixtures' traces and on a list of hard cases (the tests below), by the
//! `kineto_event` fuzz target ([`agrees`] on one event), and by the `kineto` target on every
//! element its ingests read (`cfg(fuzzing)` in [`super::EventParser`]).

use std::borrow::Cow;

use super::SHAPE_PROBES;
use super::{micros_text_to_ns, Dims, EventSlot, Id, Int, RawArgs, RawEvent, Text, Word};
use crate::chunked;

/// Containers nested deeper than this inside a skipped value make the scanner give up.
const MAX_DEPTH: u32 = 64;

/// Reads the event at the start of `bytes` (after whitespace) into `e`: whether it is a
/// complete (`X`) event, and the bytes it took up to its closing `}`. `None` where serde must
/// read it instead.
pub(super) fn event<'a>(bytes: &'a [u8], e: &mut RawEvent<'a>) -> Option<(bool, usize)> {
    let mut c = Cursor { b: bytes, i: 0 };
    c.ws();
    c.byte(b'{')?;
    *e = RawEvent::default();
    let mut first = true;
    while let Some(key) = c.next_key(&mut first)? {
        match key {
            b"ph" => {
                e.ph = c.opt_text()?;
                if e.ph.as_deref() != Some("X") {
                    // As serde's reading: the rest is skipped, and the event is not kept. Its
                    // keys are then read as text (UTF-8, no control characters).
                    while c.next_key_text(&mut first)?.is_some() {
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
                c.args(&mut e.args, dims)?;
            }
            _ => c.skip_value()?,
        }
    }
    Some((e.ph.as_deref() == Some("X"), c.i))
}

/// A position in the bytes of one event. Every method returns `None` to give up.
struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    #[inline(always)]
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.b.get(self.i) {
            self.i += 1;
        }
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
    /// UTF-8 check).
    fn next_key(&mut self, first: &mut bool) -> Option<Option<&'a [u8]>> {
        self.entry(first, Self::raw_key)
    }

    /// [`Self::next_key`], the key read as text, as serde reads keys it skips.
    fn next_key_text(&mut self, first: &mut bool) -> Option<Option<&'a [u8]>> {
        self.entry(first, |c| c.plain_str().map(str::as_bytes))
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
            b'-' | b'0'..=b'9' => Some(micros_text_to_ns(self.number()?)),
            b'n' => self.literal(b"null").map(|()| None),
            _ => None,
        }
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
    fn args(&mut self, a: &mut RawArgs, dims: bool) -> Option<()> {
        *a = RawArgs::default();
        self.ws();
        if self.peek()? == b'n' {
            return self.literal(b"null");
        }
        self.byte(b'{')?;
        let mut first = true;
        while let Some(key) = self.next_key(&mut first)? {
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

/// The index in `s` of its first `"` or `\` (or, when `control`, byte under 0x20); `s.len()`
/// when there is none. Eight bytes at a time, as serde_json's own scan.
#[inline(always)]
fn find_quote_or_escape(s: &[u8], control: bool) -> usize {
    const ONES: u64 = u64::MAX / 255;
    const HIGH: u64 = ONES << 7;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x;
    let mut chunks = s.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let w = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        let mut hits =
            has_zero(w ^ (ONES * u64::from(b'"'))) | has_zero(w ^ (ONES * u64::from(b'\\')));
        if control {
            hits |= w.wrapping_sub(ONES * 0x20) & !w;
        }
        let hits = hits & HIGH;
        if hits != 0 {
            return at + hits.trailing_zeros() as usize / 8;
        }
        at += 8;
    }
    let special = |&b: &u8| b == b'"' || b == b'\\' || (control && b < 0x20);
    at + chunks
        .remainder()
        .iter()
        .position(special)
        .unwrap_or(chunks.remainder().len())
}

/// The fast path's reading of the event at the start of `bytes`, held to serde's: `Ok(None)`
/// where it gives up, an error naming the difference where the two disagree (for the tests and
/// the fuzzer, which runs it on every element the ingest reads).
pub(super) fn agrees(bytes: &[u8]) -> Result<Option<(bool, usize)>, String> {
    let mut fast = RawEvent::default();
    let Some(read) = event(bytes, &mut fast) else {
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

    /// What the fast path read of `bytes`, after checking that serde reads the same.
    fn agreed(bytes: &[u8]) -> Option<(bool, usize)> {
        agrees(bytes).unwrap_or_else(|e| panic!("{e}"))
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
            .map(|e| event(e, &mut RawEvent::default()).unwrap().1)
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
        let fast = best(&|e| event(e, &mut RawEvent::default()).map_or(0, |r| r.1));
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
