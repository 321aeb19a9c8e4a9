//! Independent work items — the ranks of a multi-rank run — on a bounded number of threads, so
//! memory grows with the workers, not with the items.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Worker threads for `n` items: `asked` (else every core), at least 1, at most `n`.
pub fn count(asked: Option<usize>, n: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    asked.unwrap_or(cores).clamp(1, n.max(1))
}

/// Runs `work` over `items` on `jobs` threads, results in input order; the first error stops
/// the workers from taking more items and is returned (the first in input order among those
/// that failed). A worker that panics ends its item without a result, reported as `lost(i)`.
pub fn map<T: Sync, R: Send, E: Send>(
    items: &[T],
    jobs: usize,
    work: impl Fn(usize, &T) -> Result<R, E> + Sync,
    lost: impl Fn(usize) -> E,
) -> Result<Vec<R>, E> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<Option<Result<R, E>>>> =
        Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..jobs.max(1))
            .map(|_| {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= items.len() || failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let r = work(i, &items[i]);
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    if let Ok(mut v) = results.lock() {
                        v[i] = Some(r);
                    }
                })
            })
            .collect();
        // Joined here, a worker's panic is its item's loss, not the caller's panic.
        for w in workers {
            let _ = w.join();
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let stopped = failed.load(Ordering::Relaxed);
    let mut out = Vec::with_capacity(items.len());
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Some(Ok(v)) => out.push(v),
            Some(Err(e)) => return Err(e),
            // Not taken after another item failed; otherwise its worker panicked.
            None if stopped => continue,
            None => return Err(lost(i)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_input_order_and_the_first_error_wins() {
        let items: Vec<u32> = (0..50).collect();
        let doubled = map(&items, 4, |_, &x| Ok::<_, String>(x * 2), |i| i.to_string());
        assert_eq!(doubled.unwrap(), (0..50).map(|x| x * 2).collect::<Vec<_>>());
        let failed = map(
            &items,
            3,
            |_, &x| {
                if x == 7 {
                    Err(format!("item {x}"))
                } else {
                    Ok(x)
                }
            },
            |i| format!("lost {i}"),
        );
        assert_eq!(failed.unwrap_err(), "item 7");
        let panicked = map(
            &items[..3],
            2,
            |_, &x| {
                if x == 1 {
                    panic!("worker test")
                } else {
                    Ok::<_, String>(x)
                }
            },
            |i| format!("lost {i}"),
        );
        assert_eq!(panicked.unwrap_err(), "lost 1");
        assert_eq!(count(Some(0), 5), 1);
        assert_eq!(count(Some(99), 5), 5);
        assert!(count(None, 1000) >= 1);
    }
}
