//! Placeholder: the model FLOPs/bytes module is being written.
