#!/usr/bin/env python3
"""How far a follower's applied state is behind the leader's (docs/cluster.md): reads
GET /v1/cluster on the leader, the follower and the leader again, every 10 ms, and prints
the follower's lag in commands (against the mean of the two leader readings).

usage: scripts/cluster-lag.py LEADER_HTTP FOLLOWER_HTTP SECONDS
"""
import json, sys, time, urllib.request, statistics
if len(sys.argv) != 4:
    sys.exit(__doc__)
leader, follower, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
def seq(h):
    return json.load(urllib.request.urlopen(f"http://{h}/v1/cluster", timeout=2))["applied_seq"]
lags=[]; end=time.time()+secs
while time.time()<end:
    a=seq(leader); f=seq(follower); b=seq(leader)
    if b>a: lags.append((a+b)/2-f)
    time.sleep(0.01)
lags.sort()
q=lambda p: lags[min(len(lags)-1,int(p*len(lags)))]
print(f"samples {len(lags)} lag commands p50 {q(0.5):.0f} p99 {q(0.99):.0f} max {lags[-1]:.0f}")
