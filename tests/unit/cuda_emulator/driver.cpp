// Builds pg_kde's CUDA kernels for the host emulator (emulator.hpp) and exports one C entry point that
// launches a kernel by name with cuLaunchKernel-style arguments (an array of pointers to the values).
#include "emulator.hpp"

#include "kde.cu"
#include "pair_sums.cu"

extern "C" int pg_kde_emulator_launch(const char* name, unsigned grid_x, unsigned grid_y, unsigned block_x,
                                      unsigned long long shared_bytes, void** args, char* error, int error_size) {
    try {
#define PG_KDE_EMULATE(NAME, ...)                                                                     \
    if (std::strcmp(name, #NAME) == 0) {                                                              \
        pg_kde_emulator::launch(NAME, dim3{grid_x, grid_y, 1}, dim3{block_x, 1, 1}, shared_bytes, args); \
        return 0;                                                                                     \
    }
        PG_KDE_PLUGIN_KERNELS(PG_KDE_EMULATE)
        PG_KDE_LSCV_KERNELS(PG_KDE_EMULATE)
        PG_KDE_MOMENT_KERNELS(PG_KDE_EMULATE)
        PG_KDE_KDE_KERNELS(PG_KDE_EMULATE)
        std::snprintf(error, error_size, "no kernel named %s", name);
    } catch (const std::exception& e) {
        std::snprintf(error, error_size, "%s", e.what());
    }
    return 1;
}

extern "C" void pg_kde_emulator_tile_of(unsigned long long lambda, unsigned long long* row, unsigned long long* col) {
    pg_kde::tile_of(lambda, row, col);
}

extern "C" void pg_kde_emulator_set_schedule(unsigned long long seed) { pg_kde_emulator::schedule_seed = seed; }
