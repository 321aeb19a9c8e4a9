//! Writes the NVML chart of a synthetic series to stdout, to look at.
fn main() {
    use llmprof_bundle::{NvmlSeries, Window};
    let mut b = llmprof_bundle::Bundle::new("nvml");
    let n = 400u32;
    let t0 = 1_000_000_000_000i64;
    b.nvml = Some(NvmlSeries {
        interval_ms: 20,
        t_ns: (0..n).map(|i| t0 + i64::from(i) * 20_000_000).collect(),
        power_mw: (0..n).map(|i| 120_000 + (i % 50) * 3000).collect(),
        sm_clock_mhz: (0..n).map(|i| if i < 30 { 345 } else { 1980 }).collect(),
        mem_clock_mhz: vec![3201; n as usize],
        gpu_util_pct: (0..n).map(|i| (i * 7) % 101).collect(),
        mem_util_pct: vec![10; n as usize],
        mem_used_bytes: vec![1 << 30; n as usize],
        temp_c: vec![40; n as usize],
        throttle_reasons: vec![0; n as usize],
        windows: vec![
            Window {
                name: "baseline".into(),
                start_ns: t0,
                end_ns: t0 + 3_000_000_000,
            },
            Window {
                name: "kineto".into(),
                start_ns: t0 + 3_000_000_000,
                end_ns: t0 + 8_000_000_000,
            },
        ],
        ..NvmlSeries::default()
    });
    if let Some(svg) = llmprof_charts::nvml_timeline(&b) {
        print!("{svg}");
    }
}
