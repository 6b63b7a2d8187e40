// One kernel family's paths, chosen at run time (include/pert/kernels.hpp): each path a name (a
// level of kernel_levels(), what it needs of the CPU) and the table of functions it runs.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pert/kernels.hpp"

namespace pert {

template <class Table>
class KernelChoice {
 public:
  struct Path {
    std::string name;
    Table table;
  };
  // paths: best first, the last one plain (every CPU runs it).
  KernelChoice(std::string family, std::vector<Path> paths) : family_(std::move(family)), paths_(std::move(paths)) {
    select(initial_kernel(names()));
  }
  std::vector<std::string> names() const {  // the paths this CPU can run, best first
    std::vector<std::string> out;
    for (const Path& p : paths_)
      if (cpu_supports(p.name)) out.push_back(p.name);
    return out;
  }
  const std::string& name() const { return paths_[at_].name; }
  const Table& table() const { return paths_[at_].table; }
  void select(const std::string& name) {
    for (size_t i = 0; i < paths_.size(); ++i)
      if (paths_[i].name == name && cpu_supports(name)) {
        at_ = i;
        return;
      }
    throw std::invalid_argument(family_ + " kernel '" + name + "' is not available on this CPU");
  }

 private:
  std::string family_;
  std::vector<Path> paths_;
  size_t at_ = 0;
};

}  // namespace pert
