"""test_packaging.py — `pip install ./python` ships every subpackage of python/fco: the packages
listed in python/pyproject.toml are exactly the directories with an __init__.py (a missing entry,
as fco.triton once was, installs a package whose imports fail only after installation)."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_pyproject_lists_every_subpackage():
    text = (ROOT / "python" / "pyproject.toml").read_text()
    m = re.search(r"^packages\s*=\s*\[([^\]]*)\]", text, re.M)
    assert m, "no packages = [...] in python/pyproject.toml"
    listed = set(re.findall(r'"([^"]+)"', m.group(1)))
    base = ROOT / "python"
    found = {".".join(p.parent.relative_to(base).parts)
             for p in (base / "fco").rglob("__init__.py") if "__pycache__" not in p.parts}
    assert listed == found, f"pyproject lists {sorted(listed)}, the tree has {sorted(found)}"
