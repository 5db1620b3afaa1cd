#!/usr/bin/env python3
"""Import cycles, checked at two levels.

1. The server crate's layering. Reads every `crate::` path in crates/server/src and
   builds the import graph between the crate's top-level modules (`http`, `domain`, `engine`,
   `app`, ...; a module's own submodules count as itself). Fails when:
     - the graph has a cycle (printed as the modules on it and one import that closes it);
     - a module of the domain services (`domain`) or the engine runner (`engine`) names axum, an
       HTTP status code or the HTTP layer's error type;
     - `routes::` is used outside the HTTP layer;
     - the services, engine, jobs, live feeds, housekeeping, the CLI or the worker import the
       HTTP layer (`serve` and `app` compose the service with its router and may).
   Prints the graph (module -> the modules it imports).

2. No file circles: a file-level import graph for every crate under crates/*/src and for the
   console's sources (console/src). Fails on every cycle between files, printed as the files on
   it (a strongly connected component) and one witness line for each import between them.
   Prints, per graph, how many files and imports between files it has.

   Rust. The module tree is found as rustc finds it: from each crate root (src/lib.rs,
   src/main.rs, src/bin/*.rs) through its `mod x;` declarations (`x.rs` or `x/mod.rs`; an
   inline `mod x { ... }` is a module of the file that holds it). File A imports file B when A
   names, through a path, an item or module of the module that B defines:
     - paths in `use` declarations, with each `{...}` tree expanded, and paths written inline in
       code (`crate::a::b::f()`, `super::x::T`, `self::x::T`, `$crate::...` in macros);
     - a path starts at `crate`, `self`, `super` (repeatable), a child module of the module the
       path is written in (2018 paths: `routes::desk` beside `mod routes;`), or a name that a
       `use` of the same file bound to a module (`use crate::http::routes;` then
       `routes::desk::f`, or a module's children brought in by a glob `use a::*`);
     - the path goes to the deepest module on it that a file defines: `crate::a::b::Item` with
       `a/b.rs` (or `a/b/mod.rs`) goes to that file, `crate::a::Item` to `a.rs`; an inline module
       on the path stands for the file that holds it;
     - a `mod x;` declaration is not an import;
     - a path to the file's own ancestor (`super::...`, or `crate::...` landing on a parent or
       further up, the crate root included) is not an import: a submodule is part of its parent,
       as in a `runner/mod.rs` whose `runner/desk.rs` uses `super::*`. A parent's paths to its
       children, and paths between siblings and cousins, are imports;
     - another crate's name (`tradeops_core::...`) is not an import: cargo already keeps the
       crates acyclic;
     - `#[cfg(test)]` modules are read like any other code: a cycle that only a test module
       closes (a test of a lower file that needs a higher one) is a cycle too, fixed rather than
       exempted: the test moves to a file of its own (`x/tests.rs`, declared `mod tests;`), so
       the test file, not the file under test, imports the higher one.
   Comments and string literals are skipped. `#[path]` attributes are not read (no crate uses
   one): a .rs file under src that no `mod` declaration reaches fails the check, as a file whose
   imports cannot be placed.

   TypeScript. Every relative `import ... from "./x"` (type-only imports included: they tie the
   two files together as much for a reader), `export ... from "./x"` and `import("./x")` in a
   .ts/.tsx file of console/src is an import of the file it resolves to (`x.ts`, `x.tsx`,
   `x.js`, `x/index.ts[x]`); stylesheets and packages are not files of the graph.

Usage: .ci/module_graph.py [--quiet]"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "crates/server/src"
# Modules that must know nothing of HTTP.
PURE = ("domain", "engine", "jobs", "events", "health", "cluster", "feed", "housekeeping", "refusals")
# Modules below the HTTP layer or beside it that must not import it: the services, the engine,
# the jobs, the live feeds, housekeeping and the command line (`serve`, the composition that
# runs the service behind its HTTP front, and `app`, which builds the router, may).
NO_HTTP_IMPORT = PURE + ("cli", "worker")
HTTP = "http"
USE_TREE = re.compile(r"\buse\s+crate::\{([^;]*)\};", re.S)
PATH = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")
HTTP_WORDS = re.compile(r"\baxum\b|\bStatusCode\b|\bApiError\b|\bApiResult\b|\bIntoResponse\b")


def top_module(path: pathlib.Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    return rel.parts[0]


def strip_comments(text: str) -> str:
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def imports(text: str) -> dict:
    """Top-level modules named, each with one line that names it."""
    found = {}
    for m in USE_TREE.finditer(text):
        for part in m.group(1).split(","):
            name = part.strip().split("::")[0].strip("{} \n")
            if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and name != "self":
                found.setdefault(name, "use crate::{" + name + ", ...}")
    for line in text.splitlines():
        for name in PATH.findall(line):
            found.setdefault(name, line.strip())
    return found


def cycles(graph: dict) -> list:
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(sorted(scc))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(sccs)


def server_layers() -> tuple:
    """Part 1: the server's top-level modules. Returns (lines to print, problems)."""
    graph, witness, problems = {}, {}, []
    for file in sorted(SRC.rglob("*.rs")):
        me = top_module(file)
        if me in ("main", "lib"):
            continue
        text = strip_comments(file.read_text())
        graph.setdefault(me, set())
        for other, line in imports(text).items():
            if other != me:
                graph[me].add(other)
                witness.setdefault((me, other), f"{file.relative_to(SRC)}: {line}")
        if me in PURE and HTTP_WORDS.search(text):
            word = HTTP_WORDS.search(text).group(0)
            problems.append(f"{file.relative_to(SRC)} ({me}) names `{word}`: the {me} layer must not know HTTP")
        if me != HTTP and re.search(r"\broutes::", text):
            problems.append(f"{file.relative_to(SRC)} uses `routes::` outside the HTTP layer")
    for me in sorted(graph):
        if me in NO_HTTP_IMPORT and HTTP in graph[me]:
            problems.append(f"{witness[(me, HTTP)]} ({me}) imports the HTTP layer: {me} must not depend on it")
    for scc in cycles(graph):
        edges = [witness[(a, b)] for a in scc for b in scc if (a, b) in witness]
        problems.append("import cycle between " + ", ".join(scc) + ":\n      " + "\n      ".join(edges))
    lines = [f"{v} -> {', '.join(sorted(w for w in graph[v] if w in graph)) or '(nothing)'}" for v in sorted(graph)]
    if not problems:
        lines.append(
            f"{len(graph)} modules, no import cycle; domain, engine, jobs, feeds, housekeeping and the CLI know no "
            "HTTP; routes only in http"
        )
    return lines, problems


# ---- Part 2: file-level import graphs.

RAW_STR = re.compile(r'(?:br|r)(#*)"')
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NUMBER = re.compile(r"[0-9][0-9A-Za-z_]*")


class Tok:
    __slots__ = ("text", "line", "ident")

    def __init__(self, text, line, ident):
        self.text, self.line, self.ident = text, line, ident


def rust_tokens(text: str) -> list:
    """Identifiers, `::` and single punctuation characters with their line numbers; comments,
    string, byte and char literals, lifetimes and numbers are dropped."""
    toks, i, n, line = [], 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    line += text[i] == "\n"
                    i += 1
        elif (c in "rb") and RAW_STR.match(text, i):
            m = RAW_STR.match(text, i)
            close = '"' + m.group(1)
            j = text.find(close, m.end())
            j = n if j < 0 else j + len(close)
            line += text.count("\n", i, j)
            i = j
        elif c == '"' or text.startswith('b"', i):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            line += text.count("\n", i, j)
            i = j + 1
        elif c == "'" or text.startswith("b'", i):
            j = i + (2 if c == "b" else 1)
            if j < n and text[j] == "\\":  # an escaped char literal: '\n', '\'', '\u{..}'
                k = text.find("'", j + 2)
                i = n if k < 0 else k + 1
            elif j + 1 < n and text[j + 1] == "'":  # 'x'
                i = j + 2
            else:  # a lifetime or loop label: 'a
                m = IDENT.match(text, j)
                i = m.end() if m else j
        elif text.startswith("r#", i) and IDENT.match(text, i + 2):
            m = IDENT.match(text, i + 2)
            toks.append(Tok(m.group(0), line, True))
            i = m.end()
        elif IDENT.match(text, i):
            m = IDENT.match(text, i)
            toks.append(Tok(m.group(0), line, True))
            i = m.end()
        elif NUMBER.match(text, i):
            i = NUMBER.match(text, i).end()
        elif text.startswith("::", i):
            toks.append(Tok("::", line, False))
            i += 2
        else:
            toks.append(Tok(c, line, False))
            i += 1
    return toks


class RustFile:
    def __init__(self, path: pathlib.Path):
        self.path = path
        self.text = path.read_text()
        self.lines = self.text.splitlines()
        self.toks = rust_tokens(self.text)


def walk_modules(toks: list):
    """Yields (index, inline module names enclosing the token) for each token; `mod x {` opens
    an inline module closed by its matching brace."""
    depth, stack, pending = 0, [], None
    for k, t in enumerate(toks):
        yield k, tuple(name for name, _ in stack)
        if t.text == "mod" and k + 2 < len(toks) and toks[k + 1].ident and toks[k + 2].text == "{":
            pending = toks[k + 1].text
        elif t.text == "{":
            depth += 1
            if pending is not None and toks[k - 2].text == "mod":
                stack.append((pending, depth))
            pending = None
        elif t.text == "}":
            if stack and stack[-1][1] == depth:
                stack.pop()
            depth -= 1


def module_tree(root: pathlib.Path, files: dict) -> tuple:
    """From a crate root through its `mod` declarations: (module path -> file defining it, with
    inline modules mapped to the file holding them; file -> its module path)."""
    modules, file_mod, queue = {(): root}, {root: ()}, [root]
    while queue:
        file = queue.pop()
        if file not in files:
            files[file] = RustFile(file)
        me = file_mod[file]
        toks = files[file].toks
        own_dir = file.parent if (file == root or file.name == "mod.rs") else file.with_suffix("")
        for k, inline in walk_modules(toks):
            t = toks[k]
            if t.text != "mod" or k + 2 >= len(toks) or not toks[k + 1].ident:
                continue
            name, after = toks[k + 1].text, toks[k + 2].text
            path = me + inline + (name,)
            if after == "{":
                modules.setdefault(path, file)
            elif after == ";":
                d = own_dir.joinpath(*inline)
                child = d / f"{name}.rs"
                if not child.exists():
                    child = d / name / "mod.rs"
                if child.exists() and child not in file_mod:
                    modules[path] = child
                    file_mod[child] = path
                    queue.append(child)
    return modules, file_mod


def use_paths(toks: list, k: int) -> tuple:
    """The `use` tree starting at toks[k] (just after `use`), expanded: ([(segment tokens, alias,
    glob)], index after the `;`). Paths starting with `::` (another crate) are left out."""
    out = []

    def tree(k, prefix):
        segs = list(prefix)
        if toks[k].text == "::":
            if not segs:  # `use ::other_crate::...`
                segs = None
            k += 1
        while k < len(toks):
            t = toks[k]
            if t.text == "{":
                k += 1
                while toks[k].text != "}":
                    k = tree(k, segs if segs is not None else [])
                    if toks[k].text == ",":
                        k += 1
                return k + 1
            if t.text == "*":
                if segs:
                    out.append((segs, None, True))
                return k + 1
            if not t.ident:
                return k
            if segs is not None:
                segs = segs + [t]
            k += 1
            if toks[k].text == "::":
                k += 1
                continue
            alias = None
            if toks[k].text == "as":
                alias = toks[k + 1].text
                k += 2
            if segs:
                out.append((segs, alias, False))
            return k
        return k

    end = tree(k, [])
    while end < len(toks) and toks[end].text != ";":
        end += 1
    return out, end + 1


def absolute(names: list, here: tuple, modules: dict, bound: dict):
    """The path `names` written in module `here`, from the crate root; None for another crate's."""
    first = names[0]
    if first == "crate":
        base, rest = (), names[1:]
    elif first in ("self", "super"):
        base, rest = here, names
    elif here + (first,) in modules:
        base, rest = here + (first,), names[1:]
    elif first in bound:
        base, rest = bound[first], names[1:]
    else:
        return None
    while rest and rest[0] in ("self", "super"):
        if rest[0] == "super":
            base = base[:-1]
        rest = rest[1:]
    return base + tuple(n for n in rest if n != "self")


def deepest(path: tuple, modules: dict) -> tuple:
    """The longest prefix of `path` that is a module."""
    for end in range(len(path), -1, -1):
        if path[:end] in modules:
            return path[:end]
    return ()


def rust_imports(rf: RustFile, me: tuple, modules: dict, file_mod: dict) -> dict:
    """The files `rf` imports (not its ancestors, not itself), each with one witness line."""
    toks = rf.toks
    # Names bound to modules by this file's `use`s (read first: a `use` may follow its use).
    bound = {}
    for k, inline in walk_modules(toks):
        t = toks[k]
        if t.text != "use" or (k and toks[k - 1].text == "::"):
            continue
        for segs, alias, glob in use_paths(toks, k + 1)[0]:
            names = [s.text for s in segs]
            path = absolute(names, me + inline, modules, {})
            if path is None or path not in modules:
                continue
            if glob:
                for m in modules:
                    if len(m) == len(path) + 1 and m[: len(path)] == path:
                        bound.setdefault(m[-1], m)
            else:
                bound.setdefault(alias or (names[-2] if names[-1] == "self" and len(names) > 1 else names[-1]), path)
    found = {}

    def add(segs, inline):
        names = [s.text for s in segs]
        path = absolute(names, me + inline, modules, bound)
        if path is None:
            return
        target_mod = deepest(path, modules)
        target = modules[target_mod]
        if target == rf.path:
            return
        tmod = file_mod[target]
        if me[: len(tmod)] == tmod:  # an ancestor: a submodule is part of its parent
            return
        # The witness: the line naming the module that the path lands on.
        at = segs[-1].line
        for n, seg in enumerate(segs, 1):
            if deepest(absolute(names[:n], me + inline, modules, bound) or (), modules) == target_mod:
                at = seg.line
                break
        found.setdefault(target, f"line {at}: {rf.lines[at - 1].strip()}")

    k, walker = 0, dict(walk_modules(toks))
    while k < len(toks):
        t, inline = toks[k], walker[k]
        if t.text == "use" and not (k and toks[k - 1].text == "::"):
            paths, k = use_paths(toks, k + 1)
            for segs, _, _ in paths:
                add(segs, inline)
            continue
        if t.ident and k + 2 < len(toks) and toks[k + 1].text == "::" and toks[k + 2].ident \
                and not (k and toks[k - 1].text in ("::", ".")):
            segs = [t]
            k += 1
            while k + 1 < len(toks) and toks[k].text == "::" and toks[k + 1].ident:
                segs.append(toks[k + 1])
                k += 2
            add(segs, inline)
            continue
        k += 1
    return found


def rust_graphs() -> tuple:
    """For each crate: (its src directory, {file: {imported file: witness}}); and the .rs files
    no crate root reaches."""
    out, unreached = [], []
    for src in sorted(ROOT.glob("crates/*/src")):
        roots = [p for p in (src / "lib.rs", src / "main.rs") if p.exists()] + sorted((src / "bin").glob("*.rs"))
        files, graph = {}, {}
        for root in roots:
            modules, file_mod = module_tree(root, files)
            for file, me in file_mod.items():
                graph.setdefault(file, {}).update(rust_imports(files[file], me, modules, file_mod))
        out.append((src, graph))
        unreached += sorted(set(src.rglob("*.rs")) - set(graph))
    return out, unreached


TS_IMPORT = re.compile(
    r"""^[ \t]*(?:import|export)\b[^;'"`]*?\bfrom\s*(['"])(\.{1,2}/[^'"]+)\1"""
    r"""|^[ \t]*import\s*(['"])(\.{1,2}/[^'"]+)\3"""
    r"""|\bimport\(\s*(['"])(\.{1,2}/[^'"]+)\5""",
    re.M,
)
TS_EXT = (".ts", ".tsx", ".js", ".jsx", ".mjs")


def ts_graph(src: pathlib.Path) -> dict:
    """{file: {imported file: witness}} for the .ts and .tsx files under `src`."""
    graph = {}
    for file in sorted(p for p in src.rglob("*") if p.suffix in (".ts", ".tsx")):
        text = file.read_text()
        edges = graph.setdefault(file, {})
        for m in TS_IMPORT.finditer(text):
            spec = m.group(2) or m.group(4) or m.group(6)
            base = (file.parent / spec).resolve()
            candidates = [base] if base.suffix in TS_EXT else []
            candidates += [base.with_name(base.name + e) for e in TS_EXT]
            candidates += [base / f"index{e}" for e in (".ts", ".tsx")]
            target = next((c for c in candidates if c.is_file()), None)
            if target is None or target == file:
                continue
            line = text.count("\n", 0, m.start()) + 1
            statement = " ".join(text[m.start():m.end()].split())
            edges.setdefault(target, f"line {line}: {statement}")
    return graph


def file_cycles(src: pathlib.Path, graph: dict) -> list:
    """Problems: each cycle between the files of `graph`, with a witness per import on it."""
    problems = []
    names = {f: str(f.relative_to(src)) for f in graph}
    for scc in cycles({f: set(e) for f, e in graph.items()}):
        edges = [
            f"{names[a]} -> {names[b]}: {names[a]} {graph[a][b]}" for a in scc for b in sorted(graph[a]) if b in scc
        ]
        problems.append(
            f"file import cycle in {src.relative_to(ROOT)}: " + ", ".join(names[f] for f in scc) + ":\n      "
            + "\n      ".join(edges)
        )
    return problems


def main() -> int:
    quiet = "--quiet" in sys.argv
    lines, problems = server_layers()
    graphs, unreached = rust_graphs()
    graphs.append((ROOT / "console/src", ts_graph(ROOT / "console/src")))
    for file in unreached:
        problems.append(f"{file.relative_to(ROOT)}: no `mod` declaration reaches it from its crate's root")
    for src, graph in graphs:
        found = file_cycles(src, graph)
        problems += found
        imports_count = sum(len(e) for e in graph.values())
        lines.append(
            f"{src.relative_to(ROOT)}: {len(graph)} files, {imports_count} imports between files, "
            + (f"{len(found)} file cycle(s)" if found else "no file cycle")
        )
    if not quiet:
        for line in lines:
            print(line)
    for p in problems:
        print("LAYERING: " + p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
