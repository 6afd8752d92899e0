#!/usr/bin/env bash
# The one GPU check: every GPU rule (rules declaring `resources: gpu=1`) at the smoke size on
# CUDA and on the CPU, the numbers compared within stated tolerances, then the paper-size
# benchmarks timed on CUDA. Sized for at most ~8 minutes on one GPU, not yet measured: the two
# workflow runs side by side are cut at WORKFLOW_TIMEOUT (270 s), each of the 8 benchmarks at
# BENCH_TIMEOUT (25 s; a cut one is reported, not hidden). Run from anywhere, in the project's
# environment with a CUDA build of torch (README, "On a GPU"):
#
#   benchmarks/gpu_check.sh            # report in results/gpu_check/ (REPORT=folder to change)
#
# The data are prepared first, on the CPU (benchmarks/gpu_prepare.py): every raw file is taken from
# FACTSTORE_DATA_MIRROR where that folder holds it, else downloaded and checksum-verified (one line
# per file says so), into one folder both runs read as their mirror. An offline machine needs the
# mirror (export FACTSTORE_DATA_MIRROR=/path/to/mirror); a file no source gives stops the check
# there, in one line. PREPARE_ONLY=1 stops after this preparation (no GPU needed). The dilution
# benchmark prepares its Wikipedia paragraphs from the installed package where data/processed/
# lacks them (benchmarks/common.py).
#
# Tolerances (benchmarks/gpu_compare.py): settings, seeds and integers found by a search equal;
# floats within |cuda - cpu| <= 0.02 + 0.05 |cpu| (float32 rounds differently on CUDA, so
# trained models drift; one point of accuracy or 5% of a fitted value at the smoke scale).
# Exit status: 0 when both runs finished, every table agrees and no benchmark crashed (one cut
# at its time cap is a timing, not a failure), else 1; the report says which. Record the result in docs/performance.md.
set -uo pipefail
# An absolute mirror path (the runs go in copies of the checkout elsewhere); a mirror that is not
# a folder is dropped, saying so, and the files are downloaded.
if [ -n "${FACTSTORE_DATA_MIRROR:-}" ]; then
  if [ -d "$FACTSTORE_DATA_MIRROR" ]; then
    export FACTSTORE_DATA_MIRROR="$(cd "$FACTSTORE_DATA_MIRROR" && pwd)"
  else
    echo "gpu_check: the data mirror $FACTSTORE_DATA_MIRROR (FACTSTORE_DATA_MIRROR) is not a folder: the data files are downloaded" >&2
    unset FACTSTORE_DATA_MIRROR
  fi
fi
cd "$(dirname "$0")/.."
ROOT="$PWD"
REPORT="${REPORT:-$ROOT/results/gpu_check}"
BENCH_TIMEOUT="${BENCH_TIMEOUT:-25}"
WORKFLOW_TIMEOUT="${WORKFLOW_TIMEOUT:-270}"
CORES="$(nproc)"
export PYTHONUNBUFFERED=1
mkdir -p "$REPORT"
WORK="$(mktemp -d)"
status=0

# The data, on the CPU: one verified copy of every raw file, the mirror of both runs.
python benchmarks/gpu_prepare.py "$WORK/data" || { rm -rf "$WORK"; exit 1; }
export FACTSTORE_DATA_MIRROR="$WORK/data"
if [ "${PREPARE_ONLY:-0}" = 1 ]; then
  echo "gpu_check: data prepared in $WORK/data ($(find "$WORK/data" -type f | wc -l) files); PREPARE_ONLY=1: stopping here"
  rm -rf "$WORK"
  exit 0
fi

python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
  || { echo "no CUDA device visible to torch ($(python -c 'import torch; print(torch.__version__)')): install torch's CUDA build" >&2; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$REPORT/gpu.txt" 2>&1
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" >> "$REPORT/gpu.txt"

# The GPU rules, read from the rule files as tests/test_workflow.py reads them.
GPU_RULES=$(python - <<'PY'
import re, pathlib
rules = set()
for path in pathlib.Path("workflow/rules").glob("*.smk"):
    for block in re.split(r"^(?=rule )", path.read_text(), flags=re.M):
        name = re.match(r"rule (\w+):", block)
        if name and re.search(r"^    resources:\n(?:        .*\n)*?        gpu=", block, flags=re.M):
            rules.add(name.group(1))
print(" ".join(sorted(rules)))
PY
)
echo "GPU rules: $GPU_RULES" | tee "$REPORT/summary.txt"

# Two clean copies of the checkout (tracked and not-ignored files), each its own git repository
# so the provenance sidecars have a commit; the CPU and CUDA runs go side by side.
for device in cpu cuda; do
  mkdir -p "$WORK/$device"
  git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$WORK/$device"
  (cd "$WORK/$device" && git init -q && git add -A && git -c user.name=gpu-check -c user.email=gpu@check commit -qm check)
done
started=$SECONDS
# The CUDA run lets 4 GPU jobs share the one GPU (smoke sizes are small); the CPU run uses the
# rest of the cores with FACTSTORE_DEVICE=cpu.
(cd "$WORK/cpu" && FACTSTORE_DEVICE=cpu timeout "$WORKFLOW_TIMEOUT" python -m snakemake all \
   --configfile config/smoke.yaml --cores $((CORES > 6 ? CORES - 4 : 2)) --until $GPU_RULES >"$REPORT/cpu_run.log" 2>&1) &
cpu_pid=$!
(cd "$WORK/cuda" && FACTSTORE_DEVICE=cuda timeout "$WORKFLOW_TIMEOUT" python -m snakemake all \
   --configfile config/smoke.yaml --cores 4 --resources gpu=4 --until $GPU_RULES >"$REPORT/cuda_run.log" 2>&1)
cuda_rc=$?
wait $cpu_pid; cpu_rc=$?
echo "workflow runs: cpu exit $cpu_rc, cuda exit $cuda_rc, $((SECONDS - started)) s (logs: cpu_run.log, cuda_run.log)" | tee -a "$REPORT/summary.txt"
if [ $cpu_rc -ne 0 ] || [ $cuda_rc -ne 0 ]; then
  status=1
else
  # Every table a GPU rule wrote, CPU against CUDA.
  TABLES=$(cd "$WORK/cpu" && python -m snakemake --nolock --summary all --configfile config/smoke.yaml 2>/dev/null \
    | awk -F'\t' -v rules=" $GPU_RULES " 'index(rules, " " $3 " ") && $1 ~ /\.csv$/ {print $1}')
  python benchmarks/gpu_compare.py "$WORK/cpu" "$WORK/cuda" $TABLES | tee "$REPORT/compare.txt" || status=1
  # Where the CUDA run's GPU rules really ran (their sidecars' device).
  (cd "$WORK/cuda" && python -c "import collections, json, sys; print('CUDA run, devices of the compared tables:', dict(collections.Counter(str(json.load(open(f + '.prov.json'))['device']) for f in sys.argv[1:])))" $TABLES) | tee -a "$REPORT/compare.txt"
fi

# The paper-size benchmarks on CUDA, each cut at BENCH_TIMEOUT seconds (a cut one is reported).
benchmarks=(
  "assoc:python benchmarks/bench_assoc.py --device cuda"
  "ntk:python benchmarks/bench_ntk.py --device cuda"
  "attention:python benchmarks/bench_attention.py --device cuda"
  "mlp:python benchmarks/bench_mlp.py --device cuda --sections construction,gd_search"
  "committee:python benchmarks/bench_committee.py --device cuda"
  "dilution:python benchmarks/bench_dilution.py --device cuda --config config/paper.yaml"
  "usability:python benchmarks/bench_usability.py --device cuda --sizes paper"
  "editing:python benchmarks/bench_editing.py --device cuda --sizes paper"
)
for entry in "${benchmarks[@]}"; do
  name="${entry%%:*}"
  begin=$SECONDS
  timeout "$BENCH_TIMEOUT" ${entry#*:} >"$REPORT/bench_$name.log" 2>&1
  rc=$?
  case $rc in
    0) outcome="done" ;;
    124) outcome="longer than ${BENCH_TIMEOUT} s (cut; a time, not a failure)" ;;
    *) outcome="failed (exit $rc)"; status=1 ;;
  esac
  echo "benchmark $name: $outcome, $((SECONDS - begin)) s; last line: $(tail -n 1 "$REPORT/bench_$name.log")" | tee -a "$REPORT/summary.txt"
done
rm -rf "$WORK"
echo "gpu_check: $([ $status = 0 ] && echo PASS || echo FAIL), $SECONDS s in all; report in $REPORT" | tee -a "$REPORT/summary.txt"
exit $status
