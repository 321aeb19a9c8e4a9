//! A Hugging Face `config.json` as analysis reads it: any JSON gives a model (with FLOPs,
//! parameters and bytes that do not overflow) or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(config) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Ok(model) = llmprof_analysis::model::Model::from_config(&config) else {
        return;
    };
    let _ = (
        model.params(),
        model.kv_bytes_per_token(),
        model.conventions(),
    );
});
