//! The `(process, correlation id)` pairs of a trace's GPU ops, so that a source that reads its
//! ops first keeps only the launch calls that ran one: most CUDA API calls (synchronizations,
//! event records, queries) launch nothing, and an Nsight Systems export holds millions.
//!
//! Correlation ids are small increasing integers per process, so a process's set is a bitset
//! over the range its ops use (a bit per id), unless its ids are sparse (a forged or merged
//! trace): then a sorted list. Either takes at most 8 bytes per op.

use rustc_hash::FxHashMap as HashMap;

/// A set of `(process, correlation id)` pairs.
#[derive(Debug, Default)]
pub(crate) struct LaunchedSet {
    by_process: HashMap<u64, Ids>,
}

#[derive(Debug)]
enum Ids {
    /// Bit `id - min` of `bits`.
    Bits {
        min: i64,
        bits: Vec<u64>,
    },
    Sorted(Vec<i64>),
}

impl LaunchedSet {
    /// The set of the pairs `pairs()` yields; `pairs` is called twice (sizes, then contents).
    pub(crate) fn of<I: Iterator<Item = (u64, i64)>>(pairs: impl Fn() -> I) -> Self {
        // Per process: the smallest and largest id, and how many.
        let mut sizes: HashMap<u64, (i64, i64, u64)> = HashMap::default();
        for (p, id) in pairs() {
            let s = sizes.entry(p).or_insert((id, id, 0));
            *s = (s.0.min(id), s.1.max(id), s.2 + 1);
        }
        let mut by_process: HashMap<u64, Ids> = sizes
            .into_iter()
            .map(|(p, (min, max, n))| {
                let span = max.abs_diff(min);
                // A bitset of no more 64-bit words than the process has ops: never larger
                // than the sorted list of its ids.
                let ids = if span / 64 < n {
                    let words = usize::try_from(span / 64 + 1).unwrap_or(usize::MAX);
                    Ids::Bits {
                        min,
                        bits: vec![0; words],
                    }
                } else {
                    Ids::Sorted(Vec::with_capacity(usize::try_from(n).unwrap_or(0)))
                };
                (p, ids)
            })
            .collect();
        for (p, id) in pairs() {
            match by_process.get_mut(&p) {
                Some(Ids::Bits { min, bits }) => {
                    let bit = id.abs_diff(*min);
                    if let Some(w) = bits.get_mut((bit / 64) as usize) {
                        *w |= 1 << (bit % 64);
                    }
                }
                Some(Ids::Sorted(v)) => v.push(id),
                None => {}
            }
        }
        for ids in by_process.values_mut() {
            if let Ids::Sorted(v) = ids {
                v.sort_unstable();
                v.dedup();
            }
        }
        LaunchedSet { by_process }
    }

    /// Whether `(process, id)` is in the set.
    pub(crate) fn contains(&self, process: u64, id: i64) -> bool {
        match self.by_process.get(&process) {
            Some(Ids::Bits { min, bits }) => {
                id >= *min && {
                    let bit = id.abs_diff(*min);
                    bits.get((bit / 64) as usize)
                        .is_some_and(|w| w & (1 << (bit % 64)) != 0)
                }
            }
            Some(Ids::Sorted(v)) => v.binary_search(&id).is_ok(),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_and_sparse_ids_are_found_and_only_they() {
        let pairs = [
            (1, 5),
            (1, 7),
            (1, 7),
            (1, 200),
            (2, i64::MIN),
            (2, i64::MAX),
            (2, 0),
            (3, -4),
        ];
        let set = LaunchedSet::of(|| pairs.iter().copied());
        assert!(matches!(set.by_process[&1], Ids::Bits { .. }));
        assert!(matches!(set.by_process[&2], Ids::Sorted(_)));
        for (p, id) in pairs {
            assert!(set.contains(p, id), "({p}, {id})");
        }
        for (p, id) in [
            (1, 4),
            (1, 6),
            (1, 201),
            (1, i64::MIN),
            (2, 1),
            (3, -3),
            (4, 5),
        ] {
            assert!(!set.contains(p, id), "({p}, {id})");
        }
        assert!(!LaunchedSet::default().contains(0, 0));
    }

    /// Found in review: a floor per process let an export of many processes, each with two
    /// far-apart ids, ask for a 2 MB bitset per process.
    #[test]
    fn far_apart_ids_of_many_processes_take_no_more_than_their_ops() {
        let pairs = || (0..20_000u64).flat_map(|p| [(p, 0), (p, 16_000_000)]);
        let set = LaunchedSet::of(pairs);
        let bytes: usize = (set.by_process.values())
            .map(|ids| match ids {
                Ids::Bits { bits, .. } => bits.len() * 8,
                Ids::Sorted(v) => v.len() * 8,
            })
            .sum();
        assert!(bytes <= 40_000 * 8, "{bytes} bytes for 40,000 ids");
        assert!(pairs().all(|(p, id)| set.contains(p, id)));
        assert!(!set.contains(7, 1));
    }
}
