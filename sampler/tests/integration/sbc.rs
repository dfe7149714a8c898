//! Simulation-based calibration of the whole sampler. (Being written.)
