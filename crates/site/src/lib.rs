//! The static report site (being written).
