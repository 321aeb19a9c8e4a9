"""Tests of the `llmprof` Python package (stdlib unittest, no torch needed):

    python -m unittest discover -s python/tests -v

They test whichever `llmprof` is importable: the installed wheel in CI (.ci/wheel), or the
checkout with PYTHONPATH=python. torch and the nvtx package are replaced by recording fakes, so
the order of NVTX, record_function and synchronize calls is checked without a GPU.
"""

import doctest
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import types
import unittest
from typing import Any, Dict, Iterator, List
from unittest import mock

import llmprof

# The keys and types of a stages.jsonl line that llmprof's reader
# (crates/capture/src/cmd_timings.rs) requires.
REQUIRED = {"stage": str, "start_ns": int, "end_ns": int, "pid": int}


def read_lines(path: str) -> List[Dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


class FakeTorch(types.ModuleType):
    """Records the calls llmprof makes on torch, in order."""

    def __init__(self, cuda_initialized: bool = True, nvtx_works: bool = True) -> None:
        super().__init__("torch")
        self.calls: List[str] = []
        calls = self.calls

        class RecordFunction:
            def __init__(self, name: str) -> None:
                self.name = name

            def __enter__(self) -> "RecordFunction":
                calls.append(f"record_function enter {self.name}")
                return self

            def __exit__(self, *exc: Any) -> None:
                calls.append(f"record_function exit {self.name}")

        def push(name: str) -> None:
            if not nvtx_works:
                raise RuntimeError("NVTX functions not installed")
            calls.append(f"nvtx push {name}")

        self.cuda = types.SimpleNamespace(
            nvtx=types.SimpleNamespace(range_push=push, range_pop=lambda: calls.append("nvtx pop")),
            is_initialized=lambda: cuda_initialized,
            synchronize=lambda: calls.append("synchronize"),
        )
        self.profiler = types.SimpleNamespace(record_function=RecordFunction)


class Env:
    """LLMPROF_* variables for one test, and the directory stages.jsonl goes to."""

    def __init__(self, test: unittest.TestCase, **extra: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="llmprof-py-")
        test.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        env = {"LLMPROF_OUT_DIR": self.dir, **extra}
        patcher = mock.patch.dict(os.environ, env)
        patcher.start()
        test.addCleanup(patcher.stop)
        self.path = os.path.join(self.dir, llmprof.WINDOWS_FILE)

    def lines(self) -> List[Dict[str, Any]]:
        return read_lines(self.path) if os.path.exists(self.path) else []


def without_torch() -> Iterator[None]:
    return mock.patch.dict(sys.modules, {"torch": None, "nvtx": None})  # type: ignore[return-value]


class StageWindows(unittest.TestCase):
    def test_a_stage_appends_its_window_in_the_readers_schema(self) -> None:
        env = Env(self)
        with without_torch():
            with llmprof.stage("prefill"):
                pass
            with llmprof.stage("decode", warmup=True):
                pass
        lines = env.lines()
        self.assertEqual([l["stage"] for l in lines], ["prefill", "warmup_decode"])
        for line in lines:
            for key, typ in REQUIRED.items():
                self.assertIsInstance(line[key], typ, line)
            self.assertEqual(line["pid"], os.getpid())
            self.assertLessEqual(line["start_ns"], line["end_ns"])
            # The NVML sampler's clock: ns since the Unix epoch.
            self.assertGreater(line["start_ns"], 1_600_000_000 * 10**9)
        self.assertLessEqual(lines[0]["end_ns"], lines[1]["start_ns"])

    def test_the_decorator_opens_one_stage_per_call_even_recursively(self) -> None:
        env = Env(self)

        @llmprof.stage("decode")
        def countdown(n: int) -> List[str]:
            return llmprof.open_stages() if n == 0 else countdown(n - 1)

        with without_torch():
            self.assertEqual(countdown(2), ["decode", "decode", "decode"])
            self.assertEqual(llmprof.open_stages(), [])
            self.assertEqual(countdown.__name__, "countdown")
        self.assertEqual([l["stage"] for l in env.lines()], ["decode"] * 3)

    def test_nested_stages_close_innermost_first_even_when_raising(self) -> None:
        env = Env(self)
        with without_torch():
            with self.assertRaises(KeyError):
                with llmprof.stage("prefill"):
                    with llmprof.stage("vision", sync=False):
                        self.assertEqual(llmprof.open_stages(), ["prefill", "vision"])
                        raise KeyError("x")
            self.assertEqual(llmprof.open_stages(), [])
        self.assertEqual([l["stage"] for l in env.lines()], ["vision", "prefill"])

    def test_outside_llmprof_nothing_is_written(self) -> None:
        with mock.patch.dict(os.environ, {}, clear=True), without_torch():
            with llmprof.stage("decode") as s:
                self.assertEqual(s.name, "decode")
            self.assertIsNone(llmprof.profiling_pass())
            self.assertEqual(llmprof.requested_stages(), [])

    def test_a_directory_that_cannot_be_written_never_breaks_the_workload(self) -> None:
        with mock.patch.dict(os.environ, {"LLMPROF_OUT_DIR": "/nonexistent/llmprof"}), without_torch():
            with llmprof.stage("decode"):
                pass

    def test_names_are_checked_and_cleaned(self) -> None:
        with self.assertRaises(ValueError):
            llmprof.stage("")
        self.assertEqual(llmprof.stage("de\0code").name, "decode")
        self.assertEqual(llmprof.stage_name("vision_encoder", warmup=True), "warmup_vision_encoder")
        # Names JSON must escape survive the round trip.
        line = llmprof.window_line('a"b\\c\nd', 0, 1, 1)
        self.assertEqual(json.loads(line)["stage"], 'a"b\\c\nd')
        self.assertTrue(line.endswith("}\n") and line.count("\n") == 1)

    def test_optional_fields_follow_the_four_required_ones(self) -> None:
        line = llmprof.window_line("decode", 5, 9, 3, peak_bytes=1024, unknown=None)
        self.assertEqual(line, '{"stage":"decode","start_ns":5,"end_ns":9,"pid":3,"peak_bytes":1024}\n')


class SeveralWriters(unittest.TestCase):
    def test_threads_and_processes_append_whole_lines(self) -> None:
        env = Env(self)
        per_writer = 200
        code = (
            "import sys, llmprof\n"
            f"for i in range({per_writer}):\n"
            "    with llmprof.stage('decode_' + sys.argv[1] * 40, sync=False): pass\n"
        )
        procs = [
            subprocess.Popen([sys.executable, "-c", code, str(i)], env=dict(os.environ, PYTHONPATH=package_root()))
            for i in range(3)
        ]

        def in_thread() -> None:
            for _ in range(per_writer):
                with llmprof.stage("thread", sync=False):
                    pass

        with without_torch():
            threads = [threading.Thread(target=in_thread) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        for p in procs:
            self.assertEqual(p.wait(timeout=60), 0)
        lines = env.lines()  # json.loads fails on a torn line
        self.assertEqual(len(lines), 5 * per_writer)
        self.assertEqual(len({l["pid"] for l in lines}), 4)


def package_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(llmprof.__file__)))


class WithTorch(unittest.TestCase):
    def test_nvtx_and_record_function_wrap_the_window_and_sync_closes_it(self) -> None:
        env = Env(self)
        torch = FakeTorch()
        with mock.patch.dict(sys.modules, {"torch": torch}):
            with llmprof.stage("prefill"):
                torch.calls.append("work")
            with llmprof.stage("vision", sync=False):
                pass
        self.assertEqual(
            torch.calls,
            [
                "nvtx push prefill",
                "record_function enter prefill",
                "work",
                "synchronize",
                "record_function exit prefill",
                "nvtx pop",
                "nvtx push vision",
                "record_function enter vision",
                "record_function exit vision",
                "nvtx pop",
            ],
        )
        self.assertEqual(len(env.lines()), 2)

    def test_the_outermost_stage_reports_the_allocators_peaks(self) -> None:
        env = Env(self)
        torch = FakeTorch()
        peak = {"allocated": 0}

        def reset() -> None:
            torch.calls.append("reset peaks")
            peak["allocated"] = 0

        torch.cuda.reset_peak_memory_stats = reset
        torch.cuda.max_memory_allocated = lambda: peak["allocated"]
        torch.cuda.max_memory_reserved = lambda: 4096
        torch.cuda.mem_get_info = lambda: (70, 100)
        torch.cuda.memory_allocated = lambda: 1500
        llmprof.report_memory(weights_bytes=512)
        self.addCleanup(llmprof._reported.clear)
        with mock.patch.dict(sys.modules, {"torch": torch}):
            with llmprof.stage("decode"):
                with llmprof.stage("attention"):
                    peak["allocated"] = 3000
            with llmprof.stage("prefill", memory=False):
                pass
        self.assertEqual(torch.calls.count("reset peaks"), 1, torch.calls)
        by_stage = {l["stage"]: l for l in env.lines()}
        self.assertNotIn("peak_allocated_bytes", by_stage["attention"])
        self.assertNotIn("peak_allocated_bytes", by_stage["prefill"])
        decode = by_stage["decode"]
        self.assertEqual(
            (decode["peak_allocated_bytes"], decode["peak_reserved_bytes"]), (3000, 4096)
        )
        self.assertEqual((decode["free_bytes"], decode["total_bytes"]), (70, 100))
        self.assertEqual(decode["allocated_bytes"], 1500)
        self.assertEqual(decode["weights_bytes"], 512)
        self.assertEqual(list(decode)[:4], ["stage", "start_ns", "end_ns", "pid"])

    def test_no_synchronize_before_cuda_is_initialized(self) -> None:
        torch = FakeTorch(cuda_initialized=False)
        with mock.patch.dict(sys.modules, {"torch": torch}):
            with llmprof.stage("decode"):
                pass
        self.assertNotIn("synchronize", torch.calls)

    def test_a_cpu_only_torch_falls_back_to_the_nvtx_package(self) -> None:
        torch = FakeTorch(nvtx_works=False)
        nvtx_calls: List[str] = []
        nvtx = types.ModuleType("nvtx")
        nvtx.push_range = lambda name: nvtx_calls.append(f"push {name}")  # type: ignore[attr-defined]
        nvtx.pop_range = lambda: nvtx_calls.append("pop")  # type: ignore[attr-defined]
        with mock.patch.dict(sys.modules, {"torch": torch, "nvtx": nvtx}):
            with llmprof.stage("decode"):
                pass
        self.assertEqual(nvtx_calls, ["push decode", "pop"])
        self.assertIn("record_function enter decode", torch.calls)


class PassAndKineto(unittest.TestCase):
    def test_the_pass_and_stages_come_from_capture(self) -> None:
        Env(self, LLMPROF_PASS="nsys", LLMPROF_STAGES="prefill, decode,,")
        self.assertEqual(llmprof.profiling_pass(), "nsys")
        self.assertEqual(llmprof.requested_stages(), ["prefill", "decode"])

    def test_kineto_trace_does_nothing_unless_asked(self) -> None:
        with mock.patch.dict(os.environ, {}, clear=True):
            with llmprof.kineto_trace() as prof:
                self.assertIsNone(prof)

    def test_kineto_trace_asked_for_without_torch_says_so(self) -> None:
        with mock.patch.dict(os.environ, {"LLMPROF_KINETO_OUT": "/tmp/t.json"}), without_torch():
            with self.assertRaisesRegex(RuntimeError, "LLMPROF_KINETO_OUT=/tmp/t.json"):
                with llmprof.kineto_trace():
                    pass

    @unittest.skipUnless(
        __import__("importlib").util.find_spec("torch") is not None,
        "torch is not installed here (the driver venv has it)",
    )
    def test_kineto_trace_writes_a_chrome_trace_with_the_stages(self) -> None:
        import torch

        tmp = tempfile.mkdtemp(prefix="llmprof-py-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        out = os.path.join(tmp, "kineto_trace.json")
        with mock.patch.dict(os.environ, {"LLMPROF_KINETO_OUT": out}):
            with llmprof.kineto_trace() as prof:
                self.assertIsNotNone(prof)
                with llmprof.stage("prefill"):
                    torch.ones(64, 64) @ torch.ones(64, 64)
        with open(out, encoding="utf-8") as f:
            names = {e.get("name") for e in json.load(f)["traceEvents"]}
        self.assertIn("prefill", names)


class Docs(unittest.TestCase):
    def test_docstring_examples_run(self) -> None:
        with without_torch():
            failed, attempted = doctest.testmod(llmprof)
        self.assertEqual(failed, 0)
        self.assertGreaterEqual(attempted, 3)

    def test_the_package_is_typed(self) -> None:
        self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(llmprof.__file__), "py.typed")))


if __name__ == "__main__":
    unittest.main()
