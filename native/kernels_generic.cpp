// Portable build of the pair kernels (one lane; any CPU).
#define PG_KDE_ISA_NS generic
#define PG_KDE_VF simd::Scalar<float>
#define PG_KDE_VD simd::Scalar<double>
#include "pair_kernels.hpp"
