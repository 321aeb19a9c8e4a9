//! The short JSON view of a bundle that `llmprof show --json` prints: what a script needs to
//! compare runs without reading the whole bundle.

use serde::{Deserialize, Serialize};

use crate::{Bundle, Source};

/// A bundle's headline numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub schema_version: u32,
    pub run_id: String,
    pub label: Option<String>,
    pub captured_at: Option<String>,
    pub device: Option<String>,
    pub model_type: Option<String>,
    pub timing_source: Option<Source>,
    pub gpu_kernels: u64,
    pub gpu_kernel_ns: u64,
    pub gpu_busy_ns: u64,
    pub gpu_span_ns: u64,
    pub stages: Vec<SummaryStage>,
    pub top_kernels: Vec<SummaryKernel>,
    pub top_operators: Vec<SummaryOperator>,
    pub ncu_kernels: usize,
    pub diagnostics: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryStage {
    pub name: String,
    pub domain: String,
    pub instances: u64,
    pub wall_ns: u64,
    pub gpu_proj_ns: u64,
    pub gpu_ops: u64,
    pub kernel_ns: u64,
    pub gpu_busy_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryKernel {
    pub short_name: String,
    pub category: String,
    pub calls: u64,
    pub total_ns: u64,
    pub time_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryOperator {
    pub name: String,
    pub calls: u64,
    pub cpu_total_ns: u64,
    pub device_ns: u64,
}

impl Summary {
    /// The headline numbers of `bundle`, with the `top` largest kernels and operators.
    pub fn of(bundle: &Bundle, top: usize) -> Summary {
        let mut kernels: Vec<_> = bundle.kernels.iter().collect();
        kernels.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.id.cmp(&b.id)));
        let mut operators: Vec<_> = bundle.operators.iter().collect();
        operators.sort_by(|a, b| {
            b.device_self_ns
                .cmp(&a.device_self_ns)
                .then(b.cpu_self_ns.cmp(&a.cpu_self_ns))
                .then(a.name.cmp(&b.name))
        });
        Summary {
            schema_version: bundle.schema_version,
            run_id: bundle.run_id.clone(),
            label: bundle.label.clone(),
            captured_at: bundle.captured_at.clone(),
            device: bundle.device.as_ref().map(|d| d.name.clone()),
            model_type: bundle.model.as_ref().and_then(|m| m.model_type.clone()),
            timing_source: bundle.timing_source,
            gpu_kernels: bundle.totals.kernels,
            gpu_kernel_ns: bundle.totals.kernel_ns,
            gpu_busy_ns: bundle.totals.gpu_busy_ns,
            gpu_span_ns: bundle.totals.gpu_span_ns,
            stages: bundle
                .stages
                .iter()
                .map(|s| SummaryStage {
                    name: s.name.clone(),
                    domain: s.domain.clone(),
                    instances: s.instances,
                    wall_ns: s.wall_ns,
                    gpu_proj_ns: s.gpu_proj_ns,
                    gpu_ops: s.gpu_ops,
                    kernel_ns: s.kernel_ns,
                    gpu_busy_pct: s.gpu_busy_pct,
                })
                .collect(),
            top_kernels: kernels
                .into_iter()
                .take(top)
                .map(|k| SummaryKernel {
                    short_name: k.short_name.clone(),
                    category: k.category.as_str().to_string(),
                    calls: k.calls,
                    total_ns: k.total_ns,
                    time_pct: k.time_pct,
                })
                .collect(),
            top_operators: operators
                .into_iter()
                .take(top)
                .map(|o| SummaryOperator {
                    name: o.name.clone(),
                    calls: o.calls,
                    cpu_total_ns: o.cpu_total_ns,
                    device_ns: o.device_ns,
                })
                .collect(),
            ncu_kernels: bundle.ncu.len(),
            diagnostics: bundle.diagnostics.len(),
        }
    }
}
