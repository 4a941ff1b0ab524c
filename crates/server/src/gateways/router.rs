//! The routes of every HTTP surface on the one HTTP port: Bourse's own REST API
//! (`rest`), the WebSocket gateways (`ws`, and `diff` for tqsdk), the
//! Binance-compatible REST (`binance`), tqsdk's login routes and the web screens
//! (`ui`). It owns the routing and the limits every HTTP request meets (the body's
//! size, the signing check in front of private routes, the request counts); what a
//! route does is its gateway's.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::Router;

use super::{binance, diff, rest, ui, ws};
use crate::metrics;
use crate::port::error::{ApiError, ErrorCode};
use crate::port::state::Shared;

pub fn router(state: Shared) -> Router {
    let private = Router::new()
        .route(
            "/v1/orders",
            post(rest::trading::place_order)
                .get(rest::trading::list_orders)
                .delete(rest::trading::cancel_by_client)
                .patch(rest::trading::amend_by_client),
        )
        .route(
            "/v1/orders/{order_id}",
            get(rest::trading::get_order)
                .delete(rest::trading::cancel_order)
                .patch(rest::trading::amend_order),
        )
        .route("/v1/fills", get(rest::trading::fills))
        .route("/v1/balances", get(rest::trading::balances))
        .route("/v1/key", get(rest::admin::own_key))
        .route("/v1/positions", get(rest::futures::positions))
        .route("/v1/account", get(rest::futures::account))
        .route(
            "/v1/admin/futures",
            post(rest::futures::create_future).get(rest::futures::list_futures),
        )
        .route("/v1/admin/futures/{symbol}/margin", post(rest::futures::set_margin))
        .route("/v1/admin/futures/{symbol}/settlement-price", post(rest::futures::post_price))
        .route("/v1/admin/futures/{symbol}/settle", post(rest::futures::settle))
        .route("/v1/admin/futures/{symbol}/liquidate", post(rest::futures::liquidate))
        .route("/v1/admin/assets", post(rest::admin::create_asset))
        .route("/v1/admin/instruments", post(rest::admin::create_instrument))
        .route("/v1/admin/instruments/{symbol}/halt", post(rest::admin::halt))
        .route("/v1/admin/instruments/{symbol}/resume", post(rest::admin::resume))
        .route("/v1/admin/accounts/{account}/cancel-all", post(rest::admin::cancel_all))
        .route(
            "/v1/admin/accounts",
            post(rest::admin::create_account).get(rest::admin::list_accounts),
        )
        .route("/v1/admin/accounts/{account}/balances", get(rest::admin::account_balances_route))
        .route(
            "/v1/admin/accounts/{account}/password",
            put(rest::admin::set_password).delete(rest::admin::remove_password),
        )
        .route("/v1/admin/keys", post(rest::admin::create_key).get(rest::admin::list_keys))
        .route("/v1/admin/keys/{key_id}", delete(rest::admin::revoke_key))
        .route("/v1/admin/cluster/add", post(rest::admin::add_node))
        .route("/v1/admin/cluster/remove", post(rest::admin::remove_node))
        .route("/v1/admin/history", get(rest::history::status))
        .route("/v1/admin/history/orders/{order_id}", get(rest::history::order))
        .route("/v1/admin/history/trades/{trade_id}", get(rest::history::trade))
        .route("/v1/admin/history/accounts/{account}/fills", get(rest::history::fills))
        .route("/v1/admin/sql", post(rest::history::sql))
        .route("/v1/admin/deposits", post(rest::admin::deposit))
        .route("/v1/admin/withdrawals", post(rest::admin::withdraw))
        .route_layer(middleware::from_fn_with_state(Arc::clone(&state), rest::authenticate))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&state.metrics),
            metrics::count_requests,
        ));
    let public = Router::new()
        .route("/", get(ui::index))
        .route("/ui/{file}", get(ui::asset))
        .route("/health", get(rest::public::health))
        .route("/ready", get(rest::public::ready))
        .route("/v1/cluster", get(rest::public::cluster))
        .route("/openapi.json", get(rest::openapi::document))
        .route("/v1/ws", get(ws::upgrade))
        .route("/ws/diff", get(diff::session::upgrade))
        .route("/v1/instruments", get(rest::public::instruments))
        .route("/v1/depth/{symbol}", get(rest::public::depth))
        .route("/v1/trades/{symbol}", get(rest::public::trades))
        .route("/v1/ticker/{symbol}", get(rest::public::ticker))
        .route("/v1/l3/{symbol}", get(rest::public::l3))
        .route("/v1/candles/{symbol}", get(rest::public::candles))
        .route("/metrics", get(rest::public::metrics))
        .route("/auth/realms/shinnytech/protocol/openid-connect/token", post(rest::openid::token))
        .route(
            "/auth/realms/shinnytech/rest/update-grant-accounts/{account}",
            put(rest::openid::update_grant_accounts),
        )
        .route("/auth/realms/shinnytech/rest/get-grant/tq", get(rest::openid::get_grant))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&state.metrics),
            metrics::count_requests,
        ));
    let binance = binance::router().route_layer(middleware::from_fn_with_state(
        Arc::clone(&state.metrics),
        metrics::count_requests,
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
    ApiError::new(ErrorCode::NotFound, "no such endpoint (see /openapi.json)")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(ErrorCode::MethodNotAllowed, "this endpoint does not take that method")
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
                ErrorCode::BodyTooLarge,
                format!("the request body is over {limit} bytes (or could not be read)"),
            )
            .into_response()
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}
