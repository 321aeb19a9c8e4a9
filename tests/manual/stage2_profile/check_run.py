#!/usr/bin/env python3
"""Check the artifacts of one llmprof run directory, as the manual test flow (README.md beside
this file) asks a person to. Standard library only.

Usage: python3 check_run.py [--trimmed] RUNS/<run-id>

--trimmed: the run's big raw traces were deleted on purpose (as the committed sample runs'
are); the manifest check then lists them as removed instead of failing.

Prints one line per check, `PASS`, `FAIL` or `SKIP` (the run lacks what the check needs), and
exits 1 when any check fails. Each check recomputes a number from the run's own files and
compares it with what llmprof stored or showed:

  files      bundle.json parses, has a timeline (timeline.json or .gz; a multi-rank run's in each
             ranks/<r>/), and every raw artifact the capture's manifest lists exists with that
             size and sha256 (gzipped copies count)
  passes     every capture pass succeeded (a failed pass is a FAIL: read its `missing` line)
  stages     prefill and decode are stages with at least one instance
  headline   TTFT is the median of the baseline's prefill samples (the unprofiled pass)
  kernels    the kernel table's total time equals totals.kernel_ns
  mfu        no stage's MFU or MBU exceeds 100%
  energy     each stage's energy per instance is its mean power x its wall (within 2%)
  kv-cache   the KV cache measured after the decode is within 5% of the config's
"""

import gzip
import hashlib
import json
import os
import statistics
import sys

RESULTS = []


def report(name, ok, detail):
    status = {True: "PASS", False: "FAIL", None: "SKIP"}[ok]
    RESULTS.append(ok)
    print(f"{status}  {name:9} {detail}")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def has_timeline(run):
    return any(os.path.isfile(os.path.join(run, n)) for n in ("timeline.json", "timeline.json.gz"))


def check_files(run, b, trimmed):
    ranks = [r["dir"] for r in (b.get("ranks") or {}).get("ranks") or []]
    if ranks:
        # A multi-rank run: each rank's timeline is in its own directory (ranks/<r>/).
        found = all(has_timeline(os.path.join(run, d)) for d in ranks)
    else:
        found = has_timeline(run)
    report("files", found or not b.get("stages"),
           "timeline present" if found else "no timeline.json(.gz)")
    manifest = (b.get("capture") or {}).get("manifest") or []
    if not manifest:
        report("manifest", None, "not a capture (no manifest)")
        return
    bad, removed = [], []
    for m in manifest:
        path = os.path.join(run, m["path"])
        if os.path.isfile(path):
            if os.path.getsize(path) != m["bytes"] or sha256(path) != m["sha256"]:
                bad.append(f"{m['path']} differs")
        elif os.path.isfile(path + ".gz"):
            with gzip.open(path + ".gz", "rb") as f:
                data = f.read()
            if len(data) != m["bytes"] or hashlib.sha256(data).hexdigest() != m["sha256"]:
                bad.append(f"{m['path']}.gz differs")
        elif trimmed:
            removed.append(m["path"])
        else:
            bad.append(f"{m['path']} missing")
    note = f"{len(manifest) - len(removed)} artifacts match"
    if removed:
        note += f", {len(removed)} removed (--trimmed): {', '.join(removed[:3])}"
    report("manifest", not bad, note if not bad else "; ".join(bad[:3]))


def check_passes(b):
    passes = (b.get("capture") or {}).get("passes") or []
    if not passes:
        return report("passes", None, "not a capture")
    failed = [p["name"] for p in passes if not p.get("ok")]
    report("passes", not failed, f"{len(passes)} ok" if not failed else f"failed: {failed}")


def check_stages(b):
    names = {s["name"]: s for s in b.get("stages", [])}
    missing = [n for n in ("prefill", "decode") if names.get(n, {}).get("instances", 0) < 1]
    report("stages", not missing, "prefill and decode present" if not missing
           else f"missing: {missing}")


def check_headline(b):
    samples = ((b.get("capture") or {}).get("baseline") or {}).get("samples") or []
    ttft = (((b.get("analysis") or {}).get("run") or {}).get("ttft_ns") or {}).get("median")
    prefill = [s["prefill_ns"] for s in samples if s.get("prefill_ns")]
    if not prefill or ttft is None:
        return report("headline", None, "no baseline samples or no TTFT")
    med = statistics.median(prefill)
    report("headline", abs(med - ttft) <= 1, f"TTFT {ttft / 1e6:.3f} ms = median of "
           f"{len(prefill)} baseline prefills {med / 1e6:.3f} ms")


def check_kernels(b):
    total = b.get("totals", {}).get("kernel_ns")
    rows = [k["total_ns"] for k in b.get("kernels", []) if k.get("kind") == "kernel"]
    if total is None or not rows:
        return report("kernels", None, "no kernels")
    report("kernels", sum(rows) == total, f"{len(rows)} rows sum to {sum(rows)} ns, "
           f"totals.kernel_ns {total}")


def check_mfu(b):
    stages = (b.get("analysis") or {}).get("stages") or []
    ratios = [(s["name"], k, s[k]) for s in stages for k in ("mfu", "mbu")
              if s.get(k) is not None]
    if not ratios:
        return report("mfu", None, "no MFU/MBU (no model config?)")
    over = [r for r in ratios if r[2] > 1.0]
    report("mfu", not over, f"{len(ratios)} ratios ≤ 100%" if not over else f"over 100%: {over}")


def check_energy(b):
    rows = (b.get("capture") or {}).get("energy") or []
    if not rows:
        return report("energy", None, "no energy (no NVML)")
    bad = [r["stage"] for r in rows
           if abs(r["energy_j"] - r["mean_power_w"] * r["wall_ns"] / 1e9) > 0.02 * r["energy_j"]]
    report("energy", not bad, f"{len(rows)} stages: J = W x s" if not bad else f"off: {bad}")


def check_kv(b):
    mem = (b.get("capture") or {}).get("memory") or {}
    computed = ((b.get("analysis") or {}).get("memory") or {}).get("kv_cache_computed_bytes")
    measured = mem.get("kv_cache_bytes")
    if measured is None or not computed:
        return report("kv-cache", None, "no memory record or no model config")
    if mem.get("kv_cache_kind") == "static":
        return report("kv-cache", None, "a static cache is allocated for its whole length")
    off = abs(measured - computed) / computed
    report("kv-cache", off <= 0.05, f"measured {measured} B vs computed {computed:.0f} B "
           f"({off * 100:.1f}%)")


def main(argv):
    args = argv[1:]
    trimmed = "--trimmed" in args
    args = [a for a in args if a != "--trimmed"]
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print(__doc__)
        return 2
    run = args[0]
    path = os.path.join(run, "bundle.json")
    try:
        with open(path, encoding="utf-8") as f:
            b = json.load(f)
    except (OSError, ValueError) as e:
        print(f"FAIL  files     {path}: {e}")
        return 1
    check_files(run, b, trimmed)
    check_passes(b)
    check_stages(b)
    check_headline(b)
    check_kernels(b)
    check_mfu(b)
    check_energy(b)
    check_kv(b)
    failed = sum(1 for r in RESULTS if r is False)
    print(f"{run}: {failed} failed, {sum(1 for r in RESULTS if r)} passed, "
          f"{sum(1 for r in RESULTS if r is None)} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
