//! Nsight Compute kernels classified: which unit limits them, whether tensor cores work, and
//! what limits occupancy.

use llmprof_bundle::{Bundle, Category, KernelAnalysis, NcuKernel};

/// Above this share of peak a unit is the limiter.
const BUSY_UNIT_PCT: f64 = 60.0;
/// Below this for both SM and memory, neither unit is the limiter: the kernel waits (latency,
/// too few warps, launch overhead).
const IDLE_UNIT_PCT: f64 = 40.0;

pub fn classify(bundle: &Bundle) -> Vec<KernelAnalysis> {
    bundle
        .ncu
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let sm = n.sm_throughput_pct;
            let mem = n.memory_throughput_pct.or(n.dram_throughput_pct);
            let bound = match (sm, mem) {
                (Some(s), Some(m)) if s >= BUSY_UNIT_PCT && s >= m => {
                    format!("compute-bound (SM {s:.0}% vs memory {m:.0}%)")
                }
                (Some(s), Some(m)) if m >= BUSY_UNIT_PCT && m > s => {
                    format!("memory-bound (memory {m:.0}% vs SM {s:.0}%)")
                }
                (Some(s), Some(m)) if s < IDLE_UNIT_PCT && m < IDLE_UNIT_PCT => {
                    format!("latency-bound (SM {s:.0}%, memory {m:.0}%: neither unit is busy)")
                }
                (Some(s), Some(m)) => format!("balanced (SM {s:.0}%, memory {m:.0}%)"),
                _ => "unknown (no SM/memory throughput in the ncu data)".to_string(),
            };
            let category = n
                .kernel
                .and_then(|k| bundle.kernels.get(k as usize))
                .map(|k| k.category);
            let tensor_cores = match (n.tensor_pipe_pct, category) {
                (Some(t), _) if t >= 10.0 => format!("used ({t:.1}% of peak)"),
                (Some(t), Some(Category::Gemm)) => {
                    format!("barely used by a GEMM ({t:.1}% of peak)")
                }
                (Some(t), _) => format!("{t:.1}% of peak"),
                (None, _) => "unknown".to_string(),
            };
            KernelAnalysis {
                ncu: i as u32,
                name: llmprof_bundle::names::display_name(&n.name),
                bound,
                tensor_cores,
                occupancy: occupancy(n),
            }
        })
        .collect()
}

/// Theoretical occupancy below 50% names its limiter (registers, shared memory, block size).
fn occupancy(n: &NcuKernel) -> Option<String> {
    let theo = n.theoretical_occupancy_pct?;
    let achieved = n
        .achieved_occupancy_pct
        .map(|a| format!(", achieved {a:.0}%"))
        .unwrap_or_default();
    if theo >= 50.0 {
        return Some(format!("theoretical {theo:.0}%{achieved}"));
    }
    // Raw pages name limits `launch__occupancy_limit_*`, section exports `Occupancy/Block Limit *`.
    let limits = [
        (
            "registers",
            [
                "launch__occupancy_limit_registers",
                "Occupancy/Block Limit Registers",
            ],
        ),
        (
            "shared memory",
            [
                "launch__occupancy_limit_shared_mem",
                "Occupancy/Block Limit Shared Mem",
            ],
        ),
        (
            "warps per block",
            [
                "launch__occupancy_limit_warps",
                "Occupancy/Block Limit Warps",
            ],
        ),
        (
            "blocks per SM",
            ["launch__occupancy_limit_blocks", "Occupancy/Block Limit SM"],
        ),
    ];
    let limiter = limits
        .iter()
        .filter_map(|(what, keys)| {
            keys.iter()
                .find_map(|k| n.metrics.get(*k))
                .map(|v| (*what, *v))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1));
    Some(match limiter {
        Some((what, blocks)) => format!(
            "theoretical {theo:.0}%{achieved}: limited by {what} ({blocks:.0} blocks per SM)"
        ),
        None => format!("theoretical {theo:.0}%{achieved}"),
    })
}
