//! A small typed syntax tree of the WGSL that the code generator writes, and its printer.
//!
//! Generated code is built from these types, never by splicing strings: every identifier the
//! generator invents is an [`Ident`] (always prefixed `g_`, so it can never be a WGSL keyword or
//! reserved word such as `active` or `target`), every name it uses from the hand-written
//! library is a closed enum ([`LibFn`], [`Global`], [`Hook`]), and every literal is printed in
//! the module's precision by one function ([`real_literal`]).

use std::fmt::Write as _;

use super::Precision;
use super::library::LibFn;

/// A name invented by the generator: `g_` followed by a lowercase word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ident(String);

impl Ident {
    /// `g_<word>`; `word` is lowercase ASCII letters, digits and `_`.
    pub(crate) fn new(word: &str) -> Ident {
        debug_assert!(
            word.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "generated identifier word {word:?}"
        );
        Ident(format!("g_{word}"))
    }

    /// `g_<word><n>`, for one of several values of the same role.
    pub(crate) fn numbered(word: &str, n: usize) -> Ident {
        Ident::new(&format!("{word}{n}"))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// Module-scope variables shared by the generated model and the kernels that call it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Global {
    /// The model's real data (`array<T>`).
    Data,
    /// The model's `Gather` indices (`array<u32>`).
    Index,
    /// Per-chain tapes when they live in a storage buffer (`array<T>`).
    Scratch,
    /// The model's real data copied into workgroup memory (`var<workgroup> array<T, N>`), for
    /// [`super::DataPlacement::Workgroup`].
    SharedData,
    /// The chain this invocation evaluates (`var<private> u32`), set by the kernel.
    Chain,
    /// This invocation's lane within its chain's group (`var<private> u32`, 0 with one
    /// invocation per chain), set by `g_chain_of`.
    Lane,
    /// Zero, read from the index buffer by `g_stage_data` (`var<private> u32`): added to a
    /// loop bound, it keeps drivers from unrolling the loop (`unroll.rs`'s `bound`).
    Zero,
}

impl Global {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Global::Data => "g_data",
            Global::Index => "g_index",
            Global::Scratch => "g_scratch",
            Global::SharedData => "g_shared_data",
            Global::Chain => "g_chain",
            Global::Lane => "g_lane",
            Global::Zero => "g_zero",
        }
    }
}

/// Module-scope constants the generator defines for the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ModuleConst {
    /// Length of the unconstrained parameter vector.
    Dim,
    /// Values on one chain's tape (at least 1).
    TapeLen,
    /// Invocations per workgroup of the kernel.
    WorkgroupSize,
    /// Chains per block of the storage tape layout.
    TapeBlock,
    /// Invocations per chain (`split.rs`).
    Lanes,
    /// Trips of the loop over each lane's elements of a fused split program (`split.rs`).
    SplitTrips,
    /// Position in the index buffer of the zero word read into `g_zero` (`interp.rs`).
    ZeroAt,
    /// Position in the index buffer of the interpreter's table (`interp.rs`).
    CodeAt,
    /// Instructions in that table.
    CodeLen,
}

impl ModuleConst {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ModuleConst::Dim => "G_DIM",
            ModuleConst::TapeLen => "G_TAPE_LEN",
            ModuleConst::WorkgroupSize => "G_WORKGROUP_SIZE",
            ModuleConst::TapeBlock => "G_TAPE_BLOCK",
            ModuleConst::Lanes => "G_LANES",
            ModuleConst::SplitTrips => "G_SPLIT_TRIPS",
            ModuleConst::ZeroAt => "G_ZERO_AT",
            ModuleConst::CodeAt => "G_CODE_AT",
            ModuleConst::CodeLen => "G_CODE_LEN",
        }
    }
}

/// Functions that a kernel supplies to the generated model, or that the generator defines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hook {
    /// `g_theta(j: u32) -> T`: coordinate `j` of this chain's unconstrained point (kernel).
    Theta,
    /// `g_set_grad(j: u32, value: T)`: coordinate `j` of this chain's gradient (kernel).
    SetGrad,
    /// `g_theta_split(k: u32, offset: u32) -> T`: coordinate `offset + k * G_LANES + g_lane`
    /// of this chain's point, this lane's element `k` of a split parameter vector that starts
    /// at coordinate `offset` (kernel; any value past the vector's end). Every lane of the
    /// chain calls it together (it may read other lanes' values).
    ThetaSplit,
    /// `g_set_grad_split(k: u32, offset: u32, len: u32, value: T)`: the gradient at coordinate
    /// `offset + k * G_LANES + g_lane`, this lane's element `k` of a split parameter vector of
    /// `len` coordinates from `offset`; ignored past its end (kernel). Every lane of the chain
    /// calls it together.
    SetGradSplit,
    /// `g_logp_grad() -> T`: the generated model.
    LogpGrad,
    /// `g_stage_data(local: u32)`: copies the model's data into workgroup memory, or does
    /// nothing (generator). Every kernel calls it first, in uniform control flow.
    StageData,
    /// `g_chain_of(invocation: u32) -> u32`: the chain of a global invocation index; sets
    /// `g_lane` (generator). Every kernel calls it after `g_stage_data`.
    ChainOf,
    /// `g_lane_sum(x: T) -> T`: the sum of `x` over the chain's lanes, the same bits on each
    /// (generator; `x` itself with one lane).
    LaneSum,
    /// `g_lane_get(x: T, source: u32) -> T`: `x` of lane `source` of the chain (generator).
    LaneGet,
}

impl Hook {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Hook::Theta => "g_theta",
            Hook::SetGrad => "g_set_grad",
            Hook::ThetaSplit => "g_theta_split",
            Hook::SetGradSplit => "g_set_grad_split",
            Hook::LogpGrad => "g_logp_grad",
            Hook::StageData => "g_stage_data",
            Hook::ChainOf => "g_chain_of",
            Hook::LaneSum => "g_lane_sum",
            Hook::LaneGet => "g_lane_get",
        }
    }
}

/// WGSL built-in functions the generator calls. Only those exact or correctly rounded in f64
/// on every driver (`exp`/`log`/`pow` are not: they go through [`LibFn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Builtin {
    Abs,
    Sqrt,
    /// `workgroupBarrier()`: only in uniform control flow.
    WorkgroupBarrier,
    /// `subgroupShuffleXor(value, mask)`: needs `wgpu::Features::SUBGROUP`.
    SubgroupShuffleXor,
    /// `select(if_false, if_true, condition)`.
    Select,
    /// `min(a, b)`.
    Min,
    /// `vec4<T>(a, b, c, d)`.
    Vec4,
}

impl Builtin {
    fn name(self) -> &'static str {
        match self {
            Builtin::Abs => "abs",
            Builtin::Sqrt => "sqrt",
            Builtin::WorkgroupBarrier => "workgroupBarrier",
            Builtin::SubgroupShuffleXor => "subgroupShuffleXor",
            Builtin::Select => "select",
            Builtin::Min => "min",
            Builtin::Vec4 => "vec4<T>",
        }
    }
}

/// Fields of the library's result structs (`DTerm1`, `DTerm2`, `DKern`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    Value,
    D,
    Da,
    Db,
    Dx,
    D0,
    D1,
    D2,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Value => "value",
            Field::D => "d",
            Field::Da => "da",
            Field::Db => "db",
            Field::Dx => "dx",
            Field::D0 => "d0",
            Field::D1 => "d1",
            Field::D2 => "d2",
        }
    }
}

/// Types of declarations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    /// The module's float type, `T` (`f32` or `f64`).
    Real,
    /// `array<T, G_TAPE_LEN>`.
    TapeArray,
    /// `array<T, n>`.
    RealArray(u32),
    /// `vec2<T>`: a compensated sum and its error ([`super::tape::Sum`]).
    RealPair,
    /// `u32`.
    U32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Gt,
    Eq,
    Ne,
    And,
    Xor,
}

impl BinOp {
    fn token(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Gt => ">",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "&&",
            BinOp::Xor => "^",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Callee {
    Lib(LibFn),
    Hook(Hook),
    Builtin(Builtin),
}

/// An expression.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Expr {
    /// A literal of type `T`.
    Real(f64),
    /// A `u32` literal.
    U32(u32),
    Local(Ident),
    Global(Global),
    Const(ModuleConst),
    Index(Box<Expr>, Box<Expr>),
    Field(Box<Expr>, Field),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Call(Callee, Vec<Expr>),
}

impl Expr {
    pub(crate) fn local(ident: &Ident) -> Expr {
        Expr::Local(ident.clone())
    }

    pub(crate) fn binary(op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
        Expr::Binary(op, Box::new(lhs), Box::new(rhs))
    }

    pub(crate) fn index(self, index: Expr) -> Expr {
        Expr::Index(Box::new(self), Box::new(index))
    }

    pub(crate) fn field(self, field: Field) -> Expr {
        Expr::Field(Box::new(self), field)
    }

    pub(crate) fn lib(func: LibFn, args: Vec<Expr>) -> Expr {
        Expr::Call(Callee::Lib(func), args)
    }

    pub(crate) fn builtin(func: Builtin, args: Vec<Expr>) -> Expr {
        Expr::Call(Callee::Builtin(func), args)
    }

    pub(crate) fn hook(func: Hook, args: Vec<Expr>) -> Expr {
        Expr::Call(Callee::Hook(func), args)
    }

    pub(crate) fn gt(self, rhs: Expr) -> Expr {
        Expr::binary(BinOp::Gt, self, rhs)
    }

    pub(crate) fn equals(self, rhs: Expr) -> Expr {
        Expr::binary(BinOp::Eq, self, rhs)
    }

    pub(crate) fn ne(self, rhs: Expr) -> Expr {
        Expr::binary(BinOp::Ne, self, rhs)
    }

    pub(crate) fn and(self, rhs: Expr) -> Expr {
        Expr::binary(BinOp::And, self, rhs)
    }

    pub(crate) fn not(self) -> Expr {
        Expr::Not(Box::new(self))
    }

    /// `self + k` for `u32` index arithmetic, folded when both are literals.
    pub(crate) fn plus_u32(self, k: u32) -> Expr {
        match self {
            _ if k == 0 => self,
            Expr::U32(a) => Expr::U32(a + k),
            other => Expr::binary(BinOp::Add, Expr::U32(k), other),
        }
    }
}

macro_rules! expr_op {
    ($trait:ident, $method:ident, $op:expr) => {
        impl std::ops::$trait for Expr {
            type Output = Expr;
            fn $method(self, rhs: Expr) -> Expr {
                Expr::binary($op, self, rhs)
            }
        }
    };
}
expr_op!(Add, add, BinOp::Add);
expr_op!(Sub, sub, BinOp::Sub);
expr_op!(Mul, mul, BinOp::Mul);
expr_op!(Div, div, BinOp::Div);
expr_op!(Rem, rem, BinOp::Rem);

impl std::ops::Neg for Expr {
    type Output = Expr;
    fn neg(self) -> Expr {
        Expr::Neg(Box::new(self))
    }
}

/// A statement.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Stmt {
    Let(Ident, Expr),
    Var(Ident, Ty, Option<Expr>),
    Assign(Expr, Expr),
    AddAssign(Expr, Expr),
    If(Expr, Vec<Stmt>, Vec<Stmt>),
    /// `for (var i: u32 = 0u; i < end; i += 1u) { body }`.
    For(Ident, Expr, Vec<Stmt>),
    Return(Expr),
    /// A call whose result is not used.
    Call(Expr),
    /// A braced block, so that names declared inside can be reused by the next one.
    Block(Vec<Stmt>),
    Comment(String),
}

impl Stmt {
    pub(crate) fn let_(name: &Ident, value: Expr) -> Stmt {
        Stmt::Let(name.clone(), value)
    }

    /// `var name: T = 0.0;`, an accumulator.
    pub(crate) fn zero(name: &Ident) -> Stmt {
        Stmt::Var(name.clone(), Ty::Real, Some(Expr::Real(0.0)))
    }

    pub(crate) fn add_to(place: Expr, value: Expr) -> Stmt {
        Stmt::AddAssign(place, value)
    }

    /// `for (var var: u32 = 0u; var < end; var += 1u) { body }`; a block with `var = 0u` when
    /// `end` is the literal 1 (scalar slots), which reads better and costs nothing.
    pub(crate) fn for_(var: &Ident, end: Expr, mut body: Vec<Stmt>) -> Stmt {
        if end == Expr::U32(1) {
            body.insert(0, Stmt::Let(var.clone(), Expr::U32(0)));
            return Stmt::Block(body);
        }
        Stmt::For(var.clone(), end, body)
    }
}

/// A function definition.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Function {
    pub name: Hook,
    /// Parameters and their types.
    pub params: Vec<(Ident, Ty)>,
    /// `None` for no result.
    pub ret: Option<Ty>,
    pub body: Vec<Stmt>,
}

/// Access mode of a storage buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    ReadWrite,
}

/// Element type of a storage buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Element {
    Real,
    U32,
}

/// A module-scope declaration.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Item {
    Comment(String),
    /// `alias T = f32;` or `f64`.
    AliasT,
    ConstU32(ModuleConst, u32),
    Storage {
        group: u32,
        binding: u32,
        global: Global,
        access: Access,
        element: Element,
    },
    PrivateU32(Global),
    /// `var<workgroup> name: array<T, len>;`.
    WorkgroupReals(Global, u32),
    /// `var<workgroup> name: array<vec4<T>, len>;`.
    WorkgroupQuads(Global, u32),
    Function(Function),
    /// A hand-written library file, verbatim (see `library.rs`).
    Source(&'static str),
}

/// A WGSL module: a list of items printed in one precision.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Module {
    pub items: Vec<Item>,
}

impl Module {
    pub(crate) fn render(&self, precision: Precision) -> String {
        let mut printer = Printer {
            out: String::new(),
            indent: 0,
            precision,
        };
        for item in &self.items {
            printer.item(item);
        }
        printer.out
    }
}

/// A literal of type `T` in `precision`. Values that do not exist as WGSL literals (infinities,
/// NaN, f64 values that overflow f32) become library calls.
pub(crate) fn real_literal(value: f64, precision: Precision) -> String {
    let (finite, text) = match precision {
        Precision::F32 => {
            let v = value as f32;
            (v.is_finite(), format!("{v:?}f"))
        }
        Precision::F64 => (value.is_finite(), format!("{value:?}lf")),
    };
    let narrowed = match precision {
        Precision::F32 => f64::from(value as f32),
        Precision::F64 => value,
    };
    if !finite {
        return if narrowed.is_nan() {
            format!("{}()", LibFn::Nan.name())
        } else if narrowed > 0.0 {
            format!("{}()", LibFn::Inf.name())
        } else {
            format!("(-{}())", LibFn::Inf.name())
        };
    }
    // WGSL has no negative literals; `a - -1.0f` must not read as a decrement.
    if text.starts_with('-') {
        format!("({text})")
    } else {
        text
    }
}

struct Printer {
    out: String,
    indent: usize,
    precision: Precision,
}

impl Printer {
    fn line(&mut self, text: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn ty(&self, ty: Ty) -> String {
        match ty {
            Ty::Real => "T".into(),
            Ty::TapeArray => "array<T, G_TAPE_LEN>".into(),
            Ty::RealArray(n) => format!("array<T, {n}u>"),
            Ty::RealPair => "vec2<T>".into(),
            Ty::U32 => "u32".into(),
        }
    }

    fn item(&mut self, item: &Item) {
        match item {
            Item::Comment(text) => {
                for line in text.lines() {
                    self.line(&format!("// {line}"));
                }
            }
            Item::AliasT => {
                let ty = match self.precision {
                    Precision::F32 => "f32",
                    Precision::F64 => "f64",
                };
                self.line(&format!("alias T = {ty};"));
            }
            Item::ConstU32(name, value) => {
                self.line(&format!("const {}: u32 = {value}u;", name.name()));
            }
            Item::Storage {
                group,
                binding,
                global,
                access,
                element,
            } => {
                let access = match access {
                    Access::Read => "read",
                    Access::ReadWrite => "read_write",
                };
                let element = match element {
                    Element::Real => "T",
                    Element::U32 => "u32",
                };
                self.line(&format!(
                    "@group({group}) @binding({binding}) var<storage, {access}> {}: array<{element}>;",
                    global.name()
                ));
            }
            Item::PrivateU32(global) => {
                self.line(&format!("var<private> {}: u32;", global.name()));
            }
            Item::WorkgroupReals(global, len) => {
                self.line(&format!(
                    "var<workgroup> {}: array<T, {len}u>;",
                    global.name()
                ));
            }
            Item::WorkgroupQuads(global, len) => {
                self.line(&format!(
                    "var<workgroup> {}: array<vec4<T>, {len}u>;",
                    global.name()
                ));
            }
            Item::Function(function) => {
                self.out.push('\n');
                let params = function
                    .params
                    .iter()
                    .map(|(param, ty)| format!("{}: {}", param.as_str(), self.ty(*ty)))
                    .collect::<Vec<_>>()
                    .join(", ");
                let ret = function
                    .ret
                    .map(|ret| format!(" -> {}", self.ty(ret)))
                    .unwrap_or_default();
                self.line(&format!("fn {}({params}){ret} {{", function.name.name()));
                self.block_body(&function.body);
                self.line("}");
            }
            Item::Source(text) => {
                self.out.push('\n');
                self.out.push_str(text);
                if !text.ends_with('\n') {
                    self.out.push('\n');
                }
            }
        }
    }

    fn block_body(&mut self, body: &[Stmt]) {
        self.indent += 1;
        for stmt in body {
            self.stmt(stmt);
        }
        self.indent -= 1;
    }

    fn stmt(&mut self, stmt: &Stmt) {
        match stmt {
            Stmt::Let(name, value) => {
                let value = self.expr(value);
                self.line(&format!("let {} = {value};", name.as_str()));
            }
            Stmt::Var(name, ty, init) => {
                let ty = self.ty(*ty);
                match init {
                    Some(init) => {
                        let init = self.expr(init);
                        self.line(&format!("var {}: {ty} = {init};", name.as_str()));
                    }
                    None => self.line(&format!("var {}: {ty};", name.as_str())),
                }
            }
            Stmt::Assign(place, value) => {
                let (place, value) = (self.expr(place), self.expr(value));
                self.line(&format!("{place} = {value};"));
            }
            Stmt::AddAssign(place, value) => {
                let (place, value) = (self.expr(place), self.expr(value));
                self.line(&format!("{place} += {value};"));
            }
            Stmt::If(cond, then, otherwise) => {
                let cond = self.expr(cond);
                self.line(&format!("if ({cond}) {{"));
                self.block_body(then);
                if otherwise.is_empty() {
                    self.line("}");
                } else {
                    self.line("} else {");
                    self.block_body(otherwise);
                    self.line("}");
                }
            }
            Stmt::For(var, end, body) => {
                let end = self.expr(end);
                let var = var.as_str();
                self.line(&format!(
                    "for (var {var}: u32 = 0u; {var} < {end}; {var} += 1u) {{"
                ));
                self.block_body(body);
                self.line("}");
            }
            Stmt::Return(value) => {
                let value = self.expr(value);
                self.line(&format!("return {value};"));
            }
            Stmt::Call(call) => {
                let call = self.expr(call);
                self.line(&format!("{call};"));
            }
            Stmt::Block(body) => {
                self.line("{");
                self.block_body(body);
                self.line("}");
            }
            Stmt::Comment(text) => self.line(&format!("// {text}")),
        }
    }

    fn expr(&self, expr: &Expr) -> String {
        let mut out = String::new();
        self.write_expr(&mut out, expr);
        out
    }

    fn write_expr(&self, out: &mut String, expr: &Expr) {
        match expr {
            Expr::Real(value) => out.push_str(&real_literal(*value, self.precision)),
            Expr::U32(value) => {
                let _ = write!(out, "{value}u");
            }
            Expr::Local(ident) => out.push_str(ident.as_str()),
            Expr::Global(global) => out.push_str(global.name()),
            Expr::Const(name) => out.push_str(name.name()),
            Expr::Index(base, index) => {
                self.write_expr(out, base);
                out.push('[');
                self.write_expr(out, index);
                out.push(']');
            }
            Expr::Field(base, field) => {
                self.write_expr(out, base);
                out.push('.');
                out.push_str(field.name());
            }
            Expr::Neg(arg) => {
                out.push_str("(-");
                self.write_expr(out, arg);
                out.push(')');
            }
            Expr::Not(arg) => {
                out.push_str("(!");
                self.write_expr(out, arg);
                out.push(')');
            }
            Expr::Binary(op, lhs, rhs) => {
                out.push('(');
                self.write_expr(out, lhs);
                let _ = write!(out, " {} ", op.token());
                self.write_expr(out, rhs);
                out.push(')');
            }
            Expr::Call(callee, args) => {
                out.push_str(match callee {
                    Callee::Lib(func) => func.name(),
                    Callee::Hook(hook) => hook.name(),
                    Callee::Builtin(builtin) => builtin.name(),
                });
                out.push('(');
                for (k, arg) in args.iter().enumerate() {
                    if k > 0 {
                        out.push_str(", ");
                    }
                    self.write_expr(out, arg);
                }
                out.push(')');
            }
        }
    }
}
