//! A Rust API that reads like the model it builds, producing the same IR as the JSON files.
//!
//! ```
//! use sampler::{Constraint, Dist, ModelBuilder};
//!
//! let mut m = ModelBuilder::new("eight_schools_noncentered");
//! let y = m.data_vector("y", vec![28., 8., -3., 7., -1., 1., 18., 12.]);
//! let sigma = m.data_vector("sigma", vec![15., 10., 16., 11., 9., 11., 10., 18.]);
//! let mu = m.param("mu");
//! let tau = m.param_constrained("tau", Constraint::Positive);
//! let z = m.vector_param("z", 8);
//! let theta = m.transformed("theta", &mu + &tau * &z);
//! m.sample(&mu, Dist::normal(0.0, 5.0));
//! m.sample(&tau, Dist::half_normal(5.0));
//! m.sample(&z, Dist::normal(0.0, 1.0));
//! m.sample(&y, Dist::normal(&theta, &sigma));
//! let model = m.build();
//! assert_eq!(model.parameters.len(), 3);
//! ```

use std::ops::{Add, Div, Mul, Neg, Sub};

use crate::ir::{
    BinaryOp, Constraint, DataValue, Dist, Expr, IR_VERSION, Model, Parameter, Statement,
    Transformed, UnaryOp,
};

/// Builds a [`Model`] step by step. Every declaring method returns the expression that refers
/// to the new name.
#[derive(Clone, Debug)]
pub struct ModelBuilder {
    model: Model,
}

impl ModelBuilder {
    /// An empty model.
    pub fn new(name: impl Into<String>) -> ModelBuilder {
        ModelBuilder {
            model: Model {
                ir_version: IR_VERSION,
                name: name.into(),
                data: Default::default(),
                parameters: Vec::new(),
                transformed: Vec::new(),
                model: Vec::new(),
            },
        }
    }

    fn data(&mut self, name: &str, value: DataValue) -> Expr {
        self.model.data.insert(name.to_owned(), value);
        Expr::Ref(name.to_owned())
    }

    /// A real scalar data item.
    pub fn data_real(&mut self, name: &str, value: f64) -> Expr {
        self.data(name, DataValue::Real(value))
    }

    /// An integer scalar data item.
    pub fn data_int(&mut self, name: &str, value: i64) -> Expr {
        self.data(name, DataValue::Int(value))
    }

    /// A real vector data item.
    pub fn data_vector(&mut self, name: &str, values: Vec<f64>) -> Expr {
        self.data(name, DataValue::Vector(values))
    }

    /// An integer vector data item (counts, outcomes, 0-based group indices).
    pub fn data_int_vector(&mut self, name: &str, values: Vec<i64>) -> Expr {
        self.data(name, DataValue::IntVector(values))
    }

    /// A real matrix data item, as rows.
    pub fn data_matrix(&mut self, name: &str, rows: Vec<Vec<f64>>) -> Expr {
        self.data(name, DataValue::Matrix(rows))
    }

    /// A parameter of any size and constraint.
    pub fn param_with(&mut self, name: &str, size: Option<usize>, constraint: Constraint) -> Expr {
        self.model.parameters.push(Parameter {
            name: name.to_owned(),
            size,
            constraint,
            ..Parameter::default()
        });
        Expr::Ref(name.to_owned())
    }

    /// An unconstrained scalar parameter.
    pub fn param(&mut self, name: &str) -> Expr {
        self.param_with(name, None, Constraint::Real)
    }

    /// A constrained scalar parameter.
    pub fn param_constrained(&mut self, name: &str, constraint: Constraint) -> Expr {
        self.param_with(name, None, constraint)
    }

    /// An unconstrained vector parameter.
    pub fn vector_param(&mut self, name: &str, size: usize) -> Expr {
        self.param_with(name, Some(size), Constraint::Real)
    }

    /// A parameter declared in full (bounds, affine transform, dims): see [`Parameter`].
    pub fn param_decl(&mut self, parameter: Parameter) -> Expr {
        let name = parameter.name.clone();
        self.model.parameters.push(parameter);
        Expr::Ref(name)
    }

    /// A scalar parameter with expression bounds (data and earlier parameters); either may be
    /// absent.
    pub fn param_bounded(
        &mut self,
        name: &str,
        size: Option<usize>,
        lower: Option<Expr>,
        upper: Option<Expr>,
    ) -> Expr {
        self.param_decl(Parameter {
            name: name.to_owned(),
            size,
            lower,
            upper,
            ..Parameter::default()
        })
    }

    /// A named deterministic quantity with a shape for its output names (`dims`).
    pub fn transformed_with_dims(&mut self, name: &str, value: Expr, dims: Vec<usize>) -> Expr {
        self.model.transformed.push(Transformed {
            name: name.to_owned(),
            value,
            dims,
            hidden: false,
        });
        Expr::Ref(name.to_owned())
    }

    /// A named deterministic quantity, reported with every draw.
    pub fn transformed(&mut self, name: &str, value: Expr) -> Expr {
        self.model.transformed.push(Transformed {
            name: name.to_owned(),
            value,
            dims: Vec::new(),
            hidden: false,
        });
        Expr::Ref(name.to_owned())
    }

    /// `value ~ dist`.
    pub fn sample(&mut self, value: impl Into<Expr>, dist: Dist) -> &mut ModelBuilder {
        self.model.model.push(Statement::Sample {
            value: value.into(),
            dist,
        });
        self
    }

    /// `target += sum(value)`.
    pub fn factor(&mut self, value: impl Into<Expr>) -> &mut ModelBuilder {
        self.model.model.push(Statement::Factor {
            value: value.into(),
        });
        self
    }

    /// The finished model (not yet validated: see [`crate::CheckedModel::new`]).
    pub fn build(self) -> Model {
        self.model
    }
}

impl From<f64> for Expr {
    fn from(value: f64) -> Expr {
        Expr::Const(value)
    }
}

impl From<&Expr> for Expr {
    fn from(value: &Expr) -> Expr {
        value.clone()
    }
}

impl From<&str> for Expr {
    /// A reference by name.
    fn from(name: &str) -> Expr {
        Expr::Ref(name.to_owned())
    }
}

impl Expr {
    fn unary(self, op: UnaryOp) -> Expr {
        Expr::Unary(op, Box::new(self))
    }

    fn binary(self, op: BinaryOp, rhs: impl Into<Expr>) -> Expr {
        Expr::Binary(op, Box::new(self), Box::new(rhs.into()))
    }

    /// `exp(self)`.
    pub fn exp(&self) -> Expr {
        self.clone().unary(UnaryOp::Exp)
    }

    /// `log(self)`.
    pub fn ln(&self) -> Expr {
        self.clone().unary(UnaryOp::Log)
    }

    /// `log(1 + self)`.
    pub fn ln_1p(&self) -> Expr {
        self.clone().unary(UnaryOp::Log1p)
    }

    /// `exp(self) - 1`.
    pub fn exp_m1(&self) -> Expr {
        self.clone().unary(UnaryOp::Expm1)
    }

    /// `log(1 + exp(self))`.
    pub fn softplus(&self) -> Expr {
        self.clone().unary(UnaryOp::Softplus)
    }

    /// `1 / (1 + exp(-self))`.
    pub fn logistic(&self) -> Expr {
        self.clone().unary(UnaryOp::Logistic)
    }

    /// `sqrt(self)`.
    pub fn sqrt(&self) -> Expr {
        self.clone().unary(UnaryOp::Sqrt)
    }

    /// `|self|`.
    pub fn abs(&self) -> Expr {
        self.clone().unary(UnaryOp::Abs)
    }

    /// The sum of the elements.
    pub fn sum(&self) -> Expr {
        self.clone().unary(UnaryOp::Sum)
    }

    /// The running sum.
    pub fn cumsum(&self) -> Expr {
        self.clone().unary(UnaryOp::Cumsum)
    }

    /// `self ^ exponent`, elementwise.
    pub fn pow(&self, exponent: impl Into<Expr>) -> Expr {
        self.clone().binary(BinaryOp::Pow, exponent)
    }

    /// The inner product with another vector.
    pub fn dot(&self, other: impl Into<Expr>) -> Expr {
        self.clone().binary(BinaryOp::Dot, other)
    }

    /// `self[index[i]]` for each `i` (0-based integer data).
    pub fn gather(&self, index: impl Into<Expr>) -> Expr {
        self.clone().binary(BinaryOp::Gather, index)
    }

    /// The data matrix `self` times the vector `v`.
    pub fn matvec(&self, v: impl Into<Expr>) -> Expr {
        self.clone().binary(BinaryOp::Matvec, v)
    }

    /// `ln |Gamma(self)|`, elementwise.
    pub fn lgamma(&self) -> Expr {
        self.clone().unary(UnaryOp::Lgamma)
    }

    /// `log(Phi(self))`, elementwise: the log of the standard normal CDF.
    pub fn log_phi(&self) -> Expr {
        self.clone().unary(UnaryOp::LogPhi)
    }

    /// `0` where `self >= 0`, `-inf` where `self < 0`, elementwise.
    pub fn log_step(&self) -> Expr {
        self.clone().unary(UnaryOp::LogStep)
    }

    /// `log(sum(exp(self)))`: a scalar.
    pub fn log_sum_exp(&self) -> Expr {
        self.clone().unary(UnaryOp::LogSumExp)
    }

    /// `max(self, other)`, elementwise.
    pub fn max(&self, other: impl Into<Expr>) -> Expr {
        self.clone().binary(BinaryOp::Max, other)
    }

    /// `min(self, other)`, elementwise.
    pub fn min(&self, other: impl Into<Expr>) -> Expr {
        self.clone().binary(BinaryOp::Min, other)
    }

    /// Element `k` (0-based) of the vector `self`.
    pub fn elem(&self, k: u32) -> Expr {
        Expr::Elem(Box::new(self.clone()), k)
    }

    /// `self[start..start + len]`.
    pub fn slice(&self, start: u32, len: u32) -> Expr {
        Expr::Slice(Box::new(self.clone()), start, len)
    }

    /// The parts (scalars and vectors) joined into one vector.
    pub fn concat(parts: impl IntoIterator<Item = Expr>) -> Expr {
        Expr::Concat(parts.into_iter().collect())
    }
}

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $op:expr) => {
        impl<R: Into<Expr>> $trait<R> for Expr {
            type Output = Expr;
            fn $method(self, rhs: R) -> Expr {
                self.binary($op, rhs)
            }
        }
        impl<R: Into<Expr>> $trait<R> for &Expr {
            type Output = Expr;
            fn $method(self, rhs: R) -> Expr {
                self.clone().binary($op, rhs)
            }
        }
        impl $trait<Expr> for f64 {
            type Output = Expr;
            fn $method(self, rhs: Expr) -> Expr {
                Expr::Const(self).binary($op, rhs)
            }
        }
        impl $trait<&Expr> for f64 {
            type Output = Expr;
            fn $method(self, rhs: &Expr) -> Expr {
                Expr::Const(self).binary($op, rhs)
            }
        }
    };
}

binary_operator!(Add, add, BinaryOp::Add);
binary_operator!(Sub, sub, BinaryOp::Sub);
binary_operator!(Mul, mul, BinaryOp::Mul);
binary_operator!(Div, div, BinaryOp::Div);

impl Neg for Expr {
    type Output = Expr;
    fn neg(self) -> Expr {
        self.unary(UnaryOp::Neg)
    }
}

impl Neg for &Expr {
    type Output = Expr;
    fn neg(self) -> Expr {
        self.clone().unary(UnaryOp::Neg)
    }
}

fn e(value: impl Into<Expr>) -> Expr {
    value.into()
}

impl Dist {
    /// Normal(mu, sigma).
    pub fn normal(mu: impl Into<Expr>, sigma: impl Into<Expr>) -> Dist {
        Dist::Normal {
            mu: e(mu),
            sigma: e(sigma),
        }
    }

    /// HalfNormal(sigma).
    pub fn half_normal(sigma: impl Into<Expr>) -> Dist {
        Dist::HalfNormal { sigma: e(sigma) }
    }

    /// Exponential(rate).
    pub fn exponential(rate: impl Into<Expr>) -> Dist {
        Dist::Exponential { rate: e(rate) }
    }

    /// StudentT(nu, mu, sigma).
    pub fn student_t(nu: impl Into<Expr>, mu: impl Into<Expr>, sigma: impl Into<Expr>) -> Dist {
        Dist::StudentT {
            nu: e(nu),
            mu: e(mu),
            sigma: e(sigma),
        }
    }

    /// Cauchy(mu, sigma).
    pub fn cauchy(mu: impl Into<Expr>, sigma: impl Into<Expr>) -> Dist {
        Dist::Cauchy {
            mu: e(mu),
            sigma: e(sigma),
        }
    }

    /// HalfCauchy(sigma).
    pub fn half_cauchy(sigma: impl Into<Expr>) -> Dist {
        Dist::HalfCauchy { sigma: e(sigma) }
    }

    /// LogNormal(mu, sigma).
    pub fn log_normal(mu: impl Into<Expr>, sigma: impl Into<Expr>) -> Dist {
        Dist::LogNormal {
            mu: e(mu),
            sigma: e(sigma),
        }
    }

    /// Gamma(shape, rate).
    pub fn gamma(shape: impl Into<Expr>, rate: impl Into<Expr>) -> Dist {
        Dist::Gamma {
            shape: e(shape),
            rate: e(rate),
        }
    }

    /// InverseGamma(shape, scale).
    pub fn inverse_gamma(shape: impl Into<Expr>, scale: impl Into<Expr>) -> Dist {
        Dist::InverseGamma {
            shape: e(shape),
            scale: e(scale),
        }
    }

    /// Beta(alpha, beta).
    pub fn beta(alpha: impl Into<Expr>, beta: impl Into<Expr>) -> Dist {
        Dist::Beta {
            alpha: e(alpha),
            beta: e(beta),
        }
    }

    /// Uniform(lower, upper).
    pub fn uniform(lower: impl Into<Expr>, upper: impl Into<Expr>) -> Dist {
        Dist::Uniform {
            lower: e(lower),
            upper: e(upper),
        }
    }

    /// Laplace(mu, scale).
    pub fn laplace(mu: impl Into<Expr>, scale: impl Into<Expr>) -> Dist {
        Dist::Laplace {
            mu: e(mu),
            scale: e(scale),
        }
    }

    /// Bernoulli(logistic(logit)).
    pub fn bernoulli_logit(logit: impl Into<Expr>) -> Dist {
        Dist::BernoulliLogit { logit: e(logit) }
    }

    /// Binomial(trials, logistic(logit)).
    pub fn binomial_logit(trials: impl Into<Expr>, logit: impl Into<Expr>) -> Dist {
        Dist::BinomialLogit {
            trials: e(trials),
            logit: e(logit),
        }
    }

    /// Poisson(exp(log_rate)).
    pub fn poisson_log(log_rate: impl Into<Expr>) -> Dist {
        Dist::PoissonLog {
            log_rate: e(log_rate),
        }
    }

    /// Logistic(mu, sigma).
    pub fn logistic(mu: impl Into<Expr>, sigma: impl Into<Expr>) -> Dist {
        Dist::Logistic {
            mu: e(mu),
            sigma: e(sigma),
        }
    }

    /// Weibull(alpha, sigma): shape `alpha`, scale `sigma`.
    pub fn weibull(alpha: impl Into<Expr>, sigma: impl Into<Expr>) -> Dist {
        Dist::Weibull {
            alpha: e(alpha),
            sigma: e(sigma),
        }
    }

    /// Chi-square(nu).
    pub fn chi_square(nu: impl Into<Expr>) -> Dist {
        Dist::ChiSquare { nu: e(nu) }
    }

    /// Bernoulli(p).
    pub fn bernoulli(p: impl Into<Expr>) -> Dist {
        Dist::Bernoulli { p: e(p) }
    }

    /// Binomial(trials, p).
    pub fn binomial(trials: impl Into<Expr>, p: impl Into<Expr>) -> Dist {
        Dist::Binomial {
            trials: e(trials),
            p: e(p),
        }
    }

    /// Poisson(rate).
    pub fn poisson(rate: impl Into<Expr>) -> Dist {
        Dist::Poisson { rate: e(rate) }
    }

    /// Stan's neg_binomial_2(mu, phi).
    pub fn neg_binomial_2(mu: impl Into<Expr>, phi: impl Into<Expr>) -> Dist {
        Dist::NegBinomial2 {
            mu: e(mu),
            phi: e(phi),
        }
    }

    /// Stan's neg_binomial_2_log(eta, phi).
    pub fn neg_binomial_2_log(eta: impl Into<Expr>, phi: impl Into<Expr>) -> Dist {
        Dist::NegBinomial2Log {
            eta: e(eta),
            phi: e(phi),
        }
    }

    /// A Gaussian random walk starting at 0 with steps of scale `sigma`.
    pub fn gaussian_random_walk(sigma: impl Into<Expr>) -> Dist {
        Dist::GaussianRandomWalk {
            sigma: e(sigma),
            drift: None,
            init_mu: None,
            init_sigma: None,
        }
    }
}
