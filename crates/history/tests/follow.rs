//! The history against the state machine it follows: a journal of random trading
//! (two instruments, five accounts, limit and market orders, cancels, amends,
//! transfers, over three days of the engine's clock) is followed, and the Parquet
//! files read back must hold exactly what a plain venue over the same commands says:
//! every trade, every order's final state, each account's balances as the ledger's last
//! rows, candles that add up to the trades. Following in pieces, with restarts and
//! with files a crash left behind, writes the same rows as following in one go.
//! Two days of a futures contract (`sample::futures_trading`) give exact settlement
//! rows, ledger rows naming their futures causes and movements, and ledger deltas that
//! add up to every account's final balances.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Decimal128Type, TimestampNanosecondType, UInt32Type, UInt64Type};
use arrow_array::{Array, RecordBatch};
use bourse_core::format::parse_line;
use bourse_core::venue::OrderStatus;
use bourse_core::{Event, Exchange, ExchangeConfig, OrderId, Seq, TimestampNs, Venue};
use bourse_history::files::part_files;
use bourse_history::sample::{futures_trading, trading, write_journal, ACCOUNTS, DAY_START};
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
    let committed = Seq(1_200);
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
        // The spot sample settles nothing (the futures test follows in pieces too).
        assert!(!left.is_empty() || table == Table::Settlements, "{} is empty", table.name());
        assert_eq!(left.len(), right.len(), "{} rows", table.name());
        assert!(left == right, "{} differs", table.name());
    }
    // The lookups agree too.
    let stats = Arc::new(HistoryStats::default());
    let one = Follower::open(config(whole.path(), 1), stats.clone()).unwrap();
    let index = one.index();
    let other = Follower::open(config(data, 1), stats).unwrap();
    for order_id in [30, 400, 1_000, 2_500].map(OrderId) {
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
    let trade =
        index.trade(Seq(seq.parse().unwrap()), trade_index.parse().unwrap()).unwrap().unwrap();
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
        found.push(index.order(OrderId(id)).unwrap().unwrap_or_default());
        found.push(index.trade(Seq(id), 0).unwrap().unwrap_or_default());
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

const HOUR: u64 = 3_600_000_000_000;

/// A decimal in 10^-18 units as exact text: `-1000`, `1.5`.
fn decimal(value: i128) -> String {
    let unit = 10i128.pow(18);
    let (whole, fraction) = (value.abs() / unit, value.abs() % unit);
    let sign = if value < 0 { "-" } else { "" };
    if fraction == 0 {
        return format!("{sign}{whole}");
    }
    let digits = format!("{fraction:018}");
    format!("{sign}{whole}.{}", digits.trim_end_matches('0'))
}

fn column_u32(batch: &RecordBatch, name: &str) -> Vec<Option<u32>> {
    let column = batch.column_by_name(name).unwrap().as_primitive::<UInt32Type>();
    (0..column.len()).map(|row| (!column.is_null(row)).then(|| column.value(row))).collect()
}

fn column_ts(batch: &RecordBatch, name: &str) -> Vec<u64> {
    let column = batch.column_by_name(name).unwrap().as_primitive::<TimestampNanosecondType>();
    (0..column.len()).map(|row| column.value(row) as u64).collect()
}

/// One ledger row, in command order.
#[derive(Debug)]
struct Move {
    seq: u64,
    move_index: u32,
    account: String,
    asset: String,
    movement: String,
    cause: String,
    order_id: Option<u64>,
    trade_index: Option<u32>,
    available_delta: i128,
    held_delta: i128,
    fee: i128,
    available_after: i128,
    held_after: i128,
}

impl Move {
    /// `seq/move account movement cause order trade available held fee` (`-` for null).
    fn text(&self) -> String {
        let optional = |value: Option<String>| value.unwrap_or_else(|| "-".into());
        format!(
            "{}/{} {} {} {} {} {} {} {} {}",
            self.seq,
            self.move_index,
            self.account,
            self.movement,
            self.cause,
            optional(self.order_id.map(|id| id.to_string())),
            optional(self.trade_index.map(|index| index.to_string())),
            decimal(self.available_delta),
            decimal(self.held_delta),
            decimal(self.fee),
        )
    }
}

fn ledger_moves(data: &Path) -> Vec<Move> {
    let mut moves = Vec::new();
    for batch in read_table(data, Table::Ledger) {
        let (seqs, move_indexes) = (column_u64(&batch, "seq"), column_u32(&batch, "move_index"));
        let (accounts, assets) = (column_text(&batch, "account"), column_text(&batch, "asset"));
        let (movements, causes) = (column_text(&batch, "movement"), column_text(&batch, "cause"));
        let (order_ids, trade_indexes) =
            (column_u64(&batch, "order_id"), column_u32(&batch, "trade_index"));
        let available_delta = column_decimal(&batch, "available_delta");
        let held_delta = column_decimal(&batch, "held_delta");
        let fees = column_decimal(&batch, "fee");
        let available_after = column_decimal(&batch, "available_after");
        let held_after = column_decimal(&batch, "held_after");
        for row in 0..batch.num_rows() {
            moves.push(Move {
                seq: seqs[row].unwrap(),
                move_index: move_indexes[row].unwrap(),
                account: accounts[row].clone(),
                asset: assets[row].clone(),
                movement: movements[row].clone(),
                cause: causes[row].clone(),
                order_id: order_ids[row],
                trade_index: trade_indexes[row],
                available_delta: available_delta[row],
                held_delta: held_delta[row],
                fee: fees[row],
                available_after: available_after[row],
                held_after: held_after[row],
            });
        }
    }
    moves.sort_by_key(|change| (change.seq, change.move_index));
    moves
}

#[test]
fn a_futures_history_has_its_settlements_causes_and_balances_that_add_up() {
    let lines = futures_trading();
    let last = lines.len() as u64;
    assert_eq!(last, 19);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    write_journal(&data.join("journal"), &lines).unwrap();
    follow(data, last, 1_000_000);
    let (venue, _) = model(&lines);
    let exchange = venue.exchange();

    // One row per side each settlement marked, in the settle asset, partitioned by the
    // settlement's date and the contract.
    let mut settlements = Vec::new();
    for batch in read_table(data, Table::Settlements) {
        let (seqs, ts) = (column_u64(&batch, "seq"), column_ts(&batch, "ts"));
        let (accounts, symbols) = (column_text(&batch, "account"), column_text(&batch, "symbol"));
        let (sides, assets) = (column_text(&batch, "side"), column_text(&batch, "asset"));
        let (qtys, prices) = (column_decimal(&batch, "qty"), column_decimal(&batch, "price"));
        let pnls = column_decimal(&batch, "pnl");
        for row in 0..batch.num_rows() {
            settlements.push((
                seqs[row].unwrap(),
                (ts[row] - DAY_START) / HOUR,
                format!(
                    "{} {} {} {} {} {} {}",
                    accounts[row],
                    symbols[row],
                    sides[row],
                    decimal(qtys[row]),
                    decimal(prices[row]),
                    decimal(pnls[row]),
                    assets[row]
                ),
            ));
        }
    }
    settlements.sort();
    let expected = [
        (12, 15, "alice CU short 1 75200 -1000 CNY"),
        (12, 15, "bob CU long 2 75200 2000 CNY"),
        (12, 15, "carol CU short 1 75200 -500 CNY"),
        (19, 39, "alice CU short 4 75500 -3000 CNY"),
        (19, 39, "bob CU long 1 75500 1500 CNY"),
        (19, 39, "dave CU long 3 75500 5000 CNY"),
    ];
    let expected: Vec<(u64, u64, String)> =
        expected.iter().map(|(seq, hour, row)| (*seq, *hour, row.to_string())).collect();
    assert_eq!(settlements, expected);
    let settlement_dirs: Vec<String> = part_files(&data.join("history"))
        .unwrap()
        .iter()
        .filter_map(|(path, _)| {
            let text = path.to_str()?;
            let rest = text.split("/tables/settlements/").nth(1)?;
            Some(rest.rsplit_once('/')?.0.to_string())
        })
        .collect();
    assert_eq!(settlement_dirs, ["date=2026-11-24/instrument=CU", "date=2026-11-25/instrument=CU"]);

    // The ledger: the futures commands' moves, each with its movement and cause.
    let moves = ledger_moves(data);
    let futures_commands = [10, 12, 13, 15, 18, 19];
    let shown: Vec<String> = moves
        .iter()
        .filter(|change| futures_commands.contains(&change.seq))
        .map(Move::text)
        .collect();
    let expected = [
        // alice buys 1 back from carol's offer: carol opens (the rest of the taker fee
        // she held comes back, her maker fee is paid), alice closes at a loss.
        "10/0 carol release trade 9 0 3 -3 0",
        "10/1 carol fee trade 9 0 -1.5 0 1.5",
        "10/2 alice release trade 10 0 10000 -10000 0",
        "10/3 alice realised_profit trade 10 0 -500 0 0",
        "10/4 alice fee trade 10 0 -3 0 3",
        // The day's settlement: dave's gfd bid expires, then the marks by account name.
        "12/0 dave release settlement - - 10003 -10003 0",
        "12/1 alice settlement settlement - - -1000 0 0",
        "12/2 bob settlement settlement - - 2000 0 0",
        "12/3 carol settlement settlement - - -500 0 0",
        // The margin from 10000 to 12000 per lot: alice's 1 lot, bob's 2, carol's 1 lot
        // and her order's 2.
        "13/0 alice margin margin - - -2000 2000 0",
        "13/1 bob margin margin - - -4000 4000 0",
        "13/2 carol margin margin - - -6000 6000 0",
        // dave buys 3: 2 from carol (she opens), 1 from bob (he closes at a profit).
        "15/0 dave hold order - - -36009 36009 0",
        "15/1 carol release trade 9 0 6 -6 0",
        "15/2 carol fee trade 9 0 -3 0 3",
        "15/3 dave release trade 15 0 6 -6 0",
        "15/4 dave fee trade 15 0 -6 0 6",
        "15/5 bob release trade 14 1 12000 -12000 0",
        "15/6 bob realised_profit trade 14 1 500 0 0",
        "15/7 bob fee trade 14 1 -1.5 0 1.5",
        "15/8 dave release trade 15 1 3 -3 0",
        "15/9 dave fee trade 15 1 -3 0 3",
        // carol's liquidation: her bid canceled, her short 3 bought from alice's offer;
        // every move is the liquidation's, its market order's id is the command's seq.
        "18/0 carol release liquidation - - 12003 -12003 0",
        "18/1 alice release liquidation 16 0 9 -9 0",
        "18/2 alice fee liquidation 16 0 -4.5 0 4.5",
        "18/3 carol release liquidation 18 0 36000 -36000 0",
        "18/4 carol realised_profit liquidation 18 0 -4000 0 0",
        "18/5 carol fee liquidation 18 0 -9 0 9",
        // Expiry: the rest of alice's offer expires, the marks, then every position's
        // margin comes back.
        "19/0 alice release settlement - - 24006 -24006 0",
        "19/1 alice settlement settlement - - -3000 0 0",
        "19/2 bob settlement settlement - - 1500 0 0",
        "19/3 dave settlement settlement - - 5000 0 0",
        "19/4 alice release settlement - - 48000 -48000 0",
        "19/5 bob release settlement - - 12000 -12000 0",
        "19/6 dave release settlement - - 36000 -36000 0",
    ];
    assert_eq!(shown, expected);

    // Per account and asset the deltas add up to the final balance, each row's balance
    // after is the one before plus its deltas, and the last is the ledger's.
    let mut running: BTreeMap<(String, String), (i128, i128)> = BTreeMap::new();
    for change in &moves {
        let balance = running.entry((change.account.clone(), change.asset.clone())).or_default();
        balance.0 += change.available_delta;
        balance.1 += change.held_delta;
        assert_eq!(*balance, (change.available_after, change.held_after), "{change:?}");
    }
    let cny = exchange.find_asset("CNY").unwrap();
    let mut finals = Vec::new();
    for (index, account) in exchange.ledger().accounts().iter().enumerate() {
        let id = bourse_core::ids::AccountId(index as u32);
        let balance = exchange.ledger().balance(id, cny);
        let key = (account.name.to_string(), "CNY".to_string());
        let (available, held) = (scaled(balance.available.0, 2), scaled(balance.held.0, 2));
        assert_eq!(running.get(&key).copied(), Some((available, held)), "{key:?}");
        finals.push(format!("{} {} {}", account.name, decimal(available), decimal(held)));
    }
    // After the expiry nothing is open: 500000 each plus the profit and loss.
    assert_eq!(finals, ["alice 495489.5 0", "bob 503992.5 0", "carol 495486.5 0", "dave 504991 0"]);
    // Every position closed, the asset's moves net to its deposits less the fees
    // (which the `fee` column counts once, on `fee` moves).
    let net: i128 = moves.iter().map(|m| m.available_delta + m.held_delta + m.fee).sum();
    assert_eq!(decimal(net), "2000000");
    let fees: i128 = moves.iter().filter(|m| m.movement == "fee").map(|m| m.fee).sum();
    assert_eq!(fees, scaled(exchange.ledger().fee_balance(cny).0, 2));
    assert_eq!(decimal(fees), "40.5");

    // Trades: the contract's value as notional, the fees in the settle asset, the
    // liquidation's taker order the command's seq.
    let mut liquidation = Vec::new();
    for batch in read_table(data, Table::Trades) {
        let seqs = column_u64(&batch, "seq");
        for row in (0..batch.num_rows()).filter(|row| seqs[*row] == Some(18)) {
            liquidation.push(format!(
                "{} {} {} {} {:?} {:?} {} {} {} {}",
                decimal(column_decimal(&batch, "price")[row]),
                decimal(column_decimal(&batch, "qty")[row]),
                decimal(column_decimal(&batch, "notional")[row]),
                column_text(&batch, "taker_client_order_id")[row],
                column_u64(&batch, "maker_order_id")[row],
                column_u64(&batch, "taker_order_id")[row],
                decimal(column_decimal(&batch, "maker_fee")[row]),
                column_text(&batch, "maker_fee_asset")[row],
                decimal(column_decimal(&batch, "taker_fee")[row]),
                column_text(&batch, "taker_fee_asset")[row],
            ));
        }
    }
    assert_eq!(liquidation, ["75400 3 1131000 liq-18-short Some(16) Some(18) 4.5 CNY 9 CNY"]);

    // Orders that a settlement or a liquidation finished have their last state; the
    // liquidation's own market order has none.
    let mut finished = Vec::new();
    for batch in read_table(data, Table::Orders) {
        let (seqs, ids) = (column_u64(&batch, "seq"), column_text(&batch, "client_order_id"));
        let (statuses, changes) = (column_text(&batch, "status"), column_text(&batch, "change"));
        let filled = column_decimal(&batch, "filled");
        for row in 0..batch.num_rows() {
            let text =
                format!("{} {} {} {}", ids[row], statuses[row], changes[row], decimal(filled[row]));
            finished.push((seqs[row].unwrap(), text));
        }
    }
    finished.sort();
    let expected = [
        (8, "a1 filled filled 2"),
        (8, "b1 filled placed 2"),
        (10, "a2 filled placed 1"),
        (12, "d1 expired expired 0"),
        (15, "b2 filled filled 1"),
        (15, "c1 filled filled 3"),
        (15, "d2 filled placed 3"),
        (18, "c2 canceled canceled 0"),
        (19, "a3 expired expired 3"),
    ];
    let expected: Vec<(u64, String)> =
        expected.iter().map(|(seq, row)| (*seq, row.to_string())).collect();
    assert_eq!(finished, expected);

    // Followed in pieces, with restarts, the same rows.
    let pieces = tempfile::tempdir().unwrap();
    write_journal(&pieces.path().join("journal"), &lines).unwrap();
    for (until, commit_rows) in [(9, 1_000_000), (13, 2), (last, 3)] {
        follow(pieces.path(), until, commit_rows);
    }
    for table in Table::ALL {
        let (whole, pieces) = (table_rows(data, table), table_rows(pieces.path(), table));
        assert!(!whole.is_empty(), "{} is empty", table.name());
        assert!(whole == pieces, "{} differs", table.name());
    }
}
