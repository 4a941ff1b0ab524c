//! The gateways' caches of the engine's state that never changes once made: the
//! reference data (assets, instruments) and the engine's ids of accounts by name. Each
//! is read again when it does not know something yet; neither holds anything the
//! engine does not.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use bourse_core::ids::{AccountId, InstrumentId};

use crate::link::EngineLink;
use crate::port::error::ApiResult;
use crate::reference::Reference;

/// The gateways' caches of the engine's definitions and account ids.
pub struct Directory {
    link: Arc<EngineLink>,
    reference: RwLock<Arc<Reference>>,
    account_ids: Mutex<HashMap<String, AccountId>>,
}

impl Directory {
    pub fn new(link: Arc<EngineLink>) -> Directory {
        Directory {
            link,
            reference: RwLock::new(Arc::new(Reference::default())),
            account_ids: Mutex::new(HashMap::new()),
        }
    }

    /// Instruments and assets as last read; `refresh_reference` reads them again.
    pub fn reference(&self) -> Arc<Reference> {
        Arc::clone(&self.reference.read().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    pub async fn refresh_reference(&self) -> ApiResult<Arc<Reference>> {
        let reference = Arc::new(self.link.read(|venue| Reference::read(venue.exchange())).await?);
        let mut kept = self.reference.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Definitions are only ever added: a read never knows less than an earlier one.
        debug_assert!(reference.instruments.len() >= kept.instruments.len());
        debug_assert!(reference.assets.len() >= kept.assets.len());
        *kept = Arc::clone(&reference);
        Ok(reference)
    }

    /// The reference data, read again when it knows fewer than `instrument_count`
    /// instruments.
    pub async fn reference_knowing(&self, instrument_count: usize) -> ApiResult<Arc<Reference>> {
        let reference = self.reference();
        if reference.instruments.len() >= instrument_count {
            return Ok(reference);
        }
        self.refresh_reference().await
    }

    /// The reference data, read again only when it does not know `symbol` yet.
    pub async fn reference_with_symbol(&self, symbol: &str) -> ApiResult<Arc<Reference>> {
        let reference = self.reference();
        if reference.find_instrument(symbol).is_some() {
            return Ok(reference);
        }
        self.refresh_reference().await
    }

    /// The reference data knowing every instrument of `instruments`.
    pub async fn reference_for(
        &self,
        instruments: impl Iterator<Item = InstrumentId>,
    ) -> ApiResult<Arc<Reference>> {
        let needed = instruments.map(|instrument| instrument.index() + 1).max().unwrap_or(0);
        self.reference_knowing(needed).await
    }

    /// The engine's id of `account`, once it exists there (its first deposit).
    pub async fn account_id(&self, account: &str) -> ApiResult<Option<AccountId>> {
        if let Some(id) = self.cached_account_id(account) {
            return Ok(Some(id));
        }
        let name = account.to_string();
        let found =
            self.link.read(move |venue| venue.exchange().ledger().find_account(&name)).await?;
        if let Some(id) = found {
            self.account_ids
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .insert(account.to_string(), id);
        }
        Ok(found)
    }

    fn cached_account_id(&self, account: &str) -> Option<AccountId> {
        self.account_ids
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(account)
            .copied()
    }
}
