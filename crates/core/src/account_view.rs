//! A futures account as futures traders read it: the QIFI fields (`pre_balance`,
//! `static_balance`, `close_profit`, `position_profit`, `float_profit`, `margin`,
//! `risk_ratio`, ...) of one account in one settle asset, and its positions with
//! today's and earlier volumes, frozen volumes, open and position prices and costs.
//!
//! Read-only and exact: every amount is in the settle asset's units, computed from the
//! exchange's state (balances, positions, open orders, today's totals, each contract's
//! mark price) in integers. Positions are valued at each contract's mark price: the
//! last trade's, or the last settlement's when that is more recent. It never changes
//! the state; gateways render it and the risk process reads `balance` and `margin`.
//!
//! How the fields relate (all in the settle asset):
//! - `balance = cash + position_profit`, where `cash` is the ledger's `available +
//!   held` (settlement marks and realised profit are already in it);
//! - `static_balance = balance - close_profit - position_profit + commission`, and
//!   `pre_balance = static_balance - deposit + withdraw` (the balance after the last
//!   settlement, before today's money moved);
//! - `available = balance - margin - frozen_margin - frozen_commission` (QIFI's), while
//!   `withdrawable` is the ledger's `available`: what new orders and withdrawals may
//!   use (unrealised profit is not spendable before settlement);
//! - `risk_ratio = margin / balance`.

use crate::command::{Offset, PositionSide, Side};
use crate::exchange::Exchange;
use crate::futures::{FutureRules, PositionSideState, Positions};
use crate::ids::{AccountId, AssetId, InstrumentId};
use crate::num::{Price, Qty};

/// One account's futures money in one settle asset. Amounts in the asset's units, in
/// 128 bits (sums over positions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AccountView {
    pub pre_balance: i128,
    pub deposit: i128,
    pub withdraw: i128,
    pub static_balance: i128,
    pub close_profit: i128,
    pub commission: i128,
    pub position_profit: i128,
    pub float_profit: i128,
    pub balance: i128,
    pub margin: i128,
    pub frozen_margin: i128,
    pub frozen_commission: i128,
    pub available: i128,
    /// The ledger's available: what orders and withdrawals may use.
    pub withdrawable: i128,
}

impl AccountView {
    /// `margin / balance` as (numerator, denominator); `None` when the balance is not
    /// positive (the ratio is meaningless: the account is under water).
    pub fn risk_ratio(&self) -> Option<(i128, i128)> {
        (self.balance > 0).then_some((self.margin, self.balance))
    }
}

/// One side of a position, as the view shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SideView {
    pub volume_today: Qty,
    pub volume_his: Qty,
    /// Reserved by open close orders, split as their closes would take it.
    pub frozen_today: Qty,
    pub frozen_his: Qty,
    /// `sum(open price * qty) * multiplier` of what is open: what opening it cost.
    pub open_cost: i128,
    /// `sum(p_i * q_i) * multiplier` over the entries (history at the last settlement
    /// price, today at the trade prices).
    pub position_cost: i128,
    /// Profit at the mark price against the open prices.
    pub float_profit: i128,
    /// Profit at the mark price against the entries (since the last settlement).
    pub position_profit: i128,
    pub margin: i128,
}

impl SideView {
    pub fn volume(&self) -> Qty {
        self.volume_today + self.volume_his
    }
}

/// One account's position in one contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PositionView {
    pub instrument: InstrumentId,
    pub long: SideView,
    pub short: SideView,
    /// The price the position is valued at (`None`: the contract never traded or
    /// settled, and profits are zero).
    pub mark_price: Option<Price>,
    /// Value units per (price unit x quantity unit): multiplier x scale, to turn a cost
    /// back into an average price.
    pub units_per_notional: i128,
}

impl PositionView {
    /// `cost / (qty * units_per_notional)`: an average price in price units, as a
    /// fraction (numerator, denominator); `None` for an empty side.
    pub fn average_price(&self, cost: i128, qty: Qty) -> Option<(i128, i128)> {
        (qty.0 > 0).then(|| (cost, i128::from(qty.0) * self.units_per_notional))
    }
}

/// The views of `account` in `settle`: the account and its non-empty positions (in
/// instrument order). `None` when the asset settles no contract.
pub fn account_view(
    exchange: &Exchange,
    account: AccountId,
    settle: AssetId,
) -> Option<(AccountView, Vec<PositionView>)> {
    if !exchange.is_settle_asset(settle) {
        return None;
    }
    let balance = exchange.ledger().balance(account, settle);
    let flows = exchange.day_flows(account, settle);
    let mut view = AccountView {
        deposit: i128::from(flows.deposited.0),
        withdraw: i128::from(flows.withdrawn.0),
        withdrawable: i128::from(balance.available.0),
        ..AccountView::default()
    };
    let mut positions = Vec::new();
    for (index, instrument) in exchange.instruments().iter().enumerate() {
        let Some(rules) = instrument.future().filter(|rules| rules.settle == settle) else {
            continue;
        };
        let id = InstrumentId(index as u32);
        let Some(contract) = exchange.positions(id) else { continue };
        let (frozen_margin, frozen_commission) = open_order_holds(exchange, id, rules, account);
        view.frozen_margin += frozen_margin;
        view.frozen_commission += frozen_commission;
        let Some(position) = contract.position(account) else { continue };
        view.close_profit += i128::from(position.realised_today.0);
        view.commission += i128::from(position.fees_today.0);
        if position.is_empty() {
            continue;
        }
        let shown = position_view(contract, rules, id, position.account);
        for side in [shown.long, shown.short] {
            view.position_profit += side.position_profit;
            view.float_profit += side.float_profit;
            view.margin += side.margin;
        }
        positions.push(shown);
    }
    let cash = i128::from(balance.available.0) + i128::from(balance.held.0);
    view.balance = cash + view.position_profit;
    view.static_balance = view.balance - view.close_profit - view.position_profit + view.commission;
    view.pre_balance = view.static_balance - view.deposit + view.withdraw;
    view.available = view.balance - view.margin - view.frozen_margin - view.frozen_commission;
    Some((view, positions))
}

/// What `account`'s open orders on the contract hold: (margin, taker fee) of their
/// remaining lots (open orders only; close orders hold nothing).
fn open_order_holds(
    exchange: &Exchange,
    instrument: InstrumentId,
    rules: &FutureRules,
    account: AccountId,
) -> (i128, i128) {
    let (mut margin, mut fees) = (0i128, 0i128);
    for side in [Side::Buy, Side::Sell] {
        exchange.book(instrument).for_each_order(side, |order| {
            if order.account == account && order.offset == Offset::Open {
                let lots = i128::from(rules.lots(order.remaining));
                margin += lots * i128::from(rules.margin.0);
                fees += lots * i128::from(rules.taker_fee.0);
            }
        });
    }
    (margin, fees)
}

fn position_view(
    contract: &Positions,
    rules: &FutureRules,
    instrument: InstrumentId,
    account: AccountId,
) -> PositionView {
    let mark = contract.mark_price();
    let units = i128::from(rules.multiplier) * i128::from(rules.value_scale);
    let side_view = |side: PositionSide, state: &PositionSideState| {
        let qty = i128::from(state.qty().0);
        let position_cost = contract.basis(state) * units;
        let open_cost = state.open_cost * units;
        let value = mark.map_or(0, |mark| i128::from(mark.0) * qty * units);
        let signed = |profit: i128| match side {
            PositionSide::Long => profit,
            PositionSide::Short => -profit,
        };
        let (position_profit, float_profit) = match mark {
            Some(_) => (signed(value - position_cost), signed(value - open_cost)),
            None => (0, 0),
        };
        // A close takes history first (or only, under the close-today rule), so what
        // `close` orders reserve is history first.
        let (frozen_his, frozen_today) = if rules.close_today {
            (state.reserved_close, state.reserved_close_today)
        } else {
            let his = state.reserved_close.min(state.history_qty);
            (his, state.reserved_close - his)
        };
        SideView {
            volume_today: state.today_qty,
            volume_his: state.history_qty,
            frozen_today,
            frozen_his,
            open_cost,
            position_cost,
            float_profit,
            position_profit,
            margin: i128::from(rules.position_margin(state.qty()).0),
        }
    };
    let position = contract.position(account).expect("a position the caller found");
    PositionView {
        instrument,
        long: side_view(PositionSide::Long, &position.long),
        short: side_view(PositionSide::Short, &position.short),
        mark_price: mark,
        units_per_notional: units,
    }
}

/// `numerator / denominator` as a decimal string with `places` decimals, rounded half
/// away from zero: for averages and ratios, which are not exact decimals.
pub fn rounded_decimal(numerator: i128, denominator: i128, places: u32) -> String {
    debug_assert!(denominator > 0);
    let scale = 10i128.pow(places);
    let scaled = numerator.saturating_mul(scale);
    let (quotient, remainder) = (scaled / denominator, scaled % denominator);
    let rounded =
        if remainder.abs() * 2 >= denominator { quotient + scaled.signum() } else { quotient };
    crate::num::Decimal::from_units(rounded, places).to_string()
}

/// An amount in the asset's units as a decimal string.
pub fn amount_decimal(units: i128, decimals: u32) -> String {
    crate::num::Decimal::from_units(units, decimals).to_string()
}
