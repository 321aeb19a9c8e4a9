//! Distribution-free statistics of repeated measures: the confidence interval of a median
//! (order statistics, exact binomial coverage) and of the shift between two samples
//! (Hodges–Lehmann estimate with the Mann–Whitney interval: exact distribution for small
//! samples, normal approximation from 400 pairs up), and the verdict a diff may draw from it.
//! Nothing here assumes normal data; a sample too small for the level gets no interval, and no
//! verdict is drawn without one.

/// The confidence level every interval is computed at.
pub const LEVEL: f64 = 0.95;

/// The median of a sample with its confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MedianCi {
    pub n: usize,
    pub median: f64,
    /// The interval `[lo, hi]` and the coverage it really has (at least [`LEVEL`]); `None` when
    /// the sample is too small (fewer than 6 values at 95%).
    pub ci: Option<(f64, f64, f64)>,
    /// Coefficient of variation (std / mean), in percent.
    pub cv_pct: f64,
    /// Fresh processes the sample came from (1 for one process).
    pub processes: usize,
    /// With several processes: the coefficient of variation of their medians, percent — the
    /// spread between processes, which one process's iterations do not show.
    pub between_cv_pct: Option<f64>,
    /// `true` when the interval is the between-process one ([`pooled_median_ci`]), wider than
    /// the order-statistics interval of the pooled iterations.
    pub widened: bool,
}

impl MedianCi {
    /// The interval's larger half-width in percent of the median; `None` without an interval
    /// or with a zero median.
    pub fn half_width_pct(&self) -> Option<f64> {
        let (lo, hi, _) = self.ci?;
        (self.median != 0.0)
            .then(|| (self.median - lo).max(hi - self.median) / self.median.abs() * 100.0)
    }

    /// How the interval was computed, for a source line.
    pub fn method(&self) -> &'static str {
        if self.widened {
            "95% CI from the spread of the process medians (Student t), wider than the \
             order-statistics interval of the pooled iterations"
        } else if self.processes > 1 {
            "95% CI from order statistics of the pooled iterations (distribution-free), at \
             least as wide as the spread of the process medians allows"
        } else {
            "95% CI from order statistics (distribution-free)"
        }
    }
}

/// The median of `x` (the mean of the two middle values for an even count); `None` for an
/// empty sample or one holding a non-finite value.
pub fn median(x: &[f64]) -> Option<f64> {
    median_ci(x).map(|m| m.median)
}

/// The median of `x` and its distribution-free interval: `[x(k), x(n+1-k)]` for the largest `k`
/// whose binomial coverage `1 - 2·P(Bin(n, ½) < k)` is at least [`LEVEL`]. `None` for an
/// empty sample or one holding a non-finite value.
pub fn median_ci(x: &[f64]) -> Option<MedianCi> {
    if x.is_empty() || x.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut s = x.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    let mut ci = None;
    let mut below = 0.0; // P(Bin(n, 1/2) < k)
    for k in 1..=n / 2 {
        below += binomial_half(n, k - 1);
        let coverage = 1.0 - 2.0 * below;
        if coverage < LEVEL {
            break;
        }
        ci = Some((s[k - 1], s[n - k], coverage));
    }
    let mean = s.iter().sum::<f64>() / n as f64;
    let var = s.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n.max(2) - 1) as f64;
    let cv_pct = if mean != 0.0 {
        var.sqrt() / mean.abs() * 100.0
    } else {
        0.0
    };
    Some(MedianCi {
        n,
        median,
        ci,
        cv_pct,
        processes: 1,
        between_cv_pct: None,
        widened: false,
    })
}

/// The median of iterations pooled from several fresh processes, with an interval that pools
/// the variance between them: iterations of one process share its placement, clocks and
/// allocator state, so their own interval understates how far another process lands. The
/// interval is the wider of the order-statistics interval of all iterations and
/// `median ± t(0.975, k−1) · s / √k`, `s` the standard deviation of the `k` process medians.
/// One process gives [`median_ci`]'s answer; empty groups are ignored.
pub fn pooled_median_ci(groups: &[Vec<f64>]) -> Option<MedianCi> {
    let groups: Vec<&Vec<f64>> = groups.iter().filter(|g| !g.is_empty()).collect();
    let all: Vec<f64> = groups.iter().flat_map(|g| g.iter().copied()).collect();
    let mut m = median_ci(&all)?;
    let k = groups.len();
    m.processes = k.max(1);
    if k < 2 {
        return Some(m);
    }
    let medians: Vec<f64> = groups
        .iter()
        .filter_map(|g| median_ci(g))
        .map(|c| c.median)
        .collect();
    let mean = medians.iter().sum::<f64>() / k as f64;
    let sd = (medians.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (k - 1) as f64).sqrt();
    m.between_cv_pct = (mean != 0.0).then(|| sd / mean.abs() * 100.0);
    let half = student_t_975(k - 1) * sd / (k as f64).sqrt();
    let (lo, hi) = (m.median - half, m.median + half);
    match m.ci {
        Some((a, b, c)) if a <= lo && b >= hi => m.ci = Some((a, b, c)),
        Some((a, b, _)) => {
            m.ci = Some((a.min(lo), b.max(hi), LEVEL));
            m.widened = true;
        }
        None => {
            m.ci = Some((lo, hi, LEVEL));
            m.widened = true;
        }
    }
    Some(m)
}

/// The 97.5% quantile of Student's t with `df` degrees of freedom (two-sided 95%).
fn student_t_975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    T.get(df.max(1) - 1).copied().unwrap_or(1.96)
}

/// `P(Bin(n, ½) = k)`, through logarithms so large `n` does not overflow.
fn binomial_half(n: usize, k: usize) -> f64 {
    let ln_choose = ln_factorial(n) - ln_factorial(k) - ln_factorial(n - k);
    (ln_choose - n as f64 * std::f64::consts::LN_2).exp()
}

fn ln_factorial(n: usize) -> f64 {
    (2..=n).map(|i| (i as f64).ln()).sum()
}

/// How `b` differs from `a`: the Hodges–Lehmann shift (the median of every `b_j − a_i`) and its
/// Mann–Whitney confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shift {
    pub delta: f64,
    /// `[lo, hi]` of the shift and its real coverage; `None` when the samples are too small for
    /// [`LEVEL`] (3 against 3 reach 90% at best).
    pub ci: Option<(f64, f64, f64)>,
}

/// The shift from `a` to `b`; `None` when either sample is empty or holds a non-finite value.
pub fn shift(a: &[f64], b: &[f64]) -> Option<Shift> {
    let finite = |x: &[f64]| !x.is_empty() && x.iter().all(|v| v.is_finite());
    if !finite(a) || !finite(b) {
        return None;
    }
    let mut d: Vec<f64> = b
        .iter()
        .flat_map(|y| a.iter().map(move |x| y - x))
        .collect();
    d.sort_by(f64::total_cmp);
    let nm = d.len();
    let delta = if nm % 2 == 1 {
        d[nm / 2]
    } else {
        (d[nm / 2 - 1] + d[nm / 2]) / 2.0
    };
    let ci = mann_whitney_k(a.len(), b.len()).map(|(k, coverage)| (d[k - 1], d[nm - k], coverage));
    Some(Shift { delta, ci })
}

/// The rank `k` (1-based) of the pairwise differences that bound the interval, and its coverage:
/// the largest `k` with `1 − 2·P(U < k) ≥` [`LEVEL`], `U` the Mann–Whitney statistic under no
/// shift.
fn mann_whitney_k(n: usize, m: usize) -> Option<(usize, f64)> {
    let nm = n * m;
    if nm <= 400 {
        let counts = mann_whitney_counts(n, m);
        let total: f64 = counts.iter().sum();
        let mut below = 0.0;
        let mut best = None;
        for k in 1..=nm / 2 {
            below += counts[k - 1] / total;
            let coverage = 1.0 - 2.0 * below;
            if coverage < LEVEL {
                break;
            }
            best = Some((k, coverage));
        }
        best
    } else {
        // Normal approximation of U: mean nm/2, variance nm(n+m+1)/12.
        let z = 1.959_963_984_540_054;
        let sd = (nm as f64 * (n + m + 1) as f64 / 12.0).sqrt();
        let k = (nm as f64 / 2.0 - z * sd).floor();
        (k >= 1.0).then_some((k as usize, LEVEL))
    }
}

/// How many of the `C(n+m, n)` orderings give each value of `U` (0..=nm): the recurrence
/// `c(n, m, u) = c(n−1, m, u−m) + c(n, m−1, u)`, built up over `n` and `m`.
fn mann_whitney_counts(n: usize, m: usize) -> Vec<f64> {
    // table[j] holds the counts for sizes (i, j) as i grows.
    let mut table: Vec<Vec<f64>> = (0..=m).map(|_| vec![1.0]).collect();
    for i in 1..=n {
        let mut row: Vec<Vec<f64>> = Vec::with_capacity(m + 1);
        row.push(vec![1.0]); // (i, 0): U = 0 only
        for j in 1..=m {
            let mut c = vec![0.0; i * j + 1];
            for (u, v) in table[j].iter().enumerate() {
                c[u + j] += v; // (i−1, j) shifted by j
            }
            for (u, v) in row[j - 1].iter().enumerate() {
                c[u] += v; // (i, j−1)
            }
            row.push(c);
        }
        table = row;
    }
    table.pop().unwrap_or_else(|| vec![1.0])
}

/// What a diff may say of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// `b` is larger (slower, for a time) and the interval of the shift excludes 0.
    Higher,
    /// `b` is smaller and the interval excludes 0.
    Lower,
    /// The interval holds 0.
    NoChange,
    /// Too few samples for an interval at [`LEVEL`]: nothing can be claimed.
    TooFewSamples,
}

impl Verdict {
    /// The verdict a shift supports.
    pub fn of(s: &Shift) -> Verdict {
        match s.ci {
            None => Verdict::TooFewSamples,
            Some((lo, _, _)) if lo > 0.0 => Verdict::Higher,
            Some((_, hi, _)) if hi < 0.0 => Verdict::Lower,
            Some(_) => Verdict::NoChange,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed xorshift generator, so the trials are the same on every machine.
    struct Rng(u64);

    impl Rng {
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }

        /// A skewed, right-tailed sample like latencies: 100 × (1 + 0.03·E), E exponential.
        fn latency(&mut self, scale: f64) -> f64 {
            scale * (1.0 - 0.03 * (1.0 - self.uniform()).ln())
        }
    }

    #[test]
    fn median_intervals_have_their_exact_coverage() {
        assert!(median_ci(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap().ci.is_none());
        let six = median_ci(&[6.0, 1.0, 5.0, 2.0, 4.0, 3.0]).unwrap();
        assert_eq!(six.median, 3.5);
        // k = 1: coverage 1 − 2/64 = 0.96875.
        assert_eq!(six.ci, Some((1.0, 6.0, 1.0 - 2.0 / 64.0)));
        assert!(median_ci(&[]).is_none());
        assert!(median_ci(&[1.0, f64::NAN]).is_none());
    }

    /// Two processes that each agree with themselves but not with each other: the pooled
    /// interval must cover both process medians, and say it was widened.
    #[test]
    fn pooled_intervals_carry_the_spread_between_processes() {
        let p1: Vec<f64> = (0..20).map(|i| 100.0 + (i % 3) as f64 * 0.1).collect();
        let p2: Vec<f64> = (0..20).map(|i| 120.0 + (i % 3) as f64 * 0.1).collect();
        let one = pooled_median_ci(std::slice::from_ref(&p1)).unwrap();
        assert_eq!((one.processes, one.widened), (1, false));
        let m = pooled_median_ci(&[p1, p2, Vec::new()]).unwrap();
        let (lo, hi, _) = m.ci.unwrap();
        assert!(m.widened && m.processes == 2);
        assert!(lo < 100.0 && hi > 120.0, "[{lo}, {hi}]");
        assert!((m.between_cv_pct.unwrap() - 12.86).abs() < 0.1);
        assert!(m.half_width_pct().unwrap() > 50.0);
        // Processes that agree: the order-statistics interval stands.
        let same: Vec<Vec<f64>> = (0..3)
            .map(|_| (0..10).map(|i| 100.0 + i as f64).collect())
            .collect();
        let m = pooled_median_ci(&same).unwrap();
        assert!(!m.widened && m.between_cv_pct == Some(0.0));
    }

    #[test]
    fn the_mann_whitney_distribution_is_exact() {
        // Sizes 3 and 3: 20 orderings; U = 0 and U = 9 once each.
        let c = mann_whitney_counts(3, 3);
        assert_eq!(c.len(), 10);
        assert_eq!(c.iter().sum::<f64>(), 20.0);
        assert_eq!((c[0], c[9], c[4]), (1.0, 1.0, 3.0));
        // 3 against 3 reaches 90% at best: no 95% interval, so no verdict.
        let s = shift(&[1.0, 2.0, 3.0], &[11.0, 12.0, 13.0]).unwrap();
        assert_eq!(s.delta, 10.0);
        assert_eq!(Verdict::of(&s), Verdict::TooFewSamples);
    }

    /// Equal distributions: "no change" at the stated rate; a 10% shift: detected.
    #[test]
    fn false_positives_stay_near_five_percent_and_a_ten_percent_shift_is_found() {
        for (n, trials) in [(10, 400), (30, 200)] {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
            let mut false_calls = 0;
            let mut found = 0;
            for _ in 0..trials {
                let a: Vec<f64> = (0..n).map(|_| rng.latency(100.0)).collect();
                let same: Vec<f64> = (0..n).map(|_| rng.latency(100.0)).collect();
                let slower: Vec<f64> = (0..n).map(|_| rng.latency(110.0)).collect();
                if Verdict::of(&shift(&a, &same).unwrap()) != Verdict::NoChange {
                    false_calls += 1;
                }
                if Verdict::of(&shift(&a, &slower).unwrap()) == Verdict::Higher {
                    found += 1;
                }
            }
            let rate = false_calls as f64 / trials as f64;
            assert!(rate <= 0.08, "n={n}: {false_calls} false calls in {trials}");
            assert!(
                found as f64 >= 0.95 * trials as f64,
                "n={n}: found {found} of {trials}"
            );
        }
    }
}
