//! An Nsight Compute CSV (raw page, details, long formats) through `llmprof ingest --ncu FILE`:
//! any bytes give ncu rows or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    let Ok(file) = tempfile::Builder::new().suffix(".csv").tempfile_in(dir) else {
        return;
    };
    if std::fs::write(file.path(), data).is_err() {
        return;
    }
    let req = llmprof_ingest::IngestRequest {
        ncu: vec![file.path().to_path_buf()],
        ..Default::default()
    };
    let _ = llmprof_ingest::ingest(&req, &mut |_| {});
});
