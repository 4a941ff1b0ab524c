// The trading screen following a cluster's leader, in a real browser (headless Chromium
// from the distribution, driven by Playwright's core): run by tests/cluster_cli.rs
// against three `bourse serve --demo` nodes.
//
// - alice opens the screen on a follower and logs in: the screen moves to the leader
//   (carrying the login; the address keeps no trace of it) and she places an order.
// - The script prints `KILL THE LEADER` and the test kills it with SIGKILL. The screen,
//   whose node stopped answering, moves to a node that answers and from there to the
//   new leader once there is one, still logged in; alice places another order, and
//   sees both open.
//
// Environment: BOURSE_FOLLOWER, BOURSE_LEADER (host:port of each node's REST),
// BOURSE_ALICE_{KEY,SECRET}, CHROMIUM. Prints every check; exits non-zero on the first
// failure.

const { check, launch, place } = require("./common.cjs");

const follower = process.env.BOURSE_FOLLOWER;
const leader = process.env.BOURSE_LEADER;
const TIMEOUT = 20_000;

const hostOf = (page) => new URL(page.url()).host;

// Waits until the page shows the trading screen, with a book, on a node other than
// `not` (when given); returns that node.
async function trading(page, not) {
  await page.waitForFunction(
    (not) => {
      // (During a move the page may be the browser's own, without the screen.)
      const screen = document.getElementById("trading");
      return location.host !== not && screen !== null && !screen.hidden && document.querySelectorAll("#bids tr").length > 0;
    },
    not || "",
    { timeout: TIMEOUT },
  );
  return hostOf(page);
}

async function main() {
  const browser = await launch();
  try {
    const page = await browser.newPage({ viewport: { width: 1300, height: 1000 } });
    const errors = [];
    page.on("pageerror", (error) => errors.push(String(error)));
    page.on("console", (message) => console.log(`console: ${message.text()}`));
    page.on("framenavigated", (frame) => { if (frame === page.mainFrame()) console.log(`page at ${frame.url().replace(/#.*/, "#...")}`); });
    await page.goto(`http://${follower}/`);
    await page.fill("#login-key", process.env.BOURSE_ALICE_KEY);
    await page.fill("#login-secret", process.env.BOURSE_ALICE_SECRET);
    await page.click("#login-form button[type=submit]");
    const first = await trading(page, follower);
    check(first === leader, `logged in on a follower, the screen moves to the leader (${first})`);
    check(!page.url().includes("resume") && !page.url().includes(process.env.BOURSE_ALICE_SECRET), "the address keeps no trace of the login");
    const before = await place(page, "buy", "50000", "0.001", TIMEOUT);

    console.log("KILL THE LEADER");
    // The screen leaves the dead node for one that answers, still logged in, and
    // ends on the new leader (once there is one).
    const landed = await trading(page, leader);
    check(landed !== leader, `after the leader's death the screen is on ${landed}, still logged in`);
    const deadline = Date.now() + TIMEOUT;
    for (;;) {
      const view = await page.evaluate(() => fetch("/v1/cluster").then((answer) => answer.json())).catch(() => null);
      if (view && view.is_leader && view.leader === view.node) break;
      if (Date.now() > deadline) throw new Error(`FAILED: the screen did not reach the new leader (on ${hostOf(page)})`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const next = await trading(page, leader);
    check(true, `the screen is on the new leader ${next}`);
    const after = await place(page, "buy", "50001", "0.001", TIMEOUT);
    await page.waitForFunction(
      (ids) => ids.every((id) => [...document.querySelectorAll("#open-orders tr")].some((row) => row.textContent.includes(id))),
      [before, after],
      { timeout: TIMEOUT },
    );
    check(true, `both orders (${before} before the kill, ${after} after) are open on ${hostOf(page)}`);
    check(errors.length === 0, `no script error (${errors.join("; ")})`);
    console.log("PASSED: cluster.cjs");
  } finally {
    await browser.close();
  }
}

main().catch((error) => {
  console.error(error.message);
  process.exit(1);
});
