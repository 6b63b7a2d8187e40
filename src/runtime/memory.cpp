#include "pert/memory.hpp"

#include <cstdint>
#include <cstdlib>
#include <fstream>

#include "pert/error.hpp"

namespace pert {

double available_memory() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);)
    if (line.rfind("MemAvailable:", 0) == 0) return std::atof(line.c_str() + 13) * 1024.0;  // "... kB"
  return 0.0;
}

void require_memory(double bytes, const std::string& what, const std::string& advice) {
  const double available = available_memory();
  if (available > 0 && bytes > 0.9 * available)
    throw Error(what + " needs " + std::to_string(int64_t(bytes / 1048576.0)) + " MiB, more than the " +
                std::to_string(int64_t(available / 1048576.0)) + " MiB of memory available" + advice);
}

}  // namespace pert
