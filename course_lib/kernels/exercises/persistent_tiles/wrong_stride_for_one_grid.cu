#define TILE 64   // a block scales one 64 x 64 tile at a time; 256 threads, 16 rows each

extern "C" __global__ void scale_tiles(float* out, const float* in, float a, int rows, int cols) {
    const int tiles_n = (cols + TILE - 1) / TILE;
    const int tiles = ((rows + TILE - 1) / TILE) * tiles_n;
    for (int tile = blockIdx.x; tile < tiles; tile += 132 * 8) {   // the H200's persistent grid, written in
        const int r0 = (tile / tiles_n) * TILE, c0 = (tile % tiles_n) * TILE;
        const int c = c0 + threadIdx.x % TILE;
        for (int r = r0 + threadIdx.x / TILE; r < r0 + TILE; r += 256 / TILE)
            if (r < rows && c < cols) out[(long long)r * cols + c] = a * in[(long long)r * cols + c];
    }
}
