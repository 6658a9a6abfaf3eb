// The timing harness's own kernel. It keeps the GPU busy while the host enqueues the start event
// and the calls to be timed, so that they are all queued when the GPU reaches them: the event pair
// then brackets GPU time alone, not the host's launch time.

// Spins one thread until the GPU's global nanosecond timer has advanced by ns, then writes the
// nanoseconds it actually spun to *spun (so a test can check it ran, and for how long).
// Launch: block (1), grid (1).
extern "C" __global__ void gpu_hold(long long ns, long long* spun) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < (unsigned long long)ns);
    *spun = (long long)(t - t0);
}
