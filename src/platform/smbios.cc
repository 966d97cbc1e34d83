#include "platform/smbios.h"

#include <cstdint>
#include <vector>

#include "base/strings.h"

namespace gpuhost::platform {
namespace {

void set_once(std::string& field, std::string_view value) {
  if (field.empty()) field = std::string(trim(value));
}

}  // namespace

DmiInfo parse_smbios_table(std::string_view table) {
  DmiInfo dmi;
  std::size_t pos = 0;
  while (pos + 4 <= table.size()) {
    const auto type = static_cast<std::uint8_t>(table[pos]);
    const std::size_t length = static_cast<std::uint8_t>(table[pos + 1]);
    if (length < 4 || pos + length > table.size()) break;
    std::string_view formatted = table.substr(pos, length);

    // The formatted area is followed by NUL-terminated strings and one more NUL; a structure
    // without strings ends in two NULs.
    std::vector<std::string_view> strings;
    std::size_t cursor = pos + length;
    if (cursor < table.size() && table[cursor] == '\0') {
      cursor += 2;
    } else {
      for (;;) {
        std::size_t nul = table.find('\0', cursor);
        if (nul == std::string_view::npos) return dmi;
        if (nul == cursor) {
          cursor = nul + 1;
          break;
        }
        strings.push_back(table.substr(cursor, nul - cursor));
        cursor = nul + 1;
      }
    }

    auto text = [&](std::size_t offset) -> std::string_view {
      if (offset >= formatted.size()) return {};
      std::size_t index = static_cast<std::uint8_t>(formatted[offset]);
      return index >= 1 && index <= strings.size() ? strings[index - 1] : std::string_view();
    };
    switch (type) {
      case 0:
        set_once(dmi.bios_vendor, text(4));
        set_once(dmi.bios_version, text(5));
        break;
      case 1:
        set_once(dmi.sys_vendor, text(4));
        set_once(dmi.product_name, text(5));
        set_once(dmi.product_version, text(6));
        break;
      case 2: set_once(dmi.board_vendor, text(4)); break;
      case 3:
        set_once(dmi.chassis_vendor, text(4));
        set_once(dmi.chassis_asset_tag, text(8));
        break;
      default: break;
    }
    if (type == 127) break;  // end-of-table structure
    pos = cursor;
  }
  return dmi;
}

}  // namespace gpuhost::platform
