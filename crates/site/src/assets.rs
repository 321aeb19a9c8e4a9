//! The files written to `<out>/static/`, embedded in the binary from the crate's own
//! `static/` directory (the built viewer under `static/viewer/`, from `web/build.sh`).

/// `(path under static/, bytes)`.
pub const ASSETS: &[(&str, &[u8])] = &[
    ("style.css", include_bytes!("../static/style.css")),
    ("site.js", include_bytes!("../static/site.js")),
    ("timeline.js", include_bytes!("../static/timeline.js")),
    ("compare.js", include_bytes!("../static/compare.js")),
    ("viewer-boot.js", include_bytes!("../static/viewer-boot.js")),
    // The WASM viewer, built from web/viewer by web/build.sh (CI checks it is current).
    (
        "viewer/llmprof_viewer.js",
        include_bytes!("../static/viewer/llmprof_viewer.js"),
    ),
    (
        "viewer/llmprof_viewer_wasm.js",
        include_bytes!("../static/viewer/llmprof_viewer_wasm.js"),
    ),
];
