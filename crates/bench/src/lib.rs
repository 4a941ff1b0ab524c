//! Bourse's measurements, apart from the product they measure: the `bourse bench`
//! benchmarks (`bench`: the core alone, the durable pipeline, recovery, snapshots,
//! crashes, memory, market data, the history, WebSocket fan-out, and `compare` for
//! regressions) and the load generator (`loadgen`: order entry over binary TCP, REST
//! and WebSocket against a running server, and `loadgen-sink`, the stand-in server that
//! measures the tool alone). `input` reads replay-format command files (also for
//! `bourse replay`); `host` names the machine a figure came from. The `bourse` binary parses their arguments (the clap types are
//! here) and calls them.
//!
//! It must never be a dependency of the product's crates, and the load generator never
//! reaches into the server (`bourse-server`): it speaks to it only through the
//! protocols, with the codec and the signing of `bourse-protocol`, as any client would.
//! No timed unit tests: figures come from the commands and go to `docs/benchmarks.md`
//! with the command that produced them.

pub mod bench;
pub mod host;
pub mod input;
pub mod loadgen;
