//! The size limits a model is checked against, shared by validation and lowering.

/// Size limits applied when a model is checked. Inputs over a limit are refused, so that a
/// request from the network cannot exhaust a node's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest name, in bytes.
    pub max_name_len: usize,
    /// Most data values, summed over all data items.
    pub max_data_values: usize,
    /// Longest unconstrained parameter vector.
    pub max_dim: usize,
    /// Most parameters, transformed parameters and statements, each.
    pub max_declarations: usize,
    /// Most expression nodes in the whole model.
    pub max_expr_nodes: usize,
    /// Longest value tape of the lowered program (values per chain).
    pub max_tape_values: usize,
    /// Largest serialised model accepted by the decoders, in bytes.
    pub max_model_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_name_len: 64,
            max_data_values: 20_000_000,
            max_dim: 1_000_000,
            max_declarations: 100_000,
            max_expr_nodes: 1_000_000,
            max_tape_values: 50_000_000,
            max_model_bytes: 512 * 1024 * 1024,
        }
    }
}
