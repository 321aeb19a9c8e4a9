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

/// A `--cmd` workload's memory as it reported it on its baseline stage lines
/// (`raw/baseline*/stages.jsonl`): per measured stage the largest peaks over its windows, the
/// last free/total, weights and KV cache bytes seen. `None` when no line carries a peak.
pub fn reported(raw: &Path, wanted: &[String]) -> Option<MemoryRecord> {
    let mut stages: Vec<StageMemory> = Vec::new();
    let mut record = MemoryRecord::default();
    let mut files = Vec::new();
    for n in crate::timings::numbered_dirs(raw, "baseline") {
        let dir = crate::timings::numbered_dir("baseline", n);
        let windows = crate::cmd_timings::read_windows(&raw.join(&dir));
        for w in windows
            .iter()
            .filter(|w| crate::cmd_timings::counts(&w.stage, wanted))
        {
            let m = &w.memory;
            let Some(alloc) = m.peak_allocated_bytes else {
                continue;
            };
            if !files.contains(&dir) {
                files.push(dir.clone());
            }
            let reserved = m.peak_reserved_bytes.unwrap_or(alloc);
            match stages.iter_mut().find(|s| s.stage == w.stage) {
                Some(s) => {
                    s.peak_allocated_bytes = s.peak_allocated_bytes.max(alloc);
                    s.peak_reserved_bytes = s.peak_reserved_bytes.max(reserved);
                }
                None => stages.push(StageMemory {
                    stage: w.stage.clone(),
                    peak_allocated_bytes: alloc,
                    peak_reserved_bytes: reserved,
                }),
            }
            record.allocated_bytes = match (record.allocated_bytes, m.allocated_bytes) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            record.free_bytes = m.free_bytes.or(record.free_bytes);
            record.total_bytes = m.total_bytes.or(record.total_bytes);
            record.weights_bytes = m.weights_bytes.or(record.weights_bytes);
            record.kv_cache_bytes = m.kv_cache_bytes.or(record.kv_cache_bytes);
        }
    }
    if stages.is_empty() {
        return None;
    }
    let names: Vec<String> = files
        .iter()
        .map(|d| format!("raw/{d}/{}", crate::cmd_timings::STAGES_FILE))
        .collect();
    Some(MemoryRecord {
        source: format!(
            "{}: reported by the workload (PyTorch's caching allocator: allocated when each \
             stage began, the least over the measured windows, and the peaks since, the \
             largest; cudaMemGetInfo when the stage closed)",
            names.join(", ")
        ),
        stages,
        ..record
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
    fn a_command_reports_its_memory_on_its_stage_lines() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("baseline");
        std::fs::create_dir_all(&base).unwrap();
        let lines = [
            r#"{"stage":"warmup_prefill","start_ns":0,"end_ns":1,"pid":1,"peak_allocated_bytes":999}"#,
            r#"{"stage":"prefill","start_ns":2,"end_ns":3,"pid":1,"allocated_bytes":6,"peak_allocated_bytes":10,"peak_reserved_bytes":20,"free_bytes":70,"total_bytes":100,"weights_bytes":5}"#,
            r#"{"stage":"prefill","start_ns":4,"end_ns":5,"pid":1,"peak_allocated_bytes":12,"peak_reserved_bytes":18}"#,
            r#"{"stage":"decode","start_ns":6,"end_ns":9,"pid":1,"peak_allocated_bytes":11,"peak_reserved_bytes":20,"free_bytes":60,"total_bytes":100,"weights_bytes":5,"kv_cache_bytes":4}"#,
        ];
        std::fs::write(base.join("stages.jsonl"), lines.join("\n")).unwrap();
        let m = reported(dir.path(), &[]).unwrap();
        let peaks: Vec<(&str, u64, u64)> = (m.stages.iter())
            .map(|s| {
                (
                    s.stage.as_str(),
                    s.peak_allocated_bytes,
                    s.peak_reserved_bytes,
                )
            })
            .collect();
        assert_eq!(peaks, [("prefill", 12, 20), ("decode", 11, 20)]);
        assert_eq!((m.free_bytes, m.total_bytes), (Some(60), Some(100)));
        assert_eq!((m.weights_bytes, m.kv_cache_bytes), (Some(5), Some(4)));
        assert_eq!(m.allocated_bytes, Some(6));
        assert!(!m.nvml_used);
        assert!(m
            .source
            .starts_with("raw/baseline/stages.jsonl: reported by the workload"));
        // Lines without memory keys: nothing reported, the NVML fallback applies.
        std::fs::write(
            base.join("stages.jsonl"),
            lines[0].replace(",\"peak_allocated_bytes\":999", ""),
        )
        .unwrap();
        assert!(reported(dir.path(), &[]).is_none());
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
