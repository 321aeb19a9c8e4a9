//! Tests of the analytic model. Every expected number is written out as the arithmetic of the
//! convention it checks; where a figure was also measured (transformers 5.17 `numel()` on a
//! meta-device build, or torch 2.11 `FlopCounterMode` on an H200), the comment says so.

use serde_json::{json, Value};

use super::{Model, ModelError};

fn model(config: &str) -> Model {
    Model::from_config(&serde_json::from_str::<Value>(config).unwrap()).unwrap()
}

fn err(config: Value) -> ModelError {
    Model::from_config(&config).unwrap_err()
}

/// Equal up to f64 rounding of sums (all expected values here are integers below 2^53).
#[track_caller]
fn exact(got: f64, want: f64) {
    assert!(
        (got - want).abs() <= want.abs() * 1e-12,
        "got {got}, want {want} (diff {})",
        got - want
    );
}

#[track_caller]
fn within(got: f64, want: f64, rel: f64) {
    assert!(
        ((got - want) / want).abs() <= rel,
        "got {got}, want {want} within {}%: off by {:.3}%",
        rel * 100.0,
        (got - want) / want * 100.0
    );
}

const LLAMA2_7B: &str = r#"{
  "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
  "num_attention_heads": 32, "num_key_value_heads": 32, "intermediate_size": 11008,
  "vocab_size": 32000, "tie_word_embeddings": false, "torch_dtype": "float16"
}"#;

/// tests/fixtures/h200-qwen2-0.5b/config.json, verbatim.
const QWEN2_05B: &str = r#"{
  "attention_dropout": 0.0,
  "bos_token_id": null,
  "dtype": "bfloat16",
  "eos_token_id": null,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "layer_types": [
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention",
    "full_attention"
  ],
  "max_position_embeddings": 4096,
  "max_window_layers": 28,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "pad_token_id": null,
  "rms_norm_eps": 1e-06,
  "rope_parameters": {
    "rope_theta": 10000.0,
    "rope_type": "default"
  },
  "sliding_window": null,
  "tie_word_embeddings": false,
  "transformers_version": "5.17.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
}"#;

/// DeepSeek-OCR's decoder (DeepSeek3B-MoE-A570M) as a deepseek_v2 config without MLA.
const DEEPSEEK_OCR_DECODER: &str = r#"{
  "model_type": "deepseek_v2", "hidden_size": 1280, "num_hidden_layers": 12,
  "num_attention_heads": 10, "num_key_value_heads": 10, "kv_lora_rank": null,
  "q_lora_rank": null, "use_mla": false, "intermediate_size": 6848, "n_routed_experts": 64,
  "num_experts_per_tok": 6, "n_shared_experts": 2, "moe_intermediate_size": 896,
  "first_k_dense_replace": 1, "moe_layer_freq": 1, "vocab_size": 129280,
  "torch_dtype": "bfloat16"
}"#;

const MIXTRAL_8X7B: &str = r#"{
  "model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32,
  "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
  "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000,
  "torch_dtype": "bfloat16"
}"#;

const QWEN15_MOE_A27B: &str = r#"{
  "model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24,
  "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 5632,
  "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
  "num_experts": 60, "num_experts_per_tok": 4, "decoder_sparse_step": 1,
  "mlp_only_layers": [], "vocab_size": 151936, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16"
}"#;

const DEEPSEEK_V2_LITE: &str = r#"{
  "model_type": "deepseek_v2", "hidden_size": 2048, "num_hidden_layers": 27,
  "num_attention_heads": 16, "num_key_value_heads": 16, "q_lora_rank": null,
  "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
  "n_routed_experts": 64, "num_experts_per_tok": 6, "n_shared_experts": 2,
  "moe_intermediate_size": 1408, "first_k_dense_replace": 1, "moe_layer_freq": 1,
  "intermediate_size": 10944, "vocab_size": 102400, "torch_dtype": "bfloat16"
}"#;

const DEEPSEEK_V3: &str = r#"{
  "model_type": "deepseek_v3", "hidden_size": 7168, "num_hidden_layers": 61,
  "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1536,
  "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
  "n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1,
  "moe_intermediate_size": 2048, "first_k_dense_replace": 3, "moe_layer_freq": 1,
  "intermediate_size": 18432, "vocab_size": 129280, "n_group": 8, "topk_group": 4,
  "torch_dtype": "bfloat16",
  "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
                          "quant_method": "fp8", "weight_block_size": [128, 128]}
}"#;

const GPT2: &str = r#"{
  "model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": null,
  "n_positions": 1024, "n_ctx": 1024, "vocab_size": 50257, "activation_function": "gelu_new"
}"#;

const QWEN3_06B: &str = r#"{
  "model_type": "qwen3", "hidden_size": 1024, "num_hidden_layers": 28,
  "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
  "intermediate_size": 3072, "vocab_size": 151936, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16"
}"#;

const QWEN3_30B_A3B: &str = r#"{
  "model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 48,
  "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
  "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,
  "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
  "vocab_size": 151936, "tie_word_embeddings": false
}"#;

/// The DeepSeek-OCR-2 config of gpu-host.md as transformers 5.17 `DeepseekOcr2Config(...).to_dict()`
/// writes it (bookkeeping keys such as id2label and layer_types dropped).
const DEEPSEEK_OCR2: &str = r#"{
  "transformers_version": "5.17.0",
  "dtype": null,
  "vision_config": {
    "dtype": null,
    "sam_config": {
      "dtype": null,
      "hidden_size": 768,
      "output_channels": 256,
      "num_hidden_layers": 12,
      "num_attention_heads": 12,
      "num_channels": 3,
      "image_size": 1024,
      "patch_size": 16,
      "hidden_act": "gelu",
      "layer_norm_eps": 1e-06,
      "attention_dropout": 0.0,
      "initializer_range": 1e-10,
      "qkv_bias": true,
      "mlp_ratio": 4.0,
      "use_abs_pos": true,
      "use_rel_pos": true,
      "window_size": 14,
      "global_attn_indexes": [
        2,
        5,
        8,
        11
      ],
      "mlp_dim": 3072,
      "downsample_channels": [
        512,
        896
      ],
      "scale": 384,
      "model_type": "deepseek_ocr2_sam_vision_model"
    },
    "encoder_config": {
      "dtype": null,
      "vocab_size": 151936,
      "hidden_size": 896,
      "intermediate_size": 4864,
      "num_hidden_layers": 24,
      "num_attention_heads": 14,
      "num_key_value_heads": 2,
      "hidden_act": "silu",
      "max_position_embeddings": 32768,
      "initializer_range": 0.02,
      "rms_norm_eps": 1e-06,
      "use_cache": true,
      "tie_word_embeddings": false,
      "rope_parameters": {
        "rope_theta": 10000.0,
        "rope_type": "default"
      },
      "use_sliding_window": false,
      "sliding_window": null,
      "max_window_layers": 28,
      "attention_dropout": 0.0,
      "pad_token_id": null,
      "bos_token_id": null,
      "eos_token_id": null,
      "model_type": "deepseek_ocr2_encoder"
    },
    "model_type": "deepseek_ocr2_vision"
  },
  "text_config": {
    "dtype": null,
    "vocab_size": 129280,
    "hidden_size": 1280,
    "intermediate_size": 6848,
    "num_hidden_layers": 12,
    "num_attention_heads": 10,
    "num_key_value_heads": 10,
    "hidden_act": "silu",
    "max_position_embeddings": 8192,
    "initializer_range": 0.02,
    "rms_norm_eps": 1e-06,
    "use_cache": true,
    "pad_token_id": null,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pretraining_tp": 1,
    "tie_word_embeddings": false,
    "rope_parameters": {
      "rope_theta": 10000.0,
      "rope_type": "default"
    },
    "attention_bias": false,
    "attention_dropout": 0.0,
    "mlp_bias": false,
    "head_dim": 128,
    "n_group": null,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "routed_scaling_factor": 1.0,
    "topk_group": null,
    "topk_method": "greedy",
    "num_experts_per_tok": 6,
    "moe_intermediate_size": 896,
    "mlp_layer_types": [
      "dense",
      "sparse",
      "sparse",
      "sparse",
      "sparse",
      "sparse",
      "sparse",
      "sparse",
      "sparse",
      "sparse",
      "sparse",
      "sparse"
    ],
    "model_type": "deepseek_ocr2_text"
  },
  "image_token_id": 128815,
  "tie_word_embeddings": false,
  "model_type": "deepseek_ocr2"
}"#;

/// Changes (or with `Value::Null`, removes) one key of a JSON config.
fn edit(config: &str, key: &str, value: Value) -> Value {
    let mut v: Value = serde_json::from_str(config).unwrap();
    let obj = v.as_object_mut().unwrap();
    if value.is_null() {
        obj.remove(key);
    } else {
        obj.insert(key.to_owned(), value);
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Dense models
// ---------------------------------------------------------------------------------------------

#[test]
fn llama2_7b_decode_flops_are_two_per_param_plus_attention() {
    let m = model(LLAMA2_7B);
    let (h, l, heads, d, i, v) = (4096.0, 32.0, 32.0, 128.0, 11008.0, 32000.0);
    // Per token per layer: Q,O 4·h·H·d + K,V 4·h·H_kv·d (MHA: H_kv = H) + SwiGLU 6·h·I.
    let per_layer = 4.0 * h * heads * d + 4.0 * h * heads * d + 6.0 * h * i;
    assert_eq!(per_layer, 134_217_728.0 + 270_532_608.0);
    let lm_head = 2.0 * h * v; // 262,144,000
    let attn_per_key = 4.0 * heads * d * l; // 524,288
    for c in [1u64, 100, 4096] {
        exact(
            m.decode_step_flops(c),
            l * per_layer + lm_head + attn_per_key * c as f64,
        );
    }
    // 13,214,154,752 + 524,288·c. "≈ 2·6.74e9": the 6.74B of the model card includes the
    // 131M-parameter input embedding, which is a gather and costs no FLOPs, so 2% below.
    exact(m.decode_step_flops(0), 13_214_154_752.0);
    within(m.decode_step_flops(1), 2.0 * 6.74e9, 0.025);
    // Matmul FLOPs are exactly 2 per matrix parameter: params minus norms (2·h per layer + h).
    let (total, active) = m.params();
    assert_eq!(total, active);
    exact(2.0 * (total - (2.0 * h * l + h)), m.decode_step_flops(0));
    // numel() of transformers' LlamaForCausalLM, minus embed_tokens: 6,607,343,616.
    exact(total, 6_607_343_616.0);
    exact(total + m.embedding_params(), 6_738_415_616.0);
}

#[test]
fn llama2_7b_fp16_decode_bytes_are_weights_plus_kv() {
    let m = model(LLAMA2_7B);
    assert_eq!(m.dtype_bytes(), 2.0);
    assert_eq!(m.compute_dtype(), "fp16");
    // KV: 2 (K and V)·L·H_kv·d·2 bytes = 2·32·32·128·2.
    exact(m.kv_bytes_per_token(), 524_288.0);
    // Batch 1, c = 1: all weights once (6,607,343,616 params·2 bytes), KV read of 0 earlier keys,
    // KV write of the new token.
    let weights = 6_607_343_616.0 * 2.0;
    exact(m.decode_step_bytes(1, 1), weights + 524_288.0);
    within(m.decode_step_bytes(1, 1), 2.0 * 6.74e9, 0.025);
    // c = 1000, batch 8: weights once, KV read 8·999 tokens, KV written for 8 tokens.
    exact(
        m.decode_step_bytes(8, 1000),
        weights + 8.0 * 999.0 * 524_288.0 + 8.0 * 524_288.0,
    );
    // Prefill: weights once + KV written for batch·tokens tokens.
    exact(m.prefill_bytes(2, 512), weights + 1024.0 * 524_288.0);
    assert_eq!(m.decode_step_bytes(0, 10), 0.0);
    assert_eq!(m.prefill_bytes(3, 0), 0.0);
}

#[test]
fn qwen2_05b_fixture_decode_and_prefill() {
    let m = model(QWEN2_05B);
    assert_eq!(m.model_type(), "qwen2");
    assert_eq!(m.compute_dtype(), "bf16");
    let (h, l, heads, kv, d, i, v) = (896.0, 24.0, 14.0, 2.0, 64.0, 4864.0, 151936.0);
    // Per token per layer: 4·h·H·d + 4·h·H_kv·d + 6·h·I = 3,211,264 + 458,752 + 26,148,864.
    let per_layer = 4.0 * h * heads * d + 4.0 * h * kv * d + 6.0 * h * i;
    assert_eq!(per_layer, 29_818_880.0);
    let lm_head = 2.0 * h * v; // 272,269,312
    let attn_per_key = 4.0 * heads * d * l; // 86,016

    // Decode at c = 513 (a 512-token prompt plus the new token).
    let decode = l * per_layer + lm_head + attn_per_key * 513.0;
    assert_eq!(decode, 1_032_048_640.0);
    exact(m.decode_step_flops(513), decode);

    // Prefill of 512 tokens, causal pairs 512·513/2 = 131,328.
    let s = 512.0;
    let linear = s * l * per_layer; // 366,414,397,440
    let attn = attn_per_key * s * (s + 1.0) / 2.0; // 11,296,309,248
    let all_logits = linear + attn + s * lm_head;
    let one_logit = linear + attn + lm_head;
    assert_eq!(all_logits, 517_112_594_432.0);
    assert_eq!(one_logit, 377_982_976_000.0);
    exact(m.prefill_flops(512, 512), all_logits);
    exact(m.prefill_flops(512, 1), one_logit);
    // More logits than tokens are capped.
    exact(m.prefill_flops(512, 10_000), all_logits);

    // Parameters: per layer q,k,v,o 1,835,008 + q/k/v biases 1,152 + MLP 13,074,432 + norms
    // 1,792; then final norm and the untied lm_head (= numel() minus embed_tokens).
    let per_layer_params = 1_835_008.0 + 1_152.0 + 13_074_432.0 + 1_792.0;
    let (total, active) = m.params();
    exact(total, 24.0 * per_layer_params + 896.0 + 136_134_656.0);
    exact(total, 494_032_768.0);
    assert_eq!(total, active);
    // KV: 2·24·2·64·2 bytes.
    exact(m.kv_bytes_per_token(), 12_288.0);
}

#[test]
fn breakdown_sums_to_total() {
    let m = model(QWEN2_05B);
    let parts = m.prefill_flops_breakdown(512, 1);
    let keys: Vec<_> = parts.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, ["attn_proj", "attn_core", "ffn", "lm_head"]);
    exact(parts.iter().map(|(_, v)| v).sum(), m.prefill_flops(512, 1));
    let parts = m.decode_step_flops_breakdown(513);
    exact(parts[1].1, 86_016.0 * 513.0);
    exact(parts.iter().map(|(_, v)| v).sum(), m.decode_step_flops(513));
}

#[test]
fn qwen3_uses_explicit_head_dim_and_counts_tied_lm_head() {
    let m = model(QWEN3_06B);
    // head_dim 128 (not 1024/16 = 64): Q/O 4·1024·16·128, K/V 4·1024·8·128, MLP 6·1024·3072.
    let per_layer =
        4.0 * 1024.0 * 16.0 * 128.0 + 4.0 * 1024.0 * 8.0 * 128.0 + 6.0 * 1024.0 * 3072.0;
    let lm_head = 2.0 * 1024.0 * 151936.0; // tied, still a matmul
    let attn_per_key = 4.0 * 16.0 * 128.0 * 28.0;
    exact(
        m.decode_step_flops(101),
        28.0 * per_layer + lm_head + 101.0 * attn_per_key,
    );
    // Tied: the one table is counted as lm_head; nothing else is left out.
    assert_eq!(m.embedding_params(), 0.0);
    // numel() of Qwen3ForCausalLM (tied, so the table once): 596,049,920.
    exact(m.params().0, 596_049_920.0);
    // KV: 2·28·8·128·2 bytes.
    exact(m.kv_bytes_per_token(), 114_688.0);
}

#[test]
fn head_dim_falls_back_to_hidden_over_heads_and_kv_heads_to_heads() {
    let m = model(
        r#"{"model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 1,
        "num_attention_heads": 32, "intermediate_size": 1, "vocab_size": 1, "head_dim": null}"#,
    );
    // d = 4096/32 = 128, H_kv = H = 32: K/V as wide as Q.
    exact(m.kv_bytes_per_token(), 2.0 * 32.0 * 128.0 * 2.0);
    exact(
        m.decode_step_flops(0),
        8.0 * 4096.0 * 4096.0 + 6.0 * 4096.0 + 2.0 * 4096.0,
    );
}

#[test]
fn gpt2_params_and_flops() {
    let m = model(GPT2);
    let (h, l, i, v, p) = (768.0, 12.0, 3072.0, 50257.0, 1024.0);
    // Per layer: ln_1, ln_2 (weight + bias: 4h), c_attn h·3h + 3h, c_proj h·h + h,
    // c_fc h·I + I, c_proj I·h + h (n_inner null -> I = 4h).
    let per_layer = 4.0 * h + (3.0 * h * h + 3.0 * h) + (h * h + h) + (h * i + i) + (i * h + h);
    assert_eq!(per_layer, 7_087_872.0);
    // params(): layers + ln_f (2h) + lm_head (tied to wte, V·h) — the input tables wte/wpe are
    // excluded, and since wte *is* lm_head only wpe is left for embedding_params().
    let (total, active) = m.params();
    exact(total, l * per_layer + 2.0 * h + v * h);
    assert_eq!(total, active);
    exact(m.embedding_params(), p * h);
    // With embeddings: 124,439,808, GPT-2's "124M" (and transformers' numel()).
    exact(total + m.embedding_params(), 124_439_808.0);
    // FLOPs: qkv + proj 8·h² (MHA), GELU MLP 2 matrices 4·h·I, lm_head 2·h·V, attention 4·h per
    // key per layer (H·d = h).
    let decode = l * (8.0 * h * h + 4.0 * h * i) + 2.0 * h * v + 4.0 * h * l * 65.0;
    exact(m.decode_step_flops(65), decode);
    // No dtype in the config: bf16 assumed, and said.
    assert_eq!(m.dtype_bytes(), 2.0);
    assert!(m.conventions().iter().any(|s| s.contains("names no dtype")));
}

// ---------------------------------------------------------------------------------------------
// MoE models
// ---------------------------------------------------------------------------------------------

#[test]
fn deepseek_ocr_decoder_is_1_15_gflop_per_token() {
    let m = model(DEEPSEEK_OCR_DECODER);
    assert!(m.is_moe());
    let h = 1280.0;
    // MHA (no kv_lora_rank): 8·h² per layer; layer 0 dense SwiGLU 6·h·6848; layers 1-11 MoE:
    // router 2·h·64 + 6 routed·6·h·896 + 2 shared·6·h·896; lm_head 2·h·129280.
    let attn = 12.0 * 8.0 * h * h; // 157,286,400
    let dense = 6.0 * h * 6848.0; // 52,592,640
    let moe = 11.0 * (2.0 * h * 64.0 + 6.0 * 6.0 * h * 896.0 + 2.0 * 6.0 * h * 896.0); // 607,354,880
    let lm_head = 2.0 * h * 129280.0; // 330,956,800
    let per_token = attn + dense + moe + lm_head;
    assert_eq!(per_token, 1_148_190_720.0);
    exact(m.decode_step_flops(0), per_token);
    within(m.decode_step_flops(0), 1.15e9, 0.01);
    // Attention: 4·H·d·L = 4·10·128·12 = 61,440 per key.
    exact(
        m.decode_step_flops(1000) - m.decode_step_flops(0),
        61_440.0 * 1000.0,
    );
    // KV: 2·12·10·128·2 = 61,440 bytes per token.
    exact(m.kv_bytes_per_token(), 61_440.0);
    // Parameters (metrics.md: ≈2.93B with the input embedding, ≈574M active without it).
    let (total, active) = m.params();
    let norms = 12.0 * 2.0 * h + h;
    let attn_p = 12.0 * 4.0 * h * h;
    let dense_p = 3.0 * h * 6848.0;
    let router_p = 64.0 * h;
    let shared_p = 2.0 * 3.0 * h * 896.0;
    let lm_head_p = h * 129280.0;
    let active_want =
        attn_p + dense_p + 11.0 * (router_p + 6.0 * 3.0 * h * 896.0 + shared_p) + norms + lm_head_p;
    let total_want = attn_p
        + dense_p
        + 11.0 * (router_p + 64.0 * 3.0 * h * 896.0 + shared_p)
        + norms
        + lm_head_p;
    exact(active, active_want);
    exact(total, total_want);
    exact(active, 574_127_360.0);
    within(total + m.embedding_params(), 2.93e9, 0.01);
    assert!(m
        .conventions()
        .iter()
        .any(|s| s.contains("no kv_lora_rank")));
}

#[test]
fn mixtral_flops_params_and_expected_experts() {
    let m = model(MIXTRAL_8X7B);
    let h = 4096.0;
    // Per layer: Q,O 4·h·32·128 + K,V 4·h·8·128, router 2·h·8, 2 experts·6·h·14336.
    let per_layer = 4.0 * h * 4096.0 + 4.0 * h * 1024.0 + 2.0 * h * 8.0 + 2.0 * 6.0 * h * 14336.0;
    let attn_per_key = 4.0 * 32.0 * 128.0 * 32.0;
    exact(
        m.decode_step_flops(33),
        32.0 * per_layer + 2.0 * h * 32000.0 + 33.0 * attn_per_key,
    );
    // Parameters: attention 2·h² + 2·h·1024, router 8·h, experts 8 (active 2)·3·h·14336,
    // norms 2h; plus final norm h and lm_head h·32000.
    let common = 2.0 * h * h + 2.0 * h * 1024.0 + 8.0 * h + 2.0 * h;
    let expert = 3.0 * h * 14336.0;
    let tail = h + h * 32000.0;
    let (total, active) = m.params();
    exact(total, 32.0 * (common + 8.0 * expert) + tail);
    exact(active, 32.0 * (common + 2.0 * expert) + tail);
    exact(total, 46_571_720_704.0); // numel() minus embed_tokens
    within(total + m.embedding_params(), 46.7e9, 0.01);
    within(active + m.embedding_params(), 12.9e9, 0.01);

    // Expected distinct experts: E·(1 − (1 − k/E)^tokens). One token: 8·(1 − 6/8) = 2 exactly,
    // so a batch-1 decode step reads exactly the active parameters.
    assert_eq!(m.expected_experts_per_layer(1), Some(2.0));
    // KV 2·32·8·128·2 = 131,072 bytes per token.
    exact(m.kv_bytes_per_token(), 131_072.0);
    exact(
        m.decode_step_bytes(1, 100),
        active * 2.0 + 99.0 * 131_072.0 + 131_072.0,
    );
    // Two tokens: 8·(1 − (3/4)²) = 3.5 experts per layer.
    assert_eq!(m.expected_experts_per_layer(2), Some(3.5));
    exact(
        m.decode_step_bytes(2, 100),
        (32.0 * (common + 3.5 * expert) + tail) * 2.0 + 2.0 * 100.0 * 131_072.0,
    );
    // Many tokens: every expert is read, all weights once.
    within(
        m.prefill_bytes(1, 4096),
        total * 2.0 + 4096.0 * 131_072.0,
        1e-9,
    );
}

#[test]
fn qwen2_moe_shared_expert_with_gate() {
    let m = model(QWEN15_MOE_A27B);
    let h = 2048.0;
    // Per token per layer: MHA 8·h², router 2·h·60, 4 routed·6·h·1408, shared 6·h·5632,
    // shared-expert gate 2·h.
    let per_layer =
        8.0 * h * h + 2.0 * h * 60.0 + 4.0 * 6.0 * h * 1408.0 + 6.0 * h * 5632.0 + 2.0 * h;
    let lm_head = 2.0 * h * 151936.0;
    exact(m.decode_step_flops(0), 24.0 * per_layer + lm_head);
    exact(m.decode_step_flops(0), 4_755_521_536.0);
    // Parameters per layer: attention 4·h² + q/k/v biases 3·h, router 60·h, shared 3·h·5632,
    // gate h, norms 2·h, experts 60 (active 4)·3·h·1408.
    let common = 4.0 * h * h + 3.0 * h + 60.0 * h + 3.0 * h * 5632.0 + h + 2.0 * h;
    let expert = 3.0 * h * 1408.0;
    let tail = h + h * 151936.0;
    let (total, active) = m.params();
    exact(total, 24.0 * (common + 60.0 * expert) + tail);
    exact(active, 24.0 * (common + 4.0 * expert) + tail);
    exact(total, 14_004_619_264.0); // numel() minus embed_tokens
                                    // The model card's "14.3B total, A2.7B" count the input embedding.
    within(total + m.embedding_params(), 14.3e9, 0.01);
    within(active + m.embedding_params(), 2.7e9, 0.01);
    // One token: 60·(1 − (56/60)^1) = 4 experts.
    within(m.expected_experts_per_layer(1).unwrap(), 4.0, 1e-12);
}

#[test]
fn qwen_moe_sparse_step_and_mlp_only_layers() {
    // 6 layers, decoder_sparse_step 2 -> layers 1, 3, 5 sparse; mlp_only_layers [3, 4, 9] makes
    // layer 3 dense (4 is dense anyway; 9 does not exist): 2 MoE layers, 4 dense.
    let m = model(
        r#"{"model_type": "qwen3_moe", "hidden_size": 64, "num_hidden_layers": 6,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "intermediate_size": 100, "moe_intermediate_size": 10, "num_experts": 8,
        "num_experts_per_tok": 2, "decoder_sparse_step": 2, "mlp_only_layers": [3, 4, 9],
        "vocab_size": 1000}"#,
    );
    let h = 64.0;
    let attn = 4.0 * h * 4.0 * 16.0 + 4.0 * h * 2.0 * 16.0;
    let dense = 6.0 * h * 100.0;
    let moe = 2.0 * h * 8.0 + 2.0 * 6.0 * h * 10.0; // no shared expert in qwen3_moe
    exact(
        m.decode_step_flops(0),
        6.0 * attn + 4.0 * dense + 2.0 * moe + 2.0 * h * 1000.0,
    );
}

#[test]
fn deepseek_v2_lite_mla() {
    let m = model(DEEPSEEK_V2_LITE);
    let (h, heads) = (2048.0, 16.0);
    // Naive MLA per token per layer: q_proj h·H·(128+64), kv_a h·(512+64), kv_b 512·H·(128+128),
    // o H·128·h; 2 FLOPs per multiply-add.
    let attn_params = h * heads * 192.0 + h * 576.0 + 512.0 * heads * 256.0 + heads * 128.0 * h;
    assert_eq!(attn_params, 13_762_560.0);
    // Layer 0 dense (10944), 26 MoE: router 2·h·64, 6 routed + 2 shared experts of 1408.
    let dense = 6.0 * h * 10944.0;
    let moe = 2.0 * h * 64.0 + 6.0 * 6.0 * h * 1408.0 + 2.0 * 6.0 * h * 1408.0;
    let lm_head = 2.0 * h * 102400.0;
    // Attention core per key: QK^T over 192 + AV over 128, per head: 2·H·(192 + 128).
    let per_key = 27.0 * 2.0 * heads * 320.0;
    let want = 27.0 * 2.0 * attn_params + dense + 26.0 * moe + lm_head + 41.0 * per_key;
    exact(m.decode_step_flops(41), want);
    // transformers re-expands the 40 earlier latents: 27·2·512·16·256·40.
    assert_eq!(
        m.mla_decode_recompute_flops(41),
        Some(27.0 * 2.0 * 512.0 * 16.0 * 256.0 * 40.0)
    );
    // KV cache: the latent, 27·(512 + 64)·2 bytes.
    exact(m.kv_bytes_per_token(), 27.0 * 576.0 * 2.0);
    // Parameters: + kv_a_layernorm 512 and 2 norms per layer; numel() minus embed_tokens.
    let (total, active) = m.params();
    exact(total, 15_496_769_024.0);
    let per_layer_common = attn_params + 512.0 + 2.0 * h;
    let moe_common = 64.0 * h + 2.0 * 3.0 * h * 1408.0;
    let expert = 3.0 * h * 1408.0;
    let tail = h + h * 102400.0;
    exact(
        active,
        27.0 * per_layer_common + 3.0 * h * 10944.0 + 26.0 * (moe_common + 6.0 * expert) + tail,
    );
    // Paper: 15.7B total (with embeddings), 2.4B activated.
    within(total + m.embedding_params(), 15.7e9, 0.01);
    within(active, 2.4e9, 0.03);
    assert!(m
        .conventions()
        .iter()
        .any(|s| s.contains("naive non-absorbed")));
}

#[test]
fn deepseek_v3_params_and_fp8() {
    let m = model(DEEPSEEK_V3);
    let (h, heads) = (7168.0, 128.0);
    // Attention with q_lora: q_a h·1536, q_b 1536·H·192, kv_a h·576, kv_b 512·H·256, o H·128·h,
    // plus q_a_layernorm 1536, kv_a_layernorm 512, two layer norms.
    let attn =
        h * 1536.0 + 1536.0 * heads * 192.0 + h * 576.0 + 512.0 * heads * 256.0 + heads * 128.0 * h;
    let per_layer_common = attn + 1536.0 + 512.0 + 2.0 * h;
    // 3 dense layers (18432), 58 MoE layers: router 256·h, 1 shared expert, 256 (8 active)
    // routed experts of 3·h·2048.
    let dense = 3.0 * h * 18432.0;
    let moe_common = 256.0 * h + 3.0 * h * 2048.0;
    let expert = 3.0 * h * 2048.0;
    let tail = h + h * 129280.0;
    let (total, active) = m.params();
    exact(
        total,
        61.0 * per_layer_common + 3.0 * dense + 58.0 * (moe_common + 256.0 * expert) + tail,
    );
    exact(
        active,
        61.0 * per_layer_common + 3.0 * dense + 58.0 * (moe_common + 8.0 * expert) + tail,
    );
    // numel() of DeepseekV3ForCausalLM minus embed_tokens: 670,099,725,312.
    exact(total, 670_099_725_312.0);
    // The paper: 671B total, 37B activated per token (main model, without the MTP module).
    within(total, 671e9, 0.03);
    within(active, 37e9, 0.03);
    // fp8 weights: 1 byte per parameter, fp8 peak; the KV cache stays bf16.
    assert_eq!(m.compute_dtype(), "fp8");
    assert_eq!(m.weight_bytes_per_param(), 1.0);
    assert_eq!(m.dtype_bytes(), 2.0);
    exact(m.kv_bytes_per_token(), 61.0 * 576.0 * 2.0);
    // One token reads the active weights: 256·(1 − (248/256)) = 8 experts.
    within(
        m.decode_step_bytes(1, 1),
        active + 61.0 * 576.0 * 2.0,
        1e-12,
    );
    // Overriding the dtype drops the fp8 weights.
    let bf16 = m.with_dtype("bfloat16").unwrap();
    assert_eq!(bf16.compute_dtype(), "bf16");
    assert_eq!(bf16.weight_bytes_per_param(), 2.0);
}

#[test]
fn deepseek_moe_layer_freq_counts_multiples() {
    // 10 layers, first 3 dense, then every other layer index (4, 6, 8) MoE: 3 MoE, 7 dense.
    let m = model(
        r#"{"model_type": "deepseek_v2", "hidden_size": 64, "num_hidden_layers": 10,
        "num_attention_heads": 4, "intermediate_size": 100, "n_routed_experts": 4,
        "num_experts_per_tok": 1, "n_shared_experts": 0, "moe_intermediate_size": 10,
        "first_k_dense_replace": 3, "moe_layer_freq": 2, "vocab_size": 10}"#,
    );
    let h = 64.0;
    let want = 10.0 * 8.0 * h * h
        + 7.0 * 6.0 * h * 100.0
        + 3.0 * (2.0 * h * 4.0 + 6.0 * h * 10.0)
        + 2.0 * h * 10.0;
    exact(m.decode_step_flops(0), want);
}

// ---------------------------------------------------------------------------------------------
// DeepSeek-OCR-2
// ---------------------------------------------------------------------------------------------

#[test]
fn deepseek_ocr2_decoder_vision_and_image_tokens() {
    let m = model(DEEPSEEK_OCR2);
    assert_eq!(m.model_type(), "deepseek_ocr2");
    assert_eq!(m.lm_model_type(), "deepseek_ocr2_text");
    // The decoder is DeepSeek-OCR's: same per-token FLOPs and parameters as above.
    exact(m.decode_step_flops(0), 1_148_190_720.0);
    exact(m.params().1, 574_127_360.0);
    exact(m.params().0, 2_769_255_680.0);
    exact(m.kv_bytes_per_token(), 61_440.0);
    // One 1024x1024 view: 256 learned queries + 1 view separator.
    assert_eq!(m.image_tokens_per_image(), Some(257));

    let vision = m.vision_flops().unwrap();
    let keys: Vec<_> = vision.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, ["sam", "vision_encoder", "projector"]);
    assert!(vision.iter().all(|(_, f)| *f > 0.0));

    // SAM ViT-B at 1024: patch conv 16x16 -> 64x64 grid (N = 4096), D = 768, MLP 3072.
    let (n, d, mlp) = (4096.0, 768.0, 3072.0);
    let patch_embed = 2.0 * n * d * (3.0 * 16.0 * 16.0);
    // 4 global blocks: qkv + proj 8·N·D², attention 4·N²·D, rel-pos einsums 2·N·D·(64 + 64),
    // MLP 4·N·D·3072.
    let global = 8.0 * n * d * d + 4.0 * n * n * d + 2.0 * n * d * 128.0 + 4.0 * n * d * mlp;
    // 8 windowed blocks: grid padded to 70x70 = 4900 positions, 25 windows of 196; attention
    // 25·4·196²·D, rel-pos 25·2·196·D·(14 + 14); the MLP runs on the 4096 unpadded positions.
    let windowed = 8.0 * 4900.0 * d * d
        + 25.0 * (4.0 * 196.0 * 196.0 * d + 2.0 * 196.0 * d * 28.0)
        + 4.0 * n * d * mlp;
    // Neck: 1x1 conv 768->256, 3x3 conv 256->256; then 3x3/2 convs 256->512 on 32x32 and
    // 512->896 on 16x16.
    let neck = 2.0 * n * d * 256.0 + 2.0 * n * 9.0 * 256.0 * 256.0;
    let down = 2.0 * 1024.0 * 9.0 * 256.0 * 512.0 + 2.0 * 256.0 * 9.0 * 512.0 * 896.0;
    let sam = patch_embed + 4.0 * global + 8.0 * windowed + neck + down;
    exact(vision[0].1, sam);
    // FlopCounterMode on transformers 5.17's sam_encoder (H200, bf16): 976,607,182,848.
    exact(vision[0].1, 976_607_182_848.0);

    // Encoder: 256 SAM features + 256 queries = 512 tokens, 24 layers of h 896, 14 heads of 64,
    // 2 KV heads, SwiGLU 4864; dense 512x512 attention (explicit mask).
    let (t, he) = (512.0, 896.0);
    let enc_layer = t * (4.0 * he * 14.0 * 64.0 + 4.0 * he * 2.0 * 64.0 + 6.0 * he * 4864.0)
        + 4.0 * 14.0 * 64.0 * t * t;
    exact(vision[1].1, 24.0 * enc_layer);
    // FlopCounterMode of vision_tower minus sam_encoder: 388,963,008,512, i.e. this plus the
    // 32,768 FLOPs of the rotary-frequency matmul (2·32·512), which is not counted.
    exact(vision[1].1 + 2.0 * 32.0 * 512.0, 388_963_008_512.0);
    // Projector: Linear(896, 1280) on the 256 queries.
    exact(vision[2].1, 2.0 * 256.0 * 896.0 * 1280.0);

    // Vision parameters: transformers' numel() of vision_tower (453,235,840) + projector
    // (1,148,160) + view_separator (1,280); with the LM and its embedding, gpu-host.md's 3.39B.
    exact(
        m.vision_params().unwrap(),
        453_235_840.0 + 1_148_160.0 + 1_280.0,
    );
    exact(
        m.vision_params().unwrap() + m.params().0 + m.embedding_params(),
        3_389_119_360.0,
    );
    let conv = m.conventions();
    assert!(conv.iter().any(|s| s.contains("1024x1024 view")));
    assert!(conv.iter().any(|s| s.contains("dense")));
}

#[test]
fn deepseek_ocr2_768_views_use_144_queries() {
    let mut v: Value = serde_json::from_str(DEEPSEEK_OCR2).unwrap();
    v["vision_config"]["sam_config"]["image_size"] = json!(768);
    let m = Model::from_config(&v).unwrap();
    // 768/16 = 48 -> 24 -> 12: 144 features, 144 queries, 145 LM tokens.
    assert_eq!(m.image_tokens_per_image(), Some(145));
    // Encoder sees 288 tokens.
    let t = 288.0;
    let he = 896.0;
    let enc_layer = t * (4.0 * he * 14.0 * 64.0 + 4.0 * he * 2.0 * 64.0 + 6.0 * he * 4864.0)
        + 4.0 * 14.0 * 64.0 * t * t;
    exact(m.vision_flops().unwrap()[1].1, 24.0 * enc_layer);
}

#[test]
fn deepseek_ocr2_absent_vision_fields_take_class_defaults_and_say_so() {
    let mut v: Value = serde_json::from_str(DEEPSEEK_OCR2).unwrap();
    v["vision_config"]
        .as_object_mut()
        .unwrap()
        .remove("sam_config");
    let m = Model::from_config(&v).unwrap();
    // SAM-B defaults are the same shape: same FLOPs.
    exact(m.vision_flops().unwrap()[0].1, 976_607_182_848.0);
    assert!(m
        .conventions()
        .iter()
        .any(|s| s.contains("sam_config is absent")));
    // No text_config: the decoder cannot be guessed.
    v.as_object_mut().unwrap().remove("text_config");
    assert_eq!(
        Model::from_config(&v).unwrap_err(),
        ModelError::MissingField {
            model_type: "deepseek_ocr2".into(),
            field: "text_config".into()
        }
    );
}

#[test]
fn deepseek_ocr2_text_needs_mlp_layer_types() {
    let mut v: Value = serde_json::from_str(DEEPSEEK_OCR2).unwrap();
    v["text_config"]
        .as_object_mut()
        .unwrap()
        .remove("mlp_layer_types");
    assert_eq!(
        Model::from_config(&v).unwrap_err(),
        ModelError::MissingField {
            model_type: "deepseek_ocr2".into(),
            field: "text_config.mlp_layer_types".into()
        }
    );
    v["text_config"]["mlp_layer_types"] = json!(["dense", "sparse"]);
    assert!(matches!(
        Model::from_config(&v),
        Err(ModelError::InvalidField { .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// Cross-check against FlopCounterMode (torch 2.11, transformers 5.17, H200, bf16, eager
// attention, eager experts; small-layer variants of the configs above). FlopCounterMode counts
// the full s² attention scores (mask ignored), the rotary-frequency matmul 2·(d_rope/2) per
// token, and, for MLA, transformers' re-expansion of cached latents: each is added here.
// ---------------------------------------------------------------------------------------------

#[test]
fn matches_flop_counter_mode() {
    let rope = |half: f64, tokens: f64| 2.0 * half * tokens;

    // Qwen2.5-0.5B fixture: decode at c = 513, prefill of 512 with all logits.
    let m = model(QWEN2_05B);
    exact(m.decode_step_flops(513) + rope(32.0, 1.0), 1_032_048_704.0);
    let full_minus_causal = 86_016.0 * (512.0 * 512.0 - 512.0 * 513.0 / 2.0);
    exact(
        m.prefill_flops(512, 512) + full_minus_causal + rope(32.0, 512.0),
        528_364_896_256.0,
    );
    exact(
        m.prefill_flops(512, 1) + full_minus_causal + rope(32.0, 512.0),
        389_235_277_824.0,
    );

    // GPT-2 (no rotary): decode at c = 65.
    exact(model(GPT2).decode_step_flops(65), 249_460_224.0);

    // Qwen3-0.6B: decode at c = 101.
    exact(
        model(QWEN3_06B).decode_step_flops(101) + rope(64.0, 1.0),
        1_215_135_872.0,
    );

    // Qwen1.5-MoE with 4 layers, layer 1 dense (mlp_only_layers): decode at c = 33.
    let small = edit(QWEN15_MOE_A27B, "num_hidden_layers", json!(4));
    let mut small_obj = small.clone();
    small_obj["mlp_only_layers"] = json!([1]);
    let m = Model::from_config(&small_obj).unwrap();
    exact(m.decode_step_flops(33) + rope(64.0, 1.0), 1_242_820_736.0);

    // Qwen3-30B-A3B with 2 layers and decoder_sparse_step 2 (layer 0 dense): decode at c = 33.
    let mut q3 = edit(QWEN3_30B_A3B, "num_hidden_layers", json!(2));
    q3["decoder_sparse_step"] = json!(2);
    let m = Model::from_config(&q3).unwrap();
    exact(m.decode_step_flops(33) + rope(64.0, 1.0), 850_428_032.0);

    // Mixtral with 2 layers: decode at c = 33.
    let m = Model::from_config(&edit(MIXTRAL_8X7B, "num_hidden_layers", json!(2))).unwrap();
    exact(m.decode_step_flops(33) + rope(64.0, 1.0), 1_840_414_848.0);

    // DeepSeek-V2-Lite with 3 layers: decode at c = 41 (+ latent re-expansion), prefill of 40.
    let m = Model::from_config(&edit(DEEPSEEK_V2_LITE, "num_hidden_layers", json!(3))).unwrap();
    let recompute = m.mla_decode_recompute_flops(41).unwrap();
    exact(
        m.decode_step_flops(41) + recompute + rope(32.0, 1.0),
        1_418_410_048.0,
    );
    let full_minus_causal = 3.0 * 2.0 * 16.0 * 320.0 * (40.0 * 40.0 - 40.0 * 41.0 / 2.0);
    exact(
        m.prefill_flops(40, 40) + full_minus_causal + rope(32.0, 40.0),
        36_602_513_920.0,
    );

    // DeepSeek-V3 with 4 layers (3 dense, 1 MoE; q_lora path): decode at c = 21.
    let m = Model::from_config(&edit(DEEPSEEK_V3, "num_hidden_layers", json!(4))).unwrap();
    let recompute = m.mla_decode_recompute_flops(21).unwrap();
    exact(
        m.decode_step_flops(21) + recompute + rope(32.0, 1.0),
        9_216_000_064.0,
    );

    // DeepSeek-OCR-2's decoder (MHA, head_dim 128): decode at c = 300.
    exact(
        model(DEEPSEEK_OCR2).decode_step_flops(300) + rope(64.0, 1.0),
        1_166_622_848.0,
    );
}

// ---------------------------------------------------------------------------------------------
// Errors and hostile input
// ---------------------------------------------------------------------------------------------

#[test]
fn unknown_and_missing_model_type() {
    let e = err(json!({"model_type": "bert", "hidden_size": 768}));
    assert_eq!(e, ModelError::UnknownModelType("bert".into()));
    assert_eq!(
        e.to_string(),
        "FLOPs unknown for model_type bert; give counted FLOPs"
    );
    assert_eq!(err(json!({})), ModelError::NoModelType);
    assert_eq!(err(json!({"model_type": null})), ModelError::NoModelType);
    assert_eq!(err(json!({"model_type": 7})), ModelError::NoModelType);
    assert_eq!(err(json!({"model_type": ""})), ModelError::NoModelType);
    assert_eq!(err(json!([1, 2])), ModelError::NoModelType);
    assert_eq!(err(json!("llama")), ModelError::NoModelType);
    assert_eq!(err(Value::Null), ModelError::NoModelType);
    assert_eq!(
        ModelError::NoModelType.to_string(),
        "config.json has no model_type; give counted FLOPs"
    );
}

#[test]
fn missing_fields_are_named() {
    let e = err(edit(LLAMA2_7B, "intermediate_size", Value::Null));
    assert_eq!(
        e,
        ModelError::MissingField {
            model_type: "llama".into(),
            field: "intermediate_size".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "config.json lacks `intermediate_size` needed for model_type llama"
    );
    for (config, key) in [
        (LLAMA2_7B, "hidden_size"),
        (LLAMA2_7B, "num_hidden_layers"),
        (LLAMA2_7B, "vocab_size"),
        (MIXTRAL_8X7B, "num_local_experts"),
        (QWEN15_MOE_A27B, "shared_expert_intermediate_size"),
        (QWEN15_MOE_A27B, "moe_intermediate_size"),
        (DEEPSEEK_V2_LITE, "qk_rope_head_dim"),
        (DEEPSEEK_V2_LITE, "first_k_dense_replace"),
        (DEEPSEEK_V3, "num_experts_per_tok"),
        (GPT2, "n_embd"),
    ] {
        match err(edit(config, key, Value::Null)) {
            ModelError::MissingField { field, .. } => assert_eq!(field, key),
            other => panic!("{key}: {other:?}"),
        }
    }
}

#[test]
fn garbage_values_are_errors_not_panics() {
    let bad_values = [
        json!("4096"),
        json!(-1),
        json!(-1.5),
        json!(0.5),
        json!(1e300),
        json!(u64::MAX),
        json!(1u64 << 40),
        json!(true),
        json!([4096]),
        json!({"a": 1}),
    ];
    let keys = [
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "intermediate_size",
        "vocab_size",
    ];
    for key in keys {
        for bad in &bad_values {
            match err(edit(LLAMA2_7B, key, bad.clone())) {
                ModelError::InvalidField { field, .. } => assert_eq!(field, key),
                other => panic!("{key} = {bad}: {other:?}"),
            }
        }
    }
    // Zero where at least one is needed, and inconsistent shapes.
    for (key, value) in [
        ("hidden_size", json!(0)),
        ("num_attention_heads", json!(0)),
        ("num_key_value_heads", json!(0)),
        ("num_key_value_heads", json!(5)),
        ("num_attention_heads", json!(8192)),
    ] {
        assert!(
            matches!(
                err(edit(LLAMA2_7B, key, value.clone())),
                ModelError::InvalidField { .. }
            ),
            "{key} = {value}"
        );
    }
    assert!(matches!(
        err(edit(MIXTRAL_8X7B, "num_experts_per_tok", json!(9))),
        ModelError::InvalidField { .. }
    ));
    assert!(matches!(
        err(edit(QWEN15_MOE_A27B, "mlp_only_layers", json!(["a"]))),
        ModelError::InvalidField { .. }
    ));
    assert!(matches!(
        err(edit(QWEN15_MOE_A27B, "decoder_sparse_step", json!(0))),
        ModelError::InvalidField { .. }
    ));
    assert!(matches!(
        err(edit(LLAMA2_7B, "tie_word_embeddings", json!("yes"))),
        ModelError::InvalidField { .. }
    ));
    assert!(matches!(
        err(edit(DEEPSEEK_OCR2, "text_config", json!("x"))),
        ModelError::InvalidField { .. }
    ));
    // Integral floats are fine (Python sometimes writes 4096.0).
    let m = Model::from_config(&edit(LLAMA2_7B, "hidden_size", json!(4096.0))).unwrap();
    assert_eq!(m.hidden_size(), 4096);
    // An unknown dtype is not fatal: bf16 is assumed and said.
    let m = Model::from_config(&edit(LLAMA2_7B, "torch_dtype", json!("auto"))).unwrap();
    assert_eq!(m.dtype_bytes(), 2.0);
    assert!(m.conventions().iter().any(|s| s.contains("\"auto\"")));
    assert!(Model::from_config(&edit(LLAMA2_7B, "torch_dtype", json!(3))).is_ok());
    assert!(model(LLAMA2_7B).with_dtype("int3").is_err());
    assert_eq!(
        model(LLAMA2_7B)
            .with_dtype("float32")
            .unwrap()
            .dtype_bytes(),
        4.0
    );
}

#[test]
fn every_known_type_with_an_empty_or_hostile_body_errors() {
    let types = [
        "llama",
        "mistral",
        "qwen2",
        "qwen3",
        "qwen2_moe",
        "qwen3_moe",
        "mixtral",
        "deepseek_v2",
        "deepseek_v3",
        "deepseek_ocr2",
        "gpt2",
    ];
    let hostile = [
        json!(null),
        json!("x"),
        json!(-3),
        json!(1e308),
        json!([]),
        json!({}),
    ];
    for t in types {
        assert!(
            err(json!({ "model_type": t })).to_string().contains(t),
            "{t}"
        );
        let keys = [
            "hidden_size",
            "n_embd",
            "text_config",
            "vision_config",
            "num_hidden_layers",
            "n_layer",
            "num_attention_heads",
            "n_head",
            "vocab_size",
        ];
        for h in &hostile {
            let mut obj = serde_json::Map::new();
            obj.insert("model_type".into(), json!(t));
            for k in keys {
                obj.insert(k.into(), h.clone());
            }
            assert!(Model::from_config(&Value::Object(obj)).is_err(), "{t} {h}");
        }
    }
}

#[test]
fn extreme_but_valid_shapes_give_finite_numbers() {
    // Every dimension at the accepted maximum (2^24): products stay finite, nothing panics.
    let big = 1u64 << 24;
    let m = Model::from_config(&json!({
        "model_type": "deepseek_v3", "hidden_size": big, "num_hidden_layers": big,
        "num_attention_heads": big, "q_lora_rank": big, "kv_lora_rank": big,
        "qk_nope_head_dim": big, "qk_rope_head_dim": big, "v_head_dim": big,
        "n_routed_experts": big, "num_experts_per_tok": big, "n_shared_experts": big,
        "moe_intermediate_size": big, "first_k_dense_replace": 0, "moe_layer_freq": big,
        "intermediate_size": big, "vocab_size": big
    }))
    .unwrap();
    for x in [
        m.decode_step_flops(u64::MAX),
        m.prefill_flops(u64::MAX, u64::MAX),
        m.decode_step_bytes(u64::MAX, u64::MAX),
        m.prefill_bytes(u64::MAX, u64::MAX),
        m.params().0,
        m.kv_bytes_per_token(),
        m.mla_decode_recompute_flops(u64::MAX).unwrap(),
    ] {
        assert!(x.is_finite() && x > 0.0, "{x}");
    }
    // moe_layer_freq 2^24 over 2^24 layers from 0: only layer 0 is MoE.
    assert!(m.is_moe());
    // Vision with a tiny image and window 0 (all global).
    let mut v: Value = serde_json::from_str(DEEPSEEK_OCR2).unwrap();
    v["vision_config"]["sam_config"]["image_size"] = json!([16, 32]);
    v["vision_config"]["sam_config"]["window_size"] = json!(0);
    let m = Model::from_config(&v).unwrap();
    assert!(m
        .vision_flops()
        .unwrap()
        .iter()
        .all(|(_, f)| f.is_finite() && *f > 0.0));
    assert!(m.vision_params().unwrap() > 0.0);
    v["vision_config"]["sam_config"]["patch_size"] = json!(64);
    assert!(Model::from_config(&v).is_err());
    // Every SAM/encoder dimension at the maximum.
    let mut v: Value = serde_json::from_str(DEEPSEEK_OCR2).unwrap();
    for key in [
        "hidden_size",
        "num_channels",
        "image_size",
        "patch_size",
        "window_size",
        "num_hidden_layers",
        "num_attention_heads",
        "mlp_dim",
        "output_channels",
    ] {
        v["vision_config"]["sam_config"][key] = json!(big);
    }
    v["vision_config"]["sam_config"]["downsample_channels"] = json!([big, big]);
    v["vision_config"]["sam_config"]["global_attn_indexes"] = json!([0, big, big + 1, -1]);
    assert!(Model::from_config(&v).is_err()); // a negative layer index
    v["vision_config"]["sam_config"]["global_attn_indexes"] = json!([0, big]);
    for key in [
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "intermediate_size",
        "head_dim",
    ] {
        v["vision_config"]["encoder_config"][key] = json!(big);
    }
    let m = Model::from_config(&v).unwrap();
    assert!(m
        .vision_flops()
        .unwrap()
        .iter()
        .all(|(_, f)| f.is_finite() && *f > 0.0));
    assert!(m.vision_params().unwrap().is_finite());
}

#[test]
fn nested_text_config_is_read() {
    let wrapped = json!({
        "model_type": "llava",
        "text_config": serde_json::from_str::<Value>(LLAMA2_7B).unwrap(),
        "vision_config": {"model_type": "clip_vision_model"}
    });
    let m = Model::from_config(&wrapped).unwrap();
    assert_eq!(m.model_type(), "llava");
    assert_eq!(m.lm_model_type(), "llama");
    exact(m.params().0, 6_607_343_616.0);
    assert_eq!(m.vision_flops(), None);
    assert_eq!(m.image_tokens_per_image(), None);
    assert!(m.conventions().iter().any(|s| s.contains("text_config")));
    // Errors inside the nested config name its path.
    let mut broken = wrapped.clone();
    broken["text_config"]
        .as_object_mut()
        .unwrap()
        .remove("vocab_size");
    assert_eq!(
        Model::from_config(&broken).unwrap_err(),
        ModelError::MissingField {
            model_type: "llama".into(),
            field: "text_config.vocab_size".into()
        }
    );
    // DeepSeek-OCR (v1, remote code): `deepseek_vl_v2` with a `language_config` without MLA.
    let ocr1 = json!({
        "model_type": "deepseek_vl_v2",
        "language_config": serde_json::from_str::<Value>(DEEPSEEK_OCR_DECODER).unwrap(),
    });
    let m = Model::from_config(&ocr1).unwrap();
    assert_eq!(m.lm_model_type(), "deepseek_v2");
    exact(m.decode_step_flops(0), 1_148_190_720.0);
    // A wrapper around an unknown LM is unknown under its own name.
    assert_eq!(
        err(json!({"model_type": "llava", "text_config": {"model_type": "bert"}})),
        ModelError::UnknownModelType("llava".into())
    );
}

#[test]
fn conventions_state_the_choices() {
    let c = model(QWEN2_05B).conventions().join("\n");
    for needle in [
        "s(s+1)/2",
        "lm_head",
        "input",
        "KV cache",
        "bf16",
        "2 per multiply-add",
    ] {
        assert!(c.contains(needle), "{needle}");
    }
    let c = model(MIXTRAL_8X7B).conventions().join("\n");
    assert!(c.contains("E·(1 − (1 − k/E)^tokens)"));
    assert!(c.contains("32 of 32 layers are MoE"));
    let sliding = edit(MIXTRAL_8X7B, "sliding_window", json!(4096));
    let c = Model::from_config(&sliding)
        .unwrap()
        .conventions()
        .join("\n");
    assert!(c.contains("sliding-window"));
}

/// Every field of every test config, replaced by each hostile value: `from_config` returns
/// (an error or a model) without panicking, and every number of a model it accepts is finite
/// and non-negative.
#[test]
fn no_field_replacement_panics() {
    let hostile = [
        Value::Null,
        json!("1"),
        json!(-1),
        json!(0),
        json!(1),
        json!(3),
        json!(0.5),
        json!(1e308),
        json!(-1e308),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(1u64 << 24),
        json!(true),
        json!([]),
        json!([1, 2]),
        json!(["dense"]),
        json!({}),
    ];
    fn check(v: &Value) {
        let Ok(m) = Model::from_config(v) else {
            return;
        };
        let mut numbers = vec![
            m.decode_step_flops(0),
            m.decode_step_flops(1 << 20),
            m.prefill_flops(4096, 1),
            m.prefill_flops(u64::MAX, u64::MAX),
            m.decode_step_bytes(1, 1),
            m.decode_step_bytes(64, 1 << 20),
            m.prefill_bytes(8, 4096),
            m.kv_bytes_per_token(),
            m.params().0,
            m.params().1,
            m.embedding_params(),
            m.dtype_bytes(),
        ];
        numbers.extend(m.vision_flops().unwrap_or_default().iter().map(|(_, f)| *f));
        numbers.extend(m.vision_params());
        numbers.extend(m.mla_decode_recompute_flops(100));
        numbers.extend(m.expected_experts_per_layer(7));
        for x in numbers {
            assert!(x.is_finite() && x >= 0.0, "{x} from {v}");
        }
        assert!(!m.conventions().is_empty());
        let _ = m.image_tokens_per_image();
    }
    let configs = [
        LLAMA2_7B,
        QWEN2_05B,
        DEEPSEEK_OCR_DECODER,
        MIXTRAL_8X7B,
        QWEN15_MOE_A27B,
        DEEPSEEK_V2_LITE,
        DEEPSEEK_V3,
        GPT2,
        QWEN3_06B,
        QWEN3_30B_A3B,
        DEEPSEEK_OCR2,
    ];
    for config in configs {
        let base: Value = serde_json::from_str(config).unwrap();
        // Paths to every leaf and nested object, one level into objects of objects too.
        let mut paths: Vec<Vec<String>> = Vec::new();
        fn walk(v: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
            if let Value::Object(obj) = v {
                for (k, child) in obj {
                    prefix.push(k.clone());
                    out.push(prefix.clone());
                    walk(child, prefix, out);
                    prefix.pop();
                }
            }
        }
        walk(&base, &mut Vec::new(), &mut paths);
        for path in &paths {
            for bad in &hostile {
                let mut v = base.clone();
                let mut slot = &mut v;
                for k in path {
                    slot = &mut slot[k.as_str()];
                }
                *slot = bad.clone();
                check(&v);
            }
        }
    }
}

#[test]
fn invalid_field_messages_read_well() {
    let e = err(edit(LLAMA2_7B, "hidden_size", json!("4096")));
    assert_eq!(
        e.to_string(),
        "config.json field `hidden_size` is unusable for model_type llama: a string, not an integer"
    );
    let e = err(edit(LLAMA2_7B, "num_key_value_heads", json!(5)));
    assert_eq!(
        e.to_string(),
        "config.json field `num_key_value_heads` is unusable for model_type llama: 5 does not \
         divide num_attention_heads 32"
    );
    let mut v: Value = serde_json::from_str(DEEPSEEK_OCR2).unwrap();
    v["vision_config"]["encoder_config"]["hidden_size"] = json!(-1);
    assert_eq!(
        Model::from_config(&v).unwrap_err().to_string(),
        "config.json field `vision_config.encoder_config.hidden_size` is unusable for model_type \
         deepseek_ocr2: negative"
    );
}
