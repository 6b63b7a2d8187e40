#!/usr/bin/env bash
# Trains the whole family (configs/train/*.json but family.json), two runs at a time on one
# thread each; logs go to build/train-logs/NAME.log. Reproduces every model under models/.
#   bash tools/train_family.sh [NAME ...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p build/train-logs
names=("$@")
if ((${#names[@]} == 0)); then
  for f in configs/train/*.json; do
    n=$(basename "$f" .json)
    [ "$n" = family ] || names+=("$n")
  done
fi
# The shared tokenizer first, so parallel runs do not race to train it.
[ -f models/tokenizer/tokenizer.model ] || /usr/bin/python3 tools/train.py "configs/train/${names[0]}.json" --steps 1 --out build/tokenizer-probe
printf '%s\n' "${names[@]}" | xargs -P 2 -I{} sh -c \
  '/usr/bin/python3 tools/train.py configs/train/{}.json > build/train-logs/{}.log 2>&1 && echo "trained {}" || echo "FAILED {}"'
