"""README's "How it is built" tree is the package: every module of every layer folder is listed
under its folder, and nothing listed is missing."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "course_lib"


def readme_tree() -> dict[str, set[str]]:
    """Folder (relative to course_lib, '' for the package itself) -> the module names listed under it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## How it is built", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    tree: dict[str, set[str]] = {}
    folder = None
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        words = line.split()
        if not words:
            continue
        if indent == 0:
            folder = "" if words[0] == "course_lib/" else None
            continue
        if folder is None:
            continue
        if indent == 2:
            if words[0].endswith("/"):
                folder = words[0].rstrip("/")
            else:   # entry-point modules, "name.py" at the package's top
                folder = ""
                tree.setdefault("", set()).update(w[:-3] for w in words if w.endswith(".py"))
            continue
        if indent == 4 and words[0].endswith("/"):
            folder = folder.split("/")[0] + "/" + words[0].rstrip("/")
            continue
        if folder in ("", "kernels") or indent > 4 + 2 * folder.count("/"):
            continue
        described = re.match(r"\s*(\w+)\s{2,}\S", line)
        names = {described.group(1)} if described else set(words)
        tree.setdefault(folder, set()).update(names)
    return tree


def package_tree() -> dict[str, set[str]]:
    tree: dict[str, set[str]] = {"": {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}}
    for init in PACKAGE.rglob("__init__.py"):
        folder = init.parent.relative_to(PACKAGE).as_posix()
        if folder != ".":
            tree[folder] = {p.stem for p in init.parent.glob("*.py") if p.stem != "__init__"}
    return tree


def test_the_readme_lists_every_module_under_its_layer_and_no_other():
    listed, real = readme_tree(), package_tree()
    assert set(listed) == set(real), f"folders: README {sorted(listed)} vs package {sorted(real)}"
    for folder in real:
        assert listed[folder] == real[folder], (
            f"course_lib/{folder}: missing from README {sorted(real[folder] - listed[folder])}, "
            f"listed but absent {sorted(listed[folder] - real[folder])}")


def test_a_module_missing_from_the_readme_is_caught(tmp_path, monkeypatch):
    assert "fusion" in readme_tree()["models"]
    real = package_tree()
    real["models"].add("a_new_model")
    assert real["models"] != readme_tree()["models"]
