//! Order entry, once for every gateway. A gateway decodes its bytes into a `Request`
//! (`request`), and order entry does the rest the same way for all of them: it checks
//! the request against the venue's rules that come before the engine (the client order
//! id, the order a cancel or amend names), makes its engine command in one place per
//! kind, submits it, and turns the command's outcome into one protocol-neutral answer
//! (`answer`), which the gateway renders. A connection's requests in flight, and the
//! matching of its lane's outcomes to them, are `in_flight`.
//!
//! It holds nothing between requests but the directory's caches of the engine's
//! definitions; it never renders a protocol (JSON, frames) and never reads a socket.

pub mod answer;
pub mod in_flight;
pub mod request;

use std::borrow::Cow;
use std::sync::Arc;

use bourse_core::command::{OrderCommand, OrderType};
use bourse_core::ids::{AccountId, ClientOrderId, OrderId};
use bourse_core::venue::{OrderKind, OrderRecord, OrderStatus};
use bourse_core::{AccountRef, Command, Event, Offset, Price, Qty, RejectReason};
use bourse_engine::Correlation;

use crate::directory::Directory;
use crate::link::{read_order_behind, EngineLink, Lane, LinkError, OrderRead, Pending, Reply};
use crate::port::error::{ApiError, ApiResult};
use crate::port::policy::Policy;
use crate::port::queries::own_order;
use crate::port::session::Session;
use crate::render::Shown;
use answer::{placed_from_events, Answer, Detail, Placed, Stamp, View};
use request::{Request, Target};

/// The account a request acts for: its name, and its engine id once it has one (its
/// first deposit made it).
#[derive(Clone, Copy, Debug)]
struct Trader<'a> {
    pub name: &'a str,
    pub id: Option<AccountId>,
}

impl<'a> Trader<'a> {
    /// How a command names the account: by id when the engine knows it (no lookup
    /// there), else by name.
    fn account_ref(self) -> AccountRef<'a> {
        match self.id {
            Some(id) => AccountRef::Id(id),
            None => AccountRef::Name(Cow::Borrowed(self.name)),
        }
    }
}

/// Where a command goes: a connection's own lane, or the shared session that REST's
/// handlers wait on one request at a time.
pub trait Submit {
    /// What identifies the submission's outcome.
    type Ticket;
    fn submit(&mut self, command: &Command<'_>) -> Result<Self::Ticket, LinkError>;
    /// The order `client_order_id` of `account` as it stands right after the commands
    /// submitted so far (sequenced behind them, before any submitted next).
    fn read_order(&self, account: AccountId, client_order_id: &str)
        -> Result<OrderRead, LinkError>;
}

impl Submit for Lane {
    type Ticket = Correlation;

    fn submit(&mut self, command: &Command<'_>) -> Result<Correlation, LinkError> {
        Lane::submit(self, command)
    }

    fn read_order(
        &self,
        account: AccountId,
        client_order_id: &str,
    ) -> Result<OrderRead, LinkError> {
        read_order_behind(self.session(), account, client_order_id)
    }
}

impl Submit for &EngineLink {
    type Ticket = Pending;

    fn submit(&mut self, command: &Command<'_>) -> Result<Pending, LinkError> {
        self.enqueue(command)
    }

    fn read_order(
        &self,
        account: AccountId,
        client_order_id: &str,
    ) -> Result<OrderRead, LinkError> {
        read_order_behind(self.session(), account, client_order_id)
    }
}

/// What a submitted request's answer needs once its command's outcome is known.
pub struct Work {
    account: Option<AccountId>,
    client_order_id: ClientOrderId,
    needs: Needs,
}

enum Needs {
    /// `Detail::Stamp`.
    Stamp,
    /// A new order, `Detail::Full`: the account's name and the command as submitted,
    /// to build its record from.
    Placed(Box<(String, Command<'static>)>),
    /// A cancel or amend, `Detail::Full`: the order read right behind it.
    Order(OrderRead),
}

/// The order-entry service the gateways share. Every request it takes is a request
/// of a session, charged against the session's limits (`policy`) before anything else.
pub struct OrderEntry {
    link: Arc<EngineLink>,
    directory: Arc<Directory>,
    policy: Arc<Policy>,
}

impl OrderEntry {
    pub fn new(
        link: Arc<EngineLink>,
        directory: Arc<Directory>,
        policy: Arc<Policy>,
    ) -> OrderEntry {
        OrderEntry { link, directory, policy }
    }

    /// The engine link, for the port's own connection lanes (`in_flight`).
    pub(super) fn link(&self) -> &Arc<EngineLink> {
        &self.link
    }

    /// The account `session` trades for, as order entry names it: its engine id once
    /// the engine has it (read from the directory once per session), else its name.
    async fn trader<'s>(&self, session: &'s Session) -> ApiResult<Trader<'s>> {
        let id = session.account_id(&self.directory).await?;
        Ok(Trader { name: session.account()?, id })
    }

    /// Takes one request of `session`: charged against its limits, then checked, made
    /// into its command and submitted through `to`; returns the submission's ticket and
    /// what its answer needs. Nothing is submitted when a check fails (the error says
    /// why).
    pub async fn submit<S: Submit>(
        &self,
        to: &mut S,
        session: &Session,
        request: &Request<'_>,
        detail: Detail,
    ) -> ApiResult<(S::Ticket, Work)> {
        session.charge(&self.policy)?;
        let trader = self.trader(session).await?;
        match request {
            Request::Place(order) => {
                let client_order_id = request::client_order_id(order.client_order_id.as_ref())?;
                let command = request::order_command(trader.account_ref(), &client_order_id, order);
                let ticket = to.submit(&command)?;
                let needs = match detail {
                    Detail::Full => {
                        Needs::Placed(Box::new((trader.name.to_string(), command.into_owned())))
                    }
                    Detail::Stamp => Needs::Stamp,
                };
                let client_order_id = ClientOrderId::from(client_order_id.as_str());
                Ok((ticket, Work { account: trader.id, client_order_id, needs }))
            }
            Request::Cancel(target) => {
                let (account, client_order_id) = self.target(trader, target).await?;
                let ticket = to.submit(&request::cancel_command(account, &client_order_id))?;
                self.changed(to, ticket, account, client_order_id, detail)
            }
            Request::Amend { target, price, qty } => {
                let (account, client_order_id) = self.target(trader, target).await?;
                let command = request::amend_command(account, &client_order_id, *price, *qty);
                let ticket = to.submit(&command)?;
                self.changed(to, ticket, account, client_order_id, detail)
            }
        }
    }

    /// What a cancel's or amend's answer needs: with `Detail::Full`, the order read
    /// right behind its command.
    fn changed<S: Submit>(
        &self,
        to: &S,
        ticket: S::Ticket,
        account: AccountId,
        client_order_id: ClientOrderId,
        detail: Detail,
    ) -> ApiResult<(S::Ticket, Work)> {
        let needs = match detail {
            Detail::Stamp => Needs::Stamp,
            Detail::Full => Needs::Order(to.read_order(account, &client_order_id)?),
        };
        Ok((ticket, Work { account: Some(account), client_order_id, needs }))
    }

    /// One request through the shared session, answered once its outcome is released
    /// (REST's handlers: one request per call).
    pub async fn submit_and_wait(
        &self,
        session: &Session,
        request: &Request<'_>,
    ) -> ApiResult<Answer> {
        let mut link: &EngineLink = &self.link;
        let (pending, work) = self.submit(&mut link, session, request, Detail::Full).await?;
        let reply = pending.wait().await?;
        self.answer(work, reply).await
    }

    /// The answer to a request whose command's outcome `reply` carries.
    pub async fn answer(&self, work: Work, reply: Reply) -> ApiResult<Answer> {
        let Some(result) = reply.result() else {
            return Err(LinkError::Failed("the engine stopped before answering".into()).into());
        };
        let Work { account, client_order_id, needs } = work;
        let events = reply.events();
        match events.first() {
            Some(Event::Rejected { reason: RejectReason::DuplicateId, .. }) => {
                return Err(self.duplicate(account, &client_order_id).await);
            }
            Some(Event::Rejected { reason, .. }) => return Err(ApiError::rejected(*reason)),
            _ => {}
        }
        let stamp = Stamp {
            order_id: result.order_id.unwrap_or(OrderId::of(result.seq)),
            seq: result.seq,
            ts_ns: result.ts,
        };
        let view = match needs {
            Needs::Stamp => View::Stamp,
            Needs::Placed(submitted) => {
                let (account_name, command) = *submitted;
                let Command::Order(order) = command else {
                    return Err(ApiError::malformed("not an order"));
                };
                let account = match account {
                    Some(account) => Some(account),
                    None => self.directory.account_id(&account_name).await.ok().flatten(),
                };
                View::Placed(self.placed(account, client_order_id, &order, &reply).await?)
            }
            Needs::Order(read) => {
                let record = read.wait().await?.ok_or_else(ApiError::unknown_order)?;
                View::Order(self.shown(record).await?)
            }
        };
        Ok(Answer { stamp, view })
    }

    /// A new order as it stands after its command (`reply`), with its fills.
    async fn placed(
        &self,
        account: Option<AccountId>,
        client_order_id: ClientOrderId,
        order: &OrderCommand<'_>,
        reply: &Reply,
    ) -> ApiResult<Placed> {
        let result = reply.result().ok_or_else(|| ApiError::malformed("no result"))?;
        let symbol = order.symbol.as_ref();
        let reference = match self.directory.reference_with_symbol(symbol).await {
            Ok(reference) => reference,
            Err(_) => self.directory.reference(),
        };
        let Some((instrument, info)) = reference.find_instrument(symbol) else {
            return Err(ApiError::malformed("the instrument vanished"));
        };
        let price = match order.order_type {
            OrderType::Limit { price } => price
                .to_units(info.price_decimals)
                .and_then(|units| i64::try_from(units).ok())
                .map(Price),
            OrderType::Market => None,
        };
        let qty = order
            .size
            .qty()
            .and_then(|qty| qty.to_units(info.qty_decimals))
            .and_then(|units| i64::try_from(units).ok())
            .map_or(Qty(0), Qty);
        // A spend-amount buy names what it spends, in the quote asset's units, as the
        // venue's record keeps it.
        let quote_qty = order
            .size
            .quote_qty()
            .zip(info.quote_decimals())
            .and_then(|(quote_qty, decimals)| quote_qty.to_units(decimals))
            .and_then(|units| i64::try_from(units).ok())
            .map(bourse_core::Amount);
        // (The events name the account too: this only fills in an order that neither
        // traded nor finished.)
        let submitted = OrderRecord {
            order_id: OrderId::of(result.seq),
            account: account.unwrap_or(AccountId(u32::MAX)),
            client_id: client_order_id,
            instrument,
            side: order.side,
            kind: if price.is_some() { OrderKind::Limit } else { OrderKind::Market },
            time_in_force: order.time_in_force.applied(order.order_type, info.is_future()),
            offset: if info.is_future() { order.offset } else { Offset::Open },
            post_only: order.post_only && price.is_some(),
            stp: order.stp,
            price,
            qty,
            quote_qty,
            remaining: qty,
            filled: Qty(0),
            status: OrderStatus::Open,
            created_ns: result.ts,
            updated_ns: result.ts,
        };
        Ok(placed_from_events(&reference, submitted, &reply.events()[1..]))
    }

    /// The answer to a reused client order id: `duplicate_id`, with the order it names
    /// (the one a retried submission created) when it can be read.
    async fn duplicate(&self, account: Option<AccountId>, client_order_id: &str) -> ApiError {
        let error = ApiError::rejected(RejectReason::DuplicateId);
        let Some(account) = account else { return error };
        match self.link.order_by_client(account, client_order_id).await {
            Ok(Some(record)) => match self.shown(record).await {
                Ok(shown) => error.with_order(shown),
                Err(_) => error,
            },
            _ => error,
        }
    }

    /// The account and client order id of the order `target` names: `unknown_order`
    /// when the account has none such (by `order_id`, the order is read first).
    async fn target(
        &self,
        trader: Trader<'_>,
        target: &Target<'_>,
    ) -> ApiResult<(AccountId, ClientOrderId)> {
        let account = trader.id.ok_or_else(ApiError::unknown_order)?;
        match target {
            Target::ClientOrderId(client_order_id) => {
                Ok((account, ClientOrderId::from(client_order_id.as_ref())))
            }
            Target::OrderId(_) => {
                let record = own_order(&self.link, account, target).await?;
                Ok((account, record.client_id))
            }
        }
    }

    /// `record` with the reference data that knows its instrument.
    async fn shown(&self, record: OrderRecord) -> ApiResult<Shown> {
        let reference = self.directory.reference_knowing(record.instrument.index() + 1).await?;
        Ok(Shown { record, reference })
    }
}
