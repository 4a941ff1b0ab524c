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
use crate::num::{checked_mul_i64, Amount, Price, Qty};

/// Basis points in one whole.
const BPS_PER_UNIT: i128 = 10_000;

/// An instrument's money rules, with the unit conversions precomputed.
#[derive(Clone, Debug)]
pub struct SpotRules {
    pub base: AssetId,
    pub quote: AssetId,
    /// Quote units per (price unit x quantity unit): `10^(dq - dtick - dlot)`.
    pub quote_units_per_notional_unit: i128,
    /// Base units per quantity unit: `10^(db - dlot)`.
    pub base_units_per_qty_unit: i128,
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
    /// Quote units for `price * qty`, in 128 bits; prices and quantities up to the
    /// engine's limits may overflow even that, which reads as "beyond any balance".
    pub fn notional(&self, price: i128, qty: i128) -> Option<i128> {
        let fast = checked_mul_i64(price, qty).and_then(|product| {
            checked_mul_i64(i128::from(product), self.quote_units_per_notional_unit)
        });
        match fast {
            Some(notional) => Some(i128::from(notional)),
            None => price.checked_mul(qty)?.checked_mul(self.quote_units_per_notional_unit),
        }
    }

    pub fn base_amount(&self, qty: i128) -> Option<i128> {
        match checked_mul_i64(qty, self.base_units_per_qty_unit) {
            Some(amount) => Some(i128::from(amount)),
            None => qty.checked_mul(self.base_units_per_qty_unit),
        }
    }

    /// The asset an order on `side` holds.
    pub fn hold_asset(&self, side: Side) -> AssetId {
        match side {
            Side::Buy => self.quote,
            Side::Sell => self.base,
        }
    }

    /// What an order on `side` at `price` for `qty` holds, or `None` when it is beyond
    /// the `i64` range (more than any account can have). A buy whose quantity in base
    /// units is beyond that range is refused the same way: it could never be delivered,
    /// and every amount must fit in `i64`.
    pub fn hold_amount(&self, side: Side, price: i128, qty: i128) -> Option<Amount> {
        let base_units = i64::try_from(self.base_amount(qty)?).ok()?;
        let units = match side {
            Side::Buy => i64::try_from(self.notional(price, qty)?).ok()?,
            Side::Sell => base_units,
        };
        Some(Amount(units))
    }

    /// The hold of a resting order, which fitted when it was taken.
    pub fn resting_hold(&self, side: Side, price: Price, qty: Qty) -> Amount {
        // The same products as `hold_amount`, in 64 bits: they fitted when the hold was
        // taken, and the quantity has only fallen since.
        let units = match side {
            Side::Buy => price
                .0
                .checked_mul(qty.0)
                .and_then(|units| units.checked_mul(self.quote_units_per_notional_unit as i64)),
            Side::Sell => qty.0.checked_mul(self.base_units_per_qty_unit as i64),
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
            Some(scaled) => (scaled + BPS_PER_UNIT as i64 - 1) / BPS_PER_UNIT as i64,
            None => {
                let scaled = i128::from(received) * i128::from(bps);
                let fee = (scaled + BPS_PER_UNIT - 1) / BPS_PER_UNIT;
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
        let qty_units = i128::from(qty.0);
        let paid = self.amount(self.notional(i128::from(price.0), qty_units));
        let buyer_hold_used = self.amount(self.notional(i128::from(buyer.limit.0), qty_units));
        let base_delivered = self.amount(self.base_amount(qty_units));
        debug_assert!(paid <= buyer_hold_used);
        let buyer_fee = self.fee(base_delivered.0, buyer.is_taker);
        let seller_fee = self.fee(paid.0, seller.is_taker);
        ledger.release(buyer.account, self.quote, buyer_hold_used - paid);
        ledger.pay_from_held(buyer.account, seller.account, self.quote, paid, seller_fee);
        ledger.pay_from_held(seller.account, buyer.account, self.base, base_delivered, buyer_fee);
        (buyer_fee, seller_fee)
    }

    fn amount(&self, units: Option<i128>) -> Amount {
        // Every fill is within the hold of the buy order involved, which fitted in i64.
        Amount(
            units
                .and_then(|units| i64::try_from(units).ok())
                .expect("a fill is within a hold that fitted"),
        )
    }
}
