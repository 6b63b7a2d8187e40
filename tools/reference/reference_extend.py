"""Training-free length extension at attention time: config.json's "extend" block, for reference.py.

Written from the methods' sources (docs/design.md): Self-Extend (Jin et al. 2024, LongLM,
and llama.cpp's --grp-attn-n/-w), ReRoPE and Leaky ReRoPE (Su 2023, bojone/rerope), StreamingLLM's
attention sinks (Xiao et al. 2024), xPos's blockwise causal attention (Sun et al. 2022) and log-n
query scaling (Qwen-7B's use_logn_attn). Positions are 0-based: query m, key n <= m.

Each method is a function of the [T, T] grid of (m, n) (m as a [T, 1] column, n as a [1, T] row):
  visible  which keys the method lets m see (before causality and the architecture's window),
  sinks    keys visible whatever the architecture's sliding window says (StreamingLLM only),
  near     pairs encoded at their own positions (m, n); the others are "far",
  q, k     where a far pair is encoded: the query at q (a function of m alone, [T, 1]) and the
           key at k (a function of n alone, [1, T]); positions may be fractional,
  farther, q2  (Dual Chunk Attention) far pairs whose query stands at q2 instead.
Near and far scores share one softmax per query row. log-n is a factor per query row.

A module that tools/reference/reference.py imports; it has no command of its own (this --help only).
"""
import argparse
import math

import torch

DT = torch.float64
# Methods that change where a pair is encoded (RoPE only) and those that only hide keys; log-n
# goes with any of them.
REMAPPING = ("self_extend", "rerope", "leaky_rerope", "dca")
EXCLUSIVE = REMAPPING + ("streaming", "blockwise")


def trained_length(config):
    """L: the model's trained length."""
    return config.get("original_max_position_embeddings") or config.get("max_position_embeddings", 2048)


# ----------------------------------------------------------------------------- the methods
def self_extend(m, n, window, group, mode):
    """Self-Extend. exact (paper Alg. 1): neighbours m - n < W at (m, n), the rest grouped at
    (⌊m/G⌋ + W - ⌊W/G⌋, ⌊n/G⌋). llama.cpp: its main.cpp loop run token by token (K = ⌊m/W⌋ blocks
    of W compressed before m): keys from K·W on at (m, n), older ones at (m - K(W - W/G), ⌊n/G⌋)."""
    W, G = window, group
    if mode == "exact":
        near, q = m - n < W, m // G + W - W // G
    else:
        K = m // W
        near, q = n >= K * W, m - K * (W - W // G)
    return dict(near=near, q=q, k=n // G)


def rerope(m, n, window):
    """ReRoPE: m - n < w at (m, n); beyond, the query at w and the key at 0 (distance w)."""
    return dict(near=m - n < window, q=torch.full_like(m, window), k=torch.zeros_like(n))


def leaky_rerope(m, n, window, factor):
    """Leaky ReRoPE: m - n < w at (m, n); beyond, the query at (m + w(k-1))/k and the key at n/k
    (distance w + (m - n - w)/k)."""
    w, k = window, factor
    return dict(near=m - n < w, q=(m.to(DT) + w * (k - 1)) / k, k=n.to(DT) / k)


def streaming(m, n, sinks, window, positions):
    """StreamingLLM: the first S keys and the last W (the query included). With positions "cache"
    the sinks that left the window are encoded where the cache holds them: the key at its slot n,
    the query at its slot min(m, S + W - 1)."""
    S, W = sinks, window
    sink = n < S
    plan = dict(visible=sink | (n > m - W), sinks=sink)
    if positions == "cache":
        plan.update(near=~(sink & (n <= m - W)), q=torch.clamp(m, max=S + W - 1), k=n)
    return plan


def blockwise(m, n, block):
    """xPos's blockwise causal attention: keys of m's block of B and of the block before."""
    return dict(visible=n // block >= m // block - 1)


def dca(m, n, chunk_size, local_size, original_max_position_embeddings):
    """Dual Chunk Attention (ChunkLlama; vLLM's DualChunkRotaryEmbedding): chunks of
    C = chunk_size - local_size from 0; keys at n % C; the query at m % C for keys of its own
    chunk (the true distance), at min(m % C + C, chunk_size) for the chunk before, and at
    min(2C - 1, chunk_size) for older ones ("farther", q2)."""
    C = chunk_size - local_size
    own = m // C * C
    return dict(near=n >= own, q=torch.clamp(m % C + C, max=chunk_size), k=n % C,
                farther=n < own - C, q2=torch.full_like(m, min(2 * C - 1, chunk_size)))


def dca_scale(positions, original):
    """DCA's length scale on query m and key n: max(1, 0.1·ln(l/Lorig) + 1) at l = m + 1 (n + 1)
    when original_max_position_embeddings > 0 (vLLM's decoding). [T]"""
    if not original:
        return torch.ones(len(positions), dtype=DT)
    return torch.clamp(0.1 * torch.log((positions.to(DT) + 1) / original) + 1, min=1.0)


def logn(m, trained):
    """Qwen's use_logn_attn: the query at m times ln(m+1)/ln(Lq) once m + 1 > Lq. [T]"""
    m = m.to(DT)
    return torch.where(m + 1 > trained, torch.log(m + 1) / math.log(trained), torch.ones_like(m))


METHODS = {"self_extend": self_extend, "rerope": rerope, "leaky_rerope": leaky_rerope, "streaming": streaming,
           "blockwise": blockwise, "dca": dca}


# ----------------------------------------------------------------------------- the config block
def _integer(lo):
    def check(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < lo:
            raise ValueError(f"must be an integer >= {lo}")
        return int(v)
    return check


def _number_above(lo):
    def check(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > lo or not math.isfinite(v):
            raise ValueError(f"must be a number > {lo}")
        return float(v)
    return check


def _one_of(*names):
    def check(v):
        if v not in names:
            raise ValueError("must be one of " + ", ".join(f'"{s}"' for s in names))
        return v
    return check


# method: {field: (check, default given L and the fields read so far)}
FIELDS = {
    "self_extend": {"window": (_integer(1), lambda L, f: max(1, L // 4)),
                    "group": (_integer(1), lambda L, f: 8),
                    "mode": (_one_of("exact", "llama.cpp"), lambda L, f: "exact")},
    "rerope": {"window": (_integer(1), lambda L, f: max(1, L // 4))},
    "leaky_rerope": {"window": (_integer(1), lambda L, f: max(1, L // 4)),
                     "factor": (_number_above(1), lambda L, f: 16.0)},
    "streaming": {"sinks": (_integer(0), lambda L, f: 4),
                  "window": (_integer(1), lambda L, f: L - f["sinks"]),
                  "positions": (_one_of("cache", "original"), lambda L, f: "cache")},
    "blockwise": {"block": (_integer(1), lambda L, f: max(1, L // 2))},
    "logn": {"trained": (_integer(2), lambda L, f: L)},
    "dca": {"chunk_size": (_integer(1), lambda L, f: L),
            "local_size": (_integer(0), lambda L, f: max(1, L // 8)),
            "original_max_position_embeddings": (_integer(0), lambda L, f: 0)},
}


def parse(config, pos):
    """{method: {field: value}} with defaults filled in, from config["extend"] (None when absent);
    pos is the model's position block. Raises ValueError naming what is wrong."""
    block = config.get("extend")
    dca_config = config.get("dual_chunk_attention_config")
    if dca_config is not None:  # Qwen2.5-1M's key, as vLLM reads it: the dca method's fields
        block = dict(block or {}, dca={k: v for k, v in dca_config.items() if not k.startswith("sparse_attention")})
    if block is None:
        return None
    if not isinstance(block, dict):
        raise ValueError('"extend" must be an object of methods')
    L = trained_length(config)
    out = {}
    for method, given in block.items():
        if method not in FIELDS:
            raise ValueError(f'unknown "extend" method "{method}" (known: {", ".join(FIELDS)})')
        if given is None:  # a merge patch's null: the method is off
            continue
        if not isinstance(given, dict):
            raise ValueError(f'"extend.{method}" must be an object of fields')
        unknown = set(given) - set(FIELDS[method])
        if unknown:
            raise ValueError(f'unknown field "extend.{method}.{sorted(unknown)[0]}" '
                             f'(known: {", ".join(FIELDS[method])})')
        fields = {}
        for name, (check, default) in FIELDS[method].items():
            value = given.get(name)
            if value is None:  # absent or a merge patch's null: the default
                value = default(L, fields)
            try:
                fields[name] = check(value)
            except ValueError as e:
                why = " (the default)" if given.get(name) is None else ""
                raise ValueError(f'"extend.{method}.{name}" {e}, got {value!r}{why}') from None
        out[method] = fields
    chosen = [m for m in EXCLUSIVE if m in out]
    if len(chosen) > 1:
        raise ValueError(f'"extend" takes at most one of {", ".join(EXCLUSIVE)}; got {" and ".join(chosen)}')
    d = out.get("dca")
    if d and d["local_size"] >= d["chunk_size"]:
        raise ValueError('"extend.dca.local_size" must be below chunk_size')
    se = out.get("self_extend")
    if se and se["mode"] == "llama.cpp" and se["window"] % se["group"]:
        raise ValueError(f'"extend.self_extend" in mode "llama.cpp" needs window % group == 0 '
                         f'(window {se["window"]}, group {se["group"]})')
    kind = pos["type"]
    for method in chosen:
        if method in REMAPPING and (kind != "rope" or pos.get("xpos") is not None):
            raise ValueError(f'"extend.{method}" needs position type "rope" without xpos (got "{kind}"'
                             f'{" with xpos" if kind == "rope" else ""})')
    st = out.get("streaming")
    if st and st["positions"] == "cache" and kind in ("learned", "sinusoidal"):
        raise ValueError(f'"extend.streaming" with positions "cache" cannot move the sinks of an absolute '
                         f'scheme ("{kind}", added to the embeddings); use positions "original"')
    return out


class Plan:
    """What forward() needs for T positions: visible [T, T] and sinks [T, T] (bool, before
    causality and the layer's sliding window), near [T, T] (None: every pair near), q_far [T] and
    k_far [T] (the far query position of row m, the far key position of column n), row_scale [T]
    (None: 1)."""

    def __init__(self, methods, T):
        m, n = torch.arange(T)[:, None], torch.arange(T)[None, :]
        self.rel = m - n
        plan = {}
        for method in EXCLUSIVE:
            if method in methods:
                plan = METHODS[method](m, n, **methods[method])
        self.visible = torch.broadcast_to(plan.get("visible", torch.tensor(True)), (T, T))
        self.sinks = torch.broadcast_to(plan.get("sinks", torch.tensor(False)), (T, T))
        self.near = torch.broadcast_to(plan["near"], (T, T)) if "near" in plan else None
        if self.near is not None:  # far positions: the query's from m alone, the key's from n alone
            self.q_far = torch.broadcast_to(torch.as_tensor(plan["q"]).to(DT), (T, 1))[:, 0]
            self.k_far = torch.broadcast_to(torch.as_tensor(plan["k"]).to(DT), (1, T))[0]
        # DCA's older chunks: the query at q2 instead (the key still at k)
        self.farther = torch.broadcast_to(plan["farther"], (T, T)) if "farther" in plan else None
        if self.farther is not None:
            self.q_farther = torch.broadcast_to(torch.as_tensor(plan["q2"]).to(DT), (T, 1))[:, 0]
        self.row_scale = logn(m[:, 0], **methods["logn"]) if "logn" in methods else None
        self.col_scale = None  # a factor on key n's scores (DCA's length scale)
        if "dca" in methods and methods["dca"]["original_max_position_embeddings"]:
            s = dca_scale(m[:, 0], methods["dca"]["original_max_position_embeddings"])
            self.row_scale = s if self.row_scale is None else self.row_scale * s
            self.col_scale = s

    def mask(self, window, chunk=0):
        """The pairs a layer sees: causal, and a sink or inside both the layer's sliding window
        (0: none; HF masking_utils: m - W < n) or chunk (0: none; m // C == n // C) and the
        method's own."""
        in_window = self.rel < window if window else torch.ones_like(self.visible)
        if chunk:
            m, n = torch.arange(len(self.rel))[:, None], torch.arange(len(self.rel))[None, :]
            in_window = in_window & (m // chunk == n // chunk)
        return (self.rel >= 0) & (self.sinks | (in_window & self.visible))

    def distance(self):
        """What a bias scheme sees: m - n, or q_far(m) - k_far(n) for far pairs."""
        if self.near is None:
            return self.rel
        return torch.where(self.near, self.rel.to(DT), self.q_far[:, None] - self.k_far[None, :])


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    print("reference_extend.py is a module for tools/reference/reference.py; see --help")
