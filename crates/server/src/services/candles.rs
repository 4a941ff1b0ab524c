//! The candle service: one thread, off the engine's, that takes every release of the
//! engine's tap (durable commands, in sequence) and counts each trade into
//! `bourse_marketdata::candles::Candles`, the one place of the candle rule, whether or
//! not the multicast feed runs. Between releases it answers the reads of candles
//! (REST's `/v1/candles`, Binance's klines, DIFF's chart history: `CandleService::series`)
//! and serves the WebSocket channel `candles` (which DIFF's live klines follow too), so
//! that a read, a channel's first message and the updates after it each stand at one
//! point of the released stream.
//!
//! What it costs the order path: the release it already shares appended to a queue
//! under a lock, waking nothing: the service's thread takes the queue every
//! `DRAIN_PERIOD` and at once before any request (so a read, or a subscriber's first
//! message, still counts every release handed over before it). A wake of the thread per
//! release, from the engine's thread, cost the server a few hundredths of a CPU at
//! 100,000 orders a second (`docs/benchmarks-history.md`). On its own thread, below the
//! order path: per trade, the six intervals' candles updated in place (memory grows only
//! when a candle opens an interval, up to `HISTORY_MAX` a series, then is reused); JSON
//! only for channels someone follows. The `candles` channel's updates go out at most
//! `DRAIN_PERIOD` after their trade.

use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bourse_core::ids::InstrumentId;
use bourse_core::{Event, TimestampNs};
use bourse_engine::{Outcome, Released};
use bourse_marketdata::candles::{Candle, Candles, INTERVALS};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::directory::Directory;
use crate::reference::InstrumentInfo;
use crate::services::feed::channel::{Channel, ForwardTo, HubCommand, Subscribers};
use crate::services::feed::tap::AlsoTo;

/// How often the service's thread takes the releases handed over, at the longest.
const DRAIN_PERIOD: Duration = Duration::from_millis(5);

/// Releases the tap has handed over and the service's thread has not yet counted:
/// appended without waking it.
#[derive(Default)]
struct Handed(Mutex<Vec<Arc<Released>>>);

impl Handed {
    fn push(&self, released: Arc<Released>) {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(released);
    }

    /// Moves every release handed over so far into `taken` (empty, its capacity kept).
    fn take_into(&self, taken: &mut Vec<Arc<Released>>) {
        debug_assert!(taken.is_empty());
        let mut handed = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        std::mem::swap(&mut *handed, taken);
    }
}

/// What the service's thread takes besides the releases: requests.
pub enum Input {
    /// Candles of an instrument: interval length, from, limit (`Candles::series_until`
    /// up to the engine's clock as the service last saw it).
    Series {
        instrument: InstrumentId,
        interval_ns: u64,
        from_ns: u64,
        limit: usize,
        reply: oneshot::Sender<Vec<Candle>>,
    },
    /// A connection's subscription to a `candles` channel, its unsubscription or its
    /// disconnection, from the hub; a subscription's acknowledgement goes out first.
    Channels(HubCommand),
    Stop,
}

/// The candle service, as the server and the gateways hold it: its thread's input.
#[derive(Clone)]
pub struct CandleService {
    inputs: Sender<Input>,
    handed: Arc<Handed>,
}

impl CandleService {
    /// Starts the service's thread. It ends on `stop`, or when every handle is gone.
    pub fn start(
        directory: Arc<Directory>,
    ) -> std::io::Result<(CandleService, std::thread::JoinHandle<()>)> {
        let (inputs, receiver) = std::sync::mpsc::channel();
        let handed = Arc::new(Handed::default());
        let keeper = Keeper {
            candles: Candles::default(),
            clock: TimestampNs::ZERO,
            channels: Subscribers::default(),
            directory,
            traded: Vec::new(),
        };
        let taken_from = Arc::clone(&handed);
        let thread =
            std::thread::Builder::new().name("bourse-candles".into()).spawn(move || {
                // Candles follow the order path; they never go ahead of it.
                bourse_engine::run_in_background();
                keeper.run(receiver, &taken_from)
            })?;
        Ok((CandleService { inputs, handed }, thread))
    }

    /// What the tap hands every release to (unbounded: no trade is lost), waking
    /// nothing.
    pub fn releases(&self) -> AlsoTo {
        let handed = Arc::clone(&self.handed);
        Box::new(move |released| handed.push(released))
    }

    /// Where the hub hands the `candles` channels' subscriptions and every
    /// disconnection.
    pub fn channels(&self) -> ForwardTo {
        let inputs = self.inputs.clone();
        Box::new(move |command| {
            let _ = inputs.send(Input::Channels(command));
        })
    }

    /// The candles of `instrument` at `interval_ns` (one of `INTERVALS`) from `from_ns`,
    /// oldest first, empty intervals included, up to the engine's clock, at most
    /// `limit` (the newest): every trade the tap handed over before the call is in
    /// them. `None` once the service has stopped (the server is stopping).
    pub async fn series(
        &self,
        instrument: InstrumentId,
        interval_ns: u64,
        from_ns: u64,
        limit: usize,
    ) -> Option<Vec<Candle>> {
        let (reply, answer) = oneshot::channel();
        let request = Input::Series { instrument, interval_ns, from_ns, limit, reply };
        self.inputs.send(request).ok()?;
        answer.await.ok()
    }

    /// Ends the thread once it has taken what was sent before (the server stops it after
    /// the engine's last release).
    pub fn stop(&self) {
        let _ = self.inputs.send(Input::Stop);
    }
}

/// The service's thread's state.
struct Keeper {
    candles: Candles,
    /// The engine's clock as the service last saw it (the last applied command's time):
    /// series run up to it.
    clock: TimestampNs,
    channels: Subscribers,
    /// Symbols and decimals of the instruments followed (a subscriber names an
    /// instrument the directory knows).
    directory: Arc<Directory>,
    /// The instruments traded since the channels were last told, while anyone follows
    /// one (reused: nothing allocated once warm).
    traded: Vec<InstrumentId>,
}

impl Keeper {
    /// Runs until `Stop` (or every sender is gone). Every `DRAIN_PERIOD`, and before
    /// each request, the releases handed over are counted and the channels told; then
    /// the request is answered, so that it stands after every release handed over
    /// before it.
    fn run(mut self, inputs: Receiver<Input>, handed: &Handed) {
        let mut taken = Vec::new();
        loop {
            let input = match inputs.recv_timeout(DRAIN_PERIOD) {
                Ok(input) => Some(input),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            };
            handed.take_into(&mut taken);
            for released in taken.drain(..) {
                self.on_release(&released);
            }
            self.tell_channels();
            if let Some(input) = input {
                if !self.answer(input) {
                    return;
                }
            }
        }
    }

    /// Counts a release's trades, each at its command's time.
    fn on_release(&mut self, released: &Released) {
        let followed = !self.channels.is_empty();
        for outcome in &released.outcomes {
            let Outcome::Applied(result) = outcome else { continue };
            let ts = result.ts;
            // (The engine's clock never goes back.)
            debug_assert!(ts >= self.clock, "command at {ts} after {}", self.clock);
            self.clock = self.clock.max(ts);
            for event in released.events_of(result) {
                let Event::Trade(trade) = event else { continue };
                self.candles.on_trade(
                    trade.instrument,
                    ts,
                    trade.price,
                    trade.qty,
                    trade.taker_side,
                );
                if followed && !self.traded.contains(&trade.instrument) {
                    self.traded.push(trade.instrument);
                }
            }
        }
    }

    /// Answers a request; `false` for `Stop`.
    fn answer(&mut self, input: Input) -> bool {
        match input {
            Input::Series { instrument, interval_ns, from_ns, limit, reply } => {
                let series =
                    self.candles.series_until(instrument, interval_ns, from_ns, self.clock, limit);
                let _ = reply.send(series);
            }
            Input::Channels(HubCommand::Subscribe {
                connection,
                channel,
                outbound,
                acknowledgement,
            }) => {
                let Keeper { candles, channels, directory, .. } = self;
                channels.subscribe(
                    connection,
                    channel,
                    outbound,
                    acknowledgement,
                    |channel, seq| welcome(candles, directory, channel, seq),
                );
            }
            Input::Channels(HubCommand::Unsubscribe { connection, channel }) => {
                self.channels.unsubscribe(connection, &channel)
            }
            Input::Channels(HubCommand::Disconnected { connection }) => {
                self.channels.disconnected(connection)
            }
            Input::Channels(HubCommand::Barrier(reply)) => {
                let _ = reply.send(());
            }
            Input::Stop => return false,
        }
        true
    }

    /// The current candle of each followed interval of the instruments just traded.
    fn tell_channels(&mut self) {
        if self.traded.is_empty() {
            return;
        }
        let reference = self.directory.reference();
        let Keeper { candles, channels, traded, .. } = self;
        for instrument in traded.drain(..) {
            let Some(info) = reference.instrument(instrument) else { continue };
            for (index, (name, _)) in INTERVALS.iter().enumerate() {
                let channel = Channel::Candles(instrument, index as u8);
                if !channels.has(&channel) {
                    continue;
                }
                let Some(candle) = candles.current(instrument, index) else { continue };
                let body = json!({ "symbol": info.symbol, "interval": name, "data": candle_json(info, &candle) });
                channels.publish(channel, body);
            }
        }
    }
}

/// A `candles` subscriber's first message: the interval's current candle (`null` before
/// the instrument's first trade). `seq` is the channel's number so far.
fn welcome(candles: &Candles, directory: &Directory, channel: &Channel, seq: u64) -> Option<Value> {
    let Channel::Candles(instrument, interval) = channel else { return None };
    let reference = directory.reference();
    let info = reference.instrument(*instrument)?;
    let (name, _) = INTERVALS.get(usize::from(*interval))?;
    let candle = candles.current(*instrument, usize::from(*interval));
    Some(json!({
        "channel": "candles", "symbol": info.symbol, "interval": name, "seq": seq,
        "type": "snapshot", "data": candle.map(|candle| candle_json(info, &candle)),
    }))
}

/// A candle as `[start_ns, open, high, low, close, volume, trades]` (REST's and the
/// `candles` channel's).
pub fn candle_json(info: &InstrumentInfo, candle: &Candle) -> Value {
    json!([
        candle.start_ns,
        info.price(candle.open.0),
        info.price(candle.high.0),
        info.price(candle.low.0),
        info.price(candle.close.0),
        info.qty(candle.volume.0),
        candle.trades
    ])
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use bourse_core::format::parse::parse_line;
    use bourse_engine::ResultSink;
    use tokio::sync::mpsc;

    use super::*;
    use crate::link::EngineLink;
    use crate::services::feed::channel::{FeedMessage, Kill, Outbound};

    const MINUTE_NS: u64 = 60_000_000_000;

    /// Keeps every release the tap hands it.
    struct Collect(Arc<Mutex<Vec<Released>>>);

    impl ResultSink for Collect {
        fn deliver(&self, released: Released) {
            self.0.lock().unwrap().push(released);
        }
    }

    /// BTC-USD, a seller and a buyer, then `rounds` trades of 1 BTC at 30,000, each
    /// command in a release of its own: the releases, an engine, and a directory that
    /// knows the instrument.
    struct Traded {
        releases: Vec<Released>,
        directory: Arc<Directory>,
        engine: bourse_engine::Engine,
        _data: tempfile::TempDir,
    }

    fn traded(rounds: usize) -> Traded {
        let data = tempfile::tempdir().unwrap();
        let engine = crate::link::start_test_engine(data.path());
        let collected = Arc::new(Mutex::new(Vec::new()));
        let tap = engine.open_tap(Arc::new(Collect(Arc::clone(&collected)))).unwrap();
        let mut lines = vec![
            r#"{"cmd":"asset","asset":"BTC","decimals":8}"#.to_string(),
            r#"{"cmd":"asset","asset":"USD","decimals":2}"#.to_string(),
            r#"{"cmd":"instrument","symbol":"BTC-USD","base":"BTC","quote":"USD","tick":"0.5","lot":"0.1","min_qty":"0.1","max_qty":"100","maker_fee_bps":0,"taker_fee_bps":0,"market_band_bps":500}"#.to_string(),
            r#"{"cmd":"deposit","account":"seller","asset":"BTC","amount":"10"}"#.to_string(),
            r#"{"cmd":"deposit","account":"buyer","asset":"USD","amount":"1000000"}"#.to_string(),
        ];
        for round in 0..rounds {
            lines.push(format!(
                r#"{{"cmd":"order","account":"seller","id":"s{round}","symbol":"BTC-USD","side":"sell","type":"limit","price":"30000","qty":"1"}}"#
            ));
            lines.push(format!(
                r#"{{"cmd":"order","account":"buyer","id":"b{round}","symbol":"BTC-USD","side":"buy","type":"limit","price":"30000","qty":"1"}}"#
            ));
        }
        // One command at a time, each released before the next: a release per command.
        for (request, line) in lines.iter().enumerate() {
            let before = collected.lock().unwrap().len();
            tap.submit(&parse_line(line).unwrap().command, request as u64 + 1).unwrap();
            while collected.lock().unwrap().len() == before {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        drop(tap);
        let releases = std::mem::take(&mut *collected.lock().unwrap());
        assert_eq!(releases.len(), lines.len());
        let link = Arc::new(EngineLink::open(&engine, 100, Default::default()));
        let directory = Arc::new(Directory::new(link));
        runtime().block_on(directory.refresh_reference()).unwrap();
        Traded { releases, directory, engine, _data: data }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    /// The time of every command that traded, in order.
    fn trade_times(releases: &[Released]) -> Vec<u64> {
        let mut times = Vec::new();
        for released in releases {
            for outcome in &released.outcomes {
                let Outcome::Applied(result) = outcome else { continue };
                for event in released.events_of(result) {
                    if matches!(event, Event::Trade(_)) {
                        times.push(result.ts.0);
                    }
                }
            }
        }
        times
    }

    /// Three trades in three releases, queued before the service takes any (as a
    /// backlog is drained together): each counts once, at its command's time, and a
    /// read sent after them sees them all, up to the last command's time.
    #[test]
    fn every_released_trade_counts_once_at_its_commands_time_and_reads_come_after_it() {
        let traded = traded(3);
        let times = trade_times(&traded.releases);
        assert_eq!(times.len(), 3);
        let (service, thread) = CandleService::start(Arc::clone(&traded.directory)).unwrap();
        let releases = service.releases();
        let last_ts = traded.releases.iter().flat_map(|released| &released.outcomes).fold(
            0,
            |last, outcome| match outcome {
                Outcome::Applied(result) => result.ts.0,
                _ => last,
            },
        );
        for released in traded.releases {
            releases(Arc::new(released));
        }
        let runtime = runtime();
        let series =
            runtime.block_on(service.series(InstrumentId(0), MINUTE_NS, 0, usize::MAX)).unwrap();
        let counted: u32 = series.iter().map(|candle| candle.trades).sum();
        let volume: i64 = series.iter().map(|candle| candle.volume.units()).sum();
        assert_eq!((counted, volume), (3, 3 * 10), "{series:?}"); // 1 BTC is 10 lots of 0.1
                                                                  // The first candle is the first trade's minute; the series runs to the clock.
        assert_eq!(series[0].start_ns, times[0] - times[0] % MINUTE_NS, "{series:?}");
        let last = series.last().unwrap();
        assert_eq!(last.start_ns, last_ts - last_ts % MINUTE_NS, "{series:?}");
        // An instrument without trades has none; a stopped service answers nothing.
        let none = runtime.block_on(service.series(InstrumentId(7), MINUTE_NS, 0, 10)).unwrap();
        assert!(none.is_empty());
        service.stop();
        thread.join().unwrap();
        assert_eq!(runtime.block_on(service.series(InstrumentId(0), MINUTE_NS, 0, 10)), None);
        traded.engine.shutdown().unwrap();
    }

    fn next_text(receiver: &mut mpsc::Receiver<Arc<FeedMessage>>) -> Value {
        let runtime = runtime();
        let message = runtime
            .block_on(async {
                tokio::time::timeout(Duration::from_secs(10), receiver.recv()).await
            })
            .expect("a message within 10 s")
            .expect("the service keeps the connection");
        serde_json::from_str(&message.text()).unwrap()
    }

    /// A `candles` subscriber gets the current candle (none before a trade), then the
    /// candle after each batch of trades, numbered; once it leaves, nothing more.
    #[test]
    fn a_candles_subscriber_gets_the_current_candle_then_one_numbered_update_per_batch() {
        let traded = traded(3);
        let times = trade_times(&traded.releases);
        let (service, thread) = CandleService::start(Arc::clone(&traded.directory)).unwrap();
        let (releases, channels) = (service.releases(), service.channels());
        let (sender, mut receiver) = mpsc::channel(16);
        let outbound = Outbound { sender, kill: Arc::new(Kill::default()) };
        let channel = Channel::Candles(InstrumentId(0), 1); // 1m
        let acknowledgement = FeedMessage::text_message(r#"{"type":"subscribed"}"#.to_string());
        channels(HubCommand::Subscribe {
            connection: 1,
            channel: channel.clone(),
            outbound,
            acknowledgement: Some(acknowledgement),
        });
        assert_eq!(next_text(&mut receiver)["type"], "subscribed");
        let snapshot = next_text(&mut receiver);
        assert_eq!(
            (&snapshot["channel"], &snapshot["type"], &snapshot["seq"], &snapshot["data"]),
            (&json!("candles"), &json!("snapshot"), &json!(0), &Value::Null),
            "{snapshot}"
        );
        let mut releases_left = traded.releases.into_iter();
        // Up to the first trade (the seller's order rests, the buyer's takes it).
        for released in releases_left.by_ref().take(7) {
            releases(Arc::new(released));
        }
        let update = next_text(&mut receiver);
        assert_eq!(update["seq"], 1, "{update}");
        assert_eq!((&update["symbol"], &update["interval"]), (&json!("BTC-USD"), &json!("1m")));
        assert_eq!(update["data"][4], "30000", "{update}"); // close
        assert_eq!((&update["data"][5], &update["data"][6]), (&json!("1"), &json!(1)));
        // The second trade: the minute's candle with both (or a new minute's).
        for released in releases_left.by_ref().take(2) {
            releases(Arc::new(released));
        }
        let update = next_text(&mut receiver);
        assert_eq!(update["seq"], 2, "{update}");
        let same_minute = times[0] / MINUTE_NS == times[1] / MINUTE_NS;
        let expected = if same_minute { 2 } else { 1 };
        assert_eq!(update["data"][6], json!(expected), "{update}");
        assert_eq!(update["data"][0], json!(times[1] - times[1] % MINUTE_NS), "{update}");
        // Gone: the third trade is not sent to it. (Releases are handed over beside
        // the requests, not through them: the service counts whatever was handed by
        // the time it takes a request, so the test waits until the disconnection is
        // taken, as a read after it shows, before handing the third trade.)
        channels(HubCommand::Disconnected { connection: 1 });
        runtime().block_on(service.series(InstrumentId(0), MINUTE_NS, 0, 1)).unwrap();
        for released in releases_left {
            releases(Arc::new(released));
        }
        service.stop();
        thread.join().unwrap();
        assert!(receiver.try_recv().is_err(), "nothing after the disconnection");
        traded.engine.shutdown().unwrap();
    }
}
