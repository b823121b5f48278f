# cmake -DDOCUMENT=openapi.json -DTEXT_OUT=openapi_text.cc -DHEADER_OUT=contract.h -P generate_contract.cmake
#
# Writes TEXT_OUT, a source defining edt::api::openapi_text() as the
# document's text, and HEADER_OUT, the contract as C++ constants:
#   edt::api::fields::<Schema>::<property>   the property's JSON name, and
#     kProperties, all of them (sorted by name)
#   edt::api::limits::<Schema>::minimum, maximum, min_length, max_length,
#     max_properties, key_max_length (x-edt-key-max-length),
#     pattern, values (an enum), and for sizes minimum_bytes, maximum_bytes,
#     default_bytes and units ({suffix, bytes}), and for durations
#     minimum_ms, maximum_ms, default_ms and units ({suffix, ms}), for CPU
#     bounds minimum_millicpus and maximum_millicpus (x-edt-millicpus), and
#     max_depth, max_uri_bytes, max_header_bytes, max_headers_bytes (x-edt-max-depth, ...)
# for every schema under components/schemas. A schema or property whose
# name is not a C++ identifier stops the build.
file(READ ${DOCUMENT} doc)
string(JSON schemas GET "${doc}" components schemas)
string(JSON schema_count LENGTH "${schemas}")

set(delimiter "edt_openapi")
string(FIND "${doc}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${DOCUMENT} holds the raw-string delimiter )${delimiter}\"")
endif()
file(WRITE ${TEXT_OUT}.tmp "// Generated from ${DOCUMENT} by generate_contract.cmake; do not edit.
#include \"edt_api/contract.h\"

namespace edt::api {

std::string_view openapi_text() {
  static constexpr std::string_view kText = R\"${delimiter}(${doc})${delimiter}\";
  return kText;
}

}  // namespace edt::api
")

function(check_identifier what name)
  if(NOT name MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "${DOCUMENT}: ${what} '${name}' is not a C++ identifier")
  endif()
endfunction()

# Appends `name = value` constants for the JSON number at KEY of SCHEMA.
macro(number_constant schema key name)
  string(JSON value ERROR_VARIABLE missing GET "${schema}" ${key})
  if(NOT missing)
    string(APPEND limits "inline constexpr int64_t ${name} = ${value};\n")
  endif()
endmacro()

set(fields "")
set(all_limits "")
math(EXPR last "${schema_count} - 1")
foreach(i RANGE ${last})
  string(JSON schema_name MEMBER "${schemas}" ${i})
  check_identifier("schema" "${schema_name}")
  string(JSON schema GET "${schemas}" ${schema_name})

  string(JSON properties ERROR_VARIABLE missing GET "${schema}" properties)
  if(NOT missing)
    string(APPEND fields "namespace fields::${schema_name} {\n")
    string(JSON property_count LENGTH "${properties}")
    math(EXPR property_last "${property_count} - 1")
    set(names "")
    set(indices "")
    if(property_count GREATER 0)
      foreach(j RANGE ${property_last})
        list(APPEND indices ${j})
      endforeach()
    endif()
    foreach(j IN LISTS indices)
      string(JSON property MEMBER "${properties}" ${j})
      check_identifier("property of ${schema_name}" "${property}")
      if(property STREQUAL "kProperties")
        message(FATAL_ERROR "${DOCUMENT}: a property of ${schema_name} is named kProperties, the generated list's name")
      endif()
      string(APPEND fields "inline constexpr std::string_view ${property} = \"${property}\";\n")
      string(APPEND names "\"${property}\", ")
    endforeach()
    string(APPEND fields "inline constexpr std::array<std::string_view, ${property_count}> kProperties = {${names}};\n")
    string(APPEND fields "}  // namespace fields::${schema_name}\n")
  endif()

  set(limits "")
  number_constant("${schema}" minimum minimum)
  number_constant("${schema}" maximum maximum)
  number_constant("${schema}" minLength min_length)
  number_constant("${schema}" maxLength max_length)
  number_constant("${schema}" maxProperties max_properties)
  number_constant("${schema}" x-edt-key-max-length key_max_length)
  number_constant("${schema}" "x-edt-bytes;minimum" minimum_bytes)
  number_constant("${schema}" "x-edt-bytes;maximum" maximum_bytes)
  number_constant("${schema}" "x-edt-bytes;default" default_bytes)
  number_constant("${schema}" "x-edt-bytes;headroom" headroom_bytes)
  number_constant("${schema}" "x-edt-millicpus;minimum" minimum_millicpus)
  number_constant("${schema}" "x-edt-millicpus;maximum" maximum_millicpus)
  number_constant("${schema}" "x-edt-duration-ms;minimum" minimum_ms)
  number_constant("${schema}" "x-edt-duration-ms;maximum" maximum_ms)
  number_constant("${schema}" "x-edt-duration-ms;default" default_ms)
  number_constant("${schema}" x-edt-max-depth max_depth)
  number_constant("${schema}" x-edt-max-uri-bytes max_uri_bytes)
  number_constant("${schema}" x-edt-max-header-bytes max_header_bytes)
  number_constant("${schema}" x-edt-max-headers-bytes max_headers_bytes)
  string(JSON pattern ERROR_VARIABLE missing GET "${schema}" pattern)
  if(NOT missing)
    string(APPEND limits "inline constexpr std::string_view pattern = R\"(${pattern})\";\n")
  endif()
  string(JSON values ERROR_VARIABLE missing GET "${schema}" enum)
  if(NOT missing)
    string(JSON value_count LENGTH "${values}")
    math(EXPR value_last "${value_count} - 1")
    set(items "")
    foreach(j RANGE ${value_last})
      string(JSON value GET "${values}" ${j})
      string(APPEND items "\"${value}\", ")
    endforeach()
    string(APPEND limits "inline constexpr std::array<std::string_view, ${value_count}> values = {${items}};\n")
  endif()
  foreach(kind IN ITEMS Size Duration)
    string(TOLOWER ${kind} lower)
    string(JSON units ERROR_VARIABLE missing GET "${schema}" x-edt-${lower}-units)
    if(NOT missing)
      string(JSON unit_count LENGTH "${units}")
      math(EXPR unit_last "${unit_count} - 1")
      set(items "")
      foreach(j RANGE ${unit_last})
        string(JSON unit MEMBER "${units}" ${j})
        string(JSON amount GET "${units}" "${unit}")
        string(APPEND items "${kind}Unit{\"${unit}\", ${amount}ull}, ")
      endforeach()
      string(APPEND limits "inline constexpr std::array<${kind}Unit, ${unit_count}> units = {${items}};\n")
    endif()
  endforeach()
  if(limits)
    string(APPEND all_limits "namespace limits::${schema_name} {\n${limits}}  // namespace limits::${schema_name}\n")
  endif()
endforeach()

file(WRITE ${HEADER_OUT}.tmp "// Generated from ${DOCUMENT} by generate_contract.cmake; do not edit.
//
// edtd's API contract as C++: the OpenAPI document's text, each schema's
// field names (fields::<Schema>::<property>, all of them in kProperties) and its limits
// (limits::<Schema>::minimum, maximum, min_length, max_length, pattern,
// values, for sizes minimum_bytes, maximum_bytes, default_bytes, units, and
// for durations minimum_ms, maximum_ms, default_ms, units; max_depth,
// max_uri_bytes, max_header_bytes).
// Renaming a field or changing a limit in the document changes these.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace edt::api {

// The OpenAPI document, as written in api/openapi.json.
std::string_view openapi_text();

// A size suffix (lower case; sizes are read case-insensitively) and its bytes.
struct SizeUnit {
  std::string_view suffix;
  uint64_t bytes;
};

// A duration suffix and its milliseconds ("" is a bare number: seconds).
struct DurationUnit {
  std::string_view suffix;
  uint64_t ms;
};

${fields}
${all_limits}
}  // namespace edt::api
")
# Rewrite only what changed, so dependents rebuild only when the contract did.
file(COPY_FILE ${TEXT_OUT}.tmp ${TEXT_OUT} ONLY_IF_DIFFERENT)
file(COPY_FILE ${HEADER_OUT}.tmp ${HEADER_OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${TEXT_OUT}.tmp ${HEADER_OUT}.tmp)
