// AVX-512 (F, DQ) build of the pair kernels; compiled with -mavx512f -mavx512dq, run only where the
// CPU has them.
#define PG_KDE_ISA_NS avx512
#define PG_KDE_VF simd::Avx512F
#define PG_KDE_VD simd::Avx512D
#include "pair_kernels.hpp"
