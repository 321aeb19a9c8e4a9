//! [`RangeIndex`]: the range instances open on a thread at any time, for a source whose
//! launch calls come in no useful order (the ops' start order, through a join).

use rustc_hash::FxHashMap as HashMap;

use super::RangeAcc;

/// Per thread, the times at which its set of open ranges changes, and each set once. A range
/// is open at `t` when `start <= t < end`; a range ended on another thread is never open (it
/// owns no GPU work). Sets list their ranges by start, longer first: the order
/// [`super::launch_ranges`] gives.
#[derive(Debug, Default)]
pub(super) struct RangeIndex {
    threads: HashMap<u64, Changes>,
    sets: RangeSets,
}

/// Sets of range instances, each stored once where it repeats the set stored before it (a
/// run of calls or times mostly shares one).
#[derive(Debug, Default)]
pub(super) struct RangeSets {
    /// `(offset, len)` into `arena`.
    sets: Vec<(u32, u32)>,
    arena: Vec<u32>,
}

impl RangeSets {
    /// The id of set `active`: the last set's again where it is the same.
    pub fn intern(&mut self, active: &[u32]) -> u32 {
        let same = (self.sets.last()).is_some_and(|&(o, n)| self.get_at(o, n) == active);
        if !same {
            self.sets
                .push((self.arena.len() as u32, active.len() as u32));
            self.arena.extend_from_slice(active);
        }
        self.sets.len() as u32 - 1
    }

    pub fn get(&self, id: u32) -> &[u32] {
        let (offset, len) = self.sets[id as usize];
        self.get_at(offset, len)
    }

    fn get_at(&self, offset: u32, len: u32) -> &[u32] {
        &self.arena[offset as usize..(offset + len) as usize]
    }
}

/// One thread's change times, and the set from each on (an index into `sets`).
#[derive(Debug, Default)]
struct Changes {
    times: Vec<i64>,
    set: Vec<u32>,
}

impl RangeIndex {
    pub fn of(ranges: &[RangeAcc]) -> RangeIndex {
        let mut by_thread: HashMap<u64, Vec<u32>> = HashMap::default();
        for (i, r) in ranges.iter().enumerate().filter(|(_, r)| r.projects) {
            by_thread.entry(r.thread).or_default().push(i as u32);
        }
        let mut index = RangeIndex::default();
        for (thread, mut list) in by_thread {
            let key = |&i: &u32| {
                (
                    ranges[i as usize].start,
                    std::cmp::Reverse(ranges[i as usize].end),
                )
            };
            list.sort_by_key(key);
            let changes = index.sweep(ranges, &list);
            index.threads.insert(thread, changes);
        }
        index
    }

    /// The changes of one thread's ranges `list` (sorted by start, longer first).
    fn sweep(&mut self, ranges: &[RangeAcc], list: &[u32]) -> Changes {
        let mut times: Vec<i64> = (list.iter())
            .flat_map(|&i| [ranges[i as usize].start, ranges[i as usize].end])
            .collect();
        times.sort_unstable();
        times.dedup();
        let mut set = Vec::with_capacity(times.len());
        let (mut next, mut active) = (0, Vec::new());
        for &t in &times {
            while next < list.len() && ranges[list[next] as usize].start <= t {
                active.push(list[next]);
                next += 1;
            }
            active.retain(|&r| ranges[r as usize].end > t);
            set.push(self.sets.intern(&active));
        }
        Changes { times, set }
    }

    /// The ranges open on `thread` at `t`, outermost first.
    pub fn open_at(&self, thread: u64, t: i64) -> &[u32] {
        let Some(c) = self.threads.get(&thread) else {
            return &[];
        };
        let k = c.times.partition_point(|&p| p <= t);
        let Some(&s) = k.checked_sub(1).map(|k| &c.set[k]) else {
            return &[];
        };
        self.sets.get(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(thread: u64, start: i64, end: i64, projects: bool) -> RangeAcc {
        RangeAcc {
            thread,
            tid: thread,
            stage: 0,
            start,
            end,
            projects,
        }
    }

    #[test]
    fn open_ranges_at_every_time_match_a_scan_of_all_ranges() {
        let ranges = vec![
            range(1, 0, 100, true),
            range(1, 10, 20, true),
            range(1, 10, 50, true),
            range(1, 40, 120, true), // overlaps 0..100 without nesting
            range(1, 60, 60, true),  // empty
            range(2, 5, 500, true),
            range(1, 30, 90, false), // ended on another thread
        ];
        let index = RangeIndex::of(&ranges);
        for thread in [1, 2, 3] {
            for t in -5..130 {
                let mut want: Vec<u32> = (0..ranges.len() as u32)
                    .filter(|&i| {
                        let r = &ranges[i as usize];
                        r.thread == thread && r.projects && r.start <= t && t < r.end
                    })
                    .collect();
                want.sort_by_key(|&i| {
                    let r = &ranges[i as usize];
                    (r.start, std::cmp::Reverse(r.end))
                });
                assert_eq!(
                    index.open_at(thread, t),
                    want.as_slice(),
                    "thread {thread} t {t}"
                );
            }
        }
    }
}
