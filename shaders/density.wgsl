// density.wgsl: the per-element parts of the densities, mirroring sampler's dist.rs.
//
// dist.rs splits `sum_i log p(x_i | params_i)` into terms that depend on one or two
// parameters (`term1`, `term2`: computed once and multiplied by n when their operands are
// scalars) and a per-element `kernel`. Which terms run, how operands broadcast and where the
// partial derivatives go is decided by the code generator (gpu-actor's wgsl/density.rs); the
// formulas live here. Terms whose operands do not depend on parameters are dropped by the
// generator exactly as dist.rs drops them, so the GPU log density has the same constant.
//
// Every kernel takes (x, p0, p1, p2); parameters a distribution does not have are passed as 0
// and their derivatives are ignored.

// A one-parameter term: value and derivative.
struct DTerm1 {
    value: T,
    d: T,
}

// A two-parameter term: value and the derivatives in each parameter.
struct DTerm2 {
    value: T,
    da: T,
    db: T,
}

// A kernel's value and its derivatives in x and in each parameter.
struct DKern {
    value: T,
    dx: T,
    d0: T,
    d1: T,
    d2: T,
}

fn dt_outside1() -> DTerm1 {
    return DTerm1(sf_neg_inf(), 0.0);
}

fn dt_outside2() -> DTerm2 {
    return DTerm2(sf_neg_inf(), 0.0, 0.0);
}

fn dk_outside() -> DKern {
    return DKern(sf_neg_inf(), 0.0, 0.0, 0.0, 0.0);
}

// -ln s for a positive scale.
fn dt_neg_log_scale(s: T) -> DTerm1 {
    if (s > 0.0) {
        return DTerm1(-sf_log(s), -1.0 / s);
    }
    return dt_outside1();
}

// ln r for a positive rate.
fn dt_log_rate(r: T) -> DTerm1 {
    if (r > 0.0) {
        return DTerm1(sf_log(r), 1.0 / r);
    }
    return dt_outside1();
}

// -ln Γ(a) for a positive shape.
fn dt_neg_lgamma(a: T) -> DTerm1 {
    if (a > 0.0) {
        return DTerm1(-sf_lgamma(a), -sf_digamma(a));
    }
    return dt_outside1();
}

// -ln x for the log-normal's value.
fn dt_neg_log_x(x: T) -> DTerm1 {
    if (x > 0.0) {
        return DTerm1(-sf_log(x), -1.0 / x);
    }
    return dt_outside1();
}

// The Student-t normaliser's nu part: ln Γ((nu + 1) / 2) - ln Γ(nu / 2) - ln(nu) / 2.
fn dt_student_t_nu(nu: T) -> DTerm1 {
    if (nu > 0.0) {
        let value = sf_lgamma(0.5 * (nu + 1.0)) - sf_lgamma(0.5 * nu) - 0.5 * sf_log(nu);
        let deriv = 0.5 * sf_digamma(0.5 * (nu + 1.0)) - 0.5 * sf_digamma(0.5 * nu) - 0.5 / nu;
        return DTerm1(value, deriv);
    }
    return dt_outside1();
}

// a ln b for a shape a and a positive rate or scale b.
fn dt_shape_log_rate(a: T, b: T) -> DTerm2 {
    if (b > 0.0) {
        let log_b = sf_log(b);
        return DTerm2(a * log_b, log_b, a / b);
    }
    return dt_outside2();
}

// The beta normaliser ln Γ(a + b) - ln Γ(a) - ln Γ(b).
fn dt_beta_norm(a: T, b: T) -> DTerm2 {
    if (a > 0.0 && b > 0.0) {
        let dab = sf_digamma(a + b);
        return DTerm2(sf_lgamma(a + b) - sf_lgamma(a) - sf_lgamma(b), dab - sf_digamma(a), dab - sf_digamma(b));
    }
    return dt_outside2();
}

// The uniform normaliser -ln(upper - lower).
fn dt_uniform_norm(lower: T, upper: T) -> DTerm2 {
    let width = upper - lower;
    if (width > 0.0) {
        return DTerm2(-sf_log(width), 1.0 / width, -1.0 / width);
    }
    return dt_outside2();
}

// -a ln b for a shape a and a positive scale b (the Weibull's -alpha ln sigma).
fn dt_neg_shape_log_scale(a: T, b: T) -> DTerm2 {
    if (b > 0.0) {
        let log_b = sf_log(b);
        return DTerm2(-a * log_b, -log_b, -a / b);
    }
    return dt_outside2();
}

const DT_LN_2: T = 0.69314718055994530942;

// The chi-square's normaliser -nu ln(2) / 2 - ln Γ(nu / 2).
fn dt_chi_square_nu(nu: T) -> DTerm1 {
    if (nu > 0.0) {
        let half = 0.5 * nu;
        return DTerm1(-half * DT_LN_2 - sf_lgamma(half), -0.5 * DT_LN_2 - 0.5 * sf_digamma(half));
    }
    return dt_outside1();
}

// -x / 2, the chi-square's term in its value alone.
fn dt_neg_half_x(x: T) -> DTerm1 {
    return DTerm1(-0.5 * x, -0.5);
}

// The negative binomial's ln C(y + phi - 1, y) for a count y (no derivative) and phi > 0.
fn dt_neg_binomial_choose(y: T, phi: T) -> DTerm2 {
    if (phi > 0.0) {
        return DTerm2(sf_lgamma(y + phi) - sf_lgamma(y + 1.0) - sf_lgamma(phi), 0.0, sf_digamma(y + phi) - sf_digamma(phi));
    }
    return dt_outside2();
}

// Stan's multiply_log(y, mu) = y ln mu for a count y (no derivative; 0 for y = 0), mu > 0.
fn dt_multiply_log(y: T, mu: T) -> DTerm2 {
    if (!(mu > 0.0)) {
        return dt_outside2();
    }
    if (y == 0.0) {
        return DTerm2(0.0, 0.0, 0.0);
    }
    return DTerm2(y * sf_log(mu), 0.0, y / mu);
}

fn dk_normal(x: T, mu: T, sigma: T, unused: T) -> DKern {
    let z = (x - mu) / sigma;
    let dz = z / sigma;
    return DKern(-0.5 * z * z, -dz, dz, z * dz, 0.0);
}

fn dk_half_normal(x: T, sigma: T, unused1: T, unused2: T) -> DKern {
    if (x < 0.0) {
        return dk_outside();
    }
    let z = x / sigma;
    let dz = z / sigma;
    return DKern(-0.5 * z * z, -dz, z * dz, 0.0, 0.0);
}

fn dk_exponential(x: T, rate: T, unused1: T, unused2: T) -> DKern {
    if (x < 0.0) {
        return dk_outside();
    }
    return DKern(-rate * x, -rate, -x, 0.0, 0.0);
}

fn dk_student_t(x: T, nu: T, mu: T, sigma: T) -> DKern {
    let r = (x - mu) / sigma;
    let r2 = r * r;
    let q = r2 / nu;
    let log1p_q = sf_log1p(q);
    let value = -0.5 * (nu + 1.0) * log1p_q;
    let d_r = -(nu + 1.0) * r / (nu + r2);
    let dx = d_r / sigma;
    let d_sigma = (nu + 1.0) * r2 / (sigma * (nu + r2));
    let d_nu = -0.5 * log1p_q + 0.5 * (nu + 1.0) * r2 / (nu * (nu + r2));
    return DKern(value, dx, d_nu, -dx, d_sigma);
}

fn dk_cauchy(x: T, mu: T, sigma: T, unused: T) -> DKern {
    let r = (x - mu) / sigma;
    let r2 = r * r;
    let dx = -2.0 * r / (sigma * (1.0 + r2));
    return DKern(-sf_log1p(r2), dx, -dx, 2.0 * r2 / (sigma * (1.0 + r2)), 0.0);
}

fn dk_half_cauchy(x: T, sigma: T, unused1: T, unused2: T) -> DKern {
    if (x < 0.0) {
        return dk_outside();
    }
    let r = x / sigma;
    let r2 = r * r;
    return DKern(-sf_log1p(r2), -2.0 * r / (sigma * (1.0 + r2)), 2.0 * r2 / (sigma * (1.0 + r2)), 0.0, 0.0);
}

fn dk_log_normal(x: T, mu: T, sigma: T, unused: T) -> DKern {
    if (x <= 0.0) {
        return dk_outside();
    }
    let z = (sf_log(x) - mu) / sigma;
    let dz = z / sigma;
    return DKern(-0.5 * z * z, -dz / x, dz, z * dz, 0.0);
}

fn dk_gamma(x: T, shape: T, rate: T, unused: T) -> DKern {
    if (x <= 0.0) {
        return dk_outside();
    }
    let log_x = sf_log(x);
    return DKern((shape - 1.0) * log_x - rate * x, (shape - 1.0) / x - rate, log_x, -x, 0.0);
}

fn dk_inverse_gamma(x: T, shape: T, scale: T, unused: T) -> DKern {
    if (x <= 0.0) {
        return dk_outside();
    }
    let log_x = sf_log(x);
    let inv_x = 1.0 / x;
    return DKern(
        -(shape + 1.0) * log_x - scale * inv_x,
        -(shape + 1.0) * inv_x + scale * inv_x * inv_x,
        -log_x,
        -inv_x,
        0.0,
    );
}

fn dk_beta(x: T, a: T, b: T, unused: T) -> DKern {
    if (x <= 0.0 || x >= 1.0) {
        return dk_outside();
    }
    let log_x = sf_log(x);
    let log_1mx = sf_log1p(-x);
    return DKern((a - 1.0) * log_x + (b - 1.0) * log_1mx, (a - 1.0) / x - (b - 1.0) / (1.0 - x), log_x, log_1mx, 0.0);
}

fn dk_uniform(x: T, lower: T, upper: T, unused: T) -> DKern {
    if (x < lower || x > upper) {
        return dk_outside();
    }
    return DKern(0.0, 0.0, 0.0, 0.0, 0.0);
}

fn dk_laplace(x: T, mu: T, scale: T, unused: T) -> DKern {
    let diff = x - mu;
    var sign: T = 0.0;
    if (diff > 0.0) {
        sign = 1.0;
    } else if (diff < 0.0) {
        sign = -1.0;
    }
    return DKern(-abs(diff) / scale, -sign / scale, sign / scale, abs(diff) / (scale * scale), 0.0);
}

// y ln σ(η) + (1 - y) ln(1 - σ(η)) = y η - softplus(η).
fn dk_bernoulli_logit(y: T, eta: T, unused1: T, unused2: T) -> DKern {
    let sl = sf_softplus_and_logistic(eta);
    return DKern(y * eta - sl.softplus, 0.0, y - sl.logistic, 0.0, 0.0);
}

fn dk_binomial_logit(y: T, trials: T, eta: T, unused: T) -> DKern {
    let sl = sf_softplus_and_logistic(eta);
    return DKern(y * eta - trials * sl.softplus, 0.0, 0.0, y - trials * sl.logistic, 0.0);
}

fn dk_poisson_log(y: T, eta: T, unused1: T, unused2: T) -> DKern {
    let rate = sf_exp(eta);
    return DKern(y * eta - rate, 0.0, y - rate, 0.0, 0.0);
}

// -z - 2 ln(1 + exp(-z)) for z = (x - mu) / sigma; its derivative in z is 1 - 2 logistic(z).
fn dk_logistic(x: T, mu: T, sigma: T, unused: T) -> DKern {
    let z = (x - mu) / sigma;
    let sl = sf_softplus_and_logistic(-z);
    let q = 2.0 * sl.logistic - 1.0;
    return DKern(-z - 2.0 * sl.softplus, q / sigma, -q / sigma, -q * z / sigma, 0.0);
}

// (alpha - 1) ln x - (x / sigma)^alpha.
fn dk_weibull(x: T, alpha: T, sigma: T, unused: T) -> DKern {
    if (x < 0.0 || sigma <= 0.0) {
        return dk_outside();
    }
    let log_x = sf_log(x);
    let log_ratio = log_x - sf_log(sigma);
    let w = sf_exp(alpha * log_ratio);
    return DKern((alpha - 1.0) * log_x - w, ((alpha - 1.0) - alpha * w) / x, log_x - w * log_ratio, alpha * w / sigma, 0.0);
}

// (nu / 2 - 1) ln x.
fn dk_chi_square(x: T, nu: T, unused1: T, unused2: T) -> DKern {
    if (x < 0.0) {
        return dk_outside();
    }
    let log_x = sf_log(x);
    let c = 0.5 * nu - 1.0;
    return DKern(c * log_x, c / x, 0.5 * log_x, 0.0, 0.0);
}

// y ln p + (1 - y) ln(1 - p).
fn dk_bernoulli(y: T, p: T, unused1: T, unused2: T) -> DKern {
    if (!(p >= 0.0 && p <= 1.0)) {
        return dk_outside();
    }
    if (y == 1.0) {
        if (p > 0.0) {
            return DKern(sf_log(p), 0.0, 1.0 / p, 0.0, 0.0);
        }
        return dk_outside();
    }
    if (p < 1.0) {
        return DKern(sf_log1p(-p), 0.0, -1.0 / (1.0 - p), 0.0, 0.0);
    }
    return dk_outside();
}

// y ln p + (trials - y) ln(1 - p), a term of zero count left out.
fn dk_binomial(y: T, trials: T, p: T, unused: T) -> DKern {
    if (!(p >= 0.0 && p <= 1.0)) {
        return dk_outside();
    }
    var value: T = 0.0;
    var d: T = 0.0;
    if (y > 0.0) {
        if (p <= 0.0) {
            return dk_outside();
        }
        value += y * sf_log(p);
        d += y / p;
    }
    let failures = trials - y;
    if (failures > 0.0) {
        if (p >= 1.0) {
            return dk_outside();
        }
        value += failures * sf_log1p(-p);
        d -= failures / (1.0 - p);
    }
    return DKern(value, 0.0, 0.0, d, 0.0);
}

// y ln rate - rate.
fn dk_poisson(y: T, rate: T, unused1: T, unused2: T) -> DKern {
    if (!(rate >= 0.0) || rate == sf_inf()) {
        return dk_outside();
    }
    if (y == 0.0) {
        return DKern(-rate, 0.0, -1.0, 0.0, 0.0);
    }
    if (rate == 0.0) {
        return dk_outside();
    }
    return DKern(y * sf_log(rate) - rate, 0.0, y / rate - 1.0, 0.0, 0.0);
}

// -phi ln(1 + mu / phi) - y ln(mu + phi).
fn dk_neg_binomial_2(y: T, mu: T, phi: T, unused: T) -> DKern {
    if (!(mu > 0.0 && phi > 0.0)) {
        return dk_outside();
    }
    let s = mu + phi;
    let log1p_ratio = sf_log1p(mu / phi);
    return DKern(-phi * log1p_ratio - y * sf_log(s), 0.0, -(phi + y) / s, -log1p_ratio + (mu - y) / s, 0.0);
}

// y eta - (phi + y) ln(1 + exp(eta - ln phi)) - y ln phi.
fn dk_neg_binomial_2_log(y: T, eta: T, phi: T, unused: T) -> DKern {
    if (!(phi > 0.0)) {
        return dk_outside();
    }
    let log_phi = sf_log(phi);
    let sl = sf_softplus_and_logistic(eta - log_phi);
    return DKern(
        y * eta - (phi + y) * sl.softplus - y * log_phi,
        0.0,
        y - (phi + y) * sl.logistic,
        -sl.softplus + ((phi + y) * sl.logistic - y) / phi,
        0.0,
    );
}
