// SIMD vector types for the pair-sum kernels.
//
// Each instruction set gets a pair of tiny structs (float, double) with the same static interface, so
// the kernels in pair_kernels.hpp are written once as templates over the vector type:
//
//   V::W                 lanes per vector
//   V::load(p)           unaligned load of W values
//   V::set1(x), zero()   broadcast
//   + - *                lane-wise arithmetic
//   fma(a,b,c)           a*b + c      fnma(a,b,c)  c - a*b
//   min(a,b), max(a,b)
//   pow2_of_biased(t)    2^n where the low mantissa bits of t hold n + exponent bias (see exp2_mul)
//   hsum(v)              horizontal sum, in double
//   store(p, v)
//
// The translation unit that includes this header is compiled with the matching -m flags; only the
// types its flags allow are defined. No standard-library templates are used here, so nothing
// compiled with AVX-512 flags can leak into code shared with other translation units.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace pg_kde {
namespace simd {

// ---------------------------------------------------------------- portable scalar fallback (W = 1)
template <class T>
struct Scalar {
    using value_type = T;
    static constexpr int W = 1;
    T v;
    static inline Scalar load(const T* p) { return {*p}; }
    static inline void store(T* p, Scalar a) { *p = a.v; }
    static inline Scalar set1(T x) { return {x}; }
    static inline Scalar zero() { return {T(0)}; }
    friend inline Scalar operator+(Scalar a, Scalar b) { return {a.v + b.v}; }
    friend inline Scalar operator-(Scalar a, Scalar b) { return {a.v - b.v}; }
    friend inline Scalar operator*(Scalar a, Scalar b) { return {a.v * b.v}; }
    // Plain multiply-add: without hardware FMA a fused std::fma is a slow software routine.
    static inline Scalar fma(Scalar a, Scalar b, Scalar c) { return {a.v * b.v + c.v}; }
    static inline Scalar fnma(Scalar a, Scalar b, Scalar c) { return {c.v - a.v * b.v}; }
    static inline Scalar max(Scalar a, Scalar b) { return {a.v > b.v ? a.v : b.v}; }
    static inline Scalar min(Scalar a, Scalar b) { return {a.v < b.v ? a.v : b.v}; }
    static inline double hsum(Scalar a) { return static_cast<double>(a.v); }
    static inline Scalar pow2_of_biased(Scalar t);
};

template <>
inline Scalar<float> Scalar<float>::pow2_of_biased(Scalar<float> t) {
    std::uint32_t bits;
    std::memcpy(&bits, &t.v, 4);
    bits <<= 23;
    float r;
    std::memcpy(&r, &bits, 4);
    return {r};
}

template <>
inline Scalar<double> Scalar<double>::pow2_of_biased(Scalar<double> t) {
    std::uint64_t bits;
    std::memcpy(&bits, &t.v, 8);
    bits <<= 52;
    double r;
    std::memcpy(&r, &bits, 8);
    return {r};
}

#if defined(__AVX2__) && defined(__FMA__)
// ---------------------------------------------------------------- AVX2 + FMA (8 floats, 4 doubles)
struct Avx2F {
    using value_type = float;
    static constexpr int W = 8;
    __m256 v;
    static inline Avx2F load(const float* p) { return {_mm256_loadu_ps(p)}; }
    static inline void store(float* p, Avx2F a) { _mm256_storeu_ps(p, a.v); }
    static inline Avx2F set1(float x) { return {_mm256_set1_ps(x)}; }
    static inline Avx2F zero() { return {_mm256_setzero_ps()}; }
    friend inline Avx2F operator+(Avx2F a, Avx2F b) { return {_mm256_add_ps(a.v, b.v)}; }
    friend inline Avx2F operator-(Avx2F a, Avx2F b) { return {_mm256_sub_ps(a.v, b.v)}; }
    friend inline Avx2F operator*(Avx2F a, Avx2F b) { return {_mm256_mul_ps(a.v, b.v)}; }
    static inline Avx2F fma(Avx2F a, Avx2F b, Avx2F c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
    static inline Avx2F fnma(Avx2F a, Avx2F b, Avx2F c) { return {_mm256_fnmadd_ps(a.v, b.v, c.v)}; }
    static inline Avx2F max(Avx2F a, Avx2F b) { return {_mm256_max_ps(a.v, b.v)}; }
    static inline Avx2F min(Avx2F a, Avx2F b) { return {_mm256_min_ps(a.v, b.v)}; }
    static inline Avx2F pow2_of_biased(Avx2F t) {
        return {_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t.v), 23))};
    }
    static inline double hsum(Avx2F a) {
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(a.v));
        __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(a.v, 1));
        __m256d s = _mm256_add_pd(lo, hi);
        __m128d q = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
        return _mm_cvtsd_f64(_mm_add_sd(q, _mm_unpackhi_pd(q, q)));
    }
};

struct Avx2D {
    using value_type = double;
    static constexpr int W = 4;
    __m256d v;
    static inline Avx2D load(const double* p) { return {_mm256_loadu_pd(p)}; }
    static inline void store(double* p, Avx2D a) { _mm256_storeu_pd(p, a.v); }
    static inline Avx2D set1(double x) { return {_mm256_set1_pd(x)}; }
    static inline Avx2D zero() { return {_mm256_setzero_pd()}; }
    friend inline Avx2D operator+(Avx2D a, Avx2D b) { return {_mm256_add_pd(a.v, b.v)}; }
    friend inline Avx2D operator-(Avx2D a, Avx2D b) { return {_mm256_sub_pd(a.v, b.v)}; }
    friend inline Avx2D operator*(Avx2D a, Avx2D b) { return {_mm256_mul_pd(a.v, b.v)}; }
    static inline Avx2D fma(Avx2D a, Avx2D b, Avx2D c) { return {_mm256_fmadd_pd(a.v, b.v, c.v)}; }
    static inline Avx2D fnma(Avx2D a, Avx2D b, Avx2D c) { return {_mm256_fnmadd_pd(a.v, b.v, c.v)}; }
    static inline Avx2D max(Avx2D a, Avx2D b) { return {_mm256_max_pd(a.v, b.v)}; }
    static inline Avx2D min(Avx2D a, Avx2D b) { return {_mm256_min_pd(a.v, b.v)}; }
    static inline Avx2D pow2_of_biased(Avx2D t) {
        return {_mm256_castsi256_pd(_mm256_slli_epi64(_mm256_castpd_si256(t.v), 52))};
    }
    static inline double hsum(Avx2D a) {
        __m128d q = _mm_add_pd(_mm256_castpd256_pd128(a.v), _mm256_extractf128_pd(a.v, 1));
        return _mm_cvtsd_f64(_mm_add_sd(q, _mm_unpackhi_pd(q, q)));
    }
};
#endif

#if defined(__AVX512F__) && defined(__AVX512DQ__)
// ---------------------------------------------------------------- AVX-512 (16 floats, 8 doubles)
struct Avx512F {
    using value_type = float;
    static constexpr int W = 16;
    __m512 v;
    static inline Avx512F load(const float* p) { return {_mm512_loadu_ps(p)}; }
    static inline void store(float* p, Avx512F a) { _mm512_storeu_ps(p, a.v); }
    static inline Avx512F set1(float x) { return {_mm512_set1_ps(x)}; }
    static inline Avx512F zero() { return {_mm512_setzero_ps()}; }
    friend inline Avx512F operator+(Avx512F a, Avx512F b) { return {_mm512_add_ps(a.v, b.v)}; }
    friend inline Avx512F operator-(Avx512F a, Avx512F b) { return {_mm512_sub_ps(a.v, b.v)}; }
    friend inline Avx512F operator*(Avx512F a, Avx512F b) { return {_mm512_mul_ps(a.v, b.v)}; }
    static inline Avx512F fma(Avx512F a, Avx512F b, Avx512F c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
    static inline Avx512F fnma(Avx512F a, Avx512F b, Avx512F c) { return {_mm512_fnmadd_ps(a.v, b.v, c.v)}; }
    static inline Avx512F max(Avx512F a, Avx512F b) { return {_mm512_max_ps(a.v, b.v)}; }
    static inline Avx512F min(Avx512F a, Avx512F b) { return {_mm512_min_ps(a.v, b.v)}; }
    static inline Avx512F pow2_of_biased(Avx512F t) {
        return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t.v), 23))};
    }
    static inline double hsum(Avx512F a) {
        __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(a.v));
        __m512d hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(a.v, 1));
        return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
    }
};

struct Avx512D {
    using value_type = double;
    static constexpr int W = 8;
    __m512d v;
    static inline Avx512D load(const double* p) { return {_mm512_loadu_pd(p)}; }
    static inline void store(double* p, Avx512D a) { _mm512_storeu_pd(p, a.v); }
    static inline Avx512D set1(double x) { return {_mm512_set1_pd(x)}; }
    static inline Avx512D zero() { return {_mm512_setzero_pd()}; }
    friend inline Avx512D operator+(Avx512D a, Avx512D b) { return {_mm512_add_pd(a.v, b.v)}; }
    friend inline Avx512D operator-(Avx512D a, Avx512D b) { return {_mm512_sub_pd(a.v, b.v)}; }
    friend inline Avx512D operator*(Avx512D a, Avx512D b) { return {_mm512_mul_pd(a.v, b.v)}; }
    static inline Avx512D fma(Avx512D a, Avx512D b, Avx512D c) { return {_mm512_fmadd_pd(a.v, b.v, c.v)}; }
    static inline Avx512D fnma(Avx512D a, Avx512D b, Avx512D c) { return {_mm512_fnmadd_pd(a.v, b.v, c.v)}; }
    static inline Avx512D max(Avx512D a, Avx512D b) { return {_mm512_max_pd(a.v, b.v)}; }
    static inline Avx512D min(Avx512D a, Avx512D b) { return {_mm512_min_pd(a.v, b.v)}; }
    static inline Avx512D pow2_of_biased(Avx512D t) {
        return {_mm512_castsi512_pd(_mm512_slli_epi64(_mm512_castpd_si512(t.v), 52))};
    }
    static inline double hsum(Avx512D a) { return _mm512_reduce_add_pd(a.v); }
};
#endif

}  // namespace simd
}  // namespace pg_kde
