// nnlab's own CPU thread count. OpenBLAS is the OpenMP build, so BLAS and nnlab's loops
// share one OpenMP pool of exactly this many threads and never oversubscribe the cores.
#pragma once
#include <string>
#include <vector>

namespace nnlab {

int cpu_cores();              // cores this process may run on (its affinity mask, within its cgroup's CPU quota)
// Of those, how many are physical cores: CPUs that share a (package, core) in sysfs's topology
// are hardware threads (SMT, Hyper-Threading) of one core, which share its arithmetic units.
int cpu_physical_cores();
// The same for a list of CPU numbers and a sysfs CPU directory (/sys/devices/system/cpu; a test
// passes a made-up tree). A CPU whose topology cannot be read counts as a core of its own.
int physical_cores_of(const std::vector<int>& cpus, const std::string& sysfs_cpu_dir);
// The CPU quota of a cgroup v2 cpu.max file ("QUOTA PERIOD", e.g. "200000 100000" for two
// CPUs), rounded up to whole CPUs; 0 when there is none ("max"), or the file is missing or unreadable.
int cgroup_cpu_limit(const std::string& cpu_max_file);
// n <= 0 means cpu_cores(); more than max_cpu_threads() is refused with an nnlab::Error (GNU
// OpenMP crashed creating a pool of 65,536 threads: a segmentation fault with no message).
void set_cpu_threads(int n);
int max_cpu_threads();        // 1024, or twice the cores on a machine with more than 512
int cpu_threads();

// Denormal floats (0 < |x| < 1.2e-38 in float32) cost a microcode assist of about a hundred
// cycles per instruction on x86 CPUs. Training makes them: Adam's first moment of a weight
// whose gradient stays 0 (a dead ReLU unit) decays by β1 = 0.9 per step into the denormal
// range and, rounded to nearest, sticks there; measured on the cnn, epoch 3 ran 1.75× slower
// than with them flushed. nnlab therefore flushes them to zero (x86: MXCSR's FTZ and DAZ
// bits; AArch64: FPCR.FZ) on the calling thread and on every thread of the OpenMP pool that
// OpenBLAS shares, by default — as TensorFlow does on the CPU. `keep` restores IEEE gradual
// underflow. Threads created later inherit the mode from the thread that creates them.
enum class Denormals { flush, keep };
void set_cpu_denormals(Denormals mode);  // applies now and again on every set_cpu_threads
Denormals cpu_denormals();
const char* denormals_name(Denormals mode);  // "flush" or "keep"
const char* openblas_build(); // OpenBLAS's own description of its build
std::string cpu_model_name();

}  // namespace nnlab
