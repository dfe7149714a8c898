// fused.wgsl: K leapfrog steps for N chains in one dispatch (entry point `fused_main`), for a
// NUTS tree builder on the CPU.
//
// Each invocation integrates one chain from the point the host wrote into fu_state (position,
// momentum, and the gradient at that position) with its own signed step size, and records
// after every step the position, momentum, gradient and log density of the SAME state: the
// state after the step's second half kick, whose gradient and log density are those of its
// position (the original system's fused path shipped them one step apart). A chain whose step
// size is 0 is idle in this dispatch.

struct FuParams {
    n_chains: u32,
    n_steps: u32,
    pad0: u32,
    pad1: u32,
}

@group(1) @binding(1) var<uniform> fu_params: FuParams;
// The diagonal inverse metric (G_DIM values).
@group(1) @binding(2) var<storage, read> fu_consts: array<T>;
// Roles FU_Q, FU_P, FU_G, dim-major: coordinate j of role r of chain c at (r * G_DIM + j) * n + c;
// then one signed step size per chain, at 3 * G_DIM * n + c (one buffer write per run).
@group(1) @binding(3) var<storage, read_write> fu_state: array<T>;
// Step k's roles at ((k * 3 + r) * G_DIM + j) * n + c; its log density at
// (n_steps * 3 * G_DIM + k) * n + c.
@group(1) @binding(4) var<storage, read_write> fu_out: array<T>;

const FU_Q: u32 = 0u;
const FU_P: u32 = 1u;
const FU_G: u32 = 2u;

var<private> fu_n: u32;
// The chain's position, momentum and gradient during the dispatch: private (registers when
// the model is small), read from fu_state at the start and written back at the end.
var<private> fu_q: array<T, G_DIM>;
var<private> fu_p: array<T, G_DIM>;
var<private> fu_g: array<T, G_DIM>;

fn fu_at(role: u32, j: u32) -> u32 {
    return (role * G_DIM + j) * fu_n + g_chain;
}

fn g_theta(j: u32) -> T {
    return fu_q[j];
}

fn g_set_grad(j: u32, value: T) {
    fu_g[j] = value;
}

// Each lane holds the whole chain: a split parameter vector's element is read from it, and
// the lanes' gradients go to every lane.
fn g_theta_split(k: u32, offset: u32) -> T {
    return fu_q[min(offset + k * G_LANES + g_lane, G_DIM - 1u)];
}

fn g_set_grad_split(k: u32, offset: u32, len: u32, value: T) {
    for (var source = 0u; source < G_LANES; source = source + 1u) {
        let got = g_lane_get(value, source);
        let i = k * G_LANES + source;
        if (i < len) {
            fu_g[offset + i] = got;
        }
    }
}

@compute @workgroup_size(G_WORKGROUP_SIZE)
fn fused_main(
    @builtin(workgroup_id) workgroup: vec3<u32>,
    @builtin(num_workgroups) n_workgroups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    // First, while every invocation is here: it may copy the model's data into workgroup
    // memory and wait at a barrier (wgsl.rs, "Model data").
    g_stage_data(local);
    // One chain per invocation, or per G_LANES invocations (wgsl.rs, "Lanes").
    let chain = g_chain_of((workgroup.y * n_workgroups.x + workgroup.x) * G_WORKGROUP_SIZE + local);
    if (chain >= fu_params.n_chains) {
        return;
    }
    g_chain = chain;
    fu_n = fu_params.n_chains;
    let eps = fu_state[3u * G_DIM * fu_n + chain];
    if (eps == 0.0) {
        return;
    }
    let half = 0.5 * eps;
    let n_steps = fu_params.n_steps;
    for (var j = 0u; j < G_DIM; j = j + 1u) {
        fu_q[j] = fu_state[fu_at(FU_Q, j)];
        fu_p[j] = fu_state[fu_at(FU_P, j)];
        fu_g[j] = fu_state[fu_at(FU_G, j)];
    }
    for (var k = 0u; k < n_steps; k = k + 1u) {
        for (var j = 0u; j < G_DIM; j = j + 1u) {
            let p = fu_p[j] + half * fu_g[j];
            fu_p[j] = p;
            fu_q[j] = fu_q[j] + eps * fu_consts[j] * p;
        }
        let logp = g_logp_grad();
        let base = k * 3u * G_DIM;
        for (var j = 0u; j < G_DIM; j = j + 1u) {
            let g = fu_g[j];
            let p = fu_p[j] + half * g;
            fu_p[j] = p;
            fu_out[((base + j) * fu_n) + chain] = fu_q[j];
            fu_out[((base + G_DIM + j) * fu_n) + chain] = p;
            fu_out[((base + 2u * G_DIM + j) * fu_n) + chain] = g;
        }
        fu_out[(n_steps * 3u * G_DIM + k) * fu_n + chain] = logp;
    }
    for (var j = 0u; j < G_DIM; j = j + 1u) {
        fu_state[fu_at(FU_Q, j)] = fu_q[j];
        fu_state[fu_at(FU_P, j)] = fu_p[j];
        fu_state[fu_at(FU_G, j)] = fu_g[j];
    }
}
