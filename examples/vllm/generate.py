"""vLLM's offline `LLM.generate`, marked for `llmprof capture --cmd`. UNTESTED WITH vLLM: vLLM
is not installed on the GPU host this project is tested on; the plain-PyTorch workload
(examples/python-workload/workload.py, gpu-jobs/cmd-mfu.sh) is the one that runs.

`generate()` runs prefill and decode inside one call, so they cannot be marked from outside. This
script separates them with two calls per iteration and vLLM's prefix cache:

* `prefill`: `generate(max_tokens=1)` — the prompt's forward pass and one sampled token (TTFT);
* `decode`: `generate(max_tokens=STEPS + 1)` on the same prompt; the prefix cache already holds
  the prompt's KV blocks, so this call recomputes at most the prompt's last partial block and
  then decodes STEPS tokens.

The engine must run in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, set below): llmprof
attributes GPU work to a stage through the thread that launched it, and vLLM's V1 engine
otherwise launches every kernel from a separate engine-core process that the NVTX ranges of
this one do not contain. CUDA graphs (vLLM's default) are traced node by node by the nsys pass.

    llmprof capture --cmd "python examples/vllm/generate.py" --stages prefill,decode \
      --model-config /path/to/the/model/config.json \
      --prompt-tokens 512 --decode-steps 64 --batch-size 1

Environment: VLLM_MODEL (Qwen/Qwen2.5-0.5B-Instruct, or a local directory), VLLM_PROMPT (512
tokens), VLLM_STEPS (64), VLLM_BATCH (1), VLLM_ITERATIONS (3 measured, after one warm-up).
"""

import os

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import llmprof  # noqa: E402  (the llmprof wheel's package: NVTX ranges + stages.jsonl)
from vllm import LLM, SamplingParams  # noqa: E402


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def main() -> None:
    prompt_len = env_int("VLLM_PROMPT", 512)
    steps = env_int("VLLM_STEPS", 64)
    batch = env_int("VLLM_BATCH", 1)
    llm = LLM(
        model=os.environ.get("VLLM_MODEL", "Qwen/Qwen2.5-0.5B-Instruct"),
        enable_prefix_caching=True,
        max_model_len=prompt_len + steps + 16,
    )
    vocab = llm.get_tokenizer().vocab_size
    first = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True)
    rest = SamplingParams(max_tokens=steps + 1, temperature=0.0, ignore_eos=True)
    iterations = env_int("VLLM_ITERATIONS", 3)
    for i in range(iterations + 1):
        # A fresh prompt per iteration (the cache must not hold it before prefill), the same
        # prompt for both calls of the iteration (so decode's call finds it cached).
        prompts = [
            {"prompt_token_ids": [(7 * i + 13 * b + t) % vocab for t in range(prompt_len)]}
            for b in range(batch)
        ]
        with llmprof.stage("prefill", warmup=i == 0):
            llm.generate(prompts, first, use_tqdm=False)
        with llmprof.stage("decode", warmup=i == 0):
            out = llm.generate(prompts, rest, use_tqdm=False)
        print(f"iteration {i}: {len(out[0].outputs[0].token_ids)} tokens")


if __name__ == "__main__":
    main()
