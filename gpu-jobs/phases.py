# Samples a command's threads every 2 ms: prints, per phase, wall time and the busy threads.
import subprocess, sys, time, os
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
t0 = time.time(); samples = []
while p.poll() is None:
    try:
        tasks = os.listdir(f"/proc/{p.pid}/task")
    except FileNotFoundError:
        break
    main = None
    try:
        with open(f"/proc/{p.pid}/task/{p.pid}/stat") as f:
            fs = f.read().rsplit(")", 1)[1].split(); main = int(fs[11]) + int(fs[12])
    except Exception:
        pass
    samples.append((time.time() - t0, len(tasks), main))
    time.sleep(0.002)
end = time.time() - t0
last_multi = max((t for t, n, _ in samples if n > 2), default=0)
first_multi = min((t for t, n, _ in samples if n > 2), default=0)
mt = [(t, m) for t, _, m in samples if m is not None]
def main_at(x):
    return min(mt, key=lambda s: abs(s[0] - x))[1] if mt else 0
print(f"wall {end:.2f} s; >2 threads from {first_multi:.2f} to {last_multi:.2f} s; main thread CPU during that {(main_at(last_multi)-main_at(first_multi))/100:.2f} s, after {(mt[-1][1]-main_at(last_multi))/100 if mt else 0:.2f} s")
