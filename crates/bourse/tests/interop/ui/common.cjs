// What the browser scripts share: a check that prints what held (or throws), and the
// distribution's Chromium started headless the same way for each.

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

module.exports = { check, launch };
