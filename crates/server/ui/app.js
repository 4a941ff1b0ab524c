// Bourse's trading screen: a client of the REST and WebSocket APIs like any other
// (docs/api.md, docs/websocket.md). Every request is signed in the browser with the
// key and secret the user gave (kept in this tab's session storage only). Numbers are
// shown as the decimal strings the server sends; the chart alone converts them, to
// draw. Nothing is computed here that the server does not say.

const $ = (id) => document.getElementById(id);
const text = (value) => (value === null || value === undefined ? "" : String(value));

// A table row of cells showing `values` as text.
function tableRow(values) {
  const row = document.createElement("tr");
  for (const value of values) {
    const cell = document.createElement("td");
    cell.textContent = text(value);
    row.append(cell);
  }
  return row;
}

// ---- Signing (docs/api.md, "Signing") ----------------------------------------------

const encoder = new TextEncoder();
let lastTimestamp = 0;

async function hmacHex(secret, message) {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const signature = await crypto.subtle.sign("HMAC", key, encoder.encode(message));
  return [...new Uint8Array(signature)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

// A timestamp later than every one this tab used: a signature is accepted once.
function timestamp() {
  lastTimestamp = Math.max(Date.now(), lastTimestamp + 1);
  return String(lastTimestamp);
}

function credentials() {
  const key = sessionStorage.getItem("bourse.key");
  const secret = sessionStorage.getItem("bourse.secret");
  return key && secret ? { key, secret } : null;
}

class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? `${body.code}: ${body.message}` : `HTTP ${status}`);
    this.status = status;
    this.code = body && body.code;
  }
}

async function api(method, path, body) {
  const bodyText = body === undefined ? "" : JSON.stringify(body);
  const headers = { "Content-Type": "application/json" };
  const creds = credentials();
  if (creds) {
    const ts = timestamp();
    headers["X-Bourse-Key"] = creds.key;
    headers["X-Bourse-Timestamp"] = ts;
    headers["X-Bourse-Signature"] = await hmacHex(creds.secret, `${ts}\n${method}\n${path}\n${bodyText}`);
  }
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : bodyText });
  const answer = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, answer);
  return answer;
}

// ---- State ---------------------------------------------------------------------------

const state = {
  instruments: [],
  symbol: null,
  book: { bids: new Map(), asks: new Map(), seq: 0, synced: false },
  openOrders: new Map(),
  socket: null,
  reconnectDelay: 500,
  chart: null,
  candles: null,
};

function instrument(symbol) {
  return state.instruments.find((item) => item.symbol === symbol);
}

// ---- Login ---------------------------------------------------------------------------

$("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("login-error").textContent = "";
  sessionStorage.setItem("bourse.key", $("login-key").value.trim());
  sessionStorage.setItem("bourse.secret", $("login-secret").value.trim());
  try {
    await startAs(await roleOf());
  } catch (error) {
    sessionStorage.clear();
    $("login-error").textContent = error.code === "invalid_key" || error.code === "invalid_signature"
      ? "That key and secret are not accepted: check both (the key starts with bk_)."
      : `Could not log in: ${error.message}`;
    $("login-key").focus();
  }
});

$("logout").addEventListener("click", () => {
  sessionStorage.clear();
  location.reload();
});

// An operator's key opens the console, an account's key the trading screen.
async function roleOf() {
  try {
    await api("GET", "/v1/balances");
    return "trader";
  } catch (error) {
    if (error.code !== "forbidden") throw error;
    await api("GET", "/v1/admin/accounts");
    return "operator";
  }
}

async function startAs(role) {
  sessionStorage.setItem("bourse.role", role);
  return role === "operator" ? startConsole() : start();
}

// ---- The operator console ----------------------------------------------------------------

async function startConsole() {
  $("who").textContent = "Operator";
  $("logout").hidden = false;
  $("login").hidden = true;
  $("console").hidden = false;
  await renderConsoleInstruments();
  await renderHealth();
  setInterval(renderHealth, 2000);
}

async function renderConsoleInstruments() {
  const instruments = (await api("GET", "/v1/instruments")).instruments;
  const rows = instruments.map((item) => {
    const row = tableRow([item.symbol, item.kind, item.tick, item.lot, item.halted ? "halted" : "trading"]);
    const actions = document.createElement("td");
    const button = document.createElement("button");
    button.type = "button";
    const action = item.halted ? "resume" : "halt";
    button.textContent = item.halted ? "Resume" : "Halt";
    button.setAttribute("aria-label", `${button.textContent} ${item.symbol}`);
    button.addEventListener("click", async () => {
      $("instruments-error").textContent = "";
      try {
        await api("POST", `/v1/admin/instruments/${encodeURIComponent(item.symbol)}/${action}`);
        await renderConsoleInstruments();
      } catch (error) {
        $("instruments-error").textContent = `${button.textContent} ${item.symbol}: ${error.message}`;
      }
    });
    actions.append(button);
    row.append(actions);
    return row;
  });
  $("console-instruments").replaceChildren(...rows);
}

// A few of the engine's figures, read from the Prometheus text (names as they are).
const HEALTH = ["bourse_commands_total", "bourse_trades_total", "bourse_journal_batches_total", "bourse_intake_queue_commands", "bourse_connections", "bourse_history_committed_seq", "bourse_applied_seq"];

async function renderHealth() {
  const response = await fetch("/metrics");
  const lines = (await response.text()).split("\n");
  const rows = HEALTH.map((name) => {
    const values = lines.filter((line) => line.startsWith(name + " ") || line.startsWith(name + "{"));
    const total = values.reduce((sum, line) => sum + Number(line.split(" ").pop()), 0);
    const row = document.createElement("tr");
    const label = document.createElement("th");
    label.scope = "row";
    label.textContent = name.replace("bourse_", "").replaceAll("_", " ");
    const value = document.createElement("td");
    value.textContent = values.length ? String(total) : "—";
    row.append(label, value);
    return row;
  });
  $("health").replaceChildren(...rows);
}

$("sql-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("sql-error").textContent = "";
  try {
    const answer = await api("POST", "/v1/admin/sql", { sql: $("sql-text").value, format: "json" });
    const rows = Array.isArray(answer) ? answer : answer.rows || [];
    const columns = answer.columns || (rows[0] ? Object.keys(rows[0]) : []);
    const table = document.createElement("table");
    const head = table.createTHead().insertRow();
    for (const column of columns) {
      const cell = document.createElement("th");
      cell.scope = "col";
      cell.textContent = typeof column === "string" ? column : column.name;
      head.append(cell);
    }
    const body = table.createTBody();
    for (const row of rows) {
      const line = body.insertRow();
      const values = Array.isArray(row) ? row : columns.map((column) => row[typeof column === "string" ? column : column.name]);
      for (const value of values) line.insertCell().textContent = text(value);
    }
    $("sql-result").replaceChildren(table);
  } catch (error) {
    $("sql-error").textContent = error.message;
  }
});

// ---- The screen ------------------------------------------------------------------------

async function start() {
  const balances = await api("GET", "/v1/balances");
  $("who").textContent = `Logged in as ${balances.account}`;
  $("logout").hidden = false;
  $("login").hidden = true;
  $("trading").hidden = false;
  renderBalances(balances.balances);
  state.instruments = (await api("GET", "/v1/instruments")).instruments;
  renderMarkets();
  await loadOpenOrders();
  await loadFills();
  selectMarket(state.instruments[0] && state.instruments[0].symbol);
  connect();
}

function renderMarkets() {
  const nav = $("markets");
  nav.replaceChildren();
  for (const item of state.instruments) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = item.halted ? `${item.symbol} (halted)` : item.symbol;
    button.dataset.symbol = item.symbol;
    button.setAttribute("aria-pressed", String(item.symbol === state.symbol));
    button.addEventListener("click", () => selectMarket(item.symbol));
    nav.append(button);
  }
}

function selectMarket(symbol) {
  if (!symbol) return;
  const previous = state.symbol;
  state.symbol = symbol;
  for (const button of $("markets").children) button.setAttribute("aria-pressed", String(button.dataset.symbol === symbol));
  const item = instrument(symbol);
  $("offset-field").hidden = !(item && item.kind === "future");
  $("futures-panel").hidden = !state.instruments.some((entry) => entry.kind === "future");
  $("place").disabled = Boolean(item && item.halted);
  $("ticket-error").textContent = item && item.halted ? `${symbol} is halted: orders are refused until it resumes.` : "";
  $("trades").replaceChildren();
  resetBook();
  loadChart(symbol);
  if (state.socket && state.socket.readyState === WebSocket.OPEN) {
    if (previous) for (const channel of ["depth", "trades", "ticker", "candles"]) send({ op: "unsubscribe", channel, symbol: previous });
    subscribeMarket();
  }
}

// ---- WebSocket: the book, trades, the ticker; the account's orders, fills, balances --

function send(message) {
  if (state.socket && state.socket.readyState === WebSocket.OPEN) state.socket.send(JSON.stringify(message));
}

function connect() {
  const socket = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/v1/ws`);
  state.socket = socket;
  socket.addEventListener("open", async () => {
    state.reconnectDelay = 500;
    const creds = credentials();
    const ts = timestamp();
    send({ op: "login", key: creds.key, timestamp: ts, signature: await hmacHex(creds.secret, `${ts}\nGET\n/v1/ws\n`) });
    subscribeMarket();
  });
  socket.addEventListener("message", (event) => onMessage(JSON.parse(event.data)));
  socket.addEventListener("close", () => {
    // Nothing stale after a reconnect: the book is rebuilt from a new snapshot.
    resetBook("reconnecting");
    setTimeout(connect, state.reconnectDelay);
    state.reconnectDelay = Math.min(state.reconnectDelay * 2, 10_000);
  });
}

function subscribeMarket() {
  for (const channel of ["depth", "trades", "ticker"]) send({ op: "subscribe", channel, symbol: state.symbol });
  send({ op: "subscribe", channel: "candles", symbol: state.symbol, interval: "1m" });
}

async function onMessage(message) {
  if (message.type === "logged_in") {
    for (const channel of ["orders", "fills", "balances", "positions"]) send({ op: "subscribe", channel });
    loadOpenOrders();
    return;
  }
  if (message.type === "subscribed" || message.type === "unsubscribed" || message.type === "pong") return;
  if (message.type === "error") {
    if (message.code !== "unknown_channel") $("orders-error").textContent = `${message.code}: ${message.message}`;
    return;
  }
  switch (message.channel) {
    case "depth": return onDepth(message);
    case "trades": return onTrade(message);
    case "ticker": return onTicker(message);
    case "candles": return onCandle(message);
    case "orders": return onOrder(message.data);
    case "fills": return onFill(message.data);
    case "balances": return renderBalances(message.data);
    case "positions": return renderFutures(message.data);
  }
}

function resetBook(status = "") {
  state.book = { bids: new Map(), asks: new Map(), seq: 0, synced: false };
  $("book-state").textContent = status;
  renderBook();
}

function onDepth(message) {
  if (message.symbol && message.symbol !== state.symbol) return;
  const book = state.book;
  if (message.type === "snapshot") {
    book.bids = new Map(message.bids.map((level) => [level[0], level]));
    book.asks = new Map(message.asks.map((level) => [level[0], level]));
    book.seq = message.seq;
    book.synced = true;
    $("book-state").textContent = "";
  } else if (book.synced && message.seq === book.seq + 1) {
    for (const [side, levels] of [["bids", message.bids], ["asks", message.asks]]) {
      for (const level of levels || []) {
        if (Number(level[1]) === 0) book[side].delete(level[0]);
        else book[side].set(level[0], level);
      }
    }
    book.seq = message.seq;
  } else {
    // A gap: subscribe again for a new snapshot (docs/websocket.md, Channels).
    resetBook("resynchronising");
    send({ op: "unsubscribe", channel: "depth", symbol: state.symbol });
    send({ op: "subscribe", channel: "depth", symbol: state.symbol });
    return;
  }
  renderBook();
}

function levelRows(levels) {
  return levels.map(([price, qty, orders]) => tableRow([price, qty, orders]));
}

// Prices are compared as numbers only to sort the levels; they are shown as sent.
function renderBook() {
  const asks = [...state.book.asks.values()].sort((a, b) => Number(a[0]) - Number(b[0])).slice(0, 15).reverse();
  const bids = [...state.book.bids.values()].sort((a, b) => Number(b[0]) - Number(a[0])).slice(0, 15);
  $("asks").replaceChildren(...levelRows(asks));
  $("bids").replaceChildren(...levelRows(bids));
  const bestBid = bids[0] && bids[0][0];
  const bestAsk = asks.length ? asks[asks.length - 1][0] : undefined;
  $("spread-cell").textContent = bestBid && bestAsk ? `${bestBid} / ${bestAsk}` : "—";
}

function onTrade(message) {
  if (message.symbol && message.symbol !== state.symbol) return;
  const row = tableRow([message.data.price, message.data.qty, message.data.taker_side]);
  $("trades").prepend(row);
  while ($("trades").children.length > 30) $("trades").lastChild.remove();
}

function onTicker(message) {
  const data = message.data || {};
  $("ticker").textContent = data.last ? `last ${data.last} · 24 h volume ${data.volume_24h}` : "no trade in 24 h";
}

// ---- The chart --------------------------------------------------------------------------

async function loadChart(symbol) {
  if (!state.chart) {
    state.chart = LightweightCharts.createChart($("chart"), {
      autoSize: true,
      layout: { background: { color: "transparent" }, textColor: "#8b95a5", attributionLogo: false },
      grid: { vertLines: { color: "#222a35" }, horzLines: { color: "#222a35" } },
      timeScale: { timeVisible: true, secondsVisible: false },
    });
    state.candles = state.chart.addSeries(LightweightCharts.CandlestickSeries);
  }
  try {
    const answer = await api("GET", `/v1/candles/${encodeURIComponent(symbol)}?interval=1m&limit=200`);
    if (state.symbol === symbol) state.candles.setData(answer.candles.map(candlePoint));
  } catch (error) {
    state.candles.setData([]);
  }
}

function candlePoint(candle) {
  return { time: Math.floor(candle[0] / 1e9), open: Number(candle[1]), high: Number(candle[2]), low: Number(candle[3]), close: Number(candle[4]) };
}

function onCandle(message) {
  if (message.symbol && message.symbol !== state.symbol) return;
  if (message.data && state.candles) state.candles.update(candlePoint(message.data));
}

// ---- The order ticket -------------------------------------------------------------------

$("ticket").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  $("ticket-error").textContent = "";
  $("ticket-ok").textContent = "";
  const order = {
    symbol: state.symbol,
    side: form.get("side"),
    type: form.get("type"),
    qty: String(form.get("qty")).trim(),
    time_in_force: form.get("time_in_force"),
    post_only: form.get("post_only") === "on",
    client_order_id: `ui-${crypto.randomUUID()}`,
  };
  if (order.type === "limit") order.price = String(form.get("price")).trim();
  if (instrument(state.symbol) && instrument(state.symbol).kind === "future") order.offset = form.get("offset");
  $("place").disabled = true;
  try {
    const answer = await api("POST", "/v1/orders", order);
    $("ticket-ok").textContent = `Order ${answer.order.order_id}: ${answer.order.status}, filled ${answer.order.filled}`;
    onOrder(answer.order);
  } catch (error) {
    $("ticket-error").textContent = error.message;
  } finally {
    const item = instrument(state.symbol);
    $("place").disabled = Boolean(item && item.halted);
  }
});

// ---- Orders, fills, balances -----------------------------------------------------------

async function loadOpenOrders() {
  try {
    const answer = await api("GET", "/v1/orders?status=open");
    state.openOrders = new Map(answer.orders.map((order) => [order.order_id, order]));
    renderOpenOrders();
  } catch (error) {
    $("orders-error").textContent = error.message;
  }
}

function onOrder(order) {
  if (order.status === "open") state.openOrders.set(order.order_id, order);
  else state.openOrders.delete(order.order_id);
  renderOpenOrders();
}

function renderOpenOrders() {
  const rows = [...state.openOrders.values()].sort((a, b) => b.order_id - a.order_id).map((order) => {
    const row = tableRow([order.order_id, order.symbol, order.side, order.price, order.qty, order.filled]);
    const actions = document.createElement("td");
    const amend = document.createElement("button");
    amend.type = "button";
    amend.textContent = "Amend";
    amend.setAttribute("aria-label", `Amend order ${order.order_id}`);
    amend.addEventListener("click", () => amendOrder(order));
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.textContent = "Cancel";
    cancel.setAttribute("aria-label", `Cancel order ${order.order_id}`);
    cancel.addEventListener("click", () => cancelOrder(order));
    actions.append(amend, " ", cancel);
    row.append(actions);
    return row;
  });
  $("open-orders").replaceChildren(...rows);
}

async function cancelOrder(order) {
  $("orders-error").textContent = "";
  try {
    onOrder(await api("DELETE", `/v1/orders/${order.order_id}`));
  } catch (error) {
    $("orders-error").textContent = `Cancel of ${order.order_id}: ${error.message}`;
  }
}

async function amendOrder(order) {
  const price = prompt(`New price for order ${order.order_id}`, order.price || "");
  if (!price) return;
  $("orders-error").textContent = "";
  try {
    onOrder(await api("PATCH", `/v1/orders/${order.order_id}`, { price: price.trim() }));
  } catch (error) {
    $("orders-error").textContent = `Amend of ${order.order_id}: ${error.message}`;
  }
}

async function loadFills() {
  const answer = await api("GET", "/v1/fills?limit=30");
  $("fills").replaceChildren();
  for (const fill of answer.fills) onFill(fill);
}

function onFill(fill) {
  const row = tableRow([fill.symbol, fill.side, fill.price, fill.qty, `${text(fill.fee)} ${text(fill.fee_asset)}`]);
  $("fills").prepend(row);
  while ($("fills").children.length > 30) $("fills").lastChild.remove();
}

function renderBalances(balances) {
  const rows = Object.entries(balances || {}).map(([asset, figures]) => {
    const row = tableRow([asset, figures.available, figures.held]);
    return row;
  });
  $("balances").replaceChildren(...rows);
}

function renderFutures(view) {
  const accounts = (view && view.accounts) || {};
  const rows = [];
  for (const [asset, account] of Object.entries(accounts)) {
    for (const field of ["balance", "margin", "available", "risk_ratio"]) {
      const row = document.createElement("tr");
      const name = document.createElement("th");
      name.scope = "row";
      name.textContent = `${asset} ${field.replace("_", " ")}`;
      const value = document.createElement("td");
      value.textContent = text(account[field]);
      row.append(name, value);
      rows.push(row);
    }
  }
  $("futures-account").replaceChildren(...rows);
  const positions = Object.entries((view && view.positions) || {}).map(([symbol, position]) => {
    const row = tableRow([symbol, position.volume_long, position.volume_short, position.float_profit]);
    return row;
  });
  $("positions").replaceChildren(...positions);
}

// A reload keeps the session (the key stays in this tab's session storage).
if (credentials()) startAs(sessionStorage.getItem("bourse.role") || "trader").catch(() => { sessionStorage.clear(); });
