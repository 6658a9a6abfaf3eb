"""Course modules import each other at the top of the module (README, "How it is built"), where the
layer contracts (tests/test_layers.py) and a reader see them; only heavy third-party packages (CuPy,
PyTorch, NVRTC's bindings, matplotlib) are imported inside functions, so the package loads without them.
Every ``course_lib/**/*.py`` is parsed: an import of a course module (``course_lib...`` or relative) that is
not a statement of the module's own body fails the test, named by file and line, unless ``ALLOWED`` lists
it with the reason it stays. A listed import that is gone fails too, so the list stays true."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "course_lib"

CASES = ("exercises/kernel/cases.py is left as recorded: its cases functions are hashed into the notebooks' "
         "stored GPU runs (checker.measured_by, stored_run.source_sha16), and the helpers beside them change "
         "only with them, in a new GPU run")
LAUNCH_IN_FLIGHT = ("launch/ is being changed by the CUDA work under way; the import can move to the top (models "
                    "is below launch, and models.waves imports nothing of launch) with that change")

# (module, the function it is in or "<module>", the import as ast.unparse writes it): why it stays there.
ALLOWED = {
    ("exercises/kernel/cases.py", "_warm_up_decode",
     "from course_lib.launch import decode_attention as attention"): CASES,
    ("exercises/kernel/cases.py", "_decode_first_wrong",
     "from course_lib.launch.operands import bf16_bits_to_float32"): CASES,
    ("exercises/kernel/cases.py", "decode_cache_bytes",
     "from course_lib.launch import decode_attention as attention"): CASES,
    ("exercises/kernel/cases.py", "_decode_launch",
     "from course_lib.launch import decode_attention as attention"): CASES,
    ("exercises/kernel/cases.py", "_profile_decode",
     "from course_lib.launch import decode_attention as attention"): CASES,
    ("exercises/kernel/cases.py", "grouped_decode_cases",
     "from course_lib.launch import decode_attention as attention"): CASES,
    ("exercises/kernel/cases.py", "_wgmma_first_wrong",
     "from course_lib.launch.operands import bf16_bits_to_float32, bf16_tolerance"): CASES,
    ("exercises/kernel/cases.py", "wgmma_gemm_cases",
     "from course_lib.launch import hopper_gemm as hg"): CASES,
    ("exercises/kernel/cases.py", "wgmma_gemm_cases",
     "from course_lib.launch.operands import bf16_bits_to_float32, random_operand, to_bf16_bits"): CASES,
    ("exercises/kernel/cases.py", "_warm_up_wgmma",
     "from course_lib.launch import hopper_gemm as hg"): CASES,
    ("launch/hopper_gemm.py", "sm_rounds", "from course_lib.models import waves"): LAUNCH_IN_FLIGHT,
    ("measure/claims.py", "<module>", "from course_lib.measure import claims as _claims"):
        "in the `if __name__ == '__main__'` block: run as a script, the module is __main__ and checks with itself "
        "imported under its package name, whose classes the claims files' isinstance tests see; at the top it "
        "would import itself",
}


def is_course_import(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "course_lib"
    return any(alias.name.split(".")[0] == "course_lib" for alias in node.names)


def nested_course_imports(source: str) -> list[tuple[int, str, str]]:
    """(line, where, import) of every import of a course module that is not a statement of the module's own
    body: inside a function or class (``where`` names it, dotted) or a block such as ``if`` (``<module>``)."""
    found = []

    def visit(node: ast.AST, where: str, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                if not top and is_course_import(child):
                    found.append((child.lineno, where, ast.unparse(child)))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, child.name if where == "<module>" else f"{where}.{child.name}", False)
            else:
                visit(child, where, False)

    visit(ast.parse(source), "<module>", True)
    return found


def package_nested_imports() -> dict[tuple[str, str, str], list[int]]:
    """(module, where, import) -> its lines, over every module of course_lib."""
    out: dict[tuple[str, str, str], list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        for line, where, text in nested_course_imports(path.read_text(encoding="utf-8")):
            out.setdefault((module, where, text), []).append(line)
    return out


def test_course_modules_are_imported_at_the_top():
    found = package_nested_imports()
    bad = [f"course_lib/{module}:{line}: {text} (in {where})"
           for (module, where, text), lines in found.items() if (module, where, text) not in ALLOWED for line in lines]
    assert not bad, "move these imports to the top of their module, or list them in ALLOWED with why:\n" + "\n".join(bad)


def test_every_allowed_import_is_still_there():
    stale = set(ALLOWED) - set(package_nested_imports())
    assert not stale, f"ALLOWED lists imports that are gone or moved (drop them): {sorted(stale)}"


def test_the_check_finds_a_nested_course_import():
    source = '''
from __future__ import annotations

import math

from course_lib.core import cuda


def f():
    import torch
    from course_lib.models import waves
    return torch, waves


class C:
    def m(self):
        from ..core import hardware
        import course_lib.launch.operands as ops
        return hardware, ops


if __name__ == "__main__":
    from . import claims
'''
    assert nested_course_imports(source) == [
        (11, "f", "from course_lib.models import waves"),
        (17, "C.m", "from ..core import hardware"),
        (18, "C.m", "import course_lib.launch.operands as ops"),
        (23, "<module>", "from . import claims"),
    ]
