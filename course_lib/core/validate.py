"""Input checks shared by the models: a bad value raises ValueError naming the parameter and what
it may be, so a calculator can show the message instead of a traceback. The one home of these
checks: a model never writes its own."""
from __future__ import annotations

import math
import numbers


def whole_number(name: str, value, allowed: str = "1, 2, 3, …") -> int:
    """``value`` as a positive int; bools and floats (even 128.0) are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive whole number ({allowed}), got {value!r}")
    return int(value)


def positive(name: str, value, unit: str | None = None) -> float:
    """``value`` as a float > 0 and finite; bools, NaN, infinities and non-numbers are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a positive number{f' ({unit})' if unit else ''}, got {value!r}")
    return float(value)


def non_negative(name: str, value) -> float:
    """``value`` as a finite float >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < math.inf:
        raise ValueError(f"{name} must be zero or positive, got {value!r}")
    return float(value)


def whole_numbers(**values) -> None:
    """``whole_number`` for each keyword: ``whole_numbers(M=m, N=n)``."""
    for name, v in values.items():
        whole_number(name, v)


def positives(**values) -> None:
    """``positive`` for each keyword."""
    for name, v in values.items():
        positive(name, v)


def non_negatives(**values) -> None:
    """``non_negative`` for each keyword."""
    for name, v in values.items():
        non_negative(name, v)


def grouped_heads(q_heads: int, kv_heads: int) -> int:
    """Query heads per KV head for grouped-query attention: a clear error where they do not divide evenly."""
    if kv_heads < 1 or q_heads % kv_heads:
        raise ValueError(f"{q_heads} query heads cannot share {kv_heads} KV heads evenly: grouped-query attention "
                         "needs the query heads to be a multiple of the KV heads")
    return q_heads // kv_heads
