//! One trace event read by the kineto parser's fast path (`kineto/fast.rs`, a byte scanner)
//! and by serde: wherever the fast path reads an event, serde must read it alike, take as many
//! bytes, and succeed (an assertion, so a difference is a finding). The `kineto` target checks
//! the same on every element of whole traces; this one runs the two readings alone, a hundred
//! times faster, so that the scanner's every branch meets far more inputs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = llmprof_ingest::kineto::fast_path_agrees(data) {
        panic!("the fast path reads an event differently: {e}");
    }
});
