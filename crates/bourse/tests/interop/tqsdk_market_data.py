"""A tqsdk user reading SHFE.cu2501's quote and ticks on a self-hosted Bourse (`bourse
serve --demo`) through its DIFF gateway, as tqsdk's own examples read them. Run by
tests/tqsdk_interop.rs.

On a fresh demo one trade happens (bob buys over REST) before anyone subscribes: the
quote's pre_open_interest is 0 (no settlement yet: the venue started with none). alice
then trades four lots with tqsdk, each seen in the quote before the next; her
get_tick_serial(SYMBOL, data_length=20) holds the five trades as five ticks with
consecutive ids, the day's cumulative volume and turnover, the book's best bid and ask,
and the last one's figures are the quote's. A sixth trade comes live as the next tick.
Then the operator settles the contract: the quote's pre_open_interest is the open
interest at the settlement, the day's volume starts again, and so does the ticks'.

The environment: TQ_AUTH_URL, TQ_MD_URL, TQ_TD_URL (tqsdk's own variables), BOURSE_URL
and the REST keys BOURSE_{ALICE,BOB,ADMIN}_{KEY,SECRET}; TQSDK_DEBUG_LOG, if set, is
where tqsdk logs every pack."""

import math
import os
import time

from tqsdk import TqAccount, TqApi, TqAuth

from bourse_rest import (ORDER_FIELDS, SYMBOL, Rest, check, describe, log_in, run,
                         wait_until)

ACCOUNT = "alice"
PASSWORD = "alice-demo-password"
BROKER = "Bourse"
TAKE_PRICE = 75050  # above the demo maker's five asks (2 lots at 75,010, 75,020, ...): takes the best
RUN = int(time.time())  # in REST client order ids
TICK_FIELDS = ("id", "datetime", "last_price", "average", "highest", "lowest", "bid_price1",
               "bid_volume1", "ask_price1", "ask_volume1", "volume", "amount", "open_interest")
QUOTE_FIELDS = ("last_price", "volume", "amount", "average", "highest", "lowest", "open_interest",
                "pre_open_interest", "pre_settlement", "bid_price1", "ask_price1")


def main():
    bob = Rest("bob")
    check(bob.order("buy", TAKE_PRICE, 1, "open", f"tq-md-before-{RUN}")["status"] == "filled",
          "bob buys 1 lot over REST before anyone subscribes")
    api = log_in(ACCOUNT, lambda: TqApi(
        TqAccount(BROKER, ACCOUNT, PASSWORD),
        auth=TqAuth(ACCOUNT, PASSWORD),
        debug=os.environ.get("TQSDK_DEBUG_LOG"),
    ), os.environ.get("TQSDK_DEBUG_LOG"))
    try:
        read_market_data(api, bob)
    finally:
        api.close()
    print("PASSED: tqsdk_market_data.py", flush=True)


def valid_ticks(ticks):
    """The rows of a tick serial that hold ticks (tqsdk fills the rest with NaN)."""
    return ticks[ticks["id"] >= 0]


def show_ticks(ticks):
    return "\n" + valid_ticks(ticks)[list(TICK_FIELDS)].to_string()


def read_market_data(api, bob):
    quote = api.get_quote(SYMBOL)
    wait_until(api, lambda: quote.volume == 1 and quote.open_interest == 1,
               "the quote shows bob's trade: volume 1, open interest 1",
               show=lambda: describe(quote, QUOTE_FIELDS))
    check(quote.pre_open_interest == 0,
          f"quote.pre_open_interest is 0 before any settlement (got {quote.pre_open_interest!r})")

    for lots in range(2, 6):
        order = api.insert_order(SYMBOL, "BUY", "OPEN", 1, limit_price=TAKE_PRICE)
        wait_until(api, lambda: order.status == "FINISHED" and quote.volume == lots,
                   f"alice's BUY OPEN 1 fills and the quote's volume is {lots}",
                   show=lambda: describe(order, ORDER_FIELDS) + "; quote " + describe(quote, QUOTE_FIELDS))
        check(order.volume_left == 0, f"the order filled (got {describe(order, ORDER_FIELDS)})")
    wait_until(api, lambda: quote.open_interest == 5, "the quote's open interest is 5",
               show=lambda: describe(quote, QUOTE_FIELDS))
    print(f"quote: {describe(quote, QUOTE_FIELDS)}", flush=True)

    ticks = api.get_tick_serial(SYMBOL, data_length=20)
    wait_until(api, lambda: len(valid_ticks(ticks)) == 5,
               "get_tick_serial(SYMBOL, data_length=20) holds the five trades",
               seconds=10, show=lambda: show_ticks(ticks))
    print(f"ticks:{show_ticks(ticks)}", flush=True)
    check(len(ticks) == 20, f"the serial has data_length rows (got {len(ticks)})")
    held = valid_ticks(ticks)
    ids, volumes = [int(value) for value in held["id"]], [int(value) for value in held["volume"]]
    check(ids == [0, 1, 2, 3, 4], f"consecutive tick ids 0..4 (got {ids})")
    check(volumes == [1, 2, 3, 4, 5], f"each tick's volume is the day's cumulative volume (got {volumes})")
    amounts = list(held["amount"])
    check(all(later > earlier for earlier, later in zip(amounts, amounts[1:])),
          f"the day's turnover grows with each trade (got {amounts})")
    for field in ("last_price", "average", "highest", "lowest", "bid_price1", "ask_price1", "amount"):
        check(not any(math.isnan(value) for value in held[field]), f"every tick has {field}")
    check(all(held["bid_price1"] < held["ask_price1"]) and all(held["bid_volume1"] > 0)
          and all(held["ask_volume1"] > 0), "every tick has the book's best bid under its best ask")
    interest = [int(value) for value in held["open_interest"]]
    check(interest == [1, 2, 3, 4, 5], f"each tick's open interest is the contract's after it (got {interest})")
    last = ticks.iloc[-1]
    for field in ("last_price", "volume", "amount", "average", "highest", "lowest", "open_interest",
                  "bid_price1", "ask_price1"):
        check(last[field] == quote[field],
              f"the last tick's {field} is the quote's (tick {float(last[field])!r}, quote {quote[field]!r})")
    check(quote.amount == 5 * (75010 * 2 + 75020 * 2 + 75030),
          f"the day's turnover counts the multiplier 5 (got {quote.amount!r})")

    check(bob.order("buy", TAKE_PRICE, 1, "open", f"tq-md-live-{RUN}")["status"] == "filled",
          "bob buys 1 more lot over REST")
    wait_until(api, lambda: ticks.iloc[-1]["id"] == 5 and ticks.iloc[-1]["volume"] == 6,
               "the sixth trade comes live as tick 6, id 5, volume 6", seconds=10,
               show=lambda: show_ticks(ticks))
    check(list(valid_ticks(ticks)["id"]) == list(range(6)), "the ticks stay consecutive")

    admin = Rest("admin")
    settled = admin.ok("POST", f"/v1/admin/futures/{SYMBOL}/settle", {"price": "75000"})
    print(f"REST: the operator settles {SYMBOL}: {settled}", flush=True)
    wait_until(api, lambda: quote.pre_settlement == 75000 and quote.volume == 0,
               "a new trading day: pre_settlement 75,000, volume 0",
               show=lambda: describe(quote, QUOTE_FIELDS))
    check(quote.pre_open_interest == 6 and quote.open_interest == 6,
          f"quote.pre_open_interest is the open interest at the settlement, 6 "
          f"(got {quote.pre_open_interest!r}, open interest {quote.open_interest!r})")
    check(bob.order("buy", TAKE_PRICE, 1, "open", f"tq-md-next-day-{RUN}")["status"] == "filled",
          "bob buys 1 lot on the new day")
    wait_until(api, lambda: ticks.iloc[-1]["id"] == 6, "the new day's first tick", seconds=10,
               show=lambda: show_ticks(ticks))
    last = ticks.iloc[-1]
    check((last["volume"], last["open_interest"]) == (1, 7) and quote.pre_open_interest == 6,
          f"the new day's tick counts the day's volume (1) and the open interest 7; "
          f"pre_open_interest stays 6 (got {float(last['volume'])!r}, {float(last['open_interest'])!r}, "
          f"{quote.pre_open_interest!r})")


if __name__ == "__main__":
    run(main)
