#include "bundle.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <mutex>

#include "errors.h"

namespace nb = nanobind;

namespace padfold::python {
namespace {

[[noreturn]] void raise(pf_status status, const char* message) {
  switch (status) {
    case PF_ERR_TENSOR_COUNT:
    case PF_ERR_TENSOR_NAME:
    case PF_ERR_DTYPE:
    case PF_ERR_RANK:
    case PF_ERR_SHAPE:
    case PF_ERR_STRIDES:
    case PF_ERR_NULL_DATA:
    case PF_ERR_ALIGNMENT:
    case PF_ERR_SIZE:
    case PF_ERR_OVERLAP:
      throw TensorError(message);
    default:
      throw Error(message);
  }
}

void check(pf_status status, const char* err) {
  if (status != PF_OK) raise(status, err);
}

std::string dtype_text(nb::dlpack::dtype t) {
  const char* kind = t.code == uint8_t(nb::dlpack::dtype_code::Float)  ? "float"
                     : t.code == uint8_t(nb::dlpack::dtype_code::Int)  ? "int"
                     : t.code == uint8_t(nb::dlpack::dtype_code::UInt) ? "uint"
                     : t.code == uint8_t(nb::dlpack::dtype_code::Bool) ? "bool"
                                                                       : "dtype code ";
  return kind + std::to_string(t.bits) + (t.lanes == 1 ? "" : "x" + std::to_string(t.lanes));
}

std::optional<pf_dtype> pf_dtype_of(nb::dlpack::dtype t) {
  if (t == nb::dtype<float>()) return PF_F32;
  if (t == nb::dtype<int8_t>()) return PF_I8;
  if (t == nb::dtype<uint8_t>()) return PF_U8;
  if (t == nb::dtype<int32_t>()) return PF_I32;
  if (t.code == uint8_t(nb::dlpack::dtype_code::Float) && t.bits == 16 && t.lanes == 1)
    return PF_F16;
  return std::nullopt;
}

std::string type_name(const nb::object& o) {
  return nb::cast<std::string>(nb::type_name(o.type()));
}

// One array bound to a buffer: the tensor the runtime checks and the array kept alive while the
// kernels run.
struct Bound {
  nb::object array;
  std::vector<int64_t> shape, strides;
  pf_tensor tensor{};
};

template <typename Array>
void bind(Bound& b, const std::string& name, const nb::object& obj, bool writable) {
  Array a;
  if (!nb::try_cast(obj, a, false))
    throw TensorError("buffer '" + name + "': " + type_name(obj) + " is not " +
                      (writable ? "a writable" : "an") +
                      " array on the CPU (a NumPy array or a DLPack tensor such as a PyTorch CPU "
                      "tensor" +
                      (writable ? ", not read-only" : "") + ")");
  const std::optional<pf_dtype> dtype = pf_dtype_of(a.dtype());
  if (!dtype)
    throw TensorError("buffer '" + name + "': dtype " + dtype_text(a.dtype()) +
                      " is none padfold's kernels take (float32, float16, int8, uint8, int32); "
                      "nothing is converted: pass an array of the kernel's dtype");
  b.array = obj;
  size_t span = 1;
  bool empty = false;
  for (size_t i = 0; i < a.ndim(); ++i) {
    b.shape.push_back(static_cast<int64_t>(a.shape(i)));
    b.strides.push_back(a.stride(i));
    if (a.stride(i) < 0)
      throw TensorError("buffer '" + name + "': negative stride on axis " + std::to_string(i) +
                        "; pass an array whose strides are the kernel's");
    if (a.shape(i) == 0) empty = true;
    span += static_cast<size_t>(a.shape(i) - 1) * static_cast<size_t>(a.stride(i));
  }
  // A unit dim's stride addresses nothing, and exporters differ on it (PyTorch's DLPack writes
  // 1): give it the dense stride the kernels are specialized to.
  for (size_t i = b.shape.size(); i-- > 0;)
    if (b.shape[i] == 1)
      b.strides[i] = i + 1 == b.shape.size() ? 1 : b.strides[i + 1] * b.shape[i + 1];
  b.tensor.name = nullptr;
  b.tensor.data = const_cast<void*>(static_cast<const void*>(a.data()));
  b.tensor.dtype = *dtype;
  b.tensor.rank = static_cast<int>(a.ndim());
  b.tensor.shape = b.shape.data();
  b.tensor.strides = b.strides.data();
  b.tensor.bytes = empty ? 0 : span * pf_dtype_size(*dtype);
}

// The tensors of one call, inputs first; names point into `names`, which outlives them.
struct Call {
  std::vector<std::string> names;
  std::vector<Bound> bound;
  std::vector<pf_tensor> inputs, outputs;

  Call(const NamedArrays& in, const NamedArrays& out) {
    using ReadOnly = nb::ndarray<nb::ro, nb::device::cpu>;
    using Writable = nb::ndarray<nb::device::cpu>;
    names.reserve(in.size() + out.size());
    bound.resize(in.size() + out.size());
    size_t i = 0;
    for (const auto& [name, obj] : in) bind<ReadOnly>(bound[i++], name, obj, false);
    for (const auto& [name, obj] : out) bind<Writable>(bound[i++], name, obj, true);
    i = 0;
    for (const auto* list : {&in, &out})
      for (const auto& item : *list) {
        names.push_back(item.first);
        bound[i].tensor.name = names.back().empty() ? nullptr : names.back().c_str();
        (list == &in ? inputs : outputs).push_back(bound[i++].tensor);
      }
  }
  std::vector<pf_tensor> all() const {
    std::vector<pf_tensor> t = inputs;
    t.insert(t.end(), outputs.begin(), outputs.end());
    return t;
  }
};

nb::list shape_list(const int64_t* v, int rank) {
  nb::list l;
  for (int i = 0; i < rank; ++i) l.append(v[i]);
  return l;
}

}  // namespace

nb::dict describe(const pf_buffer_desc& b) {
  nb::dict d;
  d["name"] = b.name;
  d["role"] = pf_role_name(b.role);
  d["dtype"] = pf_dtype_name(b.dtype);
  d["layout"] = b.layout ? b.layout : "";
  d["shape"] = shape_list(b.shape, b.rank);
  d["strides"] = shape_list(b.strides, b.rank);
  d["source"] = b.source ? nb::object(nb::str(b.source)) : nb::none();
  return d;
}

Bundle::Bundle(const std::string& dir, const std::optional<std::string>& cpu_flags) : dir_(dir) {
  pf_open_options opts{};
  opts.cpu_flags = cpu_flags ? cpu_flags->c_str() : nullptr;
  char err[PF_ERRLEN];
  const pf_status s = pf_bundle_open(dir.c_str(), &opts, &bundle_, err, sizeof err);
  if (s != PF_OK) throw Error(err);
}

Bundle::~Bundle() {
  close();
}

void Bundle::close() {
  std::unique_lock guard(lock_);
  pf_model_close(model_);
  model_ = nullptr;
  pf_bundle_close(bundle_);
  bundle_ = nullptr;
  pool_.reset();
}

bool Bundle::closed() const {
  std::shared_lock guard(lock_);
  return bundle_ == nullptr;
}

pf_bundle* Bundle::bundle() const {
  if (!bundle_) throw Error("bundle " + dir_ + " is closed");
  return bundle_;
}

std::string Bundle::target() const {
  std::shared_lock guard(lock_);
  return pf_bundle_target(bundle());
}

std::string Bundle::model_name() const {
  std::shared_lock guard(lock_);
  return pf_bundle_model(bundle());
}

int Bundle::num_kernels() const {
  std::shared_lock guard(lock_);
  return pf_bundle_num_kernels(bundle());
}

// Indexes num_kernels.. 2 * num_kernels - 1 name the prepare kernels of kernels 0.. (prepare_of).
const pf_kernel_desc* Bundle::desc(int index) const {
  pf_bundle* b = bundle();
  const int n = pf_bundle_num_kernels(b);
  const pf_kernel_desc* k = index >= n ? pf_bundle_prepare_kernel(b, pf_bundle_kernel(b, index - n))
                                       : pf_bundle_kernel(b, index);
  if (!k) throw Error("bundle " + dir_ + " has no kernel " + std::to_string(index));
  return k;
}

int Bundle::prepare_of(int index) const {
  std::shared_lock guard(lock_);
  pf_bundle* b = bundle();
  const pf_kernel_desc* k = pf_bundle_kernel(b, index);
  if (!k) throw Error("bundle " + dir_ + " has no kernel " + std::to_string(index));
  return pf_bundle_prepare_kernel(b, k) ? index + pf_bundle_num_kernels(b) : -1;
}

nb::dict Bundle::kernel(int index) const {
  std::shared_lock guard(lock_);
  const pf_kernel_desc* k = desc(index);
  nb::dict d;
  d["layer"] = k->layer;
  d["op"] = k->op;
  d["function"] = k->function;
  nb::list buffers;
  for (int i = 0; i < k->num_buffers; ++i) buffers.append(describe(k->buffers[i]));
  d["buffers"] = buffers;
  return d;
}

int Bundle::find(const std::string& layer) const {
  std::shared_lock guard(lock_);
  pf_bundle* b = bundle();
  char err[PF_ERRLEN];
  const pf_kernel_desc* k = nullptr;
  check(pf_bundle_find(b, layer.c_str(), &k, err, sizeof err), err);
  return static_cast<int>(k - pf_bundle_kernel(b, 0));  // the registry's kernels are an array
}

void Bundle::run_kernel(int index, const NamedArrays& inputs, const NamedArrays& outputs) const {
  const Call call(inputs, outputs);
  const std::vector<pf_tensor> tensors = call.all();
  std::shared_lock guard(lock_);
  const pf_kernel_desc* k = desc(index);
  char err[PF_ERRLEN];
  pf_status s;
  {
    nb::gil_scoped_release unlocked;
    s = pf_run(k, tensors.data(), static_cast<int>(tensors.size()), err, sizeof err);
  }
  check(s, err);
}

pf_model* Bundle::open_model() {
  {
    std::shared_lock guard(lock_);
    bundle();
    if (model_) return model_;
  }
  std::unique_lock guard(lock_);
  if (!model_) {
    char err[PF_ERRLEN];
    check(pf_model_open(bundle(), nullptr, &model_, err, sizeof err), err);
  }
  return model_;
}

nb::dict Bundle::model() {
  open_model();
  std::shared_lock guard(lock_);
  bundle();
  nb::list in, out;
  for (int i = 0; i < pf_model_num_inputs(model_); ++i)
    in.append(describe(*pf_model_input(model_, i)));
  for (int i = 0; i < pf_model_num_outputs(model_); ++i)
    out.append(describe(*pf_model_output(model_, i)));
  nb::dict d;
  d["inputs"] = in;
  d["outputs"] = out;
  d["arena_bytes"] = pf_model_arena_bytes(model_);
  return d;
}

void Bundle::run_model(const NamedArrays& inputs, const NamedArrays& outputs) {
  open_model();
  const Call call(inputs, outputs);
  std::shared_lock guard(lock_);
  bundle();
  char err[PF_ERRLEN];
  pf_status s;
  {
    nb::gil_scoped_release unlocked;
    s = pf_model_run(model_, call.inputs.data(), static_cast<int>(call.inputs.size()),
                     call.outputs.data(), static_cast<int>(call.outputs.size()), err, sizeof err);
  }
  check(s, err);
}

int64_t Bundle::arena_bytes() {
  open_model();
  std::shared_lock guard(lock_);
  bundle();
  return static_cast<int64_t>(pf_model_arena_bytes(model_));
}

int Bundle::set_num_threads(int n) {
  std::unique_lock guard(lock_);
  int old = 0;
  char err[PF_ERRLEN];
  check(pf_bundle_set_num_threads(bundle(), n, &old, err, sizeof err), err);
  return old;
}

Pool::Pool(int threads, int spin_us) {
  pf_pool* p = nullptr;
  char err[PF_ERRLEN];
  const pf_pool_options options{threads, spin_us};
  check(pf_pool_create(&options, &p, err, sizeof err), err);
  pool_.reset(p, pf_pool_destroy);
}

void Bundle::use_pool(const Pool* pool) {
  std::unique_lock guard(lock_);
  char err[PF_ERRLEN];
  check(pf_bundle_use_pool(bundle(), pool ? pool->handle().get() : nullptr, err, sizeof err), err);
  pool_ = pool ? pool->handle() : nullptr;
}

}  // namespace padfold::python
