//! The REST/JSON gateway: routes, the signing check in front of private routes, and the
//! handlers. Handlers translate: a request becomes an engine command or a read, the
//! outcome becomes JSON. They hold nothing between requests but caches of values that
//! never change (instruments, assets, account ids). Besides the API itself it serves
//! tqsdk's login routes under `/auth/realms/shinnytech/` (`openid`), which are the
//! login and so are not signed.

mod admin;
mod extract;
mod futures;
mod history;
pub mod openapi;
mod openid;
mod public;
mod trading;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::Router;

use crate::error::ApiError;
use crate::state::Shared;

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
        .route("/v1/positions", get(futures::positions))
        .route("/v1/account", get(futures::account))
        .route("/v1/admin/futures", post(futures::create_future).get(futures::list_futures))
        .route("/v1/admin/futures/{symbol}/margin", post(futures::set_margin))
        .route("/v1/admin/futures/{symbol}/settlement-price", post(futures::post_price))
        .route("/v1/admin/futures/{symbol}/settle", post(futures::settle))
        .route("/v1/admin/futures/{symbol}/liquidate", post(futures::liquidate))
        .route("/v1/admin/assets", post(admin::create_asset))
        .route("/v1/admin/instruments", post(admin::create_instrument))
        .route("/v1/admin/instruments/{symbol}/halt", post(admin::halt))
        .route("/v1/admin/instruments/{symbol}/resume", post(admin::resume))
        .route("/v1/admin/accounts/{account}/cancel-all", post(admin::cancel_all))
        .route("/v1/admin/accounts", post(admin::create_account).get(admin::list_accounts))
        .route("/v1/admin/accounts/{account}/balances", get(admin::account_balances_route))
        .route(
            "/v1/admin/accounts/{account}/password",
            put(admin::set_password).delete(admin::remove_password),
        )
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
            Arc::clone(&state.metrics),
            crate::metrics::count_requests,
        ));
    let public = Router::new()
        .route("/", get(crate::ui::index))
        .route("/ui/{file}", get(crate::ui::asset))
        .route("/health", get(public::health))
        .route("/ready", get(public::ready))
        .route("/openapi.json", get(openapi::document))
        .route("/v1/ws", get(crate::ws::upgrade))
        .route("/ws/diff", get(crate::diff::session::upgrade))
        .route("/v1/instruments", get(public::instruments))
        .route("/v1/depth/{symbol}", get(public::depth))
        .route("/v1/trades/{symbol}", get(public::trades))
        .route("/v1/ticker/{symbol}", get(public::ticker))
        .route("/v1/l3/{symbol}", get(public::l3))
        .route("/v1/candles/{symbol}", get(public::candles))
        .route("/metrics", get(public::metrics))
        .route("/auth/realms/shinnytech/protocol/openid-connect/token", post(openid::token))
        .route(
            "/auth/realms/shinnytech/rest/update-grant-accounts/{account}",
            put(openid::update_grant_accounts),
        )
        .route("/auth/realms/shinnytech/rest/get-grant/tq", get(openid::get_grant))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&state.metrics),
            crate::metrics::count_requests,
        ));
    let binance = crate::binance::router().route_layer(middleware::from_fn_with_state(
        Arc::clone(&state.metrics),
        crate::metrics::count_requests,
    ));
    Router::new()
        .merge(private)
        .merge(public)
        .merge(binance)
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
        bourse_protocol::signing::now_ms(),
    );
    match caller {
        Ok(caller) => {
            parts.extensions.insert(caller);
            next.run(Request::from_parts(parts, Body::from(bytes))).await
        }
        Err(error) => error.into_response(),
    }
}
