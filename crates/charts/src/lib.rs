//! SVG charts of run bundles (being written).
