"""ccxt's `binance` class, unmodified, trading spot on a self-hosted Bourse through its
Binance-compatible REST surface (`/api/v3/`, docs/binance.md), written as a ccxt user
writes a script: the exchange pointed at another URL, a key and a secret. Run by
tests/ccxt_interop.rs against `bourse serve --demo`.

Every figure ccxt reports is compared with Bourse's own REST answer for the same thing
(/v1/instruments, /v1/depth, /v1/trades, /v1/ticker, /v1/candles, /v1/balances,
/v1/orders, /v1/fills): the markets' precision and limits, the book, trades, the ticker,
candles, balances, orders and fills. The errors a Binance user meets raise the ccxt
exceptions they expect: a wrong secret, an old timestamp, an unknown symbol, a post-only
order that would cross, too little money, a reused client order id.

The environment: BOURSE_URL, and BOURSE_{ALICE,BOB}_{KEY,SECRET}. Prints every check;
exits non-zero on the first mismatch."""

import os
import time
from decimal import Decimal

import ccxt

from bourse_rest import Mismatch, Rest, check, public_get, run

SYMBOL, BOURSE_SYMBOL, BINANCE_ID = "BTC/USD", "BTC-USD", "BTCUSD"
RUN = int(time.time() * 1000) % 10_000_000  # in client order ids


def exchange(account, secret=None):
    """ccxt's Binance, pointed at Bourse as any Binance-compatible venue is."""
    url = os.environ["BOURSE_URL"].rstrip("/") + "/api/v3"
    prefix = f"BOURSE_{account.upper()}_"
    return ccxt.binance({
        "apiKey": os.environ[prefix + "KEY"],
        "secret": secret or os.environ[prefix + "SECRET"],
        "urls": {"api": {"public": url, "private": url}},
        "options": {"fetchMarkets": ["spot"], "fetchCurrencies": False, "fetchMargins": False,
                    "adjustForTimeDifference": True},
        "enableRateLimit": False,
    })


def same(ccxt_value, rest_value, what):
    """ccxt's number (a float) equals Bourse's decimal string."""
    if rest_value is None:
        ok = ccxt_value is None
    else:
        ok = ccxt_value is not None and Decimal(repr(ccxt_value)) == Decimal(rest_value)
    if not ok:
        raise Mismatch(f"{what}: ccxt {ccxt_value!r}, Bourse's REST {rest_value!r}")


def expect_error(kind, action, what):
    """action() raises ccxt's `kind` (and not a broader one)."""
    try:
        action()
    except kind as error:
        check(True, f"{what}: ccxt raised {type(error).__name__} ({str(error)[:100]})")
        return
    except Exception as error:
        raise Mismatch(f"{what}: ccxt raised {type(error).__name__}, not {kind.__name__}: {error}") from None
    raise Mismatch(f"{what}: no error, {kind.__name__} expected")


def compare_order(ccxt_order, rest_order, what):
    """A ccxt order against GET /v1/orders/{id}."""
    check(ccxt_order["id"] == str(rest_order["order_id"]), f"{what}: id {ccxt_order['id']}")
    check(ccxt_order["clientOrderId"] == rest_order["client_order_id"], f"{what}: client order id")
    check(ccxt_order["side"] == rest_order["side"], f"{what}: side {ccxt_order['side']}")
    same(ccxt_order["amount"], rest_order["qty"], f"{what}: amount")
    same(ccxt_order["filled"], rest_order["filled"], f"{what}: filled")
    # ccxt's remaining is amount - filled; Bourse's is what is still open (0 once done).
    unfilled = Decimal(rest_order["qty"]) - Decimal(rest_order["filled"])
    same(ccxt_order["remaining"], rest_order["remaining"] if rest_order["status"] == "open" else str(unfilled),
         f"{what}: remaining")
    if rest_order["type"] == "limit":
        same(ccxt_order["price"], rest_order["price"], f"{what}: price")
    status = {"open": "open", "filled": "closed", "canceled": "canceled", "expired": "expired",
              "stp": "expired"}[rest_order["status"]]
    # ccxt calls an IOC order that ended partly filled "canceled" too; Binance says EXPIRED.
    check(ccxt_order["status"] in (status, "canceled" if status == "expired" else status),
          f"{what}: status {ccxt_order['status']} (Bourse: {rest_order['status']})")
    check(ccxt_order["postOnly"] == rest_order["post_only"], f"{what}: post-only {ccxt_order['postOnly']}")
    check(ccxt_order["timeInForce"] == rest_order["time_in_force"].upper().replace("GFD", "GTC"),
          f"{what}: time in force {ccxt_order['timeInForce']}")


def compare_balances(binance, rest, what):
    balance = binance.fetch_balance()
    shown = rest.ok("GET", "/v1/balances")["balances"]
    for asset, figures in shown.items():
        same(balance[asset]["free"], figures["available"], f"{what}: {asset} free")
        same(balance[asset]["used"], figures["held"], f"{what}: {asset} used")
        same(balance[asset]["total"], str(Decimal(figures["available"]) + Decimal(figures["held"])),
             f"{what}: {asset} total")
    check(True, f"{what}: ccxt's balances equal GET /v1/balances ({', '.join(sorted(shown))})")


def compare_fills(binance, rest, what):
    trades = binance.fetch_my_trades(SYMBOL)
    fills = [fill for fill in rest.ok("GET", "/v1/fills")["fills"] if fill["symbol"] == BOURSE_SYMBOL]
    check(len(trades) == len(fills), f"{what}: {len(trades)} trades, as many as GET /v1/fills")
    for trade, fill in zip(trades, fills):
        check(trade["order"] == str(fill["order_id"]) and trade["side"] == fill["side"],
              f"{what}: trade {trade['id']} of order {trade['order']} ({trade['side']})")
        same(trade["price"], fill["price"], f"{what}: trade {trade['id']} price")
        same(trade["amount"], fill["qty"], f"{what}: trade {trade['id']} amount")
        same(trade["fee"]["cost"], fill["fee"], f"{what}: trade {trade['id']} fee")
        check(trade["fee"]["currency"] == fill["fee_asset"], f"{what}: fee currency {fill['fee_asset']}")
        check(trade["takerOrMaker"] == fill["liquidity"], f"{what}: {fill['liquidity']}")


def main():
    alice, bob = exchange("alice"), exchange("bob")
    alice_rest, bob_rest = Rest("alice"), Rest("bob")

    # Markets: precision and limits as GET /v1/instruments.
    markets = alice.load_markets()
    instruments = {item["symbol"]: item for item in public_get("/v1/instruments")["instruments"]}
    spot = [item for item in instruments.values() if item["kind"] == "spot"]
    check(sorted(markets) == sorted(f"{item['base']}/{item['quote']}" for item in spot),
          f"load_markets lists the spot instruments only: {sorted(markets)}")
    for item in spot:
        market = markets[f"{item['base']}/{item['quote']}"]
        what = f"market {market['symbol']}"
        check(market["id"] == item["base"] + item["quote"] and market["spot"] and market["active"],
              f"{what}: id {market['id']}, spot, active")
        same(market["precision"]["price"], item["tick"], f"{what}: price precision")
        same(market["precision"]["amount"], item["lot"], f"{what}: amount precision")
        same(market["limits"]["amount"]["min"], item["min_qty"], f"{what}: minimum amount")
        same(market["limits"]["amount"]["max"], item["max_qty"], f"{what}: maximum amount")
        check(True, f"{what}: tick {item['tick']}, lot {item['lot']}, amounts {item['min_qty']} to {item['max_qty']}")

    # The book.
    book = alice.fetch_order_book(SYMBOL, 5)
    depth = public_get(f"/v1/depth/{BOURSE_SYMBOL}?levels=5")
    for side in ("bids", "asks"):
        check(len(book[side]) == len(depth[side]), f"order book: {len(book[side])} {side}, as GET /v1/depth")
        for (price, amount), (rest_price, rest_qty, _) in zip(book[side], depth[side]):
            same(price, rest_price, f"order book {side} price")
            same(amount, rest_qty, f"order book {side} amount at {rest_price}")
    best_bid, best_ask = Decimal(depth["bids"][0][0]), Decimal(depth["asks"][0][0])
    check(True, f"order book equals GET /v1/depth: best bid {best_bid}, best ask {best_ask}")

    # A limit buy that rests as the new best bid: fetch_order and fetch_open_orders
    # against GET /v1/orders.
    resting_price = best_bid + Decimal("1")
    resting = alice.create_order(SYMBOL, "limit", "buy", 0.01, float(resting_price),
                                 {"clientOrderId": f"ccxt-rest-{RUN}"})
    rest_order = alice_rest.ok("GET", f"/v1/orders/{resting['id']}")
    compare_order(resting, rest_order, "create_order limit buy (rests)")
    compare_order(alice.fetch_order(resting["id"], SYMBOL), rest_order, "fetch_order")
    open_orders = alice.fetch_open_orders(SYMBOL)
    rest_open = [order for order in alice_rest.ok("GET", "/v1/orders?status=open")["orders"]
                 if order["symbol"] == BOURSE_SYMBOL]
    check([order["id"] for order in open_orders] == [str(order["order_id"]) for order in rest_open],
          f"fetch_open_orders: {[order['id'] for order in open_orders]}, as GET /v1/orders?status=open")
    by_client = alice.fetch_order(None, SYMBOL, {"origClientOrderId": f"ccxt-rest-{RUN}"})
    check(by_client["id"] == resting["id"], "fetch_order by client order id")

    # bob sells into half of it with a market order: both see the trade.
    sold = bob.create_order(SYMBOL, "market", "sell", 0.005)
    check(sold["status"] == "closed", f"bob's market sell is closed (filled {sold['filled']})")
    compare_order(sold, bob_rest.ok("GET", f"/v1/orders/{sold['id']}"), "create_order market sell")
    check(Decimal(repr(sold["average"])) == resting_price,
          f"bob's market sell traded with alice's order, at {resting_price} (average {sold['average']})")
    half = alice.fetch_order(resting["id"], SYMBOL)
    compare_order(half, alice_rest.ok("GET", f"/v1/orders/{resting['id']}"), "alice's order, half filled")
    check(half["status"] == "open" and Decimal(repr(half["filled"])) == Decimal("0.005"),
          f"alice's order is open with 0.005 filled (ccxt: {half['status']}, {half['filled']})")
    check(Decimal(repr(half["cost"])) == resting_price * Decimal("0.005"), f"its cost is {half['cost']}")

    # A limit buy that takes the best ask, then IOC and post-only.
    taken = alice.create_order(SYMBOL, "limit", "buy", 0.02, float(best_ask))
    compare_order(taken, alice_rest.ok("GET", f"/v1/orders/{taken['id']}"), "create_order limit buy (takes)")
    check(len(taken["trades"]) >= 1, f"the FULL answer lists the order's fills ({len(taken['trades'])})")
    ioc_price = Decimal(public_get(f"/v1/depth/{BOURSE_SYMBOL}?levels=1")["asks"][0][0])
    ioc = alice.create_order(SYMBOL, "limit", "buy", 1, float(ioc_price), {"timeInForce": "IOC"})
    rest_ioc = alice_rest.ok("GET", f"/v1/orders/{ioc['id']}")
    compare_order(ioc, rest_ioc, "create_order limit IOC (partly filled, the rest expired)")
    check(rest_ioc["status"] == "expired" and Decimal(rest_ioc["filled"]) > 0,
          f"the IOC order filled {rest_ioc['filled']} and expired")
    maker_price = best_bid - Decimal("200")
    post_only = alice.create_order(SYMBOL, "limit", "buy", 0.01, float(maker_price), {"postOnly": True})
    compare_order(post_only, alice_rest.ok("GET", f"/v1/orders/{post_only['id']}"), "create_order post-only (rests)")
    crossing_ask = Decimal(public_get(f"/v1/depth/{BOURSE_SYMBOL}?levels=1")["asks"][0][0])
    expect_error(ccxt.OrderImmediatelyFillable,
                 lambda: alice.create_order(SYMBOL, "limit", "buy", 0.01, float(crossing_ask), {"postOnly": True}),
                 "a post-only order that would cross")

    # Market orders: by amount, and by cost (quoteOrderQty).
    bought = alice.create_order(SYMBOL, "market", "buy", 0.01)
    compare_order(bought, alice_rest.ok("GET", f"/v1/orders/{bought['id']}"), "create_order market buy")
    by_cost = alice.create_market_buy_order_with_cost(SYMBOL, 1000)
    rest_by_cost = alice_rest.ok("GET", f"/v1/orders/{by_cost['id']}")
    check(0 < by_cost["cost"] <= 1000, f"a market buy for 1,000 USD spent {by_cost['cost']} for {by_cost['filled']} BTC")
    same(by_cost["filled"], rest_by_cost["filled"], "market buy by cost: filled")

    # Cancel.
    canceled = alice.cancel_order(resting["id"], SYMBOL)
    rest_canceled = alice_rest.ok("GET", f"/v1/orders/{resting['id']}")
    check(rest_canceled["status"] == "canceled", "cancel_order: GET /v1/orders shows it canceled")
    compare_order(canceled, rest_canceled, "cancel_order's answer")
    expect_error(ccxt.OrderNotFound, lambda: alice.cancel_order(resting["id"], SYMBOL), "canceling it again")
    expect_error(ccxt.OrderNotFound, lambda: alice.fetch_order("999999999", SYMBOL), "an unknown order")
    alice.cancel_order(post_only["id"], SYMBOL)

    # Every order of the symbol (allOrders): GET /v1/orders, open and finished.
    every = alice.fetch_orders(SYMBOL)
    rest_every = [order for status in ("open", "finished")
                  for order in alice_rest.ok("GET", f"/v1/orders?status={status}")["orders"]
                  if order["symbol"] == BOURSE_SYMBOL]
    check(sorted(order["id"] for order in every) == sorted(str(order["order_id"]) for order in rest_every),
          f"fetch_orders: {len(every)} orders, as GET /v1/orders (open and finished)")
    for order in every:
        compare_order(order, next(o for o in rest_every if str(o["order_id"]) == order["id"]),
                      f"fetch_orders: order {order['id']}")

    # Fills and balances.
    compare_fills(alice, alice_rest, "alice's fetch_my_trades")
    compare_fills(bob, bob_rest, "bob's fetch_my_trades")
    compare_balances(alice, alice_rest, "alice's fetch_balance")
    compare_balances(bob, bob_rest, "bob's fetch_balance")

    # Public trades, ticker and candles, after the trades above.
    trades = alice.fetch_trades(SYMBOL, limit=50)
    rest_trades = public_get(f"/v1/trades/{BOURSE_SYMBOL}?limit=50")["trades"]
    check(len(trades) == len(rest_trades) > 0, f"fetch_trades: {len(trades)} trades, as GET /v1/trades")
    for trade, rest_trade in zip(trades, rest_trades):
        same(trade["price"], rest_trade["price"], f"trade {rest_trade['trade_id']} price")
        same(trade["amount"], rest_trade["qty"], f"trade {rest_trade['trade_id']} amount")
        check(trade["side"] == rest_trade["taker_side"], f"trade {rest_trade['trade_id']}: taker {trade['side']}")
        check(trade["timestamp"] == rest_trade["ts_ns"] // 1_000_000, f"trade {rest_trade['trade_id']}: time")
    ticker = alice.fetch_ticker(SYMBOL)
    rest_ticker = public_get(f"/v1/ticker/{BOURSE_SYMBOL}")["data"]
    for field, rest_field in (("last", "last"), ("open", "open_24h"), ("high", "high_24h"), ("low", "low_24h"),
                              ("baseVolume", "volume_24h"), ("quoteVolume", "quote_volume_24h")):
        same(ticker[field], rest_ticker[rest_field], f"fetch_ticker {field}")
    top = public_get(f"/v1/depth/{BOURSE_SYMBOL}?levels=1")
    same(ticker["bid"], top["bids"][0][0], "fetch_ticker bid")
    same(ticker["bidVolume"], top["bids"][0][1], "fetch_ticker bidVolume")
    same(ticker["ask"], top["asks"][0][0], "fetch_ticker ask")
    check(True, f"fetch_ticker equals GET /v1/ticker and /v1/depth: last {ticker['last']}, volume {ticker['baseVolume']}")
    candles = alice.fetch_ohlcv(SYMBOL, "1m", limit=10)
    rest_candles = public_get(f"/v1/candles/{BOURSE_SYMBOL}?interval=1m&limit=10")["candles"]
    check(len(candles) == len(rest_candles) > 0, f"fetch_ohlcv: {len(candles)} candles, as GET /v1/candles")
    for candle, rest_candle in zip(candles, rest_candles):
        check(candle[0] == rest_candle[0] // 1_000_000, f"candle at {candle[0]}")
        for index in range(1, 6):
            same(candle[index], rest_candle[index], f"candle at {candle[0]}, field {index}")

    # The errors a Binance user expects.
    expect_error(ccxt.AuthenticationError, lambda: exchange("alice", secret="0" * 64).fetch_balance(),
                 "a wrong secret")
    late = exchange("alice")
    late.load_markets()
    late.nonce = lambda: late.milliseconds() - 60_000
    expect_error(ccxt.InvalidNonce, late.fetch_balance, "a timestamp a minute old")
    expect_error(ccxt.BadSymbol, lambda: alice.fetch_ticker("NOPE/USD"), "an unknown symbol (ccxt's own check)")
    expect_error(ccxt.BadSymbol, lambda: alice.publicGetTickerPrice({"symbol": "NOPEUSD"}),
                 "an unknown symbol (Bourse's -1121)")
    expect_error(ccxt.InsufficientFunds,
                 lambda: alice.create_order(SYMBOL, "limit", "buy", 900, float(best_bid - 100)),
                 "an order beyond alice's money")
    expect_error(ccxt.InvalidOrder,
                 lambda: alice.create_order(SYMBOL, "limit", "buy", 0.01, float(best_bid - 100),
                                            {"clientOrderId": f"ccxt-rest-{RUN}"}),
                 "a reused client order id")
    expect_error(ccxt.InvalidOrder,
                 lambda: alice.privatePostOrder({"symbol": BINANCE_ID, "side": "BUY", "type": "LIMIT",
                                                 "timeInForce": "GTC", "quantity": "0.00001",
                                                 "price": str(best_bid - 100)}),
                 "a quantity below the lot (LOT_SIZE)")
    print("PASSED: ccxt_binance.py", flush=True)


if __name__ == "__main__":
    run(main)
