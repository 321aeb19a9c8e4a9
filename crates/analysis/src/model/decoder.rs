//! The decoder-only LM shape read from `config.json`, per model family, and its per-token
//! FLOPs / parameter counts. All arithmetic is in `f64` (dimensions are bounded by
//! [`super::config::MAX_DIM`], so every product stays finite).

use std::collections::BTreeSet;

use super::config::Section;
use super::ModelError;

/// How a `model_type` is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Family {
    /// llama, mistral, qwen2, qwen3: GQA attention + SwiGLU MLP.
    Dense,
    /// qwen2_moe (one gated shared expert) and qwen3_moe (none).
    QwenMoe,
    /// mixtral: every layer MoE, `num_local_experts`, expert FFN = `intermediate_size`.
    Mixtral,
    /// deepseek_v2 / deepseek_v3 / deepseek_ocr2_text: MLA or MHA, DeepSeekMoE.
    DeepSeek,
    /// gpt2: MHA with fused qkv, GELU MLP, LayerNorm, learned positions, tied lm_head.
    Gpt2,
}

impl Family {
    pub(super) fn of(model_type: &str) -> Option<Family> {
        Some(match model_type {
            "llama" | "mistral" | "qwen2" | "qwen3" => Family::Dense,
            "qwen2_moe" | "qwen3_moe" => Family::QwenMoe,
            "mixtral" => Family::Mixtral,
            "deepseek_v2" | "deepseek_v3" | "deepseek_ocr2_text" => Family::DeepSeek,
            "gpt2" => Family::Gpt2,
            _ => return None,
        })
    }
}

/// Attention projections' shape.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Attention {
    /// MHA / GQA / MQA: Q and O are `h x H*d`, K and V `h x H_kv*d`.
    Gqa {
        heads: u64,
        kv_heads: u64,
        head_dim: u64,
    },
    /// DeepSeek multi-head latent attention, counted naive (non-absorbed).
    Mla {
        heads: u64,
        q_lora_rank: Option<u64>,
        kv_lora_rank: u64,
        qk_nope: u64,
        qk_rope: u64,
        v_head: u64,
    },
}

/// A feed-forward block: gated (SwiGLU: gate, up, down) or plain (GELU: fc, proj).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Ffn {
    pub(super) inter: u64,
    pub(super) gated: bool,
    pub(super) bias: bool,
}

impl Ffn {
    fn matrices(&self) -> f64 {
        if self.gated {
            3.0
        } else {
            2.0
        }
    }

    /// FLOPs per token: 2 per multiply-add over `matrices` h x I matrices (6·h·I for SwiGLU,
    /// 4·h·I for a two-matrix GELU MLP).
    pub(super) fn flops(&self, hidden: f64) -> f64 {
        2.0 * self.matrices() * hidden * self.inter as f64
    }

    pub(super) fn params(&self, hidden: f64) -> f64 {
        let inter = self.inter as f64;
        let bias = if !self.bias {
            0.0
        } else if self.gated {
            2.0 * inter + hidden
        } else {
            inter + hidden
        };
        self.matrices() * hidden * inter + bias
    }
}

/// A mixture-of-experts FFN layer.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Moe {
    /// Routed experts E.
    pub(super) experts: u64,
    /// Experts per token k.
    pub(super) top_k: u64,
    /// Routed expert FFN size I_e (SwiGLU).
    pub(super) expert_inter: u64,
    /// Shared (always-on) experts, as one FFN of their summed size.
    pub(super) shared: Option<Ffn>,
    /// Qwen2-MoE's sigmoid gate on the shared expert (`Linear(h, 1)`).
    pub(super) shared_gate: bool,
}

impl Moe {
    fn expert_params(&self, hidden: f64) -> f64 {
        3.0 * hidden * self.expert_inter as f64
    }

    /// Parameters every token uses: router, shared experts, shared gate.
    fn always_params(&self, hidden: f64) -> f64 {
        let router = self.experts as f64 * hidden;
        let shared = self.shared.map_or(0.0, |f| f.params(hidden));
        let gate = if self.shared_gate { hidden } else { 0.0 };
        router + shared + gate
    }

    /// FLOPs per token: router 2·h·E + k·6·h·I_e + shared FFN (+ 2·h for a shared gate).
    fn flops(&self, hidden: f64) -> f64 {
        let router = 2.0 * hidden * self.experts as f64;
        let routed = self.top_k as f64 * 6.0 * hidden * self.expert_inter as f64;
        let shared = self.shared.map_or(0.0, |f| f.flops(hidden));
        let gate = if self.shared_gate { 2.0 * hidden } else { 0.0 };
        router + routed + shared + gate
    }

    /// Expected distinct experts hit per layer by `tokens` tokens under uniform routing:
    /// E·(1 − (1 − k/E)^tokens).
    pub(super) fn expected_experts(&self, tokens: f64) -> f64 {
        let e = self.experts as f64;
        if e == 0.0 || tokens <= 0.0 {
            return 0.0;
        }
        let miss = (1.0 - self.top_k as f64 / e).clamp(0.0, 1.0);
        e * (1.0 - miss.powf(tokens))
    }
}

/// The decoder LM: enough shape to count FLOPs, parameters and bytes.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Decoder {
    pub(super) family: Family,
    pub(super) hidden: u64,
    pub(super) layers: u64,
    pub(super) vocab: u64,
    pub(super) attn: Attention,
    /// Attention parameters besides the projection matrices, per layer (biases, q/k norms,
    /// MLA latent norms).
    pub(super) attn_extra_params: u64,
    /// Per-layer norm parameters (2·h for two RMSNorms, 4·h for two LayerNorms).
    pub(super) layer_norm_params: u64,
    pub(super) final_norm_params: u64,
    /// Layers with a dense FFN, and that FFN.
    pub(super) dense_layers: u64,
    pub(super) dense_ffn: Option<Ffn>,
    /// Layers with an MoE FFN, and that MoE.
    pub(super) moe_layers: u64,
    pub(super) moe: Option<Moe>,
    /// lm_head shares the input embedding table.
    pub(super) tied: bool,
    /// Learned absolute position table (GPT-2 `wpe`), elements.
    pub(super) position_table: u64,
    /// `sliding_window` when the config turns it on (not modelled; reported).
    pub(super) sliding_window: Option<u64>,
}

impl Decoder {
    fn h(&self) -> f64 {
        self.hidden as f64
    }

    /// Projection FLOPs per token per layer.
    pub(super) fn attn_proj_flops(&self) -> f64 {
        2.0 * self.attn_proj_matrix_params()
    }

    fn attn_proj_matrix_params(&self) -> f64 {
        let h = self.h();
        match self.attn {
            Attention::Gqa {
                heads,
                kv_heads,
                head_dim,
            } => {
                let q = heads as f64 * head_dim as f64;
                let kv = kv_heads as f64 * head_dim as f64;
                // Q and O: h·H·d each; K and V: h·H_kv·d each.
                2.0 * h * q + 2.0 * h * kv
            }
            Attention::Mla {
                heads,
                q_lora_rank,
                kv_lora_rank,
                qk_nope,
                qk_rope,
                v_head,
            } => {
                let heads = heads as f64;
                let qk = (qk_nope + qk_rope) as f64;
                let q = match q_lora_rank {
                    None => h * heads * qk,
                    Some(r) => h * r as f64 + r as f64 * heads * qk,
                };
                let r_kv = kv_lora_rank as f64;
                let kv_a = h * (r_kv + qk_rope as f64);
                let kv_b = r_kv * heads * (qk_nope + v_head) as f64;
                let o = heads * v_head as f64 * h;
                q + kv_a + kv_b + o
            }
        }
    }

    /// Attention-core FLOPs per query token per key per layer: QK^T plus AV.
    /// GQA: 4·H·d. MLA (naive): 2·H·(qk_nope+qk_rope) + 2·H·v_head.
    pub(super) fn attn_core_per_key(&self) -> f64 {
        match self.attn {
            Attention::Gqa {
                heads, head_dim, ..
            } => 4.0 * heads as f64 * head_dim as f64,
            Attention::Mla {
                heads,
                qk_nope,
                qk_rope,
                v_head,
                ..
            } => 2.0 * heads as f64 * (qk_nope + qk_rope + v_head) as f64,
        }
    }

    /// KV-cache elements per token per layer: 2·H_kv·d (GQA); kv_lora_rank + qk_rope_head_dim
    /// for MLA (the compressed latent transformers ≥ 5 caches).
    pub(super) fn kv_elems_per_layer(&self) -> f64 {
        match self.attn {
            Attention::Gqa {
                kv_heads, head_dim, ..
            } => 2.0 * kv_heads as f64 * head_dim as f64,
            Attention::Mla {
                kv_lora_rank,
                qk_rope,
                ..
            } => (kv_lora_rank + qk_rope) as f64,
        }
    }

    /// FLOPs transformers ≥ 5 spends per cached key per layer re-expanding the MLA latent
    /// through kv_b_proj each forward (recompute, not in the model FLOPs). `None` without MLA.
    pub(super) fn mla_reexpand_per_key(&self) -> Option<f64> {
        match self.attn {
            Attention::Mla {
                heads,
                kv_lora_rank,
                qk_nope,
                v_head,
                ..
            } => Some(2.0 * kv_lora_rank as f64 * heads as f64 * (qk_nope + v_head) as f64),
            Attention::Gqa { .. } => None,
        }
    }

    /// FFN FLOPs per token summed over layers (dense and MoE, routers included).
    pub(super) fn ffn_flops(&self) -> f64 {
        let h = self.h();
        let dense = self.dense_ffn.map_or(0.0, |f| f.flops(h)) * self.dense_layers as f64;
        let moe = self.moe.as_ref().map_or(0.0, |m| m.flops(h)) * self.moe_layers as f64;
        dense + moe
    }

    /// lm_head FLOPs per token whose logits are computed: 2·h·V.
    pub(super) fn lm_head_flops(&self) -> f64 {
        2.0 * self.h() * self.vocab as f64
    }

    fn lm_head_params(&self) -> f64 {
        self.h() * self.vocab as f64
    }

    fn attn_layer_params(&self) -> f64 {
        self.attn_proj_matrix_params() + self.attn_extra_params as f64
    }

    /// Parameters that every token touches, excluding routed experts and the input embedding.
    fn shared_params(&self) -> f64 {
        let h = self.h();
        let l = self.layers as f64;
        let attn = l * (self.attn_layer_params() + self.layer_norm_params as f64);
        let dense = self.dense_ffn.map_or(0.0, |f| f.params(h)) * self.dense_layers as f64;
        let moe_always =
            self.moe.as_ref().map_or(0.0, |m| m.always_params(h)) * self.moe_layers as f64;
        attn + dense + moe_always + self.final_norm_params as f64 + self.lm_head_params()
    }

    fn routed_expert_params(&self) -> f64 {
        self.moe.as_ref().map_or(0.0, |m| m.expert_params(self.h()))
    }

    /// (total, active per token), excluding the input embedding, including lm_head.
    pub(super) fn params(&self) -> (f64, f64) {
        let shared = self.shared_params();
        let per_expert = self.routed_expert_params();
        let moe_l = self.moe_layers as f64;
        let (e, k) = self
            .moe
            .as_ref()
            .map_or((0.0, 0.0), |m| (m.experts as f64, m.top_k as f64));
        (
            shared + moe_l * e * per_expert,
            shared + moe_l * k * per_expert,
        )
    }

    /// Parameters read by a forward over `tokens` tokens: everything but routed experts, plus
    /// the expected distinct routed experts per MoE layer.
    pub(super) fn params_read(&self, tokens: f64) -> f64 {
        let expected = self
            .moe
            .as_ref()
            .map_or(0.0, |m| m.expected_experts(tokens));
        self.shared_params() + self.moe_layers as f64 * expected * self.routed_expert_params()
    }

    /// Input-embedding tables not counted in `params()`: the token table when untied, and a
    /// learned position table.
    pub(super) fn embedding_params(&self) -> f64 {
        let tokens = if self.tied {
            0.0
        } else {
            self.lm_head_params()
        };
        tokens + self.position_table as f64
    }
}

/// Reads the decoder of `family` from `sec`; `model_type` is the type this section declares.
pub(super) fn parse(
    sec: &Section<'_>,
    family: Family,
    model_type: &str,
) -> Result<Decoder, ModelError> {
    match family {
        Family::Dense | Family::QwenMoe | Family::Mixtral => {
            parse_gqa_family(sec, family, model_type)
        }
        Family::DeepSeek => parse_deepseek(sec, model_type),
        Family::Gpt2 => parse_gpt2(sec),
    }
}

/// `head_dim` when present (qwen3, mistral-style configs), else hidden / heads.
fn head_dim_or_split(sec: &Section<'_>, hidden: u64, heads: u64) -> Result<u64, ModelError> {
    match sec.opt_pos("head_dim")? {
        Some(d) => Ok(d),
        None => split_heads(sec, hidden, heads),
    }
}

fn split_heads(sec: &Section<'_>, hidden: u64, heads: u64) -> Result<u64, ModelError> {
    let d = hidden / heads.max(1);
    if d == 0 {
        Err(sec.invalid(
            "num_attention_heads",
            format!("{heads} heads do not fit in hidden_size {hidden}"),
        ))
    } else {
        Ok(d)
    }
}

fn kv_heads(sec: &Section<'_>, heads: u64) -> Result<u64, ModelError> {
    let kv = sec.pos_or("num_key_value_heads", heads)?;
    if kv > heads || heads % kv != 0 {
        return Err(sec.invalid(
            "num_key_value_heads",
            format!("{kv} does not divide num_attention_heads {heads}"),
        ));
    }
    Ok(kv)
}

fn check_top_k(sec: &Section<'_>, key: &str, top_k: u64, experts: u64) -> Result<(), ModelError> {
    if top_k > experts {
        Err(sec.invalid(
            key,
            format!("{top_k} experts per token exceeds {experts} experts"),
        ))
    } else {
        Ok(())
    }
}

/// Dense GQA (llama, mistral, qwen2, qwen3), Qwen MoE and Mixtral: they share attention.
fn parse_gqa_family(
    sec: &Section<'_>,
    family: Family,
    model_type: &str,
) -> Result<Decoder, ModelError> {
    let hidden = sec.req_pos("hidden_size")?;
    let layers = sec.req_pos("num_hidden_layers")?;
    let heads = sec.req_pos("num_attention_heads")?;
    let kv_heads = kv_heads(sec, heads)?;
    let head_dim = head_dim_or_split(sec, hidden, heads)?;
    let vocab = sec.req_pos("vocab_size")?;
    let tied = sec.bool_or("tie_word_embeddings", false)?;
    let attn_extra = gqa_attn_extra(
        sec,
        model_type,
        hidden,
        heads * head_dim,
        kv_heads * head_dim,
        head_dim,
    )?;
    let mlp_bias = model_type == "llama" && sec.bool_or("mlp_bias", false)?;

    let ffn = match family {
        Family::Mixtral => mixtral_ffn(sec, layers)?,
        Family::QwenMoe => qwen_moe_ffn(sec, layers, model_type)?,
        _ => FfnLayers {
            dense_layers: layers,
            dense_ffn: dense_ffn_if(sec, layers, mlp_bias)?,
            moe_layers: 0,
            moe: None,
        },
    };

    Ok(Decoder {
        family,
        hidden,
        layers,
        vocab,
        attn: Attention::Gqa {
            heads,
            kv_heads,
            head_dim,
        },
        attn_extra_params: attn_extra,
        layer_norm_params: 2 * hidden,
        final_norm_params: hidden,
        dense_layers: ffn.dense_layers,
        dense_ffn: ffn.dense_ffn,
        moe_layers: ffn.moe_layers,
        moe: ffn.moe,
        tied,
        position_table: 0,
        sliding_window: sliding_window(sec, model_type)?,
    })
}

/// Attention parameters beyond the projection matrices of the GQA family: biases (parameters
/// only; bias adds are not FLOPs) and per-head q/k norms.
fn gqa_attn_extra(
    sec: &Section<'_>,
    model_type: &str,
    hidden: u64,
    q_width: u64,
    kv_width: u64,
    head_dim: u64,
) -> Result<u64, ModelError> {
    let mut attn_extra = match model_type {
        // Qwen2 always has q/k/v biases; Qwen2-MoE has them unless `qkv_bias` is false.
        "qwen2" => q_width + 2 * kv_width,
        "qwen2_moe" if sec.bool_or("qkv_bias", true)? => q_width + 2 * kv_width,
        "llama" | "qwen3" | "qwen3_moe" if sec.bool_or("attention_bias", false)? => {
            q_width + 2 * kv_width + hidden
        }
        _ => 0,
    };
    if matches!(model_type, "qwen3" | "qwen3_moe") {
        attn_extra += 2 * head_dim; // q_norm, k_norm over head_dim
    }
    Ok(attn_extra)
}

/// How a decoder's layers divide between a dense FFN and a mixture of experts.
struct FfnLayers {
    dense_layers: u64,
    dense_ffn: Option<Ffn>,
    moe_layers: u64,
    moe: Option<Moe>,
}

/// Mixtral: every layer is MoE, with `num_local_experts` experts of `intermediate_size`.
fn mixtral_ffn(sec: &Section<'_>, layers: u64) -> Result<FfnLayers, ModelError> {
    let experts = sec.req_pos("num_local_experts")?;
    let top_k = sec.req_pos("num_experts_per_tok")?;
    check_top_k(sec, "num_experts_per_tok", top_k, experts)?;
    let moe = Moe {
        experts,
        top_k,
        expert_inter: sec.req_pos("intermediate_size")?,
        shared: None,
        shared_gate: false,
    };
    Ok(FfnLayers {
        dense_layers: 0,
        dense_ffn: None,
        moe_layers: layers,
        moe: Some(moe),
    })
}

/// Qwen2-MoE / Qwen3-MoE: sparse layers by `decoder_sparse_step` and `mlp_only_layers`, the
/// others dense.
fn qwen_moe_ffn(sec: &Section<'_>, layers: u64, model_type: &str) -> Result<FfnLayers, ModelError> {
    let experts = sec.req_u64("num_experts")?;
    let sparse = qwen_sparse_layers(sec, layers, experts)?;
    let moe = if sparse > 0 {
        Some(qwen_moe(sec, experts, model_type)?)
    } else {
        None
    };
    let dense = layers - sparse;
    let dense_ffn = dense_ffn_if(sec, dense, false)?;
    Ok(FfnLayers {
        dense_layers: dense,
        dense_ffn,
        moe_layers: sparse,
        moe,
    })
}

/// Qwen MoE layers: transformers makes layer i sparse iff i is not in `mlp_only_layers`,
/// `num_experts` > 0 and (i + 1) % `decoder_sparse_step` == 0.
fn qwen_sparse_layers(sec: &Section<'_>, layers: u64, experts: u64) -> Result<u64, ModelError> {
    let step = sec.pos_or("decoder_sparse_step", 1)?;
    let mlp_only: BTreeSet<u64> = sec
        .opt_u64_list("mlp_only_layers")?
        .unwrap_or_default()
        .into_iter()
        .collect();
    Ok(if experts == 0 {
        0
    } else {
        let stepped = layers / step;
        let excluded = mlp_only
            .iter()
            .filter(|&&i| i < layers && (i + 1) % step == 0)
            .count() as u64;
        stepped.saturating_sub(excluded)
    })
}

/// A Qwen MoE layer; Qwen2-MoE adds one gated shared expert.
fn qwen_moe(sec: &Section<'_>, experts: u64, model_type: &str) -> Result<Moe, ModelError> {
    let top_k = sec.req_pos("num_experts_per_tok")?;
    check_top_k(sec, "num_experts_per_tok", top_k, experts)?;
    let shared = if model_type == "qwen2_moe" {
        let inter = sec.req_u64("shared_expert_intermediate_size")?;
        (inter > 0).then_some(Ffn {
            inter,
            gated: true,
            bias: false,
        })
    } else {
        None
    };
    Ok(Moe {
        experts,
        top_k,
        expert_inter: sec.req_pos("moe_intermediate_size")?,
        shared_gate: shared.is_some(),
        shared,
    })
}

/// The dense SwiGLU FFN (`intermediate_size`), read only when some layer uses it.
fn dense_ffn_if(
    sec: &Section<'_>,
    dense_layers: u64,
    bias: bool,
) -> Result<Option<Ffn>, ModelError> {
    if dense_layers == 0 {
        return Ok(None);
    }
    Ok(Some(Ffn {
        inter: sec.req_pos("intermediate_size")?,
        gated: true,
        bias,
    }))
}

/// The sliding window when the config enables one (mistral: `sliding_window` set; qwen2-style:
/// `use_sliding_window` true as well).
fn sliding_window(sec: &Section<'_>, model_type: &str) -> Result<Option<u64>, ModelError> {
    let window = sec.opt_u64("sliding_window")?;
    let enabled = match model_type {
        "mistral" | "mixtral" => true,
        "qwen2" | "qwen2_moe" | "qwen3" | "qwen3_moe" => {
            sec.bool_or("use_sliding_window", false)?
        }
        _ => false,
    };
    Ok(window.filter(|&w| enabled && w > 0))
}

/// DeepSeek-V2 / V3 and DeepSeek-OCR-2's text decoder.
fn parse_deepseek(sec: &Section<'_>, model_type: &str) -> Result<Decoder, ModelError> {
    let hidden = sec.req_pos("hidden_size")?;
    let layers = sec.req_pos("num_hidden_layers")?;
    let heads = sec.req_pos("num_attention_heads")?;
    let vocab = sec.req_pos("vocab_size")?;
    let tied = sec.bool_or("tie_word_embeddings", false)?;
    let attention_bias = sec.bool_or("attention_bias", false)?;
    let mlp_bias = sec.bool_or("mlp_bias", false)?;
    let (attn, attn_extra) = deepseek_attention(sec, hidden, heads, attention_bias)?;
    let ffn = deepseek_ffn(sec, layers, model_type, mlp_bias)?;

    Ok(Decoder {
        family: Family::DeepSeek,
        hidden,
        layers,
        vocab,
        attn,
        attn_extra_params: attn_extra,
        layer_norm_params: 2 * hidden,
        final_norm_params: hidden,
        dense_layers: ffn.dense_layers,
        dense_ffn: ffn.dense_ffn,
        moe_layers: ffn.moe_layers,
        moe: ffn.moe,
        tied,
        position_table: 0,
        sliding_window: None,
    })
}

/// DeepSeek attention and its parameters beyond the projection matrices (norms, biases).
///
/// MLA when kv_lora_rank is set (and `use_mla` is not false, as DeepSeek-OCR's remote-code
/// config says); otherwise plain MHA/GQA with d = hidden / heads (DeepSeek configs' `head_dim`
/// is the rope dim, so it is not used).
fn deepseek_attention(
    sec: &Section<'_>,
    hidden: u64,
    heads: u64,
    attention_bias: bool,
) -> Result<(Attention, u64), ModelError> {
    let use_mla = sec.bool_or("use_mla", true)?;
    Ok(match sec.opt_pos("kv_lora_rank")? {
        Some(kv_lora_rank) if use_mla => {
            let q_lora_rank = sec.opt_pos("q_lora_rank")?;
            let qk_nope = sec.req_u64("qk_nope_head_dim")?;
            let qk_rope = sec.req_pos("qk_rope_head_dim")?;
            let v_head = sec.req_pos("v_head_dim")?;
            let mut extra = kv_lora_rank + q_lora_rank.unwrap_or(0); // kv_a / q_a layernorms
            if attention_bias {
                // q_a_proj, kv_a_proj_with_mqa and o_proj carry the bias.
                extra += q_lora_rank.unwrap_or(0) + kv_lora_rank + qk_rope + hidden;
            }
            let attn = Attention::Mla {
                heads,
                q_lora_rank,
                kv_lora_rank,
                qk_nope,
                qk_rope,
                v_head,
            };
            (attn, extra)
        }
        _ => {
            let kv_heads = kv_heads(sec, heads)?;
            let head_dim = split_heads(sec, hidden, heads)?;
            let extra = if attention_bias {
                (heads + 2 * kv_heads) * head_dim + hidden
            } else {
                0
            };
            let attn = Attention::Gqa {
                heads,
                kv_heads,
                head_dim,
            };
            (attn, extra)
        }
    })
}

/// DeepSeekMoE: `n_routed_experts` routed experts plus `n_shared_experts` shared ones in the
/// sparse layers, a dense FFN in the others.
fn deepseek_ffn(
    sec: &Section<'_>,
    layers: u64,
    model_type: &str,
    mlp_bias: bool,
) -> Result<FfnLayers, ModelError> {
    let experts = sec.u64_or("n_routed_experts", 0)?;
    let sparse = deepseek_sparse_layers(sec, layers, experts, model_type)?;
    let moe = if sparse > 0 {
        Some(deepseek_moe(sec, experts, mlp_bias)?)
    } else {
        None
    };
    let dense_layers = layers - sparse;
    Ok(FfnLayers {
        dense_layers,
        dense_ffn: dense_ffn_if(sec, dense_layers, mlp_bias)?,
        moe_layers: sparse,
        moe,
    })
}

/// DeepSeek's MoE layers: from `mlp_layer_types` (DeepSeek-OCR-2, which must have it), else
/// from `first_k_dense_replace` and `moe_layer_freq`.
fn deepseek_sparse_layers(
    sec: &Section<'_>,
    layers: u64,
    experts: u64,
    model_type: &str,
) -> Result<u64, ModelError> {
    if experts == 0 {
        Ok(0)
    } else if let Some(types) = sec.opt_str_list("mlp_layer_types")? {
        count_sparse_types(sec, &types, layers)
    } else if model_type == "deepseek_ocr2_text" {
        Err(sec.missing("mlp_layer_types"))
    } else {
        // Layer i is MoE iff i >= first_k_dense_replace and i % moe_layer_freq == 0
        // (DeepSeek's reference code; transformers ignores moe_layer_freq, which is 1 in
        // every released config).
        let first_dense = sec.req_u64("first_k_dense_replace")?.min(layers);
        let freq = sec.pos_or("moe_layer_freq", 1)?;
        let multiples_below = |n: u64| if n == 0 { 0 } else { (n - 1) / freq + 1 };
        Ok(multiples_below(layers) - multiples_below(first_dense))
    }
}

/// The `"sparse"` layers of DeepSeek-OCR-2's `mlp_layer_types` (one `"dense"`/`"sparse"` per
/// layer).
fn count_sparse_types(sec: &Section<'_>, types: &[&str], layers: u64) -> Result<u64, ModelError> {
    if (types.len() as u64) < layers {
        return Err(sec.invalid(
            "mlp_layer_types",
            format!("{} entries for {layers} layers", types.len()),
        ));
    }
    let mut sparse = 0;
    for t in types.iter().take(layers as usize) {
        match *t {
            "sparse" => sparse += 1,
            "dense" => {}
            other => {
                return Err(sec.invalid("mlp_layer_types", format!("unknown layer type {other:?}")))
            }
        }
    }
    Ok(sparse)
}

/// A DeepSeekMoE layer: the shared experts count as one FFN of their summed size.
fn deepseek_moe(sec: &Section<'_>, experts: u64, mlp_bias: bool) -> Result<Moe, ModelError> {
    let top_k = sec.req_pos("num_experts_per_tok")?;
    check_top_k(sec, "num_experts_per_tok", top_k, experts)?;
    let expert_inter = sec.req_pos("moe_intermediate_size")?;
    let shared_n = sec.u64_or("n_shared_experts", 0)?;
    let shared = (shared_n > 0).then_some(Ffn {
        inter: shared_n * expert_inter,
        gated: true,
        bias: mlp_bias,
    });
    Ok(Moe {
        experts,
        top_k,
        expert_inter,
        shared,
        shared_gate: false,
    })
}

/// GPT-2: `n_embd`, `n_layer`, `n_head`, `n_inner` (default 4·n_embd), `n_positions`.
fn parse_gpt2(sec: &Section<'_>) -> Result<Decoder, ModelError> {
    let hidden = sec.req_pos_any(&["n_embd", "hidden_size"])?;
    let layers = sec.req_pos_any(&["n_layer", "num_hidden_layers"])?;
    let heads = sec.req_pos_any(&["n_head", "num_attention_heads"])?;
    if hidden % heads != 0 {
        return Err(sec.invalid(
            "n_head",
            format!("{heads} heads do not divide n_embd {hidden}"),
        ));
    }
    let head_dim = hidden / heads;
    let inter = match sec.opt_pos("n_inner")? {
        Some(i) => i,
        None => 4 * hidden,
    };
    let vocab = sec.req_pos("vocab_size")?;
    let positions = sec.pos_or("n_positions", 1024)?;
    Ok(Decoder {
        family: Family::Gpt2,
        hidden,
        layers,
        vocab,
        attn: Attention::Gqa {
            heads,
            kv_heads: heads,
            head_dim,
        },
        // c_attn bias 3h, c_proj bias h.
        attn_extra_params: 4 * hidden,
        // ln_1 and ln_2: weight and bias each.
        layer_norm_params: 4 * hidden,
        final_norm_params: 2 * hidden,
        dense_layers: layers,
        dense_ffn: Some(Ffn {
            inter,
            gated: false,
            bias: true,
        }),
        moe_layers: 0,
        moe: None,
        tied: sec.bool_or("tie_word_embeddings", true)?,
        position_table: positions * hidden,
        sliding_window: None,
    })
}
