//! `bourse loadgen sink`: a stand-in for the server that answers every order at once
//! and does nothing else (no engine, no journal, no checks), so that a load run against
//! it measures the load generator alone: the rate the tool can drive, per protocol.
//! It speaks the binary protocol's framing: any login is accepted, each `NewOrder` is
//! answered `Accepted` with its request id.

use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream};

use bourse_server::tcp::wire::{client, server, FrameWriter, CLIENT_ORDER_ID_BYTES, TEXT_BYTES};
use clap::Args;

#[derive(Args, Clone, Debug)]
pub struct SinkArgs {
    /// Where to listen for binary order entry.
    #[arg(long, default_value = "127.0.0.1:9190")]
    tcp: std::net::SocketAddr,
}

pub fn run(args: &SinkArgs) -> Result<(), String> {
    let listener = TcpListener::bind(args.tcp)
        .map_err(|error| format!("cannot listen on {}: {error}", args.tcp))?;
    let address = listener.local_addr().map_err(|error| error.to_string())?;
    println!("loadgen sink: answering binary order entry on tcp://{address}");
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
    let mut frame = [0u8; 256];
    loop {
        let mut length = [0u8; 2];
        if reader.read_exact(&mut length).is_err() {
            return Ok(());
        }
        let length = usize::from(u16::from_le_bytes(length)).min(frame.len());
        reader.read_exact(&mut frame[..length])?;
        let reply = match frame[0] {
            client::LOGIN => FrameWriter::new(server::LOGGED_IN).text("sink", TEXT_BYTES).finish(),
            client::NEW_ORDER if length >= 9 => {
                let request_id = u64::from_le_bytes(frame[1..9].try_into().unwrap_or([0; 8]));
                let client_order_id = &frame[9..(9 + CLIENT_ORDER_ID_BYTES).min(length)];
                FrameWriter::new(server::ACCEPTED)
                    .u64(request_id)
                    .u64(request_id)
                    .u64(request_id)
                    .u64(0)
                    .bytes(client_order_id)
                    .finish()
            }
            _ => continue,
        };
        writer.write_all(&reply)?;
        // Answers go out when nothing more is waiting to be read.
        if reader.buffer().is_empty() {
            writer.flush()?;
        }
    }
}
