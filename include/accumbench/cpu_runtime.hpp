// Process set-up for CPU runs. LibTorch's OpenMP threads spin after each parallel region
// (libgomp's default wait policy) while OpenBLAS's own threads compute the matrix products, so
// the two fight for the cores: on a 2-core machine CPU training steps were 2.5-4x slower than
// with OMP_WAIT_POLICY=PASSIVE (measured with `accumbench sweep`, README "Known limits").
// libgomp reads the policy when it is loaded, before main(), so the process sets it and starts
// itself again, once. A policy set by the user is left alone. Under valgrind /proc/self/exe is
// valgrind's tool, which refuses to be started directly ("You cannot run ... directly"): there
// (LD_PRELOAD names valgrind's preload libraries) the process goes on with the default policy.
//
//   int main(int argc, char** argv) { accumbench::use_passive_openmp_wait(argv); ... }
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace accumbench {

inline void use_passive_openmp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload != nullptr && std::strstr(preload, "vgpreload") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/1);
  execv("/proc/self/exe", argv);  // returns only when it fails: go on with the default policy
}

}  // namespace accumbench
