// pg_kde._native: Python bindings for the native engine (engine.hpp). Only wiring lives here.
//
// Every array argument must be a C-contiguous float32 or float64 array; all arrays of one call must
// share that dtype (the Python layer, pg_kde._backends, guarantees it). The GIL is released while
// the kernels run.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine.hpp"

namespace py = pybind11;

namespace {

template <class T>
using CArray = py::array_t<T, py::array::c_style>;

// Calls f(T{}) with T the element type of `a` (float or double).
template <class F>
auto with_dtype(const py::array& a, F&& f) {
    if (py::isinstance<CArray<float>>(a)) return f(float{});
    if (py::isinstance<CArray<double>>(a)) return f(double{});
    throw py::type_error("pg_kde._native expects C-contiguous float32 or float64 arrays, got dtype " +
                         std::string(py::str(a.dtype())));
}

template <class T>
CArray<T> as_c(const py::array& a, const char* what) {
    if (!py::isinstance<CArray<T>>(a))
        throw py::type_error(std::string(what) + " must be a C-contiguous array of the same dtype as the data");
    return py::reinterpret_borrow<CArray<T>>(a);
}

// (n,) is read as (n, 1).
std::pair<std::size_t, std::size_t> shape_nd(const py::array& a, const char* what) {
    if (a.ndim() == 1) return {static_cast<std::size_t>(a.shape(0)), 1};
    if (a.ndim() == 2) return {static_cast<std::size_t>(a.shape(0)), static_cast<std::size_t>(a.shape(1))};
    throw py::value_error(std::string(what) + " must have shape (n,) or (n, d)");
}

pg_kde::RunOptions options(const std::string& isa, int threads) { return pg_kde::RunOptions{isa, threads}; }

// Rows [row_begin, row_end) of the pair matrix; row_end None means every row from row_begin on.
pg_kde::RowRange row_range(std::size_t row_begin, std::optional<std::size_t> row_end) {
    pg_kde::RowRange rows;
    rows.begin = row_begin;
    if (row_end) rows.end = *row_end;
    return rows;
}

double plugin_pair_sum(const py::array& x, double g, int order, const std::string& isa, int threads,
                       bool sequential, std::size_t row_begin, std::optional<std::size_t> row_end) {
    const pg_kde::RowRange rows = row_range(row_begin, row_end);
    if (x.ndim() != 1) throw py::value_error("x must be one-dimensional");
    return with_dtype(x, [&](auto tag) {
        using T = decltype(tag);
        CArray<T> a = as_c<T>(x, "x");
        const T* p = a.data();
        const std::size_t n = static_cast<std::size_t>(a.shape(0));
        py::gil_scoped_release release;
        return sequential ? pg_kde::sequential_plugin_pair_sum<T>(p, n, g, order, rows)
                          : pg_kde::plugin_pair_sum<T>(p, n, g, order, options(isa, threads), rows);
    });
}

py::tuple lscv_pair_sums(const py::array& z, const CArray<double>& scales, double w, bool derivative,
                         const std::string& isa, int threads, bool sequential, std::size_t row_begin,
                         std::optional<std::size_t> row_end) {
    const pg_kde::RowRange rows = row_range(row_begin, row_end);
    const auto [n, d] = shape_nd(z, "z");
    if (scales.ndim() != 1) throw py::value_error("scales must be one-dimensional");
    const std::size_t k = static_cast<std::size_t>(scales.shape(0));
    CArray<double> a(static_cast<py::ssize_t>(k));
    py::object dres = py::none();
    double* dptr = nullptr;
    if (derivative) {
        CArray<double> dsum(static_cast<py::ssize_t>(k));
        dptr = dsum.mutable_data();
        dres = dsum;
    }
    double* aptr = a.mutable_data();
    with_dtype(z, [&](auto tag) {
        using T = decltype(tag);
        CArray<T> zz = as_c<T>(z, "z");
        const T* p = zz.data();
        const double* s = scales.data();
        py::gil_scoped_release release;
        if (sequential)
            pg_kde::sequential_lscv_pair_sums<T>(p, n, d, s, k, w, aptr, dptr, rows);
        else
            pg_kde::lscv_pair_sums<T>(p, n, d, s, k, w, aptr, dptr, options(isa, threads), rows);
        return 0;
    });
    return py::make_tuple(a, dres);
}

py::tuple lscv_moments(const py::array& z, double w, const std::string& isa, int threads, bool sequential,
                       std::size_t row_begin, std::optional<std::size_t> row_end) {
    const pg_kde::RowRange rows = row_range(row_begin, row_end);
    const auto [n, d] = shape_nd(z, "z");
    CArray<double> m(static_cast<py::ssize_t>(d * (d + 1) / 2));
    double* mptr = m.mutable_data();
    double a = 0.0;
    with_dtype(z, [&](auto tag) {
        using T = decltype(tag);
        CArray<T> zz = as_c<T>(z, "z");
        const T* p = zz.data();
        py::gil_scoped_release release;
        if (sequential)
            pg_kde::sequential_lscv_moments<T>(p, n, d, w, &a, mptr, rows);
        else
            pg_kde::lscv_moments<T>(p, n, d, w, &a, mptr, options(isa, threads), rows);
        return 0;
    });
    return py::make_tuple(a, m);
}

CArray<double> kde_sums(const py::array& points, const py::array& sample, const std::string& isa, int threads,
                        bool sequential) {
    const auto [m, dp] = shape_nd(points, "points");
    const auto [n, ds] = shape_nd(sample, "sample");
    if (dp != ds) throw py::value_error("points and sample must have the same number of columns");
    CArray<double> out(static_cast<py::ssize_t>(m));
    double* optr = out.mutable_data();
    with_dtype(sample, [&](auto tag) {
        using T = decltype(tag);
        CArray<T> pp = as_c<T>(points, "points");
        CArray<T> ss = as_c<T>(sample, "sample");
        const T* p = pp.data();
        const T* s = ss.data();
        py::gil_scoped_release release;
        if (sequential)
            pg_kde::sequential_kde_sums<T>(p, m, s, n, dp, optr);
        else
            pg_kde::kde_sums<T>(p, m, s, n, dp, optr, options(isa, threads));
        return 0;
    });
    return out;
}

py::array exp_nonpos(const py::array& x, const std::string& isa) {
    return with_dtype(x, [&](auto tag) -> py::array {
        using T = decltype(tag);
        CArray<T> a = as_c<T>(x, "x");
        CArray<T> y(a.size());
        pg_kde::exp_nonpos<T>(a.data(), y.mutable_data(), static_cast<std::size_t>(a.size()), isa);
        return y;
    });
}

// The O(n d²) steps around the pair sums, on one thread, in plain loops: NumPy's einsum took as long as a
// CUDA pass at n = 1024, d = 16, and its BLAS matmul would start threads that spin on the cores the native
// pair sums are about to use (pg_kde/_linalg.py). float64 in and out.
std::pair<std::size_t, std::size_t> rows_and_centre(const CArray<double>& X, const CArray<double>& centre) {
    const auto [n, d] = shape_nd(X, "X");
    if (centre.ndim() != 1 || static_cast<std::size_t>(centre.shape(0)) != d)
        throw py::value_error("the centre (mean, shift) must have one value per column of X");
    return {n, d};
}

// Σ_i (x_i − m)(x_i − m)ᵀ: row by row in row order, the upper triangle, then mirrored.
CArray<double> centred_gram(const CArray<double>& X, const CArray<double>& mean) {
    const auto [n, d] = rows_and_centre(X, mean);
    std::vector<double> acc(d * d, 0.0), row(d);
    {
        py::gil_scoped_release release;
        const double* x = X.data();
        const double* m = mean.data();
        for (std::size_t i = 0; i < n; ++i) {
            for (std::size_t a = 0; a < d; ++a) row[a] = x[i * d + a] - m[a];
            for (std::size_t a = 0; a < d; ++a) {
                const double ra = row[a];
                double* out = acc.data() + a * d;
                for (std::size_t b = a; b < d; ++b) out[b] += ra * row[b];
            }
        }
    }
    CArray<double> gram({d, d});
    double* g = gram.mutable_data();
    for (std::size_t a = 0; a < d; ++a)
        for (std::size_t b = a; b < d; ++b) g[a * d + b] = g[b * d + a] = acc[a * d + b];
    return gram;
}

// M = L⁻¹ for a lower-triangular L (d × d) with a nonzero diagonal, by forward substitution on the identity
// (row a of L M = I): M[a][j] = −Σ_{j<=k<a} L[a][k] M[k][j] / L[a][a], M[a][a] = 1 / L[a][a].
CArray<double> lower_inverse(const CArray<double>& chol) {
    if (chol.ndim() != 2 || chol.shape(0) != chol.shape(1)) throw py::value_error("L must be a square matrix");
    const std::size_t d = static_cast<std::size_t>(chol.shape(0));
    CArray<double> out({d, d});
    const double* L = chol.data();
    double* M = out.mutable_data();
    std::fill(M, M + d * d, 0.0);
    for (std::size_t a = 0; a < d; ++a) {
        for (std::size_t j = 0; j < a; ++j) {
            double s = 0.0;
            for (std::size_t k = j; k < a; ++k) s += L[a * d + k] * M[k * d + j];
            M[a * d + j] = -s / L[a * d + a];
        }
        M[a * d + a] = 1.0 / L[a * d + a];
    }
    return out;
}

// Rows z_i = M(x_i − c) for a d × d matrix M: each row as Σ_k (x_ik − c_k) M[:, k], column by column, so
// that the d sums of a row are independent and the loop over them vectorises.
CArray<double> transform_rows(const CArray<double>& X, const CArray<double>& shift, const CArray<double>& matrix) {
    const auto [n, d] = rows_and_centre(X, shift);
    if (matrix.ndim() != 2 || static_cast<std::size_t>(matrix.shape(0)) != d ||
        static_cast<std::size_t>(matrix.shape(1)) != d)
        throw py::value_error("the matrix must be d x d, d the columns of X");
    CArray<double> out({n, d});
    {
        py::gil_scoped_release release;
        const double* M = matrix.data();
        std::vector<double> Mt(d * d);  // Mt[k * d + a] = M[a][k]: column k of M, contiguous
        for (std::size_t a = 0; a < d; ++a)
            for (std::size_t k = 0; k < d; ++k) Mt[k * d + a] = M[a * d + k];
        const double* x = X.data();
        const double* c = shift.data();
        double* z = out.mutable_data();
        for (std::size_t i = 0; i < n; ++i) {
            double* __restrict zi = z + i * d;
            for (std::size_t a = 0; a < d; ++a) zi[a] = 0.0;
            for (std::size_t k = 0; k < d; ++k) {
                const double v = x[i * d + k] - c[k];
                const double* __restrict col = Mt.data() + k * d;
                for (std::size_t a = 0; a < d; ++a) zi[a] += col[a] * v;
            }
        }
    }
    return out;
}

}  // namespace

PYBIND11_MODULE(_native, m) {
    m.doc() = "pg_kde native backend: SIMD pair sums for bandwidth selection and KDE evaluation";
    py::register_exception<std::invalid_argument>(m, "NativeArgumentError", PyExc_ValueError);

    m.def("available_isas", &pg_kde::available_isas,
          "Instruction sets this build can use on this CPU, best first.");
    m.def("default_threads", &pg_kde::default_threads,
          "Threads used when threads <= 0: PG_KDE_THREADS if set, else all hardware threads.");
    m.def("plugin_pair_sum", &plugin_pair_sum, py::arg("x"), py::arg("g"), py::arg("order"), py::arg("isa") = "",
          py::arg("threads") = 0, py::arg("sequential") = false, py::arg("row_begin") = 0,
          py::arg("row_end") = py::none(),
          "sum over i<j, row_begin <= i < row_end, of poly_r(u^2) exp(-u^2/2), u = (x_i - x_j)/g, r = order "
          "(2, 4 or 6).");
    m.def("lscv_pair_sums", &lscv_pair_sums, py::arg("z"), py::arg("scales"), py::arg("w"),
          py::arg("derivative") = false, py::arg("isa") = "", py::arg("threads") = 0, py::arg("sequential") = false,
          py::arg("row_begin") = 0, py::arg("row_end") = py::none(),
          "For each scale s: (sum e(1 - w e), sum S e(1 - 2 w e)) over i<j, row_begin <= i < row_end, "
          "e = exp(-S s / 4), S = |z_i - z_j|^2.");
    m.def("lscv_moments", &lscv_moments, py::arg("z"), py::arg("w"), py::arg("isa") = "", py::arg("threads") = 0,
          py::arg("sequential") = false, py::arg("row_begin") = 0, py::arg("row_end") = py::none(),
          "(sum e(1 - w e), [sum e(1 - 2 w e) u_a u_b for a <= b]) over i<j, row_begin <= i < row_end, "
          "u = z_i - z_j, e = exp(-|u|^2 / 4).");
    m.def("kde_sums", &kde_sums, py::arg("points"), py::arg("sample"), py::arg("isa") = "", py::arg("threads") = 0,
          py::arg("sequential") = false, "For each point p: sum over the sample of exp(-|p - x|^2 / 2).");
    m.def("centred_gram", &centred_gram, py::arg("X"), py::arg("mean"),
          "sum over the rows of (x - mean)(x - mean)^T, X of shape (n,) or (n, d), float64, C-contiguous.");
    m.def("lower_inverse", &lower_inverse, py::arg("L"),
          "L^-1 of a lower-triangular L with a nonzero diagonal (float64, C-contiguous), by forward substitution.");
    m.def("transform_rows", &transform_rows, py::arg("X"), py::arg("shift"), py::arg("matrix"),
          "Rows matrix (x - shift) of X (n, d), matrix d x d (float64, C-contiguous).");
    m.def("exp_nonpos", &exp_nonpos, py::arg("x"), py::arg("isa") = "",
          "exp(x) for x <= 0 computed by the kernels' own vector exponential.");
}
