"""`pip install --no-build-isolation .` (setup.py) into a fresh venv, offline, as docs/python.md
says: `import pert` then works in that venv with no PYTHONPATH, from any folder, and gives the
logits build/python's module gives; the checkout gains no file git would see; a plain `pip
install .` (Debian's pip) does the same; `pip uninstall` takes it out again.

    python_install_test.py BUILD_DIR   (a configured pert build, whose pert_python the install
                                        reuses through PERT_CMAKE_BUILD_DIR; ctest: python_install)
Exit 77: this Python has no venv or pip (Debian: python3-venv, python3-pip).
"""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(sys.argv[1])
VENV = os.path.join(BUILD, "pip-venv")
# The same call in each interpreter: pert's module file and a digest of the logits on models/rope.
PROBE = f"""
import hashlib, pert
m = pert.load({os.path.join(ROOT, "models", "rope")!r})
logits = m.logits(m.tokenize("Once upon a time there was a little dog."))
print(pert.__file__)
print(logits.shape, hashlib.sha256(logits.tobytes()).hexdigest())
"""


def run(command, **kwargs):
    out = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if out.returncode != 0:
        sys.exit(f"{' '.join(command)}: exit {out.returncode}\n{out.stdout[-3000:]}{out.stderr[-3000:]}")
    return out.stdout


def visible_to_git():
    """The files git would see (changed or untracked, not ignored)."""
    return set(run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=all"]).splitlines())


def main():
    for module in ("venv", "ensurepip"):
        if subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode != 0:
            print(f"skipped: {sys.executable} cannot import {module} (Debian: python3-venv, python3-pip)")
            return 77
    shutil.rmtree(VENV, ignore_errors=True)
    run([sys.executable, "-m", "venv", "--system-site-packages", VENV])  # (numpy: Debian's)
    python = os.path.join(VENV, "bin", "python")
    before = visible_to_git()
    env = {**os.environ, "PERT_CMAKE_BUILD_DIR": BUILD, "PERT_PIP_BUILD": os.path.join(BUILD, "pip-build")}
    env.pop("PYTHONPATH", None)
    run([python, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--disable-pip-version-check", ROOT],
        env=env, cwd=tempfile.gettempdir())
    new = visible_to_git() - before
    assert not new, f"pip install left files git would see: {sorted(new)}"

    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with tempfile.TemporaryDirectory() as elsewhere:  # not the checkout: nothing found beside it
        installed = run([python, "-c", PROBE], env=clean, cwd=elsewhere).splitlines()
    assert installed[0].startswith(os.path.join(VENV, "lib")), f"pert imported from {installed[0]}, not the venv"
    built = run([sys.executable, "-c", PROBE], env={**clean, "PYTHONPATH": os.path.join(BUILD, "python")}).splitlines()
    assert installed[1] == built[1], f"the venv's logits {installed[1]} differ from build/python's {built[1]}"

    # Debian's pip (23.0) builds a project without pyproject.toml in the environment: plain
    # `pip install .` needs no download either (--no-index: none is possible).
    run([python, "-m", "pip", "install", "--no-index", "--disable-pip-version-check", "--force-reinstall", "--no-deps", ROOT],
        env=env, cwd=tempfile.gettempdir())
    with tempfile.TemporaryDirectory() as elsewhere:
        assert run([python, "-c", PROBE], env=clean, cwd=elsewhere).splitlines() == installed

    run([python, "-m", "pip", "uninstall", "-y", "--disable-pip-version-check", "pert"], env=clean)
    gone = subprocess.run([python, "-c", "import pert"], capture_output=True, text=True, env=clean, cwd=tempfile.gettempdir())
    assert gone.returncode != 0 and "No module named 'pert'" in gone.stderr, gone.stderr
    shutil.rmtree(VENV)
    print(f"pip install into a venv: import pert from {installed[0]}, logits {installed[1]}; uninstalled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
