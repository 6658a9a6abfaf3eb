// Sixteen partial sums so that the adds do not wait on one another, column c added to part[c % 16]. The loop is
// not unrolled by 16, so c % 16 is an index known only at run time and the array cannot live in registers: it
// lives in a stack frame (local memory). Under the register budget and with no spills, yet every add is a load
// and a store of local memory.
extern "C" __global__ void row_sum_squares(float* out, const float* in, int rows, int cols) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* row = in + (long long)r * cols;
    float part[16] = {0.f};
    for (int c = 0; c < cols; ++c) part[c % 16] += row[c] * row[c];
    float s = 0.f;
    for (int j = 0; j < 16; ++j) s += part[j];
    out[r] = s;
}
