#!/usr/bin/env bash
# The llama2.c converter on a real checkpoint (../shared), in both RoPE layouts and all three
# dtypes, yields model directories that `pert inspect` validates.
#   convert_inspect.sh PERT PYTHON SOURCE_DIR
set -euo pipefail
pert=$1 python=$2 src=$3
ckpt=$src/../shared/data/models/stories260K/stories260K.bin
[ -f "$ckpt" ] || { echo "missing $ckpt (../shared beside the repository)"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for layout in half interleaved; do
  for dtype in F32 F16 BF16; do
    "$python" "$src/tools/convert/convert_llama2c.py" "$ckpt" "$(dirname "$ckpt")/tok512.bin" "$out/$layout-$dtype" --layout "$layout" --dtype "$dtype" 2>/dev/null
    "$pert" inspect "$out/$layout-$dtype" --json >"$out/inspect.json"
    "$python" - "$layout" "$dtype" "$out/inspect.json" <<'PY'
import json, sys
layout, dtype, path = sys.argv[1:]
j = json.load(open(path))
assert j["parameters"] == 260032, j["parameters"]
assert j["config"]["position"]["layout"] == layout, j["config"]["position"]
assert j["config"]["num_key_value_heads"] == 4 and j["config"]["max_position_embeddings"] == 512
assert {t["dtype"] for t in j["tensors"]} == {dtype}
assert len(j["tensors"]) == 47
PY
  done
done
# Every shipped positional config applies to the converted model.
for config in "$src"/configs/rope/*.json; do
  "$pert" inspect "$out/half-F32" --config "$config" >/dev/null || { echo "FAILED: --config $config"; exit 1; }
done
echo "converted and inspected stories260K: 2 layouts x 3 dtypes; $(ls "$src"/configs/rope/*.json | wc -l) configs apply"
