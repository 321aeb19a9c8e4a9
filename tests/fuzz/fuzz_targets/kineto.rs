//! The PyTorch profiler trace through the whole ingest (parser, converter, communication,
//! assembly), as `llmprof ingest --kineto FILE` runs it: any bytes give a bundle or an error,
//! never a panic. Then the same bytes read whole on one thread and in tiny windows and pieces
//! on three workers must read alike (an assertion, so a difference is a finding): fuzz inputs
//! are far smaller than a real window, so this is what puts the parallel reader's guessed
//! piece bounds and window moves under the fuzzer. Last, the bytes gzipped must read as they
//! did plain, whole and in pieces: the inflating thread's buffer exchange, and the parallel
//! gzip reader's pieces, under the fuzzer.
#![no_main]

mod scratch;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = tempfile::Builder::new().suffix(".json").tempfile_in(scratch::dir()) else {
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
    // The same bytes gzipped must read as the plain file does: whole through `flate2`'s
    // window buffers, in pieces through the parallel gzip reader's pieces.
    if !data.starts_with(&[0x1f, 0x8b]) {
        if let Some(gz) = gzipped(data) {
            let (gz_whole, gz_pieces) = llmprof_ingest::kineto::read_whole_and_in_pieces(gz.path());
            // Errors name the file: the two names aside, the readings must be equal.
            let plain = whole.replace(&*file.path().to_string_lossy(), "FILE");
            let unnamed = |s: String| s.replace(&*gz.path().to_string_lossy(), "FILE");
            assert_eq!(plain, unnamed(gz_whole), "the trace reads differently gzipped");
            assert_eq!(plain, unnamed(gz_pieces), "the trace reads differently gzipped, in pieces");
        }
    }
});

/// `data` written gzip-compressed to a temporary `.json.gz`.
fn gzipped(data: &[u8]) -> Option<tempfile::NamedTempFile> {
    use std::io::Write;
    let file = tempfile::Builder::new()
        .suffix(".json.gz")
        .tempfile_in(scratch::dir())
        .ok()?;
    let mut gz = flate2::write::GzEncoder::new(file.as_file(), flate2::Compression::fast());
    gz.write_all(data).ok()?;
    gz.finish().ok()?;
    Some(file)
}
