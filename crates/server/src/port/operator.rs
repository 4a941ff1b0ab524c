//! The operator's side of the port: the engine commands only an operator sends
//! (assets, instruments, deposits, halts, cancelling an account's orders, futures
//! margins and settlement) and the balances of any account an operator reads. Every
//! method takes the session asking and refuses it (`forbidden`) unless it signed with
//! an admin key, so no surface that offers these can forget the check.
//!
//! It owns no rule of the commands themselves (the core checks them) nor of settling
//! (`services::clearing::settlement`); it renders nothing.

use std::sync::Arc;

use bourse_core::{Command, Decimal, Event};
use serde_json::Value;

use super::error::ApiResult;
use super::queries::balances_of;
use super::session::Session;
use crate::directory::Directory;
use crate::link::{AssetBalance, EngineLink};
use crate::port::records::SettingsChanges;
use crate::services::clearing::settlement::{self, ContractFacts};

/// What an operator does through the port.
pub struct Operator {
    link: Arc<EngineLink>,
    directory: Arc<Directory>,
    futures: Arc<SettingsChanges>,
}

impl Operator {
    pub fn new(
        link: Arc<EngineLink>,
        directory: Arc<Directory>,
        futures: Arc<SettingsChanges>,
    ) -> Operator {
        Operator { link, directory, futures }
    }

    /// Submits an operator's `command`; its rejection becomes the error. Returns its
    /// sequence number and events.
    pub async fn submit(
        &self,
        session: &Session,
        command: &Command<'_>,
    ) -> ApiResult<(u64, Vec<Event>)> {
        session.require_admin()?;
        settlement::submit(&self.link, command).await
    }

    /// Every asset's balance of the account `name` (zeros for one the engine does not
    /// know yet), in the engine's asset order.
    pub async fn balances(&self, session: &Session, name: &str) -> ApiResult<Vec<AssetBalance>> {
        session.require_admin()?;
        let account = self.directory.account_id(name).await?;
        balances_of(&self.link, account).await
    }

    /// Every live futures contract as settling sees it.
    pub async fn live_contracts(&self, session: &Session) -> ApiResult<Vec<ContractFacts>> {
        session.require_admin()?;
        Ok(self.link.read(settlement::live_contracts).await?)
    }

    /// The live contract `symbol`, or `unknown_symbol`.
    pub async fn contract(&self, session: &Session, symbol: &str) -> ApiResult<ContractFacts> {
        session.require_admin()?;
        settlement::contract(&self.link, symbol).await
    }

    /// Settles `symbol` now (`settlement::settle`).
    pub async fn settle(
        &self,
        session: &Session,
        symbol: &str,
        price: Option<Decimal>,
        is_final: bool,
    ) -> ApiResult<Value> {
        session.require_admin()?;
        settlement::settle(&self.link, &self.futures, symbol, price, is_final).await
    }

    /// Restates `symbol`'s ratio margin at its last settlement price
    /// (`settlement::restate_ratio_margin`).
    pub async fn restate_ratio_margin(
        &self,
        session: &Session,
        symbol: &str,
    ) -> ApiResult<Option<String>> {
        session.require_admin()?;
        settlement::restate_ratio_margin(&self.link, self.futures.settings(), symbol).await
    }
}
