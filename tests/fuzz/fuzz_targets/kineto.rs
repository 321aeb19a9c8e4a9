//! The PyTorch profiler trace through the whole ingest (parser, converter, communication,
//! assembly), as `llmprof ingest --kineto FILE` runs it: any bytes give a bundle or an error,
//! never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = tempfile::Builder::new().suffix(".json").tempfile_in(dir()) else {
        return;
    };
    if std::fs::write(file.path(), data).is_err() {
        return;
    }
    let req = llmprof_ingest::IngestRequest {
        kineto: Some(file.path().to_path_buf()),
        ..Default::default()
    };
    if let Ok(run) = llmprof_ingest::ingest(&req, &mut |_| {}) {
        let _ = llmprof_analysis::analyze(&run.bundle);
    }
});

/// Files live in memory when /dev/shm exists.
fn dir() -> &'static str {
    if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    }
}
