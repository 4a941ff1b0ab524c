// What the browser scripts share: a check that prints what held (or throws), the
// distribution's Chromium started headless the same way for each, and an order placed
// from the ticket.

const { chromium } = require("playwright-core");

function check(condition, what) {
  if (!condition) throw new Error(`FAILED: ${what}`);
  console.log(`ok: ${what}`);
}

// Headless Chromium at CHROMIUM, with nothing that reaches beyond this machine.
function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

// Places a limit order from the page's ticket; its exchange order id. The ticket's last
// answer is cleared first, so that the one waited for is this order's.
async function place(page, side, price, qty, timeout = 15_000) {
  await page.evaluate(() => { document.getElementById("ticket-ok").textContent = ""; document.getElementById("ticket-error").textContent = ""; });
  await page.check(`#ticket input[name=side][value=${side}]`);
  await page.selectOption("#ticket select[name=type]", "limit");
  await page.fill("#ticket input[name=price]", price);
  await page.fill("#ticket input[name=qty]", qty);
  await page.click("#place");
  await page.waitForFunction(() => document.getElementById("ticket-ok").textContent || document.getElementById("ticket-error").textContent, null, { timeout });
  const error = await page.textContent("#ticket-error");
  check(!error, `${side} ${qty} at ${price} accepted on ${new URL(page.url()).host}${error ? ` (${error})` : ""}`);
  return (await page.textContent("#ticket-ok")).match(/Order (\d+)/)[1];
}

module.exports = { check, launch, place };
