// Shared device code of pg_kde's CUDA kernels: the triangular tile mapping, the exponential, and the
// block reductions with their three strategies. Included by every cuda/*.cu; pg_kde.backend.cuda inlines it
// (with #line directives) when it builds a module, so CuPy's kernel cache sees every change.
#pragma once

namespace pg_kde {

typedef unsigned long long u64;

// How a block's partial sums reach the result (see docs/math.md §9 and benchmarks/bandwidth.py):
//   PARTIALS       the block reduces (warp shuffles, then shared memory) and writes its sum to its own
//                  slot of a temporary array; a second pass sums the slots (deterministic);
//   THREAD_ATOMIC  every thread adds its own partial to the result with one atomicAdd;
//   BLOCK_ATOMIC   the block reduces, then one atomicAdd per block and output.
enum Reduction { PARTIALS = 0, THREAD_ATOMIC = 1, BLOCK_ATOMIC = 2 };

// i(i+1)/2 without overflow for every i < 2^32.
__host__ __device__ inline u64 triangle(u64 i) { return (i % 2 == 0) ? (i / 2) * (i + 1) : i * ((i + 1) / 2); }

// Navarro & Hitschfeld's lower-triangular map g(λ) = (i, j), i = ⌊√(1/4 + 2λ) − 1/2⌋, j = λ − i(i+1)/2,
// for λ < 2^63. The square root is taken in double and then corrected with exact integer arithmetic:
// past ~2^24 tiles a float root, and past ~2^52 a double one, can land one row off.
__host__ __device__ inline void tile_of(u64 lambda, u64* row, u64* col) {
    u64 i = (u64)(sqrt(0.25 + 2.0 * (double)lambda) - 0.5);
    while (i > 0 && triangle(i) > lambda) --i;
    while (triangle(i + 1) <= lambda) ++i;
    *row = i;
    *col = lambda - triangle(i);
}

// The block's index in a 2-D grid read as one linear index (x fastest); see pg_kde.backend.cuda.grid_for.
__device__ inline u64 linear_block() { return (u64)blockIdx.y * gridDim.x + blockIdx.x; }

// 2^(−y) for y ≥ 0 (or +inf). Callers fold log₂e into their constants, exp(−x) = 2^(−x·log₂e), so float
// is one hardware base-2 exponential (MUFU.EX2; the module is built with flush-to-zero).
__device__ inline float exp2_neg(float y) { return exp2f(-y); }
__device__ inline double exp2_neg(double y) { return exp2(-y); }

#define PG_KDE_LOG2E 1.4426950408889634

// The largest finite value: a squared distance that makes exp2_neg(·) exactly 0 for masked pairs while
// S · 0 stays 0 (an infinity would give NaN).
__device__ inline float masked_distance(float) { return 3.4028234663852886e38f; }
__device__ inline double masked_distance(double) { return 1.7976931348623157e308; }

// A squared distance past which exp(−u²/2) is below every T's range (float 2⁻¹⁴⁴, double 0): the plug-in
// kernels clamp u² there, so a far outlier's polynomial stays finite and its term is (almost) 0 instead
// of infinity times 0.
__device__ inline float plugin_distance_limit(float) { return 200.0f; }
__device__ inline double plugin_distance_limit(double) { return 1500.0; }

// A sum in two levels: at most 64 terms in the working precision T, each such part then added in double.
// (The PLUGIN and KDE loops do the same with a fixed inner loop of 64, which needs no counter.)
template <typename T>
struct Sum64 {
    double total = 0.0;
    T part = T(0);
    unsigned count = 0;
    __device__ void add(T v) {
        part += v;
        if (++count == 64) {
            total += (double)part;
            part = T(0);
            count = 0;
        }
    }
    __device__ double value() const { return total + (double)part; }
};

__device__ inline double warp_sum(double v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

// Sum of v over the block (blockDim.x a multiple of 32, at most 1024); the result is valid in thread 0.
// Every thread of the block must call it.
__device__ inline double block_sum(double v) {
    __shared__ double warp_sums[32];
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();  // warp_sums may still be read by an earlier call
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = (threadIdx.x < (blockDim.x >> 5)) ? warp_sums[threadIdx.x] : 0.0;
        v = warp_sum(v);
    }
    return v;
}

// One output per block: `out` is the block's slot array (PARTIALS) or the single accumulator.
__device__ inline void finish_block(double acc, int reduction, double* out, u64 slot) {
    if (reduction == THREAD_ATOMIC) {
        atomicAdd(out, acc);
        return;
    }
    const double total = block_sum(acc);
    if (threadIdx.x == 0) {
        if (reduction == PARTIALS)
            out[slot] = total;
        else
            atomicAdd(out, total);
    }
}

// Several outputs per block: thread t works on output t % n_out, one of `groups` threads per output, and
// holds its partial in `acc`. `scratch` is blockDim.x doubles of shared memory. Output v of this block
// goes to out[slot * n_vals + v] (PARTIALS) or out[v] (atomics), with v = value_index * n_out + t % n_out.
__device__ inline void finish_outputs(double acc, int reduction, double* out, u64 slot, unsigned n_out,
                                      unsigned groups, unsigned value_index, unsigned n_vals, double* scratch) {
    const unsigned t = threadIdx.x;
    const bool active = t < n_out * groups;
    if (reduction == THREAD_ATOMIC) {
        if (active) atomicAdd(out + value_index * n_out + t % n_out, acc);
        return;
    }
    __syncthreads();  // scratch may still be read by an earlier call
    scratch[t] = active ? acc : 0.0;
    __syncthreads();
    if (t < n_out) {
        double total = 0.0;
        for (unsigned g = 0; g < groups; ++g) total += scratch[g * n_out + t];
        const unsigned v = value_index * n_out + t;
        if (reduction == PARTIALS)
            out[slot * n_vals + v] = total;
        else
            atomicAdd(out + v, total);
    }
}

}  // namespace pg_kde

#ifdef PG_KDE_HOST_EMULATION
#define PG_KDE_DYNAMIC_SHARED(name) unsigned char* name = pg_kde_emulator::dynamic_shared()
#else
#define PG_KDE_DYNAMIC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
#endif
