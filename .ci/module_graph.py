#!/usr/bin/env python3
"""The server crate's layering, checked (issue 22). Reads every `crate::` path in
crates/server/src and builds the import graph between the crate's top-level modules (`http`,
`domain`, `engine`, `app`, ...; a module's own submodules count as itself). Fails when:
  - the graph has a cycle (printed as the modules on it and one import that closes it);
  - a module of the domain services (`domain`) or the engine runner (`engine`) names axum, an
    HTTP status code or the HTTP layer's error type;
  - `routes::` is used outside the HTTP layer.
Prints the graph (module -> the modules it imports). Usage: .ci/module_graph.py [--quiet]"""
import pathlib
import re
import sys

SRC = pathlib.Path(__file__).resolve().parent.parent / "crates/server/src"
# Modules that must know nothing of HTTP.
PURE = ("domain", "engine", "jobs", "events", "health", "cluster")
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


def main() -> int:
    quiet = "--quiet" in sys.argv
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
    # Cycles: strongly connected components of more than one module (Tarjan).
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
    for scc in sccs:
        edges = [witness[(a, b)] for a in scc for b in scc if (a, b) in witness]
        problems.append("import cycle between " + ", ".join(scc) + ":\n      " + "\n      ".join(edges))
    if not quiet:
        for v in sorted(graph):
            print(f"{v} -> {', '.join(sorted(w for w in graph[v] if w in graph)) or '(nothing)'}")
    for p in problems:
        print("LAYERING: " + p, file=sys.stderr)
    if not problems and not quiet:
        print(f"{len(graph)} modules, no import cycle; domain and engine know no HTTP; routes only in http")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
