#!/usr/bin/env bash
# Builds `bourse` with profile-guided optimisation (PGO): the `dist` build, compiled once
# with counters, trained, then compiled again using what the counters saw.
#
#   scripts/dist-pgo.sh                # -> $CARGO_TARGET_DIR/pgo-use/dist/bourse
#   FEATURES=--no-default-features scripts/dist-pgo.sh   # without SQL (a shorter build)
#   TARGET_CPU=native scripts/dist-pgo.sh   # for this machine's CPU only (`-Ctarget-cpu`)
#
# The training is generated flows only, never a stream a published figure is measured
# on: the core on `ec-mix`, `ec-mix100` and `ec-mix-futures` (`bourse bench engine`)
# with a seed no figure uses (`TRAINING_SEED`), then `bourse serve --demo` driven by
# `bourse loadgen` over binary TCP, REST and WebSocket. Every part the figures quote therefore runs while the counters count, so
# no measured path is left to LLVM's "never ran, so cold" default.
#
# Needs llvm-profdata matching rustc's LLVM: `rustup component add llvm-tools`.
# Two full `dist` builds: about twice `cargo build --profile dist -p bourse`.
# docs/benchmarks.md ("Profile-guided optimisation") has what it buys and where.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$here/target}
features=${FEATURES:-}
# A binary built for one CPU model may not start on another: for a venue's own hosts, and
# for figures named as such. Its builds go to their own directories.
target_cpu=${TARGET_CPU:-}
cpu_flag=
suffix=
if [ -n "$target_cpu" ]; then
  cpu_flag="-Ctarget-cpu=$target_cpu"
  suffix="-$target_cpu"
fi
host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
  echo "dist-pgo: $profdata is missing; run: rustup component add llvm-tools" >&2
  exit 1
fi

# The figures in docs/benchmarks.md use the generators' default seed, 1.
TRAINING_SEED=2
work=$(mktemp -d)
# The counters' directory stays the same from run to run, so that the instrumented build
# is reused when nothing changed (cargo rebuilds everything when RUSTFLAGS change).
raw="$target/pgo-generate$suffix/raw"
rm -rf "$raw"
serve_pid=
cleanup() {
  if [ -n "$serve_pid" ]; then kill "$serve_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "dist-pgo: 1/4 the instrumented build" >&2
RUSTFLAGS="-Cprofile-generate=$raw $cpu_flag" \
  cargo build --profile dist -p bourse $features --target-dir "$target/pgo-generate$suffix" \
  --manifest-path "$here/Cargo.toml"
trained="$target/pgo-generate$suffix/dist/bourse"

echo "dist-pgo: 2/4 training the core (generated workloads)" >&2
for workload in ec-mix ec-mix100 ec-mix-futures; do
  "$trained" bench engine --workload "$workload" --commands 1000000 --repeat 2 \
    --seed "$TRAINING_SEED" >&2
done

echo "dist-pgo: 3/4 training the server and its gateways" >&2
mkdir -p "$work/serve"
(cd "$work/serve" && exec "$trained" serve --demo --http 127.0.0.1:18080 --tcp 127.0.0.1:19090 \
  --fix 127.0.0.1:19876 --md-snapshot 127.0.0.1:19091 --md-retransmit 127.0.0.1:19092 \
  >"$work/serve.log" 2>&1) &
serve_pid=$!
for _ in $(seq 1 100); do
  [ -f "$work/serve/data/server/admin.key" ] && break
  sleep 0.1
done
admin=(--admin-key-file "$work/serve/data/server/admin.key" --http 127.0.0.1:18080 --tcp 127.0.0.1:19090)
"$trained" loadgen --protocol tcp --rate 100000 --connections 2 --duration 8 "${admin[@]}" >&2
"$trained" loadgen --protocol rest --rate 20000 --connections 2 --duration 5 "${admin[@]}" >&2
"$trained" loadgen --protocol ws --rate 20000 --connections 2 --duration 5 "${admin[@]}" >&2
# A clean stop writes the counters (SIGTERM: the server's graceful shutdown).
kill -TERM "$serve_pid"
wait "$serve_pid" || true
serve_pid=

"$profdata" merge -o "$work/bourse.profdata" "$raw"
# Named by its contents: cargo does not look inside the file RUSTFLAGS names, so a new
# profile must be a new path (everything is rebuilt with it), and the same profile the
# same path (nothing is).
mkdir -p "$target/pgo-use$suffix"
profile="$target/pgo-use$suffix/bourse-$(sha256sum "$work/bourse.profdata" | cut -c1-16).profdata"
cp "$work/bourse.profdata" "$profile"

echo "dist-pgo: 4/4 the optimised build" >&2
RUSTFLAGS="-Cprofile-use=$profile $cpu_flag" \
  cargo build --profile dist -p bourse $features --target-dir "$target/pgo-use$suffix" \
  --manifest-path "$here/Cargo.toml"
echo "$target/pgo-use$suffix/dist/bourse"
