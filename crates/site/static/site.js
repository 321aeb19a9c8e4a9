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
    });
  });

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
