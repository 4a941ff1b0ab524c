//! The history against the state machine it follows: a journal of random trading
//! (two instruments, five accounts, limit and market orders, cancels, amends,
//! transfers, over three days of the engine's clock) is followed, and the Parquet
//! files read back must hold exactly what a plain venue over the same commands says:
//! every trade, every order's final state, each account's balances as the ledger's last
//! rows, candles that add up to the trades. Following in pieces, with restarts and
//! with files a crash left behind, writes the same rows as following in one go.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Decimal128Type, UInt64Type};
use arrow_array::{Array, RecordBatch};
use bourse_core::format::parse_line;
use bourse_core::venue::OrderStatus;
use bourse_core::{Event, Exchange, ExchangeConfig, Seq, TimestampNs, Venue};
use bourse_history::files::part_files;
use bourse_history::sample::{trading, write_journal, ACCOUNTS};
use bourse_history::{Follower, HistoryConfig, HistoryStats, Table};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn config(data: &Path, commit_rows: usize) -> HistoryConfig {
    let mut config = HistoryConfig::under(data);
    config.commit_rows = commit_rows;
    config.replica_every_commands = 700;
    config
}

fn follow(data: &Path, until: u64, commit_rows: usize) {
    let mut follower =
        Follower::open(config(data, commit_rows), Arc::new(HistoryStats::default())).unwrap();
    follower.catch_up(Seq(until)).unwrap();
    follower.commit().unwrap();
    assert_eq!(follower.committed_seq(), Seq(until));
}

fn read_table(data: &Path, table: Table) -> Vec<RecordBatch> {
    let root = data.join("history").join("tables").join(table.name());
    part_files(&data.join("history"))
        .unwrap()
        .into_iter()
        .filter(|(path, _)| path.starts_with(&root))
        .flat_map(|(path, _)| {
            let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap())
                .unwrap()
                .build()
                .unwrap();
            reader.map(|batch| batch.unwrap()).collect::<Vec<RecordBatch>>()
        })
        .collect()
}

/// Every row of a table as text (one string per row), sorted: a table's content.
fn table_rows(data: &Path, table: Table) -> Vec<String> {
    let mut rows = Vec::new();
    for batch in read_table(data, table) {
        for row in 0..batch.num_rows() {
            let cells: Vec<String> = batch
                .columns()
                .iter()
                .map(|column| arrow_cast_display(column.as_ref(), row))
                .collect();
            rows.push(cells.join("|"));
        }
    }
    rows.sort();
    rows
}

fn arrow_cast_display(column: &dyn Array, row: usize) -> String {
    if column.is_null(row) {
        return "null".into();
    }
    format!("{:?}", column.slice(row, 1))
}

fn column_u64(batch: &RecordBatch, name: &str) -> Vec<Option<u64>> {
    let column = batch.column_by_name(name).unwrap().as_primitive::<UInt64Type>();
    (0..column.len()).map(|row| (!column.is_null(row)).then(|| column.value(row))).collect()
}

fn column_decimal(batch: &RecordBatch, name: &str) -> Vec<i128> {
    let column = batch.column_by_name(name).unwrap().as_primitive::<Decimal128Type>();
    (0..column.len()).map(|row| column.value(row)).collect()
}

fn column_text(batch: &RecordBatch, name: &str) -> Vec<String> {
    let column = batch.column_by_name(name).unwrap().as_string::<i32>();
    (0..column.len()).map(|row| column.value(row).to_string()).collect()
}

/// A plain venue over the same commands.
fn model(lines: &[(String, u64)]) -> (Venue, Vec<Vec<Event>>) {
    let mut venue = Venue::new(Exchange::new(ExchangeConfig::default()), true);
    let mut all = Vec::new();
    for (index, (line, ts)) in lines.iter().enumerate() {
        let command = parse_line(line).unwrap().command;
        let mut events = Vec::new();
        venue.apply(Seq(index as u64 + 1), Some(TimestampNs(*ts)), &command, &mut events);
        all.push(events);
    }
    (venue, all)
}

fn scaled(units: i64, decimals: u32) -> i128 {
    i128::from(units) * 10i128.pow(18 - decimals)
}

#[test]
fn the_files_hold_what_the_state_machine_did() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let lines = trading(7, 5_000);
    write_journal(&data.join("journal"), &lines).unwrap();
    follow(data, lines.len() as u64, 2_000);
    let (venue, events) = model(&lines);
    let exchange = venue.exchange();

    // Trades: one row per trade event, in the same order, with the same prices.
    let trade_events: Vec<(u64, &bourse_core::event::TradeEvent)> = events
        .iter()
        .enumerate()
        .flat_map(|(index, events)| {
            events.iter().filter_map(move |event| match event {
                Event::Trade(trade) => Some((index as u64 + 1, trade)),
                _ => None,
            })
        })
        .collect();
    assert!(trade_events.len() > 500, "only {} trades", trade_events.len());
    let mut trades: Vec<(u64, i128, i128)> = Vec::new();
    for batch in read_table(data, Table::Trades) {
        let seqs = column_u64(&batch, "seq");
        let prices = column_decimal(&batch, "price");
        let qtys = column_decimal(&batch, "qty");
        for row in 0..batch.num_rows() {
            trades.push((seqs[row].unwrap(), prices[row], qtys[row]));
        }
    }
    trades.sort();
    let mut expected: Vec<(u64, i128, i128)> = trade_events
        .iter()
        .map(|(seq, trade)| {
            let instrument = exchange.instrument(trade.instrument);
            (
                *seq,
                scaled(trade.price.0, instrument.price_decimals),
                scaled(trade.qty.0, instrument.qty_decimals),
            )
        })
        .collect();
    expected.sort();
    assert_eq!(trades, expected);

    // Ledger: each (account, asset)'s last row is the balance the ledger ends with.
    let mut last: BTreeMap<(String, String), (u64, usize, i128, i128)> = BTreeMap::new();
    for batch in read_table(data, Table::Ledger) {
        let seqs = column_u64(&batch, "seq");
        let accounts = column_text(&batch, "account");
        let assets = column_text(&batch, "asset");
        let available = column_decimal(&batch, "available_after");
        let held = column_decimal(&batch, "held_after");
        for row in 0..batch.num_rows() {
            let key = (accounts[row].clone(), assets[row].clone());
            let entry = (seqs[row].unwrap(), row, available[row], held[row]);
            let newer = last.get(&key).is_none_or(|known| (known.0, known.1) < (entry.0, entry.1));
            if newer {
                last.insert(key, entry);
            }
        }
    }
    for (account_index, account) in exchange.ledger().accounts().iter().enumerate() {
        for (asset_index, asset) in exchange.assets().iter().enumerate() {
            let balance = exchange.ledger().balance(
                bourse_core::ids::AccountId(account_index as u32),
                bourse_core::ids::AssetId(asset_index as u32),
            );
            let key = (account.name.to_string(), asset.name.to_string());
            let (_, _, available, held) = last.get(&key).copied().unwrap_or_default();
            assert_eq!(available, scaled(balance.available.0, asset.decimals), "{key:?} available");
            assert_eq!(held, scaled(balance.held.0, asset.decimals), "{key:?} held");
        }
    }

    // Orders: every finished order's final state, once.
    let activity = venue.activity().unwrap();
    let mut finished: HashMap<u64, String> = HashMap::new();
    for batch in read_table(data, Table::Orders) {
        let ids = column_u64(&batch, "order_id");
        let statuses = column_text(&batch, "status");
        for row in 0..batch.num_rows() {
            assert!(
                finished.insert(ids[row].unwrap(), statuses[row].clone()).is_none(),
                "an order finished twice"
            );
        }
    }
    let mut checked = 0;
    for account in 0..ACCOUNTS.len() as u32 {
        for record in activity.finished_orders(bourse_core::ids::AccountId(account)) {
            assert_eq!(
                finished.get(&record.order_id.0).map(String::as_str),
                Some(record.status.code())
            );
            checked += 1;
        }
        for record in activity.open_orders(bourse_core::ids::AccountId(account)) {
            assert_eq!(record.status, OrderStatus::Open);
            assert!(!finished.contains_key(&record.order_id.0), "an open order among the finished");
        }
    }
    assert!(checked > 100);

    // Candles add up to the trades, per symbol.
    let mut traded: BTreeMap<String, (u64, i128)> = BTreeMap::new();
    for batch in read_table(data, Table::Trades) {
        let symbols = column_text(&batch, "symbol");
        let qtys = column_decimal(&batch, "qty");
        for row in 0..batch.num_rows() {
            let entry = traded.entry(symbols[row].clone()).or_default();
            entry.0 += 1;
            entry.1 += qtys[row];
        }
    }
    let mut candled: BTreeMap<String, (u64, i128)> = BTreeMap::new();
    for batch in read_table(data, Table::Candles) {
        let symbols = column_text(&batch, "symbol");
        let trades = column_u64(&batch, "trades");
        let volumes = column_decimal(&batch, "volume");
        for row in 0..batch.num_rows() {
            let entry = candled.entry(symbols[row].clone()).or_default();
            entry.0 += trades[row].unwrap();
            entry.1 += volumes[row];
        }
    }
    // The last minute of each symbol is still open (no later command closed it) unless
    // the clock passed it; everything before is in.
    for (symbol, (count, volume)) in &traded {
        let (candle_count, candle_volume) = candled.get(symbol).copied().unwrap_or_default();
        assert!(candle_count <= *count && candle_volume <= *volume, "{symbol}");
        assert!(count - candle_count <= 10, "{symbol}: {count} trades, {candle_count} in candles");
    }

    // Rejected orders are order events with their reason.
    let rejected: Vec<String> = table_rows(data, Table::OrderEvents)
        .into_iter()
        .filter(|row| row.contains("unknown_symbol"))
        .collect();
    assert!(!rejected.is_empty());

    // Partitions: three days, and the unknown symbols under one name.
    let dates: std::collections::BTreeSet<String> = part_files(&data.join("history"))
        .unwrap()
        .iter()
        .filter_map(|(path, _)| {
            path.to_str()
                .and_then(|text| text.split("date=").nth(1))
                .map(|rest| rest[..10].to_string())
        })
        .collect();
    assert_eq!(
        dates.into_iter().collect::<Vec<_>>(),
        ["2026-11-24", "2026-11-25", "2026-11-26", "2026-11-27"]
    );
}

#[test]
fn following_in_pieces_with_restarts_and_crash_leftovers_writes_the_same_rows() {
    let lines = trading(11, 3_000);
    let whole = tempfile::tempdir().unwrap();
    write_journal(&whole.path().join("journal"), &lines).unwrap();
    follow(whole.path(), lines.len() as u64, 1_000_000);

    let pieces = tempfile::tempdir().unwrap();
    let data = pieces.path();
    write_journal(&data.join("journal"), &lines[..1_200]).unwrap();
    follow(data, 500, 300);
    follow(data, 1_200, 300);
    // A crash after a commit's files and before its checkpoint: files whose range
    // starts after the committed seq. Opening removes them; the journal gives the rows.
    let committed = 1_200u64;
    let (sample, _) = part_files(&data.join("history")).unwrap().into_iter().next().unwrap();
    let leftover =
        sample.with_file_name(bourse_history::files::part_name(committed + 1, committed + 50));
    std::fs::copy(&sample, &leftover).unwrap();
    write_journal(&data.join("journal"), &lines[1_200..]).unwrap();
    {
        let mut follower =
            Follower::open(config(data, 1_000_000), Arc::new(HistoryStats::default())).unwrap();
        assert!(!leftover.exists(), "the files of an uncommitted range are removed");
        // Applied but never committed: as if killed here.
        follower.catch_up(Seq(2_000)).unwrap();
        assert!(follower.committed_seq() < Seq(2_000));
    }
    follow(data, lines.len() as u64, 250);

    for table in Table::ALL {
        let (left, right) = (table_rows(whole.path(), table), table_rows(data, table));
        assert!(!left.is_empty(), "{} is empty", table.name());
        assert_eq!(left.len(), right.len(), "{} rows", table.name());
        assert!(left == right, "{} differs", table.name());
    }
    // The lookups agree too.
    let stats = Arc::new(HistoryStats::default());
    let one = Follower::open(config(whole.path(), 1), stats.clone()).unwrap();
    let index = one.index();
    let other = Follower::open(config(data, 1), stats).unwrap();
    for order_id in [30u64, 400, 1_000, 2_500] {
        assert_eq!(
            index.order(order_id).unwrap(),
            other.index().order(order_id).unwrap(),
            "order {order_id}"
        );
    }
    let fills = index.recent_fills("alice", 20).unwrap();
    assert_eq!(fills.len(), 20);
    assert_eq!(fills, other.index().recent_fills("alice", 20).unwrap());
    let newest = &fills[0];
    let trade_id = newest["trade_id"].as_str().unwrap();
    let (seq, trade_index) = trade_id.split_once('-').unwrap();
    let trade = index.trade(seq.parse().unwrap(), trade_index.parse().unwrap()).unwrap().unwrap();
    assert!(trade["maker_account"] == "alice" || trade["taker_account"] == "alice");
    let seqs: Vec<u64> = fills.iter().map(|fill| fill["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|pair| pair[0] >= pair[1]), "newest first");
}

/// Every account's whole list of fills, and a sample of orders and trades, from the
/// index of the history under `data`.
fn lookups(data: &Path) -> Vec<serde_json::Value> {
    let follower = Follower::open(config(data, 1), Arc::new(HistoryStats::default())).unwrap();
    let index = follower.index();
    let mut found = Vec::new();
    for account in ACCOUNTS {
        found.extend(index.recent_fills(account, 100_000).unwrap());
    }
    for id in (1..3_000).step_by(7) {
        found.push(index.order(id).unwrap().unwrap_or_default());
        found.push(index.trade(id, 0).unwrap().unwrap_or_default());
    }
    found
}

#[test]
fn a_crash_between_the_index_and_the_checkpoint_leaves_the_index_exact() {
    let lines = trading(12, 3_000);
    let whole = tempfile::tempdir().unwrap();
    write_journal(&whole.path().join("journal"), &lines).unwrap();
    follow(whole.path(), lines.len() as u64, 1_000_000);

    let crashed = tempfile::tempdir().unwrap();
    let data = crashed.path();
    write_journal(&data.join("journal"), &lines).unwrap();
    let one_replica = |commit_rows| HistoryConfig {
        replica_every_commands: 1_000_000,
        ..config(data, commit_rows)
    };
    let mut follower = Follower::open(one_replica(1_000_000), Arc::default()).unwrap();
    follower.catch_up(Seq(300)).unwrap();
    follower.commit().unwrap();
    let checkpoint = std::fs::read(data.join("history/checkpoint.json")).unwrap();
    follower.catch_up(Seq(lines.len() as u64)).unwrap();
    follower.commit().unwrap();
    drop(follower);
    // As if killed after the index took commit 301..=3000 and before its checkpoint.
    std::fs::write(data.join("history/checkpoint.json"), checkpoint).unwrap();

    // Committing in other pieces now would key the index differently; it must not.
    let mut follower = Follower::open(one_replica(250), Arc::default()).unwrap();
    assert_eq!(follower.committed_seq(), Seq(300));
    for until in [1_000, 2_000, lines.len() as u64] {
        follower.catch_up(Seq(until)).unwrap();
        follower.commit().unwrap();
    }
    assert_eq!(follower.committed_seq(), Seq(lines.len() as u64));
    drop(follower);

    for table in Table::ALL {
        assert!(table_rows(whole.path(), table) == table_rows(data, table), "{}", table.name());
    }
    let (expected, got) = (lookups(whole.path()), lookups(data));
    assert!(expected.iter().filter(|value| value.get("liquidity").is_some()).count() > 500);
    assert_eq!(expected.len(), got.len(), "no fill twice, none missing");
    assert!(expected == got);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The part files of each partition directory, by directory.
fn files_by_partition(data: &Path) -> BTreeMap<std::path::PathBuf, usize> {
    let mut by_dir = BTreeMap::new();
    for (path, _) in part_files(&data.join("history")).unwrap() {
        *by_dir.entry(path.parent().unwrap().to_path_buf()).or_insert(0) += 1;
    }
    by_dir
}

/// The history of `lines` committed every 25 commands: a file per partition and
/// commit, all small.
fn follow_in_small_commits(data: &Path, lines: &[(String, u64)]) {
    write_journal(&data.join("journal"), lines).unwrap();
    let mut follower = Follower::open(config(data, 1_000_000), Arc::default()).unwrap();
    for until in (25..=lines.len() as u64).step_by(25) {
        follower.catch_up(Seq(until)).unwrap();
        follower.commit().unwrap();
    }
}

#[test]
fn a_running_follower_merges_small_files_once_it_has_caught_up() {
    let lines = trading(14, 1_500);
    let small = tempfile::tempdir().unwrap();
    let data = small.path();
    follow_in_small_commits(data, &lines);
    let expected: Vec<Vec<String>> =
        Table::ALL.iter().map(|table| table_rows(data, *table)).collect();
    let before = part_files(&data.join("history")).unwrap().len();

    let stats = Arc::new(HistoryStats::default());
    let follower = Follower::open(config(data, 1_000_000), Arc::clone(&stats)).unwrap();
    let stop = Arc::new(bourse_history::Stop::default());
    let end = Seq(lines.len() as u64);
    let running = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || follower.run(|| end, &stop, |error| panic!("{error:?}")))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while part_files(&data.join("history")).unwrap().len() * 4 > before {
        assert!(std::time::Instant::now() < deadline, "no merges");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    stop.stop();
    running.join().unwrap();
    assert!(stats.merges.load(std::sync::atomic::Ordering::Relaxed) > 0);
    for (table, rows) in Table::ALL.iter().zip(expected) {
        assert!(table_rows(data, *table) == rows, "{}", table.name());
    }
}

#[test]
fn merging_small_files_keeps_every_row_and_a_crash_midway_duplicates_none() {
    let lines = trading(13, 3_000);
    let whole = tempfile::tempdir().unwrap();
    write_journal(&whole.path().join("journal"), &lines).unwrap();
    follow(whole.path(), lines.len() as u64, 1_000_000);

    let small = tempfile::tempdir().unwrap();
    let data = small.path();
    follow_in_small_commits(data, &lines);
    let before = part_files(&data.join("history")).unwrap().len();
    assert!(before > 500, "{before} files");

    // The merged history, in a copy: a crash after a merge renamed its file into place
    // and before it removed the files it replaces is the original plus that file.
    let merged = tempfile::tempdir().unwrap();
    copy_dir(data, merged.path());
    let mut follower = Follower::open(config(merged.path(), 20), Arc::default()).unwrap();
    let first = follower.merge_small_files().unwrap().expect("small files to merge");
    assert!(first.files_replaced >= 2);
    let merges = 1 + follower.merge_all_small_files().unwrap().0;
    drop(follower);
    let after = files_by_partition(merged.path());
    let files_after: usize = after.values().sum();
    assert!(files_after * 10 < before, "{before} files became {files_after} in {merges} merges");
    // Closed days end with one file per partition; the newest day (the engine's today)
    // keeps fewer than a merge's worth of small files after its merged ones.
    let date_of = |dir: &Path| dir.parent().unwrap().file_name().unwrap().to_owned();
    let newest = after.keys().map(|dir| date_of(dir)).max().unwrap();
    for (dir, files) in &after {
        let today = date_of(dir) == newest;
        assert!(*files == 1 || (today && *files < 16), "{}: {files} files", dir.display());
    }
    for table in Table::ALL {
        let expected = table_rows(whole.path(), table);
        assert!(expected == table_rows(merged.path(), table), "{} after merging", table.name());
    }
    assert!(lookups(whole.path()) == lookups(merged.path()), "the index does not change");

    let relative = first.path.strip_prefix(merged.path()).unwrap();
    std::fs::copy(&first.path, data.join(relative)).unwrap();
    let all_rows = |data: &Path| -> usize {
        Table::ALL.iter().map(|table| table_rows(data, *table).len()).sum()
    };
    let (duplicated, expected) = (all_rows(data), all_rows(whole.path()));
    assert!(duplicated > expected, "the merged file and the files it replaces overlap");
    drop(Follower::open(config(data, 20), Arc::default()).unwrap());
    assert!(data.join(relative).exists(), "the merged file stays");
    for table in Table::ALL {
        assert!(table_rows(whole.path(), table) == table_rows(data, table), "{}", table.name());
    }
}
