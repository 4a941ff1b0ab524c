// The trading screen and the operator console in a real browser (headless Chromium from
// the distribution, driven by Playwright's core): run by tests/ui_browser.rs against
// `bourse serve --demo`.
//
// - A bad key gets a clear message.
// - alice logs in and rests an order: she sees it in the book, the depth and her open
//   orders. bob logs in and places an order with the keyboard alone that fills it; both
//   see the fill and their balances change. A page opened after the trade shows it in
//   Recent trades and the ticker's last price; a trade while its REST reads are held
//   shows once, and a ticker answer older than the channel's is not shown over it.
//   alice amends another order with the keyboard and cancels it.
// - The operator halts the market and alice's ticket shows it; declares an asset and a
//   spot instrument; creates an account, funds it, gives it a key, and that key logs in;
//   cancels all of alice's orders; runs a contract's margin, posted price and
//   settlement; declares a contract and expires it; revokes a key; runs SQL; watches
//   the engine's charts.
// - Phone width; no script errors, and none at all in the console after a trader's or
//   the operator's login (no refused request). Screenshots of each screen go to
//   SCREENSHOT_DIR.
//
// Environment: BOURSE_URL, BOURSE_{ALICE,BOB,ADMIN}_{KEY,SECRET}, CHROMIUM (the
// browser's path), SCREENSHOT_DIR. Prints every check; exits non-zero on the first
// failure.

const { check, launch, place } = require("./common.cjs");
const path = require("path");

const url = process.env.BOURSE_URL;
const shots = process.env.SCREENSHOT_DIR;
const TIMEOUT = 15_000;

// `routed`: the page's WebSocket goes through Playwright's route, so the test can drop
// it (`page.dropSocket()`) and hold the page's reconnection until `page.reopenSocket()`.
// `before(page)`: runs before the page is loaded (to route its requests).
async function open(browser, who, { keyboard = false, width = 1300, routed = false, before = null } = {}) {
  const page = await browser.newPage({ viewport: { width, height: 1000 } });
  if (before) await before(page);
  if (routed) {
    let current = null;
    let gate = Promise.resolve();
    let openGate = () => {};
    await page.routeWebSocket(/\/v1\/ws$/, async (socket) => {
      await gate;
      current = socket;
      socket.connectToServer();
    });
    page.dropSocket = async () => {
      gate = new Promise((resolve) => { openGate = resolve; });
      await current.close();
    };
    page.reopenSocket = () => openGate();
  }
  const errors = [];
  page.on("pageerror", (error) => errors.push(String(error)));
  page.on("console", (message) => { if (message.type() === "error") errors.push(message.text()); });
  page.errors = errors;
  await page.goto(url + "/");
  if (!who) return page;
  const key = who.key || process.env[`BOURSE_${who.toUpperCase()}_KEY`];
  const secret = who.secret || process.env[`BOURSE_${who.toUpperCase()}_SECRET`];
  if (keyboard) {
    // From the page's start: Tab to the key, Tab to the secret, Enter.
    await page.keyboard.press("Tab");
    check(await page.evaluate(() => document.activeElement.id) === "login-key", "Tab from the page's start reaches the key field");
    await page.keyboard.type(key);
    await page.keyboard.press("Tab");
    check(await page.evaluate(() => document.activeElement.id) === "login-secret", "Tab reaches the secret field");
    await page.keyboard.type(secret);
    await page.keyboard.press("Enter");
  } else {
    await page.fill("#login-key", key);
    await page.fill("#login-secret", secret);
    await page.click("#login-form button[type=submit]");
  }
  const screen = (who === "admin") ? "#console" : "#trading";
  await page.waitForSelector(`${screen}:not([hidden])`, { timeout: TIMEOUT });
  if (screen === "#trading") await page.waitForFunction(() => document.querySelectorAll("#bids tr").length > 0, null, { timeout: TIMEOUT });
  return page;
}

const focused = (page) => page.evaluate(() => {
  const element = document.activeElement;
  return element.id || element.getAttribute("aria-label") || element.name || element.textContent;
});

const cellTexts = (page, selector) => page.$$eval(selector, (rows) => rows.map((row) => [...row.children].map((cell) => cell.textContent)));

async function balance(page, asset) {
  const rows = await cellTexts(page, "#balances tr");
  const row = rows.find((cells) => cells[0] === asset);
  return row ? { available: row[1], held: row[2] } : null;
}

const rowWith = (selector, cell, value) => `[...document.querySelectorAll("${selector}")].some((row) => row.children[${cell}] && row.children[${cell}].textContent === ${JSON.stringify(value)})`;

async function waitFor(page, expression, what) {
  await page.waitForFunction(expression, null, { timeout: TIMEOUT });
  check(true, what);
}

// Waits for `condition()` in this script (not the page).
async function until(condition, what) {
  const deadline = Date.now() + TIMEOUT;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`FAILED (timed out): ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  check(true, what);
}

// Nothing at all in the console: no script error and no refused request.
function consoleClean(page, who) {
  check(page.errors.length === 0, `no errors in the console after ${who}'s login ${JSON.stringify(page.errors)}`);
}

// A trading page's panels have their current state: the ticker has spoken and the
// recent trades are read.
async function panelsReady(page) {
  await page.waitForFunction(() => document.getElementById("ticker").textContent !== "", null, { timeout: TIMEOUT });
}

// Submits a console form and returns its status line (fails on its error line).
async function submitForm(page, form, fields, button = "button[type=submit]") {
  for (const [name, value] of Object.entries(fields)) {
    const field = `${form} [name=${name}]`;
    const tag = await page.$eval(field, (element) => element.tagName);
    if (tag === "SELECT") await page.selectOption(field, value);
    else await page.fill(field, value);
  }
  await page.$eval(`${form} .ok`, (element) => { element.textContent = ""; });
  await page.click(`${form} ${button}`);
  await page.waitForFunction((selector) => document.querySelector(`${selector} .ok`).textContent || document.querySelector(`${selector} .error`).textContent, form, { timeout: TIMEOUT });
  const error = await page.textContent(`${form} .error`);
  if (error) throw new Error(`FAILED: ${form}: ${error}`);
  return page.textContent(`${form} .ok`);
}

async function main() {
  const browser = await launch();
  try {
    // A bad key: a clear message where the user acted.
    const stranger = await open(browser, null);
    await stranger.fill("#login-key", "bk_nobody");
    await stranger.fill("#login-secret", "0".repeat(64));
    await stranger.click("#login-form button[type=submit]");
    await stranger.waitForFunction(() => document.getElementById("login-error").textContent, null, { timeout: TIMEOUT });
    check((await stranger.textContent("#login-error")).includes("not accepted"), `a bad key is told so: "${await stranger.textContent("#login-error")}"`);
    await stranger.screenshot({ path: path.join(shots, "login-refused.png") });

    const alice = await open(browser, "alice", { routed: true });
    const bob = await open(browser, "bob", { keyboard: true });
    for (const [who, page] of [["alice", alice], ["bob", bob]]) {
      await panelsReady(page);
      consoleClean(page, who);
    }
    check(await bob.textContent("#ticker") === "no trade in 24 h", "before any trade the ticker says so");
    const aliceUsdBefore = await balance(alice, "USD");
    const bobBtcBefore = await balance(bob, "BTC");
    // The demo's book: five levels of 0.05 each side; the depth says so exactly.
    await waitFor(alice, () => document.getElementById("depth-summary").textContent.startsWith("bids 0.25 over 5 levels down to 59975; asks 0.25 over 5 levels up to 60025"), "the depth chart sums the demo's book exactly");
    check(await alice.$$eval("#depth path", (paths) => paths.length) === 2, "the depth chart draws bids and asks");

    // alice rests a buy between the best bid (59995) and ask (60005): the new best bid.
    const resting = await place(alice, "buy", "60000", "0.02");
    await waitFor(alice, rowWith("#bids tr", 0, "60000"), "alice's order is in the book (60000)");
    await waitFor(alice, () => document.getElementById("depth-summary").textContent.startsWith("bids 0.27 over 6 levels"), "the depth counts it (0.27 over 6 levels)");
    await waitFor(alice, rowWith("#open-orders tr", 0, resting), `alice's order ${resting} is in her open orders`);
    await waitFor(bob, rowWith("#bids tr", 0, "60000"), "bob's screen shows alice's order in the book");
    await alice.screenshot({ path: path.join(shots, "trading-resting.png"), fullPage: true });

    // bob sells into it with the keyboard alone: the side by arrow key, then Tab
    // through the ticket, Enter to place.
    await bob.focus("#ticket input[name=side][value=buy]");
    await bob.keyboard.press("ArrowRight");
    check(await bob.isChecked("#ticket input[name=side][value=sell]"), "an arrow key chooses Sell");
    await bob.keyboard.press("Tab");
    check(await focused(bob) === "type", "Tab reaches the order type");
    await bob.keyboard.press("Tab");
    check(await focused(bob) === "price", "Tab reaches the price");
    await bob.keyboard.type("60000");
    await bob.keyboard.press("Tab");
    check(await focused(bob) === "qty", "Tab reaches the quantity");
    await bob.keyboard.type("0.02");
    for (const next of ["time_in_force", "post_only", "place"]) {
      await bob.keyboard.press("Tab");
      check(await focused(bob) === next, `Tab reaches ${next}`);
    }
    await bob.keyboard.press("Enter");
    await waitFor(bob, () => document.getElementById("ticket-ok").textContent.includes("filled 0.02"), "bob's keyboard order is placed and filled");
    for (const [who, page] of [["alice", alice], ["bob", bob]]) {
      await waitFor(page, rowWith("#fills tr", 2, "60000"), `${who} sees the fill at 60000`);
    }
    await waitFor(alice, `!${rowWith("#open-orders tr", 0, resting)}`, "the filled order left alice's open orders");
    await alice.waitForFunction((before) => {
      const row = [...document.querySelectorAll("#balances tr")].find((cells) => cells.children[0].textContent === "USD");
      return row && row.children[1].textContent !== before;
    }, aliceUsdBefore.available, { timeout: TIMEOUT });
    check(true, `alice's USD changed (${aliceUsdBefore.available} -> ${(await balance(alice, "USD")).available})`);
    await bob.waitForFunction((before) => {
      const row = [...document.querySelectorAll("#balances tr")].find((cells) => cells.children[0].textContent === "BTC");
      return row && row.children[1].textContent !== before;
    }, bobBtcBefore.available, { timeout: TIMEOUT });
    check(true, `bob's BTC changed (${bobBtcBefore.available} -> ${(await balance(bob, "BTC")).available})`);
    await bob.screenshot({ path: path.join(shots, "trading-filled.png"), fullPage: true });

    // A page opened after the trade shows the current state. Its REST read of the
    // trades is held until bob has traded again (that trade comes over the WebSocket
    // first, then in the REST answer too: it must show once), and its REST ticker is
    // read at once but delivered only after the channel's newer one.
    let releaseTrades;
    let releaseTicker;
    const tradesHeld = new Promise((resolve) => { releaseTrades = resolve; });
    const tickerHeld = new Promise((resolve) => { releaseTicker = resolve; });
    let tradesAsked = false;
    let staleTicker = null;
    const late = await open(browser, "bob", {
      before: async (page) => {
        await page.route(/\/v1\/trades\/BTC-USD/, async (route) => {
          tradesAsked = true;
          await tradesHeld;
          await route.continue();
        });
        await page.route(/\/v1\/ticker\/BTC-USD$/, async (route) => {
          const response = await route.fetch();
          staleTicker = staleTicker || (await response.json()).data;
          await tickerHeld;
          await route.fulfill({ response });
        });
      },
    });
    await waitFor(late, () => document.getElementById("ticker").textContent.startsWith("last 60000 · 24 h volume 0.02"), "a page opened after the trade shows the ticker's last price at once (the channel's snapshot)");
    await until(() => tradesAsked, "it reads the recent trades once the trades channel is in place");
    await place(bob, "sell", "59995", "0.01");
    const tradeRows = (page) => cellTexts(page, "#trades tr");
    await waitFor(late, () => document.querySelectorAll("#trades tr").length === 1 && document.querySelector("#trades td").textContent === "59995", "bob's new trade comes over the WebSocket while the REST read is held");
    await waitFor(late, () => document.getElementById("ticker").textContent.startsWith("last 59995"), "and moves the ticker");
    releaseTrades();
    await waitFor(late, () => document.querySelectorAll("#trades tr").length === 2, "the held REST read adds the earlier trade");
    check(JSON.stringify(await tradeRows(late)) === JSON.stringify([["59995", "0.01", "sell"], ["60000", "0.02", "sell"]]), `Recent trades: each trade once, newest first ${JSON.stringify(await tradeRows(late))}`);
    check(staleTicker && staleTicker.last === "60000", "the held REST ticker is older (last 60000)");
    const tickerDelivered = late.waitForResponse(/\/v1\/ticker\/BTC-USD$/);
    releaseTicker();
    await tickerDelivered;
    await late.waitForTimeout(300);
    check((await late.textContent("#ticker")).startsWith("last 59995"), "the older REST ticker does not replace the channel's newer one");
    await waitFor(bob, () => document.querySelector("#trades td") && document.querySelector("#trades td").textContent === "59995", "bob's open page shows the new trade on top");
    check(JSON.stringify(await tradeRows(bob)) === JSON.stringify(await tradeRows(late)), "and the same trades as the page opened later");
    consoleClean(late, "bob (a second page)");
    await late.close();

    // alice amends another order with the keyboard (Enter on Amend, type, Enter; Escape
    // gives the focus back), then cancels it.
    const other = await place(alice, "buy", "59000", "0.01");
    await waitFor(alice, rowWith("#open-orders tr", 0, other), `order ${other} is open`);
    await alice.focus(`button[aria-label="Amend order ${other}"]`);
    await alice.keyboard.press("Enter");
    check(await focused(alice) === "price", "Amend opens the form with the focus on the price");
    await alice.keyboard.type("59100");
    await alice.keyboard.press("Enter");
    await waitFor(alice, rowWith("#open-orders tr", 3, "59100"), `order ${other} amended to 59100 in the open orders`);
    await waitFor(alice, rowWith("#bids tr", 0, "59100"), "and in the book");
    await alice.screenshot({ path: path.join(shots, "trading-amend.png"), fullPage: true });
    await alice.keyboard.press("Escape");
    check(await alice.isHidden("#amend-form") && await focused(alice) === `Amend order ${other}`, "Escape closes the form and gives the focus back to the order");
    await alice.click(`button[aria-label="Cancel order ${other}"]`);
    await waitFor(alice, `!${rowWith("#open-orders tr", 0, other)}`, `alice canceled order ${other}`);

    // ---- The operator console.
    const operator = await open(browser, "admin");
    await waitFor(operator, () => document.querySelectorAll("#console-keys tr").length > 0 && document.querySelectorAll("#console-accounts tr").length > 0, "the console lists the keys and accounts");
    consoleClean(operator, "the operator");
    await waitFor(operator, () => /^\d+$/.test(document.getElementById("health-commands").textContent), `the engine's commands/s chart has figures`);
    await waitFor(operator, () => /^\d+$/.test(document.getElementById("health-history-lag").textContent), "the history's lag is charted");

    // Halt: alice's ticket refuses, and says why.
    await operator.click('button[aria-label="Halt BTC-USD"]');
    await operator.waitForSelector('button[aria-label="Resume BTC-USD"]', { timeout: TIMEOUT });
    check(true, "the operator halted BTC-USD from the console");
    await alice.check("#ticket input[name=side][value=buy]");
    await alice.fill("#ticket input[name=price]", "59000");
    await alice.fill("#ticket input[name=qty]", "0.01");
    await alice.click("#place");
    await alice.waitForFunction(() => document.getElementById("ticket-error").textContent, null, { timeout: TIMEOUT });
    check((await alice.textContent("#ticket-error")).includes("instrument_halted"), `the ticket shows the halt: "${await alice.textContent("#ticket-error")}"`);
    await alice.screenshot({ path: path.join(shots, "trading-halted.png") });
    await operator.click('button[aria-label="Resume BTC-USD"]');
    await operator.waitForSelector('button[aria-label="Halt BTC-USD"]', { timeout: TIMEOUT });
    check(true, "and resumed it");

    // Declaring: a bad tick is refused beside the form; an asset and an instrument.
    await operator.click("summary:has-text('Declare an asset')");
    await operator.click("summary:has-text('Declare a spot instrument')");
    await submitForm(operator, "#spot-form", { symbol: "SOL-USD", base: "SOL", quote: "USD", tick: "0.01" }).then(
      () => check(false, "an instrument on an undeclared asset is refused"),
      (error) => check(error.message.includes("unknown_asset"), `the refusal shows beside the form: "${error.message.slice(0, 120)}"`),
    );
    check(/Asset SOL declared/.test(await submitForm(operator, "#asset-form", { asset: "SOL", decimals: "8" })), "the operator declares SOL");
    check(/SOL-USD declared/.test(await submitForm(operator, "#spot-form", { symbol: "SOL-USD", base: "SOL", quote: "USD", tick: "0.01" })), "and SOL-USD");
    await waitFor(operator, rowWith("#console-instruments tr", 0, "SOL-USD"), "SOL-USD is listed");

    // Accounts: carol is created and funded, given a key, and logs in with it.
    check(/carol created/.test(await submitForm(operator, "#account-form", { name: "carol" })), "the operator creates carol");
    check(/Deposited 5000 USD to carol/.test(await submitForm(operator, "#transfer-form", { account: "carol", asset: "USD", amount: "5000" }, "button[value=deposits]")), "deposits 5000 USD");
    check(/Withdrew 100 USD from carol/.test(await submitForm(operator, "#transfer-form", { account: "carol", asset: "USD", amount: "100" }, "button[value=withdrawals]")), "withdraws 100 USD");
    await waitFor(operator, () => [...document.querySelectorAll("#account-balances tr")].some((row) => row.children[0].textContent === "USD" && row.children[1].textContent === "4900"), "carol's balances show 4900 USD");
    await submitForm(operator, "#transfer-form", { account: "carol", asset: "USD", amount: "100000" }, "button[value=withdrawals]").then(
      () => check(false, "an overdraft is refused"),
      (error) => check(error.message.includes("insufficient_funds"), `an overdraft is refused beside the form: "${error.message.slice(0, 100)}"`),
    );
    check(/Key bk_/.test(await submitForm(operator, "#key-form", { account: "carol", label: "carol's screen" })), "the operator creates a key for carol");
    const carolKey = { key: await operator.textContent("#new-key-id"), secret: await operator.textContent("#new-key-secret") };
    const carol = await open(browser, carolKey);
    await panelsReady(carol);
    consoleClean(carol, "carol");
    check((await cellTexts(carol, "#trades tr")).some((cells) => cells[0] === "60000"), "carol's page, opened later, shows the earlier trades");
    check((await balance(carol, "USD")).available === "4900", "carol logs in with the new key and sees 4900 USD");
    check(await carol.$$eval("#markets button", (buttons) => buttons.some((button) => button.textContent === "SOL-USD")), "carol's markets include SOL-USD");

    // Cancel all: alice's resting order leaves her screen.
    const doomed = await place(alice, "buy", "58000", "0.01");
    await waitFor(alice, rowWith("#open-orders tr", 0, doomed), `alice's order ${doomed} is open`);
    await operator.click('button[aria-label="Cancel all orders of alice"]');
    await waitFor(operator, () => document.getElementById("accounts-ok").textContent.includes("alice: 1 orders canceled"), "the operator cancels all of alice's orders");
    await waitFor(alice, `!${rowWith("#open-orders tr", 0, doomed)}`, "and they leave alice's open orders");

    // Nothing stale after a reconnection: while alice's page is cut off, bob adds to a
    // level and the operator cancels alice's order; back, her page shows both.
    const offline = await place(alice, "buy", "58500", "0.01");
    await waitFor(alice, rowWith("#bids tr", 0, "58500"), `alice's order ${offline} rests at 58500`);
    await alice.dropSocket();
    await waitFor(alice, () => document.getElementById("book-state").textContent === "reconnecting" && document.querySelectorAll("#bids tr").length === 0, "alice's page drops its book when the connection drops");
    await place(bob, "buy", "59990", "0.03");
    await operator.click('button[aria-label="Cancel all orders of alice"]');
    await waitFor(operator, () => document.getElementById("accounts-ok").textContent.includes("alice: 1 orders canceled"), "the operator cancels alice's order while she is away");
    alice.reopenSocket();
    await waitFor(alice, `[...document.querySelectorAll("#bids tr")].some((row) => row.children[0].textContent === "59990" && row.children[1].textContent === "0.08")`, "back, alice's book is rebuilt from a snapshot: bob's 0.03 at 59990 is in it");
    await waitFor(alice, `!${rowWith("#bids tr", 0, "58500")} && !${rowWith("#open-orders tr", 0, offline)}`, "and her canceled order is gone from the book and her open orders");

    // Futures: a posted price, a settlement at it, a new margin ratio.
    await operator.selectOption("#future-symbol", "SHFE.cu2501");
    check((await submitForm(operator, "#post-price-form", { price: "75000" })).includes("the next settlement is at 75000"), "the operator posts 75000 for the next settlement");
    await waitFor(operator, () => [...document.querySelectorAll("#console-futures tr")].some((row) => row.children[0].textContent === "SHFE.cu2501" && row.children[3].textContent === "75000"), "the listing shows the posted price");
    const settled = await submitForm(operator, "#settle-form", { price: "" });
    check(settled.startsWith("SHFE.cu2501 settled at 75000"), `the contract settles at the posted price: "${settled}"`);
    await waitFor(operator, () => [...document.querySelectorAll("#console-futures tr")].some((row) => row.children[0].textContent === "SHFE.cu2501" && row.children[3].textContent === "—" && row.children[5].textContent === "75000"), "the listing shows the settlement and no posted price");
    check((await submitForm(operator, "#margin-form", { margin_ratio: "0.12" })).includes("margin 45000 a lot (ratio 0.12)"), "a ratio of 0.12 gives 45000 a lot at the settlement price 75000 (0.12 x 75000 x 5)");

    // alice trades the contract: her position and futures account show it (a margin of
    // 45000 a lot, as just set).
    await alice.click('#markets button[data-symbol="SHFE.cu2501"]');
    check(await alice.isVisible("#offset-field"), "a futures market shows the offset in the ticket");
    await waitFor(alice, rowWith("#asks tr", 0, "75010"), "alice's book shows the contract's asks");
    await place(alice, "buy", "75010", "1");
    await waitFor(alice, `[...document.querySelectorAll("#positions tr")].some((row) => row.children[0].textContent === "SHFE.cu2501" && row.children[1].textContent === "1" && row.children[3].textContent === "45000")`, "alice's positions show 1 lot long, margin 45000");
    await waitFor(alice, `[...document.querySelectorAll("#futures-account tr")].some((row) => row.children[0].textContent === "CNY margin" && row.children[1].textContent === "45000")`, "her futures account's margin is 45000");
    await alice.screenshot({ path: path.join(shots, "trading-futures.png"), fullPage: true });

    // A new contract, declared from the form with a fixed margin, then expired by a
    // final settlement: it leaves the live contracts and its instrument says "expired".
    await operator.click("summary:has-text('Declare a futures contract')");
    const declared = await submitForm(operator, "#future-form", { symbol: "SHFE.cu2503", settle: "CNY", margin: "30000", margin_ratio: "", settlement_price: "" });
    check(declared.includes("SHFE.cu2503 declared, margin 30000 a lot"), `the operator declares SHFE.cu2503: "${declared}"`);
    await operator.selectOption("#future-symbol", "SHFE.cu2503");
    await operator.check("#settle-form input[name=final]");
    const expired = await submitForm(operator, "#settle-form", { price: "76000" });
    check(expired.includes("SHFE.cu2503 settled at 76000") && expired.includes("the contract has expired"), `and expires it: "${expired}"`);
    await waitFor(operator, `!${rowWith("#console-futures tr", 0, "SHFE.cu2503")} && [...document.querySelectorAll("#console-instruments tr")].some((row) => row.children[0].textContent === "SHFE.cu2503" && row.children[5].textContent === "expired")`, "it leaves the live contracts and is listed as expired");

    // Keys: carol's is revoked.
    await operator.click(`button[aria-label="Revoke key ${carolKey.key}"]`);
    await waitFor(operator, `[...document.querySelectorAll("#console-keys tr")].some((row) => row.children[0].textContent === ${JSON.stringify(carolKey.key)} && row.children[1].textContent.includes("revoked"))`, "the operator revokes carol's key");

    // SQL over the history, as a table.
    await operator.click("#sql-form button[type=submit]");
    await waitFor(operator, () => document.querySelectorAll("#sql-result td").length > 0, "the SQL box answers as a table");
    await waitFor(operator, () => document.querySelectorAll("#health-charts canvas").length >= 5, "the engine's figures are drawn as charts");
    await operator.screenshot({ path: path.join(shots, "console.png"), fullPage: true });

    // At a phone's width the screens are one column and still work.
    await alice.setViewportSize({ width: 390, height: 844 });
    await alice.screenshot({ path: path.join(shots, "trading-phone.png"), fullPage: true });
    await operator.setViewportSize({ width: 390, height: 844 });
    await operator.screenshot({ path: path.join(shots, "console-phone.png"), fullPage: true });
    for (const [who, page] of [["alice", alice], ["bob", bob], ["carol", carol], ["the operator", operator], ["the stranger", stranger]]) {
      // (A refused request is logged by the browser as a failed load: expected here.)
      const errors = page.errors.filter((error) => !error.startsWith("Failed to load resource"));
      check(errors.length === 0, `no script errors in ${who}'s page ${JSON.stringify(errors)}`);
    }
  } finally {
    await browser.close();
  }
  console.log("PASSED: trade.cjs");
}

main().catch((error) => {
  console.error(error.message || error);
  process.exit(1);
});
