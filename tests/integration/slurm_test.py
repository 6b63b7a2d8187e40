#!/usr/bin/env python3
"""A sweep grid on a real Slurm (tools/cluster/slurm_grid.py): a single-node cluster of this host.

    slurm_test.py PERT

Starts munged, slurmctld and slurmd (Debian's munge and slurm-wlm) on free ports with their
files in a scratch directory, then:
1. a 4-task array of the family's rope and alibi models x {plain, StreamingLLM} x {128, 256}
   and its afterok merge: the merged cells equal a single-process run's, cell for cell;
2. a 4-task array of 12 slower cells, one task requeued (`scontrol requeue`) after its first
   cell is saved: the task runs again, its first cell stays as it was (not computed twice), and
   the merge again equals a single-process run's;
3. a 4-task pass-key array (`pert passkey --shard`) and its merge: a single run's cells;
then stops every daemon it started. Exit 77 (skipped, with the reason) when not root or when
the daemons are not installed; never a silent pass.
"""
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from checklist import check, failures  # noqa: E402
from cluster.slurm_grid import absolute_args  # noqa: E402  (the paths as the tasks get them)

SKIP = 77
TIMING = ("seconds", "tokens_per_second")
TEXT = os.path.join(ROOT, "build", "data", "tinystories_heldout.txt")
GRIDS = {
    "array": ["-m", "models/rope", "-m", "models/alibi", "--config", "plain", "--config",
              "configs/extend/streaming.json", "--lengths", "128,256", "--chunks", "4"],
    # Cells of 0.2-2 s each (one thread; three windows of the text, a third of the whole text's time:
    # ~9 s for the 12, not 29), so task 2, whose cells are plain at 2048, NTK at 4096 and linear at
    # 1024 (cell k goes to task k mod 4 + 1), has ~2 s left when it is requeued after its first.
    "requeue": ["-m", "models/rope"] + [a for c in ("plain", "configs/rope/ntk-x2.json", "configs/rope/yarn-x2.json",
                                                    "configs/rope/linear-x2.json") for a in ("--config", c)]
               + ["--lengths", "1024,2048,4096", "--chunks", "3"],
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """munged, slurmctld and slurmd in the foreground, their files under `d`."""

    def __init__(self, d):
        self.d, self.procs = d, []
        self.host = socket.gethostname().split(".")[0]
        self.env = dict(os.environ, SLURM_CONF=os.path.join(d, "slurm.conf"))
        for sub in ("state", "spool", "log"):
            os.makedirs(os.path.join(d, sub))
        with open(os.path.join(d, "munge.key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(os.path.join(d, "munge.key"), 0o400)
        conf = f"""ClusterName=pertci
SlurmctldHost={self.host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge.sock
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName={self.host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=pert Nodes={self.host} Default=YES MaxTime=INFINITE State=UP
"""
        with open(self.env["SLURM_CONF"], "w") as f:
            f.write(conf)

    def start(self):
        d = self.d
        self.spawn(["munged", "--foreground", "--force", f"--socket={d}/munge.sock", f"--key-file={d}/munge.key",
                    f"--pid-file={d}/munged.pid", f"--log-file={d}/log/munged.log", f"--seed-file={d}/munge.seed"])
        self.wait_for(lambda: os.path.exists(f"{d}/munge.sock"), 20, "munged's socket")
        self.spawn(["slurmctld", "-D", "-i"])
        self.spawn(["slurmd", "-D"])
        self.wait_for(lambda: "idle" in self.run(["sinfo", "-h", "-o", "%t"]).stdout, 60, "the node idle in sinfo")

    def spawn(self, argv):
        log = open(os.path.join(self.d, "log", argv[0] + ".out"), "w")
        self.procs.append(subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT))

    def run(self, argv, **kw):
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, **kw)

    def wait_for(self, ready, seconds, what):
        end = time.time() + seconds
        while time.time() < end:
            if ready():
                return
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited ({p.returncode}) while waiting for {what}: "
                                       f"{self.logs()}")
            time.sleep(0.2)
        raise RuntimeError(f"no {what} after {seconds} s: {self.logs()}")

    def logs(self):
        out = []
        for path in sorted(glob.glob(os.path.join(self.d, "log", "*"))):
            with open(path, errors="replace") as f:
                out.append(f"--- {os.path.basename(path)}\n" + "".join(f.readlines()[-8:]))
        return "\n".join(out)

    def stop(self):
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def untimed(cells):
    return [{k: v for k, v in c.items() if k not in TIMING} for c in cells]


def cells_of(path):
    with open(path) as f:
        return json.load(f)["cells"]


def submit(cluster, pert, run, grid, command=("sweep", "-f", TEXT, "--split-docs")):
    r = cluster.run(["/usr/bin/python3", os.path.join(ROOT, "tools", "cluster", "slurm_grid.py"), "--tasks", "4", "--dir", run,
                     "--pert", pert, "--submit", "--"] + list(command) + grid, cwd=ROOT)
    if r.returncode != 0:
        raise RuntimeError(f"slurm_grid.py --submit: {r.stderr.strip()}")
    words = r.stdout.split()
    return words[1], words[5].rstrip(":")  # "array ID (4 tasks), merge ID: ..."


def wait_done(cluster, jobs, seconds):
    cluster.wait_for(lambda: cluster.run(["squeue", "-h", "-j", ",".join(jobs)]).stdout.strip() == "", seconds,
                     f"jobs {', '.join(jobs)} done")


def reference(pert, tmp, name, grid):
    out = os.path.join(tmp, name + "-single.json")
    subprocess.run([pert, "sweep", "-f", TEXT, "--split-docs", "-t", "1", "-q", "--out", out] + absolute_args(grid, ROOT),
                   cwd=ROOT, check=True, capture_output=True)
    return cells_of(out)


def main():
    pert = os.path.abspath(sys.argv[1])
    if os.geteuid() != 0:
        print("SKIP: not root: this test starts munged, slurmctld and slurmd itself (CI runs it as root)")
        return SKIP
    missing = [b for b in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo") if not shutil.which(b)]
    if missing:
        print(f"SKIP: {', '.join(missing)} not installed (Debian's slurm-wlm and munge; tools/setup.sh --test installs them)")
        return SKIP
    if not os.path.exists(TEXT):
        print(f"SKIP: {TEXT} not found (tools/setup.sh writes it)")
        return SKIP
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(os.path.join(tmp, "slurm"))
        try:
            cluster.start()
            check("a single-node Slurm of this host is up", True)

            # 1. The array and its merge.
            want = reference(pert, tmp, "array", GRIDS["array"])
            run = os.path.join(tmp, "array")
            jobs = submit(cluster, pert, run, GRIDS["array"])
            wait_done(cluster, jobs, 300)
            merged = os.path.join(run, "sweep.json")
            check("array: 4 shard files and the merged sweep written",
                  len(glob.glob(os.path.join(run, "shard-*.json"))) == 4 and os.path.exists(merged), cluster.logs())
            got = cells_of(merged) if os.path.exists(merged) else []
            check("array: the merged cells equal the single-process run's, cell for cell",
                  len(got) == 8 and untimed(got) == untimed(want), (len(got), len(want)))

            # 2. A task requeued mid-run.
            want = reference(pert, tmp, "requeue", GRIDS["requeue"])
            run = os.path.join(tmp, "requeue")
            array, merge = submit(cluster, pert, run, GRIDS["requeue"])
            shard = os.path.join(run, "shard-2.json")

            def one_cell():
                try:
                    return len(cells_of(shard)) == 1
                except (OSError, ValueError):
                    return False
            cluster.wait_for(one_cell, 120, "task 2's first cell")
            first = cells_of(shard)[0]
            r = cluster.run(["scontrol", "requeue", f"{array}_2"])
            check("requeue: scontrol requeue of task 2 mid-run accepted", r.returncode == 0, r.stderr)
            # A requeued job waits out a begin time (Slurm's guard against requeue loops, ~2 minutes); now,
            # here, once it is pending for it (an update while the requeue is under way is overwritten by it).
            def task2():  # "STATE REASON", or "" once the task has left the queue
                return cluster.run(["squeue", "-h", "-j", f"{array}_2", "-o", "%T %r"]).stdout.strip()

            pending = []  # seen pending: the requeue has taken effect

            def released():
                state = task2()
                if state == "PENDING BeginTime":
                    cluster.run(["scontrol", "update", f"JobId={array}_2", "StartTime=now"])
                if state.startswith("PENDING"):
                    pending.append(state)
                    return False
                return bool(pending) or state == ""
            cluster.wait_for(released, 180, "task 2 requeued and released from its begin time")  # or its begin time past
            wait_done(cluster, [array, merge], 300)
            with open(os.path.join(run, "logs", "shard-2.log"), errors="replace") as f:
                log = f.read()
            check("requeue: task 2 was cancelled by the requeue and ran again",
                  "DUE TO JOB REQUEUE" in log and log.count("| model |") == 1, log[-600:])
            check("requeue: task 2's first cell kept as it was, not computed again",
                  cells_of(shard)[0] == first and len(cells_of(shard)) == 3, cells_of(shard)[:1])
            merged = os.path.join(run, "sweep.json")
            got = cells_of(merged) if os.path.exists(merged) else []
            check("requeue: the merged cells equal the single-process run's, cell for cell",
                  len(got) == 12 and untimed(got) == untimed(want), (len(got), cluster.logs()))

            # 3. A pass-key grid: the same array and merge.
            grid = ["-m", "models/rope", "--lengths", "64,160", "--trials", "2"]
            single = os.path.join(tmp, "passkey-single.json")
            subprocess.run([pert, "passkey", "-t", "1", "-q", "--json-out", single] + absolute_args(grid, ROOT), cwd=ROOT,
                           check=True, capture_output=True)
            run = os.path.join(tmp, "passkey")
            wait_done(cluster, submit(cluster, pert, run, grid, ("passkey",)), 300)
            merged = os.path.join(run, "passkey.json")
            got = cells_of(merged) if os.path.exists(merged) else []
            check("passkey: a 4-task array's merged cells (keys, answers, verdicts) equal a single run's",
                  len(got) == 10 and got == cells_of(single), (len(got), cluster.logs()))
        except RuntimeError as e:
            check("the cluster ran the jobs", False, str(e))
        finally:
            cluster.stop()
            check("every daemon started is stopped", all(p.poll() is not None for p in cluster.procs))
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
