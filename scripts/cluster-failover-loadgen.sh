#!/bin/bash
# `bourse loadgen --follow-leader` across a SIGKILL of the leader (docs/benchmarks.md):
# starts `bourse serve --cluster 3 --no-history`, runs the load generator against a
# follower's REST address (it finds the leader and follows it) at RATE orders/s for
# DURATION seconds, kills the leader with SIGKILL after KILL_AFTER seconds, and prints
# what the load generator saw: every order answered, the reconnections, the orders
# sent again, and the latency (from each order's due time, so the failover is in it).
# usage: scripts/cluster-failover-loadgen.sh RATE [DURATION] [KILL_AFTER]   (BOURSE: the binary)
set -u
B=${BOURSE:-${CARGO_TARGET_DIR:-$HOME/.cache/bourse-target}/release/bourse}
RATE=$1; DUR=${2:-20}; KILL_AFTER=${3:-8}
source "$(dirname "$0")/cluster-lib.sh"
D=/tmp/benchrun-failover; rm -rf $D; mkdir -p $D; cd $D
start_local_cluster
F=$(( L % 3 + 1 ))
$B loadgen --follow-leader --http 127.0.0.1:81${F}0 --admin-key-file data/node-$F/server/admin.key \
  --rate $RATE --duration $DUR --connections 2 --json > result.json 2> loadgen.err &
LOADGEN=$!
sleep $KILL_AFTER
kill -9 $PID
echo "killed node $L (pid $PID) at $(date -u +%T.%N)"
wait $LOADGEN; echo "loadgen exit status $?"
python3 - <<'PY'
import json
r=json.load(open('result.json'))
print({k: r[k] for k in ['sent','ok','rejected','errors','throughput_per_sec','p50_us','p99_us','p99_9_us','max_us','follow_leader','rejected_by_reason']})
print('seconds:', [(t['second'], t['completed'], t['p99_us']) for t in r['timeline']])
PY
kill -TERM $LAUNCHER; wait $LAUNCHER 2>/dev/null
