//! Every crate's modules import downward only: no module imports one that imports it
//! back, directly or through others. A module is a source file (`a/b.rs` or
//! `a/b/mod.rs`); it imports another when it names a path into it (`use crate::a::X`,
//! `super::X`, `crate::a::b::f(..)`). A name re-exported by a module (`pub use`)
//! counts as an import of the module that defines it, so a crate root that re-exports
//! its public API is not in every circle. Inline test modules (`#[cfg(test)] mod ..`)
//! are not the product and are left out.
//!
//! This reads the source text itself (a small tokenizer, no parser): enough for the
//! paths this workspace writes. A cycle fails the test with the modules in it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn workspace_crates() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every module of the crate whose sources are under `src`, with its file.
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut found = BTreeMap::new();
    let mut pending = vec![src.to_path_buf()];
    while let Some(directory) = pending.pop() {
        let entries = std::fs::read_dir(&directory).expect("a source directory of the workspace");
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            if path.extension().is_none_or(|extension| extension != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).expect("under src").with_extension("");
            let mut module: Module =
                relative.iter().map(|part| part.to_string_lossy().into_owned()).collect();
            if module.last().is_some_and(|last| last == "mod") {
                module.pop();
            }
            if module == ["lib"] || module == ["main"] {
                module.clear();
            }
            found.insert(module, path);
        }
    }
    found
}

/// The text without comments, string contents and inline test modules.
fn product_text(source: &str) -> String {
    let mut text = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    let mut previous = ' ';
    while let Some(character) = chars.next() {
        let raw_string_start = character == 'r'
            && !(previous.is_ascii_alphanumeric() || previous == '_')
            && matches!(chars.peek(), Some('#') | Some('"'));
        previous = character;
        if raw_string_start {
            let mut hashes = 0;
            while chars.peek() == Some(&'#') {
                chars.next();
                hashes += 1;
            }
            if chars.peek() != Some(&'"') {
                text.push('r');
                continue;
            }
            chars.next();
            // The string ends at a quote followed by as many hashes as it began with.
            let closing: String =
                std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            let mut inside = String::new();
            for next in chars.by_ref() {
                inside.push(next);
                if inside.ends_with(&closing) {
                    break;
                }
            }
            text.push_str("\"\"");
            previous = '"';
            continue;
        }
        match character {
            '/' if chars.peek() == Some(&'/') => {
                for skipped in chars.by_ref() {
                    if skipped == '\n' {
                        text.push('\n');
                        break;
                    }
                }
            }
            '"' => {
                text.push('"');
                while let Some(inside) = chars.next() {
                    match inside {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                text.push('"');
            }
            // A character literal of a brace or quote would confuse what follows.
            '\'' => {
                let ahead: String = chars.clone().take(3).collect();
                if ahead.starts_with("\\") && ahead.len() == 3 && ahead.ends_with('\'') {
                    chars.nth(2);
                    text.push_str("' '");
                } else if ahead.chars().nth(1) == Some('\'') {
                    chars.nth(1);
                    text.push_str("' '");
                } else {
                    text.push('\'');
                }
            }
            other => text.push(other),
        }
    }
    while let Some(start) = test_module_start(&text) {
        let open = start + text[start..].find('{').expect("a module body");
        let mut depth = 0usize;
        let mut end = text.len();
        for (offset, byte) in text.as_bytes()[open..].iter().enumerate() {
            match byte {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + offset + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        text.replace_range(start..end, "");
    }
    text
}

/// Where a `#[cfg(test)]` inline module starts (`mod name {`, not `mod name;`).
fn test_module_start(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = text[from..].find("#[cfg(test)]") {
        let start = from + found;
        let after = &text[start + "#[cfg(test)]".len()..];
        let tokens = tokens(after);
        let mut index = 0;
        if tokens.first().is_some_and(|token| token == "pub") {
            index += 1;
        }
        let is_inline_module = tokens.get(index).is_some_and(|token| token == "mod")
            && tokens.get(index + 2).is_some_and(|token| token == "{");
        if is_inline_module {
            return Some(start);
        }
        from = start + 1;
    }
    None
}

fn tokens(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let bytes = text.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        if byte.is_ascii_alphabetic() || byte == b'_' {
            let start = index;
            while index < bytes.len()
                && (bytes[index].is_ascii_alphanumeric() || bytes[index] == b'_')
            {
                index += 1;
            }
            tokens.push(text[start..index].to_string());
            continue;
        }
        if byte == b':' && bytes.get(index + 1) == Some(&b':') {
            tokens.push("::".to_string());
            index += 2;
            continue;
        }
        if b"{},;*()".contains(&byte) {
            tokens.push((byte as char).to_string());
        }
        index += 1;
    }
    tokens
}

/// A path a module names, and for a `pub use` the name it gives it.
struct Named {
    path: Vec<String>,
    reexported_as: Option<String>,
}

/// Reads a `use` tree from `tokens[at..]` under `prefix`; returns where it ended.
fn use_tree(
    tokens: &[String],
    mut at: usize,
    prefix: &[String],
    public: bool,
    out: &mut Vec<Named>,
) -> usize {
    let mut path = prefix.to_vec();
    while at < tokens.len() {
        match tokens[at].as_str() {
            "{" => {
                at += 1;
                loop {
                    at = use_tree(tokens, at, &path, public, out);
                    match tokens.get(at).map(String::as_str) {
                        Some(",") => at += 1,
                        Some("}") => return at + 1,
                        _ => return at,
                    }
                    if tokens.get(at).map(String::as_str) == Some("}") {
                        return at + 1;
                    }
                }
            }
            "::" => at += 1,
            "," | "}" | ";" => break,
            "*" => {
                at += 1;
                out.push(Named { path: path.clone(), reexported_as: None });
                return at;
            }
            "as" => {
                let alias = tokens.get(at + 1).cloned();
                out.push(Named { path: path.clone(), reexported_as: alias.filter(|_| public) });
                return at + 2;
            }
            segment => {
                path.push(segment.to_string());
                at += 1;
            }
        }
    }
    let name = path.last().cloned();
    out.push(Named { path, reexported_as: name.filter(|_| public) });
    at
}

/// Every path the text names that may lead into another module.
fn named_paths(text: &str) -> Vec<Named> {
    let tokens = tokens(text);
    let mut named = Vec::new();
    let mut at = 0;
    while at < tokens.len() {
        let token = tokens[at].as_str();
        if token == "use" {
            let public = at > 0 && (tokens[at - 1] == "pub" || tokens[at - 1] == ")");
            at = use_tree(&tokens, at + 1, &[], public, &mut named);
            continue;
        }
        if matches!(token, "crate" | "super" | "self")
            && tokens.get(at + 1).is_some_and(|t| t == "::")
        {
            let mut path = Vec::new();
            while let Some(segment) = tokens.get(at) {
                if !segment.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                    break;
                }
                path.push(segment.clone());
                at += 1;
                if tokens.get(at).is_some_and(|t| t == "::") {
                    at += 1;
                } else {
                    break;
                }
            }
            named.push(Named { path, reexported_as: None });
            continue;
        }
        at += 1;
    }
    named
}

struct Crate {
    files: BTreeMap<Module, PathBuf>,
    named: BTreeMap<Module, Vec<Named>>,
    /// Per module, the names it re-exports and the paths they stand for.
    reexports: BTreeMap<Module, BTreeMap<String, Vec<String>>>,
}

impl Crate {
    fn read(src: &Path) -> Crate {
        let files = modules(src);
        let mut named = BTreeMap::new();
        let mut reexports: BTreeMap<Module, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        for (module, file) in &files {
            let source = std::fs::read_to_string(file).expect("a readable source file");
            let paths = named_paths(&product_text(&source));
            for path in &paths {
                if let Some(name) = &path.reexported_as {
                    reexports
                        .entry(module.clone())
                        .or_default()
                        .insert(name.clone(), path.path.clone());
                }
            }
            named.insert(module.clone(), paths);
        }
        Crate { files, named, reexports }
    }

    /// The module a path from `module` leads into, if it is one of the crate's.
    fn resolve(&self, module: &Module, path: &[String], depth: usize) -> Option<Module> {
        let first = path.first()?;
        let (mut current, rest): (Module, &[String]) = match first.as_str() {
            "crate" => (Vec::new(), &path[1..]),
            "super" | "self" => {
                let mut base = module.clone();
                let mut skipped = 0;
                for segment in path {
                    match segment.as_str() {
                        "super" => {
                            base.pop();
                        }
                        "self" => {}
                        _ => break,
                    }
                    skipped += 1;
                }
                (base, &path[skipped..])
            }
            child => {
                let mut candidate = module.clone();
                candidate.push(child.to_string());
                if !self.files.contains_key(&candidate) {
                    return None;
                }
                (module.clone(), path)
            }
        };
        let mut taken = 0;
        for segment in rest {
            current.push(segment.clone());
            if self.files.contains_key(&current) {
                taken += 1;
            } else {
                current.pop();
                break;
            }
        }
        if let (Some(name), true) = (rest.get(taken), depth < 8) {
            if let Some(target) = self.reexports.get(&current).and_then(|names| names.get(name)) {
                return self.resolve(&current, &target.clone(), depth + 1).or(Some(current));
            }
        }
        Some(current)
    }

    fn imports(&self) -> BTreeMap<Module, BTreeSet<Module>> {
        let mut graph = BTreeMap::new();
        for (module, paths) in &self.named {
            let targets: BTreeSet<Module> = paths
                .iter()
                .filter_map(|named| self.resolve(module, &named.path, 0))
                .filter(|target| target != module && self.files.contains_key(target))
                .collect();
            graph.insert(module.clone(), targets);
        }
        graph
    }
}

/// The groups of modules that import one another in a circle (Tarjan's strongly
/// connected components of more than one module).
fn circles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on_stack: BTreeSet<&'a Module>,
        found: Vec<Vec<Module>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, module: &'a Module) {
            let number = self.index.len();
            self.index.insert(module, number);
            self.low.insert(module, number);
            self.stack.push(module);
            self.on_stack.insert(module);
            for target in &self.graph[module] {
                if !self.index.contains_key(target) {
                    self.visit(target);
                    let low = self.low[module].min(self.low[target]);
                    self.low.insert(module, low);
                } else if self.on_stack.contains(target) {
                    let low = self.low[module].min(self.index[target]);
                    self.low.insert(module, low);
                }
            }
            if self.low[module] == self.index[module] {
                let mut group = Vec::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack.remove(member);
                    group.push(member.clone());
                    if member == module {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    self.found.push(group);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for module in graph.keys() {
        if !walk.index.contains_key(module) {
            walk.visit(module);
        }
    }
    walk.found
}

fn name(module: &Module) -> String {
    if module.is_empty() {
        "(crate root)".to_string()
    } else {
        module.join("::")
    }
}

#[test]
fn every_crates_modules_import_downward_only() {
    let crates = workspace_crates();
    let mut problems = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(&crates).expect("the workspace's crates") {
        let src = entry.expect("a crate directory").path().join("src");
        if !src.is_dir() {
            continue;
        }
        checked += 1;
        let graph = Crate::read(&src).imports();
        for circle in circles(&graph) {
            let names: Vec<String> = circle.iter().map(name).collect();
            problems.push(format!("{}: {}", src.display(), names.join(", ")));
        }
    }
    assert!(checked >= 8, "found only {checked} crates under {}", crates.display());
    assert!(
        problems.is_empty(),
        "modules importing one another in a circle:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_check_sees_a_circle_through_a_use_tree_a_reexport_and_super() {
    let directory = tempfile::tempdir().expect("a temporary directory");
    let src = directory.path();
    std::fs::create_dir_all(src.join("outer")).expect("a module directory");
    let write = |path: &str, text: &str| std::fs::write(src.join(path), text).expect("a file");
    write("lib.rs", "mod outer;\nmod low;\npub use low::Thing;\n");
    write(
        "low.rs",
        "// crate::outer::inner is mentioned here only in a comment\npub struct Thing;\n",
    );
    write("outer/mod.rs", "mod inner;\nuse inner::Inner;\nfn f() -> Inner { todo!() }\n");
    write(
        "outer/inner.rs",
        "use crate::{Thing, low::{self}};\nuse super::f;\npub struct Inner;\n#[cfg(test)]\nmod tests { use crate::outer::inner; }\n",
    );
    let graph = Crate::read(src).imports();
    let module = |path: &[&str]| -> Module { path.iter().map(|part| part.to_string()).collect() };
    assert_eq!(graph[&module(&["outer", "inner"])], [module(&["low"]), module(&["outer"])].into());
    assert!(graph[&module(&["low"])].is_empty(), "comments name nothing");
    assert_eq!(circles(&graph), vec![vec![module(&["outer"]), module(&["outer", "inner"])]]);
}

/// The server's gateways (`crates/server/src/gateways/`), each with its files: a
/// folder is one gateway, a file beside the shared ones another. `shared` (what
/// several of them speak) and `router` (the table of HTTP routes) are not gateways.
fn server_gateways() -> BTreeMap<String, Vec<PathBuf>> {
    let root = workspace_crates().join("server/src/gateways");
    let mut gateways = BTreeMap::new();
    for entry in std::fs::read_dir(&root).expect("the server's gateways") {
        let path = entry.expect("a directory entry").path();
        let name = path.file_stem().expect("a name").to_string_lossy().into_owned();
        if matches!(name.as_str(), "mod" | "shared" | "router") {
            continue;
        }
        let files =
            if path.is_dir() { modules(&path).into_values().collect() } else { vec![path.clone()] };
        gateways.insert(name, files);
    }
    gateways
}

/// What a gateway's product text (comments, strings and inline tests left out) names
/// of what it must not: another gateway, or one of the limits the port applies.
fn what_a_gateway_must_not_name(gateway: &str, others: &[&String], text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let squeezed: String = text.split_whitespace().collect();
    for other in others {
        if squeezed.contains(&format!("crate::gateways::{other}")) {
            found.push(format!("imports the {other} gateway"));
        }
        if squeezed.contains(&format!("super::{other}")) && gateway != other.as_str() {
            found.push(format!("imports the {other} gateway through super"));
        }
    }
    // The limits of every key and login are the port's: no gateway takes a token,
    // counts a connection or checks a password itself.
    for call in [".take_token(", ".claim_connection(", ".claim(", "passwords.verify(", ".policy."] {
        if squeezed.contains(call) {
            found.push(format!("calls {call}"));
        }
    }
    found
}

#[test]
fn a_gateway_imports_no_other_gateway_and_applies_no_limit_itself() {
    let gateways = server_gateways();
    assert!(gateways.len() >= 7, "found only {:?}", gateways.keys().collect::<Vec<_>>());
    let mut problems = Vec::new();
    for (gateway, files) in &gateways {
        let others: Vec<&String> = gateways.keys().filter(|other| *other != gateway).collect();
        for file in files {
            let source = std::fs::read_to_string(file).expect("a readable source file");
            for problem in what_a_gateway_must_not_name(gateway, &others, &product_text(&source)) {
                problems.push(format!("{}: {problem}", file.display()));
            }
        }
    }
    assert!(problems.is_empty(), "gateways going around the port:\n{}", problems.join("\n"));
}

#[test]
fn the_gateway_check_sees_another_gateway_and_a_limit_applied_by_hand() {
    let others = ["tcp".to_string(), "fix".to_string()];
    let others: Vec<&String> = others.iter().collect();
    let text = product_text(
        "use crate::gateways::tcp::wire_code;\nfn f(s: &S) { s.state.auth.take_token(&key); }\n// crate::gateways::fix in a comment\n",
    );
    let found = what_a_gateway_must_not_name("ws", &others, &text);
    assert_eq!(found, ["imports the tcp gateway", "calls .take_token("], "{found:?}");
}

/// Whether a gateway's product text reads the venue itself: names its records'
/// module, the engine's link (`state.link`, whatever follows), or a read over the
/// venue's state.
fn reads_the_venue(text: &str) -> bool {
    let squeezed: String = text.split_whitespace().collect();
    let names_the_link = squeezed.match_indices(".link").any(|(at, found)| {
        let next = squeezed[at + found.len()..].chars().next();
        !next.is_some_and(|next| next.is_alphanumeric() || next == '_')
    });
    squeezed.contains("bourse_core::venue") || names_the_link || squeezed.contains("|venue|")
}

#[test]
fn no_gateway_reads_the_venue_around_the_port() {
    let root = workspace_crates().join("server/src/gateways");
    let mut reading = BTreeSet::new();
    for files in server_gateways().into_values() {
        for file in files {
            let source = std::fs::read_to_string(&file).expect("a readable source file");
            if reads_the_venue(&product_text(&source)) {
                let relative = file.strip_prefix(&root).expect("under the gateways");
                reading.insert(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    assert!(reading.is_empty(), "gateways reading the venue around the port: {reading:?}");
    assert!(reads_the_venue("state\n    .link\n    .read(move |venue| venue.exchange())"));
    assert!(reads_the_venue("settlement::contract(&state.link, &symbol)"));
    assert!(reads_the_venue("use bourse_core::venue::OrderRecord;"));
    assert!(!reads_the_venue("state.queries.order(&session, &target)"));
    assert!(!reads_the_venue("use crate::link::LaneReleases; let linked = 1;"));
}
