//! A large run for benchmarking the viewer: a real run's last decode-stage instance (its
//! kernels, memcpys and ranges) replicated until the timeline holds at least N kernels.
//!
//! Every column of the timeline is carried, the kernels' `range` attribution included (a copy's
//! kernel points at the same range of its own copy), so the result loads like a captured run.
//! Only the timeline is replicated: the bundle's aggregate tables stay those of the original
//! run, and the label says the run is synthetic. `examples/replicate_decode.rs` writes it; the
//! integration tests replicate at a small N and load it.

use llmprof_bundle::{Bundle, OptU32, StageRole, Timeline, TimelineInfo, TIMELINE_FILE};

/// Where the last decode instance sits in each sorted table: `[first, end)` positions.
struct Window {
    start_ns: u64,
    end_ns: u64,
    kernels: (usize, usize),
    mem_ops: (usize, usize),
    ranges: (usize, usize),
}

/// The replicated run: the bundle (relabelled, its timeline summary updated) and the timeline.
/// `Err` says why the run cannot be replicated.
pub fn last_decode(
    bundle: &Bundle,
    tl: &Timeline,
    kernels: usize,
) -> Result<(Bundle, Timeline, usize), String> {
    let w = window(bundle, tl)?;
    let per_copy = w.kernels.1 - w.kernels.0;
    if per_copy == 0 {
        return Err("the last decode instance has no kernels".into());
    }
    let copies = kernels.div_ceil(per_copy).max(1);
    let period = (w.end_ns - w.start_ns) + 1_000;
    let mut out = truncated(tl, &w);
    for c in 0..copies {
        append_copy(&mut out, tl, &w, c, c as u64 * period);
    }
    out.end_ns = w.start_ns + copies as u64 * period;
    let id = format!("{}-decode-x{copies}", bundle.run_id);
    out.run_id = id.clone();
    let mut b = bundle.clone();
    b.run_id = id;
    b.label = Some(format!(
        "{} · last decode instance ×{copies} (synthetic, for viewer benchmarks)",
        bundle.label.clone().unwrap_or_default()
    ));
    b.nvml = None;
    b.timeline = Some(TimelineInfo {
        path: TIMELINE_FILE.into(),
        kernels: out.kernels.start.len() as u64,
        mem_ops: out.mem_ops.start.len() as u64,
        ranges: out.ranges.start.len() as u64,
        t0_ns: Some(out.t0_ns),
        t0_epoch_ns: out.t0_epoch_ns,
    });
    Ok((b, out, copies))
}

/// The last top-level decode range instance and the table positions inside it.
fn window(bundle: &Bundle, tl: &Timeline) -> Result<Window, String> {
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
    Ok(Window {
        start_ns: ws,
        end_ns: we,
        kernels: inside(&tl.kernels.start),
        mem_ops: inside(&tl.mem_ops.start),
        ranges: inside(&r.start),
    })
}

/// Everything before the window: kernels, memcpys and ranges that started earlier stay as they
/// were (a kept kernel attributed to a range inside the window loses that attribution).
fn truncated(tl: &Timeline, w: &Window) -> Timeline {
    let mut out = tl.clone();
    let (k0, m0, r0) = (w.kernels.0, w.mem_ops.0, w.ranges.0);
    let k = &mut out.kernels;
    k.start.truncate(k0);
    k.dur.truncate(k0);
    k.stream.truncate(k0);
    k.kernel.truncate(k0);
    k.stage.truncate(k0);
    for col in [&mut k.launch, &mut k.range, &mut k.graph, &mut k.graph_node] {
        col.truncate(k0.min(col.len()));
    }
    for r in &mut k.range {
        *r = r.get().filter(|&i| (i as usize) < r0).into();
    }
    let m = &mut out.mem_ops;
    for col in [&mut m.start, &mut m.dur, &mut m.bytes] {
        col.truncate(m0);
    }
    m.stream.truncate(m0);
    m.kernel.truncate(m0);
    m.stage.truncate(m0);
    let r = &mut out.ranges;
    for col in [&mut r.start, &mut r.dur, &mut r.tid] {
        col.truncate(r0);
    }
    r.stage.truncate(r0);
    r.depth.truncate(r0);
    out
}

/// Copy `c` of the window, shifted by `shift` ns, appended to every table.
fn append_copy(out: &mut Timeline, tl: &Timeline, w: &Window, c: usize, shift: u64) {
    let (r0, r1) = w.ranges;
    // Copy c's ranges land after the kept ones and the c copies before it.
    let base = r0 + c * (r1 - r0);
    let moved = |r: OptU32| {
        let i = r.get().map(|i| i as usize).filter(|i| (r0..r1).contains(i));
        OptU32::from(i.map(|i| (base + i - r0) as u32))
    };
    let (src, k) = (&tl.kernels, &mut out.kernels);
    let full = |col_len: usize| col_len == src.start.len();
    let (launch, range, graph, node) = (
        full(src.launch.len()),
        full(src.range.len()),
        full(src.graph.len()),
        full(src.graph_node.len()),
    );
    for i in w.kernels.0..w.kernels.1 {
        k.start.push(src.start[i] + shift);
        k.dur.push(src.dur[i]);
        k.stream.push(src.stream[i]);
        k.kernel.push(src.kernel[i]);
        k.stage.push(src.stage[i]);
        if launch {
            k.launch.push(src.launch[i]);
        }
        if range {
            k.range.push(moved(src.range[i]));
        }
        if graph {
            k.graph.push(src.graph[i]);
        }
        if node {
            k.graph_node.push(src.graph_node[i]);
        }
    }
    let (src, m) = (&tl.mem_ops, &mut out.mem_ops);
    for i in w.mem_ops.0..w.mem_ops.1 {
        m.start.push(src.start[i] + shift);
        m.dur.push(src.dur[i]);
        m.stream.push(src.stream[i]);
        m.kernel.push(src.kernel[i]);
        m.bytes.push(src.bytes[i]);
        m.stage.push(src.stage[i]);
    }
    let (src, r) = (&tl.ranges, &mut out.ranges);
    for i in r0..r1 {
        r.start.push(src.start[i] + shift);
        r.dur.push(src.dur[i]);
        r.stage.push(src.stage[i]);
        r.depth.push(src.depth[i]);
        r.tid.push(src.tid[i]);
    }
}
