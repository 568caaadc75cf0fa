// The plan JSON codec's shared pieces (private to strata_plan): decoding
// helpers that throw DecodeError naming the field's path (converted to a
// Status at DecodePlan's edge), and the run record's codec
// (plan_json_run.cc).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "strata/plan/plan.h"

namespace strata::plan_json {

using Json = nlohmann::ordered_json;

// Decoding helpers: throw DecodeError with a path; converted at the edge.
struct DecodeError {
  std::string msg;
};

inline const Json& Field(const Json& j, const char* key, const std::string& where) {
  if (!j.is_object()) throw DecodeError{where + ": expected an object"};
  auto it = j.find(key);
  if (it == j.end()) throw DecodeError{where + ": missing field '" + key + "'"};
  return *it;
}
inline int64_t Int(const Json& j, const char* key, const std::string& where) {
  const Json& v = Field(j, key, where);
  if (!v.is_number_integer()) throw DecodeError{where + "." + key + ": expected an integer"};
  return v.get<int64_t>();
}
// An int field: one outside int's range is an error, not a wrapped value.
inline int Int32(const Json& j, const char* key, const std::string& where) {
  const int64_t v = Int(j, key, where);
  if (v < -2147483647 || v > 2147483647) throw DecodeError{where + "." + key + ": out of range (at most 32 bits)"};
  return static_cast<int>(v);
}
inline double Num(const Json& j, const char* key, const std::string& where) {
  const Json& v = Field(j, key, where);
  if (!v.is_number()) throw DecodeError{where + "." + key + ": expected a number"};
  return v.get<double>();
}
inline std::string Str(const Json& j, const char* key, const std::string& where) {
  const Json& v = Field(j, key, where);
  if (!v.is_string()) throw DecodeError{where + "." + key + ": expected a string"};
  return v.get<std::string>();
}
inline bool Bool(const Json& j, const char* key, const std::string& where) {
  const Json& v = Field(j, key, where);
  if (!v.is_boolean()) throw DecodeError{where + "." + key + ": expected true or false"};
  return v.get<bool>();
}
// An integer field that must be at least `lo`.
inline int AtLeast(const Json& j, const char* key, const std::string& where, int lo) {
  const int v = Int32(j, key, where);
  if (v < lo) throw DecodeError{where + "." + key + ": must be >= " + std::to_string(lo)};
  return v;
}
inline int64_t AtLeast64(const Json& j, const char* key, const std::string& where, int64_t lo) {
  const int64_t v = Int(j, key, where);
  if (v < lo) throw DecodeError{where + "." + key + ": must be >= " + std::to_string(lo)};
  return v;
}

// The run record as "run": {...} (run_spec.h).
Json EncodeRun(const RunSpec& r);
void DecodeRun(const Json& j, Plan& p);  // reads j["run"] into p.run

}  // namespace strata::plan_json
