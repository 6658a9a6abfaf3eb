#define TILE 64   // a block scales one 64 x 64 tile at a time; 256 threads, 16 rows each

extern "C" __global__ void scale_tiles(float* out, const float* in, float a, int rows, int cols) {
    const int tiles_n = (cols + TILE - 1) / TILE;
    const int tile = blockIdx.x;                  // one tile per block: only gridDim.x tiles get done
    const int r0 = (tile / tiles_n) * TILE, c0 = (tile % tiles_n) * TILE;
    const int c = c0 + threadIdx.x % TILE;
    for (int r = r0 + threadIdx.x / TILE; r < r0 + TILE; r += 256 / TILE)
        if (r < rows && c < cols) out[(long long)r * cols + c] = a * in[(long long)r * cols + c];
}
