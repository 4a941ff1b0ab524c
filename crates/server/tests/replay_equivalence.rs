//! A random command stream sent through the REST API must end exactly where `bourse
//! replay` (the reference behaviour) ends for the same stream: every command accepted or
//! rejected alike, and the same fills, balances and open orders for every account.

mod support;

use std::collections::HashMap;

use bourse_core::{Decimal, Replay};
use serde_json::{json, Value};
use support::{Client, TestServer};

const ACCOUNTS: [&str; 4] = ["a0", "a1", "a2", "a3"];
const ACTIONS: usize = 400;

/// xorshift64*: a fixed seed gives the same stream on every run.
struct Random(u64);

impl Random {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) % bound
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// What the replay said about one command: `accepted` or the reject reason.
fn verdict(events: &str) -> String {
    let first: Value = serde_json::from_str(events.lines().next().unwrap()).unwrap();
    match first["ev"].as_str() {
        Some("accepted") => "accepted".to_string(),
        _ => first["reason"].as_str().unwrap().to_string(),
    }
}

fn rest_verdict((status, body): &(u16, Value)) -> String {
    if *status == 200 || *status == 201 {
        "accepted".to_string()
    } else {
        body["code"].as_str().unwrap_or("?").to_string()
    }
}

fn number(text: &str) -> Decimal {
    Decimal::parse(text).unwrap_or_else(|| panic!("{text:?} is not a decimal"))
}

struct Run {
    replay: Replay,
    trades: Vec<Value>,
    random: Random,
    clients: HashMap<&'static str, Client>,
    /// Client order ids each account used, with the exchange's order id when it took it.
    orders: HashMap<&'static str, Vec<(String, Option<u64>)>>,
    next_id: usize,
}

impl Run {
    /// Feeds one replay-format command to the reference; returns its verdict.
    fn reference(&mut self, command: Value) -> String {
        let mut out = String::new();
        self.replay.feed_line(&command.to_string(), &mut out);
        for line in out.lines() {
            let event: Value = serde_json::from_str(line).unwrap();
            if event["ev"] == "trade" {
                self.trades.push(event);
            }
        }
        verdict(&out)
    }

    fn order(&mut self) {
        let account = *self.random.pick(&ACCOUNTS);
        self.next_id += 1;
        let id = format!("c{}", self.next_id);
        let side = *self.random.pick(&["buy", "sell"]);
        let kind = *self.random.pick(&["limit", "limit", "limit", "limit", "market"]);
        let price =
            format!("{}.{}", 95 + self.random.below(11), self.random.pick(&["0", "5", "25"]));
        let qty = format!("0.{:04}", 1 + self.random.below(30));
        let tif = *self.random.pick(&["gtc", "gtc", "gtc", "ioc", "fok"]);
        let post_only = self.random.below(10) == 0;
        let stp = *self.random.pick(&["cancel_taker", "cancel_maker", "cancel_both", "none"]);
        let mut command = json!({
            "cmd": "order", "account": account, "id": id, "symbol": "BTC-USD", "side": side,
            "type": kind, "qty": qty, "tif": tif, "post_only": post_only, "stp": stp,
        });
        let mut body = json!({
            "symbol": "BTC-USD", "side": side, "type": kind, "qty": qty, "time_in_force": tif,
            "post_only": post_only, "stp": stp, "client_order_id": id,
        });
        if kind == "limit" {
            command["price"] = json!(price);
            body["price"] = json!(price);
        }
        let expected = self.reference(command);
        let answer = self.clients[account].post("/v1/orders", &body.to_string());
        assert_eq!(rest_verdict(&answer), expected, "order {body}: {}", answer.1);
        let order_id = answer.1["order"]["order_id"].as_u64();
        self.orders.entry(account).or_default().push((id, order_id));
    }

    fn cancel(&mut self) {
        let account = *self.random.pick(&ACCOUNTS);
        let Some(known) = self.orders.get(account).filter(|known| !known.is_empty()) else {
            return;
        };
        let (id, _) = self.random.pick(known).clone();
        let expected = self.reference(json!({ "cmd": "cancel", "account": account, "id": id }));
        let answer = self.clients[account].delete(&format!("/v1/orders?client_order_id={id}"));
        assert_eq!(rest_verdict(&answer), expected, "cancel {account} {id}: {}", answer.1);
    }

    fn amend(&mut self) {
        let account = *self.random.pick(&ACCOUNTS);
        let Some(known) = self.orders.get(account).filter(|known| !known.is_empty()) else {
            return;
        };
        let (id, order_id) = self.random.pick(known).clone();
        let Some(order_id) = order_id else { return };
        let mut command = json!({ "cmd": "amend", "account": account, "id": id });
        let mut body = json!({});
        if self.random.below(2) == 0 {
            let price = format!("{}.5", 95 + self.random.below(11));
            command["price"] = json!(price);
            body["price"] = json!(price);
        }
        if self.random.below(2) == 0 || body.get("price").is_none() {
            let qty = format!("0.{:04}", 1 + self.random.below(30));
            command["qty"] = json!(qty);
            body["qty"] = json!(qty);
        }
        let expected = self.reference(command);
        let answer =
            self.clients[account].patch(&format!("/v1/orders/{order_id}"), &body.to_string());
        assert_eq!(rest_verdict(&answer), expected, "amend {account} {id} {body}: {}", answer.1);
    }
}

#[test]
fn a_random_stream_through_rest_ends_where_replay_ends() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let mut run = Run {
        replay: Replay::new(),
        trades: Vec::new(),
        random: Random(0x9e37_79b9_7f4a_7c15),
        clients: HashMap::new(),
        orders: HashMap::new(),
        next_id: 0,
    };
    server.declare_btc_usd();
    run.reference(json!({"cmd":"asset","asset":"USD","decimals":6}));
    run.reference(json!({"cmd":"asset","asset":"BTC","decimals":8}));
    run.reference(json!({"cmd":"instrument","symbol":"BTC-USD","base":"BTC","quote":"USD","tick":"0.01",
        "lot":"0.0001","min_qty":"0.0001","max_qty":"1000","maker_fee_bps":2,"taker_fee_bps":5,"market_band_bps":500}));
    for account in ACCOUNTS {
        let deposits = [("USD", "300"), ("BTC", "0.02")];
        for (asset, amount) in deposits {
            run.reference(json!({"cmd":"deposit","account":account,"asset":asset,"amount":amount}));
        }
        run.clients.insert(account, server.trader(account, &deposits));
    }
    for _ in 0..ACTIONS {
        match run.random.below(10) {
            0..=5 => run.order(),
            6 | 7 => run.cancel(),
            _ => run.amend(),
        }
    }
    run.replay.check_invariants().unwrap();
    let state: Value = serde_json::from_str(&run.replay.state_json()).unwrap();
    for account in ACCOUNTS {
        let client = &run.clients[account];
        compare_balances(account, &state, &client.get("/v1/balances").1);
        compare_fills(account, &run.trades, &client.get("/v1/fills").1);
        compare_open_orders(account, &state, &client.get("/v1/orders").1);
    }
    assert!(run.trades.len() > 20, "the stream should trade: {} trades", run.trades.len());
}

fn compare_balances(account: &str, state: &Value, rest: &Value) {
    for asset in ["USD", "BTC"] {
        for field in ["available", "held"] {
            let expected = state["balances"][account][asset][field].as_str().unwrap_or("0");
            let got = rest["balances"][asset][field].as_str().unwrap();
            assert_eq!(number(got), number(expected), "{account} {asset} {field}");
        }
    }
}

/// The replay's trades as this account's fills: (price, qty, fee, liquidity), in order.
fn compare_fills(account: &str, trades: &[Value], rest: &Value) {
    let mut expected = Vec::new();
    for trade in trades {
        if trade["maker_account"] == account {
            expected.push((
                number(trade["price"].as_str().unwrap()),
                number(trade["qty"].as_str().unwrap()),
                number(trade["maker_fee"].as_str().unwrap()),
                "maker".to_string(),
            ));
        }
        if trade["taker_account"] == account {
            expected.push((
                number(trade["price"].as_str().unwrap()),
                number(trade["qty"].as_str().unwrap()),
                number(trade["taker_fee"].as_str().unwrap()),
                "taker".to_string(),
            ));
        }
    }
    let got: Vec<_> = rest["fills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|fill| {
            (
                number(fill["price"].as_str().unwrap()),
                number(fill["qty"].as_str().unwrap()),
                number(fill["fee"].as_str().unwrap()),
                fill["liquidity"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(got, expected, "fills of {account}");
}

fn compare_open_orders(account: &str, state: &Value, rest: &Value) {
    let mut expected = Vec::new();
    for side in ["bids", "asks"] {
        for order in state["books"]["BTC-USD"][side].as_array().into_iter().flatten() {
            if order["account"] == account {
                expected.push((
                    order["id"].as_str().unwrap().to_string(),
                    number(order["price"].as_str().unwrap()),
                    number(order["qty"].as_str().unwrap()),
                ));
            }
        }
    }
    let mut got: Vec<_> = rest["orders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|order| {
            (
                order["client_order_id"].as_str().unwrap().to_string(),
                number(order["price"].as_str().unwrap()),
                number(order["remaining"].as_str().unwrap()),
            )
        })
        .collect();
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got, expected, "open orders of {account}");
}
