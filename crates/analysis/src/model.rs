//! TEMPORARY stub of the model API (replaced by the real module on merge).
#![allow(dead_code, unused_variables)]
#[derive(Debug, Clone, PartialEq)]
pub struct Model;
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("FLOPs unknown for model_type {0}; give counted FLOPs")]
    UnknownModelType(String),
    #[error("config.json has no model_type; give counted FLOPs")]
    NoModelType,
    #[error("config.json lacks `{field}` needed for model_type {model_type}")]
    MissingField { model_type: String, field: String },
}
impl Model {
    pub fn from_config(config: &serde_json::Value) -> Result<Model, ModelError> { Err(ModelError::NoModelType) }
    pub fn model_type(&self) -> &str { "" }
    pub fn dtype_bytes(&self) -> f64 { 2.0 }
    pub fn compute_dtype(&self) -> &'static str { "bf16" }
    pub fn params(&self) -> (f64, f64) { (0.0, 0.0) }
    pub fn decode_step_flops(&self, context: u64) -> f64 { 0.0 }
    pub fn prefill_flops(&self, tokens: u64, logits_tokens: u64) -> f64 { 0.0 }
    pub fn decode_step_bytes(&self, batch: u64, context: u64) -> f64 { 0.0 }
    pub fn prefill_bytes(&self, batch: u64, tokens: u64) -> f64 { 0.0 }
    pub fn kv_bytes_per_token(&self) -> f64 { 0.0 }
    pub fn vision_flops(&self) -> Option<Vec<(&'static str, f64)>> { None }
    pub fn image_tokens_per_image(&self) -> Option<u64> { None }
    pub fn conventions(&self) -> Vec<String> { Vec::new() }
}
