//! Analysis of a run bundle: FLOPs and bytes from the model config, MFU/MBU against the
//! device's peak, roofline position, and a diagnosis that names the bottleneck with its
//! evidence. Pure computation on bundle types: no I/O, and no number that is not computed
//! from a measurement or the model config.

pub mod communication;
pub mod diagnose;

pub mod kernels;
pub mod launches;
pub mod memory;
pub mod model;
pub mod peaks;
pub mod run;
pub mod summary;
pub mod throughput;

use llmprof_bundle::{Analysis, Bundle, ModelSummary};

use crate::model::Model;

/// The dtype `llmprof capture` loaded the weights in (the target's `[model] dtype`, `--set`
/// overrides applied): it decides the peak and the bytes whatever the config says.
fn captured_dtype(bundle: &Bundle) -> Option<&str> {
    bundle
        .capture
        .as_ref()?
        .target_config
        .get("model")?
        .get("dtype")?
        .as_str()
}

/// Computes the analysis of `bundle` (its workload, counted FLOPs and calibration included).
pub fn analyze(bundle: &Bundle) -> Analysis {
    let mut a = Analysis::default();
    let model = match &bundle.model {
        None => Err("no model config: give --model-config config.json".to_string()),
        Some(m) => Model::from_config(&m.config)
            .and_then(|model| match captured_dtype(bundle) {
                Some(dtype) => model.with_dtype(dtype),
                None => Ok(model),
            })
            .map_err(|e| e.to_string()),
    };
    match &model {
        Ok(m) => {
            let (params, active) = m.params();
            a.model = Some(ModelSummary {
                model_type: m.model_type().to_string(),
                params,
                active_params: active,
                dtype_bytes: m.dtype_bytes(),
                kv_bytes_per_token: m.kv_bytes_per_token(),
                conventions: m.conventions(),
            });
        }
        Err(why) => a.model_note = Some(why.clone()),
    }
    let dtype = model.as_ref().map_or("bf16", |m| m.compute_dtype());
    match peaks::peak(bundle.device.as_ref(), dtype, bundle.calibration.as_ref()) {
        Ok(p) => a.peak = Some(peaks::across_gpus(p, bundle)),
        Err(why) => a.peak_note = Some(why),
    }
    let model_ref = model.as_ref().map_err(String::as_str);
    let headline = llmprof_report::samples::Samples::of(bundle);
    a.stages = throughput::stages(bundle, model_ref, a.peak.as_ref(), &headline);
    a.inconsistent = throughput::guard(&mut a.stages);
    a.run = run::metrics(bundle, &a.stages, a.peak.as_ref(), &headline);
    a.kernels = kernels::classify(bundle);
    a.memory = memory::analyze(bundle, a.model.as_ref(), &a.stages, &a.run);
    a.findings = diagnose::findings(
        bundle,
        &a.stages,
        &a.kernels,
        a.peak.as_ref(),
        a.inconsistent.as_deref(),
    );
    if let Some(headroom) = a.memory.as_ref().and_then(memory::finding) {
        memory::quote_headroom(&mut a.findings, &a.memory);
        a.findings.push(headroom);
    }
    a.summary = summary::write(bundle, &a);
    a
}
