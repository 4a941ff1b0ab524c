//! The web screens' files, served by the server itself (`docs/ui.md`): the page at `/`
//! and its scripts, stylesheet and chart library under `/ui/`, each with its content
//! type, from the binary (no file is read at run time); an unknown file is a 404 with
//! the API's error shape. What the page does in a browser is tested in a real browser.

mod support;

use support::{raw_request, TestServer};

fn get(server: &TestServer, path: &str) -> (u16, Vec<u8>) {
    raw_request(server.address, "GET", path, &[], b"")
}

#[test]
fn the_page_and_its_files_are_served_from_the_binary() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (status, page) = get(&server, "/");
    assert_eq!(status, 200);
    let page = String::from_utf8(page).unwrap();
    for referenced in ["/ui/style.css", "/ui/app.js", "/ui/lightweight-charts.js"] {
        assert!(page.contains(referenced), "the page loads {referenced}");
        let (status, body) = get(&server, referenced);
        assert_eq!(status, 200, "{referenced}");
        assert!(body.len() > 100, "{referenced} has its content");
    }
    // The chart library keeps its licence and attribution.
    let (status, licence) = get(&server, "/ui/LICENSE-lightweight-charts");
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&licence).contains("Apache License"));
    assert!(page.contains("TradingView"), "the page credits TradingView");
    let (_, library) = get(&server, "/ui/lightweight-charts.js");
    assert!(String::from_utf8_lossy(&library[..300]).contains("TradingView Lightweight Charts"));
    // Nothing outside the embedded set.
    for missing in ["/ui/nope.js", "/ui/..%2Fsrc%2Flib.rs", "/ui/"] {
        let (status, _) = get(&server, missing);
        assert_eq!(status, 404, "{missing}");
    }
}
