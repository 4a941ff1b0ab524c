//! Commands: what the outside world asks of the engine, already parsed but not yet
//! validated. Names are borrowed strings and numbers are exact `Decimal`s; turning them
//! into units of an asset, tick or lot (and rejecting what does not fit) is the
//! engine's job, because only the engine knows the instruments.

use std::borrow::Cow;
use std::fmt;

use crate::ids::AccountId;
use crate::num::Decimal;

/// Whom an order, cancel or amend acts for. The replay format names accounts; a gateway
/// that resolved the account once, when its client logged in, passes the account's id
/// instead and so spares the engine a name lookup per command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccountRef<'a> {
    Name(Cow<'a, str>),
    Id(AccountId),
}

impl AccountRef<'_> {
    pub fn into_owned(self) -> AccountRef<'static> {
        match self {
            AccountRef::Name(name) => AccountRef::Name(owned(name)),
            AccountRef::Id(account) => AccountRef::Id(account),
        }
    }
}

impl<'a> From<Cow<'a, str>> for AccountRef<'a> {
    fn from(name: Cow<'a, str>) -> Self {
        AccountRef::Name(name)
    }
}

impl<'a> From<&'a str> for AccountRef<'a> {
    fn from(name: &'a str) -> Self {
        AccountRef::Name(Cow::Borrowed(name))
    }
}

/// A name as itself; an id as `#` and its number (a form no replay file uses: a
/// command that holds an id means something only to the engine that issued the id).
impl fmt::Display for AccountRef<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccountRef::Name(name) => formatter.write_str(name),
            AccountRef::Id(account) => write!(formatter, "#{}", account.0),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    Buy,
    Sell,
}

impl Side {
    pub fn opposite(self) -> Side {
        match self {
            Side::Buy => Side::Sell,
            Side::Sell => Side::Buy,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Side::Buy => "buy",
            Side::Sell => "sell",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeInForce {
    GoodTillCancel,
    ImmediateOrCancel,
    FillOrKill,
    /// Good for the day (futures): rests like `GoodTillCancel` and expires at the
    /// symbol's next settlement. On a spot symbol, which is never settled, it is
    /// `GoodTillCancel`.
    GoodForDay,
}

impl TimeInForce {
    pub fn as_str(self) -> &'static str {
        match self {
            TimeInForce::GoodTillCancel => "gtc",
            TimeInForce::ImmediateOrCancel => "ioc",
            TimeInForce::FillOrKill => "fok",
            TimeInForce::GoodForDay => "gfd",
        }
    }

    /// The time in force the exchange applies to an order submitted with this one: a
    /// market order's is `ImmediateOrCancel` (or `FillOrKill`), a day order on a spot
    /// instrument (never settled) is `GoodTillCancel`; any other is as submitted. The
    /// one place this rule is written: matching, the order's record and every
    /// gateway's view of an order follow it.
    #[inline]
    pub fn applied(self, order_type: OrderType, is_future: bool) -> TimeInForce {
        match (order_type, self) {
            (OrderType::Market, TimeInForce::FillOrKill) => TimeInForce::FillOrKill,
            (OrderType::Market, _) => TimeInForce::ImmediateOrCancel,
            (OrderType::Limit { .. }, TimeInForce::GoodForDay) if !is_future => {
                TimeInForce::GoodTillCancel
            }
            (OrderType::Limit { .. }, time_in_force) => time_in_force,
        }
    }
}

/// One side of a futures position: a buy opens (and a sell closes) the long side, a sell
/// opens (and a buy closes) the short side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PositionSide {
    Long,
    Short,
}

impl PositionSide {
    pub const BOTH: [PositionSide; 2] = [PositionSide::Long, PositionSide::Short];

    pub fn as_str(self) -> &'static str {
        match self {
            PositionSide::Long => "long",
            PositionSide::Short => "short",
        }
    }

    /// The side an order on `side` with `offset` opens or closes.
    pub fn of_order(side: Side, offset: Offset) -> PositionSide {
        match (side, offset.is_close()) {
            (Side::Buy, false) | (Side::Sell, true) => PositionSide::Long,
            (Side::Sell, false) | (Side::Buy, true) => PositionSide::Short,
        }
    }

    /// The order side that closes this side (a sell closes a long position).
    pub fn closing_side(self) -> Side {
        match self {
            PositionSide::Long => Side::Sell,
            PositionSide::Short => Side::Buy,
        }
    }
}

/// What a futures order does to the account's position: `Open` adds to the side it
/// trades into (a buy to the long side, a sell to the short side); `Close` and
/// `CloseToday` take from the opposite side (a sell closes the long side, a buy the
/// short side), from what the contract's close-today rule lets each take. Ignored on a
/// spot symbol.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Offset {
    #[default]
    Open,
    Close,
    CloseToday,
}

impl Offset {
    pub fn as_str(self) -> &'static str {
        match self {
            Offset::Open => "open",
            Offset::Close => "close",
            Offset::CloseToday => "close_today",
        }
    }

    pub fn is_close(self) -> bool {
        self != Offset::Open
    }
}

/// Self-trade prevention: what happens when a taker meets a resting order of its own
/// account.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StpMode {
    CancelTaker,
    CancelMaker,
    CancelBoth,
    None,
}

impl StpMode {
    pub fn as_str(self) -> &'static str {
        match self {
            StpMode::CancelTaker => "cancel_taker",
            StpMode::CancelMaker => "cancel_maker",
            StpMode::CancelBoth => "cancel_both",
            StpMode::None => "none",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderType {
    Limit { price: Decimal },
    Market,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstrumentCommand<'a> {
    pub symbol: Cow<'a, str>,
    pub base: Cow<'a, str>,
    pub quote: Cow<'a, str>,
    pub tick: Decimal,
    pub lot: Decimal,
    pub min_qty: Decimal,
    pub max_qty: Decimal,
    pub maker_fee_bps: i64,
    pub taker_fee_bps: i64,
    pub market_band_bps: i64,
}

/// A futures contract's definition (`future` in `futures.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FutureCommand<'a> {
    pub symbol: Cow<'a, str>,
    /// The asset margin, fees and profit are paid in.
    pub settle: Cow<'a, str>,
    pub tick: Decimal,
    pub lot: Decimal,
    pub min_qty: Decimal,
    pub max_qty: Decimal,
    /// Settle-asset units per price unit per quantity unit.
    pub multiplier: Decimal,
    /// Per lot, in the settle asset.
    pub margin: Decimal,
    pub maker_fee: Decimal,
    pub taker_fee: Decimal,
    pub market_band_bps: i64,
    /// SHFE-style: `close` takes only history, `close_today` only today's entries.
    pub close_today: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransferCommand<'a> {
    pub account: Cow<'a, str>,
    pub asset: Cow<'a, str>,
    pub amount: Decimal,
}

/// How much an order is for, as the command named it: a quantity of the base (`qty`,
/// every order but one kind), or an amount of the quote asset to spend (`quote_qty`: a
/// spot market buy, `orders.md` "Market buys by amount to spend"). A command may name
/// both or neither; the engine rejects those with the spec's reasons (both:
/// `invalid_order`, once `qty` passes its own checks; neither: `malformed`, which the
/// replay format's parser already says of such a line), so each is kept as named. Read
/// it as a `SizeNamed` (`named`), or through `qty`, `quote_qty` and `qty_alone`.
///
/// Compact on purpose: the first decimal named is kept as its parts beside a one-byte
/// kind, in the space of one `Decimal` (whose padding holds the kind and a pointer), and
/// the second decimal of a command naming both (rare, and always rejected) out of line.
/// So an `OrderCommand` is no larger than it was with `qty` alone: the engine's queues
/// and the benchmarks' command buffers hold millions of them.
#[derive(Clone, PartialEq, Eq)]
pub struct OrderSize {
    /// The decimal named first (`qty` when named, else `quote_qty`), as its parts; zero
    /// when neither is named.
    first_mantissa: i128,
    first_scale: u32,
    kind: SizeKind,
    /// `quote_qty` of a command that names both (`SizeKind::Both`), else `None`.
    both_quote_qty: Option<Box<Decimal>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SizeKind {
    Qty,
    QuoteQty,
    Both,
    Neither,
}

/// What an order command names of `qty` and `quote_qty` (`OrderSize::named`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeNamed {
    Qty(Decimal),
    QuoteQty(Decimal),
    QtyAndQuoteQty { qty: Decimal, quote_qty: Decimal },
    Neither,
}

impl OrderSize {
    /// An order for `qty` of the base: every order but a spend-amount buy.
    pub fn of_qty(qty: Decimal) -> OrderSize {
        OrderSize::first(qty, SizeKind::Qty)
    }

    /// A spend-amount buy's size: `quote_qty` of the quote asset.
    pub fn of_quote_qty(quote_qty: Decimal) -> OrderSize {
        OrderSize::first(quote_qty, SizeKind::QuoteQty)
    }

    /// The size of a command that names `qty` and `quote_qty` as given.
    pub fn of(qty: Option<Decimal>, quote_qty: Option<Decimal>) -> OrderSize {
        match (qty, quote_qty) {
            (Some(qty), None) => OrderSize::of_qty(qty),
            (None, Some(quote_qty)) => OrderSize::of_quote_qty(quote_qty),
            (Some(qty), Some(quote_qty)) => OrderSize {
                both_quote_qty: Some(Box::new(quote_qty)),
                ..OrderSize::first(qty, SizeKind::Both)
            },
            (None, None) => OrderSize::first(Decimal::ZERO, SizeKind::Neither),
        }
    }

    fn first(decimal: Decimal, kind: SizeKind) -> OrderSize {
        OrderSize {
            first_mantissa: decimal.mantissa(),
            first_scale: decimal.scale(),
            kind,
            both_quote_qty: None,
        }
    }

    fn first_decimal(&self) -> Decimal {
        Decimal::from_parts(self.first_mantissa, self.first_scale)
    }

    /// The quantity of an order that names `qty` alone (nearly every order), in one
    /// comparison: the hot path's test.
    #[inline]
    pub fn qty_alone(&self) -> Option<Decimal> {
        (self.kind == SizeKind::Qty).then(|| self.first_decimal())
    }

    /// What the command named.
    pub fn named(&self) -> SizeNamed {
        let first = self.first_decimal();
        match (self.kind, &self.both_quote_qty) {
            (SizeKind::Qty, _) => SizeNamed::Qty(first),
            (SizeKind::QuoteQty, _) => SizeNamed::QuoteQty(first),
            (SizeKind::Both, Some(quote_qty)) => {
                SizeNamed::QtyAndQuoteQty { qty: first, quote_qty: **quote_qty }
            }
            // Not made by any constructor; read as what it holds.
            (SizeKind::Both, None) => SizeNamed::Qty(first),
            (SizeKind::Neither, _) => SizeNamed::Neither,
        }
    }

    /// The base quantity the command names, if it names one.
    pub fn qty(&self) -> Option<Decimal> {
        match self.named() {
            SizeNamed::Qty(qty) | SizeNamed::QtyAndQuoteQty { qty, .. } => Some(qty),
            SizeNamed::QuoteQty(_) | SizeNamed::Neither => None,
        }
    }

    /// The amount of the quote asset to spend the command names, if it names one.
    pub fn quote_qty(&self) -> Option<Decimal> {
        match self.named() {
            SizeNamed::QuoteQty(quote_qty) | SizeNamed::QtyAndQuoteQty { quote_qty, .. } => {
                Some(quote_qty)
            }
            SizeNamed::Qty(_) | SizeNamed::Neither => None,
        }
    }
}

impl fmt::Debug for OrderSize {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.named(), formatter)
    }
}

// The reason for the layout above: a size no larger than the one decimal it replaced.
const _: () = assert!(std::mem::size_of::<OrderSize>() == std::mem::size_of::<Decimal>());

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderCommand<'a> {
    pub account: AccountRef<'a>,
    pub id: Cow<'a, str>,
    pub symbol: Cow<'a, str>,
    pub side: Side,
    pub order_type: OrderType,
    /// `qty`, `quote_qty`, or what else the command named.
    pub size: OrderSize,
    pub time_in_force: TimeInForce,
    pub post_only: bool,
    pub stp: StpMode,
    pub offset: Offset,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AmendCommand<'a> {
    pub account: AccountRef<'a>,
    pub id: Cow<'a, str>,
    pub price: Option<Decimal>,
    /// The new quantity, as `qty_kind` says: what is to be left open (the replay
    /// format's), or the order's new whole quantity.
    pub qty: Option<Decimal>,
    pub qty_kind: AmendQtyKind,
}

/// What an amend's quantity names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AmendQtyKind {
    /// The new *remaining* quantity: the replay format's `amend`.
    #[default]
    Remaining,
    /// The order's new whole quantity, what has filled included (FIX's
    /// OrderCancelReplaceRequest): what is left open is it less what has filled when
    /// the amend applies, and `invalid_qty` when that is nothing. The replay format has
    /// no such command: a journal export prints it as `replace`.
    Total,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command<'a> {
    Asset {
        asset: Cow<'a, str>,
        decimals: i64,
    },
    /// Boxed: four decimals make it the largest command by far, and it is rare, so the
    /// box keeps every other command smaller.
    Instrument(Box<InstrumentCommand<'a>>),
    Deposit(TransferCommand<'a>),
    Withdraw(TransferCommand<'a>),
    Order(OrderCommand<'a>),
    Cancel {
        account: AccountRef<'a>,
        id: Cow<'a, str>,
    },
    Amend(AmendCommand<'a>),
    /// Declares a futures contract; boxed like `Instrument`.
    Future(Box<FutureCommand<'a>>),
    /// Sets a futures contract's margin per lot from now on, re-pricing its open
    /// positions and its open orders' holds.
    Margin {
        symbol: Cow<'a, str>,
        margin: Decimal,
    },
    /// Settles a futures contract at `price`: daily mark-to-market, or its expiry when
    /// `is_final`.
    Settle {
        symbol: Cow<'a, str>,
        price: Decimal,
        is_final: bool,
    },
    /// Force-closes `account`'s position in `symbol` with market orders.
    Liquidate {
        account: AccountRef<'a>,
        symbol: Cow<'a, str>,
    },
    /// A venue command (`Venue::apply`; not in the replay format): stop trading on an
    /// instrument. New orders on it and amends of its open orders are rejected
    /// `instrument_halted` until `Resume`; cancels still work.
    Halt {
        symbol: Cow<'a, str>,
    },
    /// A venue command: trading on a halted instrument starts again.
    Resume {
        symbol: Cow<'a, str>,
    },
    /// A venue command: cancels every open order of `account` (on `symbol` only, when
    /// given), each with its `done` as a `cancel` of it would give.
    CancelAll {
        account: AccountRef<'a>,
        symbol: Option<Cow<'a, str>>,
    },
    /// A venue command: sets the venue's limits. `open_orders_per_account` is the most
    /// open orders an account may have (0: no limit); an `order` of an account that
    /// has that many already is rejected `too_many_open_orders` (enforced by a venue
    /// that tracks activity: see `Venue::apply`).
    SetLimits {
        open_orders_per_account: u64,
    },
}

impl Command<'_> {
    /// Whether this is a venue command (`Halt`, `Resume`, `CancelAll`, `SetLimits`): one
    /// that only a `Venue` applies and the replay format does not have.
    pub fn is_venue_command(&self) -> bool {
        matches!(
            self,
            Command::Halt { .. }
                | Command::Resume { .. }
                | Command::CancelAll { .. }
                | Command::SetLimits { .. }
        )
    }

    /// The account and client order id an order, cancel or amend refers to; echoed in
    /// its `accepted` or `rejected` event. `None` for every other command (a
    /// `CancelAll` names an account but no order: see `account`).
    pub fn order_key(&self) -> Option<(&AccountRef<'_>, &str)> {
        match self {
            Command::Order(order) => Some((&order.account, &order.id)),
            Command::Cancel { account, id } => Some((account, id)),
            Command::Amend(amend) => Some((&amend.account, &amend.id)),
            _ => None,
        }
    }
}

impl<'a> Command<'a> {
    /// The account an order, cancel, amend, cancel-all or liquidation acts for (deposits and
    /// withdrawals name theirs by name only, as a plain string).
    pub fn account(&self) -> Option<&AccountRef<'a>> {
        match self {
            Command::Order(order) => Some(&order.account),
            Command::Cancel { account, .. }
            | Command::CancelAll { account, .. }
            | Command::Liquidate { account, .. } => Some(account),
            Command::Amend(amend) => Some(&amend.account),
            _ => None,
        }
    }

    /// The account an order, cancel, amend, cancel-all or liquidation acts for, to resolve or rewrite
    /// it.
    pub fn account_mut(&mut self) -> Option<&mut AccountRef<'a>> {
        match self {
            Command::Order(order) => Some(&mut order.account),
            Command::Cancel { account, .. }
            | Command::CancelAll { account, .. }
            | Command::Liquidate { account, .. } => Some(account),
            Command::Amend(amend) => Some(&mut amend.account),
            _ => None,
        }
    }
}

fn owned(text: Cow<'_, str>) -> Cow<'static, str> {
    Cow::Owned(text.into_owned())
}

impl Command<'_> {
    /// The same command, owning its strings (for commands kept beyond their input line).
    pub fn into_owned(self) -> Command<'static> {
        match self {
            Command::Asset { asset, decimals } => Command::Asset { asset: owned(asset), decimals },
            Command::Instrument(instrument) => Command::Instrument(Box::new(InstrumentCommand {
                symbol: owned(instrument.symbol),
                base: owned(instrument.base),
                quote: owned(instrument.quote),
                tick: instrument.tick,
                lot: instrument.lot,
                min_qty: instrument.min_qty,
                max_qty: instrument.max_qty,
                maker_fee_bps: instrument.maker_fee_bps,
                taker_fee_bps: instrument.taker_fee_bps,
                market_band_bps: instrument.market_band_bps,
            })),
            Command::Deposit(transfer) => Command::Deposit(transfer.into_owned()),
            Command::Withdraw(transfer) => Command::Withdraw(transfer.into_owned()),
            Command::Order(order) => Command::Order(OrderCommand {
                account: order.account.into_owned(),
                id: owned(order.id),
                symbol: owned(order.symbol),
                ..order
            }),
            Command::Cancel { account, id } => {
                Command::Cancel { account: account.into_owned(), id: owned(id) }
            }
            Command::Amend(amend) => Command::Amend(AmendCommand {
                account: amend.account.into_owned(),
                id: owned(amend.id),
                ..amend
            }),
            Command::Future(future) => Command::Future(Box::new(FutureCommand {
                symbol: owned(future.symbol),
                settle: owned(future.settle),
                ..*future
            })),
            Command::Margin { symbol, margin } => Command::Margin { symbol: owned(symbol), margin },
            Command::Settle { symbol, price, is_final } => {
                Command::Settle { symbol: owned(symbol), price, is_final }
            }
            Command::Liquidate { account, symbol } => {
                Command::Liquidate { account: account.into_owned(), symbol: owned(symbol) }
            }
            Command::Halt { symbol } => Command::Halt { symbol: owned(symbol) },
            Command::Resume { symbol } => Command::Resume { symbol: owned(symbol) },
            Command::CancelAll { account, symbol } => {
                Command::CancelAll { account: account.into_owned(), symbol: symbol.map(owned) }
            }
            Command::SetLimits { open_orders_per_account } => {
                Command::SetLimits { open_orders_per_account }
            }
        }
    }
}

impl TransferCommand<'_> {
    pub fn into_owned(self) -> TransferCommand<'static> {
        TransferCommand {
            account: owned(self.account),
            asset: owned(self.asset),
            amount: self.amount,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Decimal;

    #[test]
    fn the_applied_time_in_force_follows_the_order_type_and_the_instrument() {
        let limit = OrderType::Limit { price: Decimal::from_units(1, 0) };
        let market = OrderType::Market;
        use TimeInForce::*;
        for (order_type, submitted, is_future, applied) in [
            (market, FillOrKill, false, FillOrKill),
            (market, GoodTillCancel, false, ImmediateOrCancel),
            (market, GoodForDay, true, ImmediateOrCancel),
            (market, ImmediateOrCancel, true, ImmediateOrCancel),
            (limit, GoodForDay, false, GoodTillCancel),
            (limit, GoodForDay, true, GoodForDay),
            (limit, GoodTillCancel, true, GoodTillCancel),
            (limit, ImmediateOrCancel, false, ImmediateOrCancel),
            (limit, FillOrKill, true, FillOrKill),
        ] {
            assert_eq!(
                submitted.applied(order_type, is_future),
                applied,
                "{order_type:?} {submitted:?} future {is_future}"
            );
        }
    }
}
