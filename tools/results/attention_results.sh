#!/usr/bin/env bash
# docs/results/attention.md's data, from the trained models/ (tools/train/train_family.sh):
#   1. pert attention over the family and its hybrid members (tools/lib/family_names.py --all) on
#      WikiText-2 test (its first ~150k tokens, tools/train/wikitext_prefix.py) at 64, L = 128, 2L and 8L;
#   2. the rope model under the training-free methods (log-n, Self-Extend, ReRoPE, StreamingLLM,
#      DCA) at the same lengths;
#   3. the page's figures (tools/plot/plot.py attention) and tables (tools/results/attention_tables.py).
# The JSON files and figures go to $OUT (default build/results/attention, so a run computes them
# afresh; OUT=docs/results/data/attention replaces the committed ones), the CSVs (a row per layer
# and head) beside them. A run resumes: cells already in a file are skipped.
#   [OUT=DIR] bash tools/results/attention_results.sh [-t THREADS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."  # the repository
threads=()
[ "${1:-}" = -t ] && threads=(-t "$2")
PY=/usr/bin/python3 PERT=build/pert OUT=${OUT:-build/results/attention}
TEXT=build/data/wikitext2_test_prefix.txt
mkdir -p $OUT build
$PY tools/train/wikitext_prefix.py $TEXT
models=()
for n in $($PY tools/lib/family_names.py --all); do models+=(-m "models/$n"); done
LENGTHS=64,128,256,1024 CHUNKS=16

# 1. The family.
$PERT attention "${models[@]}" -f $TEXT --lengths $LENGTHS --chunks $CHUNKS --out $OUT/family.json \
  --csv $OUT/family.csv -q "${threads[@]}"
$PY tools/plot/plot.py attention $OUT/family.json --lengths 1024 --out $OUT/family_8L
# 2. The rope model under each method.
configs=()
for c in plain configs/extend/logn.json configs/extend/self-extend.json configs/extend/rerope.json \
         configs/extend/streaming.json configs/extend/dca.json; do configs+=(--config "$c"); done
$PERT attention -m models/rope "${configs[@]}" -f $TEXT --lengths $LENGTHS --chunks $CHUNKS --out $OUT/methods.json \
  --csv $OUT/methods.csv -q "${threads[@]}"
$PY tools/plot/plot.py attention $OUT/methods.json --lengths 1024 --queries past_L --out $OUT/methods_8L
# 3. The tables.
$PY tools/results/attention_tables.py family $OUT/family.json
$PY tools/results/attention_tables.py methods $OUT/methods.json
$PY tools/results/attention_tables.py published $OUT/family.json $OUT/methods.json
