// The C++ API of pg_kde's native backend: pair sums over i<j and KDE sums, on the best instruction
// set the CPU offers, in parallel over cache-sized tiles. Knows nothing of Python (bindings.cpp does).
//
// Inputs are row-major (n, d) arrays of float or double. All results are double. Results do not
// depend on the number of threads: every tile writes its own partial sums, added in tile order.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace pg_kde {

// Instruction sets this build can run on this CPU, best first ("avx512", "avx2", "generic").
std::vector<std::string> available_isas();

// Threads used when the caller passes threads <= 0: PG_KDE_THREADS if set, else all hardware threads.
int default_threads();

// Options common to every call. isa "" means the best available.
struct RunOptions {
    std::string isa;
    int threads = 0;
};

// Rows [begin, end) of the pair matrix: the pair sums below then cover only the pairs (i, j) with
// begin <= i < end and j > i (end is clamped to n). Sums over consecutive row ranges add up to the sum over
// all rows: the tiles are those of the whole call cut at the range's edges, so only the order in which
// double partial sums are added changes (and, for the LSCV kernels, how rows at a cut are grouped before
// their vector accumulators are summed). This is how pg_kde runs long sums in slices (pg_kde/_slices.py).
struct RowRange {
    std::size_t begin = 0;
    std::size_t end = static_cast<std::size_t>(-1);
};

// sum_{i<j} poly_r(u^2) exp(-u^2/2), u = (x_i - x_j)/g, r in {2, 4, 6} (K^(r) = poly_r phi).
template <class T>
double plugin_pair_sum(const T* x, std::size_t n, double g, int order, const RunOptions& opt,
                       RowRange rows = RowRange{});

// For each scale s_m: A_m = sum_{i<j} e(1 - w e), D_m = sum_{i<j} S e (1 - 2we), e = exp(-S s_m/4),
// S = |z_i - z_j|^2. a and dsum must hold k values; dsum may be null (derivative not wanted).
template <class T>
void lscv_pair_sums(const T* z, std::size_t n, std::size_t d, const double* scales, std::size_t k,
                    double w, double* a, double* dsum, const RunOptions& opt, RowRange rows = RowRange{});

// LSCV_H value and gradient moments on z = L^-1 x (H = L L^T), u = z_i - z_j, e = exp(-|u|^2/4):
// *a = sum_{i<j} e(1 - w e); m[idx(a,b)] = sum_{i<j} e(1 - 2we) u_a u_b for a <= b (row-major upper
// triangle, d(d+1)/2 values).
template <class T>
void lscv_moments(const T* z, std::size_t n, std::size_t d, double w, double* a, double* m, const RunOptions& opt,
                  RowRange rows = RowRange{});

// out_i = sum_j exp(-|p_i - x_j|^2 / 2). Each point's sum does not depend on the other points (the sample is
// swept in the same blocks for every point), so a range of points is a call on that slice of `points`.
template <class T>
void kde_sums(const T* points, std::size_t m, const T* sample, std::size_t n, std::size_t d, double* out,
              const RunOptions& opt);

// exp(x) for x <= 0 with the kernels' exponential of the given ISA.
template <class T>
void exp_nonpos(const T* x, T* y, std::size_t n, const std::string& isa);

// The paper's "Sequential" baseline: one thread, scalar, a plain double loop over i<j, std::exp; rows as above.
template <class T>
double sequential_plugin_pair_sum(const T* x, std::size_t n, double g, int order, RowRange rows = RowRange{});
template <class T>
void sequential_lscv_pair_sums(const T* z, std::size_t n, std::size_t d, const double* scales, std::size_t k,
                               double w, double* a, double* dsum, RowRange rows = RowRange{});
template <class T>
void sequential_lscv_moments(const T* z, std::size_t n, std::size_t d, double w, double* a, double* m,
                             RowRange rows = RowRange{});
template <class T>
void sequential_kde_sums(const T* points, std::size_t m, const T* sample, std::size_t n, std::size_t d,
                         double* out);

}  // namespace pg_kde
