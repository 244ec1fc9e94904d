#!/usr/bin/env bash
# The header lint: checks every include/tcuda/*.h against the API grammar of
# docs/conventions.md and prints each breach as "file:line: rule: what".
# Usage: scripts/check_api.sh [HEADER...]   (default: every public header)
#
# Rules (a name in brackets is the rule's name in the output):
#   [first-line]  the first line starts "/* tcuda: "
#   [guard]       an include guard (#ifndef X / #define X ... #endif)
#   [extern-c]    TCUDA_EXTERN_C_BEGIN and _END around the declarations
#   [api]         every function declaration is TCUDA_API
#   [name]        functions are tc_ + lowercase; types too (tc_DL*: DLPack's
#                 CamelCase, as the specification spells it)
#   [struct-tag]  no bare `struct tc_X` outside X's own definition
#   [typedef]     every struct or enum definition is a typedef of its own name
#   [anon-enum]   no anonymous enum
#   [enum-prefix] the values of tc_foo_bar start TC_FOO_BAR_ (tc_status,
#                 tc_dtype and tc_device_type keep PyTorch's short names;
#                 tc_DL* types use TC_DL_; ENUM_PREFIX below lists the others)
#   [lifecycle]   tc_X_create has a tc_X_destroy and back (MIRRORS below lists
#                 the torch mirrors that create under torch's name); no
#                 _release but tc_tensor_release
#   [out-last]    nothing but pointers after a parameter named out, n_out or
#                 *_out
#   [count]       a count (n, n_*, count, capacity) follows the array it
#                 counts (a pointer, or another count of the same array) and
#                 is an int; after a void * or char * buffer it is a size_t
#                 (bytes or elements of memory)
#   [cannot-fail] a function that returns neither tc_status, void nor a guard
#                 says "cannot fail", "never fails" or "never NULL" in the
#                 comment above it, or in its section's opening comment
#   [callback]    function-pointer typedefs are tc_*_fn and take `void *ctx`
#                 last (tc_alloc_fn and tc_free_fn: PyTorch's pluggable
#                 allocator ABI, no ctx)
#   [comment]     a comment above each function (directly, or above the group
#                 of declarations it belongs to)
#   [reference]   no mention of documents outside the repository
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
  set -- include/tcuda/*.h
fi
exec python3 - "$@" <<'PY'
import re
import sys

# tc_X_destroy whose handle a torch mirror makes under torch's own name.
MIRRORS = {
    "tc_graphed_callable_destroy": "tc_make_graphed_callable(s), torch.cuda.make_graphed_callables",
    "tc_memory_snapshot_destroy": "tc_memory_snapshot, torch.cuda.memory_snapshot",
    "tc_work_destroy": "the tc_dist_* collectives' out, torch.distributed's Work",
}
SHORT_ENUMS = {"tc_status", "tc_dtype", "tc_device_type"}
# Enums whose values take a shorter prefix than the type: tc_sanitizer_access
# is the function that takes the kind, so the type cannot have that name.
ENUM_PREFIX = {"tc_sanitizer_access_kind": "TC_SANITIZER_ACCESS_"}
NO_CTX_CALLBACKS = {"tc_alloc_fn", "tc_free_fn"}
COUNT = re.compile(r"^(n|n_\w+|count|capacity)$")
OUT = re.compile(r"^(out|n_out|\w+_out)$")
CANNOT_FAIL = re.compile(r"cannot fail|never fails|never null", re.I)
OUTSIDE = re.compile(r"API\.md|CONVENTIONS\.md|the seed\b")

problems = []
functions = {}


def report(path, line, rule, what):
    problems.append(f"{path}:{line}: {rule}: {what}")


def strip_comments(text):
    """Comments become spaces (newlines kept); also returns, per line, the
    text of the comment that ends on it (for comment-only lines)."""
    out, comments, i = [], {}, 0
    while i < len(text):
        if text.startswith("/*", i):
            j = text.index("*/", i) + 2
            body = text[i:j]
            comments[text.count("\n", 0, j) + 1] = body
            out.append(re.sub(r"[^\n]", " ", body))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = len(text) if j < 0 else j
            out.append(" " * (j - i))
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out), comments


def split_params(params):
    parts, depth, cur = [], 0, ""
    for c in params:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip() and cur.strip() != "void":
        parts.append(cur.strip())
    return parts


def param_name(p):
    m = re.search(r"(\w+)\s*(\[[^\]]*\])?$", p)
    return m.group(1) if m else ""


def statements(code):
    """Top-level statements as (first line, text), split at ';' outside
    braces and parentheses; preprocessor lines and the extern-C macros are
    not statements."""
    lines = code.split("\n")
    kept = []
    for ln in lines:
        s = ln.strip()
        if s.startswith("#") or s in ("TCUDA_EXTERN_C_BEGIN", "TCUDA_EXTERN_C_END"):
            kept.append("")
        else:
            kept.append(ln)
    text = "\n".join(kept)
    depth, start, out = 0, 0, []
    for i, c in enumerate(text):
        if c in "{(":
            depth += 1
        elif c in "})":
            depth -= 1
        elif c == ";" and depth == 0:
            chunk = text[start:i]
            stripped = chunk.lstrip()
            if stripped:
                first = text.count("\n", 0, start + len(chunk) - len(stripped)) + 1
                out.append((first, " ".join(stripped.split())))
            start = i + 1
    return out


def line_kinds(raw_lines, code_lines):
    kinds = []
    for raw, code in zip(raw_lines, code_lines):
        if code.strip().startswith("#define"):
            kinds.append("code")  # a constant declared with its functions
        elif code.strip():
            kinds.append("pre" if code.strip().startswith("#") else "code")
        elif raw.strip():
            kinds.append("comment")
        else:
            kinds.append("blank")
    return kinds


def comment_above(line, kinds, comments):
    """The comment that ends right above the group of code lines holding
    `line` (1-based), or None."""
    i = line - 2
    while i >= 0 and kinds[i] == "code":
        i -= 1
    if i >= 0 and kinds[i] == "comment":
        return comments.get(i + 1, "")
    return None


def check_header(path):
    text = open(path, encoding="utf-8").read()
    raw_lines = text.split("\n")
    code, comments = strip_comments(text)
    code_lines = code.split("\n")
    kinds = line_kinds(raw_lines, code_lines)

    if not raw_lines[0].startswith("/* tcuda: "):
        report(path, 1, "first-line", 'the first line does not start "/* tcuda: "')
    for n, ln in enumerate(raw_lines, 1):
        m = OUTSIDE.search(ln)
        if m:
            report(path, n, "reference", f"mentions {m.group(0)!r}, which is not in the repository")

    pre = [(n, ln.strip()) for n, ln in enumerate(code_lines, 1) if ln.strip().startswith("#")]
    g = re.match(r"#ifndef (\w+)$", pre[0][1]) if pre else None
    if not g or len(pre) < 2 or pre[1][1] != f"#define {g.group(1)}" or pre[-1][1] != "#endif":
        report(path, pre[0][0] if pre else 1, "guard", "no include guard around the whole header")

    stmts = statements(code)
    declares = any(s.startswith(("TCUDA_API", "typedef")) for _, s in stmts)
    if declares and not path.endswith("/export.h"):
        for macro in ("TCUDA_EXTERN_C_BEGIN", "TCUDA_EXTERN_C_END"):
            if not any(ln.strip() == macro for ln in code_lines):
                report(path, 1, "extern-c", f"no {macro}")

    # the section opening comments: "/* ---- x ---- */" and a comment right after it
    section_at = {}
    section = ""
    for n in range(1, len(raw_lines) + 1):
        body = comments.get(n)
        if body is not None and kinds[n - 1] == "comment":
            if re.match(r"/\*\s*----", body):
                section = body
            elif section and section_at.get(n - body.count("\n") - 1) == section:
                section += body  # the paragraph that opens the section
        section_at[n] = section

    for m in re.finditer(r"\benum\s*\{", code):
        report(path, code.count("\n", 0, m.start()) + 1, "anon-enum", "an anonymous enum")
    for m in re.finditer(r"(?<!typedef )\b(struct|enum)\s+(tc_\w+)\s*\{", code):
        report(path, code.count("\n", 0, m.start()) + 1, "typedef",
               f"{m.group(1)} {m.group(2)} is defined without a typedef")

    for line, s in stmts:
        check_statement(path, line, s, kinds, comments, section_at)


def check_type_name(path, line, name):
    if not (re.match(r"^tc_[a-z0-9_]+$", name) or re.match(r"^tc_DL[A-Za-z]+$", name)):
        report(path, line, "name", f"type {name} is not tc_ + lowercase")


def check_statement(path, line, s, kinds, comments, section_at):
    m = re.match(r"^typedef (struct|enum) (\w+) \{(.*)\} (\w+)$", s)
    if m:
        kind, tag, body, name = m.groups()
        if tag != name:
            report(path, line, "typedef", f"typedef {kind} {tag} is named {name}")
        check_type_name(path, line, name)
        for b in re.finditer(r"\bstruct (tc_\w+)", body):
            if b.group(1) != tag:
                report(path, line, "struct-tag", f"bare struct {b.group(1)} in {name}")
        if kind == "enum":
            check_enum(path, line, name, body)
        return
    m = re.match(r"^typedef struct (\w+) (\w+)$", s)
    if m:
        if m.group(1) != m.group(2):
            report(path, line, "typedef", f"typedef struct {m.group(1)} is named {m.group(2)}")
        check_type_name(path, line, m.group(2))
        return
    m = re.match(r"^typedef .*\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)$", s)
    if m:
        name, params = m.groups()
        if not re.match(r"^tc_\w+_fn$", name):
            report(path, line, "callback", f"function-pointer typedef {name} is not tc_*_fn")
        ps = split_params(params)
        if name not in NO_CTX_CALLBACKS and (not ps or not re.match(r"^void \*\s*ctx$", ps[-1])):
            report(path, line, "callback", f"{name} does not take `void *ctx` last")
        if comment_above(line, kinds, comments) is None:
            report(path, line, "comment", f"no comment above {name}")
        return
    for b in re.finditer(r"\bstruct (tc_\w+)", s):
        report(path, line, "struct-tag", f"bare struct {b.group(1)}")
    m = re.match(r"^(TCUDA_API\s+)?(.*?)\b(\w+)\s*\((.*)\)$", s)
    if not m or s.startswith("typedef"):
        return
    api, ret, name, params = m.groups()
    ret = ret.strip()
    if not ret:
        return
    if not api:
        report(path, line, "api", f"{name} is not declared TCUDA_API")
    if not re.match(r"^tc_[a-z0-9_]+$", name):
        report(path, line, "name", f"function {name} is not tc_ + lowercase")
    functions[name] = (path, line)
    ps = split_params(params)
    check_params(path, line, name, ps)
    above = comment_above(line, kinds, comments)
    if above is None:
        report(path, line, "comment", f"no comment above {name}")
    if ret not in ("tc_status", "void") and not ret.endswith("_guard"):
        said = " ".join(((above or "") + section_at.get(line, "")).replace("*", " ").split())
        if not CANNOT_FAIL.search(said):
            report(path, line, "cannot-fail",
                   f"{name} returns {ret}, not tc_status, and its comment does not say it "
                   "cannot fail")


def check_enum(path, line, name, body):
    values = [v.split("=")[0].strip() for v in body.split(",") if v.strip()]
    if name in SHORT_ENUMS:
        return
    prefix = "TC_DL_" if name.startswith("tc_DL") else name.upper() + "_"
    prefix = ENUM_PREFIX.get(name, prefix)
    for v in values:
        if not v.startswith(prefix):
            report(path, line, "enum-prefix", f"{name} value {v} does not start {prefix}")


def check_params(path, line, name, ps):
    seen_out = None
    prev = None
    for p in ps:
        pname = param_name(p)
        pointer = "*" in p
        if seen_out and not pointer:
            report(path, line, "out-last", f"{name}: {pname} comes after the out-parameter {seen_out}")
        if OUT.match(pname) and not seen_out:
            seen_out = pname
        if COUNT.match(pname) and not pointer:
            ptype = p[: p.rfind(pname)].strip()
            after_buffer = prev is not None and re.match(r"^(const )?(void|char) \*\s*\w+$", prev)
            follows = prev is not None and ("*" in prev or COUNT.match(param_name(prev)))
            if not follows:
                report(path, line, "count", f"{name}: the count {pname} does not follow its array")
            elif after_buffer and ptype != "size_t":
                report(path, line, "count", f"{name}: {pname} counts memory, so is a size_t")
            elif not after_buffer and ptype != "int":
                report(path, line, "count", f"{name}: {pname} counts objects, so is an int")
        prev = p


def check_lifecycle():
    for name, (path, line) in functions.items():
        if name.endswith("_release") and name != "tc_tensor_release":
            report(path, line, "lifecycle", f"{name}: release drops a reference; say destroy")
        m = re.match(r"^(tc_\w+?)_create(_\w+)?$", name)
        if m and m.group(1) + "_destroy" not in functions:
            report(path, line, "lifecycle", f"{name} has no {m.group(1)}_destroy")
        m = re.match(r"^(tc_\w+)_destroy$", name)
        if m and name not in MIRRORS:
            made = [f for f in functions if re.match(re.escape(m.group(1)) + r"_create(_\w+)?$", f)]
            if not made:
                report(path, line, "lifecycle", f"{name} has no {m.group(1)}_create")


headers = sys.argv[1:]
for h in headers:
    check_header(h)
check_lifecycle()
for p in problems:
    print(p)
if problems:
    print(f"check_api: {len(problems)} problem(s) in {len(headers)} headers (docs/conventions.md)",
          file=sys.stderr)
    sys.exit(1)
print(f"check_api: {len(headers)} headers, {len(functions)} functions follow docs/conventions.md")
PY
