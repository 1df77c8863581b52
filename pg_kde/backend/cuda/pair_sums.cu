// Pairwise kernel sums over i < j for the bandwidth selectors (docs/math.md §9).
//
// The n points are cut into tiles of P consecutive points; block λ of the launch takes tile pair
// (i, j), j ≤ i, from the triangular map g(λ) (common.cuh), so only the lower triangle of tile pairs is
// launched. Launches may be split into batches: λ = offset + linear block index, and blocks past the last
// tile return at once. Every pair contributes once: all pairs of an off-diagonal tile pair, and the
// pairs c < r of a diagonal one. Per-thread sums run in the working precision over at most 64 terms and
// are then added in double (Sum64); block partials are double.
#include "common.cuh"

namespace pg_kde {

// PLUGIN: Σ_{i<j} p_r(u²) exp(−u²/2), u = xᵢ − xⱼ, on x already divided by g. Thread t of the block is
// row i = ti·P + t (P = blockDim.x) and loops over the P column values of tile tj held in shared memory.
template <typename T, int ORDER>
__device__ void plugin_pair_sum(const T* __restrict__ x, u64 n, u64 tiles, u64 offset, int reduction,
                                double* __restrict__ out) {
    PG_KDE_DYNAMIC_SHARED(smem);
    T* cols = reinterpret_cast<T*>(smem);
    const u64 lambda = offset + linear_block();
    if (lambda >= tiles) return;  // the whole block: the excess of the grid
    u64 ti, tj;
    tile_of(lambda, &ti, &tj);
    const unsigned P = blockDim.x, t = threadIdx.x;
    const u64 row = ti * P + t, col0 = tj * P;
    cols[t] = (col0 + t < n) ? x[col0 + t] : T(0);
    __syncthreads();
    unsigned ncols = (n - col0 < P) ? (unsigned)(n - col0) : P;
    if (ti == tj && t < ncols) ncols = t;  // diagonal tile: columns before the row only
    double acc = 0.0;
    if (row < n) {
        const T xi = x[row];
        const T half_log2e = T(0.5 * PG_KDE_LOG2E);
        const T limit = plugin_distance_limit(T(0));
        for (unsigned c0 = 0; c0 < ncols; c0 += 64) {
            const unsigned c1 = (ncols - c0 < 64) ? ncols : c0 + 64;
            T part = T(0);
            for (unsigned c = c0; c < c1; ++c) {
                const T u = xi - cols[c];
                const T u2 = (u * u < limit) ? u * u : limit;
                T poly;
                if (ORDER == 2)
                    poly = u2 - T(1);
                else if (ORDER == 4)
                    poly = (u2 - T(6)) * u2 + T(3);
                else
                    poly = ((u2 - T(15)) * u2 + T(45)) * u2 - T(15);
                part += poly * exp2_neg(u2 * half_log2e);
            }
            acc += (double)part;
        }
    }
    finish_block(acc, reduction, out, lambda - offset);
}

// The buffered pair kernels (LSCV over many scales, the LSCV_H moments) share one shape: the block loads
// the two tiles of P points × d coordinates into shared memory, then walks the tile pair in chunks of
// P × C pairs. In phase 1 the threads compute one value per pair of the chunk into a shared buffer; in
// phase 2 thread t accumulates output t % n_out over the pairs q ≡ t / n_out (mod groups) of the buffer.
// Shared memory: blockDim.x doubles of reduction scratch, the two tiles (P rows of d coordinates each,
// rows `stride` = d | 1 apart: an odd stride puts the 32 columns a warp reads in 32 different banks),
// then the P·C buffer.
template <typename T>
struct PairTiles {
    double* scratch;
    T* rows;
    T* cols;
    T* buffer;
    unsigned stride;
    u64 ti, tj;
    unsigned rows_valid, cols_valid;
    unsigned chunk, pairs;  // C columns and P·C pairs per chunk
    unsigned groups, first;  // threads per output, and this thread's first pair of a chunk
    bool active;             // this thread has an output
};

template <typename T>
__device__ PairTiles<T> load_pair_tiles(unsigned char* smem, const T* __restrict__ z, u64 n, int d, unsigned P,
                                        unsigned chunk_shift, unsigned n_out, u64 lambda) {
    PairTiles<T> s;
    s.chunk = 1u << chunk_shift;
    s.pairs = P << chunk_shift;
    s.groups = blockDim.x / n_out;
    s.first = threadIdx.x / n_out;
    s.active = threadIdx.x < n_out * s.groups;
    s.stride = (unsigned)d | 1u;
    s.scratch = reinterpret_cast<double*>(smem);
    s.rows = reinterpret_cast<T*>(s.scratch + blockDim.x);
    s.cols = s.rows + (u64)P * s.stride;
    s.buffer = s.cols + (u64)P * s.stride;
    tile_of(lambda, &s.ti, &s.tj);
    const u64 row0 = s.ti * P, col0 = s.tj * P, size = (u64)P * d;
    for (u64 q = threadIdx.x; q < size; q += blockDim.x) {
        const u64 at = (q / d) * s.stride + q % d;
        s.rows[at] = (row0 * d + q < n * d) ? z[row0 * d + q] : T(0);
        s.cols[at] = (col0 * d + q < n * d) ? z[col0 * d + q] : T(0);
    }
    s.rows_valid = (n - row0 < P) ? (unsigned)(n - row0) : P;
    s.cols_valid = (n - col0 < P) ? (unsigned)(n - col0) : P;
    __syncthreads();
    return s;
}

// Squared distance of row r and column c of the tiles, or false if (r, c) is not a pair to count.
template <typename T>
__device__ inline bool pair_distance(const PairTiles<T>& s, int d, unsigned r, unsigned c, T* dist) {
    if (r >= s.rows_valid || c >= s.cols_valid || (s.ti == s.tj && c >= r)) return false;
    const T* a = s.rows + (u64)r * s.stride;
    const T* b = s.cols + (u64)c * s.stride;
    T S = T(0);
    for (int k = 0; k < d; ++k) {
        const T diff = a[k] - b[k];
        S += diff * diff;
    }
    *dist = S;
    return true;
}

// LSCV over n_out scales at once: for scale m (coefficient c_m = s_m log₂e / 4),
//   A_m = Σ_{i<j} e (1 − w e),   D_m = Σ_{i<j} S e (1 − 2 w e),   e = 2^(−S c_m) = exp(−S s_m / 4),
//   S = ‖zᵢ − zⱼ‖².
// Output values: A_0 … A_{n_out−1}, then (if derivative) D_0 … D_{n_out−1}.
template <typename T>
__device__ void lscv_pair_sums(const T* __restrict__ z, u64 n, int d, unsigned P, unsigned chunk_shift,
                               u64 tiles, u64 offset, int reduction, double* __restrict__ out,
                               const T* __restrict__ coef, unsigned n_out, T w, int derivative) {
    PG_KDE_DYNAMIC_SHARED(smem);
    const u64 lambda = offset + linear_block();
    if (lambda >= tiles) return;
    const PairTiles<T> s = load_pair_tiles(smem, z, n, d, P, chunk_shift, n_out, lambda);
    const T c_m = s.active ? coef[threadIdx.x % n_out] : T(0);
    Sum64<T> acc_a, acc_d;
    for (unsigned c0 = 0; c0 < P; c0 += s.chunk) {
        for (unsigned q = threadIdx.x; q < s.pairs; q += blockDim.x) {  // phase 1: S of every pair of the chunk
            T S;
            const bool pair = pair_distance(s, d, q >> chunk_shift, c0 + (q & (s.chunk - 1)), &S);
            s.buffer[q] = pair ? S : masked_distance(T(0));
        }
        __syncthreads();
        if (s.active) {  // phase 2: this thread's scale over its share of the chunk
            for (unsigned q = s.first; q < s.pairs; q += s.groups) {
                const T S = s.buffer[q];
                const T e = exp2_neg(S * c_m);
                acc_a.add(e * (T(1) - w * e));
                if (derivative) acc_d.add(S * e * (T(1) - T(2) * w * e));
            }
        }
        __syncthreads();
    }
    const unsigned n_vals = derivative ? 2 * n_out : n_out;
    finish_outputs(acc_a.value(), reduction, out, lambda - offset, n_out, s.groups, 0, n_vals, s.scratch);
    if (derivative)
        finish_outputs(acc_d.value(), reduction, out, lambda - offset, n_out, s.groups, 1, n_vals, s.scratch);
}

// LSCV_H value and gradient sums at scale 1 (data already multiplied by L⁻¹): with u = zᵢ − zⱼ and
// e = exp(−‖u‖²/4), output o is Σ_{i<j} e (1 − 2 w e) u_a u_b for (a, b) = (entry_a[o], entry_b[o]), or
// A = Σ_{i<j} e (1 − w e) where entry_a[o] < 0.
template <typename T>
__device__ void lscv_moments(const T* __restrict__ z, u64 n, int d, unsigned P, unsigned chunk_shift, u64 tiles,
                             u64 offset, int reduction, double* __restrict__ out, const int* __restrict__ entry_a,
                             const int* __restrict__ entry_b, unsigned n_out, T w) {
    PG_KDE_DYNAMIC_SHARED(smem);
    const u64 lambda = offset + linear_block();
    if (lambda >= tiles) return;
    const PairTiles<T> s = load_pair_tiles(smem, z, n, d, P, chunk_shift, n_out, lambda);
    const int a = s.active ? entry_a[threadIdx.x % n_out] : -1;
    const int b = s.active ? entry_b[threadIdx.x % n_out] : -1;
    Sum64<T> acc;
    for (unsigned c0 = 0; c0 < P; c0 += s.chunk) {
        for (unsigned q = threadIdx.x; q < s.pairs; q += blockDim.x) {  // phase 1: e of every pair (0 if masked)
            T S;
            const bool pair = pair_distance(s, d, q >> chunk_shift, c0 + (q & (s.chunk - 1)), &S);
            s.buffer[q] = pair ? exp2_neg(T(0.25 * PG_KDE_LOG2E) * S) : T(0);
        }
        __syncthreads();
        if (s.active) {
            for (unsigned q = s.first; q < s.pairs; q += s.groups) {
                const T e = s.buffer[q];
                if (a < 0) {
                    acc.add(e * (T(1) - w * e));
                } else {
                    const unsigned r = q >> chunk_shift, c = c0 + (q & (s.chunk - 1));
                    const T ua = s.rows[(u64)r * s.stride + a] - s.cols[(u64)c * s.stride + a];
                    const T ub = s.rows[(u64)r * s.stride + b] - s.cols[(u64)c * s.stride + b];
                    acc.add(e * (T(1) - T(2) * w * e) * ua * ub);
                }
            }
        }
        __syncthreads();
    }
    finish_outputs(acc.value(), reduction, out, lambda - offset, n_out, s.groups, 0, n_out, s.scratch);
}

}  // namespace pg_kde

// Entry points: one per kernel, precision and (PLUGIN) derivative order. Each list below defines the
// kernels, and the host emulator used by the tests reads the same lists.
#define PG_KDE_PLUGIN_KERNELS(X)              \
    X(plugin_pair_sum_f32_o2, float, 2)       \
    X(plugin_pair_sum_f32_o4, float, 4)       \
    X(plugin_pair_sum_f32_o6, float, 6)       \
    X(plugin_pair_sum_f64_o2, double, 2)      \
    X(plugin_pair_sum_f64_o4, double, 4)      \
    X(plugin_pair_sum_f64_o6, double, 6)

#define PG_KDE_DEFINE_PLUGIN(NAME, T, ORDER)                                                                \
    extern "C" __global__ void NAME(const T* x, unsigned long long n, unsigned long long tiles,               \
                                    unsigned long long offset, int reduction, double* out) {                 \
        pg_kde::plugin_pair_sum<T, ORDER>(x, n, tiles, offset, reduction, out);                               \
    }
PG_KDE_PLUGIN_KERNELS(PG_KDE_DEFINE_PLUGIN)

#define PG_KDE_LSCV_KERNELS(X) \
    X(lscv_pair_sums_f32, float) \
    X(lscv_pair_sums_f64, double)

#define PG_KDE_DEFINE_LSCV(NAME, T)                                                                          \
    extern "C" __global__ void NAME(const T* z, unsigned long long n, int d, unsigned P, unsigned chunk_shift,  \
                                    unsigned long long tiles, unsigned long long offset, int reduction,        \
                                    double* out, const T* coef, unsigned n_out, T w, int derivative) {          \
        pg_kde::lscv_pair_sums<T>(z, n, d, P, chunk_shift, tiles, offset, reduction, out, coef, n_out, w,      \
                                  derivative);                                                              \
    }
PG_KDE_LSCV_KERNELS(PG_KDE_DEFINE_LSCV)

#define PG_KDE_MOMENT_KERNELS(X) \
    X(lscv_moments_f32, float)   \
    X(lscv_moments_f64, double)

#define PG_KDE_DEFINE_MOMENTS(NAME, T)                                                                        \
    extern "C" __global__ void NAME(const T* z, unsigned long long n, int d, unsigned P, unsigned chunk_shift,  \
                                    unsigned long long tiles, unsigned long long offset, int reduction,        \
                                    double* out, const int* entry_a, const int* entry_b, unsigned n_out, T w) { \
        pg_kde::lscv_moments<T>(z, n, d, P, chunk_shift, tiles, offset, reduction, out, entry_a, entry_b,      \
                                n_out, w);                                                                  \
    }
PG_KDE_MOMENT_KERNELS(PG_KDE_DEFINE_MOMENTS)
