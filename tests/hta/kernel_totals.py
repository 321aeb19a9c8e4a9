"""Loads a Chrome trace written by `llmprof export --format chrome` with HolisticTraceAnalysis
and prints, as JSON, per rank HTA found (`{"ranks": {"0": ...}}`), what it counts per GPU kernel name: calls and total time (ns) from the
trace dataframe HTA parsed (`t.t.get_trace(rank)`), and the total of HTA's own
`get_gpu_kernel_breakdown` (µs), and how many launch calls its `get_cuda_kernel_launch_stats`
joined to a kernel. tests/export.rs compares both with the bundle's kernel rows.

Usage: python kernel_totals.py TRACE_DIR  (TRACE_DIR holds rank-0.json, rank-1.json, ...)

HTA rounds traces with ns resolution to whole µs by default (its issue with overlapping events);
llmprof's export keeps every ns, so the rounding is switched off to compare exact totals.
"""

import json
import os
import sys

os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"

from hta.trace_analysis import TraceAnalysis  # noqa: E402


def main() -> None:
    analysis = TraceAnalysis(trace_dir=sys.argv[1])
    ranks = sorted(analysis.t.traces)
    _, breakdown = analysis.get_gpu_kernel_breakdown(
        visualize=False, duration_ratio=1.0, num_kernels=10**9, include_memory_kernels=True
    )
    # HTA's launch statistics: one row per cudaLaunchKernel / cudaLaunchKernelExC /
    # cudaMemcpyAsync / cudaMemsetAsync call joined to its op by correlation id.
    launch_stats = analysis.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
    out = {}
    for rank in ranks:
        per_name = kernel_totals(analysis, rank)
        for _, row in breakdown[breakdown["rank"] == rank].iterrows():
            if row["name"] in per_name:
                per_name[row["name"]]["breakdown_sum_us"] = float(row["sum (us)"])
        launches = launch_stats.get(rank)
        out[str(int(rank))] = {
            "kernels": per_name,
            "launch_stats_rows": 0 if launches is None else int(len(launches)),
        }
    json.dump({"ranks": out}, sys.stdout)


def kernel_totals(analysis: TraceAnalysis, rank: int) -> dict:
    """Calls and total ns per kernel name in the dataframe HTA parsed for `rank`."""
    df = analysis.t.get_trace(rank)
    sym = analysis.t.symbol_table.get_sym_table()
    kernels = df[df["cat"].map(lambda i: sym[i]) == "kernel"]
    per_name = {}
    for name_id, group in kernels.groupby("name"):
        per_name[sym[name_id]] = {
            "calls": int(len(group)),
            "total_ns": int(round(float(group["dur"].sum()) * 1000)),
        }
    return per_name


if __name__ == "__main__":
    main()
