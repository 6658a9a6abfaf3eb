"""What a child process runs under Nsight Compute or compute-sanitizer: a course function and its
arguments, as a value. The script is derived from the function object itself, so moving or renaming
the function moves its target with it (a script written as text would break silently)."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Target:
    function: Callable
    args: tuple = ()
    print_prefix: str | None = None   # print prefix + str(result): for a launch that reports what it found

    def __post_init__(self):
        if "<locals>" in self.function.__qualname__ or self.function.__module__ == "__main__":
            raise ValueError(f"{self.function.__qualname__} cannot be imported by a child process: "
                             "a target must be a module-level course function")
        try:
            same = ast.literal_eval(repr(tuple(self.args))) == tuple(self.args)
        except (ValueError, SyntaxError):
            same = False
        if not same:
            raise ValueError(f"{self.function.__qualname__}'s arguments {self.args!r} must be plain "
                             "literals (numbers, strings, lists, dicts) to cross into a child process")

    def script(self) -> str:
        name = self.function.__qualname__
        call = f"{name}(*{tuple(self.args)!r})"
        run = f"print({self.print_prefix!r} + str({call}))" if self.print_prefix is not None else call
        return f"from {self.function.__module__} import {name}; {run}"
