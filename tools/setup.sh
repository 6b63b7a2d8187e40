#!/usr/bin/env bash
# Set-up for a fresh Debian (bookworm) machine, idempotent and quick when nothing is missing:
# installs the Debian packages pert needs, configures and builds it into build/, and converts
# the shared stories260K checkpoint into build/models/ for the main job, and writes the family's
# held-out text to build/data/.
#
#   bash tools/setup.sh          set up and build the pert binary (build/pert) and the Python
#                                module (build/python/pert) only
#   bash tools/setup.sh --test   build everything (tests, test helpers) and run the whole test
#                                suite, then again under ASan+UBSan, then the fuzzers
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

run_tests=0
case "${1:-}" in
  "") ;;
  --test) run_tests=1 ;;
  *) echo "usage: bash tools/setup.sh [--test]" >&2; exit 2 ;;
esac

packages=(cmake make g++ libopenblas-openmp-dev nlohmann-json3-dev libcli11-dev catch2
          python3-torch python3-numpy python3-sentencepiece python3-matplotlib
          clang libclang-rt-14-dev pkg-config libpcre2-dev libutf8proc-dev
          pybind11-dev python3-dev python3-pytest)
# The test suite's own: a real single-node Slurm for tests/integration/slurm_test.py; venv and pip for
# tests/integration/python_install_test.py (pip install into a venv).
if ((run_tests)); then packages+=(slurm-wlm munge python3-venv python3-pip); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The public files beside the repository that the set-up converts and the tests and results read
# (docs/data.md: what each is for and where it comes from), checked against their hashes.
shared_missing=()
while read -r sum file; do
  path=../shared/data/$file
  if [ ! -f "$path" ]; then
    shared_missing+=("$file")
  elif [ "$(sha256sum "$path" | cut -d' ' -f1)" != "$sum" ]; then
    echo "setup: warning: $path differs from the file pert's results were made from (sha256 in tools/shared_data.sha256); figures may not reproduce to the digit" >&2
  fi
done < tools/shared_data.sha256

jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
# Without --test only the pert binary and the Python module: the test suite and its helpers take
# more than twice as long to compile and nothing but ctest needs them.
if ((run_tests)); then
  cmake --build build -j"$jobs"
else
  cmake --build build -j"$jobs" --target pert_cli pert_python
fi

# Debian's interpreter: the python3 first on PATH may not see Debian's packages.
python=/usr/bin/python3
shared=../shared/data/models/stories260K
if [ -f "$shared/stories260K.bin" ] && [ ! -f build/models/stories260K/tokenizer.json ]; then
  "$python" tools/convert/convert_llama2c.py "$shared/stories260K.bin" "$shared/tok512.bin" build/models/stories260K
fi

# The family's held-out text (docs/results/extrapolation.md; tests read it), and the long-document
# text of its WikiText table.
if [ -f ../shared/data/text/tinystories_val.txt ] && [ ! -f build/data/tinystories_heldout.txt ]; then
  "$python" tools/train/heldout.py build/data/tinystories_heldout.txt
fi
if [ -f ../shared/data/text/wikitext-2.test.tokens.txt ] && [ ! -f build/data/wikitext2_test_prefix.txt ]; then
  "$python" tools/train/wikitext_prefix.py build/data/wikitext2_test_prefix.txt
fi

if ((${#shared_missing[@]})); then
  echo "setup: built, but ../shared/data lacks ${#shared_missing[*]} file(s) the Quick start and the tests read:" >&2
  for file in "${shared_missing[@]}"; do echo "  ../shared/data/$file" >&2; done
  echo "setup: docs/data.md says what each is and where it comes from; put them there and run the set-up again" >&2
  exit 1
fi

if ((run_tests)); then
  # HF's JS tokenizers and real tokenizer.json files for tests/reference/hf_tokenizer_test.py, from the
  # lock (about 600 MB). Debian's nodejs and npm only when there is no npm at all (a nodejs
  # that bundles npm, as NodeSource's does, conflicts with Debian's npm package).
  if ! command -v npm >/dev/null; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  if ! cmp -s tests/helpers/hf_tokenizers/package-lock.json tests/helpers/hf_tokenizers/node_modules/.pert-installed-lock; then
    npm ci --prefix tests/helpers/hf_tokenizers --no-audit --no-fund
    cp tests/helpers/hf_tokenizers/package-lock.json tests/helpers/hf_tokenizers/node_modules/.pert-installed-lock
  fi
  # The sanitizer build and the fuzzers' build start now, at the lowest priority, beside the
  # plain suite: they take the cycles its tests leave idle (a test waiting on its subprocesses,
  # the serial ones), not a test's own. Their output goes to build-asan/build.log and
  # build/fuzz-build.log, shown when they fail.
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPERT_SANITIZE=ON -DPERT_NATIVE=OFF >/dev/null
  nice -n 19 cmake --build build-asan -j"$jobs" >build-asan/build.log 2>&1 &
  asan_build=$!
  nice -n 19 bash tests/fuzz/run.sh --build >build/fuzz-build.log 2>&1 &
  fuzz_build=$!
  trap 'kill $asan_build $fuzz_build 2>/dev/null || true' EXIT
  ctest --test-dir build --output-on-failure -j"$jobs"
  # The suite under AddressSanitizer + UndefinedBehaviorSanitizer, less the checks labelled
  # "once" (tests/CMakeLists.txt: Python-only tools, and long comparisons whose C++ the other
  # tests run here too).
  wait $asan_build || { tail -40 build-asan/build.log; echo "setup: the sanitizer build failed" >&2; exit 1; }
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE once
  # libFuzzer on the parsers of hostile input, a bounded time each (tests/fuzz/run.sh; what the
  # build above left undone or failed to build is built, and reported, here).
  wait $fuzz_build || true
  bash tests/fuzz/run.sh
fi
