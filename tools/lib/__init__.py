"""What every tools/ folder shares (README.md: a line each). A script in tools/FOLDER/ puts
tools/ on sys.path and imports by folder, from any working directory:

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/
    from lib import ROOT, outputs
    from reference import reference
"""
import gzip
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository


# Result files read as written or gzip-compressed. The per-trial records of `pert passkey` and `pert
# ruler` (every trial's draw, answer ids and verdict) are committed as NAME.json.gz, made by
# `gzip -9n` (no name, no time: the same bytes every run; a tenth of the size); the sweeps, which
# `pert sweep --merge` reads back, stay plain. Whatever reads a result opens it through
# open_result, so either form reads the same.
RESULT_SUFFIXES = (".json.gz", ".json")


def open_result(path):
    """PATH opened for reading as text: decompressed where it ends in .gz, as it is otherwise."""
    return gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")


def result_files(folder):
    """{NAME: path} of the results in folder (NAME.json or NAME.json.gz; the .gz where both are), in
    the order of their file names; {} where there is no folder."""
    files = {}
    for f in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        name = next((f[:-len(s)] for s in RESULT_SUFFIXES if f.endswith(s)), None)
        if name is not None:
            files[name] = os.path.join(folder, f)
    return files
