//! `bourse bench md`: the market-data feed's own costs on exchange-core's stream. The
//! commands go through the core venue twice, without and with the feed's builder
//! (`FeedBuilder` and the engine's `book_note`): the difference is what deriving the
//! feed costs per command. Then the messages are encoded and packed into MoldUDP64
//! packets and sent to a multicast group on loopback (the publisher's work per
//! message), and a subscriber rebuilds the books from the packets (its work per
//! message); its books must equal the publisher's at the end.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Instant;

use bourse_core::{Exchange, Seq, TimestampNs, Venue};
use bourse_marketdata::message::Message;
use bourse_marketdata::mold::{self, PacketWriter};
use bourse_marketdata::{FeedBuilder, Rebuilder};
use clap::Args;

use super::workload;

#[derive(Args)]
pub struct MdArgs {
    /// The exchange-core stream (`shared/anchors/exchange-core/workload.jsonl.gz`).
    #[arg(long, default_value = "../shared/anchors/exchange-core/workload.jsonl.gz")]
    file: PathBuf,
    /// Commands of the stream to use (its setup, then this many).
    #[arg(long, default_value_t = 1_000_000)]
    commands: usize,
    /// Where the packets are sent (a multicast group on loopback by default).
    #[arg(long, default_value = "239.255.66.9:31009")]
    multicast: SocketAddr,
    #[arg(long)]
    json: bool,
}

pub fn run(args: &MdArgs) -> Result<(), String> {
    let mut stream =
        workload::from_file("exchange-core", &args.file, super::engine::EXCHANGE_CORE_SETUP_LINES)?;
    stream.measured.truncate(args.commands);
    let commands: Vec<_> = stream.setup.iter().chain(stream.measured.iter()).collect();

    // The venue alone.
    let mut venue = Venue::new(Exchange::default(), false);
    let mut events = Vec::new();
    let started = Instant::now();
    for (index, command) in commands.iter().enumerate() {
        events.clear();
        venue.apply(Seq(index as u64 + 1), Some(TimestampNs(index as u64)), command, &mut events);
    }
    let venue_alone = started.elapsed();

    // The venue and the feed's builder.
    let mut venue = Venue::new(Exchange::default(), false);
    let mut builder = FeedBuilder::default();
    builder.announce(
        bourse_core::ids::InstrumentId(0),
        "EC",
        0,
        0,
        bourse_marketdata::message::KIND_SPOT,
        &mut Vec::new(),
    );
    let mut messages: Vec<Message> = Vec::with_capacity(commands.len() * 3);
    let started = Instant::now();
    for (index, command) in commands.iter().enumerate() {
        events.clear();
        let (seq, ts) = (Seq(index as u64 + 1), TimestampNs(index as u64));
        let applied = venue.apply(seq, Some(ts), command, &mut events);
        let note = venue.book_note(seq, &applied);
        builder.apply(seq, ts, &events, note.as_ref(), &mut messages);
    }
    let with_builder = started.elapsed();
    if builder.inconsistencies() > 0 {
        return Err(format!(
            "the feed's books disagreed with the engine {} times",
            builder.inconsistencies()
        ));
    }

    // Encode, pack, send.
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").map_err(|error| error.to_string())?;
    let socket2 = socket2::SockRef::from(&socket);
    socket2
        .set_multicast_if_v4(&std::net::Ipv4Addr::LOCALHOST)
        .map_err(|error| error.to_string())?;
    socket2.set_multicast_ttl_v4(0).map_err(|error| error.to_string())?;
    let mut packets: Vec<Vec<u8>> = Vec::with_capacity(messages.len() / 20);
    let mut writer = PacketWriter::new(mold::session("BENCH"), 1);
    let mut send_errors = 0u64;
    let mut bytes = Vec::with_capacity(64);
    let started = Instant::now();
    for message in &messages {
        bytes.clear();
        message.encode(&mut bytes);
        writer.push(&bytes, |packet| {
            send_errors += u64::from(socket.send_to(packet, args.multicast).is_err());
            packets.push(packet.to_vec());
        });
    }
    writer.flush(|packet| {
        send_errors += u64::from(socket.send_to(packet, args.multicast).is_err());
        packets.push(packet.to_vec());
    });
    let publishing = started.elapsed();

    // Rebuild.
    let mut subscriber = Rebuilder::starting_at(1);
    let started = Instant::now();
    for packet in &packets {
        subscriber.on_packet(packet).map_err(|error| format!("the rebuild failed: {error}"))?;
    }
    let rebuilding = started.elapsed();
    if subscriber.books() != builder.books() {
        return Err("the rebuilt books differ from the publisher's".into());
    }

    let count = messages.len() as f64;
    let derive_ns = (with_builder.as_secs_f64() - venue_alone.as_secs_f64()).max(0.0) * 1e9
        / commands.len() as f64;
    let result = serde_json::json!({
        "commands": commands.len(),
        "messages": messages.len(),
        "packets": packets.len(),
        "venue_commands_per_sec": (commands.len() as f64 / venue_alone.as_secs_f64()).round(),
        "venue_with_feed_commands_per_sec": (commands.len() as f64 / with_builder.as_secs_f64()).round(),
        "derive_ns_per_command": derive_ns.round(),
        "publish_messages_per_sec": (count / publishing.as_secs_f64()).round(),
        "rebuild_messages_per_sec": (count / rebuilding.as_secs_f64()).round(),
        "send_errors": send_errors,
        "orders_at_end": subscriber.books().order_count(),
    });
    if args.json {
        println!("{result}");
    } else {
        println!(
            "bench md: {} commands -> {} messages in {} packets ({} orders resting at the end, books equal)",
            commands.len(),
            messages.len(),
            packets.len(),
            subscriber.books().order_count()
        );
        println!(
            "bench md: venue alone {:.0} commands/s, with the feed's builder {:.0} commands/s ({derive_ns:.0} ns per command to derive the feed)",
            commands.len() as f64 / venue_alone.as_secs_f64(),
            commands.len() as f64 / with_builder.as_secs_f64()
        );
        println!(
            "bench md: publish (encode, pack, send to {}) {:.0} messages/s, {send_errors} send errors; rebuild {:.0} messages/s",
            args.multicast,
            count / publishing.as_secs_f64(),
            count / rebuilding.as_secs_f64()
        );
    }
    Ok(())
}
