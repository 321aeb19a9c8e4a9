//! Peak dense throughput and bandwidth per GPU (the datasheet table of `docs/metrics.md`:
//! tensor cores, no sparsity), the device matched by name and memory size, and overrides.
//!
//! Datasheets print sparse figures (2×) in large type; using them halves MFU. These are the
//! dense numbers. GeForce cards list the FP32-accumulate rate, which is what PyTorch bf16
//! matmuls use.

use llmprof_bundle::{Bundle, Calibration, Device, Peak};

/// One row of the peak table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeakRow {
    pub name: &'static str,
    pub bf16: f64,
    pub tf32: f64,
    pub fp32: f64,
    pub fp8: Option<f64>,
    pub gbps: f64,
}

const fn row(
    name: &'static str,
    bf16: f64,
    tf32: f64,
    fp32: f64,
    fp8: Option<f64>,
    gbps: f64,
) -> PeakRow {
    PeakRow {
        name,
        bf16,
        tf32,
        fp32,
        fp8,
        gbps,
    }
}

/// The table, TFLOP/s and GB/s.
pub const TABLE: &[PeakRow] = &[
    row("H100 SXM", 989.0, 495.0, 67.0, Some(1979.0), 3350.0),
    row("H100 PCIe", 756.0, 378.0, 51.0, Some(1513.0), 2000.0),
    row("H200 SXM", 989.0, 495.0, 67.0, Some(1979.0), 4800.0),
    row("A100 40GB SXM/PCIe", 312.0, 156.0, 19.5, None, 1555.0),
    row("A100 80GB SXM", 312.0, 156.0, 19.5, None, 2039.0),
    row("A100 80GB PCIe", 312.0, 156.0, 19.5, None, 1935.0),
    row("L40S", 362.0, 183.0, 91.6, Some(733.0), 864.0),
    row("L4", 121.0, 60.0, 30.3, Some(242.0), 300.0),
    row("A10", 125.0, 62.5, 31.2, None, 600.0),
    row("RTX 4090", 165.0, 82.6, 82.6, Some(330.0), 1008.0),
    row("RTX 3090", 71.0, 35.6, 35.6, None, 936.0),
    row("B200 (HGX)", 2250.0, 1100.0, 75.0, Some(4500.0), 7700.0),
    row("GH200 96 GB", 989.0, 494.0, 67.0, Some(1979.0), 4000.0),
    row("GH200 144 GB", 989.0, 494.0, 67.0, Some(1979.0), 4900.0),
];

fn find(name: &str) -> Option<&'static PeakRow> {
    TABLE.iter().find(|r| r.name == name)
}

/// The table row for a device name (as NVML, CUDA or Nsight print it, e.g. `NVIDIA H100 80GB
/// HBM3`, `NVIDIA A100-SXM4-40GB`) and its memory size in bytes.
pub fn match_device(name: &str, memory_bytes: Option<u64>) -> Option<&'static PeakRow> {
    let n = name.to_ascii_uppercase().replace(['-', '_'], " ");
    let words: Vec<&str> = n.split_whitespace().collect();
    let word = |w: &str| words.contains(&w);
    let gib = memory_bytes.map(|b| b as f64 / (1u64 << 30) as f64);
    let pcie = n.contains("PCIE");
    if n.contains("GH200") {
        return find(if gib.is_some_and(|g| g > 110.0) {
            "GH200 144 GB"
        } else {
            "GH200 96 GB"
        });
    }
    if n.contains("H200") {
        // H200 NVL has other clocks; only the SXM row is in the table.
        return (!n.contains("NVL")).then(|| find("H200 SXM")).flatten();
    }
    if n.contains("H100") {
        if n.contains("NVL") {
            return None;
        }
        return find(if pcie { "H100 PCIe" } else { "H100 SXM" });
    }
    if n.contains("A100") {
        let big = gib.is_some_and(|g| g > 60.0) || n.contains("80GB");
        return find(match (big, pcie) {
            (false, _) => "A100 40GB SXM/PCIe",
            (true, false) => "A100 80GB SXM",
            (true, true) => "A100 80GB PCIe",
        });
    }
    if n.contains("B200") {
        return find("B200 (HGX)");
    }
    if word("L40S") {
        return find("L40S");
    }
    if word("L4") {
        return find("L4");
    }
    if word("A10") {
        return find("A10");
    }
    if n.contains("4090") {
        return find("RTX 4090");
    }
    if n.contains("3090") {
        return find("RTX 3090");
    }
    None
}

/// The peak for `device` in `dtype` (`bf16`, `fp16`, `tf32`, `fp32`, `fp8`), with overrides
/// and measured ceilings from `calibration`; `Err` says why there is none.
pub fn peak(
    device: Option<&Device>,
    dtype: &str,
    calibration: Option<&Calibration>,
) -> Result<Peak, String> {
    let cal = calibration.cloned().unwrap_or_default();
    let measured = |mut p: Peak| {
        p.measured_tflops = cal.measured_tflops;
        p.measured_gbps = cal.measured_gbps;
        p
    };
    let row = device.and_then(|d| match_device(&d.name, d.memory_bytes));
    let table_tflops = row.and_then(|r| match dtype {
        "bf16" | "fp16" => Some(r.bf16),
        "tf32" => Some(r.tf32),
        "fp32" => Some(r.fp32),
        "fp8" => r.fp8,
        _ => None,
    });
    let source_of = |field: &str| cal.sources.get(field).cloned().unwrap_or_default();
    match (cal.peak_tflops, cal.peak_gbps) {
        (Some(t), Some(g)) => Ok(measured(Peak {
            name: "override".into(),
            dtype: dtype.into(),
            tflops: t,
            gbps: g,
            source: format!(
                "user override: {} TFLOP/s ({}), {} GB/s ({})",
                t,
                source_of("peak_tflops"),
                g,
                source_of("peak_gbps")
            ),
            measured_tflops: None,
            measured_gbps: None,
        })),
        (t, g) => {
            let Some(r) = row else {
                let name =
                    device.map_or("an unknown device".to_string(), |d| format!("`{}`", d.name));
                return Err(format!(
                    "no datasheet peak for {name}; give --peak-tflops and --peak-gbps"
                ));
            };
            let Some(tflops) = t.or(table_tflops) else {
                return Err(format!(
                    "the {} row has no {dtype} peak; give --peak-tflops",
                    r.name
                ));
            };
            let gbps = g.unwrap_or(r.gbps);
            let d = device.map(|d| d.name.as_str()).unwrap_or("");
            let mem = device
                .and_then(|d| d.memory_bytes)
                .map(|b| format!(" and {:.1} GiB", b as f64 / (1u64 << 30) as f64))
                .unwrap_or_default();
            let mut source = format!(
                "datasheet dense peak, row `{}` matched by name `{d}`{mem}",
                r.name
            );
            if t.is_some() {
                source.push_str(&format!(
                    "; TFLOP/s overridden ({})",
                    source_of("peak_tflops")
                ));
            }
            if g.is_some() {
                source.push_str(&format!("; GB/s overridden ({})", source_of("peak_gbps")));
            }
            Ok(measured(Peak {
                name: r.name.into(),
                dtype: dtype.into(),
                tflops,
                gbps,
                source,
                measured_tflops: None,
                measured_gbps: None,
            }))
        }
    }
}

/// The peak one model instance has: the device's × the parallel degree (the GPUs the model is
/// split over, `workload.parallel_degree`), so MFU = the model's FLOPs / (degree × peak ×
/// wall). A multi-rank run without a degree keeps one GPU's peak and says that every rank is
/// counted as running the whole model.
pub fn across_gpus(mut p: Peak, bundle: &Bundle) -> Peak {
    let degree = bundle
        .workload
        .as_ref()
        .and_then(|w| w.parallel_degree.as_ref());
    match degree {
        Some(d) if d.value > 1 => {
            let n = d.value as f64;
            p.tflops *= n;
            p.gbps *= n;
            p.measured_tflops = p.measured_tflops.map(|v| v * n);
            p.measured_gbps = p.measured_gbps.map(|v| v * n);
            p.source = format!(
                "{} × {} GPUs (parallel degree, {})",
                p.source, d.value, d.source
            );
        }
        Some(_) => {}
        None => {
            if let Some(r) = &bundle.ranks {
                p.source = format!(
                    "{}; one GPU's peak: no parallel degree given (--parallel-degree), so each \
                     of the {} ranks is counted as running the whole model (data parallel)",
                    p.source,
                    r.ranks.len()
                );
            }
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_of(n: &str, gb: u64) -> Option<&'static str> {
        match_device(n, Some(gb << 30)).map(|r| r.name)
    }

    #[test]
    fn matches_real_device_names() {
        assert_eq!(name_of("NVIDIA H200", 140), Some("H200 SXM"));
        assert_eq!(name_of("NVIDIA H100 80GB HBM3", 80), Some("H100 SXM"));
        assert_eq!(name_of("NVIDIA H100 PCIe", 80), Some("H100 PCIe"));
        assert_eq!(
            name_of("NVIDIA A100-SXM4-40GB", 40),
            Some("A100 40GB SXM/PCIe")
        );
        assert_eq!(name_of("NVIDIA A100-SXM4-80GB", 80), Some("A100 80GB SXM"));
        assert_eq!(name_of("NVIDIA A100 80GB PCIe", 80), Some("A100 80GB PCIe"));
        assert_eq!(name_of("NVIDIA L40S", 48), Some("L40S"));
        assert_eq!(name_of("NVIDIA L4", 24), Some("L4"));
        assert_eq!(name_of("NVIDIA A10", 24), Some("A10"));
        assert_eq!(name_of("NVIDIA GeForce RTX 4090", 24), Some("RTX 4090"));
        assert_eq!(name_of("NVIDIA GH200 480GB", 144), Some("GH200 144 GB"));
        assert_eq!(name_of("NVIDIA GeForce RTX 5090", 32), None);
    }

    #[test]
    fn override_and_missing_rows() {
        let dev = Device {
            name: "NVIDIA GeForce RTX 5090".into(),
            ..Device::default()
        };
        let err = peak(Some(&dev), "bf16", None).unwrap_err();
        assert!(
            err.contains("RTX 5090") && err.contains("--peak-tflops"),
            "{err}"
        );
        let cal = Calibration {
            peak_tflops: Some(209.5),
            peak_gbps: Some(1792.0),
            ..Calibration::default()
        };
        let p = peak(Some(&dev), "bf16", Some(&cal)).unwrap();
        assert_eq!(
            (p.name.as_str(), p.tflops, p.gbps),
            ("override", 209.5, 1792.0)
        );
        let h200 = Device {
            name: "NVIDIA H200".into(),
            memory_bytes: Some(150_109_880_320),
            ..Device::default()
        };
        let p = peak(Some(&h200), "bf16", None).unwrap();
        assert_eq!((p.tflops, p.gbps), (989.0, 4800.0));
        assert!(p.source.contains("H200 SXM") && p.source.contains("139.8 GiB"));
        assert_eq!(peak(Some(&h200), "fp32", None).unwrap().tflops, 67.0);
    }
}
