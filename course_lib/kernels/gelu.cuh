// GELU, tanh form (torch.nn.functional.gelu(approximate="tanh")), for the fused epilogues: notebook
// 08's derivation, shared by the kernels that include it.
#ifndef COURSE_GELU_CUH
#define COURSE_GELU_CUH

// GELU(x) of h = x/2, with the hardware tanh (tanh.approx.f32, one MUFU instruction, relative error
// about 2^-11 in tanh, below bf16's 2^-8). In GELU's negative tail, where 1 + tanh(u) cancels, the
// output's relative error is larger; its absolute error stays small against the checks' tolerances.
// GELU(x) = h + h·tanh(u), u = k·(x + 0.044715·x³)
// = h·(2k + 8k·0.044715·h²). Four fp32 instructions and the tanh; written the way the formula reads
// it is seven, because the compiler may not reassociate float arithmetic. A caller holding the bias
// halved gets h = x/2 + b/2 in one FFMA.
__device__ __forceinline__ float gelu_of_half(float h) {
    const float u = h * fmaf(0.2854192650904010f, h * h, 1.5957691216057308f);
    float t;
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(u));
    return fmaf(h, t, h);
}

#endif  // COURSE_GELU_CUH
