//! The web screens (`docs/ui.md`): the trading screen and the operator console, served
//! by `bourse serve` itself at `/` from files embedded in the binary (`crates/server/ui/`),
//! so that no other web server and no network are needed. The pages are clients like
//! any other: they sign their requests with the key the user gives them and speak the
//! REST and WebSocket APIs; this module only hands out the files. It reads nothing at
//! run time and holds no state.

use axum::extract::Path;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};

use crate::port::error::{ApiError, ErrorCode};

/// An embedded file: its name under `/ui/`, its content type and its bytes.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

const ASSETS: [Asset; 4] = [
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../ui/app.js"),
    },
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("../../ui/style.css"),
    },
    Asset {
        name: "lightweight-charts.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../ui/vendor/lightweight-charts.standalone.production.js"),
    },
    Asset {
        name: "LICENSE-lightweight-charts",
        content_type: "text/plain; charset=utf-8",
        bytes: include_bytes!("../../ui/vendor/LICENSE-lightweight-charts"),
    },
];

const INDEX: &[u8] = include_bytes!("../../ui/index.html");

/// `GET /`: the screens' page.
pub async fn index() -> Response {
    ([(CONTENT_TYPE, "text/html; charset=utf-8"), (CACHE_CONTROL, "no-cache")], INDEX)
        .into_response()
}

/// `GET /ui/{file}`: one of the embedded files.
pub async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|asset| asset.name == name) {
        Some(asset) => {
            ([(CONTENT_TYPE, asset.content_type), (CACHE_CONTROL, "no-cache")], asset.bytes)
                .into_response()
        }
        None => ApiError::new(ErrorCode::NotFound, format!("no file {name:?} in the web screens"))
            .into_response(),
    }
}
