//! The REST/JSON gateway: routes, the signing check in front of private routes, and the
//! handlers. Handlers translate: a request becomes an engine command or a read, the
//! outcome becomes JSON. They hold nothing between requests but caches of values that
//! never change (instruments, assets, account ids).

mod admin;
pub mod auth;
pub mod error;
mod history;
pub mod openapi;
mod public;
pub(crate) mod trading;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use bourse_core::ids::AccountId;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::config::LimitsConfig;
use crate::keys::KeyStore;
use crate::link::EngineLink;
use crate::render::Reference;
use auth::{Authenticator, Caller};
use error::{ApiError, ApiResult};

pub struct AppState {
    pub link: EngineLink,
    /// Recent trades and tickers, kept by the feed (`ws::market`).
    market: Mutex<crate::ws::market::Market>,
    pub metrics: crate::metrics::Metrics,
    /// Subscriptions and disconnections of WebSocket connections go to the hub.
    pub hub: tokio::sync::mpsc::Sender<crate::ws::hub::HubCommand>,
    /// Logged-in WebSocket (and later TCP) connections per key.
    connections: Mutex<HashMap<String, usize>>,
    pub keys: Arc<KeyStore>,
    pub auth: Authenticator,
    pub limits: LimitsConfig,
    /// A TCP connection must log in within this long.
    pub login_timeout: std::time::Duration,
    reference: RwLock<Arc<Reference>>,
    account_ids: Mutex<HashMap<String, AccountId>>,
    pub ready: AtomicBool,
    /// The market-data publisher (`md`), when the feed is on: candles are read there.
    pub market_data: Option<std::sync::mpsc::Sender<crate::md::Input>>,
    /// The history's lookups and SQL, once it is open (`crate::history`).
    pub history: std::sync::OnceLock<Arc<crate::history::HistoryAccess>>,
}

pub type Shared = Arc<AppState>;

/// The services beside the engine that the API reads: the market-data feed and the
/// history's figures, when they are on.
pub struct Services {
    pub market_data: Option<crate::md::FeedLink>,
    pub history: Option<Arc<bourse_history::HistoryStats>>,
}

impl AppState {
    pub fn new(
        link: EngineLink,
        hub: tokio::sync::mpsc::Sender<crate::ws::hub::HubCommand>,
        keys: Arc<KeyStore>,
        auth: Authenticator,
        limits: LimitsConfig,
        login_timeout: std::time::Duration,
        services: Services,
    ) -> AppState {
        let Services { market_data, history: history_stats } = services;
        let (market_data, feed_figures) = match market_data {
            Some(feed) => (Some(feed.publisher), Some(feed.figures)),
            None => (None, None),
        };
        AppState {
            market: Mutex::new(crate::ws::market::Market::default()),
            metrics: crate::metrics::Metrics::new(link.figures(), feed_figures, history_stats),
            link,
            hub,
            connections: Mutex::new(HashMap::new()),
            keys,
            auth,
            limits,
            login_timeout,
            reference: RwLock::new(Arc::new(Reference::default())),
            account_ids: Mutex::new(HashMap::new()),
            ready: AtomicBool::new(false),
            market_data,
            history: std::sync::OnceLock::new(),
        }
    }

    /// Instruments and assets as last read; `refresh_reference` reads them again.
    pub fn reference(&self) -> Arc<Reference> {
        Arc::clone(&self.reference.read().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    pub async fn refresh_reference(&self) -> ApiResult<Arc<Reference>> {
        let reference = Arc::new(self.link.read(|venue| Reference::read(venue.exchange())).await?);
        *self.reference.write().unwrap_or_else(|poisoned| poisoned.into_inner()) =
            Arc::clone(&reference);
        Ok(reference)
    }

    /// The reference data, read again when it does not know `symbol` (or an instrument
    /// id) yet.
    pub async fn reference_knowing(&self, instrument_count: usize) -> ApiResult<Arc<Reference>> {
        let reference = self.reference();
        if reference.instruments.len() >= instrument_count {
            return Ok(reference);
        }
        self.refresh_reference().await
    }

    /// The reference data, read again only when it does not know `symbol` yet.
    pub async fn reference_with_symbol(&self, symbol: &str) -> ApiResult<Arc<Reference>> {
        let reference = self.reference();
        if reference.find_instrument(symbol).is_some() {
            return Ok(reference);
        }
        self.refresh_reference().await
    }

    /// The reference data knowing every instrument of `instruments`.
    pub async fn reference_for(
        &self,
        instruments: impl Iterator<Item = bourse_core::ids::InstrumentId>,
    ) -> ApiResult<Arc<Reference>> {
        let needed = instruments.map(|instrument| instrument.index() + 1).max().unwrap_or(0);
        self.reference_knowing(needed).await
    }

    /// The engine's id of `account`, once it exists there (its first deposit).
    pub async fn account_id(&self, account: &str) -> ApiResult<Option<AccountId>> {
        if let Some(id) = self.cached_account_id(account) {
            return Ok(Some(id));
        }
        let name = account.to_string();
        let found =
            self.link.read(move |venue| venue.exchange().ledger().find_account(&name)).await?;
        if let Some(id) = found {
            self.account_ids
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .insert(account.to_string(), id);
        }
        Ok(found)
    }

    pub fn market(&self) -> std::sync::MutexGuard<'_, crate::ws::market::Market> {
        self.market.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts a logged-in connection of `key`; refused beyond the limit per key.
    pub fn claim_connection(&self, key: &str) -> Result<(), (&'static str, String)> {
        let mut connections =
            self.connections.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = connections.entry(key.to_string()).or_insert(0);
        if *count >= self.limits.connections_per_key {
            return Err((
                "too_many_connections",
                format!(
                    "this key has {count} connections; at most {} are allowed",
                    self.limits.connections_per_key
                ),
            ));
        }
        *count += 1;
        Ok(())
    }

    pub fn release_connection(&self, key: &str) {
        let mut connections =
            self.connections.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = connections.get_mut(key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                connections.remove(key);
            }
        }
    }

    fn cached_account_id(&self, account: &str) -> Option<AccountId> {
        self.account_ids
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(account)
            .copied()
    }
}

pub fn router(state: Shared) -> Router {
    let private = Router::new()
        .route(
            "/v1/orders",
            post(trading::place_order)
                .get(trading::list_orders)
                .delete(trading::cancel_by_client)
                .patch(trading::amend_by_client),
        )
        .route(
            "/v1/orders/{order_id}",
            get(trading::get_order).delete(trading::cancel_order).patch(trading::amend_order),
        )
        .route("/v1/fills", get(trading::fills))
        .route("/v1/balances", get(trading::balances))
        .route("/v1/admin/assets", post(admin::create_asset))
        .route("/v1/admin/instruments", post(admin::create_instrument))
        .route("/v1/admin/instruments/{symbol}/halt", post(admin::halt))
        .route("/v1/admin/instruments/{symbol}/resume", post(admin::resume))
        .route("/v1/admin/accounts/{account}/cancel-all", post(admin::cancel_all))
        .route("/v1/admin/accounts", post(admin::create_account).get(admin::list_accounts))
        .route("/v1/admin/accounts/{account}/balances", get(admin::account_balances_route))
        .route("/v1/admin/keys", post(admin::create_key).get(admin::list_keys))
        .route("/v1/admin/keys/{key_id}", delete(admin::revoke_key))
        .route("/v1/admin/history", get(history::status))
        .route("/v1/admin/history/orders/{order_id}", get(history::order))
        .route("/v1/admin/history/trades/{trade_id}", get(history::trade))
        .route("/v1/admin/history/accounts/{account}/fills", get(history::fills))
        .route("/v1/admin/sql", post(history::sql))
        .route("/v1/admin/deposits", post(admin::deposit))
        .route("/v1/admin/withdrawals", post(admin::withdraw))
        .route_layer(middleware::from_fn_with_state(Arc::clone(&state), authenticate))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            crate::metrics::count_requests,
        ));
    let public = Router::new()
        .route("/health", get(public::health))
        .route("/ready", get(public::ready))
        .route("/openapi.json", get(openapi::document))
        .route("/v1/ws", get(crate::ws::upgrade))
        .route("/v1/instruments", get(public::instruments))
        .route("/v1/depth/{symbol}", get(public::depth))
        .route("/v1/trades/{symbol}", get(public::trades))
        .route("/v1/ticker/{symbol}", get(public::ticker))
        .route("/v1/l3/{symbol}", get(public::l3))
        .route("/v1/candles/{symbol}", get(public::candles))
        .route("/metrics", get(crate::metrics::render))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            crate::metrics::count_requests,
        ));
    Router::new()
        .merge(private)
        .merge(public)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(Arc::clone(&state), limit_body))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::not_found("not_found", "no such endpoint (see /openapi.json)")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this endpoint does not take that method",
    )
}

/// Reads the whole body (up to the limit) so that handlers and the signature check see
/// the same bytes.
async fn limit_body(State(state): State<Shared>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let limit = state.limits.body_bytes_max;
    let bytes = match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                format!("the request body is over {limit} bytes (or could not be read)"),
            )
            .into_response()
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

async fn authenticate(State(state): State<Shared>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    // `limit_body` has buffered the body already: this only takes it out again.
    let bytes = match axum::body::to_bytes(body, state.limits.body_bytes_max).await {
        Ok(bytes) => bytes,
        Err(_) => return ApiError::malformed("the body could not be read").into_response(),
    };
    let path_and_query = parts.uri.path_and_query().map_or("/", |path| path.as_str());
    let caller = state.auth.authenticate(
        &state.keys,
        &parts.headers,
        parts.method.as_str(),
        path_and_query,
        &bytes,
        crate::now_ms(),
    );
    match caller {
        Ok(caller) => {
            parts.extensions.insert(caller);
            next.run(Request::from_parts(parts, Body::from(bytes))).await
        }
        Err(error) => error.into_response(),
    }
}

/// `axum::extract::Query` with this API's error shape: a query string that does not
/// parse (a wrong type, an unknown parameter) is `400 malformed` with the reason.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> axum::extract::FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(ApiError::malformed(rejection.body_text())),
        }
    }
}

/// `axum::extract::Path` with this API's error shape.
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> axum::extract::FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(ApiPath(value)),
            Err(rejection) => Err(ApiError::malformed(rejection.body_text())),
        }
    }
}

/// Parses a JSON body into `T`, with a `malformed` error that says what is wrong.
pub fn parse_body<T: DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    if body.is_empty() {
        return Err(ApiError::malformed("a JSON body is required"));
    }
    serde_json::from_slice(body)
        .map_err(|error| ApiError::malformed(format!("invalid JSON body: {error}")))
}

/// A decimal string field, exactly as the replay format takes it.
pub fn parse_decimal(field: &'static str, text: &str) -> ApiResult<bourse_core::Decimal> {
    bourse_core::Decimal::parse(text).ok_or_else(|| {
        ApiError::malformed(format!("{field} must be a decimal string like \"12.5\", not {text:?}"))
    })
}

pub fn ok(value: serde_json::Value) -> Response {
    (StatusCode::OK, Json(value)).into_response()
}

pub fn created(value: serde_json::Value) -> Response {
    (StatusCode::CREATED, Json(value)).into_response()
}

pub fn mark_ready(state: &AppState) {
    state.ready.store(true, Ordering::SeqCst);
}

pub fn caller_json(caller: &Caller) -> serde_json::Value {
    json!({ "key": caller.key.id, "account": caller.key.account })
}
