//! Deterministic generator of Kineto-like multi-rank traces (being written).
