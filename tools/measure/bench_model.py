#!/usr/bin/env python3
"""Random-weight checkpoints of known shapes, for benchmarks (`pert bench`, tools/measure/bench.py,
tools/measure/bench_extend.py): the same weights on any machine for a given seed.

    /usr/bin/python3 tools/measure/bench_model.py stories15M build/models/bench-stories15M-f32
    /usr/bin/python3 tools/measure/bench_model.py stories110M build/models/bench-stories110M-bf16 --dtype BF16

Shapes (llama2.c's TinyStories models; vocab 32000, tied embeddings, RoPE θ 10000):
  stories15M   dim 288, hidden 768, 6 layers, 6 heads, 6 kv heads, trained context 256
  stories110M  dim 768, hidden 2048, 12 layers, 12 heads, 12 kv heads, trained context 1024
Writes config.json (HF keys) and model.safetensors; no tokenizer (benchmarks feed token ids).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from reference import reference  # noqa: E402

SHAPES = {
    "stories15M": dict(hidden=288, ffn=768, layers=6, heads=6, kv_heads=6, vocab=32000, trained=256),
    "stories110M": dict(hidden=768, ffn=2048, layers=12, heads=12, kv_heads=12, vocab=32000, trained=1024),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shape", choices=sorted(SHAPES), help="checkpoint shape (see above)")
    ap.add_argument("out_dir", metavar="OUT_DIR", help="model directory to write")
    ap.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"], help="stored precision (default %(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="weights' random seed (default %(default)s)")
    a = ap.parse_args()
    reference.make_model(a.out_dir, None, seed=a.seed, dtype=a.dtype, tie=True,
                         extra_config={"rope_theta": 10000.0}, **SHAPES[a.shape])
    print(f"{a.out_dir}: random {a.shape} ({a.dtype}, seed {a.seed})", file=sys.stderr)


if __name__ == "__main__":
    main()
