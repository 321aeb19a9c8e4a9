//! Each quirk of real ncu output, with the bytes that showed it.

// A test fails by panicking; the workspace's `clippy::panic` lint is meant for library code.
#![allow(clippy::panic)]

use std::io::Write;
use std::path::{Path, PathBuf};

use llmprof_bundle::{Category, Kernel, OpKind, Severity, Source};

use super::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures");
const H200_RAW: &str = "h200-qwen2-0.5b/ncu_decode_raw.csv";
const RTX_NCU: &str = "rtx5090-deepseek-ocr/ncu";
const RTX_KERNEL_1: &str = "rtx5090-deepseek-ocr/ncu/kernel_0001_67bdb7e29d1bb4e0ca0aec954ef18af3";
const RTX_NSYS_KERN_SUM: &str = "rtx5090-deepseek-ocr/nsys_cuda_gpu_kern_sum_all-stage.csv";
const NSYS_GEMV_7: &str = "std::enable_if<!T7, void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, (bool)0, (bool)1, (bool)1, (bool)0, (int)7, (bool)0, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<const __nv_bfloat16>, cublasGemvTensorStridedBatched<const __nv_bfloat16>, cublasGemvTensorStridedBatched<__nv_bfloat16>, float>>(T13)";
const NSYS_GEMV_6: &str = "std::enable_if<!T7, void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, (bool)0, (bool)1, (bool)1, (bool)0, (int)6, (bool)0, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<const __nv_bfloat16>, cublasGemvTensorStridedBatched<const __nv_bfloat16>, cublasGemvTensorStridedBatched<__nv_bfloat16>, float>>(T13)";

fn fixture(rel: &str) -> PathBuf {
    Path::new(FIXTURES).join(rel)
}

fn read(rel: &str) -> NcuInput {
    match read_ncu_paths(&[fixture(rel)]) {
        Ok(input) => input,
        Err(e) => panic!("{rel}: {e}"),
    }
}

fn read_err(path: &Path) -> String {
    match read_ncu_paths(&[path.to_path_buf()]) {
        Ok(input) => panic!("{} read without error: {input:?}", path.display()),
        Err(e) => e.to_string(),
    }
}

/// A temporary file holding `text`, kept alive by the returned guard.
fn temp_csv(text: &str) -> tempfile::NamedTempFile {
    let mut f = match tempfile::Builder::new().suffix(".csv").tempfile() {
        Ok(f) => f,
        Err(e) => panic!("temp file: {e}"),
    };
    if let Err(e) = f.write_all(text.as_bytes()) {
        panic!("temp file: {e}");
    }
    f
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() <= 1e-9 * b.abs().max(1.0))
}

fn diag<'a>(input: &'a NcuInput, code: &str) -> Option<&'a Diagnostic> {
    input.diagnostics.iter().find(|d| d.code == code)
}

fn kernel_row(id: u32, name: &str) -> Kernel {
    Kernel {
        id,
        kind: OpKind::Kernel,
        name: name.to_string(),
        short_name: llmprof_bundle::names::short_name(name),
        category: Category::Gemm,
        calls: 1,
        total_ns: 1,
        mean_ns: 1.0,
        median_ns: 1.0,
        min_ns: 1,
        max_ns: 1,
        std_ns: 0.0,
        time_pct: 0.0,
        by_stage: Vec::new(),
        launch: None,
        launch_variants: 1,
        bytes: None,
        graph_calls: 0,
        ncu: Vec::new(),
    }
}

/// The `Name` column of an `nsys stats -r cuda_gpu_kern_sum` CSV.
fn nsys_kernel_names(rel: &str) -> Vec<String> {
    let mut reader = match csv::Reader::from_path(fixture(rel)) {
        Ok(r) => r,
        Err(e) => panic!("{rel}: {e}"),
    };
    let name_col = reader
        .headers()
        .ok()
        .and_then(|h| h.iter().position(|c| c == "Name"));
    let Some(name_col) = name_col else {
        panic!("{rel}: no Name column");
    };
    reader
        .records()
        .filter_map(Result::ok)
        .filter_map(|r| r.get(name_col).map(str::to_string))
        .collect()
}

#[test]
fn raw_page_with_preamble_units_row_and_thousands_separators() {
    let input = read(H200_RAW);
    assert_eq!(input.kernels.len(), 30);
    let k = &input.kernels[0];
    assert_eq!(k.id, 0);
    assert!(
        k.name
            .starts_with("void at::<unnamed>::indexSelectSmallIndex<"),
        "{}",
        k.name
    );
    // `2,752` with an `ns` unit in the units row.
    assert_eq!(k.duration_ns, Some(2752.0));
    assert_eq!(k.nvtx_range.as_deref(), Some("decode"));
    assert_eq!(k.grid, Some([7, 1, 1]));
    assert_eq!(k.block, Some([128, 1, 1]));
    assert_eq!(k.registers_per_thread, Some(32));
    assert_eq!(k.stream, Some(7));
    assert!(close(k.sm_throughput_pct, 0.14));
    assert!(close(k.memory_throughput_pct, 0.53));
    assert!(close(k.dram_throughput_pct, 0.05));
    assert!(close(k.achieved_occupancy_pct, 7.53));
    assert!(close(k.theoretical_occupancy_pct, 100.0));
    assert!(close(k.tensor_pipe_pct, 0.16));
    assert_eq!(k.l2_hit_pct, None);
    assert_eq!(k.kernel, None);
    assert!(k.file.ends_with("ncu_decode_raw.csv"));
    // Other metrics, in base units; the machine-wide column families are left out.
    assert_eq!(k.metrics.get("gpu__time_duration.max"), Some(&2752.0));
    assert_eq!(k.metrics.get("launch__shared_mem_per_block"), Some(&1024.0));
    assert!(close(
        k.metrics
            .get("sm__warps_active.max.pct_of_peak_sustained_active")
            .copied(),
        146.89
    ));
    assert!(!k.metrics.contains_key("gpu__time_duration.sum"));
    assert!(!k.metrics.contains_key("launch__registers_per_thread"));
    assert!(k
        .metrics
        .keys()
        .all(|m| !m.starts_with("device__attribute_")
            && !m.starts_with("nvlink__")
            && !m.starts_with("numa__")
            && !m.starts_with("profiler__")));
    // ncu was told `--nvtx-include decode/`: every launch is inside `decode`.
    assert!(input
        .kernels
        .iter()
        .all(|k| k.nvtx_range.as_deref() == Some("decode")));
    assert_eq!(
        input.kernels[20].name,
        "nvjet_sm90_tst_8x64_64x16_4x1_v_bz_bias_TNN"
    );
    assert_eq!(input.kernels[20].grid, Some([4, 28, 1]));

    let Some(device) = &input.device else {
        panic!("no device");
    };
    assert_eq!(device.name, "NVIDIA H200");
    assert_eq!(device.sm_count, Some(132));
    assert_eq!(device.compute_capability.as_deref(), Some("9.0"));
    assert_eq!(device.memory_bytes, Some(150_109_880_320));
    assert_eq!(device.sm_clock_max_hz, Some(1_980_000_000));
    assert_eq!(device.memory_clock_max_hz, Some(3_201_000_000));
    assert_eq!(device.l2_cache_bytes, Some(62_914_560));
    assert_eq!(device.index, Some(0));
    assert_eq!(device.sources, vec![Source::Ncu]);

    // The workload's own stdout line before the header is skipped and counted.
    let Some(skipped) = diag(&input, "ncu.program_output") else {
        panic!("no program_output diagnostic: {:?}", input.diagnostics);
    };
    assert_eq!((skipped.count, skipped.severity), (1, Severity::Info));
    assert!(skipped.example.starts_with("plain run s"));
    assert!(diag(&input, "ncu.warning").is_some());
    assert!(diag(&input, "ncu.malformed_row").is_none());
    assert!(
        diag(&input, "ncu.unknown_unit").is_none(),
        "{:?}",
        input.diagnostics
    );
}

#[test]
fn raw_page_prof_lines_inside_the_table_are_skipped() {
    let text = match std::fs::read_to_string(fixture(H200_RAW)) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    let mut lines: Vec<&str> = text.lines().collect();
    // After the header, the units row and two kernels.
    lines.insert(8, "==PROF== Disconnected from process 591");
    let file = temp_csv(&lines.join("\n"));
    let input = match read_ncu_paths(&[file.path().to_path_buf()]) {
        Ok(i) => i,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(input.kernels.len(), 30);
    let Some(d) = diag(&input, "ncu.interleaved_log") else {
        panic!("no interleaved_log diagnostic: {:?}", input.diagnostics);
    };
    assert_eq!(d.count, 1);
    assert!(diag(&input, "ncu.malformed_row").is_none());
}

#[test]
fn long_format_kernel_directory_merges_into_one_kernel() {
    let input = read(RTX_KERNEL_1);
    assert_eq!(input.kernels.len(), 1, "{:?}", input.kernels);
    let k = &input.kernels[0];
    assert_eq!(k.id, 0);
    assert!(k.name.starts_with("enable_if<!T7, void>::type kernel<"));
    // `6.75 us`, `2.33 Mbyte`.
    assert!(close(k.duration_ns, 6750.0), "{:?}", k.duration_ns);
    assert!(
        close(k.dram_bytes_read, 2_330_000.0),
        "{:?}",
        k.dram_bytes_read
    );
    assert_eq!(k.dram_bytes_write, Some(0.0));
    assert!(close(k.achieved_occupancy_pct, 11.32));
    assert!(close(k.theoretical_occupancy_pct, 16.67));
    assert!(close(k.l2_hit_pct, 27.66));
    // Speed Of Light's "Memory Throughput" (%), not Memory Workload Analysis's (Gbyte/s).
    assert!(
        close(k.memory_throughput_pct, 19.66),
        "{:?}",
        k.memory_throughput_pct
    );
    assert!(close(k.sm_throughput_pct, 9.15));
    assert!(close(k.dram_throughput_pct, 19.66));
    assert_eq!(k.grid, Some([224, 1, 1]));
    assert_eq!(k.block, Some([32, 4, 1]));
    assert_eq!(k.stream, Some(7));
    assert!(k.file.ends_with("ncu.details.csv"), "{}", k.file);
    let m = &k.metrics;
    assert!(close(
        m.get("Memory Workload Analysis/Memory Throughput").copied(),
        345.14e9
    ));
    assert!(close(
        m.get("GPU Speed Of Light Throughput/SM Frequency").copied(),
        1.99e9
    ));
    assert!(close(
        m.get("GPU Speed Of Light Throughput/Elapsed Cycles")
            .copied(),
        13_485.0
    ));
    assert!(close(
        m.get("GPU Speed Of Light Roofline Chart/SM Frequency [Single Precision Roofline]")
            .copied(),
        2.15e9
    ));
    assert!(close(
        m.get("GPU Speed Of Light Roofline Chart/Theoretical Predicated-On FFMA Thread Instructions Executed")
            .copied(),
        21_760.0
    ));
    assert!(!m.contains_key("GPU Speed Of Light Throughput/Duration"));
    assert!(m.keys().all(|key| !key.ends_with('/')), "{:?}", m.keys());
    assert_eq!(input.device, None);
    assert!(diag(&input, "ncu.malformed_row").is_none());
    assert!(
        diag(&input, "ncu.unknown_unit").is_none(),
        "{:?}",
        input.diagnostics
    );
}

#[test]
fn long_format_directory_tree_gives_one_kernel_per_directory() {
    let input = read(RTX_NCU);
    assert_eq!(input.kernels.len(), 8);
    let mut dirs: Vec<&str> = input
        .kernels
        .iter()
        .filter_map(|k| Path::new(&k.file).parent()?.file_name()?.to_str())
        .collect();
    dirs.dedup();
    assert_eq!(dirs.len(), 8);
    assert!(
        dirs.iter()
            .zip(1..)
            .all(|(d, i)| d.starts_with(&format!("kernel_{i:04}_"))),
        "{dirs:?}"
    );
    assert!(input
        .kernels
        .iter()
        .all(|k| k.duration_ns.is_some() && k.id == 0));
    assert!(close(input.kernels[4].duration_ns, 111_810.0));
    assert!(
        input
            .diagnostics
            .iter()
            .all(|d| d.severity == Severity::Info),
        "{:?}",
        input.diagnostics
    );
}

#[test]
fn long_format_kbyte_unit() {
    let input = read("rtx5090-deepseek-ocr/ncu/kernel_0004_16864015d8ec27ba6cf878e5c5ff03d9");
    assert_eq!(input.kernels.len(), 1);
    assert!(
        close(input.kernels[0].dram_bytes_read, 32_770.0),
        "{:?}",
        input.kernels[0].dram_bytes_read
    );
}

#[test]
fn long_format_na_values_are_none() {
    let input = read(RTX_KERNEL_1);
    let m = &input.kernels[0].metrics;
    // `flop_count_hp.sum` is `n/a`; its neighbour is a real 0.
    assert!(!m.contains_key("Command line profiler metrics/flop_count_hp.sum"));
    assert_eq!(
        m.get("Command line profiler metrics/sm__ops_path_tensor_src_bf16_dst_fp32.sum"),
        Some(&0.0)
    );

    // A named field that is `n/a` stays `None`.
    let file = temp_csv(
        "\"ID\",\"Process ID\",\"Kernel Name\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\
         \"0\",\"1\",\"k()\",\"Command line profiler metrics\",\"gpu__time_duration.sum\",\"\",\"n/a\"\n\
         \"0\",\"1\",\"k()\",\"Command line profiler metrics\",\"dram__bytes_read.sum\",\"Kbyte\",\"1,024.5\"\n",
    );
    let input = match read_ncu_paths(&[file.path().to_path_buf()]) {
        Ok(i) => i,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(input.kernels.len(), 1);
    assert_eq!(input.kernels[0].duration_ns, None);
    assert!(close(input.kernels[0].dram_bytes_read, 1_024_500.0));
}

#[test]
fn failed_run_is_an_error_quoting_ncu() {
    let path = fixture("rtx5090-deepseek-ocr/ncu_failed_run_raw.csv");
    let e = read_err(&path);
    assert!(e.contains("ncu_failed_run_raw.csv"), "{e}");
    assert!(e.contains("ncu failed"), "{e}");
    assert!(
        e.contains("==ERROR== Option '--section .*SpeedOfLight.*' did not match any section."),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
}

#[test]
fn empty_file_is_an_error() {
    let file = temp_csv("");
    let e = read_err(file.path());
    assert!(
        e.contains(&file.path().display().to_string()) && e.contains("empty"),
        "{e}"
    );
}

#[test]
fn missing_file_is_an_error() {
    let path = fixture("no-such-dir/ncu.csv");
    let e = read_err(&path);
    assert!(
        e.starts_with("ncu CSV") && e.contains("no-such-dir/ncu.csv"),
        "{e}"
    );
}

#[test]
fn non_ncu_csv_is_an_error() {
    let e = read_err(&fixture(RTX_NSYS_KERN_SUM));
    assert!(e.contains("nsys_cuda_gpu_kern_sum_all-stage.csv"), "{e}");
    assert!(e.contains("not an ncu CSV export"), "{e}");
    assert!(e.contains("--page raw|details"), "{e}");
}

#[test]
fn header_without_kernel_name_is_an_error() {
    let file = temp_csv("\"ID\",\"Process ID\",\"Metric Name\"\n\"0\",\"1\",\"x\"\n");
    let e = read_err(file.path());
    assert!(e.contains("`Kernel Name`"), "{e}");
}

#[test]
fn header_without_rows_is_an_error() {
    let file = temp_csv(
        "==PROF== Connected to process 1\n\"ID\",\"Process ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"\",\"\",\"\",\"ns\"\n",
    );
    let e = read_err(file.path());
    assert!(
        e.contains("no profiled kernels") && e.contains(&file.path().display().to_string()),
        "{e}"
    );
}

#[test]
fn comma_decimal_locale_is_an_error() {
    let file = temp_csv(
        "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\",\"sm__throughput.avg.pct_of_peak_sustained_elapsed\"\n\
         \"\",\"\",\"nsecond\",\"%\"\n\
         \"0\",\"k()\",\"2.752\",\"0,53\"\n\
         \"1\",\"k()\",\"1.215.000\",\"12,5\"\n",
    );
    let e = read_err(file.path());
    assert!(e.contains(&file.path().display().to_string()), "{e}");
    assert!(
        e.contains("comma as the decimal separator") && e.contains("LC_NUMERIC=C"),
        "{e}"
    );
    // The example quoted is one of the values that can only be comma-decimal.
    assert!(e.contains("`0,53`") || e.contains("`1.215.000`"), "{e}");
}

#[test]
fn directory_without_csv_files_is_an_error() {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("{e}"),
    };
    let e = read_err(dir.path());
    assert!(e.contains("no .csv files"), "{e}");
}

#[test]
fn malformed_rows_are_skipped_with_a_warning() {
    let file = temp_csv(
        "\"ID\",\"Kernel Name\",\"Grid Size\",\"gpu__time_duration.sum\"\n\
         \"\",\"\",\"\",\"usecond\"\n\
         \"0\",\"k()\",\"(2, 1, 1)\",\"1.5\"\n\
         \"1\",\"k()\"\n\
         \"x\",\"k()\",\"(2, 1, 1)\",\"1.5\"\n",
    );
    let input = match read_ncu_paths(&[file.path().to_path_buf()]) {
        Ok(i) => i,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(input.kernels.len(), 1);
    assert_eq!(input.kernels[0].duration_ns, Some(1500.0));
    assert_eq!(input.kernels[0].grid, Some([2, 1, 1]));
    let Some(d) = diag(&input, "ncu.malformed_row") else {
        panic!("no malformed_row diagnostic: {:?}", input.diagnostics);
    };
    assert_eq!((d.count, d.severity), (2, Severity::Warning));

    // Only malformed rows: an error, not an empty result.
    let file = temp_csv("\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"x\",\"k()\",\"1\"\n");
    let e = read_err(file.path());
    assert!(e.contains("could be read"), "{e}");
}

#[test]
fn unknown_units_are_kept_and_reported() {
    let file = temp_csv(
        "\"ID\",\"Kernel Name\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\
         \"0\",\"k()\",\"S\",\"m\",\"furlong\",\"3\"\n",
    );
    let input = match read_ncu_paths(&[file.path().to_path_buf()]) {
        Ok(i) => i,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(input.kernels[0].metrics.get("S/m"), Some(&3.0));
    let Some(d) = diag(&input, "ncu.unknown_unit") else {
        panic!("no unknown_unit diagnostic");
    };
    assert_eq!(d.severity, Severity::Info);
    assert!(d.example.contains("furlong"));
}

#[test]
fn join_ncu_links_gemv_kernel() {
    let input = read(RTX_KERNEL_1);
    let mut ncu = input.kernels;
    let mut kernels = vec![kernel_row(0, NSYS_GEMV_6), kernel_row(1, NSYS_GEMV_7)];
    let mut memcpy = kernel_row(2, NSYS_GEMV_7);
    memcpy.kind = OpKind::Memcpy;
    kernels.push(memcpy);
    join_ncu(&mut kernels, &mut ncu);
    assert_eq!(ncu[0].kernel, Some(1));
    assert_eq!(kernels[1].ncu, vec![0]);
    assert!(kernels[0].ncu.is_empty() && kernels[2].ncu.is_empty());
    // Joining again does not duplicate.
    join_ncu(&mut kernels, &mut ncu);
    assert_eq!(kernels[1].ncu, vec![0]);
}

#[test]
fn all_rtx_ncu_kernels_find_their_nsys_names() {
    let input = read(RTX_NCU);
    let names = nsys_kernel_names(RTX_NSYS_KERN_SUM);
    assert_eq!(names.len(), 113);
    for k in &input.kernels {
        let key = match_key(&k.name);
        assert!(
            names.iter().any(|n| match_key(n) == key),
            "no nsys name for {}",
            k.name
        );
    }
    let mut kernels: Vec<Kernel> = names
        .iter()
        .zip(0..)
        .map(|(n, i)| kernel_row(i, n))
        .collect();
    let mut ncu = input.kernels;
    join_ncu(&mut kernels, &mut ncu);
    assert!(
        ncu.iter().all(|k| k.kernel.is_some()),
        "{:?}",
        ncu.iter().map(|k| (&k.name, k.kernel)).collect::<Vec<_>>()
    );
    assert_eq!(
        ncu[0]
            .kernel
            .and_then(|i| kernels.get(i as usize))
            .map(|k| k.name.as_str()),
        Some(NSYS_GEMV_7)
    );
}

/// A CSV in memory reads as the same file on disk does.
#[test]
fn bytes_read_as_the_file_does() {
    let path = fixture(H200_RAW);
    let name = path.display().to_string();
    let bytes = std::fs::read(&path).unwrap_or_default();
    let from_file = read(H200_RAW);
    match read_ncu_bytes(&name, &bytes) {
        Ok(from_bytes) => assert_eq!(from_bytes, from_file),
        Err(e) => panic!("{e}"),
    }
    assert!(read_ncu_bytes("x.csv", b"").is_err());
}
