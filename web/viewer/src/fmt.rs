//! Time-axis ticks and their labels; other numbers are formatted by the report crate (its
//! `duration` and `thousands` are re-exported here for the viewer's modules).

pub use llmprof_report::fmt::{duration, thousands};

/// A time-axis tick step (ns) of 1, 2 or 5 × 10^k so that about `target` ticks span `span_ns`.
pub fn tick_step(span_ns: f64, target: f64) -> f64 {
    if span_ns.is_nan() || target.is_nan() || span_ns <= 0.0 || target <= 0.0 {
        return 1.0;
    }
    let raw = span_ns / target;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let step = if norm < 1.5 {
        1.0
    } else if norm < 3.5 {
        2.0
    } else if norm < 7.5 {
        5.0
    } else {
        10.0
    };
    (step * mag).max(1.0)
}

/// A time-axis label for tick `t` (ns) on a grid of `step` ns: the unit of `t`, with as many
/// decimals as the step needs, so ticks 100 ns apart at 5 s read `5.0000001 s`, not `5.00 s`.
pub fn tick_label(t: f64, step: f64) -> String {
    let a = t.abs().max(step.abs());
    let (unit, name) = if a < 1e3 {
        (1.0, "ns")
    } else if a < 1e6 {
        (1e3, "µs")
    } else if a < 1e9 {
        (1e6, "ms")
    } else {
        (1e9, "s")
    };
    let rel = (step / unit).abs();
    let decimals = if rel >= 1.0 || rel == 0.0 || !rel.is_finite() {
        0
    } else {
        (-rel.log10()).ceil().clamp(0.0, 9.0) as usize
    };
    format!("{:.*} {name}", decimals, t / unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_1_2_5() {
        assert_eq!(tick_step(1e9, 10.0), 1e8);
        assert_eq!(tick_step(3e6, 10.0), 2e5);
        assert_eq!(tick_step(4e3, 10.0), 500.0);
        assert_eq!(tick_step(0.0, 10.0), 1.0);
    }

    #[test]
    fn tick_labels_carry_the_step_precision() {
        assert_eq!(tick_label(5_000_000_100.0, 100.0), "5.0000001 s");
        assert_eq!(tick_label(200e6, 100e6), "200 ms");
        assert_eq!(tick_label(1.2e9, 2e8), "1.2 s");
        assert_eq!(tick_label(0.0, 5e5), "0 µs");
        assert_eq!(tick_label(500.0, 100.0), "500 ns");
    }
}
