// padfold's version: CMakeLists.txt's project(VERSION), the one place it is written. padfold
// --version, padfold.__version__ and every bundle's manifest show it.
#pragma once

namespace padfold {

const char* version();

}  // namespace padfold
