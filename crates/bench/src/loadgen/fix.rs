//! Order entry over FIX 4.4 (`docs/fix.md`): a Logon signed with the connection's API
//! key (ResetSeqNumFlag, so each run starts at 1), then the flow's NewOrderSingle (D),
//! OrderCancelRequest (F) and OrderCancelReplaceRequest (G), all that are due in one
//! write, each with the next MsgSeqNum. A request's ClOrdID (11) is the flow's id for a
//! new order and `{prefix}-{request}` for a cancel or replace, so the first
//! ExecutionReport (8) or OrderCancelReject (9) that carries it answers request
//! `request`: accepted, unless it is a rejection (ExecType 8, or a 9), whose Text
//! starts with Bourse's reason code. Later reports of the same order (its fills) answer
//! nothing. The loops are `drive`'s.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bourse_protocol::fix::{self, tag, Field, Message, Writer};
use bourse_protocol::signing::{self, Signer, FIX_LOGIN_PATH, LOGIN_METHOD};

use super::admin::Credentials;
use super::drive::{code_of, Answer, Answers, ConnectionPlan, Outcome, Requests};
use super::flow::{price_text, qty_text, Flow, OrderRequest, TimeInForce};

/// The venue's CompID (`[fix] comp_id`, `BOURSE` unless set).
pub const VENUE_COMP_ID: &str = "BOURSE";
/// HeartBtInt asked for: longer than a run's quiet moments.
const HEARTBEAT_S: u64 = 60;
const BATCH_BYTES: usize = 60 * 1024;

/// Connects and logs on: the connection's sending and reading halves.
pub fn connect(plan: &ConnectionPlan) -> Result<(FixRequests, FixAnswers), String> {
    let mut stream =
        TcpStream::connect(plan.address).map_err(|error| format!("connect: {error}"))?;
    stream.set_nodelay(true).map_err(|error| error.to_string())?;
    let sender = format!("LOADGEN{}", plan.index);
    let mut writer = Writer::default();
    let mut out = Vec::with_capacity(512);
    log_on(&mut stream, &mut writer, &mut out, &sender, &plan.credentials)?;
    let reader = stream.try_clone().map_err(|error| error.to_string())?;
    reader.set_read_timeout(Some(Duration::from_secs(10))).map_err(|error| error.to_string())?;
    let mut answers = FixAnswers {
        reader,
        buffer: Vec::with_capacity(256 * 1024),
        start: 0,
        fields: Vec::with_capacity(64),
        prefix: plan.client_order_id_prefix(),
        answered: Vec::new(),
    };
    // The Logon's answer (a Logout says why not).
    match answers.next_message()? {
        Received::Logon => {}
        Received::Logout(text) => return Err(format!("logon refused: {text}")),
        Received::Other => return Err("the logon was not answered with a Logon".to_string()),
    }
    let requests = FixRequests {
        stream,
        writer,
        batch: Vec::with_capacity(BATCH_BYTES + 1024),
        sender,
        next_seq: 2,
        flow: plan.flow(),
        prefix: plan.client_order_id_prefix(),
        cl_ord_id: String::with_capacity(64),
    };
    Ok((requests, answers))
}

/// The Logon of `docs/fix.md`: Username the key id, RawData the signature of its
/// SendingTime.
fn log_on(
    stream: &mut TcpStream,
    writer: &mut Writer,
    out: &mut Vec<u8>,
    sender: &str,
    credentials: &Credentials,
) -> Result<(), String> {
    let now = signing::now_ms();
    let message = signing::signing_message(&now.to_string(), LOGIN_METHOD, FIX_LOGIN_PATH, b"");
    let signature = Signer::new(&credentials.secret).sign(&message);
    writer
        .start("A")
        .str(tag::SENDER_COMP_ID, sender)
        .str(tag::TARGET_COMP_ID, VENUE_COMP_ID)
        .number(tag::MSG_SEQ_NUM, 1)
        .timestamp(tag::SENDING_TIME, now)
        .number(tag::ENCRYPT_METHOD, 0)
        .number(tag::HEART_BT_INT, HEARTBEAT_S)
        .char(tag::RESET_SEQ_NUM_FLAG, b'Y')
        .str(tag::USERNAME, &credentials.key)
        .number(tag::RAW_DATA_LENGTH, signature.len() as u64)
        .str(tag::RAW_DATA, &signature);
    out.clear();
    writer.finish(out);
    stream.write_all(out).map_err(|error| format!("logon: {error}"))
}

pub struct FixRequests {
    stream: TcpStream,
    writer: Writer,
    batch: Vec<u8>,
    sender: String,
    next_seq: u64,
    flow: Flow,
    prefix: String,
    cl_ord_id: String,
}

impl FixRequests {
    /// Appends request `request` of the flow, sent at `now_ms`, to the batch.
    fn append(&mut self, plan: &ConnectionPlan, request: u64, now_ms: u64) {
        use std::fmt::Write as _;
        let order_request = self.flow.next(request);
        let msg_type = match &order_request {
            OrderRequest::New(_) => "D",
            OrderRequest::Cancel { .. } => "F",
            OrderRequest::Amend { .. } => "G",
        };
        self.writer
            .start(msg_type)
            .str(tag::SENDER_COMP_ID, &self.sender)
            .str(tag::TARGET_COMP_ID, VENUE_COMP_ID)
            .number(tag::MSG_SEQ_NUM, self.next_seq)
            .timestamp(tag::SENDING_TIME, now_ms);
        self.next_seq += 1;
        match &order_request {
            OrderRequest::New(order) => {
                self.writer
                    .str(tag::CL_ORD_ID, &order.client_order_id)
                    .str(tag::SYMBOL, plan.symbol(order.symbol))
                    .char(tag::SIDE, if order.buy { b'1' } else { b'2' })
                    .str(tag::ORDER_QTY, &qty_text(order.qty_lots))
                    .char(tag::ORD_TYPE, b'2')
                    .str(tag::PRICE, &price_text(order.price_ticks))
                    .char(
                        tag::TIME_IN_FORCE,
                        match order.time_in_force {
                            TimeInForce::GoodTillCancel => b'1',
                            TimeInForce::ImmediateOrCancel => b'3',
                            TimeInForce::FillOrKill => b'4',
                        },
                    )
                    .timestamp(tag::TRANSACT_TIME, now_ms);
            }
            OrderRequest::Cancel { client_order_id }
            | OrderRequest::Amend { client_order_id, .. } => {
                self.cl_ord_id.clear();
                let _ = write!(self.cl_ord_id, "{}-{request}", self.prefix);
                // Side and Symbol are required by FIX; Bourse finds the order by its id.
                self.writer
                    .str(tag::ORIG_CL_ORD_ID, client_order_id)
                    .str(tag::CL_ORD_ID, &self.cl_ord_id)
                    .char(tag::SIDE, b'1')
                    .str(tag::SYMBOL, plan.symbol(0))
                    .timestamp(tag::TRANSACT_TIME, now_ms);
                if let OrderRequest::Amend { price_ticks, qty_lots, .. } = &order_request {
                    self.writer.char(tag::ORD_TYPE, b'2');
                    if let Some(ticks) = price_ticks {
                        self.writer.str(tag::PRICE, &price_text(*ticks));
                    }
                    if let Some(lots) = qty_lots {
                        self.writer.str(tag::ORDER_QTY, &qty_text(*lots));
                    }
                }
            }
        }
        self.writer.finish(&mut self.batch);
    }
}

impl Requests for FixRequests {
    fn send(&mut self, plan: &ConnectionPlan, first: u64, end: u64) -> Result<u64, String> {
        let now_ms = signing::now_ms();
        self.batch.clear();
        let mut next = first;
        while next < end && self.batch.len() < BATCH_BYTES {
            self.append(plan, next, now_ms);
            next += 1;
        }
        self.stream.write_all(&self.batch).map_err(|error| format!("send: {error}"))?;
        Ok(next)
    }
}

/// What a message read is, as far as the loop cares.
enum Received {
    Logon,
    Logout(String),
    Other,
}

pub struct FixAnswers {
    reader: TcpStream,
    /// Bytes read and not yet taken, from `start`.
    buffer: Vec<u8>,
    start: usize,
    fields: Vec<Field>,
    /// The connection's client order id prefix (ids are `{prefix}-{request}`).
    prefix: String,
    /// Which requests have had their answer.
    answered: Vec<bool>,
}

impl FixAnswers {
    /// The next whole message's length at `start`, reading more as needed.
    fn next_frame(&mut self) -> Result<usize, String> {
        loop {
            if let Some(length) = fix::frame(&self.buffer[self.start..])
                .map_err(|error| format!("read: {}", error.text()))?
            {
                return Ok(length);
            }
            if self.start > 0 {
                self.buffer.drain(..self.start);
                self.start = 0;
            }
            let filled = self.buffer.len();
            self.buffer.resize(filled + 64 * 1024, 0);
            let read = self.reader.read(&mut self.buffer[filled..]);
            let read = match read {
                Ok(0) => Err("the server closed the connection".to_string()),
                Ok(read) => Ok(read),
                Err(error) => Err(format!("read: {error}")),
            };
            match read {
                Ok(read) => self.buffer.truncate(filled + read),
                Err(error) => {
                    self.buffer.truncate(filled);
                    return Err(error);
                }
            }
        }
    }

    fn next_message(&mut self) -> Result<Received, String> {
        let length = self.next_frame()?;
        let bytes = &self.buffer[self.start..self.start + length];
        self.start += length;
        let message = Message::parse(bytes, &mut self.fields)
            .map_err(|error| format!("a message that does not parse: {error:?}"))?;
        Ok(match message.msg_type() {
            Some("A") => Received::Logon,
            Some("5") => Received::Logout(message.text(tag::TEXT).unwrap_or("").to_string()),
            _ => Received::Other,
        })
    }

    /// The request a ClOrdID names on this connection, once.
    fn first_answer_of(&mut self, cl_ord_id: &str) -> Option<u64> {
        let request: u64 =
            cl_ord_id.strip_prefix(self.prefix.as_str())?.strip_prefix('-')?.parse().ok()?;
        let index = usize::try_from(request).ok()?;
        if self.answered.len() <= index {
            self.answered.resize(index + 1, false);
        }
        (!std::mem::replace(&mut self.answered[index], true)).then_some(request)
    }
}

impl Answers for FixAnswers {
    fn next(&mut self) -> Result<Option<Answer>, String> {
        let length = self.next_frame()?;
        let (start, end) = (self.start, self.start + length);
        self.start = end;
        let bytes = &self.buffer[start..end];
        let mut fields = std::mem::take(&mut self.fields);
        let result = (|| {
            let message = Message::parse(bytes, &mut fields)
                .map_err(|error| format!("a message that does not parse: {error:?}"))?;
            let msg_type = message.msg_type().unwrap_or("");
            if msg_type == "5" {
                let text = message.text(tag::TEXT).unwrap_or("");
                return Err(format!("the server logged out: {text}"));
            }
            if msg_type == "3" {
                let text = message.text(tag::TEXT).unwrap_or("");
                return Err(format!("the server rejected a message: {text}"));
            }
            let rejected = match msg_type {
                "8" => message.get(tag::EXEC_TYPE) == Some(b"8"),
                "9" => true,
                _ => return Ok(None), // heartbeats, test requests
            };
            let Some(cl_ord_id) = message.text(tag::CL_ORD_ID) else { return Ok(None) };
            let text = message.text(tag::TEXT).unwrap_or("").to_string();
            Ok(Some((cl_ord_id.to_string(), rejected, text)))
        })();
        self.fields = fields;
        let Some((cl_ord_id, rejected, text)) = result? else { return Ok(None) };
        let Some(request) = self.first_answer_of(&cl_ord_id) else { return Ok(None) };
        let outcome = if rejected {
            // Text is "code: message".
            Outcome::Rejected(code_of(text.split(':').next().unwrap_or("")))
        } else {
            Outcome::Ok
        };
        Ok(Some(Answer { request, outcome }))
    }
}
