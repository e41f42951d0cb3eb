#!/usr/bin/env bash
# The device checks, as one prepared script for a lent GPU machine (after ../shared/scripts/gpu-stage's three
# copies, so that /tmp/gpu/env.sh exists there). Each part writes its log under $OUT (or /tmp/gpu-out).
#   bash scripts/gpu-check.sh tests [S] # the CI test command's pytest part, CUDA present (the default device)
#   bash scripts/gpu-check.sh timings   # the main job, the retrieval demo and the benchmarks, on cuda
#   bash scripts/gpu-check.sh encode [S] # the encode benchmark alone
#   bash scripts/gpu-check.sh recheck [S] # the tests that failed on the H100 on 2026-11-26 and those added since
#   bash scripts/gpu-check.sh retrieval # tokenizing ahead, then the retrieval benchmark on both data shapes, on cuda
#   bash scripts/gpu-check.sh lease [S] # retrieval, then recheck: one call for a 15-minute loan
#   bash scripts/gpu-check.sh exit [S]  # recheck with scripts/exit_report.py: what keeps its processes from exiting
#   bash scripts/gpu-check.sh workers   # prompts tokenized ahead by 1, 2, 4, 8 workers, a corpus shared among
#                                       # 1, 2, 4, 8 threads, then the tests they touch
#   bash scripts/gpu-check.sh threads   # where a retrieval evaluation's host time goes (profile_retrieval.py), the
#                                       # retrieval benchmark with the corpus's texts in 1 and 4 threads, the
#                                       # fidelity tests
# Every step has its own time limit, so one that hangs cannot take the others' time. The machine keeps nothing
# from one loan to the next, and goes back 30 s after a call: make gpu-stage's copies and these calls one right
# after the other. WordNet (Debian's wordnet-base, for the generator's tests) is not on that machine: copy
# /usr/share/wordnet/{data,index}.* and *.exc into .gpu/b/wordnet before the second copy, and have that copy put
# them in /usr/share/wordnet. Used on an H100 on 2026-11-26 and 27: docs/benchmarks.md has what it measured. On an
# H200 on 2026-11-28 the suite and the retrieval benchmark ran from a one-off script instead, whose cut-off run named
# no failure: use `tests`, which writes each failure to $OUT/failures.txt as it comes.
set -u
. /tmp/gpu/env.sh || { echo "no /tmp/gpu/env.sh: make gpu-stage's three copies first"; exit 2; }
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
repo=$PWD
# step NAME SECONDS COMMAND...: the command under its limit, stopped by SIGINT and killed 20 s later (under
# pytest-xdist no summary is sure to come: failures_as_they_come.py keeps each failure as it comes); its whole
# output in $OUT/NAME.log, its last lines here. The script's exit status is 1 when any step failed.
fail=0
step() { local name=$1 limit=$2 rc; shift 2; echo "== $name (limit ${limit}s): $*"; local t0=$SECONDS
  ( set -o pipefail; timeout -s INT -k 20 "$limit" "$@" 2>&1 | tee "$out/$name.log" | tail -25 ); rc=$?
  [ "$rc" -eq 0 ] || fail=1
  echo "== $name: rc=$rc in $((SECONDS - t0)) s"; }
# pytest_step NAME SECONDS ARGS...: pytest as a step, each failure written to $OUT/failures.txt as it comes
pytest_step() { local name=$1 limit=$2; shift 2
  PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$repo/scripts FAILURES_FILE=$out/failures.txt \
    step "$name" "$limit" python3 -m pytest -p failures_as_they_come -p no:cacheprovider -rfE "$@"; }
nvidia-smi -L
python3 -c "import torch, transformers, sentence_transformers as s; print('torch', torch.__version__, 'transformers',
transformers.__version__, 'sentence-transformers', s.__version__, torch.cuda.get_device_name())"
# what failed on the H100 on 2026-11-26, the tests added with the fixes (fixed since, not rerun there), and the
# retrieval metrics scored on the GPU (compared with sentence-transformers' evaluator on the GPU)
recheck_files() {
  echo tests/encoding/test_readouts.py tests/encoding/test_layers.py tests/encoding/test_ensemble.py \
    tests/search/test_demos.py tests/cli/test_cli_input.py tests/encoding/test_encoder.py tests/model/test_device.py \
    tests/encoding/test_fidelity.py tests/train/test_train.py tests/eval/test_ir_metrics.py \
    tests/tui/test_tui.py tests/test_benchmarks.py \
    "tests/search/test_postgres.py::test_a_worker_on_a_model_with_its_own_max_length_scores_as_the_search_does"; }
recheck() { pytest_step recheck "$1" -n 8 -q $(recheck_files); }
retrieval() {
  step tokenize_ahead 60 python3 benchmarks/tokenize_ahead.py --device cuda
  step tokenize_ahead_default 60 python3 benchmarks/tokenize_ahead.py --device cuda --model default
  step retrieval_speed 90 python3 benchmarks/retrieval_speed.py --device cuda --json "$out/retrieval_speed.json"
  step retrieval_passages 90 python3 benchmarks/retrieval_speed.py --device cuda --queries 259 --distractors 0 \
    --passages 8 --json "$out/retrieval_passages.json"
  step retrieval_bert_base 90 python3 benchmarks/retrieval_speed.py --device cuda --model bert-base --bf16 \
    --queries 259 --distractors 0 --passages 8 --repeats 3 --json "$out/retrieval_bert_base.json"; }
case ${1:-} in
tests)
  pytest_step pytest "${2:-300}" -m "not slow" -n 15 --dist loadfile -v --tb=short --timeout 120 --durations=15 ;;
timings)
  cd /tmp
  step greedy 200 python3 -m promptsearch greedy --model default --out /tmp/best.json
  step retrieval 90 python3 -m promptsearch retrieval --model default --data demo --out /tmp/retrieval.json
  cd "$repo"
  retrieval
  step encode_speed 120 python3 benchmarks/encode_speed.py --device cuda --templates 16 ;;
recheck)
  recheck "${2:-240}" ;;
retrieval)
  retrieval ;;
exit)  # the recheck, each process's threads and children written at its end; stacks dumped 20 s after the last test
  ( PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$repo/scripts EXIT_REPORT_DIR=$out timeout -s INT -k 10 "${2:-220}" \
      python3 -m pytest -p exit_report -p no:cacheprovider -rfE -n 8 -q $(recheck_files) >"$out/exit.log" 2>&1 ) &
  run=$!
  until grep -q '100%\]' "$out/exit.log" 2>/dev/null || ! kill -0 $run 2>/dev/null; do sleep 2; done
  sleep 20; pkill -USR1 -f 'exec\(eval' ; pkill -USR1 -f '^python3 -m pytest -p exit_report'; sleep 3
  tail -5 "$out/exit.log"; kill -0 $run 2>/dev/null && echo "still running 20 s after the last test"
  head -50 "$out"/exit-*.txt; pkill -INT -f '^python3 -m pytest -p exit_report'; sleep 5; pkill -9 -f 'exec\(eval'; wait ;;
lease)
  retrieval; recheck "${2:-200}" ;;
workers)
  step ahead_queries 70 python3 benchmarks/tokenize_ahead.py --device cuda --model default --ahead 1,2,4,8
  step ahead_corpus 70 python3 benchmarks/tokenize_ahead.py --device cuda --model default --ahead 1,2,4,8 --corpus \
    --repeats 3
  pytest_step touched "${2:-150}" -n 8 -q tests/encoding/test_fidelity.py tests/test_benchmarks.py \
    tests/eval/test_ir_metrics.py tests/eval/test_retrieval_task.py tests/encoding/test_encoder.py ;;
threads)
  step profile 90 python3 scripts/profile_retrieval.py --device cuda --top 30
  step retrieval_speed 120 python3 benchmarks/retrieval_speed.py --device cuda --threads 1,4 --repeats 4 \
    --json "$out/retrieval_speed.json"
  step retrieval_passages 120 python3 benchmarks/retrieval_speed.py --device cuda --queries 259 --distractors 0 \
    --passages 8 --threads 1,4 --repeats 4 --json "$out/retrieval_passages.json"
  pytest_step fidelity "${2:-120}" -n 8 -q tests/encoding/test_fidelity.py ;;
encode)
  step encode_speed "${2:-120}" python3 benchmarks/encode_speed.py --device cuda --templates 16 ;;
*) echo "usage: bash scripts/gpu-check.sh tests [seconds] | timings | encode [seconds] | recheck [seconds] |" \
     "retrieval | lease [seconds] | exit [seconds] | workers [seconds] | threads [seconds]"; exit 2 ;;
esac
exit $fail
