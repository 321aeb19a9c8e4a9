//! Where the targets that read files write them: `/dev/shm` when it exists, so the files
//! live in memory, else `/tmp`.

/// The directory for the targets' temporary files.
pub fn dir() -> &'static str {
    if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    }
}
