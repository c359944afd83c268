// Opening bundles and registries: the happy paths, target choice, and every way a bundle can be
// broken. Each error test checks the status and that the message names the culprit.
#include <cstdint>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "runtime_test_util.h"

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#endif

using BundleOpen = ScratchBundle;

TEST_F(BundleOpen, FakeBundle) {
  ASSERT_EQ(Open(), PF_OK) << err_;
  EXPECT_STREQ(pf_bundle_model(bundle_), "fake");
  EXPECT_STREQ(pf_bundle_target(bundle_), FAKE_TARGET);
  EXPECT_EQ(pf_bundle_dir(bundle_), dir_.string());
  ASSERT_EQ(pf_bundle_num_kernels(bundle_), 3);
  EXPECT_STREQ(pf_bundle_kernel(bundle_, 1)->layer, "add_bias");
  EXPECT_EQ(pf_bundle_kernel(bundle_, 3), nullptr);
  const pf_kernel_desc* k = Kernel("add_bias");
  ASSERT_NE(k, nullptr);
  EXPECT_STREQ(k->function, "pf_fake_add_bias");
  ASSERT_EQ(k->num_buffers, 3);
  const pf_buffer_desc& bias = k->buffers[1];
  EXPECT_STREQ(bias.name, "bias");
  EXPECT_STREQ(pf_role_name(bias.role), "bias");
  EXPECT_STREQ(pf_dtype_name(bias.dtype), "float32");
  EXPECT_STREQ(bias.layout, "C");
  EXPECT_EQ(bias.rank, 1);
  EXPECT_EQ(bias.shape[0], 3);
  EXPECT_EQ(k->buffers[0].strides[1], 20);
  EXPECT_EQ(pf_buffer_bytes(&k->buffers[2]), 240u);
}

TEST_F(BundleOpen, StaticRegistry) {
  ASSERT_EQ(pf_registry_open(fake_static_registry(), nullptr, &bundle_, err_, sizeof err_), PF_OK)
      << err_;
  EXPECT_EQ(pf_bundle_dir(bundle_), nullptr);
  EXPECT_EQ(pf_bundle_registry(bundle_), fake_static_registry());
  EXPECT_NE(Kernel("checked"), nullptr);
}

TEST_F(BundleOpen, UnknownLayer) {
  ASSERT_EQ(Open(), PF_OK) << err_;
  const pf_kernel_desc* k = nullptr;
  EXPECT_EQ(pf_bundle_find(bundle_, "conv9", &k, err_, sizeof err_), PF_ERR_NOT_FOUND);
  EXPECT_EQ(k, nullptr);
  EXPECT_HAS(err_, "no kernel for layer 'conv9'");
  EXPECT_HAS(err_, "(layers: scale, add_bias, checked)");
}

TEST_F(BundleOpen, MissingDirectory) {
  std::string gone = (dir_ / "gone").string();
  EXPECT_EQ(pf_bundle_open(gone.c_str(), nullptr, &bundle_, err_, sizeof err_), PF_ERR_IO);
  EXPECT_EQ(bundle_, nullptr);
  EXPECT_HAS(err_, gone.c_str());
  EXPECT_HAS(err_, "No such file or directory");
}

TEST_F(BundleOpen, NotADirectory) {
  WriteManifest("{}");
  std::string file = (dir_ / "manifest.json").string();
  EXPECT_EQ(pf_bundle_open(file.c_str(), nullptr, &bundle_, err_, sizeof err_), PF_ERR_IO);
  EXPECT_HAS(err_, "is not a directory");
}

TEST_F(BundleOpen, MissingManifest) {
  EXPECT_EQ(OpenAsIs(), PF_ERR_IO);
  EXPECT_HAS(err_, "manifest.json");
  EXPECT_HAS(err_, "not a padfold bundle directory");
}

TEST_F(BundleOpen, InvalidJson) {
  WriteManifest("{\n  \"format\": \"padfold-bundle\",\n  \"format_version\": 2,\n  oops\n}");
  EXPECT_EQ(OpenAsIs(), PF_ERR_MANIFEST);
  EXPECT_HAS(err_, "manifest.json: invalid JSON at line 4");
}

// Valid JSON nested deeper than cJSON parses (1000 levels) is said to be that, not "invalid";
// brackets inside strings do not count.
TEST_F(BundleOpen, DeepJsonIsSaidToBeDeep) {
  std::string text = manifest_.dump();
  text.insert(text.rfind('}'),
              ", \"deep\": " + std::string(100000, '[') + std::string(100000, ']'));
  WriteManifest(text);
  EXPECT_EQ(OpenAsIs(), PF_ERR_MANIFEST);
  EXPECT_HAS(err_, "manifest.json: nested deeper than 1000 levels at line 1");
  text = manifest_.dump();
  text.insert(text.rfind('}'), ", \"s\": \"" + std::string(2000, '[') + "\", oops");
  WriteManifest(text);
  EXPECT_EQ(OpenAsIs(), PF_ERR_MANIFEST);
  EXPECT_HAS(err_, "manifest.json: invalid JSON at line 1");
}

TEST_F(BundleOpen, EmptyFile) {
  WriteManifest("");
  EXPECT_EQ(OpenAsIs(), PF_ERR_MANIFEST);
  EXPECT_HAS(err_, "invalid JSON");
}

struct ManifestEdit {
  const char* name;
  const char* pointer;  // JSON pointer of the field to change
  json value;           // replacement; null with remove = true deletes the field
  bool remove;
  pf_status status;
  const char* message;
};

void PrintTo(const ManifestEdit& e, std::ostream* os) {
  *os << e.name;
}

class BrokenManifest : public ScratchBundle, public testing::WithParamInterface<ManifestEdit> {};

TEST_P(BrokenManifest, IsRejected) {
  const ManifestEdit& e = GetParam();
  json::json_pointer p(e.pointer);
  if (json& parent = manifest_.at(p.parent_pointer()); e.remove && parent.is_array()) {
    parent.erase(std::stoul(p.back()));
  } else if (e.remove) {
    parent.erase(p.back());
  } else {
    manifest_[p] = e.value;
  }
  EXPECT_EQ(Open(), e.status) << err_;
  EXPECT_EQ(bundle_, nullptr);
  EXPECT_HAS(err_, e.message);
}

INSTANTIATE_TEST_SUITE_P(
    Fields, BrokenManifest,
    testing::Values(
        ManifestEdit{"missing_format", "/format", nullptr, true, PF_ERR_MANIFEST,
                     "missing field format"},
        ManifestEdit{"missing_model", "/model", nullptr, true, PF_ERR_MANIFEST,
                     "missing field model"},
        ManifestEdit{"missing_target_arch", "/targets/0/arch", nullptr, true, PF_ERR_MANIFEST,
                     "missing field targets[0].arch"},
        ManifestEdit{"missing_shape", "/kernels/1/buffers/1/shape", nullptr, true, PF_ERR_MANIFEST,
                     "missing field kernels[1].buffers[1].shape"},
        ManifestEdit{"version_string", "/format_version", "2", false, PF_ERR_MANIFEST,
                     "format_version: expected an integer, got a string"},
        ManifestEdit{"version_fraction", "/format_version", 1.5, false, PF_ERR_MANIFEST,
                     "format_version: expected an integer, got a number"},
        ManifestEdit{"targets_object", "/targets", json::object(), false, PF_ERR_MANIFEST,
                     "targets: expected an array, got an object"},
        ManifestEdit{"targets_empty", "/targets", json::array(), false, PF_ERR_MANIFEST,
                     "targets is empty"},
        ManifestEdit{"features_string", "/targets/0/features", "sse41", false, PF_ERR_MANIFEST,
                     "targets[0].features: expected an array, got a string"},
        ManifestEdit{"library_number", "/targets/0/shared_library", 7, false, PF_ERR_MANIFEST,
                     "targets[0].shared_library: expected a string or null, got a number"},
        ManifestEdit{"shape_string", "/kernels/0/buffers/0/shape/2", "4", false, PF_ERR_MANIFEST,
                     "kernels[0].buffers[0].shape[2]: expected an integer, got a string"},
        ManifestEdit{"strides_rank",
                     "/kernels/0/buffers/0/strides",
                     {1, 1},
                     false,
                     PF_ERR_MANIFEST,
                     "kernels[0].buffers[0]: 2 strides for rank 4"},
        ManifestEdit{"huge_extent", "/kernels/0/buffers/0/shape/0", 1e30, false, PF_ERR_MANIFEST,
                     "kernels[0].buffers[0].shape[0]: expected an integer, got a number"},
        ManifestEdit{"unknown_dtype", "/kernels/0/buffers/1/dtype", "float64", false,
                     PF_ERR_MANIFEST, "kernels[0].buffers[1].dtype: unknown value 'float64'"},
        ManifestEdit{"kernel_string", "/kernels/2", "checked", false, PF_ERR_MANIFEST,
                     "kernels[2]: expected an object, got a string"},
        ManifestEdit{"wrong_format", "/format", "tflite", false, PF_ERR_VERSION,
                     "format is 'tflite', expected 'padfold-bundle'"},
        ManifestEdit{"wrong_version", "/format_version", 6, false, PF_ERR_VERSION,
                     "format_version 6 is not supported by this runtime (supports 2 to 5)"},
        ManifestEdit{"version_1", "/format_version", 1, false, PF_ERR_VERSION,
                     "format_version 1 is not supported by this runtime (supports 2 to 5): use a "
                     "padfold runtime matching the padfold that wrote the bundle"},
        // Format 3: the memory plan.
        ManifestEdit{"missing_memory_plan", "/memory_plan", nullptr, true, PF_ERR_MANIFEST,
                     "missing field memory_plan"},
        ManifestEdit{"memory_plan_alignment", "/memory_plan/alignment", 16, false, PF_ERR_MANIFEST,
                     "memory_plan.alignment: expected 64, got 16"},
        ManifestEdit{"arena_bytes_unaligned", "/memory_plan/arena_bytes", 250, false,
                     PF_ERR_MANIFEST,
                     "memory_plan.arena_bytes: expected a multiple of 64, got 250"},
        ManifestEdit{"missing_arena_offset", "/kernels/0/arena_offset", nullptr, true,
                     PF_ERR_MANIFEST, "missing field kernels[0].arena_offset"},
        ManifestEdit{"arena_offset_string", "/kernels/0/arena_offset", "0", false, PF_ERR_MANIFEST,
                     "kernels[0].arena_offset: expected an integer or null, got a string"},
        ManifestEdit{"arena_offset_outside", "/kernels/0/arena_offset", 320, false, PF_ERR_MANIFEST,
                     "kernels[0].arena_offset: 320 is not a multiple of 64 inside the arena (256 "
                     "bytes)"},
        // The library's plan differs from the manifest's; a format 2 manifest with a format 3
        // library.
        ManifestEdit{"arena_offset_differs", "/kernels/1/arena_offset", 0, false, PF_ERR_MISMATCH,
                     "kernel 'add_bias' arena_offset: manifest has 0, library has -1"},
        ManifestEdit{"arena_bytes_differs", "/memory_plan/arena_bytes", 512, false, PF_ERR_MISMATCH,
                     "memory_plan.arena_bytes: manifest has 512, library has 256"},
        ManifestEdit{"format_2_manifest", "/format_version", 2, false, PF_ERR_MISMATCH,
                     "format_version: manifest has 2, library has 5"},
        // Format 2: buffer sources, the graph, embedded_weights.
        ManifestEdit{"missing_source", "/kernels/0/buffers/0/source", nullptr, true,
                     PF_ERR_MANIFEST, "missing field kernels[0].buffers[0].source"},
        ManifestEdit{"input_source_null", "/kernels/0/buffers/0/source", nullptr, false,
                     PF_ERR_MANIFEST, "kernels[0].buffers[0].source: expected a string, got null"},
        ManifestEdit{"input_source_empty", "/kernels/0/buffers/0/source", "", false,
                     PF_ERR_MANIFEST,
                     "kernels[0].buffers[0].source: expected the name of the tensor feeding the "
                     "input, got ''"},
        ManifestEdit{"output_source_string", "/kernels/0/buffers/1/source", "x", false,
                     PF_ERR_MANIFEST,
                     "kernels[0].buffers[1].source: expected null for an output buffer, got 'x'"},
        ManifestEdit{"bias_source_number", "/kernels/1/buffers/1/source", 3, false, PF_ERR_MANIFEST,
                     "kernels[1].buffers[1].source: expected a string or null, got a number"},
        ManifestEdit{"bias_source_absolute", "/kernels/1/buffers/1/source", "/etc/passwd", false,
                     PF_ERR_MANIFEST,
                     "kernels[1].buffers[1].source: expected a relative path inside the bundle (no "
                     "'..'), got '/etc/passwd'"},
        ManifestEdit{"bias_source_dotdot", "/kernels/1/buffers/1/source", "weights/../../b.npy",
                     false, PF_ERR_MANIFEST,
                     "kernels[1].buffers[1].source: expected a relative path inside the bundle"},
        ManifestEdit{"bias_source_empty", "/kernels/1/buffers/1/source", "", false, PF_ERR_MANIFEST,
                     "kernels[1].buffers[1].source: expected a relative path inside the bundle"},
        ManifestEdit{"missing_graph", "/graph", nullptr, true, PF_ERR_MANIFEST,
                     "missing field graph"},
        ManifestEdit{"graph_array", "/graph", json::array(), false, PF_ERR_MANIFEST,
                     "graph: expected an object, got an array"},
        ManifestEdit{"missing_graph_inputs", "/graph/inputs", nullptr, true, PF_ERR_MANIFEST,
                     "missing field graph.inputs"},
        ManifestEdit{"graph_outputs_string", "/graph/outputs", "add_bias", false, PF_ERR_MANIFEST,
                     "graph.outputs: expected an array, got a string"},
        ManifestEdit{"graph_input_string", "/graph/inputs/0", "x", false, PF_ERR_MANIFEST,
                     "graph.inputs[0]: expected an object, got a string"},
        ManifestEdit{"graph_input_missing_name", "/graph/inputs/1/name", nullptr, true,
                     PF_ERR_MANIFEST, "missing field graph.inputs[1].name"},
        ManifestEdit{"graph_input_missing_produced_by", "/graph/inputs/0/produced_by", nullptr,
                     true, PF_ERR_MANIFEST, "missing field graph.inputs[0].produced_by"},
        ManifestEdit{"graph_input_produced_by_number", "/graph/inputs/0/produced_by", 1, false,
                     PF_ERR_MANIFEST,
                     "graph.inputs[0].produced_by: expected a string or null, got a number"},
        ManifestEdit{"graph_input_shape_string", "/graph/inputs/1/shape/0", "2", false,
                     PF_ERR_MANIFEST,
                     "graph.inputs[1].shape[0]: expected an integer, got a string"},
        ManifestEdit{"graph_input_rank_9",
                     "/graph/inputs/1/shape",
                     {1, 1, 1, 1, 1, 1, 1, 1, 2},
                     false,
                     PF_ERR_MANIFEST,
                     "graph.inputs[1].shape: more than 8 entries"},
        ManifestEdit{"graph_input_dtype", "/graph/inputs/0/dtype", "float64", false,
                     PF_ERR_MANIFEST, "graph.inputs[0].dtype: unknown value 'float64'"},
        ManifestEdit{"graph_input_strides_rank",
                     "/graph/inputs/0/strides",
                     {1},
                     false,
                     PF_ERR_MANIFEST,
                     "graph.inputs[0]: 1 strides for rank 4"},
        ManifestEdit{"graph_input_twice", "/graph/inputs/1/name", "x", false, PF_ERR_MANIFEST,
                     "graph.inputs[1].name: 'x' is listed twice"},
        ManifestEdit{"graph_input_is_a_layer", "/graph/inputs/1/name", "scale", false,
                     PF_ERR_MANIFEST, "graph.inputs[1].name: 'scale' is also the name of a layer"},
        ManifestEdit{"graph_output_number", "/graph/outputs/0", 7, false, PF_ERR_MANIFEST,
                     "graph.outputs[0]: expected a string, got a number"},
        ManifestEdit{"graph_output_unknown", "/graph/outputs/1", "nope", false, PF_ERR_MANIFEST,
                     "graph.outputs[1]: 'nope' is no layer"},
        ManifestEdit{"graph_output_twice", "/graph/outputs/1", "add_bias", false, PF_ERR_MANIFEST,
                     "graph.outputs[1]: 'add_bias' is listed twice"},
        ManifestEdit{"missing_embedded_weights", "/embedded_weights", nullptr, true,
                     PF_ERR_MANIFEST, "missing field embedded_weights"},
        ManifestEdit{"embedded_weights_string", "/embedded_weights", "no", false, PF_ERR_MANIFEST,
                     "embedded_weights: expected a boolean, got a string"},
        ManifestEdit{"embedded_weights_with_a_file", "/embedded_weights", true, false,
                     PF_ERR_MANIFEST,
                     "kernels[1].buffers[1].source: a weights file in a bundle whose weights are "
                     "embedded (embedded_weights true), got 'weights/add_bias_bias.npy'"},
        // Format 2 fields that no longer match the library's registry.
        ManifestEdit{"source_differs", "/kernels/1/buffers/0/source", "x", false, PF_ERR_MISMATCH,
                     "kernel 'add_bias' buffer 'input' source: manifest has 'x', library has "
                     "'scale'"},
        ManifestEdit{"weights_file_differs", "/kernels/1/buffers/1/source", nullptr, false,
                     PF_ERR_MISMATCH,
                     "kernel 'add_bias' buffer 'bias' source: manifest has null, library has "
                     "'weights/add_bias_bias.npy'"},
        ManifestEdit{"graph_input_name_differs", "/graph/inputs/1/name", "c2", false,
                     PF_ERR_MISMATCH, "graph input 1: manifest has 'c2', library has 'c'"},
        ManifestEdit{"graph_input_shape_differs", "/graph/inputs/1/shape/0", 3, false,
                     PF_ERR_MISMATCH, "graph input 'c': dtype, layout, shape or strides differ"},
        ManifestEdit{"produced_by_differs", "/graph/inputs/0/produced_by", "ONNX node 'r' (Resize)",
                     false, PF_ERR_MISMATCH,
                     "graph input 'x' produced_by: manifest has 'ONNX node 'r' (Resize)', library "
                     "has null"},
        ManifestEdit{"graph_output_differs", "/graph/outputs/1", "scale", false, PF_ERR_MISMATCH,
                     "graph output 1: manifest has 'scale', library has 'checked'"},
        ManifestEdit{"graph_output_count_differs", "/graph/outputs/1", nullptr, true,
                     PF_ERR_MISMATCH,
                     "graph: manifest has 2 inputs and 1 outputs, library has 2 and 2"},
        // The manifest no longer matches the library's registry.
        ManifestEdit{"shape_differs", "/kernels/0/buffers/0/shape/2", 6, false, PF_ERR_MISMATCH,
                     "kernel 'scale' buffer 'input' shape[2]: manifest has 6, library has 4"},
        ManifestEdit{
            "strides_differ", "/kernels/1/buffers/0/strides/0", 61, false, PF_ERR_MISMATCH,
            "kernel 'add_bias' buffer 'input' strides[0]: manifest has 61, library has 60"},
        ManifestEdit{
            "dtype_differs", "/kernels/1/buffers/1/dtype", "float16", false, PF_ERR_MISMATCH,
            "kernel 'add_bias' buffer 1 ('bias') dtype: manifest has float16, library has float32"},
        ManifestEdit{
            "name_differs", "/kernels/2/buffers/1/name", "out", false, PF_ERR_MISMATCH,
            "kernel 'checked' buffer 1 ('out') name: manifest has out, library has output"},
        ManifestEdit{"function_differs", "/kernels/2/function", "pf_other", false, PF_ERR_MISMATCH,
                     "kernel 'checked' function/op: manifest has pf_other/copy"},
        ManifestEdit{"layer_differs", "/kernels/0/layer", "scale2", false, PF_ERR_MISMATCH,
                     "kernel 0: manifest has layer 'scale2', library has 'scale'"},
        ManifestEdit{"kernel_removed", "/kernels/2", nullptr, true, PF_ERR_MANIFEST,
                     "graph.outputs[1]: 'checked' is no layer"},
        ManifestEdit{"model_differs", "/model", "tiny", false, PF_ERR_MISMATCH,
                     "corrupted or mismatched bundle"},
        ManifestEdit{"target_differs", "/targets/0/target", FAKE_TARGET "-fma", false,
                     PF_ERR_MISMATCH,
                     "model/target: manifest has fake/" FAKE_TARGET "-fma, library has fake/"},
        // Libraries that are missing or not padfold's.
        ManifestEdit{"library_missing", "/targets/0/shared_library", "gone/libpadfold_fake.so",
                     false, PF_ERR_LOAD, "shared library of target " FAKE_TARGET " is missing: "},
        ManifestEdit{"library_not_elf", "/targets/0/shared_library", "manifest.json", false,
                     PF_ERR_LOAD, "cannot load "},
        // A manifest may not make the runtime load a library from outside the bundle.
        ManifestEdit{"library_absolute", "/targets/0/shared_library", FAKE_NOENTRY_LIB, false,
                     PF_ERR_MANIFEST,
                     "targets[0].shared_library: expected a relative path inside the bundle (no "
                     "'..'), got '" FAKE_NOENTRY_LIB "'"},
        ManifestEdit{"library_dotdot", "/targets/0/shared_library", FAKE_TARGET "/../../lib.so",
                     false, PF_ERR_MANIFEST, "expected a relative path inside the bundle"},
        ManifestEdit{"library_empty", "/targets/0/shared_library", "", false, PF_ERR_MANIFEST,
                     "expected a relative path inside the bundle"},
        ManifestEdit{"library_null", "/targets/0/shared_library", nullptr, false, PF_ERR_NO_TARGET,
                     "has no shared library"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(BundleOpen, ManifestThatIsNoRegularFileOrTooLarge) {
  fs::create_directory(dir_ / "manifest.json");
  EXPECT_EQ(OpenAsIs(), PF_ERR_IO);
  EXPECT_HAS(err_, "manifest.json: not a regular file");
  fs::remove(dir_ / "manifest.json");
  fs::create_symlink("/dev/zero", dir_ / "manifest.json");
  EXPECT_EQ(OpenAsIs(), PF_ERR_IO);
  EXPECT_HAS(err_, "manifest.json: not a regular file");
  fs::remove(dir_ / "manifest.json");
  std::ofstream(dir_ / "manifest.json").close();
  fs::resize_file(dir_ / "manifest.json", (64u << 20) + 1);  // sparse: nothing is read
  EXPECT_EQ(OpenAsIs(), PF_ERR_IO);
  EXPECT_HAS(err_, "manifest.json: larger than 64 MiB");
}

TEST_F(BundleOpen, LibraryWithoutTheEntrySymbol) {
  fs::copy_file(FAKE_NOENTRY_LIB, dir_ / "noentry.so");
  manifest_["targets"][0]["shared_library"] = "noentry.so";
  EXPECT_EQ(Open(), PF_ERR_LOAD);
  EXPECT_HAS(err_, "noentry.so does not export padfold_bundle_registry");
}

// A link inside the bundle that leads out of it is refused before anything is loaded: the
// library's constructors would run on dlopen.
TEST_F(BundleOpen, LibraryLinkLeavingTheBundleIsRefused) {
  fs::create_symlink(FAKE_NOENTRY_LIB, dir_ / "escape.so");
  manifest_["targets"][0]["shared_library"] = "escape.so";
  EXPECT_EQ(Open(), PF_ERR_LOAD);
  EXPECT_HAS(err_, "escape.so (a link leaving the bundle is refused");
  fs::create_directory_symlink("/usr/lib", dir_ / "lib");
  manifest_["targets"][0]["shared_library"] = "lib/x86_64-linux-gnu/libm.so.6";
  EXPECT_EQ(Open(), PF_ERR_LOAD);
  EXPECT_HAS(err_, "is not a file inside the bundle");
}

TEST_F(BundleOpen, KernelCountDiffers) {
  manifest_["kernels"].erase(2);
  manifest_["graph"]["outputs"].erase(1);
  EXPECT_EQ(Open(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_, "manifest has 2 kernels, library has 3");
}

TEST_F(BundleOpen, MismatchNamesTheLibrary) {
  manifest_["kernels"][0]["buffers"][0]["shape"][2] = 6;
  EXPECT_EQ(Open(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_, "libpadfold_fake.so does not match ");
  EXPECT_HAS(err_, "manifest.json");
}

TEST_F(BundleOpen, TargetForAnotherArch) {
  const char* other = IsX86() ? "arm-64" : "x86-64";
  manifest_["targets"][0]["arch"] = other;
  manifest_["targets"][0]["target"] = std::string(other) + "-linux";
  EXPECT_EQ(Open(), PF_ERR_NO_TARGET);
  EXPECT_HAS(err_, "no target of bundle '");
  EXPECT_HAS(err_, (std::string("target ") + other + "-linux is for " + other +
                    ", this machine is " + (IsX86() ? "x86-64" : "arm-64"))
                       .c_str());
  EXPECT_HAS(err_,
             "the bundle has no fallback target for this machine: recompile with --target "
             "host,");
}

TEST_F(BundleOpen, TargetForAnotherOs) {
  manifest_["targets"][0]["os"] = "osx";
  EXPECT_EQ(Open(), PF_ERR_NO_TARGET);
  EXPECT_HAS(err_, "is for os osx, this machine runs linux");
}

// A feature this CPU lacks, and the flags the test pretends the CPU has (x86: an AVX2 CPU with
// AVX-512F/CD only).
static const char* kMissingFeature = IsX86() ? "avx512_skylake" : "arm_dot_prod";
static const char* kCpuFlags =
    IsX86() ? "sse41 ssse3 sse4_2 popcnt avx avx2 fma f16c bmi1 bmi2 abm movbe avx512f avx512cd"
            : "neon";
static const char* kLacks = IsX86()
                                ? "needs avx512_skylake, this CPU lacks avx512bw avx512dq avx512vl"
                                : "needs arm_dot_prod, this CPU lacks asimddp";

TEST_F(BundleOpen, TargetNeedsFeatureTheCpuLacks) {
  manifest_["targets"][0]["features"].push_back(kMissingFeature);
  EXPECT_EQ(Open(kCpuFlags), PF_ERR_NO_TARGET);
  EXPECT_HAS(err_, (std::string("target ") + FAKE_TARGET + " " + kLacks).c_str());
  EXPECT_HAS(err_, "no fallback target");
  EXPECT_HAS(err_, IsX86() ? "avx512f avx512cd):" : "neon):");  // the flags assumed are listed
}

TEST_F(BundleOpen, FallsBackToNextTarget) {
  json best = manifest_["targets"][0];
  best["target"] = std::string(FAKE_TARGET) + "-" + kMissingFeature;
  best["features"].push_back(kMissingFeature);
  best["dir"] = "best";
  best["shared_library"] = "best/libpadfold_fake.so";  // never loaded
  manifest_["targets"].insert(manifest_["targets"].begin(), best);
  ASSERT_EQ(Open(kCpuFlags), PF_OK) << err_;
  EXPECT_STREQ(pf_bundle_target(bundle_), FAKE_TARGET);
}

TEST_F(BundleOpen, UnknownCpuFlagOverride) {
  EXPECT_EQ(Open("sse41,avx9000"), PF_ERR_ARGUMENT);
  EXPECT_HAS(err_, "unknown CPU flag 'avx9000'");
}

// The generator leaves tune_<cpu> out of a manifest's features, but one listed changes nothing.
TEST_F(BundleOpen, TuneTokenInFeaturesIsNoRequirement) {
  manifest_["targets"][0]["features"].push_back("tune_znver3");
  ASSERT_EQ(Open(kCpuFlags), PF_OK) << err_;
  EXPECT_STREQ(pf_bundle_target(bundle_), FAKE_TARGET);
}

TEST_F(BundleOpen, UnsupportedFeature) {
  manifest_["targets"][0]["features"] = {"vulkan", "no_runtime", "large_buffers"};
  EXPECT_EQ(Open(), PF_ERR_NO_TARGET);
  EXPECT_HAS(err_, "needs vulkan, which the padfold runtime does not support");
  EXPECT_TRUE(std::string(err_).find("no_runtime") == std::string::npos) << err_;
}

// A GPU target is usable only where its device is: the probe's reason names the target.
TEST_F(BundleOpen, DeviceTargetWithoutItsDeviceIsNoTarget) {
  manifest_["targets"][0]["device_api"] = "metal";
  EXPECT_EQ(Open(kCpuFlags), PF_ERR_NO_TARGET);
  EXPECT_HAS(err_, "target " FAKE_TARGET
                   " needs device API 'metal', which the padfold runtime does not support");
  manifest_["targets"][0]["device_api"] = nullptr;  // a CPU target, as when the field is absent
  EXPECT_EQ(Open(kCpuFlags), PF_OK) << err_;
}

TEST_F(BundleOpen, BadDeviceFieldsNameTheField) {
  manifest_["targets"][0]["device_api"] = 3;
  EXPECT_EQ(Open(kCpuFlags), PF_ERR_MANIFEST);
  EXPECT_HAS(err_, "targets[0].device_api: expected a string or null, got a number");
  manifest_["targets"][0]["device_api"] = nullptr;
  manifest_["targets"][0]["cuda_jit_max_registers"] = 300;
  EXPECT_EQ(Open(kCpuFlags), PF_ERR_MANIFEST);
  EXPECT_HAS(err_, "targets[0].cuda_jit_max_registers: expected 0 to 255, got 300");
}

// Registries linked into the application are checked too.
class BadRegistry : public ScratchBundle {
 protected:
  void SetUp() override {
    ScratchBundle::SetUp();
    reg_ = *fake_static_registry();
  }
  pf_status OpenRegistry(const char* cpu_flags = nullptr) {
    pf_open_options opts = {cpu_flags, 0};
    return pf_registry_open(&reg_, &opts, &bundle_, err_, sizeof err_);
  }
  pf_registry reg_;
};

TEST_F(BadRegistry, FormatVersion) {
  reg_.format_version = 1;
  EXPECT_EQ(OpenRegistry(), PF_ERR_VERSION);
  EXPECT_HAS(err_, "registry format_version 1 is not supported by this runtime (supports 2 to 5)");
}

TEST_F(BadRegistry, MemoryPlan) {
  const pf_registry good = reg_;
  reg_.memory_plan.alignment = 16;
  EXPECT_EQ(OpenRegistry(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_, "malformed registry: memory plan of alignment 16 and 256 bytes");
  reg_ = good;
  reg_.memory_plan.offsets = nullptr;
  EXPECT_EQ(OpenRegistry(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_, "malformed registry: memory plan of alignment 64 and 256 bytes");
  const int64_t unaligned[] = {32, -1, -1};
  reg_ = good;
  reg_.memory_plan.offsets = unaligned;
  EXPECT_EQ(OpenRegistry(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_,
             "malformed registry: kernel 'scale' arena offset 32 is neither -1 nor a multiple of "
             "64 inside the arena (256 bytes)");
}

// A prepare kernel (format 5) is named after a kernel's layer, takes "weights" and writes
// "prepared", which must be that kernel's weights buffer; pf_bundle_prepare_kernel finds it.
TEST_F(BadRegistry, PrepareKernels) {
  std::vector<pf_kernel_desc> kernels(reg_.kernels, reg_.kernels + reg_.num_kernels);
  std::vector<pf_buffer_desc> add_bias(kernels[1].buffers, kernels[1].buffers + 3);
  add_bias[1].name = "weights";  // its bias, as if it were weights
  add_bias[1].role = PF_ROLE_WEIGHTS;
  kernels[1].buffers = add_bias.data();
  pf_buffer_desc buffers[2] = {add_bias[1], add_bias[1]};
  buffers[0].role = PF_ROLE_INPUT;
  buffers[0].source = buffers[1].source = nullptr;
  buffers[1].name = "prepared";
  buffers[1].role = PF_ROLE_OUTPUT;
  const pf_kernel_desc prepare = {
      "add_bias", "pf_fake_prepare", "prepare_weights", kernels[0].argv_fn, 2, buffers, nullptr};
  reg_.kernels = kernels.data();
  reg_.num_prepares = 1;
  reg_.prepares = &prepare;
  const pf_registry good = reg_;
  ASSERT_EQ(OpenRegistry(), PF_OK) << err_;
  EXPECT_EQ(pf_bundle_prepare_kernel(bundle_, &kernels[1]), &prepare);
  EXPECT_EQ(pf_bundle_prepare_kernel(bundle_, &kernels[0]), nullptr);
  pf_bundle_close(bundle_);
  bundle_ = nullptr;

  buffers[1].shape[0] = 4;
  EXPECT_EQ(OpenRegistry(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_,
             "malformed registry: prepare kernel 0 ('add_bias'): \"prepared\" is not its "
             "kernel's weights buffer");
  buffers[1].shape[0] = 3;
  buffers[1].name = "output";
  EXPECT_EQ(OpenRegistry(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_, "buffers not \"weights\" (input) and \"prepared\" (output) of one dtype");
  buffers[1].name = "prepared";
  const pf_kernel_desc stray = {"nowhere", "f",    "prepare_weights", kernels[0].argv_fn, 2,
                                buffers,   nullptr};
  reg_.prepares = &stray;
  EXPECT_EQ(OpenRegistry(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_, "prepare kernel 0 ('nowhere'): no kernel of its layer");
  const pf_kernel_desc twice[2] = {prepare, prepare};
  reg_.prepares = twice;
  reg_.num_prepares = 2;
  EXPECT_EQ(OpenRegistry(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_, "prepare kernel 1 ('add_bias'): a second one for its layer");
  reg_ = good;
  reg_.num_prepares = 4;
  EXPECT_EQ(OpenRegistry(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_, "malformed registry: 4 prepare kernels for 3 kernels");
  // A format 4 registry ends before the prepares: they are not read.
  reg_ = good;
  reg_.format_version = 4;
  reg_.prepares = &stray;
  ASSERT_EQ(OpenRegistry(), PF_OK) << err_;
  EXPECT_EQ(pf_bundle_prepare_kernel(bundle_, &kernels[1]), nullptr);
}

TEST_F(BadRegistry, GraphFields) {
  pf_buffer_desc inputs[2];
  std::memcpy(inputs, reg_.inputs, sizeof inputs);
  const pf_registry good = reg_;
  reg_.num_inputs = -1;
  EXPECT_EQ(OpenRegistry(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_, "malformed registry: negative num_inputs/num_outputs or NULL inputs/outputs");
  reg_ = good;
  reg_.outputs = nullptr;
  EXPECT_EQ(OpenRegistry(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_, "NULL inputs/outputs");
  reg_ = good;
  reg_.inputs = inputs;
  inputs[1].name = "x";
  EXPECT_EQ(OpenRegistry(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_, "malformed registry: model input 1 ('x'): duplicate name");
  inputs[1].name = "c";
  inputs[1].role = PF_ROLE_WEIGHTS;
  EXPECT_EQ(OpenRegistry(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_, "model input 1 ('c'): role is not input");
  inputs[1].role = PF_ROLE_INPUT;
  inputs[1].shape[0] = 0;
  EXPECT_EQ(OpenRegistry(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_, "model input 1 ('c'): extent out of range");
  inputs[1].shape[0] = 2;
  const float values[2] = {1, 2};
  inputs[1].data = values;
  EXPECT_EQ(OpenRegistry(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_, "model input 1 ('c'): embedded data on a buffer that is not weights or bias");
  inputs[1].data = nullptr;
  const char* const outputs[2] = {"add_bias", nullptr};
  reg_.outputs = outputs;
  EXPECT_EQ(OpenRegistry(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_, "malformed registry: model output 1 is NULL");
  reg_.outputs = good.outputs;
  ASSERT_EQ(OpenRegistry(), PF_OK) << err_;
}

TEST_F(BadRegistry, EmbeddedDataOnAnInputBuffer) {
  pf_kernel_desc kernels[3];
  pf_buffer_desc bufs[2];
  std::memcpy(kernels, reg_.kernels, sizeof kernels);
  std::memcpy(bufs, kernels[0].buffers, sizeof bufs);
  const float values[60] = {};
  bufs[0].data = values;
  kernels[0].buffers = bufs;
  reg_.kernels = kernels;
  EXPECT_EQ(OpenRegistry(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_,
             "malformed registry: kernel 'scale' buffer 0: embedded data on a buffer that is not "
             "weights or bias");
}

TEST_F(BadRegistry, NullKernelFunction) {
  pf_kernel_desc kernels[3];
  std::memcpy(kernels, reg_.kernels, sizeof kernels);
  kernels[1].argv_fn = nullptr;
  reg_.kernels = kernels;
  EXPECT_EQ(OpenRegistry(), PF_ERR_MISMATCH);
  EXPECT_HAS(err_, "malformed registry: kernel 1 ('add_bias')");
}

TEST_F(BadRegistry, TargetNeedsFeatureTheCpuLacks) {
  std::string target = std::string(FAKE_TARGET) + "-" + kMissingFeature;
  reg_.target = target.c_str();
  EXPECT_EQ(OpenRegistry(kCpuFlags), PF_ERR_NO_TARGET);
  EXPECT_HAS(err_, (std::string("target ") + target + " " + kLacks).c_str());
}

#if defined(__x86_64__) || defined(__i386__)  // x86 feature names
namespace {

// The CPU flags code for each Halide 21 feature may use: the target-features CodeGen_X86::mattrs()
// gives LLVM (with complete_x86_target's implications and LLVM's own: avx -> sse4.2 -> ssse3), and
// what the target-cpu mcpu_target() picks lets LLVM use unasked (popcnt from corei7-avx; bmi1
// bmi2 lzcnt=abm movbe from haswell; sse4a gfni avx512_vpopcntdq from znver4/5; gfni
// avx512_vpopcntdq avx512_fp16 from sapphirerapids).
const std::string kHaswell = "sse41 ssse3 sse4_2 popcnt avx avx2 fma f16c bmi1 bmi2 abm movbe";
const std::string kSkylake = kHaswell + " avx512f avx512cd avx512bw avx512dq avx512vl";
const std::string kCannonlake = kSkylake + " avx512ifma avx512vbmi";
const std::string kAvx512Zen4Set = " avx512_vbmi2 avx512_vnni avx512_bf16 avx512_bitalg";
const std::string kZen4 = kCannonlake + kAvx512Zen4Set + " sse4a gfni avx512_vpopcntdq";
const std::string kZen5 = kZen4 + " avx_vnni";
const std::string kSapphireRapids = kCannonlake + kAvx512Zen4Set +
                                    " gfni avx512_vpopcntdq avx512_fp16 avx_vnni amx_tile "
                                    "amx_int8 amx_bf16";
const std::string kAvx10_256 =
    kCannonlake + kAvx512Zen4Set + " avx512_vpopcntdq avx512_fp16";  // avx10.1-256, -mcpu=haswell
// The target Halide 21 detects as host on this project's Sapphire Rapids machines.
const std::string kSapphireRapidsHost =
    "x86-64-linux-avx-avx2-avx512-avx512_cannonlake-avx512_sapphirerapids-avx512_skylake-avxvnni-"
    "f16c-fma-sse41";

std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string Unwords(const std::vector<std::string>& words, size_t skip = SIZE_MAX) {
  std::string text;
  for (size_t i = 0; i < words.size(); i++) {
    if (i != skip) text += (text.empty() ? "" : " ") + words[i];
  }
  return text;
}

pf_status Check(const std::string& target, const std::string& flags, char (&err)[PF_ERRLEN]) {
  pf_open_options opts = {flags.c_str(), 0};
  return pf_target_check(target.c_str(), &opts, err, sizeof err);
}

TEST(TargetCheck, Features) {
  char err[PF_ERRLEN];
  EXPECT_EQ(Check("x86-64-linux-avx512_cannonlake-no_runtime", kCannonlake, err), PF_OK) << err;
  EXPECT_EQ(Check("x86-64-linux-avx512_sapphirerapids", kCannonlake, err), PF_ERR_NO_TARGET);
  EXPECT_HAS(err,
             "needs avx512_sapphirerapids, this CPU lacks gfni avx512_vbmi2 avx512_vnni "
             "avx512_bf16 avx512_bitalg avx512_vpopcntdq avx512_fp16 avx_vnni amx_tile amx_int8 "
             "amx_bf16");
  EXPECT_EQ(Check("x86-64-linux-arm_dot_prod", kCannonlake, err), PF_ERR_NO_TARGET);
  EXPECT_HAS(err, "feature arm_dot_prod is for arm, this machine is x86");
  EXPECT_EQ(Check("x86", kCannonlake, err), PF_ERR_ARGUMENT);
  EXPECT_HAS(err, "malformed target string 'x86'");
  EXPECT_EQ(pf_target_check("x86-64-linux-sse41", nullptr, err, sizeof err), PF_OK) << err;
}

// A target with one feature, and every CPU flag code for it may use.
struct FeatureNeeds {
  const char* name;
  const char* target;
  const char* needs;  // how the refusal names the feature
  std::string flags;
};

void PrintTo(const FeatureNeeds& f, std::ostream* os) {
  *os << f.name;
}

class ExactNeeds : public testing::TestWithParam<FeatureNeeds> {};

// Runs on a CPU with exactly these flags; without any one of them it is refused, the message
// naming that flag alone.
TEST_P(ExactNeeds, AllFlagsPassAnyMissingOneIsNamed) {
  const FeatureNeeds& f = GetParam();
  char err[PF_ERRLEN];
  const std::vector<std::string> flags = Words(f.flags);
  EXPECT_EQ(Check(f.target, f.flags, err), PF_OK) << err;
  for (size_t i = 0; i < flags.size(); i++) {
    EXPECT_EQ(Check(f.target, Unwords(flags, i), err), PF_ERR_NO_TARGET) << "without " << flags[i];
    EXPECT_STREQ(
        err, (std::string("target ") + f.target + " " + f.needs + ", this CPU lacks " + flags[i])
                 .c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Halide21, ExactNeeds,
    testing::Values(
        FeatureNeeds{"sse41", "x86-64-linux-sse41", "needs sse41", "sse41 ssse3"},
        FeatureNeeds{"avx", "x86-64-linux-avx", "needs avx", "sse41 ssse3 sse4_2 popcnt avx"},
        FeatureNeeds{"fma", "x86-64-linux-fma", "needs fma", "sse41 ssse3 sse4_2 avx fma"},
        FeatureNeeds{"fma4", "x86-64-linux-fma4", "needs fma4",
                     "sse41 ssse3 sse4_2 avx fma4 sse4a"},
        FeatureNeeds{"avx2", "x86-64-linux-avx2", "needs avx2", kHaswell},
        FeatureNeeds{"avxvnni", "x86-64-linux-avxvnni", "needs avxvnni",
                     "sse41 ssse3 sse4_2 avx avx2 avx_vnni"},
        FeatureNeeds{"avx512", "x86-64-linux-avx512", "needs avx512",
                     kHaswell + " avx512f avx512cd"},
        FeatureNeeds{"avx512_knl", "x86-64-linux-avx512_knl", "needs avx512_knl",
                     kHaswell + " avx512f avx512cd avx512er avx512pf"},
        FeatureNeeds{"avx512_skylake", "x86-64-linux-avx512_skylake", "needs avx512_skylake",
                     kSkylake},
        FeatureNeeds{"avx512_cannonlake", "x86-64-linux-avx512_cannonlake",
                     "needs avx512_cannonlake", kCannonlake},
        FeatureNeeds{"avx512_zen4", "x86-64-linux-avx512_zen4", "needs avx512_zen4", kZen4},
        FeatureNeeds{"avx512_zen5", "x86-64-linux-avx512_zen5", "needs avx512_zen5", kZen5},
        FeatureNeeds{"avx512_sapphirerapids", "x86-64-linux-avx512_sapphirerapids",
                     "needs avx512_sapphirerapids", kSapphireRapids},
        FeatureNeeds{"avx10_1_512", "x86-64-linux-avx10_1-vector_bits_512",
                     "needs avx10_1 (vector_bits_512)", kSapphireRapids},
        FeatureNeeds{"avx10_1_256", "x86-64-linux-avx10_1-vector_bits_256",
                     "needs avx10_1 (vector_bits_256)", kAvx10_256},
        FeatureNeeds{"x86apx", "x86-64-linux-x86apx", "needs x86apx", "apx"},
        FeatureNeeds{"zen3_host", "x86-64-linux-tune_znver3-avx2", "needs avx2", kHaswell}),
    [](const auto& info) { return std::string(info.param.name); });

// tune_<cpu> changes scheduling only: the Halide 21 host target of an AMD Zen 3 needs what its
// features need, and a tuning for a CPU nothing here knows is no requirement either.
TEST(TargetCheck, TuneTokensAreNoRequirement) {
  const std::string zen3 = "x86-64-linux-tune_znver3-avx-avx2-f16c-fma-sse41";
  char err[PF_ERRLEN];
  EXPECT_EQ(Check(zen3, kHaswell, err), PF_OK) << err;
  EXPECT_EQ(Check("x86-64-linux-tune_znver5-sse41-tune_generic", "sse41 ssse3", err), PF_OK) << err;
  EXPECT_EQ(Check("x86-64-linux-tune_someday_cpu", "", err), PF_OK) << err;

  EXPECT_EQ(Check(zen3, "sse41 ssse3", err), PF_ERR_NO_TARGET);
  EXPECT_HAS(err, ("target " + zen3 +
                   " needs avx, this CPU lacks sse4_2 popcnt avx; needs avx2, this CPU lacks "
                   "sse4_2 popcnt avx avx2 fma f16c bmi1 bmi2 abm movbe; needs f16c, this CPU "
                   "lacks sse4_2 avx f16c; needs fma, this CPU lacks sse4_2 avx fma")
                      .c_str());
  EXPECT_EQ(std::string(err).find("needs tune_"), std::string::npos) << err;
  EXPECT_EQ(std::string(err).find("does not support"), std::string::npos) << err;
}

// avx512_sapphirerapids makes Halide pick -mcpu=sapphirerapids over znver4, so the avx512_zen4 it
// implies needs no sse4a; alone, avx512_zen4 gets -mcpu=znver4, whose code may use sse4a.
TEST(TargetCheck, SapphireRapidsCpuReplacesZen4s) {
  char err[PF_ERRLEN];
  EXPECT_EQ(Check("x86-64-linux-avx512_sapphirerapids-avx512_zen4", kSapphireRapids, err), PF_OK)
      << err;
  EXPECT_EQ(Check("x86-64-linux-avx512_zen4", kSapphireRapids, err), PF_ERR_NO_TARGET);
  EXPECT_STREQ(err, "target x86-64-linux-avx512_zen4 needs avx512_zen4, this CPU lacks sse4a");
  EXPECT_EQ(Check("x86-64-linux-avx512_zen4-avx512_zen5", kZen4, err), PF_ERR_NO_TARGET);
  EXPECT_STREQ(err,
               "target x86-64-linux-avx512_zen4-avx512_zen5 needs avx512_zen5, this CPU lacks "
               "avx_vnni");
}

TEST(TargetCheck, SapphireRapidsHostString) {
  char err[PF_ERRLEN];
  EXPECT_EQ(Check(kSapphireRapidsHost, kSapphireRapids, err), PF_OK) << err;
  // One flag only avx512_sapphirerapids needs, and one all of its features need.
  std::vector<std::string> flags = Words(kSapphireRapids);
  const size_t fp16 = std::find(flags.begin(), flags.end(), "avx512_fp16") - flags.begin();
  EXPECT_EQ(Check(kSapphireRapidsHost, Unwords(flags, fp16), err), PF_ERR_NO_TARGET);
  EXPECT_STREQ(err, ("target " + kSapphireRapidsHost +
                     " needs avx512_sapphirerapids, this CPU lacks avx512_fp16")
                        .c_str());
  EXPECT_EQ(Check(kSapphireRapidsHost, Unwords(flags, 1 /* ssse3 */), err), PF_ERR_NO_TARGET);
  for (const char* f : {"avx", "avx2", "avx512", "avx512_cannonlake", "avx512_sapphirerapids",
                        "avx512_skylake", "avxvnni", "f16c", "fma", "sse41"}) {
    EXPECT_HAS(err, (std::string("needs ") + f + ", this CPU lacks ssse3").c_str());
  }
  // The flags of old spellings (padfold's before Halide 21, Linux's sse4_1) are the same flags.
  std::string old = kSapphireRapids;
  for (auto [now, then] : {std::pair<std::string, std::string>{"sse41", "sse4_1"},
                           {"avx512_vnni", "avx512vnni"},
                           {"avx512_bf16", "avx512bf16"}}) {
    old.replace(old.find(now), now.size(), then);
  }
  EXPECT_EQ(Check(kSapphireRapidsHost, old, err), PF_OK) << err;
}

TEST(TargetCheck, Avx10NeedsItsVectorWidth) {
  char err[PF_ERRLEN];
  EXPECT_EQ(Check("x86-64-linux-avx10_1", kSapphireRapids, err), PF_ERR_NO_TARGET);
  EXPECT_HAS(err,
             "needs avx10_1 with vector_bits_256 or vector_bits_512, the target has no "
             "vector_bits_<n>");
  EXPECT_EQ(Check("x86-64-linux-avx10_1-vector_bits_128", kSapphireRapids, err), PF_ERR_NO_TARGET);
  EXPECT_HAS(err, "the target has vector_bits_128");
  // vector_bits_<n> sizes avx10_1 (and sve) only: no requirement of its own.
  EXPECT_EQ(Check("x86-64-linux-sse41-vector_bits_512", "sse41 ssse3", err), PF_OK) << err;
}

TEST(TargetCheck, CodeGenerationOnlyFeaturesAndRefusedOnes) {
  char err[PF_ERRLEN];
  EXPECT_EQ(Check("x86-64-linux-sse41-enable_backtraces-c_plus_plus_name_mangling-no_asserts-"
                  "no_bounds_query-large_buffers-strict_float-profile_by_timer",
                  "sse41 ssse3", err),
            PF_OK)
      << err;
  // GPU features ask nothing of the CPU (the device is probed at open).
  EXPECT_EQ(Check("x86-64-linux-sse41-cuda-cuda_capability_86", "sse41 ssse3", err), PF_OK) << err;
  EXPECT_EQ(Check("x86-64-linux-sse41-opencl-cl_half", "sse41 ssse3", err), PF_OK) << err;
  for (const char* f :
       {"vulkan", "webgpu", "metal", "user_context", "jit", "wasm_simd128", "avx10_2", "armv85a"}) {
    EXPECT_EQ(Check(std::string("x86-64-linux-sse41-") + f, kSapphireRapids, err), PF_ERR_NO_TARGET)
        << f;
    EXPECT_HAS(
        err, (std::string("needs ") + f + ", which the padfold runtime does not support").c_str());
  }
  EXPECT_EQ(Check("x86-64-linux-armv82a", kSapphireRapids, err), PF_ERR_NO_TARGET);
  EXPECT_HAS(err, "feature armv82a is for arm, this machine is x86");
}

#if defined(__linux__)
// Every x86 flag the runtime knows but apx (Linux does not list it), as /proc/cpuinfo names it.
// clang-format off
const char* const kX86Flags[] = {
    "sse4_1", "ssse3", "sse4_2", "popcnt", "avx", "avx2", "fma", "fma4", "f16c", "bmi1", "bmi2",
    "abm", "movbe", "sse4a", "gfni", "avx512f", "avx512cd", "avx512er", "avx512pf", "avx512bw",
    "avx512dq", "avx512vl", "avx512ifma", "avx512vbmi", "avx512_vbmi2", "avx512_vnni",
    "avx512_bf16", "avx512_bitalg", "avx512_vpopcntdq", "avx512_fp16", "avx_vnni", "amx_tile",
    "amx_int8", "amx_bf16"};
// clang-format on

std::set<std::string> ProcCpuinfoFlags() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) == 0 && line.find(':') != std::string::npos) {
      const std::vector<std::string> w = Words(line.substr(line.find(':') + 1));
      return {w.begin(), w.end()};
    }
  }
  return {};
}

std::set<std::string> DetectedFlags() {
  char text[1024];
  pf_host_describe(text, sizeof text);
  std::string flags = std::strchr(text, ':') + 1;
  std::set<std::string> s;
  for (std::string w : Words(flags)) s.insert(w == "sse41" ? "sse4_1" : w);
  return s;
}

// cpuid/xgetbv detection finds what the kernel reports (AMX after asking the kernel for it).
TEST(TargetCheck, DetectionMatchesProcCpuinfo) {
  const std::set<std::string> linux_flags = ProcCpuinfoFlags(), detected = DetectedFlags();
  ASSERT_FALSE(linux_flags.empty());
#if defined(__x86_64__)
  // Linux faults AMX instructions of a process that did not ask for them: detection asked, and
  // reports AMX only where the kernel said yes (it may not, to a process with a small sigaltstack).
  unsigned long perm = 0;
  ASSERT_EQ(syscall(SYS_arch_prctl, 0x1022 /* ARCH_GET_XCOMP_PERM */, &perm), 0);
  const bool amx_granted = perm >> 18 & 1;
  if (detected.count("amx_tile")) {
    EXPECT_TRUE(amx_granted) << std::hex << perm;
  }
  const bool amx_refused =
      !amx_granted && syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18) != 0;
#else
  const bool amx_refused = true;  // AMX is 64-bit only
#endif
  for (const char* f : kX86Flags) {
    if (amx_refused && std::string(f).rfind("amx_", 0) == 0) continue;
    EXPECT_EQ(detected.count(f), linux_flags.count(f)) << f;
  }
}

// The real host target runs here exactly when this CPU has every flag it needs (and Linux lets
// this process use AMX).
TEST(TargetCheck, SapphireRapidsHostStringWithDetectedFlags) {
  char err[PF_ERRLEN];
  const pf_status s = pf_target_check(kSapphireRapidsHost.c_str(), nullptr, err, sizeof err);
  const std::set<std::string> linux_flags = ProcCpuinfoFlags();
  bool runs = true;
  for (std::string f : Words(kSapphireRapids)) {
    runs &= linux_flags.count(f == "sse41" ? "sse4_1" : f) > 0;
  }
#if defined(__x86_64__)
  unsigned long perm = 0;
  runs &= syscall(SYS_arch_prctl, 0x1022 /* ARCH_GET_XCOMP_PERM */, &perm) == 0 && (perm >> 18 & 1);
#endif
  EXPECT_EQ(s, runs ? PF_OK : PF_ERR_NO_TARGET) << err;
  if (!runs) std::printf("[ note     ] not a Sapphire Rapids class CPU: %s\n", err);
}
#endif  // __linux__

}  // namespace
#endif  // x86

TEST(TargetCheck, HostDescription) {
  char text[512];
  size_t n = pf_host_describe(text, sizeof text);
  EXPECT_EQ(n, std::strlen(text));
  EXPECT_HAS(text, (IsX86() ? "x86-64-linux: sse41" : "arm-64-linux: neon"));
}
