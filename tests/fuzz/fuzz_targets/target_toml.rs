//! A capture target file (TOML) with `--set` overrides, as `llmprof capture --target F --set
//! K=V` reads it: any bytes give a target or an error naming the file, never a panic.
//!
//! Input lines that start with `#set ` are `--set` overrides (parsed as the flag is); the
//! whole input is also the target file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llmprof_capture::target::{Override, Target};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let overrides: Vec<Override> = text
        .lines()
        .filter_map(|l| l.strip_prefix("#set "))
        .filter_map(|s| Override::parse(s).ok())
        .collect();
    let Ok(dir) = tempfile::tempdir() else {
        return;
    };
    let path = dir.path().join("target.toml");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    if let Err(e) = Target::load_with(&path, &overrides) {
        // Every error names the file it is about.
        assert!(e.to_string().contains("target.toml"), "{e}");
    }
});
