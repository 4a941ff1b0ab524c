//! A real server on a free port, and a small blocking HTTP/1.1 client that signs its
//! requests the way docs/api.md says. No mock anywhere: requests cross a socket into
//! the same server `bourse serve` runs.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use bourse_protocol::signing::sign;
use bourse_server::{Overrides, RunningServer, ServeConfig};
use serde_json::Value;

pub struct TestServer {
    pub runtime: tokio::runtime::Runtime,
    pub server: Option<RunningServer>,
    pub address: SocketAddr,
    pub tcp_address: SocketAddr,
    pub fix_address: SocketAddr,
    pub admin: Client,
    pub demo: Vec<Client>,
}

pub fn config(data_dir: &Path) -> ServeConfig {
    let overrides = Overrides {
        data_dir: Some(data_dir.to_path_buf()),
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        tcp_listen: Some("127.0.0.1:0".parse().unwrap()),
        fix_listen: Some("127.0.0.1:0".parse().unwrap()),
        durability: None,
        marketdata: None,
        md_multicast: Some(free_multicast()),
        md_snapshot_listen: Some("127.0.0.1:0".parse().unwrap()),
        md_retransmit_listen: Some("127.0.0.1:0".parse().unwrap()),
        history: None,
        node: None,
    };
    ServeConfig::load(None, Vec::new(), &overrides).unwrap()
}

/// A multicast group and port no other test server of this run sends to.
pub fn free_multicast() -> SocketAddr {
    let probe = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    format!("239.255.77.{}:{port}", 1 + port % 250).parse().unwrap()
}

impl TestServer {
    pub fn start(data_dir: &Path, demo: bool) -> TestServer {
        TestServer::start_with(config(data_dir), demo)
    }

    pub fn start_with(config: ServeConfig, demo: bool) -> TestServer {
        let admin_file = config.data_dir.join("server").join("admin.key");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = runtime.block_on(bourse_server::start(config, demo)).unwrap();
        let address = server.http_address();
        let tcp_address = server.notes.tcp;
        let fix_address = server.notes.fix;
        let admin_text = std::fs::read_to_string(&admin_file).unwrap();
        let field = |name: &str| {
            admin_text
                .lines()
                .find_map(|line| line.strip_prefix(&format!("{name} = \"")))
                .and_then(|rest| rest.strip_suffix('"'))
                .unwrap()
                .to_string()
        };
        let admin = Client { address, key: field("key"), secret: field("secret") };
        let demo = server
            .notes
            .demo_keys
            .iter()
            .map(|(_, key, secret)| Client {
                address,
                key: key.clone(),
                secret: secret.expose().to_string(),
            })
            .collect();
        TestServer { runtime, server: Some(server), address, tcp_address, fix_address, admin, demo }
    }

    pub fn stop(mut self) {
        if let Some(server) = self.server.take() {
            self.runtime.block_on(server.shutdown()).unwrap();
        }
    }

    pub fn client(&self, key: &str, secret: &str) -> Client {
        Client { address: self.address, key: key.to_string(), secret: secret.to_string() }
    }

    /// Makes `account` (funded with `deposits`) and a key for it.
    pub fn trader(&self, account: &str, deposits: &[(&str, &str)]) -> Client {
        let (status, body) =
            self.admin.post("/v1/admin/accounts", &format!(r#"{{"name":"{account}"}}"#));
        assert_eq!(status, 201, "{body}");
        for (asset, amount) in deposits {
            let (status, body) = self.admin.post(
                "/v1/admin/deposits",
                &format!(r#"{{"account":"{account}","asset":"{asset}","amount":"{amount}"}}"#),
            );
            assert_eq!(status, 200, "{body}");
        }
        let (status, body) =
            self.admin.post("/v1/admin/keys", &format!(r#"{{"account":"{account}"}}"#));
        assert_eq!(status, 201, "{body}");
        self.client(body["key"].as_str().unwrap(), body["secret"].as_str().unwrap())
    }

    /// BTC-USD, a `seller` with `seller_btc` BTC and a `buyer` with `buyer_usd` USD.
    pub fn seller_and_buyer(&self, seller_btc: &str, buyer_usd: &str) -> (Client, Client) {
        self.declare_btc_usd();
        let seller = self.trader("seller", &[("BTC", seller_btc)]);
        let buyer = self.trader("buyer", &[("USD", buyer_usd)]);
        (seller, buyer)
    }

    /// USD (6 decimals), BTC (8) and BTC-USD (tick 0.01, lot 0.0001).
    pub fn declare_btc_usd(&self) {
        for (asset, decimals) in [("USD", 6), ("BTC", 8)] {
            let (status, body) = self.admin.post(
                "/v1/admin/assets",
                &format!(r#"{{"asset":"{asset}","decimals":{decimals}}}"#),
            );
            assert_eq!(status, 201, "{body}");
        }
        let (status, body) = self.admin.post(
            "/v1/admin/instruments",
            r#"{"symbol":"BTC-USD","base":"BTC","quote":"USD","tick":"0.01","lot":"0.0001",
                "min_qty":"0.0001","max_qty":"1000","maker_fee_bps":2,"taker_fee_bps":5,
                "market_band_bps":500}"#,
        );
        assert_eq!(status, 201, "{body}");
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            let _ = self.runtime.block_on(server.shutdown());
        }
    }
}

#[derive(Clone)]
pub struct Client {
    pub address: SocketAddr,
    pub key: String,
    pub secret: String,
}

pub fn now_ms() -> u64 {
    bourse_protocol::signing::now_ms()
}

/// A timestamp later than every one this process signed before: two identical requests
/// signed in the same millisecond would be one request replayed, so a client that may
/// send the same request twice in a millisecond makes its timestamps increase.
pub fn unique_timestamp_ms() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = now_ms();
    let previous = LAST.fetch_max(now, Ordering::SeqCst);
    if previous < now {
        return now;
    }
    LAST.fetch_add(1, Ordering::SeqCst) + 1
}

impl Client {
    pub fn get(&self, path: &str) -> (u16, Value) {
        self.signed("GET", path, "")
    }

    pub fn post(&self, path: &str, body: &str) -> (u16, Value) {
        self.signed("POST", path, body)
    }

    pub fn patch(&self, path: &str, body: &str) -> (u16, Value) {
        self.signed("PATCH", path, body)
    }

    pub fn delete(&self, path: &str) -> (u16, Value) {
        self.signed("DELETE", path, "")
    }

    pub fn put(&self, path: &str, body: &str) -> (u16, Value) {
        self.signed("PUT", path, body)
    }

    pub fn signed(&self, method: &str, path: &str, body: &str) -> (u16, Value) {
        let headers = self.signature_headers(method, path, body, unique_timestamp_ms());
        request(self.address, method, path, &headers, body.as_bytes())
    }

    pub fn signature_headers(
        &self,
        method: &str,
        path: &str,
        body: &str,
        timestamp_ms: u64,
    ) -> Vec<(String, String)> {
        let message = format!("{timestamp_ms}\n{method}\n{path}\n{body}");
        vec![
            ("X-Bourse-Key".to_string(), self.key.clone()),
            ("X-Bourse-Timestamp".to_string(), timestamp_ms.to_string()),
            ("X-Bourse-Signature".to_string(), sign(&self.secret, message.as_bytes())),
        ]
    }
}

/// One request on a fresh connection; the response's status and JSON body.
pub fn request(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> (u16, Value) {
    let (status, bytes) = raw_request(address, method, path, headers, body);
    let value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    (status, value)
}

pub fn raw_request(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    let typed = headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("content-type"));
    if !body.is_empty() && !typed {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    parse_response(&response)
}

pub fn parse_response(response: &[u8]) -> (u16, Vec<u8>) {
    let text_end =
        response.windows(4).position(|window| window == b"\r\n\r\n").expect("a response head");
    let head = String::from_utf8_lossy(&response[..text_end]);
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    let body = &response[text_end + 4..];
    let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
    (status, if chunked { dechunk(body) } else { body.to_vec() })
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line_end) = body.windows(2).position(|window| window == b"\r\n") {
        let size_text = String::from_utf8_lossy(&body[..line_end]).trim().to_string();
        let size = usize::from_str_radix(&size_text, 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.extend_from_slice(&body[line_end + 2..line_end + 2 + size]);
        body = &body[line_end + 2 + size + 2..];
    }
    out
}
