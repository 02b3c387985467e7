//! NCCL_DEBUG logs and nccl-tests output (being written).
