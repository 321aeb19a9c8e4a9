//! The baseline pass's device memory as the run's [`MemoryRecord`]: for a target, what the
//! driver's `MemoryProbe` wrote (`raw/baseline/baseline.json`'s `memory`); for a `--cmd`
//! workload, NVML's used memory over its stage windows ([`nvml_fallback`]), labelled as such.

use std::path::Path;

use llmprof_bundle::{MemoryRecord, NvmlSeries, StageMemory};

use crate::energy::EnergyWindows;
use serde::Deserialize;

#[derive(Deserialize)]
struct File {
    memory: Option<Memory>,
}

#[derive(Deserialize)]
struct Memory {
    weights_bytes: Option<u64>,
    free_bytes: Option<u64>,
    total_bytes: Option<u64>,
    allocated_bytes: Option<u64>,
    reserved_bytes: Option<u64>,
    prefill: Option<Peak>,
    decode: Option<Peak>,
    kv_cache_bytes: Option<u64>,
    kv_cache_kind: Option<String>,
    kv_tokens: Option<u64>,
    batch_size: Option<u64>,
}

#[derive(Deserialize)]
struct Peak {
    peak_allocated_bytes: u64,
    peak_reserved_bytes: u64,
}

/// The memory the first baseline pass measured; `None` when its file has none (older drivers,
/// `--cmd`) or cannot be read.
pub fn baseline_memory(raw: &Path) -> Option<MemoryRecord> {
    let rel = "baseline/baseline.json";
    let text = std::fs::read_to_string(raw.join(rel)).ok()?;
    let m = serde_json::from_str::<File>(&text).ok()?.memory?;
    let stages = [("prefill", m.prefill), ("decode", m.decode)]
        .into_iter()
        .filter_map(|(stage, p)| {
            p.map(|p| StageMemory {
                stage: stage.into(),
                peak_allocated_bytes: p.peak_allocated_bytes,
                peak_reserved_bytes: p.peak_reserved_bytes,
            })
        })
        .collect();
    Some(MemoryRecord {
        source: format!(
            "raw/{rel}: PyTorch's caching allocator (peaks reset at each stage's start, the \
             largest over the measured iterations) and cudaMemGetInfo after them"
        ),
        weights_bytes: m.weights_bytes,
        free_bytes: m.free_bytes,
        total_bytes: m.total_bytes,
        allocated_bytes: m.allocated_bytes,
        reserved_bytes: m.reserved_bytes,
        stages,
        kv_cache_bytes: m.kv_cache_bytes,
        kv_cache_kind: m.kv_cache_kind,
        kv_tokens: m.kv_tokens,
        batch_size: m.batch_size,
        nvml_used: false,
    })
}

/// A `--cmd` workload's memory when it reports none itself: the most NVML's used memory (the
/// whole device, every process) reached inside each stage's baseline windows; `None` without
/// samples in any window.
pub fn nvml_fallback(series: &NvmlSeries, stages: &[EnergyWindows]) -> Option<MemoryRecord> {
    let peak = |windows: &[(i64, i64)]| {
        (series.t_ns.iter().zip(&series.mem_used_bytes))
            .filter(|(t, _)| windows.iter().any(|(a, b)| (*a..=*b).contains(*t)))
            .map(|(_, m)| *m)
            .max()
    };
    let stages: Vec<StageMemory> = stages
        .iter()
        .filter_map(|w| {
            peak(&w.windows).map(|m| StageMemory {
                stage: w.stage.clone(),
                peak_allocated_bytes: m,
                peak_reserved_bytes: m,
            })
        })
        .collect();
    if stages.is_empty() {
        return None;
    }
    Some(MemoryRecord {
        source: "NVML used memory (the whole device, every process; no allocator view), the \
                 most sampled inside each stage's windows of the baseline runs (fallback: the \
                 workload reported no memory)"
            .into(),
        nvml_used: true,
        stages,
        ..MemoryRecord::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_memory_object_becomes_the_record() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("baseline")).unwrap();
        let doc = r#"{"memory": {"weights_bytes": 1000, "free_bytes": 50, "total_bytes": 80,
            "prefill": {"peak_allocated_bytes": 7, "peak_reserved_bytes": 9},
            "kv_cache_bytes": 64, "kv_cache_kind": "dynamic", "kv_tokens": 8, "batch_size": 2}}"#;
        std::fs::write(dir.path().join("baseline/baseline.json"), doc).unwrap();
        let m = baseline_memory(dir.path()).unwrap();
        assert_eq!((m.weights_bytes, m.kv_cache_bytes), (Some(1000), Some(64)));
        assert_eq!(m.stages.len(), 1);
        assert_eq!(m.stages[0].peak_reserved_bytes, 9);
        assert!(m.source.starts_with("raw/baseline/baseline.json"));
        std::fs::write(dir.path().join("baseline/baseline.json"), "{}").unwrap();
        assert!(baseline_memory(dir.path()).is_none());
    }

    #[test]
    fn a_command_falls_back_to_nvml_used_memory_in_its_stage_windows() {
        let s = NvmlSeries {
            t_ns: vec![0, 10, 20, 30, 40],
            mem_used_bytes: vec![1, 5, 3, 9, 2],
            ..NvmlSeries::default()
        };
        let w = |stage: &str, windows| EnergyWindows {
            stage: stage.into(),
            kind: "iterations",
            windows,
            per_window: 1,
        };
        let m = nvml_fallback(
            &s,
            &[w("prefill", vec![(5, 20)]), w("decode", vec![(25, 45)])],
        );
        let m = m.unwrap();
        assert!(m.nvml_used && m.source.starts_with("NVML used memory"));
        let peaks: Vec<(String, u64)> = (m.stages.iter())
            .map(|s| (s.stage.clone(), s.peak_allocated_bytes))
            .collect();
        assert_eq!(peaks, [("prefill".into(), 5), ("decode".into(), 9)]);
        assert!(nvml_fallback(&s, &[w("decode", vec![(100, 200)])]).is_none());
    }
}
