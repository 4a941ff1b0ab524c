#!/bin/bash
# Replicated order entry over the binary gateway against one node (docs/benchmarks.md):
# starts `bourse serve --cluster 3` (or one node), finds the leader, runs `bourse
# loadgen` on its binary port at RATE orders/s for DURATION seconds, prints the figures.
# (SINGLE_FLAGS= runs the one node with its feed on, as the cluster has it.)
# usage: scripts/bench-cluster.sh cluster|single RATE [DURATION]   (BOURSE: the binary)
set -u
B=${BOURSE:-${CARGO_TARGET_DIR:-$HOME/.cache/bourse-target}/release/bourse}
MODE=$1; RATE=$2; DUR=${3:-20}
source "$(dirname "$0")/cluster-lib.sh"
D=/tmp/benchrun-$MODE; rm -rf $D; mkdir -p $D; cd $D
if [ $MODE = cluster ]; then
  start_local_cluster
  HTTP=127.0.0.1:81${L}0; TCP=127.0.0.1:81${L}1
  KEY=data/node-$L/server/admin.key
else
  $B serve --no-history ${SINGLE_FLAGS---no-marketdata} --http 127.0.0.1:8210 --tcp 127.0.0.1:8211 --fix 127.0.0.1:8212 > serve.log 2>&1 &
  LAUNCHER=$!; PID=$LAUNCHER
  sleep 5
  HTTP=127.0.0.1:8210; TCP=127.0.0.1:8211; KEY=data/server/admin.key
fi
$B loadgen --protocol tcp --http $HTTP --tcp $TCP --admin-key-file $KEY --rate $RATE --duration $DUR --connections 2 --watch-pid $PID --json > result.json 2> loadgen.err
python3 - <<'PY'
import json
r=json.load(open('result.json'))
def find(d,keys):
    out={}
    for k,v in d.items():
        if isinstance(v,dict): out.update({k+'.'+a:b for a,b in find(v,keys).items()})
        elif any(x in k for x in keys): out[k]=v
    return out
for k,v in find(r,['p50','p99','sent','throughput','errors','share_of_one']).items(): print(k,v)
PY
kill -TERM $LAUNCHER; wait $LAUNCHER 2>/dev/null
