// The ELF and static-library readers of the size report (generator/emit/object_sizes.h), on objects
// and archives built here byte by byte; the e2e test compares them with binutils' size.
#include "emit/object_sizes.h"

#include <elf.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using padfold::SectionSizes;

// An ELF object of the given class with these (type, flags, size) sections after the null one.
template <typename Ehdr, typename Shdr>
std::string Elf(unsigned char elf_class, const std::vector<std::array<uint64_t, 3>>& sections) {
  Ehdr h{};
  std::memcpy(h.e_ident, ELFMAG, SELFMAG);
  h.e_ident[EI_CLASS] = elf_class;
  h.e_ident[EI_DATA] = ELFDATA2LSB;
  h.e_ident[EI_VERSION] = EV_CURRENT;
  h.e_type = ET_REL;
  h.e_shoff = sizeof h;
  h.e_shentsize = sizeof(Shdr);
  h.e_shnum = static_cast<uint16_t>(sections.size() + 1);
  std::string bytes(reinterpret_cast<const char*>(&h), sizeof h);
  Shdr null{};
  bytes.append(reinterpret_cast<const char*>(&null), sizeof null);
  for (const auto& [type, flags, size] : sections) {
    Shdr s{};
    s.sh_type = static_cast<decltype(s.sh_type)>(type);
    s.sh_flags = static_cast<decltype(s.sh_flags)>(flags);
    s.sh_size = static_cast<decltype(s.sh_size)>(size);
    bytes.append(reinterpret_cast<const char*>(&s), sizeof s);
  }
  return bytes;
}

// Code 100 + read-only 30, writable 20 + 4, zeroed 8, and 999 bytes not loaded (symbols, notes).
const std::vector<std::array<uint64_t, 3>> kSections = {
    {SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 100}, {SHT_PROGBITS, SHF_ALLOC, 30},
    {SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, 20},      {SHT_INIT_ARRAY, SHF_ALLOC | SHF_WRITE, 4},
    {SHT_NOBITS, SHF_ALLOC | SHF_WRITE, 8},         {SHT_SYMTAB, 0, 999}};

void ExpectSizes(const SectionSizes& s, int64_t text, int64_t data, int64_t bss) {
  EXPECT_EQ(s.text, text);
  EXPECT_EQ(s.data, data);
  EXPECT_EQ(s.bss, bss);
}

TEST(ObjectSizes, Elf64AndElf32) {
  ExpectSizes(padfold::elf_sizes(Elf<Elf64_Ehdr, Elf64_Shdr>(ELFCLASS64, kSections), "a.o"), 130,
              24, 8);
  ExpectSizes(padfold::elf_sizes(Elf<Elf32_Ehdr, Elf32_Shdr>(ELFCLASS32, kSections), "a.o"), 130,
              24, 8);
}

TEST(ObjectSizes, RefusesWhatIsNoElfObject) {
  EXPECT_THROW(padfold::elf_sizes("!<arch>\n", "x.o"), std::runtime_error);
  std::string truncated = Elf<Elf64_Ehdr, Elf64_Shdr>(ELFCLASS64, kSections);
  truncated.resize(truncated.size() - 10);
  try {
    padfold::elf_sizes(truncated, "t.o");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "t.o: truncated ELF object");
  }
  std::string big = Elf<Elf64_Ehdr, Elf64_Shdr>(ELFCLASS64, kSections);
  big[EI_DATA] = ELFDATA2MSB;
  EXPECT_THROW(padfold::elf_sizes(big, "b.o"), std::runtime_error);
}

std::string Member(const std::string& name, const std::string& data) {
  char header[61];
  std::snprintf(header, sizeof header, "%-16s%-12s%-6s%-6s%-8s%-10zu`\n", name.c_str(), "0", "0",
                "0", "644", data.size());
  return std::string(header, 60) + data + (data.size() % 2 ? "\n" : "");
}

// A GNU archive: symbol table, long-name table, a short and a long member name.
TEST(ObjectSizes, ArchiveMembersByName) {
  const std::string obj = Elf<Elf64_Ehdr, Elf64_Shdr>(ELFCLASS64, kSections);
  const std::string obj2 = Elf<Elf32_Ehdr, Elf32_Shdr>(ELFCLASS32, {{SHT_PROGBITS, SHF_ALLOC, 7}});
  const std::string long_name = "pf_24_inverted_residual_blocks_b1_pw.o/\n";
  const std::string path = testing::TempDir() + "object_sizes_test.a";
  std::ofstream(path, std::ios::binary)
      << "!<arch>\n"
      << Member("/", std::string(8, '\0')) << Member("//", long_name) << Member("short.o/", obj)
      << Member("/0", obj2);
  const std::vector<padfold::ArchiveMember> m = padfold::archive_sizes(path);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].name, "short.o");
  ExpectSizes(m[0].sizes, 130, 24, 8);
  EXPECT_EQ(m[1].name, "pf_24_inverted_residual_blocks_b1_pw.o");
  ExpectSizes(m[1].sizes, 7, 0, 0);
  std::ofstream(path, std::ios::binary) << "not an archive";
  EXPECT_THROW(padfold::archive_sizes(path), std::runtime_error);
}

}  // namespace
