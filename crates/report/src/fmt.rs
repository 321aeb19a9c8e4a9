//! Number formatting: the one copy every view uses (terminal, site, `report.md`, charts,
//! viewer, the analysis' evidence text). Each function says its unit and precision.

/// An integer with thousands separators: `20,505`.
pub fn thousands(n: u64) -> String {
    group_thousands(&n.to_string())
}

/// A signed integer's text (`-1234`) with thousands separators (`-1,234`).
pub fn group_thousands(digits: &str) -> String {
    let (sign, digits) = match digits.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", digits),
    };
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    out.push_str(sign);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Nanoseconds as milliseconds with three decimals (table cells): `397.912`.
pub fn ms(ns: u64) -> String {
    ms_f(ns as f64)
}

/// Nanoseconds (a mean or median) as milliseconds with three decimals.
pub fn ms_f(ns: f64) -> String {
    format!("{:.3}", ns / 1e6)
}

/// Nanoseconds as microseconds with two decimals (table cells): `12.34`.
pub fn us(ns: f64) -> String {
    format!("{:.2}", ns / 1e3)
}

/// A percentage with one decimal (table cells): `41.0`.
pub fn pct(p: f64) -> String {
    format!("{p:.1}")
}

/// A ratio (0–1) as a percentage with two decimals (MFU, MBU): `0.4123` → `41.23`.
pub fn ratio_pct(v: Option<f64>) -> String {
    opt(v, |x| format!("{:.2}", x * 100.0))
}

/// A value with `decimals` decimals, `n/a` when missing.
pub fn fixed(v: Option<f64>, decimals: usize) -> String {
    opt(v, |x| format!("{x:.decimals$}"))
}

/// `f(v)`, or `n/a` when the value is missing.
pub fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| NA.to_string())
}

/// What a cell shows for a value that was not measured or cannot be computed.
pub const NA: &str = "n/a";

/// Milliseconds in prose, one decimal: `12.3 ms`.
pub fn ms_text(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

/// Microseconds in prose, one decimal: `4.2 µs`.
pub fn us_text(ns: f64) -> String {
    format!("{:.1} µs", ns / 1e3)
}

/// Bytes in GiB with one decimal: `79.6 GiB`.
pub fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// A memory size: MiB with one decimal below 1 GiB, else GiB with two (`12.3 MiB`,
/// `1.17 GiB`).
pub fn bytes(b: f64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    if b.abs() < GIB {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    } else {
        format!("{:.2} GiB", b / GIB)
    }
}

/// Bytes per second in GB/s, no decimal: `3352 GB/s`.
pub fn gbps(bytes_per_s: u64) -> String {
    format!("{:.0} GB/s", bytes_per_s as f64 / 1e9)
}

/// Joules with three significant digits: `0.0123` → `0.012`, `1.23`, `123`.
pub fn joules(j: f64) -> String {
    if j.abs() >= 100.0 {
        format!("{j:.0}")
    } else if j.abs() >= 10.0 {
        format!("{j:.1}")
    } else if j.abs() >= 1.0 {
        format!("{j:.2}")
    } else {
        format!("{j:.3}")
    }
}

/// A count per step or per launch: no decimal from 100 up, one below (`1032`, `4.0`, `1.5`);
/// `–` when unknown.
pub fn per_step(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.1}"),
    }
}

/// A figure of any size with about three significant digits, thousands grouped from 1000:
/// `1,032`, `258`, `16.4`, `1.62`; `n/a` when missing.
pub fn figure(v: Option<f64>) -> String {
    match v {
        None => NA.into(),
        Some(x) if x >= 1000.0 => thousands(x.round() as u64),
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) if x >= 10.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.2}"),
    }
}

/// A bar or axis label: no decimal from 100 up, one from 1, two below: `123`, `35.2`, `0.53`.
pub fn compact(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A duration in ms with at least three significant digits, grouped thousands, and its
/// unit: `0.042 ms`, `4.22 ms`, `38.3 ms`, `1,213 ms`; `–` when not finite.
pub fn ms_label(ms: f64) -> String {
    if !ms.is_finite() {
        return "–".to_string();
    }
    let text = if ms >= 100.0 {
        group_thousands(&format!("{ms:.0}"))
    } else if ms >= 10.0 {
        format!("{ms:.1}")
    } else if ms >= 1.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.3}")
    };
    format!("{text} ms")
}

/// A share with one decimal and its `%`: `41.0%`, `<0.1%` for small non-zero shares.
pub fn share_label(pct: f64) -> String {
    if !pct.is_finite() {
        "–".to_string()
    } else if pct > 0.0 && pct < 0.05 {
        "<0.1%".to_string()
    } else {
        format!("{pct:.1}%")
    }
}

/// A duration in ns with the unit that keeps three significant figures: `812 ns`, `4.21 µs`,
/// `13.0 ms`, `2.50 s`.
pub fn duration(ns: f64) -> String {
    let a = ns.abs();
    let (v, unit) = if a < 1e3 {
        (ns, "ns")
    } else if a < 1e6 {
        (ns / 1e3, "µs")
    } else if a < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    if unit == "ns" {
        format!("{v:.0} {unit}")
    } else if v.abs() < 10.0 {
        format!("{v:.2} {unit}")
    } else if v.abs() < 100.0 {
        format!("{v:.1} {unit}")
    } else {
        format!("{v:.0} {unit}")
    }
}

/// Nanoseconds as exact microseconds with three decimals (`-1.500`, `12.034`), as Chrome
/// traces give `ts` and `dur`: no float, so every ns survives.
pub fn us_exact(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

/// A float as a JSON number (Rust's shortest round-trip text); `null` for NaN and infinities,
/// which JSON cannot hold.
pub fn json_f64(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_grouped() {
        assert_eq!(thousands(20505), "20,505");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(group_thousands("-1234"), "-1,234");
    }

    #[test]
    fn cells_have_fixed_precision() {
        assert_eq!(ms(397_911_601), "397.912");
        assert_eq!(us(12_345.0), "12.35");
        assert_eq!(pct(41.04), "41.0");
        assert_eq!(ratio_pct(Some(0.41234)), "41.23");
        assert_eq!(ratio_pct(None), "n/a");
        assert_eq!(per_step(Some(1032.4)), "1032");
        assert_eq!(per_step(Some(4.04)), "4.0");
        assert_eq!(figure(Some(1032.4)), "1,032");
        assert_eq!(figure(Some(1.624)), "1.62");
    }

    #[test]
    fn labels_keep_three_figures() {
        assert_eq!(compact(123.4), "123");
        assert_eq!(compact(35.24), "35.2");
        assert_eq!(compact(0.534), "0.53");
        assert_eq!(ms_label(1213.0), "1,213 ms");
        assert_eq!(ms_label(0.0421), "0.042 ms");
        assert_eq!(share_label(0.01), "<0.1%");
        assert_eq!(duration(812.0), "812 ns");
        assert_eq!(duration(4_213.0), "4.21 µs");
        assert_eq!(duration(13_040_000.0), "13.0 ms");
        assert_eq!(duration(2.5e9), "2.50 s");
        assert_eq!(joules(0.01234), "0.012");
        assert_eq!(joules(123.4), "123");
    }

    #[test]
    fn prose_carries_the_unit() {
        assert_eq!(ms_text(12_340_000), "12.3 ms");
        assert_eq!(us_text(4_210.0), "4.2 µs");
        assert_eq!(gib(80 << 30), "80.0 GiB");
        assert_eq!(gbps(3_352_000_000_000), "3352 GB/s");
    }

    #[test]
    fn chrome_times_keep_every_ns() {
        assert_eq!(us_exact(12_034), "12.034");
        assert_eq!(us_exact(-1_500), "-1.500");
        assert_eq!(us_exact(7), "0.007");
        assert_eq!(json_f64(2.5), "2.5");
        assert_eq!(json_f64(f64::NAN), "null");
    }
}
