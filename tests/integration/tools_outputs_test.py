"""tools/lib/outputs.py, through which every tool writes its results (JSON, CSV, plots, checkpoints,
models): whole or not at all, never through a planted name, devices and stdout in place, as
pert's own outputs (tests/unit/test_output_files.cpp). The full disk is tests/helpers/fault_inject.cpp,
preloaded (ctest passes its path in PERT_FAULT_INJECT).
"""
import json
import os
import subprocess
import sys

import pytest

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools")
sys.path.insert(0, TOOLS)
from lib.outputs import replaced, save_figure  # noqa: E402


def write_json(path, value):
    with replaced(path) as f:
        json.dump(value, f)


def test_a_full_disk_leaves_the_old_file_whole_and_no_temporary_file(tmp_path):
    shim = os.environ.get("PERT_FAULT_INJECT")
    if not shim:
        pytest.skip("PERT_FAULT_INJECT not set (ctest sets it)")
    out = tmp_path / "result.json"
    out.write_text("older results\n")
    code = f"import sys; sys.path.insert(0, {TOOLS!r}); from lib.outputs import replaced\n" \
           f"with replaced({str(out)!r}) as f: f.write('x' * 100000)"
    for room in (0, 20):
        env = dict(os.environ, LD_PRELOAD=shim, PERT_FAULT_DIR=str(tmp_path), PERT_FAULT_BYTES=str(room))
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert r.returncode != 0 and "No space left on device" in r.stderr, r.stderr
        assert out.read_text() == "older results\n"
        assert sorted(os.listdir(tmp_path)) == ["result.json"]


def test_an_error_in_the_block_leaves_the_old_file(tmp_path):
    out = tmp_path / "result.json"
    out.write_text("older\n")
    with pytest.raises(RuntimeError):
        with replaced(out) as f:
            f.write("half")
            raise RuntimeError("stopped")
    assert out.read_text() == "older\n" and os.listdir(tmp_path) == ["result.json"]


def test_planted_names_are_never_followed_and_modes_are_kept(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    for name in ("result.json.tmp", ".result.json.tmp"):
        os.symlink(victim, shared / name)
    write_json(shared / "result.json", {"a": 1})
    assert victim.read_text() == "precious\n"
    assert not os.path.islink(shared / "result.json") and json.loads((shared / "result.json").read_text()) == {"a": 1}
    os.chmod(shared / "result.json", 0o640)
    write_json(shared / "result.json", {"a": 2})
    assert os.stat(shared / "result.json").st_mode & 0o777 == 0o640


def test_links_devices_and_stdout(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("{}")
    link = tmp_path / "link.json"
    os.symlink(real, link)
    write_json(link, {"through": "link"})  # the caller's own link: its file replaced, the link kept
    assert os.path.islink(link) and json.loads(real.read_text()) == {"through": "link"}
    os.symlink(tmp_path / "nothing", tmp_path / "dangling")
    with pytest.raises(OSError, match="a link to nothing"):
        write_json(tmp_path / "dangling", {})
    assert not (tmp_path / "nothing").exists()
    write_json("/dev/null", {})  # in place, even as root
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")
    os.symlink("/proc/self/fd/1", tmp_path / "stdout")
    code = f"import sys; sys.path.insert(0, {TOOLS!r}); from lib.outputs import replaced\n" \
           f"print('before', flush=True)\nwith replaced({str(tmp_path / 'stdout')!r}) as f: f.write('json\\n')\nprint('after')"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout == "before\njson\nafter\n" and os.path.islink(tmp_path / "stdout")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    write_json(fifo, {"to": "fifo"})
    assert json.loads(reader.communicate(timeout=10)[0]) == {"to": "fifo"} and not os.path.isfile(fifo)


def test_figures_are_saved_whole_in_the_format_their_name_says(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3])
    save_figure(fig, tmp_path / "plot.png")
    save_figure(fig, tmp_path / "plot.svg")
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (tmp_path / "plot.svg").read_bytes()[:400]
    assert sorted(os.listdir(tmp_path)) == ["plot.png", "plot.svg"]



def test_copies_are_whole_and_never_through_a_planted_name(tmp_path):
    from lib.outputs import copy
    src, dst, victim = tmp_path / "src.bin", tmp_path / "dst.bin", tmp_path / "victim"
    src.write_bytes(bytes(range(256)) * 100)
    victim.write_text("untouched\n")
    dst.write_text("older\n")
    os.symlink(victim, tmp_path / "dst.bin.tmp")
    copy(src, dst)
    assert dst.read_bytes() == src.read_bytes() and victim.read_text() == "untouched\n"
    with pytest.raises(FileNotFoundError):
        copy(tmp_path / "nothing", dst)
    assert dst.read_bytes() == src.read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["dst.bin", "dst.bin.tmp", "src.bin", "victim"]


def test_the_slurm_scripts_are_written_through_replaced(tmp_path):
    """slurm_grid.py once wrote NAME.tmp then renamed it: a link planted at that name was followed."""
    run, victim = tmp_path / "run", tmp_path / "victim"
    run.mkdir()
    victim.write_text("untouched\n")
    for name in ("array.sbatch.tmp", "merge.sbatch.tmp"):
        os.symlink(victim, run / name)
    r = subprocess.run([sys.executable, os.path.join(TOOLS, "cluster", "slurm_grid.py"), "--tasks", "2", "--dir", str(run), "--",
                        "sweep", "-m", "models/rope", "--lengths", "128", "-f", "text.txt"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "untouched\n"
    assert all((run / n).is_file() and not (run / n).is_symlink() and "#SBATCH" in (run / n).read_text()
               for n in ("array.sbatch", "merge.sbatch"))


def slurm_grid(cwd, *args):
    return subprocess.run([sys.executable, os.path.join(TOOLS, "cluster", "slurm_grid.py"), *args], cwd=cwd,
                          capture_output=True, text=True)


@pytest.mark.parametrize("flag", ["--partition", "--account", "--time", "--mem", "--dir"])
@pytest.mark.parametrize("value", ["a\nrm -rf ~", "a b", "a\rb", "\x1b[31m"])
def test_slurm_values_that_would_add_a_line_are_refused(tmp_path, flag, value):
    """A line break in an #SBATCH value starts a line bash runs: one line naming the flag, no script."""
    args = ["--tasks", "2"] + (["--dir", str(tmp_path / "run")] if flag != "--dir" else []) + [flag, value]
    r = slurm_grid(tmp_path, *args, "--", "sweep", "-m", "models/rope", "--lengths", "128", "-f", "t.txt")
    assert r.returncode != 0 and r.stderr.startswith("slurm_grid.py: " + flag) and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "run").exists()


def test_slurm_paths_in_every_form_are_made_absolute(tmp_path):
    """`--file=rel.txt`, `-mDIR` and `--config=FILE` reach the task as absolute paths; `plain` stays."""
    r = slurm_grid(tmp_path, "--tasks", "2", "--dir", "run", "--", "sweep", "--file=rel.txt", "-mmodels/rope",
                   "--config=plain", "--config=c.json", "--config", "d.json", "-f", "t.txt", "--lengths", "64")
    assert r.returncode == 0, r.stderr
    script = (tmp_path / "run" / "array.sbatch").read_text()
    for arg in (f"--file={tmp_path}/rel.txt", f"-m{tmp_path}/models/rope", "--config=plain",
                f"--config={tmp_path}/c.json", f"--config {tmp_path}/d.json", f"-f {tmp_path}/t.txt"):
        assert arg in script, (arg, script)


@pytest.mark.parametrize("where", ["a_file", "/proc/pert_run"])
def test_a_slurm_dir_that_cannot_be_made_is_one_line(tmp_path, where):
    (tmp_path / "a_file").write_text("x")
    r = slurm_grid(tmp_path, "--tasks", "2", "--dir", where, "--", "sweep", "-m", "m", "--lengths", "64", "-f", "t")
    assert r.returncode != 0 and r.stderr.startswith(f"slurm_grid.py: --dir {where}: ") and r.stderr.count("\n") == 1, r.stderr
    assert "Traceback" not in r.stderr
