#!/usr/bin/env python3
"""Builds the fuzz targets' seed corpora from the real fixtures (run from tests/fuzz/):
small valid inputs cut from them, each under 16 kB so libFuzzer mutates them quickly.

* corpus/kineto: the H200 trace's header with slices of its events (kernels, runtime calls,
  annotations, flows), and the HTA NCCL traces' header (distributedInfo) with NCCL kernels
  carrying their collective args;
* corpus/kineto_event: single events of the fixture traces, one of each shape;
* corpus/ncu: each Nsight Compute CSV format of the fixtures, header plus the first rows;
* corpus/model_config: every model config.json of the sample runs;
* corpus/target_toml: the shipped capture targets (configs/*.toml), plain and with `#set`
  override lines;
* corpus/viewer (with the release binary built, ../../target/release/llmprof): each kineto
  seed and the H100 NVTX-edges export ingested, its bundle.json and timeline.json joined by a
  NUL byte, under 64 kB; viewer.dict: their JSON keys.
"""
import glob
import gzip
import hashlib
import json
import os
import subprocess
import tempfile

FIX = "../fixtures"


def put(kind, data):
    os.makedirs(f"corpus/{kind}", exist_ok=True)
    name = hashlib.sha1(data).hexdigest()[:16]
    with open(f"corpus/{kind}/{name}", "wb") as f:
        f.write(data)


def trace_seeds(path, per_seed, seeds, pick=None):
    doc = json.load(gzip.open(path))
    events = doc.pop("traceEvents")
    if pick:
        events = [e for e in events if pick(e)] + events[:per_seed]
    doc.pop("deviceProperties", None)
    step = max(1, len(events) // seeds)
    for i in range(seeds):
        sl = events[i * step : i * step + per_seed]
        data = json.dumps({**doc, "traceEvents": sl}, separators=(",", ":")).encode()
        if len(data) < 16384:
            put("kineto", data)


trace_seeds(f"{FIX}/h200-qwen2-0.5b/kineto_trace.json.gz", 24, 12)
nccl = lambda e: "nccl" in str(e.get("name", "")).lower()
trace_seeds(f"{FIX}/hta-multirank/nccl_rank0_of_2.json.gz", 8, 4, nccl)
trace_seeds(f"{FIX}/hta-multirank/sampled_rank-0.json.gz", 12, 4, nccl)

seen = set()
for csv in sorted(glob.glob(f"{FIX}/**/*.csv", recursive=True)):
    if "ncu" not in csv or "nsys" in os.path.basename(csv):
        continue
    fmt = os.path.basename(csv).split(".")[-2] if csv.endswith(".csv") else ""
    lines = open(csv, "rb").read().splitlines(keepends=True)
    data = b"".join(lines[:6])[:16000]
    key = (fmt, data[:200])
    if key in seen:
        continue
    seen.add(key)
    put("ncu", data)

for cfg in sorted(glob.glob(f"{FIX}/**/config.json", recursive=True)):
    put("model_config", open(cfg, "rb").read())

for target in sorted(glob.glob("../../configs/*.toml")):
    text = open(target, "rb").read()
    put("target_toml", text)
    # The same target with overrides as `--set` would give them.
    put("target_toml", b"#set inputs.max_new_tokens=8\n#set run.repeats=2\n" + text)

LLMPROF = "../../target/release/llmprof"


def viewer_seed(args):
    """Ingests `args` with the release binary; the run's bundle and timeline, NUL-joined."""
    with tempfile.TemporaryDirectory() as out:
        p = subprocess.run([LLMPROF, "ingest", *args, "--out", out], capture_output=True)
        run = p.stdout.decode().strip().splitlines()[-1] if p.returncode == 0 else ""
        if not run or not os.path.isfile(os.path.join(run, "timeline.json")):
            return None
        bundle = json.load(open(os.path.join(run, "bundle.json")))
        timeline = open(os.path.join(run, "timeline.json"), "rb").read().strip()
        return json.dumps(bundle, separators=(",", ":")).encode() + b"\0" + timeline


def keys_of(v, keys):
    if isinstance(v, dict):
        for k, x in v.items():
            keys.add(k)
            keys_of(x, keys)
    elif isinstance(v, list):
        for x in v[:50]:
            keys_of(x, keys)


if os.path.isfile(LLMPROF):
    inputs = [["--kineto", f"corpus/kineto/{f}"] for f in sorted(os.listdir("corpus/kineto"))]
    inputs += [["--nsys", p] for p in sorted(glob.glob(f"{FIX}/h100-nvtx-edges/*.sqlite*"))]
    keys = set()
    for args in inputs:
        data = viewer_seed(args)
        if data and len(data) < 65536:
            put("viewer", data)
            for part in data.split(b"\0", 1):
                keys_of(json.loads(part), keys)
    with open("viewer.dict", "w") as d:
        d.write("# JSON keys of the bundles and timelines in corpus/viewer (make_seeds.py)\n")
        for k in sorted(keys):
            d.write(json.dumps(f'"{k}"') + "\n")
        for tok in ["null", "true", "false", "-1", "18446744073709551615", "1e308", "[]", "{}"]:
            d.write(json.dumps(tok) + "\n")

# corpus/gunzip: a mode byte and a pick byte (fuzz_targets/gunzip.rs), then slices of the H200
# trace's JSON: gzipped by the target at levels 1, 6 and 9 (also with a byte flipped), raw
# deflate streams of them, and whole gzip files (one member and two).
import zlib

text = gzip.open(f"{FIX}/h200-qwen2-0.5b/kineto_trace.json.gz").read()
for k, at in enumerate(range(0, len(text), len(text) // 6)):
    part = text[at : at + 4000]
    level = [1, 6, 9][k % 3]
    put("gunzip", bytes([1 + 4 * k, level]) + part)
    put("gunzip", bytes([2 + 4 * k, 37 * k + 11]) + part)
    raw = zlib.compressobj(level, zlib.DEFLATED, -15)
    put("gunzip", bytes([3 + 4 * k, 0]) + raw.compress(part) + raw.flush())
    whole = gzip.compress(part, level) + (gzip.compress(part[:500]) if k % 2 else b"")
    put("gunzip", bytes([4 * k, 0]) + whole)

# corpus/kineto_event: single events as the traces write them (their own spacing), the first
# of each shape (ph, cat, the args' keys) in each fixture trace.
for trace in ["h200-qwen2-0.5b", "h100-cuda-graphs", "hta-multirank/nccl_rank0_of_2.json.gz"]:
    path = trace if trace.endswith(".gz") else f"{trace}/kineto_trace.json.gz"
    text = gzip.open(f"{FIX}/{path}").read().decode()
    pos = text.index("[", text.index('"traceEvents"')) + 1
    shapes = set()
    decoder = json.JSONDecoder()
    while True:
        while text[pos] in " \t\r\n,":
            pos += 1
        if text[pos] == "]":
            break
        event, end = decoder.raw_decode(text, pos)
        shape = (event.get("ph"), event.get("cat"), tuple(sorted(event.get("args") or {})))
        if shape not in shapes:
            shapes.add(shape)
            put("kineto_event", text[pos:end].encode())
        pos = end

for kind in ("kineto", "kineto_event", "ncu", "model_config", "target_toml", "viewer", "gunzip"):
    print(kind, len(os.listdir(f"corpus/{kind}")) if os.path.isdir(f"corpus/{kind}") else 0)
