//! A Binance-compatible REST surface for spot (`docs/binance.md`): the part of
//! Binance's `/api/v3/` that ccxt's `binance` class and other Binance clients call, on
//! the HTTP listener, so that software written for Binance trades on Bourse with a
//! Bourse API key. It is a gateway like the others: it decodes Binance's parameters
//! (`params`), checks Binance's signature with the key's secret (`authenticate`),
//! hands orders to the one order path (`order_entry`) and reads to the engine, and
//! renders the answers in Binance's shapes (`shapes`) and its errors with Binance's
//! codes (`error`). The rules are Bourse's (durable acknowledgement, client order ids,
//! rate limits, replay refusal); only the shapes differ. It holds no state and never
//! decides anything the engine or order entry decides.
//!
//! Only spot instruments are listed, under symbols without a separator (`BTCUSD`).

pub mod error;
mod market;
pub mod params;
pub mod shapes;
mod trading;

use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::routing::get;
use axum::Router;

use crate::port::auth::SignedMessage;
use crate::port::session::Session;
use crate::port::state::Shared;
use error::{BinanceError, BinanceResult};
use params::Params;

/// The header that carries the API key.
pub const KEY_HEADER: &str = "x-mbx-apikey";
/// `recvWindow` when a request gives none, and the most it may give (ms), as Binance.
pub const RECV_WINDOW_DEFAULT_MS: u64 = 5_000;
pub const RECV_WINDOW_MAX_MS: u64 = 60_000;
/// How far ahead of the server's clock a timestamp may be (ms), as Binance.
pub const AHEAD_MAX_MS: u64 = 1_000;
/// A timestamp at or above this is in microseconds (Binance takes both).
const MICROSECONDS_FROM: u64 = 100_000_000_000_000;

pub fn router() -> Router<Shared> {
    Router::new()
        .route("/api/v3/ping", get(market::ping))
        .route("/api/v3/time", get(market::time))
        .route("/api/v3/exchangeInfo", get(market::exchange_info))
        .route("/api/v3/depth", get(market::depth))
        .route("/api/v3/trades", get(market::trades))
        .route("/api/v3/aggTrades", get(market::agg_trades))
        .route("/api/v3/klines", get(market::klines))
        .route("/api/v3/ticker/24hr", get(market::ticker_24hr))
        .route("/api/v3/ticker/price", get(market::ticker_price))
        .route("/api/v3/ticker/bookTicker", get(market::book_ticker))
        .route("/api/v3/account", get(trading::account))
        .route(
            "/api/v3/order",
            get(trading::get_order).post(trading::new_order).delete(trading::cancel_order),
        )
        .route("/api/v3/openOrders", get(trading::open_orders))
        .route("/api/v3/allOrders", get(trading::all_orders))
        .route("/api/v3/myTrades", get(trading::my_trades))
}

/// A Binance request as its handlers take it: the headers, the query string and the
/// body, read once (the router's body limit has applied).
pub struct BinanceRequest {
    headers: HeaderMap,
    query: String,
    body: Bytes,
}

impl<S: Send + Sync> axum::extract::FromRequest<S> for BinanceRequest {
    type Rejection = BinanceError;

    async fn from_request(request: axum::extract::Request, _: &S) -> BinanceResult<Self> {
        let (parts, body) = request.into_parts();
        let body = axum::body::to_bytes(body, usize::MAX)
            .await
            .map_err(|_| BinanceError::bad_request(-1100, "The request body could not be read."))?;
        let query = parts.uri.query().unwrap_or("").to_string();
        Ok(BinanceRequest { headers: parts.headers, query, body })
    }
}

impl BinanceRequest {
    /// A public endpoint's parameters (the query string).
    pub fn public(&self) -> BinanceResult<Params<'_>> {
        Params::parse(&self.query, b"")
    }

    /// A signed endpoint's caller and parameters (`authenticate`).
    pub fn signed(&self, state: &Shared) -> BinanceResult<(Session, Params<'_>)> {
        let now_ms = bourse_protocol::signing::now_ms();
        authenticate(state, &self.headers, &self.query, &self.body, now_ms)
    }
}

/// Checks a signed request the way Binance does, in Binance's order: the API key
/// (`X-MBX-APIKEY`), the parameters, `timestamp` within `recvWindow` of the server's
/// clock, then the signature over the query string and the body; then Bourse's own
/// rules for every signed request (a signature is accepted once, the key's rate).
pub fn authenticate<'a>(
    state: &Shared,
    headers: &HeaderMap,
    query: &'a str,
    body: &'a [u8],
    now_ms: u64,
) -> BinanceResult<(Session, Params<'a>)> {
    let key_id = headers
        .get(KEY_HEADER)
        .and_then(|value| value.to_str().ok())
        .filter(|key| !key.is_empty())
        .ok_or_else(|| BinanceError::bad_request(-2014, "API-key format invalid."))?;
    let key = state.active_key(key_id)?;
    let params = Params::parse(query, body)?;
    let timestamp = params.required("timestamp")?;
    let timestamp: u64 = timestamp.parse().map_err(|_| {
        BinanceError::bad_request(-1100, "Illegal characters found in parameter 'timestamp'.")
    })?;
    let timestamp_ms = if timestamp >= MICROSECONDS_FROM { timestamp / 1_000 } else { timestamp };
    let recv_window_ms = match params.get("recvWindow") {
        None => RECV_WINDOW_DEFAULT_MS,
        Some(text) => match text.parse::<u64>() {
            Ok(window) if window <= RECV_WINDOW_MAX_MS => window,
            _ => {
                return Err(BinanceError::bad_request(
                    -1131,
                    format!("recvWindow must be less than {RECV_WINDOW_MAX_MS}"),
                ))
            }
        },
    };
    if timestamp_ms >= now_ms + AHEAD_MAX_MS {
        return Err(BinanceError::bad_request(
            -1021,
            format!("Timestamp for this request was {AHEAD_MAX_MS}ms ahead of the server's time."),
        ));
    }
    if now_ms.saturating_sub(timestamp_ms) > recv_window_ms {
        return Err(BinanceError::bad_request(
            -1021,
            "Timestamp for this request is outside of the recvWindow.",
        ));
    }
    let (message, signature_hex) = params::signed_payload(query, body).ok_or_else(|| {
        BinanceError::bad_request(
            -1102,
            "Mandatory parameter 'signature' was not sent, was empty/null, or malformed.",
        )
    })?;
    let signed = SignedMessage {
        message: &message,
        signature_hex,
        expires_ms: timestamp_ms + recv_window_ms + 1,
    };
    let session = state.authenticate_message(key, &signed, now_ms)?;
    Ok((session, params))
}
