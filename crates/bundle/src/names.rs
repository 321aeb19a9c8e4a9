//! Kernel names: the short form, the category, and the key that matches the same kernel across
//! tools that print its name differently.
//!
//! Nsight Systems prints `void at::native::vectorized_elementwise_kernel<(int)4, ...>(int, T2, T3)`,
//! Nsight Compute the same kernel as `void vectorized_elementwise_kernel<4, ...>(int, T2, T3)`
//! (namespaces and integer casts dropped, sometimes only partly), and the PyTorch profiler as
//! `... std::array<char*, 2ul> >(...)`. [`match_key`] reduces all of them to the same string,
//! and [`display_name`] gives a short but distinguishing form for tables.
//!
//! These live in the bundle crate because ingest, the site and the WASM viewer all need them.

use crate::Category;

/// The bare function name of a demangled kernel name, as Nsight Systems' `shortName` column:
/// `void at::native::reduce_kernel<(int)512, ...>(T3)` → `reduce_kernel`.
///
/// Names without a parameter list (e.g. `nvjet_sm90_tst_64x8_...`) are returned whole.
pub fn short_name(demangled: &str) -> String {
    let Some(params) = last_top_level_paren(demangled) else {
        return demangled.trim().to_string();
    };
    let mut head = demangled[..params].trim_end();
    // Drop a trailing template argument list.
    if head.ends_with('>') {
        if let Some(open) = matching_open_angle(head) {
            head = head[..open].trim_end();
        }
    }
    // The last depth-0 token after whitespace is the (qualified) function name.
    let name = last_top_level_token(head);
    let bare = name.rsplit("::").next().unwrap_or(name);
    if bare.is_empty() {
        demangled.trim().to_string()
    } else {
        bare.to_string()
    }
}

/// A readable name that still tells template instances apart: the function name with its
/// template arguments, namespaces and integer casts removed, no return type and no parameter
/// list. `void at::native::elementwise_kernel<(int)128, (int)4, void
/// at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<c10::BFloat16, ...>>(...)` →
/// `elementwise_kernel<128, 4, gpu_kernel_impl_nocast<BinaryFunctor<BFloat16, ...>>`.
pub fn display_name(demangled: &str) -> String {
    let short = short_name(demangled);
    let Some(params) = last_top_level_paren(demangled) else {
        return short;
    };
    let head = demangled[..params].trim_end();
    if !head.ends_with('>') {
        return short;
    }
    let Some(open) = matching_open_angle(head) else {
        return short;
    };
    format!("{short}{}", simplify(&head[open..]))
}

/// [`display_name`] cut to at most `max` characters (with `…`), for titles and sentences.
pub fn display_name_short(demangled: &str, max: usize) -> String {
    let d = display_name(demangled);
    if d.chars().count() <= max {
        return d;
    }
    let mut out: String = d.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Drops namespace qualifiers, anonymous-namespace markers, `void ` return types inside
/// template arguments and integer casts.
fn simplify(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'(' {
            if let Some(end) = cast_end(bytes, i) {
                i = end;
                continue;
            }
            if s[i..].starts_with("(anonymous namespace)::") {
                i += "(anonymous namespace)::".len();
                continue;
            }
        }
        if s[i..].starts_with("<unnamed>::") {
            i += "<unnamed>::".len();
            continue;
        }
        if b.is_ascii_alphabetic() || b == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let word = &s[start..i];
            if bytes.get(i..i + 2) == Some(b"::") && bytes.get(i + 2) != Some(&b'[') {
                i += 2;
                continue;
            }
            if word == "void" && bytes.get(i) == Some(&b' ') {
                i += 1;
                continue;
            }
            out.push_str(word);
            continue;
        }
        // `char *` -> `char*` keeps names short without merging tokens.
        if b == b' ' && bytes.get(i + 1) == Some(&b'*') {
            i += 1;
            continue;
        }
        let ch = s[i..].chars().next().unwrap_or(' ');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// Byte index of the `(` that opens the last top-level (depth 0) parenthesised group, when the
/// name ends with it.
fn last_top_level_paren(s: &str) -> Option<usize> {
    if !s.trim_end().ends_with(')') {
        return None;
    }
    let bytes = s.as_bytes();
    let mut depth_paren = 0i32;
    let mut depth_angle = 0i32;
    let mut open_at = None;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'<' => depth_angle += 1,
            b'>' => depth_angle -= 1,
            b'(' => {
                if depth_paren == 0 && depth_angle == 0 {
                    open_at = Some(i);
                }
                depth_paren += 1;
            }
            b')' => depth_paren -= 1,
            _ => {}
        }
    }
    if depth_paren != 0 || depth_angle != 0 {
        return None;
    }
    open_at
}

/// Byte index of the `<` matching the `>` that ends `s`.
fn matching_open_angle(s: &str) -> Option<usize> {
    let mut depth = 0i32;
    for (i, b) in s.bytes().enumerate().rev() {
        match b {
            b'>' => depth += 1,
            b'<' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The last whitespace-separated token of `s` that is not inside `<>` or `()`.
fn last_top_level_token(s: &str) -> &str {
    let mut depth = 0i32;
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        match b {
            b'<' | b'(' => depth += 1,
            b'>' | b')' => depth -= 1,
            b' ' if depth == 0 => start = i + 1,
            _ => {}
        }
    }
    &s[start..]
}

/// A key under which the same kernel matches across nsys, ncu and the PyTorch profiler.
///
/// The identifier and number tokens of the name, in order, without namespace qualifiers
/// (`at::native::`), C-style integer casts (`(int)4` → `4`), integer suffixes (`2ul` → `2`)
/// and the anonymous-namespace markers (`<unnamed>`, `(anonymous namespace)`).
pub fn match_key(name: &str) -> String {
    let bytes = name.as_bytes();
    let mut out = String::with_capacity(name.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'(' {
            // Skip a cast such as `(int)` or `(unsigned long)` before a number.
            if let Some(end) = cast_end(bytes, i) {
                i = end;
                continue;
            }
            i += 1;
        } else if b.is_ascii_alphabetic() || b == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let tok = &name[start..i];
            let qualifier = bytes.get(i..i + 2) == Some(b"::");
            if qualifier || matches!(tok, "unnamed" | "anonymous" | "namespace") {
                continue;
            }
            push_token(&mut out, tok);
        } else if b.is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let digits = &name[start..i];
            // Integer literal suffixes: 2ul, 16u, 8ll.
            while i < bytes.len() && matches!(bytes[i], b'u' | b'U' | b'l' | b'L') {
                i += 1;
            }
            push_token(&mut out, digits);
        } else {
            i += 1;
        }
    }
    out
}

fn push_token(out: &mut String, tok: &str) {
    if !out.is_empty() {
        out.push(' ');
    }
    out.push_str(tok);
}

/// If `bytes[open]` starts a cast like `(unsigned int)` followed by a (possibly negative)
/// number, the index just after the `)`.
fn cast_end(bytes: &[u8], open: usize) -> Option<usize> {
    let close = open + 1 + bytes[open + 1..].iter().position(|&b| b == b')')?;
    let inner = std::str::from_utf8(&bytes[open + 1..close]).ok()?;
    let is_int_type = !inner.is_empty()
        && inner.split(' ').all(|w| {
            matches!(
                w,
                "bool" | "char" | "short" | "int" | "long" | "unsigned" | "signed" | "__int128"
            )
        });
    let next = bytes.get(close + 1)?;
    let number_follows = next.is_ascii_digit()
        || (*next == b'-' && bytes.get(close + 2).is_some_and(|b| b.is_ascii_digit()));
    (is_int_type && number_follows).then_some(close + 1)
}

/// Substrings of a lowercased kernel name, per category, for [`category`]. One ordered list
/// because the order is the logic: the first rule with a matching substring wins (random
/// number generation before the `norm` of reductions, attention before gemm, gemm's split-K
/// reduction before reductions), so a reader checks a kernel against it top to bottom.
const CATEGORY_RULES: &[(Category, &[&str])] = &[
    // Random number generation (`normal_distribution`) before the `norm` of reductions.
    (
        Category::Elementwise,
        &["distribution_elementwise", "philox", "curand"],
    ),
    (
        Category::Communication,
        &[
            "nccl",
            "allreduce",
            "all_reduce",
            "allgather",
            "all_gather",
            "reducescatter",
            "reduce_scatter",
            "alltoall",
            "all_to_all",
            "cross_device",
            "nvshmem",
        ],
    ),
    (
        Category::Attention,
        &[
            "flash",
            "fmha",
            "attention",
            "attn",
            "sdpa",
            "mha_",
            "_mha",
            "paged",
            "xformers",
        ],
    ),
    (
        Category::MoeRouting,
        &[
            "moe",
            "expert",
            "topk",
            "top_k",
            "router",
            "routing",
            "permute_row",
        ],
    ),
    (
        Category::Gemm,
        &[
            "gemm",
            "gemv",
            "nvjet",
            "cutlass",
            "cublas",
            "xmma",
            "wgmma",
            "matmul",
            "splitkreduce",
            "_mma",
            "s16816",
            "s1688",
        ],
    ),
    (
        Category::ReductionNorm,
        &[
            "reduce",
            "reduction",
            "norm",
            "softmax",
            "rms",
            "argmax",
            "argmin",
            "cub::",
            "scan",
            "welford",
        ],
    ),
    (
        Category::Elementwise,
        &[
            "elementwise",
            "copy",
            "cat_",
            "catarray",
            "fill",
            "index",
            "gather",
            "scatter",
            "arange",
            "where",
            "pow",
            "rsqrt",
            "silu",
            "gelu",
            "activation",
            "rotary",
            "rope",
            "embedding",
            "cast",
            "transpose",
            "triu",
            "tril",
            "masked",
            "clamp",
            "distribution",
            "unary",
            "binary",
        ],
    ),
];

/// The coarse category of a kernel, from its (demangled) name. Kernels torch.compile
/// generates are classified by Inductor's prefix first (their names list every fused op, so a
/// pointwise kernel around attention would otherwise read as attention); other rules are
/// checked in order, so a cuDNN SDPA kernel using wgmma is attention, not gemm, and cuBLAS's
/// split-K reduction is gemm, not reduction.
pub fn category(name: &str) -> Category {
    if let Some(c) = inductor_category(name) {
        return c;
    }
    let lower = name.to_ascii_lowercase();
    for (cat, needles) in CATEGORY_RULES {
        if needles.iter().any(|n| lower.contains(n)) {
            return *cat;
        }
    }
    Category::Other
}

/// Collectives by the name pattern of their kernels, most specific first: NCCL's own names
/// change between versions (`ncclKernel_AllReduce_RING_LL_Sum_float` in 2.17,
/// `ncclDevKernel_AllReduce_Sum_bf16_RING_LL` from 2.19, `ncclAllReduceRingLLKernel_sum_f16`
/// before 2.8), so the name is matched without case or underscores.
const COLLECTIVE_RULES: &[(&str, &[&str])] = &[
    ("reducescatter", &["reducescatter"]),
    (
        "allreduce",
        &["allreduce", "crossdevicereduce", "customallreduce"],
    ),
    ("allgather", &["allgather"]),
    ("alltoall", &["alltoall"]),
    ("broadcast", &["broadcast"]),
    (
        "sendrecv",
        &[
            "sendrecv",
            "ncclkernelsend",
            "ncclkernelrecv",
            "ncclsend",
            "ncclrecv",
        ],
    ),
    (
        "reduce",
        &["ncclkernelreduce", "nccldevkernelreduce", "ncclreduce"],
    ),
];

/// The collective a communication kernel runs, from its name alone (see
/// [`crate::Collective`]): `allreduce`, `reducescatter`, `allgather`, `alltoall`,
/// `broadcast`, `sendrecv`, `reduce`; `None` for a name that does not say (NCCL 2.19's
/// `ncclDevKernel_Generic`, NVSHMEM) or a kernel that is not communication.
pub fn collective(name: &str) -> Option<&'static str> {
    if category(name) != Category::Communication {
        return None;
    }
    let squashed: String = name
        .chars()
        .take_while(|&c| c != '(')
        .filter(|&c| c != '_')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    COLLECTIVE_RULES
        .iter()
        .find(|(_, needles)| needles.iter().any(|n| squashed.contains(n)))
        .map(|(c, _)| *c)
}

/// A collective's name as the PyTorch profiler's `Collective name` argument or NCCL's NVTX
/// ranges write it (`allreduce`, `all_reduce`, `_allgather_base`, `reduce_scatter_tensor`),
/// in [`collective`]'s vocabulary; unknown words are kept, lower-cased without underscores.
pub fn collective_of_arg(arg: &str) -> String {
    let squashed: String = arg
        .trim_start_matches("nccl:")
        .chars()
        .filter(|&c| c != '_')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    COLLECTIVE_RULES
        .iter()
        .find(|(_, needles)| needles.iter().any(|n| squashed.contains(n)))
        .map_or(squashed, |(c, _)| (*c).to_string())
}

/// Inductor's Triton kernel kinds: `triton_poi_` pointwise, `triton_red_` reductions,
/// `triton_per_` persistent reductions (norms, softmax), `triton_tem_` templates (mm/bmm,
/// flex attention). `None` for any other name, hand-written Triton kernels included.
fn inductor_category(name: &str) -> Option<Category> {
    let lower = name.trim_start_matches("void ").to_ascii_lowercase();
    let kind = lower.strip_prefix("triton_")?;
    if kind.starts_with("poi_") {
        Some(Category::Elementwise)
    } else if kind.starts_with("red_") || kind.starts_with("per_") {
        Some(Category::ReductionNorm)
    } else if kind.starts_with("tem_") {
        Some(if lower.contains("attention") {
            Category::Attention
        } else {
            Category::Gemm
        })
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real names from the H200 nsys export and the RTX 5090 ncu / nsys reports.
    const NSYS_GEMV: &str = "std::enable_if<!T7, void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, (bool)0, (bool)1, (bool)1, (bool)0, (int)7, (bool)0, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<const __nv_bfloat16>, cublasGemvTensorStridedBatched<const __nv_bfloat16>, cublasGemvTensorStridedBatched<__nv_bfloat16>, float>>(T13)";
    const NCU_GEMV: &str = "enable_if<!T7, void>::type kernel<int, int, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, 0, 1, 1, 0, 7, 0, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<const __nv_bfloat16>, cublasGemvTensorStridedBatched<const __nv_bfloat16>, cublasGemvTensorStridedBatched<__nv_bfloat16>, float>>(T13)";
    const NSYS_SILU: &str = "void at::native::vectorized_elementwise_kernel<(int)4, at::native::<unnamed>::silu_kernel(at::TensorIteratorBase &)::[lambda() (instance 1)]::operator ()() const::[lambda() (instance 6)]::operator ()() const::[lambda(c10::BFloat16) (instance 1)], std::array<char *, (unsigned long)2>>(int, T2, T3)";
    const NCU_SILU: &str = "void vectorized_elementwise_kernel<4, unnamed>::silu_kernel(TensorIteratorBase &)::[lambda() (instance 1)]::operator ()() lambda() (instance 6)]::operator ()() lambda(BFloat16) (instance 1)], array<char *, 2>>(int, T2, T3)";

    #[test]
    fn short_names_match_nsys_short_name_column() {
        assert_eq!(
            short_name("void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, (int)4, (int)4>>(T3)"),
            "reduce_kernel"
        );
        assert_eq!(short_name(NSYS_SILU), "vectorized_elementwise_kernel");
        assert_eq!(
            short_name(
                "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(T1::Params)"
            ),
            "Kernel2"
        );
        assert_eq!(short_name(NSYS_GEMV), "kernel");
        assert_eq!(
            short_name("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"),
            "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"
        );
        assert_eq!(
            short_name("void <unnamed>::elementwise_kernel_with_index<int, at::native::arange_cuda_out(const c10::Scalar &, const c10::Scalar &, const c10::Scalar &, at::Tensor &)::[lambda() (instance 1)]::operator ()() const::[lambda() (instance 4)]::operator ()() const::[lambda(long) (instance 1)]>(T1, T2::result_type *)"),
            "elementwise_kernel_with_index"
        );
    }

    #[test]
    fn display_names_tell_instances_apart() {
        assert_eq!(
            display_name("void at::native::elementwise_kernel<(int)128, (int)4, void at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float>>>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)"),
            "elementwise_kernel<128, 4, gpu_kernel_impl_nocast<BinaryFunctor<BFloat16, BFloat16, BFloat16, MulFunctor<float>>>(TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>"
        );
        assert_eq!(
            display_name(
                "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(T1::Params)"
            ),
            "Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>"
        );
        assert_eq!(
            display_name("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"),
            "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"
        );
        assert_eq!(
            display_name("void at::native::vectorized_elementwise_kernel<(int)8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char *, (unsigned long)3>>(int, T2, T3)"),
            "vectorized_elementwise_kernel<8, CUDAFunctor_add<BFloat16>, array<char*, 3>>"
        );
    }

    #[test]
    fn ncu_shortened_names_match_nsys_names() {
        assert_eq!(match_key(NSYS_GEMV), match_key(NCU_GEMV));
        assert_eq!(match_key(NSYS_SILU), match_key(NCU_SILU));
        assert_eq!(
            match_key("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(T1::Params)"),
            match_key("void Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(Params)")
        );
        assert_eq!(
            match_key("void at::native::<unnamed>::indexSelectSmallIndex<c10::BFloat16, long, unsigned int, (int)2, (int)2, (int)-2>(at::cuda::detail::TensorInfo<T1, T3>)"),
            match_key("void at::<unnamed>::indexSelectSmallIndex<c10::BFloat16, long, unsigned int, 2, 2, (int)-2>(cuda::TensorInfo<T1, T3>)")
        );
        // The (6) vs (7) template argument tells two gemv kernels apart.
        assert_ne!(
            match_key(NSYS_GEMV),
            match_key(&NCU_GEMV.replace(" 7, 0,", " 6, 0,"))
        );
    }

    #[test]
    fn kineto_names_match_nsys_names() {
        assert_eq!(
            match_key("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul> >(int, at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul>)"),
            match_key("void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctorOnSelf_add<float>, std::array<char *, (unsigned long)2>>(int, at::native::CUDAFunctorOnSelf_add<float>, std::array<char *, (unsigned long)2>)")
        );
    }

    #[test]
    fn no_panic_on_any_prefix_or_odd_text() {
        let odd = format!("{NSYS_SILU} µ<(int)>(((( ::<unnamed>:: (anonymous namespace)::ä(int)-");
        for (i, _) in odd.char_indices() {
            for s in [&odd[..i], &odd[i..]] {
                let _ = (short_name(s), display_name(s), match_key(s), category(s));
            }
        }
    }

    #[test]
    fn categories() {
        use Category::*;
        assert_eq!(category(NSYS_GEMV), Gemm);
        assert_eq!(category("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"), Gemm);
        assert_eq!(
            category("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0"),
            Attention
        );
        assert_eq!(
            category("void cublasLt::splitKreduce_kernel<(int)32, (int)16, int, float, __nv_bfloat16, float, __nv_bfloat16, (bool)1, (bool)0, (bool)0>(cublasLt::cublasSplitKParams<T5>, const T3 *, const T9 *, T9 *, const T4 *, const T4 *, const T8 *, const T3 *, T8 *, void *, long, T4 *, int *, T4 *, T4 *)"),
            Gemm
        );
        assert_eq!(category("void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, (int)4, (int)4>>(T3)"), ReductionNorm);
        assert_eq!(category(NSYS_SILU), Elementwise);
        assert_eq!(category("void at::native::<unnamed>::CatArrayBatchedCopy<at::native::<unnamed>::OpaqueType<(unsigned int)2>, unsigned int, (int)4, (int)64, (int)64>(T1 *, at::native::<unnamed>::CatArrInputTensorMetadata<T1, T2, T4, T5>, at::native::<unnamed>::TensorSizeStride<T2, (unsigned int)4>, int, T2)"), Elementwise);
        assert_eq!(category("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"), Communication);
        assert_eq!(category("fused_moe_kernel"), MoeRouting);
        // torch.randn on the GPU (seen in an H200 nsys capture): not a normalization.
        assert_eq!(category("void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel<float, (int)4, void at::native::templates::cuda::normal_and_transform<float, float, at::CUDAGeneratorImpl *>(at::TensorIteratorBase &, T3, T4)::[lambda(curandStatePhilox4_32_10 *) (instance 2)]>(long, at::PhiloxCudaState, T3, T4)"), Elementwise);
        assert_eq!(category("some_custom_thing"), Other);
    }

    /// Names of Triton kernels torch.compile(mode="reduce-overhead") generated for the H100
    /// captures of 2026-11-23 (tests/fixtures/h100-cuda-graphs, the sample runs).
    #[test]
    fn inductor_triton_kernels_by_prefix() {
        use Category::*;
        for (name, cat) in [
            ("triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy__unsafe_view_add_arange_bmm_cat_clone_cos_expand_le_mul_neg_scalar_tensor_sin_slice_transpose_unsqueeze_view_where_5", Elementwise),
            ("triton_poi_fused__unsafe_view_mul_silu_8", Elementwise),
            ("triton_per_fused__to_copy_add_embedding_mean_mul_pow_rsqrt_0", ReductionNorm),
            ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_12", ReductionNorm),
            ("triton_tem_fused_mm_4", Gemm),
            ("triton_tem_fused_flex_attention_0", Attention),
            // Hand-written Triton kernels keep the name rules.
            ("_fwd_kernel_flash_attention", Attention),
            ("triton_matmul_kernel", Gemm),
        ] {
            assert_eq!(category(name), cat, "{name}");
        }
    }

    /// Kernel names of NCCL versions 2.7 to 2.21 and of vLLM's custom all-reduce; the first
    /// four are in `tests/fixtures/hta-multirank/` (NCCL 2.17 and the 128-rank job).
    #[test]
    fn collectives_by_kernel_name_across_nccl_versions() {
        for (name, want) in [
            ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", Some("allreduce")),
            ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", Some("broadcast")),
            ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", Some("sendrecv")),
            ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)", Some("allreduce")),
            ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)", Some("reducescatter")),
            ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)", Some("allgather")),
            ("ncclAllReduceRingLLKernel_sum_f16(ncclWorkElem)", Some("allreduce")),
            ("ncclKernel_Reduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", Some("reduce")),
            ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, (int)2>(vllm::RankData *, vllm::RankSignals, vllm::Signal *, __nv_bfloat16 *, int, int)", Some("allreduce")),
            ("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<(unsigned long)4096>)", None),
            ("void at::native::reduce_kernel<(int)512, (int)1>(T3)", None),
        ] {
            assert_eq!(collective(name), want, "{name}");
        }
        assert_eq!(collective_of_arg("allreduce"), "allreduce");
        assert_eq!(collective_of_arg("nccl:_all_gather_base"), "allgather");
        assert_eq!(
            collective_of_arg("reduce_scatter_tensor_coalesced"),
            "reducescatter"
        );
        assert_eq!(collective_of_arg("barrier"), "barrier");
    }
}
