// What a row of the configuration table is made of (config.hpp): the parsers, one per field type,
// instantiated per Options member so a row stays declarative, and ConfigProblems, which
// Options::validate() and every driver's option table (drivers/<name>/<name>_options.cpp) add
// their findings to.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "common/config.hpp"

namespace sparcoll::config {

inline Status bad(std::string reason) { return Status(ErrorCode::invalid_argument, std::move(reason)); }

// Strict decimal: digits only, no sign, no spaces, no suffix, no overflow of `max`.
Status parse_decimal(const std::string& text, std::uint64_t max, const char* kind, std::uint64_t* out);

template <std::size_t N>
std::string join(const std::array<std::string_view, N>& values) {
  std::string out;
  for (std::string_view v : values) {
    if (!out.empty()) out += ", ";
    out += v;
  }
  return out;
}

template <std::size_t N>
bool one_of(const std::array<std::string_view, N>& values, std::string_view text) {
  return std::find(values.begin(), values.end(), text) != values.end();
}

template <std::uint32_t Options::*Field>
Status parse_positive_u32(const std::string& text, Options* o) {
  std::uint64_t v = 0;
  Status st = parse_decimal(text, std::numeric_limits<std::uint32_t>::max(), "positive integer", &v);
  if (!st.ok()) return st;
  if (v == 0) return bad("not a positive integer");
  o->*Field = static_cast<std::uint32_t>(v);
  return Status::Ok();
}

template <std::uint32_t Options::*Field>
Status parse_nonnegative_u32(const std::string& text, Options* o) {
  std::uint64_t v = 0;
  Status st = parse_decimal(text, std::numeric_limits<std::uint32_t>::max(), "non-negative integer", &v);
  if (!st.ok()) return st;
  o->*Field = static_cast<std::uint32_t>(v);
  return Status::Ok();
}

template <int Options::*Field>
Status parse_nonnegative_int(const std::string& text, Options* o) {
  std::uint64_t v = 0;
  Status st = parse_decimal(text, std::numeric_limits<int>::max(), "non-negative integer", &v);
  if (!st.ok()) return st;
  o->*Field = static_cast<int>(v);
  return Status::Ok();
}

template <int Options::*Field>
Status parse_positive_int(const std::string& text, Options* o) {
  std::uint64_t v = 0;
  Status st = parse_decimal(text, std::numeric_limits<int>::max(), "positive integer", &v);
  if (!st.ok()) return st;
  if (v == 0) return bad("not a positive integer");
  o->*Field = static_cast<int>(v);
  return Status::Ok();
}

template <std::string Options::*Field>
Status parse_text(const std::string& text, Options* o) {
  o->*Field = text;
  return Status::Ok();
}

template <std::string Options::*Field, const auto& Allowed>
Status parse_choice(const std::string& text, Options* o) {
  if (!one_of(Allowed, text)) return bad("expected one of " + join(Allowed));
  o->*Field = text;
  return Status::Ok();
}

// The variable of an Options field ("SPARCOLL_LANES" for "lanes"), for validate() messages.
std::string variable_of_field(std::string_view field);

}  // namespace sparcoll::config

namespace sparcoll {

// Collects every problem Options::validate() finds; the message is all of them, joined by "; ".
class ConfigProblems {
 public:
  void add(std::string what) {
    if (!text_.empty()) text_ += "; ";
    text_ += what;
  }
  template <typename T>
  void check_range(const char* field, T value, T lo, T hi) {
    if (value < lo || value > hi) {
      add(std::string(field) + "=" + std::to_string(value) + " (" + config::variable_of_field(field) +
          ") must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    }
  }
  template <std::size_t N>
  void check_choice(const char* field, const std::string& value, const std::array<std::string_view, N>& allowed) {
    if (!config::one_of(allowed, value)) {
      add(std::string(field) + "='" + value + "' (" + config::variable_of_field(field) + ") must be one of " +
          config::join(allowed));
    }
  }
  Status status() const { return text_.empty() ? Status::Ok() : Status(ErrorCode::invalid_argument, text_); }

 private:
  std::string text_;
};

}  // namespace sparcoll
