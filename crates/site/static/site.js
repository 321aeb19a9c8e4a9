// llmprof report site: sorting, filtering and run selection. No network, no eval, no inline
// handlers; works from file:// as well as over http.
(function () {
  "use strict";

  function cellKey(td, numeric) {
    if (!td) return numeric ? -Infinity : "";
    if (numeric) {
      var k = td.getAttribute("data-key");
      var v = parseFloat(k !== null && k !== "" ? k : td.textContent.replace(/,/g, ""));
      return isNaN(v) ? -Infinity : v;
    }
    return td.textContent.trim().toLowerCase();
  }

  // Click a header with data-sort to sort its table; click again to reverse.
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.querySelectorAll("th[data-sort]");
    heads.forEach(function (th) {
      th.setAttribute("tabindex", "0");
      function sort() {
        var col = Array.prototype.indexOf.call(th.parentNode.children, th);
        var numeric = th.getAttribute("data-sort") === "num";
        var dir = th.getAttribute("data-dir") === "desc" ? "asc" : "desc";
        heads.forEach(function (h) { h.removeAttribute("data-dir"); });
        th.setAttribute("data-dir", dir);
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = cellKey(a.cells[col], numeric), y = cellKey(b.cells[col], numeric);
          var c = x < y ? -1 : x > y ? 1 : 0;
          return dir === "asc" ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
        repage(table, 0);
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") sort(); });
    });
  });

  // <input class="filter" data-table="ID"> hides rows that do not contain the text.
  document.querySelectorAll("input.filter").forEach(function (input) {
    var table = document.getElementById(input.getAttribute("data-table"));
    if (!table) return;
    input.addEventListener("input", function () {
      var q = input.value.trim().toLowerCase();
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
        r.classList.toggle("hidden", q !== "" && r.textContent.toLowerCase().indexOf(q) < 0);
      });
      repage(table, 0);
    });
  });

  // <table data-page-size="N">: show N of the rows that pass the filter at a time, with a
  // pager above the table, so that an index of thousands of runs stays quick to use.
  function repage(table, page) {
    var size = parseInt(table.getAttribute("data-page-size"), 10);
    if (!(size > 0)) return;
    var shown = Array.prototype.filter.call(table.tBodies[0].rows, function (r) {
      return !r.classList.contains("hidden");
    });
    var pages = Math.max(1, Math.ceil(shown.length / size));
    page = Math.min(Math.max(page, 0), pages - 1);
    Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
      r.classList.add("paged-out");
    });
    shown.slice(page * size, (page + 1) * size).forEach(function (r) {
      r.classList.remove("paged-out");
    });
    var pager = document.getElementById(table.id + "-pager");
    if (!pager) {
      pager = document.createElement("div");
      pager.id = table.id + "-pager";
      pager.className = "pager";
      table.parentNode.insertBefore(pager, table);
    }
    pager.textContent = "";
    pager.hidden = shown.length <= size;
    function button(label, to, enabled) {
      var b = document.createElement("button");
      b.type = "button";
      b.textContent = label;
      b.disabled = !enabled;
      b.addEventListener("click", function () { repage(table, to); });
      pager.appendChild(b);
    }
    button("‹ Previous", page - 1, page > 0);
    var note = document.createElement("span");
    note.textContent = " rows " + (shown.length ? page * size + 1 : 0) + "–" +
      Math.min((page + 1) * size, shown.length) + " of " + shown.length + " ";
    pager.appendChild(note);
    button("Next ›", page + 1, page + 1 < pages);
  }
  document.querySelectorAll("table[data-page-size]").forEach(function (t) { repage(t, 0); });

  // Index: compare the ticked runs.
  var button = document.getElementById("compare-selected");
  if (button) {
    button.addEventListener("click", function () {
      var ids = Array.prototype.map.call(document.querySelectorAll("input.pick:checked"),
        function (c) { return encodeURIComponent(c.value); });
      window.location.href = "compare.html" + (ids.length ? "#runs=" + ids.join(",") : "");
    });
  }

  // Compare page: #runs=A,B shows only those runs' columns.
  function applyRuns() {
    var m = /runs=([^&]*)/.exec(window.location.hash);
    var wanted = m ? m[1].split(",").map(decodeURIComponent).filter(Boolean) : [];
    document.querySelectorAll("table[id^='compare-']").forEach(function (table) {
      var head = table.tHead && table.tHead.rows[0];
      if (!head) return;
      for (var c = 1; c < head.cells.length; c++) {
        var show = wanted.length === 0 || wanted.indexOf(head.cells[c].textContent) >= 0;
        Array.prototype.forEach.call(table.rows, function (r) {
          if (r.cells[c]) r.cells[c].classList.toggle("hidden", !show);
        });
      }
    });
  }
  if (document.querySelector("table[id^='compare-']")) {
    applyRuns();
    window.addEventListener("hashchange", applyRuns);
  }
})();
