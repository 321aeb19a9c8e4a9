//! `llmprof export RUN --format chrome`: the run's timeline as a Chrome trace in the layout the
//! PyTorch profiler (kineto) writes, so Perfetto UI, `chrome://tracing` and
//! HolisticTraceAnalysis open it.
//!
//! What it holds, from `bundle.json` and `timeline.json` only:
//!
//! * the header: `schemaVersion`, `displayTimeUnit`, `deviceProperties` (the bundle's device),
//!   `distributedInfo` when the run knows its rank (written `"rank": N`, with the space
//!   HolisticTraceAnalysis' rank pattern needs);
//! * stage range instances as `cat: "user_annotation"` on the host thread that opened them, and
//!   as `cat: "gpu_user_annotation"` spanning the GPU work attributed to each instance, on the
//!   stream of its first op (as kineto places them);
//! * kernels, memcpys and memsets as `cat: "kernel"`, `"gpu_memcpy"`, `"gpu_memset"` with
//!   `pid` = device, `tid` = stream; `args` carry `device`, `stream`, the bundle's `category`,
//!   the launch geometry, bytes, the CUDA graph and node, and for a kernel Nsight Compute
//!   profiled, the mean of its ncu results' headline metrics (`ncu ...` keys, `ncu results` =
//!   how many); a CUDA graph traced whole is `cat: "cuda_graph"`;
//! * NVML samples that fall inside the trace as counter events (`ph: "C"`): power, SM clock,
//!   GPU utilization and memory used, placed through the timeline's `t0_epoch_ns`.
//!
//! * launch calls, where the run has them (`launch_calls.json`, runs ingested since it exists), as
//!   `cat: "cuda_runtime"` / `"cuda_driver"` on their host thread with `args.correlation`, and
//!   a flow arrow (`ph: "s"`/`"f"`, `cat: "ac2g"`, `bp: "e"`, `id` = correlation) to the first
//!   op each launched; those ops carry the same `correlation`. Older timelines have none.
//!
//! `External id` (the link from a kernel to the PyTorch operator that launched it) is not
//! written: the timeline does not keep it.
//!
//! Times are the source's clock: `ts` = `t0_ns` + the op's offset, in µs with three decimals,
//! so every ns survives (no float rounding). Events are written one at a time to the caller's
//! writer; nothing is built in memory but one JSON fragment of args per `kernels[]` row.

use std::io::{self, Write};

use llmprof_bundle::{Bundle, Kernel, NcuKernel, OpKind, OptU32, Timeline};

/// The `pid` of host-side events (stage ranges): the traces llmprof reads do not all record the
/// workload's process id, so one fixed id stands for the host process.
pub const HOST_PID: u64 = 4_294_967_295;

/// What one export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChromeCounts {
    pub kernels: u64,
    pub mem_ops: u64,
    pub annotations: u64,
    pub counters: u64,
    /// Launch calls written (`cuda_runtime`/`cuda_driver`), and flow arrows to their ops.
    pub calls: u64,
    pub flows: u64,
}

/// Writes the Chrome trace of `b` and its timeline `t` to `w` (buffer it).
pub fn write_chrome<W: Write>(b: &Bundle, t: &Timeline, w: &mut W) -> io::Result<ChromeCounts> {
    let device = b.device.as_ref().and_then(|d| d.index).unwrap_or(0);
    write_header(b, w)?;
    let mut ev = Events { w, first: true };
    let mut counts = ChromeCounts::default();
    ev.metadata(device, t)?;
    counts.annotations = write_ranges(b, t, device, &mut ev)?;
    counts.calls = write_calls(t, &mut ev)?;
    let row_args: Vec<String> = b.kernels.iter().map(|k| row_args(b, k)).collect();
    let mut flows = Flows {
        done: vec![false; t.calls.start.len()],
        n: 0,
    };
    let cx = OpContext {
        b,
        t,
        device,
        row_args: &row_args,
    };
    counts.kernels = write_kernels(&cx, &mut flows, &mut ev)?;
    counts.mem_ops = write_mem_ops(&cx, &mut flows, &mut ev)?;
    counts.flows = flows.n;
    counts.counters = write_counters(b, t, device, &mut ev)?;
    ev.w.write_all(b"\n]}\n")?;
    Ok(counts)
}

fn write_header<W: Write>(b: &Bundle, w: &mut W) -> io::Result<()> {
    w.write_all(b"{\"schemaVersion\": 1,\n\"displayTimeUnit\": \"ms\",\n")?;
    writeln!(w, "\"traceName\": {},", json_str(&b.run_id))?;
    if let Some(d) = &b.device {
        write!(
            w,
            "\"deviceProperties\": [{{\"id\": {}, \"name\": {}",
            d.index.unwrap_or(0),
            json_str(&d.name)
        )?;
        if let Some(mem) = d.memory_bytes {
            write!(w, ", \"totalGlobalMem\": {mem}")?;
        }
        if let Some(sm) = d.sm_count {
            write!(w, ", \"numSms\": {sm}")?;
        }
        if let Some((major, minor)) = d.compute_capability.as_deref().and_then(cc) {
            write!(w, ", \"computeMajor\": {major}, \"computeMinor\": {minor}")?;
        }
        w.write_all(b"}],\n")?;
    }
    if let Some(dist) = &b.environment.distributed {
        write!(
            w,
            "\"distributedInfo\": {{\"rank\": {}, \"world_size\": {}",
            dist.rank, dist.world_size
        )?;
        if let Some(backend) = &dist.backend {
            write!(w, ", \"backend\": {}", json_str(backend))?;
        }
        w.write_all(b"},\n")?;
    }
    w.write_all(b"\"traceEvents\": [")
}

/// `"9.0"` → (9, 0).
fn cc(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.split_once('.')?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

/// The event list: writes the separating commas.
struct Events<'a, W: Write> {
    w: &'a mut W,
    first: bool,
}

impl<W: Write> Events<'_, W> {
    fn start(&mut self) -> io::Result<&mut W> {
        self.w.write_all(if self.first { b"\n" } else { b",\n" })?;
        self.first = false;
        Ok(self.w)
    }

    /// Process and thread names: the device, its streams, the host.
    fn metadata(&mut self, device: u32, t: &Timeline) -> io::Result<()> {
        let w = self.start()?;
        write!(
            w,
            "{{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": {device}, \"tid\": 0, \
             \"args\": {{\"name\": \"GPU {device}\"}}}}"
        )?;
        for s in &t.streams {
            let w = self.start()?;
            write!(
                w,
                "{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": {device}, \"tid\": {s}, \
                 \"args\": {{\"name\": \"stream {s}\"}}}}"
            )?;
        }
        let w = self.start()?;
        write!(
            w,
            "{{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": {HOST_PID}, \"tid\": 0, \
             \"args\": {{\"name\": \"host\"}}}}"
        )
    }

    /// One complete (`ph: "X"`) event; `args` is a JSON object's inside, without braces.
    fn complete(&mut self, e: Span<'_>, args: &str) -> io::Result<()> {
        let w = self.start()?;
        write!(
            w,
            "{{\"ph\": \"X\", \"cat\": \"{}\", \"name\": {}, \"pid\": {}, \"tid\": {}, \
             \"ts\": {}, \"dur\": {}, \"args\": {{{args}}}}}",
            e.cat,
            json_str(e.name),
            e.pid,
            e.tid,
            crate::fmt::us_exact(e.ts),
            crate::fmt::us_exact(i64::try_from(e.dur).unwrap_or(i64::MAX)),
        )
    }
}

/// Where and when a complete event ran: `ts` on the source's clock, ns.
#[derive(Debug, Clone, Copy)]
struct Span<'a> {
    cat: &'a str,
    name: &'a str,
    pid: u64,
    tid: u64,
    ts: i64,
    dur: u64,
}

/// Each range instance on its host thread, and its GPU work's span on the stream of its first
/// op. Returns how many events were written.
fn write_ranges<W: Write>(
    b: &Bundle,
    t: &Timeline,
    device: u32,
    ev: &mut Events<'_, W>,
) -> io::Result<u64> {
    let r = &t.ranges;
    let gpu = gpu_spans(t);
    let mut n = 0;
    for i in 0..r.start.len() {
        let Some(stage) = b.stage(r.stage[i]) else {
            continue;
        };
        let ts = abs(t, r.start[i]);
        let args = format!("\"stage\": {}", r.stage[i]);
        let tid = r.tid.get(i).copied().unwrap_or(0);
        ev.complete(
            Span {
                cat: "user_annotation",
                name: &stage.name,
                pid: HOST_PID,
                tid,
                ts,
                dur: r.dur[i],
            },
            &args,
        )?;
        n += 1;
        if let Some(span) = gpu.get(i).copied().flatten() {
            let stream = t.streams.get(span.stream as usize).copied().unwrap_or(0);
            let (ts, dur) = (abs(t, span.start), span.end - span.start);
            ev.complete(
                Span {
                    cat: "gpu_user_annotation",
                    name: &stage.name,
                    pid: device.into(),
                    tid: stream,
                    ts,
                    dur,
                },
                &args,
            )?;
            n += 1;
        }
    }
    Ok(n)
}

/// Where a range instance's GPU work ran: first start, last end, the first op's stream.
#[derive(Debug, Clone, Copy)]
struct GpuSpan {
    start: u64,
    end: u64,
    stream: u32,
}

/// Per range instance (timeline order), the span of the kernels attributed to it or to a range
/// inside it, from the kernels' `range` column (empty in old timelines: no GPU annotations).
/// Linear: kernels fill their innermost range, then each range passes its span to its parent.
fn gpu_spans(t: &Timeline) -> Vec<Option<GpuSpan>> {
    let n = t.ranges.start.len();
    let mut spans: Vec<Option<GpuSpan>> = vec![None; n];
    let k = &t.kernels;
    for (i, range) in k.range.iter().enumerate() {
        let Some(r) = range.get().map(|r| r as usize).filter(|&r| r < n) else {
            continue;
        };
        let end = k.start[i].saturating_add(k.dur[i]);
        merge(
            &mut spans[r],
            GpuSpan {
                start: k.start[i],
                end,
                stream: k.stream[i],
            },
        );
    }
    let parents = parents(t);
    for r in (0..n).rev() {
        if let (Some(p), Some(span)) = (parents[r], spans[r]) {
            merge(&mut spans[p], span);
        }
    }
    spans
}

/// Widens `into` to cover `span`; the stream is the earliest op's.
fn merge(into: &mut Option<GpuSpan>, span: GpuSpan) {
    match into {
        None => *into = Some(span),
        Some(cur) => {
            if span.start < cur.start {
                cur.stream = span.stream;
            }
            cur.start = cur.start.min(span.start);
            cur.end = cur.end.max(span.end);
        }
    }
}

/// Per range instance, the instance of its thread one nesting level up, or `None` at depth 0.
/// The timeline writes ranges in nesting order, so the last range seen at depth d − 1 on the
/// same thread is the parent of a range at depth d.
fn parents(t: &Timeline) -> Vec<Option<usize>> {
    let rg = &t.ranges;
    let mut open: std::collections::HashMap<u64, Vec<usize>> = Default::default();
    (0..rg.start.len())
        .map(|r| {
            let depth = rg.depth.get(r).copied().unwrap_or(0) as usize;
            let stack = open.entry(rg.tid.get(r).copied().unwrap_or(0)).or_default();
            stack.truncate(depth);
            let parent = depth.checked_sub(1).and_then(|d| stack.get(d).copied());
            stack.push(r);
            parent
        })
        .collect()
}

/// What one timeline op's event is written from: the columns kernels and memory operations
/// share, its own args, and its category.
struct OpEvent {
    row: u32,
    stream: u32,
    start: u64,
    dur: u64,
    call: Option<u32>,
    /// Args after `device` and `stream`, before the row's.
    own_args: String,
    /// Args after the row's.
    more_args: String,
    cat: fn(OpKind) -> &'static str,
}

/// The run, the device and the per-row args every op event needs.
struct OpContext<'a> {
    b: &'a Bundle,
    t: &'a Timeline,
    device: u32,
    row_args: &'a [String],
}

impl OpContext<'_> {
    /// Writes `op` as a complete event with its flow's end; `false` when its row is unknown.
    fn write<W: Write>(
        &self,
        op: OpEvent,
        flows: &mut Flows,
        ev: &mut Events<'_, W>,
    ) -> io::Result<bool> {
        let Some(row) = self.b.kernels.get(op.row as usize) else {
            return Ok(false);
        };
        let stream = self.t.streams.get(op.stream as usize).copied().unwrap_or(0);
        let mut args = format!(
            "\"device\": {}, \"stream\": {stream}, {}{}{}",
            self.device, op.own_args, self.row_args[op.row as usize], op.more_args
        );
        let span = Span {
            cat: (op.cat)(row.kind),
            name: &row.name,
            pid: self.device.into(),
            tid: stream,
            ts: abs(self.t, op.start),
            dur: op.dur,
        };
        flows.op(self.t, op.call, span, &mut args, ev)?;
        Ok(true)
    }
}

fn write_kernels<W: Write>(
    cx: &OpContext<'_>,
    flows: &mut Flows,
    ev: &mut Events<'_, W>,
) -> io::Result<u64> {
    let (t, k) = (cx.t, &cx.t.kernels);
    let mut n = 0;
    for i in 0..k.start.len() {
        let mut more = String::new();
        let launch = OptU32::at(&k.launch, i);
        if let Some(l) = launch.and_then(|l| t.launches.get(l as usize)) {
            more.push_str(&launch_args(l));
        }
        if let Some(g) = OptU32::at(&k.graph, i) {
            more.push_str(&format!(", \"graph id\": {g}"));
        }
        if let Some(node) = OptU32::at(&k.graph_node, i) {
            more.push_str(&format!(", \"graph node\": {node}"));
        }
        let op = OpEvent {
            row: k.kernel[i],
            stream: k.stream[i],
            start: k.start[i],
            dur: k.dur[i],
            call: OptU32::at(&t.calls.kernel_call, i),
            own_args: String::new(),
            more_args: more,
            cat: |kind| match kind {
                OpKind::Graph => "cuda_graph",
                _ => "kernel",
            },
        };
        n += u64::from(cx.write(op, flows, ev)?);
    }
    Ok(n)
}

/// Each launch call on its host thread: `cuda_runtime` or `cuda_driver`, named by its API
/// function, with `args.correlation`, followed by the start of its flow arrow (`ac2g`).
fn write_calls<W: Write>(t: &Timeline, ev: &mut Events<'_, W>) -> io::Result<u64> {
    let c = &t.calls;
    for i in 0..c.start.len() {
        let n = c.name[i].get().map(|n| n as usize);
        let name = n
            .and_then(|n| c.names.get(n))
            .map_or("CUDA launch call", |n| kineto_api_name(n));
        let driver = n.and_then(|n| c.driver.get(n)).copied().unwrap_or(false);
        let span = Span {
            cat: if driver {
                "cuda_driver"
            } else {
                "cuda_runtime"
            },
            name,
            pid: HOST_PID,
            tid: c.threads.get(c.thread[i] as usize).copied().unwrap_or(0),
            ts: t.t0_ns.saturating_add(c.start[i]),
            dur: c.dur[i],
        };
        let corr = c.correlation[i];
        ev.complete(span, &format!("\"correlation\": {corr}"))?;
        let w = ev.start()?;
        write!(
            w,
            "{{\"ph\": \"s\", \"id\": {corr}, \"pid\": {HOST_PID}, \"tid\": {}, \"ts\": {}, \
             \"cat\": \"ac2g\", \"name\": \"ac2g\"}}",
            span.tid,
            crate::fmt::us_exact(span.ts)
        )?;
    }
    Ok(c.start.len() as u64)
}

/// An API function's name as the PyTorch profiler writes it: without the `_v7000`-style
/// version suffix Nsight Systems appends (`cudaLaunchKernel_v7000` → `cudaLaunchKernel`), which
/// HolisticTraceAnalysis' launch statistics match on.
pub fn kineto_api_name(name: &str) -> &str {
    match name.rsplit_once("_v") {
        Some((base, v)) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => name,
    }
}

/// The arrows from launch calls to the ops they launched: one per call, to its first op (a
/// CUDA graph launch runs many).
struct Flows {
    done: Vec<bool>,
    n: u64,
}

impl Flows {
    /// Writes op `span` with `args` (plus the call's correlation id), then its flow's end.
    fn op<W: Write>(
        &mut self,
        t: &Timeline,
        call: Option<u32>,
        span: Span<'_>,
        args: &mut String,
        ev: &mut Events<'_, W>,
    ) -> io::Result<()> {
        let Some(c) = call.map(|c| c as usize).filter(|&c| c < self.done.len()) else {
            return ev.complete(span, args);
        };
        let corr = t.calls.correlation[c];
        args.push_str(&format!(", \"correlation\": {corr}"));
        ev.complete(span, args)?;
        if std::mem::replace(&mut self.done[c], true) {
            return Ok(());
        }
        self.n += 1;
        let w = ev.start()?;
        write!(
            w,
            "{{\"ph\": \"f\", \"id\": {corr}, \"pid\": {}, \"tid\": {}, \"ts\": {}, \
             \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}}",
            span.pid,
            span.tid,
            crate::fmt::us_exact(span.ts)
        )
    }
}

fn launch_args(l: &llmprof_bundle::Launch) -> String {
    let [gx, gy, gz] = l.grid;
    let [bx, by, bz] = l.block;
    let mut s = format!(", \"grid\": [{gx}, {gy}, {gz}], \"block\": [{bx}, {by}, {bz}]");
    if let Some(r) = l.registers_per_thread {
        s.push_str(&format!(", \"registers per thread\": {r}"));
    }
    s
}

fn write_mem_ops<W: Write>(
    cx: &OpContext<'_>,
    flows: &mut Flows,
    ev: &mut Events<'_, W>,
) -> io::Result<u64> {
    let (t, m) = (cx.t, &cx.t.mem_ops);
    let mut n = 0;
    for i in 0..m.start.len() {
        let op = OpEvent {
            row: m.kernel[i],
            stream: m.stream[i],
            start: m.start[i],
            dur: m.dur[i],
            call: OptU32::at(&t.calls.mem_op_call, i),
            own_args: format!("\"bytes\": {}, ", m.bytes[i]),
            more_args: String::new(),
            cat: |kind| match kind {
                OpKind::Memset => "gpu_memset",
                _ => "gpu_memcpy",
            },
        };
        n += u64::from(cx.write(op, flows, ev)?);
    }
    Ok(n)
}

/// The args every call of `kernels[]` row `k` shares: its category and, when Nsight Compute
/// profiled it, the mean of each headline metric over its results.
fn row_args(b: &Bundle, k: &Kernel) -> String {
    let mut s = format!("\"category\": {}", json_str(k.category.as_str()));
    let results: Vec<&NcuKernel> = k
        .ncu
        .iter()
        .filter_map(|&i| b.ncu.get(i as usize))
        .collect();
    if results.is_empty() {
        return s;
    }
    s.push_str(&format!(", \"ncu results\": {}", results.len()));
    let metrics: [(&str, NcuField); 8] = [
        ("ncu duration ns", |n| n.duration_ns),
        ("ncu SM throughput %", |n| n.sm_throughput_pct),
        ("ncu memory throughput %", |n| n.memory_throughput_pct),
        ("ncu DRAM throughput %", |n| n.dram_throughput_pct),
        ("ncu achieved occupancy %", |n| n.achieved_occupancy_pct),
        ("ncu tensor pipe %", |n| n.tensor_pipe_pct),
        ("ncu L2 hit %", |n| n.l2_hit_pct),
        ("ncu DRAM bytes read", |n| n.dram_bytes_read),
    ];
    for (key, get) in metrics {
        let vals: Vec<f64> = results
            .iter()
            .filter_map(|n| get(n))
            .filter(|v| v.is_finite())
            .collect();
        if !vals.is_empty() {
            let mean = vals.iter().sum::<f64>() / vals.len() as f64;
            s.push_str(&format!(
                ", {}: {}",
                json_str(key),
                crate::fmt::json_f64(mean)
            ));
        }
    }
    s
}

/// Reads one headline metric of an ncu result.
type NcuField = fn(&NcuKernel) -> Option<f64>;

/// NVML samples inside the trace's span as counter events on the device's process.
fn write_counters<W: Write>(
    b: &Bundle,
    t: &Timeline,
    device: u32,
    ev: &mut Events<'_, W>,
) -> io::Result<u64> {
    let (Some(nvml), Some(epoch0)) = (&b.nvml, t.t0_epoch_ns) else {
        return Ok(0);
    };
    let end = epoch0.saturating_add(i64::try_from(t.end_ns).unwrap_or(i64::MAX));
    let mut n = 0;
    for (i, &at) in nvml.t_ns.iter().enumerate() {
        if at < epoch0 || at > end {
            continue;
        }
        let ts = crate::fmt::us_exact(t.t0_ns.saturating_add(at - epoch0));
        let mut series: Vec<(&str, String)> = Vec::new();
        if nvml.has_power(i) {
            series.push((
                "GPU power (W)",
                crate::fmt::json_f64(f64::from(nvml.power_mw[i]) / 1e3),
            ));
        }
        let col = |c: &[u32]| c.get(i).map(|v| v.to_string());
        if let Some(v) = col(&nvml.sm_clock_mhz) {
            series.push(("SM clock (MHz)", v));
        }
        if let Some(v) = col(&nvml.gpu_util_pct) {
            series.push(("GPU utilization (%)", v));
        }
        if let Some(v) = nvml.mem_used_bytes.get(i) {
            series.push((
                "memory used (MiB)",
                crate::fmt::json_f64(*v as f64 / 1048576.0),
            ));
        }
        for (name, value) in series {
            let w = ev.start()?;
            write!(
                w,
                "{{\"ph\": \"C\", \"cat\": \"nvml\", \"name\": {}, \"pid\": {device}, \"ts\": {ts}, \
                 \"args\": {{\"value\": {value}}}}}",
                json_str(name)
            )?;
            n += 1;
        }
    }
    Ok(n)
}

/// A timeline offset on the source's clock.
fn abs(t: &Timeline, rel: u64) -> i64 {
    t.t0_ns
        .saturating_add(i64::try_from(rel).unwrap_or(i64::MAX))
}

/// `s` as a JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_names_lose_nsys_version_suffixes_only() {
        assert_eq!(
            kineto_api_name("cudaLaunchKernel_v7000"),
            "cudaLaunchKernel"
        );
        assert_eq!(
            kineto_api_name("cudaLaunchKernelExC_v11060"),
            "cudaLaunchKernelExC"
        );
        assert_eq!(kineto_api_name("cuLaunchKernelEx"), "cuLaunchKernelEx");
        assert_eq!(kineto_api_name("cudaGraphLaunch_v10000"), "cudaGraphLaunch");
        assert_eq!(kineto_api_name("my_vfunc"), "my_vfunc");
        assert_eq!(kineto_api_name("x_v"), "x_v");
    }

    /// Two threads; on thread 1 `outer` holds `inner`, and a kernel attributed to `inner` runs
    /// after both closed: both get its span, thread 2's range none.
    #[test]
    fn gpu_spans_reach_every_enclosing_range_of_the_thread() {
        let mut t = Timeline::default();
        t.ranges.start = vec![0, 5, 6];
        t.ranges.dur = vec![100, 10, 50];
        t.ranges.stage = vec![0, 1, 2];
        t.ranges.depth = vec![0, 1, 0];
        t.ranges.tid = vec![1, 1, 2];
        t.kernels.start = vec![200, 300];
        t.kernels.dur = vec![10, 5];
        t.kernels.stream = vec![0, 1];
        t.kernels.range = OptU32::column(&[Some(1), Some(0)]);
        assert_eq!(parents(&t), vec![None, Some(0), None]);
        let spans = gpu_spans(&t);
        let outer = spans[0].unwrap();
        assert_eq!((outer.start, outer.end, outer.stream), (200, 305, 0));
        let inner = spans[1].unwrap();
        assert_eq!((inner.start, inner.end), (200, 210));
        assert!(spans[2].is_none());
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
