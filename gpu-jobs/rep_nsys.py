# Issue 15: a large Nsight Systems export made from a small real one, for memory and speed
# benchmarks without a GPU: usage rep_nsys.py SRC.sqlite DST.sqlite N. Every row of the kernel,
# runtime, memcpy, memset, synchronization and NVTX tables is copied N-1 times, start/end
# shifted by the trace span and correlationId by its largest id; then VACUUM.
import sqlite3, sys, shutil
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
shutil.copy(src, dst)
db = sqlite3.connect(dst)
lo, hi = db.execute("select min(start), max(end) from CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
span = hi - lo + 1000
cmax = db.execute("select max(correlationId) from CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0] + 1
for t in ["CUPTI_ACTIVITY_KIND_KERNEL","CUPTI_ACTIVITY_KIND_RUNTIME","CUPTI_ACTIVITY_KIND_MEMCPY","CUPTI_ACTIVITY_KIND_MEMSET","CUPTI_ACTIVITY_KIND_SYNCHRONIZATION","NVTX_EVENTS"]:
    cols = [r[1] for r in db.execute(f"pragma table_info({t})")]
    base = db.execute(f"select max(rowid) from {t}").fetchone()[0]
    for k in range(1, n):
        def ex(c):
            if c in ("start", "end"): return f"{c} + {k*span}"
            if c == "correlationId": return f"{c} + {k*cmax}"
            return c
        sel = ",".join(ex(c) for c in cols)
        db.execute(f"insert into {t} ({','.join(cols)}) select {sel} from {t} where rowid <= {base}")
db.commit(); db.execute("vacuum"); db.close()
