//! SQL over a history made from the sample trading: every `sql` block of
//! `docs/history.md` runs (those on futures over the futures sample, answering exactly
//! the output the doc shows); counts, sums and an account's balance at a past time
//! agree with a plain venue over the same commands; bad SQL is an error with its code;
//! the three formats render.

use std::path::Path;
use std::sync::Arc;

use bourse_core::format::parse_line;
use bourse_core::{Event, Exchange, ExchangeConfig, Seq, TimestampNs, Venue};
use bourse_history::sample::{futures_trading, trading, write_journal};
use bourse_history::{Follower, HistoryConfig, HistoryStats};
use bourse_query::{render, Format, HistorySql};
use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{Decimal128Type, Int64Type};

fn sample_history(data: &Path, commands: usize) -> Vec<(String, u64)> {
    history_of(data, trading(7, commands))
}

fn history_of(data: &Path, lines: Vec<(String, u64)>) -> Vec<(String, u64)> {
    write_journal(&data.join("journal"), &lines).unwrap();
    let mut follower =
        Follower::open(HistoryConfig::under(data), Arc::new(HistoryStats::default())).unwrap();
    follower.catch_up(Seq(lines.len() as u64)).unwrap();
    follower.commit().unwrap();
    lines
}

fn one_decimal(sql: &HistorySql, query: &str) -> i128 {
    let batches = sql.query(query).unwrap();
    let column = batches[0].column(0).as_primitive::<Decimal128Type>();
    assert_eq!(column.len(), 1);
    column.value(0)
}

fn one_count(sql: &HistorySql, query: &str) -> i64 {
    let batches = sql.query(query).unwrap();
    batches[0].column(0).as_primitive::<Int64Type>().value(0)
}

/// The doc's `sql` blocks, each with the `text` block right after it (the answer it
/// shows), if there is one.
fn doc_blocks() -> Vec<(String, Option<String>)> {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/history.md"))
            .unwrap();
    let mut blocks: Vec<(String, String)> = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in doc.lines() {
        match (&mut current, line.trim_end()) {
            (None, fence) if fence.starts_with("```") => {
                current = Some((fence[3..].to_string(), String::new()));
            }
            (Some(_), "```") => blocks.extend(current.take()),
            (Some((_, body)), text) => {
                body.push_str(text);
                body.push('\n');
            }
            _ => {}
        }
    }
    let mut queries = Vec::new();
    for (index, (language, body)) in blocks.iter().enumerate() {
        if language == "sql" {
            let shown = blocks
                .get(index + 1)
                .filter(|(language, _)| language == "text")
                .map(|(_, body)| body.clone());
            queries.push((body.clone(), shown));
        }
    }
    queries
}

fn doc_queries() -> Vec<String> {
    doc_blocks().into_iter().map(|(query, _)| query).collect()
}

#[test]
fn the_documented_queries_run_and_answer() {
    let dir = tempfile::tempdir().unwrap();
    sample_history(dir.path(), 5_000);
    let sql = HistorySql::open(&dir.path().join("history"), 2).unwrap();
    let queries = doc_queries();
    assert!(queries.len() >= 7, "the doc's sql blocks: {}", queries.len());
    for query in queries {
        // DuckDB's read_parquet is for DuckDB; the spot sample settles nothing (the
        // futures queries run over the futures sample, below).
        if query.contains("read_parquet") || query.contains("settlements") {
            continue;
        }
        let batches = sql.query(&query).unwrap_or_else(|error| panic!("{error}\n{query}"));
        let rows: usize = batches.iter().map(|batch| batch.num_rows()).sum();
        assert!(rows > 0, "no rows from\n{query}");
    }
}

#[test]
fn the_documented_futures_queries_answer_what_the_doc_shows() {
    let dir = tempfile::tempdir().unwrap();
    history_of(dir.path(), futures_trading());
    let sql = HistorySql::open(&dir.path().join("history"), 2).unwrap();
    let futures: Vec<(String, Option<String>)> =
        doc_blocks().into_iter().filter(|(query, _)| query.contains("settlements")).collect();
    assert!(!futures.is_empty(), "no futures query in the doc");
    for (query, shown) in futures {
        let answer = sql.query_rendered(&query, Format::Table).unwrap();
        let shown =
            shown.unwrap_or_else(|| panic!("no answer shown after\n{query}\nit is\n{answer}"));
        assert_eq!(answer.trim(), shown.trim(), "{query}");
    }
    // The settlements table over SQL: one row per marked side, with its partitions.
    let batches = sql
        .query("SELECT count(*), sum(pnl), count(DISTINCT date), min(instrument) FROM settlements")
        .unwrap();
    let batch = &batches[0];
    assert_eq!(batch.column(0).as_primitive::<Int64Type>().value(0), 6);
    assert_eq!(batch.column(1).as_primitive::<Decimal128Type>().value(0), 4_000 * 10i128.pow(18));
    assert_eq!(batch.column(2).as_primitive::<Int64Type>().value(0), 2);
    assert_eq!(batch.column(3).as_string::<i32>().value(0), "CU");
}

#[test]
fn answers_agree_with_the_state_machine() {
    let dir = tempfile::tempdir().unwrap();
    let lines = sample_history(dir.path(), 5_000);
    let sql = HistorySql::open(&dir.path().join("history"), 2).unwrap();

    // The model: a plain venue, and alice's balances as of 2026-11-25T12:00:00Z.
    let cutoff = 1_795_478_400_000_000_000u64 + 36 * 3_600_000_000_000;
    let mut venue = Venue::new(Exchange::new(ExchangeConfig::default()), true);
    let (mut trades, mut qty_units) = (0i64, 0i128);
    let mut alice_usd_at_cutoff = None;
    for (index, (line, ts)) in lines.iter().enumerate() {
        if *ts > cutoff && alice_usd_at_cutoff.is_none() {
            let exchange = venue.exchange();
            let alice = exchange.ledger().find_account("alice").unwrap();
            let usd = exchange.find_asset("USD").unwrap();
            alice_usd_at_cutoff = Some(exchange.ledger().balance(alice, usd));
        }
        let mut events = Vec::new();
        let command = parse_line(line).unwrap().command;
        venue.apply(Seq(index as u64 + 1), Some(TimestampNs(*ts)), &command, &mut events);
        for event in &events {
            if let Event::Trade(trade) = event {
                trades += 1;
                let decimals = venue.exchange().instrument(trade.instrument).qty_decimals;
                qty_units += i128::from(trade.qty.0) * 10i128.pow(18 - decimals);
            }
        }
    }
    assert_eq!(one_count(&sql, "SELECT count(*) FROM trades"), trades);
    assert_eq!(one_decimal(&sql, "SELECT sum(qty) FROM trades"), qty_units);
    // Both sides of every trade: twice the volume.
    assert_eq!(
        one_decimal(&sql, "SELECT sum(volume) FROM (SELECT account, sum(qty) AS volume FROM (SELECT maker_account AS account, qty FROM trades UNION ALL SELECT taker_account AS account, qty FROM trades) AS sides GROUP BY account) AS totals"),
        2 * qty_units
    );
    // Money is only moved: per asset, the ledger's changes net to deposits less
    // withdrawals, which are the `deposit` and `withdrawal` moves.
    let batches = sql
        .query("SELECT asset, sum(available_delta + held_delta + fee) - sum(CASE WHEN movement IN ('deposit', 'withdrawal') THEN available_delta ELSE 0 END) AS made FROM ledger GROUP BY asset")
        .unwrap();
    for batch in &batches {
        let made = batch.column(1).as_primitive::<Decimal128Type>();
        for row in 0..batch.num_rows() {
            assert_eq!(made.value(row), 0, "money made or lost");
        }
    }
    // The documented balance-at-a-time query, for USD.
    let query = doc_queries().into_iter().find(|query| query.contains("row_number()")).unwrap();
    let batches = sql.query(&query).unwrap();
    let batch = &batches[0];
    let assets = batch.column(0).as_string::<i32>();
    let available = batch.column(1).as_primitive::<Decimal128Type>();
    let held = batch.column(2).as_primitive::<Decimal128Type>();
    let usd_row = (0..batch.num_rows()).find(|row| assets.value(*row) == "USD").unwrap();
    let expected = alice_usd_at_cutoff.unwrap();
    assert_eq!(available.value(usd_row), i128::from(expected.available.0) * 1_000_000_000_000);
    assert_eq!(held.value(usd_row), i128::from(expected.held.0) * 1_000_000_000_000);
    // Partition pruning is by date: one day's trades are a part of all.
    let day = one_count(&sql, "SELECT count(*) FROM trades WHERE date = '2026-11-25'");
    assert!(day > 0 && day < trades);
}

#[test]
fn bad_sql_is_an_error_with_its_code_and_formats_render() {
    let dir = tempfile::tempdir().unwrap();
    sample_history(dir.path(), 800);
    let sql = HistorySql::open(&dir.path().join("history"), 1).unwrap();
    assert_eq!(sql.query("SELEC count(*) FROM trades").unwrap_err().code, "sql_error");
    assert_eq!(sql.query("SELECT count(*) FROM nothing_here").unwrap_err().code, "plan_error");
    assert_eq!(sql.query("SELECT no_such_column FROM trades").unwrap_err().code, "plan_error");

    let query = "SELECT symbol, count(*) AS trades, sum(qty) AS volume FROM trades GROUP BY symbol ORDER BY symbol";
    let batches = sql.query(query).unwrap();
    let csv = render(&batches, Format::Csv).unwrap();
    assert!(csv.starts_with("symbol,trades,volume\nBTC-USD,"), "{csv}");
    let json: serde_json_value::Value =
        serde_json_value::from_str(&render(&batches, Format::Json).unwrap()).unwrap();
    let rows = json.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["symbol"], "BTC-USD");
    assert!(rows[0]["trades"].as_i64().unwrap() > 0);
    // Decimals are exact strings.
    assert!(rows[0]["volume"].as_str().unwrap().parse::<f64>().unwrap() > 0.0);
    assert_eq!(bourse_query::decimal_text(1_498_707_533_000_000_000_000_000, 18), "1498707.533");
    assert_eq!(bourse_query::decimal_text(-5, 2), "-0.05");
    assert_eq!(bourse_query::decimal_text(700, 0), "700");
    let table = render(&batches, Format::Table).unwrap();
    assert!(table.contains("| symbol") && table.contains("ETH-USD"), "{table}");
    // An empty answer is an empty JSON array.
    let none = sql.query("SELECT * FROM trades WHERE symbol = 'NONE'").unwrap();
    assert_eq!(render(&none, Format::Json).unwrap().trim(), "[]");
}

#[test]
fn a_history_without_files_answers_empty_and_sees_files_once_they_come() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history");
    let sql = HistorySql::open(&history, 1).unwrap();
    assert_eq!(one_count(&sql, "SELECT count(*) FROM trades"), 0);
    sample_history(dir.path(), 800);
    assert!(one_count(&sql, "SELECT count(*) FROM trades") > 0);
}

#[test]
fn a_long_lived_reader_sees_every_commit_and_every_merge() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let lines = trading(8, 2_000);
    write_journal(&data.join("journal"), &lines).unwrap();
    let mut follower =
        Follower::open(HistoryConfig::under(data), Arc::new(HistoryStats::default())).unwrap();
    follower.catch_up(Seq(1_000)).unwrap();
    follower.commit().unwrap();
    let history = data.join("history");
    let count = "SELECT count(*) FROM order_events";
    let sql = HistorySql::open(&history, 1).unwrap();
    let first = one_count(&sql, count);
    assert!(first > 0);

    // A later commit's files are read by the same reader (no stale listing) ...
    follower.catch_up(Seq(lines.len() as u64)).unwrap();
    follower.commit().unwrap();
    let fresh = || one_count(&HistorySql::open(&history, 1).unwrap(), count);
    let second = one_count(&sql, count);
    assert!(second > first);
    assert_eq!(second, fresh());

    // ... and so are merged files, in place of those they replace.
    let merged = follower.merge_small_files().unwrap().expect("two commits on a past day");
    assert!(merged.files_replaced >= 2);
    follower.merge_all_small_files().unwrap();
    assert_eq!(one_count(&sql, count), second);
    assert_eq!(
        one_count(&sql, "SELECT count(*) FROM trades"),
        one_count(&HistorySql::open(&history, 1).unwrap(), "SELECT count(*) FROM trades")
    );
}
