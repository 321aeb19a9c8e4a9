//! Capture (being written).
