// What the KV cache keeps keys and values in (--cache-type): F32, or BF16, F16 or Q8 (blocks of
// 32 int8 with an F16 scale, as llama.cpp's Q8_0), rounded once when stored.
#pragma once
#include <string>

namespace pert {

enum class CacheType { F32, BF16, F16, Q8 };
const char* cache_type_name(CacheType type);  // "f32", "bf16", "f16", "q8"
CacheType parse_cache_type(const std::string& name);  // throws pert::Error on an unknown name
double cache_bytes_per_value(CacheType type, int width);  // 4, 2, 2, or 1 + 2·⌈width/32⌉/width

}  // namespace pert
