"""The workload side of llmprof: mark the stages of an LLM inference script so that
``llmprof capture --cmd "python my_infer.py"`` sees them as it sees its own targets' stages.

Pure Python: it imports without torch, without a GPU and outside llmprof, where every call is
cheap and does nothing visible. Under ``llmprof capture --cmd`` each pass runs the script with
``LLMPROF_PASS``, ``LLMPROF_OUT_DIR`` and ``LLMPROF_STAGES`` set (and ``LLMPROF_KINETO_OUT`` in
the PyTorch-profiler pass); this package reads them::

    import torch, llmprof

    with llmprof.kineto_trace():              # profiles only in llmprof's kineto pass
        for i in range(7):
            warm = i == 0
            with llmprof.stage("prefill", warmup=warm):
                logits = model(prompt)
            with llmprof.stage("decode", warmup=warm):
                for _ in range(64):
                    logits = model(next_token(logits))

Each stage is

* an NVTX push/pop range in the default domain named after the stage (``torch.cuda.nvtx``
  when torch is imported, else the ``nvtx`` package when installed, else nothing): what
  Nsight Systems projects kernels onto and Nsight Compute's ``--nvtx-include decode/``
  filters on;
* a ``torch.profiler.record_function`` when torch is imported: the PyTorch profiler's view;
* one line appended to ``$LLMPROF_OUT_DIR/stages.jsonl`` when it closes (see
  :func:`window_line`): its host wall-clock window, from which llmprof computes per-stage
  energy, baseline timings and profiler overhead.

Warm-up iterations name their ranges ``warmup_<stage>`` (``warmup=True``), so analysis leaves
them out. A stage synchronizes CUDA before it closes (when torch has initialized CUDA), so its
window holds the GPU work it launched; pass ``sync=False`` for a sub-stage inside a stage that
synchronizes, as llmprof's own driver does.

Stages are recognised by torch only if torch is imported before the stage opens; this package
never imports torch itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from types import TracebackType
from typing import Any, Callable, Dict, Iterator, List, Optional, Type

__all__ = [
    "DECODE",
    "PREFILL",
    "WARMUP_PREFIX",
    "WINDOWS_FILE",
    "kineto_trace",
    "open_stages",
    "profiling_pass",
    "requested_stages",
    "stage",
    "stage_name",
    "window_line",
    "report_memory",
]

#: The prompt's forward pass (and the first token).
PREFILL = "prefill"
#: The decode loop: every generated token after the first.
DECODE = "decode"
#: Prefix of warm-up ranges, which analysis excludes.
WARMUP_PREFIX = "warmup_"
#: The file in ``$LLMPROF_OUT_DIR`` that receives each stage's window.
WINDOWS_FILE = "stages.jsonl"

_local = threading.local()


def stage_name(name: str, warmup: bool = False) -> str:
    """The range name of stage ``name``: ``name``, or ``warmup_<name>`` for a warm-up.

    >>> stage_name("decode", warmup=True)
    'warmup_decode'
    """
    return WARMUP_PREFIX + name if warmup else name


def profiling_pass() -> Optional[str]:
    """The capture pass this process runs in under ``llmprof capture --cmd``: ``"baseline"``,
    ``"kineto"``, ``"nsys"`` or ``"ncu"`` (from ``LLMPROF_PASS``); ``None`` outside llmprof.

    A workload may do less in a slow pass::

        steps = 8 if llmprof.profiling_pass() == "ncu" else 64
    """
    return os.environ.get("LLMPROF_PASS") or None


def requested_stages() -> List[str]:
    """The stage names given to ``llmprof capture --stages`` (``LLMPROF_STAGES``); empty when
    none were given or outside llmprof."""
    raw = os.environ.get("LLMPROF_STAGES", "")
    return [s.strip() for s in raw.split(",") if s.strip()]


def window_line(name: str, start_ns: int, end_ns: int, pid: int, **extra: Any) -> str:
    """One line of ``stages.jsonl``: a JSON object and a newline,
    ``{"stage": ..., "start_ns": ..., "end_ns": ..., "pid": ...}``, times in ns since the Unix
    epoch (the clock of llmprof's NVML sampler). Optional fields go after these four as
    keyword arguments; ``None`` values are left out. This is the schema llmprof's reader
    (``crates/capture/src/cmd_timings.rs``) and the Rust writer (``llmprof-stages``) share.

    >>> window_line("prefill", 10, 25, 7)
    '{"stage":"prefill","start_ns":10,"end_ns":25,"pid":7}\\n'
    """
    obj: Dict[str, Any] = {"stage": name, "start_ns": start_ns, "end_ns": end_ns, "pid": pid}
    obj.update((k, v) for k, v in extra.items() if v is not None)
    return json.dumps(obj, separators=(",", ":")) + "\n"


def _append_window(line: str) -> None:
    """Appends ``line`` to ``$LLMPROF_OUT_DIR/stages.jsonl`` with one ``write`` on an
    ``O_APPEND`` descriptor, so lines of several processes and threads never interleave. A
    failed write is ignored: marking stages never breaks the workload."""
    out_dir = os.environ.get("LLMPROF_OUT_DIR")
    if not out_dir:
        return
    try:
        fd = os.open(os.path.join(out_dir, WINDOWS_FILE), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        return
    try:
        os.write(fd, line.encode("utf-8"))
    except OSError:
        pass
    finally:
        os.close(fd)


def _torch() -> Any:
    """torch if the workload imported it, else ``None`` (never imports it)."""
    return sys.modules.get("torch")


class _Nvtx:
    """NVTX push/pop in the default domain: torch's when torch is imported, else the ``nvtx``
    package's when installed, else nothing."""

    @staticmethod
    def push(name: str) -> Callable[[], None]:
        torch = _torch()
        if torch is not None:
            try:
                torch.cuda.nvtx.range_push(name)
                return torch.cuda.nvtx.range_pop  # type: ignore[no-any-return]
            except Exception:  # a CPU-only torch has no NVTX bindings
                pass
        try:
            import nvtx  # type: ignore[import-not-found]
        except ImportError:
            return _noop
        try:
            nvtx.push_range(name)
            return nvtx.pop_range  # type: ignore[no-any-return]
        except Exception:
            return _noop


def _noop() -> None:
    return None


class stage(contextlib.ContextDecorator):
    """A stage: a context manager, or a decorator that runs the whole function as the stage.

    ::

        with llmprof.stage("prefill"):
            logits = model(input_ids)

        @llmprof.stage("decode")
        def decode(tokens): ...

        with llmprof.stage("decode", warmup=True):   # the range is named warmup_decode
            ...

    ``name`` is the stage (``prefill``, ``decode``, or a sub-stage such as ``vision``);
    ``warmup`` names the range ``warmup_<name>``; ``sync`` (default on) calls
    ``torch.cuda.synchronize()`` before the stage closes when torch has initialized CUDA, so the
    window holds the GPU work the stage launched. Stages nest; a stage must close on the thread
    that opened it (NVTX push/pop ranges are per thread).
    """

    def __init__(
        self, name: str, warmup: bool = False, sync: bool = True, memory: bool = True
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"llmprof.stage: the name must be a non-empty string, got {name!r}")
        #: The range name (``warmup_`` prefixed for a warm-up).
        self.name = stage_name(name.replace("\0", ""), warmup)
        self.sync = sync
        self.memory = memory
        self._measure = False
        self._at_rest: Optional[int] = None
        self._start_ns = 0
        self._pop: Callable[[], None] = _noop
        self._record: Any = None

    def _recreate_cm(self) -> "stage":
        # A decorated function may run recursively or on several threads: one instance a call.
        return stage(self.name, sync=self.sync, memory=self.memory)

    def __enter__(self) -> "stage":
        self._pop = _Nvtx.push(self.name)
        torch = _torch()
        if torch is not None:
            try:
                self._record = torch.profiler.record_function(self.name)
                self._record.__enter__()
            except Exception:
                self._record = None
        # Only a thread's outermost stage measures memory: resetting the allocator's peaks in
        # a nested stage would lose its parent's.
        self._measure = self.memory and not _open() and _reset_peaks()
        self._at_rest = _allocated() if self._measure else None
        _open().append(self.name)
        self._start_ns = time.time_ns()
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if self.sync:
            _synchronize()
        end_ns = time.time_ns()
        extra = _memory_fields(self._at_rest) if self._measure else {}
        _append_window(window_line(self.name, self._start_ns, end_ns, os.getpid(), **extra))
        if self._record is not None:
            self._record.__exit__(exc_type, exc, tb)
            self._record = None
        self._pop()
        self._pop = _noop
        opened = _open()
        if self.name in opened:
            del opened[len(opened) - 1 - opened[::-1].index(self.name)]

    def __repr__(self) -> str:
        return f"llmprof.stage({self.name!r})"


#: What the workload told :func:`report_memory`, written on each measured stage's line.
_reported: Dict[str, int] = {}


def report_memory(weights_bytes: Optional[int] = None, kv_cache_bytes: Optional[int] = None) -> None:
    """Tells llmprof the bytes of the model's weights and of its KV cache, which only the
    workload knows; they go on the lines of the stages that close afterwards (llmprof's Memory
    table and batch headroom read them). Call it once the model is loaded, and again when the
    cache has grown (after a decode, say)::

        llmprof.report_memory(weights_bytes=sum(p.numel() * p.element_size() for p in model.parameters()))

    A ``None`` leaves the value as it was.
    """
    for key, value in (("weights_bytes", weights_bytes), ("kv_cache_bytes", kv_cache_bytes)):
        if value is not None:
            _reported[key] = int(value)


def _reset_peaks() -> bool:
    """Resets the CUDA caching allocator's peak counters when torch is imported and has
    initialized CUDA; whether it did (only then does the stage report memory)."""
    torch = _torch()
    if torch is None:
        return False
    try:
        if not torch.cuda.is_initialized():
            return False
        torch.cuda.reset_peak_memory_stats()
        return True
    except Exception:
        return False


def _allocated() -> Optional[int]:
    """``torch.cuda.memory_allocated()``, or ``None`` when it cannot be read."""
    torch = _torch()
    try:
        return int(torch.cuda.memory_allocated())
    except Exception:
        return None


def _memory_fields(at_rest: Optional[int]) -> Dict[str, int]:
    """The stage's memory for its ``stages.jsonl`` line: what was allocated when it began, the
    allocator's peaks since, ``cudaMemGetInfo`` at its end, and what :func:`report_memory` was
    told."""
    torch = _torch()
    out: Dict[str, int] = {}
    if at_rest is not None:
        out["allocated_bytes"] = at_rest
    try:
        out["peak_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
        out["peak_reserved_bytes"] = int(torch.cuda.max_memory_reserved())
        free, total = torch.cuda.mem_get_info()
        out["free_bytes"], out["total_bytes"] = int(free), int(total)
    except Exception:
        pass
    out.update(_reported)
    return out


def _synchronize() -> None:
    """``torch.cuda.synchronize()`` when torch is imported and has initialized CUDA."""
    torch = _torch()
    if torch is None:
        return
    try:
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
    except Exception:
        pass


def _open() -> List[str]:
    stack: Optional[List[str]] = getattr(_local, "open", None)
    if stack is None:
        stack = []
        _local.open = stack
    return stack


def open_stages() -> List[str]:
    """The stages open on this thread, outermost first.

    >>> with stage("prefill", sync=False):
    ...     open_stages()
    ['prefill']
    """
    return list(_open())


@contextlib.contextmanager
def kineto_trace(**profile_kwargs: Any) -> Iterator[Any]:
    """Profiles the block with ``torch.profiler`` when llmprof's PyTorch-profiler pass asks for
    it (``LLMPROF_KINETO_OUT`` is set) and writes the chrome trace there; does nothing
    otherwise. Yields the profiler, or ``None`` when not profiling::

        with llmprof.kineto_trace():
            with llmprof.stage("prefill"):
                ...

    Put one measured iteration (and its warm-up before it, outside the block) under it: the
    trace is read for operators, kernels and stages. ``profile_kwargs`` go to
    ``torch.profiler.profile`` (default: CPU and, when CUDA is available, CUDA activities, with
    ``record_shapes=True`` as llmprof's driver profiles). Raises ``RuntimeError`` when the pass
    asks for a trace and torch cannot be imported.
    """
    out = os.environ.get("LLMPROF_KINETO_OUT")
    if not out:
        yield None
        return
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError as e:
        raise RuntimeError(
            f"llmprof.kineto_trace: LLMPROF_KINETO_OUT={out} asks for a PyTorch-profiler trace, "
            f"but torch cannot be imported ({e})"
        ) from e
    acts = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        acts.append(ProfilerActivity.CUDA)
    kwargs: Dict[str, Any] = {"activities": acts, "record_shapes": True}
    kwargs.update(profile_kwargs)
    with profile(**kwargs) as prof:
        yield prof
    prof.export_chrome_trace(out)

