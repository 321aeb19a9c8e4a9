#!/usr/bin/env python3
"""llmprof workload driver: one LLM inference workload, run for one capture pass.

Usage: python3 driver.py PLAN.json

The Rust side (llmprof capture) embeds this file and runs it with the target's interpreter, once
per pass, each time in a fresh process:

  baseline  no profiler, no stage markers: host timings of `repeats` iterations, sub-stages timed
            by CUDA events, then back-to-back prefills for energy -> baseline.json
  kineto    every iteration (warm-up too) under its own torch.profiler session (CPU + CUDA):
            `repeats` timed iterations -> kineto_timing.json, the last one's trace ->
            kineto_trace.json
  nsys      `repeats` iterations with NVTX stage ranges (run under `nsys profile`)
            -> nsys_timing.json
  flops     one iteration under FlopCounterMode, FLOPs per stage -> flops.json
  calibrate no model: one large GEMM and one device copy -> measured_tflops/measured_gbps in
            metadata.json (deep mode)

Every pass merges what it learned into metadata.json (the RunMetadata the Rust side reads).

One iteration = `prefill` (a forward over the prompt with the KV cache and logits_to_keep=1, as
generate() does, plus the greedy pick of the first new token) then `decode`: a driven loop of
max_new_tokens steps, each one forward of [batch, 1] with the cache and a greedy argmax. It never
stops at EOS. Stages are marked with NVTX ranges (Nsight) and torch.profiler.record_function
(PyTorch profiler); torch.cuda.synchronize() runs inside each stage before it closes, so a stage's
wall time includes its GPU work. Optional sub-stages (plan["stages"]["modules"]) are marked by
forward pre/post hooks on those modules.

Sub-stages are not synchronized at their boundaries in any pass, so their ranges in the traced
passes (nsys, kineto) close when the host has *enqueued* the module's work: a range's wall time
there is launch time, not the sub-stage's time, and only its projected GPU time (the span of the
GPU work launched inside it) says how long it ran. The baseline pass times them truly instead,
on the GPU: a CUDA event is recorded at each module's forward pre- and post-hook and the pair's
elapsed time is read after the enclosing stage's closing synchronize (SubStageTimer). Chosen over
synchronizing at each sub-stage boundary, which would also give true times but would stall the
host's run-ahead at every boundary and so change the baseline's prefill, the headline TTFT;
events cost a few microseconds of host time and add no wait. Consumers take sub-stage times from
the baseline's events (bundle: capture.baseline.sub_stages) or, in a traced pass, from the
range's projected GPU time, never from a sub-stage range's wall time. Sub-stages inside a
torch.compile'd region are not timed (hooks do nothing while dynamo traces).

NVML refreshes power only every ~100 ms on the GPU hosts, so a 20-80 ms prefill window holds at
most one reading: with plan["prefill_energy_s"] > 0 the baseline pass ends with back-to-back
prefills for at least that long (one window, one synchronize at its end), recorded as
"prefill_loop" for prefill energy per token.

Standard library + torch + transformers only. torch and transformers are imported after the plan
is checked, so a bad plan is reported even where they are missing.

Exit codes: 0 done; 2 bad plan or unusable environment (missing keys, unknown model_type, no
torch, no CUDA); 3 crash during the run (what was measured so far is still written).
"""

import contextlib
import datetime
import functools
import gc
import json
import math
import os
import platform
import sys
import time
import traceback
import warnings

DRIVER_VERSION = 1
EXIT_OK = 0
EXIT_BAD_PLAN = 2
EXIT_CRASH = 3

PASSES = ("baseline", "kineto", "nsys", "flops", "calibrate")
DTYPES = ("bfloat16", "float16", "float32")
# torch.compile modes of the decode step ("none": eager); reduce-overhead and max-autotune replay
# the step as a CUDA graph.
COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune")
# The KV cache: Hugging Face's DynamicCache (grows each step) or StaticCache (fixed shapes, so a
# compiled decode step is one graph).
CACHES = ("dynamic", "static")
STAGE_PREFILL = "prefill"
STAGE_DECODE = "decode"
WARMUP_PREFIX = "warmup_"
# The ranges of Runner.prepare (always warm-up: warmup_compile, ...).
PREPARE_STAGES = ("compile", "graph_capture", "compiled_warmup")
FLOPS_SOURCE = "torch.utils.flop_counter.FlopCounterMode"
CUDA_MISSING = "CUDA is not available: capture needs an NVIDIA GPU"
# Test mode only: run on the CPU (no CUDA, no NVTX meaning), so the driver's logic can be tested
# on a machine without a GPU. Never set by llmprof capture.
CPU_TEST_ENV = "LLMPROF_DRIVER_CPU"
# The baseline pass's prefill loop for energy (plan["prefill_energy_s"]): at least this many
# prefills, at most that many, and a plan may ask for at most PREFILL_LOOP_MAX_S seconds.
PREFILL_LOOP_MIN = 3
PREFILL_LOOP_MAX = 2000
PREFILL_LOOP_MAX_S = 60
# The clock of the *_window_ns stage windows: the host's wall clock, which llmprof's NVML sampler
# stamps its samples with (Rust SystemTime), so energy per stage can be integrated.
WINDOW_CLOCK = "CLOCK_REALTIME ns since the Unix epoch (time.time_ns)"


def cpu_test_mode():
    return os.environ.get(CPU_TEST_ENV) == "1"


def log(msg):
    # Under torchrun every rank logs to the same stream: name the rank.
    rank = os.environ.get("RANK") if "LOCAL_RANK" in os.environ else None
    who = "llmprof-driver" if rank is None else f"llmprof-driver[rank {rank}]"
    print(f"{who}: {msg}", file=sys.stderr, flush=True)


class PlanError(Exception):
    """The plan or the environment cannot be used: exit code 2."""


# ---------------------------------------------------------------------------------------------
# Plan


class Distributed:
    """Tensor parallelism under torchrun (plan["distributed"]).

    llmprof capture --nproc N runs this driver under `python -m torch.distributed.run
    --standalone --nproc-per-node N`; torchrun tells each process RANK, LOCAL_RANK and WORLD_SIZE.
    Each rank uses CUDA device LOCAL_RANK (of those CUDA_VISIBLE_DEVICES leaves, which --devices
    sets), joins an NCCL process group, and loads the model sharded with Hugging Face's
    tp_plan="auto". from_config has no TP plan, so rank 0 first saves the random-weight model to
    plan["distributed"]["checkpoint"] and every rank loads that. Rank 0 writes its outputs to
    plan.out_dir as a single process does; rank r > 0 writes them to raw/ranks/<r>/<pass>/. Every
    rank marks the same stages; a barrier before each timed iteration keeps the ranks in step.
    """

    KEYS = {"nproc", "checkpoint", "collective_timeout_s"}

    def __init__(self, nproc, checkpoint, rank, local_rank, world, timeout_s=300.0):
        self.nproc, self.checkpoint = nproc, checkpoint
        self.rank, self.local_rank, self.world = rank, local_rank, world
        self.timeout_s = timeout_s

    @classmethod
    def from_plan(cls, raw):
        """None without plan["distributed"]; a PlanError when torchrun's variables are missing
        or disagree with the plan."""
        if raw is None:
            return None
        _unknown(raw, cls.KEYS, "plan.distributed")
        nproc = _int(raw, "nproc", "plan.distributed", None, 1)
        checkpoint = _req(raw, "checkpoint", str, "plan.distributed")
        timeout_s = _seconds(raw, "collective_timeout_s", "plan.distributed", 300.0, 86400)
        env = {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
        missing = [k for k, v in env.items() if v is None]
        if missing:
            raise PlanError(f"plan.distributed needs torchrun's {', '.join(missing)}: run the "
                            "driver under `python -m torch.distributed.run`")
        try:
            rank, local, world = (int(env[k]) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
        except ValueError as e:
            raise PlanError(f"torchrun's RANK/LOCAL_RANK/WORLD_SIZE are not integers: {env}") from e
        if world != nproc:
            raise PlanError(f"plan.distributed.nproc is {nproc} but WORLD_SIZE is {world}")
        return cls(nproc, checkpoint, rank, local, world, timeout_s)

    def record(self):
        return {"rank": self.rank, "local_rank": self.local_rank, "world_size": self.world,
                "tensor_parallel": self.world, "backend": "nccl",
                "launcher": "torch.distributed.run --standalone"}


class Plan:
    """The checked plan. Only the standard library is needed to build it."""

    TOP_KEYS = {
        "pass", "out_dir", "model", "inputs", "stages", "warmup", "repeats", "device",
        "warmup_decode_steps", "sync_each_step", "optimize", "prefill_energy_s",
        "distributed",
    }
    MODEL_KEYS = {"config", "path", "dtype", "attn_implementation"}
    INPUT_KEYS = {"prompt_tokens", "max_new_tokens", "batch_size", "seed", "images"}
    STAGE_KEYS = {"modules"}
    OPTIMIZE_KEYS = {"compile", "cache"}

    def __init__(self, raw):
        if not isinstance(raw, dict):
            raise PlanError("the plan must be a JSON object")
        _unknown(raw, self.TOP_KEYS, "plan")

        self.pass_name = _req(raw, "pass", str, "plan")
        if self.pass_name not in PASSES:
            raise PlanError(f"plan.pass must be one of {', '.join(PASSES)}, not {self.pass_name!r}")
        self.out_dir = _req(raw, "out_dir", str, "plan")
        if not os.path.isabs(self.out_dir):
            raise PlanError(f"plan.out_dir must be an absolute path, not {self.out_dir!r}")

        model = _req(raw, "model", dict, "plan")
        _unknown(model, self.MODEL_KEYS, "plan.model")
        self.config = model.get("config")
        self.path = model.get("path")
        if (self.config is None) == (self.path is None):
            raise PlanError("plan.model needs exactly one of `config` (an HF config object) and "
                            "`path` (a local checkpoint directory)")
        if self.config is not None:
            if not isinstance(self.config, dict):
                raise PlanError("plan.model.config must be a JSON object (an HF config dict)")
            mt = self.config.get("model_type")
            if not isinstance(mt, str) or not mt:
                raise PlanError("plan.model.config.model_type is missing (e.g. \"qwen2\")")
        if self.path is not None:
            if not isinstance(self.path, str) or not self.path:
                raise PlanError("plan.model.path must be a string")
            if not os.path.isdir(self.path):
                raise PlanError(f"plan.model.path {self.path!r} is not a directory")
            if not os.path.isfile(os.path.join(self.path, "config.json")):
                raise PlanError(f"plan.model.path {self.path!r} has no config.json")
        self.dtype = _opt(model, "dtype", str, "plan.model", "bfloat16")
        if self.dtype not in DTYPES:
            raise PlanError(f"plan.model.dtype must be one of {', '.join(DTYPES)}, "
                            f"not {self.dtype!r}")
        self.attn_implementation = _opt(model, "attn_implementation", str, "plan.model", None)

        inputs = _req(raw, "inputs", dict, "plan")
        _unknown(inputs, self.INPUT_KEYS, "plan.inputs")
        self.prompt_tokens = _int(inputs, "prompt_tokens", "plan.inputs", None, 1)
        self.max_new_tokens = _int(inputs, "max_new_tokens", "plan.inputs", None, 0)
        self.batch_size = _int(inputs, "batch_size", "plan.inputs", 1, 1)
        self.seed = _int(inputs, "seed", "plan.inputs", 0, 0)
        # A folder of document pages saved as .npz (array `page`, H x W x 3 uint8): the vision
        # input of OCR / vision-language targets.
        self.images = _opt(inputs, "images", str, "plan.inputs", None)
        if self.images is not None:
            if not os.path.isdir(self.images):
                raise PlanError(f"plan.inputs.images {self.images!r} is not a directory")
            pages = sorted(f for f in os.listdir(self.images) if f.endswith(".npz"))
            if not pages:
                raise PlanError(f"plan.inputs.images {self.images!r} holds no .npz page")
            self.pages = [os.path.join(self.images, f) for f in pages]

        stages = _opt(raw, "stages", dict, "plan", {}) or {}
        _unknown(stages, self.STAGE_KEYS, "plan.stages")
        modules = _opt(stages, "modules", dict, "plan.stages", {}) or {}
        self.modules = {}
        reserved = {STAGE_PREFILL, STAGE_DECODE, *PREPARE_STAGES}
        for name, path in modules.items():
            if not name or name in reserved or name.startswith(WARMUP_PREFIX):
                raise PlanError(f"plan.stages.modules: {name!r} cannot name a sub-stage (empty, "
                                f"`prefill`, `decode`, {', '.join(PREPARE_STAGES)} and "
                                f"`{WARMUP_PREFIX}*` are taken)")
            if not isinstance(path, str) or not path:
                raise PlanError(f"plan.stages.modules.{name} must be a module path such as "
                                "\"model.vision_tower.sam_encoder\"")
            self.modules[name] = path

        self.warmup = _int(raw, "warmup", "plan", 2, 0)
        self.repeats = _int(raw, "repeats", "plan", 6, 1)
        self.device = _int(raw, "device", "plan", 0, 0)
        self.warmup_decode_steps = _int(raw, "warmup_decode_steps", "plan",
                                        self.max_new_tokens, 0)
        self.sync_each_step = _opt(raw, "sync_each_step", bool, "plan", False)
        self.prefill_energy_s = _seconds(raw, "prefill_energy_s", "plan", 0.0)

        self.distributed = Distributed.from_plan(_opt(raw, "distributed", dict, "plan", None))

        optimize = _opt(raw, "optimize", dict, "plan", {}) or {}
        _unknown(optimize, self.OPTIMIZE_KEYS, "plan.optimize")
        self.compile = _opt(optimize, "compile", str, "plan.optimize", "none")
        if self.compile not in COMPILE_MODES:
            raise PlanError(f"plan.optimize.compile must be one of {', '.join(COMPILE_MODES)}, "
                            f"not {self.compile!r}")
        self.cache = _opt(optimize, "cache", str, "plan.optimize", "dynamic")
        if self.cache not in CACHES:
            raise PlanError(f"plan.optimize.cache must be one of {', '.join(CACHES)}, "
                            f"not {self.cache!r}")


def _type_name(t):
    return {dict: "an object", str: "a string", int: "an integer", bool: "true or false"}.get(
        t, t.__name__)


def _check_type(value, typ, where):
    ok = isinstance(value, typ) and not (typ is int and isinstance(value, bool))
    if not ok:
        raise PlanError(f"{where} must be {_type_name(typ)}, not {json.dumps(value)}")
    return value


def _req(d, key, typ, where):
    if key not in d or d[key] is None:
        raise PlanError(f"{where}.{key} is missing")
    return _check_type(d[key], typ, f"{where}.{key}")


def _opt(d, key, typ, where, default):
    if d.get(key) is None:
        return default
    return _check_type(d[key], typ, f"{where}.{key}")


def _int(d, key, where, default, minimum):
    if d.get(key) is None:
        if default is None:
            raise PlanError(f"{where}.{key} is missing")
        return default
    v = _check_type(d[key], int, f"{where}.{key}")
    if v < minimum:
        raise PlanError(f"{where}.{key} must be at least {minimum}, not {v}")
    return v


def _seconds(d, key, where, default, most=PREFILL_LOOP_MAX_S):
    """A number of seconds, 0 to `most`."""
    if d.get(key) is None:
        return default
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
        raise PlanError(f"{where}.{key} must be a number of seconds, not {json.dumps(v)}")
    if not 0 <= v <= most:
        raise PlanError(f"{where}.{key} must be between 0 and {most}, not {v}")
    return float(v)


def _unknown(d, known, where):
    extra = sorted(k for k in d if k not in known and not k.startswith("_"))
    if extra:
        raise PlanError(f"{where} has unknown key(s) {', '.join(extra)}; known: "
                        f"{', '.join(sorted(known))} (keys starting with `_` are ignored)")


def load_plan(path):
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except OSError as e:
        raise PlanError(f"cannot read the plan {path!r}: {e.strerror or e}") from e
    except ValueError as e:
        raise PlanError(f"the plan {path!r} is not valid JSON: {e}") from e
    return Plan(raw)


# ---------------------------------------------------------------------------------------------
# Output files


def write_json(path, obj):
    """Write atomically (temp file + rename), so a reader never sees half a file."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, sort_keys=False, allow_nan=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_json_object(path):
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
        return obj if isinstance(obj, dict) else None
    except (OSError, ValueError):
        return None


class Metadata:
    """metadata.json: merged with what earlier passes wrote. RunMetadata keys (batch_size,
    prompt_tokens, image_tokens, decode_steps, prefill_logits, counted_flops,
    counted_flops_source) plus keys the Rust side may ignore."""

    def __init__(self, plan):
        self.plan = plan
        self.path = os.path.join(plan.out_dir, "metadata.json")
        existing = read_json_object(self.path)
        if existing is None and os.path.exists(self.path):
            log(f"warning: {self.path} is not a JSON object; starting it afresh")
        self.data = existing or {}
        self.notes = []

    def note(self, text):
        if text not in self.notes:
            self.notes.append(text)

    def pass_record(self):
        passes = self.data.setdefault("passes", {})
        if not isinstance(passes, dict):
            passes = self.data["passes"] = {}
        return passes.setdefault(self.plan.pass_name, {})

    def flush(self):
        d = self.data
        p = self.plan
        d["driver_version"] = DRIVER_VERSION
        d["batch_size"] = p.batch_size
        d["prompt_tokens"] = p.prompt_tokens
        d.setdefault("image_tokens", 0)
        d["max_new_tokens"] = p.max_new_tokens
        d["seed"] = p.seed
        d["dtype"] = p.dtype
        # Which process ran the pass: an Nsight Systems export of a torchrun job holds one per
        # rank, told apart by pid.
        self.pass_record()["pid"] = os.getpid()
        old = d.get("notes") if isinstance(d.get("notes"), list) else []
        d["notes"] = old + [n for n in self.notes if n not in old]
        write_json(self.path, d)


# ---------------------------------------------------------------------------------------------
# Stage markers: how a stage is made visible to the pass's observer.


class NullMarker:
    """baseline: nothing marked (the workload as a user would run it)."""

    def begin(self, name):
        pass

    def end(self, name):
        pass


class ProfilerMarker:
    """kineto and nsys: an NVTX range (Nsight) and a record_function (PyTorch profiler)."""

    def __init__(self, torch):
        self.torch = torch
        self.stack = []

    def begin(self, name):
        self.torch.cuda.nvtx.range_push(name)
        rf = self.torch.profiler.record_function(name)
        rf.__enter__()
        self.stack.append((name, rf))

    def end(self, name):
        # Close down to `name`: a hook whose forward raised leaves no range open behind it.
        while self.stack:
            top, rf = self.stack.pop()
            rf.__exit__(None, None, None)
            self.torch.cuda.nvtx.range_pop()
            if top == name:
                break


class SubStageTimer:
    """baseline with sub-stages: nothing a profiler sees (no NVTX, no record_function). Each
    sub-stage instance is timed on the GPU by two CUDA events, recorded on the current stream at
    its module's forward pre- and post-hook without synchronizing, and read by collect() after
    the enclosing stage's closing synchronize. The elapsed time runs from when the GPU reached
    the module's work to when it finished it, so GPU idle time waiting for the host's launches
    counts, as it does in a stage's wall time. Prefill and decode themselves are timed by the
    Runner on the host, as in every pass. In the CPU test mode the host clock stands in (CPU
    work is synchronous). Warm-up instances and calls while dynamo traces are not timed."""

    def __init__(self, torch):
        self.torch = torch
        self.clock = "host" if cpu_test_mode() else "cuda_events"
        self.stage = None  # the enclosing top-level stage
        self.open = []  # (name, start mark)
        self.done = []  # (enclosing stage, name, start mark, end mark)

    def _mark(self):
        if self.clock == "host":
            return time.perf_counter_ns()
        ev = self.torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def _timed(self, name):
        if name in (STAGE_PREFILL, STAGE_DECODE) or name.startswith(WARMUP_PREFIX):
            return False
        compiling = getattr(getattr(self.torch, "compiler", None), "is_compiling", None)
        return not (compiling and compiling())

    def begin(self, name):
        if name in (STAGE_PREFILL, STAGE_DECODE):
            self.stage = name
        elif self._timed(name):
            self.open.append((name, self._mark()))

    def end(self, name):
        if not any(n == name for n, _ in self.open):
            return
        # Close down to `name`: a hook whose forward raised leaves no range open behind it.
        while self.open:
            top, start = self.open.pop()
            self.done.append((self.stage, top, start, self._mark()))
            if top == name:
                break

    def collect(self):
        """{enclosing stage: {sub-stage: [ns per instance]}} of the instances that ended since
        the last call; call it after a synchronize (the events must have completed)."""
        out = {}
        for stage, name, a, b in self.done:
            ns = b - a if self.clock == "host" else round(a.elapsed_time(b) * 1e6)
            out.setdefault(stage, {}).setdefault(name, []).append(int(ns))
        self.done = []
        return out


class FlopMarker:
    """flops: the counter's running total at each begin/end gives each stage's FLOPs. Nested
    stages (a sub-stage inside prefill) count toward both."""

    def __init__(self):
        self.counter = None
        self.stack = []
        self.totals = {}     # stage -> FLOPs over all its instances
        self.instances = {}  # stage -> instances seen
        self.by_parent = {}  # sub-stage -> {enclosing top stage: FLOPs}
        self.inst_by_parent = {}  # sub-stage -> {enclosing top stage: instances}

    def reset(self, counter):
        self.counter = counter
        self.stack = []
        self.totals = {}
        self.instances = {}
        self.by_parent = {}
        self.inst_by_parent = {}

    def _now(self):
        return self.counter.get_total_flops() if self.counter is not None else 0

    def begin(self, name):
        self.stack.append((name, self._now()))

    def end(self, name):
        while self.stack:
            top, start = self.stack.pop()
            flops = self._now() - start
            self.totals[top] = self.totals.get(top, 0) + flops
            self.instances[top] = self.instances.get(top, 0) + 1
            if self.stack and top not in (STAGE_PREFILL, STAGE_DECODE):
                parent = self.stack[0][0]
                bp = self.by_parent.setdefault(top, {})
                bp[parent] = bp.get(parent, 0) + flops
                ip = self.inst_by_parent.setdefault(top, {})
                ip[parent] = ip.get(parent, 0) + 1
            if top == name:
                break


# ---------------------------------------------------------------------------------------------
# The workload


class TextWorkload:
    """Random prompt token ids for a decoder LM; a vision-language workload would subclass this
    to add pixel values (and image_tokens) to the prefill inputs."""

    kind = "text"
    image_tokens = 0

    def __init__(self, torch, model, plan, device):
        self.torch = torch
        emb = model.get_input_embeddings()
        vocab = getattr(emb, "num_embeddings", None)
        if vocab is None:
            vocab = model.config.get_text_config().vocab_size
        self.vocab = int(vocab)
        if self.vocab < 2:
            raise PlanError(f"the model's vocabulary has {self.vocab} entries")
        gen = torch.Generator(device=device)
        gen.manual_seed(plan.seed)
        # [0, vocab-1): never the last id, which some tokenizers reserve.
        self.input_ids = torch.randint(0, self.vocab - 1, (plan.batch_size, plan.prompt_tokens),
                                       generator=gen, device=device, dtype=torch.long)

    def prefill_kwargs(self):
        return {"input_ids": self.input_ids}


class ImageWorkload(TextWorkload):
    """A document page per sequence plus a text prompt: the image's placeholder tokens come
    first, then `prompt_tokens` random text tokens. The page is normalised as the model's image
    processor does (rescale to [0, 1], ImageNet-standard mean and std of 0.5) at the vision
    tower's input size."""

    kind = "image"

    def __init__(self, torch, model, plan, device):
        super().__init__(torch, model, plan, device)
        import numpy as np
        cfg = model.config
        # Random text must not contain the image placeholder token.
        self.input_ids[self.input_ids == int(cfg.image_token_id)] = 0
        size = getattr(getattr(cfg, "vision_config", None), "image_size", None) or 1024
        if isinstance(size, (list, tuple)):
            size = size[0]
        pages = []
        for i in range(plan.batch_size):
            page = np.load(plan.pages[i % len(plan.pages)])["page"]
            t = torch.from_numpy(page).permute(2, 0, 1).float().div(255.0)
            if t.shape[-1] != size or t.shape[-2] != size:
                t = torch.nn.functional.interpolate(t[None], size=(size, size), mode="bilinear",
                                                    align_corners=False)[0]
            pages.append(t.sub(0.5).div(0.5))
        self.pixel_values = torch.stack(pages).to(device=device, dtype=model.dtype)
        self.image_token_id = int(cfg.image_token_id)
        with torch.no_grad():
            get = getattr(getattr(model, "model", model), "get_image_features", None) \
                or model.get_image_features
            feats = get(self.pixel_values[:1])
            pooled = getattr(feats, "pooler_output", feats)
            first = pooled[0] if isinstance(pooled, (list, tuple)) else pooled[0]
            self.image_tokens = int(first.shape[0])
        img = torch.full((plan.batch_size, self.image_tokens), self.image_token_id,
                         dtype=torch.long, device=device)
        self.input_ids = torch.cat([img, self.input_ids], dim=1)

    def prefill_kwargs(self):
        return {"input_ids": self.input_ids, "pixel_values": self.pixel_values}


def make_workload(torch, model, plan, device):
    if plan.images is not None:
        return ImageWorkload(torch, model, plan, device)
    return TextWorkload(torch, model, plan, device)


class Runner:
    """Runs iterations of prefill + driven decode with a given stage marker."""

    def __init__(self, torch, model, workload, plan, logits_kw):
        self.torch = torch
        self.model = model
        self.workload = workload
        self.plan = plan
        self.logits_kw = logits_kw  # {"logits_to_keep": 1} where the forward takes it
        self.marker = NullMarker()
        self.warm = False           # warm-up iterations name their ranges warmup_*
        self.hooks = []
        self.prefill_logits = None
        self.sync = (lambda: None) if cpu_test_mode() else torch.cuda.synchronize
        self.memory = None          # a MemoryProbe in the baseline pass

    def memory_facts(self):
        """The model's weights and the device's memory now (MemoryProbe.pass_facts)."""
        probe = MemoryProbe(self.torch, None, True) if cpu_test_mode() else MemoryProbe(
            self.torch, next(self.model.parameters()).device, False)
        return probe.pass_facts(self.model)

    def stage_name(self, name):
        return WARMUP_PREFIX + name if self.warm else name

    def resolve_modules(self, modules):
        """The sub-stage modules by key; a path the model lacks is a plan error."""
        found = {}
        for key, path in modules.items():
            try:
                found[key] = self.model.get_submodule(path)
            except AttributeError as e:
                top = ", ".join(n for n, _ in self.model.named_children())
                raise PlanError(f"plan.stages.modules.{key}: the model has no module {path!r} "
                                f"({e}); its top-level modules: {top}") from e
        return found

    def install_hooks(self, modules):
        """Sub-stages: forward pre/post hooks that open/close the marker's range."""
        for key, mod in self.resolve_modules(modules).items():

            def pre(_m, _args, key=key):
                self.marker.begin(self.stage_name(key))

            def post(_m, _args, _out, key=key):
                self.marker.end(self.stage_name(key))

            self.hooks.append(mod.register_forward_pre_hook(pre))
            self.hooks.append(mod.register_forward_hook(post, always_call=True))

    @contextlib.contextmanager
    def stage(self, name):
        name = self.stage_name(name)
        self.marker.begin(name)
        try:
            yield
            self.sync()
        finally:
            self.marker.end(name)

    def iteration(self, decode_steps, record=None):
        """One prefill + decode_steps decode steps. Host times in ns, taken with
        perf_counter_ns(); no synchronize except at the end of each stage (and after each step
        with sync_each_step). `record` (a dict) is filled as the iteration goes, so a crash
        leaves what was measured. Each stage's window is also recorded on the wall clock
        (WINDOW_CLOCK), the clock of llmprof's NVML sampler, so power samples can be integrated
        over it. A static cache is reset before the prefill, outside its window."""
        torch = self.torch
        now = time.perf_counter_ns
        wall = time.time_ns
        rec = {} if record is None else record
        sync_each = self.plan.sync_each_step
        dec = self.decoder
        mem = self.memory
        with torch.no_grad():
            dec.reset()
            if mem:
                mem.start(rec)
            w0 = wall()
            t0 = now()
            with self.stage(STAGE_PREFILL):
                out = self.model(**self.workload.prefill_kwargs(), use_cache=True,
                                 **self.logits_kw, **dec.prefill_kwargs())
                tok = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
            t1 = now()
            w1 = wall()
            rec["prefill_ns"] = t1 - t0
            rec["prefill_window_ns"] = [w0, w1]
            d1, dw1 = t1, w1  # where the decode's time and window start
            if mem:
                mem.stage_end(rec, STAGE_PREFILL)
                d1, dw1 = now(), wall()  # the probe's microseconds are no stage's time
            if self.prefill_logits is None:
                self.prefill_logits = int(out.logits.shape[1])
            cache = out.past_key_values
            del out
            steps = rec["decode_step_ns"] = []
            if decode_steps > 0:
                start = d1  # so the steps add up to decode_ns exactly
                with self.stage(STAGE_DECODE):
                    for i in range(decode_steps):
                        logits, cache = dec.step(tok, cache, i)
                        tok = logits[:, -1, :].argmax(dim=-1, keepdim=True)
                        del logits
                        if sync_each:
                            self.sync()
                        t = now()
                        steps.append(t - start)
                        start = t
                t2 = now()
                rec["decode_window_ns"] = [dw1, wall()]
                if mem:
                    mem.stage_end(rec, STAGE_DECODE)
                # Without per-step syncs the last step waits for the GPU inside the stage's
                # synchronize: fold that wait into it, so the steps add up to decode_ns.
                steps[-1] += t2 - start
                rec["decode_ns"] = t2 - d1
            else:
                t2 = t1
                rec["decode_ns"] = 0
            rec["total_ns"] = t2 - t0
            if mem:
                mem.kv_cache(rec, cache, dec)
        del cache
        self.collect_sub_stages(rec)
        return rec

    def collect_sub_stages(self, rec):
        """The sub-stage times a SubStageTimer took in this iteration into rec["sub_stage_ns"]
        ({enclosing stage: {sub-stage: [ns per instance]}}), read after the last stage's
        synchronize and outside every timed interval; nothing for other markers."""
        collect = getattr(self.marker, "collect", None)
        times = collect() if collect is not None else None
        if times:
            rec["sub_stage_ns"] = times

    def prefill_loop(self, seconds, agree=None):
        """Back-to-back prefills (the measured prefill's forward and greedy pick, a static cache
        reset before each), then one synchronize: one window long enough to span many NVML power
        refreshes, for prefill energy. Sub-stages are not timed in it. They run in rounds, each
        ended by a synchronize and sized from the time per prefill so far
        (`prefill_loop_more`), until `seconds` have passed and at least PREFILL_LOOP_MIN ran (at
        most PREFILL_LOOP_MAX). Under tensor parallelism every prefill is a set of collectives,
        so every rank must run the same number: `agree` (the largest over the ranks) sizes each
        round for all. Returns the window on the wall clock (WINDOW_CLOCK) and the prefills in
        it."""
        torch, dec = self.torch, self.decoder
        marker, self.marker = self.marker, NullMarker()
        agree = agree or (lambda n: n)
        try:
            with torch.no_grad():
                self.sync()
                w0, t0 = time.time_ns(), time.perf_counter_ns()
                n, pace = 0, None
                while (more := agree(prefill_loop_more(
                        seconds, n, time.perf_counter_ns() - t0, pace))) > 0:
                    r0 = time.perf_counter_ns()
                    for _ in range(more):
                        dec.reset()
                        out = self.model(**self.workload.prefill_kwargs(), use_cache=True,
                                         **self.logits_kw, **dec.prefill_kwargs())
                        out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
                        del out
                    self.sync()
                    n += more
                    pace = (time.perf_counter_ns() - r0) / more
                t1, w1 = time.perf_counter_ns(), time.time_ns()
        finally:
            self.marker = marker
        return {"window_ns": [w0, w1], "prefills": n, "wall_ns": t1 - t0,
                "seconds_asked": seconds}

    def prepare(self):
        """Compiles and captures the decode step (plan.optimize) before the first iteration,
        under warmup_compile / warmup_graph_capture ranges, so no measured range holds it.
        Returns the optimize record (also when compiling failed: the run goes on eager)."""
        self.warm = True
        try:
            return self.decoder.prepare(self)
        finally:
            self.warm = False


class MemoryProbe:
    """Device memory per stage in the baseline pass: the allocator's peak allocated and reserved
    bytes of each stage (peaks reset at each stage's start, read after its closing synchronize),
    and, after the decode, the bytes the KV cache's tensors hold. The probe runs outside the
    stages' timed intervals. On the CPU (test mode) only the KV cache is measured."""

    def __init__(self, torch, device, cpu):
        self.torch, self.device, self.cpu = torch, device, cpu

    def start(self, rec):
        rec["memory"] = {}
        if not self.cpu:
            self.torch.cuda.reset_peak_memory_stats(self.device)

    def stage_end(self, rec, stage):
        if self.cpu:
            return
        cuda = self.torch.cuda
        rec["memory"][stage] = {
            "peak_allocated_bytes": int(cuda.max_memory_allocated(self.device)),
            "peak_reserved_bytes": int(cuda.max_memory_reserved(self.device)),
        }
        cuda.reset_peak_memory_stats(self.device)

    def kv_cache(self, rec, cache, decoder):
        """The KV cache's bytes after the decode (a static cache: its whole allocation)."""
        kv = kv_cache_bytes(self.torch, decoder.cache if decoder.cache is not None else cache)
        if kv is not None:
            rec["memory"]["kv_cache_bytes"] = kv
            rec["memory"]["kv_cache_kind"] = "static" if decoder.cache is not None else "dynamic"

    def pass_facts(self, model):
        """Weights (this GPU's share) and the device's free and total memory, once per pass."""
        # A tensor-parallel model's parameters are DTensors: count this GPU's shard.
        local = [t.to_local() if hasattr(t, "to_local") else t
                 for t in [*model.parameters(), *model.buffers()]]
        facts = {"weights_bytes": int(sum(t.numel() * t.element_size() for t in local))}
        if not self.cpu:
            free, total = self.torch.cuda.mem_get_info(self.device)
            facts.update({"free_bytes": int(free), "total_bytes": int(total),
                          "allocated_bytes": int(self.torch.cuda.memory_allocated(self.device)),
                          "reserved_bytes": int(self.torch.cuda.memory_reserved(self.device))})
        return facts


def kv_cache_bytes(torch, cache):
    """Bytes of the key/value tensors a Hugging Face cache holds (transformers' `layers[i].keys
    /values`, or the legacy tuple of (key, value) per layer); None when it holds none."""
    tensors = []
    for layer in getattr(cache, "layers", None) or []:
        tensors += [getattr(layer, n, None) for n in ("keys", "values")]
    if not tensors and isinstance(cache, (tuple, list)):
        tensors = [t for pair in cache for t in (pair if isinstance(pair, (tuple, list)) else [])]
    sizes = [t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor)]
    return int(sum(sizes)) if sizes else None


class Decoder:
    """How a decode step runs (plan.optimize): the model's own growing DynamicCache, or a
    StaticCache built once and reset before each iteration (fixed shapes); the step is the
    model's forward, eager or torch.compile'd. Compiled modes reduce-overhead and max-autotune
    replay the step as a CUDA graph (CUDAGraph Trees: the first call compiles, the second
    records the graph, later calls replay it)."""

    GRAPH_MODES = ("reduce-overhead", "max-autotune")

    def __init__(self, torch, model, plan, device, seq_len, decode_steps):
        self.torch = torch
        self.model = model
        self.plan = plan
        self.seq_len = seq_len
        self.static = plan.cache == "static"
        self.fn = model.forward
        self.graphs = False
        self.cache = None
        if self.static:
            from transformers import StaticCache
            # Room for the prompt, every decode step, and the steps prepare() primes with.
            self.max_len = seq_len + decode_steps + PREPARE_STEPS + 1
            self.cache = StaticCache(config=model.config, max_cache_len=self.max_len)
            self.positions = torch.arange(self.max_len, device=device, dtype=torch.long)

    def reset(self):
        if self.cache is not None:
            self.cache.reset()

    def prefill_kwargs(self):
        if not self.static:
            return {}
        return {"past_key_values": self.cache, "cache_position": self.positions[:self.seq_len]}

    def step(self, tok, cache, i):
        """Decode step i (0-based) after the prefill: returns (logits, cache)."""
        if self.static:
            p = self.seq_len + i
            kw = {"past_key_values": self.cache, "cache_position": self.positions[p:p + 1]}
        else:
            kw = {"past_key_values": cache}
        if self.graphs:
            # Each call is a new step: the previous replay's outputs may be overwritten.
            self.torch.compiler.cudagraph_mark_step_begin()
        out = self.fn(input_ids=tok, use_cache=True, **kw)
        return out.logits, (self.cache if self.static else out.past_key_values)

    def prepare(self, runner):
        plan, torch = self.plan, self.torch
        rec = {"compile": plan.compile, "cache": plan.cache}
        if plan.compile == "none":
            rec["status"] = "eager"
            return rec
        if cpu_test_mode() and plan.compile in self.GRAPH_MODES:
            rec["note"] = "CPU test mode: no CUDA graphs"
        rec["fullgraph"] = True
        fn = torch.compile(self.model.forward, mode=plan.compile, fullgraph=True)
        eager_fn, self.fn = self.fn, fn
        self.graphs = plan.compile in self.GRAPH_MODES and not cpu_test_mode()
        skipped = CudagraphSkips(torch, rec)
        part = "compile"
        try:
            with torch.no_grad(), skipped:
                self.reset()
                out = self.model(**runner.workload.prefill_kwargs(), use_cache=True,
                                 **runner.logits_kw, **self.prefill_kwargs())
                tok = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
                cache = out.past_key_values
                del out
                t0 = time.perf_counter()
                with runner.stage(PREPARE_STAGES[0]):
                    logits, cache = self.step(tok, cache, 0)
                    tok = logits[:, -1, :].argmax(dim=-1, keepdim=True)
                rec["compile_s"] = round(time.perf_counter() - t0, 3)
                part = "graph capture" if self.graphs else "second compiled call"
                t0 = time.perf_counter()
                with runner.stage(PREPARE_STAGES[1] if self.graphs else PREPARE_STAGES[2]):
                    for i in range(1, PREPARE_STEPS):
                        logits, cache = self.step(tok, cache, i)
                        tok = logits[:, -1, :].argmax(dim=-1, keepdim=True)
                key = "capture_s" if self.graphs else "warm_calls_s"
                rec[key] = round(time.perf_counter() - t0, 3)
                del logits, cache
            rec["status"] = "ok"
        except Exception as e:  # noqa: BLE001 - any compile failure: record it, run eager
            self.fn, self.graphs = eager_fn, False
            rec["status"] = "failed"
            rec["failed_part"] = part
            rec["error"] = f"{type(e).__name__}: {e}".strip()[:4000]
            rec["where"] = failure_site(e)
            log(f"torch.compile({plan.compile}) failed in {part} at {rec['where']}: "
                f"{rec['error'].splitlines()[0][:300]}; measuring the eager step instead")
            try:
                torch._dynamo.reset()
            except Exception:  # noqa: BLE001
                pass
            runner.sync()
        return rec


# Decode steps prepare() runs: the compiling call, then the CUDA graph's recording and first
# replay (CUDAGraph Trees record on the second call).
PREPARE_STEPS = 3


class CudagraphSkips:
    """Whether Inductor skipped CUDA graphs while compiling ("skipping cudagraphs due to ..."):
    the step then runs compiled but without a graph, which the run must say. Read from
    Inductor's `cudagraph_skips` counter, with the reason from its perf-hint log where that
    logger emits."""

    def __init__(self, torch, rec):
        import logging
        self.torch = torch
        self.rec = rec
        self.logging = logging
        self.messages = []
        self.before = self._count()

    def _count(self):
        try:
            from torch._dynamo.utils import counters
            return int(counters["inductor"]["cudagraph_skips"])
        except Exception:  # noqa: BLE001 - the counter is internal: absent means unknown
            return None

    def __enter__(self):
        messages = self.messages

        class Handler(self.logging.Handler):
            def emit(self, record):
                try:
                    msg = record.getMessage()
                except Exception:  # noqa: BLE001
                    return
                if "skipping cudagraphs" in msg and len(messages) < 10:
                    messages.append(msg[:500])

        self.handler = Handler()
        self.loggers = [self.logging.getLogger(n) for n in
                        ("torch._inductor", "torch._inductor.cudagraph_utils.__perf_hints")]
        for lg in self.loggers:
            lg.addHandler(self.handler)
        return self

    def __exit__(self, *exc):
        for lg in self.loggers:
            lg.removeHandler(self.handler)
        after = self._count()
        skips = (after - self.before) if None not in (after, self.before) else 0
        if skips > 0 or self.messages:
            self.rec["cudagraph_skipped"] = list(dict.fromkeys(self.messages)) or [
                f"Inductor skipped CUDA graphs {skips} time(s) (counters['inductor']"
                "['cudagraph_skips']); TORCH_LOGS=perf_hints prints why"]
        return False


def failure_site(e):
    """Where a compile failure points: the last user-code frame dynamo names ('from user code:'
    ... File "x.py", line N, in f), else the innermost traceback frame outside torch."""
    import re
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\w+)', str(e))
    if frames:
        path, line, fn = frames[-1]
        return f"{os.path.basename(path)}:{line} in {fn}"
    tb = traceback.extract_tb(e.__traceback__)
    outside = [f for f in tb if "/torch/" not in f.filename] or tb
    if outside:
        f = outside[-1]
        return f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}"
    return "unknown"


# ---------------------------------------------------------------------------------------------
# Model construction


def import_stack():
    try:
        import torch  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure means no usable torch
        raise PlanError(f"cannot import torch with {sys.executable}: {e}") from e
    try:
        import transformers  # noqa: F401
    except Exception as e:  # noqa: BLE001
        raise PlanError(f"cannot import transformers with {sys.executable}: {e}") from e
    import torch
    import transformers
    return torch, transformers


def make_config(transformers, config):
    rest = dict(config)
    model_type = rest.pop("model_type")
    mapping = transformers.CONFIG_MAPPING
    if model_type not in mapping:
        near = sorted(k for k in mapping.keys() if model_type.split("_")[0] in k)[:12]
        hint = f"; similar: {', '.join(near)}" if near else ""
        raise PlanError(f"unknown model_type {model_type!r} for transformers "
                        f"{transformers.__version__}{hint}")
    try:
        return mapping[model_type](**rest)
    except Exception as e:  # noqa: BLE001 - the config class validates its own arguments
        raise PlanError(f"plan.model.config does not make a {model_type} config: "
                        f"{type(e).__name__}: {e}") from e


def model_classes(transformers):
    # Decoder LMs first; a vision-language model without a causal-LM mapping falls back to
    # the image-text-to-text class (it is then run on text alone until image inputs exist).
    names = ("AutoModelForCausalLM", "AutoModelForImageTextToText")
    return [getattr(transformers, n) for n in names if hasattr(transformers, n)]


MOE_KEYS = ("num_experts", "n_routed_experts", "num_local_experts")


def is_moe(config):
    cfg = config.get("text_config", config) if isinstance(config, dict) else {}
    return any(isinstance(cfg.get(k), int) and cfg.get(k) > 1 for k in MOE_KEYS)


def build_model(torch, transformers, plan, device, meta, hf_config=None, attn=None):
    dtype = getattr(torch, plan.dtype)
    kwargs = {"dtype": dtype}
    attn = attn or plan.attn_implementation
    if attn:
        kwargs["attn_implementation"] = attn
    # FlopCounterMode does not count transformers' default `grouped_mm` experts: count MoE
    # FLOPs with the eager (per-expert matmul) implementation.
    if plan.pass_name == "flops" and plan.config is not None and is_moe(plan.config):
        kwargs["experts_implementation"] = "eager"
    last = None
    if plan.config is not None and plan.distributed is not None:
        cfg = hf_config if hf_config is not None else make_config(transformers, plan.config)
        model = build_tp_model(torch, transformers, plan, meta, cfg, kwargs)
        model.eval()
        return model, f"config (random weights), tensor parallel over {plan.distributed.world}"
    if plan.config is not None:
        cfg = hf_config if hf_config is not None else make_config(transformers, plan.config)
        for cls in model_classes(transformers):
            try:
                with torch.device(device):
                    try:
                        model = cls.from_config(cfg, **kwargs)
                    except TypeError as e:
                        if "experts_implementation" not in kwargs:
                            raise
                        meta.note(f"flops: this transformers has no experts_implementation ({e}); "
                                  "MoE FLOPs may be undercounted")
                        kwargs.pop("experts_implementation")
                        model = cls.from_config(cfg, **kwargs)
                if "experts_implementation" in kwargs:
                    meta.note("flops: MoE experts counted with experts_implementation=eager "
                              "(FlopCounterMode does not see grouped_mm)")
                break
            except ValueError as e:  # "Unrecognized configuration class": try the next class
                if "Unrecognized configuration class" not in str(e):
                    raise
                last = e
        else:
            raise PlanError(f"transformers has no causal-LM model for {cfg.model_type!r}: {last}")
        source = "config (random weights)"
    else:
        for cls in model_classes(transformers):
            try:
                model = cls.from_pretrained(plan.path, local_files_only=True, **kwargs)
                break
            except ValueError as e:
                if "Unrecognized configuration class" not in str(e):
                    raise
                last = e
        else:
            raise PlanError(f"transformers has no causal-LM model for {plan.path!r}: {last}")
        model = model.to(device)
        source = f"checkpoint {plan.path}"
    model.eval()
    if type(model).__name__.endswith(("ForConditionalGeneration", "ForImageTextToText")):
        meta.note(f"{type(model).__name__} has no causal-LM class; run on text tokens only")
    return model, source


def attn_impl_of(model):
    return getattr(model.config, "_attn_implementation", None)


def switch_attn(model, impl):
    """Switch the attention implementation in place; returns what the model now uses."""
    if hasattr(model, "set_attn_implementation"):
        try:
            model.set_attn_implementation(impl)
            return attn_impl_of(model)
        except Exception:  # noqa: BLE001 - fall back to setting the config field
            pass
    for cfg in {id(c): c for c in _all_configs(model)}.values():
        try:
            cfg._attn_implementation = impl
        except Exception:  # noqa: BLE001
            pass
    return attn_impl_of(model)


def _all_configs(model):
    for m in model.modules():
        cfg = getattr(m, "config", None)
        if cfg is not None and hasattr(cfg, "_attn_implementation"):
            yield cfg


def logits_kwargs(model):
    import inspect
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return {}
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return {name: 1}
    return {}


def versions(torch, transformers):
    cudnn = None
    try:
        cudnn = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001
        pass
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
    }


def device_info(torch, index):
    props = torch.cuda.get_device_properties(index)
    info = {
        "name": torch.cuda.get_device_name(index),
        "index": index,
        "capability": f"{props.major}.{props.minor}",
        "total_memory_bytes": int(props.total_memory),
        "multi_processor_count": int(props.multi_processor_count),
    }
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        info["uuid"] = str(uuid)
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        info["cuda_visible_devices"] = cvd
    return info


# ---------------------------------------------------------------------------------------------
# Passes


def summarize(iterations):
    """Mean/median/min/max/n of the stage and decode-step times, in ms."""

    def stats(xs):
        xs = sorted(xs)
        if not xs:
            return None
        n = len(xs)
        med = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
        return {"mean": sum(xs) / n, "median": med, "min": xs[0], "max": xs[-1], "n": n}

    ms = 1e-6
    steps = [s * ms for it in iterations for s in it.get("decode_step_ns", [])]
    out = {
        "prefill_ms": stats([it["prefill_ns"] * ms for it in iterations if "prefill_ns" in it]),
        "decode_ms": stats([it["decode_ns"] * ms for it in iterations if "decode_ns" in it]),
        "total_ms": stats([it["total_ns"] * ms for it in iterations if "total_ns" in it]),
        "decode_step_ms": stats(steps),
    }
    return out


def run_timed(ctx, runner, file_name, repeats, session=None):
    """Warm-up, then `repeats` measured iterations; each iteration inside `session()` when
    given (a fresh profiler session per iteration), outside its timing."""
    plan, meta = ctx["plan"], ctx["meta"]
    session = session or contextlib.nullcontext
    doc = {
        "pass": plan.pass_name,
        "complete": False,
        "batch_size": plan.batch_size,
        "prompt_tokens": plan.prompt_tokens,
        "max_new_tokens": plan.max_new_tokens,
        "sync_each_step": plan.sync_each_step,
        "stage_markers": isinstance(runner.marker, ProfilerMarker),
        "sub_stage_clock": getattr(runner.marker, "clock", None),
        "window_clock": WINDOW_CLOCK,
        "warmup_iterations": [],
        "iterations": [],
    }
    path = os.path.join(plan.out_dir, file_name)
    ctx["partial"] = lambda: write_json(path, doc)

    # Compile and capture first: outside every measured range and the profiler's window.
    doc["optimize"] = runner.prepare()
    record_optimize(meta, doc["optimize"])
    runner.warm = True
    for i in range(plan.warmup):
        log(f"warm-up {i + 1}/{plan.warmup}")
        rec = {}
        doc["warmup_iterations"].append(rec)
        rank_barrier(ctx["torch"], plan)
        with session():
            runner.iteration(plan.warmup_decode_steps, rec)
    runner.warm = False

    for i in range(repeats):
        log(f"measured {i + 1}/{repeats}")
        rec = {}
        doc["iterations"].append(rec)
        rank_barrier(ctx["torch"], plan)
        with session():
            runner.iteration(plan.max_new_tokens, rec)
    doc["summary"] = summarize(doc["iterations"])
    doc["complete"] = True
    write_json(path, doc)
    ctx["partial"] = None
    s = doc["summary"]
    log(f"prefill {s['prefill_ms']['median']:.2f} ms, decode {s['decode_ms']['median']:.2f} ms "
        f"(median of {repeats}), wrote {file_name}")
    steps = [plan.max_new_tokens] * repeats if plan.max_new_tokens > 0 else []
    meta.pass_record()["decode_steps"] = steps
    meta.data["decode_steps"] = steps
    return doc


def record_optimize(meta, rec):
    """The pass's compile record into metadata.json, and a note the run shows."""
    meta.pass_record()["optimize"] = rec
    if rec.get("status") == "ok":
        parts = [f"compile {rec['compile_s']:.1f} s"]
        if "capture_s" in rec:
            parts.append(f"graph capture {rec['capture_s']:.2f} s")
        meta.note(f"{meta.plan.pass_name}: torch.compile(mode={rec['compile']!r}, fullgraph=True) "
                  f"of the decode step before the warm-up, outside every measured range "
                  f"({', '.join(parts)})")
    elif rec.get("status") == "failed":
        meta.note(f"{meta.plan.pass_name}: torch.compile(mode={rec['compile']!r}) failed in "
                  f"{rec['failed_part']} at {rec['where']}: "
                  f"{rec['error'].splitlines()[0][:300]}; the decode step ran eager")
    for msg in rec.get("cudagraph_skipped", [])[:1]:
        meta.note(f"{meta.plan.pass_name}: compiled without CUDA graphs: {msg}")


def pass_baseline(ctx, runner):
    plan = ctx["plan"]
    ctx["meta"].note("baseline: no profiler and no stage markers (no NVTX or record_function); "
                     "the same synchronize points as the other passes")
    if plan.modules:
        runner.marker = SubStageTimer(ctx["torch"])
        runner.install_hooks(plan.modules)
        ctx["meta"].note(f"baseline: sub-stages timed by {runner.marker.clock} at their modules' "
                         "forward hooks, without synchronizing at their boundaries "
                         "(sub_stage_ns)")
    torch = ctx["torch"]
    cpu = cpu_test_mode()
    runner.memory = MemoryProbe(torch, None if cpu else torch.device("cuda", plan.device), cpu)
    doc = run_timed(ctx, runner, "baseline.json", plan.repeats)
    runner.memory = None
    doc["memory"] = memory_summary(runner.memory_facts(), doc["iterations"], plan,
                                   runner.decoder.seq_len)
    write_json(os.path.join(plan.out_dir, "baseline.json"), doc)
    prefill_energy_loop(ctx, runner, doc)


def memory_summary(facts, iterations, plan, seq_len):
    """The baseline's memory: the pass facts, each stage's largest peak over the measured
    iterations, and the KV cache with the tokens it held (the prefill's sequence, image tokens
    included, plus the decode steps) and the batch."""
    out = dict(facts)
    for stage in (STAGE_PREFILL, STAGE_DECODE):
        peaks = [it["memory"][stage] for it in iterations if stage in it.get("memory", {})]
        if peaks:
            out[stage] = {k: max(p[k] for p in peaks) for k in peaks[0]}
    kv = [it["memory"]["kv_cache_bytes"] for it in iterations
          if "kv_cache_bytes" in it.get("memory", {})]
    if kv:
        out["kv_cache_bytes"] = max(kv)
        out["kv_cache_kind"] = iterations[-1]["memory"].get("kv_cache_kind")
        out["kv_tokens"] = seq_len + plan.max_new_tokens
        out["batch_size"] = plan.batch_size
    return out


def prefill_loop_more(seconds, n, elapsed_ns, pace_ns):
    """How many more back-to-back prefills to run after `n` took `elapsed_ns`, the last round
    at `pace_ns` each: none once `seconds` have passed and PREFILL_LOOP_MIN ran, one to learn
    the pace, else enough to fill the rest of `seconds` at the last round's pace (a slow first
    prefill does not shorten the rest), at least up to PREFILL_LOOP_MIN, at most up to
    PREFILL_LOOP_MAX."""
    if n >= PREFILL_LOOP_MAX or (n >= PREFILL_LOOP_MIN and elapsed_ns >= seconds * 1e9):
        return 0
    if n == 0 or pace_ns is None:
        return 1
    rest = math.ceil(max(seconds * 1e9 - elapsed_ns, 0) / max(pace_ns, 1))
    return min(PREFILL_LOOP_MAX - n, max(rest, PREFILL_LOOP_MIN - n, 1))


def prefill_energy_loop(ctx, runner, doc):
    """After the measured iterations, back-to-back prefills for plan.prefill_energy_s seconds
    (Runner.prefill_loop), into doc["prefill_loop"] and baseline.json."""
    plan = ctx["plan"]
    if plan.prefill_energy_s <= 0:
        return
    log(f"prefill loop for energy ({plan.prefill_energy_s:g} s)")
    agree = functools.partial(agree_max, ctx["torch"], plan)
    doc["prefill_loop"] = loop = runner.prefill_loop(plan.prefill_energy_s, agree)
    write_json(os.path.join(plan.out_dir, "baseline.json"), doc)
    ctx["meta"].note(f"baseline: {loop['prefills']} back-to-back prefills over "
                     f"{loop['wall_ns'] / 1e9:.2f} s after the measured iterations, for prefill "
                     "energy (prefill_loop)")


# Device calibration: one large GEMM and one device-to-device copy, timed with CUDA events.
CAL_GEMM_N = 8192
CAL_GEMM_REPS = 20
CAL_COPY_BYTES = 1 << 30
CAL_COPY_REPS = 10


def calibrate(ctx):
    """The calibrate pass (deep mode; no model is built): measured ceilings for analysis (RunMetadata measured_tflops / measured_gbps): a
    CAL_GEMM_N^3 matmul in the model's dtype (2 N^3 FLOPs each) and a CAL_COPY_BYTES
    device-to-device copy counted as read + write (2 x bytes), each the mean of its reps after
    warm-up."""
    torch, plan, meta = ctx["torch"], ctx["plan"], ctx["meta"]
    dev = torch.device("cuda", plan.device)
    dtype = getattr(torch, plan.dtype)

    def timed(fn, reps):
        for _ in range(3):
            fn()
        torch.cuda.synchronize(dev)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / reps  # seconds per rep

    n = CAL_GEMM_N
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    c = torch.empty(n, n, device=dev, dtype=dtype)
    gemm_s = timed(lambda: torch.matmul(a, b, out=c), CAL_GEMM_REPS)
    del a, b, c
    src = torch.empty(CAL_COPY_BYTES, device=dev, dtype=torch.uint8)
    dst = torch.empty_like(src)
    copy_s = timed(lambda: dst.copy_(src), CAL_COPY_REPS)
    del src, dst
    torch.cuda.empty_cache()
    tflops = 2 * n ** 3 / gemm_s / 1e12
    gbps = 2 * CAL_COPY_BYTES / copy_s / 1e9
    log(f"calibration: {plan.dtype} GEMM {n}^3 {tflops:.1f} TFLOP/s, device copy {gbps:.0f} GB/s")
    meta.data["measured_tflops"] = round(tflops, 2)
    meta.data["measured_gbps"] = round(gbps, 1)
    meta.data["calibration"] = {
        "gemm": {"n": n, "dtype": plan.dtype, "reps": CAL_GEMM_REPS, "s_per_rep": gemm_s},
        "copy": {"bytes": CAL_COPY_BYTES, "reps": CAL_COPY_REPS, "s_per_rep": copy_s,
                 "counted_bytes": "2 x bytes (read + write)"},
    }


def pass_nsys(ctx, runner):
    torch, plan = ctx["torch"], ctx["plan"]
    runner.marker = ProfilerMarker(torch)
    runner.install_hooks(plan.modules)
    ctx["meta"].note("nsys: warm-up iterations use NVTX ranges warmup_prefill/warmup_decode "
                     "(and warmup_<sub-stage>); measured ranges are prefill/decode/<sub-stage>")
    run_timed(ctx, runner, "nsys_timing.json", plan.repeats)


class ProfilerSessions:
    """A fresh torch.profiler session per iteration, warm-up included: the profiler's start-up
    in this process (CUPTI's initialisation, the first session's skew) falls on the warm-up
    sessions, so every measured iteration is timed under a profiler past its start-up, like the
    baseline's steady iterations, while the trace holds one iteration. Each session is closed
    (its events processed) outside the iteration's timing; the last one is kept for export."""

    def __init__(self, make):
        self.make = make
        self.last = None
        self.count = 0

    @contextlib.contextmanager
    def __call__(self):
        # Free the previous session's events before the next iteration, not during it.
        self.last = None
        gc.collect()
        prof = self.make()
        with prof:
            yield
        self.last = prof
        self.count += 1


def pass_kineto(ctx, runner):
    torch, plan = ctx["torch"], ctx["plan"]
    from torch.profiler import ProfilerActivity, profile
    runner.marker = ProfilerMarker(torch)
    runner.install_hooks(plan.modules)
    warnings.filterwarnings("ignore", message="Warning: Profiler clears events")
    acts = [ProfilerActivity.CPU] if cpu_test_mode() else [ProfilerActivity.CPU,
                                                           ProfilerActivity.CUDA]
    sessions = ProfilerSessions(lambda: profile(activities=acts, record_shapes=True))
    run_timed(ctx, runner, "kineto_timing.json", plan.repeats, session=sessions)
    meta = ctx["meta"]
    meta.note(f"kineto: each of the {plan.warmup} warm-up and {plan.repeats} measured "
              "iterations ran under its own torch.profiler session (the profiler's start-up "
              "falls on the warm-up); kineto_timing.json times the measured ones, "
              "kineto_trace.json holds the last")
    # The trace holds one measured iteration.
    steps = [plan.max_new_tokens] if plan.max_new_tokens > 0 else []
    meta.pass_record()["decode_steps"] = steps
    meta.data["decode_steps"] = steps
    meta.pass_record()["profiler_sessions"] = sessions.count
    trace = os.path.join(plan.out_dir, "kineto_trace.json")
    log("exporting kineto_trace.json")
    t0 = time.perf_counter()
    sessions.last.export_chrome_trace(trace)
    log(f"wrote kineto_trace.json ({os.path.getsize(trace) / 1e6:.1f} MB, "
        f"{time.perf_counter() - t0:.1f} s)")
    meta.pass_record()["trace"] = "kineto_trace.json"


def pass_flops(ctx, runner):
    torch, plan, meta, model = ctx["torch"], ctx["plan"], ctx["meta"], ctx["model"]
    from torch.utils.flop_counter import FlopCounterMode
    marker = FlopMarker()
    runner.marker = marker
    runner.install_hooks(plan.modules)
    used = attn_impl_of(model)
    fallback = None
    for attempt in (1, 2):
        log(f"counting FLOPs (attn_implementation={used})")
        try:
            with FlopCounterMode(display=False) as counter:
                marker.reset(counter)
                runner.iteration(plan.max_new_tokens)
            break
        except Exception as e:  # noqa: BLE001 - FlopCounterMode fails on some kernels
            if attempt == 2 or used == "eager":
                raise
            fallback = f"{type(e).__name__}: {e}".strip()
            log(f"FLOP counting failed with attn_implementation={used} ({fallback}); "
                "switching to eager attention")
            runner.sync()
            used = switch_attn(model, "eager")
            if used != "eager":
                raise RuntimeError(f"cannot switch the model to eager attention (it uses {used})")
    if plan.compile != "none":
        meta.note(f"flops: counted on the eager decode step (compile={plan.compile} does not "
                  "change the FLOPs the model does; FlopCounterMode cannot see compiled graphs)")
    flops = {}
    detail = {}
    for stage, total in marker.totals.items():
        n = marker.instances[stage]
        flops[stage] = total / n if n else 0.0
        d = {"total": total, "instances": n}
        if stage in marker.by_parent:
            d["by_stage"] = marker.by_parent[stage]
            d["instances_by_stage"] = marker.inst_by_parent[stage]
        detail[stage] = d
    if plan.max_new_tokens > 0 and STAGE_DECODE in detail:
        detail[STAGE_DECODE]["steps"] = plan.max_new_tokens
        detail[STAGE_DECODE]["per_step_mean"] = detail[STAGE_DECODE]["total"] / plan.max_new_tokens
    for key in plan.modules:
        if key not in flops:
            meta.note(f"flops: sub-stage {key!r} ({plan.modules[key]}) never ran")
    write_json(os.path.join(plan.out_dir, "flops.json"), flops)
    parts = ", ".join(f"{k} {v:.4g}" for k, v in flops.items())
    log(f"FLOPs per instance: {parts}; wrote flops.json")
    meta.data["counted_flops"] = {**(meta.data.get("counted_flops") or {}), **flops}
    meta.data["counted_flops_source"] = FLOPS_SOURCE
    meta.data["counted_flops_detail"] = detail
    meta.data["counted_flops_attn_implementation"] = used
    rec = meta.pass_record()
    rec["attn_implementation"] = used
    rec["decode_steps"] = [plan.max_new_tokens] if plan.max_new_tokens > 0 else []
    meta.data.setdefault("decode_steps", rec["decode_steps"])
    if fallback:
        rec["attn_fallback_reason"] = fallback
        meta.note(f"flops: FlopCounterMode failed with attn_implementation="
                  f"{ctx.get('attn_initial')} ({fallback[:200]}); counted with eager "
                  "attention instead")
    meta.note("flops: counted by FlopCounterMode at aten level (matmuls, convolutions, "
              "attention kernels it knows); elementwise ops are not counted; attention, where "
              "counted, is the full prompt x prompt score matrix in prefill (no causal "
              "halving); a sub-stage's FLOPs per instance are averaged over all its instances "
              "(counted_flops_detail splits them by enclosing stage)")


PASS_FUNCS = {"baseline": pass_baseline, "kineto": pass_kineto, "nsys": pass_nsys,
              "flops": pass_flops}


# ---------------------------------------------------------------------------------------------
# Main


def setup(plan, ctx):
    """Imports, CUDA checks, output directory. Raises PlanError."""
    try:
        os.makedirs(plan.out_dir, exist_ok=True)
    except OSError as e:
        raise PlanError(f"cannot create out_dir {plan.out_dir!r}: {e.strerror or e}") from e
    if not os.access(plan.out_dir, os.W_OK):
        raise PlanError(f"out_dir {plan.out_dir!r} is not writable")
    torch, transformers = import_stack()
    ctx["torch"], ctx["transformers"] = torch, transformers
    if plan.config is not None:
        ctx["hf_config"] = make_config(transformers, plan.config)
    if cpu_test_mode():
        log(f"{CPU_TEST_ENV}=1: test mode on the CPU, timings mean nothing")
        return
    if not torch.cuda.is_available():
        raise PlanError(CUDA_MISSING)
    n = torch.cuda.device_count()
    if plan.device >= n:
        raise PlanError(f"plan.device is {plan.device} but only {n} CUDA device(s) are visible")
    torch.cuda.set_device(plan.device)
    if plan.distributed is not None:
        init_distributed(torch, plan)


def init_distributed(torch, plan):
    """Joins the NCCL process group of this rank's torchrun job, on device plan.device."""
    import torch.distributed as dist  # noqa: PLC0415 - only under torchrun
    try:
        # A rank left waiting in a collective its peers never join (they crashed, or issued
        # fewer) fails after the timeout, naming itself, instead of hanging the group.
        dist.init_process_group("nccl", device_id=torch.device("cuda", plan.device),
                                timeout=datetime.timedelta(seconds=plan.distributed.timeout_s))
    except Exception as e:  # noqa: BLE001 - NCCL's errors are many; say which rank failed
        raise PlanError(f"rank {plan.distributed.rank}: could not join the NCCL process group: "
                        f"{e}") from e
    log(f"rank {plan.distributed.rank} of {plan.distributed.world} on cuda:{plan.device}")


def agree_max(torch, plan, n):
    """The largest `n` over the ranks (all-reduce MAX): a count every rank then loops over, so
    each issues the same collectives. `n` itself without torchrun."""
    if plan.distributed is None:
        return n
    t = torch.tensor([n], dtype=torch.int64, device=f"cuda:{plan.device}")
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
    return int(t.item())


def rank_barrier(torch, plan):
    """Waits for every rank (a no-op without torchrun)."""
    if plan.distributed is not None:
        torch.distributed.barrier()


def build_tp_model(torch, transformers, plan, meta, cfg, kwargs):
    """The random-weight model sharded across the ranks with tp_plan="auto": rank 0 saves it to
    the plan's checkpoint directory (once per capture), the others wait, then every rank loads it.
    A model type without a TP plan raises PlanError saying it cannot shard."""
    d = plan.distributed
    ckpt = d.checkpoint
    if d.rank == 0 and not os.path.isfile(os.path.join(ckpt, "config.json")):
        torch.manual_seed(plan.seed)
        model = transformers.AutoModelForCausalLM.from_config(cfg, **kwargs)
        model.save_pretrained(ckpt)
        del model
        meta.note(f"tensor parallel: the random-weight model was saved to {ckpt} by rank 0 and "
                  f"loaded sharded by all {d.world} ranks (tp_plan=auto)")
    rank_barrier(torch, plan)
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(ckpt, tp_plan="auto", **kwargs)
    except (ValueError, NotImplementedError, KeyError, AttributeError) as e:
        raise PlanError(f"{cfg.model_type!r} cannot shard with tp_plan=\"auto\" on {d.world} "
                        f"ranks: {e}") from e
    # transformers places the shards on the rank's GPU; a world of 1 is not sharded and stays
    # where it loaded (the CPU).
    if any(p.device.type != "cuda" for p in model.parameters()):
        model = model.to(torch.device("cuda", plan.device))
    return model


def run(plan, ctx):
    meta = ctx["meta"]
    torch, transformers = ctx["torch"], ctx["transformers"]
    cpu = cpu_test_mode()
    device = torch.device("cpu") if cpu else torch.device("cuda", plan.device)
    rec = meta.pass_record()
    rec.clear()
    rec.update({"finished": False, "started_at": _utc_now()})
    meta.data["versions"] = versions(torch, transformers)
    meta.data["device"] = ({"name": "cpu", "index": None, "test_mode": CPU_TEST_ENV} if cpu
                           else device_info(torch, plan.device))
    if plan.distributed is not None:
        meta.data["distributed"] = plan.distributed.record()
    meta.flush()
    if plan.pass_name == "calibrate":
        # Its own process and NVML window, so the GEMM's power draw (which can hit the power
        # cap) never falls inside the baseline pass.
        if cpu:
            raise PlanError("the calibrate pass needs a CUDA device")
        calibrate(ctx)
        rec["finished"] = True
        rec["finished_at"] = _utc_now()
        return

    log("building model")
    t0 = time.perf_counter()
    torch.manual_seed(plan.seed)
    model, source = build_model(torch, transformers, plan, device, meta, ctx.get("hf_config"))
    build_s = time.perf_counter() - t0
    ctx["model"] = model
    attn = attn_impl_of(model)
    ctx["attn_initial"] = attn
    n_params = sum(p.numel() for p in model.parameters())
    log(f"built {type(model).__name__} from {source}: {n_params / 1e6:.1f}M parameters, "
        f"attn_implementation={attn}, {build_s:.1f} s")
    meta.data["model_class"] = type(model).__name__
    meta.data["model_source"] = source
    meta.data["model_params"] = n_params
    meta.data["model_type"] = getattr(model.config, "model_type", None)
    meta.data["attn_implementation"] = attn
    rec["attn_implementation"] = attn
    rec["model_build_s"] = round(build_s, 3)

    workload = make_workload(torch, model, plan, device)
    meta.data["image_tokens"] = workload.image_tokens
    meta.data["workload_kind"] = workload.kind
    kw = logits_kwargs(model)
    if not kw:
        meta.note("the model's forward takes no logits_to_keep: prefill computes logits for "
                  "every prompt token")
    runner = Runner(torch, model, workload, plan, kw)
    runner.resolve_modules(plan.modules)
    seq_len = int(workload.input_ids.shape[1])
    runner.decoder = Decoder(torch, model, plan, device, seq_len,
                             max(plan.max_new_tokens, plan.warmup_decode_steps))
    meta.data["optimize"] = {"compile": plan.compile, "cache": plan.cache}
    if plan.cache == "static":
        meta.note(f"cache=static: a transformers StaticCache of {runner.decoder.max_len} "
                  "positions, reset before each iteration outside the measured ranges; "
                  "attention runs over the whole cache length (masked)")
    if plan.compile != "none" and plan.cache == "dynamic":
        meta.note(f"compile={plan.compile} with cache=dynamic: the cache grows every step, so "
                  "the compiled step may recompile or re-record graphs as shapes change; "
                  "cache=static gives one graph")
    ctx["runner"] = runner
    meta.note("one iteration = prefill (forward over the prompt with use_cache, logits_to_keep=1, "
              "plus the greedy pick of the first new token) then decode: max_new_tokens driven "
              "greedy steps of [batch, 1] with the KV cache, never stopping at EOS (so "
              "max_new_tokens + 1 tokens are generated)")
    if plan.sync_each_step:
        meta.note("sync_each_step: torch.cuda.synchronize() after every decode step, so "
                  "decode_step_ns is each step's wall time, GPU work included")
    else:
        meta.note("decode_step_ns: host intervals between decode-step starts without per-step "
                  "synchronize (launch time while the CPU runs ahead); the last step includes "
                  "the stage's final synchronize, so the steps add up to decode_ns")
    if plan.warmup_decode_steps != plan.max_new_tokens:
        meta.note(f"warm-up iterations ran {plan.warmup_decode_steps} decode steps")

    if not cpu:
        torch.cuda.reset_peak_memory_stats(plan.device)
    t0 = time.perf_counter()
    PASS_FUNCS[plan.pass_name](ctx, runner)
    rec["wall_s"] = round(time.perf_counter() - t0, 3)
    if not cpu:
        rec["max_memory_allocated_bytes"] = int(torch.cuda.max_memory_allocated(plan.device))
    if runner.prefill_logits is not None:
        meta.data["prefill_logits"] = runner.prefill_logits
    meta.data["sub_stages"] = dict(plan.modules)
    rec["finished"] = True
    rec["finished_at"] = _utc_now()


def rank_out_dir(out_dir, rank):
    """Where rank r > 0 writes what rank 0 writes to raw/<pass>/: raw/ranks/<r>/<pass>/, so
    that raw/ranks/<r>/ reads like a single process's raw/."""
    raw, pass_dir = os.path.split(os.path.normpath(out_dir))
    return os.path.join(raw, "ranks", str(rank), pass_dir)


def _utc_now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        log("usage: driver.py PLAN.json")
        return EXIT_BAD_PLAN
    ctx = {}
    try:
        plan = load_plan(argv[1])
        if plan.distributed is not None:
            plan.device = plan.distributed.local_rank
            if plan.distributed.rank > 0:
                plan.out_dir = rank_out_dir(plan.out_dir, plan.distributed.rank)
        ctx["plan"] = plan
        log(f"pass {plan.pass_name}: out_dir {plan.out_dir}")
        setup(plan, ctx)
        ctx["meta"] = Metadata(plan)
    except PlanError as e:
        log(f"error: {e}")
        return EXIT_BAD_PLAN

    meta = ctx["meta"]
    code = EXIT_OK
    error = None
    try:
        run(plan, ctx)
    except PlanError as e:
        error = str(e)
        log(f"error: {e}")
        code = EXIT_BAD_PLAN
    except BaseException as e:  # noqa: BLE001 - report, flush what was measured, exit 3
        traceback.print_exc(file=sys.stderr)
        error = f"{type(e).__name__}: {e}".strip()
        log(f"error: the {plan.pass_name} pass crashed: {error}")
        code = 130 if isinstance(e, KeyboardInterrupt) else EXIT_CRASH
    if code != EXIT_OK:
        try:
            rec = meta.pass_record()
            rec["finished"] = False
            rec["error"] = error[:2000]
            if ctx.get("partial"):
                ctx["partial"]()
        except Exception as e2:  # noqa: BLE001
            log(f"warning: could not write the partial results: {e2}")
    try:
        meta.flush()
    except Exception as e:  # noqa: BLE001
        log(f"error: could not write metadata.json: {e}")
        code = code or EXIT_CRASH
    if code == EXIT_OK:
        log(f"done: {plan.pass_name} pass, outputs in {plan.out_dir}")
    if plan.distributed is not None:
        with contextlib.suppress(Exception):
            ctx["torch"].distributed.destroy_process_group()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
