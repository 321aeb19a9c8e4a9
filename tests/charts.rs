//! The charts of the real H200 Qwen2-0.5B fixture, ingested through `llmprof-ingest`, and of
//! hostile and degenerate bundles.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::OnceLock;

use llmprof_bundle::{Bundle, Category, Distribution, Kernel, NcuKernel, OpKind, Stage, StageKind};
use llmprof_charts::{
    category_share, compare_category_mix, compare_stages, speed_of_light, stage_breakdown,
    top_kernels,
};
use llmprof_ingest::{ingest, IngestRequest};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/h200-qwen2-0.5b"
);

fn fixture() -> &'static Bundle {
    static BUNDLE: OnceLock<Bundle> = OnceLock::new();
    BUNDLE.get_or_init(|| {
        let req = IngestRequest {
            nsys: Some(format!("{FIXTURE}/nsys_export.sqlite.gz").into()),
            ncu: vec![format!("{FIXTURE}/ncu_decode_raw.csv").into()],
            label: Some("qwen2-0.5b h200".to_string()),
            ..Default::default()
        };
        ingest(&req, &mut |_| {}).expect("fixture ingests").bundle
    })
}

/// A second run for comparisons: the fixture with other times and a stage of its own.
fn other_run() -> Bundle {
    let mut b = fixture().clone();
    b.run_id = "20260101-000000-other".to_string();
    b.label = None;
    for s in &mut b.stages {
        s.wall_ns /= 2;
        s.wall.median_ns /= 2.0;
    }
    let mut extra = stage("vision_encoder", 80_000_000, 3_000_000);
    extra.id = b.stages.len() as u32;
    b.stages.push(extra);
    for k in &mut b.kernels {
        if k.category == Category::Gemm {
            k.total_ns *= 3;
        }
    }
    b
}

/// Every chart of `b`, named.
fn all_charts(b: &Bundle) -> Vec<(&'static str, Option<String>)> {
    let other = other_run();
    vec![
        ("stage_breakdown", stage_breakdown(b)),
        ("category_share", category_share(b)),
        ("top_kernels", top_kernels(b, 15)),
        ("speed_of_light", speed_of_light(b)),
        (
            "compare_stages",
            compare_stages(&llmprof_report::Comparison::of(&[b, &other])),
        ),
        (
            "compare_category_mix",
            compare_category_mix(&llmprof_report::Comparison::of(&[b, &other])),
        ),
    ]
}

/// Parses `svg` as XML and returns every text node, checking the document is one `<svg>`.
fn parse(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("not XML: {e}\n{svg}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    assert_eq!(root.attribute("width"), Some("760"));
    for node in doc.descendants().filter(|n| n.is_element()) {
        let name = node.tag_name().name();
        assert!(
            matches!(
                name,
                "svg" | "rect" | "text" | "polyline" | "circle" | "line"
            ),
            "unexpected element <{name}>"
        );
        for attr in node.attributes() {
            assert!(
                !attr.name().starts_with("on") && attr.name() != "href",
                "attribute {} on <{name}>",
                attr.name()
            );
        }
    }
    doc.descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

fn stage(name: &str, wall_ns: u64, busy_ns: u64) -> Stage {
    Stage {
        id: 0,
        domain: String::new(),
        name: name.to_string(),
        kind: StageKind::PushPop,
        parent: None,
        parents: Vec::new(),
        depth: 0,
        instances: 1,
        wall_ns,
        // One instance: its median is the whole wall time.
        wall: Distribution {
            median_ns: wall_ns as f64,
            mean_ns: wall_ns as f64,
            ..Distribution::default()
        },
        gpu_proj_ns: busy_ns,
        gpu_ops: 1,
        kernel_ns: busy_ns,
        kernels: 1,
        launches: 1,
        launch_api_ns: 0,
        gpu_busy_ns: busy_ns,
        gpu_busy_pct: f64::NAN,
        graph_launches: 0,
        graph_kernels: 0,
        graph_busy_ns: 0,
        instance_list: Vec::new(),
    }
}

fn kernel(id: u32, name: &str, category: Category, total_ns: u64) -> Kernel {
    Kernel {
        id,
        kind: OpKind::Kernel,
        name: name.to_string(),
        short_name: name.to_string(),
        category,
        calls: 1,
        total_ns,
        mean_ns: f64::NAN,
        median_ns: f64::NAN,
        min_ns: 0,
        max_ns: 0,
        std_ns: f64::NAN,
        time_pct: f64::NAN,
        // Run inside the stage of the same id, as the test bundles number them.
        by_stage: vec![llmprof_bundle::KernelStage {
            stage: id,
            calls: 1,
            total_ns,
        }],
        launch: None,
        launch_variants: 0,
        bytes: None,
        graph_calls: 0,
        ncu: Vec::new(),
    }
}

fn ncu(name: &str, kernel: Option<u32>, sm: Option<f64>, mem: Option<f64>) -> NcuKernel {
    NcuKernel {
        id: 0,
        name: name.to_string(),
        kernel,
        duration_ns: None,
        sm_throughput_pct: sm,
        memory_throughput_pct: mem,
        dram_throughput_pct: None,
        achieved_occupancy_pct: None,
        theoretical_occupancy_pct: None,
        tensor_pipe_pct: None,
        l2_hit_pct: None,
        dram_bytes_read: None,
        dram_bytes_write: None,
        registers_per_thread: None,
        grid: None,
        block: None,
        nvtx_range: None,
        stream: None,
        metrics: Default::default(),
        file: String::new(),
    }
}

const HOSTILE: [&str; 3] = [
    "<script>alert(1)</script>",
    "\"><img src=x onerror=alert(1)>",
    "'",
];

fn hostile_bundle() -> Bundle {
    let mut b = Bundle::new("<script>alert('id')</script>");
    b.label = Some("\"><img src=x onerror=alert(1)>".to_string());
    for (i, name) in HOSTILE.iter().enumerate() {
        let mut s = stage(name, 10_000_000 * (i as u64 + 1), 1_000_000);
        s.id = i as u32;
        b.stages.push(s);
        b.kernels.push(kernel(
            i as u32,
            name,
            Category::ALL[i],
            1_000 * (i as u64 + 1),
        ));
        b.ncu
            .push(ncu(name, Some(i as u32), Some(10.0 * i as f64), Some(5.0)));
    }
    b.ncu.push(ncu("<b>&amp;</b>", None, Some(1.0), Some(2.0)));
    b
}

#[test]
fn every_chart_renders_the_fixture() {
    for (name, svg) in all_charts(fixture()) {
        let svg = svg.unwrap_or_else(|| panic!("{name} gave None for the fixture"));
        assert!(svg.starts_with("<svg "), "{name}");
        assert!(svg.trim_end().ends_with("</svg>"), "{name}");
        parse(&svg);
    }
}

#[test]
fn fixture_charts_name_their_stages_and_categories() {
    let b = fixture();
    let texts = |svg: Option<String>| parse(&svg.expect("chart")).join("\n");

    let stages = texts(stage_breakdown(b));
    for s in &b.stages {
        assert!(stages.contains(&s.name), "stage {} missing", s.name);
    }
    assert!(stages.contains("1,213 ms"), "decode wall time:\n{stages}");

    let categories = texts(category_share(b));
    for c in ["elementwise", "gemm", "reduction/norm", "attention"] {
        assert!(
            categories.contains(c),
            "category {c} missing:\n{categories}"
        );
    }

    let top = texts(top_kernels(b, 10));
    assert!(top.contains("Top 10 kernels"), "{top}");
    assert!(
        top.contains("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"),
        "{top}"
    );
    assert!(top.contains("gemm"));

    let sol = texts(speed_of_light(b));
    assert!(sol.contains("Speed of light (ncu): compute vs memory throughput"));
    assert!(sol.contains("30 Nsight Compute launches"), "{sol}");

    let other = other_run();
    let cmp = texts(compare_stages(&llmprof_report::Comparison::of(&[
        b, &other,
    ])));
    for name in [
        "prefill",
        "decode",
        "vision_encoder",
        "qwen2-0.5b h200",
        "20260101-000000-other",
    ] {
        assert!(cmp.contains(name), "{name} missing:\n{cmp}");
    }
    assert!(cmp.contains("not in this run"));

    let mix = texts(compare_category_mix(&llmprof_report::Comparison::of(&[
        b, &other,
    ])));
    for name in [
        "gemm",
        "elementwise",
        "qwen2-0.5b h200",
        "20260101-000000-other",
    ] {
        assert!(mix.contains(name), "{name} missing:\n{mix}");
    }
}

#[test]
fn charts_use_the_fixed_category_colours() {
    let svg = category_share(fixture()).expect("chart");
    for c in [Category::Gemm, Category::Elementwise, Category::Attention] {
        let hex = llmprof_report::palette::category(c).to_ascii_uppercase();
        assert!(svg.contains(&format!("fill=\"{hex}\"")), "{c:?} {hex}");
    }
}

#[test]
fn charts_are_deterministic() {
    let b = fixture();
    let first = all_charts(b);
    assert_eq!(first, all_charts(b));
    // A fresh copy read back from `bundle.json` text, as the site reads bundles.
    let json = serde_json::to_string(b).expect("serializes");
    let read = Bundle::from_json(&json).expect("reads back");
    assert_eq!(first, all_charts(&read));
}

#[test]
fn fixture_charts_stay_small() {
    for (name, svg) in all_charts(fixture()) {
        let len = svg.map_or(0, |s| s.len());
        eprintln!("{name}: {len} bytes");
        assert!(len < 40_000, "{name}: {len} bytes");
    }
    let top50 = top_kernels(fixture(), 1000).expect("chart");
    assert!(top50.len() < 60_000, "{}", top50.len());
}

#[test]
fn empty_bundle_has_no_charts() {
    let b = Bundle::new("x");
    assert_eq!(stage_breakdown(&b), None);
    assert_eq!(category_share(&b), None);
    assert_eq!(top_kernels(&b, 10), None);
    assert_eq!(speed_of_light(&b), None);
    assert_eq!(
        compare_stages(&llmprof_report::Comparison::of(&[&b, &b])),
        None
    );
    assert_eq!(
        compare_category_mix(&llmprof_report::Comparison::of(&[&b])),
        None
    );
    assert_eq!(compare_stages(&llmprof_report::Comparison::of(&[])), None);
    assert_eq!(
        compare_category_mix(&llmprof_report::Comparison::of(&[])),
        None
    );
    assert_eq!(top_kernels(fixture(), 0), None);
}

#[test]
fn hostile_names_are_escaped() {
    let b = hostile_bundle();
    let charts = vec![
        stage_breakdown(&b),
        category_share(&b),
        top_kernels(&b, 10),
        speed_of_light(&b),
        compare_stages(&llmprof_report::Comparison::of(&[&b, fixture()])),
        compare_category_mix(&llmprof_report::Comparison::of(&[&b, fixture()])),
    ];
    for svg in charts {
        let svg = svg.expect("hostile bundle still has data");
        assert!(!svg.contains("<script"), "{svg}");
        assert!(!svg.contains("<img"), "{svg}");
        assert!(!svg.contains("<b>"), "{svg}");
        // `onerror=` only inside escaped text, never as an attribute.
        for (i, _) in svg.match_indices("onerror=") {
            let before = &svg[..i];
            let open = before.rfind('<').unwrap_or(0);
            let tag_end = before.rfind('>').unwrap_or(0);
            assert!(tag_end > open, "onerror= inside a tag: {svg}");
        }
        parse(&svg);
    }
    // The names come back verbatim as text.
    let texts = parse(&stage_breakdown(&b).expect("chart")).join("\n");
    for name in HOSTILE {
        assert!(texts.contains(name), "{name} not shown:\n{texts}");
    }
    let texts =
        parse(&compare_stages(&llmprof_report::Comparison::of(&[&b])).expect("chart")).join("\n");
    assert!(texts.contains("\"><img src=x onerror=alert(1)>"), "{texts}");
    let texts = parse(&top_kernels(&b, 10).expect("chart")).join("\n");
    assert!(
        texts.contains("<script>") && texts.contains('\''),
        "{texts}"
    );
    let texts = parse(&speed_of_light(&b).expect("chart")).join("\n");
    assert!(texts.contains("4 Nsight Compute launches"), "{texts}");
}

#[test]
fn degenerate_bundles_do_not_panic() {
    // Zero totals everywhere.
    let mut zero = Bundle::new("zero");
    zero.stages.push(stage("idle", 0, 0));
    zero.kernels.push(kernel(0, "k", Category::Gemm, 0));
    zero.ncu.push(ncu("k", Some(0), None, Some(1.0)));
    assert_eq!(stage_breakdown(&zero), None);
    assert_eq!(category_share(&zero), None);
    assert_eq!(top_kernels(&zero, 5), None);
    assert_eq!(speed_of_light(&zero), None);
    assert_eq!(
        compare_stages(&llmprof_report::Comparison::of(&[&zero])),
        None
    );
    assert_eq!(
        compare_category_mix(&llmprof_report::Comparison::of(&[&zero])),
        None
    );

    // NaN, infinities, out-of-range percentages, u64::MAX times, dangling indexes, control
    // characters and huge names.
    let huge = format!(
        "{}\u{0}\u{1b}[31m\u{202e}\n\t{}",
        "x".repeat(1_000_000),
        "é".repeat(10_000)
    );
    let mut wild = Bundle::new(huge.clone());
    wild.label = Some("\u{0}\u{7}".to_string());
    for (i, (name, wall)) in [(huge.as_str(), u64::MAX), ("", 1), ("   ", u64::MAX / 3)]
        .into_iter()
        .enumerate()
    {
        let mut s = stage(name, wall, u64::MAX);
        s.id = i as u32;
        s.instances = u64::MAX;
        wild.stages.push(s);
    }
    for (i, c) in Category::ALL.iter().enumerate() {
        let mut k = kernel(i as u32, &huge, *c, u64::MAX - i as u64);
        k.calls = u64::MAX;
        wild.kernels.push(k);
    }
    for (sm, mem) in [
        (Some(f64::NAN), Some(1.0)),
        (Some(f64::INFINITY), Some(f64::NEG_INFINITY)),
        (Some(1e300), Some(-5.0)),
        (Some(50.0), None),
    ] {
        wild.ncu.push(ncu(&huge, Some(u32::MAX), sm, mem));
    }
    let mut dram = ncu("dram only", None, Some(12.0), Some(f64::NAN));
    dram.dram_throughput_pct = Some(30.0);
    wild.ncu.push(dram);
    for (name, svg) in all_charts(&wild) {
        let svg = svg.unwrap_or_else(|| panic!("{name} gave None"));
        parse(&svg);
        assert!(svg.len() < 60_000, "{name}: {} bytes", svg.len());
        for bad in ["NaN", "\"inf", "-inf"] {
            assert!(!svg.contains(bad), "{name} has {bad}: {svg}");
        }
    }

    // Many stages, kernels, runs: capped, still small.
    let mut many = Bundle::new("many");
    for i in 0..500u32 {
        let mut s = stage(&format!("stage {i}"), u64::from(i) * 1_000 + 1, 1);
        s.id = i;
        many.stages.push(s);
        many.kernels.push(kernel(
            i,
            &format!("kernel_{i}"),
            Category::Other,
            u64::from(i) + 1,
        ));
        many.ncu.push(ncu(
            "k",
            Some(i),
            Some(f64::from(i % 100)),
            Some(f64::from(i % 37)),
        ));
    }
    let runs: Vec<&Bundle> = std::iter::repeat_n(&many, 40).collect();
    let charts = [
        stage_breakdown(&many),
        top_kernels(&many, usize::MAX),
        speed_of_light(&many),
        compare_stages(&llmprof_report::Comparison::of(&runs)),
        compare_category_mix(&llmprof_report::Comparison::of(&runs)),
    ];
    for svg in charts {
        let svg = svg.expect("chart");
        parse(&svg);
        assert!(svg.len() < 120_000, "{} bytes", svg.len());
    }
}

/// The exact bytes of one small chart, so that a change of plotters, of the layout or of number
/// formatting shows up in review (and a machine that rendered differently would fail).
#[test]
fn category_share_snapshot() {
    let mut b = Bundle::new("snap");
    for (i, (c, ns)) in [
        (Category::Gemm, 18_677_936),
        (Category::Attention, 2_083_828),
        (Category::Elementwise, 21_640_156),
        (Category::ReductionNorm, 3_107_941),
    ]
    .into_iter()
    .enumerate()
    {
        b.kernels.push(kernel(i as u32, "k", c, ns));
    }
    insta::assert_snapshot!(category_share(&b).expect("chart"));
}

#[test]
fn nvml_timeline_draws_samples_and_pass_bands() {
    use llmprof_bundle::{NvmlSeries, Window};
    let mut b = llmprof_bundle::Bundle::new("nvml");
    assert!(
        llmprof_charts::nvml_timeline(&b).is_none(),
        "no samples, no chart"
    );
    let n = 200u32;
    b.nvml = Some(NvmlSeries {
        interval_ms: 20,
        t_ns: (0..n)
            .map(|i| 1_000_000_000_000 + i64::from(i) * 20_000_000)
            .collect(),
        power_mw: (0..n).map(|i| 100_000 + i * 1000).collect(),
        sm_clock_mhz: vec![1980; n as usize],
        mem_clock_mhz: vec![3201; n as usize],
        gpu_util_pct: (0..n).map(|i| i % 101).collect(),
        mem_util_pct: vec![10; n as usize],
        mem_used_bytes: vec![1 << 30; n as usize],
        temp_c: vec![40; n as usize],
        throttle_reasons: vec![0; n as usize],
        windows: vec![Window {
            name: "<script>alert(1)</script>".into(),
            start_ns: 1_000_000_000_000,
            end_ns: 1_002_000_000_000,
        }],
        ..NvmlSeries::default()
    });
    let svg = llmprof_charts::nvml_timeline(&b).unwrap();
    assert!(svg.contains("power (W)") && svg.contains("SM clock (MHz)"));
    assert!(svg.contains("memory used (GiB)"));
    assert!(!svg.contains("<script"), "pass names are escaped");
    roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(
        svg,
        llmprof_charts::nvml_timeline(&b).unwrap(),
        "deterministic"
    );
}

#[test]
fn roofline_places_stages_under_the_roof() {
    use llmprof_bundle::{Analysis, Peak, StageAnalysis, StageRole};
    let mut b = llmprof_bundle::Bundle::new("roof");
    assert!(
        llmprof_charts::roofline(&b).is_none(),
        "no analysis, no chart"
    );
    let stage = |name: &str, role, intensity: f64, tflops: f64| StageAnalysis {
        stage: 0,
        name: name.into(),
        role,
        wall_basis: Default::default(),
        flops: Some(1e12),
        flops_source: Some("analytic".into()),
        analytic_flops: Some(1e12),
        counted_flops: None,
        counted_vs_analytic_pct: None,
        bytes: Some(1e12 / intensity),
        tflops: Some(tflops),
        mfu: Some(tflops / 989.0),
        mfu_busy: None,
        mfu_vs_measured: None,
        gbps: None,
        mbu: None,
        mbu_busy: None,
        mbu_vs_measured: None,
        intensity: Some(intensity),
        bound: "memory-bound".into(),
        note: None,
        launch: None,
    };
    b.analysis = Some(Analysis {
        peak: Some(Peak {
            name: "H200 SXM".into(),
            dtype: "bf16".into(),
            tflops: 989.0,
            gbps: 4800.0,
            source: "test".into(),
            measured_tflops: None,
            measured_gbps: None,
        }),
        stages: vec![
            stage("prefill", StageRole::Prefill, 380.0, 16.3),
            stage("<script>alert(1)</script>", StageRole::Decode, 1.0, 0.04),
        ],
        ..Analysis::default()
    });
    let svg = llmprof_charts::roofline(&b).unwrap();
    assert!(
        svg.contains("prefill") && svg.contains("ridge 206 FLOP/byte"),
        "{svg}"
    );
    assert!(!svg.contains("<script"));
    roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(svg, llmprof_charts::roofline(&b).unwrap());
}
