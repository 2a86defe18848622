// Setting one option by name (Options::set, sparcoll_options_set): the same names and values as
// the SPARCOLL_* variables, parsed by the same rows of the configuration table (config.cpp), so
// a framework that passes options through the C API gets exactly what the environment would.
#include <algorithm>
#include <cctype>

#include "common/config.hpp"

namespace sparcoll {
namespace {

constexpr std::string_view kPrefix = "SPARCOLL_";

// "block_elems" -> "SPARCOLL_BLOCK_ELEMS": how a field name maps onto its variable.
std::string variable_of_key(std::string_view key) {
  if (key.substr(0, kPrefix.size()) == kPrefix) return std::string(key);
  std::string name(kPrefix);
  for (char c : key) name.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  return name;
}

const ConfigVariable* find_row(std::string_view key) {
  const auto& table = config_variables();
  const auto row = std::find_if(table.begin(), table.end(), [&](const ConfigVariable& v) {
    return key == v.name || (v.parse != nullptr && key == v.field);
  });
  return row == table.end() ? nullptr : &*row;
}

Status bad(std::string message) { return Status(ErrorCode::invalid_argument, std::move(message)); }

}  // namespace

Status set_config_value(Options* options, std::string_view key, const std::string& value) {
  const ConfigVariable* row = find_row(key);
  if (row == nullptr) {
    std::string message = "unknown option '" + std::string(key) + "'";
    const std::string suggestion = closest_config_variable(variable_of_key(key));
    const ConfigVariable* near = suggestion.empty() ? nullptr : find_row(suggestion);
    if (near != nullptr && near->parse != nullptr) {
      message += " (did you mean " + std::string(near->field) + "?)";
    }
    return bad(message + "; the names are the Options fields or their SPARCOLL_* variables in docs/config.md");
  }
  if (row->parse == nullptr) {
    return bad(std::string(row->name) + " is not an option of a communicator " + row->field +
               ": set it in the environment");
  }
  Status st = row->parse(value, options);
  if (!st.ok()) return bad(std::string(row->field) + "='" + value + "' (" + row->name + "): " + st.message());
  return Status::Ok();
}

void Options::set(std::string_view key, const std::string& value) {
  throw_if_error(set_config_value(this, key, value));
}

}  // namespace sparcoll
