#!/usr/bin/env bash
# Every result of the family that the README shows, from the trained models/ (tools/train/train_family.sh):
#   0. each scheme's attention logit against distance (pert positions), plotted;
#   1. WikiText-2 test (its first ~150k tokens, tools/train/wikitext_prefix.py) at 1x..32x L, every scheme,
#      and again with key-token perplexity (LongPPL) beside it;
#   2. held-out TinyStories at 1x..16x L, every scheme (and learned with "clamp"); 1 (with key
#      tokens too) and 2 for the hybrid members, beside rope, none and alibi, in files of their own (hybrid_*.json);
#   3. the rope model under every RoPE scaling and "extend" method, held-out TinyStories, 1x..32x L;
#   4. pass-key accuracy at 64..4096 tokens for every scheme, plain and under each config of 3
#      that applies to it;
#   5. pert ruler's tasks at 128..4096 tokens for the same pairs, and the grid of which method
#      keeps retrieval past L on which scheme (tools/results/claims.py kept, table and heat-map), and
#      every score behind it in one CSV (scheme, method, task, length: tools/results/claims.py grid);
#   6. docs/results/claims.md's and hybrid.md's tables (tools/results/claims.py): the published
#      claims beside 3, 4 and 5.
# Everything goes to $OUT (default build/results/extrapolation, so a run computes it afresh;
# OUT=docs/results/data/extrapolation adds to the committed files, as the pages read them, and then writes
# the pages' tables and figures from them: tools/lib/results_tables.py --write).
# Sweeps resume (cells already in a file are skipped) and a pass-key file newer than its model
# and config is kept, so a re-run after more models are trained computes only what is new; plots
# and tables follow each. The models are the schemes' and the hybrid members (tools/lib/family_names.py
# --all). NAMES=... (a subset, space-separated) measures only those models: 0, 1, 2, 4 and 5 for
# them, the learned table's "clamp" rows only with learned, 3 only with rope, the hybrid members
# beside rope, none and alibi; METHODS=... (config names of 3, e.g. "self-extend dca"; "none":
# none) the methods 3, 4 and 5 run. Every plot and table shows all that is measured (in $OUT), and
# one that has nothing to show yet is left out.
# Each step prints "[k/N] what" on stderr with the time so far and an estimate of what is left (at
# the pace of the cells so far); -n prints the steps and their commands and runs nothing.
#   [OUT=DIR] [NAMES=...] [METHODS=...] [PERT=build/pert] bash tools/results/family_results.sh [-t THREADS] [-n]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."  # the repository
threads=() dry=0
while [ $# -gt 0 ]; do
  case $1 in
    -t) [ $# -ge 2 ] || { echo "family_results.sh: -t needs a thread count" >&2; exit 2; }; threads=(-t "$2"); shift 2 ;;
    -n) dry=1; shift ;;
    *) echo "family_results.sh: unknown argument '$1' (give -t THREADS, -n)" >&2; exit 2 ;;
  esac
done
PY=/usr/bin/python3 PERT=${PERT:-build/pert} OUT=${OUT:-build/results/extrapolation}
read -r -a ALL <<< "$($PY tools/lib/family_names.py --all)"
read -r -a SCHEMES <<< "$($PY tools/lib/family_names.py)"
read -r -a NAMES <<< "${NAMES:-${ALL[*]}}"
for n in "${NAMES[@]}"; do
  [[ " ${ALL[*]} " == *" $n "* ]] || { echo "family_results.sh: NAMES: '$n' is not one of: ${ALL[*]}" >&2; exit 2; }
done
has() { [[ " ${NAMES[*]} " == *" $1 "* ]]; }
method() { [ -z "${METHODS:-}" ] || [[ " $METHODS " == *" $(basename "$1" .json) "* ]]; }  # METHODS keeps config $1
models=() hybrids=()  # -m flags: the schemes', and the hybrid members' beside rope, none and alibi
for n in "${NAMES[@]}"; do
  if [[ " ${SCHEMES[*]} " == *" $n "* ]]; then models+=(-m "models/$n"); else hybrids+=(-m "models/$n"); fi
done
[ ${#hybrids[@]} = 0 ] || hybrids+=(-m models/rope -m models/none -m models/alibi)
existing() { local f; for f; do [ ! -s "$f" ] || printf '%s\n' "$f"; done; }  # the files of $@ there are

# The steps: step CELLS WHAT COMMAND... runs COMMAND as step k of N (CELLS: the grid cells it
# measures, 0 for a plot or table), after a line on stderr with the time so far and what is left
# at the pace so far. The script's body runs twice: once to count the steps, once to run them.
counting=1 steps=0 cells=0 k=0 done_cells=0 t0=$SECONDS
clock() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
step() {
  local n=$1 what=$2
  shift 2
  if [ $counting = 1 ]; then steps=$((steps + 1)) cells=$((cells + n)); return 0; fi
  k=$((k + 1))
  local spent=$((SECONDS - t0)) left="unknown yet"
  [ $done_cells = 0 ] || left="~$(clock $((spent * (cells - done_cells) / done_cells)))"
  if [ $dry = 1 ]; then echo "[$k/$steps] $what: $*"; else
    echo "family_results.sh: [$k/$steps] $what ($n cells; cells $done_cells/$cells done) — $(clock $spent) so far, left $left" >&2
    "$@"
  fi
  done_cells=$((done_cells + n))
}
count() { local IFS=,; set -- $1; echo $#; }  # the lengths in a comma-separated list
quietly() { "$@" > /dev/null; }  # a command whose stdout the files hold
# A per-trial record (pass-key, RULER): pert writes FILE, which is kept as FILE.gz (gzip -9n: the
# same bytes every run; tools/lib/__init__.py's open_result reads either).
gzipped() { local f=$1; shift; quietly "$@" && gzip -9nf "$f"; }

# What 4 and 5 run: "NAME CONFIG" pairs (CONFIG "" for plain), each config of 3 that METHODS keeps and
# pert inspect accepts for the model (RoPE's scalings and the key re-encodings need a rotary
# scheme, a window needs positions it can re-index); the learned table of 128 positions takes
# prompts up to 121 tokens, and past L only with "clamp".
configs=()  # 3's rows: plain, then the methods
for c in plain linear-x2 linear-x4 linear-x8 ntk-x2 ntk-x4 dynamic yarn-x2; do configs+=(configs/rope/$c.json); done
for c in self-extend self-extend-llama self-extend-g64 self-extend-4x rerope rerope-logn leaky-rerope leaky-rerope-k64 logn \
         dynamic-logn streaming streaming-original streaming-window blockwise dca; do configs+=(configs/extend/$c.json); done
runs=()
for n in "${NAMES[@]}"; do
  runs+=("$n ")
  if [ "$n" = learned ]; then runs+=("learned configs/learned/clamp.json"); continue; fi
  for c in "${configs[@]:1}"; do
    if method "$c" && $PERT inspect models/$n --config "$c" > /dev/null 2>&1; then runs+=("$n $c"); fi
  done
done
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
# Plots and tables of what $OUT holds (those with nothing to show yet left out).
plot_positions() {
  local P=$OUT/positions panels=() f g files
  for f in none learned sinusoidal t5 rope+xpos alibi kerple fire xl deberta cope fox stick_breaking; do
    files=()
    for g in ${f//+/ }; do [ ! -s $P/$g.json ] || files+=($P/$g.json); done
    [ ${#files[@]} = 0 ] || panels+=("$(IFS=+; echo "${files[*]}")")
  done
  [ ${#panels[@]} = 0 ] || $PY tools/plot/plot.py positions "${panels[@]}" --cols 4 --sharey none --out $P
}
plot_sweep() {  # FILE TITLE
  [ ! -s $OUT/$1.json ] || $PY tools/plot/plot.py sweep $OUT/$1.json --out $OUT/$1 --title "$2"
}
passkey_tables() {
  local family=() all=() n
  for n in "${SCHEMES[@]}"; do [ "$n" = learned ] || family+=($(existing $OUT/passkey/$n.json.gz)); done
  [ ${#family[@]} = 0 ] || $PY tools/plot/plot_passkey.py "${family[@]}" --cols 2 --out $OUT/passkey_family.png
  [ ! -s $OUT/family_wikitext.json ] || $PY tools/results/paper_shapes.py ratios $OUT/family_wikitext.json
  [ ! -s $OUT/family_wikitext_key.json ] || $PY tools/results/paper_shapes.py keys $OUT/family_wikitext_key.json
  all=($(existing $OUT/passkey/*.json.gz))
  [ ${#all[@]} = 0 ] || $PY tools/results/paper_shapes.py passkey "${all[@]}"
}
ruler_tables() {
  [ ! -s $OUT/ruler/rope.json.gz ] || $PY tools/plot/plot_passkey.py $OUT/ruler/rope.json.gz --out $OUT/ruler_rope.png
  $PY tools/results/claims.py kept --data $OUT --plot $OUT/retrieval_kept.png
  $PY tools/results/claims.py grid --data $OUT --out $OUT/retrieval_grid.csv
}
claims_tables() {  # those of 3 need its sweep (and streaming its WikiText-2 one)
  local t
  for t in selfextend effective hybrid dca content; do $PY tools/results/claims.py $t --data $OUT; done
  if [ -s $OUT/extend_family_rope.json ]; then
    for t in rerope ntk pi; do $PY tools/results/claims.py $t --data $OUT; done
    [ ! -s $OUT/streaming_wikitext.json ] || $PY tools/results/claims.py streaming --data $OUT
  fi
  [ "$OUT" != docs/results/data/extrapolation ] || $PY tools/lib/results_tables.py --write docs/results/extrapolation.md \
    docs/results/passkey.md docs/results/claims.md docs/results/hybrid.md
}

body() {
  step 0 "the texts" $PY tools/train/heldout.py build/data/tinystories_heldout.txt
  step 0 "the texts" $PY tools/train/wikitext_prefix.py build/data/wikitext2_test_prefix.txt
  step 0 "the folders" mkdir -p $OUT/positions $OUT/passkey $OUT/ruler

  # 0. Each scheme's attention logit against distance (docs/design.md's figure).
  local n distance
  for n in "${NAMES[@]}"; do
    distance=512
    [ "$n" = learned ] && distance=127
    step 0 "pert positions $n" quietly $PERT positions -m models/$n --distance $distance --json-out $OUT/positions/$n.json
  done
  step 0 "plot positions" plot_positions

  # 1. Long documents, the ALiBi paper's way: one text, non-overlapping chunks, every token scored.
  local wiki=128,256,512,1024,2048,4096 stories=128,256,512,1024,2048
  local W=(-f build/data/wikitext2_test_prefix.txt) S=(-f build/data/tinystories_heldout.txt --split-docs)
  local clamp=(-m models/learned --config configs/learned/clamp.json)
  [ ${#models[@]} = 0 ] || step $((${#models[@]} / 2 * 6)) "sweep ${NAMES[*]}, WikiText-2" \
    $PERT sweep "${models[@]}" "${W[@]}" --lengths $wiki --out $OUT/family_wikitext.json "${threads[@]}"
  ! has learned || step 6 "sweep learned clamp, WikiText-2" \
    $PERT sweep "${clamp[@]}" "${W[@]}" --lengths $wiki --out $OUT/family_wikitext.json "${threads[@]}"
  step 0 "plot family_wikitext" plot_sweep family_wikitext "pert's family (trained at L = 128), WikiText-2 test, chunks"
  # 1b. The same, scored on its key tokens alone too (LongPPL), chosen by one evaluator for every row:
  # rope read past L by Self-Extend (the family's retrieval furthest past L without training), the
  # short context L/2, alpha 0.5 (the paper's 2 finds almost none at this size: docs/results/extrapolation.md).
  local keys=(--key-tokens --key-short 64 --key-alpha 0.5 --key-model models/rope --key-config configs/extend/self-extend.json)
  [ ${#models[@]} = 0 ] || step $((${#models[@]} / 2 * 6)) "sweep ${NAMES[*]}, WikiText-2 with key tokens" \
    $PERT sweep "${models[@]}" "${W[@]}" --lengths $wiki "${keys[@]}" --out $OUT/family_wikitext_key.json "${threads[@]}"

  # 2. Held-out stories, as the first family was measured.
  [ ${#models[@]} = 0 ] || step $((${#models[@]} / 2 * 5)) "sweep ${NAMES[*]}, held-out stories" \
    $PERT sweep "${models[@]}" "${S[@]}" --lengths $stories --out $OUT/family.json "${threads[@]}"
  ! has learned || step 5 "sweep learned clamp, held-out stories" \
    $PERT sweep "${clamp[@]}" "${S[@]}" --lengths $stories --out $OUT/family.json "${threads[@]}"
  step 0 "plot family" plot_sweep family "pert's family (trained at L = 128), held-out TinyStories, chunks"
  # The hybrid layouts beside rope, none and alibi (docs/results/hybrid.md), on both texts.
  if [ ${#hybrids[@]} != 0 ]; then
    step $((${#hybrids[@]} / 2 * 6)) "sweep the hybrid layouts, WikiText-2" \
      $PERT sweep "${hybrids[@]}" "${W[@]}" --lengths $wiki --out $OUT/hybrid_wikitext.json "${threads[@]}"
    step $((${#hybrids[@]} / 2 * 6)) "sweep the hybrid layouts, WikiText-2 with key tokens" \
      $PERT sweep "${hybrids[@]}" "${W[@]}" --lengths $wiki "${keys[@]}" --out $OUT/hybrid_wikitext_key.json "${threads[@]}"
    step $((${#hybrids[@]} / 2 * 5)) "sweep the hybrid layouts, held-out stories" \
      $PERT sweep "${hybrids[@]}" "${S[@]}" --lengths $stories --out $OUT/hybrid.json "${threads[@]}"
  fi
  step 0 "plot hybrid_wikitext" plot_sweep hybrid_wikitext \
    "hybrid layouts beside rope, none and alibi (trained at L = 128), WikiText-2 test, chunks"
  step 0 "plot hybrid" plot_sweep hybrid "hybrid layouts beside rope, none and alibi (trained at L = 128), held-out TinyStories, chunks"

  # 3. Training-free extension of the rope model (the README's rows), the methods METHODS keeps.
  if has rope; then
    local rows=() c
    for c in "${configs[@]}"; do
      if [ "$c" = "${configs[0]}" ] || method "$c"; then rows+=(--config "$c"); fi
    done
    step $((${#rows[@]} / 2 * 6)) "sweep rope, plain and $((${#rows[@]} / 2 - 1)) methods, held-out stories" \
      $PERT sweep -m models/rope "${rows[@]}" "${S[@]}" --lengths 128,256,512,1024,2048,4096 \
      --out $OUT/extend_family_rope.json "${threads[@]}"
    step 0 "plot extend_family_rope" plot_sweep extend_family_rope \
      "pert's rope model (trained at L = 128), training-free extension, chunks"
    # StreamingLLM's claim on long documents too (a story-per-document text keeps a BOS in every window).
    rows=(--config configs/rope/plain.json)
    for c in streaming streaming-window streaming-original; do
      if method $c; then rows+=(--config configs/extend/$c.json); fi
    done
    [ ${#rows[@]} = 2 ] || step $((${#rows[@]} / 2 * 4)) "sweep rope under StreamingLLM, WikiText-2" \
      $PERT sweep -m models/rope "${rows[@]}" "${W[@]}" --lengths 128,512,2048,4096 \
      --out $OUT/streaming_wikitext.json "${threads[@]}"
  fi

  # 4. Pass-key retrieval, every pair of runs.
  local run lengths
  for run in "${runs[@]}"; do
    pair "$run"
    lengths=64,128,256,512,1024,2048,4096
    [ "$run" = "learned " ] && lengths=$learned_passkey
    fresh $OUT/passkey/$name.json.gz models/$n/model.safetensors $c && continue
    step $(count $lengths) "pert passkey $name" gzipped $OUT/passkey/$name.json $PERT passkey -m models/$n "${config[@]}" --lengths $lengths \
      --json-out $OUT/passkey/$name.json -q "${threads[@]}"
  done
  step 0 "pass-key plot and tables" passkey_tables

  # 5. Retrieval tasks (pert ruler, every task), every pair of 4 (the learned table of 128
  #    positions takes 112 with the longest answer).
  local ruler=(ruler --tasks all --depths 0,0.5,1 --trials 3 --essay ../shared/data/text/wikitext-2.test.tokens.txt -q)
  for run in "${runs[@]}"; do
    pair "$run"
    lengths=128,256,512,1024,2048,4096
    [ "$run" = "learned " ] && lengths=$learned_ruler
    fresh $OUT/ruler/$name.json.gz models/$n/model.safetensors $c && continue
    step $(count $lengths) "pert ruler $name" gzipped $OUT/ruler/$name.json $PERT "${ruler[@]}" -m models/$n "${config[@]}" --lengths $lengths \
      --json-out $OUT/ruler/$name.json "${threads[@]}"
  done
  step 0 "retrieval plot and tables" ruler_tables

  # 6. The published claims beside the family's numbers.
  step 0 "the claims' tables" claims_tables
}
body
counting=0
body
[ $dry = 1 ] || echo "family_results.sh: $steps steps, $cells cells, done in $(clock $((SECONDS - t0)))" >&2
