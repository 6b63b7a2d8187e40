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
import os as _os

# libgomp reads its spin count once, when it is loaded: set it first, as the CLI does
# (include/pert/threads.hpp, kGompSpinCount; user settings win). Without effect when something
# imported earlier (torch, numpy's OpenBLAS) has loaded libgomp already.
if "OMP_WAIT_POLICY" not in _os.environ and "GOMP_SPINCOUNT" not in _os.environ:
    _os.environ["GOMP_SPINCOUNT"] = "10000"

from ._pert import (Error, Generation, Model, SchemeChangeError, Session,  # noqa: E402
                    __version__, load, set_threads, threads)

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


def _shard(shard):
    """(K, N) from "K/N" (as `pert sweep --shard`) or a pair; None: (1, 1)."""
    if shard is None:
        return 1, 1
    try:
        k, n = (int(x) for x in (shard.split("/") if isinstance(shard, str) else shard))
    except (TypeError, ValueError):
        k = n = 0
    if not 1 <= k <= n:
        raise Error(f"shard: must be K/N with 1 <= K <= N, got {shard!r}")
    return k, n


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
    if isinstance(lengths, int):
        lengths = [lengths]
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
                records += [{**head, "length": n, "index": i, "cells": grid, "error": str(e)} for i, n in cells]
                continue
            for i, n in cells:
                record = {**head, "length": n, "index": i, "cells": grid}
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
    grid order. Refuses (pert.Error naming them) while cells of the grid are missing, unless
    partial=True; a cell in two parts is kept once."""
    records, grids = {}, {r["cells"] for part in parts for r in part}
    if len(grids) > 1:
        raise Error(f"merge: the parts come from grids of different sizes ({', '.join(map(str, sorted(grids)))} cells)")
    for part in parts:
        for r in part:
            records.setdefault(r["index"], r)
    missing = [i for i in range(grids.pop() if grids else 0) if i not in records]
    if missing and not partial:
        raise Error(f"merge: the grid is not whole, {len(missing)} of its cells missing (indices "
                    f"{', '.join(map(str, missing[:8]))}{', ...' if len(missing) > 8 else ''}); partial=True merges what there is")
    return [records[i] for i in sorted(records)]
