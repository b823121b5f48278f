#!/usr/bin/env python3
"""Lists the longest C++ functions under the given folders (default: src).

A function is a body whose '{' follows a parameter list at namespace or class
scope; lambdas and local classes count toward the function around them.
Lines are counted from the line of the name to the closing brace.

  scripts/function_lengths.py [--top N] [--max LINES] [DIR ...]

With --max, exits 1 if any function is longer (and lists those).
"""
import argparse
import pathlib
import re
import sys

TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|R"(?P<d>[^(]*)\(.*?\)(?P=d)"|"(?:\\.|[^"\\\n])*"|'
                   r"'(?:\\.|[^'\\\n])*'|[A-Za-z_][A-Za-z_0-9:~]*|\S", re.S)
AFTER_PARAMS = {"const", "override", "final", "noexcept", "mutable", "&", "&&", "->"}


def functions(text):
    """Yields (name, first line, last line) of each top-level function body."""
    tokens = [(m.group(0), text.count("\n", 0, m.start()) + 1) for m in TOKEN.finditer(text)
              if not m.group(0).startswith(("//", "/*"))]
    scopes = []  # 'ns', 'class', 'func', 'other'
    i = 0
    while i < len(tokens):
        tok, line = tokens[i]
        if tok == "{":
            kind = "other"
            inside_func = "func" in scopes
            if not inside_func:
                kind = classify(tokens, i)
                if kind == "func":
                    name, start = function_name(tokens, i)
                    depth, j = 1, i + 1
                    while j < len(tokens) and depth:
                        depth += {"{": 1, "}": -1}.get(tokens[j][0], 0)
                        j += 1
                    yield name, start, tokens[j - 1][1]
                    i = j
                    continue
            scopes.append(kind)
        elif tok == "}" and scopes:
            scopes.pop()
        i += 1


def classify(tokens, i):
    j = i - 1
    # Skip a trailing return type, qualifiers and a member initializer list.
    while j >= 0 and tokens[j][0] in AFTER_PARAMS:
        j -= 1
    prev = tokens[j][0] if j >= 0 else ""
    if prev == ")":
        return "func"
    back = [t for t, _ in tokens[max(0, i - 8):i]]
    if "namespace" in back or (back and back[-1] in ('"C"',)):
        return "ns"
    if any(t in ("class", "struct", "union", "enum") for t in back):
        return "class"
    if ")" in back and "(" in back:
        # `) : member_(x), other_(y) {` or `) -> Type {`
        k = i - 1
        while k >= 0 and tokens[k][0] not in (";", "{", "}"):
            if tokens[k][0] == ":" and k > 0 and tokens[k - 1][0] in {")"} | AFTER_PARAMS:
                return "func"
            k -= 1
    return "other"


def function_name(tokens, i):
    """The name before the parameter list of the body opening at tokens[i]."""
    # The parameter list closes at the ')' before a constructor's
    # initializer list (the first ') :' of the signature), else at the last
    # ')' before the body.
    k = i - 1
    m = i - 1
    while m > 0 and tokens[m][0] not in (";", "{", "}"):
        if tokens[m][0] == ":" and tokens[m - 1][0] in {")"} | AFTER_PARAMS:
            k = m - 1
        m -= 1
    while k >= 0 and tokens[k][0] != ")":
        k -= 1
    depth = 0
    while k >= 0:
        depth += {")": 1, "(": -1}.get(tokens[k][0], 0)
        if depth == 0:
            break
        k -= 1
    return tokens[k - 1] if k > 0 else ("?", tokens[i][1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="*", default=["src"])
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--max", type=int)
    args = parser.parse_args()
    found = []
    for d in args.dirs:
        for path in sorted(pathlib.Path(d).rglob("*")):
            if path.suffix in (".cc", ".h", ".cpp") and not path.name.endswith("_test.cc"):
                for name, first, last in functions(path.read_text(errors="replace")):
                    found.append((last - first + 1, f"{path}:{first}", name))
    found.sort(reverse=True)
    shown = [f for f in found if args.max is None or f[0] > args.max] if args.max else found[:args.top]
    for length, where, name in shown:
        print(f"{length:5d}  {name}  {where}")
    if args.max is not None:
        print(f"{len(shown)} functions longer than {args.max} lines")
        return 1 if shown else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
