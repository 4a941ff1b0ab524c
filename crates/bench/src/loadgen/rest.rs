//! Order entry over REST: signed `POST /v1/orders`, and for cancels and amends
//! `DELETE` and `PATCH /v1/orders?client_order_id=` (`docs/api.md`), on one keep-alive
//! HTTP/1.1 connection, pipelined: the requests that are due go out back to back in
//! one write, and the responses come back in the same order (HTTP/1.1 answers a
//! connection's requests in order), so the `n`th response answers request `n`. The
//! loops are `drive`'s.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bourse_protocol::signing::{self, Signer};

use super::drive::{code_of, Answer, Answers, ConnectionPlan, Outcome, Requests, UNKNOWN_CODE};
use super::flow::{price_text, qty_text, Flow, OrderRequest};

const PATH: &str = "/v1/orders";
/// A batch of requests stops growing past this many bytes.
pub const BATCH_BYTES: usize = 60 * 1024;
/// The largest response head or body taken.
const RESPONSE_BYTES_MAX: usize = 1 << 20;

/// Connects: the connection's sending and reading halves. REST has no login: every
/// request is signed.
pub fn connect(plan: &ConnectionPlan) -> Result<(RestRequests, RestAnswers), String> {
    let stream = TcpStream::connect(plan.address).map_err(|error| format!("connect: {error}"))?;
    stream.set_nodelay(true).map_err(|error| error.to_string())?;
    let reader = stream.try_clone().map_err(|error| error.to_string())?;
    reader.set_read_timeout(Some(Duration::from_secs(10))).map_err(|error| error.to_string())?;
    let signer = Signer::new(&plan.credentials.secret);
    Ok((
        RestRequests {
            stream,
            signer,
            batch: Vec::with_capacity(BATCH_BYTES + 1024),
            body: String::with_capacity(256),
            path: String::with_capacity(128),
            message: Vec::with_capacity(512),
            flow: plan.flow(),
        },
        RestAnswers::new(reader, bourse_code),
    ))
}

/// The code of Bourse's error body, `{"code": "…", "message": …}`.
fn bourse_code(body: &[u8]) -> Option<u16> {
    let body = serde_json::from_slice::<serde_json::Value>(body).ok()?;
    body["code"].as_str().map(code_of)
}

pub struct RestRequests {
    stream: TcpStream,
    /// The secret's HMAC key, made once.
    signer: Signer,
    batch: Vec<u8>,
    body: String,
    path: String,
    message: Vec<u8>,
    flow: Flow,
}

impl RestRequests {
    /// The flow's request as a method, a path (with its query) and a JSON body: a new
    /// order is `POST /v1/orders`, a cancel `DELETE /v1/orders?client_order_id=`, an
    /// amend `PATCH /v1/orders?client_order_id=`.
    fn shape(&mut self, plan: &ConnectionPlan, request: &OrderRequest) -> &'static str {
        use std::fmt::Write as _;
        self.body.clear();
        self.path.clear();
        self.path.push_str(PATH);
        match request {
            OrderRequest::New(order) => {
                let _ = write!(self.body, "{{{}}}", order.json_fields(plan.symbol(order.symbol)));
                "POST"
            }
            OrderRequest::Cancel { client_order_id } => {
                let _ = write!(self.path, "?client_order_id={client_order_id}");
                "DELETE"
            }
            OrderRequest::Amend { client_order_id, price_ticks, qty_lots } => {
                let _ = write!(self.path, "?client_order_id={client_order_id}");
                let price = price_ticks.map(|ticks| format!(r#""price":"{}""#, price_text(ticks)));
                let qty = qty_lots.map(|lots| format!(r#""qty":"{}""#, qty_text(lots)));
                let fields: Vec<String> = price.into_iter().chain(qty).collect();
                let _ = write!(self.body, "{{{}}}", fields.join(","));
                "PATCH"
            }
        }
    }

    /// Appends request `request`, signed with `timestamp_ms`, to the batch.
    fn append(&mut self, plan: &ConnectionPlan, request: u64, timestamp_ms: u64) {
        let order_request = self.flow.next(request);
        let method = self.shape(plan, &order_request);
        let timestamp = timestamp_ms.to_string();
        self.message.clear();
        signing::write_signing_message(
            &mut self.message,
            &timestamp,
            method,
            &self.path,
            self.body.as_bytes(),
        );
        let signature = self.signer.sign(&self.message);
        let _ = write!(
            self.batch,
            "{method} {} HTTP/1.1\r\nHost: bourse\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nX-Bourse-Key: {}\r\nX-Bourse-Timestamp: {timestamp}\r\n\
             X-Bourse-Signature: {signature}\r\n\r\n{}",
            self.path,
            self.body.len(),
            plan.credentials.key,
            self.body
        );
    }
}

impl Requests for RestRequests {
    fn send(&mut self, plan: &ConnectionPlan, first: u64, end: u64) -> Result<u64, String> {
        // Requests signed in the same millisecond differ (a new order's client order
        // id; a cancel names an order once; an amend always moves its order), so none
        // is refused as a replay of another.
        let timestamp_ms = signing::now_ms();
        self.batch.clear();
        let mut next = first;
        while next < end && self.batch.len() < BATCH_BYTES {
            self.append(plan, next, timestamp_ms);
            next += 1;
        }
        self.stream.write_all(&self.batch).map_err(|error| format!("send: {error}"))?;
        Ok(next)
    }
}

/// The answers of one HTTP/1.1 connection, in order: the `n`th response answers
/// request `n`; an error's code is read from its body by the API's `code_of_body`.
pub struct RestAnswers {
    reader: BufReader<TcpStream>,
    answered: u64,
    line: Vec<u8>,
    body: Vec<u8>,
    code_of_body: fn(&[u8]) -> Option<u16>,
}

impl RestAnswers {
    pub fn new(reader: TcpStream, code_of_body: fn(&[u8]) -> Option<u16>) -> RestAnswers {
        RestAnswers {
            reader: BufReader::with_capacity(256 * 1024, reader),
            answered: 0,
            line: Vec::with_capacity(256),
            body: Vec::with_capacity(1024),
            code_of_body,
        }
    }

    /// One line of the response's head, without its CRLF.
    fn read_line(&mut self) -> Result<(), String> {
        self.line.clear();
        let read = (&mut self.reader)
            .take(RESPONSE_BYTES_MAX as u64)
            .read_until(b'\n', &mut self.line)
            .map_err(|error| format!("read: {error}"))?;
        if read == 0 {
            return Err("the server closed the connection".to_string());
        }
        if self.line.last() != Some(&b'\n') {
            return Err("a response line too long".to_string());
        }
        while matches!(self.line.last(), Some(b'\n' | b'\r')) {
            self.line.pop();
        }
        Ok(())
    }
}

impl Answers for RestAnswers {
    fn next(&mut self) -> Result<Option<Answer>, String> {
        self.read_line()?;
        let status: u16 = std::str::from_utf8(&self.line)
            .ok()
            .and_then(|line| line.strip_prefix("HTTP/1.1 "))
            .and_then(|rest| rest.get(..3))
            .and_then(|status| status.parse().ok())
            .ok_or_else(|| {
                format!("not an HTTP/1.1 response: {:?}", String::from_utf8_lossy(&self.line))
            })?;
        let mut length: Option<usize> = None;
        loop {
            self.read_line()?;
            if self.line.is_empty() {
                break;
            }
            let line = String::from_utf8_lossy(&self.line);
            let Some((name, value)) = line.split_once(':') else { continue };
            let (name, value) = (name.trim(), value.trim());
            if name.eq_ignore_ascii_case("content-length") {
                length = value.parse().ok();
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(format!("a response with transfer-encoding {value} (not supported)"));
            }
        }
        let length = length.ok_or("a response without content-length")?;
        if length > RESPONSE_BYTES_MAX {
            return Err(format!("a response of {length} bytes"));
        }
        self.body.resize(length, 0);
        self.reader.read_exact(&mut self.body).map_err(|error| format!("read: {error}"))?;
        let request = self.answered;
        self.answered += 1;
        let outcome = if status == 200 {
            Outcome::Ok
        } else {
            // (255 when it has none: not one of the server's answers.)
            Outcome::Rejected((self.code_of_body)(&self.body).unwrap_or(UNKNOWN_CODE))
        };
        Ok(Some(Answer { request, outcome }))
    }
}
