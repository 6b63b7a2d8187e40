#!/usr/bin/env python3
"""`pert passkey` and `pert ruler` in shards (--shard K/N, --merge, --partial), as a Slurm array
runs them: three shards merged give the whole run's cells and table; a shard file that lost its
last cell (its task killed) is resumed, running only that cell and keeping the others as they
were; a merge with a shard missing is refused naming the cells, and --partial merges what there
is; a shard file of other settings is refused, as are flags that do not go together; two shards
given one file at once keep every cell; the model spelled with a trailing slash is the same
model; a ruler cell with no score and no reason is refused.

    task_shards_test.py PERT
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
from checklist import check, failures  # noqa: E402

ROPE = os.path.join(ROOT, "models", "rope")
GRIDS = {
    "passkey": ["passkey", "-m", ROPE, "--lengths", "64,160", "--depths", "0,0.5,1", "--trials", "2"],
    "ruler": ["ruler", "-m", ROPE, "--tasks", "niah_single_1,vt,cwe", "--lengths", "128,400", "--depths", "0,1",
              "--trials", "1"],
}


def run(pert, args):
    return subprocess.run([pert] + args + ["-q", "-t", "1"], capture_output=True, text=True)


def cells(path):
    with open(path) as f:
        return json.load(f)["cells"]


def one_line_error(r, *words):
    err = r.stderr.strip()
    return r.returncode != 0 and len(err.splitlines()) == 1 and err.startswith("pert: error: ") and all(
        w in err for w in words)


def main():
    pert = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        for name, grid in GRIDS.items():
            at = lambda f: os.path.join(tmp, f"{name}-{f}")  # noqa: E731
            whole = run(pert, grid + ["--json-out", at("whole.json")])
            check(f"{name}: the whole grid runs", whole.returncode == 0, whole.stderr)
            parts = [at(f"shard{k}.json") for k in (1, 2, 3)]
            for k, part in enumerate(parts, 1):
                r = run(pert, grid + ["--shard", f"{k}/3", "--json-out", part])
                check(f"{name}: shard {k}/3 runs", r.returncode == 0, r.stderr)
            merged = run(pert, [name, "--merge"] + parts[::-1] + ["--json-out", at("merged.json")])
            check(f"{name}: three shards merged: the whole run's cells, in its order, and its table",
                  merged.returncode == 0 and cells(at("merged.json")) == cells(at("whole.json"))
                  and merged.stdout == whole.stdout, merged.stderr)

            # Shard 1 killed before its last cell was saved: the rerun runs that cell only.
            with open(parts[0]) as f:
                shard = json.load(f)
            kept, lost = shard["cells"][:-1], shard["cells"][-1]
            shard["cells"] = kept
            with open(parts[0], "w") as f:
                json.dump(shard, f)
            r = run(pert, grid + ["--shard", "1/3", "--json-out", parts[0]])
            now = cells(parts[0])
            check(f"{name}: a shard rerun resumes its file: the cells it had kept as they were, the lost one again",
                  r.returncode == 0 and now[:-1] == kept and now[-1] == lost, r.stderr)

            r = run(pert, [name, "--merge", parts[0], parts[2], "--json-out", at("m2.json")])
            check(f"{name}: a merge without shard 2: one line naming its cells, nothing written",
                  one_line_error(r, "the grid is not whole", f"{len(cells(parts[1]))} cells missing")
                  and not os.path.exists(at("m2.json")), r.stderr)
            r = run(pert, [name, "--merge", parts[0], parts[2], "--json-out", at("m2.json"), "--partial"])
            check(f"{name}: --partial: the cells there are, the missing ones in a warning",
                  r.returncode == 0 and len(cells(at("m2.json"))) == len(cells(parts[0])) + len(cells(parts[2]))
                  and "warning" in r.stderr and "—" in r.stdout, r.stderr)

            r = run(pert, grid[:-1] + ["3", "--shard", "2/3", "--json-out", parts[1]])
            check(f"{name}: a shard file of other settings (--trials) is refused, naming the setting",
                  one_line_error(r, parts[1], "trials"), r.stderr)
            r = run(pert, grid + ["--shard", "1/3"])
            check(f"{name}: --shard without --json-out: one line", one_line_error(r, "--shard needs --json-out"),
                  r.stderr)
            r = run(pert, grid + ["--partial"])
            check(f"{name}: --partial without --merge: one line", one_line_error(r, "--partial goes with --merge"),
                  r.stderr)
            r = run(pert, grid + ["--shard", "4/3", "--json-out", at("x.json")])
            check(f"{name}: --shard 4/3: one line naming --shard", one_line_error(r, "--shard"), r.stderr)
            # Hostile shard files: one line naming the file and the field, to --merge and to a resumed --shard.
            with open(parts[2]) as f:
                good = json.load(f)
            for field, broken in (("lengths", dict(good, lengths="64")), ("cells[0].length", dict(
                    good, cells=[dict(good["cells"][0], length="x")] + good["cells"][1:])), ("no cells", [1, 2])):
                bad = at("bad.json")
                with open(bad, "w") as f:
                    json.dump(broken, f)
                r = run(pert, [name, "--merge", parts[0], bad])
                check(f"{name}: --merge of a file with a bad {field}: one line naming the file and it",
                      one_line_error(r, bad, field), r.stderr)
                r = run(pert, grid + ["--shard", "3/3", "--json-out", bad])
                check(f"{name}: --shard resuming a file with a bad {field}: one line naming the file and it",
                      one_line_error(r, bad, field), r.stderr)
            # Two shards given one file at once: each adds its cells to what the other wrote.
            one = at("one.json")
            procs = [subprocess.Popen([pert] + grid + ["--shard", f"{k}/2", "--json-out", one, "-q", "-t", "1"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for k in (1, 2)]
            errors = [p.communicate()[1] for p in procs]
            check(f"{name}: two shards writing one --json-out at once: every cell of the grid kept, in order",
                  all(p.returncode == 0 for p in procs) and cells(one) == cells(at("whole.json")), errors)
            # The model as "models/rope/" resumes and merges with files made as "models/rope".
            r = run(pert, [name, "-m", ROPE + "/"] + grid[3:] + ["--shard", "1/3", "--json-out", parts[0]])
            check(f"{name}: a shard resumed with the model as {ROPE}/: the same model", r.returncode == 0, r.stderr)
            if name == "ruler":  # a cell with no score must say why
                with open(parts[2]) as f:
                    broken = json.load(f)
                broken["cells"][0]["score"] = None
                broken["cells"][0].pop("skipped", None)
                bad = at("null.json")
                with open(bad, "w") as f:
                    json.dump(broken, f)
                r = run(pert, [name, "--merge", parts[0], parts[1], bad])
                check("ruler: --merge of a cell with a null score and no reason: one line naming the file",
                      one_line_error(r, bad, "cells[0].score is null") and r.stdout == "", r.stderr)
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
