#include "api/version.h"

namespace padfold {

const char* version() {
  return PADFOLD_VERSION;
}

}  // namespace padfold
