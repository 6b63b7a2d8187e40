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
what is simpler in Python (sweep) is here.
"""
import hashlib as _hashlib
import json as _json
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
    from ._pert import (Error, Generation, Model, SchemeChangeError, Session,  # noqa: E402
                        __version__, load, set_threads, threads)
except ImportError as _e:
    raise ImportError(f"pert's compiled part (pert/_pert*.so beside this file) does not load in this Python "
                      f"({_sys.executable}, {_sys.version.split()[0]}): it is built for the interpreter CMake found "
                      f"(Debian's /usr/bin/python3); {_e}") from _e

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
    return _os.path.splitext(_os.path.basename(_os.fspath(config)))[0]


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


def _grid_id(models, configs, labels, lengths, settings):
    """What makes two sweeps' records one grid's, as 16 hex digits: the models, configs, labels
    and lengths in order and every setting the cells depend on (a text by its content)."""
    def plain(v):
        if hasattr(v, "tolist"):
            return v.tolist()
        if isinstance(v, (str, int, float, bool)) or v is None:
            return v
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return _os.fspath(v) if isinstance(v, _os.PathLike) else repr(v)
    what = {"models": [_os.fspath(m) for m in models], "configs": plain(configs), "labels": labels,
            "lengths": lengths, "settings": plain(settings)}
    return _hashlib.sha256(_json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


def sweep(models, lengths, *, configs=(None,), labels=None, set=None, allow_scheme_change=False, dtype="f32",
          progress=False, shard=None, **evaluation):
    """Perplexity of every model x config x length, one record (a dict) per cell, ready for
    pandas.DataFrame: model, label, config, length, index (the cell's place in the grid), cells
    (the grid's size), then Model.perplexity's keys.

    shard="K/N" (or (K, N)) runs only share K of N of the cells, as `pert sweep --shard`: the
    cells whose index % N == K - 1; pert.merge(shard records...) joins the shards' records.

    configs: None (config.json as it is), a merge-patch file or a dict each; labels: one per
    config (default: the file's name, "plain", or "config N" for a dict). evaluation: text=,
    file= or tokens=, and Model.perplexity's settings (mode, stride, chunks, buckets, split_docs,
    cache_type). As `pert sweep`: a config that would replace the trained scheme, and a cell that
    cannot run (a length past a learned table, a text too short), is a record with "error"; any
    other error stops the sweep."""
    if isinstance(models, (str, _os.PathLike)):
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
    records = []
    grid = len(models) * len(configs) * len(lengths)
    grid_id = _grid_id(models, configs, labels, lengths, {"set": set, "allow_scheme_change": allow_scheme_change,
                                                          "dtype": dtype, **evaluation})
    mine = len(range(k - 1, grid, n_shards))
    index = 0
    for model_dir in models:
        for config, label in zip(configs, labels):
            head = {"model": _os.fspath(model_dir), "label": label,
                    "config": config if isinstance(config, dict) or config is None else _os.fspath(config)}
            row = [i for i in range(index, index + len(lengths)) if i % n_shards == k - 1]
            index += len(lengths)
            if not row:
                continue
            cells = [(i, lengths[i - (index - len(lengths))]) for i in row]
            try:
                m = load(model_dir, config=config, set=set, allow_scheme_change=allow_scheme_change, dtype=dtype)
            except SchemeChangeError as e:
                records += [{**head, "length": n, "index": i, "cells": grid, "grid": grid_id, "error": str(e)}
                            for i, n in cells]
                continue
            for i, n in cells:
                record = {**head, "length": n, "index": i, "cells": grid, "grid": grid_id}
                try:
                    record.update(m.perplexity(n_ctx=n, **evaluation))
                except SchemeChangeError:
                    raise
                except Error as e:
                    record["error"] = str(e)
                records.append(record)
                if callable(progress):
                    progress(len(records), mine, record)
                elif progress:
                    ppl = f"PPL {record['ppl']:.4f}" if "ppl" in record else "error: " + record["error"]
                    print(f"[{len(records)}/{mine}] {head['model']} {label} @{n}: {ppl}", file=__import__("sys").stderr)
    return records


def merge(*parts, partial=False):
    """The records of a sweep's shards (pert.sweep(..., shard="K/N") each) as one sweep's, in
    grid order. Refuses (pert.Error) parts of different grids (other models, configs, lengths or
    settings) and records that are not a sweep's, and while cells of the grid are missing (naming
    the first of them), unless partial=True; a cell in two parts is kept once."""
    parts = [list(part) for part in parts]  # (each read once: a generator is not lost)
    records, grids, sizes = {}, set(), set()
    for p, part in enumerate(parts, 1):
        for r, record in enumerate(part):
            where = f"merge: part {p}, record {r}"
            if not isinstance(record, dict):
                raise Error(f"{where}: a dict expected (a record of pert.sweep), got {type(record).__name__}")
            index, cells = _integer(record.get("index")), _integer(record.get("cells"))
            if cells is None or cells < 1 or index is None or not 0 <= index < cells or not isinstance(record.get("grid"), str):
                raise Error(f"{where}: not a record of pert.sweep (it needs an index in [0, cells), cells >= 1 and "
                            "its grid)")
            grids.add(record["grid"])
            sizes.add(cells)
            records.setdefault(index, record)
    if len(grids) > 1:
        raise Error(f"merge: the parts come from {len(grids)} different grids (other models, configs, lengths or "
                    "settings); merge the shards of one pert.sweep call")
    size = sizes.pop() if sizes else 0
    if len(records) < size and not partial:
        first = []
        for i in range(size):  # the first missing indices, without listing every one
            if i not in records:
                first.append(i)
                if len(first) == 8:
                    break
        raise Error(f"merge: the grid is not whole, {size - len(records)} of its {size} cells missing (indices "
                    f"{', '.join(map(str, first))}{', ...' if size - len(records) > 8 else ''}); partial=True merges "
                    "what there is")
    return [records[i] for i in sorted(records)]
