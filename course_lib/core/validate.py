"""Input checks shared by the models: a bad value raises ValueError naming the parameter and what
it may be, so a calculator can show the message instead of a traceback."""
from __future__ import annotations

import numbers


def whole_number(name: str, value, allowed: str = "1, 2, 3, …") -> int:
    """``value`` as a positive int; bools and floats (even 128.0) are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive whole number ({allowed}), got {value!r}")
    return int(value)
