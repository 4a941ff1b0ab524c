//! `bourse serve --demo`: a working exchange in one step. On a data directory without
//! instruments it declares USD, BTC and ETH, the instruments BTC-USD and ETH-USD, the
//! accounts `alice`, `bob` and `maker` with money, a few resting orders of `maker` on
//! each side, and API keys for alice and bob. Without the futures contract
//! `SHFE.cu2501` it declares that too: a copper-like contract as China's exchanges name
//! them (settled in CNY, multiplier 5, tick 10, the close-today rule, margin 10% of the
//! settlement price), CNY for the three accounts, and `maker`'s orders around 75,000.
//! Every step is an ordinary engine command (journaled like any other); on later starts
//! it only shows the demo keys again.
//!
//! alice and bob get a password too (`alice-demo-password`, `bob-demo-password`), so
//! that tqsdk can log in at once (`TQ_AUTH_URL`, `docs/api.md`), set only while they
//! have none: a password the operator set stays, and is then not shown.

use std::borrow::Cow;

use bourse_core::command::{
    FutureCommand, InstrumentCommand, OrderCommand, OrderType, TransferCommand,
};
use bourse_core::{AccountRef, Command, Decimal, Event, Offset, Side, StpMode, TimeInForce};

use crate::keys::{KeyChange, Role, Secret};
use crate::port::state::AppState;
use crate::services::clearing::settings::SettingsChange;

const DEMO_LABEL: &str = "demo";
const TRADERS: [&str; 2] = ["alice", "bob"];
const MARKET_MAKER: &str = "maker";

/// What the demo shows at start.
pub struct Demo {
    /// The demo keys: (account, key id, secret).
    pub keys: Vec<(String, String, Secret)>,
    /// (account, password) of the demo accounts whose password is still the demo's.
    pub passwords: Vec<(String, String)>,
}

/// A demo account's password.
fn demo_password(account: &str) -> String {
    format!("{account}-demo-password")
}

/// Sets the demo up (once) and returns what it shows: the demo keys and passwords.
pub async fn set_up(state: &AppState) -> Result<Demo, String> {
    let reference = state.directory.refresh_reference().await.map_err(|error| error.message)?;
    if reference.instruments.is_empty() {
        declare_market(state).await?;
        fund_accounts(state).await?;
        seed_books(state).await?;
    }
    if reference.find_instrument(FUTURE).is_none() {
        declare_future(state).await?;
    }
    state.directory.refresh_reference().await.map_err(|error| error.message)?;
    let keys = demo_keys(state).await?;
    let passwords = demo_passwords(state).await?;
    Ok(Demo { keys, passwords })
}

/// What the demo shows, once it is set up (by this node, or in a cluster by the
/// leader, whose changes reach every node): `None` until then. Changes nothing.
pub async fn shown(state: &AppState) -> Option<Demo> {
    let reference = state.directory.refresh_reference().await.ok()?;
    if reference.instruments.is_empty() || reference.find_instrument(FUTURE).is_none() {
        return None;
    }
    // The passwords come after the keys (`set_up`): both, or not yet. (A password an
    // admin removed is given again by the next `set_up`, on the leader.)
    let has_password =
        |trader: &&str| state.keys.account(trader).is_some_and(|record| record.has_password());
    if !TRADERS.iter().all(has_password) {
        return None;
    }
    let mut keys = Vec::new();
    for trader in TRADERS {
        let key = demo_key(state, trader)?;
        keys.push((trader.to_string(), key.id.clone(), state.keys.secret_of(&key.id)));
    }
    let mut passwords = Vec::new();
    for trader in TRADERS {
        let password = demo_password(trader);
        if state.passwords.verify(trader, &password).await.is_ok() {
            passwords.push((trader.to_string(), password));
        }
    }
    Some(Demo { keys, passwords })
}

/// `trader`'s demo key, if it has one.
fn demo_key(state: &AppState, trader: &str) -> Option<crate::keys::KeyRecord> {
    state.keys.keys().into_iter().find(|key| {
        key.account.as_deref() == Some(trader) && key.label == DEMO_LABEL && !key.revoked
    })
}

/// Makes `account` in the key store when it lacks it.
async fn ensure_account(state: &AppState, account: &str) -> Result<(), String> {
    if state.keys.account(account).is_some() {
        return Ok(());
    }
    let change = KeyChange::CreateAccount {
        name: account.to_string(),
        created_ms: bourse_protocol::signing::now_ms(),
    };
    state.key_changes.apply(change).await.map(|_| ()).map_err(|error| error.message)
}

/// Gives alice and bob their demo password when they have none; the passwords that are
/// still the demo's.
async fn demo_passwords(state: &AppState) -> Result<Vec<(String, String)>, String> {
    let mut shown = Vec::new();
    for trader in TRADERS {
        let password = demo_password(trader);
        let has_one = state.keys.account(trader).is_some_and(|record| record.has_password());
        if !has_one {
            state.passwords.set(trader, &password).await.map_err(|error| error.message)?;
        } else if state.passwords.verify(trader, &password).await.is_err() {
            continue;
        }
        shown.push((trader.to_string(), password));
    }
    Ok(shown)
}

fn decimal(text: &str) -> Result<Decimal, String> {
    Decimal::parse(text).ok_or_else(|| format!("{text:?} is not a decimal"))
}

async fn submit(state: &AppState, command: Command<'_>) -> Result<(), String> {
    let reply = state.link.submit(&command).await.map_err(|error| error.to_string())?;
    match reply.events().first() {
        Some(Event::Rejected { reason, .. }) => {
            Err(format!("the demo command {command:?} was rejected: {}", reason.code()))
        }
        _ => Ok(()),
    }
}

async fn declare_market(state: &AppState) -> Result<(), String> {
    for (asset, decimals) in [("USD", 6), ("BTC", 8), ("ETH", 8)] {
        submit(state, Command::Asset { asset: Cow::Borrowed(asset), decimals }).await?;
    }
    for (symbol, base, lot) in [("BTC-USD", "BTC", "0.0001"), ("ETH-USD", "ETH", "0.001")] {
        let instrument = InstrumentCommand {
            symbol: Cow::Borrowed(symbol),
            base: Cow::Borrowed(base),
            quote: Cow::Borrowed("USD"),
            tick: decimal("0.01")?,
            lot: decimal(lot)?,
            min_qty: decimal(lot)?,
            max_qty: decimal("1000")?,
            maker_fee_bps: 2,
            taker_fee_bps: 5,
            market_band_bps: 500,
        };
        submit(state, Command::Instrument(Box::new(instrument))).await?;
    }
    Ok(())
}

async fn fund_accounts(state: &AppState) -> Result<(), String> {
    fund(state, &[("USD", "1000000"), ("BTC", "10"), ("ETH", "100")]).await
}

/// Makes the demo accounts (when the key store lacks them) and deposits `amounts` of
/// each asset into each.
async fn fund(state: &AppState, amounts: &[(&str, &str)]) -> Result<(), String> {
    for account in TRADERS.iter().chain([&MARKET_MAKER]) {
        ensure_account(state, account).await?;
        for (asset, amount) in amounts {
            let transfer = TransferCommand {
                account: Cow::Borrowed(account),
                asset: Cow::Borrowed(asset),
                amount: decimal(amount)?,
            };
            submit(state, Command::Deposit(transfer)).await?;
        }
    }
    Ok(())
}

/// A few levels on each side around 60,000 (BTC) and 3,000 (ETH).
async fn seed_books(state: &AppState) -> Result<(), String> {
    let mut count = 0;
    for (symbol, mid, step, qty) in [("BTC-USD", 60_000, 5, "0.05"), ("ETH-USD", 3_000, 1, "0.5")] {
        for level in 1..=5 {
            for (side, price) in [(Side::Buy, mid - level * step), (Side::Sell, mid + level * step)]
            {
                count += 1;
                let order = OrderCommand {
                    account: AccountRef::Name(Cow::Borrowed(MARKET_MAKER)),
                    id: Cow::Owned(format!("seed-{count}")),
                    symbol: Cow::Borrowed(symbol),
                    side,
                    order_type: OrderType::Limit { price: decimal(&price.to_string())? },
                    size: bourse_core::OrderSize::of_qty(decimal(qty)?),
                    time_in_force: TimeInForce::GoodTillCancel,
                    post_only: true,
                    stp: StpMode::CancelTaker,
                    offset: Offset::Open,
                };
                submit(state, Command::Order(order)).await?;
            }
        }
    }
    Ok(())
}

/// The demo's futures contract.
const FUTURE: &str = "SHFE.cu2501";
/// Its margin: this share of a lot's value at the settlement price.
const FUTURE_MARGIN_RATIO: &str = "0.1";
/// The price its first margin is taken at, and the middle of `maker`'s orders.
const FUTURE_REFERENCE_PRICE: i64 = 75_000;

async fn declare_future(state: &AppState) -> Result<(), String> {
    submit(state, Command::Asset { asset: Cow::Borrowed("CNY"), decimals: 2 }).await?;
    let (lot, multiplier) = (decimal("1")?, decimal("5")?);
    let reference = decimal(&FUTURE_REFERENCE_PRICE.to_string())?;
    let ratio = decimal(FUTURE_MARGIN_RATIO)?;
    let margin_units =
        crate::services::clearing::settings::ratio_margin(ratio, reference, lot, multiplier, 2)
            .ok_or("the demo's margin ratio gives no margin")?;
    let future = FutureCommand {
        symbol: Cow::Borrowed(FUTURE),
        settle: Cow::Borrowed("CNY"),
        tick: decimal("10")?,
        lot,
        min_qty: decimal("1")?,
        max_qty: decimal("1000")?,
        multiplier,
        margin: Decimal::from_units(i128::from(margin_units), 2),
        maker_fee: decimal("1.5")?,
        taker_fee: decimal("3")?,
        market_band_bps: 500,
        close_today: true,
    };
    submit(state, Command::Future(Box::new(future))).await?;
    let ratio = Some(FUTURE_MARGIN_RATIO.to_string());
    state
        .futures
        .apply(SettingsChange::MarginRatio { symbol: FUTURE.to_string(), ratio })
        .await
        .map_err(|error| error.message)?;
    fund(state, &[("CNY", "10000000")]).await?;
    for level in 1..=5i64 {
        for (side, price) in [
            (Side::Buy, FUTURE_REFERENCE_PRICE - level * 10),
            (Side::Sell, FUTURE_REFERENCE_PRICE + level * 10),
        ] {
            let order = OrderCommand {
                account: AccountRef::Name(Cow::Borrowed(MARKET_MAKER)),
                id: Cow::Owned(format!("cu-seed-{}-{level}", side.as_str())),
                symbol: Cow::Borrowed(FUTURE),
                side,
                order_type: OrderType::Limit { price: decimal(&price.to_string())? },
                size: bourse_core::OrderSize::of_qty(decimal("2")?),
                time_in_force: TimeInForce::GoodTillCancel,
                post_only: true,
                stp: StpMode::CancelTaker,
                offset: Offset::Open,
            };
            submit(state, Command::Order(order)).await?;
        }
    }
    Ok(())
}

async fn demo_keys(state: &AppState) -> Result<Vec<(String, String, Secret)>, String> {
    let mut shown = Vec::new();
    for trader in TRADERS {
        let key = match demo_key(state, trader) {
            Some(key) => key,
            None => {
                ensure_account(state, trader).await?;
                let now_ms = bourse_protocol::signing::now_ms();
                let change = state
                    .keys
                    .new_key(Role::Trader, Some(trader), DEMO_LABEL, None, now_ms)
                    .map_err(|error| error.to_string())?;
                let changed =
                    state.key_changes.apply(change).await.map_err(|error| error.message)?;
                changed.key().map_err(|error| error.to_string())?
            }
        };
        let secret = state.keys.secret_of(&key.id);
        shown.push((trader.to_string(), key.id, secret));
    }
    Ok(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_contract_is_named_by_the_futures_rule() {
        let parts = bourse_protocol::futures_symbol::split(FUTURE).unwrap();
        assert_eq!((parts.exchange_id, parts.instrument_id), ("SHFE", "cu2501"));
    }
}
