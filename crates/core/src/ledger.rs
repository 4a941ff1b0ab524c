//! Balances: every account's `available` and `held` amount of every asset, the
//! exchange's fee balances, and each asset's net deposits (deposits minus withdrawals).
//!
//! The ledger moves money only in ways that keep, for every asset,
//! `sum(available + held) + fees == net deposits`; every method states its move in
//! those terms. Whether a move is allowed (enough funds, a hold that fits) is decided by
//! the caller before it moves anything; the ledger asserts it.
//!
//! A ledger can also record its moves (`record_changes`), for whoever keeps every
//! balance change with its cause (the history): recording changes nothing of the state,
//! snapshots do not carry it, and a ledger that does not record pays one branch per move.

use compact_str::CompactString;
use hashbrown::HashTable;

use crate::ids::{name_hash, short_bytes_equal, AccountId, AssetId};
use crate::num::Amount;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Balance {
    pub available: Amount,
    pub held: Amount,
}

/// What a recorded balance change did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BalanceMove {
    /// Outside money in: available up.
    Deposit,
    /// Money out: available down.
    Withdrawal,
    /// available -> held, for an order (or an amend that raised its hold).
    Hold,
    /// held -> available: an order's unused hold given back.
    Release,
    /// held down: paid to the other side of a fill.
    Pay,
    /// available up: received from the other side of a fill, less `fee`.
    Receive,
    /// Futures: a fill's fee, from available, to the fee balance (`fee`).
    Fee,
    /// Futures: available up (or down): the profit (or loss) a closing fill realised.
    RealisedProfit,
    /// Futures: available up (or down): a settlement's mark of a position.
    Settlement,
    /// Futures: available <-> held: the margin rate changed (`margin`), re-pricing
    /// positions and open orders.
    Margin,
}

impl BalanceMove {
    pub fn code(self) -> &'static str {
        match self {
            BalanceMove::Deposit => "deposit",
            BalanceMove::Withdrawal => "withdrawal",
            BalanceMove::Hold => "hold",
            BalanceMove::Release => "release",
            BalanceMove::Pay => "pay",
            BalanceMove::Receive => "receive",
            BalanceMove::Fee => "fee",
            BalanceMove::RealisedProfit => "realised_profit",
            BalanceMove::Settlement => "settlement",
            BalanceMove::Margin => "margin",
        }
    }
}

/// One recorded move of one account's balance of one asset (`Ledger::record_changes`).
/// For every asset, the changes of a command sum to what it moved in or out:
/// `sum(available_delta + held_delta + fee) == deposits - withdrawals`, plus, for a
/// futures settle asset, what the command's realised profits and settlement marks took
/// from the positions' value (`RealisedProfit`, `Settlement`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BalanceChange {
    pub account: AccountId,
    pub asset: AssetId,
    pub movement: BalanceMove,
    pub available_delta: Amount,
    pub held_delta: Amount,
    /// What the exchange kept of a `Receive` (the fee), or the fee a `Fee` paid; zero
    /// for every other move.
    pub fee: Amount,
    /// The balance right after this change.
    pub after: Balance,
    /// The fill it settles: its position (1, 2, ...) among the trades of the command,
    /// in the order of their `trade` events; 0 for a move that settles no fill.
    pub trade: u32,
}

/// The moves recorded since the last `take_changes`.
#[derive(Debug, Default)]
struct Recorder {
    changes: Vec<BalanceChange>,
    /// Fills begun since the last `take_changes`.
    fills: u32,
    in_fill: bool,
}

#[derive(Clone, Debug)]
pub struct Account {
    pub name: CompactString,
}

/// Balances are stored as one dense column per asset, indexed by account: the balance
/// of any account in any asset is two indexed loads from memory that stays hot (the
/// hot path touches a few assets of many accounts). The cost is
/// `accounts x assets x 16` bytes.
#[derive(Default)]
pub struct Ledger {
    accounts: Vec<Account>,
    /// Accounts by name; the names themselves are in `accounts`.
    account_by_name: HashTable<AccountId>,
    /// `balance_columns[asset][account]`.
    balance_columns: Vec<Vec<Balance>>,
    fees: Vec<Amount>,
    net_deposits: Vec<Amount>,
    /// Set while the ledger records its moves.
    recorder: Option<Box<Recorder>>,
}

impl Ledger {
    /// Makes room for a newly declared asset.
    pub fn add_asset(&mut self) {
        self.balance_columns.push(vec![Balance::default(); self.accounts.len()]);
        self.fees.push(Amount::ZERO);
        self.net_deposits.push(Amount::ZERO);
    }

    pub fn find_account(&self, name: &str) -> Option<AccountId> {
        let accounts = &self.accounts;
        let is_named = |account: &AccountId| {
            short_bytes_equal(accounts[account.index()].name.as_bytes(), name.as_bytes())
        };
        self.account_by_name.find(name_hash(name), is_named).copied()
    }

    fn find_or_create_account(&mut self, name: &str) -> AccountId {
        if let Some(account) = self.find_account(name) {
            return account;
        }
        let account =
            AccountId(u32::try_from(self.accounts.len()).expect("fewer than 2^32 accounts"));
        let name = CompactString::new(name);
        self.accounts.push(Account { name: name.clone() });
        for column in &mut self.balance_columns {
            column.push(Balance::default());
        }
        let accounts = &self.accounts;
        self.account_by_name.insert_unique(name_hash(&name), account, |account| {
            name_hash(&accounts[account.index()].name)
        });
        account
    }

    pub fn account(&self, account: AccountId) -> &Account {
        &self.accounts[account.index()]
    }

    pub fn accounts(&self) -> &[Account] {
        &self.accounts
    }

    #[inline]
    pub fn balance(&self, account: AccountId, asset: AssetId) -> Balance {
        self.balance_columns[asset.index()][account.index()]
    }

    /// Hint: the balance of `account` in `asset`.
    #[inline]
    pub(crate) fn prefetch_balance(&self, account: AccountId, asset: AssetId) {
        if let Some(balance) =
            self.balance_columns.get(asset.index()).and_then(|column| column.get(account.index()))
        {
            crate::prefetch::prefetch(balance);
        }
    }

    /// Every account's balance of `asset`, by account id: one column of the ledger, for
    /// whoever reads all balances at once (a snapshot).
    pub fn balance_column(&self, asset: AssetId) -> &[Balance] {
        &self.balance_columns[asset.index()]
    }

    /// Every non-zero balance of `account`, by asset.
    pub fn balances_of(&self, account: AccountId) -> impl Iterator<Item = (AssetId, Balance)> + '_ {
        self.balance_columns
            .iter()
            .enumerate()
            .map(move |(asset, column)| (AssetId(asset as u32), column[account.index()]))
            .filter(|(_, balance)| *balance != Balance::default())
    }

    pub fn available(&self, account: AccountId, asset: AssetId) -> Amount {
        self.balance(account, asset).available
    }

    pub fn fee_balance(&self, asset: AssetId) -> Amount {
        self.fees[asset.index()]
    }

    pub fn net_deposits(&self, asset: AssetId) -> Amount {
        self.net_deposits[asset.index()]
    }

    #[inline]
    fn balance_mut(&mut self, account: AccountId, asset: AssetId) -> &mut Balance {
        &mut self.balance_columns[asset.index()][account.index()]
    }
    /// Would a deposit of `amount` keep the asset's net deposits within `i64`?
    pub fn deposit_fits(&self, asset: AssetId, amount: Amount) -> bool {
        self.net_deposits(asset).checked_add(amount).is_some()
    }

    // ----- recording the moves (for the history) -----

    /// Starts (`true`) or stops recording every move of money; stopping drops what was
    /// recorded.
    pub fn record_changes(&mut self, on: bool) {
        self.recorder = on.then(Box::default);
    }

    pub fn records_changes(&self) -> bool {
        self.recorder.is_some()
    }

    /// The moves recorded since the last call, in the order they happened; the next
    /// fill counts from 1 again. Empty when not recording.
    pub fn take_changes(&mut self, into: &mut Vec<BalanceChange>) {
        if let Some(recorder) = self.recorder.as_deref_mut() {
            into.append(&mut recorder.changes);
            recorder.fills = 0;
            recorder.in_fill = false;
        }
    }

    /// The moves from here to `end_fill` settle the next fill of the command.
    #[inline]
    pub(crate) fn begin_fill(&mut self) {
        if let Some(recorder) = self.recorder.as_deref_mut() {
            recorder.fills += 1;
            recorder.in_fill = true;
        }
    }

    #[inline]
    pub(crate) fn end_fill(&mut self) {
        if let Some(recorder) = self.recorder.as_deref_mut() {
            recorder.in_fill = false;
        }
    }

    #[inline]
    fn record(
        &mut self,
        account: AccountId,
        asset: AssetId,
        movement: BalanceMove,
        deltas: (Amount, Amount),
        fee: Amount,
    ) {
        let Some(recorder) = self.recorder.as_deref_mut() else { return };
        let (available_delta, held_delta) = deltas;
        if available_delta.0 == 0 && held_delta.0 == 0 && fee.0 == 0 {
            return;
        }
        let after = self.balance_columns[asset.index()][account.index()];
        let trade = if recorder.in_fill { recorder.fills } else { 0 };
        recorder.changes.push(BalanceChange {
            account,
            asset,
            movement,
            available_delta,
            held_delta,
            fee,
            after,
            trade,
        });
    }

    // ----- rebuilding from a snapshot (`snapshot`) -----
    // These set state outright instead of moving money, so they do not keep
    // conservation by themselves: the snapshot decoder checks it once everything is set.

    /// Adds an account named `name` with zero balances, numbered after the existing
    /// ones; `None` (nothing changed) if the name is taken.
    pub(crate) fn restore_account(&mut self, name: &str) -> Option<AccountId> {
        if self.find_account(name).is_some() || u32::try_from(self.accounts.len()).is_err() {
            return None;
        }
        Some(self.find_or_create_account(name))
    }

    /// Sets the balance of `account` in `asset`.
    pub(crate) fn restore_balance(&mut self, account: AccountId, asset: AssetId, balance: Balance) {
        *self.balance_mut(account, asset) = balance;
    }

    /// Sets the fee balance and the net deposits of `asset`.
    pub(crate) fn restore_asset_totals(
        &mut self,
        asset: AssetId,
        fees: Amount,
        net_deposits: Amount,
    ) {
        self.fees[asset.index()] = fees;
        self.net_deposits[asset.index()] = net_deposits;
    }

    /// Outside money in: available += amount, net deposits += amount.
    pub fn deposit(&mut self, name: &str, asset: AssetId, amount: Amount) {
        debug_assert!(amount.0 > 0 && self.deposit_fits(asset, amount));
        let account = self.find_or_create_account(name);
        self.balance_mut(account, asset).available += amount;
        self.net_deposits[asset.index()] += amount;
        self.record(account, asset, BalanceMove::Deposit, (amount, Amount::ZERO), Amount::ZERO);
    }

    /// Money out: available -= amount, net deposits -= amount.
    pub fn withdraw(&mut self, account: AccountId, asset: AssetId, amount: Amount) {
        let balance = self.balance_mut(account, asset);
        assert!(amount.0 > 0 && amount <= balance.available, "withdrawal was checked");
        balance.available -= amount;
        self.net_deposits[asset.index()] -= amount;
        let deltas = (Amount::ZERO - amount, Amount::ZERO);
        self.record(account, asset, BalanceMove::Withdrawal, deltas, Amount::ZERO);
    }

    /// available -> held.
    pub fn hold(&mut self, account: AccountId, asset: AssetId, amount: Amount) {
        let balance = self.balance_mut(account, asset);
        assert!(amount.0 >= 0 && amount <= balance.available, "hold was checked");
        balance.available -= amount;
        balance.held += amount;
        self.record(
            account,
            asset,
            BalanceMove::Hold,
            (Amount::ZERO - amount, amount),
            Amount::ZERO,
        );
    }

    /// held -> available.
    pub fn release(&mut self, account: AccountId, asset: AssetId, amount: Amount) {
        let balance = self.balance_mut(account, asset);
        debug_assert!(amount.0 >= 0 && amount <= balance.held, "release more than held");
        balance.held -= amount;
        balance.available += amount;
        self.record(
            account,
            asset,
            BalanceMove::Release,
            (amount, Amount::ZERO - amount),
            Amount::ZERO,
        );
    }

    /// Pays `amount` out of `payer`'s held into `receiver`'s available, less `fee`,
    /// which goes to the fee balance.
    pub fn pay_from_held(
        &mut self,
        payer: AccountId,
        receiver: AccountId,
        asset: AssetId,
        amount: Amount,
        fee: Amount,
    ) {
        debug_assert!(fee.0 >= 0 && fee <= amount);
        let payer_balance = self.balance_mut(payer, asset);
        debug_assert!(amount <= payer_balance.held, "pay more than held");
        payer_balance.held -= amount;
        self.record(
            payer,
            asset,
            BalanceMove::Pay,
            (Amount::ZERO, Amount::ZERO - amount),
            Amount::ZERO,
        );
        self.balance_mut(receiver, asset).available += amount - fee;
        self.fees[asset.index()] += fee;
        self.record(receiver, asset, BalanceMove::Receive, (amount - fee, Amount::ZERO), fee);
    }

    // ----- futures (`futures.rs`): the settle asset's available may go below zero -----

    /// A futures fill's fee, from available to the fee balance (available may go below
    /// zero).
    pub fn pay_fee(&mut self, account: AccountId, asset: AssetId, fee: Amount) {
        debug_assert!(fee.0 >= 0);
        self.balance_mut(account, asset).available -= fee;
        self.fees[asset.index()] += fee;
        self.record(account, asset, BalanceMove::Fee, (Amount::ZERO - fee, Amount::ZERO), fee);
    }

    /// A closing fill's profit (negative: loss) or a settlement's mark, to available
    /// (which may go below zero). The money comes from the positions' value, which the
    /// exchange's conservation counts.
    pub fn credit_profit(
        &mut self,
        account: AccountId,
        asset: AssetId,
        profit: Amount,
        movement: BalanceMove,
    ) {
        debug_assert!(matches!(movement, BalanceMove::RealisedProfit | BalanceMove::Settlement));
        self.balance_mut(account, asset).available += profit;
        self.record(account, asset, movement, (profit, Amount::ZERO), Amount::ZERO);
    }

    /// available -> held by `delta` (negative: held -> available), whatever available
    /// is: a new margin rate applies to what is already open.
    pub fn reprice_margin(&mut self, account: AccountId, asset: AssetId, delta: Amount) {
        let balance = self.balance_mut(account, asset);
        balance.available -= delta;
        balance.held += delta;
        debug_assert!(balance.held.0 >= 0, "margin re-priced below zero");
        self.record(
            account,
            asset,
            BalanceMove::Margin,
            (Amount::ZERO - delta, delta),
            Amount::ZERO,
        );
    }
}
