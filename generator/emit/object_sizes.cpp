// elf_sizes and archive_sizes: the section headers of ELF objects, read from <elf.h>'s layouts.
#include "emit/object_sizes.h"

#include <elf.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace padfold {

namespace {

// A little-endian unsigned field of N bytes at `at`.
uint64_t le(std::string_view bytes, size_t at, size_t n, const std::string& what) {
  if (at > bytes.size() || n > bytes.size() - at)
    throw std::runtime_error(what + ": truncated ELF object");
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = v << 8 | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// The fields of a section header that matter, for both classes.
template <typename Shdr>
void add_section(std::string_view bytes, size_t at, const std::string& what, SectionSizes& s) {
  const uint64_t type = le(bytes, at + offsetof(Shdr, sh_type), sizeof(Shdr::sh_type), what);
  const uint64_t flags = le(bytes, at + offsetof(Shdr, sh_flags), sizeof(Shdr::sh_flags), what);
  const auto size =
      static_cast<int64_t>(le(bytes, at + offsetof(Shdr, sh_size), sizeof(Shdr::sh_size), what));
  if (!(flags & SHF_ALLOC)) return;
  if (type == SHT_NOBITS)
    s.bss += size;
  else if (flags & SHF_WRITE)
    s.data += size;
  else
    s.text += size;
}

template <typename Ehdr, typename Shdr>
SectionSizes sections(std::string_view bytes, const std::string& what) {
  const uint64_t shoff = le(bytes, offsetof(Ehdr, e_shoff), sizeof(Ehdr::e_shoff), what);
  const uint64_t entsize = le(bytes, offsetof(Ehdr, e_shentsize), sizeof(Ehdr::e_shentsize), what);
  uint64_t count = le(bytes, offsetof(Ehdr, e_shnum), sizeof(Ehdr::e_shnum), what);
  if (shoff == 0) return {};
  if (entsize < sizeof(Shdr)) throw std::runtime_error(what + ": bad ELF section header size");
  if (count == 0)  // more than 0xff00 sections: the count is section 0's sh_size
    count = le(bytes, shoff + offsetof(Shdr, sh_size), sizeof(Shdr::sh_size), what);
  if (shoff > bytes.size() || count > (bytes.size() - shoff) / entsize)
    throw std::runtime_error(what + ": truncated ELF object");  // the section headers must fit
  SectionSizes s;
  for (uint64_t i = 0; i < count; ++i)
    add_section<Shdr>(bytes, static_cast<size_t>(shoff + i * entsize), what, s);
  return s;
}

std::string trimmed(std::string_view field) {
  const size_t end = field.find_last_not_of(' ');
  return std::string(field.substr(0, end == std::string_view::npos ? 0 : end + 1));
}

}  // namespace

SectionSizes elf_sizes(std::string_view object, const std::string& what) {
  if (object.size() < EI_NIDENT || std::memcmp(object.data(), ELFMAG, SELFMAG) != 0)
    throw std::runtime_error(what + ": not an ELF object");
  if (object[EI_DATA] != ELFDATA2LSB)
    throw std::runtime_error(what + ": a big-endian ELF object (not supported)");
  if (object[EI_CLASS] == ELFCLASS64) return sections<Elf64_Ehdr, Elf64_Shdr>(object, what);
  if (object[EI_CLASS] == ELFCLASS32) return sections<Elf32_Ehdr, Elf32_Shdr>(object, what);
  throw std::runtime_error(what + ": unknown ELF class");
}

std::vector<ArchiveMember> archive_sizes(const std::filesystem::path& archive) {
  const std::string what = archive.string();
  std::ifstream f(archive, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  if (!f.good() && !f.eof()) throw std::runtime_error(what + ": cannot read");
  constexpr std::string_view kMagic = "!<arch>\n";
  constexpr size_t kHeader = 60;  // name 16, date 12, uid 6, gid 6, mode 8, size 10, "`\n"
  if (bytes.compare(0, kMagic.size(), kMagic) != 0)
    throw std::runtime_error(what + ": not a static library (no !<arch> header)");
  std::vector<ArchiveMember> members;
  std::string long_names;
  for (size_t at = kMagic.size(); at + kHeader <= bytes.size();) {
    const std::string_view header(bytes.data() + at, kHeader);
    if (header.substr(58, 2) != "`\n") throw std::runtime_error(what + ": corrupt member header");
    std::string name = trimmed(header.substr(0, 16));
    const std::string size_text = trimmed(header.substr(48, 10));
    size_t size = 0;
    for (char c : size_text) {
      if (c < '0' || c > '9') throw std::runtime_error(what + ": corrupt member size");
      size = size * 10 + static_cast<size_t>(c - '0');
    }
    size_t data = at + kHeader;
    if (size > bytes.size() - data) throw std::runtime_error(what + ": truncated member");
    size_t body = size;
    if (name.rfind("#1/", 0) == 0) {  // BSD: the name's length, the name before the data
      const size_t n = std::stoul(name.substr(3));
      if (n > body) throw std::runtime_error(what + ": corrupt BSD member name");
      name = std::string(bytes, data, n);
      name = name.substr(0, name.find('\0'));
      data += n, body -= n;
    }
    const std::string_view content(bytes.data() + data, body);
    if (name == "//") {
      long_names = std::string(content);
    } else if (name != "/" && name != "/SYM64/" && name.rfind("__.SYMDEF", 0) != 0) {
      if (name.size() > 1 && name[0] == '/') {  // GNU long name: its offset in the "//" member
        const size_t off = std::stoul(name.substr(1));
        if (off >= long_names.size()) throw std::runtime_error(what + ": corrupt long name");
        name = long_names.substr(off, long_names.find('\n', off) - off);
      }
      if (!name.empty() && name.back() == '/') name.pop_back();
      members.push_back({name, elf_sizes(content, what + "(" + name + ")")});
    }
    at = data + body + ((data + body) % 2);  // members start at even offsets
  }
  return members;
}

}  // namespace padfold
