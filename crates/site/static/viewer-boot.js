// Shared by the timeline and compare pages: starts the WASM viewer from the base64 bytes that
// static/viewer/llmprof_viewer_wasm.js defines, and loads a run's data scripts. Both work from
// file://, where fetch() and ES modules do not.
(function () {
  "use strict";
  function loadScript(src) {
    return new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = src;
      // The script has run (its data is in window.LLMPROF_DATA): the element can go.
      s.onload = function () { s.remove(); resolve(); };
      s.onerror = function () { reject(new Error("cannot load " + src)); };
      document.head.appendChild(s);
    });
  }
  function start() {
    var bin = atob(window.LLMPROF_VIEWER_WASM);
    var bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return wasm_bindgen({ module_or_path: bytes });
  }
  window.llmprofViewer = { loadScript: loadScript, start: start };
})();
