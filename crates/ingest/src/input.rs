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

/// Most a gzip input may inflate to, per compressed byte: profiler JSON and SQLite compress
/// 5–30×, a gzip bomb a thousandfold.
pub const MAX_INFLATE_RATIO: u64 = 100;
/// Inflating up to this much is always allowed, whatever the ratio (small, very repetitive
/// files).
pub const MIN_INFLATE_CAP: u64 = 256 << 20;

/// How much `path`, gzip-compressed, may inflate to: [`MAX_INFLATE_RATIO`] × its size, at
/// least [`MIN_INFLATE_CAP`].
fn inflate_cap(path: &Path) -> u64 {
    let compressed = std::fs::metadata(path).map_or(0, |m| m.len());
    compressed
        .saturating_mul(MAX_INFLATE_RATIO)
        .max(MIN_INFLATE_CAP)
}

/// Inflates `path` into `out`, stopping with an error naming the file once more than
/// [`inflate_cap`] bytes came out.
fn inflate_capped(
    what: &'static str,
    path: &Path,
    file: &mut File,
    out: &mut dyn std::io::Write,
) -> Result<(), IngestError> {
    let cap = inflate_cap(path);
    let dec = flate2::read::MultiGzDecoder::new(std::io::BufReader::new(file));
    let copied = std::io::copy(&mut dec.take(cap + 1), out)
        .map_err(|e| IngestError::invalid(what, path, format!("corrupt gzip stream: {e}")))?;
    if copied > cap {
        return Err(IngestError::invalid(
            what,
            path,
            format!(
                "inflates past {} MB ({}× its compressed size, or {} MB at least): a gzip bomb \
                 or a corrupt file; if it is a real trace, gunzip it and pass the plain file",
                cap >> 20,
                MAX_INFLATE_RATIO,
                MIN_INFLATE_CAP >> 20
            ),
        ));
    }
    Ok(())
}

/// All bytes of `path`, inflated when gzip-compressed (at most [`inflate_cap`]),
/// memory-mapped otherwise.
pub fn read_bytes(what: &'static str, path: &Path) -> Result<InputBytes, IngestError> {
    let mut file = open_file(what, path)?;
    if is_gzip(path) {
        let mut out = Vec::new();
        inflate_capped(what, path, &mut file, &mut out)?;
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
    let mut file = open_file(what, path)?;
    let mut tmp = tempfile::NamedTempFile::new().map_err(|e| IngestError::io(what, path, e))?;
    inflate_capped(what, path, &mut file, tmp.as_file_mut())?;
    Ok(tmp)
}
