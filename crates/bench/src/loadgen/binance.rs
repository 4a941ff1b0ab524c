//! Order entry over the Binance-compatible REST surface (`docs/binance.md`): a new
//! order is a signed `POST /api/v3/order` (its parameters in a form body), on one
//! keep-alive HTTP/1.1 connection, pipelined as `rest` does it (whose reading half this
//! shares). It drives the `cross` flow, which is all new orders: the flows that amend
//! (`ec-mix`, `maker-taker`) need an amend Binance's spot API does not have, and are
//! refused for this protocol before the run. The loops are `drive`'s.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use bourse_protocol::signing::{self, Signer};

use super::drive::{code_of, ConnectionPlan, Requests};
use super::flow::{price_text, qty_text, Flow, OrderRequest, TimeInForce};
use super::rest::{RestAnswers, BATCH_BYTES};

const PATH: &str = "/api/v3/order";

/// Connects: the connection's sending and reading halves.
pub fn connect(plan: &ConnectionPlan) -> Result<(BinanceRequests, RestAnswers), String> {
    let stream = TcpStream::connect(plan.address).map_err(|error| format!("connect: {error}"))?;
    stream.set_nodelay(true).map_err(|error| error.to_string())?;
    let reader = stream.try_clone().map_err(|error| error.to_string())?;
    reader.set_read_timeout(Some(Duration::from_secs(10))).map_err(|error| error.to_string())?;
    let requests = BinanceRequests {
        stream,
        signer: Signer::new(&plan.credentials.secret),
        batch: Vec::with_capacity(BATCH_BYTES + 1024),
        params: String::with_capacity(256),
        flow: plan.flow(),
    };
    Ok((requests, RestAnswers::new(reader, binance_code)))
}

/// Binance's symbol for a Bourse spot symbol: without its dashes.
pub fn binance_symbol(symbol: &str) -> String {
    symbol.replace('-', "")
}

/// Bourse's reason for a Binance error body (`{"code": -2010, "msg": "…"}`), from its
/// code and, for a refused order, its message (`docs/binance.md` lists them).
fn binance_code(body: &[u8]) -> Option<u16> {
    let body = serde_json::from_slice::<serde_json::Value>(body).ok()?;
    let message = body["msg"].as_str().unwrap_or("");
    let reason = match body["code"].as_i64()? {
        -2011 | -2013 => "unknown_order",
        -1003 => "rate_limited",
        // Answered after its recvWindow (5 s): the request waited that long.
        -1021 => "expired_timestamp",
        -1121 => "unknown_symbol",
        -1013 if message.contains("PRICE_FILTER") => "invalid_price",
        -1013 => "invalid_qty",
        -2010 if message.starts_with("Duplicate order") => "duplicate_id",
        -2010 if message.starts_with("Account has insufficient") => "insufficient_funds",
        -2010 if message.starts_with("Order would immediately") => "would_cross",
        -2010 if message.starts_with("No orders on book") => "no_liquidity",
        -2010 if message.starts_with("Market is closed") => "instrument_halted",
        _ => return None,
    };
    Some(code_of(reason))
}

pub struct BinanceRequests {
    stream: TcpStream,
    signer: Signer,
    batch: Vec<u8>,
    params: String,
    flow: Flow,
}

impl BinanceRequests {
    /// Appends request `request`, with `timestamp_ms`, signed, to the batch.
    fn append(
        &mut self,
        plan: &ConnectionPlan,
        request: u64,
        timestamp_ms: u64,
    ) -> Result<(), String> {
        use std::fmt::Write as _;
        self.params.clear();
        let method = match self.flow.next(request) {
            OrderRequest::New(order) => {
                let _ = write!(
                    self.params,
                    "symbol={}&side={}&type=LIMIT&timeInForce={}&quantity={}&price={}&selfTradePreventionMode=NONE&newClientOrderId={}&newOrderRespType=RESULT",
                    binance_symbol(plan.symbol(order.symbol)),
                    if order.buy { "BUY" } else { "SELL" },
                    match order.time_in_force {
                        TimeInForce::GoodTillCancel => "GTC",
                        TimeInForce::ImmediateOrCancel => "IOC",
                        TimeInForce::FillOrKill => "FOK",
                    },
                    qty_text(order.qty_lots),
                    price_text(order.price_ticks),
                    order.client_order_id,
                );
                "POST"
            }
            // (`cross` makes only new orders: the other flows are refused before the run.)
            OrderRequest::Cancel { .. } | OrderRequest::Amend { .. } => {
                return Err("the binance protocol drives the cross flow only".to_string())
            }
        };
        let _ = write!(self.params, "&timestamp={timestamp_ms}");
        let signature = self.signer.sign(self.params.as_bytes());
        let key = &plan.credentials.key;
        let _ = write!(
            self.batch,
            "{method} {PATH} HTTP/1.1\r\nHost: bourse\r\nContent-Type: application/x-www-form-urlencoded\r\n\
             Content-Length: {}\r\nX-MBX-APIKEY: {key}\r\n\r\n{}&signature={signature}",
            self.params.len() + "&signature=".len() + signature.len(),
            self.params,
        );
        Ok(())
    }
}

impl Requests for BinanceRequests {
    fn send(&mut self, plan: &ConnectionPlan, first: u64, end: u64) -> Result<u64, String> {
        // Requests signed in the same millisecond differ (client order ids), so none is
        // refused as a replay of another.
        let timestamp_ms = signing::now_ms();
        self.batch.clear();
        let mut next = first;
        while next < end && self.batch.len() < BATCH_BYTES {
            self.append(plan, next, timestamp_ms)?;
            next += 1;
        }
        self.stream.write_all(&self.batch).map_err(|error| format!("send: {error}"))?;
        Ok(next)
    }
}
