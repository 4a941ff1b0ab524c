//! Setting up a load run through the server's admin API: spot instruments or futures
//! contracts, funded accounts and a key for each connection. A small blocking HTTP/1.1
//! client that signs requests as `docs/api.md` says; it runs before the measurement,
//! never during it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bourse_protocol::signing;
use serde_json::Value;

/// A key and its secret.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub key: String,
    pub secret: String,
}

impl Credentials {
    /// Reads `key = "..."` and `secret = "..."` from a file such as `admin.key`.
    pub fn from_file(path: &Path) -> Result<Credentials, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        let field = |name: &str| {
            text.lines()
                .find_map(|line| line.trim().strip_prefix(&format!("{name} = \"")))
                .and_then(|rest| rest.strip_suffix('"'))
                .map(str::to_string)
                .ok_or_else(|| format!("{} has no {name} = \"...\" line", path.display()))
        };
        Ok(Credentials { key: field("key")?, secret: field("secret")? })
    }
}

/// A timestamp later than any this process signed with before (two identical requests
/// in one millisecond would be a replay).
fn timestamp_ms() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = signing::now_ms();
    let previous = LAST.fetch_max(now, Ordering::SeqCst);
    if previous < now {
        return now;
    }
    LAST.fetch_add(1, Ordering::SeqCst) + 1
}

/// One signed request; the status and the JSON answer.
pub fn request(
    http: SocketAddr,
    credentials: &Credentials,
    method: &str,
    path: &str,
    body: &str,
) -> Result<(u16, Value), String> {
    let timestamp = timestamp_ms();
    let message = signing::signing_message(&timestamp.to_string(), method, path, body.as_bytes());
    let signature = signing::sign(&credentials.secret, &message);
    let signed = format!(
        "X-Bourse-Key: {}\r\nX-Bourse-Timestamp: {timestamp}\r\nX-Bourse-Signature: {signature}\r\n",
        credentials.key
    );
    exchange(http, method, path, &signed, body)
}

/// One request without a signature (a public route); the status and the JSON answer.
pub fn get(http: SocketAddr, path: &str) -> Result<(u16, Value), String> {
    exchange(http, "GET", path, "", "")
}

/// `get`, given up after `wait` (a node that takes connections but does not answer).
pub fn get_within(http: SocketAddr, path: &str, wait: Duration) -> Result<(u16, Value), String> {
    exchange_within(http, "GET", path, "", "", wait)
}

/// Sends one request on a connection of its own (`headers`: extra lines, each ending
/// in CRLF) and reads the whole answer.
fn exchange(
    http: SocketAddr,
    method: &str,
    path: &str,
    headers: &str,
    body: &str,
) -> Result<(u16, Value), String> {
    exchange_within(http, method, path, headers, body, Duration::from_secs(30))
}

/// `exchange`, waiting at most `wait` for the answer (and 5 s to connect).
fn exchange_within(
    http: SocketAddr,
    method: &str,
    path: &str,
    headers: &str,
    body: &str,
    wait: Duration,
) -> Result<(u16, Value), String> {
    let failed = |error: std::io::Error| format!("{method} {path} on {http}: {error}");
    let connect = wait.min(Duration::from_secs(5));
    let mut stream = TcpStream::connect_timeout(&http, connect).map_err(failed)?;
    stream.set_read_timeout(Some(wait)).map_err(failed)?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: bourse\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n{headers}\r\n{body}",
        body.len(),
    )
    .map_err(failed)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).map_err(failed)?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").ok_or("a response without a head")?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|status| status.parse().ok())
        .ok_or("a response without a status")?;
    let value = serde_json::from_str(body).unwrap_or(Value::Null);
    Ok((status, value))
}

/// A request that must succeed (2xx), or one the setup may meet again (`409`: it exists).
pub fn ensure(
    http: SocketAddr,
    admin: &Credentials,
    path: &str,
    body: &str,
) -> Result<Value, String> {
    let (status, answer) = request(http, admin, "POST", path, body)?;
    match status {
        200..=299 | 409 => Ok(answer),
        _ => Err(format!("POST {path} answered {status}: {answer}")),
    }
}

/// The market a run trades on: USD (6 decimals), BTC (8) and `symbols` (each BTC/USD,
/// tick 0.01, lot 0.0001, no fees), then `accounts` accounts with money and a key each.
pub fn set_up(
    http: SocketAddr,
    admin: &Credentials,
    symbols: &[String],
    accounts: &[String],
) -> Result<Vec<Credentials>, String> {
    ensure(http, admin, "/v1/admin/assets", r#"{"asset":"USD","decimals":6}"#)?;
    ensure(http, admin, "/v1/admin/assets", r#"{"asset":"BTC","decimals":8}"#)?;
    for symbol in symbols {
        let instrument = format!(
            r#"{{"symbol":"{symbol}","base":"BTC","quote":"USD","tick":"0.01","lot":"0.0001","min_qty":"0.0001","max_qty":"1000","maker_fee_bps":0,"taker_fee_bps":0,"market_band_bps":500}}"#
        );
        ensure(http, admin, "/v1/admin/instruments", &instrument)?;
    }
    accounts_with_keys(http, admin, accounts, &[("USD", "1000000000"), ("BTC", "1000000")])
}

/// A futures market: the settle asset `settle` (2 decimals) and `symbols`, each a
/// contract in it (tick 1, lot 1, multiplier 10, a fixed margin of 100 a lot, no fees,
/// no close-today rule), then `accounts` accounts with 100,000,000 of `settle` and a
/// key each.
pub fn set_up_futures(
    http: SocketAddr,
    admin: &Credentials,
    settle: &str,
    symbols: &[String],
    accounts: &[String],
) -> Result<Vec<Credentials>, String> {
    ensure(http, admin, "/v1/admin/assets", &format!(r#"{{"asset":"{settle}","decimals":2}}"#))?;
    for symbol in symbols {
        let contract = format!(
            r#"{{"symbol":"{symbol}","settle":"{settle}","tick":"1","lot":"1","min_qty":"1","max_qty":"1000","multiplier":"10","margin":"100","maker_fee":"0","taker_fee":"0","market_band_bps":500,"close_today":false}}"#
        );
        ensure(http, admin, "/v1/admin/futures", &contract)?;
    }
    accounts_with_keys(http, admin, accounts, &[(settle, "100000000")])
}

/// `accounts` accounts (made if absent), each given `deposits` (asset, amount) and a
/// new key; the keys in the same order.
fn accounts_with_keys(
    http: SocketAddr,
    admin: &Credentials,
    accounts: &[String],
    deposits: &[(&str, &str)],
) -> Result<Vec<Credentials>, String> {
    let mut keys = Vec::with_capacity(accounts.len());
    for account in accounts {
        ensure(http, admin, "/v1/admin/accounts", &format!(r#"{{"name":"{account}"}}"#))?;
        for (asset, amount) in deposits {
            let body =
                format!(r#"{{"account":"{account}","asset":"{asset}","amount":"{amount}"}}"#);
            ensure(http, admin, "/v1/admin/deposits", &body)?;
        }
        let answer = ensure(
            http,
            admin,
            "/v1/admin/keys",
            // A load key has its own rate: the run, not the server's default limit per
            // key, decides how fast it sends.
            &format!(
                r#"{{"account":"{account}","label":"loadgen","requests_per_second":1000000000}}"#
            ),
        )?;
        let field = |name: &str| {
            answer[name]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("no {name} in {answer}"))
        };
        keys.push(Credentials { key: field("key")?, secret: field("secret")? });
    }
    Ok(keys)
}
