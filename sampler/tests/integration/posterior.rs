//! Posterior moments against analytic truth. (Being written.)
