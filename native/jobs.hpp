// Plain data shared by the per-ISA kernel translation units and the driver (engine.cpp).
//
// The kernels never allocate and use no standard-library templates: the driver owns all memory and
// threads, the kernels only read job descriptions and write into buffers they are handed.
#pragma once

#include <cstddef>

namespace pg_kde {

// Points stored structure-of-arrays: coordinate k of point j is data[k * stride + j]. Every row is
// padded with zeros past n (at least 16 values), so a vector load that starts before n never reads
// outside the buffer.
template <class T>
struct Points {
    const T* data;
    std::size_t n;
    std::size_t d;
    std::size_t stride;
};

// A rectangle of the pair matrix: rows [i0, i1) against columns [j0, j1). On a diagonal tile
// (i0 == j0) only pairs with j > i are visited.
struct Tile {
    std::size_t i0, i1, j0, j1;
    bool diagonal;
};

// PLUGIN: sum over i<j of poly_r(u^2) exp(-u^2/2), u = (x_i - x_j)/g, r = 2, 4 or 6, where
// K^(r)(u) = poly_r(u^2) phi(u). The kernel takes c = -1/(2 g^2), so that -u^2/2 = c (x_i - x_j)^2.
template <class T>
struct PluginJob {
    const T* x;  // padded, length >= n + 16
    std::size_t n;
    T neg_half_inv_g2;
    int order;
};

// LSCV pair sums for several scales s_m (s = 1/h^2 on sphered data, or 1 on data transformed by L^-1):
//   A_m = sum_{i<j} e (1 - w e)            with e = exp(-S_ij s_m / 4), S_ij = |z_i - z_j|^2
//   D_m = sum_{i<j} S_ij e (1 - 2 w e)     (only when derivative is true)
// The kernel receives -s_m log2(e) / 4 per scale (its exponentials are powers of 2).
template <class T>
struct LscvJob {
    Points<T> z;
    const T* neg_quarter_scales;
    std::size_t k;
    T w;
    bool derivative;
};

// KDE sums: for every point p_i, sum_j exp(-|p_i - x_j|^2 / 2) over the sample x (both already
// transformed by L^-1 where H = L L^T).
template <class T>
struct KdeJob {
    Points<T> points;
    Points<T> sample;
};

template <class T>
struct KernelTable {
    const char* name;
    // Returns the tile's sum.
    double (*plugin_tile)(const PluginJob<T>& job, const Tile& tile);
    // Adds the tile's sums into out[0..k) (A) and out[k..2k) (D). row is scratch of >= tile width + 80 * 16.
    void (*lscv_tile)(const LscvJob<T>& job, const Tile& tile, T* row, double* out);
    // LSCV_H value and gradient moments (scale 1): adds into out[0] (A) and out[1 .. 1 + d(d+1)/2)
    // (sum e(1 - 2we) u_a u_b, a <= b). scratch holds >= (d + d(d+1)/2) * 16 values.
    void (*lscv_moments_tile)(const LscvJob<T>& job, const Tile& tile, T* scratch, double* out);
    // Adds, for points [i0, i1), the sums over samples [j0, j1) into out[0 .. i1-i0).
    void (*kde_block)(const KdeJob<T>& job, const Tile& tile, double* out);
    // y = exp(x) for x <= 0 with the kernels' own exponential (used by tests of its accuracy).
    void (*exp_nonpos)(const T* x, T* y, std::size_t n);
};

// Each ISA namespace provides its kernels for both element types, overloaded on a tag value.
#define PG_KDE_DECLARE_ISA(ns)                  \
    namespace ns {                              \
    const KernelTable<float>* table(float);     \
    const KernelTable<double>* table(double);   \
    }

PG_KDE_DECLARE_ISA(generic)
#if defined(PG_KDE_HAVE_AVX2)
PG_KDE_DECLARE_ISA(avx2)
#endif
#if defined(PG_KDE_HAVE_AVX512)
PG_KDE_DECLARE_ISA(avx512)
#endif

}  // namespace pg_kde
