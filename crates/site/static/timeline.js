// llmprof kernel timeline: loads the WASM viewer and one run's data, and forwards DOM events
// to it. All drawing, hit-testing, zoom math, search and range statistics are in Rust
// (web/viewer); this file only wires events and shows the JSON the viewer returns with
// textContent. Works from file:// (data and wasm arrive by <script> tags, no fetch).
(function () {
  "use strict";
  var canvas = document.getElementById("tl-canvas");
  if (!canvas) return;
  var wrap = document.getElementById("tl-wrap");
  var tip = document.getElementById("tl-tip");
  var status = document.getElementById("tl-status");
  var searchBox = document.getElementById("tl-search");
  var searchStatus = document.getElementById("tl-search-status");
  var runSelect = document.getElementById("tl-run");
  var ranksBox = document.getElementById("tl-ranks");
  var chunkStatus = document.getElementById("tl-chunks");
  var t0 = performance.now();
  var view = null;
  // The site id of the run `view` shows (`currentId` moves to a run being opened first).
  var viewId = "";
  var currentId = "";
  var loadSeq = 0;
  var dirty = false;
  var ownHash = "";
  var hashTimer = 0;

  function el(tag, text) {
    var e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function hashRun() {
    var m = /(?:^#|&)run=([^&]*)/.exec(window.location.hash);
    if (!m) return "";
    try { return decodeURIComponent(m[1]); } catch (e) { return ""; }
  }

  // The runs with a timeline: the run picker's options, written by `llmprof site build`.
  function runIds() {
    return Array.prototype.map.call(runSelect.options, function (o) { return o.value; });
  }

  // The ranks a link shows beside its run: `with=ID,ID`, each id encoded.
  function hashWith() {
    var m = /(?:^#|&)with=([^&]*)/.exec(window.location.hash);
    if (!m) return [];
    return m[1].split(",").map(function (v) {
      try { return decodeURIComponent(v); } catch (e) { return ""; }
    }).filter(function (v) { return v; });
  }

  // The other ranks of the run whose rank `id` is (`<run>/ranks/<r>`), from the run picker.
  function siblingRanks(id) {
    var m = /^(.*\/ranks\/)[^\/]+$/.exec(id);
    if (!m) return [];
    return runIds().filter(function (o) {
      return o !== id && o.indexOf(m[1]) === 0 && o.slice(m[1].length).indexOf("/") < 0;
    });
  }

  function runBase(id) {
    return "runs/" + id.split("/").map(encodeURIComponent).join("/") + "/";
  }

  // A run's data: `runs/<run>/{bundle,timeline}.js` (a rank's under `ranks/<r>/`, loaded only
  // when it is added). Returns [bundle, timeline, chunked]: a timeline too large to load
  // whole is a chunked head, its kernels in `timeline-chunks/<i>.js`.
  function loadData(id) {
    var base = runBase(id);
    return Promise.all([window.llmprofViewer.loadScript(base + "bundle.js"), window.llmprofViewer.loadScript(base + "timeline.js")])
      .then(function () {
        var data = window.LLMPROF_DATA || {};
        var b = data["bundle/" + id], t = data["timeline/" + id], h = data["timeline-chunked/" + id];
        delete data["bundle/" + id];
        delete data["timeline/" + id];
        delete data["timeline-chunked/" + id];
        var chunked = typeof h === "string";
        if (chunked) t = h;
        if (typeof b !== "string" || typeof t !== "string") throw new Error("the run's data files hold no data for " + id);
        return [b, t, chunked];
      });
  }

  // A chunked timeline's kernels: at most every 80 ms while the view moves, the chunks its
  // window needs are loaded (their scripts, one after another), handed to the viewer, and
  // drawn; a long pan keeps loading instead of waiting for the pointer to rest.
  var chunkTimer = 0;
  var chunkBusy = false;
  function chunksLater() {
    if (!view || !view.is_chunked || chunkTimer) return;
    chunkTimer = setTimeout(loadChunks, 80);
  }
  function loadChunks() {
    chunkTimer = 0;
    if (!view || !view.is_chunked || chunkBusy) return;
    var v = view, id = viewId;
    var want = Array.prototype.slice.call(v.chunks_wanted());
    // Where a window's load goes (for the benchmark): scripts, base64 decoding in the viewer,
    // building the lanes of the loaded kernels and the frame.
    var stats = window.llmprofTimeline.chunkStats;
    var failed = function (e) {
      chunkBusy = false;
      if (view !== v) { chunksLater(); return; }
      chunkStatus.textContent = "Cannot load the kernels of this window: " + (e && e.message ? e.message : e);
    };
    var done = function () {
      chunkBusy = false;
      // Another run was opened meanwhile: its own load may have waited for this one.
      if (view !== v) { chunksLater(); return; }
      var t = performance.now();
      var used;
      try { used = v.use_chunks(); } catch (e) { failed(e); return; }
      stats.assembleMs += performance.now() - t;
      if (used) {
        if (searchBox.value) searchStatus.textContent = v.search(searchBox.value);
        showPinned(v.pinned_details());
        showRange(v.range_json());
        redraw();
      }
      chunkStatus.textContent = v.chunk_status();
      window.llmprofTimeline.chunksMs = performance.now();
      if (Array.prototype.slice.call(v.chunks_wanted()).length) chunksLater();
    };
    chunkStatus.textContent = v.chunk_status();
    if (!want.length) { done(); return; }
    chunkBusy = true;
    var data = window.LLMPROF_DATA = window.LLMPROF_DATA || {};
    want.reduce(function (p, i) {
      return p.then(function () {
        if (view !== v) return;
        var t = performance.now();
        return window.llmprofViewer.loadScript(runBase(id) + "timeline-chunks/" + i + ".js").then(function () {
          var key = "chunk/" + id + "/" + i, text = data[key];
          delete data[key];
          var t2 = performance.now();
          stats.scriptMs += t2 - t;
          if (view === v) v.add_chunk(i, typeof text === "string" ? text : "");
          stats.decodeMs += performance.now() - t2;
          stats.chunks += 1;
          stats.bytes += typeof text === "string" ? text.length : 0;
        });
      });
    }, Promise.resolve()).then(done, failed);
  }

  // Ranks being loaded, by id: the token of the tick that asked for each (an untick while it
  // loads drops the token, and the rank is not added when its files arrive).
  var pending = {};
  var pendingToken = 0;

  // Check boxes for the opened rank's siblings: ticking one loads its files and lays its lanes
  // below; unticking takes them off.
  function showRankBoxes() {
    ranksBox.textContent = "";
    var others = view ? siblingRanks(currentId) : [];
    if (!others.length) { ranksBox.classList.add("hidden"); return; }
    var shown = JSON.parse(view.ranks_beside());
    ranksBox.appendChild(el("span", "Ranks beside it:"));
    others.forEach(function (id) {
      var label = el("label");
      var box = el("input");
      box.type = "checkbox";
      box.checked = box.defaultChecked = shown.indexOf(id) >= 0 || id in pending;
      box.setAttribute("data-rank", id);
      box.addEventListener("change", function () { toggleRank(id, box.checked); });
      label.appendChild(box);
      label.appendChild(document.createTextNode(" " + id.slice(id.lastIndexOf("/") + 1)));
      ranksBox.appendChild(label);
    });
    ranksBox.classList.remove("hidden");
  }

  // The siblings of the opened rank among `ids`, each once.
  function rankIds(ids) {
    var others = siblingRanks(currentId);
    return ids.filter(function (id, i) { return others.indexOf(id) >= 0 && ids.indexOf(id) === i; });
  }

  // Loads `id`'s files and adds its lanes, unless the view was replaced or the tick withdrawn
  // meanwhile. Resolves to an error message, or "".
  function addRank(id, seq) {
    if (id in pending) return Promise.resolve("");
    var token = ++pendingToken;
    pending[id] = token;
    status.textContent = "Loading " + id + "…";
    return loadData(id).then(function (bt) {
      if (seq !== loadSeq || pending[id] !== token) return "";
      view.add_rank(id, bt[0], bt[1]);
      return "";
    }).catch(function (e) {
      return "Cannot show " + id + " beside it: " + e.message + ". ";
    }).then(function (err) {
      if (pending[id] === token) delete pending[id];
      return err;
    });
  }

  // The ranks a link names, one after the other; resolves to what could not be shown.
  function addRanks(ids, seq) {
    return rankIds(ids).reduce(function (p, id) {
      return p.then(function (errs) {
        if (seq !== loadSeq) return errs;
        return addRank(id, seq).then(function (err) { return errs + err; });
      });
    }, Promise.resolve(""));
  }

  function ranksChanged(note) {
    status.textContent = (note || "") + view.title + ": " + view.summary();
    showRankBoxes();
    showLegend();
    showPinned("");
    showRange(view.range_json());
    searchStatus.textContent = searchBox.value ? view.search(searchBox.value) : "";
    redraw();
  }

  function toggleRank(id, on) {
    if (!view) return;
    if (!on) {
      if (id in pending) delete pending[id]; else view.remove_rank(id);
      ranksChanged();
      return;
    }
    var seq = loadSeq;
    addRank(id, seq).then(function (err) {
      if (seq === loadSeq) ranksChanged(err);
    });
  }

  // The address keeps up with the view, written a moment after the last change (browsers
  // throttle replaceState during a pan).
  function writeHash() {
    hashTimer = 0;
    if (!view) return;
    var h = view.hash();
    if (h === ownHash) return;
    try {
      history.replaceState(null, "", "#" + h);
      ownHash = h;
    } catch (e) {
      hashTimer = setTimeout(writeHash, 1000);
    }
  }

  function frame() {
    dirty = false;
    if (!view) return;
    view.render();
    chunksLater();
    if (hashTimer) clearTimeout(hashTimer);
    hashTimer = setTimeout(writeHash, 250);
  }
  function redraw() {
    if (!dirty) { dirty = true; requestAnimationFrame(frame); }
  }

  function pos(e) {
    var r = canvas.getBoundingClientRect();
    return { x: e.clientX - r.left, y: e.clientY - r.top };
  }

  function fillKv(tbody, json) {
    tbody.textContent = "";
    JSON.parse(json).forEach(function (kv) {
      var tr = el("tr");
      tr.appendChild(el("th", kv[0]));
      tr.appendChild(el("td", kv[1]));
      tbody.appendChild(tr);
    });
  }

  function showTip(json, p) {
    if (!json) { tip.classList.add("hidden"); return; }
    var table = el("table");
    var body = el("tbody");
    table.appendChild(body);
    fillKv(body, json);
    tip.textContent = "";
    tip.appendChild(table);
    tip.classList.remove("hidden");
    var w = wrap.clientWidth;
    var left = p.x + 14;
    if (left + tip.offsetWidth > w) left = Math.max(0, p.x - 14 - tip.offsetWidth);
    var top = p.y + 14;
    if (top + tip.offsetHeight > wrap.clientHeight) top = Math.max(0, p.y - 14 - tip.offsetHeight);
    tip.style.left = left + "px";
    tip.style.top = top + "px";
  }

  function showPinned(json) {
    var sec = document.getElementById("tl-pinned-section");
    if (!json) { sec.classList.add("hidden"); return; }
    fillKv(document.querySelector("#tl-pinned tbody"), json);
    sec.classList.remove("hidden");
  }

  function showRange(json) {
    var sec = document.getElementById("tl-range-section");
    if (!json) { sec.classList.add("hidden"); return; }
    var r = JSON.parse(json);
    document.getElementById("tl-range-summary").textContent = r.note ? r.start + " – " + r.end + " (" + r.length + "): " + r.note :
      r.start + " – " + r.end + " (" + r.length + "): " + r.ops + " GPU ops, GPU busy " + r.busy_pct + "%" +
      (r.gpus > 1 ? " (the mean of " + r.gpus + " GPUs)" : "") +
      (r.more ? "; the table lists the 200 longest kernels, " + r.more + " more not shown" : "");
    var body = document.querySelector("#tl-range tbody");
    body.textContent = "";
    r.rows.forEach(function (row) {
      var tr = el("tr");
      row.forEach(function (c, i) {
        var td = el("td", c);
        if (i > 0) td.className = "num";
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    sec.classList.remove("hidden");
  }

  function showLegend() {
    var box = document.getElementById("tl-legend");
    box.textContent = "";
    var legend = JSON.parse(view.legend());
    legend.forEach(function (c) {
      var item = el("span");
      var sw = el("span");
      sw.className = "sw";
      sw.style.background = c[1];
      item.appendChild(sw);
      item.appendChild(document.createTextNode(c[0]));
      box.appendChild(item);
    });
  }

  function applyHash() {
    if (!view) return;
    var q = view.apply_hash(window.location.hash);
    searchBox.value = q;
    searchStatus.textContent = q ? view.search(q) : "";
    showPinned(view.pinned_details());
    showRange(view.range_json());
    redraw();
  }

  function open(id) {
    var ids = runIds();
    var note = "";
    if (ids.indexOf(id) < 0) {
      note = (id ? "No run " + id + " with a timeline in this site; showing " : "Showing ") + ids[0] + ". ";
      id = ids[0];
    }
    var seq = ++loadSeq;
    currentId = id;
    pending = {};
    ranksBox.classList.add("hidden");
    status.textContent = note + "Loading " + id + "…";
    var tData = performance.now();
    var tParse = 0;
    // A rank of a multi-rank run is `<run>/ranks/<rank>`: each segment encoded, `/` kept.
    loadData(id)
      .then(function (bt) {
        if (seq !== loadSeq) return; // a later open() won
        tParse = performance.now();
        if (view) { view.free(); view = null; }
        var dpr = window.devicePixelRatio || 1;
        view = bt[2] ? wasm_bindgen.TimelineView.chunked(canvas, id, bt[0], bt[1], wrap.clientWidth, dpr)
          : new wasm_bindgen.TimelineView(canvas, id, bt[0], bt[1], wrap.clientWidth, dpr);
        viewId = id;
        chunkStatus.textContent = "";
        runSelect.value = id;
        // The ranks a link shows beside this one, each loaded in turn; one that cannot be
        // shown is said, and the others are.
        return addRanks(hashWith(), seq);
      })
      .then(function (errs) {
        if (seq !== loadSeq || !view) return;
        status.textContent = note + (errs || "") + view.title + ": " + view.summary();
        showRankBoxes();
        showLegend();
        applyHash();
        view.render();
        // loadMs: from navigation start to the first frame drawn; the phases after the
        // viewer's wasm started: loading the run's scripts, then parsing and indexing in Rust
        // plus the first frame.
        var now = performance.now();
        window.llmprofTimeline = {
          view: view, loadMs: now, dataMs: tParse - tData, parseMs: now - tParse, chunksMs: 0,
          chunkStats: { chunks: 0, bytes: 0, scriptMs: 0, decodeMs: 0, assembleMs: 0 },
          // For the benchmark: a frame as the page draws one (chunk loads follow).
          redraw: redraw,
        };
        document.documentElement.setAttribute("data-viewer", "ready");
        chunksLater();
      })
      .catch(function (e) {
        status.textContent = "Cannot show the timeline: " + e.message;
        document.documentElement.setAttribute("data-viewer", "error");
      });
  }

  // Pointer: drag pans (or selects with Shift / on the axis), a click pins or zooms, two
  // pointers pinch-zoom.
  var pointers = {};
  var drag = null;
  var pinchDist = 0;
  canvas.addEventListener("pointerdown", function (e) {
    if (!view || (e.pointerType === "mouse" && e.button !== 0)) return;
    canvas.focus({ preventScroll: true });
    var p = pos(e);
    pointers[e.pointerId] = p;
    canvas.setPointerCapture(e.pointerId);
    var ids = Object.keys(pointers);
    if (ids.length === 2) {
      var a = pointers[ids[0]], b = pointers[ids[1]];
      pinchDist = Math.hypot(a.x - b.x, a.y - b.y);
      drag = null;
      return;
    }
    drag = { x0: p.x, y0: p.y, last: p.x, moved: false, select: e.shiftKey || view.on_axis(p.y) };
  });
  canvas.addEventListener("pointermove", function (e) {
    if (!view) return;
    var p = pos(e);
    if (pointers[e.pointerId]) pointers[e.pointerId] = p;
    var ids = Object.keys(pointers);
    if (ids.length === 2) {
      var a = pointers[ids[0]], b = pointers[ids[1]];
      var d = Math.hypot(a.x - b.x, a.y - b.y);
      if (pinchDist > 0 && d > 0) view.zoom_by(pinchDist / d, (a.x + b.x) / 2);
      pinchDist = d;
      redraw();
      return;
    }
    if (drag) {
      if (Math.abs(p.x - drag.x0) > 3) drag.moved = true;
      if (drag.select) view.drag_range(drag.x0, p.x);
      else view.pan(drag.last - p.x);
      drag.last = p.x;
      tip.classList.add("hidden");
      redraw();
      return;
    }
    showTip(view.hover(p.x, p.y), p);
    redraw();
  });
  function endPointer(e) {
    if (!view) return;
    delete pointers[e.pointerId];
    if (!drag) return;
    var p = pos(e);
    if (!drag.moved) { view.cancel_drag(); showPinned(view.click(p.x, p.y)); }
    else if (drag.select) showRange(view.select_range(drag.x0, p.x));
    drag = null;
    redraw();
  }
  canvas.addEventListener("pointerup", endPointer);
  function dropPointer(e) {
    delete pointers[e.pointerId];
    if (drag && view) { view.cancel_drag(); redraw(); }
    drag = null;
  }
  canvas.addEventListener("pointercancel", dropPointer);
  canvas.addEventListener("lostpointercapture", function (e) { delete pointers[e.pointerId]; });
  canvas.addEventListener("pointerleave", function () {
    if (view) { view.leave(); tip.classList.add("hidden"); redraw(); }
  });
  canvas.addEventListener("wheel", function (e) {
    if (!view) return;
    e.preventDefault();
    var p = pos(e);
    // Lines and pages to pixels.
    var unit = e.deltaMode === 1 ? 30 : e.deltaMode === 2 ? wrap.clientWidth : 1;
    var dx = e.deltaX * unit, dy = e.deltaY * unit;
    // Shift+wheel arrives as deltaX in some browsers and as deltaY in others: pan either way.
    if (e.shiftKey || Math.abs(dx) > Math.abs(dy)) view.pan(Math.abs(dx) > Math.abs(dy) ? dx : dy);
    else view.wheel_zoom(p.x, dy);
    redraw();
  }, { passive: false });

  function key(e) {
    var tag = e.target && e.target.tagName;
    if (!view || tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA" ||
        (e.target && e.target.isContentEditable) || e.altKey || e.metaKey || e.ctrlKey) return;
    var w = wrap.clientWidth;
    switch (e.key) {
      case "+": case "=": view.zoom_by(0.7); break;
      case "-": case "_": view.zoom_by(1 / 0.7); break;
      case "ArrowLeft": case "a": view.pan(-w / 8); break;
      case "ArrowRight": case "d": view.pan(w / 8); break;
      case "0": case "Home": view.reset(); break;
      case "z": view.zoom_to_selection(); break;
      case "s": showRange(view.select_visible()); break;
      case "n": case "]": showPinned(view.step_pin(1)); break;
      case "p": case "[": showPinned(view.step_pin(-1)); break;
      case "Escape": view.clear_selection(); view.unpin(); showRange(""); showPinned(""); break;
      case "/": e.preventDefault(); searchBox.focus(); return;
      default: return;
    }
    e.preventDefault();
    redraw();
  }
  document.addEventListener("keydown", key);

  searchBox.addEventListener("input", function () {
    if (!view) return;
    searchStatus.textContent = view.search(searchBox.value);
    redraw();
  });
  document.getElementById("tl-zoom-in").addEventListener("click", function () { if (view) { view.zoom_by(0.7); redraw(); } });
  document.getElementById("tl-zoom-out").addEventListener("click", function () { if (view) { view.zoom_by(1 / 0.7); redraw(); } });
  document.getElementById("tl-reset").addEventListener("click", function () { if (view) { view.reset(); redraw(); } });
  document.getElementById("tl-range-zoom").addEventListener("click", function () { if (view) { view.zoom_to_selection(); redraw(); } });
  document.getElementById("tl-range-clear").addEventListener("click", function () { if (view) { view.clear_selection(); showRange(""); redraw(); } });
  document.getElementById("tl-link").addEventListener("click", function () {
    if (!view) return;
    var url = window.location.href.split("#")[0] + "#" + view.hash();
    if (navigator.clipboard) navigator.clipboard.writeText(url).catch(function () {});
    status.textContent = "Link to this view: " + url;
  });
  runSelect.addEventListener("change", function () {
    if (runSelect.value !== currentId) window.location.hash = "run=" + encodeURIComponent(runSelect.value);
  });
  window.addEventListener("hashchange", function () {
    if (window.location.hash === "#" + ownHash) return;
    var id = hashRun();
    var beside = view ? JSON.parse(view.ranks_beside()).join(",") : "";
    if ((id && id !== currentId) || rankIds(hashWith()).join(",") !== beside) open(id || currentId); else applyHash();
  });
  window.addEventListener("resize", function () {
    if (view) { view.resize(wrap.clientWidth, window.devicePixelRatio || 1); redraw(); }
  });

  var runs = runIds();
  if (!runs.length) return;
  window.llmprofViewer.start().then(function () {
    open(hashRun());
  }).catch(function (e) {
    status.textContent = "Cannot start the viewer: " + e.message;
    document.documentElement.setAttribute("data-viewer", "error");
  });
})();
