// The trading screen in a real browser (headless Chromium from the distribution, driven
// by Playwright's core): run by tests/ui_browser.rs against `bourse serve --demo`.
// alice logs in and places an order that rests; she sees it in the book and in her
// open orders; bob, in a browser of his own, places an order that fills it; both see
// the fill and their balances change; alice cancels another order; a bad key gets a
// clear message. Screenshots of each screen go to SCREENSHOT_DIR.
//
// Environment: BOURSE_URL, BOURSE_{ALICE,BOB}_{KEY,SECRET}, CHROMIUM (the browser's
// path), SCREENSHOT_DIR. Prints every check; exits non-zero on the first failure.

const { chromium } = require("playwright-core");
const path = require("path");

const url = process.env.BOURSE_URL;
const shots = process.env.SCREENSHOT_DIR;
const TIMEOUT = 15_000;

function check(condition, what) {
  if (!condition) throw new Error(`FAILED: ${what}`);
  console.log(`ok: ${what}`);
}

async function open(browser, who) {
  const page = await browser.newPage({ viewport: { width: 1300, height: 1000 } });
  const errors = [];
  page.on("pageerror", (error) => errors.push(String(error)));
  page.on("console", (message) => { if (message.type() === "error") errors.push(message.text()); });
  page.errors = errors;
  await page.goto(url + "/");
  if (who) {
    await page.fill("#login-key", process.env[`BOURSE_${who.toUpperCase()}_KEY`]);
    await page.fill("#login-secret", process.env[`BOURSE_${who.toUpperCase()}_SECRET`]);
    await page.click("#login-form button[type=submit]");
    await page.waitForSelector("#trading:not([hidden])", { timeout: TIMEOUT });
    await page.waitForFunction(() => document.querySelectorAll("#bids tr").length > 0, null, { timeout: TIMEOUT });
  }
  return page;
}

async function place(page, side, price, qty) {
  await page.check(`#ticket input[name=side][value=${side}]`);
  await page.selectOption("#ticket select[name=type]", "limit");
  await page.fill("#ticket input[name=price]", price);
  await page.fill("#ticket input[name=qty]", qty);
  await page.click("#place");
  await page.waitForFunction(() => document.getElementById("ticket-ok").textContent || document.getElementById("ticket-error").textContent, null, { timeout: TIMEOUT });
  const error = await page.textContent("#ticket-error");
  check(!error, `${side} ${qty} at ${price} accepted${error ? ` (${error})` : ""}`);
  const answer = await page.textContent("#ticket-ok");
  return answer.match(/Order (\d+)/)[1];
}

const cellTexts = (page, selector) => page.$$eval(selector, (rows) => rows.map((row) => [...row.children].map((cell) => cell.textContent)));

async function balance(page, asset) {
  const rows = await cellTexts(page, "#balances tr");
  const row = rows.find((cells) => cells[0] === asset);
  return row ? { available: row[1], held: row[2] } : null;
}

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    // A bad key: a clear message where the user acted.
    const stranger = await open(browser, null);
    await stranger.fill("#login-key", "bk_nobody");
    await stranger.fill("#login-secret", "0".repeat(64));
    await stranger.click("#login-form button[type=submit]");
    await stranger.waitForFunction(() => document.getElementById("login-error").textContent, null, { timeout: TIMEOUT });
    check((await stranger.textContent("#login-error")).includes("not accepted"), `a bad key is told so: "${await stranger.textContent("#login-error")}"`);
    await stranger.screenshot({ path: path.join(shots, "login-refused.png") });

    const alice = await open(browser, "alice");
    const bob = await open(browser, "bob");
    const aliceUsdBefore = await balance(alice, "USD");
    const bobBtcBefore = await balance(bob, "BTC");

    // alice rests a buy between the best bid (59995) and ask (60005): the new best bid.
    const resting = await place(alice, "buy", "60000", "0.02");
    await alice.waitForFunction(() => [...document.querySelectorAll("#bids tr")].some((row) => row.children[0].textContent === "60000"), null, { timeout: TIMEOUT });
    check(true, "alice's order is in the book (60000)");
    await alice.waitForFunction((id) => [...document.querySelectorAll("#open-orders tr")].some((row) => row.children[0].textContent === id), resting, { timeout: TIMEOUT });
    check(true, `alice's order ${resting} is in her open orders`);
    await bob.waitForFunction(() => [...document.querySelectorAll("#bids tr")].some((row) => row.children[0].textContent === "60000"), null, { timeout: TIMEOUT });
    check(true, "bob's screen shows alice's order in the book");
    await alice.screenshot({ path: path.join(shots, "trading-resting.png"), fullPage: true });

    // bob sells into it: both see the fill, and their balances move.
    await place(bob, "sell", "60000", "0.02");
    for (const [who, page] of [["alice", alice], ["bob", bob]]) {
      await page.waitForFunction(() => [...document.querySelectorAll("#fills tr")].some((row) => row.children[2].textContent === "60000"), null, { timeout: TIMEOUT });
      check(true, `${who} sees the fill at 60000`);
    }
    await alice.waitForFunction((id) => ![...document.querySelectorAll("#open-orders tr")].some((row) => row.children[0].textContent === id), resting, { timeout: TIMEOUT });
    check(true, "the filled order left alice's open orders");
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

    // alice cancels another order.
    const other = await place(alice, "buy", "59000", "0.01");
    await alice.waitForFunction((id) => [...document.querySelectorAll("#open-orders tr")].some((row) => row.children[0].textContent === id), other, { timeout: TIMEOUT });
    await alice.click(`button[aria-label="Cancel order ${other}"]`);
    await alice.waitForFunction((id) => ![...document.querySelectorAll("#open-orders tr")].some((row) => row.children[0].textContent === id), other, { timeout: TIMEOUT });
    check(true, `alice canceled order ${other}`);

    // The operator halts BTC-USD from the console; alice's next order is refused, and
    // the ticket says why. An SQL query over the history answers as a table.
    const operator = await browser.newPage({ viewport: { width: 1300, height: 900 } });
    operator.errors = [];
    operator.on("pageerror", (error) => operator.errors.push(String(error)));
    await operator.goto(url + "/");
    await operator.fill("#login-key", process.env.BOURSE_ADMIN_KEY);
    await operator.fill("#login-secret", process.env.BOURSE_ADMIN_SECRET);
    await operator.click("#login-form button[type=submit]");
    await operator.waitForSelector("#console:not([hidden])", { timeout: TIMEOUT });
    await operator.click('button[aria-label="Halt BTC-USD"]');
    await operator.waitForSelector('button[aria-label="Resume BTC-USD"]', { timeout: TIMEOUT });
    check(true, "the operator halted BTC-USD from the console");
    await operator.click("#sql-form button[type=submit]");
    await operator.waitForFunction(() => document.querySelectorAll("#sql-result td").length > 0, null, { timeout: TIMEOUT });
    check(true, `the SQL box answers as a table: ${await operator.textContent("#sql-result")}`);
    await operator.waitForFunction(() => [...document.querySelectorAll("#health td")].some((cell) => cell.textContent !== "—"), null, { timeout: TIMEOUT });
    await operator.screenshot({ path: path.join(shots, "console.png"), fullPage: true });
    await alice.check("#ticket input[name=side][value=buy]");
    await alice.fill("#ticket input[name=price]", "59000");
    await alice.fill("#ticket input[name=qty]", "0.01");
    await alice.click("#place");
    await alice.waitForFunction(() => document.getElementById("ticket-error").textContent, null, { timeout: TIMEOUT });
    check((await alice.textContent("#ticket-error")).includes("instrument_halted"), `the ticket shows the halt: "${await alice.textContent("#ticket-error")}"`);
    await alice.screenshot({ path: path.join(shots, "trading-halted.png") });
    await operator.click('button[aria-label="Resume BTC-USD"]');
    await operator.waitForSelector('button[aria-label="Halt BTC-USD"]', { timeout: TIMEOUT });
    check(operator.errors.length === 0, `no script errors in the console ${JSON.stringify(operator.errors)}`);

    // At a phone's width the screen is one column and still works.
    await alice.setViewportSize({ width: 390, height: 844 });
    await alice.screenshot({ path: path.join(shots, "trading-phone.png"), fullPage: true });
    for (const [who, page] of [["alice", alice], ["bob", bob], ["the stranger", stranger]]) {
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
