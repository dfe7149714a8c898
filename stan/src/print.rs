//! Pretty-printer: `Display` for the AST, printing valid Stan that parses back to the same tree.
//!
//! Parentheses come from `Paren` nodes; others are added only where precedence needs them, so
//! a parsed program prints with exactly its own parentheses.

use std::fmt::{self, Display, Formatter, Write};

use crate::ast::{
    Assoc, Block, Constraint, Expr, ExprKind, FunctionDef, Index, LValue, PREFIX_PRECEDENCE,
    Printable, Program, SizedType, Stmt, StmtKind, UnsizedType,
};

/// Binding power of atoms, calls and postfix forms: nothing needs parentheses around them.
const ATOM_PRECEDENCE: u8 = 11;

fn precedence(expr: &Expr) -> u8 {
    match &expr.kind {
        ExprKind::Ternary { .. } => 1,
        ExprKind::Binary { op, .. } => op.precedence().0,
        ExprKind::Unary { .. } => PREFIX_PRECEDENCE,
        _ => ATOM_PRECEDENCE,
    }
}

/// Writes `expr`, in parentheses if it binds looser than `min`. A prefix operator may start
/// any right operand (`a ^ -b`), so `rhs` lets it through unparenthesised.
fn operand(f: &mut Formatter<'_>, expr: &Expr, min: u8, rhs: bool) -> fmt::Result {
    let loose = precedence(expr) < min;
    let prefix_ok = rhs && matches!(expr.kind, ExprKind::Unary { .. });
    if loose && !prefix_ok {
        write!(f, "({expr})")
    } else {
        write!(f, "{expr}")
    }
}

fn comma_list<T: Display>(f: &mut Formatter<'_>, items: &[T]) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

impl Display for Index {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Index::All => f.write_str(":"),
            Index::Single(e) => write!(f, "{e}"),
            Index::From(e) => write!(f, "{e}:"),
            Index::UpTo(e) => write!(f, ":{e}"),
            Index::Between(a, b) => write!(f, "{a}:{b}"),
        }
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ExprKind::Int(v) => write!(f, "{v}"),
            // Debug keeps a `.` or an exponent, so the literal stays a real.
            ExprKind::Real(v) => write!(f, "{v:?}"),
            ExprKind::Var(id) => f.write_str(&id.name),
            ExprKind::Call { name, args } => {
                write!(f, "{}(", name.name)?;
                comma_list(f, args)?;
                f.write_str(")")
            }
            ExprKind::CondCall { name, args } => {
                write!(f, "{}(", name.name)?;
                if let Some((first, rest)) = args.split_first() {
                    write!(f, "{first} | ")?;
                    comma_list(f, rest)?;
                }
                f.write_str(")")
            }
            ExprKind::GetTarget => f.write_str("target()"),
            ExprKind::Index { base, indices } => {
                operand(f, base, ATOM_PRECEDENCE, false)?;
                f.write_str("[")?;
                comma_list(f, indices)?;
                f.write_str("]")
            }
            ExprKind::Unary { op, operand: inner } => {
                f.write_str(op.as_str())?;
                operand(f, inner, PREFIX_PRECEDENCE, true)
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let (p, assoc) = op.precedence();
                let (left_min, right_min) = match assoc {
                    Assoc::Left => (p, p + 1),
                    Assoc::Right => (p + 1, p),
                };
                operand(f, lhs, left_min, false)?;
                write!(f, " {} ", op.as_str())?;
                operand(f, rhs, right_min, true)
            }
            ExprKind::Ternary {
                cond,
                then,
                otherwise,
            } => {
                operand(f, cond, 2, false)?;
                write!(f, " ? {then} : ")?;
                operand(f, otherwise, 1, false)
            }
            ExprKind::Transpose(inner) => {
                operand(f, inner, ATOM_PRECEDENCE, false)?;
                f.write_str("'")
            }
            ExprKind::Paren(inner) => write!(f, "({inner})"),
            ExprKind::ArrayLit(items) => {
                f.write_str("{")?;
                comma_list(f, items)?;
                f.write_str("}")
            }
            ExprKind::RowVectorLit(items) => {
                f.write_str("[")?;
                comma_list(f, items)?;
                f.write_str("]")
            }
        }
    }
}

impl Display for Constraint {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let (first, second) = match self {
            Constraint::Range { lower, upper } => (("lower", lower), ("upper", upper)),
            Constraint::Affine { offset, multiplier } => {
                (("offset", offset), ("multiplier", multiplier))
            }
        };
        let parts: Vec<String> = [first, second]
            .into_iter()
            .filter_map(|(key, value)| value.as_ref().map(|v| (key, v)))
            // A bound is parsed above comparisons: parenthesise anything looser than `+`.
            .map(|(key, value)| {
                if precedence(value) < 6 {
                    format!("{key}=({value})")
                } else {
                    format!("{key}={value}")
                }
            })
            .collect();
        write!(f, "<{}>", parts.join(", "))
    }
}

impl Display for SizedType {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if !self.array_dims.is_empty() {
            f.write_str("array[")?;
            comma_list(f, &self.array_dims)?;
            f.write_str("] ")?;
        }
        f.write_str(self.base.as_str())?;
        if let Some(constraint) = &self.constraint {
            write!(f, "{constraint}")?;
        }
        if !self.sizes.is_empty() {
            f.write_str("[")?;
            comma_list(f, &self.sizes)?;
            f.write_str("]")?;
        }
        Ok(())
    }
}

impl Display for UnsizedType {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if self.array_rank > 0 {
            write!(f, "array[{}] ", ",".repeat(self.array_rank - 1))?;
        }
        f.write_str(self.base.as_str())
    }
}

impl Display for LValue {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name.name)?;
        for group in &self.indices {
            f.write_str("[")?;
            comma_list(f, group)?;
            f.write_str("]")?;
        }
        Ok(())
    }
}

impl Display for Printable {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Printable::Str(text, _) => write!(f, "\"{text}\""),
            Printable::Expr(e) => write!(f, "{e}"),
        }
    }
}

/// Statements, indented two spaces per level.
struct Printer {
    out: String,
}

impl Printer {
    fn line(&mut self, depth: usize, text: &str) {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    /// A loop or `if` body: braces print inline, anything else on its own line.
    fn body(&mut self, depth: usize, header: &str, body: &Stmt) {
        if let StmtKind::Block(stmts) = &body.kind {
            self.line(depth, &format!("{header} {{"));
            self.stmts(depth + 1, stmts);
            self.line(depth, "}");
        } else {
            self.line(depth, header);
            self.stmt(depth + 1, body);
        }
    }

    fn stmts(&mut self, depth: usize, stmts: &[Stmt]) {
        for stmt in stmts {
            self.stmt(depth, stmt);
        }
    }

    fn stmt(&mut self, depth: usize, stmt: &Stmt) {
        let list = |items: &[Printable]| {
            items
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let text = match &stmt.kind {
            StmtKind::Decl { ty, vars } => {
                let vars: Vec<String> = vars
                    .iter()
                    .map(|v| match &v.init {
                        Some(init) => format!("{} = {init}", v.name.name),
                        None => v.name.name.clone(),
                    })
                    .collect();
                format!("{ty} {};", vars.join(", "))
            }
            StmtKind::Assign { lhs, op, rhs } => format!("{lhs} {} {rhs};", op.as_str()),
            StmtKind::Tilde {
                lhs,
                distribution,
                args,
                truncation,
            } => {
                let args: Vec<String> = args.iter().map(ToString::to_string).collect();
                let mut text = format!("{lhs} ~ {}({})", distribution.name, args.join(", "));
                if let Some(t) = truncation {
                    let show = |e: &Option<Expr>| e.as_ref().map(ToString::to_string);
                    let _ = write!(
                        text,
                        " T[{}, {}]",
                        show(&t.lower).unwrap_or_default(),
                        show(&t.upper).unwrap_or_default()
                    );
                }
                text + ";"
            }
            StmtKind::TargetPlus(e) => format!("target += {e};"),
            StmtKind::For {
                var,
                lower,
                upper,
                body,
            } => {
                return self.body(
                    depth,
                    &format!("for ({} in {lower}:{upper})", var.name),
                    body,
                );
            }
            StmtKind::ForEach {
                var,
                iterable,
                body,
            } => return self.body(depth, &format!("for ({} in {iterable})", var.name), body),
            StmtKind::While { cond, body } => {
                return self.body(depth, &format!("while ({cond})"), body);
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                self.body(depth, &format!("if ({cond})"), then);
                if let Some(otherwise) = otherwise {
                    self.body(depth, "else", otherwise);
                }
                return;
            }
            StmtKind::Block(stmts) => {
                self.line(depth, "{");
                self.stmts(depth + 1, stmts);
                self.line(depth, "}");
                return;
            }
            StmtKind::Break => "break;".to_string(),
            StmtKind::Continue => "continue;".to_string(),
            StmtKind::Return(None) => "return;".to_string(),
            StmtKind::Return(Some(e)) => format!("return {e};"),
            StmtKind::Print(items) => format!("print({});", list(items)),
            StmtKind::Reject(items) => format!("reject({});", list(items)),
            StmtKind::FatalError(items) => format!("fatal_error({});", list(items)),
            StmtKind::Call { name, args } => {
                let args: Vec<String> = args.iter().map(ToString::to_string).collect();
                format!("{}({});", name.name, args.join(", "))
            }
            StmtKind::Empty => ";".to_string(),
        };
        self.line(depth, &text);
    }

    fn function(&mut self, def: &FunctionDef) {
        let return_type = def
            .return_type
            .as_ref()
            .map_or("void".to_string(), ToString::to_string);
        let params: Vec<String> = def
            .params
            .iter()
            .map(|p| {
                let data = if p.data_only { "data " } else { "" };
                format!("{data}{} {}", p.ty, p.name.name)
            })
            .collect();
        let header = format!("{return_type} {}({})", def.name.name, params.join(", "));
        match &def.body {
            None => self.line(1, &format!("{header};")),
            Some(body) => self.body(1, &header, body),
        }
    }

    fn block(&mut self, block: &Block) {
        self.line(0, &format!("{} {{", block.kind.as_str()));
        self.stmts(1, &block.stmts);
        self.line(0, "}");
    }
}

impl Display for Program {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let mut printer = Printer { out: String::new() };
        if let Some(functions) = &self.functions {
            printer.line(0, "functions {");
            for def in &functions.functions {
                printer.function(def);
            }
            printer.line(0, "}");
        }
        for block in self.blocks() {
            printer.block(block);
        }
        f.write_str(&printer.out)
    }
}
