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

// Runs `action(formData, submitter)` when `form` is submitted; its answer (a sentence)
// shows in the form's status line, an error in its alert line: where the user acted.
function onSubmit(form, action) {
  const error = form.querySelector(".error");
  const ok = form.querySelector(".ok");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    if (ok) ok.textContent = "";
    try {
      const said = await action(new FormData(form), event.submitter);
      if (ok && said) ok.textContent = said;
    } catch (failure) {
      error.textContent = failure.message;
    }
  });
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
    this.body = body;
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
  if (!response.ok) {
    // A node of a cluster that does not lead names the leader: the screen goes there.
    if (answer && answer.code === "not_leader" && answer.leader && answer.leader.http) await moveTo(answer.leader.http);
    throw new ApiError(response.status, answer);
  }
  return answer;
}

// ---- A cluster: following the leader (docs/cluster.md) -------------------------------
//
// Each node of a cluster serves this screen. Orders go to the leader only, so a screen
// on a node that does not lead, or whose node stops answering, moves: it opens the same
// screen on the leader (or on any node that answers, which names the leader), carrying
// the login in the address's fragment. A fragment is never sent to a server, and the
// new page takes it out of the address at once.

const cluster = { nodes: [], self: null, leader: null, moving: false };

// What `GET /v1/cluster` says of the nodes (nothing when this server is alone).
async function learnCluster() {
  const view = await fetch("/v1/cluster").then((answer) => answer.json()).catch(() => null);
  if (!view || !view.clustered) return;
  cluster.nodes = view.nodes || [];
  cluster.self = view.node;
  cluster.leader = view.leader;
}

// Whether node `http` answers (an answer of any kind, even one this page may not read,
// says it is up).
function answers(http) {
  return fetch(`${location.protocol}//${http}/v1/cluster`, { mode: "no-cors", cache: "no-store" })
    .then(() => true)
    .catch(() => false);
}

// Opens the screen on node `http` (host:port), logged in as here, if it answers.
async function moveTo(http) {
  if (cluster.moving || http === location.host) return;
  if (!(await answers(http))) return;
  if (cluster.moving) return;
  const creds = credentials();
  const carried = new URLSearchParams();
  if (creds) {
    carried.set("key", creds.key);
    carried.set("secret", creds.secret);
    carried.set("role", sessionStorage.getItem("bourse.role") || "trader");
  }
  cluster.moving = true;
  location.assign(`${location.protocol}//${http}/#resume=${encodeURIComponent(carried.toString())}`);
}

// In a cluster, a screen on a node that does not lead moves to the leader (once it
// answers: a node may still name a leader that just died).
async function followLeader() {
  await learnCluster();
  const leader = cluster.nodes.find((node) => node.id === cluster.leader);
  if (leader && cluster.leader !== cluster.self) await moveTo(leader.http);
}

// This screen's node stopped answering: move to another that answers, the leader
// first.
async function leaveDeadNode() {
  const up = await fetch("/v1/cluster", { cache: "no-store" }).then(() => true).catch(() => false);
  if (up || cluster.nodes.length === 0) return;
  const others = cluster.nodes
    .filter((node) => node.id !== cluster.self)
    .sort((a, b) => Number(b.id === cluster.leader) - Number(a.id === cluster.leader));
  for (const node of others) {
    await moveTo(node.http);
    if (cluster.moving) return;
  }
}

// A screen opened by `moveTo`: the login it carries, kept in this tab as a login is.
(function resume() {
  const match = location.hash.match(/^#resume=(.*)$/);
  if (!match) return;
  history.replaceState(null, "", location.pathname + location.search);
  const carried = new URLSearchParams(decodeURIComponent(match[1]));
  if (carried.get("key") && carried.get("secret")) {
    sessionStorage.setItem("bourse.key", carried.get("key"));
    sessionStorage.setItem("bourse.secret", carried.get("secret"));
    sessionStorage.setItem("bourse.role", carried.get("role") || "trader");
  }
})();

// ---- State ---------------------------------------------------------------------------

const state = {
  instruments: [],
  symbol: null,
  book: { bids: new Map(), asks: new Map(), seq: 0, synced: false },
  openOrders: new Map(),
  // Each order's newest version seen, from any source (`orderVersion`), and when it was
  // seen (`tick`, a counter of this page's changes): an older copy never undoes it.
  orderSeen: new Map(),
  orderTick: 0,
  // The latest trades of the market and the account's latest fills, newest first.
  trades: [],
  fills: [],
  // Whether the ticker channel has spoken for this market (a REST answer is then older).
  tickerLive: false,
  socket: null,
  reconnectDelay: 500,
  chart: null,
  candles: null,
  // The chart's last bar (its time and trade count), and the channel's latest candles.
  lastCandle: { time: 0, trades: 0 },
  liveCandles: [],
  // The console: the futures contracts still live (an instrument not among them expired).
  liveFutures: null,
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

// An operator's key opens the console, an account's key the trading screen: the key
// says which (`GET /v1/key` answers either role, so no refused probe is left in the
// browser's console).
async function roleOf() {
  const key = await api("GET", "/v1/key");
  return key.role === "admin" ? "operator" : "trader";
}

async function startAs(role) {
  sessionStorage.setItem("bourse.role", role);
  await followLeader();
  if (cluster.moving) return;
  // A node that does not lead yet (an election): look again until one does.
  if (cluster.nodes.length > 0) {
    setInterval(() => { if (cluster.leader !== cluster.self) followLeader(); }, 1_000);
  }
  return role === "operator" ? startConsole() : start();
}

// ---- The operator console ----------------------------------------------------------------

// The form's fields as a request body: empty optional fields left out, whole numbers
// where the API takes integers (anything else is sent as typed, for the server to refuse
// with its reason).
function requestOf(data, integers = [], checkboxes = []) {
  const body = {};
  for (const [name, value] of data.entries()) {
    const typed = String(value).trim();
    if (typed === "" || checkboxes.includes(name)) continue;
    body[name] = integers.includes(name) && /^-?\d+$/.test(typed) ? Number(typed) : typed;
  }
  for (const name of checkboxes) body[name] = data.get(name) === "on";
  return body;
}

async function startConsole() {
  $("who").textContent = "Operator";
  $("logout").hidden = false;
  $("login").hidden = true;
  $("console").hidden = false;
  startHealth();
  await Promise.all([renderConsoleFutures(), renderAccounts(), renderKeys()]);
}

async function renderConsoleInstruments() {
  const instruments = (await api("GET", "/v1/instruments")).instruments;
  const live = new Set(state.liveFutures || []);
  const assets = new Set();
  const rows = instruments.map((item) => {
    for (const asset of [item.base, item.quote, item.settle]) if (asset) assets.add(asset);
    const fees = item.kind === "future" ? `${item.maker_fee} / ${item.taker_fee} ${item.settle}` : `${item.maker_fee_bps} / ${item.taker_fee_bps} bps`;
    const expired = item.kind === "future" && state.liveFutures && !live.has(item.symbol);
    const row = tableRow([item.symbol, item.kind, item.tick, item.lot, fees, expired ? "expired" : item.halted ? "halted" : "trading"]);
    const actions = document.createElement("td");
    if (!expired) {
      const action = item.halted ? "resume" : "halt";
      actions.append(actionButton(item.halted ? "Resume" : "Halt", `${item.halted ? "Resume" : "Halt"} ${item.symbol}`, $("instruments-error"), async () => {
        await api("POST", `/v1/admin/instruments/${encodeURIComponent(item.symbol)}/${action}`);
        await renderConsoleInstruments();
      }));
    }
    row.append(actions);
    return row;
  });
  $("console-instruments").replaceChildren(...rows);
  $("asset-names").replaceChildren(...[...assets].sort().map((asset) => Object.assign(document.createElement("option"), { value: asset })));
}

// A button that runs `action`, its error shown in `errorLine`.
function actionButton(label, accessibleName, errorLine, action) {
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = label;
  button.setAttribute("aria-label", accessibleName);
  button.addEventListener("click", async () => {
    errorLine.textContent = "";
    button.disabled = true;
    try {
      await action();
    } catch (error) {
      errorLine.textContent = `${accessibleName}: ${error.message}`;
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

onSubmit($("asset-form"), async (data) => {
  const body = requestOf(data, ["decimals"]);
  await api("POST", "/v1/admin/assets", body);
  await renderConsoleInstruments();
  return `Asset ${body.asset} declared.`;
});

onSubmit($("spot-form"), async (data) => {
  const body = requestOf(data, ["maker_fee_bps", "taker_fee_bps", "market_band_bps"]);
  await api("POST", "/v1/admin/instruments", body);
  await renderConsoleInstruments();
  return `${body.symbol} declared.`;
});

onSubmit($("future-form"), async (data) => {
  const body = requestOf(data, ["market_band_bps"], ["close_today"]);
  const answer = await api("POST", "/v1/admin/futures", body);
  await renderConsoleFutures();
  return `${body.symbol} declared, margin ${answer.margin} a lot.`;
});

async function renderConsoleFutures() {
  const futures = (await api("GET", "/v1/admin/futures")).futures;
  state.liveFutures = futures.map((contract) => contract.symbol);
  $("console-futures").replaceChildren(...futures.map((contract) => tableRow([
    contract.symbol, contract.margin, contract.margin_ratio || "fixed", contract.posted_price || "—", contract.mark_price || "—", contract.settlement_price || "—",
  ])));
  const chosen = $("future-symbol").value;
  $("future-symbol").replaceChildren(...futures.map((contract) => Object.assign(document.createElement("option"), { value: contract.symbol, textContent: contract.symbol })));
  if (state.liveFutures.includes(chosen)) $("future-symbol").value = chosen;
  for (const id of ["margin-form", "post-price-form", "settle-form"]) $(id).querySelector("button").disabled = futures.length === 0;
  await renderConsoleInstruments();
}

const chosenContract = () => encodeURIComponent($("future-symbol").value);

onSubmit($("margin-form"), async (data) => {
  const answer = await api("POST", `/v1/admin/futures/${chosenContract()}/margin`, requestOf(data));
  await renderConsoleFutures();
  return `${answer.symbol}: margin ${answer.margin} a lot${answer.margin_ratio ? ` (ratio ${answer.margin_ratio})` : ""}.`;
});

onSubmit($("post-price-form"), async (data) => {
  const answer = await api("POST", `/v1/admin/futures/${chosenContract()}/settlement-price`, requestOf(data));
  await renderConsoleFutures();
  return `${answer.symbol}: the next settlement is at ${answer.posted_price}.`;
});

onSubmit($("settle-form"), async (data) => {
  const symbol = $("future-symbol").value;
  const answer = await api("POST", `/v1/admin/futures/${chosenContract()}/settle`, requestOf(data, [], ["final"]));
  await renderConsoleFutures();
  const margin = answer.margin ? `, margin now ${answer.margin} a lot` : "";
  return `${symbol} settled at ${answer.price}: ${answer.sides_settled} position sides, ${answer.orders_expired} orders expired${margin}${data.get("final") === "on" ? "; the contract has expired" : ""}.`;
});

// ---- Accounts and keys

async function renderAccounts() {
  const accounts = (await api("GET", "/v1/admin/accounts")).accounts;
  $("console-accounts").replaceChildren(...accounts.map((entry) => {
    const row = tableRow([entry.account, entry.has_password ? "set" : "none", new Date(entry.created_ms).toISOString().slice(0, 16).replace("T", " ")]);
    const actions = document.createElement("td");
    actions.append(
      actionButton("Balances", `Balances of ${entry.account}`, $("accounts-error"), () => showBalances(entry.account)),
      " ",
      actionButton("Cancel all", `Cancel all orders of ${entry.account}`, $("accounts-error"), async () => {
        $("accounts-ok").textContent = "";
        const answer = await api("POST", `/v1/admin/accounts/${encodeURIComponent(entry.account)}/cancel-all`);
        $("accounts-ok").textContent = `${entry.account}: ${answer.canceled.length} orders canceled.`;
      }),
    );
    row.append(actions);
    return row;
  }));
  for (const select of document.querySelectorAll(".account-choice")) {
    const chosen = select.value;
    select.replaceChildren(...accounts.map((entry) => Object.assign(document.createElement("option"), { value: entry.account, textContent: entry.account })));
    if (chosen) select.value = chosen;
  }
}

async function showBalances(account) {
  const answer = await api("GET", `/v1/admin/accounts/${encodeURIComponent(account)}/balances`);
  const table = document.createElement("table");
  table.setAttribute("aria-label", `Balances of ${account}`);
  const caption = table.createCaption();
  caption.textContent = `${account}'s balances`;
  const head = table.createTHead().insertRow();
  for (const title of ["Asset", "Available", "Held"]) head.append(Object.assign(document.createElement("th"), { scope: "col", textContent: title }));
  const body = table.createTBody();
  for (const [asset, figures] of Object.entries(answer.balances)) body.append(tableRow([asset, figures.available, figures.held]));
  $("account-balances").replaceChildren(table);
  $("account-balances").dataset.account = account;
}

onSubmit($("account-form"), async (data) => {
  const body = requestOf(data);
  await api("POST", "/v1/admin/accounts", body);
  await renderAccounts();
  return `Account ${body.name} created.`;
});

onSubmit($("transfer-form"), async (data, submitter) => {
  const direction = submitter && submitter.value === "withdrawals" ? "withdrawals" : "deposits";
  const body = requestOf(data);
  await api("POST", `/v1/admin/${direction}`, body);
  await showBalances(body.account);
  return `${direction === "deposits" ? "Deposited" : "Withdrew"} ${body.amount} ${body.asset} ${direction === "deposits" ? "to" : "from"} ${body.account}.`;
});

async function renderKeys() {
  const keys = (await api("GET", "/v1/admin/keys")).keys;
  $("console-keys").replaceChildren(...keys.map((entry) => {
    const owner = `${entry.account || "operator"}${entry.label ? ` · ${entry.label}` : ""}`;
    const row = tableRow([entry.key, entry.revoked ? `${owner} (revoked)` : owner]);
    row.firstChild.className = "key";
    const actions = document.createElement("td");
    if (!entry.revoked && entry.role !== "admin") {
      actions.append(actionButton("Revoke", `Revoke key ${entry.key}`, $("keys-error"), async () => {
        await api("DELETE", `/v1/admin/keys/${encodeURIComponent(entry.key)}`);
        await renderKeys();
      }));
    }
    row.append(actions);
    return row;
  }));
}

onSubmit($("key-form"), async (data) => {
  const answer = await api("POST", "/v1/admin/keys", requestOf(data));
  await renderKeys();
  // The secret is shown once, here; the server keeps only its hash.
  const shown = $("new-key");
  shown.replaceChildren(
    Object.assign(document.createElement("p"), { textContent: `A key for ${answer.account}: copy the secret now, it is not shown again.` }),
    Object.assign(document.createElement("code"), { id: "new-key-id", textContent: answer.key }),
    document.createElement("br"),
    Object.assign(document.createElement("code"), { id: "new-key-secret", textContent: answer.secret }),
  );
  shown.hidden = false;
  return `Key ${answer.key} created.`;
});

// ---- The engine's health: small live charts of /metrics

// Each chart: a figure read from the Prometheus text (`rate`: a counter, drawn as its
// change per second; otherwise a gauge), or a lag between two gauges.
const HEALTH_CHARTS = [
  { id: "commands", title: "Commands / s", rate: "bourse_journal_commands_total" },
  { id: "syncs", title: "Journal syncs / s", rate: "bourse_journal_sync_seconds_count" },
  { id: "queue", title: "Intake queue (commands)", gauge: "bourse_intake_queue_commands" },
  { id: "feed-lag", title: "Feed lag (commands)", lag: ["bourse_applied_seq", "bourse_md_applied_seq"] },
  { id: "history-lag", title: "History lag (commands)", lag: ["bourse_applied_seq", "bourse_history_committed_seq"] },
];
const HEALTH_FIGURES = ["bourse_applied_seq", "bourse_journal_commands_total", "bourse_trades_total", "bourse_journal_sync_max_microseconds", "bourse_gateway_in_flight", "bourse_connections", "bourse_md_applied_seq", "bourse_history_committed_seq", "bourse_rejects_total"];
const HEALTH_POINTS = 120;

// name -> the sum of its samples (every label set), from the Prometheus text.
function parseMetrics(body) {
  const figures = new Map();
  for (const line of body.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const name = line.split(/[ {]/, 1)[0];
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    figures.set(name, (figures.get(name) || 0) + value);
  }
  return figures;
}

function startHealth() {
  const charts = HEALTH_CHARTS.map((spec) => {
    const box = document.createElement("figure");
    box.className = "spark";
    const caption = document.createElement("figcaption");
    const value = document.createElement("span");
    value.id = `health-${spec.id}`;
    value.className = "spark-value";
    caption.append(spec.title, " ", value);
    const area = document.createElement("div");
    area.className = "spark-chart";
    area.setAttribute("role", "img");
    area.setAttribute("aria-label", `${spec.title}, the last two minutes`);
    box.append(caption, area);
    $("health-charts").append(box);
    const chart = LightweightCharts.createChart(area, {
      autoSize: true,
      layout: { background: { color: "transparent" }, textColor: "#8b95a5", attributionLogo: false, fontSize: 10 },
      grid: { vertLines: { visible: false }, horzLines: { color: "#222a35" } },
      timeScale: { timeVisible: true, secondsVisible: true },
      handleScroll: false,
      handleScale: false,
    });
    const series = chart.addSeries(LightweightCharts.AreaSeries, { lineColor: "#4c8dff", topColor: "rgba(76,141,255,.35)", bottomColor: "rgba(76,141,255,0)", lineWidth: 1, priceLineVisible: false, priceFormat: { type: "price", precision: 0, minMove: 1 } });
    return { spec, series, value, points: [] };
  });
  let previous = null;
  const sample = async () => {
    let figures;
    try {
      const response = await fetch("/metrics");
      figures = parseMetrics(await response.text());
      $("health-state").textContent = "";
    } catch (error) {
      $("health-state").textContent = "(the server does not answer)";
      return;
    }
    const now = Date.now();
    for (const chart of charts) {
      const { spec } = chart;
      let figure = null;
      if (spec.rate && previous && figures.has(spec.rate)) {
        figure = Math.max(0, (figures.get(spec.rate) - previous.figures.get(spec.rate)) * 1000 / (now - previous.at));
      } else if (spec.gauge && figures.has(spec.gauge)) {
        figure = figures.get(spec.gauge);
      } else if (spec.lag && figures.has(spec.lag[0]) && figures.has(spec.lag[1])) {
        figure = Math.max(0, figures.get(spec.lag[0]) - figures.get(spec.lag[1]));
      }
      if (figure === null) {
        chart.value.textContent = spec.rate && !previous ? "…" : "— (off)";
        continue;
      }
      chart.value.textContent = String(Math.round(figure));
      chart.points.push({ time: Math.floor(now / 1000), value: figure });
      // One point a second at most (a late sample replaces its second's).
      chart.points = chart.points.filter((point, index, all) => index === all.length - 1 || point.time < all[index + 1].time).slice(-HEALTH_POINTS);
      chart.series.setData(chart.points);
    }
    $("health").replaceChildren(...HEALTH_FIGURES.filter((name) => figures.has(name)).map((name) => {
      const row = document.createElement("tr");
      const label = Object.assign(document.createElement("th"), { scope: "row", textContent: name.replace("bourse_", "").replaceAll("_", " ") });
      row.append(label, Object.assign(document.createElement("td"), { textContent: String(figures.get(name)) }));
      return row;
    }));
    previous = { figures, at: now };
  };
  sample();
  setInterval(sample, 1000);
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

// Every panel shows the current state on open, then live changes on top. The REST read
// of a panel whose channel sends only changes (trades, candles, orders, fills) is made
// once the channel's subscription is in place (its `subscribed` answer), so nothing
// falls between the two; what comes both ways shows once (trade ids, order versions).
// The book, the ticker, balances and positions come with their channel's snapshot; the
// ticker and the balances are also read at once, until the channel speaks.
async function start() {
  const balances = await api("GET", "/v1/balances");
  $("who").textContent = `Logged in as ${balances.account}`;
  $("logout").hidden = false;
  $("login").hidden = true;
  $("trading").hidden = false;
  renderBalances(balances.balances);
  state.instruments = (await api("GET", "/v1/instruments")).instruments;
  renderMarkets();
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
  state.trades = [];
  renderTrades();
  state.tickerLive = false;
  showTicker(null);
  loadTicker(symbol);
  resetBook();
  resetChart();
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
  socket.addEventListener("close", async () => {
    // Nothing stale after a reconnect: the book is rebuilt from a new snapshot.
    resetBook("reconnecting");
    // In a cluster, a node that is gone is left for one that answers.
    await leaveDeadNode();
    if (cluster.moving) return;
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
    return;
  }
  if (message.type === "subscribed") return onSubscribed(message);
  if (message.type === "unsubscribed" || message.type === "pong") return;
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

// A channel's subscription is in place: what happened before it is read by REST now
// (the channel brings everything after). The book, the ticker, balances and positions
// need nothing: their channels send a snapshot.
function onSubscribed(message) {
  if (message.symbol && message.symbol !== state.symbol) return;
  switch (message.channel) {
    case "trades": return loadTrades(message.symbol);
    case "candles": return loadChart(message.symbol);
    case "orders": return loadOpenOrders();
    case "fills": return loadFills();
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
  scheduleDepth();
}

// ---- Exact decimals: sums of the server's strings, in integers (never a float)

function decimalParts(value) {
  const [whole, fraction = ""] = String(value).split(".");
  return { units: BigInt(whole + fraction), scale: fraction.length };
}

// The exact sum of decimal strings, as a decimal string.
function decimalSum(values) {
  const parts = values.map(decimalParts);
  const scale = Math.max(0, ...parts.map((part) => part.scale));
  const total = parts.reduce((sum, part) => sum + part.units * 10n ** BigInt(scale - part.scale), 0n);
  const negative = total < 0n;
  const digits = (negative ? -total : total).toString().padStart(scale + 1, "0");
  const shown = scale ? `${digits.slice(0, -scale)}.${digits.slice(-scale)}`.replace(/\.?0+$/, "") : digits;
  return negative ? `-${shown}` : shown;
}

// ---- The depth chart: cumulative quantity by price, bids left, asks right

const DEPTH_LEVELS = 50;
let depthPending = false;

function scheduleDepth() {
  if (depthPending) return;
  depthPending = true;
  requestAnimationFrame(() => {
    depthPending = false;
    renderDepth();
  });
}

// Coordinates are floats only to draw; the summary (the chart's text) gives the exact
// sums of every level received, within and beyond the window drawn.
function renderDepth() {
  const svg = $("depth");
  const bids = [...state.book.bids.values()].sort((a, b) => Number(b[0]) - Number(a[0])).slice(0, DEPTH_LEVELS);
  const asks = [...state.book.asks.values()].sort((a, b) => Number(a[0]) - Number(b[0])).slice(0, DEPTH_LEVELS);
  if (!bids.length && !asks.length) {
    svg.replaceChildren();
    $("depth-summary").textContent = state.book.synced ? "The book is empty." : "";
    return;
  }
  const cumulative = (levels) => {
    let total = 0;
    return levels.map(([price, qty]) => [Number(price), (total += Number(qty))]);
  };
  // The window: centred on the mid price, as wide as the shallower side reaches, so
  // both sides show on one scale (a far-away order does not squash the rest).
  const bestBid = bids.length ? Number(bids[0][0]) : null;
  const bestAsk = asks.length ? Number(asks[0][0]) : null;
  const mid = bestBid !== null && bestAsk !== null ? (bestBid + bestAsk) / 2 : (bestBid ?? bestAsk);
  const reach = (levels) => (levels.length ? Math.abs(Number(levels[levels.length - 1][0]) - mid) : Infinity);
  const half = Math.min(reach(bids), reach(asks)) || Math.max(1, Math.abs(mid) * 0.001);
  const [low, high] = [mid - half, mid + half];
  const inWindow = ([price]) => price >= low && price <= high;
  const bidSteps = cumulative(bids).filter(inWindow);
  const askSteps = cumulative(asks).filter(inWindow);
  const span = high - low;
  const deepest = Math.max(...[...bidSteps, ...askSteps].map(([, total]) => total)) || 1;
  const [width, height] = [300, 120];
  const x = (price) => ((price - low) / span) * (width - 10) + 5;
  const y = (total) => height - (total / deepest) * (height - 8);
  const area = (steps, towards) => {
    if (!steps.length) return "";
    let path = `M${x(steps[0][0]).toFixed(1)},${height}`;
    let previous = 0;
    for (const [price, total] of steps) {
      path += ` L${x(price).toFixed(1)},${y(previous).toFixed(1)} L${x(price).toFixed(1)},${y(total).toFixed(1)}`;
      previous = total;
    }
    const edge = towards < 0 ? 0 : width;
    return `${path} L${edge},${y(previous).toFixed(1)} L${edge},${height} Z`;
  };
  const svgNs = "http://www.w3.org/2000/svg";
  const shape = (d, kind) => {
    const element = document.createElementNS(svgNs, "path");
    element.setAttribute("d", d);
    element.setAttribute("class", kind);
    return element;
  };
  svg.replaceChildren(shape(area(bidSteps, -1), "depth-bids"), shape(area(askSteps, 1), "depth-asks"));
  const side = (levels, name, word) => levels.length
    ? `${name} ${decimalSum(levels.map((level) => level[1]))} over ${levels.length} levels ${word} ${levels[levels.length - 1][0]}`
    : `no ${name}`;
  $("depth-summary").textContent = `${side(bids, "bids", "down to")}; ${side(asks, "asks", "up to")}.`;
}

// ---- Recent trades and fills: each once, newest first, whichever way it came

const ROWS_SHOWN = 30;

// A trade id, "35-0", as numbers: the command's sequence number, then the trade's
// place among that command's trades.
function tradeOrder(id) {
  const [seq, index] = String(id).split("-").map(Number);
  return [seq || 0, index || 0];
}

function newerTradeFirst(a, b) {
  const [x, y] = [tradeOrder(a.trade_id), tradeOrder(b.trade_id)];
  return y[0] - x[0] || y[1] - x[1];
}

// `shown` with `more` added: each item once (by `key`), newest first, the latest few.
function mergeNewest(shown, more, key) {
  const byKey = new Map(shown.map((item) => [key(item), item]));
  for (const item of more) if (item && item.trade_id) byKey.set(key(item), item);
  return [...byKey.values()].sort(newerTradeFirst).slice(0, ROWS_SHOWN);
}

const tradeKey = (trade) => trade.trade_id;

async function loadTrades(symbol) {
  $("trades-state").textContent = "";
  try {
    const answer = await api("GET", `/v1/trades/${encodeURIComponent(symbol)}?limit=${ROWS_SHOWN}`);
    if (state.symbol !== symbol) return;
    state.trades = mergeNewest(state.trades, answer.trades, tradeKey);
    renderTrades();
  } catch (error) {
    if (state.symbol === symbol) $("trades-state").textContent = `(the earlier trades could not be read: ${error.message})`;
  }
}

function onTrade(message) {
  if (message.symbol && message.symbol !== state.symbol) return;
  state.trades = mergeNewest(state.trades, [message.data], tradeKey);
  renderTrades();
}

function renderTrades() {
  $("trades").replaceChildren(...state.trades.map((trade) => tableRow([trade.price, trade.qty, trade.taker_side])));
}

// ---- The ticker: the channel's snapshot, then its updates; a REST answer fills in
// until the channel speaks (after that it would be older news).

async function loadTicker(symbol) {
  try {
    const answer = await api("GET", `/v1/ticker/${encodeURIComponent(symbol)}`);
    if (state.symbol === symbol && !state.tickerLive) showTicker(answer.data);
  } catch (error) {
    // The channel's snapshot shows it.
  }
}

function onTicker(message) {
  if (message.symbol && message.symbol !== state.symbol) return;
  state.tickerLive = true;
  showTicker(message.data);
}

function showTicker(data) {
  $("ticker").textContent = !data ? "" : data.last ? `last ${data.last} · 24 h volume ${data.volume_24h}` : "no trade in 24 h";
}

// ---- The chart --------------------------------------------------------------------------

// Clears the chart for a new market: the previous market's candles go at once.
function resetChart() {
  ensureChart();
  state.liveCandles = [];
  showCandles([]);
}

function ensureChart() {
  if (!state.chart) {
    state.chart = LightweightCharts.createChart($("chart"), {
      autoSize: true,
      layout: { background: { color: "transparent" }, textColor: "#8b95a5", attributionLogo: false },
      grid: { vertLines: { color: "#222a35" }, horzLines: { color: "#222a35" } },
      timeScale: { timeVisible: true, secondsVisible: false },
    });
    state.candles = state.chart.addSeries(LightweightCharts.CandlestickSeries);
  }
}

// The history (read once the candles channel is in place), then the channel's latest
// candles on top where they are newer than the history's last.
async function loadChart(symbol) {
  ensureChart();
  try {
    const answer = await api("GET", `/v1/candles/${encodeURIComponent(symbol)}?interval=1m&limit=200`);
    if (state.symbol !== symbol) return;
    showCandles(answer.candles);
    for (const candle of state.liveCandles) drawCandle(candle);
  } catch (error) {
    // The channel's candles still show.
  }
}

// The chart's bars, and its last one: the chart takes no bar older than that, nor the
// same minute with fewer trades (the history may hold a minute the channel then sends).
function showCandles(candles) {
  const points = candles.map(candlePoint);
  state.candles.setData(points);
  const last = candles[candles.length - 1];
  state.lastCandle = last ? { time: candlePoint(last).time, trades: Number(last[6]) || 0 } : { time: 0, trades: 0 };
}

function candlePoint(candle) {
  return { time: Math.floor(candle[0] / 1e9), open: Number(candle[1]), high: Number(candle[2]), low: Number(candle[3]), close: Number(candle[4]) };
}

function drawCandle(candle) {
  const point = candlePoint(candle);
  const trades = Number(candle[6]) || 0;
  const last = state.lastCandle;
  if (point.time < last.time || (point.time === last.time && trades < last.trades)) return;
  state.candles.update(point);
  state.lastCandle = { time: point.time, trades };
}

function onCandle(message) {
  if (message.symbol && message.symbol !== state.symbol) return;
  if (!message.data || !state.candles) return;
  state.liveCandles = [...state.liveCandles.slice(-4), message.data];
  drawCandle(message.data);
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

// The open orders as the server lists them, merged with what this page has seen: an
// order the list lacks goes only if the page knew it before asking (it finished before
// the read); one seen since may be newer than the list (placed since), and stays.
async function loadOpenOrders() {
  const asked = state.orderTick;
  try {
    const answer = await api("GET", "/v1/orders?status=open");
    const listed = new Set(answer.orders.map((order) => order.order_id));
    for (const [id] of state.openOrders) {
      const seen = state.orderSeen.get(id);
      if (!listed.has(id) && !(seen && seen.tick > asked)) state.openOrders.delete(id);
    }
    for (const order of answer.orders) applyOrder(order);
    renderOpenOrders();
  } catch (error) {
    $("orders-error").textContent = error.message;
  }
}

// An order's version: its last change's time, then finished after open (a command
// that finishes it may share the time), then the quantity filled.
function orderVersion(order) {
  return [Number(order.updated_ns) || 0, order.status === "open" ? 0 : 1, Number(order.filled) || 0];
}

function olderVersion(a, b) {
  for (let index = 0; index < a.length; index += 1) if (a[index] !== b[index]) return a[index] < b[index];
  return false;
}

// Shows `order` unless a newer version of it was seen (from the channel, a REST list or
// an answer, whichever came first).
function applyOrder(order) {
  const version = orderVersion(order);
  const seen = state.orderSeen.get(order.order_id);
  if (seen && olderVersion(version, seen.version)) return;
  state.orderTick += 1;
  state.orderSeen.set(order.order_id, { version, tick: state.orderTick });
  if (order.status === "open") state.openOrders.set(order.order_id, order);
  else state.openOrders.delete(order.order_id);
}

function onOrder(order) {
  applyOrder(order);
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

// The amend form under the open orders: price and/or remaining quantity; the fields
// left as they were are not sent. Escape or Close puts the focus back on the order.
function amendOrder(order) {
  const form = $("amend-form");
  form.dataset.orderId = order.order_id;
  form.dataset.price = order.price || "";
  form.dataset.qty = order.remaining;
  $("amend-title").textContent = `Amend order ${order.order_id} (${order.side} ${order.remaining} ${order.symbol} at ${text(order.price)})`;
  form.elements.price.value = order.price || "";
  form.elements.qty.value = order.remaining;
  form.querySelector(".error").textContent = "";
  form.querySelector(".ok").textContent = "";
  form.hidden = false;
  form.elements.price.focus();
  form.elements.price.select();
}

function closeAmend() {
  const form = $("amend-form");
  form.hidden = true;
  const button = document.querySelector(`button[aria-label="Amend order ${form.dataset.orderId}"]`);
  (button || $("place")).focus();
}

$("amend-close").addEventListener("click", closeAmend);
$("amend-form").addEventListener("keydown", (event) => {
  if (event.key === "Escape") closeAmend();
});

onSubmit($("amend-form"), async (data) => {
  const form = $("amend-form");
  const change = {};
  const price = String(data.get("price")).trim();
  const qty = String(data.get("qty")).trim();
  if (price && price !== form.dataset.price) change.price = price;
  if (qty && qty !== form.dataset.qty) change.qty = qty;
  if (!Object.keys(change).length) throw new Error("Nothing to change: give a new price or remaining quantity.");
  const amended = await api("PATCH", `/v1/orders/${form.dataset.orderId}`, change);
  onOrder(amended);
  form.dataset.price = amended.price || "";
  form.dataset.qty = amended.remaining;
  return `Order ${amended.order_id}: ${amended.remaining} at ${text(amended.price)}.`;
});

// A fill is its trade's and its side's (with self-trade prevention off, an account may
// be both the maker and the taker of one trade).
const fillKey = (fill) => `${fill.trade_id} ${fill.liquidity}`;

async function loadFills() {
  $("fills-error").textContent = "";
  try {
    const answer = await api("GET", `/v1/fills?limit=${ROWS_SHOWN}`);
    state.fills = mergeNewest(state.fills, answer.fills, fillKey);
    renderFills();
  } catch (error) {
    $("fills-error").textContent = error.message;
  }
}

function onFill(fill) {
  state.fills = mergeNewest(state.fills, [fill], fillKey);
  renderFills();
}

function renderFills() {
  $("fills").replaceChildren(...state.fills.map((fill) => tableRow([fill.symbol, fill.side, fill.price, fill.qty, `${text(fill.fee)} ${text(fill.fee_asset)}`])));
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
    for (const field of ["balance", "margin", "frozen_margin", "available", "float_profit", "risk_ratio"]) {
      const row = document.createElement("tr");
      const name = document.createElement("th");
      name.scope = "row";
      name.textContent = `${asset} ${field.replaceAll("_", " ")}`;
      const value = document.createElement("td");
      value.textContent = text(account[field]);
      row.append(name, value);
      rows.push(row);
    }
  }
  $("futures-account").replaceChildren(...rows);
  const positions = Object.entries((view && view.positions) || {}).map(([symbol, position]) => {
    const row = tableRow([symbol, position.volume_long, position.volume_short, position.margin, position.float_profit]);
    return row;
  });
  $("positions").replaceChildren(...positions);
}

// A reload keeps the session (the key stays in this tab's session storage).
if (credentials()) startAs(sessionStorage.getItem("bourse.role") || "trader").catch(() => { sessionStorage.clear(); });
