#!/usr/bin/env python3
"""A `pert sweep`, `pert passkey` or `pert ruler` grid as a Slurm job array and its merge job.

    slurm_grid.py --tasks N --dir RUN [--cpus-per-task C] [--partition P] [--account A]
                  [--time T] [--mem M] [--pert build/pert] [--submit] -- sweep|passkey|ruler ARGS...

Writes RUN/array.sbatch (N tasks: task K runs `pert COMMAND ARGS --shard K/N` into
RUN/shard-K.json, its threads from SLURM_CPUS_PER_TASK) and RUN/merge.sbatch (`pert COMMAND
--merge RUN/shard-*.json` into RUN/COMMAND.json, with the CSV, then the plots); with --submit,
submits the array and the merge with `--dependency=afterok:ARRAY`, and prints both job ids.
Without it, prints the two sbatch lines to run.

Why a script and not `pert sweep --sbatch`: what a cluster needs (partition, account, time,
modules, a container) varies by site and is best edited in the two scripts; pert itself stays
free of Slurm and the scripts are plain text to read before submitting.

What makes it safe to lose a task: every task writes only its own shard file, after every
cell, whole or not at all; the array is submitted with --requeue, and a task that is requeued
(`scontrol requeue JOB_K`, or a node failure) runs the same command again, which skips the
cells its file has: no finished cell is computed twice. The merge runs only after every task
succeeded (afterok) and refuses a grid with a cell missing, naming it; `pert sweep --status
RUN/shard-*.json` shows each shard's cells done, failed and missing meanwhile. The files must
lie on a filesystem every node sees (RUN, the models, the text, the configs); paths are made
absolute here.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from lib.outputs import replaced  # noqa: E402  (whole or not at all, never through a planted link)
# Options of `pert sweep` that take a path, made absolute so a task on another node finds them.
PATH_OPTIONS = {"-m", "--model", "--config", "-f", "--file", "--essay"}
# Each command's output flag (a task's shard file, the merge's result) and its plot.
OUT_FLAG = {"sweep": "--out", "passkey": "--json-out", "ruler": "--json-out"}
SET_BY_SCRIPTS = ("--out", "--json-out", "--json", "--csv", "--shard", "--merge", "--partial", "--status", "-t",
                  "--threads", "--dump-prompts")


def absolute_args(args, base=None):
    """ARGS with the paths of PATH_OPTIONS made absolute (relative ones read from `base`, default
    the working directory), in each form pert reads: `--file PATH`, `--file=PATH` and `-fPATH`."""
    def absolute(path):
        return path if path == "plain" else os.path.abspath(os.path.join(base or os.getcwd(), path))
    out, take = [], False
    for a in args:
        if take and a != "plain" and not a.startswith("-"):
            a = absolute(a)
            take = False
        elif a in PATH_OPTIONS:
            take = True
        else:
            take = False
            flag, eq, value = a.partition("=")
            if a.startswith("--") and eq and flag in PATH_OPTIONS and value:
                a = f"{flag}={absolute(value)}"
            elif not a.startswith("--") and a[:2] in PATH_OPTIONS and len(a) > 2:
                a = a[:2] + absolute(a[2:])
        out.append(a)
    return out


def sbatch_value(flag, value):
    """A value for an #SBATCH line: Slurm reads the line as it is, so a line break would start a
    line that bash runs, and a space or control character ends the value early."""
    if value is not None and (not value or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value)):
        sys.exit(f"slurm_grid.py: {flag} {value!r}: an #SBATCH value holds no spaces, line breaks or control characters")
    return value


def header(name, a, extra):
    lines = ["#!/bin/bash", f"#SBATCH --job-name={name}", f"#SBATCH --cpus-per-task={a.cpus_per_task}"]
    for flag, value in (("partition", a.partition), ("account", a.account), ("time", a.time), ("mem", a.mem)):
        if value:
            lines.append(f"#SBATCH --{flag}={value}")
    return "\n".join(lines + extra + ["set -euo pipefail", f"cd {shlex.quote(ROOT)}", ""])


def scripts(a, command, task_args):
    run = os.path.abspath(a.dir)
    q = shlex.quote
    pert = q(os.path.abspath(a.pert))
    args = " ".join(q(x) for x in absolute_args(task_args))
    logs = os.path.join(run, "logs")
    out = OUT_FLAG[command]
    array = header(f"pert-{command}", a, [
        f"#SBATCH --array=1-{a.tasks}", "#SBATCH --requeue", "#SBATCH --open-mode=append",
        f"#SBATCH --output={logs}/shard-%a.log"]) + (
        "# Task K of N: its share of the cells into its own file, resumed where a requeue left it.\n"
        f'exec {pert} {command} {args} --shard "$SLURM_ARRAY_TASK_ID/{a.tasks}" \\\n'
        f'  {out} {q(run)}/shard-"$SLURM_ARRAY_TASK_ID".json -t "${{SLURM_CPUS_PER_TASK:-1}}" -q\n')
    result = f"{q(run)}/{command}.json"
    if command == "sweep":
        plot = f"{q(os.path.join(ROOT, 'tools', 'plot.py'))} sweep {result} --out {q(run)}/sweep"
    else:
        plot = f"{q(os.path.join(ROOT, 'tools', 'plot_passkey.py'))} {result} --out {q(run)}/{command}.png"
    merge = header("pert-merge", a, [f"#SBATCH --output={logs}/merge.log"]) + (
        "# After every task succeeded: the whole grid, refused while a cell is missing.\n"
        f"{pert} {command} --merge {q(run)}/shard-*.json {out} {result} --csv {q(run)}/{command}.csv\n"
        f"/usr/bin/python3 {plot}\n")
    return run, array, merge


def sbatch(args):
    r = subprocess.run(["sbatch", "--parsable"] + args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"slurm_grid.py: sbatch {' '.join(args)}: {(r.stderr or r.stdout).strip()}")
    return r.stdout.strip().split(";")[0]


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        argv, rest = argv, []
    else:
        at = argv.index("--")
        argv, rest = argv[:at], argv[at + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, required=True, help="array tasks N (each a 1/N share of the cells)")
    ap.add_argument("--dir", required=True, help="the run's directory: scripts, shard files, logs, the merged sweep")
    ap.add_argument("--cpus-per-task", type=int, default=1, help="CPUs (and pert threads) per task (default 1)")
    ap.add_argument("--partition", help="Slurm partition (default: the cluster's)")
    ap.add_argument("--account", help="Slurm account to charge")
    ap.add_argument("--time", help="time limit per task, e.g. 02:00:00")
    ap.add_argument("--mem", help="memory per task, e.g. 4G")
    ap.add_argument("--pert", default=os.path.join(ROOT, "build", "pert"), help="the pert binary (default: build/pert)")
    ap.add_argument("--submit", action="store_true", help="submit both jobs (else print the sbatch lines)")
    a = ap.parse_args(argv)
    if a.tasks < 1 or a.cpus_per_task < 1:
        ap.error("--tasks and --cpus-per-task must be at least 1")
    for flag in ("partition", "account", "time", "mem"):
        sbatch_value("--" + flag, getattr(a, flag))
    sbatch_value("--dir", os.path.abspath(a.dir))  # (its logs' path is an #SBATCH line's value)
    if not rest or rest[0] not in OUT_FLAG:
        ap.error("give the grid after --: -- sweep|passkey|ruler ARGS (e.g. -- sweep -m MODEL --lengths ... -f TEXT)")
    command, task_args = rest[0], rest[1:]
    for flag in SET_BY_SCRIPTS:
        if flag in task_args or any(x.startswith(flag + "=") for x in task_args):
            ap.error(f"{flag}: set by the scripts for each task; leave it out of the {command}'s arguments")
    run, array, merge = scripts(a, command, task_args)
    try:
        os.makedirs(os.path.join(run, "logs"), exist_ok=True)
        for name, text in (("array.sbatch", array), ("merge.sbatch", merge)):
            with replaced(os.path.join(run, name)) as f:
                f.write(text)
    except OSError as e:
        sys.exit(f"slurm_grid.py: --dir {a.dir}: {e.strerror or e} ({e.filename or run})")
    array_path, merge_path = os.path.join(run, "array.sbatch"), os.path.join(run, "merge.sbatch")
    if not a.submit:
        print(f"sbatch --parsable {array_path}   # prints ARRAY_ID")
        print(f"sbatch --dependency=afterok:ARRAY_ID {merge_path}")
        return 0
    array_id = sbatch([array_path])
    if not re.fullmatch(r"\d+", array_id):
        sys.exit(f"slurm_grid.py: sbatch gave no job id for {array_path} ({array_id!r})")
    merge_id = sbatch([f"--dependency=afterok:{array_id}", merge_path])
    status = "sweep --status" if command == "sweep" else f"{command} --partial --merge"
    print(f"array {array_id} ({a.tasks} tasks), merge {merge_id}: {run}/{command}.json when done; "
          f"meanwhile: {a.pert} {status} {run}/shard-*.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
