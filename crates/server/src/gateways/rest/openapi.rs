//! The OpenAPI 3.1 description served at `/openapi.json`: every route, its parameters,
//! bodies and error shape. `docs/api.md` is the prose; a test checks that the two name
//! the same routes as the router.

use axum::response::Response;
use bourse_protocol::client_order_id::CLIENT_ORDER_ID_BYTES_MAX;
use serde_json::{json, Value};

use super::extract::ok;

/// What a route needs of its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Public,
    /// Signed with an API key (docs/api.md, Signing).
    Signed,
    /// `Authorization: Bearer` with an access token of the token endpoint.
    Bearer,
}

use Access::{Bearer, Public, Signed};

/// Every route: (path, method, summary, what it needs, request body schema name).
pub const ROUTES: &[(&str, &str, &str, Access, Option<&str>)] = &[
    ("/health", "get", "The process is up", Public, None),
    ("/ready", "get", "The engine has recovered and takes commands", Public, None),
    ("/openapi.json", "get", "This document", Public, None),
    (
        "/v1/cluster",
        "get",
        "In a cluster, this node's view of it: leader, term, commit, applied sequence, lag",
        Public,
        None,
    ),
    ("/v1/instruments", "get", "All instruments", Public, None),
    ("/v1/depth/{symbol}", "get", "Aggregated depth, best first (?levels=1..1000)", Public, None),
    (
        "/v1/trades/{symbol}",
        "get",
        "Recent trades, oldest first (?limit=1..1000, since the server started)",
        Public,
        None,
    ),
    (
        "/v1/ticker/{symbol}",
        "get",
        "The 24-hour ticker (trades since the server started)",
        Public,
        None,
    ),
    (
        "/v1/l3/{symbol}",
        "get",
        "Every resting order in priority order, with the engine sequence number of that state",
        Public,
        None,
    ),
    (
        "/v1/candles/{symbol}",
        "get",
        "Candles, empty intervals included (?interval=1s|1m|5m|15m|1h|1d&from_ns=&limit=1..1000)",
        Public,
        None,
    ),
    (
        "/v1/orders",
        "post",
        "Place an order (acknowledged once durable)",
        Signed,
        Some("OrderRequest"),
    ),
    (
        "/v1/orders",
        "get",
        "Open orders (?status=open|finished, ?client_order_id=, ?symbol=)",
        Signed,
        None,
    ),
    ("/v1/orders", "delete", "Cancel by client order id (?client_order_id=)", Signed, None),
    (
        "/v1/orders",
        "patch",
        "Amend by client order id (?client_order_id=)",
        Signed,
        Some("AmendRequest"),
    ),
    ("/v1/orders/{order_id}", "get", "One order by the exchange's id", Signed, None),
    ("/v1/orders/{order_id}", "delete", "Cancel an order", Signed, None),
    (
        "/v1/orders/{order_id}",
        "patch",
        "Amend an order's price and/or remaining quantity",
        Signed,
        Some("AmendRequest"),
    ),
    ("/v1/fills", "get", "The account's latest fills (?symbol=, ?limit=)", Signed, None),
    ("/v1/balances", "get", "The account's balances", Signed, None),
    (
        "/v1/key",
        "get",
        "The key that signed the request: its role and account (any key)",
        Signed,
        None,
    ),
    ("/v1/positions", "get", "The account's futures positions", Signed, None),
    ("/v1/account", "get", "The account's futures account per settle asset", Signed, None),
    (
        "/v1/admin/cluster/add",
        "post",
        "Add a node of the cluster's file: a learner until caught up, then a voter",
        Signed,
        None,
    ),
    ("/v1/admin/cluster/remove", "post", "Remove a node from the cluster", Signed, None),
    ("/v1/admin/futures", "post", "Declare a futures contract", Signed, None),
    (
        "/v1/admin/futures",
        "get",
        "Live futures contracts: margin, ratio, posted, mark and settlement prices",
        Signed,
        None,
    ),
    ("/v1/admin/futures/{symbol}/margin", "post", "Set a contract's margin or ratio", Signed, None),
    (
        "/v1/admin/futures/{symbol}/settlement-price",
        "post",
        "Post the next settlement's price",
        Signed,
        None,
    ),
    ("/v1/admin/futures/{symbol}/settle", "post", "Settle now (final: expire)", Signed, None),
    (
        "/v1/admin/futures/{symbol}/liquidate",
        "post",
        "Force-close an account's position",
        Signed,
        None,
    ),
    ("/v1/admin/assets", "post", "Declare an asset", Signed, Some("AssetRequest")),
    ("/v1/admin/instruments", "post", "Declare a spot instrument", Signed, Some("InstrumentRequest")),
    (
        "/v1/admin/instruments/{symbol}/halt",
        "post",
        "Halt an instrument (new orders and amends rejected; cancels work)",
        Signed,
        None,
    ),
    ("/v1/admin/instruments/{symbol}/resume", "post", "Resume a halted instrument", Signed, None),
    (
        "/v1/admin/accounts/{account}/cancel-all",
        "post",
        "Cancel every open order of an account (?symbol=)",
        Signed,
        None,
    ),
    ("/v1/admin/accounts", "post", "Create an account", Signed, Some("AccountRequest")),
    ("/v1/admin/accounts", "get", "All accounts", Signed, None),
    ("/v1/admin/accounts/{account}/balances", "get", "An account's balances", Signed, None),
    (
        "/v1/admin/keys",
        "post",
        "Create a trader key (the answer holds its secret, once)",
        Signed,
        Some("KeyRequest"),
    ),
    ("/v1/admin/keys", "get", "All keys (no secrets)", Signed, None),
    ("/v1/admin/keys/{key_id}", "delete", "Revoke a key", Signed, None),
    ("/v1/admin/deposits", "post", "Credit an account", Signed, Some("TransferRequest")),
    ("/v1/admin/withdrawals", "post", "Debit an account", Signed, Some("TransferRequest")),
    (
        "/v1/admin/accounts/{account}/password",
        "put",
        "Set an account's password (for logins by name and password: tqsdk's)",
        Signed,
        Some("PasswordRequest"),
    ),
    ("/v1/admin/accounts/{account}/password", "delete", "Remove an account's password", Signed, None),
    (
        "/auth/realms/shinnytech/protocol/openid-connect/token",
        "post",
        "tqsdk's login: a form (grant_type=password with username and password, or grant_type=refresh_token with refresh_token) answered with tokens",
        Public,
        Some("TokenForm"),
    ),
    (
        "/auth/realms/shinnytech/rest/update-grant-accounts/{account}",
        "put",
        "tqsdk: the caller's next tokens also grant this account",
        Bearer,
        None,
    ),
    ("/auth/realms/shinnytech/rest/get-grant/tq", "get", "tqsdk: when the access token expires and what it grants", Bearer, None),
];

pub async fn document() -> Response {
    ok(openapi())
}

pub fn openapi() -> Value {
    let mut paths = serde_json::Map::new();
    for (path, method, summary, access, body) in ROUTES {
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        let mut operation = json!({
            "summary": summary,
            "parameters": parameters(path),
            "responses": {
                "200": { "description": "OK", "content": { "application/json": { "schema": { "type": "object" } } } },
                "default": { "description": "An error", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } }
            }
        });
        match access {
            Public => {}
            Signed => {
                operation["security"] = json!([{ "key": [], "timestamp": [], "signature": [] }]);
            }
            Bearer => operation["security"] = json!([{ "bearer": [] }]),
        }
        if let Some(schema) = body {
            let media = match *schema {
                "TokenForm" => "application/x-www-form-urlencoded",
                _ => "application/json",
            };
            operation["requestBody"] = json!({
                "required": true,
                "content": { media: { "schema": { "$ref": format!("#/components/schemas/{schema}") } } }
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
                               "description": "hex HMAC-SHA256(secret, timestamp \\n METHOD \\n path_and_query \\n body)" },
                "bearer": { "type": "http", "scheme": "bearer", "bearerFormat": "JWT",
                            "description": "an access token of POST /auth/realms/shinnytech/protocol/openid-connect/token" }
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
        "OrderRequest": { "type": "object", "additionalProperties": false, "required": ["symbol", "side", "type"],
            "properties": {
                "symbol": { "type": "string" },
                "side": { "enum": ["buy", "sell"] },
                "type": { "enum": ["limit", "market"] },
                "price": decimal(), "qty": decimal(), "quote_qty": decimal(),
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
        "PasswordRequest": { "type": "object", "additionalProperties": false, "required": ["password"],
            "properties": { "password": { "type": "string", "description": "8 to 128 bytes" } } },
        "TokenForm": { "type": "object", "required": ["grant_type"],
            "properties": { "grant_type": { "enum": ["password", "refresh_token"] },
                            "username": { "type": "string" }, "password": { "type": "string" },
                            "refresh_token": { "type": "string" },
                            "client_id": { "type": "string" }, "client_secret": { "type": "string" } } },
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
