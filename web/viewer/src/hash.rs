//! The view in the URL hash: `#run=ID&with=ID,ID&t=T0-T1&sel=A-B&pin=K&q=QUERY`, times in
//! integer ns from the timeline's start, every value percent-encoded (`with`: the other ranks
//! shown beside `run`, each encoded, joined by `,`). A link reproduces the view.

/// What a link restores.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ViewState {
    pub run: String,
    /// Ranks shown beside `run` (their site ids), in lane order.
    pub with: Vec<String>,
    /// Visible window.
    pub window: Option<(i64, i64)>,
    /// Selected range.
    pub selection: Option<(u64, u64)>,
    /// Pinned kernel op (timeline kernel position).
    pub pinned: Option<u32>,
    pub query: String,
}

impl ViewState {
    /// Reads a hash (with or without the leading `#`); unknown keys and malformed values are
    /// ignored, so an old or hand-edited link still opens.
    pub fn parse(hash: &str) -> ViewState {
        let mut v = ViewState::default();
        for part in hash.trim_start_matches('#').split('&') {
            let (key, val) = part.split_once('=').unwrap_or((part, ""));
            let val = decode(val);
            match key {
                "run" => v.run = val,
                "with" => {
                    v.with = part
                        .split_once('=')
                        .map_or("", |(_, raw)| raw)
                        .split(',')
                        .map(decode)
                        .filter(|id| !id.is_empty())
                        .collect()
                }
                "t" => v.window = pair(&val).filter(|(a, b)| a < b),
                "sel" => {
                    v.selection = pair(&val)
                        .filter(|&(a, b)| a >= 0 && a < b)
                        .map(|(a, b)| (a as u64, b as u64))
                }
                "pin" => v.pinned = val.parse().ok(),
                "q" => v.query = val,
                _ => {}
            }
        }
        v
    }

    /// The hash, without `#`.
    pub fn to_hash(&self) -> String {
        let mut parts = vec![format!("run={}", encode(&self.run))];
        if !self.with.is_empty() {
            let ids: Vec<String> = self.with.iter().map(|id| encode(id)).collect();
            parts.push(format!("with={}", ids.join(",")));
        }
        if let Some((a, b)) = self.window {
            parts.push(format!("t={a}-{b}"));
        }
        if let Some((a, b)) = self.selection {
            parts.push(format!("sel={a}-{b}"));
        }
        if let Some(k) = self.pinned {
            parts.push(format!("pin={k}"));
        }
        if !self.query.is_empty() {
            parts.push(format!("q={}", encode(&self.query)));
        }
        parts.join("&")
    }
}

/// `A-B` with optional leading minus on `A` (the window may start before the run).
fn pair(s: &str) -> Option<(i64, i64)> {
    let (neg, rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let (a, b) = rest.split_once('-')?;
    let a: i64 = a.parse().ok()?;
    Some((if neg { -a } else { a }, b.parse().ok()?))
}

/// Percent-encodes everything but unreserved URL characters.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes `%XX` escapes (and `+` as a space); invalid escapes stay as written.
pub fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 3;
                        continue;
                    }
                    _ => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_view_round_trips() {
        let v = ViewState {
            run: "20261122-013608-qwen2.5-0.5b deep&x".into(),
            with: vec!["r/ranks/1".into(), "odd,id".into()],
            window: Some((-1500, 2_000_000)),
            selection: Some((100, 900)),
            pinned: Some(42),
            query: "/gemm|attn/ 50%".into(),
        };
        let h = v.to_hash();
        assert!(!h.contains(' ') && !h.contains('|'), "{h}");
        assert!(h.contains("with=r%2Franks%2F1,odd%2Cid"), "{h}");
        assert_eq!(ViewState::parse(&format!("#{h}")), v);
    }

    #[test]
    fn malformed_parts_are_ignored() {
        let v = ViewState::parse("#run=a&t=5-2&sel=x-1&pin=-3&zzz=1&q=%ZZ%4");
        assert_eq!(v.run, "a");
        assert_eq!(v.window, None);
        assert_eq!(v.selection, None);
        assert_eq!(v.pinned, None);
        assert_eq!(v.query, "%ZZ%4");
    }

    #[test]
    fn decode_handles_multibyte_utf8() {
        assert_eq!(decode(&encode("µs → ok")), "µs → ok");
        assert_eq!(decode("%µ%"), "%µ%");
        assert_eq!(decode("%4"), "%4");
    }
}
