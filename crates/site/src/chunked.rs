//! A run's timeline as the viewer's data scripts: one `timeline.js` holding the JSON text, or,
//! for a timeline with more kernels than the build's limit, a [`ChunkedTimeline`] head in
//! `timeline.js` and the kernels in binary chunks by time, one base64 script each under
//! `timeline-chunks/`. Script files, not `fetch`, so the site works from `file://`.

use std::fs;
use std::path::Path;

use base64::Engine;
use llmprof_bundle::chunks::check_kernels;
use llmprof_bundle::{ChunkedTimeline, Timeline};

use crate::{data_script, write, SiteError, TIMELINE_JS};

/// Timelines with more kernels than this are chunked by default; the viewer then loads at most
/// this many kernels at once (a million load whole in about a second, the README's benchmark).
pub const CHUNK_ABOVE: u64 = 1_000_000;

/// Kernels per chunk: about 1 MB of script each; fewer under a small load budget, so a window
/// of the budget's kernels spans at least eight chunks.
const PER_CHUNK: usize = 65_536;

/// Buckets of the overview, each stream's: about ten per pixel of a full-width canvas.
const BUCKETS: usize = 16_384;

/// The chunks' directory in a run's site directory.
pub const CHUNK_DIR: &str = "timeline-chunks";

/// Writes `timeline.js` (and the chunks, when the timeline has more than `chunk_above`
/// kernels) for the run `id` into `run_out`. A timeline whose text is too short to hold that
/// many kernels (each takes at least 10 bytes of JSON) is not parsed here, which keeps a site
/// of a thousand ordinary runs as fast to build as before.
pub(crate) fn write_timeline_scripts(
    id: &str,
    text: String,
    run_out: &Path,
    chunk_above: u64,
) -> Result<(), SiteError> {
    let dir = run_out.join(CHUNK_DIR);
    if dir.exists() {
        fs::remove_dir_all(&dir).map_err(|e| SiteError::Write {
            path: dir.clone(),
            source: e,
        })?;
    }
    let large = text.len() as u64 / 10 > chunk_above;
    let cuttable = |t: &Timeline| {
        t.kernels.start.len() as u64 > chunk_above
            && check_kernels(&t.kernels, t.streams.len()).is_ok()
    };
    let parsed = large.then(|| Timeline::from_json(&text).ok()).flatten();
    match parsed.filter(cuttable) {
        Some(timeline) => {
            // The text (hundreds of MB for such a run) is not needed past this point.
            drop(text);
            let per_chunk = PER_CHUNK.min((chunk_above / 8).max(1) as usize);
            let (head, chunks) = ChunkedTimeline::split(timeline, per_chunk, BUCKETS, chunk_above)
                .map_err(|e| SiteError::Render {
                    what: format!("the chunked timeline of {id}"),
                    message: e.to_string(),
                })?;
            write_chunked(id, &head, &chunks, run_out)
        }
        // A timeline that does not parse, or whose columns are inconsistent, is published as
        // it is: the viewer says what is wrong with it.
        None => write(
            &run_out.join(TIMELINE_JS),
            data_script("timeline", id, &text).as_bytes(),
        ),
    }
}

fn write_chunked(
    id: &str,
    head: &ChunkedTimeline,
    chunks: &[Vec<u8>],
    run_out: &Path,
) -> Result<(), SiteError> {
    let dir = run_out.join(CHUNK_DIR);
    for (i, bytes) in chunks.iter().enumerate() {
        let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
        let script = data_script("chunk", &format!("{id}/{i}"), &b64);
        write(&dir.join(format!("{i}.js")), script.as_bytes())?;
    }
    let head = serde_json::to_string(head).map_err(|e| SiteError::Render {
        what: format!("the chunked timeline of {id}"),
        message: e.to_string(),
    })?;
    write(
        &run_out.join(TIMELINE_JS),
        data_script("timeline-chunked", id, &head).as_bytes(),
    )
}
