//! The Stan abstract syntax tree: a program of seven optional blocks; every node has a span.

use std::fmt;

/// Byte offsets `start..end` into the source text.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

impl fmt::Debug for Span {
    // Short, so that a tree's `{:#?}` stays readable (and tests can strip `@a..b`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{}..{}", self.start, self.end)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// A whole program. Blocks are optional and come in this order in the source.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Program {
    pub functions: Option<FunctionsBlock>,
    pub data: Option<Block>,
    pub transformed_data: Option<Block>,
    pub parameters: Option<Block>,
    pub transformed_parameters: Option<Block>,
    pub model: Option<Block>,
    pub generated_quantities: Option<Block>,
}

impl Program {
    /// The statement blocks, in source order, with their kinds.
    pub fn blocks(&self) -> impl Iterator<Item = &Block> {
        [
            &self.data,
            &self.transformed_data,
            &self.parameters,
            &self.transformed_parameters,
            &self.model,
            &self.generated_quantities,
        ]
        .into_iter()
        .flatten()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockKind {
    Data,
    TransformedData,
    Parameters,
    TransformedParameters,
    Model,
    GeneratedQuantities,
}

impl BlockKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BlockKind::Data => "data",
            BlockKind::TransformedData => "transformed data",
            BlockKind::Parameters => "parameters",
            BlockKind::TransformedParameters => "transformed parameters",
            BlockKind::Model => "model",
            BlockKind::GeneratedQuantities => "generated quantities",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct FunctionsBlock {
    pub functions: Vec<FunctionDef>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub kind: BlockKind,
    pub stmts: Vec<Stmt>,
    pub span: Span,
}

/// A user function: a definition, or a forward declaration when `body` is `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionDef {
    /// `None` for `void`.
    pub return_type: Option<UnsizedType>,
    pub name: Ident,
    pub params: Vec<Param>,
    pub body: Option<Stmt>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// `data real x`: the argument must not depend on parameters.
    pub data_only: bool,
    pub ty: UnsizedType,
    pub name: Ident,
    pub span: Span,
}

/// A type without sizes, as in function signatures: `array[,] vector`.
#[derive(Debug, Clone, PartialEq)]
pub struct UnsizedType {
    pub base: BaseType,
    pub array_rank: usize,
    pub span: Span,
}

/// Element types; the constrained ones appear only in declarations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BaseType {
    Int,
    Real,
    Vector,
    RowVector,
    Matrix,
    Ordered,
    PositiveOrdered,
    Simplex,
    UnitVector,
    CholeskyFactorCorr,
    CholeskyFactorCov,
    CorrMatrix,
    CovMatrix,
}

impl BaseType {
    pub fn as_str(self) -> &'static str {
        match self {
            BaseType::Int => "int",
            BaseType::Real => "real",
            BaseType::Vector => "vector",
            BaseType::RowVector => "row_vector",
            BaseType::Matrix => "matrix",
            BaseType::Ordered => "ordered",
            BaseType::PositiveOrdered => "positive_ordered",
            BaseType::Simplex => "simplex",
            BaseType::UnitVector => "unit_vector",
            BaseType::CholeskyFactorCorr => "cholesky_factor_corr",
            BaseType::CholeskyFactorCov => "cholesky_factor_cov",
            BaseType::CorrMatrix => "corr_matrix",
            BaseType::CovMatrix => "cov_matrix",
        }
    }
}

/// A declared type: `array[N] vector<lower=0>[K]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SizedType {
    pub base: BaseType,
    /// Empty for `int` and `real`; one for vectors and square matrices; two for `matrix`
    /// and for `cholesky_factor_cov[M, N]`.
    pub sizes: Vec<Expr>,
    pub constraint: Option<Constraint>,
    /// `array[d1, d2]`: outermost first; empty when not an array.
    pub array_dims: Vec<Expr>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Constraint {
    /// `<lower=a, upper=b>`; at least one is present.
    Range {
        lower: Option<Expr>,
        upper: Option<Expr>,
    },
    /// `<offset=a, multiplier=b>`; at least one is present.
    Affine {
        offset: Option<Expr>,
        multiplier: Option<Expr>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StmtKind {
    /// `real x = 1, y;`
    Decl {
        ty: SizedType,
        vars: Vec<Declarator>,
    },
    Assign {
        lhs: LValue,
        op: AssignOp,
        rhs: Expr,
    },
    /// `y ~ normal(mu, sigma) T[lo, hi];`
    Tilde {
        lhs: Expr,
        distribution: Ident,
        args: Vec<Expr>,
        truncation: Option<Truncation>,
    },
    /// `target += e;`
    TargetPlus(Expr),
    /// `for (i in lower:upper) body`
    For {
        var: Ident,
        lower: Expr,
        upper: Expr,
        body: Box<Stmt>,
    },
    /// `for (x in container) body`
    ForEach {
        var: Ident,
        iterable: Expr,
        body: Box<Stmt>,
    },
    While {
        cond: Expr,
        body: Box<Stmt>,
    },
    If {
        cond: Expr,
        then: Box<Stmt>,
        otherwise: Option<Box<Stmt>>,
    },
    Block(Vec<Stmt>),
    Break,
    Continue,
    Return(Option<Expr>),
    Print(Vec<Printable>),
    Reject(Vec<Printable>),
    FatalError(Vec<Printable>),
    /// A call whose value is discarded (a `void` function).
    Call {
        name: Ident,
        args: Vec<Expr>,
    },
    /// A lone `;`.
    Empty,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Declarator {
    pub name: Ident,
    pub init: Option<Expr>,
}

/// The target of an assignment: `x`, `x[i, :]`, `x[i][j]`.
#[derive(Debug, Clone, PartialEq)]
pub struct LValue {
    pub name: Ident,
    /// One list per bracket pair.
    pub indices: Vec<Vec<Index>>,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AssignOp {
    Assign,
    Add,
    Sub,
    Mul,
    Div,
    EltMul,
    EltDiv,
}

impl AssignOp {
    pub fn as_str(self) -> &'static str {
        match self {
            AssignOp::Assign => "=",
            AssignOp::Add => "+=",
            AssignOp::Sub => "-=",
            AssignOp::Mul => "*=",
            AssignOp::Div => "/=",
            AssignOp::EltMul => ".*=",
            AssignOp::EltDiv => "./=",
        }
    }

    /// The operator of a compound assignment (`+=` is `+`); `None` for `=`.
    pub fn binary(self) -> Option<BinaryOp> {
        Some(match self {
            AssignOp::Assign => return None,
            AssignOp::Add => BinaryOp::Add,
            AssignOp::Sub => BinaryOp::Sub,
            AssignOp::Mul => BinaryOp::Mul,
            AssignOp::Div => BinaryOp::Div,
            AssignOp::EltMul => BinaryOp::EltMul,
            AssignOp::EltDiv => BinaryOp::EltDiv,
        })
    }
}

/// `T[lower, upper]`; either bound may be left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Truncation {
    pub lower: Option<Expr>,
    pub upper: Option<Expr>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Printable {
    Str(String, Span),
    Expr(Expr),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Int(i64),
    Real(f64),
    Var(Ident),
    /// `f(a, b)`
    Call {
        name: Ident,
        args: Vec<Expr>,
    },
    /// `f_lpdf(y | mu, sigma)`: `args[0]` is the outcome before the bar.
    CondCall {
        name: Ident,
        args: Vec<Expr>,
    },
    /// `target()`
    GetTarget,
    Index {
        base: Box<Expr>,
        indices: Vec<Index>,
    },
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Ternary {
        cond: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
    /// Postfix `'`.
    Transpose(Box<Expr>),
    Paren(Box<Expr>),
    /// `{a, b}`
    ArrayLit(Vec<Expr>),
    /// `[a, b]`
    RowVectorLit(Vec<Expr>),
}

/// One index inside brackets; a multi-index is a `Single` of an integer array.
#[derive(Debug, Clone, PartialEq)]
pub enum Index {
    /// `:` or nothing.
    All,
    Single(Expr),
    /// `a:`
    From(Expr),
    /// `:b`
    UpTo(Expr),
    /// `a:b`
    Between(Expr, Expr),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Plus,
    Not,
}

impl UnaryOp {
    pub fn as_str(self) -> &'static str {
        match self {
            UnaryOp::Neg => "-",
            UnaryOp::Plus => "+",
            UnaryOp::Not => "!",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Or,
    And,
    Eq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    EltMul,
    EltDiv,
    LeftDiv,
    IntDiv,
    Pow,
    EltPow,
}

/// Associativity of an infix operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assoc {
    Left,
    Right,
}

/// Binding power of prefix `-`, `+`, `!`: above `\` and `%/%`, below `^`.
pub const PREFIX_PRECEDENCE: u8 = 9;

impl BinaryOp {
    pub fn as_str(self) -> &'static str {
        match self {
            BinaryOp::Or => "||",
            BinaryOp::And => "&&",
            BinaryOp::Eq => "==",
            BinaryOp::NotEq => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Mod => "%",
            BinaryOp::EltMul => ".*",
            BinaryOp::EltDiv => "./",
            BinaryOp::LeftDiv => "\\",
            BinaryOp::IntDiv => "%/%",
            BinaryOp::Pow => "^",
            BinaryOp::EltPow => ".^",
        }
    }

    /// stanc3's `parser.mly` precedence table, loosest 2 (the ternary is 1) to tightest 10;
    /// prefix operators sit at [`PREFIX_PRECEDENCE`], 9.
    pub fn precedence(self) -> (u8, Assoc) {
        match self {
            BinaryOp::Or => (2, Assoc::Left),
            BinaryOp::And => (3, Assoc::Left),
            BinaryOp::Eq | BinaryOp::NotEq => (4, Assoc::Left),
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => (5, Assoc::Left),
            BinaryOp::Add | BinaryOp::Sub => (6, Assoc::Left),
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod | BinaryOp::EltMul | BinaryOp::EltDiv => {
                (7, Assoc::Left)
            }
            BinaryOp::LeftDiv | BinaryOp::IntDiv => (8, Assoc::Left),
            BinaryOp::Pow | BinaryOp::EltPow => (10, Assoc::Right),
        }
    }
}
