//! A stand-in Rust inference loop marked with llmprof's stages. Profile it with
//!
//! ```text
//! cargo build --release --example decode_loop -p llmprof-stages
//! llmprof capture --cmd "target/release/examples/decode_loop 64" --stages prefill,decode
//! ```
//!
//! The "model" here is CPU arithmetic; a real workload launches its GPU kernels inside the
//! same guards and synchronizes before each stage ends.

use llmprof_stages::{in_stage, pass, stage, Stage, DECODE, PREFILL};

fn forward(tokens: u64, state: &mut u64) {
    for t in 0..tokens * 10_000 {
        *state = state.wrapping_mul(6364136223846793005).wrapping_add(t);
    }
}

fn iteration(prompt: u64, steps: u64, warmup: bool, state: &mut u64) {
    let open = |s: &str| if warmup { Stage::warmup(s) } else { stage(s) };
    {
        let _prefill = open(PREFILL);
        forward(prompt, state);
    }
    let _decode = open(DECODE);
    for _ in 0..steps {
        forward(1, state);
    }
}

fn main() {
    let steps: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(16);
    eprintln!(
        "decode_loop: pass {}, 512-token prompt, {steps} decode steps",
        pass().unwrap_or_else(|| "none (not under llmprof)".into())
    );
    let mut state = 1u64;
    iteration(512, steps, true, &mut state);
    for _ in 0..3 {
        iteration(512, steps, false, &mut state);
    }
    let checksum = in_stage("report", || state % 1000);
    println!("checksum {checksum}");
}
