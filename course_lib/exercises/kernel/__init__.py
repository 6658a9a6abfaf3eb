"""Write-it-yourself kernel exercises: the catalogue, the checker a ``%%cuda_exercise`` cell calls, and
the child-process runner that runs a learner's kernel under a time limit."""
