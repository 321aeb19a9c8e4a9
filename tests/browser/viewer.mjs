// Drives the site's WASM viewer in Debian's chromium with real input events and prints what
// it saw as JSON. Run by tests/viewer_browser.rs, which checks the numbers against the Rust
// side; it fails here (exit 1) on anything it can judge alone.
//
//   node tests/browser/viewer.mjs CONFIG.json
//
// CONFIG: { chromium, bases: [url...], run, kernel, kernel_name, kernel_duration, screenshot,
//           compare_screenshot, diffs: [[run id, run id]...] }
import { readFileSync } from "node:fs";
import { chromium } from "playwright-core";

const cfg = JSON.parse(readFileSync(process.argv[2], "utf8"));

function check(ok, what) {
  if (!ok) throw new Error(what);
}

const browser = await chromium.launch({
  executablePath: cfg.chromium,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});

// Records the text the comparison draws on its canvas (text, alignment, baseline), so the
// test can read the numbers the canvas shows.
function recordCanvasText() {
  const fill = CanvasRenderingContext2D.prototype.fillText;
  window.__cmpText = [];
  CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) {
    if (this.canvas && this.canvas.id === "cmp-canvas") {
      window.__cmpText.push({ text: String(text), align: this.textAlign, baseline: this.textBaseline });
    }
    return fill.call(this, text, ...rest);
  };
}

async function open(url) {
  // A 2× device-pixel ratio checks that the canvas is drawn sharp on high-DPI screens.
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 }, deviceScaleFactor: 2 });
  await page.addInitScript(recordCanvasText);
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(url);
  await page.waitForSelector("html[data-viewer]", { timeout: 60000 });
  const state = await page.getAttribute("html", "data-viewer");
  const status = await page.textContent("#tl-status, #cmp-status");
  check(state === "ready", `${url}: viewer state ${state}: ${status}`);
  return { page, errors };
}

// Calls a method of the page's TimelineView (no eval: the site's CSP forbids it).
const view = (page, method, ...args) => page.evaluate(
  ([m, a]) => {
    const r = window.llmprofTimeline.view[m](...a);
    return ArrayBuffer.isView(r) ? Array.from(r) : r;
  }, [method, args]);

// The interval a label stands for: "607" is 606.5 to 607.5, "35.2" 35.15 to 35.25.
function within(label, value) {
  const text = label.replace(/,/g, "");
  const x = Number(text);
  if (!Number.isFinite(x)) return false;
  const dot = text.indexOf(".");
  const half = 0.5 * Math.pow(10, dot < 0 ? 0 : -(text.length - dot - 1));
  return Math.abs(x - value) <= half + 1e-9 * Math.max(1, Math.abs(value));
}

// Sorted label texts against sorted values: rounding keeps the order, so the i-th of each
// must agree.
function sameNumbers(labels, values, what) {
  check(labels.length === values.length,
    `${what}: the canvas shows ${labels.length} numbers [${labels}], the tables ${values.length} [${values}]`);
  const l = labels.slice().sort((a, b) => Number(a.replace(/,/g, "")) - Number(b.replace(/,/g, "")));
  const v = values.slice().sort((a, b) => a - b);
  l.forEach((x, i) => check(within(x, v[i]), `${what}: the canvas shows ${x}, the table ${v[i]}`));
  return values.length;
}

// The compare page's tables (rendered by site build) and its canvas (drawn by the wasm viewer
// from the runs' bundles) show the same numbers for the picked runs. Returns how many numbers
// were compared.
async function compareTablesMatchCanvas(page) {
  const tables = await page.evaluate(() => {
    const read = (id) => {
      const t = document.getElementById(id);
      const heads = Array.from(t.querySelectorAll("thead th"), (th) => th.textContent);
      const rows = Array.from(t.querySelectorAll("tbody tr"), (tr) => {
        const tds = Array.from(tr.children);
        return { label: tds[0].textContent, values: tds.slice(1).map((td) => td.hasAttribute("data-value") ? Number(td.getAttribute("data-value")) : null) };
      });
      return { heads, rows };
    };
    return {
      stages: read("compare-stages-table"),
      efficiency: read("compare-efficiency-table"),
      token: read("compare-mix-token-table"),
      picked: Array.from(document.querySelectorAll("input.cmp-pick:checked"), (c) => c.getAttribute("data-run")),
    };
  });
  check(tables.picked.length >= 2, "the compare page picks two or more runs");
  // Draw the picked runs once more, per processed token, as compare.js does, and read what
  // the canvas wrote.
  await page.evaluate(() => {
    window.__cmpText = [];
    const ids = Array.from(document.querySelectorAll("input.cmp-pick:checked"), (c) => c.value);
    window.llmprofCompare.render(ids.join(","), "token", window.devicePixelRatio || 1);
  });
  const drawn = await page.evaluate(() => window.__cmpText);
  const at = (title) => drawn.findIndex((t) => t.text === title);
  const segments = [
    "Median wall time per stage instance (ms)",
    "MFU / MBU over stage wall time (%)",
    "Decode tokens/s",
    "Prefill tokens/s (prompt tokens × batch / median prefill wall)",
    "Kernel time in the measured stages by category, per processed token (µs)",
  ].map(at);
  segments.forEach((i) => check(i >= 0, `a chart title is missing from the canvas: ${JSON.stringify(drawn.slice(0, 40))}`));
  const bars = (k) => drawn.slice(segments[k], segments[k + 1])
    .filter((t) => t.align === "center" && t.baseline === "bottom").map((t) => t.text);
  const column = (table, id) => table.heads.indexOf(id) - 1;
  const values = (table, rows) => tables.picked.flatMap((id) => {
    const c = column(table, id);
    check(c >= 0, `run ${id} has no column in the tables`);
    return table.rows.filter(rows).map((r) => r.values[c]).filter((v) => v !== null);
  });
  const eff = (labels) => (r) => labels.includes(r.label);
  let n = 0;
  n += sameNumbers(bars(0), values(tables.stages, () => true), "median stage time");
  n += sameNumbers(bars(1), values(tables.efficiency, eff(["Prefill MFU (%)", "Prefill MBU (%)", "Decode MFU (%)", "Decode MBU (%)"])), "MFU/MBU");
  n += sameNumbers(bars(2), values(tables.efficiency, eff(["Decode tokens/s"])), "decode tokens/s");
  n += sameNumbers(bars(3), values(tables.efficiency, eff(["Prefill tokens/s (prompt tokens × batch / median prefill wall)"])), "prefill tokens/s");
  // The mix: each run's total per processed token, drawn after its title as "title · total".
  const totals = drawn.slice(segments[4]).filter((t) => t.text.includes(" · ")).map((t) => t.text.split(" · ").pop());
  n += sameNumbers(totals, values(tables.token, (r) => r.label === "Total"), "kernel time per token");
  return n;
}

// The "Diff of two runs" section: with other than two runs ticked it asks for two; with the
// pair ticked (through #runs=, as the index links) it shows their diff. Returns what each
// row showed: its key, cell texts and data-value attributes, and the notes.
async function diffsOfPairs(page, pairs) {
  const res = { untick: await page.innerText("#cmp-diff-status"), diffs: [] };
  for (const pair of pairs) {
    const want = pair.slice().sort().join(",");
    await page.evaluate((p) => { window.location.hash = "runs=" + p.map(encodeURIComponent).join(","); }, pair);
    await page.waitForSelector(`#cmp-diff-table[data-runs="${want}"]`, { state: "attached", timeout: 30000 });
    const d = await page.evaluate(() => ({
      status: document.getElementById("cmp-diff-status").textContent,
      visible: !document.getElementById("cmp-diff-table").classList.contains("hidden"),
      rows: Array.from(document.querySelectorAll("#cmp-diff-table tbody tr"), (tr) => ({
        key: tr.getAttribute("data-key"),
        cells: Array.from(tr.cells, (c) => c.textContent),
        values: Array.from(tr.cells, (c) => c.getAttribute("data-value")),
      })),
      notes: Array.from(document.querySelectorAll("#cmp-diff-notes li"), (li) => li.textContent),
    }));
    const [a, b] = want.split(",");
    check(d.visible && d.status.includes(`B = ${b} against A = ${a}`), `diff status: ${d.status}`);
    res.diffs.push(Object.assign({ a, b }, d));
  }
  return res;
}

const out = { bases: {} };
for (const base of cfg.bases) {
  const res = {};
  const { page, errors } = await open(`${base}timeline.html#run=${encodeURIComponent(cfg.run)}`);
  const canvas = page.locator("#tl-canvas");

  // The canvas is drawn, at device resolution.
  const drawn = await page.evaluate(() => {
    const c = document.getElementById("tl-canvas");
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let inked = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] < 235 || d[i + 1] < 235 || d[i + 2] < 235) inked++;
    return { inked, width: c.width, css: c.getBoundingClientRect().width };
  });
  check(drawn.inked > 20000, `${base}: canvas nearly blank (${drawn.inked} inked pixels)`);
  check(Math.abs(drawn.width - 2 * drawn.css) <= 2, `${base}: canvas ${drawn.width} px for ${drawn.css} CSS px at DPR 2`);
  res.inked = drawn.inked;

  // Hover a known kernel (the run's longest): zoom to it through the URL hash, then point.
  const span = await view(page, "kernel_span", cfg.kernel);
  check(span.length === 2, `kernel ${cfg.kernel} has no span`);
  const pad = Math.max(2000, (span[1] - span[0]) * 3);
  await page.evaluate((h) => { window.location.hash = h; },
    `run=${encodeURIComponent(cfg.run)}&t=${Math.floor(span[0] - pad)}-${Math.ceil(span[1] + pad)}`);
  await page.waitForFunction((s) => {
    const w = window.llmprofTimeline.view.window();
    return Math.abs(w[0] - s) < 1;
  }, Math.floor(span[0] - pad));
  const loc = await view(page, "locate_kernel", cfg.kernel);
  check(loc.length === 2, "the kernel is off screen after zooming to it");
  const box = await canvas.boundingBox();
  await page.mouse.move(box.x + loc[0], box.y + loc[1]);
  await page.waitForSelector("#tl-tip:not(.hidden)", { timeout: 5000 });
  res.tooltip = await page.innerText("#tl-tip");
  check(res.tooltip.includes(cfg.kernel_name), `tooltip lacks the kernel name ${cfg.kernel_name}:\n${res.tooltip}`);
  check(res.tooltip.includes(cfg.kernel_duration), `tooltip lacks the duration ${cfg.kernel_duration}:\n${res.tooltip}`);
  check(/In stage/.test(res.tooltip) && /Grid \/ block/.test(res.tooltip) && /Category/.test(res.tooltip),
    `tooltip lacks stage offset, grid/block or category:\n${res.tooltip}`);

  // A click pins it.
  await page.mouse.click(box.x + loc[0], box.y + loc[1]);
  await page.waitForSelector("#tl-pinned-section:not(.hidden)");
  res.pinned = await page.innerText("#tl-pinned");
  check(res.pinned.includes(cfg.kernel_name), "the pinned panel lacks the kernel");

  // The keyboard inspects too: "n" pins the next kernel in time order.
  await page.keyboard.press("n");
  const nextPinned = await page.innerText("#tl-pinned");
  check(nextPinned !== res.pinned && /Kernel/.test(nextPinned), "'n' did not pin the next kernel");
  await page.keyboard.press("p");
  check((await page.innerText("#tl-pinned")) === res.pinned, "'p' did not go back to the kernel");

  // Zoom: the wheel zooms in around the pointer, "-" zooms out, "0" shows the whole run.
  await page.keyboard.press("0");
  const whole = await view(page, "window");
  const cx = box.x + box.width * 0.6, cy = box.y + loc[1];
  await page.mouse.move(cx, cy);
  await page.mouse.wheel(0, -600);
  await page.waitForFunction((w) => window.llmprofTimeline.view.window()[1] - window.llmprofTimeline.view.window()[0] < (w[1] - w[0]) * 0.5, whole);
  const zoomed = await view(page, "window");
  await page.keyboard.press("-");
  const out1 = await view(page, "window");
  check(out1[1] - out1[0] > zoomed[1] - zoomed[0], "'-' did not zoom out");
  // Drag pans: moving the pointer left shows later times.
  await page.mouse.move(cx, cy);
  await page.mouse.down();
  await page.mouse.move(cx - 200, cy, { steps: 4 });
  await page.mouse.up();
  const panned = await view(page, "window");
  check(panned[0] > out1[0], "dragging left did not pan to later times");
  res.zoom = { whole, zoomed, out: out1, panned };

  // A click on a stage bar zooms to that stage instance.
  await page.keyboard.press("0");
  const stageX = box.x + 132 + (box.width - 132) * 0.5, stageY = box.y + 26 + 4 + 11;
  const clickedT = whole[0] + (whole[1] - whole[0]) * 0.5;
  await page.mouse.click(stageX, stageY);
  const stageWin = await view(page, "window");
  check(stageWin[1] - stageWin[0] < (whole[1] - whole[0]) * 0.98 && stageWin[0] <= clickedT && clickedT <= stageWin[1],
    `clicking the stage bar at ${clickedT} ns gave the window ${stageWin}`);
  res.stage_click = { t: clickedT, window: stageWin };

  // Range selection: Shift+drag over the middle of the plot.
  await page.keyboard.press("0");
  const x0 = box.x + 132 + (box.width - 132) * 0.3, x1 = box.x + 132 + (box.width - 132) * 0.7;
  await page.keyboard.down("Shift");
  await page.mouse.move(x0, cy);
  await page.mouse.down();
  await page.mouse.move(x1, cy, { steps: 6 });
  await page.mouse.up();
  await page.keyboard.up("Shift");
  await page.waitForSelector("#tl-range-section:not(.hidden)");
  res.range_summary = await page.innerText("#tl-range-summary");
  res.range_rows = await page.$$eval("#tl-range tbody tr", (rows) => rows.map((r) => Array.from(r.cells, (c) => c.textContent)));
  check(res.range_rows.length > 0, "the range table is empty");

  // Search highlights matching kernels.
  await page.fill("#tl-search", "/gemm|gemv/");
  res.search = await page.innerText("#tl-search-status");
  check(/match/.test(res.search), `search status: ${res.search}`);
  await page.fill("#tl-search", "/([/");
  const bad = await page.innerText("#tl-search-status");
  check(/not a valid regular expression/.test(bad), `a bad regex says: ${bad}`);
  await page.fill("#tl-search", "gemm");

  // The URL hash holds the view; a fresh page with it shows the same view.
  // The address is written 250 ms after the last change.
  await page.waitForTimeout(600);
  res.hash = await view(page, "hash");
  const url = await page.url();
  check(url.endsWith("#" + res.hash), `the address ${url} does not hold the view ${res.hash}`);
  const again = await open(`${base}timeline.html#${res.hash}`);
  const hash2 = await view(again.page, "hash");
  check(hash2 === res.hash, `a link restored ${hash2}, not ${res.hash}`);
  check(await again.page.isVisible("#tl-range-section"), "a link did not restore the range table");
  check(await again.page.isVisible("#tl-pinned-section"), "a link did not restore the pinned kernel");
  check((await again.page.inputValue("#tl-search")) === "gemm", "a link did not restore the search");
  if (cfg.screenshot && base.startsWith("http")) {
    await again.page.screenshot({ path: cfg.screenshot, fullPage: true });
  }
  // The run picker switches runs.
  const options = await page.$$eval("#tl-run option", (os) => os.map((o) => o.value));
  const other = options.find((v) => v !== cfg.run);
  check(other, "the sample site has a second run with a timeline");
  await page.selectOption("#tl-run", other);
  await page.waitForFunction((id) => window.llmprofTimeline.view.hash().startsWith("run=" + encodeURIComponent(id) + "&"), other);
  res.switched_to = other;
  check(errors.length === 0 && again.errors.length === 0, `console: ${errors.concat(again.errors).join("\n")}`);
  await again.page.close();
  await page.close();

  // The comparison draws, and exports SVG.
  const cmp = await open(`${base}compare.html`);
  const cmpInk = await cmp.page.evaluate(() => {
    const c = document.getElementById("cmp-canvas");
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let inked = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] < 235 || d[i + 1] < 235 || d[i + 2] < 235) inked++;
    return inked;
  });
  check(cmpInk > 20000, `compare canvas nearly blank (${cmpInk})`);
  const svg = await cmp.page.evaluate(() => window.llmprofCompare.svg(
    Array.from(document.querySelectorAll("input.cmp-pick:checked"), (c) => c.value).join(","), "share"));
  check(svg.startsWith("<svg") && svg.includes("</svg>"), "the SVG export is not an SVG document");
  // The export buttons download the figure (http only: downloads from file:// pages are the
  // same code path).
  if (base.startsWith("http")) {
    for (const [button, ext] of [["#cmp-png", ".png"], ["#cmp-svg", ".svg"]]) {
      const [dl] = await Promise.all([cmp.page.waitForEvent("download"), cmp.page.click(button)]);
      check(dl.suggestedFilename().endsWith(ext), `${button} saved ${dl.suggestedFilename()}`);
      const path = await dl.path();
      const bytes = readFileSync(path);
      check(bytes.length > 5000, `${button} saved ${bytes.length} bytes`);
      if (ext === ".png") check(bytes[0] === 0x89 && bytes[1] === 0x50, "the PNG export is not a PNG");
    }
  }
  res.compare_checked = await compareTablesMatchCanvas(cmp.page);
  res.compare_status = await cmp.page.innerText("#cmp-status");
  const diffs = await diffsOfPairs(cmp.page, cfg.diffs || []);
  res.diff_untick_status = diffs.untick;
  res.diffs = diffs.diffs;
  if (cfg.compare_screenshot && base.startsWith("http")) {
    await cmp.page.screenshot({ path: cfg.compare_screenshot, fullPage: true });
  }
  check(cmp.errors.length === 0, `compare console: ${cmp.errors.join("\n")}`);
  await cmp.page.close();
  out.bases[base] = res;
}
await browser.close();
console.log(JSON.stringify(out));
