//! Findings of distributed runs: communication that dominates a stage (exposed, not hidden
//! behind computation), and a rank that straggles.

use llmprof_bundle::{Bundle, CommWindow, Finding, RankSet};
use llmprof_report::fmt::{ms, pct};

/// Exposed communication at or above this share of a window is a finding.
pub const EXPOSED_SHARE_PCT: f64 = 30.0;
/// At most this many windows get a communication finding (those with the most exposed time).
pub const MAX_WINDOWS: usize = 3;
/// A stage whose slowest rank's median is this much above the fastest one's straggles.
pub const STRAGGLER_SPREAD_PCT: f64 = 10.0;

/// The communication and straggler findings of `bundle`.
pub fn findings(bundle: &Bundle) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(c) = &bundle.communication {
        // The stages' windows (not a collective's own annotation, all communication); the
        // whole trace only when no stage carries communication.
        let staged: Vec<&CommWindow> = (c.windows.iter())
            .filter(|w| w.stage.is_some() && w.comm_ns > 0 && w.comm_ns < w.window_ns)
            .collect();
        let windows: Vec<&CommWindow> = if staged.is_empty() {
            c.windows.iter().filter(|w| w.stage.is_none()).collect()
        } else {
            staged
        };
        let mut found: Vec<(u64, Finding)> = (windows.into_iter())
            .filter_map(|w| dominant(bundle, w).map(|f| (w.exposed_comm_ns, f)))
            .collect();
        // The windows where most time is lost, at most MAX_WINDOWS of them.
        found.sort_by_key(|f| std::cmp::Reverse(f.0));
        out.extend(found.into_iter().take(MAX_WINDOWS).map(|(_, f)| f));
    }
    if let Some(r) = &bundle.ranks {
        out.extend(stragglers(r));
    }
    out
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// Communication dominates a window when its exposed part is at least
/// [`EXPOSED_SHARE_PCT`] of it.
fn dominant(bundle: &Bundle, w: &CommWindow) -> Option<Finding> {
    let exposed = share(w.exposed_comm_ns, w.window_ns);
    if exposed < EXPOSED_SHARE_PCT {
        return None;
    }
    let pooled = if bundle.ranks.is_some() {
        " (every rank's windows summed)"
    } else {
        ""
    };
    Some(Finding {
        id: "communication_bound".into(),
        stage: w.stage.map(|_| w.name.clone()),
        title: format!(
            "Communication dominates {}: {}% of its GPU time is exposed communication",
            w.name,
            pct(exposed)
        ),
        evidence: vec![
            format!(
                "{} windows{pooled}: {} ms of GPU time, {} ms in communication kernels, {} ms of \
                 it with no computation kernel beside it (overlap {}%)",
                w.instances,
                ms(w.window_ns),
                ms(w.comm_ns),
                ms(w.exposed_comm_ns),
                pct(w.overlap_pct)
            ),
            format!(
                "time without computation: {} ms waiting on communication, {} ms waiting for the \
                 host, {} ms other (source: the timeline's kernels on every stream)",
                ms(w.comm_wait_ns),
                ms(w.host_ns),
                ms(w.other_ns)
            ),
        ],
        recommendation: "Hide the collectives behind computation (issue them asynchronously on \
                         their own stream, overlap the next layer's GEMMs), send fewer and \
                         larger messages (bucket or fuse collectives), and check the links the \
                         ranks talk over (NVLink, not PCIe or the network). For tensor-parallel \
                         inference at small batch, a lower TP degree can cost less than its \
                         all-reduces."
            .into(),
    })
}

/// A rank straggles in a stage when the slowest rank's median is [`STRAGGLER_SPREAD_PCT`]
/// above the fastest one's.
fn stragglers(r: &RankSet) -> Vec<Finding> {
    r.skew
        .iter()
        .filter(|s| s.median_ns.iter().flatten().count() >= 2)
        .filter(|s| s.spread_pct >= STRAGGLER_SPREAD_PCT)
        .map(|s| {
            let at = |rank: u32| r.ranks.iter().position(|e| e.rank == rank);
            let median = |rank: u32| at(rank).and_then(|i| s.median_ns[i]).unwrap_or(0.0);
            let comm = |rank: u32| at(rank).map_or(0, |i| s.comm_ns[i]);
            let entry = |rank: u32| at(rank).map(|i| &r.ranks[i]);
            let host = |rank: u32| entry(rank).map_or(0, |e| e.host_idle_ns);
            let (slow, fast) = (s.slowest_rank, s.fastest_rank);
            Finding {
                id: "rank_straggler".into(),
                stage: Some(s.stage.clone()),
                title: format!(
                    "Rank {slow} straggles in {}: its median is {}% above rank {fast}'s",
                    s.stage,
                    pct(s.spread_pct)
                ),
                evidence: vec![
                    format!(
                        "median stage wall: rank {slow} {} ms, rank {fast} {} ms (measured \
                         instances of each rank's own trace)",
                        ms(median(slow) as u64),
                        ms(median(fast) as u64)
                    ),
                    format!(
                        "communication inside the stage: rank {slow} {} ms, rank {fast} {} ms; \
                         GPU idle waiting for the host over the whole trace: rank {slow} {} ms, \
                         rank {fast} {} ms",
                        ms(comm(slow)),
                        ms(comm(fast)),
                        ms(host(slow)),
                        ms(host(fast))
                    ),
                ],
                recommendation: "Every collective waits for the slowest rank. Compare that \
                                 rank's timeline (ranks/<rank>/) with a fast one's: more host \
                                 idle points at its CPU (pinning, a noisy neighbour, data \
                                 loading), longer kernels at its GPU (clocks, temperature — \
                                 see NVML), more communication at its links or an uneven \
                                 split of the work."
                    .into(),
            }
        })
        .collect()
}
