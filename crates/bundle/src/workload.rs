//! What the workload did (token counts), what it measured itself (counted FLOPs), and what the
//! device can really do (measured ceilings): the inputs of analysis that no profiler trace
//! holds directly.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A value and where it came from: `"--prompt-tokens flag"`, `"metadata.json"`, or
/// `"inferred from aten::embedding Input Dims in the PyTorch profiler trace"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sourced<T> {
    pub value: T,
    pub source: String,
}

impl<T> Sourced<T> {
    pub fn new(value: T, source: impl Into<String>) -> Self {
        Sourced {
            value,
            source: source.into(),
        }
    }
}

/// Token accounting of the profiled run.
///
/// Decode step `j` (1-based) of an instance feeds one new token per sequence that attends
/// `prompt_tokens + image_tokens + j` keys (the context includes the new token).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    #[serde(default)]
    pub batch_size: Option<Sourced<u64>>,
    /// Text tokens of the prompt per sequence.
    #[serde(default)]
    pub prompt_tokens: Option<Sourced<u64>>,
    /// Image tokens in the LM sequence per sequence (OCR / vision-language models).
    #[serde(default)]
    pub image_tokens: Option<Sourced<u64>>,
    /// Decode steps per instance of the decode stage: one entry per instance in order, or a
    /// single entry that holds for every instance.
    #[serde(default)]
    pub decode_steps: Option<Sourced<Vec<u64>>>,
    /// Tokens per sequence whose logits prefill computes: 1 for `generate()`
    /// (`logits_to_keep=1`), the prompt length for a plain forward call.
    #[serde(default)]
    pub prefill_logits: Option<Sourced<u64>>,
    /// The tensor-/expert-parallel degree: how many GPUs one model instance is split over.
    /// MFU and MBU divide by this many GPUs' peak (absent: 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_degree: Option<Sourced<u64>>,
}

impl Workload {
    /// Decode steps of decode-stage instance `i` (0-based).
    pub fn steps_of_instance(&self, i: usize) -> Option<u64> {
        let steps = &self.decode_steps.as_ref()?.value;
        match steps.len() {
            0 => None,
            1 => Some(steps[0]),
            _ => steps.get(i).copied(),
        }
    }

    /// Prompt plus image tokens per sequence.
    pub fn context_before_decode(&self) -> Option<u64> {
        let prompt = self.prompt_tokens.as_ref()?.value;
        Some(prompt + self.image_tokens.as_ref().map_or(0, |t| t.value))
    }

    pub fn batch(&self) -> u64 {
        self.batch_size.as_ref().map_or(1, |b| b.value.max(1))
    }

    /// The counts as `label value` texts grouped by source, in field order, so that a report
    /// names each source once: `[("--prompt-tokens flag", ["prompt tokens 512"]), ...]`.
    pub fn by_source(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        let mut add = |label: String, source: &str| match groups.iter_mut().find(|g| g.0 == source)
        {
            Some(g) => g.1.push(label),
            None => groups.push((source.to_string(), vec![label])),
        };
        if let Some(v) = &self.batch_size {
            add(format!("batch {}", v.value), &v.source);
        }
        if let Some(v) = &self.prompt_tokens {
            add(format!("prompt tokens {}", v.value), &v.source);
        }
        if let Some(v) = &self.image_tokens {
            add(format!("image tokens {}", v.value), &v.source);
        }
        if let Some(v) = &self.decode_steps {
            let steps: Vec<String> = v.value.iter().map(u64::to_string).collect();
            add(format!("decode steps {}", steps.join(",")), &v.source);
        }
        if let Some(v) = &self.prefill_logits {
            add(format!("prefill logits {}", v.value), &v.source);
        }
        groups
    }

    /// [`Workload::by_source`] as one line: `batch 1, prompt tokens 512 (metadata …); …`.
    pub fn describe(&self) -> String {
        self.by_source()
            .iter()
            .map(|(src, labels)| format!("{} ({src})", labels.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// FLOPs of one stage counted by the workload itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CountedFlops {
    /// Stage name (as in `stages[].name`).
    pub stage: String,
    /// FLOPs of ONE instance of the stage.
    pub flops_per_instance: f64,
    /// e.g. `"torch.utils.flop_counter.FlopCounterMode"`.
    pub source: String,
}

/// Measured device ceilings and user overrides of the peak table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Measured dense matmul throughput in the run's compute dtype (TFLOP/s).
    #[serde(default)]
    pub measured_tflops: Option<f64>,
    /// Measured device-to-device copy bandwidth (GB/s, 1e9 bytes/s).
    #[serde(default)]
    pub measured_gbps: Option<f64>,
    /// Peak overrides (`--peak-tflops`, `--peak-gbps`, or metadata).
    #[serde(default)]
    pub peak_tflops: Option<f64>,
    #[serde(default)]
    pub peak_gbps: Option<f64>,
    /// Where each value came from.
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

/// `metadata.json`: what a workload driver (llmprof capture, or the user's own script) writes
/// next to its traces. Every field is optional. Example:
///
/// ```json
/// { "batch_size": 1, "prompt_tokens": 512, "decode_steps": [2, 16], "prefill_logits": 512,
///   "counted_flops": {"prefill": 5.2e11, "decode": 1.9e10},
///   "measured_tflops": 780.0, "measured_gbps": 4300.0 }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunMetadata {
    #[serde(default)]
    pub batch_size: Option<u64>,
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub image_tokens: Option<u64>,
    #[serde(default)]
    pub decode_steps: Option<Vec<u64>>,
    #[serde(default)]
    pub prefill_logits: Option<u64>,
    /// Tensor-/expert-parallel degree (`parallel_degree`).
    #[serde(default)]
    pub parallel_degree: Option<u64>,
    /// Stage name -> FLOPs of one instance, as counted by the workload.
    #[serde(default)]
    pub counted_flops: BTreeMap<String, f64>,
    /// What counted the FLOPs; default `FlopCounterMode`.
    #[serde(default)]
    pub counted_flops_source: Option<String>,
    #[serde(default)]
    pub measured_tflops: Option<f64>,
    #[serde(default)]
    pub measured_gbps: Option<f64>,
    #[serde(default)]
    pub peak_tflops: Option<f64>,
    #[serde(default)]
    pub peak_gbps: Option<f64>,
}
