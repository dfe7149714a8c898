// nuts.wgsl: whole NUTS transitions, one state machine per chain (entry point `nuts_main`).
//
// Each invocation runs one chain. Its loop body is one leapfrog step plus the bookkeeping of
// the leaf it made; a chain that finishes a transition starts the next one in the same loop,
// so a warp's lanes stay busy on their own trajectories (Dance, Glaser, Orbanz & Adams 2025,
// "Efficiently vectorized MCMC on modern accelerators": no barrier per transition). A dispatch
// ends for a chain at `iter_end`, after `capacity` draws, or after `step_budget` steps, in the
// middle of a transition if need be: the state is in storage (nuts_state.wgsl).
//
// The transition is Stan's (`base_nuts.hpp`; Hoffman & Gelman 2014, Betancourt 2017), built
// iteratively as NumPyro (Phan, Pradhan & Jankowiak 2019) and TFP (Lao et al. 2020) build it,
// with O(max_depth * d) memory:
// * doublings in a random direction; a subtree of depth k is 2^k leaves built one leapfrog at
//   a time from the trajectory's end;
// * the multinomial proposal of a subtree is drawn progressively, one leaf at a time: leaf i
//   replaces the proposal with probability w_i / (w_1 + ... + w_i), which selects leaf i with
//   probability w_i / W_subtree, the distribution of Stan's uniform merges of sub-subtrees;
// * at the top level, Stan's biased progressive sampling: the subtree's proposal replaces the
//   sample with probability min(1, W_subtree / W_old);
// * the generalised U-turn criterion (p_sharp . rho > 0 at both ends) on every subtree that
//   Stan's recursion merges, evaluated when its last leaf is built, with Stan's two extra
//   checks across the halves of each merge. Leaf n of a subtree (0-based) ends the merges of
//   halves of size 2^j for j < trailing_ones(n); the first leaf of each pending left half, the
//   momentum sum before it and the momentum of its last leaf are checkpointed in slot
//   popcount(first leaf), which is never overwritten while the half is pending. So every
//   check Stan makes is made, in Stan's order, on the same vectors: the leapfrog count, tree
//   depth and divergence of a transition are Stan's for the same direction choices;
// * a leaf diverges when H - H0 > max_energy_error (H non-finite counts as +inf); a divergent
//   leaf or a U-turn inside a subtree discards the subtree; accept_stat is the mean of
//   min(1, exp(H0 - H)) over every leaf built.

// Starts a transition from the current point: a fresh momentum, both ends at the point.
fn ns_start_transition() {
    let kinetic = ns_draw_momentum(NS_V_P0, NS_RNG_MOMENTUM);
    for (var k = 0u; k < NS_LOCAL; k = k + 1u) {
        let j = ns_j(k);
        if (j >= G_DIM) {
            break;
        }
        let q = ns_vec[ns_v(NS_V_QSAMP, j)];
        let g = ns_vec[ns_v(NS_V_GSAMP, j)];
        let p = ns_vec[ns_v(NS_V_P0, j)];
        ns_vec[ns_v(NS_V_Q0, j)] = q;
        ns_vec[ns_v(NS_V_G0, j)] = g;
        ns_vec[ns_v(NS_V_Q1, j)] = q;
        ns_vec[ns_v(NS_V_P1, j)] = p;
        ns_vec[ns_v(NS_V_G1, j)] = g;
        ns_vec[ns_v(NS_V_RHO_OLD, j)] = p;
        ns_vec[ns_v(NS_V_J0, j)] = p;
        ns_vec[ns_v(NS_V_J1, j)] = p;
    }
    ns.h0 = ns_energy(ns.logp_samp, kinetic);
    ns.h_samp = ns.h0;
    ns.logp0 = ns.logp_samp;
    ns.logp1 = ns.logp_samp;
    ns.idx0 = 0;
    ns.idx1 = 0;
    ns.idx_samp = 0;
    // log(exp(H0 - H0)): the initial point's weight.
    ns.lsw = 0.0;
    ns.depth = 0u;
    ns.nleap = 0u;
    ns.divergent = 0u;
    ns.sum_metro = 0.0;
    ns.sum_sym = 0.0;
    let jitter = ns_const(NS_C_JITTER);
    ns.eps = ns.step;
    if (jitter > 0.0) {
        let u = rng_uniform(ns_counter(NS_RNG_JITTER, 0u), ns_key());
        ns.eps = ns.step * (1.0 + jitter * (2.0 * u - 1.0));
    }
    ns.phase = NS_PHASE_SUBTREE;
}

// Starts a subtree of 2^depth leaves in a random direction (Stan: forward if u > 0.5).
fn ns_start_subtree() {
    let u = rng_uniform(ns_counter(NS_RNG_DIRECTION, ns.depth), ns_key());
    ns.end = select(1u, 0u, u > 0.5);
    // Stan's junction momentum on the growing side: the old trajectory's end there
    // (base_nuts.hpp: `p_bck_fwd = p_fwd_fwd` before a forward subtree).
    // The end it grows from goes to private memory until the subtree is done.
    ns_load_end(ns.end);
    let near_role = NS_V_J0 + ns.end;
    for (var k = 0u; k < NS_LOCAL; k = k + 1u) {
        let j = ns_j(k);
        if (j >= G_DIM) {
            break;
        }
        ns_rho[k] = 0.0;
        ns_vec[ns_v(near_role, j)] = ns_p[k];
    }
    ns.lsw_sub = sf_neg_inf();
    ns.leaf = 0u;
    ns.phase = NS_PHASE_LEAF;
}

// Stan's merge checks when leaf `n` ends a subtree made of two halves of 2^j leaves each
// (the new leaf's momentum is in ns_p): the whole subtree, and for j >= 1 the first
// half plus the first leaf of the second, and the last leaf of the first half plus the second.
// For j = 0 the extra checks are the whole check again. True when the trajectory may go on.
// The merged subtree becomes a pending left half in slot_a; with `record_end` (the last merge
// of the leaf), the leaf's momentum becomes that half's last-leaf checkpoint, once the old one
// has been read.
fn ns_merge_persists(n: u32, j: u32, record_end: bool) -> bool {
    let a = n + 1u - (2u << j);
    let slot_a = countOneBits(a);
    let slot_m = slot_a + 1u;
    let extra = j > 0u;
    var start_full: T = 0.0;
    var end_full: T = 0.0;
    var start_left: T = 0.0;
    var end_left: T = 0.0;
    var start_right: T = 0.0;
    var end_right: T = 0.0;
    for (var k = 0u; k < NS_LOCAL; k = k + 1u) {
        let i = ns_j(k);
        if (i >= G_DIM) {
            break;
        }
        let minv = ns_minv(i);
        let p_a = ns_ckpt[ns_k(slot_a, NS_K_P_START, i)];
        let rsum_a = ns_ckpt[ns_k(slot_a, NS_K_RSUM, i)];
        let p_n = ns_p[k];
        let rho = ns_rho[k];
        let rho_full = rho - rsum_a;
        start_full = start_full + minv * p_a * rho_full;
        end_full = end_full + minv * p_n * rho_full;
        if (!extra && record_end) {
            ns_ckpt[ns_k(slot_a, NS_K_P_END, i)] = p_n;
        }
        if (extra) {
            let p_m = ns_ckpt[ns_k(slot_m, NS_K_P_START, i)];
            let rsum_m = ns_ckpt[ns_k(slot_m, NS_K_RSUM, i)];
            let p_a_end = ns_ckpt[ns_k(slot_a, NS_K_P_END, i)];
            if (record_end) {
                ns_ckpt[ns_k(slot_a, NS_K_P_END, i)] = p_n;
            }
            // The first half (rsum_m - rsum_a) and the first leaf of the second.
            let rho_left = rsum_m - rsum_a + p_m;
            start_left = start_left + minv * p_a * rho_left;
            end_left = end_left + minv * p_m * rho_left;
            // The last leaf of the first half and the second half (rho - rsum_m).
            let rho_right = rho - rsum_m + p_a_end;
            start_right = start_right + minv * p_a_end * rho_right;
            end_right = end_right + minv * p_n * rho_right;
        }
    }
    start_full = g_lane_sum(start_full);
    end_full = g_lane_sum(end_full);
    if (extra) {
        start_left = g_lane_sum(start_left);
        end_left = g_lane_sum(end_left);
        start_right = g_lane_sum(start_right);
        end_right = g_lane_sum(end_right);
    }
    var persist = start_full > 0.0 && end_full > 0.0;
    if (extra) {
        persist = persist && start_left > 0.0 && end_left > 0.0;
        persist = persist && start_right > 0.0 && end_right > 0.0;
    }
    return persist;
}

// Ends the transition: writes the draw and its statistics to the next output slot, adapts the
// step size, and moves to the next iteration.
fn ns_finish() {
    let n_leap = T(max(ns.nleap, 1u));
    let accept = ns.sum_metro / n_leap;
    let accept_sym = ns.sum_sym / n_leap;
    let slot = ns.draws;
    let width = G_DIM * (1u + ns_params.with_grad);
    for (var k = 0u; k < NS_LOCAL; k = k + 1u) {
        let j = ns_j(k);
        if (j >= G_DIM) {
            break;
        }
        ns_out[ns_out_at(slot, width, j)] = ns_vec[ns_v(NS_V_QSAMP, j)];
        if (ns_params.with_grad == 1u) {
            ns_out[ns_out_at(slot, width, G_DIM + j)] = ns_vec[ns_v(NS_V_GSAMP, j)];
        }
    }
    let stats = ns_params.capacity * width * ns_n;
    ns_out[stats + ns_out_stat_at(slot, NS_O_LP)] = ns.logp_samp;
    ns_out[stats + ns_out_stat_at(slot, NS_O_ACCEPT)] = accept;
    ns_out[stats + ns_out_stat_at(slot, NS_O_ACCEPT_SYM)] = accept_sym;
    ns_out[stats + ns_out_stat_at(slot, NS_O_STEP)] = ns.eps;
    ns_out[stats + ns_out_stat_at(slot, NS_O_ENERGY)] = ns.h_samp;
    let ints = NS_U_COUNT * ns_n;
    ns_uint[ints + (slot * NS_OU_COUNT + NS_OU_DEPTH) * ns_n + g_chain] = ns.depth;
    ns_uint[ints + (slot * NS_OU_COUNT + NS_OU_NLEAP) * ns_n + g_chain] = ns.nleap;
    ns_uint[ints + (slot * NS_OU_COUNT + NS_OU_DIVERGENT) * ns_n + g_chain] = ns.divergent;
    ns_uint[ints + (slot * NS_OU_COUNT + NS_OU_INDEX) * ns_n + g_chain] = bitcast<u32>(ns.idx_samp);

    if ((ns_params.flags & NS_FLAG_ADAPT) != 0u) {
        var stat = accept;
        if (ns.iter >= ns_params.late_from_iter) {
            stat = accept_sym;
        }
        ns_dual_average(stat);
        if (ns.iter == ns_params.da_final_iter) {
            ns.step = sf_exp(ns.da_xbar);
        }
    }
    ns.draws = ns.draws + 1u;
    ns.iter = ns.iter + 1u;
    ns.phase = NS_PHASE_START;
}

// One dual-averaging update (Hoffman & Gelman 2014, Algorithm 6; Stan's
// `stepsize_adaptation.hpp`; sampler's `DualAverage::update`), capped at the maximum log step
// (nutpie's pi; +inf for Stan).
fn ns_dual_average(accept_stat: T) {
    var stat = accept_stat;
    if (!(stat == stat)) {
        stat = 0.0;
    }
    stat = min(stat, 1.0);
    ns.da_count = ns.da_count + 1.0;
    let eta = 1.0 / (ns.da_count + ns_const(NS_C_DA_T0));
    ns.da_sbar = (1.0 - eta) * ns.da_sbar + eta * (ns_const(NS_C_DA_TARGET) - stat);
    ns.da_x = min(
        ns.da_mu - ns.da_sbar * sqrt(ns.da_count) / ns_const(NS_C_DA_GAMMA),
        ns_const(NS_C_DA_MAX_LOG_STEP),
    );
    let x_eta = sf_exp(-ns_const(NS_C_DA_KAPPA) * sf_log(ns.da_count));
    ns.da_xbar = (1.0 - x_eta) * ns.da_xbar + x_eta * ns.da_x;
    ns.step = sf_exp(ns.da_x);
}

// A subtree is complete and valid: Stan's top-level merge (biased progressive sampling) and
// the U-turn checks across the old trajectory and the new subtree.
fn ns_top_merge() {
    ns.depth = ns.depth + 1u;
    var take = ns.lsw_sub > ns.lsw;
    if (!take) {
        let u = rng_uniform(ns_counter(NS_RNG_TOP, ns.depth), ns_key());
        take = u < sf_exp(ns.lsw_sub - ns.lsw);
    }
    if (take) {
        for (var k = 0u; k < NS_LOCAL; k = k + 1u) {
            let j = ns_j(k);
            if (j >= G_DIM) {
                break;
            }
            ns_vec[ns_v(NS_V_QSAMP, j)] = ns_vec[ns_v(NS_V_QPROP, j)];
            ns_vec[ns_v(NS_V_GSAMP, j)] = ns_vec[ns_v(NS_V_GPROP, j)];
        }
        ns.logp_samp = ns.logp_prop;
        ns.h_samp = ns.h_prop;
        ns.idx_samp = ns.idx_prop;
    }
    ns.lsw = ns_log_sum_exp(ns.lsw, ns.lsw_sub);

    // far: the old trajectory's other end; last/first: the subtree's last and first leaves;
    // near: the old trajectory's end on the growing side (saved by ns_start_subtree). Stan's
    // three checks, direction-free: the whole trajectory, the old part plus the first new
    // leaf, and the new part plus `near`.
    let far_role = NS_V_P0 + 3u * (1u - ns.end);
    let near_role = NS_V_J0 + ns.end;
    var far_all: T = 0.0;
    var last_all: T = 0.0;
    var far_old: T = 0.0;
    var first_old: T = 0.0;
    var near_new: T = 0.0;
    var last_new: T = 0.0;
    for (var k = 0u; k < NS_LOCAL; k = k + 1u) {
        let j = ns_j(k);
        if (j >= G_DIM) {
            break;
        }
        let minv = ns_minv(j);
        let far = ns_vec[ns_v(far_role, j)];
        let last = ns_p[k];
        let first = ns_ckpt[ns_k(0u, NS_K_P_START, j)];
        let near = ns_vec[ns_v(near_role, j)];
        let rho_old = ns_vec[ns_v(NS_V_RHO_OLD, j)];
        let rho_new = ns_rho[k];
        let rho_all = rho_old + rho_new;
        far_all = far_all + minv * far * rho_all;
        last_all = last_all + minv * last * rho_all;
        let rho_old_first = rho_old + first;
        far_old = far_old + minv * far * rho_old_first;
        first_old = first_old + minv * first * rho_old_first;
        let rho_near_new = rho_new + near;
        near_new = near_new + minv * near * rho_near_new;
        last_new = last_new + minv * last * rho_near_new;
        ns_vec[ns_v(NS_V_RHO_OLD, j)] = rho_all;
    }
    far_all = g_lane_sum(far_all);
    last_all = g_lane_sum(last_all);
    far_old = g_lane_sum(far_old);
    first_old = g_lane_sum(first_old);
    near_new = g_lane_sum(near_new);
    last_new = g_lane_sum(last_new);
    let persist = far_all > 0.0 && last_all > 0.0 && far_old > 0.0 && first_old > 0.0
        && near_new > 0.0 && last_new > 0.0;
    if (!persist || ns.depth >= ns_params.max_depth) {
        ns_finish();
    } else {
        ns.phase = NS_PHASE_SUBTREE;
    }
}

// One leapfrog step at the subtree's growing end and everything the new leaf decides.
fn ns_leaf() {
    let end = ns.end;
    var eps = ns.eps;
    if (end == 1u) {
        eps = -eps;
    }
    let logp = ns_leapfrog(eps);
    let n = ns.leaf;
    let even = (n & 1u) == 0u;
    // An even leaf starts a pending left half (of one leaf, and of 2^k leaves for each of its
    // trailing zeros) in slot popcount(n); it is also that one-leaf half's last leaf. An odd
    // leaf's merges free the slot where its own half's last leaf goes (ns_merge_persists).
    let slot_start = countOneBits(n);
    var kinetic: T = 0.0;
    for (var k = 0u; k < NS_LOCAL; k = k + 1u) {
        let j = ns_j(k);
        if (j >= G_DIM) {
            break;
        }
        let p = ns_p[k];
        kinetic = kinetic + ns_minv(j) * p * p;
        let rho_before = ns_rho[k];
        ns_rho[k] = rho_before + p;
        if (even) {
            ns_ckpt[ns_k(slot_start, NS_K_P_START, j)] = p;
            ns_ckpt[ns_k(slot_start, NS_K_RSUM, j)] = rho_before;
            ns_ckpt[ns_k(slot_start, NS_K_P_END, j)] = p;
        }
    }
    kinetic = g_lane_sum(kinetic);
    var index: i32;
    if (end == 0u) {
        ns.logp0 = logp;
        ns.idx0 = ns.idx0 + 1;
        index = ns.idx0;
    } else {
        ns.logp1 = logp;
        ns.idx1 = ns.idx1 - 1;
        index = ns.idx1;
    }
    ns.nleap = ns.nleap + 1u;
    ns.steps = ns.steps + 1u;

    let h = ns_energy(logp, 0.5 * kinetic);
    let delta = ns.h0 - h;
    ns.lsw_sub = ns_log_sum_exp(ns.lsw_sub, delta);
    if (delta > 0.0) {
        ns.sum_metro = ns.sum_metro + 1.0;
    } else {
        ns.sum_metro = ns.sum_metro + sf_exp(delta);
    }
    if (h - ns.h0 > ns_const(NS_C_MAX_ENERGY_ERROR)) {
        ns.divergent = 1u;
        ns_finish();
        return;
    }
    ns.sum_sym = ns.sum_sym + 2.0 / (1.0 + sf_exp(abs(delta)));

    // Progressive multinomial sampling within the subtree.
    let u = rng_uniform(ns_counter(NS_RNG_LEAF, ns.nleap), ns_key());
    if (u < sf_exp(delta - ns.lsw_sub)) {
        for (var k = 0u; k < NS_LOCAL; k = k + 1u) {
            let j = ns_j(k);
            if (j >= G_DIM) {
                break;
            }
            ns_vec[ns_v(NS_V_QPROP, j)] = ns_q[k];
            ns_vec[ns_v(NS_V_GPROP, j)] = ns_g[k];
        }
        ns.logp_prop = logp;
        ns.h_prop = h;
        ns.idx_prop = index;
    }

    // The merges this leaf completes, smallest first: any U-turn discards the subtree.
    let merges = countTrailingZeros(n + 1u);
    for (var j = 0u; j < merges; j = j + 1u) {
        if (!ns_merge_persists(n, j, j + 1u == merges)) {
            ns_finish();
            return;
        }
    }
    ns.leaf = n + 1u;
    if (ns.leaf == (1u << ns.depth)) {
        // The subtree is done: its end goes back to storage for the subtrees to come.
        ns_store_end(end);
        ns_top_merge();
    }
}

@compute @workgroup_size(G_WORKGROUP_SIZE)
fn nuts_main(
    @builtin(workgroup_id) workgroup: vec3<u32>,
    @builtin(num_workgroups) n_workgroups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    // First, while every invocation is here: it may copy the model's data into workgroup
    // memory and wait at a barrier (wgsl.rs, "Model data").
    g_stage_data(local);
    // One chain per invocation, or per G_LANES invocations (wgsl.rs, "Lanes").
    let chain = g_chain_of((workgroup.y * n_workgroups.x + workgroup.x) * G_WORKGROUP_SIZE + local);
    if (chain >= ns_params.n_chains) {
        return;
    }
    g_chain = chain;
    ns_n = ns_params.n_chains;
    ns_load();
    ns.draws = 0u;
    ns.steps = 0u;
    if (ns.phase == NS_PHASE_LEAF) {
        // A subtree the last dispatch left half grown.
        ns_load_end(ns.end);
        for (var k = 0u; k < NS_LOCAL; k = k + 1u) {
            let j = ns_j(k);
            if (j >= G_DIM) {
                break;
            }
            ns_rho[k] = ns_vec[ns_v(NS_V_RHO_NEW, j)];
        }
    }
    loop {
        if (ns.phase == NS_PHASE_START) {
            if (ns.iter >= ns_params.iter_end || ns.draws >= ns_params.capacity) {
                break;
            }
            ns_start_transition();
        }
        if (ns.phase == NS_PHASE_SUBTREE) {
            ns_start_subtree();
        }
        if (ns_params.step_budget > 0u && ns.steps >= ns_params.step_budget) {
            break;
        }
        ns_leaf();
    }
    if (ns.phase == NS_PHASE_LEAF) {
        ns_store_end(ns.end);
        for (var k = 0u; k < NS_LOCAL; k = k + 1u) {
            let j = ns_j(k);
            if (j >= G_DIM) {
                break;
            }
            ns_vec[ns_v(NS_V_RHO_NEW, j)] = ns_rho[k];
        }
    }
    ns_store();
}
