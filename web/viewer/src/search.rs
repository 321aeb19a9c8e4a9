//! Kernel search: a case-insensitive substring, or a regular expression written `/like this/`.
//! The query is matched once against the kernel table (hundreds of names), not per launch.

use crate::lanes::{Lane, LaneKind};
use crate::model::{KernelInfo, Run};

/// Which kernel rows a query matches.
#[derive(Debug, Clone, PartialEq)]
pub struct Matches {
    pub query: String,
    /// Per `Run::kernels` row.
    pub row: Vec<bool>,
    pub rows_matched: usize,
}

/// Matches `query` against the kernels' full and display names. An empty query matches
/// nothing (no highlighting); a malformed regex is an error message for the search box.
pub fn search(kernels: &[KernelInfo], query: &str) -> Result<Option<Matches>, String> {
    let q = query.trim();
    if q.is_empty() {
        return Ok(None);
    }
    let row: Vec<bool> = if let Some(pattern) = q
        .strip_prefix('/')
        .and_then(|r| r.strip_suffix('/'))
        .filter(|p| !p.is_empty())
    {
        let re = regex_lite::RegexBuilder::new(pattern)
            .case_insensitive(true)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| format!("not a valid regular expression: {e}"))?;
        kernels
            .iter()
            .map(|k| re.is_match(&k.name) || re.is_match(&k.display))
            .collect()
    } else {
        let needle = q.to_lowercase();
        kernels
            .iter()
            .map(|k| {
                k.name.to_lowercase().contains(&needle)
                    || k.display.to_lowercase().contains(&needle)
            })
            .collect()
    };
    let rows_matched = row.iter().filter(|&&m| m).count();
    Ok(Some(Matches {
        query: q.to_string(),
        row,
        rows_matched,
    }))
}

/// Per lane, prefix counts of matching items (`counts[i]` = matches among items `0..i`), so a
/// merged pixel column lights up when any of its kernels matches, not only its longest.
pub fn lane_match_counts(run: &Run, m: &Matches) -> Vec<Vec<u32>> {
    run.lanes
        .iter()
        .map(|lane: &Lane| {
            let col = match lane.kind {
                LaneKind::Stream(_) => &run.timeline.kernels.kernel,
                LaneKind::MemOps => &run.timeline.mem_ops.kernel,
                _ => return Vec::new(),
            };
            let mut counts = Vec::with_capacity(lane.items.len() + 1);
            let mut n = 0u32;
            counts.push(0);
            for &i in &lane.items {
                let row = col.get(i as usize).copied().unwrap_or(u32::MAX) as usize;
                if m.row.get(row).copied().unwrap_or(false) {
                    n += 1;
                }
                counts.push(n);
            }
            counts
        })
        .collect()
}
