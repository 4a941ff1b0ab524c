//! `bourse loadgen-sink`: a stand-in for the server that answers every order at once
//! and does nothing else (no engine, no journal, no checks), so that a load run against
//! it measures the load generator alone: the rate the tool can drive, per protocol.
//!
//! - On `--tcp`, the binary protocol (its codec is the server's,
//!   `bourse_protocol::binary`): any login is accepted, each `NewOrder`, `Cancel` or
//!   `Amend` is answered `Accepted` with its request id.
//! - On `--http` (if given), REST and WebSocket: each HTTP/1.1 request (keep-alive,
//!   pipelined) is answered `200` with a fixed small JSON body; a WebSocket upgrade on
//!   `/v1/ws` is accepted, any `login` answered `logged_in`, each `order`, `cancel` or
//!   `amend` answered `ack` with its `req_id`.
//!
//! One thread per connection; answers go out when nothing more is waiting to be read.

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use bourse_protocol::binary::{
    decode_client_borrowed, frame_length, ClientMessage, NewOrder, ServerMessage, FRAME_BYTES_MAX,
    FRAME_HEADER_BYTES,
};
use clap::Args;
use serde::Deserialize;
use serde_json::value::RawValue;
use tungstenite::Message;

#[derive(Args, Clone, Debug)]
pub struct SinkArgs {
    /// Where to listen for binary order entry.
    #[arg(long, default_value = "127.0.0.1:9190")]
    tcp: std::net::SocketAddr,
    /// Where to listen for REST and WebSocket order entry (none by default).
    #[arg(long)]
    http: Option<std::net::SocketAddr>,
}

pub fn run(args: &SinkArgs) -> Result<(), String> {
    let listener = TcpListener::bind(args.tcp)
        .map_err(|error| format!("cannot listen on {}: {error}", args.tcp))?;
    let address = listener.local_addr().map_err(|error| error.to_string())?;
    let http = match args.http {
        Some(http) => {
            let listener = TcpListener::bind(http)
                .map_err(|error| format!("cannot listen on {http}: {error}"))?;
            Some(listener)
        }
        None => None,
    };
    println!("loadgen sink: answering binary order entry on tcp://{address}");
    if let Some(http) = http {
        let address = http.local_addr().map_err(|error| error.to_string())?;
        println!("loadgen sink: answering REST and WebSocket order entry on http://{address}");
        std::thread::spawn(move || {
            for stream in http.incoming().flatten() {
                std::thread::spawn(move || {
                    let _ = answer_http(stream);
                });
            }
        });
    }
    for stream in listener.incoming().flatten() {
        std::thread::spawn(move || {
            let _ = answer(stream);
        });
    }
    Ok(())
}

/// Answers one connection until it closes.
fn answer(stream: TcpStream) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut reader = BufReader::with_capacity(256 * 1024, stream.try_clone()?);
    let mut writer = BufWriter::with_capacity(256 * 1024, stream);
    let mut frame = [0u8; FRAME_BYTES_MAX];
    let mut reply = Vec::with_capacity(128);
    loop {
        let mut header = [0u8; FRAME_HEADER_BYTES];
        if reader.read_exact(&mut header).is_err() {
            return Ok(());
        }
        // A length outside the protocol's leaves nothing to read the next frame by.
        let Ok(length) = frame_length(header) else { return Ok(()) };
        reader.read_exact(&mut frame[..length])?;
        reply.clear();
        let answer = match decode_client_borrowed(&frame[..length]) {
            Ok(ClientMessage::Login { .. }) => ServerMessage::LoggedIn { account: "sink" },
            Ok(
                ClientMessage::NewOrder(NewOrder { request_id, client_order_id, .. })
                | ClientMessage::Cancel { request_id, client_order_id }
                | ClientMessage::Amend { request_id, client_order_id, .. },
            ) => ServerMessage::Accepted {
                request_id,
                order_id: request_id,
                seq: request_id,
                ts_ns: 0,
                client_order_id,
            },
            _ => continue, // status requests, heartbeats, frames that do not decode
        };
        answer.encode_into(&mut reply);
        writer.write_all(&reply)?;
        // Answers go out when nothing more is waiting to be read.
        if reader.buffer().is_empty() {
            writer.flush()?;
        }
    }
}

/// The largest request head taken (REST or the WebSocket upgrade).
const HEAD_BYTES_MAX: usize = 16 * 1024;

/// Answers one connection on `--http`: a WebSocket upgrade, or REST.
fn answer_http(stream: TcpStream) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    if upgrades_to_websocket(&stream)? {
        answer_websocket(stream)
    } else {
        answer_rest(stream)
    }
}

/// Whether the connection's first request (peeked at, not taken) asks for a WebSocket.
fn upgrades_to_websocket(stream: &TcpStream) -> std::io::Result<bool> {
    let mut head = vec![0u8; HEAD_BYTES_MAX];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let peeked = stream.peek(&mut head)?;
        let seen = &head[..peeked];
        let complete = seen.windows(4).any(|window| window == b"\r\n\r\n");
        if complete || peeked == 0 || peeked == head.len() || Instant::now() > deadline {
            let text = String::from_utf8_lossy(seen).to_ascii_lowercase();
            return Ok(text.contains("\r\nupgrade: websocket"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The answer to every REST request.
const REST_ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
    content-length: 27\r\n\r\n{\"order\":{\"status\":\"open\"}}";

/// Answers HTTP/1.1 requests (keep-alive, pipelined) until the connection closes.
fn answer_rest(stream: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::with_capacity(256 * 1024, stream.try_clone()?);
    let mut writer = BufWriter::with_capacity(256 * 1024, stream);
    let mut line = Vec::with_capacity(256);
    let mut body = Vec::with_capacity(1024);
    loop {
        // The head: the request line and headers, up to an empty line.
        let mut length = 0usize;
        let mut first = true;
        loop {
            line.clear();
            if (&mut reader).take(HEAD_BYTES_MAX as u64).read_until(b'\n', &mut line)? == 0 {
                return Ok(());
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end();
            if text.is_empty() {
                if first {
                    continue; // a stray CRLF between requests
                }
                break;
            }
            first = false;
            if let Some((name, value)) = text.split_once(':') {
                if name.trim().eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        body.resize(length.min(1 << 20), 0);
        reader.read_exact(&mut body)?;
        writer.write_all(REST_ANSWER)?;
        if reader.buffer().is_empty() {
            writer.flush()?;
        }
    }
}

/// A stream whose writes wait in a buffer until it is read from (or the buffer is
/// large): a WebSocket's answers go out when the requests read so far are all answered.
struct WriteBeforeRead {
    stream: TcpStream,
    pending: Vec<u8>,
}

impl WriteBeforeRead {
    fn write_pending(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            self.stream.write_all(&self.pending)?;
            self.pending.clear();
        }
        Ok(())
    }
}

impl Read for WriteBeforeRead {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        self.write_pending()?;
        self.stream.read(buffer)
    }
}

impl Write for WriteBeforeRead {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.pending.len() >= 64 * 1024 {
            self.write_pending()?;
        }
        Ok(())
    }
}

/// The fields of a request the sink looks at.
#[derive(Deserialize)]
struct Request<'a> {
    op: Option<&'a str>,
    #[serde(borrow)]
    req_id: Option<&'a RawValue>,
}

/// Answers WebSocket messages until the connection closes.
fn answer_websocket(stream: TcpStream) -> std::io::Result<()> {
    let stream = WriteBeforeRead { stream, pending: Vec::with_capacity(64 * 1024) };
    let mut socket = tungstenite::accept(stream).map_err(std::io::Error::other)?;
    loop {
        let text = match socket.read() {
            Ok(Message::Text(text)) => text,
            Ok(Message::Close(_)) | Err(_) => return Ok(()),
            Ok(_) => continue,
        };
        let Ok(request) = serde_json::from_str::<Request<'_>>(text.as_str()) else { continue };
        let answer = match (request.op, request.req_id) {
            (Some("login"), _) => r#"{"type":"logged_in","account":"sink"}"#.to_string(),
            (Some("ping"), _) => r#"{"type":"pong"}"#.to_string(),
            (Some("order" | "cancel" | "amend"), Some(req_id)) => {
                format!(r#"{{"op":"ack","req_id":{},"order":{{"status":"open"}}}}"#, req_id.get())
            }
            _ => continue,
        };
        socket.write(Message::text(answer)).map_err(std::io::Error::other)?;
        // Into the stream's buffer: out on its next read.
        socket.flush().map_err(std::io::Error::other)?;
    }
}
