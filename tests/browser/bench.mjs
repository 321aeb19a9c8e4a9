// Viewer benchmark: load time and frame rate of the kernel timeline in headless Chromium.
//
//   node tests/browser/bench.mjs SITE_DIR [RUN_ID] [LOADS=5]
//
// Load: navigation start to the first frame drawn (`window.llmprofTimeline.loadMs`), median
// of LOADS fresh pages, from file://. Frames: 240 animation frames of zooming in 2× per 20
// frames from the whole run, panning, and zooming back out, each frame one `render()` of the
// Rust viewer in requestAnimationFrame; reports frames/s over the sequence and the render time
// per frame (median, p95). A chunked timeline (more kernels than the site loads at once) is
// drawn from its overview at first; the benchmark then zooms to a twentieth of the run and
// times loading that window's chunks to the frame that draws them.
import { readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { chromium } from "playwright-core";

const site = resolve(process.argv[2] || "site");
const run = process.argv[3] || readdirSync(join(site, "runs"))[0];
const loads = Number(process.argv[4] || 5);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const url = `file://${site}/timeline.html#run=${encodeURIComponent(run)}`;
const loadMs = [];
const phases = [];
let frames = null;
for (let i = 0; i < loads; i++) {
  const page = await browser.newPage({ viewport: { width: 1600, height: 900 } });
  await page.goto(url);
  await page.waitForSelector("html[data-viewer]", { timeout: 120000 });
  const state = await page.getAttribute("html", "data-viewer");
  if (state !== "ready") throw new Error(await page.textContent("#tl-status"));
  const t = await page.evaluate(() => {
    const l = window.llmprofTimeline;
    return { load: l.loadMs, data: l.dataMs, parse: l.parseMs };
  });
  loadMs.push(t.load);
  phases.push(t);
  if (i === 0) {
    frames = await page.evaluate(() => new Promise((done) => {
      const v = window.llmprofTimeline.view;
      v.reset();
      const n = 240, render = [];
      let f = 0;
      const start = performance.now();
      function step() {
        const phase = Math.floor(f / 60);
        if (phase === 0) v.zoom_by(Math.pow(0.5, 1 / 20), 700);
        else if (phase === 1) v.pan(15);
        else if (phase === 2) v.zoom_by(Math.pow(2, 1 / 20), 700);
        else v.pan(-15);
        const t = performance.now();
        v.render();
        render.push(performance.now() - t);
        if (++f < n) requestAnimationFrame(step);
        else done({ frames: n, seconds: (performance.now() - start) / 1000, render });
      }
      requestAnimationFrame(step);
    }));
    frames.summary = await page.textContent("#tl-status");
    // A chunked timeline: zoom from the whole run to a twentieth of it (the "+" button, so the
    // page loads the window's chunks as a user's zoom does) and time the load to its frame.
    frames.chunks = await page.evaluate(() => new Promise((done) => {
      const l = window.llmprofTimeline, v = l.view;
      if (!v.is_chunked) { done(null); return; }
      v.reset();
      v.zoom_by(1 / 14, 700);
      const before = Object.assign({}, l.chunkStats);
      const since = () => Object.fromEntries(Object.entries(l.chunkStats).map(([k, x]) => [k, x - before[k]]));
      const start = performance.now();
      document.getElementById("tl-zoom-in").click();
      (function wait() {
        const text = document.getElementById("tl-chunks").textContent;
        if (l.chunksMs > start && /loaded/.test(text)) {
          done({ ms: l.chunksMs - start, status: text, stats: since() });
        } else if (performance.now() - start > 60000) {
          done({ ms: null, status: text, stats: since() });
        } else setTimeout(wait, 20);
      })();
    }));
    // Then 240 frames panning right 15 px each through the page's own redraw, so the window's
    // chunks load while it moves: frames/s, and the share of frames drawn from the overview
    // (kernels of the window not loaded yet).
    frames.pan = frames.chunks && await page.evaluate(() => new Promise((done) => {
      const l = window.llmprofTimeline, v = l.view;
      const before = l.chunkStats.chunks;
      let f = 0, overview = 0;
      const gaps = [];
      let last = performance.now();
      const start = last;
      function step() {
        const now = performance.now();
        gaps.push(now - last);
        last = now;
        if (!/ loaded /.test(v.chunk_status())) overview++;
        v.pan(15);
        l.redraw();
        if (++f < 240) requestAnimationFrame(step);
        else {
          gaps.sort((a, b) => a - b);
          done({
            fps: 240 / ((performance.now() - start) / 1000),
            overview_frames: overview,
            longest_frame_ms: gaps[gaps.length - 1],
            chunks_loaded: l.chunkStats.chunks - before,
          });
        }
      }
      requestAnimationFrame(step);
    }));
  }
  await page.close();
}
await browser.close();
const r = frames.render;
const sorted = [...r].sort((a, b) => a - b);
console.log(JSON.stringify({
  run,
  summary: frames.summary,
  load_ms: { median: median(loadMs), all: loadMs.map((x) => Math.round(x)) },
  // Median of each phase: the run's <script> files loaded; Rust parse + index + first frame.
  phases_ms: { data_scripts: median(phases.map((p) => p.data)), parse_index_draw: median(phases.map((p) => p.parse)) },
  fps: frames.frames / frames.seconds,
  // Chunked timelines: zooming to a twentieth of the run until its kernels are drawn, then
  // panning on at that zoom as the page draws (chunks load as the window moves).
  chunk_load: frames.chunks,
  chunk_pan: frames.pan,
  render_ms: { median: median(r), p95: sorted[Math.floor(sorted.length * 0.95)], max: sorted[sorted.length - 1] },
}, null, 1));
