//! The PyTorch profiler trace through the whole ingest (parser, converter, communication,
//! assembly), as `llmprof ingest --kineto FILE` runs it: any bytes give a bundle or an error,
//! never a panic. Then the same bytes read whole on one thread and in tiny windows and pieces
//! on three workers must read alike (an assertion, so a difference is a finding): fuzz inputs
//! are far smaller than a real window, so this is what puts the parallel reader's guessed
//! piece bounds and window moves under the fuzzer.
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
    let (whole, pieces) = llmprof_ingest::kineto::read_whole_and_in_pieces(file.path());
    assert_eq!(whole, pieces, "the trace reads differently in pieces");
});

/// Files live in memory when /dev/shm exists.
fn dir() -> &'static str {
    if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    }
}
