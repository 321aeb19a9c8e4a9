#!/usr/bin/env python3
"""Tests of driver.py that need no GPU: plan checking and exit codes always; with torch and
transformers importable, the baseline, kineto, nsys and flops passes and a compiled decode on a
tiny random-weight Qwen2 model on the CPU (the driver's LLMPROF_DRIVER_CPU=1 test mode).

What the CPU cannot run, and so is not tested here: the calibrate pass (a CUDA GEMM and device
copy; only its refusal, exit 2, is checked), CUDA events (sub-stages are timed on the host clock
instead, which is exact on the CPU, where work is synchronous), the CUDA activity of the kineto
trace, CUDA graphs (reduce-overhead) and synchronize, and NVTX ranges (emitted, but nothing
records them). examples/gpu_smoke.sh runs the passes on a GPU.

Without torch and transformers the CPU runs are skipped, unless LLMPROF_REQUIRE_TORCH=1 (CI sets
it, through the cargo test that runs this file), where they fail instead.

Run: python3 crates/capture/src/driver/test_driver.py (prints `driver: N passed, N failed`), or
python3 -m unittest crates/capture/src/driver/test_driver.py."""

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import unittest
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(HERE, "driver.py")
sys.path.insert(0, HERE)
import driver  # noqa: E402

TINY = {"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 1000}


REQUIRE_ENV = "LLMPROF_REQUIRE_TORCH"


def have_stack():
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
        return True
    except Exception:  # noqa: BLE001
        return False


def stack_required():
    return os.environ.get(REQUIRE_ENV) == "1"


def plan(out_dir, **over):
    p = {"pass": "baseline", "out_dir": out_dir,
         "model": {"config": dict(TINY), "path": None, "dtype": "float32",
                   "attn_implementation": "sdpa"},
         "inputs": {"prompt_tokens": 8, "max_new_tokens": 3, "batch_size": 2, "seed": 0},
         "stages": {"modules": {"layer0": "model.layers.0"}},
         "warmup": 1, "repeats": 2, "device": 0, "prefill_energy_s": 0.0}
    p.update(over)
    return p


def run_driver(tmp, p, cpu=False):
    path = os.path.join(tmp, "plan.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(p, f)
    env = dict(os.environ)
    env.pop(driver.CPU_TEST_ENV, None)
    if cpu:
        env[driver.CPU_TEST_ENV] = "1"
    r = subprocess.run([sys.executable, DRIVER, path], capture_output=True, text=True, env=env,
                       timeout=600)
    return r.returncode, r.stderr


class PlanChecks(unittest.TestCase):
    def bad(self, raw, needle):
        with self.assertRaises(driver.PlanError) as cm:
            driver.Plan(raw)
        self.assertIn(needle, str(cm.exception))

    def test_good_plan_and_defaults(self):
        p = plan("/tmp/x")
        del p["warmup"], p["repeats"], p["stages"], p["device"]
        del p["inputs"]["batch_size"], p["inputs"]["seed"]
        pl = driver.Plan(p)
        got = (pl.warmup, pl.repeats, pl.device, pl.batch_size, pl.seed)
        self.assertEqual(got, (2, 6, 0, 1, 0))
        self.assertEqual(pl.warmup_decode_steps, 3)
        self.assertEqual(pl.modules, {})
        self.assertFalse(pl.sync_each_step)

    def test_errors(self):
        self.bad([], "JSON object")
        self.bad({}, "plan.pass is missing")
        self.bad(plan("/tmp/x", **{"pass": "ncu"}), "plan.pass must be one of")
        self.bad(plan("rel/dir"), "absolute path")
        self.bad(plan("/tmp/x", repeat=2), "unknown key(s) repeat")
        self.bad(plan("/tmp/x", repeats=0), "at least 1")
        self.bad(plan("/tmp/x", warmup=True), "must be an integer")
        p = plan("/tmp/x")
        del p["inputs"]["max_new_tokens"]
        self.bad(p, "plan.inputs.max_new_tokens is missing")
        p = plan("/tmp/x")
        p["model"]["path"] = "/tmp"
        self.bad(p, "exactly one of")
        p = plan("/tmp/x")
        del p["model"]["config"]["model_type"]
        self.bad(p, "model_type is missing")
        p = plan("/tmp/x")
        p["model"] = {"path": "/nonexistent/ckpt"}
        self.bad(p, "is not a directory")
        p = plan("/tmp/x")
        p["model"]["dtype"] = "int8"
        self.bad(p, "plan.model.dtype")
        p = plan("/tmp/x", stages={"modules": {"decode": "model"}})
        self.bad(p, "cannot name a sub-stage")
        self.bad(plan("/tmp/x", stages={"modules": {"compile": "model"}}),
                 "cannot name a sub-stage")
        self.bad(plan("/tmp/x", prefill_energy_s=-1), "between 0 and")
        self.bad(plan("/tmp/x", prefill_energy_s=True), "a number of seconds")
        self.bad(plan("/tmp/x", prefill_energy_s="2"), "a number of seconds")
        self.assertEqual(driver.Plan(plan("/tmp/x", prefill_energy_s=2)).prefill_energy_s, 2.0)
        driver.Plan(plan("/tmp/x", _comment="ignored"))

    def test_rank_outputs_read_like_a_single_process_raw_dir(self):
        self.assertEqual(driver.rank_out_dir("/w/raw/nsys", 1), "/w/raw/ranks/1/nsys")
        self.assertEqual(driver.rank_out_dir("/w/raw/baseline-2/", 3),
                         "/w/raw/ranks/3/baseline-2")

    def test_prefill_loop_rounds_fill_the_seconds_within_bounds(self):
        more, lo, hi = driver.prefill_loop_more, driver.PREFILL_LOOP_MIN, driver.PREFILL_LOOP_MAX
        self.assertEqual(more(2.0, 0, 0, None), 1)
        # One prefill took 25 ms: 79 more fill the 2 s.
        self.assertEqual(more(2.0, 1, 25_000_000, 25_000_000), 79)
        # A slow first prefill (1 s) then 10 ms ones: the rest is filled at 10 ms each.
        self.assertEqual(more(2.0, 2, 1_010_000_000, 10_000_000), 99)
        self.assertEqual(more(2.0, 160, 2_000_000_001, 10_000_000), 0)
        self.assertEqual(more(2.0, 1, 5_000_000_000, 5_000_000_000), lo - 1)
        self.assertEqual(more(2.0, 1, 1, 0), hi - 1)
        self.assertEqual(more(2.0, hi, 1, 1), 0)
        # Without torchrun the count is the rank's own.
        self.assertEqual(driver.agree_max(None, driver.Plan(plan("/tmp/x")), 7), 7)

    def test_prefill_loop_counts_what_ran(self):
        # The energy loop's count is what it ran: one cache reset and one forward a prefill,
        # in every round, as many as the ranks agreed (here: one more than asked, each round).
        calls = {"reset": 0, "forward": 0, "sync": 0}

        class Logits:
            def __getitem__(self, _):
                return self

            def argmax(self, **_):
                return self

        class Out:
            logits = Logits()

        def forward(**kw):
            self.assertEqual(kw["input_ids"], "prompt")
            calls["forward"] += 1
            return Out()

        def count(name):
            return lambda: calls.__setitem__(name, calls[name] + 1)

        marker = object()
        runner = SimpleNamespace(
            torch=SimpleNamespace(no_grad=contextlib.nullcontext), marker=marker,
            decoder=SimpleNamespace(reset=count("reset"), prefill_kwargs=lambda: {}),
            model=forward, workload=SimpleNamespace(prefill_kwargs=lambda: {"input_ids": "prompt"}),
            logits_kw={}, sync=count("sync"))
        loop = driver.Runner.prefill_loop(runner, 0.02, agree=lambda n: n + 1 if n else 0)
        self.assertGreaterEqual(loop["prefills"], driver.PREFILL_LOOP_MIN)
        self.assertEqual(calls["forward"], loop["prefills"])
        self.assertEqual(calls["reset"], loop["prefills"])
        self.assertGreaterEqual(calls["sync"], 2)  # one before the window, one a round
        self.assertIs(runner.marker, marker)  # sub-stage timing is back on after the loop

    def test_distributed_needs_torchrun(self):
        dist = {"nproc": 2, "checkpoint": "/tmp/ckpt"}
        saved = {k: os.environ.pop(k, None) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
        try:
            self.bad(plan("/tmp/x", distributed=dist), "needs torchrun's RANK, LOCAL_RANK")
            os.environ.update({"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "4"})
            self.bad(plan("/tmp/x", distributed=dist), "nproc is 2 but WORLD_SIZE is 4")
            self.bad(plan("/tmp/x", distributed={"nproc": 2}), "checkpoint is missing")
            os.environ["WORLD_SIZE"] = "2"
            d = driver.Plan(plan("/tmp/x", distributed=dist)).distributed
            self.assertEqual((d.rank, d.local_rank, d.world), (1, 1, 2))
            self.assertEqual(d.record()["tensor_parallel"], 2)
            self.assertEqual(d.timeout_s, 300.0)
            timed = dict(dist, collective_timeout_s=30)
            self.assertEqual(driver.Plan(plan("/tmp/x", distributed=timed)).distributed.timeout_s,
                             30.0)
            self.bad(plan("/tmp/x", distributed=dict(dist, collective_timeout_s=-1)),
                     "between 0 and")
            self.assertIsNone(driver.Plan(plan("/tmp/x")).distributed)
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v

    def test_optimize(self):
        pl = driver.Plan(plan("/tmp/x"))
        self.assertEqual((pl.compile, pl.cache), ("none", "dynamic"))
        pl = driver.Plan(plan("/tmp/x", optimize={"compile": "reduce-overhead",
                                                 "cache": "static"}))
        self.assertEqual((pl.compile, pl.cache), ("reduce-overhead", "static"))
        self.bad(plan("/tmp/x", optimize={"compile": "fast"}), "plan.optimize.compile must be")
        self.bad(plan("/tmp/x", optimize={"cache": "paged"}), "plan.optimize.cache must be")
        self.bad(plan("/tmp/x", optimize={"mode": "x"}), "plan.optimize has unknown key(s) mode")

    def test_failure_site_names_the_user_frame(self):
        err = RuntimeError('Unsupported: graph break\n\nfrom user code:\n   File '
                           '"/x/transformers/models/qwen3_moe/modeling_qwen3_moe.py", line 211, '
                           'in forward\n    routing = torch.nonzero(mask)')
        self.assertEqual(driver.failure_site(err), "modeling_qwen3_moe.py:211 in forward")


class ExitCodes(unittest.TestCase):
    def test_bad_plan_exit_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            code, err = run_driver(tmp, {"pass": "nsys"})
            self.assertEqual(code, 2)
            self.assertIn("llmprof-driver: error: plan.out_dir is missing", err)

    def test_unreadable_plan_exit_2(self):
        r = subprocess.run([sys.executable, DRIVER, "/nonexistent/plan.json"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("cannot read the plan", r.stderr)

    def test_no_torch_or_no_cuda_exit_2(self):
        if have_stack():
            import torch
            if torch.cuda.is_available():
                self.skipTest("CUDA is available here")
        with tempfile.TemporaryDirectory() as tmp:
            code, err = run_driver(tmp, plan(os.path.join(tmp, "out")))
            self.assertEqual(code, 2)
            self.assertTrue("cannot import torch" in err or "cannot import transformers" in err
                            or driver.CUDA_MISSING in err, err)


def read(out, name):
    with open(os.path.join(out, name), encoding="utf-8") as f:
        return json.load(f)


def near(a, b, slack_ns=1_000_000, rel=0.05):
    """Two durations of one interval taken on two clocks (perf_counter_ns, time_ns) agree."""
    return abs(a - b) <= slack_ns + rel * max(a, b)


@unittest.skipUnless(have_stack() or stack_required(),
                     "torch and transformers are not installed")
class CpuRun(unittest.TestCase):
    def test_four_passes_merge_metadata(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out")
            for name in ("baseline", "kineto", "nsys", "flops"):
                p = plan(out, **{"pass": name})
                if name == "baseline":
                    p["prefill_energy_s"] = 0.3
                code, err = run_driver(tmp, p, cpu=True)
                self.assertEqual(code, 0, err)
                self.assertIn("llmprof-driver: building model", err)
            meta = read(out, "metadata.json")
            self.assertEqual(set(meta["passes"]), {"baseline", "kineto", "nsys", "flops"})
            self.assertTrue(all(r["finished"] for r in meta["passes"].values()))
            self.assertEqual(meta["passes"]["nsys"]["decode_steps"], [3, 3])
            # The kineto pass times every measured iteration, each in its own profiler
            # session after the warm-up's; its trace holds one iteration.
            self.assertEqual(meta["passes"]["kineto"]["decode_steps"], [3])
            self.assertEqual(meta["passes"]["kineto"]["profiler_sessions"], 1 + 2)
            with open(os.path.join(out, "kineto_timing.json"), encoding="utf-8") as f:
                kin = json.load(f)
            self.assertEqual((len(kin["warmup_iterations"]), len(kin["iterations"])), (1, 2))
            self.assertTrue(all(it["decode_ns"] > 0 for it in kin["iterations"]))
            self.assertEqual(meta["prefill_logits"], 1)
            self.assertEqual(meta["image_tokens"], 0)
            self.assertEqual(meta["counted_flops_source"], driver.FLOPS_SOURCE)
            for key in ("python", "torch", "transformers", "cuda", "cudnn"):
                self.assertIn(key, meta["versions"])
            flops = read(out, "flops.json")
            self.assertGreater(flops["prefill"], 0)
            self.assertGreater(flops["decode"], 0)
            self.assertGreater(flops["layer0"], 0)
            # Projections + SwiGLU MLP of 2 layers over 16 prompt tokens, plus the LM head
            # for one token per sequence (attention is not counted by CPU SDPA).
            h, i_, v, lay, tok = 64, 128, 1000, 2, 16
            dense = lay * tok * (4 * h * h + 4 * h * 32 + 6 * h * i_) + 2 * (2 * h * v)
            self.assertGreaterEqual(flops["prefill"], dense)
            self.check_baseline(read(out, "baseline.json"))
            self.assertTrue(any("back-to-back prefills" in n for n in meta["notes"]))
            for name in ("nsys_timing.json", "kineto_timing.json"):
                doc = read(out, name)
                self.assertTrue(doc["stage_markers"], name)
                # Traced passes do not time sub-stages (their ranges are not synchronized).
                self.assertIsNone(doc["sub_stage_clock"], name)
                self.assertFalse(any("sub_stage_ns" in it for it in doc["iterations"]), name)
                self.assertNotIn("prefill_loop", doc)
            trace = read(out, "kineto_trace.json")["traceEvents"]
            spans = {}
            for e in trace:
                if e.get("cat") == "user_annotation":
                    spans.setdefault(e["name"], []).append(e["dur"] * 1000)  # us -> ns
            self.assertTrue({"prefill", "decode", "layer0"} <= set(spans), spans.keys())
            self.assertFalse(any(n.startswith("warmup_") for n in spans))
            # The profiler's prefill span and the driver's own prefill time are one interval:
            # the trace holds the last measured iteration (each runs in its own session).
            kin = read(out, "kineto_timing.json")["iterations"][-1]
            self.assertTrue(near(spans["prefill"][0], kin["prefill_ns"]), (spans, kin))
            self.assertEqual(len(spans["layer0"]), 1 + 3)  # the prefill and each decode step

    def check_baseline(self, base):
        """The baseline's timings hang together in ways its code does not force."""
        self.assertTrue(base["complete"])
        self.assertFalse(base["stage_markers"])
        self.assertEqual(base["sub_stage_clock"], "host")
        self.assertEqual(len(base["iterations"]), 2)
        for it in base["iterations"]:
            steps = it["decode_step_ns"]
            self.assertEqual(len(steps), 3)
            self.assertTrue(all(s > 0 for s in steps), steps)
            # Each stage's wall-clock window (time_ns) spans its perf_counter time.
            p0, p1 = it["prefill_window_ns"]
            d0, d1 = it["decode_window_ns"]
            self.assertTrue(near(p1 - p0, it["prefill_ns"]), it)
            self.assertTrue(near(d1 - d0, it["decode_ns"]), it)
            self.assertLessEqual(p1, d0)  # decode's window starts after prefill's ends
            # The hook on layer 0 ran once in prefill and once per decode step, each instance
            # timed, and inside its stage's time.
            sub = it["sub_stage_ns"]
            self.assertEqual(len(sub["prefill"]["layer0"]), 1, sub)
            self.assertEqual(len(sub["decode"]["layer0"]), 3, sub)
            self.assertTrue(0 < sub["prefill"]["layer0"][0] < it["prefill_ns"], (sub, it))
            self.assertTrue(0 < sum(sub["decode"]["layer0"]) < it["decode_ns"], (sub, it))
            # The KV cache after the decode holds (prompt + 3 steps) tokens x batch 2 of each
            # layer's keys and values: 2 layers x 2 kv heads x head dim 16, float32 (4 bytes).
            self.assertEqual(it["memory"]["kv_cache_bytes"], 2 * 2 * 2 * 16 * (8 + 3) * 2 * 4)
        first, second = base["iterations"]
        self.assertLess(first["decode_window_ns"][1], second["prefill_window_ns"][0])
        mem = base["memory"]
        self.assertEqual((mem["kv_tokens"], mem["batch_size"]), (8 + 3, 2))
        self.assertEqual(mem["kv_cache_kind"], "dynamic")
        # Weights: every parameter and buffer of the tiny model, in float32.
        self.assertGreater(mem["weights_bytes"], 4 * 1000 * 64)
        self.assertFalse(any("sub_stage_ns" in it for it in base["warmup_iterations"]))
        # The prefill loop ran after the measured iterations, for at least the time asked.
        loop = base["prefill_loop"]
        w0, w1 = loop["window_ns"]
        self.assertGreaterEqual(loop["prefills"], driver.PREFILL_LOOP_MIN)
        self.assertGreaterEqual(w1 - w0, 0.3e9)
        self.assertTrue(near(w1 - w0, loop["wall_ns"]), loop)
        self.assertGreater(w0, second["decode_window_ns"][1])
        # That the count is what ran (one forward a prefill) is checked by counting forwards
        # (test_prefill_loop_counts_what_ran), not by timing them: on a loaded machine the
        # loop's prefills took 17 to 78 times the measured ones.

    def test_compiled_static_cache_decode(self):
        # torch.compile (Inductor on the CPU) of the decode step with a StaticCache: compiled
        # before the warm-up, timed, and the measured iterations still add up.
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out")
            p = plan(out, optimize={"compile": "default", "cache": "static"}, repeats=1)
            code, err = run_driver(tmp, p, cpu=True)
            self.assertEqual(code, 0, err)
            with open(os.path.join(out, "baseline.json"), encoding="utf-8") as f:
                base = json.load(f)
            opt = base["optimize"]
            self.assertEqual((opt["status"], opt["compile"], opt["cache"]),
                             ("ok", "default", "static"), opt)
            self.assertGreater(opt["compile_s"], 0)
            it = base["iterations"][0]
            self.assertEqual(len(it["decode_step_ns"]), 3)
            d0, d1 = it["decode_window_ns"]
            self.assertTrue(near(d1 - d0, it["decode_ns"]), it)
            with open(os.path.join(out, "metadata.json"), encoding="utf-8") as f:
                meta = json.load(f)
            self.assertEqual(meta["passes"]["baseline"]["optimize"]["status"], "ok")
            self.assertTrue(any("torch.compile(mode='default'" in n for n in meta["notes"]))

    def test_compile_failure_keeps_the_eager_step(self):
        # A forward dynamo cannot trace whole (fullgraph=True) fails to compile: the record
        # says which part and where, and the decoder goes on with the eager forward.
        import torch
        plan_ = driver.Plan(plan("/tmp/x", optimize={"compile": "default", "cache": "dynamic"}))

        class Out:
            def __init__(self, logits):
                self.logits = logits
                self.past_key_values = None

        class Breaks(torch.nn.Module):
            def forward(self, input_ids, use_cache=True, past_key_values=None, **kw):
                torch._dynamo.graph_break()
                return Out(torch.zeros(input_ids.shape[0], input_ids.shape[1], 5))

        class Workload:
            def prefill_kwargs(self):
                return {"input_ids": torch.zeros(1, 4, dtype=torch.long)}

        class FakeRunner:
            workload = Workload()
            logits_kw = {}

            def stage(self, name):
                import contextlib
                return contextlib.nullcontext()

            def sync(self):
                pass

        model = Breaks()
        dec = driver.Decoder(torch, model, plan_, torch.device("cpu"), 4, 3)
        rec = dec.prepare(FakeRunner())
        self.assertEqual((rec["status"], rec["failed_part"]), ("failed", "compile"), rec)
        self.assertIn("test_driver.py", rec["where"])
        self.assertEqual(dec.fn, model.forward)
        logits, _ = dec.step(torch.zeros(1, 1, dtype=torch.long), None, 0)
        self.assertEqual(tuple(logits.shape), (1, 1, 5))

    def test_calibrate_needs_cuda(self):
        with tempfile.TemporaryDirectory() as tmp:
            code, err = run_driver(tmp, plan(os.path.join(tmp, "out"), **{"pass": "calibrate"}),
                                   cpu=True)
            self.assertEqual(code, 2, err)
            self.assertIn("the calibrate pass needs a CUDA device", err)

    def test_missing_module_exit_2_and_crash_exit_3(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out")
            code, err = run_driver(tmp, plan(out, stages={"modules": {"x": "model.nothere"}}),
                                   cpu=True)
            self.assertEqual(code, 2)
            self.assertIn("has no module 'model.nothere'", err)
            p = plan(out)
            p["model"]["config"]["num_attention_heads"] = 5  # 64/5: the forward fails
            code, err = run_driver(tmp, p, cpu=True)
            self.assertEqual(code, 3, err)
            self.assertIn("the baseline pass crashed", err)
            with open(os.path.join(out, "metadata.json"), encoding="utf-8") as f:
                meta = json.load(f)
            self.assertFalse(meta["passes"]["baseline"]["finished"])
            self.assertIn("error", meta["passes"]["baseline"])
            with open(os.path.join(out, "baseline.json"), encoding="utf-8") as f:
                self.assertFalse(json.load(f)["complete"])


def main():
    """Runs every test and ends with one `driver: N passed, N failed, N skipped` line."""
    result = unittest.main(exit=False, verbosity=2).result
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    print(f"driver: {passed} passed, {failed} failed, {skipped} skipped", flush=True)
    return 1 if failed or (stack_required() and skipped) else 0


if __name__ == "__main__":
    sys.exit(main())
