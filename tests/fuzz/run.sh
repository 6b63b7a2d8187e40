#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang (ASan + UBSan) into build-fuzz/ and fuzzes each
# for its seconds below (FUZZ_SECONDS, when set, for all), as many at once as there are cores,
# on a scratch copy of its seed corpus (tests/fuzz/corpus/NAME; the repository is never written). Exits non-zero when a
# harness finds a crash, leak or timeout, printing the reproducer; save it as
# tests/fuzz/regressions/NAME/<what-it-is>.
#
#   bash tests/fuzz/run.sh [NAME ...]          NAME: sweep gguf config tokenizer_load safetensors tokenizer_text
#   bash tests/fuzz/run.sh --build [NAME ...]  build only (tools/setup.sh does it in the background
#                                              while the other tiers run); what is up to date is kept
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$PWD
out=build-fuzz
build_only=0
[ "${1:-}" = --build ] && { build_only=1; shift; }
# Seconds per harness: enough to find again what each has found. With the fix reverted and the
# finding removed, from the seed corpus alone: sweep's two by 2 of 4 seeds in 12 and 30 s;
# gguf's in 16 and 26 s; tokenizer_load's in 6 and 13 s (with the JSON dictionary): 20 s. config,
# safetensors and tokenizer_text have found nothing in any run (config's regression, a --set value
# nested 10,000 deep, was written by hand): 20 s each, as tokenizer_load (on two cores the stage
# ends at ~100 s, not 120). The longest first, so the cores end together.
declare -A budget=([sweep]=60 [gguf]=45 [config]=20 [tokenizer_load]=20 [safetensors]=20 [tokenizer_text]=20)
names=("$@")
((${#names[@]})) || names=(sweep gguf config tokenizer_load safetensors tokenizer_text)
for name in "${names[@]}"; do
  [ -n "${budget[$name]:-}" ] || { echo "tests/fuzz/run.sh: no harness $name (${!budget[*]})" >&2; exit 2; }
done

# Library sources the harnesses need: the pert library's list in CMakeLists.txt (so the two
# cannot drift apart) less the compute files (kernels, their probes and tiles), which use OpenMP and OpenBLAS (clang has no libomp
# here) and GCC's target pragmas (kernels.cpp, which picks their paths, with them), and what runs
# models on top of them; no parser reaches either.
mapfile -t sources < <(sed -n '/^add_library(pert$/,/^)$/p' CMakeLists.txt | grep -o 'src/[^ ]*\.cpp' |
  grep -vE '^src/(kernels/(kernels|ops(_[a-z0-9]+)*|quants_(dot|avx2|panels[a-z0-9_]*)|amx_[a-z_]+|compute_roof)|attention/(attention|attention_stats|kernel|kv_cache)|model/(model|inference_state|loaded_model|moe|mla)|tasks/[a-z_]+|grid/[a-z_]+|runtime/(threads|bandwidth))\.cpp$')
((${#sources[@]})) || { echo "tests/fuzz/run.sh: no library sources found in CMakeLists.txt" >&2; exit 1; }
sources+=(src/grid/grid_file.cpp src/grid/grid_identity.cpp src/grid/grid_tables.cpp)  # of the grid, the results files' parser and tables (the sweep harness's)
flags=(-std=c++17 -gline-tables-only -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=all -Iinclude -Isrc -DPERT_SOURCE_DIR="\"$root\"" -Wno-unknown-pragmas)

cores=$(nproc)
# Runs "$@" in the background, at most $cores at once.
limited() {
  while (($(jobs -rp | wc -l) >= cores)); do wait -n || true; done
  "$@" &
}

# The library's unity batches, by CMakeLists.txt's own UNITY_GROUP rules (pairs of a regex and
# a batch): a batch's files compile as one object here too, the others alone.
mapfile -t rules < <(sed -n '/^foreach(source IN LISTS PERT_LIBRARY_SOURCES)$/,/^endforeach()$/p' CMakeLists.txt |
  sed -nE 's/.*source MATCHES "([^"]+)".*/\1/p; s/.*UNITY_GROUP ([a-z_]+).*/\1/p')
((${#rules[@]} >= 2 && ${#rules[@]} % 2 == 0)) || { echo "tests/fuzz/run.sh: no UNITY_GROUP rules in CMakeLists.txt" >&2; exit 1; }
declare -A batch=()  # batch name -> its files, in the library's order
units=()             # what compiles to one object each: a file, or batch:NAME
for src in "${sources[@]}"; do
  name=""
  for ((i = 0; i < ${#rules[@]}; i += 2)); do [[ $src =~ ${rules[i]} ]] && { name=${rules[i + 1]}; break; }; done
  if [ -z "$name" ]; then units+=("$src"); continue; fi
  [ -n "${batch[$name]:-}" ] || units+=("batch:$name")
  batch[$name]+="$src "
done

mkdir -p "$out/obj"
objects=()
for unit in "${units[@]}"; do  # library objects: -fsanitize=fuzzer-no-link, no main
  if [[ $unit == batch:* ]]; then
    files=(${batch[${unit#batch:}]})
    src=$out/obj/unity_${unit#batch:}.cpp
    printf '#include "%s"\n' "${files[@]/#/$root/}" >"$src.new"
    cmp -s "$src.new" "$src" && rm "$src.new" || mv "$src.new" "$src"
  else
    files=("$unit") src=$unit
  fi
  obj=$out/obj/$(echo "$src" | tr / _).o
  if [ ! -f "$obj" ] || [ -n "$(find "${files[@]}" "$src" include -newer "$obj" -print -quit)" ]; then
    rm -f "$obj"
    limited clang++ "${flags[@]/-fsanitize=fuzzer,/-fsanitize=fuzzer-no-link,}" -c "$src" -o "$obj"
  fi
  objects+=("$obj")
done
wait
for obj in "${objects[@]}"; do [ -f "$obj" ] || { echo "tests/fuzz/run.sh: $obj did not compile" >&2; exit 1; }; done

# One harness: built, then fuzzed on a scratch copy of its corpus; its line of results and its
# exit code left in its work folder.
# One harness's binary, unless it is newer than everything it is made of.
build_one() {
  local name=$1 bin=$out/fuzz_$1
  if [ -f "$bin" ] && [ -z "$(find tests/fuzz/fuzz_$name.cpp tests/fuzz/*.hpp \
                                  "${objects[@]}" include -newer "$bin" -print -quit)" ]; then
    return 0
  fi
  rm -f "$bin"
  clang++ "${flags[@]}" tests/fuzz/fuzz_$name.cpp "${objects[@]}" \
    $(pkg-config --libs libpcre2-8 libutf8proc) -o "$bin"
}

if ((build_only)); then
  for name in "${names[@]}"; do limited build_one "$name"; done
  wait
  for name in "${names[@]}"; do [ -f "$out/fuzz_$name" ] || { echo "tests/fuzz/run.sh: fuzz_$name did not build" >&2; exit 1; }; done
  exit 0
fi

fuzz_one() {
  local name=$1 work=$out/work/$1 rc=0 seconds=${FUZZ_SECONDS:-${budget[$1]}}
  rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
  build_one "$name" || { echo 1 >"$work/rc"; return; }
  cp -r tests/fuzz/corpus/"$name"/. "$work/corpus/"
  local log=$work/log.txt
  # New inputs go to the scratch corpus; every past finding is run too, read-only.
  local found=() && [ -d tests/fuzz/regressions/"$name" ] && found=(tests/fuzz/regressions/"$name")
  # JSON's tokens for the harnesses that read JSON. Past findings with their fixes reverted, from
  # the seed corpus alone, were found again: tokenizer_load's in 6 and 13 s (10 and 43 s
  # without), sweep's by 2 of 4 seeds in 12 and 30 s (by neither of 2 in 150 s without); gguf's
  # (binary, no dictionary) in 16 and 26 s.
  local dict=() && [[ $name =~ ^(safetensors|config|tokenizer_load|sweep)$ ]] && dict=(-dict=tests/fuzz/json.dict)
  "$out/fuzz_$name" "$work/corpus" "${found[@]}" "${dict[@]}" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/" >"$log" 2>&1 || rc=$?
  echo "$rc" >"$work/rc"
}

for name in "${names[@]}"; do limited fuzz_one "$name"; done  # as many at once as there are cores
wait
status=0
for name in "${names[@]}"; do
  work=$out/work/$name log=$out/work/$name/log.txt seconds=${FUZZ_SECONDS:-${budget[$name]}}
  rc=$(cat "$work/rc" 2>/dev/null || echo 1)
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" 2>/dev/null | grep -o '[0-9]*$' || echo "?")
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" 2>/dev/null | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" 2>/dev/null | tail -1 || echo "cov: ?")
  echo "fuzz $name: $runs runs in ${seconds}s, $speed execs/s, $cov, exit $rc"
  if ((rc)); then
    status=1
    grep -E 'ERROR|FUZZ FINDING|SUMMARY|uncaught|deadly' "$log" 2>/dev/null | head -5 || true
    for f in "$work"/artifacts/*; do [ -e "$f" ] && echo "  reproducer: $f (log: $log)"; done
  fi
done
exit $status
