//! The spot account kind: what a spot order holds and what a spot fill moves.
//!
//! A buy holds `price * qty` of the quote asset, a sell holds `qty` of the base asset.
//! A fill of `q` at `p` pays `p * q` quote from the buyer's hold to the seller and `q`
//! base from the seller's hold to the buyer; the buyer's hold falls by `limit * q`, the
//! difference going back to its available. Each side pays its fee, rounded up, in the
//! asset it receives. This is the only place that knows those rules: the matcher only
//! reports fills, and a margin kind (positions, margin, mark-to-market) would be a
//! sibling of this module with the same three duties: hold, settle, release.

use crate::command::Side;
use crate::ids::{AccountId, AssetId};
use crate::ledger::Ledger;
use crate::num::{Amount, Price, Qty};

/// Basis points in one whole.
const BPS_PER_UNIT: i64 = 10_000;

/// An instrument's money rules, with the unit conversions precomputed.
#[derive(Clone, Debug)]
pub struct SpotRules {
    pub base: AssetId,
    pub quote: AssetId,
    /// Quote units per (price unit x quantity unit): `10^(dq - dtick - dlot)`, at most
    /// `10^18`.
    pub quote_units_per_notional_unit: i64,
    /// Base units per quantity unit: `10^(db - dlot)`, at most `10^18`.
    pub base_units_per_qty_unit: i64,
    pub maker_fee_bps: i64,
    pub taker_fee_bps: i64,
}

/// One side of a fill, as the settlement needs it.
#[derive(Clone, Copy, Debug)]
pub struct FillParty {
    pub account: AccountId,
    /// The order's limit (its hold was taken at this price).
    pub limit: Price,
    pub is_taker: bool,
}

impl SpotRules {
    // Every factor below is at least 1, so a product beyond `i64` is beyond any balance
    // (the spec's Range rule): checked 64-bit multiplication is exact, and `None` means
    // "more than anyone has".

    /// Quote units for `price * qty`.
    pub fn notional(&self, price: Price, qty: Qty) -> Option<i64> {
        price.0.checked_mul(qty.0)?.checked_mul(self.quote_units_per_notional_unit)
    }

    /// Base units for `qty`.
    pub fn base_amount(&self, qty: Qty) -> Option<i64> {
        qty.0.checked_mul(self.base_units_per_qty_unit)
    }

    /// The asset an order on `side` holds.
    pub fn hold_asset(&self, side: Side) -> AssetId {
        match side {
            Side::Buy => self.quote,
            Side::Sell => self.base,
        }
    }

    /// What an order on `side` at `price` for `qty` (validated, so positive) holds, or
    /// `None` when it is beyond the `i64` range (more than any account can have). A buy
    /// whose quantity in base units is beyond that range is refused the same way: it
    /// could never be delivered, and every amount must fit in `i64`.
    pub fn hold_amount(&self, side: Side, price: i128, qty: i128) -> Option<Amount> {
        let qty = Qty(i64::try_from(qty).ok()?);
        let base_units = self.base_amount(qty)?;
        let units = match side {
            Side::Buy => self.notional(Price(i64::try_from(price).ok()?), qty)?,
            Side::Sell => base_units,
        };
        Some(Amount(units))
    }

    /// The hold of a resting order, which fitted when it was taken (and its quantity has
    /// only fallen since).
    pub fn resting_hold(&self, side: Side, price: Price, qty: Qty) -> Amount {
        let units = match side {
            Side::Buy => self.notional(price, qty),
            Side::Sell => self.base_amount(qty),
        };
        Amount(units.expect("a resting order's hold fitted when it was taken"))
    }

    /// `ceil(received * bps / 10000)`, in 64-bit arithmetic when it fits.
    fn fee(&self, received: i64, is_taker: bool) -> Amount {
        let bps = if is_taker { self.taker_fee_bps } else { self.maker_fee_bps };
        if bps == 0 {
            return Amount::ZERO;
        }
        let fee = match received.checked_mul(bps) {
            Some(scaled) => (scaled + BPS_PER_UNIT - 1) / BPS_PER_UNIT,
            None => {
                let per_unit = i128::from(BPS_PER_UNIT);
                let scaled = i128::from(received) * i128::from(bps);
                let fee = (scaled + per_unit - 1) / per_unit;
                i64::try_from(fee).expect("a fee is at most the amount received")
            }
        };
        Amount(fee)
    }

    /// Moves the money of a fill of `qty` at `price` and returns the fees
    /// `(buyer_fee in base, seller_fee in quote)`.
    pub fn settle_fill(
        &self,
        ledger: &mut Ledger,
        buyer: FillParty,
        seller: FillParty,
        price: Price,
        qty: Qty,
    ) -> (Amount, Amount) {
        let paid = fill_amount(self.notional(price, qty));
        let buyer_hold_used = fill_amount(self.notional(buyer.limit, qty));
        let base_delivered = fill_amount(self.base_amount(qty));
        debug_assert!(paid <= buyer_hold_used);
        let buyer_fee = self.fee(base_delivered.0, buyer.is_taker);
        let seller_fee = self.fee(paid.0, seller.is_taker);
        ledger.begin_fill();
        ledger.release(buyer.account, self.quote, buyer_hold_used - paid);
        ledger.pay_from_held(buyer.account, seller.account, self.quote, paid, seller_fee);
        ledger.pay_from_held(seller.account, buyer.account, self.base, base_delivered, buyer_fee);
        ledger.end_fill();
        (buyer_fee, seller_fee)
    }
}

/// A fill's amount: within the hold of the buy order involved, which fitted in `i64`.
fn fill_amount(units: Option<i64>) -> Amount {
    Amount(units.expect("a fill is within a hold that fitted"))
}
