//! The read side of the port: every read a gateway makes of the venue, written once.
//! An account's reads (an order, its orders, fills, balances and futures view) take
//! the session asking, charge it like any request and read only its own account: an
//! order of another account is `unknown_order` here and nowhere else. The public reads
//! (books, open interest, halts, contracts) take the instrument.
//!
//! Each read runs on the engine's applier between batches (`EngineLink::read`), so it
//! copies out only what it answers with and leaves any work over the copy (matching
//! fills to orders, filtering by symbol) to the caller's task. The venue's records
//! come out as values (`OrderRecord`, `Fill`, re-exported here): a gateway names them
//! from the port and never reads `bourse_core::venue` itself. It renders nothing.

use std::collections::HashMap;
use std::sync::Arc;

use bourse_core::ids::{AccountId, InstrumentId, OrderId};
pub use bourse_core::venue::{Fill, Liquidity, OrderKind, OrderRecord, OrderStatus};
use bourse_core::{Price, Qty, Side, TimestampNs};
use serde_json::Value;

use super::error::{ApiError, ApiResult};
use super::orders::request::Target;
use super::policy::Policy;
use super::session::Session;
use crate::directory::Directory;
use crate::link::{AssetBalance, EngineLink};
use crate::render::{top_levels, Level, Shown};
use crate::services::clearing::view::futures_json;

/// Which of an account's orders a list holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// Those open now.
    Open,
    /// Those finished that the venue remembers (the latest 1,024 per account).
    Finished,
    /// Open ones, then the finished ones remembered.
    OpenThenFinished,
}

/// An account's orders and fills read at one state, so that each order's fills are
/// all there (`filled_notional`).
#[derive(Debug, Default)]
pub struct OrdersAndFills {
    pub orders: Vec<OrderRecord>,
    pub fills: Vec<Fill>,
}

impl OrdersAndFills {
    /// What `order`'s fills add up to (price units times quantity units), for each
    /// order by id; an order's sum is left out when the fills remembered do not add
    /// up to its filled quantity (older ones were forgotten).
    pub fn filled_notionals(&self) -> HashMap<OrderId, i128> {
        let mut sums: HashMap<OrderId, (i64, i128)> = HashMap::with_capacity(self.orders.len());
        for fill in &self.fills {
            let sum = sums.entry(fill.order_id).or_default();
            sum.0 += fill.qty.0;
            sum.1 += i128::from(fill.price.0) * i128::from(fill.qty.0);
        }
        self.orders
            .iter()
            .filter_map(|order| {
                let (qty, notional) = sums.get(&order.order_id).copied().unwrap_or_default();
                (qty == order.filled.0).then_some((order.order_id, notional))
            })
            .collect()
    }
}

/// The best levels of a book's two sides, and the engine sequence number of the state
/// they were read at.
#[derive(Debug)]
pub struct BookTop {
    pub bids: Vec<Level>,
    pub asks: Vec<Level>,
    pub seq: u64,
    /// The exchange's time at that state.
    pub time_ns: TimestampNs,
}

/// One resting order as an order-by-order (L3) book shows it: no owner.
#[derive(Clone, Copy, Debug)]
pub struct RestingOrder {
    /// `OrderId(0)` for one the venue has no record of (rebuilt from a book).
    pub order_id: OrderId,
    pub price: Price,
    pub remaining: Qty,
}

/// A futures contract as the instrument queries show it, expired ones included.
#[derive(Clone, Copy, Debug)]
pub struct ContractTerms {
    pub instrument: InstrumentId,
    pub settlement_price: Option<Price>,
    pub expired: bool,
    /// Margin per lot now, in settle-asset units.
    pub margin_units: i64,
    /// The taker fee per lot, in settle-asset units.
    pub taker_fee_units: i64,
    pub settle_decimals: u32,
}

/// The read side of the port, shared by every gateway.
pub struct Queries {
    link: Arc<EngineLink>,
    directory: Arc<Directory>,
    policy: Arc<Policy>,
}

impl Queries {
    pub fn new(link: Arc<EngineLink>, directory: Arc<Directory>, policy: Arc<Policy>) -> Queries {
        Queries { link, directory, policy }
    }

    /// The engine id of the account `session` trades for (charged); `None` before its
    /// first deposit, when it has no orders, fills or balances yet.
    async fn account_of(&self, session: &Session) -> ApiResult<Option<AccountId>> {
        session.charge(&self.policy)?;
        session.account_id(&self.directory).await
    }

    /// The engine id of the account `session` trades for, to follow its records by
    /// (not charged: no request reads it); `None` before its first deposit.
    pub async fn account_id(&self, session: &Session) -> ApiResult<Option<AccountId>> {
        session.account_id(&self.directory).await
    }

    /// The order `target` names as it stands now: `unknown_order` when the account has
    /// none such (another account's order too).
    pub async fn order(&self, session: &Session, target: &Target<'_>) -> ApiResult<Shown> {
        let account = self.account_of(session).await?.ok_or_else(ApiError::unknown_order)?;
        let record = own_order(&self.link, account, target).await?;
        let reference = self.directory.reference_knowing(record.instrument.index() + 1).await?;
        Ok(Shown { record, reference })
    }

    /// The order `target` names on `instrument` with the account's fills of it, read
    /// at once; `None` when the account has no such order there.
    pub async fn order_with_fills(
        &self,
        session: &Session,
        instrument: InstrumentId,
        target: &Target<'_>,
    ) -> ApiResult<Option<OrdersAndFills>> {
        let Some(account) = self.account_of(session).await? else { return Ok(None) };
        let target = target.to_static();
        Ok(self
            .link
            .read(move |venue| {
                let activity = venue.activity()?;
                let record = own_record(activity, account, &target)?;
                (record.instrument == instrument).then(|| OrdersAndFills {
                    orders: vec![record.clone()],
                    fills: activity
                        .fills(account)
                        .filter(|fill| fill.order_id == record.order_id)
                        .cloned()
                        .collect(),
                })
            })
            .await?)
    }

    /// The account's orders (`which`; of `instrument` only, if given; at most `most`),
    /// in the venue's order: open ones oldest first, finished ones latest first.
    pub async fn orders(
        &self,
        session: &Session,
        which: Which,
        instrument: Option<InstrumentId>,
        most: usize,
    ) -> ApiResult<Vec<OrderRecord>> {
        let Some(account) = self.account_of(session).await? else { return Ok(Vec::new()) };
        Ok(self
            .link
            .read(move |venue| {
                venue.activity().map_or_else(Vec::new, |activity| {
                    account_orders(activity, account, which, instrument, most)
                })
            })
            .await?)
    }

    /// The account's orders as `orders` lists them, with its fills (of `instrument`,
    /// if given), read at once.
    pub async fn orders_with_fills(
        &self,
        session: &Session,
        which: Which,
        instrument: Option<InstrumentId>,
    ) -> ApiResult<OrdersAndFills> {
        let Some(account) = self.account_of(session).await? else {
            return Ok(OrdersAndFills::default());
        };
        Ok(self
            .link
            .read(move |venue| {
                let Some(activity) = venue.activity() else { return OrdersAndFills::default() };
                OrdersAndFills {
                    orders: account_orders(activity, account, which, instrument, usize::MAX),
                    fills: account_fills(activity, account, instrument),
                }
            })
            .await?)
    }

    /// The account's fills (of `instrument` only, if given), oldest first: the latest
    /// 1,024 are remembered.
    pub async fn fills(
        &self,
        session: &Session,
        instrument: Option<InstrumentId>,
    ) -> ApiResult<Vec<Fill>> {
        let Some(account) = self.account_of(session).await? else { return Ok(Vec::new()) };
        Ok(self
            .link
            .read(move |venue| {
                venue
                    .activity()
                    .map_or_else(Vec::new, |activity| account_fills(activity, account, instrument))
            })
            .await?)
    }

    /// Every asset's balance of the account `session` trades for (zeros for one the
    /// engine does not know yet), in the engine's asset order.
    pub async fn balances(&self, session: &Session) -> ApiResult<Vec<AssetBalance>> {
        let account = self.account_of(session).await?;
        balances_of(&self.link, account).await
    }

    /// The futures view (`services::clearing::view::futures_json`) of the account
    /// `session` trades for.
    pub async fn futures(&self, session: &Session) -> ApiResult<Value> {
        let account = self.account_of(session).await?;
        Ok(self.link.read(move |venue| futures_json(venue, account)).await?)
    }

    /// What a session shows on logging in, read at once: the account's orders (open
    /// ones, then the latest finished, `most` in all) and its futures view. Part of
    /// the login, not a request: not charged.
    pub async fn login_view(
        &self,
        session: &Session,
        most: usize,
    ) -> ApiResult<(Vec<OrderRecord>, Value)> {
        let account = session.account_id(&self.directory).await?;
        Ok(self
            .link
            .read(move |venue| {
                let orders = match (venue.activity(), account) {
                    (Some(activity), Some(account)) => {
                        account_orders(activity, account, Which::OpenThenFinished, None, most)
                    }
                    _ => Vec::new(),
                };
                (orders, futures_json(venue, account))
            })
            .await?)
    }

    /// The best `levels` levels of each side of `instrument`'s book.
    pub async fn book(&self, instrument: InstrumentId, levels: usize) -> ApiResult<BookTop> {
        let ((bids, asks, time_ns), seq) = self
            .link
            .read_at_seq(move |venue| {
                let exchange = venue.exchange();
                let book = exchange.book(instrument);
                (
                    top_levels(book, Side::Buy, levels),
                    top_levels(book, Side::Sell, levels),
                    exchange.time_ns(),
                )
            })
            .await?;
        Ok(BookTop { bids, asks, seq, time_ns })
    }

    /// The best bid and best ask of each of `instruments`, in their order.
    pub async fn best_levels(
        &self,
        instruments: Vec<InstrumentId>,
    ) -> ApiResult<Vec<(Option<Level>, Option<Level>)>> {
        Ok(self
            .link
            .read(move |venue| {
                let exchange = venue.exchange();
                instruments
                    .iter()
                    .map(|instrument| {
                        let book = exchange.book(*instrument);
                        let best = |side| top_levels(book, side, 1).first().copied();
                        (best(Side::Buy), best(Side::Sell))
                    })
                    .collect()
            })
            .await?)
    }

    /// Every resting order of `instrument` per side (bids, then asks), in priority
    /// order, at most `most` a side, and the engine sequence number of that state.
    pub async fn resting_orders(
        &self,
        instrument: InstrumentId,
        most: usize,
    ) -> ApiResult<((Vec<RestingOrder>, Vec<RestingOrder>), u64)> {
        Ok(self
            .link
            .read_at_seq(move |venue| {
                let exchange = venue.exchange();
                let activity = venue.activity();
                let side = |side| -> Vec<RestingOrder> {
                    let mut orders = Vec::new();
                    exchange.book(instrument).for_each_order(side, |order| {
                        if orders.len() < most {
                            let order_id = activity
                                .and_then(|activity| {
                                    activity.order_by_client(order.account, &order.id)
                                })
                                .map_or(OrderId(0), |record| record.order_id);
                            orders.push(RestingOrder {
                                order_id,
                                price: order.price,
                                remaining: order.remaining,
                            });
                        }
                    });
                    orders
                };
                (side(Side::Buy), side(Side::Sell))
            })
            .await?)
    }

    /// A futures contract's open interest (`None` for a spot instrument).
    pub async fn open_interest(&self, instrument: InstrumentId) -> ApiResult<Option<Qty>> {
        Ok(self
            .link
            .read(move |venue| {
                venue.exchange().positions(instrument).map(|positions| positions.open_interest())
            })
            .await?)
    }

    /// Whether each of the first `count` instruments is halted, in id order.
    pub async fn halted(&self, count: usize) -> ApiResult<Vec<bool>> {
        Ok(self.link.halted(count).await?)
    }

    /// Every futures contract's terms, expired ones included.
    pub async fn contract_terms(&self) -> ApiResult<Vec<ContractTerms>> {
        Ok(self
            .link
            .read(|venue| {
                let exchange = venue.exchange();
                exchange
                    .instruments()
                    .iter()
                    .enumerate()
                    .filter_map(|(index, instrument)| {
                        let id = InstrumentId(index as u32);
                        let rules = instrument.future()?;
                        let positions = exchange.positions(id)?;
                        Some(ContractTerms {
                            instrument: id,
                            settlement_price: positions.settlement_price(),
                            expired: instrument.expired,
                            margin_units: rules.margin.0,
                            taker_fee_units: rules.taker_fee.0,
                            settle_decimals: exchange.assets().get(rules.settle.index())?.decimals,
                        })
                    })
                    .collect()
            })
            .await?)
    }

    /// The engine sequence number of the state a read made now sees: what a session
    /// following an account's records from now on starts after.
    pub async fn applied_seq(&self) -> ApiResult<u64> {
        Ok(self.link.read_at_seq(|_| ()).await?.1)
    }

    /// Why the engine stopped taking commands, if it did.
    pub fn engine_failure(&self) -> Option<String> {
        self.link.failure()
    }

    /// Whether this node takes commands now (it leads its cluster, or is not in one);
    /// otherwise where the leader is.
    pub fn leads(&self) -> Result<(), Box<crate::cluster::NotLeader>> {
        self.link.leads()
    }

    /// In a cluster: this node's view of it, the last command applied here, and where
    /// each node is. `None`: not in a cluster.
    pub async fn cluster(&self) -> ApiResult<Option<ClusterView>> {
        let Some(status) = self.link.cluster_status() else { return Ok(None) };
        let applied_seq = self.applied_seq().await.unwrap_or(0);
        let nodes = self.link.directory().nodes().collect();
        Ok(Some(ClusterView { status, applied_seq, nodes }))
    }
}

/// A node's view of its cluster (`Queries::cluster`).
pub struct ClusterView {
    pub status: bourse_engine::ReplicaStatus,
    pub applied_seq: u64,
    pub nodes: Vec<crate::cluster::NodeAddresses>,
}

/// Every asset's balance of `account` (zeros for one the engine does not know yet,
/// `None`), in the engine's asset order.
pub(super) async fn balances_of(
    link: &EngineLink,
    account: Option<AccountId>,
) -> ApiResult<Vec<AssetBalance>> {
    let mut balances = link.balances(vec![account]).await?;
    Ok(balances.pop().unwrap_or_default())
}

/// `account`'s order `target` as the venue has it now, or `unknown_order` (also for
/// another account's): the one place that rule is applied.
pub(super) async fn own_order(
    link: &EngineLink,
    account: AccountId,
    target: &Target<'_>,
) -> ApiResult<OrderRecord> {
    let target = target.to_static();
    link.read(move |venue| {
        venue.activity().and_then(|activity| own_record(activity, account, &target).cloned())
    })
    .await?
    .ok_or_else(ApiError::unknown_order)
}

fn own_record<'v>(
    activity: &'v bourse_core::venue::Activity,
    account: AccountId,
    target: &Target<'_>,
) -> Option<&'v OrderRecord> {
    let record = match target {
        Target::OrderId(order_id) => {
            activity.order(*order_id).filter(|record| record.account == account)
        }
        Target::ClientOrderId(client_order_id) => {
            activity.order_by_client(account, client_order_id)
        }
    };
    debug_assert!(record.is_none_or(|record| record.account == account));
    record
}

fn account_orders(
    activity: &bourse_core::venue::Activity,
    account: AccountId,
    which: Which,
    instrument: Option<InstrumentId>,
    most: usize,
) -> Vec<OrderRecord> {
    let wanted =
        |record: &&OrderRecord| instrument.is_none_or(|instrument| record.instrument == instrument);
    let open = activity.open_orders(account).filter(wanted);
    let finished = activity.finished_orders(account).filter(wanted);
    let orders: Vec<OrderRecord> = match which {
        Which::Open => open.take(most).cloned().collect(),
        Which::Finished => finished.take(most).cloned().collect(),
        Which::OpenThenFinished => open.chain(finished).take(most).cloned().collect(),
    };
    debug_assert!(orders.len() <= most);
    debug_assert!(orders.iter().all(|order| order.account == account), "only its own orders");
    debug_assert!(
        orders.iter().all(|order| (order.status == OrderStatus::Open) == (order.remaining.0 > 0)),
        "an order is open while it has a quantity left"
    );
    orders
}

fn account_fills(
    activity: &bourse_core::venue::Activity,
    account: AccountId,
    instrument: Option<InstrumentId>,
) -> Vec<Fill> {
    activity
        .fills(account)
        .filter(|fill| instrument.is_none_or(|instrument| fill.instrument == instrument))
        .cloned()
        .collect()
}
