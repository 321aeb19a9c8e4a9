"""An LLM inference script of your own, marked for llmprof with the `llmprof` Python package.

A decoder with Qwen2.5-0.5B's shape and random weights (nothing is downloaded) runs a prompt
through prefill and greedy-decodes tokens, one warm-up iteration and then measured ones. The
stages are marked with `llmprof.stage`, so

    pip install llmprof
    llmprof capture --cmd "python examples/python-workload/workload.py" --stages prefill,decode

gets baseline prefill and decode timings, energy per stage and profiler overhead per stage, and
the PyTorch-profiler pass gets a trace of one measured iteration (`llmprof.kineto_trace`).
Without llmprof it runs the same and prints its timings.

Environment (for a quick run on a CPU): WORKLOAD_LAYERS (24), WORKLOAD_PROMPT (512),
WORKLOAD_STEPS (64), WORKLOAD_ITERATIONS (5 measured), WORKLOAD_TINY=1 (a 2-layer, 64-wide
model).
"""

import os
import time

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

import llmprof


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def build_model(device: str) -> torch.nn.Module:
    tiny = os.environ.get("WORKLOAD_TINY") == "1"
    config = Qwen2Config(
        hidden_size=64 if tiny else 896,
        intermediate_size=128 if tiny else 4864,
        num_hidden_layers=2 if tiny else env_int("WORKLOAD_LAYERS", 24),
        num_attention_heads=4 if tiny else 14,
        num_key_value_heads=2,
        vocab_size=1024 if tiny else 151936,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    with torch.device(device):  # initialise the random weights on the GPU, not the CPU
        model = Qwen2ForCausalLM(config)
    return model.to(dtype=dtype).eval()


def kv_cache_bytes(past: object) -> "int | None":
    """The bytes of a Hugging Face cache's key and value tensors (transformers 4.x lists or
    5.x layers); None for a cache of another shape."""
    layers = getattr(past, "layers", None)
    if layers is not None:
        tensors = [t for l in layers for t in (getattr(l, "keys", None), getattr(l, "values", None))]
    else:
        tensors = list(getattr(past, "key_cache", [])) + list(getattr(past, "value_cache", []))
    tensors = [t for t in tensors if isinstance(t, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors) if tensors else None


def iteration(model: torch.nn.Module, prompt: torch.Tensor, steps: int, warmup: bool) -> None:
    """One request: prefill, then `steps` greedy decode steps, each stage marked."""
    with llmprof.stage("prefill", warmup=warmup):
        out = model(prompt, use_cache=True)
        token = out.logits[:, -1:].argmax(-1)
    past = out.past_key_values
    with llmprof.stage("decode", warmup=warmup):
        for _ in range(steps):
            out = model(token, past_key_values=past, use_cache=True)
            past = out.past_key_values
            token = out.logits[:, -1:].argmax(-1)
        # On this stage's line: the cache the decode grew (llmprof's Memory table and headroom).
        llmprof.report_memory(kv_cache_bytes=kv_cache_bytes(past))


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = build_model(device)
    llmprof.report_memory(weights_bytes=sum(p.numel() * p.element_size() for p in model.parameters()))
    vocab = model.config.vocab_size
    prompt = torch.randint(0, vocab, (1, env_int("WORKLOAD_PROMPT", 512)), device=device)
    steps = env_int("WORKLOAD_STEPS", 64)
    iterations = env_int("WORKLOAD_ITERATIONS", 5)
    print(f"llmprof pass: {llmprof.profiling_pass() or 'none (not under llmprof)'}; "
          f"device {device}; {iterations} measured iterations of {steps} decode steps")
    with torch.inference_mode():
        iteration(model, prompt, steps, warmup=True)
        for i in range(iterations):
            t0 = time.perf_counter()
            if i == iterations - 1:
                # The PyTorch-profiler pass traces the last measured iteration; elsewhere
                # kineto_trace does nothing.
                with llmprof.kineto_trace():
                    iteration(model, prompt, steps, warmup=False)
            else:
                iteration(model, prompt, steps, warmup=False)
            print(f"iteration {i}: {(time.perf_counter() - t0) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
