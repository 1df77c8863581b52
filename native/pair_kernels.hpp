// The pair-sum kernels, written once over a SIMD vector type (see simd.hpp) and compiled once per
// instruction set. A translation unit defines
//   PG_KDE_ISA_NS  the namespace of this build (generic, avx2, avx512)
//   PG_KDE_VF      the float vector type      PG_KDE_VD  the double vector type
// and then includes this header, which defines table(float) / table(double) in that namespace.
//
// Arithmetic is in the vector's precision; every row of a tile is summed in a vector accumulator of
// that precision (at most a tile width of terms per lane) and then added to a double.
#pragma once

#include "jobs.hpp"
#include "simd.hpp"

#ifndef PG_KDE_ISA_NS
#error "define PG_KDE_ISA_NS, PG_KDE_VF and PG_KDE_VD before including pair_kernels.hpp"
#endif

namespace pg_kde {
namespace PG_KDE_ISA_NS {

template <class T>
struct Exp2Const;

// 2^(a b) for a b <= 0, with the product's limit enforced by the caller (clamp a so that a b >= lo):
//   t = a b + magic            one rounding: the mantissa of t ends in round(a b) + exponent bias
//   n = t - magic              = round(a b), exactly
//   f = a b - n                one FMA, exact product, so f is in [-1/2, 1/2]
//   2^(a b) = 2^f * 2^n        2^f by a polynomial, 2^n by shifting t's low bits into the exponent
// magic = 1.5 * 2^(mantissa bits) + bias. At the limit lo = -bias, n + bias = 0 builds exactly +0, so
// results below about 2^-126.5 (float) or 2^-1022.5 (double) flush to zero without a mask.
template <>
struct Exp2Const<float> {
    static constexpr float lo = -127.0f;
    static constexpr float magic = 12583039.0f;  // 1.5 * 2^23 + 127
};

template <>
struct Exp2Const<double> {
    static constexpr double lo = -1023.0;
    static constexpr double magic = 6755399441056767.0;  // 1.5 * 2^52 + 1023
};

constexpr double kLog2e = 1.4426950408889634074;
constexpr double kLn2 = 0.69314718055994530942;

template <class V>
inline V exp2_poly(V f, float) {
    // Chebyshev interpolant of 2^f on [-1/2, 1/2], degree 6: 1.9e-8 relative with float coefficients.
    V p = V::set1(1.5461444854736328e-4f);
    p = V::fma(p, f, V::set1(1.3400427997112274e-3f));
    p = V::fma(p, f, V::set1(9.6180569380521774e-3f));
    p = V::fma(p, f, V::set1(5.5503271520137787e-2f));
    p = V::fma(p, f, V::set1(2.4022650718688965e-1f));
    p = V::fma(p, f, V::set1(6.9314718246459961e-1f));
    return V::fma(p, f, V::set1(1.0f));
}

template <class V>
inline V exp2_poly(V f, double) {
    // Taylor polynomial of 2^f = e^(f ln2), degree 13: truncation < 5e-18 relative on [-1/2, 1/2].
    static constexpr double c[] = {1.3691488853904124e-12, 2.5678435993488196e-11, 4.44553827187081e-10,
                                   7.054911620801121e-09,  1.0178086009239696e-07, 1.3215486790144305e-06,
                                   1.5252733804059838e-05, 1.5403530393381606e-04, 1.3333558146428441e-03,
                                   9.618129107628477e-03,  5.5504108664821576e-02, 2.402265069591007e-01,
                                   6.931471805599453e-01,  1.0};
    V p = V::set1(c[0]);
    for (int q = 1; q < 14; ++q) p = V::fma(p, f, V::set1(c[q]));
    return p;
}

template <class V>
inline V exp2_mul(V a, V b) {
    using T = typename V::value_type;
    const V magic = V::set1(Exp2Const<T>::magic);
    const V t = V::fma(a, b, magic);
    const V f = V::fma(a, b, magic - t);  // a b - n, n = t - magic (exact)
    return exp2_poly(f, T()) * V::pow2_of_biased(t);
}

// The largest |a| for which a * b stays at or above the limit, for a fixed multiplier b.
template <class T>
inline T exp2_arg_limit(double b) {
    return static_cast<T>(-static_cast<double>(Exp2Const<T>::lo) / (b < 0 ? -b : b));
}

// A vector whose first k lanes are 1 and the rest 0 (k <= W <= 16).
template <class V>
inline V first_lanes(std::size_t k) {
    using T = typename V::value_type;
    alignas(64) static const T table[32] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    return V::load(table + 16 - k);
}

// Columns visited for row i of a tile.
inline std::size_t row_begin(const Tile& t, std::size_t i) { return t.diagonal ? i + 1 : t.j0; }

// ---------------------------------------------------------------- PLUGIN: K^(2), K^(4) and K^(6)
// With x = c (x_i - x_j)^2, c = -1/(2 g^2), i.e. x = -u^2/2, the polynomials have integer coefficients:
//   K^(2): u^2 - 1                     = -2x - 1
//   K^(4): u^4 - 6u^2 + 3              =  4x^2 + 12x + 3
//   K^(6): u^6 - 15u^4 + 45u^2 - 15    = -8x^3 - 60x^2 - 90x - 15
// They are kept that way on purpose: coefficients such as 90 ln2 would be rounded in float32, the same
// way for every pair, and K^(6) sums cancel so strongly that this bias reached 5e-5 of the result.
// The exponential is 2^(x log2 e). x is clamped at the exponential's limit before both factors: beyond it
// the true term is below 1e-30 (float) or 1e-298 (double), while the unclamped cubic of a far outlier
// overflows to infinity and its product with the exponential's floor is infinite or NaN.
template <class V, int Order>
inline V plugin_poly(V x) {
    if (Order == 2) return V::fma(V::set1(-2), x, V::set1(-1));
    if (Order == 4) return V::fma(V::fma(V::set1(4), x, V::set1(12)), x, V::set1(3));
    return V::fma(V::fma(V::fma(V::set1(-8), x, V::set1(-60)), x, V::set1(-90)), x, V::set1(-15));
}

template <class V, int Order>
double plugin_tile_impl(const PluginJob<typename V::value_type>& job, const Tile& t) {
    using T = typename V::value_type;
    constexpr std::size_t W = V::W;
    const V c = V::set1(job.neg_half_inv_g2);
    const V log2e = V::set1(T(kLog2e));
    const V x_min = V::set1(-exp2_arg_limit<T>(kLog2e));
    double total = 0.0;
    for (std::size_t i = t.i0; i < t.i1; ++i) {
        std::size_t j = row_begin(t, i);
        if (j >= t.j1) continue;
        const V xi = V::set1(job.x[i]);
        V acc = V::zero();
        for (; j + W <= t.j1; j += W) {
            const V dlt = xi - V::load(job.x + j);
            const V x = V::max((dlt * c) * dlt, x_min);
            acc = V::fma(plugin_poly<V, Order>(x), exp2_mul(x, log2e), acc);
        }
        if (j < t.j1) {
            const V dlt = xi - V::load(job.x + j);
            const V x = V::max((dlt * c) * dlt, x_min);
            acc = V::fma(plugin_poly<V, Order>(x) * first_lanes<V>(t.j1 - j), exp2_mul(x, log2e), acc);
        }
        total += V::hsum(acc);
    }
    return total;
}

template <class V>
double plugin_tile(const PluginJob<typename V::value_type>& job, const Tile& t) {
    switch (job.order) {
        case 2: return plugin_tile_impl<V, 2>(job, t);
        case 4: return plugin_tile_impl<V, 4>(job, t);
        default: return plugin_tile_impl<V, 6>(job, t);
    }
}

// Squared distances from point i (of a) to points [j, j+W) of b.
template <class V>
inline V squared_distance(const Points<typename V::value_type>& a, std::size_t i,
                          const Points<typename V::value_type>& b, std::size_t j) {
    V s = V::zero();
    for (std::size_t k = 0; k < a.d; ++k) {
        V diff = V::set1(a.data[k * a.stride + i]) - V::load(b.data + k * b.stride + j);
        s = V::fma(diff, diff, s);
    }
    return s;
}

// ---------------------------------------------------------------- LSCV pair sums, all scales fused
// Rows of a tile are gathered into `row` (squared distances, each row padded to whole vectors with a
// distance so large that 2^y is exactly 0) until about kLscvGroup vectors are waiting; then every scale
// sweeps the whole group with one accumulator, so each horizontal sum covers ~kLscvGroup vectors.
constexpr std::size_t kLscvGroup = 64;

template <class V>
void lscv_flush(const LscvJob<typename V::value_type>& job, const typename V::value_type* row, std::size_t nvec,
                double* out) {
    using T = typename V::value_type;
    constexpr std::size_t W = V::W;
    const double w = static_cast<double>(job.w);
    for (std::size_t m = 0; m < job.k; ++m) {
        const V c = V::set1(job.neg_quarter_scales[m]);
        const V s_max = V::set1(exp2_arg_limit<T>(job.neg_quarter_scales[m]));
        V e1 = V::zero(), e2 = V::zero();
        if (job.derivative) {
            V d1 = V::zero(), d2 = V::zero();
            for (std::size_t v = 0; v < nvec; ++v) {
                const V s = V::load(row + v * W);
                const V e = exp2_mul(V::min(s, s_max), c);
                const V se = s * e;
                e1 = e1 + e;
                e2 = V::fma(e, e, e2);
                d1 = d1 + se;
                d2 = V::fma(se, e, d2);
            }
            out[job.k + m] += V::hsum(d1) - 2.0 * w * V::hsum(d2);
        } else {
            for (std::size_t v = 0; v < nvec; ++v) {
                const V e = exp2_mul(V::min(V::load(row + v * W), s_max), c);
                e1 = e1 + e;
                e2 = V::fma(e, e, e2);
            }
        }
        out[m] += V::hsum(e1) - w * V::hsum(e2);
    }
}

template <class V>
void lscv_tile(const LscvJob<typename V::value_type>& job, const Tile& t, typename V::value_type* row,
               double* out) {
    using T = typename V::value_type;
    constexpr std::size_t W = V::W;
    const T far = static_cast<T>(1e30);
    std::size_t nvec = 0;
    for (std::size_t i = t.i0; i < t.i1; ++i) {
        const std::size_t jb = row_begin(t, i);
        if (jb >= t.j1) continue;
        const std::size_t len = t.j1 - jb;
        const std::size_t rvec = (len + W - 1) / W;
        T* dst = row + nvec * W;
        for (std::size_t v = 0; v < rvec; ++v) V::store(dst + v * W, squared_distance<V>(job.z, i, job.z, jb + v * W));
        for (std::size_t q = len; q < rvec * W; ++q) dst[q] = far;
        nvec += rvec;
        if (nvec >= kLscvGroup) {
            lscv_flush<V>(job, row, nvec, out);
            nvec = 0;
        }
    }
    if (nvec > 0) lscv_flush<V>(job, row, nvec, out);
}

// ---------------------------------------------------------------- LSCV_H value and gradient moments
// On data already multiplied by L^-1 (H = L L^T), with u = z_i - z_j, S = |u|^2, e = exp(-S/4):
//   out[0]                += sum_{i<j} e (1 - w e)
//   out[1 + idx(a, b)]    += sum_{i<j} e (1 - 2 w e) u_a u_b      for a <= b, row-major upper triangle
// scratch holds d vectors of u and P = d(d+1)/2 vector accumulators; accumulators are summed into out
// every ~kLscvGroup vectors, like lscv_tile.
template <class V>
void lscv_moments_tile(const LscvJob<typename V::value_type>& job, const Tile& t, typename V::value_type* scratch,
                       double* out) {
    using T = typename V::value_type;
    constexpr std::size_t W = V::W;
    const std::size_t d = job.z.d;
    const std::size_t P = d * (d + 1) / 2;
    T* u = scratch;                 // d * W
    T* acc = scratch + d * W;       // P * W
    const V c = V::set1(job.neg_quarter_scales[0]);
    const V s_max = V::set1(exp2_arg_limit<T>(job.neg_quarter_scales[0]));
    const V one = V::set1(T(1));
    const V w2 = V::set1(T(2) * job.w);
    const double w = static_cast<double>(job.w);
    V e1 = V::zero(), e2 = V::zero();
    for (std::size_t q = 0; q < P * W; ++q) acc[q] = T(0);
    std::size_t pending = 0;
    auto flush = [&]() {
        out[0] += V::hsum(e1) - w * V::hsum(e2);
        for (std::size_t q = 0; q < P; ++q) out[1 + q] += V::hsum(V::load(acc + q * W));
        for (std::size_t q = 0; q < P * W; ++q) acc[q] = T(0);
        e1 = V::zero();
        e2 = V::zero();
        pending = 0;
    };
    for (std::size_t i = t.i0; i < t.i1; ++i) {
        for (std::size_t j = row_begin(t, i); j < t.j1; j += W) {
            V s = V::zero();
            for (std::size_t k = 0; k < d; ++k) {
                const V diff = V::set1(job.z.data[k * job.z.stride + i]) - V::load(job.z.data + k * job.z.stride + j);
                V::store(u + k * W, diff);
                s = V::fma(diff, diff, s);
            }
            V e = exp2_mul(V::min(s, s_max), c);
            if (j + W > t.j1) e = e * first_lanes<V>(t.j1 - j);
            e1 = e1 + e;
            e2 = V::fma(e, e, e2);
            const V weight = e * V::fnma(w2, e, one);
            std::size_t q = 0;
            for (std::size_t a = 0; a < d; ++a) {
                const V wa = weight * V::load(u + a * W);
                for (std::size_t b = a; b < d; ++b, ++q)
                    V::store(acc + q * W, V::fma(wa, V::load(u + b * W), V::load(acc + q * W)));
            }
            if (++pending >= kLscvGroup) flush();
        }
    }
    if (pending > 0) flush();
}

// ---------------------------------------------------------------- KDE sums over a block of the sample
template <class V>
void kde_block(const KdeJob<typename V::value_type>& job, const Tile& t, double* out) {
    using T = typename V::value_type;
    constexpr std::size_t W = V::W;
    const V c = V::set1(T(-0.5 * kLog2e));
    const V s_max = V::set1(exp2_arg_limit<T>(-0.5 * kLog2e));
    for (std::size_t i = t.i0; i < t.i1; ++i) {
        V acc = V::zero();
        std::size_t j = t.j0;
        for (; j + W <= t.j1; j += W)
            acc = acc + exp2_mul(V::min(squared_distance<V>(job.points, i, job.sample, j), s_max), c);
        if (j < t.j1)
            acc = V::fma(exp2_mul(V::min(squared_distance<V>(job.points, i, job.sample, j), s_max), c),
                         first_lanes<V>(t.j1 - j), acc);
        out[i - t.i0] += V::hsum(acc);
    }
}

// exp(x) for x <= 0, as the kernels compute it: 2^(x log2 e).
template <class V>
void exp_nonpos_array(const typename V::value_type* x, typename V::value_type* y, std::size_t n) {
    using T = typename V::value_type;
    constexpr std::size_t W = V::W;
    const V log2e = V::set1(T(kLog2e));
    const V x_min = V::set1(-exp2_arg_limit<T>(kLog2e));
    std::size_t j = 0;
    for (; j + W <= n; j += W) V::store(y + j, exp2_mul(V::max(V::load(x + j), x_min), log2e));
    if (j < n) {
        T in[16] = {0}, res[16];
        for (std::size_t q = j; q < n; ++q) in[q - j] = x[q];
        V::store(res, exp2_mul(V::max(V::load(in), x_min), log2e));
        for (std::size_t q = j; q < n; ++q) y[q] = res[q - j];
    }
}

#define PG_KDE_STR2(x) #x
#define PG_KDE_STR(x) PG_KDE_STR2(x)

const KernelTable<float>* table(float) {
    static const KernelTable<float> table = {PG_KDE_STR(PG_KDE_ISA_NS),    &plugin_tile<PG_KDE_VF>,
                                             &lscv_tile<PG_KDE_VF>,         &lscv_moments_tile<PG_KDE_VF>,
                                             &kde_block<PG_KDE_VF>,         &exp_nonpos_array<PG_KDE_VF>};
    return &table;
}

const KernelTable<double>* table(double) {
    static const KernelTable<double> table = {PG_KDE_STR(PG_KDE_ISA_NS),   &plugin_tile<PG_KDE_VD>,
                                              &lscv_tile<PG_KDE_VD>,        &lscv_moments_tile<PG_KDE_VD>,
                                              &kde_block<PG_KDE_VD>,        &exp_nonpos_array<PG_KDE_VD>};
    return &table;
}

}  // namespace PG_KDE_ISA_NS
}  // namespace pg_kde
