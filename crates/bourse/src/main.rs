//! The `bourse` command line. Each subcommand lives in its own module (the benchmarks
//! and the load generator in `bourse-bench`); this file only parses arguments and
//! dispatches.

mod cluster;
mod history;
mod journal;
mod md;
mod replay;
mod serve;

use std::path::Path;
use std::process::ExitCode;

use bourse_bench::{bench, loadgen};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "bourse", version, about = "Bourse: an open exchange core")]
struct Cli {
    #[command(subcommand)]
    command: CliCommand,
}

#[derive(Subcommand)]
enum CliCommand {
    /// Run the exchange: the durable engine with its REST gateway (data under ./data).
    Serve(serve::ServeArgs),
    /// A cluster of nodes: `cluster status` asks each how it sees the cluster.
    Cluster {
        #[command(subcommand)]
        cluster: cluster::ClusterCommand,
    },
    /// Replay a file of commands (the replay format) and print the events as JSON lines.
    Replay(replay::ReplayArgs),
    /// The journal tools: verify, inspect, export, repair.
    Journal {
        #[command(subcommand)]
        journal: journal::JournalCommand,
    },
    /// Load a running server (binary TCP order entry, open loop) and report latency
    /// from each request's scheduled send time.
    Loadgen(loadgen::LoadgenArgs),
    /// A stand-in server that answers every order at once, to measure `loadgen` alone.
    LoadgenSink(loadgen::sink::SinkArgs),
    /// The market-data feed: `md listen` joins it and rebuilds the books.
    Md {
        #[command(subcommand)]
        md: md::MdCommand,
    },
    /// The history (Parquet files of every order, trade and balance change): sync it
    /// from the journal, look up orders, trades and fills.
    History {
        #[command(subcommand)]
        history: history::HistoryCommand,
    },
    /// SQL over the history's files, e.g. `bourse query "SELECT count(*) FROM trades"`.
    Query(history::QueryArgs),
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        bench: bench::BenchCommand,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        CliCommand::Serve(args) => serve::run(args),
        CliCommand::Replay(args) => replay::run(&args),
        CliCommand::Cluster { cluster } => cluster::run(cluster),
        CliCommand::Journal { journal } => journal::run(journal),
        CliCommand::Bench { bench } => bench::run(bench),
        CliCommand::Md { md } => md::run(md),
        CliCommand::History { history } => history::run(history),
        CliCommand::Query(args) => history::query(&args),
        CliCommand::Loadgen(args) => loadgen::run(&args),
        CliCommand::LoadgenSink(args) => loadgen::sink::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("bourse: {message}");
            ExitCode::from(2)
        }
    }
}

/// A path argument where `-` means standard input.
fn describe(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "standard input".to_string()
    } else {
        path.display().to_string()
    }
}
