//! The packs a DIFF client sends (`{"aid": …}`, one per WebSocket text message),
//! decoded into typed values and checked: kinds, types, ranges and lengths, with a
//! reason code and the field's name when something is wrong. It also maps an
//! `insert_order`'s DIFF terms onto Bourse's order terms (`order_terms`,
//! `to_new_order`). It owns the reading of the client's bytes only: it never panics
//! on them, never does I/O, and knows nothing of accounts, logins or the venue's
//! instruments (whether a symbol exists, whether `user_id` is the one logged in, how
//! `order_id` becomes a client order id: the connection's).
//!
//! Fields the client adds beyond the ones read here are ignored (tqsdk sends
//! `account_key`, `client_mac_address` and others); a field read here that is missing,
//! of the wrong type or out of range is `malformed`, naming it. `decode` (with
//! `diff::symbols::parse` on the queries it lets through) is fuzzed:
//! `cargo +nightly fuzz run diff_request`, from `crates/server`.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::fmt;

use bourse_core::command::OrderType;
use bourse_core::{Decimal, Offset, OrderSize, Side, StpMode, TimeInForce};
use bourse_protocol::client_order_id;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::port::error::ErrorCode;
use crate::port::orders::request::{CheckedClientOrderId, NewOrder};

/// At most this many symbols in one `ins_list`.
pub const SYMBOLS_MAX: usize = 500;
/// A symbol (`SHFE.cu2501`) is 1 to this many printable ASCII bytes.
pub const SYMBOL_BYTES_MAX: usize = 32;
/// A chart asks for at most this many bars or ticks (more is taken as this many).
pub const VIEW_WIDTH_MAX: u32 = 10_000;
/// `chart_id` and `query_id`: 1 to this many printable ASCII bytes, no spaces. An
/// `order_id` is the client order id, under its one rule (`Text::ClientOrderId`).
pub const ID_BYTES_MAX: usize = 64;
pub const USER_NAME_BYTES_MAX: usize = 64;
pub const PASSWORD_BYTES_MAX: usize = 128;
/// `bid` (the broker's name, often Chinese) in UTF-8 bytes.
pub const BROKER_BYTES_MAX: usize = 128;
pub const QUERY_BYTES_MAX: usize = 100_000;

const NANOS_PER_SECOND: i64 = 1_000_000_000;

/// Why a pack was refused: a stable code (`malformed`, `unknown_aid`,
/// `too_many_symbols`, `unsupported`) and what exactly was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffError {
    pub code: ErrorCode,
    pub message: String,
}

impl DiffError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> DiffError {
        DiffError { code, message: message.into() }
    }

    pub fn malformed(message: impl Into<String>) -> DiffError {
        DiffError::new(ErrorCode::MALFORMED, message)
    }

    /// Something DIFF can say that Bourse cannot do.
    pub fn unsupported(message: impl Into<String>) -> DiffError {
        DiffError::new(ErrorCode::Unsupported, message)
    }
}

impl fmt::Display for DiffError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for DiffError {}

pub type DiffResult<T> = Result<T, DiffError>;

/// One pack from the client.
#[derive(Clone, Debug, PartialEq)]
pub enum Pack {
    /// Send what changed (now, or as soon as something does).
    PeekMessage,
    /// Quotes for exactly these symbols from now on (none: no quotes).
    SubscribeQuote {
        symbols: Vec<String>,
    },
    SetChart(SetChart),
    InsQuery(InsQuery),
    ReqLogin(ReqLogin),
    ConfirmSettlement,
    InsertOrder(InsertOrder),
    CancelOrder(CancelOrder),
}

impl Pack {
    /// The pack's `aid`.
    pub fn aid(&self) -> &'static str {
        match self {
            Pack::PeekMessage => "peek_message",
            Pack::SubscribeQuote { .. } => "subscribe_quote",
            Pack::SetChart(_) => "set_chart",
            Pack::InsQuery(_) => "ins_query",
            Pack::ReqLogin(_) => "req_login",
            Pack::ConfirmSettlement => "confirm_settlement",
            Pack::InsertOrder(_) => "insert_order",
            Pack::CancelOrder(_) => "cancel_order",
        }
    }
}

/// `set_chart`: keep the chart `chart_id` filled with the last `view_width` bars of
/// `duration` (or ticks) of `symbols` (the first is the main one, the others aligned
/// to it); no symbols cancels the chart.
#[derive(Clone, Debug, PartialEq)]
pub struct SetChart {
    pub chart_id: String,
    pub symbols: Vec<String>,
    /// Nanoseconds: 0 for ticks, else a whole number of seconds.
    pub duration_ns: i64,
    /// 1 to `VIEW_WIDTH_MAX` (a larger request is taken as `VIEW_WIDTH_MAX`).
    pub view_width: u32,
    /// Ask for the bars from this id on (instead of the latest).
    pub left_kline_id: Option<i64>,
    /// Ask for the bars around this time (nanoseconds since the epoch), ...
    pub focus_datetime: Option<i64>,
    /// ... with the bar at that time this many places from the left.
    pub focus_position: Option<i64>,
    /// The pack as sent (`aid` included): the server shows it as
    /// `charts.<chart_id>.state`, which tqsdk compares with what it sent.
    pub raw: Map<String, Value>,
}

impl SetChart {
    /// Whether the pack cancels the chart.
    pub fn is_cancel(&self) -> bool {
        self.symbols.is_empty()
    }
}

/// `ins_query`: answer the GraphQL `query` (with `variables`) under
/// `symbols.<query_id>` (`diff::symbols` reads the query).
#[derive(Clone, Debug, PartialEq)]
pub struct InsQuery {
    pub query_id: String,
    /// Empty: the client drops the query (its answer may go).
    pub query: String,
    pub variables: Option<Map<String, Value>>,
}

impl InsQuery {
    pub fn is_drop(&self) -> bool {
        self.query.is_empty()
    }
}

/// `req_login`. Its `Debug` does not show the password.
#[derive(Clone, PartialEq, Eq)]
pub struct ReqLogin {
    /// The broker (`bid`), as tqsdk names it.
    pub bid: String,
    pub user_name: String,
    pub password: String,
}

impl fmt::Debug for ReqLogin {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("ReqLogin")
            .field("bid", &self.bid)
            .field("user_name", &self.user_name)
            .field("password", &"…")
            .finish()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Buy,
    Sell,
}

/// DIFF's `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiffOffset {
    Open,
    Close,
    CloseToday,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PriceType {
    Limit,
    /// Any price: a market order.
    Any,
    /// CFFEX's best price.
    Best,
    /// CFFEX's five levels.
    FiveLevel,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VolumeCondition {
    Any,
    /// At least `min_volume`.
    Min,
    All,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeCondition {
    /// Immediate or cancel.
    Ioc,
    /// Good for the session.
    Gfs,
    /// Good for the day.
    Gfd,
    /// Good till a date.
    Gtd,
    /// Good till cancelled.
    Gtc,
    /// Good for the auction.
    Gfa,
}

/// `insert_order`, its terms as DIFF states them (`order_terms` says what they are on
/// Bourse).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InsertOrder {
    pub user_id: String,
    pub order_id: String,
    pub exchange_id: String,
    /// The code within the exchange (`cu2501`); `symbol()` is the whole symbol.
    pub instrument_id: String,
    pub direction: Direction,
    /// `None` when not sent (tqsdk's stock orders).
    pub offset: Option<DiffOffset>,
    /// Lots, positive.
    pub volume: i64,
    pub price_type: PriceType,
    /// The number exactly as sent (`50000.5`, not the float nearest to it); required
    /// for `LIMIT`.
    pub limit_price: Option<Decimal>,
    /// `ANY` when not sent.
    pub volume_condition: VolumeCondition,
    /// `None` when not sent: `GFD` for a limit order, `IOC` for the others.
    pub time_condition: Option<TimeCondition>,
    pub min_volume: Option<i64>,
}

impl InsertOrder {
    /// `exchange_id.instrument_id`, as DIFF names instruments.
    pub fn symbol(&self) -> String {
        format!("{}.{}", self.exchange_id, self.instrument_id)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CancelOrder {
    pub user_id: String,
    pub order_id: String,
}

/// Decodes one WebSocket text message. Never panics; what it refuses comes with a
/// reason code (`DiffError`).
pub fn decode(text: &str) -> DiffResult<Pack> {
    let fields = Fields::read(text)?;
    let aid = fields.required_string("aid", Text::Any, usize::MAX)?;
    match aid.as_str() {
        "peek_message" => Ok(Pack::PeekMessage),
        "subscribe_quote" => {
            let ins_list = fields.required_string("ins_list", Text::Any, usize::MAX)?;
            Ok(Pack::SubscribeQuote { symbols: symbol_list("ins_list", &ins_list)? })
        }
        "set_chart" => set_chart(text, &fields).map(Pack::SetChart),
        "ins_query" => ins_query(&fields).map(Pack::InsQuery),
        "req_login" => Ok(Pack::ReqLogin(ReqLogin {
            bid: fields.required_string("bid", Text::Name, BROKER_BYTES_MAX)?,
            user_name: fields.required_string("user_name", Text::Name, USER_NAME_BYTES_MAX)?,
            password: fields.required_string("password", Text::Any, PASSWORD_BYTES_MAX)?,
        })),
        "confirm_settlement" => Ok(Pack::ConfirmSettlement),
        "insert_order" => insert_order(&fields).map(Pack::InsertOrder),
        "cancel_order" => Ok(Pack::CancelOrder(CancelOrder {
            user_id: fields.required_string("user_id", Text::Name, USER_NAME_BYTES_MAX)?,
            order_id: fields.required_string(
                "order_id",
                Text::ClientOrderId,
                client_order_id::CLIENT_ORDER_ID_BYTES_MAX,
            )?,
        })),
        other => Err(DiffError::new(
            ErrorCode::UnknownAid,
            format!("no pack is called {:?}", shorten(other)),
        )),
    }
}

fn set_chart(text: &str, fields: &Fields<'_>) -> DiffResult<SetChart> {
    let chart_id = fields.required_string("chart_id", Text::Id, ID_BYTES_MAX)?;
    let ins_list = fields.required_string("ins_list", Text::Any, usize::MAX)?;
    let symbols = symbol_list("ins_list", &ins_list)?;
    let duration_ns = fields.required_integer("duration")?;
    if duration_ns < 0 || duration_ns % NANOS_PER_SECOND != 0 {
        return Err(DiffError::malformed(format!(
            "duration is in nanoseconds: 0 for ticks or a whole number of seconds, not {duration_ns}"
        )));
    }
    let view_width = fields.required_integer("view_width")?;
    if view_width <= 0 {
        return Err(DiffError::malformed(format!(
            "view_width must be a positive whole number, not {view_width}"
        )));
    }
    let view_width = u32::try_from(view_width).unwrap_or(VIEW_WIDTH_MAX).min(VIEW_WIDTH_MAX);
    // Read again whole, to be shown as it was sent.
    let raw: Map<String, Value> = serde_json::from_str(text)
        .map_err(|error| DiffError::malformed(format!("not a JSON object: {error}")))?;
    Ok(SetChart {
        chart_id,
        symbols,
        duration_ns,
        view_width,
        left_kline_id: fields.integer("left_kline_id")?,
        focus_datetime: fields.integer("focus_datetime")?,
        focus_position: fields.integer("focus_position")?,
        raw,
    })
}

fn ins_query(fields: &Fields<'_>) -> DiffResult<InsQuery> {
    let variables = match fields.present("variables") {
        None => None,
        Some(raw) if raw.get().starts_with('{') => Some(
            serde_json::from_str(raw.get())
                .map_err(|error| DiffError::malformed(format!("invalid variables: {error}")))?,
        ),
        Some(_) => return Err(DiffError::malformed("variables must be an object")),
    };
    Ok(InsQuery {
        query_id: fields.required_string("query_id", Text::Id, ID_BYTES_MAX)?,
        query: fields.required_string("query", Text::Any, QUERY_BYTES_MAX)?,
        variables,
    })
}

fn insert_order(fields: &Fields<'_>) -> DiffResult<InsertOrder> {
    let exchange_id = fields.required_string("exchange_id", Text::Exchange, SYMBOL_BYTES_MAX)?;
    let instrument_id = fields.required_string("instrument_id", Text::Symbol, SYMBOL_BYTES_MAX)?;
    if exchange_id.len() + 1 + instrument_id.len() > SYMBOL_BYTES_MAX {
        return Err(DiffError::malformed(format!(
            "exchange_id.instrument_id is at most {SYMBOL_BYTES_MAX} bytes"
        )));
    }
    let volume = fields.required_integer("volume")?;
    if volume <= 0 {
        return Err(DiffError::malformed(format!(
            "volume must be a positive whole number, not {volume}"
        )));
    }
    let price_type = fields.required_choice(
        "price_type",
        &[
            ("LIMIT", PriceType::Limit),
            ("ANY", PriceType::Any),
            ("BEST", PriceType::Best),
            ("FIVELEVEL", PriceType::FiveLevel),
        ],
    )?;
    let limit_price = fields.price("limit_price")?;
    if price_type == PriceType::Limit && limit_price.is_none() {
        return Err(DiffError::malformed("a LIMIT order needs limit_price"));
    }
    let min_volume = fields.integer("min_volume")?;
    if min_volume.is_some_and(|min_volume| min_volume <= 0) {
        return Err(DiffError::malformed("min_volume must be a positive whole number"));
    }
    Ok(InsertOrder {
        user_id: fields.required_string("user_id", Text::Name, USER_NAME_BYTES_MAX)?,
        order_id: fields.required_string(
            "order_id",
            Text::ClientOrderId,
            client_order_id::CLIENT_ORDER_ID_BYTES_MAX,
        )?,
        exchange_id,
        instrument_id,
        direction: fields
            .required_choice("direction", &[("BUY", Direction::Buy), ("SELL", Direction::Sell)])?,
        offset: fields.choice(
            "offset",
            &[
                ("OPEN", DiffOffset::Open),
                ("CLOSE", DiffOffset::Close),
                ("CLOSETODAY", DiffOffset::CloseToday),
            ],
        )?,
        volume,
        price_type,
        limit_price,
        volume_condition: fields
            .choice(
                "volume_condition",
                &[
                    ("ANY", VolumeCondition::Any),
                    ("MIN", VolumeCondition::Min),
                    ("ALL", VolumeCondition::All),
                ],
            )?
            .unwrap_or(VolumeCondition::Any),
        time_condition: fields.choice(
            "time_condition",
            &[
                ("IOC", TimeCondition::Ioc),
                ("GFS", TimeCondition::Gfs),
                ("GFD", TimeCondition::Gfd),
                ("GTD", TimeCondition::Gtd),
                ("GTC", TimeCondition::Gtc),
                ("GFA", TimeCondition::Gfa),
            ],
        )?,
        min_volume,
    })
}

/// An `insert_order`'s terms as Bourse's order path takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderTerms {
    pub side: Side,
    pub offset: Offset,
    pub order_type: OrderType,
    pub time_in_force: TimeInForce,
}

/// What an `insert_order` is on Bourse, or `unsupported` for what Bourse cannot do:
///
/// | price_type | time_condition | volume_condition | Bourse |
/// | --- | --- | --- | --- |
/// | `LIMIT` | `GFD` (or none) | `ANY` | limit, good for the day |
/// | `LIMIT` | `GTC` | `ANY` | limit, good till cancelled |
/// | `LIMIT` | `IOC` | `ANY` | limit, immediate or cancel |
/// | `LIMIT` | `IOC` | `ALL` | limit, fill or kill |
/// | `ANY` | `IOC` (or none) | `ANY` | market (immediate or cancel) |
/// | `ANY` | `IOC` (or none) | `ALL` | market, fill or kill |
///
/// Everything else is `unsupported`: `BEST` and `FIVELEVEL` (CFFEX's), `GFS`, `GTD`
/// and `GFA`, `MIN` (Bourse has no minimum volume), `ALL` on an order that rests, and a
/// market order that would rest. A missing offset is `OPEN` (tqsdk sends none for
/// stocks; Bourse ignores the offset on spot).
pub fn order_terms(order: &InsertOrder) -> DiffResult<OrderTerms> {
    let side = match order.direction {
        Direction::Buy => Side::Buy,
        Direction::Sell => Side::Sell,
    };
    let offset = match order.offset.unwrap_or(DiffOffset::Open) {
        DiffOffset::Open => Offset::Open,
        DiffOffset::Close => Offset::Close,
        DiffOffset::CloseToday => Offset::CloseToday,
    };
    let order_type = match (order.price_type, order.limit_price) {
        (PriceType::Limit, Some(price)) => OrderType::Limit { price },
        (PriceType::Limit, None) => {
            return Err(DiffError::malformed("a LIMIT order needs limit_price"))
        }
        (PriceType::Any, _) => OrderType::Market,
        (PriceType::Best | PriceType::FiveLevel, _) => {
            return Err(DiffError::unsupported(
                "price_type BEST and FIVELEVEL are CFFEX's: use LIMIT or ANY",
            ))
        }
    };
    if order.volume_condition == VolumeCondition::Min {
        return Err(DiffError::unsupported(
            "volume_condition MIN: Bourse has no minimum volume (use ANY or ALL)",
        ));
    }
    let all = order.volume_condition == VolumeCondition::All;
    let default = match order_type {
        OrderType::Limit { .. } => TimeCondition::Gfd,
        OrderType::Market => TimeCondition::Ioc,
    };
    let time_in_force = match (order.time_condition.unwrap_or(default), all) {
        (TimeCondition::Ioc, false) => TimeInForce::ImmediateOrCancel,
        (TimeCondition::Ioc, true) => TimeInForce::FillOrKill,
        (TimeCondition::Gfd | TimeCondition::Gtc, true) => {
            return Err(DiffError::unsupported(
                "volume_condition ALL is for IOC orders only (fill or kill)",
            ))
        }
        (TimeCondition::Gfd, false) if order_type != OrderType::Market => TimeInForce::GoodForDay,
        (TimeCondition::Gtc, false) if order_type != OrderType::Market => {
            TimeInForce::GoodTillCancel
        }
        (TimeCondition::Gfd | TimeCondition::Gtc, false) => {
            return Err(DiffError::unsupported(
                "a market order (price_type ANY) is immediate: time_condition IOC",
            ))
        }
        (TimeCondition::Gfs | TimeCondition::Gtd | TimeCondition::Gfa, _) => {
            return Err(DiffError::unsupported(
                "time_condition GFS, GTD and GFA: Bourse has IOC, GFD and GTC",
            ))
        }
    };
    Ok(OrderTerms { side, offset, order_type, time_in_force })
}

/// The order Bourse's order path takes for `order`, on the venue's instrument `symbol`
/// (which the connection found for `order.symbol()`) whose prices have
/// `price_decimals` decimal places, with `client_order_id` (which the connection makes
/// from `order.order_id`: a tqsdk order id, `PYSDK_insert_` and 32 hex digits, is longer
/// than a client order id may be). The limit price is `snap_float_noise`d; quantities
/// are lots; the order is not post-only, and self-trade prevention is the gateways'
/// default.
pub fn to_new_order<'a>(
    order: &InsertOrder,
    symbol: Cow<'a, str>,
    price_decimals: u32,
    client_order_id: Option<CheckedClientOrderId<'a>>,
) -> DiffResult<NewOrder<'a>> {
    let terms = order_terms(order)?;
    let order_type = match terms.order_type {
        OrderType::Limit { price } => {
            OrderType::Limit { price: snap_float_noise(price, price_decimals) }
        }
        OrderType::Market => OrderType::Market,
    };
    Ok(NewOrder {
        client_order_id,
        symbol,
        side: terms.side,
        order_type,
        size: OrderSize::of_qty(Decimal::from_units(i128::from(order.volume), 0)),
        time_in_force: terms.time_in_force,
        post_only: false,
        stp: StpMode::CancelTaker,
        offset: terms.offset,
    })
}

/// `price` rounded to `decimals` places when what lies beyond them is a float's noise,
/// else `price` as it is (the engine then refuses a price off the tick).
///
/// tqsdk sends prices as floats printed shortest (`repr`), which is exact for any
/// price typed or read from a quote; but a price computed in floats (`0.1 + 0.2`) comes
/// out as `0.30000000000000004`. Noise is told apart by two signs together: at least
/// 16 significant digits (more than a float holds: `repr` needs them only for a float
/// off the decimal meant), and less than a millionth of a unit of the last place kept
/// beyond it.
pub fn snap_float_noise(price: Decimal, decimals: u32) -> Decimal {
    let excess = price.scale().saturating_sub(decimals);
    if excess == 0 || excess > 38 {
        return price;
    }
    let mantissa = price.mantissa();
    let significant = mantissa.unsigned_abs().checked_ilog10().map_or(1, |log| log + 1);
    let divisor = 10i128.pow(excess);
    let (quotient, remainder) = (mantissa / divisor, mantissa % divisor);
    let (remainder, divisor_abs) = (remainder.unsigned_abs(), divisor.unsigned_abs());
    let (rounded, off) = if remainder * 2 >= divisor_abs {
        (quotient + mantissa.signum(), divisor_abs - remainder)
    } else {
        (quotient, remainder)
    };
    if significant >= 16 && off.saturating_mul(1_000_000) < divisor_abs {
        Decimal::from_units(rounded, decimals)
    } else {
        price
    }
}

/// An `ins_list`: symbols separated by commas, each trimmed; empty ones are skipped and
/// repeats dropped (the first stays), in order.
pub fn symbol_list(field: &str, text: &str) -> DiffResult<Vec<String>> {
    let mut symbols = Vec::new();
    let mut seen = HashSet::new();
    for symbol in text.split(',').map(str::trim).filter(|symbol| !symbol.is_empty()) {
        if symbol.len() > SYMBOL_BYTES_MAX || !is_symbol(symbol) {
            return Err(DiffError::malformed(format!(
                "{field}: a symbol is 1 to {SYMBOL_BYTES_MAX} printable ASCII characters, not {:?}",
                shorten(symbol)
            )));
        }
        if seen.insert(symbol) {
            if symbols.len() == SYMBOLS_MAX {
                return Err(DiffError::new(
                    ErrorCode::TooManySymbols,
                    format!("{field} names more than {SYMBOLS_MAX} symbols"),
                ));
            }
            symbols.push(symbol.to_string());
        }
    }
    Ok(symbols)
}

/// What a string field may hold.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Text {
    /// Anything, even nothing (`ins_list`, `query`, `password`, a choice).
    Any,
    /// Ids: printable ASCII without spaces.
    Id,
    /// An order's id: the client order id every protocol shares
    /// (`bourse_protocol::client_order_id`).
    ClientOrderId,
    /// Printable ASCII, spaces inside allowed (combinations, `SP au2610&au2704`).
    Symbol,
    /// Printable ASCII without spaces or dots.
    Exchange,
    /// Names (a user's, a broker's): any characters but control characters.
    Name,
}

impl Text {
    fn accepts(self, text: &str) -> bool {
        let ascii = |allowed: fn(u8) -> bool| text.bytes().all(allowed);
        match self {
            Text::Any => true,
            Text::Id => !text.is_empty() && ascii(|byte| byte.is_ascii_graphic()),
            Text::ClientOrderId => client_order_id::is_valid(text),
            Text::Symbol => is_symbol(text),
            Text::Exchange => {
                !text.is_empty() && ascii(|byte| byte.is_ascii_graphic() && byte != b'.')
            }
            Text::Name => !text.is_empty() && !text.chars().any(char::is_control),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Text::Any => "anything",
            Text::Id => "printable ASCII without spaces",
            Text::ClientOrderId => "a client order id: printable ASCII without spaces",
            Text::Symbol => "printable ASCII",
            Text::Exchange => "printable ASCII without spaces or dots",
            Text::Name => "characters other than control characters",
        }
    }
}

/// A symbol's characters: printable ASCII, spaces inside allowed.
fn is_symbol(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_graphic() || byte == b' ')
}

/// At most 40 characters of `text`, for messages.
fn shorten(text: &str) -> Cow<'_, str> {
    match text.char_indices().nth(40) {
        Some((end, _)) => Cow::Owned(format!("{}…", &text[..end])),
        None => Cow::Borrowed(text),
    }
}

/// A pack's members, each as the JSON text it was sent as (so a number is read from
/// its digits, never through a float). A member that is `null` counts as absent.
struct Fields<'a> {
    members: BTreeMap<String, &'a RawValue>,
}

impl<'a> Fields<'a> {
    fn read(text: &'a str) -> DiffResult<Fields<'a>> {
        let members: BTreeMap<String, &'a RawValue> = serde_json::from_str(text)
            .map_err(|error| DiffError::malformed(format!("not a JSON object: {error}")))?;
        Ok(Fields { members })
    }

    fn present(&self, name: &str) -> Option<&'a RawValue> {
        self.members.get(name).copied().filter(|raw| raw.get() != "null")
    }

    fn required(&self, name: &str) -> DiffResult<&'a RawValue> {
        self.present(name).ok_or_else(|| DiffError::malformed(format!("{name} is missing")))
    }

    /// A string of at most `max_bytes` bytes that `rule` accepts.
    fn string(&self, name: &str, rule: Text, max_bytes: usize) -> DiffResult<Option<String>> {
        let Some(raw) = self.present(name) else { return Ok(None) };
        if !raw.get().starts_with('"') {
            return Err(DiffError::malformed(format!("{name} must be a string")));
        }
        let text: String = serde_json::from_str(raw.get())
            .map_err(|error| DiffError::malformed(format!("{name}: {error}")))?;
        if text.len() > max_bytes {
            return Err(DiffError::malformed(format!("{name} is longer than {max_bytes} bytes")));
        }
        if !rule.accepts(&text) {
            return Err(DiffError::malformed(format!(
                "{name} must be 1 to {max_bytes} bytes of {}, not {:?}",
                rule.describe(),
                shorten(&text)
            )));
        }
        Ok(Some(text))
    }

    fn required_string(&self, name: &str, rule: Text, max_bytes: usize) -> DiffResult<String> {
        self.required(name)?;
        self.string(name, rule, max_bytes)?
            .ok_or_else(|| DiffError::malformed(format!("{name} is missing")))
    }

    /// A whole number: an integer, or a float with no fraction (`60000000000.0`) within
    /// the range where floats are exact.
    fn integer(&self, name: &str) -> DiffResult<Option<i64>> {
        let Some(raw) = self.present(name) else { return Ok(None) };
        let text = raw.get();
        let wrong = || {
            DiffError::malformed(format!("{name} must be a whole number, not {}", shorten(text)))
        };
        if !text.starts_with(|first: char| first == '-' || first.is_ascii_digit()) {
            return Err(wrong());
        }
        if let Ok(integer) = text.parse::<i64>() {
            return Ok(Some(integer));
        }
        const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
        match text.parse::<f64>() {
            Ok(float) if float.fract() == 0.0 && float.abs() <= EXACT => Ok(Some(float as i64)),
            _ => Err(wrong()),
        }
    }

    fn required_integer(&self, name: &str) -> DiffResult<i64> {
        self.required(name)?;
        self.integer(name)?.ok_or_else(|| DiffError::malformed(format!("{name} is missing")))
    }

    /// A price: the JSON number's digits as a decimal, exactly.
    fn price(&self, name: &str) -> DiffResult<Option<Decimal>> {
        let Some(raw) = self.present(name) else { return Ok(None) };
        json_number_decimal(raw.get()).map(Some).ok_or_else(|| {
            DiffError::malformed(format!(
                "{name} must be a number of at most 38 digits, not {}",
                shorten(raw.get())
            ))
        })
    }

    /// One of `choices`' names.
    fn choice<T: Copy>(&self, name: &str, choices: &[(&str, T)]) -> DiffResult<Option<T>> {
        let Some(text) = self.string(name, Text::Any, 64)? else { return Ok(None) };
        match choices.iter().find(|(choice, _)| *choice == text) {
            Some((_, value)) => Ok(Some(*value)),
            None => {
                let names: Vec<&str> = choices.iter().map(|(choice, _)| *choice).collect();
                Err(DiffError::malformed(format!(
                    "{name} must be one of {}, not {:?}",
                    names.join(", "),
                    shorten(&text)
                )))
            }
        }
    }

    fn required_choice<T: Copy>(&self, name: &str, choices: &[(&str, T)]) -> DiffResult<T> {
        self.required(name)?;
        self.choice(name, choices)?
            .ok_or_else(|| DiffError::malformed(format!("{name} is missing")))
    }
}

/// A JSON number's text (`-?int(.frac)?([eE][+-]?exp)?`) as an exact decimal; `None`
/// when it is not a number or needs more than 38 digits.
pub fn json_number_decimal(text: &str) -> Option<Decimal> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], unsigned[at + 1..].parse::<i64>().ok()?),
        None => (unsigned, 0),
    };
    let (integer, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    if integer.is_empty()
        || !digits(integer)
        || !digits(fraction)
        || (mantissa.contains('.') && fraction.is_empty())
    {
        return None;
    }
    let all_digits: String = integer.chars().chain(fraction.chars()).collect();
    let point = i64::try_from(integer.len()).ok()?.checked_add(exponent)?;
    let significant = all_digits.trim_start_matches('0');
    let leading_zeros = i64::try_from(all_digits.len() - significant.len()).ok()?;
    let significant = significant.trim_end_matches('0');
    if significant.is_empty() {
        return Some(Decimal::ZERO);
    }
    // The value is 0.significant * 10^(point - leading_zeros).
    let magnitude = point.checked_sub(leading_zeros)?;
    let length = i64::try_from(significant.len()).ok()?;
    // Digits needed in all: the significant ones plus zeros on either side.
    let width = magnitude.max(length).max(length.checked_sub(magnitude)?);
    if width > 38 {
        return None;
    }
    let mut decimal = String::with_capacity(42);
    if negative {
        decimal.push('-');
    }
    if magnitude <= 0 {
        decimal.push_str("0.");
        decimal.extend(std::iter::repeat_n('0', usize::try_from(-magnitude).ok()?));
        decimal.push_str(significant);
    } else if magnitude >= length {
        decimal.push_str(significant);
        decimal.extend(std::iter::repeat_n('0', usize::try_from(magnitude - length).ok()?));
    } else {
        let split = usize::try_from(magnitude).ok()?;
        decimal.push_str(&significant[..split]);
        decimal.push('.');
        decimal.push_str(&significant[split..]);
    }
    Decimal::parse(&decimal)
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::json;

    use super::*;

    /// A pack exactly as tqsdk sent it (`testdata/tqsdk_packs.txt`).
    pub(crate) fn tqsdk(name: &str) -> &'static str {
        include_str!("testdata/tqsdk_packs.txt")
            .lines()
            .filter(|line| !line.starts_with('#'))
            .find_map(|line| line.strip_prefix(name)?.strip_prefix('\t'))
            .unwrap_or_else(|| panic!("no pack {name} in testdata/tqsdk_packs.txt"))
    }

    fn decoded(name: &str) -> Pack {
        decode(tqsdk(name)).unwrap_or_else(|error| panic!("{name}: {error}"))
    }

    fn error(text: &str) -> DiffError {
        match decode(text) {
            Ok(pack) => panic!("{} decoded to {pack:?}", shorten(text)),
            Err(error) => error,
        }
    }

    fn order(name: &str) -> InsertOrder {
        match decoded(name) {
            Pack::InsertOrder(order) => order,
            other => panic!("{other:?}"),
        }
    }

    fn checked(id: &str) -> CheckedClientOrderId<'_> {
        CheckedClientOrderId::parse(id).expect("a valid client order id")
    }

    fn price(text: &str) -> Decimal {
        Decimal::parse(text).unwrap_or_else(|| panic!("{text}"))
    }

    #[test]
    fn tqsdks_limit_order_is_good_for_the_day() {
        let order = order("limit_gfd");
        assert_eq!(
            order,
            InsertOrder {
                user_id: "103988".into(),
                order_id: "PYSDK_insert_8ca5996666ceab360512bd1311072231".into(),
                exchange_id: "SHFE".into(),
                instrument_id: "cu2501".into(),
                direction: Direction::Buy,
                offset: Some(DiffOffset::Open),
                volume: 2,
                price_type: PriceType::Limit,
                limit_price: Some(price("75010")),
                volume_condition: VolumeCondition::Any,
                time_condition: Some(TimeCondition::Gfd),
                min_volume: None,
            }
        );
        assert_eq!(order.symbol(), "SHFE.cu2501");
        let new_order = to_new_order(&order, "SHFE.cu2501".into(), 0, Some(checked("c1")));
        assert_eq!(
            new_order,
            Ok(NewOrder {
                client_order_id: Some(checked("c1")),
                symbol: "SHFE.cu2501".into(),
                side: Side::Buy,
                order_type: OrderType::Limit { price: price("75010") },
                size: OrderSize::of_qty(price("2")),
                time_in_force: TimeInForce::GoodForDay,
                post_only: false,
                stp: StpMode::CancelTaker,
                offset: Offset::Open,
            })
        );
    }

    #[test]
    fn tqsdks_fak_fok_and_market_orders_map_to_ioc_fok_and_market() {
        let terms = |name: &str| order_terms(&order(name));
        let expect = |order_type, time_in_force| {
            Ok(OrderTerms { side: Side::Buy, offset: Offset::Open, order_type, time_in_force })
        };
        assert_eq!(
            terms("limit_fak"),
            expect(OrderType::Limit { price: price("75010.5") }, TimeInForce::ImmediateOrCancel)
        );
        assert_eq!(
            terms("limit_fok"),
            expect(
                OrderType::Limit { price: price("0.30000000000000004") },
                TimeInForce::FillOrKill
            )
        );
        assert_eq!(terms("market"), expect(OrderType::Market, TimeInForce::ImmediateOrCancel));
        // A stock order: no offset, no conditions.
        let stock = order("stock");
        assert_eq!((stock.offset, stock.time_condition), (None, None));
        assert_eq!(
            order_terms(&stock),
            expect(OrderType::Limit { price: price("12.34") }, TimeInForce::GoodForDay)
        );
    }

    #[test]
    fn every_combination_maps_or_is_unsupported() {
        use TimeCondition::*;
        let base = order("limit_gfd");
        let terms = |price_type, time_condition, volume_condition| {
            let order =
                InsertOrder { price_type, time_condition, volume_condition, ..base.clone() };
            order_terms(&order).map(|terms| (terms.order_type, terms.time_in_force))
        };
        let limit = OrderType::Limit { price: price("75010") };
        let any = VolumeCondition::Any;
        let all = VolumeCondition::All;
        let cases = [
            (PriceType::Limit, Some(Gfd), any, Ok((limit, TimeInForce::GoodForDay))),
            (PriceType::Limit, None, any, Ok((limit, TimeInForce::GoodForDay))),
            (PriceType::Limit, Some(Gtc), any, Ok((limit, TimeInForce::GoodTillCancel))),
            (PriceType::Limit, Some(Ioc), any, Ok((limit, TimeInForce::ImmediateOrCancel))),
            (PriceType::Limit, Some(Ioc), all, Ok((limit, TimeInForce::FillOrKill))),
            (
                PriceType::Any,
                Some(Ioc),
                any,
                Ok((OrderType::Market, TimeInForce::ImmediateOrCancel)),
            ),
            (PriceType::Any, None, any, Ok((OrderType::Market, TimeInForce::ImmediateOrCancel))),
            (PriceType::Any, Some(Ioc), all, Ok((OrderType::Market, TimeInForce::FillOrKill))),
            (PriceType::Limit, Some(Gfd), all, Err("unsupported")),
            (PriceType::Limit, Some(Gtc), all, Err("unsupported")),
            (PriceType::Any, Some(Gfd), any, Err("unsupported")),
            (PriceType::Any, Some(Gtc), any, Err("unsupported")),
            (PriceType::Limit, Some(Ioc), VolumeCondition::Min, Err("unsupported")),
            (PriceType::Best, Some(Ioc), any, Err("unsupported")),
            (PriceType::FiveLevel, Some(Ioc), any, Err("unsupported")),
            (PriceType::Limit, Some(Gfs), any, Err("unsupported")),
            (PriceType::Limit, Some(Gtd), any, Err("unsupported")),
            (PriceType::Limit, Some(Gfa), any, Err("unsupported")),
        ];
        for (price_type, time_condition, volume_condition, expected) in cases {
            let got = terms(price_type, time_condition, volume_condition)
                .map_err(|error| error.code.as_str());
            assert_eq!(got, expected, "{price_type:?} {time_condition:?} {volume_condition:?}");
        }
        let sell_close = InsertOrder {
            direction: Direction::Sell,
            offset: Some(DiffOffset::CloseToday),
            ..base.clone()
        };
        let terms = order_terms(&sell_close).map(|terms| (terms.side, terms.offset));
        assert_eq!(terms, Ok((Side::Sell, Offset::CloseToday)));
        let close = InsertOrder { offset: Some(DiffOffset::Close), ..base };
        assert_eq!(order_terms(&close).map(|terms| terms.offset), Ok(Offset::Close));
    }

    #[test]
    fn float_noise_is_snapped_to_the_instruments_decimals_and_nothing_else() {
        let snapped = |text, decimals| snap_float_noise(price(text), decimals).to_string();
        assert_eq!(snapped("0.30000000000000004", 2), "0.3");
        assert_eq!(snapped("75010.50000000001", 1), "75010.5");
        assert_eq!(snapped("75009.99999999999", 0), "75010");
        assert_eq!(snapped("-0.30000000000000004", 2), "-0.3");
        // A price meant as it is stays as it is, for the engine to judge.
        assert_eq!(snapped("0.305", 2), "0.305");
        assert_eq!(snapped("75010.5", 0), "75010.5");
        assert_eq!(snapped("1.00000000000001", 0), "1.00000000000001");
        assert_eq!(snapped("0.3050000000000001", 2), "0.3050000000000001");
        assert_eq!(snapped("75010", 2), "75010");
        let new_order = to_new_order(&order("limit_fok"), "SHFE.cu2501".into(), 2, None);
        assert_eq!(
            new_order.map(|order| order.order_type),
            Ok(OrderType::Limit { price: price("0.3") })
        );
    }

    #[test]
    fn json_numbers_become_exact_decimals() {
        for (text, expected) in [
            ("75010.0", Some("75010")),
            ("0.30000000000000004", Some("0.30000000000000004")),
            ("1e-05", Some("0.00001")),
            ("1.5E+3", Some("1500")),
            ("-2.50", Some("-2.5")),
            ("0", Some("0")),
            ("-0.0", Some("0")),
            ("1e16", Some("10000000000000000")),
            ("0.000e5", Some("0")),
            ("1e38", None),
            ("1e-39", None),
            ("-1e-38", Some("-0.00000000000000000000000000000000000001")),
            ("1e999999999999999999999", None),
            ("\"1\"", None),
            ("1.", None),
            (".5", None),
            ("true", None),
        ] {
            assert_eq!(
                json_number_decimal(text).map(|decimal| decimal.to_string()).as_deref(),
                expected,
                "{text}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_decodes_or_is_refused_without_a_panic(text in "\\PC{0,40}") {
            let _ = json_number_decimal(&text);
            let _ = decode(&text);
            let _ = decode(&format!(r#"{{"aid":"insert_order","limit_price":{text},"volume":{text}}}"#));
        }

        #[test]
        fn a_float_as_json_prints_is_read_as_its_exact_decimal(float in proptest::num::f64::ANY) {
            // serde_json prints a float shortest (as Python's `repr` does).
            if let Ok(text) = serde_json::to_string(&float) {
                if let Some(decimal) = json_number_decimal(&text) {
                    proptest::prop_assert_eq!(decimal.to_string().parse::<f64>().ok(), Some(float));
                }
            }
        }
    }

    #[test]
    fn overflowing_exponents_are_refused() {
        for text in [
            "0.0001e-9223372036854775808",
            "1e9223372036854775807",
            "10e9223372036854775807",
            "0.1e-9223372036854775807",
        ] {
            assert_eq!(json_number_decimal(text), None, "{text}");
        }
    }

    #[test]
    fn tqsdks_cancel_login_and_settlement_packs() {
        assert_eq!(
            decoded("cancel"),
            Pack::CancelOrder(CancelOrder {
                user_id: "103988".into(),
                order_id: "PYSDK_insert_8ca5996666ceab360512bd1311072231".into(),
            })
        );
        let login = decoded("login");
        assert_eq!(
            login,
            Pack::ReqLogin(ReqLogin {
                bid: "快期模拟".into(),
                user_name: "103988".into(),
                password: "secret".into(),
            })
        );
        assert!(!format!("{login:?}").contains("secret"), "the password is not shown");
        assert_eq!(decoded("confirm"), Pack::ConfirmSettlement);
        assert_eq!(decoded("peek"), Pack::PeekMessage);
        assert_eq!(decoded("peek").aid(), "peek_message");
    }

    #[test]
    fn tqsdks_subscriptions_and_charts() {
        assert_eq!(
            decoded("subscribe"),
            Pack::SubscribeQuote { symbols: vec!["SHFE.cu2501".into(), "SHFE.cu2502".into()] }
        );
        let Pack::SetChart(kline) = decoded("kline") else { panic!("a chart") };
        assert_eq!(
            (kline.chart_id.as_str(), kline.symbols.clone(), kline.duration_ns, kline.view_width),
            (
                "PYSDK_realtime_3d2b1c0e8f6a4b5c9d7e1f2a3b4c5d6e",
                vec!["SHFE.cu2501".into()],
                60_000_000_000,
                200
            )
        );
        // The state shown back is the pack as sent, `aid` included (tqsdk checks
        // `pack.items() <= state.items()`).
        let sent: Map<String, Value> = serde_json::from_str(tqsdk("kline")).unwrap();
        assert_eq!(kline.raw, sent);
        assert!(!kline.is_cancel());
        let Pack::SetChart(tick) = decoded("tick") else { panic!("a chart") };
        assert_eq!((tick.duration_ns, tick.view_width), (0, 8964));
        let Pack::SetChart(series) = decoded("series") else { panic!("a chart") };
        assert_eq!(
            (series.focus_datetime, series.focus_position, series.left_kline_id),
            (Some(1_735_603_200_000_000_000), Some(0), None)
        );
        let Pack::SetChart(next) = decoded("series_next") else { panic!("a chart") };
        assert_eq!((next.focus_datetime, next.left_kline_id), (None, Some(4500)));
        let Pack::SetChart(cancel) = decoded("chart_cancel") else { panic!("a chart") };
        assert!(cancel.is_cancel());
    }

    #[test]
    fn tqsdks_queries() {
        let Pack::InsQuery(batch) = decoded("query_batch") else { panic!("a query") };
        assert_eq!(batch.query_id, "PYSDK_quote__4fb53d01729ddf9c289f127d4ae1a7a8");
        assert!(batch.query.starts_with("query {\n  multi_symbol_info(instrument_id: [\"SHFE."));
        assert_eq!(batch.variables, None);
        let Pack::InsQuery(single) = decoded("query_single") else { panic!("a query") };
        let variables = json!({"instrument_id": ["SHFE.cu2501"]});
        assert_eq!(single.variables.as_ref(), variables.as_object());
        assert!(!single.is_drop());
        let dropped = r#"{"aid":"ins_query","query_id":"PYSDK_api_1","query":"","variables":{}}"#;
        let Ok(Pack::InsQuery(dropped)) = decode(dropped) else { panic!("a query") };
        assert!(dropped.is_drop());
    }

    #[test]
    fn symbol_lists_are_trimmed_deduplicated_and_bounded() {
        let list = |text: &str| symbol_list("ins_list", text);
        assert_eq!(list(""), Ok(vec![]));
        assert_eq!(list(" a , ,b,a,, c "), Ok(vec!["a".into(), "b".into(), "c".into()]));
        assert_eq!(list("SHFE.SP au2610&au2704"), Ok(vec!["SHFE.SP au2610&au2704".into()]));
        let many: Vec<String> = (0..SYMBOLS_MAX).map(|index| format!("S{index}")).collect();
        assert_eq!(list(&many.join(",")).map(|symbols| symbols.len()), Ok(SYMBOLS_MAX));
        let repeated = format!("{},{}", many.join(","), many.join(","));
        assert_eq!(list(&repeated).map(|symbols| symbols.len()), Ok(SYMBOLS_MAX));
        let too_many = format!("{},one_more", many.join(","));
        assert_eq!(list(&too_many).map_err(|error| error.code.as_str()), Err("too_many_symbols"));
        let long = "X".repeat(SYMBOL_BYTES_MAX + 1);
        assert_eq!(list(&long).map_err(|error| error.code.as_str()), Err("malformed"));
        assert_eq!(list("a\tb").map_err(|error| error.code.as_str()), Err("malformed"));
        assert_eq!(list("é").map_err(|error| error.code.as_str()), Err("malformed"));
    }

    #[test]
    fn what_is_not_a_pack_is_malformed_or_unknown() {
        for text in [
            "",
            "[]",
            "5",
            "\"peek_message\"",
            "{",
            "{}",
            r#"{"aid":5}"#,
            r#"{"aid":null}"#,
            "{\"aid\":\"peek_message\"} x",
            "NaN",
        ] {
            assert_eq!(error(text).code, ErrorCode::MALFORMED, "{text}");
        }
        let unknown = error(r#"{"aid":"set_risk_management_rule"}"#);
        assert_eq!(unknown.code, ErrorCode::UnknownAid);
        assert!(unknown.message.contains("set_risk_management_rule"), "{}", unknown.message);
        // Fields beyond the ones read are ignored; a member that is null is absent.
        assert_eq!(
            decode(r#"{"aid":"peek_message","extra":{"deep":[1,2]}}"#),
            Ok(Pack::PeekMessage)
        );
        // Deep nesting is skipped where it is ignored, refused where it is read; never
        // followed to the end of the stack.
        let deep = |field: &str| {
            let nested = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
            format!(r#"{{"aid":"ins_query","query_id":"q","query":"","{field}":{{"a":{nested}}}}}"#)
        };
        assert!(matches!(decode(&deep("ignored")), Ok(Pack::InsQuery(_))));
        assert_eq!(
            decode(&deep("variables")).map_err(|error| error.code.as_str()),
            Err("malformed")
        );
    }

    /// `field` of `pack` set to `value` (JSON text), then decoded: the error's code and
    /// whether its message names the field.
    fn with(name: &str, field: &str, value: Option<&str>) -> (&'static str, bool) {
        let mut pack: Map<String, Value> = serde_json::from_str(tqsdk(name)).unwrap();
        match value {
            Some(value) => pack.insert(field.into(), serde_json::from_str(value).unwrap()),
            None => pack.remove(field),
        };
        let error = error(&Value::Object(pack).to_string());
        (error.code.as_str(), error.message.contains(field))
    }

    #[test]
    fn every_field_is_checked_and_named() {
        let malformed = ("malformed", true);
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("limit_gfd", "user_id", None),
            ("limit_gfd", "user_id", Some("5")),
            ("limit_gfd", "user_id", Some("\"\"")),
            ("limit_gfd", "order_id", Some("\"has space\"")),
            (
                "limit_gfd",
                "order_id",
                Some(&format!(
                    "\"{}\"",
                    "x".repeat(client_order_id::CLIENT_ORDER_ID_BYTES_MAX + 1)
                )),
            ),
            ("limit_gfd", "order_id", Some("null")),
            ("limit_gfd", "exchange_id", Some("\"SH.FE\"")),
            ("limit_gfd", "instrument_id", Some(&format!("\"{}\"", "x".repeat(30)))),
            ("limit_gfd", "direction", Some("\"buy\"")),
            ("limit_gfd", "direction", None),
            ("limit_gfd", "offset", Some("\"CLOSEYESTERDAY\"")),
            ("limit_gfd", "volume", Some("0")),
            ("limit_gfd", "volume", Some("-1")),
            ("limit_gfd", "volume", Some("1.5")),
            ("limit_gfd", "volume", Some("\"1\"")),
            ("limit_gfd", "volume", Some("1e300")),
            ("limit_gfd", "volume", Some("99999999999999999999")),
            ("limit_gfd", "price_type", Some("\"MARKET\"")),
            ("limit_gfd", "limit_price", None),
            ("limit_gfd", "limit_price", Some("\"75010\"")),
            ("limit_gfd", "limit_price", Some("1e50")),
            ("limit_gfd", "volume_condition", Some("\"SOME\"")),
            ("limit_gfd", "time_condition", Some("\"FOREVER\"")),
            ("limit_gfd", "time_condition", Some("1")),
            ("limit_gfd", "min_volume", Some("0")),
            ("cancel", "order_id", None),
            ("cancel", "user_id", Some("\"a\\u0000b\"")),
            ("login", "user_name", Some(&format!("\"{}\"", "u".repeat(USER_NAME_BYTES_MAX + 1)))),
            ("login", "password", Some(&format!("\"{}\"", "p".repeat(PASSWORD_BYTES_MAX + 1)))),
            ("login", "password", None),
            ("login", "bid", Some("[]")),
            ("subscribe", "ins_list", None),
            ("subscribe", "ins_list", Some("[\"SHFE.cu2501\"]")),
            ("kline", "chart_id", None),
            ("kline", "duration", Some("1500000000")),
            ("kline", "duration", Some("-60000000000")),
            ("kline", "view_width", Some("0")),
            ("kline", "view_width", Some("\"200\"")),
            ("kline", "focus_datetime", Some("\"2025-01-01\"")),
            ("kline", "left_kline_id", Some("1.5")),
            ("query_single", "variables", Some("[1]")),
            ("query_single", "query", Some(&format!("\"{}\"", "q".repeat(QUERY_BYTES_MAX + 1)))),
            ("query_single", "query_id", Some("\"\"")),
        ];
        for (name, field, value) in cases {
            assert_eq!(with(name, field, *value), malformed, "{name}.{field} = {value:?}");
        }
    }

    #[test]
    fn charts_take_floats_without_a_fraction_and_cap_the_width() {
        let chart = |duration: &str, view_width: &str| {
            let text = format!(
                r#"{{"aid":"set_chart","chart_id":"c","ins_list":"A,B","duration":{duration},"view_width":{view_width}}}"#
            );
            match decode(&text) {
                Ok(Pack::SetChart(chart)) => Ok((chart.duration_ns, chart.view_width)),
                Ok(other) => panic!("{other:?}"),
                Err(error) => Err(error.code.as_str()),
            }
        };
        assert_eq!(chart("60000000000.0", "200.0"), Ok((60_000_000_000, 200)));
        assert_eq!(chart("0", "100000"), Ok((0, VIEW_WIDTH_MAX)));
        assert_eq!(chart("0", "1e300"), Err("malformed"));
        assert_eq!(chart("86400000000000", "99999999999999999999"), Err("malformed"));
    }
}
