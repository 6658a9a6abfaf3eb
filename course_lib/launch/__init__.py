"""Host launchers: one module per ``kernels/<family>.cu`` (its variants, launch geometry and smoke
launch), plus the library baselines (cuBLAS through PyTorch). Labs launch kernels only through here."""
