#!/bin/bash
# Each analysis command as a whole process, two trees alternating command by command, each on its own fresh
# copy of a store, the commands run twice in sequence (pass 1: the first commands after an ingest; pass 2: all
# again on the same commit). Prints: pass tree command cpu_user cpu_sys peak_rss_kb load_1min.
#   bench/analyses/fixed_cost.sh BASE_TREE NEW_TREE STORE [PYTHON]
# e.g. git archive main | tar -x -C /tmp/base; bench/analyses/fixed_cost.sh /tmp/base $PWD /path/to/sample-store
set -u
BASE=$1 NEW=$2 STORE=$3 PY=${4:-python}
WORK=$(mktemp -d)
for t in base new; do cp -a "$STORE" "$WORK/store-$t"; done
run() {  # tree label command
  local tree=$1 label=$2 c=$3 args
  case $c in
    compare) args="compare --cohort-by version --before 0.15.1 --after 0.20.1 --format json";;
    report) args="report --since 7d --format json --out $WORK/report-$label.json";;
    analyze) args="analyze";;
    *) args="$c --format json";;
  esac
  (cd "$tree" && PYTHONPATH=$tree COLUMNS=200 /usr/bin/time -f "%U %S %M" -o "$WORK/time" "$PY" -c \
    'import sys; from attribution.cli import main; sys.argv[0]="attribution"; main()' \
    $args --store "$WORK/store-$label" > "$WORK/out-$label-$c-$pass.txt" 2> "$WORK/err-$label-$c-$pass.txt")
  read -r u s m < <(tail -1 "$WORK/time")
  echo "$pass $label $c $u $s $m $(cut -d' ' -f1 /proc/loadavg)"
}
for pass in 1 2; do
  for c in lengths concurrency latency thresholds capacity status analyze compare memsplit report; do
    run "$BASE" base $c
    run "$NEW" new $c
  done
done
echo "outputs in $WORK"
