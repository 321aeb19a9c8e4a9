//! Reading input files: missing and empty files are errors that name the file; gzip is
//! recognised by its magic bytes and inflated; large plain files are memory-mapped so that the
//! JSON parser can borrow strings instead of copying them.

use std::fs::File;
use std::io::Read;
use std::ops::Deref;
use std::path::Path;

use crate::error::IngestError;

/// The bytes of one input file.
#[derive(Debug)]
pub enum InputBytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Deref for InputBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            InputBytes::Mapped(m) => m,
            InputBytes::Owned(v) => v,
        }
    }
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Opens `path`, failing with a message that names it when it is missing or empty.
pub fn open_file(what: &'static str, path: &Path) -> Result<File, IngestError> {
    let file = File::open(path).map_err(|e| IngestError::io(what, path, e))?;
    let meta = file
        .metadata()
        .map_err(|e| IngestError::io(what, path, e))?;
    if meta.is_dir() {
        return Err(IngestError::invalid(
            what,
            path,
            "is a directory, expected a file",
        ));
    }
    if meta.len() == 0 {
        return Err(IngestError::Empty {
            what,
            path: path.to_path_buf(),
        });
    }
    Ok(file)
}

/// Whether the file starts with the gzip magic bytes.
pub fn is_gzip(path: &Path) -> bool {
    let mut magic = [0u8; 2];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == GZIP_MAGIC
}

/// All bytes of `path`, inflated when gzip-compressed, memory-mapped otherwise.
pub fn read_bytes(what: &'static str, path: &Path) -> Result<InputBytes, IngestError> {
    let mut file = open_file(what, path)?;
    if is_gzip(path) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(std::io::BufReader::new(&mut file))
            .read_to_end(&mut out)
            .map_err(|e| IngestError::invalid(what, path, format!("corrupt gzip stream: {e}")))?;
        if out.is_empty() {
            return Err(IngestError::Empty {
                what,
                path: path.to_path_buf(),
            });
        }
        return Ok(InputBytes::Owned(out));
    }
    // SAFETY: the map is read-only and lives no longer than this ingest. A concurrent writer
    // truncating the file could fault the process; profiler outputs are not rewritten while
    // they are ingested, and the same risk is accepted by every mmap-based reader.
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| IngestError::io(what, path, e))?;
    Ok(InputBytes::Mapped(map))
}

/// Inflates a gzip file into a temporary file (for SQLite, which needs a real file).
pub fn gunzip_to_temp(
    what: &'static str,
    path: &Path,
) -> Result<tempfile::NamedTempFile, IngestError> {
    let file = open_file(what, path)?;
    let mut tmp = tempfile::NamedTempFile::new().map_err(|e| IngestError::io(what, path, e))?;
    let mut dec = flate2::read::MultiGzDecoder::new(std::io::BufReader::new(file));
    std::io::copy(&mut dec, tmp.as_file_mut())
        .map_err(|e| IngestError::invalid(what, path, format!("corrupt gzip stream: {e}")))?;
    Ok(tmp)
}
