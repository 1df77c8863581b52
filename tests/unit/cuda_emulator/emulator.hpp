// A host emulator for pg_kde's CUDA kernels, for the tests on machines without a GPU.
//
// The kernels in cuda/*.cu compile unchanged as C++ with this header included first. A launch runs the
// blocks one after another; within a block, every CUDA thread is a fiber on one OS thread (its stack set up
// once by makecontext/swapcontext, then switched with _setjmp/_longjmp, which skip the signal-mask system
// call of swapcontext; build without _FORTIFY_SOURCE, whose longjmp check rejects a jump between stacks), and
// the scheduler switches fibers only at __syncthreads() and warp shuffles, exactly the points where CUDA
// threads wait for one another. A barrier releases when every thread of the block (or warp) that has not
// yet returned has arrived, as on Volta and later; a block whose live threads wait at different barriers
// is reported as a deadlock instead of hanging. Launch limits (block size, grid size, 48 KiB of dynamic
// shared memory) are checked as the device would. Shared arrays become statics, which is sound because
// blocks never run concurrently here.
#pragma once

#include <math.h>
#include <setjmp.h>
#include <ucontext.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#define PG_KDE_HOST_EMULATION 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) alignas(n)

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

namespace pg_kde_emulator {

struct Barrier {
    unsigned expected = 0, arrived = 0;
};

struct Fiber {
    ucontext_t context;
    jmp_buf resume;
    char* stack = nullptr;
    bool started = false, done = false;
    Barrier* waiting_at = nullptr;
};

struct Block {
    std::vector<Fiber> fibers;
    Barrier block;
    std::vector<Barrier> warps;
    std::vector<double> lanes;
    std::vector<double> dynamic_shared;
    ucontext_t scheduler;
    jmp_buf schedule;
    unsigned current = 0;
    void (*body)(void*) = nullptr;
    void* body_arg = nullptr;
};

inline Block* active = nullptr;
// The order in which the scheduler visits a block's threads: 0 = by index, else a permutation drawn per
// block from this seed. A correct kernel gives the same bits under every order (atomics aside); a
// missing barrier, letting one thread read shared memory another has not yet written (or has already
// overwritten), shows up as a difference between orders.
inline unsigned long long schedule_seed = 0;
constexpr std::size_t stack_bytes = 64 * 1024;

// Fiber stacks, kept from launch to launch (allocated once, never cleared: a fiber writes before it reads).
inline char* fiber_stack(unsigned t) {
    static std::vector<std::unique_ptr<char[]>> stacks;
    while (stacks.size() <= t) stacks.emplace_back(new char[stack_bytes]);
    return stacks[t].get();
}
inline dim3 grid_dim, block_dim, thread_index, block_index;

inline unsigned char* dynamic_shared() { return reinterpret_cast<unsigned char*>(active->dynamic_shared.data()); }

inline void release_if_complete(Barrier& b) {
    if (b.expected == 0 || b.arrived < b.expected) return;
    b.arrived = 0;
    for (Fiber& f : active->fibers)
        if (f.waiting_at == &b) f.waiting_at = nullptr;
}

inline void wait(Barrier& b) {
    Fiber& self = active->fibers[active->current];
    ++b.arrived;
    self.waiting_at = &b;
    release_if_complete(b);  // the last to arrive releases everyone, itself included
    if (self.waiting_at != nullptr && _setjmp(self.resume) == 0) _longjmp(active->schedule, 1);
}

inline void fiber_main(unsigned t) {
    active->body(active->body_arg);
    active->fibers[t].done = true;
    --active->block.expected;
    --active->warps[t / 32].expected;
    release_if_complete(active->block);
    release_if_complete(active->warps[t / 32]);
    _longjmp(active->schedule, 1);  // never returns: its stack is dropped
}

// Runs fiber f until it waits at a barrier or finishes: either way it jumps back to blk.schedule.
__attribute__((noinline)) inline void resume(Block& blk, Fiber& f) {
    if (_setjmp(blk.schedule) != 0) return;
    if (f.started) _longjmp(f.resume, 1);
    f.started = true;
    swapcontext(&blk.scheduler, &f.context);  // the first run sets up the fiber's own stack
}

// Runs one block of block_dim.x fibers to completion.
inline void run_block(Block& blk) {
    const unsigned threads = block_dim.x;
    blk.block = Barrier{threads, 0};
    for (unsigned w = 0; w < blk.warps.size(); ++w) {
        const unsigned first = w * 32;
        blk.warps[w] = Barrier{threads - first < 32 ? threads - first : 32, 0};
    }
    for (unsigned t = 0; t < threads; ++t) {
        Fiber& f = blk.fibers[t];
        f.started = f.done = false;
        f.waiting_at = nullptr;
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = f.stack;
        f.context.uc_stack.ss_size = stack_bytes;
        f.context.uc_link = &blk.scheduler;
        makecontext(&f.context, reinterpret_cast<void (*)()>(&fiber_main), 1, t);
    }
    std::vector<unsigned> order(threads);
    for (unsigned t = 0; t < threads; ++t) order[t] = t;
    if (schedule_seed != 0) {
        unsigned long long state = schedule_seed ^ (0x9E3779B97F4A7C15ull * (1 + block_index.x + 65536ull * block_index.y));
        for (unsigned t = threads; t > 1; --t) {  // Fisher-Yates with xorshift64
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            std::swap(order[t - 1], order[state % t]);
        }
    }
    for (;;) {
        bool ran = false, all_done = true;
        for (unsigned t : order) {
            Fiber& f = blk.fibers[t];
            if (f.done) continue;
            all_done = false;
            if (f.waiting_at != nullptr) continue;
            blk.current = t;
            thread_index = dim3{t, 0, 0};
            ran = true;
            resume(blk, f);
        }
        if (all_done) return;
        if (!ran)
            throw std::runtime_error("deadlock: the live threads of block (" + std::to_string(block_index.x) + ", " +
                                     std::to_string(block_index.y) + ") wait at different barriers");
    }
}

template <class... A, std::size_t... I>
void invoke(void (*kernel)(A...), void** args, std::index_sequence<I...>) {
    kernel(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(args[I])...);
}

template <class... A>
void launch(void (*kernel)(A...), dim3 grid, dim3 block, std::size_t shared_bytes, void** args) {
    if (block.x == 0 || block.x > 1024 || block.y != 1 || block.z != 1)
        throw std::runtime_error("invalid block size " + std::to_string(block.x));
    if (grid.x == 0 || grid.x > 2147483647u || grid.y == 0 || grid.y > 65535u || grid.z != 1)
        throw std::runtime_error("invalid grid " + std::to_string(grid.x) + " x " + std::to_string(grid.y));
    if (shared_bytes > 48 * 1024)
        throw std::runtime_error("dynamic shared memory " + std::to_string(shared_bytes) + " B exceeds 48 KiB");
    struct Call {
        void (*kernel)(A...);
        void** args;
    } call{kernel, args};
    Block blk;
    blk.fibers.resize(block.x);
    for (unsigned t = 0; t < block.x; ++t) blk.fibers[t].stack = fiber_stack(t);
    blk.warps.resize((block.x + 31) / 32);
    blk.lanes.resize(block.x);
    // The dynamic shared memory the launch asked for, then a guard band that must stay untouched: a
    // kernel that uses more than the host reserved (a layout the two sides disagree on) is reported.
    const std::size_t shared_doubles = (shared_bytes + sizeof(double) - 1) / sizeof(double);
    constexpr std::size_t guard_doubles = 512;
    constexpr double guard_value = -1.2345678901234567e-300;
    blk.dynamic_shared.assign(shared_doubles + guard_doubles, guard_value);
    blk.body = [](void* p) {
        Call* c = static_cast<Call*>(p);
        invoke(c->kernel, c->args, std::index_sequence_for<A...>{});
    };
    blk.body_arg = &call;
    grid_dim = grid;
    block_dim = block;
    active = &blk;
    for (unsigned by = 0; by < grid.y; ++by)
        for (unsigned bx = 0; bx < grid.x; ++bx) {
            block_index = dim3{bx, by, 0};
            run_block(blk);
            for (std::size_t k = shared_doubles; k < blk.dynamic_shared.size(); ++k)
                if (std::memcmp(&blk.dynamic_shared[k], &guard_value, sizeof(double)) != 0)
                    throw std::runtime_error("block (" + std::to_string(bx) + ", " + std::to_string(by) +
                                             ") wrote past its " + std::to_string(shared_bytes) +
                                             " bytes of dynamic shared memory");
        }
    active = nullptr;
}

}  // namespace pg_kde_emulator

#define threadIdx (pg_kde_emulator::thread_index)
#define blockIdx (pg_kde_emulator::block_index)
#define blockDim (pg_kde_emulator::block_dim)
#define gridDim (pg_kde_emulator::grid_dim)

inline void __syncthreads() { pg_kde_emulator::wait(pg_kde_emulator::active->block); }

inline double __shfl_down_sync(unsigned, double v, int delta) {
    using namespace pg_kde_emulator;
    const unsigned t = thread_index.x, warp = t / 32, source = t % 32 + (unsigned)delta;
    active->lanes[t] = v;
    wait(active->warps[warp]);
    const double r = (source < 32 && warp * 32 + source < block_dim.x) ? active->lanes[warp * 32 + source] : v;
    wait(active->warps[warp]);
    return r;
}

inline double atomicAdd(double* address, double v) {
    const double old = *address;
    *address = old + v;
    return old;
}
