#!/usr/bin/env python3
"""Lists hand-written C++ source files over 600 lines and functions over 80 lines.

Usage: scripts/check-size.py [FILE...]   (default: every C++ file git tracks or would track)
Exit status: 0 when nothing is found, 1 otherwise.

Long files and functions are hard to read and review; both limits are soft, so a function may
stay long when the comment just above its signature contains `long:` and the reason, e.g.
`// long: one table of every key; split, it would lose their order`. Files that
begin with a "Generated" or "Do not edit" comment are skipped.

The function finder is a heuristic, not a parser: it strips comments, strings and preprocessor
lines, matches braces, and counts a brace block as a function when it opens at namespace or
class scope after a closing parenthesis (optionally followed by qualifiers such as `const`,
`override`, `noexcept` or a trailing return type). Lambdas and blocks inside a function belong
to that function. gtest's TEST/TEST_F bodies count as functions.
"""

import re
import subprocess
import sys
from pathlib import Path

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
CXX_SUFFIXES = (".cc", ".h", ".cu", ".cpp", ".hpp", ".cuh", ".inc")
GENERATED = re.compile(r"^\s*//\s*(generated\b|do not edit)", re.IGNORECASE)
EXEMPT_MARK = re.compile(r"//.*\blong:\s*\S")

# Files left out of the check, each with the reason (none at present).
EXEMPT_FILES: dict = {}

_QUALIFIERS = re.compile(
    r"^(\s|const\b|noexcept\b|override\b|final\b|mutable\b|volatile\b|&|"
    r"->\s*[\w:<>,*&\s]+)*$"
)
_CTOR_INIT = re.compile(r"\)\s*:(?!:)")
_TYPE_START = re.compile(r"^(template\s*<.*>\s*)?(class|struct|union|enum)\b")
_OPERATOR = re.compile(r"operator\s*[^\s(]+")
_CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else|return)\b")


def strip(text):
    """Blanks comments, string and character literals and preprocessor lines, keeping newlines."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":
            # A directive, with its backslash continuations.
            while i < n and not (text[i] == "\n" and text[i - 1] != "\\"):
                out.append("\n" if text[i] == "\n" else " ")
                i += 1
            continue
        if c == "\n":
            out.append(c)
            line_start = True
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.extend("\n" if ch == "\n" else " " for ch in text[i:end])
            i = end
            continue
        raw = re.match(r'R"([^(\s]{0,16})\(', text[i:i + 20])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find(")" + raw.group(1) + '"', i)
            end = n if end < 0 else end + len(raw.group(1)) + 2
            out.extend("\n" if ch == "\n" else " " for ch in text[i:end])
            i = end
            continue
        if c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():
                out.append(" ")  # a digit separator: 1'000'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n - 1) - i - 1) + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def functions(text):
    """Yields (first line, last line, name) of each function body in C++ source `text`."""
    code = strip(text)
    stack = []  # kinds of the open braces: ns, class, func, other
    statement = []  # (line, char) since the last statement boundary at this scope
    line = 1
    func_start = None
    for ch in code:
        if ch == "\n":
            line += 1
        scope = stack[-1] if stack else "ns"
        in_body = "func" in stack
        if ch == "{" and not in_body:
            kind = classify("".join(c for _, c in statement), scope)
            if kind == "func":
                func_start = next((ln for ln, c in statement if not c.isspace()), line)
                name = function_name("".join(c for _, c in statement))
            stack.append(kind)
            if kind != "other":
                statement = []
            else:
                statement.append((line, "{"))
            continue
        if ch == "{":
            stack.append("other")
            continue
        if ch == "}":
            kind = stack.pop() if stack else "ns"
            if kind == "func" and "func" not in stack:
                yield func_start, line, name
                statement = []
            elif kind == "other" and not in_body:
                statement.append((line, "}"))
            elif kind in ("ns", "class"):
                statement = []
            continue
        if in_body:
            continue
        if ch == ";":
            statement = []
            continue
        statement.append((line, ch))


def classify(statement, scope):
    """What the brace that ends `statement` opens, at namespace or class scope."""
    if scope not in ("ns", "class"):
        return "other"
    s = " ".join(statement.split())
    if re.search(r"\bnamespace\b", s) or re.match(r'^extern\s*"\s*"$', s):
        return "ns"
    if _TYPE_START.match(s):
        return "class"
    if ")" in s:
        head = _OPERATOR.sub("", s[:s.find("(")])
        if "=" in head or _CONTROL.match(s):
            return "other"
        if _QUALIFIERS.match(s[s.rfind(")") + 1:]):
            return "func"
        if _CTOR_INIT.search(s):
            # A constructor's initialiser list: a brace after a member's name initialises it;
            # one after a closing bracket opens the body.
            return "other" if re.search(r"[\w>]$", s) else "func"
    return "other"


def function_name(statement):
    s = " ".join(statement.split())
    m = re.search(r"([~\w:]+(?:<[^()]*>)?|operator\s*\S+)\s*\(", s)
    if m and m.group(1) in ("TEST", "TEST_F", "TEST_P", "TYPED_TEST"):
        args = s[m.end():s.find(")", m.end())]
        return m.group(1) + "(" + args.strip() + ")"
    return m.group(1) if m else s[:40]


def exempt(lines, first):
    """True when the comment just above line `first` (1-based) says `long:` and why.

    The mark may open a comment of several lines: the block of `//` lines ending right above the
    signature is searched."""
    i = first - 2
    while i >= 0 and lines[i].lstrip().startswith("//"):
        if EXEMPT_MARK.search(lines[i]):
            return True
        i -= 1
    return False


def tracked_files(root):
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root, check=True, capture_output=True,
                         text=True).stdout.split("\n")
    return [f for f in out if f.endswith(CXX_SUFFIXES)]


def check(root, files):
    findings = []
    for rel in files:
        if rel in EXEMPT_FILES:
            continue
        path = root / rel
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            findings.append(f"{rel}: cannot read: {e}")
            continue
        lines = text.split("\n")
        if any(GENERATED.match(l) for l in lines[:5]):
            continue
        count = len(lines) - (1 if text.endswith("\n") else 0)
        if count > MAX_FILE_LINES:
            findings.append(f"{rel}: {count} lines (more than {MAX_FILE_LINES})")
        for first, last, name in functions(text):
            length = last - first + 1
            if length > MAX_FUNCTION_LINES and not exempt(lines, first):
                findings.append(f"{rel}:{first}: {name}: {length} lines "
                                f"(more than {MAX_FUNCTION_LINES}; or say why above it with "
                                f"'// long: ...')")
    return findings


def main(argv):
    root = Path(__file__).resolve().parent.parent
    files = argv[1:] or tracked_files(root)
    findings = check(root, files)
    for f in findings:
        print(f"check-size: {f}")
    if findings:
        print(f"check-size: {len(findings)} finding(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
