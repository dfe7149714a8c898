//! Fuzz target: arbitrary bytes through every decoder a peer's bytes reach, on both sides of
//! a connection. The first byte picks the decoder (see `sampler_fuzz::wire`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sampler_fuzz::wire::exercise(data);
});
