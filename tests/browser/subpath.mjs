// Crawls a built site served under a sub-path, as GitHub Pages serves a project site
// (https://OWNER.github.io/REPO/): opens every page the site links to in Debian's chromium,
// follows every link, and fetches every other file a page names. Run by tests/site_browser.rs.
//
//   node tests/browser/subpath.mjs CHROMIUM BASE     (BASE: http://127.0.0.1:PORT/repo-name/)
//
// Prints {pages, files, failures} as JSON; a failure is a request that did not succeed, a
// request or link that leaves BASE (an absolute `/…` link breaks under a sub-path), or a
// console error. Exits 1 when there is any.
import { chromium } from "playwright-core";

const [executablePath, base] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const origin = new URL(base).origin;
const failures = [];
const pages = [];
const files = new Set();
const seen = new Set([base]);
const queue = [base];
const isPage = (u) => u.endsWith("/") || u.endsWith(".html");
const inside = (u) => u.startsWith(base) || u.startsWith("data:") || u.startsWith("blob:");

while (queue.length > 0 && pages.length < 200) {
  const url = queue.shift();
  const page = await browser.newPage();
  page.on("console", (m) => { if (m.type() === "error") failures.push(`${url}: console: ${m.text()}`); });
  page.on("pageerror", (e) => failures.push(`${url}: ${e.message}`));
  page.on("requestfailed", (r) => failures.push(`${url}: ${r.url()} failed (${r.failure()?.errorText})`));
  page.on("response", (r) => {
    if (r.status() >= 400) failures.push(`${url}: ${r.url()} answered ${r.status()}`);
  });
  page.on("request", (r) => {
    if (!inside(r.url())) failures.push(`${url}: requests ${r.url()}, outside ${base}`);
  });
  const res = await page.goto(url, { waitUntil: "networkidle" });
  if (!res || !res.ok()) failures.push(`${url}: status ${res?.status()}`);
  const links = await page.$$eval("a[href], link[href], script[src], img[src], iframe[src]",
    (els) => els.map((e) => e.href || e.src));
  pages.push({ url: url.slice(base.length) || "./", links: links.length });
  for (const raw of links) {
    const u = raw.split("#")[0];
    if (!u.startsWith(origin)) continue; // another site: not this test's business
    if (!u.startsWith(base)) { failures.push(`${url}: links to ${raw}, outside ${base}`); continue; }
    if (seen.has(u)) continue;
    seen.add(u);
    if (isPage(u)) { queue.push(u); continue; }
    files.add(u);
    const r = await page.request.get(u);
    if (!r.ok()) failures.push(`${url}: ${u} answered ${r.status()}`);
  }
  await page.close();
}
await browser.close();
console.log(JSON.stringify({ pages, files: [...files].map((f) => f.slice(base.length)), failures }, null, 1));
process.exit(failures.length > 0 ? 1 : 0);
