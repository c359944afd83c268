// Code and data sizes of ELF objects and static libraries, as binutils' `size` reports them
// (Berkeley format), for the size report of `padfold compile`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace padfold {

// Sums over the sections that are loaded (SHF_ALLOC): text = code and read-only data, data =
// writable data, bss = zero-initialised data (no bytes in the file).
struct SectionSizes {
  int64_t text = 0, data = 0, bss = 0;
  SectionSizes& operator+=(const SectionSizes& o) {
    text += o.text, data += o.data, bss += o.bss;
    return *this;
  }
};

// One little-endian ELF object (32- or 64-bit). Throws std::runtime_error naming `what` when the
// bytes are not one.
SectionSizes elf_sizes(std::string_view object, const std::string& what);

struct ArchiveMember {
  std::string name;  // as stored, without the trailing '/' of GNU archives
  SectionSizes sizes;
};

// Every ELF member of a static library (`ar`: GNU or BSD names); the symbol tables are skipped.
// Throws std::runtime_error naming the file when it is not an archive of ELF objects.
std::vector<ArchiveMember> archive_sizes(const std::filesystem::path& archive);

}  // namespace padfold
