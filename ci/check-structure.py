#!/usr/bin/env python3
"""Checks the workspace's structure rules, which the compiler does not:

- no import circle between the modules of a crate: for every module, the graph of its
  child modules (an edge c1 -> c2 when code anywhere below c1 names an item defined
  anywhere below c2, through `use` lines or `crate::`/`super::`/`self::` paths) has no cycle.
  A child naming its own parent's items is layering, not a circle, and is not counted;
  re-exports (`pub use child::Item`) are followed to the module that defines the item;
- no source file over 700 lines;
- `mod` declarations at the top of their file, before the first item;
- no glob import (`use path::*`) outside test code;
- no crate depends on a driver crate but that driver's own binary and tests.

Test code (`#[cfg(test)]` modules, `tests/`, `benches/`, `examples/`) is exempt from the
circle and glob rules. Usage: ci/check-structure.py [workspace root]. Exits 1 naming every
breach with its file and line.
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

MAX_LINES = 700
DRIVER_CRATES = {"manila-csi-plugin", "cinder-csi-plugin", "nfs-csi-plugin"}
IDENT = r"(?:r#)?[A-Za-z_][A-Za-z0-9_]*"
ITEM_KEYWORDS = r"(?:struct|enum|union|trait|fn|type|const|static|mod)"


def blank_out(src: str) -> str:
    """The source with comments, strings and char literals replaced by spaces (newlines kept)."""
    out = list(src)
    i, n = 0, len(src)

    def blank(a: int, b: int) -> None:
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif c in "br" and re.match(r'b?r#*"', src[i:i + 10]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'b?r(#*)"', src[i:])
            end = src.find('"' + m.group(1), i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(m.group(1))
            blank(i, end)
            i = end
        elif c == "b" and i + 1 < n and src[i + 1] in "\"'" and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            i += 1  # a byte string or byte char: handled as the plain one next
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\(x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'])'", src[i:i + 12])
            if m:
                blank(i, i + len(m.group(0)))
                i += len(m.group(0))
            else:
                i += 1  # a lifetime
        else:
            i += 1
    return "".join(out)


@dataclass
class Module:
    path: tuple[str, ...]
    file: Path
    is_test: bool
    children: dict[str, tuple[str, ...]] = field(default_factory=dict)
    defs: set[str] = field(default_factory=set)
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    globs: list[tuple[str, ...]] = field(default_factory=list)
    # (path segments as written, line) of every reference made by this module's own code.
    refs: list[tuple[tuple[str, ...], int]] = field(default_factory=list)


def matching_brace(text: str, open_at: int) -> int:
    depth = 0
    for k in range(open_at, len(text)):
        if text[k] == "{":
            depth += 1
        elif text[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(text)


def expand_use_tree(tree: str) -> list[tuple[tuple[str, ...], str | None]]:
    """`a::{b, c::d as e, self}` -> [((a,b), None), ((a,c,d), 'e'), ((a,), None)]."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+", "@", tree))
    results: list[tuple[tuple[str, ...], str | None]] = []

    def walk(prefix: tuple[str, ...], t: str) -> None:
        if not t:
            return
        brace = t.find("{")
        if brace >= 0 and t.endswith("}"):
            head = t[:brace].rstrip(":")
            base = prefix + tuple(s for s in head.split("::") if s)
            inner = t[brace + 1:-1]
            depth, start = 0, 0
            for k, ch in enumerate(inner + ","):
                if ch == "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                elif ch == "," and depth == 0:
                    part = inner[start:k]
                    start = k + 1
                    if part == "self":
                        results.append((base, None))
                    else:
                        walk(base, part)
            return
        m = re.match(r"^((?:" + IDENT + r"::)*(?:" + IDENT + r"|\*))(?:@(" + IDENT + r"|_))?$", t)
        if not m:
            return
        path, alias = m.group(1), m.group(2)
        results.append((prefix + tuple(path.split("::")), alias))

    walk((), tree)
    return results


class Crate:
    def __init__(self, name: str, root_file: Path):
        self.name = name
        self.modules: dict[tuple[str, ...], Module] = {}
        self.problems: list[str] = []
        self.globs_outside_tests: list[str] = []
        self.late_mods: list[str] = []
        self.load((), root_file, is_test=False, mod_dir=root_file.parent, text=None, offset_line=0)

    def load(self, path, file: Path, is_test: bool, mod_dir: Path, text: str | None, offset_line: int,
             region: tuple[int, int] | None = None) -> None:
        if text is None:
            raw = file.read_text(encoding="utf-8")
            text = blank_out(raw)
            region = (0, len(text))
            self.check_mod_order(file, text)
        module = Module(path, file, is_test)
        self.modules[path] = module
        start, end = region
        body = text[start:end]
        # Child inline modules: their regions are excluded from this module's own code.
        own = list(body)
        for m in re.finditer(r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*([;{])", body):
            name = m.group(2).removeprefix("r#")
            if self.depth_at(body, m.start()) != 0:
                continue
            attrs = m.group(1)
            child_test = is_test or "cfg(test)" in attrs.replace(" ", "")
            child_path = path + (name,)
            module.children[name] = child_path
            module.defs.add(name)
            if m.group(3) == "{":
                open_at = m.end() - 1
                close = matching_brace(body, open_at)
                for k in range(open_at, close + 1):
                    if own[k] != "\n":
                        own[k] = " "
                self.load(child_path, file, child_test, mod_dir / name, text, offset_line,
                          (start + open_at + 1, start + close))
            else:
                child_file = self.find_module_file(mod_dir, name)
                if child_file is None:
                    continue
                child_dir = child_file.parent if child_file.name == "mod.rs" else child_file.with_suffix("")
                self.load(child_path, child_file, child_test, child_dir, None, 0)
        own_text = "".join(own)
        base_line = text.count("\n", 0, start) + 1
        self.collect(module, own_text, base_line)

    @staticmethod
    def depth_at(body: str, pos: int) -> int:
        return body.count("{", 0, pos) - body.count("}", 0, pos)

    @staticmethod
    def find_module_file(mod_dir: Path, name: str) -> Path | None:
        for candidate in (mod_dir / f"{name}.rs", mod_dir / name / "mod.rs"):
            if candidate.exists():
                return candidate
        return None

    def check_mod_order(self, file: Path, text: str) -> None:
        first_item = None
        for lineno, line in enumerate(text.split("\n"), 1):
            if re.match(r"^(pub(\([^)]*\))?\s+)?(async\s+)?(unsafe\s+)?(fn|struct|enum|union|trait|impl|const|static|type|macro_rules!)\b", line):
                first_item = first_item or lineno
            elif re.match(r"^(pub(\([^)]*\))?\s+)?mod\s+" + IDENT + r"\s*;", line) and first_item:
                self.late_mods.append(f"{file}:{lineno}: `mod` declared after the first item (line {first_item})")

    def collect(self, module: Module, own: str, base_line: int) -> None:
        def line_of(pos: int) -> int:
            return base_line + own.count("\n", 0, pos)

        depth = [0] * (len(own) + 1)
        d = 0
        for k, ch in enumerate(own):
            depth[k] = d
            if ch == "{":
                d += 1
            elif ch == "}":
                d -= 1
        use_spans = []
        for m in re.finditer(r"\buse\s+([^;]+);", own):
            use_spans.append((m.start(), m.end()))
            for segs, alias in expand_use_tree(m.group(1)):
                if not segs:
                    continue
                if segs[-1] == "*":
                    if depth[m.start()] == 0:
                        module.globs.append(segs[:-1])
                    if not module.is_test:
                        self.globs_outside_tests.append(f"{module.file}:{line_of(m.start())}: glob import `{'::'.join(segs)}`")
                    module.refs.append((segs[:-1], line_of(m.start())))
                    continue
                name = alias or (segs[-2] if segs[-1] == "self" else segs[-1])
                target = segs[:-1] if segs[-1] == "self" else segs
                if depth[m.start()] == 0 and name != "_":
                    module.aliases[name] = target
                module.refs.append((target, line_of(m.start())))
        for m in re.finditer(r"(?:^|[^A-Za-z0-9_:])((?:crate|super|self)(?:::" + IDENT + r")+)", own):
            if any(a <= m.start(1) < b for a, b in use_spans):
                continue
            module.refs.append((tuple(m.group(1).split("::")), line_of(m.start(1))))
        for m in re.finditer(r"\b" + ITEM_KEYWORDS + r"\s+(" + IDENT + r")", own):
            if depth[m.start()] == 0:
                module.defs.add(m.group(1).removeprefix("r#"))
        for m in re.finditer(r"\bmacro_rules!\s*(" + IDENT + r")", own):
            module.defs.add(m.group(1))

    def resolve(self, segs: tuple[str, ...], here: tuple[str, ...], seen=None) -> tuple[str, ...] | None:
        """The module that defines what `segs` names, seen from module `here`; None if outside the crate."""
        seen = seen or set()
        key = (segs, here)
        if key in seen or len(seen) > 50:
            return None
        seen.add(key)
        first, rest = segs[0], list(segs[1:])
        if first == "crate":
            current = ()
        elif first == "self":
            current = here
        elif first == "super":
            current = here[:-1]
            while rest and rest[0] == "super":
                current, rest = current[:-1], rest[1:]
        else:
            module = self.modules.get(here)
            if module is None:
                return None
            if first in module.children:
                current = module.children[first]
            elif first in module.aliases:
                target = self.resolve(module.aliases[first], here, seen)
                if target is None:
                    return None
                current = target
            else:
                return None  # an external crate or a prelude name
        while rest:
            module = self.modules.get(current)
            if module is None:
                return current
            seg = rest.pop(0)
            if seg in module.children:
                current = module.children[seg]
            elif seg in module.aliases:
                target = self.resolve(module.aliases[seg], current, seen)
                if target is None:
                    return current
                current = target
            elif seg in module.defs:
                return current
            else:
                for glob in module.globs:
                    target = self.resolve(glob + (seg,) + tuple(rest), current, seen)
                    if target is not None:
                        return target
                return current
        return current

    def circles(self) -> list[str]:
        edges: dict[tuple, dict[tuple, tuple[Path, int]]] = {}
        for path, module in self.modules.items():
            if module.is_test:
                continue
            for segs, line in module.refs:
                target = self.resolve(segs, path)
                if target is None or target == path or self.modules.get(target, None) is None:
                    continue
                if self.modules[target].is_test:
                    continue
                edges.setdefault(path, {}).setdefault(target, (module.file, line))
        found = []
        for parent, module in self.modules.items():
            if module.is_test or len(module.children) < 2:
                continue
            n = len(parent)
            graph: dict[str, dict[str, tuple[Path, int]]] = {}
            for src, targets in edges.items():
                if len(src) <= n or src[:n] != parent:
                    continue
                for dst, where in targets.items():
                    if len(dst) <= n or dst[:n] != parent or dst[n] == src[n]:
                        continue
                    graph.setdefault(src[n], {}).setdefault(dst[n], where)
            for scc in strongly_connected(graph):
                if len(scc) < 2:
                    continue
                scope = "::".join(("crate",) + parent)
                lines = [f"{self.name}: import circle among the children of `{scope}`: {', '.join(sorted(scc))}"]
                for a in sorted(scc):
                    for b, (file, line) in sorted(graph.get(a, {}).items()):
                        if b in scc:
                            lines.append(f"    {a} -> {b}   e.g. {file}:{line}")
                found.append("\n".join(lines))
        return found


def strongly_connected(graph: dict[str, dict[str, object]]) -> list[set[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[set[str]] = []
    counter = [0]
    nodes = set(graph) | {b for targets in graph.values() for b in targets}

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.add(w)
                if w == v:
                    break
            result.append(scc)

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return result


def crate_roots(package_dir: Path) -> list[tuple[str, Path]]:
    src = package_dir / "src"
    roots = []
    for candidate in (src / "lib.rs", src / "main.rs"):
        if candidate.exists():
            roots.append((candidate.stem, candidate))
    bin_dir = src / "bin"
    if bin_dir.is_dir():
        for entry in sorted(bin_dir.iterdir()):
            if entry.suffix == ".rs":
                roots.append((f"bin/{entry.stem}", entry))
            elif (entry / "main.rs").exists():
                roots.append((f"bin/{entry.name}", entry / "main.rs"))
    return roots


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    workspace = tomllib.loads((root / "Cargo.toml").read_text())
    packages: list[Path] = []
    for pattern in workspace["workspace"]["members"]:
        packages.extend(p for p in sorted(root.glob(pattern)) if (p / "Cargo.toml").exists())
    problems: list[str] = []
    for package in packages:
        manifest = tomllib.loads((package / "Cargo.toml").read_text())
        name = manifest["package"]["name"]
        for section in ("dependencies", "dev-dependencies", "build-dependencies"):
            for dep in manifest.get(section, {}):
                if dep in DRIVER_CRATES and dep != name:
                    problems.append(f"{package.relative_to(root)}/Cargo.toml: [{section}] names the driver crate `{dep}`; "
                                    "only that driver's own binary and tests may depend on it")
        for file in sorted(package.rglob("*.rs")):
            if "target" in file.relative_to(package).parts:
                continue
            count = file.read_text(encoding="utf-8").count("\n")
            if count > MAX_LINES:
                problems.append(f"{file.relative_to(root)}: {count} lines (at most {MAX_LINES})")
        for label, root_file in crate_roots(package):
            crate = Crate(f"{name} ({label})", root_file)
            problems.extend(crate.circles())
            problems.extend(crate.globs_outside_tests)
            problems.extend(crate.late_mods)
    problems = [p.replace(str(root) + "/", "") for p in dict.fromkeys(problems)]
    for problem in problems:
        print(problem)
    if problems:
        print(f"\n{len(problems)} structure problem(s)", file=sys.stderr)
        return 1
    print("structure: no import circle, no file over 700 lines, mods at the top, no glob import "
          "outside tests, no dependency on a driver crate", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
