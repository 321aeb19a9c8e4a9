//! Numbers and units as Nsight Compute prints them for people: thousands separators, `n/a`,
//! and a unit per cell scaled to whatever prefix reads best (`Kbyte`, `usecond`, `Ghz`).
//!
//! ncu formats numbers with the C library's locale, so a German machine writes `0,53` and
//! `1.215.000`. Reading such a file as en-US would silently turn 0.53 % into 53 %, so the
//! locale is detected from the values that can only be read one way, and a comma-decimal file
//! is refused with the fix (re-run with `LC_NUMERIC=C`) instead of being misread.

use std::path::Path;

use crate::error::{what, IngestError};

/// A metric value in the en-US format ncu uses under the C locale, or `None` for `n/a`, empty
/// cells and text (`PolicySpread`, `(224, 1, 1)`).
pub(super) fn parse_number(cell: &str) -> Option<f64> {
    let s = cell.trim();
    if s.is_empty() || s.eq_ignore_ascii_case("n/a") {
        return None;
    }
    if !s.bytes().any(|b| b.is_ascii_digit())
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b',' | b'.' | b'-' | b'+' | b'e' | b'E'))
    {
        return None;
    }
    let plain: String = s.chars().filter(|&c| c != ',').collect();
    plain.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// An integer cell such as `ID`, `Stream` or `2,752`.
pub(super) fn parse_u64(cell: &str) -> Option<u64> {
    let s = cell.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit() || b == b',') {
        return None;
    }
    let plain: String = s.chars().filter(|&c| c != ',').collect();
    plain.parse().ok()
}

/// `v` as a `u64` when it is a whole, non-negative number that fits.
pub(super) fn whole_u64(v: f64) -> Option<u64> {
    // 2^64 is exactly representable; anything below it and whole converts without loss of range.
    (v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 18_446_744_073_709_551_616.0)
        .then_some(v as u64)
}

/// `v` as a `u32` when it is a whole, non-negative number that fits.
pub(super) fn whole_u32(v: f64) -> Option<u32> {
    whole_u64(v).and_then(|n| u32::try_from(n).ok())
}

/// A launch dimension cell such as `(224, 1, 1)`.
pub(super) fn parse_dim3(cell: &str) -> Option<[u32; 3]> {
    let inner = cell.trim().strip_prefix('(')?.strip_suffix(')')?;
    let mut parts = inner.split(',').map(|p| p.trim().parse::<u32>().ok());
    let dims = [parts.next()??, parts.next()??, parts.next()??];
    parts.next().is_none().then_some(dims)
}

/// What a number cell says about the decimal separator of the locale that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Evidence {
    /// Only a `.`-decimal locale writes it: `0.53`, `9,495.42`, `1,215,000`.
    DotDecimal,
    /// Only a `,`-decimal locale writes it: `0,53`, `9.495,42`, `1.215.000`.
    CommaDecimal,
    /// Either could: `2,752` (2752, or 2.752), `1.215`, or no separator at all.
    Ambiguous,
}

fn evidence(cell: &str) -> Evidence {
    let s = cell.trim();
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    if s.is_empty()
        || !s.bytes().any(|b| b.is_ascii_digit())
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b',' || b == b'.')
    {
        return Evidence::Ambiguous;
    }
    let last_comma = s.rfind(',');
    let last_dot = s.rfind('.');
    let commas = s.matches(',').count();
    let dots = s.matches('.').count();
    // `1,234` or `1.234`: a single separator followed by exactly three digits, after one to three
    // digits that do not start with 0, is a thousands group in one locale and a decimal in the
    // other.
    let could_be_group = |int: &str, frac: &str| {
        frac.len() == 3 && (1..=3).contains(&int.len()) && !int.starts_with('0')
    };
    match (last_comma, last_dot) {
        (None, None) => Evidence::Ambiguous,
        (Some(c), Some(d)) => {
            if c > d {
                Evidence::CommaDecimal
            } else {
                Evidence::DotDecimal
            }
        }
        (Some(c), None) => {
            if commas > 1 {
                Evidence::DotDecimal
            } else if could_be_group(&s[..c], &s[c + 1..]) {
                Evidence::Ambiguous
            } else {
                Evidence::CommaDecimal
            }
        }
        (None, Some(d)) => {
            if dots > 1 {
                Evidence::CommaDecimal
            } else if could_be_group(&s[..d], &s[d + 1..]) {
                Evidence::Ambiguous
            } else {
                Evidence::DotDecimal
            }
        }
    }
}

/// Tallies, over a file's metric values, the cells that reveal the decimal separator.
#[derive(Debug, Default)]
pub(super) struct LocaleCheck {
    dot: u64,
    comma: u64,
    comma_example: Option<String>,
}

impl LocaleCheck {
    pub(super) fn observe(&mut self, cell: &str) {
        match evidence(cell) {
            Evidence::DotDecimal => self.dot += 1,
            Evidence::CommaDecimal => {
                self.comma += 1;
                if self.comma_example.is_none() {
                    self.comma_example = Some(cell.trim().to_string());
                }
            }
            Evidence::Ambiguous => {}
        }
    }

    /// Fails when the file reads as written with a comma decimal separator. Ambiguous values
    /// alone (`2,752`) are taken as en-US, which is what ncu writes under the C locale. A file
    /// with evidence both ways goes by the majority; the caller reports the conflict.
    pub(super) fn check(&self, path: &Path) -> Result<(), IngestError> {
        if self.comma > self.dot {
            let example = self.comma_example.as_deref().unwrap_or_default();
            return Err(IngestError::invalid(
                what::NCU,
                path,
                format!(
                    "numbers use a comma as the decimal separator (`{example}`); re-run ncu with \
                     LC_ALL=C or LC_NUMERIC=C"
                ),
            ));
        }
        Ok(())
    }

    /// Whether some values read as comma-decimal although the majority did not.
    pub(super) fn conflicting_example(&self) -> Option<&str> {
        (self.comma > 0 && self.dot > 0)
            .then_some(self.comma_example.as_deref())
            .flatten()
    }
}

/// The factor that turns a value printed in `unit` into base units: ns for time, bytes, Hz,
/// and per-second rates (`Gbyte/s` → byte/s, `cycle/nsecond` → Hz). Counts (`cycle`, `inst`,
/// `warp`, `register/thread`, ...) and `%` are already base units. `None` for units this
/// table does not know; the caller keeps the number as printed.
pub(super) fn unit_factor(unit: &str) -> Option<f64> {
    let u = unit.trim();
    if u.is_empty() || u == "%" {
        return Some(1.0);
    }
    match u.split_once('/') {
        None => quantity_factor(u),
        Some((num, den)) => {
            let num = quantity_factor(num.trim())?;
            let den = den.trim();
            // A rate per unit of time is per second, whatever the printed prefix.
            let den = match time_ns(den) {
                Some(ns) => ns / 1e9,
                None => quantity_factor(den)?,
            };
            Some(num / den)
        }
    }
}

/// Factor to base units of one unit without a `/`.
fn quantity_factor(u: &str) -> Option<f64> {
    time_ns(u)
        .or_else(|| byte_factor(u))
        .or_else(|| hertz_factor(u))
        .or_else(|| count_factor(u))
}

/// Nanoseconds in one `u`.
fn time_ns(u: &str) -> Option<f64> {
    Some(match u {
        "second" | "seconds" | "s" | "sec" => 1e9,
        "msecond" | "mseconds" | "ms" | "msec" => 1e6,
        "usecond" | "useconds" | "us" | "usec" | "µs" | "μs" => 1e3,
        "nsecond" | "nseconds" | "ns" | "nsec" => 1.0,
        "psecond" | "pseconds" | "ps" | "psec" => 1e-3,
        _ => return None,
    })
}

/// Decimal (`Kbyte`, `KB`) and binary (`KiB`) byte multiples.
fn byte_factor(u: &str) -> Option<f64> {
    let lower = u.to_ascii_lowercase();
    let prefix = lower
        .strip_suffix("bytes")
        .or_else(|| lower.strip_suffix("byte"))
        .or_else(|| lower.strip_suffix('b'))?;
    Some(match prefix {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        "p" => 1e15,
        "ki" => 1024.0,
        "mi" => 1024.0 * 1024.0,
        "gi" => 1024.0 * 1024.0 * 1024.0,
        "ti" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    })
}

/// `hz`, `Khz`, `Mhz`, `Ghz` in any case.
fn hertz_factor(u: &str) -> Option<f64> {
    Some(match u.to_ascii_lowercase().as_str() {
        "hz" => 1.0,
        "khz" => 1e3,
        "mhz" => 1e6,
        "ghz" => 1e9,
        "thz" => 1e12,
        _ => return None,
    })
}

/// Count units ncu prints next to plain numbers, optionally with a decimal prefix (`Kinst`).
fn count_factor(u: &str) -> Option<f64> {
    const COUNTS: &[&str] = &[
        "cycle",
        "inst",
        "instruction",
        "warp",
        "block",
        "thread",
        "register",
        "sm",
        "cluster",
        "pass",
        "sector",
        "request",
        "wavefront",
        "transaction",
        "flop",
        "op",
        "sample",
        "tpc",
        "quad",
        "line",
        "tensor",
        "event",
    ];
    let is_count = |w: &str| {
        let w = w.to_ascii_lowercase();
        let singular = w.strip_suffix('s').unwrap_or(&w);
        COUNTS.contains(&w.as_str()) || COUNTS.contains(&singular)
    };
    if is_count(u) {
        return Some(1.0);
    }
    let (factor, rest) = match u.split_at_checked(1)? {
        ("K" | "k", rest) => (1e3, rest),
        ("M", rest) => (1e6, rest),
        ("G", rest) => (1e9, rest),
        ("T", rest) => (1e12, rest),
        _ => return None,
    };
    is_count(rest).then_some(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators_and_na() {
        assert_eq!(parse_number("2,752"), Some(2752.0));
        assert_eq!(parse_number("150,109,880,320"), Some(150_109_880_320.0));
        assert_eq!(parse_number("9,495.42"), Some(9495.42));
        assert_eq!(parse_number("n/a"), None);
        assert_eq!(parse_number(""), None);
        assert_eq!(parse_number("PolicySpread"), None);
        assert_eq!(parse_number("(224, 1, 1)"), None);
        assert_eq!(parse_number("inf"), None);
        assert_eq!(parse_u64("1,024"), Some(1024));
        assert_eq!(parse_dim3("(32, 4, 1)"), Some([32, 4, 1]));
        assert_eq!(parse_dim3("(32, 4)"), None);
        assert_eq!(parse_dim3("(32, 4, 1, 1)"), None);
    }

    #[test]
    fn units_scale_to_base() {
        let cases = [
            ("us", 6.75, 6750.0),
            ("usecond", 1.5, 1500.0),
            ("msecond", 2.0, 2e6),
            ("nsecond", 3.0, 3.0),
            ("second", 1.0, 1e9),
            ("Mbyte", 2.33, 2_330_000.0),
            ("Kbyte", 175.10, 175_100.0),
            ("KB", 1.0, 1000.0),
            ("KiB", 1.0, 1024.0),
            ("GiB", 1.0, 1073741824.0),
            ("Ghz", 1.99, 1.99e9),
            ("MHz", 1.0, 1e6),
            ("Gbyte/s", 345.14, 345.14e9),
            ("Tbyte/second", 1.0, 1e12),
            ("byte/second", 5.0, 5.0),
            ("cycle/nsecond", 1.98, 1.98e9),
            ("Kbyte/block", 1.0, 1000.0),
            ("register/thread", 32.0, 32.0),
            ("inst/cycle", 0.5, 0.5),
            ("%", 19.66, 19.66),
            ("", 7.0, 7.0),
        ];
        for (unit, v, want) in cases {
            let got = unit_factor(unit).map(|f| v * f);
            let ok = got.is_some_and(|g| (g - want).abs() <= want.abs() * 1e-12);
            assert!(ok, "{v} {unit}: got {got:?}, want {want}");
        }
        assert_eq!(unit_factor("furlong"), None);
        assert_eq!(unit_factor("Xbyte"), None);
    }

    #[test]
    fn locale_evidence() {
        use Evidence::*;
        for (s, want) in [
            ("0.53", DotDecimal),
            ("19.66", DotDecimal),
            ("9,495.42", DotDecimal),
            ("1,215,000", DotDecimal),
            ("0.123", DotDecimal),
            ("0,53", CommaDecimal),
            ("9.495,42", CommaDecimal),
            ("1.215.000", CommaDecimal),
            ("1234,567", CommaDecimal),
            ("2,752", Ambiguous),
            ("1.215", Ambiguous),
            ("42", Ambiguous),
            ("n/a", Ambiguous),
            ("NVIDIA H200", Ambiguous),
        ] {
            assert_eq!(evidence(s), want, "{s}");
        }
    }
}
