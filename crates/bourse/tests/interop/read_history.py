"""Reads Bourse's history files with independent readers (pyarrow and DuckDB) and
prints, as one JSON object, the figures history_interop.rs compares with Bourse's own
answers: rows per table, trade quantity and notional per symbol, net ledger change
per asset, distinct finished orders. Decimals are printed exactly, without trailing
zeros."""

import json
import sys
from decimal import Decimal

import duckdb
import pyarrow.compute as pc
import pyarrow.dataset as ds

TABLES = ["order_events", "orders", "trades", "ledger", "candles"]


def text(value):
    if value is None:
        return "0"
    normal = format(Decimal(value).normalize(), "f")
    if "." in normal:
        normal = normal.rstrip("0").rstrip(".")
    return "0" if normal in ("-0", "") else normal


def with_pyarrow(root):
    figures = {"rows": {}}
    for table in TABLES:
        dataset = ds.dataset(f"{root}/{table}", format="parquet", partitioning="hive")
        figures["rows"][table] = dataset.count_rows()
    trades = ds.dataset(f"{root}/trades", format="parquet", partitioning="hive").to_table()
    per_symbol = trades.group_by("symbol").aggregate([("qty", "sum"), ("notional", "sum")])
    figures["trades"] = {
        row["symbol"]: [text(row["qty_sum"]), text(row["notional_sum"])]
        for row in per_symbol.to_pylist()
    }
    ledger = ds.dataset(f"{root}/ledger", format="parquet", partitioning="hive").to_table()
    # Summed column by column: adding DECIMAL(38, 18) columns would need 39 digits.
    per_asset = ledger.group_by("asset").aggregate(
        [("available_delta", "sum"), ("held_delta", "sum"), ("fee", "sum")]
    )
    figures["ledger"] = {
        row["asset"]: text(
            Decimal(row["available_delta_sum"]) + Decimal(row["held_delta_sum"]) + Decimal(row["fee_sum"])
        )
        for row in per_asset.to_pylist()
    }
    orders = ds.dataset(f"{root}/orders", format="parquet", partitioning="hive").to_table()
    figures["finished_orders"] = len(pc.unique(orders["order_id"]))
    return figures


def with_duckdb(root):
    connection = duckdb.connect()
    figures = {"rows": {}}

    def scan(table):
        return f"read_parquet('{root}/{table}/**/*.parquet', hive_partitioning = true)"

    for table in TABLES:
        figures["rows"][table] = connection.execute(f"SELECT count(*) FROM {scan(table)}").fetchone()[0]
    rows = connection.execute(
        f"SELECT symbol, sum(qty), sum(notional) FROM {scan('trades')} GROUP BY symbol"
    ).fetchall()
    figures["trades"] = {symbol: [text(qty), text(notional)] for symbol, qty, notional in rows}
    rows = connection.execute(
        f"SELECT asset, sum(available_delta + held_delta + fee) FROM {scan('ledger')} GROUP BY asset"
    ).fetchall()
    figures["ledger"] = {asset: text(net) for asset, net in rows}
    figures["finished_orders"] = connection.execute(
        f"SELECT count(DISTINCT order_id) FROM {scan('orders')}"
    ).fetchone()[0]
    return figures


if __name__ == "__main__":
    root = sys.argv[1]
    print(json.dumps({"pyarrow": with_pyarrow(root), "duckdb": with_duckdb(root)}, sort_keys=True))
