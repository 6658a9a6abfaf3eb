"""Exercise checks, one module per notebook on a small base (``Verdict``); ``kernel/`` holds the
write-it-yourself kernel exercises: their catalogue, the checker and the child-process runner."""
