"""The experiment framework (registry, results, live and replay), the record format and its validator,
measured ceilings, Nsight Compute, compute-sanitizer, SASS, the smoke registry, the reconciliation table."""
