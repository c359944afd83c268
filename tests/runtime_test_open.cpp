// Opening bundles and registries: the happy paths, target choice, and every way a bundle can be
// broken. Each error test checks the status and that the message names the culprit.
#include <cstring>

#include "runtime_test_util.h"

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
  WriteManifest("{\n  \"format\": \"padfold-bundle\",\n  \"format_version\": 1,\n  oops\n}");
  EXPECT_EQ(OpenAsIs(), PF_ERR_MANIFEST);
  EXPECT_HAS(err_, "manifest.json: invalid JSON at line 4");
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
        ManifestEdit{"version_string", "/format_version", "1", false, PF_ERR_MANIFEST,
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
        ManifestEdit{"wrong_version", "/format_version", 2, false, PF_ERR_VERSION,
                     "format_version 2 is not supported by this runtime (supports 1)"},
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
        ManifestEdit{"kernel_count_differs", "/kernels/2", nullptr, true, PF_ERR_MISMATCH,
                     "manifest has 2 kernels, library has 3"},
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
        ManifestEdit{"no_entry_symbol", "/targets/0/shared_library", FAKE_NOENTRY_LIB, false,
                     PF_ERR_LOAD, FAKE_NOENTRY_LIB " does not export padfold_bundle_registry"},
        ManifestEdit{"library_null", "/targets/0/shared_library", nullptr, false, PF_ERR_NO_TARGET,
                     "has no shared library"}),
    [](const auto& info) { return std::string(info.param.name); });

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

// A feature this CPU lacks, and the flags the test pretends the CPU has.
static const char* kMissingFeature = IsX86() ? "avx512_skylake" : "arm_dot_prod";
static const char* kCpuFlags = IsX86() ? "sse41 avx avx2 fma f16c avx512f avx512cd" : "neon";
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

TEST_F(BundleOpen, UnsupportedFeature) {
  manifest_["targets"][0]["features"] = {"cuda", "no_runtime", "large_buffers"};
  EXPECT_EQ(Open(), PF_ERR_NO_TARGET);
  EXPECT_HAS(err_, "needs cuda, which the padfold runtime does not support");
  EXPECT_TRUE(std::string(err_).find("no_runtime") == std::string::npos) << err_;
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
  reg_.format_version = 2;
  EXPECT_EQ(OpenRegistry(), PF_ERR_VERSION);
  EXPECT_HAS(err_, "registry format_version 2 is not supported by this runtime (supports 1)");
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
TEST(TargetCheck, Features) {
  char err[PF_ERRLEN];
  pf_open_options cnl = {
      "sse41 avx avx2 fma f16c avx512f avx512cd avx512bw avx512dq avx512vl "
      "avx512ifma avx512vbmi",
      0};
  EXPECT_EQ(pf_target_check("x86-64-linux-avx512_cannonlake-no_runtime", &cnl, err, sizeof err),
            PF_OK)
      << err;
  EXPECT_EQ(pf_target_check("x86-64-linux-avx512_sapphirerapids", &cnl, err, sizeof err),
            PF_ERR_NO_TARGET);
  EXPECT_HAS(err, "needs avx512_sapphirerapids, this CPU lacks avx512vnni avx512bf16");
  EXPECT_EQ(pf_target_check("x86-64-linux-arm_dot_prod", &cnl, err, sizeof err), PF_ERR_NO_TARGET);
  EXPECT_HAS(err, "feature arm_dot_prod is for arm, this machine is x86");
  EXPECT_EQ(pf_target_check("x86", &cnl, err, sizeof err), PF_ERR_ARGUMENT);
  EXPECT_HAS(err, "malformed target string 'x86'");
  EXPECT_EQ(pf_target_check("x86-64-linux-sse41", nullptr, err, sizeof err), PF_OK) << err;
}
#endif

TEST(TargetCheck, HostDescription) {
  char text[512];
  size_t n = pf_host_describe(text, sizeof text);
  EXPECT_EQ(n, std::strlen(text));
  EXPECT_HAS(text, (IsX86() ? "x86-64-linux: sse41" : "arm-64-linux: neon"));
}
