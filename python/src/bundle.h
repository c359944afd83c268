// An open bundle for Python: the runtime's pf_bundle (and, once asked for, its pf_model) behind a
// lock that lets runs go on in parallel and close wait for them. Arrays reach the kernels as they
// are (NumPy, or any DLPack tensor on the CPU): never copied, refused with the buffer named when
// their dtype, shape or strides are not the kernel's.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "padfold_runtime.h"

namespace padfold::python {

// (buffer name, array) pairs; the name binds the array to a buffer of the kernel or model.
using NamedArrays = std::vector<std::pair<std::string, nanobind::object>>;

// padfold's worker pool (pf_pool_*): owned together by the Python object and the bundles using
// it, so that it is destroyed after the last of them lets it go, never under a running kernel.
class Pool {
 public:
  Pool(int threads, int spin_us);
  int threads() const { return pf_pool_threads(pool_.get()); }
  void park() { pf_pool_park(pool_.get()); }
  const std::shared_ptr<pf_pool>& handle() const { return pool_; }

 private:
  std::shared_ptr<pf_pool> pool_;
};

class Bundle {
 public:
  Bundle(const std::string& dir, const std::optional<std::string>& cpu_flags);
  ~Bundle();
  Bundle(const Bundle&) = delete;
  Bundle& operator=(const Bundle&) = delete;

  void close();
  bool closed() const;
  std::string dir() const { return dir_; }
  std::string target() const;
  std::string model_name() const;

  int num_kernels() const;
  nanobind::dict kernel(int index) const;  // layer, op, function, buffers
  // The index of kernel `index`'s prepare kernel (pf_bundle_prepare_kernel), or -1.
  int prepare_of(int index) const;
  int find(const std::string& layer) const;
  void run_kernel(int index, const NamedArrays& inputs, const NamedArrays& outputs) const;

  nanobind::dict model();  // inputs and outputs; opens the model on first use
  void run_model(const NamedArrays& inputs, const NamedArrays& outputs);
  int64_t arena_bytes();

  int set_num_threads(int n);
  void use_pool(const Pool* pool);  // nullptr: Halide's pool again

 private:
  pf_bundle* bundle() const;                    // throws when closed
  const pf_kernel_desc* desc(int index) const;  // a kernel, or a prepare kernel; throws if none
  pf_model* open_model();

  std::string dir_;
  mutable std::shared_mutex lock_;  // runs share it; close and opening the model take it alone
  pf_bundle* bundle_ = nullptr;
  pf_model* model_ = nullptr;
  std::shared_ptr<pf_pool> pool_;  // the pool the kernels' loops run on, if padfold's
};

// A buffer description as a dict: name, role, dtype, layout, shape, strides (elements).
nanobind::dict describe(const pf_buffer_desc& b);

}  // namespace padfold::python
