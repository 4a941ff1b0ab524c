"""A tqsdk strategy, written as a tqsdk user writes one, trading futures on a self-hosted
Bourse (`bourse serve --demo`) through its DIFF gateway. Run by tests/tqsdk_interop.rs.

tqsdk is pointed at Bourse the way it is pointed at any other server, through its
environment variables: TQ_AUTH_URL (the OpenID-Connect token endpoint's base), TQ_MD_URL
(market data) and TQ_TD_URL (trading: TqAccount takes it when given no td_url). The
strategy: log in as alice; read SHFE.cu2501's quote and its 1-minute klines; buy 1 lot
against a resting sell (placed by `maker` over REST), see the order FINISHED and the
position long 1 today; close it with CLOSETODAY against a resting buy; place a far-away
order, see it ALIVE, cancel it, see it FINISHED with nothing filled. After each step
tqsdk's account and position must equal Bourse's REST view (GET /v1/account,
/v1/positions) to the cent. Prints every check; exits non-zero on the first mismatch.

Besides the TQ_* variables: BOURSE_URL and the REST keys BOURSE_{ALICE,MAKER}_{KEY,SECRET};
TQSDK_DEBUG_LOG, if set, is where tqsdk logs every pack it sends and receives."""

import math
import os
import time

from tqsdk import TqAccount, TqApi, TqAuth

from bourse_rest import (ORDER_FIELDS, POSITION_SUMMARY, SYMBOL, TRADE_FIELDS, Rest,
                         account_mismatches, check, describe, log_in, position_mismatches,
                         public_get, run, settle_and_compare, wait_until)

ACCOUNT = "alice"
PASSWORD = "alice-demo-password"
BROKER = "Bourse"
PRICE = 75000  # between the demo maker's best bid (74,990) and best ask (75,010)
FAR_PRICE = 74000  # far below the asks: rests
RUN = int(time.time())  # in maker's client order ids


def main():
    alice_rest, maker = Rest(ACCOUNT), Rest("maker")
    check(SYMBOL not in alice_rest.positions() and not alice_rest.ok("GET", "/v1/orders")["orders"],
          f"{ACCOUNT} starts with no position and no open order (a fresh demo)")
    print(f"tqsdk against Bourse: {os.environ.get('BOURSE_URL')} (tqsdk endpoints: "
          f"TQ_AUTH_URL={os.environ.get('TQ_AUTH_URL')}, TQ_MD_URL={os.environ.get('TQ_MD_URL')}, "
          f"TQ_TD_URL={os.environ.get('TQ_TD_URL')})", flush=True)

    api = log_in(ACCOUNT, lambda: TqApi(
        TqAccount(BROKER, ACCOUNT, PASSWORD),
        auth=TqAuth(ACCOUNT, PASSWORD),
        debug=os.environ.get("TQSDK_DEBUG_LOG"),
    ), os.environ.get("TQSDK_DEBUG_LOG"))
    try:
        trade(api, alice_rest, maker)
    finally:
        api.close()
    print("PASSED: tqsdk_trade.py", flush=True)


def compare_with_rest(api, alice_rest, position, what):
    """tqsdk's account and position against Bourse's REST view, to the cent."""
    account = api.get_account()
    settle_and_compare(api, f"{what}: tqsdk's account and position equal Bourse's REST view", [
        (account, alice_rest.account_view, account_mismatches),
        (position, lambda: alice_rest.positions().get(SYMBOL), position_mismatches),
    ])
    print(f"   account: balance={account.balance} margin={account.margin} available={account.available} "
          f"commission={account.commission} frozen_margin={account.frozen_margin} "
          f"frozen_commission={account.frozen_commission}", flush=True)


def trade(api, alice_rest, maker):
    # The quote: the contract's terms (from ins_query) and the book (from the quote).
    quote = api.get_quote(SYMBOL)
    print(f"quote: {describe(quote, ('instrument_id', 'ins_class', 'price_tick', 'volume_multiple', 'datetime', 'last_price', 'bid_price1', 'bid_volume1', 'ask_price1', 'ask_volume1'))}", flush=True)
    check(quote.price_tick == 10, f"quote.price_tick == 10 (got {quote.price_tick!r})")
    check(quote.volume_multiple == 5, f"quote.volume_multiple == 5 (got {quote.volume_multiple!r})")
    check(quote.ins_class == "FUTURE", f"quote.ins_class == 'FUTURE' (got {quote.ins_class!r})")
    check(quote.instrument_id == SYMBOL and quote.exchange_id == "SHFE",
          f"quote names {SYMBOL} on SHFE (got {quote.instrument_id!r} on {quote.exchange_id!r})")
    depth = public_get(f"/v1/depth/{SYMBOL}?levels=1")
    best_ask, best_bid = depth["asks"][0], depth["bids"][0]
    wait_until(api, lambda: quote.ask_price1 == float(best_ask[0]) and quote.ask_volume1 == int(best_ask[1])
               and quote.bid_price1 == float(best_bid[0]) and quote.bid_volume1 == int(best_bid[1]),
               f"quote's best ask {best_ask[1]} @ {best_ask[0]} and best bid {best_bid[1]} @ {best_bid[0]} as REST's depth shows",
               seconds=10, show=lambda: describe(quote, ("ask_price1", "ask_volume1", "bid_price1", "bid_volume1")))
    check(quote.ask_price1 > quote.bid_price1 and quote.ask_price1 % quote.price_tick == 0,
          f"a sane book: ask {quote.ask_price1} above bid {quote.bid_price1}, on the tick")

    # The klines: a DataFrame of 200 one-minute bars (no trades yet on a fresh demo).
    klines = api.get_kline_serial(SYMBOL, 60)
    check(len(klines) == 200 and {"datetime", "open", "high", "low", "close", "volume"} <= set(klines.columns),
          f"get_kline_serial({SYMBOL!r}, 60) is a DataFrame of 200 bars with OHLC and volume (got {len(klines)} rows)")
    print(f"klines, last row before trading: {klines.iloc[-1][['datetime', 'open', 'close', 'volume']].to_dict()}", flush=True)

    # Open: buy 1 lot against maker's resting sell.
    check(maker.order("sell", PRICE, 1, "open", f"tq-open-sell-{RUN}")["status"] == "open", "maker's sell rests")
    order = api.insert_order(SYMBOL, "BUY", "OPEN", 1, limit_price=PRICE)
    wait_until(api, lambda: order.status == "FINISHED", f"alice's BUY OPEN 1 @ {PRICE} is FINISHED",
               show=lambda: describe(order, ORDER_FIELDS))
    print(f"order: {describe(order, ORDER_FIELDS)}", flush=True)
    check(order.volume_left == 0 and not order.is_error and order.exchange_order_id != "",
          f"the order filled: volume_left 0, not an error, an exchange order id (got {describe(order, ('volume_left', 'is_error', 'exchange_order_id', 'last_msg'))})")
    wait_until(api, lambda: len(order.trade_records) == 1 and order.trade_price == PRICE,
               f"the order's one trade at {PRICE} (order.trade_records, order.trade_price)",
               show=lambda: f"{len(order.trade_records)} trades, trade_price {order.trade_price!r}")
    fill = list(order.trade_records.values())[0]
    print(f"trade: {describe(fill, TRADE_FIELDS)}", flush=True)
    check((fill.direction, fill.offset, fill.volume, fill.price, fill.exchange_id, fill.instrument_id)
          == ("BUY", "OPEN", 1, PRICE, "SHFE", "cu2501") and fill.trade_date_time > 0,
          "the trade: BUY OPEN 1 SHFE cu2501 at the price, with a time")
    check(fill.trade_id in api.get_trade(), "api.get_trade() has the trade")

    position = api.get_position(SYMBOL)
    wait_until(api, lambda: position.volume_long_today == 1, "position.volume_long_today == 1",
               show=lambda: describe(position, POSITION_SUMMARY))
    check((position.pos_long_today, position.pos_long_his, position.pos_long, position.pos, position.volume_short)
          == (1, 0, 1, 1, 0),
          f"pos_long_today 1, pos_long_his 0, pos_long 1, pos 1, nothing short (got {describe(position, POSITION_SUMMARY)})")
    check(position.open_price_long == PRICE and position.margin_long == 37500,
          f"open_price_long {PRICE}, margin_long 37,500 (10% of 75,000 x 5) (got {position.open_price_long!r}, {position.margin_long!r})")
    wait_until(api, lambda: quote.last_price == PRICE, f"quote.last_price == {PRICE} after the trade",
               seconds=10, show=lambda: describe(quote, ("last_price", "volume", "datetime")))
    wait_until(api, lambda: klines.iloc[-1]["close"] == PRICE and klines["volume"].sum() >= 1,
               f"the last kline's close is the trade's price {PRICE}, and the klines count its volume",
               seconds=15, show=lambda: str(klines.iloc[-1][['datetime', 'open', 'high', 'low', 'close', 'volume']].to_dict()))
    compare_with_rest(api, alice_rest, position, "after opening")
    check(api.get_account().commission == 3, "commission 3 (the taker fee of one lot)")

    # Close today's position against maker's resting buy.
    check(maker.order("buy", PRICE, 1, "open", f"tq-close-buy-{RUN}")["status"] == "open", "maker's buy rests")
    close = api.insert_order(SYMBOL, "SELL", "CLOSETODAY", 1, limit_price=PRICE)
    wait_until(api, lambda: close.status == "FINISHED", f"alice's SELL CLOSETODAY 1 @ {PRICE} is FINISHED",
               show=lambda: describe(close, ORDER_FIELDS))
    print(f"order: {describe(close, ORDER_FIELDS)}", flush=True)
    check(close.volume_left == 0 and not close.is_error,
          f"the close filled (got {describe(close, ('volume_left', 'is_error', 'last_msg'))})")
    wait_until(api, lambda: position.volume_long == 0 and position.pos == 0, "the position is flat",
               show=lambda: describe(position, POSITION_SUMMARY))
    check((position.pos_long_today, position.pos_long, position.volume_long_today) == (0, 0, 0),
          f"pos_long_today, pos_long and volume_long_today are 0 (got {describe(position, POSITION_SUMMARY)})")
    check(math.isnan(position.open_price_long) and math.isnan(position.position_price_long),
          "an emptied side has no average price (NaN, as tqsdk's own TqSim shows one, and as a side never held) "
          f"(got open_price_long {position.open_price_long!r}, position_price_long {position.position_price_long!r})")
    check(len([t for t in api.get_trade().values() if t.order_id in (order.order_id, close.order_id)]) == 2,
          "api.get_trade() has both trades")
    compare_with_rest(api, alice_rest, position, "after closing")
    account = api.get_account()
    check(account.margin == 0 and account.commission == 6,
          f"no margin left, commission 6 (two taker fees) (got {account.margin!r}, {account.commission!r})")

    # A far-away order: ALIVE, then cancelled.
    far = api.insert_order(SYMBOL, "BUY", "OPEN", 1, limit_price=FAR_PRICE)
    wait_until(api, lambda: far.exchange_order_id != "" or far.status == "FINISHED",
               f"Bourse answers the BUY OPEN 1 @ {FAR_PRICE}", show=lambda: describe(far, ORDER_FIELDS))
    print(f"order: {describe(far, ORDER_FIELDS)}", flush=True)
    check(far.status == "ALIVE" and far.is_online and far.volume_left == 1,
          f"the far order is ALIVE, online, nothing filled (got {describe(far, ('status', 'is_online', 'volume_left', 'last_msg'))})")
    open_orders = alice_rest.ok("GET", f"/v1/orders?symbol={SYMBOL}")["orders"]
    check([(o["side"], o["price"], o["remaining"]) for o in open_orders] == [("buy", str(FAR_PRICE), "1")],
          f"REST shows alice's one open order, buy 1 at {FAR_PRICE} (got {open_orders})")
    compare_with_rest(api, alice_rest, position, "with the far order open")
    check(api.get_account().frozen_margin == 37500 and api.get_account().frozen_commission == 3,
          "the far order freezes 37,500 of margin and a commission of 3")
    api.cancel_order(far)
    wait_until(api, lambda: far.status == "FINISHED", "the cancelled order is FINISHED",
               show=lambda: describe(far, ORDER_FIELDS))
    print(f"order: {describe(far, ORDER_FIELDS)}", flush=True)
    check(far.volume_left == far.volume_orign == 1 and not far.is_error and len(far.trade_records) == 0,
          f"the cancelled order: volume_left == volume_orign == 1, not an error, no trades (got {describe(far, ('volume_left', 'volume_orign', 'is_error', 'last_msg'))})")
    compare_with_rest(api, alice_rest, position, "after the cancel")
    check(api.get_account().frozen_margin == 0, "nothing frozen after the cancel")


if __name__ == "__main__":
    run(main)
