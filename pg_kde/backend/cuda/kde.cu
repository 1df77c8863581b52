// KDE evaluation: out[p] = Σⱼ exp(−‖p − xⱼ‖²/2) for m points p and n sample rows xⱼ, both already centred
// and multiplied by L⁻¹ (H = LLᵀ) on the host (docs/math.md §9).
//
// Grid: x = blocks of blockDim.x points (thread t of block bx is point bx·blockDim.x + t), y = chunks of
// `chunk` sample rows, so that small m still fills the device. Each block streams its chunk through shared
// memory, `tile_rows` rows × d at a time. A chunk's sum goes to out[chunk·m + p] (PARTIALS: the host sums
// the chunks) or is added to out[p] with one atomicAdd per thread (the atomic strategies: each thread
// owns a different point, so there is nothing to reduce within the block).
#include "common.cuh"

namespace pg_kde {

// D > 0: the point's coordinates live in registers (d = D); D = 0: any d, read from global memory.
template <typename T, int D>
__device__ void kde_sums(const T* __restrict__ points, u64 m, const T* __restrict__ sample, u64 n, int d,
                         unsigned tile_rows, u64 chunk, int reduction, double* __restrict__ out) {
    PG_KDE_DYNAMIC_SHARED(smem);
    T* tile = reinterpret_cast<T*>(smem);
    const unsigned t = threadIdx.x;
    const u64 p = (u64)blockIdx.x * blockDim.x + t;
    const u64 first = (u64)blockIdx.y * chunk;
    const u64 last = (first + chunk < n) ? first + chunk : n;
    const bool live = p < m;
    T reg[D > 0 ? D : 1];
    if (D > 0) {
        for (int k = 0; k < D; ++k) reg[k] = live ? points[p * D + k] : T(0);
    }
    const T* mine = points + (live ? p : 0) * (u64)d;
    double acc = 0.0;
    const T half_log2e = T(0.5 * PG_KDE_LOG2E);
    for (u64 s0 = first; s0 < last; s0 += tile_rows) {
        const unsigned rows = (last - s0 < tile_rows) ? (unsigned)(last - s0) : tile_rows;
        for (unsigned q = t; q < rows * (unsigned)d; q += blockDim.x) tile[q] = sample[s0 * d + q];
        __syncthreads();
        if (live) {
            for (unsigned r0 = 0; r0 < rows; r0 += 64) {
                const unsigned r1 = (rows - r0 < 64) ? rows : r0 + 64;
                T part = T(0);
                for (unsigned r = r0; r < r1; ++r) {
                    T S = T(0);
                    if (D > 0) {
                        for (int k = 0; k < D; ++k) {
                            const T diff = reg[k] - tile[r * D + k];
                            S += diff * diff;
                        }
                    } else {
                        for (int k = 0; k < d; ++k) {
                            const T diff = mine[k] - tile[(u64)r * d + k];
                            S += diff * diff;
                        }
                    }
                    part += exp2_neg(S * half_log2e);
                }
                acc += (double)part;
            }
        }
        __syncthreads();
    }
    if (!live) return;
    if (reduction == PARTIALS)
        out[(u64)blockIdx.y * m + p] = acc;
    else
        atomicAdd(out + p, acc);
}

}  // namespace pg_kde

#define PG_KDE_KDE_KERNELS(X)       \
    X(kde_sums_f32_d1, float, 1)    \
    X(kde_sums_f32_d2, float, 2)    \
    X(kde_sums_f32_d3, float, 3)    \
    X(kde_sums_f32_d4, float, 4)    \
    X(kde_sums_f32_dn, float, 0)    \
    X(kde_sums_f64_d1, double, 1)   \
    X(kde_sums_f64_d2, double, 2)   \
    X(kde_sums_f64_d3, double, 3)   \
    X(kde_sums_f64_d4, double, 4)   \
    X(kde_sums_f64_dn, double, 0)

#define PG_KDE_DEFINE_KDE(NAME, T, D)                                                                        \
    extern "C" __global__ void NAME(const T* points, unsigned long long m, const T* sample,                    \
                                    unsigned long long n, int d, unsigned tile_rows, unsigned long long chunk, \
                                    int reduction, double* out) {                                             \
        pg_kde::kde_sums<T, D>(points, m, sample, n, d, tile_rows, chunk, reduction, out);                    \
    }
PG_KDE_KDE_KERNELS(PG_KDE_DEFINE_KDE)
