//! The viewer's model, range statistics, search, scene and comparison on a real capture: the
//! H200 Qwen2-0.5B-shape fixture ingested by llmprof's own ingest. The whole-run range must
//! reproduce Nsight Systems' numbers that ingest checks against `nsys stats` (GPU busy, calls
//! and time per kernel).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::OnceLock;

use llmprof_bundle::{Bundle, OpKind, OptU32, Timeline};
use llmprof_ingest::{ingest, IngestRequest, WorkloadFlags};
use llmprof_viewer::compare::{self, Norm, RunSummary};
use llmprof_viewer::hit::{counter_at, hit};
use llmprof_viewer::lanes::{Geometry, LaneKind, Layout};
use llmprof_viewer::model::{Run, Target};
use llmprof_viewer::range::range_stats;
use llmprof_viewer::ranks::{merge, Merged, RankRun};
use llmprof_viewer::scene::{self, Align, Overlay, Painter};
use llmprof_viewer::search::search;
use llmprof_viewer::viewport::Viewport;

fn fixture(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/h200-qwen2-0.5b")
        .join(file)
}

/// The fixture ingested (nsys timing, kineto operators, ncu, model config) and analysed,
/// once per test binary; as JSON text, the way the site hands it to the viewer.
fn fixture_json() -> &'static (String, String) {
    static CELL: OnceLock<(String, String)> = OnceLock::new();
    CELL.get_or_init(|| {
        let req = IngestRequest {
            nsys: Some(fixture("nsys_export.sqlite.gz")),
            kineto: Some(fixture("kineto_trace.json.gz")),
            ncu: vec![fixture("ncu_decode_raw.csv")],
            model_config: Some(fixture("config.json")),
            label: Some("fixture".into()),
            workload: WorkloadFlags {
                prompt_tokens: Some(512),
                decode_steps: vec![2, 16],
                prefill_logits: Some(512),
                ..WorkloadFlags::default()
            },
            ..IngestRequest::default()
        };
        let mut got = ingest(&req, &mut |_| {}).unwrap();
        got.bundle.analysis = Some(llmprof_analysis::analyze(&got.bundle));
        (
            serde_json::to_string(&got.bundle).unwrap(),
            serde_json::to_string(&got.timeline.unwrap().into_timeline().unwrap()).unwrap(),
        )
    })
}

fn run() -> (Bundle, Run) {
    let (b, t) = fixture_json();
    (Bundle::from_json(b).unwrap(), Run::from_json(b, t).unwrap())
}

#[test]
fn lanes_hold_every_record_once() {
    let (_, run) = run();
    let kinds: Vec<LaneKind> = run.lanes.iter().map(|l| l.kind).collect();
    assert_eq!(
        kinds,
        vec![
            LaneKind::Stages { depth: 0 },
            LaneKind::Stream(0),
            LaneKind::MemOps
        ],
        "one stage depth, one stream (7), memcpy/memset; no NVML in this capture"
    );
    let t = &run.timeline;
    let count = |k: fn(&LaneKind) -> bool| -> usize {
        run.lanes
            .iter()
            .filter(|l| k(&l.kind))
            .map(|l| l.items.len())
            .sum()
    };
    assert_eq!(
        count(|k| matches!(k, LaneKind::Stream(_))),
        t.kernels.start.len()
    );
    assert_eq!(
        count(|k| matches!(k, LaneKind::MemOps)),
        t.mem_ops.start.len()
    );
    assert_eq!(
        count(|k| matches!(k, LaneKind::Stages { .. })),
        t.ranges.start.len()
    );
    assert_eq!(t.kernels.start.len(), 20_505);
    assert!(
        t.t0_epoch_ns.is_some(),
        "nsys records its session start, so NVML can be placed"
    );
    assert_eq!(t.kernels.launch.len(), t.kernels.start.len());
}

#[test]
fn the_whole_run_as_a_range_reproduces_the_nsys_numbers() {
    let (bundle, run) = run();
    let st = range_stats(&run, 0, run.timeline.end_ns);
    // GPU busy (union of every kernel, memcpy and memset) as ingest computed it, which the
    // nsys stats tests hold to NVIDIA's numbers.
    assert_eq!(st.busy_ns, bundle.totals.gpu_busy_ns);
    assert_eq!(
        st.ops as usize,
        run.timeline.kernels.start.len() + run.timeline.mem_ops.start.len()
    );
    for row in &st.rows {
        let k = &bundle.kernels[row.kernel as usize];
        assert_eq!(row.calls, k.calls, "{}", k.name);
        assert_eq!(row.total_ns, k.total_ns, "{}", k.name);
    }
    assert_eq!(st.rows.len(), bundle.kernels.len());
    // Longest first.
    assert!(st.rows.windows(2).all(|w| w[0].total_ns >= w[1].total_ns));
}

#[test]
fn adjacent_ranges_add_up() {
    let (_, run) = run();
    let end = run.timeline.end_ns;
    let cut = end / 3;
    let (a, b, all) = (
        range_stats(&run, 0, cut),
        range_stats(&run, cut, end),
        range_stats(&run, 0, end),
    );
    let total =
        |s: &llmprof_viewer::range::RangeStats| -> u64 { s.rows.iter().map(|r| r.total_ns).sum() };
    assert_eq!(
        total(&a) + total(&b),
        total(&all),
        "overlap time is split, not doubled"
    );
    assert_eq!(a.busy_ns + b.busy_ns, all.busy_ns);
    // An empty range and a reversed one.
    assert_eq!(range_stats(&run, 5, 5).ops, 0);
    assert_eq!(range_stats(&run, cut, 0), a);
}

#[test]
fn kernels_know_their_stage_instance_and_launch() {
    let (bundle, run) = run();
    let t = &run.timeline;
    let mut checked = 0;
    for i in (0..t.kernels.start.len()).step_by(997) {
        let i = i as u32;
        match (
            t.kernels.stage[i as usize].get(),
            run.stage_instance_of_kernel(i),
        ) {
            (Some(stage), Some(r)) => {
                assert_eq!(t.ranges.stage[r as usize], stage);
                // The launch was inside the range, and a kernel runs after its launch.
                let (rs, _) = run.span_of(Target::Range(r));
                let (ks, _) = run.span_of(Target::Kernel(i));
                assert!(rs <= ks);
                checked += 1;
            }
            (None, None) => {}
            (s, r) => panic!("kernel {i}: stage {s:?} but instance {r:?}"),
        }
        // The launch geometry of this call is one the kernel row was seen with.
        let row = &bundle.kernels[t.kernels.kernel[i as usize] as usize];
        if let (Some(l), Some(most)) = (run.launch_of(i), row.launch) {
            assert!(row.launch_variants > 1 || *l == most, "{}", row.name);
        }
    }
    assert!(checked > 10);
}

#[test]
fn search_matches_names_by_substring_and_regex() {
    let (_, run) = run();
    let m = search(&run.kernels, "NVJET").unwrap().unwrap();
    assert!(m.rows_matched > 5);
    assert!(run
        .kernels
        .iter()
        .zip(&m.row)
        .all(|(k, &hit)| hit == k.name.to_lowercase().contains("nvjet")));
    let r = search(&run.kernels, "/^nvjet_.*_TNT$/").unwrap().unwrap();
    assert!(r.rows_matched > 0 && r.rows_matched < m.rows_matched);
    assert!(search(&run.kernels, "  ").unwrap().is_none());
    let err = search(&run.kernels, "/([/").unwrap_err();
    assert!(err.contains("not a valid regular expression"), "{err}");
}

/// Records what a frame draws.
#[derive(Default)]
struct Recorder {
    rects: usize,
    fills: usize,
    texts: Vec<String>,
    strokes: Vec<[f64; 4]>,
}

impl Painter for Recorder {
    fn fill_rects(&mut self, _: &str, _: f64, rects: &[[f64; 4]]) {
        self.fills += 1;
        self.rects += rects.len();
    }
    fn stroke_rect(&mut self, r: [f64; 4], _: &str, _: f64) {
        self.strokes.push(r);
    }
    fn text(&mut self, _: f64, _: f64, text: &str, _: &str, _: Align, _: f64) {
        self.texts.push(text.to_string());
    }
    fn polyline(&mut self, _: &[(f64, f64)], _: &str, _: f64) {}
    fn clip(&mut self, _: [f64; 4]) {}
    fn unclip(&mut self) {}
}

#[test]
fn a_frame_draws_a_bounded_number_of_rects_and_the_hover_outline() {
    let (_, run) = run();
    let layout = Layout::new(&run.lanes, Geometry::default());
    let vp = Viewport::new(run.timeline.end_ns, 1268.0);
    let mut rec = Recorder::default();
    scene::draw(&run, &layout, &vp, &Overlay::default(), 1400.0, &mut rec);
    // 20,888 GPU ops on 1268 px: level of detail keeps it to a few per pixel column per lane.
    assert!(rec.rects < 3 * 1268 + 200, "{} rects", rec.rects);
    assert!(rec.fills < 200, "{} fill-style changes", rec.fills);
    assert!(rec.texts.iter().any(|t| t == "Stream 7"));
    assert!(
        rec.texts.iter().any(|t| t == "prefill"),
        "wide stage bars are labelled"
    );

    // Hover the longest kernel where the scene would draw it.
    let d = &run.timeline.kernels.dur;
    let k = (0..d.len()).max_by_key(|&i| d[i]).unwrap() as u32;
    let (s, e) = run.span_of(Target::Kernel(k));
    let mut vp = vp;
    vp.set(s as f64 - 1000.0, e as f64 + 1000.0);
    let lane = scene::lane_of(&run, Target::Kernel(k)).unwrap();
    let (top, h) = layout.rows[lane];
    let x = layout.geometry.label_w + vp.x_of((s + e) as f64 / 2.0);
    assert_eq!(
        hit(&run, &layout, &vp, x, top + h / 2.0, 3.0),
        Some((lane, Target::Kernel(k)))
    );
    assert_eq!(
        hit(&run, &layout, &vp, 10.0, top + h / 2.0, 3.0),
        None,
        "the label column"
    );
    let ov = Overlay {
        hover: Some(Target::Kernel(k)),
        ..Overlay::default()
    };
    let mut rec = Recorder::default();
    scene::draw(&run, &layout, &vp, &ov, 1400.0, &mut rec);
    assert_eq!(rec.strokes.len(), 1);
    assert_eq!(rec.strokes[0][1], top);
}

#[test]
fn time_axis_labels_differ_from_tick_to_tick_in_a_narrow_window() {
    let (_, run) = run();
    let layout = Layout::new(&run.lanes, Geometry::default());
    let mut vp = Viewport::new(run.timeline.end_ns, 1268.0);
    // 300 µs from 15.6 ms: ticks 20 µs apart, which three significant digits would blur.
    vp.set(15.6e6, 15.9e6);
    let mut rec = Recorder::default();
    scene::draw(&run, &layout, &vp, &Overlay::default(), 1400.0, &mut rec);
    let labels: Vec<&String> = (rec.texts.iter()).filter(|t| t.ends_with(" ms")).collect();
    assert!(labels.len() >= 5, "{labels:?}");
    let distinct: std::collections::HashSet<_> = labels.iter().collect();
    assert_eq!(distinct.len(), labels.len(), "{labels:?}");
    assert!(
        labels.iter().any(|t| t.as_str() == "15.62 ms"),
        "{labels:?}"
    );
}

#[test]
fn comparison_numbers_come_from_the_bundle() {
    let (bundle, _) = run();
    let s = RunSummary::from_bundle(&bundle);
    let a = bundle.analysis.as_ref().unwrap();
    assert_eq!(s.decode_tokens_per_s, a.run.decode_tokens_per_s);
    // 512 prompt tokens in each of the 2 prefill instances plus the generated tokens.
    let generated = a.run.generated_tokens.unwrap();
    assert_eq!(s.tokens, Some(512 * 2 + generated));
    assert_eq!(s.steps, Some(2 + 2 + 16));
    // Kernel time inside the top-level stages (prefill and decode here: no warm-up stage).
    let top: Vec<u32> = bundle
        .stages
        .iter()
        .filter(|st| st.depth == 0)
        .map(|st| st.id)
        .collect();
    let kernel_ns: u64 = bundle
        .kernels
        .iter()
        .filter(|k| k.kind == OpKind::Kernel)
        .flat_map(|k| &k.by_stage)
        .filter(|bs| top.contains(&bs.stage))
        .map(|bs| bs.total_ns)
        .sum();
    let stage_kernel_ns: u64 = bundle
        .stages
        .iter()
        .filter(|st| st.depth == 0)
        .map(|st| st.kernel_ns)
        .sum();
    assert_eq!(
        kernel_ns, stage_kernel_ns,
        "the mix adds up to the stages' kernel time"
    );
    let share: f64 = s.mix_values(Norm::Share).unwrap().iter().map(|m| m.1).sum();
    assert!((share - 100.0).abs() < 1e-9);
    let per_token: f64 = s
        .mix_values(Norm::PerToken)
        .unwrap()
        .iter()
        .map(|m| m.1)
        .sum();
    assert!((per_token - kernel_ns as f64 / 1e3 / s.tokens.unwrap() as f64).abs() < 1e-9);
    let prefill = bundle
        .stages
        .iter()
        .find(|st| st.name == "prefill")
        .unwrap();
    assert_eq!(
        s.prefill_tokens_per_s,
        Some(512.0 / (prefill.wall.median_ns / 1e9))
    );

    let svg = compare::svg(&[s.clone(), s], Norm::PerStep).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("per forward step"));
    assert!(svg.contains("Decode tokens/s"));
}

#[test]
fn nvml_samples_land_on_the_timeline_through_its_epoch() {
    let (b, t) = fixture_json();
    let mut bundle = Bundle::from_json(b).unwrap();
    let timeline = Timeline::from_json(t).unwrap();
    let zero = timeline.t0_epoch_ns.unwrap();
    // Samples every 20 ms from 100 ms before the timeline to 100 ms after its end.
    let n = ((timeline.end_ns as i64 + 200_000_000) / 20_000_000) as usize;
    let t_ns: Vec<i64> = (0..n)
        .map(|i| zero - 100_000_000 + i as i64 * 20_000_000)
        .collect();
    let mut nv = llmprof_bundle::NvmlSeries {
        interval_ms: 20,
        t_ns: t_ns.clone(),
        power_mw: (0..n as u32).map(|i| 100_000 + i * 1000).collect(),
        sm_clock_mhz: vec![1980; n],
        mem_clock_mhz: vec![2619; n],
        gpu_util_pct: vec![50; n],
        mem_util_pct: vec![10; n],
        mem_used_bytes: vec![1 << 30; n],
        temp_c: vec![40; n],
        throttle_reasons: vec![0; n],
        windows: Vec::new(),
        ..llmprof_bundle::NvmlSeries::default()
    };
    bundle.nvml = Some(nv.clone());
    let run = Run::new(&bundle, timeline.clone()).unwrap();
    let names: Vec<&str> = run.counters.iter().map(|c| c.name).collect();
    assert_eq!(names, ["Power", "SM clock", "GPU util"]);
    let power = &run.counters[0];
    // Kept: samples within two intervals of the timeline (40 ms each side).
    assert_eq!(power.t[0], -40e6);
    let i0 = power.t.iter().position(|&x| x == 0.0).unwrap();
    assert_eq!(
        power.v[i0], 105.0,
        "sample 5 (100 ms after the first) is at t0: 105 W"
    );
    assert_eq!(
        run.lanes
            .iter()
            .filter(|l| matches!(l.kind, LaneKind::Counter(_)))
            .count(),
        3
    );
    // Hovering the power lane at t0 reads that sample.
    let layout = Layout::new(&run.lanes, Geometry::default());
    let vp = Viewport::new(run.timeline.end_ns, 1000.0);
    let li = run
        .lanes
        .iter()
        .position(|l| l.kind == LaneKind::Counter(0))
        .unwrap();
    let (top, h) = layout.rows[li];
    let lines = counter_at(
        &run,
        &layout,
        &vp,
        layout.geometry.label_w + 0.2,
        top + h / 2.0,
        3.0,
    )
    .unwrap();
    assert_eq!(lines[0], ("Power".to_string(), "105 W".to_string()));

    // A failed power read is a gap: no 0 W point on the power lane, the other lanes keep it.
    let mut gap = nv.clone();
    gap.power_mw[5] = 0;
    gap.power_gaps = vec![5];
    let mut with_gap = bundle.clone();
    with_gap.nvml = Some(gap);
    let run = Run::new(&with_gap, timeline.clone()).unwrap();
    let (power, clock) = (&run.counters[0], &run.counters[1]);
    assert_eq!(power.t.len() + 1, clock.t.len());
    assert!(!power.t.contains(&0.0) && clock.t.contains(&0.0));
    assert!(power.v.iter().all(|&w| w >= 100.0), "{:?}", power.v);

    // A timeline without its epoch shows no counters and says why.
    let mut no_epoch = timeline;
    no_epoch.t0_epoch_ns = None;
    let run = Run::new(&bundle, no_epoch.clone()).unwrap();
    assert!(run.counters.is_empty());
    assert!(run.counters_note.as_deref().unwrap().contains("epoch"));
    // Samples from another pass do not overlap.
    nv.t_ns = t_ns.iter().map(|t| t - 3_600_000_000_000).collect();
    bundle.nvml = Some(nv);
    let run = Run::new(&bundle, Timeline::from_json(t).unwrap()).unwrap();
    assert!(run.counters.is_empty());
    assert!(run
        .counters_note
        .as_deref()
        .unwrap()
        .contains("do not overlap"));
}

/// The viewer benchmark's replication (`examples/replicate_decode.rs`) at a small N: every
/// timeline column is carried, so the viewer loads the result, and each copied kernel is
/// attributed to the decode instance of its own copy (issue 15 found the `range` column left
/// out and the benchmark run refused).
#[test]
fn a_replicated_decode_loads_and_keeps_its_attribution() {
    let (b, t) = fixture_json();
    let bundle = Bundle::from_json(b).unwrap();
    let tl = Timeline::from_json(t).unwrap();
    let (big, big_tl, copies) =
        llmprof_viewer::replicate::last_decode(&bundle, &tl, 3 * tl.kernels.start.len()).unwrap();
    assert!(copies >= 3 && big_tl.kernels.start.len() >= 3 * tl.kernels.start.len());
    let run = Run::new(&big, big_tl).expect("the replicated run loads");
    let t = &run.timeline;
    assert_eq!(t.kernels.range.len(), t.kernels.start.len());
    let last = t.kernels.start.len() - 1;
    let r = t.kernels.range[last]
        .get()
        .expect("the last copy's kernel keeps its range") as usize;
    let decode = &big.stages[t.ranges.stage[r] as usize].name;
    assert!(decode.contains("decode"), "{decode}");
    let (rs, re) = run.span_of(Target::Range(r as u32));
    let (ks, _) = run.span_of(Target::Kernel(last as u32));
    assert!(
        rs <= ks && ks <= re + 1_000_000,
        "kernel at {ks} outside its range [{rs}, {re}]"
    );
    assert_eq!(big.timeline.unwrap().kernels, t.kernels.start.len() as u64);
}

/// The two ranks of the two-H200 tensor-parallel sample run, each read as the timeline page
/// hands a rank to the viewer (its own bundle and timeline).
fn two_ranks() -> (llmprof_bundle::Bundle, Vec<RankRun>) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sample-runs/20261126-034958-qwen2.5-0.5b-standard-nproc2");
    let top = llmprof_store::read_bundle(&dir).unwrap();
    let ranks = (0..2)
        .map(|r| {
            let d = dir.join(format!("ranks/{r}"));
            let b = llmprof_store::read_bundle_text(&d).unwrap();
            let path = llmprof_store::timeline_path(&d).unwrap();
            let t = llmprof_store::read_timeline_text(&path).unwrap();
            let run = Run::from_json(&b, &t).unwrap();
            RankRun {
                rank: run.rank.unwrap(),
                run,
            }
        })
        .collect();
    (top, ranks)
}

/// `(start, dur, kernel name)` of every kernel op, and `(start, dur, stage name, depth)` of
/// every range, times shifted by `shift`, sorted.
type Ops = (Vec<(u64, u64, String)>, Vec<(u64, u64, String, u32)>);
fn ops_of(run: &Run, shift: u64) -> Ops {
    let t = &run.timeline;
    let k = &t.kernels;
    let mut kernels: Vec<(u64, u64, String)> = (0..k.start.len())
        .map(|i| {
            let name = run.kernels[k.kernel[i] as usize].name.clone();
            (k.start[i] + shift, k.dur[i], name)
        })
        .collect();
    let r = &t.ranges;
    let mut ranges: Vec<(u64, u64, String, u32)> = (0..r.start.len())
        .map(|i| {
            let name = run.range_name(i as u32).to_string();
            (r.start[i] + shift, r.dur[i], name, r.depth[i])
        })
        .collect();
    kernels.sort();
    ranges.sort();
    (kernels, ranges)
}

/// The two ranks merged, once per test binary, with the ranks and the run's bundle.
fn merged_two() -> &'static (llmprof_bundle::Bundle, Vec<RankRun>, Merged) {
    static CELL: OnceLock<(llmprof_bundle::Bundle, Vec<RankRun>, Merged)> = OnceLock::new();
    CELL.get_or_init(|| {
        let (top, ranks) = two_ranks();
        let m = merge(&ranks).unwrap();
        (top, ranks, m)
    })
}

/// Two ranks side by side: every op and range of each, on the clock the multi-rank ingest
/// aligned them with, in start order.
#[test]
fn two_ranks_side_by_side_keep_every_record_on_one_clock() {
    let (top, ranks, m) = merged_two();
    // The offset between the ranks is the one ingest recorded for the run (rank 0's clock).
    let entries = &top.ranks.as_ref().unwrap().ranks;
    let on_rank0 =
        |p: usize| ranks[p].run.timeline.t0_ns as i128 + i128::from(entries[p].clock_offset_ns);
    assert_eq!(
        m.shift[1] as i128 - m.shift[0] as i128,
        on_rank0(1) - on_rank0(0)
    );
    assert!(m.clock.contains("epoch"), "{}", m.clock);
    // Every record of each rank, and nothing else.
    let (mut kernels, mut ranges) = (Vec::new(), Vec::new());
    for (r, &s) in ranks.iter().zip(&m.shift) {
        let (k, g) = ops_of(&r.run, s);
        kernels.extend(k);
        ranges.extend(g);
    }
    kernels.sort();
    ranges.sort();
    let (got_k, got_r) = ops_of(&m.run, 0);
    assert_eq!(got_k, kernels);
    assert_eq!(got_r, ranges);
    // Columns in start order, as a timeline must be.
    let sorted = |s: &[u64]| s.windows(2).all(|w| w[0] <= w[1]);
    let t = &m.run.timeline;
    assert!(sorted(&t.kernels.start) && sorted(&t.mem_ops.start) && sorted(&t.ranges.start));
    // A stage's instances are in start order, and a range's parent is one level up on its
    // rank's thread.
    for s in &m.run.stages {
        assert!(s
            .instances
            .windows(2)
            .all(|w| t.ranges.start[w[0] as usize] <= t.ranges.start[w[1] as usize]));
    }
    for (i, p) in m.run.range_parent.iter().enumerate() {
        if let Some(p) = p {
            assert_eq!(t.ranges.depth[*p as usize] + 1, t.ranges.depth[i]);
            assert_eq!(t.ranges.tid[*p as usize], t.ranges.tid[i]);
        }
    }
}

/// Each rank's lanes below the other's, named by its rank, each finding its own items; a
/// stage the same colour on every rank.
#[test]
fn each_rank_has_its_lanes_under_its_name() {
    let (_, ranks, m) = merged_two();
    let run = &m.run;
    let labels: Vec<&str> = run.lanes.iter().map(|l| l.label.as_str()).collect();
    let per_rank = ranks[0].run.lanes.len();
    assert_eq!(labels.len(), per_rank + ranks[1].run.lanes.len());
    let named = |ls: &[&str], r: u32| ls.iter().all(|l| l.starts_with(&format!("Rank {r} · ")));
    assert!(named(&labels[..per_rank], 0), "{labels:?}");
    assert!(named(&labels[per_rank..], 1), "{labels:?}");
    for (li, lane) in run.lanes.iter().enumerate() {
        for &i in lane.items.iter().step_by(97) {
            let target = match lane.kind {
                LaneKind::Stages { .. } => Target::Range(i),
                LaneKind::Stream(_) => Target::Kernel(i),
                LaneKind::MemOps => Target::MemOp(i),
                LaneKind::Counter(_) => continue,
            };
            assert_eq!(scene::lane_of(run, target), Some(li), "{}", lane.label);
        }
    }
    let decode: Vec<u32> = run
        .stages
        .iter()
        .filter(|s| s.name == "decode")
        .map(|s| s.color)
        .collect();
    assert_eq!(decode.len(), 2);
    assert_eq!(decode[0], decode[1]);
}

/// Each rank's kernels read in the merge as they do alone (stage instance and its offset,
/// grid and block, graph, category, Nsight Compute), besides their rank and start; a range's
/// GPU busy is each GPU's own, summed, over two GPUs.
#[test]
fn kernels_read_alike_and_busy_is_per_gpu() {
    let (_, ranks, m) = merged_two();
    let (run, t) = (&m.run, &m.run.timeline);
    let k = &t.kernels;
    let lines = |run: &Run, i: usize| -> Vec<(String, String)> {
        llmprof_viewer::details::describe(run, Target::Kernel(i as u32))
            .into_iter()
            .filter(|(k, _)| k != "Rank" && k != "Start")
            .collect()
    };
    for (r, &shift) in ranks.iter().zip(&m.shift) {
        let own = &r.run.timeline.kernels;
        for i in (0..own.start.len()).step_by(53) {
            let start = own.start[i] + shift;
            let name = &r.run.kernels[own.kernel[i] as usize].name;
            let lo = k.start.partition_point(|&s| s < start);
            let at = (lo..k.start.len())
                .take_while(|&j| k.start[j] == start)
                .find(|&j| {
                    let row = &run.kernels[k.kernel[j] as usize];
                    row.rank == Some(r.rank) && &row.name == name && k.dur[j] == own.dur[i]
                })
                .expect("the kernel is in the merge");
            assert_eq!(
                lines(run, at),
                lines(&r.run, i),
                "rank {} kernel {i}",
                r.rank
            );
        }
    }
    let k1 = (0..k.start.len())
        .find(|&i| run.kernels[k.kernel[i] as usize].rank == Some(1))
        .unwrap();
    let said = llmprof_viewer::details::describe(run, Target::Kernel(k1 as u32));
    assert_eq!(said[0], ("Rank".to_string(), "1".to_string()));
    let st = range_stats(run, 0, t.end_ns);
    assert_eq!(st.gpus, 2);
    let alone: u64 = ranks
        .iter()
        .map(|r| range_stats(&r.run, 0, r.run.timeline.end_ns).busy_ns)
        .sum();
    assert_eq!(st.busy_ns, alone);
    assert_eq!(st.ops as usize, k.start.len() + t.mem_ops.start.len());
}

#[test]
fn a_rank_twice_or_no_rank_is_refused() {
    let (_, ranks) = two_ranks();
    let twice = [ranks[0].clone(), ranks[0].clone()];
    assert_eq!(merge(&twice).unwrap_err().0, "rank 0 is loaded twice");
    assert!(merge(&[]).is_err());
    // Ranks an hour apart are laid out, and the clock note doubts they are one job's; a
    // stage or launch index past the rank's own tables is no row of the next rank's.
    let mut far = ranks.clone();
    let t1 = &mut far[1].run.timeline;
    t1.t0_epoch_ns = t1.t0_epoch_ns.map(|e| e + 3_600_000_000_000);
    t1.kernels.stage[0] = OptU32::some(u32::MAX - 1);
    t1.kernels.launch[0] = OptU32::some(t1.launches.len() as u32);
    let m = merge(&far).unwrap();
    assert!(m.clock.contains("rank 1 starts"), "{}", m.clock);
    assert!(m.clock.contains("are they from one job?"), "{}", m.clock);
    let k = &m.run.timeline.kernels;
    let first1 = k.start.partition_point(|&s| s < m.shift[1]);
    assert_eq!(
        (k.stage[first1], k.launch[first1]),
        (OptU32::NONE, OptU32::NONE)
    );
    // One rank alone is that rank, shifted by nothing.
    let one = merge(&ranks[..1]).unwrap();
    assert_eq!(one.shift, vec![0]);
    assert_eq!(
        one.run.timeline.kernels.start,
        ranks[0].run.timeline.kernels.start
    );
}

/// The fixture's timeline cut into chunks of 700 kernels with a load budget of 3,000: the
/// overview holds every kernel's time and count, and a window's loaded chunks give the same
/// range table as the run loaded whole, whatever window.
#[test]
fn a_chunked_timeline_loads_windows_that_read_as_the_whole_run() {
    use llmprof_bundle::ChunkedTimeline;
    let (b, t) = fixture_json();
    let whole = Run::from_json(b, t).unwrap();
    let (head, chunks) =
        ChunkedTimeline::split(Timeline::from_json(t).unwrap(), 700, 4096, 3000).unwrap();
    assert_eq!(
        chunks.len(),
        whole.timeline.kernels.start.len().div_ceil(700)
    );
    let mut run = Run::from_chunked_json(b, &serde_json::to_string(&head).unwrap()).unwrap();
    let k = &whole.timeline.kernels;
    // Each stream's overview adds up to its kernels' count and time.
    for (si, _) in whole.timeline.streams.iter().enumerate() {
        let mine = (0..k.start.len()).filter(|&i| k.stream[i] as usize == si);
        let (n, busy) = mine.fold((0u64, 0u64), |(n, d), i| (n + 1, d + k.dur[i]));
        let c = run.chunked.as_ref().unwrap();
        match c.bucket(si as u32, 0.0, f64::MAX) {
            Some(bk) => {
                assert_eq!(bk.kernels, n, "stream {si}");
                let span = bk.span.1 - bk.span.0;
                assert!((bk.busy - (busy as f64 / span as f64).min(1.0)).abs() < 1e-9);
            }
            None => assert_eq!(n, 0, "stream {si} has kernels but no overview"),
        }
    }
    // Whole-run view: too many kernels, the overview is drawn and nothing is wanted.
    let end = whole.timeline.end_ns as f64;
    assert!(run.overview_for(0.0, end).is_some());
    assert_eq!(run.chunked.as_ref().unwrap().wanted(0.0, end), None);
    // Windows across the run: each loads, and reads as the whole run does.
    for w in 0..8 {
        let t0 = end * w as f64 / 8.0;
        let t1 = t0 + end / 200.0;
        let c = run.chunked.as_mut().unwrap();
        let want = c.wanted(t0, t1).expect("a 1/200 window fits the budget");
        for i in c.missing(&want) {
            c.add(i, &chunks[i]).unwrap();
        }
        assert!(run.load_chunks(want).unwrap());
        assert!(
            run.overview_for(t0, t1).is_none(),
            "window {w} is not covered"
        );
        let (a, z) = (t0 as u64, t1 as u64);
        let (mine, theirs) = (range_stats(&run, a, z), range_stats(&whole, a, z));
        assert_eq!(mine.ops, theirs.ops, "window {w}");
        assert_eq!(mine.busy_pct(), theirs.busy_pct(), "window {w}");
        assert_eq!(mine.rows, theirs.rows, "window {w}");
        // Each loaded kernel is the whole run's kernel at its position.
        let mine = &run.timeline.kernels;
        for i in 0..mine.start.len() as u32 {
            let g = run.global_kernel(i) as usize;
            assert_eq!(run.local_kernel(g as u64), Some(i));
            let (a, b) = (i as usize, g);
            assert_eq!(
                (mine.start[a], mine.dur[a], mine.kernel[a], mine.range[a]),
                (k.start[b], k.dur[b], k.kernel[b], k.range[b])
            );
        }
    }
}
