// Sizes and durations as people write them: "512M", "1Gi", "64KiB", "30s",
// "500ms", "2m". Used by every flag and API field that takes one.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "edt/status.h"

namespace edt {

// Bytes. Suffixes: none/B, K/KB/KiB/k, M/MB/MiB, G/GB/GiB, T/TB/TiB; all
// binary (1K = 1024), as shm sizes and benchmark flags mean them.
Result<uint64_t> parse_size(std::string_view text);

// A duration. Suffixes: ms, s, m, h; a bare number means seconds.
Result<std::chrono::milliseconds> parse_duration(std::string_view text);

// 1536 -> "1.5 KiB", 67108864 -> "64 MiB".
std::string format_size(uint64_t bytes);

// The wall clock in whole seconds since the epoch, as the API's timestamps are.
int64_t unix_seconds();

}  // namespace edt
