//! DeepSeek-OCR-2's vision side (transformers 5.17 `deepseek_ocr2`): SAM ViT-B with its neck and
//! two stride-2 convolutions, a Qwen2-style encoder over the SAM features followed by learned
//! queries, and a linear projector into the LM.
//!
//! Shapes follow `modeling_deepseek_ocr2.py` for one view of `image_size` (1024x1024 by default):
//! - SAM: a 16x16/16 patch conv gives a 64x64 grid of width 768; 12 blocks, of which
//!   `global_attn_indexes` (2, 5, 8, 11) attend globally over all 4096 positions and the others
//!   over 14x14 windows of the grid padded to 70x70 (25 windows; the padded positions are
//!   computed, so they are counted); decomposed relative-position terms are two einsums per block;
//!   MLP 768 -> 3072 -> 768; neck 1x1 conv to 256 and 3x3 conv; then 3x3 stride-2 convs
//!   256 -> 512 (32x32) -> 896 (16x16).
//! - Encoder: the 256 SAM features followed by 256 learned queries (144 when the SAM grid has at
//!   most 144 cells, i.e. 768px views), 512 tokens, through 24 Qwen2 layers (hidden 896, 14 heads,
//!   2 KV heads, SwiGLU 4864). The mask is bidirectional over the features and causal over the
//!   queries, but it is an explicit mask tensor, so the attention kernels compute all 512x512
//!   scores: counted dense, as FlopCounterMode does.
//! - Projector: `Linear(896, 1280)` on the query outputs only; a learned view separator follows,
//!   so one view contributes queries + 1 = 257 LM tokens.
//!
//! Fields absent from `vision_config` take transformers 5.17's class defaults (SAM-B for
//! `sam_config`; note the encoder class default is a 4096-wide 32-layer model, which real
//! DeepSeek-OCR-2 configs override); each default used is reported.

use super::config::Section;
use super::ModelError;

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Sam {
    hidden: u64,
    layers: u64,
    heads: u64,
    channels: u64,
    image: (u64, u64),
    patch: (u64, u64),
    window: u64,
    global_layers: u64,
    use_rel_pos: bool,
    use_abs_pos: bool,
    qkv_bias: bool,
    mlp_dim: u64,
    out_channels: u64,
    down: (u64, u64),
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Encoder {
    hidden: u64,
    layers: u64,
    heads: u64,
    kv_heads: u64,
    head_dim: u64,
    inter: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Ocr2Vision {
    sam: Sam,
    enc: Encoder,
    text_hidden: u64,
    /// Sentences naming the class defaults used for absent fields.
    pub(super) defaults_used: Vec<String>,
}

/// Reads `vision_config` (absent: all class defaults) of a `deepseek_ocr2` config.
pub(super) fn parse(
    vision: Option<&Section<'_>>,
    text_hidden: u64,
) -> Result<Ocr2Vision, ModelError> {
    let mut defaults = Vec::new();
    let sam_sec = match vision {
        Some(v) => v.sub("sam_config", "deepseek_ocr2")?,
        None => None,
    };
    let enc_sec = match vision {
        Some(v) => v.sub("encoder_config", "deepseek_ocr2")?,
        None => None,
    };
    let sam = parse_sam(sam_sec.as_ref(), &mut defaults)?;
    let enc = parse_encoder(enc_sec.as_ref(), &mut defaults)?;
    if sam.down.1 != enc.hidden {
        let field = "downsample_channels";
        let reason = format!(
            "SAM output width {} differs from the encoder hidden_size {}",
            sam.down.1, enc.hidden
        );
        return Err(match sam_sec.as_ref() {
            Some(s) => s.invalid(field, reason),
            None => ModelError::InvalidField {
                model_type: "deepseek_ocr2".to_owned(),
                field: format!("vision_config.sam_config.{field}"),
                reason,
            },
        });
    }
    Ok(Ocr2Vision {
        sam,
        enc,
        text_hidden,
        defaults_used: defaults,
    })
}

/// Reads `key` from `sec`, or records that the class default was used.
struct Defaults<'s, 'a> {
    sec: Option<&'s Section<'a>>,
    what: &'static str,
    used: Vec<String>,
}

impl Defaults<'_, '_> {
    fn pos(&mut self, key: &str, default: u64) -> Result<u64, ModelError> {
        match self.sec {
            Some(s) => match s.opt_pos(key)? {
                Some(v) => Ok(v),
                None => {
                    self.used.push(format!("{key}={default}"));
                    Ok(default)
                }
            },
            None => Ok(default),
        }
    }

    fn u64(&mut self, key: &str, default: u64) -> Result<u64, ModelError> {
        match self.sec {
            Some(s) => match s.opt_u64(key)? {
                Some(v) => Ok(v),
                None => {
                    self.used.push(format!("{key}={default}"));
                    Ok(default)
                }
            },
            None => Ok(default),
        }
    }

    fn flag(&mut self, key: &str, default: bool) -> Result<bool, ModelError> {
        match self.sec {
            Some(s) => {
                if !s.has(key) {
                    self.used.push(format!("{key}={default}"));
                }
                s.bool_or(key, default)
            }
            None => Ok(default),
        }
    }

    fn finish(self, out: &mut Vec<String>) {
        if self.sec.is_none() {
            out.push(format!(
                "vision_config.{} is absent: transformers 5.17 class defaults used for all of it",
                self.what
            ));
        } else if !self.used.is_empty() {
            out.push(format!(
                "vision_config.{} lacks {}: transformers 5.17 class defaults used",
                self.what,
                self.used.join(", ")
            ));
        }
    }
}

fn parse_sam(sec: Option<&Section<'_>>, out: &mut Vec<String>) -> Result<Sam, ModelError> {
    let mut d = Defaults {
        sec,
        what: "sam_config",
        used: Vec::new(),
    };
    let hidden = d.pos("hidden_size", 768)?;
    let layers = d.pos("num_hidden_layers", 12)?;
    let heads = d.pos("num_attention_heads", 12)?;
    let channels = d.pos("num_channels", 3)?;
    let window = d.u64("window_size", 14)?;
    let out_channels = d.pos("output_channels", 256)?;
    let use_rel_pos = d.flag("use_rel_pos", true)?;
    let use_abs_pos = d.flag("use_abs_pos", true)?;
    let qkv_bias = d.flag("qkv_bias", true)?;
    let (image, patch, global, mlp_dim, down) = match sec {
        None => (
            (1024, 1024),
            (16, 16),
            vec![2, 5, 8, 11],
            4 * hidden,
            (512, 896),
        ),
        Some(s) => {
            let image = s.pair_or("image_size", 1024)?;
            let patch = s.pair_or("patch_size", 16)?;
            if image.0 < patch.0 || image.1 < patch.1 {
                return Err(s.invalid("patch_size", "larger than image_size"));
            }
            let global = match s.opt_u64_list("global_attn_indexes")? {
                Some(g) => g,
                None => {
                    d.used.push("global_attn_indexes=[2, 5, 8, 11]".to_owned());
                    vec![2, 5, 8, 11]
                }
            };
            let mlp_dim = match s.opt_pos("mlp_dim")? {
                Some(m) => m,
                None => {
                    // transformers: int(hidden_size * mlp_ratio), mlp_ratio default 4.0.
                    let ratio = s.opt_positive_f64("mlp_ratio")?.unwrap_or(4.0);
                    let m = (hidden as f64 * ratio).floor();
                    if !(1.0..=super::config::MAX_DIM as f64).contains(&m) {
                        return Err(s.invalid("mlp_ratio", "giving an MLP width out of range"));
                    }
                    m as u64
                }
            };
            let down = match s.opt_u64_list("downsample_channels")? {
                Some(list) => match list.as_slice() {
                    [a, b, ..] if *a > 0 && *b > 0 => (*a, *b),
                    _ => return Err(s.invalid("downsample_channels", "not two positive widths")),
                },
                None => (512, 896),
            };
            (image, patch, global, mlp_dim, down)
        }
    };
    if hidden % heads != 0 {
        let reason = format!("{heads} heads do not divide hidden_size {hidden}");
        return Err(match sec {
            Some(s) => s.invalid("num_attention_heads", reason),
            None => ModelError::InvalidField {
                model_type: "deepseek_ocr2".to_owned(),
                field: "vision_config.sam_config.num_attention_heads".to_owned(),
                reason,
            },
        });
    }
    let mut global: Vec<u64> = global.into_iter().filter(|&i| i < layers).collect();
    global.sort_unstable();
    global.dedup();
    d.finish(out);
    Ok(Sam {
        hidden,
        layers,
        heads,
        channels,
        image,
        patch,
        window,
        global_layers: global.len() as u64,
        use_rel_pos,
        use_abs_pos,
        qkv_bias,
        mlp_dim,
        out_channels,
        down,
    })
}

fn parse_encoder(sec: Option<&Section<'_>>, out: &mut Vec<String>) -> Result<Encoder, ModelError> {
    let mut d = Defaults {
        sec,
        what: "encoder_config",
        used: Vec::new(),
    };
    let hidden = d.pos("hidden_size", 4096)?;
    let layers = d.pos("num_hidden_layers", 32)?;
    let heads = d.pos("num_attention_heads", 32)?;
    let inter = d.pos("intermediate_size", 22016)?;
    let (kv_heads, head_dim) = match sec {
        None => (heads, hidden / heads),
        Some(s) => {
            let kv = s.pos_or("num_key_value_heads", heads)?;
            if kv > heads || heads % kv != 0 {
                return Err(s.invalid(
                    "num_key_value_heads",
                    format!("{kv} does not divide num_attention_heads {heads}"),
                ));
            }
            let hd = match s.opt_pos("head_dim")? {
                Some(hd) => hd,
                None if hidden / heads > 0 => hidden / heads,
                None => return Err(s.invalid("num_attention_heads", "more heads than hidden_size")),
            };
            (kv, hd)
        }
    };
    d.finish(out);
    Ok(Encoder {
        hidden,
        layers,
        heads,
        kv_heads,
        head_dim,
        inter,
    })
}

/// Output side of a 3x3, stride-2, padding-1 convolution.
fn stride2(n: u64) -> u64 {
    (n.saturating_sub(1)) / 2 + 1
}

impl Ocr2Vision {
    /// The SAM grid for the configured view (positions per side).
    fn grid(&self) -> (u64, u64) {
        let s = &self.sam;
        (s.image.0 / s.patch.0, s.image.1 / s.patch.1)
    }

    /// SAM output cells after the two stride-2 convs (= encoder feature tokens).
    fn features(&self) -> u64 {
        let (gh, gw) = self.grid();
        stride2(stride2(gh)) * stride2(stride2(gw))
    }

    /// Learned queries: 144 (12x12, 768px views) when the features fit, else 256 (16x16).
    fn queries(&self) -> u64 {
        if self.features() <= 144 {
            144
        } else {
            256
        }
    }

    /// LM tokens for one view: the query outputs plus the view separator.
    pub(super) fn image_tokens(&self) -> u64 {
        self.queries() + 1
    }

    fn sam_flops(&self) -> f64 {
        let s = &self.sam;
        let (gh, gw) = self.grid();
        let d = s.hidden as f64;
        let n = (gh * gw) as f64;
        let patch = s.channels as f64 * s.patch.0 as f64 * s.patch.1 as f64;
        let patch_embed = 2.0 * n * d * patch;

        // Windowed blocks work on the grid padded up to whole windows.
        let windowed_layers = if s.window == 0 {
            0
        } else {
            s.layers.saturating_sub(s.global_layers)
        };
        let global_layers = s.layers - windowed_layers;
        let mlp = 4.0 * n * d * s.mlp_dim as f64;
        // qkv (d -> 3d) and proj (d -> d): 8·tokens·d².
        let linear = |tokens: f64| 8.0 * tokens * d * d;
        // Per block of qh x qw positions: QK^T and AV over all heads, 4·S²·d; decomposed
        // relative positions, two einsums: 2·S·d·(qh + qw).
        let core = |qh: f64, qw: f64| {
            let seq = qh * qw;
            let rel = if s.use_rel_pos {
                2.0 * seq * d * (qh + qw)
            } else {
                0.0
            };
            4.0 * seq * seq * d + rel
        };
        let global = linear(n) + core(gh as f64, gw as f64) + mlp;
        let windowed = if s.window == 0 {
            0.0
        } else {
            let w = s.window;
            let (nh, nw) = (gh.div_ceil(w), gw.div_ceil(w));
            let padded = (nh * nw * w * w) as f64;
            linear(padded) + (nh * nw) as f64 * core(w as f64, w as f64) + mlp
        };
        let o = s.out_channels as f64;
        let neck = 2.0 * n * d * o + 18.0 * n * o * o;
        let (g1h, g1w) = (stride2(gh), stride2(gw));
        let (g2h, g2w) = (stride2(g1h), stride2(g1w));
        let (c1, c2) = (s.down.0 as f64, s.down.1 as f64);
        let downsample = 18.0 * (g1h * g1w) as f64 * o * c1 + 18.0 * (g2h * g2w) as f64 * c1 * c2;
        patch_embed
            + global_layers as f64 * global
            + windowed_layers as f64 * windowed
            + neck
            + downsample
    }

    fn encoder_flops(&self) -> f64 {
        let e = &self.enc;
        let t = (self.features() + self.queries()) as f64;
        let h = e.hidden as f64;
        let q = (e.heads * e.head_dim) as f64;
        let kv = (e.kv_heads * e.head_dim) as f64;
        let proj = 4.0 * h * q + 4.0 * h * kv;
        let mlp = 6.0 * h * e.inter as f64;
        let attn = 4.0 * q * t * t;
        e.layers as f64 * (t * (proj + mlp) + attn)
    }

    fn projector_flops(&self) -> f64 {
        2.0 * self.queries() as f64 * self.enc.hidden as f64 * self.text_hidden as f64
    }

    /// FLOPs for one view, per sub-stage.
    pub(super) fn flops(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("sam", self.sam_flops()),
            ("vision_encoder", self.encoder_flops()),
            ("projector", self.projector_flops()),
        ]
    }

    /// Parameters of the vision tower, projector and view separator (as `numel()` counts them).
    pub(super) fn params(&self) -> f64 {
        let s = &self.sam;
        let d = s.hidden as f64;
        let (gh, gw) = self.grid();
        let head = (s.hidden / s.heads.max(1)) as f64;
        let patch = s.channels as f64 * s.patch.0 as f64 * s.patch.1 as f64 * d + d;
        let pos = if s.use_abs_pos {
            (gh * gw) as f64 * d
        } else {
            0.0
        };
        let qkv_bias = if s.qkv_bias { 3.0 * d } else { 0.0 };
        let block = 4.0 * d // two LayerNorms
            + 3.0 * d * d + qkv_bias + d * d + d // qkv, proj
            + 2.0 * d * s.mlp_dim as f64 + s.mlp_dim as f64 + d; // lin1, lin2
        let rel = |side_h: u64, side_w: u64| {
            if s.use_rel_pos {
                ((2 * side_h).saturating_sub(1) + (2 * side_w).saturating_sub(1)) as f64 * head
            } else {
                0.0
            }
        };
        let windowed_layers = if s.window == 0 {
            0
        } else {
            s.layers.saturating_sub(s.global_layers)
        };
        let global_layers = s.layers - windowed_layers;
        let blocks = s.layers as f64 * block
            + global_layers as f64 * rel(gh, gw)
            + windowed_layers as f64 * rel(s.window, s.window);
        let o = s.out_channels as f64;
        let neck = d * o + 2.0 * o + 9.0 * o * o + 2.0 * o;
        let (c1, c2) = (s.down.0 as f64, s.down.1 as f64);
        let downsample = 9.0 * o * c1 + 9.0 * c1 * c2;
        let sam = patch + pos + blocks + neck + downsample;

        let e = &self.enc;
        let h = e.hidden as f64;
        let q = (e.heads * e.head_dim) as f64;
        let kv = (e.kv_heads * e.head_dim) as f64;
        let layer = h * q + q + 2.0 * (h * kv + kv) + q * h + 3.0 * h * e.inter as f64 + 2.0 * h;
        let queries = (144.0 + 256.0) * h;
        let encoder = e.layers as f64 * layer + h + queries;

        let t = self.text_hidden as f64;
        let projector = h * t + t + t; // Linear with bias, view separator
        sam + encoder + projector
    }

    /// Sentences describing the vision FLOPs conventions.
    pub(super) fn conventions(&self) -> Vec<String> {
        let (gh, gw) = self.grid();
        let s = &self.sam;
        let mut out = vec![format!(
            "Vision FLOPs are for one {}x{} view (no local crops): SAM (patch conv, {} blocks of \
             which {} global and the rest over {}x{} windows of the {}x{} grid padded to whole windows, \
             padded positions counted; decomposed relative-position einsums; neck and stride-2 \
             convs), the vision encoder over {} SAM features plus {} learned queries, and the \
             projector on the queries; matmuls and convolutions only, 2 per multiply-add, as \
             FlopCounterMode counts them.",
            s.image.0,
            s.image.1,
            s.layers,
            s.global_layers.min(s.layers),
            s.window,
            s.window,
            gh,
            gw,
            self.features(),
            self.queries()
        )];
        out.push(
            "The vision encoder's mask (bidirectional over features, causal over queries) is an \
             explicit mask tensor, so its attention is counted dense over all token pairs, as the \
             kernels compute it."
                .to_owned(),
        );
        out.push(format!(
            "One view contributes {} LM tokens ({} queries + 1 view separator); local crops are 768px \
             views of 144 queries each and are not included in the per-image figures.",
            self.image_tokens(),
            self.queries()
        ));
        out.extend(self.defaults_used.iter().cloned());
        out
    }
}
