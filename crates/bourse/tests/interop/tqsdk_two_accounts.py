"""Two tqsdk users trading with each other on a self-hosted Bourse (`bourse serve --demo`)
through its DIFF gateway: bob and alice each log in with their own TqApi (each their own
TqAuth and TqAccount, as two people would), bob rests a sell of SHFE.cu2501, alice buys
it; both see the trade (api.get_trade(), order.trade_records) and their positions (alice
long 1 today, bob short 1 today); then alice rests a CLOSETODAY sell and bob's CLOSETODAY
buy takes it, and both are flat. After each step both accounts and positions must equal
Bourse's REST view (GET /v1/account, /v1/positions) to the cent. Run by
tests/tqsdk_interop.rs.

The environment: TQ_AUTH_URL, TQ_MD_URL, TQ_TD_URL (tqsdk's own variables), BOURSE_URL
and the REST keys BOURSE_{ALICE,BOB}_{KEY,SECRET}; TQSDK_DEBUG_LOG, if set, is where
tqsdk logs every pack (both TqApi's)."""

import os

from tqsdk import TqAccount, TqApi, TqAuth

from bourse_rest import (ORDER_FIELDS, POSITION_SUMMARY, SYMBOL, TRADE_FIELDS, Rest,
                         account_mismatches, check, describe, log_in, position_mismatches,
                         public_get, run, settle_and_compare, wait_until)

BROKER = "Bourse"
USERS = {"alice": "alice-demo-password", "bob": "bob-demo-password"}
PRICE = 75000  # between the demo maker's best bid (74,990) and best ask (75,010)


def main():
    print(f"tqsdk against Bourse: {os.environ.get('BOURSE_URL')} (tqsdk endpoints: "
          f"TQ_AUTH_URL={os.environ.get('TQ_AUTH_URL')}, TQ_MD_URL={os.environ.get('TQ_MD_URL')}, "
          f"TQ_TD_URL={os.environ.get('TQ_TD_URL')})", flush=True)
    debug = os.environ.get("TQSDK_DEBUG_LOG")
    apis = {}
    try:
        for user, password in USERS.items():
            # tqsdk's logger is one per process: both TqApi log to the first one's file.
            apis[user] = log_in(user, lambda: TqApi(
                TqAccount(BROKER, user, password),
                auth=TqAuth(user, password),
                debug=debug,
            ), debug)
        trade_with_each_other(apis["alice"], apis["bob"])
    finally:
        for api in apis.values():
            api.close()
    print("PASSED: tqsdk_two_accounts.py", flush=True)


def compare_with_rest(both, positions, what):
    pairs = []
    for user, api in both.items():
        rest = Rest(user)
        pairs.append((api.get_account(), rest.account_view, account_mismatches))
        pairs.append((positions[user], lambda rest=rest: rest.positions().get(SYMBOL), position_mismatches))
    settle_and_compare(list(both.values()), f"{what}: alice's and bob's tqsdk accounts and positions equal Bourse's REST view", pairs)
    for user, api in both.items():
        account = api.get_account()
        print(f"   {user}: balance={account.balance} margin={account.margin} available={account.available} "
              f"commission={account.commission}", flush=True)


def one_trade(order):
    trades = list(order.trade_records.values())
    return trades[0] if len(trades) == 1 else None


def trade_with_each_other(alice, bob):
    both = {"alice": alice, "bob": bob}
    for user in both:
        check(SYMBOL not in Rest(user).positions(), f"{user} starts with no position (a fresh demo)")
    apis = [alice, bob]
    quote = alice.get_quote(SYMBOL)
    check(quote.price_tick == 10 and quote.volume_multiple == 5,
          f"alice's quote: price_tick 10, volume_multiple 5 (got {quote.price_tick!r}, {quote.volume_multiple!r})")
    positions = {user: api.get_position(SYMBOL) for user, api in both.items()}

    # bob rests a sell; alice buys it.
    sell = bob.insert_order(SYMBOL, "SELL", "OPEN", 1, limit_price=PRICE)
    wait_until(apis, lambda: sell.exchange_order_id != "" or sell.status == "FINISHED",
               f"Bourse answers bob's SELL OPEN 1 @ {PRICE}", show=lambda: describe(sell, ORDER_FIELDS))
    check(sell.status == "ALIVE" and sell.volume_left == 1,
          f"bob's sell rests: ALIVE, nothing filled (got {describe(sell, ('status', 'volume_left', 'last_msg'))})")
    ask = public_get(f"/v1/depth/{SYMBOL}?levels=1")["asks"][0]
    check(ask[:2] == [str(PRICE), "1"], f"REST's depth: the best ask is bob's 1 @ {PRICE} (got {ask})")
    wait_until(apis, lambda: quote.ask_price1 == PRICE and quote.ask_volume1 == 1,
               f"alice's quote shows bob's sell as the best ask, 1 @ {PRICE}", seconds=10,
               show=lambda: describe(quote, ("ask_price1", "ask_volume1")))

    buy = alice.insert_order(SYMBOL, "BUY", "OPEN", 1, limit_price=PRICE)
    wait_until(apis, lambda: buy.status == "FINISHED" and sell.status == "FINISHED",
               "alice's buy and bob's sell are both FINISHED",
               show=lambda: f"alice's {describe(buy, ORDER_FIELDS)}; bob's {describe(sell, ORDER_FIELDS)}")
    check(buy.volume_left == 0 and sell.volume_left == 0 and not buy.is_error and not sell.is_error,
          "both orders filled completely")
    wait_until(apis, lambda: one_trade(buy) is not None and one_trade(sell) is not None,
               "alice and bob each see one trade of their order",
               show=lambda: f"alice {len(buy.trade_records)} trades, bob {len(sell.trade_records)} trades")
    alice_fill, bob_fill = one_trade(buy), one_trade(sell)
    print(f"alice's trade: {describe(alice_fill, TRADE_FIELDS)}", flush=True)
    print(f"bob's trade:   {describe(bob_fill, TRADE_FIELDS)}", flush=True)
    check((alice_fill.direction, alice_fill.offset, alice_fill.volume, alice_fill.price) == ("BUY", "OPEN", 1, PRICE),
          "alice's trade: BUY OPEN 1 at the price")
    check((bob_fill.direction, bob_fill.offset, bob_fill.volume, bob_fill.price) == ("SELL", "OPEN", 1, PRICE),
          "bob's trade: SELL OPEN 1 at the price")
    check(alice_fill.trade_id in alice.get_trade() and bob_fill.trade_id in bob.get_trade(),
          "each api.get_trade() has its side of the trade")
    if alice_fill.exchange_trade_id and bob_fill.exchange_trade_id:
        check(alice_fill.exchange_trade_id == bob_fill.exchange_trade_id,
              f"both sides carry the same exchange_trade_id ({alice_fill.exchange_trade_id!r})")

    wait_until(apis, lambda: positions["alice"].volume_long_today == 1 and positions["bob"].volume_short_today == 1,
               "alice is long 1 today, bob short 1 today",
               show=lambda: f"alice {describe(positions['alice'], POSITION_SUMMARY)}; bob {describe(positions['bob'], POSITION_SUMMARY)}")
    check((positions["alice"].pos_long_today, positions["alice"].pos, positions["alice"].volume_short) == (1, 1, 0),
          f"alice: pos_long_today 1, pos 1, nothing short (got {describe(positions['alice'], POSITION_SUMMARY)})")
    check((positions["bob"].pos_short_today, positions["bob"].pos, positions["bob"].volume_long) == (1, -1, 0),
          f"bob: pos_short_today 1, pos -1, nothing long (got {describe(positions['bob'], POSITION_SUMMARY)})")
    compare_with_rest(both, positions, "after the trade")
    check(alice.get_account().commission == 3 and bob.get_account().commission == 1.5,
          f"alice paid the taker fee (3), bob the maker fee (1.5) (got {alice.get_account().commission!r}, {bob.get_account().commission!r})")

    # Both close today's positions with each other: alice rests, bob takes.
    close_sell = alice.insert_order(SYMBOL, "SELL", "CLOSETODAY", 1, limit_price=PRICE)
    wait_until(apis, lambda: close_sell.exchange_order_id != "" or close_sell.status == "FINISHED",
               f"Bourse answers alice's SELL CLOSETODAY 1 @ {PRICE}", show=lambda: describe(close_sell, ORDER_FIELDS))
    check(close_sell.status == "ALIVE", f"alice's close rests (got {describe(close_sell, ('status', 'last_msg'))})")
    wait_until(apis, lambda: positions["alice"].volume_long_frozen_today == 1,
               "alice's resting close freezes her long position (volume_long_frozen_today 1)",
               show=lambda: describe(positions["alice"], ("volume_long_frozen_today", "volume_long_frozen")))
    close_buy = bob.insert_order(SYMBOL, "BUY", "CLOSETODAY", 1, limit_price=PRICE)
    wait_until(apis, lambda: close_buy.status == "FINISHED" and close_sell.status == "FINISHED",
               "bob's CLOSETODAY buy and alice's CLOSETODAY sell are both FINISHED",
               show=lambda: f"bob's {describe(close_buy, ORDER_FIELDS)}; alice's {describe(close_sell, ORDER_FIELDS)}")
    check(close_buy.volume_left == 0 and close_sell.volume_left == 0, "both closes filled completely")
    wait_until(apis, lambda: positions["alice"].pos == 0 and positions["bob"].pos == 0
               and positions["alice"].volume_long == 0 and positions["bob"].volume_short == 0,
               "alice and bob are both flat",
               show=lambda: f"alice {describe(positions['alice'], POSITION_SUMMARY)}; bob {describe(positions['bob'], POSITION_SUMMARY)}")
    check(len(alice.get_trade()) == 2 and len(bob.get_trade()) == 2, "each account has two trades")
    compare_with_rest(both, positions, "after closing")
    check(alice.get_account().margin == 0 and bob.get_account().margin == 0, "no margin left on either side")


if __name__ == "__main__":
    run(main)
