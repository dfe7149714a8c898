// nuts_moments.wgsl: the pooled moments of a warmup block's draws, on the device (entry point
// `nuts_moments_main`), run right after a dispatch of `nuts_main`, so that warmup reads back
// a few kilobytes of moments instead of every chain's draws.
//
// One workgroup of NM_CHUNK invocations per chunk of NM_CHUNK chains (one chain each) and per
// value k of a draw (a coordinate of q, then of g); for every iteration of the block it
// writes the chunk's count of draws, their mean of value k and the sum of squared deviations
// from it (two passes, each a fixed tree in workgroup memory: the same order of additions
// whatever the device's subgroup size). The host merges the chunks in order (Chan et al.) in f64;
// sampler's warmup schedules take it from there (gpu-actor `sampling/adapt.rs`).
//
// A chain's draw of iteration `it` is in output slot `it - (iter - draws)`, where `iter` and
// `draws` are its NS_U_ITER and NS_U_DRAWS after the dispatch. With `usable_only` (nutpie's
// schedule), a draw counts only if the chain moved: its index in the trajectory is not 0, or
// more than 4 steps from 0 after a divergence. A draw whose log density is below `lp_floor`
// never counts (a straggler far from the other chains; gpu-actor `sampling/adapt.rs`).
//
// The NS_ constants are nuts_state.wgsl's (a unit test compares them).

struct NmParams {
    n_chains: u32,
    // Values per draw in the output slots (G_DIM, or 2 G_DIM with gradients).
    width: u32,
    // The dispatch's output slots (where the real statistics start).
    capacity: u32,
    // The block's first iteration, and its iterations.
    block_start: u32,
    bins: u32,
    usable_only: u32,
    // 1: each slot's draws chain after chain (`(slot * n + c) * width + k`, chains split across
    // lanes; nuts_state.wgsl's `ns_out_at`); 0: value after value (`(slot * width + k) * n + c`).
    chain_major: u32,
    // Draws whose log density is below this are left out (a chain far from where the others
    // are must not inflate the pooled metric; gpu-actor `sampling/adapt.rs`, `lp_floor`);
    // -3.4e38 (f32's lowest): none.
    lp_floor: f32,
}

@group(0) @binding(0) var<uniform> nm: NmParams;
// nuts_state.wgsl's `ns_out` and `ns_uint`.
@group(0) @binding(1) var<storage, read> nm_out: array<T>;
@group(0) @binding(2) var<storage, read> nm_uint: array<u32>;
// Per chunk and iteration: the count; then per chunk, iteration and value: mean, sum of
// squared deviations.
@group(0) @binding(3) var<storage, read_write> nm_moments: array<T>;

const NS_U_ITER: u32 = 1u;
const NS_U_DRAWS: u32 = 11u;
const NS_U_COUNT: u32 = 17u;
const NS_OU_DIVERGENT: u32 = 2u;
const NS_OU_INDEX: u32 = 3u;
const NS_OU_COUNT: u32 = 4u;
const NS_O_LP: u32 = 0u;
const NS_O_COUNT: u32 = 5u;

const NM_CHUNK: u32 = 256u;

var<workgroup> nm_count: array<T, NM_CHUNK>;
var<workgroup> nm_sum: array<T, NM_CHUNK>;

// Sums nm_count and nm_sum over the workgroup into their element 0.
fn nm_reduce(local: u32) {
    for (var half = NM_CHUNK / 2u; half > 0u; half = half / 2u) {
        workgroupBarrier();
        if (local < half) {
            nm_count[local] = nm_count[local] + nm_count[local + half];
            nm_sum[local] = nm_sum[local] + nm_sum[local + half];
        }
    }
    workgroupBarrier();
}

@compute @workgroup_size(NM_CHUNK)
fn nuts_moments_main(
    @builtin(local_invocation_index) local: u32,
    @builtin(workgroup_id) workgroup: vec3<u32>,
    @builtin(num_workgroups) n_workgroups: vec3<u32>,
) {
    let n = nm.n_chains;
    let chunk = workgroup.x;
    let c = chunk * NM_CHUNK + local;
    // The oldest iteration of the chain's draws in this dispatch, and their number.
    var first = 0u;
    var draws = 0u;
    if (c < n) {
        draws = nm_uint[NS_U_DRAWS * n + c];
        first = nm_uint[NS_U_ITER * n + c] - draws;
    }
    let n_chunks = n_workgroups.x;
    let counts = n_chunks * nm.bins;
    for (var k = workgroup.y; k < nm.width; k = k + n_workgroups.y) {
        for (var bin = 0u; bin < nm.bins; bin = bin + 1u) {
            let it = nm.block_start + bin;
            var weight: T = 0.0;
            var x: T = 0.0;
            if (it >= first && it - first < draws) {
                let slot = it - first;
                var usable = true;
                if (nm.usable_only == 1u) {
                    let at = NS_U_COUNT * n + slot * NS_OU_COUNT * n + c;
                    let index = bitcast<i32>(nm_uint[at + NS_OU_INDEX * n]);
                    if (nm_uint[at + NS_OU_DIVERGENT * n] != 0u) {
                        usable = abs(index) > 4;
                    } else {
                        usable = index != 0;
                    }
                }
                if (usable && nm.lp_floor > -3.0e38) {
                    // nuts_state.wgsl's `ns_out_stat_at`.
                    let stats = nm.capacity * nm.width * n;
                    var at_lp = stats + (slot * NS_O_COUNT + NS_O_LP) * n + c;
                    if (nm.chain_major == 1u) {
                        at_lp = stats + (slot * n + c) * NS_O_COUNT + NS_O_LP;
                    }
                    usable = nm_out[at_lp] >= T(nm.lp_floor);
                }
                if (usable) {
                    weight = 1.0;
                    if (nm.chain_major == 1u) {
                        x = nm_out[(slot * n + c) * nm.width + k];
                    } else {
                        x = nm_out[(slot * nm.width + k) * n + c];
                    }
                }
            }
            nm_count[local] = weight;
            nm_sum[local] = x;
            nm_reduce(local);
            let count = nm_count[0];
            var mean: T = 0.0;
            if (count > 0.0) {
                mean = nm_sum[0] / count;
            }
            workgroupBarrier();
            let deviation = weight * (x - mean);
            nm_count[local] = 0.0;
            nm_sum[local] = deviation * deviation;
            nm_reduce(local);
            if (local == 0u) {
                let at = chunk * nm.bins + bin;
                if (k == 0u) {
                    nm_moments[at] = count;
                }
                nm_moments[counts + 2u * (at * nm.width + k)] = mean;
                nm_moments[counts + 2u * (at * nm.width + k) + 1u] = nm_sum[0];
            }
            workgroupBarrier();
        }
    }
}
