// nuts_search.wgsl: the step-size searches of warmup (entry point `nuts_search_main`), one
// chain per invocation, from the chain's current point, between transitions.
//
// * Stan's `init_stepsize` (search_kind 0): from the chain's step size, one leapfrog step
//   with a fresh momentum per try; double or halve until the energy change crosses log 0.8.
//   Then dual averaging restarts with mu = log(10 eps) (or, with NS_FLAG_SEARCH_MU at the start
//   of warmup, Stan's mu = log(10 * the user's initial step size)).
// * nutpie's (search_kind 1): from 0.1, one momentum for every try; double or halve until
//   min(1, exp(-dH)) crosses the target; at most 100 tries; a non-finite or divergent try gives
//   0.1. Then a fresh dual average at the step found.
// On a device that caps loop iterations (wgsl/cost.rs) the host gives each dispatch a budget
// of tries; a search that runs out goes on in the next dispatch, with the same result.
// Both mirror sampler's adapt.rs; each try's momentum is Philox's (chain, iteration,
// NS_RNG_SEARCH + 256 * try, block), so a search draws nothing a transition draws.

// One leapfrog step of size `eps` from the current point with momentum `p_role` (in the
// private end, ns_q, ns_p, ns_g); returns H(start) - H(end).
fn ns_search_try(eps: T, p_role: u32) -> T {
    var kinetic0: T = 0.0;
    for (var k = 0u; k < NS_LOCAL; k = k + 1u) {
        let j = ns_j(k);
        if (j >= G_DIM) {
            break;
        }
        let p = ns_vec[ns_v(p_role, j)];
        ns_q[k] = ns_vec[ns_v(NS_V_QSAMP, j)];
        ns_g[k] = ns_vec[ns_v(NS_V_GSAMP, j)];
        ns_p[k] = p;
        kinetic0 = kinetic0 + ns_minv(j) * p * p;
    }
    let h0 = ns_energy(ns.logp_samp, 0.5 * g_lane_sum(kinetic0));
    let logp = ns_leapfrog(eps);
    var kinetic: T = 0.0;
    for (var k = 0u; k < NS_LOCAL; k = k + 1u) {
        let j = ns_j(k);
        if (j >= G_DIM) {
            break;
        }
        kinetic = kinetic + ns_minv(j) * ns_p[k] * ns_p[k];
    }
    ns.search_evals = ns.search_evals + 1u;
    return h0 - ns_energy(logp, 0.5 * g_lane_sum(kinetic));
}

fn ns_search_purpose(attempt: u32) -> u32 {
    return NS_RNG_SEARCH + 256u * attempt;
}

// Whether this dispatch may make another try (NsParams.search_budget); a search that may not
// stops with its state in `ns` (ns.search_attempt, ns.search_dir, the step reached in
// ns.step) and the next dispatch goes on from there: the tries, their momenta and the result
// are the same whatever the budget.
fn ns_search_may_try(tries: u32) -> bool {
    return ns_params.search_budget == 0u || tries < ns_params.search_budget;
}

// Ends a search: nothing is under way any more.
fn ns_search_done(eps: T) -> T {
    ns.search_attempt = 0u;
    ns.search_dir = 0u;
    return eps;
}

// Both searches, one try per trip of one loop: the kernel calls the model at one place only
// (a compiler inlines the model wherever it is called, and the searches had four such places,
// each a copy of the whole model to compile). Returns the step size reached; sets ns.error on
// failure, and leaves ns.search_dir non-zero when the budget ran out first.
//
// * Stan's (search_kind 0): the first try (attempt 0) sets the direction, then attempts 1 to
//   2000, each with a fresh momentum, double or halve until the energy change crosses ln 0.8;
//   an invalid step size is returned as it is.
// * nutpie's (search_kind 1): from 0.1, with one momentum, the first try sets the direction,
//   then up to 100 more; a non-finite or divergent try, or no crossing, gives 0.1.
fn ns_search() -> T {
    let stan = ns_params.search_kind == 0u;
    // ln 0.8, hard-coded in Stan's init_stepsize whatever the target.
    let log_target: T = -0.2231435513142097;
    let initial: T = 0.1;
    let target_accept = ns_const(NS_C_DA_TARGET);
    let max_energy_error = ns_const(NS_C_MAX_ENERGY_ERROR);
    var eps = ns.step;
    var tries = 0u;
    // Whether the next try is a search's first, which sets its direction.
    var first = ns.search_dir == 0u;
    if (first) {
        if (stan && (eps == 0.0 || eps > 1e7 || !(eps == eps))) {
            return ns_search_done(eps);
        }
        if (!stan) {
            eps = initial;
        }
    }
    var attempt = ns.search_attempt;
    // Stan's attempts 1 to 2000 after the first try, nutpie's 100 after its first.
    let end = select(100u, 2001u, stan);
    for (var trip = 0u; trip <= 2001u; trip = trip + 1u) {
        if (!first) {
            if (attempt >= end) {
                return ns_search_done(select(initial, eps, stan));
            }
            if (!ns_search_may_try(tries)) {
                ns.search_attempt = attempt;
                return eps;
            }
        }
        tries = tries + 1u;
        if (stan || first) {
            _ = ns_draw_momentum(NS_V_P1, ns_search_purpose(select(attempt, 0u, first)));
        }
        let delta = ns_search_try(eps, NS_V_P1);
        if (stan) {
            if (first) {
                ns.search_dir = select(2u, 1u, delta > log_target);
                attempt = 1u;
                first = false;
                continue;
            }
            let forward = ns.search_dir == 1u;
            if ((forward && !(delta > log_target)) || (!forward && !(delta < log_target))) {
                return ns_search_done(eps);
            }
            if (forward) {
                eps = 2.0 * eps;
            } else {
                eps = 0.5 * eps;
            }
            if (eps > 1e7) {
                ns.error = NS_ERROR_STEP_TOO_LARGE;
                return ns_search_done(eps);
            }
            if (eps == 0.0) {
                ns.error = NS_ERROR_STEP_ZERO;
                return ns_search_done(eps);
            }
        } else {
            // min(1, exp(dH)), or -1 when the try is non-finite or divergent.
            var stat: T = -1.0;
            if (ns_is_finite(delta) && !(-delta > max_energy_error)) {
                stat = sf_exp(min(delta, 0.0));
            }
            if (stat < 0.0) {
                return ns_search_done(initial);
            }
            if (first) {
                ns.search_dir = select(2u, 1u, stat > target_accept);
                attempt = 0u;
                first = false;
                continue;
            }
            let forward = ns.search_dir == 1u;
            var done = false;
            if (forward) {
                done = stat <= target_accept || eps > 1e5;
            } else {
                done = stat >= target_accept || eps < 1e-10;
            }
            if (done) {
                return ns_search_done(eps);
            }
            if (forward) {
                eps = 2.0 * eps;
            } else {
                eps = 0.5 * eps;
            }
        }
        attempt = attempt + 1u;
    }
    return ns_search_done(select(initial, eps, stan));
}

@compute @workgroup_size(G_WORKGROUP_SIZE)
fn nuts_search_main(
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
    if ((ns_params.flags & NS_FLAG_SEARCH_CONTINUE) != 0u && ns.search_dir == 0u) {
        return;
    }
    ns.error = 0u;
    let eps = ns_search();
    ns.step = eps;
    if (ns.search_dir != 0u) {
        ns_store();
        return;
    }
    ns.da_mu = sf_log(10.0 * eps);
    if (ns_params.search_kind == 0u) {
        if ((ns_params.flags & NS_FLAG_SEARCH_MU) != 0u) {
            // Start of warmup: a fresh dual average, with Stan's mu from the user's step size.
            ns.da_x = sf_log(eps);
            ns.da_xbar = ns.da_x;
            ns.da_mu = ns_const(NS_C_SEARCH_MU);
        } else {
            // Stan's restart: forget the history, keep x.
            ns.da_xbar = 0.0;
        }
    } else {
        ns.da_x = sf_log(eps);
        ns.da_xbar = ns.da_x;
    }
    ns.da_count = 0.0;
    ns.da_sbar = 0.0;
    ns_store();
}
