// interp.wgsl: the model's log density and gradient for kernels whose tape lives in storage,
// run by interpreting the program's table rather than as code generated per instruction.
//
// gpu-actor's wgsl/interp.rs writes the table (one record of IT_RECORD words per instruction,
// a concatenation one per part, in `g_index` from G_CODE_AT; its constants after the model's data in `g_data`) and says what
// each word means. Each instruction does exactly what wgsl/model.rs and wgsl/density.rs
// generate for it with one chain per invocation and a storage tape, which is what sampler's
// eval.rs and dist.rs compute: the same operations on the same values in the same order, so
// the results are the generated code's up to the compiler's rounding choices.
//
// This file is the same for every model, and every loop bound in it is read from the table or
// has `g_zero` added, so no driver can unroll it: a driver compiles a fixed amount of code
// whatever the model's size. Generated straight-line code did not stay bounded (see
// bench/journal.md, 2026-11-28).
//
// Needs from the generated prelude: G_CODE_AT, G_CODE_LEN, G_TAPE_LEN, G_TAPE_BLOCK, g_zero,
// g_chain, g_data, g_index, g_scratch; from the kernel: g_theta, g_set_grad; and the model
// library (math, special.wgsl, density.wgsl). Names start with `it_`.

const IT_RECORD: u32 = 20u;
// Word 0: the instruction's kind (interp.rs's `Op`).
const IT_CONSTRAIN: u32 = 0u;
const IT_MAP: u32 = 1u;
const IT_ZIP: u32 = 2u;
const IT_SUM: u32 = 3u;
const IT_CUMSUM: u32 = 4u;
const IT_DOT: u32 = 5u;
const IT_MATVEC: u32 = 6u;
const IT_GATHER: u32 = 7u;
const IT_DENSITY: u32 = 8u;
const IT_RANDOM_WALK: u32 = 9u;
const IT_FACTOR: u32 = 10u;
const IT_LOG_SUM_EXP: u32 = 11u;
// One part of a concatenation: its operand copied to its run of the written slot.
const IT_COPY: u32 = 12u;
// A constrain's transform (word 1).
const IT_IDENTITY: u32 = 0u;
const IT_LOWER: u32 = 1u;
const IT_UPPER: u32 = 2u;
const IT_INTERVAL: u32 = 3u;
// A density's parts (interp.rs's `Part`).
const IT_PART_ONE: u32 = 1u;
const IT_PART_TWO: u32 = 2u;
const IT_PART_KERNEL: u32 = 3u;
// Where the extras start.
const IT_EXTRA: u32 = 15u;

// The chain's first scratch value: value k at it_base + k * G_TAPE_BLOCK, its adjoint at
// it_base + (k + G_TAPE_LEN) * G_TAPE_BLOCK (wgsl.rs, "Where the tape lives").
var<private> it_base: u32;
// The log density so far.
var<private> it_lp: T;

// An operand: `len` 1 broadcasts; `data` operands carry no adjoint.
struct ItArg {
    off: u32,
    len: u32,
    data: bool,
}

fn it_word(pc: u32, k: u32) -> u32 {
    return g_index[G_CODE_AT + pc * IT_RECORD + k];
}

fn it_arg(pc: u32, k: u32) -> ItArg {
    let data = ((it_word(pc, 4u) >> k) & 1u) != 0u;
    return ItArg(it_word(pc, 5u + 2u * k), it_word(pc, 6u + 2u * k), data);
}

fn it_value(k: u32) -> T {
    return g_scratch[it_base + k * G_TAPE_BLOCK];
}

fn it_adjoint_index(k: u32) -> u32 {
    return it_base + (k + G_TAPE_LEN) * G_TAPE_BLOCK;
}

fn it_adjoint(k: u32) -> T {
    return g_scratch[it_adjoint_index(k)];
}

fn it_add(k: u32, value: T) {
    let at = it_adjoint_index(k);
    g_scratch[at] = g_scratch[at] + value;
}

// Writes a value and clears its adjoint: each slot is written once, before anything adds to
// its adjoint (model.rs's `set`).
fn it_set(k: u32, value: T) {
    g_scratch[it_base + k * G_TAPE_BLOCK] = value;
    g_scratch[it_adjoint_index(k)] = 0.0;
}

// Tape or data position of element i, broadcasting a scalar.
fn it_pos(a: ItArg, i: u32) -> u32 {
    return a.off + select(i, 0u, a.len == 1u);
}

// The value at tape or data position p of a's storage.
fn it_at(a: ItArg, p: u32) -> T {
    var v: T;
    if (a.data) {
        v = g_data[p];
    } else {
        v = it_value(p);
    }
    return v;
}

fn it_read(a: ItArg, i: u32) -> T {
    return it_at(a, it_pos(a, i));
}

// Adds to the adjoint of element i of a parameter operand.
fn it_add_to(a: ItArg, i: u32, value: T) {
    if (!a.data) {
        it_add(it_pos(a, i), value);
    }
}

fn it_map(op: u32, x: T) -> T {
    var r: T;
    if (op == 0u) {
        r = -x;
    } else if (op == 1u) {
        r = sf_exp(x);
    } else if (op == 2u) {
        r = sf_log(x);
    } else if (op == 3u) {
        r = sf_log1p(x);
    } else if (op == 4u) {
        r = sf_expm1(x);
    } else if (op == 5u) {
        r = sf_softplus(x);
    } else if (op == 6u) {
        r = sf_logistic(x);
    } else if (op == 7u) {
        r = sqrt(x);
    } else if (op == 8u) {
        r = abs(x);
    } else if (op == 9u) {
        r = sf_lgamma_real(x);
    } else if (op == 10u) {
        r = sf_log_phi(x);
    } else {
        r = sf_log_step(x);
    }
    return r;
}

// The derivative of map `op` at x, whose result was `out`.
fn it_map_derivative(op: u32, x: T, out: T) -> T {
    var r: T;
    if (op == 0u) {
        r = -1.0;
    } else if (op == 1u) {
        r = out;
    } else if (op == 2u) {
        r = 1.0 / x;
    } else if (op == 3u) {
        r = 1.0 / (1.0 + x);
    } else if (op == 4u) {
        r = out + 1.0;
    } else if (op == 5u) {
        r = sf_logistic(x);
    } else if (op == 6u) {
        r = out * (1.0 - out);
    } else if (op == 7u) {
        r = sf_sqrt_slope(out);
    } else if (op == 8u) {
        r = sf_sign_or_zero(x);
    } else if (op == 9u) {
        r = sf_digamma_real(x);
    } else if (op == 10u) {
        r = sf_log_phi_slope(x, out);
    } else {
        r = 0.0;
    }
    return r;
}

fn it_zip(op: u32, x: T, y: T) -> T {
    var r: T;
    if (op == 0u) {
        r = x + y;
    } else if (op == 1u) {
        r = x - y;
    } else if (op == 2u) {
        r = x * y;
    } else if (op == 3u) {
        r = x / y;
    } else if (op == 4u) {
        r = sf_pow(x, y);
    } else if (op == 5u) {
        // max and min: `y` where strictly larger (smaller), else `x` (sampler's eval.rs).
        r = select(x, y, y > x);
    } else {
        r = select(x, y, y < x);
    }
    return r;
}

// The partial derivatives of zip `op` at (x, y), whose result was `out`.
fn it_zip_derivatives(op: u32, x: T, y: T, out: T) -> vec2<T> {
    var r: vec2<T>;
    if (op == 0u) {
        r = vec2<T>(1.0, 1.0);
    } else if (op == 1u) {
        r = vec2<T>(1.0, -1.0);
    } else if (op == 2u) {
        r = vec2<T>(y, x);
    } else if (op == 3u) {
        r = vec2<T>(1.0 / y, -out / y);
    } else if (op == 4u) {
        r = vec2<T>(y * sf_pow(x, y - 1.0), out * sf_log(x));
    } else if (op == 5u) {
        // The gradient goes to the selected argument, x on a tie.
        r = select(vec2<T>(1.0, 0.0), vec2<T>(0.0, 1.0), y > x);
    } else {
        r = select(vec2<T>(1.0, 0.0), vec2<T>(0.0, 1.0), y < x);
    }
    return r;
}

fn it_term1(term: u32, a: T) -> DTerm1 {
    var r: DTerm1;
    if (term == 0u) {
        r = dt_neg_log_scale(a);
    } else if (term == 1u) {
        r = dt_log_rate(a);
    } else if (term == 2u) {
        r = dt_neg_lgamma(a);
    } else if (term == 3u) {
        r = dt_neg_log_x(a);
    } else if (term == 4u) {
        r = dt_student_t_nu(a);
    } else if (term == 9u) {
        r = dt_chi_square_nu(a);
    } else {
        r = dt_neg_half_x(a);
    }
    return r;
}

fn it_term2(term: u32, a: T, b: T) -> DTerm2 {
    var r: DTerm2;
    if (term == 5u) {
        r = dt_shape_log_rate(a, b);
    } else if (term == 6u) {
        r = dt_beta_norm(a, b);
    } else if (term == 7u) {
        r = dt_uniform_norm(a, b);
    } else if (term == 8u) {
        r = dt_neg_shape_log_scale(a, b);
    } else if (term == 11u) {
        r = dt_neg_binomial_choose(a, b);
    } else {
        r = dt_multiply_log(a, b);
    }
    return r;
}

fn it_kernel(kind: u32, x: T, p0: T, p1: T, p2: T) -> DKern {
    var r: DKern;
    if (kind == 0u) {
        r = dk_normal(x, p0, p1, p2);
    } else if (kind == 1u) {
        r = dk_half_normal(x, p0, p1, p2);
    } else if (kind == 2u) {
        r = dk_exponential(x, p0, p1, p2);
    } else if (kind == 3u) {
        r = dk_student_t(x, p0, p1, p2);
    } else if (kind == 4u) {
        r = dk_cauchy(x, p0, p1, p2);
    } else if (kind == 5u) {
        r = dk_half_cauchy(x, p0, p1, p2);
    } else if (kind == 6u) {
        r = dk_log_normal(x, p0, p1, p2);
    } else if (kind == 7u) {
        r = dk_gamma(x, p0, p1, p2);
    } else if (kind == 8u) {
        r = dk_inverse_gamma(x, p0, p1, p2);
    } else if (kind == 9u) {
        r = dk_beta(x, p0, p1, p2);
    } else if (kind == 10u) {
        r = dk_uniform(x, p0, p1, p2);
    } else if (kind == 11u) {
        r = dk_laplace(x, p0, p1, p2);
    } else if (kind == 12u) {
        r = dk_bernoulli_logit(x, p0, p1, p2);
    } else if (kind == 13u) {
        r = dk_binomial_logit(x, p0, p1, p2);
    } else if (kind == 14u) {
        r = dk_poisson_log(x, p0, p1, p2);
    } else if (kind == 15u) {
        r = dk_logistic(x, p0, p1, p2);
    } else if (kind == 16u) {
        r = dk_weibull(x, p0, p1, p2);
    } else if (kind == 17u) {
        r = dk_chi_square(x, p0, p1, p2);
    } else if (kind == 18u) {
        r = dk_bernoulli(x, p0, p1, p2);
    } else if (kind == 19u) {
        r = dk_binomial(x, p0, p1, p2);
    } else if (kind == 20u) {
        r = dk_poisson(x, p0, p1, p2);
    } else if (kind == 21u) {
        r = dk_neg_binomial_2(x, p0, p1, p2);
    } else {
        r = dk_neg_binomial_2_log(x, p0, p1, p2);
    }
    return r;
}

// A constrain's constants: lower, upper, upper - lower, ln(upper - lower).
fn it_bounds(pc: u32) -> vec4<T> {
    let at = it_word(pc, IT_EXTRA + 2u);
    return vec4<T>(g_data[at], g_data[at + 1u], g_data[at + 2u], g_data[at + 3u]);
}

// Element (r, c) of a product's matrix, as the device holds it (layout.rs).
fn it_matrix(pc: u32, r: u32, c: u32) -> T {
    let offset = it_word(pc, IT_EXTRA);
    let rows = it_word(pc, IT_EXTRA + 1u);
    let cols = it_word(pc, IT_EXTRA + 2u);
    let by_column = it_word(pc, IT_EXTRA + 3u) != 0u;
    return g_data[offset + select(r * cols + c, c * rows + r, by_column)];
}

// The trips a density's part takes: one per element, or one for a part whose operands are
// all broadcast scalars (n times one term); none for no part.
fn it_part_trips(pc: u32, part: u32, n: u32) -> u32 {
    let kind = part & 15u;
    let a = it_arg(pc, (part >> 4u) & 3u);
    let b = it_arg(pc, (part >> 8u) & 3u);
    var trips = n;
    if (kind == 0u) {
        trips = 0u;
    } else if ((kind == IT_PART_ONE && a.len == 1u) || (kind == IT_PART_TWO && a.len == 1u && b.len == 1u)) {
        trips = 1u;
    }
    return trips;
}

// The state of one density part's sum over its elements: the sum of its values, and the
// partial derivatives of broadcast scalars (x, p0, p1, p2), added to their adjoints once. Each
// is a compensated sum (`sf_sum_add` of math_f32.wgsl: the running sum and its error; plain in f64), as in
// generated code, because terms that cancel over many elements lose f32's digits otherwise.
struct ItPart {
    sum: vec2<T>,
    acc_x: vec2<T>,
    acc_0: vec2<T>,
    acc_1: vec2<T>,
    acc_2: vec2<T>,
}

// Element i of a density's `part` (of n elements): adds to the part's state and, at its last
// element (or at once for a part of scalars), to `dens`.
fn it_density_step(pc: u32, kind: u32, part: u32, i: u32, n: u32, state: ptr<function, ItPart>, dens: ptr<function, T>) {
    let part_kind = part & 15u;
    let a = it_arg(pc, (part >> 4u) & 3u);
    let b = it_arg(pc, (part >> 8u) & 3u);
    let term = part >> 12u;
    let count = T(n);
    let last = i + 1u == n;
    if (i == 0u) {
        (*state) = ItPart();
    }
    if (part_kind == IT_PART_ONE) {
        if (a.len == 1u) {
            let r = it_term1(term, it_read(a, 0u));
            it_add(a.off, count * r.d);
            *dens += count * r.value;
        } else {
            let r = it_term1(term, it_read(a, i));
            it_add(it_pos(a, i), r.d);
            (*state).sum = sf_sum_add((*state).sum, r.value);
            if (last) {
                *dens += sf_sum_total((*state).sum);
            }
        }
    } else if (part_kind == IT_PART_TWO) {
        if (a.len == 1u && b.len == 1u) {
            let r = it_term2(term, it_read(a, 0u), it_read(b, 0u));
            it_add_to(a, 0u, count * r.da);
            it_add_to(b, 0u, count * r.db);
            *dens += count * r.value;
        } else {
            let r = it_term2(term, it_read(a, i), it_read(b, i));
            if (a.len == 1u) { (*state).acc_x = sf_sum_add((*state).acc_x, r.da); } else { it_add_to(a, i, r.da); }
            if (b.len == 1u) { (*state).acc_0 = sf_sum_add((*state).acc_0, r.db); } else { it_add_to(b, i, r.db); }
            (*state).sum = sf_sum_add((*state).sum, r.value);
            if (last) {
                if (a.len == 1u) { it_add_to(a, 0u, sf_sum_total((*state).acc_x)); }
                if (b.len == 1u) { it_add_to(b, 0u, sf_sum_total((*state).acc_0)); }
                *dens += sf_sum_total((*state).sum);
            }
        }
    } else {
        // The kernel, over x and the parameters (those the distribution does not read are the
        // constant 0, with no adjoint).
        let x = it_arg(pc, 0u);
        let p0 = it_arg(pc, 1u);
        let p1 = it_arg(pc, 2u);
        let p2 = it_arg(pc, 3u);
        let r = it_kernel(kind, it_read(x, i), it_read(p0, i), it_read(p1, i), it_read(p2, i));
        (*state).sum = sf_sum_add((*state).sum, r.value);
        if (x.len == 1u) { (*state).acc_x = sf_sum_add((*state).acc_x, r.dx); } else { it_add_to(x, i, r.dx); }
        if (p0.len == 1u) { (*state).acc_0 = sf_sum_add((*state).acc_0, r.d0); } else { it_add_to(p0, i, r.d0); }
        if (p1.len == 1u) { (*state).acc_1 = sf_sum_add((*state).acc_1, r.d1); } else { it_add_to(p1, i, r.d1); }
        if (p2.len == 1u) { (*state).acc_2 = sf_sum_add((*state).acc_2, r.d2); } else { it_add_to(p2, i, r.d2); }
        if (last) {
            if (x.len == 1u) { it_add_to(x, 0u, sf_sum_total((*state).acc_x)); }
            if (p0.len == 1u) { it_add_to(p0, 0u, sf_sum_total((*state).acc_0)); }
            if (p1.len == 1u) { it_add_to(p1, 0u, sf_sum_total((*state).acc_1)); }
            if (p2.len == 1u) { it_add_to(p2, 0u, sf_sum_total((*state).acc_2)); }
            *dens += sf_sum_total((*state).sum);
        }
    }
}

// Instruction pc's forward sweep: its values, and the log density and adjoints a density,
// walk or factor adds. Whatever the kind, one loop over its element trips (lavapipe counts
// every loop an invocation passes, taken or not, against one budget: wgsl/cost.rs).
fn it_forward(pc: u32) {
    let op = it_word(pc, 0u);
    let sub = it_word(pc, 1u);
    let dst = it_word(pc, 2u);
    let len = it_word(pc, 3u);
    let a = it_arg(pc, 0u);
    let b = it_arg(pc, 1u);
    let e0 = it_word(pc, IT_EXTRA);
    let e1 = it_word(pc, IT_EXTRA + 1u);
    let e2 = it_word(pc, IT_EXTRA + 2u);
    let e3 = it_word(pc, IT_EXTRA + 3u);
    // Sums: a sum, dot product, running sum, product row or factor; a constrain's
    // log-Jacobian; a density's total; a walk's sum of squared steps.
    var s: T = 0.0;
    var trips = len;
    var bounds = vec4<T>(0.0, 0.0, 0.0, 0.0);
    // A density's parts and their trips.
    var m0 = 0u;
    var m1 = 0u;
    var part_state = ItPart();
    // A walk's scalars (sigma, drift, init_mu, init_sigma), total, sum of steps, previous
    // element and 1 / sigma.
    var walk = vec4<T>(0.0, 0.0, 0.0, 0.0);
    var total: T = 0.0;
    var sum_dz: T = 0.0;
    var prev: T = 0.0;
    var inv_s: T = 0.0;
    var inside = true;
    // A log-sum-exp's maximum, and whether an element is NaN.
    var lse_max: T = -sf_inf();
    var lse_nan = false;
    if (op == IT_CONSTRAIN) {
        trips = e1;
        bounds = it_bounds(pc);
    } else if (op == IT_LOG_SUM_EXP) {
        // The maximum over the elements, then the sum of the shifted exponentials.
        trips = 2u * a.len;
    } else if (op == IT_SUM || op == IT_DOT || op == IT_FACTOR) {
        trips = a.len;
    } else if (op == IT_MATVEC) {
        trips = e1 * e2;
    } else if (op == IT_GATHER) {
        trips = e1;
    } else if (op == IT_DENSITY) {
        m0 = it_part_trips(pc, e1, e0);
        m1 = it_part_trips(pc, e2, e0);
        trips = m0 + m1 + it_part_trips(pc, e3, e0);
    } else if (op == IT_RANDOM_WALK) {
        walk = vec4<T>(it_read(b, 0u), it_read(it_arg(pc, 2u), 0u), it_read(it_arg(pc, 3u), 0u), it_read(it_arg(pc, 4u), 0u));
        let init_sigma = it_arg(pc, 4u);
        // Outside the domain the CPU returns -inf and leaves the adjoints alone.
        inside = (walk.x > 0.0) && (walk.w > 0.0);
        trips = 0u;
        if (!inside) {
            it_lp += -sf_inf();
        } else {
            let s0 = walk.w;
            let z0 = (it_read(a, 0u) - walk.z) / s0;
            total = -0.5 * z0 * z0;
            it_add_to(a, 0u, -z0 / s0);
            it_add_to(it_arg(pc, 3u), 0u, z0 / s0);
            it_add_to(init_sigma, 0u, z0 * z0 / s0);
            if (!init_sigma.data) {
                total = total - sf_log(s0);
                it_add_to(init_sigma, 0u, -1.0 / s0);
            }
            trips = a.len - 1u;
            inv_s = 1.0 / walk.x;
            prev = it_read(a, 0u);
        }
    }
    for (var t = 0u; t < trips; t += 1u) {
        if (op == IT_CONSTRAIN) {
            let u = g_theta(e0 + t);
            var value = u;
            if (sub == IT_LOWER) {
                value = bounds.x + sf_exp(u);
                s += u;
            } else if (sub == IT_UPPER) {
                value = bounds.y - sf_exp(u);
                s += u;
            } else if (sub == IT_INTERVAL) {
                value = bounds.x + bounds.z * sf_logistic(u);
                s += bounds.w - sf_softplus(-u) - sf_softplus(u);
            }
            it_set(dst + t, value);
        } else if (op == IT_MAP) {
            it_set(dst + t, it_map(sub, it_read(a, t)));
        } else if (op == IT_ZIP) {
            it_set(dst + t, it_zip(sub, it_read(a, t), it_read(b, t)));
        } else if (op == IT_SUM) {
            s += it_read(a, t);
        } else if (op == IT_CUMSUM) {
            s += it_read(a, t);
            it_set(dst + t, s);
        } else if (op == IT_DOT) {
            s += it_read(a, t) * it_read(b, t);
        } else if (op == IT_MATVEC) {
            let r = t / e2;
            let c = t - r * e2;
            if (c == 0u) {
                s = 0.0;
            }
            s += it_matrix(pc, r, c) * it_read(a, c);
            if (c + 1u == e2) {
                it_set(dst + r, s);
            }
        } else if (op == IT_GATHER) {
            it_set(dst + t, it_at(a, a.off + g_index[e0 + t]));
        } else if (op == IT_DENSITY) {
            var part = e1;
            var i = t;
            if (t >= m0 + m1) {
                part = e3;
                i = t - m0 - m1;
            } else if (t >= m0) {
                part = e2;
                i = t - m0;
            }
            it_density_step(pc, sub, part, i, e0, &part_state, &s);
        } else if (op == IT_RANDOM_WALK) {
            let cur = it_read(a, t + 1u);
            let z = (cur - prev - walk.y) * inv_s;
            s += z * z;
            sum_dz += z;
            let g = z * inv_s;
            it_add_to(a, t + 1u, -g);
            it_add_to(a, t, g);
            prev = cur;
        } else if (op == IT_FACTOR) {
            s += it_read(a, t);
            it_add_to(a, t, 1.0);
        } else if (op == IT_COPY) {
            it_set(dst + t, it_read(a, t));
        } else if (op == IT_LOG_SUM_EXP) {
            if (t < a.len) {
                let v = it_read(a, t);
                if (v != v) {
                    lse_nan = true;
                }
                if (v > lse_max) {
                    lse_max = v;
                }
            } else if (abs(lse_max) < sf_inf()) {
                s += sf_exp(it_read(a, t - a.len) - lse_max);
            }
        }
    }
    if (op == IT_CONSTRAIN) {
        if (sub != IT_IDENTITY) {
            it_lp += s;
        }
    } else if (op == IT_SUM || op == IT_DOT) {
        it_set(dst, s);
    } else if (op == IT_DENSITY) {
        // A density whose parts were all dropped adds nothing (not even 0).
        if (e1 != 0u) {
            it_lp += s;
        }
    } else if (op == IT_RANDOM_WALK) {
        if (inside) {
            let sigma = b;
            let steps = T(a.len - 1u);
            total = total - 0.5 * s;
            it_add_to(it_arg(pc, 2u), 0u, sum_dz * inv_s);
            it_add_to(sigma, 0u, s * inv_s);
            if (!sigma.data) {
                total = total - steps * sf_log(walk.x);
                it_add_to(sigma, 0u, -steps * inv_s);
            }
            it_lp += total;
        }
    } else if (op == IT_FACTOR) {
        it_lp += s;
    } else if (op == IT_LOG_SUM_EXP) {
        // As sampler's eval.rs: NaN for a NaN element, the maximum when it is infinite.
        var r = lse_max;
        if (lse_nan) {
            r = sf_nan();
        } else if (abs(lse_max) < sf_inf()) {
            r = lse_max + sf_log(s);
        }
        it_set(dst, r);
    }
}

// Instruction pc's backward sweep: the adjoints of its operands from its slot's (nothing for
// densities, walks and factors, whose partial derivatives the forward sweep added). One loop,
// as in the forward sweep.
fn it_backward(pc: u32) {
    let op = it_word(pc, 0u);
    let sub = it_word(pc, 1u);
    let dst = it_word(pc, 2u);
    let len = it_word(pc, 3u);
    let a = it_arg(pc, 0u);
    let b = it_arg(pc, 1u);
    let e0 = it_word(pc, IT_EXTRA);
    let e1 = it_word(pc, IT_EXTRA + 1u);
    let e2 = it_word(pc, IT_EXTRA + 2u);
    var trips = 0u;
    var bounds = vec4<T>(0.0, 0.0, 0.0, 0.0);
    // Broadcast scalars' adjoints are summed first, then added once.
    // Compensated, as the densities' sums.
    var acc_a: vec2<T>;
    var acc_b: vec2<T>;
    // The slot's adjoint (sum, dot), a running sum (cumsum) or a column's sum (matvec).
    var g: T = 0.0;
    // A dot product's trips over a, before those over b.
    var trips_a = 0u;
    if (op == IT_CONSTRAIN) {
        trips = e1;
        bounds = it_bounds(pc);
    } else if (op == IT_MAP || op == IT_CUMSUM) {
        trips = select(len, 0u, a.data);
    } else if (op == IT_ZIP) {
        trips = select(len, 0u, a.data && b.data);
    } else if (op == IT_SUM) {
        trips = select(a.len, 0u, a.data);
        g = it_adjoint(dst);
    } else if (op == IT_DOT) {
        trips_a = select(a.len, 0u, a.data);
        trips = trips_a + select(b.len, 0u, b.data);
        g = it_adjoint(dst);
    } else if (op == IT_MATVEC) {
        trips = select(e1 * e2, 0u, a.data);
    } else if (op == IT_GATHER) {
        trips = select(e1, 0u, a.data);
    } else if (op == IT_COPY) {
        trips = select(len, 0u, a.data);
    } else if (op == IT_LOG_SUM_EXP) {
        // The CPU skips a zero adjoint and a non-finite result.
        g = it_adjoint(dst);
        let r = it_value(dst);
        if (!a.data && g != 0.0 && abs(r) < sf_inf()) {
            trips = a.len;
        }
    }
    for (var t = 0u; t < trips; t += 1u) {
        if (op == IT_CONSTRAIN) {
            let adj = it_adjoint(dst + t);
            let x = it_value(dst + t);
            var grad = adj;
            if (sub == IT_LOWER) {
                grad = 1.0 + adj * (x - bounds.x);
            } else if (sub == IT_UPPER) {
                grad = 1.0 - adj * (bounds.y - x);
            } else if (sub == IT_INTERVAL) {
                let u = g_theta(e0 + t);
                let w = (x - bounds.x) / bounds.z;
                grad = (1.0 - 2.0 * sf_logistic(u)) + adj * bounds.z * w * (1.0 - w);
            }
            g_set_grad(e0 + t, grad);
        } else if (op == IT_MAP) {
            // The CPU skips elements whose adjoint is 0 (so that 0 * inf stays 0).
            let ga = it_adjoint(dst + t);
            if (ga != 0.0) {
                let x = it_read(a, t);
                let out = it_value(dst + t);
                it_add(it_pos(a, t), ga * it_map_derivative(sub, x, out));
            }
        } else if (op == IT_ZIP) {
            let gz = it_adjoint(dst + t);
            let d = it_zip_derivatives(sub, it_read(a, t), it_read(b, t), it_value(dst + t));
            if (a.len == 1u) { acc_a = sf_sum_add(acc_a, gz * d.x); } else { it_add_to(a, t, gz * d.x); }
            if (b.len == 1u) { acc_b = sf_sum_add(acc_b, gz * d.y); } else { it_add_to(b, t, gz * d.y); }
        } else if (op == IT_SUM) {
            it_add(it_pos(a, t), g);
        } else if (op == IT_CUMSUM) {
            let j = len - 1u - t;
            g += it_adjoint(dst + j);
            it_add(it_pos(a, j), g);
        } else if (op == IT_DOT) {
            if (t < trips_a) {
                it_add(it_pos(a, t), g * it_read(b, t));
            } else {
                let i = t - trips_a;
                it_add(it_pos(b, i), g * it_read(a, i));
            }
        } else if (op == IT_MATVEC) {
            // Column by column, so that each adjoint of v is written once.
            let c = t / e1;
            let r = t - c * e1;
            if (r == 0u) {
                g = 0.0;
            }
            g += it_adjoint(dst + r) * it_matrix(pc, r, c);
            if (r + 1u == e1) {
                it_add(it_pos(a, c), g);
            }
        } else if (op == IT_GATHER) {
            it_add(a.off + g_index[e0 + t], it_adjoint(dst + t));
        } else if (op == IT_COPY) {
            it_add(it_pos(a, t), it_adjoint(dst + t));
        } else if (op == IT_LOG_SUM_EXP) {
            it_add(it_pos(a, t), g * sf_exp(it_read(a, t) - it_value(dst)));
        }
    }
    if (op == IT_ZIP && trips > 0u) {
        if (a.len == 1u) { it_add_to(a, 0u, sf_sum_total(acc_a)); }
        if (b.len == 1u) { it_add_to(b, 0u, sf_sum_total(acc_b)); }
    }
}

// g_logp_grad for a storage tape: the forward sweep over every instruction, then the backward
// sweep in reverse.
fn it_logp_grad() -> T {
    it_base = (g_chain / G_TAPE_BLOCK) * (2u * G_TAPE_LEN * G_TAPE_BLOCK) + g_chain % G_TAPE_BLOCK;
    it_lp = 0.0;
    let n = G_CODE_LEN + g_zero;
    for (var pc = 0u; pc < n; pc += 1u) {
        it_forward(pc);
    }
    for (var k = 0u; k < n; k += 1u) {
        it_backward(n - 1u - k);
    }
    return it_lp;
}
