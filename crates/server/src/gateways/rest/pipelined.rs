//! The HTTP listener. Every connection starts on a pipelined order-entry loop that
//! parses HTTP/1.1 itself: `POST /v1/orders`, and `DELETE` and `PATCH
//! /v1/orders?client_order_id=`, each signed like any private request. Those are
//! checked, submitted to the connection's own engine lane at once (a client may send
//! many before reading an answer, and they share one journal sync) and answered in the
//! order they came, exactly as the REST handlers answer them.
//!
//! The first request the loop does not take (any other route, a WebSocket upgrade,
//! HTTP/2, a chunked body, `Expect`, `Connection: close`, a head it cannot parse), once
//! the answers before it are written, hands the connection with its unread bytes to
//! axum and hyper (`HandOff`), which serve it from then on: every route, and every
//! error of HTTP itself, keeps one implementation. This module owns no business state;
//! it must never answer a request differently from the router.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::response::IntoResponse;
use futures_util::FutureExt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use crate::gateways::shared::connection::Output;
use crate::gateways::shared::http_error;
use crate::gateways::shared::json::{self, parse_body, AmendRequest, OrderRequest};
use crate::gateways::shared::socket_loop::{Input, SocketLoop, Wake};
use crate::port::error::{ApiError, ApiResult};
use crate::port::orders::answer::Detail;
use crate::port::orders::in_flight::{InFlight, Submitted};
use crate::port::orders::request::{Request, Target};
use crate::port::session::Session;
use crate::port::state::Shared;
/// Bytes read from the socket at a time, at most; a request head and body must fit.
const READ_BUFFER_BYTES: usize = 128 * 1024;
/// Header lines a request may have on the pipelined loop (more: handed to hyper).
const HEADERS_MAX: usize = 32;
const ORDERS_PATH: &str = "/v1/orders";
const CLIENT_ID_QUERY: &str = "client_order_id=";

/// Connections handed over to axum, as `axum::serve` takes them.
pub struct HandOff {
    connections: mpsc::Receiver<(Rewound, std::net::SocketAddr)>,
    local: std::net::SocketAddr,
}

impl axum::serve::Listener for HandOff {
    type Io = Rewound;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Rewound, std::net::SocketAddr) {
        match self.connections.recv().await {
            Some(connection) => connection,
            // The accept loop stopped: nothing more comes (the server is stopping).
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        Ok(self.local)
    }
}

/// Starts accepting on `listener`: the connections the pipelined loop hands over come
/// out of the returned `HandOff`. Accepting stops when `stop` turns true; the loops in
/// progress then finish the requests they took and close. `drained` completes when
/// every one of them has.
pub fn listen(
    listener: TcpListener,
    state: Shared,
    stop: watch::Receiver<bool>,
) -> io::Result<(HandOff, Drained)> {
    let local = listener.local_addr()?;
    let (hand_off, connections) = mpsc::channel(1_024);
    let (alive, drained) = mpsc::channel::<()>(1);
    tokio::spawn(accept(listener, state, stop, hand_off, alive));
    Ok((HandOff { connections, local }, Drained(drained)))
}

/// Completes once every pipelined loop has finished.
pub struct Drained(mpsc::Receiver<()>);

impl Drained {
    pub async fn wait(mut self) {
        // Each loop holds a sender; `None` once all are gone.
        let _ = self.0.recv().await;
    }
}

async fn accept(
    listener: TcpListener,
    state: Shared,
    mut stop: watch::Receiver<bool>,
    hand_off: mpsc::Sender<(Rewound, std::net::SocketAddr)>,
    alive: mpsc::Sender<()>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let state = Arc::clone(&state);
                    let hand_off = hand_off.clone();
                    let alive = alive.clone();
                    let stop = stop.clone();
                    tokio::spawn(async move {
                        if let Some(rewound) = Connection::run(state, stream, stop).await {
                            let _ = hand_off.send((rewound, peer)).await;
                        }
                        drop(alive);
                    });
                }
                // Out of file descriptors, say: wait a little rather than spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            _ = stop.changed() => return,
        }
    }
}

/// A connection's socket with the bytes already read from it put back in front, as
/// hyper must see them.
pub struct Rewound {
    unread: Vec<u8>,
    at: usize,
    stream: TcpStream,
}

impl AsyncRead for Rewound {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.at < self.unread.len() {
            let count = buffer.remaining().min(self.unread.len() - self.at);
            let start = self.at;
            buffer.put_slice(&self.unread[start..start + count]);
            self.at += count;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.stream).poll_read(context, buffer)
    }
}

impl AsyncWrite for Rewound {
    fn poll_write(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(context, bytes)
    }

    fn poll_flush(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(context)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(context)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffers: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(context, buffers)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// The order-entry routes of the pipelined loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Place,
    Cancel,
    Amend,
}

impl Route {
    /// As the router's metrics name it.
    fn name(self) -> &'static str {
        match self {
            Route::Place => "POST /v1/orders",
            Route::Cancel => "DELETE /v1/orders",
            Route::Amend => "PATCH /v1/orders",
        }
    }
}

/// What the loop keeps of a request in flight: its route and when it came.
struct Meta {
    route: Route,
    started: Instant,
}

/// What a request head asks of the loop.
enum Taken<'a> {
    /// An order-entry request: its route, the client order id of its query, its body.
    Entry { route: Route, client_id: Option<&'a str>, head: usize, body: usize },
    /// Not a whole request yet.
    Partial,
    /// For hyper, from this request on.
    HandOff,
}

struct Connection {
    state: Shared,
    in_flight: InFlight<Meta>,
    /// The bytes from here on are for hyper, once the answers before them are out.
    hand_off_at: Option<usize>,
    output: Output,
    route_metrics: crate::metrics::RouteCache,
}

impl Connection {
    /// Serves `stream` until it closes (`None`) or must go to hyper.
    async fn run(state: Shared, stream: TcpStream, stop: watch::Receiver<bool>) -> Option<Rewound> {
        let idle_timeout = Duration::from_millis(state.limits.idle_timeout_ms.max(1));
        let (in_flight, releases) = InFlight::open(&state.entry);
        let mut socket =
            SocketLoop::new(stream, READ_BUFFER_BYTES, releases, None, stop, &[idle_timeout]);
        let mut connection = Connection {
            state,
            in_flight,
            hand_off_at: None,
            output: Output::default(),
            route_metrics: crate::metrics::RouteCache::default(),
        };
        let mut failed = false;
        loop {
            let accepting = connection.hand_off_at.is_none() && !connection.in_flight.is_full();
            match socket.wake(accepting, &connection.output).await {
                // The loop has no kill switch; stopping, it reads no more.
                Wake::Killed | Wake::Stopping => socket.input.open = false,
                Wake::Released(released) => {
                    connection.in_flight.take_released(&connection.state.entry, &released).await;
                }
                Wake::Read => connection.take_input(&mut socket.input).await,
                Wake::ReadClosed | Wake::Writable | Wake::Hub(_) => {}
                Wake::Tick => {
                    let now = Instant::now();
                    let idle = now - socket.input.last_read >= idle_timeout;
                    if connection.in_flight.is_empty() && idle {
                        socket.input.open = false;
                    }
                    failed |= connection.output.stalled(now);
                }
            }
            while let Some(released) = socket.ready_released() {
                connection.in_flight.take_released(&connection.state.entry, &released).await;
            }
            connection.emit_answered();
            failed |= !socket.flush(&mut connection.output);
            if failed {
                return None;
            }
            let settled = connection.in_flight.is_empty() && !connection.output.pending();
            if settled && connection.hand_off_at.is_some() {
                return connection.hand_off(socket);
            }
            if settled && !socket.input.open {
                socket.drain(&mut connection.output).await;
                return None;
            }
        }
    }

    fn hand_off(self, socket: SocketLoop) -> Option<Rewound> {
        let at = self.hand_off_at?;
        let (stream, input) = socket.into_parts();
        let mut unread = input.buffer;
        unread.truncate(input.filled);
        // (A small copy, once per connection: the requests hyper has yet to read.)
        unread.drain(..at);
        Some(Rewound { unread, at: 0, stream })
    }

    /// Takes every whole request in the input, stopping at one for hyper.
    async fn take_input(&mut self, input: &mut Input) {
        let mut at = 0;
        while at < input.filled {
            let taken = classify(&input.buffer[at..input.filled], self.state.limits.body_bytes_max);
            match taken {
                Taken::Partial => break,
                Taken::HandOff => {
                    self.hand_off_at = Some(at);
                    return;
                }
                Taken::Entry { route, client_id, head, body } => {
                    let meta = Meta { route, started: Instant::now() };
                    let request = &input.buffer[at..at + head];
                    let body_bytes = &input.buffer[at + head..at + head + body];
                    let request = (request, client_id, body_bytes);
                    match submit(&self.state, &mut self.in_flight, route, request).await {
                        Ok(submitted) => self.in_flight.push(meta, submitted),
                        Err(error) => self.in_flight.refused(meta, error),
                    }
                    at += head + body;
                }
            }
        }
        if at == 0 && input.filled == input.buffer.len() {
            // A head and body larger than the buffer: hyper reads it (and says why not).
            self.hand_off_at = Some(0);
            return;
        }
        input.take(at);
    }

    /// Moves the answers at the front, in order, to the output.
    fn emit_answered(&mut self) {
        while let Some((meta, answer)) = self.in_flight.pop_answered() {
            let status =
                answer.as_ref().err().map_or(200, |error| http_error::status(error.code).as_u16());
            self.observe(meta.route, status, meta.started.elapsed());
            let body = answer.and_then(|answer| json::rest_body(&answer));
            self.output.push(|bytes| response(bytes, body));
        }
    }

    fn observe(&mut self, route: Route, status: u16, took: Duration) {
        let route = ("http", route.name());
        self.route_metrics.observe(&self.state.metrics, route, status, took.as_secs_f64());
    }
}

/// What the request at the start of `bytes` is, for the loop.
fn classify(bytes: &[u8], body_bytes_max: usize) -> Taken<'_> {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut request = httparse::Request::new(&mut headers);
    let head = match request.parse(bytes) {
        Ok(httparse::Status::Complete(head)) => head,
        Ok(httparse::Status::Partial) => return Taken::Partial,
        Err(_) => return Taken::HandOff,
    };
    if request.version != Some(1) {
        return Taken::HandOff;
    }
    let (Some(method), Some(target)) = (request.method, request.path) else {
        return Taken::HandOff;
    };
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (target, None),
    };
    if path != ORDERS_PATH {
        return Taken::HandOff;
    }
    let route = match (method, query) {
        ("POST", None) => Route::Place,
        ("DELETE", Some(_)) => Route::Cancel,
        ("PATCH", Some(_)) => Route::Amend,
        _ => return Taken::HandOff,
    };
    let client_id = match query {
        Some(query) => match plain_client_id(query) {
            Some(client_id) => Some(client_id),
            None => return Taken::HandOff,
        },
        None => None,
    };
    let mut body = 0;
    for header in request.headers.iter() {
        let name = header.name;
        if name.eq_ignore_ascii_case("content-length") {
            let length = std::str::from_utf8(header.value).ok().and_then(|text| text.parse().ok());
            match length {
                Some(length) if length <= body_bytes_max => body = length,
                _ => return Taken::HandOff,
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            || name.eq_ignore_ascii_case("expect")
            || name.eq_ignore_ascii_case("upgrade")
            || (name.eq_ignore_ascii_case("connection")
                && !header.value.eq_ignore_ascii_case(b"keep-alive"))
        {
            return Taken::HandOff;
        }
    }
    if bytes.len() < head + body {
        return Taken::Partial;
    }
    Taken::Entry { route, client_id, head, body }
}

/// The client order id of a query that is only `client_order_id=` and a value needing
/// no decoding; anything else goes to the router's query parser.
fn plain_client_id(query: &str) -> Option<&str> {
    let value = query.strip_prefix(CLIENT_ID_QUERY)?;
    let plain = !value.is_empty()
        && value
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"-._~:@!$'()*,;/".contains(&byte));
    plain.then_some(value)
}

/// The router's checks in the router's order (signature, then the request), and the
/// command submitted on the connection's lane.
async fn submit(
    state: &Shared,
    in_flight: &mut InFlight<Meta>,
    route: Route,
    (head, client_id, body): (&[u8], Option<&str>, &[u8]),
) -> ApiResult<Submitted> {
    let (session, request) = match decode(state, route, head, client_id, body)? {
        Decoded::Place(session, order) => {
            let request = order.decode()?;
            return in_flight.submit(&state.entry, &session, &request, Detail::Full).await;
        }
        Decoded::Change(session, request) => (session, request),
    };
    in_flight.submit(&state.entry, &session, &request, Detail::Full).await
}

/// An order-entry request read from the loop: who signed it and what it asks.
enum Decoded<'a> {
    Place(Session, OrderRequest),
    Change(Session, Request<'a>),
}

/// Checks the signature, then reads the request (in the router's order).
fn decode<'a>(
    state: &Shared,
    route: Route,
    head: &[u8],
    client_id: Option<&'a str>,
    body: &[u8],
) -> ApiResult<Decoded<'a>> {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut request = httparse::Request::new(&mut headers);
    let parsed = request.parse(head);
    let (Ok(httparse::Status::Complete(_)), Some(method), Some(target)) =
        (parsed, request.method, request.path)
    else {
        return Err(ApiError::malformed("the request head does not parse"));
    };
    let header = |name: &str| {
        request
            .headers
            .iter()
            .find(|header| header.name.eq_ignore_ascii_case(name))
            .map(|header| header.value)
    };
    let caller = state.authenticate_request_with(
        header,
        method,
        target,
        body,
        bourse_protocol::signing::now_ms(),
    )?;
    match (route, client_id) {
        (Route::Place, _) => {
            caller.account()?;
            Ok(Decoded::Place(caller, parse_body(body)?))
        }
        (Route::Cancel, Some(client_id)) => {
            caller.account()?;
            let target = Target::ClientOrderId(std::borrow::Cow::Borrowed(client_id));
            Ok(Decoded::Change(caller, Request::Cancel(target)))
        }
        (Route::Amend, Some(client_id)) => {
            let amend: AmendRequest = parse_body(body)?;
            let target = Target::ClientOrderId(std::borrow::Cow::Borrowed(client_id));
            let request = amend.decode(target)?;
            caller.account()?;
            Ok(Decoded::Change(caller, request))
        }
        (_, None) => Err(ApiError::malformed("name the order by client_order_id")),
    }
}

/// Appends the whole HTTP/1.1 response to `bytes`: `200` with the JSON body, or the
/// error as the router renders it (`ApiError`'s response: status, headers, body).
fn response(bytes: &mut Vec<u8>, result: ApiResult<Vec<u8>>) {
    match result {
        Ok(body) => {
            head(bytes, StatusCode::OK, body.len(), &[]);
            bytes.extend_from_slice(&body);
        }
        Err(error) => {
            let response = error.into_response();
            let status = response.status();
            let extra: Vec<(String, Vec<u8>)> = response
                .headers()
                .iter()
                .filter(|(name, _)| *name != "content-type" && *name != "content-length")
                .map(|(name, value)| (name.to_string(), value.as_bytes().to_vec()))
                .collect();
            // The error's body is one buffer already: it is ready at once.
            let body = axum::body::to_bytes(response.into_body(), usize::MAX)
                .now_or_never()
                .and_then(Result::ok)
                .unwrap_or_default();
            let extra: Vec<(&str, &[u8])> =
                extra.iter().map(|(name, value)| (name.as_str(), value.as_slice())).collect();
            head(bytes, status, body.len(), &extra);
            bytes.extend_from_slice(&body);
        }
    }
}

/// A response head with a JSON body of `length` bytes.
fn head(bytes: &mut Vec<u8>, status: StatusCode, length: usize, extra: &[(&str, &[u8])]) {
    use std::io::Write as _;
    let reason = status.canonical_reason().unwrap_or("");
    let _ = write!(
        bytes,
        "HTTP/1.1 {} {reason}\r\ncontent-type: application/json\r\ncontent-length: {length}\r\n",
        status.as_u16()
    );
    for (name, value) in extra {
        bytes.extend_from_slice(name.as_bytes());
        bytes.extend_from_slice(b": ");
        bytes.extend_from_slice(value);
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(b"date: ");
    http_date(bytes);
    bytes.extend_from_slice(b"\r\n\r\n");
}

/// Appends the current time as an HTTP date, formatted at most once a second per
/// thread.
fn http_date(bytes: &mut Vec<u8>) {
    use std::cell::RefCell;
    thread_local! {
        static CACHED: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let now = std::time::SystemTime::now();
    let second = now.duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_secs());
    CACHED.with(|cached| {
        let mut cached = cached.borrow_mut();
        if cached.0 != second {
            *cached = (second, httpdate::fmt_http_date(now));
        }
        bytes.extend_from_slice(cached.1.as_bytes());
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(bytes: &[u8]) -> &'static str {
        match classify(bytes, 1_024) {
            Taken::Entry { route: Route::Place, .. } => "place",
            Taken::Entry { route: Route::Cancel, .. } => "cancel",
            Taken::Entry { route: Route::Amend, .. } => "amend",
            Taken::Partial => "partial",
            Taken::HandOff => "hand off",
        }
    }

    #[test]
    fn only_plain_order_entry_stays_on_the_loop() {
        let place = b"POST /v1/orders HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(kind(place), "place");
        assert_eq!(kind(&place[..place.len() - 1]), "partial");
        assert_eq!(kind(&place[..20]), "partial");
        let cancel = b"DELETE /v1/orders?client_order_id=a-1 HTTP/1.1\r\n\r\n";
        assert_eq!(kind(cancel), "cancel");
        let amend = b"PATCH /v1/orders?client_order_id=a-1 HTTP/1.1\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(kind(amend), "amend");
        for other in [
            &b"GET /v1/orders HTTP/1.1\r\n\r\n"[..],
            b"POST /v1/orders?x=1 HTTP/1.1\r\n\r\n",
            b"DELETE /v1/orders?client_order_id=a%20b HTTP/1.1\r\n\r\n",
            b"DELETE /v1/orders?client_order_id=a&x=1 HTTP/1.1\r\n\r\n",
            b"DELETE /v1/orders?client_order_id= HTTP/1.1\r\n\r\n",
            b"DELETE /v1/orders/12 HTTP/1.1\r\n\r\n",
            b"POST /v1/orders HTTP/1.0\r\ncontent-length: 2\r\n\r\n{}",
            b"POST /v1/orders HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n",
            b"POST /v1/orders HTTP/1.1\r\nexpect: 100-continue\r\ncontent-length: 2\r\n\r\n",
            b"POST /v1/orders HTTP/1.1\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}",
            b"POST /v1/orders HTTP/1.1\r\ncontent-length: 2000\r\n\r\n",
            b"POST /v1/orders HTTP/1.1\r\ncontent-length: -1\r\n\r\n",
            b"GET /v1/ws HTTP/1.1\r\nupgrade: websocket\r\n\r\n",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            b"\x16\x03\x01 not http",
        ] {
            assert_eq!(kind(other), "hand off", "{}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn responses_carry_their_status_length_and_date() {
        let mut ok = Vec::new();
        response(&mut ok, Ok(b"{\"a\":1}".to_vec()));
        let text = String::from_utf8(ok.clone()).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("content-length: 7\r\n"));
        assert!(text.contains("\r\ndate: "));
        assert!(text.ends_with("\r\n\r\n{\"a\":1}"));
        let mut busy = ApiError::new(crate::port::error::ErrorCode::Busy, "later");
        busy.retry_after_s = Some(1);
        let mut bytes = Vec::new();
        response(&mut bytes, Err(busy));
        let busy = String::from_utf8(bytes).unwrap();
        assert!(busy.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{busy}");
        assert!(busy.contains("retry-after: 1\r\n"));
        let body = busy.split("\r\n\r\n").nth(1).unwrap();
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["code"], "busy");
        assert!(busy.contains(&format!("content-length: {}\r\n", body.to_string().len())));
    }
}
