/* C++ standard library locks: THREADS threads x ITERS std::lock_guard<std::mutex> on cxx_mutex;
 * each thread also takes cxx_shared ITERS times, every 8th exclusively (std::unique_lock), the
 * others shared (std::shared_lock); std::recursive_mutex cxx_rec taken twice every 4th
 * iteration; std::timed_mutex cxx_timed by try_lock_for every 4th; then main: TRIES
 * cxx_try.try_lock() that fail while a helper holds it, and one that succeeds.
 * argv: THREADS ITERS TRIES. Exit 91 when a count is wrong. */
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

std::mutex cxx_mutex, cxx_try;
std::shared_mutex cxx_shared;
std::recursive_mutex cxx_rec;
std::timed_mutex cxx_timed;
static long iters, counter, reads, writes, rec_counter, timed_counter;
static std::atomic<long> read_total;

static void worker() {
    for (long i = 0; i < iters; i++) {
        {
            std::lock_guard<std::mutex> g(cxx_mutex);
            counter++;
        }
        if (i % 8 == 0) {
            std::unique_lock<std::shared_mutex> w(cxx_shared);
            writes++;
        } else {
            std::shared_lock<std::shared_mutex> r(cxx_shared);
            read_total.fetch_add(1, std::memory_order_relaxed);
        }
        if (i % 4 == 0) {
            std::lock_guard<std::recursive_mutex> a(cxx_rec);
            std::lock_guard<std::recursive_mutex> b(cxx_rec);
            rec_counter++;
            if (!cxx_timed.try_lock_for(std::chrono::seconds(10))) std::exit(90);
            timed_counter++;
            cxx_timed.unlock();
        }
    }
}

int main(int argc, char **argv) {
    long threads = argc > 1 ? std::atol(argv[1]) : 4;
    iters = argc > 2 ? std::atol(argv[2]) : 8000;
    long tries = argc > 3 ? std::atol(argv[3]) : 100;
    std::vector<std::thread> th;
    for (long t = 0; t < threads; t++) th.emplace_back(worker);
    for (auto &t : th) t.join();
    reads = read_total.load();
    if (counter != threads * iters || writes + reads != threads * iters) return 91;

    std::atomic<int> held{0}, release{0};
    std::thread h([&] {
        cxx_try.lock();
        held = 1;
        while (!release) std::this_thread::yield();
        cxx_try.unlock();
    });
    while (!held) std::this_thread::yield();
    for (long i = 0; i < tries; i++)
        if (cxx_try.try_lock()) return 92;
    release = 1;
    h.join();
    if (!cxx_try.try_lock()) return 93;
    cxx_try.unlock();
    std::printf("ok %ld reads %ld writes %ld rec %ld timed %ld\n", counter, reads, writes, rec_counter,
                timed_counter);
    return 0;
}
