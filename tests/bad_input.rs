//! Hostile and degenerate input (issue 15's list): a 0-byte `.gz`, a gzip bomb, a trace whose
//! events all sit on one line, kernel names of 1 MB. Each either ingests with its data intact
//! or stops with one line naming the file and the problem; nothing panics, nothing runs away.
//! (A trace ending mid-event: `cli::truncated_trace_is_refused`.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::common::llmprof;

fn ingest(file: &Path, runs: &Path) -> std::process::Output {
    llmprof([
        "ingest".as_ref(),
        "--kineto".as_ref(),
        file.as_os_str(),
        "--out".as_ref(),
        runs.as_os_str(),
    ])
}

fn run_dir(out: &std::process::Output) -> PathBuf {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// `n` kernel events `name` (1 µs apart, on stream 7), as one line of JSON.
fn one_line_trace(n: usize, name: &str) -> String {
    let mut s = String::from("{\"traceEvents\":[");
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(
            "{{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"{name}\",\"pid\":0,\"tid\":7,\"ts\":{i}.0,\"dur\":0.5,\"args\":{{\"stream\":7,\"correlation\":{i}}}}}"
        ));
    }
    s.push_str("]}");
    s
}

#[test]
fn an_empty_gzip_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("trace.json.gz");
    std::fs::write(&p, b"").unwrap();
    let out = ingest(&p, &dir.path().join("runs"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("trace.json.gz") && err.contains("empty"),
        "{err}"
    );
}

/// A `.gz` cut short (a copy interrupted): refused, naming the file and saying it looks
/// truncated, with nothing written.
#[test]
fn a_gzip_file_cut_short_is_refused_as_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let whole = std::fs::read(crate::common::h200("kineto_trace.json.gz")).unwrap();
    let p = dir.path().join("cut.json.gz");
    std::fs::write(&p, &whole[..whole.len() / 3]).unwrap();
    let runs = dir.path().join("runs");
    let out = ingest(&p, &runs);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("cut.json.gz") && err.contains("looks truncated"),
        "{err}"
    );
    assert!(!runs.exists() || std::fs::read_dir(&runs).unwrap().next().is_none());
}

/// 300 MiB of spaces in a 300 kB gzip (1,000:1): refused once it inflates past the cap
/// (100× the compressed size, at least 256 MiB), not inflated whole.
#[test]
fn a_gzip_bomb_stops_at_the_stated_cap() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bomb.json.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&p).unwrap(),
        flate2::Compression::fast(),
    );
    gz.write_all(b"{\"traceEvents\": [").unwrap();
    let spaces = vec![b' '; 1 << 20];
    for _ in 0..300 {
        gz.write_all(&spaces).unwrap();
    }
    gz.write_all(b"]}").unwrap();
    gz.finish().unwrap();
    let out = ingest(&p, &dir.path().join("runs"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("bomb.json.gz") && err.contains("gzip bomb"),
        "{err}"
    );
    assert!(err.contains("256 MB"), "the cap is stated: {err}");
}

/// 200,000 events on one line: every kernel counted, nothing lost to line handling.
#[test]
fn events_on_one_line_all_count() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("one-line.json");
    std::fs::write(&p, one_line_trace(200_000, "k")).unwrap();
    let run = run_dir(&ingest(&p, &dir.path().join("runs")));
    let b = llmprof_store::read_bundle(&run).unwrap();
    assert_eq!(b.totals.kernels, 200_000);
    assert_eq!(b.kernels[0].total_ns, 200_000 * 500);
}

/// A kernel name of 1 MB is kept whole in the bundle, and the terminal report stays
/// readable: no line of `show` is longer than a few hundred characters.
#[test]
fn a_kernel_name_of_a_megabyte_is_kept_and_shown_short() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("void huge<{}>(int)", "T".repeat(1 << 20));
    let p = dir.path().join("big-name.json");
    std::fs::write(&p, one_line_trace(3, &name)).unwrap();
    let run = run_dir(&ingest(&p, &dir.path().join("runs")));
    let b = llmprof_store::read_bundle(&run).unwrap();
    assert_eq!(b.kernels[0].name, name);
    assert_eq!(b.kernels[0].calls, 3);
    let show = llmprof(["show".as_ref(), run.as_os_str()]);
    assert!(show.status.success());
    let text = String::from_utf8_lossy(&show.stdout);
    let longest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(longest < 400, "a line of {longest} characters");
}

/// An nsys export whose kernel table claims a rowid of 2^62 (a forged file): ingest sizes its
/// buffers by the file, not by the claim, and reads the export as before.
#[test]
fn a_forged_rowid_does_not_size_the_reservation() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("forged.sqlite");
    let gz = crate::common::h200("nsys_export.sqlite.gz");
    let mut plain = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(gz).unwrap()),
        &mut plain,
    )
    .unwrap();
    std::fs::write(&p, plain).unwrap();
    let c = rusqlite::Connection::open(&p).unwrap();
    c.execute_batch(
        "CREATE TEMP TABLE k AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1;
         UPDATE k SET start = start + 1, end = end + 1;
         INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM k;
         UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET rowid = 4611686018427387904
           WHERE rowid = (SELECT MAX(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL);",
    )
    .unwrap();
    drop(c);
    let runs = dir.path().join("runs");
    let out = llmprof([
        "ingest".as_ref(),
        "--nsys".as_ref(),
        p.as_os_str(),
        "--out".as_ref(),
        runs.as_os_str(),
    ]);
    let run = run_dir(&out);
    let bundle = llmprof_store::read_bundle(&run).unwrap();
    assert_eq!(
        bundle.totals.kernels, 20_506,
        "the fixture's 20,505 kernels and the added one"
    );
}
