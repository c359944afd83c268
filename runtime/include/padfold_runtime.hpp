// Header-only C++17 wrapper of padfold_runtime.h: an owning Bundle, Kernel views, a Model, and
// padfold::rt::Error exceptions (thrown here, on the C++ side; nothing throws through the C API).
#pragma once

#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "padfold_runtime.h"

namespace padfold::rt {

class Error : public std::runtime_error {
 public:
  Error(pf_status status, const char* message) : std::runtime_error(message), status_(status) {}
  pf_status status() const noexcept { return status_; }

 private:
  pf_status status_;
};

namespace detail {
inline void check(pf_status s, const char* err) {
  if (s != PF_OK) throw Error(s, err);
}
}  // namespace detail

// A kernel of an open Bundle; valid while the Bundle lives. run() is thread-safe.
class Kernel {
 public:
  explicit Kernel(const pf_kernel_desc* k) : k_(k) {}
  const pf_kernel_desc& desc() const { return *k_; }
  const char* layer() const { return k_->layer; }
  int num_buffers() const { return k_->num_buffers; }
  const pf_buffer_desc& buffer(int i) const { return k_->buffers[i]; }

  void run(const pf_tensor* tensors, int n) const {
    char err[PF_ERRLEN];
    detail::check(pf_run(k_, tensors, n, err, sizeof err), err);
  }
  void run(std::initializer_list<pf_tensor> tensors) const {
    run(tensors.begin(), static_cast<int>(tensors.size()));
  }
  void run(const std::vector<pf_tensor>& tensors) const {
    run(tensors.data(), static_cast<int>(tensors.size()));
  }

 private:
  const pf_kernel_desc* k_;
};

class Bundle {
 public:
  static Bundle open(const std::string& dir, const pf_open_options* opts = nullptr) {
    char err[PF_ERRLEN];
    pf_bundle* b = nullptr;
    detail::check(pf_bundle_open(dir.c_str(), opts, &b, err, sizeof err), err);
    return Bundle(b);
  }
  static Bundle from_registry(const pf_registry* reg, const pf_open_options* opts = nullptr) {
    char err[PF_ERRLEN];
    pf_bundle* b = nullptr;
    detail::check(pf_registry_open(reg, opts, &b, err, sizeof err), err);
    return Bundle(b);
  }

  pf_bundle* get() const { return b_.get(); }
  std::string model() const { return pf_bundle_model(get()); }
  std::string target() const { return pf_bundle_target(get()); }

  Kernel kernel(const std::string& layer) const {
    char err[PF_ERRLEN];
    const pf_kernel_desc* k = nullptr;
    detail::check(pf_bundle_find(get(), layer.c_str(), &k, err, sizeof err), err);
    return Kernel(k);
  }
  std::vector<Kernel> kernels() const {
    std::vector<Kernel> out;
    for (int i = 0; i < pf_bundle_num_kernels(get()); i++)
      out.emplace_back(pf_bundle_kernel(get(), i));
    return out;
  }

  // Process-wide for this bundle's Halide runtime; see padfold_runtime.h.
  int set_num_threads(int n) {
    char err[PF_ERRLEN];
    int old = 0;
    detail::check(pf_bundle_set_num_threads(get(), n, &old, err, sizeof err), err);
    return old;
  }
  void set_allocator(pf_malloc_fn m, pf_free_fn f) {
    char err[PF_ERRLEN];
    detail::check(pf_bundle_set_allocator(get(), m, f, nullptr, nullptr, err, sizeof err), err);
  }
  void set_do_par_for(pf_do_par_for_fn fn) {
    char err[PF_ERRLEN];
    detail::check(pf_bundle_set_do_par_for(get(), fn, nullptr, err, sizeof err), err);
  }

 private:
  struct Close {
    void operator()(pf_bundle* b) const noexcept { pf_bundle_close(b); }
  };
  explicit Bundle(pf_bundle* b) : b_(b) {}
  std::unique_ptr<pf_bundle, Close> b_;
};

// The whole model of a Bundle (pf_model_open); the Bundle must outlive it. run() is thread-safe,
// run_static() too for different arenas.
class Model {
 public:
  static Model open(const Bundle& bundle, const pf_model_options* opts = nullptr) {
    char err[PF_ERRLEN];
    pf_model* m = nullptr;
    detail::check(pf_model_open(bundle.get(), opts, &m, err, sizeof err), err);
    return Model(m);
  }

  pf_model* get() const { return m_.get(); }
  int num_inputs() const { return pf_model_num_inputs(get()); }
  const pf_buffer_desc& input(int i) const { return *checked(pf_model_input(get(), i)); }
  int num_outputs() const { return pf_model_num_outputs(get()); }
  // Named after the output layer: pf_tensor_of(&output(i), ...) binds to it.
  const pf_buffer_desc& output(int i) const { return *checked(pf_model_output(get(), i)); }
  std::string output_name(int i) const { return output(i).name; }

  void run(const std::vector<pf_tensor>& inputs, const std::vector<pf_tensor>& outputs) const {
    char err[PF_ERRLEN];
    detail::check(pf_model_run(get(), inputs.data(), static_cast<int>(inputs.size()),
                               outputs.data(), static_cast<int>(outputs.size()), err, sizeof err),
                  err);
  }
  // pf_model_run_static: intermediates in the caller's arena, nothing allocated.
  size_t arena_bytes() const { return pf_model_arena_bytes(get()); }
  void run_static(void* arena, size_t arena_bytes, const std::vector<pf_tensor>& inputs,
                  const std::vector<pf_tensor>& outputs) const {
    char err[PF_ERRLEN];
    detail::check(pf_model_run_static(get(), arena, arena_bytes, inputs.data(),
                                      static_cast<int>(inputs.size()), outputs.data(),
                                      static_cast<int>(outputs.size()), err, sizeof err),
                  err);
  }

 private:
  struct Close {
    void operator()(pf_model* m) const noexcept { pf_model_close(m); }
  };
  static const pf_buffer_desc* checked(const pf_buffer_desc* b) {
    if (!b) throw Error(PF_ERR_ARGUMENT, "model tensor index out of range");
    return b;
  }
  explicit Model(pf_model* m) : m_(m) {}
  std::unique_ptr<pf_model, Close> m_;
};

}  // namespace padfold::rt
