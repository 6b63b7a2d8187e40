#!/usr/bin/env python3
"""A long generation that must stay sound: runs

    PERT generate -m MODEL -p PROMPT -n 20000 -c 512 --ignore-eos

samples the process's resident memory as it runs, and fails unless pert exits 0 with no
sanitizer report on stderr and the resident set stays flat once the cache is full: from a
quarter of the run on (the cache fills in the first 512 of 20000 tokens), it may not grow by
more than --slack MB until pert prints its stats line (the sanitizer's leak check at exit is not
generation's memory). Run it on the sanitizer build (build-asan/pert) for the real check, with
ASan's defaults: its quarantine (freed blocks held back to catch use after free, 256 MB) would
grow with any allocation made per token, and decoding makes none (tests/integration/alloc_test.cpp).

    /usr/bin/python3 tools/measure/soak.py build-asan/pert [-m models/rope] [-n 20000] [-c 512]
        [--csv rss.csv] [--plot rss.png]
"""
import argparse
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from lib.outputs import replaced, save_figure  # whole or not at all, as pert's own outputs

REPORTS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "SUMMARY: ")


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pert", metavar="PERT", help="the pert binary, e.g. build-asan/pert")
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, "models", "rope"), help="model directory (default models/rope)")
    ap.add_argument("-n", type=int, default=20000, help="tokens to generate (default %(default)s)")
    ap.add_argument("-c", type=int, default=512, help="context; past it the cache shifts (default %(default)s)")
    ap.add_argument("-t", "--threads", type=int, default=2, help="pert generate -t (default %(default)s)")
    ap.add_argument("--slack", type=float, default=4.0, help="MB the resident set may grow after the first quarter (default %(default)s)")
    ap.add_argument("--csv", help="write the samples (seconds, MB)")
    ap.add_argument("--plot", help="write a PNG of resident memory over time")
    a = ap.parse_args()

    cmd = [a.pert, "generate", "-m", a.model, "-p", "Once upon a time", "-n", str(a.n), "-c", str(a.c),
           "--ignore-eos", "-s", "1", "-t", str(a.threads)]
    print("soak:", " ".join(cmd), file=sys.stderr)
    t0 = time.monotonic()
    # Only generation is judged: after pert's stats line the process exits, and the sanitizer's
    # leak check at exit takes several MB of its own (the last 0.3 s before the line is dropped
    # too, in case the line was read late).
    stats_at = []
    err_lines = []

    def read_stderr(stream):
        for line in stream:
            if line.startswith("pert: prompt") and not stats_at:
                stats_at.append(time.monotonic() - t0)
            err_lines.append(line)

    with open(os.devnull, "w") as out, subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True) as p:
        reader = threading.Thread(target=read_stderr, args=(p.stderr,))
        reader.start()
        samples = []
        while p.poll() is None:
            mb = rss_mb(p.pid)
            if mb is not None:
                samples.append((time.monotonic() - t0, mb))
            time.sleep(0.1)
        reader.join()
        code = p.returncode
    err = "".join(err_lines)
    wall = stats_at[0] - 0.3 if stats_at else time.monotonic() - t0
    samples = [(t, m) for t, m in samples if t < wall]

    if a.csv:
        with replaced(a.csv) as f:
            f.write("seconds,rss_mb\n" + "".join(f"{t:.2f},{m:.1f}\n" for t, m in samples))
    if a.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.plot([t for t, _ in samples], [m for _, m in samples])
        ax.set_xlabel("seconds")
        ax.set_ylabel("resident MB")
        ax.set_title(f"pert generate -n {a.n} -c {a.c} ({os.path.basename(a.pert)})")
        fig.tight_layout()
        save_figure(fig, a.plot, metadata={"Software": None})

    failures = []
    if code != 0:
        failures.append(f"exit code {code}")
    failures += [f"sanitizer report: {line.strip()}" for line in err.splitlines() if line.startswith(REPORTS)]
    late = [m for t, m in samples if t >= wall / 4]
    if len(late) < 5:
        failures.append(f"only {len(late)} memory samples after the first quarter: run too short to judge")
    else:
        growth = max(late) - late[0]
        print(f"soak: {wall:.0f} s, {len(samples)} samples, resident {late[0]:.1f} MB at a quarter, "
              f"{max(late):.1f} MB at most after (+{growth:.1f} MB, allowed {a.slack})", file=sys.stderr)
        if growth > a.slack:
            failures.append(f"resident memory grew {growth:.1f} MB after the cache was full")
    summary = [line for line in err.splitlines() if line.startswith("pert:")]
    print("\n".join(summary), file=sys.stderr)
    for f in failures:
        print("soak: FAIL:", f, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
