//! The futures account and positions as JSON, named as QIFI names them, from
//! `bourse_core::account_view` (which computes them exactly from the engine's state).
//! Amounts are decimal strings in the settle asset; average prices (open and position
//! prices) and the risk ratio are not exact decimals, so they are rounded half away
//! from zero to 4 places more than the tick (6 places for the ratio).

use bourse_core::account_view::{
    account_view, amount_decimal, rounded_decimal, AccountView, PositionView, SideView,
};
use bourse_core::ids::{AccountId, AssetId};
use bourse_core::Venue;
use bourse_protocol::futures_symbol;
use serde_json::{json, Map, Value};

/// Extra decimals of an average price beyond the tick's.
const AVERAGE_PRICE_EXTRA_PLACES: u32 = 4;
const RISK_RATIO_PLACES: u32 = 6;

/// `{"accounts": {asset: {...}}, "positions": {symbol: {...}}}` of `account`: one
/// account view per settle asset, one position per contract it holds.
pub fn futures_json(venue: &Venue, account: Option<AccountId>) -> Value {
    let exchange = venue.exchange();
    let mut accounts = Map::new();
    let mut positions = Map::new();
    for (index, asset) in exchange.assets().iter().enumerate() {
        let asset_id = AssetId(index as u32);
        if !exchange.is_settle_asset(asset_id) {
            continue;
        }
        let (view, held) = match account {
            Some(account) => account_view(exchange, account, asset_id).unwrap_or_default(),
            None => (AccountView::default(), Vec::new()),
        };
        accounts.insert(asset.name.to_string(), account_json(&view, asset.decimals));
        for position in held {
            let instrument = exchange.instrument(position.instrument);
            positions.insert(
                instrument.symbol.to_string(),
                position_json(
                    &position,
                    &instrument.symbol,
                    instrument.price_decimals,
                    instrument.qty_decimals,
                    asset.decimals,
                ),
            );
        }
    }
    json!({ "accounts": accounts, "positions": positions })
}

fn account_json(view: &AccountView, decimals: u32) -> Value {
    let amount = |units: i128| amount_decimal(units, decimals);
    json!({
        "pre_balance": amount(view.pre_balance),
        "deposit": amount(view.deposit),
        "withdraw": amount(view.withdraw),
        "static_balance": amount(view.static_balance),
        "close_profit": amount(view.close_profit),
        "commission": amount(view.commission),
        "position_profit": amount(view.position_profit),
        "float_profit": amount(view.float_profit),
        "balance": amount(view.balance),
        "margin": amount(view.margin),
        "frozen_margin": amount(view.frozen_margin),
        "frozen_commission": amount(view.frozen_commission),
        "available": amount(view.available),
        "withdrawable": amount(view.withdrawable),
        "risk_ratio": view
            .risk_ratio()
            .map(|(margin, balance)| rounded_decimal(margin, balance, RISK_RATIO_PLACES)),
    })
}

fn position_json(
    position: &PositionView,
    symbol: &str,
    price_decimals: u32,
    qty_decimals: u32,
    settle_decimals: u32,
) -> Value {
    let qty = |units: bourse_core::Qty| amount_decimal(i128::from(units.0), qty_decimals);
    let amount = |units: i128| amount_decimal(units, settle_decimals);
    let average = |cost: i128, side: &SideView| {
        position.average_price(cost, side.volume()).map(|(numerator, denominator)| {
            rounded_decimal(
                numerator,
                denominator * 10i128.pow(price_decimals),
                price_decimals + AVERAGE_PRICE_EXTRA_PLACES,
            )
        })
    };
    let (long, short) = (&position.long, &position.short);
    json!({
        "instrument_id": symbol,
        "exchange_id": futures_symbol::split(symbol).map_or("", |parts| parts.exchange_id),
        "volume_long_today": qty(long.volume_today),
        "volume_long_his": qty(long.volume_his),
        "volume_long": qty(long.volume()),
        "volume_long_frozen_today": qty(long.frozen_today),
        "volume_long_frozen_his": qty(long.frozen_his),
        "volume_long_frozen": qty(long.frozen_today + long.frozen_his),
        "volume_short_today": qty(short.volume_today),
        "volume_short_his": qty(short.volume_his),
        "volume_short": qty(short.volume()),
        "volume_short_frozen_today": qty(short.frozen_today),
        "volume_short_frozen_his": qty(short.frozen_his),
        "volume_short_frozen": qty(short.frozen_today + short.frozen_his),
        "open_price_long": average(long.open_cost, long),
        "open_price_short": average(short.open_cost, short),
        "position_price_long": average(long.position_cost, long),
        "position_price_short": average(short.position_cost, short),
        "open_cost_long": amount(long.open_cost),
        "open_cost_short": amount(short.open_cost),
        "position_cost_long": amount(long.position_cost),
        "position_cost_short": amount(short.position_cost),
        "float_profit_long": amount(long.float_profit),
        "float_profit_short": amount(short.float_profit),
        "float_profit": amount(long.float_profit + short.float_profit),
        "position_profit_long": amount(long.position_profit),
        "position_profit_short": amount(short.position_profit),
        "position_profit": amount(long.position_profit + short.position_profit),
        "margin_long": amount(long.margin),
        "margin_short": amount(short.margin),
        "margin": amount(long.margin + short.margin),
        "last_price": position
            .mark_price
            .map(|price| amount_decimal(i128::from(price.0), price_decimals)),
    })
}
