#include "engine.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "jobs.hpp"

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

namespace pg_kde {
namespace {

bool cpu_has_avx2() {
#if defined(PG_KDE_HAVE_AVX2)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

bool cpu_has_avx512() {
#if defined(PG_KDE_HAVE_AVX512)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
#else
    return false;
#endif
}

template <class T>
const KernelTable<T>* isa_table(const std::string& isa) {
#if defined(PG_KDE_HAVE_AVX512)
    if (isa == "avx512") return avx512::table(T{});
#endif
#if defined(PG_KDE_HAVE_AVX2)
    if (isa == "avx2") return avx2::table(T{});
#endif
    return generic::table(T{});
}

template <class T>
const KernelTable<T>* select_table(const std::string& isa) {
    const std::vector<std::string> isas = available_isas();
    if (isa.empty()) return isa_table<T>(isas.front());
    if (std::find(isas.begin(), isas.end(), isa) == isas.end()) {
        std::string valid;
        for (const auto& s : isas) valid += (valid.empty() ? "" : ", ") + s;
        throw std::invalid_argument("instruction set '" + isa + "' is not available on this CPU or build; available: " +
                                    valid);
    }
    return isa_table<T>(isa);
}

constexpr double kLog2e = 1.4426950408889634074;

std::size_t round_up(std::size_t v, std::size_t m) { return (v + m - 1) / m * m; }

// Structure-of-arrays copy with zero padding (see Points in jobs.hpp).
template <class T>
struct SoA {
    std::vector<T> buf;
    Points<T> view;
    SoA(const T* rowmajor, std::size_t n, std::size_t d) {
        const std::size_t stride = round_up(n, 16) + 32;
        buf.assign(stride * std::max<std::size_t>(d, 1), T(0));
        for (std::size_t j = 0; j < n; ++j)
            for (std::size_t k = 0; k < d; ++k) buf[k * stride + j] = rowmajor[j * d + k];
        view = Points<T>{buf.data(), n, d, stride};
    }
};

// Block edge for tiles over n points of dimension d: small enough that a column block stays in the
// 32 KiB L1 cache and that there are at least ~8 blocks (so 2 threads get >= 36 tiles to share).
template <class T>
std::size_t block_size(std::size_t n, std::size_t d) {
    const std::size_t cache_points = std::max<std::size_t>(64, 16384 / (std::max<std::size_t>(d, 1) * sizeof(T)));
    const std::size_t split = round_up((n + 7) / 8, 16);
    return std::max<std::size_t>(16, std::min({cache_points, split, std::size_t(1024)}));
}

// The tiles of the upper triangle (pairs j > i) whose rows lie in [rows.begin, rows.end): the tiles of the
// whole triangle (row and column blocks at multiples of `block`), cut to the range's rows.
std::vector<Tile> triangular_tiles(std::size_t n, std::size_t block, RowRange rows) {
    std::vector<Tile> tiles;
    for (std::size_t i0 = rows.begin / block * block; i0 < rows.end; i0 += block)
        for (std::size_t j0 = i0; j0 < n; j0 += block)
            tiles.push_back(Tile{std::max(i0, rows.begin), std::min({n, i0 + block, rows.end}), j0,
                                 std::min(n, j0 + block), i0 == j0});
    return tiles;
}

// rows with its end clamped to n; throws if it does not lie within [0, n].
RowRange clamp_rows(RowRange rows, std::size_t n) {
    rows.end = std::min(rows.end, n);
    if (rows.begin > rows.end)
        throw std::invalid_argument("row range [" + std::to_string(rows.begin) + ", " + std::to_string(rows.end) +
                                    ") is empty or outside the " + std::to_string(n) + " rows");
    return rows;
}

int resolve_threads(int threads, std::size_t tasks) {
    int t = threads > 0 ? threads : default_threads();
    return static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(static_cast<std::size_t>(t), tasks)));
}

// While alive, the calling thread flushes denormal results and inputs to zero (x86 MXCSR FTZ + DAZ), and
// restores its previous mode afterwards. Kernel terms such as e^2 for e near the float limit would
// otherwise be denormal, and every denormal result costs a microcode assist (seen: 4x slower LSCV
// passes). The values affected are below 2^-126 (float) / 2^-1022 (double), far under the sums' rounding.
class FlushDenormals {
   public:
#if defined(__SSE2__)
    FlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
    ~FlushDenormals() { _mm_setcsr(saved_); }

   private:
    unsigned int saved_;
#endif
};

// Runs body(task, worker) for every task in [0, ntasks) on `threads` workers (dynamic scheduling).
// The first exception thrown by a worker is rethrown here after all workers stop.
template <class Body>
void parallel_for(std::size_t ntasks, int threads, Body&& body) {
    if (threads <= 1) {
        FlushDenormals ftz;
        for (std::size_t t = 0; t < ntasks; ++t) body(t, 0);
        return;
    }
    std::atomic<std::size_t> next{0};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto worker = [&](int id) {
        FlushDenormals ftz;
        try {
            for (std::size_t t = next++; t < ntasks; t = next++) body(t, id);
        } catch (...) {
            std::lock_guard<std::mutex> lock(error_mutex);
            if (!error) error = std::current_exception();
            next = ntasks;
        }
    };
    std::vector<std::thread> pool;
    pool.reserve(static_cast<std::size_t>(threads - 1));
    for (int id = 1; id < threads; ++id) pool.emplace_back(worker, id);
    worker(0);
    for (auto& th : pool) th.join();
    if (error) std::rethrow_exception(error);
}

void check_order(int order) {
    if (order != 2 && order != 4 && order != 6)
        throw std::invalid_argument("PLUGIN kernel derivative order must be 2, 4 or 6");
}

}  // namespace

std::vector<std::string> available_isas() {
    std::vector<std::string> isas;
    if (cpu_has_avx512()) isas.push_back("avx512");
    if (cpu_has_avx2()) isas.push_back("avx2");
    isas.push_back("generic");
    return isas;
}

int default_threads() {
    if (const char* env = std::getenv("PG_KDE_THREADS")) {
        const int t = std::atoi(env);
        if (t > 0) return t;
    }
    const unsigned hw = std::thread::hardware_concurrency();
    return hw > 0 ? static_cast<int>(hw) : 1;
}

template <class T>
double plugin_pair_sum(const T* x, std::size_t n, double g, int order, const RunOptions& opt, RowRange rows) {
    check_order(order);
    const KernelTable<T>* table = select_table<T>(opt.isa);
    rows = clamp_rows(rows, n);
    if (n < 2 || rows.begin == rows.end) return 0.0;
    SoA<T> data(x, n, 1);
    const PluginJob<T> job{data.view.data, n, static_cast<T>(-0.5 / (g * g)), order};
    const std::vector<Tile> tiles = triangular_tiles(n, block_size<T>(n, 1), rows);
    std::vector<double> partial(tiles.size(), 0.0);
    parallel_for(tiles.size(), resolve_threads(opt.threads, tiles.size()),
                 [&](std::size_t t, int) { partial[t] = table->plugin_tile(job, tiles[t]); });
    double total = 0.0;
    for (double p : partial) total += p;
    return total;
}

template <class T>
void lscv_pair_sums(const T* z, std::size_t n, std::size_t d, const double* scales, std::size_t k, double w,
                    double* a, double* dsum, const RunOptions& opt, RowRange rows) {
    const KernelTable<T>* table = select_table<T>(opt.isa);
    std::fill(a, a + k, 0.0);
    if (dsum) std::fill(dsum, dsum + k, 0.0);
    rows = clamp_rows(rows, n);
    if (n < 2 || k == 0 || rows.begin == rows.end) return;
    SoA<T> data(z, n, d);
    std::vector<T> coef(k);
    for (std::size_t m = 0; m < k; ++m) coef[m] = static_cast<T>(-scales[m] * kLog2e / 4.0);
    const LscvJob<T> job{data.view, coef.data(), k, static_cast<T>(w), dsum != nullptr};
    const std::size_t block = block_size<T>(n, d);
    const std::vector<Tile> tiles = triangular_tiles(n, block, rows);
    const int threads = resolve_threads(opt.threads, tiles.size());
    std::vector<double> partial(tiles.size() * 2 * k, 0.0);
    // Scratch for a group of rows: up to 64 vectors waiting plus one more row (see lscv_tile).
    std::vector<std::vector<T>> row_scratch(static_cast<std::size_t>(threads), std::vector<T>(block + 80 * 16));
    parallel_for(tiles.size(), threads, [&](std::size_t t, int id) {
        table->lscv_tile(job, tiles[t], row_scratch[static_cast<std::size_t>(id)].data(), partial.data() + t * 2 * k);
    });
    for (std::size_t t = 0; t < tiles.size(); ++t)
        for (std::size_t m = 0; m < k; ++m) {
            a[m] += partial[t * 2 * k + m];
            if (dsum) dsum[m] += partial[t * 2 * k + k + m];
        }
}

template <class T>
void lscv_moments(const T* z, std::size_t n, std::size_t d, double w, double* a, double* m, const RunOptions& opt,
                  RowRange rows) {
    const KernelTable<T>* table = select_table<T>(opt.isa);
    const std::size_t P = d * (d + 1) / 2;
    *a = 0.0;
    std::fill(m, m + P, 0.0);
    rows = clamp_rows(rows, n);
    if (n < 2 || rows.begin == rows.end) return;
    SoA<T> data(z, n, d);
    const T coef = static_cast<T>(-kLog2e / 4.0);
    const LscvJob<T> job{data.view, &coef, 1, static_cast<T>(w), false};
    const std::vector<Tile> tiles = triangular_tiles(n, block_size<T>(n, d), rows);
    const int threads = resolve_threads(opt.threads, tiles.size());
    std::vector<double> partial(tiles.size() * (1 + P), 0.0);
    std::vector<std::vector<T>> scratch(static_cast<std::size_t>(threads), std::vector<T>((d + P) * 16));
    parallel_for(tiles.size(), threads, [&](std::size_t t, int id) {
        table->lscv_moments_tile(job, tiles[t], scratch[static_cast<std::size_t>(id)].data(),
                                 partial.data() + t * (1 + P));
    });
    for (std::size_t t = 0; t < tiles.size(); ++t) {
        *a += partial[t * (1 + P)];
        for (std::size_t q = 0; q < P; ++q) m[q] += partial[t * (1 + P) + 1 + q];
    }
}

template <class T>
void kde_sums(const T* points, std::size_t m, const T* sample, std::size_t n, std::size_t d, double* out,
              const RunOptions& opt) {
    const KernelTable<T>* table = select_table<T>(opt.isa);
    std::fill(out, out + m, 0.0);
    if (m == 0 || n == 0) return;
    SoA<T> p(points, m, d), s(sample, n, d);
    const KdeJob<T> job{p.view, s.view};
    const std::size_t sample_block = block_size<T>(n, d);
    // Each task owns a block of points and sweeps the sample block by block, in order.
    const std::size_t point_block = std::max<std::size_t>(1, std::min<std::size_t>(256, (m + 15) / 16));
    const std::size_t tasks = (m + point_block - 1) / point_block;
    parallel_for(tasks, resolve_threads(opt.threads, tasks), [&](std::size_t t, int) {
        const std::size_t i0 = t * point_block, i1 = std::min(m, i0 + point_block);
        for (std::size_t j0 = 0; j0 < n; j0 += sample_block)
            table->kde_block(job, Tile{i0, i1, j0, std::min(n, j0 + sample_block), false}, out + i0);
    });
}

template <class T>
void exp_nonpos(const T* x, T* y, std::size_t n, const std::string& isa) {
    select_table<T>(isa)->exp_nonpos(x, y, n);
}

// ---------------------------------------------------------------- sequential baseline
template <class T>
double sequential_plugin_pair_sum(const T* x, std::size_t n, double g, int order, RowRange rows) {
    check_order(order);
    rows = clamp_rows(rows, n);
    const T inv_g = static_cast<T>(1.0 / g);
    double total = 0.0;
    for (std::size_t i = rows.begin; i < rows.end; ++i)
        for (std::size_t j = i + 1; j < n; ++j) {
            const T u = (x[i] - x[j]) * inv_g;
            const T u2 = u * u;
            const T e = std::exp(-u2 / T(2));
            const T p = order == 2   ? (u2 - T(1))
                        : order == 4 ? (u2 * u2 - T(6) * u2 + T(3))
                                     : (u2 * u2 * u2 - T(15) * u2 * u2 + T(45) * u2 - T(15));
            total += static_cast<double>(p * e);
        }
    return total;
}

template <class T>
void sequential_lscv_pair_sums(const T* z, std::size_t n, std::size_t d, const double* scales, std::size_t k,
                               double w, double* a, double* dsum, RowRange rows) {
    rows = clamp_rows(rows, n);
    const T wt = static_cast<T>(w);
    for (std::size_t m = 0; m < k; ++m) {
        const T c = static_cast<T>(-scales[m] / 4.0);
        double sa = 0.0, sd = 0.0;
        for (std::size_t i = rows.begin; i < rows.end; ++i)
            for (std::size_t j = i + 1; j < n; ++j) {
                T s = 0;
                for (std::size_t q = 0; q < d; ++q) {
                    const T diff = z[i * d + q] - z[j * d + q];
                    s += diff * diff;
                }
                const T e = std::exp(s * c);
                sa += static_cast<double>(e * (T(1) - wt * e));
                if (dsum) sd += static_cast<double>(s * e * (T(1) - T(2) * wt * e));
            }
        a[m] = sa;
        if (dsum) dsum[m] = sd;
    }
}

template <class T>
void sequential_lscv_moments(const T* z, std::size_t n, std::size_t d, double w, double* a, double* m,
                             RowRange rows) {
    rows = clamp_rows(rows, n);
    const T wt = static_cast<T>(w);
    std::vector<T> u(d);
    double sa = 0.0;
    std::vector<double> sm(d * (d + 1) / 2, 0.0);
    for (std::size_t i = rows.begin; i < rows.end; ++i)
        for (std::size_t j = i + 1; j < n; ++j) {
            T s = 0;
            for (std::size_t q = 0; q < d; ++q) {
                u[q] = z[i * d + q] - z[j * d + q];
                s += u[q] * u[q];
            }
            const T e = std::exp(-s / T(4));
            sa += static_cast<double>(e * (T(1) - wt * e));
            const T weight = e * (T(1) - T(2) * wt * e);
            std::size_t q = 0;
            for (std::size_t p = 0; p < d; ++p)
                for (std::size_t r = p; r < d; ++r, ++q) sm[q] += static_cast<double>(weight * u[p] * u[r]);
        }
    *a = sa;
    std::copy(sm.begin(), sm.end(), m);
}

template <class T>
void sequential_kde_sums(const T* points, std::size_t m, const T* sample, std::size_t n, std::size_t d,
                         double* out) {
    for (std::size_t i = 0; i < m; ++i) {
        double acc = 0.0;
        for (std::size_t j = 0; j < n; ++j) {
            T s = 0;
            for (std::size_t q = 0; q < d; ++q) {
                const T diff = points[i * d + q] - sample[j * d + q];
                s += diff * diff;
            }
            acc += static_cast<double>(std::exp(-s / T(2)));
        }
        out[i] = acc;
    }
}

#define PG_KDE_INSTANTIATE(T)                                                                                 \
    template double plugin_pair_sum<T>(const T*, std::size_t, double, int, const RunOptions&, RowRange);     \
    template void lscv_pair_sums<T>(const T*, std::size_t, std::size_t, const double*, std::size_t, double,  \
                                    double*, double*, const RunOptions&, RowRange);                          \
    template void lscv_moments<T>(const T*, std::size_t, std::size_t, double, double*, double*,               \
                                  const RunOptions&, RowRange);                                              \
    template void sequential_lscv_moments<T>(const T*, std::size_t, std::size_t, double, double*, double*,   \
                                             RowRange);                                                      \
    template void kde_sums<T>(const T*, std::size_t, const T*, std::size_t, std::size_t, double*,            \
                              const RunOptions&);                                                            \
    template void exp_nonpos<T>(const T*, T*, std::size_t, const std::string&);                              \
    template double sequential_plugin_pair_sum<T>(const T*, std::size_t, double, int, RowRange);             \
    template void sequential_lscv_pair_sums<T>(const T*, std::size_t, std::size_t, const double*,            \
                                               std::size_t, double, double*, double*, RowRange);             \
    template void sequential_kde_sums<T>(const T*, std::size_t, const T*, std::size_t, std::size_t, double*);

PG_KDE_INSTANTIATE(float)
PG_KDE_INSTANTIATE(double)

}  // namespace pg_kde
