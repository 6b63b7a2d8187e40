#!/usr/bin/env bash
# Every result of the family that the README shows, from the trained models/ (tools/train/train_family.sh):
#   0. each scheme's attention logit against distance (pert positions), plotted;
#   1. WikiText-2 test (its first ~150k tokens, tools/train/wikitext_prefix.py) at 1x..32x L, every scheme;
#   2. held-out TinyStories at 1x..16x L, every scheme (and learned with "clamp"); 1 and 2 for the
#      hybrid members too, beside rope, none and alibi, in files of their own (hybrid_*.json);
#   3. the rope model under every RoPE scaling and "extend" method, held-out TinyStories, 1x..32x L;
#   4. pass-key accuracy at 64..4096 tokens for every scheme, plain and under each config of 3
#      that applies to it;
#   5. pert ruler's tasks at 128..4096 tokens for the same pairs, and the grid of which method
#      keeps retrieval past L on which scheme (tools/results/claims.py kept, table and heat-map), and
#      every score behind it in one CSV (scheme, method, task, length: tools/results/claims.py grid);
#   6. docs/results/claims.md's and hybrid.md's tables (tools/results/claims.py): the published
#      claims beside 3, 4 and 5.
# Everything goes to $OUT (default build/results/extrapolation, so a run computes it afresh;
# OUT=models/extrapolation adds to the committed files, as the pages read them, and then writes
# the pages' tables and figures from them: tools/lib/results_tables.py --write).
# Sweeps resume (cells already in a file are skipped) and a pass-key file newer than its model
# and config is kept, so a re-run after more models are trained computes only what is new; plots
# and tables follow each. The models are the eleven and the hybrid members (tools/lib/family_names.py
# --all). NAMES=... (a subset, space-separated) limits what is measured in 0, 1, 2, 4 and 5, and
# METHODS=... (config names of 3, e.g. "self-extend dca") the methods 4 and 5 run; every plot and
# table still shows all that is measured.
#   [OUT=DIR] [NAMES=...] [METHODS=...] bash tools/results/family_results.sh [-t THREADS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."  # the repository
threads=()
[ "${1:-}" = -t ] && threads=(-t "$2")
PY=/usr/bin/python3 PERT=build/pert OUT=${OUT:-build/results/extrapolation}
read -r -a ALL <<< "$($PY tools/lib/family_names.py --all)"
read -r -a ELEVEN <<< "$($PY tools/lib/family_names.py)"
read -r -a NAMES <<< "${NAMES:-${ALL[*]}}"
models=() hybrids=()  # -m flags: the eleven's, and the hybrid members' beside rope, none and alibi
for n in "${NAMES[@]}"; do
  if [[ " ${ELEVEN[*]} " == *" $n "* ]]; then models+=(-m "models/$n"); else hybrids+=(-m "models/$n"); fi
done
[ ${#hybrids[@]} = 0 ] || hybrids+=(-m models/rope -m models/none -m models/alibi)
$PY tools/train/heldout.py build/data/tinystories_heldout.txt
$PY tools/train/wikitext_prefix.py build/data/wikitext2_test_prefix.txt

# 0. Each scheme's attention logit against distance (docs/design.md's figure).
mkdir -p $OUT/positions
for n in "${NAMES[@]}"; do
  distance=512
  [ "$n" = learned ] && distance=127
  $PERT positions -m models/$n --distance $distance --json-out $OUT/positions/$n.json > /dev/null
done
P=$OUT/positions
$PY tools/plot/plot.py positions $P/{none,learned,sinusoidal,t5}.json $P/rope.json+$P/xpos.json \
  $P/{alibi,kerple,fire,xl,deberta}.json --cols 5 --sharey none --out $OUT/positions

# 1. Long documents, the ALiBi paper's way: one text, non-overlapping chunks, every token scored.
[ ${#models[@]} = 0 ] || $PERT sweep "${models[@]}" -f build/data/wikitext2_test_prefix.txt \
  --lengths 128,256,512,1024,2048,4096 --out $OUT/family_wikitext.json "${threads[@]}"
$PERT sweep -m models/learned --config configs/learned/clamp.json -f build/data/wikitext2_test_prefix.txt \
  --lengths 128,256,512,1024,2048,4096 --out $OUT/family_wikitext.json "${threads[@]}"
$PY tools/plot/plot.py sweep $OUT/family_wikitext.json --out $OUT/family_wikitext \
  --title "pert's family (trained at L = 128), WikiText-2 test, chunks"

# 2. Held-out stories, as the first family was measured.
[ ${#models[@]} = 0 ] || $PERT sweep "${models[@]}" -f build/data/tinystories_heldout.txt --split-docs \
  --lengths 128,256,512,1024,2048 --out $OUT/family.json "${threads[@]}"
$PERT sweep -m models/learned --config configs/learned/clamp.json -f build/data/tinystories_heldout.txt \
  --split-docs --lengths 128,256,512,1024,2048 --out $OUT/family.json "${threads[@]}"
$PY tools/plot/plot.py sweep $OUT/family.json --out $OUT/family \
  --title "pert's family (trained at L = 128), held-out TinyStories, chunks"
# The hybrid layouts beside rope, none and alibi (docs/results/hybrid.md), on both texts.
if [ ${#hybrids[@]} != 0 ]; then
  $PERT sweep "${hybrids[@]}" -f build/data/wikitext2_test_prefix.txt --lengths 128,256,512,1024,2048,4096 \
    --out $OUT/hybrid_wikitext.json "${threads[@]}"
  $PERT sweep "${hybrids[@]}" -f build/data/tinystories_heldout.txt --split-docs --lengths 128,256,512,1024,2048 \
    --out $OUT/hybrid.json "${threads[@]}"
fi
for f in "hybrid_wikitext:WikiText-2 test" "hybrid:held-out TinyStories"; do
  if [ -s $OUT/${f%%:*}.json ]; then
    $PY tools/plot/plot.py sweep $OUT/${f%%:*}.json --out $OUT/${f%%:*} \
      --title "hybrid layouts beside rope, none and alibi (trained at L = 128), ${f#*:}, chunks"
  fi
done

# 3. Training-free extension of the rope model (the README's rows).
configs=()
for c in plain linear-x2 linear-x4 linear-x8 ntk-x2 ntk-x4 dynamic yarn-x2; do configs+=(configs/rope/$c.json); done
for c in self-extend self-extend-llama self-extend-g64 self-extend-4x rerope rerope-logn leaky-rerope leaky-rerope-k64 logn \
         dynamic-logn streaming streaming-original streaming-window blockwise dca; do configs+=(configs/extend/$c.json); done
rows=()
for c in "${configs[@]}"; do rows+=(--config "$c"); done
$PERT sweep -m models/rope "${rows[@]}" -f build/data/tinystories_heldout.txt --split-docs \
  --lengths 128,256,512,1024,2048,4096 --out $OUT/extend_family_rope.json "${threads[@]}"
$PY tools/plot/plot.py sweep $OUT/extend_family_rope.json --out $OUT/extend_family_rope \
  --title "pert's rope model (trained at L = 128), training-free extension, chunks"
# StreamingLLM's claim on long documents too (a story-per-document text keeps a BOS in every window).
$PERT sweep -m models/rope --config configs/rope/plain.json --config configs/extend/streaming.json \
  --config configs/extend/streaming-window.json --config configs/extend/streaming-original.json \
  -f build/data/wikitext2_test_prefix.txt --lengths 128,512,2048,4096 --out $OUT/streaming_wikitext.json "${threads[@]}"

# 4. Pass-key retrieval, every scheme plain and under every method of 3 that applies to it (pert
#    inspect accepts the pair: RoPE's scalings and the key re-encodings need a rotary scheme, a
#    window needs positions it can re-index); the learned table of 128 positions takes prompts up
#    to 121 tokens, and past L only with "clamp".
mkdir -p $OUT/passkey $OUT/ruler
# The learned table's lengths where its answers still end within its rows: family_acceptance.py's.
read -r learned_passkey learned_ruler < <($PY -c 'import sys; sys.path.insert(0, "tools"); from train import family_acceptance as f
print(",".join(map(str, f.PASSKEY_LENGTHS)), f.LEARNED_RULER_LENGTH)')
: "${learned_ruler:?family_acceptance.py gave no lengths for the learned table}"
fresh() { local f=$1; shift; [ -s "$f" ] && for dep; do [ "$f" -nt "$dep" ] || return 1; done; }
pair() {  # a run "NAME [CONFIG]": its file's name (NAME or NAME+METHOD) and its --config flag
  read -r n c <<< "$1"
  name=$n config=()
  [ -z "$c" ] || { name=$n+$(basename "$c" .json); config=(--config "$c"); }
}
runs=()  # "NAME CONFIG" pairs: CONFIG "" for plain
for n in "${NAMES[@]}"; do
  runs+=("$n ")
  if [ "$n" = learned ]; then runs+=("learned configs/learned/clamp.json"); continue; fi
  for c in "${configs[@]:1}"; do
    [ -z "${METHODS:-}" ] || [[ " $METHODS " == *" $(basename "$c" .json) "* ]] || continue
    $PERT inspect models/$n --config "$c" > /dev/null 2>&1 && runs+=("$n $c")
  done
done
for run in "${runs[@]}"; do
  pair "$run"
  lengths=64,128,256,512,1024,2048,4096
  [ "$run" = "learned " ] && lengths=$learned_passkey
  fresh $OUT/passkey/$name.json models/$n/model.safetensors $c && continue
  $PERT passkey -m models/$n "${config[@]}" --lengths $lengths --json-out $OUT/passkey/$name.json -q \
    "${threads[@]}" > /dev/null
done
family=()
for n in "${ELEVEN[@]}"; do [ "$n" = learned ] || family+=("$OUT/passkey/$n.json"); done
$PY tools/plot/plot_passkey.py "${family[@]}" --cols 2 --out $OUT/passkey_family.png
$PY tools/results/paper_shapes.py ratios $OUT/family_wikitext.json
$PY tools/results/paper_shapes.py passkey $OUT/passkey/*.json

# 5. Retrieval tasks (pert ruler, every task), every pair of 4 (the learned table of 128
#    positions takes 112 with the longest answer).
ruler=(ruler --tasks all --depths 0,0.5,1 --trials 3 --essay ../shared/data/text/wikitext-2.test.tokens.txt -q)
for run in "${runs[@]}"; do
  pair "$run"
  lengths=128,256,512,1024,2048,4096
  [ "$run" = "learned " ] && lengths=$learned_ruler
  fresh $OUT/ruler/$name.json models/$n/model.safetensors $c && continue
  $PERT "${ruler[@]}" -m models/$n "${config[@]}" --lengths $lengths --json-out $OUT/ruler/$name.json \
    "${threads[@]}" > /dev/null
done
$PY tools/plot/plot_passkey.py $OUT/ruler/rope.json --out $OUT/ruler_rope.png
$PY tools/results/claims.py kept --data $OUT --plot $OUT/retrieval_kept.png
$PY tools/results/claims.py grid --data $OUT --out $OUT/retrieval_grid.csv

# 6. The published claims beside the family's numbers.
for t in selfextend rerope streaming ntk pi effective hybrid dca; do $PY tools/results/claims.py $t --data $OUT; done
[ "$OUT" != models/extrapolation ] || $PY tools/lib/results_tables.py --write docs/results/extrapolation.md \
  docs/results/passkey.md docs/results/claims.md docs/results/hybrid.md
