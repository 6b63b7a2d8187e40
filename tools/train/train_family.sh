#!/usr/bin/env bash
# Trains the whole family (CONFIGS/*.json but family.json; --configs, default configs/train), or
# the NAMEs given, N runs at a time; each logs to build/train-logs/NAME.log and writes OUT/NAME/
# (--out-dir, default models; OUT, CK and CONFIGS are relative to the repository).
#
#   bash tools/train/train_family.sh [-j N] [--device auto|cpu|cuda] [--data-dir DIR] [--max-minutes M]
#                              [--restart] [--out-dir OUT] [--checkpoint-dir CK] [--configs CONFIGS] [NAME ...]
#
# -j: runs at a time (default: 2 on CPU, one CPU thread each; every run at once on cuda).
# --device, --data-dir, --max-minutes (each run stops there with a checkpoint) and --restart go
# to each tools/train/train.py run, with $PYTHON (default /usr/bin/python3). The shared tokenizer
# (models/tokenizer) is made first if missing, so parallel runs do not race to train it; an
# existing one is kept. Re-running continues: a run whose OUT/NAME/card.json has the current
# run config's hash is skipped by train.py; an interrupted one resumes from its checkpoint
# (build/train/NAME/checkpoint.pt, saved every eval_every steps; CK/NAME.pt with --checkpoint-dir,
# for machines that wipe build/ between sessions). Prints a line per model at the end; exits 1 if
# any run failed or stopped before its last step.
set -uo pipefail
here=$PWD
cd "$(dirname "${BASH_SOURCE[0]}")/../.."  # the repository
PY=${PYTHON:-/usr/bin/python3}
usage() { sed -n '2,17s/^# \{0,1\}//p' "$0"; }
jobs_n="" device=auto pass=() names=() out_dir=models ck_dir="" configs=configs/train
while (($#)); do
  case "$1" in
    -j) jobs_n="${2:?-j needs a number}"; shift 2 ;;
    -j*) jobs_n="${1#-j}"; shift ;;
    --device) device="${2:?--device needs auto, cpu or cuda}"; shift 2 ;;
    --data-dir) dir=$(cd "$here" && cd "${2:?--data-dir needs a directory}" && pwd) || exit 2
                pass+=(--data-dir "$dir"); shift 2 ;;
    --max-minutes) pass+=(--max-minutes "${2:?--max-minutes needs minutes}"); shift 2 ;;
    --restart) pass+=(--restart); shift ;;
    --out-dir) out_dir="${2:?--out-dir needs a directory}"; shift 2 ;;
    --checkpoint-dir) ck_dir="${2:?--checkpoint-dir needs a directory}"; shift 2 ;;
    --configs) configs="${2:?--configs needs a directory}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "train_family.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done
if ((${#names[@]} == 0)); then
  for f in "$configs"/*.json; do
    n=$(basename "$f" .json)
    [ "$n" = family ] || names+=("$n")
  done
fi
for n in "${names[@]}"; do
  [ -f "$configs/$n.json" ] || { echo "train_family.sh: no $configs/$n.json" >&2; exit 2; }
done
if [ "$device" = auto ]; then
  device=$($PY -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")') || exit 1
fi
case "$device" in cpu|cuda) ;; *) echo "train_family.sh: --device $device: auto, cpu or cuda" >&2; exit 2 ;; esac
[ -n "$jobs_n" ] || { [ "$device" = cuda ] && jobs_n=${#names[@]} || jobs_n=2; }
[[ "$jobs_n" =~ ^[1-9][0-9]*$ ]] || { echo "train_family.sh: -j $jobs_n: a positive number" >&2; exit 2; }
pass+=(--device "$device")
mkdir -p build/train-logs

# The shared tokenizer first (a dry run makes it if missing and checks the data can be read).
$PY tools/train/train.py "$configs/${names[0]}.json" "${pass[@]}" --dry-run || exit 1

run_one() {
  local n=$1
  local ck=()
  [ -z "$ck_dir" ] || ck=(--checkpoint "$ck_dir/$n.pt")
  $PY tools/train/train.py "$configs/$n.json" "${pass[@]}" --out "$out_dir/$n" "${ck[@]}" > "build/train-logs/$n.log" 2>&1
  echo $? > "build/train-logs/$n.rc"
}
echo "training ${#names[@]} models on $device, $jobs_n at a time; logs in build/train-logs/"
for n in "${names[@]}"; do
  rm -f "build/train-logs/$n.rc"
  while (($(jobs -rp | wc -l) >= jobs_n)); do wait -n; done
  run_one "$n" &
  echo "started $n"
done
wait

failed=0
for n in "${names[@]}"; do
  rc=$(cat "build/train-logs/$n.rc" 2>/dev/null || echo "?")
  if [ "$rc" = 0 ]; then
    $PY - "$out_dir/$n/card.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
print(f"{c['name']:<11} ok       {c['steps']} steps  val_loss {c['val_loss']:.3f}  passkey_acc {c['passkey_acc']:.2f}"
      f"  {c['wall_seconds'] / 60:.1f} min on {c['device']}")
EOF
  elif [ "$rc" = 3 ]; then
    printf '%-11s stopped  %s\n' "$n" "$(tail -n 1 "build/train-logs/$n.log")"
    failed=1
  else
    printf '%-11s FAILED   exit %s: %s (build/train-logs/%s.log)\n' "$n" "$rc" "$(tail -n 1 "build/train-logs/$n.log" 2>/dev/null)" "$n"
    failed=1
  fi
done
exit $failed
