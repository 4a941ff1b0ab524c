"""What the tqsdk scripts need besides tqsdk: Bourse's REST API (signed as docs/api.md
says), the comparisons of tqsdk's account and position objects with Bourse's own view,
waiting with a deadline, and failing with a clear message.

The environment (set by tests/tqsdk_interop.rs): BOURSE_URL (http://host:port), and
BOURSE_<ACCOUNT>_KEY / BOURSE_<ACCOUNT>_SECRET for each account a script signs as."""

import hashlib
import hmac
import json
import math
import os
import sys
import time
import traceback
import urllib.error
import urllib.request
from decimal import Decimal

SYMBOL = "SHFE.cu2501"

# QIFI account fields that tqsdk's Account and Bourse's GET /v1/account both have.
ACCOUNT_FIELDS = (
    "balance", "margin", "available", "static_balance", "pre_balance", "deposit", "withdraw",
    "close_profit", "commission", "position_profit", "float_profit", "frozen_margin",
    "frozen_commission", "risk_ratio",
)
# Position fields that tqsdk's Position and Bourse's GET /v1/positions both have.
POSITION_VOLUMES = (
    "volume_long_today", "volume_long_his", "volume_long", "volume_long_frozen_today",
    "volume_long_frozen_his", "volume_long_frozen", "volume_short_today", "volume_short_his",
    "volume_short", "volume_short_frozen_today", "volume_short_frozen_his", "volume_short_frozen",
)
POSITION_AMOUNTS = (
    "open_price_long", "open_price_short", "position_price_long", "position_price_short",
    "open_cost_long", "open_cost_short", "position_cost_long", "position_cost_short",
    "float_profit_long", "float_profit_short", "float_profit", "position_profit_long",
    "position_profit_short", "position_profit", "margin_long", "margin_short", "margin",
)


class Mismatch(Exception):
    """What tqsdk showed differs from what it should (or from Bourse's REST view)."""


def check(condition, what):
    """Passes and prints `ok: what`, or fails the script with `what`."""
    if not condition:
        raise Mismatch(what)
    print(f"ok: {what}", flush=True)


class Rest:
    """One account's (or the admin's) signed REST client."""

    _last_timestamp = 0

    def __init__(self, account):
        self.account = account
        self.url = os.environ["BOURSE_URL"].rstrip("/")
        prefix = f"BOURSE_{account.upper()}_"
        self.key = os.environ[prefix + "KEY"]
        self.secret = os.environ[prefix + "SECRET"]

    def request(self, method, path, body=None):
        text = "" if body is None else json.dumps(body, separators=(",", ":"))
        # Each signature is accepted once: make timestamps increase within the process.
        now = int(time.time() * 1000)
        timestamp = max(now, Rest._last_timestamp + 1)
        Rest._last_timestamp = timestamp
        message = f"{timestamp}\n{method}\n{path}\n{text}".encode()
        signature = hmac.new(self.secret.encode(), message, hashlib.sha256).hexdigest()
        request = urllib.request.Request(
            self.url + path,
            data=text.encode() if body is not None else None,
            method=method,
            headers={
                "Content-Type": "application/json",
                "X-Bourse-Key": self.key,
                "X-Bourse-Timestamp": str(timestamp),
                "X-Bourse-Signature": signature,
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def ok(self, method, path, body=None):
        status, answer = self.request(method, path, body)
        if status == 401 and isinstance(answer, dict) and answer.get("code") == "replayed_request":
            # Another process signed the same request in the same millisecond: sign anew.
            status, answer = self.request(method, path, body)
        if status not in (200, 201):
            raise Mismatch(f"REST {method} {path} {body or ''} as {self.account}: {status} {answer}")
        return answer

    def order(self, side, price, qty, offset, client_order_id):
        """Places a GTC limit order on SYMBOL and returns Bourse's answer."""
        answer = self.ok("POST", "/v1/orders", {
            "symbol": SYMBOL, "side": side, "type": "limit", "price": str(price),
            "qty": str(qty), "offset": offset, "client_order_id": client_order_id,
        })
        order = answer["order"]
        print(f"REST: {self.account} {side} {qty} {SYMBOL} @ {price} ({offset}): "
              f"order {order['order_id']} {order['status']}", flush=True)
        return order

    def account_view(self, asset="CNY"):
        return self.ok("GET", "/v1/account")["accounts"][asset]

    def positions(self):
        return self.ok("GET", "/v1/positions")["positions"]


def public_get(path):
    with urllib.request.urlopen(os.environ["BOURSE_URL"].rstrip("/") + path, timeout=10) as response:
        return json.loads(response.read())


def _same(tq_value, rest_value, places):
    """tqsdk's float (NaN for "none") against Bourse's decimal string (None for "none"),
    equal when both round to the same `places` decimals."""
    if rest_value is None:
        return tq_value is None or (isinstance(tq_value, float) and math.isnan(tq_value))
    if tq_value is None or (isinstance(tq_value, float) and math.isnan(tq_value)):
        return False
    if isinstance(tq_value, str):
        return False  # a string where tqsdk wants a number: tqsdk would have made it NaN
    quantum = Decimal(1).scaleb(-places)
    return Decimal(repr(tq_value)).quantize(quantum) == Decimal(rest_value).quantize(quantum)


def account_mismatches(tq_account, rest_account):
    """Fields where tqsdk's Account differs from GET /v1/account (to the cent; the risk
    ratio to 6 places)."""
    wrong = []
    for field in ACCOUNT_FIELDS:
        places = 6 if field == "risk_ratio" else 2
        if not _same(tq_account.get(field), rest_account.get(field), places):
            wrong.append(f"{field}: tqsdk {tq_account.get(field)!r}, REST {rest_account.get(field)!r}")
    return wrong


def position_mismatches(tq_position, rest_position):
    """Fields where tqsdk's Position differs from GET /v1/positions (None: Bourse shows no
    position, so every volume must be 0)."""
    wrong = []
    for field in POSITION_VOLUMES:
        expected = 0 if rest_position is None else int(Decimal(rest_position[field]))
        if tq_position.get(field) != expected:
            wrong.append(f"{field}: tqsdk {tq_position.get(field)!r}, REST {expected}")
    if rest_position is not None:
        for field in POSITION_AMOUNTS:
            places = 4 if "price" in field else 2
            if not _same(tq_position.get(field), rest_position.get(field), places):
                wrong.append(f"{field}: tqsdk {tq_position.get(field)!r}, REST {rest_position.get(field)!r}")
    return wrong


def wait_until(apis, condition, what, seconds=30, show=None):
    """Runs the apis' wait_update until condition() holds; fails after `seconds`, with
    what show() returns (the state tqsdk has) in the message."""
    apis = apis if isinstance(apis, list) else [apis]
    deadline = time.time() + seconds
    while not condition():
        if time.time() > deadline:
            state = f"; tqsdk has {show()}" if show else ""
            raise Mismatch(f"timed out after {seconds} s waiting for {what}{state}")
        for api in apis:
            api.wait_update(deadline=time.time() + (0.5 if len(apis) == 1 else 0.1))
    print(f"ok: {what}", flush=True)


def settle_and_compare(apis, what, pairs, seconds=10):
    """Waits (up to `seconds`) until every (tqsdk object, REST reader, comparer) in
    `pairs` agrees with Bourse's REST view, and fails with the differences if they never
    do. The REST view is read again each round: both sides converge on the same state
    once the last order has been answered."""
    deadline = time.time() + seconds
    apis = apis if isinstance(apis, list) else [apis]
    while True:
        wrong = []
        for tq_object, read_rest, compare in pairs:
            wrong.extend(compare(tq_object, read_rest()))
        if not wrong:
            print(f"ok: {what}", flush=True)
            return
        if time.time() > deadline:
            raise Mismatch(f"{what}: tqsdk and Bourse's REST differ after {seconds} s:\n  " + "\n  ".join(wrong))
        for api in apis:
            api.wait_update(deadline=time.time() + 0.3)


def describe(obj, fields):
    return ", ".join(f"{field}={obj.get(field)!r}" for field in fields)


ORDER_FIELDS = (
    "order_id", "exchange_order_id", "status", "direction", "offset", "volume_orign",
    "volume_left", "limit_price", "last_msg", "is_online", "is_error", "trade_price",
)
TRADE_FIELDS = (
    "trade_id", "exchange_trade_id", "order_id", "direction", "offset", "price", "volume",
    "trade_date_time",
)
POSITION_SUMMARY = (
    "pos_long_today", "pos_long_his", "pos_short_today", "pos_short_his", "pos_long",
    "pos_short", "pos", "volume_long_today", "volume_short_today",
)


def endpoints():
    """The endpoints tqsdk takes from the environment (as any tqsdk user points it at
    another server)."""
    return ", ".join(f"{name}={os.environ.get(name)}" for name in ("TQ_AUTH_URL", "TQ_MD_URL", "TQ_TD_URL"))


def log_in(who, make_api, debug_log=None):
    """make_api() (a TqApi constructor call), with a clear failure when tqsdk cannot log
    in or never receives its first complete snapshot: what it was doing, and why its
    connections closed (from its log of packs, `debug_log`, when there is one)."""
    started = time.time()
    try:
        api = make_api()
    except Exception as error:
        auth = os.environ.get("TQ_AUTH_URL", "https://auth.shinnytech.com")
        raise Mismatch(
            f"tqsdk could not log in as {who} after {time.time() - started:.1f} s: {type(error).__name__}: {error}\n"
            f"  (tqsdk asks {auth}/auth/realms/shinnytech/protocol/openid-connect/token for a token, then opens "
            f"TQ_MD_URL={os.environ.get('TQ_MD_URL')} and TQ_TD_URL={os.environ.get('TQ_TD_URL')}, sends req_login "
            f"on the latter and waits 60 s for mdhis_more_data false and trade.{who}.trade_more_data false)"
            + closed_connections(debug_log)) from None
    print(f"ok: {who} logged in with tqsdk in {time.time() - started:.1f} s", flush=True)
    return api


def closed_connections(debug_log):
    """Why tqsdk's websocket connections closed, from its log of packs."""
    if not debug_log or not os.path.exists(debug_log):
        return ""
    reasons = {}
    with open(debug_log, encoding="utf-8") as log:
        for line in log:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("msg") == "websocket connection closed":
                key = (entry.get("conn_id"), entry.get("url"), entry.get("error"))
                reasons[key] = reasons.get(key, 0) + 1
    return "".join(f"\n  tqsdk's connection {conn} to {url} closed ({count}x): {error}"
                   for (conn, url, error), count in reasons.items())


def run(main):
    """Runs main(); exits 1 on a mismatch, 2 on any other error, each with a message."""
    try:
        main()
    except Mismatch as error:
        print(f"FAILED: {error}", file=sys.stderr, flush=True)
        sys.exit(1)
    except Exception:
        traceback.print_exc()
        print("FAILED: an unexpected error (above)", file=sys.stderr, flush=True)
        sys.exit(2)
