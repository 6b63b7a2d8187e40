"""GGML's tensor block types in numpy, restated from the format (llama.cpp's ggml-common.h and
ggml-quants.c), for the GGUF writer and as the truth pert's C++ blocks are checked against.

    ggml_quants.py types                               # name, GGML number, block size and bytes
    ggml_quants.py quantize TYPE IN.f32 OUT.blocks     # raw little-endian float32 in
    ggml_quants.py dequantize TYPE IN.blocks OUT.f32

    dequantize(type_name, raw_bytes, n) -> float32[n]     exact: the float32 operations, in
                                                          the order GGML's reference does them
    quantize(type_name, float32 array) -> bytes           values flattened; whole blocks only

Block layouts (little-endian; "f16" an IEEE half; values in a block numbered 0..QK-1):
  Q8_0  f16 d, int8 q[32]                              x = d*q
  Q4_0  f16 d, u8 qs[16]                               x = d*(q-8); q[i] low nibble of qs[i],
                                                       q[i+16] its high nibble
  Q4_1  f16 d, f16 m, u8 qs[16]                        x = d*q + m
  Q5_0  f16 d, u32 qh, u8 qs[16]                       as Q4_0 with bit i of qh as q[i]'s 5th bit, x = d*(q-16)
  Q5_1  f16 d, f16 m, u32 qh, u8 qs[16]                x = d*q + m
  Q4_K  f16 d, f16 dmin, u8 scales[12], u8 qs[128]     8 sub-blocks of 32 with 6-bit scale s and
                                                       min m: x = (d*s)*q - (dmin*m); qs[32c+l]
                                                       holds sub-block 2c (low nibble), 2c+1 (high)
  Q5_K  as Q4_K with u8 qh[32] before qs               bit j of qh[l] is the 5th bit of sub-block j's value l
  Q6_K  u8 ql[128], u8 qh[64], int8 scales[16], f16 d  16 sub-blocks of 16: x = (d*scale)*(q-32)
  MXFP4 u8 e, u8 qs[16]                                E2M1 codes c in Q4_0's nibble order, x = k[c]*2^(e-128)
                                                       with k the doubled E2M1 values 0 1 2 3 4 6 8 12 and
                                                       their negatives (codes 8..15); e 0 and 1 give the
                                                       subnormal scales 2^-128, 2^-127, e 255 2^127 (no NaN)

The legacy quantizers (Q4_0 ... Q8_0) are GGML's reference ones, operation for operation in
float32, so they give its bytes where the compiler keeps x*id + 0.5 two roundings (x86-64's
baseline build; one that fuses the multiply-add may put a rare value on the next level). The
K-quant quantizers follow the reference's search (a weighted least-squares scale/min over a
sweep of candidate scales per sub-block, then the scales themselves quantized against the
block's largest) vectorised over all sub-blocks at once; they are not promised to be
bit-identical to llama-quantize (the sums are added in another order).

MXFP4's quantizer is GGML's reference (quantize_row_mxfp4_ref): e = floor(log2f(max|x|)) - 2 + 127
(log2f's float32 result, which for a max|x| a few ulps under a power of two is that power's
exponent), then each value the code nearest it on that scale, the first of equals. Its bytes are
GGML's, and pert's (src/kernels/quants.cpp); where GGML's cast to uint8 is undefined (max|x| under
2^-125, or not finite) e is 0, as pert has it.
"""
import argparse
import os
import sys
from collections import namedtuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib.outputs import replaced  # whole or not at all, as pert's own outputs
from lib.safetensors_io import _to_bf16_bits  # torch's and GGML's rounding (round to nearest even)

QK_K = 256  # values in a K-quant super-block
_CHUNK = 1 << 18  # values quantized at a time: the search's temporaries stay in cache

BlockType = namedtuple("BlockType", "name number block_size block_bytes")

TYPES = {t.name: t for t in (
    BlockType("F32", 0, 1, 4),
    BlockType("F16", 1, 1, 2),
    BlockType("Q4_0", 2, 32, 18),
    BlockType("Q4_1", 3, 32, 20),
    BlockType("Q5_0", 6, 32, 22),
    BlockType("Q5_1", 7, 32, 24),
    BlockType("Q8_0", 8, 32, 34),
    BlockType("Q4_K", 12, QK_K, 144),
    BlockType("Q5_K", 13, QK_K, 176),
    BlockType("Q6_K", 14, QK_K, 210),
    BlockType("BF16", 30, 1, 2),
    BlockType("MXFP4", 39, 32, 17),
)}
BY_NUMBER = {t.number: t for t in TYPES.values()}

F32 = np.float32


def nbytes(type_name, n):
    """Bytes that n values of `type_name` take; n must fill whole blocks."""
    t = TYPES[type_name]
    if n % t.block_size:
        raise ValueError(f"{type_name}: {n} values are not whole blocks of {t.block_size}")
    return n // t.block_size * t.block_bytes


# ----------------------------------------------------------------------------- helpers
def _f16(blocks, at):
    """The f16 field at byte `at` of each block, as float32."""
    return blocks[:, at:at + 2].copy().view(np.float16)[:, 0].astype(F32)


def _f16_bytes(values):
    """float32 values rounded to f16 (nearest even, as GGML), as (B, 2) bytes."""
    return np.asarray(values, F32).astype(np.float16).reshape(-1, 1).view(np.uint8)


def _nibbles(qs):
    """(B, 16) bytes -> (B, 32) values: the low nibbles, then the high ones."""
    return np.concatenate([qs & 15, qs >> 4], axis=1)


def _pack_nibbles(q):
    """(B, 32) values < 16 -> (B, 16) bytes, the inverse of _nibbles."""
    return (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)


def _bits(words, n):
    """Bit i of each u32 in `words` (B,) as (B, n) 0/1."""
    return ((words[:, None] >> np.arange(n, dtype=np.uint32)) & 1).astype(np.uint8)


def _k_scales(sc):
    """Q4_K/Q5_K's 12 scale bytes (B, 12) -> 6-bit scales and mins, each (B, 8)."""
    s = sc[:, 0:4] & 63
    m = sc[:, 4:8] & 63
    s_hi = (sc[:, 8:12] & 15) | ((sc[:, 0:4] >> 6) << 4)
    m_hi = (sc[:, 8:12] >> 4) | ((sc[:, 4:8] >> 6) << 4)
    return np.concatenate([s, s_hi], 1), np.concatenate([m, m_hi], 1)


def _pack_k_scales(s, m):
    """The inverse of _k_scales: (B, 8) scales and mins < 64 -> (B, 12) bytes."""
    s, m = s.astype(np.uint8), m.astype(np.uint8)
    return np.concatenate([
        (s[:, :4] & 63) | ((s[:, 4:] >> 4) << 6),
        (m[:, :4] & 63) | ((m[:, 4:] >> 4) << 6),
        (s[:, 4:] & 15) | ((m[:, 4:] & 15) << 4)], 1)


def _k_order(q, low, high):
    """Q4_K/Q5_K value order: (B, 128) nibble bytes -> (B, 256), 32 low then 32 high per 32 bytes."""
    q = q.reshape(-1, 4, 1, 32)
    return np.concatenate([low(q), high(q)], 2).reshape(-1, QK_K)


def _nearest(v):
    """GGML's nearest_int: round half to even, as int32."""
    return np.rint(v).astype(np.int32)


def _clamp(a, lo, hi):
    """a limited to [lo, hi] in place (np.clip is many times slower on numpy 1.24)."""
    return np.minimum(np.maximum(a, lo, out=a), hi, out=a)


def _round_away(v):
    """C's roundf: halves away from zero (float32 + 0.5 is exact in float64)."""
    v = v.astype(np.float64)
    return np.copysign(np.floor(np.abs(v) + 0.5), v)


def _abs_max_signed(x):
    """Per row, the value of largest magnitude, its sign kept (the first such, as the reference)."""
    return np.take_along_axis(x, np.abs(x).argmax(1)[:, None], 1)[:, 0]


def _inverse(d):
    """1/d where d != 0, else 0 (float32)."""
    safe = np.where(d != 0, d, F32(1))
    return np.where(d != 0, F32(1) / safe, F32(0)).astype(F32)


# ----------------------------------------------------------------------------- dequantize
def _deq_q8_0(b):
    return _f16(b, 0)[:, None] * b[:, 2:].view(np.int8).astype(F32)


def _deq_q4_0(b):
    return (_nibbles(b[:, 2:]).astype(np.int8) - 8).astype(F32) * _f16(b, 0)[:, None]


def _deq_q4_1(b):
    return _nibbles(b[:, 4:]).astype(F32) * _f16(b, 0)[:, None] + _f16(b, 2)[:, None]


def _q5(b, at):
    qh = b[:, at:at + 4].copy().view("<u4")[:, 0]
    return _nibbles(b[:, at + 4:]) | (_bits(qh, 32) << 4)


def _deq_q5_0(b):
    return (_q5(b, 2).astype(np.int8) - 16).astype(F32) * _f16(b, 0)[:, None]


def _deq_q5_1(b):
    return _q5(b, 4).astype(F32) * _f16(b, 0)[:, None] + _f16(b, 2)[:, None]


def _deq_k(b, q):
    """Q4_K/Q5_K given the values q (B, 256): (d*s)*q - (dmin*m) per sub-block of 32."""
    s, m = _k_scales(b[:, 4:16])
    dl = (_f16(b, 0)[:, None] * s.astype(F32)).repeat(32, 1)
    ml = (_f16(b, 2)[:, None] * m.astype(F32)).repeat(32, 1)
    return dl * q.astype(F32) - ml


def _deq_q4_k(b):
    return _deq_k(b, _k_order(b[:, 16:], lambda q: q & 15, lambda q: q >> 4))


def _deq_q5_k(b):
    low = _k_order(b[:, 48:], lambda q: q & 15, lambda q: q >> 4)
    high = (b[:, 16:48, None] >> np.arange(8, dtype=np.uint8)) & 1  # (B, 32 l, 8 sub-blocks)
    return _deq_k(b, low | (high.transpose(0, 2, 1).reshape(-1, QK_K) << 4))


def _q6_values(ql, qh):
    """Q6_K's 6-bit values (B, 256) from ql (B, 128) and qh (B, 64)."""
    ql = ql.reshape(-1, 2, 2, 32)  # half, which 32 bytes, l
    qh = qh.reshape(-1, 2, 1, 32)
    low = np.concatenate([ql & 15, ql >> 4], 2)  # (B, 2, 4, 32): value groups 0..3 of a half
    high = (qh >> (2 * np.arange(4, dtype=np.uint8)).reshape(1, 1, 4, 1)) & 3
    return (low | (high << 4)).reshape(-1, QK_K)


def _deq_q6_k(b):
    q = _q6_values(b[:, :128], b[:, 128:192]).astype(np.int8) - 32
    scale = (_f16(b, 208)[:, None] * b[:, 192:208].view(np.int8).astype(F32)).repeat(16, 1)
    return scale * q.astype(F32)


# MXFP4's E2M1 values times 2, by code (GGML's kvalues_mxfp4): its scale is half the E8M0 one
_E2M1_DOUBLED = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], np.int8)


def _e8m0_half(e):
    """Half of E8M0's 2^(e-127) as float32, as GGML builds it: e 0 and 1 the subnormals 2^-128 and
    2^-127, e 255 (NaN in the OCP MX spec) 2^127."""
    e = np.asarray(e, np.uint32)
    return np.where(e < 2, np.uint32(0x00200000) << e, (e - 1) << 23).astype(np.uint32).view(F32)


def _deq_mxfp4(b):
    with np.errstate(over="ignore"):  # e 254 and 255: the larger codes overflow to inf, as in GGML
        return _E2M1_DOUBLED[_nibbles(b[:, 1:])].astype(F32) * _e8m0_half(b[:, 0])[:, None]


_DEQUANTIZE = {"Q8_0": _deq_q8_0, "Q4_0": _deq_q4_0, "Q4_1": _deq_q4_1, "Q5_0": _deq_q5_0,
               "Q5_1": _deq_q5_1, "Q4_K": _deq_q4_k, "Q5_K": _deq_q5_k, "Q6_K": _deq_q6_k,
               "MXFP4": _deq_mxfp4}


def dequantize(type_name, raw, n):
    """float32[n] from n values of `type_name` in `raw` (bytes-like)."""
    raw = np.frombuffer(raw, np.uint8, count=nbytes(type_name, n))
    if type_name == "F32":
        return raw.view("<f4").astype(F32)
    if type_name == "F16":
        return raw.view("<f2").astype(F32)
    if type_name == "BF16":
        return (raw.view("<u2").astype(np.uint32) << 16).view(F32)
    t = TYPES[type_name]
    return _DEQUANTIZE[type_name](raw.reshape(-1, t.block_bytes)).astype(F32).reshape(n)


# ----------------------------------------------------------------------------- legacy quantizers
def _q_q8_0(x):
    d = np.abs(x).max(1) / F32(127)
    q = _round_away(x * _inverse(d)[:, None]).astype(np.int8)
    return np.concatenate([_f16_bytes(d), q.view(np.uint8)], 1)


def _q_symmetric(x, half):
    """Q4_0 (half 8) and Q5_0 (half 16): d = -max/half, q = min(2*half-1, trunc(x/d + half + 0.5))."""
    d = _abs_max_signed(x) / F32(-half)
    v = x * _inverse(d)[:, None] + F32(half + 0.5)
    return d, np.minimum(2 * half - 1, np.trunc(v).astype(np.int32)).astype(np.uint8)


def _q_affine(x, levels):
    """Q4_1 (15) and Q5_1 (31): d = (max-min)/levels, q = trunc((x-min)/d + 0.5)."""
    lo, hi = x.min(1), x.max(1)
    d = (hi - lo) / F32(levels)
    q = np.trunc((x - lo[:, None]) * _inverse(d)[:, None] + F32(0.5)).astype(np.int32)
    return d, lo, np.minimum(levels, q).astype(np.uint8)


def _qh_bytes(q):
    """The 5th bits of (B, 32) values as Q5's u32 (B, 4 bytes)."""
    bits = (q >> 4).astype(np.uint32) << np.arange(32, dtype=np.uint32)
    return bits.sum(1, dtype=np.uint32).astype("<u4").reshape(-1, 1).view(np.uint8)


def _q_q4_0(x):
    d, q = _q_symmetric(x, 8)
    return np.concatenate([_f16_bytes(d), _pack_nibbles(q)], 1)


def _q_q5_0(x):
    d, q = _q_symmetric(x, 16)
    return np.concatenate([_f16_bytes(d), _qh_bytes(q), _pack_nibbles(q & 15)], 1)


def _q_q4_1(x):
    d, m, q = _q_affine(x, 15)
    return np.concatenate([_f16_bytes(d), _f16_bytes(m), _pack_nibbles(q)], 1)


def _q_q5_1(x):
    d, m, q = _q_affine(x, 31)
    return np.concatenate([_f16_bytes(d), _f16_bytes(m), _qh_bytes(q), _pack_nibbles(q & 15)], 1)


# ----------------------------------------------------------------------------- K-quant quantizers
def _scale_min_search(x, w, nmax, rmin, rdelta, nstep):
    """Per row of x (S, n): scale and (positive) min so that x ~ scale*L - min, L in 0..nmax.

    The reference's search: start from the range, then for each candidate inverse scale
    (nmax + rmin + rdelta*k)/(max - min) round, fit scale and min by weighted least squares
    (min clamped to <= 0) and keep the fit of least weighted squared error."""
    lo = np.minimum(x.min(1), 0)
    hi = x.max(1)
    span = hi - lo
    flat = span == 0
    span = np.where(flat, F32(1), span)

    sum_w = w.sum(1).astype(np.float64)
    sum_x = np.einsum("ij,ij->i", w, x).astype(np.float64)
    sum_x2 = np.einsum("ij,ij->i", w * x, x).astype(np.float64)

    shifted = x - lo[:, None]

    def fit(iscale):
        """The weighted sums of L, L*L and L*x (float64) for the levels `iscale` rounds to."""
        L = shifted * iscale[:, None]
        np.minimum(np.rint(L, out=L), nmax, out=L)  # L >= 0: x - lo >= 0 and iscale > 0
        wL = w * L
        return tuple(s.astype(np.float64) for s in (np.einsum("ij->i", wL), np.einsum("ij,ij->i", wL, L),
                                                     np.einsum("ij,ij->i", wL, x)))

    def error(scale, mn, sum_l, sum_l2, sum_xl):
        """sum w*(scale*L + mn - x)^2 expanded in the sums (float64)."""
        scale, mn = scale.astype(np.float64), mn.astype(np.float64)
        return (scale * scale * sum_l2 + 2 * scale * mn * sum_l - 2 * scale * sum_xl
                + mn * mn * sum_w - 2 * mn * sum_x + sum_x2)

    scale = (span / F32(nmax)).astype(F32)
    best_min = lo.copy()
    best = error(scale, lo, *fit(F32(nmax) / span))
    for k in range(nstep + 1):
        sum_l, sum_l2, sum_xl = fit(F32(rmin + rdelta * k + nmax) / span)
        D = sum_w * sum_l2 - sum_l * sum_l
        ok = D > 0
        Ds = np.where(ok, D, 1)
        this_scale = (sum_w * sum_xl - sum_x * sum_l) / Ds
        this_min = (sum_l2 * sum_x - sum_l * sum_xl) / Ds
        clamp = this_min > 0
        this_scale = np.where(clamp, sum_xl / np.where(sum_l2 > 0, sum_l2, 1), this_scale).astype(F32)
        this_min = np.where(clamp, 0, this_min).astype(F32)
        err = error(this_scale, this_min, sum_l, sum_l2, sum_xl)
        better = ok & (err < best)
        scale = np.where(better, this_scale, scale)
        best_min = np.where(better, this_min, best_min)
        best = np.where(better, err, best)
    scale = np.where(flat, F32(0), scale)
    return scale.astype(F32), np.where(flat, -lo, -best_min).astype(F32)


def _q_k(x, nmax, rmin, rdelta, nstep):
    """Q4_K/Q5_K's common part: (B, 256) -> d, dmin (B,), 6-bit scales and mins (B, 8), values (B, 256)."""
    sub = x.reshape(-1, 32)
    av = np.sqrt((sub * sub).sum(1) / F32(32))
    scales, mins = _scale_min_search(sub, av[:, None] + np.abs(sub), nmax, rmin, rdelta, nstep)
    scales, mins = scales.reshape(-1, 8), mins.reshape(-1, 8)
    max_scale, max_min = scales.max(1), mins.max(1)
    inv_s = np.where(max_scale > 0, F32(63) / np.where(max_scale > 0, max_scale, 1), 0).astype(F32)
    inv_m = np.where(max_min > 0, F32(63) / np.where(max_min > 0, max_min, 1), 0).astype(F32)
    ls = np.minimum(63, _nearest(inv_s[:, None] * scales))
    lm = np.minimum(63, _nearest(inv_m[:, None] * mins))
    d = (max_scale / F32(63)).astype(np.float16)
    dmin = (max_min / F32(63)).astype(np.float16)
    dl = (d.astype(F32)[:, None] * ls.astype(F32)).repeat(32, 1)
    ml = (dmin.astype(F32)[:, None] * lm.astype(F32)).repeat(32, 1)
    q = _clamp(_nearest((x + ml) / np.where(dl != 0, dl, 1)), 0, nmax)
    q = np.where(dl != 0, q, 0).astype(np.uint8)
    return d, dmin, _pack_k_scales(ls, lm), q


def _k_nibble_bytes(q):
    """(B, 256) values -> Q4_K's 128 bytes: per 64 values, the first 32 low, the next 32 high."""
    q = q.reshape(-1, 4, 2, 32) & 15
    return (q[:, :, 0] | (q[:, :, 1] << 4)).reshape(-1, 128)


def _q_q4_k(x):
    d, dmin, sc, q = _q_k(x, 15, -1.0, 0.1, 20)
    return np.concatenate([_f16_bytes(d), _f16_bytes(dmin), sc, _k_nibble_bytes(q)], 1)


def _q_q5_k(x):
    d, dmin, sc, q = _q_k(x, 31, -0.5, 0.1, 15)
    high = (q.reshape(-1, 8, 32) >> 4).astype(np.uint8) << np.arange(8, dtype=np.uint8)[:, None]
    qh = high.sum(1, dtype=np.uint8)
    return np.concatenate([_f16_bytes(d), _f16_bytes(dmin), sc, qh, _k_nibble_bytes(q)], 1)


def _symmetric_search(x, nmax):
    """Per row of x (S, n): scale so that x ~ scale*l, l in -nmax..nmax-1, weights x^2.

    The reference's search: the scale from the signed largest value, then candidates
    -(nmax + 0.1*k)/max for k in -9..9, each refitted by least squares, the best kept."""
    mx = _abs_max_signed(x)
    zero = np.abs(mx) < F32(1e-15)
    mx = np.where(zero, F32(1), mx)
    w = x * x
    wx = w * x

    def fit(iscale):
        """The weighted sums of x*l and l*l (float64) for the levels `iscale` rounds to."""
        l = x * iscale[:, None]
        _clamp(np.rint(l, out=l), -nmax, nmax - 1)
        return (np.einsum("ij,ij->i", wx, l).astype(np.float64),
                np.einsum("ij,ij->i", w * l, l).astype(np.float64))

    sumlx, suml2 = fit(F32(-nmax) / mx)
    scale = np.where(suml2 > 0, sumlx / np.where(suml2 > 0, suml2, 1), 0)
    best = scale * sumlx
    for k in range(-9, 10):
        if k == 0:
            continue
        slx, sl2 = fit(-F32(nmax + 0.1 * k) / mx)
        better = (sl2 > 0) & (slx * slx > best * sl2)
        new = slx / np.where(sl2 > 0, sl2, 1)
        scale = np.where(better, new, scale)
        best = np.where(better, new * slx, best)
    return np.where(zero, 0, scale).astype(F32)


def _q_q6_k(x):
    scales = _symmetric_search(x.reshape(-1, 16), 32).reshape(-1, 16)
    max_scale = _abs_max_signed(scales)
    zero = np.abs(max_scale) < F32(1e-15)
    iscale = np.where(zero, 0, F32(-128) / np.where(zero, 1, max_scale)).astype(F32)
    d = np.where(zero, 0, F32(1) / np.where(zero, 1, iscale)).astype(np.float16)
    sc = np.minimum(127, _nearest(iscale[:, None] * scales)).astype(np.int8)
    dl = (d.astype(F32)[:, None] * sc.astype(F32)).repeat(16, 1)
    q = _clamp(_nearest(x / np.where(dl != 0, dl, 1)), -32, 31) + 32
    q = np.where(dl != 0, q, 32).astype(np.uint8).reshape(-1, 2, 4, 32)  # half, group, l
    ql = ((q[:, :, 0:2] & 15) | ((q[:, :, 2:4] & 15) << 4)).reshape(-1, 128)
    qh = ((q >> 4) << (2 * np.arange(4, dtype=np.uint8)).reshape(1, 1, 4, 1)).sum(2, dtype=np.uint8)
    return np.concatenate([ql, qh.reshape(-1, 64), sc.view(np.uint8), _f16_bytes(d)], 1)


# ----------------------------------------------------------------------------- MXFP4 quantizer
def _q_mxfp4(x):
    """GGML's reference: the block's exponent from log2f(max|x|), each value the nearest code."""
    amax = np.fmax.reduce(np.abs(x), axis=1)  # NaN passed over, as the reference's amax < |v| tests do
    with np.errstate(divide="ignore", invalid="ignore"):
        # log2f as float32: float64's log2 rounded (equal to glibc's log2f in its floor, checked on
        # every float within 3000 ulps under a power of two, where the floor can tell)
        biased = np.floor(np.log2(amax.astype(np.float64)).astype(F32)) - F32(2) + F32(127)
    e = np.where((biased > 0) & (biased <= 254), biased, 0).astype(np.uint8)
    levels = _E2M1_DOUBLED.astype(F32)[None, :] * _e8m0_half(e)[:, None]  # (B, 16), exact
    with np.errstate(invalid="ignore", over="ignore"):  # inf or NaN values (or near FLT_MAX): errors inf or NaN, code 0
        err = np.abs(levels[:, None, :] - x[:, :, None])  # (B, 32, 16): float32, as the reference
    q = err.argmin(2).astype(np.uint8)  # the first of equals (+0 before -0, the smaller magnitude at a midpoint)
    return np.concatenate([e[:, None], _pack_nibbles(q)], 1)


_QUANTIZE = {"Q8_0": _q_q8_0, "Q4_0": _q_q4_0, "Q4_1": _q_q4_1, "Q5_0": _q_q5_0,
             "Q5_1": _q_q5_1, "Q4_K": _q_q4_k, "Q5_K": _q_q5_k, "Q6_K": _q_q6_k, "MXFP4": _q_mxfp4}


def quantize(type_name, values):
    """The bytes of `values` (any shape, flattened in C order) as `type_name`."""
    x = np.ascontiguousarray(values, dtype=F32).reshape(-1)
    nbytes(type_name, x.size)  # whole blocks
    if type_name == "F32":
        return x.astype("<f4").tobytes()
    if type_name == "F16":
        return x.astype("<f2").tobytes()
    if type_name == "BF16":
        return _to_bf16_bits(x).astype("<u2").tobytes()
    t = TYPES[type_name]
    step = _CHUNK // t.block_size * t.block_size
    return b"".join(_QUANTIZE[type_name](x[i:i + step].reshape(-1, t.block_size)).astype(np.uint8).tobytes()
                    for i in range(0, x.size, step))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["types", "quantize", "dequantize"])
    ap.add_argument("type", nargs="?", choices=list(TYPES), metavar="TYPE", help="GGML type name (Q4_K, ...)")
    ap.add_argument("input", nargs="?", metavar="IN", help="float32 (quantize) or blocks (dequantize) file")
    ap.add_argument("output", nargs="?", metavar="OUT", help="file to write")
    a = ap.parse_args()
    if a.command == "types":
        for t in TYPES.values():
            print(f"{t.name}\t{t.number}\t{t.block_size}\t{t.block_bytes}")
        return
    if a.output is None:
        ap.error(f"{a.command} needs TYPE, IN and OUT")
    try:
        with open(a.input, "rb") as f:
            raw = f.read()
        if a.command == "quantize":
            out = quantize(a.type, np.frombuffer(raw[:len(raw) // 4 * 4], "<f4"))
            if len(raw) % 4:
                raise ValueError(f"{a.input}: {len(raw)} bytes is not a whole number of float32")
        else:
            t = TYPES[a.type]
            if len(raw) % t.block_bytes:
                raise ValueError(f"{a.input}: {len(raw)} bytes is not whole {a.type} blocks of {t.block_bytes}")
            out = dequantize(a.type, raw, len(raw) // t.block_bytes * t.block_size).astype("<f4").tobytes()
        with replaced(a.output, "wb") as f:
            f.write(out)
    except (OSError, ValueError) as e:
        sys.exit(f"ggml_quants.py: {e}")


if __name__ == "__main__":
    main()
