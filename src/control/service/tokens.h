// API tokens: what a user sends (edt_<64 hex digits>) and what the database
// keeps of it (its SHA-256, hex), so a copy of the database logs no one in.
#pragma once

#include <string>

namespace edt::control {

// A fresh random token (32 bytes from OpenSSL's generator, hex, "edt_" first).
std::string new_token();
// SHA-256 of a token, in hex.
std::string hash_token(const std::string& token);

}  // namespace edt::control
