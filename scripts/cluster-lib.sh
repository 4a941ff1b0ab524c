# Shared by the cluster scripts (sourced): starts `bourse serve --cluster 3 --no-history`
# in the current directory and sets LAUNCHER (its pid), L (the leader's id) and PID
# (the leader's process). B: the binary.
start_local_cluster() {
  $B serve --cluster 3 --no-history > serve.log 2>&1 &
  LAUNCHER=$!
  sleep 6
  for i in $(seq 1 100); do
    L=$($B cluster status --config data/cluster/cluster.toml 2>/dev/null | awk '$3=="leader"{print $1}')
    [ -n "$L" ] && break; sleep 0.2
  done
  PID=$(grep "node $L (pid" serve.log | sed 's/.*pid \([0-9]*\).*/\1/')
}
