// AVX2 + FMA build of the pair kernels; compiled with -mavx2 -mfma, run only where the CPU has them.
#define PG_KDE_ISA_NS avx2
#define PG_KDE_VF simd::Avx2F
#define PG_KDE_VD simd::Avx2D
#include "pair_kernels.hpp"
