//! Order-level (L3) books as the public sees them: every resting order by its exchange
//! order id, with its instrument, side, price and remaining quantity, queued per price
//! level in priority order. The feed's publisher and its subscribers keep the same
//! structure and apply the same operations, so two `Books` fed the same messages are
//! equal. L2 (levels) and the best bid and offer are read from it.
//!
//! Prices and quantities are the instrument's units (`Price`, `Qty`), as in the
//! engine. Every operation checks what it is given and says what is wrong rather than
//! corrupting the book: a subscriber fed a bad or misordered message learns it.

use std::collections::BTreeMap;

use bourse_core::ids::InstrumentId;
use bourse_core::{OrderId, Price, Qty, Side};
use rustc_hash::FxHashMap;

/// "No order" in the queue links (exchange order ids start at 1).
const NONE: OrderId = OrderId(0);

/// One resting order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderEntry {
    pub instrument: InstrumentId,
    pub side: Side,
    pub price: Price,
    pub qty: Qty,
    previous: OrderId,
    next: OrderId,
}

/// One price level: its total, its order count, and its queue (oldest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    pub price: Price,
    pub total: Qty,
    pub count: u32,
    head: OrderId,
    tail: OrderId,
}

/// One instrument's two sides: price to level.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Sides {
    bids: BTreeMap<i64, Level>,
    asks: BTreeMap<i64, Level>,
}

impl Sides {
    fn side(&mut self, side: Side) -> &mut BTreeMap<i64, Level> {
        match side {
            Side::Buy => &mut self.bids,
            Side::Sell => &mut self.asks,
        }
    }

    fn side_ref(&self, side: Side) -> &BTreeMap<i64, Level> {
        match side {
            Side::Buy => &self.bids,
            Side::Sell => &self.asks,
        }
    }
}

/// Why a book operation was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BookError {
    DuplicateOrder(OrderId),
    UnknownOrder(OrderId),
    /// A quantity that is not positive, or more than the order has.
    BadQty {
        order: OrderId,
        qty: i64,
    },
    BadPrice {
        order: OrderId,
        price: i64,
    },
}

impl std::fmt::Display for BookError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BookError::DuplicateOrder(order) => {
                write!(formatter, "order {order} is on the book already")
            }
            BookError::UnknownOrder(order) => write!(formatter, "no order {order} on the book"),
            BookError::BadQty { order, qty } => {
                write!(formatter, "quantity {qty} does not fit order {order}")
            }
            BookError::BadPrice { order, price } => {
                write!(formatter, "price {price} of order {order} is not positive")
            }
        }
    }
}

impl std::error::Error for BookError {}

/// The best bid and offer of an instrument: price and total quantity of each side's
/// best level, `None` for an empty side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bbo {
    pub bid: Option<(Price, Qty)>,
    pub ask: Option<(Price, Qty)>,
}

/// Every instrument's order-level book.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Books {
    orders: FxHashMap<OrderId, OrderEntry>,
    instruments: Vec<Sides>,
}

impl Books {
    pub fn order(&self, order: OrderId) -> Option<&OrderEntry> {
        self.orders.get(&order)
    }

    pub fn order_count(&self) -> usize {
        self.orders.len()
    }

    /// Instruments that have (or had) orders: ids below this.
    pub fn instrument_count(&self) -> usize {
        self.instruments.len()
    }

    /// Puts `order` at the back of its price level.
    pub fn add(
        &mut self,
        order: OrderId,
        instrument: InstrumentId,
        side: Side,
        price: Price,
        qty: Qty,
    ) -> Result<(), BookError> {
        if order == NONE || self.orders.contains_key(&order) {
            return Err(BookError::DuplicateOrder(order));
        }
        if qty.0 <= 0 {
            return Err(BookError::BadQty { order, qty: qty.0 });
        }
        if price.0 <= 0 {
            return Err(BookError::BadPrice { order, price: price.0 });
        }
        let index = instrument.index();
        if index >= self.instruments.len() {
            self.instruments.resize_with(index + 1, Sides::default);
        }
        let level = self.instruments[index].side(side).entry(price.0).or_insert(Level {
            price,
            total: Qty(0),
            count: 0,
            head: NONE,
            tail: NONE,
        });
        let previous = level.tail;
        level.tail = order;
        if level.head == NONE {
            level.head = order;
        }
        level.total = Qty(level.total.0 + qty.0);
        level.count += 1;
        if previous != NONE {
            if let Some(entry) = self.orders.get_mut(&previous) {
                entry.next = order;
            }
        }
        self.orders
            .insert(order, OrderEntry { instrument, side, price, qty, previous, next: NONE });
        Ok(())
    }

    /// Takes `qty` off `order` (executed or reduced); an order left with nothing leaves
    /// the book. Returns what is left.
    pub fn reduce(&mut self, order: OrderId, qty: Qty) -> Result<Qty, BookError> {
        let entry = self.orders.get_mut(&order).ok_or(BookError::UnknownOrder(order))?;
        if qty.0 <= 0 || qty.0 > entry.qty.0 {
            return Err(BookError::BadQty { order, qty: qty.0 });
        }
        entry.qty = Qty(entry.qty.0 - qty.0);
        let (instrument, side, price, left) =
            (entry.instrument, entry.side, entry.price, entry.qty);
        if let Some(level) = self.instruments[instrument.index()].side(side).get_mut(&price.0) {
            level.total = Qty(level.total.0 - qty.0);
        }
        if left.0 == 0 {
            self.delete(order)?;
        }
        Ok(left)
    }

    /// Takes `order` off the book.
    pub fn delete(&mut self, order: OrderId) -> Result<OrderEntry, BookError> {
        let entry = self.orders.remove(&order).ok_or(BookError::UnknownOrder(order))?;
        if entry.previous != NONE {
            if let Some(previous) = self.orders.get_mut(&entry.previous) {
                previous.next = entry.next;
            }
        }
        if entry.next != NONE {
            if let Some(next) = self.orders.get_mut(&entry.next) {
                next.previous = entry.previous;
            }
        }
        let levels = self.instruments[entry.instrument.index()].side(entry.side);
        let emptied = match levels.get_mut(&entry.price.0) {
            Some(level) => {
                if level.head == order {
                    level.head = entry.next;
                }
                if level.tail == order {
                    level.tail = entry.previous;
                }
                level.total = Qty(level.total.0 - entry.qty.0);
                level.count -= 1;
                level.count == 0
            }
            None => false,
        };
        if emptied {
            levels.remove(&entry.price.0);
        }
        Ok(entry)
    }

    /// Moves `order` to the back of the level at `price`, with `qty` left: an order
    /// that lost its priority (an amend of its price, or up in quantity).
    pub fn replace(&mut self, order: OrderId, price: Price, qty: Qty) -> Result<(), BookError> {
        let entry = *self.orders.get(&order).ok_or(BookError::UnknownOrder(order))?;
        if qty.0 <= 0 {
            return Err(BookError::BadQty { order, qty: qty.0 });
        }
        if price.0 <= 0 {
            return Err(BookError::BadPrice { order, price: price.0 });
        }
        self.delete(order)?;
        self.add(order, entry.instrument, entry.side, price, qty)
    }

    /// Sets what is left of `order` to `qty` where it stands (a reduction that keeps
    /// its priority).
    pub fn set_qty(&mut self, order: OrderId, qty: Qty) -> Result<(), BookError> {
        let entry = self.orders.get(&order).ok_or(BookError::UnknownOrder(order))?;
        if qty.0 <= 0 || qty.0 > entry.qty.0 {
            return Err(BookError::BadQty { order, qty: qty.0 });
        }
        let by = Qty(entry.qty.0 - qty.0);
        if by.0 > 0 {
            self.reduce(order, by)?;
        }
        Ok(())
    }

    pub fn bbo(&self, instrument: InstrumentId) -> Bbo {
        let Some(sides) = self.instruments.get(instrument.index()) else {
            return Bbo::default();
        };
        Bbo {
            bid: sides.bids.last_key_value().map(|(_, level)| (level.price, level.total)),
            ask: sides.asks.first_key_value().map(|(_, level)| (level.price, level.total)),
        }
    }

    /// The levels of one side, best first.
    pub fn levels(&self, instrument: InstrumentId, side: Side) -> Vec<Level> {
        let Some(sides) = self.instruments.get(instrument.index()) else {
            return Vec::new();
        };
        let levels = sides.side_ref(side).values().copied();
        match side {
            Side::Buy => levels.rev().collect(),
            Side::Sell => levels.collect(),
        }
    }

    /// The orders of one side in priority order (best price first, then arrival):
    /// order id, price, remaining.
    pub fn orders(&self, instrument: InstrumentId, side: Side) -> Vec<(OrderId, Price, Qty)> {
        let mut orders = Vec::new();
        for level in self.levels(instrument, side) {
            let mut order = level.head;
            while order != NONE {
                let Some(entry) = self.orders.get(&order) else { break };
                orders.push((order, entry.price, entry.qty));
                order = entry.next;
            }
        }
        orders
    }

    /// Checks the structure: each level's queue links, total and count agree with its
    /// orders, every order is in exactly one queue, and no book is crossed. For tests
    /// and debug assertions.
    pub fn check(&self) -> Result<(), String> {
        let mut seen = 0usize;
        for (index, sides) in self.instruments.iter().enumerate() {
            for side in [Side::Buy, Side::Sell] {
                for (price, level) in sides.side_ref(side) {
                    let (mut total, mut count, mut previous, mut order) =
                        (0i64, 0u32, NONE, level.head);
                    while order != NONE {
                        let entry = self
                            .orders
                            .get(&order)
                            .ok_or(format!("order {order} linked but missing"))?;
                        if entry.previous != previous
                            || entry.price.0 != *price
                            || entry.side != side
                            || entry.instrument.index() != index
                        {
                            return Err(format!("order {order} is linked wrongly"));
                        }
                        total += entry.qty.0;
                        count += 1;
                        previous = order;
                        order = entry.next;
                    }
                    if previous != level.tail
                        || total != level.total.0
                        || count != level.count
                        || count == 0
                    {
                        return Err(format!("level {price} of instrument {index} does not add up"));
                    }
                    seen += count as usize;
                }
            }
            if let (Some(bid), Some(ask)) =
                (sides.bids.keys().next_back(), sides.asks.keys().next())
            {
                if bid >= ask {
                    return Err(format!("instrument {index} is crossed: bid {bid}, ask {ask}"));
                }
            }
        }
        if seen != self.orders.len() {
            return Err(format!("{} orders, {seen} in queues", self.orders.len()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BTC: InstrumentId = InstrumentId(0);

    #[test]
    fn queues_keep_arrival_order_and_levels_add_up() {
        let mut books = Books::default();
        books.add(OrderId(1), BTC, Side::Buy, Price(100), Qty(5)).unwrap();
        books.add(OrderId(2), BTC, Side::Buy, Price(100), Qty(3)).unwrap();
        books.add(OrderId(3), BTC, Side::Buy, Price(99), Qty(1)).unwrap();
        books.add(OrderId(4), BTC, Side::Sell, Price(101), Qty(2)).unwrap();
        assert_eq!(books.bbo(BTC).bid, Some((Price(100), Qty(8))));
        assert_eq!(books.bbo(BTC).ask, Some((Price(101), Qty(2))));
        assert_eq!(
            books.orders(BTC, Side::Buy),
            vec![
                (OrderId(1), Price(100), Qty(5)),
                (OrderId(2), Price(100), Qty(3)),
                (OrderId(3), Price(99), Qty(1))
            ]
        );
        // Executed in part, then the rest: the order leaves, the next is first.
        assert_eq!(books.reduce(OrderId(1), Qty(2)).unwrap(), Qty(3));
        assert_eq!(books.reduce(OrderId(1), Qty(3)).unwrap(), Qty(0));
        assert_eq!(books.orders(BTC, Side::Buy)[0], (OrderId(2), Price(100), Qty(3)));
        assert_eq!(books.bbo(BTC).bid, Some((Price(100), Qty(3))));
        books.check().unwrap();
        // Replaced: to the back of its new level.
        books.add(OrderId(5), BTC, Side::Buy, Price(99), Qty(4)).unwrap();
        books.replace(OrderId(2), Price(99), Qty(6)).unwrap();
        assert_eq!(
            books.orders(BTC, Side::Buy),
            vec![
                (OrderId(3), Price(99), Qty(1)),
                (OrderId(5), Price(99), Qty(4)),
                (OrderId(2), Price(99), Qty(6))
            ]
        );
        books.set_qty(OrderId(5), Qty(1)).unwrap();
        assert_eq!(books.orders(BTC, Side::Buy)[1], (OrderId(5), Price(99), Qty(1)));
        books.check().unwrap();
        books.delete(OrderId(3)).unwrap();
        books.delete(OrderId(5)).unwrap();
        books.delete(OrderId(2)).unwrap();
        books.delete(OrderId(4)).unwrap();
        assert_eq!(books.order_count(), 0);
        assert_eq!(books.bbo(BTC), Bbo::default());
        books.check().unwrap();
    }

    #[test]
    fn bad_operations_are_refused_and_change_nothing() {
        let mut books = Books::default();
        books.add(OrderId(1), BTC, Side::Sell, Price(10), Qty(5)).unwrap();
        let before = books.clone();
        assert_eq!(
            books.add(OrderId(1), BTC, Side::Sell, Price(10), Qty(1)),
            Err(BookError::DuplicateOrder(OrderId(1)))
        );
        assert_eq!(
            books.add(OrderId(0), BTC, Side::Sell, Price(10), Qty(1)),
            Err(BookError::DuplicateOrder(OrderId(0)))
        );
        assert_eq!(
            books.add(OrderId(2), BTC, Side::Sell, Price(10), Qty(0)),
            Err(BookError::BadQty { order: OrderId(2), qty: 0 })
        );
        assert_eq!(
            books.add(OrderId(2), BTC, Side::Sell, Price(0), Qty(1)),
            Err(BookError::BadPrice { order: OrderId(2), price: 0 })
        );
        assert_eq!(
            books.reduce(OrderId(1), Qty(6)),
            Err(BookError::BadQty { order: OrderId(1), qty: 6 })
        );
        assert_eq!(books.reduce(OrderId(9), Qty(1)), Err(BookError::UnknownOrder(OrderId(9))));
        assert_eq!(books.delete(OrderId(9)), Err(BookError::UnknownOrder(OrderId(9))));
        assert_eq!(
            books.replace(OrderId(1), Price(10), Qty(0)),
            Err(BookError::BadQty { order: OrderId(1), qty: 0 })
        );
        assert_eq!(
            books.set_qty(OrderId(1), Qty(7)),
            Err(BookError::BadQty { order: OrderId(1), qty: 7 })
        );
        assert_eq!(books, before);
    }
}
