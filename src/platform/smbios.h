#pragma once
// SMBIOS structure-table parsing, used where DMI strings are not exposed as files (Windows
// GetSystemFirmwareTable('RSMB')). Private to platform/.

#include <string_view>

#include "platform/system_info.h"

namespace gpuhost::platform {

// The DMI strings in a raw SMBIOS structure table (the bytes after the RawSMBIOSData header on
// Windows; /sys/firmware/dmi/tables/DMI on Linux). Takes the first structure of types 0 (BIOS),
// 1 (system), 2 (baseboard) and 3 (chassis); stops at a truncated structure. Pure.
// Format: DMTF DSP0134 (SMBIOS Reference Specification), section 6.1.
[[nodiscard]] DmiInfo parse_smbios_table(std::string_view table);

}  // namespace gpuhost::platform
