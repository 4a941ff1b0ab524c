//! `bourse history` and `bourse query`: the history's files without a running server.
//! `history sync` follows the journal of a data directory to its end (what `bourse
//! serve` does as it runs; for a history rebuilt from scratch, or caught up after a
//! crash while the server is down); the lookups read its index; `query` runs SQL over
//! its files (`docs/history.md`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use bourse_history::{Follower, HistoryConfig, HistoryStats, Index};
use bourse_journal::{scan_journal, TailPolicy};
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum HistoryCommand {
    /// Follow the journal of a stopped server to its end and commit the history.
    Sync(SyncArgs),
    /// Where the history stands: the last committed command and the rows per table.
    Status(DataArgs),
    /// An order's latest state, by the exchange's order id.
    Order {
        #[command(flatten)]
        data: DataArgs,
        order_id: u64,
    },
    /// A trade by its id (`seq-index`).
    Trade {
        #[command(flatten)]
        data: DataArgs,
        trade_id: String,
    },
    /// An account's most recent fills, newest first.
    Fills {
        #[command(flatten)]
        data: DataArgs,
        account: String,
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
}

#[derive(Args)]
pub struct DataArgs {
    /// The server's data directory.
    #[arg(long, default_value = "data")]
    data_dir: PathBuf,
}

#[derive(Args)]
pub struct SyncArgs {
    #[command(flatten)]
    data: DataArgs,
    /// Commit whenever this many rows wait (smaller: more, smaller files).
    #[arg(long, default_value_t = 1_000_000)]
    commit_rows: usize,
    /// Stop after this command (default: the journal's end).
    #[arg(long)]
    until: Option<u64>,
}

pub fn run(command: HistoryCommand) -> Result<(), String> {
    match command {
        HistoryCommand::Sync(args) => sync(&args),
        HistoryCommand::Status(data) => status(&data),
        HistoryCommand::Order { data, order_id } => print_value(
            open_index(&data)?
                .order(bourse_core::OrderId(order_id))
                .map_err(|error| error.to_string())?,
            "order",
        ),
        HistoryCommand::Trade { data, trade_id } => {
            let (seq, index) = trade_id
                .split_once('-')
                .and_then(|(seq, index)| {
                    Some((bourse_core::Seq(seq.parse().ok()?), index.parse().ok()?))
                })
                .ok_or_else(|| format!("trade id {trade_id:?} is not seq-index"))?;
            print_value(
                open_index(&data)?.trade(seq, index).map_err(|error| error.to_string())?,
                "trade",
            )
        }
        HistoryCommand::Fills { data, account, limit } => {
            let fills = open_index(&data)?
                .recent_fills(&account, limit)
                .map_err(|error| error.to_string())?;
            for fill in fills {
                println!("{fill}");
            }
            Ok(())
        }
    }
}

fn print_value(value: Option<serde_json::Value>, what: &str) -> Result<(), String> {
    match value {
        Some(value) => {
            println!("{value}");
            Ok(())
        }
        None => Err(format!("no such {what} in the history")),
    }
}

fn open_index(data: &DataArgs) -> Result<Index, String> {
    let dir = data.data_dir.join("history").join("index");
    if !dir.exists() {
        return Err(format!("{} has no history", data.data_dir.display()));
    }
    Index::open(&dir)
        .map_err(|error| format!("{error} (is a server running on this data directory?)"))
}

fn sync(args: &SyncArgs) -> Result<(), String> {
    let data_dir = &args.data.data_dir;
    let mut config = HistoryConfig::under(data_dir);
    config.commit_rows = args.commit_rows.max(1);
    let journal_end = scan_journal(&config.journal_dir, TailPolicy::ReadOnly, |_, _| Ok(()))
        .map_err(|error| error.to_string())?
        .next_seq
        .previous()
        .0;
    let until = args.until.map_or(journal_end, |until| until.min(journal_end));
    let stats = Arc::new(HistoryStats::default());
    let started = Instant::now();
    let mut follower = Follower::open(config, Arc::clone(&stats))
        .map_err(|error| format!("the history does not open ({}): {error}", error.code()))?;
    let from = follower.committed_seq();
    follower.catch_up(bourse_core::Seq(until)).map_err(|error| error.to_string())?;
    follower.commit().map_err(|error| error.to_string())?;
    let seconds = started.elapsed().as_secs_f64();
    let rows = stats.rows.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "bourse: history committed to {} (commands {}..={until}, {rows} rows, {} files, {:.2} s)",
        follower.committed_seq(),
        from + 1,
        stats.files.load(std::sync::atomic::Ordering::Relaxed),
        seconds
    );
    // Then the small files are merged, as a running server does while it is quiet.
    let merging = Instant::now();
    let (merges, replaced, _) =
        follower.merge_all_small_files().map_err(|error| error.to_string())?;
    if merges > 0 {
        eprintln!(
            "bourse: {replaced} small files merged into {merges} ({:.2} s)",
            merging.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

fn status(data: &DataArgs) -> Result<(), String> {
    let path = data.data_dir.join("history").join("checkpoint.json");
    let text =
        std::fs::read_to_string(&path).map_err(|error| format!("{}: {error}", path.display()))?;
    let checkpoint: bourse_history::Checkpoint =
        serde_json::from_str(&text).map_err(|error| format!("{}: {error}", path.display()))?;
    println!("committed_seq {}", checkpoint.committed_seq);
    println!("first_seq {}", checkpoint.first_seq);
    for (table, rows) in &checkpoint.rows {
        println!("rows {table} {rows}");
    }
    Ok(())
}

/// `bourse query`: SQL over the history's files.
#[derive(Args)]
pub struct QueryArgs {
    /// The query, e.g. "SELECT symbol, count(*) FROM trades GROUP BY symbol".
    sql: String,
    #[command(flatten)]
    data: DataArgs,
    /// table, csv or json.
    #[arg(long, default_value = "table")]
    format: String,
    /// Cores the query may use [default: all].
    #[arg(long)]
    threads: Option<usize>,
}

#[cfg(feature = "sql")]
pub fn query(args: &QueryArgs) -> Result<(), String> {
    let format = bourse_query::Format::parse(&args.format)
        .ok_or_else(|| format!("unknown format {:?}: table, csv or json", args.format))?;
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |cores| cores.get()));
    let history_dir = args.data.data_dir.join("history");
    let sql =
        bourse_query::HistorySql::open(&history_dir, threads).map_err(|error| error.to_string())?;
    let answer = sql.query_rendered(&args.sql, format).map_err(|error| error.to_string())?;
    print!("{answer}");
    if format == bourse_query::Format::Table {
        println!();
    }
    Ok(())
}

#[cfg(not(feature = "sql"))]
pub fn query(_: &QueryArgs) -> Result<(), String> {
    Err("this build of bourse has no query engine (build with the default feature `sql`)"
        .to_string())
}

/// The SQL service `bourse serve` gives its admin API.
#[cfg(feature = "sql")]
pub fn sql_factory() -> Option<bourse_server::services::history_access::SqlFactory> {
    struct Service(bourse_query::HistorySql);
    impl bourse_server::services::history_access::SqlService for Service {
        fn query(
            &self,
            query: &str,
            format: &str,
        ) -> Result<
            bourse_server::services::history_access::SqlAnswer,
            bourse_server::services::history_access::SqlError,
        > {
            let format = bourse_query::Format::parse(format).unwrap_or(bourse_query::Format::Json);
            self.0
                .query_rendered(query, format)
                .map(|body| bourse_server::services::history_access::SqlAnswer {
                    content_type: format.content_type(),
                    body,
                })
                .map_err(|error| bourse_server::services::history_access::SqlError {
                    code: error.code,
                    message: error.message,
                })
        }
    }
    Some(Box::new(|history_dir: &std::path::Path| {
        let sql =
            bourse_query::HistorySql::open(history_dir, 1).map_err(|error| error.to_string())?;
        Ok(Arc::new(Service(sql)) as Arc<dyn bourse_server::services::history_access::SqlService>)
    }))
}

#[cfg(not(feature = "sql"))]
pub fn sql_factory() -> Option<bourse_server::services::history_access::SqlFactory> {
    None
}
