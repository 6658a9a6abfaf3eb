"""The bottom layer: live or replay, the spec table, NVRTC, the timing harness, the session banner.
It imports nothing else of the course."""
