// Small specs several tests build.
#pragma once

#include <nlohmann/json.hpp>

namespace padfold::testing {

// dw (k3, SAME) -> pw (16 channels) on an NHWC input of `size` x `size` x 32: a fusable pair.
inline nlohmann::json dw_pw_spec(int size) {
  return {{"model", "f"},
          {"defaults", {{"layout", "NHWC"}}},
          {"inputs", {{{"name", "x"}, {"shape", {1, size, size, 32}}}}},
          {"layers",
           {{{"name", "dw"},
             {"op", "conv2d"},
             {"input", "x"},
             {"depth_multiplier", 1},
             {"kernel", 3},
             {"padding", "same"}},
            {{"name", "pw"}, {"op", "conv2d"}, {"out_channels", 16}, {"kernel", 1}}}}};
}

}  // namespace padfold::testing
