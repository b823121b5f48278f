// random_hex: secrets for the console's sessions and servers (terminal
// session ids, Jupyter login codes, session cookies and server tokens):
// `bytes` bytes from OpenSSL's CSPRNG, as 2*bytes lowercase hex digits.
#pragma once

#include <cstddef>
#include <string>

namespace edt::control {

std::string random_hex(size_t bytes);

}  // namespace edt::control
