//! Analytic FLOPs, parameters and bytes of a Hugging Face model, from its `config.json`.
//!
//! MFU needs the FLOPs a stage *had* to do and MBU the bytes it *had* to move. Counting them from
//! the config (rather than from the kernels that ran) gives a denominator that does not depend on
//! how efficient the implementation was, and works for any trace, whichever profiler made it.
//! The formulas are those of `docs/metrics.md`; every choice below is also returned as a sentence
//! by [`Model::conventions`] so a report can print what it assumed.
//!
//! # FLOPs
//! - 2 FLOPs per multiply-add, matrix products only (linear layers, attention scores and
//!   weighted sums, convolutions). Norms, activations, softmax, RoPE, residual adds and bias adds
//!   are not counted: this is what `torch.utils.flop_counter.FlopCounterMode` counts, which makes
//!   it the cross-check.
//! - Attention projections per token per layer: 4·h·H·d (Q, O) + 4·h·H_kv·d (K, V).
//!   Attention core per query token per key: 4·H·d. A decode step of one sequence attends
//!   `context` keys (the new token included). Prefill counts causal attention exactly,
//!   4·H·d·s(s+1)/2 per sequence per layer; tools that count the full s² (FlopCounterMode does,
//!   since SDPA's FLOP formula ignores the mask) report up to twice this term.
//! - SwiGLU MLP 6·h·I; GPT-2's two-matrix GELU MLP 4·h·I. MoE layer per token: router 2·h·E,
//!   k routed experts 6·h·I_e each, shared experts 6·h·I_e each (Qwen2-MoE: one shared expert of
//!   `shared_expert_intermediate_size` plus its sigmoid gate, 2·h).
//! - lm_head 2·h·V per token whose logits are computed: once per decode step; in prefill for
//!   `logits_tokens` tokens (HF `generate` computes only the last prompt token's, 1; a plain
//!   forward computes all). lm_head is counted when tied to the input embedding too: the matmul
//!   still runs.
//! - MLA (DeepSeek-V2/V3) is counted in the naive non-absorbed form: Q through q_a/q_b (or
//!   q_proj), the latent through kv_a_proj_with_mqa, K_nope and V through kv_b_proj once per
//!   token, attention with (qk_nope + qk_rope)-wide scores and v_head-wide values per head, o_proj.
//!   transformers ≥ 5 caches the compressed latent and re-expands every cached latent through
//!   kv_b_proj on each forward; that recompute is not model work and is left out of the model
//!   FLOPs, but [`Model::mla_decode_recompute_flops`] gives it for a hardware-FLOPs comparison.
//!   A `deepseek_*` config without `kv_lora_rank` (DeepSeek-OCR's decoder) is plain MHA/GQA.
//!
//! # Parameters
//! Counted as `numel()` would (matrices, biases, norm weights), excluding the input embedding
//! table (a gather, not a matmul) and learned position tables, including lm_head (once, whether
//! or not it is tied). Active parameters count k routed experts per MoE layer.
//! [`Model::embedding_params`] gives what was left out, for totals as model cards print them.
//!
//! # Bytes
//! Per decode step for a batch: every weight read once (MoE layers: the expected number of
//! distinct routed experts hit by the batch's tokens under uniform routing,
//! E·(1 − (1 − k/E)^tokens)), plus each sequence's KV cache read for its `context − 1` earlier
//! keys and written for the new token. kv_bytes_per_token = 2·L·H_kv·d·dtype_bytes (MLA: the
//! cached latent, L·(kv_lora_rank + qk_rope_head_dim)·dtype_bytes). Activations and the gathered
//! input-embedding rows (tokens·h elements, negligible beside the weights) are not counted, so
//! prefill bytes (weights once + KV written) are a lower bound.
//!
//! # dtype
//! Weights and KV cache use `dtype` / `torch_dtype` (bfloat16/float16: 2 bytes, float32: 4,
//! float8: 1); 2 bytes (bf16) when the config names none. A `quantization_config` with
//! `quant_method: "fp8"` makes weights 1 byte and the compute dtype fp8; other quantisation
//! methods are not modelled (reported).
//!
//! # Robustness
//! Every number read from the JSON is checked (a non-negative integer no larger than 2^24); all
//! arithmetic is in `f64`; nothing here can panic on any input.

mod config;
mod decoder;
#[cfg(test)]
mod tests;
mod vision;

use serde_json::Value;

use config::Section;
use decoder::{Decoder, Family};
use vision::Ocr2Vision;

/// Why a config could not be turned into a [`Model`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// e.g. "FLOPs unknown for model_type bert; give counted FLOPs"
    #[error("FLOPs unknown for model_type {0}; give counted FLOPs")]
    UnknownModelType(String),
    #[error("config.json has no model_type; give counted FLOPs")]
    NoModelType,
    #[error("config.json lacks `{field}` needed for model_type {model_type}")]
    MissingField { model_type: String, field: String },
    /// A field is present but unusable: wrong type, negative, too large, inconsistent.
    #[error("config.json field `{field}` is unusable for model_type {model_type}: {reason}")]
    InvalidField {
        model_type: String,
        field: String,
        reason: String,
    },
}

/// Element type of weights / KV cache, and the peak-table column it computes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dtype {
    Bf16,
    Fp16,
    Fp32,
    Fp8,
}

impl Dtype {
    /// A torch dtype name as configs write it (`bfloat16`, `torch.float16`, `float8_e4m3fn`...).
    fn parse(name: &str) -> Option<Dtype> {
        let name = name.trim();
        let name = name.strip_prefix("torch.").unwrap_or(name);
        Some(match name.to_ascii_lowercase().as_str() {
            "bfloat16" | "bf16" => Dtype::Bf16,
            "float16" | "fp16" | "half" => Dtype::Fp16,
            "float32" | "fp32" | "float" => Dtype::Fp32,
            "float8_e4m3fn" | "float8_e4m3fnuz" | "float8_e5m2" | "float8_e5m2fnuz" | "fp8" => {
                Dtype::Fp8
            }
            _ => return None,
        })
    }

    fn bytes(self) -> f64 {
        match self {
            Dtype::Bf16 | Dtype::Fp16 => 2.0,
            Dtype::Fp32 => 4.0,
            Dtype::Fp8 => 1.0,
        }
    }

    fn column(self) -> &'static str {
        match self {
            Dtype::Bf16 => "bf16",
            Dtype::Fp16 => "fp16",
            Dtype::Fp32 => "fp32",
            Dtype::Fp8 => "fp8",
        }
    }
}

/// A decoder LM (and optional vision tower) shape read from config.json.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    model_type: String,
    lm_model_type: String,
    dtype: Dtype,
    /// Where `dtype` came from, for conventions().
    dtype_note: String,
    /// Weights stored as fp8 (`quantization_config.quant_method == "fp8"`).
    fp8_weights: bool,
    lm: Decoder,
    vision: Option<Ocr2Vision>,
    /// Config-specific sentences (nesting, ignored features, defaults used).
    notes: Vec<String>,
}

/// Keys under which multimodal configs nest their language model.
const NESTED_LM_KEYS: [&str; 3] = ["text_config", "language_config", "llm_config"];

impl Model {
    /// Reads the model shape from a parsed `config.json`.
    pub fn from_config(config: &Value) -> Result<Model, ModelError> {
        let obj = config.as_object().ok_or(ModelError::NoModelType)?;
        let model_type = match obj.get("model_type") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.as_str(),
            _ => return Err(ModelError::NoModelType),
        };
        let top = Section::new(obj, "", model_type);
        let mut notes = Vec::new();

        let (lm_sec, lm_model_type, lm, vision) = if model_type == "deepseek_ocr2" {
            let text = top
                .sub("text_config", model_type)?
                .ok_or_else(|| top.missing("text_config"))?;
            let lm = decoder::parse(&text, Family::DeepSeek, "deepseek_ocr2_text")?;
            let vision_sec = top.sub("vision_config", model_type)?;
            let vision = vision::parse(vision_sec.as_ref(), lm.hidden)?;
            (text, "deepseek_ocr2_text".to_owned(), lm, Some(vision))
        } else if let Some(family) = Family::of(model_type) {
            let lm = decoder::parse(&top, family, model_type)?;
            (top.clone(), model_type.to_owned(), lm, None)
        } else {
            // A multimodal wrapper whose language model is a known family.
            let nested = NESTED_LM_KEYS.iter().find_map(|key| {
                let inner = obj.get(*key)?.as_object()?;
                let inner_type = inner.get("model_type")?.as_str()?;
                let family = Family::of(inner_type)?;
                Some((*key, inner, inner_type, family))
            });
            let Some((key, inner, inner_type, family)) = nested else {
                return Err(ModelError::UnknownModelType(model_type.to_owned()));
            };
            let sec = Section::new(inner, &format!("{key}."), inner_type);
            let lm = decoder::parse(&sec, family, inner_type)?;
            notes.push(format!(
                "The language model is read from `{key}` (model_type {inner_type}); the rest of \
                 {model_type} (vision tower, projector) is not counted."
            ));
            (sec, inner_type.to_owned(), lm, None)
        };

        let (dtype, dtype_note) = read_dtype(&top, &lm_sec);
        let fp8_weights = read_quantization(&top, &lm_sec, &mut notes);
        if let Some(w) = lm.sliding_window {
            notes.push(format!(
                "The config enables sliding-window attention (window {w}); it is not modelled: \
                 attention is counted over all keys and the KV cache as unbounded, exact while \
                 the context is at most {w} tokens."
            ));
        }
        Ok(Model {
            model_type: model_type.to_owned(),
            lm_model_type,
            dtype,
            dtype_note,
            fp8_weights,
            lm,
            vision,
            notes,
        })
    }

    /// The same model computing and storing in another dtype (`bfloat16`, `float16`, `float32`,
    /// `float8_e4m3fn`...), for a workload that loads the weights with an explicit dtype.
    pub fn with_dtype(mut self, dtype: &str) -> Result<Model, ModelError> {
        let parsed = Dtype::parse(dtype).ok_or_else(|| ModelError::InvalidField {
            model_type: self.model_type.clone(),
            field: "dtype".to_owned(),
            reason: format!("{dtype:?} is not a known torch dtype"),
        })?;
        self.dtype = parsed;
        self.dtype_note = format!("dtype {dtype} given by the caller");
        self.fp8_weights = parsed == Dtype::Fp8;
        Ok(self)
    }

    /// The config's top-level `model_type`.
    pub fn model_type(&self) -> &str {
        &self.model_type
    }

    /// The `model_type` the language model was read as (differs for nested configs, e.g.
    /// `deepseek_ocr2_text` inside `deepseek_ocr2`).
    pub fn lm_model_type(&self) -> &str {
        &self.lm_model_type
    }

    pub fn num_layers(&self) -> u64 {
        self.lm.layers
    }

    pub fn hidden_size(&self) -> u64 {
        self.lm.hidden
    }

    pub fn vocab_size(&self) -> u64 {
        self.lm.vocab
    }

    /// True when some decoder layer is a mixture of experts.
    pub fn is_moe(&self) -> bool {
        self.lm.moe_layers > 0 && self.lm.moe.is_some()
    }

    /// Bytes per element of weights and KV cache from `torch_dtype`/`dtype` (bfloat16/float16 -> 2,
    /// float32 -> 4, float8 -> 1, default 2 when absent).
    pub fn dtype_bytes(&self) -> f64 {
        self.dtype.bytes()
    }

    /// Bytes per weight element: [`Self::dtype_bytes`], or 1 for fp8-quantised weights.
    pub fn weight_bytes_per_param(&self) -> f64 {
        if self.fp8_weights {
            1.0
        } else {
            self.dtype.bytes()
        }
    }

    /// "bf16" | "fp16" | "fp32" | "fp8" — the peak-table column this dtype uses.
    pub fn compute_dtype(&self) -> &'static str {
        if self.fp8_weights {
            Dtype::Fp8.column()
        } else {
            self.dtype.column()
        }
    }

    /// Parameters: (total, active per token), excluding the input embedding table, including
    /// lm_head. Language model only; see [`Self::vision_params`].
    pub fn params(&self) -> (f64, f64) {
        self.lm.params()
    }

    /// Parameters left out of [`Self::params`]: the input token embedding when it is not tied to
    /// lm_head, and learned position tables (GPT-2 `wpe`).
    pub fn embedding_params(&self) -> f64 {
        self.lm.embedding_params()
    }

    /// Parameters of the vision tower, projector and view separator (deepseek_ocr2), as
    /// `numel()` counts them. None for text-only models.
    pub fn vision_params(&self) -> Option<f64> {
        self.vision.as_ref().map(Ocr2Vision::params)
    }

    /// FLOPs of one decode step for ONE sequence: one new token attending `context` keys (context
    /// includes the new token), lm_head for that token.
    pub fn decode_step_flops(&self, context: u64) -> f64 {
        sum(&self.decode_step_flops_breakdown(context))
    }

    /// [`Self::decode_step_flops`] split into "attn_proj", "attn_core", "ffn" (MLP or MoE, router
    /// included) and "lm_head".
    pub fn decode_step_flops_breakdown(&self, context: u64) -> Vec<(&'static str, f64)> {
        let l = self.lm.layers as f64;
        vec![
            ("attn_proj", l * self.lm.attn_proj_flops()),
            (
                "attn_core",
                l * self.lm.attn_core_per_key() * context as f64,
            ),
            ("ffn", self.lm.ffn_flops()),
            ("lm_head", self.lm.lm_head_flops()),
        ]
    }

    /// FLOPs of prefilling ONE sequence of `tokens` tokens, exact causal attention
    /// (4·H·d·s(s+1)/2 per layer), lm_head for `logits_tokens` tokens (1 for HF generate, `tokens`
    /// for a plain forward; capped at `tokens`).
    pub fn prefill_flops(&self, tokens: u64, logits_tokens: u64) -> f64 {
        sum(&self.prefill_flops_breakdown(tokens, logits_tokens))
    }

    /// [`Self::prefill_flops`] split as [`Self::decode_step_flops_breakdown`] is.
    pub fn prefill_flops_breakdown(
        &self,
        tokens: u64,
        logits_tokens: u64,
    ) -> Vec<(&'static str, f64)> {
        let l = self.lm.layers as f64;
        let s = tokens as f64;
        let pairs = s * (s + 1.0) / 2.0;
        vec![
            ("attn_proj", s * l * self.lm.attn_proj_flops()),
            ("attn_core", l * self.lm.attn_core_per_key() * pairs),
            ("ffn", s * self.lm.ffn_flops()),
            (
                "lm_head",
                logits_tokens.min(tokens) as f64 * self.lm.lm_head_flops(),
            ),
        ]
    }

    /// MLA only: FLOPs transformers ≥ 5 adds to one decode step of one sequence by re-expanding
    /// the `context − 1` earlier cached latents through kv_b_proj (recompute, not in
    /// [`Self::decode_step_flops`]). None for non-MLA models.
    pub fn mla_decode_recompute_flops(&self, context: u64) -> Option<f64> {
        let per_key = self.lm.mla_reexpand_per_key()?;
        Some(self.lm.layers as f64 * per_key * context.saturating_sub(1) as f64)
    }

    /// Bytes moved by one decode step for a batch of `batch` sequences each with `context` keys:
    /// weights read once (MoE: expected distinct experts for `batch` tokens) + KV read
    /// (batch·(context−1)·kv_bytes_per_token) + KV write (batch·kv_bytes_per_token). The input
    /// embedding contributes only its gathered rows, which are negligible and not counted.
    pub fn decode_step_bytes(&self, batch: u64, context: u64) -> f64 {
        if batch == 0 {
            return 0.0;
        }
        let b = batch as f64;
        let weights = self.lm.params_read(b) * self.weight_bytes_per_param();
        let kv = self.kv_bytes_per_token();
        weights + b * context.saturating_sub(1) as f64 * kv + b * kv
    }

    /// Bytes of a prefill of `batch` sequences of `tokens`: weights once (MoE: expected distinct
    /// experts for batch·tokens tokens) + KV write batch·tokens·kv_bytes_per_token. Activations
    /// are not counted (a lower bound).
    pub fn prefill_bytes(&self, batch: u64, tokens: u64) -> f64 {
        let n = batch as f64 * tokens as f64;
        if n == 0.0 {
            return 0.0;
        }
        self.lm.params_read(n) * self.weight_bytes_per_param() + n * self.kv_bytes_per_token()
    }

    /// KV-cache bytes per token of one sequence: 2·L·H_kv·d·dtype_bytes (MLA: the compressed
    /// latent, L·(kv_lora_rank + qk_rope_head_dim)·dtype_bytes).
    pub fn kv_bytes_per_token(&self) -> f64 {
        self.lm.layers as f64 * self.lm.kv_elems_per_layer() * self.dtype.bytes()
    }

    /// Expected distinct routed experts per MoE layer for `tokens` tokens under uniform routing,
    /// E·(1 − (1 − k/E)^tokens). None for dense models.
    pub fn expected_experts_per_layer(&self, tokens: u64) -> Option<f64> {
        let moe = self.lm.moe.as_ref().filter(|_| self.lm.moe_layers > 0)?;
        Some(moe.expected_experts(tokens as f64))
    }

    /// Vision-side FLOPs for one image when the model has a vision tower (deepseek_ocr2), per
    /// sub-stage: keys "sam", "vision_encoder", "projector". None for text-only models.
    pub fn vision_flops(&self) -> Option<Vec<(&'static str, f64)>> {
        self.vision.as_ref().map(Ocr2Vision::flops)
    }

    /// Image tokens one image contributes to the LM sequence, when known from the config
    /// (deepseek_ocr2: learned queries + 1 view separator, 257 for one 1024x1024 view).
    pub fn image_tokens_per_image(&self) -> Option<u64> {
        self.vision.as_ref().map(Ocr2Vision::image_tokens)
    }

    /// The conventions used, as sentences a report prints.
    pub fn conventions(&self) -> Vec<String> {
        let lm = &self.lm;
        let mut out = vec![
            "FLOPs count 2 per multiply-add of matrix products (linear layers, attention scores \
             and weighted sums, convolutions); norms, activations, softmax, RoPE and bias or \
             residual adds are not counted, as in torch's FlopCounterMode."
                .to_owned(),
            format!(
                "Attention costs {} FLOPs per query token per key per layer. A decode step of one \
                 sequence attends `context` keys, the new token included. Prefill counts causal \
                 attention exactly, s(s+1)/2 query-key pairs per sequence; tools counting the full \
                 s² (such as FlopCounterMode) report up to twice that term.",
                match lm.attn {
                    decoder::Attention::Gqa { .. } => "4·H·d",
                    decoder::Attention::Mla { .. } => "2·H·(qk_nope + qk_rope + v_head)",
                }
            ),
            "lm_head costs 2·h·V FLOPs per token whose logits are computed: one per decode step; \
             in prefill the last prompt token only under HF generate (logits_to_keep=1), every \
             token in a plain forward. It is counted when tied to the input embedding as well."
                .to_owned(),
            "Parameters are counted as numel() does (matrices, biases, norms), without the input \
             embedding table and position tables and with lm_head once; active parameters count \
             the experts each token is routed to."
                .to_owned(),
            "Decode bytes per step: all weights read once (MoE layers: the expected number of \
             distinct routed experts for the batch's tokens, E·(1 − (1 − k/E)^tokens), uniform \
             routing) plus each sequence's KV cache read for its context − 1 earlier keys and \
             written for the new token. Prefill bytes: weights once plus the KV cache written. \
             Activations and the gathered input-embedding rows (negligible) are not counted, so \
             these are lower bounds."
                .to_owned(),
        ];
        if self.fp8_weights {
            out.push(format!(
                "Weights are fp8 (1 byte per parameter) and FLOPs are judged against the fp8 peak; \
                 the KV cache is {} ({} bytes per element; {}).",
                self.dtype.column(),
                self.dtype.bytes(),
                self.dtype_note
            ));
        } else {
            out.push(format!(
                "Weights and KV cache are {} ({} bytes per element; {}).",
                self.dtype.column(),
                self.dtype.bytes(),
                self.dtype_note
            ));
        }
        out.push(format!(
            "KV cache: {} bytes per token per sequence ({}).",
            self.kv_bytes_per_token(),
            match lm.attn {
                decoder::Attention::Gqa { .. } => "2·L·H_kv·d·dtype_bytes",
                decoder::Attention::Mla { .. } => "L·(kv_lora_rank + qk_rope_head_dim)·dtype_bytes",
            }
        ));
        if let Some(moe) = lm.moe.as_ref().filter(|_| lm.moe_layers > 0) {
            let shared = match (moe.shared, moe.shared_gate) {
                (Some(f), true) => format!(
                    "a shared expert of intermediate size {} with a sigmoid gate (2·h)",
                    f.inter
                ),
                (Some(f), false) => {
                    format!("shared experts of total intermediate size {}", f.inter)
                }
                (None, _) => "no shared expert".to_owned(),
            };
            let rest = if lm.moe_layers < lm.layers {
                "; the other layers are dense"
            } else {
                ""
            };
            out.push(format!(
                "{} of {} layers are MoE: router 2·h·E (E = {}), {} routed experts of 6·h·{} \
                 FLOPs per token, {}{rest}.",
                lm.moe_layers, lm.layers, moe.experts, moe.top_k, moe.expert_inter, shared
            ));
        }
        match lm.attn {
            decoder::Attention::Mla {
                kv_lora_rank,
                qk_rope,
                ..
            } => out.push(format!(
                "MLA is counted in the naive non-absorbed form: K and V up-projected through \
                 kv_b_proj once per token, attention over qk_nope+qk_rope-wide keys and \
                 v_head-wide values per head. The KV cache is the compressed latent \
                 ({kv_lora_rank} + {qk_rope} elements per layer per token), as transformers ≥ 5 \
                 stores it; its re-expansion of every cached latent on each step is recompute \
                 and is not in the model FLOPs."
            )),
            decoder::Attention::Gqa {
                heads, kv_heads, ..
            } if lm.family == Family::DeepSeek => out.push(format!(
                "The decoder has no kv_lora_rank: plain attention with {heads} query and \
                 {kv_heads} KV heads, d = hidden/heads."
            )),
            decoder::Attention::Gqa { .. } => {}
        }
        if let Some(v) = &self.vision {
            out.extend(v.conventions());
            out.push(
                "params() and the bytes are the language model's; the vision weights \
                 (vision_params()) are read once per image, during prefill."
                    .to_owned(),
            );
        }
        out.extend(self.notes.iter().cloned());
        out
    }
}

fn sum(parts: &[(&'static str, f64)]) -> f64 {
    parts.iter().map(|(_, v)| v).sum()
}

/// `dtype` (transformers ≥ 4.56) or `torch_dtype`, top level first, then the LM section.
fn read_dtype(top: &Section<'_>, lm: &Section<'_>) -> (Dtype, String) {
    for sec in [top, lm] {
        for key in ["dtype", "torch_dtype"] {
            match sec.raw(key) {
                Some(Value::String(name)) => match Dtype::parse(name) {
                    Some(d) => return (d, format!("from `{}`", sec.path(key))),
                    None => {
                        return (
                            Dtype::Bf16,
                            format!(
                                "`{}` is {name:?}, not a known dtype: bf16 assumed",
                                sec.path(key)
                            ),
                        )
                    }
                },
                Some(_) => {
                    return (
                        Dtype::Bf16,
                        format!("`{}` is not a string: bf16 assumed", sec.path(key)),
                    )
                }
                None => {}
            }
        }
    }
    (
        Dtype::Bf16,
        "the config names no dtype: bf16 assumed".to_owned(),
    )
}

/// True for fp8 weight quantisation; other methods are noted as not modelled.
fn read_quantization(top: &Section<'_>, lm: &Section<'_>, notes: &mut Vec<String>) -> bool {
    for sec in [top, lm] {
        let Some(q) = sec.raw("quantization_config") else {
            continue;
        };
        let method = q
            .get("quant_method")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        if method.eq_ignore_ascii_case("fp8") {
            return true;
        }
        notes.push(format!(
            "quantization_config ({method}) is not modelled: weights are counted at the config dtype."
        ));
        return false;
    }
    false
}
