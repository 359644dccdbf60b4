#!/usr/bin/env python3
"""structure_limits.py ROOT: the house's size and layering limits, checked.

Every C, CUDA and header file under launcher/, worker/ and common/ has at
most 700 lines; every function at most 120; and no two folders include each
other's headers, directly or round a longer circle (a folder is where a
file lives; a quoted #include names a header that lives in one place).
Prints each breach and exits 1, or says what it checked and exits 0.
"""
import os
import re
import sys
from collections import defaultdict

MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 120
PRODUCT = ("launcher", "worker", "common")
SOURCE = (".c", ".h", ".cu")


def product_files(root):
    for top in PRODUCT:
        for d, _, names in os.walk(os.path.join(root, top)):
            for n in sorted(names):
                if n.endswith(SOURCE):
                    yield os.path.join(d, n)


def code_only(text):
    """The text with comments, strings and character literals blanked
    (newlines kept), and preprocessor lines (with continuations) emptied."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    lines = "".join(out).split("\n")
    in_macro = False
    for k, line in enumerate(lines):
        if in_macro or line.lstrip().startswith("#"):
            in_macro = line.rstrip().endswith("\\")
            lines[k] = ""
    return lines


def long_functions(path):
    """(name, first line, length) of each function definition longer than the
    limit, counted from the line of its name to its closing brace."""
    lines = code_only(open(path, encoding="utf-8", errors="replace").read())
    found, depth, start, name, signature = [], 0, None, None, ""
    for k, line in enumerate(lines):
        for c in line:
            if c == "{":
                if depth == 0:
                    m = re.search(r"(\w+)\s*\([^;=]*\)\s*(const\s*)?$", signature.strip())
                    if m and "=" not in signature.split("(")[0]:
                        name = m.group(1)
                        # A definition's length runs from its name's line.
                        start = next(j for j in range(k, -1, -1)
                                     if re.search(r"\b%s\s*\(" % name, lines[j]))
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0 and start is not None:
                    length = k - start + 1
                    if length > MAX_FUNCTION_LINES:
                        found.append((name, start + 1, length))
                    start = None
                if depth == 0:
                    signature = ""
            elif c == ";" and depth == 0:
                signature = ""
            elif depth == 0:
                signature += c
        if depth == 0:
            signature += "\n"
            signature = "\n".join(signature.split("\n")[-6:])  # a signature spans a few lines
    return found


def folder_cycles(root, files):
    where = defaultdict(set)  # header name -> folders that hold one
    for f in files:
        if f.endswith(".h"):
            where[os.path.basename(f)].add(os.path.dirname(f))
    edges = defaultdict(set)
    for f in files:
        here = os.path.dirname(f)
        for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', open(f, encoding="utf-8").read(), re.M):
            folders = where.get(os.path.basename(m.group(1)), set())
            if len(folders) == 1:
                there = next(iter(folders))
                if there != here:
                    edges[here].add(there)
    # Tarjan's strongly connected components: each with more than one folder is a circle.
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    rel = lambda p: os.path.relpath(p, root)
    return [[rel(c) for c in comp] for comp in comps], edges


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    files = list(product_files(root))
    if not files:
        print(f"structure_limits: no sources under {root}/{{{','.join(PRODUCT)}}}", file=sys.stderr)
        return 2
    breaches = []
    for f in files:
        rel = os.path.relpath(f, root)
        n = sum(1 for _ in open(f, encoding="utf-8", errors="replace"))
        if n > MAX_FILE_LINES:
            breaches.append(f"{rel}: {n} lines (limit {MAX_FILE_LINES})")
        for name, line, length in long_functions(f):
            breaches.append(f"{rel}:{line}: {name} is {length} lines (limit {MAX_FUNCTION_LINES})")
    cycles, edges = folder_cycles(root, files)
    for comp in cycles:
        breaches.append("folders include each other: " + " <-> ".join(comp))
    for b in breaches:
        print("structure_limits: " + b)
    if breaches:
        return 1
    folders = len({os.path.dirname(f) for f in files})
    print(f"structure_limits: {len(files)} files in {folders} folders: none over {MAX_FILE_LINES} "
          f"lines, no function over {MAX_FUNCTION_LINES}, no circle of folders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
