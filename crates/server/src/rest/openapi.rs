//! The OpenAPI 3.1 description served at `/openapi.json`: every route, its parameters,
//! bodies and error shape. `docs/api.md` is the prose; a test checks that the two name
//! the same routes as the router.

use axum::response::Response;
use bourse_protocol::client_order_id::CLIENT_ORDER_ID_BYTES_MAX;
use serde_json::{json, Value};

use super::extract::ok;

/// Every route: (path, method, summary, needs a key, request body schema name).
pub const ROUTES: &[(&str, &str, &str, bool, Option<&str>)] = &[
    ("/health", "get", "The process is up", false, None),
    ("/ready", "get", "The engine has recovered and takes commands", false, None),
    ("/openapi.json", "get", "This document", false, None),
    ("/v1/instruments", "get", "All instruments", false, None),
    ("/v1/depth/{symbol}", "get", "Aggregated depth, best first (?levels=1..1000)", false, None),
    (
        "/v1/trades/{symbol}",
        "get",
        "Recent trades, oldest first (?limit=1..1000, since the server started)",
        false,
        None,
    ),
    (
        "/v1/ticker/{symbol}",
        "get",
        "The 24-hour ticker (trades since the server started)",
        false,
        None,
    ),
    (
        "/v1/l3/{symbol}",
        "get",
        "Every resting order in priority order, with the engine sequence number of that state",
        false,
        None,
    ),
    (
        "/v1/candles/{symbol}",
        "get",
        "Candles, empty intervals included (?interval=1s|1m|5m|15m|1h|1d&from_ns=&limit=1..1000)",
        false,
        None,
    ),
    (
        "/v1/orders",
        "post",
        "Place an order (acknowledged once durable)",
        true,
        Some("OrderRequest"),
    ),
    (
        "/v1/orders",
        "get",
        "Open orders (?status=open|finished, ?client_order_id=, ?symbol=)",
        true,
        None,
    ),
    ("/v1/orders", "delete", "Cancel by client order id (?client_order_id=)", true, None),
    (
        "/v1/orders",
        "patch",
        "Amend by client order id (?client_order_id=)",
        true,
        Some("AmendRequest"),
    ),
    ("/v1/orders/{order_id}", "get", "One order by the exchange's id", true, None),
    ("/v1/orders/{order_id}", "delete", "Cancel an order", true, None),
    (
        "/v1/orders/{order_id}",
        "patch",
        "Amend an order's price and/or remaining quantity",
        true,
        Some("AmendRequest"),
    ),
    ("/v1/fills", "get", "The account's latest fills (?symbol=, ?limit=)", true, None),
    ("/v1/balances", "get", "The account's balances", true, None),
    ("/v1/admin/assets", "post", "Declare an asset", true, Some("AssetRequest")),
    ("/v1/admin/instruments", "post", "Declare a spot instrument", true, Some("InstrumentRequest")),
    (
        "/v1/admin/instruments/{symbol}/halt",
        "post",
        "Halt an instrument (new orders and amends rejected; cancels work)",
        true,
        None,
    ),
    ("/v1/admin/instruments/{symbol}/resume", "post", "Resume a halted instrument", true, None),
    (
        "/v1/admin/accounts/{account}/cancel-all",
        "post",
        "Cancel every open order of an account (?symbol=)",
        true,
        None,
    ),
    ("/v1/admin/accounts", "post", "Create an account", true, Some("AccountRequest")),
    ("/v1/admin/accounts", "get", "All accounts", true, None),
    ("/v1/admin/accounts/{account}/balances", "get", "An account's balances", true, None),
    (
        "/v1/admin/keys",
        "post",
        "Create a trader key (the answer holds its secret, once)",
        true,
        Some("KeyRequest"),
    ),
    ("/v1/admin/keys", "get", "All keys (no secrets)", true, None),
    ("/v1/admin/keys/{key_id}", "delete", "Revoke a key", true, None),
    ("/v1/admin/deposits", "post", "Credit an account", true, Some("TransferRequest")),
    ("/v1/admin/withdrawals", "post", "Debit an account", true, Some("TransferRequest")),
];

pub async fn document() -> Response {
    ok(openapi())
}

pub fn openapi() -> Value {
    let mut paths = serde_json::Map::new();
    for (path, method, summary, signed, body) in ROUTES {
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        let mut operation = json!({
            "summary": summary,
            "parameters": parameters(path),
            "responses": {
                "200": { "description": "OK", "content": { "application/json": { "schema": { "type": "object" } } } },
                "default": { "description": "An error", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } }
            }
        });
        if *signed {
            operation["security"] = json!([{ "key": [], "timestamp": [], "signature": [] }]);
        }
        if let Some(schema) = body {
            operation["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } }
            });
        }
        entry[*method] = operation;
    }
    json!({
        "openapi": "3.1.0",
        "info": { "title": "Bourse REST API", "version": env!("CARGO_PKG_VERSION"),
                  "description": "See docs/api.md: decimal strings for every number, HMAC-SHA256 signed requests, acknowledgements once durable." },
        "paths": paths,
        "components": {
            "securitySchemes": {
                "key": { "type": "apiKey", "in": "header", "name": "X-Bourse-Key" },
                "timestamp": { "type": "apiKey", "in": "header", "name": "X-Bourse-Timestamp" },
                "signature": { "type": "apiKey", "in": "header", "name": "X-Bourse-Signature",
                               "description": "hex HMAC-SHA256(secret, timestamp \\n METHOD \\n path_and_query \\n body)" }
            },
            "schemas": schemas()
        }
    })
}

fn parameters(path: &str) -> Value {
    let names: Vec<&str> = path
        .split('/')
        .filter_map(|part| part.strip_prefix('{').and_then(|part| part.strip_suffix('}')))
        .collect();
    Value::Array(
        names
            .into_iter()
            .map(|name| json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } }))
            .collect(),
    )
}

fn decimal() -> Value {
    json!({ "type": "string", "pattern": "^-?[0-9]+(\\.[0-9]+)?$" })
}

fn schemas() -> Value {
    json!({
        "Error": { "type": "object", "required": ["code", "message"],
                   "properties": { "code": { "type": "string" }, "message": { "type": "string" }, "order": { "type": "object" } } },
        "OrderRequest": { "type": "object", "additionalProperties": false, "required": ["symbol", "side", "type", "qty"],
            "properties": {
                "symbol": { "type": "string" },
                "side": { "enum": ["buy", "sell"] },
                "type": { "enum": ["limit", "market"] },
                "price": decimal(), "qty": decimal(),
                "time_in_force": { "enum": ["gtc", "ioc", "fok"] },
                "post_only": { "type": "boolean" },
                "stp": { "enum": ["cancel_taker", "cancel_maker", "cancel_both", "none"] },
                "client_order_id": { "type": "string", "minLength": 1, "maxLength": CLIENT_ORDER_ID_BYTES_MAX } } },
        "AmendRequest": { "type": "object", "additionalProperties": false,
            "properties": { "price": decimal(), "qty": decimal() } },
        "AssetRequest": { "type": "object", "additionalProperties": false, "required": ["asset", "decimals"],
            "properties": { "asset": { "type": "string" }, "decimals": { "type": "integer", "minimum": 0, "maximum": 18 } } },
        "InstrumentRequest": { "type": "object", "additionalProperties": false,
            "required": ["symbol", "base", "quote", "tick", "lot", "min_qty", "max_qty", "maker_fee_bps", "taker_fee_bps", "market_band_bps"],
            "properties": { "symbol": { "type": "string" }, "base": { "type": "string" }, "quote": { "type": "string" },
                "tick": decimal(), "lot": decimal(), "min_qty": decimal(), "max_qty": decimal(),
                "maker_fee_bps": { "type": "integer" }, "taker_fee_bps": { "type": "integer" }, "market_band_bps": { "type": "integer" } } },
        "AccountRequest": { "type": "object", "additionalProperties": false, "required": ["name"],
            "properties": { "name": { "type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$" } } },
        "KeyRequest": { "type": "object", "additionalProperties": false, "required": ["account"],
            "properties": { "account": { "type": "string" }, "label": { "type": "string" },
                            "requests_per_second": { "type": "integer", "minimum": 1 } } },
        "TransferRequest": { "type": "object", "additionalProperties": false, "required": ["account", "asset", "amount"],
            "properties": { "account": { "type": "string" }, "asset": { "type": "string" }, "amount": decimal() } }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_s_client_order_id_is_described_by_the_rule() {
        let id = &schemas()["OrderRequest"]["properties"]["client_order_id"];
        assert_eq!(id["maxLength"], CLIENT_ORDER_ID_BYTES_MAX);
        assert_eq!(id["minLength"], 1);
    }
}
