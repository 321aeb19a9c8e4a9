// The rank lanes' benchmark: opens rank 1 of the two-H200 sample run's timeline from file://,
// ticks rank 0 beside it and unticks it five times (the time from the click until the status
// line says both ranks are shown: loading rank 0's scripts, merging, the first frame), then
// selects the visible window. Prints the canvas heights, the times, the link and the range
// summary as JSON.
//
//   node tests/browser/rank_toggle.mjs CHROMIUM SITE   (SITE: a site built from the sample runs)
import { chromium } from "playwright-core";
const [executablePath, site] = process.argv.slice(2);
const id = "20261126-034958-qwen2.5-0.5b-standard";
const b = await chromium.launch({ executablePath, args: ["--no-sandbox", "--disable-gpu"] });
const page = await b.newPage({ viewport: { width: 1400, height: 1000 } });
const errors = [];
page.on("pageerror", (e) => errors.push(e.message));
page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
await page.goto(`file://${site}/timeline.html#run=${id}/ranks/1`);
await page.waitForFunction(() => document.documentElement.getAttribute("data-viewer") === "ready");
const h0 = await page.evaluate(() => document.getElementById("tl-canvas").clientHeight);
const times = [];
for (let i = 0; i < 5; i++) {
  const t0 = Date.now();
  await page.click(`input[data-rank="${id}/ranks/0"]`);
  await page.waitForFunction(() => /side by side/.test(document.getElementById("tl-status").textContent));
  times.push(Date.now() - t0);
  await page.click(`input[data-rank="${id}/ranks/0"]`);
  await page.waitForFunction(() => !/side by side/.test(document.getElementById("tl-status").textContent));
}
await page.click(`input[data-rank="${id}/ranks/0"]`);
await page.waitForFunction(() => /side by side/.test(document.getElementById("tl-status").textContent));
await page.waitForTimeout(400);
const h1 = await page.evaluate(() => document.getElementById("tl-canvas").clientHeight);
const hash = await page.evaluate(() => window.location.hash);
await page.keyboard.press("s");
const range = await page.evaluate(() => document.getElementById("tl-range-summary").textContent);
const status = await page.evaluate(() => document.getElementById("tl-status").textContent);
console.log(JSON.stringify({ h0, h1, times, hash, range, status, errors }, null, 1));
await b.close();
