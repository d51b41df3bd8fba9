"""test_docs.py — the docs keep up with the code's environment knobs: every FCO_* name the
library, the tools or the Python package read (a quoted "FCO_..." literal in src/, tools/,
python/fco/) is named in README.md, docs/*.md or a tool's README (a knob that works but is
documented nowhere cannot be found by a user); and every FCO_* name those user-facing docs give
exists somewhere in the code, tests, benches or build files (a knob that was removed must leave
the docs too). The *_history.md files record removed knobs on purpose and are not checked in
that direction."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAME = re.compile(r"\bFCO_[A-Z0-9_]*[A-Z0-9]\b")


def _files(*globs):
    out = []
    for g in globs:
        out += [p for p in ROOT.glob(g) if p.is_file() and "__pycache__" not in p.parts]
    return out


def _names(paths, pattern):
    found = {}
    for p in paths:
        for m in pattern.finditer(p.read_text(errors="replace")):
            found.setdefault(m.group(1) if m.groups() else m.group(0), p)
    return found


def _docs():
    return _files("README.md", "docs/*.md", "tools/*/README.md", "python/*.md")


def test_every_knob_the_code_reads_is_documented():
    code = _files("src/**/*.c", "src/**/*.h", "src/**/*.cu", "src/**/*.cuh", "tools/**/*.c",
                  "tools/**/*.h", "tools/**/*.py", "python/fco/**/*.py")
    assert code, "no sources found"
    read = _names(code, re.compile(r'"(FCO_[A-Z0-9_]*[A-Z0-9])"'))
    assert len(read) > 40, f"only {len(read)} knob names found: the pattern no longer matches"
    documented = set(_names(_docs(), NAME))
    missing = sorted(f"{k} ({read[k].relative_to(ROOT)})" for k in read if k not in documented)
    assert not missing, "knobs read by the code but named in no doc: " + ", ".join(missing)


def test_every_knob_the_docs_name_exists():
    docs = [p for p in _docs() if not p.name.endswith("_history.md")]
    named = _names(docs, NAME)
    code = _files("src/**/*", "include/**/*", "python/**/*.py", "tools/**/*", "tests/**/*",
                  "bench/**/*.py", "bench/**/*.sh", "bench/**/*.cu", "examples/**/*", "Makefile",
                  ".ci/*")
    text = "\n".join(p.read_text(errors="replace") for p in code
                     if p.suffix not in (".so", ".o", ".a", ".pyc", ".json"))
    present = set(NAME.findall(text))
    # names the docs give as families (e.g. "FCO_GEMV_*") end at the underscore: NAME skips them
    stale = sorted(f"{k} ({named[k].relative_to(ROOT)})" for k in named if k not in present)
    assert not stale, "knobs the docs name but no code reads or defines: " + ", ".join(stale)
