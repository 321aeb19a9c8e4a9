//! The kernel and kernel-category rows of a [`Diff`](crate::diff::Diff): for each measured
//! stage both runs have, the GPU kernel time of one instance in each kernel category and for
//! each top kernel that both runs have a series for, compared as the stage walls are (both
//! medians with their intervals, the shift and its interval, the verdict).
//!
//! The samples are the bundle's `instance_kernels[]`, written once by ingest (one value per
//! instance of the stage; see the bundle crate's `samples.rs`). Kernels are matched across
//! the runs by their full name. A run ingested before those samples existed gets no such rows,
//! and the diff says why in one note.
//!
//! Keys, as a budget names them: `STAGE.category.CATEGORY` (`decode.category.gemm`,
//! `decode.category.reduction/norm`) and `STAGE.kernel.KERNEL`, `KERNEL` being the kernel's
//! short name with every character other than a letter, digit or `_` replaced by `_`, and,
//! where two compared kernels of the stage share it, `~` and eight hex digits of the full
//! name's FNV-1a hash (`decode.kernel.elementwise_kernel~1a2b3c4d`).

use std::collections::BTreeMap;

use llmprof_bundle::{is_warmup, names, Bundle, Category, InstanceKernels, Stage};

use crate::diff::{compare, DiffRow};

/// One run's kernel time per instance in one stage (every top-level stage of that name), ms.
#[derive(Debug, Default)]
struct StageSeries {
    categories: BTreeMap<Category, Vec<f64>>,
    /// Per kernel (full name, short name), in the run's `kernels[]` order.
    kernels: Vec<(String, String, Vec<f64>)>,
}

/// The kernel and category rows of B against A for the stages `stages` (the measured stages
/// both runs have, in A's order), and a note for each run that has no samples at all.
pub(crate) fn rows(a: &Bundle, b: &Bundle, stages: &[String]) -> (Vec<DiffRow>, Vec<String>) {
    let mut notes = Vec::new();
    for run in [a, b] {
        if run.instance_kernels.is_empty() && has_measured_stage(run) {
            notes.push(format!(
                "kernels and kernel categories are not diffed: run `{}` holds no per-instance \
                 kernel samples (ingested by an llmprof that did not write them; ingesting its \
                 traces again adds them)",
                run.run_id
            ));
        }
    }
    let mut rows = Vec::new();
    for name in stages {
        if let (Some(x), Some(y)) = (stage_series(a, name), stage_series(b, name)) {
            rows.extend(category_rows(name, &x, &y));
            rows.extend(kernel_rows(name, &x, &y));
        }
    }
    (rows, notes)
}

fn has_measured_stage(b: &Bundle) -> bool {
    b.workload_stages()
        .any(|s| s.depth == 0 && !is_warmup(&s.name))
}

fn category_rows(stage: &str, x: &StageSeries, y: &StageSeries) -> Vec<DiffRow> {
    x.categories
        .iter()
        .filter_map(|(c, xs)| {
            let ys = y.categories.get(c)?;
            Some(compare(
                format!("{stage}.category.{}", c.as_str()),
                format!("{stage} {} kernels (ms)", c.as_str()),
                &[xs.to_vec()],
                &[ys.to_vec()],
            ))
        })
        .collect()
}

fn kernel_rows(stage: &str, x: &StageSeries, y: &StageSeries) -> Vec<DiffRow> {
    let both: Vec<(&str, &str, &[f64], &[f64])> = x
        .kernels
        .iter()
        .filter_map(|(name, short, xs)| {
            let (_, _, ys) = y.kernels.iter().find(|k| k.0 == *name)?;
            Some((name.as_str(), short.as_str(), xs.as_slice(), ys.as_slice()))
        })
        .collect();
    let keys: Vec<String> = both.iter().map(|k| key_name(k.1)).collect();
    both.iter()
        .zip(&keys)
        .map(|(&(name, _, xs, ys), key)| {
            let shared = keys.iter().filter(|k| *k == key).count() > 1;
            let key = if shared {
                format!("{key}~{:08x}", fnv1a(name))
            } else {
                key.clone()
            };
            compare(
                format!("{stage}.kernel.{key}"),
                format!("{stage} {} (ms)", names::display_name_short(name, 40)),
                &[xs.to_vec()],
                &[ys.to_vec()],
            )
        })
        .collect()
}

/// The short name with every character but letters, digits and `_` replaced by `_`, so a key
/// never holds a budget's `,`, `<=`, `>=` or `%`.
fn key_name(short: &str) -> String {
    short
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// 32-bit FNV-1a of the name's bytes: a short, stable tag that tells kernels apart.
fn fnv1a(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5, |h: u32, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The run's per-instance kernel time in stage `name` (the instances of every top-level
/// workload stage of that name, concatenated), or `None` when some such stage has no samples
/// or a series does not hold one value per instance.
fn stage_series(b: &Bundle, name: &str) -> Option<StageSeries> {
    let parts: Vec<(&Stage, &InstanceKernels)> = b
        .workload_stages()
        .filter(|s| s.depth == 0 && s.name == name)
        .map(|s| Some((s, b.instance_kernels_of(s.id)?)))
        .collect::<Option<_>>()?;
    if parts.is_empty() {
        return None;
    }
    let mut out = StageSeries::default();
    for c in Category::ALL {
        if parts
            .iter()
            .any(|(_, ik)| ik.categories.iter().any(|s| s.category == c))
        {
            let xs = concat(&parts, |ik| {
                ik.categories
                    .iter()
                    .find(|s| s.category == c)
                    .map(|s| &s.ns[..])
            })?;
            out.categories.insert(c, xs);
        }
    }
    for (kernel_name, short) in kernel_names(b, &parts) {
        let xs = concat(&parts, |ik| {
            ik.kernels
                .iter()
                .find(|s| {
                    b.kernels
                        .get(s.kernel as usize)
                        .is_some_and(|k| k.name == kernel_name)
                })
                .map(|s| &s.ns[..])
        })?;
        out.kernels.push((kernel_name, short, xs));
    }
    Some(out)
}

/// Full and short names of the kernels with a series in some part, in `kernels[]` order.
fn kernel_names(b: &Bundle, parts: &[(&Stage, &InstanceKernels)]) -> Vec<(String, String)> {
    let mut ids: Vec<u32> = parts
        .iter()
        .flat_map(|(_, ik)| ik.kernels.iter().map(|s| s.kernel))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.iter()
        .filter_map(|&id| b.kernels.get(id as usize))
        .map(|k| (k.name.clone(), k.short_name.clone()))
        .collect()
}

/// One series over all parts, ms: a part's series (which must hold one value per instance),
/// or zeros where the part has none (its instances ran no such kernel).
fn concat<'a>(
    parts: &[(&Stage, &'a InstanceKernels)],
    series: impl Fn(&'a InstanceKernels) -> Option<&'a [u64]>,
) -> Option<Vec<f64>> {
    let mut out = Vec::new();
    for (stage, ik) in parts {
        let n = stage.instance_list.len();
        match series(ik) {
            Some(ns) if ns.len() == n => out.extend(ns.iter().map(|&v| v as f64 / 1e6)),
            Some(_) => return None,
            None => out.extend(std::iter::repeat_n(0.0, n)),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use llmprof_bundle::{CategorySamples, Kernel, KernelSamples, OpKind, StageInstance};

    use super::*;
    use crate::diff::{verdict_text, Diff};
    use crate::stats::Verdict;

    /// A fixed xorshift generator: kernel times of `n` instances around `scale` ns, spread
    /// ±2% (uniform), the same on every machine.
    fn times(seed: u64, n: usize, scale: f64) -> Vec<u64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                (scale * (0.98 + 0.04 * u)) as u64
            })
            .collect()
    }

    fn kernel(id: u32, name: &str, short: &str, category: Category) -> Kernel {
        Kernel {
            id,
            kind: OpKind::Kernel,
            name: name.into(),
            short_name: short.into(),
            category,
            calls: 1,
            total_ns: 1,
            mean_ns: 1.0,
            median_ns: 1.0,
            min_ns: 1,
            max_ns: 1,
            std_ns: 0.0,
            time_pct: 0.0,
            by_stage: Vec::new(),
            launch: None,
            launch_variants: 0,
            bytes: None,
            graph_calls: 0,
            ncu: Vec::new(),
        }
    }

    /// A run with one `decode` stage whose instances ran `gemm` (a gemm kernel) and `ew` (an
    /// elementwise kernel), ns per instance; `samples: false` is a bundle from before
    /// `instance_kernels[]`.
    fn run(id: &str, gemm: &[u64], ew: &[u64], samples: bool) -> Bundle {
        let mut b = Bundle::new(id);
        let instance_list = (0..gemm.len() as i64)
            .map(|i| StageInstance {
                start_ns: i * 1_000_000,
                end_ns: i * 1_000_000 + 900_000,
                wall_ns: 900_000,
                tid: 1,
                gpu_ops: 2,
                kernel_ns: gemm[i as usize] + ew[i as usize],
                gpu_start_ns: None,
                gpu_end_ns: None,
                gpu_busy_ns: 0,
                warmup: false,
            })
            .collect();
        b.stages.push(Stage {
            name: "decode".into(),
            instances: gemm.len() as u64,
            instance_list,
            ..Stage::default()
        });
        b.kernels = vec![
            kernel(
                0,
                "void gemm_kernel<128>(Params)",
                "gemm_kernel",
                Category::Gemm,
            ),
            kernel(
                1,
                "void ew_kernel<4>(float*)",
                "ew_kernel",
                Category::Elementwise,
            ),
        ];
        if samples {
            b.instance_kernels = vec![InstanceKernels {
                stage: 0,
                categories: vec![
                    CategorySamples {
                        category: Category::Gemm,
                        ns: gemm.to_vec(),
                    },
                    CategorySamples {
                        category: Category::Elementwise,
                        ns: ew.to_vec(),
                    },
                ],
                kernels: vec![
                    KernelSamples {
                        kernel: 0,
                        ns: gemm.to_vec(),
                    },
                    KernelSamples {
                        kernel: 1,
                        ns: ew.to_vec(),
                    },
                ],
            }];
        }
        b
    }

    fn row<'a>(d: &'a Diff, key: &str) -> &'a DiffRow {
        d.rows
            .iter()
            .find(|r| r.key == key)
            .unwrap_or_else(|| panic!("no row `{key}` in {:?}", d.rows))
    }

    #[test]
    fn equal_kernel_samples_are_no_significant_change() {
        let gemm = times(7, 10, 400_000.0);
        let ew = times(11, 10, 50_000.0);
        let a = run("a", &gemm, &ew, true);
        let b = run("b", &gemm, &ew, true);
        let d = Diff::of(&a, &b);
        for key in [
            "decode.category.gemm",
            "decode.category.elementwise",
            "decode.kernel.gemm_kernel",
            "decode.kernel.ew_kernel",
        ] {
            let r = row(&d, key);
            assert_eq!(r.verdict, Verdict::NoChange, "{key}: {r:?}");
            assert_eq!(r.shift.map(|s| s.delta), Some(0.0), "{key}");
        }
        assert_eq!(
            row(&d, "decode.kernel.gemm_kernel").metric,
            "decode gemm_kernel<128> (ms)"
        );
        assert!(d.notes.is_empty(), "{:?}", d.notes);
        // Samples drawn apart from the same distribution: no change either.
        let b = run(
            "b",
            &times(99, 10, 400_000.0),
            &times(5, 10, 50_000.0),
            true,
        );
        let r = row(&Diff::of(&a, &b), "decode.kernel.gemm_kernel").clone();
        assert_eq!(r.verdict, Verdict::NoChange, "{r:?}");
    }

    #[test]
    fn a_ten_percent_slower_kernel_is_slower_and_the_others_are_not() {
        let ew = times(11, 10, 50_000.0);
        let a = run("a", &times(7, 10, 400_000.0), &ew, true);
        let b = run("b", &times(99, 10, 440_000.0), &ew, true);
        let d = Diff::of(&a, &b);
        for key in ["decode.kernel.gemm_kernel", "decode.category.gemm"] {
            let r = row(&d, key);
            assert_eq!(r.verdict, Verdict::Higher, "{key}: {r:?}");
            assert_eq!(verdict_text(r), "slower");
            let pct = r.delta_pct().unwrap();
            assert!((8.0..12.0).contains(&pct), "{key}: Δ {pct}%");
            let (lo, hi, _) = r.shift.unwrap().ci.unwrap();
            assert!(
                lo > 0.0 && lo <= 0.04 && hi >= 0.04,
                "{key}: [{lo}, {hi}] ms"
            );
        }
        assert_eq!(
            row(&d, "decode.kernel.ew_kernel").verdict,
            Verdict::NoChange
        );
        // And the other way round: faster.
        let r = row(&Diff::of(&b, &a), "decode.kernel.gemm_kernel").clone();
        assert_eq!(verdict_text(&r), "faster");
    }

    #[test]
    fn runs_without_samples_get_no_kernel_rows_and_one_note_why() {
        let (g, e) = (times(7, 6, 400_000.0), times(11, 6, 50_000.0));
        let old = run("old-run", &g, &e, false);
        let new = run("new-run", &g, &e, true);
        let d = Diff::of(&old, &new);
        assert!(d
            .rows
            .iter()
            .all(|r| !r.key.contains(".kernel.") && !r.key.contains(".category.")));
        assert_eq!(d.notes.len(), 1, "{:?}", d.notes);
        assert!(d.notes[0].contains("`old-run`"), "{}", d.notes[0]);
        // A series that does not hold one value per instance is not compared.
        let mut bad = run("bad", &g, &e, true);
        bad.instance_kernels[0].kernels[0].ns.pop();
        assert!(Diff::of(&new, &bad)
            .rows
            .iter()
            .all(|r| !r.key.contains(".kernel.")));
    }

    #[test]
    fn kernels_sharing_a_short_name_get_a_hash_in_their_key() {
        let (g, e) = (times(7, 6, 400_000.0), times(11, 6, 50_000.0));
        let mut a = run("a", &g, &e, true);
        a.kernels[1].short_name = "gemm_kernel".into();
        let d = Diff::of(&a, &a.clone());
        let keys: Vec<&str> = d
            .rows
            .iter()
            .filter(|r| r.key.contains(".kernel."))
            .map(|r| r.key.as_str())
            .collect();
        assert_eq!(keys.len(), 2);
        assert_ne!(keys[0], keys[1]);
        for k in &keys {
            let (name, hash) = k.rsplit_once('~').unwrap();
            assert_eq!(name, "decode.kernel.gemm_kernel");
            assert_eq!(hash.len(), 8);
        }
        assert_eq!(key_name("a<b>, c%"), "a_b___c_");
        // FNV-1a's published test vector.
        assert_eq!(fnv1a("a"), 0xe40c_292c);
    }
}
