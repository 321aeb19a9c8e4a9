//! Makes a large run for benchmarking the viewer: a real run's last decode-stage instance
//! (its kernels, memcpys and ranges) replicated until the timeline holds at least N kernels.
//!
//!     cargo run --release -p llmprof-viewer --example replicate_decode -- RUN_DIR OUT_RUNS_DIR [N]
//!
//! The result is a run directory (`bundle.json`, `timeline.json`) named `<run-id>-decode-xK`.
//! Only the timeline is replicated: the bundle's aggregate tables stay those of the original
//! run, and the label says the run is synthetic.

use std::error::Error;
use std::path::PathBuf;

use llmprof_bundle::{Bundle, StageRole, Timeline, TimelineInfo, BUNDLE_FILE, TIMELINE_FILE};

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(run), Some(out)) = (args.first(), args.get(1)) else {
        return Err(
            "usage: replicate_decode RUN_DIR OUT_RUNS_DIR [KERNELS, default 1000000]".into(),
        );
    };
    let target: usize = match args.get(2) {
        Some(n) => n
            .parse()
            .map_err(|_| format!("KERNELS `{n}` is not a number"))?,
        None => 1_000_000,
    };
    let run = PathBuf::from(run);
    let mut bundle = Bundle::from_json(&std::fs::read_to_string(run.join(BUNDLE_FILE))?)?;
    let tl = Timeline::from_json(&std::fs::read_to_string(run.join(TIMELINE_FILE))?)?;

    let decode = |stage: u32| {
        bundle
            .stages
            .get(stage as usize)
            .is_some_and(|s| s.depth == 0 && StageRole::of_name(&s.name) == StageRole::Decode)
    };
    let r = &tl.ranges;
    let last = (0..r.start.len())
        .filter(|&i| decode(r.stage[i]))
        .max_by_key(|&i| r.start[i])
        .ok_or("the run has no decode stage instance")?;
    let (ws, we) = (r.start[last], r.start[last] + r.dur[last]);
    let inside = |s: &[u64]| {
        (
            s.partition_point(|&t| t < ws),
            s.partition_point(|&t| t < we),
        )
    };
    let (k0, k1) = inside(&tl.kernels.start);
    let (m0, m1) = inside(&tl.mem_ops.start);
    let (r0, r1) = inside(&r.start);
    let per_copy = k1 - k0;
    if per_copy == 0 {
        return Err("the last decode instance has no kernels".into());
    }
    let copies = target.div_ceil(per_copy);
    let period = (we - ws) + 1_000;

    let mut out_tl = tl.clone();
    let k = &mut out_tl.kernels;
    let m = &mut out_tl.mem_ops;
    let rr = &mut out_tl.ranges;
    for v in [&mut k.start, &mut k.dur] {
        v.truncate(k0);
    }
    k.stream.truncate(k0);
    k.kernel.truncate(k0);
    k.stage.truncate(k0);
    k.launch.truncate(k0.min(k.launch.len()));
    k.graph.truncate(k0.min(k.graph.len()));
    k.graph_node.truncate(k0.min(k.graph_node.len()));
    for v in [&mut m.start, &mut m.dur, &mut m.bytes] {
        v.truncate(m0);
    }
    m.stream.truncate(m0);
    m.kernel.truncate(m0);
    m.stage.truncate(m0);
    // Ranges that start before the window stay; ranges inside it are replicated.
    let keep: Vec<usize> = (0..r0).collect();
    let cols = |v: &[u64]| keep.iter().map(|&i| v[i]).collect::<Vec<u64>>();
    rr.start = cols(&r.start);
    rr.dur = cols(&r.dur);
    rr.tid = cols(&r.tid);
    rr.stage = keep.iter().map(|&i| r.stage[i]).collect();
    rr.depth = keep.iter().map(|&i| r.depth[i]).collect();
    let has_launch = tl.kernels.launch.len() == tl.kernels.start.len();
    let has_graph = tl.kernels.graph.len() == tl.kernels.start.len();
    let has_node = tl.kernels.graph_node.len() == tl.kernels.start.len();
    for c in 0..copies as u64 {
        let shift = c * period;
        for i in k0..k1 {
            k.start.push(tl.kernels.start[i] + shift);
            k.dur.push(tl.kernels.dur[i]);
            k.stream.push(tl.kernels.stream[i]);
            k.kernel.push(tl.kernels.kernel[i]);
            k.stage.push(tl.kernels.stage[i]);
            if has_launch {
                k.launch.push(tl.kernels.launch[i]);
            }
            if has_graph {
                k.graph.push(tl.kernels.graph[i]);
            }
            if has_node {
                k.graph_node.push(tl.kernels.graph_node[i]);
            }
        }
        for i in m0..m1 {
            m.start.push(tl.mem_ops.start[i] + shift);
            m.dur.push(tl.mem_ops.dur[i]);
            m.stream.push(tl.mem_ops.stream[i]);
            m.kernel.push(tl.mem_ops.kernel[i]);
            m.bytes.push(tl.mem_ops.bytes[i]);
            m.stage.push(tl.mem_ops.stage[i]);
        }
        for i in r0..r1 {
            rr.start.push(r.start[i] + shift);
            rr.dur.push(r.dur[i]);
            rr.stage.push(r.stage[i]);
            rr.depth.push(r.depth[i]);
            rr.tid.push(r.tid[i]);
        }
    }
    // Ranges of the original that started before the window but end inside it are kept as
    // they were; sort ranges by start again (the kept ones come first already).
    out_tl.end_ns = ws + copies as u64 * period;
    let id = format!("{}-decode-x{copies}", bundle.run_id);
    out_tl.run_id = id.clone();
    bundle.run_id = id.clone();
    bundle.label = Some(format!(
        "{} · last decode instance ×{copies} (synthetic, for viewer benchmarks)",
        bundle.label.clone().unwrap_or_default()
    ));
    bundle.nvml = None;
    bundle.timeline = Some(TimelineInfo {
        path: TIMELINE_FILE.into(),
        kernels: out_tl.kernels.start.len() as u64,
        mem_ops: out_tl.mem_ops.start.len() as u64,
        ranges: out_tl.ranges.start.len() as u64,
    });
    let dir = PathBuf::from(out).join(&id);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(BUNDLE_FILE), serde_json::to_string(&bundle)?)?;
    std::fs::write(dir.join(TIMELINE_FILE), serde_json::to_string(&out_tl)?)?;
    println!(
        "{}: {} kernels ({} per copy × {copies}), {} memcpy/memset, {} ranges",
        dir.display(),
        out_tl.kernels.start.len(),
        per_copy,
        out_tl.mem_ops.start.len(),
        out_tl.ranges.start.len()
    );
    Ok(())
}
