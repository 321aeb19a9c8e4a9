//! Helpers shared by the front-door tests: fixture paths, running the real binary, reading
//! NVIDIA's `nsys stats` CSVs.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

pub const H200: &str = "h200-qwen2-0.5b";

pub fn h200(file: &str) -> PathBuf {
    fixture(&format!("{H200}/{file}"))
}

/// Runs the `llmprof` binary with `args`.
pub fn llmprof<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_llmprof"))
        .args(args)
        .env("COLUMNS", "200")
        .output()
        .expect("run llmprof")
}

/// Rows of a CSV file as header-keyed maps.
pub fn csv_rows(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let mut r = csv::Reader::from_path(path).expect("open csv");
    let headers = r.headers().expect("headers").clone();
    r.records()
        .map(|rec| {
            let rec = rec.expect("record");
            headers
                .iter()
                .zip(rec.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

pub fn num(row: &std::collections::HashMap<String, String>, col: &str) -> f64 {
    row[col]
        .parse()
        .unwrap_or_else(|_| panic!("{col} = {:?}", row[col]))
}

/// `nsys stats` prints floats with one decimal: equal after rounding to one decimal.
pub fn assert_1dp(ours: f64, theirs: f64, what: &str) {
    assert!(
        (ours - theirs).abs() <= 0.05 + 1e-6 * theirs.abs().max(1.0),
        "{what}: ours {ours} vs nsys stats {theirs}"
    );
}

/// `llmprof site build --runs RUNS --out SITE`.
pub fn site_build(runs: &Path, site: &Path) -> Output {
    site_build_with(runs, site, &[])
}

/// `llmprof site build --runs RUNS --out SITE --chunk-above N`.
pub fn site_build_chunked(runs: &Path, site: &Path, chunk_above: u64) -> Output {
    site_build_with(runs, site, &["--chunk-above", &chunk_above.to_string()])
}

fn site_build_with(runs: &Path, site: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "site".as_ref(),
        "build".as_ref(),
        "--runs".as_ref(),
        runs.as_os_str(),
        "--out".as_ref(),
        site.as_os_str(),
    ];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    llmprof(args)
}

/// Ingests the H200 fixtures into `runs/` (one nsys+kineto+ncu run with token counts, one
/// nsys-only run) and builds the site into `site/`; returns (tempdir, runs, site).
pub fn build_sample_site() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let site = dir.path().join("site");
    let o = llmprof([
        "ingest".as_ref(),
        "--nsys".as_ref(),
        h200("nsys_export.sqlite.gz").as_os_str(),
        "--kineto".as_ref(),
        h200("kineto_trace.json.gz").as_os_str(),
        "--ncu".as_ref(),
        h200("ncu_decode_raw.csv").as_os_str(),
        "--model-config".as_ref(),
        h200("config.json").as_os_str(),
        "--prompt-tokens".as_ref(),
        "512".as_ref(),
        "--decode-steps".as_ref(),
        "2,16".as_ref(),
        "--prefill-logits".as_ref(),
        "512".as_ref(),
        "--label".as_ref(),
        "sample".as_ref(),
        "--out".as_ref(),
        runs.as_os_str(),
    ] as [&std::ffi::OsStr; 19]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = llmprof([
        "ingest".as_ref(),
        "--nsys".as_ref(),
        h200("nsys_export.sqlite.gz").as_os_str(),
        "--label".as_ref(),
        "nsys-only".as_ref(),
        "--out".as_ref(),
        runs.as_os_str(),
    ] as [&std::ffi::OsStr; 7]);
    assert!(o.status.success());
    let o = site_build(&runs, &site);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("Site written to") && stdout.contains("index.html"),
        "{stdout}"
    );
    (dir, runs, site)
}

/// Debian's `chromium` on PATH.
pub fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::var_os("PATH")?
            .to_str()?
            .split(':')
            .map(|d| Path::new(d).join(name))
            .find(|p| p.is_file())
    })
}

/// Serves `root` on 127.0.0.1 from a background thread; returns the port.
pub fn serve(root: PathBuf) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
            let path = path
                .split(['?', '#'])
                .next()
                .unwrap_or("/")
                .trim_start_matches('/');
            let mut file = root.join(if path.is_empty() { "index.html" } else { path });
            // A directory is its index.html, as static hosts (GitHub Pages) serve it.
            if file.is_dir() {
                file = file.join("index.html");
            }
            let mut out = &stream;
            match std::fs::read(&file) {
                Ok(body) if !path.contains("..") => {
                    let ct = match file.extension().and_then(|e| e.to_str()) {
                        Some("html") => "text/html; charset=utf-8",
                        Some("css") => "text/css",
                        Some("js") => "text/javascript",
                        Some("json") => "application/json",
                        Some("svg") => "image/svg+xml",
                        Some("png") => "image/png",
                        Some("wasm") => "application/wasm",
                        _ => "text/plain; charset=utf-8",
                    };
                    let _ = write!(
                        out,
                        "HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = out.write_all(&body);
                }
                _ => {
                    let _ = write!(
                        out,
                        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                }
            }
        }
    });
    port
}

/// Copies the directory `from` (files and subdirectories) to `to`.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}
