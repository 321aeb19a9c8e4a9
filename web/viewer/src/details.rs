//! What the tooltip and the pinned panel say about an item.

use llmprof_bundle::OptU32;

use crate::fmt;
use crate::model::{Run, Target};

/// Label/value lines describing `t`: name, duration, offset in its stage, grid/block,
/// category, and Nsight Compute figures where the run has them.
pub fn describe(run: &Run, t: Target) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let (s, e) = run.span_of(t);
    match t {
        Target::Kernel(i) | Target::MemOp(i) => {
            let is_kernel = matches!(t, Target::Kernel(_));
            let tl = &run.timeline;
            let row = if is_kernel {
                tl.kernels.kernel.get(i as usize)
            } else {
                tl.mem_ops.kernel.get(i as usize)
            };
            let k = row.and_then(|&r| run.kernels.get(r as usize));
            if let Some(rank) = k.and_then(|k| k.rank) {
                out.push(("Rank".into(), rank.to_string()));
            }
            if let Some(k) = k {
                out.push(("Kernel".into(), k.display.clone()));
                if k.name != k.display {
                    out.push(("Full name".into(), k.name.clone()));
                }
            }
            out.push(("Duration".into(), fmt::duration(e.saturating_sub(s) as f64)));
            out.push(("Start".into(), fmt::duration(s as f64)));
            if is_kernel {
                match run.stage_instance_of_kernel(i) {
                    Some(r) => {
                        // Offset of the kernel's GPU start from the start of the stage
                        // instance it belongs to (its launch was inside that range).
                        let rs = tl.ranges.start.get(r as usize).copied().unwrap_or(s);
                        let offset = if s >= rs {
                            format!("+{}", fmt::duration((s - rs) as f64))
                        } else {
                            format!("−{}", fmt::duration((rs - s) as f64))
                        };
                        out.push(("In stage".into(), format!("{} {offset}", run.range_name(r))));
                    }
                    None => out.push(("In stage".into(), "outside every stage".into())),
                }
                if let Some(g) = OptU32::at(&tl.kernels.graph, i as usize) {
                    let node = match OptU32::at(&tl.kernels.graph_node, i as usize) {
                        Some(n) => format!(", node {n}"),
                        None => String::new(),
                    };
                    out.push(("CUDA graph".into(), format!("{g}{node}")));
                }
                if let Some(l) = run.launch_of(i) {
                    out.push((
                        "Grid / block".into(),
                        format!(
                            "({}, {}, {}) / ({}, {}, {})",
                            l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2]
                        ),
                    ));
                }
            } else if let Some(b) = tl.mem_ops.bytes.get(i as usize) {
                out.push(("Bytes".into(), fmt::thousands(*b)));
            }
            let stream = if is_kernel {
                tl.kernels.stream.get(i as usize)
            } else {
                tl.mem_ops.stream.get(i as usize)
            };
            if let Some(&st) = stream {
                if let Some(id) = tl.streams.get(st as usize) {
                    out.push(("Stream".into(), id.to_string()));
                }
            }
            if let Some(k) = k {
                out.push(("Category".into(), k.category.as_str().to_string()));
                for line in &k.ncu {
                    if let Some((a, b)) = line.rsplit_once(' ') {
                        out.push((a.to_string(), b.to_string()));
                    }
                }
            }
        }
        Target::Range(i) => {
            out.push(("Stage".into(), run.range_name(i).to_string()));
            // Where this instance ran: a range name may sit in different stages.
            let inside = match run.range_parent.get(i as usize).copied().flatten() {
                Some(p) => run.range_name(p).to_string(),
                None => "top level".into(),
            };
            out.push(("Inside".into(), inside));
            if run.range_is_warmup(i) {
                out.push(("Warm-up".into(), "yes: not measured".into()));
            }
            out.push(("Duration".into(), fmt::duration(e.saturating_sub(s) as f64)));
            out.push(("Start".into(), fmt::duration(s as f64)));
            if let Some(tid) = run.timeline.ranges.tid.get(i as usize) {
                out.push(("Thread".into(), tid.to_string()));
            }
        }
    }
    out
}
