"""pert's GGML block types (src/quants*.cpp, through the tests/helpers/pert_blocks.cpp harness) against
the numpy restatement of the format, tools/convert/ggml_quants.py:

  - dequantize: on random blocks (random bytes; the f16 scales random but finite) of every type,
    pert's floats equal numpy's bit for bit (GGML defines each value as float32 operations in
    a fixed order, so there is one right answer);
  - quantize: pert's blocks, dequantized by numpy, are no further from the input than numpy's own
    quantizer's (RMS error within 0.1% for the legacy types, which follow GGML's reference
    operation for operation, 3% for the K-quants, whose scale search may differ; F16/BF16 and
    MXFP4, whose reference has no sum to fuse, bit for bit), on Gaussian rows, rows with outliers,
    constant, zero and tiny rows; MXFP4 also bit for bit on its edges (a block's largest value a
    few ulps under a power of two, where log2f rounds up; subnormal, huge, infinite and NaN values);
  - matmul: y = x·Wᵀ against float64 numpy on the dequantized W (quantized Gaussian W, random
    blocks; Gaussian and heavy-tailed x), every value within a bound derived from how pert
    computes it, and for the Gaussian W the RMS error within what that rounding predicts (see
    matmul_bound).

    PERT_BLOCKS=build/tests/pert_blocks /usr/bin/python3 -m pytest -q tests/reference/blocks_test.py

Skipped, with the reason, when PERT_BLOCKS is not set (CTest sets it).
"""
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
from convert import ggml_quants  # noqa: E402

BINARY = os.environ.get("PERT_BLOCKS")
pytestmark = pytest.mark.skipif(not BINARY, reason="PERT_BLOCKS (the pert_blocks harness) not set")

TYPES = list(ggml_quants.TYPES)
# byte offsets of each type's f16 scale fields in a block
F16_FIELDS = {"Q8_0": [0], "Q4_0": [0], "Q5_0": [0], "Q4_1": [0, 2], "Q5_1": [0, 2],
              "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208], "MXFP4": []}
LEGACY = {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"}
FLOATS = {"F32", "F16", "BF16"}
EXACT = FLOATS | {"MXFP4"}  # quantizers with one right answer: pert's bytes are numpy's


def run(*args):
    out = subprocess.run([BINARY, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def pert_dequantize(tmp, type_name, raw):
    src, dst = tmp / f"{type_name}.blocks", tmp / f"{type_name}.f32"
    src.write_bytes(raw)
    run("dequantize", type_name, src, dst)
    return np.fromfile(dst, "<f4")


def pert_quantize(tmp, type_name, x):
    src, dst = tmp / f"{type_name}.in.f32", tmp / f"{type_name}.out.blocks"
    np.ascontiguousarray(x, "<f4").tofile(src)
    run("quantize", type_name, src, dst)
    return dst.read_bytes()


def random_blocks(type_name, n_blocks, rng):
    """Random bytes as blocks of `type_name`, every f16 scale (every value, for the float types) finite."""
    t = ggml_quants.TYPES[type_name]
    if type_name == "F32":
        return rng.standard_normal(n_blocks).astype("<f4").tobytes()
    if type_name in ("F16", "BF16"):
        bits = rng.integers(0, 1 << 16, n_blocks, dtype=np.uint16)
        exponent = (0x7C00, 0x7F80)[type_name == "BF16"]
        bits[(bits & exponent) == exponent] &= ~np.uint16(0x4000)  # Inf/NaN exponents made finite
        return bits.astype("<u2").tobytes()
    b = rng.integers(0, 256, (n_blocks, t.block_bytes), dtype=np.uint8)
    for at in F16_FIELDS[type_name]:
        scales = (rng.standard_normal(n_blocks) * 10.0 ** rng.integers(-4, 2, n_blocks)).astype(np.float16)
        b[:, at:at + 2] = scales.reshape(-1, 1).view(np.uint8)
    if type_name == "MXFP4":  # E8M0 scales 2^-16 .. 2^7, as the F16 ones above
        b[:, 0] = rng.integers(112, 135, n_blocks)
    return b.tobytes()


@pytest.mark.parametrize("type_name", TYPES)
def test_dequantize_bit_exact(tmp_path, type_name):
    rng = np.random.default_rng(ggml_quants.TYPES[type_name].number)
    t = ggml_quants.TYPES[type_name]
    n_blocks = 4096 // t.block_size * 8
    raw = random_blocks(type_name, n_blocks, rng)
    if type_name == "MXFP4":  # every E8M0 byte once: 0 and 1 subnormal, 254 and 255 overflowing to inf
        blocks = np.frombuffer(raw, np.uint8).reshape(n_blocks, t.block_bytes).copy()
        blocks[:256, 0] = np.arange(256)
        raw = blocks.tobytes()
    want = ggml_quants.dequantize(type_name, raw, n_blocks * t.block_size)
    got = pert_dequantize(tmp_path, type_name, raw)
    assert got.shape == want.shape
    differ = np.flatnonzero(want.view(np.uint32) != got.view(np.uint32))
    if differ.size:
        i = differ[0]
        pytest.fail(f"{differ.size} of {want.size} values differ; first at {i} (block {i // t.block_size}): "
                    f"pert {got[i]!r}, numpy {want[i]!r}")


def quantize_inputs(rng):
    """Rows of 256 values: Gaussian at several scales, heavy tails, outliers, and degenerate rows."""
    rows = [rng.standard_normal(256) * s for s in (1.0, 0.02, 1e-3, 300.0)]
    rows += [rng.standard_t(3, 256) * 0.05, rng.uniform(-1, 1, 256), rng.uniform(0.5, 1.0, 256)]
    spiky = rng.standard_normal(256) * 0.01
    spiky[rng.integers(0, 256, 4)] = [3.0, -5.0, 8.0, -0.5]
    rows += [spiky, np.zeros(256), np.full(256, 0.37), np.full(256, -2.0), rng.standard_normal(256) * 1e-8]
    rows += [rng.standard_normal(256) * 0.05 for _ in range(52)]
    return np.array(rows, np.float32)


@pytest.mark.parametrize("type_name", TYPES)
def test_quantize_no_worse(tmp_path, type_name):
    x = quantize_inputs(np.random.default_rng(7))
    ours = ggml_quants.quantize(type_name, x)
    theirs = pert_quantize(tmp_path, type_name, x)
    assert len(theirs) == len(ours)
    if type_name in EXACT:
        assert theirs == ours  # round to nearest even, or GGML's nearest code: one right answer
        return
    n = x.size
    err_np = ggml_quants.dequantize(type_name, ours, n).reshape(x.shape) - x
    err_pert = ggml_quants.dequantize(type_name, theirs, n).reshape(x.shape) - x
    margin = 1.001 if type_name in LEGACY else 1.03
    for what, rows in (("all rows", slice(None)), ("Gaussian rows", slice(12, None))):
        rms_np = np.sqrt(np.mean(err_np[rows].astype(np.float64) ** 2))
        rms_pert = np.sqrt(np.mean(err_pert[rows].astype(np.float64) ** 2))
        assert rms_pert <= rms_np * margin + 1e-12, f"{what}: pert's RMS error {rms_pert:.6g}, numpy's {rms_np:.6g}"
    for i in (8, 9, 10):  # the zero and constant rows: kept (within the scale's f16 rounding)
        assert np.allclose(ggml_quants.dequantize(type_name, theirs, n).reshape(x.shape)[i], x[i], rtol=2e-3, atol=0)


def mxfp4_edge_rows(rng):
    """Blocks of 32 at MXFP4's edges: the largest value 1 to 40 ulps under a power of two (where log2f
    rounds up to it, so GGML's exponent is one more than the value's), at the power itself and just
    over, from 2^-140 to 2^127; a block of subnormals, zeros, infinities and NaN among normal values."""
    rows = []
    for k in list(range(-140, 128, 3)) + [127]:
        top = np.float32(2.0 ** k)
        for ulps in (-40, -7, -3, -2, -1, 0, 1):
            amax = (np.array([top], np.float32).view(np.int32) + ulps).view(np.float32)[0]
            if not np.isfinite(amax) or amax <= 0:
                continue
            block = (rng.uniform(-1, 1, 32) * amax).astype(np.float32)
            block[rng.integers(32)] = amax * rng.choice([-1, 1])
            rows.append(block)
    rows.append((rng.standard_normal(32) * 1e-42).astype(np.float32))  # subnormal values
    for special in (np.inf, -np.inf, np.nan):
        block = rng.standard_normal(32).astype(np.float32)
        block[rng.integers(32)] = special
        rows.append(block)
    rows += [np.zeros(32, np.float32), np.full(32, -0.0, np.float32), np.full(32, np.nan, np.float32)]
    return np.array(rows, np.float32)


def test_mxfp4_quantize_edges(tmp_path):
    x = mxfp4_edge_rows(np.random.default_rng(39))
    ours, theirs = ggml_quants.quantize("MXFP4", x), pert_quantize(tmp_path, "MXFP4", x)
    mine, its = np.frombuffer(ours, np.uint8).reshape(-1, 17), np.frombuffer(theirs, np.uint8).reshape(-1, 17)
    differ = np.flatnonzero((mine != its).any(1))
    assert not differ.size, (f"{differ.size} of {len(x)} blocks differ; first {differ[0]}: max|x| "
                             f"{np.nanmax(np.abs(x[differ[0]]))!r}, pert {its[differ[0]].tobytes().hex()}, "
                             f"numpy {mine[differ[0]].tobytes().hex()}")


def x_block(type_name):
    """The block pert quantizes x in for its integer dot products (0: x stays float)."""
    if type_name in FLOATS:
        return 0
    return 32 if type_name in LEGACY | {"MXFP4"} else 256


def matmul_bound(type_name, w, x):
    """|pert's y - exact y| may be, elementwise, and the RMS of that difference to expect.

    For quantized W pert rounds each block of x to int8 with scale d = max|x|/127 (an F32 scale;
    per 32 values for the legacy types, per 256 for the K-quants), so each x value moves by at
    most d/2; the block sums are exact in int32. Hence |error| <= sum_k |W[n,k]| d_k/2 plus float32
    rounding in the sums, at most K u sum_k |W[n,k] x[t,k]| (u = 2^-24) in any order. With the
    rounding errors independent and uniform, the error's variance is sum_k W[n,k]^2 d_k^2/12; the
    RMS check allows twice that. F32/F16/BF16 W: float32 dot products, the rounding term only."""
    T, K = x.shape
    size = x_block(type_name)
    if size:
        d = np.abs(x.reshape(T, K // size, size)).max(2) / 127.0
        half = np.repeat(d, size, axis=1) / 2 * (1 + 1e-6)
    else:
        half = np.zeros_like(x)
    rounding = K * 2.0 ** -24 * (np.abs(x) @ np.abs(w).T)
    bound = half @ np.abs(w).T + rounding + 1e-30
    variance = (half ** 2 / 3) @ (w ** 2).T  # (d/2)^2/3 = d^2/12
    return bound, np.sqrt(2 * variance.mean()) + rounding.mean()


@pytest.mark.parametrize("type_name", TYPES)
def test_matmul(tmp_path, type_name):
    rng = np.random.default_rng(100 + ggml_quants.TYPES[type_name].number)
    T, K, N = 5, 768, 48
    quantized = ggml_quants.quantize(type_name, rng.standard_normal((N, K)).astype(np.float32) * 0.05)
    t = ggml_quants.TYPES[type_name]
    if type_name in FLOATS:  # values over 12 decades (random bits would overflow the sums)
        random = ggml_quants.quantize(type_name, rng.standard_normal(N * K) * 10.0 ** rng.uniform(-8, 4, N * K))
    else:
        random = random_blocks(type_name, N * K // t.block_size, rng)
    for what, raw in (("quantized Gaussian W", quantized), ("random W", random)):
        w = ggml_quants.dequantize(type_name, raw, N * K).reshape(N, K).astype(np.float64)
        for x in (rng.standard_normal((T, K)).astype(np.float32),
                  (rng.standard_normal((1, K)) * np.exp(rng.standard_normal((1, K)))).astype(np.float32)):
            (tmp_path / "w").write_bytes(raw)
            x.astype("<f4").tofile(tmp_path / "x")
            run("matmul", type_name, tmp_path / "w", tmp_path / "x", x.shape[0], K, N, tmp_path / "y")
            got = np.fromfile(tmp_path / "y", "<f4").reshape(x.shape[0], N).astype(np.float64)
            want = x.astype(np.float64) @ w.T
            bound, rms = matmul_bound(type_name, w, x.astype(np.float64))
            err = np.abs(got - want)
            worst = np.unravel_index(np.argmax(err / bound), err.shape)
            assert np.all(err <= bound), (f"{what}: y{list(worst)} = {got[worst]!r}, float64 {want[worst]!r}, "
                                          f"bound {bound[worst]:.3g}")
            if raw is quantized:  # heavy-tailed random W: too few dominant terms for a statistical check
                assert np.sqrt(np.mean(err ** 2)) <= rms, f"{what}: RMS error {np.sqrt(np.mean(err ** 2)):.3g} > {rms:.3g}"


def x_as_pert_rounds_it(type_name, x):
    """x [T][K] float32 rounded per block as pert's kernels round it, in the same float32
    operations (d = max|x| / 127; q = rint(x * 127 / max|x|) for the K-quants, rint(x * (1 / d))
    for the legacy types): the same integers, so no rounding can differ."""
    size = x_block(type_name)
    if not size:
        return x.astype(np.float64)
    T, K = x.shape
    b = x.reshape(T, K // size, size)
    amax = np.abs(b).max(2, keepdims=True)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.float32(127) / amax if size == 256 else np.float32(1) / d
    inv = np.where(amax > 0, inv, np.float32(0)).astype(np.float32)
    q = np.rint((b * inv).astype(np.float32))
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(T, K)


@pytest.mark.parametrize("type_name", TYPES)
def test_matmul_exact_given_x_rounded_alike(tmp_path, type_name):
    """With x rounded as pert rounds it, pert's product is the float64 one up to float32 sums:
    |Δ| <= 1e-6 of Σ|w·x| (a wrong scale, nibble, sign or min would be ~1e-2 and more)."""
    rng = np.random.default_rng(200 + ggml_quants.TYPES[type_name].number)
    T, K, N = 7, 768, 40
    raw = ggml_quants.quantize(type_name, rng.standard_normal((N, K)).astype(np.float32) * 0.05)
    w = ggml_quants.dequantize(type_name, raw, N * K).reshape(N, K).astype(np.float64)
    x = (rng.standard_normal((T, K)) * np.exp(rng.standard_normal((1, K)))).astype(np.float32)
    (tmp_path / "w").write_bytes(raw)
    x.astype("<f4").tofile(tmp_path / "x")
    run("matmul", type_name, tmp_path / "w", tmp_path / "x", T, K, N, tmp_path / "y")
    got = np.fromfile(tmp_path / "y", "<f4").reshape(T, N).astype(np.float64)
    xr = x_as_pert_rounds_it(type_name, x)
    want = xr @ w.T
    scale = np.abs(xr) @ np.abs(w).T
    assert np.all(np.abs(got - want) <= 1e-6 * scale), float(np.max(np.abs(got - want) / scale))
