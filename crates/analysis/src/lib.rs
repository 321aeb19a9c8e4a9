//! Analysis of a run bundle: FLOPs and bytes from the model config, MFU/MBU, roofline position,
//! and a diagnosis. Pure computation on bundle types: no I/O.

pub mod model;
