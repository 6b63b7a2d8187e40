"""pert from Python: the runtime the `pert` CLI runs, for notebooks.

    import pert
    m = pert.load("models/rope", config={"rope_scaling": {"rope_type": "yarn", "factor": 4}})
    m.logits(m.tokenize("Once upon a time"))          # numpy float32 [T, vocab]
    pert.perplexity(m, file="text.txt", n_ctx=512)     # a dict, as `pert perplexity --json`
    pert.attention(m, file="text.txt", n_ctx=512)      # per range, numpy [layers, heads] per statistic
    pert.sweep(["models/rope", "models/alibi"], [128, 512], file="text.txt")  # records
    pert.passkey(m, [128, 512], trials=5)              # a dict, as `pert passkey --json`
    pert.ruler(m, ["niah_single_1", "vt"], [128, 512])  # a dict, as `pert ruler --json`

Errors are pert.Error carrying the library's one-line message, settings named by keyword. The compiled part is pert._pert;
sweep and merge check their arguments here and leave the grid to it (pert/grid.hpp: the cells of a shard, the grid's
identity, the cells' run, a merge's checks).
"""
import numbers as _numbers
import os as _os
import sys as _sys

# libgomp reads its spin count once, when it is loaded: set it first, as the CLI does
# (include/pert/threads.hpp, kGompSpinCount; user settings win). Without effect when something
# imported earlier (torch, numpy's OpenBLAS) has loaded libgomp already.
if "OMP_WAIT_POLICY" not in _os.environ and "GOMP_SPINCOUNT" not in _os.environ:
    _os.environ["GOMP_SPINCOUNT"] = "10000"

# Arrays come back as numpy's: without numpy here the first logits would fail, long after the
# import. Say so now, and which interpreter has it.
try:
    import numpy as _numpy  # noqa: E402,F401
except ImportError as _e:
    raise ImportError(f"pert needs numpy, which this Python ({_sys.executable}) cannot import; run Debian's "
                      "/usr/bin/python3 (python3-numpy), or install numpy for this one") from _e
try:
    from . import _pert  # noqa: E402
    from ._pert import (Error, Generation, Model, SchemeChangeError, Session,  # noqa: E402
                        __version__, load, set_threads, threads)
except ImportError as _e:
    raise ImportError(f"pert's compiled part (pert/_pert*.so beside this file) does not load in this Python "
                      f"({_sys.executable}, {_sys.version.split()[0]}): it is built for one interpreter, Debian's "
                      f"/usr/bin/python3 by tools/setup.sh, or the one that ran pip install; {_e}") from _e

__all__ = ["Error", "SchemeChangeError", "Model", "Session", "Generation", "load", "perplexity", "attention", "passkey", "ruler", "sweep",
           "merge", "set_threads", "threads", "__version__"]

set_threads(0)  # as the CLI without -t: OMP_NUM_THREADS, else the cores not busy now


def _model(model):
    return model if isinstance(model, Model) else load(model)


def perplexity(model, **kwargs):
    """Model.perplexity of a Model or a model directory (loaded as it is)."""
    return _model(model).perplexity(**kwargs)


def attention(model, **kwargs):
    """Model.attention of a Model or a model directory (loaded as it is)."""
    return _model(model).attention(**kwargs)


def passkey(model, lengths, **kwargs):
    """Model.passkey of a Model or a model directory (loaded as it is)."""
    return _model(model).passkey(lengths, **kwargs)


def ruler(model, tasks, lengths, **kwargs):
    """Model.ruler of a Model or a model directory (loaded as it is)."""
    return _model(model).ruler(tasks, lengths, **kwargs)


def _label(config, index):
    if config is None:
        return "plain"
    if isinstance(config, dict):
        return f"config {index}"
    return _os.path.splitext(_os.path.basename(_os.fsdecode(config)))[0]


def _integer(x):
    """x as an int when it is one (an int, a numpy integer, or a string of digits), else None:
    1.5, True and "1.0" are not."""
    if isinstance(x, bool):
        return None
    if isinstance(x, str):
        return int(x) if x.strip().lstrip("+").isdigit() else None
    return int(x) if isinstance(x, _numbers.Integral) else None


def _shard(shard):
    """(K, N) from "K/N" (as `pert sweep --shard`) or a pair of ints; None: (1, 1)."""
    if shard is None:
        return 1, 1
    try:
        k, n = (_integer(x) for x in (shard.split("/") if isinstance(shard, str) else shard))
    except (TypeError, ValueError):
        k = n = None
    if k is None or n is None or not 1 <= k <= n:
        raise Error(f"shard: must be K/N with 1 <= K <= N, got {shard!r}")
    return k, n


MAX_LENGTH = 1 << 24  # as `pert sweep --lengths`


def _lengths(lengths):
    if isinstance(lengths, (int, str)) and not isinstance(lengths, bool):
        lengths = [lengths]
    out = []
    for n in lengths:
        v = _integer(n) if not isinstance(n, str) else None
        if v is None or not 2 <= v <= MAX_LENGTH:
            raise Error(f"lengths: each must be an integer from 2 to {MAX_LENGTH}, got {n!r}")
        out.append(v)
    return out


def _plain(v):
    """v as JSON values (numpy arrays as lists, paths as strings), for the grid's identity."""
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, (str, bytes, int, float, bool)) or v is None:  # (bytes: a path, for the compiled part)
        return v
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return _os.fspath(v) if isinstance(v, _os.PathLike) else repr(v)


def sweep(models, lengths, *, configs=(None,), labels=None, set=None, allow_scheme_change=False, dtype="f32",
          progress=False, shard=None, **evaluation):
    """Perplexity of every model x config x length, one record (a dict) per cell (pandas.DataFrame
    takes the list as it is, where pandas is installed): the cell as a `pert sweep` results file
    holds it (index: its place in the grid, model, config as given, label, length, the hashes, the
    positions that ran, ppl, ppl_stderr, nll_by_position, ...), with cells (the grid's size) and
    grid (its identity).

    shard="K/N" (or (K, N)) runs only share K of N of the cells, as `pert sweep --shard`: the
    cells whose index % N == K - 1; pert.merge(shard records...) joins the shards' records.

    configs: None (config.json as it is), a merge-patch file or a dict each; labels: one per
    config (default: the file's name, "plain", or "config N" for a dict). evaluation: text=,
    file= or tokens=, and Model.perplexity's settings (mode, stride, chunks, buckets, split_docs,
    cache_type). As `pert sweep`: a config that would replace the trained scheme, and a cell that
    cannot run (a length past a learned table, a text too short), is a record with "error"; any
    other error stops the sweep."""
    if isinstance(models, (str, bytes, _os.PathLike)):
        models = [models]
    models = list(models)
    lengths = _lengths(lengths)
    configs = list(configs)
    if labels is None:
        labels = [_label(c, i) for i, c in enumerate(configs)]
    labels = list(labels)
    if len(labels) != len(configs):
        raise Error(f"labels: {len(labels)} labels for {len(configs)} configs; give one per config, in order")
    if len(set_of := {*labels}) != len(labels):
        raise Error(f"labels: a label names two configs ({', '.join(sorted(l for l in set_of if labels.count(l) > 1))})")
    k, n_shards = _shard(shard)
    configs = [c if isinstance(c, dict) or c is None else _os.fspath(c) for c in configs]
    models = [_os.fspath(m) for m in models]
    # The grid (pert/grid.hpp): the shard's cells, the grid's size and its identity, which pert.merge compares.
    plan = _pert._grid_plan(models, [_plain(c) for c in configs], labels, lengths, f"{k}/{n_shards}",
                            _plain({"set": set, "allow_scheme_change": allow_scheme_change, "dtype": dtype, **evaluation}),
                            evaluation.get("file"))
    # The cells run by the library's loop (pert/grid.hpp: run_cells), as `pert sweep` runs them.
    return _pert._sweep_cells(models, configs, labels, lengths, plan["places"], plan["cells"], plan["grid"], set,
                              allow_scheme_change, dtype, progress, **evaluation)


def merge(*parts, partial=False):
    """The records of a sweep's shards (pert.sweep(..., shard="K/N") each) as one sweep's, in
    grid order. Refuses (pert.Error) parts of different grids (other models, configs, lengths or
    settings) and records that are not a sweep's, and while cells of the grid are missing (naming
    the first of them), unless partial=True; a cell in two parts is kept once."""
    parts = [list(part) for part in parts]  # (each read once: a generator is not lost)
    records, places = [], []
    for p, part in enumerate(parts, 1):
        for r, record in enumerate(part):
            where = f"part {p}, record {r}"
            if not isinstance(record, dict):
                raise Error(f"merge: {where}: a dict expected (a record of pert.sweep), got {type(record).__name__}")
            index, cells, grid = _integer(record.get("index")), _integer(record.get("cells")), record.get("grid")
            records.append(record)
            places.append((where, -1 if index is None else index, -1 if cells is None else cells,
                           grid if isinstance(grid, str) else ""))
    # Which records make the grid, refused for other grids or cells missing (pert/grid.hpp).
    return [records[i] for i in _pert._merge_plan(places, partial)]
