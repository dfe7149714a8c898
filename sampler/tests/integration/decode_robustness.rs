//! Decoding and validating arbitrary bytes never panics. (Being written.)
