#define TILE 64   // a block scales one 64 x 64 tile at a time; 256 threads, 16 rows each

// The edge tiles clamped: each tile's loops end at min(its end, the matrix's end), so nothing outside is visited.
extern "C" __global__ void scale_tiles(float* out, const float* in, float a, int rows, int cols) {
    const int tiles_n = (cols + TILE - 1) / TILE;
    const int tiles = ((rows + TILE - 1) / TILE) * tiles_n;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int r0 = (tile / tiles_n) * TILE, c0 = (tile % tiles_n) * TILE;
        const int r_end = min(r0 + TILE, rows), c_end = min(c0 + TILE, cols);
        const int c = c0 + threadIdx.x % TILE;
        if (c >= c_end) continue;
        for (int r = r0 + threadIdx.x / TILE; r < r_end; r += 256 / TILE)
            out[(long long)r * cols + c] = a * in[(long long)r * cols + c];
    }
}
