#!/usr/bin/env python3
"""Check a driver output directory after the four passes (baseline, kineto, nsys, flops) and
print what they measured. Usage: check_outputs.py RUN_DIR [NSYS_SQLITE]

Exit 0 when every check passes, 1 otherwise. Standard library only."""

import collections
import json
import os
import sqlite3
import sys

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def load(run, name):
    path = os.path.join(run, name)
    if not os.path.exists(path):
        check(False, f"{name} exists")
        return None
    print(f"     {name}: {os.path.getsize(path):,} bytes")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def analytic(meta):
    """Qwen2-style dense decoder FLOPs (2 per MAC; full s x s attention), for comparison."""
    cfg_path = os.environ.get("PLAN_FOR_ANALYTIC")
    if not cfg_path:
        return None
    with open(cfg_path, encoding="utf-8") as f:
        c = json.load(f)["model"]["config"]
    h, L, H, Hk, I, V = (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"],
                         c["num_key_value_heads"], c["intermediate_size"], c["vocab_size"])
    d = h // H
    b, s, n = meta["batch_size"], meta["prompt_tokens"], meta["max_new_tokens"]
    per_tok = L * (4 * h * H * d + 4 * h * Hk * d + 6 * h * I)
    lm = 2 * h * V
    prefill = b * (s * per_tok + L * 4 * H * d * s * s + lm)
    decode = sum(b * (per_tok + L * 4 * H * d * (s + j) + lm) for j in range(1, n + 1))
    return {"prefill": prefill, "decode": decode, "lm_head": b * lm}


def timing(run, name, expect_iters, marked):
    d = load(run, name)
    if d is None:
        return
    check(d.get("complete") is True, f"{name} complete")
    its = d.get("iterations", [])
    check(len(its) == expect_iters, f"{name} has {expect_iters} measured iteration(s) "
                                    f"(has {len(its)})")
    check(d.get("stage_markers") is marked, f"{name} stage_markers={marked}")
    for i, it in enumerate(d.get("warmup_iterations", [])):
        print(f"     warm-up {i}: prefill {it['prefill_ns'] / 1e6:.2f} ms, decode "
              f"{it['decode_ns'] / 1e6:.2f} ms, total {it['total_ns'] / 1e6:.2f} ms")
    for i, it in enumerate(its):
        steps = it["decode_step_ns"]
        check(abs(sum(steps) - it["decode_ns"]) <= 0.01 * it["decode_ns"] + 1000,
              f"{name} iteration {i}: steps add up to decode_ns")
        print(f"     measured {i}: prefill {it['prefill_ns'] / 1e6:.2f} ms, decode "
              f"{it['decode_ns'] / 1e6:.2f} ms ({len(steps)} steps: "
              + ", ".join(f"{s / 1e6:.2f}" for s in steps)
              + f" ms), total {it['total_ns'] / 1e6:.2f} ms")


def main():
    run = sys.argv[1]
    meta = load(run, "metadata.json")
    if meta is None:
        return 1
    passes = meta.get("passes", {})
    for p in ("baseline", "kineto", "nsys", "flops"):
        check(passes.get(p, {}).get("finished") is True, f"metadata: pass {p} finished")
    for k in ("batch_size", "prompt_tokens", "image_tokens", "decode_steps", "prefill_logits",
              "counted_flops", "counted_flops_source", "versions", "device", "notes",
              "attn_implementation", "model_params"):
        check(k in meta, f"metadata has {k}")
    check(meta.get("prefill_logits") == 1, "metadata prefill_logits == 1")
    print("     versions:", json.dumps(meta.get("versions")))
    print("     device:", json.dumps(meta.get("device")))
    print("     model_params:", meta.get("model_params"), "attn:", meta.get("attn_implementation"),
          "flops attn:", meta.get("counted_flops_attn_implementation"))
    print("     decode_steps:", meta.get("decode_steps"),
          {p: r.get("decode_steps") for p, r in passes.items()})
    print("     passes:", json.dumps({p: {k: v for k, v in r.items() if k != "decode_steps"}
                                      for p, r in passes.items()}))
    for n in meta.get("notes", []):
        print("     note:", n)

    timing(run, "baseline.json", len(passes.get("baseline", {}).get("decode_steps", [])), False)
    timing(run, "kineto_timing.json", 1, True)
    timing(run, "nsys_timing.json", len(passes.get("nsys", {}).get("decode_steps", [])), True)

    flops = load(run, "flops.json")
    if flops is not None:
        check(flops.get("prefill", 0) > 0, f"flops prefill > 0 ({flops.get('prefill', 0):.6g})")
        check(flops.get("decode", 0) > 0, f"flops decode > 0 ({flops.get('decode', 0):.6g})")
        print("     flops.json:", json.dumps(flops))
        print("     detail:", json.dumps(meta.get("counted_flops_detail")))
        a = analytic(meta)
        if a:
            for k, v in a.items():
                if k in flops:
                    print(f"     analytic {k} {v:.6g}, counted {flops[k]:.6g} "
                          f"(ratio {flops[k] / v:.4f})")

    trace = os.path.join(run, "kineto_trace.json")
    if os.path.exists(trace):
        print(f"     kineto_trace.json: {os.path.getsize(trace):,} bytes")
        with open(trace, encoding="utf-8") as f:
            t = json.load(f)
        ann = collections.Counter((e.get("cat"), e.get("name")) for e in t["traceEvents"]
                                  if e.get("cat") in ("user_annotation", "gpu_user_annotation"))
        print("     annotations:", dict(ann))
        kernels = [e for e in t["traceEvents"] if e.get("cat") == "kernel"]
        busy = sum(e.get("dur", 0) for e in kernels) / 1e3
        print(f"     kernels: {len(kernels)}, summed {busy:.2f} ms")
        for n in ("prefill", "decode"):
            check(ann.get(("user_annotation", n)) == 1, f"kineto user_annotation {n} once")
            check(ann.get(("gpu_user_annotation", n), 0) >= 1, f"kineto gpu_user_annotation {n}")
        check(not any(n.startswith("warmup_") for _, n in ann), "no warm-up ranges in the trace")
    else:
        check(False, "kineto_trace.json exists")

    if len(sys.argv) > 2:
        db = sqlite3.connect(sys.argv[2])
        cols = [r[1] for r in db.execute("PRAGMA table_info(NVTX_EVENTS)")]
        name = "COALESCE(e.text, s.value)" if "textId" in cols else "e.text"
        join = "LEFT JOIN StringIds s ON e.textId = s.id" if "textId" in cols else ""
        rows = db.execute(f"SELECT {name}, COUNT(*), SUM(e.end - e.start) FROM NVTX_EVENTS e "
                          f"{join} WHERE e.end IS NOT NULL GROUP BY 1 ORDER BY 1").fetchall()
        ranges = {r[0]: (r[1], r[2]) for r in rows}
        for k, (c, ns) in ranges.items():
            print(f"     nsys range {k}: {c} instance(s), {ns / 1e6:.2f} ms in all")
        nsys_steps = passes.get("nsys", {}).get("decode_steps", [])
        check(ranges.get("prefill", (0,))[0] == len(nsys_steps), "nsys: one prefill range per "
                                                                 "measured iteration")
        check(ranges.get("decode", (0,))[0] == len(nsys_steps), "nsys: one decode range per "
                                                                "measured iteration")
        check("warmup_prefill" in ranges, "nsys: warm-up ranges named warmup_*")
        try:
            k = db.execute("SELECT COUNT(*), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL"
                           ).fetchone()
            print(f"     nsys kernels: {k[0]}, summed {k[1] / 1e6:.2f} ms")
        except sqlite3.Error as e:
            print("     nsys kernels: ", e)

    print(f"{len(failures)} failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
