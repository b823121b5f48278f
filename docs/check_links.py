#!/usr/bin/env python3
"""Checks that every relative link in the project's Markdown resolves.

For README.md, docs/**/*.md, bench/**/*.md and tests/**/*.md: each inline link or image
`[text](target)` whose target is not a URL must name an existing file or
directory (relative to the Markdown file), and a `#anchor` (alone or after a
.md file) must be a heading of that file, spelled as GitHub makes anchors.
Links inside fenced code blocks and inline code are ignored. Prints every
broken link with its file and line, and exits 1 if there is any.

    python3 docs/check_links.py [REPO_ROOT]
"""
import os
import re
import sys

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def markdown_files(root):
    files = [os.path.join(root, "README.md")]
    for top in ("docs", "bench", "tests"):
        for folder, dirs, names in os.walk(os.path.join(root, top)):
            dirs[:] = [d for d in dirs if d not in ("node_modules", ".git")]
            files += [os.path.join(folder, n) for n in names if n.endswith(".md")]
    return sorted(f for f in files if os.path.isfile(f))


def prose_lines(path):
    """(line number, text) of the lines outside fenced code, inline code removed."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield number, re.sub(r"`[^`]*`", "", line)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"`", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading keeps its text
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, found = {}, set()
        fenced = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if FENCE.match(line):
                    fenced = not fenced
                    continue
                m = None if fenced else HEADING.match(line)
                if m:
                    base = slug(m.group(2))
                    n = seen.get(base, 0)
                    seen[base] = n + 1
                    found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def broken_links(root):
    for path in markdown_files(root):
        for number, line in prose_lines(path):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                    continue  # http:, https:, mailto: ...
                file_part, _, anchor = target.partition("#")
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                where = f"{os.path.relpath(path, root)}:{number}"
                if not os.path.exists(resolved):
                    yield f"{where}: {target}: no such file {os.path.relpath(resolved, root)}"
                elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                    yield f"{where}: {target}: no heading #{anchor} in {os.path.relpath(resolved, root)}"


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    broken = list(broken_links(root))
    for b in broken:
        print(b)
    print(f"{len(markdown_files(root))} Markdown files, {len(broken)} broken links")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
