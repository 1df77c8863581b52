// Pairwise kernel sums over i < j for the bandwidth selectors (docs/math.md §9).
//
// The n points are cut into tiles of P consecutive points; block λ of the launch takes tile pair
// (i, j), j ≤ i, from the triangular map g(λ) (common.cuh), so only the lower triangle of tile pairs is
// launched. Launches may be split into batches: λ = offset + linear block index, and blocks past the last
// tile return at once. Every pair contributes once: all pairs of an off-diagonal tile pair, and the
// pairs c < r of a diagonal one. Per-thread sums run in the working precision over at most 64 terms and
// are then added in double; block partials are double.
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
        T part = T(0);
        for (unsigned c = 0; c < ncols; ++c) {
            const T u = xi - cols[c];
            const T u2 = u * u;
            T poly;
            if (ORDER == 2)
                poly = u2 - T(1);
            else if (ORDER == 4)
                poly = (u2 - T(6)) * u2 + T(3);
            else
                poly = ((u2 - T(15)) * u2 + T(45)) * u2 - T(15);
            part += poly * exp_neg(T(0.5) * u2);
            if ((c & 63u) == 63u) {
                acc += (double)part;
                part = T(0);
            }
        }
        acc += (double)part;
    }
    finish_block(acc, reduction, out, lambda - offset);
}

// The buffered pair kernels (LSCV over many scales, the LSCV_H moments) share one shape: the block loads
// the two tiles of P points × d coordinates into shared memory, then walks the tile pair in chunks of
// P × C pairs. In phase 1 the threads compute one value per pair of the chunk into a shared buffer; in
// phase 2 thread t accumulates output t % n_out over the pairs q ≡ t / n_out (mod groups) of the buffer.
// Shared memory: blockDim.x doubles of reduction scratch, the two tiles, then the P·C buffer.
template <typename T>
struct PairTiles {
    double* scratch;
    T* rows;
    T* cols;
    T* buffer;
    u64 ti, tj;
    unsigned rows_valid, cols_valid;
};

template <typename T>
__device__ PairTiles<T> load_pair_tiles(unsigned char* smem, const T* __restrict__ z, u64 n, int d, unsigned P,
                                        u64 lambda) {
    PairTiles<T> s;
    s.scratch = reinterpret_cast<double*>(smem);
    s.rows = reinterpret_cast<T*>(s.scratch + blockDim.x);
    s.cols = s.rows + (u64)P * d;
    s.buffer = s.cols + (u64)P * d;
    tile_of(lambda, &s.ti, &s.tj);
    const u64 row0 = s.ti * P, col0 = s.tj * P, size = (u64)P * d;
    for (u64 q = threadIdx.x; q < size; q += blockDim.x) {
        s.rows[q] = (row0 * d + q < n * d) ? z[row0 * d + q] : T(0);
        s.cols[q] = (col0 * d + q < n * d) ? z[col0 * d + q] : T(0);
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
    const T* a = s.rows + (u64)r * d;
    const T* b = s.cols + (u64)c * d;
    T S = T(0);
    for (int k = 0; k < d; ++k) {
        const T diff = a[k] - b[k];
        S += diff * diff;
    }
    *dist = S;
    return true;
}

// LSCV over n_out scales at once: for scale m (coefficient c_m = s_m / 4),
//   A_m = Σ_{i<j} e (1 − w e),   D_m = Σ_{i<j} S e (1 − 2 w e),   e = exp(−S c_m),  S = ‖zᵢ − zⱼ‖².
// Output values: A_0 … A_{n_out−1}, then (if derivative) D_0 … D_{n_out−1}.
template <typename T>
__device__ void lscv_pair_sums(const T* __restrict__ z, u64 n, int d, unsigned P, unsigned chunk_shift,
                               u64 tiles, u64 offset, int reduction, double* __restrict__ out,
                               const T* __restrict__ coef, unsigned n_out, T w, int derivative) {
    PG_KDE_DYNAMIC_SHARED(smem);
    const u64 lambda = offset + linear_block();
    if (lambda >= tiles) return;
    const PairTiles<T> s = load_pair_tiles(smem, z, n, d, P, lambda);
    const unsigned C = 1u << chunk_shift, Q = P << chunk_shift, t = threadIdx.x;
    const unsigned groups = blockDim.x / n_out;
    const bool active = t < n_out * groups;
    const T c_m = active ? coef[t % n_out] : T(0);
    const unsigned first = t / n_out;
    double acc_a = 0.0, acc_d = 0.0;
    for (unsigned c0 = 0; c0 < P; c0 += C) {
        for (unsigned q = t; q < Q; q += blockDim.x) {  // phase 1: S for every pair of the chunk
            T S;
            s.buffer[q] = pair_distance(s, d, q >> chunk_shift, c0 + (q & (C - 1)), &S) ? S : masked_distance(T(0));
        }
        __syncthreads();
        if (active) {  // phase 2: this thread's scale over its share of the chunk
            T part_a = T(0), part_d = T(0);
            unsigned count = 0;
            for (unsigned q = first; q < Q; q += groups) {
                const T S = s.buffer[q];
                const T e = exp_neg(S * c_m);
                part_a += e * (T(1) - w * e);
                if (derivative) part_d += S * e * (T(1) - T(2) * w * e);
                if (++count == 64) {
                    acc_a += (double)part_a;
                    acc_d += (double)part_d;
                    part_a = part_d = T(0);
                    count = 0;
                }
            }
            acc_a += (double)part_a;
            acc_d += (double)part_d;
        }
        __syncthreads();
    }
    const unsigned n_vals = derivative ? 2 * n_out : n_out;
    finish_outputs(acc_a, reduction, out, lambda - offset, n_out, groups, 0, n_vals, s.scratch);
    if (derivative) finish_outputs(acc_d, reduction, out, lambda - offset, n_out, groups, 1, n_vals, s.scratch);
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
    const PairTiles<T> s = load_pair_tiles(smem, z, n, d, P, lambda);
    const unsigned C = 1u << chunk_shift, Q = P << chunk_shift, t = threadIdx.x;
    const unsigned groups = blockDim.x / n_out;
    const bool active = t < n_out * groups;
    const int a = active ? entry_a[t % n_out] : -1;
    const int b = active ? entry_b[t % n_out] : -1;
    const unsigned first = t / n_out;
    double acc = 0.0;
    for (unsigned c0 = 0; c0 < P; c0 += C) {
        for (unsigned q = t; q < Q; q += blockDim.x) {  // phase 1: e for every pair of the chunk (0 if masked)
            T S;
            s.buffer[q] = pair_distance(s, d, q >> chunk_shift, c0 + (q & (C - 1)), &S) ? exp_neg(T(0.25) * S) : T(0);
        }
        __syncthreads();
        if (active) {
            T part = T(0);
            unsigned count = 0;
            for (unsigned q = first; q < Q; q += groups) {
                const T e = s.buffer[q];
                if (a < 0) {
                    part += e * (T(1) - w * e);
                } else {
                    const unsigned r = q >> chunk_shift, c = c0 + (q & (C - 1));
                    const T ua = s.rows[(u64)r * d + a] - s.cols[(u64)c * d + a];
                    const T ub = s.rows[(u64)r * d + b] - s.cols[(u64)c * d + b];
                    part += e * (T(1) - T(2) * w * e) * ua * ub;
                }
                if (++count == 64) {
                    acc += (double)part;
                    part = T(0);
                    count = 0;
                }
            }
            acc += (double)part;
        }
        __syncthreads();
    }
    finish_outputs(acc, reduction, out, lambda - offset, n_out, groups, 0, n_out, s.scratch);
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
