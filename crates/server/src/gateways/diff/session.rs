//! A DIFF session: one WebSocket at `/ws/diff`, serving market data (quotes, klines,
//! ticks, the instrument query) to anyone and trading to a client that logged in with
//! its account's password (`req_login`). The client asks with `peek_message`; the
//! session answers with at most one `rtn_data` per peek, holding every patch made
//! since the last one (`patch::Pending`: patches merged while the client has not
//! asked). The patches come from the hub's channels and its kept ticks (quotes, ticks,
//! the account's orders, fills and futures view), from the candle service's
//! candles and their history, and from the session's own answers (a refused order, a
//! notice).
//!
//! A session owns nothing but its subscriptions and what it last sent of the trading
//! tree (to send only changes); orders go through order entry like every gateway's.
//! What waits for the client is bounded: a client that stops asking while data piles
//! up beyond `PENDING_BYTES_MAX`, or that stops reading the socket, is disconnected,
//! never waited for.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use axum::extract::ws::WebSocket;
use axum::extract::State;
use axum::response::Response;
use bourse_core::command::OrderType;
use bourse_core::ids::InstrumentId;
use bourse_core::{Decimal, OrderSize, RejectReason, StpMode};
use bourse_marketdata::candles::{Candle, INTERVALS};
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use super::patch::Pending;
use super::request::{self, Pack};
use super::symbols;
use super::trading;
use crate::gateways::shared::websocket::{self, send, Wake};
use crate::link::LaneReleases;
use crate::port::error::{ApiError, ApiResult, ErrorCode};
use crate::port::orders::answer::Detail;
use crate::port::orders::in_flight::{InFlight, Submitted};
use crate::port::orders::request::{CheckedClientOrderId, NewOrder, Request, Target};
use crate::port::queries::ContractTerms;
use crate::port::session::Session as Login;
use crate::port::state::Shared;
use crate::reference::{InstrumentInfo, Reference};
use crate::services::feed::channel::{Channel, FeedBody, FeedMessage, HubCommand, Kill, Outbound};
use crate::services::feed::quote::{exchange_and_code, lots, price_number, tick_fields};

/// Largest message a client may send (an instrument query is long GraphQL text).
pub const INBOUND_MESSAGE_BYTES_MAX: usize = 128 * 1024;
/// Patches waiting for the client's next `peek_message`, at most (estimated JSON
/// bytes); beyond it the client is disconnected (`slow_consumer`).
pub const PENDING_BYTES_MAX: usize = 8 * 1024 * 1024;
/// Charts per session, at most.
pub const CHARTS_MAX: usize = 64;
/// Klines or ticks a chart shows at most (what the candle service keeps).
pub const CHART_WIDTH_MAX: usize = bourse_marketdata::candles::HISTORY_MAX;
/// Orders of the account sent at login, at most (open ones first, then finished).
const ORDERS_AT_LOGIN_MAX: usize = 1_000;

const _: () = assert!(INBOUND_MESSAGE_BYTES_MAX < PENDING_BYTES_MAX);

pub async fn upgrade(upgrade: websocket::Upgrade, State(state): State<Shared>) -> Response {
    websocket::accept(upgrade, INBOUND_MESSAGE_BYTES_MAX, move |socket| async move {
        Session::new(state).run(socket).await
    })
}

/// The logged-in account of a session.
struct User {
    /// As the client logged in (`user_name`): the key of `trade.<user>`.
    name: String,
    /// The port's session of the login: whom its requests are charged to, holding its
    /// place among the account's connections.
    login: Login,
    /// Each order's offset, from its record (a fill's offset is its order's).
    offsets: HashMap<String, &'static str>,
    /// Trades sent before their order's record (a fill comes first): their ids by
    /// order, to set their offset when the record comes.
    offsetless: HashMap<String, Vec<String>>,
    /// The accounts and positions last sent.
    view: Value,
}

/// A chart: one instrument's klines at one interval, or its ticks.
struct Chart {
    symbol: String,
    /// 0 for ticks.
    duration_ns: u64,
    view_width: usize,
    channel: Channel,
    left_id: i64,
    right_id: i64,
}

/// What the session keeps of an order-entry request in flight.
enum Meta {
    Insert { order_id: String, exchange_id: String, instrument_id: String, volume: i64 },
    Cancel { order_id: String },
}

struct Session {
    id: u64,
    state: Shared,
    outbound: Outbound,
    receiver: mpsc::Receiver<Arc<FeedMessage>>,
    pending: Pending,
    /// A `peek_message` waits for data.
    peeked: bool,
    /// The quotes followed, by instrument.
    quotes: BTreeMap<InstrumentId, String>,
    charts: HashMap<String, Chart>,
    /// Hub channels the charts follow.
    chart_channels: HashSet<Channel>,
    user: Option<User>,
    notices: u64,
}

impl Session {
    fn new(state: Shared) -> Session {
        let (sender, receiver) = mpsc::channel(state.limits.ws_queue_messages.max(1));
        let outbound = Outbound { sender, kill: Arc::new(Kill::default()) };
        let mut pending = Pending::default();
        // Nothing of market data's history is owed: a client may start at once.
        pending.push(json!({ "mdhis_more_data": false }));
        Session {
            id: crate::gateways::shared::connection::next_connection_id(),
            state,
            outbound,
            receiver,
            pending,
            peeked: false,
            quotes: BTreeMap::new(),
            charts: HashMap::new(),
            chart_channels: HashSet::new(),
            user: None,
            notices: 0,
        }
    }

    async fn run(mut self, mut socket: WebSocket) {
        self.state.metrics.connection_opened("diff");
        let kill = Arc::clone(&self.outbound.kill);
        let (mut in_flight, mut releases): (InFlight<Meta>, LaneReleases) =
            InFlight::open(&self.state.entry);
        let entry = Arc::clone(&self.state.entry);
        let reason = loop {
            let accepting = !in_flight.is_full();
            let wake =
                websocket::wake(&mut socket, &mut releases, &mut self.receiver, &kill, accepting);
            match wake.await {
                Wake::Released(released) => {
                    in_flight.take_released_and_waiting(&entry, &released, &mut releases).await;
                    self.answered(&mut in_flight);
                }
                Wake::Text(text) => {
                    self.handle(text.as_str(), &mut in_flight).await;
                    self.answered(&mut in_flight);
                }
                Wake::Binary => self.refuse(ErrorCode::MALFORMED, "DIFF packs are JSON text"),
                Wake::Feed(message) => {
                    self.on_feed(&message);
                    while let Ok(message) = self.receiver.try_recv() {
                        self.on_feed(&message);
                    }
                }
                Wake::End(reason) => break reason,
            }
            if self.pending.approx_bytes() > PENDING_BYTES_MAX {
                break Some(ErrorCode::SlowConsumer);
            }
            if self.peeked && !self.pending.is_empty() {
                self.peeked = false;
                let data = self.pending.take();
                let text = json!({ "aid": "rtn_data", "data": data }).to_string();
                if !send(&mut socket, text).await {
                    break Some(ErrorCode::SlowConsumer);
                }
            }
        };
        websocket::close(socket, reason, (&self.state, self.id, "diff")).await;
    }

    /// A `notify` of an error, at the level its code deserves (`notify_level`).
    fn refuse(&mut self, code: ErrorCode, content: &str) {
        self.notice(notify_level(code), code.as_str(), content);
    }

    /// A `notify` for the client: `level` INFO, WARNING or ERROR, with a reason code.
    fn notice(&mut self, level: &str, code: &str, content: &str) {
        self.notices += 1;
        let id = format!("bourse-{}", self.notices);
        self.pending.push(json!({ "notify": { id: {
            "type": "MESSAGE", "level": level, "code": code, "content": content,
        } } }));
    }

    async fn handle(&mut self, text: &str, in_flight: &mut InFlight<Meta>) {
        let pack = match request::decode(text) {
            Ok(pack) => pack,
            Err(error) => {
                self.refuse(error.code, &error.message);
                return;
            }
        };
        match pack {
            Pack::PeekMessage => self.peeked = true,
            Pack::SubscribeQuote { symbols } => self.subscribe_quotes(&symbols).await,
            Pack::SetChart(chart) => self.set_chart(chart).await,
            Pack::InsQuery(query) => self.instrument_query(query).await,
            Pack::ReqLogin(login) => self.login(&login.user_name, &login.password).await,
            Pack::ConfirmSettlement => {}
            Pack::InsertOrder(order) => self.insert_order(order, in_flight).await,
            Pack::CancelOrder(cancel) => self.cancel_order(cancel, in_flight).await,
        }
    }

    async fn subscribe(&self, channel: Channel) {
        let command = HubCommand::Subscribe {
            connection: self.id,
            channel,
            outbound: self.outbound.clone(),
            acknowledgement: None,
        };
        let _ = self.state.hub.send(command).await;
    }

    async fn unsubscribe(&self, channel: Channel) {
        let _ = self.state.hub.send(HubCommand::Unsubscribe { connection: self.id, channel }).await;
    }

    /// The instrument named `symbol`, with the reference data that knows it.
    async fn instrument(&self, symbol: &str) -> Option<(InstrumentId, Arc<Reference>)> {
        let reference = self.state.directory.reference_with_symbol(symbol).await.ok()?;
        let (instrument, _) = reference.find_instrument(symbol)?;
        Some((instrument, reference))
    }

    /// `subscribe_quote`: the list replaces the one before.
    async fn subscribe_quotes(&mut self, symbols: &[String]) {
        let mut wanted = BTreeMap::new();
        for symbol in symbols {
            match self.instrument(symbol).await {
                Some((instrument, _)) => {
                    wanted.insert(instrument, symbol.clone());
                }
                None => self.notice(
                    "WARNING",
                    ErrorCode::Rejected(RejectReason::UnknownSymbol).as_str(),
                    &format!("no instrument {symbol:?}"),
                ),
            }
        }
        let gone: Vec<InstrumentId> = self
            .quotes
            .keys()
            .filter(|instrument| !wanted.contains_key(instrument))
            .copied()
            .collect();
        for instrument in gone {
            self.quotes.remove(&instrument);
            self.unsubscribe(Channel::Quote(instrument)).await;
        }
        for (instrument, symbol) in wanted {
            if self.quotes.insert(instrument, symbol).is_none() {
                self.subscribe(Channel::Quote(instrument)).await;
            }
        }
        // (tqsdk compares the echo with the list it sent: symbols joined by commas.)
        self.pending.push(json!({ "ins_list": symbols.join(",") }));
    }

    /// `set_chart`: klines of one instrument at one of the candles' intervals, or its
    /// ticks (`duration` 0); an empty `ins_list` removes the chart.
    async fn set_chart(&mut self, request: request::SetChart) {
        let chart_id = request.chart_id.clone();
        if let Some(old) = self.charts.remove(&chart_id) {
            self.pending.push(json!({ "charts": { chart_id.clone(): null } }));
            self.release_chart_channel(&old.channel).await;
        }
        let Some(symbol) = request.symbols.first().cloned() else { return };
        if request.symbols.len() > 1 {
            self.notice(
                "WARNING",
                ErrorCode::Unsupported.as_str(),
                "a chart shows one instrument: the first of ins_list",
            );
        }
        if self.charts.len() >= CHARTS_MAX {
            self.refuse(
                ErrorCode::TooManyCharts,
                &format!("at most {CHARTS_MAX} charts per session"),
            );
            return;
        }
        let Some((instrument, reference)) = self.instrument(&symbol).await else {
            self.refuse(
                ErrorCode::Rejected(RejectReason::UnknownSymbol),
                &format!("no instrument {symbol:?}"),
            );
            return;
        };
        let Some(info) = reference.instrument(instrument).cloned() else { return };
        let view_width = (request.view_width as usize).clamp(1, CHART_WIDTH_MAX);
        let duration_ns = u64::try_from(request.duration_ns).unwrap_or(0);
        let channel = if duration_ns == 0 {
            Channel::Ticks(instrument)
        } else {
            match INTERVALS.iter().position(|(_, length)| *length == duration_ns) {
                Some(index) => Channel::Candles(instrument, index as u8),
                None => {
                    self.refuse(ErrorCode::Unsupported,
                        "kline durations are 1 s, 1 min, 5 min, 15 min, 1 h or 1 day (or 0 for ticks)",
                    );
                    return;
                }
            }
        };
        let mut chart = Chart {
            symbol: symbol.clone(),
            duration_ns,
            view_width,
            channel: channel.clone(),
            left_id: -1,
            right_id: -1,
        };
        let series = if duration_ns == 0 {
            // Followed before the history is read, so that no tick falls between them
            // (one in both is the same tick, under the same id).
            self.follow_chart_channel(&channel).await;
            self.tick_history(&info, instrument, view_width)
        } else {
            self.kline_history(&info, instrument, duration_ns, view_width).await
        };
        let state = Value::Object(request.raw.clone());
        self.chart_patch(&mut chart, &chart_id, series, Some(&state));
        self.charts.insert(chart_id, chart);
        self.follow_chart_channel(&channel).await;
    }

    /// Subscribes to a chart's hub channel unless another chart follows it already; a
    /// new subscription is in place when this returns.
    async fn follow_chart_channel(&mut self, channel: &Channel) {
        if !self.chart_channels.insert(channel.clone()) {
            return;
        }
        self.subscribe(channel.clone()).await;
        let (reply, in_place) = tokio::sync::oneshot::channel();
        if self.state.hub.send(HubCommand::Barrier(reply)).await.is_ok() {
            let _ = in_place.await;
        }
    }

    async fn release_chart_channel(&mut self, channel: &Channel) {
        if self.charts.values().any(|chart| &chart.channel == channel) {
            return;
        }
        if self.chart_channels.remove(channel) {
            self.unsubscribe(channel.clone()).await;
        }
    }

    /// The series' points as a patch of the chart's data (klines or ticks), its ids and
    /// its window; `state` (the request) on its first patch.
    fn chart_patch(
        &mut self,
        chart: &mut Chart,
        chart_id: &str,
        series: Vec<(i64, Value)>,
        state: Option<&Value>,
    ) {
        let mut data = Map::new();
        let mut last_id = chart.right_id;
        for (id, point) in series {
            last_id = last_id.max(id);
            data.insert(id.to_string(), point);
        }
        if last_id >= 0 {
            chart.right_id = last_id;
            chart.left_id = (last_id - chart.view_width as i64 + 1).max(if chart.left_id < 0 {
                first_id(&data)
            } else {
                chart.left_id
            });
        }
        let serial = json!({ "last_id": last_id, "data": data });
        let tree = if chart.duration_ns == 0 {
            json!({ "ticks": { chart.symbol.clone(): serial } })
        } else {
            json!({ "klines": { chart.symbol.clone(): { chart.duration_ns.to_string(): serial } } })
        };
        self.pending.push(tree);
        let mut shown = json!({
            "left_id": chart.left_id, "right_id": chart.right_id, "more_data": false, "ready": true,
        });
        if let Some(state) = state {
            shown["state"] = state.clone();
        }
        self.pending.push(json!({ "charts": { chart_id: shown }, "mdhis_more_data": false }));
    }

    /// The instrument's klines from the candle service, oldest first, as (id, kline): a
    /// kline's id is its start over the duration (ids run on without gaps, empty
    /// intervals included).
    async fn kline_history(
        &self,
        info: &InstrumentInfo,
        instrument: InstrumentId,
        duration_ns: u64,
        width: usize,
    ) -> Vec<(i64, Value)> {
        let candles =
            self.state.candles.series(instrument, duration_ns, 0, width).await.unwrap_or_default();
        candles.iter().map(|candle| kline(info, duration_ns, candle)).collect()
    }

    /// The instrument's latest ticks, oldest first, as (id, tick): a tick's id is its
    /// trade's number on the instrument since the server started (the hub's ticks,
    /// which its `ticks` channel sends as they come).
    fn tick_history(
        &self,
        info: &InstrumentInfo,
        instrument: InstrumentId,
        width: usize,
    ) -> Vec<(i64, Value)> {
        let ticks = self.state.market().ticks(instrument, width);
        ticks.iter().map(|tick| (tick.id, Value::Object(tick_fields(info, tick)))).collect()
    }

    /// `ins_query`: the answer under `symbols.<query_id>`; an empty query drops it.
    async fn instrument_query(&mut self, query: request::InsQuery) {
        if query.query.is_empty() {
            self.pending.push(json!({ "symbols": { query.query_id: null } }));
            return;
        }
        let answer = match symbols::parse(&query.query, query.variables.as_ref()) {
            Ok(parsed) => {
                let reference = self.state.directory.reference();
                let known = symbol_infos(&self.state, &reference).await;
                symbols::answer(&parsed, &known)
            }
            Err(error) => symbols::error_answer(&query.query, query.variables.as_ref(), &error),
        };
        self.pending.push(json!({ "symbols": { query.query_id: answer } }));
    }

    /// `req_login`: the account's password, checked like the token endpoint's.
    async fn login(&mut self, user_name: &str, password: &str) {
        if self.user.is_some() {
            self.refuse(ErrorCode::AlreadyLoggedIn, "this session is logged in already");
            return;
        }
        let login = match self.state.login_with_password(user_name, password).await {
            Ok(login) => login,
            Err(error) => {
                self.refuse(error.code, &error.message);
                return;
            }
        };
        let account = self.state.queries.account_id(&login).await.ok().flatten();
        let mut user = User {
            name: user_name.to_string(),
            login,
            offsets: HashMap::new(),
            offsetless: HashMap::new(),
            view: json!({ "accounts": {}, "positions": {} }),
        };
        let mut tree = json!({
            "user_id": user_name, "session": { "user_id": user_name, "trading_day": "" },
            "orders": {}, "trades": {}, "accounts": {}, "positions": {},
        });
        if let Some(account) = account {
            let (orders, view) = (self.state.queries)
                .login_view(&user.login, ORDERS_AT_LOGIN_MAX)
                .await
                .unwrap_or_else(|_| (Vec::new(), Value::Null));
            let reference = self.state.directory.reference();
            let mut shown = Map::new();
            for record in orders {
                if let Some(info) = reference.instrument(record.instrument) {
                    user.offsets
                        .insert(record.client_id.to_string(), trading::offset_name(record.offset));
                    shown.insert(
                        record.client_id.to_string(),
                        trading::order_json(info, &record, user_name),
                    );
                }
            }
            tree["orders"] = Value::Object(shown);
            let trade_view = trading::accounts_and_positions(&view, &reference, user_name);
            tree["accounts"] = trade_view["accounts"].clone();
            tree["positions"] = trade_view["positions"].clone();
            user.view = trade_view;
            for channel in
                [Channel::Orders(account), Channel::Fills(account), Channel::Positions(account)]
            {
                self.subscribe(channel).await;
            }
        }
        tree["trade_more_data"] = json!(false);
        self.pending.push(json!({ "trade": { user_name: tree } }));
        self.notice("INFO", "logged_in", &format!("logged in as {user_name}"));
        tracing::info!(session = self.id, account = user_name, "diff login");
        self.user = Some(user);
    }

    async fn insert_order(&mut self, order: request::InsertOrder, in_flight: &mut InFlight<Meta>) {
        let symbol = order.symbol();
        if let (Some(user), Ok(terms)) = (&mut self.user, request::order_terms(&order)) {
            user.offsets.insert(order.order_id.clone(), trading::offset_name(terms.offset));
        }
        let meta = Meta::Insert {
            order_id: order.order_id.clone(),
            exchange_id: order.exchange_id.clone(),
            instrument_id: order.instrument_id.clone(),
            volume: order.volume,
        };
        if in_flight.is_full() {
            in_flight.refused(meta, InFlight::<Meta>::busy_error());
            return;
        }
        match self.submit_insert(&order, symbol, in_flight).await {
            Ok(submitted) => in_flight.push(meta, submitted),
            Err(error) => in_flight.refused(meta, error),
        }
    }

    async fn submit_insert(
        &mut self,
        order: &request::InsertOrder,
        symbol: String,
        in_flight: &mut InFlight<Meta>,
    ) -> ApiResult<Submitted> {
        let login = self.logged_in(&order.user_id)?.login.clone();
        let (instrument, reference) = self.instrument(&symbol).await.ok_or_else(|| {
            ApiError::new(
                ErrorCode::Rejected(bourse_core::RejectReason::UnknownSymbol),
                format!("no instrument {symbol:?}"),
            )
        })?;
        let info =
            reference.instrument(instrument).ok_or_else(|| ApiError::malformed("no instrument"))?;
        let terms = request::order_terms(order).map_err(diff_error)?;
        let qty_units = i128::from(order.volume) * i128::from(info.lot.max(1));
        let qty = Decimal::from_units(qty_units, info.qty_decimals);
        let order_type = match terms.order_type {
            OrderType::Limit { price } => {
                OrderType::Limit { price: request::snap_float_noise(price, info.price_decimals) }
            }
            OrderType::Market => OrderType::Market,
        };
        let new_order = NewOrder {
            client_order_id: Some(CheckedClientOrderId::parse(order.order_id.as_str())?),
            symbol: symbol.into(),
            side: terms.side,
            order_type,
            size: OrderSize::of_qty(qty),
            time_in_force: terms.time_in_force,
            post_only: false,
            stp: StpMode::CancelTaker,
            offset: terms.offset,
        };
        in_flight.submit(&self.state.entry, &login, &Request::Place(new_order), Detail::Stamp).await
    }

    async fn cancel_order(&mut self, cancel: request::CancelOrder, in_flight: &mut InFlight<Meta>) {
        let meta = Meta::Cancel { order_id: cancel.order_id.clone() };
        if in_flight.is_full() {
            in_flight.refused(meta, InFlight::<Meta>::busy_error());
            return;
        }
        let submitted = async {
            let login = self.logged_in(&cancel.user_id)?.login.clone();
            let target = Target::ClientOrderId(cancel.order_id.as_str().into());
            in_flight
                .submit(&self.state.entry, &login, &Request::Cancel(target), Detail::Stamp)
                .await
        }
        .await;
        match submitted {
            Ok(submitted) => in_flight.push(meta, submitted),
            Err(error) => in_flight.refused(meta, error),
        }
    }

    /// The logged-in user, which `user_id` must name.
    fn logged_in(&self, user_id: &str) -> ApiResult<&User> {
        let user = self
            .user
            .as_ref()
            .ok_or_else(|| ApiError::new(ErrorCode::LoginRequired, "log in (req_login) first"))?;
        if user.name != user_id {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                format!("this session trades for {:?}, not {user_id:?}", user.name),
            ));
        }
        Ok(user)
    }

    /// Order entry's answers, in order: a refused order is finished at once with why,
    /// and said in a notice; an accepted one shows through the account's channels.
    fn answered(&mut self, in_flight: &mut InFlight<Meta>) {
        while let Some((meta, answer)) = in_flight.pop_answered() {
            let Err(error) = answer else { continue };
            match meta {
                Meta::Insert { order_id, exchange_id, instrument_id, volume } => {
                    let why = format!("{}: {}", error.code, error.message);
                    if let Some(user) = &self.user {
                        let name = user.name.clone();
                        let order = trading::refused_order_json(
                            &name,
                            &order_id,
                            &exchange_id,
                            &instrument_id,
                            volume,
                            &why,
                        );
                        self.pending.push(
                            json!({ "trade": { name: { "orders": { order_id.clone(): order } } } }),
                        );
                    }
                    self.refuse(error.code, &format!("order {order_id}: {}", error.message));
                }
                Meta::Cancel { order_id } => {
                    self.refuse(error.code, &format!("cancel of {order_id}: {}", error.message));
                }
            }
        }
    }

    /// A hub message as patches.
    fn on_feed(&mut self, message: &FeedMessage) {
        match &message.body {
            FeedBody::Json { channel: "quote", message, .. } => {
                let (Some(symbol), Some(data)) =
                    (message.get("symbol").and_then(Value::as_str), message.get("data"))
                else {
                    return;
                };
                self.pending.push(json!({ "quotes": { symbol: data } }));
            }
            FeedBody::Json { channel: "positions", message, .. } => {
                let Some(user) = &mut self.user else { return };
                let reference = self.state.directory.reference();
                let view = message.get("data").cloned().unwrap_or(Value::Null);
                let mut now = trading::accounts_and_positions(&view, &reference, &user.name);
                trading::keep_flat_positions(&user.view, &mut now);
                if let Some(changed) = super::patch::diff(&user.view, &now) {
                    let name = user.name.clone();
                    user.view = now;
                    self.pending.push(json!({ "trade": { name: changed } }));
                }
            }
            FeedBody::Json { channel: "ticks", message, .. } => self.on_tick_message(message),
            FeedBody::Text(text) => {
                // The candle service's candles come as JSON text.
                if let Ok(message) = serde_json::from_str::<Value>(text) {
                    if message.get("channel").and_then(Value::as_str) == Some("candles") {
                        self.on_candle_message(&message);
                    }
                }
            }
            FeedBody::Order { record, reference, .. } => {
                let Some(user) = &mut self.user else { return };
                let Some(info) = reference.instrument(record.instrument) else { return };
                let offset = trading::offset_name(record.offset);
                user.offsets.insert(record.client_id.to_string(), offset);
                let order = trading::order_json(info, record, &user.name);
                let mut trades = Map::new();
                for trade_id in
                    user.offsetless.remove(record.client_id.as_str()).unwrap_or_default()
                {
                    trades.insert(trade_id, json!({ "offset": offset }));
                }
                let name = user.name.clone();
                self.pending.push(json!({ "trade": { name: {
                    "orders": { record.client_id.as_str(): order }, "trades": trades,
                } } }));
            }
            FeedBody::Fill { fill, reference, .. } => {
                let Some(user) = &mut self.user else { return };
                let Some(info) = reference.instrument(fill.instrument) else { return };
                let known = user.offsets.get(fill.client_order_id.as_str()).copied();
                let (trade_id, trade) =
                    trading::trade_json(info, fill, known.unwrap_or("OPEN"), &user.name);
                if known.is_none() {
                    let waiting =
                        user.offsetless.entry(fill.client_order_id.to_string()).or_default();
                    // (Bounded: the order's record follows its fills in the same round.)
                    if waiting.len() < ORDERS_AT_LOGIN_MAX {
                        waiting.push(trade_id.clone());
                    }
                }
                let name = user.name.clone();
                self.pending.push(json!({ "trade": { name: { "trades": { trade_id: trade } } } }));
            }
            FeedBody::Json { .. } => {}
        }
    }

    /// New ticks of a followed instrument: for its tick charts.
    fn on_tick_message(&mut self, message: &Value) {
        let Some(symbol) = message.get("symbol").and_then(Value::as_str) else { return };
        let Some(data) = message.get("data").and_then(Value::as_object) else { return };
        let series: Vec<(i64, Value)> = data
            .iter()
            .filter_map(|(id, tick)| Some((id.parse::<i64>().ok()?, tick.clone())))
            .collect();
        let ids: Vec<String> = self
            .charts
            .iter()
            .filter(|(_, chart)| chart.duration_ns == 0 && chart.symbol == symbol)
            .map(|(id, _)| id.clone())
            .collect();
        for chart_id in ids {
            if let Some(mut chart) = self.charts.remove(&chart_id) {
                self.chart_patch(&mut chart, &chart_id, series.clone(), None);
                self.charts.insert(chart_id, chart);
            }
        }
    }

    /// The current candle of a followed interval: the kline of its charts.
    fn on_candle_message(&mut self, message: &Value) {
        let Some(symbol) = message.get("symbol").and_then(Value::as_str) else { return };
        let Some(interval) = message.get("interval").and_then(Value::as_str) else { return };
        let Some(duration_ns) = bourse_marketdata::candles::interval(interval) else { return };
        let Some(fields) = message.get("data").and_then(Value::as_array) else { return };
        let reference = self.state.directory.reference();
        let Some((_, info)) = reference.find_instrument(symbol) else { return };
        let Some(candle) = candle_from_json(info, fields) else { return };
        let point = kline(info, duration_ns, &candle);
        let ids: Vec<String> = self
            .charts
            .iter()
            .filter(|(_, chart)| chart.duration_ns == duration_ns && chart.symbol == symbol)
            .map(|(id, _)| id.clone())
            .collect();
        for chart_id in ids {
            if let Some(mut chart) = self.charts.remove(&chart_id) {
                self.chart_patch(&mut chart, &chart_id, vec![point.clone()], None);
                self.charts.insert(chart_id, chart);
            }
        }
    }
}

/// The smallest id among a series' points (`-1` for none).
fn first_id(data: &Map<String, Value>) -> i64 {
    data.keys().filter_map(|id| id.parse::<i64>().ok()).min().unwrap_or(-1)
}

/// A decimal string in units of `decimals`.
fn units(text: &str, decimals: u32) -> Option<i64> {
    Decimal::parse(text)?.to_units(decimals).and_then(|units| i64::try_from(units).ok())
}

/// A candle as DIFF's kline, with its id.
fn kline(info: &InstrumentInfo, duration_ns: u64, candle: &Candle) -> (i64, Value) {
    let id = (candle.start_ns / duration_ns.max(1)) as i64;
    (
        id,
        json!({
            "datetime": candle.start_ns,
            "open": price_number(info, candle.open.0),
            "high": price_number(info, candle.high.0),
            "low": price_number(info, candle.low.0),
            "close": price_number(info, candle.close.0),
            "volume": lots(info, i128::from(candle.volume.0)),
            "open_oi": 0, "close_oi": 0,
        }),
    )
}

/// A candle from the candle service's JSON (`[start_ns, open, high, low, close, volume,
/// trades]`).
fn candle_from_json(info: &InstrumentInfo, fields: &[Value]) -> Option<Candle> {
    let price = |index: usize| -> Option<bourse_core::Price> {
        Some(bourse_core::Price(units(fields.get(index)?.as_str()?, info.price_decimals)?))
    };
    Some(Candle {
        start_ns: fields.first()?.as_u64()?,
        open: price(1)?,
        high: price(2)?,
        low: price(3)?,
        close: price(4)?,
        volume: bourse_core::Qty(units(fields.get(5)?.as_str()?, info.qty_decimals)?),
        // Not in the candle service's JSON, and DIFF's klines do not show them.
        notional: 0,
        taker_buy_volume: bourse_core::Qty(0),
        taker_buy_notional: 0,
        trades: u32::try_from(fields.get(6)?.as_u64()?).ok()?,
    })
}

/// What the instrument query tells of every instrument.
async fn symbol_infos(state: &Shared, reference: &Reference) -> Vec<symbols::SymbolInfo> {
    let terms: HashMap<InstrumentId, ContractTerms> = state
        .queries
        .contract_terms()
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|terms| (terms.instrument, terms))
        .collect();
    let market = state.market();
    reference
        .instruments
        .iter()
        .enumerate()
        .map(|(index, info)| {
            let instrument = InstrumentId(index as u32);
            let terms = terms.get(&instrument);
            // The open interest at the last settlement, as the quote shows it.
            let pre_open_interest = terms.map(|_| market.pre_open_interest(instrument));
            symbol_info(info, terms, pre_open_interest)
        })
        .collect()
}

fn symbol_info(
    info: &InstrumentInfo,
    contract: Option<&ContractTerms>,
    pre_open_interest: Option<i64>,
) -> symbols::SymbolInfo {
    let (exchange_id, code) = exchange_and_code(&info.symbol);
    let as_f64 = |value: Value| value.as_f64();
    let product_id: String = code.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
    let money = |units: i64| {
        contract.and_then(|terms| decimal_f64(i128::from(units), terms.settle_decimals))
    };
    symbols::SymbolInfo {
        symbol: info.symbol.clone(),
        exchange_id: exchange_id.to_string(),
        instrument_id: code.to_string(),
        instrument_name: None,
        class: if info.is_future() {
            symbols::InstrumentClass::Future
        } else {
            symbols::InstrumentClass::Spot
        },
        price_tick: as_f64(price_number(info, info.tick)).unwrap_or(f64::NAN),
        price_decs: info.price_decimals,
        volume_multiple: crate::services::feed::quote::multiplier(info),
        product_id: (!product_id.is_empty()).then_some(product_id),
        expired: contract.is_some_and(|terms| terms.expired),
        expire_datetime: None,
        delivery_year: None,
        delivery_month: None,
        pre_settlement: contract
            .and_then(|terms| terms.settlement_price)
            .and_then(|price| as_f64(price_number(info, price.0))),
        pre_close: None,
        pre_open_interest: pre_open_interest.map(|units| lots(info, i128::from(units))),
        upper_limit: None,
        lower_limit: None,
        min_order_volume: Some(lots(info, info.min_qty)),
        max_order_volume: Some(lots(info, info.max_qty)),
        margin: contract.and_then(|terms| money(terms.margin_units)),
        commission: contract.and_then(|terms| money(terms.taker_fee_units)),
    }
}

fn decimal_f64(units: i128, decimals: u32) -> Option<f64> {
    crate::reference::decimal(units, decimals).parse().ok()
}

/// A refusal of the DIFF decoder as order entry's error (its code kept).
fn diff_error(error: request::DiffError) -> ApiError {
    ApiError::new(error.code, error.message)
}

/// The level of the `notify` that tells a DIFF client of an error (tqsdk logs
/// `WARNING` and raises nothing; `ERROR` is for what failed): one arm per code. The
/// session goes on after every one of them; the codes that end it are said in the
/// WebSocket's close frame as well.
pub(crate) fn notify_level(code: ErrorCode) -> &'static str {
    match code {
        // Wait and try again: nothing was wrong with the request itself.
        ErrorCode::RateLimited | ErrorCode::Busy | ErrorCode::LoginLocked => "WARNING",
        ErrorCode::Rejected(_)
        | ErrorCode::InvalidCommand
        | ErrorCode::NotFound
        | ErrorCode::MethodNotAllowed
        | ErrorCode::BodyTooLarge
        | ErrorCode::Unsupported
        | ErrorCode::UnknownAccount
        | ErrorCode::UnknownKey
        | ErrorCode::UnknownTrade
        | ErrorCode::UnknownChannel
        | ErrorCode::DuplicateAccount
        | ErrorCode::InvalidAccount
        | ErrorCode::InvalidPassword
        | ErrorCode::InvalidSymbol
        | ErrorCode::NoSettlementPrice
        | ErrorCode::TooManySubscriptions
        | ErrorCode::TooManyCharts
        | ErrorCode::TooManySymbols
        | ErrorCode::UnknownAid
        | ErrorCode::MissingSignature
        | ErrorCode::InvalidKey
        | ErrorCode::InvalidTimestamp
        | ErrorCode::ExpiredTimestamp
        | ErrorCode::InvalidSignature
        | ErrorCode::ReplayedRequest
        | ErrorCode::InvalidCredentials
        | ErrorCode::Forbidden
        | ErrorCode::LoginRequired
        | ErrorCode::AlreadyLoggedIn
        | ErrorCode::TooManyConnections
        | ErrorCode::SlowConsumer
        | ErrorCode::IdleTimeout
        | ErrorCode::LoginTimeout
        | ErrorCode::MalformedFrame
        | ErrorCode::ProtocolError
        | ErrorCode::Resync
        | ErrorCode::ShuttingDown
        | ErrorCode::Closed
        | ErrorCode::EngineStopped
        | ErrorCode::NotLeader
        | ErrorCode::FeedOff
        | ErrorCode::HistoryOff
        | ErrorCode::HistoryUnreadable
        | ErrorCode::SqlUnavailable
        | ErrorCode::SqlError
        | ErrorCode::PlanError
        | ErrorCode::ExecutionError
        | ErrorCode::Io
        | ErrorCode::SqlFailed
        | ErrorCode::SettingsFailed
        | ErrorCode::KeyStoreFailed
        | ErrorCode::StoreFailed
        | ErrorCode::Internal => "ERROR",
    }
}
