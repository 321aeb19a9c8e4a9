// A chunked timeline in Debian's chromium: the overview first, a hover over a stream, then a
// link's window whose chunks load, and that window's range table beside the same run's loaded
// whole. Run by tests/site_browser.rs, which compares the two; prints what it saw as JSON.
//
//   node tests/browser/chunks.mjs CONFIG.json
//
// CONFIG: { chromium, chunked: url, whole: url, hash, stream_y, screenshot }
import { readFileSync } from "node:fs";
import { chromium } from "playwright-core";

const cfg = JSON.parse(readFileSync(process.argv[2], "utf8"));
const browser = await chromium.launch({
  executablePath: cfg.chromium,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
});
const errors = [];

async function open(url) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(url);
  await page.waitForSelector("html[data-viewer]", { timeout: 60000 });
  return page;
}

// Waits until the chunk line says the window's kernels are loaded.
async function loaded(page) {
  for (let i = 0; i < 300; i++) {
    const t = await page.textContent("#tl-chunks");
    if (/ loaded /.test(t)) return t;
    await page.waitForTimeout(50);
  }
  return await page.textContent("#tl-chunks");
}

const out = {};
const page = await open(cfg.chunked);
out.state = await page.getAttribute("html", "data-viewer");
out.summary = await page.textContent("#tl-status");
await page.waitForTimeout(300);
out.overview = await page.textContent("#tl-chunks");
const box = await (await page.$("#tl-canvas")).boundingBox();
await page.mouse.move(box.x + box.width / 2, box.y + cfg.stream_y);
await page.waitForTimeout(200);
out.tooltip = await page.textContent("#tl-tip");
await page.screenshot({ path: cfg.screenshot });
// The link's window: its chunks load, then its range table.
await page.evaluate((h) => { window.location.hash = h; }, cfg.hash);
out.loaded = await loaded(page);
out.range_chunked = await page.evaluate(() => window.llmprofTimeline.view.select_visible());
out.window_chunked = await page.evaluate(() => Array.from(window.llmprofTimeline.view.window()));
await page.close();

const whole = await open(cfg.whole + "#" + cfg.hash);
out.whole_chunks = await whole.textContent("#tl-chunks");
out.range_whole = await whole.evaluate(() => window.llmprofTimeline.view.select_visible());
out.window_whole = await whole.evaluate(() => Array.from(window.llmprofTimeline.view.window()));
out.errors = errors;
await browser.close();
console.log(JSON.stringify(out));
