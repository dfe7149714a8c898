// nuts_state.wgsl: the chain state of the NUTS kernels (nuts.wgsl, nuts_search.wgsl): its
// bindings, its layout in storage, and loading and storing one chain's scalars.
//
// Everything a chain needs between two leapfrog steps lives in storage buffers, so a
// transition may stop after any step and go on in the next dispatch. Within a dispatch, the
// end being integrated (position, momentum, gradient) and the subtree's momentum sum live in
// private arrays (`ns_q`, `ns_p`, `ns_g`, `ns_rho`): registers when the model is small, and
// never a round trip through storage per leapfrog step. `ns_load_end` and `ns_store_end` move
// them; storage's copies of that end and of NS_V_RHO_NEW are stale while a subtree grows.
//
// Each vector role (and checkpoint kind) is a block of G_DIM * n values. With one invocation
// per chain the block is dim-major, coordinate j of chain c at `j * n + c`, so the 32 chains of
// a warp touch 32 neighbouring words; with a chain split across G_LANES invocations it is
// chain-major, `c * G_DIM + j`, so the lanes of a chain touch its neighbouring coordinates
// (dim-major, they would touch G_DIM cache lines n words apart). Scalars are `role * n + c`
// after the vectors. gpu-actor's `kernels/layout.rs` holds the same numbers
// (`NsSizes::vec_at`); a unit test compares the constants with this file.
//
// Memory per chain: 14 vectors, 18 real and 17 integer scalars here, 3 vectors per tree depth
// in the checkpoint buffer (the O(max_depth * d) of iterative NUTS), and the output slots.

struct NsParams {
    n_chains: u32,
    max_depth: u32,
    // A chain stops before starting iteration `iter_end`...
    iter_end: u32,
    // ... or after writing `capacity` draws in this dispatch ...
    capacity: u32,
    // ... or after this many leapfrog steps in this dispatch (0: no limit), mid-transition.
    step_budget: u32,
    // 1: each draw also records the gradient at the draw (nutpie's adaptation needs it).
    with_grad: u32,
    flags: u32,
    seed_lo: u32,
    seed_hi: u32,
    // The step size becomes the dual average's mean after this iteration (end of warmup).
    da_final_iter: u32,
    // From this iteration on, dual averaging learns from the symmetric acceptance statistic.
    late_from_iter: u32,
    // Step-size search: 0 Stan's, 1 nutpie's.
    search_kind: u32,
    // ... and its tries per dispatch (0: no limit); a search that runs out goes on in the
    // next dispatch from where it stopped (NS_U_SEARCH_ATTEMPT, NS_U_SEARCH_DIR).
    search_budget: u32,
    pad1: u32,
    pad2: u32,
    pad3: u32,
}

@group(1) @binding(1) var<uniform> ns_params: NsParams;
// Real settings (NS_C_*) followed by the diagonal inverse metric, shared by all chains.
@group(1) @binding(2) var<storage, read> ns_consts: array<T>;
// Per-chain vectors (NS_V_*), then per-chain scalars (NS_S_*).
@group(1) @binding(3) var<storage, read_write> ns_vec: array<T>;
// U-turn checkpoints: 3 vectors per slot (NS_K_*), max_depth + 1 slots.
@group(1) @binding(4) var<storage, read_write> ns_ckpt: array<T>;
// Per-chain integer state (NS_U_*), then the integer statistics of each output slot.
@group(1) @binding(5) var<storage, read_write> ns_uint: array<u32>;
// Output slots: `capacity` draws (q, and g with `with_grad`), then their real statistics.
@group(1) @binding(6) var<storage, read_write> ns_out: array<T>;

// Flags.
const NS_FLAG_ADAPT: u32 = 1u;
const NS_FLAG_SEARCH_MU: u32 = 2u;
// A step-size search dispatch after the first of a search: only chains whose search is under
// way go on; the others (ended, or failed) are left as they are.
const NS_FLAG_SEARCH_CONTINUE: u32 = 4u;

// Real settings in ns_consts.
const NS_C_MAX_ENERGY_ERROR: u32 = 0u;
const NS_C_JITTER: u32 = 1u;
const NS_C_DA_TARGET: u32 = 2u;
const NS_C_DA_GAMMA: u32 = 3u;
const NS_C_DA_T0: u32 = 4u;
const NS_C_DA_KAPPA: u32 = 5u;
const NS_C_DA_MAX_LOG_STEP: u32 = 6u;
const NS_C_SEARCH_MU: u32 = 7u;
const NS_C_COUNT: u32 = 16u;

// Vector roles in ns_vec. Ends 0 (forward) and 1 (backward) of the trajectory: position,
// momentum, gradient.
const NS_V_Q0: u32 = 0u;
const NS_V_P0: u32 = 1u;
const NS_V_G0: u32 = 2u;
const NS_V_Q1: u32 = 3u;
const NS_V_P1: u32 = 4u;
const NS_V_G1: u32 = 5u;
// The current subtree's proposal and the transition's sample (the chain's current point).
const NS_V_QPROP: u32 = 6u;
const NS_V_GPROP: u32 = 7u;
const NS_V_QSAMP: u32 = 8u;
const NS_V_GSAMP: u32 = 9u;
// Momentum sums: of the trajectory before this subtree, of this subtree.
const NS_V_RHO_OLD: u32 = 10u;
const NS_V_RHO_NEW: u32 = 11u;
// Stan's junction momenta: the old trajectory's end on the growing side when a subtree grows
// forward (role J0, Stan's p_bck_fwd) or backward (role J1, Stan's p_fwd_bck).
const NS_V_J0: u32 = 12u;
const NS_V_J1: u32 = 13u;
const NS_V_COUNT: u32 = 14u;

// Checkpoint kinds per slot: the momentum of a pending left half's first leaf, the subtree's
// momentum sum before that leaf, and the momentum of the left half's last leaf.
const NS_K_P_START: u32 = 0u;
const NS_K_RSUM: u32 = 1u;
const NS_K_P_END: u32 = 2u;
const NS_K_COUNT: u32 = 3u;

// Scalar roles, after the vectors in ns_vec.
const NS_S_LOGP0: u32 = 0u;
const NS_S_LOGP1: u32 = 1u;
const NS_S_LOGP_PROP: u32 = 2u;
const NS_S_H_PROP: u32 = 3u;
const NS_S_LOGP_SAMP: u32 = 4u;
const NS_S_H_SAMP: u32 = 5u;
const NS_S_H0: u32 = 6u;
const NS_S_LSW: u32 = 7u;
const NS_S_LSW_SUB: u32 = 8u;
const NS_S_SUM_METRO: u32 = 9u;
const NS_S_SUM_SYM: u32 = 10u;
const NS_S_STEP: u32 = 11u;
const NS_S_EPS: u32 = 12u;
const NS_S_DA_MU: u32 = 13u;
const NS_S_DA_COUNT: u32 = 14u;
const NS_S_DA_SBAR: u32 = 15u;
const NS_S_DA_X: u32 = 16u;
const NS_S_DA_XBAR: u32 = 17u;
const NS_S_COUNT: u32 = 18u;

// Integer roles in ns_uint.
const NS_U_PHASE: u32 = 0u;
const NS_U_ITER: u32 = 1u;
const NS_U_DEPTH: u32 = 2u;
const NS_U_LEAF: u32 = 3u;
const NS_U_END: u32 = 4u;
const NS_U_NLEAP: u32 = 5u;
const NS_U_DIVERGENT: u32 = 6u;
const NS_U_IDX_PROP: u32 = 7u;
const NS_U_IDX_SAMP: u32 = 8u;
const NS_U_IDX0: u32 = 9u;
const NS_U_IDX1: u32 = 10u;
const NS_U_DRAWS: u32 = 11u;
const NS_U_STEPS: u32 = 12u;
const NS_U_ERROR: u32 = 13u;
const NS_U_SEARCH_EVALS: u32 = 14u;
// A step-size search under way across dispatches: its next try's number, and its direction
// (0: none under way, 1: growing, 2: shrinking). The step it has reached is NS_S_STEP.
const NS_U_SEARCH_ATTEMPT: u32 = 15u;
const NS_U_SEARCH_DIR: u32 = 16u;
const NS_U_COUNT: u32 = 17u;

// Real statistics per output slot, after the draws in ns_out.
const NS_O_LP: u32 = 0u;
const NS_O_ACCEPT: u32 = 1u;
const NS_O_ACCEPT_SYM: u32 = 2u;
const NS_O_STEP: u32 = 3u;
const NS_O_ENERGY: u32 = 4u;
const NS_O_COUNT: u32 = 5u;

// Integer statistics per output slot, after the state in ns_uint.
const NS_OU_DEPTH: u32 = 0u;
const NS_OU_NLEAP: u32 = 1u;
const NS_OU_DIVERGENT: u32 = 2u;
const NS_OU_INDEX: u32 = 3u;
const NS_OU_COUNT: u32 = 4u;

// Phases of the per-chain state machine.
const NS_PHASE_START: u32 = 0u;
const NS_PHASE_SUBTREE: u32 = 1u;
const NS_PHASE_LEAF: u32 = 2u;

// Purposes of random numbers (the third counter word; the fourth is an index).
const NS_RNG_MOMENTUM: u32 = 0u;
const NS_RNG_DIRECTION: u32 = 1u;
const NS_RNG_LEAF: u32 = 2u;
const NS_RNG_TOP: u32 = 3u;
const NS_RNG_JITTER: u32 = 4u;
const NS_RNG_SEARCH: u32 = 5u;

// Step-size search failures (NS_U_ERROR).
const NS_ERROR_STEP_TOO_LARGE: u32 = 1u;
const NS_ERROR_STEP_ZERO: u32 = 2u;

struct NsChain {
    logp0: T,
    logp1: T,
    logp_prop: T,
    h_prop: T,
    logp_samp: T,
    h_samp: T,
    h0: T,
    lsw: T,
    lsw_sub: T,
    sum_metro: T,
    sum_sym: T,
    step: T,
    eps: T,
    da_mu: T,
    da_count: T,
    da_sbar: T,
    da_x: T,
    da_xbar: T,
    phase: u32,
    iter: u32,
    depth: u32,
    leaf: u32,
    end: u32,
    nleap: u32,
    divergent: u32,
    idx_prop: i32,
    idx_samp: i32,
    idx0: i32,
    idx1: i32,
    draws: u32,
    steps: u32,
    error: u32,
    search_evals: u32,
    search_attempt: u32,
    search_dir: u32,
}

var<private> ns: NsChain;
var<private> ns_n: u32;
// The end being integrated and the subtree's momentum sum (see the top of this file);
// `g_theta` reads ns_q, `g_set_grad` writes ns_g.
//
// A chain split across G_LANES invocations (wgsl.rs, "Lanes") splits these vectors too:
// coordinate j is element j / G_LANES of lane j % G_LANES, so each loop over coordinates runs
// over a lane's own (`ns_j`), storage holds each coordinate where it always was, and every sum
// over coordinates ends with `g_lane_sum`, which gives all lanes the same bits. With one
// invocation per chain, NS_LOCAL = G_DIM and lane 0 holds everything.
const NS_LOCAL: u32 = (G_DIM + G_LANES - 1u) / G_LANES;
var<private> ns_q: array<T, NS_LOCAL>;
var<private> ns_p: array<T, NS_LOCAL>;
var<private> ns_g: array<T, NS_LOCAL>;
var<private> ns_rho: array<T, NS_LOCAL>;

// The coordinate of this lane's element k.
fn ns_j(k: u32) -> u32 {
    return k * G_LANES + g_lane;
}

// Coordinate j of this chain in a block of G_DIM * n values starting at `block`.
fn ns_in_block(block: u32, j: u32) -> u32 {
    if (G_LANES > 1u) {
        return block + g_chain * G_DIM + j;
    }
    return block + j * ns_n + g_chain;
}

fn ns_v(role: u32, j: u32) -> u32 {
    return ns_in_block(role * G_DIM * ns_n, j);
}

// Draw value k (of `width`) of this chain in output slot `slot`. Split across lanes, a slot
// holds its draws chain after chain, so that the lanes of a chain write one run of
// neighbouring words (a sampling dispatch may write them straight into host memory, where
// scattered words cost one bus transaction each); with one invocation per chain, value after
// value, so that a warp's chains write neighbouring words. gpu-actor's `NsSizes::out_at`.
fn ns_out_at(slot: u32, width: u32, k: u32) -> u32 {
    if (G_LANES > 1u) {
        return (slot * ns_n + g_chain) * width + k;
    }
    return (slot * width + k) * ns_n + g_chain;
}

// Real statistic k of this chain in output slot `slot`, after the draws; the same order as
// `ns_out_at` (`NsSizes::out_stat_at`).
fn ns_out_stat_at(slot: u32, k: u32) -> u32 {
    if (G_LANES > 1u) {
        return (slot * ns_n + g_chain) * NS_O_COUNT + k;
    }
    return (slot * NS_O_COUNT + k) * ns_n + g_chain;
}

fn ns_s(role: u32) -> u32 {
    return (NS_V_COUNT * G_DIM + role) * ns_n + g_chain;
}

fn ns_u(role: u32) -> u32 {
    return role * ns_n + g_chain;
}

fn ns_k(slot: u32, kind: u32, j: u32) -> u32 {
    return ns_in_block((slot * NS_K_COUNT + kind) * G_DIM * ns_n, j);
}

fn ns_minv(j: u32) -> T {
    return ns_consts[NS_C_COUNT + j];
}

fn ns_const(index: u32) -> T {
    return ns_consts[index];
}

// Every lane of the chain calls these with the same j: the model is replicated.
fn g_theta(j: u32) -> T {
    return g_lane_get(ns_q[j / G_LANES], j % G_LANES);
}

fn g_set_grad(j: u32, value: T) {
    if (j % G_LANES == g_lane) {
        ns_g[j / G_LANES] = value;
    }
}

// A split parameter vector from coordinate `offset` (wgsl/split.rs) holds its element i on
// lane i % G_LANES, while ns_q holds coordinate offset + i on lane (offset + i) % G_LANES: a
// rotation by r = offset % G_LANES. Lane m holds the coordinates that lane (m - r) mod G_LANES
// needs, at its element k + offset / G_LANES, one further when m < r (the coordinate wrapped
// past a multiple of G_LANES). Every lane of the chain calls these together.
fn ns_rotated(k: u32, offset: u32) -> u32 {
    var at = k + offset / G_LANES;
    if (g_lane < offset % G_LANES) {
        at = at + 1u;
    }
    return min(at, NS_LOCAL - 1u);
}

fn g_theta_split(k: u32, offset: u32) -> T {
    let source = (g_lane + offset % G_LANES) % G_LANES;
    return g_lane_get(ns_q[ns_rotated(k, offset)], source);
}

fn g_set_grad_split(k: u32, offset: u32, len: u32, value: T) {
    let source = (g_lane + G_LANES - offset % G_LANES) % G_LANES;
    let got = g_lane_get(value, source);
    if (k * G_LANES + source < len) {
        ns_g[ns_rotated(k, offset)] = got;
    }
}

// End `end` of the trajectory (0 forward, 1 backward) from storage into ns_q, ns_p, ns_g.
fn ns_load_end(end: u32) {
    let q_role = NS_V_Q0 + 3u * end;
    for (var k = 0u; k < NS_LOCAL; k = k + 1u) {
        let j = ns_j(k);
        if (j >= G_DIM) {
            break;
        }
        ns_q[k] = ns_vec[ns_v(q_role, j)];
        ns_p[k] = ns_vec[ns_v(q_role + 1u, j)];
        ns_g[k] = ns_vec[ns_v(q_role + 2u, j)];
    }
}

// ns_q, ns_p, ns_g back into end `end` in storage.
fn ns_store_end(end: u32) {
    let q_role = NS_V_Q0 + 3u * end;
    for (var k = 0u; k < NS_LOCAL; k = k + 1u) {
        let j = ns_j(k);
        if (j >= G_DIM) {
            break;
        }
        ns_vec[ns_v(q_role, j)] = ns_q[k];
        ns_vec[ns_v(q_role + 1u, j)] = ns_p[k];
        ns_vec[ns_v(q_role + 2u, j)] = ns_g[k];
    }
}

fn ns_key() -> vec2<u32> {
    return vec2<u32>(ns_params.seed_lo, ns_params.seed_hi);
}

fn ns_counter(purpose: u32, index: u32) -> vec4<u32> {
    return vec4<u32>(g_chain, ns.iter, purpose, index);
}

fn ns_is_finite(x: T) -> bool {
    return abs(x) <= SF_MAX_FINITE;
}

// Stan's Hamiltonian with NaN (and any non-finite value) as +inf.
fn ns_energy(logp: T, kinetic: T) -> T {
    let h = -logp + kinetic;
    if (!ns_is_finite(h)) {
        return sf_inf();
    }
    return h;
}

// log(exp(a) + exp(b)), as sampler's `log_sum_exp`.
fn ns_log_sum_exp(a: T, b: T) -> T {
    if (a == sf_neg_inf()) {
        return b;
    }
    if (b == sf_neg_inf()) {
        return a;
    }
    return max(a, b) + sf_log1p(sf_exp(-abs(a - b)));
}

fn ns_load() {
    ns.logp0 = ns_vec[ns_s(NS_S_LOGP0)];
    ns.logp1 = ns_vec[ns_s(NS_S_LOGP1)];
    ns.logp_prop = ns_vec[ns_s(NS_S_LOGP_PROP)];
    ns.h_prop = ns_vec[ns_s(NS_S_H_PROP)];
    ns.logp_samp = ns_vec[ns_s(NS_S_LOGP_SAMP)];
    ns.h_samp = ns_vec[ns_s(NS_S_H_SAMP)];
    ns.h0 = ns_vec[ns_s(NS_S_H0)];
    ns.lsw = ns_vec[ns_s(NS_S_LSW)];
    ns.lsw_sub = ns_vec[ns_s(NS_S_LSW_SUB)];
    ns.sum_metro = ns_vec[ns_s(NS_S_SUM_METRO)];
    ns.sum_sym = ns_vec[ns_s(NS_S_SUM_SYM)];
    ns.step = ns_vec[ns_s(NS_S_STEP)];
    ns.eps = ns_vec[ns_s(NS_S_EPS)];
    ns.da_mu = ns_vec[ns_s(NS_S_DA_MU)];
    ns.da_count = ns_vec[ns_s(NS_S_DA_COUNT)];
    ns.da_sbar = ns_vec[ns_s(NS_S_DA_SBAR)];
    ns.da_x = ns_vec[ns_s(NS_S_DA_X)];
    ns.da_xbar = ns_vec[ns_s(NS_S_DA_XBAR)];
    ns.phase = ns_uint[ns_u(NS_U_PHASE)];
    ns.iter = ns_uint[ns_u(NS_U_ITER)];
    ns.depth = ns_uint[ns_u(NS_U_DEPTH)];
    ns.leaf = ns_uint[ns_u(NS_U_LEAF)];
    ns.end = ns_uint[ns_u(NS_U_END)];
    ns.nleap = ns_uint[ns_u(NS_U_NLEAP)];
    ns.divergent = ns_uint[ns_u(NS_U_DIVERGENT)];
    ns.idx_prop = bitcast<i32>(ns_uint[ns_u(NS_U_IDX_PROP)]);
    ns.idx_samp = bitcast<i32>(ns_uint[ns_u(NS_U_IDX_SAMP)]);
    ns.idx0 = bitcast<i32>(ns_uint[ns_u(NS_U_IDX0)]);
    ns.idx1 = bitcast<i32>(ns_uint[ns_u(NS_U_IDX1)]);
    ns.draws = ns_uint[ns_u(NS_U_DRAWS)];
    ns.steps = ns_uint[ns_u(NS_U_STEPS)];
    ns.error = ns_uint[ns_u(NS_U_ERROR)];
    ns.search_evals = ns_uint[ns_u(NS_U_SEARCH_EVALS)];
    ns.search_attempt = ns_uint[ns_u(NS_U_SEARCH_ATTEMPT)];
    ns.search_dir = ns_uint[ns_u(NS_U_SEARCH_DIR)];
}

fn ns_store() {
    ns_vec[ns_s(NS_S_LOGP0)] = ns.logp0;
    ns_vec[ns_s(NS_S_LOGP1)] = ns.logp1;
    ns_vec[ns_s(NS_S_LOGP_PROP)] = ns.logp_prop;
    ns_vec[ns_s(NS_S_H_PROP)] = ns.h_prop;
    ns_vec[ns_s(NS_S_LOGP_SAMP)] = ns.logp_samp;
    ns_vec[ns_s(NS_S_H_SAMP)] = ns.h_samp;
    ns_vec[ns_s(NS_S_H0)] = ns.h0;
    ns_vec[ns_s(NS_S_LSW)] = ns.lsw;
    ns_vec[ns_s(NS_S_LSW_SUB)] = ns.lsw_sub;
    ns_vec[ns_s(NS_S_SUM_METRO)] = ns.sum_metro;
    ns_vec[ns_s(NS_S_SUM_SYM)] = ns.sum_sym;
    ns_vec[ns_s(NS_S_STEP)] = ns.step;
    ns_vec[ns_s(NS_S_EPS)] = ns.eps;
    ns_vec[ns_s(NS_S_DA_MU)] = ns.da_mu;
    ns_vec[ns_s(NS_S_DA_COUNT)] = ns.da_count;
    ns_vec[ns_s(NS_S_DA_SBAR)] = ns.da_sbar;
    ns_vec[ns_s(NS_S_DA_X)] = ns.da_x;
    ns_vec[ns_s(NS_S_DA_XBAR)] = ns.da_xbar;
    ns_uint[ns_u(NS_U_PHASE)] = ns.phase;
    ns_uint[ns_u(NS_U_ITER)] = ns.iter;
    ns_uint[ns_u(NS_U_DEPTH)] = ns.depth;
    ns_uint[ns_u(NS_U_LEAF)] = ns.leaf;
    ns_uint[ns_u(NS_U_END)] = ns.end;
    ns_uint[ns_u(NS_U_NLEAP)] = ns.nleap;
    ns_uint[ns_u(NS_U_DIVERGENT)] = ns.divergent;
    ns_uint[ns_u(NS_U_IDX_PROP)] = bitcast<u32>(ns.idx_prop);
    ns_uint[ns_u(NS_U_IDX_SAMP)] = bitcast<u32>(ns.idx_samp);
    ns_uint[ns_u(NS_U_IDX0)] = bitcast<u32>(ns.idx0);
    ns_uint[ns_u(NS_U_IDX1)] = bitcast<u32>(ns.idx1);
    ns_uint[ns_u(NS_U_DRAWS)] = ns.draws;
    ns_uint[ns_u(NS_U_STEPS)] = ns.steps;
    ns_uint[ns_u(NS_U_ERROR)] = ns.error;
    ns_uint[ns_u(NS_U_SEARCH_EVALS)] = ns.search_evals;
    ns_uint[ns_u(NS_U_SEARCH_ATTEMPT)] = ns.search_attempt;
    ns_uint[ns_u(NS_U_SEARCH_DIR)] = ns.search_dir;
}

// One leapfrog step of signed size `eps` from ns_q, ns_p, ns_g (Stan's `expl_leapfrog`): half
// kick, drift, the model at the new position, half kick. Returns the log density at the new
// position; ns_p and ns_g are those of the same, new, state.
fn ns_leapfrog(eps: T) -> T {
    let half = 0.5 * eps;
    for (var k = 0u; k < NS_LOCAL; k = k + 1u) {
        let j = ns_j(k);
        if (j >= G_DIM) {
            break;
        }
        let p = ns_p[k] + half * ns_g[k];
        ns_p[k] = p;
        ns_q[k] = ns_q[k] + eps * ns_minv(j) * p;
    }
    let logp = g_logp_grad();
    for (var k = 0u; k < NS_LOCAL; k = k + 1u) {
        let j = ns_j(k);
        if (j >= G_DIM) {
            break;
        }
        ns_p[k] = ns_p[k] + half * ns_g[k];
    }
    return logp;
}

// Draws a momentum from N(0, M) into role `p_role` (purpose NS_RNG_MOMENTUM, or a search
// try's), two coordinates per Philox block, and returns its kinetic energy p' M^-1 p / 2.
fn ns_draw_momentum(p_role: u32, purpose: u32) -> T {
    var kinetic: T = 0.0;
    if (G_LANES == 1u) {
        for (var j = 0u; j < G_DIM; j = j + 2u) {
            let pair = rng_normal2(ns_counter(purpose, j / 2u), ns_key());
            let p0 = pair.a / sqrt(ns_minv(j));
            ns_vec[ns_v(p_role, j)] = p0;
            kinetic = kinetic + ns_minv(j) * p0 * p0;
            if (j + 1u < G_DIM) {
                let p1 = pair.b / sqrt(ns_minv(j + 1u));
                ns_vec[ns_v(p_role, j + 1u)] = p1;
                kinetic = kinetic + ns_minv(j + 1u) * p1 * p1;
            }
        }
        return 0.5 * kinetic;
    }
    // Split: each lane draws its coordinates' blocks (a neighbour draws the same block).
    for (var k = 0u; k < NS_LOCAL; k = k + 1u) {
        let j = ns_j(k);
        if (j >= G_DIM) {
            break;
        }
        let pair = rng_normal2(ns_counter(purpose, j / 2u), ns_key());
        var z = pair.a;
        if ((j & 1u) == 1u) {
            z = pair.b;
        }
        let p = z / sqrt(ns_minv(j));
        ns_vec[ns_v(p_role, j)] = p;
        kinetic = kinetic + ns_minv(j) * p * p;
    }
    return 0.5 * g_lane_sum(kinetic);
}
