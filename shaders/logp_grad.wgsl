// logp_grad.wgsl: the batch kernel. One invocation evaluates the log density and gradient of
// one chain; a dispatch covers `n_chains` chains.
//
// Chain state is dim-major: coordinate j of chain c is element `j * n_chains + c`, so that
// neighbouring invocations read neighbouring addresses. The generated model (`g_logp_grad`)
// reads its point through `g_theta` and writes its gradient through `g_set_grad`; this file
// supplies both, which is the whole contract a kernel must meet to call the model (see
// gpu-actor's wgsl.rs). Bindings 0 of group 1 and all of group 0 are the model's.

struct LgParams {
    n_chains: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(1) @binding(1) var<uniform> lg_params: LgParams;
@group(1) @binding(2) var<storage, read> lg_theta: array<T>;
@group(1) @binding(3) var<storage, read_write> lg_logp: array<T>;
@group(1) @binding(4) var<storage, read_write> lg_grad: array<T>;

fn g_theta(j: u32) -> T {
    return lg_theta[j * lg_params.n_chains + g_chain];
}

fn g_set_grad(j: u32, value: T) {
    lg_grad[j * lg_params.n_chains + g_chain] = value;
}

// Every lane reads and writes its own coordinates of a split parameter vector.
fn g_theta_split(k: u32, offset: u32) -> T {
    return g_theta(min(offset + k * G_LANES + g_lane, G_DIM - 1u));
}

fn g_set_grad_split(k: u32, offset: u32, len: u32, value: T) {
    let i = k * G_LANES + g_lane;
    if (i < len) {
        g_set_grad(offset + i, value);
    }
}

// The grid is 2-D when more than 65535 workgroups are needed; trailing invocations past
// `n_chains` do nothing (there is no barrier below, so an early return is safe).
@compute @workgroup_size(G_WORKGROUP_SIZE)
fn logp_grad_main(
    @builtin(workgroup_id) workgroup: vec3<u32>,
    @builtin(num_workgroups) n_workgroups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    // First, while every invocation is here: it may copy the model's data into workgroup
    // memory and wait at a barrier (wgsl.rs, "Model data").
    g_stage_data(local);
    // One chain per invocation, or per G_LANES invocations (wgsl.rs, "Lanes").
    let chain = g_chain_of((workgroup.y * n_workgroups.x + workgroup.x) * G_WORKGROUP_SIZE + local);
    if (chain >= lg_params.n_chains) {
        return;
    }
    g_chain = chain;
    lg_logp[chain] = g_logp_grad();
}
