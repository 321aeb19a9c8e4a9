//! [`Launches`]: the converter's launch calls, column by column (32 bytes a call; an export
//! holds millions), and their conversion into the timeline's launch-call columns, which drops
//! each launch column as soon as the call columns no longer need it.

use llmprof_bundle::{OptU32, TimelineCalls};
use rustc_hash::FxHashMap as HashMap;

use crate::convert::span;
use crate::intern::Interner;

const DRIVER: u32 = 1 << 31;
const GRAPH: u32 = 1 << 30;
const API: u32 = GRAPH - 1;

/// The calling thread of launches: `(process, thread key, OS thread id)`.
pub(crate) type Caller = (u64, u64, u64);

/// One launch call as [`Launches::push`] takes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LaunchCall {
    pub start: i64,
    pub end: i64,
    pub correlation: i64,
    /// Index into the converter's callers.
    pub caller: u32,
    /// The API function's interned name, where the source gave one.
    pub api: Option<u32>,
    pub driver: bool,
    pub graph: bool,
}

/// Launch calls, one column per field, in the order they came.
#[derive(Debug, Default)]
pub(crate) struct Launches {
    pub start: Vec<i64>,
    pub end: Vec<i64>,
    pub correlation: Vec<i64>,
    /// Index into the converter's callers.
    pub caller: Vec<u32>,
    /// The API function's interned name + 1 (0: none) in the low 30 bits; [`DRIVER`] and
    /// [`GRAPH`] above.
    api: Vec<u32>,
}

impl Launches {
    pub fn len(&self) -> usize {
        self.start.len()
    }

    pub fn push(&mut self, l: LaunchCall) {
        // A name id past 30 bits (a billion distinct strings) is dropped, not wrapped.
        let name = l.api.map_or(0, |a| a.saturating_add(1));
        let name = if name > API { 0 } else { name };
        let flags = if l.driver { DRIVER } else { 0 } | if l.graph { GRAPH } else { 0 };
        self.start.push(l.start);
        self.end.push(l.end);
        self.correlation.push(l.correlation);
        self.caller.push(l.caller);
        self.api.push(name | flags);
    }

    /// Whether call `l` launched a CUDA graph.
    pub fn graph(&self, l: usize) -> bool {
        self.api[l] & GRAPH != 0
    }

    /// Keeps the calls for which `keep(caller, correlation)` holds, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(u32, i64) -> bool) {
        let mut to = 0;
        for from in 0..self.len() {
            if keep(self.caller[from], self.correlation[from]) {
                self.start[to] = self.start[from];
                self.end[to] = self.end[from];
                self.correlation[to] = self.correlation[from];
                self.caller[to] = self.caller[from];
                self.api[to] = self.api[from];
                to += 1;
            }
        }
        for col in [&mut self.start, &mut self.end, &mut self.correlation] {
            col.truncate(to);
            col.shrink_to_fit();
        }
        for col in [&mut self.caller, &mut self.api] {
            col.truncate(to);
            col.shrink_to_fit();
        }
    }

    /// The calls at `used` (sorted by start) as the timeline's call columns, times relative to
    /// `t0`. Consumes the calls a column at a time, so the two sets of columns are never all
    /// held together.
    pub fn into_calls(
        self,
        used: &[u32],
        t0: i64,
        callers: &[Caller],
        strings: &Interner,
    ) -> TimelineCalls {
        let Launches {
            start,
            end,
            correlation,
            caller,
            api,
        } = self;
        let pick = |col: &[i64]| -> Vec<i64> { used.iter().map(|&l| col[l as usize]).collect() };
        let mut calls = TimelineCalls {
            dur: (used
                .iter()
                .map(|&l| span(start[l as usize], end[l as usize])))
            .collect(),
            ..TimelineCalls::default()
        };
        drop(end);
        calls.start = used.iter().map(|&l| start[l as usize] - t0).collect();
        drop(start);
        calls.correlation = pick(&correlation);
        drop(correlation);
        let mut tables = CallTables::default();
        calls.thread = (used.iter())
            .map(|&l| tables.thread(callers[caller[l as usize] as usize].2))
            .collect();
        drop(caller);
        calls.name = (used.iter())
            .map(|&l| {
                let a = api[l as usize];
                tables.name((a & API).checked_sub(1), a & DRIVER != 0, strings)
            })
            .collect();
        (calls.threads, calls.names, calls.driver) = (tables.threads, tables.names, tables.driver);
        calls
    }
}

/// The thread and API name tables of the timeline's call columns, filled in first-sight order
/// as the calls' columns are written.
#[derive(Debug, Default)]
pub(crate) struct CallTables {
    thread_ids: HashMap<u64, u32>,
    name_ids: HashMap<(u32, bool), u32>,
    pub threads: Vec<u64>,
    pub names: Vec<String>,
    pub driver: Vec<bool>,
}

impl CallTables {
    /// The index of OS thread `tid` in `threads`.
    pub fn thread(&mut self, tid: u64) -> u32 {
        let threads = &mut self.threads;
        *self.thread_ids.entry(tid).or_insert_with(|| {
            threads.push(tid);
            threads.len() as u32 - 1
        })
    }

    /// The index in `names` of interned API name `api` of a driver or runtime call.
    pub fn name(&mut self, api: Option<u32>, driver: bool, strings: &Interner) -> OptU32 {
        let (names, drivers) = (&mut self.names, &mut self.driver);
        OptU32::from(api.map(|id| {
            *self.name_ids.entry((id, driver)).or_insert_with(|| {
                names.push(strings.get(id).to_string());
                drivers.push(driver);
                names.len() as u32 - 1
            })
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(start: i64, correlation: i64, caller: u32, api: Option<u32>) -> LaunchCall {
        LaunchCall {
            start,
            end: start + 3,
            correlation,
            caller,
            api,
            driver: api == Some(1),
            graph: correlation == 7,
        }
    }

    #[test]
    fn calls_come_back_in_the_order_asked_with_their_fields() {
        let mut strings = Interner::default();
        let (a, b) = (
            strings.intern("cudaLaunchKernel"),
            strings.intern("cuLaunchKernel"),
        );
        assert_eq!((a, b), (0, 1));
        let mut l = Launches::default();
        l.push(launch(100, 5, 0, Some(a)));
        l.push(launch(50, 7, 1, None));
        l.push(launch(70, 9, 0, Some(b)));
        assert!(l.graph(1) && !l.graph(0));
        l.retain(|_, corr| corr != 9);
        assert_eq!((l.len(), l.correlation.clone()), (2, vec![5, 7]));
        let callers = [(1, 10, 1000), (1, 11, 1001)];
        let calls = l.into_calls(&[1, 0], 40, &callers, &strings);
        assert_eq!(calls.start, [10, 60]);
        assert_eq!(calls.dur, [3, 3]);
        assert_eq!(calls.correlation, [7, 5]);
        assert_eq!(
            (calls.thread, calls.threads),
            (vec![0, 1], vec![1001, 1000])
        );
        assert_eq!(calls.name, [None, Some(0)]);
        assert_eq!(calls.names, ["cudaLaunchKernel"]);
        assert_eq!(calls.driver, [false]);
    }
}
