// llmprof interactive comparison: loads the WASM viewer and the picked runs' bundles (by
// <script> tags, so it works from file://), and redraws the plotters figure when the picks or
// the normalisation change. The figure is computed and drawn in Rust (web/viewer), and so is
// the diff of exactly two picked runs, which is laid out here with textContent only.
(function () {
  "use strict";
  var canvas = document.getElementById("cmp-canvas");
  if (!canvas || typeof wasm_bindgen === "undefined") return;
  var status = document.getElementById("cmp-status");
  var norm = document.getElementById("cmp-norm");
  var picks = Array.prototype.slice.call(document.querySelectorAll("input.cmp-pick"));
  var view = null;
  var loaded = {};
  var diffStatus = document.getElementById("cmp-diff-status");
  var diffTable = document.getElementById("cmp-diff-table");
  var diffNotes = document.getElementById("cmp-diff-notes");
  var diffSource = document.getElementById("cmp-diff-source");

  function el(tag, text) {
    var e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function clear(e) {
    while (e.firstChild) e.removeChild(e.firstChild);
  }

  // The diff of exactly two picked runs (the report crate's Diff, computed in wasm), as a
  // table whose numeric cells carry their unrounded value in data-value.
  function renderDiff(ids) {
    clear(diffTable);
    clear(diffNotes);
    diffSource.textContent = "";
    diffTable.removeAttribute("data-runs");
    diffTable.classList.add("hidden");
    if (ids.length !== 2) {
      diffStatus.textContent = "Tick exactly two runs to see their diff (" + ids.length + " ticked).";
      return;
    }
    var d;
    try {
      d = JSON.parse(view.diff(ids.join(",")));
    } catch (e) {
      diffStatus.textContent = "Cannot diff: " + e.message;
      return;
    }
    diffStatus.textContent = d.about + (d.rows.length ? "." : ": the runs have no top-level stage in common.");
    var head = el("thead"), tr = el("tr"), body = el("tbody");
    d.columns.forEach(function (c) { tr.appendChild(el("th", c.header)); });
    head.appendChild(tr);
    d.rows.forEach(function (row, i) {
      var r = el("tr");
      r.setAttribute("data-key", d.keys[i]);
      row.forEach(function (cell, j) {
        var td = el("td", cell);
        if (d.columns[j] && d.columns[j].numeric) td.className = "num";
        var v = d.values[i] ? d.values[i][j] : null;
        if (v !== null && v !== undefined) td.setAttribute("data-value", String(v));
        r.appendChild(td);
      });
      body.appendChild(r);
    });
    diffTable.appendChild(head);
    diffTable.appendChild(body);
    if (d.rows.length) diffTable.classList.remove("hidden");
    diffTable.setAttribute("data-runs", d.a + "," + d.b);
    d.notes.forEach(function (n) { diffNotes.appendChild(el("li", n)); });
    diffSource.textContent = "Source: " + d.source + ".";
  }

  function hashRuns() {
    var m = /runs=([^&]*)/.exec(window.location.hash);
    if (!m) return [];
    return m[1].split(",").map(function (x) {
      try { return decodeURIComponent(x); } catch (e) { return ""; }
    }).filter(Boolean);
  }

  // #runs= names run ids (as the index writes them); tick those, or the newest three.
  function applyHash() {
    var want = hashRuns();
    picks.forEach(function (p, i) {
      p.checked = want.length ? want.indexOf(p.getAttribute("data-run")) >= 0 : i < 3;
    });
  }

  function picked() {
    return picks.filter(function (p) { return p.checked; }).map(function (p) { return p.value; });
  }


  // One load per run, however often the picks change while it is in flight.
  function ensure(ids) {
    return Promise.all(ids.map(function (id) {
      if (!loaded[id]) {
        // A rank of a multi-rank run is `<run>/ranks/<rank>`: each segment encoded, `/` kept.
        var path = "runs/" + id.split("/").map(encodeURIComponent).join("/") + "/bundle.js";
        loaded[id] = window.llmprofViewer.loadScript(path).then(function () {
          var data = window.LLMPROF_DATA || {};
          var text = data["bundle/" + id];
          if (typeof text !== "string") throw new Error(path + " holds no bundle");
          view.add_run(id, text);
          delete data["bundle/" + id];
        });
        loaded[id].catch(function () { delete loaded[id]; });
      }
      return loaded[id];
    }));
  }

  var seq = 0;
  function update() {
    if (!view) return;
    var ids = picked();
    var mine = ++seq;
    status.textContent = "Loading " + ids.length + " run(s)…";
    ensure(ids).then(function () {
      if (mine !== seq) return; // a later update draws
      var notes = JSON.parse(view.render(ids.join(","), norm.value, window.devicePixelRatio || 1));
      status.textContent = ids.length < 2
        ? "Pick two or more runs to compare."
        : ids.length + " runs." + (notes.length ? " Not shown: " + notes.join("; ") + "." : "");
      renderDiff(ids);
      document.documentElement.setAttribute("data-viewer", "ready");
    }).catch(function (e) {
      status.textContent = "Cannot compare: " + e.message;
      document.documentElement.setAttribute("data-viewer", "error");
    });
  }

  function download(blob, name) {
    var a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = name;
    document.body.appendChild(a);
    a.click();
    setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  }

  picks.forEach(function (p) {
    p.addEventListener("change", function () {
      var ids = picks.filter(function (q) { return q.checked; }).map(function (q) {
        return encodeURIComponent(q.getAttribute("data-run"));
      });
      history.replaceState(null, "", "#runs=" + ids.join(","));
      own = true;
      window.dispatchEvent(new HashChangeEvent("hashchange"));
      own = false;
      update();
    });
  });
  norm.addEventListener("change", update);
  document.getElementById("cmp-png").addEventListener("click", function () {
    canvas.toBlob(function (b) { if (b) download(b, "llmprof-compare.png"); }, "image/png");
  });
  document.getElementById("cmp-svg").addEventListener("click", function () {
    if (!view) return;
    try {
      var svg = view.svg(picked().join(","), norm.value);
      download(new Blob([svg], { type: "image/svg+xml" }), "llmprof-compare.svg");
    } catch (e) {
      status.textContent = "Cannot export: " + e.message;
    }
  });
  var own = false;
  window.addEventListener("hashchange", function () {
    if (own) return;
    applyHash();
    update();
  });

  applyHash();
  window.llmprofViewer.start().then(function () {
    view = new wasm_bindgen.CompareView(canvas);
    window.llmprofCompare = view;
    update();
  }).catch(function (e) {
    status.textContent = "Cannot start the viewer: " + e.message;
    document.documentElement.setAttribute("data-viewer", "error");
  });
})();
