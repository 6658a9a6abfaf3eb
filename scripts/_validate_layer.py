import sys, traceback
from course_lib.measure import experiments as e
from course_lib.labs import transformer_layer as L, fusion as LF

def show(rows):
    for row in rows:
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()})

steps = sys.argv[1:] or ["ceil", "decode", "ops", "chains"]
for step in steps:
    try:
        if step == "ceil":
            r = e.run_live("layer.memory_ceilings", e.resolve_params("layer.memory_ceilings", samples=20,
                           shared_sets=[1 << 20, 16 << 20, 1 << 30], per_block_sets=[16384, 65536]))
            show(L.ceiling_rows(r)); print(L.ceilings(r))
        if step == "decode":
            r = e.run_live("layer.decode_attention", e.resolve_params("layer.decode_attention", batches=[1, 8],
                           contexts=[1000, 8192], samples=20, profiled=[8, 8192]))
            show(L.decode_rows(r)); show(L.decode_byte_rows(r))
            for c in r.cases:
                if "kernels" in c.extra: print(c.name, c.extra["kernels"][:6])
        if step == "ops":
            r = e.run_live("layer.ops", e.resolve_params("layer.ops", prefill=[1, 1024], decode=[4, 2048], samples=20))
            show(L.op_rows(r)); show(L.layer_rows(r))
        if step == "chains":
            r = e.run_live("fusion.chains", e.resolve_params("fusion.chains", ks=[2, 16], compiled_ks=[2, 16], samples=20,
                           profiled_k=2, shapes_profiled_k=16))
            show(LF.shape_rows(r)); show(LF.shape_profile_rows(r)); show(LF.chain_rows(r))
    except Exception:
        traceback.print_exc()
        print(f"STEP {step} FAILED")
