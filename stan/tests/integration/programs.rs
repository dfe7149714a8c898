//! Parses the posteriordb programs in `tests/programs/` (see the README there).

use std::path::Path;

fn programs() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    let mut found: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("tests/programs exists")
        .map(|entry| entry.expect("readable entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "stan"))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let source = std::fs::read_to_string(&path).expect("readable program");
            (name, source)
        })
        .collect();
    found.sort();
    found
}

#[test]
fn programs_every_posteriordb_program_parses() {
    let programs = programs();
    assert!(programs.len() >= 20, "only {} programs", programs.len());
    let mut failures = Vec::new();
    for (name, source) in &programs {
        if let Err(err) = stan::parse(source) {
            failures.push(err.render(name, source));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn source(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(name);
    std::fs::read_to_string(path).expect("readable program")
}

/// Number of declarations and of other statements at the top of each block.
fn block_shape(program: &stan::Program) -> Vec<(&'static str, usize, usize)> {
    program
        .blocks()
        .map(|block| {
            let decls = block
                .stmts
                .iter()
                .filter(|s| matches!(s.kind, stan::ast::StmtKind::Decl { .. }))
                .count();
            (block.kind.as_str(), decls, block.stmts.len() - decls)
        })
        .collect()
}

#[test]
fn programs_block_shapes_match_the_source() {
    let program = stan::parse(&source("eight_schools_noncentered.stan")).unwrap();
    assert!(program.functions.is_none());
    assert_eq!(
        block_shape(&program),
        [
            ("data", 3, 0),
            ("parameters", 3, 0),
            ("transformed parameters", 1, 1),
            ("model", 0, 4),
        ]
    );
    let program = stan::parse(&source("garch11.stan")).unwrap();
    assert_eq!(
        block_shape(&program),
        [("data", 3, 0), ("parameters", 4, 0), ("model", 1, 3)]
    );
    let program = stan::parse(&source("hmm_example.stan")).unwrap();
    assert_eq!(
        block_shape(&program),
        [
            ("data", 3, 0),
            ("parameters", 3, 0),
            ("transformed parameters", 1, 2),
            ("model", 0, 3),
            ("generated quantities", 2, 1),
        ]
    );
    let program = stan::parse(&source("accel_gp.stan")).unwrap();
    let functions = program.functions.expect("accel_gp has functions");
    assert_eq!(functions.functions.len(), 3);
}

/// `{:?}` of a tree without its spans (`Span`'s Debug is `@start..end`).
fn without_spans(program: &stan::Program) -> String {
    let text = format!("{program:?}");
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '@' {
            while chars
                .peek()
                .is_some_and(|c| c.is_ascii_digit() || *c == '.')
            {
                chars.next();
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn programs_print_then_parse_gives_the_same_tree() {
    for (name, source) in programs() {
        let program = stan::parse(&source).expect("parses");
        let printed = program.to_string();
        let reparsed = stan::parse(&printed)
            .unwrap_or_else(|e| panic!("{}\n{printed}", e.render(&name, &printed)));
        assert_eq!(
            without_spans(&reparsed),
            without_spans(&program),
            "{name} printed as:\n{printed}"
        );
    }
}

#[test]
fn programs_printer_adds_only_needed_parentheses() {
    let source = "model {\n  target += -a ^ b + (c ? d : e) * f' - a ^ -b;\n}\n";
    assert_eq!(stan::parse(source).unwrap().to_string(), source);
}

mod lowering;
