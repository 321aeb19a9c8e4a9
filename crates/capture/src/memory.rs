//! The baseline pass's device memory (`raw/baseline/baseline.json`'s `memory`, written by the
//! driver's `MemoryProbe`) as the run's [`MemoryRecord`].

use std::path::Path;

use llmprof_bundle::{MemoryRecord, StageMemory};
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
}
