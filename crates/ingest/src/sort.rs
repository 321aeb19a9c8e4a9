//! [`ExternalSort`]: records sorted in bounded memory and a bounded number of open files.
//! Records are gathered up to a budget of bytes, sorted and written to disk as a run
//! ([`llmprof_store::spill`]); every [`FAN_IN`] runs of one size are merged into one of the
//! next (so a record is written about log<sub>FAN_IN</sub>(records / run) times), and the
//! runs left are merged at the end. Records that fit the budget are sorted in memory and never
//! written.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;

use llmprof_store::spill::{Column, ColumnReader, SpillDir, SpillValue};

/// Runs merged at once: the files open at once are at most this many per level.
const FAN_IN: usize = 64;

/// Records of type `T` sorted by `key`; equal keys keep no particular order, so a key should
/// say everything the order needs.
pub(crate) struct ExternalSort<T, K, F> {
    key: F,
    buf: Vec<T>,
    /// Records a run holds.
    cap: usize,
    /// The runs written, each with its level (0: sorted in memory; `n`: merged from
    /// [`FAN_IN`] runs of level `n - 1`), levels never rising along the list.
    runs: Vec<(u32, Column<T>)>,
    dir: SpillDir,
    _k: std::marker::PhantomData<K>,
}

impl<T: SpillValue, K: Ord + Copy, F: Fn(&T) -> K> ExternalSort<T, K, F> {
    /// A sort that holds at most about `budget` bytes of records at once, spilling to `dir`.
    pub fn new(dir: &SpillDir, budget: usize, key: F) -> Self {
        ExternalSort {
            key,
            buf: Vec::new(),
            cap: (budget / std::mem::size_of::<T>().max(1)).max(1),
            runs: Vec::new(),
            dir: dir.clone(),
            _k: std::marker::PhantomData,
        }
    }

    pub fn push(&mut self, v: T) -> io::Result<()> {
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(self.cap);
        }
        self.buf.push(v);
        if self.buf.len() >= self.cap {
            self.spill()?;
        }
        Ok(())
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.buf.len() + self.runs.iter().map(|(_, r)| r.len()).sum::<usize>()
    }

    /// Sorts the records held and writes them as a run, then merges the last [`FAN_IN`] runs
    /// while they are of one level. The keys are sorted with the records' places, not the
    /// records (which are larger).
    fn spill(&mut self) -> io::Result<()> {
        let key = &self.key;
        let mut order: Vec<(K, u32)> = (self.buf.iter().enumerate())
            .map(|(i, v)| (key(v), i as u32))
            .collect();
        order.sort_unstable();
        let mut w = self.dir.column();
        for (_, i) in order {
            w.push(self.buf[i as usize]);
        }
        self.buf.clear();
        self.runs.push((0, w.finish()?));
        while self.runs.len() >= FAN_IN {
            let tail = &self.runs[self.runs.len() - FAN_IN..];
            let level = tail[0].0;
            if tail.iter().any(|(l, _)| *l != level) {
                break;
            }
            let mut w = self.dir.column();
            merge(tail.iter().map(|(_, r)| r), &self.key, |v| w.push(v))?;
            let merged = w.finish()?;
            self.runs.truncate(self.runs.len() - FAN_IN);
            self.runs.push((level + 1, merged));
        }
        Ok(())
    }

    /// Calls `f` with every record, in key order.
    pub fn for_each(mut self, mut f: impl FnMut(T)) -> io::Result<()> {
        if self.runs.is_empty() {
            let key = &self.key;
            self.buf.sort_unstable_by_key(|v| key(v));
            self.buf.into_iter().for_each(f);
            return Ok(());
        }
        if !self.buf.is_empty() {
            self.spill()?;
        }
        self.buf = Vec::new();
        merge(self.runs.iter().map(|(_, r)| r), &self.key, &mut f)
    }
}

/// Calls `f` with the records of sorted `runs`, in key order.
fn merge<'a, T: SpillValue + 'a, K: Ord + Copy>(
    runs: impl Iterator<Item = &'a Column<T>>,
    key: &impl Fn(&T) -> K,
    mut f: impl FnMut(T),
) -> io::Result<()> {
    let mut readers: Vec<ColumnReader<'_, T>> =
        runs.map(Column::reader).collect::<io::Result<_>>()?;
    let mut heads: Vec<Option<T>> = Vec::with_capacity(readers.len());
    let mut heap = BinaryHeap::with_capacity(readers.len());
    for (i, r) in readers.iter_mut().enumerate() {
        let head = r.next_value()?;
        if let Some(v) = &head {
            heap.push(Reverse((key(v), i)));
        }
        heads.push(head);
    }
    while let Some(Reverse((_, i))) = heap.pop() {
        let next = readers[i].next_value()?;
        if let Some(v) = &next {
            heap.push(Reverse((key(v), i)));
        }
        if let Some(v) = std::mem::replace(&mut heads[i], next) {
            f(v);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_back_in_key_order_in_memory_and_through_merged_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SpillDir::new(tmp.path());
        let values: Vec<u64> = (0..5_000u64).map(|i| (i * 7919) % 5_003).collect();
        let mut want = values.clone();
        want.sort_unstable();
        // 5,000 runs of one record: three levels of merges.
        for budget in [8, 8 * 100, 8 * 3000, 1 << 20] {
            let mut s = ExternalSort::new(&dir, budget, |v: &u64| *v);
            for &v in &values {
                s.push(v).unwrap();
            }
            assert_eq!(s.len(), values.len());
            assert!(s.runs.len() < FAN_IN * 4, "runs are merged as they come");
            let mut got = Vec::new();
            s.for_each(|v| got.push(v)).unwrap();
            assert_eq!(got, want, "budget {budget}");
        }
    }
}
